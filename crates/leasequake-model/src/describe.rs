//! What a setting is, for the people who write one: the type of its value
//! as the reference and the schema describe it, the names its type accepts
//! (read from its own `Deserialize`, so they cannot drift from the loader),
//! the one row each setting of the built-in worker is documented by, and
//! how a value follows the time scale.

use serde::Deserialize;

use super::duration::{Dur, Offset};

/// The type of a key's value.
#[derive(Clone, Debug)]
pub enum Ty {
    /// A name or free text.
    Text,
    /// A whole number of at least `min`.
    Int(i64),
    Number,
    Bool,
    /// `9s`, `300ms`, `250us`, `2m`.
    Duration,
    /// One of these names.
    Choice(&'static [&'static str]),
    /// A list of values of this type.
    List(Box<Ty>),
    /// Exactly two values of this type.
    Pair(Box<Ty>),
    /// A fixed duration or a distribution.
    PauseLength,
    /// `leader`, `watcher`, `all`, `all-but-leader`, `any`, `lock`, `server` or a worker index.
    Target,
    /// One value of this type for every worker, or a list of one per worker.
    PerWorker(Box<Ty>),
    /// How fast a clock runs: a number from 0.5 to 2 (1: true time).
    Rate,
    /// A signed duration.
    Offset,
    /// An argv list, or one string with `shell: true`.
    Command,
    /// A mapping of names to strings (or numbers).
    Map,
    /// A mapping documented by the keys under it.
    Section,
    /// A list of mappings documented by the keys under `key[]`.
    Sections,
    /// `setting: [values]`, or `points: [{setting: value, …}]`.
    Sweep,
    /// A count, or `{until: {ci_width}, max, min}`.
    Trials,
    /// A list of faults (keys under `faults[]`), or `{random: …}`.
    Faults,
    /// A whole number, or `[min, max]`.
    Count,
    /// Summarised metrics (`file.column`) to their bounds.
    Bounds,
}

/// The names a unit enum is written with, from its own type.
pub fn choices<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    names_of::<T>()
}

/// The field (or variant) names a type's `Deserialize` asks for.
pub fn names_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut probe = Probe(None);
    let _ = T::deserialize(&mut probe);
    probe.0.unwrap_or(&[])
}

/// A deserializer that only records the field or variant names it is asked
/// for, and fails.
struct Probe(Option<&'static [&'static str]>);

impl<'de> serde::Deserializer<'de> for &mut Probe {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("probe"))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        self.0 = Some(fields);
        Err(serde::de::Error::custom("probe"))
    }

    fn deserialize_enum<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        self.0 = Some(variants);
        Err(serde::de::Error::custom("probe"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map identifier ignored_any
    }
}

impl Ty {
    /// Is a value of this type a span of time, multiplied by the time scale?
    pub fn is_time(&self) -> bool {
        match self {
            Ty::Duration | Ty::PauseLength | Ty::Offset => true,
            Ty::PerWorker(inner) => inner.is_time(),
            _ => false,
        }
    }
}

/// One setting as an experiment file writes it, documented once beside the
/// field that holds it (`worker_settings!`).
#[derive(Clone, Debug)]
pub struct SettingDoc {
    /// Dotted from the top of the file (`worker.belief_margin`).
    pub path: &'static str,
    pub ty: Ty,
    /// As the loader fills it in, written as a file would (empty: none).
    pub default: String,
    pub example: &'static str,
    pub about: &'static str,
}

/// How a setting's value follows the time scale: spans of time are
/// multiplied by it, everything else is kept. Implemented per type, so a
/// new duration setting is scaled without anyone remembering to.
pub trait Scale {
    fn scale(&self, by: f64) -> Self;
}

impl Scale for Dur {
    fn scale(&self, by: f64) -> Dur {
        self.scaled(by)
    }
}

impl Scale for Offset {
    fn scale(&self, by: f64) -> Offset {
        self.scaled(by)
    }
}

impl<T: Scale> Scale for Option<T> {
    fn scale(&self, by: f64) -> Option<T> {
        self.as_ref().map(|v| v.scale(by))
    }
}

impl<T: Scale> Scale for Vec<T> {
    fn scale(&self, by: f64) -> Vec<T> {
        self.iter().map(|v| v.scale(by)).collect()
    }
}

/// Types that are not spans of time: kept as they are.
macro_rules! unscaled {
    ($($t:ty),* $(,)?) => {
        $(impl Scale for $t {
            fn scale(&self, _: f64) -> $t {
                self.clone()
            }
        })*
    };
}

unscaled!(bool, usize, f64, String);
pub(crate) use unscaled;
