//! Server session tests with byte-exact replies: whole sessions, pipelining, HMTP-66 buffering,
//! every bad-input case of the issue, STARTTLS/AUTH, and the smuggling vectors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use skywave_smtp::{
    AuthMode, BodyType, CloseReason, Credentials, EnhancedCode, Envelope, Event, Policy, Protocol,
    Reply, ServerConfig, ServerSession, SessionError, SessionInfo, TlsInfo, Verdict,
};

/// Refuses recipients containing "unknown", the sender "blocked@x", knows alice/secret.
#[derive(Debug, Default)]
struct TestPolicy;

impl Policy for TestPolicy {
    fn mail_from(&mut self, _: &SessionInfo, mail: &skywave_smtp::MailRequest) -> Verdict {
        if mail.reverse_path == "blocked@x" {
            Verdict::Reject(Reply::new(
                550,
                EnhancedCode::new(5, 7, 1),
                "Sender refused",
            ))
        } else {
            Verdict::Accept
        }
    }

    fn rcpt_to(&mut self, _: &SessionInfo, _: &Envelope, rcpt: &str) -> Verdict {
        if rcpt.contains("unknown") {
            Verdict::Reject(Reply::new(550, EnhancedCode::new(5, 1, 1), "No such user"))
        } else {
            Verdict::Accept
        }
    }

    fn authenticate(&mut self, _: &SessionInfo, c: &Credentials) -> bool {
        c.username == "alice" && c.password == "secret"
    }
}

struct Harness {
    s: ServerSession<TestPolicy>,
    now: Instant,
    messages: Vec<(Envelope, Vec<u8>)>,
    closed: Option<CloseReason>,
    starttls: usize,
    auto_accept: bool,
    next_id: usize,
}

impl Harness {
    fn new(config: ServerConfig) -> Self {
        let now = Instant::now();
        Self {
            s: ServerSession::new(config, TestPolicy, now),
            now,
            messages: Vec::new(),
            closed: None,
            starttls: 0,
            auto_accept: true,
            next_id: 0,
        }
    }

    fn plain() -> Self {
        Self::new(ServerConfig::new("mx.test"))
    }

    /// Feeds bytes, answers events, returns the output as a string.
    fn send(&mut self, bytes: &[u8]) -> String {
        self.s.feed(self.now, bytes);
        self.pump();
        String::from_utf8(self.s.take_output()).unwrap()
    }

    fn pump(&mut self) {
        while let Some(ev) = self.s.poll_event() {
            match ev {
                Event::Message { envelope, body } => {
                    self.messages.push((envelope, body));
                    if self.auto_accept {
                        self.next_id += 1;
                        self.s
                            .message_accepted(&format!("Q{}", self.next_id))
                            .unwrap();
                    }
                }
                Event::StartTls => self.starttls += 1,
                Event::Authenticated { .. } => {}
                Event::Close(r) => self.closed = Some(r),
            }
        }
    }

    fn out(&mut self) -> String {
        String::from_utf8(self.s.take_output()).unwrap()
    }
}

const EHLO_REPLY: &str = "250-mx.test\r\n250-PIPELINING\r\n250-SIZE 10485760\r\n250-8BITMIME\r\n\
                          250-ENHANCEDSTATUSCODES\r\n250-MT-PRIORITY\r\n250 HELP\r\n";

/// The HMTP profile's EHLO reply: skywave's XSUM too.
const HMTP_EHLO_REPLY: &str = "250-mx.test\r\n250-PIPELINING\r\n250-SIZE 10485760\r\n\
250-8BITMIME\r\n250-ENHANCEDSTATUSCODES\r\n250-MT-PRIORITY\r\n250-XSUM\r\n250 HELP\r\n";

/// The word the HMTP profile's closing reply ends with, after a session that read `read`.
fn xsum(read: &[u8]) -> String {
    format!("XSUM={}:{:016x}", read.len(), skywave_smtp::sum::of(read))
}

#[test]
fn full_session_lockstep() {
    let mut h = Harness::plain();
    assert_eq!(h.out(), "220 mx.test ESMTP skywave\r\n");
    assert_eq!(h.send(b"EHLO client.lan\r\n"), EHLO_REPLY);
    assert_eq!(
        h.send(b"MAIL FROM:<a@x> SIZE=20 BODY=8BITMIME MT-PRIORITY=3\r\n"),
        "250 2.1.0 Ok\r\n"
    );
    assert_eq!(h.send(b"RCPT TO:<b@y>\r\n"), "250 2.1.5 Ok\r\n");
    assert_eq!(h.send(b"RCPT TO:<c@y>\r\n"), "250 2.1.5 Ok\r\n");
    assert_eq!(
        h.send(b"DATA\r\n"),
        "354 End data with <CR><LF>.<CR><LF>\r\n"
    );
    assert_eq!(h.send(b"Subject: t\r\n\r\n..dot\r\nline\r\n"), "");
    assert_eq!(h.send(b".\r\n"), "250 2.0.0 Ok: queued as Q1\r\n");
    assert_eq!(
        h.send(b"QUIT\r\n"),
        "221 2.0.0 mx.test closing connection\r\n"
    );
    assert_eq!(h.closed, Some(CloseReason::Quit));
    assert!(h.s.is_closed());
    let (env, body) = &h.messages[0];
    assert_eq!(body, b"Subject: t\r\n\r\n.dot\r\nline\r\n");
    assert_eq!(
        env,
        &Envelope {
            reverse_path: "a@x".into(),
            recipients: vec!["b@y".into(), "c@y".into()],
            declared_size: Some(20),
            body_type: BodyType::EightBitMime,
            mt_priority: Some(3),
            helo: "client.lan".into(),
            protocol: Protocol::Esmtp,
            auth_user: None,
            dsn: Default::default(),
            rcpt_dsn: vec![Default::default(); 2],
            smtputf8: false,
        }
    );
    // Nothing after QUIT is processed.
    assert_eq!(h.send(b"NOOP\r\n"), "");
}

