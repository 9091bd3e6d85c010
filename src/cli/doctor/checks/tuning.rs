//! NCCL_ALGO / NCCL_PROTO / channel limits that force worse than the tuner's choice, and fewer
//! channels than the topology supports.

use super::{gbps, Inputs};
use crate::cli::doctor::cost::{nccl_filter, size_name, LARGE, SIZES};
use crate::cli::doctor::finding::{Finding, Severity};
use crate::cli::doctor::nccl_log::NcclLog;
use planner::schedule::CollectiveKind;
use planner::tuner::Filter;

/// A forced choice must lose at least this share of busbw at some size to be reported.
const LOSS: f64 = 0.10;

/// NCCL's own tuning table (from the log): the best AllReduce busbw-equivalent rate at `bytes`
/// over the (algorithm, protocol) cells `allow` admits: bytes / (lat + bytes / bw), in GB/s.
fn table_rate(log: &NcclLog, bytes: u64, allow: &dyn Fn(&str, &str) -> bool) -> Option<f64> {
    log.tuner
        .iter()
        .filter(|c| c.func == "AllReduce" && c.bw_gbps > 0.0 && allow(&c.algo, &c.proto))
        .map(|c| bytes as f64 / 1000.0 / (c.lat_us + bytes as f64 / 1000.0 / c.bw_gbps))
        .reduce(f64::max)
}

/// NCCL's list syntax ("^a,b", "allreduce:a;..."): does it admit `name`?
fn admits(list: Option<&str>, name: &str) -> bool {
    let Some(s) = list else { return true };
    let s = s
        .split(';')
        .find(|p| p.to_ascii_lowercase().starts_with("allreduce:"))
        .map(|p| p.split_once(':').map(|x| x.1).unwrap_or(p))
        .unwrap_or(s);
    let (neg, s) = match s.trim().strip_prefix('^') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let hit = s.split(',').any(|x| x.trim().eq_ignore_ascii_case(name));
    hit != neg
}

/// NCCL_ALGO / NCCL_PROTO forcing a slower choice than the tuner's.
pub fn forced_algo_proto(i: &Inputs) -> Vec<Finding> {
    let algo = i.nccl_var("NCCL_ALGO");
    let proto = i.nccl_var("NCCL_PROTO");
    if algo.is_none() && proto.is_none() {
        return vec![];
    }
    let what = [
        algo.as_ref().map(|a| format!("NCCL_ALGO={}", a.0)),
        proto.as_ref().map(|p| format!("NCCL_PROTO={}", p.0)),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(" ");
    // (size, free rate, forced rate, source) at the size where forcing loses most.
    let mut worst: Option<(u64, f64, f64, String)> = None;
    let mut consider = |b: u64, free: f64, forced: f64, src: &str| {
        if worst.as_ref().is_none_or(|w| forced / free < w.2 / w.1) {
            worst = Some((b, free, forced, src.to_string()));
        }
    };
    if let Some(m) = &i.machine {
        if let Ok(f) = nccl_filter(
            algo.as_ref().map(|a| a.0.as_str()),
            proto.as_ref().map(|p| p.0.as_str()),
        ) {
            for b in SIZES {
                let free = m.nccl_busbw(CollectiveKind::AllReduce, b, &Filter::default());
                let forced = m.nccl_busbw(CollectiveKind::AllReduce, b, &f);
                if let (Some(a), Some(c)) = (free, forced) {
                    consider(b, a, c, &format!("planner on {}", m.source));
                }
            }
        }
    } else if let Some(log) = &i.log {
        let (a, p) = (
            algo.as_ref().map(|x| x.0.clone()),
            proto.as_ref().map(|x| x.0.clone()),
        );
        let allow = |al: &str, pr: &str| admits(a.as_deref(), al) && admits(p.as_deref(), pr);
        for b in SIZES {
            if let (Some(free), Some(forced)) =
                (table_rate(log, b, &|_, _| true), table_rate(log, b, &allow))
            {
                consider(b, free, forced, "NCCL's tuning table in the log");
            }
        }
    }
    let Some((b, free, forced, src)) = worst else {
        return vec![];
    };
    if forced >= free * (1.0 - LOSS) {
        return vec![];
    }
    let mut f = Finding::new(
        "forced-algo-proto",
        if forced < free * 0.5 {
            Severity::Error
        } else {
            Severity::Warning
        },
        format!("{what} forces a slower all-reduce than NCCL's tuner would choose"),
    );
    for (_, e) in algo.iter().chain(proto.iter()) {
        f = f.evidence(e.clone());
    }
    if let Some(log) = &i.log {
        if let Some(c) = log
            .choices
            .iter()
            .filter(|c| c.func == "AllReduce")
            .max_by_key(|c| c.bytes)
        {
            f = f.evidence(format!(
                "{}: AllReduce: {} Bytes -> Algo {} proto {}",
                log.cite(c.line),
                c.bytes,
                c.algo,
                c.proto
            ));
        }
    }
    f.cost(Some(format!(
        "at {} all-reduce: {} GB/s forced, against {} with the tuner's choice ({:.0}% lost; {src})",
        size_name(b),
        gbps(forced),
        gbps(free),
        100.0 * (1.0 - forced / free)
    )))
    .fix(format!(
        "unset {}: NCCL's tuner picks per size; force an algorithm only to work around a measured bug",
        [algo.as_ref().map(|_| "NCCL_ALGO"), proto.as_ref().map(|_| "NCCL_PROTO")]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" and ")
    ))
    .into_vec()
}

