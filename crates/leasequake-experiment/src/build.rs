//! Everything after parsing: defaults, validation and scaling, one section
//! of the file at a time. `build` calls the sections in the order a reader
//! meets them; each returns the section's values or the error that names
//! the file, line and column to fix.

use std::path::Path;

use serde_saphyr::{Location, Spanned};

use super::diagnostic::{Diagnostic, ExperimentError};
use super::faults::{MAX_SKEW_REACH, skew_reach, validate_fault, validate_random};
use super::raw::{Overrides, RawExperiment};
use crate::model::describe::Scale;
use crate::model::experiment::defaults;
use crate::model::program::Program;
use crate::model::{
    Dur, Expect, Experiment, Fault, LeaseSettings, RandomFaults, StartMode, SubstrateSettings, Until, WorkerSettings,
    setting_name,
};

/// The shortest lease, renew, watch or repeat interval a run may have, after
/// scaling: below it the harness's own timing is the experiment.
pub const MIN_INTERVAL: Dur = Dur::from_ms(1);
/// The longest trial, after scaling.
pub const MAX_DURATION: Dur = Dur::from_secs(7 * 86_400);
/// The most fault deliveries one trial may schedule (each is a faults.csv row).
pub const MAX_DELIVERIES: u64 = 100_000;
/// How long workers have to stop at the end of a trial, after scaling: at
/// least this much real time whatever the scale, at most the ceiling.
pub const MIN_GRACE: Dur = Dur::from_ms(500);
pub const MAX_GRACE: Dur = Dur::from_secs(60);
/// A name is a directory name.
const MAX_NAME_BYTES: usize = 200;
/// One file's text, to point into.
struct Place<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Place<'_> {
    fn at(&self, line: u64, column: u64, message: String) -> ExperimentError {
        ExperimentError::Invalid(Box::new(Diagnostic::new(
            self.path,
            self.text,
            line as usize,
            column as usize,
            message,
        )))
    }

    fn span(&self, loc: &Location, message: String) -> ExperimentError {
        self.at(loc.line(), loc.column(), message)
    }

    /// At a key the raw struct keeps no span for: its first `key:`.
    fn key(&self, key: &str, message: String) -> ExperimentError {
        let (line, column) = locate(self.text, key);
        self.at(line, column, message)
    }

    /// At the value if it was written, else at the top of the file.
    fn written<T>(&self, value: Option<&Spanned<T>>, message: String) -> ExperimentError {
        match value {
            Some(v) => self.span(&v.referenced, message),
            None => self.at(0, 0, message),
        }
    }
}

/// 1-based line and column of the first occurrence of `key:` (0, 0 if absent).
pub(super) fn locate(text: &str, key: &str) -> (u64, u64) {
    // Written bare or quoted; not in a comment.
    let needles = [format!("{key}:"), format!("\"{key}\":"), format!("'{key}':")];
    let code = |l: &str| l.find(" #").map_or(l, |c| &l[..c]).to_string();
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with('#'))
        .find_map(|(i, l)| needles.iter().find_map(|n| code(l).find(n.as_str())).map(|c| (i as u64 + 1, c as u64 + 1)))
        .unwrap_or((0, 0))
}

/// Where `expect: {metrics: …}` gives a metric's key: the key, else the
/// `metrics:` mapping (the key written some way the search misses).
pub(super) fn metric_place(text: &str, key: &str, metrics: Option<Location>) -> (u64, u64) {
    match (locate(text, key), metrics) {
        ((0, _), Some(m)) => (m.line(), m.column()),
        (found, _) => found,
    }
}

/// What a substrate cannot do (`substrate_rules.rs`), placed in the file.
pub(super) fn validate_substrate(raw: &RawExperiment, text: &str) -> Result<(), (u64, u64, String)> {
    let uses = super::substrate_rules::Uses {
        substrate: &raw.substrate,
        worker: &raw.worker,
        initial_lock: raw.initial_lock,
        faults: &raw.faults.written(),
        swept: raw.substrate_swept,
        program: raw.program.is_some(),
    };
    match super::substrate_rules::check(&uses) {
        Ok(()) => Ok(()),
        Err(super::substrate_rules::Problem::Key(key, msg)) => {
            let (line, column) = locate(text, key);
            Err((line, column, msg))
        }
        Err(super::substrate_rules::Problem::At(line, column, msg)) => Err((line, column, msg)),
    }
}

