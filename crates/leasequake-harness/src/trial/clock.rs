//! Moving a program's clock: the clock shim (crates/leasequake-child/src/child/clock_shim.c, built
//! into this binary) preloaded into each program whose experiment sets a
//! clock offset, a clock rate or a `skew` fault, and one control file per
//! worker that the shim maps and the harness rewrites at a jump. Programs
//! that do not read the clock through libc (static binaries, Go) ignore
//! the shim: whether it was loaded is read off the process's mappings.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::model::Experiment;

/// The shim, as built for this harness.
static SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libleasequake-clock.so"));
/// Its file name, which also finds it in a process's mappings.
const SHIM_NAME: &str = "leasequake-clock.so";

/// The control file's layout (four 64-bit words): a sequence number, odd
/// while the harness writes; the offset; the anchor of the rate; the rate.
const SEQ: u64 = 0;
const OFFSET: u64 = 8;

/// Does `exp` move a program's clock?
pub fn moves_program_clock(exp: &Experiment) -> bool {
    exp.program.is_some()
        && (exp.worker.clock_offset.all().iter().any(|o| o.as_ns() != 0)
            || exp.worker.clock_rate.all().iter().any(|r| *r != 1.0)
            || exp.fault_kinds().any(|f| f.action == crate::model::Action::Skew))
}

/// The shim and every worker's control file, in a trial's clock directory.
pub struct ProgramClocks {
    shim: PathBuf,
    controls: Vec<PathBuf>,
}

impl ProgramClocks {
    /// Write the shim and one control file per worker into `dir`: each
    /// worker's configured offset, its rate from `anchor_wall_ns` on.
    pub fn prepare(exp: &Experiment, dir: &Path, anchor_wall_ns: i64) -> io::Result<ProgramClocks> {
        std::fs::create_dir_all(dir)?;
        let shim = dir.join(SHIM_NAME);
        if shim.to_string_lossy().contains([' ', ':']) {
            // The loader splits LD_PRELOAD at spaces and colons.
            return Err(io::Error::other(
                "a program's clock shim cannot be preloaded from a path with a space or a colon: choose --out without them",
            ));
        }
        std::fs::write(&shim, SHIM)?;
        let controls = (0..exp.workers)
            .map(|w| {
                let path = control_path(dir, w);
                let offset = exp.worker.clock_offset.of(w).as_ns();
                write_control(&path, offset, anchor_wall_ns, exp.worker.clock_rate.of(w)).map(|()| path)
            })
            .collect::<io::Result<_>>()?;
        Ok(ProgramClocks { shim, controls })
    }

    /// The environment worker `w`'s program is started with: the shim
    /// preloaded before whatever the experiment preloads itself.
    pub fn env(&self, w: usize, own: Option<&std::ffi::OsStr>) -> Vec<(&'static str, std::ffi::OsString)> {
        let mut preload = self.shim.clone().into_os_string();
        if let Some(own) = own.filter(|o| !o.is_empty()) {
            preload.push(":");
            preload.push(own);
        }
        let control = self.controls.get(w).cloned().unwrap_or_default().into_os_string();
        vec![("LD_PRELOAD", preload), ("LEASEQUAKE_CLOCK", control)]
    }

    /// The shim is not needed once the trial is over (the control files
    /// stay: they say where each clock ended).
    pub fn remove_shim(&self) {
        let _ = std::fs::remove_file(&self.shim);
    }
}

fn control_path(dir: &Path, w: usize) -> PathBuf {
    dir.join(format!("{w}.clock"))
}

fn write_control(path: &Path, offset_ns: i64, anchor_wall_ns: i64, rate: f64) -> io::Result<()> {
    let mut words = Vec::with_capacity(32);
    words.extend_from_slice(&0u64.to_ne_bytes());
    words.extend_from_slice(&offset_ns.to_ne_bytes());
    words.extend_from_slice(&anchor_wall_ns.to_ne_bytes());
    words.extend_from_slice(&rate.to_ne_bytes());
    std::fs::write(path, words)
}

