//! Fuzz the SIS decoder: arbitrary bytes fed in arbitrary chunks (the first byte of the input
//! seeds the chunk sizes); whatever decodes must re-encode and decode again to the same
//! primitive, and an error must leave the decoder failed with the same error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_sis::{Decoder, Primitive};

fn redecode(p: &Primitive) {
    let bytes = p.to_bytes().expect("a decoded primitive always re-encodes");
    let mut d = Decoder::new();
    d.push(&bytes);
    assert_eq!(d.next().as_ref(), Ok(&Some(p.clone())));
    assert_eq!(d.next(), Ok(None));
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, rest)) = data.split_first() else {
        return;
    };
    let mut d = Decoder::with_max_size(4200);
    let mut pos = 0;
    let mut step = 0usize;
    while pos < rest.len() {
        let n = 1 + (usize::from(seed.rotate_left(step as u32 % 8)) % 64);
        let n = n.min(rest.len() - pos);
        d.push(&rest[pos..pos + n]);
        pos += n;
        step += 1;
        loop {
            match d.next() {
                Ok(Some(p)) => redecode(&p),
                Ok(None) => break,
                Err(e) => {
                    assert_eq!(d.next(), Err(e));
                    return;
                }
            }
        }
    }
});
