//! Fuzzes the reading of a message's own expiry time (`Expires:` and `Expiry-Date:`, RFC 5322
//! date-times with the obsolete forms): it must never panic, whatever the header block holds,
//! and a date it accepts must be one the spool's own formatter writes back to the same second.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_spool::dsn::rfc5322_date;
use skywave_spool::expiry::{message_expiry, parse_date_time};

fuzz_target!(|data: &[u8]| {
    let _ = message_expiry(data);
    if let Ok(text) = std::str::from_utf8(data)
        && let Some(t) = parse_date_time(text)
        && let Ok(unix) = u64::try_from(t)
    {
        let again = rfc5322_date(unix);
        assert_eq!(parse_date_time(&again), Some(t), "{text:?} -> {again}");
    }
});
