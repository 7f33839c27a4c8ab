//! The seed's claim over random long pauses: only the fenced store accepts
//! no stale write. Slow tier: 16 trials of random pauses, and stale writes
//! must happen for the test to mean anything. Each of the 100 committed
//! trials of each experiment (results/fencing) had 2 to 5 of them: that 8
//! trials have none would take a rate of such trials above 3/100 (the 95 %
//! bound on what was never seen), and even then be under 1e-12. The scripted
//! table (one pause, one stale write) is in the fast tier
//! (tests/integration/fencing.rs).

use crate::helper::{Lab, shipped};

#[test]
fn under_random_long_pauses_only_the_fenced_store_accepts_no_stale_write() {
    let lab = Lab::new();
    let stale = |mode: &str| {
        let file = shipped("fencing", &format!("random-pauses-{mode}"));
        let run = lab.run(file).scale(0.05).trials(8).jobs(8).output().expect_code(0);
        let s = &run.table("summary-writes.csv")[0];
        let n = |c: &str| s.f64(c) as u64;
        (n("stale_writes"), n("stale_writes_accepted"), n("stale_writes_rejected"))
    };
    // Lost work = a stale write accepted over a newer holder's result.
    let (attempted, lost, rejected) = stale("fenced");
    assert!(attempted > 0, "the pauses must produce stale writes for the test to mean anything");
    assert_eq!(lost, 0, "fenced storage let an older token overwrite a newer result");
    assert!(rejected > 0);
    let (attempted, lost, rejected) = stale("unfenced");
    assert!(attempted > 0 && lost > 0 && rejected == 0, "lease only: stale writes overwrite ({lost}/{attempted})");
}
