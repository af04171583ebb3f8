//! JNOS XLZW in both sessions: the negotiation of reference section 3.1, the wire bytes of the
//! section 3.3 test vectors inside a session, client against server for every code width, a
//! server that refuses XLZW, and random cuts of the compressed streams.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Instant;

use common::{RejectUnknown, run};
use proptest::prelude::*;
use skywave_compress::{Limits, LzwDecoder, LzwEncoder};
use skywave_smtp::{
    AcceptAll, ClientConfig, ClientEvent, ClientMode, ClientSession, CloseReason, Event,
    OutgoingMessage, RecipientStatus, ServerConfig, ServerSession,
};

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect()
}

fn decode(stream: &[u8]) -> Vec<u8> {
    let mut d = LzwDecoder::new(Limits::default());
    d.feed(stream).unwrap();
    d.finish().unwrap();
    d.take_output()
}

/// The server's replies as JNOS would compress them: one flush per line.
fn compress_lines(bits: u8, text: &[u8]) -> Vec<u8> {
    let mut e = LzwEncoder::new(bits).unwrap();
    let mut out = Vec::new();
    for line in text.split_inclusive(|&b| b == b'\n') {
        e.push(line);
        e.flush();
        out.extend(e.take_output());
    }
    out
}

fn client_config(bits: Option<u8>, mode: ClientMode) -> ClientConfig {
    let mut c = ClientConfig::new("a", mode);
    c.xlzw = bits;
    c
}

fn message(body: &[u8], recipients: &[&str]) -> OutgoingMessage {
    OutgoingMessage {
        reverse_path: "from@ship.example".into(),
        recipients: recipients.iter().map(|r| (*r).to_owned()).collect(),
        body: body.to_vec(),
        eight_bit: false,
        mt_priority: None,
        dsn: Default::default(),
        rcpt_dsn: Vec::new(),
    }
}

/// Reference 3.3, third vector, produced by our client: `HELO a` then `QUIT`, 9 bits, a flush
/// after each, the second transmission opening with the deferred flush code.
#[test]
fn client_reproduces_the_helo_quit_vector_on_the_wire() {
    let mut client =
        ClientSession::new(client_config(Some(9), ClientMode::Pipelining), vec![]).unwrap();
    assert!(client.take_output().is_empty());
    client.feed(b"220 jnos SMTP ready\r\n");
    assert_eq!(client.take_output(), b"XLZW 9 0\r\n");
    client.feed(b"250 9 0 LZW Ok\r\n");
    assert_eq!(client.compression(), Some(9));
    assert_eq!(
        client.take_output(),
        hex("03 09 48 8a 30 79 02 22 4c 03 05")
    );
    client.feed(&compress_lines(9, b"250 jnos, Share and Enjoy!\r\n"));
    assert_eq!(client.take_output(), hex("01 a3 54 49 42 05 61"));
    // QUIT without waiting for the 221, as JNOS does.
    assert!(client.is_finished());
    assert_eq!(
        client.poll_event(),
        Some(ClientEvent::Finished { error: None })
    );
    assert_eq!(client.plain_bytes_written(), 10 + 8 + 6);
}

/// The same vector into our server, in one piece and byte by byte: it decodes HELO and QUIT and
/// answers with one flushed transmission per reply line.
#[test]
fn server_decodes_the_helo_quit_vector() {
    let mut input = b"XLZW 9 0\r\n".to_vec();
    input.extend(hex("03 09 48 8a 30 79 02 22 4c 03 05"));
    input.extend(hex("01 a3 54 49 42 05 61"));
    for piece in [input.len(), 1] {
        let now = Instant::now();
        let mut server = ServerSession::new(ServerConfig::new("mx"), AcceptAll, now);
        let mut out = Vec::new();
        for chunk in input.chunks(piece) {
            server.feed(now, chunk);
            out.extend(server.take_output());
        }
        let greeting = b"220 mx ESMTP skywave\r\n250 9 0 LZW Ok\r\n";
        assert_eq!(&out[..greeting.len()], greeting);
        let replies = b"250 mx\r\n221 2.0.0 mx closing connection\r\n";
        assert_eq!(&out[greeting.len()..], &compress_lines(9, replies)[..]);
        assert_eq!(decode(&out[greeting.len()..]), replies);
        assert_eq!(server.poll_event(), Some(Event::Close(CloseReason::Quit)));
        assert_eq!(server.compression(), Some(9));
    }
}

