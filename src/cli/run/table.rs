//! `topoplan run`'s nccl-tests style output: the header and one row per size, with the wrong
//! elements and the average bus bandwidth at the end.

use super::{count_for, Args, Plan};
use planner::schedule::CollectiveKind;
use runtime::perf::{memcpy_gbps, Sample};

pub(super) fn header(p: &Plan, n: u32, a: &Args, what: &str, sched: &str) {
    println!(
        "# topoplan run: {} on {n} ranks ({what}), {} {}, {sched}",
        p.kind.name(),
        p.dtype.nccl_name(),
        p.op.name()
    );
    let mem = if a.memcpy { "  memcpy" } else { "" };
    println!("#{:>63}{:>33}", "out-of-place", "in-place");
    println!(
        "#{:>11} {:>12} {:>9} {:>6} {:>6} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} {:>7} {:>6}{mem}",
        "size",
        "count",
        "type",
        "redop",
        "root",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "time",
        "algbw",
        "busbw",
        "#wrong"
    );
    let mem = if a.memcpy { "  (GB/s)" } else { "" };
    println!(
        "#{:>11} {:>12} {:>9} {:>6} {:>6} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} {:>7} {:>6}{mem}",
        "(B)",
        "(elements)",
        "",
        "",
        "",
        "(us)",
        "(GB/s)",
        "(GB/s)",
        "",
        "(us)",
        "(GB/s)",
        "(GB/s)",
        ""
    );
}

/// Prints the table; returns the total of wrong elements.
pub(super) fn table(p: &Plan, n: u32, a: &Args, rows: &[[Sample; 2]]) -> u64 {
    let mut wrong = 0;
    let mut bus_sum = 0.0;
    for (&bytes, s) in p.sizes.iter().zip(rows) {
        let count = count_for(p.kind, bytes, p.dtype, n);
        let blocks = bytes / p.dtype.size() as u64 / count.max(1) as u64;
        let real = (count as u64 * blocks.max(1) * p.dtype.size() as u64) as f64;
        let root = if matches!(p.kind, CollectiveKind::Broadcast | CollectiveKind::Reduce) {
            a.root as i64
        } else {
            -1
        };
        let redop = if p.kind.reduces() {
            p.op.name()
        } else {
            "none"
        };
        let mut line = format!(
            "{:>12} {:>12} {:>9} {:>6} {:>6}",
            real as u64,
            count as u64 * blocks.max(1),
            p.dtype.nccl_name(),
            redop,
            root
        );
        for x in s {
            let algbw = if x.time_us > 0.0 {
                real / x.time_us / 1e3
            } else {
                0.0
            };
            let busbw = algbw * p.kind.busbw_factor(n);
            bus_sum += busbw / 2.0;
            let w = if a.check != 0 {
                x.wrong.to_string()
            } else {
                "N/A".into()
            };
            line += &format!(" {:>9.2} {:>7.2} {:>7.2} {:>6}", x.time_us, algbw, busbw, w);
            wrong += x.wrong;
        }
        if a.memcpy {
            line += &format!("  {:>6.2}", memcpy_gbps(real as usize, a.iters.max(1)));
        }
        println!("{line}");
    }
    println!(
        "# Out of bounds values : {wrong} {}",
        if wrong == 0 { "OK" } else { "FAILED" }
    );
    println!(
        "# Avg bus bandwidth    : {:.4}",
        bus_sum / rows.len().max(1) as f64
    );
    wrong
}
