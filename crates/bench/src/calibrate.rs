//! Calibration: every published condition of `calibration/` re-run in the emulator, each figure
//! computed as the publication computed it and printed beside the published one with the
//! ratio, plus the project's goal lines.
//!
//! - `ntia-jnos-table5.csv`: `smtp-tcp-modem` (JNOS over the raw modem), ITU-R Good at 15 dB,
//!   short interleaver, JNOS TCP (MSS 216, MTU 256, IRTT 60 s, maxwait 90 s at 1200 bit/s and
//!   360 s at 300 bit/s, the row's window), ten mails with the row's text attachment, each its
//!   own connection, five from each host as NTIA sent them, each connection after the first
//!   starting from the round trip its hosts cached (JNOS's `RTTCACHE`); throughput as NTIA
//!   computed it (attachment bits over first SYN to last ACK), averaged.
//! - `isode-smtp-vs-coacp142.csv`: one message at a time over a clean 1200 bit/s link (AWGN at
//!   30 dB), once with the short and once with the long interleaver (Isode did not say which
//!   its modems used); seconds from submission to delivery. The `smtp` column is run
//!   as `smtp-tcp-5066` with the `isode-stock` TCP profile (MSS 1460, MTU 1500, a stock Linux
//!   of 2012 on skywave's TCP: its receive window, ten segments at first and autotuned, CUBIC
//!   from ten segments, classic Nagle, Linux's delayed ACK, timestamps, SACK, RTO 1 s initially
//!   and 200 ms to 120 s: our assumption for the hosts Isode used; see
//!   [`crate::tcp::profile`]); the `co_acp142` column
//!   (an HF-native protocol with compression) is set against `hmtp-5066-deflate` and
//!   `cftp-5066`.
//!
//! - `isode-ip-over-5066.csv`: [`crate::udp5066`]'s flood (`udp-5066`) for every row, on the
//!   clean channel with both interleavers; UDP payload bit/s in the steady state. Where a row
//!   has the overhead measured on STANAG 5066 directly, the same flood of U_PDUs straight to
//!   the node (`unidata-5066`): 100 % less the U_PDU bits delivered per second over the rate.
//! - `isode-tcp-over-5066.csv`: one bulk TCP stream ([`crate::tcp::bulk`], `tcp-bulk-5066`) for
//!   [`BULK_TCP_RUN`] with the `isode-stock` profile at the row's MTU, both interleavers: final
//!   throughput, minutes to 50 % and 80 % of it, seconds to the first data.
//!
//! Every Isode row runs on [`Stations`], the CLI's default being [`ISODE_STATIONS`] (CAS-1 link
//! making, as Isode's servers without ALE did; [`ISODE_SEGMENT`]-byte C_PDU segments, what
//! deployed servers typically use; the modem's turnaround; links kept once made).
//! `--turnaround`, `--no-cas1`, `--link-idle` and `--segment-size` change them for all of
//! Isode's rows at once, to see what a turnaround, the link making, a soft-link timeout or the
//! segment size does to every table; the goal lines keep the benchmark's defaults.
//!
//! Below the count of ratio rows in band, per source, the table counts Isode's rows per paper
//! and interleaver ([`Calibration::interleaver_counts`]): neither paper says which interleaver
//! its stations used, and which one each paper's figures fit is evidence of it, where a
//! count over both interleavers at once can only blur it.
//!
//! `modem-required-snr.csv` is printed from an independent fading sample (the curves are fitted
//! and asserted in `skywave-emu`'s calibration tests), and `channel-profiles.csv` by measuring
//! each profile's frequency spread on the fading the emulator generates for it
//! ([`channel_comparisons`]); neither counts among the ratio rows, which weigh performance.
//!
//! Goal lines: the speed-up of `hmtp-5066-deflate` at 386 and 14025 bytes over
//! `smtp-tcp-5066-deflate` with the `best-case` TCP profile (the same deflate on both sides, and
//! the most TCP can do: the goals, 3x and 1.5x with the short interleaver), and over
//! `smtp-tcp-5066` with `isode-stock` (plain SMTP, the historical lines), and
//! `hmtp-5066-deflate` on the clean channel against the bound "the compressed bytes'
//! airtime plus two transmissions' fixed overheads", computed with [`ModemConfig::plan`]: the
//! planned submission transmission (its compressed bytes, with key-up, preamble, EOM, flush and
//! whole interleaver blocks), the receiver's decode time and the turnaround, then the planned
//! reply transmission and its decode time.
//!
//! Sits above [`crate::runner`]; the CLI's `calibrate` prints [`Calibration::markdown`].

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use skywave_emu::modem::ModemConfig;
use thiserror::Error;

use crate::model::{
    ChannelChanges, Condition, HmtpCompression, Scenario, SmtpCompression, TcpOverrides,
    TcpProfile, TcpSettings, Workload,
};
use crate::runner::{BenchError, RunDetail, run_detailed, run_modem_with_cache};
use crate::stack::modem_config;
use crate::sweep::{DEFAULT_SEGMENT, jnos_tcp};
use crate::tcp::bulk::{BulkTcpReport, run_bulk_tcp_5066};
use crate::udp5066::{Traffic, UdpFlood, run_udp_flood};
use crate::workload::{isode, ntia};

/// File name of the NTIA table.
pub const NTIA_FILE: &str = "ntia-jnos-table5.csv";
/// File name of the Isode table.
pub const ISODE_FILE: &str = "isode-smtp-vs-coacp142.csv";

/// File name of the Isode UDP-over-5066 table.
pub const ISODE_IP_FILE: &str = "isode-ip-over-5066.csv";

/// File name of the Isode bulk-TCP-over-5066 table.
pub const ISODE_TCP_FILE: &str = "isode-tcp-over-5066.csv";
/// The modem's required-SNR table (optional in the directory: when it is there, every figure
/// is compared, and the MIL-STD-188-110A-minimum generation's table with it).
pub const MODEM_FILE: &str = "modem-required-snr.csv";
/// The Watterson channel profiles (optional in the directory, as the modem table): each
/// profile's frequency spread is compared with the one measured on the emulator's fading.
pub const CHANNEL_FILE: &str = "channel-profiles.csv";
/// Seed of the channels the first profile's frequency spread is measured on (the next one's
/// is the next seed, and so on).
pub const CHANNEL_SAMPLE_SEED: u64 = 0x5BEAD;
/// Seed of the fading sample the modem tables are checked on: not the reference sample the
/// curves were fitted on (`skywave_emu::calibration::REFERENCE_SEED`), so the figures are a
/// prediction, not a fit residual.
pub const MODEM_SAMPLE_SEED: u64 = 0xBADC_0FFE;

/// Simulated length of each bulk TCP run: longer than the slowest published approach to the
/// final throughput (65.5 min to 80 % at 9600 bit/s, MTU 500).
pub const BULK_TCP_RUN: Duration = Duration::from_secs(2 * 3600);

/// Messages per NTIA condition.
pub const NTIA_MESSAGES: usize = 10;

/// A calibration file could not be read.
#[derive(Debug, Error)]
pub enum CalibrationError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line does not have the expected fields.
    #[error("{file} line {line}: {reason}")]
    Parse {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        reason: String,
    },
}

/// One row of the NTIA table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NtiaRow {
    /// Modem rate, bit/s.
    pub modem_bps: u32,
    /// TCP window, bytes.
    pub tcp_window_bytes: u32,
    /// Attachment size, bytes.
    pub attachment_bytes: usize,
    /// Published throughput, bit/s.
    pub throughput_bps: f64,
}

/// One row of the Isode table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IsodeRow {
    /// Link rate, bit/s.
    pub link_bps: u32,
    /// Message size, bytes.
    pub message_bytes: usize,
    /// Messages.
    pub messages: usize,
    /// Published SMTP-over-TCP-over-5066 seconds.
    pub smtp_seconds: f64,
    /// Published CO-ACP 142 seconds.
    pub co_acp142_seconds: f64,
}

/// One row of the Isode UDP-over-5066 table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IsodeIpRow {
    /// Link rate, bit/s.
    pub link_bps: u32,
    /// UDP payload bytes per datagram.
    pub pdu_bytes: usize,
    /// Published UDP payload throughput, bit/s.
    pub throughput_bps: f64,
    /// The overhead the same authors measured on STANAG 5066 unit data of this size directly
    /// (no IP), percent of the link's rate, where they measured one.
    pub direct_overhead_pct: Option<f64>,
}

/// One row of the Isode bulk-TCP-over-5066 table (empty cells: not published).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IsodeTcpRow {
    /// Link rate, bit/s.
    pub link_bps: u32,
    /// IP MTU, bytes.
    pub mtu: u16,
    /// Final stable throughput, bit/s.
    pub throughput_bps: f64,
    /// Minutes to reach 50 % of it.
    pub minutes_to_50: Option<f64>,
    /// Minutes to reach 80 % of it.
    pub minutes_to_80: Option<f64>,
    /// Seconds from the start to the first data delivered.
    pub first_data_s: Option<f64>,
}

/// The data lines of a calibration CSV: `#` comments and the header skipped, fields split on
/// commas; `(line number, fields)`.
fn data_lines(text: &str) -> Vec<(usize, Vec<&str>)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .skip(1)
        .map(|(i, l)| (i + 1, l.split(',').map(str::trim).collect()))
        .collect()
}

fn field<T: std::str::FromStr>(
    file: &str,
    line: usize,
    fields: &[&str],
    i: usize,
    name: &str,
) -> Result<T, CalibrationError> {
    fields
        .get(i)
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| CalibrationError::Parse {
            file: file.to_string(),
            line,
            reason: format!("field {} ({name}) missing or not a number", i + 1),
        })
}

