//! The `faults:` list of an experiment file: each fault as written (with
//! the location of each value), and its validation against the experiment.

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::diagnostic::ExperimentError;
use crate::model::history::EventKind;
use crate::model::{
    Action, After, Direction, Dur, Fault, MAX_RANDOM_FAULTS, NetParams, Offset, PauseLen, RandomCount, RandomFaults,
    RandomKind, Target,
};

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFault {
    pub(super) at: Spanned<Dur>,
    #[serde(default)]
    pub(super) jitter: Option<Dur>,
    #[serde(default)]
    pub(super) after: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) delay: Option<Dur>,
    #[serde(default)]
    pub(super) target: Option<Spanned<RawTarget>>,
    pub(super) action: Spanned<Action>,
    #[serde(default)]
    pub(super) duration: Option<Spanned<RawLen>>,
    #[serde(default)]
    pub(super) every: Option<Spanned<Dur>>,
    /// delay: the added one-way latency.
    #[serde(default)]
    pub(super) latency: Option<Spanned<Dur>>,
    /// delay: each chunk's latency drawn from `latency ± latency_jitter`.
    #[serde(default)]
    pub(super) latency_jitter: Option<Spanned<Dur>>,
    /// delay: requests, replies or both.
    #[serde(default)]
    pub(super) direction: Option<Spanned<Direction>>,
    /// Network faults: the fraction of connections hit.
    #[serde(default)]
    pub(super) toxicity: Option<Spanned<f64>>,
    /// skew: how far the worker's clock jumps (signed).
    #[serde(default)]
    pub(super) by: Option<Spanned<Offset>>,
}

/// A pause length: `15s`, or `{uniform: [1s, 5s]}`, `{exponential: 2s}`,
/// `{choice: [1s, 3s]}`.
#[derive(Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum RawLen {
    Fixed(Dur),
    Drawn(PauseLen),
}

impl RawLen {
    pub(super) fn into_len(self) -> PauseLen {
        match self {
            RawLen::Fixed(d) => PauseLen::Fixed(d),
            RawLen::Drawn(l) => l,
        }
    }
}

#[derive(Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawTarget {
    Index(i64),
    Name(String),
}

