//! The layers of docs/architecture.md, held against the code: which
//! top-level module of src/ may use which, checked against every `crate::`
//! and `super::` path of every file outside the tests. The crates below
//! (model, check) hold themselves there through their Cargo.toml; this
//! holds the rest, so that a module reaching up a layer fails here, not
//! in a reader's head months later. The doc lists the same table, and this
//! test holds the doc to it too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::helper::repo;

/// Each top-level module of src/ and what it may use besides itself, from
/// the bottom up. `lib.rs`, `main.rs` and `commands/` wire the layers
/// together and may use anything.
const LAYERS: &[(&str, &[&str])] = &[
    ("console", &[]),
    ("files", &[]),
    ("experiment", &["model"]),
    ("cli", &["worker"]),
    ("proxy", &["model"]),
    ("trial", &["model", "substrate", "proxy", "realtime", "console"]),
    ("report", &["model", "check", "experiment", "files", "console"]),
    ("shrink", &["model", "check", "report", "trial"]),
    ("error", &["experiment", "report", "trial", "console"]),
    ("calibrate", &["model", "check", "experiment", "child", "proxy", "trial", "realtime", "error", "console"]),
];

/// The crates below the main one, and the leasequake crates each may
/// depend on (its Cargo.toml): the compiler holds each to them. The main
/// crate re-exports `leasequake-child`'s modules (child, realtime,
/// substrate, worker) and the others as `model` and `check`.
const CRATES: &[(&str, &[&str])] = &[
    ("leasequake-model", &[]),
    ("leasequake-check", &["leasequake-model"]),
    ("leasequake-child", &["leasequake-model"]),
];

/// Where everything is wired: may use any module.
const WIRING: &[&str] = &["lib", "main", "commands"];

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let allowed: BTreeMap<&str, BTreeSet<&str>> =
        LAYERS.iter().map(|(m, uses)| (*m, uses.iter().copied().collect())).collect();
    let src = repo().join("src");
    let files = modules(&src);
    // The macros console.rs exports at the crate's root, by name.
    let console = std::fs::read_to_string(src.join("console.rs")).unwrap();
    let macros: BTreeSet<String> = console
        .split("macro_rules! ")
        .skip(1)
        .filter_map(|r| r.split(|c: char| !c.is_alphanumeric() && c != '_').next())
        .map(String::from)
        .collect();
    assert!(!macros.is_empty(), "console.rs exports no macro");
    assert!(files.len() > 100, "only {} source files found under {}", files.len(), src.display());
    let mut unplaced = BTreeSet::new();
    let mut wrong = Vec::new();
    for (file, path) in &files {
        let top = path.first().map_or("lib", String::as_str);
        if WIRING.contains(&top) {
            continue;
        }
        let Some(may) = allowed.get(top) else {
            unplaced.insert(top.to_string());
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for used in uses(&code_of(&text), path, &macros) {
            if used != top && !may.contains(used.as_str()) {
                let rel = file.strip_prefix(repo()).unwrap_or(file).display().to_string();
                wrong.push(format!("{rel} uses {used}, which {top} may not (it may use: {})", list(may)));
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules in no layer (give each a line of LAYERS here and of docs/architecture.md): {unplaced:?}"
    );
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    let dir = repo().join("crates");
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let manifest = std::fs::read_to_string(entry.path().join("Cargo.toml")).unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((_, may)) = CRATES.iter().find(|(c, _)| *c == name) else {
            panic!("crates/{name} is in no layer: give it a line of CRATES here and of docs/architecture.md");
        };
        let ours: BTreeSet<&str> = manifest
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim()))
            .filter(|k| k.starts_with("leasequake-"))
            .collect();
        let extra: Vec<&&str> = ours.iter().filter(|d| !may.contains(d)).collect();
        assert!(extra.is_empty(), "crates/{name} depends on {extra:?}; it may depend on {may:?}");
        found.insert(name);
    }
    assert_eq!(found.len(), CRATES.len(), "crates found: {found:?}");
}

