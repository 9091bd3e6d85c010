//! The NCCL model has one home: no other source file defines its constants or rewrites its
//! tables.

use std::path::{Path, PathBuf};

/// Rust sources of the workspace, skipping build outputs, git data and this module.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            let skip = matches!(name.as_str(), "target" | ".git" | "corpus" | "artifacts")
                || p.ends_with("planner/src/tuner/nccl");
            if !skip {
                sources(&p, out);
            }
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

/// Each of NCCL's constants: its name (a definition is `const NAME:` or `fn name(`), and a
/// stretch of its values as they would be written out again.
const CONSTANTS: &[(&str, &str)] = &[
    ("const BASE_LAT:", "6.8, 14.0, 8.4"),
    ("const HW_LAT:", "0.6, 1.25, 4.0"),
    ("const LL_MAX: [[", "87.7, 22.5, 19.0"),
    ("const PER_CH_RING_LL128:", "73.4, 34.6, 73.4"),
    ("const PER_CH_TREE_LL128:", "55.6, 31.67, 20.0"),
    ("const PER_CH_TREE:", "38.7, 41.4, 36.0"),
    (
        "const TREE_CORRECTION:",
        "0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4",
    ),
    ("const MAX_THREADS:", "[512, 640, 512]"),
    ("const THREAD_THRESHOLD:", "[8, 8, 64]"),
    ("const SIMPLE_STEP_BYTES:", "const SIMPLE_STEP_BYTES:"),
    ("const LL_CHUNK_BYTES:", "const LL_CHUNK_BYTES:"),
    ("const LL128_CHUNK_BYTES:", "576_000"),
    ("const P2P_NVL_CHUNK_BYTES:", "const P2P_NVL_CHUNK_BYTES:"),
    ("const P2P_LL_THRESHOLD:", "const P2P_LL_THRESHOLD:"),
    ("const MAX_P2P_CHANNELS:", "const MAX_P2P_CHANNELS:"),
    ("fn cc_idx(", "fn cc_idx("),
    ("fn nodes_idx(", "fn nodes_idx("),
    ("fn ll_max_bw(", "fn ll_max_bw("),
    (
        "fn search_speeds(",
        "60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0",
    ),
    ("fn tree_correction(", "fn tree_correction("),
];

#[test]
fn each_nccl_constant_is_defined_once() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(
        files.len() > 50,
        "the walk found only {} sources",
        files.len()
    );
    let mut seconds = Vec::new();
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for (name, values) in CONSTANTS {
            for needle in [*name, *values] {
                if text.contains(needle) {
                    seconds.push(format!("{}: {needle}", f.display()));
                }
            }
        }
    }
    assert!(
        seconds.is_empty(),
        "NCCL's model is defined in planner/src/tuner/nccl/ only; found again in:\n{}",
        seconds.join("\n")
    );
}

#[test]
fn the_list_names_what_the_module_defines() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tuner/nccl");
    let text: String = ["mod.rs", "rules.rs"]
        .iter()
        .map(|f| std::fs::read_to_string(here.join(f)).unwrap())
        .collect();
    for (name, values) in CONSTANTS {
        assert!(text.contains(name), "{name} is not defined in the module");
        assert!(text.contains(values), "{values} is not in the module");
    }
}
