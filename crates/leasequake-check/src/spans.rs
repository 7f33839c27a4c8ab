//! The intervals behind the numbers: who believed it led, who was paused,
//! when two believed at once.

use leasequake_model::history::Micros;

/// A time span of one worker.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    pub worker: usize,
    pub start_us: Micros,
    pub end_us: Micros,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Spans {
    /// Believes-leader intervals.
    pub tenures: Vec<Span>,
    /// Paused intervals (delivered SIGSTOP to SIGCONT or death).
    pub pauses: Vec<Span>,
    /// Maximal intervals with two or more believers.
    pub double_leader: Vec<(Micros, Micros)>,
}
