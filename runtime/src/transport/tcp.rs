//! Ranks on different hosts: one TCP connection per pair of ranks, carrying every channel.
//!
//! The receiver keeps each connection's slot FIFO in its own memory. A reader thread per socket
//! takes data frames off the wire into the FIFO of their channel; the sender may only send
//! message `i` once the receiver's `head` (sent back in credit frames) is above `i - slots`, so
//! the reader never finds a full FIFO and never blocks, and the socket always drains. This is
//! the same head/tail protocol as in shared memory, with `tail` implied by the byte stream.
//!
//! Frames: kind (u8: 1 data, 2 credit), channel (u32), a (u64: data tag / credit head),
//! length (u32), payload.

use super::{Bell, Consumer, PortError, PortResult, RecvPort, SendPort};
use crate::error::CommError;
use crate::protocol::{Fifo, HeapMem};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const DATA: u8 = 1;
const CREDIT: u8 = 2;
const FRAME_HEADER: usize = 17;

/// One channel of a peer connection.
struct Chan {
    inbox: Fifo<HeapMem>,
    /// The peer's head for our messages on this channel (from credit frames).
    credit: AtomicU64,
    /// Messages we have sent on this channel.
    sent: AtomicU64,
}

/// The connection to one peer.
pub struct Peer {
    writer: Mutex<TcpStream>,
    chans: Mutex<HashMap<u32, Arc<Chan>>>,
    dead: Mutex<Option<String>>,
    nslots: u32,
    slot_bytes: usize,
    /// Rung by the reader thread after every frame, so idle ranks sleep until data or credit.
    bell: Arc<Bell>,
}

impl Peer {
    fn chan(&self, c: u32) -> Arc<Chan> {
        let mut m = self.chans.lock().unwrap_or_else(|p| p.into_inner());
        m.entry(c)
            .or_insert_with(|| {
                Arc::new(Chan {
                    inbox: Fifo::new(HeapMem::new(self.nslots, self.slot_bytes)),
                    credit: AtomicU64::new(0),
                    sent: AtomicU64::new(0),
                })
            })
            .clone()
    }
    fn gone(&self) -> Option<String> {
        self.dead.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    fn die(&self, why: String) {
        let mut d = self.dead.lock().unwrap_or_else(|p| p.into_inner());
        if d.is_none() {
            *d = Some(why);
        }
        drop(d);
        self.bell.ring();
    }
    fn write(&self, frame: &[u8]) -> PortResult<()> {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        w.write_all(frame).map_err(|e| {
            self.die(format!("connection lost: {e}"));
            PortError::Gone(format!("connection lost: {e}"))
        })
    }
    /// Reader thread body: frames into FIFOs and credits, until the socket closes.
    fn read_loop(self: Arc<Self>, mut r: TcpStream, peer: u32) {
        let why = loop {
            let mut h = [0u8; FRAME_HEADER];
            if let Err(e) = r.read_exact(&mut h) {
                break match e.kind() {
                    std::io::ErrorKind::UnexpectedEof => {
                        format!("rank {peer} closed the connection")
                    }
                    _ => format!("connection to rank {peer} failed: {e}"),
                };
            }
            let kind = h[0];
            let c = u32::from_le_bytes(h[1..5].try_into().expect("4"));
            let a = u64::from_le_bytes(h[5..13].try_into().expect("8"));
            let len = u32::from_le_bytes(h[13..17].try_into().expect("4")) as usize;
            let ch = self.chan(c);
            match kind {
                DATA => {
                    if !ch.inbox.send_ready() || len > ch.inbox.capacity() {
                        break format!(
                            "rank {peer} overran channel {c}'s slots (protocol violation)"
                        );
                    }
                    let mut res = Ok(());
                    let posted = ch.inbox.post(a, len, |slot| res = r.read_exact(slot));
                    if let Err(e) = res {
                        break format!("rank {peer} closed the connection mid-message ({e})");
                    }
                    if let Err(e) = posted {
                        break e.to_string();
                    }
                }
                CREDIT if len == 0 => ch.credit.store(a, Ordering::Release),
                _ => break format!("rank {peer} sent a garbled frame (kind {kind})"),
            }
            self.bell.ring();
        };
        self.die(why);
    }
}

/// How long a closed connection's reader keeps draining a silent peer before it lets go.
const LINGER: std::time::Duration = std::time::Duration::from_secs(10);

/// Connections to the peers reached over TCP.
#[derive(Default)]
pub struct TcpLinks {
    peers: HashMap<u32, Arc<Peer>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    pub bell: Arc<Bell>,
}

impl TcpLinks {
    /// Takes over an authenticated connection to `peer` and starts its reader thread.
    pub fn add(
        &mut self,
        peer: u32,
        s: TcpStream,
        nslots: u32,
        slot_bytes: usize,
    ) -> Result<(), CommError> {
        s.set_nodelay(true).ok();
        s.set_read_timeout(None).ok();
        let r = s
            .try_clone()
            .map_err(|e| CommError::Transport(format!("socket to rank {peer}: {e}")))?;
        let p = Arc::new(Peer {
            writer: Mutex::new(s),
            chans: Mutex::new(HashMap::new()),
            dead: Mutex::new(None),
            nslots,
            slot_bytes,
            bell: self.bell.clone(),
        });
        let p2 = p.clone();
        let t = std::thread::Builder::new()
            .name(format!("topoplan-tcp-{peer}"))
            .spawn(move || p2.read_loop(r, peer))
            .map_err(|e| CommError::Transport(format!("reader thread: {e}")))?;
        self.peers.insert(peer, p);
        self.threads.push(t);
        Ok(())
    }

