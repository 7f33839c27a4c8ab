//! The command line (clap derive). Bad flags exit 2, like bad files.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::worker::WorkerArgs;

/// The version and the commit it was built from, as host.json's `build`
/// records it.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (build ", env!("LEASEQUAKE_GIT_COMMIT"), ")");

#[derive(Parser, Debug)]
#[command(
    name = "leasequake",
    version = VERSION,
    about = "Chaos harness for lease-based leader election over real processes",
    long_about = "Chaos harness for lease-based leader election over real processes.\n\n\
        Spawns N real worker processes (the built-in lock-file worker, or any program) against a \
        lease (a lock file, flock, Redis, PostgreSQL, etcd, replicated or not), injects faults at \
        scripted or protocol-relative moments (kills, SIGTERM, pauses, lock-file damage, server \
        pauses and restarts, partitions, lost replies, delays, clock skew), records one history per \
        trial and measures leaderless gaps, double leaders, wedges and stale writes, each beside \
        its theory's bound.\n\n\
        Exit codes: 0 success, 1 an `expect:` failed, 2 bad input, 3 harness failure, 130 interrupted."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The command as a user sees it, for completions and the manual: the
/// hidden subcommands (the harness's own children) left out.
pub fn public_command() -> clap::Command {
    let full = <Cli as clap::CommandFactory>::command();
    let mut cmd = clap::Command::new("leasequake").version(VERSION);
    if let Some(about) = full.get_about() {
        cmd = cmd.about(about.clone());
    }
    if let Some(about) = full.get_long_about() {
        cmd = cmd.long_about(about.clone());
    }
    // No `help` subcommand: its page would be listed and never written.
    cmd.disable_help_subcommand(true).subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run experiment files (or every *.yaml in a directory): spawn workers,
    /// inject faults, record, check.
    Run(RunArgs),
    /// Run a file with a `sweep:` block (the same as `run`; every point for
    /// its trials, one summary row per point).
    Sweep(RunArgs),
    /// Shrink a trial that violated something to the smallest schedule that
    /// still does: its recorded faults, fewer of them (delta debugging),
    /// then simpler timings (after a protocol event, rounder, shorter). A
    /// candidate reproduces when it fails the same way in --need of
    /// --repeats runs. Writes shrunk.yaml (a runnable experiment), steps.csv,
    /// README.md and every candidate's results to a new directory.
    Shrink(ShrinkArgs),
    /// Compare two runs, or two points of one sweep, metric by metric: for
    /// each metric both measured, B − A with its 95 % interval and whether
    /// it is significant (gaps by the Mann–Whitney U test and the
    /// Hodges–Lehmann shift; rates by Newcombe's interval and Fisher's
    /// exact test; p-values Holm-corrected across the metrics), and which
    /// settings differ. Refused (exit 2) when they share no metric.
    Compare(CompareArgs),
    /// Check experiment files without running anything.
    Validate {
        /// Experiment YAML files, or directories of them (their
        /// subdirectories too).
        #[arg(required = true, value_name = "FILE|DIR")]
        files: Vec<PathBuf>,
        /// Report only the experiments whose name matches GLOB (`*`, `?`;
        /// repeatable: any of them). Every file is still checked.
        #[arg(long, value_name = "GLOB")]
        filter: Vec<String>,
    },
    /// List the experiments in files or directories (their subdirectories
    /// too): name, file, trials × points, workers, substrate, faults, and
    /// the first sentence of the description.
    List {
        /// Experiment YAML files, or directories of them.
        #[arg(required = true, value_name = "FILE|DIR")]
        files: Vec<PathBuf>,
        /// Only the experiments whose name matches GLOB (repeatable).
        #[arg(long, value_name = "GLOB")]
        filter: Vec<String>,
    },
    /// What a run would do, without running it: points × trials and the
    /// estimated time, trial 1's fault schedule, and warnings where a scaled
    /// interval comes near the harness's precision or the workers' own
    /// operations.
    Plan {
        /// Experiment YAML files, or directories of them (their
        /// subdirectories too).
        #[arg(required = true, value_name = "FILE|DIR")]
        files: Vec<PathBuf>,
        /// Only the experiments whose name matches GLOB (repeatable).
        #[arg(long, value_name = "GLOB")]
        filter: Vec<String>,
        /// As for `run`.
        #[arg(long, value_parser = positive_scale)]
        time_scale: Option<f64>,
        /// As for `run`.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        trials: Option<u32>,
        /// As for `run`.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
        jobs: Option<u64>,
        /// As for `run`.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64), conflicts_with = "jobs")]
        max_jobs: Option<u64>,
    },
    /// Recompute trials.csv, gaps.csv, summary.csv and the pages drawn from
    /// them from a results directory's events.csv (offline re-check of a
    /// past run, by this build's checker, recorded in checked.json), or
    /// every experiment's of a suite's directory and the suite's README.md.
    /// They go to a new directory, DIR/checks/<UTC timestamp>/, unless
    /// --out or --in-place says otherwise; a history missing a trial of
    /// trials.csv is refused, as is a suite run with --shrink.
    Check {
        /// A results directory (with experiment.yaml and events.csv), or a
        /// suite's (README.md and directories of those).
        dir: PathBuf,
        /// Write the recomputed files into this new (or empty) directory.
        #[arg(long, conflicts_with = "in_place")]
        out: Option<PathBuf>,
        /// Replace DIR's own derived tables (each file swapped whole once
        /// all are written); the history is never touched.
        #[arg(long)]
        in_place: bool,
    },
    /// Put the shards of one run (`run --shard`) back together: OUT gets
    /// the results directory the unsharded run writes (the history in trial
    /// order, every table derived from it recomputed by the checker, each
    /// shard's host.json kept in OUT's). Refused (exit 2), before anything is
    /// written, unless the DIRs are every shard of one run exactly once,
    /// each finished, from the same experiment file, build and seed. Exits 1
    /// when the experiment's `expect:` fails, as the run would have.
    Merge {
        /// A new (or empty) directory for the merged results.
        out: PathBuf,
        /// Each shard's results directory (or, for a directory of
        /// experiments run with --out, each shard's suite directory).
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
    },
    /// (Re)write report.html, the page to open, for a results directory or
    /// a suite's (and each of its experiments), from the files alone: the
    /// verdict tables, the plots and the first trials' timelines inline, the
    /// host and calibration. A run writes it too.
    Report {
        /// A results directory (with experiment.yaml), or a suite's.
        dir: PathBuf,
        /// Write the page to PAGE instead, reading an experiment's results
        /// directory without writing into it: also while a run is writing
        /// it (a soak), when the page shows the trials finished so far and
        /// each running trial judged up to its latest events.
        #[arg(long, value_name = "PAGE")]
        out: Option<PathBuf>,
    },
    /// Redraw a results directory's plots (dial.svg, histograms.svg) from
    /// its CSVs alone.
    Plot {
        /// A results directory (with summary.csv, trials.csv, gaps.csv).
        dir: PathBuf,
    },
    /// Measure this machine's error bars next to a shell baseline run the
    /// same minute: start spread of 3, 30 and 300 workers (vs a `cmd &`
    /// loop), the error of SIGTERM, SIGSTOP and SIGKILL (vs `sleep; kill`),
    /// and the event delay of observing a program (protocol and patterns).
    /// About 20 s; with --load, again under CPU hogs of its own (40 s).
    Calibrate {
        /// Lines per path (one per millisecond).
        #[arg(long, default_value_t = 1000)]
        lines: usize,
        /// Measure again with N CPU hogs of its own running (processes
        /// spinning at ordinary priority; default: one per core), and print
        /// both.
        #[arg(long, value_name = "N", num_args = 0..=1, value_parser = clap::value_parser!(u64).range(1..=256))]
        load: Option<Option<u64>>,
        /// Also write every figure, the shell baselines' too, to FILE as
        /// CSV (load, scheduling, figure, by, n, median_us, p99_us,
        /// max_us): a new file or one replaced whole.
        #[arg(long, value_name = "FILE")]
        csv: Option<PathBuf>,
    },
    /// Print a shell completion script, e.g. `leasequake completions bash >
    /// ~/.local/share/bash-completion/completions/leasequake`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), e.g. `leasequake man >
    /// ~/.local/share/man/man1/leasequake.1`; with --dir, write it and a
    /// page per subcommand (leasequake-run.1, …, every flag) there.
    Man {
        /// A directory for leasequake.1 and every leasequake-SUBCOMMAND.1
        /// (made if missing; only those files are replaced), e.g.
        /// ~/.local/share/man/man1.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Print the experiment file reference (Markdown), or with --schema its
    /// JSON Schema: how docs/experiment-reference.md and
    /// docs/experiment.schema.json are made.
    Reference {
        #[arg(long)]
        schema: bool,
    },
    /// The shell baseline's victim (used by `calibrate`).
    #[command(hide = true)]
    CalibrateTarget,
    /// A CPU hog for `calibrate --load` (used by the harness).
    #[command(hide = true)]
    CalibrateHog,
    /// The program `calibrate` observes (used by the harness).
    #[command(hide = true)]
    CalibrateEmit {
        #[arg(long)]
        lines: usize,
        #[arg(long)]
        interval_us: u64,
    },
    /// Become a program under test (used by the harness): tie to the
    /// harness, put the protocol pipe on fd 3, close the rest, exec.
    #[command(hide = true)]
    ExecProgram {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        argv: Vec<String>,
    },
    /// Kill what the harness's workers left if the harness dies (used by
    /// the harness; reads its orders on stdin).
    #[command(hide = true)]
    Guard,
    /// Run one built-in lease worker (used by the harness).
    #[command(hide = true)]
    Worker(WorkerArgs),
}

fn positive_scale(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a positive number (e.g. 0.1 runs ten times faster)")),
    }
}

