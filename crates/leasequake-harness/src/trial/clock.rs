//! Moving a program's clock: the clock shim (crates/leasequake-child/src/child/clock_shim.c, built
//! into this binary) preloaded into each program whose experiment sets a
//! clock offset, a clock rate or a `skew` fault, and one control file per
//! worker that the shim maps and the harness rewrites at a jump. Programs
//! that do not read the clock through libc (static binaries, Go) ignore
//! the shim: whether it was loaded is read off the process's mappings.

use std::io;
use std::path::{Path, PathBuf};

use crate::model::Experiment;
use crate::model::program::ClockWay;

/// The shim, as built for this harness.
static SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libleasequake-clock.so"));
/// Its file name, which also finds it in a process's mappings.
const SHIM_NAME: &str = "leasequake-clock.so";

use super::clock_settings::{SETTINGS_LEN, encode, write_offset};

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
    /// Each program whose clock was written into its vDSO.
    in_vdso: std::sync::Mutex<Vec<Option<super::vdso::Moved>>>,
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
        let in_vdso = std::sync::Mutex::new((0..exp.workers).map(|_| None).collect());
        Ok(ProgramClocks { shim, controls, in_vdso })
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

    /// Worker `w`'s clock settings, as its control file holds them (the
    /// vDSO clock's settings have its layout).
    pub fn settings(&self, w: usize) -> io::Result<[u8; SETTINGS_LEN]> {
        let control = std::fs::read(self.controls.get(w).ok_or_else(|| io::Error::other("no clock of its own"))?)?;
        control
            .get(..SETTINGS_LEN)
            .and_then(|c| c.try_into().ok())
            .ok_or_else(|| io::Error::other("its clock's settings are cut short"))
    }

    /// Worker `w`'s program `pid`, spawned with `vdso_env` (on this thread),
    /// moved in its vDSO before its first instruction with `settings`:
    /// Ok(fast: the true clock stays the vDSO's own) or why not.
    pub fn move_in_vdso(&self, w: usize, pid: nix::unistd::Pid, settings: [u8; SETTINGS_LEN]) -> Result<bool, String> {
        let moved = super::vdso::move_at_exec(pid, settings).map_err(|e| e.to_string())?;
        let fast = moved.fast;
        if let Some(slot) = self.in_vdso.lock().unwrap_or_else(|p| p.into_inner()).get_mut(w) {
            *slot = Some(moved);
        }
        Ok(fast)
    }

    /// Set worker `w`'s offset to `offset_ns`: its control file, and the
    /// clock in its program's vDSO if it has one there.
    pub fn jump(&self, dir: &Path, w: usize, offset_ns: i64) -> io::Result<()> {
        jump(dir, w, offset_ns)?;
        match self.in_vdso.lock().unwrap_or_else(|p| p.into_inner()).get(w) {
            Some(Some(moved)) => moved.jump(offset_ns),
            _ => Ok(()),
        }
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
    std::fs::write(path, encode(offset_ns, anchor_wall_ns, rate))
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

/// The environment a program is started with to have its clock moved in
/// its vDSO: its trampoline asks to be traced, and stops for the harness.
pub fn vdso_env() -> (&'static str, &'static str) {
    (crate::model::protocol::TRACE_EXEC_ENV, "1")
}

/// How a program is best moved where `way` leaves it to its executable
/// (`auto`): in its vDSO if it is static or a Go program, which read the
/// clock without the C library, else by the shim. `exe` is what its
/// trampoline execs (a name found on `path`, or a path from `cwd`).
pub fn way_for(way: ClockWay, exe: &std::ffi::OsStr, path: Option<&std::ffi::OsStr>, cwd: Option<&Path>) -> ClockWay {
    if way != ClockWay::Auto {
        return way;
    }
    let exe = Path::new(exe);
    let found = if exe.as_os_str().as_encoded_bytes().contains(&b'/') {
        Some(cwd.map_or(exe.to_path_buf(), |c| c.join(exe)))
    } else {
        let path = path.map(std::ffi::OsStr::to_os_string).or_else(|| std::env::var_os("PATH")).unwrap_or_default();
        // As execvp finds it: the first executable file of that name.
        std::env::split_paths(&path).map(|d| d.join(exe)).find(|p| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    };
    // Only where this build has a vDSO clock.
    match found.and_then(|p| reads_clock_without_libc(&p).ok()) {
        Some(true) if !super::vdso::CLOCK.is_empty() => ClockWay::Vdso,
        _ => ClockWay::Shim,
    }
}

/// Is the ELF executable at `path` static (no interpreter) or a Go program
/// (a Go build note)? Either reads the clock from the vDSO itself.
fn reads_clock_without_libc(path: &Path) -> io::Result<bool> {
    use super::elf::{Image, PT_INTERP, PT_NOTE};
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(path)?.take(1 << 20).read_to_end(&mut head)?;
    // A script, or not 64-bit little-endian.
    let Some(image) = Image::new(&head) else { return Ok(false) };
    let Some(segments) = image.segments() else { return Ok(false) };
    for note in segments.iter().filter(|s| s.kind == PT_NOTE) {
        // A note owned by "Go".
        // Every offset is the file's say: bounded by what was read.
        let end = note.offset.saturating_add(note.filesz).min(head.len() as u64);
        let mut n = note.offset;
        while n.saturating_add(12) <= end {
            let (Some(namesz), Some(descsz)) = (image.u32(n), image.u32(n + 4)) else { break };
            let at = usize::try_from(n + 12).unwrap_or(usize::MAX);
            let name = head.get(at..at.saturating_add(namesz as usize)).unwrap_or_default();
            if name.iter().rposition(|c| *c != 0).is_some_and(|last| &name[..=last] == b"Go") {
                return Ok(true);
            }
            n += 12 + namesz.div_ceil(4) * 4 + descsz.div_ceil(4) * 4;
        }
    }
    let interp = segments.iter().any(|s| s.kind == PT_INTERP);
    Ok(!interp)
}

/// Set the offset of the clock `control` moves to `offset_ns`.
pub fn jump_file(control: &Path, offset_ns: i64) -> io::Result<()> {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(control)?;
    write_offset(&f, 0, offset_ns)
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

#[cfg(test)]
mod way_tests {
    use super::*;

    /// A 64-bit x86_64 ELF header with program headers `(type, offset, size)`
    /// and `tail` after them.
    fn elf(headers: &[(u32, u64, u64)], tail: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[18] = 62;
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&(headers.len() as u16).to_le_bytes());
        for (kind, off, size) in headers {
            let mut p = vec![0u8; 56];
            p[..4].copy_from_slice(&kind.to_le_bytes());
            p[8..16].copy_from_slice(&off.to_le_bytes());
            p[32..40].copy_from_slice(&size.to_le_bytes());
            b.extend(p);
        }
        b.extend(tail);
        b
    }

    fn way(bytes: &[u8]) -> ClockWay {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("program");
        std::fs::write(&exe, bytes).unwrap();
        way_for(ClockWay::Auto, exe.as_os_str(), None, None)
    }

    #[test]
    fn auto_moves_a_static_or_go_program_in_its_vdso_and_any_other_by_the_shim() {
        // Dynamic (an interpreter): the shim.
        assert_eq!(way(&elf(&[(3, 0, 0)], b"")), ClockWay::Shim);
        // Static: no interpreter.
        assert_eq!(way(&elf(&[(1, 0, 0)], b"")), ClockWay::Vdso);
        // Dynamic, but a Go build note (a Go program with cgo).
        let mut note = Vec::new();
        // As Go writes it: the name "Go" padded with two NULs (namesz 4).
        for word in [4u32, 4, 4] {
            note.extend(word.to_le_bytes());
        }
        note.extend(b"Go\0\0abcd");
        let at = 64 + 2 * 56;
        assert_eq!(way(&elf(&[(3, 0, 0), (4, at, note.len() as u64)], &note)), ClockWay::Vdso);
        // Not an ELF (a script), or not found: the shim.
        assert_eq!(way(b"#!/bin/sh\n"), ClockWay::Shim);
        assert_eq!(
            way_for(ClockWay::Auto, "no-such-program-here".as_ref(), Some("/nonexistent".as_ref()), None),
            ClockWay::Shim
        );
        // Said outright: as said.
        assert_eq!(way_for(ClockWay::Vdso, "sh".as_ref(), None, None), ClockWay::Vdso);
        assert_eq!(way_for(ClockWay::Auto, "sh".as_ref(), None, None), ClockWay::Shim, "Debian's sh is dynamic");
    }
}
