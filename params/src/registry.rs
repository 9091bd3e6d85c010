//! Every `TOPOPLAN_*` variable, declared once. Keep [`ALL`] in the same order as the consts
//! (grouped by the part of topoplan that reads them) and `docs/environment.md` in step.

use crate::{Default::*, Kind::*, Param, Scope::*, Unit::*};

// --- Runtime configuration (runtime/src/config.rs) ---

pub const TIMEOUT: Param = Param {
    name: "TOPOPLAN_TIMEOUT",
    kind: Duration,
    default: Value("600"),
    scope: User,
    doc: "How long a collective or the bootstrap may wait without progress before failing.",
};
pub const ALGO: Param = Param {
    name: "TOPOPLAN_ALGO",
    kind: Text,
    default: Auto("planner's choice"),
    scope: User,
    doc: "Force an algorithm by name, as `--algo` spells it (ring, tree, one-shot, two-shot, ...), for every collective it can run: all-to-all and sendrecv take only `direct`, the others every other name.",
};
pub const PROTO: Param = Param {
    name: "TOPOPLAN_PROTO",
    kind: Choice(&["Simple", "LL128", "LL"]),
    default: Auto("planner's choice"),
    scope: User,
    doc: "Force a protocol.",
};
pub const CHANNELS: Param = Param {
    name: "TOPOPLAN_CHANNELS",
    kind: UInt { min: 1, max: 1024 },
    default: Auto("planner's choice"),
    scope: User,
    doc: "Force the channel count of the chosen schedule.",
};
pub const PLAN: Param = Param {
    name: "TOPOPLAN_PLAN",
    kind: Path,
    default: Auto("none"),
    scope: User,
    doc: "A plan file (JSON schedule IR, one schedule or an array) used for the collectives it covers.",
};
pub const SLOT_BYTES: Param = Param {
    name: "TOPOPLAN_SLOT_BYTES",
    kind: Size {
        unit: Bytes,
        min: 64,
        max: 1 << 30,
    },
    default: Value("262144"),
    scope: User,
    doc: "Payload bytes per slot of the host transports: the largest message.",
};
pub const TRANSPORT: Param = Param {
    name: "TOPOPLAN_TRANSPORT",
    kind: Choice(&["auto", "shm", "tcp"]),
    default: Value("auto"),
    scope: User,
    doc: "How processes reach each other: auto (shared memory on one host, TCP across), shm, tcp.",
};
pub const SHM_DIR: Param = Param {
    name: "TOPOPLAN_SHM_DIR",
    kind: Path,
    default: Value("/dev/shm"),
    scope: User,
    doc: "Directory where shared-memory segments are created (every rank of a host must see it).",
};

// --- Rendezvous (runtime/src/init.rs) ---

pub const UNIQUE_ID: Param = Param {
    name: "TOPOPLAN_UNIQUE_ID",
    kind: Text,
    default: Auto("derived from MASTER_ADDR, the port and the shared values"),
    scope: User,
    doc: "A bootstrap unique id in its text form (`topoplan1:...`); wins over MASTER_ADDR/MASTER_PORT.",
};
pub const UNIQUE_ID_FILE: Param = Param {
    name: "TOPOPLAN_UNIQUE_ID_FILE",
    kind: Path,
    default: Auto("none"),
    scope: Internal,
    doc: "Set by topoplan's launchers: rank 0 (bound to port 0) writes the id it listens at to this file for the launcher.",
};
pub const MASTER_PORT: Param = Param {
    name: "TOPOPLAN_MASTER_PORT",
    kind: UInt { min: 1, max: 65535 },
    default: Auto("MASTER_PORT"),
    scope: User,
    doc: "Rendezvous port, used instead of MASTER_PORT (keeps clear of torch's own store there).",
};
pub const SECRET: Param = Param {
    name: "TOPOPLAN_SECRET",
    kind: Text,
    default: Auto("none"),
    scope: User,
    doc: "Text every rank shares, mixed into the derived unique id to keep other jobs out (not a secret against an attacker).",
};

// --- CUDA: direct path (cuda/src/direct.rs) ---

