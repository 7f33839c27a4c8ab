//! `program:`: put any command under test instead of the built-in worker.
//!
//! The command (an argv list, or one string for `/bin/sh -c` with
//! `shell: true`) and its environment may use placeholders that the harness
//! fills per worker. The harness observes the program one of two ways:
//! * `protocol`: JSON lines (docs/worker-protocol.md) written to fd 3
//!   (`$LEASEQUAKE_EVENTS`, i.e. `/dev/fd/3`);
//! * `patterns`: regular expressions over its stdout and stderr lines, each
//!   mapped to an event; the harness timestamps a line when it arrives.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::model::history::Detail;
use crate::model::history::EventKind;
use crate::model::program::{
    ClockWay, DETAIL_FIELDS, MAX_LINES, Observe, PLACEHOLDERS, Pattern, Program, ProgramExpiry, Stamp, env_name,
    placeholders, set_detail_field, shell_placeholder_problem,
};

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPattern {
    pub regex: Spanned<String>,
    pub event: Spanned<String>,
    /// Fixed detail values of the event (placeholders allowed).
    #[serde(default)]
    pub detail: BTreeMap<String, Spanned<serde_json::Value>>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProgram {
    pub command: Spanned<serde_json::Value>,
    #[serde(default)]
    pub shell: bool,
    #[serde(default)]
    pub env: BTreeMap<String, Spanned<String>>,
    pub observe: Option<Observe>,
    pub timestamps: Option<Stamp>,
    #[serde(default)]
    pub patterns: Vec<RawPattern>,
    #[serde(default)]
    pub ready: bool,
    pub max_lines: Option<Spanned<u64>>,
    pub expiry: Option<ProgramExpiry>,
    pub cwd: Option<Spanned<String>>,
    pub clock: Option<ClockWay>,
}

/// (line, column, message) of the first problem.
pub(super) type Problem = (u64, u64, String);

impl RawProgram {
    /// `installed`: the program must be there to run (not so for a run's
    /// record, which is only read).
    pub fn validate(&self, experiment_dir: String, installed: bool) -> Result<Program, Problem> {
        let at = |s: &serde_saphyr::Location, msg: String| (s.line(), s.column(), msg);
        let (command, shell) = match (&self.command.value, self.shell) {
            (serde_json::Value::String(s), true) => (vec![s.clone()], true),
            (serde_json::Value::Array(v), false) if !v.is_empty() && v.iter().all(|x| x.is_string()) => {
                (v.iter().map(|x| x.as_str().unwrap_or_default().to_string()).collect(), false)
            }
            (_, true) => {
                return Err(at(&self.command.referenced, "with shell: true, command is one string".into()));
            }
            _ => {
                return Err(at(
                    &self.command.referenced,
                    "command is a list: the program and its arguments (or one string with shell: true)".into(),
                ));
            }
        };
        let unknown = |s: &str| placeholders(s).into_iter().find(|p| !PLACEHOLDERS.contains(&p.as_str()));
        if let Some(p) = command.iter().find_map(|c| unknown(c)) {
            return Err(at(
                &self.command.referenced,
                format!("unknown placeholder {{{p}}}: expected one of {}", PLACEHOLDERS.join(", ")),
            ));
        }
        let known = |p: &str| PLACEHOLDERS.contains(&p);
        if shell && let Some((name, why)) = shell_placeholder_problem(&command[0], known) {
            return Err(at(
                &self.command.referenced,
                format!(
                    "{{{name}}} {why}: its shell quoting cannot be told, so its value could be read as code; \
                     write \"${}\" there (every placeholder is also in the environment)",
                    env_name(&name)
                ),
            ));
        }
        for v in self.env.values() {
            if let Some(p) = unknown(&v.value) {
                return Err(at(&v.referenced, format!("unknown placeholder {{{p}}}")));
            }
        }
        let observe =
            self.observe.unwrap_or(if self.patterns.is_empty() { Observe::Protocol } else { Observe::Patterns });
        let mut patterns = Vec::new();
        for p in &self.patterns {
            let regex = regex::Regex::new(&p.regex.value)
                .map_err(|e| at(&p.regex.referenced, format!("invalid regex: {}", one_line(&e.to_string()))))?;
            let event = EventKind::from_name(&p.event.value).filter(|k| k.is_worker_event()).ok_or_else(|| {
                at(
                    &p.event.referenced,
                    format!("unknown event kind {:?}: expected one a worker reports, e.g. acquired", p.event.value),
                )
            })?;
            if let Some(name) = regex.capture_names().flatten().find(|n| !DETAIL_FIELDS.contains(n)) {
                return Err(at(
                    &p.regex.referenced,
                    format!("capture group {name:?} means nothing: use one of {}", DETAIL_FIELDS.join(", ")),
                ));
            }
            let mut detail = BTreeMap::new();
            for (name, v) in &p.detail {
                let text = match &v.value {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Number(n) => n.to_string(),
                    _ => return Err(at(&v.referenced, format!("detail.{name}: a number or a string"))),
                };
                if let Some(q) = unknown(&text) {
                    return Err(at(&v.referenced, format!("detail.{name}: unknown placeholder {{{q}}}")));
                }
                // A value with a placeholder is checked once it is filled in.
                let check = if placeholders(&text).is_empty() { text.clone() } else { "1".into() };
                set_detail_field(&mut Detail::default(), name, &check)
                    .map_err(|why| at(&v.referenced, format!("detail.{why}")))?;
                detail.insert(name.clone(), text);
            }
            patterns.push(Pattern { regex, event, detail });
        }
        if self.ready && observe == Observe::Patterns && !patterns.iter().any(|p| p.event == EventKind::Ready) {
            return Err(at(
                &self.command.referenced,
                "ready: true waits for a `ready` event: add a pattern for it, or use observe: protocol".into(),
            ));
        }
        if let Some(m) = &self.max_lines
            && m.value == 0
        {
            return Err(at(&m.referenced, "max_lines must be at least 1".into()));
        }
        if observe == Observe::Patterns && patterns.is_empty() {
            return Err(at(&self.command.referenced, "observe: patterns needs a `patterns:` list".into()));
        }
        let cwd = match &self.cwd {
            None => None,
            Some(c) => {
                if let Some(p) = unknown(&c.value) {
                    return Err(at(&c.referenced, format!("cwd: unknown placeholder {{{p}}}")));
                }
                let dir = crate::model::program::resolve_in(&c.value, &experiment_dir);
                if installed && placeholders(&c.value).is_empty() && !dir.is_dir() {
                    return Err(at(&c.referenced, format!("cwd: {} is not a directory", dir.display())));
                }
                Some(c.value.clone())
            }
        };
        // A relative program path is found from the program's own directory.
        let from = cwd
            .as_deref()
            .filter(|c| placeholders(c).is_empty())
            .map(|c| crate::model::program::resolve_in(c, &experiment_dir));
        if shell && self.clock == Some(ClockWay::Vdso) {
            let msg = "clock: vdso moves the program the harness starts, here sh, not the commands it runs: \
                       drop shell: true (give the command as a list), or use clock: shim";
            return Err(at(&self.command.referenced, msg.into()));
        }
        if installed
            && !shell
            && let Err(why) = runnable(&command[0], self.env.get("PATH").map(|p| p.value.as_str()), from.as_deref())
        {
            return Err(at(&self.command.referenced, why));
        }
        Ok(Program {
            command,
            shell,
            env: self.env.iter().map(|(k, v)| (k.clone(), v.value.clone())).collect(),
            observe,
            timestamps: self.timestamps.unwrap_or(match observe {
                Observe::Protocol => Stamp::Program,
                Observe::Patterns => Stamp::Receipt,
            }),
            patterns,
            ready: self.ready,
            max_lines: self.max_lines.as_ref().map_or(MAX_LINES, |m| m.value),
            expiry: self.expiry.unwrap_or(ProgramExpiry::Exact),
            cwd,
            experiment_dir,
            clock: self.clock.unwrap_or_default(),
        })
    }
}

/// Whether `name` can be executed, searching PATH (the program's own, if
/// its `env:` sets one) as execvp will. The program is exec'd by a
/// trampoline in the child, where a failure could only be exit 127 in a log.
fn runnable(name: &str, path: Option<&str>, cwd: Option<&std::path::Path>) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let ok =
        |p: &std::path::Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    // A placeholder ({leasequake}, {experiment_dir}/…) is only known per worker.
    if name.contains('{') {
        return Ok(());
    }
    if name.contains('/') {
        let full = cwd.map_or_else(|| std::path::PathBuf::from(name), |c| c.join(name));
        return if ok(&full) { Ok(()) } else { Err(format!("{name}: not an executable file")) };
    }
    let path = path.map(str::to_string).or_else(|| std::env::var("PATH").ok()).unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| ok(&dir.join(name))) {
        Ok(())
    } else {
        Err(format!("{name}: no such program in PATH"))
    }
}

fn one_line(s: &str) -> String {
    s.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}
