//! The runner API: one call runs one scenario under one condition with one workload, in its
//! own paused tokio runtime, and returns what the publications measured ([`RunResult`]).
//!
//! Sits above the scenario runners (HMTP and CFTP over the emulated 5066 subnetwork, SMTP over
//! TCP/IP in [`crate::tcp`]) and below the sweeps and the CLI.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

use crate::model::{
    Condition, HmtpCompression, RunResult, Scenario, SmtpCompression, TcpSettings, Workload,
};
use crate::stack::block_on_paused;
use crate::workload::WorkloadError;

/// A run could not be carried out (as opposed to a run that delivered less than it carried,
/// which is a [`RunResult`] with `delivered < expected`).
#[derive(Debug, Error)]
pub enum BenchError {
    /// A fleet run could not be set up.
    #[error("fleet: {0}")]
    Fleet(String),
    /// The condition cannot be emulated (unknown rate, interleaver or channel).
    #[error("bad condition: {0}")]
    Condition(String),
    /// The workload is empty or could not be built.
    #[error("workload: {0}")]
    Workload(#[from] WorkloadError),
    /// The workload holds no message.
    #[error("the workload holds no message")]
    EmptyWorkload,
    /// The emulated subnetwork refused its configuration.
    #[error("emulator: {0}")]
    Net(#[from] skywave_emu::net::NetError),
    /// A SIS client could not bind or submit.
    #[error("SIS: {0}")]
    Sis(String),
    /// A protocol session refused its settings or input.
    #[error("session: {0}")]
    Session(String),
    /// An SMTP-over-TCP run could not be carried out.
    #[error(transparent)]
    Tcp(#[from] crate::tcp::TcpBenchError),
    /// The tokio runtime of the run could not be built.
    #[error("cannot build the run's tokio runtime: {0}")]
    Runtime(std::io::Error),
}

/// What a run yielded, with the extra figures the goal lines need.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunDetail {
    /// The published measure.
    pub result: RunResult,
    /// Simulated seconds from submission until the sending side knew the outcome of every
    /// message (the replies or acknowledgements arrived).
    pub session_seconds: f64,
    /// Simulated seconds from submission to each message's delivery (`None`: not delivered).
    pub deliveries: Vec<Option<f64>>,
    /// Application bytes the sending side handed to the bearer (compressed stream, gzip'd
    /// files), U_PDU payloads only.
    pub bytes_sent: u64,
    /// Application bytes coming back (replies, acknowledgements).
    pub bytes_received: u64,
}

impl Scenario {
    /// Every scenario, in the order the tables list them.
    pub const ALL: [Scenario; 10] = [
        Scenario::SmtpTcpModem,
        Scenario::SmtpTcp5066 {
            dup_filter: true,
            compression: SmtpCompression::None,
        },
        Scenario::SmtpTcp5066 {
            dup_filter: false,
            compression: SmtpCompression::None,
        },
        Scenario::SmtpTcp5066 {
            dup_filter: true,
            compression: SmtpCompression::Xlzw,
        },
        Scenario::SmtpTcp5066 {
            dup_filter: true,
            compression: SmtpCompression::Deflate,
        },
        Scenario::Hmtp5066 {
            compression: HmtpCompression::None,
            resume: true,
        },
        Scenario::Hmtp5066 {
            compression: HmtpCompression::Lzw16,
            resume: true,
        },
        Scenario::Hmtp5066 {
            compression: HmtpCompression::Deflate,
            resume: true,
        },
        Scenario::Hmtp5066 {
            compression: HmtpCompression::DeflateDict,
            resume: true,
        },
        Scenario::Cftp5066,
    ];

    /// The scenario's name on the command line and in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::SmtpTcpModem => "smtp-tcp-modem",
            Scenario::SmtpTcp5066 {
                dup_filter,
                compression,
            } => match (compression, dup_filter) {
                (SmtpCompression::None, true) => "smtp-tcp-5066",
                (SmtpCompression::None, false) => "smtp-tcp-5066-nofilter",
                (SmtpCompression::Xlzw, true) => "smtp-tcp-5066-xlzw",
                (SmtpCompression::Xlzw, false) => "smtp-tcp-5066-xlzw-nofilter",
                (SmtpCompression::Deflate, true) => "smtp-tcp-5066-deflate",
                (SmtpCompression::Deflate, false) => "smtp-tcp-5066-deflate-nofilter",
            },
            Scenario::Hmtp5066 {
                compression,
                resume,
            } => match (compression, resume) {
                (HmtpCompression::None, true) => "hmtp-5066-none",
                (HmtpCompression::None, false) => "hmtp-5066-none-noresume",
                (HmtpCompression::Lzw16, true) => "hmtp-5066-lzw16",
                (HmtpCompression::Lzw16, false) => "hmtp-5066-lzw16-noresume",
                (HmtpCompression::Deflate, true) => "hmtp-5066-deflate",
                (HmtpCompression::Deflate, false) => "hmtp-5066-deflate-noresume",
                (HmtpCompression::DeflateDict, true) => "hmtp-5066-deflate-dict",
                (HmtpCompression::DeflateDict, false) => "hmtp-5066-deflate-dict-noresume",
            },
            Scenario::Cftp5066 => "cftp-5066",
        }
    }

