//! `topoplan plan`'s text output: the searched rings and trees, then per collective its bound
//! and one nccl-tests style row per size.

use super::{Args, CollPlan};
use crate::cli::plan_bound::pct;
use planner::plan::Planner;

/// The searched rings and their distinct orders (at most 8 shown).
fn print_rings(ch: &planner::search::Channels) {
    let nh = ch.hosts.len();
    println!(
        "# Rings: {} channels x {:.1} GB/s = {:.1} GB/s per GPU searched, run as {} channels (NCCL runs each searched ring {}x), hops over {:?}{}",
        ch.ring.count,
        ch.ring.bw_gbps,
        ch.ring.count as f64 * ch.ring.bw_gbps,
        ch.rings.len(),
        ch.ring_runs,
        ch.ring.intra,
        if nh > 1 {
            format!("; each ring crosses {nh} hosts, entering and leaving every host through one NIC (rail-aligned)")
        } else {
            String::new()
        }
    );
    let mut shown: Vec<(&Vec<u32>, &Option<String>)> = Vec::new();
    for (c, nic) in ch.ring_chains.iter().zip(&ch.ring_nics) {
        if !shown.iter().any(|s| s.0 == c && s.1 == nic) {
            shown.push((c, nic));
        }
    }
    for (i, (c, nic)) in shown.iter().enumerate().take(8) {
        let order: Vec<String> = c
            .iter()
            .map(|x| ch.hosts[0][*x as usize].to_string())
            .collect();
        let count = ch
            .ring_chains
            .iter()
            .zip(&ch.ring_nics)
            .filter(|(x, y)| x == c && y == nic)
            .count();
        println!(
            "#   ring order {i}: {}{}{} (x{count} channels)",
            order.join(" -> "),
            if nh > 1 {
                " (host 0; every host alike)"
            } else {
                " -> back"
            },
            nic.as_ref()
                .map(|x| format!(" via NIC {x}"))
                .unwrap_or_default()
        );
    }
    if shown.len() > 8 {
        println!("#   ... {} more distinct orders", shown.len() - 8);
    }
}

pub(super) fn print_text(a: &Args, p: &Planner, topo: &str, plans: &[CollPlan]) {
    let ch = p.channels();
    let n = p.nranks();
    println!("# topoplan plan: {}", a.file.display());
    println!("# Topology: {topo}");
    if let Some(g) = &a.gpus {
        println!(
            "# Communicator: GPUs {g} of the topology as ranks 0..{}, in that order",
            n - 1
        );
    }
    println!("# {}", p.profile().note());
    let nh = ch.hosts.len();
    print_rings(ch);
    println!(
        "# Trees: {} channels x {:.1} GB/s ({}), hops over {:?}",
        ch.tree.count,
        ch.tree.bw_gbps,
        if nh > 1 {
            "double binary trees over hosts, each host's GPUs chained below its head"
        } else {
            "chains, in pairs running opposite ways"
        },
        ch.tree.intra
    );
    for (i, c) in ch.tree_chains.iter().take(2).enumerate() {
        let order: Vec<String> = c
            .iter()
            .map(|x| ch.hosts[0][*x as usize].to_string())
            .collect();
        println!(
            "#   tree {i} chain (host 0, root side first): {}",
            order.join(" -> ")
        );
    }
    for note in &ch.notes {
        println!("# note: {note}");
    }
    for cp in plans {
        println!("#");
        match &cp.bound {
            Some(b) => println!(
                "# {} bound: {:.1} GB/s busbw (max-flow/min-cut; {})",
                cp.collective.kind.name(),
                b.busbw_gbps,
                b.explain(2)
            ),
            None => println!("# {} bound: none here", cp.collective.kind.name()),
        }
        println!(
            "# {} on {n} ranks{} (busbw = algbw x {:.3})",
            cp.collective.kind.name(),
            cp.collective
                .root
                .map(|r| format!(", root {r}"))
                .unwrap_or_default(),
            cp.busbw_factor
        );
        println!(
            "# {:>12} {:>20} {:>6} {:>8} {:>11} {:>11} {:>11} {:>7}",
            "size(B)",
            "algorithm",
            "proto",
            "channels",
            "time(us)",
            "algbw(GB/s)",
            "busbw(GB/s)",
            "%bound"
        );
        for r in &cp.rows {
            println!(
                "  {:>12} {:>20} {:>6} {:>8} {:>11.2} {:>11.2} {:>11.2} {:>7}",
                r.bytes,
                r.algorithm,
                r.protocol,
                r.channels,
                r.time_us,
                r.algbw_gbps,
                r.busbw_gbps,
                pct(r.busbw_gbps, cp.bound.as_ref())
            );
        }
    }
}
