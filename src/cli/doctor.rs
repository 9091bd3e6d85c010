//! `topoplan doctor`: explains why a machine's collectives are slow or a job hangs. It reads the
//! environment, an `NCCL_DEBUG=INFO` log, nccl-tests output, sysfs and the topology, runs the
//! checks in `doctor/checks/`, and reports findings (severity, evidence, cost, fix) most severe
//! first. Exit status: 0 healthy, 1 findings, 2 bad input.

use super::error::{CliError, CliResult};
use std::path::PathBuf;

pub mod checks;
pub mod cost;
pub mod env;
pub mod finding;
pub mod input;
mod measure;
pub mod nccl_graph;
pub mod nccl_log;
pub mod nccl_tests;
pub mod sysfs;

use checks::Inputs;
use finding::{Report, Summary};

#[derive(clap::Args, Debug)]
#[command(after_help = "EXAMPLES:
  topoplan doctor                                    # this machine, this shell's environment
  NCCL_DEBUG=INFO torchrun ... 2>&1 | topoplan doctor --nccl-log -
  topoplan doctor --nccl-log job.log --env job.env --topo topo.xml
  topoplan doctor --nccl-tests all_reduce.txt --topo topo.xml --json
  topoplan doctor --nccl-graph graph.xml --topo topo.xml # NCCL's graph and topology dumps
  topoplan doctor --measure                          # a short bench against NCCL on the local GPUs

INPUTS: the environment (NCCL_*, TORCH_NCCL_*, CUDA_VISIBLE_DEVICES, RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, SLURM_*, OMPI_COMM_WORLD_*) of this process, or of a
job with --env FILE (KEY=VALUE lines, as `env` prints them); an NCCL_DEBUG=INFO log
(NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING,ENV shows most); nccl-tests output; NCCL's graph dump;
sysfs (PCIe links, ACS, IOMMU, NUMA, interfaces, RDMA devices); the topology (--topo, else the
local machine as `topoplan detect` reads it) to price each finding with the planner.

OUTPUT: findings sorted most severe first (ERROR, WARNING, INFO), each with its evidence
(file:line, VAR=value (source), a sysfs path or a measurement), its cost and the fix. NCCL lines
the parser does not know are counted as \"not understood\" and never become findings. Every check
is described in docs/doctor.md.

EXIT STATUS: 0 healthy (INFO notes at most), 1 findings, 2 bad input (unreadable, binary or cut
files; the error names file and line).")]
pub struct Args {
    /// NCCL_DEBUG=INFO output of the job (`-` reads standard input).
    #[arg(long = "nccl-log", value_name = "FILE")]
    pub nccl_log: Option<PathBuf>,
    /// nccl-tests output files (all_reduce_perf and friends).
    #[arg(long = "nccl-tests", value_name = "FILE", num_args = 1..)]
    pub nccl_tests: Vec<PathBuf>,
    /// NCCL's graph dump (NCCL_GRAPH_DUMP_FILE): the rings and trees its search found.
    #[arg(long = "nccl-graph", value_name = "FILE")]
    pub nccl_graph: Option<PathBuf>,
    /// The job's environment as KEY=VALUE lines, instead of this process's environment.
    #[arg(long = "env", value_name = "FILE")]
    pub env: Option<PathBuf>,
    /// The machine's topology (NCCL_TOPO_DUMP_FILE XML or topoplan JSON) for cost predictions.
    #[arg(long = "topo", value_name = "FILE")]
    pub topo: Option<PathBuf>,
    /// GPU model for skeleton topology files.
    #[arg(long, visible_alias = "gpu", value_name = "MODEL")]
    pub gpu_model: Option<String>,
    /// Root of the sysfs tree to read.
    #[arg(long = "sysfs", value_name = "DIR", default_value = "/sys")]
    pub sysfs: PathBuf,
    /// Read no sysfs (checks of links, ACS, IOMMU, NUMA and interfaces are skipped).
    #[arg(long)]
    pub no_sysfs: bool,
    /// Do not probe the local GPUs when --topo is absent (costs are then priced only from the log).
    #[arg(long)]
    pub no_detect: bool,
    /// Also run a short bench of a few sizes with NCCL on the local GPUs.
    #[arg(long)]
    pub measure: bool,
    /// GPUs for --measure (default: all visible, at most 8).
    #[arg(long, value_name = "N")]
    pub ngpus: Option<usize>,
    /// Print JSON instead of the report.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> CliResult {
    let stdin_uses = [a.nccl_log.as_ref(), a.env.as_ref(), a.nccl_graph.as_ref()]
        .into_iter()
        .flatten()
        .chain(a.nccl_tests.iter())
        .filter(|p| p.as_os_str() == "-")
        .count();
    if stdin_uses > 1 {
        return Err(CliError::input(
            "only one input can be read from standard input (-)",
        ));
    }
    let mut summary = Summary::default();
    let mut inputs = read_inputs(&a, &mut summary)?;
    inputs.machine = machine(&a, &mut summary)?;
    if a.measure {
        match measure::run(&a) {
            Ok(r) => {
                summary
                    .inputs
                    .push(format!("measurement: {} ({} sizes)", r.file, r.rows.len()));
                inputs.tests.push(r);
            }
            Err(why) => summary.notes.push(format!("--measure: {why}")),
        }
    }
    for v in checks::perf::verdicts(&inputs) {
        summary.notes.push(format!("measured: {}", v.line()));
    }
    let report = Report::new(summary, checks::run_all(&inputs));
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(CliError::failure)?
        );
    } else {
        print!("{}", report.text());
    }
    use std::io::Write;
    std::io::stdout().flush().ok();
    if report.exit_code() != 0 {
        // Findings are the command's answer, already printed: exit 1 without an error line.
        std::process::exit(report.exit_code());
    }
    Ok(())
}

