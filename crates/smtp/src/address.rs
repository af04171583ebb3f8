//! Reverse and forward paths that smtp-proto's parser refuses but that are valid: RFC 5321
//! address literals (`user@[192.0.2.1]`, `user@[IPv6:2001:db8::1]`, `user@[tag:content]`) and
//! UUCP bang paths without `@` (`host!user`, as gateways to old HF and packet systems still
//! write them).
//!
//! The server session tries these forms only after smtp-proto has refused the address. A valid
//! one is replaced in the command line by a placeholder smtp-proto accepts, so that the
//! parameters (`SIZE=`, `BODY=`, ...) are still parsed there, and the real address is put back
//! in the parsed request. Whether such an address is *routed* is the [`crate::Policy`]'s
//! decision: this module only decides that it is well formed. Anything else keeps its `501`.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Stands in for the real address while smtp-proto parses the parameters.
pub(crate) const PLACEHOLDER: &str = "placeholder@placeholder.invalid";

/// Longest path accepted (RFC 5321 section 4.5.3.1.3: 256 octets including the brackets).
const MAX_PATH: usize = 256;

/// For a `MAIL FROM:<...>` or `RCPT TO:<...>` line (without CRLF) whose path is one of the forms
/// above: the line with the path replaced by [`PLACEHOLDER`], and the address (source route
/// removed) to use instead.
pub(crate) fn rewrite_path(line: &[u8]) -> Option<(Vec<u8>, String)> {
    let prefix_len = ["MAIL FROM:", "RCPT TO:"].iter().find_map(|p| {
        let head = line.get(..p.len())?;
        head.eq_ignore_ascii_case(p.as_bytes()).then_some(p.len())
    })?;
    let mut open = prefix_len;
    // Some clients put a space after the colon; smtp-proto accepts that, so do we.
    while line.get(open) == Some(&b' ') {
        open += 1;
    }
    if line.get(open) != Some(&b'<') {
        return None;
    }
    let close = closing_bracket(line, open + 1)?;
    let path = std::str::from_utf8(&line[open + 1..close]).ok()?;
    if path.len() + 2 > MAX_PATH {
        return None;
    }
    let address = valid_path(path)?;
    let mut rewritten = Vec::with_capacity(line.len());
    rewritten.extend_from_slice(&line[..=open]);
    rewritten.extend_from_slice(PLACEHOLDER.as_bytes());
    rewritten.extend_from_slice(&line[close..]);
    Some((rewritten, address.to_owned()))
}

/// The index of the `>` closing the path, skipping quoted strings.
fn closing_bracket(line: &[u8], from: usize) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, &b) in line.iter().enumerate().skip(from) {
        if escaped {
            escaped = false;
        } else if quoted && b == b'\\' {
            escaped = true;
        } else if b == b'"' {
            quoted = !quoted;
        } else if b == b'>' && !quoted {
            return Some(i);
        }
    }
    None
}

/// Checks a path (between the angle brackets) and returns the mailbox without source route.
fn valid_path(path: &str) -> Option<&str> {
    let mailbox = strip_source_route(path)?;
    match split_at_sign(mailbox) {
        Some((local, domain)) => (valid_local_part(local)
            && (valid_domain(domain) || valid_address_literal(domain)))
        .then_some(mailbox),
        None => valid_bang_path(mailbox).then_some(mailbox),
    }
}

/// Removes an RFC 5321 source route (`@a.example,@b.example:`), which servers must accept and
/// may ignore (RFC 5321 section 4.1.1.3 and appendix C).
fn strip_source_route(path: &str) -> Option<&str> {
    if !path.starts_with('@') {
        return Some(path);
    }
    let mut rest = path;
    // Bounded: every pass consumes one "@domain" hop of `rest`.
    while let Some(hop) = rest.strip_prefix('@') {
        let end = hop.find([',', ':'])?;
        let domain = &hop[..end];
        if !(valid_domain(domain) || valid_address_literal(domain)) {
            return None;
        }
        let sep = hop.as_bytes()[end];
        rest = &hop[end + 1..];
        if sep == b':' {
            return Some(rest);
        }
    }
    None
}

/// Splits at the last `@` outside a quoted string.
fn split_at_sign(mailbox: &str) -> Option<(&str, &str)> {
    let mut quoted = false;
    let mut escaped = false;
    let mut at = None;
    for (i, b) in mailbox.bytes().enumerate() {
        if escaped {
            escaped = false;
        } else if quoted && b == b'\\' {
            escaped = true;
        } else if b == b'"' {
            quoted = !quoted;
        } else if b == b'@' && !quoted {
            at = Some(i);
        }
    }
    at.map(|i| (&mailbox[..i], &mailbox[i + 1..]))
}

fn is_atext(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~".contains(&b)
}

/// RFC 5321 Dot-string: atoms of atext joined by single dots.
fn valid_dot_string(s: &str) -> bool {
    !s.is_empty()
        && s.split('.')
            .all(|atom| !atom.is_empty() && atom.bytes().all(is_atext))
}

