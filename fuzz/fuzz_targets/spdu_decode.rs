//! Fuzz the STANAG 5066 S_PDU decoder (Annex A): no input may panic, and every S_PDU it
//! accepts must re-encode to bytes that decode to the same S_PDU.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_emu::spdu::Spdu;

fuzz_target!(|data: &[u8]| {
    if let Ok(spdu) = Spdu::decode(data) {
        let wire = spdu.encode().expect("a decoded S_PDU must re-encode");
        assert_eq!(Spdu::decode(&wire).as_ref(), Ok(&spdu));
    }
});
