//! report.html in a real browser (Debian's chromium, headless): the page
//! loads with no console error, shows the verdicts, the plots and the
//! timelines, and renders to a screenshot.

use crate::helper::Lab;

fn chromium() -> std::path::PathBuf {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.exists())
        .expect("chromium is installed (.ci/run installs it)")
}

/// Load `page` headless: (the DOM after load, what the browser logged).
fn open(lab: &Lab, page: &std::path::Path, extra: &[&str]) -> (String, String) {
    let profile = tempfile::tempdir_in(lab.path()).unwrap();
    let out = std::process::Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
        .args(["--enable-logging=stderr", "--v=0", "--virtual-time-budget=3000"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium: {}", String::from_utf8_lossy(&out.stderr));
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn the_report_opens_in_a_real_browser_with_its_verdicts_and_no_console_error() {
    let lab = Lab::new();
    let suite = lab.path().join("suite");
    std::fs::create_dir(&suite).unwrap();
    std::fs::write(
        suite.join("kill.yaml"),
        // The kill falls 1.5 s after a renewal, never inside one: a kill
        // inside the blog's rewrite in place leaves the file empty, and the
        // wedge that follows (a fresh-clone run saw it, the machine busy
        // with the other tests) fails the expectation this page shows kept.
        "name: kill\nworkers: 3\nduration: 20s\nfaults:\n  - at: 5s\n    after: renewed\n    delay: 1.5s\n    target: leader\n    action: kill\n\
         expect:\n  gap_max: 13s\nsweep:\n  substrate: [file, flock]\n",
    )
    .unwrap();
    std::fs::write(
        suite.join("dial.yaml"),
        "name: dial\nworkers: 3\nduration: 12s\nfaults:\n  - at: 3s\n    target: leader\n    action: pause\n    duration: 1s\n\
         sweep:\n  points:\n    - {lease: 1500ms, renew: 500ms, watch: 500ms}\n    - {lease: 3s, renew: 1s, watch: 1s}\n  pause: [200ms, 6s]\n",
    )
    .unwrap();
    let run = lab.run(&suite).scale(0.05).trials(2).output().expect_code(0);
    let (dom, log) = open(&lab, &run.out.join("report.html"), &["--dump-dom"]);
    assert!(dom.contains("kill/report.html") && dom.contains("dial/report.html"), "{dom}");
    assert!(dom.contains("per substrate") && dom.contains("kept every"), "{dom}");
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE") || l.contains("Uncaught")).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let page = run.out.join("dial/report.html");
    let (dom, log) = open(&lab, &page, &["--dump-dom"]);
    assert!(dom.contains("the dial") && dom.matches("<svg").count() >= 3, "the tables, the plots, the timelines");
    assert!(dom.contains("<details open=\"\"><summary>trial 1"), "{dom}");
    assert!(dom.contains("Host and calibration"), "{dom}");
    assert!(!log.contains("CONSOLE"), "{log}");
    let shot = lab.path().join("shot.png");
    open(&lab, &page, &[&format!("--screenshot={}", shot.display()), "--window-size=1280,2000"]);
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "{} bytes", png.len());
    // From the files alone, the same page.
    let before = std::fs::read_to_string(&page).unwrap();
    std::fs::remove_file(&page).unwrap();
    let out = std::process::Command::new(crate::helper::bin()).arg("report").arg(&run.out).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let after = std::fs::read_to_string(&page).unwrap();
    for tag in ["<tr>", "<svg", "<details", "2/2 (34–100 %)"] {
        assert_eq!(after.matches(tag).count(), before.matches(tag).count(), "{tag}: report DIR rebuilds the page");
    }
}
