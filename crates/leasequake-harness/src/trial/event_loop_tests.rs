//! The event loop and the nemesis over the fake OS: how a fault is carried
//! out and stamped when the kernel does not cooperate (a stop never seen, a
//! signal to a worker that just died, a server that cannot be paused), and
//! the order of the clean-up. Times are in ms after t0.

use std::cell::RefCell;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Receiver;

use super::super::fake_os::{Behaviour, FakeOs, MS};
use super::super::msg::Msg;
use super::super::nemesis::ServerControl;
use super::super::schedule::Live;
use super::super::server::ControlError;
use super::*;
use crate::experiment::{Overrides, load_str};

const T0: i64 = 1_000 * MS;

fn exp(workers: usize, faults: &str) -> Experiment {
    // A managed server for its faults; the fake stands in for it.
    let server = if faults.contains("server-") { "substrate: {kind: redis, managed: true}\n" } else { "" };
    let yaml = format!("name: x\nworkers: {workers}\nduration: 10s\n{server}faults:\n{faults}");
    load_str(Path::new("x.yaml"), &yaml, &Overrides::default()).expect("a valid experiment")
}

fn run<'o>(os: &'o FakeOs, rx: Receiver<Msg>, workers: usize) -> Run<'o> {
    Run {
        os,
        rx,
        // What the recorder hands on is not looked at here: its `all` is.
        rec: super::super::record::Recorder::new(Box::leak(Box::new(Vec::<crate::model::history::Event>::new()))),
        exits: vec![None; workers],
        said: vec![false; workers],
        live: Live::new(workers),
        exited: 0,
        ready: workers,
        garbage: 0,
        deliveries: Vec::new(),
        end_ns: i64::MAX,
        unsettled: None,
        shim: None,
        vdso: vec![None; workers],
        late_starts: Vec::new(),
    }
}

/// Run the trial's faults to its end with nothing but the workers.
fn faults<'o: 'h, 'h>(run: &mut Run<'o>, exp: &Experiment, server: Option<&'h mut dyn ServerControl>) {
    let procs = run.os_procs();
    let lock = Path::new("/nonexistent/leader.lock");
    let hit = Hit { lock, server, proxy: None, service: None, clocks: None };
    run.faults_until_end(exp, (T0, 7), &procs, &AtomicBool::new(false), hit).expect("the trial ran");
}

impl Run<'_> {
    fn os_procs(&self) -> Vec<super::super::spawn::WorkerProc> {
        super::super::fake_os::procs(self.live.alive.len())
    }

    /// (action, worker, scheduled ms, actual ms, error) of every delivery.
    fn rows(&self) -> Vec<Row> {
        self.deliveries
            .iter()
            .map(|d| (d.action, d.worker, (d.scheduled_ns - T0) / MS, (d.actual_ns - T0) / MS, d.error.clone()))
            .collect()
    }

    /// (ms, worker, kind) of every recorded event but the faults, in time order.
    fn events(&self) -> Vec<(i64, Option<usize>, EventKind)> {
        let mut events: Vec<_> = self
            .rec
            .all
            .iter()
            .filter(|e| e.kind != EventKind::Fault)
            .map(|e| ((e.t_ns - T0) / MS, e.worker, e.kind))
            .collect();
        events.sort_by_key(|e| e.0);
        events
    }

    /// The fault events' budget errors (µs), in order.
    fn error_us(&self) -> Vec<Option<i64>> {
        self.rec.all.iter().filter(|e| e.kind == EventKind::Fault).map(|e| e.detail.error_us).collect()
    }
}

/// A delivery: (action, worker, scheduled ms, actual ms, error).
type Row = (&'static str, Option<usize>, i64, i64, Option<String>);

fn never_stops() -> Behaviour {
    Behaviour { stops_after: None, ..Behaviour::default() }
}

#[test]
fn a_stop_the_kernel_never_reports_is_stamped_unconfirmed_held_to_the_budget_and_still_continued() {
    let (os, rx) = FakeOs::new(T0, &[never_stops(), Behaviour::default()]);
    let exp = exp(2, "  - {at: 1s, target: 0, action: pause, duration: 2s}\n");
    let mut run = run(&os, rx, 2);
    faults(&mut run, &exp, None);
    assert_eq!(
        run.rows(),
        [("stop", Some(0), 1000, 1100, Some("not stopped after 100 ms".into())), ("cont", Some(0), 3000, 3000, None)]
    );
    // A stop sent but not seen is the clearest sign of a busy machine: its
    // lateness counts against the fault budget.
    assert_eq!(run.error_us(), [Some(100_000), Some(0)]);
    assert_eq!(os.signals(T0), [(1000, 0, "SIGSTOP"), (3000, 0, "SIGCONT")]);
}

#[test]
fn a_fault_due_after_the_end_of_a_trial_the_harness_overslept_is_never_fired() {
    let (os, rx) = FakeOs::new(T0, &[Behaviour::default(), Behaviour::default()]);
    // The harness is stopped at 6 s of a 10 s trial, for 5 s.
    os.harness_held_up(T0 + 6_000 * MS, 5_000 * MS);
    let exp = exp(2, "  - {at: 7s, target: 0, action: kill}\n");
    let mut run = run(&os, rx, 2);
    faults(&mut run, &exp, None);
    // The kill was due within the trial, but its end came first: it never
    // happened (not at 11 s, during the clean-up).
    assert!(os.signals(T0).is_empty(), "{:?}", os.signals(T0));
    let rows = run.rows();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].0, rows[0].2), ("kill", 7000));
    assert!(rows[0].4.as_deref().is_some_and(|e| e.starts_with("never fired")), "{rows:?}");
}

