//! `--export-json FILE`: one object per experiment, durations in the
//! experiment's own time (ms), the time scale stated beside them.

use serde::Serialize;

use super::{ExperimentResult, Exporter};
use crate::rows::RESULTS_FORMAT;
use crate::summary::{Summary, crash_bound_ms};

pub struct Json {
    /// The version of leasequake that ran the experiments.
    pub version: &'static str,
}

#[derive(Serialize)]
struct Document<'a> {
    leasequake: &'static str,
    results_format: u32,
    experiments: Vec<ExperimentJson<'a>>,
}

#[derive(Serialize)]
struct ExperimentJson<'a> {
    name: &'a str,
    source: String,
    results: String,
    /// passed | failed | broken
    verdict: &'static str,
    error: Option<&'a str>,
    time_scale: f64,
    seconds: f64,
    expectations: Vec<ExpectJson<'a>>,
    overall: Measures,
    /// Per sweep point (absent for an experiment without a sweep).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    points: Vec<PointJson>,
}

#[derive(Serialize)]
struct ExpectJson<'a> {
    expect: &'a str,
    held: bool,
    failures: &'a [String],
}

#[derive(Serialize)]
struct PointJson {
    setting: String,
    #[serde(flatten)]
    measures: Measures,
}

/// A proportion with its Wilson 95 % interval.
#[derive(Serialize)]
struct Rate {
    k: usize,
    n: usize,
    ci95: [f64; 2],
}

#[derive(Serialize)]
struct Measures {
    trials: usize,
    double_leader: Rate,
    wedged_trials: usize,
    no_leader_trials: usize,
    gaps: Gaps,
    kill_gaps: KillGaps,
    #[serde(skip_serializing_if = "Option::is_none")]
    evictions: Option<Evictions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stale_writes: Option<Writes>,
    /// Trials the machine disturbed, each one's causes, and the budget
    /// (µs as run).
    disturbed: Disturbed,
    /// The same measures over the undisturbed trials alone (absent where
    /// none was disturbed).
    #[serde(skip_serializing_if = "Option::is_none")]
    undisturbed: Option<Box<Measures>>,
}

#[derive(Serialize)]
struct Disturbed {
    trials: usize,
    budget_us: i64,
    causes: Vec<String>,
}

#[derive(Serialize)]
struct Gaps {
    ended: usize,
    never_ended: usize,
    min_ms: Option<f64>,
    p50_ms: Option<f64>,
    p90_ms: Option<f64>,
    p99_ms: Option<f64>,
    max_ms: Option<f64>,
    /// Gaps with the theory's prediction, and those that disagree with it.
    predicted: usize,
    anomalies: usize,
}

#[derive(Serialize)]
struct KillGaps {
    n: usize,
    /// The theory's bound for this substrate and these settings.
    bound_ms: [f64; 2],
    p10_ms: Option<f64>,
    p50_ms: Option<f64>,
    p90_ms: Option<f64>,
    max_ms: Option<f64>,
    inside_bound: Option<bool>,
}

#[derive(Serialize)]
struct Evictions {
    leader_pauses: usize,
    false_evictions: Rate,
    /// What the theory predicts (null when no pause could be predicted).
    predicted: Option<usize>,
    unpredicted: usize,
    anomalies: usize,
}

#[derive(Serialize)]
struct Writes {
    writes: usize,
    stale: usize,
    overwrote_newer: usize,
    rejected: usize,
    accepted_before_newer: usize,
}

fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn measures(s: &Summary, exp: &crate::model::Experiment) -> Measures {
    let scale = exp.time_scale;
    let own = |ms: Option<f64>| ms.map(|v| round(v / scale));
    let (lo, hi) = crash_bound_ms(exp);
    let kills = &s.crash_gaps_ms;
    Measures {
        trials: s.n,
        double_leader: Rate { k: s.double_leader_trials, n: s.n, ci95: [s.double_leader_ci.0, s.double_leader_ci.1] },
        wedged_trials: s.wedged_trials,
        no_leader_trials: s.no_leader_trials,
        gaps: Gaps {
            ended: s.gaps,
            never_ended: s.open_gaps,
            min_ms: own(s.gap_min_ms),
            p50_ms: own(s.gap_p50_ms),
            p90_ms: own(s.gap_p90_ms),
            p99_ms: own(s.gap_p99_ms),
            max_ms: own(s.gap_max_ms),
            predicted: s.predicted_gaps,
            anomalies: s.gap_anomalies,
        },
        kill_gaps: KillGaps {
            n: kills.len(),
            bound_ms: [round(lo / scale), round(hi / scale)],
            p10_ms: own(s.crash_gap(0.1)),
            p50_ms: own(s.crash_gap(0.5)),
            p90_ms: own(s.crash_gap(0.9)),
            max_ms: own(s.crash_gap(1.0)),
            inside_bound: kills.first().zip(kills.last()).map(|(&a, &b)| a >= lo && b <= hi),
        },
        evictions: (s.leader_pauses > 0).then(|| Evictions {
            leader_pauses: s.leader_pauses,
            false_evictions: Rate {
                k: s.false_evictions,
                n: s.leader_pauses,
                ci95: [s.false_eviction_ci.0, s.false_eviction_ci.1],
            },
            predicted: s.predicted_evictions(),
            unpredicted: s.unpredicted_pauses,
            anomalies: s.eviction_anomalies,
        }),
        stale_writes: (s.writes.attempted > 0).then_some(Writes {
            writes: s.writes.attempted,
            stale: s.writes.stale,
            overwrote_newer: s.writes.stale_accepted,
            rejected: s.writes.stale_rejected,
            accepted_before_newer: s.writes.stale_superseded,
        }),
        disturbed: Disturbed {
            trials: s.disturbed.len(),
            budget_us: s.disturbance_budget_us,
            causes: s.disturbed.clone(),
        },
        undisturbed: s.undisturbed.as_ref().map(|u| Box::new(measures(u, exp))),
    }
}

impl Exporter for Json {
    fn serialize(&self, results: &[ExperimentResult<'_>]) -> String {
        let experiments = results
            .iter()
            .map(|r| ExperimentJson {
                name: &r.exp.name,
                source: r.exp.source.display().to_string(),
                results: r.dir.display().to_string(),
                verdict: r.verdict(),
                error: r.broke,
                time_scale: r.exp.time_scale,
                seconds: round(r.seconds),
                expectations: r
                    .checks
                    .iter()
                    .map(|c| ExpectJson { expect: &c.expect, held: c.failures.is_empty(), failures: &c.failures })
                    .collect(),
                overall: measures(r.summary, r.exp),
                points: if r.exp.points.is_empty() {
                    Vec::new()
                } else {
                    r.points
                        .iter()
                        .map(|p| PointJson {
                            setting: crate::experiment::own_label(&p.setting, r.exp.time_scale),
                            measures: measures(&p.summary, p.exp),
                        })
                        .collect()
                },
            })
            .collect();
        let doc = Document { leasequake: self.version, results_format: RESULTS_FORMAT, experiments };
        serde_json::to_string_pretty(&doc).expect("results serialise") + "\n"
    }
}
