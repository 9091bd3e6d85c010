//! Executing one op symbolically: chunk reads/writes, reductions with the double-count check,
//! the race check's access history, and the final-state check.

use super::*;

impl Verifier<'_> {
    fn slot_index(&self, cr: ChunkRef, iter: u64, k: u32) -> usize {
        let total = self.s.buffer_chunks(cr.buffer) as u64;
        (iter * total + (cr.chunk + k) as u64) as usize
    }

    /// Records an access for the race check (multi-channel schedules only).
    fn touch(
        &mut self,
        r: u32,
        c: u32,
        b: BufferKind,
        idx: usize,
        write: bool,
        site: OpSite,
    ) -> Result<(), VerifyError> {
        if !self.races {
            return Ok(());
        }
        let pid = r * self.nch + c;
        let vc = &self.vc[pid as usize];
        let me = vc[pid as usize];
        let hb = |p: u32, t: u32| p == pid || vc[p as usize] >= t;
        let a = &mut self.access[r as usize][bidx(b)][idx];
        let chunk = (idx % self.s.buffer_chunks(b).max(1) as usize) as u32;
        let race = |first: OpSite| VerifyError::Race {
            rank: r,
            buffer: b,
            chunk,
            first,
            second: site,
        };
        if let Some((wc, wt, ws)) = a.write {
            if !hb(wc, wt) {
                return Err(race(ws));
            }
        }
        if write {
            for &(rc, rt, rs) in &a.reads {
                if !hb(rc, rt) {
                    return Err(race(rs));
                }
            }
            a.write = Some((pid, me, site));
            a.reads.clear();
        } else if let Some(e) = a.reads.iter_mut().find(|e| e.0 == pid) {
            *e = (pid, me, site);
        } else {
            a.reads.push((pid, me, site));
        }
        Ok(())
    }

    fn read(
        &mut self,
        r: u32,
        c: u32,
        cr: ChunkRef,
        iter: u64,
        site: OpSite,
    ) -> Result<Vec<Val>, VerifyError> {
        let mut out = Vec::with_capacity(cr.count as usize);
        for k in 0..cr.count {
            let idx = self.slot_index(cr, iter, k);
            self.touch(r, c, cr.buffer, idx, false, site)?;
            match &self.bufs[r as usize][bidx(cr.buffer)][idx] {
                Some(v) => out.push(v.clone()),
                None => {
                    return Err(VerifyError::Uninitialized {
                        site,
                        buffer: cr.buffer,
                        chunk: cr.chunk + k,
                    })
                }
            }
        }
        Ok(out)
    }

    fn write(
        &mut self,
        r: u32,
        c: u32,
        cr: ChunkRef,
        iter: u64,
        vals: &[Val],
        site: OpSite,
    ) -> Result<(), VerifyError> {
        for (k, v) in vals.iter().enumerate() {
            let idx = self.slot_index(cr, iter, k as u32);
            self.touch(r, c, cr.buffer, idx, true, site)?;
            self.bufs[r as usize][bidx(cr.buffer)][idx] = Some(v.clone());
        }
        Ok(())
    }

    fn combine(
        a: Vec<Val>,
        b: Vec<Val>,
        cr: ChunkRef,
        site: OpSite,
    ) -> Result<Vec<Val>, VerifyError> {
        a.into_iter()
            .zip(b)
            .enumerate()
            .map(|(k, (x, y))| {
                let chunk = cr.chunk + k as u32;
                if x.pos != y.pos {
                    return Err(VerifyError::Misaligned {
                        site,
                        buffer: cr.buffer,
                        chunk,
                        a: y.pos,
                        b: x.pos,
                    });
                }
                let overlap = x.set.intersection(&y.set);
                if !overlap.is_empty() {
                    return Err(VerifyError::DoubleCount {
                        site,
                        buffer: cr.buffer,
                        chunk,
                        overlap,
                    });
                }
                Ok(Val {
                    pos: x.pos,
                    set: x.set.union(&y.set),
                })
            })
            .collect()
    }

    /// Executes the next op of (r, c), which must be ready.
    pub(super) fn execute(&mut self, r: u32, c: u32) -> Result<Op, VerifyError> {
        let step = self.pc[r as usize][c as usize];
        let len = self.len(r, c);
        let (iter, e) = (step / len, (step % len) as usize);
        let op = self.ops[r as usize][c as usize][e].clone();
        let site = self.site(r, c, step);
        let pid = (r * self.nch + c) as usize;
        let recv: Option<Vec<Val>> = match op.recv_from {
            Some(from) => {
                let q = self.conns.get_mut(&(c, from, r)).expect("wait_of checked");
                let m = q.pop_front().expect("wait_of checked");
                if let Some(clock) = m.clock {
                    join(&mut self.vc[pid], &clock);
                }
                Some(m.vals)
            }
            None => None,
        };
        // Vector clock: join the clocks of completed deps (and the message, above), then tick.
        if self.races {
            for d in &op.deps {
                let dstep = iter * self.len(r, d.channel)
                    + self.last_copy[r as usize][d.channel as usize][d.index as usize] as u64;
                if let Some(snap) = self.snaps.get(&(r, d.channel, dstep)) {
                    join(&mut self.vc[pid], snap);
                }
            }
            self.vc[pid][pid] += 1;
        }
        let src = match op.src {
            Some(cr) => Some(self.read(r, c, cr, iter, site)?),
            None => None,
        };
        // `dst` value (what a recv-side op stores) and what is sent on.
        let result: Vec<Val> = match op.kind {
            OpKind::Send => src.expect("validated"),
            OpKind::Recv | OpKind::RecvCopySend => recv.expect("validated"),
            OpKind::Copy => src.expect("validated"),
            OpKind::RecvReduceSend | OpKind::RecvReduceCopy | OpKind::RecvReduceCopySend => {
                let cr = op.src.expect("validated");
                Self::combine(src.expect("validated"), recv.expect("validated"), cr, site)?
            }
            OpKind::Reduce => {
                let d = op.dst.expect("validated");
                let cur = self.read(r, c, d, iter, site)?;
                Self::combine(cur, src.expect("validated"), d, site)?
            }
        };
        if let Some(d) = op.dst {
            self.write(r, c, d, iter, &result, site)?;
        }
        if let Some(to) = op.send_to {
            let clock = self.races.then(|| self.vc[pid].clone());
            let q = self.conns.entry((c, r, to)).or_default();
            q.push_back(Msg {
                vals: result,
                clock,
            });
            self.max_slots_used = self.max_slots_used.max(q.len() as u32);
            self.messages += 1;
        }
        if self.races {
            let (ci, _) = self.origin[r as usize][c as usize][e];
            let last = self.last_copy[r as usize][c as usize][ci as usize] as usize;
            if e == last && self.dep_targets.contains(&(r, c, ci)) {
                self.snaps.insert((r, c, step), self.vc[pid].clone());
            }
        }
        self.pc[r as usize][c as usize] += 1;
        self.ops_executed += 1;
        Ok(op)
    }

    pub(super) fn check_final(&self) -> Result<(), VerifyError> {
        let s = self.s;
        let n = self.n;
        let cpb = s.chunks_per_block as u64;
        let out_chunks = s.buffer_chunks(BufferKind::Output);
        let in_chunks = s.buffer_chunks(BufferKind::Input) as u64;
        let all = RankSet::all(n);
        // send/recv: who sends to whom.
        let mut sender_of: Vec<Option<u32>> = vec![None; n as usize];
        if s.collective.kind == CollectiveKind::SendRecv {
            for (i, p) in s.collective.send_peers.iter().enumerate() {
                if let Some(p) = p {
                    if (*p as usize) < sender_of.len() {
                        if sender_of[*p as usize].is_some() {
                            return Err(VerifyError::BadCollective(*p));
                        }
                        sender_of[*p as usize] = Some(i as u32);
                    }
                }
            }
        }
        for r in 0..n {
            for it in 0..self.iters as u64 {
                for c in 0..out_chunks {
                    let cu = c as u64;
                    let expected: Option<Val> = match s.collective.kind {
                        CollectiveKind::AllReduce => Some(Val {
                            pos: cu,
                            set: all.clone(),
                        }),
                        CollectiveKind::AllGather => Some(Val {
                            pos: cu,
                            set: RankSet::single(n, (cu / cpb) as u32),
                        }),
                        CollectiveKind::ReduceScatter => Some(Val {
                            pos: r as u64 * cpb + cu,
                            set: all.clone(),
                        }),
                        CollectiveKind::Broadcast => Some(Val {
                            pos: cu,
                            set: RankSet::single(n, s.collective.root.unwrap_or(0)),
                        }),
                        CollectiveKind::Reduce => (Some(r) == s.collective.root).then(|| Val {
                            pos: cu,
                            set: all.clone(),
                        }),
                        CollectiveKind::AllToAll => {
                            let (i, sub) = (cu / cpb, cu % cpb);
                            Some(Val {
                                pos: i * in_chunks + r as u64 * cpb + sub,
                                set: RankSet::single(n, i as u32),
                            })
                        }
                        CollectiveKind::SendRecv => sender_of[r as usize].map(|i| Val {
                            pos: cu,
                            set: RankSet::single(n, i),
                        }),
                    };
                    let Some(expected) = expected else { continue };
                    let got = &self.bufs[r as usize][1][(it * out_chunks as u64 + cu) as usize];
                    if got.as_ref() != Some(&expected) {
                        return Err(VerifyError::WrongResult {
                            rank: r,
                            chunk: c,
                            expected: Val::describe(&Some(expected)),
                            got: Val::describe(got),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}
