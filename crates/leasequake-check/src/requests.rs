//! What the history says of each request a worker made of its lease
//! service, for the checks that read the service's grants off it
//! (network.rs, grants.rs): when a grant a worker was told of ends, and
//! which requests reached the service though their reply was lost.

use leasequake_model::history::{Event, EventKind, Micros};

/// The harness's wall clock at the barrier, µs since the Unix epoch: where
/// a `lease_until` is put on the trial's axis.
pub(crate) fn barrier_wall_us(events: &[Event]) -> Option<i64> {
    events.iter().find(|e| e.kind == EventKind::Barrier).and_then(|e| e.detail.wall_ns).map(|ns| ns.div_euclid(1000))
}

/// When the lease an `acquired`/`renewed` wrote ends: its `lease_until` on
/// the trial's axis, else its nominal expiry.
pub(crate) fn grant_end(e: &Event, barrier_wall_us: Option<i64>) -> Option<Micros> {
    match (e.detail.lease_until, barrier_wall_us) {
        (Some(until), Some(wall)) => Some((until * 1e6).round() as i64 - wall),
        _ => e.detail.expires_in_ms.map(|ms| e.t_us + (ms * 1000.0).round() as i64),
    }
}

/// A request of one worker that failed for it but whose reply the proxy
/// dropped: it reached the server.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LostRequest {
    pub sent_us: Micros,
    /// When its reply was dropped.
    pub reply_us: Micros,
    /// A renewal (else an acquire or a takeover).
    pub renewal: bool,
}

/// `worker`'s requests whose reply was lost, in order.
pub(crate) fn lost_requests(mine: &[&Event]) -> Vec<LostRequest> {
    let lost: Vec<Micros> = mine.iter().filter(|e| e.kind == EventKind::ReplyLost).map(|e| e.t_us).collect();
    if lost.is_empty() {
        return Vec::new();
    }
    // When each of the worker's requests was sent: a lost reply answers
    // the latest one sent before it (a delayed reply can come after its
    // request failed by timeout).
    let mut sent_at: Vec<Micros> = mine
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Renewing => Some(e.t_us),
            // A renewal's outcome: sent at its `renewing`.
            EventKind::Renewed | EventKind::RenewFailed => None,
            _ => e.detail.op_us.map(|us| e.t_us - us as i64),
        })
        .collect();
    sent_at.sort_unstable();
    let answers = |sent: Micros| {
        let next = sent_at.iter().copied().find(|t| *t > sent).unwrap_or(Micros::MAX);
        lost.iter().copied().find(|t| *t >= sent && *t < next)
    };
    let mut out = Vec::new();
    let mut renewing: Option<Micros> = None;
    for e in mine {
        let (sent_us, renewal) = match e.kind {
            EventKind::Renewing => {
                renewing = Some(e.t_us);
                continue;
            }
            EventKind::RenewFailed => (renewing.take().unwrap_or(e.t_us), true),
            EventKind::NotAcquired | EventKind::TakeoverLost if e.detail.error.is_some() => {
                (e.t_us - e.detail.op_us.map_or(0, |us| us as i64), false)
            }
            _ => continue,
        };
        if let Some(reply_us) = answers(sent_us) {
            out.push(LostRequest { sent_us, reply_us, renewal });
        }
    }
    out
}

/// Overlapping or touching intervals joined, in order.
pub(crate) fn merge(mut v: Vec<(Micros, Micros)>) -> Vec<(Micros, Micros)> {
    v.retain(|(a, b)| b > a);
    v.sort_unstable();
    let mut out: Vec<(Micros, Micros)> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}
