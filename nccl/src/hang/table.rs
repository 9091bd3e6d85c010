//! The hang report without I/O: what each rank's record says ([`RankView`]), which ranks are
//! stuck, behind or disagree ([`analyze`]), and the table rank 0 prints ([`Report::render`]).

use crate::abi::{NcclOp, NcclType};
use crate::op::Kind;
use std::time::Duration;

/// The call a rank is in, as its record holds it (for a group, the batch's first call).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// The call's position among this communicator's calls on this rank, from 0.
    pub seq: u64,
    pub kind: Kind,
    pub count: u64,
    pub dtype: NcclType,
    pub op: NcclOp,
    /// Root of a rooted collective, peer of send and receive.
    pub peer: u32,
    /// Calls in the batch (1 outside a group).
    pub batch: u32,
}

/// What one rank's record says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum State {
    /// No readable record: the rank died, runs on another host, or has not joined yet.
    NoRecord,
    /// Between calls, `done` calls completed.
    Idle { done: u64 },
    /// Inside `call` for `waited`.
    InCall { call: Call, waited: Duration },
    /// The record's process has exited without destroying the communicator (destroy removes
    /// the record; a killed rank cannot), inside `call` or between calls after `done`.
    Exited { call: Option<Call>, done: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankView {
    pub rank: u32,
    pub pid: u32,
    pub state: State,
}

/// Where a rank stands against the stuck call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// In the stuck call for longer than the threshold.
    Stuck,
    /// In the stuck call, with its arguments, for less than the threshold.
    Waiting,
    /// Has not reached the stuck call (idle before it, or in an earlier call).
    Behind,
    /// In the stuck call with other arguments: the fields that differ.
    Differs(Vec<&'static str>),
    /// Has completed the stuck call.
    Ahead,
    NoRecord,
    Exited,
}

/// One report: the stuck call (`seq`, with the arguments most ranks in it passed) and every
/// rank's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub seq: u64,
    pub reference: Call,
    pub threshold: Duration,
    pub ranks: Vec<(RankView, Verdict)>,
}

/// The report for `views` (every rank's, in rank order), or `None` when no rank has been in
/// a call for `threshold`. The stuck call is the latest one a rank is stuck in: ranks that
/// have not reached it are the ones to look at.
pub fn analyze(views: &[RankView], threshold: Duration) -> Option<Report> {
    let seq = views
        .iter()
        .filter_map(|v| match v.state {
            State::InCall { call, waited } if waited >= threshold => Some(call.seq),
            _ => None,
        })
        .max()?;
    let at: Vec<Call> = views
        .iter()
        .filter_map(|v| match v.state {
            State::InCall { call, .. } if call.seq == seq => Some(call),
            _ => None,
        })
        .collect();
    // The arguments most ranks in the call passed; on a tie, the lowest rank's.
    let reference = *at
        .iter()
        .enumerate()
        .max_by_key(|(i, c)| {
            let same = at.iter().filter(|o| differences(c, o).is_empty()).count();
            (same, std::cmp::Reverse(*i))
        })?
        .1;
    let ranks = views
        .iter()
        .map(|v| (*v, verdict(v, seq, &reference, threshold)))
        .collect();
    Some(Report {
        seq,
        reference,
        threshold,
        ranks,
    })
}

fn verdict(v: &RankView, seq: u64, reference: &Call, threshold: Duration) -> Verdict {
    match v.state {
        State::NoRecord => Verdict::NoRecord,
        State::Exited { .. } => Verdict::Exited,
        State::Idle { done } if done <= seq => Verdict::Behind,
        State::Idle { .. } => Verdict::Ahead,
        State::InCall { call, .. } if call.seq < seq => Verdict::Behind,
        State::InCall { call, .. } if call.seq > seq => Verdict::Ahead,
        State::InCall { call, waited } => {
            let d = differences(reference, &call);
            if !d.is_empty() {
                Verdict::Differs(d)
            } else if waited >= threshold {
                Verdict::Stuck
            } else {
                Verdict::Waiting
            }
        }
    }
}

fn is_p2p(k: Kind) -> bool {
    matches!(k, Kind::Send | Kind::Recv)
}

fn is_rooted(k: Kind) -> bool {
    matches!(
        k,
        Kind::Broadcast | Kind::Reduce | Kind::Gather | Kind::Scatter
    )
}

fn reduces(k: Kind) -> bool {
    matches!(k, Kind::AllReduce | Kind::ReduceScatter | Kind::Reduce)
}

