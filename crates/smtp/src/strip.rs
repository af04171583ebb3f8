//! Header fields left out of a message on its way over the air: the signatures and
//! verification results that only the Internet side can use, which on a 1200 bit/s link cost
//! more airtime than many a message's text.
//!
//! Mail from the Internet carries DKIM signatures, ARC seals and `Authentication-Results` (a
//! few kilobytes of base64, which no compression shrinks) and `X-` fields of spam filters and
//! mailers. A ship's reader uses none of them, and the gateway that strips them is where they
//! were checked, if anywhere. A peer's `strip_headers` in `routes.toml` names what its link
//! leaves out ([`FieldPattern`]); [`DEFAULT_STRIP`] is the list `strip_headers = true` means.
//! Only the message's own header fields (the top level) are touched, never a MIME part's, nor
//! the body; the spool keeps the message as it came. Some fields can never be stripped
//! ([`KEPT`]): `Received`, which RFC 5321 (4.4) forbids a relay to remove and which counts the
//! hops that stop a mail loop, and the fields a reader, MIME or skywave itself needs.
//!
//! It sits beside [`crate::downgrade`], which shares its parsing of a header section, and below
//! the gateway's links, which apply it to each message they send.

use std::borrow::Cow;
use std::fmt;

use crate::downgrade::{
    Context, Entity, MAX_DEPTH, Mime, before_line_end, delimiter_lines, read_mime, split_entity,
};

/// What `strip_headers = true` leaves out: signatures, seals and verification results of the
/// Internet side, and every `X-` field but those of [`SPARED`].
pub const DEFAULT_STRIP: &[&str] = &[
    "DKIM-Signature",
    "DomainKey-Signature",
    "ARC-Seal",
    "ARC-Message-Signature",
    "ARC-Authentication-Results",
    "Authentication-Results",
    "Received-SPF",
    "X-*",
];

/// Fields no pattern may match: the trace (`Received`, `Return-Path`; RFC 5321 4.4, and the
/// hop count), what RFC 5322 requires or a reader answers by, MIME's own, and what skywave
/// reads (precedence, expiry, the Message-ID its de-duplication keys on).
pub const KEPT: &[&str] = &[
    "Received",
    "Return-Path",
    "From",
    "Sender",
    "Reply-To",
    "To",
    "Cc",
    "Date",
    "Subject",
    "Message-ID",
    "In-Reply-To",
    "References",
    "MIME-Version",
    "Content-Type",
    "Content-Transfer-Encoding",
    "Content-Disposition",
    "MMHS-Primary-Precedence",
    "Expires",
    "Auto-Submitted",
];

/// `X-` fields a prefix pattern passes over: `X-Priority`, the importance flag that
/// Thunderbird sets alone and mail readers show (RFC 6758's `Priority` and `Importance` are not
/// `X-` fields, and stay anyway).
pub const SPARED: &[&str] = &["X-Priority"];

/// A field name a link leaves out (`DKIM-Signature`, any case), or a prefix of names
/// (`X-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldPattern {
    /// The name or prefix, in lower case.
    name: String,
    /// Whether `name` is a prefix (written with a trailing `*`).
    prefix: bool,
}

/// Why a pattern is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// Not a field name (RFC 5322: printable ASCII but `:`), with at most a trailing `*`.
    #[error(
        "\"{0}\" is not a header field name; expected a name such as \"DKIM-Signature\", or a prefix such as \"X-*\""
    )]
    NotAName(String),
    /// It would strip a field that must stay.
    #[error(
        "\"{pattern}\" would strip {field}, which must stay (the trace, what a reader or MIME needs, or what skywave reads)"
    )]
    Kept {
        /// The pattern as written.
        pattern: String,
        /// The field of [`KEPT`] it matches.
        field: &'static str,
    },
}

