//! Spawning workers and owning them until they are reaped.
//!
//! Each worker runs in its own process group with `PR_SET_PDEATHSIG=SIGKILL`
//! (so it dies with the harness, even after `kill -9` of the harness), reads
//! the barrier from stdin and reports on stdout. Two threads per worker turn
//! its life into messages: one reads its event lines, one observes its death.
//!
//! Signals must only reach processes we spawned and have not reaped: a pid
//! can be reused once reaped. The waiter therefore waits with `WNOWAIT`
//! (the zombie keeps the pid reserved), then reaps under the same lock that
//! `signal` holds while it sends.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
use nix::unistd::Pid;

use std::collections::BTreeMap;

use super::msg::{ExitStatus, Msg};
use crate::model::clock::mono_ns;
use crate::model::program::Program;
use crate::model::protocol::{CGROUP_ENV, PARENT_ENV, WireEvent};

#[derive(Default)]
struct ProcState {
    reaped: bool,
}

pub struct WorkerProc {
    pub index: usize,
    pub pid: Pid,
    /// When `spawn` returned (CLOCK_MONOTONIC ns).
    pub spawned_ns: i64,
    pub log: PathBuf,
    /// Lines read, dropped past the budget, not understood.
    pub counts: Arc<super::program::Counts>,
    state: Arc<Mutex<ProcState>>,
}

impl WorkerProc {
    /// Signal the worker's process group. Ok(false) if it is already reaped.
    pub fn signal(&self, sig: Signal) -> Result<bool, Errno> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.reaped {
            return Ok(false);
        }
        // The group id is the worker's pid (process_group(0)); the zombie
        // of an unreaped leader keeps it from being reused.
        match killpg(self.pid, sig) {
            Ok(()) => Ok(true),
            // A group whose members all exited but whose leader is not yet
            // reaped: nothing left to signal.
            Err(Errno::ESRCH) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Threads of the worker's process to real-time priority, or back
    /// (nothing once reaped: the pid may be another's by then).
    pub fn set_realtime(&self, up: bool, which: crate::realtime::Threads) {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !state.reaped {
            crate::realtime::process(self.pid.as_raw(), up, which);
        }
    }

    pub fn reaped(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).reaped
    }
}

#[cfg(test)]
impl WorkerProc {
    /// A worker of the fake OS: no process behind `pid`.
    pub(super) fn fake(index: usize, pid: i32) -> WorkerProc {
        WorkerProc {
            index,
            pid: Pid::from_raw(pid),
            spawned_ns: 0,
            log: PathBuf::new(),
            counts: Arc::new(super::program::Counts::new(0)),
            state: Arc::default(),
        }
    }
}

/// The workers of one trial. Dropping it SIGKILLs whatever is still
/// running: a panic in the harness must not leave workers behind.
pub struct Workers {
    pub procs: Vec<WorkerProc>,
    threads: Vec<JoinHandle<()>>,
    /// Each program whose clock was to be moved in its vDSO: Ok(fast) or
    /// why it was not.
    pub vdso: Vec<Option<Result<bool, String>>>,
}

