//! Fuzz the JNOS LZW decoder with arbitrary streams fed in arbitrary chunks (it must never panic
//! and never exceed its cap), and check that encoding the same bytes with flushes round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_compress::{Limits, LzwDecoder, LzwEncoder};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    // Decode arbitrary bytes, cut into chunks of 1..=32 bytes.
    let cap = 1 << 20;
    let mut dec = LzwDecoder::new(Limits::single(cap));
    let step = usize::from(sel % 32) + 1;
    let mut ok = true;
    for chunk in rest.chunks(step) {
        if dec.feed(chunk).is_err() {
            ok = false;
            break;
        }
        assert!(dec.output_len() as u64 <= cap);
    }
    if ok {
        let _ = dec.finish();
    }
    assert!(dec.total_out() <= cap);

    // Round trip: maxbits and flush spacing from the selector byte.
    let maxbits = 9 + sel % 8;
    let mut enc = LzwEncoder::new(maxbits).unwrap();
    let mut wire = Vec::new();
    let flush_every = usize::from(sel / 8) + 1;
    for piece in rest.chunks(flush_every) {
        enc.push(piece);
        if piece.len() % 3 == 0 {
            enc.flush();
        }
        wire.extend(enc.take_output());
    }
    enc.flush();
    wire.extend(enc.take_output());
    // A tiny history forces the table walk for older strings; the default takes the copy path.
    for history in [
        usize::from(sel % 16),
        skywave_compress::lzw::DEFAULT_HISTORY,
    ] {
        let mut dec = LzwDecoder::with_history(Limits::unlimited(), history);
        let mut got = Vec::new();
        for piece in wire.chunks(step) {
            dec.feed(piece).unwrap();
            got.extend(dec.take_output());
        }
        dec.finish().unwrap();
        assert_eq!(got, rest);
    }
});
