//! Errors of the HMTP and CFTP layers.

use skywave_smtp::data::DataFault;
use thiserror::Error;

/// What was wrong with CFTP data, sent or received.
#[derive(Debug, Error)]
pub enum CftpError {
    /// Fewer bytes than a fixed-size field needs.
    #[error("truncated {what}: need {needed} bytes, got {got}")]
    Truncated {
        /// The field that was cut short.
        what: &'static str,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// The reserved low nibble of the RCOPv1 first byte was not zero.
    #[error("RCOPv1 header byte 0x{byte:02x}: reserved bits 3-0 must be zero")]
    ReservedBits {
        /// The offending byte.
        byte: u8,
    },
    /// The BFTPv1 PDU did not start with DLE STX.
    #[error("BFTPv1 PDU starts with {got:02x?}, expected DLE STX [10, 02]")]
    BadBftpSync {
        /// The two bytes found.
        got: [u8; 2],
    },
    /// A BFTP file name must be 1-255 bytes.
    #[error("BFTP file name must be 1 to 255 bytes long")]
    BadFilename,
    /// A file over the size limit.
    #[error("CFTP file of {size} bytes is over the limit of {max} bytes")]
    FileTooLarge {
        /// Size of the file.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The MTU leaves no room for data after the RCOPv1 header.
    #[error("MTU {mtu} leaves no room for CFTP data after the 4-byte RCOPv1 header")]
    MtuTooSmall {
        /// The MTU given.
        mtu: usize,
    },
    /// A mail-file field was missing its LF or too long.
    #[error("CFTP mail-file: field {field} is missing, not terminated by LF, or too long")]
    BadField {
        /// The field.
        field: &'static str,
    },
    /// The CFTP message id is not 1-255 alphanumeric characters.
    #[error("CFTP message id must be 1 to 255 ASCII letters and digits")]
    BadMessageId,
    /// No recipients to send to.
    #[error("CFTP mail-file needs at least one recipient")]
    NoRecipients,
    /// The recipient list is malformed.
    #[error("CFTP recipient list: {reason}")]
    BadRecipientList {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The recipient list is over the Annex F limit.
    #[error("CFTP recipient list of {len} characters is over the Annex F limit of 10239")]
    RecipientListTooLong {
        /// Its length.
        len: usize,
    },
    /// The MessageSize field is not a decimal number.
    #[error("CFTP MessageSize is not a decimal number")]
    BadMessageSize,
    /// MessageSize disagrees with the message.
    #[error("CFTP MessageSize says {declared} bytes but the message has {actual}")]
    SizeMismatch {
        /// The declared size.
        declared: usize,
        /// The real size.
        actual: usize,
    },
    /// The message does not end in CRLF.CRLF.
    #[error("CFTP message does not end with CRLF.CRLF")]
    MissingTerminator,
    /// The message text is not acceptable mail.
    #[error("CFTP message rejected: {fault:?}")]
    BadMessage {
        /// What the SMTP data reader found.
        fault: DataFault,
    },
    /// A segment out of order, or of a file that never started.
    #[error(
        "CFTP segment {segment} of file (connection {connection}, U_PDU {updu_id}) unexpected{}",
        match .expected { Some(n) => format!(": expected segment {n}"), None => ": no such file in progress".to_string() }
    )]
    UnexpectedSegment {
        /// Connection id.
        connection: u8,
        /// U_PDU id.
        updu_id: u8,
        /// Segment number received.
        segment: u16,
        /// Segment number expected, if the file was known.
        expected: Option<u16>,
    },
    /// A bundle holds more mail-files than the receiver accepts in one file.
    #[error("a CFTP file holds more than {max} mail-files")]
    BundleTooLarge {
        /// The limit.
        max: usize,
    },
    /// Too many files being reassembled at once.
    #[error("more than {max} CFTP files in progress from one peer")]
    TooManyFiles {
        /// The limit.
        max: usize,
    },
    /// More bytes than the BFTP header announced.
    #[error("CFTP file has {extra} bytes more than its BFTP header announced")]
    TrailingBytes {
        /// The excess.
        extra: usize,
    },
    /// gzip compression failed.
    #[error("CFTP gzip compression failed: {0}")]
    Compress(String),
    /// gzip decompression failed (corrupt data or over the limit).
    #[error("CFTP gzip decompression failed: {0}")]
    Decompress(String),
}

/// What went wrong in an HMTP session (SAP 3).
#[derive(Debug, Error)]
pub enum HmtpError {
    /// The MTU is too small to carry anything useful.
    #[error("MTU {mtu} is too small for HMTP: at least {min} bytes are needed")]
    MtuTooSmall {
        /// The MTU given.
        mtu: usize,
        /// The smallest MTU accepted.
        min: usize,
    },
    /// An LZW code width outside 9-16 bits.
    #[error("LZW code width of {bits} bits is outside 9-16")]
    LzwBits {
        /// The width given.
        bits: u8,
    },
    /// A batch without messages.
    #[error("an HMTP batch needs at least one message")]
    EmptyBatch,
    /// The SMTP client session refused the batch (an address or host name that cannot be sent).
    #[error("HMTP batch refused: {0}")]
    Client(#[from] skywave_smtp::ClientError),
    /// Compressing the outgoing stream failed.
    #[error("compressing the HMTP stream failed: {0}")]
    Compress(#[from] skywave_compress::CompressError),
    /// The received stream could not be decoded (unknown first byte, corrupt data, over a limit).
    #[error("decoding the received HMTP stream failed: {0}")]
    Decompress(#[from] skywave_compress::DecompressError),
    /// The compression scheme cannot carry a session stream.
    #[error("compression scheme unusable for HMTP: {0}")]
    Scheme(#[from] skywave_compress::SchemeError),
    /// Two node addresses that are the same (a node cannot collide with itself).
    #[error("node address {0} is both ours and the peer's")]
    SameAddress(u32),
    /// A spool decision for a message that is not the one the server is waiting on.
    #[error("spool decision does not match the message the HMTP server is waiting on")]
    NoMessagePending,
}