impl FieldPattern {
    /// Reads `DKIM-Signature` or `X-*`; refuses a pattern that is not a name or that would
    /// match a field of [`KEPT`].
    pub fn parse(text: &str) -> Result<FieldPattern, PatternError> {
        let (name, prefix) = match text.strip_suffix('*') {
            Some(p) => (p, true),
            None => (text, false),
        };
        let is_name_byte = |b: u8| b.is_ascii_graphic() && b != b':' && b != b'*';
        if (name.is_empty() && !prefix) || !name.bytes().all(is_name_byte) {
            return Err(PatternError::NotAName(text.to_owned()));
        }
        let pattern = FieldPattern {
            name: name.to_ascii_lowercase(),
            prefix,
        };
        match KEPT.iter().find(|k| pattern.matches(k.as_bytes())) {
            Some(field) => Err(PatternError::Kept {
                pattern: text.to_owned(),
                field,
            }),
            None => Ok(pattern),
        }
    }

    /// The patterns of [`DEFAULT_STRIP`].
    pub fn defaults() -> Vec<FieldPattern> {
        DEFAULT_STRIP
            .iter()
            .filter_map(|p| FieldPattern::parse(p).ok())
            .collect()
    }

    /// Whether it matches the field `name` (any case).
    pub fn matches(&self, name: &[u8]) -> bool {
        let wanted = self.name.as_bytes();
        if self.prefix {
            name.len() >= wanted.len() && name[..wanted.len()].eq_ignore_ascii_case(wanted)
        } else {
            name.eq_ignore_ascii_case(wanted)
        }
    }
}

impl fmt::Display for FieldPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if self.prefix {
            f.write_str("*")?;
        }
        Ok(())
    }
}

/// `message` without the header fields of its own header section that a pattern matches,
/// each with its continuation lines; every other byte as it was. Returns the message and how
/// many bytes were left out (0: borrowed, untouched).
pub fn strip_fields<'a>(message: &'a [u8], patterns: &[FieldPattern]) -> (Cow<'a, [u8]>, usize) {
    if patterns.is_empty() {
        return (Cow::Borrowed(message), 0);
    }
    let entity = split_entity(message);
    let strip = |name: &[u8]| {
        patterns.iter().any(|p| p.matches(name))
            && !SPARED
                .iter()
                .any(|s| name.eq_ignore_ascii_case(s.as_bytes()))
    };
    let removed: usize = entity
        .fields
        .iter()
        .filter(|f| strip(f.name))
        .map(|f| f.raw.len())
        .sum();
    if removed == 0 {
        return (Cow::Borrowed(message), 0);
    }
    let mut out = Vec::with_capacity(message.len() - removed);
    for field in entity.fields.iter().filter(|f| !strip(f.name)) {
        out.extend_from_slice(field.raw);
    }
    out.extend_from_slice(entity.separator);
    out.extend_from_slice(entity.body);
    (Cow::Owned(out), removed)
}

/// `message` with each `multipart/alternative` that has a `text/plain` part cut down to that
/// part (the first, if several): the HTML twin of most Internet mail, often several times the
/// text's size even compressed, and the images of a `multipart/related` around it, stay
/// ashore. Parts of a `multipart/mixed` (and any other multipart) are walked, so that a message
/// with attachments keeps them; a `multipart/signed` is left whole, since its signature covers
/// its parts, and so is anything deeper than [`crate::downgrade::MAX_DEPTH`]. The result is
/// still valid MIME: a `multipart/alternative` of one part. Returns the message and how many
/// bytes were left out (0: borrowed, untouched).
pub fn text_only(message: &[u8]) -> (Cow<'_, [u8]>, usize) {
    let mut out = Vec::new();
    if !text_only_entity(message, Context::Message, 0, &mut out) {
        return (Cow::Borrowed(message), 0);
    }
    let removed = message.len().saturating_sub(out.len());
    (Cow::Owned(out), removed)
}

/// Writes `raw`, one entity, to `out` with its alternatives cut down (see [`text_only`]);
/// returns whether anything was left out (when not, `out` holds `raw` as it was).
fn text_only_entity(raw: &[u8], context: Context, depth: usize, out: &mut Vec<u8>) -> bool {
    let start = out.len();
    let entity = split_entity(raw);
    let mime = read_mime(&entity, context);
    let Some(parts) = walkable(&entity, &mime, depth) else {
        out.extend_from_slice(raw);
        return false;
    };
    let part_context = mime.part_context();
    let body = entity.body;
    let plain = |(_, from, to): &(usize, usize, usize)| {
        let part = split_entity(&body[*from..*to]);
        read_mime(&part, part_context).content_type == "text/plain"
    };
    let changed = if mime.content_type == "multipart/alternative"
        && let Some(keep) = parts.parts.iter().position(plain)
    {
        // The text part, its delimiter line and the line end before the next delimiter.
        out.extend_from_slice(entity.header);
        out.extend_from_slice(entity.separator);
        let (at, _, _) = parts.parts[keep];
        out.extend_from_slice(&body[..parts.first()]);
        out.extend_from_slice(&body[at..parts.next(keep)]);
        out.extend_from_slice(&body[parts.close..]);
        parts.parts.len() > 1
    } else {
        rewrite_parts(&entity, &parts, out, |part, out| {
            text_only_entity(part, part_context, depth + 1, out)
        })
    };
    if !changed {
        out.truncate(start);
        out.extend_from_slice(raw);
    }
    changed
}

