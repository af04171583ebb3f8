//! SMTP over TCP/IP over HF, the baseline the HF-native stacks are measured against: a real
//! TCP (smoltcp 0.14, or skywave's own in `tcp/tcb.rs` where a profile needs its timers set)
//! carrying a real SMTP dialogue (`skywave-smtp` client and server
//! sessions) over one of two emulated IP links:
//!
//! - **`smtp-tcp-modem`** ([`run_smtp_tcp_modem`]): JNOS as NTIA measured it. IP datagrams in
//!   AX.25-like frames straight over the half-duplex modem, no ARQ
//!   ([`skywave_emu::raw`]); SMTP with JNOS `XLZW` 16-bit compression and JNOS batching. The
//!   modem is the MIL-STD-188-110A-minimum generation at 75-2400 bit/s (NTIA's 1998
//!   equipment; RM6 above, where 110A has no rate) unless the condition names one.
//! - **`smtp-tcp-5066`** ([`run_smtp_tcp_5066`]): IP datagrams as U_PDUs on SAP 9 (the STANAG
//!   5066 IP client, ARQ, no delivery confirmation) through the real `skywave-sis` [`Client`]
//!   on the emulator's [`Subnet`], with the client's duplicate-datagram filter on or off;
//!   SMTP with RFC 2920 pipelining, as Isode's measurement ran a stock MTA; plain, with XLZW 16
//!   or with a deflate-compressed stream ([`SmtpCompression`], [`TcpRunOptions::compression`]).
//! - **`tcp-bulk-5066`** ([`bulk`]): no SMTP, one stream written as fast as the socket takes
//!   it over the same IP client, for `calibration/isode-tcp-over-5066.csv`.
//!
//! Each run takes its TCP from a [`TcpSettings`], normally one of the named profiles of
//! [`profile`] (`jnos-1998`, `linux`, `best-case`, `isode-stock`), whose docs say what each
//! sets, what smoltcp cannot express and how the send-side wrapper (`tcp/gate.rs`) supplies the
//! initial window and Minshall's Nagle.
//!
//! Station 0 (10.0.0.1, the ship) runs the SMTP client and opens the connection; station 1
//! (10.0.0.2, the shore) listens on port 25 and runs the SMTP server. Every message the server
//! receives is compared byte for byte with what was submitted.
//!
//! # Time
//!
//! Everything runs in simulated time, deterministically for a seed. The raw modem is sans-IO,
//! so its run is a pure discrete-event loop: the loop asks smoltcp ([`Interface::poll_at`]),
//! the modem ([`RawLink::poll_at`]) and the SMTP server (its idle timeout) for their next
//! deadline and jumps there; no tokio timer is involved, so it runs at full speed in any
//! runtime. The STANAG 5066 link is the emulator's [`Subnet`], whose scheduler and SIS
//! clients are tokio tasks: that run sleeps with `tokio::time` until the next deadline or a
//! delivered datagram, so it must run with the tokio clock paused (as the crate's runner and
//! the tests do) to take milliseconds instead of hours. One loop serves both: only the wait
//! differs.
//!
//! # Retransmission timers
//!
//! Each profile names its engine ([`TcpEngine`]). On skywave's TCP the initial, minimum and
//! maximum RTO are the profile's ([`TcpSettings::irtt`], [`TcpSettings::min_rto`],
//! [`TcpSettings::max_wait`]) on simulated time, the dilation is 1, and `jnos-1998`, `linux`
//! and `isode-stock` run there (see [`profile`]). On smoltcp the clock is dilated, as follows
//! (written when `jnos-1998` ran on smoltcp, as `--tcp-engine smoltcp` still runs it; the
//! other profiles pick k the same way on smoltcp).
//!
//! smoltcp's RTO constants are fixed at build time: 1 s initial, 1 s minimum, 60 s maximum,
//! RFC 6298 estimator (SRTT gain 1/8, RTTVAR gain 1/4, RTO = SRTT + 4·RTTVAR), doubling on
//! each timeout, go-back-N. JNOS (as configured for NTIA) used IRTT 60 s, maxwait 90 s at
//! 1200 bit/s and 360 s at 300 bit/s, the same estimator form with a 0.5 s minimum.
//!
//! Nothing in smoltcp 0.14 sets those constants, and patching or vendoring smoltcp is outside
//! this crate, so the clock is **dilated**: smoltcp reads `simulated time / k`. A pure
//! rescaling leaves the adaptive part exactly as it was (the RTT samples, SRTT, RTTVAR and
//! SRTT + 4·RTTVAR are all in smoltcp's units, so in simulated time they are the true
//! values), and scales only the constants, to k × (1 s initial, 1 s minimum, 60 s maximum).
//! One k cannot match three constants; [`RtoFit`] chooses which:
//!
//! - [`RtoFit::MaxWait`] (the default): k = maxwait / 60 s, so the back-off cap is JNOS's
//!   maxwait exactly (k = 1.5 at 1200 bit/s, 6 at 300 bit/s). The initial RTO is then k
//!   seconds instead of IRTT = 60 s: the SYN (and the SYN-ACK) are retransmitted after
//!   1.5 s/6 s, 3/12 s, ... until the first RTT sample, where JNOS waited 60 s; and the
//!   minimum RTO is k seconds instead of 0.5 s (harmless: HF round trips are longer).
//! - [`RtoFit::Irtt`]: k = IRTT / 1 s, so the first RTO is JNOS's 60 s, but the minimum RTO
//!   is also 60 s and the cap 3600 s: every loss costs at least a minute, and repeated losses
//!   back off far beyond maxwait.
//!
//! Every other smoltcp timer is dilated too: TIME-WAIT (10 s × k; not in the measured
//! interval), the delayed ACK (the profile's [`TcpSettings::ack_delay`] in simulated time is
//! divided by k before [`tcp::Socket::set_ack_delay`]; `jnos-1998` has none, as JNOS), the
//! zero-window probe (capped at 60 s × k like the RTO), keep-alive (off). No smoltcp
//! user timeout is set: the profile's [`GiveUp`] rule (JNOS: reset after 10 consecutive
//! timeouts) is applied by the host wrapper in simulated time, see [`profile`].
//!
//! Other settings: MSS through the device MTU (smoltcp advertises MTU − 40): MTU =
//! min([`TcpSettings::mtu`], [`TcpSettings::mss`] + 40); receive window = receive buffer =
//! [`TcpSettings::window`] (window scale 0 up to 65535, scaled above); congestion control and
//! Nagle as [`TcpSettings::congestion`] and [`TcpSettings::nagle`] say (`jnos-1998`: smoltcp's
//! Reno, as JNOS does slow start and congestion avoidance, and classic Nagle). smoltcp ignores
//! received SACK blocks, as JNOS (no SACK) would.
//!
//! Both engines take in one datagram at a time and send whatever it makes them send before
//! the next one, as a kernel runs its input path per segment (JNOS's `tcp_input` ends with
//! `tcp_output`; Linux's checks what to send and whether to ACK per segment). The segments of
//! one interleaver block, or of one raw-modem transmission, arrive at the same instant; taken
//! in together they would share one stretch ACK, and a sender's window, which grows per ACK,
//! would grow by far less than the stack it stands for lets it.
//!
//! # Limits
//!
//! - On smoltcp, the RTO mismatch above. [`TcpRunReport::tcp_retransmissions`] shows its cost.
//! - smoltcp keeps at most 4 out-of-order ranges and has no per-destination RTT cache: a new
//!   smoltcp connection starts from the initial RTO. On skywave's TCP `jnos-1998` keeps
//!   JNOS's (`RTTCACHE`): a later connection of the run starts from what its host cached.
//! - The raw-modem CSMA parameters (persistence 63, slot 100 ms) are the KISS defaults, not
//!   NTIA's (unpublished).
//! - IP over 5066: the IP datagram is the U_PDU (no Annex F encapsulation or header
//!   compression), and the node's ARQ is the emulator's (see [`skywave_emu::net`]).
//!
//! [`Client`]: skywave_sis::Client
//! [`Subnet`]: skywave_emu::net::Subnet
//! [`Interface::poll_at`]: smoltcp::iface::Interface::poll_at
//! [`RawLink::poll_at`]: skywave_emu::raw::RawLink::poll_at
//! [`tcp::Socket::set_ack_delay`]: smoltcp::socket::tcp::Socket::set_ack_delay

