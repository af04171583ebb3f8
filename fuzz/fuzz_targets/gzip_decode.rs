//! Fuzz the gzip file decoder (CFTP): it must never panic and never produce more than its cap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_compress::{Limits, gzip_decompress};

fuzz_target!(|data: &[u8]| {
    let cap = 1 << 20;
    if let Ok(out) = gzip_decompress(data, Limits::single(cap)) {
        assert!(out.len() as u64 <= cap);
    }
});
