//! Where NCCL is faster: the multi-process CUDA path runs the direct (one-shot) schedules only,
//! and a one-shot all-reduce moves n - 1 copies of the input, so on many GPUs a large one loses
//! to NCCL's ring. At the sizes where the tuner (`cuda::schedules::direct_vs_nccl`, the bundled
//! profile) prices NCCL's ring or tree more than [`MARGIN`] faster, a device-buffer collective
//! goes to NCCL, when every rank has a GPU of its own (NCCL refuses shared ones) and every rank
//! found NCCL; `TOPOPLAN_NCCL_BY_SIZE=0` keeps every size on topoplan. The ranks learn that
//! together ([`learn`]), and the rest is a function of the call, so every rank routes alike.

use crate::comm::{lock, Comm};
use crate::error::ApiError;
use crate::op::{Kind, Op};
use planner::schedule::CollectiveKind;
use planner::tuner::Profile;
use runtime::DataType;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// How much faster the tuner must price NCCL before a call leaves topoplan.
pub const MARGIN: f64 = 1.10;

/// What the ranks learn together at their first device-buffer batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Residency {
    /// Two ranks in one process (no CUDA IPC between them), if any.
    pub shared_process: Option<(usize, usize)>,
    /// Whether calls may go to NCCL by size: every rank on a GPU of its own, NCCL found by all.
    pub by_size: bool,
}

/// One rank's part of the exchange: pid, whether it found NCCL, whether its GPU has a UUID,
/// the UUID.
const RECORD: usize = 24;

/// The exchange itself (collective over the CPU communicator).
pub fn learn(comm: &Comm) -> Result<Residency, ApiError> {
    let n = comm.nranks as usize;
    let forwards = params::NCCL_BY_SIZE.flag_or_warn() && ever_faster(comm.nranks);
    let uuid = if forwards {
        cuda::query::device_uuid(comm.device)
    } else {
        None
    };
    let mut mine = [0u8; RECORD];
    mine[..4].copy_from_slice(&std::process::id().to_le_bytes());
    mine[4] = u8::from(forwards && crate::real::get().is_ok());
    mine[5] = u8::from(uuid.is_some());
    mine[8..].copy_from_slice(&uuid.unwrap_or_default());
    let mut all = vec![0u8; RECORD * n];
    {
        let mut g = lock(&comm.cpu);
        let cpu = g
            .as_mut()
            .ok_or_else(|| crate::error::usage("communicator has not joined"))?;
        cpu.all_gather(&mine, &mut all)?;
    }
    Ok(decide(&all.chunks(RECORD).collect::<Vec<_>>()))
}

/// [`Residency`] from every rank's record.
fn decide(recs: &[&[u8]]) -> Residency {
    let n = recs.len();
    let pairs = || (0..n).flat_map(|a| (a + 1..n).map(move |b| (a, b)));
    let shared_process = pairs().find(|&(a, b)| recs[a][..4] == recs[b][..4]);
    let distinct =
        recs.iter().all(|r| r[5] == 1) && pairs().all(|(a, b)| recs[a][8..] != recs[b][8..]);
    Residency {
        shared_process,
        by_size: distinct && recs.iter().all(|r| r[4] == 1),
    }
}

/// Whether NCCL is priced faster at some size on `nranks` GPUs (a large all-reduce, where the
/// one-shot loses most): otherwise the ranks need not look for NCCL at all.
fn ever_faster(nranks: u32) -> bool {
    verdict(CollectiveKind::AllReduce, nranks, 1 << 30).is_some()
}

/// Why `kind` of `bytes` per rank on `nranks` GPUs goes to NCCL, or `None`: it stays.
fn verdict(kind: CollectiveKind, nranks: u32, bytes: u64) -> Option<String> {
    let (ours, nccl) = cuda::schedules::direct_vs_nccl(Profile::bundled(), kind, nranks, bytes)?;
    (nccl * MARGIN < ours).then(|| {
        format!(
            "the tuner prices NCCL's ring or tree at {nccl:.1} us against topoplan's one-shot \
             {ours:.1} us on {nranks} GPUs (TOPOPLAN_NCCL_BY_SIZE=0 keeps it on topoplan)"
        )
    })
}

