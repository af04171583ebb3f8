//! Error types shared by the decoders, detection and configuration parsing.

use thiserror::Error;

/// Which decompression cap was hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// The cap on all bytes decompressed from one stream (one session direction, or one file).
    Stream,
    /// The cap on bytes decompressed for one message (reset by `start_message`).
    Message,
}

impl std::fmt::Display for LimitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitKind::Stream => f.write_str("per-stream"),
            LimitKind::Message => f.write_str("per-message"),
        }
    }
}

/// Why decompression of a stream or file failed. After any of these the decoder is unusable:
/// the stream has no resynchronisation point, so the session must be dropped.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecompressError {
    /// The decompressed data would exceed a configured cap (a decompression bomb, or a message
    /// larger than this gateway accepts).
    #[error("decompressed data exceeds the {kind} limit of {limit} bytes")]
    LimitExceeded {
        /// Which cap was hit.
        kind: LimitKind,
        /// The cap in bytes.
        limit: u64,
    },
    /// The first byte of a JNOS LZW stream is not the only version JNOS sends (3).
    #[error("JNOS LZW header: version byte is {0:#04x}, expected 0x03")]
    LzwVersion(u8),
    /// The second header byte of a JNOS LZW stream is not a code width of 9 to 16 bits.
    #[error("JNOS LZW header: maxbits is {0}, expected 9 to 16")]
    LzwMaxBits(u8),
    /// The stream ended after the version byte, before the maxbits byte.
    #[error("JNOS LZW stream truncated inside its 2-byte header")]
    LzwTruncatedHeader,
    /// An LZW code refers to a dictionary entry that does not exist yet.
    #[error("LZW code {code} is beyond the next dictionary entry {next}")]
    LzwCodeOutOfRange {
        /// The code read from the stream.
        code: u32,
        /// The next dictionary code the decoder would assign.
        next: u32,
    },
    /// The sender filled the dictionary up to its maxbits and did not send the clear code.
    #[error("LZW dictionary overflow: the {maxbits}-bit table is full and no clear code came")]
    LzwTableOverflow {
        /// The sender's maxbits from the stream header.
        maxbits: u8,
    },
    /// The zlib or deflate data is corrupt (bad header, bad block, bad checksum).
    #[error("corrupt zlib stream: {0}")]
    Zlib(String),
    /// The zlib stream names a preset dictionary (RFC 1950 `FDICT`) this build does not know:
    /// the peer has another dictionary version (see [`crate::dictionary`]).
    #[error("the zlib stream needs preset dictionary {0:08x}, which this gateway does not know")]
    UnknownDictionary(u32),
    /// The zlib stream ended (final block and checksum) and more bytes followed.
    #[error("{0} bytes after the end of the zlib stream")]
    ZlibTrailingData(usize),
    /// The gzip file is corrupt, truncated or fails its CRC-32 or length check.
    #[error("corrupt gzip file: {0}")]
    Gzip(String),
    /// The stream's first bytes name no scheme we know.
    #[error(transparent)]
    Detect(#[from] DetectError),
    /// The stream is in another scheme than the one the caller required.
    #[error("stream is {found}, expected {expected}")]
    SchemeMismatch {
        /// What the stream's header says.
        found: String,
        /// What the caller asked for.
        expected: String,
    },
}

/// The first byte (or bytes) of a stream or file match no known scheme.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DetectError {
    /// Nothing to look at.
    #[error("cannot detect the compression scheme of an empty stream")]
    Empty,
    /// The first byte is neither 0x03 (JNOS LZW), 0x78 (zlib) nor printable ASCII (plain text).
    #[error(
        "unknown stream scheme: first byte {0:#04x} is neither 0x03 (JNOS LZW), 0x78 (zlib) nor printable ASCII (plain)"
    )]
    UnknownFirstByte(u8),
}

/// A scheme name or a maxbits value given by a person (CLI, configuration) is not valid.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SchemeError {
    /// The LZW code width is outside 9..=16.
    #[error("LZW maxbits {0} is out of range: use 9 to 16")]
    MaxBits(u32),
    /// The scheme is a file format (gzip), not a session stream.
    #[error("{0} is a file format, not a session stream scheme: use lzw9 .. lzw16 or deflate")]
    NotAStream(String),
    /// No known preset dictionary has this id.
    #[error("no preset dictionary with id {0:08x} is known")]
    UnknownDictionary(u32),
    /// The compressor refused the dictionary.
    #[error("cannot prime the compressor with the dictionary: {0}")]
    Dictionary(String),
    /// The scheme name is not one of the known names.
    #[error("unknown compression scheme {0:?}: use lzw9 .. lzw16, deflate or gzip")]
    UnknownName(String),
}
