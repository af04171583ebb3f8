//! The collision rule between two nodes that start HMTP sessions towards each other at once.
//!
//! One session per pair of nodes at a time. Both may start at once (each sends its submission
//! before the other's arrives). Then the node with the **lower** STANAG 5066 address yields: it
//! abandons its own session (its mail stays queued, outcome "deferred: collision"), serves the
//! peer's session, and starts its own again after the peer's QUIT has been served. The node with
//! the **higher** address parses the yielded session up to its QUIT and discards it without a
//! reply ([`crate::server::HmtpServer::discarding`]), while it waits for the replies to its own.
//!
//! Both nodes reach the same decision without exchanging anything: each sees the other's session
//! start while its own is outstanding. The yielded submission must still be sent whole (the peer
//! parses it to its QUIT to find where the next stream begins).
//!
//! Both directions share SAP 3, so the owner tells a reply stream from a session stream by
//! [`classify_stream_start`]: decoded, a reply stream starts with a digit, a session with a
//! command. A stream runs until its consumer finishes (the client at 221, the server at QUIT);
//! the next U_PDU then starts a new stream.
//!
//! Node addresses are the 28-bit STANAG 5066 addresses as `u32`.

use skywave_compress::{Limits, StreamDecoder};

use crate::error::HmtpError;

/// What the first U_PDU of a stream from the peer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamStart {
    /// Replies to our session (starts with a reply code).
    Replies,
    /// The peer's own session (starts with a command).
    Session,
}

/// Classifies the first U_PDU of a new stream from the peer by its first decoded byte. None if
/// the U_PDU decodes to no text yet (too short to tell).
pub fn classify_stream_start(updu: &[u8]) -> Result<Option<StreamStart>, HmtpError> {
    // Only the first few decoded bytes matter; cap the work on a hostile U_PDU.
    let mut decoder = StreamDecoder::detect(Limits::single(1 << 20));
    decoder.feed(updu)?;
    let text = decoder.take_output();
    Ok(text.first().map(|b| {
        if b.is_ascii_digit() {
            StreamStart::Replies
        } else {
            StreamStart::Session
        }
    }))
}

/// What to do with a session the peer started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncomingAction {
    /// Serve it normally.
    Serve,
    /// We are the lower address and our own session is outstanding: abandon ours (its messages
    /// are deferred by collision, see [`crate::client::HmtpClient::abandon`]) and serve theirs.
    AbandonOwnAndServe,
    /// We are the higher address and our own session is outstanding: parse theirs to its QUIT
    /// and discard it ([`crate::server::HmtpServer::discarding`]).
    Discard,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Incoming {
    None,
    Serving,
    Discarding,
}

/// The collision arbiter for one pair of nodes.
#[derive(Debug, Clone)]
pub struct Arbiter {
    local: u32,
    peer: u32,
    own_outstanding: bool,
    incoming: Incoming,
    collisions: u64,
}

impl Arbiter {
    /// The arbiter between our node `local` and `peer`.
    pub fn new(local: u32, peer: u32) -> Result<Self, HmtpError> {
        if local == peer {
            return Err(HmtpError::SameAddress(local));
        }
        Ok(Self {
            local,
            peer,
            own_outstanding: false,
            incoming: Incoming::None,
            collisions: 0,
        })
    }

    /// True when we may start a session now: none of ours is outstanding and we are not serving
    /// or discarding one of the peer's.
    pub fn can_start(&self) -> bool {
        !self.own_outstanding && self.incoming == Incoming::None
    }

    /// Our session's submission was handed to the bearer.
    pub fn own_started(&mut self) {
        self.own_outstanding = true;
    }

    /// Our session ended (221, 421, timeout, link lost).
    pub fn own_finished(&mut self) {
        self.own_outstanding = false;
    }

    /// True while our own session waits for its replies.
    pub fn own_outstanding(&self) -> bool {
        self.own_outstanding
    }

    /// The peer's session started arriving: what to do with it.
    pub fn incoming_session(&mut self) -> IncomingAction {
        if !self.own_outstanding {
            self.incoming = Incoming::Serving;
            return IncomingAction::Serve;
        }
        self.collisions += 1;
        if self.local < self.peer {
            self.own_outstanding = false;
            self.incoming = Incoming::Serving;
            IncomingAction::AbandonOwnAndServe
        } else {
            self.incoming = Incoming::Discarding;
            IncomingAction::Discard
        }
    }

    /// The peer's session (served or discarded) reached its end; we may start ours again.
    pub fn incoming_finished(&mut self) {
        self.incoming = Incoming::None;
    }

    /// Collisions seen.
    pub fn collisions(&self) -> u64 {
        self.collisions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_yields_higher_discards() {
        let mut low = Arbiter::new(0x100, 0x200).unwrap();
        let mut high = Arbiter::new(0x200, 0x100).unwrap();
        assert!(Arbiter::new(5, 5).is_err());
        low.own_started();
        high.own_started();
        assert!(!low.can_start());
        assert_eq!(low.incoming_session(), IncomingAction::AbandonOwnAndServe);
        assert_eq!(high.incoming_session(), IncomingAction::Discard);
        assert!(!low.can_start());
        low.incoming_finished();
        assert!(low.can_start());
        high.incoming_finished();
        assert!(!high.can_start());
        high.own_finished();
        assert!(high.can_start());
        assert_eq!(high.incoming_session(), IncomingAction::Serve);
        assert_eq!((low.collisions(), high.collisions()), (1, 1));
    }

    #[test]
    fn classification_by_first_text_byte() {
        assert_eq!(
            classify_stream_start(b"EHLO a\r\n").unwrap(),
            Some(StreamStart::Session)
        );
        assert_eq!(
            classify_stream_start(b"250-b\r\n").unwrap(),
            Some(StreamStart::Replies)
        );
        assert!(classify_stream_start(&[0x80]).is_err());
    }
}
