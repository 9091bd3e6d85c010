//! How ranks were launched: duplicate GPUs, RANK / WORLD_SIZE against the launcher and against
//! the ranks that joined NCCL.

use super::Inputs;
use crate::cli::doctor::env::Env;
use crate::cli::doctor::finding::{Finding, Severity};
use crate::cli::doctor::nccl_log::NcclLog;
use std::collections::BTreeMap;

const DEVICE_FIX: &str = "give every process its own GPU: call torch.cuda.set_device(int(os.environ[\"LOCAL_RANK\"])) (or pass device_id to init_process_group) before the first collective, and do not pin every rank to one CUDA_VISIBLE_DEVICES";

/// Two ranks of one communicator on one GPU (NCCL refuses: "Duplicate GPU detected").
pub fn duplicate_gpu(i: &Inputs) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(log) = &i.log {
        let mut ev: Vec<String> = log
            .duplicate_gpu
            .iter()
            .take(3)
            .map(|d| format!("{}: {}", log.cite(d.line), d.text))
            .collect();
        // Init lines: the same (host, bus id, comm) for two ranks.
        let mut seen: BTreeMap<(String, String, String), u32> = BTreeMap::new();
        for x in &log.inits {
            let Some(b) = &x.busid else { continue };
            let key = (
                x.at.host.clone(),
                b.clone(),
                x.comm_id.clone().unwrap_or_default(),
            );
            match seen.get(&key) {
                Some(&r) if r != x.rank => ev.push(format!(
                    "{}: rank {} on busId {b} of host {}, as rank {r}",
                    log.cite(x.at.line),
                    x.rank,
                    x.at.host
                )),
                _ => {
                    seen.insert(key, x.rank);
                }
            }
        }
        if !ev.is_empty() {
            let mut f = Finding::new(
                "duplicate-gpu",
                Severity::Error,
                "two ranks run on the same GPU: NCCL aborts the communicator (ncclInvalidUsage)",
            );
            for e in ev {
                f = f.evidence(e);
            }
            out.push(f.fix(DEVICE_FIX));
        }
    }
    if let Some(v) = i.env.get("CUDA_VISIBLE_DEVICES") {
        let ids: Vec<&str> = v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let mut uniq = ids.clone();
        uniq.sort_unstable();
        uniq.dedup();
        if uniq.len() < ids.len() {
            out.push(
                Finding::new("duplicate-gpu", Severity::Error, "CUDA_VISIBLE_DEVICES lists one GPU twice: two device ordinals are the same GPU")
                    .evidence(i.env.cite("CUDA_VISIBLE_DEVICES"))
                    .fix("list each GPU once"),
            );
        }
    }
    out
}

/// RANK / LOCAL_RANK / WORLD_SIZE inconsistent with each other, with the launcher (Slurm, Open
/// MPI) or with the ranks NCCL saw.
pub fn rank_world(i: &Inputs) -> Vec<Finding> {
    let mut out = rank_vars_among_themselves(&i.env);
    out.extend(rank_vars_against_launcher(&i.env));
    if let Some(log) = &i.log {
        out.extend(rank_vars_against_nccl(&i.env, log));
    }
    out
}

const LAUNCH_FIX: &str = "let one launcher set the rank variables (torchrun or srun, not both by hand); with torchrun under Slurm use one task per node";

/// One rank-world finding: its title, evidence, severity and fix.
fn rank_world_finding(title: String, ev: Vec<String>, sev: Severity, fix: &str) -> Finding {
    let mut f = Finding::new("rank-world", sev, title);
    for x in ev {
        f = f.evidence(x);
    }
    f.fix(fix)
}

