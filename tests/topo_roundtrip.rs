//! XML → JSON → XML is lossless on every fixture, and random topologies survive both forms.

use planner::topology::{self, doc::TopoDoc, synth, LoadOptions};
use proptest::prelude::*;
use std::path::PathBuf;

fn fixtures() -> Vec<PathBuf> {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut v: Vec<PathBuf> = std::fs::read_dir(base.join("topologies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.to_string_lossy().ends_with("-graph.xml"))
        .collect();
    v.push(base.join("measurements/h200x2/topo.xml"));
    v.sort();
    v
}

fn build(doc: &TopoDoc) -> topology::Topology {
    let mut d = doc.clone();
    let mut w = Vec::new();
    topology::topology_of(&mut d, "t", &LoadOptions::default(), &mut w).unwrap()
}

#[test]
fn every_fixture_round_trips_through_json_and_xml() {
    for f in fixtures() {
        let l = topology::load_file(&f, &LoadOptions::default()).unwrap();
        let json = topology::write_json(&l.doc);
        let from_json = topology::read_json(&json, "rt.json").unwrap();
        assert_eq!(
            from_json,
            l.doc,
            "{}: JSON changed the document",
            f.display()
        );
        let xml = topology::write_xml(&l.doc).unwrap();
        let mut w = Vec::new();
        let mut from_xml = topology::read_xml(&xml, "rt.xml", &mut w).unwrap();
        // XML has no place for skeleton assumptions; everything else must survive.
        from_xml.assume = l.doc.assume.clone();
        assert_eq!(from_xml, l.doc, "{}: XML changed the document", f.display());
        assert!(w.is_empty(), "{}: {w:?}", f.display());
        // And the original XML text reads to the same document as ours.
        let orig = std::fs::read_to_string(&f).unwrap();
        let mut w2 = Vec::new();
        let mut d2 = topology::read_xml(&orig, "orig.xml", &mut w2).unwrap();
        d2.assume = l.doc.assume.clone();
        assert_eq!(d2, from_xml, "{}", f.display());
        assert!(
            topology::same_topology(&build(&from_json), &l.topology),
            "{}",
            f.display()
        );
        assert!(
            topology::same_topology(&build(&from_xml), &l.topology),
            "{}",
            f.display()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn random_topology_json_round_trip(seed in any::<u64>()) {
        let doc = synth::random_doc(seed);
        let t = build(&doc);
        let back = topology::read_json(&topology::write_json(&doc), "p.json").unwrap();
        prop_assert_eq!(&back, &doc, "seed {}", seed);
        prop_assert!(topology::same_topology(&build(&back), &t), "seed {}", seed);
        prop_assert!(topology::same_topology(&synth::random(seed), &t), "seed {}", seed);
    }

    #[test]
    fn random_topology_xml_round_trip(seed in any::<u64>()) {
        let mut doc = synth::random_doc(seed);
        doc.cluster = None; // NCCL XML holds one machine
        let t = build(&doc);
        let xml = topology::write_xml(&doc).unwrap();
        let mut w = Vec::new();
        let back = topology::read_xml(&xml, "p.xml", &mut w).unwrap();
        prop_assert_eq!(&back, &doc, "seed {}", seed);
        prop_assert!(topology::same_topology(&build(&back), &t), "seed {}", seed);
    }
}
