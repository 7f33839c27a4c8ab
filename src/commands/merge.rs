//! `leasequake merge OUT DIR…`: the shards of one run (`run --shard`) put
//! back together as the results directory the unsharded run writes.
//!
//! Every shard is held to the others before anything is written: the same
//! experiment file (by content), build, seed and resolved experiment, every
//! shard of one count exactly once, each with all of its trials and no
//! other's. The history (events.csv, faults.csv) is the shards' rows in
//! trial order; everything derived from it is recomputed by the checker, as
//! `check` does, so the merged tables are a function of the histories alone.
//! The result is put together beside OUT and renamed into place whole: a
//! merge that fails leaves no half-merged OUT, and the shards are only read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::inputs::{ensure_empty, finished_metrics, same_format, verdict};
use super::shard::{Piece, whole};
use crate::check::TrialMetrics;
use crate::error::{Error, worse};
use crate::experiment::load_record;
use crate::model::Experiment;
use crate::model::history::History;
use crate::report::csv::{HISTORY_TABLES, merge_history};
use crate::report::host::{self, Merged, Recorded, ShardRecord};
use crate::report::read::{finished_trials, worker_outcomes};
use crate::report::summary::summarize;
use crate::report::terminal;
use crate::{say, warnln};

pub fn merge(out: &Path, dirs: &[PathBuf]) -> Result<(), Error> {
    apart(out, dirs)?;
    ensure_empty(out, "OUT")?;
    // Everything is read and held to everything else first.
    let shape = shape(dirs)?;
    // The shards are read, not written: a run still writing one is refused.
    let _held = dirs.iter().map(|d| super::owner::hold(d, super::owner::Use::Read)).collect::<Result<Vec<_>, _>>()?;
    let experiments: Vec<Shards> = match &shape {
        Shape::Experiment => vec![gather(dirs.to_vec())?],
        Shape::Suite(names) => {
            let mut all = names
                .iter()
                .map(|name| gather(dirs.iter().map(|d| d.join(name)).collect()))
                .collect::<Result<Vec<_>, _>>()?;
            // In the order the run took them: by the units before each.
            all.sort_by_key(|s| s.first_unit);
            all
        }
    };
    // A suite's own record of each shard, read with the rest.
    let suite_record = match &shape {
        Shape::Experiment => None,
        Shape::Suite(_) => Some(suite_record(dirs, &experiments[0].name)?),
    };
    if let Some(build) = experiments.first().and_then(|s| s.first.build.as_deref())
        && (build.ends_with("-dirty") || build == "unknown")
    {
        warnln!(
            "warning: the shards were run by build {build}: over uncommitted changes (or outside a checkout), \
             so that they ran the same code cannot be proven"
        );
    }
    // A signal stops the merge between files, and what it began is removed;
    // a second one exits at once.
    let stopped = super::runner::install_signal_flags().signalled;
    let (stage, made) = staging(out)?;
    let written = (|| -> Result<Vec<Merged1>, Error> {
        let mut merged = Vec::new();
        for s in &experiments {
            let to = match &shape {
                Shape::Experiment => stage.clone(),
                Shape::Suite(_) => stage.join(&s.name),
            };
            merged.push(write_experiment(&to, s, &stopped)?);
        }
        if let Some(record) = &suite_record {
            write_suite(&stage, dirs, record, &experiments, &merged)?;
        }
        halt_if(&stopped)?;
        Ok(merged)
    })();
    let merged = match written.and_then(|m| place(&stage, out).map(|()| m)) {
        Ok(m) => m,
        Err(e) => {
            let _ = std::fs::remove_dir_all(made.as_ref().unwrap_or(&stage));
            return Err(e);
        }
    };
    let mut result = Ok(());
    for (s, m) in experiments.iter().zip(&merged) {
        let dir = match &shape {
            Shape::Experiment => out.to_path_buf(),
            Shape::Suite(_) => out.join(&s.name),
        };
        let all: Vec<&TrialMetrics> = m.metrics.iter().map(|(_, _, m)| m).collect();
        say!("{}", terminal::render(&s.exp, &summarize(&all), &dir));
        // The verdict the unsharded run would have given.
        let by_trial: Vec<(u32, &TrialMetrics)> = m.metrics.iter().map(|(t, _, m)| (*t, m)).collect();
        result = worse(result, verdict(&s.exp, &by_trial));
    }
    let trials: usize = merged.iter().map(|m| m.metrics.len()).sum();
    warnln!(
        "leasequake: merged {} shards: {trials} trial(s) of {} experiment(s) → {}",
        dirs.len(),
        experiments.len(),
        out.display()
    );
    result
}

