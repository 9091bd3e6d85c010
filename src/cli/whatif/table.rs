//! `whatif`'s text table: per scenario and size the tuner's choice, its simulated time and busbw,
//! its ratio to the baseline and its share of the scenario's bound.

use super::ScenarioOut;

pub(super) fn print_table(kind: planner::schedule::CollectiveKind, out: &[ScenarioOut]) {
    println!(
        "# topoplan whatif: {} (simulated; busbw ratio = scenario / baseline)",
        kind.name()
    );
    println!(
        "#{:>22} {:>6} {:>12} {:>10} {:>6} {:>3} {:>12} {:>9} {:>8} {:>8} {:>7}",
        "scenario",
        "ranks",
        "size(B)",
        "algo",
        "proto",
        "ch",
        "time(us)",
        "busbw",
        "vs base",
        "bound",
        "%bound"
    );
    let mut notes: Vec<(&str, &str)> = Vec::new();
    for s in out {
        if !s.profile.is_empty() && !notes.iter().any(|n| n.1 == s.profile) {
            notes.push((&s.scenario, &s.profile));
        }
    }
    for (who, n) in notes {
        println!("# {who}: {n}");
    }
    let base = &out[0];
    for s in out {
        if let Some(e) = &s.error {
            println!(" {:>22} {:>6}  no plan: {e}", s.scenario, "-");
            continue;
        }
        for (k, c) in s.cells.iter().enumerate() {
            match c {
                Ok(c) => {
                    let ratio = match base.cells.get(k) {
                        Some(Ok(b)) if b.busbw_gbps > 0.0 => {
                            format!("{:.3}", c.busbw_gbps / b.busbw_gbps)
                        }
                        _ => "-".into(),
                    };
                    let (bound, pct) = match s.bound_gbps {
                        Some(b) => (
                            format!("{b:.1}"),
                            format!("{:.1}", 100.0 * c.busbw_gbps / b),
                        ),
                        None => ("-".into(), "-".into()),
                    };
                    println!(
                        " {:>22} {:>6} {:>12} {:>10} {:>6} {:>3} {:>12.2} {:>9.2} {:>8} {:>8} {:>7}",
                        s.scenario,
                        s.nranks,
                        c.bytes,
                        c.algorithm,
                        c.protocol,
                        c.channels,
                        c.time_us,
                        c.busbw_gbps,
                        ratio,
                        bound,
                        pct
                    );
                }
                Err(e) => println!(" {:>22} {:>6}  error: {e}", s.scenario, s.nranks),
            }
        }
    }
}
