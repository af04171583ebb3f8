//! An in-memory link between a client and a server session, shared by the test files.

#![allow(dead_code, unreachable_pub)]

use std::time::Instant;

use skywave_smtp::client::{ClientError, MessageOutcome};
use skywave_smtp::{
    ClientEvent, ClientSession, EnhancedCode, Envelope, Event, Policy, Reply, ServerSession,
    SessionInfo, Verdict,
};

/// Refuses recipients containing "unknown".
#[derive(Debug, Default)]
pub struct RejectUnknown;

impl Policy for RejectUnknown {
    fn rcpt_to(&mut self, _: &SessionInfo, _: &Envelope, rcpt: &str) -> Verdict {
        if rcpt.contains("unknown") {
            Verdict::Reject(Reply::new(550, EnhancedCode::new(5, 1, 1), "No such user"))
        } else {
            Verdict::Accept
        }
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct Run {
    pub outcomes: Vec<MessageOutcome>,
    pub error: Option<ClientError>,
    pub delivered: Vec<(Envelope, Vec<u8>)>,
    /// Number of non-empty transmissions by the client and by the server.
    pub client_turns: usize,
    pub server_turns: usize,
}

/// Splits `bytes` into pieces whose sizes come from `sizes` (cycled; 0 means "all at once").
fn pieces<'a>(bytes: &'a [u8], sizes: &[usize], cursor: &mut usize) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let size = if sizes.is_empty() {
            rest.len()
        } else {
            let s = sizes[*cursor % sizes.len()];
            *cursor += 1;
            if s == 0 {
                rest.len()
            } else {
                s.min(rest.len())
            }
        };
        let (a, b) = rest.split_at(size);
        out.push(a);
        rest = b;
    }
    out
}

/// Runs a client against a server until the client finishes, delivering every transmission in
/// pieces of the given sizes.
pub fn run<P: Policy>(
    mut client: ClientSession,
    mut server: ServerSession<P>,
    sizes: &[usize],
) -> Run {
    let now = Instant::now();
    let mut run = Run {
        outcomes: Vec::new(),
        error: None,
        delivered: Vec::new(),
        client_turns: 0,
        server_turns: 0,
    };
    let mut cursor = 0;
    let mut ids = 0;
    for _ in 0..100_000 {
        let mut moved = false;
        let out = server.take_output();
        if !out.is_empty() {
            moved = true;
            run.server_turns += 1;
            for p in pieces(&out, sizes, &mut cursor) {
                client.feed(p);
            }
        }
        while let Some(ev) = client.poll_event() {
            match ev {
                ClientEvent::Message(m) => run.outcomes.push(m),
                ClientEvent::Finished { error } => run.error = error,
            }
        }
        if client.is_finished() {
            break;
        }
        let out = client.take_output();
        if !out.is_empty() {
            moved = true;
            run.client_turns += 1;
            for p in pieces(&out, sizes, &mut cursor) {
                server.feed(now, p);
                while let Some(ev) = server.poll_event() {
                    if let Event::Message { envelope, body } = ev {
                        run.delivered.push((envelope, body));
                        ids += 1;
                        server.message_accepted(&format!("Q{ids}")).unwrap();
                    }
                }
            }
        }
        if !moved {
            if server.is_closed() {
                client.connection_closed();
            } else {
                panic!("client and server are both waiting");
            }
        }
    }
    while let Some(ev) = client.poll_event() {
        match ev {
            ClientEvent::Message(m) => run.outcomes.push(m),
            ClientEvent::Finished { error } => run.error = error,
        }
    }
    assert!(client.is_finished(), "run did not finish");
    run.outcomes.sort_by_key(|m| m.index);
    run
}
