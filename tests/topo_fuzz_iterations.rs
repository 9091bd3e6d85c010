//! The topology fuzz targets' body (`planner::topology::fuzzing::check`) over a fixed number of
//! inputs generated deterministically from the seed corpus (`fuzz/corpus/{xml,json}`: the real
//! machines' files and hand-made bad ones) and from deep and huge inputs. CI runs it on stable
//! Rust; cargo-fuzz (nightly) explores further from the same seeds (`docs/topology.md`).

use planner::topology::{fuzzing, Format};
use std::path::PathBuf;

/// Mutated inputs per format: a fixed count, so the test's cost and coverage do not drift.
const ITERATIONS: usize = 4000;

/// splitmix64: a fixed, seeded sequence (the same inputs every run, on every machine).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn seeds(dir: &str) -> Vec<Vec<u8>> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(dir);
    let mut names: Vec<PathBuf> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    names.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// Deep and huge XML: past the reader's depth and element limits, a machine of more GPUs than
/// NCCL holds, and one element with a huge attribute.
fn hostile_xml() -> Vec<Vec<u8>> {
    let sys =
        |inner: String| format!("<system version=\"1\"><cpu numaid=\"0\">{inner}</cpu></system>");
    let gpu = |i: usize| {
        format!(
            "<pci busid=\"{:04x}:{:02x}:00.0\"><gpu dev=\"{i}\" sm=\"90\" rank=\"{i}\" gdr=\"1\"><nvlink target=\"fffffff:ff:ff.0\" count=\"18\"/></gpu></pci>",
            i / 256,
            i % 256
        )
    };
    vec![
        sys("<pci busid=\"0000:01:00.0\">".repeat(100_000) + &"</pci>".repeat(100_000)),
        sys("<pci busid=\"0000:01:00.0\">".repeat(63) + &"</pci>".repeat(63)),
        sys("<x/>".repeat(100_001)),
        sys((0..700).map(gpu).collect()),
        sys(format!("<pci busid=\"{}\"/>", "f".repeat(1 << 20))),
        "<".repeat(200_000),
    ]
    .into_iter()
    .map(String::into_bytes)
    .collect()
}

/// Deep and huge JSON: nesting and a long array of GPUs.
fn hostile_json() -> Vec<Vec<u8>> {
    vec![
        format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes(),
        format!(
            "{{\"version\":1,\"system\":{{\"cpus\":[{}]}}}}",
            vec!["{\"numaid\":0}"; 50_000].join(",")
        )
        .into_bytes(),
    ]
}

/// One mutation of `a` (with `b` for splices): what a fuzzer tries first.
fn mutate(rng: &mut Rng, a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut m = a.to_vec();
    let len = m.len().max(1);
    match rng.below(7) {
        0 => m.truncate(rng.below(len)),
        1 => {
            if !m.is_empty() {
                let i = rng.below(m.len());
                let alphabet = b"<>/\"=0123456789-x\n \xff";
                m[i] = alphabet[rng.below(alphabet.len())];
            }
        }
        2 => {
            let i = rng.below(len).min(m.len());
            let j = (i + rng.below(64)).min(m.len());
            m.drain(i..j);
        }
        3 => {
            // Repeat a slice: deeper or wider documents.
            let i = rng.below(len).min(m.len());
            let j = (i + rng.below(256)).min(m.len());
            let chunk = m[i..j].to_vec();
            for _ in 0..rng.below(8) {
                m.splice(i..i, chunk.iter().copied());
            }
        }
        4 => {
            // Splice: the head of one seed, the tail of another.
            let i = rng.below(len).min(m.len());
            let j = rng.below(b.len().max(1)).min(b.len());
            m.truncate(i);
            m.extend_from_slice(&b[j..]);
        }
        5 => {
            // An attribute value or number replaced by an extreme one.
            let extremes: [&[u8]; 6] = [
                b"-1",
                b"0",
                b"9000",
                b"99999999999999999999",
                b"1e308",
                b"NaN",
            ];
            if let Some(i) = m.iter().position(|c| c.is_ascii_digit()) {
                let start = i + rng.below(m.len() - i);
                if let Some(k) = m[start..].iter().position(|c| c.is_ascii_digit()) {
                    let s = start + k;
                    let e = s + m[s..].iter().take_while(|c| c.is_ascii_digit()).count();
                    m.splice(s..e, extremes[rng.below(6)].iter().copied());
                }
            }
        }
        _ => {
            let i = rng.below(len).min(m.len());
            m.insert(i, rng.next() as u8);
        }
    }
    m
}

fn run(seeds: Vec<Vec<u8>>, hostile: Vec<Vec<u8>>, format: Format, seed: u64) -> usize {
    for h in &hostile {
        fuzzing::check(h, format);
    }
    let mut rng = Rng(seed);
    let mut pool = seeds;
    for _ in 0..ITERATIONS {
        let a = &pool[rng.below(pool.len())];
        let b = &pool[rng.below(pool.len())];
        let mut m = mutate(&mut rng, a, b);
        // Stack a second mutation half the time.
        if rng.below(2) == 0 {
            m = mutate(&mut rng, &m, b);
        }
        fuzzing::check(&m, format);
        // Keep some mutants as seeds, as a fuzzer keeps inputs that reach new code.
        if rng.below(8) == 0 && m.len() < 1 << 16 {
            pool.push(m);
        }
    }
    ITERATIONS + hostile.len()
}

#[test]
fn xml_reader_survives_generated_and_hostile_inputs() {
    let seeds = seeds("xml");
    assert!(seeds.len() >= 12, "the real machines' files are the seeds");
    assert_eq!(run(seeds, hostile_xml(), Format::Xml, 1), ITERATIONS + 6);
}

#[test]
fn json_reader_survives_generated_and_hostile_inputs() {
    let seeds = seeds("json");
    assert!(seeds.len() >= 5);
    assert_eq!(run(seeds, hostile_json(), Format::Json, 2), ITERATIONS + 2);
}
