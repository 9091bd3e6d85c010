//! `topoplan env`: every `TOPOPLAN_*` variable of the `params` registry with its type, default,
//! current value and doc, and the `TOPOPLAN_*` variables set here that topoplan does not read.

use super::error::{CliError, CliResult};
use params::{Default, Lookup, Scope, Unknown, ALL};
use serde::Serialize;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Lists every TOPOPLAN_* environment variable topoplan reads: its type and allowed range or \
choices, its default, its value in this environment (or `unset`) and what it does. Values that do not parse or \
are out of range are marked INVALID; TOPOPLAN_* variables that are set but that topoplan does not read (usually \
misspellings) are listed after the table with the nearest real name, and retired ones with what happens now.\n\n\
Scopes: `user` settings; `tuning` knobs and diagnostics for measuring the library itself (their defaults are \
the measured best); `internal` variables that topoplan's own launchers and tests set for their child processes. \
docs/environment.md has the same table.\n\n\
Exit status: 0; with --check, 2 when a set value is invalid or a TOPOPLAN_* variable is unknown.\n\n\
Examples:\n  topoplan env\n  topoplan env --set\n  TOPOPLAN_TIMEOUT=30s topoplan env --json | jq '.variables[] | select(.value != null)'\n  \
topoplan env --check   # in a job script, before the real run"
)]
pub struct Args {
    /// Print JSON: {"variables": [{name, type, default, auto, scope, doc, value, error}],
    /// "unknown": [{name, suggestion, retired}]} (`default` null: the code decides, as `auto` says).
    #[arg(long)]
    pub json: bool,
    /// Only the variables that are set in this environment.
    #[arg(long)]
    pub set: bool,
    /// Exit 2 if a set value is invalid or an unknown TOPOPLAN_* variable is set.
    #[arg(long)]
    pub check: bool,
}

/// One row: a declared variable and its state in the environment.
#[derive(Serialize, Debug)]
pub struct Row {
    pub name: &'static str,
    #[serde(rename = "type")]
    pub kind: String,
    /// The value used when unset; `None` when the code decides (see `auto`).
    pub default: Option<&'static str>,
    /// How the code decides when there is no default value.
    pub auto: Option<&'static str>,
    pub scope: &'static str,
    pub doc: &'static str,
    /// The raw value, `None` when unset or empty.
    pub value: Option<String>,
    /// Why the value is rejected, if it is.
    pub error: Option<String>,
}

#[derive(Serialize, Debug)]
pub struct UnknownRow {
    pub name: String,
    pub suggestion: Option<&'static str>,
    /// Set for a variable topoplan no longer reads: what happens now.
    pub retired: Option<&'static str>,
}

#[derive(Serialize, Debug)]
pub struct Report {
    pub variables: Vec<Row>,
    pub unknown: Vec<UnknownRow>,
}

fn default_text(v: &Row) -> String {
    match (v.default, v.auto) {
        (Some(d), _) => d.to_string(),
        (None, how) => format!("({})", how.unwrap_or("auto")),
    }
}

/// The report for the variables `get` returns and the names `set` of the environment.
pub fn report(get: Lookup, set: &[String]) -> Report {
    let variables = ALL
        .iter()
        .map(|p| {
            let value = p.raw_from(get);
            let error = value
                .as_ref()
                .and_then(|v| p.parse(v).err())
                .map(|e| e.to_string());
            Row {
                name: p.name,
                kind: p.kind.describe(),
                default: match p.default {
                    Default::Value(d) => Some(d),
                    Default::Auto(_) => None,
                },
                auto: match p.default {
                    Default::Value(_) => None,
                    Default::Auto(how) => Some(how),
                },
                scope: p.scope.name(),
                doc: p.doc,
                value,
                error,
            }
        })
        .collect();
    let unknown = params::unknown_among(set)
        .into_iter()
        .map(
            |Unknown {
                 name,
                 suggestion,
                 retired,
             }| UnknownRow {
                name,
                suggestion,
                retired,
            },
        )
        .collect();
    Report { variables, unknown }
}