/// The lease's timing and the trial's length, as written (unscaled).
struct Timing {
    lease: LeaseSettings,
    duration: Dur,
}

pub(super) fn build(
    path: &Path,
    text: &str,
    raw: RawExperiment,
    overrides: &Overrides,
) -> Result<Experiment, ExperimentError> {
    let place = &Place { path, text };
    let (scale, applied) = time_scale(place, &raw, overrides)?;
    let sc = |d: Dur| d.scaled(scale);
    check_name(place, &raw)?;
    let workers = workers(place, &raw)?;
    let (trials, until) = trials(place, &raw, overrides)?;
    let Timing { lease, duration } = timing(place, &raw)?;
    let (start, stagger) = start(place, &raw, lease.resolution)?;
    check_worker(place, &raw, workers, &lease)?;
    validate_substrate(&raw, text).map_err(|(line, column, msg)| place.at(line, column, msg))?;
    let program = program(place, &raw, overrides)?;
    let (faults, random) = faults(place, &raw, workers, duration)?;
    check_gap_bounds(place, &raw)?;
    check_stagger_fits(place, &raw, start, workers, duration)?;
    let expect = expect(place, &raw, scale)?;
    let jobs = jobs(place, &raw, overrides)?;
    let window = window(place, &raw, overrides, scale)?;
    let seed_drawn = overrides.seed.or(raw.seed).is_none();
    let seed = overrides.seed.or(raw.seed).unwrap_or_else(rand::random);
    let scaled = Scaled { place, raw: &raw, overrides, scale };
    scaled.check(&lease, duration, &faults, random.as_ref())?;
    let grace = scaled.grace()?;

    Ok(Experiment {
        name: raw.name.value,
        description: raw.description.trim().to_string(),
        source: path.to_path_buf(),
        trials,
        until,
        seed,
        seed_drawn,
        duration: sc(duration),
        workers,
        lease: LeaseSettings {
            lease: sc(lease.lease),
            renew: sc(lease.renew),
            watch: sc(lease.watch),
            resolution: sc(lease.resolution),
        },
        worker: raw.worker.scale(scale),
        start,
        stagger: sc(stagger),
        align: raw.align.map(|a| sc(a.value)),
        initial_lock: raw.initial_lock.unwrap_or(defaults::INITIAL_LOCK),
        faults: faults.iter().map(|f| f.scaled(scale)).collect(),
        random: random.map(|r| r.scaled(scale)),
        expect,
        time_scale: scale * applied,
        grace,
        jobs,
        fault_budget: raw.fault_budget.as_ref().map(|b| sc(b.value)),
        disturbance_budget: raw.disturbance_budget.as_ref().map(|b| sc(b.value)),
        substrate: SubstrateSettings { failover_after: raw.substrate.failover_after.map(sc), ..raw.substrate.clone() },
        program,
        reference: raw.reference,
        points: Vec::new(),
        window,
    })
}

/// `window:` keeps one long trial (a soak) in windows: a whole number of
/// them, each at least `MIN_WINDOW` as it runs (scaled).
fn window(
    place: &Place,
    raw: &RawExperiment,
    overrides: &Overrides,
    scale: f64,
) -> Result<Option<Dur>, ExperimentError> {
    let Some(w) = &raw.window else { return Ok(None) };
    let refuse = |msg: String| Err(place.span(&w.referenced, msg));
    let (trials, until) = trials(place, raw, overrides)?;
    if until.is_some() {
        return refuse("window keeps one long trial in windows, not trials run until a rate is known".into());
    }
    if trials != 1 {
        let msg = format!("window keeps one long trial in windows, not {trials} trials");
        return match overrides.trials {
            Some(_) => Err(place.at(0, 0, format!("--trials: {msg}"))),
            None => refuse(format!("{msg}: set `trials: 1`")),
        };
    }
    let (window, duration) =
        (w.value.scaled(scale), raw.duration.as_ref().map_or(defaults::DURATION, |d| d.value).scaled(scale));
    if window < MIN_WINDOW || window >= duration || duration.as_us() % window.as_us() != 0 {
        let msg = format!(
            "window is {window}; at least {MIN_WINDOW}, and a whole number of them make the trial ({duration})"
        );
        return refuse(msg);
    }
    // Each a trial of its own once a resume cuts the soak there: at most
    // MAX_DURATION / MIN_WINDOW of them, well under MAX_TRIALS.
    Ok(Some(window))
}

