//! What two nodes do when their HMTP sessions towards each other cross, and how a stream from
//! the peer is told to be its session or its replies to ours.
//!
//! A node starts no session while it serves one of the peer's, but both may start at once
//! (each sends its submission before the other's arrives): the sessions cross. That is the
//! usual case, not a rare one, whenever both sides hold mail when the link comes up (after an
//! outage, at the start of a radio schedule). Each node then serves the peer's session and
//! keeps its own waiting, as any HMTP node does (Annex F defines no rule for it). Nothing is
//! lost in the order things arrive: each node's stream to the other is its session, then
//! (once the peer's session has arrived) its replies to it, delivered in order by the 5066
//! ARQ, so the replies to a node's session come after the peer's session and are read as a
//! stream of their own. Both sessions cost what they cost alone, and a node's replies can share
//! a transmission with the rest of its session.
//!
//! Until 2026-11-30 skywave had a rule of its own: the node with the lower address abandoned
//! its session and sent it again after serving the peer's, and the higher one parsed the
//! abandoned session to its QUIT and discarded it. That sent the lower node's submission twice
//! and delayed its mail by a whole session (`cargo test -p skywave-gateway --test
//! over_the_air crossed_sessions`: both messages in after 13 s with 4 transmissions of data,
//! against 19 s and 5), and towards a standard peer, which knows no such rule, either delivered
//! mail twice (the abandoned session was served there) or left the peer's session unanswered.
//! A gateway of before facing one of today should lose nothing either (argued here, not
//! tested: no such gateway is deployed): a session it abandoned is answered to a client that
//! gave it up (the replies are set aside, `XSUM`, and the mail sent again is dropped there as a
//! duplicate), and one it discarded gets no replies (it times out, and its mail goes again).
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
    /// Serve it: nothing of ours is outstanding.
    Serve,
    /// The sessions crossed: serve theirs and keep ours waiting; the replies to ours follow
    /// the peer's session.
    ServeAlongside,
}

/// The state of one pair of nodes' sessions: ours outstanding, theirs being served.
#[derive(Debug, Clone, Default)]
pub struct Arbiter {
    own_outstanding: bool,
    serving: bool,
    crossings: u64,
}

impl Arbiter {
    /// The arbiter between our node `local` and `peer` (which must differ: a node's own
    /// sessions never come back to it as the peer's).
    pub fn new(local: u32, peer: u32) -> Result<Self, HmtpError> {
        if local == peer {
            return Err(HmtpError::SameAddress(local));
        }
        Ok(Self::default())
    }

    /// True when we may start a session now: none of ours is outstanding and we are not serving
    /// one of the peer's.
    pub fn can_start(&self) -> bool {
        !self.own_outstanding && !self.serving
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
        self.serving = true;
        if self.own_outstanding {
            self.crossings += 1;
            IncomingAction::ServeAlongside
        } else {
            IncomingAction::Serve
        }
    }

    /// The peer's session reached its end; we may start ours once ours is done too.
    pub fn incoming_finished(&mut self) {
        self.serving = false;
    }

    /// Sessions that crossed so far.
    pub fn crossings(&self) -> u64 {
        self.crossings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crossed_sessions_are_served_alongside_ours() {
        assert!(Arbiter::new(5, 5).is_err());
        let mut a = Arbiter::new(0x100, 0x200).unwrap();
        assert!(a.can_start());
        a.own_started();
        assert!(!a.can_start());
        assert_eq!(a.incoming_session(), IncomingAction::ServeAlongside);
        assert!(a.own_outstanding(), "ours still waits for its replies");
        a.incoming_finished();
        assert!(!a.can_start(), "ours is still outstanding");
        a.own_finished();
        assert!(a.can_start());
        // Nothing of ours outstanding: no crossing, and none of ours starts meanwhile.
        assert_eq!(a.incoming_session(), IncomingAction::Serve);
        assert!(!a.can_start());
        a.incoming_finished();
        assert!(a.can_start());
        assert_eq!(a.crossings(), 1);
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
