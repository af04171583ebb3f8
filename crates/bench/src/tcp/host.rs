//! One emulated IP host with one TCP connection on a queue device, on either engine: a
//! smoltcp interface and socket, its clock dilated from simulated time, with the profile's
//! socket settings (and, where smoltcp cannot express them, the [`Gate`] wrapper); or
//! skywave's own TCP ([`Tcb`]) on simulated time. For both, an inspector counts what the host
//! puts on the link: segments, resent segments and bytes, the largest payload, and the bursts
//! of new-data segments sent between two received datagrams (what the profile tests read); and
//! the profile's give-up rule ([`GiveUp`]) drops the connection, which neither TCP does by
//! itself (both retransmit forever).

use std::collections::VecDeque;
use std::time::Duration;

use smoltcp::iface::{
    Config, Interface, PollIngressSingleResult, PollResult, SocketHandle, SocketSet,
};
use smoltcp::phy::{self, Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant as TcpInstant;
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, Ipv4Packet, TcpPacket};

use super::TcpBenchError;
use super::gate::Gate;
use super::profile::{Congestion, GiveUp, Nagle, RttEstimator, TcpEngine, WindowRules};
use super::tcb::{RtoTimers, Tcb, TcbConfig};

/// Simulated time ↔ smoltcp time: smoltcp's clock runs `factor` times slower than the
/// simulation, so each of its timers lasts `factor` times longer in simulated time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Dilation {
    factor: f64,
}

impl Dilation {
    pub(crate) fn new(factor: f64) -> Result<Self, TcpBenchError> {
        if factor.is_finite() && (0.001..=1.0e4).contains(&factor) {
            Ok(Dilation { factor })
        } else {
            Err(TcpBenchError::Settings(format!(
                "clock dilation {factor} is outside 0.001..=10000"
            )))
        }
    }

    pub(crate) fn factor(self) -> f64 {
        self.factor
    }

    /// smoltcp's reading at simulated time `t` (rounded down to the µs).
    pub(crate) fn tcp_time_of(self, t: Duration) -> TcpInstant {
        let us = (t.as_micros() as f64 / self.factor).floor();
        // Saturating float-to-int cast; simulated runs last far less than i64 µs.
        TcpInstant::from_micros(us as i64)
    }

    /// The first simulated time at which smoltcp reads at least `i` (rounded up, so polling
    /// then always finds the timer expired).
    pub(crate) fn sim_time_of(self, i: TcpInstant) -> Duration {
        let us = (i.total_micros().max(0) as f64 * self.factor).ceil();
        Duration::from_micros(us as u64)
    }
}

/// A point-to-point IP "device": what smoltcp transmits is queued for the link, what the link
/// delivers is queued for smoltcp.
#[derive(Debug)]
pub(crate) struct QueueDevice {
    mtu: usize,
    pub(crate) rx: VecDeque<Vec<u8>>,
    pub(crate) tx: VecDeque<Vec<u8>>,
}

pub(crate) struct RxToken(Vec<u8>);

pub(crate) struct TxToken<'a>(&'a mut VecDeque<Vec<u8>>);

impl phy::RxToken for RxToken {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        f(&self.0)
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let mut buf = vec![0; len];
        let r = f(&mut buf);
        self.0.push_back(buf);
        r
    }
}

impl Device for QueueDevice {
    type RxToken<'a> = RxToken;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _: TcpInstant) -> Option<(RxToken, TxToken<'_>)> {
        let packet = self.rx.pop_front()?;
        Some((RxToken(packet), TxToken(&mut self.tx)))
    }

    fn transmit(&mut self, _: TcpInstant) -> Option<TxToken<'_>> {
        Some(TxToken(&mut self.tx))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = self.mtu;
        caps
    }
}