/// The fields in which `b` differs from `a`, for calls every rank must make alike. Sends and
/// receives pair up with different peers, counts and directions: they are not compared.
fn differences(a: &Call, b: &Call) -> Vec<&'static str> {
    if is_p2p(a.kind) && is_p2p(b.kind) {
        return Vec::new();
    }
    let mut d = Vec::new();
    if a.kind != b.kind {
        d.push("call");
    }
    if a.count != b.count {
        d.push("count");
    }
    if a.dtype != b.dtype {
        d.push("type");
    }
    if a.kind == b.kind && reduces(a.kind) && a.op != b.op {
        d.push("op");
    }
    if a.kind == b.kind && is_rooted(a.kind) && a.peer != b.peer {
        d.push("root");
    }
    if a.batch != b.batch {
        d.push("group");
    }
    d
}

/// NCCL's name of the call.
pub fn call_name(k: Kind) -> &'static str {
    match k {
        Kind::AllReduce => "ncclAllReduce",
        Kind::AllGather => "ncclAllGather",
        Kind::ReduceScatter => "ncclReduceScatter",
        Kind::Broadcast => "ncclBroadcast",
        Kind::Reduce => "ncclReduce",
        Kind::AllToAll => "ncclAlltoAll",
        Kind::Gather => "ncclGather",
        Kind::Scatter => "ncclScatter",
        Kind::Send => "ncclSend",
        Kind::Recv => "ncclRecv",
    }
}

/// "1-3, 5" for ranks 1, 2, 3 and 5.
pub fn rank_list(ranks: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            ranks[i].to_string()
        } else {
            format!("{}-{}", ranks[i], ranks[j])
        });
        i = j + 1;
    }
    parts.join(", ")
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The columns describing a call, after "seq".
fn call_cells(c: &Call) -> [String; 6] {
    let name = if c.batch > 1 {
        format!("{} (+{} grouped)", call_name(c.kind), c.batch - 1)
    } else {
        call_name(c.kind).to_string()
    };
    let op = if reduces(c.kind) {
        c.op.name()
    } else {
        "-".into()
    };
    let peer = match c.kind {
        k if is_rooted(k) => format!("root {}", c.peer),
        Kind::Send => format!("to {}", c.peer),
        Kind::Recv => format!("from {}", c.peer),
        _ => "-".into(),
    };
    [
        c.seq.to_string(),
        name,
        c.count.to_string(),
        c.dtype.name().into(),
        op,
        peer,
    ]
}

fn verdict_text(v: &Verdict) -> String {
    match v {
        Verdict::Stuck => "stuck".into(),
        Verdict::Waiting => "waiting".into(),
        Verdict::Behind => "behind".into(),
        Verdict::Differs(d) => format!("differs: {}", d.join(", ")),
        Verdict::Ahead => "ahead".into(),
        Verdict::NoRecord => "no record".into(),
        Verdict::Exited => "exited".into(),
    }
}

/// A rank's row without its rank and pid; `waited` apart, so neighbours that differ only in
/// it share a row.
fn row(v: &RankView, verdict: &Verdict) -> (Vec<String>, Duration) {
    let (state, cells, waited) = match v.state {
        State::NoRecord => ("-".to_string(), None, Duration::ZERO),
        State::Idle { done: 0 } => ("idle, no call yet".to_string(), None, Duration::ZERO),
        State::Idle { done } => (format!("idle after #{}", done - 1), None, Duration::ZERO),
        State::InCall { call, waited } => ("in call".to_string(), Some(call_cells(&call)), waited),
        State::Exited { call: Some(c), .. } => (
            "exited in call".into(),
            Some(call_cells(&c)),
            Duration::ZERO,
        ),
        State::Exited { done: 0, .. } => ("exited, no call yet".into(), None, Duration::ZERO),
        State::Exited { done, .. } => (format!("exited after #{}", done - 1), None, Duration::ZERO),
    };
    let cells = cells.unwrap_or_else(|| std::array::from_fn(|_| "-".to_string()));
    let mut r = vec![state];
    r.extend(cells);
    r.push(verdict_text(verdict));
    (r, waited)
}

impl Report {
    /// Ranks with verdict `want`.
    pub fn with(&self, want: impl Fn(&Verdict) -> bool) -> Vec<u32> {
        self.ranks
            .iter()
            .filter(|(_, v)| want(v))
            .map(|(r, _)| r.rank)
            .collect()
    }

