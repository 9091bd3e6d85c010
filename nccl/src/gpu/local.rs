//! Device buffers of a communicator whose ranks all live in this process (`ncclCommInitAll`,
//! nccl-tests `-g N`, a thread per rank calling `ncclCommInitRank`): the direct path's kernels
//! through one `cuda::CudaGroup` that the ranks share, made when they first meet with device
//! buffers ([`open`], collective). Each rank enqueues its own part on its own stream
//! (`CudaGroup::enqueue_own`), knowing only its own buffers: the kernels meet on the GPUs
//! through the peers' slots and sequence words, so no call waits on the host for another rank,
//! whether one thread issues every rank's call inside a group or each rank's thread its own,
//! and the work is capturable into a CUDA graph. It is the path ranks of separate processes take
//! (`cuda::ipc::CudaProcComm`), with the peers' buffers as plain pointers of this process
//! instead of CUDA IPC mappings, which cannot map a process's own memory. `CudaGroup`'s own
//! dispatch is not used: its pull mode, hybrid and generic lowering address every rank's
//! buffers of a call, which a rank does not know without a host rendezvous per call.

use super::p2p::Group;
use super::premul::{self, Scaler};
use super::rank::{collective_kind, GpuRank, Schedules, Scratch};
use crate::comm::{lock, Comm};
use crate::error::{usage, ApiError};
use crate::knobs::{log, Level};
use crate::op::Typed;
use cuda::ipc::calls::{self, Calls, Desc};
use cuda::RankCall;
use cuda::{CudaError, CudaGroup};
use cudarc::driver::sys::CUstream;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// One rank's part of the meeting: process id, CUDA device, communicator handle.
const RECORD: usize = 16;

fn record(pid: u32, device: i32, handle: usize) -> [u8; RECORD] {
    let mut r = [0u8; RECORD];
    r[..4].copy_from_slice(&pid.to_le_bytes());
    r[4..8].copy_from_slice(&device.to_le_bytes());
    r[8..].copy_from_slice(&(handle as u64).to_le_bytes());
    r
}

/// Where the ranks meet: rank 0's handle (unique in this process, never reused) and every
/// rank's GPU in rank order.
#[derive(Debug, PartialEq, Eq)]
struct Meet {
    key: u64,
    ordinals: Vec<usize>,
}

/// The meeting of every rank's record, or why the ranks cannot meet in this process. `pair`:
/// two ranks found sharing a process.
fn decide(recs: &[&[u8]], pair: (usize, usize)) -> Result<Meet, String> {
    let field = |r: &[u8], at: usize| i32::from_le_bytes(r[at..at + 4].try_into().expect("4"));
    if recs.iter().any(|r| r[..4] != recs[0][..4]) {
        return Err(format!(
            "ranks {} and {} share a process, whose own memory CUDA IPC cannot map, and other \
             ranks are in other processes",
            pair.0, pair.1
        ));
    }
    let mut ordinals = Vec::with_capacity(recs.len());
    for (rank, r) in recs.iter().enumerate() {
        let device = field(r, 4);
        ordinals.push(
            usize::try_from(device)
                .map_err(|_| format!("rank {rank} joined with no CUDA device current"))?,
        );
    }
    Ok(Meet {
        key: u64::from_le_bytes(recs[0][8..16].try_into().expect("8")),
        ordinals,
    })
}

/// Meetings in progress: the first of `n` ranks to arrive makes the shared value, every one
/// of them takes the same outcome, and the last one closes the meeting.
struct Meetings<T> {
    /// By key: the outcome and how many ranks took it.
    open: Mutex<HashMap<u64, Taken<T>>>,
}

type Taken<T> = (Result<T, String>, u32);

impl<T: Clone> Meetings<T> {
    fn new() -> Self {
        Meetings {
            open: Mutex::new(HashMap::new()),
        }
    }

    fn take(
        &self,
        key: u64,
        n: u32,
        make: impl FnOnce() -> Result<T, String>,
    ) -> Result<T, String> {
        let mut m = lock(&self.open);
        let e = m.entry(key).or_insert_with(|| (make(), 0));
        e.1 += 1;
        let out = e.0.clone();
        if e.1 >= n {
            m.remove(&key);
        }
        out
    }
}

fn worlds() -> &'static Meetings<Arc<CudaGroup>> {
    static W: OnceLock<Meetings<Arc<CudaGroup>>> = OnceLock::new();
    W.get_or_init(Meetings::new)
}