/// Socket settings of one host.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostSettings {
    pub(crate) mtu: usize,
    pub(crate) rx_buffer: usize,
    pub(crate) tx_buffer: usize,
    pub(crate) seed: u64,
    pub(crate) address: [u8; 4],
    pub(crate) congestion: Congestion,
    pub(crate) nagle: Nagle,
    /// Delayed-ACK timer in smoltcp's (dilated) time.
    pub(crate) ack_delay: Option<smoltcp::time::Duration>,
    /// When the host drops a connection nothing acknowledges.
    pub(crate) give_up: GiveUp,
    /// The TCP implementation.
    pub(crate) engine: TcpEngine,
    /// skywave's own TCP: its RTO bounds (simulated time), estimator start and timestamps.
    pub(crate) rto: RtoTimers,
    pub(crate) rtt_estimator: RttEstimator,
    pub(crate) timestamps: bool,
    /// skywave's own TCP: resent SYNs shown spurious leave the first window whole.
    pub(crate) spurious_syn_undo: bool,
    /// skywave's own TCP: SYN timeouts before the back-off doubles (Linux 6.5 on: 4).
    pub(crate) syn_linear_timeouts: u8,
    /// skywave's own TCP: selective acknowledgements offered (and used if both offer them).
    pub(crate) sack: bool,
    /// skywave's own TCP: the tail-loss probe, with SACK.
    pub(crate) tlp: bool,
    /// skywave's own TCP: Linux's delayed-ACK engine instead of the fixed delay.
    pub(crate) linux_acks: bool,
    /// skywave's own TCP: its small-window rules (window updates, sender SWS avoidance).
    pub(crate) window_rules: WindowRules,
    /// skywave's own TCP: a new connection starts from the host's cached round-trip estimate.
    pub(crate) rtt_cache: bool,
    /// skywave's own TCP: the slow-start threshold, segments, once the handshake is done.
    pub(crate) initial_ssthresh: Option<u16>,
    /// skywave's own TCP: Linux's receive window, by the rules of the kernel named, instead of
    /// the fixed `rx_buffer`.
    pub(crate) rcv_tuning: Option<super::tcb::RcvEra>,
    /// skywave's own TCP: Linux's send buffer, by the rules of the kernel named, instead of
    /// the fixed `tx_buffer`.
    pub(crate) snd_tuning: Option<super::tcb::SndEra>,
    /// skywave's own TCP: the restart after idle, JNOS's or Linux's (where the kernel named
    /// looks for it).
    pub(crate) idle_restart: Option<super::tcb::IdleRestart>,
    /// skywave's own TCP: when Linux's congestion control counts the window as in use.
    pub(crate) cwnd_limited: super::tcb::CwndLimited,
    /// skywave's own TCP: whose rules its Reno follows, RFC 5681's or KA9Q's.
    pub(crate) reno: super::tcb::RenoRules,
    /// skywave's own TCP: the delayed-ACK time in simulated time.
    pub(crate) ack_delay_sim: Option<Duration>,
}

/// `a` is at or after `b` in sequence space.
fn seq_at_or_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

/// What the inspector and the give-up rule read of an outgoing TCP segment, parsed once.
#[derive(Debug, Clone, Copy)]
struct Segment {
    /// First sequence number.
    start: u32,
    /// One past the last: the payload, SYN and FIN each take sequence space.
    end: u32,
    /// Payload bytes.
    payload: usize,
    syn: bool,
    ack: bool,
}

impl Segment {
    /// The TCP segment in an IPv4 datagram; `None` for anything else.
    fn parse(datagram: &[u8]) -> Option<Segment> {
        let ip = Ipv4Packet::new_checked(datagram).ok()?;
        let seg = TcpPacket::new_checked(ip.payload()).ok()?;
        let payload = seg.payload().len();
        let start = seg.seq_number().0 as u32;
        let len = payload as u32 + u32::from(seg.syn()) + u32::from(seg.fin());
        Some(Segment {
            start,
            end: start.wrapping_add(len),
            payload,
            syn: seg.syn(),
            ack: seg.ack(),
        })
    }

    /// Whether it carries sequence space (data, SYN or FIN), i.e. is not a bare ACK.
    fn carries_sequence(&self) -> bool {
        self.end != self.start
    }
}

/// What the give-up rule needs: the unacknowledged segments and how long the oldest has been
/// resent without success.
#[derive(Debug, Default)]
struct Stall {
    /// Highest acknowledgement number received (`None` before the first ACK).
    acked: Option<u32>,
    /// Unacknowledged segments in sequence order: (start, end, last sent, simulated time).
    unacked: VecDeque<(u32, u32, Duration)>,
    /// Timeouts of the oldest unacknowledged segment since data was last acknowledged (JNOS's
    /// back-off count, Linux's `icsk_retransmits`).
    timeouts: u32,
    /// Linux's `retrans_stamp` and the end of the resent data. For data and FIN it is the
    /// time of the first retransmission still unacknowledged: `tcp_retransmit_skb` stamps
    /// the resent segment with its new sending time and saves that (the comment of
    /// `tcp_packet_delayed`, "timestamp of the first retransmission", and the undo of a
    /// spurious timeout rely on it being later than the original). For a SYN it is the
    /// first SYN's: `tcp_connect` sets it when it sends the SYN, and a SYN-ACK's count runs
    /// from the first SYN-ACK as the listener counts its resends.
    episode: Option<(Duration, u32)>,
    /// Retransmission timeouts the TCP has fired, where it says (skywave's TCP), and how many
    /// of them a resend has been matched to. `None` (smoltcp): every resend of the oldest
    /// segment counts as a timeout's.
    fired: Option<u64>,
    matched: u64,
}

impl Stall {
    /// The TCP has fired `fired` retransmission timeouts in all.
    fn timeouts_fired(&mut self, fired: u64) {
        self.fired = Some(fired);
    }

    /// Whether a resend of the oldest segment is a timeout's (else a fast retransmission,
    /// which looks the same on the wire): the first such resend after a timeout fired is.
    fn resend_is_timeout(&mut self) -> bool {
        match self.fired {
            None => true,
            Some(fired) if fired > self.matched => {
                self.matched = fired;
                true
            }
            Some(_) => false,
        }
    }

