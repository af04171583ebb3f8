//! Fuzzes the leaving out of header fields (`strip_headers`), which reads the header of any
//! message the LAN or a peer sent: it must never panic, must take only whole fields of the
//! message's own header (what it returns plus what it left out is the message's size, the
//! body after the first empty line is untouched), and must leave nothing for a second pass.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_smtp::strip::{FieldPattern, strip_fields};

fuzz_target!(|data: &[u8]| {
    let patterns = FieldPattern::defaults();
    let (out, removed) = strip_fields(data, &patterns);
    assert_eq!(out.len() + removed, data.len());
    let body_at = |m: &[u8]| {
        let mut pos = 0;
        for line in m.split_inclusive(|&b| b == b'\n') {
            pos += line.len();
            if line == b"\r\n" || line == b"\n" {
                return Some(pos);
            }
        }
        None
    };
    if let Some(at) = body_at(data) {
        assert!(out.ends_with(&data[at..]));
    }
    assert_eq!(strip_fields(&out, &patterns).1, 0);
});
