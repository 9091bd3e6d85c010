//! The `params` registry is complete and nothing bypasses it: every `TOPOPLAN_*` name in the
//! tree's sources is declared, every declaration is read somewhere, no source reads a
//! `TOPOPLAN_*` variable straight from the environment, `topoplan env` lists every variable,
//! and `docs/environment.md` holds the table generated from the registry.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const EXTENSIONS: &[&str] = &["rs", "cu", "sh", "py"];
/// Build outputs and other repositories' files, not ours to scan.
const SKIP_DIRS: &[&str] = &["target", ".git", "node_modules", ".devbin"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !SKIP_DIRS.contains(&name.as_str()) {
                sources(&p, out);
            }
        } else if p
            .extension()
            .is_some_and(|x| EXTENSIONS.contains(&x.to_string_lossy().as_ref()))
        {
            out.push(p);
        }
    }
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Every `TOPOPLAN_[A-Z0-9_]+` token of `text` with its line, except prefixes (`TOPOPLAN_DIRECT_*`
/// in prose ends with `_`) and longer identifiers that merely contain the prefix.
fn tokens(text: &str) -> Vec<(usize, String)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(params::PREFIX).map(|i| i + from) {
        let mut j = i + params::PREFIX.len();
        while j < b.len() && (b[j].is_ascii_uppercase() || b[j].is_ascii_digit() || b[j] == b'_') {
            j += 1;
        }
        let standalone = (i == 0 || !is_ident(b[i - 1])) && (j == b.len() || !is_ident(b[j]));
        let name = &text[i..j];
        if standalone && name.len() > params::PREFIX.len() && !name.ends_with('_') {
            out.push((text[..i].matches('\n').count() + 1, name.to_string()));
        }
        from = j.max(i + 1);
    }
    out
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

/// Whether `text` contains `word` as a whole identifier whose following text satisfies `rest`.
fn has_word_then(text: &str, word: &str, rest: impl Fn(&str) -> bool) -> bool {
    let b = text.as_bytes();
    text.match_indices(word).any(|(i, _)| {
        let j = i + word.len();
        (i == 0 || !is_ident(b[i - 1])) && rest(&text[j..])
    })
}

/// Whether `text` (a Rust file outside `params/`) reads the declaration `p`: through
/// `params::NAME`, through `NAME.` after a glob import of `params`, or by its literal name.
fn reads(text: &str, p: &params::Param) -> bool {
    let short = p.short_name();
    text.contains(&format!("params::{short}"))
        || (text.contains("use params::*")
            && has_word_then(text, short, |r| r.trim_start().starts_with('.')))
        || text.contains(&format!("\"{}\"", p.name))
}

#[test]
fn every_topoplan_name_in_the_sources_is_declared_and_every_declaration_is_read() {
    let mut files = Vec::new();
    sources(&root(), &mut files);
    files.sort();
    assert!(
        files.iter().any(|f| rel(f) == "runtime/src/config.rs"),
        "the scan found no sources under {}",
        root().display()
    );
    let retired: BTreeSet<&str> = params::RETIRED.iter().map(|r| r.0).collect();
    let mut undeclared: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut direct_reads = Vec::new();
    let mut read: BTreeSet<&str> = BTreeSet::new();
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        let in_params = rel(f).starts_with("params/");
        for (line, name) in tokens(&text) {
            let known = params::find(&name).is_some() || (in_params && retired.contains(&*name));
            if !known {
                undeclared
                    .entry(name)
                    .or_default()
                    .push(format!("{}:{line}", rel(f)));
            }
        }
        if in_params {
            continue;
        }
        if f.extension().is_some_and(|x| x == "sh") {
            // A shell script reads a variable as `$NAME` or `${NAME...}`.
            for p in params::ALL {
                if has_word_then(&text, &format!("${}", p.name), |r| {
                    !r.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                }) || text.contains(&format!("${{{}", p.name))
                {
                    read.insert(p.name);
                }
            }
            continue;
        }
        if f.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        for pat in ["env::var(\"TOPOPLAN_", "env::var_os(\"TOPOPLAN_"] {
            for (i, _) in text.match_indices(pat) {
                let line = text[..i].matches('\n').count() + 1;
                direct_reads.push(format!("{}:{line}", rel(f)));
            }
        }
        for p in params::ALL {
            if reads(&text, p) {
                read.insert(p.name);
            }
        }
    }
    let report: Vec<String> = undeclared
        .iter()
        .map(|(n, at)| {
            let hint =
                params::suggest(n).map_or(String::new(), |s| format!(" (did you mean {s}?)"));
            format!("  {n}{hint}: {}", at.join(", "))
        })
        .collect();
    assert!(
        report.is_empty(),
        "TOPOPLAN_* names in the sources that params/src/registry.rs does not declare \
         (declare them, or remove the stale mention):\n{}",
        report.join("\n")
    );
    assert!(
        direct_reads.is_empty(),
        "read these through the params registry (params::NAME.flag()/.u64()/...), not \
         std::env: {}",
        direct_reads.join(", ")
    );
    let unread: Vec<&str> = params::ALL
        .iter()
        .map(|p| p.name)
        .filter(|n| !read.contains(n))
        .collect();
    assert!(
        unread.is_empty(),
        "declared in params/src/registry.rs but read by no source (remove them, or move them \
         to params::RETIRED): {unread:?}"
    );
}

