//! An 8-bit message made 7-bit for a server that does not offer `8BITMIME`, and whether a
//! message needs `SMTPUTF8` ([`needs_smtputf8`]).
//!
//! RFC 6152 §3 leaves a client holding 8-bit mail for such a server two choices: convert the
//! message to 7 bits or give up on it. This module converts, as a relay that wants its mail
//! delivered does (Postfix does the same; RFC 1652 §5 first described it): every MIME part whose
//! body holds 8-bit octets gets a 7-bit transfer encoding (quoted-printable for `text/*`, which
//! keeps the text readable, base64 for everything else) and a `Content-Transfer-Encoding` field
//! that says so. The decoded content of every part is unchanged, and every byte outside the
//! converted parts (headers, boundaries, 7-bit parts) is copied as it was.
//!
//! Header fields in UTF-8 (RFC 6532) need `SMTPUTF8` of the next hop (RFC 6531). For one that
//! does not offer it, [`ascii_headers`] downgrades them as RFC 6857 §3 describes (RFC 2047
//! encoded-words, RFC 2231 parameters, RFC 6857's `Downgraded-` fields; [`fields`] says which
//! field gets which) and leaves every body as it is; [`seven_bit`] does the same to the header
//! fields and makes the bodies 7-bit too, for a next hop without either extension. An
//! enclosed `message/global` whose fields were UTF-8 is an RFC 5322 message after either, and
//! is typed `message/rfc822` again.
//!
//! It sits between the spool and the SMTP client: the LAN smarthost delivery and the SMTP/TCP
//! bearer call [`seven_bit`] when the server's EHLO lacks `8BITMIME`, and [`ascii_headers`] when
//! it lacks only `SMTPUTF8` (the HF links to skywave peers carry 8-bit mail and UTF-8 header
//! fields as they are).
//!
//! What cannot be converted is refused with a reason, never altered: 8-bit octets in a header
//! field that are not UTF-8 (they have no defined text to encode), 8-bit octets in a part that
//! claims quoted-printable or base64 already (its decoded content is not defined), in
//! `message/partial` or `message/external-body`, which RFC 2046 §5.2 keeps 7-bit, and under a
//! signature (`multipart/signed`, RFC 1847), which a new encoding would break.
//!
//! The MIME structure (header blocks, boundaries, nested messages) is walked here on the raw
//! bytes, because the conversion must know the exact byte range of every field and body to leave
//! the rest untouched; each header block's fields are read with mail-parser (quoting, comments,
//! RFC 2231 parameters). The walk is bounded: [`MAX_DEPTH`] levels of nesting.

pub mod fields;

use std::borrow::Cow;

use base64::Engine as _;
use mail_parser::{MessageParser, MimeHeaders};

/// How deep multiparts and enclosed messages may nest before the message is refused
/// (mail-parser's own limit for nested parts is of the same order).
pub const MAX_DEPTH: usize = 32;

/// Why a message could not be made 7-bit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DowngradeError {
    /// A header field holds 8-bit octets that are not UTF-8: only `SMTPUTF8` could carry
    /// those, and they have no defined text to encode for a next hop without it.
    #[error(
        "the header field {field:?} holds 8-bit octets that are not UTF-8, which only SMTPUTF8 \
         carries"
    )]
    EightBitHeader {
        /// The field's name as written.
        field: String,
    },
    /// A part encoded as quoted-printable or base64 holds raw 8-bit octets.
    #[error("a part declared {encoding} holds raw 8-bit octets, so its content is not defined")]
    EncodedPart {
        /// The transfer encoding the part declares.
        encoding: String,
    },
    /// 8-bit octets in a type RFC 2046 §5.2 allows only in 7 bits.
    #[error("8-bit octets in a {content_type} part, which may only be 7-bit")]
    SevenBitOnly {
        /// The part's content type.
        content_type: String,
    },
    /// A multipart's boundary is missing or never occurs in its body.
    #[error("a multipart part {0}")]
    Multipart(&'static str),
    /// 8-bit octets under a signature (`multipart/signed`, RFC 1847), which would no longer
    /// verify once re-encoded.
    #[error(
        "8-bit octets in signed content (multipart/signed), whose signature re-encoding would break"
    )]
    Signed,
    /// Parts nested deeper than [`MAX_DEPTH`].
    #[error("MIME parts nested more than {MAX_DEPTH} deep")]
    TooDeep,
}

/// `message` with every 8-bit part given a 7-bit transfer encoding and every UTF-8 header
/// field made ASCII (as [`ascii_headers`] does); borrowed, unchanged, when it is 7-bit already.
///
/// A message without `MIME-Version` is made a MIME message (`MIME-Version: 1.0` is added, and
/// `Content-Type: text/plain` with `charset=utf-8` when its text is valid UTF-8, else RFC 1428's
/// `unknown-8bit`, when it names no type).
///
/// ```
/// let mail = "Subject: weather\r\n\r\nSea state 4, wind 25 kn, visibility good. Grüße\r\n";
/// let out = skywave_smtp::downgrade::seven_bit(mail.as_bytes()).unwrap();
/// assert_eq!(
///     std::str::from_utf8(&out).unwrap(),
///     "Subject: weather\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\
///      Content-Transfer-Encoding: quoted-printable\r\n\r\n\
///      Sea state 4, wind 25 kn, visibility good. Gr=C3=BC=C3=9Fe\r\n"
/// );
/// ```
pub fn seven_bit(message: &[u8]) -> Result<Cow<'_, [u8]>, DowngradeError> {
    if message.is_ascii() {
        return Ok(Cow::Borrowed(message));
    }
    // Base64 takes 4/3 and its line ends; most text grows less under quoted-printable.
    let mut out = Vec::with_capacity(message.len() / 2 * 3 + 1024);
    let eol: &[u8] = if message.windows(2).any(|w| w == b"\r\n") {
        b"\r\n"
    } else {
        b"\n"
    };
    Walker { eol, bodies: true }.entity(message, Context::Message, 0, &mut out)?;
    Ok(Cow::Owned(out))
}

