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

/// Fill the placeholders of `s` from `values`.
pub fn expand(s: &str, values: &BTreeMap<&str, String>) -> String {
    let mut out = s.replace("{{", "\u{0}").replace("}}", "\u{1}");
    for (k, v) in values {
        out = out.replace(&format!("{{{k}}}"), v);
    }
    out.replace('\u{0}', "{").replace('\u{1}', "}")
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
}
