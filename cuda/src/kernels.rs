//! CUDA C sources of topoplan's device kernels, compiled at run time with NVRTC by the runtime
//! (`cuda`). Keeping them as plain text here lets one release binary, built without a
//! CUDA toolkit, compile them on whatever GPU it meets.

/// The device code, one NVRTC unit per element type: the schedule executor (`exec.cu`, one
/// kernel per reduction operator) followed by the direct-push executor (`direct.cu`, which uses
/// exec.cu's types and operators; its LL128 protocol in `direct_ll128.cu`; its pull mode in `direct_pull.cu`), then the two-buffer reduce
/// of the copy-engine pair all-reduce (`pair.cu`).
pub const EXEC_CU: &str = concat!(
    include_str!("../kernels/exec.cu"),
    "\n",
    include_str!("../kernels/direct.cu"),
    "\n",
    include_str!("../kernels/direct_ll128.cu"),
    "\n",
    include_str!("../kernels/direct_pull.cu"),
    "\n",
    include_str!("../kernels/pair.cu")
);

/// Two-buffer reduce kernels in [`EXEC_CU`] (`pair.cu`, the copy-engine pair all-reduce's
/// compute half), indexed like [`EXEC_KERNELS`].
pub const PAIR_KERNELS: [&str; 4] = ["td_pair_sum", "td_pair_prod", "td_pair_min", "td_pair_max"];

/// Direct-push kernels in [`EXEC_CU`], indexed like [`EXEC_KERNELS`].
pub const DIRECT_KERNELS: [&str; 4] = [
    "td_direct_sum",
    "td_direct_prod",
    "td_direct_min",
    "td_direct_max",
];

/// The direct kernels with fewer registers per thread, so other kernels' CTAs fit beside theirs
/// on an SM (the in-place hybrid's SM half), in the same order.
pub const DIRECT_SHARED_KERNELS: [&str; 4] = [
    "td_direct_shared_sum",
    "td_direct_shared_prod",
    "td_direct_shared_min",
    "td_direct_shared_max",
];

/// Kernel names in [`EXEC_CU`], indexed like [`exec_kernel`]'s `op` argument.
pub const EXEC_KERNELS: [&str; 4] = ["tp_exec_sum", "tp_exec_prod", "tp_exec_min", "tp_exec_max"];

/// Element types the executor is compiled for, by their `TP_TYPE` code: the index in this list.
/// Names follow `runtime::DataType`'s serde names.
pub const TYPE_CODES: [&str; 8] = ["f32", "f64", "f16", "bf16", "i32", "i64", "u8", "i8"];

/// NVRTC options selecting element type `ty` (a name from [`TYPE_CODES`]); `None` if unknown.
pub fn type_options(ty: &str) -> Option<Vec<String>> {
    let code = TYPE_CODES.iter().position(|t| *t == ty)?;
    Some(vec![format!("-DTP_TYPE={code}"), "-std=c++17".to_string()])
}

/// Kernel name for operator `op` ("sum", "prod", "min", "max"; "avg" runs "sum" then a scale).
pub fn exec_kernel(op: &str) -> Option<&'static str> {
    match op {
        "sum" | "avg" => Some(EXEC_KERNELS[0]),
        "prod" => Some(EXEC_KERNELS[1]),
        "min" => Some(EXEC_KERNELS[2]),
        "max" => Some(EXEC_KERNELS[3]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_name_is_defined_once() {
        for k in EXEC_KERNELS {
            let def = format!("TP_KERNEL({k},");
            assert_eq!(EXEC_CU.matches(&def).count(), 1, "{k}");
        }
    }

    #[test]
    fn every_direct_kernel_name_is_defined_once() {
        for k in DIRECT_KERNELS {
            let def = format!("TD_KERNEL({k},");
            assert_eq!(EXEC_CU.matches(&def).count(), 1, "{k}");
        }
        for k in DIRECT_SHARED_KERNELS {
            let def = format!("TD_KERNEL_SHARED({k},");
            assert_eq!(EXEC_CU.matches(&def).count(), 1, "{k}");
        }
    }

    #[test]
    fn every_pair_kernel_name_is_defined_once() {
        for k in PAIR_KERNELS {
            let def = format!("TD_PAIR_KERNEL({k},");
            assert_eq!(EXEC_CU.matches(&def).count(), 1, "{k}");
        }
    }

    #[test]
    fn every_type_code_has_a_branch() {
        for (i, t) in TYPE_CODES.iter().enumerate() {
            let branch = if i == 0 {
                format!("#if TP_TYPE == {i}")
            } else {
                format!("#elif TP_TYPE == {i}")
            };
            assert!(EXEC_CU.contains(&branch), "{t}");
        }
        assert!(type_options("bf16").unwrap()[0].ends_with("=3"));
        assert!(type_options("f128").is_none());
    }

    #[test]
    fn braces_balance() {
        let open = EXEC_CU.matches('{').count();
        let close = EXEC_CU.matches('}').count();
        assert_eq!(open, close);
    }
}
