//! Running one communicator's share of a group: each call goes to topoplan's runtime or to the
//! real NCCL ([`route`]), topoplan's calls run together as one runtime group, the forwarded
//! ones inside one real NCCL group ([`crate::forward`]).

use crate::abi::NcclOp;
use crate::comm::{lock, Comm};
use crate::error::{arg, usage, ApiError};
use crate::knobs::{log, Level};
use crate::op::{bytes, bytes_mut, Kind, Op, Route};
use planner::schedule::{Collective, CollectiveKind};
use runtime::{DataType, ReduceOp};

/// Decides where `op` runs. Data movement runs on topoplan for every type (as bytes);
/// reductions where topoplan's reduction gives NCCL's exact result; device memory goes to
/// NCCL, since this library's collectives run topoplan's CPU runtime on host buffers.
pub fn route(op: &Op) -> Route {
    if !op.reduces() {
        return Route::Topoplan {
            dtype: DataType::U8,
            op: ReduceOp::Sum,
            count: op.count * op.dtype.size(),
        };
    }
    match op.op {
        NcclOp::PreMulSum(_) => Route::Nccl("PreMulSum reductions run on NCCL".into()),
        NcclOp::Builtin(r) => match op.dtype.reducible_as(r) {
            Some(dtype) => Route::Topoplan {
                dtype,
                op: r,
                count: op.count,
            },
            None => Route::Nccl(format!(
                "{} {}: topoplan has no reduction with NCCL's exact result for it",
                op.dtype.name(),
                r.name()
            )),
        },
    }
}

fn on_device(op: &Op) -> bool {
    op.buffers()
        .iter()
        .any(|p| cuda::query::is_device_memory(*p))
}

/// [`route`] for a call of `comm`, device buffers included: those run on topoplan's CUDA
/// backend where [`crate::gpu::refusal`] allows; else on topoplan's CPU runtime through host
/// copies where [`staged_refusal`] allows; else on NCCL.
pub fn route_in(comm: &Comm, op: &Op) -> Route {
    if !on_device(op) {
        return scaled_on_host(comm, op).unwrap_or_else(|| route(op));
    }
    let r = match op.op {
        // NCCL's float8 average is a PreMulSum by 1/nranks: a sum of scaled inputs, as every
        // PreMulSum here (`gpu::premul::prepare` on the GPU, `scaled_inputs` on the host).
        NcclOp::Builtin(ReduceOp::Avg) if op.dtype.fp8_avg_scalar(1).is_some() => ReduceOp::Sum,
        NcclOp::Builtin(r) => r,
        NcclOp::PreMulSum(v) => match crate::gpu::premul::unsupported(comm, op, v) {
            Some(why) => return Route::Nccl(why),
            None => ReduceOp::Sum,
        },
    };
    let Some((dtype, count)) = crate::gpu::runtime_type(op, r) else {
        return Route::Nccl(format!(
            "{} {}: topoplan has no reduction with NCCL's exact result for it",
            op.dtype.name(),
            r.name()
        ));
    };
    let Some(why) = crate::gpu::refusal(comm, op) else {
        if let Some(why) = crate::gpu::by_size::reason(comm, op, dtype, count) {
            return Route::Nccl(why);
        }
        return Route::Gpu {
            dtype,
            op: r,
            count,
        };
    };
    match staged_refusal(comm) {
        None => Route::Staged {
            dtype,
            op: r,
            count,
            why,
        },
        Some(no) => Route::Nccl(format!("{why}; {no}")),
    }
}

/// A host-buffer call that scales its inputs before it sums (PreMulSum with a host scalar, a
/// float8 average): a sum on topoplan's CPU runtime over scaled copies (`run_ours`).
fn scaled_on_host(comm: &Comm, op: &Op) -> Option<Route> {
    crate::premul::factor(comm, op)?;
    Some(Route::Topoplan {
        dtype: op.dtype.reducible_as(ReduceOp::Sum)?,
        op: ReduceOp::Sum,
        count: op.count,
    })
}

