//! The device kernels compile with NVRTC for every element type. Needs only libnvrtc (no GPU,
//! no driver): where it is missing (CI) the test skips with a message. Locally, the pip wheel
//! `nvidia-cuda-nvrtc` provides it (LD_LIBRARY_PATH=.../nvidia/cu13/lib).

use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};

#[test]
fn executor_compiles_for_every_type() {
    // SAFETY: only probes dlopen.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("SKIP executor_compiles_for_every_type: libnvrtc not found");
        return;
    }
    for ty in kernels::TYPE_CODES {
        let opts = CompileOptions {
            arch: Some("compute_90"),
            name: Some("exec.cu".into()),
            options: kernels::type_options(ty).unwrap(),
            ..Default::default()
        };
        let ptx =
            compile_ptx_with_opts(kernels::EXEC_CU, opts).unwrap_or_else(|e| panic!("{ty}: {e:?}"));
        let text = ptx.to_src();
        for k in kernels::EXEC_KERNELS
            .iter()
            .chain(kernels::DIRECT_KERNELS.iter())
            .chain(["tp_signal", "tp_wait"].iter())
        {
            assert!(text.contains(k), "{ty}: {k} missing from the PTX");
        }
    }
}
