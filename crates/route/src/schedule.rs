//! A peer's or a group's radio schedule: the times of day (UTC) at which this gateway may start
//! sending to it (`schedule = ["06:00-07:00", "18:00-18:30"]` in a `[[peer]]`, or in a
//! `[[group]]` over STANAG 5066 for its multicasts).
//!
//! HF stations keep schedules ("skeds"): a ship listens on the base's frequency at agreed times,
//! a fleet shares one frequency in time slots, propagation favours the same hours every day. A
//! session started outside its peer's window is airtime spent on a station that is not
//! listening, or in another ship's slot. The gateway's link schedulers ask
//! [`Schedule::state_at`] before every session (the multicast link before every multicast and
//! each of its later rounds); this module only answers, it keeps no clock.
//!
//! Windows are daily (`"HH:MM-HH:MM"` or `"HHMM-HHMM"`, an optional `Z` after each time) or
//! hourly (`"*:MM-*:MM"`: those minutes of every hour). A window may wrap past midnight
//! (`"23:30-00:30"`) or the hour (`"*:50-*:10"`); `24:00` ends a day. Times are UTC, as radio
//! schedules are kept, and the resolution is one minute. Overlapping and adjacent windows join:
//! [`ScheduleState::Open`] says when the joined window closes.

use std::fmt;

/// Minutes in a day.
const DAY: u32 = 1440;

/// Most windows in one schedule: an hourly window is 24 windows of a day already, and a
/// schedule is written and read by people.
pub const MAX_WINDOWS: usize = 96;

/// One window of a [`Schedule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Window {
    /// Every day from `start` to `end` (minutes of the day; `end` may be 1440, or wrap).
    Daily { start: u32, end: u32 },
    /// Every hour from `start` to `end` (minutes of the hour; may wrap).
    Hourly { start: u32, end: u32 },
}

impl Window {
    /// Whether minute `m` of the day (0-1439) lies in this window.
    fn contains(self, m: u32) -> bool {
        let within = |start: u32, end: u32, m: u32| {
            if start < end {
                (start..end).contains(&m)
            } else {
                m >= start || m < end
            }
        };
        match self {
            Window::Daily { start, end } => within(start, end % DAY, m),
            Window::Hourly { start, end } => within(start, end, m % 60),
        }
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Window::Daily { start, end } => write!(
                f,
                "{:02}:{:02}-{:02}:{:02}",
                start / 60,
                start % 60,
                end / 60,
                end % 60
            ),
            Window::Hourly { start, end } => write!(f, "*:{start:02}-*:{end:02}"),
        }
    }
}

/// Why a schedule window could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Not of a form this module reads.
    #[error(
        "schedule window \"{0}\" is not a window; expected \"HH:MM-HH:MM\" (UTC, e.g. \"06:00-07:30\") or \"*:MM-*:MM\" (those minutes of every hour)"
    )]
    Form(String),
    /// An hour or minute out of range.
    #[error("schedule window \"{window}\": {what}")]
    Range {
        /// The window as written.
        window: String,
        /// What is out of range.
        what: String,
    },
    /// Start and end are the same time.
    #[error(
        "schedule window \"{0}\" is empty (it starts when it ends); leave schedule out for a peer that may be sent to at any time"
    )]
    Empty(String),
    /// No window at all.
    #[error(
        "schedule = [] has no window: its mail would never go; leave schedule out for any time"
    )]
    NoWindow,
    /// More windows than [`MAX_WINDOWS`].
    #[error("schedule has {0} windows; at most {MAX_WINDOWS}")]
    TooMany(usize),
}

/// When this gateway may start sending to a peer or a group (see the module docs).
#[derive(Clone, PartialEq, Eq)]
pub struct Schedule {
    windows: Vec<Window>,
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Schedule({self})")
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, w) in self.windows.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{w}")?;
        }
        f.write_str(" UTC")
    }
}

/// Whether a peer's schedule lets a session start, at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleState {
    /// In a window.
    Open {
        /// Unix second the (joined) window opened; `None` when the schedule covers the whole
        /// day.
        since: Option<u64>,
        /// Unix second it closes; `None` when the schedule covers the whole day.
        until: Option<u64>,
    },
    /// Between windows.
    Closed {
        /// Unix second the next window opens.
        opens: u64,
    },
}

