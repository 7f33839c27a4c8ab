//! Moving the wall clock of a program that reads it without the C library
//! (Go, static binaries), as Chaos Mesh's TimeChaos does on Kubernetes:
//! the program stops at its exec (its trampoline asked to be traced), and
//! before its first instruction the harness writes the vDSO clock
//! (crates/leasequake-child/src/child/vdso_clock.c, built into this binary)
//! into the free end of the program's vDSO, points the vDSO's
//! clock_gettime, gettimeofday and time at it, and lets the program go.
//! Only a parent's rights over its own child are used: the program asks to
//! be traced, and /proc/PID/mem writes what the vDSO's pages are.
//!
//! The true clock stays the vDSO's own where its clock_gettime begins with
//! instructions that can run anywhere (its first ones are copied beside
//! the clock, followed by a jump back past them); elsewhere it is the
//! system call, which is slower. `plan` is pure: the vDSO's bytes in,
//! the writes out.

use std::fmt;

/// The vDSO clock, as built for this harness (empty where it cannot be).
pub static CLOCK: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/leasequake-vdso-clock.bin"));

/// The vDSO clock's head (vdso_clock.c says the same).
pub const MAGIC: &[u8; 8] = b"LQCLOCK1";
const ENTRY_CLOCK_GETTIME: u64 = 8;
const ENTRY_GETTIMEOFDAY: u64 = 16;
const ENTRY_TIME: u64 = 24;
const TRUE_CLOCK: u64 = 32;
const TRUE_CLOCK_LEN: usize = 32;
/// Where its settings are: sequence, offset, anchor, rate.
pub const SETTINGS: u64 = 64;
use super::clock_settings::SETTINGS_LEN;

/// What to write into a process whose vDSO is at `base`, and where its
/// clock's settings then are.
#[derive(Debug, PartialEq)]
pub struct Patch {
    /// (address, bytes), the clock first, then the jumps to it.
    pub writes: Vec<(u64, Vec<u8>)>,
    /// The settings' address.
    pub settings: u64,
    /// The true clock is the vDSO's own (else the system call).
    pub fast: bool,
}

#[derive(Debug, PartialEq)]
pub struct NotPatched(pub String);

