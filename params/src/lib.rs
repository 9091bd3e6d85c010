//! The registry of every `TOPOPLAN_*` environment variable topoplan reads.
//!
//! Each variable is declared once in [`registry`] as a [`Param`]: its name, [`Kind`] (type and
//! allowed range or choices), default, [`Scope`] and a one-line doc. Code reads a variable only
//! through its `Param`; `tests/params_registry.rs` scans the sources and fails on any
//! `TOPOPLAN_*` name that is not declared here (and on any declaration no source reads), and
//! `topoplan env` prints the table with current values.
//!
//! # Reading a variable
//!
//! ```
//! use params::{CHANNELS, TIMEOUT};
//! # std::env::remove_var("TOPOPLAN_TIMEOUT");
//! // Strict: a bad value is an error naming the variable, the value and what was expected.
//! let t: std::time::Duration = TIMEOUT.duration().unwrap().unwrap(); // unset: the default
//! assert_eq!(t.as_secs(), 600);
//! // The same, from any lookup function (tests, a config file, a captured environment):
//! let get = |k: &str| (k == "TOPOPLAN_CHANNELS").then(|| "0".to_string());
//! let e = CHANNELS.u64_from(&get).unwrap_err();
//! assert!(e.to_string().contains("TOPOPLAN_CHANNELS=\"0\""), "{e}");
//! ```
//!
//! | accessor | kinds | returns |
//! |---|---|---|
//! | [`Param::flag`] | [`Kind::Flag`] | `bool` (`1/true/yes/on`, `0/false/no/off`) |
//! | [`Param::u64`] / [`Param::u32`] | [`Kind::UInt`], [`Kind::Size`] | the number as written (KiB for a KiB size) |
//! | [`Param::bytes`] | [`Kind::Size`] | the size in bytes |
//! | [`Param::f64`] | [`Kind::Decimal`] | the number |
//! | [`Param::duration`] | [`Kind::Duration`] | `600`, `30s`, `500ms`, `10m`, `1h` |
//! | [`Param::choice`] | [`Kind::Choice`] | the canonical spelling of the chosen word (case-insensitive match) |
//! | [`Param::string`] / [`Param::path`] | any | the raw text |
//!
//! Every accessor returns `Result<Option<T>, ParamError>` (`flag`: `Result<bool, _>`): `Ok(None)`
//! when the variable is unset (or empty) and its [`Default`] is [`Default::Auto`] (the code
//! decides), the declared default when it is [`Default::Value`]. Each has a `_from(&get)` twin
//! that reads through a lookup function instead of the process environment, and an `_or_warn`
//! twin (and `_or_warn_from`) for code with no error path (kernel launch settings cached in a `OnceLock`): it prints
//! one warning per variable on stderr and uses the default for an unparsable value, the nearest
//! bound for an out-of-range one. Accessors read the environment on every call; callers that
//! read often cache the result.
//!
//! # Misspellings
//!
//! [`unknown_in_env`] lists `TOPOPLAN_*` variables that are set but not declared, each with the
//! nearest declared name by edit distance; [`warn_unknown_once`] prints them once per process
//! (the runtime calls it when it reads its configuration, the CLI at start).
//!
//! # Adding a variable
//!
//! Add a `pub const` to `registry.rs`, list it in [`ALL`], and a row to `docs/environment.md`
//! (a test checks the doc lists every variable).

mod lenient;
mod parse;
pub mod registry;
mod unknown;

pub use parse::{parse_duration, parse_flag};
pub use registry::*;
pub use unknown::{
    edit_distance, suggest, unknown_among, unknown_in_env, warn_unknown_once, Unknown,
};

use std::path::PathBuf;
use std::time::Duration;

/// Every declared variable starts with this.
pub const PREFIX: &str = "TOPOPLAN_";

/// The unit a [`Kind::Size`] is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    KiB,
    MiB,
}

impl Unit {
    pub fn shift(self) -> u32 {
        match self {
            Unit::Bytes => 0,
            Unit::KiB => 10,
            Unit::MiB => 20,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::KiB => "KiB",
            Unit::MiB => "MiB",
        }
    }
}

/// A variable's type and the values it accepts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// On or off: `1/true/yes/on`, `0/false/no/off`.
    Flag,
    /// An unsigned integer in `min..=max`.
    UInt { min: u64, max: u64 },
    /// A decimal number in `min..=max`.
    Decimal { min: f64, max: f64 },
    /// A duration: `600` (seconds), `30s`, `500ms`, `10m`, `1h`.
    Duration,
    /// A size: an integer count of `unit`, in `min..=max` of that unit.
    Size { unit: Unit, min: u64, max: u64 },
    /// Free text (validated, if at all, by the code that uses it).
    Text,
    /// A file or directory path.
    Path,
    /// One of these words (matched case-insensitively).
    Choice(&'static [&'static str]),
}

