//! A program under test (`program:`): the command the harness runs instead
//! of the built-in worker, and how it is observed (docs/worker-protocol.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::history::{Detail, EventKind};

/// Lines read from one program per trial, by default, before the rest are
/// dropped (`program.max_lines`).
pub const MAX_LINES: u64 = 200_000;

/// The placeholders a command or an environment value may use.
pub const PLACEHOLDERS: [&str; 16] = [
    "leasequake",
    "index",
    "workers",
    "lock",
    "address",
    "members",
    "sentinels",
    "service_name",
    "key",
    "trial_dir",
    "resource",
    "experiment_dir",
    "events",
    "lease_ms",
    "renew_ms",
    "watch_ms",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Observe {
    Protocol,
    Patterns,
}

/// Whose clock stamps an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stamp {
    /// The program's `t_ns` (CLOCK_MONOTONIC ns) where given, else receipt.
    Program,
    /// The harness's clock when the line arrives.
    Receipt,
}

/// How a program's wall clock is moved, where the experiment moves it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClockWay {
    /// By its executable: in its vDSO if it is static or a Go program
    /// (which read the clock without the C library), else by the shim.
    #[default]
    Auto,
    /// The preloaded shim, for programs that read the clock through the C
    /// library (and what they start).
    Shim,
    /// Written into its vDSO at its exec (x86_64): any program itself,
    /// whatever it is written in, but not what it goes on to exec.
    Vdso,
}

/// How a program judges its lease: what the theory's bound and predictions
/// for it assume.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProgramExpiry {
    /// `lease_until` compared exactly (the default).
    Exact,
    /// Whole units of `expiry_resolution` with a strict `<`, as the blog.
    UnixSeconds,
    /// No expiry: the lock goes with its holder (flock, a session lock).
    HolderDeath,
    /// Both: freed at once when its holder dies (a lock file naming a
    /// pid that is gone), by `lease_until`, exactly, while it lives.
    HolderDeathOrExact,
}

/// The detail fields a pattern may fill, from a capture group of that name
/// or a fixed value.
pub const DETAIL_FIELDS: [&str; 7] = ["holder", "lease_until", "expires_in_ms", "token", "epoch", "reason", "how"];

/// Set detail field `name` from its text: numbers for `holder`, `token`,
/// `epoch`, `expires_in_ms`; `lease_until` in Unix seconds or RFC 3339.
pub fn set_detail_field(detail: &mut Detail, name: &str, text: &str) -> Result<(), String> {
    fn num<T: std::str::FromStr>(name: &str, text: &str) -> Result<T, String> {
        text.trim().parse().map_err(|_| format!("{name}: {text:?} is not a number"))
    }
    match name {
        "holder" => detail.holder = Some(num(name, text)?),
        "token" => detail.token = Some(num(name, text)?),
        "epoch" => detail.epoch = Some(num(name, text)?),
        "expires_in_ms" => detail.expires_in_ms = Some(num::<f64>(name, text)?).filter(|v| v.is_finite()),
        "lease_until" => {
            // Past the year 9999 a number is milliseconds or nanoseconds.
            const LAST_SECOND: f64 = 253_402_300_799.0;
            let v =
                text.trim().parse::<f64>().ok().filter(|v| v.is_finite()).or_else(|| super::clock::parse_rfc3339(text));
            let v = v.ok_or_else(|| format!("lease_until: {text:?} is neither Unix seconds nor an RFC 3339 time"))?;
            if v.abs() > LAST_SECOND {
                return Err(format!("lease_until: {text} is not Unix seconds (milliseconds or nanoseconds?)"));
            }
            detail.lease_until = Some(v);
        }
        "reason" => detail.reason = Some(text.to_string()),
        "how" => detail.how = Some(text.to_string()),
        _ => return Err(format!("{name}: not a detail field (expected one of {})", DETAIL_FIELDS.join(", "))),
    }
    Ok(())
}

/// One pattern: a line that matches becomes this event, its named capture
/// groups (any of `DETAIL_FIELDS`) and its fixed `detail` values (which may
/// hold placeholders) its detail.
#[derive(Clone, Debug)]
pub struct Pattern {
    pub regex: regex::Regex,
    pub event: EventKind,
    pub detail: BTreeMap<String, String>,
}

impl PartialEq for Pattern {
    fn eq(&self, o: &Pattern) -> bool {
        self.regex.as_str() == o.regex.as_str() && self.event == o.event && self.detail == o.detail
    }
}