pub mod bulk;
pub mod cubic;
mod delack;
mod gate;
mod host;
mod link;
pub mod profile;
mod rcvbuf;
mod sack;
mod sndbuf;
pub mod tcb;

#[cfg(test)]
mod tests;

use std::time::Duration;

use skywave_emu::modem::Generation;
use skywave_emu::net::Subnet;
use skywave_emu::raw::{RawConfig, RawLink};
use skywave_smtp::{
    AcceptAll, ClientConfig, ClientEvent, ClientMode, ClientSession, Event, OutgoingMessage,
    RecipientStatus, ServerConfig, ServerSession,
};
use smoltcp::socket::tcp::State;
use thiserror::Error;

use crate::model::{Condition, Measure, RunResult, SmtpCompression, TcpSettings, Workload};
use crate::stack;
use host::{Dilation, Host, HostSettings, SegmentStats};
use link::{IpLink, LinkCounters};
pub use profile::{Congestion, GiveUp, Nagle, RtoFit, TcpEngine, TcpProfile, jnos_tcp};
use skywave_compress::{DeflateDecoder, DeflateEncoder, Limits};
use tcb::RtoTimers;

/// Why an SMTP-over-TCP run could not be carried out.
#[derive(Debug, Error)]
pub enum TcpBenchError {
    /// The condition cannot be emulated (unknown rate, interleaver or channel).
    #[error("bad condition: {0}")]
    Condition(String),
    /// The TCP settings are out of range.
    #[error("bad TCP settings: {0}")]
    Settings(String),
    /// The workload holds no message, or a message the SMTP client refuses.
    #[error("workload: {0}")]
    Workload(String),
    /// The link refused a datagram or its configuration.
    #[error("IP link: {0}")]
    Link(String),
    /// A SIS client could not bind or submit.
    #[error("SIS: {0}")]
    Sis(String),
    /// The emulated subnetwork refused its configuration.
    #[error("emulator: {0}")]
    Net(#[from] skywave_emu::net::NetError),
}

/// Knobs of a run beyond the shared vocabulary.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TcpRunOptions {
    /// Simulated time after which the run stops and reports what it delivered; `None`: the
    /// crate's usual limit ([`stack::time_limit`]).
    pub time_limit: Option<Duration>,
    /// Run plain SMTP on the raw modem instead of JNOS's XLZW 16 (false, the default, offers
    /// XLZW 16 as NTIA's JNOS did); 5066 runs offer XLZW only with
    /// [`SmtpCompression::Xlzw`].
    pub no_xlzw: bool,
    /// Compression of the SMTP stream over 5066 (the raw modem's is `no_xlzw`'s).
    pub compression: SmtpCompression,
    /// What each host (ship, shore) had cached of the other's round trip from earlier
    /// connections (JNOS's `RTTCACHE`, [`TcpSettings::rtt_cache`]): its first connection of
    /// this run starts from it. `[None, None]`: hosts that never spoke to each other.
    pub rtt_cache: HostRttCache,
}

