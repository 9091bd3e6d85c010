//! `topoplan verify`: proves schedules compute their collective without deadlock, double
//! counting, races or slot overruns (symbolic execution, `sim::verify`).

use super::common::{collective, load_topology};
use super::error::{CliError, CliResult};
use planner::plan::Planner;
use planner::schedule::{msccl, CollectiveKind, Schedule};
use serde_json::Value;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
#[command(after_help = "EXAMPLES:
  topoplan verify tests/data/topologies/h200x2-topo.xml   # every planned schedule
  topoplan plan topo.xml --json > plan.json && topoplan verify plan.json
  topoplan verify schedule.json                             # one schedule (IR JSON)
  topoplan verify allreduce.xml                             # an MSCCL-IR file
  topoplan verify topo.xml --gpus 0,2,5                     # the schedules of a 3-GPU communicator

FILE may be a topology (NCCL XML or topoplan JSON: every collective is planned at every size
from 8 B to 4 GiB and each distinct schedule the tuner picks, plus every other algorithm it can
build, is verified), a plan from `topoplan plan --json` (its schedules), a schedule in the IR's
JSON form (or a JSON array of them), or an MSCCL-IR XML file (<algo> root).

Each schedule is executed symbolically: every chunk carries the set of ranks it sums; a reduction
that counts a rank twice, a final buffer that differs from the collective's definition, a receive
with no matching send, a wait cycle (deadlock, including a sender blocked on full slots) or two
channels touching one buffer chunk unordered is reported with the ranks, channel and ops.

Exit status: 0 every schedule verifies, 1 a counter-example was found, 2 bad input.")]
pub struct Args {
    /// Topology, plan JSON, schedule JSON or MSCCL-IR XML.
    pub file: PathBuf,
    /// Only these collectives (comma list) when FILE is a topology. Default: all.
    #[arg(short = 'c', long = "collective", value_delimiter = ',')]
    pub collective: Vec<String>,
    /// GPU model for skeleton topology files.
    #[arg(long, visible_alias = "gpu", value_name = "MODEL")]
    pub gpu_model: Option<String>,
    /// Print one JSON object per schedule instead of text.
    #[arg(long)]
    pub json: bool,
    /// With a topology: plan a communicator over these GPUs only (comma list of ranks).
    #[arg(long, value_name = "LIST")]
    pub gpus: Option<String>,
}

/// Every object in `v` that looks like a schedule (has "version", "nranks" and "ranks").
fn find_schedules(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Object(m) => {
            if m.contains_key("nranks") && m.contains_key("ranks") && m.contains_key("version") {
                out.push(v.clone());
            } else {
                m.values().for_each(|x| find_schedules(x, out));
            }
        }
        Value::Array(a) => a.iter().for_each(|x| find_schedules(x, out)),
        _ => {}
    }
}