impl fmt::Display for NotPatched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The writes that move the clock of a process whose vDSO, `vdso` (the
/// whole mapping), is at `base`; `clock` is the vDSO clock with its
/// settings in place.
pub fn plan(vdso: &[u8], base: u64, clock: &[u8]) -> Result<Patch, NotPatched> {
    let no = |why: &str| Err(NotPatched(why.to_string()));
    if clock.len() < SETTINGS as usize + SETTINGS_LEN || &clock[..8] != MAGIC {
        return no("this build has no vDSO clock (it is made for x86_64 only)");
    }
    let elf =
        Elf::read(vdso).ok_or_else(|| NotPatched("the vDSO is not an x86_64 ELF image this harness reads".into()))?;
    let Some(gettime) = elf.symbol(&["__vdso_clock_gettime", "clock_gettime"]) else {
        return no("the vDSO has no clock_gettime");
    };
    // The clock goes after everything the image holds, in the padding of
    // its last page, 16-aligned.
    let at = elf.used.div_ceil(16) * 16;
    if at + clock.len() as u64 > vdso.len() as u64 {
        return no("the vDSO has no room left for the clock");
    }
    let mut placed = clock.to_vec();
    let addr = base + at;
    // A function's jump goes after its endbr64, kept for indirect-branch
    // tracking; the rest of its start is copied beside the clock.
    let hooked = |f: u64| -> Result<u64, NotPatched> {
        let code = vdso.get(f as usize..).filter(|c| c.len() >= 16);
        let code = code.ok_or_else(|| NotPatched("the vDSO's symbols point outside it".into()))?;
        Ok(f + if code.starts_with(&ENDBR64) { 4 } else { 0 })
    };
    let entry = hooked(gettime)?;
    let prologue = relocatable(&vdso[entry as usize..]);
    let fast = prologue.is_some_and(|n| n + 5 <= TRUE_CLOCK_LEN);
    if let (Some(n), true) = (prologue, fast) {
        let slot = TRUE_CLOCK as usize;
        let mut true_clock = vdso[entry as usize..entry as usize + n].to_vec();
        true_clock.extend(jmp(addr + TRUE_CLOCK + n as u64, base + entry + n as u64));
        true_clock.resize(TRUE_CLOCK_LEN, 0xcc);
        placed[slot..slot + TRUE_CLOCK_LEN].copy_from_slice(&true_clock);
    }
    let mut writes = vec![(addr, placed)];
    writes.push((base + entry, jmp(base + entry, addr + ENTRY_CLOCK_GETTIME).to_vec()));
    let others =
        [(&["__vdso_gettimeofday", "gettimeofday"][..], ENTRY_GETTIMEOFDAY), (&["__vdso_time", "time"], ENTRY_TIME)];
    for (names, to) in others {
        if let Some(f) = elf.symbol(names) {
            let f = hooked(f)?;
            writes.push((base + f, jmp(base + f, addr + to).to_vec()));
        }
    }
    Ok(Patch { writes, settings: addr + SETTINGS, fast })
}

/// `jmp rel32` at `from` to `to`.
fn jmp(from: u64, to: u64) -> [u8; 5] {
    let rel = (to as i64 - (from as i64 + 5)) as i32;
    let r = rel.to_le_bytes();
    [0xe9, r[0], r[1], r[2], r[3]]
}

/// endbr64, which starts a function under indirect-branch tracking.
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];

/// How many bytes of whole instructions at the start of `code` cover a
/// jump (5 bytes) and can run anywhere else: only the prologue
/// instructions compilers put there (pushes, frame set-up, stack
/// adjustment), none of which refers to where it is. None if another one
/// comes first. It is assumed, as compilers make function starts, that no
/// branch of the function lands inside those bytes.
fn relocatable(code: &[u8]) -> Option<usize> {
    let mut n = 0;
    while n < 5 {
        let rest = code.get(n..)?;
        n += match rest {
            [0x50..=0x57, ..] => 1,                  // push r64
            [0x41, 0x50..=0x57, ..] => 2,            // push r8..r15
            [0x48, 0x89, 0xe5, ..] => 3,             // mov %rsp,%rbp
            [0x48, 0x83, 0xec | 0xe4, _, ..] => 4,   // sub/and $imm8,%rsp
            [0x48, 0x81, 0xec, _, _, _, _, ..] => 7, // sub $imm32,%rsp
            _ => return None,
        };
    }
    Some(n)
}

/// What `plan` needs of the vDSO's ELF image.
struct Elf {
    /// Exported functions: (name, offset into the image).
    symbols: Vec<(String, u64)>,
    /// The end of everything the image holds (headers, sections, the
    /// section header table).
    used: u64,
}

