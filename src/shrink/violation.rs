//! What a trial violated, by kind: the thing a shrunk schedule must still
//! do. "The same way" means the same kind, not any failure: a schedule
//! that wedges does not reproduce a double leader.

use crate::check::TrialMetrics;
use crate::model::Experiment;
use crate::report::summary::expectation_checks;

/// A kind of violation, in the order a trial's are listed: the headline
/// (two leaders) first, what only a token or the service can tell next.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Violation {
    /// Two workers believed they led at once.
    DoubleLeader,
    /// Two workers held grants the service told them of, at once.
    DoubleGrant,
    /// A write with an older fencing token was accepted over a newer one.
    StaleWrite,
    /// The lease was never taken over again (an unreadable file).
    Wedged,
    /// A per-trial `expect:` key failed (its name: `gap_max`, …).
    Expect(String),
}

impl Violation {
    pub fn name(&self) -> String {
        match self {
            Violation::DoubleGrant => "double-grant".into(),
            Violation::StaleWrite => "stale-write".into(),
            Violation::DoubleLeader => "double-leader".into(),
            Violation::Wedged => "wedged".into(),
            Violation::Expect(key) => format!("expect-{key}"),
        }
    }

    pub fn from_name(name: &str) -> Option<Violation> {
        Some(match name {
            "double-grant" => Violation::DoubleGrant,
            "stale-write" => Violation::StaleWrite,
            "double-leader" => Violation::DoubleLeader,
            "wedged" => Violation::Wedged,
            _ => Violation::Expect(name.strip_prefix("expect-").filter(|k| EXPECT_KEYS.contains(k))?.to_string()),
        })
    }

    /// Every name `from_name` reads, for messages and help.
    pub fn names() -> String {
        let mut names: Vec<String> =
            ["double-leader", "double-grant", "stale-write", "wedged"].map(String::from).into();
        names.extend(EXPECT_KEYS.iter().map(|k| format!("expect-{k}")));
        names.join(", ")
    }
}

/// The `expect:` keys a single trial can fail on its own.
const EXPECT_KEYS: [&str; 4] = ["max_leaders", "gap_min", "gap_max", "wedged"];

/// Everything one trial violated, in that order (empty: nothing).
pub fn violations(exp: &Experiment, m: &TrialMetrics) -> Vec<Violation> {
    let mut out = Vec::new();
    if m.max_leaders >= 2 {
        out.push(Violation::DoubleLeader);
    }
    if m.network.double_grants.definite > 0 {
        out.push(Violation::DoubleGrant);
    }
    if m.writes.stale_accepted > 0 {
        out.push(Violation::StaleWrite);
    }
    if m.wedged && exp.expect.wedged != Some(true) {
        out.push(Violation::Wedged);
    }
    for c in expectation_checks(exp, &[(0, m)]) {
        let key = c.expect.split(':').next().unwrap_or_default().to_string();
        if !c.failures.is_empty() && EXPECT_KEYS.contains(&key.as_str()) {
            out.push(Violation::Expect(key));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back() {
        for name in Violation::names().split(", ") {
            assert_eq!(Violation::from_name(name).map(|v| v.name()).as_deref(), Some(name));
        }
        assert_eq!(Violation::from_name("expect-double_leader_trials"), None, "not a single trial's");
        assert_eq!(Violation::from_name("boom"), None);
    }

    #[test]
    fn a_trial_is_judged_worst_first() {
        let exp = crate::experiment::load_str(
            std::path::Path::new("t.yaml"),
            "name: t\nworkers: 3\nexpect: {max_leaders: 1}\n",
            &crate::experiment::Overrides::default(),
        )
        .unwrap();
        let quiet =
            crate::check::check(&crate::model::history::History::new(Vec::new()), &crate::check::CheckParams::of(&exp));
        let m = TrialMetrics { max_leaders: 2, wedged: true, ..quiet.clone() };
        assert_eq!(
            violations(&exp, &m),
            [Violation::DoubleLeader, Violation::Wedged, Violation::Expect("max_leaders".into())]
        );
        assert!(violations(&exp, &TrialMetrics { max_leaders: 1, wedged: false, ..quiet }).is_empty());
    }
}
