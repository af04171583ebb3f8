//! Fuzz the RFC 8494 MULE decoder (BER CompressedData, bounded zlib, envelope lines): no input
//! may panic, and every message it accepts must re-encode and decode to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_pmul::mule::{MuleLimits, decode, encode, parse_content, wrap_compressed};

fuzz_target!(|data: &[u8]| {
    let limits = MuleLimits {
        max_content: 1 << 20,
        max_recipients: 100,
    };
    if let Ok(m) = decode(data, limits) {
        let wire = encode(&m).expect("a decoded MULE message must re-encode");
        assert_eq!(decode(&wire, limits).as_ref(), Ok(&m));
    }
    // The envelope parser behind the zlib gate, directly and through a stored zlib stream.
    let _ = parse_content(data, limits);
    let _ = decode(&wrap_compressed(&stored_zlib(data)), limits);
});

/// A zlib stream of stored blocks holding `data` (RFC 1950/1951), so the fuzzer's bytes reach
/// the envelope parser without having to be valid deflate.
fn stored_zlib(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let mut chunks = data.chunks(65_535).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[0x01, 0x00, 0x00, 0xff, 0xff]);
    }
    while let Some(c) = chunks.next() {
        out.push(u8::from(chunks.peek().is_none()));
        let len = c.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(c);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out
}
