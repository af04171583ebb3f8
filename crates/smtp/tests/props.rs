//! Property tests: how input is cut into pieces never changes what the server answers or
//! delivers; dot-stuffing by the client and unstuffing by the server round-trip arbitrary bodies
//! in every client mode.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Instant;

use common::{RejectUnknown, run};
use proptest::prelude::*;
use skywave_smtp::{
    AuthMode, ClientConfig, ClientMode, ClientSession, Credentials, Event, Extensions,
    OutgoingMessage, Policy, RecipientStatus, ServerConfig, ServerSession, SessionInfo,
};

const VOCABULARY: &[&[u8]] = &[
    b"EHLO c\r\n",
    b"HELO c\r\n",
    b"MAIL FROM:<a@x>\r\n",
    b"MAIL FROM:<a@x> SIZE=50 MT-PRIORITY=2\r\n",
    b"RCPT TO:<b@y>\r\n",
    b"RCPT TO:<unknown@y>\r\n",
    b"DATA\r\n",
    b"line of text\r\n",
    b".\r\n",
    b"..dots\r\n",
    b"\n.\n",
    b"\r",
    b"\n",
    b"\0",
    b"RSET\r\n",
    b"NOOP\r\n",
    b"QUIT\r\n",
    b"BOGUS\r\n",
    b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    b"AUTH PLAIN\r\n",
    b"AUTH LOGIN YWxpY2U=\r\n",
    b"AGFsaWNlAHNlY3JldA==\r\n",
    b"VRFY x\r\n",
];

struct Auth;

impl Policy for Auth {
    fn authenticate(&mut self, _: &SessionInfo, c: &Credentials) -> bool {
        c.username == "alice"
    }
}

/// Feeds the pieces and returns everything written plus a summary of the events.
fn serve(buffering: bool, pieces: &[&[u8]]) -> (Vec<u8>, Vec<String>) {
    let mut config = ServerConfig::new("mx");
    config.reply_buffering = buffering;
    config.auth = AuthMode::AllowPlaintext;
    config.max_command_line = 64;
    config.max_message_size = 80;
    config.max_data_line = 40;
    config.max_recipients = 2;
    config.max_errors = 30;
    let now = Instant::now();
    let mut s = ServerSession::new(config, Auth, now);
    let mut out = s.take_output();
    let mut events = Vec::new();
    for piece in pieces {
        s.feed(now, piece);
        while let Some(ev) = s.poll_event() {
            match ev {
                Event::Message { envelope, body } => {
                    events.push(format!("{envelope:?} {body:?}"));
                    s.message_accepted("Q").unwrap();
                }
                other => events.push(format!("{other:?}")),
            }
        }
        out.extend(s.take_output());
    }
    (out, events)
}

fn script() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0..VOCABULARY.len(), 0..60)
        .prop_map(|idx| idx.iter().flat_map(|&i| VOCABULARY[i].to_vec()).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn chunking_never_changes_the_outcome(
        input in script(),
        cuts in prop::collection::vec(1usize..20, 1..40),
        buffering in any::<bool>(),
    ) {
        let whole = serve(buffering, &[&input]);
        let mut pieces = Vec::new();
        let mut rest = &input[..];
        let mut i = 0;
        while !rest.is_empty() {
            let n = cuts[i % cuts.len()].min(rest.len());
            let (a, b) = rest.split_at(n);
            pieces.push(a);
            rest = b;
            i += 1;
        }
        let chunked = serve(buffering, &pieces);
        prop_assert_eq!(
            String::from_utf8_lossy(&whole.0),
            String::from_utf8_lossy(&chunked.0)
        );
        prop_assert_eq!(whole.1, chunked.1);
    }
}

fn body_strategy() -> impl Strategy<Value = Vec<u8>> {
    (prop::collection::vec("[.a-z ]{0,12}", 0..12), any::<bool>()).prop_map(
        |(lines, final_crlf)| {
            let mut body = lines.join("\r\n");
            if final_crlf && !body.is_empty() {
                body.push_str("\r\n");
            }
            body.into_bytes()
        },
    )
}

fn mode_strategy() -> impl Strategy<Value = ClientMode> {
    prop_oneof![
        Just(ClientMode::Lockstep),
        Just(ClientMode::Pipelining),
        Just(ClientMode::Batch),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn client_and_server_round_trip_bodies_in_every_mode(
        mode in mode_strategy(),
        messages in prop::collection::vec(
            (body_strategy(), prop::collection::vec(any::<bool>(), 1..4)),
            0..5,
        ),
        sizes in prop::collection::vec(0usize..30, 0..8),
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
                mt_priority: Some(1),
                dsn: Default::default(),
                rcpt_dsn: Vec::new(),
            })
            .collect();
        let mut config = ClientConfig::new("gw", mode);
        config.expect_greeting = mode != ClientMode::Batch;
        config.batch_extensions = Extensions { size: Some(0), mt_priority: true, ..Extensions::default() };
        let client = ClientSession::new(config, outgoing).unwrap();
        let server_config = if mode == ClientMode::Batch {
            ServerConfig::hmtp("mx")
        } else {
            ServerConfig::new("mx")
        };
        let server = ServerSession::new(server_config, RejectUnknown, Instant::now());
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
        for d in &r.delivered {
            prop_assert_eq!(d.0.mt_priority, Some(1));
        }
        prop_assert_eq!(r.outcomes.len(), messages.len());
        for (outcome, (_, known)) in r.outcomes.iter().zip(&messages) {
            for (rc, k) in outcome.recipients.iter().zip(known) {
                let ok = matches!(rc.status, RecipientStatus::Delivered(_));
                prop_assert_eq!(ok, *k, "{:?}", rc);
            }
        }
        if mode == ClientMode::Batch {
            prop_assert_eq!((r.client_turns, r.server_turns), (1, 1));
        }
    }
}