/// Each host's cached round-trip estimate of its peer (smoothed RTT, mean deviation), ship
/// then shore; `None` where the host has none.
pub type HostRttCache = [Option<(Duration, Duration)>; 2];

/// A run's [`RunResult`] and the figures behind it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TcpRunReport {
    /// The result as [`crate::model`] defines it.
    pub result: RunResult,
    /// smoltcp's clock dilation k (simulated seconds per smoltcp second).
    pub clock_dilation: f64,
    /// Simulated seconds from the first SYN to the last ACK of the connection (to the time
    /// limit if it never closed).
    pub connection_seconds: f64,
    /// Simulated seconds from submission to each message's delivery (`None`: not delivered
    /// intact).
    pub deliveries: Vec<Option<f64>>,
    /// TCP segments carrying data, SYN or FIN, both directions.
    pub tcp_segments: u64,
    /// Of those, segments resent (the whole of their sequence space had been sent before).
    pub tcp_retransmissions: u64,
    /// Payload bytes of the resent segments.
    pub tcp_resent_bytes: u64,
    /// Largest TCP payload and largest IP datagram either host sent.
    pub max_payload: usize,
    /// Largest IP datagram either host sent.
    pub max_datagram: usize,
    /// The client's bursts: segments of new data it sent between two datagrams it received, in
    /// order (the first flight of the message body shows the initial window).
    pub client_bursts: Vec<u32>,
    /// Frames (raw modem) or D_PDUs (5066) lost on the air, collisions included.
    pub lost_on_air: u64,
    /// Collisions on the channel.
    pub collisions: u64,
    /// Seconds the raw modem was keyed, both stations (0 on 5066).
    pub air_seconds: f64,
    /// D_PDUs resent by the 5066 ARQ (0 on the raw modem).
    pub arq_retransmissions: u64,
    /// Datagrams the SIS clients' duplicate filter dropped (0 on the raw modem).
    pub duplicates_filtered: u64,
    /// Datagrams the IP clients dropped while their node had flow off and their hold
    /// ([`TcpSettings::ip_client_hold`]) was full (0 on the raw modem).
    pub ip_client_drops: u64,
    /// The SMTP session ran with XLZW compression (bits), as negotiated.
    pub xlzw: Option<u8>,
    /// The connection closed normally before the time limit.
    pub completed: bool,
    /// A host's TCP gave up on the connection ([`crate::model::GiveUp`]).
    pub tcp_gave_up: bool,
    /// A node of the 5066 link declared the link lost at least once (never on the raw modem).
    /// That ends no connection: the node rejected the datagrams it held, TCP resends, and the
    /// next datagram makes the link again, until a TCP gives up.
    pub link_lost: bool,
    /// How many times a node of the 5066 link declared it lost.
    pub link_losses: usize,
    /// Messages the SMTP client saw accepted for every recipient.
    pub client_confirmed: usize,
    /// Connections the ship opened: 1, or more when its queue timer
    /// ([`TcpSettings::smtp_timer`]) ran the mail again after a failed one.
    pub attempts: usize,
    /// Messages the server received intact again after a first time (a retry after a
    /// connection that died between the end of the message and the client hearing its 250).
    pub duplicate_deliveries: usize,
    /// What each host has cached of the other's round trip when the run ends (ship, shore),
    /// for a later run between the same hosts ([`TcpRunOptions::rtt_cache`]).
    pub rtt_cache: HostRttCache,
}

/// Runs `smtp-tcp-modem`: SMTP (JNOS batching, XLZW 16) over smoltcp TCP over the raw modem.
pub async fn run_smtp_tcp_modem(
    cond: &Condition,
    tcp: &TcpSettings,
    work: &Workload,
) -> Result<RunResult, TcpBenchError> {
    run_smtp_tcp_modem_with(cond, tcp, work, &TcpRunOptions::default())
        .await
        .map(|r| r.result)
}

/// Runs `smtp-tcp-5066`: SMTP (pipelining) over smoltcp TCP over the STANAG 5066 IP client,
/// with the SIS client's duplicate filter on or off. Needs the tokio clock paused.
pub async fn run_smtp_tcp_5066(
    cond: &Condition,
    tcp: &TcpSettings,
    work: &Workload,
    dup_filter: bool,
) -> Result<RunResult, TcpBenchError> {
    run_smtp_tcp_5066_with(cond, tcp, work, dup_filter, &TcpRunOptions::default())
        .await
        .map(|r| r.result)
}