const SESSION: &[u8] = b"EHLO c\r\nMAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nRCPT TO:<unknown@y>\r\n\
DATA\r\nhello\r\n.\r\nMAIL FROM:<>\r\nRCPT TO:<d@y>\r\nDATA\r\nsecond\r\n.\r\nQUIT\r\n";

const SESSION_REPLIES: &str = "250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n550 5.1.1 No such user\r\n\
354 End data with <CR><LF>.<CR><LF>\r\n250 2.0.0 Ok: queued as Q1\r\n250 2.1.0 Ok\r\n\
250 2.1.5 Ok\r\n354 End data with <CR><LF>.<CR><LF>\r\n250 2.0.0 Ok: queued as Q2\r\n\
221 2.0.0 mx.test closing connection\r\n";

#[test]
fn pipelined_group_fed_at_once_replies_in_order() {
    let mut h = Harness::plain();
    let out = h.send(SESSION);
    let expected = format!("220 mx.test ESMTP skywave\r\n{EHLO_REPLY}{SESSION_REPLIES}");
    assert_eq!(out, expected);
    assert_eq!(h.messages.len(), 2);
    assert_eq!(h.messages[0].0.recipients, vec!["b@y"]);
    assert_eq!(h.messages[1].0.reverse_path, "");
    assert_eq!(h.messages[1].1, b"second\r\n");
}

#[test]
fn hmtp66_holds_every_reply_until_quit() {
    let mut h = Harness::new(ServerConfig::hmtp("mx.test"));
    assert_eq!(h.out(), "", "no greeting in HMTP");
    let quit_at = SESSION.len() - 6;
    // Everything but QUIT, in two pieces: nothing may come out.
    assert_eq!(h.send(&SESSION[..40]), "");
    assert_eq!(h.send(&SESSION[40..quit_at]), "");
    assert_eq!(
        h.messages.len(),
        2,
        "messages are handed over as they complete"
    );
    let out = h.send(&SESSION[quit_at..]);
    // HMTP EHLO reply has no STARTTLS/AUTH (none configured anyway); the 221 names the sum of
    // the whole session.
    let replies = SESSION_REPLIES.replace(
        "closing connection\r\n",
        &format!("closing connection {}\r\n", xsum(SESSION)),
    );
    assert_eq!(out, format!("{HMTP_EHLO_REPLY}{replies}"));
    assert_eq!(h.closed, Some(CloseReason::Quit));
}

#[test]
fn hmtp66_rejected_data_text_is_discarded_up_to_its_dot() {
    let mut h = Harness::new(ServerConfig::hmtp("mx.test"));
    let input = b"EHLO c\r\nMAIL FROM:<a@x>\r\nRCPT TO:<unknown@y>\r\nDATA\r\n\
MAIL FROM:<evil@x>\r\nRCPT TO:<victim@y>\r\nQUIT\r\n..\r\n\r\n.\r\n\
MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\nreal\r\n.\r\nQUIT\r\n";
    let out = h.send(input);
    assert_eq!(
        out,
        format!(
            "{HMTP_EHLO_REPLY}250 2.1.0 Ok\r\n550 5.1.1 No such user\r\n554 5.5.1 No valid recipients\r\n\
250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n354 End data with <CR><LF>.<CR><LF>\r\n\
250 2.0.0 Ok: queued as Q1\r\n221 2.0.0 mx.test closing connection {}\r\n",
            xsum(input)
        )
    );
    assert_eq!(h.messages.len(), 1);
    assert_eq!(h.messages[0].0.recipients, vec!["b@y"]);
    assert_eq!(h.messages[0].1, b"real\r\n");
}

#[test]
fn without_buffering_rejected_data_is_followed_by_commands() {
    let mut h = Harness::plain();
    h.out();
    let out =
        h.send(b"EHLO c\r\nMAIL FROM:<a@x>\r\nRCPT TO:<unknown@y>\r\nDATA\r\nRSET\r\nNOOP\r\n");
    assert!(out.ends_with("554 5.5.1 No valid recipients\r\n250 2.0.0 Ok\r\n250 2.0.0 Ok\r\n"));
}

#[test]
fn reply_for_message_waits_for_the_spool() {
    let mut h = Harness::plain();
    h.auto_accept = false;
    h.out();
    let out = h.send(b"EHLO c\r\nMAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\nx\r\n.\r\nNOOP\r\n");
    assert!(
        out.ends_with("354 End data with <CR><LF>.<CR><LF>\r\n"),
        "{out}"
    );
    assert!(!h.s.wants_input());
    assert_eq!(h.s.poll_timeout(), None);
    // More input while waiting is buffered, not answered.
    assert_eq!(h.send(b"NOOP\r\n"), "");
    h.s.message_accepted("ID7").unwrap();
    assert_eq!(
        h.out(),
        "250 2.0.0 Ok: queued as ID7\r\n250 2.0.0 Ok\r\n250 2.0.0 Ok\r\n"
    );
    assert_eq!(
        h.s.message_accepted("again"),
        Err(SessionError::NoMessagePending)
    );
    assert!(
        h.send(b"MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\ny\r\n.\r\n")
            .ends_with("354 End data with <CR><LF>.<CR><LF>\r\n")
    );
    h.s.message_rejected(Reply::new(451, EnhancedCode::new(4, 3, 0), "Spool full"))
        .unwrap();
    assert_eq!(h.out(), "451 4.3.0 Spool full\r\n");
    // The transaction is over either way.
    assert_eq!(
        h.send(b"RCPT TO:<b@y>\r\n"),
        "503 5.5.1 Need MAIL before RCPT\r\n"
    );
}

