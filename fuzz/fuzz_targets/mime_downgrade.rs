//! Fuzzes the 8BITMIME downgrade (RFC 6152), which walks the MIME structure of any message the
//! LAN or a peer sent: it must never panic, and what it returns must be 7-bit.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(out) = skywave_smtp::downgrade::seven_bit(data) {
        assert!(out.is_ascii());
    }
});
