//! What the per-worker reader and waiter threads tell the trial loop.

use crate::model::protocol::WireEvent;

/// What the per-worker threads tell the trial loop.
#[derive(Debug)]
pub enum Msg {
    Event {
        worker: usize,
        pid: i32,
        /// Boxed: an event's detail is large next to the other messages.
        event: Box<WireEvent>,
    },
    /// A line that is not a protocol event (kept for the warning count).
    Garbage {
        worker: usize,
        line: String,
    },
    Exit {
        worker: usize,
        pid: i32,
        t_ns: i64,
        status: ExitStatus,
    },
    /// What the harness saw on the service itself (`substrate.observe`).
    Observed(Box<super::record::RawEvent>),
    /// Lines that came faster than they were taken, sent together (one
    /// wake-up of the trial loop, not one per line).
    Batch(Vec<Msg>),
}

impl Msg {
    /// The messages inside, batches unpacked.
    pub fn unpack(self) -> Vec<Msg> {
        match self {
            Msg::Batch(v) => v,
            m => vec![m],
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExitStatus {
    Code(i32),
    Signal(String),
}

/// Messages queued between the readers and the trial loop (a message is an
/// exit, a line, or a batch of up to 32 lines: at most about 65,000 lines,
/// 20 MB). A full queue blocks the readers, and so the programs that write
/// faster than the harness takes their lines, instead of growing the
/// harness's memory without bound. Room for 2048 messages: 1000 workers
/// started together tick together, and a burst of one line each must not
/// cost a blocked sender and a wake-up per line.
pub const EVENT_BACKLOG: usize = 2048;
