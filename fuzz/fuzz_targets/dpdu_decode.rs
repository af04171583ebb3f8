//! Fuzz the STANAG 5066 D_PDU decoder and stream scanner: no input may panic, every frame the
//! decoder accepts must re-encode, and the re-encoded bytes must decode to the same frame. The
//! decoder for damaged frames (segment CRC unchecked) must agree with the strict one wherever
//! that one succeeds, and succeed wherever that one fails on the segment CRC alone.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_emu::dpdu::{DecodeError, Dpdu, scan};

fuzz_target!(|data: &[u8]| {
    let strict = Dpdu::decode(data);
    let damaged = Dpdu::decode_damaged(data);
    match &strict {
        Ok(_) => assert_eq!(&damaged, &strict),
        Err(DecodeError::BadSegmentCrc { .. }) => {
            let (d, len) = damaged.expect("only the segment CRC failed");
            assert!(len <= data.len());
            assert!(d.body.segment().is_some());
        }
        Err(e) => assert_eq!(damaged.as_ref().err(), Some(e)),
    }
    if let Ok((dpdu, len)) = strict {
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
