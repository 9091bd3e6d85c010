use super::*;

fn all_sources() -> Vec<(&'static str, &'static str)> {
    UNITS
        .iter()
        .map(|u| (u.name, u.source))
        .chain(HEADERS.iter().copied())
        .collect()
}

fn defined_once(unit: Unit, macro_name: &str, kernels: &[&str]) {
    for k in kernels {
        let def = format!("{macro_name}({k},");
        assert_eq!(unit.source.matches(&def).count(), 1, "{k} in {}", unit.name);
    }
}

#[test]
fn every_kernel_name_is_defined_once_in_its_unit() {
    defined_once(EXEC, "TP_KERNEL", &EXEC_KERNELS);
    defined_once(DIRECT, "TD_KERNEL", &DIRECT_KERNELS);
    defined_once(DIRECT, "TD_KERNEL_SHARED", &DIRECT_SHARED_KERNELS);
    defined_once(PAIR, "TD_PAIR_KERNEL", &PAIR_KERNELS);
    for k in SIGNAL_KERNELS {
        let def = format!("__global__ void {k}(");
        assert_eq!(EXEC.source.matches(&def).count(), 1, "{k}");
    }
}

#[test]
fn every_type_code_has_a_branch() {
    let common = HEADERS[0].1;
    for (i, t) in TYPE_CODES.iter().enumerate() {
        let branch = if i == 0 {
            format!("#if TP_TYPE == {i}")
        } else {
            format!("#elif TP_TYPE == {i}")
        };
        assert!(common.contains(&branch), "{t}");
    }
    assert!(type_options("bf16").unwrap()[0].ends_with("=3"));
    assert!(type_options("f128").is_none());
}

#[test]
fn braces_balance() {
    for (name, src) in all_sources() {
        assert_eq!(src.matches('{').count(), src.matches('}').count(), "{name}");
    }
}

/// The `#include "x"` names of a source.
fn includes(src: &str) -> Vec<&str> {
    src.lines()
        .filter_map(|l| l.trim().strip_prefix("#include \""))
        .filter_map(|l| l.strip_suffix('"'))
        .collect()
}

#[test]
fn includes_name_known_headers_and_every_header_is_used() {
    let known: Vec<&str> = HEADERS.iter().map(|h| h.0).collect();
    let mut used = std::collections::BTreeSet::new();
    for (name, src) in all_sources() {
        for inc in includes(src) {
            assert!(known.contains(&inc), "{name} includes unknown {inc}");
            used.insert(inc);
        }
    }
    for h in known {
        assert!(used.contains(h), "header {h} is included nowhere");
        let src = HEADERS.iter().find(|x| x.0 == h).unwrap().1;
        assert!(src.contains("#pragma once"), "{h} lacks #pragma once");
    }
    // Every file of cuda/kernels is a unit or a header: none is left out of the build.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let f = e.file_name().to_string_lossy().into_owned();
        let listed = UNITS.iter().any(|u| u.name == f) || HEADERS.iter().any(|h| h.0 == f);
        assert!(listed, "cuda/kernels/{f} is neither a unit nor a header");
    }
}

/// Whether `src` has `#define NAME` (as a whole word).
fn defines(src: &str, name: &str) -> bool {
    src.lines().any(|l| {
        let l = l.trim_start();
        l.strip_prefix("#define")
            .map(str::trim_start)
            .and_then(|r| r.strip_prefix(name))
            .is_some_and(|r| !r.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
    })
}

#[test]
fn the_kernels_define_no_constant_the_host_passes() {
    let passed: Vec<String> = options("f32")
        .unwrap()
        .into_iter()
        .chain(shared_options(None))
        .filter_map(|o| o.strip_prefix("-D").map(str::to_string))
        .map(|d| d.split('=').next().unwrap().to_string())
        .collect();
    assert!(passed.iter().any(|n| n == "TD_FLAG_WORDS"));
    for (file, src) in all_sources() {
        for name in &passed {
            assert!(
                !defines(src, name),
                "{file} defines {name}, which the host passes"
            );
        }
    }
    // And every constant the host passes is read somewhere.
    for (name, _) in crate::layout::constants() {
        let used = all_sources().iter().any(|(_, s)| s.contains(name));
        assert!(used, "{name} is passed but no kernel reads it");
    }
    assert!(defines("#define TD_FLAG(p) x", "TD_FLAG"));
    assert!(!defines("#define TD_FLAG_WORDS 3", "TD_FLAG"));
}

#[test]
fn every_wait_on_a_peer_can_stop() {
    for (name, src) in all_sources() {
        // A bare spin on a flag word would wait forever on a dead peer.
        assert!(
            !src.contains("while (ld_acquire"),
            "{name}: a spin without tp_spin"
        );
        // The one hand-written loop (LL128's warp-wide vote) checks tp_stop itself.
        if src.contains("} while (") {
            assert!(
                src.contains("tp_stop("),
                "{name}: a do-while spin without tp_stop"
            );
        }
    }
    for (_, name, _) in crate::layout::WAITS {
        let used = all_sources()
            .iter()
            .filter(|(f, _)| *f != "common.cuh")
            .any(|(_, s)| s.contains(name));
        assert!(used, "{name} is reported by no wait");
    }
}
