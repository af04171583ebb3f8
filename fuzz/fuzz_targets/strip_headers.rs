//! Fuzzes what a peer's links leave ashore of any message the LAN or a peer sent: header fields
//! (`strip_headers`) and HTML twins (`text_only`, a walk of the MIME structure). Neither may
//! panic; the fields taken must be whole fields of the message's own header (what is returned
//! plus what was left out is the message's size, the body after the first empty line is
//! untouched); and a second pass of either leaves nothing more out.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_smtp::strip::{FieldPattern, strip_fields, text_only};

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
    let (text, removed) = text_only(data);
    assert_eq!(text.len() + removed, data.len());
    assert_eq!(text_only(&text).1, 0);
});
