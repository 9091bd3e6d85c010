//! Ranks that share a GPU (`CudaGroup::new(&[0, 0, 0, 0])`): how many CTAs each rank's kernels
//! may launch so that every rank's kernels are resident at once.
//!
//! Every path's kernels spin: a rank's CTAs wait in the kernel for data, credits or barrier
//! words that the other ranks' kernels write. On separate GPUs each rank has the whole GPU. On a
//! shared GPU a CTA that waits holds its SM, and if the waiting CTAs fill the GPU before the CTA
//! they wait for is placed, nothing moves again: a hang. The rule that excludes it, whatever
//! the hardware's placement order: the spinning CTAs of all ranks on a GPU together never exceed
//! its SM count, each counted as a whole SM. Then a CTA not yet placed always finds an empty SM
//! (fewer CTAs than SMs are resident), and every CTA of our kernels fits on an empty SM.
//! Counting a CTA as a whole SM also covers kernels of different calls on one SM (a rank that
//! finished call k may already run call k+1's kernel, of another shape, beside a rank still in
//! call k), where packing two CTAs per SM could leave no SM with room.
//!
//! Kernels that never wait in the kernel (the copy-engine reduces, the hybrid's side reduces)
//! need no budget: they end on their own and free their SMs. Programmatic dependent launch
//! (PDL) would let a rank's next kernel hold SMs before its current one ends, so the direct path
//! launches without it on a shared GPU.
//!
//! Pure functions: `CudaGroup` calls them at creation (each rank's SM share) and per call (the
//! path's least grid against that share), and they are tested without a GPU.

/// A kernel path of the CUDA backend, as far as residency is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Path {
    /// The generic lowering (`exec.cu`): ring, tree, two-shot, one-shot without the direct path.
    Exec,
    /// The direct path, Simple or LL128: sender CTAs and receiver CTAs.
    DirectSimple,
    /// The direct path, LL: CTAs that push, then consume.
    DirectLl,
    /// The direct path in pull mode: each CTA reads the peers' inputs.
    DirectPull,
    /// The generic copy-engine lowering (`ce.rs`): reduce kernels, one-thread signal and wait
    /// kernels on the compute and the copy stream.
    CopyEngine,
    /// The two-rank copy-engine pair all-reduce: no kernel waits (stream memory operations).
    CePair,
    /// The two-rank hybrid: the direct path (Simple) beside the copy-engine pair.
    Hybrid,
}

impl Path {
    pub fn name(self) -> &'static str {
        match self {
            Path::Exec => "generic SM (exec.cu)",
            Path::DirectSimple => "direct Simple/LL128",
            Path::DirectLl => "direct LL",
            Path::DirectPull => "direct pull",
            Path::CopyEngine => "generic copy-engine",
            Path::CePair => "copy-engine pair",
            Path::Hybrid => "hybrid",
        }
    }

    /// The fewest spinning CTAs one rank of this path runs at once (its grid cannot go lower):
    /// the direct Simple path needs one sender and one receiver CTA, the generic copy-engine
    /// path a wait kernel on each of its two streams; the copy-engine pair waits in no kernel.
    pub fn min_ctas(self) -> u32 {
        match self {
            Path::Exec | Path::DirectLl | Path::DirectPull => 1,
            Path::DirectSimple | Path::Hybrid | Path::CopyEngine => 2,
            Path::CePair => 0,
        }
    }
}

impl std::fmt::Display for Path {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A rank count whose kernels cannot all be resident at once on the GPU they share.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{ranks} ranks share GPU {device}: the {path} path needs {sms_needed} SMs resident at once \
     ({min_ctas} CTAs per rank, one SM each), the GPU has {sms_available}; use fewer ranks per GPU"
)]
pub struct ResidencyError {
    /// The device ordinal the ranks share.
    pub device: usize,
    /// Ranks on that device.
    pub ranks: u32,
    pub path: Path,
    /// The path's least grid per rank.
    pub min_ctas: u32,
    pub sms_needed: u32,
    pub sms_available: u32,
}

/// What one rank of a path asks for on a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Demand {
    pub path: Path,
    /// The grid the path would launch on a GPU of its own.
    pub wanted_ctas: u32,
    /// The least grid it can run with.
    pub min_ctas: u32,
    /// CTAs the path places on one SM when it has the GPU alone (pull mode: 2 of 256 threads).
    /// Ignored when ranks share the GPU: there every CTA counts as a whole SM.
    pub ctas_per_sm: u32,
}

/// The grid each of `ranks` ranks on GPU `device` (`device_sms` SMs) gets for `d`: what it
/// wants, capped so that all ranks' grids are resident at once. A single rank is capped at the
/// GPU's capacity for the path (`device_sms × ctas_per_sm`); ranks sharing the GPU at
/// `device_sms / ranks` each. Fails when that cap is below the path's least grid.
pub fn rank_grid(
    device: usize,
    ranks: u32,
    device_sms: u32,
    d: Demand,
) -> Result<u32, ResidencyError> {
    let ranks = ranks.max(1);
    let cap = if ranks == 1 {
        device_sms.saturating_mul(d.ctas_per_sm.max(1))
    } else {
        device_sms / ranks
    };
    if cap < d.min_ctas {
        return Err(ResidencyError {
            device,
            ranks,
            path: d.path,
            min_ctas: d.min_ctas,
            sms_needed: if ranks == 1 {
                d.min_ctas.div_ceil(d.ctas_per_sm.max(1))
            } else {
                d.min_ctas.saturating_mul(ranks)
            },
            sms_available: device_sms,
        });
    }
    Ok(d.wanted_ctas
        .clamp(d.min_ctas, cap.max(d.min_ctas))
        .min(cap))
}

