//! A program under test (`program:`): the command the harness runs instead
//! of the built-in worker, and how it is observed (docs/worker-protocol.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::history::EventKind;

/// Lines read from one program per trial, by default, before the rest are
/// dropped (`program.max_lines`).
pub const MAX_LINES: u64 = 200_000;

/// The placeholders a command or an environment value may use.
pub const PLACEHOLDERS: [&str; 12] = [
    "leasequake",
    "index",
    "workers",
    "lock",
    "address",
    "key",
    "trial_dir",
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

/// One pattern: a line that matches becomes this event, its named capture
/// groups (`holder`, `lease_until`, `token`, `epoch`, `reason`) its detail.
#[derive(Clone, Debug)]
pub struct Pattern {
    pub regex: regex::Regex,
    pub event: EventKind,
}

impl PartialEq for Pattern {
    fn eq(&self, o: &Pattern) -> bool {
        self.regex.as_str() == o.regex.as_str() && self.event == o.event
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
    /// The experiment file's directory, for `{experiment_dir}`.
    pub experiment_dir: String,
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
    fill(s, |name, _| values.get(name).cloned())
}

/// The environment variable that carries placeholder `name`'s value.
pub fn env_name(name: &str) -> String {
    format!("LEASEQUAKE_{}", name.to_uppercase())
}

/// A `shell: true` script with each placeholder replaced by a reference to
/// its environment variable (`env_name`), quoted for where it stands, so
/// that the shell never parses a value: a path with a space, a `;` or a
/// quote in it stays one word. Unquoted, `{lock}` becomes
/// `"${LEASEQUAKE_LOCK}"`; inside the user's double quotes,
/// `${LEASEQUAKE_LOCK}`; inside single quotes, where nothing expands, the
/// quote is closed around `"${LEASEQUAKE_LOCK}"` and reopened.
pub fn expand_for_shell(script: &str, known: impl Fn(&str) -> bool) -> String {
    fill(script, |name, quoting| {
        if !known(name) {
            return None;
        }
        let var = format!("${{{}}}", env_name(name));
        Some(match quoting {
            Quoting::None => format!("\"{var}\""),
            Quoting::Double => var,
            Quoting::Single => format!("'\"{var}\"'"),
        })
    })
}

/// Where a placeholder stands in a shell script.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Quoting {
    None,
    Single,
    Double,
}

/// Replace every `{name}` for which `with` has a value (others stay as
/// written), `{{` and `}}` being literal braces; `with` also learns the
/// shell quoting in force at the placeholder.
fn fill(s: &str, with: impl Fn(&str, Quoting) -> Option<String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut quoting = Quoting::None;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' if s[i..].starts_with("{{") => {
                chars.next();
                out.push('{');
            }
            '}' if s[i..].starts_with("}}") => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let end = s[i + 1..].find(['}', '{']).map(|j| i + 1 + j).filter(|&j| s[j..].starts_with('}'));
                match end.and_then(|j| with(&s[i + 1..j], quoting).map(|v| (j, v))) {
                    Some((j, value)) => {
                        out.push_str(&value);
                        while chars.peek().is_some_and(|(k, _)| *k <= j) {
                            chars.next();
                        }
                    }
                    None => out.push('{'),
                }
            }
            '\\' if quoting != Quoting::Single => {
                out.push(c);
                if let Some((_, next)) = chars.next() {
                    out.push(next);
                }
            }
            '\'' if quoting != Quoting::Double => {
                quoting = if quoting == Quoting::Single { Quoting::None } else { Quoting::Single };
                out.push(c);
            }
            '"' if quoting != Quoting::Single => {
                quoting = if quoting == Quoting::Double { Quoting::None } else { Quoting::Double };
                out.push(c);
            }
            _ => out.push(c),
        }
    }
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
        assert_eq!(
            expand_for_shell("w --lock {lock} -i{index}", known),
            "w --lock \"${LEASEQUAKE_LOCK}\" -i\"${LEASEQUAKE_INDEX}\""
        );
        assert_eq!(expand_for_shell("w \"{lock}\"", known), "w \"${LEASEQUAKE_LOCK}\"");
        assert_eq!(expand_for_shell("w '{lock}'", known), "w ''\"${LEASEQUAKE_LOCK}\"''");
        assert_eq!(
            expand_for_shell("echo \"it's {index}\" '\"' {index}", known),
            "echo \"it's ${LEASEQUAKE_INDEX}\" '\"' \"${LEASEQUAKE_INDEX}\""
        );
        assert_eq!(expand_for_shell("awk '{{print}}' {x}", known), "awk '{print}' {x}");
        assert_eq!(expand_for_shell("echo \\\"{index}", known), "echo \\\"\"${LEASEQUAKE_INDEX}\"");
    }
}