/// RANK / LOCAL_RANK / WORLD_SIZE / LOCAL_WORLD_SIZE: integers, ranks inside their sizes, the
/// world a multiple of the node.
fn rank_vars_among_themselves(e: &Env) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut bad = |title: String, ev: Vec<String>, sev: Severity, fix: &str| {
        out.push(rank_world_finding(title, ev, sev, fix));
    };
    let int = |k: &str| e.int(k);
    for k in ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"] {
        if let Some(Err(v)) = int(k) {
            bad(
                format!("{k}={v} is not an integer"),
                vec![e.cite(k)],
                Severity::Error,
                "set it from the launcher, not by hand",
            );
        }
    }
    let ok = |k: &str| int(k).and_then(Result::ok);
    if let (Some(r), Some(w)) = (ok("RANK"), ok("WORLD_SIZE")) {
        if r < 0 || r >= w {
            bad(
                format!("RANK={r} is outside WORLD_SIZE={w}"),
                vec![e.cite("RANK"), e.cite("WORLD_SIZE")],
                Severity::Error,
                LAUNCH_FIX,
            );
        }
    }
    if let (Some(r), Some(w)) = (ok("LOCAL_RANK"), ok("LOCAL_WORLD_SIZE")) {
        if r < 0 || r >= w {
            bad(
                format!("LOCAL_RANK={r} is outside LOCAL_WORLD_SIZE={w}"),
                vec![e.cite("LOCAL_RANK"), e.cite("LOCAL_WORLD_SIZE")],
                Severity::Error,
                LAUNCH_FIX,
            );
        }
    }
    if let (Some(w), Some(l)) = (ok("WORLD_SIZE"), ok("LOCAL_WORLD_SIZE")) {
        if l > 0 && w % l != 0 {
            bad(format!("WORLD_SIZE={w} is not a multiple of LOCAL_WORLD_SIZE={l}: nodes run different numbers of ranks"), vec![e.cite("WORLD_SIZE"), e.cite("LOCAL_WORLD_SIZE")], Severity::Warning, "run the same number of ranks on every node (--nproc-per-node)");
        }
    }
    out
}

/// The rank variables against those of the launcher that started each rank (Open MPI, srun),
/// and torchrun's node count against Slurm's.
fn rank_vars_against_launcher(e: &Env) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut bad = |title: String, ev: Vec<String>, sev: Severity, fix: &str| {
        out.push(rank_world_finding(title, ev, sev, fix));
    };
    let ok = |k: &str| e.int(k).and_then(Result::ok);
    let torchrun =
        e.vars.keys().any(|k| k.starts_with("TORCHELASTIC_")) || e.get("GROUP_RANK").is_some();
    // The launcher that started each rank must agree with the rank variables.
    let mut pairs: Vec<(&str, &str)> = vec![
        ("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE"),
        ("OMPI_COMM_WORLD_RANK", "RANK"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"),
    ];
    if !torchrun {
        // srun starting every rank itself (torchrun under srun starts one task per node).
        pairs.extend([
            ("SLURM_NTASKS", "WORLD_SIZE"),
            ("SLURM_PROCID", "RANK"),
            ("SLURM_LOCALID", "LOCAL_RANK"),
        ]);
    }
    for (l, r) in pairs {
        if let (Some(a), Some(b)) = (ok(l), ok(r)) {
            if a != b {
                bad(format!("{r}={b} but the launcher says {l}={a}: ranks are numbered twice, inconsistently"), vec![e.cite(r), e.cite(l)], Severity::Error, LAUNCH_FIX);
            }
        }
    }
    if torchrun {
        if let (Some(n), Some(w), Some(l)) = (
            ok("SLURM_JOB_NUM_NODES").or(ok("SLURM_NNODES")),
            ok("WORLD_SIZE"),
            ok("LOCAL_WORLD_SIZE"),
        ) {
            if l > 0 && w / l != n {
                bad(format!("torchrun's WORLD_SIZE={w} / LOCAL_WORLD_SIZE={l} = {} nodes, but Slurm allotted {n}", w / l), vec![e.cite("WORLD_SIZE"), e.cite("LOCAL_WORLD_SIZE"), e.cite(if e.get("SLURM_JOB_NUM_NODES").is_some() { "SLURM_JOB_NUM_NODES" } else { "SLURM_NNODES" })], Severity::Error, "pass --nnodes=$SLURM_JOB_NUM_NODES to torchrun");
            }
        }
    }
    out
}

