//! Bootstrap frames: `b"TOPOPLAN"`, the secret, version, payload length, payload. Reading checks
//! the secret before anything else, and every read is bounded by an absolute deadline (a peer
//! that sends one byte at a time cannot keep a read alive past it).

use super::{io, BootstrapError, Msg};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub const MAGIC: &[u8; 8] = b"TOPOPLAN";
/// Version of the bootstrap and data-plane wire formats. Bump on any incompatible change.
pub const PROTOCOL_VERSION: u32 = 2;
/// Magic, secret, version, length.
pub const HEADER_BYTES: usize = 32;
const MAX_FRAME: u32 = 1 << 20;
/// The secret of refusals sent to connections that did not authenticate.
const NO_SECRET: [u8; 16] = [0; 16];

/// Why a frame could not be read.
#[derive(Debug)]
pub enum FrameError {
    Io(std::io::Error),
    /// The deadline passed before the whole frame arrived.
    TimedOut,
    NotOurs(String),
    /// The right magic with another secret: another job, or an attacker.
    Secret,
    /// Our secret, another version of the wire format.
    Version(u32),
    /// A refusal from a peer that could not authenticate us (all-zero secret): its reason.
    Refused(String),
}

/// Writes one frame carrying `secret`.
pub fn write_frame(s: &mut TcpStream, secret: &[u8; 16], payload: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|n| *n <= MAX_FRAME)
        .ok_or_else(|| std::io::Error::other("bootstrap frame over 1 MiB"))?;
    let mut f = Vec::with_capacity(HEADER_BYTES + payload.len());
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(secret);
    f.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    f.extend_from_slice(&len.to_le_bytes());
    f.extend_from_slice(payload);
    s.write_all(&f)
}

/// Fills `buf` before `deadline`, however the peer slices its bytes.
fn read_exact_by(s: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> Result<(), FrameError> {
    let mut off = 0;
    while off < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(FrameError::TimedOut);
        }
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .map_err(FrameError::Io)?;
        match s.read(&mut buf[off..]) {
            Ok(0) => {
                return Err(FrameError::Io(std::io::Error::from(
                    std::io::ErrorKind::UnexpectedEof,
                )))
            }
            Ok(n) => off += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    Ok(())
}

/// Compares without an early exit, so the time taken says nothing about the secret.
fn same_secret(a: &[u8], b: &[u8; 16]) -> bool {
    a.len() == 16 && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Checks as much of a frame header as `h` holds, in order: the magic, the secret, then the
/// version and the length. `Ok(Some((payload length, refusal)))` once the whole header passed,
/// `Ok(None)` while more bytes are needed; an error as soon as one check fails, so nothing after
/// a failed check is ever read.
pub(super) fn check_header(
    h: &[u8],
    secret: &[u8; 16],
) -> Result<Option<(usize, bool)>, FrameError> {
    let magic = &h[..h.len().min(8)];
    if magic != &MAGIC[..magic.len()] {
        return Err(FrameError::NotOurs(format!(
            "magic {:?}",
            String::from_utf8_lossy(magic)
        )));
    }
    if h.len() < 24 {
        return Ok(None);
    }
    let refusal = h[8..24] == NO_SECRET;
    if !refusal && !same_secret(&h[8..24], secret) {
        return Err(FrameError::Secret);
    }
    if h.len() < HEADER_BYTES {
        return Ok(None);
    }
    let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let (v, n) = (word(24), word(28));
    if v != PROTOCOL_VERSION && !refusal {
        return Err(FrameError::Version(v));
    }
    if n > MAX_FRAME {
        return Err(FrameError::NotOurs(format!("frame of {n} bytes")));
    }
    Ok(Some((n as usize, refusal)))
}

/// What a whole frame's payload means: the payload, or a refusal's reason.
pub(super) fn payload(p: Vec<u8>, refusal: bool) -> Result<Vec<u8>, FrameError> {
    if !refusal {
        return Ok(p);
    }
    Err(FrameError::Refused(
        match serde_json::from_slice::<Msg>(&p) {
            Ok(Msg::Refused { reason }) => reason,
            _ => "refused, without a reason".into(),
        },
    ))
}

/// Reads one frame carrying `secret`, by `deadline` ([`check_header`] says in what order).
pub fn read_frame(
    s: &mut TcpStream,
    secret: &[u8; 16],
    deadline: Instant,
) -> Result<Vec<u8>, FrameError> {
    let mut h = [0u8; HEADER_BYTES];
    let mut got = 0;
    let mut whole = None;
    // Magic, then secret, then the rest: each part is checked before the next is read.
    for end in [8, 24, HEADER_BYTES] {
        read_exact_by(s, &mut h[got..end], deadline)?;
        got = end;
        whole = check_header(&h[..got], secret)?;
    }
    let (n, refusal) = whole.expect("a whole header was checked");
    let mut p = vec![0u8; n];
    read_exact_by(s, &mut p, deadline)?;
    payload(p, refusal)
}

/// Parses a frame's payload as a message.
pub(super) fn parse(p: &[u8], peer: &str) -> Result<Msg, BootstrapError> {
    serde_json::from_slice(p).map_err(|e| BootstrapError::Garbled {
        peer: peer.into(),
        detail: e.to_string(),
    })
}

/// The bootstrap error of a frame that could not be read from `peer`.
pub(super) fn frame_error(e: FrameError, peer: &str) -> BootstrapError {
    match e {
        FrameError::TimedOut => BootstrapError::Timeout {
            doing: format!("waiting for a message from {peer}"),
            waited: Duration::ZERO,
        },
        FrameError::Io(e) => io(format!("reading from {peer}"), e),
        FrameError::NotOurs(d) => BootstrapError::Garbled {
            peer: peer.into(),
            detail: d,
        },
        FrameError::Secret => BootstrapError::Secret { peer: peer.into() },
        FrameError::Version(v) => BootstrapError::Version {
            peer: peer.into(),
            theirs: v,
            ours: PROTOCOL_VERSION,
        },
        FrameError::Refused(reason) => BootstrapError::Rejected(reason),
    }
}

pub(super) fn send_msg(s: &mut TcpStream, secret: &[u8; 16], m: &Msg) -> std::io::Result<()> {
    write_frame(
        s,
        secret,
        &serde_json::to_vec(m).expect("messages serialize"),
    )
}

/// Tells a connection that did not authenticate why it is dropped, without the secret.
pub(super) fn refuse_stranger(s: &mut TcpStream, reason: String) {
    s.set_write_timeout(Some(Duration::from_millis(200))).ok();
    let _ = send_msg(s, &NO_SECRET, &Msg::Refused { reason });
}

pub(super) fn recv_msg(
    s: &mut TcpStream,
    secret: &[u8; 16],
    peer: &str,
    deadline: Instant,
) -> Result<Msg, BootstrapError> {
    match read_frame(s, secret, deadline) {
        Ok(p) => parse(&p, peer),
        Err(e) => Err(frame_error(e, peer)),
    }
}
