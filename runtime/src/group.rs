//! [`Group`]: a batch of operations that run together (NCCL's group calls), and the argument
//! checks and in-place layouts of every collective.

use crate::comm::Communicator;
use crate::element::Element;
use crate::error::CommError;
use crate::types::{DataType, ReduceOp};
use planner::schedule::{Collective, CollectiveKind};

pub(crate) enum Input<'b> {
    Borrowed(&'b [u8]),
    Owned(Vec<u8>),
}

pub(crate) struct CollWork<'b> {
    pub(crate) coll: Collective,
    pub(crate) count: usize,
    pub(crate) dtype: DataType,
    pub(crate) op: ReduceOp,
    pub(crate) input: Input<'b>,
    pub(crate) output: &'b mut [u8],
}

pub(crate) enum Work<'b> {
    Coll(CollWork<'b>),
    /// A call made of this group's sends and receives (gather, scatter) that all ranks must
    /// agree on, as a collective.
    Agree(crate::exec::agree::Call),
    Send {
        data: &'b [u8],
        peer: u32,
    },
    Recv {
        data: &'b mut [u8],
        peer: u32,
    },
}

/// A batch of operations that run together (NCCL's group calls). Collectives run in the order
/// added; sends and receives progress concurrently with them and with each other, so a rank may
/// send to and receive from the same peers in one group without deadlock. Ranks must add the
/// same collectives in the same order; sends to a peer match that peer's receives in order.
/// Nothing runs until [`Group::run`]; dropping a group discards it.
pub struct Group<'c, 'b> {
    pub(crate) comm: &'c mut Communicator,
    pub(crate) work: Vec<Work<'b>>,
}

impl std::fmt::Debug for Group<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("rank", &self.comm.rank())
            .field("ops", &self.work.len())
            .finish()
    }
}

fn bad(msg: String) -> CommError {
    CommError::InvalidArgument(msg)
}

