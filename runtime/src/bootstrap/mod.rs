//! TCP rendezvous: rank 0 listens at the unique id's address, every other rank connects, says
//! who it is, and gets the table of all ranks back. Every connection carries the magic
//! `TOPOPLAN`, the bootstrap protocol version and the id's 128-bit secret; anything else is
//! refused with a clear error, and every wait is bounded by the configured timeout.
//!
//! Frames: `b"TOPOPLAN"`, version (u32 LE), payload length (u32 LE, at most 1 MiB), JSON payload.
//!
//! Errors are fatal for the whole job when the peer belongs to it (right secret) but disagrees
//! (world size, duplicate rank, configuration fingerprint, protocol version): rank 0 fails and
//! tells every rank already connected. A connection with a wrong secret belongs to another job:
//! it is told so and dropped, and the rendezvous goes on. So is a connection that sends garbage.

mod gather;
mod handoff;
mod id;
mod root;

pub use handoff::{fresh_id_file, wait_for_id_file, write_id_file, ID_FILE_VAR};
pub use id::{hex, hostname, UniqueId};
pub use root::{rendezvous_root, RootListener};

use id::random_secret;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

pub const MAGIC: &[u8; 8] = b"TOPOPLAN";
/// Version of the bootstrap and data-plane wire formats. Bump on any incompatible change.
pub const PROTOCOL_VERSION: u32 = 1;
const MAX_FRAME: u32 = 1 << 20;

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
        secret: String,
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
        secret: String,
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

pub fn write_frame(s: &mut TcpStream, payload: &[u8]) -> std::io::Result<()> {
    let mut f = Vec::with_capacity(16 + payload.len());
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    f.extend_from_slice(payload);
    s.write_all(&f)
}

/// Why a frame could not be read.
#[derive(Debug)]
pub enum FrameError {
    Io(std::io::Error),
    NotOurs(String),
    Version(u32),
}

pub fn read_frame(s: &mut TcpStream) -> Result<Vec<u8>, FrameError> {
    let mut h = [0u8; 16];
    s.read_exact(&mut h).map_err(FrameError::Io)?;
    if &h[..8] != MAGIC {
        return Err(FrameError::NotOurs(format!(
            "magic {:?}",
            String::from_utf8_lossy(&h[..8])
        )));
    }
    let v = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
    if v != PROTOCOL_VERSION {
        return Err(FrameError::Version(v));
    }
    let n = u32::from_le_bytes(h[12..16].try_into().expect("4 bytes"));
    if n > MAX_FRAME {
        return Err(FrameError::NotOurs(format!("frame of {n} bytes")));
    }
    let mut p = vec![0u8; n as usize];
    s.read_exact(&mut p).map_err(FrameError::Io)?;
    Ok(p)
}

fn send_msg(s: &mut TcpStream, m: &Msg) -> std::io::Result<()> {
    write_frame(s, &serde_json::to_vec(m).expect("messages serialize"))
}

fn recv_msg(s: &mut TcpStream, peer: &str) -> Result<Msg, BootstrapError> {
    match read_frame(s) {
        Ok(p) => serde_json::from_slice(&p).map_err(|e| BootstrapError::Garbled {
            peer: peer.into(),
            detail: e.to_string(),
        }),
        Err(FrameError::Io(e))
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Err(BootstrapError::Timeout {
                doing: format!("waiting for a message from {peer}"),
                waited: Duration::ZERO,
            })
        }
        Err(FrameError::Io(e)) => Err(io(format!("reading from {peer}"), e)),
        Err(FrameError::NotOurs(d)) => Err(BootstrapError::Garbled {
            peer: peer.into(),
            detail: d,
        }),
        Err(FrameError::Version(v)) => Err(BootstrapError::Version {
            peer: peer.into(),
            theirs: v,
            ours: PROTOCOL_VERSION,
        }),
    }
}

fn remaining(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
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
    timeout: Duration,
}

impl Rendezvous {
    /// Blocks until every rank has called `barrier` (bounded by the timeout).
    pub fn barrier(&mut self) -> Result<(), BootstrapError> {
        let deadline = Instant::now() + self.timeout;
        if let Some(s) = &mut self.link_to_root {
            send_msg(s, &Msg::Barrier).map_err(|e| io("barrier: writing to rank 0", e))?;
            s.set_read_timeout(Some(remaining(deadline))).ok();
            match recv_msg(s, "rank 0")? {
                Msg::Barrier => Ok(()),
                Msg::Refused { reason } => Err(BootstrapError::Rejected(reason)),
                other => Err(BootstrapError::Garbled {
                    peer: "rank 0".into(),
                    detail: format!("{other:?} during a barrier"),
                }),
            }
        } else {
            for s in &mut self.root_links {
                s.set_read_timeout(Some(remaining(deadline))).ok();
                let peer = s.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                match recv_msg(s, &peer)? {
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
                send_msg(s, &Msg::Barrier).map_err(|e| io("barrier: writing to a rank", e))?;
            }
            Ok(())
        }
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
    let deadline = Instant::now() + timeout;
    let secret = hex(&id.secret);
    // Connect, retrying while rank 0 is not up yet.
    let addrs: Vec<SocketAddr> = id
        .addr
        .to_socket_addrs()
        .map_err(|e| io(format!("resolving {}", id.addr), e))?
        .collect();
    let mut s = loop {
        let step = remaining(deadline).min(Duration::from_secs(2));
        if let Some(s) = addrs
            .iter()
            .find_map(|a| TcpStream::connect_timeout(a, step).ok())
        {
            break s;
        }
        if Instant::now() >= deadline {
            return Err(BootstrapError::Timeout {
                doing: format!("connecting to rank 0 at {}", id.addr),
                waited: timeout,
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    s.set_nodelay(true).ok();
    send_msg(
        &mut s,
        &Msg::Hello {
            secret,
            nranks,
            fingerprint,
            info,
        },
    )
    .map_err(|e| io("sending hello to rank 0", e))?;
    s.set_read_timeout(Some(remaining(deadline))).ok();
    match recv_msg(&mut s, "rank 0") {
        Ok(Msg::Welcome { peers, session }) => Ok(Rendezvous {
            rank,
            peers,
            session,
            root_links: Vec::new(),
            link_to_root: Some(s),
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
    send_msg(
        s,
        &Msg::Link {
            secret: hex(&id.secret),
            rank,
        },
    )
}

/// Data plane: reads and checks a greeting (the accepting side); returns the peer's rank.
pub fn link_accept(s: &mut TcpStream, id: &UniqueId) -> Result<u32, BootstrapError> {
    let peer = s.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    match recv_msg(s, &peer)? {
        Msg::Link { secret, rank } if secret == hex(&id.secret) => Ok(rank),
        Msg::Link { .. } => Err(BootstrapError::Secret { peer }),
        other => Err(BootstrapError::Garbled {
            peer,
            detail: format!("unexpected {other:?}"),
        }),
    }
}

#[cfg(test)]
mod tests;
