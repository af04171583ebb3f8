//! HMTP client and server against each other in memory: plain, LZW and deflate streams, batches,
//! refusals, 421, de-duplication, standard clients, U_PDU sizes and crossed sessions.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use skywave_compress::corpus::message_of_size;
use skywave_hmtp::{
    Arbiter, BatchMessage, ClientSettings, Compression, DedupCache, Disposition, HmtpClient,
    HmtpServer, IncomingAction, ServeMode, ServerEnd, ServerEvent, ServerSettings, SessionEnd,
    StreamStart, classify_stream_start,
    resume::{self, Keeper, Verdict as ResumeVerdict},
};
use skywave_smtp::{
    AcceptAll, ClientConfig, ClientEvent, ClientMode, ClientSession, CloseReason, EnhancedCode,
    Envelope, OutgoingMessage, Policy, RecipientStatus, Reply, SessionInfo, Verdict, dot_stuff,
};

const SCHEMES: [Compression; 3] = [
    Compression::None,
    Compression::Lzw(16),
    Compression::Deflate,
];

/// Refuses the listed recipients with 550 5.1.1.
#[derive(Debug, Default, Clone)]
struct Refuse(Vec<String>);

impl Policy for Refuse {
    fn rcpt_to(&mut self, _: &SessionInfo, _: &Envelope, recipient: &str) -> Verdict {
        if self.0.iter().any(|r| r == recipient) {
            Verdict::Reject(Reply::new(550, EnhancedCode::new(5, 1, 1), "No such user"))
        } else {
            Verdict::Accept
        }
    }
}

/// The receiving gateway: a spool (a list) and the de-duplication cache.
struct Owner {
    dedup: DedupCache,
    spooled: Vec<(Envelope, Vec<u8>)>,
    duplicates: usize,
    closed: Vec<ServerEnd>,
}

impl Owner {
    fn new() -> Self {
        Self {
            dedup: DedupCache::new(Duration::from_secs(3600), 10_000),
            spooled: Vec::new(),
            duplicates: 0,
            closed: Vec::new(),
        }
    }

    /// Drains the server's events (spooling every message at once) and returns its
    /// transmissions.
    fn drain<P: Policy>(&mut self, server: &mut HmtpServer<P>, now: Instant) -> Vec<Vec<Vec<u8>>> {
        while let Some(ev) = server.poll_event() {
            match ev {
                ServerEvent::Message(m) => {
                    let id = format!("Q{}", self.spooled.len());
                    self.spooled.push((m.envelope, m.body));
                    server
                        .accepted(m.ticket, &id, now, &mut self.dedup)
                        .unwrap();
                }
                ServerEvent::Duplicate { .. } => self.duplicates += 1,
                ServerEvent::Closed(end) => self.closed.push(end),
            }
        }
        let mut out = Vec::new();
        while let Some(t) = server.take_transmission() {
            out.push(t);
        }
        out
    }

    fn serve<P: Policy>(
        &mut self,
        server: &mut HmtpServer<P>,
        updus: &[Vec<u8>],
        now: Instant,
    ) -> Vec<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        for u in updus {
            server.receive(now, u, &mut self.dedup);
            out.extend(self.drain(server, now));
        }
        out
    }
}

fn messages(n: usize, seed: u64) -> Vec<BatchMessage> {
    (0..n)
        .map(|i| {
            let size = 300 + (i * 977 + seed as usize * 131) % 4000;
            BatchMessage {
                id: format!("m{i}"),
                reverse_path: format!("sender{i}@ship.example"),
                recipients: vec![format!("r{i}@shore.example"), "ops@shore.example".into()],
                body: message_of_size(seed * 1000 + i as u64, size).unwrap(),
                eight_bit: false,
                dsn: Default::default(),
                rcpt_dsn: Vec::new(),
            }
        })
        .collect()
}

fn server_settings(mtu: usize) -> ServerSettings {
    ServerSettings::new("shore.example", mtu)
}

/// One full session; returns the client outcome, the server transmissions and the owner.
fn session<P: Policy>(
    batch: Vec<BatchMessage>,
    compression: Compression,
    mtu: usize,
    server: &mut HmtpServer<P>,
    owner: &mut Owner,
) -> (skywave_hmtp::BatchOutcome, Vec<Vec<u8>>, usize) {
    let settings = ClientSettings::new("ship.example", mtu, compression);
    let (outcome, submission, transmissions, _) = session_with(settings, batch, server, owner);
    (outcome, submission, transmissions)
}

/// [`session`] with the client's settings given; also returns which messages went with
/// `BODY=8BITMIME`.
fn session_with<P: Policy>(
    settings: ClientSettings,
    batch: Vec<BatchMessage>,
    server: &mut HmtpServer<P>,
    owner: &mut Owner,
) -> (skywave_hmtp::BatchOutcome, Vec<Vec<u8>>, usize, Vec<bool>) {
    let now = Instant::now();
    let mtu = settings.mtu;
    let count = batch.len();
    let mut client = HmtpClient::new(settings, batch).unwrap();
    let submission = client.transmission();
    assert!(
        client.transmission().is_empty(),
        "the submission is given once"
    );
    assert!(submission.iter().all(|u| u.len() <= mtu && !u.is_empty()));
    let replies = owner.serve(server, &submission, now);
    for t in &replies {
        assert!(t.iter().all(|u| u.len() <= mtu && !u.is_empty()));
        for u in t {
            client.receive(u);
        }
    }
    let outcome = client.outcome().cloned().expect("session finished");
    let body_8bitmime = (0..count).map(|i| client.sent_8bitmime(i)).collect();
    (outcome, submission, replies.len(), body_8bitmime)
}

#[test]
fn batches_of_1_10_50_in_every_scheme_take_one_transmission_each_way() {
    for compression in SCHEMES {
        for n in [1usize, 10, 50] {
            for mtu in [200usize, 2048] {
                let batch = messages(n, n as u64);
                let mut owner = Owner::new();
                let mut server =
                    HmtpServer::new(server_settings(mtu), AcceptAll, Instant::now()).unwrap();
                let (outcome, submission, transmissions) =
                    session(batch.clone(), compression, mtu, &mut server, &mut owner);
                let first = submission[0][0];
                match compression {
                    Compression::None => assert_eq!(first, b'E'),
                    Compression::Lzw(_) => assert_eq!(first, 0x03),
                    Compression::Deflate => assert_eq!(first, 0x78),
                }
                assert_eq!(transmissions, 1, "{compression:?} n={n} mtu={mtu}");
                assert_eq!(outcome.sent.transmissions, 1);
                assert_eq!(outcome.end, SessionEnd::Completed);
                assert_eq!(server.mode(), Some(ServeMode::Batch));
                assert_eq!(owner.spooled.len(), n);
                for (m, (env, body)) in batch.iter().zip(&owner.spooled) {
                    assert_eq!(body, &m.body, "byte-identical body");
                    assert_eq!(env.reverse_path, m.reverse_path);
                    assert_eq!(env.recipients, m.recipients);
                }
                for (m, r) in batch.iter().zip(&outcome.messages) {
                    assert_eq!(r.id, m.id);
                    assert_eq!(r.recipients.len(), 2);
                    assert!(
                        r.recipients
                            .iter()
                            .all(|(_, d)| matches!(d, Disposition::Delivered(_)))
                    );
                }
                assert_eq!(owner.closed, vec![ServerEnd::Session(CloseReason::Quit)]);
                // Counts agree on both sides.
                assert_eq!(outcome.sent.wire_bytes, server.received_stats().wire_bytes);
                assert_eq!(
                    outcome.sent.plain_bytes,
                    server.received_stats().plain_bytes
                );
                assert_eq!(outcome.received.wire_bytes, server.sent_stats().wire_bytes);
                assert_eq!(outcome.received.updus, server.sent_stats().updus);
                if compression != Compression::None && n >= 10 {
                    assert!(outcome.sent.wire_bytes < outcome.sent.plain_bytes);
                }
            }
        }
    }
}

