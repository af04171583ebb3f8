//! CFTP (STANAG 5066 Annex F.14, SAP 12): the byte layouts, sans-IO.
//!
//! A CFTP delivery agent turns one spooled message into a *mail-file* (message id, recipient list
//! with the return path first, message size, the message as an SMTP receiver saw it, dot-stuffed
//! and ending in `CRLF.CRLF`), gzips it (RFC 1952), puts a BFTPv1 header in front, cuts the result
//! into segments of at most MTU - 4 bytes and sends each behind an RCOPv1 header as one U_PDU. The
//! receiver reassembles, gunzips, re-injects the message into SMTP and acknowledges the file with an
//! RCOPv1 PDU whose body is `0x10 0x0B`, under the same connection and U_PDU ids.
//!
//! This module holds those layouts and the segmenting and reassembly around them; the session
//! logic (which files are in flight, retries) sits above it and the SIS bearer below.
//!
//! Every decoder here is bounded: sizes are checked against explicit limits before anything is
//! buffered, and a bad PDU is an error that says what was wrong.

use std::collections::BTreeMap;

use skywave_compress::{Limits, gzip_compress, gzip_decompress};
use skywave_smtp::data::{DataLimits, DataReader};
use skywave_smtp::dot_stuff;

use crate::error::CftpError;

/// The SAP that CFTP clients bind (Annex F Table F-1).
pub const CFTP_SAP: u8 = 12;
/// Length of the RCOPv1 header in front of every CFTP U_PDU (no APP_ID in version 1).
pub const RCOP_HEADER_LEN: usize = 4;
/// BFTPv1 start of PDU: DLE STX.
pub const BFTP_SYNC: [u8; 2] = [0x10, 0x02];
/// The body of a CFTP message acknowledgement: DLE VT (Fig. F-26).
pub const ACK_BODY: [u8; 2] = [0x10, 0x0B];
/// Annex F: the MessageID has fewer than 256 characters.
pub const MAX_MESSAGE_ID: usize = 255;
/// Annex F: the recipient list has fewer than 10240 characters in all.
pub const MAX_RECIPIENT_LIST: usize = 10_239;

/// RCOPv1 header (Fig. F-23): connection id, U_PDU id, segment number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RcopHeader {
    /// Connection id, 0-15 (0 for non-multiplexed use).
    pub connection: u8,
    /// U_PDU id: one per file, reused only after the file was acknowledged.
    pub updu_id: u8,
    /// Segment number, from 0.
    pub segment: u16,
}

impl RcopHeader {
    /// Appends the 4 header bytes to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push((self.connection & 0x0F) << 4);
        out.push(self.updu_id);
        out.extend_from_slice(&self.segment.to_be_bytes());
    }

    /// Splits an RCOPv1 PDU into its header and body.
    pub fn decode(pdu: &[u8]) -> Result<(Self, &[u8]), CftpError> {
        let Some((head, body)) = pdu.split_first_chunk::<RCOP_HEADER_LEN>() else {
            return Err(CftpError::Truncated {
                what: "RCOPv1 header",
                needed: RCOP_HEADER_LEN,
                got: pdu.len(),
            });
        };
        if head[0] & 0x0F != 0 {
            return Err(CftpError::ReservedBits { byte: head[0] });
        }
        let header = Self {
            connection: head[0] >> 4,
            updu_id: head[1],
            segment: u16::from_be_bytes([head[2], head[3]]),
        };
        Ok((header, body))
    }
}

/// A message as CFTP carries it (Annex F Table F-10), before compression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailFile {
    /// The CFTP message id: alphanumeric, unique per message, fewer than 256 characters. Not the
    /// `Message-ID:` header.
    pub message_id: String,
    /// The envelope sender; `None` for the null reverse path (a bounce).
    pub return_path: Option<String>,
    /// The envelope recipients.
    pub recipients: Vec<String>,
    /// The message with CRLF line ends, *not* dot-stuffed (stuffing is applied on the wire).
    pub message: Vec<u8>,
}

