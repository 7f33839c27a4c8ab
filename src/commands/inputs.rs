//! What the commands share: finding and loading experiment files,
//! re-checking a results directory's histories, and the verdict on
//! `expect:`.

use std::path::{Path, PathBuf};

use crate::check::{CheckParams, Checker, TrialMetrics};
use crate::error::Error;
use crate::experiment::{Overrides, load};
use crate::model::Experiment;
use crate::model::history::{Event, History};
use crate::report::read::TrialReader;
use crate::report::thresholds::checks as expectation_checks;
use crate::sayln;

/// How far into a directory experiment files are looked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// Its own *.yaml files (`run`: a suite is one directory's files).
    Flat,
    /// Its subdirectories' too (`validate`, `plan`, `list`).
    Deep,
}

/// How many directory levels `Depth::Deep` descends, at most.
const MAX_DEPTH: usize = 8;

/// Files as given; directories become their *.yaml files, sorted.
pub fn expand(paths: &[PathBuf], depth: Depth) -> Result<Vec<PathBuf>, Error> {
    let mut files = Vec::new();
    for p in paths {
        if !p.is_dir() {
            files.push(p.clone());
            continue;
        }
        let levels = if depth == Depth::Deep { MAX_DEPTH } else { 0 };
        let found = yaml_files(p, levels).map_err(|e| Error::Path { path: p.clone(), problem: e.to_string() })?;
        if found.is_empty() {
            let deeper = if depth == Depth::Flat { yaml_files(p, MAX_DEPTH).unwrap_or_default() } else { Vec::new() };
            let problem = if deeper.is_empty() {
                "directory holds no .yaml experiment".to_string()
            } else {
                let mut subdirs: Vec<String> = deeper
                    .iter()
                    .filter_map(|f| f.parent()?.strip_prefix(p).ok().map(|d| format!("{}/", d.display())))
                    .collect();
                subdirs.dedup();
                let shown = subdirs.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
                let more = if subdirs.len() > 5 { ", …" } else { "" };
                format!(
                    "directory holds no .yaml experiment of its own; its subdirectories hold {} ({shown}{more}): \
                     name one (`validate`, `plan` and `list` take the whole tree)",
                    deeper.len()
                )
            };
            return Err(Error::Path { path: p.clone(), problem });
        }
        files.extend(found);
    }
    Ok(files)
}

/// The *.yaml files in `dir`, and `levels` levels of subdirectories below
/// it (hidden ones and symbolic links to directories left out), sorted.
fn yaml_files(dir: &Path, levels: usize) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)?.flatten() {
        let path = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        match entry.file_type() {
            Ok(t) if t.is_dir() && levels > 0 && !hidden => found.extend(yaml_files(&path, levels - 1)?),
            _ if path.extension().is_some_and(|x| x == "yaml" || x == "yml") && path.is_file() => found.push(path),
            _ => {}
        }
    }
    found.sort();
    Ok(found)
}

/// The experiments whose name matches one of the globs (`*` any run of
/// characters, `?` one), in their order; no glob keeps them all. Globs
/// that together match none are refused, naming what there is; one of
/// several that matches none is warned of.
pub fn filter(exps: Vec<Experiment>, globs: &[String]) -> Result<Vec<Experiment>, Error> {
    if globs.is_empty() {
        return Ok(exps);
    }
    let idle: Vec<&String> = globs.iter().filter(|g| !exps.iter().any(|e| glob(g, &e.name))).collect();
    if idle.len() == globs.len() {
        let names: Vec<&str> = exps.iter().map(|e| e.name.as_str()).collect();
        let asked: Vec<String> = globs.iter().map(|g| format!("--filter {g}")).collect();
        return Err(Error::Conflict(format!(
            "{}: {} none of the {} ({})",
            asked.join(", "),
            if globs.len() == 1 { "matches" } else { "match" },
            super::words::counted(names.len() as u64, "experiment"),
            names.join(", ")
        )));
    }
    for g in idle {
        crate::warnln!("warning: --filter {g} matches no experiment (the others do)");
    }
    Ok(exps.into_iter().filter(|e| wanted(globs, &e.name)).collect())
}

