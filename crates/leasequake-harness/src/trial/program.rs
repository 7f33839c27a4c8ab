//! Spawning a program under test and observing it unchanged: JSON lines on
//! fd 3 (the protocol), or regular expressions over its stdout and stderr
//! (log patterns). Either way every line is bounded: a program that floods
//! its output cannot exhaust the harness's memory; past the budget, lines
//! are counted and dropped.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde::Deserialize;

use super::msg::Msg;
use crate::model::clock::mono_ns;
use crate::model::history::{Detail, EventKind};
use crate::model::program::{Observe, Pattern, Program, Stamp, env_name, expand, expand_for_shell};
use crate::model::protocol::WireEvent;

/// Bytes of one line kept (the rest of the line is skipped).
const MAX_LINE: usize = 64 * 1024;

/// What the readers of one worker counted, against its line budget.
#[derive(Debug)]
pub struct Counts {
    pub budget: u64,
    pub lines: AtomicU64,
    pub dropped: AtomicU64,
    /// Protocol lines that did not parse, or pattern lines that matched nothing.
    pub unmatched: AtomicU64,
}

impl Counts {
    pub fn new(budget: u64) -> Counts {
        Counts { budget, lines: AtomicU64::new(0), dropped: AtomicU64::new(0), unmatched: AtomicU64::new(0) }
    }
}

/// A protocol line from a program: `t_ns` is optional (the harness stamps
/// the line on receipt without it), and so is `detail`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgramLine {
    #[serde(default)]
    t_ns: Option<i64>,
    event: EventKind,
    #[serde(default)]
    detail: Detail,
}

/// The command for worker `index`, with its placeholders filled: the
/// trampoline `exe exec-program -- argv…`, so that the spawn itself needs no
/// pre_exec hook and can use posix_spawn (a fork of a harness with
/// thousands of threads is slow: docs/architecture.md, "Measured reasons").
pub fn command(p: &Program, values: &BTreeMap<&str, String>, exe: &std::path::Path) -> Command {
    let mut cmd = exec_program(exe);
    if p.shell {
        // Values reach the shell as environment variables, never as text
        // it parses (set below for every placeholder).
        cmd.args(["/bin/sh", "-c"]).arg(expand_for_shell(&p.command[0], |k| values.contains_key(k)));
    } else {
        cmd.args(p.command.iter().map(|a| expand(a, values)));
    }
    for (k, v) in &p.env {
        cmd.env(k, expand(v, values));
    }
    if let Some(dir) = &p.cwd {
        cmd.current_dir(crate::model::program::resolve_in(&expand(dir, values), &p.experiment_dir));
    }
    for (k, v) in values {
        cmd.env(env_name(k), v);
    }
    if p.observe == Observe::Protocol {
        cmd.env("LEASEQUAKE_EVENTS_FD", "3");
    }
    cmd
}

/// `exe exec-program --`, to which the real command's argv is appended: a
/// child started this way ties itself to the harness before it execs (with
/// `spawn::tie_to_harness`).
pub fn exec_program(exe: &std::path::Path) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args(["exec-program", "--"]);
    cmd
}

/// Wire the program's output: for the protocol, a pipe to us that the
/// trampoline puts on fd 3, stdout/stderr to its log; for patterns, stdout
/// and stderr piped to us (and copied to its log). Returns the read ends to
/// observe, and the protocol pipe's write end, which must be inheritable
/// only while this child is spawned (see `SPAWN_LOCK`).
pub fn wire(p: &Program, cmd: &mut Command, log: &File) -> std::io::Result<(Vec<Source>, Option<OwnedFd>)> {
    match p.observe {
        Observe::Protocol => {
            let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(std::io::Error::from)?;
            cmd.stdout(Stdio::from(log.try_clone()?)).stderr(Stdio::from(log.try_clone()?));
            cmd.env(crate::model::protocol::EXEC_EVENTS_FD_ENV, write.as_raw_fd().to_string());
            Ok((vec![Source::Protocol { read }], Some(write)))
        }
        Observe::Patterns => {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            Ok((Vec::new(), None))
        }
    }
}

