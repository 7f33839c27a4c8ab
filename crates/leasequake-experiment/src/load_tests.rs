//! Loading experiment files: defaults, scaling, and errors that name
//! file:line:column.

use super::*;
use crate::model::{PauseLen, Target, WorkerSettings};

fn load_text(text: &str) -> Result<Experiment, String> {
    load_str(Path::new("t.yaml"), text, &Overrides::default()).map_err(|e| e.to_string())
}

const MINIMAL: &str = "name: t\nworkers: 3\n";

#[test]
fn defaults_are_the_blogs() {
    let e = load_text(MINIMAL).unwrap();
    assert_eq!(e.lease.lease, Dur::from_secs(9));
    assert_eq!(e.lease.renew, Dur::from_secs(3));
    assert_eq!(e.lease.watch, Dur::from_secs(3));
    assert_eq!(e.worker, WorkerSettings::default());
}

#[test]
fn time_scale_scales_every_duration() {
    let text = "name: t\nworkers: 3\nduration: 30s\nfaults:\n  - at: 12s\n    target: leader\n    action: pause\n    duration: 15s\n";
    let o = Overrides { time_scale: Some(0.1), ..Overrides::default() };
    let e = load_str(Path::new("t.yaml"), text, &o).unwrap();
    assert_eq!(e.duration, Dur::from_secs(3));
    assert_eq!(e.lease.resolution, Dur::from_ms(100));
    assert_eq!(e.faults[0].at, Dur::from_ms(1200));
    assert_eq!(e.faults[0].duration, Some(PauseLen::Fixed(Dur::from_ms(1500))));
}

#[test]
fn max_jobs_lowers_an_experiments_jobs_and_never_raises_them() {
    for (file_jobs, most, want) in [(4, 2, 2), (1, 2, 1), (2, 2, 2)] {
        let text = format!("name: t\nworkers: 3\njobs: {file_jobs}\n");
        let o = Overrides { max_jobs: Some(most), ..Overrides::default() };
        assert_eq!(load_str(Path::new("t.yaml"), &text, &o).unwrap().jobs, want, "jobs {file_jobs}, at most {most}");
    }
}

#[test]
fn errors_name_line_and_column() {
    let cases = [
        ("name: t\nworkers: 3\nbogus: 1\n", "t.yaml:3:1: unknown field `bogus`"),
        ("name: t\nworkers: 3\nrenew: 9s\n", "t.yaml:3:8: renew (9s) must be shorter than lease (9s)"),
        ("name: t\nworkers: 0\n", "t.yaml:2:10: workers must be at least 1"),
        ("name: t\nworkers: [3\n", "t.yaml:2:"),
        (
            "name: t\nworkers: 3\nfaults:\n  - at: 12s\n    target: leader\n    action: nuke\n",
            "t.yaml:6:13: unknown variant `nuke`",
        ),
        (
            "name: t\nworkers: 3\nduration: 10s\nfaults:\n  - at: 12s\n    target: leader\n    action: kill\n",
            "t.yaml:5:9: fault at 12s is not before the trial ends",
        ),
        (
            "name: t\nworkers: 3\nfaults:\n  - at: 1s\n    target: 3\n    action: kill\n",
            "t.yaml:5:13: worker index 3 is out of range",
        ),
        (
            "name: t\nworkers: 3\nfaults:\n  - at: 1s\n    target: leader\n    action: pause\n",
            "t.yaml:6:13: pause needs a duration",
        ),
        (
            "name: t\nworkers: 3\nfaults:\n  - at: 1s\n    after: renewd\n    target: leader\n    action: kill\n",
            "t.yaml:5:12: unknown worker event \"renewd\"",
        ),
        ("name: t\nworkers: 3\nlease: 9\n", "t.yaml:3:8: duration \"9\" has no unit"),
        (
            "name: t\nworkers: 3\nworker:\n  failpoint: before-remove\n  failpoint_workers: [3]\n",
            "t.yaml:5:3: failpoint_workers: worker 3 is out of range",
        ),
        (
            "name: t\nworkers: 3\nworker:\n  clock_offset: [1s, -1s]\n",
            "t.yaml:4:3: clock_offset: a list gives one offset per worker: 2 for 3 workers",
        ),
        ("name: t\nworkers: 3\nworker:\n  clock_offset: -2000m\n", "t.yaml:4:3: clock_offset: -120000s is more"),
        (
            "name: t\nworkers: 2\nworker:\n  belief: local-deadline\n  belief_margin: [1s]\n",
            "t.yaml:5:3: belief_margin: a list gives one margin per worker: 1 for 2 workers",
        ),
        (
            "name: t\nworkers: 2\nworker:\n  belief_margin: [1s, 9s]\n",
            "t.yaml:4:3: belief_margin: 9s must be shorter than the lease (9s)",
        ),
    ];
    for (text, want) in cases {
        let got = load_text(text).unwrap_err();
        assert!(got.starts_with(want), "for {text:?}\n got: {got}\nwant: {want}");
    }
}

