//! The parameters of the DSN service extension (RFC 3461): what a sender asks to be told about
//! its message, as MAIL and RCPT carry them.
//!
//! The server session reads them into its [`crate::Envelope`], the spool keeps them with the
//! message, and the client session sends them on to a next hop that offers `DSN`, so that the
//! gateway that finally delivers (or fails to) reports as the sender asked:
//!
//! - `RET=FULL|HDRS` and `ENVID=` on MAIL ([`MailDsn`]);
//! - `NOTIFY=NEVER|SUCCESS,FAILURE,DELAY` and `ORCPT=rfc822;` on RCPT ([`RcptDsn`]).
//!
//! Values travel xtext-encoded on the wire (RFC 3461 section 4) and are kept decoded here.

use std::fmt;

use smtp_proto::{
    MAIL_RET_FULL, MAIL_RET_HDRS, MailFrom, RCPT_NOTIFY_DELAY, RCPT_NOTIFY_FAILURE,
    RCPT_NOTIFY_NEVER, RCPT_NOTIFY_SUCCESS, RcptTo, Request,
};

/// Longest `ENVID` accepted (RFC 3461 section 4.4: 100 characters).
pub const MAX_ENVID: usize = 100;
/// Longest `ORCPT` address kept, decoded (RFC 3461 section 4.2 allows 500 encoded characters).
pub const MAX_ORCPT: usize = 500;

/// `RET=`: what a failure report returns of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ret {
    /// `RET=FULL`: the whole message.
    Full,
    /// `RET=HDRS`: its header only.
    Hdrs,
}

/// `NOTIFY=`: the events a recipient's sender wants a report of. All three false is
/// `NOTIFY=NEVER`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Notify {
    /// `SUCCESS`: delivered, or relayed to a hop that does not report.
    pub success: bool,
    /// `FAILURE`: it failed for good.
    pub failure: bool,
    /// `DELAY`: it is delayed.
    pub delay: bool,
}

impl Notify {
    /// `NOTIFY=NEVER`.
    pub const NEVER: Notify = Notify {
        success: false,
        failure: false,
        delay: false,
    };

    /// The notify value as one byte: bit 0 success, bit 1 failure, bit 2 delay (the spool
    /// keeps it so).
    pub fn bits(self) -> u8 {
        u8::from(self.success) | u8::from(self.failure) << 1 | u8::from(self.delay) << 2
    }

    /// The inverse of [`Notify::bits`]; `None` if a bit above 2 is set.
    pub fn from_bits(bits: u8) -> Option<Notify> {
        (bits & !7 == 0).then_some(Notify {
            success: bits & 1 != 0,
            failure: bits & 2 != 0,
            delay: bits & 4 != 0,
        })
    }
}

impl fmt::Display for Notify {
    /// As the parameter's value: `NEVER`, or the events joined by commas.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let events: Vec<&str> = [
            (self.success, "SUCCESS"),
            (self.failure, "FAILURE"),
            (self.delay, "DELAY"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect();
        if events.is_empty() {
            f.write_str("NEVER")
        } else {
            f.write_str(&events.join(","))
        }
    }
}

/// The DSN parameters of a MAIL command.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MailDsn {
    /// `RET=`, if given.
    pub ret: Option<Ret>,
    /// `ENVID=`, decoded, if given: the sender's own name for this transaction, returned in
    /// every report as `Original-Envelope-Id`.
    pub envid: Option<String>,
}