impl MailFile {
    /// Lays the mail-file out: `MessageID LF RecipientList LF MessageSize LF Message`, with the
    /// message dot-stuffed and ending in `CRLF.CRLF` as an SMTP receiver saw it.
    pub fn encode(&self) -> Result<Vec<u8>, CftpError> {
        check_message_id(&self.message_id)?;
        if self.recipients.is_empty() {
            return Err(CftpError::NoRecipients);
        }
        let mut list = String::new();
        // Annex F: with no return path the first entry is empty (or a space), then the comma.
        list.push_str(self.return_path.as_deref().unwrap_or(""));
        for rcpt in &self.recipients {
            check_list_entry(rcpt)?;
            list.push(',');
            list.push_str(rcpt);
        }
        if let Some(rp) = &self.return_path {
            check_list_entry(rp)?;
        }
        if list.len() > MAX_RECIPIENT_LIST {
            return Err(CftpError::RecipientListTooLong { len: list.len() });
        }
        let stuffed = dot_stuff(&self.message);
        let mut out = Vec::with_capacity(self.message_id.len() + list.len() + stuffed.len() + 16);
        out.extend_from_slice(self.message_id.as_bytes());
        out.push(b'\n');
        out.extend_from_slice(list.as_bytes());
        out.push(b'\n');
        out.extend_from_slice(stuffed.len().to_string().as_bytes());
        out.push(b'\n');
        out.extend_from_slice(&stuffed);
        Ok(out)
    }

    /// Parses a decompressed mail-file. `max_message` bounds the message size accepted.
    pub fn decode(file: &[u8], max_message: usize) -> Result<Self, CftpError> {
        let (mail, declared, rest) = Self::decode_prefix(file, max_message)?;
        if !rest.is_empty() {
            return Err(CftpError::SizeMismatch {
                declared,
                actual: declared + rest.len(),
            });
        }
        Ok(mail)
    }

    /// Parses a decompressed file holding one mail-file or, from a skywave peer, a bundle of
    /// several laid end to end (see [`encode_bundle`]): each ends where its MessageSize says,
    /// so no separator is needed. At most `max_count` mail-files are accepted.
    pub fn decode_bundle(
        file: &[u8],
        max_message: usize,
        max_count: usize,
    ) -> Result<Vec<Self>, CftpError> {
        let mut mails = Vec::new();
        let mut rest = file;
        // Bounded: each pass consumes at least the three field separators, or returns.
        loop {
            if mails.len() >= max_count {
                return Err(CftpError::BundleTooLarge { max: max_count });
            }
            let (mail, _, next) = Self::decode_prefix(rest, max_message)?;
            mails.push(mail);
            if next.is_empty() {
                return Ok(mails);
            }
            rest = next;
        }
    }

    /// Parses the mail-file at the start of `file`: the mail, its declared MessageSize, and
    /// the bytes after it.
    fn decode_prefix(file: &[u8], max_message: usize) -> Result<(Self, usize, &[u8]), CftpError> {
        let (id, rest) = split_field(file, "MessageID", MAX_MESSAGE_ID)?;
        let (list, rest) = split_field(rest, "RecipientList", MAX_RECIPIENT_LIST)?;
        let (size, area) = split_field(rest, "MessageSize", 20)?;
        let message_id = String::from_utf8(id.to_vec()).map_err(|_| CftpError::BadMessageId)?;
        check_message_id(&message_id)?;
        let list = std::str::from_utf8(list).map_err(|_| CftpError::BadRecipientList {
            reason: "not UTF-8",
        })?;
        let mut entries = list.split(',');
        let return_path = match entries.next().map(str::trim) {
            None | Some("") => None,
            Some(rp) => Some(rp.to_string()),
        };
        let recipients: Vec<String> = entries.map(|r| r.trim().to_string()).collect();
        if recipients.is_empty() || recipients.iter().any(String::is_empty) {
            return Err(CftpError::BadRecipientList {
                reason: "a recipient is missing or empty",
            });
        }
        let size: usize = std::str::from_utf8(size)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(CftpError::BadMessageSize)?;
        let (Some(message), Some(after)) = (area.get(..size), area.get(size..)) else {
            return Err(CftpError::SizeMismatch {
                declared: size,
                actual: area.len(),
            });
        };
        if !message.ends_with(b"\r\n.\r\n") && message != b".\r\n" {
            return Err(CftpError::MissingTerminator);
        }
        let limits = DataLimits {
            max_size: max_message,
            // CFTP carries the message as the sender's SMTP server accepted it; line length was
            // policed there, so only the overall size bounds us here.
            max_line: max_message.saturating_add(2),
        };
        let mut reader = DataReader::new(limits, false);
        let (used, done) = reader.feed(message);
        if !done || used != message.len() {
            return Err(CftpError::MissingTerminator);
        }
        if let Some(fault) = reader.faults().first() {
            return Err(CftpError::BadMessage { fault: *fault });
        }
        Ok((
            Self {
                message_id,
                return_path,
                recipients,
                message: reader.into_body(),
            },
            size,
            after,
        ))
    }
}

