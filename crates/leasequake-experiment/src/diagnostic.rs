//! Errors in experiment files, always pointing at file:line:column with the
//! offending line underneath, the way a compiler would.

use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    #[error("{}: cannot read experiment file: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Invalid(Box<Diagnostic>),
}

/// One error at one place in one file.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub path: PathBuf,
    /// 1-based; 0 when the location is unknown.
    pub line: usize,
    pub column: usize,
    pub message: String,
    /// The source line and a caret under the column (empty if unknown).
    pub snippet: String,
}

impl Diagnostic {
    pub fn new(path: &Path, source: &str, line: usize, column: usize, message: impl Into<String>) -> Diagnostic {
        let message = message.into();
        let snippet = render_snippet(source, line, column, &message);
        Diagnostic { path: path.to_path_buf(), line, column, message, snippet }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            // Not at a place in the file (a flag's doing, or a key left out).
            write!(f, "{}: {}", self.path.display(), self.message)?;
        } else {
            write!(f, "{}:{}:{}: {}", self.path.display(), self.line, self.column, self.message)?;
        }
        if !self.snippet.is_empty() {
            write!(f, "\n{}", self.snippet)?;
        }
        Ok(())
    }
}

fn render_snippet(source: &str, line: usize, column: usize, message: &str) -> String {
    let Some(text) = line.checked_sub(1).and_then(|i| source.lines().nth(i)) else {
        return String::new();
    };
    let width = line.to_string().len();
    let pad = " ".repeat(width);
    let caret_pad = " ".repeat(column.saturating_sub(1));
    format!("{pad} |\n{line} | {text}\n{pad} | {caret_pad}^ {}", label(message))
}

/// What the caret says: the message's first clause (the whole message is
/// on the line above; said twice, a long one buries the place). A clause
/// ends at `, expected`, `; ` or `: ` outside brackets and backticks, so
/// that "(duration: 20s)" or "`duration: 2s`" stay whole; a message that
/// starts with the key it is about (`expect.metrics.x: …`) keeps the
/// clause after the key too.
fn label(message: &str) -> &str {
    let (mut depth, mut quoted) = (0usize, false);
    for (i, c) in message.char_indices() {
        match c {
            '`' => quoted = !quoted,
            '(' | '[' | '{' if !quoted => depth += 1,
            ')' | ']' | '}' if !quoted => depth = depth.saturating_sub(1),
            _ => {}
        }
        let rest = &message[i..];
        let key_only = rest.starts_with(": ") && !message[..i].contains(' ');
        if depth == 0 && !quoted && !key_only && [", expected", "; ", ": "].iter().any(|sep| rest.starts_with(sep)) {
            return &message[..i];
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_at_the_column() {
        let d = Diagnostic::new(Path::new("x.yaml"), "a: 1\nrenew: 9s\n", 2, 8, "too long");
        assert_eq!(d.to_string(), "x.yaml:2:8: too long\n  |\n2 | renew: 9s\n  |        ^ too long");
    }

    #[test]
    fn a_clause_is_not_cut_inside_brackets_or_code() {
        assert_eq!(
            label("fault at 20s is not before the trial ends (duration: 20s)"),
            "fault at 20s is not before the trial ends (duration: 20s)"
        );
        assert_eq!(label("pause needs a duration, e.g. `duration: 2s`"), "pause needs a duration, e.g. `duration: 2s`");
        assert_eq!(
            label("trials is a whole number, or {until: 1m}: got x"),
            "trials is a whole number, or {until: 1m}"
        );
        assert_eq!(label("grace is 61s; at most 60s"), "grace is 61s");
        assert_eq!(
            label("expect.metrics.writes.x: this experiment writes no summary-writes.csv: its workers write nothing"),
            "expect.metrics.writes.x: this experiment writes no summary-writes.csv"
        );
    }

    #[test]
    fn the_caret_says_the_first_clause_only() {
        let msg = "unknown field `leese` (did you mean `lease`?), expected one of name, lease";
        let d = Diagnostic::new(Path::new("x.yaml"), "leese: 9s\n", 1, 1, msg);
        assert!(d.to_string().ends_with("^ unknown field `leese` (did you mean `lease`?)"), "{d}");
    }
}
