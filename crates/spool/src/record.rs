//! The queue-file format: typed, length-prefixed records, ending in an END record with a checksum.
//!
//! ```text
//! file     = magic ENVELOPE DSN? (RCPT RDSN? RMOVED?)* WARNED? DEAD? BODY END
//! magic    = "SKWSPL01"                         (8 bytes: format name and version)
//! record   = type:u8 length:u32be payload[length]
//! ENVELOPE = 0x01  id:str arrival:u64 sender:str priority:i8 expires:u64 body_len:u64
//! DSN      = 0x07  ret:u8 envid:opt_str         (RFC 3461 MAIL parameters, when given;
//!                                                ret 0 none, 1 FULL, 2 HDRS)
//! RCPT     = 0x02  address:str target state attempts:u32 next_attempt:u64 last_attempt:u64
//!                  last_error:opt_str
//! RDSN     = 0x06  notify:u8 orcpt:opt_str success:u8
//!                  (the RCPT before it: its NOTIFY, 0 when not given, else 0x80 | bits 0
//!                  SUCCESS, 1 FAILURE, 2 DELAY; its ORCPT; and the success the report is to
//!                  tell, 0 none, 1 delivered, 2 relayed. Written only when one is set.)
//! RMOVED   = 0x08  kind:u8 (from:str)? at:u64   (the RCPT before it, or its RDSN: how it came
//!                  to its target other than by routing; kind 1 fell back from peer `from`,
//!                  2 the same and may go back to `from` when that peer answers again, 3
//!                  came back from its fallback (no `from`). Written only when set.)
//! WARNED   = 0x05  at:u64                       (when the sender was told of the delay)
//! DEAD     = 0x03  reason:str                   (the message is a dead letter, and why)
//! BODY     = 0x04  the message bytes (RFC 5322, CRLF lines, not dot-stuffed)
//! END      = 0x7F  crc32:u32be                  (CRC-32/ISO-HDLC of every byte before END)
//! str      = length:u16be UTF-8 bytes;  opt_str = 0x00 | 0x01 str
//! target   = 0x00 (LAN) | 0x01 peer:str
//! state    = 0x00 pending | 0x01 in flight | 0x02 delivered at:u64
//!          | 0x03 deferred | 0x04 failed status:str diagnostic:str at:u64
//! ```
//!
//! A file without DSN parameters is byte for byte what a gateway without them wrote; one with
//! them (DSN or RDSN records) is not read by such a gateway. Likewise a file with a recipient
//! that a peer's fallback moved (RMOVED) is not read by a gateway from before 2026-12-01.
//!
//! Times are unix seconds. Like a Postfix queue file, a file is only complete when it ends in a
//! valid END record: anything shorter is [`DecodeError::Incomplete`], however it was cut. The
//! decoder is bounded: every record has a size limit, recipients are limited in number, and it
//! never allocates more than the input it was given.

use skywave_smtp::dsn::{MailDsn, Notify, RcptDsn, Ret};

use crate::id::{MAX_ID_LEN, QueueId};
use crate::priority::Priority;

/// The first 8 bytes of every queue file.
pub const MAGIC: &[u8; 8] = b"SKWSPL01";
/// Largest message body the format carries (512 MiB).
pub const MAX_BODY: usize = 512 * 1024 * 1024;
/// Most recipients in one message.
pub const MAX_RECIPIENTS: usize = 10_000;
/// Longest address, route target name, SMTP status or error text, in bytes.
pub const MAX_TEXT: usize = 4096;
/// Largest non-body record.
const MAX_META_RECORD: usize = 4 * MAX_TEXT + 64;

const T_ENVELOPE: u8 = 0x01;
const T_RCPT: u8 = 0x02;
const T_DEAD: u8 = 0x03;
const T_BODY: u8 = 0x04;
const T_WARNED: u8 = 0x05;
const T_RDSN: u8 = 0x06;
const T_DSN: u8 = 0x07;
const T_RMOVED: u8 = 0x08;
const T_END: u8 = 0x7F;
const RECORD_HEADER: usize = 5;

/// Where a recipient's copy goes next: the LAN, or an HF peer named in the routing table.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// Local delivery (the LAN smarthost or a Maildir).
    Lan,
    /// An HF peer gateway or a multicast group of them, by its name in the routing table
    /// (peers and groups share one name space).
    Peer(String),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Lan => f.write_str("lan"),
            Target::Peer(p) => write!(f, "peer:{p}"),
        }
    }
}

/// A permanent failure of one recipient, in SMTP terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// RFC 3463 enhanced status code, e.g. `5.1.1` (`4.4.7` for an expired message).
    pub status: String,
    /// What went wrong: the remote SMTP reply (`550 5.1.1 no such user`) or our own text.
    pub diagnostic: String,
    /// When it failed (unix seconds).
    pub at: u64,
}

/// Delivery status of one recipient.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RcptState {
    /// Waiting for its first attempt.
    Pending,
    /// Handed to a bearer; the outcome is not known yet. Start-up recovery makes it pending.
    InFlight,
    /// Delivered (accepted by the next hop).
    Delivered {
        /// When (unix seconds).
        at: u64,
    },
    /// Temporarily failed; retried at the recipient's `next_attempt`.
    Deferred,
    /// Permanently failed; reported to the sender in a DSN.
    Failed(Failure),
}

impl RcptState {
    /// Delivered or failed: nothing more will be done for this recipient.
    pub fn is_final(&self) -> bool {
        matches!(self, RcptState::Delivered { .. } | RcptState::Failed(_))
    }

    /// A short name for listings.
    pub fn name(&self) -> &'static str {
        match self {
            RcptState::Pending => "pending",
            RcptState::InFlight => "in-flight",
            RcptState::Delivered { .. } => "delivered",
            RcptState::Deferred => "deferred",
            RcptState::Failed(_) => "failed",
        }
    }
}

