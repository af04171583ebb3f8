//! skywave's own TCP, for profiles whose timers smoltcp cannot be given: a sans-IO connection
//! (bytes and simulated time in, IPv4 datagrams out) whose retransmission timer, RTT estimator,
//! congestion window, Nagle test and delayed ACK are all settings ([`TcbConfig`]).
//!
//! It sits where smoltcp's socket sits in the benchmark's host (`tcp/host.rs`): the driver
//! reads and writes it through the host, and the host inspects what it sends (the counters and
//! the give-up rule are the host's, the same for both engines). The wire format is smoltcp's
//! (`smoltcp::wire` builds and parses the IPv4 and TCP headers, checksums included), so the
//! datagrams on the link are byte-for-byte real TCP/IP.
//!
//! What it does (RFC 793 / 9293 unless said):
//! - the state machine: active and passive open (no simultaneous open), simultaneous close,
//!   TIME-WAIT (60 s), RST on abort, RST received;
//! - MSS option (the segment size is the smaller of both MSSs), window scaling (RFC 7323) when
//!   the receive window exceeds 65535;
//! - the receive window: a fixed buffer, or Linux's if asked ([`TcbConfig::rcv_tuning`],
//!   `tcp/rcvbuf.rs`, a 3.4-3.9 or a 4.20-6.5 kernel's): an initial window raised as data
//!   arrives, and the buffer autotuned once per receiver round trip (timed by the
//!   timestamps' echo) to what the application read in the last one;
//! - the send buffer: a fixed one, or Linux's if asked ([`TcbConfig::snd_tuning`],
//!   `tcp/sndbuf.rs`, a kernel's before or from 3.16): raised once open, and again to twice
//!   the congestion window whenever an ACK frees room while the writer waits and the window
//!   is not full;
//! - retransmission: one timer, RTO = (SRTT + 4·RTTVAR, or Linux's deviation term) ×
//!   2^backoff, at most [`RtoTimers`]'s maximum and at least its minimum (floored before the
//!   back-off for RFC 6298 and Linux, after it for KA9Q NOS); one segment timed at a time, no
//!   sample from a resent segment (Karn), the back-off cleared by the next valid sample (JNOS,
//!   RFC 6298 and Linux alike); the estimator ([`RttEstimator`]) RFC 6298's (SRTT = R, RTTVAR = R/2 from
//!   the first sample, RTO 1 s before it), JNOS's (from IRTT with a zero deviation, smoothed
//!   from there) or Linux's (RFC 6298's first step, then the deviation term of the RTO held
//!   at the worst of the last round trip, at least TCP_RTO_MIN); a timeout resends go-back-N
//!   from the oldest unacknowledged byte;
//! - congestion ([`Congestion`]): Reno (RFC 5681: initial window in segments, slow start by
//!   `min(acked, MSS)`, congestion avoidance by MSS²/cwnd, on a timeout ssthresh = max(flight/2,
//!   2·MSS) and cwnd = 1 MSS, fast retransmit and recovery at three duplicate ACKs, NewReno's
//!   partial ACKs; or KA9Q's own rules, [`RenoRules`]; a slow-start threshold set at the
//!   handshake if asked, as from Linux's metrics cache); the same Reno
//!   growing as Linux grows it, by what was acknowledged rather than per ACK; Linux's CUBIC
//!   with HyStart (`tcp/cubic.rs`: the same loss detection and recovery, but the window grows
//!   by the cubic function, slow start may end on a rising round trip, and a loss keeps 0.7
//!   of the window); the Linux ones grow only while the window is in use, as the kernel
//!   modelled tests it ([`CwndLimited`], `tcp_is_cwnd_limited`: 3.x's, or 5.18's kept per
//!   window of data); a segment window that only grows (Linux with F-RTO undoing spurious
//!   timeouts, see `tcp/gate.rs`); or none;
//! - Nagle: off, classic (RFC 896) or Minshall's;
//! - receiving: out-of-order segments kept within the window and an immediate ACK for them;
//!   in order, an ACK at once or after the delayed-ACK time, at once when two full segments
//!   are unacknowledged (RFC 5681 4.2); each segment is answered as it is processed, so the
//!   segments of one burst get their own ACKs, as from JNOS and Linux; a window update of its own when reading opens the
//!   window as the stack modelled would send one ([`WindowRules`]: JNOS only for a window
//!   that was closed, Linux when the window at least doubles), the next ACK carrying it
//!   otherwise;
//! - sending a segment shorter than the MSS: Nagle's rule ([`Nagle`]), and for the Linux
//!   rules RFC 9293's sender SWS avoidance for one the window cut short ([`WindowRules`]);
//! - a closed window probed as the stack modelled probes it ([`WindowRules`]): JNOS sends one
//!   byte beyond it at once when nothing is in flight (KA9Q's `tcp_output`, "closed window
//!   probe"), data like any other, timed out as a retransmission; Linux runs the persist
//!   timer (`tcp_probe_timer`), backed off, and sends a segment with no data and the
//!   sequence number before `snd_una` (`tcp_xmit_probe_skb`), which the peer answers with an
//!   ACK, so no data is in flight, no window is cut and no retransmission counted, and each
//!   answer still closed restarts the timer (`tcp_ack_probe`); a window too small for
//!   sender SWS avoidance gets at the timer what fits, as new data (`tcp_write_wakeup`),
//!   which also recovers a lost window update;
//! - Linux's slow-start restart after idle if asked ([`TcbConfig::idle_restart`],
//!   `tcp_cwnd_restart`, RFC 2861): with nothing in flight and no data sent for longer than
//!   the RTO, the window halved per RTO idle down to the initial window, looked for where the
//!   kernel modelled looks (as data goes before 4.11; from 4.11 when the application writes
//!   into an empty queue or the peer's window changes with data waiting), or JNOS's (one
//!   segment again when data goes more than SRTT after the ACK that left nothing
//!   unacknowledged, [`IdleRestart::Jnos`]); with Linux's, RFC 2861's
//!   validation of a window the application leaves unused (`tcp_cwnd_validate`,
//!   `tcp_cwnd_application_limited`): for every RTO it goes unused, let down halfway to what
//!   was used, unless the application waits for room in the send buffer; and, for CUBIC,
//!   the epoch moved on by the time nothing was sent (`tcp/cubic.rs`);
//! - timestamps (RFC 7323) when both ends offer them, as Linux does: 12 bytes of every
//!   segment, an RTT sample from every ACK of new data (resent segments' too), and a timeout
//!   found spurious undone: the first ACK after it echoing the original transmission restores
//!   the window and sends new data instead of the rest of the go-back-N (Eifel detection and
//!   response, RFC 3522 and 4015, as Linux's undo); with them a lost SYN leaves one segment as
//!   the first window only after two resends that were not spurious (Linux's
//!   `tcp_init_transfer` and `tcp_try_undo_spurious_syn`);
//! - a reset from a closed endpoint to whatever still arrives (a FIN resent after TIME-WAIT);
//! - JNOS's round-trip cache entry for the peer (`rtt_add`), to start a later connection from;
//! - selective acknowledgements (RFC 2018) when both ends offer them: blocks on every ACK while
//!   data is out of order, the latest first; with skywave's Reno, RFC 6675's recovery (a
//!   duplicate ACK is one with new SACK information; recovery at the third, or once the first
//!   hole is lost by what is SACKed above it; cwnd = ssthresh and RFC 6675's pipe held within
//!   it; lost holes resent before new data), with Linux's Reno or CUBIC the window set on
//!   every ACK of the recovery by proportional rate reduction instead (RFC 6937, Linux's
//!   `tcp_cwnd_reduction`: in proportion to what left the network while the pipe is above
//!   ssthresh, at most what left plus a segment below it), and, after a timeout, every hole
//!   resent and
//!   nothing SACKed resent (Linux's loss state); see `tcp/sack.rs`. With them, D-SACK (RFC
//!   2883): a duplicate is reported first on the ACK that answers it;
//! - with SACK and if asked ([`TcbConfig::tlp`]), Linux's tail-loss probe (RFC 8985 7, Linux's
//!   `tcp_schedule_loss_probe`, `tcp_send_loss_probe` and `tcp_process_tlp_ack`): two smoothed
//!   round trips (and 200 ms with one segment in flight) after the last ACK or new data, never
//!   after the RTO would fire, one segment whatever the congestion window, new data if the
//!   peer's window takes it, else the last segment again; one probe until an ACK settles it,
//!   and a resend that the ACKs show repaired a loss halves the window.
//!
//! - when to acknowledge, as Linux does if asked ([`TcbConfig::linux_acks`], `tcp/delack.rs`):
//!   quick ACKs at the start, interactive mode, a delay that follows the arrivals; otherwise a
//!   fixed delay with an ACK for every second full segment, or none.
//!
//! Not done: RACK, SACK compression, the undo of a fast recovery by D-SACK or
//! timestamps, F-RTO without timestamps, urgent data, Linux 3.16 on's refinement of when the
//! window counts as in use (the most in flight over a round trip, and twice that in slow
//! start), path MTU discovery (the MTU is set), keep-alive. The RTT cache across connections
//! is the host's:
//! [`Tcb::rtt_cache`] keeps JNOS's entry and [`Tcb::seed_rtt`] starts a new connection from it.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::socket::tcp::State;
use smoltcp::wire::{
    IpAddress, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr, TcpControl, TcpPacket, TcpRepr,
    TcpSeqNumber, TcpTimestampRepr,
};

use super::cubic::{Cubic, CubicEra};
use super::delack::LinuxAcks;
use super::profile::{Congestion, Nagle, RttEstimator, WindowRules};
pub use super::rcvbuf::RcvEra;
use super::rcvbuf::{self, RcvBuf};
use super::sack::{self, Blocks, Scoreboard};
pub use super::sndbuf::SndEra;
use super::sndbuf::{Counting, SndBuf};

/// TIME-WAIT's length (2 MSL; Linux's `TCP_TIMEWAIT_LEN`).
const TIME_WAIT: Duration = Duration::from_secs(60);
/// Duplicate ACKs that trigger a fast retransmit.
const DUP_ACKS: u32 = 3;
/// TTL of the datagrams sent.
const HOP_LIMIT: u8 = 64;
/// Highest back-off exponent (the RTO's maximum caps it long before).
const MAX_BACKOFF: u32 = 16;

/// The retransmission timer's bounds, simulated time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtoTimers {
    /// RTO before the first RTT sample (JNOS: IRTT; RFC 6298: 1 s).
    pub initial: Duration,
    /// Smallest RTO (JNOS `MIN_RTO`: 0.5 s; Linux `TCP_RTO_MIN`: 200 ms).
    pub min: Duration,
    /// Largest RTO, back-off included (JNOS `maxwait`; Linux `TCP_RTO_MAX`: 120 s).
    pub max: Duration,
}

/// Settings of one connection.
#[derive(Debug, Clone, Copy)]
pub struct TcbConfig {
    /// This host's address.
    pub address: [u8; 4],
    /// The MSS this host advertises and sends with at most (MTU − 40).
    pub mss: u16,
    /// Receive buffer, bytes: the most this host advertises (unless `rcv_tuning`).
    pub rx_buffer: usize,
    /// Linux's receive window instead of `rx_buffer`, by the rules of the kernel named
    /// (`tcp/rcvbuf.rs`): an initial window growing as data arrives, and a buffer autotuned
    /// to what the application reads in a round trip, with the window scale that fits it.
    pub rcv_tuning: Option<RcvEra>,
    /// Send buffer, bytes: the most the application may have queued (unless `snd_tuning`).
    pub tx_buffer: usize,
    /// Linux's send buffer instead of `tx_buffer`, by the rules of the kernel named
    /// (`tcp/sndbuf.rs`): 16384 bytes, raised once open and then to twice the congestion
    /// window while the writer waits for room.
    pub snd_tuning: Option<SndEra>,
    /// Initial sequence number.
    pub iss: u32,
    /// Retransmission timer bounds.
    pub rto: RtoTimers,
    /// The RTT estimator.
    pub rtt_estimator: RttEstimator,
    /// Congestion control.
    pub congestion: Congestion,
    /// Nagle's algorithm.
    pub nagle: Nagle,
    /// Delayed-ACK time (`None`: every in-order segment acknowledged at once), unless
    /// `linux_acks`.
    pub ack_delay: Option<Duration>,
    /// Linux's delayed-ACK engine instead of `ack_delay`: quick ACKs at the start, interactive
    /// mode, a delay that follows the arrivals and the timer (`tcp/delack.rs`).
    pub linux_acks: bool,
    /// Offer the timestamp option (RFC 7323), as Linux does; used if the peer offers it too.
    pub timestamps: bool,
    /// With timestamps, resent SYNs whose answer echoes the first one's timestamp leave the
    /// first window whole (Linux 5.2 on); otherwise two resends cut it to one segment.
    pub spurious_syn_undo: bool,
    /// Timeouts of a SYN (active open) that resend it after the initial RTO again, before the
    /// back-off starts doubling: Linux 6.5 on, `tcp_syn_linear_timeouts` 4, so SYNs go at 0,
    /// 1, 2, 3, 4, 5, 7, 11 s...; 0 everywhere else.
    pub syn_linear_timeouts: u8,
    /// When reading sends a window update of its own, and whether a window-limited short
    /// segment waits.
    pub window_rules: WindowRules,
    /// Offer selective acknowledgements (RFC 2018), as Linux does; used if the peer offers
    /// them too: blocks on every ACK while data is out of order, and, with skywave's Reno,
    /// RFC 6675's loss recovery (`tcp/sack.rs`).
    pub sack: bool,
    /// With SACK, Linux's tail-loss probe (RFC 8985 7, Linux 3.10 on): when no ACK has come
    /// for about two round trips, one segment goes, new data if the peer's window takes it,
    /// else the last one sent again, before the retransmission timeout would fire.
    pub tlp: bool,
    /// The slow-start threshold once the handshake is done, segments of the MSS in use (at
    /// least two); `None`: RFC 5681's "arbitrarily high". What Linux's `tcp_init_metrics`
    /// sets from the ssthresh an earlier connection left in its metrics cache.
    pub initial_ssthresh: Option<u16>,
    /// The restart after idle: Linux's (`tcp_slow_start_after_idle`, on by default; RFC
    /// 2861's, RFC 5681 4.1's), checked where the kernel named checks it, or JNOS's; `None`:
    /// the window survives any idle spell (the sysctl off).
    pub idle_restart: Option<IdleRestart>,
    /// When Linux's congestion control (Reno or CUBIC) counts the window as in use, so that
    /// an ACK may grow it and RFC 2861's validation leaves it alone.
    pub cwnd_limited: CwndLimited,
    /// Whose rules skywave's Reno ([`Congestion::Reno`]) follows: RFC 5681's or KA9Q's.
    pub reno: RenoRules,
}

/// Whose rules [`Congestion::Reno`] follows where RFC 5681's and KA9Q's differ: how it grows
/// against the peer's window, and how it cuts and recovers at a loss without SACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenoRules {
    /// RFC 5681 with RFC 6582's NewReno: ssthresh half the flight, at least two segments;
    /// fast recovery lasts until everything sent before it is acknowledged, and a partial
    /// ACK resends the next hole at once; the window grows up to the largest the peer
    /// offered.
    NewReno,
    /// KA9Q NOS as JNOS has it, Van Jacobson's Reno of 1990. A timeout (`tcp_timeout`) and
    /// the third duplicate ACK (`update`) both set ssthresh to half the congestion window,
    /// at least one segment (`tcb->ssthresh = tcb->cwind / 2`, then `max(ssthresh, mss)`).
    /// Any ACK of new data ends fast recovery: the window deflates to ssthresh and the next
    /// hole waits for three more duplicates or the timer (no partial-ACK rule). The window
    /// grows only while below the window the peer offers now, and up to it ("Don't expand
    /// beyond the offered window"), and not on the ACK that follows a timeout's resend
    /// (`update` grows it only `!(tcb->flags & RETRAN)`; the timer sets the flag, that ACK
    /// clears it).
    Ka9q,
}

/// Linux's test of whether the congestion window, not the application or the peer's
/// window, limits the sender (`tcp_is_cwnd_limited`): the congestion controls grow the
/// window only while it holds (`tcp_reno_cong_avoid`, `bictcp_cong_avoid`). It changed
/// between the kernels the profiles stand for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CwndLimited {
    /// Within one segment of the window before the ACK (skywave's rule before it had the
    /// kernels'; kept for settings of no kernel).
    Segment,
    /// Linux 2.6.x to 3.15, for what was in flight before the ACK: all of the window, or
    /// with GSO (on for every device since 2.6.x) less than a third of it left
    /// (`sysctl_tcp_tso_win_divisor` 3) and under 64 kB, or at most three segments left
    /// (`tcp_max_tso_deferred_mss`).
    Linux3,
    /// Linux 5.18 on ("tcp: fix tcp_cwnd_validate() to not forget is_cwnd_limited"; 3.16
    /// brought the form): `tcp_cwnd_validate`, after each send of new data or with the
    /// window full, keeps per window of data (until `cwnd_usage_seq` is acknowledged)
    /// whether the flight filled the window and the most packets out; in use if it did, or
    /// in slow start while the window is under twice the most out.
    Linux518,
}

/// Which restart after idle a sender has, and where it looks for the idle spell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleRestart {
    /// JNOS (KA9Q NOS, `tcp_output`: "If transmitter has been idle for more than a RTT,
    /// take the congestion window back down to one packet", Van Jacobson's restart): data
    /// goes with nothing unacknowledged, more than SRTT after the ACK that acknowledged
    /// everything (`lastactive`, set in `tcp_input`), so the window goes back to one segment.
    Jnos,
    /// Linux before 4.11: as each data segment goes (`tcp_event_data_sent`). Linux's test,
    /// in both its places: nothing unacknowledged, and no data sent for longer than the RTO.
    OnSend,
    /// Linux 4.11 on ("tcp: fix slow start after idle vs TSO/GSO"): when the application
    /// queues data and nothing was waiting to be sent (`skb_entail`), or an ACK changes the
    /// peer's window while data waits (`tcp_ack_update_window`), before that ACK's
    /// acknowledgement counts.
    OnQueue,
}

/// `repr` from `src` to `dst` as an IPv4 datagram, both checksums set: what a host puts on
/// the link (and what a test or fuzz target hands one).
pub fn datagram(src: [u8; 4], dst: [u8; 4], repr: &TcpRepr<'_>) -> Vec<u8> {
    let (src, dst) = (Ipv4Address::from(src), Ipv4Address::from(dst));
    let ip = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol::Tcp,
        payload_len: repr.buffer_len(),
        hop_limit: HOP_LIMIT,
    };
    let mut buf = vec![0u8; ip.buffer_len() + repr.buffer_len()];
    let caps = ChecksumCapabilities::default();
    let mut packet = Ipv4Packet::new_unchecked(&mut buf[..]);
    ip.emit(&mut packet, &caps);
    let mut tcp = TcpPacket::new_unchecked(packet.payload_mut());
    repr.emit(
        &mut tcp,
        &IpAddress::Ipv4(src),
        &IpAddress::Ipv4(dst),
        &caps,
    );
    buf
}

/// The window-scale shift that fits a receive buffer of `bytes` in the 16-bit window field
/// (RFC 7323 2.3: at most 14).
pub(crate) fn window_shift(bytes: usize) -> u8 {
    let mut s = 0u8;
    while s < 14 && (bytes >> s) > 65_535 {
        s += 1;
    }
    s
}

/// `a` is after `b` in sequence space.
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// `a` is at or after `b` in sequence space.
fn at_or_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

/// The RTT estimator and retransmission timer value.
#[derive(Debug, Clone)]
struct Rtte {
    timers: RtoTimers,
    estimator: RttEstimator,
    /// Smoothed RTT and its mean deviation, seconds (`None`: no estimate yet).
    srtt: Option<(f64, f64)>,
    /// [`RttEstimator::Linux`] only: what the RTO adds to SRTT, seconds (Linux's `rttvar_us`);
    /// the largest 4 × deviation of the round trip under way (`mdev_max_us`); and the
    /// sequence number whose acknowledgement ends that round trip (`rtt_seq`).
    linux: LinuxVar,
    backoff: u32,
    /// The timed segment: the sequence number that acknowledges it, and when it was sent.
    timed: Option<(u32, Duration)>,
    /// The host's cached estimate for this destination, seconds, as JNOS's `rtt_add` keeps it
    /// (the first sample with no deviation, later ones smoothed in): what the next
    /// connection to the same host may start from ([`Tcb::seed_rtt`]).
    cache: Option<(f64, f64)>,
}

/// Linux's RTO variance state (`tcp_rtt_estimator` in `net/ipv4/tcp_input.c`), seconds.
#[derive(Debug, Clone, Copy, Default)]
struct LinuxVar {
    rttvar: f64,
    mdev_max: f64,
    rtt_seq: u32,
}

impl Rtte {
    fn new(timers: RtoTimers, estimator: RttEstimator) -> Rtte {
        let srtt = match estimator {
            RttEstimator::Rfc6298 | RttEstimator::Linux => None,
            RttEstimator::Jnos => Some((timers.initial.as_secs_f64(), 0.0)),
        };
        Rtte {
            timers,
            estimator,
            srtt,
            linux: LinuxVar::default(),
            backoff: 0,
            timed: None,
            cache: None,
        }
    }

    fn rto(&self) -> Duration {
        let base = match (self.srtt, self.estimator) {
            (None, _) => self.timers.initial.as_secs_f64(),
            (Some((srtt, _)), RttEstimator::Linux) => srtt + self.linux.rttvar,
            (Some((srtt, dev)), _) => srtt + 4.0 * dev,
        };
        let (min, max) = (self.timers.min.as_secs_f64(), self.timers.max.as_secs_f64());
        let factor = f64::from(1u32 << self.backoff.min(MAX_BACKOFF));
        // Where the floor goes differs. KA9Q NOS floors the backed-off value (`tcp_output`:
        // `rto = backoff(tcb->backoff) * (4 * tcb->mdev + tcb->srtt)`, then
        // `max(MIN_RTO, rto)`), so a round trip near zero backs off from MIN_RTO's floor
        // only once the product passes it. RFC 6298 floors the RTO whenever it is computed
        // (2.4) and doubles that (5.5); Linux's base is floored already (its `rttvar` is at
        // least TCP_RTO_MIN) and `inet_csk_rto_backoff` shifts it. Every estimator caps the
        // result at the largest RTO.
        let secs = match self.estimator {
            RttEstimator::Jnos => (base * factor).min(max).max(min),
            RttEstimator::Rfc6298 | RttEstimator::Linux => (base.max(min) * factor).min(max),
        };
        Duration::try_from_secs_f64(secs).unwrap_or(self.timers.max)
    }

    /// Takes the sample `r` from an ACK that moved the left edge to `snd_una` while
    /// `snd_nxt` was the highest sequence number sent plus one (Linux's `snd_nxt`, which a
    /// go-back-N resend does not move back: its once-a-round-trip step needs both).
    fn sample(&mut self, r: Duration, snd_una: u32, snd_nxt: u32) {
        let r = r.as_secs_f64();
        self.srtt = Some(match (self.srtt, self.estimator) {
            (None, RttEstimator::Linux) => {
                // RFC 6298's first step, with the deviation term at least TCP_RTO_MIN.
                let min = self.timers.min.as_secs_f64();
                self.linux.rttvar = (2.0 * r).max(min);
                self.linux.mdev_max = self.linux.rttvar;
                self.linux.rtt_seq = snd_nxt;
                (r, r / 2.0)
            }
            (Some(old), RttEstimator::Linux) => self.linux_smoothed(old, r, snd_una, snd_nxt),
            (None, _) => (r, r / 2.0),
            (Some(old), _) => smoothed(old, r),
        });
        self.cache = Some(self.cache.map_or((r, 0.0), |old| smoothed(old, r)));
        self.backoff = 0;
    }

    /// Linux's `tcp_rtt_estimator`, in seconds (Linux keeps SRTT × 8 and the deviation × 4
    /// in microseconds). SRTT moves by 1/8 of the error as RFC 6298's. The deviation moves by
    /// 1/4, except that a sample below SRTT that would raise it counts only 1/32 (so an RTT
    /// that falls does not raise the RTO). The RTO then adds to SRTT not the deviation of
    /// the moment but `rttvar`: the largest 4 × deviation seen in the round trip under way,
    /// at least TCP_RTO_MIN, let down by a quarter of the gap once per round trip. On an HF
    /// link, where every ACK is a sample and the samples of one round trip range widely, the
    /// RTO so stays near the worst of the last round trip where RFC 6298's, smoothed per
    /// sample, shrinks within one flight.
    fn linux_smoothed(
        &mut self,
        (srtt, dev): (f64, f64),
        r: f64,
        snd_una: u32,
        snd_nxt: u32,
    ) -> (f64, f64) {
        let err = r - srtt;
        let mut step = err.abs() - dev;
        if err < 0.0 && step > 0.0 {
            step /= 8.0;
        }
        let dev = dev + step / 4.0;
        let lv = &mut self.linux;
        if 4.0 * dev > lv.mdev_max {
            lv.mdev_max = 4.0 * dev;
            lv.rttvar = lv.rttvar.max(lv.mdev_max);
        }
        if after(snd_una, lv.rtt_seq) {
            if lv.mdev_max < lv.rttvar {
                lv.rttvar -= (lv.rttvar - lv.mdev_max) / 4.0;
            }
            lv.rtt_seq = snd_nxt;
            lv.mdev_max = self.timers.min.as_secs_f64();
        }
        (srtt + err / 8.0, dev)
    }
}

