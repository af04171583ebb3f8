//! `skywave status`: what the operator wants to know at a glance, read from the spool.
//!
//! Works whether the gateway runs or not: the spool is opened in admin mode (no recovery, no
//! creation), and its owner lock tells whether a gateway process holds it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::SystemTime;

use skywave_spool::{QueueState, Room, Spool, SpoolConfig, unix_seconds};

use crate::config::Config;
use crate::hf::transfer::{Traffic, TransferRecord, day_by_peer, read_tail};

/// A snapshot of the spool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Status {
    /// True when a gateway process owns the spool.
    pub running: bool,
    /// Recipients waiting, per target ("lan", "peer:NAME").
    pub depth: BTreeMap<String, u64>,
    /// Messages in the live queue, held, and dead.
    pub queued: u64,
    /// Held messages.
    pub held: u64,
    /// Dead letters.
    pub dead: u64,
    /// The spool's free space against its reserve (`None`: it could not be measured).
    pub room: Option<Room>,
    /// Held targets.
    pub held_targets: Vec<String>,
    /// Age in seconds of the oldest live or held message.
    pub oldest_age: Option<u64>,
    /// The last sessions with HF peers (from `state_dir/transfers.jsonl`), oldest first.
    pub transfers: Vec<TransferRecord>,
    /// The last 24 hours' sessions per peer: ours to it, and its to us.
    pub day: BTreeMap<String, (Traffic, Traffic)>,
    /// What each HMTP link remembers of its peer across restarts (`state_dir/links/`), one
    /// line per peer, by name.
    pub links: Vec<String>,
    /// The peers with a radio schedule and where it stands now, one line each, by name
    /// (empty when the routing table cannot be read: `skywave routes check` says why).
    pub schedules: Vec<String>,
    /// The peers with a fallback, one line each, by name (empty when the routing table cannot
    /// be read).
    pub fallbacks: Vec<String>,
    /// LAN delivery to a smarthost: how its last round went (`None` for a Maildir).
    pub smarthost: Option<String>,
    /// The STARTTLS certificate file's dates, as `skywave check` says them, with `WARNING:`
    /// before one about to expire or out of its dates (`None` without STARTTLS).
    pub starttls: Option<String>,
    /// The running gateway serves another certificate than the file now holds.
    pub starttls_stale: bool,
}

/// Sessions shown by `skywave status`.
const SHOWN_TRANSFERS: usize = 10;