/// One recipient of a queued message and its delivery status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recipient {
    /// The RCPT TO address (without angle brackets).
    pub address: String,
    /// Where this recipient's copy goes.
    pub target: Target,
    /// Delivery status.
    pub state: RcptState,
    /// Attempts made so far.
    pub attempts: u32,
    /// Earliest time of the next attempt (unix seconds; 0 means at once).
    pub next_attempt: u64,
    /// Time of the last attempt (unix seconds; 0 if none).
    pub last_attempt: u64,
    /// Text of the last temporary error.
    pub last_error: Option<String>,
    /// What its sender asked to be told (RFC 3461 `NOTIFY`, `ORCPT`).
    pub dsn: RcptDsn,
    /// Delivered, and its sender asked to hear so (`NOTIFY=SUCCESS`) from this gateway: the
    /// report, sent once the message is complete, tells this.
    pub success: Option<Success>,
    /// How it came to wait for its target other than by routing (a peer's fallback).
    pub moved: Option<Moved>,
}

/// How a recipient came to wait for its target other than by routing: moved there by a
/// peer's fallback (or by the operator), or back from the fallback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Moved {
    /// Moved from peer `from` at unix second `at`. `back`: it fell back while `from` did not
    /// answer, and goes back to `from` once `from` answers again, if it is still waiting.
    FellBack {
        /// The peer it waited for before.
        from: String,
        /// When it moved (unix seconds).
        at: u64,
        /// It may go back to `from`.
        back: bool,
    },
    /// Came back from its fallback at unix second `at`, its peer answering again: the wait
    /// before it falls back again counts from then, not from the message's arrival.
    Returned {
        /// When it came back (unix seconds).
        at: u64,
    },
}

impl Moved {
    /// When it began to wait for its target: the message's `arrival`, or its return.
    pub fn waiting_since(moved: Option<&Moved>, arrival: u64) -> u64 {
        match moved {
            Some(Moved::Returned { at }) => arrival.max(*at),
            _ => arrival,
        }
    }
}

impl std::fmt::Display for Moved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Moved::FellBack { from, back, .. } => {
                write!(f, "moved here from peer:{from}")?;
                if *back {
                    write!(
                        f,
                        ", which did not answer; it goes back when that peer answers"
                    )?;
                }
                Ok(())
            }
            Moved::Returned { .. } => {
                f.write_str("back from its fallback, its peer answering again")
            }
        }
    }
}

/// What a success report says of a recipient (RFC 3464 `Action`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Success {
    /// `delivered`: final delivery here (a Maildir).
    Delivered,
    /// `relayed`: handed to a next hop that will not report (no DSN extension there).
    Relayed,
}

impl Recipient {
    /// A new, pending recipient.
    pub fn new(address: impl Into<String>, target: Target) -> Recipient {
        Recipient {
            address: address.into(),
            target,
            state: RcptState::Pending,
            attempts: 0,
            next_attempt: 0,
            last_attempt: 0,
            last_error: None,
            dsn: RcptDsn::default(),
            success: None,
            moved: None,
        }
    }
}

/// Everything about a queued message except its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// Queue id (also the file name).
    pub id: QueueId,
    /// Arrival time (unix seconds).
    pub arrival: u64,
    /// MAIL FROM reverse path without brackets; empty for the null reverse path (bounces).
    pub sender: String,
    /// Priority on the RFC 6710 scale.
    pub priority: Priority,
    /// When the message expires (unix seconds): remaining recipients then fail with a DSN.
    pub expires: u64,
    /// Recipients and their status.
    pub recipients: Vec<Recipient>,
    /// When its sender was told that it is delayed (a DSN with `Action: delayed`), if so: that
    /// is done once per message.
    pub delay_warned: Option<u64>,
    /// Set when the message is a dead letter: why it was taken out of circulation.
    pub dead_reason: Option<String>,
    /// Size of the message bytes.
    pub size: u64,
    /// What its sender asked of reports (RFC 3461 `RET`, `ENVID`).
    pub dsn: MailDsn,
}

impl Envelope {
    /// True when every recipient is delivered or failed.
    pub fn is_complete(&self) -> bool {
        self.recipients.iter().all(|r| r.state.is_final())
    }

    /// True when some recipient failed permanently.
    pub fn has_failures(&self) -> bool {
        self.recipients
            .iter()
            .any(|r| matches!(r.state, RcptState::Failed(_)))
    }

    /// True when some recipient failed and its sender did not refuse failure reports: the
    /// report, once the message is complete, is a bounce.
    pub fn reports_failure(&self) -> bool {
        self.recipients
            .iter()
            .any(|r| matches!(r.state, RcptState::Failed(_)) && r.dsn.wants_failure())
    }

    /// True when the sender is to get a report once the message is complete: some recipient
    /// failed and its `NOTIFY` does not refuse failure reports, or was delivered and asked for
    /// a success report. Never for the null sender.
    pub fn needs_report(&self) -> bool {
        !self.sender.is_empty()
            && self.recipients.iter().any(|r| match r.state {
                RcptState::Failed(_) => r.dsn.wants_failure(),
                RcptState::Delivered { .. } => r.success.is_some(),
                _ => false,
            })
    }

    /// The earliest next attempt over recipients that still wait for one.
    pub fn next_attempt(&self) -> Option<u64> {
        self.recipients
            .iter()
            .filter(|r| matches!(r.state, RcptState::Pending | RcptState::Deferred))
            .map(|r| r.next_attempt)
            .min()
    }

    /// Seconds since arrival.
    pub fn age(&self, now: u64) -> u64 {
        now.saturating_sub(self.arrival)
    }

