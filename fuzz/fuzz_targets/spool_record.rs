//! Fuzzes the spool's queue-file decoder: it must never panic, and whatever it accepts must
//! encode back to exactly the same bytes (the format has one encoding per file).
//!
//! The first input byte chooses how the rest is used, so that the fuzzer reaches the deep parts
//! of the format without having to guess a magic number and a CRC-32:
//! bit 0 set: the spool magic is put in front; bit 1 set: a valid END record (with the right
//! checksum) is appended.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_spool::record::{MAGIC, checksum, decode, encode};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        let _ = decode(data);
        return;
    };
    let mut input = Vec::with_capacity(rest.len() + 16);
    if mode & 1 == 1 {
        input.extend_from_slice(MAGIC);
    }
    input.extend_from_slice(rest);
    if mode & 2 == 2 {
        let crc = checksum(&input);
        input.extend_from_slice(&[0x7F, 0, 0, 0, 4]);
        input.extend_from_slice(&crc.to_be_bytes());
    }
    if let Ok(file) = decode(&input) {
        let again = encode(&file).expect("a decoded file must encode");
        assert_eq!(again, input, "decode/encode is not a bijection");
    }
    // Every proper prefix of anything is rejected (a file is only complete with its END).
    if let Ok(file) = decode(&input) {
        let n = input.len();
        assert!(
            decode(&input[..n - 1]).is_err(),
            "{file:?} accepted without its last byte"
        );
    }
});