/// [`run_smtp_tcp_modem`] with options and the detailed report.
pub async fn run_smtp_tcp_modem_with(
    cond: &Condition,
    tcp: &TcpSettings,
    work: &Workload,
    opts: &TcpRunOptions,
) -> Result<TcpRunReport, TcpBenchError> {
    // NTIA's 1998 modems: the 110A-minimum generation where 110A has the rate.
    let modem = stack::modem_config_for(cond, Generation::Mil110aMinimum)
        .map_err(|e| TcpBenchError::Condition(e.to_string()))?;
    let channel =
        stack::channel_config(cond).map_err(|e| TcpBenchError::Condition(e.to_string()))?;
    let mut raw = RawConfig::new(modem, channel);
    raw.seed = cond.seed;
    let link = RawLink::new(raw).map_err(|e| TcpBenchError::Link(e.to_string()))?;
    let mut client = ClientConfig::new("ship.example", ClientMode::Lockstep);
    if !opts.no_xlzw {
        client.xlzw = Some(16);
    }
    let mut link = IpLink::raw(link);
    drive(&mut link, cond, tcp, work, opts, client).await
}

/// [`run_smtp_tcp_5066`] with options and the detailed report.
pub async fn run_smtp_tcp_5066_with(
    cond: &Condition,
    tcp: &TcpSettings,
    work: &Workload,
    dup_filter: bool,
    opts: &TcpRunOptions,
) -> Result<TcpRunReport, TcpBenchError> {
    let cfg = stack::subnet_config(cond).map_err(|e| TcpBenchError::Condition(e.to_string()))?;
    if usize::from(tcp.mtu) > usize::from(cfg.mtu) {
        return Err(TcpBenchError::Settings(format!(
            "IP MTU {} is larger than the {} bytes a U_PDU may have",
            tcp.mtu, cfg.mtu
        )));
    }
    let subnet = Subnet::start(cfg)?;
    let ttl = stack::ip_ttl(cond).map_err(|e| TcpBenchError::Condition(e.to_string()))?;
    let mut link = IpLink::s5066(subnet, dup_filter, tcp.ip_client_hold, ttl).await?;
    let mut client = ClientConfig::new("ship.example", ClientMode::Pipelining);
    if opts.compression == SmtpCompression::Xlzw {
        client.xlzw = Some(16);
    }
    let report = drive(&mut link, cond, tcp, work, opts, client).await;
    if report.is_ok() {
        // Let the trailing ARQ acknowledgements go out so the counters are complete.
        link.settle().await;
    }
    let mut report = report?;
    fill_link_counters(&mut report, &mut link);
    Ok(report)
}

/// Most iterations of the event loop in one run (each handles at least one event).
const MAX_STEPS: usize = 20_000_000;
/// Longest smoltcp polling round at one instant (app and TCP ping-pong).
const MAX_ROUNDS: usize = 64;
/// SMTP port and the client's local port.
const SMTP_PORT: u16 = 25;
const CLIENT_PORT: u16 = 1025;
/// IP addresses of the two stations.
const ADDRESSES: [[u8; 4]; 2] = [[10, 0, 0, 1], [10, 0, 0, 2]];
/// The SMTP server's idle and DATA timeouts.
const SERVER_TIMEOUT: Duration = Duration::from_secs(3600);
/// Send buffer of each socket (the peer's window limits what is in flight).
const TX_BUFFER: usize = 64 * 1024;

/// The hosts' clock: smoltcp's dilated to fit one RTO constant, skywave's TCP on simulated
/// time itself.
fn dilation(tcp: &TcpSettings) -> Result<Dilation, TcpBenchError> {
    let k = match (tcp.engine, tcp.rto_fit) {
        (TcpEngine::Skywave, _) => 1.0,
        (TcpEngine::Smoltcp, RtoFit::MaxWait) => tcp.max_wait.as_secs_f64() / 60.0,
        (TcpEngine::Smoltcp, RtoFit::Irtt) => tcp.irtt.as_secs_f64(),
    };
    Dilation::new(k)
}