/// The group of the ranks' GPUs, or why the kernels cannot run them.
fn make(ordinals: &[usize]) -> Result<Arc<CudaGroup>, String> {
    if !cuda::direct::enabled() {
        return Err("TOPOPLAN_DIRECT=0 turns the CUDA direct kernels off".into());
    }
    if !(2..=8).contains(&ordinals.len()) {
        return Err(format!(
            "{} ranks in one process: the CUDA direct path runs 2 to 8",
            ordinals.len()
        ));
    }
    CudaGroup::new(ordinals).map(Arc::new).map_err(|e| {
        format!("the ranks of this process on GPUs {ordinals:?} cannot share the CUDA kernels: {e}")
    })
}

/// Sets up the CUDA side of a communicator two of whose ranks (`pair`) share a process
/// (collective: every rank calls it at its first batch with device buffers). Every rank gets
/// the same answer: the shared group, or why its device calls run through host copies.
pub fn open(comm: &Comm, pair: (usize, usize)) -> Result<GpuRank, ApiError> {
    let mine = record(std::process::id(), comm.device, comm.handle);
    let mut all = vec![0u8; RECORD * comm.nranks as usize];
    {
        let mut g = lock(&comm.cpu);
        let cpu = g
            .as_mut()
            .ok_or_else(|| usage("communicator has not joined"))?;
        cpu.all_gather(&mine, &mut all)?;
    }
    let recs: Vec<&[u8]> = all.chunks(RECORD).collect();
    let made = decide(&recs, pair).and_then(|m| {
        worlds()
            .take(m.key, comm.nranks, || make(&m.ordinals))
            .map(|g| (g, m.ordinals))
    });
    if comm.rank == 0 {
        let what = match &made {
            Ok((_, o)) => format!(
                "{} ranks of this process on GPUs {o:?}: device buffers run on topoplan's CUDA \
                 direct path in one process (each rank's own part on its own stream)",
                comm.nranks
            ),
            Err(why) => format!("device buffers run through host copies: {why}"),
        };
        log(Level::Info, &format!("comm {:#x}: {what}", comm.handle));
    }
    Ok(match made {
        Ok((group, _)) => {
            let calls = open_calls(comm, &all)?;
            // The hang report's event must be of this rank's context, as its streams are.
            let ctx = group.context(comm.rank as usize).bind_to_thread();
            let mark = ctx.ok().and_then(|()| cuda::query::StreamMark::new().ok());
            GpuRank::Local {
                group,
                schedules: Schedules::default(),
                mark: mark.map(Arc::new),
                calls,
                scratch: Scratch::default(),
            }
        }
        Err(why) => GpuRank::Unavailable(why),
    })
}

/// The ranks' call boards (`cuda::ipc::calls`, collective), keyed by the meeting's records
/// (`all`: process, device and handle of every rank, the same on each), as ranks of separate
/// processes have them: a rank that finds a peer calling something else stops the group.
fn open_calls(comm: &Comm, all: &[u8]) -> Result<Option<Calls>, ApiError> {
    let table: Vec<Vec<u8>> = all.chunks(RECORD).map(<[u8]>::to_vec).collect();
    let wait = calls::wait_timeout();
    calls::setup(comm.rank, comm.nranks, &table, wait, &mut exchange(comm))
        .map_err(|e| ApiError::Cuda(format!("comparing the ranks' calls: {e}")))
}

/// The exchange the CUDA setups take (`cuda::ipc::Exchange`): an all-gather of one record per
/// rank over topoplan's own communicator, every rank's record in rank order.
pub(super) fn exchange(comm: &Comm) -> impl FnMut(&[u8]) -> Result<Vec<Vec<u8>>, CudaError> + '_ {
    let n = comm.nranks as usize;
    move |mine: &[u8]| {
        let mut g = lock(&comm.cpu);
        let cpu = g
            .as_mut()
            .ok_or_else(|| CudaError::Input("communicator has not joined".into()))?;
        let mut got = vec![0u8; mine.len() * n];
        cpu.all_gather(mine, &mut got)
            .map_err(|e| CudaError::Input(e.to_string()))?;
        Ok(got.chunks(mine.len().max(1)).map(<[u8]>::to_vec).collect())
    }
}

