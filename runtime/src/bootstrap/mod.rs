//! TCP rendezvous: rank 0 listens at the unique id's address, every other rank connects, says
//! who it is, and gets the table of all ranks back. Every wait is bounded by the configured
//! timeout.
//!
//! Frames: `b"TOPOPLAN"`, the id's 128-bit secret, version (u32 LE), payload length (u32 LE, at
//! most 1 MiB), JSON payload. The secret comes before anything a peer could disagree about, so a
//! frame is authenticated before it is interpreted ([`read_frame`]): a connection whose first
//! frame is not ours (garbage, another job's secret, too slow) is dropped and the rendezvous goes
//! on; nothing it sends is read past the secret. Each accepted connection has [`GREETING`] to
//! present its first frame, read on its own thread ([`gate`]), so a silent or trickling
//! connection stalls nobody and never extends the rendezvous' deadline.
//!
//! Errors are fatal for the whole job when the peer belongs to it (right secret) but disagrees
//! (world size, duplicate rank, configuration fingerprint, protocol version): rank 0 fails and
//! tells every rank already connected. A connection that is refused gets a frame whose secret
//! is all zeros, which can carry nothing but the reason (it must not learn the secret).

mod frame;
mod gate;
mod gather;
mod handoff;
mod id;
mod root;

pub use frame::{read_frame, write_frame, FrameError, HEADER_BYTES, MAGIC, PROTOCOL_VERSION};
pub use gate::{GREETING, MAX_PENDING};
pub use handoff::{fresh_id_file, wait_for_id_file, write_id_file, ID_FILE_VAR};
pub use id::{hex, hostname, UniqueId};
pub use root::{rendezvous_root, RootListener};

use frame::{recv_msg, send_msg};
use id::random_secret;
use serde::{Deserialize, Serialize};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// `now + t`, or far in the future when that is past what a clock can say (a timeout of
/// 10^19 seconds means "never", not a panic).
pub fn deadline_after(t: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(t)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(now)
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootstrapError {
    #[error("rank {rank} says the world has {theirs} ranks, rank 0 says {ours}")]
    WorldSize { rank: u32, theirs: u32, ours: u32 },
    #[error("rank {rank} joined twice (from {first} and from {second})")]
    DuplicateRank {
        rank: u32,
        first: String,
        second: String,
    },
    #[error("rank {rank} is not below the world size {nranks}")]
    RankRange { rank: u32, nranks: u32 },
    #[error("{peer} speaks bootstrap protocol version {theirs}, this build speaks {ours}")]
    Version {
        peer: String,
        theirs: u32,
        ours: u32,
    },
    #[error("rank {rank}'s configuration (TOPOPLAN_ALGO/PROTO/CHANNELS/PLAN/SLOT_BYTES) differs from rank 0's")]
    ConfigMismatch { rank: u32 },
    #[error("{peer} presented a wrong secret: it belongs to another job (or another unique id)")]
    Secret { peer: String },
    #[error("{peer} sent something that is not a topoplan bootstrap frame: {detail}")]
    Garbled { peer: String, detail: String },
    #[error("rank 0 refused this rank: {0}")]
    Rejected(String),
    #[error("timed out after {waited:?} {doing}")]
    Timeout { doing: String, waited: Duration },
    #[error("bad unique id {0:?}: expected topoplan1:<32 hex digits>@<host:port>")]
    BadId(String),
    #[error("environment: {0}")]
    Env(String),
    #[error("{doing}: {detail}")]
    Io { doing: String, detail: String },
    /// Rank 0 could not listen: something else holds the address it was given.
    #[error("rank 0 cannot listen at {addr}: the address is in use (another job, or this one started twice?)")]
    AddressInUse { addr: String },
    /// An id at port 0 names no listener: only [`RootListener::bind`] takes port 0, and the
    /// ranks join with the id it returns.
    #[error("rank {rank} was given {addr}: port 0 is not rank 0's real port (bind a RootListener and hand out its id)")]
    PortZero { rank: u32, addr: String },
    /// A launcher waited for rank 0's id file ([`ID_FILE_VAR`]) and rank 0 exited first.
    #[error("rank 0 exited ({status}) before writing its unique id to {path}")]
    RootExited { status: String, path: String },
}

fn io(doing: impl Into<String>, e: impl std::fmt::Display) -> BootstrapError {
    BootstrapError::Io {
        doing: doing.into(),
        detail: e.to_string(),
    }
}

/// One rank as the others see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerInfo {
    pub rank: u32,
    pub host: String,
    pub pid: u32,
    /// Data-plane TCP listener (`ip:port`).
    pub listen: String,
}

