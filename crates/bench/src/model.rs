//! The shared vocabulary of the benchmark: what is run (a [`Scenario`] under a [`Condition`]
//! with a [`Workload`]) and what a run yields ([`RunResult`]). Every scenario runner in this
//! crate takes these and returns that, so the sweeps, tables, plots and `calibrate` treat all
//! stacks alike.

use std::time::Duration;

pub use crate::tcp::profile::{
    Congestion, CubicEra, CwndLimited, GiveUp, Kernel, Nagle, RtoFit, RttEstimator, TcpEngine,
    TcpOverrides, TcpProfile, WindowRules,
};

/// The protocol stack under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// JNOS as NTIA measured it: SMTP with XLZW over TCP/IP over the raw modem (AX.25-like
    /// framing, no ARQ).
    SmtpTcpModem,
    /// SMTP (RFC 2920 pipelining) over TCP/IP over the STANAG 5066 IP client (SAP 9, ARQ).
    SmtpTcp5066 {
        /// The SIS client's duplicate-datagram filter is on.
        dup_filter: bool,
        /// Compression of the SMTP stream.
        compression: SmtpCompression,
    },
    /// HMTP over STANAG 5066 SAP 3, one batch per session.
    Hmtp5066 {
        /// Stream compression.
        compression: HmtpCompression,
        /// A session a lost link cut short goes on from where the shore's node had it
        /// (`XRESUME`, a skywave gateway's default); `false` (the `-noresume` names): it goes
        /// again whole, as with `[hf] resume = false` or a peer without `XRESUME`.
        resume: bool,
    },
    /// CFTP over STANAG 5066 SAP 12 (gzip mail files over RCOP/BFTP).
    Cftp5066,
}

/// Compression of the SMTP-over-TCP stream over 5066, so that a table can set SMTP and HMTP
/// side by side with the same compression and separate the protocol's gain from the
/// compression's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SmtpCompression {
    /// Plain SMTP, as a stock MTA runs it.
    #[default]
    None,
    /// JNOS's `XLZW` SMTP extension, 16 bits, negotiated after EHLO (the skywave SMTP client and
    /// server speak it): the same LZW as `hmtp-5066-lzw16`.
    Xlzw,
    /// The whole TCP byte stream in each direction as one zlib stream flushed at every write (as
    /// IMAP's `COMPRESS=DEFLATE`, RFC 4978, flushes; SMTP has no such extension): the
    /// same deflate, level and flushing as `hmtp-5066-deflate`, greeting included.
    Deflate,
}

/// Compression of an HMTP stream in the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HmtpCompression {
    /// Plain HMTP.
    None,
    /// JNOS-compatible LZW, 16 bits.
    Lzw16,
    /// Deflate (zlib stream).
    Deflate,
    /// Deflate started from the preset mail dictionary (`skywave_compress::dictionary`), as a
    /// skywave gateway sends once the peer has advertised it (every session after the first).
    DeflateDict,
}