#[test]
fn commands_in_reply_to_simple_verbs() {
    let mut h = Harness::plain();
    h.out();
    assert_eq!(h.send(b"HELO old\r\n"), "250 mx.test\r\n");
    assert_eq!(h.send(b"NOOP\r\n"), "250 2.0.0 Ok\r\n");
    assert_eq!(h.send(b"RSET\r\n"), "250 2.0.0 Ok\r\n");
    assert_eq!(
        h.send(b"VRFY bob\r\n"),
        "252 2.5.0 Cannot VRFY user, but will accept message and attempt delivery\r\n"
    );
    assert_eq!(
        h.send(b"HELP\r\n"),
        "214-2.0.0 Commands: EHLO HELO MAIL RCPT DATA RSET NOOP QUIT VRFY HELP STARTTLS AUTH XLZW\r\n\
214 2.0.0 See RFC 5321\r\n"
    );
    assert_eq!(
        h.send(b"EXPN list\r\n"),
        "502 5.5.1 Command not implemented\r\n"
    );
    assert_eq!(
        h.send(b"XLZW 17 0\r\n"),
        "500 5.5.4 Syntax: XLZW <bits 9-16> <mode 0-1>\r\n"
    );
    // ESMTP parameters after HELO are refused.
    assert_eq!(
        h.send(b"MAIL FROM:<a@x> SIZE=10\r\n"),
        "555 5.5.4 MAIL parameters not recognized or not implemented\r\n"
    );
    assert!(
        h.send(b"MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\nx\r\n.\r\n")
            .ends_with("250 2.0.0 Ok: queued as Q1\r\n")
    );
    assert_eq!(h.messages[0].0.protocol, Protocol::Smtp);
}

#[test]
fn sequence_and_syntax_errors() {
    let mut h = Harness::plain();
    h.out();
    assert_eq!(
        h.send(b"MAIL FROM:<a@x>\r\n"),
        "503 5.5.1 Send HELO/EHLO first\r\n"
    );
    h.send(b"EHLO c\r\n");
    assert_eq!(
        h.send(b"RCPT TO:<b@y>\r\n"),
        "503 5.5.1 Need MAIL before RCPT\r\n"
    );
    assert_eq!(h.send(b"DATA\r\n"), "503 5.5.1 Need MAIL command\r\n");
    assert_eq!(h.send(b"FOO bar\r\n"), "500 5.5.2 Command unrecognized\r\n");
    assert_eq!(h.send(b"\r\n"), "500 5.5.2 Command unrecognized\r\n");
    assert_eq!(
        h.send(b"MAIL TO:<a@x>\r\n"),
        "501 5.5.4 Syntax: MAIL FROM:<reverse-path> [parameters]\r\n"
    );
    assert_eq!(h.send(b"EHLO\r\n"), "501 5.5.4 Syntax: EHLO domain\r\n");
    assert_eq!(
        h.send(b"MAIL FROM:<a@x> SIZE=abc\r\n"),
        "501 5.5.4 Invalid SIZE parameter\r\n"
    );
    assert_eq!(
        h.send(b"MAIL FROM:<a@x> FOO=1\r\n"),
        "555 5.5.4 Unsupported parameter FOO=1\r\n"
    );
    assert_eq!(
        h.send(b"MAIL FROM:<a@x> BODY=BINARYMIME\r\n"),
        "555 5.5.4 MAIL parameters not recognized or not implemented\r\n"
    );
    assert_eq!(
        h.send(b"MAIL FROM:<a@x> MT-PRIORITY=10\r\n"),
        "501 5.5.4 Invalid MT-PRIORITY value (must be -9 to 9)\r\n"
    );
    assert_eq!(
        h.send(b"MAIL FROM:<a@x> MT-PRIORITY=-9\r\n"),
        "250 2.1.0 Ok\r\n"
    );
    assert_eq!(
        h.send(b"MAIL FROM:<a@x>\r\n"),
        "503 5.5.1 Nested MAIL command\r\n"
    );
    assert_eq!(
        h.send(b"RCPT TO:<b@y> NOTIFY=NEVER\r\n"),
        "555 5.5.4 RCPT parameters not recognized or not implemented\r\n"
    );
    assert_eq!(
        h.send(b"RCPT TO:<>\r\n"),
        "501 5.1.3 Null recipient not allowed\r\n"
    );
    assert_eq!(
        h.send(b"RSET\r\nMAIL FROM:<blocked@x>\r\n"),
        "250 2.0.0 Ok\r\n550 5.7.1 Sender refused\r\n"
    );
}

#[test]
fn too_many_errors_close_with_421() {
    let mut config = ServerConfig::new("mx.test");
    config.max_errors = 3;
    let mut h = Harness::new(config);
    h.out();
    let out = h.send(b"BAD\r\nBAD\r\nBAD\r\nBAD\r\nNOOP\r\n");
    assert_eq!(
        out,
        "500 5.5.2 Command unrecognized\r\n500 5.5.2 Command unrecognized\r\n\
500 5.5.2 Command unrecognized\r\n500 5.5.2 Command unrecognized\r\n\
421 4.7.0 mx.test Too many errors, closing connection\r\n"
    );
    assert_eq!(h.closed, Some(CloseReason::TooManyErrors));
}

