//! Fuzzes the reading of DSN parameters (RFC 3461) from an ACP 142 envelope's parameter text, as
//! the multicast link takes them from another gateway: it must never panic, and what it reads
//! must write out and read back as the same parameters.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_smtp::{MailDsn, RcptDsn};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mail = MailDsn::parse(text);
    assert_eq!(MailDsn::parse(mail.esmtp().trim_start()), mail, "{text:?}");
    let rcpt = RcptDsn::parse(text);
    assert_eq!(RcptDsn::parse(rcpt.esmtp().trim_start()), rcpt, "{text:?}");
});
