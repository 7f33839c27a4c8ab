//! Damaged and hostile results directories: a history cut short, a row
//! that cannot be read, columns moved, rows copied, special files where a
//! file belongs, impossible numbers. Each is refused at once, naming the
//! file (and its line), and nothing the run wrote is changed or dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::helper::{Lab, bin, read_table};

const KILL: &str = "name: k\nworkers: 2\nduration: 6s\nseed: 7\n\
    faults:\n  - {at: 2s, target: leader, action: kill}\n";

/// A finished run of `trials` trials of KILL.
fn run(lab: &Lab, trials: u32) -> PathBuf {
    let file = lab.file("k.yaml", KILL);
    lab.run(&file).scale(0.05).trials(trials).output().expect_code(0).out
}

/// `leasequake ARGS DIR`, killed (and the test failed) if it hangs.
fn leasequake(args: &[&str], dir: &Path) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .arg(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("leasequake {args:?} {} hung for a minute", dir.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// Exit 2, saying `want`.
fn refused(out: &Output, want: &str, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
    assert!(stderr.contains(want), "{what}: want {want:?} in {stderr}");
}

/// Every file under `dir` and its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.is_file() {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_finished_trials_history_cut_at_any_row_is_refused_by_check_and_resume() {
    let lab = Lab::new();
    let out = run(&lab, 2);
    let events = std::fs::read_to_string(out.join("events.csv")).unwrap();
    let lines: Vec<&str> = events.lines().collect();
    let first_of_last = lines.iter().position(|l| l.starts_with("2,")).unwrap();
    assert!(lines.len() - first_of_last > 5, "trial 2 has its rows");
    for keep in first_of_last..lines.len() {
        // Cut at a newline: every row whole, trial 2 shorter.
        let cut = lines[..keep].join("\n") + "\n";
        std::fs::write(out.join("events.csv"), &cut).unwrap();
        let before = snapshot(&out);
        let want = if keep == first_of_last { "holds no events of trial(s) 2" } else { "it was cut short" };
        for args in [&["check", "--in-place"][..], &["run", "--resume"], &["report"]] {
            refused(&leasequake(args, &out), want, &format!("{args:?} of the history cut after line {keep}"));
        }
        assert_eq!(snapshot(&out), before, "nothing changed after the cut after line {keep}");
    }
    std::fs::write(out.join("events.csv"), events).unwrap();
    assert!(leasequake(&["check", "--in-place"], &out).status.success(), "whole again");
}

#[test]
fn a_row_that_cannot_be_read_is_refused_at_its_line_and_never_dropped() {
    let lab = Lab::new();
    let out = run(&lab, 2);
    let events = std::fs::read_to_string(out.join("events.csv")).unwrap();
    let mut lines: Vec<String> = events.lines().map(String::from).collect();
    // A row of trial 1 whose trial the filter would not recognise.
    let at = lines.iter().position(|l| l.starts_with("1,")).unwrap() + 2;
    lines[at] = format!(" {}", lines[at]);
    std::fs::write(out.join("events.csv"), lines.join("\n") + "\n").unwrap();
    let before = snapshot(&out);
    for args in [&["check", "--in-place"][..], &["check"], &["run", "--resume"], &["report"]] {
        refused(&leasequake(args, &out), &format!("line: {}", at + 1), &format!("{args:?}"));
    }
    assert_eq!(snapshot(&out), before, "nothing dropped, nothing written");
}

#[test]
fn columns_reordered_or_renamed_are_refused_by_name() {
    let lab = Lab::new();
    let out = run(&lab, 1);
    let events = std::fs::read_to_string(out.join("events.csv")).unwrap();
    let (header, rest) = events.split_once('\n').unwrap();
    let mut names: Vec<&str> = header.split(',').collect();
    names.swap(1, 2);
    let reordered = names.join(",");
    let renamed = header.replacen("event", "evnet", 1);
    for (what, h) in [("reordered", reordered), ("renamed", renamed)] {
        std::fs::write(out.join("events.csv"), format!("{h}\n{rest}")).unwrap();
        for args in [&["check"][..], &["run", "--resume"], &["report"]] {
            refused(&leasequake(args, &out), "events.csv:1: the header is", &format!("{what}: {args:?}"));
        }
    }
}

#[test]
fn a_row_the_harness_writes_once_copied_is_refused() {
    let lab = Lab::new();
    let out = run(&lab, 1);
    let events = std::fs::read_to_string(out.join("events.csv")).unwrap();
    for event in [",barrier,", ",trial_end,", ",spawn,", ",exit,"] {
        let mut lines: Vec<&str> = events.lines().collect();
        let at = lines.iter().position(|l| l.contains(event)).unwrap();
        lines.insert(at + 1, lines[at]);
        std::fs::write(out.join("events.csv"), lines.join("\n") + "\n").unwrap();
        let want = format!("a second {}", event.trim_matches(','));
        refused(&leasequake(&["check"], &out), &want, event);
    }
}

#[test]
fn a_resumed_run_sets_an_unfinished_trials_rows_aside_with_its_directory() {
    let lab = Lab::new();
    let out = run(&lab, 3);
    // As a kill after trial 3's history but before its trials.csv row left it.
    let trials = std::fs::read_to_string(out.join("trials.csv")).unwrap();
    let kept: Vec<&str> = trials.lines().filter(|l| !l.starts_with("3,")).collect();
    std::fs::write(out.join("trials.csv"), kept.join("\n") + "\n").unwrap();
    let events = std::fs::read_to_string(out.join("events.csv")).unwrap();
    let header = events.lines().next().unwrap();
    let third: Vec<&str> = events.lines().filter(|l| l.starts_with("3,")).collect();
    let again = leasequake(&["run", "--resume"], &out);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let aside = std::fs::read_to_string(out.join("trials/0003.interrupted-1/events.csv")).unwrap();
    assert_eq!(aside, format!("{header}\n{}\n", third.join("\n")), "trial 3's first rows, kept with its directory");
    assert_eq!(read_table(&out.join("trials.csv")).len(), 3);
    let events = std::fs::read_to_string(out.join("events.csv")).unwrap();
    assert_eq!(events.lines().filter(|l| l.starts_with("3,") && l.contains(",trial_end,")).count(), 1);
}

/// Makes a special file at a path.
type Maker<'a> = &'a dyn Fn(&Path);

#[test]
fn a_fifo_or_a_device_where_a_file_belongs_is_refused_at_once() {
    let lab = Lab::new();
    let fifo = |path: &Path| {
        let _ = std::fs::remove_file(path);
        nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    };
    let device = |path: &Path| {
        let _ = std::fs::remove_file(path);
        std::os::unix::fs::symlink("/dev/zero", path).unwrap();
    };
    let special: [(&str, Maker); 2] = [("a FIFO", &fifo), ("a character device", &device)];
    for (what, make) in special {
        let file = lab.path().join("x.yaml");
        make(&file);
        for args in [&["validate"][..], &["run", "--no-calibrate", "--quiet"]] {
            refused(&leasequake(args, &file), what, &format!("{args:?} of {what}"));
        }
    }
    let out = run(&lab, 1);
    for name in ["events.csv", "host.json", "experiment.yaml", "trials.csv"] {
        let saved = std::fs::read(out.join(name)).unwrap();
        for (what, make) in special {
            make(&out.join(name));
            for args in [&["check"][..], &["report"], &["run", "--resume"]] {
                let done = leasequake(args, &out);
                refused(&done, what, &format!("{args:?} with {name} {what}"));
            }
        }
        std::fs::remove_file(out.join(name)).unwrap();
        std::fs::write(out.join(name), saved).unwrap();
    }
}

#[test]
fn a_plot_of_cells_that_are_not_numbers_ends() {
    let lab = Lab::new();
    let out = run(&lab, 2);
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    for bad in ["inf", "NaN", "-inf", "1e308"] {
        let (header, rows) = summary.split_once('\n').unwrap();
        let rows: Vec<String> = rows
            .lines()
            .map(|r| r.split(',').map(|c| if c.parse::<f64>().is_ok() { bad } else { c }).collect::<Vec<_>>().join(","))
            .collect();
        std::fs::write(out.join("summary.csv"), format!("{header}\n{}\n", rows.join("\n"))).unwrap();
        // It ends, drawn or refused; it neither spins nor panics.
        let done = leasequake(&["plot"], &out);
        assert!(matches!(done.status.code(), Some(0 | 2)), "{bad}: {}", String::from_utf8_lossy(&done.stderr));
    }
}

#[test]
fn an_impossible_shard_record_is_refused_by_resume_and_merge() {
    let lab = Lab::new();
    let file = lab.file("k.yaml", KILL);
    let shard = lab.run(&file).scale(0.05).trials(2).arg("--shard").arg("0/2").output().expect_code(0).out;
    let host = shard.join("host.json");
    let record: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&host).unwrap()).unwrap();
    for (count, index, want) in [(0, 0, "shard count 0"), (2, 2, "shard index 2 of 2")] {
        let mut r = record.clone();
        r["shard"]["count"] = count.into();
        r["shard"]["index"] = index.into();
        std::fs::write(&host, r.to_string()).unwrap();
        refused(&leasequake(&["run", "--resume"], &shard), want, "resume");
        let merged = lab.path().join(format!("merged-{count}-{index}"));
        let done = Command::new(bin()).arg("merge").arg(&merged).arg(&shard).output().unwrap();
        refused(&done, want, "merge");
        assert!(!merged.exists(), "nothing merged");
    }
}