#[test]
fn a_kill_racing_an_exit_records_the_worker_gone_and_sends_nothing() {
    let (os, rx) = FakeOs::new(T0, &[Behaviour::default(), Behaviour::default()]);
    // Worker 1 dies just before its kill; its waiter reports that after.
    os.exits_reported_at(1, T0 + 999 * MS, T0 + 1002 * MS);
    let exp = exp(2, "  - {at: 1s, target: 1, action: kill}\n");
    let mut run = run(&os, rx, 2);
    faults(&mut run, &exp, None);
    assert_eq!(run.rows(), [("kill", Some(1), 1000, 1000, Some("worker already exited".into()))]);
    // Not the harness's lateness: nothing was sent.
    assert_eq!(run.error_us(), [None]);
    assert!(os.signals(T0).is_empty(), "{:?}", os.signals(T0));
    // The exit keeps its own time, before the fault it beat.
    assert_eq!(run.events()[0], (999, Some(1), EventKind::Exit));
    assert!(!run.live.alive[1]);
}

#[test]
fn a_stop_to_a_worker_that_dies_before_it_stops_is_stamped_at_its_death() {
    let (os, rx) = FakeOs::new(T0, &[never_stops()]);
    os.exits_reported_at(0, T0 + 1040 * MS, T0 + 1200 * MS);
    let exp = exp(1, "  - {at: 1s, target: 0, action: pause, duration: 2s}\n");
    let mut run = run(&os, rx, 1);
    faults(&mut run, &exp, None);
    assert_eq!(
        run.rows(),
        [("stop", Some(0), 1000, 1040, None), ("cont", Some(0), 3000, 3000, Some("worker already exited".into()))]
    );
    assert_eq!(os.signals(T0), [(1000, 0, "SIGSTOP")]);
}

#[test]
fn a_cont_for_a_worker_killed_while_stopped_finds_it_gone_and_the_clean_up_does_not_wait_for_it() {
    let (os, rx) = FakeOs::new(T0, &[Behaviour::default(), Behaviour::default()]);
    let exp = exp(2, "  - {at: 1s, target: 0, action: pause, duration: 3s}\n  - {at: 2s, target: 0, action: kill}\n");
    let mut run = run(&os, rx, 2);
    faults(&mut run, &exp, None);
    assert_eq!(
        run.rows(),
        [
            ("stop", Some(0), 1000, 1000, None),
            ("kill", Some(0), 2000, 2000, None),
            ("cont", Some(0), 4000, 4000, Some("worker already exited".into())),
        ]
    );
    // A KILL ends a stopped process: its exit comes at once.
    assert!(run.events().contains(&(2000, Some(0), EventKind::Exit)));
    assert!(!run.live.paused[0]);
    let end = os.mono_ns();
    run.stop_workers(&exp, &run.os_procs()).expect("every worker stopped");
    // Only the live worker is asked to stop, and it is gone in its own 5 ms.
    assert_eq!(os.signals(end).split_off(2), [(0, 1, "SIGCONT"), (0, 1, "SIGTERM")]);
    assert_eq!((os.mono_ns() - end) / MS, 5);
}

#[test]
fn the_clean_up_continues_and_terms_everyone_then_kills_only_those_left_after_the_grace() {
    let ignores_term = Behaviour { exits_on_term_after: None, ..Behaviour::default() };
    let (os, rx) = FakeOs::new(T0, &[ignores_term, Behaviour::default(), Behaviour::default()]);
    // Worker 2 is still paused when the trial ends: continued before its TERM.
    let exp = exp(3, "  - {at: 9s, target: 2, action: pause, duration: 5s}\n");
    let mut run = run(&os, rx, 3);
    faults(&mut run, &exp, None);
    let end = os.mono_ns();
    assert_eq!((end - T0) / MS, 10_000);
    run.stop_workers(&exp, &run.os_procs()).expect("every worker stopped");
    let grace = exp.grace.as_ns() as i64 / MS;
    assert_eq!(
        os.signals(end).split_off(1),
        [
            (0, 0, "SIGCONT"),
            (0, 0, "SIGTERM"),
            (0, 1, "SIGCONT"),
            (0, 1, "SIGTERM"),
            (0, 2, "SIGCONT"),
            (0, 2, "SIGTERM"),
            (grace, 0, "SIGKILL"),
        ]
    );
    let exits: Vec<_> = run.events().into_iter().filter(|e| e.2 == EventKind::Exit).collect();
    assert_eq!(
        exits,
        [
            (10_005, Some(1), EventKind::Exit),
            (10_005, Some(2), EventKind::Exit),
            (10_000 + grace, Some(0), EventKind::Exit)
        ]
    );
    // The pause's CONT never came: a row says so.
    assert_eq!(run.rows()[1].0, "cont");
    assert!(run.rows()[1].4.as_deref().is_some_and(|e| e.starts_with("never fired")), "{:?}", run.rows());
}

