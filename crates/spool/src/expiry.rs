//! A message's own expiry time: the `Expires:` and `Expiry-Date:` header fields.
//!
//! RFC 4021 (2.1.49 and 2.1.51) registers both, from RFC 2156's mapping of X.400's expiry time:
//! the time at which the message loses its validity. Military messaging sets it on what is worth
//! nothing late (a weather report, a position, an order overtaken by the next), and on HF the
//! airtime such a message would take after an outage is airtime the rest of the queue needs. So
//! the spool takes the earlier of the message's expiry and its own lifetime as the time the
//! message expires ([`crate::Spool::enqueue`]): from then it is never due for sending, and the
//! next expiry sweep fails its remaining recipients with `5.4.7` (RFC 3463: delivery time
//! expired) and a DSN to the sender. Every gateway on the way does the same, since the header
//! travels with the message.
//!
//! The dates are RFC 5322 date-times (section 3.3), with the obsolete forms of section 4.3 that
//! old mail systems still write (two-digit years, alphabetic zones, seconds left out, comments
//! and folding white space between the tokens), read by mail-parser's `Date:` reader, which is
//! lenient as a mail reader must be: it takes "31 Nov" for 1 December and ignores what follows
//! the zone. A date it cannot read is ignored (the message keeps the spool's lifetime), never a
//! reason to refuse mail.

use crate::priority::header_value;

/// The header fields read, in order; the earliest date wins.
const FIELDS: [&str; 2] = ["Expires", "Expiry-Date"];

/// The earliest expiry time the message states (unix seconds), if any parses. Times before
/// 1970 read as 0: expired.
pub fn message_expiry(message: &[u8]) -> Option<u64> {
    FIELDS
        .iter()
        .filter_map(|f| header_value(message, f))
        .filter_map(|v| parse_date_time(&v))
        .map(|t| u64::try_from(t).unwrap_or(0))
        .min()
}

/// Parses an RFC 5322 date-time (obsolete forms included) into unix seconds, with
/// mail-parser's reader of `Date:` fields; `None` for what is not a valid date (years outside
/// 1900-3000 included).
pub fn parse_date_time(text: &str) -> Option<i64> {
    if text.len() > MAX_DATE || short_year(text) {
        return None;
    }
    mail_parser::DateTime::parse_rfc822(text)
        .filter(mail_parser::DateTime::is_valid)
        .map(|d| d.to_timestamp())
}

/// Whether the year after the month name has a single digit. RFC 5322 allows four or more
/// digits, and two or three in the obsolete form (section 4.3); mail-parser reads "1 Jan 5" as
/// 2005, so a mistyped expiry would bounce the message at once. It is no date: ignored.
fn short_year(text: &str) -> bool {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let mut tokens = text
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|t| !t.is_empty());
    while let Some(t) = tokens.next() {
        if MONTHS.iter().any(|m| t.eq_ignore_ascii_case(m)) {
            return tokens
                .next()
                .is_some_and(|y| y.len() == 1 && y.bytes().all(|b| b.is_ascii_digit()));
        }
    }
    false
}

/// Longest date-time looked at; any real one is under 100 bytes.
const MAX_DATE: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc_5322s_own_examples_parse() {
        // Appendix A.1.1 and A.1.2 (with their zones), A.6.3 (obsolete white space and a
        // comment), and the examples of 4.3's obsolete forms.
        let cases = [
            ("Fri, 21 Nov 1997 09:55:06 -0600", 880_127_706),
            ("Tue, 1 Jul 2003 10:52:37 +0200", 1_057_049_557),
            ("Thu, 13 Feb 1969 23:32:54 -0330", -27_723_426),
            (
                "Thu,\r\n      13\r\n        Feb\r\n          1969\r\n      23:32\r\n               -0330 (Newfoundland Time)",
                -27_723_480,
            ),
            ("21 Nov 97 09:55:06 GMT", 880_106_106),
            ("Fri, 21 Nov 097 09:55:06 EST", 880_124_106),
            ("1 Jan 2030 00:00 +0000", 1_893_456_000),
            ("sun, 29 feb 2032 12:00:59 ut", 1_961_668_859),
        ];
        for (text, unix) in cases {
            assert_eq!(parse_date_time(text), Some(unix), "{text}");
        }
    }

    #[test]
    fn what_is_not_a_date_time_reads_as_none() {
        for text in [
            "",
            "tomorrow",
            "Fri, 21 Nov 1997",
            "Fri, 21 Nov 1997 24:00:00 -0600",
            "Fri, 21 Nov 1997 09:61:00 -0600",
            "1 Jan 3001 00:00 +0000",
            "1 Jan 1899 00:00 +0000",
            // A one-digit year (mail-parser alone reads it as 2005).
            "Tue, 1 Jul 5 10:52:37 +0200",
            "1 JAN 7 00:00 GMT",
        ] {
            assert_eq!(parse_date_time(text), None, "{text:?}");
        }
        assert_eq!(parse_date_time(&"1".repeat(MAX_DATE + 1)), None);
    }

    #[test]
    fn the_earliest_of_the_messages_expiry_fields_counts() {
        let m = b"Subject: wx\r\nExpiry-Date: Tue, 1 Jul 2003 10:52:37 +0200\r\n\
            Expires: Tue, 1 Jul 2003 11:52:37 +0200\r\n\r\nExpires: 1 Jan 1990 00:00 +0000\r\n";
        assert_eq!(message_expiry(m), Some(1_057_049_557));
        // Only the header block counts, and a field that does not parse is ignored.
        let late = b"Subject: wx\r\nExpires: soon\r\n\r\nExpires: 1 Jan 1990 00:00 +0000\r\n";
        assert_eq!(message_expiry(late), None);
        assert_eq!(message_expiry(b"Subject: none\r\n\r\n"), None);
        // Folded, with a comment, before 1970.
        let old = b"Expires: Thu, 13 Feb 1969\r\n 23:32:54 -0330 (long ago)\r\n\r\n";
        assert_eq!(message_expiry(old), Some(0));
    }

    proptest! {
        #[test]
        // Up to the end of 3000, mail-parser's last valid year.
        fn the_dates_the_spool_writes_read_back(unix in 0u64..32_535_215_999) {
            let text = crate::dsn::rfc5322_date(unix);
            prop_assert_eq!(parse_date_time(&text), Some(unix as i64), "{}", text);
        }

        #[test]
        fn any_text_parses_or_not_without_a_panic(text in ".{0,300}") {
            let _ = parse_date_time(&text);
        }
    }
}
