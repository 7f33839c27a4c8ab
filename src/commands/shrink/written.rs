//! What a shrink writes: shrunk.yaml (a program named from the file
//! itself, so that it runs from any clone), README.md, and the timeline of
//! a reproducing run.

use std::path::{Path, PathBuf};

use super::{Confirm, Found, Plan};
use crate::check::stats::wilson95;
use crate::check::{CheckParams, check};
use crate::error::Error;
use crate::experiment::{Overrides, load, to_yaml};
use crate::model::{Dur, Experiment, Fault, PauseLen};
use crate::report::read::read_histories;
use crate::warnln;

pub(super) fn timeline(plan: &Plan, exp: &Experiment, dir: &Path, trial: u32, path: &Path) {
    let drawn = read_histories(dir, Some(&[trial].into()), exp.workers).ok().and_then(|mut h| h.remove(&trial));
    let Some(history) = drawn else { return };
    let m = check(&history, &CheckParams::of(exp));
    let title = format!("{}: a run of the shrunk schedule ({})", plan.base.name, plan.violation.name());
    if let Err(e) = crate::report::timeline::render(path, &title, &history, &m, exp.workers, exp.time_scale) {
        warnln!("warning: {}: {e}", path.display());
    }
}

/// shrunk.yaml and README.md as the shrink stands; the file must load back
/// as written (it is the result).
pub(super) fn write_result(plan: &Plan, out: &Path, exp: &Experiment, found: &Found) -> Result<(), Error> {
    let io = |p: PathBuf| move |source| Error::Io { path: p, source };
    let path = out.join("shrunk.yaml");
    std::fs::write(&path, shrunk_yaml(plan, exp, out, found.outcome.shrunk.len(), found.confirm))
        .map_err(io(path.clone()))?;
    if let Err(e) = load(&path, &Overrides::default()) {
        // Not the user's input: the harness wrote what it cannot read.
        let problem = format!("the shrunk experiment it wrote does not load back: {e}");
        return Err(Error::Io { path, source: std::io::Error::other(problem) });
    }
    std::fs::write(out.join("README.md"), readme(plan, found)).map_err(io(out.join("README.md")))
}

pub(super) fn shrunk_yaml(plan: &Plan, exp: &Experiment, out: &Path, left: usize, confirm: Confirm) -> String {
    let rate = match confirm {
        Confirm::Done(k, n, _, clean) => {
            format!("it failed the same way in {k}/{n} runs on fresh seeds{}", clean.words(n))
        }
        _ => "not yet confirmed".to_string(),
    };
    let described = Experiment {
        description: format!(
            "Shrunk by leasequake shrink from trial {} of {} ({}): faults {} → {left}; {rate}.",
            plan.trial,
            plan.dir.display(),
            plan.violation.name(),
            plan.original.len(),
        ),
        program: exp.program.clone().map(|p| portable(p, out)),
        ..exp.clone()
    };
    format!(
        "# The shrunk schedule. Durations are as they ran (scaled_by): run it as it is,\n\
         # `leasequake run shrunk.yaml`.\n{}",
        to_yaml(&described)
    )
}

/// The program with each absolute path it names that shares a directory
/// with `out` (a file of the same checkout) rewritten relative to
/// `{experiment_dir}`, the shrunk file's own directory: the file then runs
/// in any clone that keeps it beside the programs, as committed results
/// are. System paths (sharing only `/`) stay as they are.
fn portable(mut p: crate::model::program::Program, out: &Path) -> crate::model::program::Program {
    let Ok(here) = out.canonicalize() else { return p };
    let rel = |s: &mut String| {
        if !Path::new(s.as_str()).is_absolute() {
            return;
        }
        // The directory resolved, not the file: a virtualenv's python is a
        // link to the system's, and the venv is what must be named.
        let path = Path::new(s.as_str());
        let (Some(dir), Some(file)) = (path.parent(), path.file_name()) else { return };
        let Ok(there) = dir.canonicalize().map(|d| d.join(file)) else { return };
        if !there.exists() {
            return;
        }
        if let Some(r) = relative(&here, &there) {
            *s = format!("{{experiment_dir}}/{}", r.display());
        }
    };
    p.command.iter_mut().for_each(rel);
    p.env.values_mut().for_each(rel);
    if let Some(cwd) = p.cwd.as_mut() {
        rel(cwd);
    }
    // The writer fills `{experiment_dir}` with this: keep the placeholder.
    p.experiment_dir = "{experiment_dir}".to_string();
    p
}

/// `to` relative to the directory `from` (both canonical), when they share
/// two directories below the root (a checkout, not just `/home` or `/tmp`).
fn relative(from: &Path, to: &Path) -> Option<PathBuf> {
    let (a, b): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common < 3 {
        return None;
    }
    let mut r: PathBuf = std::iter::repeat_n("..", a.len() - common).collect();
    r.extend(&b[common..]);
    Some(r)
}

