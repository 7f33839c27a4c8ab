//! The resolved experiment, written as `experiment.yaml` next to the results:
//! defaults filled in, time scale applied, seed fixed. Loading it back (with
//! no overrides) gives the same `Experiment`, so `leasequake check` and a
//! re-run see exactly what ran.

use std::fmt::Write;

use crate::model::{Action, Dur, Experiment, Fault, RandomCount, StartMode, setting_name};

fn quote(s: &str) -> String {
    // A JSON string is a valid YAML double-quoted scalar.
    serde_json::to_string(s).expect("strings serialise")
}

pub fn to_yaml(e: &Experiment) -> String {
    let mut y = String::new();
    let w = &mut y;
    let _ =
        writeln!(w, "# Resolved from {} (time scale {} applied to every duration).", e.source.display(), e.time_scale);
    let _ = writeln!(w, "name: {}", quote(&e.name));
    if e.time_scale != 1.0 {
        // Every duration below is as it ran: loading this file must not
        // scale them again, but must keep the scale.
        let _ = writeln!(w, "scaled_by: {}", e.time_scale);
    }
    let _ = writeln!(w, "description: {}", quote(&e.description));
    match e.until {
        Some(u) => {
            let _ = writeln!(w, "trials: {{until: {{ci_width: {}}}, max: {}, min: {}}}", u.ci_width, e.trials, u.min);
        }
        None => {
            let _ = writeln!(w, "trials: {}", e.trials);
        }
    }
    let _ = writeln!(w, "seed: {}", e.seed);
    let _ = writeln!(w, "duration: {}", e.duration);
    let _ = writeln!(w, "workers: {}", e.workers);
    let _ = writeln!(w, "lease: {}", e.lease.lease);
    let _ = writeln!(w, "renew: {}", e.lease.renew);
    let _ = writeln!(w, "watch: {}", e.lease.watch);
    let _ = writeln!(w, "expiry_resolution: {}", e.lease.resolution);
    // A program has no built-in worker settings (and may not be given any).
    if e.program.is_none() {
        // JSON is YAML: the worker's settings exactly as their type writes them.
        let settings = serde_json::to_string(&e.worker).expect("worker settings serialise");
        let _ = writeln!(w, "worker: {settings}");
    }
    // The substrate's settings exactly as their type writes them (a
    // replicated service's among them), as the worker's are.
    let substrate = serde_json::to_string(&e.substrate).expect("substrate settings serialise");
    let _ = writeln!(w, "substrate: {substrate}");
    if let Some(p) = &e.program {
        // {experiment_dir} is filled in: the resolved file lives elsewhere.
        let quote = |s: &str| quote(&s.replace("{experiment_dir}", &p.experiment_dir));
        let _ = writeln!(w, "program:");
        if p.shell {
            let _ = writeln!(w, "  command: {}", quote(&p.command[0]));
            let _ = writeln!(w, "  shell: true");
        } else {
            let args: Vec<String> = p.command.iter().map(|a| quote(a)).collect();
            let _ = writeln!(w, "  command: [{}]", args.join(", "));
        }
        if !p.env.is_empty() {
            let _ = writeln!(w, "  env:");
            for (k, v) in &p.env {
                let _ = writeln!(w, "    {}: {}", quote(k), quote(v));
            }
        }
        let observe = match p.observe {
            crate::model::program::Observe::Protocol => "protocol",
            crate::model::program::Observe::Patterns => "patterns",
        };
        let stamp = match p.timestamps {
            crate::model::program::Stamp::Program => "program",
            crate::model::program::Stamp::Receipt => "receipt",
        };
        let _ = writeln!(w, "  observe: {observe}");
        let _ = writeln!(w, "  timestamps: {stamp}");
        let _ = writeln!(w, "  ready: {}", p.ready);
        let _ = writeln!(w, "  max_lines: {}", p.max_lines);
        let _ = writeln!(w, "  expiry: {}", setting_name(&p.expiry));
        if p.clock != crate::model::program::ClockWay::Auto {
            let _ = writeln!(w, "  clock: {}", setting_name(&p.clock));
        }
        if let Some(cwd) = &p.cwd {
            // Absolute (the resolved file lives elsewhere), unless a
            // placeholder starts it.
            let dir = if cwd.starts_with('{') {
                cwd.clone()
            } else {
                crate::model::program::resolve_in(cwd, &p.experiment_dir).display().to_string()
            };
            let _ = writeln!(w, "  cwd: {}", quote(&dir));
        }
        if !p.patterns.is_empty() {
            let _ = writeln!(w, "  patterns:");
            for pat in &p.patterns {
                let detail: Vec<String> = pat.detail.iter().map(|(k, v)| format!("{k}: {}", quote(v))).collect();
                let detail =
                    if detail.is_empty() { String::new() } else { format!(", detail: {{{}}}", detail.join(", ")) };
                let _ =
                    writeln!(w, "    - {{regex: {}, event: {}{detail}}}", quote(pat.regex.as_str()), pat.event.name());
            }
        }
    }
    let _ = writeln!(w, "start: {}", setting_name(&e.start));
    if e.start != StartMode::Barrier {
        let _ = writeln!(w, "stagger: {}", e.stagger);
    }
    if let Some(a) = e.align {
        let _ = writeln!(w, "align: {a}");
    }
    let _ = writeln!(w, "initial_lock: {}", setting_name(&e.initial_lock));
    let _ = writeln!(w, "grace: {}", e.grace);
    let _ = writeln!(w, "jobs: {}", e.jobs);
    if let Some(window) = e.window {
        let _ = writeln!(w, "window: {window}");
    }
    if let Some(b) = e.fault_budget {
        let _ = writeln!(w, "fault_budget: {b}");
    }
    if let Some(b) = e.disturbance_budget {
        let _ = writeln!(w, "disturbance_budget: {b}");
    }
    if let Some(r) = &e.random {
        let _ = writeln!(w, "faults:\n  random:");
        if let Some([from, until]) = r.window {
            let _ = writeln!(w, "    window: [{from}, {until}]");
        }
        let _ = writeln!(w, "    kinds:");
        for k in &r.kinds {
            let mut lines = what(&k.fault).into_iter();
            let _ = writeln!(w, "      - {}", lines.next().unwrap_or_default());
            for l in lines {
                let _ = writeln!(w, "        {l}");
            }
            let _ = match k.count {
                RandomCount::Between(a, b) if a == b => writeln!(w, "        count: {a}"),
                RandomCount::Between(a, b) => writeln!(w, "        count: [{a}, {b}]"),
                RandomCount::MeanInterval(m) => writeln!(w, "        mean_interval: {m}"),
            };
        }
    } else if e.faults.is_empty() {
        let _ = writeln!(w, "faults: []");
    } else {
        let _ = writeln!(w, "faults:");
    }
    for f in &e.faults {
        let _ = writeln!(w, "  - at: {}", f.at);
        if f.jitter > Dur::ZERO {
            let _ = writeln!(w, "    jitter: {}", f.jitter);
        }
        if let Some(a) = f.after {
            let _ = writeln!(w, "    after: {}", a.event.name());
            let _ = writeln!(w, "    delay: {}", a.delay);
        }
        for l in what(f) {
            let _ = writeln!(w, "    {l}");
        }
        if let Some(e) = f.every {
            let _ = writeln!(w, "    every: {e}");
        }
    }
    if !e.points.is_empty() {
        // Every point written out, already scaled: reloads to the same points.
        let _ = writeln!(w, "sweep:\n  points:");
        for p in &e.points {
            let map: serde_json::Map<String, serde_json::Value> = p
                .settings
                .iter()
                .map(|(k, v)| {
                    // Numbers, booleans, lists and mappings as such; `9s`,
                    // `excl` as text.
                    let value = serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::from(v.clone()));
                    (k.clone(), value)
                })
                .collect();
            let _ = writeln!(w, "    - {}", serde_json::Value::Object(map));
        }
    }
    if let Some(r) = &e.reference {
        // Unscaled, as the source wrote it: serialise through JSON (valid YAML).
        let _ = writeln!(w, "reference: {}", serde_json::to_string(r).expect("reference serialises"));
    }
    let x = &e.expect;
    if !x.is_empty() {
        let _ = writeln!(w, "expect:");
        if let Some(v) = x.max_leaders {
            let _ = writeln!(w, "  max_leaders: {v}");
        }
        if let Some(v) = x.gap_min {
            let _ = writeln!(w, "  gap_min: {v}");
        }
        if let Some(v) = x.gap_max {
            let _ = writeln!(w, "  gap_max: {v}");
        }
        if let Some(v) = x.wedged {
            let _ = writeln!(w, "  wedged: {v}");
        }
        if let Some(v) = x.double_leader_trials {
            let _ = writeln!(w, "  double_leader_trials: {v}");
        }
        if let Some(v) = x.disturbed {
            let _ = writeln!(w, "  disturbed: {v}");
        }
        if !x.metrics.is_empty() {
            use crate::model::summary_metrics::Bound;
            let _ = writeln!(w, "  metrics:");
            // One line per metric, its bounds together, as a file writes them.
            let mut keys: Vec<String> = x.metrics.iter().map(|b| b.metric.key()).collect();
            keys.dedup();
            for key in keys {
                let bounds: Vec<String> = x
                    .metrics
                    .iter()
                    .filter(|b| b.metric.key() == key)
                    .map(|b| match b.bound {
                        Bound::Max(v) => format!("max: {v}"),
                        Bound::Min(v) => format!("min: {v}"),
                        Bound::RateMax(v) => format!("rate_max: {v}"),
                        Bound::RateMin(v) => format!("rate_min: {v}"),
                    })
                    .collect();
                let _ = writeln!(w, "    {key}: {{{}}}", bounds.join(", "));
            }
        }
    }
    y
}