/// Check one fault against the experiment (unscaled values).
pub(super) fn validate_fault(
    f: &RawFault,
    workers: usize,
    duration: Dur,
    err_at: &dyn Fn(&serde_saphyr::Location, String) -> ExperimentError,
) -> Result<Fault, ExperimentError> {
    let action = f.action.value;
    let jitter = f.jitter.unwrap_or(Dur::ZERO);
    if f.at.value >= duration || Dur::from_us(f.at.value.as_us() + jitter.as_us()) > duration {
        return Err(err_at(
            &f.at.referenced,
            if jitter == Dur::ZERO {
                format!("fault at {} is not before the trial ends (duration: {duration})", f.at.value)
            } else {
                format!("fault at {} + jitter {jitter} is past the trial's end (duration: {duration})", f.at.value)
            },
        ));
    }
    let target = match &f.target {
        None if action.is_lock() => Target::Lock,
        None if action.is_server() => Target::Server,
        None => {
            return Err(err_at(
                &f.action.referenced,
                format!("action {} needs a target: leader, watcher, all, any or a worker index", action.name()),
            ));
        }
        Some(t) => {
            let target = match &t.value {
                RawTarget::Index(i) if *i >= 0 && (*i as usize) < workers => Target::Worker(*i as usize),
                RawTarget::Index(i) => {
                    return Err(err_at(
                        &t.referenced,
                        format!("worker index {i} is out of range: this experiment has workers 0..{}", workers - 1),
                    ));
                }
                RawTarget::Name(n) => Target::from_name(n).ok_or_else(|| {
                    err_at(
                        &t.referenced,
                        format!("unknown target {n:?}: expected {} or a worker index", Target::NAMES.join(", ")),
                    )
                })?,
            };
            if action.is_lock() != (target == Target::Lock) || action.is_server() != (target == Target::Server) {
                return Err(err_at(
                    &t.referenced,
                    format!(
                        "action {} cannot target {target}: lock-* actions target the lock, server-* actions the server, signals and network faults target workers",
                        action.name()
                    ),
                ));
            }
            target
        }
    };
    let pause_len = match (&f.duration, action) {
        (Some(d), a) if a.takes_duration() && d.value.clone().into_len().is_positive() => {
            Some(d.value.clone().into_len())
        }
        (Some(d), a) if a.takes_duration() => {
            return Err(err_at(&d.referenced, format!("{} duration must be longer than zero", a.name())));
        }
        (None, a) if a.is_pause() => {
            return Err(err_at(&f.action.referenced, format!("{} needs a duration, e.g. `duration: 15s`", a.name())));
        }
        (Some(d), _) => {
            return Err(err_at(
                &d.referenced,
                format!("duration applies to pauses and network faults only, not to {}", action.name()),
            ));
        }
        (None, _) => None,
    };
    let net = validate_net(f, action, err_at)?;
    let skew = match (&f.by, action) {
        (Some(b), Action::Skew) => Some(b.value),
        (None, Action::Skew) => {
            return Err(err_at(
                &f.action.referenced,
                "skew needs `by`, how far the clock jumps, e.g. `by: -2s`".into(),
            ));
        }
        (Some(b), _) => {
            return Err(err_at(&b.referenced, format!("by applies to skew only, not to {}", action.name())));
        }
        (None, _) => None,
    };
    let delay = f.delay.unwrap_or(Dur::ZERO);
    if f.after.is_some() && Dur::from_us(f.at.value.as_us() + delay.as_us()) >= duration {
        return Err(err_at(
            &f.at.referenced,
            format!("fault at {} + delay {delay} is not before the trial ends (duration: {duration})", f.at.value),
        ));
    }
    let after = match &f.after {
        None => {
            if f.delay.is_some() {
                return Err(err_at(&f.at.referenced, "delay needs `after: <event>`".into()));
            }
            None
        }
        Some(a) => {
            // `ready` is reported before the barrier: it can never trigger.
            let after_barrier = |k: &EventKind| k.is_worker_event() && *k != EventKind::Ready;
            let event = EventKind::from_name(&a.value).filter(after_barrier).ok_or_else(|| {
                err_at(
                    &a.referenced,
                    format!("unknown worker event {:?}: expected one of {}", a.value, worker_event_names()),
                )
            })?;
            if target == Target::Lock {
                return Err(err_at(&a.referenced, "after: needs a worker target, not the lock".into()));
            }
            Some(After { event, delay: f.delay.unwrap_or(Dur::ZERO) })
        }
    };
    if let Some(e) = &f.every
        && e.value == Dur::ZERO
    {
        return Err(err_at(&e.referenced, "every must be longer than zero".into()));
    }
    Ok(Fault {
        at: f.at.value,
        jitter,
        after,
        target,
        action,
        duration: pause_len,
        every: f.every.as_ref().map(|e| e.value),
        net,
        skew,
    })
}

/// A network fault's parameters (and none on any other fault).
fn validate_net(
    f: &RawFault,
    action: Action,
    err_at: &dyn Fn(&serde_saphyr::Location, String) -> ExperimentError,
) -> Result<Option<NetParams>, ExperimentError> {
    let misplaced = |loc: &serde_saphyr::Location, key: &str, only: &str| {
        err_at(loc, format!("{key} applies to {only} only, not to {}", action.name()))
    };
    if action != Action::Delay {
        if let Some(l) = &f.latency {
            return Err(misplaced(&l.referenced, "latency", "delay"));
        }
        if let Some(l) = &f.latency_jitter {
            return Err(misplaced(&l.referenced, "latency_jitter", "delay"));
        }
        if let Some(d) = &f.direction {
            return Err(misplaced(&d.referenced, "direction", "delay"));
        }
    }
    if !action.is_network() || action == Action::Heal {
        if let Some(t) = &f.toxicity {
            return Err(misplaced(
                &t.referenced,
                "toxicity",
                "network faults (partition, partition-replies, delay, reset)",
            ));
        }
        return Ok(None);
    }
    let toxicity = match &f.toxicity {
        Some(t) if t.value > 0.0 && t.value <= 1.0 => t.value,
        Some(t) => {
            return Err(err_at(
                &t.referenced,
                format!("toxicity is the fraction of connections hit: above 0 and at most 1, not {}", t.value),
            ));
        }
        None => 1.0,
    };
    let latency = match (&f.latency, action) {
        (Some(l), Action::Delay) if l.value > Dur::ZERO => l.value,
        (Some(l), _) => return Err(err_at(&l.referenced, "latency must be longer than zero".into())),
        (None, Action::Delay) => {
            return Err(err_at(&f.action.referenced, "delay needs a latency, e.g. `latency: 50ms`".into()));
        }
        (None, _) => Dur::ZERO,
    };
    Ok(Some(NetParams {
        latency,
        jitter: f.latency_jitter.as_ref().map_or(Dur::ZERO, |j| j.value),
        direction: f.direction.as_ref().map_or(Direction::Both, |d| d.value),
        toxicity,
    }))
}