    /// Most attempts made for any recipient.
    pub fn attempts(&self) -> u32 {
        self.recipients
            .iter()
            .map(|r| r.attempts)
            .max()
            .unwrap_or(0)
    }

    /// The error text of the most recent failed attempt.
    pub fn last_error(&self) -> Option<&str> {
        self.recipients
            .iter()
            .filter(|r| r.last_error.is_some())
            .max_by_key(|r| r.last_attempt)
            .and_then(|r| r.last_error.as_deref())
    }
}

/// A whole queue file: envelope and message bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueFile {
    /// The envelope and per-recipient status.
    pub envelope: Envelope,
    /// The message (RFC 5322 bytes, CRLF line ends).
    pub message: Vec<u8>,
}

/// Why a queue file could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The file does not start with the spool magic `SKWSPL01`.
    #[error("not a skywave queue file: the first 8 bytes are not \"SKWSPL01\"")]
    BadMagic,
    /// The file ends before its END record: it was never completely written.
    #[error("incomplete queue file: it ends inside or before the {0} record (no END record)")]
    Incomplete(&'static str),
    /// A record of one type where the format requires another.
    #[error("record type {found:#04x} at offset {offset}, where {expected} was expected")]
    UnexpectedRecord {
        /// The type byte found.
        found: u8,
        /// Its offset in the file.
        offset: usize,
        /// What the format allows there.
        expected: &'static str,
    },
    /// A record longer than its type allows.
    #[error("{record} record at offset {offset} is {len} bytes long, over the limit of {max}")]
    RecordTooLong {
        /// Record name.
        record: &'static str,
        /// Its offset in the file.
        offset: usize,
        /// Its declared length.
        len: usize,
        /// The limit for that record type.
        max: usize,
    },
    /// A record whose content does not parse.
    #[error("malformed {record} record: {what}")]
    Malformed {
        /// Record name.
        record: &'static str,
        /// What was wrong.
        what: String,
    },
    /// More recipients than [`MAX_RECIPIENTS`].
    #[error("more than {MAX_RECIPIENTS} recipients")]
    TooManyRecipients,
    /// The checksum in the END record does not match the bytes before it.
    #[error(
        "checksum mismatch: END record says {stored:#010x}, the file's bytes give {computed:#010x}"
    )]
    Checksum {
        /// The stored CRC.
        stored: u32,
        /// The CRC of the bytes read.
        computed: u32,
    },
    /// Bytes follow the END record.
    #[error("{0} stray bytes after the END record")]
    TrailingBytes(usize),
}

/// Why a queue file could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A text field is longer than the format allows.
    #[error("{field} is {len} bytes long, over the limit of {MAX_TEXT}")]
    TextTooLong {
        /// Which field.
        field: &'static str,
        /// Its length.
        len: usize,
    },
    /// The message is larger than [`MAX_BODY`].
    #[error("message of {0} bytes is over the spool's limit of {MAX_BODY}")]
    BodyTooLarge(usize),
    /// More than [`MAX_RECIPIENTS`] recipients.
    #[error("{0} recipients, over the limit of {MAX_RECIPIENTS}")]
    TooManyRecipients(usize),
    /// The envelope's size field disagrees with the message bytes.
    #[error("envelope says {declared} bytes but the message has {actual}")]
    SizeMismatch {
        /// `Envelope::size`.
        declared: u64,
        /// Length of the message bytes.
        actual: usize,
    },
}

/// The checksum an END record carries: CRC-32 (ISO-HDLC, as in zlib) of every byte before it.
pub fn checksum(bytes_before_end: &[u8]) -> u32 {
    crc32fast::hash(bytes_before_end)
}

