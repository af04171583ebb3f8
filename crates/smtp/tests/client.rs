//! Client session tests: byte-exact commands per mode, reply handling, and client/server sessions
//! driven against each other in memory in every mode.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Instant;

use common::{RejectUnknown, run};
use skywave_smtp::client::{ClientError, Extensions, RecipientStatus};
use skywave_smtp::{
    ClientConfig, ClientEvent, ClientMode, ClientSession, OutgoingMessage, ServerConfig,
    ServerSession,
};

fn msg(from: &str, to: &[&str], body: &str) -> OutgoingMessage {
    OutgoingMessage {
        reverse_path: from.into(),
        recipients: to.iter().map(|s| (*s).to_owned()).collect(),
        body: body.as_bytes().to_vec(),
        eight_bit: false,
        mt_priority: None,
        dsn: Default::default(),
        rcpt_dsn: Vec::new(),
    }
}

fn text(c: &mut ClientSession) -> String {
    String::from_utf8(c.take_output()).unwrap()
}

/// Feeds each reply in turn and checks what the client sends after it.
fn exchange(c: &mut ClientSession, steps: &[(&[u8], &str)]) {
    for (reply, sent) in steps {
        c.feed(reply);
        assert_eq!(text(c), *sent, "after {:?}", String::from_utf8_lossy(reply));
    }
}

const EHLO_PIPE: &[u8] = b"250-mx\r\n250-PIPELINING\r\n250-SIZE 1000\r\n250 8BITMIME\r\n";

#[test]
fn lockstep_sends_one_command_per_reply() {
    let mut m = msg("a@x", &["b@y", "c@y"], "Hi\r\n.dot\r\n");
    m.eight_bit = true;
    m.mt_priority = Some(2);
    let mut c = ClientSession::new(ClientConfig::new("gw", ClientMode::Lockstep), vec![m]).unwrap();
    assert_eq!(text(&mut c), "");
    exchange(
        &mut c,
        &[
            (b"220 mx ESMTP\r\n", "EHLO gw\r\n"),
            (EHLO_PIPE, "MAIL FROM:<a@x> SIZE=10 BODY=8BITMIME\r\n"),
        ],
    );
    assert_eq!(c.server_extensions().unwrap().size, Some(1000));
    exchange(
        &mut c,
        &[
            (b"250 2.1.0 Ok\r\n", "RCPT TO:<b@y>\r\n"),
            (b"250 2.1.5 Ok\r\n", "RCPT TO:<c@y>\r\n"),
            (b"550 5.1.1 No such user\r\n", "DATA\r\n"),
            (b"354 go\r\n", "Hi\r\n..dot\r\n.\r\n"),
            (b"250 2.0.0 queued\r\n", "QUIT\r\n"),
        ],
    );
    let ClientEvent::Message(outcome) = c.poll_event().unwrap() else {
        panic!("expected a message outcome");
    };
    assert!(matches!(
        outcome.recipients[0].status,
        RecipientStatus::Delivered(_)
    ));
    assert!(matches!(&outcome.recipients[1].status, RecipientStatus::Failed(r) if r.code == 550));
    c.feed(b"221 bye\r\n");
    assert_eq!(c.poll_event(), Some(ClientEvent::Finished { error: None }));
}

