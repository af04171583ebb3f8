//! SMTP replies: the value type both sessions use, its wire form, and a bounded incremental parser
//! for replies received by the client session.
//!
//! A reply is a three-digit code, an optional RFC 3463 enhanced status code and one or more text
//! lines. The server writes replies with [`Reply::write_to`]; the client reads them with
//! [`ReplyParser`]. The parser is our own rather than smtp-proto's `ResponseReceiver` because the
//! client needs every line of a multi-line reply separately (EHLO keywords), must check that all
//! lines carry the same code, and must bound both the line length and the number of lines.

use std::fmt;

use thiserror::Error;

/// An RFC 3463 enhanced status code `class.subject.detail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EnhancedCode {
    /// Class: 2 (success), 4 (persistent transient failure) or 5 (permanent failure).
    pub class: u8,
    /// Subject (0-999 in RFC 3463; we only use small values).
    pub subject: u16,
    /// Detail (0-999).
    pub detail: u16,
}

impl EnhancedCode {
    /// Builds an enhanced status code.
    pub const fn new(class: u8, subject: u16, detail: u16) -> Self {
        Self {
            class,
            subject,
            detail,
        }
    }
}

impl fmt::Display for EnhancedCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.class, self.subject, self.detail)
    }
}

/// One SMTP reply: code, optional enhanced status code and text lines.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reply {
    /// The three-digit reply code (200-599 in practice).
    pub code: u16,
    /// The RFC 3463 enhanced status code put in front of every line's text, if any.
    pub enhanced: Option<EnhancedCode>,
    /// The text lines, without code, enhanced code or CRLF. Never empty when parsed.
    pub lines: Vec<String>,
}

impl Reply {
    /// A one-line reply with an enhanced status code.
    pub fn new(code: u16, enhanced: EnhancedCode, text: impl Into<String>) -> Self {
        Self {
            code,
            enhanced: Some(enhanced),
            lines: vec![text.into()],
        }
    }

    /// A one-line reply without an enhanced status code (greeting, HELO/EHLO replies).
    pub fn plain(code: u16, text: impl Into<String>) -> Self {
        Self {
            code,
            enhanced: None,
            lines: vec![text.into()],
        }
    }

    /// True for 2xx replies.
    pub fn is_positive(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// True for 3xx replies (354 after DATA, 334 during AUTH, ...).
    pub fn is_intermediate(&self) -> bool {
        (300..400).contains(&self.code)
    }

    /// True for 4xx replies: the action may succeed later.
    pub fn is_transient(&self) -> bool {
        (400..500).contains(&self.code)
    }

    /// True for 5xx replies: the action will not succeed as it is.
    pub fn is_permanent(&self) -> bool {
        (500..600).contains(&self.code)
    }

    /// The text lines joined with a space, for logs and bounces.
    pub fn text(&self) -> String {
        self.lines.join(" ")
    }

    /// Appends the wire form (every line ending in CRLF) to `out`.
    ///
    /// Text is written as given except that CR, LF and NUL, which would break the reply framing,
    /// are replaced by spaces. A reply without lines is written as one line without text.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let code = self.code.min(999);
        let count = self.lines.len().max(1);
        for i in 0..count {
            let line = self.lines.get(i).map(String::as_str).unwrap_or("");
            out.extend_from_slice(format!("{code:03}").as_bytes());
            out.push(if i + 1 < count { b'-' } else { b' ' });
            if let Some(esc) = self.enhanced {
                out.extend_from_slice(esc.to_string().as_bytes());
                if !line.is_empty() {
                    out.push(b' ');
                }
            }
            out.extend(line.bytes().map(|b| {
                if matches!(b, b'\r' | b'\n' | 0) {
                    b' '
                } else {
                    b
                }
            }));
            out.extend_from_slice(b"\r\n");
        }
    }

    /// The wire form as a new vector.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_to(&mut out);
        out
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code)?;
        if let Some(esc) = self.enhanced {
            write!(f, " {esc}")?;
        }
        write!(f, " {}", self.text())
    }
}