/// Is an experiment of this name picked by the globs (all are, by none)?
pub fn wanted(globs: &[String], name: &str) -> bool {
    globs.is_empty() || globs.iter().any(|g| glob(g, name))
}

/// Does `name` match `pattern` (`*`, `?`; everything else literal)?
fn glob(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // The classic two-pointer match with one backtrack point per `*`.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

/// Load every file, each error collected: all are reported together,
/// before anything is spawned or written.
pub fn load_all(files: &[PathBuf], overrides: &Overrides) -> Result<Vec<Experiment>, Error> {
    let (mut exps, mut errors) = (Vec::new(), Vec::new());
    for f in files {
        match load(f, overrides) {
            Ok(e) => exps.push(e),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() { Ok(exps) } else { Err(Error::Experiments(errors)) }
}

/// The experiments' directories of a suite's results directory (those
/// holding an experiment.yaml), in name order.
pub fn experiment_dirs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(dir)?.flatten().map(|e| e.path()).filter(|p| p.join("experiment.yaml").is_file()).collect();
    dirs.sort();
    Ok(dirs)
}

/// A directory to write into must be new or empty: two runs never mix.
pub fn ensure_empty(out: &Path, flag: &str) -> Result<(), Error> {
    let problem = if out.exists() && !out.is_dir() {
        format!("{flag}: exists and is not a directory")
    } else if out.read_dir().is_ok_and(|mut d| d.next().is_some()) {
        format!("{flag}: directory exists and is not empty; refusing to mix two runs")
    } else {
        return Ok(());
    };
    Err(Error::Path { path: out.to_path_buf(), problem })
}

/// Refuse a results directory written in another layout.
pub fn same_format(dir: &std::path::Path) -> Result<(), Error> {
    let found = crate::report::read::results_format(dir)?;
    let wanted = crate::report::rows::RESULTS_FORMAT;
    if found == wanted { Ok(()) } else { Err(Error::Format { dir: dir.to_path_buf(), found, wanted }) }
}

/// The most workers any trial of the experiment (any sweep point) runs.
pub fn most_workers(exp: &Experiment) -> usize {
    exp.units().iter().map(|(u, _)| u.workers).max().unwrap_or(exp.workers)
}

/// What a run of the experiment asks of the machine's limits at once.
pub fn demand(exp: &Experiment) -> crate::trial::Demand {
    crate::trial::Demand {
        workers: most_workers(exp),
        jobs: exp.jobs,
        proxied: exp.units().iter().any(|(u, _)| u.proxied()),
        clock_moved: exp.units().iter().any(|(u, _)| crate::trial::moves_program_clock(u)),
    }
}

/// The metrics of a results directory's finished trials, re-checked from
/// their histories one trial at a time (never the whole history in
/// memory: each is judged as it is read), in trial order: the trials its
/// trials.csv lists (each of which must be whole, and within the
/// experiment), or every trial of a history put together by hand (no
/// trials.csv). `keep` is handed what a timeline draws of each history
/// (its faults and exits) after its check. `what` names the command in the
/// errors.
pub fn finished_metrics(
    dir: &Path,
    exp: &Experiment,
    what: &str,
    keep: impl FnMut(u32, History),
) -> Result<Vec<(u32, usize, TrialMetrics)>, Error> {
    metrics_of(dir, exp, what, None, keep)
}

/// The same for one unit (sweep point) of the run: only its trials' histories
/// are read and checked.
pub fn unit_metrics(dir: &Path, exp: &Experiment, what: &str, unit: usize) -> Result<Vec<(u32, TrialMetrics)>, Error> {
    Ok(metrics_of(dir, exp, what, Some(unit), |_, _| {})?.into_iter().map(|(t, _, m)| (t, m)).collect())
}

fn metrics_of(
    dir: &Path,
    exp: &Experiment,
    what: &str,
    only: Option<usize>,
    mut keep: impl FnMut(u32, History),
) -> Result<Vec<(u32, usize, TrialMetrics)>, Error> {
    use crate::report::read::{finished_trials, read_trials};
    let units = exp.units();
    let listed = if dir.join("trials.csv").exists() { Some(finished_trials(dir)?) } else { None };
    if let Some(listed) = &listed {
        let most = exp.most_trials();
        if let Some(beyond) = listed.iter().find(|t| **t > most) {
            return Err(Error::Path {
                path: dir.join("trials.csv"),
                problem: format!("{what}: lists trial {beyond}, but the experiment has {most} trial(s)"),
            });
        }
    }
    let mine = |t: u32| only.is_none_or(|u| exp.unit_of(units.len(), t) == u);
    let listed = listed.map(|l| l.into_iter().filter(|&t| mine(t)).collect::<std::collections::BTreeSet<u32>>());
    let mut judge = Judge::new(exp, &units, mine, &mut keep);
    read_trials(dir, listed.as_ref(), most_workers(exp), &mut judge)?;
    let mut metrics = judge.metrics;
    metrics.sort_by_key(|(t, _, _)| *t);
    if let Some(listed) = &listed {
        let found: std::collections::BTreeSet<u32> = metrics.iter().map(|(t, _, _)| *t).collect();
        let missing: Vec<String> = listed.difference(&found).map(u32::to_string).collect();
        if !missing.is_empty() {
            return Err(Error::Path {
                path: dir.join("events.csv"),
                problem: format!(
                    "{what}: holds no events of trial(s) {} listed in trials.csv; this is not as a run left it",
                    abbreviate(&missing)
                ),
            });
        }
    }
    Ok(metrics)
}

/// Trial `trial` of a run of `exp` judged from its events file at `path`
/// (a trial's own): its metrics, and what a timeline draws of it. A
/// `whole` trial must have its end and every exit; one still running is
/// judged up to its latest events.
pub fn judge_trial(path: &Path, exp: &Experiment, trial: u32, whole: bool) -> Result<(TrialMetrics, History), Error> {
    let units = exp.units();
    let mut drawn = None;
    let mut keep = |_, history| drawn = Some(history);
    let mut judge = Judge::new(exp, &units, |_| true, &mut keep);
    let only = std::collections::BTreeSet::from([trial]);
    crate::report::read::read_trials_at(path, whole.then_some(&only), most_workers(exp), &mut judge)?;
    let metrics = judge.metrics.pop();
    match (metrics, drawn) {
        (Some((t, _, metrics)), Some(drawn)) if t == trial => Ok((metrics, drawn)),
        _ => Err(Error::Path { path: path.into(), problem: format!("holds no events of trial {trial} alone") }),
    }
}

/// Trials judged as their histories are read.
struct Judge<'a, M, K> {
    exp: &'a Experiment,
    units: &'a [(&'a Experiment, String)],
    mine: M,
    /// The trial being read, its unit and its checker.
    current: Option<(u32, usize, Checker)>,
    /// Its faults and exits, what a timeline draws.
    drawn: Vec<Event>,
    metrics: Vec<(u32, usize, TrialMetrics)>,
    keep: &'a mut K,
}