#[test]
fn eight_bit_text_goes_as_7bit_to_a_server_without_8bitmime() {
    let mut m = msg("a@x", &["b@y"], "Subject: x\r\n\r\n270\u{b0}\r\n");
    m.eight_bit = true;
    // A UTF-8 header field is made ASCII (RFC 6857), an RFC 2047 encoded-word.
    let mut header = msg("a@x", &["b@y"], "Subject: 270\u{b0}\r\n\r\nx\r\n");
    header.eight_bit = true;
    // Not convertible: a header field that is not UTF-8 goes as it is (with a warning), as
    // before.
    let mut raw = msg("a@x", &["b@y"], "");
    raw.body = b"Subject: 270\xb0\r\n\r\nx\r\n".to_vec();
    raw.eight_bit = true;
    let mut c = ClientSession::new(
        ClientConfig::new("gw", ClientMode::Lockstep),
        vec![m, header, raw],
    )
    .unwrap();
    exchange(
        &mut c,
        &[
            (b"220 mx ESMTP\r\n", "EHLO gw\r\n"),
            // EHLO refused: HELO, and no extension at all.
            (b"500 what\r\n", "HELO gw\r\n"),
            (b"250 mx\r\n", "MAIL FROM:<a@x>\r\n"),
            (b"250 ok\r\n", "RCPT TO:<b@y>\r\n"),
            (b"250 ok\r\n", "DATA\r\n"),
            (
                b"354 go\r\n",
                "Subject: x\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\
                 Content-Transfer-Encoding: quoted-printable\r\n\r\n270=C2=B0\r\n.\r\n",
            ),
            (b"250 queued\r\n", "MAIL FROM:<a@x>\r\n"),
            (b"250 ok\r\n", "RCPT TO:<b@y>\r\n"),
            (b"250 ok\r\n", "DATA\r\n"),
            (
                b"354 go\r\n",
                "Subject: =?utf-8?b?MjcwwrA=?=\r\n\r\nx\r\n.\r\n",
            ),
            (b"250 queued\r\n", "MAIL FROM:<a@x>\r\n"),
            (b"250 ok\r\n", "RCPT TO:<b@y>\r\n"),
            (b"250 ok\r\n", "DATA\r\n"),
        ],
    );
    c.feed(b"354 go\r\n");
    assert_eq!(c.take_output(), b"Subject: 270\xb0\r\n\r\nx\r\n.\r\n");
}

#[test]
fn utf8_header_fields_go_made_ascii_to_a_server_without_smtputf8() {
    let mut m = msg(
        "a@x",
        &["b@y"],
        "Subject: Gr\u{fc}\u{df}e\r\n\r\nK\u{f8}ye\r\n",
    );
    m.eight_bit = true;
    let mut c = ClientSession::new(
        ClientConfig::new("gw", ClientMode::Pipelining),
        vec![m.clone()],
    )
    .unwrap();
    exchange(
        &mut c,
        &[
            (b"220 mx ESMTP\r\n", "EHLO gw\r\n"),
            // 8BITMIME without SMTPUTF8: the body stays 8-bit, the header field is encoded.
            (
                b"250-mx\r\n250 8BITMIME\r\n",
                "MAIL FROM:<a@x> BODY=8BITMIME\r\n",
            ),
            (b"250 ok\r\n", "RCPT TO:<b@y>\r\n"),
            (b"250 ok\r\n", "DATA\r\n"),
            (
                b"354 go\r\n",
                "Subject: =?utf-8?b?R3LDvMOfZQ==?=\r\n\r\nK\u{f8}ye\r\n.\r\n",
            ),
        ],
    );
    // In batch mode (HMTP) the peer is assumed to take UTF-8 header fields as they are.
    let mut config = ClientConfig::new("gw", ClientMode::Batch);
    config.expect_greeting = false;
    config.batch_extensions.eight_bit_mime = true;
    let mut c = ClientSession::new(config, vec![m]).unwrap();
    let batch = text(&mut c);
    assert!(batch.contains("Subject: Gr\u{fc}\u{df}e\r\n"), "{batch}");
}

#[test]
fn smtputf8_goes_with_mail_that_needs_it_when_the_server_offers_it() {
    let intl = msg("j\u{f6}rg@x", &["b@y"], "Subject: x\r\n\r\nx\r\n");
    let header = msg("a@x", &["b@y"], "Subject: Gr\u{fc}\u{df}e\r\n\r\nx\r\n");
    let ascii = msg("a@x", &["b@y"], "Subject: x\r\n\r\nx\r\n");
    let mut c = ClientSession::new(
        ClientConfig::new("gw", ClientMode::Lockstep),
        vec![intl, header, ascii],
    )
    .unwrap();
    c.feed(b"220 mx ESMTP\r\n");
    text(&mut c);
    c.feed(b"250-mx\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n");
    let mut mails = Vec::new();
    for _ in 0..3 {
        mails.push(text(&mut c));
        for reply in ["250 ok\r\n", "250 ok\r\n", "354 go\r\n"] {
            c.feed(reply.as_bytes());
            text(&mut c);
        }
        c.feed(b"250 queued\r\n");
    }
    assert_eq!(
        mails,
        [
            "MAIL FROM:<j\u{f6}rg@x> SMTPUTF8\r\n",
            "MAIL FROM:<a@x> SMTPUTF8\r\n",
            "MAIL FROM:<a@x>\r\n"
        ]
    );
}

