//! The `Received:` trace header (RFC 5321 section 4.4) that the owner of a server session prepends
//! to every accepted message, and the RFC 5322 date it ends with.
//!
//! Pure formatting: the time is passed in as seconds since the Unix epoch plus the local offset,
//! so nothing here reads a clock.

use std::net::IpAddr;

/// How the message came in, the `with` clause of the header (RFC 3848).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HELO, no extensions.
    Smtp,
    /// EHLO.
    Esmtp,
    /// EHLO over TLS.
    Esmtps,
    /// EHLO with successful AUTH.
    Esmtpa,
    /// EHLO over TLS with successful AUTH.
    Esmtpsa,
    /// SMTPUTF8 (RFC 6531 section 3.7.3), then as the four above without it.
    Utf8Smtp,
    /// SMTPUTF8 over TLS.
    Utf8Smtps,
    /// SMTPUTF8 with successful AUTH.
    Utf8Smtpa,
    /// SMTPUTF8 over TLS with successful AUTH.
    Utf8Smtpsa,
}

impl Protocol {
    /// Picks the protocol name from what the session saw.
    pub fn from_session(esmtp: bool, tls: bool, authenticated: bool) -> Self {
        match (esmtp, tls, authenticated) {
            (false, _, _) => Self::Smtp,
            (true, false, false) => Self::Esmtp,
            (true, true, false) => Self::Esmtps,
            (true, false, true) => Self::Esmtpa,
            (true, true, true) => Self::Esmtpsa,
        }
    }

    /// The protocol with SMTPUTF8 in use when `utf8` (RFC 6531 registers `UTF8SMTP`, `...S`,
    /// `...A` and `...SA` for the `with` clause); unchanged otherwise, and for plain HELO,
    /// which cannot carry it.
    pub fn utf8(self, utf8: bool) -> Self {
        match (utf8, self) {
            (false, p) | (true, p @ Self::Smtp) => p,
            (true, Self::Esmtp | Self::Utf8Smtp) => Self::Utf8Smtp,
            (true, Self::Esmtps | Self::Utf8Smtps) => Self::Utf8Smtps,
            (true, Self::Esmtpa | Self::Utf8Smtpa) => Self::Utf8Smtpa,
            (true, Self::Esmtpsa | Self::Utf8Smtpsa) => Self::Utf8Smtpsa,
        }
    }

    /// The keyword written in the header.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Smtp => "SMTP",
            Self::Esmtp => "ESMTP",
            Self::Esmtps => "ESMTPS",
            Self::Esmtpa => "ESMTPA",
            Self::Esmtpsa => "ESMTPSA",
            Self::Utf8Smtp => "UTF8SMTP",
            Self::Utf8Smtps => "UTF8SMTPS",
            Self::Utf8Smtpa => "UTF8SMTPA",
            Self::Utf8Smtpsa => "UTF8SMTPSA",
        }
    }
}

/// A moment given by the caller: seconds since 1970-01-01T00:00:00Z and the UTC offset to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateTime {
    /// Seconds since the Unix epoch (UTC).
    pub unix_seconds: i64,
    /// Offset of the printed local time from UTC, in minutes (-1439..=1439).
    pub offset_minutes: i16,
}

/// What goes into one `Received:` header.
#[derive(Debug, Clone, Copy)]
pub struct ReceivedInfo<'a> {
    /// The name the client gave in HELO/EHLO.
    pub helo: &'a str,
    /// The client's address, if it came over IP (absent over HMTP, where the 5066 address goes
    /// into `client_name`).
    pub client_ip: Option<IpAddr>,
    /// A verified name or other identification of the client (reverse DNS, 5066 node address).
    pub client_name: Option<&'a str>,
    /// Our own host name.
    pub by_host: &'a str,
    /// The protocol keyword.
    pub protocol: Protocol,
    /// Our queue id for the message.
    pub queue_id: &'a str,
    /// The envelope recipients; named in a `for` clause only when there is exactly one.
    pub recipients: &'a [String],
    /// When the message was received.
    pub date: DateTime,
}

/// Builds the header, folded at clause boundaries, ending in CRLF.
///
/// Values that came from the client are cleaned so that they cannot break out of the header: any
/// octet other than printable ASCII becomes `?`, and over-long values are cut.
pub fn received_header(info: &ReceivedInfo<'_>) -> String {
    let mut from = format!("from {}", clean(info.helo, 255));
    let mut paren = Vec::new();
    if let Some(name) = info.client_name {
        paren.push(clean(name, 255));
    }
    if let Some(ip) = info.client_ip {
        paren.push(match ip {
            IpAddr::V4(v4) => format!("[{v4}]"),
            IpAddr::V6(v6) => format!("[IPv6:{v6}]"),
        });
    }
    if !paren.is_empty() {
        from.push_str(&format!(" ({})", paren.join(" ")));
    }
    let mut out = format!(
        "Received: {from}\r\n\tby {} (skywave) with {} id {}\r\n\t",
        clean(info.by_host, 255),
        info.protocol.as_str(),
        clean(info.queue_id, 128)
    );
    if let [rcpt] = info.recipients {
        out.push_str(&format!("for <{}>; ", clean(rcpt, 320)));
    }
    out.push_str(&rfc5322_date(info.date));
    out.push_str("\r\n");
    out
}