#[derive(Args, Debug)]
pub struct ShrinkArgs {
    /// A results directory (with experiment.yaml, events.csv, faults.csv).
    pub dir: PathBuf,
    /// The trial to shrink (its number in trials.csv).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), required_unless_present = "point")]
    pub trial: Option<u32>,
    /// Instead of --trial: the first trial of this sweep point (its
    /// `setting` in trials.csv, e.g. `fault=lock-delete`) that violated
    /// what is wanted, the first the machine left undisturbed where there
    /// is one, as `run --shrink` picks.
    #[arg(long, value_name = "SETTING", conflicts_with = "trial")]
    pub point: Option<String>,
    #[command(flatten)]
    pub how: ShrinkHow,
    /// Runs at once (default: the experiment's `jobs`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub jobs: Option<u64>,
    /// Write here (new or empty) instead of DIR/shrink/trial-N-<UTC timestamp>.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// A: a results directory, or DIR@SETTING for one point of its sweep, in
    /// the experiment's own time or as trials.csv names it (as run), e.g.
    /// `results/lease/latest@lease=9s`.
    #[arg(value_name = "A")]
    pub a: String,
    /// B: the same, compared against A (differences read B − A).
    #[arg(value_name = "B")]
    pub b: String,
    /// Print JSON instead of Markdown.
    #[arg(long)]
    pub json: bool,
}

