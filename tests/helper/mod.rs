//! A fluent helper around the leasequake binary and its results directory.

mod machine;

pub use machine::{Timing, skip};

/// The test's own path (`bounds::alone::sigterm_gap_…`), for what it says.
#[macro_export]
macro_rules! this_test {
    () => {{
        fn here() {}
        let name = std::any::type_name_of_val(&here);
        let name = name.strip_suffix("::here").unwrap_or(name);
        name.split_once("::").map_or(name, |(_, rest)| rest)
    }};
}

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_leasequake"))
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// An experiment file the project ships: `experiments/{dir}/{name}.yaml`.
pub fn shipped(dir: &str, name: &str) -> PathBuf {
    repo().join("experiments").join(dir).join(format!("{name}.yaml"))
}

/// A scratch directory for one test: experiment files and results.
pub struct Lab {
    dir: tempfile::TempDir,
    _hold: Hold,
}

/// Tests that measure against a tight tolerance run alone (`Lab::alone`):
/// on two cores, another test's workers would be part of the measurement.
/// Every other test holds the lock shared, so they run side by side.
static MACHINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

enum Hold {
    Shared(#[allow(dead_code)] std::sync::RwLockReadGuard<'static, ()>),
    Alone(#[allow(dead_code)] std::sync::RwLockWriteGuard<'static, ()>),
    /// Inside a test that holds the machine already (`Lab::beside`).
    Held,
}

/// After every test: no process of it is left (a harness, a worker, a
/// program's descendant, a server). Whatever is found is killed, and the
/// test fails naming it.
impl Drop for Lab {
    fn drop(&mut self) {
        let dir = self.path().to_path_buf();
        let start = Instant::now();
        let mut left = processes_in(&dir);
        // Exits already under way (a harness's last reap) get a moment.
        while !left.is_empty() && start.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(20));
            left = processes_in(&dir);
        }
        for (pid, _) in &left {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), nix::sys::signal::Signal::SIGKILL);
        }
        if !left.is_empty() && !std::thread::panicking() {
            panic!("processes left behind by the test in {}: {left:?}", dir.display());
        }
    }
}

impl Lab {
    pub fn new() -> Lab {
        let hold = Hold::Shared(MACHINE.read().unwrap_or_else(|p| p.into_inner()));
        Lab { dir: tempdir(), _hold: hold }
    }

    /// A lab for a timing test: it waits for the machine to itself and
    /// keeps it until dropped.
    pub fn alone() -> Lab {
        let hold = Hold::Alone(MACHINE.write().unwrap_or_else(|p| p.into_inner()));
        Lab { dir: tempdir(), _hold: hold }
    }

    /// Another lab for a test that holds the machine alone, for runs side
    /// by side in its threads (a new hold would wait for its own).
    pub fn beside(_holder: &Lab) -> Lab {
        Lab { dir: tempdir(), _hold: Hold::Held }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Write an experiment file and return its path.
    pub fn file(&self, name: &str, yaml: &str) -> PathBuf {
        let path = self.path().join(name);
        std::fs::write(&path, yaml).expect("write experiment");
        path
    }

    pub fn run(&self, experiment: impl AsRef<Path>) -> RunBuilder {
        RunBuilder {
            // The tests measure their own bounds: no per-run calibration.
            args: vec![
                "run".into(),
                experiment.as_ref().display().to_string(),
                "--quiet".into(),
                "--no-calibrate".into(),
            ],
            env: vec![("TMPDIR".into(), self.path().join("tmp").display().to_string())],
            out: self.path().join(format!("out-{}", next_id())),
        }
    }
}

/// Open to other users (a managed PostgreSQL runs as one), with a `tmp/`
/// that every run of the lab takes as its TMPDIR: the servers' data
/// directories are the lab's, and so are their processes, found and
/// removed with it.
fn tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new().prefix("leasequake-test-").tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod the lab");
    std::fs::create_dir(dir.path().join("tmp")).expect("the lab's tmp");
    dir
}

fn next_id() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

pub struct RunBuilder {
    args: Vec<String>,
    env: Vec<(String, String)>,
    pub out: PathBuf,
}