#[test]
fn policy_rejections_and_their_followers_are_not_errors() {
    let mut config = ServerConfig::new("mx.test");
    config.max_errors = 1;
    let mut h = Harness::new(config);
    h.out();
    let mut input = b"EHLO c\r\n".to_vec();
    for _ in 0..5 {
        input.extend_from_slice(b"MAIL FROM:<blocked@x>\r\nRCPT TO:<b@y>\r\nDATA\r\n");
        input.extend_from_slice(
            b"RSET\r\nMAIL FROM:<a@x>\r\nRCPT TO:<unknown@y>\r\nDATA\r\nRSET\r\n",
        );
    }
    h.send(&input);
    assert_eq!(h.closed, None);
}

#[test]
fn too_many_commands_close_with_421() {
    let mut config = ServerConfig::new("mx.test");
    config.max_commands = 2;
    let mut h = Harness::new(config);
    h.out();
    assert_eq!(
        h.send(b"NOOP\r\nNOOP\r\nNOOP\r\n"),
        "250 2.0.0 Ok\r\n250 2.0.0 Ok\r\n421 4.7.0 mx.test Too many commands, closing connection\r\n"
    );
    assert_eq!(h.closed, Some(CloseReason::TooManyCommands));
}

#[test]
fn overlong_command_lines() {
    let mut config = ServerConfig::new("mx.test");
    config.max_command_line = 64;
    let mut h = Harness::new(config);
    h.out();
    // 62 octets of command plus CRLF is the most allowed.
    let ok = format!("NOOP {}\r\n", "a".repeat(57));
    assert_eq!(ok.len(), 64);
    assert_eq!(h.send(ok.as_bytes()), "250 2.0.0 Ok\r\n");
    let long = format!("NOOP {}\r\n", "a".repeat(58));
    let reply = "500 5.5.6 Line too long (limit 64 octets)\r\n";
    assert_eq!(h.send(long.as_bytes()), reply);
    // A very long line in small pieces: nothing until its end, one reply, then in step again.
    let huge = format!("MAIL FROM:<{}@x>", "a".repeat(10_000));
    for piece in huge.as_bytes().chunks(7) {
        assert_eq!(h.send(piece), "");
    }
    assert_eq!(h.send(b"\r\nNOOP\r\n"), format!("{reply}250 2.0.0 Ok\r\n"));
}

#[test]
fn bare_lf_cr_and_nul_in_commands() {
    let mut h = Harness::plain();
    h.out();
    // Bare LF ends a command line (documented choice).
    assert_eq!(h.send(b"NOOP\n"), "250 2.0.0 Ok\r\n");
    assert_eq!(
        h.send(b"NO\rOP\r\n"),
        "500 5.5.2 Syntax error: bare CR in command\r\n"
    );
    assert_eq!(
        h.send(b"NOOP\r\r\n"),
        "500 5.5.2 Syntax error: bare CR in command\r\n"
    );
    assert_eq!(
        h.send(b"NO\0OP\r\n"),
        "500 5.5.2 Syntax error: NUL octet in command\r\n"
    );
    assert_eq!(h.send(b"NOOP\r\n"), "250 2.0.0 Ok\r\n");
}

fn into_data(h: &mut Harness) {
    h.out();
    let out = h.send(b"EHLO c\r\nMAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\n");
    assert!(out.ends_with("354 End data with <CR><LF>.<CR><LF>\r\n"));
}

#[test]
fn smuggling_vectors_are_rejected_and_never_end_data() {
    // Each vector is followed by a smuggled transaction; the real end comes later.
    for vector in [
        &b"\n.\n"[..],
        b"\n.\r\n",
        b"\r\n.\n",
        b"\r.\r",
        b"\r.\r\n",
        b"\r\n.\r",
        b"\n.\r",
        b"\r.\n",
    ] {
        let mut h = Harness::plain();
        into_data(&mut h);
        let mut input = b"Subject: hi\r\n\r\nbody".to_vec();
        input.extend_from_slice(vector);
        input.extend_from_slice(b"MAIL FROM:<admin@x>\r\nRCPT TO:<victim@y>\r\nDATA\r\nevil\r\n");
        assert_eq!(h.send(&input), "", "{vector:?}");
        assert_eq!(
            h.send(b"\r\n.\r\nNOOP\r\n"),
            "550 5.6.2 Message contains bare CR or LF (RFC 5321 section 2.3.8)\r\n250 2.0.0 Ok\r\n",
            "{vector:?}"
        );
        assert!(h.messages.is_empty(), "{vector:?}");
    }
}

#[test]
fn nul_and_long_lines_in_data() {
    let mut h = Harness::plain();
    into_data(&mut h);
    assert_eq!(
        h.send(b"a\0b\r\n.\r\n"),
        "550 5.6.0 Message contains NUL octets\r\n"
    );
    h.send(b"MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\n");
    let long = format!("{}\r\n.\r\n", "x".repeat(999));
    assert_eq!(
        h.send(long.as_bytes()),
        "550 5.6.0 Message contains a line longer than 1000 octets\r\n"
    );
    h.send(b"MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\n");
    let ok = format!("{}\r\n.\r\n", "x".repeat(998));
    assert_eq!(h.send(ok.as_bytes()), "250 2.0.0 Ok: queued as Q1\r\n");
}