/// Issue 12: the dictionary is negotiated across sessions. A first deflate session learns the
/// peer's `XDICT`; the next one, started from that dictionary, is delivered byte-identical in
/// fewer bytes both ways; a server that does not know the dictionary refuses the stream (no
/// message is taken, the client keeps it queued), and never advertised it in the first place.
#[test]
fn the_dictionary_is_used_once_the_peer_advertised_it() {
    let one = || {
        vec![BatchMessage {
            id: "m0".into(),
            reverse_path: "alice@ship.example".into(),
            recipients: vec!["ops@shore.example".into()],
            body: message_of_size(386, 386).unwrap(),
            eight_bit: false,
            dsn: Default::default(),
            rcpt_dsn: Vec::new(),
        }]
    };
    let run = |dictionary: Option<u32>| {
        let mut owner = Owner::new();
        let mut server = HmtpServer::new(server_settings(2048), AcceptAll, Instant::now()).unwrap();
        let mut settings = ClientSettings::new("ship.example", 2048, Compression::Deflate);
        settings.dictionary = dictionary;
        let mut client = HmtpClient::new(settings, one()).unwrap();
        let submission = client.transmission();
        for t in owner.serve(&mut server, &submission, Instant::now()) {
            for u in &t {
                client.receive(u);
            }
        }
        (client.outcome().cloned(), owner, submission)
    };
    let v1 = skywave_compress::dictionary::mail_v1_id();
    let (first, owner, _) = run(None);
    let first = first.expect("finished");
    assert_eq!(first.end, SessionEnd::Completed);
    assert_eq!(owner.spooled.len(), 1);
    assert_eq!(
        first.peer_dictionaries,
        vec![v1],
        "the server advertised XDICT"
    );
    let (second, owner, submission) = run(Some(v1));
    let second = second.expect("finished");
    assert_eq!(second.end, SessionEnd::Completed);
    assert_eq!(owner.spooled[0].1, one()[0].body, "byte-identical");
    assert_eq!(submission[0][1] & 0x20, 0x20, "FDICT set");
    // This one message loses a quarter of its bytes; the corpus-wide figure, both ways, is over
    // a third (skywave_compress::dictionary's tests).
    assert!(
        second.sent.wire_bytes * 100 <= first.sent.wire_bytes * 85,
        "{} -> {}",
        first.sent.wire_bytes,
        second.sent.wire_bytes
    );
    assert!(second.received.wire_bytes < first.received.wire_bytes);
    // A dictionary the server does not know: nothing is taken, the message stays queued.
    let mut owner = Owner::new();
    let mut server = HmtpServer::new(server_settings(2048), AcceptAll, Instant::now()).unwrap();
    let mut e =
        skywave_compress::deflate::DeflateEncoder::with_dictionary(9, b"version 99").unwrap();
    e.push(b"EHLO ship.example\r\nQUIT\r\n").unwrap();
    e.flush().unwrap();
    let replies = owner.serve(&mut server, &[e.take_output()], Instant::now());
    assert!(owner.spooled.is_empty());
    assert!(replies.iter().flatten().all(|u| !u.is_empty()));
}

/// STANAG 5066 Annex F says only that an HMTP server should offer 8BITMIME. The first session
/// to a peer that does not assumes it, as a batch must, and its 8-bit mail is refused for the
/// parameter; the outcome says what the peer offered, and the next session, told so, sends the
/// text made 7-bit, its UTF-8 header fields as RFC 2047 encoded-words.
#[test]
fn a_peer_without_8bitmime_gets_8bit_mail_made_7bit_once_it_is_known() {
    let mut batch = messages(3, 11);
    batch[0].body =
        "From: a@ship.example\r\nSubject: menu\r\n\r\nCr\u{e8}me br\u{fb}l\u{e9}e tonight.\r\n"
            .as_bytes()
            .to_vec();
    batch[0].eight_bit = true;
    batch[2].body = "From: a@ship.example\r\nSubject: Gr\u{fc}\u{df}e\r\n\r\nHallo\r\n"
        .as_bytes()
        .to_vec();
    batch[2].eight_bit = true;
    let mut config = server_settings(512);
    config.smtp.eight_bit_mime = false;
    for compression in SCHEMES {
        let mut owner = Owner::new();
        let mut server = HmtpServer::new(config.clone(), AcceptAll, Instant::now()).unwrap();
        let settings = ClientSettings::new("ship.example", 512, compression);
        let (first, _, _, sent_8bit) =
            session_with(settings.clone(), batch.clone(), &mut server, &mut owner);
        assert_eq!(first.peer_eight_bit_mime, Some(false));
        assert_eq!(sent_8bit, [true, false, true]);
        for i in [0, 2] {
            assert!(
                first.messages[i]
                    .recipients
                    .iter()
                    .all(|(_, d)| matches!(d, Disposition::Failed(r) if r.code == 555)),
                "{:?}",
                first.messages[i]
            );
        }
        assert_eq!(owner.spooled.len(), 1, "only the 7-bit message");

        let mut owner = Owner::new();
        let mut server = HmtpServer::new(config.clone(), AcceptAll, Instant::now()).unwrap();
        let told = ClientSettings {
            eight_bit_mime: false,
            ..settings
        };
        let (second, _, _, sent_8bit) = session_with(told, batch.clone(), &mut server, &mut owner);
        assert_eq!(sent_8bit, [false, false, false]);
        assert!(second.messages.iter().all(|m| {
            m.recipients
                .iter()
                .all(|(_, d)| matches!(d, Disposition::Delivered(_)))
        }));
        let bodies: Vec<&[u8]> = owner.spooled.iter().map(|(_, b)| &b[..]).collect();
        let converted = skywave_smtp::downgrade::seven_bit(&batch[0].body).unwrap();
        assert!(converted.is_ascii());
        let header = b"From: a@ship.example\r\nSubject: =?utf-8?b?R3LDvMOfZQ==?=\r\n\r\nHallo\r\n";
        assert_eq!(bodies, [&converted[..], &batch[1].body, &header[..]]);
        assert!(
            owner
                .spooled
                .iter()
                .all(|(e, _)| e.body_type == skywave_smtp::BodyType::Unspecified)
        );
    }
    // A peer that offers it is told so, and gets the octets as they are.
    let mut owner = Owner::new();
    let mut server = HmtpServer::new(server_settings(512), AcceptAll, Instant::now()).unwrap();
    let (outcome, _, _, sent_8bit) = session_with(
        ClientSettings::new("ship.example", 512, Compression::Deflate),
        batch.clone(),
        &mut server,
        &mut owner,
    );
    assert_eq!(outcome.peer_eight_bit_mime, Some(true));
    assert_eq!(sent_8bit, [true, false, true]);
    assert_eq!(owner.spooled[0].1, batch[0].body);
    assert_eq!(
        owner.spooled[0].0.body_type,
        skywave_smtp::BodyType::EightBitMime
    );
}

#[test]
fn refused_recipient_and_refused_data_text_is_discarded() {
    for compression in SCHEMES {
        let mut batch = messages(3, 7);
        // Message 0: one recipient refused. Message 1: every recipient refused, and its text
        // looks like commands. Message 2 must still go through.
        batch[0].recipients = vec!["good@shore.example".into(), "bad@shore.example".into()];
        batch[1].recipients = vec!["bad@shore.example".into(), "worse@shore.example".into()];
        batch[1].body = b"Subject: trap\r\n\r\nMAIL FROM:<evil@x>\r\nRCPT TO:<good@shore.example>\r\nDATA\r\nQUIT\r\n.hidden\r\n".to_vec();
        let policy = Refuse(vec![
            "bad@shore.example".into(),
            "worse@shore.example".into(),
        ]);
        let mut owner = Owner::new();
        let mut server = HmtpServer::new(server_settings(2048), policy, Instant::now()).unwrap();
        let (outcome, _, transmissions) =
            session(batch.clone(), compression, 2048, &mut server, &mut owner);
        assert_eq!(transmissions, 1);
        assert_eq!(outcome.end, SessionEnd::Completed);
        let bodies: Vec<_> = owner.spooled.iter().map(|(_, b)| b.clone()).collect();
        assert_eq!(bodies, vec![batch[0].body.clone(), batch[2].body.clone()]);
        assert_eq!(owner.spooled[0].0.recipients, vec!["good@shore.example"]);
        let m0 = &outcome.messages[0].recipients;
        assert!(matches!(&m0[0].1, Disposition::Delivered(_)));
        assert!(matches!(&m0[1].1, Disposition::Failed(r) if r.code == 550));
        assert!(
            outcome.messages[1]
                .recipients
                .iter()
                .all(|(_, d)| matches!(d, Disposition::Failed(r) if r.code == 550))
        );
        assert!(
            outcome.messages[2]
                .recipients
                .iter()
                .all(|(_, d)| matches!(d, Disposition::Delivered(_)))
        );
    }
}

