//! Each kind of suite (per substrate, a dial, plain experiments) gets its
//! own README table without empty columns: a suite of 14 trials at scale
//! 0.1, whose eviction counts are physics (a 6 s pause of a 1.5 s lease).

use crate::helper::Lab;

#[test]
fn each_kind_of_suite_gets_its_own_table_without_empty_columns() {
    let lab = Lab::new();
    let suite = lab.path().join("suite");
    std::fs::create_dir(&suite).unwrap();
    // Per substrate: the kill gap against each substrate's own bound.
    std::fs::write(
        suite.join("kill.yaml"),
        "name: kill\nworkers: 3\nduration: 20s\nfaults:\n  - at: 5s\n    jitter: 2s\n    target: leader\n    action: kill\n\
         sweep:\n  substrate: [file, flock]\n",
    )
    .unwrap();
    // The dial: lease × pause, a pause far shorter and far longer than
    // what the lease survives.
    std::fs::write(
        suite.join("dial.yaml"),
        "name: dial\nworkers: 3\nduration: 12s\nfaults:\n  - at: 3s\n    jitter: 1s\n    target: leader\n    action: pause\n    duration: 1s\n\
         sweep:\n  points:\n    - {lease: 1500ms, renew: 500ms, watch: 500ms}\n    - {lease: 3s, renew: 1s, watch: 1s}\n  pause: [200ms, 6s]\n",
    )
    .unwrap();
    std::fs::write(suite.join("plain.yaml"), "name: plain\nworkers: 2\nduration: 6s\n").unwrap();
    let run = lab.run(&suite).scale(0.1).trials(2).output().expect_code(0);
    let readme = std::fs::read_to_string(run.out.join("README.md")).unwrap();
    assert!(!readme.contains("## The blog's claims"), "no experiment has the blog's claims:\n{readme}");
    for table in tables(&readme) {
        let header = &table[0];
        for (i, h) in header.iter().enumerate() {
            assert!(!h.is_empty(), "{readme}");
            assert!(
                table[2..].iter().any(|r| r.get(i).is_some_and(|c| !c.is_empty())),
                "column {h} is empty:\n{readme}"
            );
        }
    }
    let row = |start: &str| readme.lines().find(|l| l.starts_with(start)).unwrap_or_default().to_string();
    // Each substrate against its own bound.
    // A heading names its experiment, marked ⚠ where the machine disturbed
    // any of its trials (the suite's own parallel tests may).
    let heading = |h: &str| readme.lines().any(|l| l == format!("## {h}") || l == format!("## ⚠ {h}"));
    assert!(heading("[kill](kill): per substrate"), "{readme}");
    assert!(row("| file |").contains("[6.00, 13.00] s"), "{readme}");
    assert!(row("| flock |").contains("[0.00, 3.00] s"), "{readme}");
    // The dial: a column per swept key (in the order of the points' labels),
    // in the file's own time; the theory's evictions beside the measured ones.
    assert!(heading("[dial](dial): the dial"), "{readme}");
    assert!(readme.contains("| lease | pause | renew | watch |"), "{readme}");
    // A pause that lands inside a renewal of the lock file (rewritten in
    // place, so for a moment empty) is one the theory cannot call: either
    // outcome keeps to the protocol, and the cell says how many there were.
    let dial = tables(&readme)
        .into_iter()
        .find(|t| t[0].iter().any(|h| h == "evictions the theory predicts"))
        .unwrap_or_else(|| panic!("a dial table:\n{readme}"));
    let col = |name: &str| dial[0].iter().position(|h| h == name).unwrap();
    let (measured, predicted) =
        (col("false evictions / leader pauses (95 % CI)"), col("evictions the theory predicts"));
    let point = |settings: [&str; 4]| {
        let r = dial[2..].iter().find(|r| r[..4] == settings).unwrap_or_else(|| panic!("{settings:?}:\n{readme}"));
        let evicted: usize = r[measured].split('/').next().unwrap().parse().unwrap();
        let (called, uncalled) = match r[predicted].split_once(" (") {
            _ if r[predicted] == "unknown" => (0, 2),
            Some((p, rest)) => (p.parse::<usize>().unwrap(), rest.split(' ').next().unwrap().parse::<usize>().unwrap()),
            None => (r[predicted].parse::<usize>().unwrap(), 0),
        };
        assert!(r[measured].starts_with(&format!("{evicted}/2 ")), "two pauses, one a trial: {r:?}");
        (evicted, called, uncalled, format!("{r:?}"))
    };
    let (evicted, called, uncalled, long) = point(["1500ms", "6s", "500ms", "500ms"]);
    assert!(evicted == 2 && called + uncalled == 2, "a 6 s pause of a 1.5 s lease evicts, as predicted: {long}");
    let (evicted, called, uncalled, short) = point(["3s", "200ms", "1s", "1s"]);
    assert!(called == 0 && evicted <= uncalled, "a 200 ms pause of a 3 s lease does not: {short}");
    assert!(readme.contains("## Other experiments") && readme.contains("[plain](plain)"), "{readme}");
    assert!(readme.contains("3 of 3 experiments kept every `expect:`"), "{readme}");
}

/// The cells of every Markdown table in `text`, table by table.
fn tables(text: &str) -> Vec<Vec<Vec<String>>> {
    let mut out: Vec<Vec<Vec<String>>> = Vec::new();
    let mut current: Vec<Vec<String>> = Vec::new();
    for line in text.lines().chain([""]) {
        if line.starts_with('|') {
            let cells = line.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect();
            current.push(cells);
        } else if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
    }
    out
}
