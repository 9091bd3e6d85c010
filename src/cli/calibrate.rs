//! `topoplan calibrate`: fits a machine profile to nccl-tests output files (any collectives) on
//! a topology, writes it, and prints every point's fit error.

use super::error::{CliError, CliResult};
use super::sim::{load_profile, load_topology};
use planner::plan::Planner;
use planner::schedule::CollectiveKind;
use planner::tuner::Profile;
use sim::calibrate::{fit, Curve};
use sim::fidelity::parse_nccl_tests;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
#[command(after_help = "EXAMPLES:
  topoplan calibrate --nccl-tests all_reduce.txt all_gather.txt --topo topo.xml -o my.json
  topoplan sim topo.xml --as nccl --profile my.json

Each file is one nccl-tests run (all_reduce_perf, all_gather_perf, ...; the collective is read
from its '# Collective test starting:' line, else from the file name). The fit moves the launch
floor and, for each protocol NCCL used, the per-step cost, hop latency and per-channel rate of
the simulator's NCCL model (docs/profile.md), starting from --profile (default: the profile the
topology gets). The tuner and runtime sections are kept.")]
pub struct Args {
    /// nccl-tests output files.
    #[arg(long = "nccl-tests", required = true, num_args = 1..)]
    pub nccl_tests: Vec<PathBuf>,
    /// Topology of the machine they ran on (NCCL XML or topoplan JSON).
    #[arg(long)]
    pub topo: PathBuf,
    /// Where to write the profile.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Profile to start from (default: the bundled one if the topology matches, else derived).
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Name of the new profile (default: the output file's stem).
    #[arg(long)]
    pub name: Option<String>,
    /// GPU model for skeleton topology files.
    #[arg(long)]
    pub gpu_model: Option<String>,
}

/// The collective of an nccl-tests file: its header line, else its name.
fn kind_of(path: &std::path::Path, text: &str) -> Result<CollectiveKind, CliError> {
    let from = |s: &str| -> Option<CollectiveKind> {
        let s = s.to_ascii_lowercase();
        [
            ("all_reduce", CollectiveKind::AllReduce),
            ("all_gather", CollectiveKind::AllGather),
            ("reduce_scatter", CollectiveKind::ReduceScatter),
            ("alltoall", CollectiveKind::AllToAll),
            ("sendrecv", CollectiveKind::SendRecv),
            ("broadcast", CollectiveKind::Broadcast),
            ("reduce", CollectiveKind::Reduce),
        ]
        .into_iter()
        .find(|(k, _)| s.contains(k))
        .map(|x| x.1)
    };
    text.lines()
        .find_map(|l| l.split("Collective test starting:").nth(1).and_then(from))
        .or_else(|| path.file_name().and_then(|n| n.to_str()).and_then(from))
        .ok_or_else(|| {
            CliError::input(format!(
                "{}: no '# Collective test starting:' line and no collective in the file name",
                path.display()
            ))
        })
}

pub fn run(a: Args) -> CliResult {
    let topo = load_topology(&a.topo, a.gpu_model.clone())?;
    let given = load_profile(a.profile.as_deref())?;
    let planner = Planner::with_profile(&topo, given).map_err(CliError::input)?;
    let base = planner.profile().clone();
    let start =
        sim::SimParams::from_profile(&base.profile, &base.profile.name).map_err(CliError::input)?;
    let mut curves = Vec::new();
    for f in &a.nccl_tests {
        let text = std::fs::read_to_string(f)
            .map_err(|e| CliError::input(format!("{}: {e}", f.display())))?;
        let kind = kind_of(f, &text)?;
        let points: Vec<(u64, f64)> = parse_nccl_tests(&text)
            .into_iter()
            .filter(|p| p.0 > 0)
            .collect();
        if points.is_empty() {
            return Err(CliError::input(format!(
                "{}: no nccl-tests rows (size count type redop root time ...)",
                f.display()
            )));
        }
        curves.push(Curve { kind, points });
    }
    let r = fit(&topo, &planner, &curves, &start).map_err(CliError::failure)?;
    let mut p: Profile = base.profile.clone();
    p.name = a.name.clone().unwrap_or_else(|| {
        a.output
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("calibrated")
            .to_string()
    });
    p.description = format!(
        "fitted by topoplan calibrate on {} from {} nccl-tests file(s)",
        a.topo.display(),
        a.nccl_tests.len()
    );
    p.measurements = std::iter::once(a.topo.display().to_string())
        .chain(a.nccl_tests.iter().map(|f| f.display().to_string()))
        .collect();
    p.sim = serde_json::to_value(&r.params).map_err(CliError::failure)?;
    // What is written must read back (the schema check of every profile).
    let text = p.to_json();
    Profile::parse(&text, &a.output.display().to_string()).map_err(CliError::failure)?;
    std::fs::write(&a.output, &text)
        .map_err(|e| CliError::failure(format!("{}: {e}", a.output.display())))?;
    println!(
        "# topoplan calibrate: {} point(s) of {} curve(s) on {}; started from {}",
        r.rows.len(),
        curves.len(),
        a.topo.display(),
        base.note()
    );
    println!(
        "#{:>15} {:>12} {:>6} {:>3} {:>12} {:>12} {:>8}",
        "collective", "size(B)", "proto", "ch", "measured(us)", "fitted(us)", "error"
    );
    for (k, x) in &r.rows {
        println!(
            " {:>15} {:>12} {:>6} {:>3} {:>12.2} {:>12.2} {:>+7.1}%",
            k.name(),
            x.bytes,
            x.protocol.name(),
            x.channels,
            x.measured_us,
            x.predicted_us,
            x.error * 100.0
        );
    }
    let worst = r
        .rows
        .iter()
        .map(|x| x.1.error.abs())
        .fold(0.0f64, f64::max);
    println!(
        "# rms error {:.1}% (was {:.1}% with the starting profile), worst {:.1}%; wrote {}",
        r.rms_after * 100.0,
        r.rms_before * 100.0,
        worst * 100.0,
        a.output.display()
    );
    Ok(())
}
