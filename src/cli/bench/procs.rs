//! `topoplan bench --procs`: one process per GPU. The parent starts this binary once per rank
//! and reports failing ranks; each child bootstraps with the others, maps their buffers through
//! CUDA IPC (`cuda::ipc`) and runs the configurations like the one-process bench.

use super::{effective_algo, map_err, run_configs, Args, Mode, Priced};
use crate::cli::error::{CliError, CliResult};
use crate::cli::launch::start_ranks;
use cuda::ipc::CudaProcComm;
use cuda::{device, direct, schedules};
use planner::schedule::CollectiveKind;
use runtime::bootstrap::{self, PeerInfo, UniqueId};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
/// Set by the `--procs` parent in each child: its rank, and the bootstrap's unique id.
pub(super) const MP_RANK_VAR: &str = params::BENCH_MP_RANK.name;
const MP_ID_VAR: &str = params::BENCH_MP_ID.name;
/// How long the other ranks may go on after one failed before the parent stops them (a rank
/// whose peer died can wait in a kernel forever).
const MP_GRACE: Duration = Duration::from_secs(10);

/// Whether `algo` names a schedule of the direct path (`auto` picks them, except the
/// copy-engine pipeline under `TOPOPLAN_CE_AUTO`, which the ranks then refuse clearly).
fn runs_direct(algo: &str, nranks: u32) -> bool {
    let coll = planner::schedule::Collective::new(CollectiveKind::AllReduce);
    algo == "auto"
        || schedules::pick(
            &coll,
            nranks,
            1 << 20,
            algo,
            planner::tuner::Profile::bundled(),
        )
        .is_ok_and(|(_, s)| direct::applies(&s))
}

/// `--procs` runs what the multi-process backend runs: direct schedules, 2 to 8 ranks.
pub(super) fn check_procs(a: &Args, algo: &str) -> Result<(), CliError> {
    if !(2..=8).contains(&a.ngpus) {
        return Err(CliError::input(format!(
            "--procs needs -g 2 to 8 (one process per GPU), not {}",
            a.ngpus
        )));
    }
    if !runs_direct(algo, a.ngpus as u32) {
        let direct: Vec<&str> = schedules::ALGOS
            .iter()
            .copied()
            .filter(|x| runs_direct(x, a.ngpus as u32))
            .collect();
        return Err(CliError::input(format!(
            "--procs runs the one-shot (direct) schedules only: --algo {}, not `{algo}`",
            direct.join(", ")
        )));
    }
    if !direct::enabled() {
        return Err(CliError::input(
            "--procs runs the direct path, which TOPOPLAN_DIRECT=0 turns off",
        ));
    }
    Ok(())
}

fn describe(st: &ExitStatus) -> String {
    match st.code() {
        Some(c) => format!("exit status {c}"),
        None => format!("killed ({st})"),
    }
}

/// `--procs`: starts this binary once per rank with the same arguments, passes rank 0's output
/// through (the others' is dropped: every rank prints the same table), and fails naming the
/// ranks that failed. When one rank fails the others get [`MP_GRACE`] to finish, then are
/// stopped.
pub(super) fn run_parent(a: &Args) -> CliResult {
    let algo = effective_algo(a);
    check_procs(a, &algo)?;
    if !device::driver_present() {
        return Err(CliError::failure(
            "no CUDA driver on this machine (libcuda.so not found): `topoplan bench` needs GPUs",
        ));
    }
    launch(a)
}

