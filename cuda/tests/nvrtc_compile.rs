//! The device kernels compile with NVRTC for every element type. Needs only libnvrtc (no GPU,
//! no driver): where it is missing (CI) the test skips with a message. Locally, the pip wheel
//! `nvidia-cuda-nvrtc` provides it (LD_LIBRARY_PATH=.../nvidia/cu13/lib).
//!
//! NVRTC does not check inline PTX assembly; the driver does, when it loads the module. With
//! `TOPOPLAN_PTXAS` naming a `ptxas` (the pip wheel `nvidia-cuda-nvcc` has one) the test also
//! assembles every unit for sm_90, so a bad `asm` fails here instead of on the GPU.

use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};

#[test]
fn executor_compiles_for_every_type() {
    // SAFETY: only probes dlopen.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("SKIP executor_compiles_for_every_type: libnvrtc not found");
        return;
    }
    // Every type in both builds: the executor, and the register-capped direct kernels alone
    // (`TD_SHARED_BUILD`, also with another cap, `TOPOPLAN_SHARED_MAXREG`).
    let main: Vec<&str> = cuda::kernels::EXEC_KERNELS
        .iter()
        .chain(cuda::kernels::DIRECT_KERNELS.iter())
        .chain(cuda::kernels::PAIR_KERNELS.iter())
        .chain(["tp_signal", "tp_wait"].iter())
        .copied()
        .collect();
    let variants = cuda::kernels::TYPE_CODES
        .iter()
        .flat_map(|ty| [(*ty, None), (*ty, Some(None))])
        .chain([("f32", Some(Some(64u32)))]);
    for (ty, shared) in variants {
        let mut options = cuda::kernels::type_options(ty).unwrap();
        if let Some(cap) = shared {
            options.push("-DTD_SHARED_BUILD".into());
            options.extend(cap.map(|r| format!("-DTD_SHARED_NREG={r}")));
        }
        let opts = CompileOptions {
            arch: Some("compute_90"),
            name: Some("exec.cu".into()),
            options,
            ..Default::default()
        };
        let ptx = compile_ptx_with_opts(cuda::kernels::EXEC_CU, opts)
            .unwrap_or_else(|e| panic!("{ty}: {e:?}"));
        let text = ptx.to_src();
        let entry = |k: &str| text.contains(&format!(".entry {k}("));
        let (want, not): (&[&str], &[&str]) = match shared {
            None => (&main, &cuda::kernels::DIRECT_SHARED_KERNELS),
            Some(_) => (&cuda::kernels::DIRECT_SHARED_KERNELS, &main),
        };
        for k in want {
            assert!(entry(k), "{ty} {shared:?}: {k} missing from the PTX");
        }
        for k in not {
            assert!(
                !entry(k),
                "{ty} {shared:?}: {k} should not be in this build"
            );
        }
        if let Some(ptxas) = params::PTXAS.path().unwrap() {
            assemble(&ptxas, ty, &text);
        }
    }
}

/// Assembles `ptx` with `ptxas` for sm_90, panicking with its log on failure.
fn assemble(ptxas: &std::path::Path, ty: &str, ptx: &str) {
    let dir = std::env::temp_dir().join(format!("topoplan-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join(format!("{ty}.ptx"));
    std::fs::write(&src, ptx).unwrap();
    let out = std::process::Command::new(ptxas)
        .args(["-arch=sm_90", "-o"])
        .arg(dir.join(format!("{ty}.cubin")))
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", ptxas.display()));
    assert!(
        out.status.success(),
        "{ty}: ptxas failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}