#[test]
fn a_421_mid_batch_defers_the_rest() {
    for compression in SCHEMES {
        let batch = messages(4, 3);
        let mut settings = server_settings(2048);
        // EHLO + 5 commands per message (MAIL, 2 RCPT, DATA, and the message's end counts as
        // nothing): the limit falls inside the second message.
        settings.smtp.max_commands = 8;
        let mut owner = Owner::new();
        let mut server = HmtpServer::new(settings, AcceptAll, Instant::now()).unwrap();
        let (outcome, _, transmissions) =
            session(batch.clone(), compression, 2048, &mut server, &mut owner);
        assert_eq!(transmissions, 1);
        assert!(matches!(outcome.end, SessionEnd::ServiceClosing(ref r) if r.code == 421));
        assert_eq!(owner.spooled.len(), 1);
        assert_eq!(owner.spooled[0].1, batch[0].body);
        assert!(
            outcome.messages[0]
                .recipients
                .iter()
                .all(|(_, d)| matches!(d, Disposition::Delivered(_)))
        );
        for m in &outcome.messages[1..] {
            assert!(m.recipients.iter().all(|(_, d)| d.is_retryable()), "{m:?}");
        }
        assert_eq!(
            owner.closed,
            vec![ServerEnd::Session(CloseReason::TooManyCommands)]
        );
    }
}

#[test]
fn a_retransmitted_batch_is_acknowledged_but_not_delivered_twice() {
    for compression in SCHEMES {
        let mut batch = messages(5, 11);
        // One message without Message-ID: keyed on its hash.
        batch[4].body = b"From: a@ship.example\r\nSubject: no id\r\n\r\nhello\r\n".to_vec();
        let mut owner = Owner::new();
        let mut server = HmtpServer::new(server_settings(512), AcceptAll, Instant::now()).unwrap();
        let (first, _, _) = session(batch.clone(), compression, 512, &mut server, &mut owner);
        assert_eq!(owner.spooled.len(), 5);
        // The replies were lost: the client retransmits the same batch in a new session.
        let mut server = HmtpServer::new(server_settings(512), AcceptAll, Instant::now()).unwrap();
        let (second, _, transmissions) =
            session(batch.clone(), compression, 512, &mut server, &mut owner);
        assert_eq!(transmissions, 1);
        assert_eq!(owner.spooled.len(), 5, "nothing delivered twice");
        assert_eq!(owner.duplicates, 5);
        assert_eq!(owner.dedup.duplicates(), 5);
        for o in [&first, &second] {
            assert!(o.messages.iter().all(|m| {
                m.recipients
                    .iter()
                    .all(|(_, d)| matches!(d, Disposition::Delivered(r) if r.code == 250))
            }));
        }
        // A changed envelope is a different message.
        let mut other = batch[..1].to_vec();
        other[0].recipients.pop();
        let mut server = HmtpServer::new(server_settings(512), AcceptAll, Instant::now()).unwrap();
        session(other, compression, 512, &mut server, &mut owner);
        assert_eq!(owner.spooled.len(), 6);
    }
}

#[test]
fn towards_a_non_skywave_peer_the_stream_is_exactly_standard_smtp() {
    let batch = vec![
        BatchMessage {
            id: "a".into(),
            reverse_path: "x@ship.example".into(),
            recipients: vec!["y@shore.example".into(), "z@shore.example".into()],
            body: b"Subject: hi\r\n\r\n.dot line\r\nend\r\n".to_vec(),
            eight_bit: false,
            dsn: Default::default(),
            rcpt_dsn: Vec::new(),
        },
        BatchMessage {
            id: "b".into(),
            reverse_path: String::new(),
            recipients: vec!["y@shore.example".into()],
            body: b"Subject: bounce\r\n\r\nbody\r\n".to_vec(),
            eight_bit: false,
            dsn: Default::default(),
            rcpt_dsn: Vec::new(),
        },
    ];
    let mut client = HmtpClient::new(
        ClientSettings::new("ship.example", 200, Compression::None),
        batch.clone(),
    )
    .unwrap();
    let stream = client.transmission().concat();
    let mut expected = b"EHLO ship.example\r\n".to_vec();
    for m in &batch {
        expected.extend_from_slice(format!("MAIL FROM:<{}>\r\n", m.reverse_path).as_bytes());
        for r in &m.recipients {
            expected.extend_from_slice(format!("RCPT TO:<{r}>\r\n").as_bytes());
        }
        expected.extend_from_slice(b"DATA\r\n");
        expected.extend_from_slice(&dot_stuff(&m.body));
    }
    expected.extend_from_slice(b"QUIT\r\n");
    assert_eq!(
        String::from_utf8_lossy(&stream),
        String::from_utf8_lossy(&expected)
    );
    assert!(stream.is_ascii());
}

#[test]
fn our_plain_client_never_ends_a_updu_right_after_ehlo() {
    // "EHLO ship.example\r\n" is 19 bytes: with a 19-byte MTU the first U_PDU would be exactly
    // that line, which the server would read as a client waiting for the EHLO reply.
    let batch = messages(2, 5);
    let mut owner = Owner::new();
    let mut server = HmtpServer::new(server_settings(19), AcceptAll, Instant::now()).unwrap();
    let (outcome, submission, transmissions) =
        session(batch, Compression::None, 19, &mut server, &mut owner);
    assert_ne!(submission[0], b"EHLO ship.example\r\n");
    assert_eq!(server.mode(), Some(ServeMode::Batch));
    assert_eq!(transmissions, 1);
    assert_eq!(outcome.end, SessionEnd::Completed);
    assert_eq!(owner.spooled.len(), 2);
}

/// Runs a standard smtp-crate client against the HMTP server in memory, cutting its output into
/// U_PDUs; returns the number of server transmissions.
fn standard_client(
    mode: ClientMode,
    batch: &[BatchMessage],
    refuse: Refuse,
) -> (Owner, usize, Vec<ClientEvent>, Option<ServeMode>) {
    let now = Instant::now();
    let mut config = ClientConfig::new("std.example", mode);
    config.expect_greeting = false;
    let outgoing = batch
        .iter()
        .map(|m| OutgoingMessage {
            reverse_path: m.reverse_path.clone(),
            recipients: m.recipients.clone(),
            body: m.body.clone(),
            eight_bit: false,
            mt_priority: None,
            dsn: Default::default(),
            rcpt_dsn: Vec::new(),
        })
        .collect();
    let mut client = ClientSession::new(config, outgoing).unwrap();
    let mut owner = Owner::new();
    let mut server = HmtpServer::new(server_settings(200), refuse, now).unwrap();
    let mut transmissions = 0;
    let mut events = Vec::new();
    for _ in 0..1000 {
        let out = client.take_output();
        if !out.is_empty() {
            let updus: Vec<Vec<u8>> = out.chunks(200).map(<[u8]>::to_vec).collect();
            for t in owner.serve(&mut server, &updus, now) {
                transmissions += 1;
                for u in t {
                    client.feed(&u);
                }
            }
        }
        while let Some(e) = client.poll_event() {
            events.push(e);
        }
        if client.is_finished() || (out.is_empty() && !client.has_output()) {
            break;
        }
    }
    assert!(
        client.is_finished(),
        "the standard client must not deadlock"
    );
    (owner, transmissions, events, server.mode())
}

