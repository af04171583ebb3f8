//! `skywave-bench`: scenario benchmarks comparing SMTP over TCP/IP over HF with HMTP/CFTP over
//! STANAG 5066 on the same emulated channel, in virtual time (crates/bench).
//!
//! - `skywave-bench compare ...`: a sweep of scenarios, TCP profiles (`--tcp-profile`) and
//!   conditions, one row per scenario, profile and condition (mean and spread over the seeds),
//!   as Markdown or CSV; `--out DIR` also writes `table.md`, `table.csv` and SVG figures;
//!   `--quick` is the small sweep CI runs.
//! - `skywave-bench calibrate`: every published condition of the calibration directory re-run,
//!   emulated beside published with the ratio, then the goal lines.
//! - `skywave-bench fleet`: one base and N ships on one channel, unicast against multicast.
//! - `skywave-bench modem`: the modem alone on a grid of conditions (blocks damaged, frames
//!   lost), before any protocol.

// `outln!` and `out!`: a closed pipe (`skywave-bench ... | head`) ends the program
// quietly instead of a panic.
#[macro_use]
extern crate skywave_cliout;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use skywave_bench::calibrate::{self, ISODE_FILE, ISODE_IP_FILE, ISODE_TCP_FILE, NTIA_FILE};
use skywave_bench::model::{ChannelChanges, Scenario, TcpEngine, TcpOverrides, TcpProfile};
use skywave_bench::sweep::{SweepSpec, run_sweep};
use skywave_bench::workload::{ISODE_SIZES, Shape};
use skywave_bench::{plot, report};
use skywave_emu::channel::{ScheduledImpairment, parse_aimed, parse_changes};

/// Scenario benchmarks over the bundled HF emulator, in virtual time.
#[derive(Debug, Parser)]
#[command(name = "skywave-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run scenarios under conditions and print one row per scenario and condition.
    Compare(Box<Compare>),
    /// Re-run the published conditions and print emulated against published, with ratios.
    ///
    /// Of the TCP switches, --tcp-engine and --no-sack apply to every host, NTIA's and
    /// Isode's; --ssthresh, --tlp, --linux-acks, --congestion, --rcv-tuning, --snd-tuning,
    /// --syn-linear-timeouts and --slow-start-after-idle to Isode's Linux hosts alone.
    Calibrate(Calibrate),
    /// One base and N ships on one channel: HMTP unicast to each ship against P_MUL multicast.
    Fleet(Fleet),
    /// The modem alone: blocks damaged and frames lost per rate, interleaver, channel and SNR.
    Modem(ModemSurvey),
}

#[derive(Debug, clap::Args)]
struct ModemSurvey {
    /// Modem generations: rm6, 110a-minimum (75-2400 bit/s) (default: both).
    #[arg(long, value_delimiter = ',')]
    modem: Vec<String>,
    /// Modem rates, bit/s (default 1200,2400).
    #[arg(long, value_delimiter = ',')]
    rate: Vec<u32>,
    /// Interleavers (default short).
    #[arg(long, value_delimiter = ',')]
    interleaver: Vec<String>,
    /// Channels: awgn or a profile name (default good).
    #[arg(long, value_delimiter = ',')]
    channel: Vec<String>,
    /// SNRs, dB in 3 kHz (default 0,5,10,15,20,25,30).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    snr: Vec<f64>,
    /// Frame sizes on the air, bytes, framing included (default 276: NTIA's 256-byte datagram
    /// in its 20 bytes of AX.25/SDLC framing; 1045: a STANAG 5066 DATA-ONLY D_PDU carrying a
    /// 1023-byte segment, 22 bytes of D_PDU overhead with full addresses).
    #[arg(long, value_delimiter = ',')]
    frame_bytes: Vec<usize>,
    /// Frames sent back to back in each transmission.
    #[arg(long, default_value_t = 4)]
    frames_per_transmission: usize,
    /// Transmissions per condition (1 to 1000000).
    #[arg(long, default_value_t = 2000)]
    transmissions: usize,
    /// Seed of the fading and the block draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Table format on standard output.
    #[arg(long, value_enum, default_value = "md")]
    format: Format,
}

#[derive(Debug, clap::Args)]
struct Fleet {
    /// Ships (default 2,5,10).
    #[arg(long, value_delimiter = ',')]
    ships: Vec<usize>,
    /// Workloads: all (one message to every ship), one (to the first ship), mixed (one to
    /// every ship and one to each ship alone), reports (every ship sends the base one at
    /// once), exchange (all and reports at once) (default: all, one, mixed).
    #[arg(long, value_delimiter = ',')]
    workload: Vec<String>,
    /// Time slots, minutes each: each ship's sessions with the base start only in its slot
    /// (a radio schedule in both routing tables), the ships in turn in a cycle that must
    /// divide the hour, after a slot of the base's own for its multicast over 5066 when the
    /// base has mail to send; 0 for none (default 0). Several values run each.
    #[arg(long, value_delimiter = ',')]
    slot_minutes: Vec<u32>,
    /// Scenarios: hmtp-unicast, pmul-multicast (P_MUL over 5066), pmul-ip (P_MUL over an
    /// emulated IP network; unicast still by HMTP over HF) (default all three).
    #[arg(long, value_delimiter = ',')]
    scenarios: Vec<String>,
    /// pmul-ip: one-way delay of the IP network, ms (270: a geostationary satellite hop).
    #[arg(long, default_value_t = 270)]
    ip_delay_ms: u64,
    /// pmul-ip: probability that a datagram copy is lost, 0 to 0.9.
    #[arg(long, default_value_t = 0.02)]
    ip_loss: f64,
    /// pmul-ip: each host's uplink rate, bit/s.
    #[arg(long, default_value_t = 64_000)]
    ip_rate: u64,
    /// Numbers of EMCON ships (multicast only; their EMCON is lifted once the others have
    /// their mail) (default 0,1).
    #[arg(long, value_delimiter = ',')]
    emcon: Vec<usize>,
    /// Message size, bytes (a corpus message of about this size).
    #[arg(long, default_value_t = 2000)]
    size: usize,
    /// Modem rate, bit/s.
    #[arg(long, default_value_t = 1200)]
    rate: u32,
    /// SNR of the nearest ship, dB (the others in rings 3, 6 and 9 dB lower).
    #[arg(long, default_value_t = 18.0, allow_negative_numbers = true)]
    snr: f64,
    /// Every station's turnaround, seconds (0.15 is the best case; deployed STANAG 5066
    /// systems take seconds or tens of seconds; at most 127.5).
    #[arg(long)]
    turnaround: Option<f64>,
    /// The emulated 5066 nodes make each link with CAS-1 before the first ARQ data (the
    /// base's HMTP to each ship pays it; multicast needs no link).
    #[arg(long)]
    cas1: bool,
    /// With --cas1: a node breaks a link idle for this many seconds (PHYSICAL LINK BREAK,
    /// BREAK CONFIRM); the next mail for that ship makes it again. Default: links stay made.
    #[arg(long, value_name = "SECS", requires = "cas1")]
    link_idle: Option<f64>,
    /// With --cas1 and --link-idle: the most links each 5066 node holds at once (the base
    /// serves that many ships' unicast at a time; a ship asking beyond it is rejected and asks
    /// again later). Default: no limit.
    #[arg(long, value_name = "N", requires = "link_idle")]
    max_links: Option<usize>,
    /// Ship SHIP (1 = the nearest) hears nothing from the base from simulated second START
    /// for LENGTH seconds, `SHIP@START+LENGTH` (a ship behind a headland). Repeatable.
    #[arg(long = "outage", value_name = "SHIP@START+LENGTH")]
    outages: Vec<String>,
    /// What ship SHIP hears is DB weaker from START for LENGTH seconds,
    /// `SHIP@START+LENGTH:DB`. Repeatable.
    #[arg(long = "fade", value_name = "SHIP@START+LENGTH:DB")]
    fades: Vec<String>,
    /// Every interleaver block ship SHIP hears overlapping START..START+LENGTH is lost,
    /// `SHIP@START+LENGTH`. Repeatable.
    #[arg(long = "block-loss", value_name = "SHIP@START+LENGTH")]
    block_losses: Vec<String>,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Table format on standard output.
    #[arg(long, value_enum, default_value = "md")]
    format: Format,
    /// Also write table.md, table.csv and the SVG figures into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Table format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Markdown.
    Md,
    /// CSV.
    Csv,
}

