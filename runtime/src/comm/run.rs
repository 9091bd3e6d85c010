//! Running a group: its collectives in order, each with its agreement (`exec::agree`), and
//! its sends and receives progressing alongside (after the agreement of a gather or scatter
//! they make up).

use super::Communicator;
use crate::element::finish_avg;
use crate::error::CommError;
use crate::exec::agree::{self, Call};
use crate::exec::{
    drive, Background, CollTask, Ctx, P2pRecv, P2pSend, PortSource, Task, WaitPolicy,
};
use crate::group::{CollWork, Input, Work};
use crate::transport::P2P_CHANNEL;
use crate::types::ReduceOp;
use planner::schedule::CollectiveKind;
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A group's calls in issue order: collectives, and calls made of its sends and receives.
enum Step<'b> {
    Coll(CollWork<'b>),
    Agree(Call),
}

type Tasks<'b> = Vec<Box<dyn Task + 'b>>;

impl Communicator {
    pub(crate) fn execute(&mut self, work: Vec<Work<'_>>) -> Result<(), CommError> {
        self.check_usable()?;
        let r = self.execute_inner(work);
        if let Err(e) = &r {
            if !e.is_usage() {
                self.poisoned = Some(e.to_string());
            }
        }
        r
    }

    fn execute_inner(&mut self, work: Vec<Work<'_>>) -> Result<(), CommError> {
        let policy = WaitPolicy {
            timeout: self.cfg.timeout,
            abort: self.abort.clone(),
        };
        let (steps, mut p2p) = self.sort(work)?;
        // Sends and receives that make up a declared call wait for its agreement.
        let gate = steps.iter().rposition(|s| matches!(s, Step::Agree(_)));
        for (i, step) in steps.into_iter().enumerate() {
            match step {
                Step::Agree(call) => {
                    let live = gate.is_none_or(|g| i > g).then_some(&mut p2p);
                    self.agree(call, self.seq, live, &policy)?
                }
                Step::Coll(c) => {
                    let seq = self.seq;
                    self.seq += 1;
                    if c.count == 0 {
                        continue;
                    }
                    // The terms run with the collective rather than before it: they go out
                    // first, and the call returns only once every peer's agreed, so ranks that
                    // disagree still fail, each naming both versions, for one round trip less.
                    let terms = self.terms(Call::of(&c), seq)?;
                    self.run_coll(c, seq, terms, &mut p2p, &policy)?;
                }
            }
        }
        if !p2p.is_empty() {
            let mut tasks: Vec<&mut dyn Task> = p2p
                .iter_mut()
                .map(|t| t.as_mut() as &mut dyn Task)
                .collect();
            drive(&mut tasks, &policy, self.ports.transport.as_ref())?;
        }
        Ok(())
    }

