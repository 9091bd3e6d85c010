//! `topoplan plan`'s words on the bound: each row's percentage of it, `--explain`'s cut, and
//! what keeps the choice under it.

use planner::bound::Bound;
use planner::plan::Planner;
use planner::schedule::{Algorithm, CollectiveKind, Protocol};

/// Why the fastest candidate stays under 95% of the bound at `size`, as the time's three terms:
/// its bandwidth term (what the schedule's links and channels allow, and what sets it), the
/// protocol overhead the simulator (or the tuner's size ramp) adds beyond it, and its latency
/// term. `tests/plan_bound_best.rs` holds every shipped single-host topology and subset to it:
/// under 95%, the bandwidth term reaches 95% and a protocol overhead or latency line says where
/// the rest goes.
pub(crate) fn print_below_bound(
    p: &Planner,
    k: CollectiveKind,
    size: u64,
    (best, all): (&planner::plan::Candidate, &[planner::plan::Candidate]),
    (time_us, simulated): (f64, bool),
    b: &Bound,
    simulate: &dyn Fn(&planner::plan::Candidate) -> Option<f64>,
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
            "simulated"
        } else {
            "the tuner's estimate"
        }
    );
    // The same schedule under Simple, which carries data only: what its links and channels
    // allow before a protocol's wire format takes its share.
    let raw = all
        .iter()
        .find(|c| c.algorithm == best.algorithm && c.protocol == Protocol::Simple)
        .map_or(peak, |c| c.peak_algbw_gbps * busf)
        .max(peak);
    print_bandwidth(p, best, raw, b);
    // The engine can move more than the tuner's peak (it runs a protocol at the links' and
    // channels' rates where the tuner applies NCCL's per-protocol tables): the tuner's
    // efficiency is then not what holds the choice back, the protocol's wire format is.
    if simulated && busbw > peak {
        let wire = match best.protocol {
            Protocol::LL => "LL's 8-byte lines carry 4 data bytes: at most 50% of a link",
            Protocol::LL128 => "LL128's lines carry 120 data bytes in 128: at most 93.8% of a link",
            Protocol::Simple => "Simple carries data only",
        };
        println!(
            "#   protocol overhead: the simulator runs it {:.1}% faster than the tuner's peak ({peak:.1} GB/s busbw), at the rate its channels and links allow under {}'s wire format ({wire}), plus per-step costs and pipeline fill (docs/fidelity.md, \"Agreement\")",
            100.0 * (busbw / peak - 1.0),
            best.protocol.name()
        );
    } else {
        print_overhead(best, (peak, raw), (size, time_us, simulated), b);
    }
    if raw < 0.95 * b.busbw_gbps {
        print_reaching(k.busbw_factor(p.nranks()), size, all, b, simulate);
    }
    let lat = best.lat_us / time_us;
    if lat > 0.01 {
        println!(
            "#   latency: {:.2} of {time_us:.2} us ({:.1}%) is the latency term (launch, per-hop costs and pipeline fill)",
            best.lat_us,
            100.0 * lat
        );
    }
}

/// Where the choice's own links and channels stay under 95% of the bound: the fastest other
/// schedule whose links reach it (under Simple), run whole, and the protocol overhead that
/// keeps it from beating the choice. Nothing is printed where no such schedule exists.
fn print_reaching(
    busf: f64,
    size: u64,
    all: &[planner::plan::Candidate],
    b: &Bound,
    simulate: &dyn Fn(&planner::plan::Candidate) -> Option<f64>,
) {
    let reach = all
        .iter()
        .filter(|c| c.protocol == Protocol::Simple)
        .filter(|c| c.peak_algbw_gbps * busf >= 0.95 * b.busbw_gbps)
        .filter_map(|c| Some((c, simulate(c)?)))
        .min_by(|x, y| x.1.total_cmp(&y.1));
    let Some((c, time_us)) = reach else { return };
    let busbw = size as f64 / 1000.0 / time_us * busf;
    println!(
        "#   the bound's schedule: {} Simple's links allow {:.1}% of the bound; run whole it reaches {:.1}%: protocol overhead, its steps (per-step costs, slots) and pipeline fill in the simulator (docs/sim.md)",
        c.algorithm.name(),
        100.0 * c.peak_algbw_gbps * busf / b.busbw_gbps,
        100.0 * busbw / b.busbw_gbps,
    );
}

