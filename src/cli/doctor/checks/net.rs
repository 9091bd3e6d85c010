//! The network: MASTER_ADDR on a multi-node job, the socket interface NCCL uses, and IB off or
//! sockets in use on a host with RDMA NICs.

use super::{truthy, Inputs};
use crate::cli::doctor::finding::{Finding, Severity};

fn is_loopback_addr(a: &str) -> bool {
    let a = a.trim().trim_matches(['[', ']']);
    a.eq_ignore_ascii_case("localhost") || a.starts_with("127.") || a == "::1"
}

/// MASTER_ADDR of localhost or 127.x with more than one node.
pub fn master_addr(i: &Inputs) -> Vec<Finding> {
    let Some(addr) = i.env.get("MASTER_ADDR") else {
        return vec![];
    };
    if !is_loopback_addr(addr) {
        return vec![];
    }
    let Some((n, ev)) = i.nodes() else {
        return vec![];
    };
    if n <= 1 {
        return vec![];
    }
    Finding::new(
        "master-addr",
        Severity::Error,
        format!("MASTER_ADDR={addr} on a {n}-node job: ranks on other nodes rendezvous with themselves and wait until the timeout"),
    )
    .evidence(i.env.cite("MASTER_ADDR"))
    .evidence(ev)
    .fix("set MASTER_ADDR to rank 0's host as the other nodes reach it, e.g. under Slurm `export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)`")
    .into_vec()
}

/// Why an interface is a bad choice for NCCL's sockets, if it is.
fn iface_problem(
    i: &Inputs,
    name: &str,
    addr: Option<&str>,
) -> Option<(&'static str, Option<String>)> {
    let sys = i.sys.as_ref().and_then(|s| s.net(name));
    let sys_ev = |what: &str| sys.map(|n| format!("{}/{what}", n.path.display()));
    if let Some(n) = sys {
        if let Some(st) = &n.operstate {
            if st == "down" || st == "lowerlayerdown" || st == "notpresent" {
                return Some((
                    "down",
                    Some(format!("{}: {st}", sys_ev("operstate").unwrap_or_default())),
                ));
            }
        }
    }
    if name == "lo"
        || addr.is_some_and(is_loopback_addr)
        || sys.is_some_and(|n| n.kind == Some(772))
    {
        return Some((
            "loopback",
            sys.map(|_| format!("{}: 772", sys_ev("type").unwrap_or_default())),
        ));
    }
    let virt = ["docker", "virbr", "veth", "cni", "br-", "flannel", "cali"];
    if virt.iter().any(|p| name.starts_with(p)) || sys.is_some_and(|n| n.bridge) {
        return Some((
            "container bridge",
            sys.filter(|n| n.bridge)
                .map(|n| format!("{}/bridge exists", n.path.display())),
        ));
    }
    None
}