/// Why a reply could not be parsed. The client treats any of these as a broken connection.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReplyError {
    /// A reply line did not start with three digits followed by space, hyphen or line end.
    #[error("malformed reply line (expected three digits then space or hyphen): {0:?}")]
    Malformed(String),
    /// A reply code was outside 200-599.
    #[error("reply code {0} is outside the range 200-599")]
    BadCode(u16),
    /// A continuation line carried a different code from the first line.
    #[error("multi-line reply changed its code from {first} to {other}")]
    CodeChanged {
        /// The code on the first line.
        first: u16,
        /// The different code seen later.
        other: u16,
    },
    /// A reply line was longer than the limit.
    #[error("reply line longer than {0} octets")]
    LineTooLong(usize),
    /// A multi-line reply had more lines than the limit.
    #[error("multi-line reply has more than {0} lines")]
    TooManyLines(usize),
}

/// Incremental parser for replies: feed bytes, pop complete replies.
///
/// Lines end at LF (a preceding CR is removed); bare-LF replies are accepted because being lenient
/// here cannot desynchronise anything. Each line is bounded by `max_line` octets and each reply by
/// `max_lines` lines.
#[derive(Debug)]
pub struct ReplyParser {
    buf: Vec<u8>,
    pending: Option<(u16, Vec<String>)>,
    max_line: usize,
    max_lines: usize,
}

impl Default for ReplyParser {
    fn default() -> Self {
        Self::new(4096, 256)
    }
}

