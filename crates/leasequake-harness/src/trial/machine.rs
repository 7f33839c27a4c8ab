//! The machine's own signs of a stall, read at a trial's barrier and end:
//! how long runnable tasks waited for a CPU (pressure stall information)
//! and how long the hypervisor ran something else (steal). The checker
//! takes the difference and names a trial the machine disturbed.

use crate::model::history::Detail;

/// The counters now, as the fields of a `barrier` or `trial_end` event;
/// each is absent where the kernel does not keep it.
pub fn counters() -> Detail {
    Detail {
        cpu_pressure_us: std::fs::read_to_string("/proc/pressure/cpu").ok().and_then(|s| pressure_some_us(&s)),
        steal_us: std::fs::read_to_string("/proc/stat").ok().and_then(|s| steal_us(&s, clock_ticks())),
        ..Detail::default()
    }
}

/// `some … total=N` of a pressure file, µs.
fn pressure_some_us(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace().find_map(|f| f.strip_prefix("total="))?.parse().ok()
}

/// The steal column (the eighth number) of `/proc/stat`'s `cpu` line,
/// summed over CPUs, in clock ticks: µs.
fn steal_us(text: &str, ticks_per_s: u64) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: u64 = line.split_whitespace().nth(8)?.parse().ok()?;
    Some(ticks * 1_000_000 / ticks_per_s.max(1))
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf reads a constant of the running kernel.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_kernels_formats() {
        let psi =
            "some avg10=9.51 avg60=6.12 avg300=2.07 total=7809147\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(super::pressure_some_us(psi), Some(7_809_147));
        assert_eq!(super::pressure_some_us("full total=3\n"), None);
        let stat = "cpu  7197 0 3419 13402 569 0 175 190 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(super::steal_us(stat, 100), Some(1_900_000));
        assert_eq!(super::steal_us("intr 1 2\n", 100), None);
    }

    #[test]
    fn reads_this_machine() {
        // Every Linux this runs on has /proc/stat; pressure needs PSI.
        assert!(super::counters().steal_us.is_some());
    }
}
