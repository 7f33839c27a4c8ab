//! Builds what the harness puts into a program under test whose clock is
//! moved, with the C compiler that links Rust itself, and carries both in
//! its binary: the clock shim (the child crate's child/clock_shim.c, a
//! shared object to preload), and the vDSO clock (child/vdso_clock.c, one
//! flat piece of x86_64 code to write into a program's vDSO; empty on
//! other architectures, where the harness says it cannot be used).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    println!("cargo:rerun-if-env-changed=CC");
    let shim = "../leasequake-child/src/child/clock_shim.c";
    println!("cargo:rerun-if-changed={shim}");
    run(&cc, "the clock shim", |c| {
        c.args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-Wno-nonnull-compare", "-o"])
            .arg(out_dir.join("libleasequake-clock.so"))
            .arg(shim)
            .arg("-ldl")
    });
    let (vdso, script) = ("../leasequake-child/src/child/vdso_clock.c", "../leasequake-child/src/child/vdso_clock.ld");
    println!("cargo:rerun-if-changed={vdso}");
    println!("cargo:rerun-if-changed={script}");
    let flat = out_dir.join("leasequake-vdso-clock.bin");
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("x86_64") {
        std::fs::write(&flat, b"").expect("write the empty vDSO clock");
        return;
    }
    // Freestanding and addressed relative to itself: no loader will touch
    // it, and no stack protector, unwind tables or CET notes go with it.
    run(&cc, "the vDSO clock", |c| {
        c.args([
            "-O2",
            "-Wall",
            "-Werror",
            "-fPIC",
            "-ffreestanding",
            "-fno-stack-protector",
            "-fno-asynchronous-unwind-tables",
            "-fcf-protection=none",
            "-nostdlib",
            "-static",
            "-Wl,--build-id=none",
            "-Wl,--oformat=binary",
            "-Wl,-e,0",
        ])
        .arg(format!("-Wl,-T,{script}"))
        .arg("-o")
        .arg(&flat)
        .arg(vdso)
    });
}

/// Run the C compiler as `args` set it up, or fail the build naming `what`.
fn run(cc: &str, what: &str, args: impl FnOnce(&mut Command) -> &mut Command) {
    let mut cmd = Command::new(cc);
    let status = args(&mut cmd).status().unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` for {what}: {e}"));
    assert!(status.success(), "`{cc}` failed to build {what} ({status})");
}