pub const DIRECT: Param = Param {
    name: "TOPOPLAN_DIRECT",
    kind: Flag,
    default: Value("1"),
    scope: Tuning,
    doc: "0 sends one-shot schedules through the generic lowering instead of the barrier-free direct kernels.",
};
pub const PDL: Param = Param {
    name: "TOPOPLAN_PDL",
    kind: Flag,
    default: Value("1"),
    scope: Tuning,
    doc: "0 launches the direct kernels plainly, without programmatic dependent launch.",
};
pub const DIRECT_CTAS: Param = Param {
    name: "TOPOPLAN_DIRECT_CTAS",
    kind: UInt { min: 1, max: 64 },
    default: Auto("one stream per 32 KiB, up to 64 and half the SMs"),
    scope: Tuning,
    doc: "Fixed stream (sender CTA) count of the direct path's Simple and LL128 calls.",
};
pub const DIRECT_LL_CTAS: Param = Param {
    name: "TOPOPLAN_DIRECT_LL_CTAS",
    kind: UInt { min: 1, max: 64 },
    default: Auto("one CTA per 4 KiB, up to 64"),
    scope: Tuning,
    doc: "Fixed CTA count of the direct path's LL calls.",
};
pub const DIRECT_SLOT_KB: Param = Param {
    name: "TOPOPLAN_DIRECT_SLOT_KB",
    kind: Size {
        unit: KiB,
        min: 16,
        max: 4096,
    },
    default: Auto("512 KiB shared among the peers"),
    scope: Tuning,
    doc: "Simple slot size of the direct path; must be the same on every rank.",
};
pub const DIRECT_SEG_KB: Param = Param {
    name: "TOPOPLAN_DIRECT_SEG_KB",
    kind: Size {
        unit: KiB,
        min: 1,
        max: 4096,
    },
    default: Auto("a quarter of a stream's share, 64 KiB to the slot"),
    scope: Tuning,
    doc: "Fixed Simple segment of the direct path (capped by the slot).",
};
pub const DIRECT_SLOTS: Param = Param {
    name: "TOPOPLAN_DIRECT_SLOTS",
    kind: UInt { min: 1, max: 64 },
    default: Value("2"),
    scope: Tuning,
    doc: "Slots per (sender, receiver, stream): how far a sender may run ahead; must be the same on every rank.",
};
pub const LL_BLOCK: Param = Param {
    name: "TOPOPLAN_LL_BLOCK",
    kind: UInt { min: 32, max: 512 },
    default: Value("512"),
    scope: Tuning,
    doc: "Threads per LL CTA of the direct path (rounded down to a multiple of 32).",
};
pub const KERNEL_CACHE: Param = Param {
    name: "TOPOPLAN_KERNEL_CACHE",
    kind: Path,
    default: Auto("$XDG_CACHE_HOME/topoplan/kernels, else $HOME/.cache/topoplan/kernels, else none"),
    scope: User,
    doc: "Directory of the NVRTC-compiled kernels kept across processes, so only a machine's first process per element type compiles them; off or 0 compiles in every process.",
};
pub const SHARED_MAXREG: Param = Param {
    name: "TOPOPLAN_SHARED_MAXREG",
    kind: UInt { min: 32, max: 255 },
    default: Auto("96 (direct.cu)"),
    scope: Tuning,
    doc: "Registers per thread of the direct kernels that share SMs with the hybrid's reduces.",
};
pub const BENCH_HOST: Param = Param {
    name: "TOPOPLAN_BENCH_HOST",
    kind: Flag,
    default: Value("0"),
    scope: Tuning,
    doc: "`topoplan bench` prints each rank's host time per call and, of it, the time in the driver's launch call.",
};

// --- CUDA: pull mode (cuda/src/direct/pull.rs) ---

pub const PULL: Param = Param {
    name: "TOPOPLAN_PULL",
    kind: Choice(&["auto", "0", "1"]),
    default: Value("auto"),
    scope: Tuning,
    doc: "Pull mode: auto (one-shot all-reduce from PULL_MIN_KB to PULL_MAX_KB), 0 never, 1 every Simple one-shot call it can run.",
};
pub const PULL_MIN_KB: Param = Param {
    name: "TOPOPLAN_PULL_MIN_KB",
    kind: Size {
        unit: KiB,
        min: 0,
        max: 1 << 30,
    },
    default: Value("512"),
    scope: Tuning,
    doc: "Smallest per-rank all-reduce that auto pulls.",
};
pub const PULL_MAX_KB: Param = Param {
    name: "TOPOPLAN_PULL_MAX_KB",
    kind: Size {
        unit: KiB,
        min: 0,
        max: 1 << 30,
    },
    default: Value("16384"),
    scope: Tuning,
    doc: "Largest per-rank all-reduce that auto pulls (inclusive).",
};
pub const PULL_CTA_KB: Param = Param {
    name: "TOPOPLAN_PULL_CTA_KB",
    kind: Size {
        unit: KiB,
        min: 1,
        max: 1 << 20,
    },
    default: Value("8"),
    scope: Tuning,
    doc: "Message bytes per pull CTA.",
};
pub const PULL_CTAS: Param = Param {
    name: "TOPOPLAN_PULL_CTAS",
    kind: UInt { min: 1, max: 64 },
    default: Auto("one per PULL_CTA_KB of message, two per SM at most"),
    scope: Tuning,
    doc: "Fixed pull grid.",
};
pub const PULL_BLOCK: Param = Param {
    name: "TOPOPLAN_PULL_BLOCK",
    kind: UInt { min: 128, max: 512 },
    default: Value("256"),
    scope: Tuning,
    doc: "Threads per pull CTA (rounded down to a multiple of 32).",
};

