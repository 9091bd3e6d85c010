//! Fuzzes what the NCCL-compatible library reads from its callers' bytes: the 128-byte unique
//! id (`decode_id`) and a versioned `ncclConfig_t` of any claimed size (`CommConfig::read`).
//! Never panics; an id it accepts re-encodes to the same bytes up to the terminating NUL.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nccl::abi::{decode_id, encode_id, CommConfig, RawConfig, RawUniqueId, UNIQUE_ID_BYTES};

fuzz_target!(|data: &[u8]| {
    let mut id = RawUniqueId { internal: [0; UNIQUE_ID_BYTES] };
    for (d, s) in id.internal.iter_mut().zip(data) {
        *d = *s as std::ffi::c_char;
    }
    if let Some(text) = decode_id(&id) {
        let again = encode_id(&text).expect("it fit before");
        assert_eq!(decode_id(&again).as_deref(), Some(text.as_str()));
    }
    // A config whose pointer fields are zeroed (a fuzzer cannot make valid C strings), whose
    // claimed size may be anything up to the bytes given.
    let mut buf = [0u8; std::mem::size_of::<RawConfig>()];
    for (d, s) in buf.iter_mut().zip(data) {
        *d = *s;
    }
    buf[32..40].fill(0);
    buf[48..56].fill(0);
    let claimed = usize::from_ne_bytes(buf[..8].try_into().unwrap()).min(buf.len());
    buf[..8].copy_from_slice(&claimed.to_ne_bytes());
    // SAFETY: `claimed` bytes are readable and both pointer fields are null.
    let _ = unsafe { CommConfig::read(buf.as_ptr() as *const RawConfig) };
});