fn host_settings(
    tcp: &TcpSettings,
    seed: u64,
    dil: Dilation,
) -> Result<[HostSettings; 2], TcpBenchError> {
    match (tcp.engine, tcp.congestion) {
        (TcpEngine::Smoltcp, Congestion::SmoltcpReno) if tcp.nagle == Nagle::Minshall => {
            return Err(TcpBenchError::Settings(
                "Minshall's Nagle needs the segment-counting window (smoltcp's Reno has classic Nagle only)".into(),
            ));
        }
        (TcpEngine::Smoltcp, c) if c.is_skywave_reno() => {
            return Err(TcpBenchError::Settings(
                "Reno with an initial window in segments needs skywave's TCP (--tcp-engine skywave)"
                    .into(),
            ));
        }
        (TcpEngine::Skywave, Congestion::SmoltcpReno) => {
            return Err(TcpBenchError::Settings(
                "smoltcp's Reno needs smoltcp (--tcp-engine smoltcp)".into(),
            ));
        }
        _ => {}
    }
    if tcp.engine == TcpEngine::Smoltcp && tcp.initial_ssthresh.is_some() {
        return Err(TcpBenchError::Settings(
            "smoltcp cannot be given a slow-start threshold (--tcp-engine skywave)".into(),
        ));
    }
    // The initial RTO is clamped between them, as JNOS clamps its first one to maxwait.
    if tcp.engine == TcpEngine::Skywave && (tcp.min_rto.is_zero() || tcp.min_rto > tcp.max_wait) {
        return Err(TcpBenchError::Settings(format!(
            "the RTO bounds must be 0 < minimum {:?} <= maximum {:?}",
            tcp.min_rto, tcp.max_wait
        )));
    }
    // The delayed-ACK timer runs on smoltcp's dilated clock.
    let ack_delay = tcp.ack_delay.map(|d| {
        smoltcp::time::Duration::from_micros((d.as_micros() as f64 / dil.factor()).round() as u64)
    });
    if tcp.mss < 48 {
        return Err(TcpBenchError::Settings(format!(
            "MSS {} is below smoltcp's minimum of 48",
            tcp.mss
        )));
    }
    let mtu = usize::from(tcp.mtu).min(usize::from(tcp.mss) + 40);
    if mtu < 88 {
        return Err(TcpBenchError::Settings(format!(
            "MTU {} leaves no room for a 48-byte segment",
            tcp.mtu
        )));
    }
    let window = usize::try_from(tcp.window).unwrap_or(usize::MAX);
    if !(64..=(1 << 20)).contains(&window) {
        return Err(TcpBenchError::Settings(format!(
            "window {} is outside 64..=1048576 bytes",
            tcp.window
        )));
    }
    Ok([0usize, 1].map(|i| HostSettings {
        mtu,
        rx_buffer: window,
        tx_buffer: TX_BUFFER.max(window),
        seed: seed.wrapping_mul(2).wrapping_add(i as u64 + 1),
        address: ADDRESSES[i],
        congestion: tcp.congestion,
        nagle: tcp.nagle,
        ack_delay,
        give_up: tcp.give_up,
        engine: tcp.engine,
        rto: RtoTimers {
            initial: tcp.irtt,
            min: tcp.min_rto,
            max: tcp.max_wait,
        },
        rtt_estimator: tcp.rtt_estimator,
        timestamps: tcp.timestamps,
        spurious_syn_undo: tcp.spurious_syn_undo,
        syn_linear_timeouts: tcp.syn_linear_timeouts,
        sack: tcp.sack,
        tlp: tcp.tlp,
        linux_acks: tcp.linux_acks,
        window_rules: tcp.window_rules,
        rtt_cache: tcp.rtt_cache,
        initial_ssthresh: tcp.initial_ssthresh,
        rcv_tuning: tcp.rcv_tuning.then(|| tcp.rcv_era()),
        snd_tuning: tcp.snd_tuning.then(|| tcp.snd_era()),
        idle_restart: tcp.idle_restart(),
        cwnd_limited: tcp.cwnd_limited(),
        reno: tcp.reno_rules(),
        ack_delay_sim: tcp.ack_delay,
    }))
}

/// One direction's stream compression above TCP ([`SmtpCompression::Deflate`]); plain
/// otherwise (XLZW lives inside the SMTP sessions).
enum Codec {
    Plain,
    Deflate(Box<(DeflateEncoder, DeflateDecoder)>),
}

impl Codec {
    fn new(c: SmtpCompression) -> Codec {
        match c {
            SmtpCompression::Deflate => Codec::Deflate(Box::new((
                DeflateEncoder::new(skywave_compress::deflate::DEFAULT_LEVEL),
                DeflateDecoder::new(Limits::unlimited()),
            ))),
            SmtpCompression::None | SmtpCompression::Xlzw => Codec::Plain,
        }
    }

    /// What the session wrote, as it goes on the wire (one partial flush per write).
    fn encode(&mut self, data: Vec<u8>, wire: &mut Vec<u8>) -> Result<(), TcpBenchError> {
        match self {
            Codec::Plain => wire.extend(data),
            Codec::Deflate(c) => {
                let enc = &mut c.0;
                enc.push(&data)
                    .and_then(|()| enc.flush())
                    .map_err(|e| TcpBenchError::Workload(e.to_string()))?;
                wire.extend(enc.take_output());
            }
        }
        Ok(())
    }

    /// What arrived on the wire, as the session reads it.
    fn decode(&mut self, wire: &[u8]) -> Result<Vec<u8>, TcpBenchError> {
        match self {
            Codec::Plain => Ok(wire.to_vec()),
            Codec::Deflate(c) => {
                let dec = &mut c.1;
                dec.feed(wire)
                    .map_err(|e| TcpBenchError::Workload(format!("deflate stream: {e}")))?;
                Ok(dec.take_output())
            }
        }
    }
}

/// The SMTP client side of the run.
struct SmtpClient {
    session: ClientSession,
    codec: Codec,
    out: Vec<u8>,
    done: bool,
    closed: bool,
    /// Messages of this connection (indices into its own list) accepted for every recipient.
    accepted: Vec<usize>,
}

/// The SMTP server side of the run.
struct SmtpServer {
    session: Option<ServerSession<AcceptAll>>,
    codec: Codec,
    out: Vec<u8>,
    closing: bool,
    closed: bool,
    received: usize,
    /// The workload's index of each message this connection carries, in order (the k-th
    /// message the server receives should be `order[k]`).
    order: Vec<usize>,
    /// Messages received intact that had already been delivered.
    duplicates: usize,
}

/// One connection: both hosts and both SMTP sessions (a re-queued attempt carries only the
/// messages not accepted before: [`SmtpServer::order`]).
struct Attempt {
    hosts: [Host; 2],
    client: SmtpClient,
    server: SmtpServer,
}