impl Schedule {
    /// Reads a schedule from its windows as written in the routing table.
    pub fn parse<S: AsRef<str>>(windows: &[S]) -> Result<Schedule, ScheduleError> {
        if windows.is_empty() {
            return Err(ScheduleError::NoWindow);
        }
        if windows.len() > MAX_WINDOWS {
            return Err(ScheduleError::TooMany(windows.len()));
        }
        let windows = windows
            .iter()
            .map(|w| parse_window(w.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Schedule { windows })
    }

    /// Whether minute `m` of the day lies in some window.
    fn open_minute(&self, m: u32) -> bool {
        self.windows.iter().any(|w| w.contains(m % DAY))
    }

    /// Whether a session may start at unix second `t`.
    pub fn is_open(&self, t: u64) -> bool {
        self.open_minute(minute_of_day(t))
    }

    /// The shortest window in seconds, windows that touch or overlap taken as one; `None`
    /// when the schedule covers the whole day.
    pub fn shortest_window(&self) -> Option<u64> {
        self.runs(true).min().map(|m| u64::from(m) * 60)
    }

    /// The longest time between two windows in seconds (the longest a message that comes as
    /// a window closes waits for the next); `None` when the schedule covers the whole day.
    pub fn longest_gap(&self) -> Option<u64> {
        self.runs(false).max().map(|m| u64::from(m) * 60)
    }

    /// The lengths in minutes of a day's runs of open (`open`) or closed minutes, each run
    /// whole: counted from a minute of the other kind, so that one across midnight is one.
    fn runs(&self, open: bool) -> impl Iterator<Item = u32> + '_ {
        let start = (0..DAY).find(|&m| self.open_minute(m) != open);
        let mut run = 0u32;
        start
            .into_iter()
            .flat_map(|s| (1..=DAY).map(move |k| s + k))
            .filter_map(move |m| {
                if self.open_minute(m) == open {
                    run += 1;
                    None
                } else {
                    (run > 0).then(|| std::mem::take(&mut run))
                }
            })
    }

    /// Whether a session may start at unix second `t`, and until or from when.
    pub fn state_at(&self, t: u64) -> ScheduleState {
        let minute = t / 60;
        let m = minute_of_day(t);
        if self.open_minute(m) {
            // Joined windows: walk out from this minute while the minutes stay open; a whole
            // day of them means the schedule never closes.
            let ahead = (1..=DAY).find(|k| !self.open_minute(m + k));
            let behind = (1..=DAY).find(|k| !self.open_minute(m + DAY - k));
            match (ahead, behind) {
                (Some(a), Some(b)) => ScheduleState::Open {
                    since: Some((minute + 1).saturating_sub(u64::from(b)) * 60),
                    until: Some((minute + u64::from(a)) * 60),
                },
                _ => ScheduleState::Open {
                    since: None,
                    until: None,
                },
            }
        } else {
            let ahead = (1..=DAY).find(|k| self.open_minute(m + k)).unwrap_or(DAY);
            ScheduleState::Closed {
                opens: (minute + u64::from(ahead)) * 60,
            }
        }
    }
}

impl ScheduleState {
    /// How this reads to an operator at unix second `now`: "open until 07:00 UTC (in 12 min)",
    /// "closed until 18:00 UTC (in 3 h 2 min)".
    pub fn describe(&self, now: u64) -> String {
        match *self {
            ScheduleState::Open { until: None, .. } => "open all day".to_owned(),
            ScheduleState::Open {
                until: Some(until), ..
            } => format!(
                "open until {} ({})",
                clock_time(until),
                in_time(until.saturating_sub(now))
            ),
            ScheduleState::Closed { opens } => format!(
                "closed until {} ({})",
                clock_time(opens),
                in_time(opens.saturating_sub(now))
            ),
        }
    }
}

