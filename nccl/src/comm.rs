//! Communicators behind `ncclComm_t` handles: the registry that validates every handle, how a
//! rank joins (by unique id, all in one process, by splitting), and their teardown.
//!
//! A handle is a registry key shaped like a pointer, never dereferenced: a destroyed or
//! invented handle is refused with `ncclInvalidArgument`, never followed.

use crate::abi::CommConfig;
use crate::error::{arg, usage, ApiError, MessageSlot};
use crate::real::RealComm;
use runtime::bootstrap::{hex, RootListener, UniqueId};
use runtime::{AbortHandle, Communicator, Config};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

/// Where a communicator is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Init is deferred (inside a group) or running (non-blocking init).
    Joining,
    Ready,
    /// Init or a call failed; every later call reports this.
    Failed(ApiError),
}

pub struct Comm {
    pub handle: usize,
    pub rank: u32,
    pub nranks: u32,
    /// The CUDA device current when the rank joined (-1: none).
    pub device: i32,
    pub config: CommConfig,
    pub state: Mutex<State>,
    pub joined: Condvar,
    /// The CPU runtime's communicator; `None` until joined.
    pub cpu: Mutex<Option<Communicator>>,
    abort: Mutex<Option<AbortHandle>>,
    pub last_error: MessageSlot,
    /// The real NCCL's communicator for the same ranks, made on first need.
    pub real: Mutex<Option<RealComm>>,
    /// Topoplan's CUDA side for device buffers, made on first need (`gpu`).
    pub gpu: Mutex<Option<crate::gpu::rank::GpuRank>>,
    /// (collective, size class) pairs already logged under `TOPOPLAN_DEBUG=INFO`.
    pub logged: Mutex<HashSet<(&'static str, u32)>>,
    pub registered: Mutex<Registered>,
    /// This rank's record of its current call, and rank 0's watchdog (`crate::hang`).
    pub hang: crate::hang::Hang,
    /// Whether device-buffer collectives may go to NCCL at the sizes where it is faster
    /// (`crate::gpu::by_size`), as the ranks learnt together.
    pub gpu_by_size: std::sync::atomic::AtomicBool,
}

/// Registered buffers: handle -> (address, bytes), and the number of the last handle made
/// (handles are never reused while the communicator lives).
pub type Registered = (HashMap<usize, (usize, usize)>, usize);

/// A rank's rendezvous, run now, at `ncclGroupEnd`, or on a background thread.
pub type Join = Box<dyn FnOnce() -> Result<(), ApiError> + Send>;

/// What a rank's failed join reports before its failure becomes visible to the threads that
/// poll the communicator, so none of them reads its state before its message.
pub type OnFail = Box<dyn FnOnce(&Comm, &ApiError) + Send>;

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Comm {
    /// `key`: shared by every rank of the communicator, and by no other (`crate::hang`).
    fn new(rank: u32, nranks: u32, device: i32, config: CommConfig, key: &str) -> Arc<Comm> {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        let handle = 0x7070_0000_0000 + NEXT.fetch_add(1, Ordering::Relaxed) * 16;
        let c = Arc::new(Comm {
            handle,
            rank,
            nranks,
            device,
            config,
            state: Mutex::new(State::Joining),
            joined: Condvar::new(),
            cpu: Mutex::new(None),
            abort: Mutex::new(None),
            last_error: MessageSlot::default(),
            real: Mutex::new(None),
            gpu: Mutex::new(None),
            logged: Mutex::new(HashSet::new()),
            registered: Mutex::new((HashMap::new(), 0)),
            hang: crate::hang::Hang::new(key, handle, rank, nranks),
            gpu_by_size: std::sync::atomic::AtomicBool::new(false),
        });
        lock(registry()).insert(handle, c.clone());
        c
    }

    /// Records the outcome of joining and wakes whoever waits for it.
    pub fn finish_join(&self, r: Result<Communicator, ApiError>) -> Result<(), ApiError> {
        let out = match r {
            Ok(c) => {
                let transport = c.transport_name();
                *lock(&self.abort) = Some(c.abort_handle());
                *lock(&self.cpu) = Some(c);
                *lock(&self.state) = State::Ready;
                crate::knobs::log(
                    crate::knobs::Level::Info,
                    &format!(
                        "comm {:#x} rank {} nRanks {} device {}: joined over {transport}; host-buffer collectives run on topoplan's CPU runtime{}",
                        self.handle,
                        self.rank,
                        self.nranks,
                        self.device,
                        self.config.name.as_ref().map(|n| format!(" (commName {n})")).unwrap_or_default()
                    ),
                );
                Ok(())
            }
            Err(e) => {
                *lock(&self.state) = State::Failed(e.clone());
                Err(e)
            }
        };
        self.joined.notify_all();
        out
    }

    /// Blocks until the rank has joined (deferred or non-blocking init), then says whether
    /// the communicator is usable.
    pub fn wait_ready(&self) -> Result<(), ApiError> {
        let mut s = lock(&self.state);
        loop {
            match &*s {
                State::Ready => return Ok(()),
                State::Failed(e) => return Err(e.clone()),
                State::Joining => {
                    s = self.joined.wait(s).unwrap_or_else(|p| p.into_inner());
                }
            }
        }
    }

    /// `ncclCommGetAsyncError`'s answer.
    pub fn async_result(&self) -> Result<bool, ApiError> {
        match &*lock(&self.state) {
            State::Ready => Ok(true),
            State::Joining => Ok(false),
            State::Failed(e) => Err(e.clone()),
        }
    }

    /// The ranks were found calling different things on the CUDA path (`gpu::check_peers`):
    /// the communicator is unusable, whatever the error's code.
    pub fn fail(&self, e: &ApiError) {
        let mut s = lock(&self.state);
        if *s == State::Ready {
            *s = State::Failed(e.clone());
        }
    }

    /// A call failed because a peer died or never answered: the communicator is unusable, and
    /// later calls and `ncclCommGetAsyncError` report it. Other failures (bad arguments, a
    /// forwarded call NCCL refused) leave it usable, as NCCL's do.
    pub fn poison(&self, e: &ApiError) {
        // The runtime poisons its communicator after a failure mid-call (ranks that disagree
        // leave half-matched messages behind): that is unusable too.
        let runtime_poisoned = lock(&self.cpu)
            .as_ref()
            .is_some_and(|c| c.poisoned().is_some());
        if matches!(e, ApiError::Remote(_)) || runtime_poisoned {
            let mut s = lock(&self.state);
            if *s == State::Ready {
                *s = State::Failed(e.clone());
            }
        }
    }

    /// Wakes every wait of a call in flight on another thread (bounded: every runtime wait
    /// checks the flag).
    pub fn abort(&self) {
        if let Some(a) = &*lock(&self.abort) {
            a.abort();
        }
    }
}

fn registry() -> &'static Mutex<HashMap<usize, Arc<Comm>>> {
    static R: OnceLock<Mutex<HashMap<usize, Arc<Comm>>>> = OnceLock::new();
    R.get_or_init(Mutex::default)
}

