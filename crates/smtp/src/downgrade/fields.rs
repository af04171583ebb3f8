//! One UTF-8 header field (RFC 6532) made ASCII for a next hop without `SMTPUTF8`, the way RFC
//! 6857 §3 downgrades a message for a reader that predates it: the traditional encodings carry
//! the same text, so a MIME reader of 1996 shows what the sender wrote.
//!
//! It sits under [`super`]'s walk of the MIME structure, which calls it for each field of a
//! header block (the message's and its parts') that is not ASCII. What a field becomes depends
//! on its syntax:
//!
//! - **Addresses** (`From`, `To`, `Cc`, `Reply-To`, the `Resent-` fields, ...): each display
//!   name that is not ASCII becomes RFC 2047 encoded-words in phrase position (§5(3)). An
//!   internationalised domain is written as its A-labels (IDNA2008 with UTS #46: the same
//!   domain, RFC 5890). An address whose local part is not ASCII cannot be written in ASCII at
//!   all; RFC 6857 makes it an empty group (`display-name: ;`) whose name, encoded, is the
//!   whole original mailbox, so the reader still sees who it was and no mail can be sent to a
//!   mangled address.
//! - **MIME parameters** (`Content-Type`, `Content-Disposition`): each parameter value that is
//!   not ASCII, typically an attachment's file name, becomes RFC 2231's `name*=utf-8''...`.
//! - **Message identifiers** (`Message-ID`, `In-Reply-To`, `References`, and DSN's
//!   `Original-Recipient` and `Final-Recipient`), whose syntax has no encoding: RFC 6857
//!   keeps the value, encoded, in the field it registered for it (`Downgraded-Message-Id`, ...).
//! - **Everything else** (`Subject`, `Comments`, `Content-Description`, unknown fields) is read
//!   as unstructured text (RFC 2047 §5(1)): each run of words that is not ASCII becomes
//!   encoded-words and the ASCII words stay as they were, readable and shortest on the air.
//!
//! A field whose octets are not UTF-8 has no defined text to encode and is refused
//! ([`DowngradeError::EightBitHeader`]). The encoded-words are written by `email-encoding`
//! (lettre's own encoder), which also keeps their lines within 76 characters; its RFC 2231
//! encoder takes only alphanumeric parameter names (it panics on `creation-date`), so the
//! parameters are written here.

use std::fmt::Write as _;

use email_encoding::headers::{rfc2047, writer::EmailWriter};
use mail_parser::{Addr, Address, HeaderValue, MessageParser};

use super::DowngradeError;

/// The longest line the unstructured writer aims for (RFC 5322 §2.1.1's 78 less room for the
/// line end), the limit `email-encoding` folds encoded-words at too.
const LINE: usize = 76;

/// How a field's value is made ASCII.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Syntax {
    Addresses,
    Parameters,
    /// Kept in RFC 6857's `Downgraded-` field of the same name.
    Identifier,
    Unstructured,
}

fn syntax(name: &str) -> Syntax {
    match name.to_ascii_lowercase().as_str() {
        "from"
        | "sender"
        | "reply-to"
        | "to"
        | "cc"
        | "bcc"
        | "resent-from"
        | "resent-sender"
        | "resent-to"
        | "resent-cc"
        | "resent-bcc"
        | "resent-reply-to"
        | "disposition-notification-to"
        | "mail-followup-to"
        | "mail-reply-to" => Syntax::Addresses,
        "content-type" | "content-disposition" => Syntax::Parameters,
        "message-id" | "in-reply-to" | "references" | "original-recipient" | "final-recipient" => {
            Syntax::Identifier
        }
        _ => Syntax::Unstructured,
    }
}