/// Reference 3.3, first and second vectors as the opening transmission of a client stream: the
/// server decodes them (an unknown command, then a MAIL) and goes on with the same dictionary.
#[test]
fn server_decodes_the_codec_vectors_as_session_input() {
    for (bits, text, vector, rest, expect) in [
        (
            12u8,
            &b"TOBEORNOTTOBEORTOBEORNOT"[..],
            "03 0c 54 9e 08 29 f2 44 8a 93 27 54 04 12 34 b8 b0 e0 c1 84",
            &b"\r\nHELO TOBEORNOT\r\nQUIT\r\n"[..],
            &b"500 5.5.2 Command unrecognized\r\n250 mx\r\n221 2.0.0 mx closing connection\r\n"[..],
        ),
        (
            16,
            &b"aaaaaaaaaa"[..],
            "03 10 61 04 0e 24 18",
            &b" x\r\nQUIT\r\n"[..],
            &b"500 5.5.2 Command unrecognized\r\n221 2.0.0 mx closing connection\r\n"[..],
        ),
    ] {
        let mut e = LzwEncoder::new(bits).unwrap();
        e.push(text);
        e.flush();
        let first = e.take_output();
        assert_eq!(first, hex(vector));
        e.push(rest);
        e.flush();
        let second = e.take_output();
        let now = Instant::now();
        let mut server = ServerSession::new(ServerConfig::new("mx"), AcceptAll, now);
        server.feed(now, format!("XLZW {bits} 1\r\n").as_bytes());
        let out = server.take_output();
        assert!(out.ends_with(format!("250 {bits} 1 LZW Ok\r\n").as_bytes()));
        server.feed(now, &first);
        assert!(server.take_output().is_empty(), "no LF yet, no reply");
        server.feed(now, &second);
        assert_eq!(decode(&server.take_output()), expect);
        assert!(server.is_closed());
    }
}

#[test]
fn invalid_or_refused_xlzw_gets_500_and_the_session_stays_plain() {
    let now = Instant::now();
    let mut server = ServerSession::new(ServerConfig::new("mx"), AcceptAll, now);
    server.take_output();
    for bad in [
        "XLZW 8 0",
        "XLZW 17 0",
        "XLZW 9 2",
        "XLZW 9 -1",
        "XLZW",
        "XLZW 9 x",
        "XLZW a b",
    ] {
        server.feed(now, format!("{bad}\r\n").as_bytes());
        let out = String::from_utf8(server.take_output()).unwrap();
        assert!(out.starts_with("500 "), "{bad}: {out}");
    }
    server.feed(now, b"NOOP\r\n");
    assert_eq!(server.take_output(), b"250 2.0.0 Ok\r\n");
    assert_eq!(server.compression(), None);
    // A JNOS-style trailing word is ignored; the verb is case-insensitive.
    server.feed(now, b"xLzW 10 0 extra\r\n");
    assert_eq!(server.take_output(), b"250 10 0 LZW Ok\r\n");
    assert_eq!(server.compression(), Some(10));

    let mut config = ServerConfig::new("mx");
    config.xlzw = false;
    let mut server = ServerSession::new(config, AcceptAll, now);
    server.take_output();
    server.feed(now, b"XLZW 9 0\r\nNOOP\r\n");
    assert_eq!(
        server.take_output(),
        b"500 5.5.2 Command unrecognized\r\n250 2.0.0 Ok\r\n"
    );

    // HMTP-66: the client could not see the reply before compressing.
    let mut server = ServerSession::new(ServerConfig::hmtp("mx"), AcceptAll, now);
    server.feed(now, b"XLZW 9 0\r\nQUIT\r\n");
    assert!(
        server
            .take_output()
            .starts_with(b"500 5.5.2 Command unrecognized\r\n")
    );
}