    /// The report: a headline, a summary line, and a table of every rank, neighbouring ranks
    /// in the same state on one row (so a large job's table stays short).
    pub fn render(&self, comm: usize) -> String {
        let r = &self.reference;
        let [_, name, count, dtype, op, peer] = call_cells(r);
        let args = [op, peer]
            .into_iter()
            .filter(|s| s != "-")
            .collect::<Vec<_>>();
        let args = if args.is_empty() {
            String::new()
        } else {
            format!(", {}", args.join(", "))
        };
        let stuck = self.with(|v| *v == Verdict::Stuck);
        let list = |v: Vec<u32>| match v.len() {
            0 => "none".to_string(),
            1 => format!("rank {}", v[0]),
            _ => format!("ranks {}", rank_list(&v)),
        };
        let mut out = format!(
            "hang report: comm {comm:#x} ({} ranks): call #{} ({name}, {count} x {dtype}{args}) has waited over {} on {}\n",
            self.ranks.len(),
            self.seq,
            secs(self.threshold),
            list(stuck),
        );
        out += &format!(
            "  behind: {}; arguments differ: {}; no record: {}",
            list(self.with(|v| *v == Verdict::Behind)),
            list(self.with(|v| matches!(v, Verdict::Differs(_)))),
            list(self.with(|v| *v == Verdict::NoRecord)),
        );
        let exited = self.with(|v| *v == Verdict::Exited);
        if !exited.is_empty() {
            out += &format!("; exited: {}", list(exited));
        }
        out += "\n";
        out + &self.table()
    }