/// What a fault does and to whom, one `key: value` per line: what a
/// scripted fault and a campaign's kind of fault both say.
fn what(f: &Fault) -> Vec<String> {
    let mut out = vec![format!("target: {}", f.target), format!("action: {}", f.action.name())];
    // A pause of a worker or of the server, a network fault: a length.
    if let Some(d) = f.duration.as_ref().filter(|_| f.action.takes_duration()) {
        out.push(format!("duration: {}", d.to_yaml()));
    }
    if let Some(by) = f.skew {
        out.push(format!("by: {by}"));
    }
    if let Some(n) = &f.net {
        if f.action == Action::Delay {
            out.push(format!("latency: {}", n.latency));
            out.push(format!("latency_jitter: {}", n.jitter));
            out.push(format!("direction: {}", setting_name(&n.direction)));
        }
        out.push(format!("toxicity: {}", n.toxicity));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{Overrides, load_str};
    use super::*;

    #[test]
    fn network_faults_keep_their_parameters() {
        let text = "name: n\nworkers: 3\nsubstrate: {kind: redis}\nworker: {belief: local-deadline, belief_margin: 1s, request_timeout: 2s, clock_rate: [1, 1.25, 0.8]}\nfaults:\n  - at: 5s\n    target: all-but-leader\n    action: delay\n    latency: 40ms\n    latency_jitter: 5ms\n    direction: replies\n    toxicity: 0.25\n    duration: 3s\n  - at: 9s\n    target: leader\n    action: partition-replies\n  - at: 12s\n    target: 0\n    action: heal\n  - at: 13s\n    target: watcher\n    action: skew\n    by: -2.5s\n";
        let o = Overrides { time_scale: Some(0.5), ..Overrides::default() };
        let exp = load_str(Path::new("n.yaml"), text, &o).unwrap();
        let again = load_str(Path::new("n.yaml"), &to_yaml(&exp), &Overrides::default()).unwrap();
        assert_eq!(again.faults, exp.faults);
        assert_eq!(again.worker, exp.worker);
    }

    #[test]
    fn a_replicated_service_keeps_its_settings() {
        let text = "name: r\nworkers: 3\nsubstrate: {kind: redis, managed: true, members: 3, failover_after: 4s, sync_replicas: 1}\nfaults:\n  - at: 5s\n    target: primary-side\n    action: partition\n    duration: 10s\n";
        let o = Overrides { time_scale: Some(0.5), ..Overrides::default() };
        let exp = load_str(Path::new("r.yaml"), text, &o).unwrap();
        assert_eq!(exp.substrate.failover_after, Some(crate::model::Dur::from_secs(2)), "scaled like every duration");
        let again = load_str(Path::new("r.yaml"), &to_yaml(&exp), &Overrides::default()).unwrap();
        assert_eq!(again.substrate, exp.substrate);
        assert_eq!(again.faults, exp.faults);
    }

    #[test]
    fn a_campaign_keeps_its_kinds() {
        let text = "name: c\nworkers: 3\nduration: 60s\nfaults:\n  random:\n    window: [5s, 50s]\n    kinds:\n      - {action: kill, target: leader, count: 2}\n      - {action: pause, target: watcher, count: [0, 3], duration: {uniform: [1s, 4s]}}\n      - {action: lock-empty, mean_interval: 20s}\n";
        let o = Overrides { time_scale: Some(0.5), ..Overrides::default() };
        let exp = load_str(Path::new("c.yaml"), text, &o).unwrap();
        let again = load_str(Path::new("c.yaml"), &to_yaml(&exp), &Overrides::default()).unwrap();
        assert_eq!(again.random, exp.random);
        assert_eq!(
            exp.random.as_ref().and_then(|r| r.window),
            Some([Dur::from_ms(2500), Dur::from_secs(25)]),
            "scaled like every duration"
        );
    }

    #[test]
    fn a_campaign_without_a_window_spans_each_swept_duration() {
        let text = "name: c\nworkers: 3\nduration: 20s\nfaults:\n  random:\n    kinds:\n      - {action: kill, target: leader, count: 2}\nsweep:\n  duration: [10s, 30s]\n";
        let exp = load_str(Path::new("c.yaml"), text, &Overrides::default()).unwrap();
        let again = load_str(Path::new("c.yaml"), &to_yaml(&exp), &Overrides::default()).unwrap();
        // The resolved file fixes the seed that was drawn.
        assert!(exp.seed_drawn && !again.seed_drawn);
        assert_eq!(again, Experiment { seed_drawn: false, ..exp.clone() });
        assert_eq!(exp.random.as_ref().and_then(|r| r.window), None);
    }

    #[test]
    fn a_server_pause_keeps_its_length() {
        let text = "name: s\nworkers: 2\nsubstrate: {kind: redis, managed: true}\nfaults:\n  - at: 5s\n    target: server\n    action: server-pause\n    duration: 10s\n";
        let exp = load_str(Path::new("s.yaml"), text, &Overrides::default()).unwrap();
        let again = load_str(Path::new("s.yaml"), &to_yaml(&exp), &Overrides::default()).unwrap();
        assert_eq!(again.faults, exp.faults);
    }

    #[test]
    fn resolved_yaml_loads_back_to_the_same_experiment() {
        let text = "name: t\ndescription: \"a: b\"\nworkers: 3\nseed: 7\nalign: 990ms\nworker:\n  acquire: link\n  fencing_tokens: true\n  resource: fenced\n  epoch_job: {epoch: 20s, duration: 2s, strategy: unique}\n  failpoint: after-create\n  failpoint_delay: 50ms\nfaults:\n  - at: 8.5s\n    jitter: 1s\n    after: renewed\n    delay: 2.47s\n    target: leader\n    action: kill\n  - at: 15s\n    every: 20s\n    after: job_started\n    target: any\n    action: pause\n    duration: 3s\n  - at: 20s\n    target: 1\n    action: pause\n    duration: 3s\n  - at: 10s\n    every: 5s\n    target: leader\n    action: pause\n    duration: {uniform: [1s, 2s]}\n  - at: 11s\n    target: leader\n    action: pause\n    duration: {exponential: 2s}\n  - at: 12s\n    target: leader\n    action: pause\n    duration: {choice: [1s, 4s]}\n  - at: 21s\n    action: lock-corrupt\nexpect:\n  max_leaders: 1\n  gap_max: 13s\nsweep:\n  workers: [2, 3]\n  pause: [1s, 2s]\n  points:\n    - {lease: 6s, renew: 2s}\n    - {lease: 9s}\nreference:\n  claim: \"9.53 s\"\n  gap: 9.53s\n  bound: [6s, 13s]\n  double_leader_trials: [3, 30]\n";
        let o = Overrides { time_scale: Some(0.1), ..Overrides::default() };
        let first = load_str(Path::new("t.yaml"), text, &o).unwrap();
        let again = load_str(Path::new("t.yaml"), &to_yaml(&first), &Overrides::default()).unwrap();
        assert_eq!(again.points.len(), 8);
        assert_eq!(again.time_scale, 0.1, "the scale is kept, not applied twice");
        assert_eq!(again, first);
    }
}
