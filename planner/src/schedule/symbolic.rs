//! A chunk-level symbolic check of a schedule: every input chunk starts as the set
//! `{(rank, chunk)}`, transfers move sets, reductions take multiset unions, and at the end every
//! output chunk must hold exactly the contributions the collective defines. It runs one loop
//! iteration with unbounded connection buffers (slots are the simulator's business), so it proves
//! data flow, not timing or slot safety. The planner's tests run it on every builder's output;
//! the simulator's verifier (`sim::verify`) is the full check.

use super::ir::*;
use std::collections::{HashMap, VecDeque};

/// Contributions held by one chunk: sorted `(rank, input chunk)` pairs.
pub type Contrib = Vec<(u32, u32)>;

/// Runs the schedule symbolically and compares every output chunk with the collective's
/// definition. Errors name rank, channel and op.
pub fn check(s: &Schedule) -> Result<(), String> {
    s.validate().map_err(|e| e.to_string())?;
    let mut run = Run::new(s);
    run.run()?;
    run.check_drained()?;
    check_outputs(s, &run.bufs)
}

/// One rank's input, output and scratch chunks, indexed by [`buffer_index`].
type Buffers = [Vec<Option<Contrib>>; 3];

fn buffer_index(b: BufferKind) -> usize {
    match b {
        BufferKind::Input => 0,
        BufferKind::Output => 1,
        BufferKind::Scratch => 2,
    }
}

/// The state of a symbolic run: buffers, expanded programs, program counters, messages in flight.
struct Run<'a> {
    s: &'a Schedule,
    bufs: Vec<Buffers>,
    progs: Vec<Vec<Vec<Op>>>,
    /// Per raw op, the index of its last copy in the expanded program (deps wait for all copies).
    last_copy: Vec<Vec<Vec<usize>>>,
    pc: Vec<Vec<usize>>,
    /// Per (channel, from, to), the messages sent and not yet received.
    queues: HashMap<(u32, u32, u32), VecDeque<Vec<Contrib>>>,
}

impl<'a> Run<'a> {
    /// Every input chunk holds its own contribution; nothing else is written.
    fn new(s: &'a Schedule) -> Self {
        let n = s.nranks;
        let bufs = (0..n)
            .map(|r| {
                let input = (0..s.buffer_chunks(BufferKind::Input))
                    .map(|i| Some(vec![(r, i)]))
                    .collect();
                [
                    input,
                    vec![None; s.buffer_chunks(BufferKind::Output) as usize],
                    vec![None; s.buffer_chunks(BufferKind::Scratch) as usize],
                ]
            })
            .collect();
        let mut progs: Vec<Vec<Vec<Op>>> = Vec::new();
        let mut last_copy: Vec<Vec<Vec<usize>>> = Vec::new();
        for r in 0..n {
            let mut pr = Vec::new();
            let mut lr = Vec::new();
            for c in 0..s.channels {
                let mut acc = 0usize;
                let mut l = Vec::new();
                for op in &s.ranks[r as usize].channels[c as usize].ops {
                    acc += op.repeat.max(1) as usize;
                    l.push(acc - 1);
                }
                pr.push(s.expanded_ops(r, c));
                lr.push(l);
            }
            progs.push(pr);
            last_copy.push(lr);
        }
        Run {
            s,
            bufs,
            progs,
            last_copy,
            pc: vec![vec![0usize; s.channels as usize]; n as usize],
            queues: HashMap::new(),
        }
    }

    /// Runs every op that can run until none can.
    fn run(&mut self) -> Result<(), String> {
        loop {
            let mut progress = false;
            for r in 0..self.s.nranks as usize {
                for c in 0..self.s.channels as usize {
                    while self.try_next_op(r, c)? {
                        progress = true;
                    }
                }
            }
            if !progress {
                return Ok(());
            }
        }
    }

    /// Runs the next op of rank `r`'s channel `c` if its deps are done and its message has
    /// arrived; false when it has to wait or the channel is done.
    fn try_next_op(&mut self, r: usize, c: usize) -> Result<bool, String> {
        let Some(op) = self.progs[r][c].get(self.pc[r][c]) else {
            return Ok(false);
        };
        let where_ = format!("rank {r} channel {c} op {} ({:?})", self.pc[r][c], op.kind);
        let deps_done = op.deps.iter().all(|d| {
            self.pc[r][d.channel as usize] > self.last_copy[r][d.channel as usize][d.index as usize]
        });
        if !deps_done {
            return Ok(false);
        }
        let recv = match op.recv_from {
            Some(from) => match self
                .queues
                .get_mut(&(c as u32, from, r as u32))
                .and_then(|q| q.pop_front())
            {
                Some(v) => Some(v),
                None => return Ok(false),
            },
            None => None,
        };
        let bufs = &mut self.bufs[r];
        let value = op_value(op, recv.as_ref(), bufs, &where_)?;
        if let (Some(rv), Some(cr)) = (&recv, op.src.or(op.dst)) {
            if rv.len() != cr.count as usize {
                return Err(format!(
                    "{where_}: message of {} chunk(s) into a range of {}",
                    rv.len(),
                    cr.count
                ));
            }
        }
        if let Some(d) = op.dst {
            for (k, v) in value.iter().enumerate() {
                bufs[buffer_index(d.buffer)][d.chunk as usize + k] = Some(v.clone());
            }
        }
        if let Some(to) = op.send_to {
            self.queues
                .entry((c as u32, r as u32, to))
                .or_default()
                .push_back(value);
        }
        self.pc[r][c] += 1;
        Ok(true)
    }