// --- CUDA: copy-engine pair and hybrid (cuda/src/ce_pair.rs, hybrid.rs) ---

pub const CE_PAIR: Param = Param {
    name: "TOPOPLAN_CE_PAIR",
    kind: Flag,
    default: Value("1"),
    scope: Tuning,
    doc: "0 sends the copy-engine pipeline schedule (--algo ce) through the generic lowering.",
};
pub const CE_CHUNK_MB: Param = Param {
    name: "TOPOPLAN_CE_CHUNK_MB",
    kind: Size {
        unit: MiB,
        min: 1,
        max: 1024,
    },
    default: Value("64"),
    scope: Tuning,
    doc: "Chunk of the copy-engine pair all-reduce (chunks shrink towards the end).",
};
pub const CE_MIN_KB: Param = Param {
    name: "TOPOPLAN_CE_MIN_KB",
    kind: Size {
        unit: KiB,
        min: 64,
        max: 1 << 20,
    },
    default: Value("8192"),
    scope: Tuning,
    doc: "Smallest tail chunk of the copy-engine pair all-reduce.",
};
pub const CE_SLOTS: Param = Param {
    name: "TOPOPLAN_CE_SLOTS",
    kind: UInt { min: 1, max: 64 },
    default: Value("4"),
    scope: Tuning,
    doc: "Scratch chunks of the copy-engine pair per GPU (allocated at the first call).",
};
pub const CE_STREAMS: Param = Param {
    name: "TOPOPLAN_CE_STREAMS",
    kind: UInt { min: 1, max: 4 },
    default: Value("1"),
    scope: Tuning,
    doc: "Copy streams per rank of the copy-engine pair.",
};
pub const CE_SIGNAL: Param = Param {
    name: "TOPOPLAN_CE_SIGNAL",
    kind: Choice(&["memop", "kernel"]),
    default: Value("memop"),
    scope: Tuning,
    doc: "How the copy-engine pair signals chunks: stream memory operations or signal kernels.",
};
pub const PAIR_BLOCK: Param = Param {
    name: "TOPOPLAN_PAIR_BLOCK",
    kind: UInt { min: 128, max: 512 },
    default: Value("512"),
    scope: Tuning,
    doc: "Threads per copy-engine reduce CTA where SMs are not shared (rounded down to a multiple of 32).",
};
pub const HYBRID_CE_PCT: Param = Param {
    name: "TOPOPLAN_HYBRID_CE_PCT",
    kind: Decimal { min: 0.0, max: 90.0 },
    default: Value("50"),
    scope: Tuning,
    doc: "Percent of a large 2-rank all-reduce the copy engines take beside the SM path; 0 turns the hybrid off.",
};
pub const HYBRID_MIN_MB: Param = Param {
    name: "TOPOPLAN_HYBRID_MIN_MB",
    kind: Size {
        unit: MiB,
        min: 1,
        max: 1 << 20,
    },
    default: Value("512"),
    scope: Tuning,
    doc: "Smallest per-rank all-reduce that runs as the hybrid.",
};

// --- CUDA: generic lowering and algorithm choice (cuda/src/group.rs, schedules.rs) ---

