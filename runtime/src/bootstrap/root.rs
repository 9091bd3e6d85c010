//! Rank 0's side of the rendezvous: its listener, bound before anyone learns its address, and
//! the loop that accepts the other ranks and sends them the table.

use super::*;
use std::collections::BTreeMap;

/// Rank 0's rendezvous listener, bound before anyone learns its address.
///
/// Binding first (at a given port, or at port 0 for one the OS chooses) and only then handing
/// out [`RootListener::id`] means no port is ever chosen, released and bound again, which would
/// race with anything else on the host. An NCCL-style init is the two halves of this:
/// `ncclGetUniqueId` binds a `RootListener` and hands out the text of its id; rank 0's
/// `ncclCommInitRank` later passes the listener to [`rendezvous_root`]. Ranks that connect in
/// between wait in the listen backlog.
#[derive(Debug)]
pub struct RootListener {
    pub(super) listener: TcpListener,
    id: UniqueId,
}

impl RootListener {
    /// Listens at `addr` (`host:port`, where port 0 lets the OS choose one) for the job whose
    /// secret is `secret`. `host` should be the address the other ranks reach this host at:
    /// the id keeps it as given, with the port actually bound.
    ///
    /// An address that something else holds fails with [`BootstrapError::AddressInUse`],
    /// naming it. Nothing is retried: the holder may be another job, or this job started twice.
    pub fn bind(addr: &str, secret: [u8; 16]) -> Result<RootListener, BootstrapError> {
        let listening = || format!("rank 0 listening at {addr}");
        let Some((host, _)) = addr.rsplit_once(':') else {
            return Err(io(listening(), "expected host:port"));
        };
        let listener = TcpListener::bind(addr).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                BootstrapError::AddressInUse { addr: addr.into() }
            } else {
                io(listening(), e)
            }
        })?;
        let port = listener
            .local_addr()
            .map_err(|e| io(listening(), e))?
            .port();
        Ok(RootListener {
            listener,
            id: UniqueId {
                addr: format!("{host}:{port}"),
                secret,
            },
        })
    }

    /// The job's id, at the port actually bound: what every other rank joins with.
    pub fn id(&self) -> &UniqueId {
        &self.id
    }

    /// Writes [`RootListener::id`]'s text to `path` for a launcher that waits for it
    /// ([`wait_for_id_file`]); see [`ID_FILE_VAR`].
    pub fn publish(&self, path: &std::path::Path) -> Result<(), BootstrapError> {
        write_id_file(path, &self.id)
    }
}

