//! Durations as written in experiment files: `9s`, `300ms`, `1.5s`, `250us`,
//! `2m`. Stored as whole microseconds so that scaling and printing round-trip
//! exactly (the resolved experiment.yaml must load back to the same values).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur {
    us: u64,
}

impl Dur {
    pub const ZERO: Dur = Dur { us: 0 };

    pub const fn from_us(us: u64) -> Dur {
        Dur { us }
    }

    pub const fn from_ms(ms: u64) -> Dur {
        Dur { us: ms * 1000 }
    }

    pub const fn from_secs(s: u64) -> Dur {
        Dur { us: s * 1_000_000 }
    }

    pub fn as_us(self) -> u64 {
        self.us
    }

    pub fn as_ns(self) -> u64 {
        self.us * 1000
    }

    pub fn as_ms_f64(self) -> f64 {
        self.us as f64 / 1000.0
    }

    pub fn as_std(self) -> Duration {
        Duration::from_micros(self.us)
    }

    /// Multiply by the time scale, rounding to the nearest µs.
    pub fn scaled(self, scale: f64) -> Dur {
        Dur { us: (self.us as f64 * scale).round() as u64 }
    }

    pub fn parse(text: &str) -> Result<Dur, String> {
        let t = text.trim();
        if t.starts_with('-') {
            return Err(format!("duration {t:?} is negative: durations cannot be negative"));
        }
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("duration {t:?} has no unit: write it like 9s, 300ms or 250us"))?;
        let (num, unit) = t.split_at(split);
        let value: f64 = num
            .parse()
            .map_err(|_| format!("duration {t:?} does not start with a number: write it like 9s or 300ms"))?;
        let per_unit_us = match unit.trim() {
            "us" | "µs" => 1.0,
            "ms" => 1e3,
            "s" => 1e6,
            "m" | "min" => 60e6,
            other => {
                return Err(format!("duration {t:?} has unknown unit {other:?}: use us, ms, s or m"));
            }
        };
        let us = value * per_unit_us;
        if !us.is_finite() || us > 1e15 {
            return Err(format!("duration {t:?} is out of range"));
        }
        Ok(Dur { us: us.round() as u64 })
    }
}

impl fmt::Display for Dur {
    /// The largest unit that represents the value exactly.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = self.us;
        if us == 0 {
            write!(f, "0s")
        } else if us.is_multiple_of(1_000_000) {
            write!(f, "{}s", us / 1_000_000)
        } else if us.is_multiple_of(1000) {
            write!(f, "{}ms", us / 1000)
        } else {
            write!(f, "{us}us")
        }
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
        // A bare number is ambiguous (seconds? ms?): demand a unit.
        let text = String::deserialize(d)?;
        Dur::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// A signed duration: how far a clock is ahead (`250ms`) or behind
/// (`-250ms`) the true time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Offset {
    us: i64,
}

impl Offset {
    pub const ZERO: Offset = Offset { us: 0 };

    pub fn as_ns(self) -> i64 {
        self.us * 1000
    }

    pub fn as_us(self) -> i64 {
        self.us
    }

    /// Multiply by the time scale, rounding to the nearest µs.
    pub fn scaled(self, scale: f64) -> Offset {
        Offset { us: (self.us as f64 * scale).round() as i64 }
    }

    pub fn parse(text: &str) -> Result<Offset, String> {
        let t = text.trim();
        let (sign, magnitude) = match t.strip_prefix('-') {
            Some(rest) => (-1, rest),
            None => (1, t.strip_prefix('+').unwrap_or(t)),
        };
        let d = Dur::parse(magnitude)?;
        let us = i64::try_from(d.as_us()).map_err(|_| format!("offset {t:?} is out of range"))?;
        Ok(Offset { us: sign * us })
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.us < 0 { "-" } else { "" };
        write!(f, "{sign}{}", Dur::from_us(self.us.unsigned_abs()))
    }
}

impl<'de> Deserialize<'de> for Offset {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Offset, D::Error> {
        let text = String::deserialize(d)?;
        Offset::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl Serialize for Offset {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_usual_forms() {
        assert_eq!(Dur::parse("9s").unwrap(), Dur::from_secs(9));
        assert_eq!(Dur::parse("300ms").unwrap(), Dur::from_ms(300));
        assert_eq!(Dur::parse("1.5s").unwrap(), Dur::from_ms(1500));
        assert_eq!(Dur::parse("250us").unwrap(), Dur::from_us(250));
        assert_eq!(Dur::parse("2m").unwrap(), Dur::from_secs(120));
    }

    #[test]
    fn rejects_missing_or_unknown_units() {
        assert!(Dur::parse("9").unwrap_err().contains("no unit"));
        assert!(Dur::parse("9h").unwrap_err().contains("unknown unit"));
        assert!(Dur::parse("s").is_err());
    }

    #[test]
    fn display_round_trips_after_scaling() {
        for d in ["9s", "300ms", "2.47s", "1s"] {
            let scaled = Dur::parse(d).unwrap().scaled(0.05);
            assert_eq!(Dur::parse(&scaled.to_string()).unwrap(), scaled);
        }
        assert_eq!(Dur::from_secs(9).scaled(0.1).to_string(), "900ms");
    }
    #[test]
    fn offsets_carry_a_sign() {
        assert_eq!(Offset::parse("-250ms").unwrap().as_ns(), -250_000_000);
        assert_eq!(Offset::parse("+1s").unwrap().as_ns(), 1_000_000_000);
        assert_eq!(Offset::parse("-1.5s").unwrap().scaled(0.1).to_string(), "-150ms");
        assert!(Offset::parse("-9").is_err());
    }
}