#[test]
fn a_standard_pipelining_client_waiting_for_ehlo_is_served() {
    let batch = messages(3, 21);
    let (owner, transmissions, events, mode) = standard_client(
        ClientMode::Pipelining,
        &batch,
        Refuse(vec!["r1@shore.example".into()]),
    );
    assert_eq!(mode, Some(ServeMode::Standard));
    assert_eq!(owner.spooled.len(), 3);
    for (m, (_, body)) in batch.iter().zip(&owner.spooled) {
        assert_eq!(body, &m.body);
    }
    assert!(transmissions > 2, "served turn by turn");
    assert!(matches!(
        events.last(),
        Some(ClientEvent::Finished { error: None })
    ));
    let outcome = events
        .iter()
        .find_map(|e| match e {
            ClientEvent::Message(m) if m.index == 1 => Some(m.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        matches!(outcome.recipients[0].status, RecipientStatus::Failed(ref r) if r.code == 550)
    );
    assert!(matches!(
        outcome.recipients[1].status,
        RecipientStatus::Delivered(_)
    ));
    // Lockstep works the same way.
    let (owner, _, events, mode) = standard_client(ClientMode::Lockstep, &batch, Refuse::default());
    assert_eq!(mode, Some(ServeMode::Standard));
    assert_eq!(owner.spooled.len(), 3);
    assert!(matches!(
        events.last(),
        Some(ClientEvent::Finished { error: None })
    ));
}

#[test]
fn a_standard_whole_batch_client_gets_hmtp_66() {
    let batch = messages(4, 22);
    let (owner, transmissions, events, mode) = standard_client(
        ClientMode::Batch,
        &batch,
        Refuse(vec!["r2@shore.example".into(), "ops@shore.example".into()]),
    );
    assert_eq!(mode, Some(ServeMode::Batch));
    assert_eq!(transmissions, 1);
    assert_eq!(
        owner.spooled.len(),
        3,
        "message 2 refused entirely, its text discarded"
    );
    assert!(matches!(
        events.last(),
        Some(ClientEvent::Finished { error: None })
    ));
}

#[test]
fn garbage_and_timeouts_end_the_server_session() {
    let now = Instant::now();
    let mut owner = Owner::new();
    let mut server = HmtpServer::new(server_settings(200), AcceptAll, now).unwrap();
    assert!(
        owner
            .serve(&mut server, &[vec![0x80, 1, 2]], now)
            .is_empty()
    );
    assert!(server.is_closed());
    assert!(matches!(owner.closed[0], ServerEnd::BadStream(_)));

    // A corrupt LZW stream.
    let mut server = HmtpServer::new(server_settings(200), AcceptAll, now).unwrap();
    owner.serve(&mut server, &[vec![0x03, 0x07, 0xff, 0xff]], now);
    assert!(server.is_closed());

    // A batch that stops half way: the idle timeout answers everything held, plus 421.
    let mut client = HmtpClient::new(
        ClientSettings::new("ship.example", 64, Compression::Deflate),
        messages(2, 9),
    )
    .unwrap();
    let sub = client.transmission();
    let mut server = HmtpServer::new(server_settings(64), AcceptAll, now).unwrap();
    let mut owner = Owner::new();
    assert!(
        owner
            .serve(&mut server, &sub[..sub.len() / 2], now)
            .is_empty()
    );
    let deadline = server.poll_timeout().unwrap();
    server.handle_timeout(deadline - Duration::from_secs(1), &mut owner.dedup);
    assert!(server.take_transmission().is_none());
    server.handle_timeout(deadline, &mut owner.dedup);
    let replies = owner.drain(&mut server, deadline);
    assert_eq!(replies.len(), 1);
    for u in &replies[0] {
        client.receive(u);
    }
    let o = client.outcome().unwrap();
    assert!(matches!(o.end, SessionEnd::ServiceClosing(ref r) if r.code == 421));
    // What was spooled before the cut is delivered; everything else stays queued.
    let delivered = o
        .messages
        .iter()
        .filter(|m| {
            m.recipients
                .iter()
                .all(|(_, d)| matches!(d, Disposition::Delivered(_)))
        })
        .count();
    assert_eq!(delivered, owner.spooled.len());
    assert!(delivered < 2);
    assert!(
        o.messages[delivered..]
            .iter()
            .all(|m| m.recipients.iter().all(|(_, d)| d.is_retryable()))
    );
}

#[test]
fn client_close_and_corrupt_replies_leave_mail_queued() {
    let mut client = HmtpClient::new(
        ClientSettings::new("ship.example", 200, Compression::Lzw(12)),
        messages(2, 1),
    )
    .unwrap();
    let _ = client.transmission();
    client.close();
    let o = client.outcome().unwrap();
    assert_eq!(o.end, SessionEnd::Closed);
    assert!(all_no_answer(o));

    let mut client = HmtpClient::new(
        ClientSettings::new("ship.example", 200, Compression::Deflate),
        messages(1, 1),
    )
    .unwrap();
    client.receive(b"250 plain where deflate was expected\r\n");
    assert!(matches!(
        client.outcome().unwrap().end,
        SessionEnd::BadReplies(_)
    ));

    assert!(HmtpClient::new(ClientSettings::new("s", 200, Compression::None), vec![]).is_err());
    assert!(
        HmtpClient::new(
            ClientSettings::new("s", 8, Compression::None),
            messages(1, 1)
        )
        .is_err()
    );
    assert!(
        HmtpClient::new(
            ClientSettings::new("s", 200, Compression::Lzw(8)),
            messages(1, 1)
        )
        .is_err()
    );
}

#[test]
fn batch_budget_takes_at_least_one_and_stops_at_the_budget() {
    let sizes = [5000usize, 100, 100];
    assert_eq!(skywave_hmtp::select_batch(&sizes, 1000, |s| *s), 1);
    let sizes = [100usize, 200, 300, 400];
    assert_eq!(skywave_hmtp::select_batch(&sizes, 600, |s| *s), 3);
    assert_eq!(skywave_hmtp::select_batch(&sizes, 599, |s| *s), 2);
    assert_eq!(skywave_hmtp::select_batch(&sizes, 10_000, |s| *s), 4);
    assert_eq!(skywave_hmtp::select_batch::<usize>(&[], 10, |s| *s), 0);
    let batch = messages(3, 2);
    let n = skywave_hmtp::select_batch(&batch, batch[0].wire_size(), BatchMessage::wire_size);
    assert_eq!(n, 1);
}

// ----- crossed sessions -----

enum Rx {
    Idle,
    Client,
    Server(Box<HmtpServer<AcceptAll>>),
}

struct Node {
    arbiter: Arbiter,
    queue: Vec<BatchMessage>,
    client: Option<HmtpClient>,
    rx: Rx,
    owner: Owner,
    compression: Compression,
    sessions_started: usize,
}

impl Node {
    fn new(local: u32, peer: u32, queue: Vec<BatchMessage>, compression: Compression) -> Self {
        Self {
            arbiter: Arbiter::new(local, peer).unwrap(),
            queue,
            client: None,
            rx: Rx::Idle,
            owner: Owner::new(),
            compression,
            sessions_started: 0,
        }
    }

    fn maybe_start(&mut self, out: &mut VecDeque<Vec<u8>>) {
        if !self.arbiter.can_start() || self.queue.is_empty() {
            return;
        }
        let mut client = HmtpClient::new(
            ClientSettings::new("node.example", 200, self.compression),
            self.queue.clone(),
        )
        .unwrap();
        out.extend(client.transmission());
        self.client = Some(client);
        self.arbiter.own_started();
        self.sessions_started += 1;
    }

    fn finish_client(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let o = client.outcome().unwrap();
        for m in &o.messages {
            if m.recipients
                .iter()
                .all(|(_, d)| matches!(d, Disposition::Delivered(_)))
            {
                self.queue.retain(|q| q.id != m.id);
            }
        }
    }

    fn on_updu(&mut self, u: &[u8], out: &mut VecDeque<Vec<u8>>) {
        let now = Instant::now();
        if matches!(self.rx, Rx::Idle) {
            match classify_stream_start(u).unwrap() {
                Some(StreamStart::Replies) => self.rx = Rx::Client,
                Some(StreamStart::Session) | None => {
                    let settings = ServerSettings::new("node.example", 200);
                    let crossed = self.arbiter.own_outstanding();
                    let action = self.arbiter.incoming_session();
                    assert_eq!(action == IncomingAction::ServeAlongside, crossed);
                    let server = HmtpServer::new(settings, AcceptAll, now);
                    self.rx = Rx::Server(Box::new(server.unwrap()));
                }
            }
        }
        match &mut self.rx {
            Rx::Idle => {}
            Rx::Client => {
                let c = self
                    .client
                    .as_mut()
                    .expect("replies only come to a session of ours");
                c.receive(u);
                if c.is_finished() {
                    self.finish_client();
                    self.arbiter.own_finished();
                    self.rx = Rx::Idle;
                }
            }
            Rx::Server(server) => {
                for t in self.owner.serve(server, &[u.to_vec()], now) {
                    out.extend(t);
                }
                if server.is_closed() {
                    self.arbiter.incoming_finished();
                    self.rx = Rx::Idle;
                }
            }
        }
        self.maybe_start(out);
    }
}

/// Both nodes start a session at once and the U_PDUs cross, delivered alternately, in order:
/// each serves the other's session alongside its own, and both batches are delivered exactly
/// once with each submission sent once.
fn run_crossing(compression: Compression, low_first_delivery: bool) {
    let a_msgs = messages(3, 31);
    let mut b_msgs = messages(4, 32);
    for m in &mut b_msgs {
        m.id = format!("b-{}", m.id);
    }
    let mut a = Node::new(0x0100_0001, 0x0100_0002, a_msgs.clone(), compression);
    let mut b = Node::new(0x0100_0002, 0x0100_0001, b_msgs.clone(), compression);
    let mut a_to_b = VecDeque::new();
    let mut b_to_a = VecDeque::new();
    // Both start at once.
    a.maybe_start(&mut a_to_b);
    b.maybe_start(&mut b_to_a);
    let mut turn = low_first_delivery;
    for _ in 0..10_000 {
        if a_to_b.is_empty() && b_to_a.is_empty() {
            break;
        }
        if turn {
            if let Some(u) = b_to_a.pop_front() {
                a.on_updu(&u, &mut a_to_b);
            }
        } else if let Some(u) = a_to_b.pop_front() {
            b.on_updu(&u, &mut b_to_a);
        }
        turn = !turn;
    }
    assert!(a_to_b.is_empty() && b_to_a.is_empty());
    assert!(
        a.queue.is_empty() && b.queue.is_empty(),
        "all mail delivered"
    );
    assert_eq!((a.arbiter.crossings(), b.arbiter.crossings()), (1, 1));
    assert_eq!(
        (a.sessions_started, b.sessions_started),
        (1, 1),
        "nothing sent twice"
    );
    // Exactly once each way, bodies intact.
    let got_b: Vec<_> = b.owner.spooled.iter().map(|(_, m)| m.clone()).collect();
    let got_a: Vec<_> = a.owner.spooled.iter().map(|(_, m)| m.clone()).collect();
    assert_eq!(
        got_b,
        a_msgs.iter().map(|m| m.body.clone()).collect::<Vec<_>>()
    );
    assert_eq!(
        got_a,
        b_msgs.iter().map(|m| m.body.clone()).collect::<Vec<_>>()
    );
    assert_eq!(a.owner.duplicates + b.owner.duplicates, 0);
}

#[test]
fn crossed_sessions_are_both_served_once_without_loss_or_duplication() {
    for compression in SCHEMES {
        run_crossing(compression, true);
        run_crossing(compression, false);
    }
}

// ----- property: chunking does not matter -----

fn arb_body() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            "[ -~]{0,80}".prop_map(String::from),
            Just(".".to_string()),
            Just("..x".to_string()),
            Just("QUIT".to_string()),
        ],
        1..12,
    )
    .prop_map(|lines| {
        let mut b = b"Subject: p\r\n\r\n".to_vec();
        for l in lines {
            b.extend_from_slice(l.as_bytes());
            b.extend_from_slice(b"\r\n");
        }
        b
    })
}