/// JNOS reads XLZW's arguments with sscanf("%d %d"): a client that sends only the width gets
/// the default mode 0, and so it does here, with a compressed session that works both ways.
#[test]
fn xlzw_without_a_mode_is_mode_0_as_in_jnos() {
    let now = Instant::now();
    let mut server = ServerSession::new(ServerConfig::new("mx"), AcceptAll, now);
    server.take_output();
    let mut input = b"XLZW 16\r\n".to_vec();
    input.extend(compress_lines(16, b"NOOP\r\nQUIT\r\n"));
    server.feed(now, &input);
    let out = server.take_output();
    let ok = b"250 16 0 LZW Ok\r\n";
    assert_eq!(&out[..ok.len()], ok);
    assert_eq!(server.compression(), Some(16));
    assert_eq!(
        decode(&out[ok.len()..]),
        b"250 2.0.0 Ok\r\n221 2.0.0 mx closing connection\r\n"
    );
    assert_eq!(server.poll_event(), Some(Event::Close(CloseReason::Quit)));
}

#[test]
fn corrupt_compressed_input_closes_the_session() {
    let now = Instant::now();
    let mut server = ServerSession::new(ServerConfig::new("mx"), AcceptAll, now);
    server.feed(now, b"XLZW 9 0\r\n");
    server.take_output();
    // Wrong version byte.
    server.feed(now, &[0x04, 0x09, 0x41]);
    let out = server.take_output();
    assert!(
        decode(&out).starts_with(b"421 4.5.0 "),
        "{:?}",
        String::from_utf8_lossy(&decode(&out))
    );
    assert_eq!(
        server.poll_event(),
        Some(Event::Close(CloseReason::CompressionError))
    );

    // A client that gets a broken reply stream ends with a compression error.
    let mut client =
        ClientSession::new(client_config(Some(9), ClientMode::Pipelining), vec![]).unwrap();
    client.feed(b"220 x\r\n250 9 0 LZW Ok\r\n\x07\x09");
    assert!(client.is_finished());
    assert!(matches!(
        client.poll_event(),
        Some(ClientEvent::Finished {
            error: Some(skywave_smtp::ClientError::Compression(_))
        })
    ));
}

#[test]
fn starttls_is_not_offered_under_xlzw() {
    let now = Instant::now();
    let mut config = ServerConfig::new("mx");
    config.starttls = true;
    let mut server = ServerSession::new(config, AcceptAll, now);
    server.feed(now, b"EHLO a\r\n");
    assert!(
        String::from_utf8(server.take_output())
            .unwrap()
            .contains("STARTTLS")
    );
    server.feed(now, b"XLZW 9 0\r\n");
    server.take_output();
    let mut e = LzwEncoder::new(9).unwrap();
    e.push(b"EHLO a\r\nSTARTTLS\r\n");
    e.flush();
    server.feed(now, &e.take_output());
    let text = String::from_utf8(decode(&server.take_output())).unwrap();
    assert!(!text.contains("STARTTLS"), "{text}");
    assert!(
        text.ends_with("502 5.5.1 Command not implemented\r\n"),
        "{text}"
    );
}

/// A server echoing other values than ours: JNOS falls back to compact mode at 9 bits.
#[test]
fn a_differing_echo_means_nine_bits() {
    let mut client = ClientSession::new(
        client_config(Some(16), ClientMode::Lockstep),
        vec![message(b"x\r\n", &["to@shore.example"])],
    )
    .unwrap();
    client.feed(b"220 x\r\n");
    assert_eq!(client.take_output(), b"XLZW 16 0\r\n");
    client.feed(b"250 12 1 LZW Ok\r\n");
    assert_eq!(client.compression(), Some(9));
    let out = client.take_output();
    assert_eq!(&out[..2], &[0x03, 0x09]);
    // HELO, MAIL, RCPT and DATA in one burst, as JNOS batches.
    let mut d = LzwDecoder::new(Limits::default());
    d.feed(&out).unwrap();
    assert_eq!(
        d.take_output(),
        b"HELO a\r\nMAIL FROM:<from@ship.example>\r\nRCPT TO:<to@shore.example>\r\nDATA\r\n"
    );
}