/// The protocol's share: its wire format's against Simple's `raw` bandwidth, then the time
/// beyond the bandwidth and latency terms (`time = latency + size / peak + the rest`): what the
/// protocol's steps cost in the simulator, or what the profile's size ramp leaves of the peak.
fn print_overhead(
    best: &planner::plan::Candidate,
    (peak, raw): (f64, f64),
    (size, time_us, simulated): (u64, f64, bool),
    b: &Bound,
) {
    if peak < raw * 0.995 {
        println!(
            "#   protocol overhead: {}'s wire format leaves {:.1}% of it, {peak:.1} GB/s busbw ({:.1}% of the bound)",
            best.protocol.name(),
            100.0 * peak / raw,
            100.0 * peak / b.busbw_gbps
        );
    }
    let over = time_us - best.lat_us - size as f64 / 1000.0 / best.peak_algbw_gbps.max(1e-9);
    if over > 0.01 * time_us {
        let why = if simulated {
            "protocol steps (per-step costs, slots), per-channel rate caps and pipeline fill in the simulator (docs/sim.md)"
        } else {
            "the profile's size ramp (protocol and pipeline efficiency fitted on measured runs, docs/tuner.md)"
        };
        println!(
            "#   protocol overhead: {over:.2} of {time_us:.2} us ({:.1}%) beyond the bandwidth and latency terms: {why}",
            100.0 * over / time_us
        );
    }
}

/// The bandwidth term's line: what the schedule's links and channels allow (`raw`, busbw under
/// Simple), and what sets it where it stays under 95% of the bound.
fn print_bandwidth(p: &Planner, best: &planner::plan::Candidate, raw: f64, b: &Bound) {
    let pct = 100.0 * raw / b.busbw_gbps;
    if raw >= 0.95 * b.busbw_gbps {
        println!(
            "#   bandwidth: its links and channels allow {raw:.1} GB/s busbw ({pct:.1}% of the bound): not what holds it back"
        );
        return;
    }
    let ch = p.channels();
    let why = match best.algorithm {
        Algorithm::Ring => format!(
            "the ring channels the search found ({} x {:.1} GB/s, run as {})",
            ch.ring.count,
            ch.ring.bw_gbps,
            ch.rings.len(),
        ),
        Algorithm::Tree => format!(
            "the tree channels ({} x {:.1} GB/s)",
            ch.tree.count, ch.tree.bw_gbps,
        ),
        Algorithm::Packed => {
            "the packed trees' link loads (each root's share split over equal trees)".into()
        }
        _ => "the pattern's measured rates (profile)".into(),
    };
    println!("#   bandwidth: at most {raw:.1} GB/s busbw ({pct:.1}% of the bound), set by {why}");
}

/// Most ranks whose pick `--explain` simulates whole (one host: a fraction of a second at 1 GiB
/// in a release build).
const WHOLE_RANKS: u32 = 16;

/// The time of candidate `c`'s schedule run whole by the engine at `size`, as `topoplan sim` runs it
/// (`None` past [`WHOLE_RANKS`] ranks or where it cannot be built or run).
pub(crate) fn run_whole(
    pricer: &sim::price::EnginePricer,
    p: &Planner,
    coll: &planner::schedule::Collective,
    c: &planner::plan::Candidate,
    size: u64,
) -> Option<f64> {
    if p.nranks() > WHOLE_RANKS {
        return None;
    }
    let s = pricer.schedule(coll, c, None).ok()?;
    pricer.run(&s, size).ok().map(|r| r.time_us)
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
    if b.limit == planner::bound::Limit::Partition {
        // The groups are in the argument already; every rank is in one.
        println!("# {}", b.explain(16));
    } else {
        println!(
            "# {} (ranks {{{}{}}} on one side)",
            b.explain(16),
            ranks.join(","),
            if b.cut.ranks.len() > 32 { ",..." } else { "" },
        );
    }
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