/// The live communicator behind `handle`.
pub fn lookup(handle: usize) -> Result<Arc<Comm>, ApiError> {
    if handle == 0 {
        return Err(arg("comm is NULL"));
    }
    lock(registry()).get(&handle).cloned().ok_or_else(|| {
        arg(format!(
            "comm {handle:#x} is not a live communicator (destroyed, aborted, or never created)"
        ))
    })
}

/// Takes `handle` out of the registry: later calls with it are refused.
pub fn remove(handle: usize) -> Result<Arc<Comm>, ApiError> {
    let c = lookup(handle)?;
    lock(registry()).remove(&handle);
    Ok(c)
}

/// Rendezvous listeners bound by `ncclGetUniqueId`, by id text, until rank 0 joins with them.
fn roots() -> &'static Mutex<HashMap<String, RootListener>> {
    static R: OnceLock<Mutex<HashMap<String, RootListener>>> = OnceLock::new();
    R.get_or_init(Mutex::default)
}

/// The address other hosts reach this one at: `NCCL_COMM_ID`'s host if set, else the source
/// address of the default route (no packet is sent), else loopback.
fn advertised_host() -> String {
    let probe = || -> Option<String> {
        let u = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
        u.connect("192.0.2.1:9").ok()?;
        Some(u.local_addr().ok()?.ip().to_string())
    };
    probe().unwrap_or_else(|| "127.0.0.1".into())
}

