//! `topoplan calibrate`: fits a machine profile to NCCL measurements on a topology, writes it,
//! and prints every point's fit error. The measurements are nccl-tests output files, the NCCL
//! columns of `topoplan bench --json FILE --vs-nccl` files, or a bench sweep run here on the
//! local GPUs (`--measure`), in any combination.

use super::bench::{self, Priced};
use super::common::{load_profile, load_topology};
use super::error::{CliError, CliResult};
use planner::plan::Planner;
use planner::topology::{load_str, LoadOptions, Topology};
use planner::tuner::Profile;
use sim::calibrate::{fit, parse_bench_json, BenchCurve, Curve};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
#[command(after_help = "EXAMPLES:
  topoplan calibrate --nccl-tests all_reduce.txt all_gather.txt --topo topo.xml -o my.json
  topoplan calibrate --bench perf.json --topo topo.xml -o my.json
  topoplan calibrate --measure --save-measurements runs/ -o my.json
  topoplan sim topo.xml --as nccl --profile my.json
  topoplan bench --vs-nccl --profile my.json

Inputs (at least one; they may be combined):
  --nccl-tests: one nccl-tests run per file (all_reduce_perf, all_gather_perf, ...; the
    collective is read from its '# Collective test starting:' line, else from the file name).
    The out-of-place times are fitted, and where NCCL runs LL the in-place times too (there the
    columns differ only by run-to-run noise; above, in-place all-gather skips a copy).
  --bench: files written by `topoplan bench --json FILE --vs-nccl`: each table's NCCL
    out-of-place times become one curve, its collective and GPU count read from the file
    (tables timed under a CUDA graph are left out: nccl-tests launches every call).
  --measure: runs the bench here, on GPUs 0..g: all-reduce and all-gather, 8 B to 1 GiB by 4,
    ours and NCCL on the same buffers (what `topoplan bench -b 8 -e 1G -f 4 --coll
    all-reduce,all-gather --vs-nccl -c 0` runs), then fits NCCL's columns as --bench does.
    It needs a CUDA driver and 2 or more GPUs: NCCL's time on one GPU says nothing about its
    links. --save-measurements DIR keeps what it measured (DIR/bench.json, and DIR/topo.xml
    when the topology was detected), so the profile is stored with its measurements.

Without --topo the local machine's topology is detected (as `topoplan detect` does), which
needs the CUDA driver. The fit moves the launch floor and, for each protocol NCCL used, the
per-step cost and per-channel rate of the simulator's NCCL model (docs/profile.md), and the
size ramp where Simple ran; the per-hop latency too on more than two GPUs (two ranks' one or
two hops cannot be told from the launch floor: their start value stays, the bundled profile's
being NCCL's own per-hop latencies). It starts from --profile (default: the profile the
topology gets). The tuner and runtime sections are kept.")]
pub struct Args {
    /// nccl-tests output files.
    #[arg(long = "nccl-tests", num_args = 1.., value_name = "FILE")]
    pub nccl_tests: Vec<PathBuf>,
    /// `topoplan bench --json FILE --vs-nccl` files (format `topoplan-bench/1`): their NCCL
    /// columns are the measurements.
    #[arg(long = "bench", num_args = 1.., value_name = "FILE")]
    pub bench: Vec<PathBuf>,
    /// Measure here: all-reduce and all-gather, ours and NCCL, 8 B to 1 GiB by 4, on GPUs 0..g.
    #[arg(long = "measure")]
    pub measure: bool,
    /// GPUs --measure runs on (default: all visible, at most 8).
    #[arg(short = 'g', long = "ngpus", requires = "measure")]
    pub ngpus: Option<usize>,
    /// Write what --measure measured into DIR (bench.json; topo.xml when detected).
    #[arg(long = "save-measurements", value_name = "DIR", requires = "measure")]
    pub save_measurements: Option<PathBuf>,
    /// Topology of the machine they ran on (NCCL XML or topoplan JSON; default: detect the
    /// local machine's).
    #[arg(long)]
    pub topo: Option<PathBuf>,
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
    #[arg(long, visible_alias = "gpu", value_name = "MODEL")]
    pub gpu_model: Option<String>,
    /// Write the profile even when its rms fit error exceeds the limit (the profile's
    /// description then says so).
    #[arg(long)]
    pub force: bool,
}

/// Largest rms fit error of a profile written without `--force`: above it the fitted model
/// does not describe the measurements (wrong topology, mixed machines, broken runs).
pub const MAX_RMS_ERROR: f64 = 0.25;

/// An nccl-tests file's curves: out of place, and the in-place times.
struct NcclTestsFile {
    name: String,
    out: Curve,
    in_place: Curve,
    /// The ranks of its "# Rank N ... device" header lines.
    nranks: u32,
}