/// NCCL_MAX_NCHANNELS / NCCL_MAX_NRINGS below what the machine needs (priced by the planner).
pub fn channel_limit(i: &Inputs) -> Vec<Finding> {
    let Some((key, (v, ev))) = ["NCCL_MAX_NCHANNELS", "NCCL_MAX_NRINGS"]
        .iter()
        .find_map(|k| i.nccl_var(k).map(|x| (*k, x)))
    else {
        return vec![];
    };
    let Ok(max) = v.trim().parse::<u32>() else {
        return vec![];
    };
    // With a log, fewer-channels reports what NCCL actually used.
    if i.log.as_ref().is_some_and(|l| !l.coll_channels.is_empty()) {
        return vec![];
    }
    let Some(m) = &i.machine else { return vec![] };
    let free = m.nccl_busbw(CollectiveKind::AllReduce, LARGE, &Filter::default());
    let capped = m.nccl_busbw_capped(CollectiveKind::AllReduce, LARGE, &Filter::default(), max);
    let (Some(free), Some(capped)) = (free, capped) else {
        return vec![];
    };
    if capped >= free * (1.0 - LOSS) {
        return vec![];
    }
    Finding::new(
        "channel-limit",
        if capped < free * 0.5 { Severity::Error } else { Severity::Warning },
        format!("{key}={max} caps NCCL below the {} channels this machine supports", m.coll_channels()),
    )
    .evidence(ev)
    .cost(Some(format!(
        "256M all-reduce: {} GB/s with {max} channel(s), against {} uncapped (planner on {})",
        gbps(capped),
        gbps(free),
        m.source
    )))
    .fix(format!("unset {key} (cap channels only to leave SMs to compute kernels, and measure what it costs)"))
    .into_vec()
}

/// NCCL used fewer collective channels than its own search (or the planner) found.
pub fn fewer_channels(i: &Inputs) -> Vec<Finding> {
    let Some(log) = &i.log else { return vec![] };
    let Some(&(used, _, line)) = log.coll_channels.iter().min_by_key(|c| c.0) else {
        return vec![];
    };
    let graphs = i.graphs();
    let ring = graphs
        .iter()
        .filter(|g| g.0.pattern == 4)
        .map(|g| g.0.nchannels)
        .min();
    let tree = graphs
        .iter()
        .filter(|g| g.0.pattern <= 3)
        .map(|g| g.0.nchannels)
        .min();
    let (expected, why) = match (ring, tree) {
        (Some(r), t) => {
            let n = r.min(t.unwrap_or(r));
            let at = graphs
                .iter()
                .find(|g| g.0.pattern == 4)
                .map(|g| g.1.clone())
                .unwrap_or_default();
            (
                (2 * n).min(64),
                format!(
                    "{at}: NCCL's search found {n} ring channel(s), {} collective channels after duplication",
                    (2 * n).min(64)
                ),
            )
        }
        (None, _) => match &i.machine {
            Some(m) if m.nranks() == log.nranks().unwrap_or(0) => (
                m.coll_channels(),
                format!(
                    "{}: the planner finds {} collective channels",
                    m.source,
                    m.coll_channels()
                ),
            ),
            _ => return vec![],
        },
    };
    if used >= expected || expected == 0 {
        return vec![];
    }
    let cap = ["NCCL_MAX_NCHANNELS", "NCCL_MAX_NRINGS", "NCCL_MAX_CTAS"]
        .iter()
        .find_map(|k| i.nccl_var(k));
    let mut f = Finding::new(
        "fewer-channels",
        if used * 2 <= expected {
            Severity::Error
        } else {
            Severity::Warning
        },
        format!("NCCL runs {used} collective channel(s) where the topology supports {expected}"),
    )
    .evidence(format!("{}: {used} coll channels", log.cite(line)))
    .evidence(why);
    if let Some((_, e)) = &cap {
        f = f.evidence(e.clone());
    }
    let cost = i.machine.as_ref().and_then(|m| {
        let free = m.nccl_busbw(CollectiveKind::AllReduce, LARGE, &Filter::default())?;
        let capped = m.nccl_busbw_capped(CollectiveKind::AllReduce, LARGE, &Filter::default(), used)?;
        Some(format!(
            "256M all-reduce: {} GB/s with {used} channel(s), against {} with all of them (planner on {})",
            gbps(capped),
            gbps(free),
            m.source
        ))
    });
    f.cost(cost)
        .fix(match cap {
            Some(_) => "unset the channel cap (NCCL_MAX_NCHANNELS / NCCL_MAX_NRINGS / NCCL_MAX_CTAS)".to_string(),
            None => "a communicator config (maxCTAs) or a tuner plugin limits channels: check ncclConfig_t and NCCL_TUNER_PLUGIN".to_string(),
        })
        .into_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_lists_admit_like_nccl() {
        assert!(admits(None, "Ring"));
        assert!(admits(Some("ring,tree"), "Tree"));
        assert!(!admits(Some("Tree"), "Ring"));
        assert!(!admits(Some("^LL"), "LL"));
        assert!(admits(Some("^LL"), "Simple"));
        assert!(admits(Some("allreduce:tree;broadcast:ring"), "Tree"));
        assert!(!admits(Some("allreduce:tree;broadcast:ring"), "Ring"));
    }
}