/// Writes `raw`, one header field with its continuation lines and line end, made ASCII, each
/// line ended by `eol`.
pub(super) fn ascii_field(raw: &[u8], eol: &[u8], out: &mut Vec<u8>) -> Result<(), DowngradeError> {
    let colon = raw.iter().position(|&b| b == b':').unwrap_or(raw.len());
    let name = &raw[..colon];
    let refuse = || DowngradeError::EightBitHeader {
        field: String::from_utf8_lossy(name.trim_ascii()).into_owned(),
    };
    let name = std::str::from_utf8(name.trim_ascii())
        .ok()
        .filter(|n| n.is_ascii() && !n.is_empty())
        .ok_or_else(refuse)?;
    let value = raw.get(colon + 1..).unwrap_or_default();
    let value = std::str::from_utf8(value).map_err(|_| refuse())?;
    let value = unfold(value);
    let value = value.trim_matches(|c: char| c.is_ascii_whitespace());
    let text = match syntax(name) {
        Syntax::Addresses => addresses(name, value),
        Syntax::Parameters => parameters(name, value),
        Syntax::Identifier => unstructured(&format!("Downgraded-{name}"), value),
        Syntax::Unstructured => unstructured(name, value),
    };
    // The encoders fold with CRLF; the message's own line end is used throughout.
    for (i, line) in text.split("\r\n").enumerate() {
        if i > 0 {
            out.extend_from_slice(eol);
        }
        out.extend_from_slice(line.as_bytes());
    }
    out.extend_from_slice(eol);
    Ok(())
}

/// The value with its folds (a line end before white space) taken out, RFC 5322 §2.2.3.
fn unfold(value: &str) -> String {
    value.replace("\r\n", "").replace('\n', "")
}

/// Whether text must be encoded: it is not printable ASCII (a control character could end the
/// line, and a display name decoded from an encoded-word may hold one), or it could be read as
/// an encoded-word.
fn needs_encoding(text: &str) -> bool {
    !text
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) || b == b'\t')
        || text.contains("=?")
}

/// `name: value` as unstructured text: runs of words that need it become encoded-words, the
/// other words stay as they are, the white space between words stays as it was (inside a run
/// of encoded words it is encoded with them), and lines fold at white space.
fn unstructured(name: &str, value: &str) -> String {
    let mut s = format!("{name}:");
    let mut line = s.len();
    let words = spaced_words(value);
    let mut i = 0;
    while let Some(&(space, word)) = words.get(i) {
        // One space after the colon, as every writer puts it; the value itself was trimmed.
        let gap = if i == 0 { " " } else { space };
        if needs_encoding(word) {
            // A run of words that need encoding is encoded together, the white space between
            // them with them: between adjacent encoded-words it is not text (RFC 2047 §6.2).
            let mut run = String::from(word);
            i += 1;
            while let Some(&(space, next)) = words.get(i).filter(|(_, w)| needs_encoding(w)) {
                run.push_str(space);
                run.push_str(next);
                i += 1;
            }
            line = encoded(&mut s, line, &run, gap.len());
        } else {
            if line + gap.len() + word.len() > LINE && line > name.len() + 1 {
                s.push_str("\r\n");
                line = 0;
            }
            s.push_str(gap);
            s.push_str(word);
            line += gap.len() + word.len();
            i += 1;
        }
    }
    s
}

/// The words of an unfolded value, each with the run of spaces and tabs before it.
fn spaced_words(value: &str) -> Vec<(&str, &str)> {
    let blank = |c: char| c == ' ' || c == '\t';
    let mut out = Vec::new();
    let mut rest = value;
    loop {
        let after = rest.trim_start_matches(blank);
        if after.is_empty() {
            return out;
        }
        let space = &rest[..rest.len() - after.len()];
        let end = after.find(blank).unwrap_or(after.len());
        out.push((space, &after[..end]));
        rest = &after[end..];
    }
}