impl Elf {
    fn read(b: &[u8]) -> Option<Elf> {
        use super::elf::{Image, PT_LOAD};
        let image = Image::new(b)?;
        if image.machine()? != 62 {
            return None; // not x86_64
        }
        let mut used = image.headers_end()?;
        // The first loaded segment's address is the image's offset 0.
        let mut vaddr0 = None;
        for s in image.segments()?.iter().filter(|s| s.kind == PT_LOAD) {
            vaddr0.get_or_insert(s.vaddr.wrapping_sub(s.offset));
            used = used.max(s.offset.checked_add(s.filesz)?);
        }
        let vaddr0 = vaddr0?;
        let (shoff, shentsize, shnum) = (image.u64(40)?, image.u16(58)?, image.u16(60)?);
        let section = |i: u64| -> Option<(u64, u64, u64, u64, u64)> {
            // A section header is 64 bytes: no field's offset overflows.
            let s = shoff.checked_add(i * shentsize).filter(|s| s.checked_add(64).is_some())?;
            // type, offset, size, link, entry size
            Some((image.u32(s + 4)?, image.u64(s + 24)?, image.u64(s + 32)?, image.u32(s + 40)?, image.u64(s + 56)?))
        };
        let mut symbols = Vec::new();
        for i in 0..shnum {
            let (kind, off, size, link, entsize) = section(i)?;
            used = used.max(off.checked_add(size)?);
            if kind != 11 || entsize < 24 {
                continue; // not SHT_DYNSYM
            }
            let (_, stroff, strsize, _, _) = section(link)?;
            for k in 0..size / entsize {
                let sym = off.checked_add(k * entsize).filter(|s| s.checked_add(24).is_some())?;
                let (name, value) = (image.u32(sym)?, image.u64(sym + 8)?);
                // STT_FUNC, defined.
                if image.u8(sym + 4)? & 0xf != 2 || image.u16(sym + 6)? == 0 || name >= strsize {
                    continue;
                }
                let start = usize::try_from(stroff.checked_add(name)?).ok()?;
                let len = b.get(start..)?.iter().position(|c| *c == 0)?;
                let name = String::from_utf8_lossy(&b[start..start + len]).into_owned();
                symbols.push((name, value.wrapping_sub(vaddr0)));
            }
        }
        Some(Elf { symbols, used })
    }

    /// The offset of the first of `names` it exports, within the image.
    fn symbol(&self, names: &[&str]) -> Option<u64> {
        names.iter().find_map(|n| self.symbols.iter().find(|(s, _)| s == n).map(|(_, v)| *v))
    }
}

/// A program whose vDSO clock was written: its memory (the handle stays
/// bound to the address space it was opened on: once the program exits or
/// execs, a write fails rather than land in another), and where its
/// clock's settings are in it.
pub struct Moved {
    mem: std::fs::File,
    settings: u64,
    /// The true clock is the vDSO's own (else the system call).
    pub fast: bool,
}

impl Moved {
    /// Set its offset to `offset_ns`, under the seqlock (one writer: the
    /// trial's nemesis). Refused if the settings are not the clock's.
    pub fn jump(&self, offset_ns: i64) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let mut head = [0u8; 8];
        self.mem.read_exact_at(&mut head, self.settings - SETTINGS)?;
        if &head != MAGIC {
            return Err(std::io::Error::other("its vDSO clock is gone (it exec'd)"));
        }
        super::clock_settings::write_offset(&self.mem, self.settings, offset_ns)
    }
}

/// How long a program may take from its spawn to its exec (the trampoline
/// ties itself to the harness, joins the cgroup and execs: milliseconds).
const EXEC_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// The program `pid`, whose trampoline asked to be traced and stopped
/// itself (`exec-program` with `LEASEQUAKE_TRACE_EXEC`), followed to its
/// exec, its vDSO clock written there with `settings`, and let go. Must be
/// called on the thread that spawned it (its tracer). While it is traced,
/// the harness's death kills it (PTRACE_O_EXITKILL). A program that could
/// not be traced is let go unmoved; one that exits first is left to
/// whoever reaps it; one that does not reach its exec in time is killed.
pub fn move_at_exec(pid: nix::unistd::Pid, settings: [u8; SETTINGS_LEN]) -> Result<Moved, NotPatched> {
    use nix::sys::ptrace;
    use nix::sys::signal::{Signal, kill};
    let deadline = std::time::Instant::now() + EXEC_WITHIN;
    // Its own stop, right after it asked to be traced.
    if let (false, _) = next_stop(pid, deadline)? {
        let _ = kill(pid, Signal::SIGCONT);
        return Err(NotPatched("it could not be traced (its log says why)".into()));
    }
    let options = ptrace::Options::PTRACE_O_TRACEEXEC | ptrace::Options::PTRACE_O_EXITKILL;
    if let Err(e) = ptrace::setoptions(pid, options).and_then(|()| ptrace::cont(pid, None)) {
        let _ = ptrace::detach(pid, None);
        return Err(NotPatched(format!("cannot follow it to its exec: {e}")));
    }
    // Then its exec; a signal it gets meanwhile is handed on.
    loop {
        let (_, status) = next_stop(pid, deadline)?;
        if status == libc::SIGTRAP | (libc::PTRACE_EVENT_EXEC << 8) {
            break;
        }
        let sig = Signal::try_from(status & 0x7f).ok();
        if ptrace::cont(pid, sig).is_err() {
            return Err(NotPatched("it was lost on its way to its exec".into()));
        }
    }
    let moved = write_clock(pid, &settings);
    let _ = ptrace::detach(pid, None);
    moved
}