/// Reads an nccl-tests file with the one strict reader (every time positive and finite).
fn nccl_tests_curve(f: &Path) -> Result<NcclTestsFile, CliError> {
    let name = f.display().to_string();
    let text = super::common::read_text(f)?;
    let run = sim::measurements::nccl_tests::parse(&text, &name).map_err(CliError::input)?;
    let kind = run.kind().map_err(CliError::input)?;
    let out = run.out_of_place();
    if out.is_empty() {
        return Err(CliError::input(format!(
            "{name}: only rows of size 0: nothing to fit"
        )));
    }
    Ok(NcclTestsFile {
        out: Curve { kind, points: out },
        in_place: Curve {
            kind,
            points: run.in_place(),
        },
        nranks: run.nranks,
        name,
    })
}

/// Checks that every nccl-tests run was on the topology's GPU count: the fit simulates NCCL on
/// the topology's ranks, so another count fits a machine that did not run.
fn check_nccl_tests_ranks(files: &[NcclTestsFile], topo: &Topology) -> Result<(), CliError> {
    let n = topo.n_ranks();
    for f in files {
        if f.nranks == 0 {
            return Err(CliError::input(format!(
                "{}: no '# Rank N ... device' lines: cannot tell how many GPUs it ran on (the topology has {n}); keep nccl-tests' header",
                f.name
            )));
        }
        if f.nranks as usize != n {
            return Err(CliError::input(format!(
                "{}: the run was on {} GPU(s) (its '# Rank' lines), the topology has {n}",
                f.name, f.nranks
            )));
        }
    }
    Ok(())
}

/// Checks that every bench table ran on the topology's GPU count (the fit simulates NCCL on
/// the topology's ranks).
fn check_gpus(file: &str, curves: &[BenchCurve], topo: &Topology) -> Result<(), CliError> {
    let n = topo.n_ranks();
    match curves.iter().find(|c| c.ngpus as usize != n) {
        Some(c) => Err(CliError::input(format!(
            "{file}: field `tables[{}].ngpus`: the {} table ran on {} GPU(s), the topology has {n}",
            c.table,
            c.curve.kind.name(),
            c.ngpus
        ))),
        None => Ok(()),
    }
}

/// `--measure`'s preconditions, before any topology detection or sweep: a CUDA driver, and 2 to
/// the visible number of GPUs. Returns the GPU count.
fn measure_gpus(asked: Option<usize>) -> Result<usize, CliError> {
    const WHY: &str = "NCCL's time on one GPU says nothing about its links";
    if !cuda::device::driver_present() {
        return Err(CliError::failure(format!(
            "calibrate --measure: no CUDA driver on this machine (libcuda.so not found): it \
             times NCCL on 2 or more local GPUs ({WHY}); fit recorded runs with --nccl-tests \
             or --bench instead"
        )));
    }
    let visible = gpubench::detect::probe()
        .map_err(|e| CliError::failure(format!("calibrate --measure: cannot list the GPUs: {e}")))?
        .gpus
        .len();
    let n = asked.unwrap_or(visible.min(8));
    if n < 2 {
        let e = format!(
            "calibrate --measure needs 2 or more GPUs ({visible} visible{}): {WHY}",
            asked.map(|g| format!(", -g {g}")).unwrap_or_default()
        );
        return Err(if asked.is_some() && visible >= 2 {
            CliError::input(e)
        } else {
            CliError::failure(e)
        });
    }
    if n > visible {
        return Err(CliError::input(format!(
            "calibrate --measure -g {n}: only {visible} GPU(s) visible"
        )));
    }
    Ok(n)
}

/// The local machine's topology as `topoplan detect` writes it, and its XML.
fn detect_topology(gpu_model: Option<String>) -> Result<(Topology, String), CliError> {
    if !cuda::device::driver_present() {
        return Err(CliError::failure(
            "calibrate: no --topo FILE, and no CUDA driver on this machine (libcuda.so not found) \
             to detect the local topology with: give --topo FILE",
        ));
    }
    let m = gpubench::detect::probe()
        .map_err(|e| CliError::failure(format!("detecting the local topology: {e}")))?;
    let xml = m.to_xml();
    let opts = LoadOptions {
        gpu_model,
        ..Default::default()
    };
    let loaded = load_str(&xml, "detected.xml", &opts)
        .map_err(|e| CliError::failure(format!("the detected topology does not load: {e}")))?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    Ok((loaded.topology, xml))
}

/// What the fit is fitted to, and the sentences the profile and the output say about it.
struct Inputs {
    curves: Vec<Curve>,
    measurements: Vec<String>,
    sources: Vec<String>,
}