/// Parses `ntia-jnos-table5.csv`.
pub fn parse_ntia(text: &str) -> Result<Vec<NtiaRow>, CalibrationError> {
    data_lines(text)
        .into_iter()
        .map(|(line, f)| {
            Ok(NtiaRow {
                modem_bps: field(NTIA_FILE, line, &f, 0, "modem_bps")?,
                tcp_window_bytes: field(NTIA_FILE, line, &f, 1, "tcp_window_bytes")?,
                attachment_bytes: field(NTIA_FILE, line, &f, 2, "attachment_bytes")?,
                throughput_bps: field(NTIA_FILE, line, &f, 3, "throughput_bps")?,
            })
        })
        .collect()
}

/// A field that may be empty (not published): `None` when empty or absent.
fn optional_field<T: std::str::FromStr>(
    file: &str,
    line: usize,
    fields: &[&str],
    i: usize,
    name: &str,
) -> Result<Option<T>, CalibrationError> {
    match fields.get(i) {
        None | Some(&"") => Ok(None),
        Some(_) => field(file, line, fields, i, name).map(Some),
    }
}

/// Parses `isode-ip-over-5066.csv`, its last column (the overhead measured on STANAG 5066
/// directly, where there is one) included.
pub fn parse_isode_ip(text: &str) -> Result<Vec<IsodeIpRow>, CalibrationError> {
    data_lines(text)
        .into_iter()
        .map(|(line, f)| {
            Ok(IsodeIpRow {
                link_bps: field(ISODE_IP_FILE, line, &f, 0, "link_bps")?,
                pdu_bytes: field(ISODE_IP_FILE, line, &f, 1, "pdu_bytes")?,
                throughput_bps: field(ISODE_IP_FILE, line, &f, 2, "throughput_bps")?,
                direct_overhead_pct: optional_field(
                    ISODE_IP_FILE,
                    line,
                    &f,
                    3,
                    "s5066_direct_overhead_pct",
                )?,
            })
        })
        .collect()
}

/// Parses `isode-tcp-over-5066.csv`.
pub fn parse_isode_tcp(text: &str) -> Result<Vec<IsodeTcpRow>, CalibrationError> {
    data_lines(text)
        .into_iter()
        .map(|(line, f)| {
            let optional = |i: usize, name: &str| optional_field(ISODE_TCP_FILE, line, &f, i, name);
            Ok(IsodeTcpRow {
                link_bps: field(ISODE_TCP_FILE, line, &f, 0, "link_bps")?,
                mtu: field(ISODE_TCP_FILE, line, &f, 1, "mtu")?,
                throughput_bps: field(ISODE_TCP_FILE, line, &f, 2, "throughput_bps")?,
                minutes_to_50: optional(4, "minutes_to_50pct")?,
                minutes_to_80: optional(5, "minutes_to_80pct")?,
                first_data_s: optional(6, "first_data_s")?,
            })
        })
        .collect()
}

/// Parses `isode-smtp-vs-coacp142.csv`.
pub fn parse_isode(text: &str) -> Result<Vec<IsodeRow>, CalibrationError> {
    data_lines(text)
        .into_iter()
        .map(|(line, f)| {
            Ok(IsodeRow {
                link_bps: field(ISODE_FILE, line, &f, 0, "link_bps")?,
                message_bytes: field(ISODE_FILE, line, &f, 1, "message_bytes")?,
                messages: field(ISODE_FILE, line, &f, 2, "messages")?,
                smtp_seconds: field(ISODE_FILE, line, &f, 3, "smtp_seconds")?,
                co_acp142_seconds: field(ISODE_FILE, line, &f, 4, "co_acp142_seconds")?,
            })
        })
        .collect()
}

fn read(dir: &Path, name: &str) -> Result<String, CalibrationError> {
    let path = dir.join(name);
    std::fs::read_to_string(&path).map_err(|source| CalibrationError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// The NTIA condition of a row for one seed: ITU-R Good, 15 dB, short interleaver.
pub fn ntia_condition(row: &NtiaRow, seed: u64) -> Condition {
    Condition {
        channel: "good".into(),
        snr_db: 15.0,
        rate_bps: row.modem_bps,
        interleaver: "short".into(),
        seed,
        segment_size: DEFAULT_SEGMENT,
        modem: None,
        turnaround: None,
        cas1: false,
        link_idle: None,
        default_ttl: None,
        ip_ttl: None,
        changes: ChannelChanges::default(),
    }
}

/// NTIA's JNOS TCP settings for a row.
pub fn ntia_tcp(row: &NtiaRow) -> TcpSettings {
    jnos_tcp(216, row.tcp_window_bytes, row.modem_bps, None, None)
}

/// The Isode condition of a row for one seed: a clean channel (AWGN, 30 dB) on `interleaver`.
pub fn isode_condition(row: &IsodeRow, seed: u64, interleaver: &str) -> Condition {
    clean_condition(row.link_bps, interleaver, seed)
}

/// The clean channel of every Isode table (AWGN at 30 dB: RM6 modems back to back over an
/// audio link) at `rate_bps` on `interleaver`, the modem's default turnaround.
pub fn clean_condition(rate_bps: u32, interleaver: &str, seed: u64) -> Condition {
    Condition {
        channel: "awgn".into(),
        snr_db: 30.0,
        rate_bps,
        interleaver: interleaver.into(),
        seed,
        segment_size: DEFAULT_SEGMENT,
        modem: None,
        turnaround: None,
        cas1: false,
        link_idle: None,
        default_ttl: None,
        ip_ttl: None,
        changes: ChannelChanges::default(),
    }
}

/// How the STANAG 5066 stations of the Isode runs depart from the emulator's defaults
/// (`calibrate --turnaround`, `--no-cas1`); `Stations::default()` departs in nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stations {
    /// Turnaround instead of the modem's 150 ms.
    pub turnaround: Option<Duration>,
    /// CAS-1 link making before the first ARQ data ([`Condition::cas1`]).
    pub cas1: bool,
    /// With `cas1`: idle links broken after this long ([`Condition::link_idle`]).
    pub link_idle: Option<Duration>,
    /// A default maximum TTL for every U_PDU ([`Condition::default_ttl`]; Isode's servers'
    /// is not published).
    pub default_ttl: Option<Duration>,
    /// The TTL the IP clients ask for ([`Condition::ip_ttl`]; not published either).
    pub ip_ttl: Option<Duration>,
    /// D_PDU segment size instead of the condition's ([`Condition::segment_size`]; the
    /// emulator's default is 1023 bytes).
    pub segment_size: Option<usize>,
    /// Changes to the hosts' TCP. The engine and SACK apply to every host, NTIA's and
    /// Isode's alike (JNOS has no SACK anyway); the slow-start threshold, the tail-loss probe,
    /// the delayed-ACK engine and the congestion control to Isode's Linux hosts alone (NTIA's
    /// JNOS caches no threshold, and has none of the others).
    pub tcp: TcpOverrides,
}

/// The stations Isode measured, as far as the publications say: RapidM RM6 modems and their
/// STANAG 5066 servers back to back over an audio link, with no ALE, so the servers made
/// each physical link with CAS-1 (Annex B: linking "may be omitted" only where an external
/// process such as ALE makes the link), and every measurement started from an idle link.
/// Their turnaround is not published: the modem's default. Nor is their servers' C_PDU
/// segment size: [`ISODE_SEGMENT`], what deployed servers typically use, where the emulator
/// defaults to the largest the D_PDU allows. What `calibrate` runs the Isode tables with
/// unless told otherwise.
pub const ISODE_STATIONS: Stations = Stations {
    turnaround: None,
    cas1: true,
    link_idle: None,
    default_ttl: None,
    ip_ttl: None,
    segment_size: Some(ISODE_SEGMENT),
    tcp: TcpOverrides::NONE,
};

impl Stations {
    /// `tcp` on these hosts' TCP.
    fn tcp(&self, tcp: TcpSettings) -> TcpSettings {
        self.tcp.engine_and_sack().apply(tcp)
    }

    /// `tcp` on these hosts' TCP, for one of Isode's hosts (its cached slow-start threshold too).
    fn isode_tcp(&self, tcp: TcpSettings) -> TcpSettings {
        self.tcp.apply(tcp)
    }

    /// `cond` with these stations.
    pub fn apply(&self, cond: Condition) -> Condition {
        Condition {
            turnaround: self.turnaround.or(cond.turnaround),
            cas1: self.cas1 || cond.cas1,
            link_idle: self.link_idle.or(cond.link_idle),
            default_ttl: self.default_ttl.or(cond.default_ttl),
            ip_ttl: self.ip_ttl.or(cond.ip_ttl),
            segment_size: self.segment_size.unwrap_or(cond.segment_size),
            ..cond
        }
    }
}

/// One line saying what the Isode runs assumed of the stations, printed above `calibrate`'s
/// table so that a table read later says what it was run with.
impl std::fmt::Display for Stations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = |d: Duration| format!("{:.1} s", d.as_secs_f64());
        write!(f, "Isode's stations: ")?;
        match (self.cas1, self.link_idle) {
            (false, _) => write!(f, "links taken as made (no CAS-1)")?,
            (true, None) => write!(f, "CAS-1 link making, links kept once made")?,
            (true, Some(idle)) => write!(
                f,
                "CAS-1 link making, links broken after {} idle",
                secs(idle)
            )?,
        }
        match self.segment_size {
            Some(b) => write!(f, ", {b}-byte segments")?,
            None => write!(f, ", each condition's segments")?,
        }
        match self.turnaround {
            Some(t) => write!(f, ", a {} turnaround", secs(t))?,
            None => write!(f, ", the modem's own turnaround")?,
        }
        match self.default_ttl {
            Some(t) => write!(f, ", U_PDUs expire {} after submission", secs(t))?,
            None => write!(f, ", no default TTL")?,
        }
        if let Some(t) = self.ip_ttl {
            write!(f, ", the IP clients ask for a {} TTL", secs(t))?;
        }
        if self.tcp != TcpOverrides::NONE {
            write!(f, "; the hosts' TCP changed from the command line")?;
        }
        Ok(())
    }
}