#[test]
fn the_architecture_doc_lists_the_layers_the_test_holds() {
    let doc = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let mut missing = Vec::new();
    for (module, uses) in LAYERS {
        let line = format!("| `{module}` | {} |", if uses.is_empty() { "—".to_string() } else { list(*uses) });
        if !doc.lines().any(|l| l.trim() == line) {
            missing.push(line);
        }
    }
    for (krate, deps) in CRATES {
        let line = format!("| `{krate}` | {} |", if deps.is_empty() { "—".to_string() } else { list(*deps) });
        if !doc.lines().any(|l| l.trim() == line) {
            missing.push(line);
        }
    }
    assert!(missing.is_empty(), "docs/architecture.md lacks these rows of its layer table:\n{}", missing.join("\n"));
}

fn list<'a>(names: impl IntoIterator<Item = &'a &'a str>) -> String {
    names.into_iter().copied().collect::<Vec<_>>().join(", ")
}

/// Every non-test source file under `src` with its module path (`["trial",
/// "server", "etcd"]`), `#[path]` modules under the module declaring them.
fn modules(src: &Path) -> Vec<(PathBuf, Vec<String>)> {
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut out: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(src).unwrap();
        let mut path: Vec<String> = rel.with_extension("").iter().map(|c| c.to_string_lossy().into_owned()).collect();
        if path.last().is_some_and(|l| l == "mod") {
            path.pop();
        }
        out.insert(f.clone(), path);
    }
    // `#[path = "x.rs"] mod y;` makes x.rs the module y of its declarer.
    let declared: Vec<(PathBuf, Vec<String>)> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let code = code_of(&text);
            let mut found = Vec::new();
            let mut rest = code.as_str();
            while let Some(i) = rest.find("#[path = \"") {
                rest = &rest[i + 10..];
                let Some(end) = rest.find('"') else { break };
                let target = f.parent().unwrap().join(&rest[..end]);
                let after = rest[end..].split_once("mod ").map(|(_, r)| r);
                if let Some(name) = after.and_then(|r| r.split(|c: char| !c.is_alphanumeric() && c != '_').next()) {
                    let mut path = out[f].clone();
                    path.push(name.to_string());
                    found.push((target, path));
                }
            }
            found
        })
        .collect();
    for (target, path) in declared {
        out.insert(target, path);
    }
    out.into_iter().filter(|(f, _)| !is_test_file(f)).collect()
}

fn is_test_file(f: &Path) -> bool {
    let name = f.file_name().unwrap().to_string_lossy();
    name == "tests.rs" || name.ends_with("_tests.rs")
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The file's code: its comments dropped, and its unit tests (an inline
/// `#[cfg(test)]` module, last by the project's habit) cut off.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The top-level modules a module at `path` names: `crate::x`,
/// `crate::{x, y::z}`, `super::…` climbing out of its top-level module,
/// and the `macros` console.rs exports at the root (`crate::say!`).
fn uses(code: &str, path: &[String], macros: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = code.as_bytes();
    let word = |at: usize| -> (&str, usize) {
        let end = code[at..].find(|c: char| !c.is_alphanumeric() && c != '_').map_or(code.len(), |e| at + e);
        (&code[at..end], end)
    };
    // One path's first segment, or each item of a `{…}` group.
    let firsts = |at: usize| -> Vec<(String, bool)> {
        if bytes.get(at) == Some(&b'{') {
            let mut depth = 0;
            let mut items = Vec::new();
            let mut start = at + 1;
            for (i, c) in code[at..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' | ',' if depth == 1 => {
                        let item = code[start..at + i].trim();
                        let (w, end) = word(start + (code[start..].len() - code[start..].trim_start().len()));
                        if !item.is_empty() && !w.is_empty() {
                            items.push((w.to_string(), code[end..].starts_with('!')));
                        }
                        start = at + i + 1;
                        if c == '}' {
                            break;
                        }
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            items
        } else {
            let (w, end) = word(at);
            if w.is_empty() { Vec::new() } else { vec![(w.to_string(), code[end..].starts_with('!'))] }
        }
    };
    let macro_or = |(name, is_macro): (String, bool)| {
        if is_macro || macros.contains(&name) { "console".to_string() } else { name }
    };
    for (i, _) in code.match_indices("crate::") {
        if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
            continue;
        }
        out.extend(firsts(i + 7).into_iter().map(macro_or));
    }
    for (i, _) in code.match_indices("super::") {
        if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':') {
            continue;
        }
        let mut at = i;
        let mut up = 0;
        while code[at..].starts_with("super::") {
            at += 7;
            up += 1;
        }
        if up < path.len() {
            continue; // still inside its own top-level module
        }
        out.extend(firsts(at).into_iter().map(macro_or));
    }
    out
}