pub fn run(a: Args) -> CliResult {
    if a.nccl_tests.is_empty() && a.bench.is_empty() && !a.measure {
        return Err(CliError::input(
            "calibrate needs measurements: --nccl-tests FILE..., --bench FILE... (written by \
             `topoplan bench --json FILE --vs-nccl`) and/or --measure (on the local GPUs)",
        ));
    }
    // Every file is read and checked before a topology is detected or a GPU touched.
    let nccl_tests = a
        .nccl_tests
        .iter()
        .map(|f| nccl_tests_curve(f))
        .collect::<Result<Vec<_>, _>>()?;
    let mut benches = Vec::new();
    for f in &a.bench {
        let c = sim::calibrate::load_bench_json(f).map_err(CliError::input)?;
        benches.push((f.display().to_string(), c));
    }
    let given = load_profile(a.profile.as_deref())?;
    let measure_n = if a.measure {
        Some(measure_gpus(a.ngpus)?)
    } else {
        None
    };
    let (topo, detected_xml, topo_name) = match &a.topo {
        Some(t) => (
            load_topology(t, a.gpu_model.clone())?,
            None,
            t.display().to_string(),
        ),
        None => {
            let (t, xml) = detect_topology(a.gpu_model.clone())?;
            (t, Some(xml), "the detected local topology".to_string())
        }
    };
    check_nccl_tests_ranks(&nccl_tests, &topo)?;
    for (file, c) in &benches {
        check_gpus(file, c, &topo)?;
    }
    if let Some(n) = measure_n.filter(|&n| n != topo.n_ranks()) {
        return Err(CliError::input(format!(
            "calibrate --measure on {n} GPU(s), but {topo_name} has {}: pass -g {} or another --topo",
            topo.n_ranks(),
            topo.n_ranks()
        )));
    }
    let planner = Planner::with_profile(&topo, given).map_err(CliError::input)?;
    let measured_here = match measure_n {
        Some(n) => Some(measure_here(&a, n, detected_xml.as_deref(), &topo)?),
        None => None,
    };
    let inputs = gather(&a, nccl_tests, &benches, measured_here, &topo, &planner);
    fit_and_write(&a, &topo, &planner, &topo_name, inputs)
}

/// `--measure`: the sweep run here, saved with `--save-measurements`, as curves; returns the
/// label it is known by, its curves and the files saved.
fn measure_here(
    a: &Args,
    n: usize,
    detected_xml: Option<&str>,
    topo: &Topology,
) -> Result<(String, Vec<BenchCurve>, Vec<String>), CliError> {
    let priced = Priced::load(a.profile.as_deref())?;
    let report = bench::measure_vs_nccl(n, &priced)?;
    let mut label = format!("--measure ({n} GPUs)");
    let mut saved = Vec::new();
    if let Some(dir) = &a.save_measurements {
        super::common::create_output_dir(dir)?;
        if let Some(xml) = detected_xml {
            let p = dir.join("topo.xml");
            super::common::write_output(&p, xml)?;
            saved.push(p.display().to_string());
        }
        let p = dir.join("bench.json");
        bench::report::save(&report, &p)?;
        label = p.display().to_string();
        saved.push(label.clone());
    }
    let text = serde_json::to_string(&report).map_err(CliError::failure)?;
    let c = parse_bench_json(&text, &label).map_err(CliError::failure)?;
    check_gpus(&label, &c, topo)?;
    Ok((label, c, saved))
}