/// The body parts of a multipart entity, as offsets into its body.
pub(crate) struct Parts {
    /// Each part: where its delimiter line starts, where its content starts and ends.
    pub(crate) parts: Vec<(usize, usize, usize)>,
    /// Where the close delimiter line starts.
    pub(crate) close: usize,
}

impl Parts {
    /// Where the first delimiter line starts (the end of the preamble).
    fn first(&self) -> usize {
        self.parts.first().map_or(self.close, |p| p.0)
    }

    /// Where the delimiter line after part `i` starts.
    fn next(&self, i: usize) -> usize {
        self.parts.get(i + 1).map_or(self.close, |p| p.0)
    }
}

/// The parts of `entity` when the walks that rewrite parts ([`text_only`],
/// [`crate::shrink::shrink_images`]) enter it: a multipart with a boundary and its close
/// delimiter, not `multipart/signed` (its signature covers its parts), and less than
/// [`MAX_DEPTH`] deep. `None`: it stays as it came.
pub(crate) fn walkable(entity: &Entity<'_>, mime: &Mime, depth: usize) -> Option<Parts> {
    let boundary = mime.boundary.as_deref().filter(|b| !b.is_empty())?;
    if !mime.content_type.starts_with("multipart/")
        || mime.content_type == "multipart/signed"
        || depth >= MAX_DEPTH
    {
        return None;
    }
    let body = entity.body;
    let delimiters = delimiter_lines(body, boundary.as_bytes());
    // A multipart without its close delimiter is left as it came.
    let &(close, _, true) = delimiters.last()? else {
        return None;
    };
    let parts = delimiters
        .windows(2)
        .filter(|w| !w[0].2)
        .map(|w| (w[0].0, w[0].1, before_line_end(body, w[0].1, w[1].0)))
        .collect();
    Some(Parts { parts, close })
}

