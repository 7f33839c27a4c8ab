//! What a shrink writes: shrunk.yaml (a program named from the file
//! itself, so that it runs from any clone), README.md, and the timeline of
//! a reproducing run.

use std::path::{Path, PathBuf};

use super::{Confirm, Found, Plan};
use crate::check::{CheckParams, check};
use crate::error::Error;
use crate::experiment::{Overrides, load, to_yaml};
use crate::model::{Experiment, Fault};
use crate::report::read::read_histories;
use crate::report::shrunk::{Budget, Page};
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

/// The shrink's README.md, as it stands.
pub(super) fn readme(plan: &Plan, found: &Found) -> String {
    let o = &found.outcome;
    let recorded: Vec<Fault> = plan.original.iter().map(|e| e.fault.clone()).collect();
    let machine = super::super::facts::machine();
    crate::report::shrunk::readme(&Page {
        name: &plan.base.name,
        trial: plan.trial,
        from: &plan.dir,
        seed: plan.seed,
        violation: &plan.violation.name(),
        time_scale: plan.base.time_scale,
        recorded: &recorded,
        shrunk: &o.shrunk,
        steps: &o.steps,
        budget: Budget {
            repeats: plan.settings.repeats,
            need: plan.settings.need,
            budget: plan.settings.budget,
            spent: o.spent,
            out_of_budget: o.out_of_budget,
        },
        confirm: found.confirm,
        seconds: found.seconds,
        machine: &machine,
    })
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
            clock: Default::default(),
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