/// How a shrink searches (`shrink`, and `run --shrink`).
#[derive(Args, Debug, Clone, Default)]
pub struct ShrinkHow {
    /// The violation to keep (default: the trial's first): double-leader,
    /// double-grant, stale-write, wedged, or expect-KEY for a failed
    /// `expect:` key (max_leaders, gap_min, gap_max, wedged).
    #[arg(long, value_name = "KIND")]
    pub violation: Option<String>,
    /// Runs of each candidate schedule [default: 4].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeats: Option<u32>,
    /// Runs of a candidate that must fail the same way for it to count as
    /// reproducing [default: half the repeats, rounded up].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub need: Option<u32>,
    /// Trials the search may spend, the original's check included
    /// [default: 200].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub budget: Option<u32>,
    /// Runs of the shrunk schedule that measure its reproduction rate, on
    /// fresh seeds [default: 10].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub confirm: Option<u32>,
}

impl ShrinkHow {
    pub fn repeats(&self) -> u32 {
        self.repeats.unwrap_or(4)
    }

    pub fn need(&self) -> u32 {
        self.need.unwrap_or(self.repeats().div_ceil(2))
    }

    pub fn budget(&self) -> u32 {
        self.budget.unwrap_or(200)
    }

    pub fn confirm(&self) -> u32 {
        self.confirm.unwrap_or(10)
    }

