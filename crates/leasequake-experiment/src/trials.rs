//! `trials:` in an experiment file: a count, or `{until: {ci_width: 10%},
//! max: 500, min: 10}` (run until the headline rate is known that well).

use serde::Deserialize;

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUntil {
    until: RawCi,
    max: u32,
    #[serde(default)]
    min: Option<u32>,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCi {
    /// `10%` or `0.1`.
    ci_width: serde_json::Value,
}

/// `trials:` as written: a count, or how to run until the interval is
/// narrow enough.
pub(super) fn trials_of(v: &serde_json::Value) -> Result<(u32, Option<crate::model::Until>), String> {
    match v {
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(n) if n < 1 => Err(format!("trials must be at least 1, not {n}")),
            Some(n) => {
                u32::try_from(n).map(|n| (n, None)).map_err(|_| format!("trials: {n} is more than {}", u32::MAX))
            }
            None => Err(format!("trials must be a whole number, not {n}")),
        },
        serde_json::Value::Object(_) => {
            let u: RawUntil = serde_json::from_value(v.clone()).map_err(|e| format!("trials: {e}"))?;
            let ci_width = proportion(&u.until.ci_width).map_err(|m| format!("trials: {m}"))?;
            let min = u.min.unwrap_or(MIN_ADAPTIVE.min(u.max));
            if min == 0 || min > u.max {
                return Err(format!("trials: min ({min}) must be at least 1 and at most max ({})", u.max));
            }
            Ok((u.max, Some(crate::model::Until { ci_width, min })))
        }
        _ => Err("trials is a whole number, or {until: {ci_width: 10%}, max: 500}".to_string()),
    }
}

/// The fewest trials an adaptive run does before it may stop, by default.
const MIN_ADAPTIVE: u32 = 10;

/// A proportion written as `10%` or `0.1`, in (0, 1).
fn proportion(v: &serde_json::Value) -> Result<f64, String> {
    let p = match v {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => {
            s.trim().strip_suffix('%').and_then(|n| n.trim().parse::<f64>().ok()).map(|p| p / 100.0)
        }
        _ => None,
    };
    match p {
        Some(p) if p > 0.0 && p < 1.0 => Ok(p),
        _ => Err(format!("ci_width is {v}: a width between 0 and 1, or between 0% and 100% (e.g. 10%)")),
    }
}