pub const CTAS: Param = Param {
    name: "TOPOPLAN_CTAS",
    kind: UInt { min: 1, max: 1024 },
    default: Auto("one per 32 KiB, up to 64 (capped by the SM count)"),
    scope: Tuning,
    doc: "Fixed CTA count of the generic SM path.",
};
pub const SCRATCH_MB: Param = Param {
    name: "TOPOPLAN_SCRATCH_MB",
    kind: Size {
        unit: MiB,
        min: 1,
        max: 1 << 16,
    },
    default: Value("64"),
    scope: Tuning,
    doc: "Scratch ring per GPU of the generic lowering.",
};
pub const NO_ELIDE: Param = Param {
    name: "TOPOPLAN_NO_ELIDE",
    kind: Flag,
    default: Value("0"),
    scope: Tuning,
    doc: "Diagnostic: 1 turns off copy elision in the generic lowering.",
};
pub const CE_PULL: Param = Param {
    name: "TOPOPLAN_CE_PULL",
    kind: Flag,
    default: Value("0"),
    scope: Tuning,
    doc: "Generic copy-engine lowering: the receiver pulls instead of the sender pushing.",
};
pub const CE_AUTO: Param = Param {
    name: "TOPOPLAN_CE_AUTO",
    kind: Flag,
    default: Value("0"),
    scope: Tuning,
    doc: "Let `auto` pick the copy-engine pipeline for large 2-rank all-reduce.",
};
pub const LL_MAX: Param = Param {
    name: "TOPOPLAN_LL_MAX",
    kind: Size {
        unit: Bytes,
        min: 0,
        max: 1 << 40,
    },
    default: Auto("the machine profile's measured crossover (2×H200: 512 KiB)"),
    scope: Tuning,
    doc: "Per-rank size up to which `auto` sends through LL.",
};
pub const LL128_MAX: Param = Param {
    name: "TOPOPLAN_LL128_MAX",
    kind: Size {
        unit: Bytes,
        min: 0,
        max: 1 << 40,
    },
    default: Value("0"),
    scope: Tuning,
    doc: "Per-rank size up to which `auto` uses LL128 above the LL range (0: never).",
};

// --- Simulator (sim/src/engine.rs) ---

pub const SIM_STATS: Param = Param {
    name: "TOPOPLAN_SIM_STATS",
    kind: Flag,
    default: Value("0"),
    scope: Tuning,
    doc: "The simulator prints its event and recomputation counts per run on stderr.",
};

// --- Launchers and tests (set by topoplan for its own child processes) ---

pub const BENCH_MP_RANK: Param = Param {
    name: "TOPOPLAN_BENCH_MP_RANK",
    kind: UInt { min: 0, max: 7 },
    default: Auto("unset: the `bench --procs` parent"),
    scope: Internal,
    doc: "Set by `topoplan bench --procs` in each child: its rank.",
};
pub const BENCH_MP_ID: Param = Param {
    name: "TOPOPLAN_BENCH_MP_ID",
    kind: Text,
    default: Auto("none"),
    scope: Internal,
    doc: "Set by `topoplan bench --procs` in each child: the bootstrap's unique id.",
};
pub const TEST_ROLE: Param = Param {
    name: "TOPOPLAN_TEST_ROLE",
    kind: Text,
    default: Auto("unset: the test harness"),
    scope: Internal,
    doc: "Set by runtime/tests/multiprocess.rs in the rank processes it starts: which scenario to run.",
};
pub const BIN: Param = Param {
    name: "TOPOPLAN_BIN",
    kind: Path,
    default: Auto(".devbin/topoplan, else target/release/topoplan"),
    scope: Internal,
    doc: "The topoplan binary the device scripts run (scripts/device/env.sh).",
};
pub const PTXAS: Param = Param {
    name: "TOPOPLAN_PTXAS",
    kind: Path,
    default: Auto("none: NVRTC output is not assembled"),
    scope: Internal,
    doc: "A ptxas for runtime/tests/nvrtc_compile.rs to assemble every kernel unit for sm_90.",
};

// --- The NCCL-compatible library (nccl/) ---

