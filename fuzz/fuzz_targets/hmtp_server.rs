//! HMTP server: arbitrary bytes as U_PDUs into a server with a permissive policy. The first byte
//! picks the U_PDU length and whether the rest goes in raw, or as SMTP text compressed with LZW
//! or deflate first (so that the session logic behind each decoder is reached too). Messages are
//! alternately accepted and rejected; the session is then timed out. Nothing may panic; every
//! reply U_PDU must fit the MTU.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use skywave_compress::{Limits, Scheme, StreamEncoder};
use skywave_hmtp::{DedupCache, HmtpServer, ServerEvent, ServerSettings};
use skywave_smtp::{AcceptAll, Reply};

const MTU: usize = 200;

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(ctl & 0x3f) + 1;
    let stream = match ctl >> 6 {
        1 | 2 => {
            let scheme = if ctl >> 6 == 1 {
                Scheme::Lzw(12)
            } else {
                Scheme::Deflate
            };
            let Ok(mut enc) = StreamEncoder::for_scheme(scheme) else {
                return;
            };
            if enc.push(rest).is_err() || enc.flush().is_err() {
                return;
            }
            enc.take_output()
        }
        _ => rest.to_vec(),
    };
    let now = Instant::now();
    let mut settings = ServerSettings::new("fuzz.example", MTU);
    settings.limits = Limits::single(1 << 20);
    settings.smtp.max_message_size = 1 << 16;
    settings.smtp.max_input_buffer = 1 << 20;
    let Ok(mut server) = HmtpServer::new(settings, AcceptAll, now) else {
        return;
    };
    let mut dedup = DedupCache::new(Duration::from_secs(60), 64);
    let mut n = 0u32;
    let mut drain = |server: &mut HmtpServer<AcceptAll>, dedup: &mut DedupCache| {
        while let Some(ev) = server.poll_event() {
            if let ServerEvent::Message(m) = ev {
                n += 1;
                let _ = if n % 2 == 0 {
                    server.accepted(m.ticket, "Q", now, dedup)
                } else {
                    server.rejected(m.ticket, Reply::plain(451, "later"), now, dedup)
                };
            }
        }
        while let Some(t) = server.take_transmission() {
            assert!(t.iter().all(|u| u.len() <= MTU));
        }
    };
    for updu in stream.chunks(chunk) {
        server.receive(now, updu, &mut dedup);
        drain(&mut server, &mut dedup);
    }
    if let Some(deadline) = server.poll_timeout() {
        server.handle_timeout(deadline, &mut dedup);
        drain(&mut server, &mut dedup);
    }
});
