//! The RFC 8494 (MULE) message body: an SMTP envelope and an RFC 5322 message, compressed, as the
//! data of one P_MUL message.
//!
//! The gateway's multicast link turns a spooled message (reverse-path, the recipients on the
//! ships of the group, the message) into [`MuleMessage`], [`encode`]s it and gives the bytes to a
//! [`crate::sender::Sender`]; a receiving gateway [`decode`]s what its
//! [`crate::receiver::Receiver`] delivered and spools the recipients it is responsible for.
//!
//! # Layout
//!
//! The P_MUL message is the BER encoding of `CompressedData` (RFC 8494's ASN.1 module, which
//! takes it from STANAG 4406 annex E, "Compressed Data Type"; the ASN.1 below is the module as
//! pyasn1-modules transcribes it from rfc8494.txt, all tags EXPLICIT):
//!
//! ```text
//! CompressedData ::= SEQUENCE {
//!     compressionAlgorithm  CompressionAlgorithmIdentifier,
//!     compressedContentInfo CompressedContentInfo }
//! CompressionAlgorithmIdentifier ::= CHOICE {
//!     algorithmID-ShortForm [0] AlgorithmID-ShortForm,       -- zlibCompress (0)
//!     algorithmID-OID       [1] OBJECT IDENTIFIER }
//! CompressedContentInfo ::= SEQUENCE {
//!     unnamed CHOICE {
//!         contentType-ShortForm [0] ContentType-ShortForm,   -- mule (25)
//!         contentType-OID       [1] OBJECT IDENTIFIER },
//!     compressedContent [0] OCTET STRING }
//! ```
//!
//! which for MULE is, byte by byte:
//!
//! | Bytes | Meaning |
//! |---|---|
//! | `30 L1` | CompressedData SEQUENCE |
//! | `A0 03 02 01 00` | `[0]` algorithmID-ShortForm INTEGER 0 = zlibCompress |
//! | `30 L2` | CompressedContentInfo SEQUENCE |
//! | `A0 03 02 01 19` | `[0]` contentType-ShortForm INTEGER 25 = mule |
//! | `A0 L3 04 L4 ...` | `[0]` compressedContent OCTET STRING: the zlib (RFC 1950) stream |
//!
//! The decoder also takes the algorithm as the CMS OID id-alg-zlibCompress
//! (1.2.840.113549.1.9.16.3.8), BER long-form lengths and a constructed OCTET STRING; it refuses
//! indefinite lengths and anything but MULE content.
//!
//! The uncompressed content is the SMTP envelope, one line per path in RFC 5321 syntax (the
//! reverse-path and its MAIL parameters, then each forward-path and its RCPT parameters), an empty
//! line, then the RFC 5322 message as is (no dot-stuffing, no terminating dot):
//!
//! ```text
//! <reverse-path>[ SP mail-parameters] CRLF
//! <forward-path>[ SP rcpt-parameters] CRLF      (one per recipient, at least one)
//! CRLF
//! message
//! ```
//!
//! Source: the example MULE message with which pyasn1-modules tests its transcription of the
//! RFC 8494 ASN.1 module (`tests/test_rfc8494.py`, 314 bytes of DER; test vector
//! `rfc8494_example_decodes` below). It reads as the RFC's own example (`<poundsign>` stands for a
//! pound sign, as in ASCII RFC text), but that is inferred, not checked against the RFC. Its content starts
//! `<from@example.com> MT-PRIORITY=4 BODY=8BITMIME RET=HDRS ENVID=QQ314159`, then
//! `<to1@example.net> NOTIFY=FAILURE ORCPT=rfc822;Bob@ent.example.net`,
//! `<to2@example.net> NOTIFY=SUCCESS,FAILURE`, an empty line and the message. Its line ends are
//! bare LF; RFC 5321 syntax and the rest of the message want CRLF. We send CRLF and accept both.
//! The RFC's own prose (its sections 3 and 4) was not available while this was written; only its
//! abstract, its ASN.1 module and this example were.

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use thiserror::Error;