impl<'b> Group<'_, 'b> {
    /// Executes every operation of the group.
    pub fn run(self) -> Result<(), CommError> {
        self.comm.execute(self.work)
    }

    fn n(&self) -> usize {
        self.comm.nranks() as usize
    }

    pub(crate) fn push_coll(
        &mut self,
        coll: Collective,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
        input: Input<'b>,
        output: &'b mut [u8],
    ) -> Result<(), CommError> {
        let (ib, ob) = coll.blocks(self.comm.nranks());
        let es = dtype.size();
        let ilen = match &input {
            Input::Borrowed(b) => b.len(),
            Input::Owned(v) => v.len(),
        };
        let fits = |blocks: u32, len: usize| {
            (blocks as usize)
                .checked_mul(count)
                .and_then(|x| x.checked_mul(es))
                == Some(len)
        };
        if !fits(ib, ilen) || !fits(ob, output.len()) {
            return Err(bad(format!(
                "{}: buffers of {} and {} bytes do not fit {count} elements per rank",
                coll.kind.name(),
                ilen,
                output.len()
            )));
        }
        if let Some(r) = coll.root {
            if r >= self.comm.nranks() {
                return Err(bad(format!(
                    "{}: root {r} is not below {} ranks",
                    coll.kind.name(),
                    self.comm.nranks()
                )));
            }
        }
        self.work.push(Work::Coll(CollWork {
            coll,
            count,
            dtype,
            op,
            input,
            output,
        }));
        Ok(())
    }

    /// Adds collective `coll` over byte buffers of `dtype` elements, `count` per rank (see
    /// [`Collective::blocks`] for the buffer sizes). `send: None` is the in-place form, with
    /// NCCL's layout: all-gather finds this rank's input at `rank * count` of `recv`,
    /// reduce-scatter leaves its result there, the others use `recv` as input and output.
    pub fn raw(
        &mut self,
        coll: Collective,
        dtype: DataType,
        op: ReduceOp,
        count: usize,
        send: Option<&'b [u8]>,
        recv: &'b mut [u8],
    ) -> Result<(), CommError> {
        if let Some(send) = send {
            return self.push_coll(coll, count, dtype, op, Input::Borrowed(send), recv);
        }
        {
            let (n, r, es) = (self.n(), self.comm.rank() as usize, dtype.size());
            let need = match coll.kind {
                CollectiveKind::AllGather
                | CollectiveKind::ReduceScatter
                | CollectiveKind::AllToAll => n.checked_mul(count),
                _ => Some(count),
            }
            .and_then(|x| x.checked_mul(es));
            if need != Some(recv.len()) {
                let need = need.map_or("more than 2^64".to_string(), |b| b.to_string());
                return Err(bad(format!(
                    "{} in place: buffer of {} bytes, {need} expected for {count} elements per rank",
                    coll.kind.name(),
                    recv.len()
                )));
            }
            let (input, output) = match coll.kind {
                CollectiveKind::AllGather => (
                    self.comm
                        .copy_of(&recv[r * count * es..(r + 1) * count * es])?,
                    recv,
                ),
                CollectiveKind::ReduceScatter => {
                    let input = self.comm.copy_of(recv)?;
                    (input, &mut recv[r * count * es..(r + 1) * count * es])
                }
                _ => (self.comm.copy_of(recv)?, recv),
            };
            self.push_coll(coll, count, dtype, op, Input::Owned(input), output)
        }
    }

    fn typed<T: Element>(
        &mut self,
        coll: Collective,
        op: ReduceOp,
        count: usize,
        send: Option<&'b [T]>,
        recv: &'b mut [T],
    ) -> Result<(), CommError> {
        self.raw(
            coll,
            T::DTYPE,
            op,
            count,
            send.map(bytemuck::cast_slice),
            bytemuck::cast_slice_mut(recv),
        )
    }

    pub fn all_reduce<T: Element>(
        &mut self,
        send: &'b [T],
        recv: &'b mut [T],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        self.typed(
            Collective::new(CollectiveKind::AllReduce),
            op,
            send.len(),
            Some(send),
            recv,
        )
    }
    pub fn all_reduce_in_place<T: Element>(
        &mut self,
        buf: &'b mut [T],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        self.typed(
            Collective::new(CollectiveKind::AllReduce),
            op,
            buf.len(),
            None,
            buf,
        )
    }
    pub fn all_gather<T: Element>(
        &mut self,
        send: &'b [T],
        recv: &'b mut [T],
    ) -> Result<(), CommError> {
        self.typed(
            Collective::new(CollectiveKind::AllGather),
            ReduceOp::Sum,
            send.len(),
            Some(send),
            recv,
        )
    }
    pub fn all_gather_in_place<T: Element>(&mut self, buf: &'b mut [T]) -> Result<(), CommError> {
        let count = self.divided("all-gather", buf.len())?;
        self.typed(
            Collective::new(CollectiveKind::AllGather),
            ReduceOp::Sum,
            count,
            None,
            buf,
        )
    }
    pub fn reduce_scatter<T: Element>(
        &mut self,
        send: &'b [T],
        recv: &'b mut [T],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        self.typed(
            Collective::new(CollectiveKind::ReduceScatter),
            op,
            recv.len(),
            Some(send),
            recv,
        )
    }
    pub fn reduce_scatter_in_place<T: Element>(
        &mut self,
        buf: &'b mut [T],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        let count = self.divided("reduce-scatter", buf.len())?;
        self.typed(
            Collective::new(CollectiveKind::ReduceScatter),
            op,
            count,
            None,
            buf,
        )
    }
    pub fn broadcast<T: Element>(
        &mut self,
        send: &'b [T],
        recv: &'b mut [T],
        root: u32,
    ) -> Result<(), CommError> {
        self.typed(
            Collective::rooted(CollectiveKind::Broadcast, root),
            ReduceOp::Sum,
            recv.len(),
            Some(send),
            recv,
        )
    }
    pub fn broadcast_in_place<T: Element>(
        &mut self,
        buf: &'b mut [T],
        root: u32,
    ) -> Result<(), CommError> {
        self.typed(
            Collective::rooted(CollectiveKind::Broadcast, root),
            ReduceOp::Sum,
            buf.len(),
            None,
            buf,
        )
    }
    pub fn reduce<T: Element>(
        &mut self,
        send: &'b [T],
        recv: &'b mut [T],
        op: ReduceOp,
        root: u32,
    ) -> Result<(), CommError> {
        self.typed(
            Collective::rooted(CollectiveKind::Reduce, root),
            op,
            recv.len(),
            Some(send),
            recv,
        )
    }
    pub fn reduce_in_place<T: Element>(
        &mut self,
        buf: &'b mut [T],
        op: ReduceOp,
        root: u32,
    ) -> Result<(), CommError> {
        self.typed(
            Collective::rooted(CollectiveKind::Reduce, root),
            op,
            buf.len(),
            None,
            buf,
        )
    }
    pub fn all_to_all<T: Element>(
        &mut self,
        send: &'b [T],
        recv: &'b mut [T],
    ) -> Result<(), CommError> {
        let count = self.divided("all-to-all", recv.len())?;
        self.typed(
            Collective::new(CollectiveKind::AllToAll),
            ReduceOp::Sum,
            count,
            Some(send),
            recv,
        )
    }
    pub fn all_to_all_in_place<T: Element>(&mut self, buf: &'b mut [T]) -> Result<(), CommError> {
        let count = self.divided("all-to-all", buf.len())?;
        self.typed(
            Collective::new(CollectiveKind::AllToAll),
            ReduceOp::Sum,
            count,
            None,
            buf,
        )
    }
    pub fn send<T: Element>(&mut self, buf: &'b [T], peer: u32) -> Result<(), CommError> {
        self.peer_ok("send", peer)?;
        self.work.push(Work::Send {
            data: bytemuck::cast_slice(buf),
            peer,
        });
        Ok(())
    }
    pub fn recv<T: Element>(&mut self, buf: &'b mut [T], peer: u32) -> Result<(), CommError> {
        self.peer_ok("recv", peer)?;
        self.work.push(Work::Recv {
            data: bytemuck::cast_slice_mut(buf),
            peer,
        });
        Ok(())
    }

    /// Declares that this group's sends and receives make up one call that every rank makes
    /// alike (`name`, `count` and `root`, as for a collective): ranks that disagree fail before
    /// any data moves, each naming the call (`exec::agree`).
    pub fn agree(&mut self, name: &str, count: u64, root: Option<u32>) {
        self.work.push(Work::Agree(crate::exec::agree::Call::new(
            name, count, 0xff, 0xff, root, 0,
        )));
    }

    fn peer_ok(&self, what: &str, peer: u32) -> Result<(), CommError> {
        if peer >= self.comm.nranks() {
            return Err(bad(format!(
                "{what}: peer {peer} is not below {} ranks",
                self.comm.nranks()
            )));
        }
        Ok(())
    }
    fn divided(&self, what: &str, len: usize) -> Result<usize, CommError> {
        if !len.is_multiple_of(self.n()) {
            return Err(bad(format!(
                "{what}: buffer of {len} elements is not nranks ({}) × count",
                self.n()
            )));
        }
        Ok(len / self.n())
    }
}