/// The radio conditions of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// `"awgn"` or a profile name from `calibration/channel-profiles.csv` (e.g. `"good"`,
    /// `"poor"`), matched as `skywave_emu::channel::profile` matches it.
    pub channel: String,
    /// Signal-to-noise ratio, dB in 3 kHz.
    pub snr_db: f64,
    /// Modem data rate, bit/s (75 .. 9600).
    pub rate_bps: u32,
    /// Interleaver name: `"zero"`, `"short"` or `"long"` (110A), as the emulator CLI spells it.
    pub interleaver: String,
    /// Seed of every random draw of the run.
    pub seed: u64,
    /// STANAG 5066 D_PDU segment size, bytes (1-1023; the emulator's default is 1023). Smaller
    /// segments lose less to one bad interleaver block and cost more headers. Not used by the
    /// raw-modem scenario.
    pub segment_size: usize,
    /// The modem generation; `None`: the scenario's own (the MIL-STD-188-110A-minimum modem
    /// for `smtp-tcp-modem` at 75-2400 bit/s, NTIA's conditions; the RM6 one otherwise, see
    /// [`crate::stack::modem_config_for`]).
    pub modem: Option<skywave_emu::modem::Generation>,
    /// How long a station takes, after the end of a transmission it received (decoded), before
    /// it can key up itself: radio RX-to-TX switching and the 5066 server's processing
    /// ([`skywave_emu::modem::ModemConfig::switching_time`]). `None`: the modem's 150 ms, the
    /// best case Isode shows is reachable; deployed STANAG 5066 systems take "seconds or tens
    /// of seconds" (Isode, "Reducing Turnaround Times in STANAG 5066").
    pub turnaround: Option<std::time::Duration>,
    /// STANAG 5066 Annex B CAS-1 linking ([`skywave_emu::net::SubnetConfig::cas1`]): the
    /// ship's node makes a physical link (PHYSICAL LINK REQUEST, ACCEPTED) before its first
    /// ARQ data, as a 5066 server does unless ALE or an operator has made it. `false` (the
    /// default): the link is taken as made. Not used by the raw-modem scenario.
    pub cas1: bool,
    /// With `cas1`: the node whose request made the link breaks it once it has idled this
    /// long ([`skywave_emu::net::SubnetConfig::link_idle`]); the next data makes it again.
    /// `None` (the default): a made link stays.
    pub link_idle: Option<std::time::Duration>,
    /// The STANAG 5066 nodes' default maximum TTL, which every U_PDU the scenarios submit
    /// (all with TTL 0) gets ([`skywave_emu::net::SubnetConfig::default_ttl`]): one still in
    /// the subnetwork that long after its submission is discarded. `None` (the default): they
    /// never expire. Not used by the raw-modem scenario.
    pub default_ttl: Option<std::time::Duration>,
    /// The TTL the IP client (SAP 9: the UDP flood and the TCP scenarios over 5066) asks for in
    /// every S_UNIDATA_REQUEST (Annex F.12 does not say which); `None`: TTL 0, the nodes'
    /// default maximum ([`Condition::default_ttl`]).
    pub ip_ttl: Option<std::time::Duration>,
    /// How the channel changes during the run (`compare --drift`, `--outage`, `--fade`,
    /// `--block-loss`); the default: it does not.
    pub changes: ChannelChanges,
}

/// How a run's channel changes with time, on every path, both directions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChannelChanges {
    /// Slow SNR drift; `None`: the mean SNR holds.
    pub drift: Option<skywave_emu::channel::SnrDrift>,
    /// Outages, fades and block losses, in simulated time from the start of the run.
    pub impairments: Vec<skywave_emu::channel::ScheduledImpairment>,
}

