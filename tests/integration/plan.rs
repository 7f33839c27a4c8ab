//! Before and around a run: `plan`, trials until the interval is narrow
//! enough, completions and the manual page.

use crate::helper::{Lab, bin, repo};

fn leasequake(lab: &Lab, args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(bin()).current_dir(lab.path()).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn plan_shows_the_schedule_the_time_and_the_warnings_and_runs_nothing() {
    let lab = Lab::new();
    let blog = repo().join("experiments/blog");
    let kill = blog.join("sigkill-gap.yaml").display().to_string();
    let (code, out, err) = leasequake(&lab, &["plan", &kill, "--time-scale", "0.1", "--jobs", "2"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("  10 trials of 30s"), "{out}");
    assert!(out.contains("2 at a time: about"), "{out}");
    // More jobs than trials: no faster than one trial; a sweep lists its points.
    let few = lab.file("few.yaml", "name: f\nworkers: 2\nduration: 15s\ntrials: 1\nsweep:\n  lease: [9s, 12s]\n");
    let few = few.display().to_string();
    let (_, few, _) = leasequake(&lab, &["plan", &few, "--time-scale", "0.1", "--jobs", "8"]);
    assert!(
        few.contains("2 points × 1 trial = 2 trials of 15s (time scale 0.1: 1500ms each); 2 at a time: about "),
        "{few}"
    );
    assert!(!few.contains("about 1 s"), "two 1.5 s trials side by side take 1.5 s at least: {few}");
    assert!(few.contains("  points: lease=9s, lease=12s\n"), "{few}");
    assert!(few.contains("  as run (trials.csv's setting): lease=900ms, lease=1200ms\n"), "{few}");
    // The protocol-relative kill is armed, not placed: in the file's own time.
    assert!(out.contains("8.500 s  kill leader: armed, fires 2.470 s after the target's next `renewed`"), "{out}");
    // A random kill: the time the run will use, drawn from trial 1's seed.
    let random = blog.join("random-kills.yaml").display().to_string();
    let (_, again, _) = leasequake(&lab, &["plan", &random]);
    let (_, same, _) = leasequake(&lab, &["plan", &random]);
    assert!(again.contains("kill leader") && again == same, "{again}");
    // At 1/1000 a 3 s renewal is 3 ms: a millisecond of fault error is a
    // third of it, and a renewal a third of the interval.
    let (_, tiny, _) = leasequake(&lab, &["plan", &kill, "--time-scale", "0.001"]);
    assert!(tiny.contains("! renew runs at 3.0 ms"), "{tiny}");
    assert!(tiny.contains("! a renewal is a real operation on the file"), "{tiny}");
    // A local deadline on a slow clock, and network faults a program is
    // never given the link for.
    let slow = repo().join("experiments/network/slow-clock.yaml").display().to_string();
    let (_, slow, _) = leasequake(&lab, &["plan", &slow]);
    assert!(slow.contains("! belief: local-deadline on a clock as slow as 0.8"), "{slow}");
    let deaf_file = lab.file(
        "deaf.yaml",
        "name: d\nworkers: 2\nsubstrate: {kind: redis}\nprogram: {command: [sleep, \"60\"]}\n\
         faults:\n  - {at: 5s, target: 0, action: partition}\n",
    );
    let deaf_file = deaf_file.display().to_string();
    let (_, deaf, _) = leasequake(&lab, &["plan", &deaf_file]);
    assert!(deaf.contains("! the program is not given `{address}`"), "{deaf}");
    assert!(!deaf.contains("! time scale"), "a program at its own time: {deaf}");
    // A program scaled: its own constants are not.
    let (_, scaled, _) = leasequake(&lab, &["plan", &deaf_file, "--time-scale", "0.1"]);
    assert!(scaled.contains("! time scale 0.1: a program is scaled only through what it is handed"), "{scaled}");
    assert!(!lab.path().join("results").exists(), "plan wrote nothing");
    // A bad file is exit 2 like everywhere.
    let bad = lab.file("bad.yaml", "name: x\nworkers: 3\nrenew: 10s\n");
    let (code, _, err) = leasequake(&lab, &["plan", &bad.display().to_string()]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn trials_run_until_the_interval_is_narrow_enough_or_the_cap() {
    let lab = Lab::new();
    // No faults: never two leaders. The Wilson interval of 0/n is
    // [0, 3.84 / (n + 3.84)]: at most 30 points wide from n = 9 on.
    let file = lab.file(
        "u.yaml",
        "name: u\nworkers: 2\nduration: 4s\ntrials: {until: {ci_width: 30%}, max: 40, min: 5}\njobs: 1\n",
    );
    let run = lab.run(&file).scale(0.05).output().expect_code(0);
    assert_eq!(run.table("trials.csv").len(), 9, "{}", run.stdout());
    assert!(
        run.stdout().contains("9 trials: trials with two leaders 0/9: its 95 % interval is 29.9 points wide"),
        "{}",
        run.stdout()
    );
    // The cap comes first.
    let capped =
        lab.file("c.yaml", "name: c\nworkers: 2\nduration: 4s\ntrials: {until: {ci_width: 1%}, max: 3, min: 1}\n");
    let run = lab.run(&capped).scale(0.05).output().expect_code(0);
    assert_eq!(run.table("trials.csv").len(), 3);
    assert!(run.stdout().contains("the cap of 3 trials came first"), "{}", run.stdout());
    // --trials fixes the count.
    let fixed = lab.run(&file).scale(0.05).trials(2).output().expect_code(0);
    assert_eq!(fixed.table("trials.csv").len(), 2);
    for (bad, want) in [
        ("{until: {ci_width: 150%}, max: 40}", "4:9: trials: ci_width is \"150%\""),
        ("{until: {ci_width: 10%}, max: 4, min: 5}", "4:9: trials: min (5) must be at least 1 and at most max (4)"),
    ] {
        let f = lab.file("bad.yaml", &format!("name: b\nworkers: 2\nduration: 4s\ntrials: {bad}\n"));
        let (code, _, err) = leasequake(&lab, &["validate", &f.display().to_string()]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn a_tree_of_experiments_is_validated_and_listed_whole_and_picked_by_name() {
    let lab = Lab::new();
    let tree = repo().join("experiments").display().to_string();
    let (code, out, err) = leasequake(&lab, &["validate", &tree]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("experiments/blog/sigkill-gap.yaml") && out.contains("experiments/clients/"), "{out}");
    let (code, out, err) = leasequake(&lab, &["list", &tree, "--filter", "sigkill-*", "--filter", "naive*"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.lines().next().is_some_and(|l| l.starts_with("naive")), "{out}");
    assert!(out.contains("sigkill-gap ") && !out.contains("lease-vs-pauses"), "{out}");
    let (code, out, _) = leasequake(&lab, &["validate", &tree, "--filter", "sigterm-*"]);
    assert_eq!(code, Some(0));
    assert!(out.lines().all(|l| l.contains("(sigterm-")), "{out}");
}

#[test]
fn completions_and_the_manual_page_are_printed() {
    let lab = Lab::new();
    let (code, out, err) = leasequake(&lab, &["completions", "bash"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("_leasequake()") && out.contains("plan"), "{out}");
    // The harness's own children are not offered.
    for internal in ["calibrate-hog", "calibrate-emit", "guard", "exec-program", "worker"] {
        assert!(
            !out.contains(&format!(" {internal} ")) && !out.contains(&format!("__{internal}")),
            "{internal}: {out}"
        );
    }
    let (code, out, _) = leasequake(&lab, &["man"]);
    assert_eq!(code, Some(0));
    assert!(out.contains(".TH leasequake") && out.contains("Chaos harness"), "{out}");
    assert!(out.contains("leasequake\\-reference(1)") && !out.contains("guard"), "{out}");
    // A page for every subcommand it names, each with its flags.
    let pages = lab.path().join("man1");
    let (code, _, err) = leasequake(&lab, &["man", "--dir", &pages.display().to_string()]);
    assert_eq!(code, Some(0), "{err}");
    let run = std::fs::read_to_string(pages.join("leasequake-run.1")).expect("leasequake-run.1");
    assert!(run.contains("\\-\\-time\\-scale"), "{run}");
    for page in ["leasequake.1", "leasequake-compare.1", "leasequake-shrink.1", "leasequake-reference.1"] {
        assert!(pages.join(page).is_file(), "{page}");
    }
    assert!(!pages.join("leasequake-guard.1").exists());
}
