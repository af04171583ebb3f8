//! What the HMTP client and server share: the compression choice for a session, cutting a
//! transmission into U_PDUs of at most the MTU, and byte counts.
//!
//! An HMTP session is one byte stream each way (Annex F defines no header, so U_PDU boundaries
//! carry no meaning). Towards skywave peers the stream is compressed from its first byte; the
//! receiver tells the scheme from that byte (`0x03` JNOS LZW, `0x78` zlib, ASCII plain).
//!
//! # Preset dictionaries for short sessions
//! A deflate stream may start from a preset dictionary ([`skywave_compress::dictionary`]):
//! a one-message session then costs about a third fewer bytes. HMTP sends its whole submission
//! before it hears the server, so the choice cannot be negotiated inside a session; it is
//! negotiated across sessions instead. A skywave server answering a deflate stream advertises
//! `XDICT <id> ...` in its EHLO reply (the RFC 1950 DICTIDs it decodes, hex); the client reports
//! them ([`crate::BatchOutcome::peer_dictionaries`]), and the gateway uses a dictionary towards
//! that peer from the next session on ([`crate::ClientSettings::dictionary`]). The zlib header
//! names the dictionary (`FDICT` + `DICTID`), the server's decoder picks it up by itself and its
//! replies use the same one. A peer without it (an older skywave, or another dictionary
//! version) never advertised it, so it is never sent one; a peer that loses it fails that
//! session's decode, and the gateway drops the dictionary for it until it is advertised again.

use skywave_compress::{Scheme, StreamKind};

use crate::error::HmtpError;

/// Smallest MTU accepted: Annex A nodes offer 2048, some servers 200; below 16 bytes a session
/// would be cut into absurdly many U_PDUs.
pub const MIN_MTU: usize = 16;

/// How a session stream is compressed (from the routing table's peer entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Plain HMTP: standard pipelined SMTP bytes (every non-skywave peer).
    None,
    /// JNOS LZW with this maximum code width (9-16 bits).
    Lzw(u8),
    /// zlib deflate, partial-flushed at the end of each transmission.
    Deflate,
}

impl Compression {
    /// The compression crate's scheme, or None for plain.
    pub(crate) fn scheme(self) -> Result<Option<Scheme>, HmtpError> {
        match self {
            Compression::None => Ok(None),
            Compression::Lzw(bits) if (9..=16).contains(&bits) => Ok(Some(Scheme::Lzw(bits))),
            Compression::Lzw(bits) => Err(HmtpError::LzwBits { bits }),
            Compression::Deflate => Ok(Some(Scheme::Deflate)),
        }
    }

    /// The stream kind the first byte announces.
    pub fn stream_kind(self) -> StreamKind {
        match self {
            Compression::None => StreamKind::Plain,
            Compression::Lzw(_) => StreamKind::Lzw,
            Compression::Deflate => StreamKind::Zlib,
        }
    }
}

/// The EHLO keyword a server advertises to deflate clients: every dictionary it decodes.
pub fn xdict_keyword() -> String {
    let ids: Vec<String> = skywave_compress::dictionary::KNOWN
        .iter()
        .map(|d| format!("{:08x}", skywave_compress::dictionary::adler32(d)))
        .collect();
    format!("XDICT {}", ids.join(" "))
}

/// Byte and U_PDU counts of one direction of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectionStats {
    /// SMTP bytes before compression (after decompression on the receiving side).
    pub plain_bytes: u64,
    /// Bytes on the air (in U_PDUs).
    pub wire_bytes: u64,
    /// U_PDUs.
    pub updus: u64,
    /// Transmissions (groups of U_PDUs handed over at once).
    pub transmissions: u64,
}

impl DirectionStats {
    pub(crate) fn count_transmission(&mut self, plain: usize, updus: &[Vec<u8>]) {
        self.plain_bytes += plain as u64;
        self.wire_bytes += updus.iter().map(|u| u.len() as u64).sum::<u64>();
        self.updus += updus.len() as u64;
        if !updus.is_empty() {
            self.transmissions += 1;
        }
    }

