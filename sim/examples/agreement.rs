//! The planner's pick, the tuner's estimate of it and the engine's price on every shipped
//! topology (`docs/fidelity.md`, "Agreement"): `cargo run --release -p sim --example agreement`;
//! `-- FILE...` prices the files given instead (clusters from `topoplan topo scale`); `--every
//! ALGO` prints, instead of the picks, every candidate of that algorithm (ring, tree, ...) at
//! every size, the tuner's estimate beside the engine's price.

use planner::plan::Planner;
use planner::topology::{load_file, LoadOptions};
use sim::price::agreement;
use sim::SimConfig;

fn main() {
    let mut files: Vec<_> = std::fs::read_dir("tests/data/topologies")
        .expect("run from the repository root")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "xml"))
        .filter(|p| !p.to_string_lossy().ends_with("-graph.xml"))
        .collect();
    files.push("examples/h200x2-topo.json".into());
    files.sort();
    // `-- NAME` keeps the topologies whose file name contains NAME; `-- FILE` (an existing
    // file, such as a cluster from `topoplan topo scale`) prices the files given instead;
    // `--every ALGO` takes the word after it.
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let every = args.iter().position(|a| a == "--every").map(|i| {
        let algo = args.get(i + 1).cloned().unwrap_or_default();
        args.drain(i..(i + 2).min(args.len()));
        algo
    });
    let (given, only): (Vec<String>, Vec<String>) = args
        .into_iter()
        .filter(|a| !a.starts_with('-'))
        .partition(|a| std::path::Path::new(a).is_file());
    if !given.is_empty() {
        files = given.into_iter().map(Into::into).collect();
    }
    files.retain(|f| {
        only.is_empty()
            || only
                .iter()
                .any(|o| f.to_string_lossy().contains(o.as_str()))
    });
    let sizes: Vec<u64> = (0..10).map(|i| 8u64 << (3 * i)).collect();
    if let Some(algo) = every {
        return print_every(&files, &algo, &sizes);
    }
    println!("| topology | rows | tuner within 10% | worst tuner error | worst pick regret |");
    println!("|---|---:|---:|---:|---:|");
    for f in files {
        let Some((t, p, cfg)) = planned(&f) else {
            continue;
        };
        let rows = agreement(&t, &p, &cfg, &sizes);
        let ok = rows
            .iter()
            .filter(|r| r.tuner_error().abs() <= 0.10)
            .count();
        let worst = rows
            .iter()
            .max_by(|a, b| a.tuner_error().abs().total_cmp(&b.tuner_error().abs()));
        let regret = rows.iter().map(|r| r.regret()).fold(0.0, f64::max);
        let w = worst.map_or(String::new(), |w| {
            format!(
                "{:+.0}% ({} {} B {} {})",
                100.0 * w.tuner_error(),
                w.kind.name(),
                w.bytes,
                w.algorithm,
                w.protocol.name()
            )
        });
        let name = f
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        println!(
            "| {name} | {} | {ok} | {w} | {:.1}% |",
            rows.len(),
            100.0 * regret
        );
        if std::env::args().any(|a| a == "-v") {
            for r in &rows {
                println!(
                    "  {} {} {} {} x{} picked {:.2} tuner {:.2} ({:+.1}%) best {:?}",
                    r.kind.name(),
                    r.bytes,
                    r.algorithm,
                    r.protocol.name(),
                    r.channels,
                    r.picked_us,
                    r.tuner_us,
                    100.0 * r.tuner_error(),
                    r.best_engine_us
                );
            }
        }
    }
}

/// Every candidate of algorithm `algo` on every file at every size: the tuner's estimate and
/// the engine's price (of the schedule the candidate names), and their difference.
fn print_every(files: &[std::path::PathBuf], algo: &str, sizes: &[u64]) {
    println!("| topology | collective | size (B) | candidate | tuner µs | engine µs | error |");
    println!("|---|---|---:|---|---:|---:|---:|");
    for f in files {
        let Some((t, p, cfg)) = planned(f) else {
            continue;
        };
        let name = f.file_name().unwrap_or_default().to_string_lossy();
        for r in sim::price::candidate_rows(&t, &p, &cfg, algo, sizes) {
            println!(
                "| {name} | {} | {} | {} x{} | {:.2} | {:.2} | {:+.1}% |",
                r.kind.name(),
                r.bytes,
                r.protocol.name(),
                r.channels,
                r.tuner_us,
                r.engine_us,
                100.0 * r.tuner_error()
            );
        }
    }
}

/// The topology at `f`, its planner and the engine's configuration from its profile (`None`
/// where one of them cannot be had: the file is skipped).
fn planned(f: &std::path::Path) -> Option<(planner::topology::Topology, Planner, SimConfig)> {
    let l = load_file(f, &LoadOptions::default()).ok()?;
    let p = Planner::new(&l.topology).ok()?;
    let cfg = SimConfig::from_profile(&p.profile().profile, "profile").ok()?;
    Some((l.topology, p, cfg))
}