/// The maximum C_PDU segment size of Isode's stations, bytes. The RM6 servers' setting is
/// not published, and the emulator's default (1023, the most the D_PDU's 10-bit size field
/// holds) is the most efficient a clean channel allows, not what servers are set to: Annex C
/// gives 200 bytes as its example (the note to C.6.2), and Isode's own description of deployed
/// STANAG 5066 has a data D_PDU "typically" 200-300 bytes (S5066-EP2, "STANAG 5066 Padding
/// DPDU", 2017). The standard's example, which is also the low end of Isode's range; not
/// chosen by the rows it moves (`calibrate --segment-size B` runs any other).
pub const ISODE_SEGMENT: usize = 200;

/// Isode did not publish the modem's interleaver, and at 1200 bit/s it decides much of a
/// turnaround (0.6 s against 4.8 s of interleaving per transmission): both are run and shown,
/// rather than picking the one that fits.
pub const ISODE_INTERLEAVERS: [&str; 2] = ["short", "long"];

/// Our assumption for the TCP of the hosts in Isode's measurement at `rate_bps`: the
/// `isode-stock` profile (its MTU is the one Isode used at that rate).
pub fn isode_tcp(rate_bps: u32) -> TcpSettings {
    TcpProfile::IsodeStock.settings(rate_bps)
}

/// The HMTP scenario the goal lines use.
pub const HMTP_DEFLATE: Scenario = Scenario::Hmtp5066 {
    compression: HmtpCompression::Deflate,
    resume: true,
};

/// The SMTP baseline of the goal lines: the same deflate as [`HMTP_DEFLATE`].
pub const SMTP_DEFLATE: Scenario = Scenario::SmtpTcp5066 {
    dup_filter: true,
    compression: SmtpCompression::Deflate,
};

/// One emulated figure beside a published one.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Which table and column.
    pub source: &'static str,
    /// The scenario run (its name, and the TCP profile where one applies).
    pub scenario: String,
    /// The condition, in words.
    pub condition: String,
    /// Unit of the figures (`bit/s` or `s`).
    pub unit: &'static str,
    /// The published figure.
    pub published: f64,
    /// The emulated figure (mean over the seeds), or why there is none.
    pub emulated: Result<f64, String>,
    /// Delivered / offered over all seeds: messages; datagrams for the UDP flood; for the bulk
    /// stream, runs whose connection lasted to the end / runs.
    pub delivered: (usize, usize),
    /// The interleaver of an Isode row (one of [`ISODE_INTERLEAVERS`]: Isode did not publish
    /// theirs, so every Isode row is run on both); `None` for every other row.
    pub interleaver: Option<&'static str>,
}

impl Comparison {
    /// Whether the row weighs the emulator's performance against a measurement (and so counts
    /// in [`Calibration::band_counts`]): not the channel-profile rows, which check the fading
    /// generator against its own parameters.
    pub fn is_performance(&self) -> bool {
        self.unit != "Hz"
    }

    /// Digits the table prints a figure of this row with.
    fn decimals(&self) -> usize {
        match self.unit {
            "dB" => 2,
            "Hz" => 3,
            _ => 1,
        }
    }

    /// Emulated over published, when both exist.
    pub fn ratio(&self) -> Option<f64> {
        match &self.emulated {
            // A ratio of decibels means nothing: dB rows show the difference instead.
            Ok(_) if self.unit == "dB" => None,
            Ok(e) if self.published != 0.0 => Some(e / self.published),
            _ => None,
        }
    }
}

/// Everything `calibrate` found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Calibration {
    /// Emulated against published, one per published figure and scenario.
    pub comparisons: Vec<Comparison>,
    /// The goal lines (their `Display` is the sentence `calibrate` prints).
    pub goals: Vec<Goal>,
}

/// One goal line of [`calibrate`]: a condition of the Isode table and what was measured on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    /// Message size of the row.
    pub message_bytes: usize,
    /// Link rate of the row.
    pub link_bps: u32,
    /// `short` or `long`.
    pub interleaver: &'static str,
    /// What the line measures.
    pub kind: GoalKind,
}

/// What a [`Goal`] line measures.
#[derive(Debug, Clone, PartialEq)]
pub enum GoalKind {
    /// `hmtp-5066-deflate` against an SMTP-over-TCP baseline: mean seconds of each, and Isode's
    /// published SMTP over CO-ACP 142 ratio for the row.
    Speedup {
        /// The baseline: scenario and TCP profile, e.g. `smtp-tcp-5066 (isode-stock)`.
        baseline: String,
        /// smtp-tcp-5066, seconds.
        smtp_s: f64,
        /// hmtp-5066-deflate, seconds.
        hmtp_s: f64,
        /// Isode's published SMTP / CO-ACP 142 ratio.
        published: f64,
    },
    /// An HMTP session against its two-transmission bound.
    Bound {
        /// Mean session seconds.
        session_s: f64,
        /// The bound, seconds.
        bound_s: f64,
        /// Mean compressed bytes sent.
        sent: f64,
        /// Mean reply bytes received.
        received: f64,
    },
    /// Not measured, and why.
    Unavailable(String),
}

impl Goal {
    /// The line's figure: the speed-up (smtp over hmtp), or the session over its bound.
    pub fn ratio(&self) -> Option<f64> {
        match &self.kind {
            GoalKind::Speedup { smtp_s, hmtp_s, .. } if *hmtp_s > 0.0 => Some(smtp_s / hmtp_s),
            GoalKind::Bound {
                session_s, bound_s, ..
            } if *bound_s > 0.0 => Some(session_s / bound_s),
            _ => None,
        }
    }
}

impl std::fmt::Display for Goal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (bytes, bps, il) = (self.message_bytes, self.link_bps, self.interleaver);
        match &self.kind {
            GoalKind::Speedup {
                baseline,
                smtp_s,
                hmtp_s,
                published,
            } => write!(
                f,
                "speed-up of hmtp-5066-deflate over {baseline} at {bytes} B, {bps} bit/s clean, {il} interleaver: {:.1}x ({smtp_s:.1} s against {hmtp_s:.1} s; Isode published {published:.1}x for CO-ACP 142)",
                self.ratio().unwrap_or(0.0)
            ),
            GoalKind::Bound {
                session_s,
                bound_s,
                sent,
                received,
            } => write!(
                f,
                "hmtp-5066-deflate at {bytes} B, {bps} bit/s clean, {il} interleaver: session {session_s:.1} s against the two-transmission bound {bound_s:.1} s ({sent:.0} B compressed out, {received:.0} B of replies back): {:.2}x the bound",
                self.ratio().unwrap_or(0.0)
            ),
            GoalKind::Unavailable(why) => {
                write!(
                    f,
                    "goal at {bytes} B, {il} interleaver: not available ({why})"
                )
            }
        }
    }
}

/// Means of several runs of one scenario on one row.
struct Runs {
    details: Vec<RunDetail>,
}

impl Runs {
    fn mean(&self, f: impl Fn(&RunDetail) -> f64) -> f64 {
        if self.details.is_empty() {
            return 0.0;
        }
        self.details.iter().map(f).sum::<f64>() / self.details.len() as f64
    }

    fn delivered(&self) -> (usize, usize) {
        self.details.iter().fold((0, 0), |(d, e), r| {
            (d + r.result.delivered, e + r.result.expected)
        })
    }
}

fn runs(
    scenario: Scenario,
    cond: impl Fn(u64) -> Condition,
    tcp: &TcpSettings,
    work: impl Fn(u64) -> Result<Workload, BenchError>,
    seeds: &[u64],
    progress: &mut dyn FnMut(&str),
) -> Result<Runs, String> {
    let mut details = Vec::new();
    for &seed in seeds {
        progress(scenario.name());
        let w = work(seed).map_err(|e| e.to_string())?;
        details.push(run_detailed(scenario, &cond(seed), tcp, &w).map_err(|e| e.to_string())?);
    }
    Ok(Runs { details })
}

/// One NTIA condition as NTIA ran it, for each seed: ten mails, each its own connection
/// (first SYN to last ACK), "five in each direction, one after the other" (the calibration
/// README), between the same two JNOS hosts. So every connection after the first starts from
/// the round trip its hosts cached on the earlier ones (JNOS's `RTTCACHE`, in `jnos-1998`'s
/// settings), not from IRTT. Each mail has its own seed (its own stretch of the fading).
fn ntia_runs(
    row: &NtiaRow,
    tcp: &TcpSettings,
    seeds: &[u64],
    progress: &mut dyn FnMut(&str),
) -> Result<Runs, String> {
    let mut details = Vec::new();
    for &seed in seeds {
        // Ship then shore; the shore sends the second five, so its cache goes first then.
        let mut cache: crate::tcp::HostRttCache = [None, None];
        for i in 0..NTIA_MESSAGES {
            progress(Scenario::SmtpTcpModem.name());
            if i == NTIA_MESSAGES / 2 {
                cache.swap(0, 1);
            }
            let s = seed.wrapping_mul(1000).wrapping_add(i as u64);
            let work = ntia(row.attachment_bytes, 1, s).map_err(|e| e.to_string())?;
            let (detail, next) = run_modem_with_cache(&ntia_condition(row, s), tcp, &work, cache)
                .map_err(|e| e.to_string())?;
            details.push(detail);
            cache = next;
        }
    }
    Ok(Runs { details })
}