#[test]
fn oversized_messages() {
    let mut config = ServerConfig::new("mx.test");
    config.max_message_size = 100;
    let mut h = Harness::new(config);
    h.out();
    h.send(b"EHLO c\r\n");
    assert_eq!(
        h.send(b"MAIL FROM:<a@x> SIZE=101\r\n"),
        "552 5.3.4 Message size exceeds fixed maximum message size\r\n"
    );
    // The pipelined RCPT and DATA behind a refused MAIL get 503.
    assert_eq!(
        h.send(b"RCPT TO:<b@y>\r\nDATA\r\n"),
        "503 5.5.1 Need MAIL before RCPT\r\n503 5.5.1 Need MAIL command\r\n"
    );
    assert_eq!(
        h.send(b"MAIL FROM:<a@x> SIZE=100\r\nRCPT TO:<b@y>\r\nDATA\r\n"),
        "250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n354 End data with <CR><LF>.<CR><LF>\r\n"
    );
    // 40 lines of 10 octets: read to the end, refused, session in step afterwards.
    for _ in 0..40 {
        assert_eq!(h.send(b"12345678\r\n"), "");
    }
    assert_eq!(
        h.send(b".\r\nNOOP\r\n"),
        "552 5.3.4 Message size exceeds fixed maximum message size\r\n250 2.0.0 Ok\r\n"
    );
    // Exactly at the limit is fine.
    h.send(b"MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\n");
    let body = "123456789\r\n".repeat(8) + "1234567890\r\n";
    assert_eq!(body.len(), 100);
    assert_eq!(
        h.send(format!("{body}.\r\n").as_bytes()),
        "250 2.0.0 Ok: queued as Q1\r\n"
    );
}

#[test]
fn too_many_recipients() {
    let mut config = ServerConfig::new("mx.test");
    config.max_recipients = 2;
    let mut h = Harness::new(config);
    h.out();
    h.send(b"EHLO c\r\nMAIL FROM:<a@x>\r\n");
    assert_eq!(
        h.send(b"RCPT TO:<1@y>\r\nRCPT TO:<2@y>\r\nRCPT TO:<3@y>\r\n"),
        "250 2.1.5 Ok\r\n250 2.1.5 Ok\r\n452 4.5.3 Too many recipients\r\n"
    );
    h.send(b"DATA\r\nx\r\n.\r\n");
    assert_eq!(h.messages[0].0.recipients, vec!["1@y", "2@y"]);
}

#[test]
fn stall_mid_data_times_out_with_421() {
    let mut h = Harness::plain();
    into_data(&mut h);
    h.send(b"partial line");
    let deadline = h.s.poll_timeout().unwrap();
    assert_eq!(deadline, h.now + Duration::from_secs(180));
    h.s.handle_timeout(deadline - Duration::from_millis(1));
    assert_eq!(h.out(), "");
    h.s.handle_timeout(deadline);
    h.pump();
    assert_eq!(
        h.out(),
        "421 4.4.2 mx.test Error: timeout exceeded, closing connection\r\n"
    );
    assert_eq!(h.closed, Some(CloseReason::DataTimeout));
    assert_eq!(h.s.poll_timeout(), None);
    assert!(h.messages.is_empty());
}

#[test]
fn idle_timeout_and_activity_moves_the_deadline() {
    let mut h = Harness::plain();
    h.out();
    assert_eq!(h.s.poll_timeout(), Some(h.now + Duration::from_secs(300)));
    h.now += Duration::from_secs(200);
    h.send(b"NOOP\r\n");
    assert_eq!(h.s.poll_timeout(), Some(h.now + Duration::from_secs(300)));
    h.s.handle_timeout(h.now + Duration::from_secs(300));
    h.pump();
    assert_eq!(
        h.out(),
        "421 4.4.2 mx.test Error: timeout exceeded, closing connection\r\n"
    );
    assert_eq!(h.closed, Some(CloseReason::IdleTimeout));
}

#[test]
fn hmtp_timeout_flushes_held_replies() {
    let mut h = Harness::new(ServerConfig::hmtp("mx.test"));
    assert_eq!(h.send(b"EHLO c\r\nNOOP\r\n"), "");
    h.s.handle_timeout(h.now + Duration::from_secs(300));
    h.pump();
    assert_eq!(
        h.out(),
        format!(
            "{HMTP_EHLO_REPLY}250 2.0.0 Ok\r\n421 4.4.2 mx.test Error: timeout exceeded, closing connection {}\r\n",
            xsum(b"EHLO c\r\nNOOP\r\n")
        )
    );
}

fn tls_config() -> ServerConfig {
    let mut config = ServerConfig::new("mx.test");
    config.starttls = true;
    config.auth = AuthMode::AfterTls;
    config
}

fn tls_info() -> TlsInfo {
    TlsInfo {
        version: "TLSv1.3".into(),
        cipher_suite: "TLS13_AES_128_GCM_SHA256".into(),
    }
}

#[test]
fn starttls_discards_pipelined_plaintext_and_resets() {
    let mut h = Harness::new(tls_config());
    h.out();
    let out = h.send(b"EHLO c\r\n");
    assert!(
        out.contains("250-STARTTLS\r\n") && !out.contains("AUTH"),
        "{out}"
    );
    assert_eq!(
        h.send(b"AUTH PLAIN AGFsaWNlAHNlY3JldA==\r\n"),
        "538 5.7.11 Encryption required for requested authentication mechanism\r\n"
    );
    // The command-injection case: plaintext pipelined after STARTTLS must not survive.
    assert_eq!(
        h.send(b"STARTTLS\r\nMAIL FROM:<inject@x>\r\n"),
        "220 2.0.0 Ready to start TLS\r\n"
    );
    assert_eq!(h.starttls, 1);
    assert!(!h.s.wants_input());
    h.send(b"RCPT TO:<inject@y>\r\n");
    h.s.tls_established(h.now, tls_info()).unwrap();
    assert_eq!(
        h.s.tls_established(h.now, tls_info()),
        Err(SessionError::NoTlsPending)
    );
    assert_eq!(h.out(), "");
    assert_eq!(
        h.send(b"MAIL FROM:<a@x>\r\n"),
        "503 5.5.1 Send HELO/EHLO first\r\n"
    );
    let out = h.send(b"EHLO c\r\n");
    assert!(
        !out.contains("STARTTLS") && out.contains("250-AUTH PLAIN LOGIN\r\n"),
        "{out}"
    );
    assert_eq!(h.send(b"STARTTLS\r\n"), "554 5.5.1 TLS already active\r\n");
    assert_eq!(
        h.send(b"AUTH PLAIN AGFsaWNlAHdyb25n\r\n"),
        "535 5.7.8 Authentication credentials invalid\r\n"
    );
    assert_eq!(
        h.send(b"AUTH PLAIN AGFsaWNlAHNlY3JldA==\r\n"),
        "235 2.7.0 Authentication successful\r\n"
    );
    assert_eq!(
        h.send(b"AUTH PLAIN AGFsaWNlAHNlY3JldA==\r\n"),
        "503 5.5.1 Already authenticated\r\n"
    );
    h.send(b"MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\nx\r\n.\r\n");
    assert_eq!(h.messages[0].0.protocol, Protocol::Esmtpsa);
    assert_eq!(h.messages[0].0.auth_user.as_deref(), Some("alice"));
}