#[test]
fn pipelining_sends_groups_and_rset_after_failed_data() {
    let msgs = vec![
        msg("a@x", &["unknown@y"], "one\r\n"),
        msg("a@x", &["b@y"], "two\r\n"),
    ];
    let mut c = ClientSession::new(ClientConfig::new("gw", ClientMode::Pipelining), msgs).unwrap();
    c.feed(b"220 mx\r\n");
    assert_eq!(text(&mut c), "EHLO gw\r\n");
    c.feed(EHLO_PIPE);
    assert_eq!(
        text(&mut c),
        "MAIL FROM:<a@x> SIZE=5\r\nRCPT TO:<unknown@y>\r\nDATA\r\n"
    );
    c.feed(b"250 ok\r\n550 no\r\n");
    assert_eq!(text(&mut c), "");
    c.feed(b"554 no valid recipients\r\n");
    assert_eq!(text(&mut c), "RSET\r\n");
    c.feed(b"250 ok\r\n");
    assert_eq!(
        text(&mut c),
        "MAIL FROM:<a@x> SIZE=5\r\nRCPT TO:<b@y>\r\nDATA\r\n"
    );
    c.feed(b"250 ok\r\n250 ok\r\n354 go\r\n");
    assert_eq!(text(&mut c), "two\r\n.\r\n");
}

#[test]
fn pipelining_falls_back_to_lockstep_without_the_extension() {
    let mut c = ClientSession::new(
        ClientConfig::new("gw", ClientMode::Pipelining),
        vec![msg("a@x", &["b@y", "c@y"], "x\r\n")],
    )
    .unwrap();
    c.feed(b"220 mx\r\n");
    c.take_output();
    c.feed(b"250 mx\r\n");
    assert_eq!(text(&mut c), "MAIL FROM:<a@x>\r\n");
}

#[test]
fn ehlo_refused_falls_back_to_helo() {
    let mut c = ClientSession::new(
        ClientConfig::new("gw", ClientMode::Lockstep),
        vec![msg("a@x", &["b@y"], "x\r\n")],
    )
    .unwrap();
    c.feed(b"220 old\r\n");
    c.take_output();
    c.feed(b"500 what\r\n");
    assert_eq!(text(&mut c), "HELO gw\r\n");
    c.feed(b"250 old\r\n");
    assert_eq!(text(&mut c), "MAIL FROM:<a@x>\r\n");
}

#[test]
fn batch_sends_everything_at_once() {
    let mut config = ClientConfig::new("gw", ClientMode::Batch);
    config.expect_greeting = false;
    let mut m2 = msg("", &["d@y"], ".\r\n");
    m2.eight_bit = true;
    let c = ClientSession::new(config, vec![msg("a@x", &["b@y", "c@y"], "one"), m2]);
    let mut c = c.unwrap();
    assert_eq!(
        text(&mut c),
        "EHLO gw\r\nMAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nRCPT TO:<c@y>\r\nDATA\r\none\r\n.\r\n\
MAIL FROM:<> BODY=8BITMIME\r\nRCPT TO:<d@y>\r\nDATA\r\n..\r\n.\r\nQUIT\r\n"
    );
}

#[test]
fn service_closing_defers_everything_in_flight() {
    let msgs = vec![msg("a@x", &["b@y"], "1\r\n"), msg("a@x", &["c@y"], "2\r\n")];
    let mut c = ClientSession::new(ClientConfig::new("gw", ClientMode::Lockstep), msgs).unwrap();
    c.feed(b"220 mx\r\n250 mx\r\n250 ok\r\n421 4.3.2 shutting down\r\n");
    let mut outcomes = Vec::new();
    let mut finished = None;
    while let Some(ev) = c.poll_event() {
        match ev {
            ClientEvent::Message(m) => outcomes.push(m),
            ClientEvent::Finished { error } => finished = Some(error),
        }
    }
    assert!(matches!(
        finished,
        Some(Some(ClientError::ServiceClosing(_)))
    ));
    assert_eq!(outcomes.len(), 2);
    assert!(
        matches!(&outcomes[0].recipients[0].status, RecipientStatus::Deferred(r) if r.code == 421)
    );
    assert_eq!(outcomes[1].recipients[0].status, RecipientStatus::Unknown);
}

