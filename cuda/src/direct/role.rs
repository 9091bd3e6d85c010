//! What each rank does in a one-shot collective on the direct path: a [`DirectRole`] (pure,
//! emulated in `tests.rs` against `runtime::reference`), and NCCL's in-place convention.

use planner::schedule::CollectiveKind;

/// What one rank does in a direct collective, in elements (see `TdArgs` in direct.cu).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirectRole {
    /// Elements of every pushed message.
    pub n: u64,
    /// Bit p: push a message to rank p, read from `input + p * send_stride`.
    pub send_mask: u32,
    /// Bit s: receive rank s's message.
    pub recv_mask: u32,
    pub send_stride: u64,
    /// true: out = own (op) received messages; false: each message lands at
    /// `output + s * gather_stride`.
    pub reduce: bool,
    /// Reduce: own contribution at `input + local_off`.
    pub local_off: u64,
    pub gather_stride: u64,
    /// Copy `input + copy_src [0, n)` to `output + copy_dst` (all-gather / broadcast root /
    /// all-to-all's own block, out of place).
    pub copy_dst: Option<u64>,
    pub copy_src: u64,
    /// Divide the reduction by the rank count (average).
    pub avg: bool,
}

impl DirectRole {
    /// In place, whether this rank's received result lands on input it still pushes: the
    /// all-reduce's sum over the whole input, or the all-to-all's block s, which is also what
    /// goes to rank s. Its receiver then waits for its own sender, segment by segment (the
    /// sender pushes segment j of every block before it publishes j).
    pub fn overwrites_what_it_pushes(&self) -> bool {
        let both = self.send_mask != 0 && self.recv_mask != 0;
        let sum_over_input = self.reduce && self.send_stride == 0 && self.local_off == 0;
        let block_to_block =
            !self.reduce && self.send_stride != 0 && self.send_stride == self.gather_stride;
        both && (sum_over_input || block_to_block)
    }
}

/// Rank `rank`'s part of a one-shot `kind` over `nranks` ranks with `count` elements per rank
/// (nccl-tests' count), in place or not. `None` for collectives the path does not run.
pub fn role(
    kind: CollectiveKind,
    root: u32,
    rank: u32,
    nranks: u32,
    count: u64,
    in_place: bool,
    avg: bool,
) -> Option<DirectRole> {
    let others = ((1u32 << nranks) - 1) & !(1 << rank);
    let mut r = DirectRole {
        n: count,
        send_mask: 0,
        recv_mask: 0,
        send_stride: 0,
        reduce: true,
        local_off: 0,
        gather_stride: 0,
        copy_dst: None,
        copy_src: 0,
        avg: false,
    };
    match kind {
        CollectiveKind::AllReduce => {
            r.send_mask = others;
            r.recv_mask = others;
            r.avg = avg;
        }
        CollectiveKind::ReduceScatter => {
            r.send_mask = others;
            r.recv_mask = others;
            r.send_stride = count;
            r.local_off = rank as u64 * count;
            r.avg = avg;
        }
        CollectiveKind::AllGather => {
            r.send_mask = others;
            r.recv_mask = others;
            r.reduce = false;
            r.gather_stride = count;
            r.copy_dst = (!in_place).then_some(rank as u64 * count);
        }
        CollectiveKind::Broadcast => {
            r.reduce = false;
            if rank == root {
                r.send_mask = others;
                r.copy_dst = (!in_place).then_some(0);
            } else {
                r.recv_mask = 1 << root;
            }
        }
        CollectiveKind::Reduce => {
            if rank == root {
                r.recv_mask = others;
                r.avg = avg;
            } else {
                r.send_mask = 1 << root;
            }
        }
        CollectiveKind::AllToAll => {
            // Block q of the input goes to rank q, which stores it as block `rank`; in place
            // the own block is already where it belongs.
            r.send_mask = others;
            r.recv_mask = others;
            r.reduce = false;
            r.send_stride = count;
            r.gather_stride = count;
            r.copy_src = rank as u64 * count;
            r.copy_dst = (!in_place).then_some(rank as u64 * count);
        }
        CollectiveKind::SendRecv => return None,
    }
    Some(r)
}

/// This rank's (input, output) pointers, in place or not (NCCL's aliasing conventions): the
/// inverse of [`is_in_place`].
pub fn rank_ptrs(
    kind: CollectiveKind,
    rank: u32,
    count: u64,
    elem: u64,
    in_place: bool,
    inp: u64,
    out: u64,
) -> (u64, u64) {
    let block = rank as u64 * count * elem;
    match (in_place, kind) {
        (false, _) => (inp, out),
        (true, CollectiveKind::AllGather) => (out + block, out),
        (true, CollectiveKind::ReduceScatter) => (inp, inp + block),
        (true, _) => (out, out),
    }
}

/// NCCL's in-place convention for rank `rank` with `block` bytes per rank block: the input is
/// this rank's block of the output (all-gather), the output this rank's block of the input
/// (reduce-scatter), or they coincide.
pub fn is_in_place(kind: CollectiveKind, rank: u32, block: u64, input: u64, output: u64) -> bool {
    let at = rank as u64 * block;
    match kind {
        CollectiveKind::AllGather => input == output + at,
        CollectiveKind::ReduceScatter => output == input + at,
        _ => input == output,
    }
}
