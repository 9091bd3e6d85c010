//! `topoplan topo`: show, convert and scale topology files.

use super::error::{CliError, CliResult};
use clap::Subcommand;
use planner::topology::{self, doc::ClusterDoc, gpus, LoadOptions, Loaded, TopoError};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Inputs are NCCL topology XML (what NCCL_TOPO_DUMP_FILE writes and NCCL_TOPO_FILE reads, including \
cloud skeleton files) or topoplan's JSON form (docs/topology-json.md); the format is chosen by the \
file extension, else by the content.\n\n\
Examples:\n  topoplan topo show examples/h200x2-topo.xml\n  \
topoplan topo show azure-ndv5-topo.xml --gpu-model h100-sxm\n  \
topoplan topo convert dump.xml -o machine.json\n  \
topoplan topo scale machine.json --nodes 128 --fabric rail --nic-gbps 400 -o cluster.json"
)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

/// Options for reading skeleton files, shared by every subcommand.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ReadOpts {
    /// GPU model for skeleton files (cloud NCCL_TOPO_FILEs without `<gpu>` elements), e.g.
    /// h100-sxm, h200-sxm, h800, a100-sxm, v100-sxm. Without it the model is taken from the
    /// GPUs' PCI device ids when known, else h100-sxm; a warning says what was assumed.
    #[arg(long = "gpu-model", visible_alias = "gpu", value_name = "MODEL")]
    pub gpu: Option<String>,
    /// Speed of skeleton NICs in Gbit/s (default: per GPU model, e.g. 400 for H100).
    #[arg(long = "skeleton-nic-gbps", value_name = "GBIT")]
    pub skeleton_nic_gbps: Option<f64>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Summary of a topology plus its GPU×GPU and GPU×NIC path matrices (NCCL path types, GB/s).
    #[command(after_help = "EXAMPLES:
  topoplan topo show examples/h200x2-topo.xml
  topoplan topo show azure-ndv5-topo.xml --gpu-model h100-sxm   # a skeleton file
  topoplan topo show cluster.json --json")]
    Show {
        /// Topology file: NCCL topology XML (.xml) or topoplan JSON (.json).
        file: PathBuf,
        /// Print the report as JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        read: ReadOpts,
    },
    /// Convert between NCCL XML and topoplan JSON (format from the output extension).
    #[command(after_help = "EXAMPLES:
  topoplan topo convert dump.xml -o machine.json
  topoplan topo convert machine.json -o machine.xml
  topoplan topo convert azure-ndv5-topo.xml -o ndv5.json --gpu-model h100-sxm")]
    Convert {
        /// Topology file to read: NCCL topology XML or topoplan JSON.
        input: PathBuf,
        /// Output file, .json or .xml.
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        read: ReadOpts,
    },
    /// Build a cluster (JSON) from one machine's file, for capacity planning.
    #[command(after_help = "EXAMPLES:
  topoplan topo scale machine.json --nodes 128 --fabric rail --nic-gbps 400 -o cluster.json
  topoplan topo scale dump.xml --nodes 64 --fabric switch --nic-gbps 200 -o c.json
  topoplan topo scale dump.xml --nodes 512 --fabric fat-tree --nic-gbps 400 --oversubscription 2 -o ft.json")]
    Scale {
        /// One machine's topology: NCCL topology XML or topoplan JSON.
        file: PathBuf,
        /// Number of machines.
        #[arg(long)]
        nodes: u32,
        /// switch: one switch for all NICs; rail: NIC i of every node on leaf i; fat-tree: two
        /// levels, --hosts-per-leaf nodes per leaf.
        #[arg(long, value_parser = ["switch", "rail", "fat-tree"])]
        fabric: String,
        /// NIC port speed in Gbit/s (e.g. 400 for NDR InfiniBand); every NIC is set to it.
        #[arg(long, value_name = "GBIT")]
        nic_gbps: f64,
        /// Leaf uplink oversubscription, down:up (fat-tree only); 1 = non-blocking.
        #[arg(long, default_value_t = 1.0)]
        oversubscription: f64,
        /// Nodes per leaf switch (fat-tree only; default 32 / NICs per node).
        #[arg(long)]
        hosts_per_leaf: Option<u32>,
        /// Latency of one switch hop in µs.
        #[arg(long, default_value_t = topology::doc::DEFAULT_SWITCH_LAT_US)]
        switch_lat_us: f64,
        /// Output JSON file.
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        read: ReadOpts,
    },
}