#[derive(Debug, Serialize, Deserialize)]
enum Msg {
    Hello {
        nranks: u32,
        fingerprint: u64,
        info: PeerInfo,
    },
    Welcome {
        peers: Vec<PeerInfo>,
        /// Random per rendezvous: names this session's shared-memory files, so a file left by
        /// an earlier run with the same id can never be mistaken for this one's.
        session: String,
    },
    Refused {
        reason: String,
    },
    /// Data-plane connection greeting.
    Link {
        rank: u32,
    },
    Barrier,
    /// All-gather: one rank's contribution (hex), sent to rank 0.
    Gather {
        rank: u32,
        data: String,
    },
    /// All-gather: every rank's contribution in rank order (hex), sent by rank 0.
    Gathered {
        table: Vec<String>,
    },
}

/// Largest contribution of one rank to [`Rendezvous::all_gather`]: the whole table, hex-encoded
/// in one frame, must stay under the frame limit for 8 ranks.
pub const MAX_GATHER_BYTES: usize = 32 << 10;

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

/// The result of a rendezvous: every rank's info, and (on every rank) the open connection
/// used for barriers (rank 0 holds one per other rank).
#[derive(Debug)]
pub struct Rendezvous {
    pub rank: u32,
    pub peers: Vec<PeerInfo>,
    /// Random name of this rendezvous (see `Msg::Welcome`).
    pub session: String,
    root_links: Vec<TcpStream>,
    link_to_root: Option<TcpStream>,
    secret: [u8; 16],
    timeout: Duration,
}

impl Rendezvous {
    /// Blocks until every rank has called `barrier` (bounded by the timeout).
    pub fn barrier(&mut self) -> Result<(), BootstrapError> {
        let deadline = deadline_after(self.timeout);
        let secret = self.secret;
        if let Some(s) = &mut self.link_to_root {
            send_msg(s, &secret, &Msg::Barrier).map_err(|e| io("barrier: writing to rank 0", e))?;
            match recv_msg(s, &secret, "rank 0", deadline)? {
                Msg::Barrier => Ok(()),
                Msg::Refused { reason } => Err(BootstrapError::Rejected(reason)),
                other => Err(BootstrapError::Garbled {
                    peer: "rank 0".into(),
                    detail: format!("{other:?} during a barrier"),
                }),
            }
        } else {
            for s in &mut self.root_links {
                let peer = s.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                match recv_msg(s, &secret, &peer, deadline)? {
                    Msg::Barrier => {}
                    other => {
                        return Err(BootstrapError::Garbled {
                            peer,
                            detail: format!("{other:?} during a barrier"),
                        })
                    }
                }
            }
            for s in &mut self.root_links {
                send_msg(s, &secret, &Msg::Barrier)
                    .map_err(|e| io("barrier: writing to a rank", e))?;
            }
            Ok(())
        }
    }
}