fn worker_event_names() -> String {
    let after_barrier = |k: &EventKind| k.is_worker_event() && *k != EventKind::Ready;
    EventKind::ALL.into_iter().filter(after_barrier).map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

/// `faults:` as written: a list (a script), or `{random: …}` (a campaign).
/// Hand-written so that an error inside either keeps its line and column,
/// where an untagged enum would only say that nothing matched.
#[derive(Clone, Default)]
pub(super) struct RawFaults {
    pub(super) list: Vec<RawFault>,
    pub(super) random: Option<RawRandom>,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCampaign {
    random: RawRandom,
}

/// `faults: {random: {window, kinds}}`.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRandom {
    /// `[from, until]` after the barrier; default the whole trial.
    #[serde(default)]
    pub(super) window: Option<Spanned<[Dur; 2]>>,
    pub(super) kinds: Spanned<Vec<RawRandomKind>>,
}

/// One kind of fault a campaign draws: what a scripted fault says, but
/// how many instead of when.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRandomKind {
    pub(super) action: Spanned<Action>,
    #[serde(default)]
    pub(super) target: Option<Spanned<RawTarget>>,
    /// `3`, or `[0, 3]` (drawn per trial).
    #[serde(default)]
    pub(super) count: Option<Spanned<RawCount>>,
    /// A Poisson process: on average one fault this often.
    #[serde(default)]
    pub(super) mean_interval: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) duration: Option<Spanned<RawLen>>,
    #[serde(default)]
    pub(super) latency: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) latency_jitter: Option<Spanned<Dur>>,
    #[serde(default)]
    pub(super) direction: Option<Spanned<Direction>>,
    #[serde(default)]
    pub(super) toxicity: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) by: Option<Spanned<Offset>>,
}

#[derive(Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum RawCount {
    Exactly(i64),
    Between([i64; 2]),
}

impl RawRandomKind {
    /// The fault it draws, as a scripted one at `at` would be written: so
    /// that it is checked (and later scaled) by the same rules.
    pub(super) fn as_fault(&self, at: Spanned<Dur>) -> RawFault {
        RawFault {
            at,
            jitter: None,
            after: None,
            delay: None,
            target: self.target.clone(),
            action: self.action.clone(),
            duration: self.duration.clone(),
            every: None,
            latency: self.latency.clone(),
            latency_jitter: self.latency_jitter.clone(),
            direction: self.direction.clone(),
            toxicity: self.toxicity.clone(),
            by: self.by.clone(),
        }
    }
}

impl RawFaults {
    /// Every fault as written: the script's, or each kind of the campaign's
    /// (at the window's start).
    pub(super) fn written(&self) -> Vec<RawFault> {
        let mut out = self.list.clone();
        if let Some(r) = &self.random {
            for k in &r.kinds.value {
                let at = r.window.as_ref().map_or(Dur::ZERO, |w| w.value[0]);
                out.push(k.as_fault(Spanned::new(at, k.action.referenced, k.action.defined)));
            }
        }
        out
    }
}

impl<'de> Deserialize<'de> for RawFaults {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = RawFaults;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of faults, or `random:` with the kinds of fault to draw")
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<RawFaults, E> {
                Ok(RawFaults::default())
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<RawFaults, A::Error> {
                let list = Vec::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
                Ok(RawFaults { list, random: None })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RawFaults, A::Error> {
                let c = RawCampaign::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(RawFaults { list: Vec::new(), random: Some(c.random) })
            }
        }
        d.deserialize_any(Either)
    }
}

/// Check a campaign against the experiment (unscaled values).
/// How far a worker's clock may be moved in a trial, faults and start
/// offset together, after scaling.
pub(super) const MAX_SKEW_REACH: Dur = Dur::from_secs(86_400);

