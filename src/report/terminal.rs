//! The short summary printed at the end of a run (and by `check`).

use std::path::Path;

use crate::experiment::Experiment;

use super::summary::Summary;

fn secs(ms: Option<f64>) -> String {
    ms.map(|v| format!("{:.3} s", v / 1000.0)).unwrap_or_else(|| "-".into())
}

pub fn render(exp: &Experiment, s: &Summary, dir: &Path) -> String {
    let (lo, hi) = s.double_leader_ci;
    let mut out = format!("{}: {} trials ({})\n", exp.name, s.n, crate::trial::describe(exp));
    if exp.time_scale != 1.0 {
        out += &format!("  time scale:     {} (every duration above and below is scaled)\n", exp.time_scale);
    }
    if s.gaps > 0 {
        out += &format!(
            "  leaderless gaps: {}  min {}  median {}  max {}\n",
            s.gaps,
            secs(s.gap_min_ms),
            secs(s.gap_p50_ms),
            secs(s.gap_max_ms)
        );
    } else {
        out += "  leaderless gaps: none ended\n";
    }
    if s.open_gaps > 0 {
        out += &format!("  open at the end: {} gaps never ended\n", s.open_gaps);
    }
    out += &format!(
        "  two leaders:    {}/{} trials (95% CI {:.1}–{:.1} %)\n",
        s.double_leader_trials,
        s.n,
        lo * 100.0,
        hi * 100.0
    );
    out += &format!("  wedged:         {}/{} trials\n", s.wedged_trials, s.n);
    if s.no_leader_trials > 0 {
        out += &format!("  never led:      {}/{} trials\n", s.no_leader_trials, s.n);
    }
    out += &format!("  results:        {}\n", dir.display());
    out
}