/// Its next stop, taken: (traced, the stop's status: the signal, and a
/// ptrace event in the bits above it). An exit is left to be reaped.
fn next_stop(pid: nix::unistd::Pid, deadline: std::time::Instant) -> Result<(bool, i32), NotPatched> {
    loop {
        // SAFETY: waitid fills `info`, which lives on this frame.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let how = libc::WSTOPPED | libc::WEXITED | libc::WNOWAIT | libc::WNOHANG | libc::__WALL;
        let r = unsafe { libc::waitid(libc::P_PID, pid.as_raw() as libc::id_t, &mut info, how) };
        if r == -1 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(NotPatched(format!("cannot wait for its exec: {e}")));
        }
        // SAFETY: waitid filled it.
        let (who, status) = unsafe { (info.si_pid(), info.si_status()) };
        match info.si_code {
            _ if who == 0 && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            _ if who == 0 => {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                return Err(NotPatched(format!("it did not reach its exec in {EXEC_WITHIN:?}: killed")));
            }
            libc::CLD_TRAPPED | libc::CLD_STOPPED => {
                let mut taken = 0;
                // SAFETY: plain waitpid on our own child, whose stop was just seen.
                unsafe { libc::waitpid(pid.as_raw(), &mut taken, libc::WUNTRACED | libc::__WALL) };
                return Ok((info.si_code == libc::CLD_TRAPPED, status));
            }
            _ => return Err(NotPatched("it ended before its first instruction".into())),
        }
    }
}

/// The `[vdso]` mapping of process `pid`: (from, to).
fn vdso_range(pid: i32) -> Option<(u64, u64)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let (from, to) = maps.lines().find(|l| l.ends_with("[vdso]"))?.split(' ').next()?.split_once('-')?;
    Some((u64::from_str_radix(from, 16).ok()?, u64::from_str_radix(to, 16).ok()?))
}