/// Runs the rendezvous as rank 0 on `root`, the listener bound earlier: waits (bounded by
/// `timeout`) for the other `nranks - 1` ranks to join with `root.id()`, checks that they agree
/// with `fingerprint` and each other, and sends everyone the table. `info` is rank 0's own
/// entry (`info.rank` is 0; `info.listen` must already be bound).
pub fn rendezvous_root(
    root: RootListener,
    nranks: u32,
    fingerprint: u64,
    info: PeerInfo,
    timeout: Duration,
) -> Result<Rendezvous, BootstrapError> {
    if info.rank != 0 || nranks == 0 {
        return Err(BootstrapError::RankRange {
            rank: info.rank,
            nranks,
        });
    }
    let deadline = deadline_after(timeout);
    root.listener
        .set_nonblocking(true)
        .map_err(|e| io("rank 0 listener", e))?;
    let mut j = Joining {
        secret: root.id.secret,
        nranks,
        fingerprint,
        me: info,
        // Only ranks that joined take room: a huge claimed world costs nothing until it comes.
        peers: BTreeMap::new(),
    };
    let mut gate = gate::Gate::new(root.id.secret);
    while (j.peers.len() as u64) + 1 < nranks as u64 {
        match gate.poll(&root.listener, deadline) {
            Ok(Some(g)) => j.admit(g)?,
            Ok(None) => {
                if Instant::now() >= deadline {
                    let missing: Vec<u32> = (1..nranks)
                        .filter(|r| !j.peers.contains_key(r))
                        .take(16)
                        .collect();
                    let more = if nranks as usize - 1 - j.peers.len() > missing.len() {
                        " and more"
                    } else {
                        ""
                    };
                    return Err(j.fail(
                        None,
                        BootstrapError::Timeout {
                            doing: format!("waiting for ranks {missing:?}{more} to join"),
                            waited: timeout,
                        },
                    ));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(j.fail(None, io("rank 0 accepting", e))),
        }
    }
    j.welcome(timeout)
}

/// Rank 0's state while the others join.
struct Joining {
    secret: [u8; 16],
    nranks: u32,
    fingerprint: u64,
    me: PeerInfo,
    peers: BTreeMap<u32, (PeerInfo, TcpStream)>,
}

impl Joining {
    /// A fatal error: every rank that joined (and `extra`, the one that caused it) is told.
    fn fail(&mut self, extra: Option<&mut TcpStream>, e: BootstrapError) -> BootstrapError {
        let reason = e.to_string();
        let secret = self.secret;
        for (_, s) in self.peers.values_mut() {
            let _ = send_msg(
                s,
                &secret,
                &Msg::Refused {
                    reason: reason.clone(),
                },
            );
        }
        if let Some(s) = extra {
            let _ = send_msg(s, &secret, &Msg::Refused { reason });
        }
        e
    }

    /// Takes one connection's first message: a stranger is already closed and ignored, a
    /// member of this job that disagrees fails the rendezvous.
    fn admit(&mut self, g: gate::Greeting) -> Result<(), BootstrapError> {
        let mut s = g.stream;
        let (their_n, their_fp, info) = match g.msg {
            Ok(Msg::Hello {
                nranks,
                fingerprint,
                info,
            }) => (nranks, fingerprint, info),
            // Our secret, another wire format: a rank of this job built differently.
            Err(e @ BootstrapError::Version { .. }) => return Err(self.fail(None, e)),
            Ok(_) => {
                let _ = send_msg(
                    &mut s,
                    &self.secret,
                    &Msg::Refused {
                        reason: "expected a hello".into(),
                    },
                );
                return Ok(());
            }
            Err(_) => return Ok(()),
        };
        let (r, nranks) = (info.rank, self.nranks);
        let e = if their_n != nranks {
            BootstrapError::WorldSize {
                rank: r,
                theirs: their_n,
                ours: nranks,
            }
        } else if r >= nranks {
            BootstrapError::RankRange { rank: r, nranks }
        } else if r == 0 || self.peers.contains_key(&r) {
            let first = match self.peers.get(&r) {
                Some((i, _)) => format!("{} pid {}", i.host, i.pid),
                None => format!("{} pid {} (rank 0 itself)", self.me.host, self.me.pid),
            };
            BootstrapError::DuplicateRank {
                rank: r,
                first,
                second: format!("{} pid {}", info.host, info.pid),
            }
        } else if their_fp != self.fingerprint {
            BootstrapError::ConfigMismatch { rank: r }
        } else {
            self.peers.insert(r, (info, s));
            return Ok(());
        };
        Err(self.fail(Some(&mut s), e))
    }

    /// Everyone joined: sends the table.
    fn welcome(self, timeout: Duration) -> Result<Rendezvous, BootstrapError> {
        let mut table = vec![self.me];
        let mut links = Vec::new();
        for (info, s) in self.peers.into_values() {
            table.push(info);
            links.push(s);
        }
        let session = hex(&random_secret()[..8]);
        for s in &mut links {
            let m = Msg::Welcome {
                peers: table.clone(),
                session: session.clone(),
            };
            send_msg(s, &self.secret, &m).map_err(|e| io("sending the rank table", e))?;
        }
        Ok(Rendezvous {
            rank: 0,
            peers: table,
            session,
            root_links: links,
            link_to_root: None,
            secret: self.secret,
            timeout,
        })
    }
}