/// Writes `entity`, a multipart whose parts are `parts`, to `out` with each part written by
/// `part` (which returns whether it changed it); returns whether any was changed.
pub(crate) fn rewrite_parts(
    entity: &Entity<'_>,
    parts: &Parts,
    out: &mut Vec<u8>,
    mut part: impl FnMut(&[u8], &mut Vec<u8>) -> bool,
) -> bool {
    let body = entity.body;
    out.extend_from_slice(entity.header);
    out.extend_from_slice(entity.separator);
    out.extend_from_slice(&body[..parts.first()]);
    let mut changed = false;
    for (i, &(at, from, to)) in parts.parts.iter().enumerate() {
        out.extend_from_slice(&body[at..from]);
        changed |= part(&body[from..to], out);
        out.extend_from_slice(&body[to..parts.next(i)]);
    }
    out.extend_from_slice(&body[parts.close..]);
    changed
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    /// Mail as it comes from a large provider, with a folded signature and seal.
    const FROM_THE_INTERNET: &[u8] = b"Received: from mx.example (mx.example [192.0.2.7])\r\n\
        \tby gw.shore.example with ESMTPS id 1; Tue, 1 Dec 2026 01:02:03 +0000\r\n\
        ARC-Seal: i=1; a=rsa-sha256; t=1796000000; cv=none;\r\n\
        \x20       b=Zm9vYmFyYmF6cXV4\r\n\
        DKIM-Signature: v=1; a=rsa-sha256; d=example.com; s=sel;\r\n\
        \tbh=YmFzZTY0; b=c2lnbmF0dXJl\r\n\
        Authentication-Results: mx.example; dkim=pass header.d=example.com\r\n\
        X-Spam-Score: -0.1\r\n\
        From: Alice <alice@example.com>\r\n\
        To: ops@ship.example\r\n\
        Subject: charts\r\n\
        Message-ID: <1@example.com>\r\n\
        x-mailer: Something 1.0\r\n\
        X-Priority: 1 (Highest)\r\n\
        \r\n\
        X-Not-A-Header: the body is never touched\r\n\
        DKIM-Signature: nor is this\r\n";

    #[test]
    fn the_defaults_leave_out_signatures_seals_and_x_fields_whole() {
        let (out, removed) = strip_fields(FROM_THE_INTERNET, &FieldPattern::defaults());
        let expected: &[u8] = b"Received: from mx.example (mx.example [192.0.2.7])\r\n\
            \tby gw.shore.example with ESMTPS id 1; Tue, 1 Dec 2026 01:02:03 +0000\r\n\
            From: Alice <alice@example.com>\r\n\
            To: ops@ship.example\r\n\
            Subject: charts\r\n\
            Message-ID: <1@example.com>\r\n\
            X-Priority: 1 (Highest)\r\n\
            \r\n\
            X-Not-A-Header: the body is never touched\r\n\
            DKIM-Signature: nor is this\r\n";
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(expected)
        );
        assert_eq!(removed, FROM_THE_INTERNET.len() - expected.len());
        // Nothing to strip: the message itself, not a copy.
        let (again, none) = strip_fields(&out, &FieldPattern::defaults());
        assert!(matches!(again, Cow::Borrowed(_)) && none == 0);
    }

    #[test]
    fn a_message_without_a_body_or_with_lf_lines_keeps_its_shape() {
        let lf = b"X-A: 1\nSubject: s\n\nbody\n";
        assert_eq!(
            strip_fields(lf, &FieldPattern::defaults()).0.as_ref(),
            b"Subject: s\n\nbody\n"
        );
        let header_only = b"Subject: s\r\nX-A: 1\r\n";
        assert_eq!(
            strip_fields(header_only, &FieldPattern::defaults())
                .0
                .as_ref(),
            b"Subject: s\r\n"
        );
    }

    #[test]
    fn patterns_are_names_or_prefixes_and_never_what_must_stay() {
        let p = FieldPattern::parse("List-Unsubscribe").unwrap();
        assert!(p.matches(b"list-unsubscribe") && !p.matches(b"List-Unsubscribe-Post"));
        let p = FieldPattern::parse("List-*").unwrap();
        assert!(p.matches(b"LIST-ID") && p.matches(b"List-Unsubscribe-Post"));
        assert_eq!(p.to_string(), "list-*");
        for bad in ["", "Bad Name", "A:B", "X-*-Y", "Ré"] {
            assert_eq!(
                FieldPattern::parse(bad),
                Err(PatternError::NotAName(bad.to_owned())),
                "{bad}"
            );
        }
        for (pattern, field) in [
            ("Received", "Received"),
            ("received", "Received"),
            ("*", "Received"),
            ("Content-*", "Content-Type"),
            ("MMHS-*", "MMHS-Primary-Precedence"),
            ("Message-*", "Message-ID"),
        ] {
            assert_eq!(
                FieldPattern::parse(pattern),
                Err(PatternError::Kept {
                    pattern: pattern.to_owned(),
                    field
                })
            );
        }
        assert!(
            FieldPattern::parse("Received")
                .unwrap_err()
                .to_string()
                .contains("would strip Received, which must stay")
        );
        assert_eq!(FieldPattern::defaults().len(), DEFAULT_STRIP.len());
    }

    /// Mail from a large provider (`corpus::from_the_internet`): the defaults take its 4.4 kB
    /// of signatures, seals and results down to the trace and the reader's fields, and on the
    /// air (deflated) a 2000-byte message goes as 1.3 kB instead of 3.6 kB: 15 s less at 1200
    /// bit/s.
    #[test]
    fn the_defaults_take_what_an_internet_message_carries_for_the_internet() {
        use skywave_compress::corpus;
        let text = corpus::message_of_size(3, 2000).unwrap();
        let from_afar = corpus::from_the_internet(1, &text);
        let (out, removed) = strip_fields(&from_afar, &FieldPattern::defaults());
        assert_eq!((from_afar.len(), removed), (6404, 3955));
        let kept = split_entity(&out);
        let names: Vec<String> = kept
            .fields
            .iter()
            .map(|f| String::from_utf8_lossy(f.name).into_owned())
            .collect();
        assert_eq!(&names[..3], ["Received", "Return-Path", "Received"]);
        assert!(out.ends_with(&text));
        let deflated = |b: &[u8]| {
            let mut e = skywave_compress::deflate::DeflateEncoder::new(6);
            e.push(b).unwrap();
            e.flush().unwrap();
            e.output_len()
        };
        let (before, after) = (deflated(&from_afar), deflated(&out));
        assert!(
            (3400..3700).contains(&before) && (1200..1400).contains(&after),
            "{before} {after}"
        );
    }

    /// Every leaf part's type and decoded content, in order: what a reader sees.
    fn leaves(raw: &[u8]) -> Vec<(String, Vec<u8>)> {
        use mail_parser::MimeHeaders;
        let mut out = Vec::new();
        if let Some(m) = mail_parser::MessageParser::new().parse(raw) {
            for part in &m.parts {
                if matches!(part.body, mail_parser::PartType::Multipart(_)) {
                    continue;
                }
                let ct = part.content_type().map_or_else(
                    || "text/plain".to_owned(),
                    |c| format!("{}/{}", c.ctype(), c.subtype().unwrap_or("")),
                );
                out.push((ct.to_ascii_lowercase(), part.contents().to_vec()));
            }
        }
        out
    }

    #[test]
    fn an_alternative_keeps_its_text_and_a_message_its_attachments() {
        use skywave_compress::corpus::{Style, message_of_size_with_style};
        let alt = message_of_size_with_style(7, 20_000, Style::Alternative).unwrap();
        let before = leaves(&alt);
        assert_eq!(
            before.iter().map(|l| l.0.as_str()).collect::<Vec<_>>(),
            ["text/plain", "text/html"]
        );
        let (out, removed) = text_only(&alt);
        assert_eq!(out.len() + removed, alt.len());
        assert_eq!(leaves(&out), before[..1]);
        // The corpus's HTML twin: 8572 of the 20,000 bytes.
        assert_eq!(removed, 8572);
        // Done once: nothing more to leave out.
        assert!(matches!(text_only(&out), (Cow::Borrowed(_), 0)));

        // Text and an HTML twin with its image, and an attachment: the text and the
        // attachment stay.
        let nested = b"From: a@b\r\nMIME-Version: 1.0\r\n\
            Content-Type: multipart/mixed; boundary=\"M\"\r\n\r\npreamble\r\n\
            --M\r\nContent-Type: multipart/alternative; boundary=\"A\"\r\n\r\n\
            --A\r\nContent-Type: text/plain\r\n\r\nhello\r\n\
            --A\r\nContent-Type: multipart/related; boundary=\"R\"\r\n\r\n\
            --R\r\nContent-Type: text/html\r\n\r\n<p>hello<img src=cid:1></p>\r\n\
            --R\r\nContent-Type: image/png\r\nContent-ID: <1>\r\n\r\nPNG\r\n--R--\r\n\
            --A--\r\n\
            --M\r\nContent-Type: application/pdf\r\n\r\nPDF\r\n--M--\r\nepilogue\r\n";
        let (out, removed) = text_only(nested);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "From: a@b\r\nMIME-Version: 1.0\r\n\
             Content-Type: multipart/mixed; boundary=\"M\"\r\n\r\npreamble\r\n\
             --M\r\nContent-Type: multipart/alternative; boundary=\"A\"\r\n\r\n\
             --A\r\nContent-Type: text/plain\r\n\r\nhello\r\n\
             --A--\r\n\
             --M\r\nContent-Type: application/pdf\r\n\r\nPDF\r\n--M--\r\nepilogue\r\n"
        );
        assert_eq!(removed, nested.len() - out.len());
        assert_eq!(
            leaves(&out)
                .into_iter()
                .map(|(t, c)| (t, String::from_utf8_lossy(&c).into_owned()))
                .collect::<Vec<_>>(),
            [
                ("text/plain".to_owned(), "hello".to_owned()),
                ("application/pdf".to_owned(), "PDF".to_owned())
            ]
        );
    }

    #[test]
    fn what_has_no_text_twin_or_is_signed_or_broken_goes_whole() {
        let cases: [&[u8]; 4] = [
            // No text/plain among the alternatives.
            b"Content-Type: multipart/alternative; boundary=A\r\n\r\n--A\r\n\
              Content-Type: text/html\r\n\r\n<p>x</p>\r\n--A\r\n\
              Content-Type: text/enriched\r\n\r\nx\r\n--A--\r\n",
            // A signature covers the parts.
            b"Content-Type: multipart/signed; boundary=S\r\n\r\n--S\r\n\
              Content-Type: multipart/alternative; boundary=A\r\n\r\n--A\r\n\
              Content-Type: text/plain\r\n\r\nx\r\n--A\r\nContent-Type: text/html\r\n\r\n\
              <p>x</p>\r\n--A--\r\n--S\r\nContent-Type: application/pgp-signature\r\n\r\n\
              sig\r\n--S--\r\n",
            // No close delimiter.
            b"Content-Type: multipart/alternative; boundary=A\r\n\r\n--A\r\n\
              Content-Type: text/plain\r\n\r\nx\r\n--A\r\nContent-Type: text/html\r\n\r\n\
              <p>x</p>\r\n",
            // Not MIME at all.
            b"Subject: x\r\n\r\n--A\r\nnot a part\r\n--A--\r\n",
        ];
        for m in cases {
            assert!(
                matches!(text_only(m), (Cow::Borrowed(_), 0)),
                "{}",
                String::from_utf8_lossy(m)
            );
        }
    }

    proptest! {
        /// On every style of the corpus: the text a reader sees stays, byte for byte, every
        /// leaf left is one the message had, in its order, and a second pass leaves nothing.
        #[test]
        fn text_only_keeps_the_text_and_takes_only_twins(seed in 0u64..500, size in 2500usize..30_000) {
            use skywave_compress::corpus::{Style, message_of_size_with_style};
            for style in [Style::Plain, Style::Alternative, Style::TextAttachment, Style::BinaryAttachment] {
                let m = message_of_size_with_style(seed, size, style).unwrap();
                let (out, removed) = text_only(&m);
                prop_assert_eq!(out.len() + removed, m.len());
                let (before, after) = (leaves(&m), leaves(&out));
                prop_assert_eq!(
                    before.iter().filter(|l| l.0 == "text/plain").collect::<Vec<_>>(),
                    after.iter().filter(|l| l.0 == "text/plain").collect::<Vec<_>>()
                );
                let mut rest = before.iter();
                for leaf in &after {
                    prop_assert!(rest.any(|b| b == leaf));
                }
                prop_assert_eq!(text_only(&out).1, 0);
            }
        }
    }

    proptest! {
        /// Whatever the message, the body (after the first empty line) is untouched, every
        /// field left is one of the message's own in its order, the count is what went, and a
        /// second pass changes nothing.
        #[test]
        fn stripping_only_removes_whole_fields_of_the_header(
            fields in proptest::collection::vec(
                (prop_oneof![Just("X-Spam"), Just("Subject"), Just("DKIM-Signature"), Just("x-y"), Just("Received")],
                 "[ -~]{0,20}", proptest::option::of("[ -~]{0,20}")),
                0..8),
            body in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut message = Vec::new();
            for (name, value, folded) in &fields {
                message.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
                if let Some(more) = folded {
                    message.extend_from_slice(format!(" {more}\r\n").as_bytes());
                }
            }
            message.extend_from_slice(b"\r\n");
            message.extend_from_slice(&body);
            let (out, removed) = strip_fields(&message, &FieldPattern::defaults());
            prop_assert_eq!(out.len() + removed, message.len());
            prop_assert!(out.ends_with(&body));
            let kept = split_entity(&out);
            let original = split_entity(&message);
            let mut left = original.fields.iter().filter(|f| {
                !FieldPattern::defaults().iter().any(|p| p.matches(f.name))
            });
            for f in &kept.fields {
                prop_assert_eq!(Some(f.raw), left.next().map(|o| o.raw));
            }
            prop_assert!(left.next().is_none());
            prop_assert_eq!(strip_fields(&out, &FieldPattern::defaults()).1, 0);
        }
    }
}
