//! Message priority: one scale for MT-PRIORITY (RFC 6710), MMHS-Primary-Precedence (RFC 6758)
//! and the routing table's per-peer default.
//!
//! The common scale is RFC 6710's: an integer from -9 (lowest) to 9 (highest), 0 being normal.
//! It orders a peer's HF queue (higher first, then older first) and is what the gateway maps to
//! the STANAG 5066 U_PDU priority.
//!
//! RFC 6758 precedences map onto that scale as RFC 6710's "MMHS" priority profile does
//! (section 9.2 there), leaving room between the levels:
//!
//! | MMHS-Primary-Precedence | name      | priority |
//! |-------------------------|-----------|----------|
//! | 0                       | deferred  | -4       |
//! | 1                       | routine   | -2       |
//! | 2                       | priority  | 0        |
//! | 3                       | immediate | 2        |
//! | 4                       | flash     | 4        |
//! | 5                       | override  | 6        |
//!
//! Other values (6-239 reserved, 240-255 national use) have no agreed meaning and are ignored.
//! Which source wins: MT-PRIORITY given with MAIL FROM (the transfer priority the submitter
//! asked for), else the header, else the route's default.

use std::fmt;

/// A priority on RFC 6710's scale, -9 to 9 (higher is more urgent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Priority(i8);

impl Priority {
    /// The lowest priority, -9.
    pub const LOWEST: Priority = Priority(-9);
    /// Normal priority, 0 (also MMHS "priority").
    pub const NORMAL: Priority = Priority(0);
    /// The highest priority, 9.
    pub const HIGHEST: Priority = Priority(9);

    /// A priority from its value; `None` outside -9..=9.
    pub fn new(value: i8) -> Option<Priority> {
        (-9..=9).contains(&value).then_some(Priority(value))
    }

    /// The value, -9..=9.
    pub fn value(self) -> i8 {
        self.0
    }

    /// Parses the value of the `MT-PRIORITY=` MAIL FROM parameter (RFC 6710: an optional sign
    /// and one digit).
    pub fn parse_mt_priority(param: &str) -> Option<Priority> {
        let bytes = param.trim().as_bytes();
        let (negative, digits) = match bytes {
            [b'-', rest @ ..] => (true, rest),
            [b'+', rest @ ..] => (false, rest),
            rest => (false, rest),
        };
        match digits {
            [d] if d.is_ascii_digit() => {
                let v = (d - b'0') as i8;
                Priority::new(if negative { -v } else { v })
            }
            _ => None,
        }
    }

    /// Maps an RFC 6758 primary precedence (0 deferred .. 5 override) onto the common scale.
    pub fn from_mmhs_precedence(precedence: u8) -> Option<Priority> {
        match precedence {
            0..=5 => Some(Priority(precedence as i8 * 2 - 4)),
            _ => None,
        }
    }