#[test]
fn auth_login_and_plain_with_continuations() {
    let mut config = ServerConfig::new("mx.test");
    config.auth = AuthMode::AllowPlaintext;
    let mut h = Harness::new(config);
    h.out();
    h.send(b"EHLO c\r\n");
    assert_eq!(h.send(b"AUTH LOGIN\r\n"), "334 VXNlcm5hbWU6\r\n");
    assert_eq!(h.send(b"YWxpY2U=\r\n"), "334 UGFzc3dvcmQ6\r\n");
    assert_eq!(
        h.send(b"c2VjcmV0\r\n"),
        "235 2.7.0 Authentication successful\r\n"
    );

    let mut config = ServerConfig::new("mx.test");
    config.auth = AuthMode::AllowPlaintext;
    let mut h = Harness::new(config);
    h.out();
    h.send(b"EHLO c\r\n");
    assert_eq!(h.send(b"AUTH PLAIN\r\n"), "334 \r\n");
    assert_eq!(h.send(b"*\r\n"), "501 5.0.0 Authentication cancelled\r\n");
    assert_eq!(h.send(b"AUTH PLAIN\r\n"), "334 \r\n");
    assert_eq!(
        h.send(b"not base64!\r\n"),
        "501 5.5.2 Invalid base64 data\r\n"
    );
    // Strict RFC 4648: padding required, no white space inside.
    for bad in [&b"AGFsaWNlAHNlY3JldA\r\n"[..], b"AGFsaWNl AHNlY3JldA==\r\n"] {
        assert_eq!(h.send(b"AUTH PLAIN\r\n"), "334 \r\n");
        assert_eq!(h.send(bad), "501 5.5.2 Invalid base64 data\r\n");
    }
    assert_eq!(
        h.send(b"AUTH CRAM-MD5\r\n"),
        "504 5.5.4 Unrecognized authentication type\r\n"
    );
    assert_eq!(h.send(b"AUTH PLAIN\r\n"), "334 \r\n");
    assert_eq!(
        h.send(b"AGFsaWNlAHNlY3JldA==\r\n"),
        "235 2.7.0 Authentication successful\r\n"
    );
}

#[test]
fn auth_and_starttls_refused_when_not_configured_or_in_hmtp() {
    let mut h = Harness::plain();
    h.out();
    h.send(b"EHLO c\r\n");
    assert_eq!(
        h.send(b"STARTTLS\r\n"),
        "502 5.5.1 Command not implemented\r\n"
    );
    assert_eq!(
        h.send(b"AUTH PLAIN =\r\n"),
        "502 5.5.1 Command not implemented\r\n"
    );
    let mut config = tls_config();
    config.reply_buffering = true;
    let mut h = Harness::new(config);
    let out = h.send(b"EHLO c\r\nSTARTTLS\r\nQUIT\r\n");
    assert!(!out.contains("STARTTLS\r\n250"), "{out}");
    assert!(
        out.contains("502 5.5.1 Command not implemented\r\n221"),
        "{out}"
    );
}

#[test]
fn completion_calls_in_the_wrong_state_are_errors() {
    let mut h = Harness::plain();
    assert_eq!(
        h.s.message_accepted("x"),
        Err(SessionError::NoMessagePending)
    );
    assert_eq!(
        h.s.message_rejected(Reply::new(451, EnhancedCode::new(4, 0, 0), "x")),
        Err(SessionError::NoMessagePending)
    );
    assert_eq!(h.s.tls_failed(), Err(SessionError::NoTlsPending));
}

#[test]
fn input_overflow_while_waiting_closes() {
    let mut config = ServerConfig::new("mx.test");
    config.max_input_buffer = 64;
    let mut h = Harness::new(config);
    h.auto_accept = false;
    h.out();
    h.send(b"EHLO c\r\nMAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\nx\r\n.\r\n");
    h.out();
    assert_eq!(
        h.send(&[b'N'; 65]),
        "421 4.7.0 mx.test Too much input, closing connection\r\n"
    );
    assert_eq!(h.closed, Some(CloseReason::InputOverflow));
}

/// Records the addresses the policy saw and refuses those it cannot route, with its own text.
#[derive(Debug, Default)]
struct Routing {
    seen: Vec<String>,
}

impl Policy for Routing {
    fn mail_from(&mut self, _: &SessionInfo, mail: &skywave_smtp::MailRequest) -> Verdict {
        self.seen.push(mail.reverse_path.clone());
        Verdict::Accept
    }