#[test]
fn a_trial_beyond_the_experiment_is_refused() {
    let lab = Lab::new();
    let out = run(&lab, 2);
    let trials = std::fs::read_to_string(out.join("trials.csv")).unwrap();
    let last = trials.lines().last().unwrap();
    std::fs::write(out.join("trials.csv"), format!("{trials}{}\n", last.replacen("2,", "99,", 1))).unwrap();
    for args in [&["check"][..], &["run", "--resume"], &["report"]] {
        refused(&leasequake(args, &out), "lists trial 99, but the experiment has 2 trial(s)", &format!("{args:?}"));
    }
}

#[test]
fn a_checks_link_out_of_the_directory_is_refused() {
    let lab = Lab::new();
    let out = run(&lab, 1);
    let away = lab.path().join("away");
    std::fs::create_dir(&away).unwrap();
    std::os::unix::fs::symlink(&away, out.join("checks")).unwrap();
    refused(&leasequake(&["check"], &out), "is a symbolic link", "check");
    assert!(std::fs::read_dir(&away).unwrap().next().is_none(), "nothing written out of the directory");
}

#[test]
fn the_report_and_the_exports_take_the_mode_the_tables_take() {
    use std::os::unix::fs::PermissionsExt;
    let lab = Lab::new();
    let file = lab.file("k.yaml", KILL);
    let (json, junit) = (lab.path().join("r.json"), lab.path().join("r.xml"));
    let out = lab
        .run(&file)
        .scale(0.05)
        .trials(1)
        .arg("--export-json")
        .arg(json.to_str().unwrap())
        .arg("--junit")
        .arg(junit.to_str().unwrap())
        .output()
        .expect_code(0)
        .out;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let tables = mode(&out.join("trials.csv"));
    for p in [out.join("report.html"), json, junit] {
        assert_eq!(mode(&p), tables, "{}", p.display());
    }
}

#[test]
fn what_a_killed_check_or_merge_left_is_removed_by_the_next() {
    let lab = Lab::new();
    let file = lab.file("k.yaml", KILL);
    let shards: Vec<PathBuf> = (0..2)
        .map(|k| lab.run(&file).scale(0.05).trials(2).arg("--shard").arg(format!("{k}/2")).output().expect_code(0).out)
        .collect();
    let shard = &shards[0];
    // A pid no process has: what a killed check and a killed merge left.
    let dead = 0x3fff_fff0;
    let check_left = shard.join(format!(".check-{dead}.tmp"));
    let merge_left = lab.path().join(format!(".merged.merging-{dead}"));
    for left in [&check_left, &merge_left] {
        std::fs::create_dir_all(left.join("half")).unwrap();
    }
    let done = leasequake(&["check", "--in-place"], shard);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let done = Command::new(bin()).arg("merge").arg(lab.path().join("merged")).args(&shards).output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    assert!(!check_left.exists() && !merge_left.exists(), "both removed");
}
