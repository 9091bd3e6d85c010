//! The public [`Communicator`]: one rank's handle on a group of ranks.
//!
//! Create one per rank: [`Communicator::init_all`] for N ranks as threads of this process
//! (like `ncclCommInitAll`), [`Communicator::from_env`] in each process of a torchrun-style job,
//! or [`Communicator::init_rank`] with a [`UniqueId`] handed out by rank 0. Every collective
//! comes in an out-of-place form (`send`, `recv` buffers) and an in-place form (`*_in_place`),
//! takes any element count (0, 1, not divisible by the rank count) and any [`Element`] type.
//! [`Communicator::group`] batches several operations into one execution, which is what
//! send/recv exchanges need.
//!
//! A communicator is used by one thread at a time (`&mut self`); [`AbortHandle`] is the way
//! another thread stops it. After any error the communicator is poisoned: peers may hold
//! half-finished messages, so every later call fails too.

use crate::config::Config;
use crate::element::Element;
use crate::error::CommError;
use crate::exec::PortSource;
use crate::plan::Plans;
use crate::protocol::{Fifo, HeapMem};
use crate::transport::{RecvPort, SendPort, Transport};
use crate::types::ReduceOp;
use planner::schedule::{Collective, CollectiveKind};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use crate::bootstrap::UniqueId;
pub use crate::group::Group;

mod run;

/// Stops a communicator from another thread: every wait of its current and future calls
/// returns [`CommError::Aborted`].
#[derive(Clone, Debug)]
pub struct AbortHandle(Arc<AtomicBool>);

impl AbortHandle {
    pub fn abort(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Connection ends, cached; a rank's connection to itself is a private heap FIFO.
struct Ports {
    rank: u32,
    transport: Box<dyn Transport>,
    sends: HashMap<(u32, u32), Arc<dyn SendPort>>,
    recvs: HashMap<(u32, u32), Arc<dyn RecvPort>>,
    loopback: HashMap<u32, Arc<Fifo<HeapMem>>>,
    nslots: u32,
    slot_bytes: usize,
}

impl Ports {
    fn loop_fifo(&mut self, channel: u32) -> Arc<Fifo<HeapMem>> {
        let (n, b) = (self.nslots, self.slot_bytes);
        self.loopback
            .entry(channel)
            .or_insert_with(|| Arc::new(Fifo::new(HeapMem::new(n, b))))
            .clone()
    }
}

impl PortSource for Ports {
    fn send(&mut self, channel: u32, to: u32) -> Result<Arc<dyn SendPort>, CommError> {
        if to == self.rank {
            return Ok(self.loop_fifo(channel));
        }
        if let Some(p) = self.sends.get(&(channel, to)) {
            return Ok(p.clone());
        }
        let p = self.transport.send_port(channel, to)?;
        self.sends.insert((channel, to), p.clone());
        Ok(p)
    }
    fn recv(&mut self, channel: u32, from: u32) -> Result<Arc<dyn RecvPort>, CommError> {
        if from == self.rank {
            return Ok(self.loop_fifo(channel));
        }
        if let Some(p) = self.recvs.get(&(channel, from)) {
            return Ok(p.clone());
        }
        let p = self.transport.recv_port(channel, from)?;
        self.recvs.insert((channel, from), p.clone());
        Ok(p)
    }
}

/// Makes room for `bytes` in `v`, or says why not: past the memory available, or refused by the
/// allocator (an abort otherwise).
pub(crate) fn reserve(v: &mut Vec<u8>, bytes: usize, what: &str) -> Result<(), CommError> {
    if bytes <= v.capacity() {
        return Ok(());
    }
    crate::limits::check_memory(what, Some(bytes as u64))
        .map_err(|e| CommError::InvalidArgument(e.to_string()))?;
    v.try_reserve_exact(bytes - v.len())
        .map_err(|e| CommError::InvalidArgument(format!("{what}: {bytes} bytes: {e}")))
}

/// One rank of a communicator.
pub struct Communicator {
    rank: u32,
    nranks: u32,
    cfg: Config,
    ports: Ports,
    plans: Plans,
    seq: u64,
    abort: Arc<AtomicBool>,
    poisoned: Option<String>,
    /// Reused staging buffers (in-place inputs, schedule scratch): fresh large allocations
    /// would page-fault on every call.
    pool: Vec<Vec<u8>>,
    /// Schedule fingerprints by the address of the plan cache's `Arc` (schedules stay cached).
    fingerprints: HashMap<usize, u64>,
    /// Keeps transport state (threads, mappings) alive as long as the communicator.
    _keep: Vec<Box<dyn std::any::Any + Send>>,
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.rank)
            .field("nranks", &self.nranks)
            .field("transport", &self.ports.transport.name())
            .field("seq", &self.seq)
            .finish()
    }
}

