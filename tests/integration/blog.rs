//! The blog's claims and their fixes, at a small time scale: the bug can
//! happen, the fix never does. (Never "a rare race happened in this run":
//! where a race is rare, a failpoint widens its window on purpose.)

use crate::helper::{Lab, shipped};

#[test]
fn link_acquisition_stays_exclusive_where_the_proposed_rename_fix_is_not() {
    let lab = Lab::new();
    let link = lab.run(shipped("blog", "link-race")).trials(10).output().expect_code(0);
    assert!(link.table("trials.csv").iter().all(|t| t.get("max_leaders") == "1"));
    // rename replaces a lock that appeared after the existence check. Every
    // worker stalls 500 ms between its check and its rename (a failpoint);
    // released together, each passes the check before the first rename, and
    // each believes it leads. Only a start spread of half a second (which
    // the trial would name as disturbed) could spare one.
    let file = lab.file(
        "rename-widened.yaml",
        "name: rename-widened\nworkers: 3\nduration: 2s\nworker:\n  acquire: rename\n  mode: one-shot\n  \
         failpoint: after-check\n  failpoint_delay: 500ms\n",
    );
    let rename = lab.run(&file).trials(2).output().expect_code(0);
    for t in rename.table("trials.csv") {
        assert_eq!(
            t.get("max_leaders"),
            "3",
            "every worker that passed the check leads: {t:?}\n{}",
            rename.story(t.get("trial"))
        );
    }
}

#[test]
fn a_crash_between_create_and_write_wedges_o_excl_but_not_link() {
    let lab = Lab::new();
    let excl = lab.run(shipped("blog", "crash-after-create")).scale(0.05).trials(2).output().expect_code(0);
    for t in excl.table("trials.csv") {
        assert_eq!(t.get("wedged"), "true", "{t:?}");
    }
    assert_eq!(excl.table("faults.csv").iter().filter(|f| f.get("error").is_empty()).count(), 2, "one kill per trial");
    let link = lab.run(shipped("blog", "crash-after-create-link")).scale(0.05).trials(2).output().expect_code(0);
    for t in link.table("trials.csv") {
        assert_eq!(t.get("wedged"), "false", "{t:?}");
    }
    // link has no create-then-write window: the failpoint never fires.
    assert!(link.table("events.csv").iter().all(|e| e.get("event") != "failpoint"));
}

#[test]
fn a_crash_inside_a_renewal_wedges_the_blogs_writes_but_not_rename() {
    let lab = Lab::new();
    let bug = lab.run(shipped("blog", "crash-mid-renewal")).scale(0.05).trials(2).output().expect_code(0);
    for t in bug.table("trials.csv") {
        assert_eq!(t.get("wedged"), "true", "{t:?}");
    }
    let fix = lab.run(shipped("blog", "crash-mid-renewal-rename")).scale(0.05).trials(2).output().expect_code(0);
    for t in fix.table("trials.csv") {
        assert_eq!(t.get("wedged"), "false", "{t:?}");
    }
}