    /// Decides a message's priority: MT-PRIORITY if given, else the message's
    /// `MMHS-Primary-Precedence` header if valid, else the route's default.
    pub fn resolve(
        mt_priority: Option<Priority>,
        message: &[u8],
        route_default: Priority,
    ) -> Priority {
        mt_priority
            .or_else(|| mmhs_primary_precedence(message).and_then(Priority::from_mmhs_precedence))
            .unwrap_or(route_default)
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Most bytes of a message searched for its header block.
pub const MAX_HEADER_SCAN: usize = 64 * 1024;

/// The header block of a message: everything before the first empty line, at most
/// [`MAX_HEADER_SCAN`] bytes, cut after the last complete line if the limit is reached.
pub fn header_block(message: &[u8]) -> &[u8] {
    let limit = message.len().min(MAX_HEADER_SCAN);
    let scan = &message[..limit];
    let mut line_start = 0;
    while line_start < scan.len() {
        let Some(nl) = scan[line_start..].iter().position(|&b| b == b'\n') else {
            // An unterminated last line: all of it if the message ends here, else drop it.
            return if limit == message.len() {
                scan
            } else {
                &scan[..line_start]
            };
        };
        let line = &scan[line_start..line_start + nl];
        if line.is_empty() || line == b"\r" {
            return &scan[..line_start];
        }
        line_start += nl + 1;
    }
    &scan[..line_start]
}

/// The unfolded value of the first header field called `name` (case-insensitive), searched in
/// the bounded header block. Bytes that are not UTF-8 are replaced.
pub fn header_value(message: &[u8], name: &str) -> Option<String> {
    let block = header_block(message);
    let mut value: Option<Vec<u8>> = None;
    for raw in block.split(|&b| b == b'\n') {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if let Some(v) = value.as_mut() {
            if line.first().is_some_and(|&b| b == b' ' || b == b'\t') {
                v.push(b' ');
                v.extend_from_slice(line.trim_ascii());
                continue;
            }
            break;
        }
        if let Some(colon) = line.iter().position(|&b| b == b':') {
            let field = line[..colon].trim_ascii_end();
            if field.eq_ignore_ascii_case(name.as_bytes()) {
                value = Some(line[colon + 1..].trim_ascii().to_vec());
            }
        }
    }
    value.map(|v| String::from_utf8_lossy(&v).into_owned())
}

/// The value of the message's `MMHS-Primary-Precedence` header (RFC 6758: a number, possibly
/// with comments), if present and a number 0..=255.
pub fn mmhs_primary_precedence(message: &[u8]) -> Option<u8> {
    let value = header_value(message, "MMHS-Primary-Precedence")?;
    // Drop RFC 5322 comments (not nested deeper than the scan needs: depth counting).
    let mut depth = 0u32;
    let mut bare = String::new();
    for c in value.chars() {
        match c {
            '(' => depth = depth.saturating_add(1),
            ')' => depth = depth.saturating_sub(1),
            c if depth == 0 => bare.push(c),
            _ => {}
        }
    }
    let bare = bare.trim();
    if bare.is_empty() || bare.len() > 3 || !bare.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    bare.parse::<u8>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt_priority_values() {
        assert_eq!(Priority::parse_mt_priority("3"), Priority::new(3));
        assert_eq!(Priority::parse_mt_priority("-9"), Priority::new(-9));
        assert_eq!(Priority::parse_mt_priority("+2"), Priority::new(2));
        assert_eq!(Priority::parse_mt_priority("10"), None);
        assert_eq!(Priority::parse_mt_priority("-"), None);
        assert_eq!(Priority::parse_mt_priority("x"), None);
        assert_eq!(Priority::new(10), None);
    }

    #[test]
    fn mmhs_mapping_is_the_rfc6710_profile() {
        let mapped: Vec<i8> = (0..=5)
            .map(|p| {
                Priority::from_mmhs_precedence(p)
                    .map(Priority::value)
                    .unwrap_or(99)
            })
            .collect();
        assert_eq!(mapped, [-4, -2, 0, 2, 4, 6]);
        assert_eq!(Priority::from_mmhs_precedence(6), None);
    }

    #[test]
    fn header_scan_finds_folded_header_with_comment() {
        let msg = b"From: a@b\r\nMMHS-Primary-Precedence:\r\n  4 (flash)\r\nSubject: x\r\n\r\nMMHS-Primary-Precedence: 0\r\n";
        assert_eq!(mmhs_primary_precedence(msg), Some(4));
        assert_eq!(header_value(msg, "subject").as_deref(), Some("x"));
        // A header-like line in the body is not a header.
        let body_only = b"From: a@b\n\nMMHS-Primary-Precedence: 5\n";
        assert_eq!(mmhs_primary_precedence(body_only), None);
    }

    #[test]
    fn resolve_order() {
        let msg = b"MMHS-Primary-Precedence: 5\r\n\r\nbody";
        let default = Priority::new(-1).unwrap_or_default();
        assert_eq!(
            Priority::resolve(Priority::new(-3), msg, default).value(),
            -3
        );
        assert_eq!(Priority::resolve(None, msg, default).value(), 6);
        assert_eq!(
            Priority::resolve(None, b"Subject: x\r\n\r\n", default),
            default
        );
        assert_eq!(
            Priority::resolve(None, b"MMHS-Primary-Precedence: 77\r\n\r\n", default),
            default
        );
    }

    #[test]
    fn header_scan_is_bounded() {
        let mut msg = Vec::new();
        for _ in 0..20_000 {
            msg.extend_from_slice(b"X-Filler: 0123456789\r\n");
        }
        msg.extend_from_slice(b"MMHS-Primary-Precedence: 5\r\n\r\n");
        assert!(header_block(&msg).len() <= MAX_HEADER_SCAN);
        assert_eq!(mmhs_primary_precedence(&msg), None);
    }
}