/// Why this device-buffer call goes to NCCL by size, or `None` (the communicator must have
/// learnt [`Residency::by_size`]).
pub fn reason(comm: &Comm, op: &Op, dtype: DataType, count: usize) -> Option<String> {
    if !comm.gpu_by_size.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    let kind = match op.kind {
        Kind::AllReduce => CollectiveKind::AllReduce,
        Kind::AllGather => CollectiveKind::AllGather,
        Kind::ReduceScatter => CollectiveKind::ReduceScatter,
        Kind::Broadcast => CollectiveKind::Broadcast,
        Kind::Reduce => CollectiveKind::Reduce,
        _ => return None,
    };
    cached_verdict(kind, comm.nranks, (count * dtype.size()) as u64)
}

/// [`verdict`], priced once per (collective, ranks, size): the tuner's candidate list is
/// microseconds of work a call must not pay each time. Bounded: past [`CACHE_MAX`] shapes the
/// cache starts over.
fn cached_verdict(kind: CollectiveKind, nranks: u32, bytes: u64) -> Option<String> {
    type Cache = HashMap<(CollectiveKind, u32, u64), Option<String>>;
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    let key = (kind, nranks, bytes);
    if let Some(v) = lock(cache).get(&key) {
        return v.clone();
    }
    let v = verdict(kind, nranks, bytes);
    let mut c = lock(cache);
    if c.len() >= CACHE_MAX {
        c.clear();
    }
    c.insert(key, v.clone());
    v
}

/// Shapes [`cached_verdict`] keeps at most.
const CACHE_MAX: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(pid: u32, nccl: bool, uuid: Option<u8>) -> Vec<u8> {
        let mut r = vec![0u8; RECORD];
        r[..4].copy_from_slice(&pid.to_le_bytes());
        r[4] = u8::from(nccl);
        r[5] = u8::from(uuid.is_some());
        r[8..].fill(uuid.unwrap_or(0));
        r
    }

    fn decided(recs: &[Vec<u8>]) -> Residency {
        decide(&recs.iter().map(Vec::as_slice).collect::<Vec<_>>())
    }

    #[test]
    fn nccl_takes_calls_only_with_distinct_gpus_and_nccl_everywhere() {
        let ok = [
            rec(1, true, Some(1)),
            rec(2, true, Some(2)),
            rec(3, true, Some(3)),
        ];
        assert_eq!(
            decided(&ok),
            Residency {
                shared_process: None,
                by_size: true
            }
        );
        // Two ranks on one GPU: NCCL refuses them.
        let shared_gpu = [rec(1, true, Some(1)), rec(2, true, Some(1))];
        assert!(!decided(&shared_gpu).by_size);
        // One rank without NCCL, or without a UUID: nobody forwards.
        assert!(!decided(&[rec(1, true, Some(1)), rec(2, false, Some(2))]).by_size);
        assert!(!decided(&[rec(1, true, Some(1)), rec(2, true, None)]).by_size);
        assert_eq!(
            decided(&[
                rec(7, true, Some(1)),
                rec(8, true, Some(2)),
                rec(7, true, Some(3))
            ])
            .shared_process,
            Some((0, 2))
        );
    }

    #[test]
    fn large_many_rank_all_reduce_goes_to_nccl_and_the_rest_stays() {
        let ar = CollectiveKind::AllReduce;
        assert!(verdict(ar, 8, 1 << 30)
            .unwrap()
            .contains("NCCL's ring or tree"));
        assert!(ever_faster(8) && ever_faster(4));
        assert!(
            !ever_faster(2),
            "two ranks: the one-shot wins at every size"
        );
        for sh in [3u32, 10, 16] {
            assert_eq!(verdict(ar, 8, 1 << sh), None, "8 ranks 2^{sh}");
        }
        assert_eq!(verdict(CollectiveKind::AllGather, 8, 1 << 30), None);
        assert_eq!(verdict(CollectiveKind::AllToAll, 8, 1 << 30), None);
        // The cached answer is the priced one, the first time and the next.
        for (n, b) in [(8u32, 1u64 << 30), (8, 1 << 10), (2, 1 << 30)] {
            for _ in 0..2 {
                assert_eq!(
                    cached_verdict(ar, n, b),
                    verdict(ar, n, b),
                    "{n} ranks {b} B"
                );
            }
        }
    }
}