/// Enqueues `ops` (device buffers, each accepted by `gpu::refusal`) of this rank on their
/// streams: collectives one by one, the group's point-to-point calls together at the end.
pub fn run(
    comm: &Comm,
    group: &CudaGroup,
    schedules: &mut Schedules,
    scratch: &mut Scratch,
    mut calls: Option<&mut Calls>,
    ops: &[Typed],
) -> Result<(), ApiError> {
    let rank = comm.rank as usize;
    let mut p2p = Group::default();
    for (op, dtype, rop, count) in ops {
        let bytes = (*count * dtype.size()) as u64;
        let Some(k) = collective_kind(op.kind) else {
            p2p.add(op, comm.rank, comm.nranks, bytes);
            continue;
        };
        if let Some(c) = calls.as_deref_mut() {
            let d = Desc::Coll {
                kind: k,
                count: *count as u64,
                dtype: *dtype,
                op: *rop,
                root: op.peer,
            };
            compared(group, op.call, c.collective(&d))?;
        }
        let schedule = schedules.get(comm.nranks, k, op.peer, bytes)?;
        // A PreMulSum (or float8 average) scales this rank's input first, then sums.
        let on = Scaler::Own(group, rank);
        let (input, output) = premul::prepare(comm, on, scratch, op, *dtype, *count)?;
        let call = RankCall {
            schedule: &schedule,
            count: *count as u64,
            dtype: *dtype,
            op: *rop,
            input,
            output,
        };
        group
            .enqueue_own(rank, &call, op.stream as CUstream)
            .map_err(|e| ApiError::Cuda(format!("{}: {e}", op.call)))?;
    }
    p2p.run_with(|sends, recvs, stream| {
        if let Some(c) = &mut calls {
            c.messages(sends, recvs).map_err(|e| stop(group, e))?;
        }
        group.enqueue_own_p2p(rank, sends, recvs, stream)
    })
}

/// A difference found by comparing a call with the peers' stops every rank's kernels in the
/// group (some may already wait for data of that call), as a mismatch does across processes.
fn stop(group: &CudaGroup, e: calls::CallsError) -> CudaError {
    if matches!(e, calls::CallsError::Mismatch(_)) {
        let _ = group.abort();
    }
    e.into()
}

/// `call`'s comparison with the peers, as the library reports it (`ncclInvalidUsage` for a
/// difference).
fn compared(
    group: &CudaGroup,
    call: &str,
    r: Result<(), calls::CallsError>,
) -> Result<(), ApiError> {
    r.map_err(|e| super::p2p::cuda_error(call, stop(group, e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_of_one_process_meet_at_rank_0s_handle_with_their_gpus_in_rank_order() {
        let recs = [record(7, 0, 0x70), record(7, 0, 0x80), record(7, 1, 0x90)];
        let refs: Vec<&[u8]> = recs.iter().map(|r| &r[..]).collect();
        assert_eq!(
            decide(&refs, (0, 1)),
            Ok(Meet {
                key: 0x70,
                ordinals: vec![0, 0, 1]
            })
        );
        // A rank in another process: no meeting, and the reason names the pair found.
        let mixed = [record(7, 0, 0x70), record(7, 0, 0x80), record(8, 0, 0x10)];
        let refs: Vec<&[u8]> = mixed.iter().map(|r| &r[..]).collect();
        let why = decide(&refs, (0, 1)).unwrap_err();
        assert!(
            why.contains("ranks 0 and 1") && why.contains("other processes"),
            "{why}"
        );
        // A rank that joined without a current device cannot be placed.
        let nodev = [record(7, 0, 0x70), record(7, -1, 0x80)];
        let refs: Vec<&[u8]> = nodev.iter().map(|r| &r[..]).collect();
        assert!(decide(&refs, (0, 1)).unwrap_err().contains("rank 1"));
    }

    #[test]
    fn every_rank_of_a_meeting_takes_what_the_first_made_once() {
        let m: Meetings<Arc<u32>> = Meetings::new();
        let made = std::sync::atomic::AtomicU32::new(0);
        let make = || {
            made.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Arc::new(42))
        };
        // Three ranks from three threads: one value, made once, shared.
        let got: Vec<Arc<u32>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3).map(|_| s.spawn(|| m.take(5, 3, make))).collect();
            hs.into_iter().map(|h| h.join().unwrap().unwrap()).collect()
        });
        assert_eq!(made.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(got.iter().all(|g| Arc::ptr_eq(g, &got[0]) && **g == 42));
        // The last rank closed the meeting: the same key meets anew.
        assert!(lock(&m.open).is_empty());
        assert_eq!(*m.take(5, 2, || Ok(Arc::new(9))).unwrap(), 9);
        // A failure reaches every rank alike, and meetings of other keys are apart.
        assert_eq!(m.take(6, 2, || Err("no".into())), Err("no".into()));
        assert_eq!(m.take(6, 2, || Ok(Arc::new(1))), Err("no".into()));
        assert_eq!(*m.take(5, 2, || Ok(Arc::new(3))).unwrap(), 9);
        assert!(lock(&m.open).is_empty());
    }
}