/// How far the skews can move one worker's clock in a trial `duration`
/// long (unscaled µs): each scripted skew as often as it can fire, each
/// campaign's as often as it can be drawn. A worker adds every jump into
/// one counter, so what they can sum to is bounded, not only each one.
pub(super) fn skew_reach(faults: &[Fault], random: Option<&RandomFaults>, duration: Dur) -> u128 {
    let size = |f: &Fault| f.skew.map_or(0, |s| u128::from(s.as_us().unsigned_abs()));
    let scripted: u128 = faults.iter().map(|f| size(f) * u128::from(f.firings(duration))).sum();
    let drawn: u128 = random.map_or(0, |r| {
        r.kinds
            .iter()
            .map(|k| {
                let most = match k.count {
                    RandomCount::Between(_, max) => u128::from(max),
                    RandomCount::MeanInterval(_) => MAX_RANDOM_FAULTS as u128,
                };
                size(&k.fault) * most
            })
            .sum()
    });
    scripted + drawn
}

pub(super) fn validate_random(
    r: &RawRandom,
    workers: usize,
    duration: Dur,
    err_at: &dyn Fn(&serde_saphyr::Location, String) -> ExperimentError,
) -> Result<RandomFaults, ExperimentError> {
    let window = match &r.window {
        None => None,
        Some(w) => {
            let [from, until] = w.value;
            if from >= until || until > duration {
                return Err(err_at(
                    &w.referenced,
                    format!("window [{from}, {until}] must be a span inside the trial (duration: {duration})"),
                ));
            }
            Some(w.value)
        }
    };
    let [from, until] = window.unwrap_or([Dur::ZERO, duration]);
    if r.kinds.value.is_empty() {
        return Err(err_at(&r.kinds.referenced, "a campaign needs at least one kind of fault".into()));
    }
    let span = Dur::from_us(until.as_us() - from.as_us());
    let mut expected = 0.0;
    let mut kinds = Vec::new();
    for k in &r.kinds.value {
        let fault = validate_fault(
            &k.as_fault(Spanned::new(from, k.action.referenced, k.action.defined)),
            workers,
            duration,
            err_at,
        )?;
        if fault.action.is_network() && fault.action != Action::Heal && fault.duration.is_none() {
            return Err(err_at(
                &k.action.referenced,
                format!(
                    "{} in a campaign needs a duration: a campaign draws no heal, so it would never end",
                    fault.action.name()
                ),
            ));
        }
        if matches!(fault.action, Action::Cont | Action::Stop | Action::Heal) {
            return Err(err_at(
                &k.action.referenced,
                format!(
                    "{} is half of a fault: a campaign draws whole ones (pause, or a network fault with a duration)",
                    fault.action.name()
                ),
            ));
        }
        let count = match (&k.count, &k.mean_interval) {
            (Some(c), None) => {
                let (min, max) = match c.value {
                    RawCount::Exactly(n) => (n, n),
                    RawCount::Between([a, b]) => (a, b),
                };
                if min < 0 || max < min || max > MAX_RANDOM_FAULTS as i64 {
                    return Err(err_at(
                        &c.referenced,
                        format!(
                            "count is a number, or [min, max], from 0 to {MAX_RANDOM_FAULTS} with min ≤ max; not {}",
                            if min == max { min.to_string() } else { format!("[{min}, {max}]") }
                        ),
                    ));
                }
                RandomCount::Between(min as u32, max as u32)
            }
            (None, Some(m)) if m.value > Dur::ZERO => RandomCount::MeanInterval(m.value),
            (None, Some(m)) => return Err(err_at(&m.referenced, "mean_interval must be longer than zero".into())),
            (Some(c), Some(_)) => {
                return Err(err_at(&c.referenced, "count or mean_interval, not both".into()));
            }
            (None, None) => {
                return Err(err_at(
                    &k.action.referenced,
                    "a kind of fault needs `count: N` (or `[min, max]`) or `mean_interval: <duration>`".into(),
                ));
            }
        };
        expected += count.expected(span);
        if expected > MAX_RANDOM_FAULTS as f64 {
            let at = k.count.as_ref().map(|c| c.referenced).or(k.mean_interval.as_ref().map(|m| m.referenced));
            return Err(err_at(
                &at.unwrap_or(k.action.referenced),
                format!("the campaign would draw about {expected:.0} faults per trial; at most {MAX_RANDOM_FAULTS}"),
            ));
        }
        kinds.push(RandomKind { fault, count });
    }
    Ok(RandomFaults { window, kinds })
}