/// TCP settings for the SMTP-over-TCP scenarios (ignored by the others).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSettings {
    /// Maximum segment size, bytes (NTIA: 216).
    pub mss: u16,
    /// Receive window, bytes (NTIA: 1024 or 3072).
    pub window: u32,
    /// Initial round-trip time estimate (JNOS IRTT; NTIA: 60 s).
    pub irtt: Duration,
    /// Longest retransmission back-off (JNOS maxwait; NTIA: 90 s at 1200 bit/s).
    pub max_wait: Duration,
    /// IP MTU, bytes (NTIA: 256; Isode: 1500).
    pub mtu: u16,
    /// Which RTO constant smoltcp's dilated clock matches exactly (from `irtt` or `max_wait`).
    pub rto_fit: RtoFit,
    /// The TCP implementation: smoltcp with its clock dilated, or skywave's own, whose RTO
    /// starts at `irtt`, never falls below `min_rto` and never exceeds `max_wait`.
    pub engine: TcpEngine,
    /// Smallest RTO on skywave's own TCP (JNOS 0.5 s, Linux 200 ms; smoltcp's is fixed).
    pub min_rto: Duration,
    /// How skywave's own TCP starts its RTT estimate.
    pub rtt_estimator: RttEstimator,
    /// skywave's own TCP offers timestamps (RFC 7323): an RTT sample from every ACK, resent
    /// segments' too, and a spurious timeout detected and undone (Eifel, as Linux undoes it).
    /// smoltcp runs without them whatever this says.
    pub timestamps: bool,
    /// skywave's own TCP, with timestamps: a SYN-ACK (or handshake ACK) that echoes the first
    /// SYN's timestamp shows its resends spurious, and the first window stays whole (Linux
    /// 5.2's `tcp_try_undo_spurious_syn`); without, two resends leave it at one segment.
    pub spurious_syn_undo: bool,
    /// skywave's own TCP: timeouts of a SYN that resend it after the initial RTO again
    /// before the back-off doubles (Linux 6.5 on, `tcp_syn_linear_timeouts`, default 4: SYNs
    /// at 0, 1, 2, 3, 4, 5, 7, 11 s...); 0 for the stacks before it.
    pub syn_linear_timeouts: u8,
    /// skywave's own TCP offers selective acknowledgements (RFC 2018) and, with its Reno,
    /// recovers by them (RFC 6675), as Linux does by default (`tcp_sack`); smoltcp sends
    /// blocks but ignores them as a sender, whatever this says.
    pub sack: bool,
    /// With SACK, skywave's own TCP sends Linux's tail-loss probe (RFC 8985 7, Linux 3.10 on,
    /// `tcp_early_retrans` 3): one segment after about two round trips without an ACK, before
    /// the retransmission timeout.
    pub tlp: bool,
    /// skywave's own TCP acknowledges as Linux does (`tcp/delack.rs`): quick ACKs at the
    /// start, interactive mode, a delay that follows the arrivals and the timer, instead of
    /// [`TcpSettings::ack_delay`]'s fixed one.
    pub linux_acks: bool,
    /// A later connection of the run (the queue timer's) starts from the round-trip estimate
    /// the host cached from the earlier ones, as JNOS's `RTTCACHE` (skywave's TCP only).
    pub rtt_cache: bool,
    /// The slow-start threshold every connection starts with once its handshake is done, in
    /// segments (`None`: RFC 5681's "arbitrarily high"), as a Linux host sets it from the
    /// ssthresh an earlier connection to the same destination left in its metrics cache
    /// (`tcp_init_metrics`); skywave's TCP only. Not published for any measured host: a what-if
    /// (`compare --ssthresh`, `calibrate --ssthresh`).
    pub initial_ssthresh: Option<u16>,
    /// Linux's receive window on skywave's TCP instead of the fixed [`TcpSettings::window`],
    /// by the rules of the profile's kernel ([`TcpSettings::rcv_era`], `tcp/rcvbuf.rs`): an
    /// initial window (3.4-3.9: ten segments; 4.20-6.5: 64240 bytes with MSS 1460), raised as
    /// data arrives, and the buffer autotuned to what the application reads in a round trip,
    /// window scale 7. smoltcp keeps `window`.
    pub rcv_tuning: bool,
    /// Linux's send buffer on skywave's TCP instead of a fixed 64 KB, by the rules of the
    /// profile's kernel ([`TcpSettings::snd_era`], `tcp/sndbuf.rs`): 16384 bytes, raised once
    /// the connection is open and then to twice the congestion window while the application
    /// waits for room, so it never holds the flight back for long. smoltcp keeps 64 KB.
    pub snd_tuning: bool,
    /// The restart after idle on skywave's TCP. Linux's (`tcp_slow_start_after_idle`, on by
    /// default): a sender that sent no data for longer than the RTO, with nothing in
    /// flight, starts again from the initial window, halved per RTO idle down to it, where
    /// the profile's kernel looks for it ([`TcpSettings::idle_restart`]); and a window the
    /// application leaves unused for an RTO comes down halfway to what was used (RFC 2861).
    /// For `jnos-1998`, JNOS's own restart instead: one segment again when data goes more than
    /// SRTT after the ACK that left nothing unacknowledged. smoltcp has none of them.
    pub slow_start_after_idle: bool,
    /// Linux's test of whether the congestion window is in use, as the profile's kernel has
    /// it ([`TcpSettings::cwnd_limited`]: 3.x's for `isode-stock`, 5.18's for `linux`); off,
    /// skywave's rule until 2026-11-29, within one segment of the window. Reno and
    /// CUBIC grow the window only while it is in use. skywave's TCP only.
    pub kernel_cwnd_test: bool,
    /// Congestion window.
    pub congestion: Congestion,
    /// Nagle's algorithm, and which.
    pub nagle: Nagle,
    /// Small-window rules of skywave's TCP: when a read sends a window update of its own, and
    /// whether a short segment the window cut waits (smoltcp has its own, Linux-like).
    pub window_rules: WindowRules,
    /// Delayed-ACK timer, simulated time (`None`: acknowledge at once).
    pub ack_delay: Option<Duration>,
    /// When the TCP stops retransmitting and drops the connection.
    pub give_up: GiveUp,
    /// The sending host's mail-queue timer (JNOS `smtp timer`): a connection that ended with
    /// mail not accepted is followed at its next tick by a new one for that mail. `None`:
    /// JNOS's default (the timer is not started; the queue runs once, as in every profile).
    pub smtp_timer: Option<Duration>,
    /// Over 5066: U_PDUs each station's IP client holds while its node has flow off, the rest
    /// of what the host sends then being dropped ([`crate::stack::IP_CLIENT_HOLD`] for the IP
    /// client Isode measured through). `None`: an IP client that queues (the SIS client's 1024
    /// U_PDUs, more than any SMTP run's flight fills), so TCP loses nothing to flow control
    /// there; a bulk stream on Linux's send buffer outgrows it in the end.
    pub ip_client_hold: Option<usize>,
    /// The named profile these settings came from (`None`: built by hand).
    pub profile: Option<TcpProfile>,
}