fn put_str(out: &mut Vec<u8>, field: &'static str, s: &str) -> Result<(), EncodeError> {
    if s.len() > MAX_TEXT {
        return Err(EncodeError::TextTooLong {
            field,
            len: s.len(),
        });
    }
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn put_opt_str(out: &mut Vec<u8>, field: &'static str, s: Option<&str>) -> Result<(), EncodeError> {
    match s {
        None => out.push(0),
        Some(s) => {
            out.push(1);
            put_str(out, field, s)?;
        }
    }
    Ok(())
}

fn put_record(out: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    out.push(kind);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
}

/// Encodes a queue file. Everything it writes, [`decode`] reads back unchanged.
pub fn encode(file: &QueueFile) -> Result<Vec<u8>, EncodeError> {
    let env = &file.envelope;
    if file.message.len() > MAX_BODY {
        return Err(EncodeError::BodyTooLarge(file.message.len()));
    }
    if env.size != file.message.len() as u64 {
        return Err(EncodeError::SizeMismatch {
            declared: env.size,
            actual: file.message.len(),
        });
    }
    if env.recipients.len() > MAX_RECIPIENTS {
        return Err(EncodeError::TooManyRecipients(env.recipients.len()));
    }
    let mut out = Vec::with_capacity(file.message.len() + 256 + 64 * env.recipients.len());
    out.extend_from_slice(MAGIC);

    let mut p = Vec::with_capacity(128);
    put_str(&mut p, "queue id", env.id.as_str())?;
    p.extend_from_slice(&env.arrival.to_be_bytes());
    put_str(&mut p, "sender", &env.sender)?;
    p.push(env.priority.value() as u8);
    p.extend_from_slice(&env.expires.to_be_bytes());
    p.extend_from_slice(&env.size.to_be_bytes());
    put_record(&mut out, T_ENVELOPE, &p);
    if !env.dsn.is_empty() {
        p.clear();
        p.push(match env.dsn.ret {
            None => 0,
            Some(Ret::Full) => 1,
            Some(Ret::Hdrs) => 2,
        });
        put_opt_str(&mut p, "ENVID", env.dsn.envid.as_deref())?;
        put_record(&mut out, T_DSN, &p);
    }

    for r in &env.recipients {
        p.clear();
        put_str(&mut p, "recipient address", &r.address)?;
        match &r.target {
            Target::Lan => p.push(0),
            Target::Peer(name) => {
                p.push(1);
                put_str(&mut p, "peer name", name)?;
            }
        }
        match &r.state {
            RcptState::Pending => p.push(0),
            RcptState::InFlight => p.push(1),
            RcptState::Delivered { at } => {
                p.push(2);
                p.extend_from_slice(&at.to_be_bytes());
            }
            RcptState::Deferred => p.push(3),
            RcptState::Failed(f) => {
                p.push(4);
                put_str(&mut p, "failure status", &f.status)?;
                put_str(&mut p, "failure diagnostic", &f.diagnostic)?;
                p.extend_from_slice(&f.at.to_be_bytes());
            }
        }
        p.extend_from_slice(&r.attempts.to_be_bytes());
        p.extend_from_slice(&r.next_attempt.to_be_bytes());
        p.extend_from_slice(&r.last_attempt.to_be_bytes());
        put_opt_str(&mut p, "last error", r.last_error.as_deref())?;
        put_record(&mut out, T_RCPT, &p);
        if !r.dsn.is_empty() || r.success.is_some() {
            p.clear();
            p.push(r.dsn.notify.map_or(0, |n| 0x80 | n.bits()));
            put_opt_str(&mut p, "ORCPT", r.dsn.orcpt.as_deref())?;
            p.push(match r.success {
                None => 0,
                Some(Success::Delivered) => 1,
                Some(Success::Relayed) => 2,
            });
            put_record(&mut out, T_RDSN, &p);
        }
        if let Some(m) = &r.moved {
            p.clear();
            match m {
                Moved::FellBack { from, at, back } => {
                    p.push(if *back { 2 } else { 1 });
                    put_str(&mut p, "peer moved from", from)?;
                    p.extend_from_slice(&at.to_be_bytes());
                }
                Moved::Returned { at } => {
                    p.push(3);
                    p.extend_from_slice(&at.to_be_bytes());
                }
            }
            put_record(&mut out, T_RMOVED, &p);
        }
    }
    if let Some(at) = env.delay_warned {
        put_record(&mut out, T_WARNED, &at.to_be_bytes());
    }
    if let Some(reason) = &env.dead_reason {
        p.clear();
        put_str(&mut p, "dead-letter reason", reason)?;
        put_record(&mut out, T_DEAD, &p);
    }
    put_record(&mut out, T_BODY, &file.message);
    let crc = checksum(&out);
    put_record(&mut out, T_END, &crc.to_be_bytes());
    Ok(out)
}

/// A cursor over one record's payload; running past its end is a malformed record.
struct Fields<'a> {
    record: &'static str,
    bytes: &'a [u8],
}

impl<'a> Fields<'a> {
    fn bad(&self, what: impl Into<String>) -> DecodeError {
        DecodeError::Malformed {
            record: self.record,
            what: what.into(),
        }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        if self.bytes.len() < n {
            return Err(self.bad(format!("it ends inside the {what} field")));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u8(&mut self, what: &str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }

    fn u32(&mut self, what: &str) -> Result<u32, DecodeError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64, DecodeError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    fn str(&mut self, what: &str) -> Result<String, DecodeError> {
        let len_bytes = self.take(2, what)?;
        let len = u16::from_be_bytes([len_bytes[0], len_bytes[1]]) as usize;
        if len > MAX_TEXT {
            return Err(self.bad(format!(
                "{what} is {len} bytes, over the limit of {MAX_TEXT}"
            )));
        }
        let raw = self.take(len, what)?;
        String::from_utf8(raw.to_vec()).map_err(|_| self.bad(format!("{what} is not UTF-8")))
    }

    fn opt_str(&mut self, what: &str) -> Result<Option<String>, DecodeError> {
        match self.u8(what)? {
            0 => Ok(None),
            1 => Ok(Some(self.str(what)?)),
            other => Err(self.bad(format!("{what} presence flag is {other}, expected 0 or 1"))),
        }
    }

    fn finish(&self) -> Result<(), DecodeError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(self.bad(format!("{} unexpected bytes at its end", self.bytes.len())))
        }
    }
}

fn record_name(kind: u8) -> &'static str {
    match kind {
        T_ENVELOPE => "ENVELOPE",
        T_RCPT => "RCPT",
        T_DEAD => "DEAD",
        T_WARNED => "WARNED",
        T_DSN => "DSN",
        T_RDSN => "RDSN",
        T_RMOVED => "RMOVED",
        T_BODY => "BODY",
        T_END => "END",
        _ => "unknown",
    }
}

/// Reads the record at `pos`; `expecting` names what the file needs next (for errors).
fn next_record<'a>(
    input: &'a [u8],
    pos: usize,
    expecting: &'static str,
) -> Result<(u8, &'a [u8]), DecodeError> {
    let rest = &input[pos..];
    if rest.len() < RECORD_HEADER {
        return Err(DecodeError::Incomplete(expecting));
    }
    let kind = rest[0];
    let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
    let max = match kind {
        T_BODY => MAX_BODY,
        T_END => 4,
        T_ENVELOPE | T_RCPT | T_DEAD | T_DSN | T_RDSN | T_RMOVED => MAX_META_RECORD,
        T_WARNED => 8,
        found => {
            return Err(DecodeError::UnexpectedRecord {
                found,
                offset: pos,
                expected: expecting,
            });
        }
    };
    if len > max {
        return Err(DecodeError::RecordTooLong {
            record: record_name(kind),
            offset: pos,
            len,
            max,
        });
    }
    if rest.len() - RECORD_HEADER < len {
        return Err(DecodeError::Incomplete(record_name(kind)));
    }
    Ok((kind, &rest[RECORD_HEADER..RECORD_HEADER + len]))
}