/// The minute of the day (UTC) of unix second `t`.
fn minute_of_day(t: u64) -> u32 {
    // The remainder is below 1440, so it fits.
    u32::try_from((t / 60) % u64::from(DAY)).unwrap_or(0)
}

/// "HH:MM UTC" of unix second `t`.
pub fn clock_time(t: u64) -> String {
    let m = minute_of_day(t);
    format!("{:02}:{:02} UTC", m / 60, m % 60)
}

/// "in 3 h 2 min", "in 12 min", "in 40 s".
fn in_time(secs: u64) -> String {
    match secs {
        0..60 => format!("in {secs} s"),
        60..3600 => format!("in {} min", secs.div_ceil(60)),
        _ => {
            let minutes = secs.div_ceil(60);
            format!("in {} h {} min", minutes / 60, minutes % 60)
        }
    }
}

/// Longest window text read: anything longer is no window.
const MAX_WINDOW_TEXT: usize = 32;

fn parse_window(text: &str) -> Result<Window, ScheduleError> {
    let form = || ScheduleError::Form(text.chars().take(MAX_WINDOW_TEXT).collect());
    if text.len() > MAX_WINDOW_TEXT {
        return Err(form());
    }
    let (a, b) = text.split_once('-').ok_or_else(form)?;
    let (a, b) = (a.trim(), b.trim());
    let range = |what: String| ScheduleError::Range {
        window: text.to_owned(),
        what,
    };
    let window = match (a.strip_prefix("*:"), b.strip_prefix("*:")) {
        (Some(a), Some(b)) => {
            let minute = |s: &str| -> Result<u32, ScheduleError> {
                let m = two_digits(s.strip_suffix(['Z', 'z']).unwrap_or(s)).ok_or_else(form)?;
                if m > 59 {
                    return Err(range(format!("minute {m} is out of range (0-59)")));
                }
                Ok(m)
            };
            Window::Hourly {
                start: minute(a)?,
                end: minute(b)?,
            }
        }
        (None, None) => {
            let (start, end) = (
                time_of_day(a).ok_or_else(form)?,
                time_of_day(b).ok_or_else(form)?,
            );
            for (h, m) in [start, end] {
                if m > 59 {
                    return Err(range(format!("minute {m} is out of range (0-59)")));
                }
                if h > 24 || (h == 24 && m > 0) {
                    return Err(range(format!(
                        "{h:02}:{m:02} is out of range (00:00-24:00)"
                    )));
                }
            }
            if start.0 == 24 {
                return Err(range(
                    "a window cannot start at 24:00; write 00:00".to_owned(),
                ));
            }
            Window::Daily {
                start: start.0 * 60 + start.1,
                end: end.0 * 60 + end.1,
            }
        }
        _ => return Err(form()),
    };
    let empty = match window {
        Window::Daily { start, end } => start == end % DAY,
        Window::Hourly { start, end } => start == end,
    };
    if empty {
        return Err(ScheduleError::Empty(text.to_owned()));
    }
    Ok(window)
}

/// "HH:MM", "HHMM", either with a `Z` after it: (hour, minute), not range-checked.
fn time_of_day(s: &str) -> Option<(u32, u32)> {
    let s = s.strip_suffix(['Z', 'z']).unwrap_or(s);
    let (h, m) = match s.split_once(':') {
        Some((h, m)) => (h, m),
        None if s.len() == 4 && s.is_ascii() => s.split_at(2),
        None => return None,
    };
    Some((two_digits(h)?, two_digits(m)?))
}