    /// An acknowledgement arrived: forget what it covers; new data acknowledged clears the
    /// back-off count, and once every resent byte is acknowledged the retransmission episode
    /// is over.
    fn acknowledged(&mut self, ack: u32) {
        if self.acked.is_some_and(|a| seq_at_or_after(a, ack)) {
            return;
        }
        self.acked = Some(ack);
        self.timeouts = 0;
        while self
            .unacked
            .front()
            .is_some_and(|&(_, end, _)| seq_at_or_after(ack, end))
        {
            self.unacked.pop_front();
        }
        if self
            .episode
            .is_some_and(|(_, high)| seq_at_or_after(ack, high))
        {
            self.episode = None;
        }
    }

    /// The host is about to send `datagram` at `now`: true if `rule` says this
    /// retransmission is one too many and the connection must be dropped instead.
    fn gives_up(&mut self, seg: &Segment, now: Duration, rule: GiveUp) -> bool {
        if !seg.carries_sequence() {
            return false;
        }
        let (start, end) = (seg.start, seg.end);
        let Some(&(oldest, _, last_sent)) = self.unacked.front() else {
            self.unacked.push_back((start, end, now));
            return false;
        };
        // smoltcp resends go-back-N from the oldest unacknowledged byte: a timeout (or a fast
        // retransmit) is a segment starting there again.
        let resend_of_oldest = start == oldest || self.acked == Some(start);
        if !resend_of_oldest {
            if let Some(seg) = self.unacked.iter_mut().find(|(s, ..)| *s == start) {
                // A go-back-N resend behind the oldest. It does not lengthen the episode:
                // smoltcp resends the whole window after every timeout where Linux (F-RTO,
                // SACK) resends one segment, so counting these would drop connections whose
                // data is flowing (spuriously resent, then acknowledged).
                seg.2 = now;
            } else if self
                .unacked
                .back()
                .is_none_or(|&(_, high, _)| !seq_at_or_after(high, end))
            {
                self.unacked.push_back((start, end, now));
            }
            return false;
        }
        // Either stack decides only at a timeout; a fast retransmission neither counts nor
        // drops the connection, though in Linux it starts the episode's clock.
        let timeout = self.resend_is_timeout();
        let give_up = match rule {
            GiveUp::Never => false,
            GiveUp::Retries(_) if !timeout => false,
            GiveUp::Retries(limit) => {
                self.timeouts += 1;
                self.timeouts > limit
            }
            GiveUp::Elapsed {
                syn,
                syn_ack,
                established,
                ..
            } => {
                let stamp = if seg.syn { last_sent } else { now };
                let (since, _) = *self.episode.get_or_insert((stamp, end));
                // Linux decides only at a timeout that finds the oldest segment already
                // resent by a timeout since data was last acknowledged
                // (`retransmits_timed_out` answers no while `icsk_retransmits` is 0, and
                // every ACK of new data clears it): the first timeout after progress never
                // drops the connection, however long the segment waited in a deep queue.
                let resent_before = self.timeouts > 0;
                if timeout {
                    self.timeouts += 1;
                }
                let bound = match (seg.syn, seg.ack) {
                    (true, false) => syn,
                    (true, true) => syn_ack,
                    _ => established,
                };
                timeout && resent_before && now.saturating_sub(since) >= bound
            }
        };
        if let Some((_, high)) = self.episode.as_mut()
            && seq_at_or_after(end, *high)
        {
            *high = end;
        }
        if let Some(front) = self.unacked.front_mut() {
            front.2 = now;
        }
        give_up
    }
}

/// Counts what a host puts on the link.
#[derive(Debug, Default, Clone)]
pub(crate) struct SegmentStats {
    /// Segments carrying sequence space (data, SYN or FIN).
    pub(crate) sent: u64,
    /// Of those, segments whose sequence space had all been sent before.
    pub(crate) resent: u64,
    /// Payload bytes of the resent segments.
    pub(crate) resent_bytes: u64,
    /// Largest TCP payload sent.
    pub(crate) max_payload: usize,
    /// Largest IP datagram sent.
    pub(crate) max_datagram: usize,
    /// Segments of new data sent since the host last received a datagram.
    burst: u32,
    /// Every non-empty burst, in order.
    pub(crate) bursts: Vec<u32>,
    /// End of the highest sequence sent so far.
    high: Option<u32>,
    /// A SYN without ACK has been seen (the connection's first SYN from this host).
    pub(crate) syn_seen: bool,
}

impl SegmentStats {
    /// Inspects one outgoing IPv4 datagram.
    #[cfg(test)]
    fn inspect(&mut self, datagram: &[u8]) {
        if let Some(seg) = Segment::parse(datagram) {
            self.record(datagram.len(), &seg);
        }
    }