    fn table(&self) -> String {
        // Rows: (ranks, pid, cells, longest wait).
        let mut rows: Vec<(Vec<u32>, u32, Vec<String>, Duration)> = Vec::new();
        for (v, verdict) in &self.ranks {
            let (cells, waited) = row(v, verdict);
            match rows.last_mut() {
                Some(last) if last.2 == cells && last.0.last().map(|r| r + 1) == Some(v.rank) => {
                    last.0.push(v.rank);
                    last.3 = last.3.max(waited);
                }
                _ => rows.push((vec![v.rank], v.pid, cells, waited)),
            }
        }
        let head = [
            "rank",
            "pid",
            "state",
            "waited",
            "seq",
            "call",
            "count",
            "type",
            "op",
            "root/peer",
            "verdict",
        ];
        let mut lines: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
        for (ranks, pid, cells, waited) in rows {
            let pid = match (ranks.len(), pid) {
                (1, p) if p != 0 => p.to_string(),
                _ => "-".into(),
            };
            let waited = if waited.is_zero() {
                "-".into()
            } else {
                secs(waited)
            };
            let mut l = vec![rank_list(&ranks), pid, cells[0].clone(), waited];
            l.extend(cells[1..].iter().cloned());
            lines.push(l);
        }
        let widths: Vec<usize> = (0..head.len())
            .map(|i| lines.iter().map(|l| l[i].len()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for l in lines {
            let cells: Vec<String> = l
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            out += &format!("  {}\n", cells.join("  ").trim_end());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime::ReduceOp;

    fn all_reduce(seq: u64, count: u64) -> Call {
        Call {
            seq,
            kind: Kind::AllReduce,
            count,
            dtype: NcclType::F32,
            op: NcclOp::Builtin(ReduceOp::Sum),
            peer: 0,
            batch: 1,
        }
    }

    fn in_call(rank: u32, call: Call, secs: f64) -> RankView {
        RankView {
            rank,
            pid: 100 + rank,
            state: State::InCall {
                call,
                waited: Duration::from_secs_f64(secs),
            },
        }
    }

    fn idle(rank: u32, done: u64) -> RankView {
        RankView {
            rank,
            pid: 100 + rank,
            state: State::Idle { done },
        }
    }

    const T: Duration = Duration::from_secs(1);

    #[test]
    fn nothing_to_report_below_the_threshold() {
        let v = [in_call(0, all_reduce(4, 8), 0.9), idle(1, 4)];
        assert_eq!(analyze(&v, T), None);
    }

    #[test]
    fn a_rank_that_skipped_a_call_is_behind() {
        let v = [
            in_call(0, all_reduce(4, 1024), 1.2),
            in_call(1, all_reduce(4, 1024), 1.1),
            idle(2, 4),
        ];
        let r = analyze(&v, T).unwrap();
        assert_eq!(r.seq, 4);
        assert_eq!(r.with(|v| *v == Verdict::Stuck), [0, 1]);
        assert_eq!(r.with(|v| *v == Verdict::Behind), [2]);
        let text = r.render(0x10);
        let want = "\
hang report: comm 0x10 (3 ranks): call #4 (ncclAllReduce, 1024 x float32, sum) has waited over 1.0 s on ranks 0-1
  behind: rank 2; arguments differ: none; no record: none
  rank  pid  state          waited  seq  call           count  type     op   root/peer  verdict
  0-1   -    in call        1.2 s   4    ncclAllReduce  1024   float32  sum  -          stuck
  2     102  idle after #3  -       -    -              -      -        -    -          behind
";
        assert_eq!(text, want, "\n{text}");
    }

    #[test]
    fn differing_arguments_earlier_calls_and_missing_records_are_named() {
        let mut bcast = all_reduce(7, 64);
        bcast.kind = Kind::Broadcast;
        bcast.peer = 0;
        let mut other_root = bcast;
        other_root.peer = 2;
        other_root.dtype = NcclType::I32;
        let mut recv = all_reduce(6, 64);
        recv.kind = Kind::Recv;
        recv.peer = 3;
        let v = [
            in_call(0, bcast, 3.0),
            in_call(1, bcast, 0.2),
            in_call(2, other_root, 2.5),
            in_call(3, recv, 3.5),
            RankView {
                rank: 4,
                pid: 0,
                state: State::NoRecord,
            },
            idle(5, 8),
            RankView {
                rank: 6,
                pid: 106,
                state: State::Exited {
                    call: Some(all_reduce(5, 64)),
                    done: 5,
                },
            },
        ];
        let r = analyze(&v, T).unwrap();
        assert_eq!(r.seq, 7);
        assert_eq!(r.reference, bcast);
        let verdicts: Vec<Verdict> = r.ranks.iter().map(|(_, v)| v.clone()).collect();
        assert_eq!(
            verdicts,
            [
                Verdict::Stuck,
                Verdict::Waiting,
                Verdict::Differs(vec!["type", "root"]),
                Verdict::Behind,
                Verdict::NoRecord,
                Verdict::Ahead,
                Verdict::Exited,
            ]
        );
        let text = r.render(0x10);
        let want = "\
hang report: comm 0x10 (7 ranks): call #7 (ncclBroadcast, 64 x float32, root 0) has waited over 1.0 s on rank 0
  behind: rank 3; arguments differ: rank 2; no record: rank 4; exited: rank 6
  rank  pid  state           waited  seq  call           count  type     op   root/peer  verdict
  0     100  in call         3.0 s   7    ncclBroadcast  64     float32  -    root 0     stuck
  1     101  in call         0.2 s   7    ncclBroadcast  64     float32  -    root 0     waiting
  2     102  in call         2.5 s   7    ncclBroadcast  64     int32    -    root 2     differs: type, root
  3     103  in call         3.5 s   6    ncclRecv       64     float32  -    from 3     behind
  4     -    -               -       -    -              -      -        -    -          no record
  5     105  idle after #7   -       -    -              -      -        -    -          ahead
  6     106  exited in call  -       5    ncclAllReduce  64     float32  sum  -          exited
";
        assert_eq!(text, want, "\n{text}");
    }

    #[test]
    fn the_majority_sets_the_reference_and_sends_pair_with_receives() {
        let v = [
            in_call(0, all_reduce(2, 10), 2.0),
            in_call(1, all_reduce(2, 20), 2.0),
            in_call(2, all_reduce(2, 20), 2.0),
        ];
        let r = analyze(&v, T).unwrap();
        assert_eq!(r.reference.count, 20);
        assert_eq!(
            r.with(|v| matches!(v, Verdict::Differs(d) if d == &["count"])),
            [0]
        );
        let mut send = all_reduce(3, 8);
        send.kind = Kind::Send;
        send.peer = 1;
        let mut recv = send;
        recv.kind = Kind::Recv;
        recv.peer = 0;
        recv.count = 4;
        let r = analyze(&[in_call(0, send, 2.0), in_call(1, recv, 2.0)], T).unwrap();
        assert_eq!(r.with(|v| *v == Verdict::Stuck), [0, 1]);
    }

    #[test]
    fn rank_lists_are_ranges() {
        assert_eq!(rank_list(&[0, 1, 2, 5, 7, 8]), "0-2, 5, 7-8");
        assert_eq!(rank_list(&[]), "");
    }
}
