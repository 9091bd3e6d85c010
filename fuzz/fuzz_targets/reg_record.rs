//! Fuzzes the buffer-registration record (`cuda::ipc::RegRecord`), which a process reads
//! from its peers when they register a buffer together: never panics; what it accepts re-encodes
//! to the same bytes (but the padding word).
#![no_main]
use libfuzzer_sys::fuzz_target;
use cuda::ipc::RegRecord;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = RegRecord::decode(data) {
        let e = r.encode();
        assert_eq!(&e[..12], &data[..12]);
        assert_eq!(&e[16..], &data[16..]);
    }
});
