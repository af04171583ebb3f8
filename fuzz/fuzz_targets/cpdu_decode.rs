//! Fuzz the STANAG 5066 C_PDU decoder (Annex B, CAS type 1): no input may panic, and every
//! C_PDU it accepts must re-encode to bytes that decode to the same C_PDU. (Bits the standard
//! leaves unused in a control C_PDU are ignored on decode and sent as zero, so the bytes may
//! differ; the C_PDU may not.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_emu::cpdu::Cpdu;

fuzz_target!(|data: &[u8]| {
    if let Ok(cpdu) = Cpdu::decode(data) {
        let wire = cpdu.encode().expect("a decoded C_PDU must re-encode");
        assert_eq!(Cpdu::decode(&wire).as_ref(), Ok(&cpdu));
    }
});
