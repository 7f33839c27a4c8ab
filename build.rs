//! Builds the clock shim a program under test is given when its clock is
//! moved (src/child/clock_shim.c), with the C compiler that links Rust
//! itself; the harness carries the shared object in its binary. Stamps the
//! git commit the binary is built from.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "src/child/clock_shim.c";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-env-changed=CC");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("libleasequake-clock.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-Wno-nonnull-compare", "-o"])
        .arg(&out)
        .arg(src)
        .arg("-ldl")
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` for the clock shim: {e}"));
    assert!(status.success(), "`{cc}` failed to build the clock shim ({status})");
    commit();
}

/// The commit the binary is built from (host.json says it, so that the
/// shards of one run can be told to come from one build): `unknown` out of
/// a git checkout, marked `-dirty` over uncommitted changes.
fn commit() {
    for path in [".git/HEAD", ".git/index", ".git/refs", ".git/packed-refs"] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let git =
        |args: &[&str]| Command::new("git").args(args).output().ok().filter(|o| o.status.success()).map(|o| o.stdout);
    let commit = git(&["rev-parse", "HEAD"]).map(|o| String::from_utf8_lossy(&o).trim().to_string());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|o| !o.is_empty());
    let stamp = match commit {
        Some(c) if dirty => format!("{c}-dirty"),
        Some(c) => c,
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=LEASEQUAKE_GIT_COMMIT={stamp}");
}
