//! nccl-tests output for `doctor`: the strict reader of `sim::measurements::nccl_tests` (one
//! reader for every command), its errors as bad input.

use super::input::Text;
use crate::cli::error::CliError;
pub use sim::measurements::nccl_tests::{Half, Row, Run};

pub fn parse(t: &Text) -> Result<Run, CliError> {
    sim::measurements::nccl_tests::parse(&t.body, &t.name).map_err(CliError::input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::doctor::input::{from_bytes, read};
    use proptest::prelude::*;

    /// The wrapper reads what `sim::measurements::nccl_tests` reads (its own tests check the
    /// rows of this file field by field).
    #[test]
    fn healthy_h200x2_all_reduce_reads_as_the_shared_reader_does() {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/doctor/h200x2-all-reduce-healthy.txt"
        );
        let t = read(std::path::Path::new(p)).unwrap();
        let ours = parse(&t).unwrap();
        let shared = sim::measurements::nccl_tests::parse(&t.body, &t.name).unwrap();
        assert_eq!(ours.rows.len(), 15);
        assert_eq!(format!("{ours:?}"), format!("{shared:?}"));
    }

    #[test]
    fn a_cut_row_is_bad_input_naming_its_line() {
        let t = from_bytes("ar.txt", b"# Collective test starting: all_reduce_perf\n 8 2 float sum -1 13.3 0.00 0.00 0 11.7\n".to_vec()).unwrap();
        let e = parse(&t).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .starts_with("ar.txt:2: nccl-tests row has 10 fields"),
            "{e}"
        );
        let t = from_bytes(
            "ar.txt",
            b" 8 2 float sum -1 13.3 0.00 x 0 11.7 0.00 0.00 0\n".to_vec(),
        )
        .unwrap();
        assert!(parse(&t)
            .unwrap_err()
            .to_string()
            .contains("field 8 (busbw) is \"x\""));
    }

    #[test]
    fn rows_without_root_and_unchecked_wrong() {
        let t = from_bytes(
            "all_gather_perf.log",
            b"  1048576  262144 float none 10.0 104.9 52.4 N/A 10.0 104.9 52.4 N/A\n".to_vec(),
        )
        .unwrap();
        let r = parse(&t).unwrap();
        assert_eq!(r.collective.as_deref(), Some("all_gather"));
        assert_eq!(r.rows[0].oop.wrong, None);
        assert_eq!(r.rows[0].oop.busbw, 52.4);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, .. ProptestConfig::default() })]
        #[test]
        fn random_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(t) = from_bytes("r", bytes) {
                let _ = parse(&t);
            }
        }
    }
}