    pub fn has(&self, peer: u32) -> bool {
        self.peers.contains_key(&peer)
    }

    fn peer(&self, p: u32) -> Result<&Arc<Peer>, CommError> {
        self.peers
            .get(&p)
            .ok_or_else(|| CommError::Transport(format!("no TCP connection to rank {p}")))
    }

    pub fn send_port(&self, channel: u32, to: u32) -> Result<Arc<dyn SendPort>, CommError> {
        let peer = self.peer(to)?.clone();
        let chan = peer.chan(channel);
        Ok(Arc::new(TcpSend {
            peer,
            chan,
            channel,
        }))
    }

    pub fn recv_port(&self, channel: u32, from: u32) -> Result<Arc<dyn RecvPort>, CommError> {
        let peer = self.peer(from)?.clone();
        let chan = peer.chan(channel);
        Ok(Arc::new(TcpRecv {
            peer,
            chan,
            channel,
        }))
    }

    pub fn check(&self, peer: u32) -> PortResult<()> {
        match self.peers.get(&peer).and_then(|p| p.gone()) {
            Some(why) => Err(PortError::Gone(why)),
            None => Ok(()),
        }
    }
}

impl Drop for TcpLinks {
    /// A graceful close that never waits: send FIN after everything queued (a peer may still be
    /// reading our last messages), and leave each reader thread to drain what the peer still
    /// sends until it closes too, so that the socket is never closed with unread bytes (the
    /// kernel would reset the connection and the peer could lose our last data). A peer that
    /// never closes (stopped, hung) costs its reader [`LINGER`] of silence, not the caller.
    fn drop(&mut self) {
        for p in self.peers.values() {
            let w = p.writer.lock().unwrap_or_else(|e| e.into_inner());
            let _ = w.shutdown(Shutdown::Write);
            // The reader shares the socket: its next wait ends after LINGER of silence.
            let _ = w.set_read_timeout(Some(LINGER));
        }
        // Detached: each ends at the peer's FIN, an error, or LINGER.
        self.threads.clear();
    }
}

struct TcpSend {
    peer: Arc<Peer>,
    chan: Arc<Chan>,
    channel: u32,
}

impl SendPort for TcpSend {
    fn ready(&self) -> PortResult<bool> {
        if let Some(why) = self.peer.gone() {
            return Err(PortError::Gone(why));
        }
        let i = self.chan.sent.load(Ordering::Relaxed);
        Ok(i < self.chan.credit.load(Ordering::Acquire) + self.peer.nslots as u64)
    }
    fn post(&self, tag: u64, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> PortResult<()> {
        let cap = self.capacity();
        if len > cap {
            return Err(PortError::Protocol(format!(
                "message of {len} bytes exceeds the {cap}-byte slot"
            )));
        }
        let mut f = vec![0u8; FRAME_HEADER + len];
        f[0] = DATA;
        f[1..5].copy_from_slice(&self.channel.to_le_bytes());
        f[5..13].copy_from_slice(&tag.to_le_bytes());
        f[13..17].copy_from_slice(&(len as u32).to_le_bytes());
        fill(&mut f[FRAME_HEADER..]);
        self.peer.write(&f)?;
        self.chan.sent.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn delivered(&self) -> PortResult<bool> {
        let sent = self.chan.sent.load(Ordering::Relaxed);
        if self.chan.credit.load(Ordering::Acquire) >= sent {
            return Ok(true);
        }
        match self.peer.gone() {
            Some(why) => Err(PortError::Gone(why)),
            None => Ok(false),
        }
    }
    fn capacity(&self) -> usize {
        self.chan.inbox.capacity()
    }
}

struct TcpRecv {
    peer: Arc<Peer>,
    chan: Arc<Chan>,
    channel: u32,
}

impl RecvPort for TcpRecv {
    fn ready(&self) -> PortResult<bool> {
        if self.chan.inbox.recv_ready() {
            return Ok(true);
        }
        match self.peer.gone() {
            Some(why) => Err(PortError::Gone(why)),
            None => Ok(false),
        }
    }
    fn consume(&self, f: &mut Consumer<'_>) -> Result<(), CommError> {
        // A refused message stays in the inbox and earns its sender no credit.
        self.chan
            .inbox
            .consume_if(f)
            .map_err(|e| CommError::Transport(e.to_string()))??;
        // Return the freed slot to the sender. The message is ours either way: if the sender
        // has already gone (its last message needs no credit), the connection is marked dead
        // and only a later use of it fails.
        let mut c = [0u8; FRAME_HEADER];
        c[0] = CREDIT;
        c[1..5].copy_from_slice(&self.channel.to_le_bytes());
        c[5..13].copy_from_slice(&self.chan.inbox.consumed().to_le_bytes());
        let _ = self.peer.write(&c);
        Ok(())
    }
}