#[test]
fn the_scanner_sees_what_it_must() {
    let t = tokens("a TOPOPLAN_TIMEOUT=3 `TOPOPLAN_DIRECT_*` X_TOPOPLAN_NO\nTOPOPLAN_PLAN.");
    assert_eq!(
        t,
        vec![
            (1, "TOPOPLAN_TIMEOUT".to_string()),
            (2, "TOPOPLAN_PLAN".to_string())
        ]
    );
    assert!(reads("use params::*; TIMEOUT.duration()", &params::TIMEOUT));
    assert!(!reads(
        "use params::*; MY_TIMEOUT.duration()",
        &params::TIMEOUT
    ));
    assert!(reads("params::TIMEOUT.duration()", &params::TIMEOUT));
}

/// The registry's constants are named after their variables (`TIMEOUT` is `TOPOPLAN_TIMEOUT`),
/// which [`reads`] relies on.
#[test]
fn constants_are_named_after_their_variables() {
    let text = std::fs::read_to_string(root().join("params/src/registry.rs")).unwrap();
    let mut n = 0;
    for (i, _) in text.match_indices("pub const ") {
        let rest = &text[i + "pub const ".len()..];
        let ident = &rest[..rest.find(':').unwrap()];
        let name_at = rest.find("name: \"").unwrap() + "name: \"".len();
        let name = &rest[name_at..name_at + rest[name_at..].find('"').unwrap()];
        assert_eq!(format!("TOPOPLAN_{ident}"), name);
        n += 1;
    }
    assert_eq!(
        n,
        params::ALL.len(),
        "a const missing from params::ALL, or the reverse"
    );
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The table of `docs/environment.md`, generated from the registry.
fn table() -> String {
    let mut t = String::from(
        "| variable | scope | type | default | what it does |\n|---|---|---|---|---|\n",
    );
    for p in params::ALL {
        let default = match p.default {
            params::Default::Value(v) => format!("`{v}`"),
            params::Default::Auto(how) => md_cell(how),
        };
        t += &format!(
            "| `{}` | {} | {} | {} | {} |\n",
            p.name,
            p.scope.name(),
            md_cell(&p.kind.describe()),
            default,
            md_cell(p.doc)
        );
    }
    t += "\nRetired (no longer read; setting one gets a warning that says what happens now):\n\n";
    t += "| variable | what happens now |\n|---|---|\n";
    for (name, now) in params::RETIRED {
        t += &format!("| `{name}` | {} |\n", md_cell(now));
    }
    t
}

const START: &str =
    "<!-- generated from params/src/registry.rs by tests/params_registry.rs: start -->\n";
const END: &str = "<!-- generated: end -->\n";

#[test]
fn docs_environment_md_holds_the_registry_table() {
    let path = root().join("docs/environment.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (a, b) = (doc.find(START), doc.find(END));
    let (Some(a), Some(b)) = (a, b) else {
        panic!("docs/environment.md lacks the generated-table markers");
    };
    let current = &doc[a + START.len()..b];
    let want = table();
    if current != want {
        // `BLESS=1 cargo test --test params_registry` rewrites the table.
        if std::env::var_os("BLESS").is_some() {
            let new = format!("{}{START}{want}{}", &doc[..a], &doc[b..]);
            std::fs::write(&path, new).unwrap();
            return;
        }
        panic!(
            "docs/environment.md's table is not the registry's; run \
             `BLESS=1 cargo test --test params_registry` to regenerate it. Expected:\n{want}"
        );
    }
}

#[test]
fn topoplan_env_lists_every_variable() {
    let typo = format!("{}TIMEOUTT", params::PREFIX);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .args(["env", "--json"])
        .env("TOPOPLAN_TIMEOUT", "45s")
        .env("TOPOPLAN_CHANNELS", "0")
        .env(&typo, "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["variables"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    let declared: Vec<&str> = params::ALL.iter().map(|p| p.name).collect();
    assert_eq!(names, declared);
    let row = |n: &str| rows.iter().find(|r| r["name"] == n).unwrap();
    assert_eq!(row("TOPOPLAN_TIMEOUT")["value"], "45s");
    assert!(row("TOPOPLAN_TIMEOUT")["error"].is_null());
    assert!(row("TOPOPLAN_CHANNELS")["error"]
        .as_str()
        .unwrap()
        .contains("out of range"));
    assert_eq!(v["unknown"][0]["name"], typo.as_str());
    assert_eq!(v["unknown"][0]["suggestion"], "TOPOPLAN_TIMEOUT");

    // --check fails (exit 2) on the bad value and the misspelling, and names both.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .args(["env", "--check", "--set"])
        .env("TOPOPLAN_CHANNELS", "0")
        .env(&typo, "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("TOPOPLAN_CHANNELS") && text.contains("did you mean TOPOPLAN_TIMEOUT?"),
        "{text}"
    );
}

#[test]
fn other_subcommands_warn_once_about_a_misspelt_variable() {
    let typo = format!("{}TIMEOUTT", params::PREFIX);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .args(["topo", "show", "/nonexistent-topology.xml"])
        .env(&typo, "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches(&format!(
            "{typo} is set but topoplan reads no such variable (did you mean TOPOPLAN_TIMEOUT?)"
        ))
        .count(),
        1,
        "{err}"
    );
}