/// `message` with every header field that is not ASCII made ASCII (RFC 6857 §3; [`fields`]),
/// in the message's header and in those of its parts and enclosed messages, for a next hop
/// that does not offer `SMTPUTF8`; every body is left as it is. Borrowed, unchanged, when no
/// header field needed it.
///
/// ```
/// let mail = "From: J\u{f6}rg <j@ship.example>\r\nSubject: Gr\u{fc}\u{df}e aus Bergen\r\n\r\nGr\u{fc}\u{df}e\r\n";
/// let out = skywave_smtp::downgrade::ascii_headers(mail.as_bytes()).unwrap();
/// assert_eq!(
///     std::str::from_utf8(&out).unwrap(),
///     "From: =?utf-8?b?SsO2cmc=?= <j@ship.example>\r\n\
///      Subject: =?utf-8?b?R3LDvMOfZQ==?= aus Bergen\r\n\r\nGr\u{fc}\u{df}e\r\n"
/// );
/// ```
pub fn ascii_headers(message: &[u8]) -> Result<Cow<'_, [u8]>, DowngradeError> {
    if message.is_ascii() {
        return Ok(Cow::Borrowed(message));
    }
    let mut out = Vec::with_capacity(message.len() + 256);
    let eol: &[u8] = if message.windows(2).any(|w| w == b"\r\n") {
        b"\r\n"
    } else {
        b"\n"
    };
    Walker { eol, bodies: false }.entity(message, Context::Message, 0, &mut out)?;
    if out == message {
        return Ok(Cow::Borrowed(message));
    }
    Ok(Cow::Owned(out))
}

/// Whether a message needs `SMTPUTF8` (RFC 6531) of the next hop: an address of its envelope
/// that is not ASCII, or 8-bit octets in its header section (UTF-8 header fields, RFC 6532).
/// The spool does not keep whether the client said `SMTPUTF8`; this reads the same from the
/// message itself, as Postfix's `smtputf8_autodetect_classes` does.
pub fn needs_smtputf8<'a>(
    sender: &str,
    mut recipients: impl Iterator<Item = &'a str>,
    message: &[u8],
) -> bool {
    !sender.is_ascii()
        || recipients.any(|r| !r.is_ascii())
        || !split_entity(message).header.is_ascii()
}

/// What becomes of an entity's body.
enum Plan<'m> {
    /// Its parts, each made 7-bit, between its boundary's delimiter lines.
    Multipart(&'m str, Context),
    /// The enclosed message, made 7-bit.
    Message,
    /// Text: quoted-printable.
    QuotedPrintable,
    /// Anything else: base64.
    Base64,
}

/// Where an entity stands, which decides its default type and whether it must carry
/// `MIME-Version`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Context {
    /// A whole message (the top level, or one enclosed in `message/rfc822`).
    Message,
    /// A body part of a multipart other than `multipart/digest`.
    Part,
    /// A body part of a `multipart/digest` (default type `message/rfc822`, RFC 2046 §5.1.5).
    DigestPart,
}

struct Walker {
    /// The line end of inserted lines: the message's own.
    eol: &'static [u8],
    /// Whether 8-bit bodies are made 7-bit ([`seven_bit`]), or only header fields made ASCII
    /// ([`ascii_headers`]).
    bodies: bool,
}

/// One header field: its bytes (with continuation lines and line end) and its name.
pub(crate) struct Field<'a> {
    pub(crate) raw: &'a [u8],
    pub(crate) name: &'a [u8],
}

impl Field<'_> {
    fn is(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name.as_bytes())
    }
}

/// An entity split into its header fields, the empty line after them, and its body.
pub(crate) struct Entity<'a> {
    pub(crate) fields: Vec<Field<'a>>,
    pub(crate) header: &'a [u8],
    pub(crate) separator: &'a [u8],
    pub(crate) body: &'a [u8],
}

/// `raw` (a message, or a MIME part) split into its header fields and its body.
pub(crate) fn split_entity(raw: &[u8]) -> Entity<'_> {
    let mut fields: Vec<Field<'_>> = Vec::new();
    let mut pos = 0;
    while pos < raw.len() {
        let end = line_end(raw, pos);
        let line = &raw[pos..end];
        if line == b"\r\n" || line == b"\n" {
            return Entity {
                fields,
                header: &raw[..pos],
                separator: line,
                body: &raw[end..],
            };
        }
        match (line.first(), fields.last_mut()) {
            // A continuation line belongs to the field before it.
            (Some(b' ' | b'\t'), Some(last)) => {
                let start = pos - last.raw.len();
                last.raw = &raw[start..end];
            }
            _ => {
                let colon = line.iter().position(|&b| b == b':').unwrap_or(line.len());
                fields.push(Field {
                    raw: line,
                    name: line[..colon].trim_ascii(),
                });
            }
        }
        pos = end;
    }
    // No empty line: all header, no body.
    Entity {
        fields,
        header: raw,
        separator: b"",
        body: b"",
    }
}

