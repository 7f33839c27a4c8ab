//! report.html for an experiment's results directory and for a suite's:
//! written at the end of every run, and by `leasequake report DIR` from the
//! files alone (the history re-checked, as `check` does).

use std::collections::BTreeSet;
use std::path::Path;

use crate::check::TrialMetrics;
use crate::error::Error;
use crate::files::MAX_TEXT_BYTES;
use crate::model::Experiment;
use crate::report::html::{Section, link_reports, page};
use crate::report::summary::Measured;
use crate::report::summary::{per_unit, summarize};

/// Timelines drawn into a report, at most (the first trials).
const TIMELINES: usize = 12;

/// A history larger than this is not read again for timelines.
const MAX_EVENTS_BYTES: u64 = 64 << 20;

/// Replace `path` whole: a reader never sees half of it. The file gets
/// the mode any file the run creates gets (0666 less the umask), not the
/// temporary file's private 0600.
pub fn write_whole(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(parent)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())?;
    tmp.as_file().set_permissions(std::fs::Permissions::from_mode(0o666 & !umask()))?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// The process's umask, read without changing it (umask(2) can only set
/// it, racing every thread that creates a file meanwhile).
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Umask:").map(|m| m.trim().to_string())))
        .and_then(|m| u32::from_str_radix(&m, 8).ok())
        .unwrap_or(0o022)
}

/// Who ran it, where and when, and who re-checked it.
fn preamble(dir: &Path) -> String {
    crate::report::host::words(dir) + " The host and its calibration are at the end."
}

/// Write `dir/report.html` for one experiment from its trials' metrics.
pub fn experiment(
    dir: &Path,
    exp: &Experiment,
    metrics: &[(u32, usize, TrialMetrics)],
    failed: &[String],
) -> Result<(), Error> {
    let page = experiment_page(dir, exp, metrics, failed, ("", &BTreeSet::new()));
    write_whole(&dir.join("report.html"), &page).map_err(|source| Error::Io { path: dir.join("report.html"), source })
}

/// One experiment's page from its trials' metrics; where a run is still
/// writing the directory, `live` says what the page was read from and
/// which trials are still running (their rows are not in events.csv yet:
/// no timeline).
fn experiment_page(
    dir: &Path,
    exp: &Experiment,
    metrics: &[(u32, usize, TrialMetrics)],
    failed: &[String],
    (live, running): (&str, &BTreeSet<u32>),
) -> String {
    let all: Vec<&TrialMetrics> = metrics.iter().map(|(_, _, m)| m).collect();
    let summary = summarize(&all);
    let units = exp.units();
    let run = Measured { exp, summary: &summary, metrics: all, link: ".".into(), failed };
    let points = vec![per_unit(&units, metrics)];
    let scale = if exp.time_scale == 1.0 {
        String::new()
    } else {
        format!(" Time scale {}: every duration is in the experiment's own time.", exp.time_scale)
    };
    let md = crate::report::suite::readme(
        &format!("leasequake: {}", exp.name),
        &(preamble(dir) + &scale + live),
        &[run],
        &points,
    );
    let mut sections = Vec::new();
    for (file, heading) in [("dial.svg", "The dial"), ("histograms.svg", "Gaps per setting")] {
        if let Ok(svg) = crate::files::read_text(&dir.join(file), MAX_TEXT_BYTES) {
            sections.push(Section::Plot { heading: heading.into(), svg });
        }
    }
    // The first trials' timelines, from their histories (not from a
    // history too large to read again in a moment: its timeline.svg is
    // trial 1's).
    let events = std::fs::metadata(dir.join("events.csv")).map_or(0, |m| m.len());
    let take = if events > MAX_EVENTS_BYTES { 0 } else { TIMELINES };
    let first: BTreeSet<u32> = metrics
        .iter()
        .map(|(t, _, _)| *t)
        .filter(|t| !running.contains(t))
        .collect::<BTreeSet<u32>>()
        .into_iter()
        .take(take)
        .collect();
    let workers = super::inputs::most_workers(exp);
    // One pass over the history, one trial's history in memory at a time:
    // each is drawn as it is read, then dropped (all of them at once was
    // the whole run's history, for a run of a few long trials).
    let mut timelines = Vec::new();
    let drawn =
        crate::report::read::each_history(dir, Some(&first), workers, crate::report::timeline::draws, |t, history| {
            let Some((_, unit, m)) = metrics.iter().find(|(x, _, _)| *x == t) else { return Ok(()) };
            let (unit_exp, label) = &units[*unit];
            let what = if label.is_empty() {
                String::new()
            } else {
                format!(", {}", crate::experiment::own_label(label, exp.time_scale))
            };
            let title = format!("trial {t}{what}");
            if let Ok(svg) = crate::report::timeline::svg(&title, &history, m, unit_exp.workers, exp.time_scale) {
                timelines.push((t, format!("{title}: {}", m.outcome()), svg));
            }
            Ok::<(), crate::report::read::ReadError>(())
        });
    // A history that cannot be read again leaves the page without timelines
    // (the run's own check refused it, or it was damaged since).
    if drawn.is_err() {
        timelines.clear();
    }
    // In trial order, whatever order the trials finished in.
    timelines.sort_by_key(|(t, _, _)| *t);
    let timelines = timelines.into_iter().map(|(_, summary, svg)| (summary, svg)).collect();
    sections.push(Section::Timelines(timelines));
    if let Ok(host) = crate::files::read_text(&dir.join("host.json"), MAX_TEXT_BYTES) {
        sections.push(Section::Text { heading: "Host and calibration (host.json)".into(), text: host });
    }
    page(&exp.name, &md, &sections)
}

