//! The two clocks: `CLOCK_MONOTONIC` orders events across processes (it is
//! system-wide on Linux), `CLOCK_REALTIME` is what the blog's lease files
//! hold. Neither call can fail for these clock ids on Linux.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

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

/// This process's clock rate (f64 bits; 1.0 unless skewed) and the true
/// wall time from which it runs at that rate.
static WALL_RATE_BITS: AtomicU64 = AtomicU64::new(0x3FF0_0000_0000_0000);
static WALL_ANCHOR_NS: AtomicI64 = AtomicI64::new(0);

/// Make this process's wall clock read `offset_ns` off the true time.
pub fn set_wall_offset(offset_ns: i64) {
    WALL_OFFSET_NS.store(offset_ns, Ordering::Relaxed);
}

/// Make this process's wall clock run at `rate` (1.001: a millisecond fast
/// per second) from now on.
pub fn set_wall_rate(rate: f64) {
    WALL_ANCHOR_NS.store(ns(ClockId::CLOCK_REALTIME), Ordering::Relaxed);
    WALL_RATE_BITS.store(rate.to_bits(), Ordering::Relaxed);
}

/// Wall-clock nanoseconds since the Unix epoch, as this process's clock
/// reads them (see `set_wall_offset`, `set_wall_rate`).
pub fn wall_ns() -> i64 {
    let real = ns(ClockId::CLOCK_REALTIME);
    let rate = f64::from_bits(WALL_RATE_BITS.load(Ordering::Relaxed));
    let drift = if rate == 1.0 {
        0
    } else {
        ((real - WALL_ANCHOR_NS.load(Ordering::Relaxed)) as f64 * (rate - 1.0)).round() as i64
    };
    real + drift + WALL_OFFSET_NS.load(Ordering::Relaxed)
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

/// Days since the Unix epoch of a proleptic Gregorian date (Hinnant's
/// days-from-civil).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// An RFC 3339 timestamp (`2026-12-01T05:12:58.25Z`, `…+01:00`; a space for
/// the `T` too) as Unix seconds.
pub fn parse_rfc3339(s: &str) -> Option<f64> {
    let s = s.trim();
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let t = s.get(r)?;
        t.bytes().all(|c| c.is_ascii_digit()).then(|| t.parse().ok()).flatten()
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut frac = 0.0;
    if let Some(f) = rest.strip_prefix('.') {
        let digits = f.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        frac = format!("0.{}", &f[..digits]).parse().ok()?;
        rest = &f[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let o = rest.get(1..)?;
            if o.len() != 5 || o.as_bytes()[2] != b':' {
                return None;
            }
            let (oh, om): (i64, i64) = (o[..2].parse().ok()?, o[3..].parse().ok()?);
            sign * (oh * 3600 + om * 60)
        }
    };
    let days = days_from_civil(i64::from(y), mo, d);
    let secs = days * 86_400 + i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(sec) - offset;
    Some(secs as f64 + frac)
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
    fn rfc3339_timestamps_read_as_unix_seconds() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(parse_rfc3339("2026-12-01T05:12:58.25Z"), Some(1_796_101_978.25));
        assert_eq!(parse_rfc3339("2026-12-01T06:12:58.25+01:00"), Some(1_796_101_978.25));
        assert_eq!(parse_rfc3339("2026-12-01 05:12:58z"), Some(1_796_101_978.0));
        assert_eq!(utc(1_796_101_978), (2026, 12, 1, 5, 12, 58));
        for bad in ["2026-12-01", "2026-13-01T00:00:00Z", "2026-12-01T00:00:00", "2026-12-01T00:00:00.Z", "x"] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

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
