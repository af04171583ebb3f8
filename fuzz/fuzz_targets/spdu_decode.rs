//! Fuzz the STANAG 5066 S_PDU decoder (Annex A): no input may panic, and every S_PDU it
//! accepts must re-encode to bytes that decode to the same S_PDU. A DATA S_PDU's time to die
//! is read against a clock taken from the input's first 8 bytes, as a receiving node reads
//! it: no clock may panic it, and a TTD naming a time of day reads back to itself.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use skywave_emu::spdu::{Spdu, Ttd};

fuzz_target!(|data: &[u8]| {
    let (now, bytes) = match data.split_first_chunk::<8>() {
        Some((clock, rest)) => (Some(Duration::from_secs(u64::from_be_bytes(*clock))), rest),
        None => (None, data),
    };
    for input in [data, bytes] {
        if let Ok(spdu) = Spdu::decode(input) {
            let wire = spdu.encode().expect("a decoded S_PDU must re-encode");
            assert_eq!(Spdu::decode(&wire).as_ref(), Ok(&spdu));
            if let (Spdu::Data { pci, .. }, Some(now)) = (&spdu, now)
                && let Some(ttd) = pci.ttd
            {
                let at = ttd.resolve(now);
                // Within a day of GMT, and on a clock far from u64's end: the instant named
                // carries the same field.
                if ttd.gmt_seconds_half < 43_200 && now.as_secs() < 1 << 60 {
                    assert_eq!(Ttd::at(at), ttd, "read at {now:?}");
                }
            }
        }
    }
});