/// `(srtt, mdev)` with the sample `r` smoothed in, gains 1/8 and 1/4 (RFC 6298, JNOS).
fn smoothed((srtt, dev): (f64, f64), r: f64) -> (f64, f64) {
    (
        srtt + (r - srtt) / 8.0,
        dev + ((r - srtt).abs() - dev) / 4.0,
    )
}

/// RFC 6937's state for one recovery, in bytes.
#[derive(Debug, Clone, Copy)]
struct Prr {
    /// Data the peer received since recovery began (cumulatively acknowledged or SACKed).
    delivered: u32,
    /// Data sent since recovery began, resent or new.
    out: u32,
    /// The congestion window before the cut (Linux's `prior_cwnd`, RFC 6937's RecoverFS).
    prior_cwnd: u32,
}

/// The state a retransmission timeout replaced, for the Eifel response (RFC 4015) should the
/// timeout prove spurious.
#[derive(Debug, Clone, Copy)]
struct Undo {
    cwnd: Option<u32>,
    ssthresh: u32,
    /// The timestamp the retransmission carried.
    tsval: u32,
}

/// One TCP connection endpoint.
#[derive(Debug)]
pub struct Tcb {
    cfg: TcbConfig,
    state: State,
    local_port: u16,
    remote: Option<([u8; 4], u16)>,
    /// Segment size in use (both MSSs' minimum once the peer's is known).
    mss: usize,
    /// Our window scale shift and the peer's (both `Some` only if both sent the option).
    rcv_shift: u8,
    snd_shift: u8,

    // Send side.
    snd_una: u32,
    snd_nxt: u32,
    /// Highest sequence number sent plus one.
    snd_max: u32,
    snd_wnd: u32,
    /// The largest window the peer has offered (sender SWS avoidance).
    max_snd_wnd: u32,
    snd_wl1: u32,
    snd_wl2: u32,
    /// Unacknowledged and unsent data; its first byte has sequence number `buf_seq`.
    tx: VecDeque<u8>,
    buf_seq: u32,
    /// The application will write nothing more.
    fin_queued: bool,
    /// Sequence number of our FIN once sent.
    fin_seq: Option<u32>,
    cwnd: Option<u32>,
    /// Bytes acknowledged (ACKs, for the kernels of 2012) towards the next segment of
    /// congestion avoidance ([`Congestion::LinuxReno`]; Linux's `snd_cwnd_cnt`).
    cwnd_cnt: u32,
    ssthresh: u32,
    dup_acks: u32,
    /// In fast recovery until this sequence number is acknowledged.
    recover: Option<u32>,
    /// After a timeout (NewReno's rules), what had been sent by then: until it is
    /// acknowledged, duplicate ACKs start no fast retransmit (RFC 6582 4, Linux's loss state).
    loss_high: Option<u32>,
    /// Proportional rate reduction during a SACK recovery (RFC 6937, Linux's
    /// `tcp_cwnd_reduction`, 3.2 on): what was delivered and sent since it began, and the window
    /// before the cut.
    prr: Option<Prr>,
    /// End of the last sub-MSS segment sent (Minshall).
    snd_sml: u32,
    rtte: Rtte,
    rto_at: Option<Duration>,
    /// The timer runs as Linux's zero-window probe timer.
    probing: bool,
    /// Zero-window probes sent since the last acceptable ACK (Linux's `icsk_probes_out`,
    /// which `tcp_ack` clears on any ACK): a host gives up on a peer that answers none.
    probes_out: u32,
    /// The probe timer found the window open but too small for sender SWS avoidance: the
    /// next output sends what fits all the same.
    wakeup: bool,
    /// Both ends send timestamps.
    ts_ok: bool,
    /// Timeouts the Eifel check found spurious.
    spurious_timeouts: u32,
    /// Retransmission timeouts that fired on an open or opening connection (persist-timer
    /// probes not counted).
    timeouts: u64,
    /// The peer's timestamp to echo (RFC 7323 TS.Recent).
    ts_recent: u32,
    /// The echoed timestamp of the segment being processed.
    seg_echo: Option<u32>,
    /// SYNs (or SYN-ACKs) resent before the connection opened.
    syn_resends: u32,
    /// The timestamp our first SYN (or SYN-ACK) carried, and whether the segment that
    /// completed the handshake echoed it: then every resend was spurious.
    syn_tsval: Option<u32>,
    syn_echoed: bool,
    /// What a timeout changed, kept until the first ACK after it says whether it was spurious.
    undo: Option<Undo>,
    /// Both ends offered SACK.
    sack_ok: bool,
    /// What the peer SACKed, and the recovery under way ([`Tcb::sacking`] only).
    board: Scoreboard,
    /// The SACK blocks of the segment being processed.
    seg_sack: Blocks,
    /// When the tail-loss probe fires (it runs in the RTO timer's place: never later).
    probe_at: Option<Duration>,
    /// The probe sent and not yet settled: `snd_max` when it went (Linux's `tlp_high_seq`),
    /// and whether it was a resend (else new data).
    tlp_high: Option<(u32, bool)>,
    /// Tail-loss probes sent, and losses a resent probe repaired.
    tlp_probes: u32,
    tlp_repairs: u32,
    /// The latest time this endpoint was given (the timestamp clock).
    clock: Duration,
    /// When data last went, resends included, or the connection opened (Linux's `lsndtime`).
    lsndtime: Duration,
    /// When an ACK last acknowledged everything sent (JNOS's `lastactive`).
    all_acked_at: Duration,
    /// Slow-start restarts after idle ([`TcbConfig::idle_restart`]) that cut the window.
    idle_restarts: u32,
    /// RFC 2861's validation of an unused window (with `idle_restart`, Linux's
    /// `tcp_cwnd_validate`): the most segments in flight since the window was last in use
    /// (`snd_cwnd_used`), when it was last in use or cut (`snd_cwnd_stamp`), and the times
    /// it was let down for going unused.
    cwnd_used: u32,
    cwnd_stamp: Duration,
    /// Linux 5.18's window tracking ([`CwndLimited::Linux518`]): whether the flight filled
    /// the window in the current window of data, the most segments out in it, and the
    /// sequence number whose acknowledgement ends it (`is_cwnd_limited`,
    /// `max_packets_out`, `cwnd_usage_seq`).
    is_cwnd_limited: bool,
    /// KA9Q's RETRAN flag ([`RenoRules::Ka9q`]): a timeout resent since the last ACK of new
    /// data.
    retran: bool,
    max_packets_out: u32,
    cwnd_usage_seq: u32,
    unused_decays: u32,
    /// The application's last write did not fit the send buffer (Linux's `SOCK_NOSPACE`): the
    /// sender is not application-limited, and an unused window is not let down.
    writer_blocked: bool,

    // Receive side.
    rcv_nxt: u32,
    rx: VecDeque<u8>,
    /// Out-of-order data by sequence number.
    ooo: BTreeMap<u32, Vec<u8>>,
    /// Where the latest out-of-order segments started, most recent first: the order of the
    /// SACK blocks (RFC 2018 4).
    sack_recent: Vec<u32>,
    /// Duplicate data the next ACK reports first (D-SACK, RFC 2883).
    dsack_next: Option<(u32, u32)>,
    /// Right edge of the window last advertised.
    rcv_adv: u32,
    /// In-order bytes received and not yet acknowledged.
    unacked_rx: usize,
    ack_at: Option<Duration>,
    ack_now: bool,
    /// Linux's delayed-ACK engine, once the connection is open (`cfg.linux_acks` only).
    acks: Option<LinuxAcks>,
    /// CUBIC's state, once the connection is open ([`Congestion::Cubic`] only).
    cubic: Option<Cubic>,
    /// Linux's receive window (`cfg.rcv_tuning` only).
    rcvbuf: Option<RcvBuf>,
    /// Linux's send buffer (`cfg.snd_tuning` only).
    sndbuf: Option<SndBuf>,
    time_wait_at: Option<Duration>,

    out: Vec<Vec<u8>>,
}

impl Tcb {
    /// A closed endpoint.
    pub fn new(cfg: TcbConfig) -> Tcb {
        // Linux sizes its scale for the most autotuning may give the buffer.
        let rcv_shift = window_shift(if cfg.rcv_tuning.is_some() {
            rcvbuf::RMEM_MAX
        } else {
            cfg.rx_buffer
        });
        let cwnd = match cfg.congestion {
            // Refused by the settings check; smoltcp's own Reno starts at 2048 bytes.
            Congestion::SmoltcpReno => Some(2048),
            c => c.initial_window(u32::from(cfg.mss)),
        };
        Tcb {
            state: State::Closed,
            local_port: 0,
            remote: None,
            mss: usize::from(cfg.mss),
            rcv_shift,
            snd_shift: 0,
            snd_una: cfg.iss,
            snd_nxt: cfg.iss,
            snd_max: cfg.iss,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: 0,
            snd_wl2: 0,
            tx: VecDeque::new(),
            buf_seq: cfg.iss.wrapping_add(1),
            fin_queued: false,
            fin_seq: None,
            cwnd,
            cwnd_cnt: 0,
            ssthresh: u32::MAX,
            dup_acks: 0,
            recover: None,
            loss_high: None,
            prr: None,
            snd_sml: cfg.iss,
            rtte: Rtte::new(cfg.rto, cfg.rtt_estimator),
            rto_at: None,
            probing: false,
            probes_out: 0,
            wakeup: false,
            ts_ok: false,
            spurious_timeouts: 0,
            timeouts: 0,
            ts_recent: 0,
            seg_echo: None,
            syn_resends: 0,
            syn_tsval: None,
            syn_echoed: false,
            undo: None,
            sack_ok: false,
            board: Scoreboard::new(cfg.iss),
            seg_sack: [None; sack::MAX_BLOCKS],
            probe_at: None,
            tlp_high: None,
            tlp_probes: 0,
            tlp_repairs: 0,
            clock: Duration::ZERO,
            lsndtime: Duration::ZERO,
            all_acked_at: Duration::ZERO,
            idle_restarts: 0,
            cwnd_used: 0,
            cwnd_stamp: Duration::ZERO,
            is_cwnd_limited: false,
            retran: false,
            max_packets_out: 0,
            cwnd_usage_seq: cfg.iss,
            unused_decays: 0,
            writer_blocked: false,
            rcv_nxt: 0,
            rx: VecDeque::new(),
            ooo: BTreeMap::new(),
            sack_recent: Vec::new(),
            dsack_next: None,
            rcv_adv: 0,
            unacked_rx: 0,
            ack_at: None,
            ack_now: false,
            acks: None,
            cubic: None,
            rcvbuf: cfg.rcv_tuning.map(|era| RcvBuf::new(cfg.mss, era)),
            sndbuf: cfg.snd_tuning.map(SndBuf::new),
            time_wait_at: None,
            out: Vec::new(),
            cfg,
        }
    }

    /// The connection's state.
    pub fn state(&self) -> State {
        self.state
    }

    /// The congestion window, bytes (`None`: unlimited).
    pub fn cwnd(&self) -> Option<u32> {
        self.cwnd
    }

    /// The round-trip estimate (SRTT, mean deviation) a host would cache for the peer, as
    /// JNOS's `rtt_add` does with every valid sample; `None` before the first.
    pub fn rtt_cache(&self) -> Option<(Duration, Duration)> {
        let (srtt, dev) = self.rtte.cache?;
        Some((
            Duration::try_from_secs_f64(srtt).ok()?,
            Duration::try_from_secs_f64(dev).ok()?,
        ))
    }

    /// Starts the estimator from a cached estimate instead of the initial RTO, as JNOS does
    /// for a peer in its `RTTCACHE` (`proc_syn`, `set_irtt`); call before the connection opens.
    pub fn seed_rtt(&mut self, srtt: Duration, dev: Duration) {
        let e = (srtt.as_secs_f64(), dev.as_secs_f64());
        self.rtte.srtt = Some(e);
        self.rtte.cache = Some(e);
    }

    /// Slow-start restarts after idle that cut the window ([`TcbConfig::idle_restart`]).
    pub fn idle_restarts(&self) -> u32 {
        self.idle_restarts
    }

    /// Times an unused window was let down halfway to what was used (RFC 2861, with
    /// [`TcbConfig::idle_restart`]).
    pub fn unused_decays(&self) -> u32 {
        self.unused_decays
    }

    /// Retransmission timeouts found spurious and undone (timestamps only).
    pub fn spurious_timeouts(&self) -> u32 {
        self.spurious_timeouts
    }

    /// Zero-window probes sent since the peer last acknowledged anything (Linux's
    /// `icsk_probes_out`; a host's give-up rule reads it).
    pub fn probes_out(&self) -> u32 {
        self.probes_out
    }

    /// Retransmission timeouts so far (not the persist timer's probes): a host's give-up rule
    /// tells by it a timeout's resend from a fast retransmission, which looks the same on
    /// the wire.
    pub fn timeouts(&self) -> u64 {
        self.timeouts
    }

    /// The retransmission timeout the next (re)transmission would get.
    pub fn rto(&self) -> Duration {
        self.rtte.rto()
    }

    /// Waits for a connection on `port`.
    pub fn listen(&mut self, port: u16) -> Result<(), String> {
        if self.state != State::Closed {
            return Err(format!("listen in state {}", self.state));
        }
        self.local_port = port;
        self.state = State::Listen;
        Ok(())
    }

    /// Opens a connection to `remote:port` from `local_port`; the SYN goes at the next poll.
    pub fn connect(&mut self, remote: [u8; 4], port: u16, local_port: u16) -> Result<(), String> {
        if self.state != State::Closed {
            return Err(format!("connect in state {}", self.state));
        }
        self.local_port = local_port;
        self.remote = Some((remote, port));
        self.state = State::SynSent;
        Ok(())
    }

    /// The application may still write.
    pub fn may_send(&self) -> bool {
        matches!(self.state, State::Established | State::CloseWait) && !self.fin_queued
    }

    /// Queues what the send buffer takes of `data`; returns how much.
    pub fn send_slice(&mut self, data: &[u8]) -> usize {
        if !self.may_send() {
            return 0;
        }
        let capacity = self
            .sndbuf
            .as_ref()
            .map_or(self.cfg.tx_buffer, SndBuf::capacity);
        let n = data.len().min(capacity.saturating_sub(self.tx.len()));
        // Linux 4.11 on looks for an idle spell when the write starts a new buffer, which it
        // does when nothing was left unsent (`skb_entail`).
        if n > 0 && self.unsent() == 0 && self.cfg.idle_restart == Some(IdleRestart::OnQueue) {
            self.restart_after_idle(self.clock);
        }
        self.tx.extend(&data[..n]);
        self.writer_blocked = n < data.len();
        n
    }

    /// Bytes queued and never sent.
    fn unsent(&self) -> usize {
        let sent = self.snd_max.wrapping_sub(self.buf_seq) as usize;
        self.tx.len().saturating_sub(sent)
    }

    /// Received data is waiting to be read.
    pub fn can_recv(&self) -> bool {
        !self.rx.is_empty()
    }

    /// Takes every byte received in order.
    pub fn recv(&mut self) -> Vec<u8> {
        let data: Vec<u8> = self.rx.drain(..).collect();
        if let Some(r) = self.rcvbuf.as_mut()
            && !data.is_empty()
        {
            r.read(self.clock, data.len());
        }
        if !data.is_empty() && self.window_update_due() {
            self.ack_now = true;
        }
        // Linux's `tcp_cleanup_rbuf`: the read may owe the peer its ACK now.
        if self
            .acks
            .as_ref()
            .is_some_and(|a| a.ack_on_read(data.len(), self.unacked_rx))
        {
            self.ack_now = true;
        }
        data
    }

    /// The application closes its side: a FIN follows the queued data.
    pub fn close(&mut self) {
        match self.state {
            State::Listen | State::SynSent => self.state = State::Closed,
            State::SynReceived | State::Established | State::CloseWait => self.fin_queued = true,
            _ => {}
        }
    }

    /// Drops the connection, with a RST to the peer if it was synchronised.
    pub fn abort(&mut self) {
        let synchronised = !matches!(
            self.state,
            State::Closed | State::Listen | State::SynSent | State::TimeWait
        );
        if synchronised {
            self.emit(TcpControl::Rst, self.snd_nxt, true, 0, 0);
        }
        self.enter_closed();
    }

    fn enter_closed(&mut self) {
        self.state = State::Closed;
        self.rto_at = None;
        self.probe_at = None;
        self.ack_at = None;
        self.ack_now = false;
        self.time_wait_at = None;
    }

