//! Property tests of `sim::verify`: every builder's schedule verifies, and mutated schedules
//! (dropped op, swapped peer, redirected write, reordered receives, duplicated reduce) are always
//! caught. Each case is driven by one u64 seed, printed on failure so it reproduces exactly.

use planner::schedule::build;
use planner::schedule::*;
use proptest::prelude::*;

// The whole case derives from one seed through the planner's SplitMix64.
use planner::topology::synth::Rng;

trait Draw {
    fn below(&mut self, n: u64) -> u64;
    fn perm(&mut self, n: u32) -> Vec<u32>;
}

impl Draw for Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    fn perm(&mut self, n: u32) -> Vec<u32> {
        let mut v: Vec<u32> = (0..n).collect();
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
        v
    }
}

fn random_tree(rng: &mut Rng, n: u32) -> TreeChannel {
    let order = rng.perm(n);
    let mut parent = vec![None; n as usize];
    for i in 1..n as usize {
        parent[order[i] as usize] = Some(order[rng.below(i as u64) as usize]);
    }
    TreeChannel::from_parents(parent).expect("a random tree is a tree")
}

/// A random builder schedule (and a description) for the seed.
fn random_schedule(seed: u64) -> (Schedule, String) {
    let mut rng = Rng::new(seed);
    let n = 2 + rng.below(9) as u32;
    let kind = CollectiveKind::ALL[rng.below(7) as usize];
    let proto = Protocol::ALL[rng.below(3) as usize];
    let nch = 1 + rng.below(3) as u32;
    let mut coll = Collective::new(kind);
    if matches!(kind, CollectiveKind::Broadcast | CollectiveKind::Reduce) {
        coll.root = Some(rng.below(n as u64) as u32);
    }
    if kind == CollectiveKind::SendRecv {
        let p = rng.perm(n);
        coll.send_peers = (0..n)
            .map(|i| {
                let t = p[i as usize];
                (t != i && rng.below(4) != 0).then_some(t)
            })
            .collect();
    }
    let algo = rng.below(5);
    let built = match (kind, algo) {
        (CollectiveKind::AllToAll | CollectiveKind::SendRecv, _) => build::direct(&coll, n),
        (_, 0 | 1) => {
            let mut rings: Vec<Vec<u32>> = (0..nch).map(|_| rng.perm(n)).collect();
            if let Some(r) = coll.root {
                // Broadcast/reduce rings start at the root in some builders; keep it valid.
                for ring in &mut rings {
                    let i = ring.iter().position(|&x| x == r).unwrap();
                    ring.rotate_left(i);
                }
            }
            build::ring(&coll, &rings, proto)
        }
        (_, 2) => {
            let trees: Vec<TreeChannel> = (0..nch)
                .map(|_| {
                    let mut t = random_tree(&mut rng, n);
                    if let Some(root) = coll.root {
                        // Re-root: a chain from the root keeps it simple and valid.
                        let mut order = rng.perm(n);
                        let i = order.iter().position(|&x| x == root).unwrap();
                        order.swap(0, i);
                        let mut parent = vec![None; n as usize];
                        for k in 1..n as usize {
                            parent[order[k] as usize] = Some(order[rng.below(k as u64) as usize]);
                        }
                        t = TreeChannel::from_parents(parent).unwrap();
                    }
                    t
                })
                .collect();
            build::tree(&coll, &trees, proto)
        }
        (_, 3) => build::one_shot_channels(&coll, n, proto, nch),
        (CollectiveKind::AllReduce, _) if n == 2 => {
            build::copy_engine_pipeline(&coll, 1 + rng.below(6) as u32)
        }
        (CollectiveKind::AllReduce, _) => build::two_shot_channels(&coll, n, proto, nch),
        _ => build::one_shot(&coll, n, proto),
    };
    let desc = format!(
        "seed {seed}: {} n={n} channels={nch} {} algo#{algo}",
        kind.name(),
        proto.name()
    );
    match built {
        Ok(s) => (s, desc),
        // A builder may decline a combination (e.g. a collective it does not cover); fall back.
        Err(_) => (
            build::ring(
                &Collective::new(CollectiveKind::AllReduce),
                &[rng.perm(n)],
                proto,
            )
            .unwrap(),
            format!("{desc} (fallback ring)"),
        ),
    }
}

