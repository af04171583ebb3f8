//! Scheme names (as operators write them) and detection of a stream's scheme from its first byte.
//!
//! A compressed HMTP stream towards a skywave peer starts compressed from its first byte, with no
//! negotiation round trip, so the receiver decides from that byte: `0x03` is the JNOS LZW header,
//! `0x78` the zlib header (deflate, 32 KiB window), and printable ASCII a plain SMTP stream (EHLO,
//! or a reply's digits). Note that `0x78` is also ASCII `x`; no SMTP command or reply starts with
//! a lower-case `x`, so the byte is taken as zlib. gzip files (CFTP) start with `1f 8b`.

use std::fmt;
use std::str::FromStr;

use crate::error::{DetectError, SchemeError};
use crate::lzw::{MAX_MAXBITS, MIN_MAXBITS};

/// A compression scheme an operator can choose for a peer or for `skywave codec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// JNOS LZW with this maxbits (9..=16).
    Lzw(u8),
    /// A zlib deflate stream with partial flushes.
    Deflate,
    /// A gzip file (RFC 1952), one per message (CFTP).
    Gzip,
}

impl Scheme {
    /// The schemes `skywave codec stats` compares.
    pub const STATS: [Scheme; 5] = [
        Scheme::Lzw(9),
        Scheme::Lzw(12),
        Scheme::Lzw(16),
        Scheme::Deflate,
        Scheme::Gzip,
    ];

    /// The stream kind this scheme's first byte announces (gzip files are not streams).
    pub fn stream_kind(self) -> Option<StreamKind> {
        match self {
            Scheme::Lzw(_) => Some(StreamKind::Lzw),
            Scheme::Deflate => Some(StreamKind::Zlib),
            Scheme::Gzip => None,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scheme::Lzw(bits) => write!(f, "lzw{bits}"),
            Scheme::Deflate => f.write_str("deflate"),
            Scheme::Gzip => f.write_str("gzip"),
        }
    }
}

impl FromStr for Scheme {
    type Err = SchemeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.as_str() {
            "deflate" | "zlib" => return Ok(Scheme::Deflate),
            "gzip" => return Ok(Scheme::Gzip),
            _ => {}
        }
        if let Some(bits) = lower.strip_prefix("lzw") {
            let bits: u32 = bits
                .parse()
                .map_err(|_| SchemeError::UnknownName(s.to_string()))?;
            if !(u32::from(MIN_MAXBITS)..=u32::from(MAX_MAXBITS)).contains(&bits) {
                return Err(SchemeError::MaxBits(bits));
            }
            // In range 9..=16, so it fits.
            return Ok(Scheme::Lzw(u8::try_from(bits).unwrap_or(MAX_MAXBITS)));
        }
        Err(SchemeError::UnknownName(s.to_string()))
    }
}

/// What a session stream's first byte says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamKind {
    /// Uncompressed text (the stream starts with printable ASCII).
    Plain,
    /// JNOS LZW (header byte `0x03`).
    Lzw,
    /// A zlib deflate stream (header byte `0x78`).
    Zlib,
}

impl fmt::Display for StreamKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamKind::Plain => f.write_str("plain text"),
            StreamKind::Lzw => f.write_str("JNOS LZW"),
            StreamKind::Zlib => f.write_str("zlib deflate"),
        }
    }
}

/// The scheme of a session stream from its first byte: `0x03` JNOS LZW, `0x78` zlib, printable
/// ASCII (0x20-0x7E) plain; anything else is an error.
pub fn detect_stream(first_bytes: &[u8]) -> Result<StreamKind, DetectError> {
    match first_bytes.first() {
        None => Err(DetectError::Empty),
        Some(0x03) => Ok(StreamKind::Lzw),
        Some(0x78) => Ok(StreamKind::Zlib),
        Some(0x20..=0x7e) => Ok(StreamKind::Plain),
        Some(&b) => Err(DetectError::UnknownFirstByte(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for bits in 9..=16u8 {
            let s = Scheme::Lzw(bits);
            assert_eq!(s.to_string().parse::<Scheme>(), Ok(s));
        }
        assert_eq!("deflate".parse::<Scheme>(), Ok(Scheme::Deflate));
        assert_eq!("GZIP".parse::<Scheme>(), Ok(Scheme::Gzip));
        assert_eq!("lzw8".parse::<Scheme>(), Err(SchemeError::MaxBits(8)));
        assert_eq!("lzw17".parse::<Scheme>(), Err(SchemeError::MaxBits(17)));
        assert!(matches!(
            "lzma".parse::<Scheme>(),
            Err(SchemeError::UnknownName(_))
        ));
    }

    #[test]
    fn detection_by_first_byte() {
        assert_eq!(detect_stream(&[0x03, 0x10]), Ok(StreamKind::Lzw));
        assert_eq!(detect_stream(&[0x78, 0xda]), Ok(StreamKind::Zlib));
        assert_eq!(detect_stream(b"EHLO ship"), Ok(StreamKind::Plain));
        assert_eq!(detect_stream(b"220 ready"), Ok(StreamKind::Plain));
        assert_eq!(detect_stream(&[]), Err(DetectError::Empty));
        assert_eq!(
            detect_stream(&[0x1f, 0x8b]),
            Err(DetectError::UnknownFirstByte(0x1f))
        );
        assert_eq!(
            detect_stream(&[0x80]),
            Err(DetectError::UnknownFirstByte(0x80))
        );
    }
}
