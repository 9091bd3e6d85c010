//! Fuzzes the CUDA IPC exchange record (`cuda::ipc::PeerRecord`), which a process
//! reads from its peers: never panics; what it accepts re-encodes to the same bytes (but the
//! reserved word).
#![no_main]
use libfuzzer_sys::fuzz_target;
use cuda::ipc::PeerRecord;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = PeerRecord::decode(data) {
        let e = r.encode();
        assert_eq!(&e[..28], &data[..28]);
        assert_eq!(&e[32..], &data[32..]);
    }
});