impl Workers {
    /// Wait for the reader and waiter threads (after every worker exited).
    pub fn join(&mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// Give up on threads still blocked on a process that survived SIGKILL
    /// (uninterruptible sleep): waiting for them could take forever.
    pub fn detach(&mut self) {
        self.threads.clear();
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for p in &self.procs {
            let _ = p.signal(Signal::SIGCONT);
            let _ = p.signal(Signal::SIGKILL);
        }
    }
}

/// A program's placeholder values for worker `i`.
pub type Placeholders<'a> = dyn Fn(usize) -> BTreeMap<&'static str, String> + 'a;

pub struct SpawnSpec<'a> {
    pub exe: &'a Path,
    /// Arguments after the executable, for every worker (the worker index
    /// and log path are appended by `spawn`).
    pub args: Vec<String>,
    pub dir: &'a Path,
    pub count: usize,
    /// A program under test instead of the built-in worker, with each
    /// worker's placeholder values.
    pub program: Option<(&'a Program, &'a Placeholders<'a>)>,
    /// Where the trial's workers and everything they start are kept.
    pub group: &'a super::contain::TrialGroup,
    /// The programs' clocks, where the experiment moves them.
    pub clocks: Option<&'a super::clock::ProgramClocks>,
}

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("cannot create the barrier pipe: {0}")]
    Pipe(Errno),
    #[error("cannot create worker log {}: {source}", path.display())]
    Log { path: PathBuf, source: std::io::Error },
    #[error("cannot spawn worker {index} ({}): {source}", exe.display())]
    Spawn { index: usize, exe: PathBuf, source: std::io::Error },
    #[error("cannot start the program for worker {index} ({command}): {source}")]
    Program { index: usize, command: String, source: std::io::Error },
    #[error(
        "cannot start a thread to watch worker {index}: {source} (processes and threads of this user, \
         RLIMIT_NPROC or a pids cgroup: see `ulimit -u`, lower workers or --jobs)"
    )]
    Thread { index: usize, source: std::io::Error },
}

/// Put the child in its own process group (a Ctrl-C of the terminal is the
/// harness's to handle) and name us in `LEASEQUAKE_PARENT`, so that it has
/// the kernel SIGKILL it if we die, even by `kill -9` (`child::tie_to_parent`,
/// first thing in the built-in worker and in the `exec-program`
/// trampoline). No pre_exec hook: the spawn can use posix_spawn instead of
/// fork, whose cost grows with the harness's threads (docs/architecture.md,
/// "Measured reasons").
pub fn tie_to_harness(cmd: &mut Command) -> &mut Command {
    cmd.process_group(0).env(PARENT_ENV, std::process::id().to_string())
}

/// Tie to the harness and join the trial's cgroup, if it has one.
fn contain(cmd: &mut Command, group: &super::contain::TrialGroup) {
    tie_to_harness(cmd);
    if let Some(cgroup) = group.cgroup() {
        cmd.env(CGROUP_ENV, cgroup);
    }
}

/// Spawning is serialised: while a program's protocol pipe is inheritable
/// (for the moment of its spawn), any other child started would inherit it
/// too and hold back its EOF.
pub static SPAWN_LOCK: Mutex<()> = Mutex::new(());