fn ops_mut(s: &mut Schedule, r: usize, c: usize) -> &mut Vec<Op> {
    &mut s.ranks[r].channels[c].ops
}

/// All (rank, channel, op index) positions, in order.
fn positions(s: &Schedule) -> Vec<(usize, usize, usize)> {
    let mut v = Vec::new();
    for (r, rp) in s.ranks.iter().enumerate() {
        for (c, ch) in rp.channels.iter().enumerate() {
            for i in 0..ch.ops.len() {
                v.push((r, c, i));
            }
        }
    }
    v
}

/// Applies mutation `which` (0..5); None when the schedule offers no place for it.
fn mutate(s: &Schedule, which: u64, rng: &mut Rng) -> Option<(Schedule, String)> {
    let mut m = s.clone();
    let pos = positions(s);
    let pick = |rng: &mut Rng, f: &dyn Fn(&Op) -> bool| -> Option<(usize, usize, usize)> {
        let cands: Vec<_> = pos
            .iter()
            .copied()
            .filter(|&(r, c, i)| f(&s.ranks[r].channels[c].ops[i]))
            .collect();
        (!cands.is_empty()).then(|| cands[rng.below(cands.len() as u64) as usize])
    };
    match which {
        0 => {
            let (r, c, i) = pick(rng, &|_| true)?;
            let op = ops_mut(&mut m, r, c).remove(i);
            Some((
                m,
                format!("dropped rank {r} channel {c} op {i} ({:?})", op.kind),
            ))
        }
        1 => {
            if s.nranks < 3 {
                return None;
            }
            let (r, c, i) = pick(rng, &|o| o.send_to.is_some())?;
            let op = &mut ops_mut(&mut m, r, c)[i];
            let old = op.send_to.unwrap();
            let mut new = rng.below(s.nranks as u64) as u32;
            while new == old || new == r as u32 {
                new = (new + 1) % s.nranks;
            }
            op.send_to = Some(new);
            Some((
                m,
                format!("rank {r} channel {c} op {i} sends to {new} instead of {old}"),
            ))
        }
        2 => {
            let (r, c, i) = pick(rng, &|o| o.dst.is_some())?;
            let op = &mut ops_mut(&mut m, r, c)[i];
            let mut d = op.dst.unwrap();
            let total = s.buffer_chunks(d.buffer);
            if total <= d.count {
                return None;
            }
            let old = d.chunk;
            d.chunk =
                (d.chunk + 1 + rng.below((total - d.count) as u64) as u32) % (total - d.count + 1);
            if d.chunk == old {
                d.chunk = (old + 1) % (total - d.count + 1);
            }
            op.dst = Some(d);
            Some((
                m,
                format!(
                    "rank {r} channel {c} op {i} writes {:?} chunk {} instead of {old}",
                    d.buffer, d.chunk
                ),
            ))
        }
        3 => {
            // Two receives from the same peer on one channel swapped: each reads the other's slot.
            let mut cands = Vec::new();
            for &(r, c, i) in &pos {
                let ops = &s.ranks[r].channels[c].ops;
                let a = &ops[i];
                if a.recv_from.is_none() || a.peer_stride != 0 {
                    continue;
                }
                for (j, b) in ops.iter().enumerate().skip(i + 1) {
                    let differs = s.op_copy(a, 0).dst != s.op_copy(b, 0).dst
                        || s.op_copy(a, 0).src != s.op_copy(b, 0).src
                        || a.kind != b.kind;
                    if b.recv_from == a.recv_from && b.peer_stride == 0 && differs {
                        cands.push((r, c, i, j));
                        break;
                    }
                }
            }
            if cands.is_empty() {
                return None;
            }
            let (r, c, i, j) = cands[rng.below(cands.len() as u64) as usize];
            ops_mut(&mut m, r, c).swap(i, j);
            Some((
                m,
                format!("rank {r} channel {c}: receives {i} and {j} swapped"),
            ))
        }
        _ => {
            let (r, c, i) = pick(rng, &|o| o.kind.reduces() && o.dst.is_some())?;
            let op = s.ranks[r].channels[c].ops[i].clone();
            let last = s.op_copy(&op, op.repeat.max(1) - 1);
            ops_mut(&mut m, r, c).insert(i + 1, Op::reduce(last.src?, last.dst?));
            Some((
                m,
                format!("rank {r} channel {c} op {i} ({:?}) reduced twice", op.kind),
            ))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn builder_schedules_verify(seed in any::<u64>()) {
        let (s, desc) = random_schedule(seed);
        if let Err(e) = sim::verify(&s) {
            panic!("{desc}: does not verify: {e}");
        }
    }

    #[test]
    fn mutations_are_caught(seed in any::<u64>(), which in 0u64..5) {
        let (s, desc) = random_schedule(seed);
        let mut rng = Rng::new(seed ^ 0x5eed);
        if let Some((m, what)) = mutate(&s, which, &mut rng) {
            if let Ok(rep) = sim::verify(&m) {
                panic!("{desc}, mutation seed {which}: {what}: not caught ({rep:?})");
            }
        }
    }
}

#[test]
fn deadlock_names_ranks_channel_and_ops() {
    // Two ranks each send twice before receiving, with one slot: both block on a full slot.
    let mut s = build::ring(
        &Collective::new(CollectiveKind::AllGather),
        &[vec![0, 1]],
        Protocol::Simple,
    )
    .unwrap();
    s.slots = 1;
    for r in 0..2u32 {
        let ops = &mut s.ranks[r as usize].channels[0].ops;
        // Move every receive to the end, after a duplicated send.
        let send = ops.iter().find(|o| o.kind == OpKind::Send).unwrap().clone();
        ops.insert(0, send);
        let recv = ops.iter().find(|o| o.kind == OpKind::Recv).unwrap().clone();
        ops.push(recv);
    }
    let e = sim::verify(&s).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, sim::VerifyError::Deadlock { .. }), "{msg}");
    assert!(
        msg.contains("rank 0 channel 0") && msg.contains("rank 1 channel 0"),
        "{msg}"
    );
    assert!(msg.contains("free slot"), "{msg}");
}