/// `AlgorithmID-ShortForm` zlibCompress.
pub const ALGORITHM_ZLIB: i64 = 0;
/// `ContentType-ShortForm` mule.
pub const CONTENT_TYPE_MULE: i64 = 25;
/// id-alg-zlibCompress (RFC 3274), content octets of the OID.
const ZLIB_OID: &[u8] = &[
    0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x10, 0x03, 0x08,
];

/// One envelope recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MuleRecipient {
    /// The forward-path without angle brackets.
    pub address: String,
    /// RCPT parameters (e.g. `NOTIFY=FAILURE ORCPT=rfc822;a@b`), empty if none.
    pub params: String,
}

/// The SMTP envelope of a MULE message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MuleEnvelope {
    /// The reverse-path without angle brackets (empty for the null path `<>`).
    pub reverse_path: String,
    /// MAIL parameters (e.g. `BODY=8BITMIME MT-PRIORITY=4`), empty if none.
    pub mail_params: String,
    /// The recipients.
    pub recipients: Vec<MuleRecipient>,
}

/// A MULE message: envelope and RFC 5322 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MuleMessage {
    /// The envelope.
    pub envelope: MuleEnvelope,
    /// The RFC 5322 message.
    pub message: Vec<u8>,
}

/// Bounds on what [`decode`] accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MuleLimits {
    /// Largest uncompressed content.
    pub max_content: usize,
    /// Most recipients.
    pub max_recipients: usize,
}

impl Default for MuleLimits {
    fn default() -> Self {
        MuleLimits {
            max_content: 16 << 20,
            max_recipients: 1000,
        }
    }
}

/// What was wrong with a MULE message, sent or received.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MuleError {
    /// The BER structure is not `CompressedData` as RFC 8494 has it.
    #[error("bad MULE CompressedData at byte {offset}: {what}")]
    Ber {
        /// What was expected or wrong.
        what: &'static str,
        /// Offset in the P_MUL message.
        offset: usize,
    },
    /// A compression algorithm other than zlib.
    #[error("unsupported compression algorithm {0}")]
    UnsupportedAlgorithm(String),
    /// Content that is not MULE.
    #[error("unsupported content type {0} (MULE is 25)")]
    UnsupportedContentType(String),
    /// The zlib stream is broken.
    #[error("zlib stream: {0}")]
    Inflate(String),
    /// The content inflates beyond the limit.
    #[error("MULE content inflates beyond {0} bytes")]
    TooLarge(usize),
    /// More recipients than the limit.
    #[error("more than {0} MULE recipients")]
    TooManyRecipients(usize),
    /// The envelope lines are malformed.
    #[error("bad MULE envelope: {0}")]
    Envelope(&'static str),
}

fn ber_err(what: &'static str, offset: usize) -> MuleError {
    MuleError::Ber { what, offset }
}

/// Appends a BER definite length (DER minimal form).
fn put_len(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
}

fn put_tlv(out: &mut Vec<u8>, tag: u8, content: &[u8]) {
    out.push(tag);
    put_len(out, content.len());
    out.extend_from_slice(content);
}

/// The uncompressed MULE content: envelope lines, an empty line, the message.
pub fn encode_content(msg: &MuleMessage) -> Result<Vec<u8>, MuleError> {
    let e = &msg.envelope;
    if e.recipients.is_empty() {
        return Err(MuleError::Envelope("no recipients"));
    }
    let mut out = Vec::with_capacity(msg.message.len() + 64 * (e.recipients.len() + 1));
    put_line(&mut out, &e.reverse_path, &e.mail_params)?;
    for r in &e.recipients {
        if r.address.is_empty() {
            return Err(MuleError::Envelope("empty forward-path"));
        }
        put_line(&mut out, &r.address, &r.params)?;
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&msg.message);
    Ok(out)
}