/// Lays out a bundle: the mail-files of several messages end to end, compressed as one gzip
/// file. Not Annex F: a standard CFTP node expects one mail-file per file, so bundles go only
/// to skywave peers (the routing table says which), as Annex F's own concurrent files need
/// "prior knowledge of the peer". One gzip over similar messages compresses much better than
/// one per message (later messages refer back to earlier ones, as in an HMTP session's one
/// deflate stream), which is what small mail needs on HF.
pub fn encode_bundle(mails: &[MailFile]) -> Result<Vec<u8>, CftpError> {
    let mut out = Vec::new();
    for m in mails {
        out.extend_from_slice(&m.encode()?);
    }
    Ok(out)
}

fn check_message_id(id: &str) -> Result<(), CftpError> {
    if id.is_empty() || id.len() > MAX_MESSAGE_ID || !id.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return Err(CftpError::BadMessageId);
    }
    Ok(())
}

fn check_list_entry(addr: &str) -> Result<(), CftpError> {
    if addr.is_empty() || addr.bytes().any(|b| b == b',' || b == b'\n' || b == b'\r') {
        return Err(CftpError::BadRecipientList {
            reason: "an address is empty or contains ',' or a line break",
        });
    }
    Ok(())
}

/// Splits off one LF-terminated field of at most `max` bytes.
fn split_field<'a>(
    data: &'a [u8],
    field: &'static str,
    max: usize,
) -> Result<(&'a [u8], &'a [u8]), CftpError> {
    let window = &data[..data.len().min(max + 1)];
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        return Err(CftpError::BadField { field });
    };
    Ok((&data[..lf], &data[lf + 1..]))
}

/// Builds the BFTPv1 PDU (Fig. F-25) for one file: `DLE STX`, filename length, filename, file size
/// (u32, big-endian), file data.
pub fn bftp_pdu(filename: &str, data: &[u8]) -> Result<Vec<u8>, CftpError> {
    let name = filename.as_bytes();
    let name_len = u8::try_from(name.len())
        .ok()
        .filter(|&n| n > 0)
        .ok_or(CftpError::BadFilename)?;
    let size = u32::try_from(data.len()).map_err(|_| CftpError::FileTooLarge {
        size: data.len() as u64,
        max: u64::from(u32::MAX),
    })?;
    let mut out = Vec::with_capacity(7 + name.len() + data.len());
    out.extend_from_slice(&BFTP_SYNC);
    out.push(name_len);
    out.extend_from_slice(name);
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(data);
    Ok(out)
}

/// The fixed part of a BFTPv1 header, known once its first bytes are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BftpHeader {
    /// The file name as sent.
    pub filename: String,
    /// Size of the file data that follows the header.
    pub file_size: u32,
}

impl BftpHeader {
    /// Parses the header at the start of a BFTPv1 PDU. `Ok(None)` means more bytes are needed;
    /// otherwise the header and its length in bytes.
    pub fn parse(pdu: &[u8]) -> Result<Option<(Self, usize)>, CftpError> {
        match pdu {
            [] | [_] => return Ok(None),
            [a, b, ..] if [*a, *b] != BFTP_SYNC => {
                return Err(CftpError::BadBftpSync { got: [*a, *b] });
            }
            _ => {}
        }
        let Some(&name_len) = pdu.get(2) else {
            return Ok(None);
        };
        let name_len = usize::from(name_len);
        let header_len = 3 + name_len + 4;
        if pdu.len() < header_len {
            return Ok(None);
        }
        let filename = String::from_utf8_lossy(&pdu[3..3 + name_len]).into_owned();
        let size_bytes = [
            pdu[3 + name_len],
            pdu[4 + name_len],
            pdu[5 + name_len],
            pdu[6 + name_len],
        ];
        Ok(Some((
            Self {
                filename,
                file_size: u32::from_be_bytes(size_bytes),
            },
            header_len,
        )))
    }
}

