//! Fuzzes the reading of a peer's radio schedule (`schedule = [...]` in the routing table): it
//! must never panic, and a schedule it accepts must read back from its own display as the same
//! schedule and answer `state_at` consistently with `is_open` at any time.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_route::{Schedule, ScheduleState};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The first line is a time, the others windows.
    let mut lines = text.lines();
    let t: u64 = lines.next().and_then(|l| l.parse().ok()).unwrap_or(0) % (1 << 40);
    let windows: Vec<&str> = lines.collect();
    let Ok(s) = Schedule::parse(&windows) else {
        return;
    };
    let shown = s.to_string();
    let again: Vec<&str> = shown.trim_end_matches(" UTC").split(", ").collect();
    assert_eq!(Schedule::parse(&again).ok(), Some(s.clone()), "{shown}");
    match s.state_at(t) {
        ScheduleState::Closed { opens } => {
            assert!(!s.is_open(t) && s.is_open(opens) && opens > t && opens <= t + 86_400);
        }
        ScheduleState::Open { until, .. } => {
            assert!(s.is_open(t));
            if let Some(until) = until {
                assert!(until > t && !s.is_open(until));
            }
        }
    }
});
