//! The blog's claims that take long real time or a race's phase: the
//! safe takeover can elect two (a failpoint widens the window, and it must
//! happen in one trial of three), the whole-second truncation reaches its
//! extremes, parallel trials give the serial gaps, and fencing tokens tell
//! the race's two takers apart.

use crate::helper::{Lab, Row, shipped};

#[test]
fn fencing_tokens_tell_the_two_takers_of_the_race_apart() {
    // The widened takeover race with fencing tokens: both takers believe
    // they lead, but their grants carry different tokens, the later grant
    // the higher one, each above the first leader's.
    let lab = Lab::new();
    let text = std::fs::read_to_string(shipped("blog", "takeover-race-widened"))
        .unwrap()
        .replace("worker:\n", "worker:\n  fencing_tokens: true\n");
    let file = lab.file("fenced-race.yaml", &text);
    let run = lab.run(&file).scale(0.2).trials(2).jobs(2).output().expect_code(0);
    let events = run.table("events.csv");
    for trial in ["1", "2"] {
        let token = |e: &Row| -> u64 {
            let detail: serde_json::Value = serde_json::from_str(e.get("detail")).unwrap();
            detail["token"].as_u64().unwrap_or_else(|| panic!("no token in {e:?}"))
        };
        let grants: Vec<u64> = of_trial(&events, trial, "acquired").into_iter().map(token).collect();
        assert_eq!(grants.len(), 3, "start + two takeovers in trial {trial}: {grants:?}");
        assert!(grants.windows(2).all(|w| w[0] < w[1]), "tokens rise with each grant: {grants:?}");
    }
}

fn of_trial<'a>(events: &'a [Row], trial: &str, kind: &str) -> Vec<&'a Row> {
    events.iter().filter(|e| e.get("trial") == trial && e.get("event") == kind).collect()
}

/// Tests that measure against a tight tolerance: each holds the machine
/// alone (`Lab::alone`), and the test command runs them one at a time after
/// the rest (filter `alone::`).
mod alone {
    use super::*;

    #[test]
    fn the_blogs_safe_takeover_elects_two_leaders_when_watchers_interleave() {
        let lab = Lab::alone();
        // Scale 0.4: 40 ms between the watchers' ticks, a 200 ms stall, phase
        // margins of 40–80 ms; trials one at a time. The claim is that it *can*
        // elect two: it must in at least one of three trials, each time by the
        // interleaving below (a trial whose phases a scheduling delay moved
        // elects one; in the full suite on this 2-core VM that happened to one
        // or two trials of three at scale 0.2).
        let run =
            lab.run(shipped("blog", "takeover-race-widened")).scale(0.4).trials(3).jobs(1).output().expect_code(0);
        let events = run.table("events.csv");
        let trials = run.table("trials.csv");
        let two: Vec<_> = trials.iter().filter(|t| t.get("max_leaders") == "2").collect();
        assert!(!two.is_empty(), "the interleaving in none of 3 trials: {trials:?}");
        for t in two {
            let trial = t.get("trial");
            // The interleaving: two takeovers after the kill, and the first
            // taker steps down when it reads the second one's pid.
            let takeovers: Vec<_> = of_trial(&events, trial, "acquired")
                .into_iter()
                .filter(|e| e.get("detail").contains("takeover"))
                .collect();
            assert_eq!(takeovers.len(), 2, "trial {trial}: {takeovers:?}");
            let first = takeovers[0].get("worker");
            let stepped = of_trial(&events, trial, "stepped_down");
            assert!(
                stepped.iter().any(|e| e.get("worker") == first && e.get("detail").contains("other-holder")),
                "trial {trial}: {stepped:?}"
            );
        }
    }

