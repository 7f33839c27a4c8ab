//! `leasequake run`: load every experiment (all errors before anything runs)
//! → for each: its trials into its results directory (`runner.rs`) → with
//! `--shrink`, its first failing trial shrunk. A directory of experiments
//! run into `--out` also gets a side-by-side README.md; `--resume` finishes
//! an interrupted run.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::inputs::{Depth, demand, ensure_empty, expand, filter, load_all};
use super::owner::{Use, hold};
use super::runner::{
    Ctx, Done, Outcome, flags_signalled, install_signal_flags, preflight, run_experiment, servers_ready,
};
use crate::check::TrialMetrics;
use crate::cli::RunArgs;
use crate::error::{Error, exit, worse};
use crate::experiment::{Overrides, load};
use crate::model::Experiment;
use crate::model::clock::{utc_stamp, wall_ns};
use crate::report::host;
use crate::report::host::{RunFacts, ShardRecord};
use crate::report::summary::Measured;
use crate::report::summary::per_unit;
use crate::{sayln, warnln};

pub fn run(args: &RunArgs) -> Result<(), Error> {
    let overrides = Overrides {
        time_scale: args.time_scale,
        trials: args.trials,
        seed: args.seed,
        jobs: args.jobs.map(|j| j as usize),
        max_jobs: args.max_jobs.map(|j| j as usize),
        recorded: false,
    };
    let started_ns = wall_ns();
    if args.shrink_how.given() && !args.shrink {
        return Err(Error::Conflict(
            "--violation, --repeats, --need, --budget and --confirm shape a shrink: add --shrink".into(),
        ));
    }
    if args.shrink {
        super::shrink::options(&args.shrink_how)?;
    }
    if let Some(dir) = &args.resume {
        return resume(dir, args);
    }
    // Every file is checked before anything is spawned or written.
    let files = expand(&args.paths, Depth::Flat)?;
    let exps = filter(load_all(&files, &overrides)?, &args.filter)?;
    let suite = files.len() > 1 || args.paths.iter().any(|p| p.is_dir());
    if suite && let Some(dup) = duplicate_name(&exps) {
        return Err(Error::Conflict(format!(
            "two experiments are named {dup:?}; names must be unique to share an output directory"
        )));
    }
    let shards = shards(args, &exps)?;
    if let Some(out) = &args.out {
        ensure_empty(out, "--out")?;
    }
    super::export::targets_ok(args)?;
    for exp in &exps {
        crate::trial::ensure_limits(&demand(exp))
            .map_err(|source| Error::Limits { experiment: exp.source.clone(), source })?;
    }
    servers_ready(&exps)?;
    let exe = std::env::current_exe().map_err(|source| Error::Io { path: "leasequake".into(), source })?;
    // Signals are ours from here: an interrupt during the calibration still
    // removes its scratch directory and kills what it spawned.
    let flags = install_signal_flags();
    // Every results directory exists and takes files before the first
    // process is spawned, calibration's included.
    let mut dirs = Vec::new();
    // Held until the run ends: no other command writes into them meanwhile.
    let mut held = Vec::new();
    if let (Some(out), true) = (&args.out, suite) {
        writable(out).map_err(|e| Error::Path { path: out.clone(), problem: format!("--out: {e}") })?;
        held.push(hold(out, Use::Write)?);
    }
    for exp in &exps {
        let dir = match (&args.out, suite) {
            (Some(out), true) => out.join(&exp.name),
            (Some(out), false) => out.clone(),
            (None, _) => default_dir(&args.results_root, &exp.name),
        };
        let flag = if args.out.is_some() { "--out" } else { "--results-root" };
        writable(&dir).map_err(|e| Error::Path { path: dir.clone(), problem: format!("{flag}: {e}") })?;
        held.push(hold(&dir, Use::Write)?);
        dirs.push(dir);
    }
    let (calibration, calibration_loaded) = if args.no_calibrate {
        (None, None)
    } else {
        let quick = crate::calibrate::measure_quick();
        // Only when asked (never with --shard): the hogs load every other
        // process of the machine (a CI runner's other jobs, other shards).
        let loaded = args.calibrate_loaded && !flags.signalled.load(Ordering::SeqCst);
        (quick, if loaded { crate::calibrate::measure_quick_loaded() } else { None })
    };
    if flags.signalled.load(Ordering::SeqCst) {
        for d in &dirs {
            let _ = std::fs::remove_dir(d); // only if still empty
        }
        return Err(Error::InterruptedBeforeStart);
    }
    let facts = RunFacts { started_ns, ..super::facts::run_facts(calibration, calibration_loaded) };
    let ctx = Ctx { exe, flags, facts, quiet: args.quiet, silent: false };

    let mut done = Vec::new();
    let mut shrinks = Vec::new();
    let mut result = Ok(());
    for (exp, dir) in exps.iter().zip(&dirs) {
        let shard = shards.as_ref().map(|s| s[done.len()]);
        let mut outcome = run_experiment(exp, dir, args.out.is_none(), &ctx, None, shard);
        // A broken harness or an interrupt stops the suite; a failed
        // expectation does not.
        let stopped = outcome.result.as_ref().is_err_and(|e| e.exit_code() != exit::EXPECT_FAILED);
        if stopped {
            outcome.broke = outcome.result.as_ref().err().map(ToString::to_string);
        }
        result = worse(result, std::mem::replace(&mut outcome.result, Ok(())));
        if args.shrink && !stopped {
            // A shrink that cannot reproduce is its own finding, not the
            // run's failure; an interrupt stops the suite as ever.
            match super::shrink::after_run(dir, exp, &outcome.metrics, &args.shrink_how, &ctx.quietened()) {
                Ok(Some(summary)) => shrinks.push((exp.name.clone(), summary)),
                Ok(None) => {}
                Err(e) => result = worse(result, Err(e)),
            }
        }
        let stopped = stopped || flags_signalled(&ctx);
        done.push((exp, outcome));
        if stopped {
            break;
        }
        if suite {
            sayln!();
        }
    }
    if let (Some(out), true) = (&args.out, suite) {
        // The suite's own record says which shard it is, as its experiments' do.
        let shard = shards.as_ref().and_then(|s| s.first()).map(|s| ShardRecord { first_unit: 0, ..*s });
        let written = write_suite_readme(out, &args.paths, &done, &shrinks, &ctx, shard);
        result = worse(result, written.map_err(|source| Error::Io { path: out.clone(), source }));
    }
    if suite {
        roll_up(&exps, &done, args.out.as_deref().filter(|_| suite).map(|o| o.join("README.md")));
    }
    worse(result, super::export::export(args, &exported(&done)))
}

