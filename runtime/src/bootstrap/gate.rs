//! Accepting connections without letting any of them stall the others. Accepted connections
//! are read without blocking, a few bytes at a time as they arrive, each checked as far as it
//! goes ([`check_header`]: magic, then secret, before anything else), each with [`GREETING`]
//! to present its first frame. No thread, no wait: a silent, trickling or flooding peer costs
//! the rendezvous a few bytes and a socket each, and the oldest is closed when [`MAX_PENDING`]
//! are open. The caller sees authenticated messages, or the error of a connection that failed,
//! already closed.

use super::frame::{
    check_header, frame_error, parse, payload, refuse_stranger, FrameError, HEADER_BYTES,
};
use super::{BootstrapError, Msg};
use std::collections::VecDeque;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// How long an accepted connection has to present its first frame, whole.
pub const GREETING: Duration = Duration::from_secs(5);
/// Connections whose first frame is awaited at once; past it, the oldest is closed (a real
/// rank's hello arrives with its connection, an attacker's never does).
pub const MAX_PENDING: usize = 256;

/// Connections accepted per poll before the pending ones are read.
const ACCEPT_BATCH: usize = 32;

/// One connection's first message (or why there was none), with the connection.
pub struct Greeting {
    pub stream: TcpStream,
    pub msg: Result<Msg, BootstrapError>,
}

struct Pending {
    stream: TcpStream,
    peer: String,
    buf: Vec<u8>,
    /// The payload's length and whether it is a refusal, once the header passed.
    body: Option<(usize, bool)>,
    by: Instant,
}

pub struct Gate {
    secret: [u8; 16],
    pending: VecDeque<Pending>,
    done: VecDeque<Greeting>,
}

impl Gate {
    pub fn new(secret: [u8; 16]) -> Gate {
        Gate {
            secret,
            pending: VecDeque::new(),
            done: VecDeque::new(),
        }
    }

    /// Accepts every connection waiting on `listener` (non-blocking), reads what has arrived
    /// on each pending one, and returns one finished greeting, if any.
    pub fn poll(
        &mut self,
        listener: &TcpListener,
        deadline: Instant,
    ) -> std::io::Result<Option<Greeting>> {
        // A bounded batch, then a read of every pending connection: under a flood, a real
        // rank's hello is read before enough newer connections arrive to evict it.
        for _ in 0..ACCEPT_BATCH {
            match listener.accept() {
                Ok((s, addr)) => self.admit(s, addr.to_string(), deadline),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // A connection reset before it was accepted, or out of descriptors: the
                // listener itself is fine, try again on the next poll.
                Err(e) if is_transient(&e) => break,
                Err(e) => return Err(e),
            }
        }
        let now = Instant::now();
        let mut i = 0;
        while i < self.pending.len() {
            match self.advance(i, now) {
                Step::Wait => i += 1,
                Step::Drop(why) => {
                    let mut p = self.pending.remove(i).expect("in range");
                    refuse_stranger(&mut p.stream, why.to_string());
                    let _ = p.stream.shutdown(std::net::Shutdown::Both);
                    if matches!(why, BootstrapError::Version { .. }) {
                        // Our secret, another wire format: the caller decides (it is fatal).
                        self.done.push_back(Greeting {
                            stream: p.stream,
                            msg: Err(why),
                        });
                    }
                }
                Step::Done(msg) => {
                    let p = self.pending.remove(i).expect("in range");
                    p.stream.set_nonblocking(false).ok();
                    self.done.push_back(Greeting {
                        stream: p.stream,
                        msg,
                    });
                }
            }
        }
        Ok(self.done.pop_front())
    }

    fn admit(&mut self, s: TcpStream, peer: String, deadline: Instant) {
        if s.set_nonblocking(true).is_err() {
            return;
        }
        s.set_nodelay(true).ok();
        if self.pending.len() >= MAX_PENDING {
            if let Some(old) = self.pending.pop_front() {
                let _ = old.stream.shutdown(std::net::Shutdown::Both);
            }
        }
        self.pending.push_back(Pending {
            stream: s,
            peer,
            buf: Vec::with_capacity(HEADER_BYTES),
            body: None,
            by: deadline.min(Instant::now() + GREETING),
        });
    }

    /// Reads what pending connection `i` has sent so far and judges it.
    fn advance(&mut self, i: usize, now: Instant) -> Step {
        let secret = self.secret;
        let p = &mut self.pending[i];
        loop {
            let want = match p.body {
                None => HEADER_BYTES,
                Some((n, _)) => HEADER_BYTES + n,
            };
            if p.buf.len() == want {
                if let Some((_, refusal)) = p.body {
                    let body = p.buf.split_off(HEADER_BYTES);
                    return match payload(body, refusal) {
                        Ok(b) => Step::Done(parse(&b, &p.peer)),
                        Err(e) => Step::Drop(frame_error(e, &p.peer)),
                    };
                }
            }
            let have = p.buf.len();
            p.buf.resize(want, 0);
            match p.stream.read(&mut p.buf[have..]) {
                Ok(0) => {
                    p.buf.truncate(have);
                    return Step::Drop(frame_error(
                        FrameError::Io(std::io::ErrorKind::UnexpectedEof.into()),
                        &p.peer,
                    ));
                }
                Ok(n) => p.buf.truncate(have + n),
                Err(e) => {
                    p.buf.truncate(have);
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    ) {
                        return if now >= p.by {
                            Step::Drop(frame_error(FrameError::TimedOut, &p.peer))
                        } else {
                            Step::Wait
                        };
                    }
                    return Step::Drop(frame_error(FrameError::Io(e), &p.peer));
                }
            }
            if p.body.is_none() {
                match check_header(&p.buf, &secret) {
                    Ok(Some(b)) => p.body = Some(b),
                    Ok(None) => {}
                    Err(e) => return Step::Drop(frame_error(e, &p.peer)),
                }
            }
        }
    }
}

enum Step {
    Wait,
    Drop(BootstrapError),
    Done(Result<Msg, BootstrapError>),
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
