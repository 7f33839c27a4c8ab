//! Stamps the git commit the binary is built from.

use std::process::Command;

fn main() {
    commit();
}

/// The commit the binary is built from (host.json says it, so that the
/// shards of one run can be told to come from one build): `unknown` out of
/// a git checkout, marked `-dirty` over uncommitted changes.
fn commit() {
    let git =
        |args: &[&str]| Command::new("git").args(args).output().ok().filter(|o| o.status.success()).map(|o| o.stdout);
    let text = |o: Vec<u8>| String::from_utf8_lossy(&o).trim().to_string();
    // Where git keeps this checkout's HEAD, index and refs: under .git in a
    // plain clone, elsewhere in a worktree (whose .git is a file), so ask
    // git rather than guess. HEAD moves with a checkout, the branch's ref
    // with a commit, the index with a stage.
    let mut watched = vec!["HEAD".to_string(), "index".to_string(), "packed-refs".to_string()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]).map(text));
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]).map(text)
            && std::path::Path::new(&path).exists()
        {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    // What is built: an edit there makes the build dirty without touching
    // git. A result script's output (results/) or the docs do not.
    let built = ["src", "crates", "Cargo.toml", "Cargo.lock", "build.rs"];
    for path in built {
        println!("cargo:rerun-if-changed={path}");
    }
    let commit = git(&["rev-parse", "HEAD"]).map(text);
    // Without optional locks, `status` does not rewrite the index it
    // refreshes, which would make the next build rerun this script.
    let mut status = vec!["--no-optional-locks", "status", "--porcelain", "--untracked-files=all", "--"];
    status.extend(built);
    let dirty = git(&status).is_some_and(|o| !o.is_empty());
    let stamp = match commit {
        Some(c) if dirty => format!("{c}-dirty"),
        Some(c) => c,
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=LEASEQUAKE_GIT_COMMIT={stamp}");
}