/// Every curve to fit, the files they came from, and what the profile says of them.
fn gather(
    a: &Args,
    nccl_tests: Vec<NcclTestsFile>,
    benches: &[(String, Vec<BenchCurve>)],
    measured_here: Option<(String, Vec<BenchCurve>, Vec<String>)>,
    topo: &Topology,
    planner: &Planner,
) -> Inputs {
    let mut measurements: Vec<String> = a.topo.iter().map(|t| t.display().to_string()).collect();
    let mut curves = Vec::new();
    let mut in_place = Vec::new();
    for f in nccl_tests {
        curves.push(f.out);
        in_place.push(f.in_place);
    }
    let mut sources = Vec::new();
    if let Some((label, c, saved)) = &measured_here {
        // A detected topology is saved first, as --topo would be listed.
        for s in saved {
            if s.ends_with("topo.xml") {
                measurements.insert(0, s.clone());
            } else {
                measurements.push(s.clone());
            }
        }
        sources.push(format!(
            "NCCL's columns of {} table(s) measured by topoplan calibrate --measure ({})",
            c.len(),
            if a.save_measurements.is_some() {
                format!("saved as {label}")
            } else {
                "not saved".into()
            }
        ));
    }
    measurements.extend(a.nccl_tests.iter().map(|f| f.display().to_string()));
    measurements.extend(a.bench.iter().map(|f| f.display().to_string()));
    let bench_tables: usize = benches.iter().map(|b| b.1.len()).sum();
    for (_, c) in benches.iter() {
        curves.extend(c.iter().map(|b| b.curve.clone()));
    }
    if let Some((_, c, _)) = &measured_here {
        curves.extend(c.iter().map(|b| b.curve.clone()));
    }
    let model = sim::nccl::Model::new(topo, planner);
    let in_place: Vec<Curve> = in_place
        .into_iter()
        .map(|c| sim::calibrate::where_nccl_runs_ll(c, &model))
        .filter(|c| !c.points.is_empty())
        .collect();
    let in_place_points: usize = in_place.iter().map(|c| c.points.len()).sum();
    curves.extend(in_place);
    let mut front = Vec::new();
    if !a.nccl_tests.is_empty() {
        front.push(format!(
            "{} nccl-tests file(s) (out of place; in place too where NCCL runs LL: {in_place_points} point(s), listed last)",
            a.nccl_tests.len()
        ));
    }
    if !a.bench.is_empty() {
        front.push(format!(
            "NCCL's columns of {} table(s) of {} topoplan bench file(s)",
            bench_tables,
            a.bench.len()
        ));
    }
    front.extend(sources);
    Inputs {
        curves,
        measurements,
        sources: front,
    }
}

/// Fits, prints every point, and writes the profile when its rms error is within
/// [`MAX_RMS_ERROR`] (or `--force`, which the profile then records).
fn fit_and_write(
    a: &Args,
    topo: &Topology,
    planner: &Planner,
    topo_name: &str,
    inputs: Inputs,
) -> CliResult {
    let base = planner.profile().clone();
    let start =
        sim::SimParams::from_profile(&base.profile, &base.profile.name).map_err(CliError::input)?;
    let r = fit(topo, planner, &inputs.curves, &start).map_err(CliError::failure)?;
    if !r.rms_after.is_finite() {
        return Err(CliError::failure(
            "the fit's error is not a number: the measurements cannot be fitted; no profile written",
        ));
    }
    let over = r.rms_after > MAX_RMS_ERROR;
    let mut p: Profile = base.profile.clone();
    p.name = a.name.clone().unwrap_or_else(|| {
        a.output
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("calibrated")
            .to_string()
    });
    p.description = format!(
        "fitted by topoplan calibrate on {topo_name} from {}{}",
        inputs.sources.join(", "),
        if over {
            format!(
                "; written with --force although its rms fit error is {:.1}% (limit {:.0}%)",
                r.rms_after * 100.0,
                MAX_RMS_ERROR * 100.0
            )
        } else {
            String::new()
        }
    );
    p.measurements = inputs.measurements.clone();
    p.sim = serde_json::to_value(&r.params).map_err(CliError::failure)?;
    // What is written must read back (the schema check of every profile).
    let text = p.to_json();
    Profile::parse(&text, &a.output.display().to_string()).map_err(CliError::failure)?;
    if over && !a.force {
        print_fit(&r, &inputs, topo_name, &base.note(), None);
        return Err(CliError::failure(format!(
            "the fit's rms error {:.1}% exceeds {:.0}%: the model does not describe these measurements (another machine or GPU count? broken runs?); {} not written (--force writes it anyway)",
            r.rms_after * 100.0,
            MAX_RMS_ERROR * 100.0,
            a.output.display()
        )));
    }
    super::common::write_output(&a.output, &text)?;
    print_fit(
        &r,
        &inputs,
        topo_name,
        &base.note(),
        Some((&a.output, over)),
    );
    Ok(())
}

/// The fit's table; `written` is the file written and whether --force wrote it over the limit.
fn print_fit(
    r: &sim::calibrate::Fit,
    inputs: &Inputs,
    topo_name: &str,
    started_from: &str,
    written: Option<(&PathBuf, bool)>,
) {
    println!(
        "# topoplan calibrate: {} point(s) of {} curve(s) ({}) on {topo_name}; started from {}",
        r.rows.len(),
        inputs.curves.len(),
        inputs.sources.join(", "),
        started_from
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
        "# rms error {:.1}% (was {:.1}% with the starting profile), worst {:.1}%; {}",
        r.rms_after * 100.0,
        r.rms_before * 100.0,
        worst * 100.0,
        match written {
            Some((p, false)) => format!("wrote {}", p.display()),
            Some((p, true)) => format!(
                "wrote {} with --force: over the {:.0}% limit",
                p.display(),
                MAX_RMS_ERROR * 100.0
            ),
            None => "not written".to_string(),
        }
    );
}