/// OUT names a directory of its own: not `.` or `..`, and neither inside a
/// shard's directory (whose files it would be copied among) nor holding one.
fn apart(out: &Path, dirs: &[PathBuf]) -> Result<(), Error> {
    let bad = |problem: String| Error::Path { path: out.to_path_buf(), problem: format!("OUT: {problem}") };
    if !matches!(out.components().next_back(), Some(std::path::Component::Normal(_))) {
        return Err(bad("name a new directory for the merge (not ., .. or /)".into()));
    }
    let out_abs = absolute(out);
    for d in dirs {
        let d_abs = absolute(d);
        if out_abs.starts_with(&d_abs) || d_abs.starts_with(&out_abs) {
            return Err(bad(format!("is inside the shard directory {} (or holds it): merge beside it", d.display())));
        }
    }
    Ok(())
}

/// `p` made absolute and free of links as far as it exists.
fn absolute(p: &Path) -> PathBuf {
    let mut existing = p;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.iter().rev().fold(real, |acc, part| acc.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// What the DIRs are: each an experiment's results directory, or each a
/// suite's (a directory of them, with the same experiments in every one).
enum Shape {
    Experiment,
    Suite(Vec<String>),
}

fn shape(dirs: &[PathBuf]) -> Result<Shape, Error> {
    let bad = |dir: &Path, problem: &str| Error::Path { path: dir.to_path_buf(), problem: problem.to_string() };
    let experiments_in = |dir: &Path| -> Result<BTreeSet<String>, Error> {
        let dirs = super::inputs::experiment_dirs(dir).map_err(|e| bad(dir, &e.to_string()))?;
        Ok(dirs.iter().filter_map(|d| Some(d.file_name()?.to_string_lossy().into_owned())).collect())
    };
    let Some(first) = dirs.first() else { return Err(Error::Conflict("merge: no shard directory given".into())) };
    if first.join("experiment.yaml").is_file() {
        for d in dirs {
            if !d.join("experiment.yaml").is_file() {
                return Err(bad(
                    d,
                    &format!("has no experiment.yaml, as {} has: not a results directory", first.display()),
                ));
            }
        }
        return Ok(Shape::Experiment);
    }
    let names = experiments_in(first)?;
    if names.is_empty() {
        return Err(bad(first, "is neither a results directory (experiment.yaml) nor a suite's (directories of them)"));
    }
    for d in &dirs[1..] {
        let here = experiments_in(d)?;
        if let Some(name) = names.symmetric_difference(&here).next() {
            let (has, lacks) = if names.contains(name) { (first, d) } else { (d, first) };
            return Err(bad(
                lacks,
                &format!(
                    "lacks the experiment {name} that {} has: the shards of one suite run the same experiments",
                    has.display()
                ),
            ));
        }
    }
    Ok(Shape::Suite(names.into_iter().collect()))
}

/// One experiment's shards, read, checked against each other, in shard order.
struct Shards {
    name: String,
    exp: Experiment,
    dirs: Vec<PathBuf>,
    first: Recorded,
    /// Each shard's host.json, whole.
    hosts: Vec<serde_json::Value>,
    trials: Vec<BTreeSet<u32>>,
    first_unit: u64,
    /// Every shard's trials re-checked, in trial order.
    metrics: Vec<(u32, usize, TrialMetrics)>,
    /// Trial 1's history, for the timeline the run draws of it.
    trial_one: Option<History>,
    outcomes: BTreeMap<u32, String>,
}

fn gather(dirs: Vec<PathBuf>) -> Result<Shards, Error> {
    struct Read {
        dir: PathBuf,
        recorded: Recorded,
        whole: serde_json::Value,
        shard: ShardRecord,
        yaml: String,
    }
    let mut read = Vec::new();
    for dir in dirs {
        same_format(&dir)?;
        let (recorded, whole) = host::read(&dir).map_err(|e| Error::Conflict(e.to_string()))?;
        let Some(shard) = recorded.shard else {
            return Err(Error::Path {
                path: dir,
                problem: "was not run with --shard: there is nothing to merge it with (it is a whole run already)"
                    .into(),
            });
        };
        let path = dir.join("experiment.yaml");
        let yaml = crate::files::read_text(&path, crate::experiment::MAX_FILE_BYTES)
            .map_err(|source| Error::Io { path, source })?;
        read.push(Read { dir, recorded, whole, shard, yaml });
    }
    let first = &read[0];
    for r in &read[1..] {
        same_run((&first.dir, &first.recorded, &first.yaml), (&r.dir, &r.recorded, &r.yaml))?;
    }
    // The history tables' layouts agree, so that their rows can be put
    // side by side (the same format and build write the same; an edit may not).
    for table in HISTORY_TABLES {
        let header = |dir: &Path| -> Result<String, Error> {
            let path = dir.join(table);
            let file = crate::files::open_regular(&path)
                .map_err(|e| Error::Path { path: path.clone(), problem: format!("{e}: not as a run left it") })?;
            let mut line = String::new();
            std::io::BufRead::read_line(&mut std::io::BufReader::new(file), &mut line)
                .map_err(|source| Error::Io { path, source })?;
            Ok(line)
        };
        let want = header(&first.dir)?;
        for r in &read[1..] {
            if header(&r.dir)? != want {
                return Err(Error::Conflict(format!(
                    "merge: {} and {} differ in the columns of {table}",
                    first.dir.display(),
                    r.dir.display()
                )));
            }
        }
    }
    let exp = load_record(&first.dir).map_err(|e| Error::Experiments(vec![e]))?;
    let total = exp.units().len() as u32 * exp.trials;
    let trials: Vec<BTreeSet<u32>> = read.iter().map(|r| finished_trials(&r.dir)).collect::<Result<_, _>>()?;
    let pieces: Vec<Piece<'_>> =
        read.iter().zip(&trials).map(|(r, trials)| Piece { dir: &r.dir, shard: r.shard, trials }).collect();
    whole(&pieces, total).map_err(|e| Error::Conflict(format!("merge: {e}")))?;
    let (mut metrics, mut trial_one, mut outcomes) = (Vec::new(), None, BTreeMap::new());
    for r in &read {
        // One trial's history in memory at a time, whatever the run's length.
        let keep = |t: u32, h: History| {
            if t == 1 {
                trial_one = Some(h);
            }
        };
        metrics.extend(finished_metrics(&r.dir, &exp, "merge", keep)?);
        outcomes.extend(worker_outcomes(&r.dir));
    }
    metrics.sort_by_key(|(t, _, _)| *t);
    // From here in shard order: host.json lists the shards 0, 1, …
    let mut both: Vec<(Read, BTreeSet<u32>)> = read.into_iter().zip(trials).collect();
    both.sort_by_key(|(r, _)| r.shard.index);
    let name = both[0].0.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let first_unit = both[0].0.shard.first_unit;
    let (mut dirs, mut hosts, mut trials, mut records) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (r, t) in both {
        dirs.push(r.dir);
        hosts.push(r.whole);
        records.push(r.recorded);
        trials.push(t);
    }
    let first = records.swap_remove(0);
    Ok(Shards { name, exp, dirs, first, hosts, trials, first_unit, metrics, trial_one, outcomes })
}

/// Two shards of one run: the same experiment file, build, seed and
/// resolved experiment (which a `--time-scale` or `--trials` changes).
fn same_run(a: (&Path, &Recorded, &str), b: (&Path, &Recorded, &str)) -> Result<(), Error> {
    let ((da, ra, ya), (db, rb, yb)) = (a, b);
    let conflict = |what: String| {
        Error::Conflict(format!(
            "merge: {} and {} {what}: a merge is of the shards of one run",
            da.display(),
            db.display()
        ))
    };
    let need = |dir: &Path, field: &str, v: &Option<String>| -> Result<String, Error> {
        v.clone().ok_or_else(|| Error::Path {
            path: dir.join("host.json"),
            problem: format!(
                "records no `{field}` (written before runs could be sharded): it cannot be held to the others"
            ),
        })
    };
    let (ha, hb) =
        (need(da, "experiment_hash", &ra.experiment_hash)?, need(db, "experiment_hash", &rb.experiment_hash)?);
    if ha != hb {
        return Err(conflict(format!("ran different experiment files (content hashes {ha} and {hb})")));
    }
    let (ba, bb) = (need(da, "build", &ra.build)?, need(db, "build", &rb.build)?);
    if ba != bb {
        return Err(conflict(format!("were run by different builds of leasequake ({ba} and {bb})")));
    }
    if ra.seed != rb.seed {
        let s = |s: Option<u64>| s.map_or("none".to_string(), |s| s.to_string());
        return Err(conflict(format!("ran with different seeds ({} and {})", s(ra.seed), s(rb.seed))));
    }
    // What the trials ran with: not the comments (which name the path the
    // file was given by), nor `jobs:` (how many trials a machine ran at once).
    let settings = |y: &str| -> Vec<String> {
        y.lines().filter(|l| !l.starts_with('#') && !l.starts_with("jobs:")).map(str::to_string).collect()
    };
    let (sa, sb) = (settings(ya), settings(yb));
    if sa != sb {
        let blank = String::new();
        let (n, la, lb) = (0..sa.len().max(sb.len()))
            .map(|n| (n, sa.get(n).unwrap_or(&blank), sb.get(n).unwrap_or(&blank)))
            .find(|(_, x, y)| x != y)
            .map(|(n, x, y)| (n + 1, x.clone(), y.clone()))
            .unwrap_or_default();
        return Err(conflict(format!(
            "ran the file with different settings (their experiment.yaml differ at setting line {n}: {:?} and {:?}; \
             a --time-scale, --trials or --seed given to one shard only?)",
            la.trim(),
            lb.trim()
        )));
    }
    Ok(())
}

/// What one merged experiment came to.
struct Merged1 {
    metrics: Vec<(u32, usize, TrialMetrics)>,
    failed: Vec<String>,
}

/// One experiment's merged directory `to`, as the unsharded run writes it.
fn write_experiment(to: &Path, s: &Shards, stopped: &AtomicBool) -> Result<Merged1, Error> {
    halt_if(stopped)?;
    std::fs::create_dir_all(to).map_err(Error::io(to))?;
    let yaml = to.join("experiment.yaml");
    std::fs::copy(s.dirs[0].join("experiment.yaml"), &yaml).map_err(Error::io(&yaml))?;
    let record = to.join("host.json");
    std::fs::write(
        &record,
        host::to_json(&Merged::new(&s.first, s.hosts.clone(), std::env::args().collect(), super::facts::BUILD)),
    )
    .map_err(Error::io(&record))?;
    let sources: Vec<(&Path, &BTreeSet<u32>)> = s.dirs.iter().map(PathBuf::as_path).zip(&s.trials).collect();
    merge_history(to, &sources)?;
    let metrics = s.metrics.clone();
    super::check::write_derived(to, &s.exp, &metrics, &s.outcomes)?;
    debug_assert!(metrics.iter().all(|(t, u, _)| s.exp.unit_of(s.exp.units().len(), *t) == *u));
    for dir in &s.dirs {
        copy_trials(&dir.join("trials"), &to.join("trials"), stopped)?;
    }
    let failed = super::check::write_pages(to, &s.exp, &metrics, s.trial_one.as_ref());
    Ok(Merged1 { metrics, failed })
}

/// A suite's host.json for the merge: its shards' own suite records (the
/// run's machine and command of each), in shard order. A suite run writes
/// its record last: a shard cut short and finished by resuming each
/// experiment has none, and its first experiment's record stands in.
fn suite_record(dirs: &[PathBuf], first: &str) -> Result<String, Error> {
    let mut records = Vec::new();
    for d in dirs {
        let from = if d.join("host.json").exists() { d.clone() } else { d.join(first) };
        let (recorded, whole) = host::read(&from).map_err(|e| Error::Conflict(e.to_string()))?;
        records.push((recorded.shard.map_or(u64::MAX, |s| s.index), recorded, whole));
    }
    records.sort_by_key(|(k, _, _)| *k);
    let first = &records[0].1;
    Ok(host::to_json(&Merged::new(
        first,
        records.iter().map(|(_, _, w)| w.clone()).collect(),
        std::env::args().collect(),
        super::facts::BUILD,
    )))
}

/// A suite's README.md, host.json and report.html, as its run writes them.
fn write_suite(
    stage: &Path,
    dirs: &[PathBuf],
    record: &str,
    experiments: &[Shards],
    merged: &[Merged1],
) -> Result<(), Error> {
    let path = stage.join("host.json");
    std::fs::write(&path, record).map_err(Error::io(&path))?;
    // The run's own title (the files it was given), from a shard's README.
    let title = crate::files::read_text(&dirs[0].join("README.md"), crate::files::MAX_TEXT_BYTES)
        .ok()
        .and_then(|t| t.lines().next().map(|l| l.trim_start_matches("# ").to_string()))
        .unwrap_or_else(|| "leasequake: merged shards".into());
    let json: serde_json::Value = serde_json::from_str(record).expect("just serialised");
    let parts: Vec<super::check::SuitePart<'_>> = experiments
        .iter()
        .zip(merged)
        .map(|(s, m)| super::check::SuitePart { name: &s.name, exp: &s.exp, metrics: &m.metrics, failed: &m.failed })
        .collect();
    super::check::suite_pages(stage, &title, &host::merged_words(&json).unwrap_or_default(), &parts)?;
    Ok(())
}

/// Each trial's directory of a shard (`trials/NNNN/`, and earlier attempts
/// `NNNN.interrupted-K/`), copied: the shard keeps its own.
fn copy_trials(from: &Path, to: &Path, stopped: &AtomicBool) -> Result<(), Error> {
    let Ok(entries) = std::fs::read_dir(from) else { return Ok(()) };
    std::fs::create_dir_all(to).map_err(Error::io(to))?;
    for entry in entries {
        halt_if(stopped)?;
        let entry = entry.map_err(Error::io(from))?;
        let dest = to.join(entry.file_name());
        if dest.exists() {
            return Err(Error::Conflict(format!(
                "merge: two shards hold {}: they overlap",
                Path::new("trials").join(entry.file_name()).display()
            )));
        }
        copy_tree(&entry.path(), &dest)?;
    }
    Ok(())
}

/// Stop here if a signal came: the caller removes what was begun.
fn halt_if(stopped: &AtomicBool) -> Result<(), Error> {
    if stopped.load(Ordering::SeqCst) {
        return Err(Error::Stopped("the merge was stopped; nothing was left at OUT".into()));
    }
    Ok(())
}

/// A file, a symbolic link (as a link) or a directory and all it holds;
/// sockets and pipes a server left behind are not content, and are skipped.
fn copy_tree(from: &Path, to: &Path) -> Result<(), Error> {
    let kind = std::fs::symlink_metadata(from).map_err(Error::io(from))?.file_type();
    if kind.is_symlink() {
        let target = std::fs::read_link(from).map_err(Error::io(from))?;
        std::os::unix::fs::symlink(target, to).map_err(Error::io(to))
    } else if kind.is_dir() {
        std::fs::create_dir(to).map_err(Error::io(to))?;
        for entry in std::fs::read_dir(from).map_err(Error::io(from))? {
            let entry = entry.map_err(Error::io(from))?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else if kind.is_file() {
        std::fs::copy(from, to).map(drop).map_err(Error::io(to))
    } else {
        Ok(())
    }
}

/// A new hidden directory beside `out`, where the merge is put together,
/// and the outermost directory created for it (to remove if it fails).
fn staging(out: &Path) -> Result<(PathBuf, Option<PathBuf>), Error> {
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let made = parent.ancestors().take_while(|a| !a.as_os_str().is_empty() && !a.exists()).last();
    let made = made.map(Path::to_path_buf);
    std::fs::create_dir_all(parent).map_err(Error::io(parent))?;
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "merge".into());
    super::inputs::remove_stale(parent, &format!(".{name}.merging-"), "");
    let stage = parent.join(format!(".{name}.merging-{}", std::process::id()));
    std::fs::create_dir(&stage).map_err(Error::io(&stage))?;
    Ok((stage, made))
}

/// The finished merge renamed to `out` (an empty directory there is
/// replaced): OUT appears whole or not at all.
fn place(stage: &Path, out: &Path) -> Result<(), Error> {
    if out.is_dir() {
        std::fs::remove_dir(out).map_err(Error::io(out))?;
    }
    std::fs::rename(stage, out).map_err(Error::io(out))
}