impl<'a, M, K> Judge<'a, M, K> {
    fn new(exp: &'a Experiment, units: &'a [(&'a Experiment, String)], mine: M, keep: &'a mut K) -> Self {
        Judge { exp, units, mine, current: None, drawn: Vec::new(), metrics: Vec::new(), keep }
    }
}

impl<M: Fn(u32) -> bool, K: FnMut(u32, History)> TrialReader for Judge<'_, M, K> {
    type Error = Error;

    fn begin(&mut self, trial: u32) -> Result<(), Error> {
        self.current = (self.mine)(trial).then(|| {
            let unit = self.exp.unit_of(self.units.len(), trial);
            (trial, unit, Checker::new(&CheckParams::of(self.units[unit].0)))
        });
        self.drawn.clear();
        Ok(())
    }

    fn instant(&mut self, events: Vec<Event>) -> Result<(), Error> {
        if let Some((_, _, checker)) = &mut self.current {
            checker.instant(&events);
            self.drawn.extend(events.into_iter().filter(crate::report::timeline::draws));
        }
        Ok(())
    }

    fn end(&mut self, _trial: u32) -> Result<(), Error> {
        if let Some((t, unit, checker)) = self.current.take() {
            self.metrics.push((t, unit, checker.finish()));
            (self.keep)(t, History { events: std::mem::take(&mut self.drawn) });
        }
        Ok(())
    }
}

/// The unit (sweep point) of a run named as trials.csv's `setting` names
/// it, or an error saying which there are, led by `what` (the flag or
/// argument that named it).
pub fn unit_named(exp: &Experiment, dir: &Path, point: &str, what: &str) -> Result<usize, Error> {
    let all = exp.units();
    let own = |(unit, label): &(&Experiment, String)| crate::experiment::own_label(label, unit.time_scale);
    // As trials.csv names it (as run, scaled), or in the experiment's own
    // time; a name that is one point's as run and another's own is refused.
    let as_run = all.iter().position(|u| same_point(&u.1, point));
    let in_own = all.iter().position(|u| same_point(&own(u), point));
    if let (Some(r), Some(o)) = (as_run, in_own)
        && r != o
    {
        return Err(Error::Conflict(format!(
            "{what}: {point} names two points of {}: as run, the point of {} in the experiment's own time, and in \
             own time, the point run as {}: ask for one of those names",
            dir.display(),
            own(&all[r]),
            all[o].1
        )));
    }
    as_run.or(in_own).ok_or_else(|| {
        let labels: Vec<&str> = all.iter().map(|(_, l)| l.as_str()).filter(|l| !l.is_empty()).collect();
        let owns: Vec<String> = all.iter().filter(|(_, l)| !l.is_empty()).map(own).collect();
        let there = if labels.is_empty() {
            "it has no sweep".to_string()
        } else if owns.iter().map(String::as_str).eq(labels.iter().copied()) {
            format!("its points: {}", labels.join(", "))
        } else {
            format!("its points: {}; as run, scaled, as trials.csv names them: {}", owns.join(", "), labels.join(", "))
        };
        Error::Conflict(format!("{what}: {} has no sweep point {point} ({there})", dir.display()))
    })
}

/// Two names of one point: the same settings in any order, a duration in
/// any unit (`watch=1s` is `watch=1000ms`).
fn same_point(label: &str, asked: &str) -> bool {
    let pairs = |l: &str| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = l
            .split_whitespace()
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                let v = crate::model::Dur::parse(v).map_or_else(|_| v.to_string(), |d| format!("{}us", d.as_us()));
                (k.to_string(), v)
            })
            .collect();
        v.sort();
        v
    };
    !label.is_empty() && pairs(label) == pairs(asked)
}