/// Reads the status of the spool the configuration names.
pub fn read(config: &Config) -> skywave_spool::Result<Status> {
    let spool = Spool::open_admin(
        config.spool_dir(),
        SpoolConfig {
            min_free_space: config.spool.min_free_space,
            ..SpoolConfig::default()
        },
    )?;
    let now = unix_seconds(SystemTime::now());
    let mut status = Status {
        running: spool.owned_elsewhere()?,
        room: spool.room().ok(),
        held_targets: spool
            .held_targets()?
            .iter()
            .map(ToString::to_string)
            .collect(),
        transfers: read_tail(&config.state_dir.join("transfers.jsonl"), SHOWN_TRANSFERS)
            .unwrap_or_default(),
        day: day_by_peer(
            &config.state_dir.join("transfers.jsonl"),
            now.saturating_sub(86_400) as f64,
        )
        .unwrap_or_default(),
        links: crate::hf::peer_memory::read_all(&config.state_dir.join("links"))
            .into_iter()
            .map(|(name, memory)| {
                let kept = crate::hf::tape_file::describe(&config.state_dir.join("links"), &name)
                    .map(|k| format!("; {k}"))
                    .unwrap_or_default();
                format!("{name}: {memory}{kept}")
            })
            .collect(),
        ..Status::default()
    };
    if let crate::config::Delivery::Smarthost { host, port, .. } = &config.delivery {
        let path = config.state_dir.join(crate::smarthost::ROUND_FILE);
        let report = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<crate::smarthost::RoundReport>(&b).ok());
        status.smarthost = Some(report.map_or_else(
            || format!("{}, no round yet", crate::smarthost::host_port(host, *port)),
            |r| r.describe(),
        ));
    }
    if let Some(tls) = &config.smtp.tls {
        status.starttls = crate::check::starttls(tls, SystemTime::now())
            .into_iter()
            .next()
            .map(|f| match f.level {
                crate::check::Level::Ok | crate::check::Level::Note => f.text,
                crate::check::Level::Warning | crate::check::Level::Error => {
                    format!("WARNING: {}", f.text)
                }
            });
        // A renewal the running gateway has not loaded yet.
        let in_force = std::fs::read(config.state_dir.join(crate::smtp_listener::IN_FORCE)).ok();
        if status.running && in_force.is_some_and(|pem| std::fs::read(&tls.cert).ok() != Some(pem))
        {
            status.starttls_stale = true;
        }
    }
    if let Ok(table) = skywave_route::RoutingTable::load(&config.routes) {
        status.schedules = schedules(&table, now);
        let heard = crate::heard::read(&config.state_dir);
        status.fallbacks = fallbacks(&table, &heard, now, |peer| {
            spool.awaiting_return(peer).ok().flatten()
        });
    }
    for entry in spool.entries()? {
        let entry = entry?;
        match entry.state {
            QueueState::Queued => status.queued += 1,
            QueueState::Held => status.held += 1,
            QueueState::Dead => status.dead += 1,
        }
        let Some(env) = entry.envelope else { continue };
        if entry.state == QueueState::Dead {
            continue;
        }
        let age = env.age(now);
        status.oldest_age = Some(status.oldest_age.map_or(age, |a| a.max(age)));
        if entry.state == QueueState::Queued {
            for r in env.recipients.iter().filter(|r| !r.state.is_final()) {
                *status.depth.entry(r.target.to_string()).or_insert(0) += 1;
            }
        }
    }
    Ok(status)
}

/// The spool's file system against its reserve, as `skywave status` and `skywave check` say
/// it.
pub fn disk_line(room: Option<Room>) -> String {
    match room {
        None => "not measured".to_owned(),
        Some(room) if room.exhausted() => {
            format!("{room}: NEW MAIL REFUSED (452 4.3.1) until space is freed")
        }
        Some(room) => format!("{room}: new mail taken"),
    }
}

/// The report printed by `skywave status`.
pub fn render(status: &Status) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "gateway: {}",
        if status.running {
            "running"
        } else {
            "not running"
        }
    );
    let _ = writeln!(
        out,
        "messages: {} queued, {} held, {} dead",
        status.queued, status.held, status.dead
    );
    let _ = writeln!(out, "spool disk: {}", disk_line(status.room));
    let _ = writeln!(
        out,
        "oldest message: {}",
        status
            .oldest_age
            .map_or_else(|| "none".to_owned(), |a| format!("{a} s"))
    );
    let _ = writeln!(
        out,
        "held targets: {}",
        if status.held_targets.is_empty() {
            "none".to_owned()
        } else {
            status.held_targets.join(", ")
        }
    );
    if let Some(line) = &status.smarthost {
        let _ = writeln!(out, "LAN smarthost: {line}");
    }
    if let Some(line) = &status.starttls {
        let _ = writeln!(out, "STARTTLS: {line}");
    }
    if status.starttls_stale {
        let _ = writeln!(
            out,
            "STARTTLS: WARNING: the certificate file changed after the running gateway loaded \
             it; SIGHUP (systemctl reload skywave) serves the new one"
        );
    }
    let _ = writeln!(out, "recipients waiting per target:");
    if status.depth.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for (target, n) in &status.depth {
        let _ = writeln!(out, "  {target:<20} {n}");
    }
    let _ = writeln!(out, "last sessions with HF peers:");
    if status.transfers.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for r in &status.transfers {
        let date = skywave_smtp::rfc5322_date(skywave_smtp::DateTime {
            unix_seconds: if r.start.is_finite() {
                r.start as i64
            } else {
                0
            },
            offset_minutes: 0,
        });
        let _ = writeln!(out, "  {date}: {r}");
    }
    let _ = writeln!(out, "the last 24 hours with HF peers (sent; received):");
    if status.day.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for (peer, (sent, received)) in &status.day {
        let _ = writeln!(out, "  {peer:<20} {}; {}", traffic(sent), traffic(received));
    }
    if !status.schedules.is_empty() {
        let _ = writeln!(
            out,
            "radio schedules (sessions and multicasts start only in a window):"
        );
        for line in &status.schedules {
            let _ = writeln!(out, "  {line}");
        }
    }
    if !status.fallbacks.is_empty() {
        let _ = writeln!(
            out,
            "fallbacks (mail waiting that long moves on; sooner while the peer does not answer):"
        );
        for line in &status.fallbacks {
            let _ = writeln!(out, "  {line}");
        }
    }
    let _ = writeln!(out, "HMTP peers, as remembered across restarts:");
    if status.links.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for line in &status.links {
        let _ = writeln!(out, "  {line}");
    }
    out
}