/// Runs in a full calibration with `seeds` seeds on `stations` (for a progress bar).
pub fn run_count(dir: &Path, seeds: usize, stations: Stations) -> Result<usize, CalibrationError> {
    let ntia_rows = parse_ntia(&read(dir, NTIA_FILE)?)?.len();
    let isode_rows = parse_isode(&read(dir, ISODE_FILE)?)?.len();
    let goal_rows = parse_isode(&read(dir, ISODE_FILE)?)?
        .iter()
        .filter(|r| [386, 14025].contains(&r.message_bytes))
        .count();
    let ip = parse_isode_ip(&read(dir, ISODE_IP_FILE)?)?;
    let ip_rows = ip.len()
        + ip.iter()
            .filter(|r| r.direct_overhead_pct.is_some())
            .count();
    let tcp_rows = parse_isode_tcp(&read(dir, ISODE_TCP_FILE)?)?.len();
    // Off the default stations, the goal lines run HMTP again on the default ones (every
    // row's bound) and SMTP (the speed-up lines' rows).
    let goal_reruns = if stations == Stations::default() {
        0
    } else {
        isode_rows + goal_rows
    };
    Ok((ntia_rows * NTIA_MESSAGES
        + (isode_rows * 3 + goal_rows + goal_reruns + ip_rows + tcp_rows)
            * ISODE_INTERLEAVERS.len())
        * seeds)
}

/// The bound of the goal line for a clean-channel exchange: the submission's `sent` bytes and
/// the `received` reply bytes, each in one planned transmission, plus decode and turnaround.
pub fn two_transmission_bound(
    modem: &ModemConfig,
    sent: u64,
    received: u64,
) -> Result<Duration, BenchError> {
    let plan = |bytes: u64| {
        modem
            .plan(Duration::ZERO, usize::try_from(bytes).unwrap_or(usize::MAX))
            .map(|t| t.duration())
            .map_err(|e| BenchError::Condition(e.to_string()))
    };
    Ok(
        plan(sent)?
            + modem.decode_time
            + modem.switching_time
            + plan(received)?
            + modem.decode_time,
    )
}

/// The frequency spread of every profile of `channel-profiles.csv` (`csv`) against the one
/// measured on the fading the emulator generates for it
/// ([`skywave_emu::channel::measured_spread_hz`], channels drawn from
/// [`CHANNEL_SAMPLE_SEED`]). The differential delay is no process property to measure here:
/// the emulator's power model has none, and uses the delay only for the equaliser's self-noise
/// beyond 2 ms (`skywave_emu::modem`); it is named in each row's condition.
pub fn channel_comparisons(csv: &str) -> Result<Vec<Comparison>, CalibrationError> {
    use skywave_emu::channel::{measured_spread_hz, parse_profiles};
    let profiles = parse_profiles(csv).map_err(|e| CalibrationError::Parse {
        file: CHANNEL_FILE.into(),
        line: 0,
        reason: e.to_string(),
    })?;
    Ok(profiles
        .iter()
        .zip(CHANNEL_SAMPLE_SEED..)
        .map(|(p, seed)| Comparison {
            source: "Watterson profile frequency spread",
            scenario: format!("channel {}", p.name),
            condition: format!(
                "{}, 2 paths {} ms apart, 2σ of the Doppler spectrum",
                p.standard, p.delay_ms
            ),
            unit: "Hz",
            published: p.spread_hz,
            emulated: measured_spread_hz(p, seed).ok_or_else(|| "no fading".to_string()),
            delivered: (0, 0),
            interleaver: None,
        })
        .collect())
}

/// The modem's required SNR for BER 10⁻⁵ (long interleaver) against `modem-required-snr.csv`
/// (the RM6 generation) and against MIL-STD-188-110A's minimum-performance table (the
/// 110A-minimum generation), on an independent fading sample ([`MODEM_SAMPLE_SEED`]; four
/// pooled ITU-R Good samples of each block's size, 240 000 blocks for the 110A block and
/// 1 440 000 for the 110B block, 8 000 Poor blocks for each; each of the standard's other
/// channels simulated from the same seed, as many blocks as Poor).
pub fn modem_comparisons(csv: &str) -> Result<Vec<Comparison>, CalibrationError> {
    use skywave_emu::calibration::{
        FadingSet, INDEPENDENT_POOL, MIL_110A_MINIMUM, REFERENCE_GOOD_REALISATIONS,
        REFERENCE_POOR_REALISATIONS, awgn_set, calibration_block, emulated_required_snr_of,
        parse_required_snr, simulate_sets_pooled,
    };
    use skywave_emu::channel::Fading;
    use skywave_emu::modem::{DataRate, Generation};
    let rows = parse_required_snr(csv).ok_or_else(|| CalibrationError::Parse {
        file: MODEM_FILE.into(),
        line: 0,
        reason: "not rate_bps,awgn_db,itu_good_db,itu_poor_db rows of known rates".into(),
    })?;
    let sets = simulate_sets_pooled(
        MODEM_SAMPLE_SEED,
        REFERENCE_GOOD_REALISATIONS,
        REFERENCE_POOR_REALISATIONS,
        INDEPENDENT_POOL,
    );
    let set_of = |rate: DataRate, fading: &Fading| -> Option<FadingSet> {
        let block = calibration_block(rate);
        let (_, good, poor) = sets.iter().find(|(b, ..)| *b == block)?;
        match fading {
            Fading::Awgn => Some(awgn_set(block)),
            Fading::Watterson(p) if p.name == "good" => Some(good.clone()),
            Fading::Watterson(p) if p.name == "poor" => Some(poor.clone()),
            Fading::Watterson(_) => None,
        }
    };
    let figure = |generation: Generation, rate: DataRate, fading: &Fading| {
        set_of(rate, fading)
            .and_then(|set| emulated_required_snr_of(generation, rate, &set))
            .ok_or_else(|| "BER 1e-5 not reached".to_string())
    };
    let mut out = Vec::new();
    let (Some(good), Some(poor)) = (
        skywave_emu::calibration::itu("good"),
        skywave_emu::calibration::itu("poor"),
    ) else {
        return Ok(out);
    };
    for row in rows {
        for (column, published, fading) in [
            ("AWGN", Some(row.awgn_db), &Fading::Awgn),
            ("ITU-R Good", row.good_db, &good),
            ("ITU-R Poor", row.poor_db, &poor),
        ] {
            let Some(published) = published else { continue };
            out.push(Comparison {
                source: "modem required SNR (RM6)",
                scenario: format!("modem {}", Generation::Rm6),
                condition: format!("{} bit/s, {column}, BER 1e-5", row.rate.bps()),
                unit: "dB",
                published,
                emulated: figure(Generation::Rm6, row.rate, fading),
                delivered: (0, 0),
                interleaver: None,
            });
        }
    }
    for row in MIL_110A_MINIMUM {
        let channel = if row.spread_hz == 0.0 {
            "AWGN".to_string()
        } else {
            format!("2 paths, {} ms, {} Hz", row.delay_ms, row.spread_hz)
        };
        let generation = Generation::Mil110aMinimum;
        out.push(Comparison {
            source: "MIL-STD-188-110A minimum",
            scenario: format!("modem {generation}"),
            condition: format!("{} bit/s, {channel}, BER {:e}", row.rate.bps(), row.ber),
            unit: "dB",
            published: row.snr_db,
            emulated: row
                .sample(&sets, MODEM_SAMPLE_SEED)
                .and_then(|set| row.emulated_snr_db(&set))
                .ok_or_else(|| format!("BER {:e} not reached", row.ber)),
            delivered: (0, 0),
            interleaver: None,
        });
    }
    Ok(out)
}