/// Cuts a BFTPv1 PDU into RCOPv1 U_PDUs of at most `mtu` bytes each.
pub fn segment(
    connection: u8,
    updu_id: u8,
    bftp: &[u8],
    mtu: usize,
) -> Result<Vec<Vec<u8>>, CftpError> {
    let chunk = mtu.saturating_sub(RCOP_HEADER_LEN);
    if chunk == 0 {
        return Err(CftpError::MtuTooSmall { mtu });
    }
    let count = bftp.len().div_ceil(chunk).max(1);
    if count > usize::from(u16::MAX) + 1 {
        return Err(CftpError::FileTooLarge {
            size: bftp.len() as u64,
            max: (usize::from(u16::MAX) + 1) as u64 * chunk as u64,
        });
    }
    let mut out = Vec::with_capacity(count);
    for (i, part) in bftp.chunks(chunk).enumerate() {
        let mut pdu = Vec::with_capacity(RCOP_HEADER_LEN + part.len());
        RcopHeader {
            connection,
            updu_id,
            segment: i as u16,
        }
        .encode(&mut pdu);
        pdu.extend_from_slice(part);
        out.push(pdu);
    }
    Ok(out)
}

/// The acknowledgement U_PDU for a received file (Fig. F-26).
pub fn ack_pdu(connection: u8, updu_id: u8) -> Vec<u8> {
    let mut pdu = Vec::with_capacity(RCOP_HEADER_LEN + ACK_BODY.len());
    RcopHeader {
        connection,
        updu_id,
        segment: 0,
    }
    .encode(&mut pdu);
    pdu.extend_from_slice(&ACK_BODY);
    pdu
}

/// Everything needed to send one message over CFTP: the gzip'd mail-file in a BFTPv1 PDU, cut into
/// U_PDUs.
pub fn encode_message(
    mail: &MailFile,
    connection: u8,
    updu_id: u8,
    mtu: usize,
    gzip_level: u32,
) -> Result<Vec<Vec<u8>>, CftpError> {
    let file = mail.encode()?;
    let gz = gzip_compress(&file, gzip_level).map_err(|e| CftpError::Compress(e.to_string()))?;
    let name = format!("{}.gz", mail.message_id);
    let pdu = bftp_pdu(&name, &gz)?;
    segment(connection, updu_id, &pdu, mtu)
}

/// What a CFTP receiver makes of one incoming U_PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// A segment was stored; the file is not complete yet.
    Partial,
    /// A file is complete: its messages (one, or several in a skywave bundle), and the
    /// acknowledgement U_PDU to send back.
    Complete {
        /// The decoded mail-files, in the order sent.
        mails: Vec<MailFile>,
        /// The RCOPv1 acknowledgement for it.
        ack: Vec<u8>,
    },
    /// The peer acknowledged one of our files.
    Ack {
        /// Connection id of the acknowledged file.
        connection: u8,
        /// U_PDU id of the acknowledged file.
        updu_id: u8,
    },
}

/// Limits of a CFTP receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiverLimits {
    /// Largest compressed file accepted (the BFTP file size), in bytes.
    pub max_file: u32,
    /// Largest message accepted after decompression, in bytes.
    pub max_message: usize,
    /// Files being reassembled at once (one per connection and U_PDU id).
    pub max_files_in_progress: usize,
    /// Mail-files in one file (a skywave bundle; 1 from a standard peer).
    pub max_bundle: usize,
}

impl Default for ReceiverLimits {
    fn default() -> Self {
        Self {
            max_file: 16 * 1024 * 1024,
            max_message: 32 * 1024 * 1024,
            max_files_in_progress: 256,
            max_bundle: 256,
        }
    }
}