/// Pseudo-random printable text, long enough to fill and clear the dictionary many times.
fn long_body(seed: u64, lines: usize) -> Vec<u8> {
    let mut x = seed | 1;
    let mut body = Vec::new();
    for _ in 0..lines {
        let len = (x % 70) as usize;
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let c = b" .abcdefghijklmnopqrstuvwxyz0123456789"[(x % 38) as usize];
            body.push(c);
        }
        body.extend_from_slice(b"\r\n");
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
    }
    body
}

#[test]
fn client_and_server_agree_for_every_width() {
    let messages = vec![
        message(
            b"Hello over HF\r\n.leading dot\r\n",
            &["a@shore", "unknown@shore"],
        ),
        message(&long_body(7, 3000), &["b@shore"]),
        message(b"only unknown\r\n", &["unknown2@shore"]),
        message(&long_body(11, 500), &["c@shore", "d@shore"]),
    ];
    for bits in 9..=16u8 {
        for mode in [ClientMode::Lockstep, ClientMode::Pipelining] {
            let client =
                ClientSession::new(client_config(Some(bits), mode), messages.clone()).unwrap();
            let server = ServerSession::new(ServerConfig::new("mx"), RejectUnknown, Instant::now());
            let r = run(client, server, &[0]);
            assert_eq!(r.error, None, "{bits} {mode:?}");
            let bodies: Vec<&[u8]> = r.delivered.iter().map(|(_, b)| &b[..]).collect();
            assert_eq!(
                bodies,
                vec![&messages[0].body[..], &messages[1].body, &messages[3].body],
                "{bits} {mode:?}"
            );
            assert_eq!(r.delivered[0].0.recipients, vec!["a@shore".to_owned()]);
            assert_eq!(r.delivered[0].0.helo, "a");
            let statuses: Vec<bool> = r
                .outcomes
                .iter()
                .flat_map(|o| o.recipients.iter())
                .map(|rc| matches!(rc.status, RecipientStatus::Delivered(_)))
                .collect();
            assert_eq!(statuses, vec![true, false, true, false, true, true]);
            // Greeting, XLZW reply, then one server turn per message and one for HELO.
            assert!(
                r.client_turns <= 2 + 2 * messages.len() + 1,
                "{}",
                r.client_turns
            );
        }
    }
}

/// Server mode 1 ("fast") gives the same wire bytes as mode 0: only the echo differs.
#[test]
fn server_modes_zero_and_one_send_the_same_bytes() {
    let mut outs = Vec::new();
    for mode in [0, 1] {
        let now = Instant::now();
        let mut server = ServerSession::new(ServerConfig::new("mx"), AcceptAll, now);
        server.take_output();
        server.feed(now, format!("XLZW 13 {mode}\r\n").as_bytes());
        assert_eq!(
            server.take_output(),
            format!("250 13 {mode} LZW Ok\r\n").as_bytes()
        );
        let mut e = LzwEncoder::new(13).unwrap();
        e.push(b"EHLO a\r\nNOOP\r\nQUIT\r\n");
        e.flush();
        server.feed(now, &e.take_output());
        outs.push(server.take_output());
    }
    assert_eq!(outs[0], outs[1]);
}

#[test]
fn a_server_refusing_xlzw_gets_plain_esmtp() {
    let mut config = ServerConfig::new("mx");
    config.xlzw = false;
    let messages = vec![
        message(b"one\r\n", &["a@shore"]),
        message(b"two\r\n", &["b@shore", "unknown@shore"]),
    ];
    let client = ClientSession::new(
        client_config(Some(16), ClientMode::Pipelining),
        messages.clone(),
    )
    .unwrap();
    let server = ServerSession::new(config, RejectUnknown, Instant::now());
    let r = run(client, server, &[0]);
    assert_eq!(r.error, None);
    assert_eq!(r.delivered.len(), 2);
    assert_eq!(r.delivered[1].1, b"two\r\n");
    // EHLO after the refusal, so the server saw ESMTP.
    assert_eq!(r.delivered[0].0.protocol, skywave_smtp::Protocol::Esmtp);
}