/// Runs every published condition in `dir` with these seeds; `progress` is told before each run.
/// `stations` departs from the emulator's defaults in every run over STANAG 5066, so one
/// command shows what a turnaround or CAS-1 linking of the 5066 stations Isode measured does
/// to all of its tables at once; NTIA's raw-modem runs (other equipment) keep theirs.
pub fn calibrate(
    dir: &Path,
    seeds: &[u64],
    stations: Stations,
    progress: &mut dyn FnMut(&str),
) -> Result<Calibration, CalibrationError> {
    let ntia_rows = parse_ntia(&read(dir, NTIA_FILE)?)?;
    let isode_rows = parse_isode(&read(dir, ISODE_FILE)?)?;
    let ip_rows = parse_isode_ip(&read(dir, ISODE_IP_FILE)?)?;
    let tcp_rows = parse_isode_tcp(&read(dir, ISODE_TCP_FILE)?)?;
    let mut cal = Calibration::default();
    for row in &ntia_rows {
        let tcp = stations.tcp(ntia_tcp(row));
        let r = ntia_runs(row, &tcp, seeds, progress);
        cal.comparisons.push(Comparison {
            source: "NTIA Table 5 throughput",
            scenario: Scenario::SmtpTcpModem.to_string(),
            condition: format!(
                "{} bit/s, good 15 dB, window {}, {} B attachment x{NTIA_MESSAGES}",
                row.modem_bps, row.tcp_window_bytes, row.attachment_bytes
            ),
            unit: "bit/s",
            published: row.throughput_bps,
            delivered: r.as_ref().map_or((0, 0), Runs::delivered),
            emulated: r.map(|r| r.mean(|d| d.result.throughput_bps)),
            interleaver: None,
        });
    }
    // Isode: the smtp column, and the HF-native column against ours.
    let mut speedups = Vec::new();
    let mut bounds = Vec::new();
    for (il, row) in ISODE_INTERLEAVERS
        .iter()
        .flat_map(|il| isode_rows.iter().map(move |r| (*il, r)))
    {
        let work = |s| Ok(isode(row.message_bytes, row.messages.max(1), s)?);
        let cond = |s| stations.apply(isode_condition(row, s, il));
        let condition = format!(
            "{} bit/s clean, {il} interleaver, {} B x{}",
            row.link_bps, row.message_bytes, row.messages
        );
        let smtp_scenario = Scenario::SmtpTcp5066 {
            dup_filter: true,
            compression: SmtpCompression::None,
        };
        let tcp = stations.isode_tcp(isode_tcp(row.link_bps));
        let smtp = runs(smtp_scenario, cond, &tcp, work, seeds, progress);
        let hmtp = runs(HMTP_DEFLATE, cond, &tcp, work, seeds, progress);
        let cftp = runs(Scenario::Cftp5066, cond, &tcp, work, seeds, progress);
        // The goal lines are the benchmark's own figures: on its default stations, whatever
        // the published rows were run with.
        let goal_cond = |s| isode_condition(row, s, il);
        let goal_row = [386, 14025].contains(&row.message_bytes);
        let own;
        let (goal_smtp, goal_hmtp) = if stations == Stations::default() {
            (&smtp, &hmtp)
        } else {
            // HMTP for every row's bound, SMTP only where a speed-up line needs it.
            own = (
                if goal_row {
                    runs(smtp_scenario, goal_cond, &tcp, work, seeds, progress)
                } else {
                    Err("no speed-up line for this size".to_string())
                },
                runs(HMTP_DEFLATE, goal_cond, &tcp, work, seeds, progress),
            );
            (&own.0, &own.1)
        };
        let secs = |r: &Result<Runs, String>| {
            r.as_ref()
                .map(|r| r.mean(|d| d.result.seconds))
                .map_err(Clone::clone)
        };
        for (source, scenario, r, published) in [
            ("Isode smtp seconds", smtp_scenario, &smtp, row.smtp_seconds),
            (CO_ACP142_SOURCE, HMTP_DEFLATE, &hmtp, row.co_acp142_seconds),
            (
                CO_ACP142_SOURCE,
                Scenario::Cftp5066,
                &cftp,
                row.co_acp142_seconds,
            ),
        ] {
            cal.comparisons.push(Comparison {
                source,
                scenario: scenario.to_string(),
                condition: condition.clone(),
                unit: "s",
                published,
                emulated: secs(r),
                delivered: r.as_ref().map_or((0, 0), Runs::delivered),
                interleaver: Some(il),
            });
        }
        let goal = |kind| Goal {
            message_bytes: row.message_bytes,
            link_bps: row.link_bps,
            interleaver: il,
            kind,
        };
        if goal_row {
            let best = runs(
                SMTP_DEFLATE,
                goal_cond,
                &TcpProfile::BestCase.settings(row.link_bps),
                work,
                seeds,
                progress,
            );
            for (baseline, r) in [
                (format!("{SMTP_DEFLATE} (best-case)"), &best),
                (format!("{smtp_scenario} (isode-stock)"), goal_smtp),
            ] {
                speedups.push(goal(match (secs(r), secs(goal_hmtp)) {
                    (Ok(smtp_s), Ok(hmtp_s)) => GoalKind::Speedup {
                        baseline,
                        smtp_s,
                        hmtp_s,
                        published: row.smtp_seconds / row.co_acp142_seconds,
                    },
                    (Err(e), _) | (_, Err(e)) => GoalKind::Unavailable(e),
                }));
            }
        }
        if let Ok(h) = goal_hmtp {
            let modem = modem_config(&goal_cond(1));
            let (sent, received) = (
                h.mean(|d| d.bytes_sent as f64),
                h.mean(|d| d.bytes_received as f64),
            );
            let bound =
                modem.and_then(|m| two_transmission_bound(&m, sent as u64, received as u64));
            bounds.push(goal(match bound {
                Ok(b) => GoalKind::Bound {
                    session_s: h.mean(|d| d.session_seconds),
                    bound_s: b.as_secs_f64(),
                    sent,
                    received,
                },
                Err(e) => GoalKind::Unavailable(e.to_string()),
            }));
        }
    }
    cal.goals.extend(speedups);
    cal.goals.extend(bounds);
    if dir.join(MODEM_FILE).exists() {
        progress("modem required SNR");
        cal.comparisons
            .extend(modem_comparisons(&read(dir, MODEM_FILE)?)?);
    }
    if dir.join(CHANNEL_FILE).exists() {
        progress("channel profiles");
        cal.comparisons
            .extend(channel_comparisons(&read(dir, CHANNEL_FILE)?)?);
    }
    for il in ISODE_INTERLEAVERS {
        for traffic in [Traffic::Udp, Traffic::Unidata] {
            for row in &ip_rows {
                cal.comparisons.extend(flood_comparison(
                    row, traffic, il, seeds, stations, progress,
                ));
            }
        }
        for row in &tcp_rows {
            cal.comparisons
                .extend(bulk_tcp_comparisons(row, il, seeds, stations, progress));
        }
    }
    Ok(cal)
}

/// One row of the UDP table on one interleaver, as `traffic`: the flood of [`crate::udp5066`]
/// on the clean channel of the Isode conditions, mean over the seeds. [`Traffic::Udp`]: the
/// UDP payload throughput; [`Traffic::Unidata`]: the row's overhead measured on STANAG 5066
/// directly, 100 % less the U_PDU throughput's share of the link's rate (`None` when the row
/// has no such figure).
fn flood_comparison(
    row: &IsodeIpRow,
    traffic: Traffic,
    il: &'static str,
    seeds: &[u64],
    stations: Stations,
    progress: &mut dyn FnMut(&str),
) -> Option<Comparison> {
    let (source, scenario, unit, published, what) = match traffic {
        Traffic::Udp => (
            "Isode UDP throughput",
            UDP_SCENARIO,
            "bit/s",
            row.throughput_bps,
            "datagrams",
        ),
        Traffic::Unidata => (
            DIRECT_SOURCE,
            DIRECT_SCENARIO,
            "%",
            row.direct_overhead_pct?,
            "U_PDUs",
        ),
    };
    let flood = UdpFlood {
        traffic,
        ..UdpFlood::for_link(row.pdu_bytes, row.link_bps)
    };
    let mut sum = 0.0;
    let mut delivered = (0, 0);
    let mut error = None;
    for &seed in seeds {
        progress(scenario);
        let cond = stations.apply(clean_condition(row.link_bps, il, seed));
        match run_udp_flood(&cond, &flood) {
            Ok(r) => {
                sum += match traffic {
                    Traffic::Udp => r.throughput_bps,
                    Traffic::Unidata => {
                        100.0 * (1.0 - r.throughput_bps / f64::from(row.link_bps.max(1)))
                    }
                };
                delivered.0 += usize::try_from(r.delivered).unwrap_or(usize::MAX);
                delivered.1 += usize::try_from(r.offered).unwrap_or(usize::MAX);
            }
            Err(e) => {
                error.get_or_insert(e.to_string());
            }
        }
    }
    Some(Comparison {
        source,
        scenario: scenario.to_string(),
        condition: format!(
            "{} bit/s clean, {il} interleaver, {} B {what} at the link's rate",
            row.link_bps, row.pdu_bytes
        ),
        unit,
        published,
        emulated: match error {
            Some(e) => Err(e),
            None => Ok(sum / seeds.len().max(1) as f64),
        },
        delivered,
        interleaver: Some(il),
    })
}

/// The TCP of the bulk runs: the `isode-stock` profile the Isode SMTP rows use, with the row's
/// MTU (MSS = MTU - 40).
pub fn bulk_tcp(row: &IsodeTcpRow) -> TcpSettings {
    let mut tcp = TcpProfile::IsodeStock.settings(row.link_bps);
    tcp.mtu = row.mtu;
    tcp.mss = row.mtu.saturating_sub(40);
    tcp
}

/// One row of the bulk-TCP table on one interleaver: the four published figures (those the
/// row has), each the mean over the seeds.
fn bulk_tcp_comparisons(
    row: &IsodeTcpRow,
    il: &'static str,
    seeds: &[u64],
    stations: Stations,
    progress: &mut dyn FnMut(&str),
) -> Vec<Comparison> {
    let tcp = stations.isode_tcp(bulk_tcp(row));
    let mut reports = Vec::new();
    let mut error = None;
    for &seed in seeds {
        progress(BULK_TCP_SCENARIO);
        let cond = stations.apply(clean_condition(row.link_bps, il, seed));
        match crate::stack::block_on_paused(run_bulk_tcp_5066(&cond, &tcp, BULK_TCP_RUN)) {
            Ok(Ok(r)) => reports.push(r),
            Ok(Err(e)) => {
                error.get_or_insert(e.to_string());
            }
            Err(e) => {
                error.get_or_insert(e.to_string());
            }
        }
    }
    let mut condition = format!(
        "{} bit/s clean, {il} interleaver, MTU {}, one bulk stream",
        row.link_bps, row.mtu
    );
    // A stream whose connection a host's give-up rule dropped says so: it is not delivering.
    let dropped: Vec<f64> = reports.iter().filter_map(|r| r.dropped_at_s).collect();
    if !dropped.is_empty() {
        let first = dropped.iter().copied().fold(f64::INFINITY, f64::min);
        let _ = write!(
            condition,
            " (the connection dropped after {first:.0} s in {} of {} runs)",
            dropped.len(),
            reports.len()
        );
    }
    let mean = |f: &dyn Fn(&BulkTcpReport) -> Option<f64>| -> Result<f64, String> {
        if let Some(e) = &error {
            return Err(e.clone());
        }
        let v: Vec<f64> = reports.iter().filter_map(f).collect();
        if v.is_empty() {
            Err("never reached".into())
        } else {
            Ok(v.iter().sum::<f64>() / v.len() as f64)
        }
    };
    let figures = [
        (
            "Isode bulk TCP final throughput",
            "bit/s",
            Some(row.throughput_bps),
            mean(&|r| Some(r.final_bps)),
        ),
        (
            "Isode bulk TCP minutes to 50 %",
            "min",
            row.minutes_to_50,
            mean(&|r| r.minutes_to_50),
        ),
        (
            "Isode bulk TCP minutes to 80 %",
            "min",
            row.minutes_to_80,
            mean(&|r| r.minutes_to_80),
        ),
        (
            "Isode bulk TCP first data",
            "s",
            row.first_data_s,
            mean(&|r| r.first_data_s),
        ),
    ];
    figures
        .into_iter()
        .filter_map(|(source, unit, published, emulated)| {
            Some(Comparison {
                source,
                scenario: format!("{BULK_TCP_SCENARIO} ({})", tcp.profile_name()),
                condition: condition.clone(),
                unit,
                published: published?,
                emulated,
                delivered: (reports.len() - dropped.len(), seeds.len()),
                interleaver: Some(il),
            })
        })
        .collect()
}

