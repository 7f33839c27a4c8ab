//! Builds the clock shim a program under test is given when its clock is
//! moved (the child crate's child/clock_shim.c), with the C compiler that
//! links Rust itself; the harness carries the shared object in its binary.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "../leasequake-child/src/child/clock_shim.c";
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
}