#[test]
fn scaling_that_breaks_a_setting_names_the_flag() {
    let o = Overrides { time_scale: Some(1e-7), ..Overrides::default() };
    let err = load_str(Path::new("t.yaml"), MINIMAL, &o).unwrap_err().to_string();
    assert!(err.contains("lease is 1us (9s × --time-scale 0.0000001); at least 1ms"), "{err}");
    let o = Overrides { time_scale: Some(1e6), ..Overrides::default() };
    let err = load_str(Path::new("t.yaml"), MINIMAL, &o).unwrap_err().to_string();
    assert!(err.contains("a trial would last"), "{err}");
}

#[test]
fn lock_actions_default_to_the_lock_and_signals_need_a_target() {
    let e = load_text("name: t\nworkers: 3\nfaults:\n  - at: 1s\n    action: lock-empty\n").unwrap();
    assert_eq!(e.faults[0].target, Target::Lock);
    let err = load_text("name: t\nworkers: 3\nfaults:\n  - at: 1s\n    action: kill\n").unwrap_err();
    assert!(err.contains("needs a target"), "{err}");
}

#[test]
fn a_campaign_is_drawn_from_kinds() {
    let text = "name: t\nworkers: 3\nduration: 30s\nfaults:\n  random:\n    window: [5s, 25s]\n    kinds:\n      - {action: kill, target: leader, count: [1, 2]}\n      - {action: pause, target: watcher, mean_interval: 10s, duration: {exponential: 2s}}\n";
    let o = Overrides { time_scale: Some(0.1), ..Overrides::default() };
    let e = load_str(Path::new("t.yaml"), text, &o).unwrap();
    let r = e.random.expect("a campaign");
    assert_eq!(r.window, Some([Dur::from_ms(500), Dur::from_ms(2500)]));
    assert_eq!(r.kinds[0].count, crate::model::RandomCount::Between(1, 2));
    assert_eq!(r.kinds[1].count, crate::model::RandomCount::MeanInterval(Dur::from_secs(1)));
    assert_eq!(r.kinds[1].fault.duration, Some(PauseLen::Exponential(Dur::from_ms(200))));
    assert!(e.faults.is_empty());
}

