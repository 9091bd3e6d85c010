//! NCCL 2.28's C types as this library sees them: result codes, data types, reduction
//! operations, the versioned `ncclConfig_t`, and the 128-byte unique id. Values and layouts
//! match `include/nccl.h`; `tests/c/abi.c` checks both sides.

use runtime::{DataType, ReduceOp};
use std::os::raw::{c_char, c_int, c_uint};

/// `ncclResult_t`.
pub type NcclResult = c_int;
pub const SUCCESS: NcclResult = 0;
pub const UNHANDLED_CUDA_ERROR: NcclResult = 1;
pub const SYSTEM_ERROR: NcclResult = 2;
pub const INTERNAL_ERROR: NcclResult = 3;
pub const INVALID_ARGUMENT: NcclResult = 4;
pub const INVALID_USAGE: NcclResult = 5;
pub const REMOTE_ERROR: NcclResult = 6;
pub const IN_PROGRESS: NcclResult = 7;
pub const NUM_RESULTS: NcclResult = 8;

/// `NCCL_VERSION_CODE` of the API this library implements (2.28.3).
pub const VERSION_CODE: c_int = 22803;
/// `NCCL_API_MAGIC`: written by `NCCL_CONFIG_INITIALIZER`.
pub const API_MAGIC: c_uint = 0xcafe_beef;
/// The magic `NCCL_SIM_INFO_INITIALIZER` writes into `ncclSimInfo_t`.
pub const SIM_INFO_MAGIC: c_uint = 0x7468_5283;
/// `NCCL_CONFIG_UNDEF_INT`.
pub const UNDEF_INT: c_int = c_int::MIN;
/// `NCCL_SPLIT_NOCOLOR`.
pub const SPLIT_NOCOLOR: c_int = -1;
pub const UNIQUE_ID_BYTES: usize = 128;

/// `ncclUniqueId`: passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawUniqueId {
    pub internal: [c_char; UNIQUE_ID_BYTES],
}

/// `ncclConfig_t` as NCCL 2.28 lays it out. Older headers pass a prefix of it, newer ones a
/// longer struct: only fields inside `size` are read ([`CommConfig::read`]).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RawConfig {
    pub size: usize,
    pub magic: c_uint,
    pub version: c_uint,
    pub blocking: c_int,
    pub cga_cluster_size: c_int,
    pub min_ctas: c_int,
    pub max_ctas: c_int,
    pub net_name: *const c_char,
    pub split_share: c_int,
    pub traffic_class: c_int,
    pub comm_name: *const c_char,
    pub collnet_enable: c_int,
    pub cta_policy: c_int,
    pub shrink_share: c_int,
    pub nvls_ctas: c_int,
    pub n_channels_per_net_peer: c_int,
    pub nvlink_centric_sched: c_int,
}

/// `ncclSimInfo_t`.
#[repr(C)]
pub struct RawSimInfo {
    pub size: usize,
    pub magic: c_uint,
    pub version: c_uint,
    pub estimated_time: f32,
}

/// What this library uses of a communicator's configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommConfig {
    /// `blocking = 0`: init returns `ncclInProgress` and finishes in the background.
    pub nonblocking: bool,
    pub name: Option<String>,
}

/// Where a config was wrong.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("ncclConfig_t.size is {0} bytes: too small to hold size, magic and version (16); initialise it with NCCL_CONFIG_INITIALIZER")]
    TooSmall(usize),
    #[error("ncclConfig_t.magic is {0:#x}, not NCCL_API_MAGIC (0xcafebeef): initialise it with NCCL_CONFIG_INITIALIZER")]
    Magic(c_uint),
    #[error("ncclConfig_t.blocking is {0}: expected 0, 1 or NCCL_CONFIG_UNDEF_INT")]
    Blocking(c_int),
}