fn decode_envelope(payload: &[u8]) -> Result<Envelope, DecodeError> {
    let mut f = Fields {
        record: "ENVELOPE",
        bytes: payload,
    };
    let id_text = f.str("queue id")?;
    if id_text.len() > MAX_ID_LEN {
        return Err(f.bad("queue id too long"));
    }
    let id = QueueId::parse(&id_text).map_err(|e| f.bad(e.to_string()))?;
    let arrival = f.u64("arrival time")?;
    let sender = f.str("sender")?;
    let prio = f.u8("priority")? as i8;
    let priority =
        Priority::new(prio).ok_or_else(|| f.bad(format!("priority {prio} outside -9..=9")))?;
    let expires = f.u64("expiry time")?;
    let size = f.u64("message size")?;
    f.finish()?;
    Ok(Envelope {
        id,
        arrival,
        sender,
        priority,
        expires,
        recipients: Vec::new(),
        delay_warned: None,
        dead_reason: None,
        size,
        dsn: MailDsn::default(),
    })
}

fn decode_dsn(payload: &[u8]) -> Result<MailDsn, DecodeError> {
    let mut f = Fields {
        record: "DSN",
        bytes: payload,
    };
    let ret = match f.u8("RET")? {
        0 => None,
        1 => Some(Ret::Full),
        2 => Some(Ret::Hdrs),
        other => return Err(f.bad(format!("RET {other}, expected 0 to 2"))),
    };
    let envid = f.opt_str("ENVID")?;
    f.finish()?;
    Ok(MailDsn { ret, envid })
}

/// Reads an RDSN record into the recipient it follows.
fn decode_rdsn(payload: &[u8], r: &mut Recipient) -> Result<(), DecodeError> {
    let mut f = Fields {
        record: "RDSN",
        bytes: payload,
    };
    let notify = match f.u8("NOTIFY")? {
        0 => None,
        b if b & 0x80 != 0 => Some(
            Notify::from_bits(b & 0x7F)
                .ok_or_else(|| f.bad(format!("NOTIFY {b:#04x} has unknown bits")))?,
        ),
        b => return Err(f.bad(format!("NOTIFY {b:#04x} without its presence bit"))),
    };
    let orcpt = f.opt_str("ORCPT")?;
    r.success = match f.u8("success")? {
        0 => None,
        1 => Some(Success::Delivered),
        2 => Some(Success::Relayed),
        other => return Err(f.bad(format!("success {other}, expected 0 to 2"))),
    };
    f.finish()?;
    r.dsn = RcptDsn { notify, orcpt };
    Ok(())
}

/// Reads an RMOVED record: how the recipient before it came to its target.
fn decode_rmoved(payload: &[u8]) -> Result<Moved, DecodeError> {
    let mut f = Fields {
        record: "RMOVED",
        bytes: payload,
    };
    let moved = match f.u8("kind")? {
        kind @ (1 | 2) => Moved::FellBack {
            from: f.str("peer moved from")?,
            at: f.u64("time moved")?,
            back: kind == 2,
        },
        3 => Moved::Returned {
            at: f.u64("time returned")?,
        },
        other => return Err(f.bad(format!("kind {other}, expected 1 to 3"))),
    };
    f.finish()?;
    Ok(moved)
}

fn decode_rcpt(payload: &[u8]) -> Result<Recipient, DecodeError> {
    let mut f = Fields {
        record: "RCPT",
        bytes: payload,
    };
    let address = f.str("recipient address")?;
    let target = match f.u8("target kind")? {
        0 => Target::Lan,
        1 => Target::Peer(f.str("peer name")?),
        other => return Err(f.bad(format!("target kind {other}, expected 0 (LAN) or 1 (peer)"))),
    };
    let state = match f.u8("status")? {
        0 => RcptState::Pending,
        1 => RcptState::InFlight,
        2 => RcptState::Delivered {
            at: f.u64("delivery time")?,
        },
        3 => RcptState::Deferred,
        4 => RcptState::Failed(Failure {
            status: f.str("failure status")?,
            diagnostic: f.str("failure diagnostic")?,
            at: f.u64("failure time")?,
        }),
        other => return Err(f.bad(format!("status {other}, expected 0 to 4"))),
    };
    let attempts = f.u32("attempt count")?;
    let next_attempt = f.u64("next attempt time")?;
    let last_attempt = f.u64("last attempt time")?;
    let last_error = f.opt_str("last error")?;
    f.finish()?;
    Ok(Recipient {
        address,
        target,
        state,
        attempts,
        next_attempt,
        last_attempt,
        last_error,
        dsn: RcptDsn::default(),
        success: None,
        moved: None,
    })
}