fn arb_compression() -> impl Strategy<Value = Compression> {
    prop_oneof![
        Just(Compression::None),
        (9u8..=16).prop_map(Compression::Lzw),
        Just(Compression::Deflate),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn random_chunking_gives_the_same_outcome(
        bodies in prop::collection::vec(arb_body(), 1..6),
        refused in prop::collection::vec(any::<bool>(), 6),
        compression in arb_compression(),
        cuts in prop::collection::vec(1usize..300, 1..64),
    ) {
        let batch: Vec<BatchMessage> = bodies.iter().enumerate().map(|(i, b)| BatchMessage {
            id: format!("p{i}"),
            reverse_path: "s@ship.example".into(),
            recipients: vec![format!("u{i}@shore.example")],
            body: b.clone(),
            eight_bit: false,
            dsn: Default::default(),
            rcpt_dsn: Vec::new(),
        }).collect();
        let refuse = Refuse((0..6).filter(|&i| refused[i]).map(|i| format!("u{i}@shore.example")).collect());
        // Reference: the client's own cutting.
        let mut owner1 = Owner::new();
        let mut s1 = HmtpServer::new(server_settings(2048), refuse.clone(), Instant::now()).unwrap();
        let (o1, submission, _) = session(batch.clone(), compression, 2048, &mut s1, &mut owner1);
        // Same stream, cut at random.
        let stream = submission.concat();
        let mut updus = Vec::new();
        let mut boundaries = Vec::new();
        let mut pos = 0;
        let mut k = 0;
        while pos < stream.len() {
            let end = (pos + cuts[k % cuts.len()]).min(stream.len());
            updus.push(stream[pos..end].to_vec());
            boundaries.push(end);
            pos = end;
            k += 1;
        }
        // The server's documented rule (server.rs): a plain stream whose EHLO line arrives with
        // nothing after it is a client waiting for the EHLO reply, and is served as standard
        // RFC 2920 SMTP, not HMTP-66 (its own tests: the_serving_mode_is_decided_on_the_first_line).
        // This property is about HMTP-66 sessions, so such cuts are outside it; the known
        // limitation of that mode with refused DATA is in the issue notes.
        let ehlo_len = stream.iter().position(|&b| b == b'\n').map_or(0, |p| p + 1);
        prop_assume!(compression != Compression::None || !boundaries.contains(&ehlo_len));
        let mut owner2 = Owner::new();
        let mut s2 = HmtpServer::new(server_settings(2048), refuse, Instant::now()).unwrap();
        let replies = owner2.serve(&mut s2, &updus, Instant::now());
        prop_assert_eq!(replies.len(), 1);
        let mut client = HmtpClient::new(ClientSettings::new("ship.example", 2048, compression), batch.clone()).unwrap();
        let _ = client.transmission();
        // The replies re-cut at random as well.
        let rstream = replies.concat().concat();
        for c in rstream.chunks(cuts[0]) {
            client.receive(c);
        }
        let o2 = client.outcome().cloned().unwrap();
        prop_assert_eq!(&o1.messages, &o2.messages);
        prop_assert_eq!(&owner1.spooled, &owner2.spooled);
        for (i, m) in batch.iter().enumerate() {
            let delivered = o1.messages[i].recipients.iter().all(|(_, d)| matches!(d, Disposition::Delivered(_)));
            prop_assert_eq!(delivered, !refused[i]);
            if delivered {
                prop_assert!(owner1.spooled.iter().any(|(_, b)| b == &m.body));
            }
        }
    }
}

#[test]
fn the_serving_mode_is_decided_on_the_first_line() {
    let now = Instant::now();
    // EHLO split over two U_PDUs and nothing after it: answered at once.
    let mut owner = Owner::new();
    let mut server = HmtpServer::new(server_settings(200), AcceptAll, now).unwrap();
    assert!(owner.serve(&mut server, &[b"EH".to_vec()], now).is_empty());
    assert_eq!(server.mode(), None);
    let t = owner.serve(&mut server, &[b"LO std\r\n".to_vec()], now);
    assert_eq!(server.mode(), Some(ServeMode::Standard));
    assert_eq!(t.len(), 1);
    assert!(t[0].concat().starts_with(b"250-shore.example"));
    // More after the EHLO line in the same U_PDU: HMTP-66, nothing until QUIT.
    let mut server = HmtpServer::new(server_settings(200), AcceptAll, now).unwrap();
    let t = owner.serve(
        &mut server,
        &[b"EHLO x\r\nMAIL FROM:<a@b>\r\n".to_vec()],
        now,
    );
    assert!(t.is_empty());
    assert_eq!(server.mode(), Some(ServeMode::Batch));
    let t = owner.serve(&mut server, &[b"RSET\r\nQUIT\r\n".to_vec()], now);
    assert_eq!(t.len(), 1);
    let text = String::from_utf8(t[0].concat()).unwrap();
    assert!(text.starts_with("250-shore.example"));
    // XSUM: the 221 names how much of the session the server read and its CRC-64.
    let read = b"EHLO x\r\nMAIL FROM:<a@b>\r\nRSET\r\nQUIT\r\n";
    let tag = format!("XSUM={}:{:016x}", read.len(), skywave_smtp::sum::of(read));
    assert!(text.contains("\r\n250-XSUM\r\n"), "{text}");
    assert!(
        text.ends_with(&format!(
            "221 2.0.0 shore.example closing connection {tag}\r\n"
        )),
        "{text}"
    );
    // A first line that is not EHLO/HELO: HMTP-66.
    let mut server = HmtpServer::new(server_settings(200), AcceptAll, now).unwrap();
    assert!(
        owner
            .serve(&mut server, &[b"NOOP\r\n".to_vec()], now)
            .is_empty()
    );
    assert_eq!(server.mode(), Some(ServeMode::Batch));
}

/// A client for `batch` that has sent its submission (returned; dropped, it is lost on the way).
fn submitted(
    batch: Vec<BatchMessage>,
    compression: Compression,
    mtu: usize,
) -> (HmtpClient, Vec<Vec<u8>>) {
    let mut client =
        HmtpClient::new(ClientSettings::new("ship.example", mtu, compression), batch).unwrap();
    let submission = client.transmission();
    (client, submission)
}

/// Serves `batch` as a session of its own and returns the client (its replies not read yet) and
/// the reply U_PDUs, in order.
fn served<P: Policy>(
    batch: Vec<BatchMessage>,
    compression: Compression,
    mtu: usize,
    server: &mut HmtpServer<P>,
    owner: &mut Owner,
) -> (HmtpClient, Vec<Vec<u8>>) {
    let (client, submission) = submitted(batch, compression, mtu);
    let replies = owner.serve(server, &submission, Instant::now()).concat();
    (client, replies)
}

fn all_no_answer(o: &skywave_hmtp::BatchOutcome) -> bool {
    o.messages.iter().all(|m| {
        m.recipients
            .iter()
            .all(|(_, d)| *d == Disposition::NoAnswer)
    })
}

fn all_delivered(o: &skywave_hmtp::BatchOutcome) -> bool {
    o.messages.iter().all(|m| {
        m.recipients
            .iter()
            .all(|(_, d)| matches!(d, Disposition::Delivered(_)))
    })
}

#[test]
fn a_late_reply_stream_to_an_earlier_session_is_set_aside() {
    // Session A ended here without replies (deadline) while its data still reached the peer;
    // A's replies then arrive while session B, of the same shape but other messages, waits.
    for compression in SCHEMES {
        let a_batch = messages(2, 7);
        let b_batch: Vec<_> = messages(2, 8)
            .into_iter()
            .map(|mut m| {
                m.id = format!("b-{}", m.id);
                m
            })
            .collect();
        let mut owner = Owner::new();
        let mut server = HmtpServer::new(server_settings(512), AcceptAll, Instant::now()).unwrap();
        let (mut a, a_replies) = served(a_batch.clone(), compression, 512, &mut server, &mut owner);
        a.close();
        assert!(all_no_answer(a.outcome().unwrap()));
        // B's own data is lost on the way: only A's replies ever reach B.
        let (mut b, _lost) = submitted(b_batch.clone(), compression, 512);
        for u in &a_replies {
            b.receive(u);
        }
        assert!(
            !b.is_finished(),
            "{compression:?}: A's 250s must not deliver B"
        );
        assert_eq!(b.stale_reply_streams(), 1);
        // The deadline: nothing B sent is taken for delivered, so nothing is lost.
        b.close();
        let o = b.outcome().unwrap();
        assert_eq!(o.end, SessionEnd::Closed);
        assert_eq!(o.stale_reply_streams, 1);
        assert!(all_no_answer(o));

        // When B's data does arrive, its own replies follow A's and count.
        let mut server = HmtpServer::new(server_settings(512), AcceptAll, Instant::now()).unwrap();
        let (mut b, b_replies) = served(b_batch.clone(), compression, 512, &mut server, &mut owner);
        for u in a_replies.iter().chain(&b_replies) {
            b.receive(u);
        }
        let o = b.outcome().unwrap();
        assert_eq!(o.end, SessionEnd::Completed, "{compression:?}");
        assert_eq!(o.stale_reply_streams, 1);
        assert!(all_delivered(o));

        // A resent as it was: A's late replies answer exactly these octets, and are right.
        let (mut again, _) = served(a_batch.clone(), compression, 512, &mut server, &mut owner);
        for u in &a_replies {
            again.receive(u);
        }
        let o = again.outcome().unwrap();
        assert_eq!(
            (o.end.clone(), o.stale_reply_streams),
            (SessionEnd::Completed, 0)
        );
        assert!(all_delivered(o));
    }
}

#[test]
fn without_xsum_a_late_stream_is_read_by_position() {
    // The hazard XSUM closes, on a server that does not offer it (a non-skywave HMTP peer):
    // A's replies deliver B's messages, which the peer never had.
    let mut settings = server_settings(2048);
    settings.smtp.session_sum = false;
    let mut owner = Owner::new();
    let mut server = HmtpServer::new(settings, AcceptAll, Instant::now()).unwrap();
    let (_, a_replies) = served(
        messages(2, 7),
        Compression::None,
        2048,
        &mut server,
        &mut owner,
    );
    let (mut b, _lost) = submitted(messages(2, 8), Compression::None, 2048);
    for u in &a_replies {
        b.receive(u);
    }
    let o = b.outcome().unwrap();
    assert_eq!(
        (o.end.clone(), o.stale_reply_streams),
        (SessionEnd::Completed, 0)
    );
    assert!(all_delivered(o));
}

#[test]
fn replies_cut_short_from_a_peer_with_xsum_prove_nothing() {
    // The first reply U_PDUs of a real session, then the deadline: without the 221 nothing
    // shows they are this session's, so every message goes again (the peer drops duplicates).
    for compression in SCHEMES {
        let mut owner = Owner::new();
        let mut server = HmtpServer::new(server_settings(128), AcceptAll, Instant::now()).unwrap();
        let (mut c, replies) = served(messages(6, 3), compression, 128, &mut server, &mut owner);
        assert!(
            replies.len() > 1,
            "{compression:?}: {} U_PDUs",
            replies.len()
        );
        for u in &replies[..replies.len() - 1] {
            c.receive(u);
        }
        assert!(!c.is_finished());
        c.close();
        let o = c.outcome().unwrap();
        assert_eq!(o.end, SessionEnd::Closed);
        assert!(all_no_answer(o));
        assert_eq!(owner.spooled.len(), 6);
    }
}

/// Serves `updus` to a fresh server and returns the bodies the owner spooled.
fn spooled(updus: &[Vec<u8>], mtu: usize) -> Vec<Vec<u8>> {
    let mut owner = Owner::new();
    let mut server = HmtpServer::new(server_settings(mtu), AcceptAll, Instant::now()).unwrap();
    owner.serve(&mut server, updus, Instant::now());
    owner.spooled.into_iter().map(|(_, body)| body).collect()
}

/// Serves `submission` less its U_PDU `hole` to a fresh server and returns the bodies the owner
/// spooled.
fn spooled_with_a_hole(submission: &[Vec<u8>], hole: usize, mtu: usize) -> Vec<Vec<u8>> {
    let holed: Vec<Vec<u8>> = submission
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != hole)
        .map(|(_, u)| u.clone())
        .collect();
    spooled(&holed, mtu)
}