impl Kind {
    /// The type column of `topoplan env`: `uint 1..=64`, `size MiB 1..=1024`, `one of a|b`.
    pub fn describe(&self) -> String {
        match self {
            Kind::Flag => "flag 0|1".into(),
            Kind::UInt { min, max } => format!("uint {min}..={max}"),
            Kind::Decimal { min, max } => format!("decimal {min}..={max}"),
            Kind::Duration => "duration".into(),
            Kind::Size { unit, min, max } => format!("size {} {min}..={max}", unit.name()),
            Kind::Text => "text".into(),
            Kind::Path => "path".into(),
            Kind::Choice(c) => format!("one of {}", c.join("|")),
        }
    }

    /// What a value must look like, for error messages.
    fn expected(&self) -> String {
        match self {
            Kind::Flag => "0 or 1 (also true/false, yes/no, on/off)".into(),
            Kind::UInt { min, max } => format!("an integer from {min} to {max}"),
            Kind::Decimal { min, max } => format!("a number from {min} to {max}"),
            Kind::Duration => "a duration like 600, 30s, 500ms or 10m".into(),
            Kind::Size { unit, min, max } => {
                format!("a whole number of {} from {min} to {max}", unit.name())
            }
            Kind::Text => "text".into(),
            Kind::Path => "a path".into(),
            Kind::Choice(c) => format!("one of {}", c.join(", ")),
        }
    }
}

/// What an unset variable means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Default {
    /// This value, written as a user would write it.
    Value(&'static str),
    /// No value: the code decides; the text says how (`"planner's choice"`).
    Auto(&'static str),
}

/// Who sets a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A user setting.
    User,
    /// A diagnostic or tuning knob for measuring the library itself.
    Tuning,
    /// Set by topoplan's own launchers and tests for their child processes, not by users.
    Internal,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Tuning => "tuning",
            Scope::Internal => "internal",
        }
    }
}

/// One declared `TOPOPLAN_*` variable.
#[derive(Debug, PartialEq)]
pub struct Param {
    pub name: &'static str,
    pub kind: Kind,
    pub default: Default,
    pub scope: Scope,
    /// One line: what it does.
    pub doc: &'static str,
}

/// A parsed value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Flag(bool),
    /// A [`Kind::UInt`] or a [`Kind::Size`] in its unit.
    UInt(u64),
    Decimal(f64),
    Duration(Duration),
    Text(String),
    Path(PathBuf),
    /// The canonical spelling from the choice list.
    Choice(&'static str),
}

/// A variable's value is not what its declaration accepts.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ParamError {
    #[error("{name}={value:?}: expected {expected}")]
    Invalid {
        name: &'static str,
        value: String,
        expected: String,
    },
    #[error("{name}={value:?} is out of range: expected {expected}")]
    OutOfRange {
        name: &'static str,
        value: String,
        expected: String,
    },
    /// The code asked for a type the declaration does not have (a bug, caught by tests).
    #[error("{name} is declared as {kind}, read as {asked}")]
    WrongKind {
        name: &'static str,
        kind: String,
        asked: &'static str,
    },
}

/// The lookup function the `_from` accessors take.
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

fn env_lookup(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

/// The declared variable called `name`.
pub fn find(name: &str) -> Option<&'static Param> {
    ALL.iter().copied().find(|p| p.name == name)
}