/// Against NCCL: the communicator's size and ranks claimed twice.
fn rank_vars_against_nccl(e: &Env, log: &NcclLog) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut bad = |title: String, ev: Vec<String>, sev: Severity, fix: &str| {
        out.push(rank_world_finding(title, ev, sev, fix));
    };
    let ok = |k: &str| e.int(k).and_then(Result::ok);
    if let (Some(w), Some(first)) = (ok("WORLD_SIZE"), log.inits.first()) {
        let max = log.inits.iter().map(|x| x.nranks).max().unwrap_or(0);
        if max as i64 != w && log.inits.iter().all(|x| x.nranks == max) {
            bad(
                format!("WORLD_SIZE={w} but NCCL's communicator has nranks {max}"),
                vec![
                    e.cite("WORLD_SIZE"),
                    format!(
                        "{}: rank {} nranks {max}",
                        log.cite(first.at.line),
                        first.rank
                    ),
                ],
                Severity::Error,
                LAUNCH_FIX,
            );
        }
    }
    let mut claimed: BTreeMap<(String, u32), (String, String, usize)> = BTreeMap::new();
    for x in &log.inits {
        let key = (x.comm_id.clone().unwrap_or_default(), x.rank);
        let who = (x.at.host.clone(), x.at.pid.clone(), x.at.line);
        match claimed.get(&key) {
            Some(p) if (p.0.as_str(), p.1.as_str()) != (who.0.as_str(), who.1.as_str()) => {
                bad(format!("rank {} joined twice (processes {}:{} and {}:{}): two launchers numbered ranks independently", x.rank, p.0, p.1, who.0, who.1), vec![format!("{}: rank {} joined", log.cite(p.2), x.rank), format!("{}: rank {} joined again", log.cite(who.2), x.rank)], Severity::Error, LAUNCH_FIX);
            }
            _ => {
                claimed.insert(key, who);
            }
        }
    }
    let mut sizes: Vec<(u32, usize)> = log.inits.iter().map(|x| (x.nranks, x.at.line)).collect();
    sizes.sort();
    sizes.dedup_by_key(|s| s.0);
    if sizes.len() > 1
        && log
            .inits
            .iter()
            .filter_map(|x| x.comm_id.as_ref())
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            <= 1
    {
        bad(
            format!(
                "ranks of one communicator disagree on its size ({})",
                sizes
                    .iter()
                    .map(|s| s.0.to_string())
                    .collect::<Vec<_>>()
                    .join(" vs ")
            ),
            sizes
                .iter()
                .map(|s| format!("{}: nranks {}", log.cite(s.1), s.0))
                .collect(),
            Severity::Error,
            LAUNCH_FIX,
        );
    }
    out
}

/// Fewer ranks reached "Init COMPLETE" than the communicator has, on a one-node log.
pub fn ranks_joined(i: &Inputs) -> Vec<Finding> {
    let Some(log) = &i.log else { return vec![] };
    let (Some(n), Some(1)) = (log.nranks(), log.nnodes()) else {
        return vec![];
    };
    let ranks: std::collections::BTreeSet<u32> = log.inits.iter().map(|x| x.rank).collect();
    let pids: std::collections::BTreeSet<&str> =
        log.inits.iter().map(|x| x.at.pid.as_str()).collect();
    // One process's log (rank 0 only, say) is a partial log, not missing ranks.
    if ranks.len() as u32 >= n || pids.len() < 2 {
        return vec![];
    }
    let missing: Vec<String> = (0..n)
        .filter(|r| !ranks.contains(r))
        .map(|r| r.to_string())
        .collect();
    Finding::new(
        "ranks-joined",
        Severity::Warning,
        format!("{} of {n} ranks completed NCCL init in this one-node log; missing: {}", ranks.len(), missing.join(", ")),
    )
    .evidence(format!("{}: first Init COMPLETE", log.cite(log.inits[0].at.line)))
    .fix("the missing ranks hung or died before init: look for their errors above, and check that every rank calls the same collectives in the same order")
    .into_vec()
}

/// PyTorch's watchdog told not to abort a timed-out collective: a hang stays a hang.
pub fn torch_watchdog(i: &Inputs) -> Vec<Finding> {
    ["TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"]
        .iter()
        .filter(|k| i.env.get(k).is_some_and(|v| v.trim() == "0"))
        .take(1)
        .map(|k| {
            Finding::new(
                "torch-watchdog",
                Severity::Warning,
                format!("{k}=0: a collective that times out is not aborted, so a hung rank keeps the whole job waiting"),
            )
            .evidence(i.env.cite(k))
            .fix(format!("unset {k} (PyTorch's default aborts the communicator on timeout); set TORCH_NCCL_DUMP_ON_TIMEOUT=1 to get each rank's last collectives when it fires"))
        })
        .collect()
}