    /// Counts one outgoing datagram of `datagram_len` bytes carrying `seg`.
    fn record(&mut self, datagram_len: usize, seg: &Segment) {
        if seg.syn && !seg.ack {
            self.syn_seen = true;
        }
        let payload = seg.payload;
        self.max_datagram = self.max_datagram.max(datagram_len);
        self.max_payload = self.max_payload.max(payload);
        if !seg.carries_sequence() {
            return;
        }
        self.sent += 1;
        let (start, end) = (seg.start, seg.end);
        match self.high {
            Some(high) if (end.wrapping_sub(high) as i32) <= 0 => {
                self.resent += 1;
                self.resent_bytes += payload as u64;
            }
            Some(high) if (start.wrapping_sub(high) as i32) < 0 => {
                // Partly new: counts as new data, the old part is resent too.
                self.resent += 1;
                self.resent_bytes += u64::from(high.wrapping_sub(start)).min(payload as u64);
                self.high = Some(end);
                self.burst += u32::from(payload > 0);
            }
            _ => {
                self.high = Some(end);
                self.burst += u32::from(payload > 0);
            }
        }
    }

    /// The host received a datagram: the burst of data segments sent before it ends.
    fn heard(&mut self) {
        if self.burst > 0 {
            self.bursts.push(self.burst);
            self.burst = 0;
        }
    }
}

/// The TCP a host runs.
enum Stack {
    /// smoltcp on its dilated clock, with the send-side gate when the profile needs one.
    Smoltcp {
        iface: Box<Interface>,
        sockets: SocketSet<'static>,
        handle: SocketHandle,
        gate: Option<Gate>,
    },
    /// skywave's own TCP, on simulated time (the dilation is 1).
    Skywave(Box<Tcb>),
}

/// One IP host with one TCP socket.
pub(crate) struct Host {
    pub(crate) device: QueueDevice,
    stack: Stack,
    pub(crate) stats: SegmentStats,
    give_up: GiveUp,
    stall: Stall,
    /// The give-up rule dropped the connection.
    gave_up: bool,
    /// The application must look at the socket again before time moves on (it was aborted).
    poll_now: bool,
    /// See [`HostSettings::rtt_cache`].
    rtt_cache: bool,
}

/// smoltcp's clock reading as simulated time (skywave's TCP runs with a dilation of 1).
fn undilated(t: TcpInstant) -> Duration {
    Duration::from_micros(t.total_micros().max(0) as u64)
}

impl Host {
    pub(crate) fn new(settings: HostSettings, now: TcpInstant) -> Result<Host, TcpBenchError> {
        let mut device = QueueDevice {
            mtu: settings.mtu,
            rx: VecDeque::new(),
            tx: VecDeque::new(),
        };
        let stack = match settings.engine {
            TcpEngine::Smoltcp => smoltcp_stack(&settings, &mut device, now)?,
            TcpEngine::Skywave => Stack::Skywave(Box::new(Tcb::new(TcbConfig {
                address: settings.address,
                mss: u16::try_from(settings.mtu - 40).unwrap_or(u16::MAX),
                rx_buffer: settings.rx_buffer,
                rcv_tuning: settings.rcv_tuning,
                tx_buffer: settings.tx_buffer,
                snd_tuning: settings.snd_tuning,
                // The seed picks the initial sequence number, as smoltcp's random one.
                iss: (settings.seed ^ (settings.seed >> 32)) as u32,
                rto: settings.rto,
                rtt_estimator: settings.rtt_estimator,
                congestion: settings.congestion,
                nagle: settings.nagle,
                ack_delay: settings.ack_delay_sim,
                timestamps: settings.timestamps,
                spurious_syn_undo: settings.spurious_syn_undo,
                syn_linear_timeouts: settings.syn_linear_timeouts,
                sack: settings.sack,
                tlp: settings.tlp,
                linux_acks: settings.linux_acks,
                window_rules: settings.window_rules,
                initial_ssthresh: settings.initial_ssthresh,
                idle_restart: settings.idle_restart,
                cwnd_limited: settings.cwnd_limited,
                reno: settings.reno,
            }))),
        };
        Ok(Host {
            device,
            stack,
            stats: SegmentStats::default(),
            give_up: settings.give_up,
            stall: Stall::default(),
            gave_up: false,
            poll_now: false,
            rtt_cache: settings.rtt_cache,
        })
    }

    /// Hands `out` to the socket: all it takes, or what the gate lets through; `closing`: the
    /// application will add nothing more. True if anything was written.
    pub(crate) fn send(&mut self, out: &mut Vec<u8>, closing: bool) -> bool {
        let n = match &mut self.stack {
            Stack::Smoltcp {
                sockets,
                handle,
                gate,
                ..
            } => {
                let socket = sockets.get_mut::<tcp::Socket<'static>>(*handle);
                if let Some(gate) = gate.as_mut() {
                    return gate.send(socket, out, closing);
                }
                if out.is_empty() || !socket.may_send() {
                    return false;
                }
                socket.send_slice(out).unwrap_or(0)
            }
            Stack::Skywave(tcb) => tcb.send_slice(out),
        };
        out.drain(..n);
        n > 0
    }

