//! The layers of docs/architecture.md, held against the code: which
//! top-level module may use which, checked against every `crate::`,
//! `super::` and `leasequake_*::` path of every file outside the tests, in
//! src/ and in the child crate. The crates below the main one (model, io,
//! check, child, experiment, report, harness) are held to each other by their Cargo.toml, which this
//! checks too. A module reaching up a layer fails here, not in a reader's
//! head months later; the doc lists the same tables, and this test holds
//! the doc to them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::helper::repo;

/// Each top-level module of src/ and what it may use besides itself, from
/// the bottom up. `lib.rs`, `main.rs` and `commands/` wire the layers
/// together and may use anything.
const LAYERS: &[(&str, &[&str])] = &[
    ("cli", &["worker"]),
    ("shrink", &["model", "check", "report", "trial"]),
    ("error", &["experiment", "report", "trial", "console"]),
    ("calibrate", &["model", "check", "experiment", "child", "proxy", "trial", "realtime", "error", "console"]),
];

/// The child crate's own modules (crates/leasequake-child/src/), held the
/// same way.
const CHILD_LAYERS: &[(&str, &[&str])] = &[
    ("realtime", &[]),
    ("child", &["model"]),
    ("substrate", &["model"]),
    ("worker", &["model", "child", "substrate", "realtime"]),
];

/// The harness crate's modules (crates/leasequake-harness/src/).
const HARNESS_LAYERS: &[(&str, &[&str])] =
    &[("proxy", &["model"]), ("trial", &["model", "substrate", "proxy", "realtime", "console"])];

/// The crates below the main one, and the leasequake crates each may
/// depend on (its Cargo.toml): the compiler holds each to them. The main
/// crate re-exports `leasequake-child`'s modules (child, realtime,
/// substrate, worker) and the others as `model` and `check`.
const CRATES: &[(&str, &[&str])] = &[
    ("leasequake-model", &[]),
    ("leasequake-check", &["leasequake-model"]),
    ("leasequake-child", &["leasequake-model"]),
    ("leasequake-io", &[]),
    ("leasequake-experiment", &["leasequake-io", "leasequake-model"]),
    ("leasequake-report", &["leasequake-check", "leasequake-experiment", "leasequake-io", "leasequake-model"]),
    ("leasequake-harness", &["leasequake-child", "leasequake-io", "leasequake-model"]),
];

/// What a crate's own tests may use besides (its `[dev-dependencies]`):
/// the harness's write their experiments as YAML.
const TEST_ONLY: &[(&str, &[&str])] = &[("leasequake-harness", &["leasequake-experiment"])];

/// Where everything is wired: may use any module.
const WIRING: &[&str] = &["lib", "main", "commands"];

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let wrong = [
        ("src", LAYERS, WIRING),
        ("crates/leasequake-child/src", CHILD_LAYERS, &["lib"][..]),
        ("crates/leasequake-harness/src", HARNESS_LAYERS, &["lib"][..]),
    ]
    .into_iter()
    .flat_map(|(tree, layers, wiring)| against(&repo().join(tree), layers, wiring))
    .collect::<Vec<_>>();
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