fn body_strategy() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec("[.a-z \\t]{0,40}", 0..30),
        any::<bool>(),
    )
        .prop_map(|(lines, final_crlf)| {
            let mut body = lines.join("\r\n");
            if final_crlf && !body.is_empty() {
                body.push_str("\r\n");
            }
            body.into_bytes()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_messages_through_xlzw_with_random_cuts(
        bits in 9u8..=16,
        lockstep in any::<bool>(),
        messages in prop::collection::vec(
            (body_strategy(), prop::collection::vec(any::<bool>(), 1..4)),
            0..5,
        ),
        sizes in prop::collection::vec(0usize..20, 0..8),
    ) {
        let outgoing: Vec<OutgoingMessage> = messages
            .iter()
            .map(|(body, known)| OutgoingMessage {
                reverse_path: "a@x".into(),
                recipients: known
                    .iter()
                    .enumerate()
                    .map(|(i, k)| if *k { format!("r{i}@y") } else { format!("unknown{i}@y") })
                    .collect(),
                body: body.clone(),
                eight_bit: false,
                mt_priority: None,
                dsn: Default::default(),
                rcpt_dsn: Vec::new(),
            })
            .collect();
        let mode = if lockstep { ClientMode::Lockstep } else { ClientMode::Pipelining };
        let client = ClientSession::new(client_config(Some(bits), mode), outgoing).unwrap();
        let server = ServerSession::new(ServerConfig::new("mx"), RejectUnknown, Instant::now());
        let r = run(client, server, &sizes);
        prop_assert_eq!(r.error, None);
        let expected: Vec<Vec<u8>> = messages
            .iter()
            .filter(|(_, known)| known.iter().any(|k| *k))
            .map(|(body, _)| {
                let mut b = body.clone();
                if !b.is_empty() && !b.ends_with(b"\r\n") {
                    b.extend_from_slice(b"\r\n");
                }
                b
            })
            .collect();
        let delivered: Vec<Vec<u8>> = r.delivered.iter().map(|(_, b)| b.clone()).collect();
        prop_assert_eq!(delivered, expected);
        prop_assert_eq!(r.outcomes.len(), messages.len());
        for (outcome, (_, known)) in r.outcomes.iter().zip(&messages) {
            for (rc, k) in outcome.recipients.iter().zip(known) {
                let ok = matches!(rc.status, RecipientStatus::Delivered(_));
                prop_assert_eq!(ok, *k, "{:?}", rc);
            }
        }
    }
}

/// Compressed input behind a message waits, still compressed, until the owner has spooled the
/// message; then decoding resumes where it stopped.
#[test]
fn input_behind_a_message_waits_for_the_spool() {
    let now = Instant::now();
    let mut server = ServerSession::new(ServerConfig::new("mx"), AcceptAll, now);
    server.take_output();
    let body = long_body(3, 100);
    let mut text = b"EHLO a\r\n".to_vec();
    for _ in 0..2 {
        text.extend_from_slice(b"MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\n");
        // Dot-stuffed and ended with the final dot.
        text.extend_from_slice(&skywave_smtp::dot_stuff(&body));
    }
    text.extend_from_slice(b"QUIT\r\n");
    let mut e = LzwEncoder::new(11).unwrap();
    e.push(&text);
    e.flush();
    let mut input = b"XLZW 11 0\r\n".to_vec();
    input.extend(e.take_output());
    server.feed(now, &input);
    let mut wire = server.take_output();
    for n in 1..=2 {
        let Some(Event::Message { body: got, .. }) = server.poll_event() else {
            panic!("message {n} expected");
        };
        assert!(got == body, "message {n} differs");
        assert!(!server.wants_input());
        assert_eq!(server.poll_event(), None);
        server.message_accepted(&format!("Q{n}")).unwrap();
        wire.extend(server.take_output());
    }
    assert_eq!(server.poll_event(), Some(Event::Close(CloseReason::Quit)));
    let plain = String::from_utf8(decode(&wire["250 11 0 LZW Ok\r\n".len()..])).unwrap();
    assert!(plain.starts_with("250-mx\r\n"), "{plain}");
    assert!(
        plain.ends_with(
            "250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n354 End data with <CR><LF>.<CR><LF>\r\n\
250 2.0.0 Ok: queued as Q2\r\n221 2.0.0 mx closing connection\r\n"
        ),
        "{plain}"
    );
}