/// Maps a topology error to the CLI convention: bad input exits 2.
pub fn topo_error(e: TopoError) -> CliError {
    CliError::input(e)
}

/// Loads a topology file for any subcommand, printing warnings to stderr. Bad input → exit 2.
pub fn load(path: &Path, read: &ReadOpts) -> Result<Loaded, CliError> {
    if let Some(g) = &read.gpu {
        if gpus::find_model(g).is_none() {
            return Err(CliError::input(format!(
                "--gpu-model {g}: unknown GPU model; known models: {}",
                gpus::model_names()
            )));
        }
    }
    let opts = LoadOptions {
        gpu_model: read.gpu.clone(),
        nic_gbps: read.skeleton_nic_gbps,
    };
    let loaded = topology::load_file(path, &opts).map_err(topo_error)?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    Ok(loaded)
}

fn write_out(path: &Path, text: &str) -> CliResult {
    super::common::write_output(path, text)
}

fn is_json(path: &Path) -> Result<bool, CliError> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
    {
        Some(e) if e == "json" => Ok(true),
        Some(e) if e == "xml" => Ok(false),
        _ => Err(CliError::input(format!(
            "{}: output format unknown: name the file .json or .xml",
            path.display()
        ))),
    }
}

pub fn run(args: Args) -> CliResult {
    match args.cmd {
        Cmd::Show { file, json, read } => {
            let l = load(&file, &read)?;
            let r = topology::report::report(&l.topology);
            if json {
                let s = serde_json::to_string_pretty(&r)
                    .map_err(|e| CliError::failure(format!("cannot encode report: {e}")))?;
                println!("{s}");
            } else {
                print!(
                    "{}",
                    topology::report::render(&r, &file.display().to_string())
                );
            }
            Ok(())
        }
        Cmd::Convert {
            input,
            output,
            read,
        } => {
            let json = is_json(&output)?;
            let l = load(&input, &read)?;
            let text = if json {
                topology::write_json(&l.doc)
            } else {
                if l.doc.assume.is_some() {
                    eprintln!(
                        "warning: the skeleton assumptions (GPU model, NIC speed) have no place in \
                         NCCL XML and are not written; pass --gpu-model again when reading the output"
                    );
                }
                topology::write_xml(&l.doc).map_err(topo_error)?
            };
            write_out(&output, &text)?;
            eprintln!(
                "wrote {} ({} GPUs, {} host{})",
                output.display(),
                l.topology.n_ranks(),
                l.topology.n_hosts,
                if l.topology.n_hosts == 1 { "" } else { "s" }
            );
            Ok(())
        }
        Cmd::Scale {
            file,
            nodes,
            fabric,
            nic_gbps,
            oversubscription,
            hosts_per_leaf,
            switch_lat_us,
            output,
            read,
        } => {
            if !is_json(&output)? {
                return Err(CliError::input(
                    "a cluster can only be written as JSON: NCCL's topology XML describes one \
                     machine (name the output .json)",
                ));
            }
            let l = load(&file, &read)?;
            let cluster = ClusterDoc {
                nodes,
                fabric,
                nic_gbps,
                oversubscription,
                hosts_per_leaf,
                switch_lat_us,
            };
            let mut doc = topology::scale_doc(&l.doc, cluster).map_err(topo_error)?;
            // Build it once so a bad request fails here, not when the file is next read.
            let mut warnings = Vec::new();
            let name = output.display().to_string();
            let t = topology::topology_of(&mut doc, &name, &LoadOptions::default(), &mut warnings)
                .map_err(topo_error)?;
            write_out(&output, &topology::write_json(&doc))?;
            eprintln!(
                "wrote {}: {} nodes × {} GPUs = {} ranks, {} NIC ports",
                output.display(),
                t.n_hosts,
                t.gpus_of_host(0).len(),
                t.n_ranks(),
                t.nics_of_host(0).len() * t.n_hosts as usize
            );
            Ok(())
        }
    }
}
