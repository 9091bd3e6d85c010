//! Replays the fuzz corpora (fuzz/corpus/{xml,json}) through the same check the fuzz targets
//! run, so CI exercises them without cargo-fuzz; plus a few mutations of each seed.

use planner::topology::{fuzzing, Format};
use std::path::PathBuf;

fn replay(dir: &str, format: Format) -> usize {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(dir);
    let mut n = 0;
    for e in std::fs::read_dir(&d).unwrap() {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        fuzzing::check(&data, format);
        // Truncations and single-byte flips: cheap stand-ins for what the fuzzer tries first.
        for cut in [
            1,
            data.len() / 3,
            data.len() / 2,
            data.len().saturating_sub(2),
        ] {
            fuzzing::check(&data[..cut.min(data.len())], format);
        }
        for (i, b) in [
            (7usize, b'<'),
            (data.len() / 2, b'"'),
            (data.len() / 3, b'9'),
        ] {
            if i < data.len() {
                let mut m = data.clone();
                m[i] = b;
                fuzzing::check(&m, format);
            }
        }
        n += 1;
    }
    n
}

#[test]
fn xml_corpus_replays() {
    assert!(replay("xml", Format::Xml) >= 10);
}

#[test]
fn json_corpus_replays() {
    assert!(replay("json", Format::Json) >= 5);
}
