use super::*;
use std::cell::Cell;
use std::sync::{Arc, Barrier};

const UNIT: (&str, &str) = ("exec.cu", "__global__ void k() {}\n");
const HEADERS: [(&str, &str); 1] = [("common.cuh", "#define X 1\n")];

/// A fresh folder under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("topoplan-kcache-{what}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn key_with(unit: (&str, &str), arch: &str, options: &[&str], nvrtc: &str) -> Key {
    let options: Vec<String> = options.iter().map(|o| o.to_string()).collect();
    Key::new(unit, &HEADERS, arch, &options, nvrtc)
}

fn key() -> Key {
    key_with(UNIT, "compute_90", &["-DTP_TYPE=0"], "13.0")
}

/// A PTX text that differs per key, large enough to span several write buffers.
fn ptx_of(key: &Key) -> String {
    format!("// {}\n{}", key.file_name(), ".reg .b32 r;\n".repeat(2000))
}

/// Looks `key` up in a fresh cache over `dir` (a new process's view), counting compiles.
fn lookup(dir: &Path, key: &Key, compiles: &Cell<u32>) -> String {
    let cache = DiskCache::at(dir);
    let got: Result<String, ()> = cache.get_or_compile(key, || {
        compiles.set(compiles.get() + 1);
        Ok(ptx_of(key))
    });
    got.unwrap()
}

fn entry(dir: &Path, key: &Key) -> PathBuf {
    dir.join(key.file_name())
}

#[test]
fn a_miss_compiles_once_and_a_new_process_reads_the_entry() {
    let dir = TempDir::new("hit");
    let (k, n) = (key(), Cell::new(0));
    assert_eq!(lookup(&dir.0, &k, &n), ptx_of(&k));
    assert_eq!(n.get(), 1);
    assert!(entry(&dir.0, &k).is_file());
    for _ in 0..2 {
        assert_eq!(lookup(&dir.0, &k, &n), ptx_of(&k));
    }
    assert_eq!(n.get(), 1, "a stored entry compiled again");
}

#[test]
fn another_option_arch_source_header_or_nvrtc_misses() {
    let dir = TempDir::new("keys");
    let other_unit = (UNIT.0, "__global__ void k2() {}\n");
    let keys = [
        key(),
        key_with(UNIT, "compute_90", &["-DTP_TYPE=1"], "13.0"),
        key_with(UNIT, "compute_80", &["-DTP_TYPE=0"], "13.0"),
        key_with(other_unit, "compute_90", &["-DTP_TYPE=0"], "13.0"),
        key_with(UNIT, "compute_90", &["-DTP_TYPE=0"], "13.1"),
        key_with(
            UNIT,
            "compute_90",
            &["-DTP_TYPE=0", "-DTD_SHARED_BUILD"],
            "13.0",
        ),
        Key::new(
            UNIT,
            &[("common.cuh", "#define X 2\n")],
            "compute_90",
            &["-DTP_TYPE=0".into()],
            "13.0",
        ),
    ];
    let n = Cell::new(0);
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(lookup(&dir.0, k, &n), ptx_of(k));
        assert_eq!(n.get(), i as u32 + 1, "key {i} hit another key's entry");
    }
    let files = fs::read_dir(&dir.0).unwrap().count();
    assert_eq!(files, keys.len());
}

#[test]
fn fields_cannot_run_into_each_other() {
    let two = key_with(UNIT, "compute_90", &["-DA", "-DB"], "13.0");
    let one = key_with(UNIT, "compute_90", &["-DA\noption 3\n-DB"], "13.0");
    assert_ne!(two, one);
    assert_ne!(two.file_name(), one.file_name());
}

/// Damages the entry of `key()` with `damage`, then checks that the next lookup compiles,
/// returns the right PTX and repairs the entry (the one after reads it).
fn recompiles_after(what: &str, damage: impl FnOnce(&Path)) {
    let dir = TempDir::new(what);
    let (k, n) = (key(), Cell::new(0));
    lookup(&dir.0, &k, &n);
    damage(&entry(&dir.0, &k));
    assert_eq!(lookup(&dir.0, &k, &n), ptx_of(&k), "{what}");
    assert_eq!(n.get(), 2, "{what}: the damaged entry was used");
    assert_eq!(lookup(&dir.0, &k, &n), ptx_of(&k), "{what}");
    assert_eq!(n.get(), 2, "{what}: the entry was not repaired");
    assert!(read(&dir.0, &k).is_ok(), "{what}");
}

#[test]
fn a_corrupted_entry_is_compiled_again_and_repaired() {
    recompiles_after("flipped", |p| {
        let mut b = fs::read(p).unwrap();
        let last = b.len() - 5;
        b[last] ^= 1;
        fs::write(p, b).unwrap();
    });
}

#[test]
fn a_truncated_entry_is_compiled_again_and_repaired() {
    for cut in [0, 10, 100, 20_000] {
        recompiles_after(&format!("cut{cut}"), |p| {
            let b = fs::read(p).unwrap();
            fs::write(p, &b[..cut.min(b.len() - 1)]).unwrap();
        });
    }
}