/// The name the bulk TCP stream goes by in the calibration table.
pub const BULK_TCP_SCENARIO: &str = "tcp-bulk-5066";

/// The name the UDP flood goes by in the calibration table.
pub const UDP_SCENARIO: &str = "udp-5066";

/// The source of the rows that set HMTP against Isode's CO-ACP 142 figures.
pub const CO_ACP142_SOURCE: &str = "Isode co_acp142 seconds";

/// The source of the rows of the overhead Isode measured on STANAG 5066 directly.
pub const DIRECT_SOURCE: &str = "Isode 5066 direct overhead";

/// The name the flood of U_PDUs straight to the node goes by in the calibration table.
pub const DIRECT_SCENARIO: &str = "unidata-5066";

/// The band a ratio row must fall in to count as reproducing its published figure (issue 13's
/// acceptance: 0.67-1.5x).
pub const RATIO_BAND: std::ops::RangeInclusive<f64> = 0.67..=1.5;

/// How many of one source's ratio rows fall in [`RATIO_BAND`] (see [`Calibration::band_counts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BandCount {
    /// The table and column ([`Comparison::source`]).
    pub source: &'static str,
    /// Rows whose ratio, rounded as printed (two decimals), is within the band.
    pub within: usize,
    /// Rows with a ratio (dB rows and rows with no emulated figure have none).
    pub rows: usize,
}

/// How many of one group of Isode's ratio rows fall in [`RATIO_BAND`] on each interleaver
/// (see [`Calibration::interleaver_counts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterleaverCount {
    /// The publication the rows come from ([`isode_group`]).
    pub group: &'static str,
    /// Per interleaver, in the order the table first shows it: the interleaver, the rows
    /// within the band, the rows with a ratio.
    pub counts: Vec<(&'static str, usize, usize)>,
}

/// The publication an Isode row's figure comes from. Isode's interleaver is not published,
/// and the two papers need not have used the same one: the direct STANAG 5066 overhead is
/// from their earlier "STANAG 5066 Performance Measurements over HF Radio", every other
/// column from "Performance Measurements of Application using IP over HF Radio", whose
/// CO-ACP 142 column is set against HMTP, another protocol, and so says nothing of the link.
pub fn isode_group(source: &str) -> &'static str {
    match source {
        CO_ACP142_SOURCE => "HMTP against Isode's CO-ACP 142 (another protocol)",
        DIRECT_SOURCE => "Isode's direct STANAG 5066 overhead (the earlier paper)",
        _ => "Isode's IP over STANAG 5066 (SMTP, UDP, bulk TCP)",
    }
}

/// The element of `v` that `is` picks, pushed from `new` if there is none: counts kept in the
/// order their first row comes.
fn entry<T>(v: &mut Vec<T>, is: impl Fn(&T) -> bool, new: impl FnOnce() -> T) -> &mut T {
    let i = match v.iter().position(is) {
        Some(i) => i,
        None => {
            v.push(new());
            v.len() - 1
        }
    };
    &mut v[i]
}

impl Comparison {
    /// Whether the row counts towards the band ([`Calibration::band_counts`]), and if so
    /// whether it is within [`RATIO_BAND`], judged as printed (two decimals), so a row the
    /// table shows as 0.67 counts and one it shows as 0.66 does not.
    fn in_band(&self) -> Option<bool> {
        if !self.is_performance() {
            return None;
        }
        let r = self.ratio()?;
        Some(RATIO_BAND.contains(&((r * 100.0).round() / 100.0)))
    }
}

impl Calibration {
    /// Per source, in the order the table first shows it, how many ratio rows are within
    /// [`RATIO_BAND`]; the ratio is judged as printed (two decimals), so a row the table shows
    /// as 0.67 counts and one it shows as 0.66 does not.
    pub fn band_counts(&self) -> Vec<BandCount> {
        let mut counts: Vec<BandCount> = Vec::new();
        for c in &self.comparisons {
            let Some(within) = c.in_band() else { continue };
            let b = entry(
                &mut counts,
                |b| b.source == c.source,
                || BandCount {
                    source: c.source,
                    within: 0,
                    rows: 0,
                },
            );
            b.rows += 1;
            b.within += usize::from(within);
        }
        counts
    }

    /// Isode's ratio rows per publication ([`isode_group`]) and interleaver, in the order the
    /// table first shows them: which interleaver each paper's figures fit, where the
    /// publications do not say which they used.
    pub fn interleaver_counts(&self) -> Vec<InterleaverCount> {
        let mut groups: Vec<InterleaverCount> = Vec::new();
        for c in &self.comparisons {
            let (Some(il), Some(within)) = (c.interleaver, c.in_band()) else {
                continue;
            };
            let group = isode_group(c.source);
            let g = entry(
                &mut groups,
                |g| g.group == group,
                || InterleaverCount {
                    group,
                    counts: Vec::new(),
                },
            );
            let count = entry(&mut g.counts, |&(name, _, _)| name == il, || (il, 0, 0));
            count.1 += usize::from(within);
            count.2 += 1;
        }
        groups
    }