/// Connects to rank 0 at `id.addr` by `deadline`, retrying while it is not up yet.
fn connect_root(
    id: &UniqueId,
    deadline: Instant,
    timeout: Duration,
) -> Result<TcpStream, BootstrapError> {
    let addrs: Vec<SocketAddr> = id
        .addr
        .to_socket_addrs()
        .map_err(|e| io(format!("resolving {}", id.addr), e))?
        .collect();
    loop {
        let step = deadline
            .saturating_duration_since(Instant::now())
            .clamp(Duration::from_millis(1), Duration::from_secs(2));
        if let Some(s) = addrs
            .iter()
            .find_map(|a| TcpStream::connect_timeout(a, step).ok())
        {
            s.set_nodelay(true).ok();
            return Ok(s);
        }
        if Instant::now() >= deadline {
            return Err(BootstrapError::Timeout {
                doing: format!("connecting to rank 0 at {}", id.addr),
                waited: timeout,
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Joins the rendezvous of `id` as `rank` of `nranks`; `info.listen` must already be bound.
/// Rank 0 binds `id.addr` here ([`RootListener::bind`], then [`rendezvous_root`]); a rank 0
/// that has to hand out its address after binding (port 0) binds the [`RootListener`] itself.
pub fn rendezvous(
    id: &UniqueId,
    rank: u32,
    nranks: u32,
    fingerprint: u64,
    info: PeerInfo,
    timeout: Duration,
) -> Result<Rendezvous, BootstrapError> {
    if rank >= nranks {
        return Err(BootstrapError::RankRange { rank, nranks });
    }
    if id.port() == Some(0) {
        return Err(BootstrapError::PortZero {
            rank,
            addr: id.addr.clone(),
        });
    }
    if rank == 0 {
        return rendezvous_root(
            RootListener::bind(&id.addr, id.secret)?,
            nranks,
            fingerprint,
            info,
            timeout,
        );
    }
    let deadline = deadline_after(timeout);
    let mut s = connect_root(id, deadline, timeout)?;
    let hello = Msg::Hello {
        nranks,
        fingerprint,
        info,
    };
    send_msg(&mut s, &id.secret, &hello).map_err(|e| io("sending hello to rank 0", e))?;
    match recv_msg(&mut s, &id.secret, "rank 0", deadline) {
        Ok(Msg::Welcome { peers, session }) => Ok(Rendezvous {
            rank,
            peers,
            session,
            root_links: Vec::new(),
            link_to_root: Some(s),
            secret: id.secret,
            timeout,
        }),
        Ok(Msg::Refused { reason }) => Err(BootstrapError::Rejected(reason)),
        Ok(other) => Err(BootstrapError::Garbled {
            peer: "rank 0".into(),
            detail: format!("unexpected {other:?}"),
        }),
        Err(BootstrapError::Timeout { doing, .. }) => Err(BootstrapError::Timeout {
            doing: format!("{doing} (not all ranks joined?)"),
            waited: timeout,
        }),
        Err(e) => Err(e),
    }
}

/// Data plane: greets a peer on a new connection (the connecting side).
pub fn link_greet(s: &mut TcpStream, id: &UniqueId, rank: u32) -> std::io::Result<()> {
    send_msg(s, &id.secret, &Msg::Link { rank })
}

/// Data plane: accepts the connections of the ranks in `expect` on `listener`, each greeted
/// with `id`'s secret ([`link_greet`]), by `deadline`. Strangers (garbage, another secret, an
/// unexpected rank, silence past [`GREETING`]) are dropped and the wait goes on.
pub fn accept_links(
    listener: &TcpListener,
    id: &UniqueId,
    expect: &[u32],
    deadline: Instant,
    timeout: Duration,
) -> Result<Vec<(u32, TcpStream)>, BootstrapError> {
    listener
        .set_nonblocking(true)
        .map_err(|e| io("data listener", e))?;
    let mut gate = gate::Gate::new(id.secret);
    let mut want: Vec<u32> = expect.to_vec();
    let mut got = Vec::new();
    while !want.is_empty() {
        match gate.poll(listener, deadline) {
            Ok(Some(g)) => {
                if let Ok(Msg::Link { rank }) = g.msg {
                    if let Some(i) = want.iter().position(|&x| x == rank) {
                        want.swap_remove(i);
                        got.push((rank, g.stream));
                    }
                }
            }
            Ok(None) => {
                if Instant::now() >= deadline {
                    return Err(BootstrapError::Timeout {
                        doing: format!("waiting for data connections from ranks {want:?}"),
                        waited: timeout,
                    });
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(io("accepting data connections", e)),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests;