pub const NCCL_LIB: Param = Param {
    name: "TOPOPLAN_NCCL_LIB",
    kind: Path,
    default: Auto("beside PyTorch, then the system library folders"),
    scope: User,
    doc: "Absolute path of the real NCCL that libnccl.so.2 forwards calls to.",
};
pub const NCCL_CUDA: Param = Param {
    name: "TOPOPLAN_NCCL_CUDA",
    kind: Flag,
    default: Value("1"),
    scope: User,
    doc: "Run the NCCL-compatible library's device-buffer calls on topoplan (its CUDA backend, else its CPU runtime through host copies); 0 forwards every device-buffer call to NCCL.",
};
pub const NCCL_BY_SIZE: Param = Param {
    name: "TOPOPLAN_NCCL_BY_SIZE",
    kind: Flag,
    default: Value("1"),
    scope: User,
    doc: "Let the NCCL-compatible library send a device-buffer collective to NCCL where the tuner prices NCCL's ring or tree more than 10% faster than topoplan's direct path at that size (every rank on its own GPU, NCCL found by every rank); 0 keeps every size on topoplan.",
};
pub const DEBUG: Param = Param {
    name: "TOPOPLAN_DEBUG",
    kind: Choice(&["NONE", "WARN", "INFO"]),
    default: Value("WARN"),
    scope: User,
    doc: "NCCL_DEBUG-style log of the NCCL-compatible library on stderr: INFO adds each communicator's plan and each call's path.",
};
pub const HANG_REPORT: Param = Param {
    name: "TOPOPLAN_HANG_REPORT",
    kind: Duration,
    default: Value("30"),
    scope: User,
    doc: "How long a call of the NCCL-compatible library may wait before rank 0 prints a table of every rank's current call (stuck, behind, differing arguments); 0 turns it off.",
};

/// Every declared variable.
pub static ALL: &[&Param] = &[
    &TIMEOUT,
    &ALGO,
    &PROTO,
    &CHANNELS,
    &PLAN,
    &SLOT_BYTES,
    &TRANSPORT,
    &SHM_DIR,
    &UNIQUE_ID,
    &UNIQUE_ID_FILE,
    &MASTER_PORT,
    &SECRET,
    &DIRECT,
    &PDL,
    &DIRECT_CTAS,
    &DIRECT_LL_CTAS,
    &DIRECT_SLOT_KB,
    &DIRECT_SEG_KB,
    &DIRECT_SLOTS,
    &LL_BLOCK,
    &KERNEL_CACHE,
    &SHARED_MAXREG,
    &BENCH_HOST,
    &PULL,
    &PULL_MIN_KB,
    &PULL_MAX_KB,
    &PULL_CTA_KB,
    &PULL_CTAS,
    &PULL_BLOCK,
    &CE_PAIR,
    &CE_CHUNK_MB,
    &CE_MIN_KB,
    &CE_SLOTS,
    &CE_STREAMS,
    &CE_SIGNAL,
    &PAIR_BLOCK,
    &HYBRID_CE_PCT,
    &HYBRID_MIN_MB,
    &CTAS,
    &SCRATCH_MB,
    &NO_ELIDE,
    &CE_PULL,
    &CE_AUTO,
    &LL_MAX,
    &LL128_MAX,
    &SIM_STATS,
    &BENCH_MP_RANK,
    &BENCH_MP_ID,
    &TEST_ROLE,
    &BIN,
    &PTXAS,
    &NCCL_LIB,
    &NCCL_CUDA,
    &NCCL_BY_SIZE,
    &DEBUG,
    &HANG_REPORT,
];

/// Variables topoplan no longer reads, with what happens now: setting one gets a warning that
/// says so instead of a "did you mean". Their experiments are decided; the values that won are
/// the only behaviour left (docs/cuda.md gives the measurements).
pub static RETIRED: &[(&str, &str)] = &[
    (
        "TOPOPLAN_DIRECT_NOOP",
        "the launch-floor diagnostic was removed",
    ),
    (
        "TOPOPLAN_LL_RELAXED",
        "LL credits are always relaxed stores",
    ),
    (
        "TOPOPLAN_SIMPLE_RELAXED",
        "Simple credits and ready words are always relaxed stores",
    ),
    (
        "TOPOPLAN_SEQ_RELAXED",
        "kernel-start credit loads are always acquire loads",
    ),
    (
        "TOPOPLAN_LL_IMPLIED",
        "LL credits are implied wherever that is sound",
    ),
    (
        "TOPOPLAN_PROGRESS",
        "the in-place progress word is always a GPU-scope release",
    ),
    (
        "TOPOPLAN_ONE_FENCE",
        "one thread fences each Simple segment, after the barrier",
    ),
    (
        "TOPOPLAN_PULL_RELEASE",
        "the pull arrive word is always a relaxed store",
    ),
    (
        "TOPOPLAN_HYBRID_TRACE",
        "the hybrid's per-half trace was removed",
    ),
    (
        "TOPOPLAN_HYBRID_SHARE_SMS",
        "in place, the hybrid's halves always share SMs",
    ),
];