/// A server whose wall clock the harness moves (a member of a replicated
/// service hit by `skew`): the shim in `dir`, and a control file of its
/// own named `name`, at no offset yet. The environment to start it with.
pub fn server_clock(dir: &Path, name: &str) -> io::Result<(PathBuf, Vec<(&'static str, std::ffi::OsString)>)> {
    std::fs::create_dir_all(dir)?;
    let shim = dir.join(SHIM_NAME);
    if !shim.exists() {
        std::fs::write(&shim, SHIM)?;
    }
    let control = dir.join(format!("{name}.clock"));
    write_control(&control, 0, 0, 1.0)?;
    let env = vec![("LD_PRELOAD", shim.into_os_string()), ("LEASEQUAKE_CLOCK", control.clone().into_os_string())];
    Ok((control, env))
}

/// Set worker `w`'s offset to `offset_ns` in place, under the seqlock: a
/// program reading it meanwhile retries until the sequence is even again.
pub fn jump(dir: &Path, w: usize, offset_ns: i64) -> io::Result<()> {
    jump_file(&control_path(dir, w), offset_ns)
}

/// Set the offset of the clock `control` moves to `offset_ns`.
pub fn jump_file(control: &Path, offset_ns: i64) -> io::Result<()> {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(control)?;
    let mut seq = [0u8; 8];
    f.read_exact_at(&mut seq, SEQ)?;
    let seq = u64::from_ne_bytes(seq);
    f.write_all_at(&(seq + 1).to_ne_bytes(), SEQ)?;
    f.write_all_at(&offset_ns.to_ne_bytes(), OFFSET)?;
    f.write_all_at(&(seq + 2).to_ne_bytes(), SEQ)
}

/// How a worker's processes stand with the shim.
#[derive(Debug, Clone, PartialEq)]
pub enum GroupShim {
    /// Every live process of the group has loaded it.
    Loaded,
    /// One has not: its clock is not moved.
    Missing { pid: i32, name: String },
    /// Not yet told: a process just exec'd (only the loader mapped), or
    /// nobody left in the group.
    Unknown,
}

/// The shim in each live process of each process group of `pgids`, read
/// from one pass over /proc. A group is a worker (its group id is its
/// pid): the program and whatever it started, such as the commands of a
/// `shell: true` script. One process without the shim leaves that
/// process's clock where it was, however the others move.
pub fn groups_shim(pgids: &[i32]) -> Vec<GroupShim> {
    let mut told: Vec<Option<bool>> = vec![None; pgids.len()];
    let mut out = vec![GroupShim::Unknown; pgids.len()];
    let Ok(all) = procfs::process::all_processes() else { return out };
    let members = all
        .filter_map(Result::ok)
        .filter_map(|p| p.stat().ok())
        // A zombie has no mappings to read, and no clock.
        .filter(|s| s.state != 'Z' && s.state != 'X');
    for member in members {
        let Some(g) = pgids.iter().position(|&p| p == member.pgrp) else { continue };
        if matches!(out[g], GroupShim::Missing { .. }) {
            continue;
        }
        match shim_loaded(member.pid) {
            Some(true) => told[g] = told[g].or(Some(true)),
            Some(false) => out[g] = GroupShim::Missing { pid: member.pid, name: member.comm },
            None => told[g] = Some(false),
        }
    }
    for (g, t) in told.into_iter().enumerate() {
        if t == Some(true) && out[g] == GroupShim::Unknown {
            out[g] = GroupShim::Loaded;
        }
    }
    out
}

/// Has process `pid` loaded the shim? None while it cannot be told yet
/// (just after exec only the loader is mapped); Some(false) once libc is
/// mapped without it, or for a static binary.
pub fn shim_loaded(pid: i32) -> Option<bool> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    if maps.contains(SHIM_NAME) {
        Some(true)
    } else if maps.contains("libc.so") || !maps.contains("/ld-linux") {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process group of its own: `sh` (dynamic) with a child of its own.
    fn group(script: &str) -> std::process::Child {
        use std::os::unix::process::CommandExt;
        std::process::Command::new("sh").args(["-c", script]).process_group(0).spawn().unwrap()
    }

    fn settled(pgid: i32) -> GroupShim {
        for _ in 0..500 {
            match groups_shim(&[pgid]).remove(0) {
                GroupShim::Unknown => std::thread::sleep(std::time::Duration::from_millis(2)),
                told => return told,
            }
        }
        GroupShim::Unknown
    }

    #[test]
    fn a_group_is_missing_the_shim_when_any_of_its_processes_is() {
        // Neither process preloads the shim: the first one found is named,
        // whichever of the two it is.
        let mut child = group("sleep 30 & sleep 30; wait");
        let pgid = child.id() as i32;
        let told = settled(pgid);
        // Several groups in one pass: each told apart (a group of nobody
        // tells nothing).
        let both = groups_shim(&[pgid, i32::MAX]);
        assert!(matches!(both[0], GroupShim::Missing { .. }) && both[1] == GroupShim::Unknown, "{both:?}");
        assert!(matches!(&told, GroupShim::Missing { name, .. } if name == "sh" || name == "sleep"), "{told:?}");
        nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), nix::sys::signal::Signal::SIGKILL).unwrap();
        child.wait().unwrap();
        // The background sleep, not our child, dies in its own time after
        // the signal (and is reaped by another): wait until the group has
        // nobody alive, as /proc says, then ask.
        let alive = || {
            procfs::process::all_processes()
                .unwrap()
                .filter_map(|p| p.ok()?.stat().ok())
                .any(|s| s.pgrp == pgid && s.state != 'Z' && s.state != 'X')
        };
        let started = std::time::Instant::now();
        while alive() {
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "SIGKILL did not empty the group");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // A group with nobody left in it tells nothing.
        assert_eq!(groups_shim(&[pgid]), vec![GroupShim::Unknown]);
    }

    #[test]
    fn a_jump_rewrites_the_offset_and_leaves_the_sequence_even() {
        let dir = tempfile::tempdir().unwrap();
        let text = "name: c\nworkers: 2\nprogram: {command: [\"true\"]}\nworker: {clock_offset: [1s, -2s]}\n";
        let exp = crate::experiment::load_str(Path::new("c.yaml"), text, &Default::default()).unwrap();
        assert!(moves_program_clock(&exp));
        let clocks = ProgramClocks::prepare(&exp, dir.path(), 42).unwrap();
        let words = |w: usize| {
            let b = std::fs::read(control_path(dir.path(), w)).unwrap();
            let word = |i: usize| i64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
            (word(0), word(1), word(2), f64::from_ne_bytes(b[24..32].try_into().unwrap()))
        };
        assert_eq!(words(1), (0, -2_000_000_000, 42, 1.0));
        jump(dir.path(), 1, 8_000_000_000).unwrap();
        assert_eq!(words(1), (2, 8_000_000_000, 42, 1.0), "sequence even again after the write");
        assert_eq!(words(0).1, 1_000_000_000, "the other worker's clock is untouched");
        let env = clocks.env(0, Some(std::ffi::OsStr::new("/x.so")));
        assert!(env[0].1.to_string_lossy().ends_with("leasequake-clock.so:/x.so"), "{env:?}");
    }
}