#[test]
fn connection_lost_after_the_dot_leaves_the_outcome_unknown() {
    let mut c = ClientSession::new(
        ClientConfig::new("gw", ClientMode::Lockstep),
        vec![msg("a@x", &["b@y"], "1\r\n")],
    )
    .unwrap();
    c.feed(b"220 mx\r\n250 mx\r\n250 ok\r\n250 ok\r\n354 go\r\n");
    c.connection_closed();
    let Some(ClientEvent::Message(m)) = c.poll_event() else {
        panic!("expected an outcome");
    };
    assert_eq!(m.recipients[0].status, RecipientStatus::Unknown);
    assert_eq!(
        c.poll_event(),
        Some(ClientEvent::Finished {
            error: Some(ClientError::ConnectionClosed)
        })
    );
}

#[test]
fn garbage_and_unexpected_replies_end_the_session() {
    let mut c = ClientSession::new(ClientConfig::new("gw", ClientMode::Lockstep), vec![]).unwrap();
    c.feed(b"hello\r\n");
    assert!(matches!(
        c.poll_event(),
        Some(ClientEvent::Finished {
            error: Some(ClientError::BadReply(_))
        })
    ));
    let mut c = ClientSession::new(ClientConfig::new("gw", ClientMode::Lockstep), vec![]).unwrap();
    c.feed(b"220 a\r\n250 b\r\n221 c\r\n250 extra\r\n");
    assert_eq!(c.poll_event(), Some(ClientEvent::Finished { error: None }));
    let mut c = ClientSession::new(ClientConfig::new("gw", ClientMode::Lockstep), vec![]).unwrap();
    c.feed(b"554 go away\r\n");
    assert_eq!(text(&mut c), "QUIT\r\n");
    assert!(matches!(
        c.poll_event(),
        Some(ClientEvent::Finished {
            error: Some(ClientError::Refused(_))
        })
    ));
}

#[test]
fn addresses_that_would_inject_commands_are_refused() {
    for bad in ["a@x>\r\nRCPT TO:<evil", "a b@x", "<a@x>"] {
        let r = ClientSession::new(
            ClientConfig::new("gw", ClientMode::Lockstep),
            vec![msg(bad, &["b@y"], "")],
        );
        assert!(matches!(r, Err(ClientError::BadAddress(_))), "{bad:?}");
    }
}

fn batch_of_messages() -> Vec<OutgoingMessage> {
    vec![
        msg(
            "a@x",
            &["b@y", "unknown1@y"],
            "Subject: 1\r\n\r\n.leading dot\r\n..two\r\n",
        ),
        msg(
            "a@x",
            &["unknown2@y"],
            "Subject: 2\r\n\r\nnever delivered\r\n.\r\nQUIT\r\n",
        ),
        msg("", &["c@y"], "Subject: 3\r\n\r\n"),
    ]
}

fn client(mode: ClientMode) -> ClientSession {
    let mut config = ClientConfig::new("gw", mode);
    config.expect_greeting = mode != ClientMode::Batch;
    if mode == ClientMode::Batch {
        config.batch_extensions = Extensions {
            size: Some(0),
            eight_bit_mime: true,
            mt_priority: true,
            ..Extensions::default()
        };
    }
    ClientSession::new(config, batch_of_messages()).unwrap()
}

fn server(mode: ClientMode) -> ServerSession<RejectUnknown> {
    let config = if mode == ClientMode::Batch {
        ServerConfig::hmtp("mx")
    } else {
        ServerConfig::new("mx")
    };
    ServerSession::new(config, RejectUnknown, Instant::now())
}

