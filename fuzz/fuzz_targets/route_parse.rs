//! Fuzz the routing table: arbitrary text as routes.toml (parse, check, diagnostics rendering),
//! then an arbitrary recipient through lookup, the relay decision and explain.
//!
//! Input layout: the first line is the recipient, the rest is the TOML text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_route::{Address, RelayDecision, RoutingTable};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (recipient, toml) = text.split_once('\n').unwrap_or((&text, ""));

    // Normalisation is idempotent: a parsed address prints as an address that parses the same.
    if let Ok(address) = Address::parse(recipient) {
        assert_eq!(Address::parse(&address.to_string()), Ok(address));
    }
    // The form the spool keeps is ASCII (an internationalised domain as A-labels).
    if let Ok(path) = skywave_route::address::ascii_path(recipient) {
        assert!(path.is_ascii(), "{path:?}");
    }

    match RoutingTable::parse("fuzz.toml", toml) {
        Err(err) => {
            // Rendering every diagnostic must not panic, whatever the spans.
            let _ = err.to_string();
            assert!(err.error_count() > 0);
        }
        Ok(table) => {
            for w in table.warnings() {
                let _ = w.to_string();
            }
            let client = "10.1.2.3".parse().expect("literal address");
            match table.relay_decision(client, false, recipient) {
                RelayDecision::Accept(route) => {
                    assert!(route.rule.pattern.matches(&route.address));
                }
                RelayDecision::Refuse(refusal) => {
                    // 553 5.6.7 only for a local part that is not ASCII (RFC 6531).
                    assert!(
                        matches!(refusal.code, 550 | 554)
                            || (refusal.code == 553
                                && refusal.enhanced == "5.6.7"
                                && !recipient.is_ascii()),
                        "{refusal}"
                    );
                }
            }
            let _ = table.explain(recipient, Some((client, true))).to_string();
        }
    }
});