/// Starts every rank (rank 0 first, on a port the OS chooses: `launch::start_ranks`) and waits
/// for them.
fn launch(a: &Args) -> CliResult {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failure(format!("finding this executable: {e}")))?;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let mut children = start_ranks(a.ngpus as u32, MP_ID_VAR, bootstrap_timeout()?, |r| {
        let mut c = Command::new(&exe);
        c.args(&args)
            .env(MP_RANK_VAR, r.to_string())
            .stdin(Stdio::null())
            .stdout(if r == 0 {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::inherit());
        c
    })?;
    let mut status: Vec<Option<ExitStatus>> = vec![None; children.len()];
    let mut stopped = vec![false; children.len()];
    let mut first_failure: Option<(usize, Instant)> = None;
    loop {
        for (r, c) in children.iter_mut().enumerate() {
            if status[r].is_none() {
                if let Ok(Some(st)) = c.try_wait() {
                    if !st.success() && first_failure.is_none() {
                        first_failure = Some((r, Instant::now()));
                    }
                    status[r] = Some(st);
                }
            }
        }
        if status.iter().all(Option::is_some) {
            break;
        }
        if let Some((_, t)) = first_failure {
            if t.elapsed() > MP_GRACE {
                for (r, c) in children.iter_mut().enumerate() {
                    if status[r].is_none() {
                        let _ = c.kill();
                        stopped[r] = true;
                        status[r] = c.wait().ok();
                    }
                }
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut failed = Vec::new();
    for (r, st) in status.iter().enumerate() {
        match st {
            Some(st) if st.success() => {}
            _ if stopped[r] => failed.push(format!(
                "rank {r} stopped {}s after rank {} failed",
                MP_GRACE.as_secs(),
                first_failure.map(|(f, _)| f).unwrap_or(0)
            )),
            Some(st) => failed.push(format!("rank {r} failed ({})", describe(st))),
            None => failed.push(format!("rank {r}: exit status unknown")),
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::failure(format!(
            "--procs with {} ranks: {}",
            a.ngpus,
            failed.join("; ")
        )))
    }
}

/// `TOPOPLAN_TIMEOUT`, which bounds every bootstrap wait (rank 0's id file among them).
fn bootstrap_timeout() -> Result<Duration, CliError> {
    Ok(runtime::Config::from_lookup(|k| {
        (k == "TOPOPLAN_TIMEOUT")
            .then(|| std::env::var(k).ok())
            .flatten()
    })
    .map_err(|e| CliError::input(e.to_string()))?
    .timeout)
}

/// One rank of `--procs`: bootstrap with the other ranks, map their buffers, run the configs.
pub(super) fn run_child(a: &Args, rank: u32, priced: &Priced) -> CliResult {
    let algo = effective_algo(a);
    check_procs(a, &algo)?;
    let n = a.ngpus as u32;
    let id: UniqueId = std::env::var(MP_ID_VAR)
        .map_err(|_| CliError::input(format!("{MP_RANK_VAR} is set but {MP_ID_VAR} is not")))?
        .parse()
        .map_err(|e| CliError::input(format!("{MP_ID_VAR}: {e}")))?;
    if rank >= n {
        return Err(CliError::input(format!("rank {rank} of -g {n}")));
    }
    // A rank whose parent is gone (killed by a timeout, say) must not hold its GPU, possibly
    // waiting in a kernel for a peer that died with it.
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(500));
        if std::os::unix::process::parent_id() != parent {
            eprintln!("error: rank {rank}: the `--procs` parent exited; stopping");
            std::process::exit(1);
        }
    });
    let timeout = bootstrap_timeout()?;
    // The rendezvous wants a bound data-plane listener; nothing connects to it in this mode.
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| CliError::failure(format!("binding a listener: {e}")))?;
    let listen = listener
        .local_addr()
        .map_err(|e| CliError::failure(e.to_string()))?
        .to_string();
    let info = PeerInfo {
        rank,
        host: bootstrap::hostname(),
        pid: std::process::id(),
        listen,
    };
    // Ranks started with different arguments refuse each other.
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let fingerprint = runtime::config::fnv1a(args.join("\0").as_bytes());
    // Rank 0 binds first and, under the `--procs` parent, hands it the id it listens at.
    let joined = if rank == 0 {
        bootstrap::RootListener::bind(&id.addr, id.secret).and_then(|root| {
            if let Ok(f) = std::env::var(bootstrap::ID_FILE_VAR) {
                root.publish(std::path::Path::new(&f))?;
            }
            bootstrap::rendezvous_root(root, n, fingerprint, info, timeout)
        })
    } else {
        bootstrap::rendezvous(&id, rank, n, fingerprint, info, timeout)
    };
    let mut rv = joined.map_err(|e| CliError::failure(format!("bootstrap: {e}")))?;
    // The context first (the communicator retains the same primary context), so that "before"
    // excludes the context itself, as in one process.
    let ctx = cuda::device::open_devices(&[rank as usize]).map_err(map_err)?;
    let free = || gpubench::procs::free_bytes(&ctx[0]).map_err(map_err);
    let free_before = free()?;
    let comm = CudaProcComm::new(
        rank as usize,
        rank,
        n,
        &mut |b: &[u8]| Ok(rv.all_gather(b)?),
    )
    .map_err(map_err)?;
    let init = gpubench::procs::InitMemory {
        free_before: free_before as u64,
        ours_init: free_before - free()?,
    };
    let mut mode = Mode::Procs {
        comm: Box::new(comm),
        rv,
        init,
    };
    let r = run_configs(a, &mut mode, priced);
    drop(listener);
    r.map(drop)
}