impl Communicator {
    /// `n` ranks as threads of this process (like `ncclCommInitAll`): returns one communicator
    /// per rank; move each to its own thread.
    pub fn init_all(n: u32, cfg: Config) -> Result<Vec<Communicator>, CommError> {
        if n == 0 {
            return Err(CommError::InvalidArgument(
                "a communicator needs at least one rank".into(),
            ));
        }
        let hub = crate::transport::local::LocalHub::new(
            cfg.slots,
            cfg.slot_bytes + crate::protocol::SLOT_HEADER,
        );
        let planner = Plans::cpu_planner(n);
        (0..n)
            .map(|rank| {
                let t = crate::transport::local::LocalTransport {
                    hub: hub.clone(),
                    rank,
                };
                Communicator::with_transport(
                    rank,
                    n,
                    cfg.clone(),
                    Box::new(t),
                    Vec::new(),
                    Some(planner.clone()),
                )
            })
            .collect()
    }

    /// Builds a communicator over an established transport.
    pub(crate) fn with_transport(
        rank: u32,
        nranks: u32,
        cfg: Config,
        transport: Box<dyn Transport>,
        keep: Vec<Box<dyn std::any::Any + Send>>,
        planner: Option<Arc<Option<planner::plan::Planner>>>,
    ) -> Result<Self, CommError> {
        let plans = Plans::new(nranks, &cfg, planner)?;
        let ports = Ports {
            rank,
            transport,
            sends: HashMap::new(),
            recvs: HashMap::new(),
            loopback: HashMap::new(),
            nslots: cfg.slots,
            slot_bytes: cfg.slot_bytes + crate::protocol::SLOT_HEADER,
        };
        Ok(Communicator {
            rank,
            nranks,
            cfg,
            ports,
            plans,
            seq: 0,
            abort: Arc::new(AtomicBool::new(false)),
            poisoned: None,
            fingerprints: HashMap::new(),
            pool: Vec::new(),
            _keep: keep,
        })
    }