impl Attempt {
    /// A new connection from the ship (client port `port`) carrying `order`'s messages, each
    /// host starting from the round-trip estimate it cached (`cached`, ship then shore).
    #[allow(clippy::too_many_arguments)]
    fn start(
        settings: &[HostSettings; 2],
        cached: HostRttCache,
        t0: smoltcp::time::Instant,
        port: u16,
        work: &Workload,
        order: Vec<usize>,
        client_cfg: &ClientConfig,
        compression: SmtpCompression,
    ) -> Result<Attempt, TcpBenchError> {
        let mut hosts = [Host::new(settings[0], t0)?, Host::new(settings[1], t0)?];
        for (h, c) in hosts.iter_mut().zip(cached) {
            h.seed_rtt(c);
        }
        hosts[1].listen(SMTP_PORT)?;
        hosts[0].connect(ADDRESSES[1], SMTP_PORT, port)?;
        let messages = order
            .iter()
            .filter_map(|&i| work.messages.get(i))
            .map(|m| OutgoingMessage {
                reverse_path: m.from.clone(),
                recipients: m.to.clone(),
                body: m.body.clone(),
                eight_bit: false,
                mt_priority: None,
                dsn: Default::default(),
                rcpt_dsn: Vec::new(),
            })
            .collect();
        let session = ClientSession::new(client_cfg.clone(), messages)
            .map_err(|e| TcpBenchError::Workload(e.to_string()))?;
        Ok(Attempt {
            hosts,
            client: SmtpClient {
                session,
                codec: Codec::new(compression),
                out: Vec::new(),
                done: false,
                closed: false,
                accepted: Vec::new(),
            },
            server: SmtpServer {
                session: None,
                codec: Codec::new(compression),
                out: Vec::new(),
                closing: false,
                closed: false,
                received: 0,
                order,
                duplicates: 0,
            },
        })
    }

    /// The workload's messages this connection carried that the client saw accepted.
    fn accepted(&self) -> impl Iterator<Item = usize> + '_ {
        self.client
            .accepted
            .iter()
            .filter_map(|&k| self.server.order.get(k).copied())
    }
}

