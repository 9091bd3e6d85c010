//! Element types and reduction operators shared by every backend.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataType {
    F32,
    F64,
    F16,
    Bf16,
    I32,
    I64,
    U8,
    I8,
    /// OCP FP8 E4M3 (`ncclFloat8e4m3`): arithmetic in [`crate::fp8`].
    F8E4M3,
    /// OCP FP8 E5M2 (`ncclFloat8e5m2`).
    F8E5M2,
    U32,
    U64,
}

impl DataType {
    /// Every type; a type's position is its code on the wire (`exec::agree`), so new types
    /// go at the end.
    pub const ALL: [DataType; 12] = [
        DataType::F32,
        DataType::F64,
        DataType::F16,
        DataType::Bf16,
        DataType::I32,
        DataType::I64,
        DataType::U8,
        DataType::I8,
        DataType::F8E4M3,
        DataType::F8E5M2,
        DataType::U32,
        DataType::U64,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DataType::F64 | DataType::I64 | DataType::U64 => 8,
            DataType::F32 | DataType::I32 | DataType::U32 => 4,
            DataType::F16 | DataType::Bf16 => 2,
            DataType::U8 | DataType::I8 | DataType::F8E4M3 | DataType::F8E5M2 => 1,
        }
    }

    /// Name as nccl-tests prints it (`float`, `half`, `bfloat16`, ...).
    pub fn nccl_name(self) -> &'static str {
        match self {
            DataType::F32 => "float",
            DataType::F64 => "double",
            DataType::F16 => "half",
            DataType::Bf16 => "bfloat16",
            DataType::I32 => "int32",
            DataType::I64 => "int64",
            DataType::U8 => "uint8",
            DataType::I8 => "int8",
            DataType::F8E4M3 => "f8e4m3",
            DataType::F8E5M2 => "f8e5m2",
            DataType::U32 => "uint32",
            DataType::U64 => "uint64",
        }
    }

    /// Our name, as serde writes it (`f32`, `bf16`, `u64`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DataType::F32 => "f32",
            DataType::F64 => "f64",
            DataType::F16 => "f16",
            DataType::Bf16 => "bf16",
            DataType::I32 => "i32",
            DataType::I64 => "i64",
            DataType::U8 => "u8",
            DataType::I8 => "i8",
            DataType::F8E4M3 => "f8e4m3",
            DataType::F8E5M2 => "f8e5m2",
            DataType::U32 => "u32",
            DataType::U64 => "u64",
        }
    }

    /// Accepts our names (`f32`) and nccl-tests' (`float`).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|d| d.nccl_name() == s || d.name() == s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReduceOp {
    Sum,
    Prod,
    Min,
    Max,
    /// Sum divided by the number of ranks (NCCL's ncclAvg).
    Avg,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Avg,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::Avg => "avg",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|o| o.name().eq_ignore_ascii_case(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_serdes_and_parse_back() {
        for d in DataType::ALL {
            assert_eq!(serde_json::to_value(d).unwrap(), d.name(), "{d:?}");
            assert_eq!(DataType::parse(d.name()), Some(d));
            assert_eq!(DataType::parse(d.nccl_name()), Some(d));
        }
        assert_eq!(DataType::parse("UINT32"), Some(DataType::U32));
        assert_eq!(DataType::parse("f128"), None);
    }
}
