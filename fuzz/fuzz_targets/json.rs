//! Fuzzes the topoplan JSON reader: no panics, lossless round trips, paths answer.
#![no_main]
use libfuzzer_sys::fuzz_target;
use planner::topology::{fuzzing, Format};

fuzz_target!(|data: &[u8]| fuzzing::check(data, Format::Json));