impl RunBuilder {
    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.args.push(a.into());
        self
    }

    pub fn args<'a>(mut self, args: impl IntoIterator<Item = &'a str>) -> Self {
        self.args.extend(args.into_iter().map(String::from));
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    pub fn scale(self, s: f64) -> Self {
        self.arg("--time-scale").arg(s.to_string())
    }

    pub fn trials(self, n: u32) -> Self {
        self.arg("--trials").arg(n.to_string())
    }

    pub fn jobs(self, n: u32) -> Self {
        self.arg("--jobs").arg(n.to_string())
    }

    fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(bin());
        cmd.args(&self.args).arg("--out").arg(&self.out);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// Run to completion.
    pub fn output(self) -> Finished {
        let output = self.command().output().expect("run leasequake");
        Finished { output, out: self.out }
    }

    /// Start without waiting (for signal tests).
    pub fn spawn(self) -> (std::process::Child, PathBuf) {
        let child = self
            .command()
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn leasequake");
        (child, self.out)
    }
}

pub struct Finished {
    pub output: Output,
    pub out: PathBuf,
}

impl Finished {
    pub fn code(&self) -> Option<i32> {
        self.output.status.code()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// Assert the run exited with `code`, showing its output otherwise.
    pub fn expect_code(self, code: i32) -> Self {
        assert_eq!(self.code(), Some(code), "stdout:\n{}\nstderr:\n{}", self.stdout(), self.stderr());
        self
    }

    pub fn table(&self, name: &str) -> Vec<Row> {
        read_table(&self.out.join(name))
    }

    /// What a failing assertion about one trial shows: its faults as fired
    /// and the events that tell its story (grants, step-downs, failures,
    /// exits), with their times.
    pub fn story(&self, trial: &str) -> String {
        let faults = self.table("faults.csv");
        let events = self.table("events.csv");
        let mut lines = vec![format!("trial {trial}:")];
        for f in faults.iter().filter(|f| f.get("trial") == trial) {
            let (at, action, worker, error) = (f.get("actual_ms"), f.get("action"), f.get("worker"), f.get("error"));
            lines.push(format!("  {at:>10} ms  fault {action} of worker {worker} {error}"));
        }
        const TOLD: [&str; 6] = ["acquired", "takeover_lost", "stepped_down", "renew_failed", "released", "exit"];
        for e in events.iter().filter(|e| e.get("trial") == trial && TOLD.contains(&e.get("event"))) {
            let (t, w, kind, detail) = (e.get("t_ms"), e.get("worker"), e.get("event"), e.get("detail"));
            lines.push(format!("  {t:>10} ms  worker {w:>2} {kind} {detail}"));
        }
        lines.join("\n")
    }
}

/// One CSV row by column name.
#[derive(Debug, Clone)]
pub struct Row(pub HashMap<String, String>);

impl Row {
    pub fn get(&self, col: &str) -> &str {
        self.0.get(col).unwrap_or_else(|| panic!("no column {col} in {:?}", self.0))
    }