impl MailDsn {
    /// The DSN parameters of a parsed MAIL, or why they are refused (for a 501).
    pub fn from_mail(from: &MailFrom<String>) -> Result<MailDsn, &'static str> {
        let ret = match (
            from.flags & MAIL_RET_FULL != 0,
            from.flags & MAIL_RET_HDRS != 0,
        ) {
            (true, true) => return Err("RET given twice"),
            (true, false) => Some(Ret::Full),
            (false, true) => Some(Ret::Hdrs),
            (false, false) => None,
        };
        let envid = match &from.env_id {
            // Section 4.4: at most 100 characters, printable once decoded.
            Some(id)
                if id.is_empty()
                    || id.len() > MAX_ENVID
                    || !id.bytes().all(|b| (b' '..=b'~').contains(&b)) =>
            {
                return Err("ENVID must be 1 to 100 printable characters");
            }
            other => other.clone(),
        };
        Ok(MailDsn { ret, envid })
    }

    /// The DSN parameters among MAIL parameters written out (`RET=HDRS ENVID=x MT-PRIORITY=3`,
    /// as an ACP 142 envelope carries them); others are ignored, and so are malformed ones.
    pub fn parse(params: &str) -> MailDsn {
        match parse_line(&format!("MAIL FROM:<> {params}")) {
            Some(Request::Mail { from }) => MailDsn::from_mail(&from).unwrap_or_default(),
            _ => MailDsn::default(),
        }
    }

    /// Nothing asked.
    pub fn is_empty(&self) -> bool {
        self.ret.is_none() && self.envid.is_none()
    }

    /// The parameters as MAIL carries them, each after a space (empty if none).
    pub fn esmtp(&self) -> String {
        let mut out = String::new();
        match self.ret {
            Some(Ret::Full) => out.push_str(" RET=FULL"),
            Some(Ret::Hdrs) => out.push_str(" RET=HDRS"),
            None => {}
        }
        if let Some(id) = &self.envid {
            out.push_str(" ENVID=");
            out.push_str(&xtext(id));
        }
        out
    }
}

/// The DSN parameters of a RCPT command.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RcptDsn {
    /// `NOTIFY=`, if given. Without it a gateway reports failures, and delays as it sees fit
    /// (RFC 3461 section 4.1).
    pub notify: Option<Notify>,
    /// `ORCPT=rfc822;`: the address as the sender first gave it, decoded.
    pub orcpt: Option<String>,
}

impl RcptDsn {
    /// The DSN parameters of a parsed RCPT, or why they are refused (for a 501).
    pub fn from_rcpt(to: &RcptTo<String>) -> Result<RcptDsn, &'static str> {
        let given = to.flags
            & (RCPT_NOTIFY_SUCCESS | RCPT_NOTIFY_FAILURE | RCPT_NOTIFY_DELAY | RCPT_NOTIFY_NEVER);
        let notify = if given == 0 {
            None
        } else if given & RCPT_NOTIFY_NEVER != 0 {
            // Section 4.1: NEVER stands alone.
            if given != RCPT_NOTIFY_NEVER {
                return Err("NOTIFY=NEVER cannot be combined with other values");
            }
            Some(Notify::NEVER)
        } else {
            Some(Notify {
                success: given & RCPT_NOTIFY_SUCCESS != 0,
                failure: given & RCPT_NOTIFY_FAILURE != 0,
                delay: given & RCPT_NOTIFY_DELAY != 0,
            })
        };
        if to.orcpt.as_ref().is_some_and(|a| a.len() > MAX_ORCPT) {
            return Err("ORCPT too long");
        }
        Ok(RcptDsn {
            notify,
            orcpt: to.orcpt.clone(),
        })
    }

    /// The DSN parameters among RCPT parameters written out (`NOTIFY=FAILURE
    /// ORCPT=rfc822;a@b`, as an ACP 142 envelope carries them); others are ignored, and so are
    /// malformed ones.
    pub fn parse(params: &str) -> RcptDsn {
        match parse_line(&format!("RCPT TO:<x@x> {params}")) {
            Some(Request::Rcpt { to }) => RcptDsn::from_rcpt(&to).unwrap_or_default(),
            _ => RcptDsn::default(),
        }
    }

    /// Nothing asked.
    pub fn is_empty(&self) -> bool {
        self.notify.is_none() && self.orcpt.is_none()
    }

    /// Whether a failure is to be reported (the default when nothing was asked).
    pub fn wants_failure(&self) -> bool {
        self.notify.is_none_or(|n| n.failure)
    }

    /// Whether a delay is to be reported (the default when nothing was asked).
    pub fn wants_delay(&self) -> bool {
        self.notify.is_none_or(|n| n.delay)
    }

    /// Whether success is to be reported (only when asked for).
    pub fn wants_success(&self) -> bool {
        self.notify.is_some_and(|n| n.success)
    }

    /// The parameters as RCPT carries them, each after a space (empty if none).
    pub fn esmtp(&self) -> String {
        let mut out = String::new();
        if let Some(n) = self.notify {
            out.push_str(&format!(" NOTIFY={n}"));
        }
        if let Some(a) = &self.orcpt {
            out.push_str(" ORCPT=rfc822;");
            out.push_str(&xtext(a));
        }
        out
    }
}