/// The shortest soak window, as it runs: a window is what a stop may lose,
/// and what reaches the disk lags the trial by a couple of seconds (the
/// events' hold and the writer's flush), so a shorter one keeps no more.
const MIN_WINDOW: Dur = Dur::from_secs(1);

/// The time scale to apply (from the file or `--time-scale`, not both), and
/// the one a resolved file's durations already carry (`scaled_by`).
fn time_scale(place: &Place, raw: &RawExperiment, overrides: &Overrides) -> Result<(f64, f64), ExperimentError> {
    let scale = match (overrides.time_scale, &raw.time_scale) {
        (Some(_), Some(s)) => {
            return Err(place.span(
                &s.referenced,
                "time_scale is set here and by --time-scale: one of them must go (they would not multiply)".into(),
            ));
        }
        (Some(s), None) => s,
        (None, Some(s)) => {
            if !(s.value > 0.0 && s.value.is_finite()) {
                return Err(place.span(&s.referenced, format!("time_scale must be a positive number, not {}", s.value)));
            }
            s.value
        }
        (None, None) => 1.0,
    };
    let applied = match &raw.scaled_by {
        Some(s) if !(s.value > 0.0 && s.value.is_finite()) => {
            return Err(place.span(&s.referenced, format!("scaled_by must be a positive number, not {}", s.value)));
        }
        Some(s) => s.value,
        None => 1.0,
    };
    Ok((scale, applied))
}

/// A name is a directory name.
fn check_name(place: &Place, raw: &RawExperiment) -> Result<(), ExperimentError> {
    let name = &raw.name.value;
    if name.trim().is_empty()
        || name.contains(['/', '\\', '\0'])
        || name.chars().any(char::is_control)
        || name.starts_with('.')
        || name.len() > MAX_NAME_BYTES
    {
        return Err(place.span(
            &raw.name.referenced,
            format!(
                "name {name:?} must be usable as a directory name: non-empty, at most {MAX_NAME_BYTES} bytes, \
                 no '/', no control characters, no leading '.'"
            ),
        ));
    }
    Ok(())
}

fn workers(place: &Place, raw: &RawExperiment) -> Result<usize, ExperimentError> {
    let n = raw.workers.value;
    if n < 1 {
        return Err(place.span(&raw.workers.referenced, format!("workers must be at least 1, not {n}")));
    }
    if n > 1000 {
        return Err(place.span(&raw.workers.referenced, format!("workers must be at most 1000, not {n}")));
    }
    Ok(n as usize)
}

/// The trial count and, unless `--trials` fixes the count, the adaptive rule.
fn trials(place: &Place, raw: &RawExperiment, overrides: &Overrides) -> Result<(u32, Option<Until>), ExperimentError> {
    let (file_trials, until) = match &raw.trials {
        None => (defaults::TRIALS, None),
        Some(t) => super::trials::trials_of(&t.value).map_err(|m| place.span(&t.referenced, m))?,
    };
    let until = until.filter(|_| overrides.trials.is_none());
    let trials = overrides.trials.unwrap_or(file_trials);
    if trials == 0 {
        let msg = "trials must be at least 1".to_string();
        return Err(match &raw.trials {
            Some(t) if overrides.trials.is_none() => place.span(&t.referenced, msg),
            _ => place.at(0, 0, format!("--trials: {msg}")),
        });
    }
    Ok((trials, until))
}

/// Lease, renew, watch, expiry resolution and duration: defaults (the
/// blog's), none zero, and a renewal inside the lease.
fn timing(place: &Place, raw: &RawExperiment) -> Result<Timing, ExperimentError> {
    let get = |v: &Option<Spanned<Dur>>, default: Dur| v.as_ref().map_or(default, |s| s.value);
    let blog = LeaseSettings::default();
    let lease = LeaseSettings {
        lease: get(&raw.lease, blog.lease),
        renew: get(&raw.renew, blog.renew),
        watch: get(&raw.watch, blog.watch),
        resolution: get(&raw.expiry_resolution, blog.resolution),
    };
    let duration = get(&raw.duration, defaults::DURATION);
    for (name, value, span) in [
        ("lease", lease.lease, &raw.lease),
        ("renew", lease.renew, &raw.renew),
        ("watch", lease.watch, &raw.watch),
        ("expiry_resolution", lease.resolution, &raw.expiry_resolution),
        ("duration", duration, &raw.duration),
    ] {
        if value == Dur::ZERO {
            return Err(place.written(span.as_ref(), format!("{name} must be longer than zero")));
        }
    }
    let (renew, lease_len) = (lease.renew, lease.lease);
    if renew >= lease_len {
        // Point at renew if it was written, else at lease.
        let msg =
            format!("renew ({renew}) must be shorter than lease ({lease_len}): a leader could never renew in time");
        return Err(place.written(raw.renew.as_ref().or(raw.lease.as_ref()), msg));
    }
    Ok(Timing { lease, duration })
}

