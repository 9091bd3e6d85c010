//! The `_or_warn` readers, for code with no error path (launch knobs read once into a
//! `OnceLock`): a bad value prints one warning per variable and falls back, out of range to the
//! nearest bound, unparsable to the declared default.

use crate::{env_lookup, Default, Kind, Lookup, Param, ParamError, Value};
use std::collections::HashSet;
use std::sync::Mutex;

impl Param {
    /// Prints `e` on stderr, once per variable per process, saying what is used instead.
    pub fn warn(&self, e: &ParamError, using: &str) {
        static WARNED: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
        let mut w = WARNED.lock().unwrap_or_else(|p| p.into_inner());
        if w.get_or_insert_with(HashSet::new).insert(self.name) {
            eprintln!("topoplan: warning: {e}; using {using}");
        }
    }

    /// The declared default as a value (`None` for `Auto`).
    fn default_value(&self) -> Option<Value> {
        match self.default {
            Default::Value(d) => self.parse(d).ok(),
            Default::Auto(_) => None,
        }
    }

    /// Like [`Param::u64`], but a bad value warns and falls back: out of range to the nearest
    /// bound, unparsable to the default.
    pub fn u64_or_warn(&self) -> Option<u64> {
        self.u64_or_warn_from(&env_lookup)
    }

    /// [`Param::u64_or_warn`] through a lookup function.
    pub fn u64_or_warn_from(&self, get: Lookup) -> Option<u64> {
        let e = match self.u64_from(get) {
            Ok(v) => return v,
            Err(e) => e,
        };
        let v = match (&e, self.kind) {
            (
                ParamError::OutOfRange { value, .. },
                Kind::UInt { min, max } | Kind::Size { min, max, .. },
            ) => value.trim().parse::<u64>().ok().map(|v| v.clamp(min, max)),
            _ => None,
        }
        .or(match self.default_value() {
            Some(Value::UInt(d)) => Some(d),
            _ => None,
        });
        self.warn(&e, &v.map_or("the default".into(), |v| v.to_string()));
        v
    }

    /// [`Param::u64_or_warn`] as a `u32` (every `u32` reader declares a range that fits).
    pub fn u32_or_warn(&self) -> Option<u32> {
        self.u32_or_warn_from(&env_lookup)
    }

    pub fn u32_or_warn_from(&self, get: Lookup) -> Option<u32> {
        self.u64_or_warn_from(get)
            .map(|v| v.min(u32::MAX as u64) as u32)
    }

    /// [`Param::u64_or_warn`] in bytes, for a [`Kind::Size`].
    pub fn bytes_or_warn(&self) -> Option<u64> {
        self.bytes_or_warn_from(&env_lookup)
    }

    pub fn bytes_or_warn_from(&self, get: Lookup) -> Option<u64> {
        match self.kind {
            Kind::Size { unit, .. } => self.u64_or_warn_from(get).map(|v| v << unit.shift()),
            _ => {
                self.warn(&self.wrong("bytes"), "the default");
                None
            }
        }
    }

    /// Like [`Param::f64`], but a bad value warns and falls back (see [`Param::u64_or_warn`]).
    pub fn f64_or_warn(&self) -> Option<f64> {
        self.f64_or_warn_from(&env_lookup)
    }

    pub fn f64_or_warn_from(&self, get: Lookup) -> Option<f64> {
        let e = match self.f64_from(get) {
            Ok(v) => return v,
            Err(e) => e,
        };
        let v = match (&e, self.kind) {
            (ParamError::OutOfRange { value, .. }, Kind::Decimal { min, max }) => {
                value.trim().parse::<f64>().ok().map(|v| v.clamp(min, max))
            }
            _ => None,
        }
        .or(match self.default_value() {
            Some(Value::Decimal(d)) => Some(d),
            _ => None,
        });
        self.warn(&e, &v.map_or("the default".into(), |v| v.to_string()));
        v
    }

    /// Like [`Param::flag`], but a bad value warns and gives the default.
    pub fn flag_or_warn(&self) -> bool {
        self.flag_or_warn_from(&env_lookup)
    }

    pub fn flag_or_warn_from(&self, get: Lookup) -> bool {
        self.flag_from(get).unwrap_or_else(|e| {
            let d = matches!(self.default_value(), Some(Value::Flag(true)));
            self.warn(&e, if d { "1" } else { "0" });
            d
        })
    }

    /// Like [`Param::choice`], but a bad value warns and gives the default.
    pub fn choice_or_warn(&self) -> Option<&'static str> {
        self.choice_or_warn_from(&env_lookup)
    }

    pub fn choice_or_warn_from(&self, get: Lookup) -> Option<&'static str> {
        self.choice_from(get).unwrap_or_else(|e| {
            let d = match self.default_value() {
                Some(Value::Choice(c)) => Some(c),
                _ => None,
            };
            self.warn(&e, d.unwrap_or("the default"));
            d
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::*;

    fn one(k: &'static str, v: &'static str) -> impl Fn(&str) -> Option<String> {
        move |q| (q == k).then(|| v.to_string())
    }

    #[test]
    fn out_of_range_clamps_and_garbage_falls_back_to_the_default() {
        // DIRECT_SLOTS: 1..=64, default 2.
        assert_eq!(
            DIRECT_SLOTS.u32_or_warn_from(&one(DIRECT_SLOTS.name, "500")),
            Some(64)
        );
        assert_eq!(
            DIRECT_SLOTS.u32_or_warn_from(&one(DIRECT_SLOTS.name, "0")),
            Some(1)
        );
        assert_eq!(
            DIRECT_SLOTS.u32_or_warn_from(&one(DIRECT_SLOTS.name, "many")),
            Some(2)
        );
        assert_eq!(
            DIRECT_SLOTS.u32_or_warn_from(&one(DIRECT_SLOTS.name, "8")),
            Some(8)
        );
        // An `Auto` default stays unset on garbage.
        assert_eq!(
            DIRECT_CTAS.u32_or_warn_from(&one(DIRECT_CTAS.name, "x")),
            None
        );
        // Sizes come back in bytes, clamped in their unit.
        assert_eq!(
            CE_CHUNK_MB.bytes_or_warn_from(&one(CE_CHUNK_MB.name, "4096")),
            Some(1024 << 20)
        );
        assert_eq!(CE_CHUNK_MB.bytes_or_warn_from(&|_| None), Some(64 << 20));
        assert_eq!(
            HYBRID_CE_PCT.f64_or_warn_from(&one(HYBRID_CE_PCT.name, "95.5")),
            Some(90.0)
        );
        assert_eq!(
            HYBRID_CE_PCT.f64_or_warn_from(&one(HYBRID_CE_PCT.name, "12.5")),
            Some(12.5)
        );
    }

    #[test]
    fn flags_and_choices_fall_back_to_their_defaults() {
        assert!(DIRECT.flag_or_warn_from(&|_| None));
        assert!(!DIRECT.flag_or_warn_from(&one(DIRECT.name, "off")));
        assert!(DIRECT.flag_or_warn_from(&one(DIRECT.name, "maybe")));
        assert!(!CE_AUTO.flag_or_warn_from(&one(CE_AUTO.name, "maybe")));
        assert_eq!(
            PULL.choice_or_warn_from(&one(PULL.name, "sometimes")),
            Some("auto")
        );
        assert_eq!(
            CE_SIGNAL.choice_or_warn_from(&one(CE_SIGNAL.name, "KERNEL")),
            Some("kernel")
        );
    }
}