/// Print each expectation of the experiment with ✓ or ✗ (as k6 prints its
/// thresholds), a failed one's first reasons under it.
pub fn verdict(exp: &Experiment, trials: &[(u32, &TrialMetrics)]) -> Result<(), Error> {
    said_verdict(exp, &expectation_checks(exp, trials))
}

/// The same, for expectations already checked.
pub fn said_verdict(exp: &Experiment, checks: &[crate::report::summary::ExpectCheck]) -> Result<(), Error> {
    if checks.is_empty() {
        return Ok(());
    }
    let failed = checks.iter().filter(|c| !c.failures.is_empty()).count();
    let scaled = if exp.time_scale == 1.0 {
        String::new()
    } else {
        format!(" (durations in the experiment's own time; run at time scale {})", exp.time_scale)
    };
    match failed {
        0 => sayln!("  expectations:   all {} held", checks.len()),
        n => sayln!("  expectations:   {n} of {} failed{scaled}", checks.len()),
    }
    for c in checks {
        sayln!("    {} {}", if c.failures.is_empty() { "✓" } else { "✗" }, c.expect);
        for f in c.failures.iter().take(5) {
            sayln!("        {f}");
        }
        if c.failures.len() > 5 {
            sayln!("        … {} more", c.failures.len() - 5);
        }
    }
    if failed == 0 { Ok(()) } else { Err(Error::ExpectFailed(vec![exp.name.clone()])) }
}