/// Spawn `count` workers blocked on a fresh barrier. Returns them with the
/// barrier's write ends: the built-in workers share one, which releases
/// them all at once; each program has its own, closed at its own start
/// (its stdin's EOF), so that programs too can start staggered.
pub fn spawn(spec: &SpawnSpec<'_>, tx: &SyncSender<Msg>) -> Result<(Workers, Vec<OwnedFd>), SpawnError> {
    let pipe = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(SpawnError::Pipe);
    let shared = if spec.program.is_none() { Some(pipe()?) } else { None };
    let mut releases = Vec::new();
    // How each executable's clock is moved, read from it once a trial.
    let mut ways = BTreeMap::new();
    let mut workers =
        Workers { procs: Vec::with_capacity(spec.count), threads: Vec::new(), vdso: vec![None; spec.count] };
    for index in 0..spec.count {
        let log = spec.dir.join(format!("worker-{index:02}.log"));
        let stderr = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|source| SpawnError::Log { path: log.clone(), source })?;
        let stdin = match &shared {
            Some((read, _)) => {
                read.try_clone().map_err(|source| SpawnError::Spawn { index, exe: spec.exe.into(), source })?
            }
            None => {
                let (read, write) = pipe()?;
                releases.push(write);
                read
            }
        };
        let budget = spec.program.map_or(crate::model::program::MAX_LINES, |(p, _)| p.max_lines);
        let counts = Arc::new(super::program::Counts::new(budget));
        let spawn_err = |source| SpawnError::Spawn { index, exe: spec.exe.into(), source };
        let (child, pid, spawned_ns, mut sources) = match spec.program {
            None => {
                let mut cmd = Command::new(spec.exe);
                cmd.args(&spec.args)
                    .arg("--index")
                    .arg(index.to_string())
                    .arg("--log")
                    .arg(&log)
                    .stdin(Stdio::from(stdin))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::from(stderr.try_clone().map_err(spawn_err)?));
                contain(&mut cmd, spec.group);
                let guard = SPAWN_LOCK.lock().unwrap_or_else(|p| p.into_inner());
                let mut child = cmd.spawn().map_err(spawn_err)?;
                drop(guard);
                let spawned_ns = mono_ns();
                let pid = Pid::from_raw(child.id() as i32);
                let stdout = child.stdout.take().expect("stdout was piped");
                (child, pid, spawned_ns, vec![super::program::Source::Stdout(stdout)])
            }
            Some((program, values)) => {
                let program_err = |source| SpawnError::Program { index, command: program.command.join(" "), source };
                let mut cmd = super::program::command(program, &values(index), spec.exe);
                // Its clock in its vDSO: the settings read before it is
                // spawned, so that nothing can fail between its stop and
                // its release.
                let vdso = spec
                    .clocks
                    .filter(|_| !program.shell && in_vdso(program.clock, &cmd, &mut ways))
                    .map(|clocks| clocks.settings(index).map_err(|e| e.to_string()));
                if let Some(Ok(_)) = &vdso {
                    let (key, value) = super::clock::vdso_env();
                    cmd.env(key, value);
                } else if let Some(Err(why)) = &vdso {
                    crate::warnln!("warning: worker {index}'s program: its clock is not moved in its vDSO: {why}");
                    workers.vdso[index] = Some(Err(why.clone()));
                } else if let Some(clocks) = spec.clocks {
                    // The program's own preload, as its command was given it.
                    let set =
                        cmd.get_envs().find(|(k, _)| *k == "LD_PRELOAD").and_then(|(_, v)| v.map(|v| v.to_os_string()));
                    let own = set.or_else(|| std::env::var_os("LD_PRELOAD"));
                    cmd.envs(clocks.env(index, own.as_deref()));
                }
                contain(cmd.stdin(Stdio::from(stdin)), spec.group);
                let (sources, events_write) = super::program::wire(program, &mut cmd, &stderr).map_err(spawn_err)?;
                let guard = SPAWN_LOCK.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(w) = &events_write {
                    nix::fcntl::fcntl(w, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()))
                        .map_err(|e| spawn_err(e.into()))?;
                }
                let spawned = cmd.spawn();
                // Our copy of the write end goes at once (EOF must come when
                // the program exits), before any other child can inherit it.
                drop(events_write);
                drop(guard);
                let mut child = spawned.map_err(program_err)?;
                let spawned_ns = mono_ns();
                let pid = Pid::from_raw(child.id() as i32);
                if let (Some(Ok(settings)), Some(clocks)) = (vdso, spec.clocks) {
                    let moved = clocks.move_in_vdso(index, pid, settings);
                    if let Err(why) = &moved {
                        crate::warnln!("warning: worker {index}'s program: its clock is not moved in its vDSO: {why}");
                    }
                    workers.vdso[index] = Some(moved);
                }
                let mut sources = sources;
                if let Some(out) = child.stdout.take() {
                    sources.push(super::program::Source::Lines(Box::new(out)));
                }
                if let Some(err) = child.stderr.take() {
                    sources.push(super::program::Source::Lines(Box::new(err)));
                }
                (child, pid, spawned_ns, sources)
            }
        };
        // `child` is dropped without waiting: the waiter thread reaps it.
        drop(child);
        spec.group.spawned(pid.as_raw());
        // Owned (killed on drop) before any thread is started for it: a
        // thread that cannot be started must not leave it running.
        let state = Arc::new(Mutex::new(ProcState::default()));
        workers.procs.push(WorkerProc {
            index,
            pid,
            spawned_ns,
            log,
            counts: Arc::clone(&counts),
            state: Arc::clone(&state),
        });
        let thread_err = |source| SpawnError::Thread { index, source };
        let log = Arc::new(Mutex::new(stderr));
        let patterns = Arc::new(spec.program.map(|(p, _)| p.patterns.clone()).unwrap_or_default());
        let stamp = spec.program.map(|(p, _)| p.timestamps);
        for source in sources.drain(..) {
            let t = match source {
                super::program::Source::Stdout(stdout) => spawn_reader(index, pid, stdout, tx.clone()),
                super::program::Source::Protocol { read } => super::program::read_protocol(
                    index,
                    pid.as_raw(),
                    read,
                    stamp.expect("only a program has a protocol pipe"),
                    Arc::clone(&counts),
                    tx.clone(),
                ),
                super::program::Source::Lines(r) => super::program::read_patterns(
                    index,
                    pid.as_raw(),
                    r,
                    super::program::Matcher {
                        patterns: Arc::clone(&patterns),
                        values: spec.program.map(|(_, values)| values(index)).unwrap_or_default(),
                    },
                    Arc::clone(&log),
                    Arc::clone(&counts),
                    tx.clone(),
                ),
            };
            workers.threads.push(t.map_err(thread_err)?);
        }
        workers.threads.push(spawn_waiter(index, pid, state, tx.clone()).map_err(thread_err)?);
    }
    releases.extend(shared.map(|(_, write)| write));
    Ok((workers, releases))
}

