//! Checked collective runs, shared by the tests and `topoplan run`: deterministic random input
//! per rank, a sentinel-filled output (so an element nobody wrote shows up), the run through the
//! public API, and an element-by-element comparison with [`crate::reference`].

use crate::comm::Communicator;
use crate::error::CommError;
use crate::reference;
use crate::types::{DataType, ReduceOp};
use planner::schedule::{Collective, CollectiveKind};

/// Byte written into output buffers before a run; 0x7B never equals a value of the test data
/// in a way that hides a missing write (test data are small integers or powers of two).
pub const SENTINEL: u8 = 0x7B;

/// One checked collective call.
#[derive(Clone, Debug)]
pub struct Case {
    pub coll: Collective,
    pub dtype: DataType,
    pub op: ReduceOp,
    /// Elements per rank (see `Collective::blocks`).
    pub count: usize,
    pub in_place: bool,
    pub seed: u64,
}

/// The collective `kind` as `topoplan run` and the tests run it on `n` ranks: root 0 for
/// broadcast/reduce, a ring shift (`i` sends to `i+1`) for sendrecv, like nccl-tests.
pub fn collective_for(kind: CollectiveKind, n: u32, root: u32) -> Collective {
    match kind {
        CollectiveKind::Broadcast | CollectiveKind::Reduce => Collective::rooted(kind, root),
        CollectiveKind::SendRecv => {
            let mut c = Collective::new(kind);
            c.send_peers = (0..n).map(|i| (n > 1).then_some((i + 1) % n)).collect();
            c
        }
        _ => Collective::new(kind),
    }
}

impl Case {
    /// Rank `rank`'s input buffer.
    pub fn input(&self, n: u32, rank: u32) -> Vec<u8> {
        let (il, _) = reference::buffer_lens(&self.coll, n, self.count);
        reference::random_input_bytes(self.dtype, self.seed, rank, il, self.op)
    }

    /// Expected outputs of every rank (`None`: unspecified).
    pub fn expected(&self, n: u32) -> Vec<Option<Vec<u8>>> {
        let inputs: Vec<Vec<u8>> = (0..n).map(|r| self.input(n, r)).collect();
        reference::expected_bytes(self.dtype, &self.coll, self.op, self.count, &inputs)
    }

    /// The buffers rank `rank` passes: `(send, recv)`; `send` is `None` in place.
    pub fn buffers(&self, n: u32, rank: u32) -> (Option<Vec<u8>>, Vec<u8>) {
        let input = self.input(n, rank);
        let (_, ol) = reference::buffer_lens(&self.coll, n, self.count);
        let es = self.dtype.size();
        if !self.in_place {
            return (Some(input), vec![SENTINEL; ol * es]);
        }
        let buf = match self.coll.kind {
            CollectiveKind::AllGather => {
                let mut b = vec![SENTINEL; ol * es];
                let at = rank as usize * self.count * es;
                b[at..at + input.len()].copy_from_slice(&input);
                b
            }
            _ => input,
        };
        (None, buf)
    }

    /// Runs the case on `comm` with buffers from [`Case::buffers`].
    pub fn run(
        &self,
        comm: &mut Communicator,
        send: Option<&[u8]>,
        recv: &mut [u8],
    ) -> Result<(), CommError> {
        let mut g = comm.group();
        g.raw(
            self.coll.clone(),
            self.dtype,
            self.op,
            self.count,
            send,
            recv,
        )?;
        g.run()
    }

    /// The part of `recv` that holds the result.
    pub fn result<'a>(&self, rank: u32, recv: &'a [u8]) -> &'a [u8] {
        if self.in_place && self.coll.kind == CollectiveKind::ReduceScatter {
            let (es, c) = (self.dtype.size(), self.count);
            &recv[rank as usize * c * es..(rank as usize + 1) * c * es]
        } else {
            recv
        }
    }

    /// Wrong elements of rank `rank`'s result against its expected output (exact comparison:
    /// the test data make every reduction order exact).
    pub fn wrong(&self, rank: u32, recv: &[u8], expected: Option<&[u8]>) -> u64 {
        match expected {
            Some(want) => reference::count_wrong(self.dtype, self.result(rank, recv), want, 0.0),
            None => 0,
        }
    }
}

/// Runs `case` on every communicator of `comms` (ranks of one process), one thread each, and
/// checks each rank's result against the reference: `Err` names the first rank that failed or
/// wrote a wrong element.
pub fn run_on_threads(comms: Vec<Communicator>, case: &Case) -> Result<(), String> {
    let n = comms.len() as u32;
    let want = case.expected(n);
    let hs: Vec<_> = comms
        .into_iter()
        .map(|mut c| {
            let (case, want) = (case.clone(), want.clone());
            std::thread::spawn(move || -> Result<(), String> {
                let r = c.rank();
                let (send, mut recv) = case.buffers(n, r);
                case.run(&mut c, send.as_deref(), &mut recv)
                    .map_err(|e| format!("rank {r}: {e}"))?;
                match case.wrong(r, &recv, want[r as usize].as_deref()) {
                    0 => Ok(()),
                    w => Err(format!("rank {r}: {w} wrong elements")),
                }
            })
        })
        .collect();
    hs.into_iter()
        .try_for_each(|h| h.join().map_err(|_| "rank panicked".to_string())?)
}