    /// Takes what the socket has received in order (empty if none): all of it from skywave's
    /// TCP, one contiguous run of smoltcp's ring buffer (the rest at the next call).
    pub(crate) fn recv(&mut self) -> Vec<u8> {
        match &mut self.stack {
            Stack::Smoltcp {
                sockets, handle, ..
            } => {
                let mut data = Vec::new();
                let _ = sockets
                    .get_mut::<tcp::Socket<'static>>(*handle)
                    .recv(|buf| {
                        data.extend_from_slice(buf);
                        (buf.len(), ())
                    });
                data
            }
            Stack::Skywave(tcb) => tcb.recv(),
        }
    }

    /// The round-trip estimate this host caches for its peer (skywave's TCP with the
    /// profile's `rtt_cache`; `None` otherwise or before any sample).
    pub(crate) fn rtt_cache(&self) -> Option<(Duration, Duration)> {
        match &self.stack {
            Stack::Skywave(tcb) if self.rtt_cache => tcb.rtt_cache(),
            _ => None,
        }
    }

    /// Starts this host's estimator from `cached` (see [`Host::rtt_cache`]).
    pub(crate) fn seed_rtt(&mut self, cached: Option<(Duration, Duration)>) {
        if let (Stack::Skywave(tcb), Some((srtt, dev))) = (&mut self.stack, cached) {
            tcb.seed_rtt(srtt, dev);
        }
    }

    /// Received data is waiting to be read.
    pub(crate) fn can_recv(&self) -> bool {
        match &self.stack {
            Stack::Smoltcp {
                sockets, handle, ..
            } => sockets.get::<tcp::Socket<'static>>(*handle).can_recv(),
            Stack::Skywave(tcb) => tcb.can_recv(),
        }
    }

    /// The application closes its side.
    pub(crate) fn close(&mut self) {
        match &mut self.stack {
            Stack::Smoltcp {
                sockets, handle, ..
            } => sockets.get_mut::<tcp::Socket<'static>>(*handle).close(),
            Stack::Skywave(tcb) => tcb.close(),
        }
    }

    fn abort(&mut self) {
        match &mut self.stack {
            Stack::Smoltcp {
                sockets, handle, ..
            } => sockets.get_mut::<tcp::Socket<'static>>(*handle).abort(),
            Stack::Skywave(tcb) => tcb.abort(),
        }
    }

    /// A datagram from the link, for the TCP's next poll.
    pub(crate) fn deliver(&mut self, datagram: Vec<u8>) {
        self.stats.heard();
        if let Ok(ip) = Ipv4Packet::new_checked(&datagram[..])
            && let Ok(seg) = TcpPacket::new_checked(ip.payload())
            && seg.ack()
        {
            self.stall.acknowledged(seg.ack_number().0 as u32);
        }
        self.device.rx.push_back(datagram);
    }

    /// The stats with the last burst closed.
    pub(crate) fn final_stats(&mut self) -> SegmentStats {
        self.stats.heard();
        self.stats.clone()
    }

    pub(crate) fn state(&self) -> tcp::State {
        match &self.stack {
            Stack::Smoltcp {
                sockets, handle, ..
            } => sockets.get::<tcp::Socket<'static>>(*handle).state(),
            Stack::Skywave(tcb) => tcb.state(),
        }
    }

    pub(crate) fn connect(
        &mut self,
        remote: [u8; 4],
        port: u16,
        local_port: u16,
    ) -> Result<(), TcpBenchError> {
        let [a, b, c, d] = remote;
        let refused = |e: String| TcpBenchError::Settings(format!("TCP connect: {e}"));
        match &mut self.stack {
            Stack::Smoltcp {
                iface,
                sockets,
                handle,
                ..
            } => sockets
                .get_mut::<tcp::Socket<'static>>(*handle)
                .connect(
                    iface.context(),
                    (IpAddress::v4(a, b, c, d), port),
                    local_port,
                )
                .map_err(|e| refused(e.to_string())),
            Stack::Skywave(tcb) => tcb.connect(remote, port, local_port).map_err(refused),
        }
    }

    pub(crate) fn listen(&mut self, port: u16) -> Result<(), TcpBenchError> {
        let refused = |e: String| TcpBenchError::Settings(format!("TCP listen: {e}"));
        match &mut self.stack {
            Stack::Smoltcp {
                sockets, handle, ..
            } => sockets
                .get_mut::<tcp::Socket<'static>>(*handle)
                .listen(port)
                .map_err(|e| refused(e.to_string())),
            Stack::Skywave(tcb) => tcb.listen(port).map_err(refused),
        }
    }

