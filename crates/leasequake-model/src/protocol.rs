//! The wire format between a worker and the harness: one JSON object per
//! line on the worker's stdout (a pipe), stamped with CLOCK_MONOTONIC.
//!
//! `{"t_ns": 123456789, "event": "renewed", "detail": {"lease_until": 1715430000, "expires_in_ms": 9000}}`
//!
//! Any program that writes these lines can be put under test.

use serde::{Deserialize, Serialize};

use super::history::{Detail, EventKind};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireEvent {
    /// CLOCK_MONOTONIC in ns, taken right after the action it reports.
    pub t_ns: i64,
    pub event: EventKind,
    #[serde(default, skip_serializing_if = "is_default")]
    pub detail: Detail,
}

fn is_default(d: &Detail) -> bool {
    *d == Detail::default()
}

impl WireEvent {
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("wire events serialise")
    }

    pub fn parse(line: &str) -> Result<WireEvent, serde_json::Error> {
        serde_json::from_str(line)
    }
}

/// Names the harness's pid in every child it spawns; the child ties itself
/// to that process (`child::tie_to_parent`).
pub const PARENT_ENV: &str = "LEASEQUAKE_PARENT";
/// The protocol pipe's descriptor, for the exec trampoline to move to fd 3.
pub const EXEC_EVENTS_FD_ENV: &str = "LEASEQUAKE_EXEC_EVENTS_FD";
/// Set: the exec trampoline asks to be traced before its exec, so that the
/// harness can write the vDSO clock into the program before its first
/// instruction.
pub const TRACE_EXEC_ENV: &str = "LEASEQUAKE_TRACE_EXEC";
/// The cgroup (v2 directory) a child moves itself into before anything
/// else, so that everything it ever starts is in it too.
pub const CGROUP_ENV: &str = "LEASEQUAKE_CGROUP";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let e = WireEvent {
            t_ns: 5,
            event: EventKind::HeldBy,
            detail: Detail { holder: Some(60217), lease_until: Some(1.0), ..Detail::default() },
        };
        assert_eq!(e.to_line(), r#"{"t_ns":5,"event":"held_by","detail":{"holder":60217,"lease_until":1.0}}"#);
        assert_eq!(WireEvent::parse(&e.to_line()).unwrap(), e);
        assert!(WireEvent::parse(r#"{"t_ns":1,"event":"nonsense"}"#).is_err());
    }
}