#[test]
fn a_compressed_session_with_a_hole_never_spools_a_damaged_message() {
    // A U_PDU can go missing in the middle of a session's stream while later ones arrive: a
    // 5066 node rejects the U_PDUs it had on the air when it resets its transmit window, and a
    // server with a maximum TTL discards a late one. SMTP has nothing to tell a hole from text:
    // in a plain stream most holes inside a message's text splice it into a shorter message that
    // ends at the next CRLF "." CRLF, and the server takes it. An LZW or deflate stream cannot be
    // decoded past a hole, so the session ends there, and whatever was spooled before it is whole.
    // That is why skywave peers compress; plain sessions (non-skywave peers) carry this risk.
    let mtu = 512;
    for compression in SCHEMES {
        let batch = messages(8, 7);
        let originals: Vec<Vec<u8>> = batch.iter().map(|m| m.body.clone()).collect();
        let (_client, submission) = submitted(batch, compression, mtu);
        let (mut whole, mut damaged) = (0, 0);
        for hole in 0..submission.len() {
            for body in spooled_with_a_hole(&submission, hole, mtu) {
                if originals.contains(&body) {
                    whole += 1;
                } else {
                    damaged += 1;
                }
            }
        }
        if compression == Compression::None {
            // Every hole inside a message's text (most of the stream) damages that message.
            assert!(
                damaged * 2 > submission.len(),
                "{damaged} damaged of {} holes",
                submission.len()
            );
        } else {
            assert_eq!(damaged, 0, "{compression:?}: {whole} whole spooled");
            assert!(
                whole > 0,
                "{compression:?}: messages before the hole are kept"
            );
        }
    }
}

#[test]
fn a_session_cut_short_takes_the_next_one_as_its_rest_whatever_the_compression() {
    // Why a gateway whose U_PDU the 5066 server refused starts no session to that peer until
    // the peer's server has given the cut one up (`peer_session_timeout`), compressed or not.
    // Plain, the next session's text is read as the rest of the cut message. Compressed, the
    // decoder takes the next stream's bytes as the rest of the old stream: a cut between two
    // U_PDUs leaves that in the middle of a block (deflate) or of a code sequence (LZW), and
    // at some cut points the new bytes decode without an error, into garbage that runs on
    // until an end of data closes the cut message, accepted with a corrupt body (and a
    // de-duplicating owner then drops the intact copy). Here plain and deflate spool damaged
    // messages at some cut points; JNOS LZW's decoder happens to fail at every cut point of
    // this sample, but nothing in the stream guarantees that, so the hold covers it too.
    let mtu = 512;
    for compression in SCHEMES {
        let batch = messages(8, 7);
        let originals: Vec<Vec<u8>> = batch.iter().map(|m| m.body.clone()).collect();
        let (_first_client, first) = submitted(batch.clone(), compression, mtu);
        let (_next_client, next) = submitted(batch, compression, mtu);
        // Cut points (after 1 to all but one of the first session's U_PDUs) at which a damaged
        // message was spooled, and how many there were.
        let damaging = (1..first.len())
            .filter(|&cut| {
                // The first `cut` U_PDUs of the first session, then the whole next one.
                spooled(&[&first[..cut], &next[..]].concat(), mtu)
                    .iter()
                    .any(|body| !originals.contains(body))
            })
            .count();
        let want = match compression {
            Compression::None => (40, 42),
            Compression::Lzw(_) => (0, 24),
            Compression::Deflate => (2, 13),
        };
        assert_eq!((damaging, first.len() - 1), want, "{compression:?}");
    }
}