/// Appends `text` as encoded-words to `s`, whose last line is `line` long, after `spaces`
/// spaces (which may become a fold); returns the length of the last line after it.
fn encoded(s: &mut String, mut line: usize, text: &str, spaces: usize) -> usize {
    // An encoded-word that fits on a line of its own goes there whole rather than split at
    // the end of this one (the encoder would split it wherever the line ends).
    let whole = "=?utf-8?b??=".len() + text.len().div_ceil(3) * 4;
    if spaces > 0 && line + spaces + whole > LINE && spaces + whole <= LINE {
        s.push_str("\r\n");
        line = 0;
    }
    let mut w = EmailWriter::new(s, line, spaces, spaces > 0);
    // Writing to a String cannot fail.
    let _ = rfc2047::encode(text, &mut w);
    w.line_len()
}

/// A phrase (a display name) in ASCII: as it is when it is made of atoms, quoted when it holds
/// specials, encoded-words when it is not ASCII.
fn phrase(s: &mut String, line: usize, name: &str) -> usize {
    if needs_encoding(name) {
        return encoded(s, line, name, 0);
    }
    let atoms = name
        .split(' ')
        .all(|w| !w.is_empty() && w.bytes().all(is_atext));
    let before = s.len();
    if atoms {
        s.push_str(name);
    } else {
        s.push('"');
        for c in name.chars() {
            if c == '"' || c == '\\' {
                s.push('\\');
            }
            s.push(c);
        }
        s.push('"');
    }
    line + s.len() - before
}

/// `address` in printable ASCII: as it is, or with its internationalised domain as A-labels;
/// `None` when it has no such form (a local part that is not ASCII, a domain that is not a
/// valid internationalised domain name).
fn ascii_address(address: &str) -> Option<String> {
    let printable = |s: &str| s.bytes().all(|b| b.is_ascii_graphic());
    if printable(address) {
        return Some(address.to_owned());
    }
    let (local, domain) = address.rsplit_once('@')?;
    if !printable(local) {
        return None;
    }
    let domain = idna::domain_to_ascii_strict(domain).ok()?;
    printable(&domain).then(|| format!("{local}@{domain}"))
}

/// RFC 5322 §3.2.3's atext.
fn is_atext(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~".contains(&b)
}

/// `name: value` as an address list, or as unstructured text if it does not read as one.
fn addresses(name: &str, value: &str) -> String {
    // mail-parser reads the list (quoting, comments, groups, encoded-words) whatever the
    // field's name; `To` is one it always reads as addresses.
    let block = format!("To: {value}\r\n\r\n");
    let parsed = MessageParser::new().parse_headers(block.as_bytes());
    let Some(HeaderValue::Address(list)) = parsed.as_ref().and_then(|m| m.header("To")) else {
        return unstructured(name, value);
    };
    let mut s = format!("{name}:");
    let mut line = s.len();
    match list {
        Address::List(list) => {
            for (i, addr) in list.iter().enumerate() {
                list_item(&mut s, &mut line, i == 0, |s, line| mailbox(s, line, addr));
            }
        }
        Address::Group(groups) => {
            let mut first = true;
            for group in groups {
                match group.name.as_deref() {
                    // The mailboxes outside any group: mail-parser's group without a name.
                    None => {
                        for addr in &group.addresses {
                            let at_first = std::mem::take(&mut first);
                            list_item(&mut s, &mut line, at_first, |s, line| {
                                mailbox(s, line, addr)
                            });
                        }
                    }
                    Some(g) => {
                        let at_first = std::mem::take(&mut first);
                        list_item(&mut s, &mut line, at_first, |s, line| {
                            let mut line = phrase(s, line, g);
                            s.push(':');
                            line += 1;
                            for (k, addr) in group.addresses.iter().enumerate() {
                                s.push_str(if k > 0 { ", " } else { " " });
                                line = mailbox(s, line + if k > 0 { 2 } else { 1 }, addr);
                            }
                            s.push(';');
                            line + 1
                        });
                    }
                }
            }
        }
    }
    s
}

