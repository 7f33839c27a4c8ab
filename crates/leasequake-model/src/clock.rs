//! The two clocks: `CLOCK_MONOTONIC` orders events across processes (it is
//! system-wide on Linux), `CLOCK_REALTIME` is what the blog's lease files
//! hold. Neither call can fail for these clock ids on Linux.

use std::sync::atomic::{AtomicI64, Ordering};

use nix::time::{ClockId, clock_gettime};

fn ns(id: ClockId) -> i64 {
    let t = clock_gettime(id).expect("clock_gettime on a standard clock");
    t.tv_sec() * 1_000_000_000 + t.tv_nsec()
}

/// Monotonic nanoseconds (comparable between processes on one machine).
pub fn mono_ns() -> i64 {
    ns(ClockId::CLOCK_MONOTONIC)
}

/// This process's wall-clock offset (ns): zero but in a worker given a
/// skewed clock.
static WALL_OFFSET_NS: AtomicI64 = AtomicI64::new(0);

/// Make this process's wall clock read `offset_ns` off the true time.
pub fn set_wall_offset(offset_ns: i64) {
    WALL_OFFSET_NS.store(offset_ns, Ordering::Relaxed);
}

/// Wall-clock nanoseconds since the Unix epoch, as this process's clock
/// reads them (see `set_wall_offset`).
pub fn wall_ns() -> i64 {
    ns(ClockId::CLOCK_REALTIME) + WALL_OFFSET_NS.load(Ordering::Relaxed)
}

/// UTC civil date and time of a Unix time in seconds: (y, m, d, hh, mm, ss).
/// Howard Hinnant's days-from-civil inverse; a few lines instead of a crate.
pub fn utc(unix_secs: i64) -> (i64, u32, u32, u32, u32, u32) {
    let days = unix_secs.div_euclid(86_400);
    let secs = unix_secs.rem_euclid(86_400) as u32;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, secs / 3600, secs / 60 % 60, secs % 60)
}

/// `20261129T224539Z`: sortable, and safe in a directory name.
pub fn utc_stamp(unix_secs: i64) -> String {
    let (y, mo, d, h, mi, s) = utc(unix_secs);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_time_of_known_instants() {
        assert_eq!(utc(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(utc(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(utc_stamp(1_796_085_939), "20261201T004539Z");
    }

    #[test]
    fn monotonic_clock_moves_forward() {
        let a = mono_ns();
        assert!(mono_ns() >= a);
    }
}