/// Workload shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum MeasureArg {
    /// Whole messages of the given sizes, submission to delivery (Isode).
    Isode,
    /// Mails carrying text attachments of the given sizes, whole connection (NTIA).
    Ntia,
}

#[derive(Debug, clap::Args)]
struct Compare {
    /// Scenarios: smtp-tcp-modem, smtp-tcp-5066, smtp-tcp-5066-nofilter, smtp-tcp-5066-xlzw,
    /// smtp-tcp-5066-deflate, hmtp-5066-none, hmtp-5066-lzw16, hmtp-5066-deflate,
    /// hmtp-5066-deflate-dict, each hmtp one with -noresume, cftp-5066 (default: all).
    #[arg(long, value_delimiter = ',')]
    scenarios: Vec<String>,
    /// Run the smtp-tcp-5066 scenarios with the SIS client's duplicate filter off (as
    /// smtp-tcp-5066-nofilter).
    #[arg(long)]
    no_dup_filter: bool,
    /// Run the hmtp-5066 scenarios without XRESUME: a session a lost link cut short goes again
    /// whole (as hmtp-5066-*-noresume).
    #[arg(long)]
    no_resume: bool,
    /// Modem rates, bit/s (default 1200).
    #[arg(long, value_delimiter = ',')]
    rate: Vec<u32>,
    /// Channels: awgn or a profile name (good, moderate, poor, ...) (default awgn).
    #[arg(long, value_delimiter = ',')]
    channel: Vec<String>,
    /// SNRs, dB in 3 kHz (default 30; full default 5,10,15,20,30).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    snr: Vec<f64>,
    /// Interleavers: zero, short, long, ... (default short).
    #[arg(long, value_delimiter = ',')]
    interleaver: Vec<String>,
    /// Message sizes (isode) or attachment sizes (ntia), bytes (default 386,1867,14025,135604).
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Messages per run (default 1).
    #[arg(long, value_delimiter = ',')]
    messages: Vec<usize>,
    /// Seeds per condition: 1..=K (default 1 with --quick, else 3).
    #[arg(long)]
    seeds: Option<u64>,
    /// TCP profiles: best-case, linux, jnos-1998, isode-stock; the TCP scenarios run once per
    /// profile (default: jnos-1998 for smtp-tcp-modem, best-case over 5066).
    #[arg(long, value_delimiter = ',')]
    tcp_profile: Vec<String>,
    /// TCP maximum segment sizes, bytes, overriding the profile's (MTU = MSS + 40).
    #[arg(long, value_delimiter = ',')]
    mss: Vec<u16>,
    /// TCP receive windows, bytes, overriding the profile's: fixed, as a Linux application's
    /// SO_RCVBUF fixes it (the Linux profiles' autotuning off, unless --rcv-tuning on).
    #[arg(long, value_delimiter = ',')]
    window: Vec<u32>,
    /// STANAG 5066 D_PDU segment size for every run, bytes (1-1023, default 1023): smaller
    /// segments lose less to one bad interleaver block at low SNR and cost more headers.
    #[arg(long, default_value_t = skywave_bench::sweep::DEFAULT_SEGMENT)]
    segment_size: usize,
    /// Modem generation for every run: rm6 (a current modem, RapidM RM6 measurements) or
    /// 110a-minimum (just meets MIL-STD-188-110A, 75-2400 bit/s). Default: each scenario's own,
    /// 110a-minimum for smtp-tcp-modem (NTIA's 1998 conditions) up to 2400 bit/s, rm6 otherwise.
    #[arg(long)]
    modem: Option<String>,
    /// Turnaround for every run, seconds: how long a station takes after the end of a
    /// transmission it received before it can key up (radio switching, 5066 processing; at
    /// most 127.5). Default 0.15, the best case; deployed STANAG 5066 systems take "seconds or
    /// tens of seconds" (Isode).
    #[arg(long)]
    turnaround: Option<f64>,
    /// STANAG 5066 scenarios: the ship's node makes a physical link with CAS-1 (PHYSICAL LINK
    /// REQUEST, ACCEPTED) before its first ARQ data, as a 5066 server does unless ALE or an
    /// operator has made the link (default: the link is taken as made).
    #[arg(long)]
    cas1: bool,
    /// With --cas1: the node whose request made the link breaks it once it has idled this
    /// many seconds (PHYSICAL LINK BREAK, BREAK CONFIRM; 0 allowed, as Annex A allows); the
    /// next data makes it again. Default: a made link stays.
    #[arg(long, value_name = "SECS", requires = "cas1")]
    link_idle: Option<f64>,
    /// STANAG 5066 scenarios: the nodes' default maximum TTL, seconds (Annex A: the one a
    /// U_PDU submitted with TTL 0 gets, as every U_PDU here is): one still in the subnetwork
    /// that long after its submission is discarded. Default: none, they never expire.
    #[arg(long, value_name = "SECS")]
    default_ttl: Option<f64>,
    /// STANAG 5066 scenarios over the IP client (SAP 9): the TTL, seconds, it asks for in
    /// every S_UNIDATA_REQUEST (Annex F.12 does not say which). Default: 0, the nodes' default
    /// maximum (--default-ttl).
    #[arg(long, value_name = "SECS")]
    ip_ttl: Option<f64>,
    /// Initial RTT (JNOS IRTT), seconds, overriding the profile's.
    #[arg(long)]
    irtt: Option<f64>,
    /// Longest back-off (JNOS maxwait), seconds, overriding the profile's.
    #[arg(long)]
    max_wait: Option<f64>,
    #[command(flatten)]
    tcp: TcpArgs,
    /// Smallest RTO, seconds, overriding the profile's (skywave's TCP only; smoltcp's is
    /// fixed at its clock dilation).
    #[arg(long, value_name = "SECS")]
    min_rto: Option<f64>,
    /// The ship's mail-queue timer (JNOS `smtp timer`), seconds: after a connection that ended
    /// with mail not accepted (its TCP gave up, the 5066 link was lost), the mail goes again in
    /// a new connection at the timer's next tick, until the run's time limit. Default: none, as
    /// JNOS until `smtp timer` is set (the queue runs once).
    #[arg(long)]
    smtp_timer: Option<f64>,
    /// Slow SNR drift on both paths of every run, `SIGMA_DB[/SECS]` (correlation time 600 s
    /// unless given): the mean SNR wanders as a Gaussian process in dB, each direction on its
    /// own. An assumption to test against, not a measurement.
    #[arg(long, value_name = "SIGMA_DB[/SECS]")]
    drift: Option<String>,
    /// No signal on either path from simulated second START of every run for LENGTH
    /// seconds, `START+LENGTH` (a propagation drop-out mid-session). Repeatable.
    #[arg(long = "outage", value_name = "START+LENGTH")]
    outages: Vec<String>,
    /// The SNR of both paths drops by DB from START for LENGTH seconds, `START+LENGTH:DB`.
    /// Repeatable.
    #[arg(long = "fade", value_name = "START+LENGTH:DB")]
    fades: Vec<String>,
    /// Every interleaver block overlapping START..START+LENGTH is lost on both paths,
    /// `START+LENGTH` (an interferer). Repeatable.
    #[arg(long = "block-loss", value_name = "START+LENGTH")]
    block_losses: Vec<String>,
    /// Workload shape.
    #[arg(long, value_enum, default_value = "isode")]
    measure: MeasureArg,
    /// Table format on standard output.
    #[arg(long, value_enum, default_value = "md")]
    format: Format,
    /// Also write table.md, table.csv and the SVG figures into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The small CI sweep: 1200 bit/s, clean AWGN (30 dB), short interleaver, the four Isode
    /// sizes, one message, one seed (explicit options still apply).
    #[arg(long)]
    quick: bool,
}

