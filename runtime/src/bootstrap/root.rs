//! Rank 0's side of the rendezvous: its listener, bound before anyone learns its address, and
//! the loop that accepts the other ranks and sends them the table.

use super::*;

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
    let deadline = Instant::now() + timeout;
    accept_ranks(
        root.listener,
        &hex(&root.id.secret),
        nranks,
        fingerprint,
        info,
        deadline,
        timeout,
    )
}

fn accept_ranks(
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
