//! Arbitrary bytes in arbitrary chunks into an SMTP server session with a permissive policy.
//! Checks that nothing panics, that every output parses as well-formed replies, and that a
//! closed session stays silent. Input octets 0xF0-0xFF stand for SMTP tokens (verbs, parameters,
//! line ends, the end-of-data sequence) so that the fuzzer reaches deep states quickly.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use skywave_smtp::{
    AuthMode, Credentials, Event, Policy, Reply, ReplyParser, ServerConfig, ServerSession,
    SessionInfo, TlsInfo,
};

const TOKENS: [&[u8]; 16] = [
    b"EHLO x\r\n",
    b"HELO x\r\n",
    b"MAIL FROM:<a@b>",
    b"RCPT TO:<c@d>",
    b"DATA\r\n",
    b"\r\n.\r\n",
    b"\r\n",
    b" SIZE=",
    b" BODY=8BITMIME",
    b" MT-PRIORITY=",
    b"STARTTLS\r\n",
    b"AUTH PLAIN ",
    b"AUTH LOGIN",
    b"AHUAcA==",
    b"RSET\r\n",
    b"QUIT\r\n",
];

struct Permissive;

impl Policy for Permissive {
    fn authenticate(&mut self, _: &SessionInfo, c: &Credentials) -> bool {
        c.username == "u"
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Some((&chunking, raw)) = rest.split_first() else {
        return;
    };
    let mut input = Vec::with_capacity(raw.len() * 2);
    for &b in raw {
        match b.checked_sub(0xF0) {
            Some(t) => input.extend_from_slice(TOKENS[usize::from(t)]),
            None => input.push(b),
        }
    }
    let mut config = ServerConfig::new("fuzz.test");
    // The output checks below read plain replies; XLZW sessions have their own target.
    config.xlzw = false;
    config.reply_buffering = flags & 1 != 0;
    config.send_greeting = flags & 2 != 0;
    config.starttls = flags & 4 != 0;
    config.auth = if flags & 8 != 0 {
        AuthMode::AllowPlaintext
    } else {
        AuthMode::AfterTls
    };
    if flags & 16 != 0 {
        // Small limits so that they are reached.
        config.max_message_size = 64;
        config.max_recipients = 2;
        config.max_command_line = 32;
        config.max_data_line = 16;
        config.max_commands = 20;
        config.max_errors = 4;
        config.max_input_buffer = 128;
    }
    let reject_messages = flags & 32 != 0;
    config.dsn = flags & 64 != 0;
    let start = Instant::now();
    let mut now = start;
    let mut session = ServerSession::new(config, Permissive, now);
    let mut replies = ReplyParser::new(8192, 1024);
    let step = usize::from(chunking % 17) + 1;
    let mut id = 0u32;
    for (n, chunk) in input.chunks(step).enumerate() {
        now += Duration::from_secs(u64::from(chunk[0] % 4));
        if n % 7 == 6 {
            session.handle_timeout(now + Duration::from_secs(u64::from(chunk[0])));
            replies.push(&session.take_output());
        }
        let closed_before = session.is_closed();
        session.feed(now, chunk);
        while let Some(event) = session.poll_event() {
            match event {
                Event::Message { body, .. } => {
                    assert!(body.len() <= session.config().max_message_size);
                    id += 1;
                    if reject_messages && id % 2 == 0 {
                        let r = Reply::new(451, skywave_smtp::EnhancedCode::new(4, 3, 0), "no");
                        session.message_rejected(r).unwrap();
                    } else {
                        session.message_accepted(&id.to_string()).unwrap();
                    }
                }
                Event::StartTls => {
                    let info = TlsInfo {
                        version: "t".into(),
                        cipher_suite: "c".into(),
                    };
                    if chunk[0] & 1 == 0 {
                        session.tls_established(now, info).unwrap();
                    } else {
                        session.tls_failed().unwrap();
                    }
                }
                Event::Authenticated { .. } | Event::Close(_) => {}
            }
        }
        let out = session.take_output();
        if closed_before {
            assert!(out.is_empty());
        }
        replies.push(&out);
        while let Some(_reply) = replies
            .next_reply()
            .expect("server wrote a malformed reply")
        {}
    }
    session.handle_timeout(now + Duration::from_secs(3600));
    replies.push(&session.take_output());
    while let Some(_reply) = replies
        .next_reply()
        .expect("server wrote a malformed reply")
    {}
    assert_eq!(replies.buffered(), 0, "server output ended mid-reply");
});
