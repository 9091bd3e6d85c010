//! Accepting connections without letting any of them stall the others: each accepted
//! connection's first frame is read on its own thread, bounded by [`GREETING`] (and by the
//! caller's deadline), and what it said comes back through a channel. The caller only ever
//! sees authenticated messages or the error of a connection that failed, already closed.

use super::frame::{recv_msg, refuse_stranger};
use super::{BootstrapError, Msg};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long an accepted connection has to present its first frame, whole.
pub const GREETING: Duration = Duration::from_secs(5);
/// Connections whose first frame is awaited at once; more are closed on arrival (a flood must
/// not cost a thread each).
pub const MAX_PENDING: usize = 64;

/// One connection's first message (or why there was none), with the connection.
pub struct Greeting {
    pub stream: TcpStream,
    pub msg: Result<Msg, BootstrapError>,
}

pub struct Gate {
    secret: [u8; 16],
    tx: Sender<Greeting>,
    rx: Receiver<Greeting>,
    pending: Arc<AtomicUsize>,
}

impl Gate {
    pub fn new(secret: [u8; 16]) -> Gate {
        let (tx, rx) = channel();
        Gate {
            secret,
            tx,
            rx,
            pending: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Accepts every connection waiting on `listener` (non-blocking) and starts reading its
    /// first frame; returns one greeting that has finished, if any. Connections that failed to
    /// authenticate are told why (without the secret) and closed before they are returned.
    pub fn poll(&self, listener: &TcpListener, deadline: Instant) -> std::io::Result<Option<Greeting>> {
        loop {
            match listener.accept() {
                Ok((s, addr)) => self.start(s, addr.to_string(), deadline),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // A connection reset before it was accepted, or out of descriptors: the
                // listener itself is fine, try again on the next poll.
                Err(e) if is_transient(&e) => break,
                Err(e) => return Err(e),
            }
        }
        Ok(self.rx.try_recv().ok())
    }

    fn start(&self, s: TcpStream, peer: String, deadline: Instant) {
        if self.pending.load(Ordering::Relaxed) >= MAX_PENDING {
            drop(s);
            return;
        }
        self.pending.fetch_add(1, Ordering::Relaxed);
        let (tx, pending, secret) = (self.tx.clone(), self.pending.clone(), self.secret);
        let by = deadline.min(Instant::now() + GREETING);
        std::thread::spawn(move || {
            let mut s = s;
            s.set_nonblocking(false).ok();
            s.set_nodelay(true).ok();
            let msg = recv_msg(&mut s, &secret, &peer, by);
            if let Err(e) = &msg {
                // Not one of ours, or too slow: tell it (without the secret) and close.
                refuse_stranger(&mut s, e.to_string());
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
            pending.fetch_sub(1, Ordering::Relaxed);
            let _ = tx.send(Greeting { stream: s, msg });
        });
    }
}

fn is_transient(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset
    ) || matches!(e.raw_os_error(), Some(EMFILE | ENFILE))
}

/// Out of file descriptors, for the process (EMFILE) or the system (ENFILE).
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;