#[derive(Debug, clap::Args)]
struct Calibrate {
    /// Directory holding ntia-jnos-table5.csv, isode-smtp-vs-coacp142.csv,
    /// isode-ip-over-5066.csv and isode-tcp-over-5066.csv (default:
    /// ../shared/calibration relative to the workspace root).
    #[arg(long)]
    calibration: Option<PathBuf>,
    /// Seeds per condition: 1..=K.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Also write calibration.md into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Turnaround of the STANAG 5066 stations (every Isode run), seconds, instead of the
    /// modem's 0.15 (at most 127.5): what a deployed turnaround does to all of Isode's tables
    /// at once. NTIA's raw-modem runs keep theirs.
    #[arg(long)]
    turnaround: Option<f64>,
    /// The STANAG 5066 stations of the Isode runs take their link as made instead of making
    /// it with CAS-1 before their first ARQ data (as Isode's, with no ALE, did).
    #[arg(long)]
    no_cas1: bool,
    /// The stations of the Isode runs break a CAS-1 link once it has idled this many seconds
    /// (the caller sends PHYSICAL LINK BREAK; the next data makes the link again), as Annex A
    /// lets a server end a soft-link session after a configurable time (0 allowed). Default:
    /// a made link stays.
    #[arg(long, value_name = "SECS", conflicts_with = "no_cas1")]
    link_idle: Option<f64>,
    /// The STANAG 5066 stations of the Isode runs discard a U_PDU still in the subnetwork this
    /// many seconds after its submission (their default maximum TTL, Annex A; Isode's is not
    /// published). Default: none, they never expire.
    #[arg(long, value_name = "SECS")]
    default_ttl: Option<f64>,
    /// The IP clients of the Isode runs (UDP flood, TCP) ask for this TTL, seconds, in every
    /// S_UNIDATA_REQUEST (Annex F.12 does not say which). Default: 0, the nodes' default
    /// maximum.
    #[arg(long, value_name = "SECS")]
    ip_ttl: Option<f64>,
    /// Maximum C_PDU segment size of the STANAG 5066 stations of the Isode runs, bytes
    /// (1-1023; the RM6 servers' is not published). Default: 200, Annex C's example and
    /// what Isode calls typical; 1023 is the emulator's own default.
    #[arg(long, value_name = "B", default_value_t = calibrate::ISODE_SEGMENT)]
    segment_size: usize,
    #[command(flatten)]
    tcp: TcpArgs,
}