/// Appends one item of a list (`, ` before it unless it is the first) as `render` writes it
/// (given the length of the line it starts on, it returns the length of its last line),
/// folding before it when it would not fit on the line.
fn list_item(
    s: &mut String,
    line: &mut usize,
    first: bool,
    render: impl Fn(&mut String, usize) -> usize,
) {
    if !first {
        s.push(',');
        *line += 1;
    }
    let mut item = String::new();
    let end = render(&mut item, *line + 1);
    if *line > 0 && (item.contains('\n') || end > LINE) {
        item.clear();
        s.push_str("\r\n");
        *line = render(&mut item, 1);
    } else {
        *line = end;
    }
    s.push(' ');
    s.push_str(&item);
}

/// One mailbox: `name <address>`, or the address alone; a mailbox whose address is not ASCII
/// becomes an empty group named after it (RFC 6857).
fn mailbox(s: &mut String, line: usize, addr: &Addr<'_>) -> usize {
    let name = addr
        .name
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty());
    let original = addr.address.as_deref().unwrap_or("");
    let ascii = ascii_address(original);
    let address = ascii.as_deref().unwrap_or(original);
    if ascii.is_none() {
        let whole = match name {
            Some(n) => format!("{n} <{address}>"),
            None => address.to_owned(),
        };
        let line = phrase(s, line, &whole);
        s.push_str(": ;");
        return line + 3;
    }
    match name {
        Some(n) => {
            let line = phrase(s, line, n);
            s.push_str(" <");
            s.push_str(address);
            s.push('>');
            line + address.len() + 3
        }
        None => {
            s.push_str(address);
            line + address.len()
        }
    }
}

/// `name: type/subtype; parameters` with each parameter value in RFC 2231's form where it is
/// not printable ASCII, or as unstructured text if the field does not read as one.
fn parameters(name: &str, value: &str) -> String {
    let block = format!("Content-Type: {value}\r\n\r\n");
    let parsed = MessageParser::new().parse_headers(block.as_bytes());
    let Some(HeaderValue::ContentType(ct)) = parsed.as_ref().and_then(|m| m.header("Content-Type"))
    else {
        return unstructured(name, value);
    };
    // Only the parameters can carry other text; a type that is not a token is garbage that
    // no reader will parse, kept readable as unstructured text.
    let token = |t: &str| !t.is_empty() && t.bytes().all(is_token);
    if !token(&ct.c_type) || !ct.c_subtype.as_deref().is_none_or(token) {
        return unstructured(name, value);
    }
    let mut s = format!("{name}: {}", ct.c_type);
    if let Some(sub) = &ct.c_subtype {
        let _ = write!(s, "/{sub}");
    }
    let mut line = s.len();
    for attr in ct.attributes.iter().flatten() {
        // mail-parser read the name as a token; one it could not have (RFC 2045 §5.1) has no
        // form to be written in, and a reader would not know it either.
        if attr.name.is_empty() || !attr.name.bytes().all(is_token) {
            continue;
        }
        for item in parameter(&attr.name, &attr.value) {
            s.push(';');
            line += 1;
            if line + 1 + item.len() > LINE {
                s.push_str("\r\n");
                line = 0;
            }
            s.push(' ');
            s.push_str(&item);
            line += 1 + item.len();
        }
    }
    s
}

