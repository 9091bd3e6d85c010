//! The kernel units compile with NVRTC for every element type, their headers passed by name
//! and the layout constants as options, exactly as the runtime compiles them. Needs only
//! libnvrtc (no GPU, no driver): where it is missing (CI) the test skips with a message.
//! Locally, the pip wheel `nvidia-cuda-nvrtc` provides it (LD_LIBRARY_PATH=.../nvidia/cu13/lib).
//!
//! NVRTC does not check inline PTX assembly; the driver does, when it loads the module. With
//! `TOPOPLAN_PTXAS` naming a `ptxas` (the pip wheel `nvidia-cuda-nvcc` has one) the test also
//! assembles every unit for its architecture, so a bad `asm` fails here instead of on the GPU.
//! Each build prints how long it took (`-- --nocapture`): NVRTC's time here, the driver's
//! assembly of the PTX on the GPU at first use on top. `a_second_compile_reads_the_disk_cache`
//! compiles the f32 units through the kernel cache and reads them back, printing both times.

use cuda::kernels::cache::DiskCache;
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

/// Before sm_89 the FP8 conversions are plain arithmetic (no conversion instructions): that
/// path compiles too, for the oldest architecture the runtime builds for.
#[test]
fn every_unit_compiles_for_fp8_before_sm89() {
    compile_for("every_unit_compiles_for_fp8_before_sm89", "80", &FP8);
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
    compile_for(test, "90", tys);
}

/// FP8 on sm_89 and newer converts with the instructions NCCL's conversions compile to; before,
/// with none of them.
fn check_fp8_conversions(what: &str, ty: &str, sm: &str, ptx: &str) {
    if !FP8.contains(&ty) {
        return;
    }
    let hw = sm.parse::<u32>().unwrap() >= 89;
    let pair = if ty == "f8e4m3" { "e4m3x2" } else { "e5m2x2" };
    for ins in [
        format!("cvt.rn.satfinite.{pair}.f16x2"),
        format!("cvt.rn.f16x2.{pair}"),
    ] {
        assert_eq!(ptx.contains(&ins), hw, "{what} sm_{sm}: {ins}");
    }
}

/// Compiles every build of `tys` for `compute_{sm}` and checks its entry points.
fn compile_for(test: &str, sm: &str, tys: &[&'static str]) {
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
        let what = format!("{} {ty} {shared:?}", unit.name);
        let start = std::time::Instant::now();
        let ptx = kernels::compile(unit, &format!("compute_{sm}"), &options)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        eprintln!(
            "{what} compute_{sm}: NVRTC {:.1} s",
            start.elapsed().as_secs_f64()
        );
        let text = ptx.to_src();
        check_fp8_conversions(&what, ty, sm, &text);
        let entry = |k: &str| text.contains(&format!(".entry {k}("));
        let want = entries(unit, shared.is_some());
        for k in &every {
            assert_eq!(entry(k), want.contains(k), "{what}: entry {k}");
        }
        if let Some(ptxas) = params::PTXAS.path().unwrap() {
            let start = std::time::Instant::now();
            let name = format!("{}-{ty}-{}", unit.name, shared.is_some());
            assemble(&ptxas, sm, &name, &text);
            eprintln!(
                "{what} sm_{sm}: ptxas {:.1} s",
                start.elapsed().as_secs_f64()
            );
        }
    }
}

/// Assembles `ptx` with `ptxas` for `sm_{sm}`, panicking with its log on failure.
fn assemble(ptxas: &std::path::Path, sm: &str, what: &str, ptx: &str) {
    // A folder per unit and type: the tests run at once and each removes its own.
    let dir =
        std::env::temp_dir().join(format!("topoplan-ptxas-{}-{sm}-{what}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join(format!("{what}.ptx"));
    std::fs::write(&src, ptx).unwrap();
    let out = std::process::Command::new(ptxas)
        .arg(format!("-arch=sm_{sm}"))
        .arg("-o")
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

/// A unit compiled once through the disk cache is read back by a new cache over the same folder
/// (a new process) without NVRTC, the PTX byte for byte the same. Prints both times.
#[test]
fn a_second_compile_reads_the_disk_cache() {
    let test = "a_second_compile_reads_the_disk_cache";
    // SAFETY: only probes dlopen.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("SKIP {test}: libnvrtc not found");
        return;
    }
    let dir = std::env::temp_dir().join(format!("topoplan-kcache-nvrtc-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    let options = kernels::options("f32").unwrap();
    for unit in kernels::UNITS {
        let arch = "compute_90";
        let timed = |cache: &DiskCache| {
            let start = std::time::Instant::now();
            let ptx = kernels::compile_cached(cache, unit, arch, &options)
                .unwrap_or_else(|e| panic!("{}: {e}", unit.name));
            (ptx.to_src(), start.elapsed().as_secs_f64())
        };
        let (first, compiled) = timed(&DiskCache::at(&dir));
        let (second, cached) = timed(&DiskCache::at(&dir));
        eprintln!(
            "{} f32 {arch}: first call {compiled:.2} s, from the disk cache {cached:.3} s",
            unit.name
        );
        assert_eq!(first, second, "{}", unit.name);
        // The stored entry answers without compiling.
        let key = kernels::cache_key(unit, arch, &options).expect("NVRTC's version");
        let stored: Result<String, &str> =
            DiskCache::at(&dir).get_or_compile(&key, || Err("compiled again"));
        assert_eq!(stored.as_deref(), Ok(first.as_str()), "{}", unit.name);
    }
    let entries = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(entries, kernels::UNITS.len());
    std::fs::remove_dir_all(&dir).ok();
}