/// Why a device-buffer call the CUDA path refused cannot run through host copies either
/// (`None`: it can). A communicator property, the same on every rank.
fn staged_refusal(comm: &Comm) -> Option<String> {
    if !crate::gpu::enabled() {
        return Some("TOPOPLAN_NCCL_CUDA=0 forwards device buffers".into());
    }
    let transport = lock(&comm.cpu).as_ref().map(|c| c.transport_name());
    match transport {
        Some("tcp") => Some("the ranks are on several hosts, where NCCL's network runs it".into()),
        None => Some("the communicator has not joined".into()),
        Some(_) => None,
    }
}

fn collective(kind: Kind, root: u32) -> Collective {
    match kind {
        Kind::AllReduce => Collective::new(CollectiveKind::AllReduce),
        Kind::AllGather => Collective::new(CollectiveKind::AllGather),
        Kind::ReduceScatter => Collective::new(CollectiveKind::ReduceScatter),
        Kind::AllToAll => Collective::new(CollectiveKind::AllToAll),
        Kind::Broadcast => Collective::rooted(CollectiveKind::Broadcast, root),
        Kind::Reduce => Collective::rooted(CollectiveKind::Reduce, root),
        Kind::Gather | Kind::Scatter | Kind::Send | Kind::Recv => {
            unreachable!("point to point is not a collective")
        }
    }
}

fn overlaps(a: usize, alen: usize, b: usize, blen: usize) -> bool {
    alen > 0 && blen > 0 && a < b + blen && b < a + alen
}

/// The input and output byte ranges NCCL's call reads and writes on `rank` of `n`, and
/// whether it is NCCL's in-place form. `es` is the element size, `count` in elements.
fn layout(op: &Op, n: usize, rank: usize, count: usize, es: usize) -> (usize, usize, bool) {
    let c = count * es;
    match op.kind {
        Kind::AllGather => (c, n * c, op.send == op.recv + rank * c),
        Kind::ReduceScatter => (n * c, c, op.recv == op.send + rank * c),
        Kind::AllToAll => (n * c, n * c, op.send == op.recv),
        // Only the root's layout matters: other ranks use one buffer each.
        Kind::Gather => (c, n * c, op.send == op.recv + op.peer as usize * c),
        Kind::Scatter => (n * c, c, op.recv == op.send + op.peer as usize * c),
        _ => (c, c, op.send == op.recv),
    }
}

/// Whether `op` leaves every buffer as it is: an in-place collective of a one-rank
/// communicator with a built-in operation (its result is its input; a PreMulSum still scales).
/// Such a call does nothing, on host or device memory, as NCCL does nothing.
fn one_rank_no_op(comm: &Comm, op: &Op) -> bool {
    comm.nranks == 1
        && !matches!(op.kind, Kind::Send | Kind::Recv)
        && matches!(op.op, NcclOp::Builtin(_))
        && layout(op, 1, 0, op.count, op.dtype.size()).2
}