/// Every import of every non-test file under `src` that its module's line
/// of `layers` does not allow (a module in no line is one too).
fn against(src: &Path, layers: &[(&str, &[&str])], wiring: &[&str]) -> Vec<String> {
    let allowed: BTreeMap<&str, BTreeSet<&str>> =
        layers.iter().map(|(m, uses)| (*m, uses.iter().copied().collect())).collect();
    let files = modules(src);
    assert!(files.len() > 20, "only {} source files found under {}", files.len(), src.display());
    // The macros console.rs exports at the crate's root, by name.
    let console = std::fs::read_to_string(repo().join("crates/leasequake-io/src/console.rs")).unwrap();
    let macros: BTreeSet<String> = console
        .split("macro_rules! ")
        .skip(1)
        .filter_map(|r| r.split(|c: char| !c.is_alphanumeric() && c != '_').next())
        .map(String::from)
        .collect();
    assert!(!macros.is_empty(), "console.rs exports no macro");
    let mut wrong = Vec::new();
    for (file, path, text) in &files {
        let top = path.first().map_or("lib", String::as_str);
        if wiring.contains(&top) {
            continue;
        }
        let rel = file.strip_prefix(repo()).unwrap_or(file).display().to_string();
        let Some(may) = allowed.get(top) else {
            wrong.push(format!(
                "{rel}: its module {top} is in no layer (give it a line of the table here and of docs/architecture.md)"
            ));
            continue;
        };
        for used in uses(&code_of(text), path, &macros) {
            if used != top && !may.contains(used.as_str()) {
                wrong.push(format!("{rel} uses {used}, which {top} may not (it may use: {})", list(may)));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    wrong
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
        let tests = TEST_ONLY.iter().find(|(c, _)| *c == name).map_or(&[][..], |(_, t)| *t);
        for (section, may) in [("[dependencies]", may.to_vec()), ("[dev-dependencies]", [*may, tests].concat())] {
            let ours = leasequake_deps(&manifest, section);
            let extra: Vec<&&str> = ours.iter().filter(|d| !may.contains(d)).collect();
            assert!(extra.is_empty(), "crates/{name}'s {section} names {extra:?}; it may name {may:?}");
        }
        found.insert(name);
    }
    assert_eq!(found.len(), CRATES.len(), "crates found: {found:?}");
}

#[test]
fn the_architecture_doc_lists_the_layers_the_test_holds() {
    let doc = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let mut missing = Vec::new();
    for (module, uses) in LAYERS.iter().chain(CHILD_LAYERS).chain(HARNESS_LAYERS) {
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

/// The leasequake crates one section of a Cargo.toml names.
fn leasequake_deps<'a>(manifest: &'a str, section: &str) -> BTreeSet<&'a str> {
    let mut inside = false;
    let mut ours = BTreeSet::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == section;
        } else if inside
            && let Some((key, _)) = line.split_once('=')
            && key.trim().starts_with("leasequake-")
        {
            ours.insert(key.trim());
        }
    }
    ours
}

fn list<'a>(names: impl IntoIterator<Item = &'a &'a str>) -> String {
    names.into_iter().copied().collect::<Vec<_>>().join(", ")
}

/// Every non-test source file under `src` with its module path (`["trial",
/// "server", "etcd"]`, `#[path]` modules under the module declaring them)
/// and its text, read once.
fn modules(src: &Path) -> Vec<(PathBuf, Vec<String>, String)> {
    let mut files = Vec::new();
    walk(src, &mut files);
    let texts: BTreeMap<PathBuf, String> =
        files.iter().map(|f| (f.clone(), std::fs::read_to_string(f).unwrap())).collect();
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
            // The raw text: the attribute's path is a string literal.
            let mut found = Vec::new();
            let mut rest = texts[f].as_str();
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
    out.into_iter().filter(|(f, _)| !is_test_file(f)).map(|(f, path)| (f.clone(), path, texts[&f].clone())).collect()
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

/// The file's code: its comments and string literals dropped, and its
/// test-only items (`#[cfg(test)]`: an inline test module, a helper)
/// cut out, each to the end of its braces or its `;`.
fn code_of(text: &str) -> String {
    let bare = strip(text);
    let mut out = String::new();
    let mut rest = bare.as_str();
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        // The item: up to its first `;` at depth 0, or its closing brace.
        let mut depth = 0;
        let mut end = rest.len();
        for (j, c) in rest.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = j + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = j + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `text` without comments (line, block and doc) and with every string and
/// character literal emptied, so that only code names modules.
fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '"' => {
                out.push('"');
                let mut escaped = false;
                for c in chars.by_ref() {
                    if !escaped && c == '"' {
                        break;
                    }
                    escaped = !escaped && c == '\\';
                }
                out.push('"');
            }
            // A char literal ('"', '{'), not a lifetime ('a).
            '\'' => {
                let ahead: String = chars.clone().take(3).collect();
                let close =
                    if ahead.starts_with('\\') { ahead[2..].find('\'').map(|k| k + 2) } else { ahead.find('\'') };
                match close {
                    Some(k) if k <= 2 => {
                        for _ in 0..=k {
                            chars.next();
                        }
                        out.push_str("' '");
                    }
                    _ => out.push('\''),
                }
            }
            c => out.push(c),
        }
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
    // The crates below, named directly rather than through the
    // re-exports: the child crate's modules by name, the others as the
    // main crate calls them.
    for (krate, alias) in [
        ("leasequake_child::", None),
        ("leasequake_io::", None),
        ("leasequake_harness::", None),
        ("leasequake_check", Some("check")),
        ("leasequake_experiment", Some("experiment")),
        ("leasequake_model", Some("model")),
        ("leasequake_report", Some("report")),
    ] {
        for (i, _) in code.match_indices(krate) {
            if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
                continue;
            }
            match alias {
                Some(a) => {
                    out.insert(a.to_string());
                }
                None => out.extend(firsts(i + krate.len()).into_iter().map(macro_or)),
            }
        }
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