    /// Runs the TCP at `now` (its clock): what arrived, then its timers and output.
    pub(crate) fn poll(&mut self, now: TcpInstant) {
        self.poll_now = false;
        match &mut self.stack {
            Stack::Smoltcp { iface, sockets, .. } => {
                // One datagram at a time, each followed by egress: a host answers every
                // segment as it processes it (Linux's `tcp_ack_snd_check` per segment, JNOS's
                // `tcp_output` at the end of each `tcp_input`). `Interface::poll` takes in every
                // queued datagram before any egress, so a burst (the segments of one
                // interleaver block) would share one stretch ACK.
                iface.poll_maintenance(now);
                loop {
                    let took = iface.poll_ingress_single(now, &mut self.device, sockets)
                        != PollIngressSingleResult::None;
                    while iface.poll_egress(now, &mut self.device, sockets) != PollResult::None {}
                    if !took {
                        break;
                    }
                }
            }
            Stack::Skywave(tcb) => {
                let now = undilated(now);
                while let Some(d) = self.device.rx.pop_front() {
                    tcb.deliver(now, &d);
                }
                tcb.poll(now);
                self.stall.timeouts_fired(tcb.timeouts());
                self.device.tx.extend(tcb.take_tx());
            }
        }
    }

    /// When the TCP next wants to be polled (its clock).
    pub(crate) fn poll_at(&mut self, now: TcpInstant) -> Option<TcpInstant> {
        if self.poll_now {
            return Some(now);
        }
        match &mut self.stack {
            Stack::Smoltcp { iface, sockets, .. } => iface.poll_at(now, sockets),
            Stack::Skywave(tcb) => {
                let at = if self.device.rx.is_empty() {
                    tcb.poll_at()?
                } else {
                    undilated(now)
                };
                Some(TcpInstant::from_micros(
                    i64::try_from(at.as_micros()).unwrap_or(i64::MAX),
                ))
            }
        }
    }

    /// Datagrams the TCP sent since the last call (at simulated time `now`), inspected. If
    /// the profile's give-up rule refuses one of them, it and the rest are withheld and the
    /// connection is aborted (smoltcp then sends a reset at its next poll, skywave's TCP at
    /// once).
    pub(crate) fn take_tx(&mut self, now: Duration) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.device.tx.len());
        // Linux's probe timer gives up before it sends the probe one too many; skywave's TCP
        // has sent it, so it is withheld here.
        let probes_exhausted = match (&self.stack, self.give_up) {
            (Stack::Skywave(tcb), GiveUp::Elapsed { probes, .. }) => tcb.probes_out() > probes,
            _ => false,
        };
        while let Some(d) = self.device.tx.pop_front() {
            // The hosts only send TCP over IPv4 here; anything else passes uncounted.
            if let Some(seg) = Segment::parse(&d) {
                if !self.gave_up
                    && (probes_exhausted || self.stall.gives_up(&seg, now, self.give_up))
                {
                    self.gave_up = true;
                    self.device.tx.clear();
                    self.abort();
                    self.poll_now = true;
                    if let Stack::Skywave(tcb) = &mut self.stack {
                        // The reset goes out with what this call returns.
                        out.extend(tcb.take_tx());
                    }
                    break;
                }
                self.stats.record(d.len(), &seg);
            }
            out.push(d);
        }
        out
    }

    /// The give-up rule dropped the connection.
    pub(crate) fn gave_up(&self) -> bool {
        self.gave_up
    }
}