    /// After the run: every program finished and every message received.
    fn check_drained(&self) -> Result<(), String> {
        for r in 0..self.s.nranks as usize {
            for c in 0..self.s.channels as usize {
                let (pc, prog) = (self.pc[r][c], &self.progs[r][c]);
                if pc < prog.len() {
                    return Err(format!(
                        "deadlock even with unbounded buffers: rank {r} channel {c} is stuck at op {} ({:?})",
                        pc, prog[pc].kind
                    ));
                }
            }
        }
        if let Some((k, q)) = self.queues.iter().find(|(_, q)| !q.is_empty()) {
            return Err(format!(
                "channel {} rank {} -> {}: {} message(s) never received",
                k.0,
                k.1,
                k.2,
                q.len()
            ));
        }
        Ok(())
    }
}

/// The chunks `cr` of one rank's buffers; an error if one was never written.
fn read_chunks(bufs: &Buffers, cr: ChunkRef, where_: &str) -> Result<Vec<Contrib>, String> {
    (cr.chunk..cr.chunk + cr.count)
        .map(|i| {
            bufs[buffer_index(cr.buffer)][i as usize]
                .clone()
                .ok_or_else(|| {
                    format!(
                        "{where_}: reads {:?} chunk {i} before anything was written there",
                        cr.buffer
                    )
                })
        })
        .collect()
}

/// What `op` writes to its destination and sends: its source, its message, or their sum.
fn op_value(
    op: &Op,
    recv: Option<&Vec<Contrib>>,
    bufs: &Buffers,
    where_: &str,
) -> Result<Vec<Contrib>, String> {
    let src = match op.src {
        Some(cr) => Some(read_chunks(bufs, cr, where_)?),
        None => None,
    };
    Ok(match op.kind {
        OpKind::Send => src.unwrap_or_default(),
        OpKind::Recv | OpKind::RecvCopySend => recv.cloned().unwrap_or_default(),
        OpKind::RecvReduceSend | OpKind::RecvReduceCopy | OpKind::RecvReduceCopySend => {
            merge_all(recv.unwrap(), src.as_ref().unwrap(), where_)?
        }
        OpKind::Copy => src.unwrap_or_default(),
        OpKind::Reduce => {
            let dst = read_chunks(bufs, op.dst.unwrap(), where_)?;
            merge_all(&dst, src.as_ref().unwrap(), where_)?
        }
    })
}

/// Every output chunk holds exactly what the collective defines (a reduce's non-roots: anything).
fn check_outputs(s: &Schedule, bufs: &[Buffers]) -> Result<(), String> {
    let (n, cpb) = (s.nranks, s.chunks_per_block);
    let all = |chunk: u32| -> Contrib { (0..n).map(|q| (q, chunk)).collect() };
    for r in 0..n {
        let out = &bufs[r as usize][1];
        for (i, got) in out.iter().enumerate() {
            let i = i as u32;
            let (b, sub) = (i / cpb, i % cpb);
            let want: Option<Contrib> = match s.collective.kind {
                CollectiveKind::AllReduce => Some(all(i)),
                CollectiveKind::AllGather => Some(vec![(b, sub)]),
                CollectiveKind::ReduceScatter => Some(all(r * cpb + sub)),
                CollectiveKind::Broadcast => Some(vec![(s.collective.root.unwrap_or(0), i)]),
                CollectiveKind::Reduce => (Some(r) == s.collective.root).then(|| all(i)),
                CollectiveKind::AllToAll => Some(vec![(b, r * cpb + sub)]),
                CollectiveKind::SendRecv => s
                    .collective
                    .send_peers
                    .iter()
                    .position(|p| *p == Some(r))
                    .map(|from| vec![(from as u32, i)]),
            };
            if let Some(w) = want {
                if got.as_ref() != Some(&w) {
                    return Err(format!(
                        "rank {r} output chunk {i}: holds {got:?}, the {} needs {w:?}",
                        s.collective.kind.name()
                    ));
                }
            }
        }
    }
    Ok(())
}

fn merge_all(a: &[Contrib], b: &[Contrib], where_: &str) -> Result<Vec<Contrib>, String> {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let mut m: Contrib = x.iter().chain(y).copied().collect();
            m.sort_unstable();
            if let Some(w) = m.windows(2).find(|w| w[0] == w[1]) {
                return Err(format!(
                    "{where_}: contribution {:?} is counted twice",
                    w[0]
                ));
            }
            Ok(m)
        })
        .collect()
}