    /// Whether any of these was given (they mean nothing without a shrink).
    pub fn given(&self) -> bool {
        self.violation.is_some()
            || self.repeats.is_some()
            || self.need.is_some()
            || self.budget.is_some()
            || self.confirm.is_some()
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Experiment YAML files, or directories of them (run in name order).
    #[arg(required_unless_present = "resume", value_name = "FILE|DIR")]
    pub paths: Vec<PathBuf>,
    /// Run only the experiments whose name matches GLOB (`*`, `?`;
    /// repeatable: any of them), e.g. `--filter 'sigkill-*'`. Every file is
    /// still checked first.
    #[arg(long, value_name = "GLOB", conflicts_with = "resume")]
    pub filter: Vec<String>,
    /// Continue an interrupted run in this results directory: run only the
    /// trials missing from its trials.csv, with its experiment.yaml.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["out", "time_scale", "trials", "seed"])]
    pub resume: Option<PathBuf>,
    /// Multiply every duration (lease, intervals, fault times, expiry
    /// resolution) by this factor; 0.1 runs ten times faster, same shape.
    #[arg(long, value_parser = positive_scale)]
    pub time_scale: Option<f64>,
    /// Number of trials (overrides the file).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub trials: Option<u32>,
    /// Base seed (overrides the file); trial i uses seed + i.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Trials to run at once (each in its own directory).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub jobs: Option<u64>,
    /// At most this many trials at once: an experiment's `jobs:` above it is
    /// lowered, one below it stands (the result scripts pass the cores).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64), conflicts_with = "jobs")]
    pub max_jobs: Option<u64>,
    /// Results directory (default: results/<name>/<UTC timestamp>). With
    /// several experiments: one subdirectory each, and a README.md table.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Root for the default results directory.
    #[arg(long, default_value = "results")]
    pub results_root: PathBuf,
    /// No progress bar, only the final summary.
    #[arg(long, short)]
    pub quiet: bool,
    /// Skip the short calibration (start spread, fault error, event delay;
    /// about 2 s) that is recorded in host.json before a run.
    #[arg(long)]
    pub no_calibrate: bool,
    /// Also measure that calibration under CPU hogs of its own (a spinning
    /// process per core for about 2 s), recorded in host.json as
    /// `calibration_loaded`: the error bars under load. Off by default: on
    /// a shared machine the hogs slow everyone else down. Not with --shard:
    /// the hogs would load the other shards' trials.
    #[arg(long, conflicts_with_all = ["no_calibrate", "shard"])]
    pub calibrate_loaded: bool,
    /// Also write every experiment's measurements, bounds, expectations and
    /// verdict to FILE as JSON (durations in each experiment's own time).
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// Run only this shard of the run's trials: `K/N` (K from 0 to N-1),
    /// `k8s/N` (K from JOB_COMPLETION_INDEX, a Kubernetes indexed Job) or
    /// `slurm` (from SLURM_ARRAY_TASK_ID, _MIN and _COUNT). Each trial keeps
    /// its number and seed: the shards together are the unsharded run, and
    /// `leasequake merge` puts them back together. Needs a fixed seed (the
    /// file's or --seed).
    #[arg(long, value_name = "K/N|k8s/N|slurm", value_parser = shard_spec, conflicts_with = "resume")]
    pub shard: Option<ShardSpec>,
    /// After each experiment, shrink its first trial that violated
    /// something (the first undisturbed one, where there is one) into
    /// DIR/shrink/, as `leasequake shrink` does (with this
    /// run's --jobs, and the shrink options below).
    #[arg(long, conflicts_with = "resume")]
    pub shrink: bool,
    #[command(flatten)]
    pub shrink_how: ShrinkHow,
    /// Also write a JUnit XML report to FILE: each experiment a test suite,
    /// each `expect:` key a test case, failures with the measured values.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// What `--shard` names: an index, or where a scheduler keeps it.
#[derive(Clone, Debug, PartialEq)]
pub enum ShardSpec {
    /// Shard K of N, K from 0.
    Index(u64, u64),
    /// A Kubernetes indexed Job of N completions: K in JOB_COMPLETION_INDEX.
    Kubernetes(u64),
    /// A Slurm job array: K and N from its environment.
    Slurm,
}

fn shard_spec(s: &str) -> Result<ShardSpec, String> {
    let count = |n: &str| match n.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{n:?} is not a shard count (a whole number ≥ 1)")),
    };
    if s == "slurm" {
        return Ok(ShardSpec::Slurm);
    }
    let (k, n) = s.split_once('/').ok_or_else(|| "expected K/N (K from 0), k8s/N or slurm".to_string())?;
    if k == "k8s" {
        return Ok(ShardSpec::Kubernetes(count(n)?));
    }
    let k = k.parse::<u64>().map_err(|_| format!("{k:?} is not a shard index (a whole number from 0)"))?;
    Ok(ShardSpec::Index(k, count(n)?))
}
