//! `Rendezvous::all_gather`: every rank's bytes on every rank, over the rendezvous links (the
//! CUDA IPC mode exchanges its buffer handles with it).

use super::*;

impl Rendezvous {
    /// Every rank's `mine`, in rank order, on every rank (bounded by the timeout). Rank 0
    /// collects from each link in rank order and sends the table back; when anything goes
    /// wrong it tells every rank, so no rank is left waiting for the timeout.
    pub fn all_gather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        if mine.len() > MAX_GATHER_BYTES {
            return Err(BootstrapError::Io {
                doing: format!("all-gather on rank {}", self.rank),
                detail: format!(
                    "{} bytes contributed, at most {MAX_GATHER_BYTES}",
                    mine.len()
                ),
            });
        }
        let deadline = deadline_after(self.timeout);
        let secret = self.secret;
        let timeout = self.timeout;
        let garbled = |peer: &str, what: &str| BootstrapError::Garbled {
            peer: peer.into(),
            detail: format!("{what} during an all-gather"),
        };
        if let Some(s) = &mut self.link_to_root {
            let m = Msg::Gather {
                rank: self.rank,
                data: hex(mine),
            };
            send_msg(s, &secret, &m).map_err(|e| io("all-gather: writing to rank 0", e))?;
            return match recv_msg(s, &secret, "rank 0", deadline) {
                Ok(Msg::Gathered { table }) => table
                    .iter()
                    .map(|h| unhex(h).ok_or_else(|| garbled("rank 0", "bad hex")))
                    .collect(),
                Ok(Msg::Refused { reason }) => Err(BootstrapError::Rejected(reason)),
                Ok(other) => Err(garbled("rank 0", &format!("{other:?}"))),
                Err(BootstrapError::Timeout { .. }) => Err(BootstrapError::Timeout {
                    doing: "in an all-gather, waiting for rank 0's table".into(),
                    waited: timeout,
                }),
                Err(e) => Err(e),
            };
        }
        let mut table = vec![hex(mine)];
        let mut out = vec![mine.to_vec()];
        let mut failure = None;
        for (i, s) in self.root_links.iter_mut().enumerate() {
            // Links are in rank order (see `root`): link i is rank i + 1.
            let want = i as u32 + 1;
            let peer = format!("rank {want}");
            match recv_msg(s, &secret, &peer, deadline) {
                Ok(Msg::Gather { rank, data }) if rank == want => match unhex(&data) {
                    Some(b) => {
                        out.push(b);
                        table.push(data);
                    }
                    None => {
                        failure = Some(garbled(&peer, "bad hex"));
                        break;
                    }
                },
                Ok(other) => {
                    failure = Some(garbled(&peer, &format!("{other:?}")));
                    break;
                }
                Err(BootstrapError::Timeout { .. }) => {
                    failure = Some(BootstrapError::Timeout {
                        doing: format!("in an all-gather, waiting for rank {want}"),
                        waited: timeout,
                    });
                    break;
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failure {
            let reason = e.to_string();
            for s in &mut self.root_links {
                let _ = send_msg(
                    s,
                    &secret,
                    &Msg::Refused {
                        reason: reason.clone(),
                    },
                );
            }
            return Err(e);
        }
        let reply = Msg::Gathered { table };
        for s in &mut self.root_links {
            send_msg(s, &secret, &reply).map_err(|e| io("all-gather: writing to a rank", e))?;
        }
        Ok(out)
    }
}