impl ReplyParser {
    /// A parser with the given line length (octets, excluding CRLF) and line count limits.
    pub fn new(max_line: usize, max_lines: usize) -> Self {
        Self {
            buf: Vec::new(),
            pending: None,
            max_line: max_line.max(8),
            max_lines: max_lines.max(1),
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Number of buffered bytes not yet part of a complete reply.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Takes the buffered bytes that are not yet part of a reply (after XLZW they are
    /// compressed and must go through the decoder first).
    pub(crate) fn take_buffered(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// Returns the next complete reply, `Ok(None)` if more bytes are needed.
    pub fn next_reply(&mut self) -> Result<Option<Reply>, ReplyError> {
        // Bounded: every iteration consumes one line from the buffer.
        loop {
            let Some(lf) = self.buf.iter().position(|&b| b == b'\n') else {
                if self.buf.len() > self.max_line + 1 {
                    return Err(ReplyError::LineTooLong(self.max_line));
                }
                return Ok(None);
            };
            let mut line: Vec<u8> = self.buf.drain(..=lf).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.len() > self.max_line {
                return Err(ReplyError::LineTooLong(self.max_line));
            }
            let (code, last, text) = parse_line(&line)?;
            let (first, mut lines) = self.pending.take().unwrap_or((code, Vec::new()));
            if first != code {
                return Err(ReplyError::CodeChanged { first, other: code });
            }
            if lines.len() >= self.max_lines {
                return Err(ReplyError::TooManyLines(self.max_lines));
            }
            lines.push(text);
            if last {
                return Ok(Some(split_enhanced(code, lines)));
            }
            self.pending = Some((code, lines));
        }
    }
}

fn parse_line(line: &[u8]) -> Result<(u16, bool, String), ReplyError> {
    let malformed = || ReplyError::Malformed(String::from_utf8_lossy(line).into_owned());
    let digits = line.get(..3).ok_or_else(malformed)?;
    if !digits.iter().all(u8::is_ascii_digit) {
        return Err(malformed());
    }
    let code = digits
        .iter()
        .fold(0u16, |acc, d| acc * 10 + u16::from(d - b'0'));
    if !(200..600).contains(&code) {
        return Err(ReplyError::BadCode(code));
    }
    let (last, text) = match line.get(3) {
        None => (true, &[][..]),
        Some(b' ') => (true, line.get(4..).unwrap_or(&[])),
        Some(b'-') => (false, line.get(4..).unwrap_or(&[])),
        Some(_) => return Err(malformed()),
    };
    Ok((code, last, String::from_utf8_lossy(text).into_owned()))
}

/// Takes the enhanced status code off the lines if every line carries the same one whose class
/// matches the reply code's first digit.
fn split_enhanced(code: u16, lines: Vec<String>) -> Reply {
    let parsed: Vec<Option<(EnhancedCode, &str)>> =
        lines.iter().map(|l| parse_enhanced(l)).collect();
    let first = parsed.first().copied().flatten();
    if let Some((esc, _)) = first
        && u16::from(esc.class) == code / 100
        && parsed.iter().all(|p| p.map(|(e, _)| e) == Some(esc))
    {
        let lines = parsed
            .iter()
            .flatten()
            .map(|(_, rest)| (*rest).to_owned())
            .collect();
        return Reply {
            code,
            enhanced: Some(esc),
            lines,
        };
    }
    Reply {
        code,
        enhanced: None,
        lines,
    }
}

fn parse_enhanced(text: &str) -> Option<(EnhancedCode, &str)> {
    let (token, rest) = match text.split_once(' ') {
        Some((t, r)) => (t, r),
        None => (text, ""),
    };
    let mut parts = token.split('.');
    let class: u8 = parts.next()?.parse().ok()?;
    let subject: u16 = parts.next()?.parse().ok()?;
    let detail: u16 = parts.next()?.parse().ok()?;
    if parts.next().is_some() || !matches!(class, 2 | 4 | 5) || subject > 999 || detail > 999 {
        return None;
    }
    Some((EnhancedCode::new(class, subject, detail), rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_single_and_multi_line() {
        let r = Reply::new(250, EnhancedCode::new(2, 1, 0), "Ok");
        assert_eq!(r.to_bytes(), b"250 2.1.0 Ok\r\n");
        let r = Reply {
            code: 214,
            enhanced: Some(EnhancedCode::new(2, 0, 0)),
            lines: vec!["a".into(), "b".into()],
        };
        assert_eq!(r.to_bytes(), b"214-2.0.0 a\r\n214 2.0.0 b\r\n");
        let r = Reply::plain(220, "host ESMTP\r\nINJECT");
        assert_eq!(r.to_bytes(), b"220 host ESMTP  INJECT\r\n");
    }

    #[test]
    fn parses_multiline_with_enhanced_codes() {
        let mut p = ReplyParser::default();
        p.push(b"550-5.7.1 Forwarding disabled\r\n550 5.7.1 Use another\r\n250");
        let r = p.next_reply().unwrap().unwrap();
        assert_eq!(r.code, 550);
        assert_eq!(r.enhanced, Some(EnhancedCode::new(5, 7, 1)));
        assert_eq!(r.lines, vec!["Forwarding disabled", "Use another"]);
        assert_eq!(p.next_reply().unwrap(), None);
        p.push(b" ok\n");
        let r = p.next_reply().unwrap().unwrap();
        assert_eq!((r.code, r.enhanced, r.text()), (250, None, "ok".to_owned()));
    }

    #[test]
    fn ehlo_keywords_keep_their_text() {
        let mut p = ReplyParser::default();
        p.push(b"250-mx.example Hello\r\n250-8BITMIME\r\n250 SIZE 1000\r\n");
        let r = p.next_reply().unwrap().unwrap();
        assert_eq!(r.enhanced, None);
        assert_eq!(r.lines, vec!["mx.example Hello", "8BITMIME", "SIZE 1000"]);
    }

    #[test]
    fn rejects_bad_replies() {
        for bad in [&b"25 x\r\n"[..], b"abc\r\n", b"250x\r\n", b"199 x\r\n"] {
            let mut p = ReplyParser::default();
            p.push(bad);
            assert!(p.next_reply().is_err(), "{bad:?}");
        }
        let mut p = ReplyParser::default();
        p.push(b"250-a\r\n251 b\r\n");
        assert_eq!(
            p.next_reply(),
            Err(ReplyError::CodeChanged {
                first: 250,
                other: 251
            })
        );
        let mut p = ReplyParser::new(16, 2);
        p.push(&[b'2'; 40]);
        assert_eq!(p.next_reply(), Err(ReplyError::LineTooLong(16)));
        let mut p = ReplyParser::new(16, 2);
        p.push(b"250-a\r\n250-b\r\n250 c\r\n");
        assert_eq!(p.next_reply(), Err(ReplyError::TooManyLines(2)));
    }
}