/// With `--shard`: each experiment's share, its units numbered on from
/// the experiments before it. Refused (before anything runs) where a shard
/// could not know its units: a drawn seed, or trials decided as they go.
fn shards(args: &RunArgs, exps: &[Experiment]) -> Result<Option<Vec<ShardRecord>>, Error> {
    let Some(spec) = &args.shard else { return Ok(None) };
    let shard = super::shard::resolve(spec, &|name| std::env::var(name).ok())?;
    let mut first_unit = 0;
    let mut out = Vec::new();
    for exp in exps {
        if exp.seed_drawn {
            return Err(Error::Conflict(format!(
                "--shard needs a fixed seed, the same in every shard: {} has none (add `seed:` to it, or --seed)",
                exp.source.display()
            )));
        }
        if exp.until.is_some() {
            return Err(Error::Conflict(format!(
                "--shard: {} runs trials until its rate is known (`trials: {{until: …}}`), which no shard can know \
                 alone; give it a number of trials",
                exp.source.display()
            )));
        }
        if exp.window.is_some() {
            return Err(Error::Conflict(format!(
                "--shard: {} is one long trial kept in windows (`window:`), which no shard can share; run it \
                 whole",
                exp.source.display()
            )));
        }
        out.push(ShardRecord { index: shard.index, count: shard.count, first_unit });
        first_unit += exp.units().len() as u64 * u64::from(exp.trials);
    }
    Ok(Some(out))
}