    fn rcpt_to(&mut self, _: &SessionInfo, _: &Envelope, rcpt: &str) -> Verdict {
        self.seen.push(rcpt.to_owned());
        if rcpt.contains('!') {
            Verdict::Reject(Reply::new(
                550,
                EnhancedCode::new(5, 1, 2),
                "No route for UUCP bang paths",
            ))
        } else if rcpt.contains("[IPv6:") {
            Verdict::Reject(Reply::new(
                554,
                EnhancedCode::new(5, 7, 1),
                "Relay to address literals denied",
            ))
        } else {
            Verdict::Accept
        }
    }
}

#[test]
fn address_literals_and_bang_paths_reach_the_policy() {
    let now = Instant::now();
    let mut s = ServerSession::new(ServerConfig::new("mx"), Routing::default(), now);
    s.take_output();
    s.feed(
        now,
        b"EHLO c\r\n\
MAIL FROM:<ship@[192.0.2.7]> SIZE=10 BODY=8BITMIME\r\n\
RCPT TO:<host!user>\r\n\
RCPT TO:<user@[IPv6:2001:db8::1]>\r\n\
RCPT TO:<@relay.example:user@[192.0.2.1]>\r\n\
RCPT TO:<user@[192.0.2.300]>\r\n\
RCPT TO:<host!>\r\n\
RCPT TO:<user@[192.0.2.1]> NOTIFY=NEVER\r\n",
    );
    let out = String::from_utf8(s.take_output()).unwrap();
    let replies: Vec<&str> = out.lines().filter(|l| !l.starts_with("250-")).collect();
    assert_eq!(
        replies,
        vec![
            "250 HELP",
            "250 2.1.0 Ok",
            "550 5.1.2 No route for UUCP bang paths",
            "554 5.7.1 Relay to address literals denied",
            "250 2.1.5 Ok",
            "501 5.1.3 Bad recipient address syntax",
            "501 5.1.3 Bad recipient address syntax",
            "555 5.5.4 RCPT parameters not recognized or not implemented",
        ]
    );
    assert_eq!(
        s.policy().seen,
        vec![
            "ship@[192.0.2.7]",
            "host!user",
            "user@[IPv6:2001:db8::1]",
            "user@[192.0.2.1]",
        ]
    );
}

#[test]
fn hmtp_immediate_hello_answers_ehlo_and_holds_the_rest() {
    let mut config = ServerConfig::hmtp("mx.test");
    config.immediate_hello = true;
    let mut h = Harness::new(config);
    let ehlo = h.send(b"EHLO third-party\r\n");
    assert!(
        ehlo.starts_with("250-mx.test\r\n250-PIPELINING\r\n"),
        "{ehlo}"
    );
    assert!(ehlo.ends_with("250 HELP\r\n"), "{ehlo}");
    // The pipelined batch: everything held, the refused DATA's text discarded to its dot.
    assert_eq!(
        h.send(
            b"MAIL FROM:<a@x>\r\nRCPT TO:<unknown@y>\r\nDATA\r\nQUIT\r\n.\r\n\
MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\nbody\r\n.\r\n"
        ),
        ""
    );
    assert_eq!(h.messages.len(), 1);
    assert_eq!(h.messages[0].1, b"body\r\n");
    let read: &[u8] = b"EHLO third-party\r\nMAIL FROM:<a@x>\r\nRCPT TO:<unknown@y>\r\n\
DATA\r\nQUIT\r\n.\r\nMAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\nbody\r\n.\r\nQUIT\r\n";
    assert_eq!(
        h.send(b"QUIT\r\n"),
        format!(
            "250 2.1.0 Ok\r\n550 5.1.1 No such user\r\n554 5.5.1 No valid recipients\r\n\
250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n354 End data with <CR><LF>.<CR><LF>\r\n\
250 2.0.0 Ok: queued as Q1\r\n221 2.0.0 mx.test closing connection {}\r\n",
            xsum(read)
        )
    );
    assert_eq!(h.closed, Some(CloseReason::Quit));
}

#[test]
fn hmtp_release_held_sends_what_is_held_and_keeps_holding() {
    let mut h = Harness::new(ServerConfig::hmtp("mx.test"));
    assert_eq!(h.send(b"NOOP\r\nEHLO c\r\n"), "");
    h.s.release_held();
    let out = h.out();
    assert!(out.starts_with("250 2.0.0 Ok\r\n250-mx.test\r\n"), "{out}");
    assert!(out.ends_with("250 HELP\r\n"), "{out}");
    h.s.release_held();
    assert_eq!(h.out(), "", "nothing is sent twice");
    assert_eq!(h.send(b"MAIL FROM:<a@x>\r\nRSET\r\n"), "");
    assert_eq!(
        h.send(b"QUIT\r\n"),
        format!(
            "250 2.1.0 Ok\r\n250 2.0.0 Ok\r\n221 2.0.0 mx.test closing connection {}\r\n",
            xsum(b"NOOP\r\nEHLO c\r\nMAIL FROM:<a@x>\r\nRSET\r\nQUIT\r\n")
        )
    );
}