impl Param {
    /// The name without `TOPOPLAN_`.
    pub fn short_name(&self) -> &'static str {
        self.name.strip_prefix(PREFIX).unwrap_or(self.name)
    }

    /// The raw text from the process environment; `None` when unset or empty.
    pub fn raw(&self) -> Option<String> {
        self.raw_from(&env_lookup)
    }

    /// The raw text from `get`; `None` when unset or empty.
    pub fn raw_from(&self, get: Lookup) -> Option<String> {
        get(self.name).filter(|v| !v.trim().is_empty())
    }

    /// Whether the variable is set (to anything non-empty) in the process environment.
    pub fn is_set(&self) -> bool {
        self.raw().is_some()
    }

    /// Validates `raw` against the declaration.
    pub fn parse(&self, raw: &str) -> Result<Value, ParamError> {
        let invalid = || ParamError::Invalid {
            name: self.name,
            value: raw.to_string(),
            expected: self.kind.expected(),
        };
        let range = |v: u64, min: u64, max: u64| {
            if (min..=max).contains(&v) {
                Ok(Value::UInt(v))
            } else {
                Err(ParamError::OutOfRange {
                    name: self.name,
                    value: raw.to_string(),
                    expected: self.kind.expected(),
                })
            }
        };
        let t = raw.trim();
        match self.kind {
            Kind::Flag => parse_flag(t).map(Value::Flag).ok_or_else(invalid),
            Kind::UInt { min, max } | Kind::Size { min, max, .. } => {
                range(t.parse().map_err(|_| invalid())?, min, max)
            }
            Kind::Decimal { min, max } => {
                let v: f64 = t.parse().map_err(|_| invalid())?;
                if !v.is_finite() {
                    return Err(invalid());
                }
                if v < min || v > max {
                    return Err(ParamError::OutOfRange {
                        name: self.name,
                        value: raw.to_string(),
                        expected: self.kind.expected(),
                    });
                }
                Ok(Value::Decimal(v))
            }
            Kind::Duration => parse_duration(t).map(Value::Duration).ok_or_else(invalid),
            Kind::Text => Ok(Value::Text(raw.to_string())),
            Kind::Path => Ok(Value::Path(PathBuf::from(raw))),
            Kind::Choice(c) => c
                .iter()
                .find(|w| w.eq_ignore_ascii_case(t))
                .map(|w| Value::Choice(w))
                .ok_or_else(invalid),
        }
    }

    /// The value from `get`, or the declared default; `None` when unset with an `Auto` default.
    pub fn value_from(&self, get: Lookup) -> Result<Option<Value>, ParamError> {
        match (self.raw_from(get), self.default) {
            (Some(v), _) => self.parse(&v).map(Some),
            (None, Default::Value(d)) => self.parse(d).map(Some),
            (None, Default::Auto(_)) => Ok(None),
        }
    }

    /// The value from the process environment, or the declared default.
    pub fn value(&self) -> Result<Option<Value>, ParamError> {
        self.value_from(&env_lookup)
    }

    fn wrong(&self, asked: &'static str) -> ParamError {
        ParamError::WrongKind {
            name: self.name,
            kind: self.kind.describe(),
            asked,
        }
    }

    pub fn flag_from(&self, get: Lookup) -> Result<bool, ParamError> {
        match self.value_from(get)? {
            Some(Value::Flag(b)) => Ok(b),
            None => Ok(false),
            _ => Err(self.wrong("flag")),
        }
    }
    pub fn flag(&self) -> Result<bool, ParamError> {
        self.flag_from(&env_lookup)
    }

    pub fn u64_from(&self, get: Lookup) -> Result<Option<u64>, ParamError> {
        match self.value_from(get)? {
            Some(Value::UInt(v)) => Ok(Some(v)),
            None => Ok(None),
            _ => Err(self.wrong("u64")),
        }
    }
    pub fn u64(&self) -> Result<Option<u64>, ParamError> {
        self.u64_from(&env_lookup)
    }

    pub fn u32_from(&self, get: Lookup) -> Result<Option<u32>, ParamError> {
        self.u64_from(get)?
            .map(|v| u32::try_from(v).map_err(|_| self.wrong("u32")))
            .transpose()
    }
    pub fn u32(&self) -> Result<Option<u32>, ParamError> {
        self.u32_from(&env_lookup)
    }

    /// A [`Kind::Size`] in bytes.
    pub fn bytes_from(&self, get: Lookup) -> Result<Option<u64>, ParamError> {
        let Kind::Size { unit, .. } = self.kind else {
            return Err(self.wrong("bytes"));
        };
        Ok(self.u64_from(get)?.map(|v| v << unit.shift()))
    }
    pub fn bytes(&self) -> Result<Option<u64>, ParamError> {
        self.bytes_from(&env_lookup)
    }

    pub fn f64_from(&self, get: Lookup) -> Result<Option<f64>, ParamError> {
        match self.value_from(get)? {
            Some(Value::Decimal(v)) => Ok(Some(v)),
            None => Ok(None),
            _ => Err(self.wrong("f64")),
        }
    }
    pub fn f64(&self) -> Result<Option<f64>, ParamError> {
        self.f64_from(&env_lookup)
    }

    pub fn duration_from(&self, get: Lookup) -> Result<Option<Duration>, ParamError> {
        match self.value_from(get)? {
            Some(Value::Duration(v)) => Ok(Some(v)),
            None => Ok(None),
            _ => Err(self.wrong("duration")),
        }
    }
    pub fn duration(&self) -> Result<Option<Duration>, ParamError> {
        self.duration_from(&env_lookup)
    }

    pub fn choice_from(&self, get: Lookup) -> Result<Option<&'static str>, ParamError> {
        match self.value_from(get)? {
            Some(Value::Choice(v)) => Ok(Some(v)),
            None => Ok(None),
            _ => Err(self.wrong("choice")),
        }
    }
    pub fn choice(&self) -> Result<Option<&'static str>, ParamError> {
        self.choice_from(&env_lookup)
    }

    /// The raw text (after validation for kinds that validate), or the default's text.
    pub fn string_from(&self, get: Lookup) -> Result<Option<String>, ParamError> {
        match self.raw_from(get) {
            Some(v) => self.parse(&v).map(|_| Some(v)),
            None => Ok(match self.default {
                Default::Value(d) => Some(d.to_string()),
                Default::Auto(_) => None,
            }),
        }
    }
    pub fn string(&self) -> Result<Option<String>, ParamError> {
        self.string_from(&env_lookup)
    }

    pub fn path_from(&self, get: Lookup) -> Result<Option<PathBuf>, ParamError> {
        Ok(self.string_from(get)?.map(PathBuf::from))
    }
    pub fn path(&self) -> Result<Option<PathBuf>, ParamError> {
        self.path_from(&env_lookup)
    }
}

#[cfg(test)]
mod tests;