impl CommConfig {
    /// Reads `raw` (may be null: the defaults). Fields beyond `raw.size` are not read, so a
    /// config from an older header is safe; fields unknown to this library are ignored.
    ///
    /// # Safety
    /// `raw` is null or points to at least `raw.size` readable bytes.
    pub unsafe fn read(raw: *const RawConfig) -> Result<CommConfig, ConfigError> {
        if raw.is_null() {
            return Ok(CommConfig::default());
        }
        let head = std::ptr::read_unaligned(raw as *const [u8; 16]);
        let size = usize::from_ne_bytes(head[..8].try_into().expect("8 bytes"));
        if size < 16 {
            return Err(ConfigError::TooSmall(size));
        }
        let magic = c_uint::from_ne_bytes(head[8..12].try_into().expect("4 bytes"));
        if magic != API_MAGIC {
            return Err(ConfigError::Magic(magic));
        }
        // Copy what the caller has, up to our layout; the rest stays "undefined".
        let mut c = RawConfig {
            size,
            magic,
            version: 0,
            blocking: UNDEF_INT,
            cga_cluster_size: UNDEF_INT,
            min_ctas: UNDEF_INT,
            max_ctas: UNDEF_INT,
            net_name: std::ptr::null(),
            split_share: UNDEF_INT,
            traffic_class: UNDEF_INT,
            comm_name: std::ptr::null(),
            collnet_enable: UNDEF_INT,
            cta_policy: UNDEF_INT,
            shrink_share: UNDEF_INT,
            nvls_ctas: UNDEF_INT,
            n_channels_per_net_peer: UNDEF_INT,
            nvlink_centric_sched: UNDEF_INT,
        };
        let n = size.min(std::mem::size_of::<RawConfig>());
        std::ptr::copy_nonoverlapping(raw as *const u8, &mut c as *mut RawConfig as *mut u8, n);
        let blocking = match c.blocking {
            UNDEF_INT | 1 => true,
            0 => false,
            b => return Err(ConfigError::Blocking(b)),
        };
        let name_end = std::mem::offset_of!(RawConfig, comm_name) + std::mem::size_of::<usize>();
        let name = (size >= name_end && !c.comm_name.is_null()).then(|| {
            std::ffi::CStr::from_ptr(c.comm_name)
                .to_string_lossy()
                .into_owned()
        });
        Ok(CommConfig {
            nonblocking: !blocking,
            name,
        })
    }
}

/// `ncclDataType_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NcclType {
    I8,
    U8,
    I32,
    U32,
    I64,
    U64,
    F16,
    F32,
    F64,
    Bf16,
    F8E4M3,
    F8E5M2,
}

impl NcclType {
    pub const ALL: [NcclType; 12] = [
        NcclType::I8,
        NcclType::U8,
        NcclType::I32,
        NcclType::U32,
        NcclType::I64,
        NcclType::U64,
        NcclType::F16,
        NcclType::F32,
        NcclType::F64,
        NcclType::Bf16,
        NcclType::F8E4M3,
        NcclType::F8E5M2,
    ];

    pub fn from_raw(v: c_int) -> Option<NcclType> {
        usize::try_from(v)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
    }

    pub fn raw(self) -> c_int {
        Self::ALL.iter().position(|t| *t == self).expect("listed") as c_int
    }

    pub fn size(self) -> usize {
        match self {
            NcclType::I8 | NcclType::U8 | NcclType::F8E4M3 | NcclType::F8E5M2 => 1,
            NcclType::F16 | NcclType::Bf16 => 2,
            NcclType::I32 | NcclType::U32 | NcclType::F32 => 4,
            NcclType::I64 | NcclType::U64 | NcclType::F64 => 8,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            NcclType::I8 => "int8",
            NcclType::U8 => "uint8",
            NcclType::I32 => "int32",
            NcclType::U32 => "uint32",
            NcclType::I64 => "int64",
            NcclType::U64 => "uint64",
            NcclType::F16 => "float16",
            NcclType::F32 => "float32",
            NcclType::F64 => "float64",
            NcclType::Bf16 => "bfloat16",
            NcclType::F8E4M3 => "float8e4m3",
            NcclType::F8E5M2 => "float8e5m2",
        }
    }

    /// The runtime type that reduces `self` under `op` with exactly NCCL's result, if any.
    pub fn reducible_as(self, op: ReduceOp) -> Option<DataType> {
        match self {
            NcclType::I8 => Some(DataType::I8),
            NcclType::U8 => Some(DataType::U8),
            NcclType::I32 => Some(DataType::I32),
            NcclType::I64 => Some(DataType::I64),
            NcclType::U32 => Some(DataType::U32),
            NcclType::U64 => Some(DataType::U64),
            NcclType::F16 => Some(DataType::F16),
            NcclType::F32 => Some(DataType::F32),
            NcclType::F64 => Some(DataType::F64),
            NcclType::Bf16 => Some(DataType::Bf16),
            // NCCL's average of FP8 is a PreMulSum by 1/nranks rounded to FP8, not the
            // runtime's sum-then-divide: `gpu::premul` runs it.
            NcclType::F8E4M3 if op != ReduceOp::Avg => Some(DataType::F8E4M3),
            NcclType::F8E5M2 if op != ReduceOp::Avg => Some(DataType::F8E5M2),
            _ => None,
        }
    }

    /// For `ncclAvg` on an FP8 type: the PreMulSum scalar NCCL 2.28 uses over `nranks` ranks
    /// (1/nranks in the type), as its bits; `None` for the other types.
    pub fn fp8_avg_scalar(self, nranks: u32) -> Option<u8> {
        let f = match self {
            NcclType::F8E4M3 => runtime::fp8::E4M3,
            NcclType::F8E5M2 => runtime::fp8::E5M2,
            _ => return None,
        };
        Some(runtime::fp8::avg_scalar(f, nranks))
    }
}

