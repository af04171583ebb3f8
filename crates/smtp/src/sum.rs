//! skywave's `XSUM` extension: the reply that closes a session names a checksum of what the
//! server read.
//!
//! An HMTP client sends its whole session (EHLO, every message, QUIT) before it reads a reply,
//! and reads the replies by position: nothing in SMTP ties a reply stream to the session it
//! answers. Over STANAG 5066 a session can end on the client's side (its reply deadline ran out,
//! the server rejected a U_PDU as "destination node not responding") while its data still
//! reaches the peer, whose replies then arrive during the *next* session. Read by position, that
//! late stream would say "250" to whichever messages sit where the earlier ones sat: a message
//! taken for delivered that the peer never had, and so lost if its own data goes astray too.
//!
//! With `XSUM` the server (advertising the keyword in its EHLO reply) ends the reply that closes
//! the session (the 221 to QUIT, or a 421) with `XSUM=<octets>:<sum>`: how many octets of the
//! session it had read, after any decompression, the closing command's line included, and the
//! CRC-64/XZ of those octets in sixteen hex digits. In [`crate::ClientMode::Batch`] the client
//! keeps what it wrote and checks the sum over as many of its own first octets. A server that
//! advertised `XSUM` and a closing reply that names another sum, a longer session, or nothing,
//! mean the replies answer another session's bytes: the client reports
//! [`crate::ClientError::StaleReplies`] instead of taking them (and the HMTP client goes on
//! waiting for its own). A sum that matches proves the server read exactly these commands and
//! texts up to where it stopped, so every reply is where the client puts it, a 421's included:
//! what the peer accepted before it closed counts, and the next session goes on from there.
//! Servers without `XSUM` are read by position as before.
//!
//! A CRC, not a cryptographic hash: it guards against replies meant for another session of the
//! same two gateways, not against a forger, who could send any replies anyway.

use std::fmt;

use crc::{CRC_64_XZ, Crc, Digest};

use crate::reply::Reply;

/// The EHLO keyword.
pub const KEYWORD: &str = "XSUM";

static CRC64: Crc<u64> = Crc::<u64>::new(&CRC_64_XZ);

/// The CRC-64/XZ of `bytes`.
pub fn of(bytes: &[u8]) -> u64 {
    CRC64.checksum(bytes)
}

/// A running count and checksum of the octets a server read.
#[derive(Clone)]
pub struct SessionSum {
    digest: Digest<'static, u64>,
    octets: u64,
}

impl SessionSum {
    /// The sum of nothing yet.
    pub fn new() -> Self {
        Self {
            digest: CRC64.digest(),
            octets: 0,
        }
    }

    /// Adds octets, in session order.
    pub fn update(&mut self, bytes: &[u8]) {
        self.digest.update(bytes);
        self.octets = self.octets.saturating_add(bytes.len() as u64);
    }

    /// The sum of everything added so far.
    pub fn value(&self) -> u64 {
        self.digest.clone().finalize()
    }

    /// The word a closing reply ends with: `XSUM=<octets>:<sum in sixteen hex digits>`.
    pub fn tag(&self) -> String {
        format!("{KEYWORD}={}:{:016x}", self.octets, self.value())
    }
}

impl Default for SessionSum {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for SessionSum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionSum({})", self.tag())
    }
}

/// What a closing reply names: (octets read, their sum), from the last word of its last line,
/// if that is a well-formed `XSUM=<octets>:<sum>`.
pub fn named_in(reply: &Reply) -> Option<(u64, u64)> {
    let word = reply.lines.last()?.split_ascii_whitespace().next_back()?;
    let (key, value) = word.split_once('=')?;
    let (octets, hex) = value.split_once(':')?;
    if !key.eq_ignore_ascii_case(KEYWORD)
        || hex.len() != 16
        || octets.is_empty()
        || octets.len() > 20
        || !octets.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    Some((octets.parse().ok()?, u64::from_str_radix(hex, 16).ok()?))
}

/// Whether a closing reply proves that its server read the first octets of `sent`: it names
/// a count no longer than `sent` and the sum of that many.
pub fn proves(reply: &Reply, sent: &[u8]) -> bool {
    named_in(reply).is_some_and(|(octets, sum)| {
        usize::try_from(octets)
            .ok()
            .and_then(|n| sent.get(..n))
            .is_some_and(|prefix| of(prefix) == sum)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::EnhancedCode;

    const CHECK: u64 = 0x995d_c9bb_df19_39fa;

    fn reply(text: &str) -> Reply {
        Reply::new(221, EnhancedCode::new(2, 0, 0), text.to_owned())
    }

    #[test]
    fn the_sum_is_crc_64_xz() {
        // The catalogue's check value: CRC-64/XZ of "123456789".
        let mut s = SessionSum::new();
        s.update(b"12345");
        s.update(b"6789");
        assert_eq!(s.value(), CHECK);
        assert_eq!(of(b"123456789"), CHECK);
        assert_eq!(s.tag(), "XSUM=9:995dc9bbdf1939fa");
        assert_eq!(SessionSum::new().tag(), "XSUM=0:0000000000000000");
    }

    #[test]
    fn a_closing_reply_names_its_count_and_sum_in_its_last_word() {
        assert_eq!(
            named_in(&reply("gw closing connection XSUM=9:995dc9bbdf1939fa")),
            Some((9, CHECK))
        );
        assert_eq!(
            named_in(&reply("gw closing connection xsum=9:995DC9BBDF1939FA")),
            Some((9, CHECK))
        );
        for text in [
            "gw closing connection",
            "gw closing connection XSUM=995dc9bbdf1939fa",
            "gw closing connection XSUM=9:995dc9bbdf1939f",
            "gw closing connection XSUM=9:995dc9bbdf1939fa0",
            "gw closing connection XSUM=9:995dc9bbdf1939fg",
            "gw closing connection XSUM=-9:995dc9bbdf1939fa",
            "gw closing connection XSUM=:995dc9bbdf1939fa",
            "gw closing connection XSUM=99999999999999999999999:995dc9bbdf1939fa",
            "gw closing connection SUM=9:995dc9bbdf1939fa",
            "XSUM=9:995dc9bbdf1939fa closing connection",
        ] {
            assert_eq!(named_in(&reply(text)), None, "{text}");
        }
    }

    #[test]
    fn a_reply_proves_a_prefix_of_what_was_sent_and_nothing_else() {
        let sent = b"123456789QUIT\r\n";
        assert!(proves(&reply("x XSUM=9:995dc9bbdf1939fa"), sent));
        assert!(proves(&reply("x XSUM=0:0000000000000000"), sent));
        // Another session's octets, a count beyond what was sent, no tag at all.
        assert!(!proves(&reply("x XSUM=9:995dc9bbdf1939fb"), sent));
        assert!(!proves(&reply("x XSUM=8:995dc9bbdf1939fa"), sent));
        assert!(!proves(&reply("x XSUM=9:995dc9bbdf1939fa"), b"12345678"));
        assert!(!proves(&reply("x XSUM=99:995dc9bbdf1939fa"), sent));
        assert!(!proves(&reply("x closing connection"), sent));
    }
}