/// How the published figure the run is compared with was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// NTIA: throughput = attachment bits / (first SYN .. last ACK); the time of the whole
    /// connection.
    NtiaAttachment {
        /// Size of the text attachment, bytes.
        attachment_bytes: usize,
    },
    /// Isode: elapsed time from submission to delivery; throughput = message bits / time.
    IsodeMessage,
}

/// One message of a workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Reverse path, without angle brackets.
    pub from: String,
    /// Recipients, without angle brackets.
    pub to: Vec<String>,
    /// The whole message (headers and body) with CRLF line ends, not dot-stuffed.
    pub body: Vec<u8>,
}

/// What a run carries, and how it is measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    /// The messages, in submission order (all submitted at time zero).
    pub messages: Vec<Message>,
    /// How throughput is computed.
    pub measure: Measure,
    /// The size the table reports in `message_bytes` (attachment or message size).
    pub nominal_bytes: usize,
}

/// What one run of one scenario under one condition yielded.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunResult {
    /// Simulated seconds, measured as the workload's [`Measure`] says.
    pub seconds: f64,
    /// Bits per second, computed as the matching publication computes it.
    pub throughput_bps: f64,
    /// Transmissions (modem key-ups) on the air, both directions.
    pub transmissions: u64,
    /// Bytes sent over the modem (all framing included), both directions.
    pub bytes_on_air: u64,
    /// Retransmissions: D_PDUs resent by the 5066 ARQ, or TCP segments resent (raw modem).
    pub retransmissions: u64,
    /// TCP segments resent by the hosts (0 for the HF-native stacks).
    pub tcp_resent_segments: u64,
    /// Bytes of TCP payload resent by the hosts (0 for the HF-native stacks).
    pub tcp_resent_bytes: u64,
    /// Messages delivered to the receiving side, byte-identical to what was sent.
    pub delivered: usize,
    /// Messages in the workload.
    pub expected: usize,
}