/// One parameter as `key="value"`, or for a value that is not printable ASCII, RFC 2231's
/// `key*=utf-8''...` in as many numbered sections (`key*0*=`, `key*1*=`, ...) as keep each
/// within a line. Sections end at character boundaries, so each decodes to UTF-8 by itself.
fn parameter(key: &str, value: &str) -> Vec<String> {
    if value.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        let mut quoted = format!("{key}=\"");
        for c in value.chars() {
            if c == '"' || c == '\\' {
                quoted.push('\\');
            }
            quoted.push(c);
        }
        quoted.push('"');
        return vec![quoted];
    }
    let mut encoded = Vec::new();
    for c in value.chars() {
        let mut bytes = [0u8; 4];
        let mut piece = String::new();
        for &b in c.encode_utf8(&mut bytes).as_bytes() {
            if is_token(b) && !b"*'%".contains(&b) {
                piece.push(char::from(b));
            } else {
                let _ = write!(piece, "%{b:02X}");
            }
        }
        encoded.push(piece);
    }
    let whole: String = encoded.concat();
    let single = format!("{key}*=utf-8''{whole}");
    if single.len() < LINE {
        return vec![single];
    }
    // Room on a line of its own for a section's text after `key*NN*=` and `utf-8''`.
    let room = LINE
        .saturating_sub(key.len() + "*99*=utf-8''".len() + 2)
        .max(12);
    let mut sections = Vec::new();
    let mut text = String::new();
    for piece in encoded {
        if !text.is_empty() && text.len() + piece.len() > room {
            sections.push(std::mem::take(&mut text));
        }
        text.push_str(&piece);
    }
    sections.push(text);
    sections
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let charset = if i == 0 { "utf-8''" } else { "" };
            format!("{key}*{i}*={charset}{t}")
        })
        .collect()
}