/// A lease server that records what it was told, and can refuse a pause.
#[derive(Default)]
struct FakeServer {
    calls: RefCell<Vec<&'static str>>,
    not_running: bool,
}

impl ServerControl for FakeServer {
    fn pid(&self) -> Option<nix::unistd::Pid> {
        (!self.not_running).then(|| nix::unistd::Pid::from_raw(10_000_100))
    }

    fn pause(&self) -> Result<(), ControlError> {
        self.calls.borrow_mut().push("pause");
        if self.not_running { Err(ControlError::NotRunning) } else { Ok(()) }
    }

    fn resume(&self) -> Result<(), ControlError> {
        self.calls.borrow_mut().push("resume");
        Ok(())
    }

    fn kill(&mut self) {
        self.calls.borrow_mut().push("kill");
    }

    fn start_again(&mut self) -> Result<(), ControlError> {
        self.calls.borrow_mut().push("start");
        Ok(())
    }
}

#[test]
fn a_server_paused_while_a_worker_connects_resumes_on_time_and_the_workers_story_goes_on() {
    let (os, rx) = FakeOs::new(T0, &[Behaviour::default(), Behaviour::default()]);
    os.event(0, T0 + 100 * MS, EventKind::Acquired);
    // Worker 1's acquire goes into the frozen server and times out; its
    // next succeeds after the resume.
    os.event(1, T0 + 1500 * MS, EventKind::NotAcquired);
    os.event(1, T0 + 3100 * MS, EventKind::Acquired);
    let exp = exp(2, "  - {at: 1s, action: server-pause, duration: 2s}\n");
    let mut server = FakeServer::default();
    let mut run = run(&os, rx, 2);
    faults(&mut run, &exp, Some(&mut server));
    assert_eq!(run.rows(), [("server-stop", None, 1000, 1000, None), ("server-cont", None, 3000, 3000, None)]);
    assert_eq!(*server.calls.borrow(), ["pause", "resume"]);
    // Not signals to a worker: a server's fault is stamped once done, not
    // held to the budget.
    assert_eq!(run.error_us(), [None, None]);
    assert_eq!(
        run.events().into_iter().filter(|e| e.1.is_some()).collect::<Vec<_>>(),
        [
            (100, Some(0), EventKind::Acquired),
            (1500, Some(1), EventKind::NotAcquired),
            (3100, Some(1), EventKind::Acquired)
        ]
    );
    assert_eq!(run.live.leaders, [0, 1]);
}

#[test]
fn a_server_pause_that_fails_schedules_no_resume() {
    let (os, rx) = FakeOs::new(T0, &[Behaviour::default()]);
    let exp = exp(1, "  - {at: 1s, action: server-pause, duration: 2s}\n");
    let mut server = FakeServer { not_running: true, ..FakeServer::default() };
    let mut run = run(&os, rx, 1);
    faults(&mut run, &exp, Some(&mut server));
    assert_eq!(run.rows(), [("server-stop", None, 1000, 1000, Some("the server is not running".into()))]);
    assert_eq!(*server.calls.borrow(), ["pause"]);
}

#[test]
fn a_staggered_program_sees_its_stdin_close_at_its_own_start_and_its_start_is_recorded_then() {
    use std::io::Read;
    let (os, rx) = FakeOs::new(T0, &[Behaviour::default(), Behaviour::default(), Behaviour::default()]);
    let exp = exp(3, "  - {at: 5s, target: 0, action: kill}\n");
    let mut run = run(&os, rx, 3);
    let mut reads = Vec::new();
    for (worker, at_ms) in [(2, 2000), (1, 1000)] {
        let (read, release) = nix::unistd::pipe().expect("a pipe");
        nix::fcntl::fcntl(&read, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK)).expect("nonblocking");
        reads.push(std::fs::File::from(read));
        run.late_starts.push(super::super::barrier::LateStart { at_ns: T0 + at_ms * MS, worker, release });
    }
    run.late_starts.sort_by_key(|l| l.at_ns);
    faults(&mut run, &exp, None);
    // Each program's stdin reached EOF (a read of 0), not just "nothing yet".
    for mut r in reads {
        assert_eq!(r.read(&mut [0u8; 1]).expect("EOF, not EAGAIN"), 0);
    }
    let starts: Vec<_> = run.events().into_iter().filter(|e| e.2 == EventKind::Start).collect();
    assert_eq!(starts, [(1000, Some(1), EventKind::Start), (2000, Some(2), EventKind::Start)]);
    assert!(run.late_starts.is_empty());
}