/// The TCP switches `compare` and `calibrate` share. `compare` applies them to every TCP
/// run; `calibrate` applies the engine and `--no-sack` to every host, NTIA's and Isode's, and
/// the others to Isode's Linux hosts alone (NTIA's JNOS has none of them).
#[derive(Debug, clap::Args)]
struct TcpArgs {
    /// The TCP the hosts run: smoltcp (its clock dilated so one RTO constant fits) or skywave
    /// (our own, whose initial, minimum and maximum RTO are the profile's or --irtt, --min-rto
    /// and --max-wait exactly). Default: each profile's own (skywave for jnos-1998, linux and
    /// isode-stock, smoltcp for best-case).
    #[arg(long, value_name = "ENGINE")]
    tcp_engine: Option<String>,
    /// Slow-start threshold, segments (at least 2), every connection starts with once its
    /// handshake is done, as a Linux host sets it from the ssthresh an earlier connection left
    /// in its metrics cache (skywave's TCP only: jnos-1998, linux, isode-stock, or any profile
    /// with --tcp-engine skywave; not published for Isode's hosts). Default: none, slow start
    /// until the first loss.
    #[arg(long, value_name = "SEGMENTS")]
    ssthresh: Option<u16>,
    /// Run skywave's TCP without selective acknowledgements (RFC 2018), which the linux and
    /// isode-stock profiles offer and recover by (RFC 6675) as Linux does by default; without
    /// them a loss is repaired by NewReno and a timeout resends go-back-N.
    #[arg(long)]
    no_sack: bool,
    /// Linux's tail-loss probe on skywave's TCP, `on` or `off` for every profile with SACK
    /// (default: each profile's own, on for linux, off for isode-stock, whose Linux likely
    /// predates it).
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    tlp: Option<bool>,
    /// Linux's delayed-ACK engine on skywave's TCP (quick ACKs at the start, interactive
    /// mode, a delay that follows the arrivals), `on` or `off`; off: a fixed 40 ms delay and
    /// an ACK for every second full segment (default: each profile's own, on for linux and
    /// isode-stock).
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    linux_acks: Option<bool>,
    /// The congestion control of the Linux profiles on skywave's TCP: `cubic` (Linux's
    /// default, CUBIC with HyStart, counting ACKs as each profile's kernel does: isode-stock's
    /// 2.6.39-4.0, linux's 4.1 on; the profiles' own) or `reno` (Linux's Reno, which they ran
    /// until 2026-11-28).
    #[arg(long, value_name = "reno|cubic", value_parser = reno_cubic)]
    congestion: Option<bool>,
    /// Linux's receive window on skywave's TCP, `on` or `off`: on, the profile's kernel's
    /// (isode-stock: 3.4-3.9, ten segments in the SYN, grown as data arrives, the buffer
    /// autotuned to twice what the application reads in a round trip; linux and the others:
    /// 4.20-6.5, 64240 bytes in the SYN and the buffer autotuned once a round trip reads more
    /// than ten segments; window scale 7 for both); off, the profile's fixed window (65535
    /// bytes for both Linux profiles, as until 2026-11-29, and without the window-scale
    /// option). Default: each profile's own, on for isode-stock and linux.
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    rcv_tuning: Option<bool>,
    /// Linux's send buffer on skywave's TCP, `on` or `off`: on, the profile's kernel's
    /// (16384 bytes, raised once the connection is open, then to twice the congestion
    /// window whenever an ACK frees room while the application waits for it, up to 4 MB;
    /// isode-stock: the rules before 3.16, linux: 3.16's on); off, a fixed 64 KB, as until
    /// 2026-11-29. Default: each profile's own, on for isode-stock and linux.
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    snd_tuning: Option<bool>,
    /// Timeouts of an unanswered SYN that resend it after 1 s before the back-off starts
    /// doubling, on skywave's TCP, with the SYN's give-up moved to match (127 s + N):
    /// Linux 6.5 on has 4 (`tcp_syn_linear_timeouts`), earlier kernels 0. Default: each
    /// profile's own, 4 for linux, 0 for the others.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=127))]
    syn_linear_timeouts: Option<u8>,
    /// The restart after idle on skywave's TCP, Linux's (`tcp_slow_start_after_idle`) or
    /// JNOS's, `on` or `off`: on, a Linux sender that sent no data for longer than its RTO, with nothing
    /// in flight, halves its window per RTO idle down to the initial ten segments, checked
    /// where the profile's kernel checks it (isode-stock: as data goes; linux: when the
    /// application writes or the peer's window changes), and a window the application
    /// leaves unused comes down halfway to what was used per RTO (RFC 2861); for jnos-1998,
    /// JNOS's rule (one segment again after SRTT without unacknowledged data). Default: on
    /// for isode-stock, linux and jnos-1998 (their stacks' defaults).
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    slow_start_after_idle: Option<bool>,
    /// Linux's test of whether the congestion window is in use on skywave's TCP, which Reno
    /// and CUBIC grow only then, `on` or `off`: on, the profile's kernel's
    /// (`tcp_is_cwnd_limited`; isode-stock: 3.x's, what was in flight before the ACK fills the
    /// window or leaves less than a third of it, GSO's test, or at most three segments;
    /// linux: 5.18's, a flight filled the window in the current window of data, or in slow
    /// start the window is under twice the most out); off, what was in flight is within one
    /// segment of the window, as until 2026-11-29.
    /// Default: on.
    #[arg(long, value_name = "on|off", value_parser = on_off)]
    kernel_cwnd_test: Option<bool>,
}

impl TcpArgs {
    /// The switches, checked: Linux's smallest slow-start threshold is two segments, and
    /// smoltcp can be given neither one nor Linux's receive window.
    fn overrides(&self) -> Result<TcpOverrides> {
        let engine: Option<TcpEngine> = self.tcp_engine.as_deref().map(str::parse).transpose()?;
        if self.rcv_tuning == Some(true) && engine == Some(TcpEngine::Smoltcp) {
            bail!("--rcv-tuning on needs skywave's TCP: smoltcp's receive buffer is fixed");
        }
        if self.snd_tuning == Some(true) && engine == Some(TcpEngine::Smoltcp) {
            bail!("--snd-tuning on needs skywave's TCP: smoltcp's send buffer is fixed");
        }
        if self.syn_linear_timeouts.is_some_and(|n| n > 0) && engine == Some(TcpEngine::Smoltcp) {
            bail!("--syn-linear-timeouts needs skywave's TCP: smoltcp's SYN back-off is fixed");
        }
        if self.slow_start_after_idle == Some(true) && engine == Some(TcpEngine::Smoltcp) {
            bail!("--slow-start-after-idle on needs skywave's TCP: smoltcp never restarts");
        }
        if let Some(n) = self.ssthresh {
            if n < 2 {
                bail!("--ssthresh must be at least 2 segments (got {n})");
            }
            if engine == Some(TcpEngine::Smoltcp) {
                bail!(
                    "--ssthresh needs skywave's TCP: smoltcp cannot be given a slow-start threshold"
                );
            }
        }
        Ok(TcpOverrides {
            engine,
            ssthresh: self.ssthresh,
            no_sack: self.no_sack,
            tlp: self.tlp,
            linux_acks: self.linux_acks,
            cubic: self.congestion,
            rcv_tuning: self.rcv_tuning,
            snd_tuning: self.snd_tuning,
            syn_linear_timeouts: self.syn_linear_timeouts,
            slow_start_after_idle: self.slow_start_after_idle,
            kernel_cwnd_test: self.kernel_cwnd_test,
        })
    }
}

