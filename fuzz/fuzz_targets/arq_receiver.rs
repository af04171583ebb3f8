//! Fuzz the STANAG 5066 ARQ receiver (`skywave_emu::arq::ArqReceiver`) with whatever a peer
//! could put in DATA D_PDUs: any FSN, any mix of C_PDU START/END, DELIVER IN ORDER and DROP,
//! duplicates, frames far outside the window, with receive-window resets and forgets between.
//! No input may panic; no C_PDU longer than the receiver's bound may come out; no frame's bytes
//! may be delivered twice (what comes out is never more than what went in); the ACK it builds
//! always encodes; after a forget nothing is held; a frame out of a window's reach
//! (§C.6.3.2's test (5), `ArqReceiver::in_sync`) is never taken in.
#![no_main]

#[path = "shared/data_header.rs"]
mod shared;

use libfuzzer_sys::fuzz_target;
use skywave_emu::arq::ArqReceiver;
use skywave_emu::dpdu::{Address, Body, Dpdu, Eow};

const MAX_CPDU: usize = 300;

fuzz_target!(|data: &[u8]| {
    let mut rx = ArqReceiver::new(MAX_CPDU);
    let mut fed = 0usize;
    let mut out = 0usize;
    let mut bytes = data.iter().copied();
    let a = Address::new(1).expect("a valid address");
    while let Some(op) = bytes.next() {
        match op % 8 {
            0..=5 => {
                let (Some(flags), Some(fsn), Some(len)) =
                    (bytes.next(), bytes.next(), bytes.next())
                else {
                    break;
                };
                let header = shared::data_header(flags, fsn);
                let segment = vec![fsn; usize::from(len % 128)];
                let duplicates = rx.duplicates();
                // Test (5) alone: the edge flags cleared.
                let mut plain = header;
                (plain.tx_lwe, plain.tx_uwe) = (false, false);
                let reachable = rx.in_sync(&plain);
                // Its edge flags can only add to what it rules out.
                assert!(reachable || !rx.in_sync(&header));
                let taken = rx.on_segment(&header, &segment);
                assert!(
                    reachable || !taken,
                    "a frame out of the window's reach was taken"
                );
                // Only a frame taken in for the first time brings new bytes.
                if taken && rx.duplicates() == duplicates {
                    fed += segment.len();
                }
            }
            6 => {
                let new_lwe = bytes.next().unwrap_or(0);
                rx.reset(new_lwe);
            }
            _ => {
                let new_lwe = bytes.next().unwrap_or(0);
                rx.forget(new_lwe);
                assert!(rx.is_idle(), "nothing held after a forget");
            }
        }
        for c in rx.take_delivered() {
            assert!(c.len() <= MAX_CPDU, "a C_PDU of {} bytes came out", c.len());
            out += c.len();
        }
        assert!(
            out <= fed,
            "{out} bytes delivered of {fed} accepted: something went up twice"
        );
        let ack = Dpdu {
            eow: Eow::NONE,
            eot: 0,
            destination: a,
            source: a,
            body: Body::AckOnly(rx.ack()),
        };
        assert!(ack.encode().is_ok(), "the ACK must encode: {ack:?}");
    }
});