/// Runs `ops` (one communicator's calls of one group, in order).
pub fn run_batch(comm: &Comm, ops: &[Op]) -> Result<(), ApiError> {
    comm.wait_ready()?;
    // Rank 0's hang report reads this until the batch returns, however it returns, or until
    // its GPU work finishes.
    let in_call = comm.hang.begin(ops);
    if ops.iter().all(|op| one_rank_no_op(comm, op)) {
        return Ok(());
    }
    // Whether the ranks share processes is learnt collectively at the first batch with
    // device buffers, before routing, so every rank routes on the same state.
    if comm.nranks > 1 && crate::gpu::enabled() && ops.iter().any(on_device) {
        crate::gpu::check_residency(comm)?;
    }
    let routed = |op: &Op| {
        let r = route_in(comm, op);
        explain(comm, op, &r);
        r
    };
    let mut gpu_stream = None;
    let out = if let [op] = ops {
        // One call outside a group, the common case: no batch to build.
        match routed(op) {
            Route::Topoplan {
                dtype,
                op: rop,
                count,
            } => run_ours(comm, &[(*op, dtype, rop, count)]),
            Route::Gpu {
                dtype,
                op: rop,
                count,
            } => {
                gpu_stream = Some(op.stream);
                crate::gpu::run(comm, &[(*op, dtype, rop, count)])
            }
            Route::Staged {
                dtype,
                op: rop,
                count,
                ..
            } => run_staged(comm, &[], &[(*op, dtype, rop, count)]),
            Route::Nccl(why) => crate::forward::run(comm, &[(*op, why)]),
        }
    } else {
        let (mut ours, mut gpu, mut forwarded) = (Vec::new(), Vec::new(), Vec::new());
        let mut staged = Vec::new();
        for op in ops {
            match routed(op) {
                Route::Topoplan {
                    dtype,
                    op: rop,
                    count,
                } => ours.push((*op, dtype, rop, count)),
                Route::Gpu {
                    dtype,
                    op: rop,
                    count,
                } => gpu.push((*op, dtype, rop, count)),
                Route::Staged {
                    dtype,
                    op: rop,
                    count,
                    ..
                } => staged.push((*op, dtype, rop, count)),
                Route::Nccl(why) => forwarded.push((*op, why)),
            }
        }
        gpu_stream = gpu.last().map(|g| g.0.stream);
        run_staged(comm, &ours, &staged)
            .and_then(|_| {
                if gpu.is_empty() {
                    Ok(())
                } else {
                    crate::gpu::run(comm, &gpu)
                }
            })
            .and_then(|_| crate::forward::run(comm, &forwarded))
    };
    match (&out, gpu_stream) {
        (Err(e), _) => comm.poison(e),
        (Ok(()), Some(s)) => {
            if let Some(finished) = crate::gpu::finished_after(comm, s) {
                in_call.until(finished);
            }
        }
        _ => {}
    }
    out
}

/// Adds gather or scatter to `g` as the sends and receives it is made of (`c` bytes per rank):
/// the root receives every other rank's block into its slot (gather) or sends each rank its
/// block (scatter), and copies its own block unless in place; every other rank makes the one
/// send or receive to the root. So a group defers it, and failures, aborts and dead peers end
/// it, exactly as they do send and receive.
fn rooted<'b>(
    g: &mut runtime::Group<'_, 'b>,
    op: &Op,
    n: usize,
    rank: usize,
    c: usize,
) -> Result<(), ApiError> {
    let root = op.peer as usize;
    // Every rank declares the call, so ranks that disagree on it fail naming it (runtime's
    // agreement), not as the sends and receives it is made of.
    let name = if op.kind == Kind::Gather {
        "gather"
    } else {
        "scatter"
    };
    g.agree(name, c as u64, Some(op.peer));
    if c == 0 {
        return Ok(());
    }
    let (inb, outb, in_place) = layout(op, n, rank, c, 1);
    if rank == root && !in_place && overlaps(op.send, inb, op.recv, outb) {
        return Err(arg(format!(
            "{}: the send and receive buffers overlap but are not NCCL's in-place layout",
            op.call
        )));
    }
    // SAFETY (every slice below): the caller guarantees NCCL's buffer sizes for this call on
    // this rank; on the root, the in-place form never makes a slice of its own block twice,
    // and other overlaps were refused above.
    let gather = op.kind == Kind::Gather;
    match (gather, rank == root) {
        (true, false) => g.send(unsafe { bytes(op.send, c) }, op.peer)?,
        (false, false) => g.recv(unsafe { bytes_mut(op.recv, c) }, op.peer)?,
        (true, true) => {
            for (i, slot) in unsafe { bytes_mut(op.recv, outb) }
                .chunks_mut(c)
                .enumerate()
            {
                if i != root {
                    g.recv(slot, i as u32)?;
                } else if !in_place {
                    slot.copy_from_slice(unsafe { bytes(op.send, c) });
                }
            }
        }
        (false, true) => {
            for (i, block) in unsafe { bytes(op.send, inb) }.chunks(c).enumerate() {
                if i != root {
                    g.send(block, i as u32)?;
                } else if !in_place {
                    unsafe { bytes_mut(op.recv, c) }.copy_from_slice(block);
                }
            }
        }
    }
    Ok(())
}

