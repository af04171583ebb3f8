//! Fuzz a P_MUL receiver fed a sequence of PDUs and timer ticks: no input may panic, events and
//! acks stay bounded, and every ack it sends decodes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_pmul::pdu::{Pdu, checksum};
use skywave_pmul::receiver::{Receiver, ReceiverConfig};

fuzz_target!(|data: &[u8]| {
    let mut c = ReceiverConfig::new(0x0a00_0002);
    c.max_message_bytes = 1 << 16;
    c.max_assemblies = 8;
    c.max_remembered = 16;
    let mut rx = Receiver::new(c);
    let mut now = 1_000_000u64;
    let mut rest = data;
    // Each record: 1 byte of control (bit 7: tick the clock, bit 6: toggle EMCON, low bits: time
    // step), 1 byte length, then that many bytes of PDU (length and checksum fixed up).
    while rest.len() >= 2 {
        let ctl = rest[0];
        let n = usize::from(rest[1]).min(rest.len() - 2);
        let mut pdu = rest[2..2 + n].to_vec();
        rest = &rest[2 + n..];
        if pdu.len() >= 8 {
            let len = pdu.len() as u16;
            pdu[0..2].copy_from_slice(&len.to_be_bytes());
            let c = checksum(&pdu);
            pdu[6..8].copy_from_slice(&c.to_be_bytes());
        }
        let _ = rx.handle_pdu(&pdu, now);
        now += u64::from(ctl & 0x3f) * 1000;
        if ctl & 0x40 != 0 {
            let on = !rx.emcon();
            rx.set_emcon(on, now);
        }
        if ctl & 0x80 != 0 {
            rx.handle_timeout(now);
        }
        while rx.poll_event().is_some() {}
        while let Some(ack) = rx.poll_transmit(now) {
            assert!(matches!(Pdu::decode(&ack), Ok(Pdu::Ack(_))));
        }
        assert!(rx.in_progress() <= 8);
    }
});