    #[test]
    fn the_whole_second_truncation_makes_the_worst_case_lease_plus_watch_plus_one_second() {
        // Scale 0.2: the set-ups rely on phase margins of 50–100 ms in real
        // time, 10–20 ms here. A machine busy with the rest of the suite can
        // delay a worker's start past such a margin in one trial; the claim is
        // that the extreme is reached, so one of three trials must reach it,
        // and every gap must respect the theory's bound [6 s, 13 s].
        //
        // The best case kills 2 ms (scaled) before the next renewal: on a busy
        // machine the kill can land inside the renewal's truncating write. The
        // worker announces a renewal before writing it, so such a trial is
        // recognised for what it is (gap cause `kill mid-renewal`: the empty
        // file wedges it, and its `expect:` fails) rather than taken for a
        // violation of the bound; the other trials must keep to the bound.
        let lab = Lab::alone();
        let gaps = |name: &str| -> Vec<f64> {
            let run = lab.run(shipped("blog", name)).scale(0.2).trials(3).jobs(3).output();
            let rows = run.table("gaps.csv");
            assert_eq!(rows.len(), 3, "{name}: one gap per trial: {rows:?}");
            let (mid_renewal, rows): (Vec<_>, Vec<_>) =
                rows.into_iter().partition(|g| g.get("cause") == "kill mid-renewal");
            for g in &mid_renewal {
                assert_eq!(g.get("ended"), "false", "{name}: a kill mid-renewal leaves an empty lock file: {g:?}");
            }
            let wedged = run.table("trials.csv").iter().filter(|t| t.get("wedged") == "true").count();
            assert_eq!(wedged, mid_renewal.len(), "{name}: only a kill mid-renewal may wedge");
            assert_eq!(run.code(), Some(if mid_renewal.is_empty() { 0 } else { 1 }), "{}", run.stderr());
            let gaps: Vec<f64> = rows.iter().map(|g| g.f64("duration_ms")).collect();
            for d in &gaps {
                assert!((1200.0 - 25.0..=2600.0 + 25.0).contains(d), "{name}: gap {d} ms outside [6 s, 13 s] scaled");
            }
            gaps
        };
        let worst = gaps("sigkill-worst-case");
        // Beyond the blog's 12 s (2400 ms scaled): 12.8 s by construction.
        assert!(worst.iter().any(|d| *d > 2500.0), "worst case never beyond 12.5 s: {worst:?}");
        let best = gaps("sigkill-best-case");
        // lease - renew = 6 s (1200 ms), plus the set-up's 0.16 s of margins.
        assert!(best.iter().any(|d| *d <= 1260.0 + 25.0), "best case never reached: {best:?}");
    }

    #[test]
    fn running_trials_in_parallel_does_not_change_the_gaps() {
        // Same seed, so trial i fires its kill at the same jittered moment with
        // --jobs 1 and --jobs 3; `align` fixes the phase of the whole-second
        // truncation (otherwise where the wall-clock second falls would move a
        // takeover by a whole watch interval from run to run), and the kills stay
        // clear of renewal ticks as in bounds.rs. Each trial's gap must then
        // agree within the bound tests' tolerance. Scale 0.1 keeps the align
        // margin (50 ms) wider than a start delayed by a busy machine.
        let lab = Lab::alone();
        let file = lab.file(
            "jobs.yaml",
            "name: jobs\nworkers: 3\nduration: 30s\nseed: 5\nalign: 500ms\nfaults:\n  - at: 12.2s\n    jitter: 2.6s\n    target: leader\n    action: kill\n",
        );
        let gaps = |jobs: u32| {
            let run = lab.run(&file).scale(0.1).trials(3).jobs(jobs).output().expect_code(0);
            let mut g: Vec<(String, f64)> =
                run.table("gaps.csv").iter().map(|g| (g.get("trial").to_string(), g.f64("duration_ms"))).collect();
            g.sort_by(|a, b| a.0.cmp(&b.0));
            g
        };
        let (serial, parallel) = (gaps(1), gaps(3));
        assert_eq!(serial.len(), 3);
        for ((t, a), (_, b)) in serial.iter().zip(&parallel) {
            assert!((a - b).abs() < 25.0, "trial {t}: {a} vs {b} ms");
        }
    }
}
