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
    doc: "Force an algorithm (ring, tree, one-shot, two-shot, direct, ...; `topoplan plan --help` lists them).",
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
];