/// A `reno|cubic` choice: `true` for CUBIC.
fn reno_cubic(s: &str) -> std::result::Result<bool, String> {
    match s {
        "reno" => Ok(false),
        "cubic" => Ok(true),
        _ => Err(format!("expected reno or cubic, got {s:?}")),
    }
}

/// An `on|off` switch.
fn on_off(s: &str) -> std::result::Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("expected on or off, got {other:?}")),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Compare(c) => compare(*c),
        Command::Calibrate(c) => run_calibrate(c),
        Command::Fleet(f) => run_fleet(f),
        Command::Modem(m) => run_modem_survey(m),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("skywave-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The grid `skywave-bench modem ...` describes, defaults filled in.
fn survey_spec(m: &ModemSurvey) -> Result<skywave_bench::modem_survey::SurveySpec> {
    use skywave_emu::modem::Generation;
    let generations = or(m.modem.clone(), &["rm6".into(), "110a-minimum".into()])
        .iter()
        .map(|g| {
            g.parse::<Generation>()
                .map_err(|e| anyhow::anyhow!("--modem {g}: {e}"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(skywave_bench::modem_survey::SurveySpec {
        generations,
        rates: or(m.rate.clone(), &[1200, 2400]),
        interleavers: or(m.interleaver.clone(), &["short".into()]),
        channels: or(m.channel.clone(), &["good".into()]),
        snrs: or(m.snr.clone(), &[0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0]),
        frame_bytes: or(m.frame_bytes.clone(), &[276, 1045]),
        frames_per_transmission: m.frames_per_transmission,
        transmissions: m.transmissions,
        seed: m.seed,
    })
}

fn run_modem_survey(m: ModemSurvey) -> Result<ExitCode> {
    use skywave_bench::modem_survey::{run_survey, survey_csv, survey_markdown};
    let rows = run_survey(&survey_spec(&m)?);
    out!(
        "{}",
        match m.format {
            Format::Md => survey_markdown(&rows),
            Format::Csv => survey_csv(&rows),
        }
    );
    // A row that could not run (an unknown channel, a rate the generation lacks) says why in
    // the table; the exit status says so too.
    Ok(if rows.iter().all(|r| r.result.is_ok()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// `fleet --outage`, `--fade` and `--block-loss`: `SHIP@` (1 to the smallest fleet's size)
/// before the impairment, on what that ship hears.
fn fleet_impairments(
    values: [&[String]; 3],
    ships: &[usize],
) -> Result<Vec<(usize, skywave_emu::channel::ScheduledImpairment)>> {
    let smallest = ships.iter().copied().min().unwrap_or(0);
    let (_, out) = parse_changes(None, values, |what, kind, t| {
        let (ship, imp) = parse_aimed(what, kind, t, "SHIP", true)?;
        let ship = ship.unwrap_or_default();
        let n = ship
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|s| (1..=smallest).contains(s))
            .ok_or_else(|| {
                format!("{what} {t}: {ship} is not a ship of every fleet run (1 to {smallest})")
            })?;
        Ok((n - 1, imp))
    })
    .map_err(anyhow::Error::msg)?;
    Ok(out)
}

fn run_fleet(f: Fleet) -> Result<ExitCode> {
    use skywave_bench::fleet::{
        FleetRow, FleetSpec, FleetWorkload, fleet_csv, fleet_markdown, fleet_plots, run_fleet,
    };
    let turnaround = turnaround(f.turnaround)?;
    let link_idle = seconds(f.link_idle, "--link-idle")?;
    if f.max_links == Some(0) {
        bail!("--max-links must be at least 1");
    }
    let ships = or(f.ships, &[2, 5, 10]);
    if let Some(&n) = ships.iter().find(|&&n| !(1..=50).contains(&n)) {
        bail!("--ships {n}: a fleet has 1 to 50 ships");
    }
    let workloads = or(f.workload, &["all".into(), "one".into(), "mixed".into()])
        .iter()
        .map(|w| {
            FleetWorkload::parse(w).with_context(|| {
                format!("unknown workload {w:?}: expected all, one, mixed, reports or exchange")
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let scenarios = or(
        f.scenarios,
        &[
            "hmtp-unicast".into(),
            "pmul-multicast".into(),
            "pmul-ip".into(),
        ],
    );
    if !(0.0..=0.9).contains(&f.ip_loss) || f.ip_rate == 0 {
        bail!("--ip-loss must be 0 to 0.9 and --ip-rate more than 0");
    }
    let ip = skywave_emu::ipnet::IpNetConfig {
        delay: Duration::from_millis(f.ip_delay_ms),
        loss: f.ip_loss,
        rate_bps: f.ip_rate,
        seed: f.seed,
    };
    let mut modes = Vec::new();
    for s in &scenarios {
        match s.as_str() {
            "hmtp-unicast" => modes.push((false, None)),
            "pmul-multicast" => modes.push((true, None)),
            "pmul-ip" => modes.push((true, Some(ip.clone()))),
            other => bail!(
                "unknown scenario {other:?}: expected hmtp-unicast, pmul-multicast or pmul-ip"
            ),
        }
    }
    let ship_impairments = fleet_impairments([&f.outages, &f.fades, &f.block_losses], &ships)?;
    let emcons = or(f.emcon, &[0, 1]);
    let slots = or(f.slot_minutes, &[0]);
    let mut specs = Vec::new();
    for &n in &ships {
        for &w in &workloads {
            for (multicast, ip) in &modes {
                let multicast = *multicast;
                for (&e, &slot) in emcons
                    .iter()
                    .flat_map(|e| slots.iter().map(move |s| (e, s)))
                {
                    // EMCON ships are unreachable by unicast: one row says so, not one per count.
                    if e > n || (!multicast && e > 0 && emcons.iter().any(|&x| x > 0 && x < e)) {
                        continue;
                    }
                    specs.push(FleetSpec {
                        ships: n,
                        workload: w,
                        multicast,
                        emcon: e,
                        size: f.size,
                        rate_bps: f.rate,
                        snr_db: f.snr,
                        seed: f.seed,
                        ip: ip.clone(),
                        turnaround,
                        cas1: f.cas1,
                        link_idle,
                        max_links: f.max_links,
                        ship_impairments: ship_impairments.clone(),
                        slot_minutes: (slot > 0).then_some(slot),
                    });
                }
            }
        }
    }
    let bar = ProgressBar::new(specs.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} fleet runs ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut rows = Vec::new();
    for spec in specs {
        let result = if !spec.multicast && spec.emcon > 0 {
            Err("unreachable: a ship under EMCON cannot answer HMTP".to_owned())
        } else {
            run_fleet(&spec).map_err(|e| e.to_string())
        };
        rows.push(FleetRow { spec, result });
        bar.inc(1);
    }
    bar.finish_and_clear();
    let text = match f.format {
        Format::Md => fleet_markdown(&rows),
        Format::Csv => fleet_csv(&rows),
    };
    out!("{text}");
    if let Some(dir) = &f.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut files = vec![
            write(dir, "table.md", &fleet_markdown(&rows))?,
            write(dir, "table.csv", &fleet_csv(&rows))?,
        ];
        files.extend(fleet_plots(&rows, dir)?);
        for file in files {
            eprintln!("wrote {}", file.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn or<T: Clone>(given: Vec<T>, default: &[T]) -> Vec<T> {
    if given.is_empty() {
        default.to_vec()
    } else {
        given
    }
}

fn seconds(s: Option<f64>, what: &str) -> Result<Option<Duration>> {
    s.map(|s| Duration::try_from_secs_f64(s).with_context(|| format!("{what}: {s} s")))
        .transpose()
}

/// `--default-ttl`, `--ip-ttl`: above zero (a TTL of 0 is what asks for the default) and
/// within what S_UNIDATA_REQUEST can carry.
fn ttl(s: Option<f64>, what: &str) -> Result<Option<Duration>> {
    let t = seconds(s, what)?;
    if t.is_some_and(|t| t.is_zero()) {
        bail!("{what} must be above 0 seconds");
    }
    let most = skywave_bench::stack::MAX_TTL;
    if t.is_some_and(|t| t > most) {
        bail!("{what} must be at most {} seconds", most.as_secs());
    }
    Ok(t)
}

/// `--segment-size` (compare, calibrate): what a D_PDU's 10-bit size field holds.
fn segment_size(n: usize) -> Result<usize> {
    match n {
        1..=1023 => Ok(n),
        n => bail!("--segment-size must be 1 to 1023 bytes (got {n})"),
    }
}

/// `--turnaround`, refused before any run when the modem would refuse it.
fn turnaround(s: Option<f64>) -> Result<Option<Duration>> {
    let t = seconds(s, "--turnaround")?;
    if t.is_some_and(|t| t > skywave_emu::modem::MAX_TURNAROUND) {
        bail!(
            "--turnaround must be at most {} seconds",
            skywave_emu::modem::MAX_TURNAROUND.as_secs_f64()
        );
    }
    Ok(t)
}

fn seeds(k: u64) -> Result<Vec<u64>> {
    if !(1..=1000).contains(&k) {
        bail!("--seeds must be between 1 and 1000 (got {k})");
    }
    Ok((1..=k).collect())
}

/// The sweep the options describe.
fn spec(c: &Compare) -> Result<SweepSpec> {
    let mut scenarios = c
        .scenarios
        .iter()
        .map(|s| s.parse::<Scenario>())
        .collect::<Result<Vec<_>, _>>()?;
    if scenarios.is_empty() {
        scenarios = Scenario::ALL.to_vec();
    }
    for s in &mut scenarios {
        if c.no_dup_filter {
            *s = s.without_filter().unwrap_or(*s);
        }
        if c.no_resume {
            *s = s.without_resume().unwrap_or(*s);
        }
    }
    let mut dedup = Vec::new();
    for s in scenarios {
        if !dedup.contains(&s) {
            dedup.push(s);
        }
    }
    let mut tcp_profiles = Vec::new();
    for p in &c.tcp_profile {
        let p = p.parse::<TcpProfile>()?;
        if !tcp_profiles.contains(&p) {
            tcp_profiles.push(p);
        }
    }
    let default_snrs: &[f64] = if c.quick {
        &[30.0]
    } else {
        &[5.0, 10.0, 15.0, 20.0, 30.0]
    };
    Ok(SweepSpec {
        scenarios: dedup,
        channels: or(c.channel.clone(), &["awgn".to_string()]),
        snrs_db: or(c.snr.clone(), default_snrs),
        rates_bps: or(c.rate.clone(), &[1200]),
        interleavers: or(c.interleaver.clone(), &["short".to_string()]),
        shape: match c.measure {
            MeasureArg::Isode => Shape::Isode,
            MeasureArg::Ntia => Shape::Ntia,
        },
        sizes: or(c.sizes.clone(), &ISODE_SIZES),
        counts: or(c.messages.clone(), &[1]),
        tcp_profiles,
        mss: c.mss.clone(),
        windows: c.window.clone(),
        irtt: seconds(c.irtt, "--irtt")?,
        max_wait: seconds(c.max_wait, "--max-wait")?,
        min_rto: seconds(c.min_rto, "--min-rto")?,
        tcp: c.tcp.overrides()?,
        smtp_timer: seconds(c.smtp_timer, "--smtp-timer")?,
        seeds: seeds(c.seeds.unwrap_or(if c.quick { 1 } else { 3 }))?,
        segment_size: segment_size(c.segment_size)?,
        modem: c
            .modem
            .as_deref()
            .map(str::parse::<skywave_emu::modem::Generation>)
            .transpose()?,
        turnaround: turnaround(c.turnaround)?,
        cas1: c.cas1,
        link_idle: seconds(c.link_idle, "--link-idle")?,
        default_ttl: ttl(c.default_ttl, "--default-ttl")?,
        ip_ttl: ttl(c.ip_ttl, "--ip-ttl")?,
        changes: channel_changes(c)?,
    })
}

/// `--drift`, `--outage`, `--fade` and `--block-loss`.
fn channel_changes(c: &Compare) -> Result<ChannelChanges> {
    let (drift, impairments) = parse_changes(
        c.drift.as_deref(),
        [&c.outages, &c.fades, &c.block_losses],
        |what, kind, t| ScheduledImpairment::parse(kind, t).map_err(|e| format!("{what} {t}: {e}")),
    )
    .map_err(anyhow::Error::msg)?;
    Ok(ChannelChanges { drift, impairments })
}

/// A progress bar on standard error when it is a terminal, hidden otherwise.
fn progress_bar(total: usize) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total as u64);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40.cyan/blue} {pos}/{len} runs [{elapsed}] {msg}")
    {
        bar.set_style(style);
    }
    bar
}

fn write(dir: &Path, name: &str, text: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

fn compare(c: Compare) -> Result<ExitCode> {
    let spec = spec(&c)?;
    let bar = progress_bar(spec.runs());
    let rows = run_sweep(&spec, |done, _, point| {
        bar.set_position(done as u64);
        bar.set_message(point.label());
    });
    bar.finish_and_clear();
    match c.format {
        Format::Md => out!("{}", report::markdown(&rows)),
        Format::Csv => out!("{}", report::csv(&rows)),
    }
    if let Some(dir) = &c.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut files = vec![
            write(dir, "table.md", &report::markdown(&rows))?,
            write(dir, "table.csv", &report::csv(&rows))?,
        ];
        files.extend(plot::write_plots(&rows, dir)?);
        for f in files {
            eprintln!("wrote {}", f.display());
        }
    }
    let failed = rows.iter().filter(|r| r.stats.is_err()).count();
    if failed > 0 {
        eprintln!(
            "skywave-bench: {failed} of {} rows could not run",
            rows.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The calibration directory: the flag, else `../shared/calibration` from the workspace root
/// this binary was built in, else from the current directory.
fn calibration_dir(flag: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(dir) = flag {
        return Ok(dir);
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/calibration");
    let candidates = [
        built,
        PathBuf::from("../shared/calibration"),
        PathBuf::from("shared/calibration"),
        PathBuf::from("calibration"),
    ];
    candidates
        .iter()
        .find(|d| {
            [NTIA_FILE, ISODE_FILE, ISODE_IP_FILE, ISODE_TCP_FILE]
                .iter()
                .all(|f| d.join(f).is_file())
        })
        .cloned()
        .with_context(|| {
            format!(
                "no calibration directory found (looked for {NTIA_FILE}, {ISODE_FILE}, {ISODE_IP_FILE} and {ISODE_TCP_FILE} in {}); pass --calibration DIR",
                candidates
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

fn run_calibrate(c: Calibrate) -> Result<ExitCode> {
    let dir = calibration_dir(c.calibration)?;
    let seeds = seeds(c.seeds)?;
    let stations = calibrate::Stations {
        turnaround: turnaround(c.turnaround)?,
        cas1: !c.no_cas1,
        link_idle: seconds(c.link_idle, "--link-idle")?,
        default_ttl: ttl(c.default_ttl, "--default-ttl")?,
        ip_ttl: ttl(c.ip_ttl, "--ip-ttl")?,
        segment_size: Some(segment_size(c.segment_size)?),
        tcp: c.tcp.overrides()?,
    };
    let bar = progress_bar(calibrate::run_count(&dir, seeds.len(), stations)?);
    let cal = calibrate::calibrate(&dir, &seeds, stations, &mut |name| {
        bar.inc(1);
        bar.set_message(name.to_string());
    })?;
    bar.finish_and_clear();
    let text = format!("{stations}.\n\n{}", cal.markdown());
    outln!("Calibration against {}\n", dir.display());
    out!("{text}");
    if let Some(out) = &c.out {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        let f = write(out, "calibration.md", &text)?;
        eprintln!("wrote {}", f.display());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sweep `skywave-bench compare ARGS...` describes.
    fn compare_spec(args: &[&str]) -> Result<SweepSpec> {
        let cli = Cli::parse_from(["skywave-bench", "compare"].iter().chain(args));
        let Command::Compare(c) = cli.command else {
            panic!("not compare");
        };
        spec(&c)
    }

    #[test]
    fn modem_survey_defaults_and_flags() {
        let parse = |args: &[&str]| {
            let cli = Cli::parse_from(["skywave-bench", "modem"].iter().chain(args));
            let Command::Modem(m) = cli.command else {
                panic!("not modem");
            };
            survey_spec(&m)
        };
        let d = parse(&[]).unwrap();
        assert_eq!(d.rates, [1200, 2400]);
        assert_eq!(d.frame_bytes, [276, 1045]);
        assert_eq!(d.snrs.len(), 7);
        assert_eq!(
            (d.transmissions, d.frames_per_transmission, d.seed),
            (2000, 4, 1)
        );
        let s = parse(&["--modem", "110a-minimum", "--snr=-5,0", "--rate", "75"]).unwrap();
        assert_eq!(
            s.generations,
            [skywave_emu::modem::Generation::Mil110aMinimum]
        );
        assert_eq!(s.snrs, [-5.0, 0.0]);
        let e = parse(&["--modem", "rm7"]).unwrap_err();
        assert!(e.to_string().contains("--modem rm7"), "{e}");
    }

    #[test]
    fn quick_spec_and_flags() {
        let s = compare_spec(&[
            "--quick",
            "--scenarios",
            "hmtp-5066-deflate,smtp-tcp-5066,smtp-tcp-5066",
            "--no-dup-filter",
            "--snr=-3,10",
            "--mss",
            "216,472",
        ])
        .unwrap();
        assert_eq!(
            s.scenarios.iter().map(|s| s.name()).collect::<Vec<_>>(),
            ["hmtp-5066-deflate", "smtp-tcp-5066-nofilter"]
        );
        assert_eq!(s.snrs_db, [-3.0, 10.0]);
        assert_eq!(s.seeds, [1]);
        assert_eq!(s.sizes, ISODE_SIZES);
        assert!(s.tcp_profiles.is_empty());
        let tcp = s.tcp_settings(s.scenarios[1], 1200);
        assert_eq!(
            tcp.iter().map(|t| (t.mss, t.window)).collect::<Vec<_>>(),
            [(216, 1 << 20), (472, 1 << 20)]
        );
        let s = compare_spec(&[
            "--scenarios",
            "hmtp-5066-lzw16,hmtp-5066-deflate-noresume,smtp-tcp-5066",
            "--no-resume",
        ])
        .unwrap();
        assert_eq!(
            s.scenarios.iter().map(|s| s.name()).collect::<Vec<_>>(),
            [
                "hmtp-5066-lzw16-noresume",
                "hmtp-5066-deflate-noresume",
                "smtp-tcp-5066"
            ]
        );
        let s = compare_spec(&["--tcp-profile", "linux,best-case,jnos-1998,linux"]).unwrap();
        assert_eq!(
            s.tcp_profiles,
            [
                TcpProfile::Linux,
                TcpProfile::BestCase,
                TcpProfile::Jnos1998
            ]
        );
        assert!(s.tcp_settings(s.scenarios[0], 1200)[0].smtp_timer.is_none());
        let s = compare_spec(&["--scenarios", "smtp-tcp-modem", "--smtp-timer", "600"]).unwrap();
        assert_eq!(
            s.tcp_settings(s.scenarios[0], 1200)[0].smtp_timer,
            Some(std::time::Duration::from_secs(600))
        );
        assert!(compare_spec(&["--smtp-timer=-5"]).is_err());
        assert!(compare_spec(&["--tcp-profile", "bsd"]).is_err());
        assert!(compare_spec(&["--scenarios", "smtp"]).is_err());
        assert!(seeds(0).is_err());
    }

    /// The TCP switches reach every run's settings in one place, and bad ones are refused
    /// before anything runs.
    #[test]
    fn tcp_switches_change_the_profile() {
        let s = compare_spec(&[
            "--tcp-profile",
            "linux",
            "--ssthresh",
            "4",
            "--no-sack",
            "--tlp",
            "off",
            "--linux-acks",
            "off",
            "--congestion",
            "reno",
            "--rcv-tuning",
            "on",
            "--snd-tuning",
            "off",
            "--syn-linear-timeouts",
            "0",
            "--slow-start-after-idle",
            "off",
            "--kernel-cwnd-test",
            "off",
        ])
        .unwrap();
        let t = s.tcp_settings(
            Scenario::SmtpTcp5066 {
                dup_filter: true,
                compression: skywave_bench::model::SmtpCompression::None,
            },
            1200,
        )[0];
        assert_eq!(t.initial_ssthresh, Some(4));
        assert!(!t.sack && !t.tlp && !t.linux_acks && t.rcv_tuning && !t.snd_tuning);
        assert!(!t.slow_start_after_idle && t.idle_restart().is_none());
        assert!(!t.kernel_cwnd_test);
        assert_eq!(t.cwnd_limited(), skywave_bench::model::CwndLimited::Segment);
        // Linux before 6.5: the SYN's back-off doubles from the first timeout, and it gives
        // up at 127 s.
        assert_eq!(
            (t.syn_linear_timeouts, t.give_up),
            (0, skywave_bench::model::GiveUp::LINUX)
        );
        // Linux's own bound (MAX_TCP_SYNCNT), refused by the parser.
        let e = Cli::try_parse_from(["skywave-bench", "compare", "--syn-linear-timeouts", "128"])
            .unwrap_err();
        assert!(e.to_string().contains("0..=127"), "{e}");
        assert!(matches!(
            t.congestion,
            skywave_bench::model::Congestion::LinuxReno { initial: 10, .. }
        ));
        assert_eq!(compare_spec(&[]).unwrap().tcp, TcpOverrides::NONE);
        let e = compare_spec(&["--ssthresh", "1"]).unwrap_err();
        assert!(e.to_string().contains("at least 2 segments"), "{e}");
        let e = compare_spec(&["--ssthresh", "4", "--tcp-engine", "smoltcp"]).unwrap_err();
        assert!(e.to_string().contains("skywave's TCP"), "{e}");
        let e = compare_spec(&["--rcv-tuning", "on", "--tcp-engine", "smoltcp"]).unwrap_err();
        assert!(e.to_string().contains("skywave's TCP"), "{e}");
        let e = compare_spec(&["--snd-tuning", "on", "--tcp-engine", "smoltcp"]).unwrap_err();
        assert!(e.to_string().contains("skywave's TCP"), "{e}");
        let e =
            compare_spec(&["--syn-linear-timeouts", "4", "--tcp-engine", "smoltcp"]).unwrap_err();
        assert!(e.to_string().contains("skywave's TCP"), "{e}");
        let e = compare_spec(&["--slow-start-after-idle", "on", "--tcp-engine", "smoltcp"])
            .unwrap_err();
        assert!(e.to_string().contains("skywave's TCP"), "{e}");
        assert!(compare_spec(&["--tcp-engine", "bsd"]).is_err());
    }

    /// `--turnaround` (compare, fleet, calibrate): seconds up to the longest 5066
    /// transmission, refused above it or below zero before anything runs.
    #[test]
    fn turnaround_is_bounded() {
        assert_eq!(
            turnaround(Some(4.0)).unwrap(),
            Some(std::time::Duration::from_secs(4))
        );
        assert_eq!(turnaround(None).unwrap(), None);
        let e = turnaround(Some(128.0)).unwrap_err();
        assert!(e.to_string().contains("at most 127.5 seconds"), "{e}");
        assert!(turnaround(Some(-1.0)).is_err());
        let e = compare_spec(&["--turnaround", "200"]).unwrap_err();
        assert!(e.to_string().contains("--turnaround"), "{e}");
        assert_eq!(
            compare_spec(&["--turnaround", "8.5"]).unwrap().turnaround,
            Some(std::time::Duration::from_millis(8500))
        );
    }

    /// `--segment-size` (compare, calibrate): what the D_PDU's 10-bit size field holds, checked
    /// before anything runs; calibrate's defaults to Isode's stations', compare's to 1023.
    #[test]
    fn the_segment_size_fits_a_dpdu() {
        assert_eq!(segment_size(200).unwrap(), 200);
        assert_eq!(segment_size(1023).unwrap(), 1023);
        for bad in [0, 1024] {
            let e = segment_size(bad).unwrap_err();
            assert!(e.to_string().contains("1 to 1023"), "{e}");
        }
        assert_eq!(compare_spec(&[]).unwrap().segment_size, 1023);
        let Command::Calibrate(c) = Cli::try_parse_from(["skywave-bench", "calibrate"])
            .unwrap()
            .command
        else {
            panic!("not calibrate");
        };
        assert_eq!(c.segment_size, calibrate::ISODE_SEGMENT);
    }

    #[test]
    fn a_default_ttl_is_a_positive_number_of_seconds() {
        assert_eq!(
            compare_spec(&["--default-ttl", "120"]).unwrap().default_ttl,
            Some(std::time::Duration::from_secs(120))
        );
        assert_eq!(compare_spec(&[]).unwrap().default_ttl, None);
        assert_eq!(
            compare_spec(&["--ip-ttl", "110"]).unwrap().ip_ttl,
            Some(std::time::Duration::from_secs(110))
        );
        for (bad, what) in [
            ("--default-ttl=0", "--default-ttl"),
            ("--default-ttl=-3", "--default-ttl"),
            ("--ip-ttl=0", "--ip-ttl"),
            ("--ip-ttl=3000000", "--ip-ttl"),
        ] {
            let e = compare_spec(&[bad]).unwrap_err();
            assert!(e.to_string().contains(what), "{e}");
        }
    }
}