#[test]
fn unordered_cross_channel_writes_are_races() {
    let mut s =
        build::copy_engine_pipeline(&Collective::new(CollectiveKind::AllReduce), 2).unwrap();
    sim::verify(&s).unwrap();
    for rp in &mut s.ranks {
        for ch in &mut rp.channels {
            for op in &mut ch.ops {
                op.deps.clear();
            }
        }
    }
    let e = sim::verify(&s).unwrap_err();
    assert!(
        matches!(
            e,
            sim::VerifyError::Race { .. } | sim::VerifyError::Uninitialized { .. }
        ),
        "{e}"
    );
}

#[test]
fn mutations_apply_to_most_schedules() {
    // Guards the property above against vacuity: most (seed, mutation) pairs really mutate.
    let mut applied = [0u32; 5];
    for seed in 0..60u64 {
        let (s, _) = random_schedule(seed);
        for (which, n) in applied.iter_mut().enumerate() {
            let mut rng = Rng::new(seed ^ 0x5eed);
            if let Some((m, what)) = mutate(&s, which as u64, &mut rng) {
                *n += 1;
                assert!(sim::verify(&m).is_err(), "seed {seed}: {what}: not caught");
            }
        }
    }
    eprintln!("mutations applied per kind (of 60): {applied:?}");
    assert!(applied.iter().all(|&n| n >= 10), "{applied:?}");
}