fn print_table(r: &Report, only_set: bool) {
    let rows: Vec<&Row> = r
        .variables
        .iter()
        .filter(|v| !only_set || v.value.is_some())
        .collect();
    let value = |v: &Row| match (&v.value, &v.error) {
        (None, _) => "unset".to_string(),
        (Some(x), None) => x.clone(),
        (Some(x), Some(_)) => format!("{x} (INVALID)"),
    };
    let wn = rows.iter().map(|v| v.name.len()).max().unwrap_or(0);
    let wv = rows
        .iter()
        .map(|v| value(v).len())
        .max()
        .unwrap_or(0)
        .max(5);
    let wk = rows.iter().map(|v| v.kind.len()).max().unwrap_or(0);
    for scope in [Scope::User, Scope::Tuning, Scope::Internal] {
        let group: Vec<&&Row> = rows.iter().filter(|v| v.scope == scope.name()).collect();
        if group.is_empty() {
            continue;
        }
        println!("# {}", scope.name());
        println!("{:wn$}  {:wv$}  {:wk$}  default", "name", "value", "type");
        for v in group {
            println!(
                "{:wn$}  {:wv$}  {:wk$}  {}",
                v.name,
                value(v),
                v.kind,
                default_text(v)
            );
            println!("{:wn$}  {}", "", v.doc);
            if let Some(e) = &v.error {
                println!("{:wn$}  INVALID: {e}", "");
            }
        }
        println!();
    }
    if only_set && rows.is_empty() {
        println!("no declared TOPOPLAN_* variable is set");
    }
    for u in &r.unknown {
        match (u.retired, u.suggestion) {
            (Some(now), _) => println!("RETIRED {}: set, but no longer read: {now}", u.name),
            (None, s) => {
                let hint = s.map_or(String::new(), |s| format!(" (did you mean {s}?)"));
                println!(
                    "UNKNOWN {}: set, but topoplan reads no such variable{hint}",
                    u.name
                );
            }
        }
    }
}

/// Refuses invalid values of set TOPOPLAN_* variables, as `env --check` does: every subcommand
/// calls this first, so a value is never ignored silently where it would be read.
pub fn check_values() -> CliResult {
    let bad: Vec<String> = params::ALL
        .iter()
        .filter(|p| p.is_set())
        .filter_map(|p| p.value().err().map(|e| e.to_string()))
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(CliError::input(format!(
        "{} (`topoplan env --check` lists every variable)",
        bad.join("; ")
    )))
}

pub fn run(a: Args) -> CliResult {
    let set: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .collect();
    let r = report(&|k| std::env::var(k).ok(), &set);
    if a.json {
        let s = serde_json::to_string_pretty(&r).map_err(CliError::failure)?;
        println!("{s}");
    } else {
        print_table(&r, a.set);
    }
    let invalid = r.variables.iter().filter(|v| v.error.is_some()).count();
    if a.check && (invalid > 0 || !r.unknown.is_empty()) {
        return Err(CliError::input(format!(
            "{invalid} invalid value(s), {} unknown TOPOPLAN_* variable(s)",
            r.unknown.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_marks_bad_values_and_misspellings() {
        let get = |k: &str| match k {
            "TOPOPLAN_TIMEOUT" => Some("30s".to_string()),
            "TOPOPLAN_CHANNELS" => Some("0".to_string()),
            _ => None,
        };
        let set = [
            "TOPOPLAN_TIMEOUT",
            "TOPOPLAN_CHANNELS",
            // Built at run time: tests/params_registry.rs rejects undeclared names in the sources.
            &format!("{}CHANELS", params::PREFIX),
            "HOME",
        ]
        .map(String::from);
        let r = report(&get, &set);
        assert_eq!(r.variables.len(), ALL.len());
        let row = |n: &str| r.variables.iter().find(|v| v.name == n).unwrap();
        assert_eq!(row("TOPOPLAN_TIMEOUT").value.as_deref(), Some("30s"));
        assert_eq!(row("TOPOPLAN_TIMEOUT").error, None);
        assert!(row("TOPOPLAN_CHANNELS")
            .error
            .as_ref()
            .unwrap()
            .contains("out of range"));
        assert_eq!(row("TOPOPLAN_PLAN").value, None);
        assert_eq!(r.unknown.len(), 1);
        assert_eq!(r.unknown[0].suggestion, Some("TOPOPLAN_CHANNELS"));
    }
}