/// How the workers start, and the barrier's alignment on the wall clock.
fn start(place: &Place, raw: &RawExperiment, resolution: Dur) -> Result<(StartMode, Dur), ExperimentError> {
    let start = raw.start.unwrap_or(defaults::START);
    let stagger = raw.stagger.as_ref().map_or(Dur::ZERO, |s| s.value);
    if let (StartMode::Barrier, Some(s)) = (start, &raw.stagger)
        && s.value != Dur::ZERO
    {
        return Err(place.span(&s.referenced, "stagger needs `start: staggered` or `start: random`".into()));
    }
    if start == StartMode::Random && stagger == Dur::ZERO {
        let msg = "start: random needs a stagger: the window each worker's start is drawn from".to_string();
        return Err(place.key("start", msg));
    }
    if let Some(a) = &raw.align
        && a.value >= resolution
    {
        return Err(place.span(
            &a.referenced,
            format!("align ({}) must be shorter than the expiry resolution ({resolution})", a.value),
        ));
    }
    Ok((start, stagger))
}

/// Every worker starts before the trial ends.
fn check_stagger_fits(
    place: &Place,
    raw: &RawExperiment,
    start: StartMode,
    workers: usize,
    duration: Dur,
) -> Result<(), ExperimentError> {
    let Some(s) = &raw.stagger else { return Ok(()) };
    // Random starts fall inside one stagger; staggered ones one per worker.
    let later = if start == StartMode::Random { 1 } else { workers as u64 - 1 };
    let last = s.value.as_us().checked_mul(later).map(Dur::from_us);
    if last.is_none_or(|last| last >= duration) {
        return Err(place.span(
            &s.referenced,
            format!(
                "stagger {} × {} later workers does not start them all before the trial ends (duration: {duration})",
                s.value, later
            ),
        ));
    }
    Ok(())
}

/// The built-in worker's settings (`worker:`), against the worker count
/// and the lease.
fn check_worker(
    place: &Place,
    raw: &RawExperiment,
    workers: usize,
    timing: &LeaseSettings,
) -> Result<(), ExperimentError> {
    // WorkerSettings carries no spans: find the key in the text.
    match raw.worker.problem(workers, timing) {
        Some((key, message)) => Err(place.key(key, message)),
        None => Ok(()),
    }
}

/// The program under test, if any; `worker:` then may only move its clock.
fn program(place: &Place, raw: &RawExperiment, overrides: &Overrides) -> Result<Option<Program>, ExperimentError> {
    let Some(p) = &raw.program else { return Ok(None) };
    let dir = place.path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let program = p
        .validate(dir.display().to_string(), !overrides.recorded)
        .map_err(|(line, column, msg)| place.at(line, column, msg))?;
    // The clock is the machine's, not the worker's: it moves a program's
    // too (through the clock shim).
    let clockless = WorkerSettings {
        clock_offset: WorkerSettings::default().clock_offset,
        clock_rate: WorkerSettings::default().clock_rate,
        ..raw.worker.clone()
    };
    if clockless != WorkerSettings::default() {
        let msg = "worker: settings belong to the built-in worker, not to a program \
                   (but clock_offset and clock_rate move a program's clock too)";
        return Err(place.key("worker", msg.into()));
    }
    Ok(Some(program))
}

/// The fault schedule, or the campaign that draws one.
fn faults(
    place: &Place,
    raw: &RawExperiment,
    workers: usize,
    duration: Dur,
) -> Result<(Vec<Fault>, Option<RandomFaults>), ExperimentError> {
    let span = |loc: &Location, message: String| place.span(loc, message);
    let list = raw.faults.list.iter().map(|f| validate_fault(f, workers, duration, &span)).collect::<Result<_, _>>()?;
    let random = raw.faults.random.as_ref().map(|r| validate_random(r, workers, duration, &span)).transpose()?;
    Ok((list, random))
}