/// NCCL_SOCKET_IFNAME (or the interface NCCL picked) on loopback, a docker bridge or a down link.
pub fn socket_ifname(i: &Inputs) -> Vec<Finding> {
    // (interface, address, evidence)
    let mut cands: Vec<(String, Option<String>, String)> = Vec::new();
    let env = i.nccl_var("NCCL_SOCKET_IFNAME");
    if let Some((v, ev)) = &env {
        if !v.trim_start().starts_with('^') {
            for name in v
                .split(',')
                .map(|s| s.trim().trim_start_matches('='))
                .filter(|s| !s.is_empty())
            {
                cands.push((name.to_string(), None, ev.clone()));
            }
        }
    }
    if let Some(log) = &i.log {
        for (what, list) in [
            ("NET/Socket", &log.socket_ifaces),
            ("Bootstrap", &log.bootstrap_ifaces),
        ] {
            for f in list {
                if !cands.iter().any(|c| c.0 == f.name) {
                    cands.push((
                        f.name.clone(),
                        Some(f.addr.clone()),
                        format!("{}: {what} : Using {}:{}", log.cite(f.line), f.name, f.addr),
                    ));
                }
            }
        }
    }
    let multi = i.multi_node();
    let mut out = Vec::new();
    for (name, addr, ev) in cands {
        let Some((why, sys_ev)) = iface_problem(i, &name, addr.as_deref()) else {
            continue;
        };
        let sev = match (why, multi) {
            ("down", _) | (_, Some(true)) => Severity::Error,
            (_, None) => Severity::Warning,
            (_, Some(false)) => Severity::Info,
        };
        let mut f = Finding::new(
            "socket-ifname",
            sev,
            format!(
                "NCCL's sockets use {name}, a {why} interface{}",
                match (why, multi) {
                    ("down", _) => ": connections to it fail",
                    (_, Some(true)) =>
                        ": other nodes cannot reach it, so bootstrap or the socket transport hangs",
                    (_, Some(false)) => " (harmless on one node, a hang once the job spans nodes)",
                    _ => ": other nodes cannot reach it once the job spans nodes",
                }
            ),
        )
        .evidence(ev);
        if let Some(e) = sys_ev {
            f = f.evidence(e);
        }
        if let (Some((n, nev)), true) = (i.nodes(), multi == Some(true)) {
            f = f.evidence(format!("{nev} ({n} nodes)"));
        }
        out.push(f.fix(format!(
            "set NCCL_SOCKET_IFNAME to the interface that carries the nodes' addresses (e.g. =eth0 or ib0), or exclude the bad one: NCCL_SOCKET_IFNAME=^{name},lo,docker"
        )));
    }
    out
}

/// IB disabled, or NCCL on sockets, while the host has RDMA devices.
pub fn ib_disabled(i: &Inputs) -> Vec<Finding> {
    let mut rdma: Vec<String> = i
        .sys
        .iter()
        .flat_map(|s| s.ib.iter())
        .map(|d| {
            format!(
                "{}: RDMA device {} ({})",
                d.path.display(),
                d.name,
                d.state.as_deref().unwrap_or("state unknown")
            )
        })
        .collect();
    if let Some(log) = &i.log {
        rdma.extend(
            log.ib_devices
                .iter()
                .map(|d| format!("{}: NET/IB : Using {}", log.cite(d.line), d.text)),
        );
    }
    if rdma.is_empty() {
        return vec![];
    }
    let off = i.nccl_var("NCCL_IB_DISABLE").filter(|(v, _)| truthy(v));
    let sockets = i.log.as_ref().and_then(|l| {
        l.network
            .iter()
            .find(|n| n.text.starts_with("Socket"))
            .map(|n| format!("{}: Using network {}", l.cite(n.line), n.text))
    });
    if off.is_none() && sockets.is_none() {
        return vec![];
    }
    let multi = i.multi_node();
    let sev = match multi {
        Some(true) => Severity::Error,
        None => Severity::Warning,
        Some(false) => Severity::Info,
    };
    let mut f = Finding::new(
        "ib-disabled",
        sev,
        if off.is_some() {
            "InfiniBand/RoCE is disabled on a host with RDMA NICs: inter-node traffic goes over TCP sockets"
        } else {
            "NCCL runs its network over TCP sockets on a host with RDMA NICs"
        },
    );
    for e in off
        .iter()
        .map(|x| x.1.clone())
        .chain(sockets)
        .chain(rdma.into_iter().take(2))
    {
        f = f.evidence(e);
    }
    f.cost(Some("sockets carry a few GB/s per node with ~10x the latency of RDMA; RDMA NICs give 25-50 GB/s per port".into()))
        .fix("unset NCCL_IB_DISABLE; if NCCL still says \"NET/IB : No device found\", the container lacks /dev/infiniband or rdma-core (libibverbs), or a cloud NIC needs its net plugin (NCCL_NET_PLUGIN, e.g. aws-ofi-nccl for EFA)")
        .into_vec()
}
