//! XLZW sessions under arbitrary input. The server first accepts `XLZW <bits> 0`; then either
//! arbitrary SMTP text (with token bytes 0xF0-0xFF as in `smtp_server`) compressed by a real
//! encoder and cut into arbitrary transmissions, or arbitrary raw bytes as the compressed
//! stream. Checks that nothing panics, that the server's compressed output decodes to
//! well-formed replies, and that a client fed arbitrary compressed replies ends cleanly.
#![no_main]

use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use skywave_compress::{Limits, LzwDecoder, LzwEncoder};
use skywave_smtp::{
    AcceptAll, ClientConfig, ClientMode, ClientSession, Event, OutgoingMessage, ReplyParser,
    ServerConfig, ServerSession,
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
    b"RCPT TO:<h!u>",
    b"RCPT TO:<u@[192.0.2.1]>",
    b"XLZW 9 0\r\n",
    b"NOOP\r\n",
    b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    b"RSET\r\n",
    b"QUIT\r\n",
];

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Some((&chunking, raw)) = rest.split_first() else {
        return;
    };
    let bits = 9 + flags % 8;
    let step = usize::from(chunking % 29) + 1;

    // Server.
    let now = Instant::now();
    let mut config = ServerConfig::new("fuzz.test");
    config.send_greeting = false;
    if flags & 0x80 != 0 {
        config.max_message_size = 64;
        config.max_command_line = 32;
        config.max_input_buffer = 256;
        config.max_errors = 4;
    }
    let mut server = ServerSession::new(config, AcceptAll, now);
    server.feed(now, format!("XLZW {bits} 0\r\n").as_bytes());
    let accepted = format!("250 {bits} 0 LZW Ok\r\n");
    assert_eq!(server.take_output(), accepted.as_bytes());
    let wire = if flags & 0x40 != 0 {
        raw.to_vec()
    } else {
        let mut text = Vec::with_capacity(raw.len() * 2);
        let mut e = LzwEncoder::new(bits).expect("valid bits");
        let mut wire = Vec::new();
        for &b in raw {
            match b.checked_sub(0xF0) {
                Some(t) => text.extend_from_slice(TOKENS[usize::from(t)]),
                None => text.push(b),
            }
            if b == b'\n' || text.len() > 200 {
                e.push(&text);
                text.clear();
                e.flush();
                wire.extend(e.take_output());
            }
        }
        e.push(&text);
        e.flush();
        wire.extend(e.take_output());
        wire
    };
    let mut decoder = LzwDecoder::new(Limits::default());
    let mut replies = ReplyParser::new(8192, 1024);
    let mut id = 0u32;
    for chunk in wire.chunks(step) {
        let closed_before = server.is_closed();
        server.feed(now, chunk);
        while let Some(event) = server.poll_event() {
            if let Event::Message { .. } = event {
                id += 1;
                server.message_accepted(&id.to_string()).expect("pending");
            }
        }
        let out = server.take_output();
        if closed_before {
            assert!(out.is_empty());
        }
        decoder.feed(&out).expect("server output decodes");
        replies.push(&decoder.take_output());
        while let Some(_reply) = replies.next_reply().expect("well-formed replies") {}
    }

    // Client: arbitrary compressed replies after an accepted XLZW.
    let mut cc = ClientConfig::new("c", ClientMode::Pipelining);
    cc.xlzw = Some(bits);
    let message = OutgoingMessage {
        reverse_path: "a@b".into(),
        recipients: vec!["c@d".into()],
        body: b"x\r\n".to_vec(),
        eight_bit: false,
        mt_priority: None,
        dsn: Default::default(),
        rcpt_dsn: Vec::new(),
    };
    let mut client = ClientSession::new(cc, vec![message]).expect("valid message");
    client.feed(b"220 x\r\n");
    client.feed(accepted.as_bytes());
    let _ = client.take_output();
    for chunk in raw.chunks(step) {
        client.feed(chunk);
        let _ = client.take_output();
        while client.poll_event().is_some() {}
    }
    client.connection_closed();
    assert!(client.is_finished());
});
