//! calibrate's measurement of the event delay on both observation paths
//! (the protocol's fd 3 and log patterns on stdout): hundreds of workers
//! for 20 s.

use crate::helper::Lab;

#[test]
fn calibrate_measures_the_event_delay_of_both_observation_paths() {
    // Hundreds of workers for 20 s: never beside a timing test.
    let _machine = Lab::new();
    let out = std::process::Command::new(crate::helper::bin()).args(["calibrate", "--lines", "50"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for path in ["protocol (fd 3)", "log patterns (stdout)"] {
        let line = text.lines().find(|l| l.contains(path)).unwrap_or_else(|| panic!("no {path} line:\n{text}"));
        assert!(line.contains("(n 50)"), "every line must arrive: {line}");
    }
}