    /// What was sent since the last call.
    pub fn take_tx(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.out)
    }

    /// When [`Tcb::poll`] has something to do next (a timer), if anything.
    pub fn poll_at(&self) -> Option<Duration> {
        [self.rto_at, self.probe_at, self.ack_at, self.time_wait_at]
            .into_iter()
            .flatten()
            .min()
    }

    /// Bytes of data the receive buffer holds.
    fn rx_capacity(&self) -> usize {
        self.rcvbuf
            .as_ref()
            .map_or(self.cfg.rx_buffer, RcvBuf::capacity)
    }

    /// Room left in the receive buffer.
    fn free_rx(&self) -> usize {
        self.rx_capacity().saturating_sub(self.rx.len())
    }

    /// The window to offer: the room left, and with Linux's receive window no more than its
    /// current ceiling.
    fn offer_rx(&self) -> usize {
        match &self.rcvbuf {
            Some(r) => r.window(self.rx.len()),
            None => self.free_rx(),
        }
    }

    /// This host offers the window-scale option.
    fn offers_scale(&self) -> bool {
        self.cfg.rcv_tuning.is_some() || self.cfg.rx_buffer > 65_535
    }

    /// The window field to advertise now (scaled down), and the right edge it stands for.
    fn advertise(&self) -> (u16, u32) {
        let field = (self.offer_rx() >> self.rcv_shift).min(65_535);
        let edge = self.rcv_nxt.wrapping_add((field << self.rcv_shift) as u32);
        // Never move the right edge back (RFC 9293 3.8.6.2.2: do not shrink the window).
        if after(self.rcv_adv, edge) {
            let keep = self.rcv_adv.wrapping_sub(self.rcv_nxt) >> self.rcv_shift;
            return (keep.min(65_535) as u16, self.rcv_adv);
        }
        (field as u16, edge)
    }

    fn window_update_due(&self) -> bool {
        if !matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) {
            return false;
        }
        let (_, edge) = self.advertise();
        if !after(edge, self.rcv_adv) {
            return false;
        }
        // The window the peer was last told (none left if it sent up to the edge or past it).
        let told = if after(self.rcv_adv, self.rcv_nxt) {
            self.rcv_adv.wrapping_sub(self.rcv_nxt) as usize
        } else {
            0
        };
        match self.cfg.window_rules {
            WindowRules::Jnos => told == 0,
            WindowRules::Linux => edge.wrapping_sub(self.rcv_nxt) as usize >= 2 * told,
        }
    }

    /// Builds one datagram and queues it.
    fn emit(&mut self, control: TcpControl, seq: u32, ack: bool, offset: usize, len: usize) {
        let Some((remote, port)) = self.remote else {
            return;
        };
        let syn = control == TcpControl::Syn;
        let (window, edge) = if syn {
            // The window field of a SYN is never scaled; Linux offers its initial window.
            let w = self
                .rcvbuf
                .as_ref()
                .map_or_else(|| self.offer_rx(), RcvBuf::syn_window)
                .min(65_535);
            (w as u16, self.rcv_nxt.wrapping_add(w as u32))
        } else {
            self.advertise()
        };
        if let Some(prr) = self.prr.as_mut() {
            prr.out = prr.out.saturating_add(len as u32);
        }
        if len > 0 {
            self.data_sent();
        }
        if let Some(a) = self.acks.as_mut() {
            if ack {
                let owed = self.unacked_rx > 0 || self.ack_at.is_some() || self.ack_now;
                a.ack_sent(owed);
            }
            if len > 0 {
                a.data_sent(self.clock);
            }
        }
        if ack {
            self.rcv_adv = edge;
            self.unacked_rx = 0;
            self.ack_at = None;
            self.ack_now = false;
        }
        let payload: Vec<u8> = self.tx.range(offset..offset + len).copied().collect();
        let repr = TcpRepr {
            src_port: self.local_port,
            dst_port: port,
            control,
            seq_number: TcpSeqNumber(seq as i32),
            ack_number: ack.then_some(TcpSeqNumber(self.rcv_nxt as i32)),
            window_len: window,
            window_scale: (syn && self.offers_scale()).then_some(self.rcv_shift),
            max_seg_size: syn.then_some(self.cfg.mss),
            // A SYN offers SACK; a SYN-ACK only answers an offer (RFC 2018 2).
            sack_permitted: syn && if ack { self.sack_ok } else { self.cfg.sack },
            sack_ranges: if ack && !syn && self.sack_ok {
                sack::receiver_blocks(
                    self.rcv_nxt,
                    self.ooo.iter().map(|(&s, d)| (s, d.len())),
                    &self.sack_recent,
                    self.dsack_next.take(),
                )
            } else {
                [None; sack::MAX_BLOCKS]
            },
            // A SYN offers timestamps; everything after, the SYN-ACK too, carries them only
            // if both ends offered them.
            timestamp: (if syn && !ack {
                self.cfg.timestamps
            } else {
                self.ts_ok
            })
            .then(|| TcpTimestampRepr::new(self.tsval(), if ack { self.ts_recent } else { 0 })),
            payload: &payload,
        };
        self.push_datagram(remote, &repr);
    }

    /// A data segment goes, resent or new (Linux's `tcp_event_data_sent`): with nothing in
    /// flight CUBIC hears of the idle spell (`CA_EVENT_TX_START`), a kernel before 4.11
    /// restarts slow start if the spell was long, and the time is kept.
    fn data_sent(&mut self) {
        let now = self.clock;
        if self.nothing_in_flight() {
            let idle = now.saturating_sub(self.lsndtime);
            if let Some(c) = self.cubic.as_mut() {
                c.tx_start(now, idle);
            }
            match self.cfg.idle_restart {
                Some(IdleRestart::OnSend) => self.restart_after_idle(now),
                Some(IdleRestart::Jnos) => self.jnos_restart(now),
                _ => {}
            }
        }
        self.lsndtime = now;
    }

    /// Nothing is unacknowledged (Linux's `packets_out` is 0; JNOS's probe byte counts, as
    /// KA9Q sends it as data, and Linux's probe has none).
    fn nothing_in_flight(&self) -> bool {
        self.snd_max == self.snd_una
    }

    /// Linux's slow-start restart (`tcp_cwnd_restart`, RFC 2861; [`TcbConfig::idle_restart`]
    /// says when it is looked for): with nothing in flight and no data sent for longer than
    /// the RTO, the window is halved for every RTO the spell lasted beyond the first, down to
    /// the initial window (or the window, if smaller), and ssthresh kept at three quarters of
    /// the old window at least (`tcp_current_ssthresh`), so slow start climbs back there. In
    /// segments, as Linux counts.
    fn restart_after_idle(&mut self, now: Duration) {
        if self.cfg.idle_restart.is_none() || !self.nothing_in_flight() {
            return;
        }
        let Some(cwnd) = self.cwnd else {
            return;
        };
        let rto = self.rtte.rto();
        let idle = now.saturating_sub(self.lsndtime);
        if idle <= rto {
            return;
        }
        let mss = (self.mss as u32).max(1);
        let segs = cwnd / mss;
        self.keep_ssthresh(segs);
        self.cwnd_used = 0;
        self.cwnd_stamp = now;
        let restart = self.initial_segments(segs).min(segs);
        let (mut w, mut left) = (segs, idle);
        while left > rto && w > restart {
            left -= rto;
            w >>= 1;
        }
        let w = w.max(restart);
        if w < segs {
            self.cwnd = Some(w * mss);
            self.idle_restarts += 1;
        }
    }

    /// JNOS's restart ([`IdleRestart::Jnos`]): more than SRTT since the ACK that left nothing
    /// unacknowledged, the window goes back to one segment (JNOS's first window); ssthresh
    /// stays.
    fn jnos_restart(&mut self, now: Duration) {
        let mss = self.mss as u32;
        let srtt = self.rtte.srtt.map_or(0.0, |(s, _)| s);
        let quiet = now.saturating_sub(self.all_acked_at).as_secs_f64();
        if quiet > srtt
            && let Some(c) = self.cwnd.as_mut()
            && *c > mss
        {
            *c = mss;
            self.idle_restarts += 1;
        }
    }

    /// Before Linux lets the window down outside a loss (a restart, an unused window), ssthresh
    /// keeps three quarters of the window of `segs` segments at least, so slow start climbs
    /// back there (`tcp_current_ssthresh`; during a reduction it stays as it is).
    fn keep_ssthresh(&mut self, segs: u32) {
        if self.recover.is_none() && self.prr.is_none() {
            let kept = ((segs >> 1) + (segs >> 2)).saturating_mul(self.mss as u32);
            self.ssthresh = self.ssthresh.max(kept);
        }
    }

    /// The initial window in segments (Linux's `tcp_init_cwnd`); `segs` where it is not counted
    /// in segments.
    fn initial_segments(&self, segs: u32) -> u32 {
        let mss = (self.mss as u32).max(1);
        self.cfg
            .congestion
            .initial_window(mss)
            .map_or(segs, |w| w / mss)
    }

    /// Linux's `tcp_cwnd_validate`, where `tcp_write_xmit` calls it: after new data went
    /// (`sent_new`), or in 5.18 on also with data waiting and the window full. With
    /// [`CwndLimited::Linux518`] it first keeps the window's use for [`Tcb::cwnd_in_use`].
    /// Then RFC 2861's validation, with the restart after idle (`tcp_slow_start_after_idle`
    /// governs both): a window in use (3.x: as many segments unacknowledged as it holds;
    /// 5.18: [`Tcb::cwnd_in_use`]) is noted as such; otherwise the most in flight is kept,
    /// and once the window has gone unused for an RTO it is let down halfway to what was
    /// used, the initial window at least (`tcp_cwnd_application_limited`), unless a recovery
    /// is under way or the application is waiting for room in the send buffer, which makes
    /// the window, not the application, the limit.
    fn validate_cwnd(&mut self, now: Duration, sent_new: bool) {
        let Some(cwnd) = self.cwnd else {
            return;
        };
        let mss = (self.mss as u32).max(1);
        let (segs, out) = (
            cwnd / mss,
            self.snd_max.wrapping_sub(self.snd_una).div_ceil(mss),
        );
        let in_use = if self.cfg.cwnd_limited == CwndLimited::Linux518 {
            let full = self.in_flight().div_ceil(mss) >= segs;
            let waiting = full && self.unsent() > 0;
            if !(sent_new || waiting) {
                return;
            }
            if at_or_after(self.snd_una, self.cwnd_usage_seq)
                || full
                || (!self.is_cwnd_limited && out > self.max_packets_out)
            {
                self.is_cwnd_limited = full;
                self.max_packets_out = out;
                self.cwnd_usage_seq = self.snd_max;
            }
            self.linux518_in_use()
        } else {
            if !sent_new {
                return;
            }
            out >= segs
        };
        let linux = matches!(
            self.cfg.idle_restart,
            Some(IdleRestart::OnSend | IdleRestart::OnQueue)
        );
        if !linux {
            return;
        }
        if in_use {
            self.cwnd_used = 0;
            self.cwnd_stamp = now;
            return;
        }
        self.cwnd_used = self.cwnd_used.max(out);
        if now.saturating_sub(self.cwnd_stamp) < self.rtte.rto() {
            return;
        }
        let open = self.recover.is_none()
            && self.prr.is_none()
            && self.dup_acks == 0
            && !self.board.in_loss()
            && self.snd_nxt == self.snd_max;
        if open && !self.writer_blocked {
            let used = self.cwnd_used.max(self.initial_segments(segs));
            if used < segs {
                self.keep_ssthresh(segs);
                self.cwnd = Some(((segs + used) >> 1) * mss);
                self.unused_decays += 1;
            }
            self.cwnd_used = 0;
        }
        self.cwnd_stamp = now;
    }

    /// What is still in the network, bytes (Linux's `tcp_packets_in_flight`): with SACK the
    /// pipe, RFC 6675's estimate; else everything unacknowledged.
    fn in_flight(&self) -> u32 {
        if self.sacking() {
            self.board.pipe(self.snd_max, self.mss as u32)
        } else {
            self.snd_max.wrapping_sub(self.snd_una)
        }
    }

    /// 5.18's `tcp_is_cwnd_limited`, from what `validate_cwnd` kept: a flight filled the
    /// window in the current window of data, or in slow start the window is under twice the
    /// most segments out.
    fn linux518_in_use(&self) -> bool {
        let Some(cwnd) = self.cwnd else {
            return false;
        };
        let segs = cwnd / (self.mss as u32).max(1);
        self.is_cwnd_limited
            || (cwnd < self.ssthresh && segs < self.max_packets_out.saturating_mul(2))
    }

    /// Whether the congestion window limits the sender, as the kernel modelled tells
    /// ([`CwndLimited`], Linux's `tcp_is_cwnd_limited`): Reno and CUBIC grow it only then.
    /// `in_flight_before`: the bytes in flight before the ACK being processed (Linux's
    /// `prior_in_flight`, which the 3.x test takes). Called before the ACK moves `snd_una`.
    fn cwnd_in_use(&self, in_flight_before: u32) -> bool {
        let mss = (self.mss as u32).max(1);
        let Some(cwnd) = self.cwnd else {
            return false;
        };
        let segs = cwnd / mss;
        match self.cfg.cwnd_limited {
            // Everything unacknowledged, SACKed or not, as the rule always read it.
            CwndLimited::Segment => {
                let unacked = self.snd_max.wrapping_sub(self.snd_una);
                unacked.saturating_add(mss) >= cwnd
            }
            CwndLimited::Linux3 => {
                let in_flight = in_flight_before.div_ceil(mss);
                if in_flight >= segs {
                    return true;
                }
                let left = segs - in_flight;
                (left.saturating_mul(3) < segs && left.saturating_mul(mss) < 65_536) || left <= 3
            }
            CwndLimited::Linux518 => self.linux518_in_use(),
        }
    }

    /// The timestamp clock: milliseconds of simulated time (RFC 7323 allows 1 ms to 1 s ticks;
    /// Linux's is 1 ms), from 1: a segment sent at the start of a run must not carry 0, which
    /// an echo of it would make read as no echo at all (Linux starts each connection's clock
    /// at a random offset, `tsoffset`, and ignores a zero TSecr).
    fn tsval(&self) -> u32 {
        (self.clock.as_millis() as u32).wrapping_add(1)
    }

    /// A reset answering `seg` (RFC 9293 3.10.7.1: acceptable to its sender whatever it
    /// believes): the ACK it carried as our sequence number, or, if it had none, our
    /// acknowledgement of all of it.
    fn emit_reset(&mut self, remote: [u8; 4], seg: &TcpRepr<'_>) {
        let (seq, ack) = match seg.ack_number {
            Some(a) => (a, None),
            None => (TcpSeqNumber(0), Some(seg.seq_number + seg.segment_len())),
        };
        let repr = TcpRepr {
            src_port: seg.dst_port,
            dst_port: seg.src_port,
            control: TcpControl::Rst,
            seq_number: seq,
            ack_number: ack,
            window_len: 0,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            payload: &[],
        };
        self.push_datagram(remote, &repr);
    }

    /// `repr` in an IPv4 datagram to `remote`, queued for the link.
    fn push_datagram(&mut self, remote: [u8; 4], repr: &TcpRepr<'_>) {
        self.out.push(datagram(self.cfg.address, remote, repr));
    }

    /// A datagram from the link at `now`. Anything not for this endpoint, malformed or with a
    /// bad checksum is dropped, as a host drops it.
    pub fn deliver(&mut self, now: Duration, datagram: &[u8]) {
        self.clock = self.clock.max(now);
        let caps = ChecksumCapabilities::default();
        let Ok(packet) = Ipv4Packet::new_checked(datagram) else {
            return;
        };
        let Ok(ip) = Ipv4Repr::parse(&packet, &caps) else {
            return;
        };
        if ip.next_header != IpProtocol::Tcp || ip.dst_addr.octets() != self.cfg.address {
            return;
        }
        let Ok(tcp) = TcpPacket::new_checked(packet.payload()) else {
            return;
        };
        let (src, dst) = (IpAddress::Ipv4(ip.src_addr), IpAddress::Ipv4(ip.dst_addr));
        let Ok(seg) = TcpRepr::parse(&tcp, &src, &dst, &caps) else {
            return;
        };
        if seg.dst_port != self.local_port {
            return;
        }
        let from = (ip.src_addr.octets(), seg.src_port);
        if self.state != State::Listen && self.remote != Some(from) {
            return;
        }
        self.segment_arrives(now, from, &seg);
        // A stack answers each segment as it processes it: new data the ACK let out first
        // (carrying the ACK), then a bare ACK if one is still owed (Linux's
        // `tcp_data_snd_check` then `tcp_ack_snd_check`; JNOS's `tcp_output` after every
        // segment). Left to the next poll, the segments of one burst would share one ACK, and
        // a sender would take in a burst of ACKs before sending what the first let out, new
        // or resent (Linux's recovery resends as each ACK allows, `tcp_xmit_retransmit_queue`),
        // so its flight would shrink ACK by ACK and a window test (Linux's
        // `tcp_is_cwnd_limited`) would find the window unused.
        self.output(now);
        self.check_space();
        if self.ack_now {
            self.ack_now = false;
            self.ack_at_once();
        }
    }

    fn segment_arrives(&mut self, now: Duration, from: ([u8; 4], u16), seg: &TcpRepr<'_>) {
        let seq = seg.seq_number.0 as u32;
        let ack = seg.ack_number.map(|a| a.0 as u32);
        if matches!(self.state, State::SynSent | State::SynReceived) {
            // Read before the options are taken: the SYN-ACK is the first segment that says
            // whether the peer does timestamps at all.
            self.syn_echoed =
                self.syn_tsval.is_some() && seg.timestamp.map(|t| t.tsecr) == self.syn_tsval;
        }
        self.seg_echo = seg
            .timestamp
            .map(|t| t.tsecr)
            .filter(|&e| e != 0 && self.ts_ok);
        self.seg_sack = if self.sack_ok {
            seg.sack_ranges
        } else {
            [None; sack::MAX_BLOCKS]
        };
        match self.state {
            State::TimeWait if seg.control == TcpControl::Syn => return,
            State::Closed => {
                // The connection is gone (TIME-WAIT ran out, or it was aborted): a peer that
                // still sends, a FIN whose ACK was lost, learns so at once instead of
                // retransmitting forever.
                if seg.control != TcpControl::Rst {
                    self.emit_reset(from.0, seg);
                }
                return;
            }
            State::Listen => {
                if seg.control != TcpControl::Syn || ack.is_some() {
                    return;
                }
                self.remote = Some(from);
                self.take_syn_options(seg);
                self.rcv_nxt = seq.wrapping_add(1);
                self.snd_wnd = u32::from(seg.window_len);
                self.max_snd_wnd = self.snd_wnd;
                self.snd_wl1 = seq;
                self.snd_wl2 = self.snd_una;
                self.state = State::SynReceived;
                self.send_syn(now);
                return;
            }
            State::SynSent => {
                if let Some(a) = ack
                    && a != self.cfg.iss.wrapping_add(1)
                {
                    return;
                }
                if seg.control == TcpControl::Rst {
                    if ack.is_some() {
                        self.enter_closed();
                    }
                    return;
                }
                // Only a SYN-ACK opens the connection (a simultaneous open never happens here).
                let (TcpControl::Syn, Some(a)) = (seg.control, ack) else {
                    return;
                };
                self.take_syn_options(seg);
                // The SYN-ACK's echo is a round-trip sample once it shows both ends do
                // timestamps, even for a SYN sent more than once (Linux's
                // `tcp_ack_update_rtt` from the SYN-ACK's TSecr; Karn forbids only the timing
                // of a resent segment).
                self.seg_echo = seg
                    .timestamp
                    .map(|t| t.tsecr)
                    .filter(|&e| e != 0 && self.ts_ok);
                self.rcv_nxt = seq.wrapping_add(1);
                self.rcv_adv = self
                    .rcv_nxt
                    .wrapping_add(self.offer_rx().min(65_535) as u32);
                self.snd_wl1 = seq;
                self.snd_wl2 = a;
                self.opened();
                self.process_ack(now, seq, a, seg.window_len, true, 0);
                self.ack_now = true;
                return;
            }
            _ => {}
        }

        // Synchronised states.
        let payload = seg.payload;
        let fin = seg.control == TcpControl::Fin;
        let seg_len = payload.len() + usize::from(fin);
        if !self.acceptable(seq, seg_len) {
            if seg.control == TcpControl::Rst {
                return;
            }
            if !payload.is_empty() {
                // Data again, or beyond the window: Linux answers at once and goes on in
                // quick-ACK mode (`tcp_enter_quickack_mode`).
                let window = self.rcv_adv.wrapping_sub(self.rcv_nxt) as usize;
                if let Some(a) = self.acks.as_mut() {
                    a.enter_quickack(window);
                }
            }
            if self.sack_ok && !payload.is_empty() && after(self.rcv_nxt, seq) {
                // Old data again: the duplicate ACK reports it first (D-SACK, RFC 2883; Linux's
                // `tcp_send_dupack`).
                let end = seq.wrapping_add(payload.len() as u32);
                let end = if after(end, self.rcv_nxt) {
                    self.rcv_nxt
                } else {
                    end
                };
                self.dsack_next = Some((seq, end));
            }
            self.ack_at_once();
            // A closed window refuses the data, not the ACK it carries (RFC 9293 3.10.7.4).
            if seq == self.rcv_nxt
                && self.rcv_adv == self.rcv_nxt
                && let Some(ack) = ack
                && !matches!(self.state, State::SynReceived)
            {
                self.process_ack(now, seq, ack, seg.window_len, false, seg_len);
            }
            return;
        }
        if seg.control == TcpControl::Rst {
            self.enter_closed();
            return;
        }
        // RFC 7323 4.3: TS.Recent from a segment that starts at or before what we last
        // acknowledged.
        if let Some(ts) = seg.timestamp
            && self.ts_ok
            && at_or_after(self.rcv_nxt, seq)
        {
            self.ts_recent = ts.tsval;
        }
        if seg.control == TcpControl::Syn {
            // A SYN inside the window of a synchronised connection: our SYN-ACK was lost
            // (SYN-RECEIVED) or the peer restarted; answer with an ACK, as RFC 5961 4.
            self.ack_now = true;
            return;
        }
        let Some(ack) = ack else {
            return;
        };
        if self.state == State::SynReceived {
            if !(after(ack, self.snd_una) && at_or_after(self.snd_max, ack)) {
                return;
            }
            self.opened();
        }
        self.process_ack(now, seq, ack, seg.window_len, false, seg_len);
        if self.state == State::Closed {
            return;
        }
        let header = (seg.header_len(), seg.control == TcpControl::Psh);
        self.process_data(now, seq, payload, fin, header);
    }

    /// Sends an ACK now: each out-of-order or duplicate segment gets its own (RFC 5681 4.2),
    /// as the sender's duplicate-ACK count needs, and [`Tcb::deliver`] calls it for an ACK
    /// still owed once the data the segment let out has gone (which carries the ACK).
    fn ack_at_once(&mut self) {
        match self.state {
            State::SynReceived => self.emit(TcpControl::Syn, self.cfg.iss, true, 0, 0),
            State::Closed | State::Listen | State::SynSent => {}
            _ => self.emit(TcpControl::None, self.snd_nxt, true, 0, 0),
        }
    }

    fn take_syn_options(&mut self, seg: &TcpRepr<'_>) {
        self.sack_ok = self.cfg.sack && seg.sack_permitted;
        if let Some(ts) = seg.timestamp
            && self.cfg.timestamps
        {
            self.ts_ok = true;
            self.ts_recent = ts.tsval;
        }
        if let Some(mss) = seg.max_seg_size {
            self.mss = self.mss.min(usize::from(mss)).max(1);
        } else {
            // RFC 9293 3.7.1: 536 when the peer sends no MSS option.
            self.mss = self.mss.min(536);
        }
        if self.ts_ok {
            // The 12 bytes of the option come out of every segment's payload, as Linux's
            // `mss_cache` has it, so the datagram stays within the MTU.
            self.mss = self.mss.saturating_sub(12).max(1);
        }
        match (seg.window_scale, self.offers_scale()) {
            (Some(s), true) => self.snd_shift = s.min(14),
            _ => {
                // Scaling is on only if both sides offered it.
                self.snd_shift = 0;
                self.rcv_shift = 0;
            }
        }
        if let Some(c) = self.cwnd.as_mut()
            && let Some(initial) = self.cfg.congestion.initial_window(self.mss as u32)
        {
            *c = initial;
        }
    }

    /// RFC 9293 3.10.7.4's acceptance test against the window last advertised.
    fn acceptable(&self, seq: u32, len: usize) -> bool {
        let wnd = self.rcv_adv.wrapping_sub(self.rcv_nxt);
        let right = self.rcv_nxt.wrapping_add(wnd);
        let in_window = |s: u32| at_or_after(s, self.rcv_nxt) && after(right, s);
        match (len, wnd) {
            (0, 0) => seq == self.rcv_nxt,
            (0, _) => in_window(seq),
            (_, 0) => false,
            _ => in_window(seq) || in_window(seq.wrapping_add(len as u32 - 1)),
        }
    }

    /// The ACK and window of an acceptable segment. `syn`: it acknowledges our SYN in
    /// SYN-SENT; `seg_len`: its sequence space (a segment with data is never a duplicate ACK).
    fn process_ack(
        &mut self,
        now: Duration,
        seq: u32,
        ack: u32,
        window: u16,
        syn: bool,
        seg_len: usize,
    ) {
        if after(ack, self.snd_max) {
            // Acknowledges what was never sent.
            self.ack_now = true;
            return;
        }
        // `tcp_ack`: "something worked", whatever the ACK acknowledges.
        self.probes_out = 0;
        // The scoreboard first, so that an ACK bringing new SACK information counts as a
        // duplicate (RFC 6675 2) and the holes are known before anything is sent.
        let dsack = sack::duplicate_reported(&self.seg_sack, ack);
        // Linux's `prior_in_flight`, for the window's growth: what was in the network before
        // this ACK.
        let in_flight_before = self.in_flight();
        // RFC 6937's DeliveredData: the change in the cumulative acknowledgement plus the
        // change in the SACKed bytes.
        let sacked_before = self.board.sacked();
        let advance = if after(ack, self.snd_una) {
            ack.wrapping_sub(self.snd_una)
        } else {
            0
        };
        let newly_sacked = if self.sacking() {
            let edge = self.snd_una.wrapping_add(advance);
            self.board.update(edge, self.snd_max, &self.seg_sack)
        } else {
            0
        };
        let delivered = if self.sacking() {
            u32::try_from(
                i64::from(advance) + i64::from(self.board.sacked()) - i64::from(sacked_before),
            )
            .unwrap_or(0)
        } else {
            0
        };
        let shift = if syn { 0 } else { self.snd_shift };
        let wnd = u32::from(window) << shift;
        let same_window = wnd == self.snd_wnd;
        if after(seq, self.snd_wl1) || (seq == self.snd_wl1 && at_or_after(ack, self.snd_wl2)) {
            let was_zero = self.snd_wnd == 0;
            // Linux 4.11 on looks for an idle spell when the window changes with data waiting,
            // before this ACK acknowledges anything (`tcp_ack_update_window`).
            if wnd != self.snd_wnd
                && self.unsent() > 0
                && self.cfg.idle_restart == Some(IdleRestart::OnQueue)
            {
                self.restart_after_idle(now);
            }
            self.snd_wnd = wnd;
            self.max_snd_wnd = self.max_snd_wnd.max(wnd);
            self.snd_wl1 = seq;
            self.snd_wl2 = ack;
            if was_zero && wnd > 0 && self.cfg.window_rules == WindowRules::Jnos {
                // KA9Q's `update`: "crank back the send pointer so we'll immediately resume
                // transmission", the probe byte the closed window refused first.
                self.snd_nxt = self.snd_una;
            }
            let next = self.unsent().min(self.mss) as u32;
            if self.probing && wnd > 0 && wnd >= next {
                // Linux's `tcp_ack_probe`: the window opened to the next segment, the probes'
                // back-off goes and the data follows.
                self.probing = false;
                self.rtte.backoff = 0;
                self.rto_at = None;
            }
        }
        if self.probing {
            // Still closed: the next probe is timed from this answer (`tcp_ack_probe`).
            self.rto_at = Some(now + self.rtte.rto());
        }
        if !after(ack, self.snd_una) {
            // RFC 5681 2: a duplicate ACK acknowledges nothing new, carries no data and the
            // same window, while data is outstanding.
            let in_flight = !self.nothing_in_flight();
            // With SACK the test is new SACK information, whatever the window (RFC 6675 2).
            let duplicate = if self.sacking() {
                newly_sacked > 0
            } else {
                same_window
            };
            if ack == self.snd_una && seg_len == 0 && in_flight && duplicate && !syn {
                self.duplicate_ack(now);
            } else {
                self.dup_acks = 0;
            }
            let pure = seg_len == 0 && newly_sacked == 0;
            self.settle_probe(ack, pure, dsack);
            self.reduce_by_prr(delivered);
            return;
        }
        // New data acknowledged.
        let mut rtt_sample = None;
        if let Some(echo) = self.seg_echo {
            // RFC 7323: every ACK of new data is a sample, resent segments' too (the echo
            // says which transmission it answers).
            let rtt = Duration::from_millis(u64::from(self.tsval().wrapping_sub(echo)));
            rtt_sample = Some(rtt);
            self.rtte.sample(rtt, ack, self.snd_max);
            self.rtte.timed = None;
            if let Some(undo) = self.undo.take()
                && after(undo.tsval, echo)
            {
                // Eifel (RFC 3522 detection, RFC 4015 response, Linux's undo): the ACK
                // answers the original transmission, so the timeout was spurious. Restore
                // the window and go on with new data instead of resending the rest.
                self.cwnd = undo.cwnd;
                self.ssthresh = undo.ssthresh;
                self.snd_nxt = self.snd_max;
                self.board.undo_loss();
                self.spurious_timeouts += 1;
            }
        } else if let Some((timed, sent)) = self.rtte.timed
            && at_or_after(ack, timed)
        {
            let rtt = now.saturating_sub(sent);
            rtt_sample = Some(rtt);
            self.rtte.sample(rtt, ack, self.snd_max);
            self.rtte.timed = None;
        }
        self.undo = None;
        if let Some(rtt) = rtt_sample {
            // Linux hands CUBIC the sample before it grows the window (`pkts_acked`).
            self.cubic_sample(now, rtt, ack.wrapping_sub(self.snd_una));
        }
        // The SYN and FIN take sequence space but no buffer space, nor do they open cwnd.
        let data_acked = if after(ack, self.buf_seq) {
            (ack.wrapping_sub(self.buf_seq) as usize).min(self.tx.len())
        } else {
            0
        };
        self.grow_cwnd(now, ack, data_acked as u32, in_flight_before);
        self.dup_acks = 0;
        self.tx.drain(..data_acked);
        if data_acked > 0
            && let Some(b) = self.sndbuf.as_mut()
        {
            b.freed();
        }
        self.buf_seq = self.buf_seq.wrapping_add(data_acked as u32);
        self.snd_una = ack;
        if self.loss_high.is_some_and(|h| at_or_after(ack, h)) {
            self.loss_high = None;
        }
        if after(self.snd_una, self.snd_nxt) {
            self.snd_nxt = self.snd_una;
        }
        self.settle_probe(ack, false, dsack);
        if self.snd_una == self.snd_max {
            self.rto_at = None;
            self.probe_at = None;
            self.all_acked_at = now;
        } else {
            self.rto_at = Some(now + self.rtte.rto());
            self.schedule_probe(now, true);
        }
        self.reduce_by_prr(delivered);
        let fin_acked = self
            .fin_seq
            .is_some_and(|f| at_or_after(ack, f.wrapping_add(1)));
        if fin_acked {
            match self.state {
                State::FinWait1 => self.state = State::FinWait2,
                State::Closing => self.enter_time_wait(now),
                State::LastAck => self.enter_closed(),
                _ => {}
            }
        }
    }

    fn grow_cwnd(&mut self, now: Duration, ack: u32, acked: u32, in_flight_before: u32) {
        let mss = self.mss as u32;
        // KA9Q clears RETRAN on every ACK of new data, after deciding not to grow on it.
        let after_timeout = std::mem::take(&mut self.retran);
        let Some(mut cwnd) = self.cwnd else {
            return;
        };
        if acked == 0 {
            return;
        }
        if let Some(recover) = self.recover
            && self.sacking()
        {
            // SACK recovery: the window stays at ssthresh and the scoreboard says what to
            // resend (RFC 6675 5); it ends once everything sent before it is acknowledged.
            if at_or_after(ack, recover) {
                self.recover = None;
                self.prr = None;
                self.cwnd = Some(self.ssthresh);
            }
            return;
        }
        if self.recover.is_some() && self.cfg.reno == RenoRules::Ka9q {
            // KA9Q (`update`): the ACKs have "gotten unstuck", whatever they acknowledge;
            // deflate, and grow from there as for any ACK.
            self.recover = None;
            cwnd = cwnd.min(self.ssthresh);
            self.cwnd = Some(cwnd);
        }
        if let Some(recover) = self.recover {
            if at_or_after(ack, recover) {
                // Full acknowledgement: leave fast recovery, deflate (RFC 6582 3.2 (3)).
                self.recover = None;
                self.cwnd = Some(self.ssthresh);
            } else {
                // Partial acknowledgement (NewReno): resend the next hole at once, deflate by
                // what was acknowledged.
                self.cwnd = Some(cwnd.saturating_sub(acked).saturating_add(mss));
                self.snd_una = ack;
                self.retransmit_first(now);
            }
            return;
        }
        let grown = match self.cfg.congestion {
            // JNOS and RFC 5681: every ACK of new data, slow start then avoidance, never
            // beyond what the peer offers.
            Congestion::Reno { .. } => {
                let g = if cwnd < self.ssthresh {
                    cwnd.saturating_add(acked.min(mss))
                } else {
                    cwnd.saturating_add((mss * mss / cwnd.max(1)).max(1))
                };
                match self.cfg.reno {
                    // KA9Q (`update`): not on the ACK a timeout's resend drew, and only while
                    // below the window the peer offers now, up to it.
                    RenoRules::Ka9q if after_timeout || cwnd >= self.snd_wnd => cwnd,
                    RenoRules::Ka9q => g.min(self.snd_wnd),
                    RenoRules::NewReno => g.min(self.max_snd_wnd.max(mss)),
                }
            }
            // Linux counts segments and grows only while the window is in use
            // (`tcp_is_cwnd_limited`), as `tcp/gate.rs` does on smoltcp.
            _ if !self.cwnd_in_use(in_flight_before) => cwnd,
            Congestion::Cubic { .. } => self.grow_cubic(now, ack, cwnd, acked),
            // Linux's Reno of 2012: one segment per ACK while the window is at most ssthresh
            // (`tcp_slow_start` before 3.13, whose count is the window itself), then one per
            // window's worth of ACKs (`tcp_cong_avoid_ai` before 4.1), whatever each ACK
            // acknowledged.
            Congestion::LinuxReno {
                era: CubicEra::Linux2639,
                ..
            } => {
                if cwnd <= self.ssthresh {
                    cwnd.saturating_add(mss)
                } else {
                    self.cwnd_cnt = self.cwnd_cnt.saturating_add(1);
                    if self.cwnd_cnt >= cwnd / mss.max(1) {
                        self.cwnd_cnt = 0;
                        cwnd.saturating_add(mss)
                    } else {
                        cwnd
                    }
                }
            }
            // Linux's Reno from 4.1: slow start by what was acknowledged, up to ssthresh; the
            // rest counted towards avoidance's one segment per window acknowledged.
            Congestion::LinuxReno { .. } => {
                let slow = if cwnd < self.ssthresh {
                    acked.min(self.ssthresh - cwnd)
                } else {
                    0
                };
                let window = cwnd.saturating_add(slow).max(1);
                self.cwnd_cnt = self.cwnd_cnt.saturating_add(acked - slow);
                let steps = self.cwnd_cnt / window;
                self.cwnd_cnt -= steps * window;
                window.saturating_add(steps.saturating_mul(mss))
            }
            _ => cwnd.saturating_add(acked.min(mss)),
        };
        self.cwnd = Some(grown);
        self.ka9q_clamp();
    }

    /// KA9Q (`update`, after every ACK of new data and every duplicate it counts): "Clamp the
    /// congestion window at the amount currently on the send queue, with a minimum of one
    /// packet", so that a window grown while the queue was short is not sent as one burst
    /// later. The queue is `sndcnt`, the bytes not yet acknowledged or not yet sent, the FIN
    /// counted as one, taken before the ACK's bytes come off it (the clamp comes first).
    fn ka9q_clamp(&mut self) {
        if self.cfg.reno != RenoRules::Ka9q
            || !matches!(self.cfg.congestion, Congestion::Reno { .. })
        {
            return;
        }
        let fin = u32::from(self.fin_queued);
        let queued = u32::try_from(self.tx.len())
            .unwrap_or(u32::MAX)
            .saturating_add(fin);
        let mss = self.mss as u32;
        if let Some(c) = self.cwnd.as_mut() {
            *c = (*c).min(queued).max(mss);
        }
    }

    /// CUBIC's growth for an ACK of `acked` new bytes (`tcp/cubic.rs`), in whole segments as
    /// Linux counts the window.
    fn grow_cubic(&mut self, now: Duration, ack: u32, cwnd: u32, acked: u32) -> u32 {
        let mss = self.mss as u32;
        let (ssthresh, snd_nxt) = (self.ssthresh / mss, self.snd_nxt);
        let Some(c) = self.cubic.as_mut() else {
            return cwnd.saturating_add(acked.min(mss));
        };
        let grown = c.grow(
            now,
            (ack, snd_nxt),
            ((cwnd / mss).max(1), ssthresh),
            acked.div_ceil(mss),
            &mut self.cwnd_cnt,
        );
        grown.saturating_mul(mss)
    }

    /// An RTT sample of an ACK of `acked` new bytes for CUBIC: its smallest RTT, and HyStart,
    /// which may end slow start here (ssthresh set to the window, as Linux does).
    fn cubic_sample(&mut self, now: Duration, rtt: Duration, acked: u32) {
        let mss = self.mss as u32;
        let open = self.recover.is_none() && !self.board.in_loss();
        let (Some(c), Some(cwnd)) = (self.cubic.as_mut(), self.cwnd) else {
            return;
        };
        let window = ((cwnd / mss).max(1), self.ssthresh / mss);
        if c.sample(now, rtt, window, acked.div_ceil(mss), open) {
            self.ssthresh = cwnd;
        }
    }

    /// The slow-start threshold after a loss seen now: CUBIC's 0.7 of the window, or the Reno
    /// family's ([`Tcb::reno_ssthresh`]).
    fn loss_ssthresh(&mut self) -> u32 {
        self.cubic_loss().unwrap_or_else(|| self.reno_ssthresh())
    }

    /// CUBIC's slow-start threshold after a loss seen now (`None` for the Reno family, whose
    /// callers keep their own rule): 0.7 of the window.
    fn cubic_loss(&mut self) -> Option<u32> {
        let mss = self.mss as u32;
        let cwnd = self.cwnd?;
        let c = self.cubic.as_mut()?;
        Some(c.loss((cwnd / mss).max(1)).saturating_mul(mss))
    }

    /// Linux's SACK recovery sets the window on every ACK by proportional rate reduction
    /// (RFC 6937, `tcp_cwnd_reduction`): while more than ssthresh is in the network, as much
    /// goes out as ssthresh / the window before the cut of what was `delivered` since recovery
    /// began; below it, no more than what was delivered plus a segment (the slow-start
    /// reduction bound), up to ssthresh. RFC 6675 alone would send nothing until half the
    /// window had left the network, then everything at once.
    fn reduce_by_prr(&mut self, delivered: u32) {
        let Some(mut prr) = self.prr else {
            return;
        };
        if self.recover.is_none() {
            self.prr = None;
            return;
        }
        if delivered == 0 {
            // An ACK that delivered nothing leaves the window as it was (Linux returns early).
            return;
        }
        let mss = self.mss as u32;
        prr.delivered = prr.delivered.saturating_add(delivered);
        self.prr = Some(prr);
        // In segments, as Linux counts (a share of a segment would go as a short one).
        let segs = |bytes: u32| u64::from(bytes.div_ceil(mss));
        let pipe = self.board.pipe(self.snd_max, mss);
        let (in_flight, ssthresh) = (segs(pipe), u64::from(self.ssthresh / mss));
        let (done, out) = (segs(prr.delivered), segs(prr.out));
        let sndcnt = if in_flight > ssthresh {
            (done * ssthresh)
                .div_ceil(segs(prr.prior_cwnd).max(1))
                .saturating_sub(out)
        } else {
            (ssthresh - in_flight).min(done.saturating_sub(out).max(segs(delivered)) + 1)
        };
        let sndcnt = u32::try_from(sndcnt).unwrap_or(u32::MAX);
        self.cwnd = Some(pipe.saturating_add(sndcnt.saturating_mul(mss)));
    }

    fn duplicate_ack(&mut self, now: Duration) {
        if !self.cfg.congestion.is_skywave_reno() {
            return;
        }
        self.dup_acks += 1;
        let mss = self.mss as u32;
        if self.sacking() {
            // RFC 6675 5: recovery on the third duplicate, or once the first hole is lost by
            // what is SACKed above it; not while a timeout's loss is being repaired (Linux
            // stays in its loss state).
            let lost = self.dup_acks >= DUP_ACKS || self.board.is_lost(self.snd_una, mss);
            if lost && self.recover.is_none() && !self.board.in_loss() {
                let prior_cwnd = self.cwnd.unwrap_or(mss);
                self.ssthresh = self.loss_ssthresh();
                self.cwnd = Some(self.ssthresh);
                if self.cfg.congestion.is_linux() {
                    // Linux: only the first hole now; the rest as proportional rate reduction
                    // lets them go ([`Tcb::reduce_by_prr`], once this ACK is counted).
                    self.prr = Some(Prr {
                        delivered: 0,
                        out: 0,
                        prior_cwnd,
                    });
                    self.cwnd = Some(self.board.pipe(self.snd_max, mss));
                }
                self.cwnd_cnt = 0;
                self.recover = Some(self.snd_max);
                self.cwnd_stamp = now;
                self.probe_at = None;
                self.board.enter_recovery();
                // (4.3): the first hole goes at once, whatever the pipe.
                self.resend_lost(now, true);
            }
            return;
        }
        if self.dup_acks == DUP_ACKS && self.recover.is_none() && self.loss_high.is_none() {
            self.ssthresh = self.loss_ssthresh();
            self.cwnd = Some(self.ssthresh + DUP_ACKS * mss);
            self.cwnd_cnt = 0;
            self.recover = Some(self.snd_max);
            self.cwnd_stamp = now;
            self.retransmit_first(now);
        } else if self.dup_acks > DUP_ACKS
            && let Some(c) = self.cwnd.as_mut()
        {
            // Each further duplicate is a segment that left the network.
            *c = c.saturating_add(mss);
        }
        self.ka9q_clamp();
    }

    /// The handshake is done. Linux (`tcp_init_transfer`) starts from one segment if the SYN or
    /// SYN-ACK went more than once, as RFC 5681 3.1 asks of any resent SYN (its 1 s initial RTO
    /// makes one resend common, so Linux lets one pass), unless the segment that completed the
    /// handshake echoed the first one's timestamp, which shows every resend spurious
    /// (`tcp_try_undo_spurious_syn`, Linux 5.2 on, [`TcbConfig::spurious_syn_undo`]): on a
    /// 5066 link, whose round trip is seconds, the usual case.
    fn opened(&mut self) {
        self.state = State::Established;
        // Linux starts the idle clock here (`tcp_finish_connect`, and `tcp_rcv_state_process`
        // for the passive end), and the window's.
        self.lsndtime = self.clock;
        self.cwnd_stamp = self.clock;
        if let Congestion::Cubic { era, .. } = self.cfg.congestion {
            self.cubic = Some(Cubic::new(era, self.clock, self.snd_nxt));
        }
        if self.cfg.linux_acks {
            let window = self.rcv_adv.wrapping_sub(self.rcv_nxt) as usize;
            self.acks = Some(LinuxAcks::new(
                self.clock,
                usize::from(self.cfg.mss),
                window.max(self.offer_rx().min(65_535)),
                self.ts_ok,
            ));
        }
        // `tcp_init_buffer_space`: the send buffer for the first flight.
        let (clamp, cwnd) = (self.mss_clamp(), self.cwnd_segments());
        if let Some(b) = self.sndbuf.as_mut() {
            b.opened(clamp, cwnd.unwrap_or(0));
        }
        // Linux sets it here too, after the handshake, in segments of the MSS agreed.
        if let Some(n) = self.cfg.initial_ssthresh
            && self.cwnd.is_some()
        {
            self.ssthresh = u32::from(n.max(2)).saturating_mul(self.mss as u32);
        }
        if self.cfg.timestamps
            && self.syn_resends > 1
            && !(self.cfg.spurious_syn_undo && self.syn_echoed)
            && let Some(c) = self.cwnd.as_mut()
        {
            *c = self.mss as u32;
        }
    }

    /// The larger of the MSS agreed and the one in use (Linux's `max(rx_opt.mss_clamp,
    /// mss_cache)`): the segment size before the timestamps' 12 bytes come out of it.
    fn mss_clamp(&self) -> usize {
        self.mss + if self.ts_ok { 12 } else { 0 }
    }

    /// The congestion window in whole segments (`None`: no congestion window).
    fn cwnd_segments(&self) -> Option<usize> {
        self.cwnd.map(|c| c as usize / self.mss.max(1))
    }

    /// `tcp_check_space`, after the output an ACK let out: Linux's send buffer grows if the
    /// ACK freed room while the writer waits and the window has room, and the window's idle
    /// clock restarts with it (`tcp_new_space`).
    fn check_space(&mut self) {
        let waits = self.writer_blocked;
        let Some(counting) = self.sndbuf.as_mut().and_then(|b| b.check_due(waits)) else {
            return;
        };
        // Counted only when a check is due: the pipe walks the SACK scoreboard.
        let out = match counting {
            Counting::Unacknowledged => self.snd_max.wrapping_sub(self.snd_una),
            Counting::InFlight => self.in_flight(),
        };
        let out = (out as usize).div_ceil(self.mss.max(1));
        let (clamp, cwnd) = (self.mss_clamp(), self.cwnd_segments());
        if let Some(b) = self.sndbuf.as_mut()
            && b.expand_if_room(clamp, cwnd, out)
        {
            self.cwnd_stamp = self.clock;
        }
    }

    /// Resends the oldest unacknowledged segment alone (fast retransmit): at most a segment,
    /// and never beyond what was sent (a head the window had cut short goes again as short as
    /// it went; more would be new data the peer acknowledges past `snd_max`).
    fn retransmit_first(&mut self, now: Duration) {
        if self.snd_una == self.snd_max {
            return;
        }
        self.resend(self.snd_una, self.snd_max);
        self.rto_at = Some(now + self.rtte.rto());
    }

    /// Resends from `start` what was sent up to `end`, a segment at most: its data, and the
    /// FIN if that falls at the segment's end (the FIN takes the last sequence number and no
    /// buffer byte). Nothing resent is timed (Karn). Returns where the resend ends, the FIN
    /// counted.
    fn resend(&mut self, start: u32, end: u32) -> u32 {
        let data_end = match self.fin_seq {
            Some(f) if after(end, f) => f,
            _ => end,
        };
        let len = data_end.wrapping_sub(start).min(self.mss as u32);
        let fin = self.fin_seq == Some(start.wrapping_add(len));
        let control = if fin {
            TcpControl::Fin
        } else {
            TcpControl::None
        };
        let offset = start.wrapping_sub(self.buf_seq) as usize;
        self.emit(control, start, true, offset, len as usize);
        self.rtte.timed = None;
        start.wrapping_add(len + u32::from(fin))
    }

    /// The Reno family's `ssthresh` after a loss, by its [`RenoRules`].
    fn reno_ssthresh(&self) -> u32 {
        match self.cfg.reno {
            RenoRules::NewReno => self.halved_flight(),
            RenoRules::Ka9q => self.halved_window(),
        }
    }

    /// `ssthresh` after a loss: half the flight, at least two segments (RFC 5681 (4)).
    fn halved_flight(&self) -> u32 {
        let flight = self.snd_max.wrapping_sub(self.snd_una);
        (flight / 2).max(2 * self.mss as u32)
    }

    /// KA9Q's `ssthresh` after a loss: half the congestion window, at least one segment. After
    /// a second timeout in a row the window is one segment, and so is ssthresh.
    fn halved_window(&self) -> u32 {
        let mss = self.mss as u32;
        (self.cwnd.unwrap_or(mss) / 2).max(mss)
    }

    /// The data (and FIN) of an acceptable segment; `(header, psh)`: its TCP header's length
    /// and whether it was pushed, which Linux's delayed-ACK engine reads.
    fn process_data(
        &mut self,
        now: Duration,
        seq: u32,
        payload: &[u8],
        fin: bool,
        (header, psh): (usize, bool),
    ) {
        let receiving = matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        );
        if !receiving {
            if !payload.is_empty() || fin {
                self.ack_now = true;
            }
            return;
        }
        let mut in_order = false;
        // Linux's `tcp_rcv_rtt_measure_ts`: a full-sized segment's echo is the receiver's
        // round-trip sample, which paces its buffer's autotuning.
        if payload.len() >= self.mss
            && let Some(echo) = self.seg_echo
        {
            let ms = self.tsval().wrapping_sub(echo);
            if let Some(r) = self.rcvbuf.as_mut() {
                r.rtt_sample(Duration::from_millis(u64::from(ms)));
            }
        }
        if !payload.is_empty() {
            // Trim what was already received and what lies beyond the window.
            let skip = if after(self.rcv_nxt, seq) {
                self.rcv_nxt.wrapping_sub(seq) as usize
            } else {
                0
            };
            if skip > 0 && self.sack_ok {
                // Data received before: the next ACK says so first (D-SACK, RFC 2883).
                let dup = skip.min(payload.len()) as u32;
                self.dsack_next = Some((seq, seq.wrapping_add(dup)));
            }
            let start = seq.wrapping_add(skip as u32);
            let room = self.rcv_adv.wrapping_sub(start) as usize;
            let end = payload.len().min(skip + room.min(self.free_rx()));
            if skip < end {
                let data = &payload[skip..end];
                if start == self.rcv_nxt {
                    // The window last advertised, from the last acknowledged byte (Linux's
                    // `rcv_wnd`, which sizes the quick-ACK budget).
                    let window = self.rcv_adv.wrapping_sub(self.rcv_nxt) as usize + self.unacked_rx;
                    let rto = self.rtte.rto();
                    if let Some(a) = self.acks.as_mut() {
                        a.data_received(now, data.len(), header, psh, window, rto);
                    }
                    self.rx.extend(data);
                    self.rcv_nxt = self.rcv_nxt.wrapping_add(data.len() as u32);
                    self.unacked_rx += data.len();
                    if let Some(r) = self.rcvbuf.as_mut() {
                        r.data_received(data.len(), self.rx.len());
                    }
                    in_order = true;
                    let filled = self.pull_out_of_order();
                    if filled {
                        self.ack_now = true;
                    }
                } else {
                    // Bounded: out-of-order data never holds more than the receive buffer,
                    // however the peer overlaps its segments.
                    let held: usize = self.ooo.values().map(Vec::len).sum();
                    if let Some(have) = self.ooo.get(&start) {
                        if self.sack_ok {
                            let dup = have.len().min(data.len()) as u32;
                            self.dsack_next = Some((start, start.wrapping_add(dup)));
                        }
                    } else if held + data.len() <= self.rx_capacity() {
                        self.ooo.insert(start, data.to_vec());
                        self.sack_recent.retain(|&s| s != start);
                        self.sack_recent.insert(0, start);
                        self.sack_recent.truncate(2 * sack::MAX_BLOCKS);
                    }
                    self.ack_at_once();
                }
            } else {
                // A duplicate, or nothing fits the window.
                self.ack_at_once();
            }
        }
        let fin_seq = seq.wrapping_add(payload.len() as u32);
        if fin && fin_seq == self.rcv_nxt {
            self.rcv_nxt = self.rcv_nxt.wrapping_add(1);
            self.ack_now = true;
            match self.state {
                State::Established => self.state = State::CloseWait,
                State::FinWait1 => {
                    let ours_acked = self
                        .fin_seq
                        .is_some_and(|f| at_or_after(self.snd_una, f.wrapping_add(1)));
                    if ours_acked {
                        self.enter_time_wait(now);
                    } else {
                        self.state = State::Closing;
                    }
                }
                State::FinWait2 => self.enter_time_wait(now),
                _ => {}
            }
        } else if fin {
            self.ack_now = true;
        }
        if in_order
            && !self.ack_now
            && let Some(a) = self.acks.as_ref()
        {
            if a.ack_at_once(self.unacked_rx) {
                self.ack_now = true;
            } else {
                let srtt = self
                    .rtte
                    .srtt
                    .and_then(|(s, _)| Duration::try_from_secs_f64(s).ok());
                match a.delayed_ack_at(now, self.ack_at, srtt) {
                    Some(t) => self.ack_at = Some(t),
                    None => self.ack_now = true,
                }
            }
        } else if in_order && !self.ack_now {
            match self.cfg.ack_delay {
                None => self.ack_now = true,
                Some(_) if self.unacked_rx >= 2 * self.mss => self.ack_now = true,
                Some(d) => {
                    if self.ack_at.is_none() {
                        self.ack_at = Some(now + d);
                    }
                }
            }
        }
    }

    /// Moves out-of-order data that now follows `rcv_nxt` into the receive buffer; true if any.
    fn pull_out_of_order(&mut self) -> bool {
        let mut moved = false;
        while let Some((&start, _)) = self.ooo.iter().next() {
            if after(start, self.rcv_nxt) {
                break;
            }
            let Some(data) = self.ooo.remove(&start) else {
                break;
            };
            let skip = self.rcv_nxt.wrapping_sub(start) as usize;
            if skip < data.len() {
                let take = (data.len() - skip).min(self.free_rx());
                self.rx.extend(&data[skip..skip + take]);
                self.rcv_nxt = self.rcv_nxt.wrapping_add(take as u32);
                self.unacked_rx += take;
                moved = true;
            }
        }
        moved
    }

    fn enter_time_wait(&mut self, now: Duration) {
        self.state = State::TimeWait;
        self.rto_at = None;
        self.probe_at = None;
        self.time_wait_at = Some(now + TIME_WAIT);
    }

    fn send_syn(&mut self, now: Duration) {
        let control = TcpControl::Syn;
        let ack = self.state == State::SynReceived;
        if self.syn_tsval.is_none() && self.cfg.timestamps {
            self.syn_tsval = Some(self.tsval());
        }
        self.emit(control, self.cfg.iss, ack, 0, 0);
        let first = self.snd_max == self.cfg.iss;
        self.snd_nxt = self.cfg.iss.wrapping_add(1);
        self.snd_max = self.snd_nxt;
        if first {
            self.rtte.timed = Some((self.snd_nxt, now));
        }
        self.rto_at = Some(now + self.rtte.rto());
    }

    /// Runs the timers due at `now` and sends what the windows allow.
    pub fn poll(&mut self, now: Duration) {
        self.clock = self.clock.max(now);
        if self.time_wait_at.is_some_and(|t| now >= t) {
            self.enter_closed();
            return;
        }
        if self.state == State::SynSent && self.snd_max == self.cfg.iss {
            self.send_syn(now);
        }
        if self.probe_at.is_some_and(|t| now >= t) {
            self.send_probe(now);
        }
        if self.rto_at.is_some_and(|t| now >= t) {
            self.timeout(now);
        }
        self.output(now);
        self.check_space();
        if self.ack_at.is_some_and(|t| now >= t) {
            let rto = self.rtte.rto();
            if let Some(a) = self.acks.as_mut() {
                a.timer_fired(rto);
            }
            self.ack_now = true;
        }
        if self.ack_now {
            self.ack_now = false;
            self.ack_at_once();
        }
    }

    fn timeout(&mut self, now: Duration) {
        self.rto_at = None;
        self.probe_at = None;
        // Linux 6.5 on: the first timeouts of a SYN leave the back-off alone
        // (`tcp_retransmit_timer`, `tcp_syn_linear_timeouts`).
        let linear = self.state == State::SynSent
            && self.syn_resends < u32::from(self.cfg.syn_linear_timeouts);
        if !linear {
            self.rtte.backoff = (self.rtte.backoff + 1).min(MAX_BACKOFF);
        }
        self.rtte.timed = None;
        if matches!(self.state, State::Closed | State::Listen | State::TimeWait) {
            return;
        }
        let mss = self.mss as u32;
        // Linux's persist timer (`tcp_probe_timer`, `tcp_write_wakeup`): nothing is in
        // flight, so it cuts no window and counts no retransmission. Backed off as a
        // retransmission is.
        if self.probing {
            if self.unsent() > 0 && self.snd_wnd == 0 {
                // `tcp_xmit_probe_skb`: no data, the sequence number before `snd_una`, which
                // the peer answers with an ACK that says whether the window opened.
                self.emit(TcpControl::None, self.snd_una.wrapping_sub(1), true, 0, 0);
                self.probes_out = self.probes_out.saturating_add(1);
                self.rto_at = Some(now + self.rtte.rto());
                return;
            }
            // Open but too small for sender SWS avoidance: what fits goes now as new data
            // (RFC 9293 3.8.6.2.1's override), which also recovers a lost window update,
            // and the back-off goes with the probing (`tcp_send_probe0`).
            self.probing = false;
            self.rtte.backoff = 0;
            self.wakeup = self.unsent() > 0;
            return;
        }
        self.timeouts += 1;
        let opening = matches!(self.state, State::SynSent | State::SynReceived);
        if opening {
            self.syn_resends += 1;
        } else if self.ts_ok && self.undo.is_none() {
            self.undo = Some(Undo {
                cwnd: self.cwnd,
                ssthresh: self.ssthresh,
                tsval: self.tsval(),
            });
        }
        // Reno cuts on every timeout (RFC 5681 (4) and 3.1: half the flight, at least two
        // segments, and one segment after; a lost SYN leaves the first window at one segment
        // too). With timestamps any window is cut, as Linux enters its loss state, because the
        // first ACK after shows whether to undo it; a lost SYN then follows Linux's rule
        // (`opened`). The segment window without timestamps is never cut (see `tcp/gate.rs`).
        let cut = match self.cfg.congestion {
            Congestion::Reno { .. } | Congestion::LinuxReno { .. } | Congestion::Cubic { .. } => {
                !(opening && self.cfg.timestamps)
            }
            Congestion::Segments { .. } => self.ts_ok && !opening,
            Congestion::Unlimited | Congestion::SmoltcpReno => false,
        };
        if cut {
            if self.cubic.is_none() {
                self.ssthresh = self.reno_ssthresh();
                self.retran = self.cfg.reno == RenoRules::Ka9q;
            } else if self.rtte.backoff == 1 && self.recover.is_none() {
                // Linux recomputes it on the first timeout of an episode outside a recovery
                // (`tcp_enter_loss`), not on each back-off.
                self.ssthresh = self.loss_ssthresh();
            }
            // And starts CUBIC afresh on every timeout.
            let snd_nxt = self.snd_nxt;
            if let Some(c) = self.cubic.as_mut() {
                c.timeout(now, snd_nxt);
            }
            self.cwnd = Some(mss);
            self.cwnd_cnt = 0;
            self.cwnd_stamp = now;
            self.recover = None;
            self.prr = None;
            self.dup_acks = 0;
            // KA9Q keeps counting duplicates through a timeout's go-back-N; RFC 6582 and
            // Linux do not start a fast retransmit for them until the timeout's flight is
            // acknowledged.
            if self.cfg.reno == RenoRules::NewReno {
                self.loss_high = Some(self.snd_max);
            }
        }
        if opening {
            let ack = self.state == State::SynReceived;
            self.emit(TcpControl::Syn, self.cfg.iss, ack, 0, 0);
            self.rto_at = Some(now + self.rtte.rto());
            return;
        }
        if self.sacking() && self.snd_wnd > 0 {
            // Every hole is lost and is resent as the window allows, what the peer SACKed
            // is not (Linux's `tcp_enter_loss`; RFC 6675 5.1).
            self.board.enter_loss(self.snd_max);
            return;
        }
        // Go-back-N from the oldest unacknowledged byte (JNOS, BSD, smoltcp).
        self.snd_nxt = self.snd_una;
        if self.snd_wnd == 0 && self.snd_una != self.snd_max {
            // Nothing fits the closed window: resend the first byte (or the FIN) as a probe.
            let len = usize::from(!self.tx.is_empty());
            let fin = len == 0 && self.fin_seq == Some(self.snd_una);
            let control = if fin {
                TcpControl::Fin
            } else {
                TcpControl::None
            };
            self.emit(control, self.snd_una, true, 0, len);
            self.snd_nxt = self.snd_una.wrapping_add((len + usize::from(fin)) as u32);
            self.rto_at = Some(now + self.rtte.rto());
        }
    }

    /// Sends new or resent segments as far as the windows and Nagle allow.
    fn output(&mut self, now: Duration) {
        let wakeup = std::mem::take(&mut self.wakeup);
        if !self.may_send_data() {
            return;
        }
        if self.sacking() {
            self.resend_lost(now, false);
        }
        let sent_before = self.snd_max;
        loop {
            let flight = self.snd_nxt.wrapping_sub(self.snd_una);
            // With SACK the congestion window limits RFC 6675's pipe, the bytes still in the
            // network; the peer's window limits the sequence space as always.
            let pipe = if self.sacking() {
                self.board.pipe(self.snd_max, self.mss as u32)
            } else {
                flight
            };
            let usable = match self.cwnd {
                Some(c) => c
                    .saturating_sub(pipe)
                    .min(self.snd_wnd.saturating_sub(flight)),
                None => self.snd_wnd.saturating_sub(flight),
            } as usize;
            // JNOS probes a closed window at once with one byte of data when nothing is in
            // flight (KA9Q's `tcp_output`: "closed window probe"); its timeouts resend it.
            let usable = if usable == 0
                && flight == 0
                && self.snd_wnd == 0
                && self.cfg.window_rules == WindowRules::Jnos
            {
                1
            } else {
                usable
            };
            let offset = self.snd_nxt.wrapping_sub(self.buf_seq) as usize;
            let unsent = self.tx.len().saturating_sub(offset);
            let len = unsent.min(self.mss).min(usable);
            // The FIN goes with the last byte, or alone once every byte is sent (a bare FIN
            // does not wait for window).
            let fin_due = self.fin_queued
                && len == unsent
                && self
                    .fin_seq
                    .is_none_or(|f| f == self.snd_nxt.wrapping_add(len as u32));
            if len == 0 && !fin_due {
                if unsent > 0 {
                    self.persist(now, flight);
                }
                break;
            }
            let resend = after(self.snd_max, self.snd_nxt);
            if len > 0 && len < self.mss && !fin_due && !resend {
                let window_limited = len < unsent;
                match self.cfg.window_rules {
                    // Sender SWS avoidance (RFC 9293 3.8.6.2.1): a window-limited short
                    // segment waits unless it is half the largest window offered.
                    WindowRules::Linux => {
                        if window_limited && (len as u32) < self.max_snd_wnd / 2 && !wakeup {
                            self.persist(now, flight);
                            break;
                        }
                        if !window_limited && self.nagle_holds() {
                            break;
                        }
                    }
                    // JNOS: Nagle's rule alone, for any short segment; one the window cut
                    // short goes at once if nothing is in flight.
                    WindowRules::Jnos => {
                        if self.nagle_holds() {
                            break;
                        }
                    }
                }
            }
            let control = if fin_due {
                TcpControl::Fin
            } else if len > 0 && len == unsent {
                TcpControl::Psh
            } else {
                TcpControl::None
            };
            let seq = self.snd_nxt;
            self.emit(control, seq, true, offset, len);
            let end = seq.wrapping_add(len as u32 + u32::from(fin_due));
            if len > 0 && len < self.mss {
                self.snd_sml = end;
            }
            if fin_due && self.fin_seq.is_none() {
                self.fin_seq = Some(seq.wrapping_add(len as u32));
                match self.state {
                    State::Established => self.state = State::FinWait1,
                    State::CloseWait => self.state = State::LastAck,
                    _ => {}
                }
            }
            self.snd_nxt = end;
            if after(end, self.snd_max) {
                self.snd_max = end;
            }
            if resend {
                // Karn: nothing resent is timed.
                self.rtte.timed = None;
            } else if self.rtte.timed.is_none() {
                self.rtte.timed = Some((end, now));
            }
            if self.rto_at.is_none() || self.probing {
                self.probing = false;
                self.rto_at = Some(now + self.rtte.rto());
            }
            if fin_due {
                break;
            }
        }
        // Linux's `tcp_write_xmit` schedules the probe from new data and validates the
        // window (its probe timer's `tcp_write_wakeup` does neither).
        let sent_new = after(self.snd_max, sent_before);
        if sent_new && !wakeup {
            self.schedule_probe(now, false);
        }
        if !wakeup {
            self.validate_cwnd(now, sent_new);
        }
    }

    /// The state lets this end send data (or resend it, or its FIN).
    fn may_send_data(&self) -> bool {
        matches!(
            self.state,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        )
    }

    /// Arms the tail-loss probe (Linux's `tcp_schedule_loss_probe`, RFC 8985 7.2) while data
    /// is in flight and no recovery is under way: two smoothed round trips from now, and the
    /// delayed-ACK allowance (Linux's TCP_RTO_MIN, 200 ms) more with one segment in flight, or
    /// 2 ms with more; 1 s before any RTT sample. Never after the retransmission timeout:
    /// `advancing`, a whole RTO from now (an ACK just moved the timer), else when the running
    /// RTO fires.
    fn schedule_probe(&mut self, now: Duration, advancing: bool) {
        self.probe_at = None;
        let open = self.recover.is_none() && !self.board.in_loss() && !self.probing;
        if !(self.cfg.tlp && self.sacking() && open && self.snd_una != self.snd_max) {
            return;
        }
        let flight = self.snd_max.wrapping_sub(self.snd_una) as usize;
        let pto = match self.rtte.srtt {
            Some((srtt, _)) => {
                let allowance = if flight <= self.mss { 0.2 } else { 0.002 };
                Duration::try_from_secs_f64(2.0 * srtt + allowance).unwrap_or(self.cfg.rto.max)
            }
            None => Duration::from_secs(1),
        };
        let rto_left = if advancing {
            Some(self.rtte.rto())
        } else {
            self.rto_at.map(|t| t.saturating_sub(now))
        };
        let wait = rto_left
            .filter(|d| !d.is_zero())
            .map_or(pto, |d| pto.min(d));
        self.probe_at = Some(now + wait);
    }

    /// The probe (Linux's `tcp_send_loss_probe`, RFC 8985 7.3): one segment whatever the
    /// congestion window, new data if the peer's window takes some, else the last segment
    /// sent again (the last MSS of it, and the FIN if that went); one per episode, until an
    /// ACK settles it ([`Tcb::settle_probe`]). The retransmission timer then runs afresh.
    fn send_probe(&mut self, now: Duration) {
        self.probe_at = None;
        if !self.may_send_data() {
            return;
        }
        if self.tlp_high.is_none() && self.snd_una != self.snd_max {
            let offset = self.snd_max.wrapping_sub(self.buf_seq) as usize;
            let unsent = self.unsent();
            let window_end = self.snd_una.wrapping_add(self.snd_wnd);
            let room = if after(window_end, self.snd_max) {
                window_end.wrapping_sub(self.snd_max) as usize
            } else {
                0
            };
            let new = unsent.min(self.mss).min(room);
            let resent = if new > 0 && self.fin_seq.is_none() {
                let seq = self.snd_max;
                let control = if new == unsent {
                    TcpControl::Psh
                } else {
                    TcpControl::None
                };
                self.emit(control, seq, true, offset, new);
                self.snd_max = seq.wrapping_add(new as u32);
                self.snd_nxt = self.snd_max;
                if self.rtte.timed.is_none() {
                    self.rtte.timed = Some((self.snd_max, now));
                }
                false
            } else {
                // The last segment: the last MSS of the data sent, and the FIN if it went.
                let fin = self.fin_seq.is_some_and(|f| after(self.snd_max, f));
                let data_end = self.snd_max.wrapping_sub(u32::from(fin));
                let len = data_end.wrapping_sub(self.snd_una).min(self.mss as u32);
                self.resend(data_end.wrapping_sub(len), self.snd_max);
                true
            };
            self.tlp_high = Some((self.snd_max, resent));
            self.tlp_probes += 1;
        }
        self.rto_at = Some(now + self.rtte.rto());
    }

    /// What an ACK says of the probe in flight (Linux's `tcp_process_tlp_ack`, RFC 8985 7.4):
    /// nothing until it reaches the probe's `snd_max`; a probe of new data is then done; a
    /// resend is done if a D-SACK reports it (the original arrived too) or a pure duplicate
    /// ACK (`pure`) answers it; an ACK beyond shows the resend repaired a loss, and the window
    /// is halved as for a fast recovery (Linux's CWR).
    fn settle_probe(&mut self, ack: u32, pure: bool, dsack: Option<(u32, u32)>) {
        let Some((high, resent)) = self.tlp_high else {
            return;
        };
        if after(high, ack) {
            return;
        }
        let reported = dsack.is_some_and(|(_, end)| at_or_after(end, high));
        if !resent || reported {
            self.tlp_high = None;
        } else if after(ack, high) {
            let mss = self.mss as u32;
            if let Some(c) = self.cwnd {
                self.ssthresh = self.cubic_loss().unwrap_or((c / 2).max(2 * mss));
                self.cwnd = Some(self.ssthresh);
                self.cwnd_cnt = 0;
            }
            self.tlp_high = None;
            self.tlp_repairs += 1;
        } else if pure {
            self.tlp_high = None;
        }
    }

    /// SACK recovery: resends the lost holes (RFC 6675's NextSeg rule 1) while the congestion
    /// window has room beside the pipe, a segment at most each; `first`: the first goes
    /// whatever the pipe (entering fast recovery, RFC 6675 5 (4.3)). The timer restarts for
    /// a resend of the oldest byte, as Linux restarts it for the head of its queue.
    fn resend_lost(&mut self, now: Duration, mut first: bool) {
        let mss = self.mss as u32;
        while let Some((start, end)) = self.board.next_lost(self.snd_max, mss) {
            // What `resend` will send of the hole, for the window test.
            let data_end = match self.fin_seq {
                Some(f) if after(end, f) => f,
                _ => end,
            };
            let len = data_end.wrapping_sub(start).min(mss);
            let room = self
                .cwnd
                .unwrap_or(u32::MAX)
                .saturating_sub(self.board.pipe(self.snd_max, mss));
            if !first && room < len.max(1) {
                break;
            }
            first = false;
            let resent_to = self.resend(start, end);
            self.board.resent(resent_to);
            if start == self.snd_una || self.rto_at.is_none() {
                self.rto_at = Some(now + self.rtte.rto());
            }
        }
    }

    /// Selective acknowledgements drive loss recovery: both ends offered them and the
    /// congestion control is skywave's Reno (whose window the pipe is held to).
    fn sacking(&self) -> bool {
        self.sack_ok && self.cfg.congestion.is_skywave_reno() && self.cwnd.is_some()
    }

    /// Data waits for the peer's window with nothing in flight, so no ACK will come to move
    /// it: run the persist timer (Linux's; JNOS sends its probe at once, in `output`).
    fn persist(&mut self, now: Duration, flight: u32) {
        if flight == 0 && self.rto_at.is_none() {
            self.probing = true;
            self.rto_at = Some(now + self.rtte.rto());
        }
    }

    fn nagle_holds(&self) -> bool {
        let unacked = self.snd_max != self.snd_una;
        match self.cfg.nagle {
            Nagle::Off => false,
            Nagle::Classic => unacked,
            Nagle::Minshall => after(self.snd_sml, self.snd_una),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::cubic::CubicEra;

    const A: [u8; 4] = [10, 0, 0, 1];
    const B: [u8; 4] = [10, 0, 0, 2];

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// Linux's Reno as 4.1 on counts it, from `initial` segments.
    fn linux_reno(initial: u16) -> Congestion {
        Congestion::LinuxReno {
            initial,
            era: CubicEra::Linux41,
        }
    }

    /// JNOS as NTIA set it: MSS 216, window 1024, IRTT 60 s, maxwait 90 s, one-segment Reno
    /// (with RFC 5681's and NewReno's rules unless a test asks for KA9Q's, [`RenoRules`]).
    fn config(address: [u8; 4], congestion: Congestion) -> TcbConfig {
        TcbConfig {
            address,
            mss: 216,
            rx_buffer: 1024,
            rcv_tuning: None,
            snd_tuning: None,
            tx_buffer: 64 * 1024,
            iss: if address == A { 1000 } else { 0xFFFF_FF00 },
            rto: RtoTimers {
                initial: secs(60.0),
                min: secs(0.5),
                max: secs(90.0),
            },
            rtt_estimator: RttEstimator::Jnos,
            congestion,
            nagle: Nagle::Classic,
            ack_delay: None,
            linux_acks: false,
            timestamps: false,
            spurious_syn_undo: false,
            syn_linear_timeouts: 0,
            window_rules: WindowRules::Jnos,
            sack: false,
            tlp: false,
            initial_ssthresh: None,
            idle_restart: None,
            cwnd_limited: CwndLimited::Segment,
            reno: RenoRules::NewReno,
        }
    }

    /// End B's settings: `a`'s, with B's address and its own initial sequence number.
    fn peer(a: TcbConfig, iss: u32) -> TcbConfig {
        TcbConfig {
            address: B,
            iss,
            ..a
        }
    }

    /// `cfg` with Linux's RTO bounds (1 s initial, 200 ms minimum, 120 s maximum) and RFC 6298's
    /// estimator, which the Linux profiles ran until they had Linux's own.
    fn linux_timers(mut cfg: TcbConfig) -> TcbConfig {
        cfg.rtt_estimator = RttEstimator::Rfc6298;
        cfg.rto = RtoTimers {
            initial: secs(1.0),
            min: secs(0.2),
            max: secs(120.0),
        };
        cfg
    }

    /// A sent datagram: when, by which end, its payload length and flags.
    #[derive(Debug, Clone, Copy)]
    struct Sent {
        at: f64,
        by: usize,
        len: usize,
        syn: bool,
        seq: u32,
        ack: u32,
        /// Its SACK blocks.
        sack: Blocks,
    }

    /// Two endpoints joined by a link with a fixed one-way delay that loses the datagrams
    /// `lose` picks (by their order on the link).
    struct Pair {
        ends: [Tcb; 2],
        now: Duration,
        delay: Duration,
        in_flight: Vec<(Duration, usize, Vec<u8>)>,
        log: Vec<Sent>,
        /// What the application at end 1 read.
        read: Vec<u8>,
        /// The application at end 1 reads what arrives.
        reading: bool,
        /// What the application at end 1 writes back at once for each read, if anything (a
        /// server answering requests).
        reply: Option<Vec<u8>>,
    }

    impl Pair {
        fn new(a: TcbConfig, b: TcbConfig, delay: f64) -> Pair {
            let mut ends = [Tcb::new(a), Tcb::new(b)];
            assert!(ends[1].listen(25).is_ok());
            assert!(ends[0].connect(B, 25, 1025).is_ok());
            Pair {
                ends,
                now: Duration::ZERO,
                delay: secs(delay),
                in_flight: Vec::new(),
                log: Vec::new(),
                read: Vec::new(),
                reading: true,
                reply: None,
            }
        }

        /// Runs every event up to `until` (or until nothing is left), dropping the n-th
        /// datagram ever sent where `lose(n)`.
        fn run(&mut self, until: f64, lose: &dyn Fn(usize) -> bool) {
            self.run_with(until, &|n| (!lose(n)).then_some(0.0));
        }

        /// [`Pair::run`] where `fate(n)` is `None` for a lost datagram, else the seconds it is
        /// delayed beyond the link's delay (so datagrams can overtake each other).
        fn run_with(&mut self, until: f64, fate: &dyn Fn(usize) -> Option<f64>) {
            self.run_judging(until, &|n, _| fate(n));
        }

        /// [`Pair::run_with`] where the fate of the `n`-th datagram may also depend on the
        /// datagram and on the ones before it (`log`, which ends with it).
        fn run_judging(&mut self, until: f64, fate: &dyn Fn(usize, &[Sent]) -> Option<f64>) {
            for _ in 0..1_000_000 {
                for i in 0..2 {
                    self.transmit(i, fate);
                }
                if self.reading {
                    let got = self.ends[1].recv();
                    if !got.is_empty()
                        && let Some(reply) = self.reply.clone()
                    {
                        // The answer goes in the same instant, as a server's write after its
                        // read.
                        self.ends[1].send_slice(&reply);
                        self.transmit(1, fate);
                    }
                    self.read.extend(got);
                }
                let next_arrival = self.in_flight.iter().map(|x| x.0).min();
                let next_timer = self.ends.iter().filter_map(Tcb::poll_at).min();
                let Some(next) = [next_arrival, next_timer].into_iter().flatten().min() else {
                    return;
                };
                if next > secs(until) {
                    self.now = secs(until);
                    return;
                }
                self.now = next.max(self.now);
                let now = self.now;
                let (due, rest): (Vec<_>, Vec<_>) =
                    self.in_flight.drain(..).partition(|x| x.0 <= now);
                self.in_flight = rest;
                for (_, to, d) in due {
                    self.ends[to].deliver(now, &d);
                }
            }
            panic!("the pair did not settle");
        }

        /// Polls end `i` and puts what it sends on the link, logged, as `fate` decides.
        fn transmit(&mut self, i: usize, fate: &dyn Fn(usize, &[Sent]) -> Option<f64>) {
            self.ends[i].poll(self.now);
            for d in self.ends[i].take_tx() {
                let n = self.log.len();
                let tcp = TcpPacket::new_checked(&d[20..]).expect("a TCP segment");
                let ends = [IpAddress::Ipv4(A.into()), IpAddress::Ipv4(B.into())];
                let sack = TcpRepr::parse(
                    &tcp,
                    &ends[i],
                    &ends[1 - i],
                    &ChecksumCapabilities::ignored(),
                )
                .map_or([None; sack::MAX_BLOCKS], |r| r.sack_ranges);
                self.log.push(Sent {
                    at: self.now.as_secs_f64(),
                    by: i,
                    len: tcp.payload().len(),
                    syn: tcp.syn(),
                    seq: tcp.seq_number().0 as u32,
                    ack: tcp.ack_number().0 as u32,
                    sack,
                });
                // Bounded: a storm of segments fails here rather than filling memory.
                assert!(
                    n < 200_000,
                    "a storm of datagrams: {:?}",
                    &self.log[n - 4..]
                );
                if let Some(extra) = fate(n, &self.log) {
                    self.in_flight
                        .push((self.now + self.delay + secs(extra), 1 - i, d));
                }
            }
        }

        /// The application at end 1 read exactly `data` (not printed whole: it is long).
        fn assert_read(&self, data: &[u8]) {
            assert!(
                self.read == data,
                "{} of {} bytes read",
                self.read.len(),
                data.len()
            );
        }

        /// The payload lengths of the data segments end `by` sent in the instant of its first.
        fn first_flight(&self, by: usize) -> Vec<usize> {
            let sent = self.data_segments(by);
            sent.iter()
                .filter(|s| s.at == sent[0].at)
                .map(|s| s.len)
                .collect()
        }

        fn data_segments(&self, by: usize) -> Vec<Sent> {
            self.log
                .iter()
                .filter(|s| s.by == by && s.len > 0)
                .copied()
                .collect()
        }

        /// End `by`'s data segments grouped by the instant they went: (when, segments,
        /// bytes), one entry per flight.
        fn flights(&self, by: usize) -> Vec<(f64, usize, usize)> {
            let mut flights: Vec<(f64, usize, usize)> = Vec::new();
            for s in self.data_segments(by) {
                match flights.last_mut() {
                    Some((at, n, bytes)) if *at == s.at => {
                        *n += 1;
                        *bytes += s.len;
                    }
                    _ => flights.push((s.at, 1, s.len)),
                }
            }
            flights
        }
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i % 251) as u8).collect()
    }

    /// The small-window rules of JNOS and Linux (`WindowRules`), end to end: which reads send a
    /// window update, and whether a segment the window cuts short waits.
    #[test]
    fn small_windows_are_handled_as_the_modelled_stack_does() {
        let acks_by_receiver = |p: &Pair| p.log.iter().filter(|s| s.by == 1 && s.len == 0).count();
        for rules in [WindowRules::Jnos, WindowRules::Linux] {
            let mut cfg = config(A, Congestion::Unlimited);
            cfg.nagle = Nagle::Off;
            cfg.window_rules = rules;
            let b = peer(cfg, 0xFFFF_FF00);
            let mut p = Pair::new(cfg, b, 1.0);
            p.run(5.0, &|_| false);
            // 1200 bytes into a 1024-byte window, the receiver not reading: four full
            // segments, then 160 bytes the window cuts short with data in flight. JNOS sends
            // them (Nagle is its only test); Linux's sender waits for the window to open.
            p.reading = false;
            p.ends[0].send_slice(&pattern(1200));
            p.run(5.5, &|_| false);
            // (JNOS then probes the closed window at once, when the ACKs arrive at 5 s.)
            let first_flight = p.first_flight(0);
            match rules {
                WindowRules::Jnos => assert_eq!(first_flight, [216, 216, 216, 216, 160]),
                WindowRules::Linux => assert_eq!(first_flight, [216; 4]),
            }
            p.run(10.0, &|_| false);
            let before = acks_by_receiver(&p);
            // Reading all it holds (1024 bytes for JNOS, whose short segment filled the
            // window; 864 for Linux) reopens the window the sender was told (0, or 160) to
            // 1024. JNOS: an update because the window was closed; Linux: because 1024 is at
            // least twice 160.
            let got = p.ends[1].recv();
            assert_eq!(
                got.len(),
                if rules == WindowRules::Jnos {
                    1024
                } else {
                    864
                }
            );
            p.run(10.5, &|_| false);
            assert_eq!(acks_by_receiver(&p), before + 1, "{rules:?}");
            // JNOS, a window that was not closed: its reader's bytes make no update of their
            // own; the next ACK carries them.
            if rules == WindowRules::Jnos {
                p.run(20.0, &|_| false);
                let before = acks_by_receiver(&p);
                let held = p.ends[1].recv();
                assert!(!held.is_empty() && held.len() < 1024, "{}", held.len());
                p.run(20.5, &|_| false);
                assert_eq!(acks_by_receiver(&p), before, "no update for an open window");
            }
        }
    }

    #[test]
    fn a_stream_crosses_a_lossless_link_and_both_sides_close() {
        let reno = Congestion::Reno { initial: 1 };
        let mut p = Pair::new(config(A, reno), config(B, reno), 2.0);
        p.run(10.0, &|_| false);
        assert_eq!(p.ends[0].state(), State::Established);
        assert_eq!(p.ends[1].state(), State::Established);
        let data = pattern(5000);
        assert_eq!(p.ends[0].send_slice(&data), data.len());
        p.ends[0].close();
        p.run(1000.0, &|_| false);
        assert_eq!(p.ends[1].state(), State::CloseWait);
        p.ends[1].close();
        p.run(2000.0, &|_| false);
        p.assert_read(&data);
        assert_eq!(p.ends[0].state(), State::Closed, "TIME-WAIT has run out");
        assert_eq!(p.ends[1].state(), State::Closed);
        // Full segments but the last, none resent on a lossless link.
        let sent = p.data_segments(0);
        assert_eq!(sent.len(), 5000usize.div_ceil(216));
        assert!(sent[..sent.len() - 1].iter().all(|s| s.len == 216));
    }

    #[test]
    fn jnos_timers_wait_irtt_for_the_syn_and_back_off_to_maxwait() {
        // Every datagram lost: the SYN is resent after IRTT (60 s), then every 90 s (maxwait
        // caps the doubled 120 s).
        let reno = Congestion::Reno { initial: 1 };
        let mut p = Pair::new(config(A, reno), config(B, reno), 2.0);
        p.run(400.0, &|_| true);
        let syns: Vec<f64> = p.log.iter().filter(|s| s.syn).map(|s| s.at).collect();
        assert_eq!(syns, vec![0.0, 60.0, 150.0, 240.0, 330.0]);
    }

    #[test]
    fn jnos_smooths_the_first_samples_from_irtt_so_a_lost_segment_waits_long() {
        // A 2 s round trip: SRTT 60 + (2 − 60)/8 = 52.75 s, deviation 58/4 = 14.5 s, so the
        // RTO is 110.75 s, capped at maxwait: the lost first data segment goes again 90 s on.
        let reno = Congestion::Reno { initial: 1 };
        let mut p = Pair::new(config(A, reno), config(B, reno), 1.0);
        p.run(3.0, &|_| false);
        assert_eq!(p.ends[0].rto(), secs(90.0));
        p.ends[0].send_slice(&pattern(100));
        let first = p.log.len();
        p.run(500.0, &|n| n == first);
        let sent = p.data_segments(0);
        assert_eq!(sent.len(), 2);
        assert!((sent[1].at - sent[0].at - 90.0).abs() < 1e-6, "{sent:?}");
        p.assert_read(&pattern(100));
    }

    #[test]
    fn a_new_connection_starts_from_the_round_trip_its_host_cached() {
        let reno = Congestion::Reno { initial: 1 };
        let mut p = Pair::new(config(A, reno), config(B, reno), 1.0);
        p.run(3.0, &|_| false);
        // The SYN's 2 s round trip: JNOS's cache takes a first sample whole, deviation 0,
        // where the connection's own estimator smoothed it from IRTT (RTO 90 s, maxwait).
        assert_eq!(p.ends[0].rtt_cache(), Some((secs(2.0), Duration::ZERO)));
        assert_eq!(p.ends[0].rto(), secs(90.0));
        let mut next = Tcb::new(config(A, reno));
        assert_eq!(next.rto(), secs(60.0), "IRTT without a cache");
        next.seed_rtt(secs(2.0), Duration::ZERO);
        assert_eq!(next.rto(), secs(2.0));
        // Later samples are smoothed into the entry: 2 s and then 10 s give 3 s, 2 s.
        next.rtte.sample(secs(10.0), 0, 0);
        assert_eq!(next.rtt_cache(), Some((secs(3.0), secs(2.0))));
    }

    /// Linux's estimator against RFC 6298's on the samples an HF link gives: one flight's
    /// ACKs all 4 s after their segments, then an RTT that falls. Figures worked by hand from
    /// `tcp_rtt_estimator` and `__tcp_set_rto`.
    #[test]
    fn linux_holds_the_rto_at_the_worst_deviation_of_the_last_round_trip() {
        let timers = RtoTimers {
            initial: secs(1.0),
            min: secs(0.2),
            max: secs(120.0),
        };
        let close = |rtte: &Rtte, want: f64| {
            let got = rtte.rto().as_secs_f64();
            assert!((got - want).abs() < 1e-9, "RTO {got} s, want {want} s");
        };
        let mut rfc = Rtte::new(timers, RttEstimator::Rfc6298);
        let mut linux = Rtte::new(timers, RttEstimator::Linux);
        // The first sample: SRTT 4 s, deviation 2 s, RTO 12 s for both; the round trip under
        // way ends when data sent after sequence number 200 is acknowledged.
        for e in [&mut rfc, &mut linux] {
            e.sample(secs(4.0), 100, 200);
            close(e, 12.0);
        }
        // Eight more ACKs of the same flight, each 4 s: RFC 6298 lets the deviation fall by a
        // quarter per sample (2 × 0.75^8 s), Linux keeps the round trip's worst.
        for una in (110..=180).step_by(10) {
            rfc.sample(secs(4.0), una, 200);
            linux.sample(secs(4.0), una, 200);
        }
        close(&rfc, 4.0 + 8.0 * 0.75f64.powi(8));
        close(&linux, 12.0);
        // The round trip ends with no new worst: nothing falls yet (the worst was its own
        // 8 s); the next one, whose worst is 4 × 2 × 0.75^10 s, lets 8 s down by a quarter of
        // the gap.
        linux.sample(secs(4.0), 201, 400);
        close(&linux, 12.0);
        linux.sample(secs(4.0), 401, 600);
        let worst = 8.0 * 0.75f64.powi(10);
        close(&linux, 4.0 + 8.0 - (8.0 - worst) / 4.0);
        // A sample well below SRTT moves the deviation by 1/32 of the error less the deviation
        // where RFC 6298 moves it by 1/4: from SRTT 4 s and deviation 2 s, a 0.5 s sample
        // gives SRTT 3.5625 s and a deviation of 2.046875 s (2.375 s).
        let mut rfc = Rtte::new(timers, RttEstimator::Rfc6298);
        let mut linux = Rtte::new(timers, RttEstimator::Linux);
        for e in [&mut rfc, &mut linux] {
            e.sample(secs(4.0), 100, 200);
            e.sample(secs(0.5), 150, 200);
        }
        close(&rfc, 3.5625 + 4.0 * 2.375);
        close(&linux, 3.5625 + 4.0 * 2.046875);
        // The deviation term is at least TCP_RTO_MIN: a 10 ms round trip gives 0.21 s, where
        // RFC 6298 clamps the whole RTO to 0.2 s.
        let mut rfc = Rtte::new(timers, RttEstimator::Rfc6298);
        let mut linux = Rtte::new(timers, RttEstimator::Linux);
        rfc.sample(secs(0.01), 1, 2);
        linux.sample(secs(0.01), 1, 2);
        close(&rfc, 0.2);
        close(&linux, 0.21);
    }

    /// Where each estimator floors the RTO, seen on a round trip near zero backed off three
    /// times: RFC 6298 floors the RTO and doubles the floor (2.4, 5.5), Linux doubles a base
    /// already floored, KA9Q NOS floors the backed-off product (`max(MIN_RTO, rto)`). Flooring
    /// after the back-off, as every estimator did here until 2026-11-29, held RFC 6298's
    /// backed-off RTO at the floor.
    #[test]
    fn each_estimator_floors_the_rto_where_its_source_does() {
        let timers = RtoTimers {
            initial: secs(1.0),
            min: secs(0.2),
            max: secs(120.0),
        };
        let backed_off = |estimator, r: f64| {
            let mut rtte = Rtte::new(timers, estimator);
            rtte.srtt = None;
            rtte.sample(secs(r), 1, 2);
            let before = rtte.rto().as_secs_f64();
            rtte.backoff = 3;
            (before, rtte.rto().as_secs_f64())
        };
        let close = |(got_base, got): (f64, f64), (base, want): (f64, f64)| {
            assert!(
                (got_base - base).abs() < 1e-9 && (got - want).abs() < 1e-9,
                "RTO {got_base} s backed off to {got} s, want {base} s and {want} s"
            );
        };
        // 10 ms: SRTT 0.01 s, deviation 5 ms. RFC 6298: 0.03 s floored to 0.2 s, then × 8.
        close(backed_off(RttEstimator::Rfc6298, 0.01), (0.2, 1.6));
        // Linux: 0.01 s + rttvar (0.2 s, TCP_RTO_MIN) = 0.21 s, × 8.
        close(backed_off(RttEstimator::Linux, 0.01), (0.21, 1.68));
        // KA9Q: 0.03 s floored to 0.2 s; backed off, 0.03 s × 8 = 0.24 s, above the floor.
        // From a 5 ms round trip 0.015 s × 8 = 0.12 s is floored to 0.2 s.
        close(backed_off(RttEstimator::Jnos, 0.01), (0.2, 0.24));
        let mut jnos = Rtte::new(timers, RttEstimator::Jnos);
        jnos.srtt = None;
        jnos.sample(secs(0.005), 1, 2);
        jnos.backoff = 3;
        assert_eq!(jnos.rto(), secs(0.2));
        // Every estimator caps at the largest RTO.
        for estimator in [
            RttEstimator::Rfc6298,
            RttEstimator::Linux,
            RttEstimator::Jnos,
        ] {
            let mut rtte = Rtte::new(timers, estimator);
            rtte.sample(secs(30.0), 1, 2);
            rtte.backoff = 6;
            assert_eq!(rtte.rto(), secs(120.0), "{estimator:?}");
        }
    }

    #[test]
    fn rfc6298_timers_start_at_one_second_and_take_the_first_sample_whole() {
        let a = linux_timers(config(A, Congestion::Segments { initial: 10 }));
        let b = peer(a, 77);
        // The first SYN is lost: resent at 1 s; the SYN-ACK leaves B at 1.2 s and is
        // acknowledged at 1.6 s.
        let mut p = Pair::new(a, b, 0.2);
        p.run(20.0, &|n| n == 0);
        let syns: Vec<f64> = p.log.iter().filter(|s| s.syn).map(|s| s.at).collect();
        assert_eq!(syns.len(), 3);
        assert!(
            (syns[1] - 1.0).abs() < 1e-9 && (syns[2] - 1.2).abs() < 1e-9,
            "{syns:?}"
        );
        // Karn: the resent SYN gives no sample, so A's RTO stays backed off (2 s).
        assert_eq!(p.ends[0].rto(), secs(2.0));
        // B timed its SYN-ACK: SRTT 0.4 s, RTTVAR 0.2 s, RTO 1.2 s.
        assert!((p.ends[1].rto().as_secs_f64() - 1.2).abs() < 1e-9);
        // A client with a 3 s round trip and a 1 s RTO resends its SYN before any answer:
        // what smoltcp's and Linux's stock timers do on HF.
        let mut slow = Pair::new(a, b, 1.5);
        slow.run(20.0, &|_| false);
        let resent = slow.log.iter().filter(|s| s.syn && s.by == 0).count();
        assert_eq!(resent, 2, "SYN at 0 and 1 s, answered at 3 s");
    }

    /// A 5 s round trip under a 1 s initial RTO: the SYN goes at 0, 1 and 3 s and the SYN-ACK
    /// answers the first. Linux before 5.2 starts from one segment after two resends whatever
    /// they were; from 5.2 the SYN-ACK's echo of the first SYN's timestamp shows them spurious
    /// and the initial window stays whole.
    #[test]
    fn resent_syns_shown_spurious_keep_the_initial_window() {
        let first_window = |undo: bool| {
            let mut a = linux_timers(config(A, Congestion::Reno { initial: 10 }));
            a.rx_buffer = 65_535;
            a.mss = 1000;
            a.timestamps = true;
            a.spurious_syn_undo = undo;
            let b = peer(a, 3);
            let mut p = Pair::new(a, b, 2.5);
            p.run(20.0, &|_| false);
            let syns = p.log.iter().filter(|s| s.syn && s.by == 0).count();
            assert_eq!(syns, 3, "SYN at 0, 1 and 3 s");
            // The SYN-ACK echoes the first SYN's timestamp: a 5 s round trip measured,
            // although the SYN went three times.
            let srtt = p.ends[0].rtte.srtt.map(|(s, _)| s);
            assert!(srtt.is_some_and(|s| (s - 5.0).abs() < 1e-3), "{srtt:?}");
            // Segments of 988 bytes: the timestamp option takes 12.
            p.ends[0].cwnd().map(|c| c / 988)
        };
        assert_eq!(first_window(true), Some(10));
        assert_eq!(first_window(false), Some(1));
    }

    /// Linux's timers on a link whose round trip grows from 0.4 s (handshake) to 6.4 s (data):
    /// the 1.2 s RTO fires before any data is acknowledged. Without timestamps the timeout
    /// cuts the window for good; with them the first ACK echoes the original transmission and
    /// the timeout is undone (Eifel).
    #[test]
    fn timestamps_sample_every_ack_and_undo_a_spurious_timeout() {
        let run = |timestamps: bool| {
            let mut a = linux_timers(config(A, Congestion::Reno { initial: 4 }));
            a.rx_buffer = 65_535;
            a.timestamps = timestamps;
            let b = peer(a, 3);
            let mut p = Pair::new(a, b, 0.2);
            let slow = |n: usize| Some(if n < 3 { 0.0 } else { 3.0 });
            p.run_with(1.0, &slow);
            assert_eq!(p.ends[0].ts_ok, timestamps);
            let data = pattern(10 * 216);
            p.ends[0].send_slice(&data);
            p.run_with(500.0, &slow);
            p.assert_read(&data);
            // Timestamps take 12 bytes of every segment's 216.
            let segments = data.len().div_ceil(if timestamps { 204 } else { 216 });
            let resent = p.data_segments(0).len() - segments;
            (resent, p.ends[0].spurious_timeouts(), p.ends[0].cwnd())
        };
        // With timestamps: the first segment went again at both timeouts (2.2 s and 4.6 s)
        // before the first ACK (7.4 s) showed the first timeout spurious; the window was put
        // back to its four 204-byte segments and grew from there by what each ACK acknowledged,
        // a segment at most, every segment acknowledged by itself (816 + 10 × 204 + the
        // 120-byte tail).
        assert_eq!(run(true), (2, 1, Some(2976)));
        // Without: the window was cut to one segment and ssthresh to two, and it grew from
        // there in congestion avoidance. After each timeout the go-back-N resends, ACK by ACK,
        // the segments the next ACKs of the same burst show arrived (there is no F-RTO
        // without timestamps): eight segments went twice (three while a burst of ACKs was
        // taken in whole before anything was sent). The duplicates' duplicate ACKs start no
        // fast retransmit while the timeout's flight is unacknowledged (RFC 6582 4).
        assert_eq!(run(false), (8, 0, Some(826)));
    }

    /// Eight round trips of a lossless 2 s link that spaces datagrams 1 ms apart, a 60000-byte
    /// send from a host with `congestion` and `ssthresh` set at the handshake, towards a
    /// receiver that ACKs at once or, with `delayed`, every second full segment: the sender's
    /// (ssthresh, cwnd) afterwards, in 216-byte segments.
    fn after_eight_round_trips(
        congestion: Congestion,
        ssthresh: Option<u16>,
        delayed: bool,
    ) -> (u32, Option<u32>) {
        let mut a = config(A, congestion);
        a.initial_ssthresh = ssthresh;
        after_eight_round_trips_of(a, delayed)
    }

    /// [`after_eight_round_trips`] from a host with the settings `a`.
    fn after_eight_round_trips_of(mut a: TcbConfig, delayed: bool) -> (u32, Option<u32>) {
        a.rx_buffer = 65_535;
        let mut b = peer(a, 3);
        b.ack_delay = delayed.then_some(secs(0.2));
        let mut p = Pair::new(a, b, 1.0);
        let spaced = |n: usize| Some(n as f64 * 1e-3);
        p.run_with(2.5, &spaced);
        assert_eq!(p.ends[0].state(), State::Established);
        p.ends[0].send_slice(&pattern(60_000));
        p.run_with(2.5 + 8.0 * 2.0, &spaced);
        (p.ends[0].ssthresh / 216, p.ends[0].cwnd().map(|c| c / 216))
    }

    /// A threshold set at the handshake (as Linux's metrics cache sets one) puts the first
    /// round trip past it in congestion avoidance: about one segment more per round trip
    /// instead of doubling. Two segments initially, then 8 round trips of a lossless 2 s link
    /// that spaces datagrams 1 ms apart (so every segment is acknowledged by itself).
    #[test]
    fn a_cached_ssthresh_starts_congestion_avoidance_early() {
        let after =
            |ssthresh| after_eight_round_trips(Congestion::Reno { initial: 2 }, ssthresh, false);
        // Slow start doubles every round trip: 2 · 2^7 segments after 8 (the 60000 bytes
        // are 278 segments, nearly all sent).
        let (threshold, cwnd) = after(None);
        assert_eq!(threshold, u32::MAX / 216);
        assert!(matches!(cwnd, Some(200..=303)), "{cwnd:?}");
        // From two: MSS²/cwnd per ACK (rounded down), at most one segment per round trip:
        // 7 after 8.
        let (threshold, cwnd) = after(Some(2));
        assert_eq!(threshold, 2);
        assert_eq!(cwnd, Some(7));
        // Below two the threshold is Linux's floor of two.
        assert_eq!(after(Some(1)).0, 2);
    }

    /// Behind a receiver that acknowledges every second segment (a delayed ACK), RFC 5681's
    /// per-ACK growth halves; Linux's, which counts what was acknowledged, does not. From two
    /// segments (ssthresh two, so avoidance from the start), 8 round trips of the lossless 2 s
    /// link above; the sender's own ACKs are prompt.
    #[test]
    fn linux_reno_grows_by_what_was_acknowledged_not_per_ack() {
        let after = |congestion, delayed| after_eight_round_trips(congestion, Some(2), delayed).1;
        let (rfc, linux) = (Congestion::Reno { initial: 2 }, linux_reno(2));
        // Every segment acknowledged: RFC 5681 five segments more (MSS²/cwnd per ACK, rounded
        // down), Linux seven, one per round trip but the first.
        assert_eq!((after(rfc, false), after(linux, false)), (Some(7), Some(9)));
        // Every second one: RFC 5681 three more, Linux still seven.
        assert_eq!((after(rfc, true), after(linux, true)), (Some(5), Some(9)));
        // The kernels of 2012 count ACKs (`tcp_cong_avoid_ai` before 4.1): one segment per
        // window's worth of ACKs, so the same as 4.1's when every segment is acknowledged,
        // and about half as fast behind the delayed ACK: four more, against seven.
        let linux_2012 = Congestion::LinuxReno {
            initial: 2,
            era: CubicEra::Linux2639,
        };
        assert_eq!(after(linux_2012, false), after(linux, false));
        assert_eq!(after(linux_2012, true), Some(6));
        // And slow start (`tcp_slow_start` before 3.13): one segment per ACK, not per segment
        // acknowledged: from two, and no threshold, about 1.5 times a round trip behind the
        // delayed ACK (48 segments after the 8 round trips), where 4.1's nearly doubles (142).
        let slow = |congestion| after_eight_round_trips(congestion, None, true).1;
        let (old, new) = (slow(linux_2012), slow(linux_reno(2)));
        assert_eq!((old, new), (Some(48), Some(142)));
    }

    /// CUBIC's hybrid slow start on the lossless 2 s link above, whose 1 ms spacing makes a
    /// queue, and so a rising round trip, once more than a few segments go at once: slow start
    /// ends at HyStart's low window of 16 segments or soon after, with no loss, where Linux's
    /// Reno doubles on until the data runs out. Both counting generations.
    #[test]
    fn cubic_leaves_slow_start_when_the_round_trip_rises() {
        let reno = after_eight_round_trips(linux_reno(10), None, false);
        assert_eq!(reno.0, u32::MAX / 216);
        for era in [CubicEra::Linux2639, CubicEra::Linux41] {
            // With timestamps, as Linux hosts have them: an RTT sample from every ACK.
            let mut a = config(A, Congestion::Cubic { initial: 10, era });
            a.timestamps = true;
            let (ssthresh, cwnd) = after_eight_round_trips_of(a, false);
            assert!((16..=32).contains(&ssthresh), "{era:?}: {ssthresh}");
            // Then the cubic function: on a 2 s round trip it grows faster than Reno's one a
            // round trip, and the 60000 bytes are 278 segments.
            assert!(cwnd.is_some_and(|c| c > ssthresh + 6), "{era:?}: {cwnd:?}");
        }
    }

    /// One segment of a 20-segment flight lost and repaired by SACK recovery: Linux's Reno
    /// leaves recovery at half the flight (17 segments were out when the third duplicate ACK
    /// came: 8), CUBIC at 0.7 of its 20-segment window (`β` = 717/1024: 14 segments).
    #[test]
    fn cubic_keeps_seven_tenths_of_its_window_after_a_loss() {
        let after_loss = |congestion| {
            let mut p = sack_sender(congestion, true);
            let data = pattern(20 * 216);
            let resent = send_losing(&mut p, &data, 3000.0, &[3]);
            assert_eq!(resent.len(), 1, "{resent:?}");
            p.ends[0].ssthresh / 216
        };
        assert_eq!(after_loss(linux_reno(20)), 8);
        let cubic = Congestion::Cubic {
            initial: 20,
            era: CubicEra::Linux41,
        };
        assert_eq!(after_loss(cubic), 20 * 717 / 1024);
    }

    #[test]
    fn reno_repairs_one_loss_by_fast_retransmit_and_halves_its_window() {
        let reno = Congestion::Reno { initial: 4 };
        let mut p = Pair::new(config(A, reno), config(B, reno), 1.0);
        p.run(3.0, &|_| false);
        assert_eq!(p.ends[0].cwnd(), Some(4 * 216));
        let data = pattern(3000);
        p.ends[0].send_slice(&data);
        // Lose the first data segment: the three behind it bring three duplicate ACKs.
        let first = p.log.len();
        p.run(3000.0, &|n| n == first);
        p.assert_read(&data);
        let sent = p.data_segments(0);
        // Exactly one resend (JNOS sends the short segments a shrunken window leaves when
        // nothing is in flight, so the count of segments says less than their bytes).
        let bytes: usize = sent.iter().map(|s| s.len).sum();
        assert_eq!(bytes, 3000 + 216, "{sent:?}");
        assert_eq!(sent.iter().filter(|s| s.len == 216).count(), 3000 / 216 + 1);
        // The resend went a round trip after the loss, long before the 90 s RTO.
        assert!(sent[4].at - sent[0].at < 3.0, "{sent:?}");
        // ssthresh = 864 / 2 = 432: after recovery the window grows from there linearly.
        assert_eq!(p.ends[0].ssthresh, 432);
    }

    /// Linux-like ends (Reno growing by what is acknowledged, ten segments first, a window
    /// that never binds) that offer SACK or not, with JNOS's long timers so that no timeout
    /// interferes unless a test makes one.
    fn sack_pair(sack: bool) -> Pair {
        sack_sender(linux_reno(10), sack)
    }

    /// [`sack_pair`] with `congestion`, the connection open.
    fn sack_sender(congestion: Congestion, sack: bool) -> Pair {
        let mut a = config(A, congestion);
        a.rx_buffer = 64 * 1024;
        a.nagle = Nagle::Off;
        a.sack = sack;
        let mut p = Pair::new(a, peer(a, 0xFFFF_FF00), 1.0);
        p.run(3.0, &|_| false);
        assert_eq!(p.ends[0].sack_ok, sack);
        p
    }

    /// The data segments end 0 sent, as (offset in the stream / 216, how many times it was
    /// sent before, when).
    fn segment_log(p: &Pair) -> Vec<(u32, usize, f64)> {
        let sent = p.data_segments(0);
        sent.iter()
            .enumerate()
            .map(|(i, s)| {
                let before = sent[..i].iter().filter(|e| e.seq == s.seq).count();
                (s.seq.wrapping_sub(1001) / 216, before, s.at)
            })
            .collect()
    }

    /// End 0 sends `data` and the pair runs until `until`, losing the first transmission of
    /// the segments `lost` (offset / 216); all of it must arrive. What was sent again, as
    /// (offset / 216, when).
    fn send_losing(p: &mut Pair, data: &[u8], until: f64, lost: &'static [u32]) -> Vec<(u32, f64)> {
        p.ends[0].send_slice(data);
        p.run_judging(until, &lose_first(lost));
        p.assert_read(data);
        segment_log(p)
            .into_iter()
            .filter(|&(_, before, _)| before > 0)
            .map(|(i, _, at)| (i, at))
            .collect()
    }

    /// Drops end 0's first transmission of the data segments whose offset / 216 is in `which`.
    fn lose_first(which: &'static [u32]) -> impl Fn(usize, &[Sent]) -> Option<f64> {
        move |_, log| {
            let (last, before) = log.split_last()?;
            let first = !before.iter().any(|e| e.by == 0 && e.seq == last.seq);
            let drop = last.by == 0
                && last.len > 0
                && first
                && which.contains(&(last.seq.wrapping_sub(1001) / 216));
            (!drop).then_some(0.0)
        }
    }

    /// Three segments of the first ten lost (1, 3 and 5): with SACK the sender learns the holes
    /// from the duplicate ACKs themselves (RFC 6675: a hole is lost once three segments above
    /// it are SACKed), where NewReno finds one hole per round trip (2 s here) from the partial
    /// ACKs. Taken ACK by ACK, as a host takes them, the duplicates show holes 1 and 3 lost
    /// while proportional rate reduction still lets a resend go with them (RFC 6937: half a
    /// segment per segment delivered while the flight exceeds the halved window), so both go
    /// at once; hole 5, shown lost a duplicate later, waits for the allowance the ACKs of the
    /// first resends bring a round trip later. (Taken a burst at a time, all three went at
    /// once.)
    #[test]
    fn sack_repairs_the_holes_of_a_flight_faster_than_newreno() {
        let data = pattern(20 * 216);
        let mut resends = Vec::new();
        for sack in [true, false] {
            let mut p = sack_pair(sack);
            resends.push(send_losing(&mut p, &data, 3000.0, &[1, 3, 5]));
        }
        assert_eq!(
            resends,
            vec![
                vec![(1, 5.0), (3, 5.0), (5, 7.0)],
                vec![(1, 5.0), (3, 7.0), (5, 9.0)]
            ]
        );
    }

    /// Two segments of a ten-segment flight lost, without SACK, and nothing more to send.
    /// NewReno (RFC 6582) resends the second hole as soon as the partial ACK for the first
    /// comes, a round trip (2 s) later, after one cut (ssthresh half the flight of eleven
    /// segments: the ACK of the first segment let two more out before the duplicates came). KA9Q's Reno (JNOS) ends fast recovery at that ACK, deflated to ssthresh
    /// (half its window of eleven segments), which the segments still unacknowledged fill:
    /// no duplicates come, and the second hole waits for the retransmission timer (90 s,
    /// maxwait), which halves the window again (by then 1226 bytes).
    #[test]
    fn ka9q_leaves_fast_recovery_at_the_first_new_ack() {
        let run = |recovery: RenoRules| {
            let mut p = reno_sender(10, recovery);
            let data = pattern(12 * 216);
            let resent = send_losing(&mut p, &data, 3000.0, &[1, 3]);
            assert_eq!(
                resent.iter().map(|r| r.0).collect::<Vec<_>>(),
                vec![1, 3],
                "{recovery:?}: {resent:?}"
            );
            (resent[1].1 - resent[0].1, p.ends[0].ssthresh)
        };
        assert_eq!(run(RenoRules::NewReno), (2.0, 11 * 216 / 2));
        let (span, ssthresh) = run(RenoRules::Ka9q);
        assert!(span > 80.0, "the second hole waited {span} s");
        assert_eq!(ssthresh, 1226 / 2);
    }

    /// A one-segment Reno (JNOS's start) whose second data segment is lost: one duplicate
    /// ACK only, so the timer resends it, and the ACK that resend draws grows RFC 5681's
    /// window to two segments but leaves KA9Q's at one (`update` grows it only without
    /// RETRAN, which that ACK clears).
    #[test]
    fn ka9q_does_not_grow_the_window_on_the_ack_of_a_timeouts_resend() {
        let first_flight_after = |recovery: RenoRules| {
            let mut p = reno_sender(1, recovery);
            let data = pattern(6 * 216);
            let resent = send_losing(&mut p, &data, 3000.0, &[1]);
            assert_eq!(resent.len(), 1, "{recovery:?}: {resent:?}");
            let after: Vec<f64> = p
                .data_segments(0)
                .iter()
                .map(|s| s.at)
                .filter(|&at| at > resent[0].1)
                .collect();
            after.iter().filter(|&&at| at == after[0]).count()
        };
        assert_eq!(first_flight_after(RenoRules::NewReno), 2);
        assert_eq!(first_flight_after(RenoRules::Ka9q), 1);
    }

    /// KA9Q grows the window only while it is below the window the peer offers now, and up to
    /// it (`update`: "Don't expand beyond the offered window"); RFC 5681's Reno here grows up
    /// to the largest window ever offered. A receiver that stops reading offers 648, 432, 216
    /// and then 0 bytes as the segments fill its 864-byte buffer: KA9Q's window stops at two
    /// segments, where the other grows by a segment an ACK to four.
    #[test]
    fn ka9q_grows_the_window_only_up_to_the_window_offered_now() {
        let cwnd = |recovery: RenoRules| {
            let mut a = config(A, Congestion::Reno { initial: 1 });
            a.reno = recovery;
            // Before the first probe's timeout (the RTO is still near IRTT's 60 s).
            let (p, _) = closed_window(a, 20.0);
            assert_eq!(p.ends[0].timeouts(), 0);
            p.ends[0].cwnd()
        };
        assert_eq!(cwnd(RenoRules::NewReno), Some(4 * 216));
        assert_eq!(cwnd(RenoRules::Ka9q), Some(2 * 216));
    }

    /// KA9Q clamps its window to what is on its send queue at every ACK (`update`: "Clamp the
    /// congestion window at the amount currently on the send queue, with a minimum of one
    /// packet"). Four segments written and acknowledged grow either Reno's window to five
    /// segments; KA9Q's comes down to one as the queue empties, so the next write (a reply,
    /// the next command) starts from one segment again, where RFC 5681's Reno sends five.
    #[test]
    fn ka9q_clamps_its_window_to_its_send_queue() {
        let second_flight = |recovery: RenoRules| {
            let mut p = reno_sender(1, recovery);
            let first = pattern(4 * 216);
            p.ends[0].send_slice(&first);
            p.run(20.0, &|_| false);
            p.assert_read(&first);
            let cwnd = p.ends[0].cwnd();
            let before = p.data_segments(0).len();
            p.ends[0].send_slice(&pattern(8 * 216));
            p.run(40.0, &|_| false);
            let sent = p.data_segments(0);
            let first = sent[before..]
                .iter()
                .filter(|e| e.at == sent[before].at)
                .count();
            (cwnd, first)
        };
        assert_eq!(second_flight(RenoRules::NewReno), (Some(5 * 216), 5));
        assert_eq!(second_flight(RenoRules::Ka9q), (Some(216), 1));
    }

    /// JNOS-like ends with `initial` segments of Reno following `recovery`'s rules, a window
    /// that never binds and Nagle off, the connection open.
    fn reno_sender(initial: u16, recovery: RenoRules) -> Pair {
        let mut a = config(A, Congestion::Reno { initial });
        a.rx_buffer = 64 * 1024;
        a.nagle = Nagle::Off;
        a.reno = recovery;
        let mut p = Pair::new(a, peer(a, 0xFFFF_FF00), 1.0);
        p.run(3.0, &|_| false);
        p
    }

    /// The second segment of a 20-segment flight lost, the rest arriving 0.1 s apart, so their
    /// duplicate ACKs do too. Linux's recovery (proportional rate reduction, RFC 6937) sends
    /// new data from the first duplicate after the fast retransmit, one segment for every two
    /// that left the network; RFC 6675 alone holds everything until the pipe has fallen below
    /// ssthresh (half the flight), then sends one per ACK. Both deliver everything.
    #[test]
    fn linux_recovery_sends_in_proportion_to_what_left_the_network() {
        let recovery = |congestion: Congestion| {
            let mut p = sack_sender(congestion, true);
            let data = pattern(40 * 216);
            p.ends[0].send_slice(&data);
            p.run_judging(3000.0, &|_, log| {
                let (last, before) = log.split_last()?;
                let k = last.seq.wrapping_sub(1001) / 216;
                let first = !before.iter().any(|e| e.by == 0 && e.seq == last.seq);
                if last.by != 0 || last.len == 0 || !first {
                    return Some(0.0);
                }
                (k != 1).then_some(0.1 * f64::from(k.min(20)))
            });
            p.assert_read(&data);
            let log = segment_log(&p);
            let fast_retransmit = log
                .iter()
                .find(|&&(k, before, _)| k == 1 && before == 1)
                .map(|&(_, _, at)| at)
                .expect("segment 1 resent");
            // New segments sent within 1 s of the fast retransmit (while the rest of the
            // duplicates come in).
            log.iter()
                .filter(|&&(k, before, at)| {
                    k >= 20 && before == 0 && at >= fast_retransmit && at < fast_retransmit + 1.0
                })
                .map(|&(k, _, at)| (k, ((at - fast_retransmit) * 10.0).round() / 10.0))
                .collect::<Vec<_>>()
        };
        let prr = recovery(linux_reno(20));
        let rfc6675 = recovery(Congestion::Reno { initial: 20 });
        assert_eq!(
            prr,
            vec![(24, 0.1), (25, 0.3), (26, 0.5), (27, 0.7), (28, 0.9)]
        );
        assert_eq!(rfc6675, vec![(24, 0.9)]);
    }

    /// A timeout after SACKs: every hole is resent (the first at once, the others as the
    /// window opens again), and nothing the receiver SACKed is sent twice. Segments 1 and 2
    /// are lost, then their fast retransmissions too, so only the timeout (JNOS's maxwait,
    /// 90 s) repairs them.
    #[test]
    fn after_a_timeout_sack_resends_only_the_holes() {
        let mut p = sack_pair(true);
        let data = pattern(12 * 216);
        p.ends[0].send_slice(&data);
        p.run_judging(3000.0, &|_, log| {
            let (last, before) = log.split_last()?;
            let sends = before
                .iter()
                .filter(|e| e.by == 0 && e.seq == last.seq)
                .count();
            let which = last.seq.wrapping_sub(1001) / 216;
            let drop = last.by == 0 && last.len > 0 && sends < 2 && (which == 1 || which == 2);
            (!drop).then_some(0.0)
        });
        p.assert_read(&data);
        let log = segment_log(&p);
        for (i, before, at) in &log {
            assert!(
                *before == 0 || (*i == 1 || *i == 2) && *before <= 2,
                "segment {i} sent again at {at} s: {log:?}"
            );
        }
        assert_eq!(log.len(), 12 + 2 + 2, "{log:?}");
        assert!(log.iter().any(|&(_, _, at)| at > 90.0), "{log:?}");
    }

    /// Linux-like ends with SACK, and the tail-loss probe or not: Linux's estimator with a
    /// 10 s minimum RTO, so the timeout comes well after the probe (a round trip is 2 s).
    fn tlp_pair(tlp: bool) -> Pair {
        let mut a = config(A, linux_reno(10));
        a.rx_buffer = 64 * 1024;
        a.nagle = Nagle::Off;
        a.sack = true;
        a.tlp = tlp;
        a.rtt_estimator = RttEstimator::Linux;
        a.rto = RtoTimers {
            initial: secs(10.0),
            min: secs(10.0),
            max: secs(120.0),
        };
        let mut p = Pair::new(a, peer(a, 0xFFFF_FF00), 1.0);
        p.run(3.0, &|_| false);
        p
    }

    /// The last segment of a flight lost, so no duplicate ACK can announce it: the probe
    /// resends it two round trips and 200 ms (one segment in flight) after the ACK of the
    /// rest, where without it the timeout waits its 12 s. The probe repaired a loss, which the
    /// next ACK beyond it shows: the window is halved as for a fast recovery.
    #[test]
    fn the_tail_loss_probe_resends_a_lost_last_segment_before_the_timeout() {
        let data = pattern(5 * 216);
        let mut resends = Vec::new();
        for tlp in [true, false] {
            let mut p = tlp_pair(tlp);
            let again = send_losing(&mut p, &data, 60.0, &[4]);
            assert_eq!(again.len(), 1, "tlp {tlp}: {again:?}");
            resends.push(again[0]);
            assert_eq!(p.ends[0].tlp_probes, u32::from(tlp));
        }
        // Sent at 3 s, the rest acknowledged at 5 s: the probe at 5 + 2·2 + 0.2 s, the
        // timeout at 5 + SRTT 2 + the 10 s floor of its deviation term.
        assert_eq!(resends[0].0, 4);
        assert!((resends[0].1 - 9.2).abs() < 1e-6, "{resends:?}");
        assert!((resends[1].1 - 17.0).abs() < 1e-6, "{resends:?}");
        // More data: its ACK goes beyond the probe, which so repaired a loss.
        let mut p = tlp_pair(true);
        p.ends[0].send_slice(&data);
        p.run_judging(60.0, &lose_first(&[4]));
        let cwnd = p.ends[0].cwnd().unwrap_or(0);
        p.ends[0].send_slice(&data);
        p.run(120.0, &|_| false);
        assert_eq!(p.ends[0].tlp_repairs, 1);
        assert_eq!(p.ends[0].ssthresh, cwnd / 2);
    }

    /// The last segment only late, not lost: the probe's resend arrives as a duplicate, the
    /// receiver reports it by D-SACK (RFC 2883), and the sender leaves its window alone.
    #[test]
    fn a_probe_the_peer_reports_as_a_duplicate_costs_no_window() {
        let data = pattern(5 * 216);
        let mut p = tlp_pair(true);
        p.ends[0].send_slice(&data);
        let first = p.log.len();
        p.run_with(60.0, &|n| Some(if n == first + 4 { 6.0 } else { 0.0 }));
        p.assert_read(&data);
        assert_eq!(p.ends[0].tlp_probes, 1);
        assert!(p.ends[0].tlp_high.is_none());
        let reported: Vec<(u32, u32)> = p
            .log
            .iter()
            .filter(|s| s.by == 1)
            .filter_map(|s| sack::duplicate_reported(&s.sack, s.ack))
            .collect();
        assert_eq!(reported, vec![(1001 + 4 * 216, 1001 + 5 * 216)]);
        let (cwnd, ssthresh) = (p.ends[0].cwnd(), p.ends[0].ssthresh);
        p.ends[0].send_slice(&data);
        p.run(120.0, &|_| false);
        assert_eq!(p.ends[0].tlp_repairs, 0);
        assert_eq!((p.ends[0].cwnd(), p.ends[0].ssthresh), (cwnd, ssthresh));
    }

    /// SACK is used only if both ends offer it (RFC 2018 2).
    #[test]
    fn sack_needs_both_ends() {
        let mut a = config(A, linux_reno(10));
        a.sack = true;
        for b_offers in [true, false] {
            let mut b = peer(a, 7);
            b.sack = b_offers;
            let mut p = Pair::new(a, b, 1.0);
            p.run(3.0, &|_| false);
            assert_eq!((p.ends[0].sack_ok, p.ends[1].sack_ok), (b_offers, b_offers));
        }
    }

    #[test]
    fn out_of_order_data_waits_for_the_gap_within_the_window() {
        let mut p = Pair::new(
            config(A, Congestion::Unlimited),
            config(B, Congestion::Unlimited),
            0.5,
        );
        p.run(2.0, &|_| false);
        let data = pattern(4000);
        p.ends[0].send_slice(&data);
        let second = p.log.len() + 1;
        p.run(1000.0, &|n| n == second);
        p.assert_read(&data);
        // Never more than the receiver's 1024-byte window unacknowledged: the first flight
        // is four full segments (the fifth would overrun it, and a short one waits).
        assert_eq!(p.first_flight(0), vec![216; 4]);
    }

    /// Sender `a` (Nagle off) whose receiver (four segments of buffer, so the window closes
    /// to zero) stops reading while 3000 bytes go, until `until`.
    fn closed_window(mut a: TcbConfig, until: f64) -> (Pair, Vec<u8>) {
        a.nagle = Nagle::Off;
        let mut b = peer(a, 0xFFFF_FF00);
        b.rx_buffer = 4 * 216;
        let mut p = Pair::new(a, b, 0.5);
        p.run(2.0, &|_| false);
        p.reading = false;
        let data = pattern(3000);
        p.ends[0].send_slice(&data);
        p.run(until, &|_| false);
        assert_eq!(p.ends[1].rx.len(), 864, "the buffer filled and no more");
        (p, data)
    }

    /// JNOS (KA9Q's `tcp_output` and `update`): the ACK that closes the window with nothing in
    /// flight draws one byte beyond it at once; that byte is data, resent at each timeout
    /// and counted as one; the reopened window sends it again first.
    #[test]
    fn jnos_probes_a_closed_window_at_once_with_a_byte_of_data() {
        let (mut p, data) = closed_window(config(A, Congestion::Reno { initial: 1 }), 400.0);
        let closed_at = p
            .log
            .iter()
            .find(|s| s.by == 1 && s.ack == CLOSED_AT)
            .map(|s| s.at + 0.5);
        let probes: Vec<Sent> = p
            .data_segments(0)
            .into_iter()
            .filter(|s| s.len == 1)
            .collect();
        assert!(probes.len() >= 2, "probed {} times", probes.len());
        assert_eq!(
            Some(probes[0].at),
            closed_at,
            "the first probe goes at once"
        );
        assert!(probes.iter().all(|s| s.seq == CLOSED_AT));
        assert_eq!(p.ends[0].timeouts(), probes.len() as u64 - 1);
        p.reading = true;
        p.run(4000.0, &|_| false);
        p.assert_read(&data);
    }

    /// Where [`closed_window`] closes the window: `snd_una` once the 864 bytes it holds are
    /// acknowledged.
    const CLOSED_AT: u32 = 1001 + 864;

    /// [`closed_window`] for a Linux sender (Linux's timers and window rules, Reno from ten
    /// segments), run to 400 s with the peer answering.
    fn linux_closed_window() -> (Pair, Vec<u8>) {
        let mut a = linux_timers(config(A, linux_reno(10)));
        a.window_rules = WindowRules::Linux;
        closed_window(a, 400.0)
    }

    /// The Linux sender's zero-window probes so far: no data, the sequence number before
    /// `snd_una` (`tcp_xmit_probe_skb`).
    fn linux_probes(p: &Pair) -> Vec<&Sent> {
        p.log
            .iter()
            .filter(|s| s.by == 0 && s.seq == CLOSED_AT - 1)
            .collect()
    }

    /// Linux (`tcp_probe_timer`, `tcp_xmit_probe_skb`, `tcp_ack_probe`): the persist timer
    /// sends a segment with no data and the sequence number before `snd_una`; each answer
    /// still closed restarts it, backed off; nothing is in flight, so no timeout counts and
    /// the window stays; once the window opens the data goes on from `snd_una`.
    #[test]
    fn linux_probes_a_closed_window_with_no_data() {
        let (mut p, data) = linux_closed_window();
        let cwnd = p.ends[0].cwnd();
        let probes = linux_probes(&p);
        assert!(probes.len() >= 4, "probed {} times", probes.len());
        assert!(probes.iter().all(|s| s.len == 0));
        assert!(p.data_segments(0).iter().all(|s| s.seq < CLOSED_AT));
        // Each probe a backed-off RTO after the answer to the one before (a round trip of
        // 1 s), doubling up to Linux's 120 s.
        let gaps: Vec<f64> = probes
            .windows(2)
            .map(|w| w[1].at - (w[0].at + 1.0))
            .collect();
        assert!(gaps.len() >= 5, "{gaps:?}");
        for g in gaps.windows(2) {
            assert!((g[1] - (2.0 * g[0]).min(120.0)).abs() < 1e-6, "{gaps:?}");
        }
        assert_eq!((p.ends[0].timeouts(), p.ends[0].cwnd()), (0, cwnd));
        p.reading = true;
        p.run(4000.0, &|_| false);
        p.assert_read(&data);
    }

    /// Linux counts its probes behind a closed window until an ACK answers one
    /// (`icsk_probes_out`, which `tcp_ack` clears): a live peer's answers keep the count at
    /// one at most, a dead peer's silence lets it climb by one a probe, and the first answer
    /// clears it again. A host's give-up rule reads the count (`GiveUp::Elapsed::probes`).
    #[test]
    fn linux_counts_unanswered_zero_window_probes() {
        let (mut p, data) = linux_closed_window();
        assert!(p.ends[0].probes_out() <= 1, "{}", p.ends[0].probes_out());
        let before = linux_probes(&p).len();
        // The peer goes silent: everything it sends is lost.
        p.run_judging(4000.0, &|_, log| {
            log.last().is_some_and(|s| s.by == 0).then_some(0.0)
        });
        let unanswered = linux_probes(&p).len() - before;
        assert!(unanswered >= 25, "{unanswered} probes in 3600 s");
        let out = p.ends[0].probes_out() as usize;
        assert!(
            (unanswered..=unanswered + 1).contains(&out),
            "{out} counted, {unanswered} sent unanswered"
        );
        p.reading = true;
        p.run(8000.0, &|_| false);
        assert_eq!(p.ends[0].probes_out(), 0);
        p.assert_read(&data);
    }

    #[test]
    fn a_window_over_65535_is_scaled_both_ways() {
        let mut a = config(A, Congestion::Unlimited);
        a.rx_buffer = 1 << 20;
        a.tx_buffer = 1 << 20;
        a.mss = 2008;
        a.nagle = Nagle::Off;
        let b = peer(a, 5);
        let mut p = Pair::new(a, b, 1.0);
        p.run(3.0, &|_| false);
        let data = pattern(200_000);
        assert_eq!(p.ends[0].send_slice(&data), data.len());
        p.run(10.0, &|_| false);
        p.assert_read(&data);
        // The SYN-ACK's window is never scaled, so the first flight stops at 65535 bytes; the
        // ACKs after it offer 1 MiB, scaled, and the rest goes in the second.
        let sent = p.data_segments(0);
        let flight = |at: f64| -> usize { sent.iter().filter(|s| s.at == at).map(|s| s.len).sum() };
        assert!(flight(sent[0].at) <= 65_535);
        assert_eq!(flight(sent[0].at) + flight(sent[0].at + 2.0), data.len());
    }

    /// Linux's receive window end to end (`tcp/rcvbuf.rs`): the SYN-ACK offers the era's
    /// initial window, the window-scale option goes both ways, and with the application
    /// reading as the data comes, autotuning takes the window far past 65535 bytes within a
    /// few round trips, flight by flight, for a sender the window alone limits. Returns the
    /// flights' sizes.
    fn linux_receiver_flights(era: RcvEra, syn_window: u32) -> Vec<usize> {
        let mut a = linux_timers(config(A, Congestion::Unlimited));
        a.mss = 1460;
        a.timestamps = true;
        a.nagle = Nagle::Off;
        a.window_rules = WindowRules::Linux;
        a.rcv_tuning = Some(era);
        a.tx_buffer = 4 << 20;
        let b = peer(a, 5);
        let mut p = Pair::new(a, b, 1.0);
        p.run(3.0, &|_| false);
        assert_eq!(p.ends[0].snd_wnd, syn_window);
        assert_eq!((p.ends[0].snd_shift, p.ends[1].rcv_shift), (7, 7));
        let data = pattern(3_000_000);
        assert_eq!(p.ends[0].send_slice(&data), data.len());
        p.run(200.0, &|_| false);
        p.assert_read(&data);
        let sizes: Vec<usize> = p.flights(0).iter().map(|f| f.2).collect();
        // The window grows with what arrived and with what was read: one flight carried more
        // than 8 × 65535 bytes.
        assert!(sizes.iter().any(|&n| n > 8 * 65_535), "{sizes:?}");
        sizes
    }

    /// A Linux sender (3.x's window test) in slow start from ten segments of 1448 bytes, its
    /// peer's 1 MiB window out of the way. With timestamps the SYN resent at the 1 s initial
    /// RTO is shown spurious and leaves slow start alone.
    fn linux_slow_starter() -> TcbConfig {
        let mut a = linux_timers(config(A, linux_reno(10)));
        a.mss = 1460;
        a.timestamps = true;
        a.nagle = Nagle::Off;
        a.window_rules = WindowRules::Linux;
        a.cwnd_limited = CwndLimited::Linux3;
        a.rx_buffer = 1 << 20;
        a
    }

    /// A bulk writer on a Linux sender in slow start, the peer's window out of the way: the
    /// largest flight in 30 s, and how many bytes the application had queued at most, with a
    /// fixed send buffer of 64 KB (`snd`: `None`) or Linux's (`tcp/sndbuf.rs`).
    fn bulk_flight(snd: Option<SndEra>) -> (usize, usize) {
        let mut a = linux_slow_starter();
        a.snd_tuning = snd;
        let b = peer(a, 5);
        let mut p = Pair::new(a, b, 1.0);
        p.run(3.0, &|_| false);
        let data = pattern(8 << 20);
        let (mut written, mut queued_most) = (0, 0);
        for step in 0..120 {
            written += p.ends[0].send_slice(&data[written..]);
            queued_most = queued_most.max(p.ends[0].tx.len());
            p.run(3.0 + 0.25 * f64::from(step + 1), &|_| false);
        }
        let most = p.flights(0).iter().map(|f| f.2).max().unwrap_or(0);
        (most, queued_most)
    }

    /// The ACKs of a flight arrive together (a link that delivers a burst at one instant, as a
    /// modem releases an interleaver block): a host takes them one at a time and sends what
    /// each lets out before the next (Linux's `tcp_data_snd_check` per ACK, KA9Q's
    /// `tcp_output` after every `tcp_input`). So the flight stays full as the ACKs come in,
    /// 3.x's window test finds the window in use at every one, and slow start doubles the
    /// flight every round trip. Taken a burst at a time, the flight shrank ACK by ACK and the
    /// window grew only at the first few.
    #[test]
    fn a_burst_of_acks_is_taken_one_at_a_time_and_slow_start_doubles() {
        let mut a = linux_slow_starter();
        a.tx_buffer = 1 << 20;
        let mut p = Pair::new(a, peer(a, 5), 1.0);
        p.run(3.0, &|_| false);
        let data = pattern(150 * 1448);
        assert_eq!(p.ends[0].send_slice(&data), data.len());
        p.run(60.0, &|_| false);
        p.assert_read(&data);
        let flights = p.flights(0);
        let sizes: Vec<usize> = flights.iter().map(|f| f.1).collect();
        assert_eq!(sizes, vec![10, 20, 40, 80], "{flights:?}");
    }

    /// A fixed 64 KB send buffer caps a bulk sender's flight at 64 KB; Linux's, raised to
    /// twice the congestion window whenever an ACK frees room while the writer waits, lets
    /// slow start run on, the writer ahead of the window by about as much again. Before 3.16
    /// it opens at ten segments' memory (23400 bytes with MSS 1460).
    #[test]
    fn linuxs_send_buffer_keeps_ahead_of_the_congestion_window() {
        let (fixed, fixed_queued) = bulk_flight(None);
        assert!(fixed <= 64 * 1024, "{fixed}");
        assert_eq!(fixed_queued, 64 * 1024);
        for era in [SndEra::Linux3, SndEra::Linux316] {
            let (linux, queued) = bulk_flight(Some(era));
            assert!(linux > 4 * 64 * 1024, "{era:?}: {linux}");
            // The queue (sent and unsent) never held less than the flight, nor more than the
            // kernel's 4 MB.
            assert!(
                queued >= linux && queued <= super::super::sndbuf::WMEM_MAX,
                "{queued}"
            );
        }
        let mut t = Tcb::new(TcbConfig {
            mss: 1460,
            snd_tuning: Some(SndEra::Linux3),
            ..config(A, linux_reno(10))
        });
        t.state = State::Established;
        assert_eq!(t.send_slice(&pattern(100_000)), 16_384);
        t.opened();
        assert_eq!(t.send_slice(&pattern(100_000)), 23_400 - 16_384);
    }

    /// A 3.4-3.9 receiver (`isode-stock`) offers ten segments in its SYN-ACK.
    #[test]
    fn a_linux_receiver_opens_at_ten_segments_and_autotunes_past_65535() {
        let sizes = linux_receiver_flights(RcvEra::Linux34, 14_600);
        // Ten segments of 1448 bytes (the MSS less the timestamps) at first.
        assert_eq!(sizes[0], 14_480, "{sizes:?}");
    }

    /// A 4.20-6.5 receiver (`linux`) offers 44 segments, 64240 bytes, in its SYN-ACK.
    #[test]
    fn a_current_linux_receiver_opens_at_44_segments_and_autotunes_past_65535() {
        let sizes = linux_receiver_flights(RcvEra::Linux420, 64_240);
        // 44 segments of 1448 bytes at first.
        assert_eq!(sizes[0], 44 * 1448, "{sizes:?}");
    }

    /// Linux 6.5 on leaves an unanswered SYN's RTO at 1 s for its first four timeouts before
    /// the back-off doubles (`tcp_syn_linear_timeouts`), so it resends every second five
    /// times; before, it doubled from the first timeout.
    #[test]
    fn a_current_linux_resends_its_syn_every_second_five_times_before_backing_off() {
        let syn_times = |linear: u8| -> Vec<f64> {
            let mut cfg = linux_timers(config(A, Congestion::Reno { initial: 1 }));
            cfg.syn_linear_timeouts = linear;
            let mut t = Tcb::new(cfg);
            assert!(t.connect(B, 25, 1025).is_ok());
            let mut now = Duration::ZERO;
            let mut times = Vec::new();
            while now < secs(40.0) {
                t.poll(now);
                times.extend(t.take_tx().iter().map(|_| now.as_secs_f64()));
                let Some(next) = t.poll_at() else { break };
                now = next;
            }
            times
        };
        assert_eq!(
            syn_times(4),
            [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 11.0, 19.0, 35.0]
        );
        assert_eq!(syn_times(0), [0.0, 1.0, 3.0, 7.0, 15.0, 31.0]);
    }

    /// Datagrams 1 ms apart, so that the ACKs of a flight come one by one and each finds the
    /// window in use (Linux grows it only then).
    fn spaced(n: usize) -> Option<f64> {
        Some(n as f64 * 1e-3)
    }

    /// A Linux sender (Reno, ten segments first, 216-byte segments, a 0.2 s round trip,
    /// Linux's window rules) with the restart `restart`, towards a receiver with `rx_buffer`
    /// bytes, whose window grew on 60000 bytes the receiver read.
    fn grown_linux_sender(restart: Option<IdleRestart>, rx_buffer: usize) -> Pair {
        let mut a = linux_timers(config(A, linux_reno(10)));
        a.rx_buffer = rx_buffer;
        a.tx_buffer = 1 << 20;
        a.window_rules = WindowRules::Linux;
        a.idle_restart = restart;
        let b = peer(a, 3);
        let mut p = Pair::new(a, b, 0.1);
        p.run_with(1.0, &spaced);
        let first = pattern(60_000);
        p.ends[0].send_slice(&first);
        p.run_with(30.0, &spaced);
        p.assert_read(&first);
        p
    }

    /// [`grown_linux_sender`] that then sends nothing for `idle` RTOs and writes as much again:
    /// (its window before the write, its window right after the write's first flight went,
    /// the restarts counted, the data segments of that first flight), windows in segments.
    fn after_idle(restart: Option<IdleRestart>, idle: f64) -> (u32, u32, u32, usize) {
        let mut p = grown_linux_sender(restart, 1 << 20);
        let before = p.ends[0].cwnd().unwrap_or(0) / 216;
        // The last data went when the last sub-MSS segment did (Nagle held it until then).
        let last = p.data_segments(0).last().map_or(0.0, |s| s.at);
        let quiet = p.ends[0].rto().as_secs_f64() * idle;
        let (after, restarts, flight) = write_after_quiet(&mut p, last + quiet, 60_000);
        (before, after, restarts, flight)
    }

    /// End 0's application writes `len` bytes at `at` seconds after a quiet spell: (end 0's
    /// window in 216-byte segments once the write's first flight went, its restarts after
    /// idle, the data segments of that flight).
    fn write_after_quiet(p: &mut Pair, at: f64, len: usize) -> (u32, u32, usize) {
        p.now = secs(at);
        let sent = p.data_segments(0).len();
        // The host's clock reaches the write first, as the drivers poll before writing.
        p.ends[0].poll(p.now);
        p.ends[0].send_slice(&pattern(len));
        p.transmit(0, &|_, _| Some(0.0));
        let flight = p.data_segments(0).len() - sent;
        let after = p.ends[0].cwnd().unwrap_or(0) / 216;
        (after, p.ends[0].idle_restarts(), flight)
    }

    /// Linux's slow-start restart after idle (`tcp_cwnd_restart`): no data for longer than the
    /// RTO with nothing in flight halves the window for every RTO beyond the first, down to
    /// the initial ten segments; an idle spell shorter than the RTO, or the restart off
    /// (`tcp_slow_start_after_idle` 0, JNOS), leaves it alone. Where the kernel looks for the
    /// spell (as data goes, before 4.11; when the application writes, from 4.11) makes no
    /// difference to a write after a quiet spell.
    #[test]
    fn an_idle_linux_sender_restarts_from_its_initial_window() {
        let (grown, kept, none, flight) = after_idle(None, 100.0);
        assert_eq!(grown, 145, "the window grew to {grown} segments");
        assert_eq!((kept, none), (grown, 0));
        assert_eq!(flight, grown as usize, "the whole window went at once");
        for era in [IdleRestart::OnSend, IdleRestart::OnQueue] {
            // Shorter than the RTO: nothing.
            assert_eq!(
                after_idle(Some(era), 0.5),
                (grown, grown, 0, grown as usize)
            );
            // One and a half RTOs: halved once.
            assert_eq!(
                after_idle(Some(era), 1.5),
                (grown, grown / 2, 1, grown as usize / 2),
                "{era:?}"
            );
            // Two and a half: halved twice (never below ten segments).
            assert_eq!(after_idle(Some(era), 2.5).1, (grown / 4).max(10), "{era:?}");
            // A hundred: back to the initial window, and ten segments go.
            assert_eq!(after_idle(Some(era), 100.0), (grown, 10, 1, 10), "{era:?}");
        }
    }

    /// A receiver whose application stops reading closes its window; the sender's data waits
    /// with nothing in flight (its persist probes carry no data, so they are not data sent
    /// and their timeouts cut nothing) until the application reads again 60 s later. Both of
    /// Linux's places see the idle spell: 4.11 on when the window update arrives, before it
    /// as the first segment goes. Either way the window restarts from ten segments.
    #[test]
    fn a_window_closed_for_longer_than_the_rto_restarts_slow_start() {
        let run = |restart: Option<IdleRestart>| {
            // The window grows on what the application reads...
            let mut p = grown_linux_sender(restart, 65_535);
            // ...then the application stops reading: 65535 bytes fill the receive buffer and
            // the rest waits.
            p.reading = false;
            p.ends[0].send_slice(&pattern(100_000));
            p.run_with(90.0, &spaced);
            let grown = p.ends[0].cwnd().unwrap_or(0) / 216;
            let waiting = p.ends[0].unsent();
            p.reading = true;
            p.run_with(900.0, &spaced);
            assert_eq!(p.read.len(), 160_000);
            (
                grown,
                waiting,
                p.ends[0].idle_restarts(),
                p.ends[0].timeouts(),
            )
        };
        let (grown, waiting, restarts, timeouts) = run(None);
        // 225 segments grown, 34465 bytes waiting behind the closed window, and not one
        // timeout or cut while the probes went.
        assert_eq!((grown, waiting, restarts, timeouts), (225, 34_465, 0, 0));
        // 3.x also restarts as the probe timer sends the 87 bytes that fit the last of the
        // window (`tcp_write_wakeup`), 5.3 s after the last data, more than the RTO: halved
        // once, before the window closes.
        assert_eq!(run(Some(IdleRestart::OnSend)), (grown / 2, waiting, 2, 0));
        assert_eq!(run(Some(IdleRestart::OnQueue)), (grown, waiting, 1, 0));
    }

    /// RFC 2861's other half, Linux's `tcp_cwnd_application_limited`: a sender whose window
    /// grew, whose application then writes 100 bytes every 0.1 s (Nagle off; never idle,
    /// some always in flight on the 0.2 s round trip), leaves the window unused, and for
    /// every RTO it stays so the window comes down halfway to what was used, the initial ten
    /// segments at least. A writer waiting for room in the send buffer (2000 bytes offered to
    /// 1080 of room) is no application limit, and the sysctl off leaves the window alone.
    /// (window grown, window after 20 s, decays, restarts after idle.)
    fn after_unused(restart: Option<IdleRestart>, blocked: bool) -> (u32, u32, u32, u32) {
        let mut p = grown_linux_sender(restart, 1 << 20);
        let grown = p.ends[0].cwnd().unwrap_or(0) / 216;
        p.ends[0].cfg.nagle = Nagle::Off;
        if blocked {
            p.ends[0].cfg.tx_buffer = 5 * 216;
        }
        let start = p.now.as_secs_f64();
        for k in 1..=200 {
            p.ends[0].poll(p.now);
            let write = if blocked { 2000 } else { 100 };
            p.ends[0].send_slice(&pattern(write));
            p.run(start + 0.1 * f64::from(k), &|_| false);
            p.now = secs(start + 0.1 * f64::from(k));
        }
        let after = p.ends[0].cwnd().unwrap_or(0) / 216;
        let e = &p.ends[0];
        (grown, after, e.unused_decays(), e.idle_restarts())
    }

    /// Linux's `tcp_is_cwnd_limited` by kernel ([`CwndLimited`]): a sender from ten segments,
    /// in slow start or (`avoiding`) in congestion avoidance from the first ACK, whose
    /// application writes `segs` segments, then waits for their ACKs, twenty times over. Its
    /// window after, in segments.
    fn window_after_writes(rule: CwndLimited, segs: usize, avoiding: bool) -> u32 {
        let mut a = linux_timers(config(A, linux_reno(10)));
        a.rx_buffer = 1 << 20;
        a.nagle = Nagle::Off;
        a.window_rules = WindowRules::Linux;
        a.cwnd_limited = rule;
        a.initial_ssthresh = avoiding.then_some(2);
        let b = peer(a, 3);
        let mut p = Pair::new(a, b, 0.1);
        p.run_with(1.0, &spaced);
        for round in 0..20 {
            p.ends[0].send_slice(&pattern(segs * 216));
            p.run_with(2.0 + f64::from(round), &spaced);
        }
        assert_eq!(p.read.len(), 20 * segs * 216);
        p.ends[0].cwnd().unwrap_or(0) / 216
    }

    #[test]
    fn linux_grows_a_window_in_use_as_each_kernel_tells() {
        // Six of ten out: no kernel's window is in use (3.x: four left, not under a third
        // nor three), except 5.18's in slow start, which grows to twice the most out.
        assert_eq!(window_after_writes(CwndLimited::Segment, 6, false), 10);
        assert_eq!(window_after_writes(CwndLimited::Linux3, 6, false), 10);
        assert_eq!(window_after_writes(CwndLimited::Linux518, 6, false), 12);
        // Seven: 3.x counts three left as in use, so the first ACK of each write grows the
        // window, to eleven, where four are left; 5.18 to fourteen.
        assert_eq!(window_after_writes(CwndLimited::Segment, 7, false), 10);
        assert_eq!(window_after_writes(CwndLimited::Linux3, 7, false), 11);
        assert_eq!(window_after_writes(CwndLimited::Linux518, 7, false), 14);
        // Nine: one left, in use for all; 3.x's third then takes the window to fourteen
        // (five left of fourteen is not under a third: 15 > 14).
        assert_eq!(window_after_writes(CwndLimited::Segment, 9, false), 11);
        assert_eq!(window_after_writes(CwndLimited::Linux3, 9, false), 14);
        assert_eq!(window_after_writes(CwndLimited::Linux518, 9, false), 18);
        // In congestion avoidance 5.18 asks only whether a flight filled the window: nine of
        // ten never does, and ten grow it, one segment a window's worth acknowledged.
        assert_eq!(window_after_writes(CwndLimited::Linux518, 9, true), 10);
        assert_eq!(window_after_writes(CwndLimited::Linux518, 10, true), 11);
    }

    #[test]
    fn a_window_the_application_leaves_unused_comes_down() {
        let (grown, kept, decays, _) = after_unused(None, false);
        assert_eq!((grown, kept, decays), (145, 145, 0));
        for era in [IdleRestart::OnSend, IdleRestart::OnQueue] {
            // 145 → 144 (halfway to the 143 the last flight of the growth had out; the RTO
            // passed since the window was last full) → 77 → 43 → 26 → 18 → 14 → 12 → 11 → 10,
            // and never idle.
            assert_eq!(after_unused(Some(era), false), (grown, 10, 9, 0), "{era:?}");
            assert_eq!(
                after_unused(Some(era), true),
                (grown, grown, 0, 0),
                "{era:?}"
            );
        }
    }

    /// JNOS's restart (KA9Q's `tcp_output`, Van Jacobson's rule): a sender whose window grew
    /// on a transfer, all of it acknowledged, goes back to one segment when it sends again
    /// more than SRTT after that last ACK; sooner, it keeps the window. (window grown, window
    /// after the new write's first flight, restarts, data segments in that flight.)
    fn jnos_after_quiet(quiet_srtts: f64) -> (u32, u32, u32, usize) {
        let mut a = config(A, Congestion::Reno { initial: 1 });
        a.rx_buffer = 64 * 216;
        a.idle_restart = Some(IdleRestart::Jnos);
        let b = peer(a, 3);
        let mut p = Pair::new(a, b, 0.5);
        p.run(5.0, &|_| false);
        let first = pattern(20 * 216);
        p.ends[0].send_slice(&first);
        p.run(300.0, &|_| false);
        p.assert_read(&first);
        let grown = p.ends[0].cwnd().unwrap_or(0) / 216;
        // The ACK that acknowledged everything arrived at the last logged datagram's time
        // plus the one-way delay.
        let acked = p.log.last().map_or(0.0, |s| s.at) + 0.5;
        let srtt = p.ends[0].rtte.srtt.map_or(0.0, |(s, _)| s);
        let (after, restarts, flight) =
            write_after_quiet(&mut p, acked + srtt * quiet_srtts, 20 * 216);
        (grown, after, restarts, flight)
    }

    #[test]
    fn jnos_goes_back_to_one_segment_after_an_srtt_without_data_in_flight() {
        // Reno from one segment grew to 21 on the first 20 segments; the new 20 go at once.
        assert_eq!(jnos_after_quiet(0.5), (21, 21, 0, 20));
        // One and a half SRTTs: one segment, and only it goes.
        assert_eq!(jnos_after_quiet(1.5), (21, 1, 1, 1));
    }

    #[test]
    fn an_abort_resets_the_peer() {
        let reno = Congestion::Reno { initial: 1 };
        let mut p = Pair::new(config(A, reno), config(B, reno), 1.0);
        p.run(3.0, &|_| false);
        p.ends[0].abort();
        assert_eq!(p.ends[0].state(), State::Closed);
        p.run(10.0, &|_| false);
        assert_eq!(p.ends[1].state(), State::Closed);
    }

    #[test]
    fn garbage_and_strangers_are_ignored() {
        let reno = Congestion::Reno { initial: 1 };
        let mut p = Pair::new(config(A, reno), config(B, reno), 1.0);
        p.run(3.0, &|_| false);
        let mut stray = Tcb::new(config([10, 0, 0, 9], reno));
        assert!(stray.connect(B, 25, 1025).is_ok());
        stray.poll(p.now);
        for d in stray.take_tx() {
            p.ends[1].deliver(p.now, &d);
            let mut bad = d.clone();
            let last = bad.len() - 1;
            bad[last] ^= 0x40;
            p.ends[1].deliver(p.now, &bad);
            p.ends[1].deliver(p.now, &d[..d.len() / 2]);
        }
        p.ends[1].deliver(p.now, &[]);
        p.ends[1].poll(p.now);
        assert!(p.ends[1].take_tx().is_empty());
        assert_eq!(p.ends[1].state(), State::Established);
    }

    /// Two Linux hosts as the `linux` profile has them (MSS 1460, timestamps, a 65535-byte
    /// window, Linux's RTO bounds), Nagle off so each write goes at once; `linux_acks` picks
    /// Linux's delayed-ACK engine or the fixed 40 ms delay.
    fn linux_pair(linux_acks: bool) -> Pair {
        let mut a = linux_timers(config(A, linux_reno(10)));
        a.rtt_estimator = RttEstimator::Linux;
        a.mss = 1460;
        a.rx_buffer = 65_535;
        a.timestamps = true;
        a.nagle = Nagle::Off;
        a.window_rules = WindowRules::Linux;
        a.ack_delay = Some(secs(0.04));
        a.linux_acks = linux_acks;
        let b = peer(a, 0xFFFF_FF00);
        let mut p = Pair::new(a, b, 1.0);
        p.run(3.0, &|_| false);
        assert_eq!(p.ends[1].state(), State::Established);
        p
    }

    /// The seconds end 1 took to acknowledge each data segment end 0 sent (one way 1 s): from
    /// its arrival to the first segment from end 1 acknowledging it.
    fn ack_delays(p: &Pair) -> Vec<f64> {
        p.data_segments(0)
            .iter()
            .map(|d| {
                let end = d.seq.wrapping_add(d.len as u32);
                let acked = p
                    .log
                    .iter()
                    .find(|s| s.by == 1 && at_or_after(s.ack, end))
                    .expect("every segment acknowledged");
                ((acked.at - d.at - 1.0) * 1000.0).round() / 1000.0
            })
            .collect()
    }

    /// A Linux receiver answers the first data at once, sixteen times (quick-ACK mode, sized
    /// by the window), then delays: 40 ms, and each time the timer fires the delay doubles,
    /// here up to 200 ms because the segments were pushed. The fixed engine waits 40 ms
    /// every time.
    #[test]
    fn linux_acks_at_once_at_first_then_after_a_growing_delay() {
        let delays = |linux_acks: bool| {
            let mut p = linux_pair(linux_acks);
            // The application does not read: no ACK comes from a read.
            p.reading = false;
            for k in 0..20 {
                assert_eq!(p.ends[0].send_slice(&[b'x'; 100]), 100);
                p.run(5.0 + 2.0 * f64::from(k), &|_| false);
            }
            ack_delays(&p)
        };
        let mut want = vec![0.0; 16];
        want.extend([0.04, 0.08, 0.16, 0.2]);
        assert_eq!(delays(true), want);
        assert_eq!(delays(false), vec![0.04; 20]);
    }

    /// A server that answers each request: Linux acknowledges the first at once with a bare
    /// ACK (quick-ACK mode), then the reply within `ato` makes the connection interactive and
    /// every later ACK rides on the reply. The fixed 40 ms delay lets the first reply carry
    /// its ACK too.
    #[test]
    fn an_answering_linux_host_sends_one_bare_ack_then_lets_replies_carry_them() {
        let bare_acks = |linux_acks: bool| {
            let mut p = linux_pair(linux_acks);
            p.reply = Some(b"250 OK\r\n".to_vec());
            let start = p.log.len();
            for k in 0..5 {
                assert_eq!(p.ends[0].send_slice(b"NOOP\r\n"), 6);
                p.run(6.0 + 3.0 * f64::from(k), &|_| false);
            }
            assert_eq!(p.read.len(), 30);
            let replies = p.data_segments(1).len();
            assert_eq!(replies, 5);
            p.log[start..]
                .iter()
                .filter(|s| s.by == 1 && s.len == 0 && !s.syn)
                .count()
        };
        assert_eq!(bare_acks(true), 1);
        assert_eq!(bare_acks(false), 0);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// Whatever the link loses, delays and reorders among the first 300 datagrams (then
        /// it heals), every byte arrives once, in order, and both ends close.
        #[test]
        fn a_stream_survives_loss_and_reordering(
            len in 1usize..12_000,
            congestion in 0usize..7,
            nagle in 0usize..3,
            delayed_ack in 0usize..3,
            timestamps in proptest::bool::ANY,
            sack in proptest::bool::ANY,
            tlp in proptest::bool::ANY,
            restart in 0usize..4,
            fates in proptest::collection::vec(proptest::option::weighted(0.8, 0.0f64..3.0), 300),
        ) {
            let congestion = [
                Congestion::Reno { initial: 1 },
                Congestion::Reno { initial: 4 },
                Congestion::Segments { initial: 10 },
                Congestion::Unlimited,
                linux_reno(10),
                Congestion::Cubic { initial: 10, era: CubicEra::Linux2639 },
                Congestion::Cubic { initial: 10, era: CubicEra::Linux41 },
            ][congestion];
            let mut a = config(A, congestion);
            a.nagle = [Nagle::Off, Nagle::Classic, Nagle::Minshall][nagle];
            // None, a fixed delay, or Linux's engine.
            a.ack_delay = (delayed_ack > 0).then_some(secs(0.2));
            a.linux_acks = delayed_ack == 2;
            a.timestamps = timestamps;
            a.sack = sack;
            a.tlp = tlp;
            a.idle_restart = [
                None,
                Some(IdleRestart::Jnos),
                Some(IdleRestart::OnSend),
                Some(IdleRestart::OnQueue),
            ][restart];
            let b = peer(a, 0xFFFF_FFF0);
            let mut p = Pair::new(a, b, 1.0);
            let data = pattern(len);
            let fate = |n: usize| fates.get(n).copied().unwrap_or(Some(0.0));
            // The SYN may be lost many times (each datagram counts): wait for the handshake.
            let mut t = 0.0;
            while p.ends[0].state() != State::Established && t < 1e5 {
                t += 100.0;
                p.run_with(t, &fate);
            }
            proptest::prop_assert_eq!(p.ends[0].state(), State::Established);
            proptest::prop_assert_eq!(p.ends[0].send_slice(&data), len);
            p.ends[0].close();
            p.run_with(1e6, &fate);
            p.assert_read(&data);
            proptest::prop_assert_eq!(p.ends[1].state(), State::CloseWait);
            p.ends[1].close();
            p.run_with(2e6, &fate);
            proptest::prop_assert_eq!(p.ends[0].state(), State::Closed);
            proptest::prop_assert_eq!(p.ends[1].state(), State::Closed);
        }
    }
}
