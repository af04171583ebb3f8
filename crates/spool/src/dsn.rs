//! Delivery status notifications (RFC 3464) for recipients that failed for good or whose
//! sender asked to hear of their delivery (RFC 3461 `NOTIFY=SUCCESS`), and delay warnings for
//! recipients still being retried long after the message came in. Each carries what the sender
//! gave to identify it: `ENVID` as `Original-Envelope-Id`, `ORCPT` as `Original-Recipient`.
//!
//! The spool builds the DSN when a message is complete and some recipients failed (including by
//! expiry), and a delay warning once per message that waits longer than
//! [`crate::SpoolConfig::delay_warning`]; the gateway routes either to the original sender like
//! any other message. It is sent with the null reverse path, and no DSN is ever made for a
//! message whose own sender is null, so two gateways can never bounce a bounce back and forth.

use crate::priority::header_block;
use crate::record::{Recipient, Success};

/// One recipient, as reported in the DSN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DsnRecipient {
    /// The recipient address (Final-Recipient).
    pub address: String,
    /// The address as the sender first gave it (`ORCPT`, reported as Original-Recipient).
    pub original: Option<String>,
    /// `Some`: it was delivered or relayed, and this is a success report on it; `status` and
    /// `diagnostic` are then not used. `None`: it failed or is delayed, as the request says.
    pub success: Option<Success>,
    /// RFC 3463 status, e.g. `5.1.1`; anything that is not `d.d.d` with class 4 or 5 is reported
    /// as `5.0.0`.
    pub status: String,
    /// Diagnostic text: the remote SMTP reply or our own explanation.
    pub diagnostic: String,
    /// Time of the last attempt (unix seconds), if any was made.
    pub last_attempt: Option<u64>,
}

impl DsnRecipient {
    /// `r`'s address, original address and last attempt, with no status yet.
    pub fn of(r: &Recipient) -> DsnRecipient {
        DsnRecipient {
            address: r.address.clone(),
            original: r.dsn.orcpt.clone(),
            success: None,
            status: String::new(),
            diagnostic: String::new(),
            last_attempt: (r.last_attempt > 0).then_some(r.last_attempt),
        }
    }
}

/// What a DSN reports on.
#[derive(Clone, Debug)]
pub struct DsnRequest<'a> {
    /// Host name of this gateway (Reporting-MTA and the From address's domain).
    pub reporting_mta: &'a str,
    /// Queue id of the original message (an `X-Skywave-Queue-ID` field and the Message-ID).
    pub queue_id: &'a str,
    /// The original sender, to whom the DSN goes.
    pub original_sender: &'a str,
    /// When the original arrived (unix seconds).
    pub arrival: u64,
    /// Now (unix seconds): the DSN's Date.
    pub now: u64,
    /// The recipients reported on.
    pub recipients: &'a [DsnRecipient],
    /// The original message; only its header block is returned.
    pub original_message: &'a [u8],
    /// `Some`: a delay warning (`Action: delayed`), the recipients still waiting. `None`:
    /// they failed for good, or were delivered (those with `success`).
    pub delayed: Option<Delay>,
    /// The sender's `ENVID`, if it gave one.
    pub envid: Option<&'a str>,
    /// What of the original message goes back.
    pub returned: Returned,
}

/// What of the original message a DSN returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Returned {
    /// Its header block (`text/rfc822-headers`): every report but a failure whose sender asked
    /// for more.
    Headers,
    /// All of it (`message/rfc822`): a failure report whose sender asked `RET=FULL`.
    Whole,
    /// Its header block, although the sender asked `RET=FULL`: the message is larger than the
    /// limit this gateway returns (bytes), and the report says so.
    HeadersOver(u64),
}

/// Why the recipients of a delay warning still wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delay {
    /// They are retried until unix second `until` (`Will-Retry-Until`).
    Retried {
        /// The message's expiry.
        until: u64,
    },
    /// The message is held for the gateway's operator, who may release it or return it.
    Held,
}