fn clean(value: &str, max: usize) -> String {
    let cleaned: String = value
        .chars()
        .take(max)
        .map(|c| {
            // Parentheses, angle brackets and ';' would confuse the header's own structure;
            // square brackets stay for address literals such as `[192.0.2.1]`.
            if c.is_ascii_graphic() && !matches!(c, '(' | ')' | '<' | '>' | ';') {
                c
            } else {
                '?'
            }
        })
        .collect();
    if cleaned.is_empty() {
        "unknown".to_owned()
    } else {
        cleaned
    }
}

/// Formats a date as RFC 5322 section 3.3 wants it, e.g. `Sun, 22 Nov 2026 02:07:16 +0000`.
pub fn rfc5322_date(date: DateTime) -> String {
    let offset = i64::from(date.offset_minutes.clamp(-1439, 1439));
    let local = date.unix_seconds.saturating_add(offset * 60);
    let days = local.div_euclid(86_400);
    let secs = local.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    // 1970-01-01 was a Thursday.
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][days.rem_euclid(7) as usize];
    let month_name = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][(month - 1) as usize];
    let sign = if offset < 0 { '-' } else { '+' };
    format!(
        "{weekday}, {day} {month_name} {year:04} {:02}:{:02}:{:02} {sign}{:02}{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        offset.abs() / 60,
        offset.abs() % 60
    )
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31), proleptic Gregorian calendar
/// (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smtputf8_names_the_utf8_protocols_of_rfc_6531() {
        let names: Vec<&str> = [
            Protocol::Smtp,
            Protocol::Esmtp,
            Protocol::Esmtps,
            Protocol::Esmtpa,
            Protocol::Esmtpsa,
        ]
        .iter()
        .map(|p| p.utf8(true).as_str())
        .collect();
        assert_eq!(
            names,
            ["SMTP", "UTF8SMTP", "UTF8SMTPS", "UTF8SMTPA", "UTF8SMTPSA"]
        );
        assert_eq!(Protocol::Esmtps.utf8(false), Protocol::Esmtps);
        assert_eq!(Protocol::Utf8Smtpa.utf8(true), Protocol::Utf8Smtpa);
    }

    #[test]
    fn dates() {
        let d = |unix_seconds, offset_minutes| {
            rfc5322_date(DateTime {
                unix_seconds,
                offset_minutes,
            })
        };
        assert_eq!(d(0, 0), "Thu, 1 Jan 1970 00:00:00 +0000");
        assert_eq!(d(1_795_313_236, 0), "Sun, 22 Nov 2026 02:07:16 +0000");
        assert_eq!(d(951_782_400, 0), "Tue, 29 Feb 2000 00:00:00 +0000");
        assert_eq!(d(0, -330), "Wed, 31 Dec 1969 18:30:00 -0530");
        assert_eq!(d(-1, 60), "Thu, 1 Jan 1970 00:59:59 +0100");
    }

    #[test]
    fn header_with_single_recipient() {
        let rcpts = vec!["bob@ship.example".to_owned()];
        let h = received_header(&ReceivedInfo {
            helo: "client.lan",
            client_ip: Some("192.0.2.7".parse().unwrap()),
            client_name: None,
            by_host: "gw.ship.example",
            protocol: Protocol::Esmtps,
            queue_id: "Q123",
            recipients: &rcpts,
            date: DateTime {
                unix_seconds: 1_795_313_236,
                offset_minutes: 0,
            },
        });
        assert_eq!(
            h,
            "Received: from client.lan ([192.0.2.7])\r\n\tby gw.ship.example (skywave) with \
             ESMTPS id Q123\r\n\tfor <bob@ship.example>; Sun, 22 Nov 2026 02:07:16 +0000\r\n"
        );
    }

    #[test]
    fn address_literals_survive() {
        let h = received_header(&ReceivedInfo {
            helo: "[192.0.2.1]",
            client_ip: None,
            client_name: None,
            by_host: "gw",
            protocol: Protocol::Esmtpa,
            queue_id: "Q",
            recipients: &[],
            date: DateTime {
                unix_seconds: 0,
                offset_minutes: 0,
            },
        });
        assert!(h.starts_with("Received: from [192.0.2.1]\r\n\tby gw (skywave) with ESMTPA"));
    }

    #[test]
    fn header_cleans_hostile_values() {
        let rcpts = vec!["a@x".to_owned(), "b@x".to_owned()];
        let h = received_header(&ReceivedInfo {
            helo: "evil\r\nBcc: x",
            client_ip: Some("2001:db8::1".parse().unwrap()),
            client_name: Some("node 0.0.1.5"),
            by_host: "gw",
            protocol: Protocol::Smtp,
            queue_id: "Q",
            recipients: &rcpts,
            date: DateTime {
                unix_seconds: 0,
                offset_minutes: 0,
            },
        });
        assert_eq!(
            h,
            "Received: from evil??Bcc:?x (node?0.0.1.5 [IPv6:2001:db8::1])\r\n\tby gw (skywave) \
             with SMTP id Q\r\n\tThu, 1 Jan 1970 00:00:00 +0000\r\n"
        );
    }
}