/// Exactly two ASCII digits.
fn two_digits(s: &str) -> Option<u32> {
    match s.as_bytes() {
        [a, b] if a.is_ascii_digit() && b.is_ascii_digit() => {
            Some(u32::from(a - b'0') * 10 + u32::from(b - b'0'))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_shortest_window_joins_what_touches_and_crosses_midnight() {
        let secs = |w: &[&str]| Schedule::parse(w).unwrap().shortest_window();
        assert_eq!(secs(&["*:00-*:03"]), Some(180));
        assert_eq!(secs(&["06:00-07:00", "18:00-18:30"]), Some(1800));
        // Touching windows are one; one across midnight is one.
        assert_eq!(secs(&["06:00-07:00", "07:00-07:10"]), Some(4200));
        assert_eq!(secs(&["23:50-00:20", "12:00-13:00"]), Some(1800));
        assert_eq!(secs(&["00:00-12:00", "12:00-24:00"]), None);
    }

    #[test]
    fn the_longest_gap_is_the_longest_wait_for_a_window() {
        let secs = |w: &[&str]| Schedule::parse(w).unwrap().longest_gap();
        assert_eq!(secs(&["*:00-*:03"]), Some(57 * 60));
        assert_eq!(
            secs(&["06:00-07:00", "18:00-18:30"]),
            Some(11 * 3600 + 30 * 60)
        );
        // A window across midnight is one, and so is a gap.
        assert_eq!(
            secs(&["23:50-00:20", "12:00-13:00"]),
            Some(11 * 3600 + 40 * 60)
        );
        assert_eq!(secs(&["06:00-18:00"]), Some(12 * 3600));
        assert_eq!(secs(&["00:00-12:00", "12:00-24:00"]), None);
    }

    /// 2026-11-30 00:00 UTC.
    const MIDNIGHT: u64 = 1_796_083_200;

    fn at(h: u64, m: u64) -> u64 {
        MIDNIGHT + h * 3600 + m * 60
    }

    #[test]
    fn windows_read_as_radio_operators_write_them() {
        let s =
            Schedule::parse(&["06:00-07:30", "1800Z-1830Z", "*:15-*:25", "23:30-00:30"]).unwrap();
        assert_eq!(
            s.to_string(),
            "06:00-07:30, 18:00-18:30, *:15-*:25, 23:30-00:30 UTC"
        );
        assert!(Schedule::parse(&["18:00-24:00"]).is_ok());
        for (bad, says) in [
            ("6:00-7:00", "is not a window"),
            ("06:00", "is not a window"),
            ("06:00-*:10", "is not a window"),
            ("25:00-26:00", "25:00 is out of range"),
            ("06:61-07:00", "minute 61"),
            ("*:15-*:75", "minute 75"),
            ("24:00-01:00", "cannot start at 24:00"),
            ("06:00-06:00", "is empty"),
            ("00:00-24:00", "is empty"),
            ("*:10-*:10", "is empty"),
            ("0600-07:00-08:00", "is not a window"),
        ] {
            let e = Schedule::parse(&[bad]).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert_eq!(
            Schedule::parse::<&str>(&[]).unwrap_err(),
            ScheduleError::NoWindow
        );
        let long = "0".repeat(40);
        assert!(matches!(
            Schedule::parse(&[long.as_str()]),
            Err(ScheduleError::Form(t)) if t.len() == MAX_WINDOW_TEXT
        ));
    }

    #[test]
    fn a_session_may_start_only_inside_a_window() {
        let s = Schedule::parse(&["06:00-07:00", "18:00-18:30"]).unwrap();
        assert!(!s.is_open(at(5, 59)));
        assert!(s.is_open(at(6, 0)));
        assert!(s.is_open(at(6, 59) + 59));
        assert!(!s.is_open(at(7, 0)));
        assert_eq!(
            s.state_at(at(6, 48)),
            ScheduleState::Open {
                since: Some(at(6, 0)),
                until: Some(at(7, 0))
            }
        );
        assert_eq!(
            s.state_at(at(7, 0)),
            ScheduleState::Closed { opens: at(18, 0) }
        );
        // After the last window of the day, the first of the next.
        assert_eq!(
            s.state_at(at(20, 0) + 17),
            ScheduleState::Closed { opens: at(30, 0) }
        );
        assert_eq!(
            s.state_at(at(6, 48) + 30).describe(at(6, 48) + 30),
            "open until 07:00 UTC (in 12 min)"
        );
        assert_eq!(
            s.state_at(at(14, 58)).describe(at(14, 58)),
            "closed until 18:00 UTC (in 3 h 2 min)"
        );
    }

    #[test]
    fn windows_wrap_and_join() {
        // Across midnight, joined with the window after it.
        let s = Schedule::parse(&["23:30-00:30", "00:30-01:00"]).unwrap();
        assert_eq!(
            s.state_at(at(0, 10)),
            ScheduleState::Open {
                since: Some(MIDNIGHT - 30 * 60),
                until: Some(at(1, 0))
            }
        );
        // Every hour from :50 to :10.
        let h = Schedule::parse(&["*:50-*:10"]).unwrap();
        assert!(h.is_open(at(13, 55)) && h.is_open(at(14, 5)) && !h.is_open(at(14, 10)));
        assert_eq!(
            h.state_at(at(14, 20)),
            ScheduleState::Closed { opens: at(14, 50) }
        );
        // Windows that cover the day never close.
        let all = Schedule::parse(&["00:00-12:00", "12:00-24:00"]).unwrap();
        assert_eq!(
            all.state_at(at(3, 0)),
            ScheduleState::Open {
                since: None,
                until: None
            }
        );
        assert_eq!(all.state_at(at(3, 0)).describe(at(3, 0)), "open all day");
    }

    proptest! {
        /// Whatever the windows and the time: a closed schedule opens within a day, at a
        /// minute that is open and after which nothing was open; an open one was open from
        /// `since` and stays open until `until`, which is closed.
        #[test]
        fn state_agrees_with_is_open(
            raw in proptest::collection::vec((0u32..1440, 1u32..1440), 1..4),
            hourly in proptest::collection::vec((0u32..60, 1u32..60), 0..2),
            t in (2 * 86_400u64)..(400 * 86_400),
        ) {
            let mut windows: Vec<String> = raw
                .iter()
                .map(|(s, len)| {
                    let e = (s + len) % DAY;
                    format!("{:02}:{:02}-{:02}:{:02}", s / 60, s % 60, e / 60, e % 60)
                })
                .collect();
            windows.extend(hourly.iter().map(|(s, len)| format!("*:{s:02}-*:{:02}", (s + len) % 60)));
            let s = Schedule::parse(&windows).unwrap();
            // Its own display reads back as the same schedule.
            let shown = s.to_string();
            let again: Vec<&str> = shown.trim_end_matches(" UTC").split(", ").collect();
            prop_assert_eq!(&Schedule::parse(&again).unwrap(), &s);
            match s.state_at(t) {
                ScheduleState::Closed { opens } => {
                    prop_assert!(!s.is_open(t));
                    prop_assert!(opens > t && opens <= t + 86_400);
                    prop_assert!(s.is_open(opens));
                    prop_assert!(!s.is_open(opens - 1));
                    prop_assert!((t..opens).step_by(60).all(|x| !s.is_open(x)));
                }
                ScheduleState::Open { since: Some(since), until: Some(until) } => {
                    prop_assert!(s.is_open(t));
                    prop_assert!(since <= t && t < until);
                    prop_assert!((since..until).step_by(60).all(|x| s.is_open(x)));
                    prop_assert!(!s.is_open(until) && !s.is_open(since - 1));
                }
                ScheduleState::Open { .. } => {
                    prop_assert!((0..86_400).step_by(60).all(|x| s.is_open(t + x)));
                }
            }
            // The shortest window is the shortest open run of a day, as `state_at` sees each
            // from the minute it opens.
            let day = 3 * 86_400;
            let runs = (0..1440u64)
                .map(|m| day + m * 60)
                .filter(|&t| s.is_open(t) && !s.is_open(t - 60))
                .filter_map(|t| match s.state_at(t) {
                    ScheduleState::Open { since: Some(a), until: Some(b) } => Some(b - a),
                    _ => None,
                });
            prop_assert_eq!(s.shortest_window(), runs.min());
            // The longest gap is the longest wait from a minute that closes to the opening.
            let waits = (0..1440u64)
                .map(|m| day + m * 60)
                .filter(|&t| !s.is_open(t) && s.is_open(t - 60))
                .filter_map(|t| match s.state_at(t) {
                    ScheduleState::Closed { opens } => Some(opens - t),
                    ScheduleState::Open { .. } => None,
                });
            prop_assert_eq!(s.longest_gap(), waits.max());
        }
    }
}
