//! HMTP client: arbitrary reply streams into a client that sent a batch of two messages. The
//! first byte picks the scheme the client speaks (none, LZW 16, deflate), the U_PDU length and
//! what the peer sends: raw bytes; reply text built from tokens (reply lines, `XSUM` tags that
//! name another sum or are malformed) compressed by a real encoder so that the reply logic
//! behind each decoder is reached; or the real server's replies to another session (stale),
//! then maybe to this one. The session is then closed.
//!
//! Checks: nothing panics; the outcome has every message and recipient of the batch; a stale
//! stream is never read as this session's; and the real server's replies to this session, once
//! whole, deliver both messages.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use skywave_compress::{Scheme, StreamEncoder};
use skywave_hmtp::{
    BatchMessage, ClientSettings, Compression, DedupCache, Disposition, HmtpClient, HmtpServer,
    ServerEvent, ServerSettings, SessionEnd,
};
use skywave_smtp::AcceptAll;

const MTU: usize = 256;

fn batch(tag: u8) -> Vec<BatchMessage> {
    (0..2u8)
        .map(|i| BatchMessage {
            id: format!("m{i}"),
            reverse_path: format!("s{i}@ship.example"),
            recipients: vec![format!("r{i}@shore.example"), "ops@shore.example".into()],
            body: format!("Subject: {tag}/{i}\r\n\r\nreport {tag} {i}\r\n").into_bytes(),
            eight_bit: false,
            dsn: Default::default(),
            rcpt_dsn: Vec::new(),
        })
        .collect()
}

fn client(compression: Compression, tag: u8) -> Option<(HmtpClient, Vec<Vec<u8>>)> {
    let mut c = HmtpClient::new(
        ClientSettings::new("ship.example", MTU, compression),
        batch(tag),
    )
    .ok()?;
    let submission = c.transmission();
    Some((c, submission))
}

/// The real server's replies to a submission, U_PDU by U_PDU.
fn served(submission: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let now = Instant::now();
    let Ok(mut server) = HmtpServer::new(ServerSettings::new("shore.example", MTU), AcceptAll, now)
    else {
        return Vec::new();
    };
    let mut dedup = DedupCache::new(Duration::from_secs(60), 64);
    let mut out = Vec::new();
    for u in submission {
        server.receive(now, u, &mut dedup);
        while let Some(ev) = server.poll_event() {
            if let ServerEvent::Message(m) = ev {
                let _ = server.accepted(m.ticket, "Q", now, &mut dedup);
            }
        }
        while let Some(t) = server.take_transmission() {
            out.extend(t);
        }
    }
    out
}

const TOKENS: [&[u8]; 12] = [
    b"250-shore.example\r\n250-XSUM\r\n250 HELP\r\n",
    b"250 2.1.0 Ok\r\n",
    b"250 2.1.5 Ok\r\n",
    b"354 go ahead\r\n",
    b"250 2.0.0 Ok: queued as Q\r\n",
    b"550 5.1.1 No such user\r\n",
    b"421 4.3.0 closing connection",
    b"221 2.0.0 closing connection",
    b" XSUM=12:0123456789abcdef",
    b" XSUM=99999999999999999999:",
    b"\r\n",
    b"450 4.2.0 later\r\n",
];

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let compression = match ctl % 3 {
        0 => Compression::None,
        1 => Compression::Lzw(16),
        _ => Compression::Deflate,
    };
    let chunk = usize::from((ctl >> 2) & 0x1f) * 8 + 1;
    let Some((mut c, submission)) = client(compression, 1) else {
        return;
    };
    let scheme = match compression {
        Compression::None => None,
        Compression::Lzw(bits) => Some(Scheme::Lzw(bits)),
        Compression::Deflate => Some(Scheme::Deflate),
    };
    let whole_stream = ctl >> 7 == 1;
    let updus: Vec<Vec<u8>> = if whole_stream && rest.first().is_some_and(|b| b % 2 == 0) {
        // Another session's replies (stale), then maybe this one's own.
        let Some((_, other)) = client(compression, 2) else {
            return;
        };
        let mut u = served(&other);
        if rest.get(1).is_some_and(|b| b % 2 == 0) {
            u.extend(served(&submission));
        }
        u
    } else if whole_stream {
        // Reply text from tokens (replies, XSUM tags that prove nothing), compressed.
        let mut text = Vec::new();
        for &b in rest {
            text.extend_from_slice(TOKENS[usize::from(b) % TOKENS.len()]);
        }
        match scheme {
            None => text.chunks(chunk).map(<[u8]>::to_vec).collect(),
            Some(s) => {
                let Ok(mut enc) = StreamEncoder::for_scheme(s) else {
                    return;
                };
                if enc.push(&text).is_err() || enc.flush().is_err() {
                    return;
                }
                enc.take_output()
                    .chunks(chunk)
                    .map(<[u8]>::to_vec)
                    .collect()
            }
        }
    } else {
        rest.chunks(chunk).map(<[u8]>::to_vec).collect()
    };
    let stale_then_own = whole_stream
        && rest.first().is_some_and(|b| b % 2 == 0)
        && rest.get(1).is_some_and(|b| b % 2 == 0);
    let stale_only = whole_stream
        && rest.first().is_some_and(|b| b % 2 == 0)
        && !rest.get(1).is_some_and(|b| b % 2 == 0);
    for u in &updus {
        c.receive(u);
    }
    c.close();
    let Some(o) = c.outcome() else {
        panic!("a closed session has an outcome");
    };
    assert_eq!(o.messages.len(), 2);
    for (i, m) in o.messages.iter().enumerate() {
        assert_eq!(m.id, format!("m{i}"));
        let rcpts: Vec<&str> = m.recipients.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(
            rcpts,
            [format!("r{i}@shore.example").as_str(), "ops@shore.example"]
        );
    }
    let delivered = |o: &skywave_hmtp::BatchOutcome| {
        o.messages.iter().all(|m| {
            m.recipients
                .iter()
                .all(|(_, d)| matches!(d, Disposition::Delivered(_)))
        })
    };
    if stale_only {
        // Another session's replies never deliver this one's messages.
        assert!(
            o.messages.iter().all(|m| m
                .recipients
                .iter()
                .all(|(_, d)| *d == Disposition::NoAnswer)),
            "{o:?}"
        );
        assert_eq!(o.stale_reply_streams, 1);
    }
    if stale_then_own && !served(&submission).is_empty() {
        assert_eq!(o.end, SessionEnd::Completed, "{o:?}");
        assert!(delivered(o), "{o:?}");
    }
});
