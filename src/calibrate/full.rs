//! `leasequake calibrate`: every measurement, each beside its shell
//! baseline, printed.

use std::time::Duration;

use super::delays::event_delay;
use super::harness;
use crate::error::Error;
use crate::model::calibration::{Delay, FigureRow};
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
/// Returns every figure, the shell baselines' too, as `--csv` writes them.
pub fn run(lines: usize, load: Option<Option<usize>>) -> Result<Vec<FigureRow>, Error> {
    let dir = match tempfile::Builder::new().prefix("leasequake-calibrate-").tempdir() {
        Ok(d) => d,
        Err(source) => return Err(Error::Scratch(source)),
    };
    sayln!("Scheduling of the harness's timing threads: {}", crate::realtime::describe());
    let Some(load) = load else { return measure(lines, dir.path(), "idle") };
    sayln!("\n# As the machine is\n");
    let idle = measure(lines, dir.path(), "idle")?;
    let hogs = super::load::Hogs::start(load.unwrap_or_else(super::load::default_hogs))
        .map_err(|source| Error::Io { path: "calibrate-hog".into(), source })?;
    sayln!("\n# With {} CPU hogs (processes spinning at ordinary priority, as `yes > /dev/null`)\n", hogs.count());
    let loaded = measure(lines, dir.path(), &format!("{} hogs", hogs.count()))?;
    drop(hogs);
    sayln!("\n# Side by side (harness, µs)\n");
    sayln!("| figure | as the machine is: median / p99 | with CPU hogs: median / p99 |");
    sayln!("|---|---|---|");
    let cell = |r: &FigureRow| match (r.median_us, r.p99_us) {
        (Some(m), Some(p)) => format!("{m:.0} / {p:.0}"),
        _ => "—".to_string(),
    };
    // The harness's start spreads, signal errors and event delays; the
    // proxy's round trips are printed above.
    let compared = |r: &&FigureRow| r.by == HARNESS && !r.figure.starts_with("round trip");
    for (a, b) in idle.iter().filter(compared).zip(loaded.iter().filter(compared)) {
        sayln!("| {} | {} | {} |", a.figure, cell(a), cell(b));
    }
    Ok(idle.into_iter().chain(loaded).collect())
}

const HARNESS: &str = "leasequake";
const SHELL: &str = "shell";

/// The figures of one measurement, in the order printed.
struct Figures {
    load: String,
    scheduling: &'static str,
    rows: Vec<FigureRow>,
}

impl Figures {
    fn push(&mut self, figure: &str, by: &str, d: &Option<Delay>) {
        self.rows.push(FigureRow {
            load: self.load.clone(),
            scheduling: self.scheduling.into(),
            figure: figure.into(),
            by: by.into(),
            n: d.as_ref().map(|d| d.n),
            median_us: d.as_ref().map(|d| d.median_us),
            p99_us: d.as_ref().map(|d| d.p99_us),
            max_us: d.as_ref().map(|d| d.max_us),
        });
    }
}

fn measure(lines: usize, dir: &std::path::Path, load: &str) -> Result<Vec<FigureRow>, Error> {
    let scheduling = if crate::realtime::available().is_ok() { "real-time" } else { "ordinary" };
    let mut figures = Figures { load: load.into(), scheduling, rows: Vec::new() };
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
        let figure = format!("start spread, {n} workers");
        figures.push(&figure, HARNESS, &ours);
        let shell = harness::summarize(harness::shell_start_spread(n, trials));
        show(&format!("{n} processes, shell `&` loop"), &shell);
        figures.push(&figure, SHELL, &shell);
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
            figures.push(&name, HARNESS, &ours);
            continue;
        };
        show(&format!("{name}, harness"), &ours);
        let figure = format!("{name} error");
        figures.push(&figure, HARNESS, &ours);
        let shell = harness::summarize(harness::shell_fault_error(signal, 20));
        show(&format!("{name}, shell `sleep; kill`"), &shell);
        figures.push(&figure, SHELL, &shell);
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
        figures.push(&format!("event delay, {name}"), HARNESS, delay);
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
            figures.push("round trip, loopback", HARNESS, &Some(direct));
            figures.push("round trip, through one proxy link", HARNESS, &Some(proxied));
        }
        None => sayln!("  not measured (no loopback echo server)"),
    }
    match super::proxy::carry(1000) {
        Ok(d) => {
            show("1000 links open, one trip each", &Some(d.clone()));
            figures.push("round trip, 1000 proxy links open", HARNESS, &Some(d));
        }
        Err(e) => sayln!("  1000 links: failed: {e}"),
    }
    Ok(figures.rows)
}
