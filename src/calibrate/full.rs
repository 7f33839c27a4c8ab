//! `leasequake calibrate`: every measurement, each beside its shell
//! baseline, printed.

use std::time::Duration;

use super::delays::event_delay;
use super::harness;
use crate::error::Error;
use crate::model::calibration::Delay;
use crate::sayln;

fn show(name: &str, d: &Option<Delay>) {
    match d {
        Some(x) => sayln!(
            "  {name:<34} median {:>9.1} µs   p99 {:>9.1} µs   max {:>9.1} µs   (n {})",
            x.median_us,
            x.p99_us,
            x.max_us,
            x.n
        ),
        None => sayln!("  {name:<34} not measured"),
    }
}

/// How many times tighter than the shell, at the median and the p99.
fn show_ratio(ours: &Option<Delay>, shell: &Option<Delay>) {
    if let (Some(o), Some(s)) = (ours, shell) {
        let ratio = |a: f64, b: f64| if a > 0.0 { format!("{:.0}×", b / a) } else { "∞".into() };
        sayln!(
            "  {:<34} median {:>9}      p99 {:>9}",
            "→ shell / leasequake",
            ratio(o.median_us, s.median_us),
            ratio(o.p99_us, s.p99_us)
        );
    }
}

/// `leasequake calibrate`: print the measurements, on the machine as it is,
/// then (with `load`) again with that many CPU hogs of its own running.
pub fn run(lines: usize, load: Option<Option<usize>>) -> Result<(), Error> {
    let dir = match tempfile::Builder::new().prefix("leasequake-calibrate-").tempdir() {
        Ok(d) => d,
        Err(source) => return Err(Error::Scratch(source)),
    };
    sayln!("Scheduling of the harness's timing threads: {}", crate::realtime::describe());
    let Some(load) = load else { return measure(lines, dir.path()).map(drop) };
    sayln!("\n# As the machine is\n");
    let idle = measure(lines, dir.path())?;
    let hogs = super::load::Hogs::start(load.unwrap_or_else(super::load::default_hogs))
        .map_err(|source| Error::Io { path: "calibrate-hog".into(), source })?;
    sayln!("\n# With {} CPU hogs (processes spinning at ordinary priority, as `yes > /dev/null`)\n", hogs.count());
    let loaded = measure(lines, dir.path())?;
    drop(hogs);
    sayln!("\n# Side by side (harness, µs)\n");
    sayln!("| figure | as the machine is: median / p99 | with CPU hogs: median / p99 |");
    sayln!("|---|---|---|");
    let cell =
        |d: &Option<Delay>| d.as_ref().map_or("—".to_string(), |d| format!("{:.0} / {:.0}", d.median_us, d.p99_us));
    for ((name, a), (_, b)) in idle.iter().zip(&loaded) {
        sayln!("| {name} | {} | {} |", cell(a), cell(b));
    }
    Ok(())
}

/// The harness's own figures, by name, as `measure` printed them.
type Figures = Vec<(String, Option<Delay>)>;

fn measure(lines: usize, dir: &std::path::Path) -> Result<Figures, Error> {
    let mut figures = Figures::new();
    sayln!("Start spread: first timestamp after release, latest − earliest");
    for (n, trials) in [(3usize, 10u32), (30, 10), (300, 3)] {
        let ours = match harness::start_spread(n, trials, dir) {
            Ok(v) => harness::summarize(v),
            Err(e) => {
                sayln!("  {n} workers, barrier: failed: {e}");
                None
            }
        };
        show(&format!("{n} workers, barrier"), &ours);
        figures.push((format!("start spread, {n} workers"), ours.clone()));
        let shell = harness::summarize(harness::shell_start_spread(n, trials));
        show(&format!("{n} processes, shell `&` loop"), &shell);
        show_ratio(&ours, &shell);
    }
    sayln!("Fault error: actual − scheduled (20 trials each)");
    let ours = harness::fault_error(20, dir).unwrap_or_else(|e| {
        sayln!("  harness: failed: {e}");
        Default::default()
    });
    for (name, v) in ours {
        let ours = harness::summarize(v);
        let Ok(signal) = name.parse::<nix::sys::signal::Signal>() else {
            show(&name, &ours);
            figures.push((name, ours));
            continue;
        };
        show(&format!("{name}, harness"), &ours);
        figures.push((format!("{name} error"), ours.clone()));
        let shell = harness::summarize(harness::shell_fault_error(signal, 20));
        show(&format!("{name}, shell `sleep; kill`"), &shell);
        show_ratio(&ours, &shell);
    }
    sayln!("Event delay: program's timestamp → harness has the event ({lines} lines, one per ms)");
    let d = event_delay(lines, Duration::from_millis(1));
    for (name, delay) in [("protocol (fd 3)", &d.protocol), ("log patterns (stdout)", &d.patterns)] {
        match delay {
            Some(x) => sayln!(
                "  {name:<22} median {:>7.1} µs   p99 {:>8.1} µs   max {:>8.1} µs   (n {})",
                x.median_us,
                x.p99_us,
                x.max_us,
                x.n
            ),
            None => sayln!("  {name:<22} not measured (the emitter did not run)"),
        }
        figures.push((format!("event delay, {name}"), delay.clone()));
    }
    sayln!("Network proxy: 16-byte round trips on loopback to an echo server");
    match super::proxy::round_trips(5000) {
        Some((direct, proxied)) => {
            show("direct", &Some(direct.clone()));
            show("through one proxy link", &Some(proxied.clone()));
            sayln!(
                "  {:<34} median {:>9.1} µs   p99 {:>9.1} µs",
                "→ the proxy adds",
                proxied.median_us - direct.median_us,
                proxied.p99_us - direct.p99_us
            );
        }
        None => sayln!("  not measured (no loopback echo server)"),
    }
    match super::proxy::carry(1000) {
        Ok(d) => show("1000 links open, one trip each", &Some(d)),
        Err(e) => sayln!("  1000 links: failed: {e}"),
    }
    Ok(figures)
}