#[test]
fn every_mode_delivers_the_same_against_our_server() {
    let mut turns = Vec::new();
    for mode in [
        ClientMode::Lockstep,
        ClientMode::Pipelining,
        ClientMode::Batch,
    ] {
        let r = run(client(mode), server(mode), &[]);
        assert_eq!(r.error, None, "{mode:?}");
        assert_eq!(r.delivered.len(), 2, "{mode:?}");
        assert_eq!(
            r.delivered[0].1,
            b"Subject: 1\r\n\r\n.leading dot\r\n..two\r\n"
        );
        assert_eq!(r.delivered[0].0.recipients, vec!["b@y"]);
        assert_eq!(r.delivered[1].1, b"Subject: 3\r\n\r\n");
        assert_eq!(r.outcomes.len(), 3);
        let statuses: Vec<Vec<u16>> = r
            .outcomes
            .iter()
            .map(|m| {
                m.recipients
                    .iter()
                    .map(|rc| match &rc.status {
                        RecipientStatus::Delivered(r)
                        | RecipientStatus::Deferred(r)
                        | RecipientStatus::Failed(r) => r.code,
                        RecipientStatus::Unknown => 0,
                    })
                    .collect()
            })
            .collect();
        assert_eq!(
            statuses,
            vec![vec![250, 550], vec![550], vec![250]],
            "{mode:?}"
        );
        turns.push((r.client_turns, r.server_turns));
    }
    // HMTP: one transmission each way for the whole batch.
    assert_eq!(turns[2], (1, 1));
    // Pipelining needs fewer turns than lockstep.
    assert!(turns[1].0 < turns[0].0, "{turns:?}");
}

#[test]
fn every_mode_survives_one_byte_pieces() {
    for mode in [
        ClientMode::Lockstep,
        ClientMode::Pipelining,
        ClientMode::Batch,
    ] {
        let r = run(client(mode), server(mode), &[1]);
        assert_eq!(r.error, None, "{mode:?}");
        assert_eq!(r.delivered.len(), 2, "{mode:?}");
    }
}

#[test]
fn dsn_parameters_go_only_to_a_server_that_offers_dsn() {
    let with_dsn = || {
        let mut m = msg("a@x", &["b@y", "c@y"], "x\r\n");
        m.dsn = skywave_smtp::MailDsn {
            ret: Some(skywave_smtp::Ret::Hdrs),
            envid: Some("id 1".into()),
        };
        m.rcpt_dsn = vec![
            skywave_smtp::RcptDsn {
                notify: Some(skywave_smtp::Notify::NEVER),
                orcpt: Some("B@Y".into()),
            },
            skywave_smtp::RcptDsn::default(),
        ];
        m
    };
    let session = |ehlo: &[u8]| {
        let mut c = ClientSession::new(
            ClientConfig::new("gw", ClientMode::Pipelining),
            vec![with_dsn()],
        )
        .unwrap();
        c.feed(b"220 mx\r\n");
        c.take_output();
        c.feed(ehlo);
        text(&mut c)
    };
    assert_eq!(
        session(b"250-mx\r\n250-PIPELINING\r\n250 DSN\r\n"),
        "MAIL FROM:<a@x> RET=HDRS ENVID=id+201\r\nRCPT TO:<b@y> NOTIFY=NEVER ORCPT=rfc822;B@Y\r\n\
         RCPT TO:<c@y>\r\nDATA\r\n"
    );
    assert_eq!(
        session(b"250-mx\r\n250 PIPELINING\r\n"),
        "MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nRCPT TO:<c@y>\r\nDATA\r\n"
    );
    // In batch mode (HMTP) there is no reply to read first: what the owner assumes.
    let mut config = ClientConfig::new("gw", ClientMode::Batch);
    config.expect_greeting = false;
    config.batch_extensions.dsn = true;
    let mut c = ClientSession::new(config, vec![with_dsn()]).unwrap();
    let out = text(&mut c);
    assert!(
        out.contains("MAIL FROM:<a@x> RET=HDRS ENVID=id+201\r\nRCPT TO:<b@y> NOTIFY=NEVER"),
        "{out}"
    );
}
