//! The property the fuzz targets (`fuzz/fuzz_targets/{xml,json}.rs`) and the corpus replay test
//! check on arbitrary input: reading never panics, and whatever reads successfully writes back
//! to an equal document, and answers path queries.

use super::*;

/// Reads `data` as the given format and checks the round-trip invariants. Panics (the fuzzer's
/// signal) only when an invariant breaks; bad input returning an error is fine.
pub fn check(data: &[u8], format: Format) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let name = match format {
        Format::Xml => "fuzz.xml",
        Format::Json => "fuzz.json",
    };
    let Ok(l) = load_str(text, name, &LoadOptions::default()) else {
        return;
    };
    let json = write_json(&l.doc);
    let back = read_json(&json, "rt.json").expect("our own JSON reads back");
    assert_eq!(back, l.doc, "JSON round trip changed the document");
    if l.doc.cluster.is_none() {
        let xml = write_xml(&l.doc).expect("single machines write as XML");
        let mut w = Vec::new();
        let mut back = read_xml(&xml, "rt.xml", &mut w).expect("our own XML reads back");
        back.assume = l.doc.assume.clone();
        assert_eq!(back, l.doc, "XML round trip changed the document");
    }
    let t = &l.topology;
    let n = (t.n_ranks() as u32).min(16);
    for a in 0..n {
        for b in 0..n {
            let _ = t.gpu_path(a, b);
        }
    }
    let _ = report::report(t);
}
