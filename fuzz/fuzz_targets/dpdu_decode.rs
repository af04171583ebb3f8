//! Fuzz the STANAG 5066 D_PDU decoder and stream scanner: no input may panic, every frame the
//! decoder accepts must re-encode, and the re-encoded bytes must decode to the same frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_emu::dpdu::{scan, Dpdu};

fuzz_target!(|data: &[u8]| {
    if let Ok((dpdu, len)) = Dpdu::decode(data) {
        assert!(len <= data.len());
        let wire = dpdu.encode().expect("a decoded D_PDU must re-encode");
        let (again, again_len) = Dpdu::decode(&wire).expect("a re-encoded D_PDU must decode");
        assert_eq!(again, dpdu);
        assert_eq!(again_len, wire.len());
    }
    let mut rest = data;
    // Every round consumes at least one byte or stops, so this is bounded by the input length.
    for _ in 0..=data.len() {
        let s = scan(rest);
        assert!(s.consumed <= rest.len());
        assert!(s.skipped <= s.consumed);
        if let Some(Ok(dpdu)) = &s.item {
            let wire = dpdu.encode().expect("a scanned D_PDU must re-encode");
            assert_eq!(Dpdu::decode(&wire).map(|(d, _)| d).as_ref(), Ok(dpdu));
        }
        if s.consumed == 0 {
            break;
        }
        rest = &rest[s.consumed..];
    }
});
