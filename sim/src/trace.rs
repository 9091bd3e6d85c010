//! Chrome / Perfetto trace output (the JSON "Trace Event Format"): one process per rank with a
//! thread per channel showing each step, and one process "links" with a counter track per
//! resource showing its load in GB/s over time. Opens in ui.perfetto.dev and chrome://tracing.

use planner::schedule::OpKind;
use serde_json::{json, Value};

#[derive(Clone, Debug)]
pub struct TraceStep {
    pub rank: u32,
    pub channel: u32,
    pub kind: OpKind,
    /// Expanded op index within the channel program.
    pub op: u32,
    pub iter: u32,
    pub sub: u32,
    pub start_ps: u64,
    pub end_ps: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub steps: Vec<TraceStep>,
    /// (time ps, resource, bytes/µs) load samples; a resource absent from a sample is idle.
    pub samples: Vec<(u64, Vec<(u32, f64)>)>,
    pub resources: Vec<String>,
}

impl Trace {
    pub(crate) fn sample(&mut self, t: u64, mut per_res: Vec<(u32, f64)>) {
        per_res.sort_by_key(|x| x.0);
        let mut merged: Vec<(u32, f64)> = Vec::new();
        for (r, v) in per_res {
            match merged.last_mut() {
                Some(last) if last.0 == r => last.1 += v,
                _ => merged.push((r, v)),
            }
        }
        if let Some(last) = self.samples.last_mut() {
            if last.0 == t {
                last.1 = merged;
                return;
            }
        }
        self.samples.push((t, merged));
    }

    /// The trace as Trace Event Format JSON (timestamps in µs).
    pub fn to_json(&self) -> Value {
        let mut ev: Vec<Value> = Vec::new();
        let us = |ps: u64| ps as f64 / 1e6;
        let mut ranks: Vec<(u32, u32)> = self.steps.iter().map(|s| (s.rank, s.channel)).collect();
        ranks.sort_unstable();
        ranks.dedup();
        for &(r, c) in &ranks {
            ev.push(
                json!({"ph":"M","name":"process_name","pid":r,"args":{"name":format!("rank {r}")}}),
            );
            ev.push(json!({"ph":"M","name":"thread_name","pid":r,"tid":c,"args":{"name":format!("channel {c}")}}));
        }
        for s in &self.steps {
            ev.push(json!({
                "ph":"X","pid":s.rank,"tid":s.channel,"name":format!("{:?}", s.kind),
                "ts":us(s.start_ps),"dur":us(s.end_ps.saturating_sub(s.start_ps)),
                "args":{"op":s.op,"iter":s.iter,"step":s.sub}
            }));
        }
        let links_pid = 1_000_000u32;
        ev.push(json!({"ph":"M","name":"process_name","pid":links_pid,"args":{"name":"links"}}));
        let mut last: Vec<f64> = vec![0.0; self.resources.len()];
        for (t, loads) in &self.samples {
            let mut now = vec![0.0; self.resources.len()];
            for &(r, v) in loads {
                if let Some(x) = now.get_mut(r as usize) {
                    *x = v / 1e3;
                }
            }
            for (r, (&a, &b)) in last.iter().zip(&now).enumerate() {
                if a != b {
                    ev.push(json!({"ph":"C","pid":links_pid,"name":self.resources[r],
                        "ts":us(*t),"args":{"GB/s":b}}));
                }
            }
            last = now;
        }
        json!({"traceEvents": ev, "displayTimeUnit": "ns"})
    }
}
