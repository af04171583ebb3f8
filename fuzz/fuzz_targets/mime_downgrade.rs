//! Fuzzes the 8BITMIME and SMTPUTF8 downgrades (RFC 6152, RFC 6857), which walk the MIME
//! structure of any message the LAN or a peer sent and rewrite its header fields: they must
//! never panic; `seven_bit` must return 7-bit text, and `ascii_headers` an ASCII header.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(out) = skywave_smtp::downgrade::seven_bit(data) {
        assert!(out.is_ascii());
    }
    if let Ok(out) = skywave_smtp::downgrade::ascii_headers(data) {
        // The message's own header: every line up to the first empty one.
        let header = out
            .split_inclusive(|&b| b == b'\n')
            .take_while(|l| *l != b"\r\n" && *l != b"\n");
        for line in header {
            assert!(line.is_ascii(), "{:?}", String::from_utf8_lossy(line));
        }
    }
});