fn put_line(out: &mut Vec<u8>, path: &str, params: &str) -> Result<(), MuleError> {
    if path
        .bytes()
        .any(|b| matches!(b, b'<' | b'>' | b'\r' | b'\n' | b' '))
    {
        return Err(MuleError::Envelope("path with <, >, space or line break"));
    }
    if params.bytes().any(|b| matches!(b, b'\r' | b'\n')) || params.starts_with(' ') {
        return Err(MuleError::Envelope(
            "parameters with a line break or leading space",
        ));
    }
    out.push(b'<');
    out.extend_from_slice(path.as_bytes());
    out.push(b'>');
    if !params.is_empty() {
        out.push(b' ');
        out.extend_from_slice(params.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// Encodes `msg` as RFC 8494 has it: zlib-compressed content in BER `CompressedData`.
pub fn encode(msg: &MuleMessage) -> Result<Vec<u8>, MuleError> {
    let content = encode_content(msg)?;
    let mut z = ZlibEncoder::new(Vec::new(), Compression::best());
    z.write_all(&content)
        .map_err(|e| MuleError::Inflate(e.to_string()))?;
    let compressed = z.finish().map_err(|e| MuleError::Inflate(e.to_string()))?;
    Ok(wrap_compressed(&compressed))
}

/// Wraps a zlib stream in the `CompressedData` framing (zlib short form, MULE short form).
pub fn wrap_compressed(zlib: &[u8]) -> Vec<u8> {
    let mut octets = Vec::with_capacity(zlib.len() + 6);
    put_tlv(&mut octets, 0x04, zlib);
    let mut info = Vec::with_capacity(octets.len() + 12);
    info.extend_from_slice(&[0xa0, 0x03, 0x02, 0x01, CONTENT_TYPE_MULE as u8]);
    put_tlv(&mut info, 0xa0, &octets);
    let mut body = Vec::with_capacity(info.len() + 12);
    body.extend_from_slice(&[0xa0, 0x03, 0x02, 0x01, ALGORITHM_ZLIB as u8]);
    put_tlv(&mut body, 0x30, &info);
    let mut out = Vec::with_capacity(body.len() + 6);
    put_tlv(&mut out, 0x30, &body);
    out
}

/// A bounded BER reader over one slice; offsets are reported relative to the whole message.
struct Ber<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Ber<'a> {
    /// Reads one TLV: (tag, content reader).
    fn tlv(&mut self) -> Result<(u8, Ber<'a>), MuleError> {
        let at = self.base + self.pos;
        let tag = *self.buf.get(self.pos).ok_or(ber_err("missing tag", at))?;
        if tag & 0x1f == 0x1f {
            return Err(ber_err("multi-byte tag", at));
        }
        let first = *self
            .buf
            .get(self.pos + 1)
            .ok_or(ber_err("missing length", at + 1))?;
        let mut p = self.pos + 2;
        let len = if first < 0x80 {
            usize::from(first)
        } else if first == 0x80 {
            return Err(ber_err("indefinite length", at + 1));
        } else {
            let n = usize::from(first & 0x7f);
            if n > 4 {
                return Err(ber_err("length of more than 4 bytes", at + 1));
            }
            let bytes = self
                .buf
                .get(p..p + n)
                .ok_or(ber_err("truncated length", at + 1))?;
            p += n;
            bytes.iter().fold(0usize, |a, &b| (a << 8) | usize::from(b))
        };
        let end = p
            .checked_add(len)
            .filter(|&e| e <= self.buf.len())
            .ok_or(ber_err("content runs past its enclosing value", at))?;
        let inner = Ber {
            buf: &self.buf[p..end],
            pos: 0,
            base: self.base + p,
        };
        self.pos = end;
        Ok((tag, inner))
    }

    fn expect(&mut self, want: u8, what: &'static str) -> Result<Ber<'a>, MuleError> {
        let at = self.base + self.pos;
        let (tag, inner) = self.tlv()?;
        if tag != want {
            return Err(ber_err(what, at));
        }
        Ok(inner)
    }

    fn done(&self, what: &'static str) -> Result<(), MuleError> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(ber_err(what, self.base + self.pos))
        }
    }

    fn integer(&self) -> Result<i64, MuleError> {
        let b = self.buf;
        if b.is_empty() || b.len() > 8 {
            return Err(ber_err("INTEGER of 0 or more than 8 bytes", self.base));
        }
        let neg = b[0] & 0x80 != 0;
        Ok(b.iter()
            .fold(if neg { -1i64 } else { 0 }, |a, &x| (a << 8) | i64::from(x)))
    }
}

/// An explicitly tagged CHOICE of a short-form INTEGER `[0]` or an OID `[1]`.
enum ShortOrOid<'a> {
    Short(i64),
    Oid(&'a [u8]),
}

fn short_or_oid<'a>(r: &mut Ber<'a>, what: &'static str) -> Result<ShortOrOid<'a>, MuleError> {
    let at = r.base + r.pos;
    let (tag, mut inner) = r.tlv()?;
    let v = match tag {
        0xa0 => ShortOrOid::Short(
            inner
                .expect(0x02, "short form is not an INTEGER")?
                .integer()?,
        ),
        0xa1 => ShortOrOid::Oid(
            inner
                .expect(0x06, "OID form is not an OBJECT IDENTIFIER")?
                .buf,
        ),
        _ => return Err(ber_err(what, at)),
    };
    inner.done("bytes after the choice")?;
    Ok(v)
}

/// Decodes a MULE P_MUL message into envelope and message, within `limits`.
pub fn decode(bytes: &[u8], limits: MuleLimits) -> Result<MuleMessage, MuleError> {
    let content = decode_content(bytes, limits)?;
    parse_content(&content, limits)
}

/// Unwraps and inflates the `CompressedData` to the MULE content, within `limits`.
pub fn decode_content(bytes: &[u8], limits: MuleLimits) -> Result<Vec<u8>, MuleError> {
    let mut top = Ber {
        buf: bytes,
        pos: 0,
        base: 0,
    };
    let mut cd = top.expect(0x30, "CompressedData is not a SEQUENCE")?;
    top.done("bytes after CompressedData")?;
    match short_or_oid(&mut cd, "compressionAlgorithm is neither [0] nor [1]")? {
        ShortOrOid::Short(ALGORITHM_ZLIB) => {}
        ShortOrOid::Oid(ZLIB_OID) => {}
        ShortOrOid::Short(n) => return Err(MuleError::UnsupportedAlgorithm(n.to_string())),
        ShortOrOid::Oid(o) => return Err(MuleError::UnsupportedAlgorithm(format!("OID {o:02x?}"))),
    }
    let mut info = cd.expect(0x30, "CompressedContentInfo is not a SEQUENCE")?;
    cd.done("bytes after CompressedContentInfo")?;
    match short_or_oid(&mut info, "contentType is neither [0] nor [1]")? {
        ShortOrOid::Short(CONTENT_TYPE_MULE) => {}
        ShortOrOid::Short(n) => return Err(MuleError::UnsupportedContentType(n.to_string())),
        ShortOrOid::Oid(o) => {
            return Err(MuleError::UnsupportedContentType(format!("OID {o:02x?}")));
        }
    }
    let mut wrapper = info.expect(0xa0, "compressedContent is not [0]")?;
    info.done("bytes after compressedContent")?;
    let at = wrapper.base + wrapper.pos;
    let (tag, octets) = wrapper.tlv()?;
    wrapper.done("bytes after the OCTET STRING")?;
    let zlib: Vec<u8> = match tag {
        0x04 => octets.buf.to_vec(),
        // BER constructed OCTET STRING: primitive segments one level deep.
        0x24 => {
            let mut seg = octets;
            let mut v = Vec::with_capacity(seg.buf.len());
            while seg.pos < seg.buf.len() {
                v.extend_from_slice(seg.expect(0x04, "OCTET STRING segment")?.buf);
            }
            v
        }
        _ => return Err(ber_err("compressedContent is not an OCTET STRING", at)),
    };
    let mut out = Vec::new();
    let limit = limits.max_content;
    ZlibDecoder::new(zlib.as_slice())
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| MuleError::Inflate(e.to_string()))?;
    if out.len() > limit {
        return Err(MuleError::TooLarge(limit));
    }
    Ok(out)
}

/// Splits MULE content into envelope and message.
pub fn parse_content(content: &[u8], limits: MuleLimits) -> Result<MuleMessage, MuleError> {
    let mut rest = content;
    let first = take_line(&mut rest)?.ok_or(MuleError::Envelope("no reverse-path line"))?;
    let (reverse_path, mail_params) = split_path(first)?;
    let mut recipients = Vec::new();
    loop {
        let line =
            take_line(&mut rest)?.ok_or(MuleError::Envelope("no empty line after the envelope"))?;
        if line.is_empty() {
            break;
        }
        if recipients.len() == limits.max_recipients {
            return Err(MuleError::TooManyRecipients(limits.max_recipients));
        }
        let (address, params) = split_path(line)?;
        if address.is_empty() {
            return Err(MuleError::Envelope("empty forward-path"));
        }
        recipients.push(MuleRecipient { address, params });
    }
    if recipients.is_empty() {
        return Err(MuleError::Envelope("no forward-path"));
    }
    Ok(MuleMessage {
        envelope: MuleEnvelope {
            reverse_path,
            mail_params,
            recipients,
        },
        message: rest.to_vec(),
    })
}

/// Takes one line ending in LF (a CR before it is dropped); `None` at the end of the input.
fn take_line<'a>(rest: &mut &'a [u8]) -> Result<Option<&'a [u8]>, MuleError> {
    if rest.is_empty() {
        return Ok(None);
    }
    let end = rest
        .iter()
        .position(|&b| b == b'\n')
        .ok_or(MuleError::Envelope("envelope line without a line end"))?;
    let line = &rest[..end];
    *rest = &rest[end + 1..];
    Ok(Some(line.strip_suffix(b"\r").unwrap_or(line)))
}

