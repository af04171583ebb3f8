//! CFTP sessions. Even first byte: arbitrary U_PDUs (split from the input at 0xFF) into a sender
//! with files in flight and a receiver session, with time steps and spool decisions taken from
//! the input; nothing may panic and memory stays bounded. Odd first byte: messages from the input
//! sent over a link that drops the U_PDUs a 64-bit mask from the input says: every message is
//! delivered at most once, byte-identical, and acknowledged only if delivered.
#![no_main]

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use skywave_hmtp::cftp::{RcopHeader, ReceiverLimits};
use skywave_hmtp::{
    AckOutcome, BatchMessage, CftpReceiverEvent, CftpReceiverSession, CftpReceiverSettings,
    CftpSender, CftpSenderSettings, CftpTicket, DedupCache, Disposition, cftp_message_id,
};

const LIMITS: ReceiverLimits = ReceiverLimits {
    max_file: 1 << 16,
    max_message: 1 << 16,
    max_files_in_progress: 8,
    max_bundle: 16,
};

fn message(i: usize, body: &[u8]) -> BatchMessage {
    // CRLF line ends, as the spool hands messages over.
    let mut text = Vec::new();
    for line in body.split(|&b| b == b'\n') {
        text.extend(line.iter().copied().filter(|&b| b != b'\r' && b != 0));
        text.extend_from_slice(b"\r\n");
    }
    BatchMessage {
        id: format!("f-{i}"),
        reverse_path: format!("s{i}@x"),
        recipients: vec![format!("r{i}@y")],
        body: text,
        eight_bit: true,
        dsn: Default::default(),
        rcpt_dsn: Vec::new(),
    }
}

fn garbage(data: &[u8]) {
    let t0 = Instant::now();
    let mut now = t0;
    let Ok(mut tx) = CftpSender::new(CftpSenderSettings::skywave(64, 2)) else {
        return;
    };
    for i in 0..3 {
        let _ = tx.push(message(i, b"Subject: x\n\nhello"));
    }
    let mut rx = CftpReceiverSession::new(CftpReceiverSettings {
        limits: LIMITS,
        partial_timeout: Duration::from_secs(30),
    });
    let mut dedup = DedupCache::new(Duration::from_secs(3600), 64);
    let mut held: Vec<CftpTicket> = Vec::new();
    for chunk in data.split(|&b| b == 0xFF) {
        while tx.poll_transmit(now).is_some() {}
        let control = chunk.first().copied().unwrap_or(0);
        now += Duration::from_secs(u64::from(control & 0x3F));
        if control & 0x40 != 0 {
            tx.handle_timeout(now);
            rx.handle_timeout(now);
        }
        if tx.receive(now, chunk) == AckOutcome::NotAnAck {
            rx.receive(now, chunk, &mut dedup);
        }
        while let Some(event) = rx.poll_event() {
            if let CftpReceiverEvent::File(file) = event {
                held.push(file.ticket);
            }
        }
        if control & 0x80 != 0 {
            if let Some(ticket) = held.pop() {
                let _ = match control % 3 {
                    0 => rx.accepted(ticket, now, &mut dedup),
                    1 => rx.bounced(ticket, now, &mut dedup),
                    _ => rx.deferred(ticket, now, &mut dedup),
                };
            }
        }
        while rx.poll_transmit().is_some() {}
        while tx.poll_outcome().is_some() {}
        assert!(rx.in_progress() <= LIMITS.max_files_in_progress);
        assert!(tx.in_flight() <= 2);
    }
}

fn link(mode: u8, data: &[u8]) {
    let Some((head, rest)) = data.split_first_chunk::<9>() else {
        return;
    };
    let mut mask_bytes = [0u8; 8];
    mask_bytes.copy_from_slice(&head[..8]);
    let mask = u64::from_le_bytes(mask_bytes);
    let mtu = 8 + usize::from(head[8]);
    let in_flight = 1 + usize::from((mode >> 1) % 4);
    let messages: Vec<BatchMessage> = rest
        .split(|&b| b == 0xFE)
        .take(4)
        .enumerate()
        .map(|(i, body)| message(i, body))
        .collect();
    // Bundles (several messages per file) when bit 3 of the mode is set, else one per file.
    let settings = CftpSenderSettings {
        max_transmissions: 3,
        ack_timeout: Duration::from_secs(50),
        max_bundle: if mode & 0x08 != 0 { 4 } else { 1 },
        // With bit 4, the node confirms each segment that reaches the receiver (a lost one is
        // never confirmed, and its file waits out the delivery timeout).
        delivery_timeout: (mode & 0x10 != 0).then_some(Duration::from_secs(200)),
        ..CftpSenderSettings::skywave(mtu, in_flight)
    };
    let Ok(mut tx) = CftpSender::new(settings) else {
        return;
    };
    for m in &messages {
        if tx.push(m.clone()).is_err() {
            return;
        }
    }
    let mut rx = CftpReceiverSession::new(CftpReceiverSettings::default());
    let mut dedup = DedupCache::new(Duration::from_secs(3600), 64);
    let t0 = Instant::now();
    let mut now = t0;
    let mut wire: BTreeMap<(Instant, u64), (bool, Vec<u8>)> = BTreeMap::new();
    let mut sent = 0u64;
    let mut delivered: HashMap<String, Vec<Vec<u8>>> = HashMap::new();
    let mut outcomes: HashMap<String, Disposition> = HashMap::new();
    for _ in 0..200_000 {
        let mut busy = false;
        let mut out = Vec::new();
        while let Some(u) = tx.poll_transmit(now) {
            out.push((true, u));
        }
        while let Some(u) = rx.poll_transmit() {
            out.push((false, u));
        }
        for (data, u) in out {
            busy = true;
            let drop = sent < 64 && mask & (1 << sent) != 0;
            sent += 1;
            if !drop {
                wire.insert((now + Duration::from_secs(1), sent), (data, u));
            }
        }
        while let Some(entry) = wire.first_entry() {
            if entry.key().0 > now {
                break;
            }
            busy = true;
            let (data, u) = entry.remove();
            if data {
                if let Ok((h, _)) = RcopHeader::decode(&u) {
                    tx.delivered(now, h.updu_id, h.segment);
                }
                rx.receive(now, &u, &mut dedup);
            } else {
                let _ = tx.receive(now, &u);
            }
        }
        while let Some(event) = rx.poll_event() {
            if let CftpReceiverEvent::File(file) = event {
                delivered
                    .entry(file.mail.message_id.clone())
                    .or_default()
                    .push(file.mail.message.clone());
                let _ = rx.accepted(file.ticket, now, &mut dedup);
            }
        }
        while let Some(r) = tx.poll_outcome() {
            outcomes.insert(r.id, r.recipients[0].1.clone());
        }
        if busy {
            continue;
        }
        let next = [wire.keys().next().map(|k| k.0), tx.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) if t <= now => tx.handle_timeout(now),
            Some(t) => now = t,
            None => break,
        }
    }
    assert!(tx.is_idle(), "sender did not settle");
    for m in &messages {
        let copies = delivered
            .get(&cftp_message_id(&m.id))
            .map_or(&[][..], Vec::as_slice);
        assert!(copies.len() <= 1, "delivered twice");
        if let Some(body) = copies.first() {
            assert_eq!(body, &m.body, "body changed");
        }
        if matches!(outcomes.get(&m.id), Some(Disposition::Delivered(_))) {
            assert_eq!(copies.len(), 1, "acknowledged but not delivered");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        garbage(rest);
    } else {
        link(mode, rest);
    }
});