/// One line per peer and group with a radio schedule: its windows and where they stand at
/// `now`.
fn schedules(table: &skywave_route::RoutingTable, now: u64) -> Vec<String> {
    let peers = table
        .peers()
        .iter()
        .map(|p| (p.name.clone(), p.schedule.as_ref(), p.schedule_bypass));
    let groups = table.groups().iter().map(|g| {
        (
            format!("{} (multicast)", g.name),
            g.schedule.as_ref(),
            g.schedule_bypass,
        )
    });
    peers
        .chain(groups)
        .filter_map(|(name, schedule, bypass)| {
            let schedule = schedule?;
            let bypass = bypass
                .map(|b| format!("; priority {b} and above at any time"))
                .unwrap_or_default();
            Some(format!(
                "{name:<20} {schedule}: {}{bypass}",
                schedule.state_at(now).describe(now)
            ))
        })
        .collect()
}

/// One line per peer with a fallback: after how long its mail goes where, what our sessions
/// last heard from the peer (`heard`, at unix second `now`), and whether mail that fell back
/// from it waits to come back (`awaiting_return`, [`skywave_spool::Spool::awaiting_return`]).
fn fallbacks(
    table: &skywave_route::RoutingTable,
    heard: &std::collections::BTreeMap<String, crate::heard::PeerHeard>,
    now: u64,
    awaiting_return: impl Fn(&str) -> Option<u64>,
) -> Vec<String> {
    table
        .peers()
        .iter()
        .filter_map(|p| {
            let fb = p.fallback.as_ref()?;
            let h = heard.get(&p.name).copied().unwrap_or_default();
            let down = if h.silent_for(fb.after, now) {
                ": silent that long, what it is tried for moves at once"
            } else {
                ""
            };
            // Mail an answer would bring back (one since the move brings it at the next look).
            let home = match awaiting_return(&p.name) {
                Some(at) if h.answered < Some(at) && fb.probe_every > 0 => format!(
                    "; mail that fell back while it was silent waits to come back: probed every {}",
                    skywave_route::duration_text(fb.probe_every)
                ),
                Some(at) if h.answered < Some(at) => "; mail that fell back while it was silent \
                    comes back when a session to it is answered"
                    .to_owned(),
                _ => String::new(),
            };
            Some(format!(
                "{:<20} after {}: to {}; {}{down}{home}",
                p.name,
                skywave_route::duration_text(fb.after),
                fb.peer,
                h.describe(now, span)
            ))
        })
        .collect()
}