    /// The comparisons as a Markdown table, the rows within [`RATIO_BAND`] per source, then
    /// the goal lines.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| source | scenario | condition | published | emulated | ratio | delivered |"
        );
        let _ = writeln!(out, "|---|---|---|---:|---:|---:|---|");
        for c in &self.comparisons {
            let (emulated, ratio) = match (&c.emulated, c.ratio()) {
                (Ok(e), None) if c.unit == "dB" => {
                    (format!("{e:.2} dB"), format!("{:+.2} dB", e - c.published))
                }
                (Ok(e), Some(r)) => (
                    format!("{e:.*} {}", c.decimals(), c.unit),
                    format!("{r:.2}"),
                ),
                (Ok(e), None) => (format!("{e:.*} {}", c.decimals(), c.unit), "—".into()),
                (Err(e), _) => (e.replace('|', "\\|"), "—".into()),
            };
            let delivered = match c.delivered {
                (0, 0) => "—".to_string(),
                (d, n) => format!("{d}/{n}"),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.*} {} | {emulated} | {ratio} | {delivered} |",
                c.source,
                c.scenario,
                c.condition,
                c.decimals(),
                c.published,
                c.unit,
            );
        }
        let counts = self.band_counts();
        if !counts.is_empty() {
            let (within, rows) = counts
                .iter()
                .fold((0, 0), |(w, n), b| (w + b.within, n + b.rows));
            let _ = writeln!(
                out,
                "\nRatio rows within {:.2}-{:.1} of the published figure: {within} of {rows}",
                RATIO_BAND.start(),
                RATIO_BAND.end()
            );
            for b in &counts {
                let _ = writeln!(out, "- {}: {} of {}", b.source, b.within, b.rows);
            }
        }
        let by_interleaver = self.interleaver_counts();
        if !by_interleaver.is_empty() {
            let _ = writeln!(
                out,
                "\nBy interleaver (Isode's was not published; every Isode row is run on both):"
            );
            for g in &by_interleaver {
                let per: Vec<String> = g
                    .counts
                    .iter()
                    .map(|(il, within, rows)| format!("{il} {within} of {rows}"))
                    .collect();
                let _ = writeln!(out, "- {}: {}", g.group, per.join(", "));
            }
        }
        if !self.goals.is_empty() {
            let _ = writeln!(out, "\nGoal lines:");
            for g in &self.goals {
                let _ = writeln!(out, "- {g}");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use skywave_emu::modem::{DataRate, Interleaver};

    use super::*;

    const NTIA: &str = "# comment\n# more\nmodem_bps,tcp_window_bytes,attachment_bytes,throughput_bps\n300,1024,1024,51.8\n1200,3072,51200,1733.6\n";
    const ISODE: &str =
        "# c\nlink_bps,message_bytes,messages,smtp_seconds,co_acp142_seconds\n1200,386,1,89,21\n";

    #[test]
    fn rows_within_the_band_are_counted_per_source_as_printed() {
        let row = |source: &'static str, unit: &'static str, published: f64, emulated| Comparison {
            source,
            scenario: "s".into(),
            condition: "c".into(),
            unit,
            published,
            emulated,
            delivered: (0, 0),
            interleaver: None,
        };
        let cal = Calibration {
            comparisons: vec![
                // 0.666 is printed 0.67 (in), 0.664 is printed 0.66 (out).
                row("A", "s", 1000.0, Ok(666.0)),
                row("A", "s", 1000.0, Ok(664.0)),
                row("B", "bit/s", 100.0, Ok(150.4)),
                row("A", "s", 1000.0, Ok(1506.0)),
                // No ratio: decibels, no emulated figure, a published zero.
                row("C", "dB", 10.0, Ok(10.5)),
                row("B", "bit/s", 100.0, Err("not modelled".into())),
                row("B", "min", 0.0, Ok(1.0)),
                // A channel-profile row has a ratio but checks the generator, not performance.
                row("D", "Hz", 0.1, Ok(0.1)),
            ],
            goals: Vec::new(),
        };
        assert_eq!(
            cal.band_counts(),
            [
                BandCount {
                    source: "A",
                    within: 1,
                    rows: 3
                },
                BandCount {
                    source: "B",
                    within: 1,
                    rows: 1
                },
            ]
        );
        let md = cal.markdown();
        assert!(
            md.contains("Ratio rows within 0.67-1.5 of the published figure: 2 of 4\n- A: 1 of 3\n- B: 1 of 1\n"),
            "{md}"
        );
    }

    /// Isode's rows are also counted per publication and interleaver, the rows of no
    /// interleaver (NTIA's, the modem's) left out, and the table says so below the count.
    #[test]
    fn isodes_rows_are_counted_per_paper_and_interleaver() {
        let row = |source: &'static str, il, emulated: f64| Comparison {
            source,
            scenario: "s".into(),
            condition: "c".into(),
            unit: "s",
            published: 100.0,
            emulated: Ok(emulated),
            delivered: (1, 1),
            interleaver: il,
        };
        let cal = Calibration {
            comparisons: vec![
                row("NTIA Table 5 throughput", None, 100.0),
                row("Isode smtp seconds", Some("short"), 39.0),
                row("Isode UDP throughput", Some("short"), 101.0),
                row("Isode smtp seconds", Some("long"), 122.0),
                row("Isode 5066 direct overhead", Some("short"), 117.0),
                row("Isode 5066 direct overhead", Some("long"), 211.0),
                row("Isode co_acp142 seconds", Some("long"), 141.0),
                row("Isode UDP throughput", Some("long"), 1473.0),
            ],
            goals: Vec::new(),
        };
        let ip = "Isode's IP over STANAG 5066 (SMTP, UDP, bulk TCP)";
        let direct = "Isode's direct STANAG 5066 overhead (the earlier paper)";
        let acp = "HMTP against Isode's CO-ACP 142 (another protocol)";
        assert_eq!(
            cal.interleaver_counts(),
            [
                InterleaverCount {
                    group: ip,
                    counts: vec![("short", 1, 2), ("long", 1, 2)]
                },
                InterleaverCount {
                    group: direct,
                    counts: vec![("short", 1, 1), ("long", 0, 1)]
                },
                InterleaverCount {
                    group: acp,
                    counts: vec![("long", 1, 1)]
                },
            ]
        );
        let md = cal.markdown();
        assert!(
            md.contains(&format!(
                "\nBy interleaver (Isode's was not published; every Isode row is run on both):\n\
                 - {ip}: short 1 of 2, long 1 of 2\n- {direct}: short 1 of 1, long 0 of 1\n\
                 - {acp}: long 1 of 1\n"
            )),
            "{md}"
        );
    }

    /// Every profile of the channel table (the embedded copy of the shared file) is measured
    /// on the emulator's fading, and each has the frequency spread it names, within 2 %.
    #[test]
    fn the_channel_profiles_are_measured_on_the_fading() {
        let rows = channel_comparisons(skywave_emu::channel::PROFILES_CSV).unwrap();
        assert_eq!(rows.len(), 14);
        for c in &rows {
            let r = c.ratio().unwrap();
            println!(
                "{}: {:.4} against {} Hz ({r:.3})",
                c.scenario,
                c.emulated.clone().unwrap(),
                c.published
            );
            assert!((r - 1.0).abs() < 0.02, "{c:?}");
            assert!(!c.is_performance());
        }
        let md = Calibration {
            comparisons: rows,
            goals: Vec::new(),
        }
        .markdown();
        assert!(
            md.contains("| Watterson profile frequency spread | channel good | F.520-2, 2 paths 0.5 ms apart, 2σ of the Doppler spectrum | 0.100 Hz |"),
            "{md}"
        );
    }

    #[test]
    fn tables_parse() {
        let n = parse_ntia(NTIA).unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(
            n[1],
            NtiaRow {
                modem_bps: 1200,
                tcp_window_bytes: 3072,
                attachment_bytes: 51200,
                throughput_bps: 1733.6
            }
        );
        assert_eq!(ntia_tcp(&n[0]).max_wait, Duration::from_secs(360));
        let i = parse_isode(ISODE).unwrap();
        assert_eq!(i[0].co_acp142_seconds, 21.0);
        let e = parse_ntia("h\n300,x,1,1\n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        assert!(e.to_string().contains("tcp_window_bytes"), "{e}");
    }

    #[test]
    fn the_real_files_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/calibration");
        if let (Ok(n), Ok(i), Ok(ip), Ok(tcp)) = (
            read(&dir, NTIA_FILE),
            read(&dir, ISODE_FILE),
            read(&dir, ISODE_IP_FILE),
            read(&dir, ISODE_TCP_FILE),
        ) {
            assert_eq!(parse_ntia(&n).unwrap().len(), 8);
            assert_eq!(parse_isode(&i).unwrap().len(), 4);
            let ip = parse_isode_ip(&ip).unwrap();
            assert_eq!(ip.len(), 19);
            assert_eq!(ip[0].throughput_bps, 7330.0);
            assert_eq!(ip[0].direct_overhead_pct, Some(17.0));
            assert_eq!(ip[1].direct_overhead_pct, None);
            assert_eq!(ip.iter().filter_map(|r| r.direct_overhead_pct).count(), 8);
            let tcp = parse_isode_tcp(&tcp).unwrap();
            assert_eq!(tcp.len(), 6);
            assert_eq!(tcp[5].minutes_to_50, None);
            assert_eq!(tcp[5].first_data_s, Some(136.0));
        } else {
            skywave_emu::missing::skip_or_fail(
                "../shared/calibration",
                "the parse of the real calibration files",
                "clone the project with `shared/` beside it, as CI does",
            );
        }
    }

    #[test]
    fn bound_is_two_planned_transmissions() {
        let m = ModemConfig::new(DataRate::Bps1200, Interleaver::Short).unwrap();
        let b = two_transmission_bound(&m, 0, 0).unwrap();
        // key-up 0.1 + preamble 0.6 + one 0.6 s block, twice, + 2 decodes + turnaround.
        assert_eq!(b, Duration::from_millis(2 * 1300 + 2 * 50 + 150));
        let b2 = two_transmission_bound(&m, 900, 0).unwrap();
        // 900 bytes + EOM/flush = 7376 bits = 11 blocks of 720 bits.
        assert_eq!(b2 - b, Duration::from_millis(600 * 10));
    }

    /// The README's goal lines, as `skywave-bench calibrate` measures them (seed 1, its default):
    /// each speed-up within 3 % of the figure the README quotes and above its goal, and every
    /// HMTP session within 1.25x its two-transmission bound. Deterministic (virtual time, seeded
    /// channel), so a change to the emulator, TCP or HMTP that moves them fails here.
    /// The README's best-case goal figures (hmtp-5066-deflate over smtp-tcp-5066-deflate with
    /// the best-case TCP profile).
    const BEST_386_SHORT: f64 = 6.3;
    const BEST_14025_SHORT: f64 = 1.4;
    const BEST_386_LONG: f64 = 9.1;
    const BEST_14025_LONG: f64 = 2.6;

    #[test]
    fn the_readme_goal_lines_hold() {
        let dir = std::env::temp_dir().join(format!("skywave-goals-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(NTIA_FILE), "h\n").unwrap();
        std::fs::write(dir.join(ISODE_IP_FILE), "h\n").unwrap();
        std::fs::write(dir.join(ISODE_TCP_FILE), "h\n").unwrap();
        // The published rows of calibration/isode-smtp-vs-coacp142.csv the goals are about.
        std::fs::write(
            dir.join(ISODE_FILE),
            "link_bps,message_bytes,messages,smtp_seconds,co_acp142_seconds\n\
             1200,386,1,89,21\n1200,1867,1,125,30\n1200,14025,1,250,97\n1200,135604,1,1442,796\n",
        )
        .unwrap();
        let cal = calibrate(&dir, &[1], Stations::default(), &mut |_| {}).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let lines: Vec<String> = cal.goals.iter().map(ToString::to_string).collect();
        // (baseline, bytes, interleaver, README figure, goal)
        for (base, bytes, il, quoted, goal) in [
            ("best-case", 386, "short", BEST_386_SHORT, 3.0),
            // The goal is 1.5x; measured 1.40x, not met (the README says why): the floor here
            // only keeps it from sliding further.
            ("best-case", 14025, "short", BEST_14025_SHORT, 1.35),
            ("best-case", 386, "long", BEST_386_LONG, 1.0),
            ("best-case", 14025, "long", BEST_14025_LONG, 1.0),
            ("isode-stock", 386, "short", 9.2, 5.0),
            ("isode-stock", 14025, "short", 3.4, 2.0),
            ("isode-stock", 386, "long", 9.1, 5.0),
            ("isode-stock", 14025, "long", 4.6, 2.0),
        ] {
            let g = cal
                .goals
                .iter()
                .find(|g| {
                    g.message_bytes == bytes
                        && g.interleaver == il
                        && matches!(&g.kind, GoalKind::Speedup { baseline, .. } if baseline.contains(base))
                })
                .unwrap_or_else(|| panic!("no speed-up line for {bytes} B {il}: {lines:#?}"));
            let r = g.ratio().unwrap();
            assert!(
                (r / quoted - 1.0).abs() <= 0.03 && r >= goal,
                "{g}: README says {quoted}x (goal {goal}x)"
            );
        }
        let bounds: Vec<(&Goal, f64)> = cal
            .goals
            .iter()
            .filter(|g| matches!(g.kind, GoalKind::Bound { .. }))
            .map(|g| (g, g.ratio().unwrap()))
            .collect();
        assert_eq!(bounds.len(), 8, "{lines:#?}");
        for (g, r) in bounds {
            // The README: 1.00-1.10x with the short interleaver (the top one is 1.103), 1.00-1.16x
            // with the long one; under the 1.25x goal always.
            let top = if g.interleaver == "short" { 1.11 } else { 1.17 };
            assert!((0.99..=top).contains(&r), "{g} ({r:.4})");
        }
    }

    /// A fresh calibration directory (removed by the caller) holding the NTIA, Isode SMTP,
    /// Isode IP and Isode TCP files with these contents.
    fn calibration_dir(tag: &str, [ntia, isode, ip, tcp]: [&str; 4]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("skywave-cal-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in [
            (NTIA_FILE, ntia),
            (ISODE_FILE, isode),
            (ISODE_IP_FILE, ip),
            (ISODE_TCP_FILE, tcp),
        ] {
            std::fs::write(dir.join(name), text).unwrap();
        }
        dir
    }

    /// Isode's stations make their link with CAS-1 before the first ARQ data: one exchange
    /// more in every published Isode row (3.1 s at 1200 bit/s on the short interleaver, 19.8 s
    /// on the long; SMTP on the short one below), while the goal lines stay the benchmark's
    /// own, on its default stations (neither CAS-1 nor Isode's segment size moves them).
    #[test]
    fn isode_stations_make_their_link_and_the_goal_lines_do_not() {
        let dir = calibration_dir("cas1", ["h\n", ISODE, "h\n", "h\n"]);
        let unlinked = Stations {
            cas1: false,
            ..ISODE_STATIONS
        };
        let plain = calibrate(&dir, &[1], unlinked, &mut |_| {}).unwrap();
        let linked = calibrate(&dir, &[1], ISODE_STATIONS, &mut |_| {}).unwrap();
        let own = calibrate(&dir, &[1], Stations::default(), &mut |_| {}).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let seconds = |cal: &Calibration, scenario: String, il: &str| {
            cal.comparisons
                .iter()
                .find(|c| c.scenario == scenario && c.condition.contains(il))
                .and_then(|c| c.emulated.clone().ok())
                .unwrap()
        };
        for (il, setup) in [("short", 3.1), ("long", 19.8)] {
            for scenario in [HMTP_DEFLATE.to_string(), "smtp-tcp-5066".to_string()] {
                let extra =
                    seconds(&linked, scenario.clone(), il) - seconds(&plain, scenario.clone(), il);
                // SMTP on the short interleaver: Linux's TCP resends spuriously from its 1 s
                // initial RTO within a 3-4 s round trip, and those resends and the delayed
                // ACKs fall differently once the link is made first: 5.4 s net, not the
                // exchange's 3.1 s. (2.4 s until the hosts had SACK, 3.0 s until the client
                // took its first round-trip sample from the SYN-ACK's timestamp echo, 4.2 s
                // until they acknowledged as Linux does, 3.6 s while their receive window was a
                // fixed 65535 bytes offered without the window-scale option, whose four bytes
                // shift where the resends fall.)
                let want = if scenario.starts_with("smtp") && il == "short" {
                    5.4
                } else {
                    setup
                };
                assert!((extra - want).abs() < 0.2, "{il} {scenario}: {extra}");
            }
        }
        assert_eq!(plain.goals, linked.goals);
        assert_eq!(own.goals, linked.goals);
    }

    /// `calibrate` says above its table what it assumed of Isode's stations.
    #[test]
    fn the_stations_say_what_they_are() {
        assert_eq!(
            ISODE_STATIONS.to_string(),
            "Isode's stations: CAS-1 link making, links kept once made, 200-byte segments, \
             the modem's own turnaround, no default TTL"
        );
        let other = Stations {
            cas1: false,
            turnaround: Some(Duration::from_secs(4)),
            ip_ttl: Some(Duration::from_secs(150)),
            segment_size: Some(DEFAULT_SEGMENT),
            ..ISODE_STATIONS
        };
        assert_eq!(
            other.to_string(),
            "Isode's stations: links taken as made (no CAS-1), 1023-byte segments, a 4.0 s \
             turnaround, no default TTL, the IP clients ask for a 150.0 s TTL"
        );
    }

    /// Annex A lets a station end a soft-link session as soon as its data is sent (a timeout of
    /// zero), and a link made again for every turn of the SMTP dialogue would cost an exchange
    /// each time. It does not happen: every reply rides with the ACK of what it answers, so the
    /// link never idles inside a session, and the Isode message rows do not move.
    #[test]
    fn a_soft_link_timeout_of_zero_moves_no_isode_message_row() {
        let dir = calibration_dir("idle0", ["h\n", ISODE, "h\n", "h\n"]);
        let kept = calibrate(&dir, &[1], ISODE_STATIONS, &mut |_| {}).unwrap();
        let eager = Stations {
            link_idle: Some(Duration::ZERO),
            ..ISODE_STATIONS
        };
        let broken = calibrate(&dir, &[1], eager, &mut |_| {}).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let figures = |cal: &Calibration| -> Vec<(String, f64)> {
            cal.comparisons
                .iter()
                .map(|c| (c.condition.clone(), c.emulated.clone().unwrap()))
                .collect()
        };
        assert!(!kept.comparisons.is_empty());
        assert_eq!(figures(&kept), figures(&broken));
    }

    #[test]
    fn calibrate_runs_what_it_can() {
        // One small NTIA row keeps the test quick once the TCP scenarios run.
        let dir = calibration_dir(
            "all",
            [
                "h\n1200,1024,1024,97.2\n",
                ISODE,
                "h\n1200,512,900,12\n",
                "h\n1200,1500,798,67,0,1.5,20\n",
            ],
        );
        // Ten single-mail NTIA runs, three Isode scenarios per interleaver, the UDP flood, the
        // U_PDU flood of the row's direct overhead, and the bulk TCP stream.
        assert_eq!(
            run_count(&dir, 1, Stations::default()).unwrap(),
            10 + 4 * 2 + 2 + 2 + 2
        );
        // Isode's stations: SMTP and HMTP once more for the goal lines, per interleaver.
        assert_eq!(
            run_count(&dir, 1, ISODE_STATIONS).unwrap(),
            10 + 4 * 2 + 2 + 2 + 2 + 2 * 2
        );
        let mut calls = 0;
        let cal = calibrate(&dir, &[1], Stations::default(), &mut |_| calls += 1).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        // The bulk row: four figures on each interleaver.
        assert_eq!(cal.comparisons.len(), 1 + 3 * 2 + (1 + 1 + 4) * 2);
        let direct: Vec<&Comparison> = cal
            .comparisons
            .iter()
            .filter(|c| c.scenario == DIRECT_SCENARIO)
            .collect();
        assert_eq!(direct.len(), 2, "{direct:#?}");
        assert_eq!((direct[0].unit, direct[0].published), ("%", 12.0));
        // 512-byte U_PDUs at 1200 bit/s: 7.1 % on the short interleaver, 16.6 % on the long.
        let overhead = |c: &Comparison| c.emulated.clone().unwrap();
        assert!((overhead(direct[0]) - 7.1).abs() < 0.3, "{direct:#?}");
        assert!((overhead(direct[1]) - 16.6).abs() < 0.3, "{direct:#?}");
        let bulk: Vec<&Comparison> = cal
            .comparisons
            .iter()
            .filter(|c| c.scenario.starts_with(BULK_TCP_SCENARIO))
            .collect();
        assert_eq!(bulk.len(), 8);
        assert!(bulk.iter().all(|c| c.emulated.is_ok()), "{bulk:#?}");
        // Published 0 minutes to 50 %: no ratio.
        assert!(bulk[1].ratio().is_none(), "{:?}", bulk[1]);
        let udp = cal
            .comparisons
            .iter()
            .find(|c| c.scenario == UDP_SCENARIO)
            .unwrap();
        assert_eq!(udp.scenario, UDP_SCENARIO);
        // The link limits 512-byte datagrams at 1200 bit/s: within the band of the table.
        let r = udp.ratio().unwrap();
        assert!(RATIO_BAND.contains(&r), "{udp:?}");
        assert_eq!(cal.comparisons[0].delivered, (10, 10));
        let hmtp = &cal.comparisons[2];
        assert_eq!(hmtp.scenario, HMTP_DEFLATE.to_string());
        assert_eq!(hmtp.delivered, (1, 1));
        assert!(hmtp.ratio().unwrap() > 0.0);
        assert!(
            cal.goals
                .iter()
                .any(|g| matches!(g.kind, GoalKind::Bound { .. })),
            "{:?}",
            cal.goals
        );
        assert!(cal.goals.iter().any(|g| g.to_string().contains("speed-up")));
        let md = cal.markdown();
        assert!(
            md.contains("| Isode co_acp142 seconds | cftp-5066 |"),
            "{md}"
        );
        assert!(calls >= 3);
        assert!(matches!(
            calibrate(
                Path::new("/nonexistent"),
                &[1],
                Stations::default(),
                &mut |_| {}
            ),
            Err(CalibrationError::Io { .. })
        ));
    }
}