#[test]
fn a_session_given_up_at_the_cut_marker_leaves_the_next_one_whole() {
    // XCUT (`skywave_hmtp::cut`): the same cuts, but the next session starts with the cut
    // marker, as a gateway's does towards a peer that advertised XCUT. The server reading the
    // cut session ends it at the marker and sends nothing; what it spooled before the cut is
    // whole; and the next session, a new stream to a new server as the gateway's link serves
    // it, delivers every message intact, at every cut point, whatever the compression.
    let mtu = 512;
    let now = Instant::now();
    let marker = skywave_hmtp::cut::MARKER.to_vec();
    for compression in SCHEMES {
        let batch = messages(8, 7);
        let originals: Vec<Vec<u8>> = batch.iter().map(|m| m.body.clone()).collect();
        let (_first_client, first) = submitted(batch.clone(), compression, mtu);
        for cut in 1..first.len() {
            let mut owner = Owner::new();
            let mut server = HmtpServer::new(server_settings(mtu), AcceptAll, now).unwrap();
            let sent = owner.serve(
                &mut server,
                &[&first[..cut], std::slice::from_ref(&marker)].concat(),
                now,
            );
            assert!(
                sent.is_empty(),
                "{compression:?} cut {cut}: replies to a cut session"
            );
            assert_eq!(owner.closed, [ServerEnd::Cut], "{compression:?} cut {cut}");
            assert!(server.is_closed());
            // A second marker, or the marker with no session open, ends nothing more.
            owner.serve(&mut server, std::slice::from_ref(&marker), now);
            assert_eq!(owner.closed.len(), 1);
            assert!(owner.spooled.iter().all(|(_, b)| originals.contains(b)));
            let before = owner.spooled.len();
            let (mut client, next) = submitted(batch.clone(), compression, mtu);
            let mut server = HmtpServer::new(server_settings(mtu), AcceptAll, now).unwrap();
            let replies = owner.serve(&mut server, &next, now);
            // Every message arrives: spooled now, or a duplicate of one spooled before the cut.
            assert_eq!(
                owner.spooled.len() - before + owner.duplicates,
                originals.len(),
                "{compression:?} cut {cut}"
            );
            assert!(owner.spooled.iter().all(|(_, b)| originals.contains(b)));
            for tx in &replies {
                for u in tx {
                    client.receive(u);
                }
            }
            let outcome = client.outcome().expect("the next session ends");
            assert_eq!(outcome.peer_cuts, Some(true), "the server advertises XCUT");
            assert!(
                outcome.messages.iter().all(|m| m
                    .recipients
                    .iter()
                    .all(|(_, d)| matches!(d, Disposition::Delivered(_)))),
                "{compression:?} cut {cut}: {outcome:?}"
            );
        }
    }
}

/// The receiving gateway's side of `XRESUME` in miniature: its keeper, the session it serves
/// (a new server for each session of the peer's, as a gateway's link serves them) and its
/// spool.
struct Resuming {
    keeper: Keeper,
    server: Option<HmtpServer<AcceptAll>>,
    owner: Owner,
    mtu: usize,
    refused: usize,
    copies: usize,
    /// The servers' `quiet_timeout`.
    quiet: bool,
}

impl Resuming {
    fn new(mtu: usize) -> Self {
        Self {
            keeper: Keeper::new(),
            server: None,
            owner: Owner::new(),
            mtu,
            refused: 0,
            copies: 0,
            quiet: false,
        }
    }

    fn settings(&self) -> ServerSettings {
        let mut s = server_settings(self.mtu);
        s.resume = true;
        s.quiet_timeout = self.quiet;
        s
    }

    /// Reads one U_PDU into the session served (a new one if none is); its transmissions.
    fn read(&mut self, u: &[u8], now: Instant) -> Vec<Vec<Vec<u8>>> {
        if self.server.is_none() {
            self.server = Some(HmtpServer::new(self.settings(), AcceptAll, now).unwrap());
            self.keeper.started();
        }
        self.keeper.read(u);
        let server = self.server.as_mut().unwrap();
        let out = self.owner.serve(server, &[u.to_vec()], now);
        self.end_if_closed();
        out
    }

    fn end_if_closed(&mut self) {
        if self.server.as_ref().is_some_and(|s| s.is_closed()) {
            self.server = None;
            let timed_out = matches!(
                self.owner.closed.last(),
                Some(ServerEnd::Session(
                    CloseReason::IdleTimeout | CloseReason::DataTimeout
                ))
            );
            self.keeper.ended(timed_out);
        }
    }

    /// One U_PDU from the peer; the transmissions it brings.
    fn receive(&mut self, u: &[u8], now: Instant) -> Vec<Vec<Vec<u8>>> {
        match self.keeper.check(u, self.server.is_some()) {
            ResumeVerdict::Pass => self.read(u, now),
            ResumeVerdict::Copy => {
                self.copies += 1;
                Vec::new()
            }
            ResumeVerdict::Discard => Vec::new(),
            ResumeVerdict::GoOn { .. } => {
                if let Some(server) = self.server.as_mut() {
                    server.touch(now);
                }
                Vec::new()
            }
            ResumeVerdict::Rebuild { updus, .. } => {
                let mut out = Vec::new();
                for old in &updus {
                    out.extend(self.read(old, now));
                }
                out
            }
            ResumeVerdict::Refuse(_) => {
                self.refused += 1;
                vec![vec![resume::REFUSAL.to_vec()]]
            }
            v => panic!("{v:?}"),
        }
    }

    /// Reads `updus`, the first of a session cut short: nothing is answered before its end.
    fn read_cut(&mut self, updus: &[Vec<u8>], now: Instant) {
        for u in updus {
            assert!(self.receive(u, now).is_empty(), "replies before QUIT");
        }
    }

    /// The idle timeout of the session served passes.
    fn time_out(&mut self, now: Instant) -> Vec<Vec<Vec<u8>>> {
        let Some(server) = self.server.as_mut() else {
            return Vec::new();
        };
        let later = server.poll_timeout().unwrap();
        assert!(later > now);
        server.handle_timeout(later, &mut self.owner.dedup);
        let out = self.owner.drain(server, later);
        self.end_if_closed();
        out
    }
}

#[test]
fn a_cut_session_resumed_at_its_marker_delivers_every_message_once_with_only_the_rest_sent() {
    // XRESUME (`skywave_hmtp::resume`): the peer's node had `held` U_PDUs of the session and
    // confirmed the first `from` of them; the next submission is the resume marker and
    // U_PDUs `from..`. At every such cut, in every compression, whether the server was still
    // waiting for the rest or had given the session up (its idle timeout), the server goes on
    // with the session, drops the copies, spools each message once and intact, and its
    // replies answer the whole session to the client that sent it.
    let mtu = 512;
    let now = Instant::now();
    for compression in SCHEMES {
        let batch = messages(8, 7);
        let originals: Vec<Vec<u8>> = batch.iter().map(|m| m.body.clone()).collect();
        let (_, first) = submitted(batch.clone(), compression, mtu);
        let n = first.len();
        for held in 1..n {
            for from in [1, held.div_ceil(2), held] {
                for given_up in [false, true] {
                    let case =
                        format!("{compression:?} held {held} from {from} given up {given_up}");
                    let (mut client, first) = submitted(batch.clone(), compression, mtu);
                    let mut shore = Resuming::new(mtu);
                    for u in &first[..held] {
                        assert!(shore.receive(u, now).is_empty(), "{case}");
                    }
                    if given_up {
                        // Its 421 goes to a client whose session was cut: it reads no replies
                        // until its resumed session's.
                        shore.time_out(now);
                        assert!(shore.server.is_none(), "{case}");
                        assert!(shore.keeper.holds_a_cut_session(), "{case}");
                    }
                    let resumed = resume::resumption(&first, from).unwrap();
                    assert_eq!(resumed.len(), n - from + 1);
                    let mut replies = Vec::new();
                    for u in &resumed {
                        replies.extend(shore.receive(u, now));
                    }
                    assert_eq!(shore.copies, held - from, "{case}");
                    assert_eq!(shore.refused, 0, "{case}");
                    assert_eq!(
                        shore.owner.spooled.len(),
                        originals.len(),
                        "{case}: each message spooled once"
                    );
                    assert!(
                        shore
                            .owner
                            .spooled
                            .iter()
                            .all(|(_, b)| originals.contains(b)),
                        "{case}: intact"
                    );
                    assert_eq!(replies.len(), 1, "{case}: one transmission of replies");
                    for u in &replies[0] {
                        client.receive(u);
                    }
                    let outcome = client.outcome().expect("the session ends");
                    assert!(all_delivered(outcome), "{case}: {outcome:?}");
                    assert_eq!(outcome.peer_resumes, Some(true), "{case}");
                }
            }
        }
    }
}