    pub fn rank(&self) -> u32 {
        self.rank
    }
    pub fn nranks(&self) -> u32 {
        self.nranks
    }
    /// `threads`, `shm`, `tcp` or `shm+tcp`.
    pub fn transport_name(&self) -> &'static str {
        self.ports.transport.name()
    }
    pub fn config(&self) -> &Config {
        &self.cfg
    }
    /// Number of collectives issued so far (the next one's sequence number).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Why the communicator is unusable, after a failure mid-call or an abort.
    pub fn poisoned(&self) -> Option<&str> {
        if self.abort.load(Ordering::Relaxed) {
            return Some(self.poisoned.as_deref().unwrap_or("aborted"));
        }
        self.poisoned.as_deref()
    }

    /// The first peer found gone (its process exited or its connection closed), as the error
    /// a call waiting on it would get; `what` names the work in flight (e.g. the GPU calls
    /// enqueued since `seq`). A few cheap checks, no message: for callers whose waits the
    /// runtime does not see, such as kernels spinning on a dead peer.
    pub fn check_peers(&self, what: &str, seq: u64) -> Result<(), CommError> {
        let ctx = crate::exec::Ctx {
            what: what.to_string(),
            seq,
            rank: self.rank,
        };
        (0..self.nranks)
            .filter(|p| *p != self.rank)
            .try_for_each(|p| {
                self.ports
                    .transport
                    .check_peer(p)
                    .map_err(|e| ctx.gone(p, e))
            })
    }

    /// A handle that aborts this communicator from any thread.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle(self.abort.clone())
    }
    /// Aborts: wakes every wait with an error and poisons the communicator.
    pub fn abort(&self) {
        self.abort.store(true, Ordering::Relaxed);
    }

    /// The schedule this communicator would run for `coll` at `bytes` bytes per rank.
    pub fn schedule_for(
        &mut self,
        coll: &Collective,
        bytes: u64,
    ) -> Result<Arc<planner::schedule::Schedule>, CommError> {
        self.plans.schedule(coll, bytes)
    }

    /// Starts a group: operations added to it run together when [`Group::run`] is called.
    pub fn group<'b>(&mut self) -> Group<'_, 'b> {
        Group {
            comm: self,
            work: Vec::new(),
        }
    }

    /// Every blocking call is a group of one operation: `add` adds it.
    fn one<'b>(
        &mut self,
        add: impl FnOnce(&mut Group<'_, 'b>) -> Result<(), CommError>,
    ) -> Result<(), CommError> {
        let mut g = self.group();
        add(&mut g)?;
        g.run()
    }

    pub fn all_reduce<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        self.one(|g| g.all_reduce(send, recv, op))
    }
    pub fn all_reduce_in_place<T: Element>(
        &mut self,
        buf: &mut [T],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        self.one(|g| g.all_reduce_in_place(buf, op))
    }
    /// `recv` holds `nranks * send.len()` elements, rank r's contribution at `r * send.len()`.
    pub fn all_gather<T: Element>(&mut self, send: &[T], recv: &mut [T]) -> Result<(), CommError> {
        self.one(|g| g.all_gather(send, recv))
    }
    /// `buf` holds `nranks * count` elements; this rank's contribution is already at `rank * count`.
    pub fn all_gather_in_place<T: Element>(&mut self, buf: &mut [T]) -> Result<(), CommError> {
        self.one(|g| g.all_gather_in_place(buf))
    }
    /// `send` holds `nranks * recv.len()` elements; rank r receives the reduction of block r.
    pub fn reduce_scatter<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        self.one(|g| g.reduce_scatter(send, recv, op))
    }
    /// `buf` holds `nranks * count` elements; the result lands at `rank * count`.
    pub fn reduce_scatter_in_place<T: Element>(
        &mut self,
        buf: &mut [T],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        self.one(|g| g.reduce_scatter_in_place(buf, op))
    }
    /// `send` is read on the root only (but must have `recv.len()` elements everywhere).
    pub fn broadcast<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        root: u32,
    ) -> Result<(), CommError> {
        self.one(|g| g.broadcast(send, recv, root))
    }
    pub fn broadcast_in_place<T: Element>(
        &mut self,
        buf: &mut [T],
        root: u32,
    ) -> Result<(), CommError> {
        self.one(|g| g.broadcast_in_place(buf, root))
    }
    /// The result is written on the root only.
    pub fn reduce<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        root: u32,
    ) -> Result<(), CommError> {
        self.one(|g| g.reduce(send, recv, op, root))
    }
    pub fn reduce_in_place<T: Element>(
        &mut self,
        buf: &mut [T],
        op: ReduceOp,
        root: u32,
    ) -> Result<(), CommError> {
        self.one(|g| g.reduce_in_place(buf, op, root))
    }
    /// `send` and `recv` hold `nranks * count` elements: block r of `send` goes to rank r, block
    /// s of `recv` comes from rank s.
    pub fn all_to_all<T: Element>(&mut self, send: &[T], recv: &mut [T]) -> Result<(), CommError> {
        self.one(|g| g.all_to_all(send, recv))
    }
    pub fn all_to_all_in_place<T: Element>(&mut self, buf: &mut [T]) -> Result<(), CommError> {
        self.one(|g| g.all_to_all_in_place(buf))
    }
    /// A blocking send. Two ranks that send to each other must use a [`Group`] instead.
    pub fn send<T: Element>(&mut self, buf: &[T], peer: u32) -> Result<(), CommError> {
        self.one(|g| g.send(buf, peer))
    }
    pub fn recv<T: Element>(&mut self, buf: &mut [T], peer: u32) -> Result<(), CommError> {
        self.one(|g| g.recv(buf, peer))
    }
    /// Runs the IR-level `sendrecv` collective: rank `i` sends `send` to `coll.send_peers[i]`
    /// and receives from whoever sends to it (the planner's schedule, not grouped p2p).
    pub fn sendrecv_collective<T: Element>(
        &mut self,
        send_peers: &[Option<u32>],
        send: &[T],
        recv: &mut [T],
    ) -> Result<(), CommError> {
        let mut c = Collective::new(CollectiveKind::SendRecv);
        c.send_peers = send_peers.to_vec();
        self.one(|g| {
            g.raw(
                c,
                T::DTYPE,
                ReduceOp::Sum,
                send.len(),
                Some(bytemuck::cast_slice(send)),
                bytemuck::cast_slice_mut(recv),
            )
        })
    }

    /// A pooled copy of `src`; an error, not an abort, when memory cannot hold it.
    pub(crate) fn copy_of(&mut self, src: &[u8]) -> Result<Vec<u8>, CommError> {
        let mut v = self.take_buf();
        reserve(&mut v, src.len(), "an in-place call's copy of its input")?;
        v.extend_from_slice(src);
        Ok(v)
    }

    /// An empty pooled buffer (the largest one kept).
    fn take_buf(&mut self) -> Vec<u8> {
        let mut v = self.pool.pop().unwrap_or_default();
        v.clear();
        v
    }

    fn give_buf(&mut self, v: Vec<u8>) {
        if self.pool.len() < 4 {
            self.pool.push(v);
            self.pool.sort_by_key(|v| v.capacity());
        }
    }

    fn check_usable(&self) -> Result<(), CommError> {
        if let Some(p) = &self.poisoned {
            return Err(CommError::Poisoned(p.clone()));
        }
        if self.abort.load(Ordering::Relaxed) {
            return Err(CommError::Poisoned("aborted".into()));
        }
        Ok(())
    }
}