/// Remove what a killed command left in `dir`: every `<prefix><PID><suffix>`
/// directory whose process is gone (a live one's is its own business).
pub fn remove_stale(dir: &Path, prefix: &str, suffix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) =
            name.strip_prefix(prefix).and_then(|n| n.strip_suffix(suffix)).and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH);
        if gone && e.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A new directory `parent/<prefix><UTC timestamp>` (`-2`, `-3`, … when
/// the second is taken): a command's output never lands on an earlier one.
/// `parent` is a directory inside a results directory (checks/, shrink/):
/// a symbolic link there would take the output out of it, and is refused.
pub fn new_dir(parent: &Path, prefix: &str) -> Result<PathBuf, Error> {
    if parent.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(Error::Path {
            path: parent.to_path_buf(),
            problem: "is a symbolic link: a command writes only inside the results directory".into(),
        });
    }
    std::fs::create_dir_all(parent).map_err(|source| Error::Io { path: parent.to_path_buf(), source })?;
    let stamp = crate::model::clock::utc_stamp(crate::model::clock::wall_ns() / 1_000_000_000);
    for n in 1..1000 {
        let name = if n == 1 { format!("{prefix}{stamp}") } else { format!("{prefix}{stamp}-{n}") };
        match std::fs::create_dir(parent.join(&name)) {
            Ok(()) => return Ok(parent.join(name)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(Error::Io { path: parent.join(name), source }),
        }
    }
    Err(Error::Path { path: parent.to_path_buf(), problem: "no free directory name for this second".into() })
}

/// "1, 2, 3, … (12 in all)".
pub fn abbreviate(items: &[String]) -> String {
    if items.len() <= 10 {
        items.join(", ")
    } else {
        format!("{}, … ({} in all)", items[..10].join(", "), items.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_named_in_any_order_and_any_unit() {
        assert!(same_point("lease=850ms renew=300ms", "renew=0.3s lease=850ms"));
        assert!(same_point("watch=1s", "watch=1000ms") && !same_point("watch=1s", "watch=1s lease=9s"));
        assert!(same_point("substrate=redis", "substrate=redis") && !same_point("substrate=redis", "substrate=file"));
        assert!(!same_point("", ""), "an experiment without a sweep has no point");
    }

    #[test]
    fn globs_match_names_whole() {
        assert!(glob("sigkill-*", "sigkill-gap"));
        assert!(glob("*gap", "sigkill-gap") && glob("*", "") && glob("s?g*", "sigterm"));
        assert!(!glob("sigkill", "sigkill-gap"), "whole names, not parts");
        assert!(!glob("*kill", "sigkill-gap"));
        assert!(glob("*-*-*", "a-b-c") && !glob("*-*-*", "a-b"));
    }

    #[test]
    fn a_tree_is_searched_deep_only_when_asked_and_a_flat_miss_says_where() {
        let tmp = tempfile::tempdir().unwrap();
        let sub = tmp.path().join("blog");
        std::fs::create_dir_all(sub.join(".hidden")).unwrap();
        std::fs::write(sub.join("a.yaml"), "").unwrap();
        std::fs::write(sub.join(".hidden/b.yaml"), "").unwrap();
        let root = [tmp.path().to_path_buf()];
        assert_eq!(expand(&root, Depth::Deep).unwrap(), vec![sub.join("a.yaml")]);
        let err = expand(&root, Depth::Flat).unwrap_err().to_string();
        assert!(err.contains("its subdirectories hold 1 (blog/)"), "{err}");
    }
}
