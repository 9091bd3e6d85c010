//! `topoplan plan`'s words on the bound: each row's percentage of it, `--explain`'s cut, and
//! what keeps the choice under it.

use planner::bound::Bound;
use planner::plan::Planner;
use planner::schedule::{Algorithm, CollectiveKind, Protocol};

/// Why the fastest candidate stays under 95% of the bound at `size`: its bandwidth term (what
/// limits it), its latency term, or both.
pub(crate) fn print_below_bound(
    p: &Planner,
    k: CollectiveKind,
    size: u64,
    best: &planner::plan::Candidate,
    (time_us, simulated): (f64, bool),
    b: &Bound,
) {
    let busf = k.busbw_factor(p.nranks());
    let busbw = size as f64 / 1000.0 / time_us * busf;
    if busbw >= 0.95 * b.busbw_gbps {
        return;
    }
    let peak = best.peak_algbw_gbps * busf;
    println!(
        "# plan's choice, {} {}, reaches {:.1}% of the bound at this size ({}):",
        best.algorithm.name(),
        best.protocol.name(),
        100.0 * busbw / b.busbw_gbps,
        if simulated {
            "priced by the simulator"
        } else {
            "the tuner's estimate"
        }
    );
    if simulated && time_us > best.time_us * 1.02 {
        println!(
            "#   the simulator prices it {:.1}% slower than the tuner: protocol steps (per-step costs, slots), per-channel rate caps and pipeline fill (docs/sim.md)",
            100.0 * (time_us / best.time_us - 1.0)
        );
    }
    // The engine can move more than the tuner's peak (it runs a protocol at the links' and
    // channels' rates where the tuner applies NCCL's per-protocol tables): the tuner's limit is
    // then not what holds the choice back.
    if simulated && busbw > peak {
        // What each protocol's wire format leaves of a link (`docs/sim.md`).
        let wire = match best.protocol {
            Protocol::LL => "LL's 8-byte lines carry 4 data bytes: at most 50% of a link",
            Protocol::LL128 => "LL128's lines carry 120 data bytes in 128: at most 93.8% of a link",
            Protocol::Simple => "Simple carries data only",
        };
        println!(
            "#   the simulator prices it {:.1}% faster than the tuner's peak ({peak:.1} GB/s busbw): it runs {} at the rate its channels and links allow ({wire}), plus per-step costs and pipeline fill (docs/fidelity.md, \"Agreement\")",
            100.0 * (busbw / peak - 1.0),
            best.protocol.name()
        );
    } else if peak < 0.95 * b.busbw_gbps {
        let ch = p.channels();
        let why = match best.algorithm {
            Algorithm::Ring => format!(
                "the ring channels the search found ({} x {:.1} GB/s, run as {}) and {}'s efficiency",
                ch.ring.count,
                ch.ring.bw_gbps,
                ch.rings.len(),
                best.protocol.name()
            ),
            Algorithm::Tree => format!(
                "the tree channels ({} x {:.1} GB/s) and {}'s efficiency",
                ch.tree.count,
                ch.tree.bw_gbps,
                best.protocol.name()
            ),
            Algorithm::Packed => format!(
                "the packed trees' link loads (each root's share split over equal trees) and {}'s efficiency",
                best.protocol.name()
            ),
            _ => format!(
                "the pattern's measured rates (profile) and {}'s efficiency",
                best.protocol.name()
            ),
        };
        println!(
            "#   bandwidth: at most {peak:.1} GB/s busbw ({:.1}% of the bound), set by {why}",
            100.0 * peak / b.busbw_gbps
        );
    }
    // The tuner's time is latency + size / (peak x ramp): what the ramp leaves of the peak.
    let ramp = size as f64 / 1000.0 / (best.time_us - best.lat_us).max(1e-9) / best.peak_algbw_gbps;
    if ramp < 0.97 {
        println!(
            "#   size ramp: at {size} B the profile's ramp runs it at {:.1}% of its peak rate (protocol and pipeline efficiency fitted on measured runs, docs/tuner.md)",
            100.0 * ramp
        );
    }
    let lat = best.lat_us / time_us;
    if lat > 0.02 {
        println!(
            "#   latency: {:.2} of {:.2} us ({:.1}%) is the latency term (launch and per-hop costs)",
            best.lat_us,
            time_us,
            100.0 * lat
        );
    }
}

/// busbw as a percentage of the bound ("-" without one).
pub(crate) fn pct(busbw: f64, b: Option<&Bound>) -> String {
    match b {
        Some(b) => format!("{:.1}", 100.0 * busbw / b.busbw_gbps),
        None => "-".into(),
    }
}

/// `--explain`'s bound lines: the value, the ranks on the sending side of the limiting cut and
/// every link crossing it.
pub(crate) fn print_bound_explained(b: Option<&Bound>, every: Option<&Bound>) {
    let Some(b) = b else {
        println!("# bound: none for this collective");
        return;
    };
    println!(
        "# bound: {:.1} GB/s busbw: no schedule moves large messages faster (max-flow/min-cut over the topology's links)",
        b.busbw_gbps
    );
    let ranks: Vec<String> = b.cut.ranks.iter().take(32).map(u32::to_string).collect();
    println!(
        "# {} (ranks {{{}{}}} on one side)",
        b.explain(16),
        ranks.join(","),
        if b.cut.ranks.len() > 32 { ",..." } else { "" },
    );
    if let Some(x) = b
        .rs_ag_busbw_gbps
        .filter(|x| *x < b.busbw_gbps * (1.0 - 1e-9))
    {
        println!(
            "# a reduce-scatter followed by an all-gather reaches at most {x:.1} GB/s here ({:.1}%): GPUs with thinner links than the others must handle a full share of each half",
            100.0 * x / b.busbw_gbps
        );
    }
    if let Some(e) = every.filter(|e| e.busbw_gbps > b.busbw_gbps * (1.0 + 1e-9)) {
        println!(
            "# over every link, paths ignored: {:.1} GB/s; the {:.1} GB/s more sit on links no GPU-to-GPU path uses (NCCL's path rules keep NVLink pairs off PCIe): {}",
            e.busbw_gbps,
            e.busbw_gbps - b.busbw_gbps,
            e.cut.summary(4)
        );
    }
}