/// Reassembles CFTP files from one peer (source node and SAP): the caller keeps one receiver per
/// peer, which is the reassembly key Annex F asks for together with connection and U_PDU ids.
///
/// The SIS service is ARQ and in order, so segments of a file arrive in order; a gap or a repeat is
/// an error for that file, which is dropped (its sender retransmits, having had no ACK).
#[derive(Debug, Default)]
pub struct Receiver {
    limits: ReceiverLimits,
    files: BTreeMap<(u8, u8), Partial>,
}

#[derive(Debug)]
struct Partial {
    next_segment: u16,
    bytes: Vec<u8>,
    /// Total PDU length once the BFTP header is parsed.
    total: Option<usize>,
}

impl Receiver {
    /// A receiver with the given limits.
    pub fn new(limits: ReceiverLimits) -> Self {
        Self {
            limits,
            files: BTreeMap::new(),
        }
    }

    /// Files currently being reassembled.
    pub fn in_progress(&self) -> usize {
        self.files.len()
    }

    /// Drops the unfinished file under these ids, if any (its sender gave up or went silent):
    /// true if there was one. Its memory is freed; a later segment 0 starts it afresh.
    pub fn abandon(&mut self, connection: u8, updu_id: u8) -> bool {
        self.files.remove(&(connection, updu_id)).is_some()
    }