pub(super) fn readme(plan: &Plan, found: &Found) -> String {
    let o = &found.outcome;
    let scale = plan.base.time_scale;
    let own = |d: Dur| crate::shrink::own_time(d, scale);
    let host = super::super::facts::machine();
    let mut s = format!(
        "# Shrunk: {}, trial {}\n\nFrom `{}`, trial {} (seed {}), which violated **{}**.\n\n",
        plan.base.name,
        plan.trial,
        plan.dir.display(),
        plan.trial,
        plan.seed,
        plan.violation.name()
    );
    match found.confirm {
        Confirm::Done(k, n, _, clean) => {
            let (lo, hi) = wilson95(k as usize, n as usize);
            s += &format!(
                "- Faults: **{} → {}**.\n- Reproduction rate of the shrunk schedule: **{k}/{n}** runs \
                 (95 % CI {:.1}–{:.1} %), fresh seeds{}.\n",
                plan.original.len(),
                o.shrunk.len(),
                lo * 100.0,
                hi * 100.0,
                clean.words(n)
            );
        }
        Confirm::Pending => {
            s += &format!(
                "- Faults: **{} → {}**.\n- Reproduction rate of the shrunk schedule: not yet measured (its \
                 confirmation runs under `confirm/`).\n",
                plan.original.len(),
                o.shrunk.len()
            );
        }
        Confirm::Nothing => {
            s += &format!(
                "- The recorded schedule did **not** reproduce: it failed the same way in fewer than {} of {} runs; \
                 nothing was shrunk.\n",
                plan.settings.need, plan.settings.repeats
            );
        }
    }
    s += &format!(
        "- Search: {} candidates, {} trials of a budget of {}{}; a candidate was kept when at least {} of its {} runs \
         failed the same way; then the confirmation's runs.\n- Wall time: {:.0} s on {} ({} cores, {}).\n\n",
        o.steps.len(),
        o.spent,
        plan.settings.budget,
        if o.out_of_budget { " (it ran out)" } else { "" },
        plan.settings.need,
        plan.settings.repeats,
        found.seconds,
        host.hostname,
        host.cores,
        host.cpu
    );
    s += &format!(
        "Times are in the experiment's own time (time scale {}). `shrunk.yaml` runs the shrunk schedule; \
         `steps.csv` lists every candidate, whose results are under `candidates/`; `confirm/` holds the \
         confirmation runs.\n\n## The shrunk schedule\n\n",
        plan.base.time_scale
    );
    s += &schedule_table(&o.shrunk, &own);
    s += "\n## The recorded schedule\n\n";
    let original: Vec<Fault> = plan.original.iter().map(|e| e.fault.clone()).collect();
    s += &schedule_table(&original, &own);
    s += "\n## Steps\n\n| step | phase | change | faults | reproduced | kept |\n|---|---|---|---|---|---|\n";
    for st in &o.steps {
        s += &format!(
            "| {} | {} | {} | {} | {}/{} | {} |\n",
            st.step,
            st.phase,
            st.change,
            st.faults,
            st.hits,
            st.runs,
            if st.kept { "yes" } else { "" }
        );
    }
    if let Confirm::Done(_, _, Some(t), _) = found.confirm {
        s += &format!("\n## One reproducing run\n\nConfirmation trial {t}:\n\n![timeline](timeline.svg)\n");
    }
    s
}

fn schedule_table(faults: &[Fault], own: &dyn Fn(Dur) -> String) -> String {
    if faults.is_empty() {
        return "No faults at all.\n".into();
    }
    let mut s = String::from("| # | when | action | target | length |\n|---|---|---|---|---|\n");
    for (i, f) in faults.iter().enumerate() {
        let when = match f.after {
            Some(a) => {
                format!("{} after the target's next `{}` (armed at {})", own(a.delay), a.event.name(), own(f.at))
            }
            None => own(f.at),
        };
        let len = match &f.duration {
            Some(PauseLen::Fixed(d)) => own(*d),
            Some(l) => l.scaled(1.0).to_yaml(),
            None => String::new(),
        };
        s += &format!("| {} | {when} | {} | {} | {len} |\n", i + 1, f.action.name(), f.target);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_in_the_same_tree_is_named_from_the_shrunk_file_and_a_system_one_as_it_was() {
        let up = relative(Path::new("/a/b/r/x/s"), Path::new("/a/b/p/w.py"));
        assert_eq!(up, Some(PathBuf::from("../../../p/w.py")));
        assert_eq!(relative(Path::new("/a/b/r"), Path::new("/a/b/r/w.py")), Some(PathBuf::from("w.py")));
        assert_eq!(relative(Path::new("/a/r"), Path::new("/usr/bin/sh")), None, "only the root in common");
        assert_eq!(relative(Path::new("/tmp/x"), Path::new("/tmp/y/w.py")), None, "only /tmp in common");
        let tree = tempfile::tempdir().unwrap();
        let (out, prog) = (tree.path().join("results/x/shrink"), tree.path().join("examples/w.py"));
        std::fs::create_dir_all(&out).unwrap();
        std::fs::create_dir_all(prog.parent().unwrap()).unwrap();
        std::fs::write(&prog, "").unwrap();
        use crate::model::program::{Observe, Program, ProgramExpiry, Stamp};
        let p = Program {
            command: vec![
                "/bin/sh".into(),
                out.join("../../../examples/w.py").display().to_string(),
                "--lock".into(),
                "{lock}".into(),
            ],
            shell: false,
            env: [("P".to_string(), prog.parent().unwrap().display().to_string())].into(),
            observe: Observe::Protocol,
            timestamps: Stamp::Program,
            patterns: Vec::new(),
            ready: true,
            max_lines: 10,
            expiry: ProgramExpiry::Exact,
            cwd: Some(tree.path().join("missing").display().to_string()),
            experiment_dir: tree.path().join("results/x").display().to_string(),
        };
        let p = portable(p, &out);
        assert_eq!(p.command, ["/bin/sh", "{experiment_dir}/../../../examples/w.py", "--lock", "{lock}"]);
        assert_eq!(p.env["P"], "{experiment_dir}/../../../examples");
        assert!(p.cwd.unwrap().starts_with('/'), "a path that does not exist is left as it is");
        assert_eq!(p.experiment_dir, "{experiment_dir}");
    }
}