/// The suite's last words: each experiment passed or failed (and why), the
/// ones that never ran, and where the README is. Nothing failed is left to
/// be found by scrolling back.
fn roll_up(exps: &[Experiment], done: &[(&Experiment, Outcome)], readme: Option<PathBuf>) {
    let failed = done.iter().filter(|(_, o)| o.broke.is_some() || !o.failed.is_empty()).count();
    let passed = done.len() - failed;
    let suite = super::words::counted(exps.len() as u64, "experiment");
    sayln!("suite: {suite}: {passed} passed, {failed} failed, {} not run", exps.len() - done.len());
    for (exp, o) in done {
        match (&o.broke, o.failed.len()) {
            (Some(e), _) => sayln!("  ✗ {}: {e}", exp.name),
            (None, 0) => sayln!("  ✓ {}", exp.name),
            (None, n) => sayln!("  ✗ {}: {n} expectation(s) failed, first: {}", exp.name, o.failed[0]),
        }
    }
    for exp in &exps[done.len()..] {
        sayln!("  - {}: not run", exp.name);
    }
    if let Some(readme) = readme {
        sayln!("  README: {}", readme.display());
    }
}

/// Create `dir` and prove a file can be written in it.
fn writable(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    tempfile::Builder::new().prefix(".leasequake-probe").tempfile_in(dir).map(drop)
}

fn duplicate_name(exps: &[Experiment]) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    exps.iter().find(|e| !seen.insert(e.name.as_str())).map(|e| e.name.clone())
}

/// `results/<name>/<UTC timestamp>`, never reusing a directory: it is
/// created here, and a name another run took first is skipped.
fn default_dir(root: &Path, name: &str) -> PathBuf {
    let parent = root.join(name);
    let stamp = utc_stamp(wall_ns() / 1_000_000_000);
    let _ = std::fs::create_dir_all(&parent);
    let mut dir = parent.join(&stamp);
    let mut n = 2;
    while let Err(e) = std::fs::create_dir(&dir) {
        if e.kind() != std::io::ErrorKind::AlreadyExists || n > 1000 {
            break; // prepare_dir reports the real error
        }
        dir = parent.join(format!("{stamp}-{n}"));
        n += 1;
    }
    dir
}