/// Write `out/report.html` for a suite from its README.md, linking each
/// experiment's own report.
pub fn suite(out: &Path, names: &[String]) -> Result<(), Error> {
    let readme = crate::files::read_text(&out.join("README.md"), MAX_TEXT_BYTES)
        .map_err(|source| Error::Io { path: out.join("README.md"), source })?;
    let mut sections = Vec::new();
    if let Ok(host) = crate::files::read_text(&out.join("host.json"), MAX_TEXT_BYTES) {
        sections.push(Section::Text { heading: "Host and calibration (host.json)".into(), text: host });
    }
    let title = readme.lines().next().unwrap_or("leasequake").trim_start_matches("# ").to_string();
    let html = link_reports(&page(&title, &readme, &sections), names);
    write_whole(&out.join("report.html"), &html).map_err(|source| Error::Io { path: out.join("report.html"), source })
}

/// `leasequake report DIR`: (re)write report.html from the files alone, for
/// an experiment's directory or a suite's (and each of its experiments);
/// with `out`, write an experiment's page there instead (see `live`).
pub fn report(dir: &Path, out: Option<&Path>) -> Result<(), Error> {
    if let Some(page) = out {
        live(dir, page)?;
        crate::sayln!("{}", page.display());
        return Ok(());
    }
    let _held = super::owner::hold(dir, super::owner::Use::Write)?;
    if dir.join("experiment.yaml").exists() {
        let written = one(dir)?;
        crate::sayln!("{}", written.display());
        return Ok(());
    }
    let mut names = Vec::new();
    let entries =
        super::inputs::experiment_dirs(dir).map_err(|source| Error::Io { path: dir.to_path_buf(), source })?;
    for sub in entries {
        let _held = super::owner::hold(&sub, super::owner::Use::Write)?;
        one(&sub)?;
        names.push(sub.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
    }
    if names.is_empty() || !dir.join("README.md").exists() {
        return Err(Error::Path {
            path: dir.to_path_buf(),
            problem:
                "neither a results directory (experiment.yaml) nor a suite's (README.md and experiment directories)"
                    .into(),
        });
    }
    suite(dir, &names)?;
    crate::sayln!("{}", dir.join("report.html").display());
    Ok(())
}

/// `report DIR --out PAGE`: an experiment's page written to PAGE, its
/// directory only read: while a run writes it, what the run has written so
/// far (finished trials, each whole), and each running trial judged from
/// its own events file up to its latest events (its open gaps and tenures
/// end there, as at a trial's end).
fn live(dir: &Path, page: &Path) -> Result<(), Error> {
    if !dir.join("experiment.yaml").exists() {
        let problem = "--out takes an experiment's results directory (with experiment.yaml); a suite's page \
                       links its experiments' own pages, which only `report DIR` writes"
            .into();
        return Err(Error::Path { path: dir.to_path_buf(), problem });
    }
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let parent = page.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if real(parent).starts_with(real(dir)) {
        let problem = format!("--out: inside {}, which it only reads; write the page elsewhere", dir.display());
        return Err(Error::Path { path: page.to_path_buf(), problem });
    }
    let reading = super::owner::read_or_watch(dir)?;
    super::inputs::same_format(dir)?;
    let exp = crate::experiment::load_record(dir).map_err(|e| Error::Experiments(vec![e]))?;
    let mut metrics = super::inputs::finished_metrics(dir, &exp, "report", |_, _| {})?;
    // Expectations are judged on finished trials only.
    let by_trial: Vec<(u32, &TrialMetrics)> = metrics.iter().map(|(t, _, m)| (*t, m)).collect();
    let failed = crate::report::thresholds::failures(&exp, &by_trial);
    let mut note = String::new();
    let mut judged = BTreeSet::new();
    if let super::owner::Reading::Live(writer) = &reading {
        let finished: BTreeSet<u32> = metrics.iter().map(|(t, _, _)| *t).collect();
        let units = exp.units();
        let mut running = Vec::new();
        for (trial, events) in running_trials(dir, &finished, writer.started) {
            match super::inputs::judge_trial(&events, &exp, trial, false) {
                Ok((m, _)) => {
                    judged.insert(trial);
                    running.push(format!("trial {trial} up to {:.1} s", m.end_us as f64 / 1e6));
                    metrics.push((trial, exp.unit_of(units.len(), trial), m));
                }
                Err(e) => running.push(format!("trial {trial} not yet readable ({e})")),
            }
        }
        let running = if running.is_empty() { "none".to_string() } else { running.join(", ") };
        note = format!(
            "\n\nLive: read while {} writes this directory: {} trial(s) finished; running, judged up to their \
             latest events (in the tables, not in the expectations): {running}.",
            writer.who,
            finished.len()
        );
    }
    let html = experiment_page(dir, &exp, &metrics, &failed, (&note, &judged));
    write_whole(page, &html).map_err(|source| Error::Io { path: page.to_path_buf(), source })
}

/// The trials a run is still running in `dir`: each one's number and its
/// own events file, for the trials not `finished` whose file was written
/// since the run `started` (an earlier run's failed trial left its own).
fn running_trials(
    dir: &Path,
    finished: &BTreeSet<u32>,
    started: Option<std::time::SystemTime>,
) -> Vec<(u32, std::path::PathBuf)> {
    // A second's slack: file times and the start time are not to the tick.
    let since = started.map(|s| s - std::time::Duration::from_secs(1));
    let mut found: Vec<(u32, std::path::PathBuf)> = std::fs::read_dir(dir.join("trials"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let trial = e.file_name().to_str()?.parse::<u32>().ok()?;
            let events = e.path().join("events.csv");
            let written = std::fs::metadata(&events).and_then(|m| m.modified()).ok()?;
            (!finished.contains(&trial) && since.is_none_or(|s| written >= s)).then_some((trial, events))
        })
        .collect();
    found.sort();
    found
}

/// One experiment's report, its history re-checked.
fn one(dir: &Path) -> Result<std::path::PathBuf, Error> {
    super::inputs::same_format(dir)?;
    let exp = crate::experiment::load_record(dir).map_err(|e| Error::Experiments(vec![e]))?;
    let metrics = super::inputs::finished_metrics(dir, &exp, "report", |_, _| {})?;
    let by_trial: Vec<(u32, &TrialMetrics)> = metrics.iter().map(|(t, _, m)| (*t, m)).collect();
    let failed = crate::report::thresholds::failures(&exp, &by_trial);
    experiment(dir, &exp, &metrics, &failed)?;
    Ok(dir.join("report.html"))
}
