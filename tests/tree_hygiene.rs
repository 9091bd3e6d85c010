//! The tree speaks of the product's present: no development-process words in sources and docs, a
//! few documented device scripts, measurements named by date and what they measured, and every
//! measurement a doc or test cites present (or cited at a commit).

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Files under `dir` (recursively), skipping build outputs, git data and fuzz corpora.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !matches!(
                name.as_str(),
                "target" | ".git" | "corpus" | "artifacts" | ".devbin"
            ) {
                files(&p, out);
            }
        } else {
            out.push(p);
        }
    }
}

fn tree() -> Vec<PathBuf> {
    let mut v = Vec::new();
    files(Path::new(ROOT), &mut v);
    v
}

fn rel(p: &Path) -> String {
    p.strip_prefix(ROOT).unwrap_or(p).display().to_string()
}

/// The word for a development sitting, spelt so that this file does not match itself.
fn word() -> String {
    ["ses", "sion"].concat()
}

/// `word` followed by an optional space and a digit, case-insensitive: (line, excerpt) of each.
fn numbered_mentions(text: &str) -> Vec<(usize, String)> {
    let w = word();
    let mut hits = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lower = line.to_lowercase();
        let mut from = 0;
        while let Some(k) = lower[from..].find(&w) {
            let at = from + k + w.len();
            let rest = lower[at..].strip_prefix(' ').unwrap_or(&lower[at..]);
            if rest.starts_with(|c: char| c.is_ascii_digit()) {
                hits.push((i + 1, line.trim().chars().take(100).collect()));
            }
            from = at;
        }
    }
    hits
}

#[test]
fn the_finder_sees_what_it_must() {
    let w = word();
    assert_eq!(numbered_mentions(&format!("as in {w} 12, then")).len(), 1);
    assert_eq!(
        numbered_mentions(&format!("{}15's run", w.to_uppercase())).len(),
        1
    );
    assert!(numbered_mentions(&format!("the rendezvous {w}'s files")).is_empty());
}

#[test]
fn sources_and_docs_carry_no_development_history() {
    let mut bad = Vec::new();
    for p in tree() {
        let r = rel(&p);
        if r.to_lowercase().contains(&word()) {
            bad.push(format!("{r}: the path names a development {}", word()));
        }
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !matches!(ext, "rs" | "md" | "sh" | "cu" | "toml") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        for (line, s) in numbered_mentions(&text) {
            bad.push(format!("{r}:{line}: {s}"));
        }
    }
    assert!(
        bad.is_empty(),
        "development history in the tree:\n{}",
        bad.join("\n")
    );
}

#[test]
fn device_scripts_are_few_and_say_how_to_use_them() {
    let dir = Path::new(ROOT).join("scripts/device");
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    scripts.sort();
    assert!(
        scripts.len() <= 6,
        "scripts/device holds {} files: {:?}",
        scripts.len(),
        scripts.iter().map(|p| rel(p)).collect::<Vec<_>>()
    );
    assert!(scripts.iter().any(|p| p.ends_with("env.sh")));
    for p in &scripts {
        let text = std::fs::read_to_string(p).unwrap();
        let header: String = text
            .lines()
            .skip_while(|l| l.starts_with("#!"))
            .take_while(|l| l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(header.lines().count() >= 3, "{}: no header comment", rel(p));
        if !p.ends_with("env.sh") {
            for must in ["Usage:", "Outputs:", "$OUT", "env.sh"] {
                assert!(
                    text.contains(must),
                    "{}: the header or body lacks `{must}`",
                    rel(p)
                );
            }
        }
        if let Ok(out) = std::process::Command::new("bash").arg("-n").arg(p).output() {
            assert!(
                out.status.success(),
                "{}: {}",
                rel(p),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let env = std::fs::read_to_string(dir.join("env.sh")).unwrap();
    assert!(
        env.contains("NCCL_NVLS_ENABLE=0"),
        "env.sh must keep NVLink multicast off"
    );
}

#[test]
fn measurements_are_named_by_date_and_what_they_measured() {
    let dir = Path::new(ROOT).join("docs/measurements");
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(
            e.path().is_dir(),
            "docs/measurements/{name}: runs are folders"
        );
        let b = name.as_bytes();
        let dated = b.len() > 11
            && b[..10].iter().enumerate().all(|(i, c)| {
                if i == 4 || i == 7 {
                    *c == b'-'
                } else {
                    c.is_ascii_digit()
                }
            })
            && b[10] == b'-';
        assert!(dated, "docs/measurements/{name}: not YYYY-MM-DD-what");
        let readme = std::fs::read_to_string(e.path().join("README.md"))
            .unwrap_or_else(|_| panic!("docs/measurements/{name}: no README.md"));
        assert!(
            readme.contains("commit") && readme.contains("script"),
            "docs/measurements/{name}/README.md names neither script nor commit"
        );
    }
}

#[test]
fn every_cited_measurement_exists() {
    let key = "docs/measurements/";
    let mut missing = Vec::new();
    for p in tree() {
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !matches!(ext, "rs" | "md" | "sh") || rel(&p).starts_with(key) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            let mut from = 0;
            while let Some(k) = line[from..].find(key) {
                let start = from + k;
                let cited: String = line[start..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || "/._-".contains(*c))
                    .collect();
                from = start + cited.len().max(1);
                let cited = cited.trim_end_matches(['.', '/']);
                let rest = &line[from..];
                // A placeholder, or a file removed from the tree and cited at its commit.
                if cited.len() <= key.len()
                    || cited.contains("DATE")
                    || rest
                        .trim_start_matches('`')
                        .trim_start()
                        .starts_with("at commit")
                {
                    continue;
                }
                if !Path::new(ROOT).join(cited).exists() {
                    missing.push(format!("{}:{}: {cited}", rel(&p), i + 1));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "cited but absent:\n{}",
        missing.join("\n")
    );
}