pub enum Source {
    /// The protocol pipe's read end.
    Protocol {
        read: OwnedFd,
    },
    Lines(Box<dyn Read + Send>),
    /// The built-in worker's stdout: its event lines.
    Stdout(std::process::ChildStdout),
}

/// Read one line of at most MAX_LINE bytes (the rest skipped); None at EOF.
fn bounded_line(r: &mut impl BufRead) -> Option<String> {
    let mut buf = Vec::new();
    let mut skipping = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok([]) => return if buf.is_empty() && !skipping { None } else { Some(lossy(buf)) },
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        let (line, found) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], i + 1),
            None => (chunk, chunk.len()),
        };
        if !skipping {
            let room = MAX_LINE - buf.len();
            buf.extend_from_slice(&line[..line.len().min(room)]);
            skipping = buf.len() >= MAX_LINE;
        }
        let newline = found > line.len();
        r.consume(found);
        if newline {
            return Some(lossy(buf));
        }
    }
}

fn lossy(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A reader's outbox: lines already buffered go out together, and nothing
/// waits once the reader would block on its pipe. Under a flood the trial
/// loop wakes once per batch, not once per line; at a worker's usual pace
/// every batch is one line, sent at once.
struct Outbox {
    tx: SyncSender<Msg>,
    batch: Vec<Msg>,
}

impl Outbox {
    const MAX: usize = 32;

    fn new(tx: SyncSender<Msg>) -> Outbox {
        Outbox { tx, batch: Vec::new() }
    }

    /// Queue a message; false once the trial stopped listening.
    fn push(&mut self, msg: Msg) -> bool {
        self.batch.push(msg);
        self.batch.len() < Self::MAX || self.flush()
    }

    /// Send what is queued unless `r` holds another whole line already.
    fn flush_unless_buffered<R>(&mut self, r: &BufReader<R>) -> bool {
        r.buffer().contains(&b'\n') || self.flush()
    }

    fn flush(&mut self) -> bool {
        let msg = match self.batch.len() {
            0 => return true,
            1 => self.batch.pop().expect("one"),
            _ => Msg::Batch(std::mem::take(&mut self.batch)),
        };
        self.tx.send(msg).is_ok()
    }
}

/// Count a line against the budget: false once it is spent.
fn admit(counts: &Counts) -> bool {
    if counts.lines.fetch_add(1, Ordering::Relaxed) < counts.budget {
        true
    } else {
        counts.dropped.fetch_add(1, Ordering::Relaxed);
        false
    }
}

/// The loop both readers share: bounded lines, each stamped on arrival and
/// counted against the budget, turned into a message (or none) by `each`,
/// and handed over in batches.
fn read_lines<R: Read>(
    mut r: BufReader<R>,
    counts: &Counts,
    tx: SyncSender<Msg>,
    mut each: impl FnMut(String, i64) -> Option<Msg>,
) {
    let mut out = Outbox::new(tx);
    while out.flush_unless_buffered(&r)
        && let Some(line) = bounded_line(&mut r)
    {
        let now = mono_ns();
        if admit(counts)
            && let Some(msg) = each(line, now)
            && !out.push(msg)
        {
            return;
        }
    }
    out.flush();
}

/// Observe protocol lines from `read`.
pub fn read_protocol(
    worker: usize,
    pid: i32,
    read: OwnedFd,
    stamp: Stamp,
    counts: Arc<Counts>,
    tx: SyncSender<Msg>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(format!("protocol-{worker}")).spawn(move || {
        read_lines(BufReader::new(File::from(read)), &counts, tx, |line, now| {
            match serde_json::from_str::<ProgramLine>(&line) {
                // What only the harness records, said by a program, falls
                // to the arm for lines that are not events.
                Ok(l) if l.event.is_worker_event() => {
                    let t_ns = match (stamp, l.t_ns) {
                        (Stamp::Program, Some(t)) => t,
                        _ => now,
                    };
                    let event = WireEvent { t_ns, event: l.event, detail: l.detail };
                    Some(Msg::Event { worker, pid, event: Box::new(event) })
                }
                Err(_) if line.trim().is_empty() => None,
                _ => {
                    counts.unmatched.fetch_add(1, Ordering::Relaxed);
                    Some(Msg::Garbage { worker, line })
                }
            }
        })
    })
}

/// What turns one worker's lines into events: the patterns, and the
/// worker's placeholder values for their fixed details.
pub struct Matcher {
    pub patterns: Arc<Vec<Pattern>>,
    pub values: BTreeMap<&'static str, String>,
}

/// Observe stdout or stderr lines through the patterns, copying every line
/// to the worker's log.
pub fn read_patterns(
    worker: usize,
    pid: i32,
    source: Box<dyn Read + Send>,
    matcher: Matcher,
    log: Arc<Mutex<File>>,
    counts: Arc<Counts>,
    tx: SyncSender<Msg>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(format!("patterns-{worker}")).spawn(move || {
        read_lines(BufReader::new(source), &counts, tx, |line, now| {
            if let Ok(mut f) = log.lock() {
                let _ = writeln!(f, "{line}");
            }
            let event = match_line(&matcher.patterns, &line, now, &matcher.values);
            if event.is_none() {
                counts.unmatched.fetch_add(1, Ordering::Relaxed);
            }
            event.map(|event| Msg::Event { worker, pid, event: Box::new(event) })
        })
    })
}

/// The first pattern that matches `line`, as an event stamped `t_ns`
/// (fixed detail values filled from this worker's placeholder `values`).
pub fn match_line(patterns: &[Pattern], line: &str, t_ns: i64, values: &BTreeMap<&str, String>) -> Option<WireEvent> {
    patterns.iter().find_map(|p| Some(WireEvent { t_ns, event: p.event, detail: p.event_of(line, values)? }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_and_the_rest_skipped() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\nnext\nlast");
        let mut r = BufReader::with_capacity(1000, &input[..]);
        assert_eq!(bounded_line(&mut r).map(|l| l.len()), Some(MAX_LINE));
        assert_eq!(bounded_line(&mut r).as_deref(), Some("next"));
        assert_eq!(bounded_line(&mut r).as_deref(), Some("last"));
        assert_eq!(bounded_line(&mut r), None);
    }

    #[test]
    fn a_pattern_turns_a_line_into_an_event_with_its_captures() {
        let pattern = |re: &str, event, detail: &[(&str, &str)]| Pattern {
            regex: regex::Regex::new(re).unwrap(),
            event,
            detail: detail.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        let patterns = vec![
            pattern(r"leader until (?P<lease_until>\S+)", EventKind::Acquired, &[("expires_in_ms", "{lease_ms}")]),
            pattern(r"held by (?P<holder>\d+)", EventKind::HeldBy, &[]),
        ];
        let values = BTreeMap::from([("lease_ms", "900".to_string())]);
        let e = match_line(&patterns, "[w1] held by 4242", 7, &values).unwrap();
        assert_eq!((e.event, e.detail.holder, e.t_ns), (EventKind::HeldBy, Some(4242), 7));
        let d = match_line(&patterns, "now leader until 99", 1, &values).unwrap().detail;
        assert_eq!((d.lease_until, d.expires_in_ms), (Some(99.0), Some(900.0)));
        let d = match_line(&patterns, "now leader until 1970-01-01T00:01:40.5Z", 1, &values).unwrap().detail;
        assert_eq!(d.lease_until, Some(100.5));
        // A capture that does not parse is left out, the event kept.
        let d = match_line(&patterns, "now leader until soon", 1, &values).unwrap().detail;
        assert_eq!((d.lease_until, d.expires_in_ms), (None, Some(900.0)));
        assert!(match_line(&patterns, "nothing", 1, &values).is_none());
    }
}