/// Is the program `cmd` runs (through its trampoline, after `--`) to have
/// its clock moved in its vDSO?
/// Is the program `cmd` execs moved in its vDSO? `ways` keeps the answer
/// for each executable, PATH and directory already looked at: the workers
/// of a trial mostly run one program, which need not be read per worker.
fn in_vdso(
    way: crate::model::program::ClockWay,
    cmd: &Command,
    ways: &mut BTreeMap<(std::ffi::OsString, Option<std::ffi::OsString>, Option<PathBuf>), bool>,
) -> bool {
    let mut args = cmd.get_args().skip_while(|a| *a != "--").skip(1);
    let Some(exe) = args.next() else { return false };
    let path = cmd.get_envs().find(|(k, _)| *k == "PATH").and_then(|(_, v)| v);
    let key = (exe.to_os_string(), path.map(|p| p.to_os_string()), cmd.get_current_dir().map(Path::to_path_buf));
    *ways.entry(key).or_insert_with(|| {
        super::clock::way_for(way, exe, path, cmd.get_current_dir()) == crate::model::program::ClockWay::Vdso
    })
}

fn spawn_reader(
    worker: usize,
    pid: Pid,
    stdout: std::process::ChildStdout,
    tx: SyncSender<Msg>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(format!("reader-{worker}")).spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // What only the harness records (a spawn, an exit, the trial's
            // end), said by a worker, is a line that is not an event.
            let msg = match WireEvent::parse(&line) {
                Ok(event) if event.event.is_worker_event() => {
                    Msg::Event { worker, pid: pid.as_raw(), event: Box::new(event) }
                }
                _ => Msg::Garbage { worker, line },
            };
            if tx.send(msg).is_err() {
                break;
            }
        }
    })
}

fn spawn_waiter(
    worker: usize,
    pid: Pid,
    state: Arc<Mutex<ProcState>>,
    tx: SyncSender<Msg>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(format!("waiter-{worker}")).spawn(move || {
        // A death is timed by when this thread wakes: ahead of the load.
        crate::realtime::raise_this_thread();
        // Wait for death without reaping, so the pid stays ours meanwhile.
        loop {
            match waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
                Ok(_) => break,
                Err(Errno::EINTR) => continue,
                Err(_) => break,
            }
        }
        let t_ns = mono_ns();
        let status = {
            let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
            let status = waitpid(pid, None);
            st.reaped = true;
            status
        };
        let status = match status {
            Ok(WaitStatus::Exited(_, code)) => ExitStatus::Code(code),
            Ok(WaitStatus::Signaled(_, sig, _)) => ExitStatus::Signal(sig.as_str().to_string()),
            other => ExitStatus::Signal(format!("unknown ({other:?})")),
        };
        let _ = tx.send(Msg::Exit { worker, pid: pid.as_raw(), t_ns, status });
    })
}