    /// Takes one U_PDU received on SAP 12 from this receiver's peer.
    pub fn receive(&mut self, updu: &[u8]) -> Result<Received, CftpError> {
        let (header, body) = RcopHeader::decode(updu)?;
        let key = (header.connection, header.updu_id);
        if body == ACK_BODY && header.segment == 0 && !self.files.contains_key(&key) {
            return Ok(Received::Ack {
                connection: header.connection,
                updu_id: header.updu_id,
            });
        }
        if header.segment == 0 {
            // A new file under this id replaces any unfinished one: the sender only reuses an id
            // after giving up on the old file.
            if self.files.len() >= self.limits.max_files_in_progress
                && !self.files.contains_key(&key)
            {
                return Err(CftpError::TooManyFiles {
                    max: self.limits.max_files_in_progress,
                });
            }
            self.files.insert(
                key,
                Partial {
                    next_segment: 0,
                    bytes: Vec::new(),
                    total: None,
                },
            );
        }
        let Some(file) = self.files.get_mut(&key) else {
            return Err(CftpError::UnexpectedSegment {
                connection: header.connection,
                updu_id: header.updu_id,
                segment: header.segment,
                expected: None,
            });
        };
        if header.segment != file.next_segment {
            let expected = Some(file.next_segment);
            self.files.remove(&key);
            return Err(CftpError::UnexpectedSegment {
                connection: header.connection,
                updu_id: header.updu_id,
                segment: header.segment,
                expected,
            });
        }
        file.next_segment = file.next_segment.wrapping_add(1);
        file.bytes.extend_from_slice(body);
        if file.total.is_none() {
            match BftpHeader::parse(&file.bytes) {
                Ok(None) => {}
                Ok(Some((bftp, header_len))) => {
                    if bftp.file_size > self.limits.max_file {
                        self.files.remove(&key);
                        return Err(CftpError::FileTooLarge {
                            size: u64::from(bftp.file_size),
                            max: u64::from(self.limits.max_file),
                        });
                    }
                    file.total = Some(header_len + bftp.file_size as usize);
                }
                Err(e) => {
                    self.files.remove(&key);
                    return Err(e);
                }
            }
        }
        let Some(total) = file.total else {
            return Ok(Received::Partial);
        };
        if file.bytes.len() < total {
            return Ok(Received::Partial);
        }
        let Some(done) = self.files.remove(&key) else {
            return Ok(Received::Partial);
        };
        if done.bytes.len() > total {
            return Err(CftpError::TrailingBytes {
                extra: done.bytes.len() - total,
            });
        }
        let Some((_, header_len)) = BftpHeader::parse(&done.bytes)? else {
            return Err(CftpError::BadField {
                field: "BFTP header",
            });
        };
        let gz = &done.bytes[header_len..];
        let limits = Limits::single(self.limits.max_message as u64);
        let file = gzip_decompress(gz, limits).map_err(|e| CftpError::Decompress(e.to_string()))?;
        let mails =
            MailFile::decode_bundle(&file, self.limits.max_message, self.limits.max_bundle)?;
        Ok(Received::Complete {
            mails,
            ack: ack_pdu(header.connection, header.updu_id),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mail(message: &[u8]) -> MailFile {
        MailFile {
            message_id: "A1b2C3".to_string(),
            return_path: Some("ops@ship.example".to_string()),
            recipients: vec!["a@shore.example".to_string(), "b@shore.example".to_string()],
            message: message.to_vec(),
        }
    }

    #[test]
    fn rcop_header_layout_matches_fig_f23() {
        let mut out = Vec::new();
        RcopHeader {
            connection: 3,
            updu_id: 0xA5,
            segment: 0x0102,
        }
        .encode(&mut out);
        assert_eq!(out, [0x30, 0xA5, 0x01, 0x02]);
        let (h, body) = RcopHeader::decode(&[0x30, 0xA5, 0x01, 0x02, 9]).unwrap();
        assert_eq!((h.connection, h.updu_id, h.segment), (3, 0xA5, 0x0102));
        assert_eq!(body, [9]);
        assert!(matches!(
            RcopHeader::decode(&[0x31, 0, 0, 0]),
            Err(CftpError::ReservedBits { byte: 0x31 })
        ));
        assert!(matches!(
            RcopHeader::decode(&[0x30, 0]),
            Err(CftpError::Truncated { .. })
        ));
    }

    #[test]
    fn ack_is_dle_vt_under_the_same_ids() {
        assert_eq!(ack_pdu(0, 7), [0x00, 0x07, 0x00, 0x00, 0x10, 0x0B]);
    }

    #[test]
    fn bftp_header_layout_matches_fig_f25() {
        let pdu = bftp_pdu("ab", &[1, 2, 3]).unwrap();
        assert_eq!(pdu, [0x10, 0x02, 2, b'a', b'b', 0, 0, 0, 3, 1, 2, 3]);
        let (h, len) = BftpHeader::parse(&pdu).unwrap().unwrap();
        assert_eq!((h.filename.as_str(), h.file_size, len), ("ab", 3, 9));
        assert_eq!(BftpHeader::parse(&pdu[..8]).unwrap(), None);
        assert!(matches!(
            BftpHeader::parse(&[0x10, 0x03, 0]),
            Err(CftpError::BadBftpSync { got: [0x10, 0x03] })
        ));
        assert!(matches!(bftp_pdu("", &[]), Err(CftpError::BadFilename)));
    }

    #[test]
    fn mail_file_layout_matches_table_f10() {
        let file = mail(b"Subject: x\r\n\r\n.hidden\r\nbody\r\n")
            .encode()
            .unwrap();
        let stuffed = b"Subject: x\r\n\r\n..hidden\r\nbody\r\n.\r\n";
        let mut expected = b"A1b2C3\nops@ship.example,a@shore.example,b@shore.example\n".to_vec();
        expected.extend_from_slice(format!("{}\n", stuffed.len()).as_bytes());
        expected.extend_from_slice(stuffed);
        assert_eq!(file, expected);
        assert!(file.ends_with(b"\r\n.\r\n"));
    }

    #[test]
    fn null_return_path_is_an_empty_first_entry() {
        let mut m = mail(b"x\r\n");
        m.return_path = None;
        let file = m.encode().unwrap();
        assert!(file.starts_with(b"A1b2C3\n,a@shore.example,b@shore.example\n"));
        assert_eq!(MailFile::decode(&file, 1000).unwrap(), m);
        // Annex F also allows a single space for "no return path".
        let spaced = [b"A1b2C3\n ,a@x\n3\n.\r\n".as_slice()].concat();
        let d = MailFile::decode(&spaced, 1000).unwrap();
        assert_eq!(d.return_path, None);
        assert_eq!(d.recipients, ["a@x"]);
    }

    #[test]
    fn mail_file_errors_name_the_problem() {
        let m = mail(b"x\r\n");
        let mut bad = m.clone();
        bad.message_id = "has space".into();
        assert!(matches!(bad.encode(), Err(CftpError::BadMessageId)));
        let mut bad = m.clone();
        bad.recipients.clear();
        assert!(matches!(bad.encode(), Err(CftpError::NoRecipients)));
        let file = m.encode().unwrap();
        // Size field disagreeing with the message.
        let mut wrong = file.clone();
        wrong.push(b'x');
        assert!(matches!(
            MailFile::decode(&wrong, 1000),
            Err(CftpError::SizeMismatch { .. })
        ));
        assert!(matches!(
            MailFile::decode(b"id\nrp,a@x\n3\nab\n", 1000),
            Err(CftpError::MissingTerminator)
        ));
        assert!(matches!(
            MailFile::decode(b"id only", 1000),
            Err(CftpError::BadField { field: "MessageID" })
        ));
        assert!(matches!(
            MailFile::decode(&file, 2),
            Err(CftpError::BadMessage { .. })
        ));
    }

    #[test]
    fn segments_fit_mtu_minus_four_and_reassemble() {
        let body: Vec<u8> = (0..5000u32)
            .flat_map(|i| format!("line {i} of a long message\r\n").into_bytes())
            .collect();
        let m = mail(&body);
        for mtu in [200usize, 2048] {
            let pdus = encode_message(&m, 0, 9, mtu, 6).unwrap();
            assert!(pdus.len() > 1, "mtu {mtu}: expected several segments");
            for (i, p) in pdus.iter().enumerate() {
                assert!(p.len() <= mtu);
                let (h, _) = RcopHeader::decode(p).unwrap();
                assert_eq!((h.connection, h.updu_id, h.segment), (0, 9, i as u16));
            }
            let mut rx = Receiver::new(ReceiverLimits::default());
            let (last, rest) = pdus.split_last().unwrap();
            for p in rest {
                assert_eq!(rx.receive(p).unwrap(), Received::Partial);
            }
            match rx.receive(last).unwrap() {
                Received::Complete { mails, ack } => {
                    assert_eq!(mails, std::slice::from_ref(&m));
                    assert_eq!(ack, ack_pdu(0, 9));
                }
                other => panic!("expected a complete file, got {other:?}"),
            }
            assert_eq!(rx.in_progress(), 0);
        }
    }

    #[test]
    fn several_files_in_flight_by_updu_id() {
        let a = mail(b"first\r\n");
        let mut b = mail(b"second\r\n");
        b.message_id = "Other1".into();
        let pa = encode_message(&a, 0, 1, 40, 6).unwrap();
        let pb = encode_message(&b, 0, 2, 40, 6).unwrap();
        let mut rx = Receiver::new(ReceiverLimits::default());
        let mut done = Vec::new();
        // Interleave the two files' segments.
        for i in 0..pa.len().max(pb.len()) {
            for p in [pa.get(i), pb.get(i)].into_iter().flatten() {
                if let Received::Complete { mails, .. } = rx.receive(p).unwrap() {
                    done.extend(mails);
                }
            }
        }
        assert_eq!(done.len(), 2);
        assert!(done.contains(&a) && done.contains(&b));
    }

    #[test]
    fn a_bundle_carries_several_mail_files_in_one_gzip_file() {
        let a = mail(b"first\r\n");
        let mut b = mail(b".leading dot\r\n");
        b.message_id = "Other1".into();
        b.return_path = None;
        let plain = encode_bundle(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(
            plain,
            [a.encode().unwrap(), b.encode().unwrap()].concat(),
            "mail-files end to end, nothing between"
        );
        assert_eq!(
            MailFile::decode_bundle(&plain, 1000, 256).unwrap(),
            [a.clone(), b.clone()]
        );
        // A single mail-file is a bundle of one; a bundle is not a single mail-file.
        let one = a.encode().unwrap();
        assert_eq!(
            MailFile::decode_bundle(&one, 1000, 256).unwrap(),
            std::slice::from_ref(&a)
        );
        assert!(matches!(
            MailFile::decode(&plain, 1000),
            Err(CftpError::SizeMismatch { .. })
        ));
        assert!(matches!(
            MailFile::decode_bundle(&plain, 1000, 1),
            Err(CftpError::BundleTooLarge { max: 1 })
        ));
        // Garbage after a complete mail-file is an error, not a silently shorter bundle.
        let mut bad = plain.clone();
        bad.extend_from_slice(b"junk");
        assert!(MailFile::decode_bundle(&bad, 1000, 256).is_err());
        // Through gzip, BFTP and RCOP as the sender lays it out.
        let gz = gzip_compress(&plain, 9).unwrap();
        let pdu = bftp_pdu("A1b2C3.gz", &gz).unwrap();
        let pdus = segment(0, 4, &pdu, 60).unwrap();
        let mut rx = Receiver::default();
        let mut got = None;
        for p in &pdus {
            if let Received::Complete { mails, ack } = rx.receive(p).unwrap() {
                assert_eq!(ack, ack_pdu(0, 4));
                got = Some(mails);
            }
        }
        assert_eq!(got, Some(vec![a, b]));
    }

    #[test]
    fn acks_are_recognised() {
        let mut rx = Receiver::default();
        assert_eq!(
            rx.receive(&ack_pdu(2, 44)).unwrap(),
            Received::Ack {
                connection: 2,
                updu_id: 44
            }
        );
    }

    #[test]
    fn gaps_and_oversize_files_are_refused() {
        let m = mail(
            &[b'x'; 3000]
                .iter()
                .chain(b"\r\n")
                .copied()
                .collect::<Vec<u8>>(),
        );
        let pdus = encode_message(&m, 0, 5, 64, 0).unwrap();
        let mut rx = Receiver::default();
        rx.receive(&pdus[0]).unwrap();
        assert!(matches!(
            rx.receive(&pdus[2]),
            Err(CftpError::UnexpectedSegment {
                expected: Some(1),
                ..
            })
        ));
        assert_eq!(rx.in_progress(), 0);
        // A segment of a file we never saw start.
        assert!(matches!(
            rx.receive(&pdus[1]),
            Err(CftpError::UnexpectedSegment { expected: None, .. })
        ));
        let mut small = Receiver::new(ReceiverLimits {
            max_file: 100,
            ..ReceiverLimits::default()
        });
        let mut err = None;
        for p in &pdus {
            if let Err(e) = small.receive(p) {
                err = Some(e);
                break;
            }
        }
        assert!(matches!(err, Some(CftpError::FileTooLarge { .. })));
    }

    #[test]
    fn tiny_mtu_is_refused() {
        assert!(matches!(
            segment(0, 0, b"abc", 4),
            Err(CftpError::MtuTooSmall { mtu: 4 })
        ));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn line() -> impl Strategy<Value = Vec<u8>> {
            // Any octet but CR, LF and NUL, and lines that start with dots now and then.
            (any::<bool>(), prop::collection::vec(1u8..=255, 0..80)).prop_map(|(dot, mut l)| {
                l.retain(|&b| b != b'\r' && b != b'\n');
                if dot {
                    l.insert(0, b'.');
                }
                l
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            #[test]
            fn any_message_survives_cftp(
                lines in prop::collection::vec(line(), 0..60),
                nrcpt in 1usize..5,
                mtu in 8usize..2048,
                id in 0u8..=255,
            ) {
                let mut message = Vec::new();
                for l in &lines {
                    message.extend_from_slice(l);
                    message.extend_from_slice(b"\r\n");
                }
                let m = MailFile {
                    message_id: format!("M{id}"),
                    return_path: (id % 2 == 0).then(|| "s@x".to_string()),
                    recipients: (0..nrcpt).map(|i| format!("r{i}@y")).collect(),
                    message,
                };
                let pdus = encode_message(&m, 1, id, mtu, 6).unwrap();
                let mut rx = Receiver::default();
                let mut got = None;
                for p in &pdus {
                    prop_assert!(p.len() <= mtu);
                    if let Received::Complete { mut mails, .. } = rx.receive(p).unwrap() {
                        prop_assert_eq!(mails.len(), 1);
                        got = mails.pop();
                    }
                }
                prop_assert_eq!(got, Some(m));
            }

            #[test]
            fn receiver_never_panics(pdus in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..20)) {
                let mut rx = Receiver::default();
                for p in &pdus {
                    let _ = rx.receive(p);
                }
            }
        }
    }
}