#[test]
fn a_resume_marker_without_its_session_is_refused_and_its_rest_dropped() {
    // The server restarted since the cut, or took another session of the peer's: it has no
    // tape that matches. It refuses at once, drops the rest of the resumed session, and reads
    // the client's next session, whole, as a new stream.
    let mtu = 512;
    let now = Instant::now();
    for compression in SCHEMES {
        let batch = messages(4, 3);
        let (_, first) = submitted(batch.clone(), compression, mtu);
        let mut shore = Resuming::new(mtu);
        let resumed = resume::resumption(&first, 2).unwrap();
        let mut replies = Vec::new();
        for u in &resumed {
            replies.extend(shore.receive(u, now));
        }
        assert_eq!(
            replies,
            vec![vec![resume::REFUSAL.to_vec()]],
            "{compression:?}"
        );
        assert!(shore.owner.spooled.is_empty());
        assert!(
            shore.server.is_none(),
            "{compression:?}: nothing read of the rest"
        );
        let (mut client, again) = submitted(batch, compression, mtu);
        for u in &again {
            replies.extend(shore.receive(u, now));
        }
        for u in &replies[1] {
            client.receive(u);
        }
        assert!(all_delivered(client.outcome().unwrap()), "{compression:?}");
        assert_eq!(shore.owner.spooled.len(), 4);

        // Another session of the peer's after a cut ends the tape kept: a marker for the cut
        // one is then refused.
        let mut shore = Resuming::new(mtu);
        shore.read_cut(&first[..3], now);
        shore.time_out(now);
        let (_, other) = submitted(messages(1, 9), compression, mtu);
        for u in &other {
            shore.receive(u, now);
        }
        assert!(!shore.keeper.holds_a_cut_session());
        for u in &resumed {
            shore.receive(u, now);
        }
        assert_eq!(shore.refused, 1, "{compression:?}");

        // So does the cut marker.
        let mut shore = Resuming::new(mtu);
        shore.read_cut(&first[..3], now);
        shore.time_out(now);
        shore.receive(skywave_hmtp::cut::MARKER, now);
        assert!(!shore.keeper.holds_a_cut_session());
    }
}

#[test]
fn a_resume_marker_restarts_the_waits_of_the_session_it_goes_on_with() {
    // The rest of a session cut short may take minutes on the air: the server, still waiting
    // for it, waits from the marker on, not from the last U_PDU before the cut.
    let mtu = 512;
    let now = Instant::now();
    let (_, first) = submitted(messages(4, 3), Compression::Deflate, mtu);
    let mut shore = Resuming::new(mtu);
    shore.read_cut(&first[..3], now);
    let deadline = shore.server.as_ref().unwrap().poll_timeout().unwrap();
    let marker = &resume::resumption(&first, 2).unwrap()[0];
    let later = deadline - Duration::from_secs(1);
    assert!(shore.receive(marker, later).is_empty());
    let moved = shore.server.as_ref().unwrap().poll_timeout().unwrap();
    assert_eq!(
        moved - later,
        deadline - now,
        "the same wait, from the marker"
    );
}

#[test]
fn a_quiet_timeout_sends_no_421_to_a_client_that_goes_on() {
    // Towards a skywave peer with XRESUME the server gives a session cut short up at its
    // timeout without a word; towards any other it answers 421 with the replies held.
    let mtu = 512;
    let now = Instant::now();
    let (_, first) = submitted(messages(4, 3), Compression::Deflate, mtu);
    for quiet in [false, true] {
        let mut shore = Resuming::new(mtu);
        shore.quiet = quiet;
        shore.read_cut(&first[..3], now);
        let sent = shore.time_out(now);
        assert_eq!(sent.is_empty(), quiet, "quiet {quiet}: {sent:?}");
        assert!(matches!(
            shore.owner.closed.last(),
            Some(ServerEnd::Session(
                CloseReason::IdleTimeout | CloseReason::DataTimeout
            ))
        ));
        assert!(shore.keeper.holds_a_cut_session(), "kept either way");
    }
}

#[test]
fn a_421_from_the_server_that_gave_the_cut_session_up_does_not_end_the_one_going_on() {
    // The shore's server gave the cut session up at its timeout and said 421, naming the
    // octets it had read: the first of the session that goes on with it. That 421 can reach
    // the ship after the session going on has begun; read as its end, the mail would go again
    // whole although the shore delivers it. A client going on sets it aside.
    let mtu = 512;
    let now = Instant::now();
    for compression in SCHEMES {
        let batch = messages(4, 3);
        let (_, first) = submitted(batch.clone(), compression, mtu);
        let mut shore = Resuming::new(mtu);
        shore.read_cut(&first[..3], now);
        let old = shore.time_out(now);
        assert_eq!(
            old.len(),
            1,
            "{compression:?}: the 421 and the replies held"
        );
        let mut replies = Vec::new();
        for u in &resume::resumption(&first, 2).unwrap() {
            replies.extend(shore.receive(u, now));
        }
        assert_eq!(replies.len(), 1, "{compression:?}");
        for going_on in [true, false] {
            let (mut client, _) = submitted(batch.clone(), compression, mtu);
            if going_on {
                client.going_on();
            }
            for u in &old[0] {
                client.receive(u);
            }
            if !going_on {
                // As any client reads a 421 that proves it read our first octets.
                let outcome = client.outcome().expect("ended");
                assert!(matches!(outcome.end, SessionEnd::ServiceClosing(_)));
                continue;
            }
            assert!(
                client.outcome().is_none(),
                "{compression:?}: not this session's end"
            );
            assert_eq!(client.stale_reply_streams(), 1);
            for u in &replies[0] {
                client.receive(u);
            }
            assert!(all_delivered(client.outcome().unwrap()), "{compression:?}");
        }
    }
}

#[test]
fn a_copy_that_differs_puts_the_session_out_of_step() {
    let mtu = 512;
    let now = Instant::now();
    let (_, first) = submitted(messages(4, 3), Compression::Deflate, mtu);
    let mut shore = Resuming::new(mtu);
    shore.read_cut(&first[..4], now);
    let mut resumed = resume::resumption(&first, 2).unwrap();
    resumed[2][0] ^= 1;
    assert_eq!(
        shore.keeper.check(&resumed[0], true),
        ResumeVerdict::GoOn { copies: 2 }
    );
    assert_eq!(shore.keeper.check(&resumed[1], true), ResumeVerdict::Copy);
    assert_eq!(
        shore.keeper.check(&resumed[2], true),
        ResumeVerdict::OutOfStep
    );
    assert_eq!(shore.keeper.check(&resumed[3], true), ResumeVerdict::Pass);
}

/// UTF-8 header fields to a peer other than a skywave gateway: its EHLO reply says whether it
/// offers SMTPUTF8, and the next session goes by it (with the parameter, or made ASCII); a
/// skywave peer, or one not heard yet, gets them as they are, without the parameter.
#[test]
fn utf8_header_fields_go_as_the_peer_said_of_smtputf8() {
    let mut batch = messages(1, 12);
    batch[0].body = "From: J\u{f6}rg <a@ship.example>\r\nSubject: Gr\u{fc}\u{df}e\r\n\r\nHallo\r\n"
        .as_bytes()
        .to_vec();
    batch[0].eight_bit = true;
    let ascii = "From: =?utf-8?b?SsO2cmc=?= <a@ship.example>\r\n\
                 Subject: =?utf-8?b?R3LDvMOfZQ==?=\r\n\r\nHallo\r\n";
    for compression in SCHEMES {
        let settings = ClientSettings::new("ship.example", 512, compression);
        for (offers, said, want, param) in [
            (false, None, batch[0].body.clone(), false),
            (false, Some(false), ascii.as_bytes().to_vec(), false),
            (true, Some(true), batch[0].body.clone(), true),
        ] {
            let mut config = server_settings(512);
            config.smtp.smtputf8 = offers;
            let mut owner = Owner::new();
            let mut server = HmtpServer::new(config, AcceptAll, Instant::now()).unwrap();
            let told = ClientSettings {
                smtputf8: said,
                ..settings.clone()
            };
            let (outcome, _, _, _) = session_with(told, batch.clone(), &mut server, &mut owner);
            assert_eq!(outcome.peer_smtputf8, Some(offers));
            assert_eq!(owner.spooled.len(), 1, "{said:?}");
            let (envelope, body) = &owner.spooled[0];
            assert_eq!(
                String::from_utf8_lossy(body),
                String::from_utf8_lossy(&want),
                "{said:?}"
            );
            assert_eq!(envelope.smtputf8, param, "{said:?}");
        }
    }
}