#[test]
fn smtputf8_is_taken_only_when_offered_and_named_in_the_protocol() {
    // Off (the default): not advertised, and the parameter is refused as unknown; UTF-8
    // addresses are taken as they come, as before.
    let mut h = Harness::plain();
    assert!(!h.send(b"EHLO c\r\n").contains("SMTPUTF8"));
    assert_eq!(
        h.send(b"MAIL FROM:<a@x> SMTPUTF8\r\n"),
        "555 5.5.4 MAIL parameters not recognized or not implemented\r\n"
    );

    let mut config = ServerConfig::new("mx.test");
    config.smtputf8 = true;
    let mut h = Harness::new(config);
    h.send(b"");
    assert!(h.send(b"EHLO c\r\n").contains("250-SMTPUTF8\r\n"));
    assert_eq!(
        h.send("MAIL FROM:<j\u{f6}rg@x> SMTPUTF8 BODY=8BITMIME\r\n".as_bytes()),
        "250 2.1.0 Ok\r\n"
    );
    assert_eq!(
        h.send("RCPT TO:<m\u{f8}ller@y>\r\n".as_bytes()),
        "250 2.1.5 Ok\r\n"
    );
    h.send(b"DATA\r\n");
    h.send("Subject: Gr\u{fc}\u{df}e\r\n\r\nx\r\n.\r\n".as_bytes());
    h.send(b"MAIL FROM:<a@x>\r\n");
    h.send(b"RCPT TO:<b@y>\r\n");
    h.send(b"DATA\r\n");
    h.send(b"x\r\n.\r\n");
    let (utf8, _) = &h.messages[0];
    assert!(utf8.smtputf8);
    assert_eq!(utf8.reverse_path, "j\u{f6}rg@x");
    assert_eq!(utf8.recipients, ["m\u{f8}ller@y"]);
    assert_eq!(utf8.protocol.as_str(), "UTF8SMTP");
    let (plain, _) = &h.messages[1];
    assert!(!plain.smtputf8);
    assert_eq!(plain.protocol.as_str(), "ESMTP");
}

#[test]
fn eight_bit_mime_off_is_neither_offered_nor_taken() {
    // On (the default): offered, and BODY= in either form taken and reported.
    let mut h = Harness::plain();
    assert!(h.send(b"EHLO c\r\n").contains("250-8BITMIME\r\n"));
    assert_eq!(
        h.send(b"MAIL FROM:<a@x> BODY=8BITMIME\r\n"),
        "250 2.1.0 Ok\r\n"
    );

    let mut config = ServerConfig::new("mx.test");
    config.eight_bit_mime = false;
    let mut h = Harness::new(config);
    h.send(b"");
    let ehlo = h.send(b"EHLO c\r\n");
    assert!(!ehlo.contains("8BITMIME"), "{ehlo}");
    assert!(ehlo.contains("250-PIPELINING\r\n250-SIZE"), "{ehlo}");
    // RFC 6152 defines BODY= only for a server that offers 8BITMIME: either value is a
    // parameter this one does not know.
    for body in ["8BITMIME", "7BIT"] {
        assert_eq!(
            h.send(format!("MAIL FROM:<a@x> BODY={body}\r\n").as_bytes()),
            "555 5.5.4 MAIL parameters not recognized or not implemented\r\n"
        );
    }
    assert_eq!(h.send(b"MAIL FROM:<a@x>\r\n"), "250 2.1.0 Ok\r\n");
}

#[test]
fn dsn_parameters_are_taken_only_when_offered_and_checked() {
    // Off (the default): not advertised, and the parameters are refused as unknown.
    let mut h = Harness::plain();
    h.send(b"EHLO c\r\n");
    assert_eq!(
        h.send(b"MAIL FROM:<a@x> RET=HDRS\r\n"),
        "555 5.5.4 MAIL parameters not recognized or not implemented\r\n"
    );
    h.send(b"MAIL FROM:<a@x>\r\n");
    assert_eq!(
        h.send(b"RCPT TO:<b@y> NOTIFY=NEVER\r\n"),
        "555 5.5.4 RCPT parameters not recognized or not implemented\r\n"
    );

    let mut config = ServerConfig::new("mx.test");
    config.dsn = true;
    let mut h = Harness::new(config);
    h.send(b"");
    assert!(h.send(b"EHLO c\r\n").contains("250-DSN\r\n"));
    for (bad, reply) in [
        (
            &b"MAIL FROM:<a@x> RET=FULL RET=HDRS\r\n"[..],
            "501 5.5.4 RET given twice\r\n",
        ),
        (
            &b"MAIL FROM:<a@x> ENVID=+0Aoops\r\n"[..],
            "501 5.5.4 ENVID must be 1 to 100 printable characters\r\n",
        ),
    ] {
        assert_eq!(h.send(bad), reply);
    }
    assert_eq!(
        h.send(b"MAIL FROM:<a@x> RET=HDRS ENVID=QQ+20314159\r\n"),
        "250 2.1.0 Ok\r\n"
    );
    assert_eq!(
        h.send(b"RCPT TO:<b@y> NOTIFY=NEVER,SUCCESS\r\n"),
        "501 5.5.4 NOTIFY=NEVER cannot be combined with other values\r\n"
    );
    h.send(b"RCPT TO:<b@y> NOTIFY=SUCCESS,DELAY ORCPT=rfc822;B+40Y.example\r\n");
    h.send(b"RCPT TO:<c@y>\r\n");
    h.send(b"RCPT TO:<d@y> NOTIFY=NEVER\r\n");
    h.send(b"DATA\r\n");
    h.send(b"Subject: t\r\n\r\nx\r\n.\r\n");
    let (env, _) = &h.messages[0];
    assert_eq!(
        env.dsn,
        skywave_smtp::MailDsn {
            ret: Some(skywave_smtp::Ret::Hdrs),
            envid: Some("QQ 314159".into()),
        }
    );
    assert_eq!(env.recipients, ["b@y", "c@y", "d@y"]);
    assert_eq!(
        env.rcpt_dsn,
        [
            skywave_smtp::RcptDsn {
                notify: Some(skywave_smtp::Notify {
                    success: true,
                    failure: false,
                    delay: true,
                }),
                orcpt: Some("B@Y.example".into()),
            },
            skywave_smtp::RcptDsn::default(),
            skywave_smtp::RcptDsn {
                notify: Some(skywave_smtp::Notify::NEVER),
                orcpt: None,
            },
        ]
    );
}
