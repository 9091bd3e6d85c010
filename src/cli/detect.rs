//! `topoplan detect`: writes the local machine's topology as NCCL XML and topoplan JSON.

use super::error::{CliError, CliResult};
use gpubench::detect;
use planner::topology::{load_file, load_str, same_topology, write_json, LoadOptions};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Probes CUDA device attributes (GPUs, PCI ids, compute capability), NVML when the driver \
provides libnvidia-ml.so.1 (NVLink state and peers) and sysfs (PCI class and link, NICs, CPU), and writes what \
NCCL_TOPO_DUMP_FILE would: `topoplan plan detected.xml` then plans for this machine.\n\n\
Example: topoplan detect -o machine.xml --json machine.json --compare nccl_dump.xml"
)]
pub struct Args {
    /// Where to write the NCCL XML (default: standard output).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Also write topoplan's JSON form here.
    #[arg(long = "json")]
    pub json: Option<PathBuf>,
    /// Compare with a topology file (e.g. NCCL's own dump): exit 1 when they differ.
    #[arg(long = "compare")]
    pub compare: Option<PathBuf>,
}

pub fn run(a: Args) -> CliResult {
    if !cuda::device::driver_present() {
        return Err(CliError::failure(
            "no CUDA driver on this machine (libcuda.so not found): nothing to detect",
        ));
    }
    let m = detect::probe().map_err(CliError::failure)?;
    let xml = m.to_xml();
    let loaded = load_str(&xml, "detected.xml", &LoadOptions::default())
        .map_err(|e| CliError::failure(format!("the detected topology does not load: {e}")))?;
    match &a.output {
        Some(p) => super::common::write_output(p, &xml)?,
        None => print!("{xml}"),
    }
    if let Some(p) = &a.json {
        super::common::write_output(p, write_json(&loaded.doc))?;
    }
    let links: u32 = m
        .gpus
        .iter()
        .flat_map(|g| g.nvlinks.iter().map(|l| l.1))
        .sum();
    eprintln!(
        "detected {} GPU(s), {} NVLink(s) in all, {} NIC(s)",
        m.gpus.len(),
        links,
        m.nics.len()
    );
    if let Some(p) = &a.compare {
        let other =
            load_file(p, &LoadOptions::default()).map_err(|e| CliError::input(e.to_string()))?;
        if same_topology(&loaded.topology, &other.topology) {
            eprintln!(
                "same topology as {}: GPUs, links and bandwidths agree",
                p.display()
            );
        } else {
            return Err(CliError::failure(format!(
                "detected topology differs from {} ({} GPU(s) here, {} there)",
                p.display(),
                loaded.topology.n_ranks(),
                other.topology.n_ranks()
            )));
        }
    }
    Ok(())
}