/// RFC 2045 §5.1's token characters: printable ASCII but SPACE and the tspecials.
fn is_token(b: u8) -> bool {
    b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?=".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mail_parser::MimeHeaders;
    use proptest::prelude::*;

    fn field(raw: &str) -> String {
        let mut out = Vec::new();
        ascii_field(raw.as_bytes(), b"\r\n", &mut out).expect("UTF-8 field");
        String::from_utf8(out).expect("ASCII")
    }

    /// The value of the field `name` as a MIME reader sees unstructured text.
    fn read(field: &str, name: &str) -> Option<String> {
        let value = field.strip_prefix(name)?.strip_prefix(':')?;
        let block = format!("Subject:{value}\r\n");
        let m = MessageParser::new().parse_headers(block.as_bytes())?;
        m.subject().map(str::to_owned)
    }

    #[test]
    fn a_subject_keeps_its_ascii_words_and_encodes_the_others() {
        let out = field("Subject: Re: Grüße aus Bergen, Wetter für morgen\r\n");
        assert_eq!(
            out,
            "Subject: Re: =?utf-8?b?R3LDvMOfZQ==?= aus Bergen, Wetter\r\n \
             =?utf-8?b?ZsO8cg==?= morgen\r\n"
        );
        assert!(out.is_ascii());
        assert_eq!(
            read(&out, "Subject").as_deref(),
            Some("Re: Grüße aus Bergen, Wetter für morgen")
        );
    }

    #[test]
    fn words_of_one_run_are_one_text() {
        // Adjacent encoded-words lose the white space between them (RFC 2047 §6.2), so a run
        // of non-ASCII words is encoded whole, its spaces inside.
        let out = field("Subject: Überfahrt nach Ålesund\r\n");
        assert_eq!(
            read(&out, "Subject").as_deref(),
            Some("Überfahrt nach Ålesund")
        );
        let out = field("Subject: Überfahrt Ålesund\r\n");
        assert_eq!(read(&out, "Subject").as_deref(), Some("Überfahrt Ålesund"));
    }

    #[test]
    fn white_space_between_words_is_kept() {
        let out = field("Subject: Re:  Grüße\taus  Bergen, für  Ålesund\r\n");
        assert_eq!(
            out,
            "Subject: Re:  =?utf-8?b?R3LDvMOfZQ==?=\taus  Bergen,\r\n =?utf-8?b?ZsO8ciAgw4VsZXN1bmQ=?=\r\n"
        );
        // What a reader makes of white space beside an encoded-word is its own affair (RFC
        // 2047 §6.2 asks that it be shown; mail-parser makes it one space); between ASCII
        // words and inside a run of encoded words it is text and reads back as it was.
        assert_eq!(
            read(&out, "Subject").as_deref(),
            Some("Re: Grüße aus  Bergen, für  Ålesund")
        );
    }

    #[test]
    fn an_ascii_word_that_looks_encoded_is_encoded() {
        let out = field("Subject: =?x?q?y?= für\r\n");
        assert_eq!(read(&out, "Subject").as_deref(), Some("=?x?q?y?= für"));
    }

    #[test]
    fn display_names_are_encoded_and_addresses_kept() {
        let out =
            field("From: Jörg Müller <joerg@ship.example>, \"Smith, J.\" <js@shore.example>\r\n");
        assert_eq!(
            out,
            "From: =?utf-8?b?SsO2cmcgTcO8bGxlcg==?= <joerg@ship.example>,\r\n \
             \"Smith, J.\" <js@shore.example>\r\n"
        );
        let block = format!("{out}\r\n");
        let m = MessageParser::new()
            .parse_headers(block.as_bytes())
            .unwrap();
        let from = m.from().unwrap();
        let all: Vec<_> = from.iter().map(|a| (a.name(), a.address())).collect();
        assert_eq!(
            all,
            [
                (Some("Jörg Müller"), Some("joerg@ship.example")),
                (Some("Smith, J."), Some("js@shore.example"))
            ]
        );
    }

    #[test]
    fn an_address_that_is_not_ascii_becomes_an_empty_group_named_after_it() {
        let out = field("Cc: Ops <ops@ship.example>, Jörg <jörg@ship.example>\r\n");
        assert!(out.is_ascii());
        assert!(out.ends_with(": ;\r\n"), "{out}");
        let block = format!("{out}\r\n");
        let m = MessageParser::new()
            .parse_headers(block.as_bytes())
            .unwrap();
        let cc = m.cc().unwrap();
        let groups = cc.as_group().unwrap();
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[1].name.as_deref(), Some("Jörg <jörg@ship.example>"));
        assert!(groups[1].addresses.is_empty());
        assert_eq!(
            groups[0].addresses[0].address.as_deref(),
            Some("ops@ship.example")
        );
    }

    #[test]
    fn an_internationalised_domain_is_written_as_a_labels() {
        let out = field("To: Hafen <ops@hafen.M\u{fc}nchen.example>\r\n");
        assert_eq!(out, "To: Hafen <ops@hafen.xn--mnchen-3ya.example>\r\n");
    }

    #[test]
    fn groups_stay_groups() {
        let out = field("To: Brücke: a@ship.example, b@ship.example;\r\n");
        assert_eq!(
            out,
            "To: =?utf-8?b?QnLDvGNrZQ==?=: a@ship.example, b@ship.example;\r\n"
        );
    }

    #[test]
    fn a_file_name_becomes_an_rfc_2231_parameter() {
        let out = field("Content-Disposition: attachment; filename=\"Fahrplan März.pdf\"\r\n");
        assert!(out.is_ascii(), "{out}");
        assert!(
            out.contains("filename*=utf-8''Fahrplan%20M%C3%A4rz.pdf"),
            "{out}"
        );
        let block = format!("{out}\r\n");
        let m = MessageParser::new()
            .parse_headers(block.as_bytes())
            .unwrap();
        let cd = m.content_disposition().unwrap();
        assert_eq!(cd.ctype(), "attachment");
        assert_eq!(cd.attribute("filename"), Some("Fahrplan März.pdf"));
    }

    #[test]
    fn long_names_go_in_sections_and_any_parameter_name_is_written() {
        let name = "Überfahrtsplan für die Woche vom 30. November bis zum 6. Dezember 2026.pdf";
        let out = field(&format!(
            "Content-Disposition: attachment; creation-date=\"Mon, 30 Nov 2026 10:00:00 +0000\"; \
             filename=\"{name}\"; x-ümlaut=1\r\n"
        ));
        assert!(out.contains("filename*0*=utf-8''%C3%9C"), "{out}");
        assert!(out.contains("filename*1*="), "{out}");
        assert!(out.split("\r\n").all(|l| l.len() <= 76), "{out}");
        let block = format!("{out}\r\n");
        let m = MessageParser::new()
            .parse_headers(block.as_bytes())
            .unwrap();
        let cd = m.content_disposition().unwrap();
        assert_eq!(cd.attribute("filename"), Some(name));
        assert_eq!(
            cd.attribute("creation-date"),
            Some("Mon, 30 Nov 2026 10:00:00 +0000")
        );
    }

    #[test]
    fn a_type_that_is_not_a_token_is_kept_as_text() {
        let out = field("Content-Type: t\u{458}pe/plain; a=b\r\n");
        assert!(out.is_ascii(), "{out}");
        assert_eq!(
            read(&out, "Content-Type").as_deref(),
            Some("t\u{458}pe/plain; a=b")
        );
    }

    #[test]
    fn a_display_name_with_a_line_end_in_it_is_encoded() {
        // An encoded-word may hide CRLF in a name; written back plain it would end the field.
        let out =
            field("To: =?utf-8?b?QQ0KQmNjOiBldmlsQHg=?= <a@x.example>, \u{f8} <b@x.example>\r\n");
        assert_eq!(
            out.matches("\r\n").count(),
            out.matches("\r\n ").count() + 1,
            "{out}"
        );
    }

    #[test]
    fn a_content_type_keeps_its_other_parameters() {
        let out = field("Content-Type: text/plain; charset=utf-8; name=\"Bericht Ø.txt\"\r\n");
        let block = format!("{out}\r\n");
        let m = MessageParser::new()
            .parse_headers(block.as_bytes())
            .unwrap();
        let ct = m.content_type().unwrap();
        assert_eq!((ct.ctype(), ct.subtype()), ("text", Some("plain")));
        assert_eq!(ct.attribute("charset"), Some("utf-8"));
        assert_eq!(ct.attribute("name"), Some("Bericht Ø.txt"));
    }

    #[test]
    fn a_message_id_goes_to_its_downgraded_field() {
        let out = field("Message-ID: <grüße@ship.example>\r\n");
        assert!(
            out.starts_with("Downgraded-Message-ID: =?utf-8?b?"),
            "{out}"
        );
        assert_eq!(
            read(&out, "Downgraded-Message-ID").as_deref(),
            Some("<grüße@ship.example>")
        );
    }

    #[test]
    fn a_long_subject_folds_within_76_characters() {
        let subject = "Wetterbericht für die Nordsee und den Ärmelkanal, ausgegeben um 12 Uhr \
                       Bordzeit, gültig für die nächsten vierundzwanzig Stunden mit Ausblick";
        let out = field(&format!("Subject: {subject}\r\n"));
        for line in out.split("\r\n") {
            assert!(line.len() <= 76, "{line:?}");
        }
        assert_eq!(read(&out, "Subject").as_deref(), Some(subject));
    }

    #[test]
    fn the_message_line_end_is_kept() {
        let mut out = Vec::new();
        ascii_field(
            "Subject: a long line für a message with LF line ends only, which its own writer \
             folds\n"
                .as_bytes(),
            b"\n",
            &mut out,
        )
        .unwrap();
        assert!(!out.contains(&b'\r'));
        assert!(out.ends_with(b"\n"));
    }

    #[test]
    fn octets_that_are_not_utf_8_are_refused() {
        let mut out = Vec::new();
        assert_eq!(
            ascii_field(b"Subject: Gr\xfc\xdfe\r\n", b"\r\n", &mut out),
            Err(DowngradeError::EightBitHeader {
                field: "Subject".into()
            })
        );
    }

    proptest! {
        /// Any text, as a subject, reads back the same once made ASCII.
        #[test]
        fn any_subject_reads_back(words in proptest::collection::vec("[^\\s]{1,12}", 1..12)) {
            let subject = words.join(" ");
            let out = field(&format!("Subject: {subject}\r\n"));
            prop_assert!(out.is_ascii());
            prop_assert!(out.split("\r\n").all(|l| l.len() <= 998));
            prop_assert_eq!(read(&out, "Subject"), Some(subject));
        }
    }
}
