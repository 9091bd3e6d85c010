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
mod id;

pub use id::{hex, hostname, UniqueId};

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
    /// Rank 0 could not listen: something else holds the address (a launcher that picked a
    /// free port and released it may retry with another).
    #[error("rank 0 cannot listen at {addr}: the address is in use")]
    AddressInUse { addr: String },
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
    let deadline = Instant::now() + timeout;
    let secret = hex(&id.secret);
    if rank == 0 {
        let listener = TcpListener::bind(&id.addr).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                BootstrapError::AddressInUse {
                    addr: id.addr.clone(),
                }
            } else {
                io(format!("rank 0 listening at {}", id.addr), e)
            }
        })?;
        return root(
            listener,
            &secret,
            nranks,
            fingerprint,
            info,
            deadline,
            timeout,
        );
    }
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

fn root(
    listener: TcpListener,
    secret: &str,
    nranks: u32,
    fingerprint: u64,
    info: PeerInfo,
    deadline: Instant,
    timeout: Duration,
) -> Result<Rendezvous, BootstrapError> {
    listener
        .set_nonblocking(true)
        .map_err(|e| io("rank 0 listener", e))?;
    let mut peers: Vec<Option<(PeerInfo, TcpStream)>> = (0..nranks).map(|_| None).collect();
    let mut joined = 1;
    let me = info.clone();
    // Fatal errors are sent to every rank that has joined, then returned.
    let fail = |peers: &mut Vec<Option<(PeerInfo, TcpStream)>>,
                extra: Option<&mut TcpStream>,
                e: BootstrapError| {
        let reason = e.to_string();
        for (_, s) in peers.iter_mut().flatten() {
            let _ = send_msg(
                s,
                &Msg::Refused {
                    reason: reason.clone(),
                },
            );
        }
        if let Some(s) = extra {
            let _ = send_msg(s, &Msg::Refused { reason });
        }
        Err(e)
    };
    while joined < nranks {
        let (mut s, addr) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let missing: Vec<u32> = (1..nranks)
                        .filter(|r| peers[*r as usize].is_none())
                        .collect();
                    return fail(
                        &mut peers,
                        None,
                        BootstrapError::Timeout {
                            doing: format!("waiting for ranks {missing:?} to join"),
                            waited: timeout,
                        },
                    );
                }
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(e) => return Err(io("rank 0 accepting", e)),
        };
        let peer = addr.to_string();
        s.set_nonblocking(false).ok();
        s.set_nodelay(true).ok();
        // A silent connection must not stall the rendezvous for long.
        s.set_read_timeout(Some(remaining(deadline).min(Duration::from_secs(10))))
            .ok();
        let hello = match recv_msg(&mut s, &peer) {
            Ok(m) => m,
            Err(e @ BootstrapError::Version { .. }) => return fail(&mut peers, Some(&mut s), e),
            Err(e) => {
                // Not one of ours (or it gave up): tell it, drop it, keep waiting.
                let _ = send_msg(
                    &mut s,
                    &Msg::Refused {
                        reason: e.to_string(),
                    },
                );
                continue;
            }
        };
        let Msg::Hello {
            secret: theirs,
            nranks: their_n,
            fingerprint: their_fp,
            info,
        } = hello
        else {
            let _ = send_msg(
                &mut s,
                &Msg::Refused {
                    reason: "expected a hello".into(),
                },
            );
            continue;
        };
        if theirs != secret {
            let _ = send_msg(
                &mut s,
                &Msg::Refused {
                    reason: BootstrapError::Secret { peer: peer.clone() }.to_string(),
                },
            );
            continue;
        }
        let r = info.rank;
        if their_n != nranks {
            return fail(
                &mut peers,
                Some(&mut s),
                BootstrapError::WorldSize {
                    rank: r,
                    theirs: their_n,
                    ours: nranks,
                },
            );
        }
        if r >= nranks {
            return fail(
                &mut peers,
                Some(&mut s),
                BootstrapError::RankRange { rank: r, nranks },
            );
        }
        if r == 0 || peers[r as usize].is_some() {
            let first = if r == 0 {
                format!("{} pid {} (rank 0 itself)", me.host, me.pid)
            } else {
                peers[r as usize]
                    .as_ref()
                    .map(|(i, _)| format!("{} pid {}", i.host, i.pid))
                    .unwrap_or_default()
            };
            let e = BootstrapError::DuplicateRank {
                rank: r,
                first,
                second: format!("{} pid {}", info.host, info.pid),
            };
            return fail(&mut peers, Some(&mut s), e);
        }
        if their_fp != fingerprint {
            return fail(
                &mut peers,
                Some(&mut s),
                BootstrapError::ConfigMismatch { rank: r },
            );
        }
        peers[r as usize] = Some((info, s));
        joined += 1;
    }
    let mut table = vec![me];
    let mut links = Vec::new();
    for (info, s) in peers.into_iter().flatten() {
        table.push(info);
        links.push(s);
    }
    let session = hex(&random_secret()[..8]);
    for s in &mut links {
        send_msg(
            s,
            &Msg::Welcome {
                peers: table.clone(),
                session: session.clone(),
            },
        )
        .map_err(|e| io("sending the rank table", e))?;
    }
    Ok(Rendezvous {
        rank: 0,
        peers: table,
        session,
        root_links: links,
        link_to_root: None,
        timeout,
    })
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