/// The SMs each of `ranks` ranks on a `device_sms`-SM GPU may fill with spinning CTAs: the
/// `min_sm` every path sizes its grid from (the whole GPU for one rank). Fails when there are
/// more ranks than SMs.
pub fn rank_sms(device: usize, ranks: u32, device_sms: u32) -> Result<u32, ResidencyError> {
    rank_grid(
        device,
        ranks,
        device_sms,
        Demand {
            path: Path::Exec,
            wanted_ctas: device_sms,
            min_ctas: 1,
            ctas_per_sm: 1,
        },
    )
}

/// Checks that `path` can run with `ranks` ranks on GPU `device`: its least grid per rank fits
/// the rank's share of the SMs.
pub fn check(device: usize, ranks: u32, device_sms: u32, path: Path) -> Result<(), ResidencyError> {
    rank_grid(
        device,
        ranks,
        device_sms,
        Demand {
            path,
            wanted_ctas: path.min_ctas(),
            min_ctas: path.min_ctas(),
            ctas_per_sm: 1,
        },
    )
    .map(|_| ())
}

/// How a call whose schedule asks for a path runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// On this path.
    Run(Path),
    /// As the one-shot Simple schedule of its collective, on the direct path.
    OneShot,
    /// Not at all: the path does not run with ranks sharing a GPU.
    Refused(Path),
}

/// The route of a call that asks for `path`, on a group whose ranks share a GPU (`shared`) or
/// not. `capturing` says whether the caller's stream is being captured into a CUDA graph; it
/// is asked only where the answer matters. On a shared GPU the copy engines would only copy
/// within it, beside more busy streams: the hybrid runs its whole call on the direct path and
/// the copy-engine pair runs the one-shot schedule, as both do under graph capture (whose
/// replay would repeat the pair's host-side counter values). The generic copy-engine lowering
/// is refused there: its wait kernels spin on a second stream per rank.
pub fn route<E>(
    path: Path,
    shared: bool,
    capturing: impl FnOnce() -> Result<bool, E>,
) -> Result<Route, E> {
    Ok(match path {
        Path::Hybrid | Path::CePair => {
            let elsewhere = shared || capturing()?;
            match (path, elsewhere) {
                (Path::Hybrid, true) => Route::Run(Path::DirectSimple),
                (Path::CePair, true) => Route::OneShot,
                (p, _) => Route::Run(p),
            }
        }
        Path::CopyEngine if shared => Route::Refused(Path::CopyEngine),
        p => Route::Run(p),
    })
}

/// The `min_sm` a path's own grid rule is given for a rank whose SM share is `share`, so that
/// the grid it derives stays within `share` CTAs: the share itself, except for paths that place
/// `ctas_per_sm` CTAs per SM when alone (pull mode), which get `share / ctas_per_sm`.
pub fn path_min_sm(share: u32, ctas_per_sm: u32) -> u32 {
    (share / ctas_per_sm.max(1)).max(1)
}

/// The hardware work queues a context spreads its streams over when ranks share a GPU: the
/// most `CUDA_DEVICE_MAX_CONNECTIONS` allows.
pub const QUEUES: u32 = 32;

/// The hardware work queues the driver gives a context for a `CUDA_DEVICE_MAX_CONNECTIONS`
/// value: 1 to 32, 8 when unset or not a number (the driver's default).
pub fn hardware_queues(var: Option<&str>) -> u32 {
    var.and_then(|v| v.trim().parse::<u32>().ok())
        .map_or(8, |q| q.clamp(1, QUEUES))
}

/// Ranks sharing a GPU with fewer hardware queues than [`QUEUES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{ranks} ranks share GPU {device}, but CUDA_DEVICE_MAX_CONNECTIONS gives {queues} hardware \
     queue(s): streams beyond that share a queue, where one rank's next kernel can stand in line \
     before a peer's kernel that its current one waits for (a hang). Set \
     CUDA_DEVICE_MAX_CONNECTIONS={QUEUES} before the process's first CUDA call \
     (`topoplan bench --ranks-per-gpu` does)"
)]
pub struct QueueError {
    pub device: usize,
    pub ranks: u32,
    pub queues: u32,
}

/// Checks that `ranks` ranks on GPU `device` may share it with the hardware queues that
/// `CUDA_DEVICE_MAX_CONNECTIONS` (`var`) gives: streams of one queue run in the order they were
/// issued, so each rank's stream needs a queue of its own, and the driver assigns queues to
/// streams in turn; with all 32 the ranks' streams land in different queues.
pub fn check_queues(device: usize, ranks: u32, var: Option<&str>) -> Result<(), QueueError> {
    let queues = hardware_queues(var);
    if ranks > 1 && queues < QUEUES {
        return Err(QueueError {
            device,
            ranks,
            queues,
        });
    }
    Ok(())
}

/// Ranks per device of a group's device list: `(ordinal, ranks on it)` for each rank, in rank
/// order.
pub fn ranks_per_device(ordinals: &[usize]) -> Vec<(usize, u32)> {
    ordinals
        .iter()
        .map(|&o| (o, ordinals.iter().filter(|&&x| x == o).count() as u32))
        .collect()
}

#[cfg(test)]
mod tests;