    pub fn f64(&self, col: &str) -> f64 {
        self.get(col).parse().unwrap_or_else(|_| panic!("{col}={:?} is not a number", self.get(col)))
    }
}

pub fn read_table(path: &Path) -> Vec<Row> {
    let mut reader = csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let headers = reader.headers().expect("headers").clone();
    reader
        .records()
        .map(|r| {
            let r = r.expect("record");
            Row(headers.iter().zip(r.iter()).map(|(h, v)| (h.to_string(), v.to_string())).collect())
        })
        .collect()
}

/// A run's units: trial → (setting, seed).
pub type Units = BTreeMap<String, (String, String)>;
/// A run's fault schedule: (trial, fault, action) → scheduled_ms.
pub type Schedule = BTreeMap<(String, String, String), String>;

/// Which trials a results directory holds, with their seeds and fault
/// schedules: what shards of one run must hold together, exactly.
pub fn units_of(dir: &Path) -> (Units, Schedule) {
    let trials = read_table(&dir.join("trials.csv"));
    let t =
        trials.iter().map(|r| (r.get("trial").to_string(), (r.get("setting").to_string(), r.get("seed").to_string())));
    let faults = read_table(&dir.join("faults.csv"));
    let f = faults.iter().map(|r| {
        (
            (r.get("trial").to_string(), r.get("fault").to_string(), r.get("action").to_string()),
            r.get("scheduled_ms").to_string(),
        )
    });
    (t.collect(), f.collect())
}

/// What the checker made of each trial that neither run `a` nor run `b`
/// of the same experiment had disturbed by the machine, by trial, as
/// `verdicts_of` says it, for each of the two; and which trials were left
/// out. A stall can change what a trial shows (the renewal it held let a
/// watcher in), so a disturbed trial is named by the checker, not
/// compared. Fails if the machine disturbed every trial: nothing would be
/// compared.
pub fn undisturbed_verdicts(a: &Path, b: &Path) -> (Verdicts, Verdicts, Vec<String>) {
    let disturbed = |dir: &Path| -> Vec<String> {
        let rows = read_table(&dir.join("trials.csv"));
        rows.iter().filter(|r| r.get("disturbed") == "true").map(|r| r.get("trial").to_string()).collect()
    };
    let mut out = disturbed(a);
    out.extend(disturbed(b));
    out.sort();
    out.dedup();
    let keep =
        |dir: &Path| -> Verdicts { verdicts_of(dir).into_iter().filter(|(trial, _)| !out.contains(trial)).collect() };
    let (va, vb) = (keep(a), keep(b));
    assert!(!va.is_empty(), "the machine disturbed every trial: {out:?}");
    (va, vb, out)
}

pub type Verdicts = BTreeMap<String, Vec<String>>;

/// What the checker made of each trial, by trial: the columns an
/// experiment built for it keeps the same from run to run.
pub fn verdicts_of(dir: &Path) -> Verdicts {
    let cols = ["max_leaders", "gaps", "open_gaps", "wedged", "outcome"];
    read_table(&dir.join("trials.csv"))
        .iter()
        .map(|r| (r.get("trial").to_string(), cols.iter().map(|c| r.get(c).to_string()).collect()))
        .collect()
}

/// Pids of live built-in workers whose command line mentions `needle`
/// (our workers carry their lock path, inside the test's directory).
pub fn processes_mentioning(needle: &Path) -> Vec<i32> {
    let text = needle.display().to_string();
    processes_in(needle)
        .into_iter()
        .filter(|(_, cmdline)| cmdline.contains(&text) && cmdline.contains(" worker "))
        .map(|(pid, _)| pid)
        .collect()
}

/// Pids of live processes that belong to a test directory: their command
/// line mentions it or they work in it (a program's grandchild, a managed
/// server). Zombies are not running and are skipped.
pub fn processes_in(dir: &Path) -> Vec<(i32, String)> {
    let needle = dir.display().to_string();
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        if pid == me {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let cwd = std::fs::read_link(entry.path().join("cwd")).unwrap_or_default();
        if cmdline.contains(&needle) || cwd.starts_with(dir) {
            found.push((pid, cmdline));
        }
    }
    found
}

/// Poll `f` until it returns Some, or panic after `limit`.
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A redis-server of the test's own, on a free loopback port: what only a
/// server shared across runs shows (a lease an interrupted run left on it)
/// needs one that outlives the harness. Killed when dropped; it works in
/// `dir`, so the lab's leak check sees it.
pub struct OwnRedis {
    child: std::process::Child,
    port: u16,
}

impl OwnRedis {
    /// Another process may take the port the kernel offered before the
    /// server binds it (the harness's runs beside the test dial from that
    /// range, as source ports): then the server exits, and starts again on
    /// another.
    pub fn start(dir: &Path) -> OwnRedis {
        for _ in 0..3 {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let child = std::process::Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(dir)
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("redis-server (apt-get install redis-server)");
            let mut server = OwnRedis { child, port };
            let up = wait_for(Duration::from_secs(5), "redis-server to answer PING or exit", || {
                if let Ok(Some(_)) = server.child.try_wait() {
                    return Some(false);
                }
                server.answers().then_some(true)
            });
            if up {
                return server;
            }
        }
        panic!("redis-server exited at start-up three times, each on a new port")
    }

    fn answers(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut conn) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else { return false };
        let mut reply = [0u8; 5];
        conn.write_all(b"PING\r\n").is_ok() && conn.read_exact(&mut reply).is_ok() && &reply == b"+PONG"
    }

    pub fn address(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