#[test]
fn an_entry_holding_another_key_is_compiled_again_and_repaired() {
    recompiles_after("foreign", |p| {
        let other = key_with(UNIT, "compute_80", &[], "12.0");
        fs::write(p, [encode_head(&other, "x"), b"x".to_vec()].concat()).unwrap();
        let dir = p.parent().unwrap();
        assert!(matches!(read(dir, &key()), Err(CacheError::OtherKey(_))));
    });
}

#[test]
fn garbage_and_oversized_entries_are_compiled_again() {
    recompiles_after("garbage", |p| {
        fs::write(p, b"\x00\xffnot an entry").unwrap()
    });
    recompiles_after("huge", |p| {
        // Sparse: the length is what the bound checks.
        fs::File::create(p)
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        let dir = p.parent().unwrap();
        assert!(matches!(read(dir, &key()), Err(CacheError::TooLarge(_))));
    });
}

#[test]
fn an_unwritable_folder_still_returns_the_compiled_ptx() {
    let dir = TempDir::new("unwritable");
    fs::create_dir_all(&dir.0).unwrap();
    // Under a regular file no folder can be created, whatever the user's rights.
    let file = dir.0.join("file");
    fs::write(&file, b"").unwrap();
    let (k, n) = (key(), Cell::new(0));
    let cache = DiskCache::at(file.join("kernels"));
    for i in 1..=2 {
        let got: Result<String, ()> = cache.get_or_compile(&k, || {
            n.set(n.get() + 1);
            Ok(ptx_of(&k))
        });
        assert_eq!(got, Ok(ptx_of(&k)));
        assert_eq!(n.get(), i);
    }
    assert!(matches!(
        write(&file.join("kernels"), &k, "x"),
        Err(CacheError::Io { .. })
    ));
}

#[test]
fn a_failed_compile_returns_its_error_and_stores_nothing() {
    let dir = TempDir::new("fails");
    let cache = DiskCache::at(&dir.0);
    let got: Result<String, &str> = cache.get_or_compile(&key(), || Err("syntax error"));
    assert_eq!(got, Err("syntax error"));
    assert!(!entry(&dir.0, &key()).exists());
}

#[test]
fn an_off_cache_compiles_every_time() {
    let (k, n) = (key(), Cell::new(0));
    let cache = DiskCache::off();
    for _ in 0..2 {
        let got: Result<String, ()> = cache.get_or_compile(&k, || {
            n.set(n.get() + 1);
            Ok(ptx_of(&k))
        });
        assert_eq!(got, Ok(ptx_of(&k)));
    }
    assert_eq!(n.get(), 2);
}

#[test]
fn writers_racing_on_one_entry_leave_a_whole_one() {
    let dir = TempDir::new("race");
    let k = key();
    let threads = 8;
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (dir, k, start) = (dir.0.clone(), k.clone(), start.clone());
            std::thread::spawn(move || {
                let cache = DiskCache::at(&dir);
                for _ in 0..20 {
                    start.wait();
                    // Each writes (the race is on the rename); every result must be whole.
                    write(&dir, &k, &ptx_of(&k)).unwrap();
                    let got: Result<String, ()> = cache.get_or_compile(&k, || Ok(ptx_of(&k)));
                    assert_eq!(got, Ok(ptx_of(&k)));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(read(&dir.0, &k).unwrap(), ptx_of(&k));
    let names: Vec<_> = fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        [std::ffi::OsString::from(k.file_name())],
        "temp files left"
    );
}

/// [`dir_from`] over the variables `pairs`.
fn dir_for(pairs: &[(&str, &str)]) -> Option<PathBuf> {
    dir_from(&|k: &str| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    })
}

#[test]
fn the_folder_follows_the_variable_then_xdg_then_home() {
    let home = ("HOME", "/home/u");
    let in_home = Some(PathBuf::from("/home/u/.cache/topoplan/kernels"));
    let var = |v| ("TOPOPLAN_KERNEL_CACHE", v);
    assert_eq!(dir_for(&[var("/c"), home]), Some("/c".into()));
    for off in ["off", "OFF", "0", " off "] {
        assert_eq!(dir_for(&[var(off), home]), None, "{off}");
    }
    assert_eq!(dir_for(&[var(""), home]), in_home);
    let xdg = ("XDG_CACHE_HOME", "/x");
    assert_eq!(dir_for(&[xdg, home]), Some("/x/topoplan/kernels".into()));
    // XDG: a relative XDG_CACHE_HOME is ignored.
    assert_eq!(dir_for(&[("XDG_CACHE_HOME", "x"), home]), in_home);
    assert_eq!(dir_for(&[]), None);
    assert_eq!(dir_for(&[("HOME", "")]), None);
}

#[test]
fn fnv1a_matches_its_reference_values() {
    assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a(b"foobar"), 0x85944171f73967e8);
}