/// A span of time as an operator reads it: seconds, minutes, or hours and minutes.
fn span(secs: u64) -> String {
    match secs {
        0..120 => format!("{secs} s"),
        120..7200 => format!("{} min", secs / 60),
        _ => format!("{} h {:02} min", secs / 3600, secs / 60 % 60),
    }
}

/// One direction's day with a peer: sessions, messages, bytes on the air, session time.
fn traffic(t: &Traffic) -> String {
    if t.sessions == 0 {
        return "nothing".to_owned();
    }
    let time = span(t.seconds.round() as u64);
    format!(
        "{} session(s), {} message(s), {} on the air, {time}",
        t.sessions,
        t.messages,
        skywave_spool::Bytes(t.wire_bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spool_disk_says_whether_new_mail_is_taken() {
        let line = |room| {
            render(&Status {
                room,
                ..Status::default()
            })
            .lines()
            .find(|l| l.starts_with("spool disk: "))
            .map(str::to_owned)
        };
        let space = |bytes| skywave_spool::Space { bytes, files: None };
        assert_eq!(
            line(Some(Room {
                space: space(12_345_678_901),
                reserve: 100_000_000
            })),
            Some("spool disk: 12.3 GB free, 100 MB kept in reserve: new mail taken".into())
        );
        assert_eq!(
            line(Some(Room {
                space: space(99_000_000),
                reserve: 100_000_000
            })),
            Some(
                "spool disk: 99.0 MB free, 100 MB kept in reserve: NEW MAIL REFUSED (452 4.3.1) \
                 until space is freed"
                    .into()
            )
        );
        assert_eq!(line(None), Some("spool disk: not measured".into()));
    }

    #[test]
    fn peers_with_a_schedule_say_whether_their_window_is_open() {
        let table = skywave_route::RoutingTable::parse(
            "routes.toml",
            "[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n\
             schedule = [\"06:00-07:00\", \"18:00-18:30\"]\nschedule_bypass = \"flash\"\n\
             [[peer]]\nname = \"ship2\"\nnode = \"0.0.1.2\"\nprotocol = \"hmtp\"\n\
             [[peer]]\nname = \"ship3\"\nnode = \"0.0.1.3\"\nprotocol = \"hmtp\"\n\
             [[route]]\nmatch = \"a.example\"\nto = \"shore\"\n\
             [[route]]\nmatch = \"b.example\"\nto = \"ship2\"\n\
             [[group]]\nname = \"fleet\"\nnode = \"16.0.9.9\"\nmembers = [\"ship2\", \"ship3\"]\n\
             schedule = [\"*:00-*:03\"]\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // 2026-11-30 14:58 UTC.
        let now = 1_796_083_200 + 14 * 3600 + 58 * 60;
        let status = Status {
            schedules: schedules(&table, now),
            ..Status::default()
        };
        let shown = render(&status);
        assert!(
            shown.contains(
                "radio schedules (sessions and multicasts start only in a window):\n  shore                \
                 06:00-07:00, 18:00-18:30 UTC: closed until 18:00 UTC (in 3 h 2 min); \
                 priority 4 (flash) and above at any time\n  fleet (multicast)    \
                 *:00-*:03 UTC: closed until 15:00 UTC (in 2 min)\n"
            ),
            "{shown}"
        );
        // A peer without one is not listed, and without any the section is left out.
        assert!(!shown.contains("ship2"), "{shown}");
        assert!(!render(&Status::default()).contains("radio schedules"));
    }

    #[test]
    fn peers_with_a_fallback_say_where_their_mail_goes() {
        let table = skywave_route::RoutingTable::parse(
            "routes.toml",
            "[[peer]]\nname = \"shore-sat\"\nprotocol = \"smtp\"\ntcp_address = \"mail.shore:25\"\n\
             fallback = \"shore-hf\"\nfallback_after = 5400\n\
             [[peer]]\nname = \"shore-hf\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n\
             [[route]]\nmatch = \"a.example\"\nto = \"shore-sat\"\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut heard = std::collections::BTreeMap::new();
        let status = Status {
            fallbacks: fallbacks(&table, &heard, 10_000, |_| None),
            ..Status::default()
        };
        assert!(
            render(&status).contains(
                "fallbacks (mail waiting that long moves on; sooner while the peer does not answer):\n  \
                 shore-sat            after 90 min: to shore-hf; never answered yet\n"
            ),
            "{}",
            render(&status)
        );
        // What the links heard: silent for its fallback_after, it is down.
        heard.insert(
            "shore-sat".to_owned(),
            crate::heard::PeerHeard {
                answered: Some(1_000),
                silent_since: Some(4_000),
                unanswered: 7,
            },
        );
        assert_eq!(
            fallbacks(&table, &heard, 9_400, |_| None),
            [
                "shore-sat            after 90 min: to shore-hf; answered 2 h 20 min ago; \
              7 attempt(s) unanswered since 90 min ago: silent that long, what it is tried \
              for moves at once"
            ]
        );
        assert_eq!(
            fallbacks(&table, &heard, 9_000, |_| None),
            [
                "shore-sat            after 90 min: to shore-hf; answered 2 h 13 min ago; \
              7 attempt(s) unanswered since 83 min ago"
            ]
        );
        // Mail that fell back at 9_200 waits to come back: a peer over TCP/IP is probed.
        let fell_back = |p: &str| (p == "shore-sat").then_some(9_200);
        assert_eq!(
            fallbacks(&table, &heard, 9_400, fell_back),
            [
                "shore-sat            after 90 min: to shore-hf; answered 2 h 20 min ago; \
              7 attempt(s) unanswered since 90 min ago: silent that long, what it is tried \
              for moves at once; mail that fell back while it was silent waits to come back: \
              probed every 1 min"
            ]
        );
        // Not when it answered after the move: the fallback's next look brings it back.
        heard.insert(
            "shore-sat".to_owned(),
            crate::heard::PeerHeard {
                answered: Some(9_300),
                ..crate::heard::PeerHeard::default()
            },
        );
        assert_eq!(
            fallbacks(&table, &heard, 9_400, fell_back),
            ["shore-sat            after 90 min: to shore-hf; answered 100 s ago"]
        );
        assert!(!render(&Status::default()).contains("fallbacks"));
    }

    #[test]
    fn a_day_per_peer_reads_as_an_operator_counts_it() {
        let none = render(&Status::default());
        assert!(
            none.contains("the last 24 hours with HF peers (sent; received):\n  (none)\n"),
            "{none}"
        );
        let mut day = BTreeMap::new();
        day.insert(
            "shore".to_owned(),
            (
                Traffic {
                    sessions: 14,
                    messages: 52,
                    wire_bytes: 123_456,
                    seconds: 3725.4,
                },
                Traffic::default(),
            ),
        );
        day.insert(
            "ship2".to_owned(),
            (
                Traffic::default(),
                Traffic {
                    sessions: 1,
                    messages: 1,
                    wire_bytes: 900,
                    seconds: 7300.0,
                },
            ),
        );
        let out = render(&Status {
            day,
            ..Status::default()
        });
        for line in [
            "  ship2                nothing; 1 session(s), 1 message(s), 900 B on the air, 2 h 01 min\n",
            "  shore                14 session(s), 52 message(s), 123 kB on the air, 62 min; nothing\n",
        ] {
            assert!(out.contains(line), "{out}");
        }
    }

    #[test]
    fn the_peers_links_remember_are_listed_last() {
        let none = render(&Status::default());
        assert!(
            none.ends_with("HMTP peers, as remembered across restarts:\n  (none)\n"),
            "{none}"
        );
        let status = Status {
            links: vec![
                "shore: cut marker (XCUT): yes; dictionary: f6ea95f6; last session answered".into(),
            ],
            ..Status::default()
        };
        let out = render(&status);
        assert!(
            out.ends_with(
                "HMTP peers, as remembered across restarts:\n  shore: cut marker (XCUT): yes; dictionary: f6ea95f6; last session answered\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn the_starttls_certificate_is_dated_in_the_status() {
        let dir = tempfile::tempdir().unwrap();
        crate::check::self_signed_files(dir.path());
        std::fs::write(
            dir.path().join("routes.toml"),
            "[[route]]\nmatch = \"*\"\nto = \"lan\"\n",
        )
        .unwrap();
        let config = crate::config::parse(
            "skywave.toml",
            "hostname = \"gw.ship.example\"\nstate_dir = \"state\"\nroutes = \"routes.toml\"\n\
             [smtp.tls]\ncert = \"cert.pem\"\nkey = \"key.pem\"\n",
            dir.path(),
        )
        .unwrap();
        drop(Spool::open(config.spool_dir(), SpoolConfig::default()).unwrap());
        let status = read(&config).unwrap();
        let line = format!(
            "STARTTLS: {} and {} load; the certificate is valid until 4096-01-01\n",
            dir.path().join("cert.pem").display(),
            dir.path().join("key.pem").display()
        );
        assert!(render(&status).contains(&line), "{}", render(&status));
        let soon = Status {
            starttls: Some("WARNING: c.pem and k.pem load; the certificate expires on ...".into()),
            ..Status::default()
        };
        assert!(render(&soon).contains("\nSTARTTLS: WARNING: c.pem"));
        // Not running, nothing in force to compare: no word of a renewal.
        assert!(!render(&status).contains("changed after"));
        let stale = Status {
            starttls_stale: true,
            ..Status::default()
        };
        assert!(render(&stale).contains(
            "STARTTLS: WARNING: the certificate file changed after the running gateway loaded \
             it; SIGHUP (systemctl reload skywave) serves the new one\n"
        ));
    }

    #[test]
    fn the_smarthost_line_says_how_its_last_round_went() {
        use crate::outcome::Outcome;
        use crate::smarthost::RoundReport;
        let mut r = RoundReport {
            host: "relay.lan:587".into(),
            at: 1_796_083_200 + 9 * 3600 + 12 * 60,
            tls: true,
            offers: Some(Vec::new()),
            ..RoundReport::default()
        };
        r.count(&Outcome::Deferred(
            "smarthost relay.lan:587: AUTH as \"gw\" failed (permanent error (535): 5.7.8 no)"
                .into(),
        ));
        r.count(&Outcome::Deferred("later".into()));
        let status = Status {
            smarthost: Some(r.describe()),
            ..Status::default()
        };
        let shown = render(&status);
        assert!(
            shown.contains(
                "LAN smarthost: relay.lan:587, last round Tue, 1 Dec 2026 09:12:00 +0000: 0 delivered, \
                 2 deferred, 0 failed (TLS; offers nothing this gateway uses); smarthost relay.lan:587: \
                 AUTH as \"gw\" failed (permanent error (535): 5.7.8 no)\n"
            ),
            "{shown}"
        );
        r.problem = None;
        r.tls = false;
        r.offers = Some(vec!["DSN".into(), "SIZE".into()]);
        r.deferred = 0;
        r.delivered = 3;
        assert!(
            r.describe()
                .ends_with(": 3 delivered, 0 deferred, 0 failed (plain; offers DSN, SIZE)"),
            "{}",
            r.describe()
        );
        // A plain connection to a server that offers none of those is still a connection.
        r.offers = Some(Vec::new());
        assert!(
            r.describe()
                .ends_with("(plain; offers nothing this gateway uses)"),
            "{}",
            r.describe()
        );
        r.offers = None;
        assert!(
            r.describe().ends_with("(no connection)"),
            "{}",
            r.describe()
        );
        assert!(!render(&Status::default()).contains("LAN smarthost"));
    }
}