impl Pattern {
    /// The event a matching `line` becomes (placeholders in fixed values
    /// from `values`); `None` if the line does not match. A capture that
    /// does not parse is left out of the detail.
    pub fn event_of(&self, line: &str, values: &BTreeMap<&str, String>) -> Option<Detail> {
        let caps = self.regex.captures(line)?;
        let mut detail = Detail::default();
        for (name, template) in &self.detail {
            let _ = set_detail_field(&mut detail, name, &expand(template, values));
        }
        for name in self.regex.capture_names().flatten() {
            if let Some(m) = caps.name(name) {
                let _ = set_detail_field(&mut detail, name, m.as_str());
            }
        }
        Some(detail)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// argv; with `shell`, one element: the script for `sh -c`.
    pub command: Vec<String>,
    pub shell: bool,
    pub env: BTreeMap<String, String>,
    pub observe: Observe,
    pub timestamps: Stamp,
    pub patterns: Vec<Pattern>,
    /// Release the barrier only once every program has reported `ready`
    /// (an interpreter's start-up is then not part of the trial).
    pub ready: bool,
    /// Lines read from one program per trial before the rest are dropped.
    pub max_lines: u64,
    /// How it judges its lease (the theory for it follows this).
    pub expiry: ProgramExpiry,
    /// Its working directory (placeholders allowed; relative to the
    /// experiment file's directory), else the harness's.
    pub cwd: Option<String>,
    /// How its wall clock is moved.
    pub clock: ClockWay,
    /// The experiment file's directory, for `{experiment_dir}`.
    pub experiment_dir: String,
}

impl Program {
    /// Is it handed the protected resource (`{resource}`, or in a shell
    /// script its variable)? Then it is taken to write there as leader, and
    /// its writes are counted (writes.csv).
    pub fn writes(&self) -> bool {
        let variable = env_name("resource");
        self.command
            .iter()
            .chain(self.env.values())
            .any(|a| placeholders(a).iter().any(|p| p == "resource") || (self.shell && a.contains(&variable)))
    }
}

/// `dir` relative to the experiment file's directory, unless absolute.
pub fn resolve_in(dir: &str, experiment_dir: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(dir);
    if d.is_absolute() { d.to_path_buf() } else { std::path::Path::new(experiment_dir).join(d) }
}

/// Placeholder names used in `s` (`{name}`; `{{` is a literal brace).
pub fn placeholders(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find('{') {
        if rest[i..].starts_with("{{") {
            rest = &rest[i + 2..];
            continue;
        }
        match rest[i..].find('}') {
            Some(j) => {
                out.push(rest[i + 1..i + j].to_string());
                rest = &rest[i + j + 1..];
            }
            None => break,
        }
    }
    out
}

/// Fill the placeholders of `s` from `values`, in one pass: a value is
/// never scanned for placeholders itself (a path may contain braces).
pub fn expand(s: &str, values: &BTreeMap<&str, String>) -> String {
    fill(s, |name| values.get(name).cloned())
}

/// The environment variable that carries placeholder `name`'s value.
pub fn env_name(name: &str) -> String {
    format!("LEASEQUAKE_{}", name.to_uppercase())
}

/// A `shell: true` script with each placeholder replaced by a reference to
/// its environment variable (`env_name`), quoted for where it stands, so
/// that the shell never parses a value: a path with a space, a `;` or a
/// quote in it stays one word. Unquoted (also inside `$(…)`), `{lock}`
/// becomes `"${LEASEQUAKE_LOCK}"`; inside double quotes, `${LEASEQUAKE_LOCK}`;
/// inside single quotes, where nothing expands, the quote is closed around
/// `"${LEASEQUAKE_LOCK}"` and reopened. Where the quoting cannot be told
/// with confidence (in backticks, in or after a here-document, right after
/// a backslash) the placeholder is an error: `shell_placeholder_problem`
/// finds it before anything runs; here it is left as written.
pub fn expand_for_shell(script: &str, known: impl Fn(&str) -> bool) -> String {
    let mut out = String::with_capacity(script.len());
    let mut last = 0;
    for site in shell_sites(script) {
        out.push_str(&script[last..site.start]);
        last = site.start;
        match &site.kind {
            Site::Literal(c) => {
                out.push(*c);
                last = site.end;
            }
            Site::Placeholder(name, quoting) if known(name) => {
                let var = format!("${{{}}}", env_name(name));
                match quoting {
                    Quoting::Unquoted => out.push_str(&format!("\"{var}\"")),
                    Quoting::Double => out.push_str(&var),
                    Quoting::Single => out.push_str(&format!("'\"{var}\"'")),
                    Quoting::Unsure(_) => continue,
                }
                last = site.end;
            }
            Site::Placeholder(..) => {}
        }
    }
    out.push_str(&script[last..]);
    out
}

/// The first known placeholder of a shell script whose quoting cannot be
/// told, and why: (name, reason).
pub fn shell_placeholder_problem(script: &str, known: impl Fn(&str) -> bool) -> Option<(String, &'static str)> {
    shell_sites(script).into_iter().find_map(|site| match site.kind {
        Site::Placeholder(name, Quoting::Unsure(why)) if known(&name) => Some((name, why)),
        _ => None,
    })
}

/// How a placeholder is quoted where it stands in a shell script.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Quoting {
    Unquoted,
    Single,
    Double,
    /// In backticks, a here-document or right after a backslash.
    Unsure(&'static str),
}

/// A `{name}` placeholder, or a `{{`/`}}` that stands for one brace, at
/// `start..end` of the script.
struct SiteAt {
    start: usize,
    end: usize,
    kind: Site,
}

enum Site {
    Placeholder(String, Quoting),
    Literal(char),
}

/// Where the lexer is: the shell's quoting contexts that matter here.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// Top level, or inside `$(…)` (whose parentheses are counted).
    Plain {
        parens: u32,
    },
    Double,
    Backtick,
}

