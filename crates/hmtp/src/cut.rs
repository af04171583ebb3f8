//! skywave's `XCUT`: a session cut short by a lost link is given up at once, not after the
//! server's timeout.
//!
//! Sits between the HMTP client and server of two skywave gateways, on the U_PDU stream of one
//! SAP. A session is one stream of U_PDUs, compressed or not. When the sending node refuses
//! one (it gave up the link), the peer's server may hold the first part of the session, and
//! the next session's U_PDUs, arriving in order behind it, would be read as its rest: plain
//! text taken into the cut message, or a deflate stream decoded with the old block's tables
//! into garbage whose first end of data closes the cut message, accepted corrupt. So a client
//! holds its next session until the server must have given the cut one up (its idle timeout:
//! five minutes and more), which costs delivery time after every outage.
//!
//! A server that advertises [`KEYWORD`] in its EHLO reply reads a U_PDU that is exactly
//! [`MARKER`] as "the session you are reading from me is given up": it ends that session there,
//! as its timeout would (messages it accepted stay accepted, the cut one is dropped), and sends
//! no replies, since no client waits for them. A client whose peer advertised it sends the
//! marker, after a refused U_PDU, as the first U_PDU of its next session, in the same
//! submission, so the node delivers it in order ahead of the new stream, and starts that
//! session without waiting. A server with no session of the peer's open ignores it.
//!
//! The marker is not taken for data: no stream starts with a NUL; a session's U_PDUs but the
//! last are cut at the MTU or within 16 octets of it, and the last ends the stream (a plain
//! one with `QUIT` CRLF), so a plain U_PDU equal to it needs an MTU under 63 octets (Annex A
//! asks 2048 of a general-purpose node; open5066 binds with 200) and a message that carries
//! NULs; and a compressed U_PDU equal to these 46 octets is a chance of 2^-368.

/// The EHLO keyword of a server that honours [`MARKER`] (the one the SMTP client recognises).
pub const KEYWORD: &str = skywave_smtp::client::CUT_KEYWORD;

/// The U_PDU that gives up the session in progress (see the module docs).
pub const MARKER: &[u8] = b"\0skywave XCUT: the session in progress is cut\0";

/// Whether `updu` is the cut marker.
pub fn is_marker(updu: &[u8]) -> bool {
    updu == MARKER
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_exact_and_starts_with_a_nul() {
        assert_eq!(MARKER.len(), 46);
        assert_eq!(MARKER[0], 0, "no stream starts with a NUL");
        assert!(is_marker(MARKER));
        assert!(!is_marker(&MARKER[..45]));
        assert!(!is_marker(&[MARKER, b"x"].concat()));
        assert!(!is_marker(b"EHLO ship.example\r\n"));
    }
}