fn check_gap_bounds(place: &Place, raw: &RawExperiment) -> Result<(), ExperimentError> {
    if let Some(e) = &raw.expect
        && let (Some(min), Some(max)) = (e.gap_min, e.gap_max)
        && min > max
    {
        let msg = format!("expect: gap_min ({min}) is more than gap_max ({max}); no gap could pass");
        return Err(place.key("gap_min", msg));
    }
    Ok(())
}

/// What a run must show to pass (`expect:`), its gaps scaled.
fn expect(place: &Place, raw: &RawExperiment, scale: f64) -> Result<Expect, ExperimentError> {
    let Some(e) = &raw.expect else { return Ok(Expect::default()) };
    let metrics = match &e.metrics {
        Some(m) => {
            let number = |n: Option<super::expect::Number>| n.map(|super::expect::Number(v)| v);
            let mut all = Vec::new();
            for (key, b) in &m.value {
                let entry = (key.as_str(), [number(b.max), number(b.min)], [b.rate_max, b.rate_min]);
                // At the metric's key where it is found, else at `metrics:`.
                all.extend(super::expect::bounds(std::iter::once(entry)).map_err(|msg| {
                    let (line, column) = metric_place(place.text, key, Some(m.referenced));
                    place.at(line, column, msg)
                })?);
            }
            all
        }
        None => Vec::new(),
    };
    Ok(Expect {
        max_leaders: e.max_leaders,
        gap_min: e.gap_min.map(|d| d.scaled(scale)),
        gap_max: e.gap_max.map(|d| d.scaled(scale)),
        wedged: e.wedged,
        double_leader_trials: e.double_leader_trials,
        disturbed: e.disturbed.map(|super::expect::TrialCount(n)| n),
        metrics,
    })
}

/// Trials at once: the file's or `--jobs`, under `--max-jobs`.
fn jobs(place: &Place, raw: &RawExperiment, overrides: &Overrides) -> Result<usize, ExperimentError> {
    let jobs = overrides.jobs.unwrap_or_else(|| raw.jobs.as_ref().map_or(defaults::JOBS, |j| j.value));
    if jobs == 0 || jobs > 64 {
        let msg = format!("jobs must be between 1 and 64, not {jobs}");
        return Err(match &raw.jobs {
            Some(j) if overrides.jobs.is_none() => place.span(&j.referenced, msg),
            _ => place.at(0, 0, format!("--jobs: {msg}")),
        });
    }
    Ok(overrides.max_jobs.map_or(jobs, |most| jobs.min(most)))
}

/// The checks above are on the written values. These bound what the run
/// will do, after scaling: fixed floors and ceilings, so that accepted input
/// cannot make the harness spin, flood the disk or never end.
struct Scaled<'a> {
    place: &'a Place<'a>,
    raw: &'a RawExperiment,
    overrides: &'a Overrides,
    scale: f64,
}