#[test]
fn campaign_errors_name_line_and_column() {
    let head = "name: t\nworkers: 3\nduration: 30s\nfaults:\n  random:\n";
    let cases = [
        ("    kinds:\n      - {action: kill, target: leader}\n", "t.yaml:7:18: a kind of fault needs `count: N`"),
        (
            "    kinds:\n      - {action: kill, target: leader, count: 1, mean_interval: 3s}\n",
            "t.yaml:7:47: count or mean_interval, not both",
        ),
        ("    kinds:\n      - {action: kill, target: leader, count: [3, 1]}\n", "t.yaml:7:47: count is a number"),
        ("    kinds:\n      - {action: kill, target: leader, at: 3s, count: 1}\n", "t.yaml:7:40: unknown field `at`"),
        ("    kinds:\n      - {action: stop, target: leader, count: 1}\n", "t.yaml:7:18: stop is half of a fault"),
        ("    kinds:\n      - {action: kill, target: boss, count: 1}\n", "t.yaml:7:32: unknown target \"boss\""),
        ("    window: [5s, 40s]\n    kinds:\n      - {action: kill, count: 1}\n", "t.yaml:6:13: window [5s, 40s]"),
        ("    kinds: []\n", "t.yaml:6:12: a campaign needs at least one kind"),
        ("    kinds:\n      - {action: kill, target: leader, mean_interval: 1ms}\n", "faults per trial; at most 1000"),
        (
            "    kinds:\n      - {action: lock-empty, count: 1}\n",
            "", // accepted: the lock is the default target of a lock fault
        ),
        ("    seed: 3\n    kinds: []\n", "t.yaml:6:5: unknown field `seed`"),
        (
            "    kinds:\n      - {action: partition, target: leader, count: 1}\nsubstrate: {kind: redis}\n",
            "t.yaml:7:18: partition in a campaign needs a duration",
        ),
    ];
    for (body, want) in cases {
        let got = load_text(&format!("{head}{body}"));
        match (got, want) {
            (Ok(_), "") => {}
            (Ok(_), _) => panic!("accepted:\n{body}"),
            (Err(e), _) => assert!(!want.is_empty() && e.contains(want), "{body}\nwant {want:?}\ngot  {e}"),
        }
    }
    // A list item keeps its place too, through the same hand-written reader.
    let e = load_text("name: t\nworkers: 3\nfaults:\n  - at: 3s\n    action: kill\n    target: [1]\n").unwrap_err();
    assert!(e.contains("t.yaml:6:"), "{e}");
    let e = load_text("name: t\nworkers: 3\nfaults: 3\n").unwrap_err();
    assert!(e.contains("t.yaml:3:") && e.contains("random"), "{e}");
}

#[test]
fn a_soak_window_is_one_trials_and_a_whole_part_of_it() {
    let soak = "name: t\nworkers: 3\ntrials: 1\nduration: 10m\n";
    let e = load_text(&format!("{soak}window: 1m\n")).unwrap();
    assert_eq!((e.window, e.most_trials()), (Some(Dur::from_secs(60)), 10));
    let o = Overrides { time_scale: Some(0.5), ..Overrides::default() };
    let e = load_str(Path::new("t.yaml"), &format!("{soak}window: 1m\n"), &o).unwrap();
    assert_eq!(e.window, Some(Dur::from_secs(30)), "scaled as the trial is");
    // As a run writes it down, read back the same.
    let again = load_str(Path::new("experiment.yaml"), &crate::to_yaml(&e), &Overrides::default()).unwrap();
    assert_eq!((again.window, again.duration), (e.window, e.duration));
    let whole = "the trial (600s)";
    for (text, want) in [
        (
            format!("{soak}window: 10m\n"),
            format!("t.yaml:5:9: window is 600s; at least 1s, and a whole number of them make {whole}"),
        ),
        (format!("{soak}window: 7m\n"), "t.yaml:5:9: window is 420s".into()),
        (format!("{soak}window: 500ms\n"), "t.yaml:5:9: window is 500ms; at least 1s".into()),
        (
            "name: t\nworkers: 3\ntrials: 4\nwindow: 1s\n".into(),
            "t.yaml:4:9: window keeps one long trial in windows, not 4 trials: set `trials: 1`".into(),
        ),
        (
            format!("{soak}window: 1m\nsweep:\n  lease: [5s, 9s]\n"),
            "t.yaml:5:9: window keeps one long trial in windows, and a sweep".into(),
        ),
    ] {
        let e = load_text(&text).unwrap_err();
        assert!(e.starts_with(&want), "{text}: {e}");
    }
    let o = Overrides { trials: Some(3), ..Overrides::default() };
    let e = load_str(Path::new("t.yaml"), &format!("{soak}window: 1m\n"), &o).unwrap_err().to_string();
    assert!(e.contains("--trials: window keeps one long trial in windows, not 3 trials"), "{e}");
    let o = Overrides { time_scale: Some(0.05), ..Overrides::default() };
    let e = load_str(Path::new("t.yaml"), &format!("{soak}window: 10s\n"), &o).unwrap_err().to_string();
    assert!(e.contains("window is 500ms; at least 1s"), "checked as it runs: {e}");
}

