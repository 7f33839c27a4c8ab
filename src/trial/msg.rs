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
