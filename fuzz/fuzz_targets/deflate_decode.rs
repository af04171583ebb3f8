//! Fuzz the zlib session-stream decoder with arbitrary bytes fed in arbitrary chunks: it must
//! never panic and never produce more than its cap. Often with a valid header, and often with a
//! header naming the preset mail dictionary (RFC 1950 FDICT), so that the dictionary path is
//! fuzzed too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_compress::{DeflateDecoder, Limits};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let cap = 1 << 20;
    let mut dec = DeflateDecoder::new(Limits::single(cap));
    let step = usize::from(sel % 64) + 1;
    // Give the fuzzer a valid header often, so it reaches the block decoder.
    let input: Vec<u8> = if sel & 0x80 != 0 {
        [&[0x78, 0x9c][..], rest].concat()
    } else if sel & 0x40 != 0 {
        let id = skywave_compress::dictionary::mail_v1_id().to_be_bytes();
        [&[0x78, 0xF9][..], &id[..], rest].concat()
    } else {
        rest.to_vec()
    };
    for chunk in input.chunks(step) {
        if dec.feed(chunk).is_err() {
            break;
        }
        assert!(dec.output_len() as u64 <= cap);
    }
    let _ = dec.finish();
    assert!(dec.total_out() <= cap);
});
