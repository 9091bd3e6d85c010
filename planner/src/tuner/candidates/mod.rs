//! The tuner's candidates, one family at a time: rings, hierarchical rings, trees, direct
//! patterns on an all-NVLink host, and point-to-point elsewhere: the families that run along
//! chains (rings, hierarchical rings, trees, packed trees) in `chains`, the others in `direct`.

mod chains;
mod direct;

use super::*;
use direct::exec_msg_us;

/// What every family reads.
struct Vars<'a> {
    m: &'a SystemModel,
    kind: CollectiveKind,
    bytes: u64,
    c: &'a TunerParams,
    n: u32,
    b: f64,
    nnodes: u32,
    ppn: u32,
    busf: f64,
    llmax: f64,
    cc: usize,
    ni: usize,
}

/// Candidates being collected for one collective and size.
pub(super) struct Cands<'a> {
    m: &'a SystemModel,
    kind: CollectiveKind,
    /// Broadcast's and reduce's root.
    root: u32,
    bytes: u64,
    f: &'a Filter,
    pub(super) out: Vec<Estimate>,
}

impl<'a> Cands<'a> {
    pub(super) fn new(
        m: &'a SystemModel,
        kind: CollectiveKind,
        root: u32,
        bytes: u64,
        f: &'a Filter,
    ) -> Self {
        Cands {
            m,
            kind,
            root,
            bytes,
            f,
            out: Vec::new(),
        }
    }

    fn vars(&self) -> Vars<'a> {
        let m = self.m;
        let n = m.nranks.max(1);
        let nnodes = m.nnodes.max(1);
        Vars {
            m,
            kind: self.kind,
            bytes: self.bytes,
            c: &m.calib,
            n,
            b: self.bytes as f64,
            nnodes,
            ppn: n.div_ceil(nnodes),
            busf: self.kind.busbw_factor(n),
            llmax: ll_max_bw(m.sm, nnodes),
            cc: cc_idx(m.sm),
            ni: nodes_idx(nnodes),
        }
    }

    /// Adds a candidate the filter allows: launch, latency, then the bytes at `algbw × ramp`.
    /// The channels a ring, hierarchical or tree candidate of `set` runs in protocol `p`: the
    /// filter's where it forces them, else NCCL's count for the size.
    fn channels(&self, a: &Algorithm, set: &ChannelSet, p: Protocol) -> u32 {
        self.f
            .channels
            .unwrap_or_else(|| channels_for(self.m, a, set, p, self.bytes))
    }

    fn push(
        &mut self,
        algorithm: Algorithm,
        protocol: Protocol,
        channels: u32,
        lat: f64,
        algbw: f64,
        ramp: f64,
    ) {
        let c = &self.m.calib;
        if algbw > 0.0 && self.f.allows(&algorithm, protocol) {
            self.out.push(Estimate {
                time_us: c.launch_us + lat + self.bytes as f64 / 1000.0 / (algbw * ramp),
                lat_us: c.launch_us + lat,
                algorithm,
                protocol,
                channels,
                peak_algbw_gbps: algbw,
            });
        }
    }

    /// Adds a candidate of topoplan's executor. With the engine's executor terms every message
    /// is priced on its grid (`exec_msg_us`) after the executor's fixed cost of a call; without
    /// them the fitted two-GPU form (`lat`, `algbw`, `ramp`) prices the first message to one
    /// peer. A rank's further messages go out one after another on its channel (program order),
    /// except a one-shot reduce's, which come from different senders at once and share the
    /// root's links.
    fn push_exec(
        &mut self,
        algorithm: Algorithm,
        protocol: Protocol,
        lat: f64,
        algbw: f64,
        ramp: f64,
        link_gbps: f64,
    ) {
        let (n, b) = (self.m.nranks.max(1) as u64, self.bytes);
        let (msgs, m) = match (&algorithm, self.kind) {
            (Algorithm::TwoShot, _) => (2 * (n - 1), b / n),
            (_, CollectiveKind::SendRecv) => (1, b),
            (_, CollectiveKind::AllReduce | CollectiveKind::Broadcast) => (n - 1, b),
            (_, CollectiveKind::Reduce) => (n - 1, b),
            _ => (n - 1, b / n),
        };
        let e = &self.m.calib.engine;
        // The generic executor (all-to-all, send/recv) has no fitted two-GPU form: every
        // message is priced by the grid. Where the profile has the engine's executor, its
        // one-shot and two-shot are priced as the engine runs them too: the executor's fixed
        // cost of a call and every message on the grid, a phase's messages landing before the
        // next phase.
        let launch = match protocol {
            Protocol::LL => e.exec_launch_ll_us,
            _ => e.exec_launch_us,
        };
        let engine = e.cta_gbps > 0.0 && launch > 0.0;
        let generic = engine || (algorithm == Algorithm::Direct && e.cta_gbps > 0.0);
        let lat = match (engine, &algorithm) {
            (true, Algorithm::OneShot) => launch - self.m.calib.launch_us + e.route_lat_us,
            (true, Algorithm::TwoShot) => launch - self.m.calib.launch_us + 2.0 * e.route_lat_us,
            _ => lat,
        };
        if (msgs <= 1 && !generic) || algbw <= 0.0 {
            return self.push(algorithm, protocol, 1, lat, algbw, ramp);
        }
        let grid = exec_msg_us(e, protocol, m, link_gbps);
        let first = match generic {
            true => grid,
            false => b as f64 / 1000.0 / (algbw * ramp) / msgs as f64,
        };
        let later = (msgs - 1) as f64;
        let transfer = if self.kind == CollectiveKind::Reduce && algorithm == Algorithm::OneShot {
            // The senders' messages run at once into the root and share its links.
            let wire = match protocol {
                Protocol::LL if e.ll_wire > 0.0 => e.ll_wire,
                _ => 1.0,
            };
            let on_link = m as f64 * wire / 1000.0 / link_gbps.max(1e-9);
            match generic {
                true => grid.max(msgs as f64 * on_link),
                false => first + later * on_link,
            }
        } else {
            first + later * grid
        };
        self.push(
            algorithm,
            protocol,
            1,
            lat,
            b as f64 / 1000.0 / transfer.max(1e-12),
            1.0,
        );
    }

    /// Every family in turn.
    pub(super) fn all(&mut self) {
        self.ring();
        self.hierarchical();
        self.tree();
        self.packed();
        self.direct();
        self.p2p();
    }
}