/// What finished, as the exports see it.
fn exported<'a>(done: &'a [(&'a Experiment, Outcome)]) -> Vec<crate::report::export::ExperimentResult<'a>> {
    done.iter()
        .map(|(exp, o)| {
            let units = exp.units();
            let tagged: Vec<(u32, usize, TrialMetrics)> =
                o.metrics.iter().map(|(t, m)| (*t, exp.unit_of(units.len(), *t), m.clone())).collect();
            crate::report::export::ExperimentResult {
                exp,
                dir: &o.dir,
                summary: &o.summary,
                points: per_unit(&units, &tagged),
                checks: o.checks.clone(),
                broke: o.broke.as_deref(),
                seconds: o.seconds,
            }
        })
        .collect()
}

/// `run --resume DIR`: the experiment as it ran (DIR/experiment.yaml), the
/// finished trials re-checked from DIR/events.csv, then the missing ones.
fn resume(dir: &Path, args: &RunArgs) -> Result<(), Error> {
    // Held until the run ends: a second resume (a retried task while the
    // first still runs) is refused, naming this one.
    let _held = hold(dir, Use::Write)?;
    super::inputs::same_format(dir)?;
    // host.json says which shard this is and which build began it: one
    // that cannot be read is refused, not taken for an unsharded run.
    let recorded = match host::read(dir) {
        Ok((recorded, _)) => Some(recorded),
        Err(_) if dir.join("host.json").symlink_metadata().is_err() => None,
        Err(e) => return Err(Error::Conflict(format!("--resume: {e}"))),
    };
    // Its host.json credits every trial to the build that began the run (a
    // merge of shards holds them to it): another build may not add to them.
    if let Some(began) = recorded.as_ref().and_then(|r| r.build.as_deref())
        && began != super::facts::BUILD.commit
    {
        return Err(Error::Conflict(format!(
            "--resume: {} was begun by build {began} of leasequake and this is {}: finish it with the build \
             that began it, so that its trials come from one",
            dir.display(),
            super::facts::BUILD.commit
        )));
    }
    let overrides = Overrides { jobs: args.jobs.map(|j| j as usize), ..Overrides::default() };
    let exp = load(&dir.join("experiment.yaml"), &overrides).map_err(|e| Error::Experiments(vec![e]))?;
    // The same checks as the run's first start.
    preflight(&exp)?;
    // A trial interrupted half-written has events but no trials.csv row:
    // it is run again from the start.
    // A run writes trials.csv's header before its first trial: without it
    // nothing says which trials finished.
    if !dir.join("trials.csv").exists() {
        return Err(Error::Path {
            path: dir.join("trials.csv"),
            problem: "--resume: missing; this is not a directory a run left".into(),
        });
    }
    let done: Done = super::inputs::finished_metrics(dir, &exp, "--resume", |_, _| {})?;
    let exe = std::env::current_exe().map_err(|source| Error::Io { path: "leasequake".into(), source })?;
    // A resumed run keeps its host.json: no new calibration.
    let facts = super::facts::run_facts(None, None);
    let ctx = Ctx { exe, flags: install_signal_flags(), facts, quiet: args.quiet, silent: false };
    super::export::targets_ok(args)?;
    // A shard's run resumes as that shard.
    let shard = recorded.and_then(|r| r.shard);
    let mut outcome = run_experiment(&exp, dir, false, &ctx, Some(done), shard);
    let result = std::mem::replace(&mut outcome.result, Ok(()));
    if result.as_ref().is_err_and(|e| e.exit_code() != exit::EXPECT_FAILED) {
        outcome.broke = result.as_ref().err().map(ToString::to_string);
    }
    worse(result, super::export::export(args, &exported(&[(&exp, outcome)])))
}

/// README.md (the side-by-side table) and host.json for a suite run.
fn write_suite_readme(
    out: &Path,
    paths: &[PathBuf],
    done: &[(&Experiment, Outcome)],
    shrinks: &[(String, crate::report::shrunk::Shrunk)],
    ctx: &Ctx,
    shard: Option<ShardRecord>,
) -> std::io::Result<()> {
    let Some((first, _)) = done.first() else { return Ok(()) };
    let h = host::Host {
        shard,
        ..host::describe(first, super::facts::experiment_hash(first), super::facts::machine(), &ctx.facts)
    };
    std::fs::write(out.join("host.json"), host::to_json(&h))?;
    let runs: Vec<Measured<'_>> = done
        .iter()
        .map(|(exp, o)| Measured {
            exp,
            summary: &o.summary,
            metrics: o.metrics.iter().map(|(_, m)| m).collect(),
            link: o.dir.strip_prefix(out).unwrap_or(&o.dir).display().to_string(),
            failed: &o.failed,
        })
        .collect();
    let sources: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let exps: Vec<&Experiment> = done.iter().map(|(e, _)| *e).collect();
    let words = host::run_words(&serde_json::to_value(&h).unwrap_or_default());
    let preamble = format!("{words}\n{}", crate::report::suite::about(&exps));
    let title = format!("leasequake: {}", sources.join(" "));
    let points: Vec<Vec<_>> = done
        .iter()
        .map(|(exp, o)| {
            let units = exp.units();
            let tagged: Vec<(u32, usize, TrialMetrics)> =
                o.metrics.iter().map(|(t, m)| (*t, exp.unit_of(units.len(), *t), m.clone())).collect();
            per_unit(&units, &tagged)
        })
        .collect();
    let mut text = crate::report::suite::readme(&title, &preamble, &runs, &points);
    if !shrinks.is_empty() {
        text += &crate::report::shrunk::table(shrinks, out);
    }
    std::fs::write(out.join("README.md"), text)?;
    let names: Vec<String> = runs.iter().map(|m| m.link.clone()).collect();
    if let Err(e) = super::report::suite(out, &names) {
        warnln!("warning: {e}");
    }
    Ok(())
}