/// One command line through smtp-proto's parser; `None` if it does not parse (an unknown
/// parameter among them, say, or a line break smuggled in).
fn parse_line(line: &str) -> Option<Request<String>> {
    if line.contains(['\r', '\n']) {
        return None;
    }
    let framed = format!("{line}\r\n");
    Request::parse(&mut framed.as_bytes().iter())
        .ok()
        .map(Request::into_owned)
}

/// Encodes `s` as xtext (RFC 3461 section 4): `!` to `~` as themselves except `+` and `=`,
/// every other byte as `+` and two upper-case hex digits.
pub fn xtext(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (b'!'..=b'~').contains(&b) && b != b'+' && b != b'=' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("+{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn xtext_of_rfc_3461_examples() {
        // RFC 3461 section 4.2's example: "George@Tax- ME .GOV" (with spaces) encoded.
        assert_eq!(xtext("George @Tax- ME .GOV"), "George+20@Tax-+20ME+20.GOV");
        assert_eq!(xtext("a+b=c"), "a+2Bb+3Dc");
        assert_eq!(xtext("plain@example.com"), "plain@example.com");
    }

    #[test]
    fn parameters_on_the_wire() {
        let mail = MailDsn {
            ret: Some(Ret::Hdrs),
            envid: Some("QQ 314159".into()),
        };
        assert_eq!(mail.esmtp(), " RET=HDRS ENVID=QQ+20314159");
        assert_eq!(MailDsn::default().esmtp(), "");
        let rcpt = RcptDsn {
            notify: Some(Notify {
                success: true,
                failure: true,
                delay: false,
            }),
            orcpt: Some("Bob@Example.COM".into()),
        };
        assert_eq!(
            rcpt.esmtp(),
            " NOTIFY=SUCCESS,FAILURE ORCPT=rfc822;Bob@Example.COM"
        );
        let never = RcptDsn {
            notify: Some(Notify::NEVER),
            orcpt: None,
        };
        assert_eq!(never.esmtp(), " NOTIFY=NEVER");
        assert!(!never.wants_failure() && !never.wants_delay() && !never.wants_success());
        let default = RcptDsn::default();
        assert!(default.wants_failure() && default.wants_delay() && !default.wants_success());
    }

    #[test]
    fn parameters_parse_from_an_acp_142_envelope() {
        assert_eq!(
            MailDsn::parse("MT-PRIORITY=4 BODY=8BITMIME RET=HDRS ENVID=QQ314159"),
            MailDsn {
                ret: Some(Ret::Hdrs),
                envid: Some("QQ314159".into()),
            }
        );
        assert_eq!(
            RcptDsn::parse("NOTIFY=FAILURE ORCPT=rfc822;Bob@ent.example.net"),
            RcptDsn {
                notify: Some(Notify {
                    failure: true,
                    ..Notify::NEVER
                }),
                orcpt: Some("Bob@ent.example.net".into()),
            }
        );
        // Nothing, nonsense and smuggled lines ask nothing.
        for params in [
            "",
            "NOTIFY=NEVER,SUCCESS",
            "XYZZY=1",
            "NOTIFY=NEVER\r\nRSET",
        ] {
            assert_eq!(RcptDsn::parse(params), RcptDsn::default(), "{params:?}");
        }
        assert_eq!(MailDsn::parse("RET=FULL RET=HDRS"), MailDsn::default());
        // What is written out reads back.
        let d = RcptDsn {
            notify: Some(Notify::NEVER),
            orcpt: Some("a b+c@x".into()),
        };
        assert_eq!(RcptDsn::parse(d.esmtp().trim_start()), d);
    }

    proptest! {
        #[test]
        fn notify_bits_round_trip(bits in 0u8..8) {
            let n = Notify::from_bits(bits).expect("three bits");
            prop_assert_eq!(n.bits(), bits);
        }

        #[test]
        fn xtext_is_printable_and_reversible(s in "\\PC{0,40}") {
            let encoded = xtext(&s);
            prop_assert!(encoded.bytes().all(|b| (b'!'..=b'~').contains(&b) && b != b'='));
            // Decoding by hand: `+XX` back to its byte.
            let bytes = encoded.as_bytes();
            let mut out = Vec::new();
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i] == b'+' {
                    let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("ascii");
                    out.push(u8::from_str_radix(hex, 16).expect("hex"));
                    i += 3;
                } else {
                    out.push(bytes[i]);
                    i += 1;
                }
            }
            prop_assert_eq!(out, s.as_bytes());
        }
    }
}