/// `ncclGetUniqueId`: binds rank 0's rendezvous listener now (port 0, or `NCCL_COMM_ID`'s),
/// keeps it for rank 0's init, and returns the id text every rank joins with.
pub fn new_unique_id() -> Result<String, ApiError> {
    unique_id_at(std::env::var("NCCL_COMM_ID").ok())
}

/// The id of a split's new communicator, made by its first rank. Never at `NCCL_COMM_ID`: that
/// address is the parent's, already bound, and every color needs one of its own.
fn split_unique_id() -> Result<String, ApiError> {
    unique_id_at(None)
}

fn unique_id_at(fixed: Option<String>) -> Result<String, ApiError> {
    let secret = UniqueId::new("x:0").secret;
    let (bind, host) = match fixed {
        Some(a) if !a.is_empty() => {
            let host = a
                .rsplit_once(':')
                .map(|(h, _)| h.to_string())
                .ok_or_else(|| usage(format!("NCCL_COMM_ID={a:?}: expected <host>:<port>")))?;
            (a, host)
        }
        _ => ("0.0.0.0:0".to_string(), advertised_host()),
    };
    let root = RootListener::bind(&bind, secret)?;
    let port = root
        .id()
        .addr
        .rsplit_once(':')
        .map(|(_, p)| p.to_string())
        .unwrap_or_default();
    let text = format!("topoplan1:{}@{host}:{port}", hex(&secret));
    lock(roots()).insert(text.clone(), root);
    Ok(text)
}

fn runtime_config() -> Result<Config, ApiError> {
    Config::from_env().map_err(ApiError::from)
}

/// A rank's handle, made at once; `join` does the rendezvous (now, at `ncclGroupEnd`, or on a
/// background thread for a non-blocking config), calling `on_fail` on a failure before it
/// publishes it.
pub fn start_rank(
    id_text: &str,
    nranks: u32,
    rank: u32,
    device: i32,
    config: CommConfig,
    on_fail: Option<OnFail>,
) -> Result<(Arc<Comm>, Join), ApiError> {
    let id: UniqueId = id_text
        .parse()
        .map_err(|e| arg(format!("commId is not a topoplan unique id: {e}")))?;
    let cfg = runtime_config()?;
    let comm = Comm::new(rank, nranks, device, config, &id.job_tag());
    let root = if rank == 0 {
        lock(roots()).remove(id_text)
    } else {
        None
    };
    let c = comm.clone();
    let join: Join = Box::new(move || {
        // Whoever waits on this rank (a non-blocking init's poller, a group) must hear of a
        // panic too, or it would wait forever.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Communicator::init_rank_on(root, &id, nranks, rank, cfg).map_err(ApiError::from)
        }))
        .unwrap_or_else(|p| {
            Err(ApiError::Internal(format!(
                "init panicked: {}",
                panic_text(&p)
            )))
        });
        if let (Err(e), Some(f)) = (&r, on_fail) {
            f(&c, e);
        }
        c.finish_join(r)
    });
    Ok((comm, join))
}

/// The text of a panic's payload.
pub fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Refuses a world of `nranks` that this process could not hold: rank 0 keeps a connection and
/// a table entry for every other rank, and every rank plans for all of them.
pub fn check_rank_count(nranks: u64, root: bool) -> Result<(), ApiError> {
    runtime::limits::check_world(nranks, root).map_err(|e| arg(e.to_string()))
}

/// Refuses `ncclCommInitAll` of more ranks than this process's memory holds (every rank is a
/// thread here, with its connections to every other).
pub fn check_local_ranks(n: u64) -> Result<(), ApiError> {
    runtime::limits::check_threads(n).map_err(|e| arg(e.to_string()))
}