/// The index just past the line starting at `pos` (past its LF, or the end of `raw`).
fn line_end(raw: &[u8], pos: usize) -> usize {
    raw[pos..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(raw.len(), |i| pos + i + 1)
}

/// What the header block says about the body.
pub(crate) struct Mime {
    /// `type/subtype`, lower case.
    pub(crate) content_type: String,
    pub(crate) boundary: Option<String>,
    /// The transfer encoding, lower case (`7bit` when none is named).
    pub(crate) encoding: String,
    /// Whether a `Content-Type` field is present at all.
    typed: bool,
    /// Whether `MIME-Version` is present.
    mime: bool,
}

impl Mime {
    /// Where the body parts of this entity, a multipart, stand.
    pub(crate) fn part_context(&self) -> Context {
        if self.content_type == "multipart/digest" {
            Context::DigestPart
        } else {
            Context::Part
        }
    }
}

pub(crate) fn read_mime(entity: &Entity<'_>, context: Context) -> Mime {
    let mut block = entity.header.to_vec();
    block.extend_from_slice(b"\r\n");
    let parsed = MessageParser::new().parse_headers(&block);
    let ct = parsed.as_ref().and_then(|m| m.content_type());
    let default = if context == Context::DigestPart {
        "message/rfc822"
    } else {
        "text/plain"
    };
    let content_type = ct.map_or_else(
        || default.to_owned(),
        |ct| {
            format!(
                "{}/{}",
                ct.ctype().to_ascii_lowercase(),
                ct.subtype().unwrap_or("").to_ascii_lowercase()
            )
        },
    );
    let boundary = ct
        .and_then(|ct| ct.attribute("boundary"))
        .map(str::to_owned);
    let encoding = parsed
        .as_ref()
        .and_then(|m| m.content_transfer_encoding())
        .map_or_else(|| "7bit".to_owned(), |e| e.trim().to_ascii_lowercase());
    Mime {
        content_type,
        boundary,
        encoding,
        typed: entity.fields.iter().any(|f| f.is("Content-Type")),
        mime: entity.fields.iter().any(|f| f.is("MIME-Version")),
    }
}

/// Whether `entity`, an enclosed message typed `message/global` (RFC 6532 §3.7) whose header
/// fields use UTF-8, is to be typed `message/rfc822`: the walk makes those fields ASCII, so it
/// is an RFC 5322 message again, and a reader of before RFC 6532 shows it as the message it is
/// rather than as an attachment of a type it does not know. One whose fields are ASCII already
/// keeps the type its sender gave it.
fn relabel(entity: &Entity<'_>, mime: &Mime) -> bool {
    mime.content_type == "message/global" && !split_entity(entity.body).header.is_ascii()
}

/// Whether a transfer encoding leaves the octets as they are (RFC 2045 §6.2's identity
/// encodings); a multipart or enclosed message may only have these.
fn identity(encoding: &str) -> bool {
    matches!(encoding, "7bit" | "8bit" | "binary")
}

impl Walker {
    /// Writes `raw`, one entity, made 7-bit.
    fn entity(
        &self,
        raw: &[u8],
        context: Context,
        depth: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), DowngradeError> {
        if raw.is_ascii() {
            out.extend_from_slice(raw);
            return Ok(());
        }
        if depth > MAX_DEPTH {
            if !self.bodies {
                // Header fields only: what lies deeper goes as it is rather than stop a
                // message whose own header (the one SMTPUTF8 is about) is done.
                out.extend_from_slice(raw);
                return Ok(());
            }
            return Err(DowngradeError::TooDeep);
        }
        let entity = split_entity(raw);
        let mime = read_mime(&entity, context);
        // An entity whose body is 7-bit already only needs its header fields (its parts'
        // are 7-bit too); its body is not re-encoded.
        if !self.bodies || entity.body.is_ascii() {
            return self.header_fields_only(&entity, &mime, depth, out);
        }
        if !identity(&mime.encoding) {
            return Err(DowngradeError::EncodedPart {
                encoding: mime.encoding,
            });
        }
        // A message that is not MIME becomes one: its body is then read as the type it names,
        // or as plain text.
        let mut added: Vec<Vec<u8>> = Vec::new();
        if context == Context::Message && !mime.mime {
            added.push(b"MIME-Version: 1.0".to_vec());
            if !mime.typed {
                let charset = if std::str::from_utf8(entity.body).is_ok() {
                    "utf-8"
                } else {
                    "unknown-8bit"
                };
                added.push(format!("Content-Type: text/plain; charset={charset}").into_bytes());
            }
        }
        let (major, _) = mime
            .content_type
            .split_once('/')
            .unwrap_or((&mime.content_type, ""));
        // What becomes of the body, decided before anything is written: the header block goes
        // first, then the body straight into `out` (no copy of a converted body in between).
        let plan = match (major, mime.content_type.as_str()) {
            (_, "multipart/signed") => return Err(DowngradeError::Signed),
            ("multipart", _) => {
                let boundary = mime
                    .boundary
                    .as_deref()
                    .filter(|b| !b.is_empty())
                    .ok_or(DowngradeError::Multipart("names no boundary"))?;
                Plan::Multipart(boundary, mime.part_context())
            }
            (_, "message/rfc822" | "message/global") => Plan::Message,
            ("message", _) => {
                return Err(DowngradeError::SevenBitOnly {
                    content_type: mime.content_type,
                });
            }
            ("text", _) => Plan::QuotedPrintable,
            _ => Plan::Base64,
        };
        let (new_encoding, leaf) = match plan {
            Plan::Multipart(..) | Plan::Message => ("7bit", false),
            Plan::QuotedPrintable => ("quoted-printable", true),
            Plan::Base64 => ("base64", true),
        };
        // The header block again, its transfer encoding replaced where the body's changes.
        let relabel = relabel(&entity, &mime);
        for f in &entity.fields {
            if !f.is("Content-Transfer-Encoding") {
                self.header_field(f, relabel, out)?;
            } else if !leaf {
                // An identity encoding that said 8bit (or binary) now says 7bit.
                self.line(
                    format!("Content-Transfer-Encoding: {new_encoding}").as_bytes(),
                    out,
                );
            }
        }
        for line in &added {
            self.line(line, out);
        }
        if leaf {
            self.line(
                format!("Content-Transfer-Encoding: {new_encoding}").as_bytes(),
                out,
            );
        }
        out.extend_from_slice(if entity.separator.is_empty() {
            self.eol
        } else {
            entity.separator
        });
        match plan {
            Plan::Multipart(boundary, inner) => {
                self.multipart(entity.body, boundary, inner, depth, out)
            }
            Plan::Message => self.entity(entity.body, Context::Message, depth + 1, out),
            Plan::QuotedPrintable => {
                self.quoted_printable(entity.body, out);
                Ok(())
            }
            Plan::Base64 => {
                self.base64(entity.body, out);
                Ok(())
            }
        }
    }

    /// Writes an entity whose header fields are made ASCII and whose body stays as it is,
    /// but for the header fields of its parts and of an enclosed message ([`ascii_headers`]).
    fn header_fields_only(
        &self,
        entity: &Entity<'_>,
        mime: &Mime,
        depth: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), DowngradeError> {
        let relabel = relabel(entity, mime);
        for f in &entity.fields {
            self.header_field(f, relabel, out)?;
        }
        out.extend_from_slice(entity.separator);
        match (mime.content_type.as_str(), mime.boundary.as_deref()) {
            (t, Some(boundary)) if t.starts_with("multipart/") && !boundary.is_empty() => {
                self.multipart(entity.body, boundary, mime.part_context(), depth, out)
            }
            ("message/rfc822" | "message/global", _) => {
                self.entity(entity.body, Context::Message, depth + 1, out)
            }
            _ => {
                out.extend_from_slice(entity.body);
                Ok(())
            }
        }
    }

    /// Writes one header field of an entity that is being converted, its `Content-Type`
    /// `message/rfc822` if it is to be relabelled ([`relabel`]).
    fn header_field(
        &self,
        f: &Field<'_>,
        relabel: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), DowngradeError> {
        if relabel && f.is("Content-Type") {
            self.line(b"Content-Type: message/rfc822", out);
            Ok(())
        } else {
            self.field(f, out)
        }
    }

    /// Writes one header field, made ASCII if it is not.
    fn field(&self, f: &Field<'_>, out: &mut Vec<u8>) -> Result<(), DowngradeError> {
        if f.raw.is_ascii() {
            out.extend_from_slice(f.raw);
            Ok(())
        } else {
            fields::ascii_field(f.raw, self.eol, out)
        }
    }

    fn line(&self, text: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(text);
        out.extend_from_slice(self.eol);
    }

    /// Quoted-printable line by line, so that the text's own line ends stay line ends whatever
    /// they are (the crate keeps CRLF but would encode a bare LF).
    fn quoted_printable(&self, body: &[u8], out: &mut Vec<u8>) {
        for line in body.split_inclusive(|&b| b == b'\n') {
            let text = line
                .strip_suffix(b"\n")
                .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
            out.extend_from_slice(&quoted_printable::encode(text.unwrap_or(line)));
            if text.is_some() {
                out.extend_from_slice(self.eol);
            }
        }
    }

    /// Base64 in lines of 76 characters (RFC 2045 §6.8), ending with a line end when the
    /// original body did. Each line is 57 octets encoded in place (a multiple of 3, so only
    /// the last line has padding).
    fn base64(&self, body: &[u8], out: &mut Vec<u8>) {
        out.reserve(body.len() / 57 * (76 + self.eol.len()) + 80);
        let mut line = [0u8; 76];
        for (i, chunk) in body.chunks(57).enumerate() {
            if i > 0 {
                out.extend_from_slice(self.eol);
            }
            // 57 octets always fit 76 characters; the error case cannot happen.
            if let Ok(n) = base64::engine::general_purpose::STANDARD.encode_slice(chunk, &mut line)
            {
                out.extend_from_slice(&line[..n]);
            }
        }
        if body.ends_with(b"\n") {
            out.extend_from_slice(self.eol);
        }
    }

    /// Writes a multipart body: the delimiter lines and the 7-bit preamble and epilogue as they
    /// were, each body part made 7-bit.
    fn multipart(
        &self,
        body: &[u8],
        boundary: &str,
        inner: Context,
        depth: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), DowngradeError> {
        let delimiters = delimiter_lines(body, boundary.as_bytes());
        let Some(&(first, _, _)) = delimiters.first() else {
            if !self.bodies {
                // Only its header fields were to change, and it has none to find.
                out.extend_from_slice(body);
                return Ok(());
            }
            return Err(DowngradeError::Multipart(
                "never has its boundary in its body",
            ));
        };
        self.not_content(&body[..first], out);
        for (i, &(start, end, close)) in delimiters.iter().enumerate() {
            out.extend_from_slice(&body[start..end]);
            if close {
                self.not_content(&body[end..], out);
                return Ok(());
            }
            // The line end before the next delimiter belongs to that delimiter.
            let (part_end, next) = match delimiters.get(i + 1) {
                Some(&(next_start, _, _)) => (before_line_end(body, end, next_start), next_start),
                None => (body.len(), body.len()),
            };
            self.entity(&body[end..part_end], inner, depth + 1, out)?;
            out.extend_from_slice(&body[part_end..next]);
        }
        // No close delimiter: the last part ran to the end of the body.
        Ok(())
    }

    /// A preamble or epilogue, which is not content (RFC 2046 §5.1.1: to be ignored): what is
    /// 8-bit in it becomes "?" rather than stopping the message, or stays as it is where
    /// bodies stay 8-bit.
    fn not_content(&self, text: &[u8], out: &mut Vec<u8>) {
        if self.bodies {
            out.extend(text.iter().map(|&b| if b.is_ascii() { b } else { b'?' }));
        } else {
            out.extend_from_slice(text);
        }
    }
}

/// `end` of a body part that runs to the delimiter line at `next`: `next` less the line end
/// before it, which belongs to the delimiter (RFC 2046 §5.1.1), but never before `start`.
pub(crate) fn before_line_end(body: &[u8], start: usize, next: usize) -> usize {
    let mut end = next;
    if end > start && body[end - 1] == b'\n' {
        end -= 1;
        if end > start && body[end - 1] == b'\r' {
            end -= 1;
        }
    }
    end
}

/// The delimiter lines of `boundary` in `body` up to and including the close delimiter: the
/// start and end (past its line end) of each, and whether it is the close delimiter.
pub(crate) fn delimiter_lines(body: &[u8], boundary: &[u8]) -> Vec<(usize, usize, bool)> {
    let mut found = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        let end = line_end(body, pos);
        let line = &body[pos..end];
        if let Some(rest) = line
            .strip_prefix(b"--")
            .and_then(|l| l.strip_prefix(boundary))
        {
            let (close, rest) = match rest.strip_prefix(b"--") {
                Some(r) => (true, r),
                None => (false, rest),
            };
            // RFC 2046: only linear white space may follow the boundary.
            if rest
                .iter()
                .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
            {
                found.push((pos, end, close));
                if close {
                    break;
                }
            }
        }
        pos = end;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use mail_parser::PartType;
    use proptest::prelude::*;

    fn text(b: &[u8]) -> &str {
        std::str::from_utf8(b).unwrap_or("<not utf-8>")
    }

    /// Every leaf part's type and decoded content, in order, through nested messages: what a
    /// reader sees, which the conversion must not change.
    fn leaves(raw: &[u8]) -> Vec<(String, Vec<u8>)> {
        fn walk(m: &mail_parser::Message<'_>, out: &mut Vec<(String, Vec<u8>)>) {
            for part in &m.parts {
                let ct = part.content_type().map_or_else(String::new, |c| {
                    format!("{}/{}", c.ctype(), c.subtype().unwrap_or(""))
                });
                match &part.body {
                    PartType::Multipart(_) => {}
                    PartType::Message(inner) => walk(inner, out),
                    // No type is text/plain (RFC 2045 §5.2), which the conversion may write out.
                    _ if ct.is_empty() => out.push(("text/plain".into(), part.contents().to_vec())),
                    _ => out.push((ct.to_ascii_lowercase(), part.contents().to_vec())),
                }
            }
        }
        let mut out = Vec::new();
        if let Some(m) = MessageParser::new().parse(raw) {
            walk(&m, &mut out);
        }
        out
    }

    #[test]
    fn smtputf8_is_needed_for_an_address_or_a_header_field_that_is_not_ascii() {
        let ascii = b"Subject: x\r\n\r\nGr\xc3\xbc\xc3\x9fe\r\n";
        assert!(!needs_smtputf8("a@ship", ["b@shore"].into_iter(), ascii));
        assert!(needs_smtputf8(
            "j\u{f6}rg@ship",
            ["b@shore"].into_iter(),
            ascii
        ));
        assert!(needs_smtputf8(
            "",
            ["b@shore", "m\u{f8}ller@shore"].into_iter(),
            ascii
        ));
        let header = "Subject: Gr\u{fc}\u{df}e\r\n\r\nx\r\n";
        assert!(needs_smtputf8(
            "a@ship",
            ["b@shore"].into_iter(),
            header.as_bytes()
        ));
    }

    #[test]
    fn seven_bit_mail_is_not_touched() {
        let mail = b"Subject: x\r\n\r\nplain\r\n";
        assert!(matches!(seven_bit(mail), Ok(Cow::Borrowed(_))));
    }

    #[test]
    fn mail_that_is_not_mime_becomes_mime() {
        let latin1 = b"Subject: x\r\n\r\nM\xfcller\r\n";
        let out = seven_bit(latin1).unwrap();
        assert_eq!(
            text(&out),
            "Subject: x\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=unknown-8bit\r\n\
             Content-Transfer-Encoding: quoted-printable\r\n\r\nM=FCller\r\n"
        );
        // A type it names is kept; only the encoding and the version are added.
        let typed = "Subject: x\r\nContent-Type: text/plain; charset=iso-8859-1\r\n\
                     Content-Transfer-Encoding: 8bit\r\n\r\ncaf\u{e9} \r\n";
        let out = seven_bit(typed.as_bytes()).unwrap();
        assert_eq!(
            text(&out),
            "Subject: x\r\nContent-Type: text/plain; charset=iso-8859-1\r\nMIME-Version: 1.0\r\n\
             Content-Transfer-Encoding: quoted-printable\r\n\r\ncaf=C3=A9=20\r\n"
        );
    }

    #[test]
    fn each_part_gets_the_encoding_its_type_reads_best_in() {
        let mail = "MIME-Version: 1.0\r\n\
            Content-Type: multipart/mixed; boundary=\"b\"\r\n\
            Content-Transfer-Encoding: 8bit\r\n\
            \r\n\
            pr\u{e9}amble\r\n\
            --b\r\n\
            Content-Type: text/plain; charset=utf-8\r\n\r\n\
            seven bit, left alone\r\n\
            --b\r\n\
            Content-Type: text/plain; charset=utf-8\r\n\
            Content-Transfer-Encoding:\r\n 8bit\r\n\
            X-Kept: yes\r\n\r\n\
            Wind 25 kn from 270\u{b0}\r\n\
            --b \r\n\
            Content-Type: application/octet-stream\r\n\
            Content-Transfer-Encoding: binary\r\n\r\n\
            \u{ff}\u{fe}\r\n\
            --b\r\n\
            Content-Type: message/rfc822\r\n\r\n\
            Subject: enclosed\r\n\r\n\
            \u{f8}\r\n\
            --b--\r\n\
            epilog\u{fc}e\r\n";
        let out = seven_bit(mail.as_bytes()).unwrap();
        assert_eq!(
            text(&out),
            "MIME-Version: 1.0\r\n\
            Content-Type: multipart/mixed; boundary=\"b\"\r\n\
            Content-Transfer-Encoding: 7bit\r\n\
            \r\n\
            pr??amble\r\n\
            --b\r\n\
            Content-Type: text/plain; charset=utf-8\r\n\r\n\
            seven bit, left alone\r\n\
            --b\r\n\
            Content-Type: text/plain; charset=utf-8\r\n\
            X-Kept: yes\r\n\
            Content-Transfer-Encoding: quoted-printable\r\n\r\n\
            Wind 25 kn from 270=C2=B0\r\n\
            --b \r\n\
            Content-Type: application/octet-stream\r\n\
            Content-Transfer-Encoding: base64\r\n\r\n\
            w7/DvgA=\r\n\
            --b\r\n\
            Content-Type: message/rfc822\r\n\r\n\
            Subject: enclosed\r\n\
            MIME-Version: 1.0\r\n\
            Content-Type: text/plain; charset=utf-8\r\n\
            Content-Transfer-Encoding: quoted-printable\r\n\r\n\
            =C3=B8\r\n\
            --b--\r\n\
            epilog??e\r\n"
                .replace("w7/DvgA=", "w7/Dvg==")
        );
        assert!(out.is_ascii());
        assert_eq!(leaves(&out), leaves(mail.as_bytes()));
    }

    #[test]
    fn a_boundary_that_begins_another_is_not_taken_for_it() {
        let mail = "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n\
            --b\r\nContent-Type: multipart/alternative; boundary=bb\r\n\r\n\
            --bb\r\nContent-Type: text/plain\r\n\r\n\u{e9}\r\n--bb--\r\n\
            --b--\r\n";
        let out = seven_bit(mail.as_bytes()).unwrap();
        assert!(text(&out).contains(
            "--bb\r\nContent-Type: text/plain\r\n\
            Content-Transfer-Encoding: quoted-printable\r\n\r\n=C3=A9\r\n--bb--\r\n--b--\r\n"
        ));
        assert_eq!(leaves(&out), leaves(mail.as_bytes()));
    }

    #[test]
    fn a_digest_part_is_a_message_unless_it_says_otherwise() {
        let mail = "MIME-Version: 1.0\r\nContent-Type: multipart/digest; boundary=d\r\n\r\n\
            --d\r\n\r\nSubject: one\r\n\r\n\u{e6}\r\n--d--\r\n";
        let out = seven_bit(mail.as_bytes()).unwrap();
        assert!(text(&out).contains(
            "--d\r\n\r\nSubject: one\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; \
             charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n=C3=A6\r\n"
        ));
    }

    #[test]
    fn what_cannot_be_converted_is_refused_with_its_reason() {
        let cases: [(&str, DowngradeError); 6] = [
            (
                "MIME-Version: 1.0\r\nContent-Type: multipart/signed; boundary=s; protocol=\"application/pgp-signature\"\r\n\r\n\
                 --s\r\nContent-Type: text/plain\r\n\r\n\u{e9}\r\n--s--\r\n",
                DowngradeError::Signed,
            ),
            (
                "MIME-Version: 1.0\r\nContent-Transfer-Encoding: Base64\r\n\r\n\u{e9}\r\n",
                DowngradeError::EncodedPart {
                    encoding: "base64".into(),
                },
            ),
            (
                "MIME-Version: 1.0\r\nContent-Type: message/partial; id=x; number=1\r\n\r\n\u{e9}\r\n",
                DowngradeError::SevenBitOnly {
                    content_type: "message/partial".into(),
                },
            ),
            (
                "MIME-Version: 1.0\r\nContent-Type: multipart/mixed\r\n\r\n\u{e9}\r\n",
                DowngradeError::Multipart("names no boundary"),
            ),
            (
                "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=q\r\n\r\n--z\r\n\u{e9}\r\n",
                DowngradeError::Multipart("never has its boundary in its body"),
            ),
            (
                &format!(
                    "{}\u{e9}\r\n",
                    "MIME-Version: 1.0\r\nContent-Type: message/rfc822\r\n\r\n".repeat(40)
                ),
                DowngradeError::TooDeep,
            ),
        ];
        for (mail, want) in cases {
            assert_eq!(seven_bit(mail.as_bytes()), Err(want.clone()), "{mail:?}");
            assert!(!want.to_string().is_empty());
        }
    }

    #[test]
    fn header_fields_that_are_not_utf_8_are_refused() {
        let mail = b"Subject: Gr\xfc\xdfe\r\n\r\nGr\xfc\xdfe\r\n";
        let want = DowngradeError::EightBitHeader {
            field: "Subject".into(),
        };
        assert_eq!(seven_bit(mail), Err(want.clone()));
        assert_eq!(ascii_headers(mail), Err(want));
    }

    #[test]
    fn utf_8_header_fields_are_made_ascii_with_the_body() {
        let mail = "From: J\u{f6}rg <j@ship.example>\r\nSubject: Gr\u{fc}\u{df}e\r\n\
                    MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n\
                    --b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nK\u{f8}ye\r\n\
                    --b\r\nContent-Type: application/pdf\r\n\
                    Content-Disposition: attachment; filename=\"M\u{e4}rz.pdf\"\r\n\r\n%PDF\r\n\
                    --b--\r\n";
        let seven = seven_bit(mail.as_bytes()).unwrap();
        assert!(seven.is_ascii());
        assert_eq!(leaves(&seven), leaves(mail.as_bytes()));
        let headers = ascii_headers(mail.as_bytes()).unwrap();
        assert!(!headers.is_ascii(), "the text part stays 8-bit");
        assert!(text(&headers).contains("K\u{f8}ye"));
        assert_eq!(leaves(&headers), leaves(mail.as_bytes()));
        for out in [&seven, &headers] {
            let m = MessageParser::new().parse(out.as_ref()).unwrap();
            assert_eq!(m.subject(), Some("Gr\u{fc}\u{df}e"));
            assert_eq!(
                m.from().and_then(|f| f.first()).and_then(|a| a.name()),
                Some("J\u{f6}rg")
            );
            assert_eq!(
                m.attachment(0).and_then(|a| a.attachment_name()),
                Some("M\u{e4}rz.pdf")
            );
            // The header block of a part is ASCII as well.
            let head = split_entity(out).header;
            assert!(head.is_ascii());
        }
    }

    #[test]
    fn an_enclosed_message_global_with_utf8_fields_becomes_message_rfc822() {
        let mail = "Subject: Fwd\r\nMIME-Version: 1.0\r\n\
                    Content-Type: multipart/mixed; boundary=b\r\n\r\n\
                    --b\r\nContent-Type: text/plain\r\n\r\nSee below.\r\n\
                    --b\r\nContent-Type: message/global\r\n\r\n\
                    From: J\u{f6}rg <j@ship.example>\r\nSubject: Gr\u{fc}\u{df}e\r\n\r\nK\u{f8}ye\r\n\
                    --b--\r\n";
        for out in [
            seven_bit(mail.as_bytes()).unwrap(),
            ascii_headers(mail.as_bytes()).unwrap(),
        ] {
            let out = text(&out);
            assert!(
                out.contains("--b\r\nContent-Type: message/rfc822\r\n\r\nFrom: "),
                "{out}"
            );
            assert!(!out.contains("message/global"), "{out}");
            let m = MessageParser::new().parse(out.as_bytes()).unwrap();
            let inner = m.attachment(0).and_then(|a| a.message()).unwrap();
            assert_eq!(inner.subject(), Some("Gr\u{fc}\u{df}e"));
            assert_eq!(
                inner.from().and_then(|f| f.first()).and_then(|a| a.name()),
                Some("J\u{f6}rg")
            );
            // The line end before the delimiter is the delimiter's (RFC 2046 §5.1.1).
            assert_eq!(inner.body_text(0).as_deref(), Some("K\u{f8}ye"));
        }
    }

    #[test]
    fn a_7_bit_body_under_utf_8_header_fields_is_not_re_encoded() {
        let mail = "Subject: Gr\u{fc}\u{df}e\r\n\r\nSea state 4\r\n";
        let want = "Subject: =?utf-8?b?R3LDvMOfZQ==?=\r\n\r\nSea state 4\r\n";
        assert_eq!(text(&seven_bit(mail.as_bytes()).unwrap()), want);
        assert_eq!(text(&ascii_headers(mail.as_bytes()).unwrap()), want);
    }

    #[test]
    fn header_fields_nested_too_deep_are_left_as_they_are() {
        let mail = format!(
            "Subject: Gr\u{fc}\u{df}e\r\n{}Subject: \u{e9}\r\n\r\n\u{e9}\r\n",
            "Content-Type: message/rfc822\r\n\r\n".repeat(40)
        );
        let out = ascii_headers(mail.as_bytes()).unwrap();
        assert!(text(&out).starts_with("Subject: =?utf-8?b?R3LDvMOfZQ==?=\r\n"));
        assert!(text(&out).ends_with("Subject: \u{e9}\r\n\r\n\u{e9}\r\n"));
    }

    #[test]
    fn ascii_header_fields_leave_the_message_as_it_is() {
        for mail in [
            "Subject: weather\r\n\r\nGr\u{fc}\u{df}e\r\n",
            // An enclosed message/global with ASCII fields keeps its type too.
            "Content-Type: message/global\r\n\r\nSubject: x\r\n\r\nK\u{f8}ye\r\n",
        ] {
            assert!(
                matches!(ascii_headers(mail.as_bytes()), Ok(Cow::Borrowed(_))),
                "{mail}"
            );
        }
    }

    #[test]
    fn long_lines_are_folded() {
        let long = "\u{e5}".repeat(100);
        let mail = format!(
            "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n\
             --x\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{long}\r\n--x--\r\n"
        );
        let out = seven_bit(mail.as_bytes()).unwrap();
        assert!(text(&out).lines().all(|l| l.len() <= 76), "{}", text(&out));
        assert_eq!(leaves(&out), leaves(mail.as_bytes()));
    }

    #[test]
    fn without_its_close_delimiter_the_last_part_runs_to_the_end() {
        let mail = "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n\
             --x\r\nContent-Type: image/png\r\n\r\n\u{e5}\r\n";
        let out = seven_bit(mail.as_bytes()).unwrap();
        assert_eq!(
            text(&out),
            "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n\
             --x\r\nContent-Type: image/png\r\nContent-Transfer-Encoding: base64\r\n\r\nw6UNCg==\r\n"
        );
    }

    /// A MIME tree: leaves of 7- or 8-bit text or bytes, multiparts, enclosed messages.
    #[derive(Debug, Clone)]
    enum Tree {
        Text(String),
        Bytes(Vec<u8>),
        Multi(Vec<Tree>),
        Message(Box<Tree>),
    }

    fn tree() -> impl Strategy<Value = Tree> {
        let leaf = prop_oneof![
            "[a-zA-Z0-9 .,=\u{e9}\u{b0}\u{4e2d}\r\n]{0,120}".prop_map(Tree::Text),
            proptest::collection::vec(any::<u8>(), 0..80).prop_map(Tree::Bytes),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 1..4).prop_map(Tree::Multi),
                // mail-parser, the test's reader, trips a debug assertion of its own on a
                // message enclosed straight in an enclosed message inside a multipart.
                inner
                    .prop_filter("no message directly in a message", |t| {
                        !matches!(t, Tree::Message(_))
                    })
                    .prop_map(|t| Tree::Message(Box::new(t))),
            ]
        })
    }

    /// The tree as an entity (header block and body); `n` numbers the boundaries.
    fn render(t: &Tree, n: &mut u32) -> Vec<u8> {
        match t {
            Tree::Text(s) => {
                // Lone CRs and LFs are not text line ends: keep the text's lines CRLF.
                let s = s.replace(['\r', '\n'], " ");
                format!("Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n{s}\r\n")
                    .into_bytes()
            }
            Tree::Bytes(b) => {
                let mut v = b"Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: binary\r\n\r\n".to_vec();
                // The boundary's "--" must not start a line of the content.
                v.extend(b.iter().map(|&c| if c == b'-' { b'_' } else { c }));
                v
            }
            Tree::Multi(parts) => {
                *n += 1;
                let b = format!("=_b{n}");
                let mut v =
                    format!("Content-Type: multipart/mixed; boundary=\"{b}\"\r\n\r\n").into_bytes();
                for p in parts {
                    v.extend_from_slice(format!("--{b}\r\n").as_bytes());
                    v.extend(render(p, n));
                    v.extend_from_slice(b"\r\n");
                }
                v.extend_from_slice(format!("--{b}--\r\n").as_bytes());
                v
            }
            Tree::Message(inner) => {
                let mut v =
                    b"Content-Type: message/rfc822\r\n\r\nSubject: m\r\nMIME-Version: 1.0\r\n"
                        .to_vec();
                v.extend(render(inner, n));
                v
            }
        }
    }

    proptest! {
        #[test]
        fn the_result_is_seven_bit_reads_the_same_and_is_left_alone_a_second_time(t in tree()) {
            let mut mail = b"Subject: p\r\nMIME-Version: 1.0\r\n".to_vec();
            mail.extend(render(&t, &mut 0));
            let out = seven_bit(&mail).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(out.is_ascii());
            prop_assert_eq!(leaves(&out), leaves(&mail));
            prop_assert!(matches!(seven_bit(&out), Ok(Cow::Borrowed(_))));
        }

        #[test]
        fn any_input_is_refused_or_made_seven_bit(raw in proptest::collection::vec(any::<u8>(), 0..400)) {
            if let Ok(out) = seven_bit(&raw) {
                prop_assert!(out.is_ascii());
            }
        }
    }
}