/// Splits `<path>[ params]` into path and parameters.
fn split_path(line: &[u8]) -> Result<(String, String), MuleError> {
    let line =
        std::str::from_utf8(line).map_err(|_| MuleError::Envelope("envelope line is not UTF-8"))?;
    let line = line
        .strip_prefix('<')
        .ok_or(MuleError::Envelope("path does not start with <"))?;
    let close = line
        .find('>')
        .ok_or(MuleError::Envelope("path without closing >"))?;
    let path = &line[..close];
    if path.contains(['<', ' ', '\r']) {
        return Err(MuleError::Envelope("path with <, space or CR"));
    }
    let params = match &line[close + 1..] {
        "" => "",
        p => p
            .strip_prefix(' ')
            .ok_or(MuleError::Envelope("text after the path without a space"))?,
    };
    if params.contains('\r') || params.starts_with(' ') {
        return Err(MuleError::Envelope("parameters with CR or a leading space"));
    }
    Ok((path.to_string(), params.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> MuleMessage {
        MuleMessage {
            envelope: MuleEnvelope {
                reverse_path: "ops@base.example".into(),
                mail_params: "BODY=8BITMIME".into(),
                recipients: vec![
                    MuleRecipient {
                        address: "xo@ship1.example".into(),
                        params: String::new(),
                    },
                    MuleRecipient {
                        address: "xo@ship2.example".into(),
                        params: "NOTIFY=FAILURE".into(),
                    },
                ],
            },
            message: b"Subject: orders\r\n\r\nProceed.\r\n".to_vec(),
        }
    }

    /// The example MULE message of pyasn1-modules' test of the RFC 8494 ASN.1 module (base64 of
    /// 314 bytes of DER).
    const RFC8494_EXAMPLE: &str = "\
MIIBNqADAgEAMIIBLaADAgEZoIIBJASCASB4nG2P0U7CQBBF3/cr5l2K3YpSF5YA\
bYmbWArtQsJjKVuogd1mO0T8e0ti1IjJZB4md07OHZbWnMbqkp/qo+oW5jSCWDqL\
VCSpkBveg2kSbrg/FTIWcQRpJPlLmGYQzdci5MvlA+3Rx2cyREO/KVrhCOaJFLMN\
n03E6yqNIEmDheS2LHzPG0zNdqw0dn89XAnev4RsFQRRlnW+SITMWmMGf72JNAyk\
oXCj0mnPHtzwSZijYuD1YVJb8FzaB/rE2n3nUtcl2Xn7pgpkkAOqBsm1vrNWtqmM\
ZkC7LgmMxraFgx91y0F1wfv6mFd6AMUht41CfsbS8X9yNtdNqayjdGF2ld4z8LcV\
EiIPVQPtvBuLBxjW5qx3TbXXo6vHJ1OhhLY=";

    /// A small base64 decoder for the test vector (standard alphabet, `=` padding).
    fn base64(text: &str) -> Vec<u8> {
        let mut bits = 0u32;
        let mut n = 0;
        let mut out = Vec::new();
        for c in text.bytes() {
            let v = match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                _ => continue,
            };
            bits = (bits << 6) | u32::from(v);
            n += 6;
            if n >= 8 {
                n -= 8;
                out.push((bits >> n) as u8);
            }
        }
        out
    }

    #[test]
    fn rfc8494_example_decodes() {
        let der = base64(RFC8494_EXAMPLE);
        assert_eq!(der.len(), 314);
        // The DER framing, byte by byte: long-form lengths (0x82) around a 288-byte zlib stream.
        assert_eq!(
            der[..24],
            [
                0x30, 0x82, 0x01, 0x36, // CompressedData, 310 bytes
                0xa0, 0x03, 0x02, 0x01, 0x00, // [0] zlibCompress
                0x30, 0x82, 0x01, 0x2d, // CompressedContentInfo, 301 bytes
                0xa0, 0x03, 0x02, 0x01, 0x19, // [0] mule (25)
                0xa0, 0x82, 0x01, 0x24, // [0] compressedContent, 292 bytes
                0x04, 0x82,
            ]
        );
        let m = decode(&der, MuleLimits::default()).unwrap_or_else(|e| panic!("{e}"));
        let e = &m.envelope;
        assert_eq!(e.reverse_path, "from@example.com");
        assert_eq!(
            e.mail_params,
            "MT-PRIORITY=4 BODY=8BITMIME RET=HDRS ENVID=QQ314159"
        );
        assert_eq!(e.recipients.len(), 2);
        assert_eq!(e.recipients[0].address, "to1@example.net");
        assert_eq!(
            e.recipients[0].params,
            "NOTIFY=FAILURE ORCPT=rfc822;Bob@ent.example.net"
        );
        assert_eq!(e.recipients[1].address, "to2@example.net");
        assert_eq!(e.recipients[1].params, "NOTIFY=SUCCESS,FAILURE");
        assert!(
            m.message
                .starts_with(b"From: from@example.com\nTo: To1 <to1@example.net>")
        );
        assert!(m.message.ends_with(b"This is worth <poundsign>100\n"));
        // Our framing around the example's own zlib stream is byte-identical to it.
        assert_eq!(wrap_compressed(&der[26..]), der);
    }

    #[test]
    fn hand_built_vector_decodes() {
        // Content "<a@b>\r\n<c@d>\r\n\r\nhi" (18 bytes) as a zlib stream built by hand from
        // RFC 1950/1951: CMF 78, FLG 01, one final stored block (01, LEN 0x0012, NLEN 0xffed),
        // the bytes, Adler-32 of them.
        let content = b"<a@b>\r\n<c@d>\r\n\r\nhi";
        assert_eq!(content.len(), 18);
        let (mut a, mut b) = (1u32, 0u32);
        for &x in content {
            a = (a + u32::from(x)) % 65521;
            b = (b + a) % 65521;
        }
        let mut zlib = vec![0x78, 0x01, 0x01, 0x12, 0x00, 0xed, 0xff];
        zlib.extend_from_slice(content);
        zlib.extend_from_slice(&((b << 16) | a).to_be_bytes());
        assert_eq!(zlib.len(), 29);
        // CompressedData by hand from the RFC 8494 ASN.1 module (explicit tags).
        let mut v = vec![
            0x30, 0x2d, // CompressedData, 45 bytes
            0xa0, 0x03, 0x02, 0x01, 0x00, // [0] zlibCompress
            0x30, 0x26, // CompressedContentInfo, 38 bytes
            0xa0, 0x03, 0x02, 0x01, 0x19, // [0] mule (25)
            0xa0, 0x1f, 0x04, 0x1d, // [0] OCTET STRING, 29 bytes
        ];
        v.extend_from_slice(&zlib);
        assert_eq!(v.len(), 47);
        let m = decode(&v, MuleLimits::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.envelope.reverse_path, "a@b");
        assert_eq!(m.envelope.recipients[0].address, "c@d");
        assert_eq!(m.message, b"hi");
        // Our framing around the same zlib bytes is byte-identical, and so is our content.
        assert_eq!(wrap_compressed(&zlib), v);
        assert_eq!(encode_content(&m).as_deref(), Ok(&content[..]));
    }

    #[test]
    fn round_trip_and_null_reverse_path() {
        let m = sample();
        let wire = encode(&m).unwrap_or_default();
        let hdr = if wire[1] < 0x80 {
            2
        } else {
            2 + usize::from(wire[1] & 0x7f)
        };
        assert_eq!(&wire[hdr..hdr + 5], &[0xa0, 0x03, 0x02, 0x01, 0x00]);
        assert_eq!(decode(&wire, MuleLimits::default()), Ok(m.clone()));
        let mut bounce = m;
        bounce.envelope.reverse_path.clear();
        bounce.envelope.mail_params.clear();
        let wire = encode(&bounce).unwrap_or_default();
        assert_eq!(decode(&wire, MuleLimits::default()), Ok(bounce));
    }

    #[test]
    fn limits_and_bad_input() {
        let mut m = sample();
        m.message = vec![b'x'; 100_000];
        let wire = encode(&m).unwrap_or_default();
        let small = MuleLimits {
            max_content: 1000,
            max_recipients: 1,
        };
        assert_eq!(decode(&wire, small), Err(MuleError::TooLarge(1000)));
        let wire = encode(&sample()).unwrap_or_default();
        assert_eq!(
            decode(
                &wire,
                MuleLimits {
                    max_content: 1 << 20,
                    max_recipients: 1
                }
            ),
            Err(MuleError::TooManyRecipients(1))
        );
        assert!(matches!(
            decode(&[0x30, 0x80], MuleLimits::default()),
            Err(MuleError::Ber { .. })
        ));
        let other = {
            let mut v = wrap_compressed(&[]);
            v[13] = 2; // content type p1
            v
        };
        assert_eq!(
            decode(&other, MuleLimits::default()),
            Err(MuleError::UnsupportedContentType("2".into()))
        );
        let mut bad = sample();
        bad.envelope.recipients[0].address = "a>b".into();
        assert!(matches!(encode(&bad), Err(MuleError::Envelope(_))));
        bad.envelope.recipients.clear();
        assert!(matches!(encode(&bad), Err(MuleError::Envelope(_))));
    }

    fn arb_path() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9._+-]{1,20}@[a-z0-9.-]{1,20}"
    }

    proptest! {
        #[test]
        fn mule_round_trips(
            rp in proptest::option::of(arb_path()),
            mp in "([A-Z]{1,8}=[A-Za-z0-9;@.]{1,12})?",
            rcpts in proptest::collection::vec((arb_path(), "([A-Z]{1,8}=[A-Za-z0-9;@.]{1,12})?"), 1..8),
            message in proptest::collection::vec(any::<u8>(), 0..2000),
        ) {
            let m = MuleMessage {
                envelope: MuleEnvelope {
                    reverse_path: rp.unwrap_or_default(),
                    mail_params: mp,
                    recipients: rcpts.into_iter().map(|(address, params)| MuleRecipient { address, params }).collect(),
                },
                message,
            };
            let wire = encode(&m).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(decode(&wire, MuleLimits::default()), Ok(m));
        }

        #[test]
        fn hostile_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode(&bytes, MuleLimits::default());
            let _ = parse_content(&bytes, MuleLimits::default());
        }

        #[test]
        fn truncated_input_is_an_error(cut in 0usize..1000) {
            let wire = encode(&sample()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let n = cut % wire.len();
            prop_assert!(decode(&wire[..n], MuleLimits::default()).is_err());
        }
    }
}