/// `ncclCommInitAll`: `n` ranks in this process, joined at once.
pub fn init_all(devices: &[i32]) -> Result<Vec<Arc<Comm>>, ApiError> {
    let cfg = runtime_config()?;
    let n = devices.len() as u32;
    let cpus = Communicator::init_all(n, cfg)?;
    let key = UniqueId::new("x:0").job_tag();
    Ok(cpus
        .into_iter()
        .zip(devices)
        .enumerate()
        .map(|(r, (c, d))| {
            let comm = Comm::new(r as u32, n, *d, CommConfig::default(), &key);
            let _ = comm.finish_join(Ok(c));
            comm
        })
        .collect())
}

/// Every rank's part of `ncclCommSplit`, run as one call on the parent (collective): the
/// colors and keys are all-gathered over the parent, each color's first rank (by key, then
/// parent rank) binds a rendezvous listener whose id is all-gathered too, and each rank joins
/// its color. `None` for `NCCL_SPLIT_NOCOLOR`.
pub fn split(
    parent: &Comm,
    color: i32,
    key: i32,
    config: CommConfig,
) -> Result<Option<(Arc<Comm>, Join)>, ApiError> {
    let n = parent.nranks as usize;
    let me = parent.rank as usize;
    let mut table = vec![0u8; 8 * n];
    let mine: Vec<u8> = [color.to_le_bytes(), key.to_le_bytes()].concat();
    {
        let mut g = lock(&parent.cpu);
        let cpu = g
            .as_mut()
            .ok_or_else(|| usage("the parent has not joined"))?;
        cpu.all_gather(&mine, &mut table)?;
    }
    let entry = |r: usize| {
        let c = i32::from_le_bytes(table[8 * r..8 * r + 4].try_into().expect("4"));
        let k = i32::from_le_bytes(table[8 * r + 4..8 * r + 8].try_into().expect("4"));
        (c, k)
    };
    // Members of each color in their new order.
    let members = |c: i32| {
        let mut v: Vec<usize> = (0..n).filter(|r| entry(*r).0 == c).collect();
        v.sort_by_key(|r| (entry(*r).1, *r));
        v
    };
    let leads: Vec<bool> = (0..n)
        .map(|r| entry(r).0 >= 0 && members(entry(r).0)[0] == r)
        .collect();
    const ID_BYTES: usize = 96;
    let mut id_slot = [0u8; ID_BYTES];
    // A leader that cannot listen still takes part in the exchange below (an empty id), so its
    // color's other ranks fail at once instead of waiting for the timeout.
    let mine = leads[me].then(|| {
        split_unique_id().and_then(|t| {
            if t.len() <= ID_BYTES {
                Ok(t)
            } else {
                Err(ApiError::Internal(format!(
                    "id {t:?} is over {ID_BYTES} bytes"
                )))
            }
        })
    });
    if let Some(Ok(text)) = &mine {
        id_slot[..text.len()].copy_from_slice(text.as_bytes());
    }
    let mut ids = vec![0u8; ID_BYTES * n];
    {
        let mut g = lock(&parent.cpu);
        let cpu = g
            .as_mut()
            .ok_or_else(|| usage("the parent has not joined"))?;
        cpu.all_gather(&id_slot, &mut ids)?;
    }
    if let Some(Err(e)) = mine {
        return Err(e);
    }
    if color == crate::abi::SPLIT_NOCOLOR {
        return Ok(None);
    }
    if color < 0 {
        return Err(arg(format!(
            "color {color} is negative and not NCCL_SPLIT_NOCOLOR"
        )));
    }
    let group = members(color);
    let lead = group[0];
    let raw = &ids[ID_BYTES * lead..ID_BYTES * (lead + 1)];
    let end = raw.iter().position(|b| *b == 0).unwrap_or(ID_BYTES);
    let text = String::from_utf8_lossy(&raw[..end]).into_owned();
    if text.is_empty() {
        return Err(ApiError::System(format!(
            "rank {lead} of the parent, the first of color {color}, could not open the new communicator's rendezvous (its own error says why)"
        )));
    }
    let new_rank = group.iter().position(|r| *r == me).expect("a member") as u32;
    start_rank(
        &text,
        group.len() as u32,
        new_rank,
        parent.device,
        config,
        None,
    )
    .map(Some)
}