/// Schedules named in a JSON text (None: the JSON is not a schedule or plan).
fn schedules_of_json(text: &str, name: &str) -> Result<Option<Vec<Schedule>>, CliError> {
    let v: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Err(CliError::input(format!("{name}: {e}"))),
    };
    let mut found = Vec::new();
    find_schedules(&v, &mut found);
    if found.is_empty() {
        return Ok(None);
    }
    found
        .into_iter()
        .enumerate()
        .map(|(i, x)| {
            serde_json::from_value::<Schedule>(x)
                .map_err(|e| CliError::input(format!("{name}: schedule #{i}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Every schedule the planner would run on the topology: the tuner's choices over the nccl-tests
/// sweep, plus every other buildable (algorithm, protocol).
fn planned(a: &Args) -> Result<Vec<(String, Schedule)>, CliError> {
    let topo = load_topology(&a.file, a.gpu_model.clone())?;
    let topo = super::common::communicator(topo, a.gpus.as_deref())?;
    super::common::check_ranks(topo.n_ranks(), super::common::MAX_VERIFY_RANKS, "verify")?;
    let planner = Planner::new(&topo).map_err(CliError::input)?;
    let n = planner.nranks();
    let kinds: Vec<CollectiveKind> = if a.collective.is_empty() {
        CollectiveKind::ALL.to_vec()
    } else {
        a.collective
            .iter()
            .map(|s| super::common::parse_kind(s))
            .collect::<Result<_, _>>()?
    };
    let mut out = Vec::new();
    for k in kinds {
        let coll = collective(k, n, 0);
        let mut seen: Vec<(String, planner::schedule::Protocol, Option<u32>)> = Vec::new();
        let mut size = 8u64;
        while size <= 4 << 30 {
            for c in planner.candidates(&coll, size) {
                let ch = match c.algorithm {
                    planner::schedule::Algorithm::CopyEnginePipeline
                    | planner::schedule::Algorithm::Direct => None,
                    _ => Some(c.channels),
                };
                let key = (c.algorithm.name(), c.protocol, ch);
                if seen.contains(&key) {
                    continue;
                }
                seen.push(key);
                match planner.schedule(&coll, &c.algorithm, c.protocol, ch) {
                    Ok(s) => out.push((
                        format!(
                            "{} {} {} {}ch",
                            k.name(),
                            c.algorithm.name(),
                            c.protocol.name(),
                            s.channels
                        ),
                        s,
                    )),
                    Err(e) => {
                        return Err(CliError::failure(format!(
                            "{} {} {}: the planner could not build it: {e}",
                            k.name(),
                            c.algorithm.name(),
                            c.protocol.name()
                        )))
                    }
                }
            }
            size *= 4;
        }
    }
    Ok(out)
}

pub fn run(a: Args) -> CliResult {
    let name = a.file.display().to_string();
    let text = super::common::read_text(&a.file)?;
    let trimmed = text.trim_start();
    let schedules: Vec<(String, Schedule)> = if trimmed.starts_with('<') && text.contains("<algo") {
        let s = msccl::import(&text, &name).map_err(CliError::input)?;
        vec![(format!("{name} (MSCCL-IR)"), s)]
    } else if trimmed.starts_with('{') || trimmed.starts_with('[') {
        match schedules_of_json(&text, &name)? {
            Some(v) => v
                .into_iter()
                .enumerate()
                .map(|(i, s)| {
                    (
                        format!(
                            "#{i} {} {} {} {}ch",
                            s.collective.kind.name(),
                            s.algorithm.name(),
                            s.protocol.name(),
                            s.channels
                        ),
                        s,
                    )
                })
                .collect(),
            None => planned(&a)?,
        }
    } else {
        planned(&a)?
    };
    let mut failed = 0usize;
    let mut too_large = 0usize;
    for (label, s) in &schedules {
        let r = sim::verify(s);
        // A schedule past the verifier's state limit is not a counter-example: it is reported
        // apart and exits 2 (the input is too large for the check), never 1.
        if matches!(r, Err(sim::verify::VerifyError::TooLarge(..))) {
            too_large += 1;
        }
        if a.json {
            let v = match &r {
                Ok(rep) => serde_json::json!({"schedule": label, "ok": true, "report": rep}),
                Err(e) => {
                    serde_json::json!({"schedule": label, "ok": false, "error": e.to_string()})
                }
            };
            println!("{v}");
        } else {
            match &r {
                Ok(rep) => println!(
                    "ok    {label}: {} ranks, {} ops, {} messages, at most {} of {} slots used{}",
                    rep.nranks,
                    rep.ops_executed,
                    rep.messages,
                    rep.max_slots_used,
                    s.slots,
                    if rep.race_checked
                        || rep.channels < 2
                        || rep.nranks * rep.channels <= sim::verify::RACE_CHECK_LIMIT
                    {
                        ""
                    } else {
                        " (race check skipped: too many programs)"
                    }
                ),
                Err(e @ sim::verify::VerifyError::TooLarge(..)) => {
                    println!("LIMIT {label}: {e}")
                }
                Err(e) => println!("FAIL  {label}: {e}"),
            }
        }
        if r.is_err() {
            failed += 1;
        }
    }
    let failed = failed - too_large;
    if too_large > 0 && failed == 0 {
        return Err(CliError::input(format!(
            "{too_large} of {} schedule(s) are too large to verify (more symbolic state than the verifier's limit); {} verify. Verify a smaller communicator (--gpus) or topology",
            schedules.len(),
            schedules.len() - too_large
        )));
    }
    if failed > 0 {
        return Err(CliError::failure(format!(
            "{failed} of {} schedule(s) do not verify",
            schedules.len()
        )));
    }
    if !a.json {
        println!("all {} schedule(s) verify", schedules.len());
    }
    Ok(())
}