/// RFC 5321 Quoted-string: qtextSMTP or quoted pairs of printable ASCII between quotes.
fn valid_quoted_string(s: &str) -> bool {
    let Some(inner) = s.strip_prefix('"').and_then(|r| r.strip_suffix('"')) else {
        return false;
    };
    if s.len() < 2 {
        return false;
    }
    let mut escaped = false;
    for b in inner.bytes() {
        if escaped {
            if !(32..=126).contains(&b) {
                return false;
            }
            escaped = false;
        } else if b == b'\\' {
            escaped = true;
        } else if !(b == 32 || b == 33 || (35..=91).contains(&b) || (93..=126).contains(&b)) {
            return false;
        }
    }
    !escaped
}

fn valid_local_part(s: &str) -> bool {
    s.len() <= 64 && (valid_dot_string(s) || valid_quoted_string(s))
}

/// RFC 5321 Domain: sub-domains of letters, digits and inner hyphens.
fn valid_domain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s.split('.').all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes.len() <= 63
                && bytes
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || b == b'-')
                && bytes.first() != Some(&b'-')
                && bytes.last() != Some(&b'-')
        })
}

/// RFC 5321 address-literal: `[IPv4]`, `[IPv6:...]` or `[tag:content]`.
fn valid_address_literal(s: &str) -> bool {
    let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) else {
        return false;
    };
    if let Some((tag, rest)) = inner.split_once(':') {
        if tag.eq_ignore_ascii_case("IPv6") {
            return rest.parse::<Ipv6Addr>().is_ok();
        }
        // General-address-literal: Standardized-tag ":" 1*dcontent.
        let tag_ok = !tag.is_empty()
            && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !tag.ends_with('-');
        let content_ok = !rest.is_empty()
            && rest
                .bytes()
                .all(|b| (33..=90).contains(&b) || (94..=126).contains(&b));
        return tag_ok && content_ok;
    }
    inner.parse::<Ipv4Addr>().is_ok()
}

/// A UUCP bang path: at least a host and a user, each a dot-string without `!`.
fn valid_bang_path(s: &str) -> bool {
    let mut parts = 0usize;
    for part in s.split('!') {
        if !valid_dot_string(part) {
            return false;
        }
        parts += 1;
    }
    parts >= 2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(line: &str) -> Option<(String, String)> {
        rewrite_path(line.as_bytes()).map(|(l, a)| (String::from_utf8(l).unwrap_or_default(), a))
    }

    #[test]
    fn address_literals_and_bang_paths_are_rewritten() {
        assert_eq!(
            rewritten("RCPT TO:<host!user>"),
            Some((format!("RCPT TO:<{PLACEHOLDER}>"), "host!user".to_owned()))
        );
        assert_eq!(
            rewritten("rcpt to:<a.b!c!user.name>").map(|x| x.1),
            Some("a.b!c!user.name".to_owned())
        );
        assert_eq!(
            rewritten("MAIL FROM:<user@[192.0.2.1]> SIZE=10"),
            Some((
                format!("MAIL FROM:<{PLACEHOLDER}> SIZE=10"),
                "user@[192.0.2.1]".to_owned()
            ))
        );
        assert_eq!(
            rewritten("RCPT TO:<user@[IPv6:2001:db8::1]>").map(|x| x.1),
            Some("user@[IPv6:2001:db8::1]".to_owned())
        );
        assert_eq!(
            rewritten("RCPT TO:<user@[ipv6:::ffff:192.0.2.1]>").map(|x| x.1),
            Some("user@[ipv6:::ffff:192.0.2.1]".to_owned())
        );
        assert_eq!(
            rewritten("RCPT TO:<\"a b\"@[192.0.2.1]>").map(|x| x.1),
            Some("\"a b\"@[192.0.2.1]".to_owned())
        );
        assert_eq!(
            rewritten("RCPT TO:<@relay.example,@[192.0.2.9]:user@[192.0.2.1]>").map(|x| x.1),
            Some("user@[192.0.2.1]".to_owned())
        );
        assert_eq!(
            rewritten("RCPT TO:<user@[x-tag:some-content]>").map(|x| x.1),
            Some("user@[x-tag:some-content]".to_owned())
        );
    }

    #[test]
    fn malformed_paths_are_not_rewritten() {
        for line in [
            "RCPT TO:<user@[192.0.2.256]>",
            "RCPT TO:<user@[192.0.2.1>",
            "RCPT TO:<user@[IPv6:2001:db8::g]>",
            "RCPT TO:<user@[]>",
            "RCPT TO:<user@[tag:]>",
            "RCPT TO:<user@[tag:a[b]>",
            "RCPT TO:<!user>",
            "RCPT TO:<host!>",
            "RCPT TO:<host!!user>",
            "RCPT TO:<user>",
            "RCPT TO:<host!us er>",
            "RCPT TO:<a..b@[192.0.2.1]>",
            "RCPT TO:<@[192.0.2.1]>",
            "RCPT TO:<user@-bad.example>",
            "RCPT TO:<@relay.example:host!>",
            "RCPT TO:host!user",
            "RCPT TO:<host!user",
            "NOOP <host!user>",
            "RCPT TO:<\"unterminated@[192.0.2.1]>",
        ] {
            assert_eq!(rewritten(line), None, "{line}");
        }
        let long = format!("RCPT TO:<{}!user>", "h".repeat(300));
        assert_eq!(rewritten(&long), None);
    }
}
