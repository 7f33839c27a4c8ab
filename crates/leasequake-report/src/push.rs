//! Polling against push (`watch_by`): per point, the gap, how long after
//! the lease's end the takeover came, the bound, and how many takeovers a
//! push set off; then the blog's last claim, that a push "removes the watch
//! interval entirely, so there is no 3 second detection lag on top of the
//! expiry", held against each server's measured delay.

use super::cells::{MdTable, anomalies, crash_bound, crash_gap, crash_verdict, description, name, own_s, rate};
use super::cells::{points_table, swept_cells, swept_keys, whole_row};
use super::summary::Measured;
use super::summary::{Summary, SummaryRow};
use crate::check::CheckParams;
use crate::check::stats::percentile;
use crate::model::{Experiment, Push, WatchBy, setting_name};

/// The blog's words, quoted beside the verdict.
const CLAIM: &str = "push notifications to watchers instead of making them poll. That removes the watch \
                     interval entirely, so there is no 3 second detection lag on top of the expiry.";

/// Does the experiment (or any of its points) put push watchers to work?
pub fn pushes(exp: &Experiment) -> bool {
    exp.worker.watch_by == WatchBy::Push || exp.points.iter().any(|p| p.exp.worker.watch_by == WatchBy::Push)
}

/// `median [max] (n)` of the kill gaps' detection lag, in own seconds.
fn detection(s: &Summary, scale: f64) -> String {
    match (percentile(&s.detection_ms, 0.5), s.detection_ms.last()) {
        (Some(m), Some(&max)) => {
            format!("{:.2} s [{:.2}] (n {})", own_s(m, scale), own_s(max, scale), s.detection_ms.len())
        }
        _ => String::new(),
    }
}

fn told(s: &Summary) -> String {
    let p = s.pushes;
    let failed = if p.failed > 0 { format!(", {} subscriptions failed", p.failed) } else { String::new() };
    if p.takeovers == 0 && p.failed == 0 { String::new() } else { format!("{}/{}{failed}", p.told, p.takeovers) }
}

/// The table of one experiment: a row per point.
pub fn table(m: &Measured<'_>, rows: &[SummaryRow<'_>]) -> String {
    let keys = swept_keys(m.exp);
    let mut t = points_table(
        &keys,
        &[
            "gap median [min–max]",
            "kill gap median [p10–p90]",
            "after the lease's end: median [max]",
            "its bound",
            "verdict",
            "takeovers told by a push",
            "two leaders (95 % CI)",
            "anomalies",
        ],
    );
    let plain = [whole_row(m)];
    let rows = if rows.is_empty() { &plain[..] } else { rows };
    for r in rows {
        let (s, scale) = (&r.summary, r.exp.time_scale);
        let mut cells = swept_cells(m.exp, &r.setting, &keys, scale);
        let all = match (s.gap_p50_ms, s.gap_min_ms, s.gap_max_ms) {
            // Without kills (a release, a pause), every gap.
            (Some(p), Some(a), Some(b)) if s.crash_gaps_ms.is_empty() => {
                format!("{:.2} s [{:.2}–{:.2}] (n {})", own_s(p, scale), own_s(a, scale), own_s(b, scale), s.gaps)
            }
            _ => String::new(),
        };
        cells.extend([
            all,
            crash_gap(s, scale),
            detection(s, scale),
            crash_bound(r.exp, s),
            crash_verdict(r.exp, s),
            told(s),
            rate(s.double_leader_trials, s.n, s.double_leader_ci),
            anomalies(s),
        ]);
        t.row(cells);
    }
    t.note(
        "after the lease's end: median [max]",
        "from the nominal end of the killed holder's last grant to the takeover (the detection lag).",
    );
    t.note(
        "takeovers told by a push",
        "the watcher's acquire came straight after the server said the lease was gone (`notified` in events.csv).",
    );
    format!("\n## {}: polling against push\n\n{}{}{}", name(m), description(m.exp), t.render(), claim(rows))
}

/// The blog's claim, per substrate that ran both ways: the detection lag
/// after a kill, polling and pushed, against what the server itself adds.
fn claim(rows: &[SummaryRow<'_>]) -> String {
    let mut t = MdTable::new(&[
        "substrate",
        "watch interval",
        "after the lease's end, polling: median [max]",
        "pushed: median [max]",
        "the server's own delay, at most",
        "verdict",
    ]);
    let mut substrates: Vec<String> = Vec::new();
    for r in rows {
        let sub = setting_name(&r.exp.substrate.kind);
        if !substrates.contains(&sub) {
            substrates.push(sub);
        }
    }
    for sub in substrates {
        let of = |w: WatchBy| {
            rows.iter().find(|r| {
                setting_name(&r.exp.substrate.kind) == sub
                    && r.exp.worker.watch_by == w
                    && !r.summary.detection_ms.is_empty()
            })
        };
        let (Some(poll), Some(push)) = (of(WatchBy::Poll), of(WatchBy::Push)) else { continue };
        let scale = push.exp.time_scale;
        let params = CheckParams::of(push.exp);
        let delay_ms = (params.server_slack_us + params.push_slack_us) as f64 / 1000.0;
        let max = push.summary.detection_ms.last().copied().unwrap_or(0.0);
        let watch_ms = push.exp.lease.watch.as_ms_f64();
        let (delay, verdict) = match params.push {
            Push::ReleaseAndExpiry if max <= delay_ms => (
                format!("{:.2} s", own_s(delay_ms, scale)),
                format!("holds: no watch term; the server's own {:.2} s remain", own_s(max, scale)),
            ),
            Push::ReleaseAndExpiry if max < watch_ms => (
                format!("{:.2} s", own_s(delay_ms, scale)),
                format!("✗ no watch term, but {:.2} s is past the server's bound", own_s(max, scale)),
            ),
            Push::ReleaseAndExpiry => (
                format!("{:.2} s", own_s(delay_ms, scale)),
                format!("✗ does not hold: {:.2} s after the lease's end", own_s(max, scale)),
            ),
            _ => (
                "nothing pushed on expiry".to_string(),
                "does not apply: only a release is pushed; an expiry is found at a tick".to_string(),
            ),
        };
        t.row(vec![
            sub,
            format!("{:.2} s", own_s(watch_ms, scale)),
            detection(&poll.summary, scale),
            detection(&push.summary, scale),
            delay,
            verdict,
        ]);
    }
    if t.is_empty() {
        return String::new();
    }
    format!(
        "\n### The blog's last claim\n\n> etcd or ZooKeeper give … {CLAIM}\n\nAfter a kill, from the nominal end of the \
         holder's lease to the takeover, polling and pushed, under the same faults:\n\n{}",
        t.render()
    )
}