/// Formats unix seconds as an RFC 5322 date-time in UTC, e.g. `Sun, 22 Nov 2026 02:07:16 +0000`.
pub fn rfc5322_date(unix: u64) -> String {
    let days = unix / 86_400;
    let secs = unix % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} +0000",
        WEEKDAYS[(days % 7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Gregorian date from days since 1970-01-01 (H. Hinnant's civil-from-days algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Text safe for one header or report line: printable ASCII, no CR/LF, at most `max` bytes.
fn one_line(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else if c.is_ascii() {
                ' '
            } else {
                '?'
            }
        })
        .collect();
    out.truncate(max);
    out.trim().to_owned()
}

/// `s` if it is an RFC 3463 status code of class 4 or 5 (`4.4.1`, `5.1.1`).
pub(crate) fn valid_status(s: &str) -> Option<&str> {
    let mut parts = s.split('.');
    let class = parts.next()?;
    let subject = parts.next()?;
    let detail = parts.next()?;
    let digits = |p: &str, max: usize| {
        !p.is_empty() && p.len() <= max && p.bytes().all(|b| b.is_ascii_digit())
    };
    (parts.next().is_none()
        && (class == "4" || class == "5")
        && digits(subject, 3)
        && digits(detail, 3))
    .then_some(s)
}

/// Bare LF and lone CR become CRLF.
fn crlf(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 20 + 2);
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\r' => {
                out.extend_from_slice(b"\r\n");
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
            }
            b'\n' => out.extend_from_slice(b"\r\n"),
            b => out.push(b),
        }
        i += 1;
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Builds the DSN message: `multipart/report; report-type=delivery-status` with a human-readable
/// part, a `message/delivery-status` part and the original header block as
/// `text/rfc822-headers`. Every line ends in CRLF.
pub fn build_dsn(req: &DsnRequest<'_>) -> Vec<u8> {
    let mta = one_line(req.reporting_mta, 255);
    let sender = one_line(req.original_sender, 512);
    let returned = match req.returned {
        Returned::Whole => crlf(req.original_message),
        Returned::Headers | Returned::HeadersOver(_) => crlf(header_block(req.original_message)),
    };
    let mut boundary = format!("=_skywave_dsn_{}_{}", one_line(req.queue_id, 64), req.now);
    // The boundary must not occur in the content; what is returned of the original is the only
    // part we do not write ourselves. At most 8 rounds, each making it longer: with the queue
    // id and the time in it, even one clash takes a message written to cause it.
    for n in 0..8 {
        if !contains(&returned, boundary.as_bytes()) {
            break;
        }
        boundary.push_str(&format!("_{n}"));
    }
    let eight_bit = returned.iter().any(|&b| b >= 0x80);

    let mut o = String::with_capacity(2048);
    let date = rfc5322_date(req.now);
    o.push_str(&format!(
        "From: Mail Delivery System <MAILER-DAEMON@{mta}>\r\n"
    ));
    o.push_str(&format!("To: <{sender}>\r\n"));
    // Delivered as asked, and the others: failed, or delayed in a delay warning.
    let (succeeded, others): (Vec<&DsnRecipient>, Vec<&DsnRecipient>) =
        req.recipients.iter().partition(|r| r.success.is_some());
    o.push_str(match req.delayed {
        None if others.is_empty() => "Subject: Successful Mail Delivery Report\r\n",
        None => "Subject: Undelivered Mail Returned to Sender\r\n",
        Some(Delay::Retried { .. }) => "Subject: Delayed Mail (still being retried)\r\n",
        Some(Delay::Held) => "Subject: Delayed Mail (held for the operator)\r\n",
    });
    o.push_str(&format!("Date: {date}\r\n"));
    o.push_str(&format!(
        "Message-ID: <{}.dsn.{}@{mta}>\r\n",
        one_line(req.queue_id, 64),
        req.now
    ));
    o.push_str("Auto-Submitted: auto-replied\r\n");
    o.push_str("MIME-Version: 1.0\r\n");
    o.push_str(&format!(
        "Content-Type: multipart/report; report-type=delivery-status;\r\n\tboundary=\"{boundary}\"\r\n"
    ));
    if eight_bit {
        o.push_str("Content-Transfer-Encoding: 8bit\r\n");
    }
    o.push_str("\r\nThis is a MIME-encapsulated delivery status notification.\r\n");

    // Part 1: for people.
    o.push_str(&format!("\r\n--{boundary}\r\n"));
    o.push_str("Content-Type: text/plain; charset=us-ascii\r\n");
    o.push_str("Content-Description: Notification\r\n\r\n");
    let listed = |o: &mut String, rs: &[&DsnRecipient], what: fn(&DsnRecipient) -> String| {
        for r in rs {
            o.push_str(&format!("<{}>: {}\r\n", one_line(&r.address, 512), what(r)));
        }
    };
    match req.delayed {
        None => {
            o.push_str(&format!(
                "This is the mail gateway at {mta}.\r\n\r\n\
                 Your message (queue id {}), received {}",
                one_line(req.queue_id, 64),
                rfc5322_date(req.arrival)
            ));
            if !others.is_empty() {
                o.push_str(
                    ", could not be delivered to the\r\n\
                     following recipients. It will not be retried.\r\n\r\n",
                );
                listed(&mut o, &others, |r| one_line(&r.diagnostic, 900));
                if !succeeded.is_empty() {
                    o.push_str("\r\nAs you asked, you are told that it went on to these:\r\n\r\n");
                }
            } else {
                o.push_str(
                    ", went on to the\r\n\
                     recipients below, as you asked to be told.\r\n\r\n",
                );
            }
        }
        Some(Delay::Retried { until }) => o.push_str(&format!(
            "This is the mail gateway at {mta}.\r\n\r\n\
             Your message (queue id {}), received {}, has not yet been delivered to\r\n\
             the following recipients. It is still queued and will be tried until\r\n\
             {}; you need not send it again. You will be told if it cannot be\r\n\
             delivered by then.\r\n\r\n",
            one_line(req.queue_id, 64),
            rfc5322_date(req.arrival),
            rfc5322_date(until)
        )),
        Some(Delay::Held) => o.push_str(&format!(
            "This is the mail gateway at {mta}.\r\n\r\n\
             Your message (queue id {}), received {}, has not yet been sent to the\r\n\
             following recipients: it is held for this gateway's operator, who may\r\n\
             release it or return it to you. You need not send it again.\r\n\r\n",
            one_line(req.queue_id, 64),
            rfc5322_date(req.arrival)
        )),
    }
    if req.delayed.is_some() {
        listed(&mut o, &others, |r| one_line(&r.diagnostic, 900));
        if !succeeded.is_empty() {
            o.push_str("\r\nAs you asked, you are told that it went on to these:\r\n\r\n");
        }
    }
    listed(&mut o, &succeeded, |r| {
        match r.success {
            Some(Success::Delivered) => "delivered to the mailbox",
            _ => "handed on to a system that will not report further",
        }
        .to_owned()
    });
    if let Returned::HeadersOver(limit) = req.returned {
        o.push_str(&format!(
            "\r\nYou asked for the whole message back (RET=FULL). It is larger than the\r\n\
             {limit} bytes this gateway returns over the radio, so only its header is\r\n\
             below.\r\n"
        ));
    }

    // Part 2: for programs (RFC 3464 section 2).
    o.push_str(&format!("\r\n--{boundary}\r\n"));
    o.push_str("Content-Type: message/delivery-status\r\n");
    o.push_str("Content-Description: Delivery report\r\n\r\n");
    if let Some(id) = req.envid {
        o.push_str(&format!("Original-Envelope-Id: {}\r\n", one_line(id, 100)));
    }
    o.push_str(&format!("Reporting-MTA: dns; {mta}\r\n"));
    o.push_str(&format!(
        "X-Skywave-Queue-ID: {}\r\n",
        one_line(req.queue_id, 64)
    ));
    o.push_str(&format!("Arrival-Date: {}\r\n", rfc5322_date(req.arrival)));
    for r in req.recipients {
        let diagnostic = one_line(&r.diagnostic, 900);
        let looks_smtp =
            diagnostic.len() >= 3 && diagnostic.as_bytes()[..3].iter().all(u8::is_ascii_digit);
        o.push_str("\r\n");
        if let Some(a) = &r.original {
            o.push_str(&format!(
                "Original-Recipient: rfc822; {}\r\n",
                one_line(a, 512)
            ));
        }
        o.push_str(&format!(
            "Final-Recipient: rfc822; {}\r\n",
            one_line(&r.address, 512)
        ));
        if let Some(success) = r.success {
            o.push_str(match success {
                Success::Delivered => "Action: delivered\r\n",
                Success::Relayed => "Action: relayed\r\n",
            });
            o.push_str("Status: 2.0.0\r\n");
            if let Some(t) = r.last_attempt {
                o.push_str(&format!("Last-Attempt-Date: {}\r\n", rfc5322_date(t)));
            }
            continue;
        }
        match req.delayed {
            None => {
                o.push_str("Action: failed\r\n");
                o.push_str(&format!(
                    "Status: {}\r\n",
                    valid_status(&r.status).unwrap_or("5.0.0")
                ));
            }
            Some(_) => {
                // A delay is temporary by definition: class 4 whatever the text says.
                o.push_str("Action: delayed\r\n");
                o.push_str(&format!(
                    "Status: {}\r\n",
                    valid_status(&r.status)
                        .filter(|s| s.starts_with('4'))
                        .unwrap_or("4.0.0")
                ));
            }
        }
        o.push_str(&format!(
            "Diagnostic-Code: {}; {}\r\n",
            if looks_smtp { "smtp" } else { "x-skywave" },
            if diagnostic.is_empty() {
                "unknown error"
            } else {
                &diagnostic
            }
        ));
        if let Some(t) = r.last_attempt {
            o.push_str(&format!("Last-Attempt-Date: {}\r\n", rfc5322_date(t)));
        }
        if let Some(Delay::Retried { until }) = req.delayed {
            o.push_str(&format!("Will-Retry-Until: {}\r\n", rfc5322_date(until)));
        }
    }

    // Part 3: the original, its headers or all of it.
    o.push_str(&format!("\r\n--{boundary}\r\n"));
    if req.returned == Returned::Whole {
        o.push_str("Content-Type: message/rfc822\r\n");
        if eight_bit {
            o.push_str("Content-Transfer-Encoding: 8bit\r\n");
        }
        o.push_str("Content-Description: Undelivered message\r\n\r\n");
    } else {
        o.push_str("Content-Type: text/rfc822-headers\r\n");
        if eight_bit {
            o.push_str("Content-Transfer-Encoding: 8bit\r\n");
        }
        o.push_str(match req.delayed {
            None if others.is_empty() => "Content-Description: Headers of the message\r\n\r\n",
            None => "Content-Description: Undelivered message headers\r\n\r\n",
            Some(_) => "Content-Description: Headers of the delayed message\r\n\r\n",
        });
    }
    let mut out = o.into_bytes();
    out.extend_from_slice(&returned);
    if !returned.is_empty() && !returned.ends_with(b"\r\n") {
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(rfc5322_date(0), "Thu, 01 Jan 1970 00:00:00 +0000");
        assert_eq!(
            rfc5322_date(1_795_313_236),
            "Sun, 22 Nov 2026 02:07:16 +0000"
        );
        assert_eq!(rfc5322_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 +0000");
    }

    fn request<'a>(recipients: &'a [DsnRecipient], message: &'a [u8]) -> DsnRequest<'a> {
        DsnRequest {
            reporting_mta: "ship.example",
            queue_id: "0065A1B2C300000001ABCDEF",
            original_sender: "alice@ship.example",
            arrival: 1_700_000_000,
            now: 1_700_432_000,
            recipients,
            original_message: message,
            delayed: None,
            envid: None,
            returned: Returned::Headers,
        }
    }

    #[test]
    fn dsn_structure() {
        let rcpts = vec![
            DsnRecipient {
                address: "bob@shore.example".into(),
                status: "5.1.1".into(),
                diagnostic: "550 5.1.1 <bob@shore.example>: no such user\r\nInjected: x".into(),
                last_attempt: Some(1_700_000_500),
                original: None,
                success: None,
            },
            DsnRecipient {
                address: "carol@shore.example".into(),
                status: "bogus".into(),
                diagnostic: "message expired after 5 days in the queue".into(),
                last_attempt: None,
                original: None,
                success: None,
            },
        ];
        let msg = b"From: alice@ship.example\nSubject: test\n\nsecret body\n";
        let dsn = build_dsn(&request(&rcpts, msg));
        let text = String::from_utf8(dsn.clone()).unwrap();
        assert!(text.contains("To: <alice@ship.example>\r\n"));
        assert!(text.contains("Content-Type: multipart/report; report-type=delivery-status;"));
        assert!(text.contains("Content-Type: message/delivery-status\r\n"));
        assert!(text.contains("Content-Type: text/rfc822-headers\r\n"));
        assert!(text.contains("Reporting-MTA: dns; ship.example\r\n"));
        assert!(text.contains("Arrival-Date: Tue, 14 Nov 2023 22:13:20 +0000\r\n"));
        assert!(text.contains(
            "Final-Recipient: rfc822; bob@shore.example\r\nAction: failed\r\nStatus: 5.1.1\r\n"
        ));
        assert!(text.contains(
            "Diagnostic-Code: smtp; 550 5.1.1 <bob@shore.example>: no such user  Injected: x\r\n"
        ));
        assert!(text.contains("Status: 5.0.0\r\nDiagnostic-Code: x-skywave; message expired"));
        assert!(text.contains("\r\nSubject: test\r\n"));
        assert!(!text.contains("secret body"));
        assert!(!text.contains("\r\nInjected: x"));
        // Every line ends in CRLF, and the closing boundary is there.
        assert!(!dsn.windows(2).any(|w| w[1] == b'\n' && w[0] != b'\r'));
        assert!(text.ends_with("--\r\n"));
    }

    #[test]
    fn a_report_with_failures_and_successes_tells_both() {
        let failed = DsnRecipient {
            address: "bob@shore.example".into(),
            original: None,
            success: None,
            status: "5.1.1".into(),
            diagnostic: "550 5.1.1 no such user".into(),
            last_attempt: Some(1_700_000_500),
        };
        let delivered = DsnRecipient {
            address: "carol@shore.example".into(),
            original: Some("Carol@Shore.example".into()),
            success: Some(Success::Delivered),
            status: String::new(),
            diagnostic: String::new(),
            last_attempt: Some(1_700_000_600),
        };
        let rcpts = [failed, delivered];
        let text = String::from_utf8(build_dsn(&DsnRequest {
            envid: Some("E\r\n1"),
            ..request(&rcpts, b"Subject: s\r\n\r\nbody\r\n")
        }))
        .unwrap();
        assert!(text.contains("Subject: Undelivered Mail Returned to Sender\r\n"));
        assert!(text.contains("<bob@shore.example>: 550 5.1.1 no such user\r\n"));
        assert!(text.contains(
            "you are told that it went on to these:\r\n\r\n\
             <carol@shore.example>: delivered to the mailbox\r\n"
        ));
        // One line, whatever the sender gave.
        assert!(
            text.contains("Original-Envelope-Id: E  1\r\nReporting-MTA: dns; ship.example\r\n")
        );
        assert!(text.contains(
            "Original-Recipient: rfc822; Carol@Shore.example\r\n\
             Final-Recipient: rfc822; carol@shore.example\r\nAction: delivered\r\n\
             Status: 2.0.0\r\nLast-Attempt-Date: "
        ));
        assert!(text.contains("Final-Recipient: rfc822; bob@shore.example\r\nAction: failed\r\n"));
    }

    #[test]
    fn a_whole_message_goes_back_as_message_rfc822_marked_8bit_when_it_is() {
        let rcpts = [DsnRecipient {
            address: "bob@shore.example".into(),
            original: None,
            success: None,
            status: "5.1.1".into(),
            diagnostic: "550 no".into(),
            last_attempt: None,
        }];
        let msg = "Subject: caf\u{e9}\nX: y\n\nbody line\n".as_bytes();
        let dsn = build_dsn(&DsnRequest {
            returned: Returned::Whole,
            ..request(&rcpts, msg)
        });
        let text = String::from_utf8(dsn.clone()).unwrap();
        assert!(text.contains(
            "boundary=\"=_skywave_dsn_0065A1B2C300000001ABCDEF_1700432000\"\r\n\
             Content-Transfer-Encoding: 8bit\r\n"
        ));
        assert!(text.contains(
            "Content-Type: message/rfc822\r\nContent-Transfer-Encoding: 8bit\r\n\
             Content-Description: Undelivered message\r\n\r\n\
             Subject: caf\u{e9}\r\nX: y\r\n\r\nbody line\r\n\r\n--"
        ));
        assert!(!dsn.windows(2).any(|w| w[1] == b'\n' && w[0] != b'\r'));
    }

    #[test]
    fn a_delay_warning_says_the_message_is_still_being_tried() {
        let rcpts = vec![DsnRecipient {
            address: "bob@shore.example".into(),
            status: "4.4.1".into(),
            diagnostic: "no reply from shore within the session timeout".into(),
            last_attempt: Some(1_700_014_400),
            original: None,
            success: None,
        }];
        let msg = b"From: alice@ship.example\r\nSubject: test\r\n\r\nbody\r\n";
        let delayed = |rcpts: &[DsnRecipient], delay| {
            String::from_utf8(build_dsn(&DsnRequest {
                delayed: Some(delay),
                ..request(rcpts, msg)
            }))
            .unwrap()
        };
        let retried = Delay::Retried {
            until: 1_700_432_000,
        };
        let text = delayed(&rcpts, retried);
        assert!(text.contains("Subject: Delayed Mail (still being retried)\r\n"));
        assert!(text.contains("has not yet been delivered to\r\n"));
        assert!(text.contains("you need not send it again."));
        assert!(text.contains(
            "Final-Recipient: rfc822; bob@shore.example\r\nAction: delayed\r\nStatus: 4.4.1\r\n"
        ));
        assert!(text.contains("Will-Retry-Until: Sun, 19 Nov 2023 22:13:20 +0000\r\n"));
        assert!(!text.contains("Action: failed"));
        // A permanent code cannot describe a delay.
        let rcpts = vec![DsnRecipient {
            status: "5.1.1".into(),
            ..rcpts[0].clone()
        }];
        let text = delayed(&rcpts, retried);
        assert!(text.contains("Action: delayed\r\nStatus: 4.0.0\r\n"));
        // Held for the operator: no retry time to promise.
        let text = delayed(&rcpts, Delay::Held);
        assert!(
            text.contains("it is held for this gateway's operator"),
            "{text}"
        );
        assert!(text.contains("Subject: Delayed Mail (held for the operator)\r\n"));
        assert!(text.contains("Action: delayed\r\n"));
        assert!(!text.contains("Will-Retry-Until"));
    }

    #[test]
    fn boundary_avoids_header_content() {
        let rcpts = vec![];
        let msg = b"X-Trick: =_skywave_dsn_0065A1B2C300000001ABCDEF_1700432000\r\n\r\n";
        let text = String::from_utf8(build_dsn(&request(&rcpts, msg))).unwrap();
        assert!(text.contains("boundary=\"=_skywave_dsn_0065A1B2C300000001ABCDEF_1700432000_0\""));
    }
}