/// The vDSO clock written into the stopped program `pid`.
fn write_clock(pid: nix::unistd::Pid, settings: &[u8; SETTINGS_LEN]) -> Result<Moved, NotPatched> {
    use std::os::unix::fs::FileExt;
    let io = |what: &'static str| move |e: std::io::Error| NotPatched(format!("{what}: {e}"));
    let Some((from, to)) = vdso_range(pid.as_raw()) else { return Err(NotPatched("it has no vDSO".into())) };
    let mem = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{pid}/mem"))
        .map_err(io("its memory"))?;
    let mut vdso = vec![0; (to - from) as usize];
    mem.read_exact_at(&mut vdso, from).map_err(io("its vDSO"))?;
    let mut clock = CLOCK.to_vec();
    if let Some(slot) = clock.get_mut(SETTINGS as usize..SETTINGS as usize + SETTINGS_LEN) {
        slot.copy_from_slice(settings);
    }
    let patch = plan(&vdso, from, &clock)?;
    for (at, bytes) in &patch.writes {
        mem.write_all_at(bytes, *at).map_err(io("writing its vDSO"))?;
    }
    Ok(Moved { mem, settings: patch.settings, fast: patch.fast })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's own vDSO: (its bytes, its address).
    fn own_vdso() -> (Vec<u8>, u64) {
        let (from, to) = vdso_range(std::process::id() as i32).expect("a vDSO");
        let mut bytes = vec![0; (to - from) as usize];
        let mem = std::fs::File::open("/proc/self/mem").unwrap();
        std::os::unix::fs::FileExt::read_exact_at(&mem, &mut bytes, from).unwrap();
        (bytes, from)
    }

    #[test]
    fn the_clock_goes_in_the_vdsos_free_end_and_its_clock_functions_jump_to_it() {
        let (vdso, base) = own_vdso();
        let patch = plan(&vdso, base, CLOCK).expect("this machine's vDSO takes the clock");
        let (at, clock) = &patch.writes[0];
        assert_eq!(&clock[..8], MAGIC);
        assert!(*at >= base && at + clock.len() as u64 <= base + vdso.len() as u64);
        assert_eq!(patch.settings, at + SETTINGS);
        // Each jump lands on its entry in the clock.
        let elf = Elf::read(&vdso).unwrap();
        for (names, entry) in [
            (&["__vdso_clock_gettime"][..], ENTRY_CLOCK_GETTIME),
            (&["__vdso_gettimeofday"], ENTRY_GETTIMEOFDAY),
            (&["__vdso_time"], ENTRY_TIME),
        ] {
            let f = base + elf.symbol(names).unwrap();
            let (_, jmp) = patch.writes.iter().find(|(a, _)| *a == f).expect("a jump written at the function");
            let rel = i32::from_le_bytes(jmp[1..5].try_into().unwrap()) as i64;
            assert_eq!((jmp[0], (f as i64 + 5 + rel) as u64), (0xe9, at + entry), "{names:?}");
        }
        // Nothing the image holds is overwritten by the clock.
        assert!(at - base >= elf.used);
    }

    #[test]
    fn the_true_clock_keeps_the_vdsos_speed_where_its_first_instructions_can_move() {
        // push %rbp; mov %rsp,%rbp; push %r14: six bytes cover the jump.
        assert_eq!(relocatable(&[0x55, 0x48, 0x89, 0xe5, 0x41, 0x56, 0x53]), Some(6));
        assert_eq!(relocatable(&[0x55, 0x53, 0x41, 0x54, 0x48, 0x83, 0xec, 0x10]), Some(8));
        // A RIP-relative lea second: it cannot run elsewhere.
        assert_eq!(relocatable(&[0x55, 0x4c, 0x8d, 0x15, 0xc8, 0x97, 0xff, 0xff]), None);
        let (vdso, base) = own_vdso();
        let patch = plan(&vdso, base, CLOCK).unwrap();
        let clock = &patch.writes[0].1;
        let slot = &clock[TRUE_CLOCK as usize..TRUE_CLOCK as usize + TRUE_CLOCK_LEN];
        if patch.fast {
            let elf = Elf::read(&vdso).unwrap();
            let f = elf.symbol(&["__vdso_clock_gettime"]).unwrap() as usize;
            let n = relocatable(&vdso[f..]).unwrap();
            assert_eq!(&slot[..n], &vdso[f..f + n], "its first instructions, copied");
            assert_eq!(slot[n], 0xe9, "then a jump back past them");
        } else {
            assert_eq!(&slot[..8], &[0xb8, 0xe4, 0, 0, 0, 0x0f, 0x05, 0xc3], "the system call, as built");
        }
    }

    #[test]
    fn what_is_not_an_x86_64_vdso_is_refused_with_why() {
        assert!(plan(b"not an elf", 0, CLOCK).unwrap_err().0.contains("not an x86_64 ELF"));
        assert!(plan(&[], 0, b"").unwrap_err().0.contains("no vDSO clock"));
    }
}