/// One run: both hosts, both SMTP sessions, over `link`, until the connection has closed or
/// the time limit. With the sending host's queue timer ([`TcpSettings::smtp_timer`]), a
/// connection that ends with mail not accepted (a TCP gave up) is followed at the timer's next
/// tick by a new one for that mail, as JNOS re-queues a failed job. A 5066 node declaring the
/// link lost ends nothing here: TCP resends into the next link, as over a real IP client.
async fn drive(
    link: &mut IpLink,
    cond: &Condition,
    tcp: &TcpSettings,
    work: &Workload,
    opts: &TcpRunOptions,
    client_cfg: ClientConfig,
) -> Result<TcpRunReport, TcpBenchError> {
    if work.messages.is_empty() {
        return Err(TcpBenchError::Workload(
            "the workload holds no message".into(),
        ));
    }
    let dil = dilation(tcp)?;
    let limit = opts
        .time_limit
        .unwrap_or_else(|| stack::time_limit(cond, work));
    let start = link.now();
    let settings = host_settings(tcp, cond.seed, dil)?;
    let mut a = Attempt::start(
        &settings,
        opts.rtt_cache,
        dil.tcp_time_of(start),
        CLIENT_PORT,
        work,
        (0..work.messages.len()).collect(),
        &client_cfg,
        opts.compression,
    )?;
    // The server session's clock: a std Instant that follows simulated time.
    let base = std::time::Instant::now();
    let mut deliveries: Vec<Option<Duration>> = vec![None; work.messages.len()];
    let mut duplicates = 0usize;
    let mut accepted = vec![false; work.messages.len()];
    let mut first_syn: Option<Duration> = None;
    let mut last_arrival = start;
    let mut completed = false;
    let mut attempts = 1usize;
    // Ended connections: their TCP figures, whether a TCP gave up, the XLZW they negotiated.
    let mut retired: Vec<SegmentStats> = Vec::new();
    let mut gave_up = false;
    let mut xlzw = None;
    // The queue timer's next tick, once a connection has failed with mail still queued.
    let mut requeue_at: Option<Duration> = None;
    let requeue_tick = |now: Duration, queued: bool| -> Option<Duration> {
        let every = tcp.smtp_timer.filter(|e| !e.is_zero() && queued)?;
        // JNOS's timer runs from when it was set (the run's start), tick after tick.
        let ticks = (now.saturating_sub(start).as_secs_f64() / every.as_secs_f64()).floor() + 1.0;
        Some(start + every.mul_f64(ticks))
    };

    for _ in 0..MAX_STEPS {
        let now = link.now();
        if now.saturating_sub(start) >= limit {
            break;
        }
        if requeue_at.is_some_and(|t| now >= t) {
            requeue_at = None;
            let order: Vec<usize> = (0..work.messages.len()).filter(|&i| !accepted[i]).collect();
            let port = CLIENT_PORT.wrapping_add(u16::try_from(attempts).unwrap_or(u16::MAX));
            // Each host keeps what it learnt of the round trip (JNOS's RTTCACHE).
            let cached = [a.hosts[0].rtt_cache(), a.hosts[1].rtt_cache()];
            let next = Attempt::start(
                &settings,
                cached,
                dil.tcp_time_of(now),
                port,
                work,
                order,
                &client_cfg,
                opts.compression,
            )?;
            let mut old = std::mem::replace(&mut a, next);
            retired.extend(old.hosts.iter_mut().map(Host::final_stats));
            duplicates += old.server.duplicates;
            attempts += 1;
        }
        let tnow = dil.tcp_time_of(now);
        let snow = base + now;
        for _ in 0..MAX_ROUNDS {
            a.hosts[0].poll(tnow);
            a.hosts[1].poll(tnow);
            let moved_c = client_step(&mut a.hosts[0], &mut a.client)?;
            let moved_s = server_step(
                &mut a.hosts[1],
                &mut a.server,
                snow,
                now - start,
                work,
                &mut deliveries,
            )?;
            if !(moved_c || moved_s) {
                break;
            }
        }
        for i in a.accepted() {
            if let Some(x) = accepted.get_mut(i) {
                *x = true;
            }
        }
        let mut arrivals = Vec::new();
        for (station, host) in a.hosts.iter_mut().enumerate() {
            for d in host.take_tx(now) {
                if station == 0 && first_syn.is_none() && host.stats.syn_seen {
                    first_syn = Some(now);
                }
                link.send(station, d, &mut arrivals)?;
            }
        }
        let quiet = a.hosts.iter().all(|h| h.device.rx.is_empty());
        let closed = |s: State| matches!(s, State::Closed | State::TimeWait);
        let queued = accepted.iter().any(|&x| !x);
        if requeue_at.is_none()
            && a.client.done
            && a.server.closed
            && quiet
            && arrivals.is_empty()
            && closed(a.hosts[0].state())
            && closed(a.hosts[1].state())
        {
            match requeue_tick(now, queued) {
                Some(t) => requeue_at = Some(t),
                None => {
                    completed = true;
                    break;
                }
            }
        }
        if requeue_at.is_none()
            && a.client.done
            && arrivals.is_empty()
            && a.hosts.iter().any(Host::gave_up)
        {
            // A TCP gave up and the SMTP session with it: what was not delivered stays so,
            // unless the queue timer runs it again.
            match requeue_tick(now, queued) {
                Some(t) => requeue_at = Some(t),
                None => break,
            }
        }
        if arrivals.is_empty() {
            let mut next = start + limit;
            if let Some(t) = requeue_at {
                next = next.min(t);
            }
            for h in &mut a.hosts {
                if let Some(t) = h.poll_at(tnow) {
                    let t = dil.sim_time_of(t);
                    // "Poll now" right after a poll: come back a moment later.
                    next = next.min(t.max(now + Duration::from_millis(1)));
                }
            }
            if let Some(t) = a.server.session.as_ref().and_then(|s| s.poll_timeout()) {
                let t = t.saturating_duration_since(base);
                next = next.min(t.max(now + Duration::from_millis(1)));
            }
            arrivals = link.wait(next).await;
        }
        if !arrivals.is_empty() {
            last_arrival = link.now();
        }
        for (station, d) in arrivals {
            if let Some(h) = a.hosts.get_mut(station) {
                h.deliver(d);
            }
        }
        gave_up |= a.hosts.iter().any(Host::gave_up);
        xlzw = a.client.session.compression().or(xlzw);
    }
    gave_up |= a.hosts.iter().any(Host::gave_up);
    xlzw = a.client.session.compression().or(xlzw);

    // Completed: the last ACK's arrival. Otherwise: where the time limit, a TCP giving up or
    // the link's loss stopped the run.
    let end = if completed { last_arrival } else { link.now() };
    let syn = first_syn.unwrap_or(start);
    let connection = end.saturating_sub(syn);
    let delivered_at = deliveries;
    let session_time = match work.measure {
        Measure::NtiaAttachment { .. } => connection,
        Measure::IsodeMessage => end.saturating_sub(start),
    };
    let (seconds, throughput_bps) = stack::measure(work, &delivered_at, session_time);
    retired.extend(a.hosts.iter_mut().map(Host::final_stats));
    let stats = retired;
    let rtt_cache = [a.hosts[0].rtt_cache(), a.hosts[1].rtt_cache()];
    let mut report = TcpRunReport {
        result: RunResult {
            seconds,
            throughput_bps,
            delivered: delivered_at.iter().filter(|d| d.is_some()).count(),
            expected: work.messages.len(),
            ..RunResult::default()
        },
        clock_dilation: dil.factor(),
        connection_seconds: connection.as_secs_f64(),
        deliveries: delivered_at
            .iter()
            .map(|d| d.map(|t| t.as_secs_f64()))
            .collect(),
        tcp_segments: stats.iter().map(|s| s.sent).sum(),
        tcp_retransmissions: stats.iter().map(|s| s.resent).sum(),
        tcp_resent_bytes: stats.iter().map(|s| s.resent_bytes).sum(),
        max_payload: stats.iter().map(|s| s.max_payload).max().unwrap_or(0),
        max_datagram: stats.iter().map(|s| s.max_datagram).max().unwrap_or(0),
        // The ship's bursts on its first connection (the one the published runs measured).
        client_bursts: stats.first().map(|s| s.bursts.clone()).unwrap_or_default(),
        xlzw,
        completed,
        tcp_gave_up: gave_up,
        link_lost: link.link_lost(),
        link_losses: link.losses(),
        attempts,
        duplicate_deliveries: duplicates + a.server.duplicates,
        rtt_cache,
        ..TcpRunReport::default()
    };
    report.client_confirmed = accepted.iter().filter(|&&x| x).count();
    fill_link_counters(&mut report, link);
    Ok(report)
}