/// `ncclRedOp_t`: the five built-in operations, or one made by `ncclRedOpCreatePreMulSum`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NcclOp {
    Builtin(ReduceOp),
    PreMulSum(c_int),
}

/// First value `ncclRedOpCreatePreMulSum` hands out (`ncclNumOps`).
pub const NUM_OPS: c_int = 5;

impl NcclOp {
    pub fn from_raw(v: c_int) -> Option<NcclOp> {
        Some(match v {
            0 => NcclOp::Builtin(ReduceOp::Sum),
            1 => NcclOp::Builtin(ReduceOp::Prod),
            2 => NcclOp::Builtin(ReduceOp::Max),
            3 => NcclOp::Builtin(ReduceOp::Min),
            4 => NcclOp::Builtin(ReduceOp::Avg),
            v if v >= NUM_OPS => NcclOp::PreMulSum(v),
            _ => return None,
        })
    }

    /// NCCL's value of a built-in operation (`ncclRedOp_t`): the inverse of [`Self::from_raw`].
    /// Never the runtime's own enum order, which lists min before max.
    pub fn builtin_raw(op: ReduceOp) -> c_int {
        match op {
            ReduceOp::Sum => 0,
            ReduceOp::Prod => 1,
            ReduceOp::Max => 2,
            ReduceOp::Min => 3,
            ReduceOp::Avg => 4,
        }
    }

    pub fn name(self) -> String {
        match self {
            NcclOp::Builtin(op) => op.name().to_string(),
            NcclOp::PreMulSum(v) => format!("premulsum#{v}"),
        }
    }
}

/// The text a topoplan unique id carries (NUL-terminated in the 128 bytes), so a job can tell
/// our ids from NVIDIA's and never hand one to the other library.
pub fn encode_id(text: &str) -> Option<RawUniqueId> {
    let b = text.as_bytes();
    if b.len() >= UNIQUE_ID_BYTES {
        return None;
    }
    let mut id = RawUniqueId {
        internal: [0; UNIQUE_ID_BYTES],
    };
    for (d, s) in id.internal.iter_mut().zip(b) {
        *d = *s as c_char;
    }
    Some(id)
}