impl Scaled<'_> {
    fn sc(&self, d: Dur) -> Dur {
        d.scaled(self.scale)
    }

    fn flag(&self) -> &'static str {
        if self.overrides.time_scale.is_some() { "--time-scale" } else { "time_scale" }
    }

    /// `(written × time_scale scale)`, when there is a scale.
    fn note(&self, d: Dur) -> String {
        if self.scale == 1.0 { String::new() } else { format!(" ({d} × {} {})", self.flag(), self.scale) }
    }

    /// At the value if written, else at the time scale that made it so.
    fn at(&self, span: Option<&Location>, msg: String) -> ExperimentError {
        match (span, &self.raw.time_scale) {
            (Some(l), _) => self.place.span(l, msg),
            (None, Some(s)) if self.overrides.time_scale.is_none() => self.place.span(&s.referenced, msg),
            (None, _) => self.place.at(0, 0, msg),
        }
    }

    fn check(
        &self,
        timing: &LeaseSettings,
        duration: Dur,
        faults: &[Fault],
        random: Option<&RandomFaults>,
    ) -> Result<(), ExperimentError> {
        let (raw, scale, flag) = (self.raw, self.scale, self.flag());
        let (lease, renew) = (timing.lease, timing.renew);
        for (name, value, span) in
            [("lease", lease, &raw.lease), ("renew", renew, &raw.renew), ("watch", timing.watch, &raw.watch)]
        {
            if self.sc(value) < MIN_INTERVAL {
                let msg = format!("{name} is {}{}; at least {MIN_INTERVAL}", self.sc(value), self.note(value));
                return Err(self.at(span.as_ref().map(|s| &s.referenced), msg));
            }
        }
        let job = raw.worker.epoch_job.map_or([Dur::from_secs(1); 2], |j| [j.epoch, j.duration]);
        if [timing.resolution, duration].iter().chain(&job).any(|d| self.sc(*d) == Dur::ZERO) {
            return Err(self.at(None, format!("{flag} {scale} makes a duration round to zero")));
        }
        if self.sc(renew) >= self.sc(lease) {
            return Err(self.at(None, format!("{flag} {scale} makes renew no longer shorter than lease")));
        }
        if let Some(unit) = raw.substrate.kind.ttl_unit()
            && (self.sc(lease) < unit || !self.sc(lease).as_ns().is_multiple_of(unit.as_ns()))
        {
            let msg = format!(
                "the {} substrate's lease TTLs are whole multiples of {unit}; lease is {}{}: \
                 choose a lease (or a time scale) that makes it one",
                setting_name(&raw.substrate.kind),
                self.sc(lease),
                self.note(lease)
            );
            return Err(self.at(raw.lease.as_ref().map(|s| &s.referenced), msg));
        }
        let offset_us = raw.worker.clock_offset.all().iter().map(|o| u128::from(o.as_us().unsigned_abs())).max();
        let reach_us = (skew_reach(faults, random, duration) + offset_us.unwrap_or(0)) as f64 * scale;
        if reach_us > MAX_SKEW_REACH.as_us() as f64 {
            let first_by =
                raw.faults.list.iter().find_map(|f| f.by.as_ref()).or_else(|| {
                    raw.faults.random.as_ref().and_then(|r| r.kinds.value.iter().find_map(|k| k.by.as_ref()))
                });
            let msg = format!(
                "the skews (each as often as it can fire) and clock_offset could move a worker's clock by {}; \
                 at most {MAX_SKEW_REACH} in a trial",
                Dur::from_us(reach_us.min(u64::MAX as f64) as u64)
            );
            return Err(self.at(first_by.map(|b| &b.referenced), msg));
        }
        if self.sc(duration) > MAX_DURATION {
            let msg =
                format!("a trial would last {}{}; at most {MAX_DURATION}", self.sc(duration), self.note(duration));
            return Err(self.at(raw.duration.as_ref().map(|s| &s.referenced), msg));
        }
        let mut deliveries: u64 = 0;
        for (f, fault) in raw.faults.list.iter().zip(faults) {
            deliveries += fault.firings(duration);
            let Some(every) = &f.every else { continue };
            if self.sc(every.value) < MIN_INTERVAL {
                let msg = format!(
                    "every is {}{}; a fault repeats at most once a {MIN_INTERVAL}",
                    self.sc(every.value),
                    self.note(every.value)
                );
                return Err(self.place.span(&every.referenced, msg));
            }
            if deliveries > MAX_DELIVERIES {
                let msg = format!("the faults would fire more than {MAX_DELIVERIES} times in a {duration} trial");
                return Err(self.place.span(&every.referenced, msg));
            }
        }
        Ok(())
    }

    /// The real time workers get to stop after SIGTERM: scaled, but kept
    /// between a floor (a worker's exit does not speed up) and a ceiling.
    fn grace(&self) -> Result<Dur, ExperimentError> {
        let raw = self.raw;
        if let Some(g) = raw.grace.as_ref().filter(|g| g.value < MIN_GRACE) {
            let msg = format!(
                "grace is {}; at least {MIN_GRACE} (the real time workers get to stop after SIGTERM, which no time \
                 scale shortens)",
                g.value
            );
            return Err(self.place.span(&g.referenced, msg));
        }
        let grace = self.sc(raw.grace.as_ref().map_or(defaults::GRACE, |g| g.value)).max(MIN_GRACE);
        if grace > MAX_GRACE {
            let msg = format!("grace is {grace}; at most {MAX_GRACE} (workers still running then are killed)");
            return Err(self.at(raw.grace.as_ref().map(|g| &g.referenced), msg));
        }
        Ok(grace)
    }
}