/// `TOPOPLAN_DEBUG=INFO`: once per communicator, call and size class, where it runs and why.
fn explain(comm: &Comm, op: &Op, r: &Route) {
    if crate::knobs::level() < Level::Info {
        return;
    }
    let bytes = op.count * op.dtype.size();
    let class = usize::BITS - bytes.leading_zeros();
    if !lock(&comm.logged).insert((op.call, class)) {
        return;
    }
    let path = match r {
        Route::Topoplan { dtype, count, .. } => {
            let plan = match op.kind {
                Kind::Send | Kind::Recv => "point to point".to_string(),
                Kind::Gather => "point to point (the root receives from every rank)".to_string(),
                Kind::Scatter => "point to point (the root sends to every rank)".to_string(),
                k => lock(&comm.cpu)
                    .as_mut()
                    .and_then(|c| {
                        c.schedule_for(&collective(k, op.peer), (count * dtype.size()) as u64)
                            .ok()
                    })
                    .map(|s| {
                        format!(
                            "{} {} x{} channels",
                            s.algorithm.name(),
                            s.protocol.name(),
                            s.channels
                        )
                    })
                    .unwrap_or_else(|| "no schedule".into()),
            };
            format!("topoplan CPU runtime (host buffers): {plan}")
        }
        Route::Gpu { .. } => "topoplan CUDA backend (device buffers)".to_string(),
        Route::Staged { why, .. } => {
            format!("topoplan CPU runtime through host copies of the device buffers ({why})")
        }
        Route::Nccl(why) => format!("NCCL ({why})"),
    };
    log(
        Level::Info,
        &format!(
            "comm {:#x} rank {}: {} {} x {} ({} B, size class 2^{}): {path}",
            comm.handle,
            comm.rank,
            op.call,
            op.count,
            op.dtype.name(),
            bytes,
            class.saturating_sub(1)
        ),
    );
}

/// Runs `ours` (host buffers) and `staged` (device buffers, through host copies) as one CPU
/// runtime group, so that their sends and receives progress together.
fn run_staged(
    comm: &Comm,
    ours: &[(Op, DataType, ReduceOp, usize)],
    staged: &[(Op, DataType, ReduceOp, usize)],
) -> Result<(), ApiError> {
    if staged.is_empty() {
        return run_ours(comm, ours);
    }
    let (n, rank) = (comm.nranks as usize, comm.rank as usize);
    let (host, copies) =
        crate::staged::Staged::stage(staged, n, rank, layout, cuda::query::is_device_memory)?;
    let all: Vec<_> = ours.iter().chain(host.iter()).copied().collect();
    run_ours(comm, &all)?;
    copies.finish()
}

/// Non-root ranks may pass no receive buffer to reduce: scratch for them, one per call (empty
/// where a call needs none; nothing is allocated when no call does).
fn scratch_for(ops: &[(Op, DataType, ReduceOp, usize)], rank: usize) -> Vec<Vec<u8>> {
    let needs = |op: &Op| op.kind == Kind::Reduce && op.peer as usize != rank && op.recv == 0;
    if !ops.iter().any(|(op, ..)| needs(op)) {
        return Vec::new();
    }
    ops.iter()
        .map(|(op, dt, _, count)| vec![0u8; if needs(op) { count * dt.size() } else { 0 }])
        .collect()
}