    pub(crate) fn count_received(&mut self, wire: usize, plain: usize) {
        self.wire_bytes += wire as u64;
        self.plain_bytes += plain as u64;
        self.updus += 1;
    }
}

/// Checks an MTU.
pub(crate) fn check_mtu(mtu: usize) -> Result<(), HmtpError> {
    if mtu < MIN_MTU {
        return Err(HmtpError::MtuTooSmall { mtu, min: MIN_MTU });
    }
    Ok(())
}

/// Fewest bytes in the last U_PDU of a compressed transmission. After the last text bits a
/// deflate partial flush adds at most about 4 bytes (end-of-block code, the 10-bit empty
/// block) and an LZW flush at most 4; with 16 bytes in the last U_PDU the end of the text can only be decoded
/// once the last U_PDU is in, so the receiver never takes trailing flush bytes for the start of
/// a new stream.
pub(crate) const MIN_COMPRESSED_TAIL: usize = 16;

/// Cuts a compressed transmission into U_PDUs of at most `mtu` bytes with at least
/// [`MIN_COMPRESSED_TAIL`] bytes (or the whole transmission) in the last one.
pub(crate) fn cut_compressed(bytes: &[u8], mtu: usize) -> Vec<Vec<u8>> {
    let mut parts = cut(bytes, mtu, 0, None);
    let n = parts.len();
    if n >= 2 && parts[n - 1].len() < MIN_COMPRESSED_TAIL {
        // The previous U_PDU is full (mtu >= MIN_MTU >= MIN_COMPRESSED_TAIL): move its end back.
        let prev_start = bytes.len() - parts[n - 1].len() - parts[n - 2].len();
        let last_start = bytes.len() - MIN_COMPRESSED_TAIL.min(bytes.len());
        parts[n - 2] = bytes[prev_start..last_start].to_vec();
        parts[n - 1] = bytes[last_start..].to_vec();
    }
    parts
}

/// Cuts `bytes` into U_PDUs of at most `mtu` bytes, never ending a U_PDU at stream offset
/// `avoid_end` (when given and inside the stream): see the server's rule for standard clients,
/// which reads a plain stream that stops right after its EHLO line as a client waiting for the
/// EHLO reply.
pub(crate) fn cut(bytes: &[u8], mtu: usize, offset: u64, avoid_end: Option<u64>) -> Vec<Vec<u8>> {
    let mtu = mtu.max(2);
    let mut out = Vec::with_capacity(bytes.len() / mtu + 1);
    let mut pos = 0usize;
    while pos < bytes.len() {
        let mut end = (pos + mtu).min(bytes.len());
        if let Some(avoid) = avoid_end
            && end < bytes.len()
            && offset + end as u64 == avoid
        {
            end -= 1;
        }
        out.push(bytes[pos..end].to_vec());
        pos = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_respects_mtu_and_avoids_the_offset() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let parts = cut(&data, 200, 0, None);
        assert_eq!(parts.len(), 5);
        assert!(parts.iter().all(|p| p.len() <= 200));
        assert_eq!(parts.concat(), data);
        let parts = cut(&data, 200, 0, Some(400));
        assert!(parts.iter().all(|p| p.len() <= 200));
        assert_eq!(parts.concat(), data);
        let mut end = 0;
        for p in &parts {
            end += p.len();
            assert_ne!(end, 400);
        }
        assert!(cut(&[], 200, 0, None).is_empty());
        for len in [1usize, 15, 16, 17, 200, 201, 215, 216, 217, 999] {
            let data = vec![7u8; len];
            let parts = cut_compressed(&data, 200);
            assert_eq!(parts.concat(), data);
            assert!(parts.iter().all(|p| p.len() <= 200 && !p.is_empty()));
            assert!(parts.last().unwrap().len() >= MIN_COMPRESSED_TAIL.min(len));
        }
    }

    #[test]
    fn lzw_width_is_checked() {
        assert!(Compression::Lzw(8).scheme().is_err());
        assert!(Compression::Lzw(17).scheme().is_err());
        assert_eq!(
            Compression::Lzw(16).scheme().ok().flatten(),
            Some(Scheme::Lzw(16))
        );
        assert_eq!(Compression::None.scheme().ok().flatten(), None);
    }
}
