//! Fuzzes the receiving side of skywave's `XRESUME` (`skywave_hmtp::resume`): any U_PDUs from a
//! peer, markers well formed or not among them, through a keeper whose owner serves, ends and
//! keeps sessions as the gateway's link does. Nothing may panic; a marker that parses must be
//! the marker it encodes to; a verdict that rebuilds a session hands over U_PDUs the keeper
//! kept; and the copies it drops are the U_PDUs it holds there.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_hmtp::resume::{Keeper, Marker, Verdict, resumption};

fuzz_target!(|data: &[u8]| {
    if let Some(Ok(m)) = Marker::parse(data) {
        assert_eq!(m.encode(), data);
    }
    // U_PDUs: a length octet, then that many octets; the top bit of the length octet ends the
    // session being served (timed out when the next bit is set, else by its QUIT).
    let mut keeper = Keeper::new();
    let mut serving = false;
    let mut kept: Vec<Vec<u8>> = Vec::new();
    let mut rest = data;
    while let Some((&head, tail)) = rest.split_first() {
        let len = usize::from(head & 0x3f).min(tail.len());
        let (updu, after) = tail.split_at(len);
        rest = after;
        // Now and then a marker made for what was kept, as a client would send it.
        let made;
        let updu = if head & 0x3f == 0x3f && kept.len() > 1 {
            made = resumption(&kept, kept.len() / 2).unwrap_or_default();
            made.first().map_or(updu, Vec::as_slice)
        } else {
            updu
        };
        match keeper.check(updu, serving) {
            Verdict::Pass => {
                if !serving {
                    keeper.started();
                    kept.clear();
                    serving = true;
                }
                keeper.read(updu);
                kept.push(updu.to_vec());
            }
            Verdict::Rebuild { updus, copies } => {
                assert!(!serving);
                assert_eq!(updus, kept, "the U_PDUs kept of the session given up");
                keeper.started();
                for u in &updus {
                    keeper.read(u);
                }
                assert!(copies <= updus.len());
                serving = true;
            }
            Verdict::GoOn { copies } => assert!(serving && copies <= kept.len()),
            Verdict::Copy
            | Verdict::Discard
            | Verdict::OutOfStep
            | Verdict::Refuse(_)
            | Verdict::Malformed(_) => {}
        }
        if serving && head & 0x80 != 0 {
            keeper.ended(head & 0x40 != 0);
            serving = false;
        }
    }
});