/// Calls that scale first (`scaled_on_host`) sum scaled copies of their inputs: the copy of
/// each such call, in order (`None` for the others).
fn scaled_inputs(
    comm: &Comm,
    ops: &[(Op, DataType, ReduceOp, usize)],
    n: usize,
    rank: usize,
) -> Result<Vec<Option<Vec<u8>>>, ApiError> {
    ops.iter()
        .map(|(op, dt, _, count)| {
            let Some(s) = crate::premul::factor(comm, op) else {
                return Ok(None);
            };
            let f = crate::premul::element_bytes(s, dt.size())?;
            let (inb, ..) = layout(op, n, rank, *count, dt.size());
            // SAFETY: NCCL's input size for this call on this rank.
            Ok(Some(crate::premul::scaled_copy(
                unsafe { bytes(op.send, inb) },
                *dt,
                &f,
            )))
        })
        .collect()
}

fn run_ours(comm: &Comm, ops: &[(Op, DataType, ReduceOp, usize)]) -> Result<(), ApiError> {
    if ops.is_empty() {
        return Ok(());
    }
    for (op, ..) in ops {
        cuda::query::wait_stream(op.stream).map_err(ApiError::Cuda)?;
    }
    let n = comm.nranks as usize;
    let rank = comm.rank as usize;
    let mut scratch = scratch_for(ops, rank);
    let scaled = scaled_inputs(comm, ops, n, rank)?;
    let mut guard = lock(&comm.cpu);
    let cpu = guard
        .as_mut()
        .ok_or_else(|| usage("communicator has not joined"))?;
    let mut g = cpu.group();
    let mut spare = scratch.iter_mut();
    for ((op, dt, rop, count), input) in ops.iter().zip(&scaled) {
        let scratch = spare.next().filter(|s| !s.is_empty());
        let es = dt.size();
        let (inb, outb, in_place) = layout(op, n, rank, *count, es);
        if let Some(input) = input {
            // The copy is the input: out of place, whatever the buffers' layout.
            let recv = match scratch {
                Some(s) => s.as_mut_slice(),
                // SAFETY: NCCL's output size for this call on this rank.
                None => unsafe { bytes_mut(op.recv, outb) },
            };
            let coll = collective(op.kind, op.peer);
            g.raw(coll, *dt, *rop, *count, Some(input), recv)?;
            continue;
        }
        // SAFETY (every slice below): the caller guarantees NCCL's buffer sizes for this call;
        // the in-place forms pass one slice, and other overlaps are refused first.
        match op.kind {
            Kind::Send => g.send(unsafe { bytes(op.send, inb) }, op.peer)?,
            Kind::Recv => g.recv(unsafe { bytes_mut(op.recv, outb) }, op.peer)?,
            Kind::Gather | Kind::Scatter => rooted(&mut g, op, n, rank, *count)?,
            _ => {
                let coll = collective(op.kind, op.peer);
                let non_root =
                    matches!(op.kind, Kind::Broadcast | Kind::Reduce) && op.peer as usize != rank;
                if op.kind == Kind::Broadcast && non_root {
                    // A non-root's send buffer is never read: receive in place.
                    g.raw(coll, *dt, *rop, *count, None, unsafe {
                        bytes_mut(op.recv, outb)
                    })?;
                } else if in_place {
                    let whole = if op.kind == Kind::ReduceScatter {
                        (op.send, inb)
                    } else {
                        (op.recv, outb)
                    };
                    g.raw(coll, *dt, *rop, *count, None, unsafe {
                        bytes_mut(whole.0, whole.1)
                    })?;
                } else {
                    let recv = if let Some(scratch) = scratch {
                        scratch.as_mut_slice()
                    } else {
                        if overlaps(op.send, inb, op.recv, outb) {
                            return Err(arg(format!(
                                "{}: the send and receive buffers overlap but are not NCCL's in-place layout",
                                op.call
                            )));
                        }
                        unsafe { bytes_mut(op.recv, outb) }
                    };
                    g.raw(
                        coll,
                        *dt,
                        *rop,
                        *count,
                        Some(unsafe { bytes(op.send, inb) }),
                        recv,
                    )?;
                }
            }
        }
    }
    g.run()?;
    Ok(())
}

#[cfg(test)]
#[path = "exec_tests.rs"]
mod tests;