/// The inputs named on the command line (the environment always, this process's by default),
/// each described in `summary`.
fn read_inputs(a: &Args, summary: &mut Summary) -> Result<Inputs, CliError> {
    let mut inputs = Inputs::default();
    inputs.env = match &a.env {
        Some(p) => {
            let t = input::read_maybe_empty(p)?;
            summary.inputs.push(format!("environment from {}", t.name));
            env::Env::parse(&t)?
        }
        None => {
            summary.inputs.push("environment of this process".into());
            env::Env::from_process()
        }
    };
    if let Some(p) = &a.nccl_log {
        let t = input::read(p)?;
        let log = nccl_log::parse(&t)?;
        summary.inputs.push(format!(
            "NCCL log {} ({} lines: {} NCCL lines understood, {} not understood, {} other)",
            log.file,
            log.lines,
            log.understood,
            log.not_understood.len(),
            log.other
        ));
        describe_log(&log, summary);
        inputs.log = Some(log);
    }
    for p in &a.nccl_tests {
        let t = input::read(p)?;
        let r = nccl_tests::parse(&t)?;
        summary.inputs.push(format!(
            "nccl-tests {} ({}, {} ranks, {} sizes)",
            r.file,
            r.collective.as_deref().unwrap_or("collective unknown"),
            r.nranks,
            r.rows.len()
        ));
        inputs.tests.push(r);
    }
    if let Some(p) = &a.nccl_graph {
        let t = input::read(p)?;
        let g = nccl_graph::parse(&t)?;
        summary
            .inputs
            .push(format!("NCCL graph dump {} ({} graphs)", t.name, g.len()));
        inputs.graph_dump = Some((t.name, g));
    }
    if !a.no_sysfs {
        let s = sysfs::Sysfs::read(&a.sysfs);
        summary.inputs.push(format!(
            "sysfs {} ({} PCI devices, {} GPUs, {} interfaces, {} RDMA devices)",
            a.sysfs.display(),
            s.pci.len(),
            s.gpus().count(),
            s.nets.len(),
            s.ib.len()
        ));
        inputs.sys = Some(s);
    }
    Ok(inputs)
}

/// The topology: --topo, else the local GPUs as `detect` reads them (unless --no-detect).
fn machine(a: &Args, summary: &mut Summary) -> Result<Option<cost::Machine>, CliError> {
    if let Some(p) = &a.topo {
        let t = super::common::load_topology(p, a.gpu_model.clone())?;
        let m = cost::Machine::new(p.display().to_string(), t).map_err(CliError::input)?;
        summary
            .inputs
            .push(format!("topology {} ({} GPUs)", m.source, m.nranks()));
        return Ok(Some(m));
    }
    if a.no_detect {
        return Ok(None);
    }
    if !cuda::device::driver_present() {
        summary
            .notes
            .push("no CUDA driver here and no --topo: costs come from the log's own numbers where it has them".into());
        return Ok(None);
    }
    let probed = gpubench::detect::probe()
        .map_err(|e| e.to_string())
        .and_then(|m| {
            let xml = m.to_xml();
            planner::topology::load_str(&xml, "detected.xml", &Default::default())
                .map_err(|e| e.to_string())
        })
        .and_then(|l| cost::Machine::new("the detected topology".into(), l.topology));
    match probed {
        Ok(m) => {
            summary.inputs.push(format!(
                "topology of this machine, detected ({} GPUs)",
                m.nranks()
            ));
            Ok(Some(m))
        }
        Err(e) => {
            summary
                .notes
                .push(format!("topology detection failed ({e}); pass --topo"));
            Ok(None)
        }
    }
}

/// The log's facts worth a line of the report's head.
fn describe_log(log: &nccl_log::NcclLog, s: &mut Summary) {
    if let Some(v) = &log.version {
        let known = v.text.starts_with("2.28");
        s.notes.push(format!(
            "NCCL {} ({}){}",
            v.text,
            log.cite(v.line),
            if known { "" } else { ": read with NCCL 2.28's wording; lines worded otherwise are counted as not understood" }
        ));
    }
    if let (Some(r), Some(n)) = (log.nranks(), log.nnodes()) {
        s.notes.push(format!("{r} ranks on {n} node(s)"));
    }
    if !log.transports.is_empty() {
        let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
        for t in &log.transports {
            *kinds
                .entry(format!("{}/{}", t.transport, t.detail))
                .or_default() += 1;
        }
        let k: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} via {k}")).collect();
        s.notes
            .push(format!("channel connections: {}", k.join(", ")));
    }
    if let Some(&(c, p, _)) = log.coll_channels.first() {
        s.notes
            .push(format!("{c} collective channels, {p} p2p channels"));
    }
    if let Some(t) = log.init_timings.iter().map(|t| t.1).reduce(f64::max) {
        s.notes.push(format!("init took {t:.2} s (slowest rank)"));
    }
    s.not_understood = log.not_understood.len();
    s.not_understood_samples = log
        .not_understood_samples
        .iter()
        .map(|n| format!("{}: {}", log.cite(n.line), n.text))
        .collect();
}
