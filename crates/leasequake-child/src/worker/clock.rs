//! The worker's own clock: the machine's clocks as a skewed worker reads
//! them. A fixed offset (`worker.clock_offset`) and the jumps the harness
//! orders at run time (`skew` faults, read from a file per worker) move its
//! wall clock; a rate (`worker.clock_rate`) makes its wall clock, its timers
//! and its deadlines run fast or slow. The events it reports stay on the
//! machine's true monotonic clock, so the history is not skewed.

use std::path::PathBuf;

use crate::model::clock::{mono_ns, set_wall_offset, set_wall_rate};

pub struct LocalClock {
    rate: f64,
    /// True monotonic time from which the local clock runs at `rate`.
    anchor_ns: i64,
    offset_ns: i64,
    /// The harness's file of this worker's jumps, if it may skew it.
    jumps: Option<PathBuf>,
    jumped_ns: i64,
}

impl LocalClock {
    pub fn new(offset_ns: i64, rate: f64, jumps: Option<PathBuf>) -> LocalClock {
        set_wall_offset(offset_ns);
        if rate != 1.0 {
            set_wall_rate(rate);
        }
        LocalClock { rate, anchor_ns: mono_ns(), offset_ns, jumps, jumped_ns: 0 }
    }

    /// The local monotonic time of true time `real_ns`.
    pub fn local(&self, real_ns: i64) -> i64 {
        if self.rate == 1.0 {
            return real_ns;
        }
        self.anchor_ns + ((real_ns - self.anchor_ns) as f64 * self.rate).round() as i64
    }

    /// The true monotonic time at which the local clock reads `local_ns`.
    pub fn real(&self, local_ns: i64) -> i64 {
        if self.rate == 1.0 || local_ns == i64::MAX {
            return local_ns;
        }
        self.anchor_ns + ((local_ns - self.anchor_ns) as f64 / self.rate).round() as i64
    }

    /// Take in any jump the harness ordered since the last look. The file
    /// is replaced whole (rename), so a read sees an old total or a new one.
    pub fn refresh(&mut self) {
        let Some(path) = &self.jumps else { return };
        let Ok(text) = std::fs::read_to_string(path) else { return };
        if let Ok(total) = text.trim().parse::<i64>()
            && total != self.jumped_ns
        {
            self.jumped_ns = total;
            set_wall_offset(self.offset_ns + total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fast_clock_maps_there_and_back() {
        let c = LocalClock { rate: 1.5, anchor_ns: 1_000, offset_ns: 0, jumps: None, jumped_ns: 0 };
        assert_eq!(c.local(3_000), 4_000, "2 µs true are 3 µs local");
        assert_eq!(c.real(4_000), 3_000);
        assert_eq!(c.real(i64::MAX), i64::MAX, "waiting for ever stays for ever");
        let same = LocalClock { rate: 1.0, ..c };
        assert_eq!((same.local(7), same.real(7)), (7, 7));
    }
}
