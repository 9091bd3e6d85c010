//! The kernel units compile with NVRTC for every element type, their headers passed by name
//! and the layout constants as options, exactly as the runtime compiles them. Needs only
//! libnvrtc (no GPU, no driver): where it is missing (CI) the test skips with a message.
//! Locally, the pip wheel `nvidia-cuda-nvrtc` provides it (LD_LIBRARY_PATH=.../nvidia/cu13/lib).
//!
//! NVRTC does not check inline PTX assembly; the driver does, when it loads the module. With
//! `TOPOPLAN_PTXAS` naming a `ptxas` (the pip wheel `nvidia-cuda-nvcc` has one) the test also
//! assembles every unit for sm_90, so a bad `asm` fails here instead of on the GPU.

use cuda::kernels::{self, Unit};

/// Every build the runtime makes for the types `tys`: each unit, and the register-capped direct
/// build (for f32 also with another cap, `TOPOPLAN_SHARED_MAXREG`).
fn builds(tys: &[&'static str]) -> Vec<(Unit, &'static str, Option<Option<u32>>)> {
    let mut out = Vec::new();
    for &ty in tys {
        for unit in kernels::UNITS {
            out.push((unit, ty, None));
        }
        out.push((kernels::DIRECT, ty, Some(None)));
        if ty == "f32" {
            out.push((kernels::DIRECT, ty, Some(Some(64))));
        }
    }
    out
}

/// The entry points a build must have.
fn entries(unit: Unit, shared: bool) -> Vec<&'static str> {
    match (unit.name, shared) {
        ("exec.cu", _) => [
            kernels::EXEC_KERNELS.as_slice(),
            &kernels::SIGNAL_KERNELS,
            &[kernels::SCALE_KERNEL],
        ]
        .concat(),
        ("direct.cu", false) => {
            [kernels::DIRECT_KERNELS.as_slice(), &[kernels::P2P_KERNEL]].concat()
        }
        ("direct.cu", true) => kernels::DIRECT_SHARED_KERNELS.to_vec(),
        _ => kernels::PAIR_KERNELS.to_vec(),
    }
}

/// f32 alone, the quick check after a kernel change (`cargo test ... f32`).
#[test]
fn every_unit_compiles_for_f32() {
    compile_all("every_unit_compiles_for_f32", &["f32"]);
}

/// The FP8 types, whose conversions are the longest type-specific code (`... fp8`).
const FP8: [&str; 2] = ["f8e4m3", "f8e5m2"];

#[test]
fn every_unit_compiles_for_fp8() {
    compile_all("every_unit_compiles_for_fp8", &FP8);
}

#[test]
fn every_unit_compiles_for_the_other_types() {
    let others: Vec<&str> = kernels::TYPE_CODES
        .into_iter()
        .filter(|t| *t != "f32" && !FP8.contains(t))
        .collect();
    compile_all("every_unit_compiles_for_the_other_types", &others);
}

fn compile_all(test: &str, tys: &[&'static str]) {
    // SAFETY: only probes dlopen.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("SKIP {test}: libnvrtc not found");
        return;
    }
    let every: Vec<&str> = kernels::EXEC_KERNELS
        .iter()
        .chain(&kernels::SIGNAL_KERNELS)
        .chain(&kernels::DIRECT_KERNELS)
        .chain(&kernels::DIRECT_SHARED_KERNELS)
        .chain(&kernels::PAIR_KERNELS)
        .chain(&[kernels::P2P_KERNEL, kernels::SCALE_KERNEL])
        .copied()
        .collect();
    for (unit, ty, shared) in builds(tys) {
        let mut options = kernels::options(ty).unwrap();
        if let Some(cap) = shared {
            options.extend(kernels::shared_options(cap));
        }
        let ptx = kernels::compile(unit, "compute_90", &options)
            .unwrap_or_else(|e| panic!("{} {ty} {shared:?}: {e}", unit.name));
        let text = ptx.to_src();
        let entry = |k: &str| text.contains(&format!(".entry {k}("));
        let want = entries(unit, shared.is_some());
        for k in &every {
            assert_eq!(
                entry(k),
                want.contains(k),
                "{} {ty} {shared:?}: entry {k}",
                unit.name
            );
        }
        if let Some(ptxas) = params::PTXAS.path().unwrap() {
            assemble(&ptxas, &format!("{}-{ty}", unit.name), &text);
        }
    }
}

/// Assembles `ptx` with `ptxas` for sm_90, panicking with its log on failure.
fn assemble(ptxas: &std::path::Path, what: &str, ptx: &str) {
    // A folder per unit and type: the tests run at once and each removes its own.
    let dir = std::env::temp_dir().join(format!("topoplan-ptxas-{}-{what}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join(format!("{what}.ptx"));
    std::fs::write(&src, ptx).unwrap();
    let out = std::process::Command::new(ptxas)
        .args(["-arch=sm_90", "-o"])
        .arg(dir.join(format!("{what}.cubin")))
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", ptxas.display()));
    assert!(
        out.status.success(),
        "{what}: ptxas failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}