#[test]
fn a_vdso_clock_is_refused_for_a_shell_script_whose_commands_it_would_not_reach() {
    let text = "name: t\nworkers: 2\nprogram:\n  shell: true\n  clock: vdso\n  command: \"exec ./worker\"\n";
    let e = load_text(text).unwrap_err();
    assert!(e.contains("t.yaml:6:") && e.contains("clock: vdso moves the program the harness starts, here sh"), "{e}");
    let listed = "name: t\nworkers: 2\nprogram:\n  clock: vdso\n  command: [sh, -c, \"exec true\"]\n";
    assert_eq!(load_text(listed).unwrap().program.unwrap().clock, crate::model::program::ClockWay::Vdso);
}

#[test]
fn a_program_handed_the_resource_has_its_writes_counted() {
    use crate::model::summary_metrics::Features;
    let load = |command: &str| load_text(&format!("name: p\nworkers: 2\nprogram:\n  command: {command}\n")).unwrap();
    assert!(Features::of(&load("[w, --resource, \"{resource}\"]")).writes);
    assert!(Features::of(&load("[w, \"--store={resource}/x\"]")).writes);
    assert!(!Features::of(&load("[w, --lock, \"{lock}\"]")).writes);
    // A shell script may name its variable, as validate advises.
    let script =
        "name: p\nworkers: 2\nprogram:\n  shell: true\n  command: \"w --store \\\"$LEASEQUAKE_RESOURCE\\\"\"\n";
    assert!(Features::of(&load_text(script).unwrap()).writes);
}

#[test]
fn a_bound_on_a_file_the_run_never_writes_is_refused_at_its_key() {
    let bound = "expect:\n  metrics:\n    summary.gaps: {max: 3}\n    writes.stale_writes: {max: 0}\n";
    let e = load_text(&format!("{MINIMAL}{bound}")).unwrap_err();
    assert!(
        e.contains("t.yaml:6:5: expect.metrics.writes.stale_writes: this experiment writes no summary-writes.csv"),
        "{e}"
    );
    assert!(e.contains("worker.resource"), "{e}");
    // Not at a comment that names the key; at a quoted key.
    let commented = format!("{MINIMAL}# writes.stale_writes: {{max: 0}} needs a resource\n{bound}");
    assert!(load_text(&commented).unwrap_err().contains("t.yaml:7:5: expect.metrics.writes.stale_writes"));
    let quoted = format!("{MINIMAL}expect:\n  metrics: {{\"writes.stale_writes\": {{max: 0}}}}\n");
    assert!(load_text(&quoted).unwrap_err().contains("t.yaml:4:13: expect.metrics.writes.stale_writes"));
    // A sweep writes the file when any point runs the feature.
    let tokens = "worker:\n  fencing_tokens: true\n";
    let swept = format!("{MINIMAL}{tokens}{bound}sweep:\n  resource: [none, unfenced]\n");
    assert!(load_text(&swept).is_ok());
    assert!(load_text(&format!("{MINIMAL}{tokens}  resource: unfenced\n{bound}")).is_ok());
}

#[test]
fn a_bound_s_value_says_what_it_takes() {
    let with = |bound: &str| load_text(&format!("{MINIMAL}expect:\n  metrics:\n    summary.gaps: {bound}\n"));
    assert!(with("{max: \"3\"}").is_ok(), "a quoted number is a number");
    let e = with("{max: 10s}").unwrap_err();
    assert!(e.contains("\"10s\" is not a number: a plain number in the unit"), "{e}");
    assert!(with("{max: true}").unwrap_err().contains("max and min are numbers"));
    let e = with("{max: 5%}").unwrap_err();
    assert!(e.contains("(`rate_max: 5%`)"), "{e}");
    // A rate on a count that is not of trials is told so, not "no run could pass".
    let e = with("{rate_max: 0%}").unwrap_err();
    assert!(e.contains("rate_max and rate_min bound a count of the setting's trials"), "{e}");
}