/// Every placeholder and doubled brace of a POSIX shell script, with its
/// quoting: single and double quotes, backslashes (in double quotes only
/// before `$`, backtick, `"`, `\` and newline), comments, `$(…)` nesting;
/// backticks and here-documents are not followed, and say so.
fn shell_sites(script: &str) -> Vec<SiteAt> {
    let b = script.as_bytes();
    let mut sites = Vec::new();
    let mut stack = vec![Frame::Plain { parens: 0 }];
    let mut heredoc = false;
    let mut escaped_at: Option<usize> = None;
    let mut i = 0;
    while i < b.len() {
        let frame = *stack.last().expect("the top level is never popped");
        let c = b[i];
        // Braces first: they are ours, in every context.
        if c == b'{' && b.get(i + 1) == Some(&b'{') || c == b'}' && b.get(i + 1) == Some(&b'}') {
            sites.push(SiteAt { start: i, end: i + 2, kind: Site::Literal(c as char) });
            i += 2;
            continue;
        }
        if c == b'{'
            && let Some(len) = script[i + 1..].find(['}', '{', ' ', '\n', '"', '\''])
            && b[i + 1 + len] == b'}'
            && len > 0
        {
            let name = script[i + 1..i + 1 + len].to_string();
            let quoting = if heredoc {
                Quoting::Unsure("in or after a here-document")
            } else if escaped_at == Some(i) {
                Quoting::Unsure("right after a backslash")
            } else {
                match frame {
                    Frame::Plain { .. } => Quoting::Unquoted,
                    Frame::Double => Quoting::Double,
                    Frame::Backtick => Quoting::Unsure("inside backticks"),
                }
            };
            sites.push(SiteAt { start: i, end: i + 2 + len, kind: Site::Placeholder(name, quoting) });
            i += 2 + len;
            continue;
        }
        match (frame, c) {
            (Frame::Plain { .. }, b'\'') => {
                // Single quotes: nothing inside is special, placeholders
                // aside.
                let close = script[i + 1..].find('\'').map_or(b.len(), |k| i + 1 + k);
                let mut k = i + 1;
                while k < close {
                    if b[k] == b'{' || b[k] == b'}' {
                        let rest = &script[k..close];
                        if rest.starts_with("{{") || rest.starts_with("}}") {
                            sites.push(SiteAt { start: k, end: k + 2, kind: Site::Literal(b[k] as char) });
                            k += 2;
                            continue;
                        }
                        if b[k] == b'{'
                            && let Some(len) = rest[1..].find(['}', '{', ' ', '\n'])
                            && rest.as_bytes()[1 + len] == b'}'
                            && len > 0
                        {
                            let name = rest[1..1 + len].to_string();
                            let quoting =
                                if heredoc { Quoting::Unsure("in or after a here-document") } else { Quoting::Single };
                            sites.push(SiteAt { start: k, end: k + 2 + len, kind: Site::Placeholder(name, quoting) });
                            k += 2 + len;
                            continue;
                        }
                    }
                    k += 1;
                }
                i = close + 1;
                continue;
            }
            (Frame::Plain { .. }, b'"') | (Frame::Backtick, b'"') => stack.push(Frame::Double),
            (Frame::Double, b'"') => {
                stack.pop();
            }
            (Frame::Plain { .. } | Frame::Backtick, b'\\') => {
                escaped_at = Some(i + 1);
                // An escaped brace may open a placeholder: look at it next.
                i += if b.get(i + 1) == Some(&b'{') { 1 } else { 2 };
                continue;
            }
            (Frame::Double, b'\\') => {
                if matches!(b.get(i + 1), Some(b'$' | b'`' | b'"' | b'\\' | b'\n')) {
                    i += 2;
                    continue;
                }
                escaped_at = Some(i + 1);
            }
            (_, b'$') if b.get(i + 1) == Some(&b'(') => {
                stack.push(Frame::Plain { parens: 0 });
                i += 2;
                continue;
            }
            (Frame::Backtick, b'`') => {
                stack.pop();
            }
            (_, b'`') => stack.push(Frame::Backtick),
            (Frame::Plain { parens }, b'(') => {
                *stack.last_mut().expect("a frame") = Frame::Plain { parens: parens + 1 };
            }
            (Frame::Plain { parens }, b')') if stack.len() > 1 || parens > 0 => {
                if parens > 0 {
                    *stack.last_mut().expect("a frame") = Frame::Plain { parens: parens - 1 };
                } else {
                    stack.pop();
                }
            }
            (Frame::Plain { .. }, b'#')
                if i == 0 || matches!(b[i - 1], b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(') =>
            {
                // A comment runs to the end of the line; quotes in it are text.
                i = script[i..].find('\n').map_or(b.len(), |k| i + k);
                continue;
            }
            (Frame::Plain { .. }, b'<') if b.get(i + 1) == Some(&b'<') => heredoc = true,
            _ => {}
        }
        i += 1;
    }
    sites
}

/// Replace every `{name}` for which `with` has a value (others stay as
/// written), `{{` and `}}` being literal braces.
fn fill(s: &str, with: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        if tail.starts_with('{')
            && let Some(j) = tail[1..].find(['}', '{'])
            && tail.as_bytes()[1 + j] == b'}'
            && let Some(value) = with(&tail[1..1 + j])
        {
            out.push_str(&value);
            rest = &tail[2 + j..];
            continue;
        }
        out.push_str(&tail[..1]);
        rest = &tail[1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_found_and_filled() {
        assert_eq!(placeholders("--lock {lock} -n {index} {{literal}}"), vec!["lock", "index"]);
        let values = BTreeMap::from([("lock", "/t/l".to_string()), ("index", "2".to_string())]);
        assert_eq!(expand("--lock={lock} {index} {{x}}", &values), "--lock=/t/l 2 {x}");
    }

    #[test]
    fn a_value_is_not_scanned_again() {
        let values = BTreeMap::from([("lock", "/t/{index}/l".to_string()), ("index", "2".to_string())]);
        assert_eq!(expand("{lock} {index}", &values), "/t/{index}/l 2");
    }

    #[test]
    fn a_shell_script_gets_variables_quoted_for_where_they_stand() {
        let known = |n: &str| n == "lock" || n == "index";
        let x = |s: &str| expand_for_shell(s, known);
        assert_eq!(x("w --lock {lock} -i{index}"), "w --lock \"${LEASEQUAKE_LOCK}\" -i\"${LEASEQUAKE_INDEX}\"");
        assert_eq!(x("w \"{lock}\""), "w \"${LEASEQUAKE_LOCK}\"");
        assert_eq!(x("w '{lock}'"), "w ''\"${LEASEQUAKE_LOCK}\"''");
        assert_eq!(
            x("echo \"it's {index}\" '\"' {index}"),
            "echo \"it's ${LEASEQUAKE_INDEX}\" '\"' \"${LEASEQUAKE_INDEX}\""
        );
        assert_eq!(x("awk '{{print}}' {x}"), "awk '{print}' {x}");
        // Quotes inside $(…) start afresh; a comment's apostrophe is text.
        assert_eq!(x("echo \"$(basename \"{lock}\")\""), "echo \"$(basename \"${LEASEQUAKE_LOCK}\")\"");
        assert_eq!(x("# don't\nw {lock}"), "# don't\nw \"${LEASEQUAKE_LOCK}\"");
        assert_eq!(x("echo \"a\\\"b\" {lock}"), "echo \"a\\\"b\" \"${LEASEQUAKE_LOCK}\"");
        assert_eq!(
            x("case {index} in 0) w {lock};; esac"),
            "case \"${LEASEQUAKE_INDEX}\" in 0) w \"${LEASEQUAKE_LOCK}\";; esac"
        );
    }

    #[test]
    fn a_placeholder_whose_quoting_cannot_be_told_is_named() {
        let known = |n: &str| n == "lock";
        assert_eq!(shell_placeholder_problem("w `cat {lock}`", known), Some(("lock".into(), "inside backticks")));
        assert_eq!(
            shell_placeholder_problem("cat <<EOF\n{lock}\nEOF", known).map(|p| p.1),
            Some("in or after a here-document")
        );
        assert_eq!(shell_placeholder_problem("w \\{lock}", known).map(|p| p.1), Some("right after a backslash"));
        assert_eq!(shell_placeholder_problem("w {lock} \"{lock}\" '{lock}' $(x {lock})", known), None);
    }
}