/// Decodes a whole queue file, checking its structure, limits and checksum.
pub fn decode(input: &[u8]) -> Result<QueueFile, DecodeError> {
    if input.len() < MAGIC.len() {
        return if MAGIC.starts_with(input) {
            Err(DecodeError::Incomplete("magic"))
        } else {
            Err(DecodeError::BadMagic)
        };
    }
    if &input[..MAGIC.len()] != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    let mut pos = MAGIC.len();
    let (kind, payload) = next_record(input, pos, "ENVELOPE")?;
    if kind != T_ENVELOPE {
        return Err(DecodeError::UnexpectedRecord {
            found: kind,
            offset: pos,
            expected: "ENVELOPE",
        });
    }
    let mut envelope = decode_envelope(payload)?;
    pos += RECORD_HEADER + payload.len();
    // What the record just read allows next: DSN right after ENVELOPE, RDSN right after RCPT,
    // RMOVED right after RCPT or its RDSN.
    let mut after_envelope = true;
    let mut after_rcpt = false;
    let mut after_rdsn = false;

    let message = loop {
        let (kind, payload) = next_record(input, pos, "RCPT, WARNED, DEAD or BODY")?;
        let (was_envelope, was_rcpt, was_rdsn) = (after_envelope, after_rcpt, after_rdsn);
        after_envelope = false;
        after_rcpt = false;
        after_rdsn = false;
        match kind {
            T_DSN if was_envelope => envelope.dsn = decode_dsn(payload)?,
            T_RCPT if envelope.dead_reason.is_none() && envelope.delay_warned.is_none() => {
                if envelope.recipients.len() >= MAX_RECIPIENTS {
                    return Err(DecodeError::TooManyRecipients);
                }
                envelope.recipients.push(decode_rcpt(payload)?);
                after_rcpt = true;
            }
            T_RDSN if was_rcpt => {
                if let Some(r) = envelope.recipients.last_mut() {
                    decode_rdsn(payload, r)?;
                }
                after_rdsn = true;
            }
            T_RMOVED if was_rcpt || was_rdsn => {
                let moved = decode_rmoved(payload)?;
                if let Some(r) = envelope.recipients.last_mut() {
                    r.moved = Some(moved);
                }
            }
            T_WARNED if envelope.dead_reason.is_none() && envelope.delay_warned.is_none() => {
                let mut f = Fields {
                    record: "WARNED",
                    bytes: payload,
                };
                envelope.delay_warned = Some(f.u64("warning time")?);
                f.finish()?;
            }
            T_DEAD if envelope.dead_reason.is_none() => {
                let mut f = Fields {
                    record: "DEAD",
                    bytes: payload,
                };
                envelope.dead_reason = Some(f.str("dead-letter reason")?);
                f.finish()?;
            }
            T_BODY => break payload,
            found => {
                let expected = if envelope.dead_reason.is_some() {
                    "BODY"
                } else if envelope.delay_warned.is_some() {
                    "DEAD or BODY"
                } else {
                    "RCPT, WARNED, DEAD or BODY"
                };
                return Err(DecodeError::UnexpectedRecord {
                    found,
                    offset: pos,
                    expected,
                });
            }
        }
        pos += RECORD_HEADER + payload.len();
    };
    if message.len() as u64 != envelope.size {
        return Err(DecodeError::Malformed {
            record: "BODY",
            what: format!(
                "{} bytes, but the envelope says {}",
                message.len(),
                envelope.size
            ),
        });
    }
    pos += RECORD_HEADER + message.len();

    let end_at = pos;
    let (kind, payload) = next_record(input, pos, "END")?;
    if kind != T_END {
        return Err(DecodeError::UnexpectedRecord {
            found: kind,
            offset: pos,
            expected: "END",
        });
    }
    if payload.len() != 4 {
        return Err(DecodeError::Malformed {
            record: "END",
            what: format!("{} bytes, expected 4", payload.len()),
        });
    }
    pos += RECORD_HEADER + payload.len();
    let stored = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
    let computed = checksum(&input[..end_at]);
    if stored != computed {
        return Err(DecodeError::Checksum { stored, computed });
    }
    if pos != input.len() {
        return Err(DecodeError::TrailingBytes(input.len() - pos));
    }
    Ok(QueueFile {
        envelope,
        message: message.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> QueueFile {
        let mut r2 = Recipient::new("bob@shore.example", Target::Peer("shore".into()));
        r2.state = RcptState::Failed(Failure {
            status: "5.1.1".into(),
            diagnostic: "550 5.1.1 no such user".into(),
            at: 1_700_000_100,
        });
        r2.attempts = 3;
        r2.last_error = Some("421 try later".into());
        let message = b"Subject: hi\r\n\r\nhello\r\n".to_vec();
        QueueFile {
            envelope: Envelope {
                id: QueueId::generate(1_700_000_000, 1, 2),
                arrival: 1_700_000_000,
                sender: "alice@ship.example".into(),
                priority: Priority::new(-3).unwrap_or_default(),
                expires: 1_700_432_000,
                recipients: vec![Recipient::new("carol@lan.example", Target::Lan), r2],
                delay_warned: None,
                dead_reason: None,
                size: message.len() as u64,
                dsn: MailDsn::default(),
            },
            message,
        }
    }

    #[test]
    fn checksum_is_crc32_iso_hdlc() {
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(checksum(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn round_trip_and_layout() {
        let f = sample();
        let bytes = encode(&f).unwrap();
        assert_eq!(&bytes[..8], MAGIC);
        assert_eq!(bytes[8], T_ENVELOPE);
        assert_eq!(bytes[bytes.len() - 9], T_END);
        assert_eq!(&bytes[bytes.len() - 8..bytes.len() - 4], &[0, 0, 0, 4]);
        assert_eq!(decode(&bytes).unwrap(), f);
    }

    #[test]
    fn corruption_is_detected() {
        let bytes = encode(&sample()).unwrap();
        // Flip one body byte: the checksum catches it.
        let mut b = bytes.clone();
        let body_at = b.len() - 9 - 5;
        b[body_at] ^= 0x01;
        assert!(matches!(decode(&b), Err(DecodeError::Checksum { .. })));
        // Extra bytes after END.
        let mut b = bytes.clone();
        b.push(0);
        assert_eq!(decode(&b), Err(DecodeError::TrailingBytes(1)));
        // Wrong magic.
        let mut b = bytes.clone();
        b[0] = b'X';
        assert_eq!(decode(&b), Err(DecodeError::BadMagic));
        // Unknown record type where RCPT/BODY is expected.
        let mut b = bytes;
        let env_len = u32::from_be_bytes([b[9], b[10], b[11], b[12]]) as usize;
        b[8 + 5 + env_len] = 0x55;
        assert!(matches!(
            decode(&b),
            Err(DecodeError::UnexpectedRecord { found: 0x55, .. })
        ));
    }

    #[test]
    fn a_delay_warning_is_one_record_after_the_recipients() {
        let mut f = sample();
        let plain = encode(&f).unwrap();
        f.envelope.delay_warned = Some(0x0102_0304_0506_0708);
        let bytes = encode(&f).unwrap();
        // The same file with 13 bytes more, just before the BODY record.
        let body_at = plain.len() - 9 - 5 - f.message.len();
        assert_eq!(&bytes[..body_at], &plain[..body_at]);
        assert_eq!(
            &bytes[body_at..body_at + 13],
            &[0x05, 0, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(decode(&bytes).unwrap(), f);
        // Twice, or before a recipient, is out of place.
        let mut twice = bytes[..body_at + 13].to_vec();
        twice.extend_from_slice(&bytes[body_at..]);
        assert!(matches!(
            decode(&twice),
            Err(DecodeError::UnexpectedRecord {
                found: 0x05,
                expected: "DEAD or BODY",
                ..
            })
        ));
    }

    #[test]
    fn dsn_parameters_are_records_after_the_envelope_and_after_their_recipient() {
        let mut f = sample();
        let plain = encode(&f).unwrap();
        f.envelope.dsn = MailDsn {
            ret: Some(Ret::Hdrs),
            envid: Some("E".into()),
        };
        f.envelope.recipients[1].dsn = RcptDsn {
            notify: Some(Notify {
                success: true,
                failure: true,
                delay: false,
            }),
            orcpt: Some("B".into()),
        };
        f.envelope.recipients[1].success = Some(Success::Relayed);
        let bytes = encode(&f).unwrap();
        let env_end =
            8 + 5 + u32::from_be_bytes([bytes[9], bytes[10], bytes[11], bytes[12]]) as usize;
        let dsn = [0x07, 0, 0, 0, 5, 2, 1, 0, 1, b'E'];
        let rdsn = [0x06, 0, 0, 0, 6, 0x83, 1, 0, 1, b'B', 2];
        assert_eq!(&bytes[env_end..env_end + dsn.len()], &dsn);
        // The file is the plain one with the two records inserted: the DSN record after the
        // ENVELOPE, the RDSN record after the second RCPT, just before the BODY.
        let body_at = plain.len() - 9 - 5 - f.message.len();
        let mut expected = plain[..env_end].to_vec();
        expected.extend_from_slice(&dsn);
        expected.extend_from_slice(&plain[env_end..body_at]);
        expected.extend_from_slice(&rdsn);
        let body_and_end = body_at + 5 + f.message.len();
        expected.extend_from_slice(&plain[body_at..body_and_end]);
        assert_eq!(&bytes[..expected.len()], &expected[..]);
        assert_eq!(decode(&bytes).unwrap(), f);
        // An RDSN record must follow an RCPT, and a DSN record the ENVELOPE.
        let mut misplaced = plain[..env_end].to_vec();
        misplaced.extend_from_slice(&rdsn);
        misplaced.extend_from_slice(&plain[env_end..]);
        assert!(matches!(
            decode(&misplaced),
            Err(DecodeError::UnexpectedRecord { found: 0x06, .. })
        ));
        let mut misplaced = plain[..body_at].to_vec();
        misplaced.extend_from_slice(&dsn);
        misplaced.extend_from_slice(&plain[body_at..]);
        assert!(matches!(
            decode(&misplaced),
            Err(DecodeError::UnexpectedRecord { found: 0x07, .. })
        ));
        // Unknown NOTIFY bits are refused.
        let mut bad = bytes.clone();
        let at = bytes
            .windows(rdsn.len())
            .position(|w| w == rdsn)
            .unwrap_or_default();
        bad[at + 5] = 0x88;
        assert!(matches!(
            decode(&bad),
            Err(DecodeError::Malformed { record: "RDSN", .. })
        ));
    }

    #[test]
    fn a_move_by_the_fallback_is_a_record_after_its_recipient() {
        let mut f = sample();
        let plain = encode(&f).unwrap();
        f.envelope.recipients[1].moved = Some(Moved::FellBack {
            from: "sat".into(),
            at: 0x0102_0304_0506_0708,
            back: true,
        });
        let bytes = encode(&f).unwrap();
        // Kind 2 (may go back), the peer, the time: after the second RCPT, before the BODY.
        let rmoved = [
            0x08, 0, 0, 0, 14, 2, 0, 3, b's', b'a', b't', 1, 2, 3, 4, 5, 6, 7, 8,
        ];
        let body_at = plain.len() - 9 - 5 - f.message.len();
        assert_eq!(&bytes[..body_at], &plain[..body_at]);
        assert_eq!(&bytes[body_at..body_at + rmoved.len()], &rmoved);
        assert_eq!(decode(&bytes).unwrap(), f);
        // Back from the fallback: kind 3 and the time.
        f.envelope.recipients[1].moved = Some(Moved::Returned { at: 9 });
        let bytes = encode(&f).unwrap();
        assert_eq!(
            &bytes[body_at..body_at + 14],
            &[0x08, 0, 0, 0, 9, 3, 0, 0, 0, 0, 0, 0, 0, 9]
        );
        assert_eq!(decode(&bytes).unwrap(), f);
        // After an RDSN too, but not after the ENVELOPE, and not an unknown kind.
        f.envelope.recipients[1].success = Some(Success::Relayed);
        assert_eq!(decode(&encode(&f).unwrap()).unwrap(), f);
        let env_end =
            8 + 5 + u32::from_be_bytes([plain[9], plain[10], plain[11], plain[12]]) as usize;
        let mut misplaced = plain[..env_end].to_vec();
        misplaced.extend_from_slice(&rmoved);
        misplaced.extend_from_slice(&plain[env_end..]);
        assert!(matches!(
            decode(&misplaced),
            Err(DecodeError::UnexpectedRecord { found: 0x08, .. })
        ));
        let mut bad = plain[..body_at].to_vec();
        bad.extend_from_slice(&rmoved);
        bad[body_at + 5] = 4;
        bad.extend_from_slice(&plain[body_at..]);
        assert!(matches!(
            decode(&bad),
            Err(DecodeError::Malformed {
                record: "RMOVED",
                ..
            })
        ));
    }

    #[test]
    fn oversized_record_is_refused_before_reading_it() {
        let mut b = MAGIC.to_vec();
        b.push(T_ENVELOPE);
        b.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(decode(&b), Err(DecodeError::RecordTooLong { .. })));
    }

    #[test]
    fn encoder_refuses_what_the_decoder_would_refuse() {
        let mut f = sample();
        f.envelope.sender = "x".repeat(MAX_TEXT + 1);
        assert!(matches!(
            encode(&f),
            Err(EncodeError::TextTooLong {
                field: "sender",
                ..
            })
        ));
        let mut f = sample();
        f.envelope.size += 1;
        assert!(matches!(encode(&f), Err(EncodeError::SizeMismatch { .. })));
    }

    fn arb_text() -> impl Strategy<Value = String> {
        "[ -~é]{0,40}"
    }

    fn arb_rcpt() -> impl Strategy<Value = Recipient> {
        let state = prop_oneof![
            Just(RcptState::Pending),
            Just(RcptState::InFlight),
            any::<u64>().prop_map(|at| RcptState::Delivered { at }),
            Just(RcptState::Deferred),
            (arb_text(), arb_text(), any::<u64>()).prop_map(|(status, diagnostic, at)| {
                RcptState::Failed(Failure {
                    status,
                    diagnostic,
                    at,
                })
            }),
        ];
        let target = prop_oneof![Just(Target::Lan), arb_text().prop_map(Target::Peer)];
        (
            arb_text(),
            target,
            state,
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            proptest::option::of(arb_text()),
            (
                arb_rcpt_dsn(),
                proptest::option::of(arb_success()),
                proptest::option::of(arb_moved()),
            ),
        )
            .prop_map(
                |(
                    address,
                    target,
                    state,
                    attempts,
                    next_attempt,
                    last_attempt,
                    last_error,
                    (dsn, success, moved),
                )| {
                    Recipient {
                        address,
                        target,
                        state,
                        attempts,
                        next_attempt,
                        last_attempt,
                        last_error,
                        dsn,
                        success,
                        moved,
                    }
                },
            )
    }

    fn arb_moved() -> impl Strategy<Value = Moved> {
        prop_oneof![
            (arb_text(), any::<u64>(), any::<bool>())
                .prop_map(|(from, at, back)| Moved::FellBack { from, at, back }),
            any::<u64>().prop_map(|at| Moved::Returned { at }),
        ]
    }

    fn arb_success() -> impl Strategy<Value = Success> {
        prop_oneof![Just(Success::Delivered), Just(Success::Relayed)]
    }

    fn arb_rcpt_dsn() -> impl Strategy<Value = RcptDsn> {
        (
            proptest::option::of((0u8..8).prop_map(|b| Notify::from_bits(b).unwrap_or_default())),
            proptest::option::of(arb_text()),
        )
            .prop_map(|(notify, orcpt)| RcptDsn { notify, orcpt })
    }

    fn arb_mail_dsn() -> impl Strategy<Value = MailDsn> {
        (
            proptest::option::of(prop_oneof![Just(Ret::Full), Just(Ret::Hdrs)]),
            proptest::option::of(arb_text()),
        )
            .prop_map(|(ret, envid)| MailDsn { ret, envid })
    }

    fn arb_file() -> impl Strategy<Value = QueueFile> {
        (
            (any::<u64>(), any::<u64>(), any::<u32>()),
            any::<u64>(),
            arb_text(),
            -9i8..=9,
            any::<u64>(),
            proptest::collection::vec(arb_rcpt(), 0..5),
            (
                proptest::option::of(any::<u64>()),
                proptest::option::of(arb_text()),
                arb_mail_dsn(),
            ),
            proptest::collection::vec(any::<u8>(), 0..300),
        )
            .prop_map(
                |(
                    (t, c, s),
                    arrival,
                    sender,
                    prio,
                    expires,
                    recipients,
                    (delay_warned, dead_reason, dsn),
                    message,
                )| {
                    QueueFile {
                        envelope: Envelope {
                            id: QueueId::generate(t, c, s),
                            arrival,
                            sender,
                            priority: Priority::new(prio).unwrap_or_default(),
                            expires,
                            recipients,
                            delay_warned,
                            dead_reason,
                            size: message.len() as u64,
                            dsn,
                        },
                        message,
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn prop_round_trip(f in arb_file()) {
            let bytes = encode(&f).unwrap();
            prop_assert_eq!(decode(&bytes).unwrap(), f);
        }

        #[test]
        fn prop_every_truncation_is_incomplete(f in arb_file(), cut in any::<proptest::sample::Index>()) {
            let bytes = encode(&f).unwrap();
            let cut = cut.index(bytes.len());
            let r = decode(&bytes[..cut]);
            prop_assert!(matches!(r, Err(DecodeError::Incomplete(_))), "cut {} of {}: {:?}", cut, bytes.len(), r);
        }

        #[test]
        fn prop_every_truncation_of_every_length_is_incomplete_small(f in arb_file()) {
            let bytes = encode(&f).unwrap();
            for cut in 0..bytes.len() {
                prop_assert!(matches!(decode(&bytes[..cut]), Err(DecodeError::Incomplete(_))));
            }
        }

        #[test]
        fn prop_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes);
            let mut with_magic = MAGIC.to_vec();
            with_magic.extend_from_slice(&bytes);
            let _ = decode(&with_magic);
        }
    }
}
