//! What shrink refuses, before it runs anything. Campaigns and their
//! shrinks, end to end, are in the slow tier (tests/slow/shrink.rs).

use crate::helper::{Lab, bin};

#[test]
fn shrink_refuses_what_it_cannot_shrink_before_running_anything() {
    let lab = Lab::new();
    let quiet = lab.file("quiet.yaml", "name: quiet\nworkers: 3\nduration: 3s\ntrials: 1\nseed: 1\n");
    let run = lab.run(&quiet).scale(0.1).output().expect_code(0);
    let dir = run.out.to_str().unwrap();
    let cases: [(&[&str], &str); 7] = [
        (&["--trial", "2"], "--trial 2: no such finished trial"),
        (&["--trial", "1"], "trial 1 violated nothing"),
        (&["--trial", "1", "--violation", "bogus"], "--violation bogus: expected one of double-leader"),
        (&["--trial", "1", "--violation", "wedged"], "trial 1 did not violate that"),
        (&["--trial", "1", "--repeats", "2", "--need", "3"], "--need 3 is more than --repeats 2"),
        (&["--point", "lease=2s"], "--point lease=2s: "),
        (&["--point", "lease=2s"], "has no sweep point lease=2s (it has no sweep)"),
    ];
    for (args, want) in cases {
        let out = std::process::Command::new(bin()).args(["shrink", dir]).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: want {want:?} in {err}");
        assert!(!run.out.join("shrink").exists(), "{args:?} wrote a shrink directory");
    }
    // Shrink options without --shrink mean nothing: refused before a run.
    let refused = lab.run(&quiet).arg("--budget").arg("5").output().expect_code(2);
    assert!(refused.stderr().contains("add --shrink"), "{}", refused.stderr());
    assert!(!refused.out.exists());
}