fn fill_link_counters(report: &mut TcpRunReport, link: &mut IpLink) {
    report.result.tcp_resent_segments = report.tcp_retransmissions;
    report.result.tcp_resent_bytes = report.tcp_resent_bytes;
    match link.counters() {
        LinkCounters::Raw(c) => {
            report.result.transmissions = c.transmissions;
            report.result.bytes_on_air = c.bytes_on_air;
            report.result.retransmissions = report.tcp_retransmissions;
            report.lost_on_air = c.frames_lost + c.frames_collided;
            report.collisions = c.collisions;
            report.air_seconds = c.air_time.as_secs_f64();
        }
        LinkCounters::S5066 {
            channel,
            filtered,
            overflow,
        } => {
            report.result.transmissions = channel.transmissions;
            report.result.bytes_on_air = channel.bytes_on_air;
            report.result.retransmissions = channel.retransmissions;
            report.arq_retransmissions = channel.retransmissions;
            report.lost_on_air = channel.lost_dpdus;
            report.collisions = channel.collisions;
            report.duplicates_filtered = filtered;
            report.ip_client_drops = overflow;
        }
    }
}

/// Reads what the socket holds, decoded.
fn receive(host: &mut Host, codec: &mut Codec) -> Result<Option<Vec<u8>>, TcpBenchError> {
    let wire = host.recv();
    if wire.is_empty() {
        return Ok(None);
    }
    codec.decode(&wire).map(Some)
}

/// Moves bytes between the client socket and the SMTP client session; true if anything moved.
fn client_step(host: &mut Host, c: &mut SmtpClient) -> Result<bool, TcpBenchError> {
    let mut progress = false;
    if let Some(data) = receive(host, &mut c.codec)? {
        c.session.feed(&data);
        progress = true;
    }
    while let Some(ev) = c.session.poll_event() {
        progress = true;
        match ev {
            ClientEvent::Message(outcome) => {
                if outcome
                    .recipients
                    .iter()
                    .all(|r| matches!(r.status, RecipientStatus::Delivered(_)))
                {
                    c.accepted.push(outcome.index);
                }
            }
            ClientEvent::Finished { .. } => c.done = true,
        }
    }
    if c.session.has_output() {
        c.codec.encode(c.session.take_output(), &mut c.out)?;
    }
    progress |= host.send(&mut c.out, c.done);
    let state = host.state();
    if !c.done
        && !host.can_recv()
        && matches!(
            state,
            State::CloseWait | State::LastAck | State::Closing | State::TimeWait | State::Closed
        )
    {
        // The server closed (or the connection died) before the session finished.
        c.session.connection_closed();
        progress = true;
    }
    if c.done && c.out.is_empty() && !c.closed {
        host.close();
        c.closed = true;
        progress = true;
    }
    Ok(progress)
}

/// Moves bytes between the server socket and the SMTP server session, checks delivered
/// messages against the workload; true if anything moved.
fn server_step(
    host: &mut Host,
    s: &mut SmtpServer,
    snow: std::time::Instant,
    now: Duration,
    work: &Workload,
    deliveries: &mut [Option<Duration>],
) -> Result<bool, TcpBenchError> {
    let mut progress = false;
    let state = host.state();
    if s.session.is_none() && !s.closed && matches!(state, State::Established | State::CloseWait) {
        let mut config = ServerConfig::new("shore.example");
        // An HF mail server waits out TCP back-offs of several minutes (maxwait 360 s at
        // 300 bit/s) instead of the LAN's 5 min / 3 min: the run's time limit stands in.
        config.idle_timeout = SERVER_TIMEOUT;
        config.data_timeout = SERVER_TIMEOUT;
        s.session = Some(ServerSession::new(config, AcceptAll, snow));
        progress = true;
    }
    let Some(session) = s.session.as_mut() else {
        return Ok(progress);
    };
    if let Some(data) = receive(host, &mut s.codec)? {
        session.feed(snow, &data);
        progress = true;
    }
    if let Some(t) = session.poll_timeout()
        && t <= snow
    {
        session.handle_timeout(snow);
        progress = true;
    }
    while let Some(ev) = session.poll_event() {
        progress = true;
        match ev {
            Event::Message { envelope, body } => {
                // The k-th message of this connection is the workload's `order[k]`.
                let i = s.order.get(s.received).copied().unwrap_or(usize::MAX);
                s.received += 1;
                let intact = work.messages.get(i).is_some_and(|m| {
                    m.body == body && m.from == envelope.reverse_path && m.to == envelope.recipients
                });
                if intact && let Some(slot) = deliveries.get_mut(i) {
                    if slot.is_some() {
                        s.duplicates += 1;
                    } else {
                        *slot = Some(now);
                    }
                }
                // Accepted either way: the spool would take it; `deliveries` records
                // whether it was the right message.
                let _ = session.message_accepted(&format!("Q{i}"));
            }
            Event::Close(_) => s.closing = true,
            Event::StartTls | Event::Authenticated { .. } => {}
        }
    }
    if session.has_output() {
        s.codec.encode(session.take_output(), &mut s.out)?;
    }
    progress |= host.send(&mut s.out, s.closing);
    let state = host.state();
    if !s.closing
        && !host.can_recv()
        && matches!(state, State::CloseWait | State::Closed | State::TimeWait)
    {
        // The client closed its side (JNOS sends QUIT and closes without waiting).
        s.closing = true;
        progress = true;
    }
    if s.closing && s.out.is_empty() && !s.closed {
        host.close();
        s.closed = true;
        progress = true;
    }
    Ok(progress)
}