    /// The group's calls in order, and its point-to-point tasks: one per peer and direction,
    /// so that sends (receives) to one peer keep their issue order on the wire.
    fn sort<'b>(&mut self, work: Vec<Work<'b>>) -> Result<(Vec<Step<'b>>, Tasks<'b>), CommError> {
        let rank = self.rank;
        let mut sends: BTreeMap<u32, P2pSend<'b>> = BTreeMap::new();
        let mut recvs: BTreeMap<u32, P2pRecv<'b>> = BTreeMap::new();
        let mut steps = Vec::new();
        let ctx = |what: String| Ctx {
            what,
            seq: self.seq,
            rank,
        };
        for w in work {
            match w {
                Work::Send { data, peer } if !data.is_empty() => {
                    let task = match sends.entry(peer) {
                        Entry::Occupied(e) => e.into_mut(),
                        Entry::Vacant(e) => {
                            let port = self.ports.send(P2P_CHANNEL, peer)?;
                            e.insert(P2pSend::new(
                                ctx(format!("send to rank {peer}")),
                                port,
                                peer,
                            ))
                        }
                    };
                    task.data.push(data);
                }
                Work::Recv { data, peer } if !data.is_empty() => {
                    let task = match recvs.entry(peer) {
                        Entry::Occupied(e) => e.into_mut(),
                        Entry::Vacant(e) => {
                            let port = self.ports.recv(P2P_CHANNEL, peer)?;
                            let c = ctx(format!("recv from rank {peer}"));
                            e.insert(P2pRecv::new(c, port, peer, self.cfg.slot_bytes))
                        }
                    };
                    task.data.push(data);
                }
                Work::Send { .. } | Work::Recv { .. } => {}
                Work::Agree(call) => steps.push(Step::Agree(call)),
                Work::Coll(c) => steps.push(Step::Coll(c)),
            }
        }
        let mut p2p: Tasks<'b> = Vec::new();
        p2p.extend(sends.into_values().map(|t| Box::new(t) as Box<dyn Task>));
        p2p.extend(recvs.into_values().map(|t| Box::new(t) as Box<dyn Task>));
        Ok((steps, p2p))
    }

    /// Tells every other rank that this rank runs `call` (a call made of the group's sends and
    /// receives) and checks that each of them says the same, before any of its data moves.
    /// `p2p`: the group's sends and receives already under way, advanced meanwhile (a peer may
    /// need them to reach `call`).
    fn agree(
        &mut self,
        call: Call,
        seq: u64,
        p2p: Option<&mut Tasks<'_>>,
        policy: &WaitPolicy,
    ) -> Result<(), CommError> {
        let mut terms = self.terms(call, seq)?;
        if terms.is_empty() {
            return Ok(());
        }
        let mut background: Vec<Background<'_, '_>> = p2p
            .into_iter()
            .flat_map(|v| v.iter_mut())
            .map(|t| Background(t.as_mut()))
            .collect();
        let mut tasks: Vec<&mut dyn Task> = terms
            .iter_mut()
            .map(|t| t.as_mut() as &mut dyn Task)
            .collect();
        tasks.extend(background.iter_mut().map(|b| b as &mut dyn Task));
        drive(&mut tasks, policy, self.ports.transport.as_ref())
    }

    /// The tasks that tell every other rank this rank runs `call` and check what each says.
    fn terms(&mut self, call: Call, seq: u64) -> Result<Tasks<'static>, CommError> {
        let rank = self.rank;
        let ctx = Ctx {
            what: call.name(),
            seq,
            rank,
        };
        // Every send before any receive: a rank that finds a disagreement stops at once, and
        // by then every peer must have its terms, to find it too.
        let peers: Vec<u32> = (0..self.nranks).filter(|p| *p != rank).collect();
        let mut terms: Tasks<'_> = Vec::new();
        for &peer in &peers {
            terms.push(Box::new(agree::SendTerms {
                ctx: ctx.clone(),
                port: self.ports.send(P2P_CHANNEL, peer)?,
                peer,
                bytes: call.encode_bytes(),
                off: 0,
            }));
        }
        for &peer in &peers {
            terms.push(Box::new(agree::RecvTerms {
                ctx: ctx.clone(),
                port: self.ports.recv(P2P_CHANNEL, peer)?,
                peer,
                mine: call,
                bytes: Vec::with_capacity(agree::CALL_BYTES),
            }));
        }
        Ok(terms)
    }

    /// Runs one collective with its agreement `terms` (first) and the group's sends and
    /// receives progressing alongside.
    fn run_coll(
        &mut self,
        c: CollWork<'_>,
        seq: u64,
        mut terms: Tasks<'static>,
        p2p: &mut Tasks<'_>,
        policy: &WaitPolicy,
    ) -> Result<(), CommError> {
        let rank = self.rank;
        // The planner speaks nccl-tests sizes: the larger of the two buffers.
        let (ib, ob) = c.coll.blocks(self.nranks);
        let bytes = c.count as u64 * c.dtype.size() as u64 * ib.max(ob) as u64;
        let sched = self.plans.schedule(&c.coll, bytes)?;
        let sched_fp = *self
            .fingerprints
            .entry(Arc::as_ptr(&sched) as usize)
            .or_insert_with(|| crate::exec::schedule_fingerprint(&sched));
        // The call's type, operation, count and root go into the messages' tag too: a message
        // of another call never passes for one of this call's.
        let call = [
            &[c.dtype as u8, c.op as u8, 0x5a][..],
            &(c.count as u64).to_le_bytes(),
            &c.coll.root.unwrap_or(u32::MAX).to_le_bytes(),
        ]
        .concat();
        let fp = (sched_fp ^ crate::config::fnv1a(&call)) & 0xFFFF_FFFF;
        let ctx = Ctx {
            what: c.coll.kind.name().to_string(),
            seq,
            rank,
        };
        let rop = if c.op == ReduceOp::Avg {
            ReduceOp::Sum
        } else {
            c.op
        };
        let input: &[u8] = match &c.input {
            Input::Borrowed(b) => b,
            Input::Owned(v) => v,
        };
        let output = c.output;
        let scratch = self.take_buf();
        {
            let mut task = CollTask::new(
                ctx,
                &sched,
                c.count as u64,
                c.dtype,
                rop,
                input,
                &mut *output,
                self.cfg.slot_bytes,
                fp,
                scratch,
                &mut self.ports,
            )?;
            let mut tasks: Vec<&mut dyn Task> = terms
                .iter_mut()
                .map(|t| t.as_mut() as &mut dyn Task)
                .collect();
            tasks.push(&mut task);
            for t in p2p.iter_mut() {
                tasks.push(t.as_mut());
            }
            let r = drive(&mut tasks, policy, self.ports.transport.as_ref());
            drop(tasks);
            self.give_buf(task.into_scratch());
            r?;
        }
        if let Input::Owned(v) = c.input {
            self.give_buf(v);
        }
        if c.op == ReduceOp::Avg {
            let holds_result = match c.coll.kind {
                CollectiveKind::Reduce => c.coll.root == Some(rank),
                k => k.reduces(),
            };
            if holds_result {
                finish_avg(c.dtype, output, self.nranks);
            }
        }
        Ok(())
    }
}