/// The text of a topoplan id; `None` for bytes that are not one (an NVIDIA id, garbage).
pub fn decode_id(id: &RawUniqueId) -> Option<String> {
    let bytes: Vec<u8> = id.internal.iter().map(|c| *c as u8).collect();
    let end = bytes.iter().position(|b| *b == 0)?;
    let s = std::str::from_utf8(&bytes[..end]).ok()?;
    s.starts_with("topoplan1:").then(|| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_nccl_2_28() {
        assert_eq!(std::mem::size_of::<RawConfig>(), 80);
        assert_eq!(std::mem::offset_of!(RawConfig, blocking), 16);
        assert_eq!(std::mem::offset_of!(RawConfig, net_name), 32);
        assert_eq!(std::mem::offset_of!(RawConfig, comm_name), 48);
        assert_eq!(std::mem::offset_of!(RawConfig, nvlink_centric_sched), 76);
        assert_eq!(std::mem::size_of::<RawUniqueId>(), 128);
    }

    #[test]
    fn builtin_operations_round_trip_through_nccls_values() {
        for v in 0..NUM_OPS {
            let Some(NcclOp::Builtin(op)) = NcclOp::from_raw(v) else {
                panic!("{v} is a built-in operation");
            };
            assert_eq!(NcclOp::builtin_raw(op), v, "{op:?}");
        }
        // The header's values, not the runtime's enum order (min before max there).
        assert_eq!(NcclOp::builtin_raw(ReduceOp::Max), 2);
        assert_eq!(NcclOp::builtin_raw(ReduceOp::Min), 3);
    }

    #[test]
    fn types_round_trip_and_every_builtin_reduction_but_fp8_avg_is_the_runtimes() {
        for (i, t) in NcclType::ALL.iter().enumerate() {
            assert_eq!(NcclType::from_raw(i as c_int), Some(*t));
            assert_eq!(t.raw(), i as c_int);
        }
        assert_eq!(NcclType::from_raw(12), None);
        assert_eq!(NcclType::from_raw(-1), None);
        for op in ReduceOp::ALL {
            assert_eq!(NcclType::U32.reducible_as(op), Some(DataType::U32));
            assert_eq!(NcclType::U64.reducible_as(op), Some(DataType::U64));
            for t in NcclType::ALL {
                let fp8_avg = t.fp8_avg_scalar(1).is_some() && op == ReduceOp::Avg;
                assert_eq!(t.reducible_as(op).is_none(), fp8_avg, "{t:?} {op:?}");
                // Same width: a buffer's byte count is the runtime's.
                if let Some(d) = t.reducible_as(op) {
                    assert_eq!(d.size(), t.size(), "{t:?}");
                }
            }
        }
        for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max] {
            assert_eq!(NcclType::F8E4M3.reducible_as(op), Some(DataType::F8E4M3));
            assert_eq!(NcclType::F8E5M2.reducible_as(op), Some(DataType::F8E5M2));
        }
        // FP8 average is NCCL's PreMulSum by 1/n in FP8: 1/3 is 0x2B (0.34375) in E4M3.
        assert_eq!(NcclType::F8E4M3.reducible_as(ReduceOp::Avg), None);
        assert_eq!(NcclType::F8E4M3.fp8_avg_scalar(3), Some(0x2B));
        assert_eq!(NcclType::F8E5M2.fp8_avg_scalar(2), Some(0x38));
        assert_eq!(NcclType::F16.fp8_avg_scalar(2), None);
    }

    #[test]
    fn configs_are_read_by_their_size() {
        let mut c = RawConfig {
            size: 80,
            magic: API_MAGIC,
            version: VERSION_CODE as u32,
            blocking: 0,
            cga_cluster_size: UNDEF_INT,
            min_ctas: UNDEF_INT,
            max_ctas: UNDEF_INT,
            net_name: std::ptr::null(),
            split_share: UNDEF_INT,
            traffic_class: UNDEF_INT,
            comm_name: c"job".as_ptr(),
            collnet_enable: UNDEF_INT,
            cta_policy: UNDEF_INT,
            shrink_share: UNDEF_INT,
            nvls_ctas: UNDEF_INT,
            n_channels_per_net_peer: UNDEF_INT,
            nvlink_centric_sched: UNDEF_INT,
        };
        let got = unsafe { CommConfig::read(&c) }.unwrap();
        assert!(got.nonblocking);
        assert_eq!(got.name.as_deref(), Some("job"));
        // An older header's config ends before comm_name: the name is not read.
        c.size = 40;
        assert_eq!(unsafe { CommConfig::read(&c) }.unwrap().name, None);
        c.magic = 0;
        assert_eq!(unsafe { CommConfig::read(&c) }, Err(ConfigError::Magic(0)));
        c.magic = API_MAGIC;
        c.size = 8;
        assert_eq!(
            unsafe { CommConfig::read(&c) },
            Err(ConfigError::TooSmall(8))
        );
        c.size = 80;
        c.blocking = 7;
        assert_eq!(
            unsafe { CommConfig::read(&c) },
            Err(ConfigError::Blocking(7))
        );
    }

    #[test]
    fn ids_round_trip_and_foreign_ids_are_refused() {
        let id = encode_id("topoplan1:00112233445566778899aabbccddeeff@10.0.0.1:4242").unwrap();
        assert_eq!(
            decode_id(&id).as_deref(),
            Some("topoplan1:00112233445566778899aabbccddeeff@10.0.0.1:4242")
        );
        let foreign = RawUniqueId {
            internal: [7; UNIQUE_ID_BYTES],
        };
        assert_eq!(decode_id(&foreign), None);
        assert!(encode_id(&"x".repeat(200)).is_none());
    }

    proptest::proptest! {
        /// The fuzz target `fuzz/fuzz_targets/nccl_abi.rs`, on random bytes in every test run:
        /// reading an id or a config of any claimed size never panics, and an accepted id
        /// round-trips.
        #[test]
        fn any_bytes_are_read_without_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..200), size in 0usize..120) {
            let mut id = RawUniqueId { internal: [0; UNIQUE_ID_BYTES] };
            for (d, s) in id.internal.iter_mut().zip(&data) {
                *d = *s as c_char;
            }
            if let Some(text) = decode_id(&id) {
                proptest::prop_assert_eq!(decode_id(&encode_id(&text).unwrap()), Some(text));
            }
            let mut buf = [0u8; std::mem::size_of::<RawConfig>()];
            for (d, s) in buf.iter_mut().zip(&data) {
                *d = *s;
            }
            buf[32..40].fill(0);
            buf[48..56].fill(0);
            let claimed = size.min(buf.len());
            buf[..8].copy_from_slice(&claimed.to_ne_bytes());
            let r = unsafe { CommConfig::read(buf.as_ptr() as *const RawConfig) };
            if claimed < 16 {
                proptest::prop_assert_eq!(r, Err(ConfigError::TooSmall(claimed)));
            }
        }
    }
}