/// smoltcp's interface and socket for `settings`.
fn smoltcp_stack(
    settings: &HostSettings,
    device: &mut QueueDevice,
    now: TcpInstant,
) -> Result<Stack, TcpBenchError> {
    let mut config = Config::new(HardwareAddress::Ip);
    config.random_seed = settings.seed;
    let mut iface = Interface::new(config, device, now);
    let [a, b, c, d] = settings.address;
    let mut added = true;
    iface.update_ip_addrs(|addrs| {
        added = addrs
            .push(IpCidr::new(IpAddress::v4(a, b, c, d), 24))
            .is_ok();
    });
    if !added {
        return Err(TcpBenchError::Settings(
            "smoltcp refused the host's IP address".into(),
        ));
    }
    let rx = tcp::SocketBuffer::new(vec![0; settings.rx_buffer]);
    let tx = tcp::SocketBuffer::new(vec![0; settings.tx_buffer]);
    let mut socket = tcp::Socket::new(rx, tx);
    socket.set_ack_delay(settings.ack_delay);
    let gate = Gate::new(settings.mtu - 40, settings.congestion, settings.nagle);
    if gate.is_some() {
        // The gate keeps the window and the Nagle test; smoltcp sends what it is given.
        socket.set_congestion_control(tcp::CongestionControl::None);
        socket.set_nagle_enabled(false);
    } else {
        // smoltcp's own Reno (cwnd to one MSS after a timeout) and classic Nagle.
        socket.set_congestion_control(tcp::CongestionControl::Reno);
        socket.set_nagle_enabled(settings.nagle == Nagle::Classic);
    }
    let mut sockets = SocketSet::new(Vec::new());
    let handle = sockets.add(socket);
    Ok(Stack::Smoltcp {
        iface: Box::new(iface),
        sockets,
        handle,
        gate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dilation_round_trips_upwards() {
        let d = Dilation::new(1.5).unwrap();
        for us in [0u64, 1, 7, 999_999, 60_000_000, 123_456_789] {
            let tcp = TcpInstant::from_micros(us as i64);
            let sim = d.sim_time_of(tcp);
            assert!(d.tcp_time_of(sim) >= tcp, "{us}");
            assert!(d.tcp_time_of(sim.saturating_sub(Duration::from_micros(2))) < tcp || us == 0);
        }
        assert_eq!(
            d.tcp_time_of(Duration::from_secs(90)),
            TcpInstant::from_secs(60)
        );
        assert!(Dilation::new(0.0).is_err());
        assert!(Dilation::new(f64::NAN).is_err());
    }

    fn segment(seq: i32, payload: usize, syn: bool) -> Vec<u8> {
        use smoltcp::phy::ChecksumCapabilities;
        use smoltcp::wire::{IpProtocol, Ipv4Address, Ipv4Repr, TcpControl, TcpRepr, TcpSeqNumber};
        let data = vec![0u8; payload];
        let tcp = TcpRepr {
            src_port: 1,
            dst_port: 25,
            control: if syn {
                TcpControl::Syn
            } else {
                TcpControl::None
            },
            seq_number: TcpSeqNumber(seq),
            ack_number: None,
            window_len: 1024,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None, None, None],
            timestamp: None,
            payload: &data,
        };
        let src = Ipv4Address::new(10, 0, 0, 1);
        let dst = Ipv4Address::new(10, 0, 0, 2);
        let ip = Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::Tcp,
            payload_len: tcp.buffer_len(),
            hop_limit: 64,
        };
        let mut buf = vec![0u8; ip.buffer_len() + tcp.buffer_len()];
        let caps = ChecksumCapabilities::default();
        let mut p = Ipv4Packet::new_unchecked(&mut buf);
        ip.emit(&mut p, &caps);
        let mut t = TcpPacket::new_unchecked(p.payload_mut());
        tcp.emit(&mut t, &src.into(), &dst.into(), &caps);
        buf
    }

    #[test]
    fn inspector_counts_resent_sequence_space() {
        let mut s = SegmentStats::default();
        s.inspect(&segment(100, 0, true)); // SYN: 100..101
        assert!(s.syn_seen);
        s.inspect(&segment(101, 200, false)); // 101..301
        s.inspect(&segment(301, 200, false)); // 301..501
        s.inspect(&segment(101, 200, false)); // resent
        s.inspect(&segment(301, 0, false)); // bare ACK: not counted
        s.inspect(&segment(i32::MAX - 10, 5, false)); // far ahead: new
        s.inspect(b"not an IP datagram");
        assert_eq!((s.sent, s.resent), (5, 1));
    }

    fn seg(seq: i32, payload: usize, syn: bool) -> Segment {
        Segment::parse(&segment(seq, payload, syn)).unwrap()
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn jnos_resets_on_the_timeout_after_its_retry_count() {
        let rule = GiveUp::Retries(2);
        let mut st = Stall::default();
        assert!(!st.gives_up(&seg(100, 0, true), secs(0), rule)); // SYN 100..101
        assert!(!st.gives_up(&seg(100, 0, true), secs(2), rule)); // timeout 1
        assert!(!st.gives_up(&seg(100, 0, true), secs(6), rule)); // timeout 2
        assert!(st.gives_up(&seg(100, 0, true), secs(14), rule)); // the third: reset
        // Data: acknowledged progress clears the count.
        let mut st = Stall::default();
        st.acknowledged(101);
        assert!(!st.gives_up(&seg(101, 200, false), secs(0), rule)); // 101..301
        assert!(!st.gives_up(&seg(301, 200, false), secs(0), rule)); // 301..501
        assert!(!st.gives_up(&seg(101, 200, false), secs(10), rule)); // timeout 1
        assert!(!st.gives_up(&seg(301, 200, false), secs(10), rule)); // go-back-N: no count
        assert!(!st.gives_up(&seg(101, 200, false), secs(30), rule)); // timeout 2
        st.acknowledged(301); // progress
        st.acknowledged(200); // old ACK: nothing
        assert!(!st.gives_up(&seg(301, 200, false), secs(40), rule)); // timeout 1 again
        assert!(!st.gives_up(&seg(301, 200, false), secs(60), rule)); // timeout 2
        assert!(st.gives_up(&seg(301, 200, false), secs(100), rule));
        // Nothing ever gives up under Never, and bare ACKs never count.
        let mut st = Stall::default();
        for t in 0..50 {
            assert!(!st.gives_up(&seg(100, 10, false), secs(t * 100), GiveUp::Never));
            assert!(!st.gives_up(&seg(110, 0, false), secs(t), GiveUp::Retries(0)));
        }
    }

    #[test]
    fn a_fast_retransmission_starts_the_clock_but_is_no_timeout() {
        // Where the TCP says which resends its timeouts sent (skywave's TCP), a fast
        // retransmission starts Linux's clock but counts as no timeout: the first timeout
        // after it never drops the connection.
        let rule = GiveUp::LINUX;
        let mut st = Stall::default();
        st.timeouts_fired(0);
        st.acknowledged(8);
        assert!(!st.gives_up(&seg(8, 100, false), secs(0), rule)); // 8..108
        assert!(!st.gives_up(&seg(8, 100, false), secs(10), rule)); // fast retransmission
        st.timeouts_fired(1);
        assert!(!st.gives_up(&seg(8, 100, false), secs(1000), rule)); // the first timeout
        st.timeouts_fired(2);
        assert!(st.gives_up(&seg(8, 100, false), secs(1100), rule)); // 1090 s after 10 s
        // Without the hint (smoltcp) the fast retransmission counts as the first timeout.
        let mut st = Stall::default();
        st.acknowledged(8);
        assert!(!st.gives_up(&seg(8, 100, false), secs(0), rule));
        assert!(!st.gives_up(&seg(8, 100, false), secs(10), rule));
        assert!(st.gives_up(&seg(8, 100, false), secs(1000), rule));
        // JNOS counts its timeouts alone too.
        let rule = GiveUp::Retries(1);
        let mut st = Stall::default();
        st.timeouts_fired(0);
        st.acknowledged(8);
        assert!(!st.gives_up(&seg(8, 100, false), secs(0), rule));
        for t in 1..5 {
            assert!(!st.gives_up(&seg(8, 100, false), secs(t), rule)); // fast retransmissions
        }
        st.timeouts_fired(1);
        assert!(!st.gives_up(&seg(8, 100, false), secs(10), rule)); // timeout 1
        st.timeouts_fired(2);
        assert!(st.gives_up(&seg(8, 100, false), secs(20), rule)); // timeout 2: reset
    }

    #[test]
    fn linux_gives_up_counting_from_the_first_resend() {
        let rule = GiveUp::LINUX;
        let mut st = Stall::default();
        assert!(!st.gives_up(&seg(7, 0, true), secs(0), rule));
        assert!(!st.gives_up(&seg(7, 0, true), secs(63), rule));
        assert!(!st.gives_up(&seg(7, 0, true), secs(126), rule));
        assert!(st.gives_up(&seg(7, 0, true), secs(127), rule));
        // Established: 924.6 s from the first retransmission (not the first sending),
        // whatever the number of resends after it.
        let mut st = Stall::default();
        st.acknowledged(8);
        assert!(!st.gives_up(&seg(8, 100, false), secs(0), rule)); // 8..108
        assert!(!st.gives_up(&seg(8, 100, false), secs(300), rule)); // first resend
        assert!(!st.gives_up(&seg(8, 100, false), secs(1224), rule)); // 924 s after it
        assert!(st.gives_up(&seg(8, 100, false), secs(1225), rule)); // 925 s
        // An ACK of everything resent ends the episode (Linux: the undo of a spurious
        // timeout, or the end of the recovery, clears `retrans_stamp`) and clears the
        // back-off count; the next resend starts the clock again.
        let mut st = Stall::default();
        st.acknowledged(8);
        assert!(!st.gives_up(&seg(8, 100, false), secs(0), rule)); // 8..108
        assert!(!st.gives_up(&seg(108, 100, false), secs(500), rule)); // 108..208
        assert!(!st.gives_up(&seg(8, 100, false), secs(900), rule)); // first resend
        st.acknowledged(108);
        assert!(!st.gives_up(&seg(108, 100, false), secs(1000), rule)); // a new episode
        assert!(!st.gives_up(&seg(108, 100, false), secs(1924), rule)); // 924 s
        assert!(st.gives_up(&seg(108, 100, false), secs(1925), rule)); // 925 s
        // However long a segment waited in a queue before its first timeout, the clock starts
        // at that resend: the verdict needs a resend already unanswered, 924.6 s old.
        let mut st = Stall::default();
        st.acknowledged(8);
        assert!(!st.gives_up(&seg(8, 100, false), secs(0), rule));
        assert!(!st.gives_up(&seg(8, 100, false), secs(950), rule));
        assert!(!st.gives_up(&seg(8, 100, false), secs(1100), rule));
        assert!(st.gives_up(&seg(8, 100, false), secs(1875), rule));
        // An ACK of new data in between starts the count again.
        let mut st = Stall::default();
        st.acknowledged(8);
        assert!(!st.gives_up(&seg(8, 100, false), secs(0), rule)); // 8..108
        assert!(!st.gives_up(&seg(108, 100, false), secs(10), rule)); // 108..208
        assert!(!st.gives_up(&seg(8, 100, false), secs(950), rule));
        st.acknowledged(108);
        assert!(!st.gives_up(&seg(108, 100, false), secs(960), rule)); // 950 s old, first
    }
}