    /// The TCP profile the scenario runs with unless told otherwise: `jnos-1998` on the raw
    /// modem (the scenario is JNOS as NTIA measured it), `best-case` over 5066 (the baseline the
    /// headline speed-ups are quoted against).
    pub fn default_profile(self) -> crate::model::TcpProfile {
        match self {
            Scenario::SmtpTcpModem => crate::model::TcpProfile::Jnos1998,
            _ => crate::model::TcpProfile::BestCase,
        }
    }

    /// The same scenario with the SIS client's duplicate filter off (`None`: not a 5066 TCP
    /// scenario).
    pub fn without_filter(self) -> Option<Scenario> {
        match self {
            Scenario::SmtpTcp5066 { compression, .. } => Some(Scenario::SmtpTcp5066 {
                dup_filter: false,
                compression,
            }),
            _ => None,
        }
    }

    /// The same scenario without `XRESUME` (`None`: not an HMTP scenario).
    pub fn without_resume(self) -> Option<Scenario> {
        match self {
            Scenario::Hmtp5066 { compression, .. } => Some(Scenario::Hmtp5066 {
                compression,
                resume: false,
            }),
            _ => None,
        }
    }

    /// True for the SMTP-over-TCP/IP scenarios (the ones that use [`TcpSettings`]).
    pub fn is_tcp(self) -> bool {
        matches!(self, Scenario::SmtpTcpModem | Scenario::SmtpTcp5066 { .. })
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scenario name that is not one of [`Scenario::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "unknown scenario {0:?} (smtp-tcp-modem, smtp-tcp-5066[-xlzw|-deflate][-nofilter], hmtp-5066-none, hmtp-5066-lzw16, hmtp-5066-deflate, hmtp-5066-deflate-dict, cftp-5066)"
)]
pub struct UnknownScenario(pub String);

impl FromStr for Scenario {
    type Err = UnknownScenario;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        let alias = match t.as_str() {
            "hmtp-5066-lzw" => "hmtp-5066-lzw16",
            "hmtp-5066-plain" => "hmtp-5066-none",
            other => other,
        };
        Scenario::ALL
            .into_iter()
            .chain(
                Scenario::ALL
                    .into_iter()
                    .filter_map(Scenario::without_filter),
            )
            .chain(
                Scenario::ALL
                    .into_iter()
                    .filter_map(Scenario::without_resume),
            )
            .find(|sc| sc.name() == alias)
            .ok_or_else(|| UnknownScenario(s.to_string()))
    }
}

/// Runs one scenario under one condition with one workload, in its own paused current-thread
/// tokio runtime (so runs are independent, deterministic for a seed, and fast).
pub fn run(
    scenario: Scenario,
    cond: &Condition,
    tcp: &TcpSettings,
    work: &Workload,
) -> Result<RunResult, BenchError> {
    run_detailed(scenario, cond, tcp, work).map(|d| d.result)
}

/// [`run`], with the extra figures of [`RunDetail`].
pub fn run_detailed(
    scenario: Scenario,
    cond: &Condition,
    tcp: &TcpSettings,
    work: &Workload,
) -> Result<RunDetail, BenchError> {
    if work.messages.is_empty() {
        return Err(BenchError::EmptyWorkload);
    }
    match scenario {
        Scenario::Hmtp5066 {
            compression,
            resume,
        } => block_on_paused(crate::hmtp5066::run(cond, work, compression, resume))?,
        Scenario::Cftp5066 => block_on_paused(crate::cftp5066::run(cond, work))?,
        Scenario::SmtpTcpModem => run_modem_with_cache(cond, tcp, work, [None, None]).map(|r| r.0),
        Scenario::SmtpTcp5066 {
            dup_filter,
            compression,
        } => {
            let opts = crate::tcp::TcpRunOptions {
                compression,
                ..crate::tcp::TcpRunOptions::default()
            };
            let r = block_on_paused(crate::tcp::run_smtp_tcp_5066_with(
                cond, tcp, work, dup_filter, &opts,
            ))??;
            Ok(tcp_detail(r))
        }
    }
}

/// One `smtp-tcp-modem` run between hosts that have spoken before: each host's first
/// connection starts from what it cached of the other's round trip (`cache`, ship then shore;
/// JNOS's `RTTCACHE`, honoured where [`TcpSettings::rtt_cache`] is set), and the caches the
/// run ends with come back for the next run between the same hosts.
pub fn run_modem_with_cache(
    cond: &Condition,
    tcp: &TcpSettings,
    work: &Workload,
    cache: crate::tcp::HostRttCache,
) -> Result<(RunDetail, crate::tcp::HostRttCache), BenchError> {
    if work.messages.is_empty() {
        return Err(BenchError::EmptyWorkload);
    }
    let opts = crate::tcp::TcpRunOptions {
        rtt_cache: cache,
        ..crate::tcp::TcpRunOptions::default()
    };
    let r = block_on_paused(crate::tcp::run_smtp_tcp_modem_with(cond, tcp, work, &opts))??;
    let cache = r.rtt_cache;
    Ok((tcp_detail(r), cache))
}

/// The detail of a TCP run: the session is the connection (first SYN to last ACK); the bytes
/// handed to the bearer are not counted there.
fn tcp_detail(r: crate::tcp::TcpRunReport) -> RunDetail {
    RunDetail {
        session_seconds: r.connection_seconds,
        deliveries: r.deliveries,
        result: r.result,
        bytes_sent: 0,
        bytes_received: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TcpProfile;

    /// The cliff for the 5066 scenarios: at 0 dB on ITU-R Good nothing gets through at
    /// 2400 bit/s. Each HMTP session ends when the ship's node gives up on the link (its first
    /// transmission and 10 retries unanswered), and the ship tries again after its spool's
    /// backoff (300, 600, 1200 s) until the next retry would start after the time limit (at
    /// 2487.2 s, four sessions). TCP's connection outlives the losses: each resent SYN makes
    /// the link again, until the TCP gives up by its own rule (`isode-stock`: Linux's
    /// `tcp_syn_retries`, its sixth resend unanswered 127 s after the first SYN) or, never
    /// giving up (`best-case`), at the time limit (4535 s). Virtual time
    /// is deterministic, so the figures are pinned: what `compare --scenarios
    /// hmtp-5066-deflate,smtp-tcp-5066 --snr 0 --rate 2400 --channel good --sizes 14025 --seeds
    /// 1` prints (with `--tcp-profile isode-stock` for the second TCP row).
    #[test]
    fn where_nothing_gets_through_each_stack_stops_by_its_own_rule() {
        let cond = Condition {
            channel: "good".into(),
            snr_db: 0.0,
            rate_bps: 2400,
            interleaver: "short".into(),
            seed: 1,
            segment_size: crate::sweep::DEFAULT_SEGMENT,
            modem: None,
            turnaround: None,
            cas1: false,
            link_idle: None,
            default_ttl: None,
            ip_ttl: None,
            changes: Default::default(),
        };
        let work = crate::workload::isode(14025, 1, 1).unwrap();
        let limit = crate::stack::time_limit(&cond, &work).as_secs_f64();
        assert!((limit - 4535.0).abs() < 0.1, "{limit}");
        let tcp_5066 = Scenario::SmtpTcp5066 {
            dup_filter: true,
            compression: SmtpCompression::None,
        };
        let hmtp = Scenario::Hmtp5066 {
            compression: HmtpCompression::Deflate,
            resume: true,
        };
        for (scenario, profile, seconds, transmissions) in [
            (hmtp, hmtp.default_profile(), 2487.2, 44),
            (tcp_5066, TcpProfile::BestCase, 4535.0, 44),
            (tcp_5066, TcpProfile::IsodeStock, 127.0, 23),
        ] {
            let tcp = profile.settings(cond.rate_bps);
            let r = run(scenario, &cond, &tcp, &work).unwrap();
            println!("{scenario} {profile:?}: {r:?}");
            assert_eq!((r.delivered, r.expected), (0, 1), "{scenario}: {r:?}");
            assert_eq!(r.transmissions, transmissions, "{scenario}: {r:?}");
            assert!(
                (r.seconds - seconds).abs() < 0.1,
                "{scenario}: {} s, expected {seconds} s",
                r.seconds
            );
        }
    }

    #[test]
    fn scenario_names_round_trip() {
        for s in Scenario::ALL {
            assert_eq!(s.name().parse::<Scenario>(), Ok(s));
            assert_eq!(s.to_string(), s.name());
        }
        assert_eq!(
            "HMTP-5066-LZW".parse::<Scenario>(),
            Ok(Scenario::Hmtp5066 {
                compression: HmtpCompression::Lzw16,
                resume: true,
            })
        );
        for s in Scenario::ALL
            .into_iter()
            .filter_map(Scenario::without_resume)
        {
            assert!(s.name().ends_with("-noresume"), "{s}");
            assert_eq!(s.name().parse::<Scenario>(), Ok(s));
        }
        assert_eq!(
            "hmtp-5066-deflate-noresume".parse::<Scenario>(),
            Ok(Scenario::Hmtp5066 {
                compression: HmtpCompression::Deflate,
                resume: false,
            })
        );
        assert!("smtp".parse::<Scenario>().is_err());
        assert!(Scenario::SmtpTcpModem.is_tcp());
        assert!(!Scenario::Cftp5066.is_tcp());
    }
}
