//! `TOPOPLAN_*` variables set in the environment that the registry does not declare.

use crate::{Param, ALL, PREFIX, RETIRED};
use std::sync::Once;

/// A `TOPOPLAN_*` variable that is set but not declared: most often a misspelling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unknown {
    pub name: String,
    /// The closest declared name, when it is close enough to be a likely misspelling.
    pub suggestion: Option<&'static str>,
    /// For a variable topoplan read once ([`RETIRED`]): what happens now.
    pub retired: Option<&'static str>,
}

impl std::fmt::Display for Unknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(now) = self.retired {
            return write!(
                f,
                "{} is set but topoplan no longer reads it: {now}",
                self.name
            );
        }
        write!(
            f,
            "{} is set but topoplan reads no such variable",
            self.name
        )?;
        if let Some(s) = self.suggestion {
            write!(f, " (did you mean {s}?)")?;
        }
        Ok(())
    }
}

/// Names among `names` that start with `TOPOPLAN_` and are not in [`ALL`], sorted.
pub fn unknown_among<I, S>(names: I) -> Vec<Unknown>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut out: Vec<Unknown> = names
        .into_iter()
        .filter_map(|n| {
            let n = n.as_ref();
            let retired = RETIRED.iter().find(|r| r.0 == n).map(|r| r.1);
            (n.starts_with(PREFIX) && crate::find(n).is_none()).then(|| Unknown {
                name: n.to_string(),
                suggestion: retired.is_none().then(|| suggest(n)).flatten(),
                retired,
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup();
    out
}

/// Undeclared `TOPOPLAN_*` variables of this process's environment.
pub fn unknown_in_env() -> Vec<Unknown> {
    unknown_among(std::env::vars_os().filter_map(|(k, _)| k.into_string().ok()))
}

/// Prints one warning line on stderr per undeclared `TOPOPLAN_*` variable, once per process.
pub fn warn_unknown_once() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for u in unknown_in_env() {
            eprintln!("topoplan: warning: {u}; `topoplan env` lists the variables");
        }
    });
}

/// The declared name nearest to `name` by edit distance, if it is within a third of its length
/// (at least 2 edits): `TIMEOUT` with an extra letter suggests `TOPOPLAN_TIMEOUT`.
pub fn suggest(name: &str) -> Option<&'static str> {
    let tail = name.strip_prefix(PREFIX).unwrap_or(name);
    let (best, d) = ALL
        .iter()
        .map(|p: &&Param| (p.name, edit_distance(tail, p.short_name())))
        .min_by_key(|&(_, d)| d)?;
    (d <= (tail.len() / 3).max(2)).then_some(best)
}

/// Levenshtein distance over bytes, case-insensitive.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<u8> = a.bytes().map(|c| c.to_ascii_uppercase()).collect();
    let b: Vec<u8> = b.bytes().map(|c| c.to_ascii_uppercase()).collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, &ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("TIMEOUT", "timeout"), 0);
    }

    #[test]
    fn misspellings_are_found_and_suggested() {
        // Built at run time: tests/params_registry.rs rejects undeclared names in the sources.
        let (typo, far) = (format!("{PREFIX}TIMEOUTS"), format!("{PREFIX}ZZZZZZZZZZZZ"));
        let u = unknown_among([typo.as_str(), "TOPOPLAN_TIMEOUT", "PATH", far.as_str()]);
        assert_eq!(u.len(), 2, "{u:?}");
        assert_eq!(u[0].name, typo);
        assert_eq!(u[0].suggestion, Some("TOPOPLAN_TIMEOUT"));
        assert!(u[0].to_string().contains("did you mean TOPOPLAN_TIMEOUT?"));
        assert_eq!(u[1].suggestion, None, "{:?}", u[1]);
    }

    #[test]
    fn retired_names_say_what_happens_now() {
        let u = unknown_among(["TOPOPLAN_ONE_FENCE"]);
        assert_eq!(u.len(), 1);
        assert_eq!(u[0].suggestion, None);
        assert!(
            u[0].to_string()
                .contains("no longer reads it: one thread fences"),
            "{}",
            u[0]
        );
        for (name, _) in RETIRED {
            assert!(
                crate::find(name).is_none(),
                "{name} is both declared and retired"
            );
        }
    }
}
