//! The send-side wrapper that gives smoltcp the congestion window and Nagle test smoltcp cannot
//! be configured with (see [`super::profile`]): smoltcp runs with no congestion control and its
//! own Nagle off, so it sends whatever is in its buffer at once (within the peer's window); the
//! gate decides what goes into that buffer.
//!
//! Each write the gate makes is at most one MSS, so each becomes one segment: full segments
//! while there is a full segment's worth of data, then the sub-MSS tail. The gate remembers
//! where each written segment ends in the byte stream; a segment is acknowledged once the
//! socket's send queue (unacknowledged plus unsent bytes) no longer holds any of it. From that
//! it keeps
//! - the congestion window in segments, as Linux counts it: `initial` segments, +1 per
//!   acknowledged segment while the window is in use (slow start; the threshold is never set:
//!   see below);
//! - Nagle: a sub-MSS tail waits while any data is unacknowledged (classic) or while an earlier
//!   sub-MSS segment is (Minshall), unless the application has closed its side.
//!
//! The window is never reduced. Over the 5066 ARQ an IP datagram is practically never lost, so
//! a TCP resend there is a timeout on queueing delay, i.e. spurious, and Linux (timestamps on)
//! undoes the reduction of a spurious timeout (F-RTO, RFC 5682; Eifel, RFC 3522) and of a
//! spuriously retransmitted SYN. On a channel where datagrams are really lost (TTL expiry) this
//! makes `linux --tcp-engine smoltcp` optimistic, never pessimistic (the `linux` profile itself
//! runs on skywave's TCP, which cuts and undoes as Linux does).

use std::collections::VecDeque;

use smoltcp::socket::tcp;

use super::profile::{Congestion, Nagle};

/// The send-side gate of one host.
#[derive(Debug)]
pub(crate) struct Gate {
    mss: usize,
    nagle: Nagle,
    /// Congestion window, segments (`None`: unlimited).
    cwnd: Option<u32>,
    /// Bytes handed to the socket so far.
    written: u64,
    /// End offset and "smaller than the MSS" of every written segment not yet acknowledged.
    in_flight: VecDeque<(u64, bool)>,
    /// The most segments ever unacknowledged at once.
    most_in_flight: u32,
}

impl Gate {
    /// A gate for segments of `mss` bytes; `None` when smoltcp's own Reno and Nagle are used.
    pub(crate) fn new(mss: usize, congestion: Congestion, nagle: Nagle) -> Option<Gate> {
        let cwnd = match congestion {
            // Reno is skywave's own TCP's (the settings check refuses it on smoltcp).
            Congestion::SmoltcpReno
            | Congestion::Reno { .. }
            | Congestion::LinuxReno { .. }
            | Congestion::Cubic { .. } => {
                return None;
            }
            Congestion::Unlimited => None,
            Congestion::Segments { initial } => Some(u32::from(initial.max(1))),
        };
        Some(Gate {
            mss: mss.max(1),
            nagle,
            cwnd,
            written: 0,
            in_flight: VecDeque::new(),
            most_in_flight: 0,
        })
    }

    /// Current congestion window, segments (`None`: unlimited).
    #[cfg(test)]
    pub(crate) fn cwnd(&self) -> Option<u32> {
        self.cwnd
    }

    /// Updates the window from the socket's send queue.
    fn observe(&mut self, queued: usize) {
        let acked = self.written.saturating_sub(queued as u64);
        let mut newly = 0u32;
        while self.in_flight.front().is_some_and(|&(end, _)| end <= acked) {
            self.in_flight.pop_front();
            newly += 1;
        }
        // Slow start: one more segment per segment acknowledged, while the window is used;
        // like Linux (`tcp_is_cwnd_limited`: cwnd < 2 × the most packets out), an application-
        // limited connection (SMTP commands) does not grow it.
        if let Some(cwnd) = self.cwnd.as_mut()
            && *cwnd < 2 * self.most_in_flight
        {
            *cwnd = cwnd.saturating_add(newly);
        }
    }

    /// Hands as much of `out` to the socket as window and Nagle allow, one segment per write;
    /// `closing`: the application has nothing more to add (Nagle lets the tail go). True if
    /// anything was written.
    pub(crate) fn send(
        &mut self,
        socket: &mut tcp::Socket<'_>,
        out: &mut Vec<u8>,
        closing: bool,
    ) -> bool {
        self.observe(socket.send_queue());
        let mut progress = false;
        while !out.is_empty() && socket.may_send() {
            if let Some(cwnd) = self.cwnd
                && self.in_flight.len() >= cwnd as usize
            {
                break;
            }
            let len = out.len().min(self.mss);
            let small = len < self.mss;
            if small && !closing {
                let hold = match self.nagle {
                    Nagle::Off => false,
                    Nagle::Classic => !self.in_flight.is_empty(),
                    Nagle::Minshall => self.in_flight.iter().any(|&(_, s)| s),
                };
                if hold {
                    break;
                }
            }
            let Ok(n) = socket.send_slice(&out[..len]) else {
                break;
            };
            if n == 0 {
                break;
            }
            out.drain(..n);
            self.written += n as u64;
            self.in_flight.push_back((self.written, n < self.mss));
            let now = u32::try_from(self.in_flight.len()).unwrap_or(u32::MAX);
            self.most_in_flight = self.most_in_flight.max(now);
            progress = true;
        }
        progress
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use smoltcp::time::Instant;

    use super::super::host::{Host, HostSettings};
    use super::super::profile::{GiveUp, RttEstimator, TcpEngine, WindowRules};
    use super::super::tcb::RtoTimers;
    use super::*;
    use std::time::Duration;

    /// Two hosts wired back to back, connected, at a frozen clock (so nothing is acknowledged
    /// unless a test delivers it).
    fn pair(engine: TcpEngine, congestion: Congestion, nagle: Nagle) -> [Host; 2] {
        pair_acking(engine, congestion, nagle, None)
    }

    /// [`pair`] with a delayed-ACK time (simulated time; smoltcp's clock is not dilated here).
    fn pair_acking(
        engine: TcpEngine,
        congestion: Congestion,
        nagle: Nagle,
        ack_delay: Option<Duration>,
    ) -> [Host; 2] {
        pair_with(engine, congestion, nagle, ack_delay, |_| {})
    }

    /// [`pair_acking`] with each host's settings changed by `tweak` (called with the host's
    /// index set in `address`).
    fn pair_with(
        engine: TcpEngine,
        congestion: Congestion,
        nagle: Nagle,
        ack_delay: Option<Duration>,
        tweak: impl Fn(&mut HostSettings),
    ) -> [Host; 2] {
        let settings = |i: u8| HostSettings {
            mtu: 1500,
            rx_buffer: 65_535,
            tx_buffer: 65_535,
            seed: u64::from(i),
            address: [10, 0, 0, i + 1],
            congestion,
            nagle,
            ack_delay: ack_delay.map(smoltcp::time::Duration::from),
            give_up: GiveUp::Never,
            engine,
            rto: RtoTimers {
                initial: Duration::from_secs(1),
                min: Duration::from_millis(200),
                max: Duration::from_secs(120),
            },
            rtt_estimator: RttEstimator::Rfc6298,
            timestamps: false,
            spurious_syn_undo: false,
            syn_linear_timeouts: 0,
            sack: false,
            tlp: false,
            linux_acks: false,
            window_rules: WindowRules::Linux,
            rtt_cache: false,
            initial_ssthresh: None,
            rcv_tuning: None,
            snd_tuning: None,
            idle_restart: None,
            cwnd_limited: crate::tcp::tcb::CwndLimited::Segment,
            reno: crate::tcp::tcb::RenoRules::NewReno,
            ack_delay_sim: ack_delay,
        };
        let tweaked = |i: u8| {
            let mut s = settings(i);
            tweak(&mut s);
            s
        };
        let t = Instant::from_secs(1);
        let mut hosts = [
            Host::new(tweaked(0), t).unwrap(),
            Host::new(tweaked(1), t).unwrap(),
        ];
        hosts[1].listen(25).unwrap();
        hosts[0].connect([10, 0, 0, 2], 25, 1025).unwrap();
        for _ in 0..4 {
            exchange(&mut hosts, t);
        }
        assert_eq!(hosts[0].state(), tcp::State::Established);
        hosts
    }

    /// Segments that arrive at one instant (one interleaver block) are answered one by one, as
    /// a kernel's input path does: an ACK each without a delayed ACK (JNOS), one for every
    /// second full segment with one (Linux). Both engines; smoltcp's `Interface::poll` alone
    /// would take the four in before sending anything and answer with one stretch ACK.
    #[test]
    fn a_burst_is_answered_segment_by_segment() {
        let t = Instant::from_secs(1);
        for engine in ENGINES {
            for (delay, acks) in [(None, 4), (Some(Duration::from_millis(40)), 2)] {
                let mut hosts = pair_acking(engine, Congestion::Unlimited, Nagle::Off, delay);
                let mut data = vec![7u8; 4 * 1460];
                hosts[0].send(&mut data, false);
                hosts[0].poll(t);
                let burst = hosts[0].take_tx(Duration::ZERO);
                assert_eq!(payloads(&burst), vec![1460; 4], "{engine:?}");
                burst.into_iter().for_each(|d| hosts[1].deliver(d));
                hosts[1].poll(t);
                let answers = hosts[1].take_tx(Duration::ZERO);
                // Bare ACKs, as many as the rule says.
                let bare = (answers.len(), payloads(&answers).len());
                assert_eq!(bare, (acks, 0), "{engine:?} {delay:?}");
            }
        }
    }

    /// A Linux host behind a closed window whose peer has gone silent gives up as
    /// `tcp_probe_timer` does: its probes back off (doubling from the RTO to 120 s), and the timer
    /// that finds 15 of them unanswered drops the connection instead of sending a sixteenth.
    #[test]
    fn linux_gives_up_behind_a_closed_window_after_fifteen_unanswered_probes() {
        let mut hosts = pair_with(
            TcpEngine::Skywave,
            Congestion::Unlimited,
            Nagle::Off,
            None,
            |s| {
                s.give_up = GiveUp::LINUX;
                // Linux's estimator floors the deviation at 200 ms, so the probes back off from
                // there even at this harness's zero round trip.
                s.rtt_estimator = RttEstimator::Linux;
                if s.address == [10, 0, 0, 2] {
                    s.rx_buffer = 4 * 1460;
                }
            },
        );
        let mut data = vec![b'x'; 20 * 1460];
        hosts[0].send(&mut data, false);
        let mut t = Instant::from_secs(1);
        // The peer takes what its window holds and no more: the window closes.
        for _ in 0..6 {
            exchange(&mut hosts, t);
        }
        // Then it falls silent; the sender's timers run on.
        let start = t;
        let mut probes = Vec::new();
        for _ in 0..200 {
            let Some(next) = hosts[0].poll_at(t) else {
                break;
            };
            t = next.max(t);
            hosts[0].poll(t);
            let sent = hosts[0].take_tx(Duration::from_micros(t.total_micros() as u64));
            if hosts[0].gave_up() {
                break;
            }
            probes.extend(
                sent.iter()
                    .map(|_| (t - start).total_millis() as f64 / 1000.0),
            );
        }
        assert!(hosts[0].gave_up(), "{probes:?}");
        assert_eq!(probes.len(), 15, "{probes:?}");
        // Backed off to Linux's 120 s cap; the verdict comes one capped interval after the last.
        let gaps: Vec<f64> = probes.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|&g| g <= 120.0 + 1e-6), "{gaps:?}");
        assert!((gaps[gaps.len() - 1] - 120.0).abs() < 1e-6, "{gaps:?}");
        assert!((t - start).total_millis() as f64 / 1000.0 - probes[14] >= 120.0 - 1e-6);
    }

    /// Polls both hosts and delivers what each sent to the other; returns the client's data
    /// segments' payload lengths.
    fn exchange(hosts: &mut [Host; 2], t: Instant) -> Vec<usize> {
        hosts[0].poll(t);
        hosts[1].poll(t);
        let a = hosts[0].take_tx(Duration::ZERO);
        let b = hosts[1].take_tx(Duration::ZERO);
        let lens = payloads(&a);
        a.into_iter().for_each(|d| hosts[1].deliver(d));
        b.into_iter().for_each(|d| hosts[0].deliver(d));
        lens
    }

    /// What the client puts on the wire for `data` written at once, before any acknowledgement.
    fn first_flight(
        engine: TcpEngine,
        congestion: Congestion,
        nagle: Nagle,
        data: usize,
    ) -> Vec<usize> {
        let mut hosts = pair(engine, congestion, nagle);
        let mut out = vec![b'x'; data];
        hosts[0].send(&mut out, false);
        let t = Instant::from_secs(1);
        hosts[0].poll(t);
        payloads(&hosts[0].take_tx(Duration::ZERO))
    }

    /// The payload lengths of the datagrams' data segments.
    fn payloads(datagrams: &[Vec<u8>]) -> Vec<usize> {
        datagrams
            .iter()
            .filter_map(|d| {
                let ip = smoltcp::wire::Ipv4Packet::new_checked(&d[..]).ok()?;
                let seg = smoltcp::wire::TcpPacket::new_checked(ip.payload()).ok()?;
                (!seg.payload().is_empty()).then_some(seg.payload().len())
            })
            .collect()
    }

    /// Both engines: the gate on smoltcp and skywave's own TCP send the same first flights.
    const ENGINES: [TcpEngine; 2] = [TcpEngine::Smoltcp, TcpEngine::Skywave];

    #[test]
    fn initial_window_is_counted_in_segments() {
        let iw = Congestion::Segments { initial: 10 };
        for e in ENGINES {
            assert_eq!(first_flight(e, iw, Nagle::Off, 20 * 1460), vec![1460; 10]);
            assert_eq!(
                first_flight(e, Congestion::Unlimited, Nagle::Off, 20 * 1460),
                vec![1460; 20]
            );
        }
        let g = Gate::new(1460, iw, Nagle::Minshall).unwrap();
        assert_eq!(g.cwnd(), Some(10));
        assert!(Gate::new(1460, Congestion::SmoltcpReno, Nagle::Classic).is_none());
    }

    #[test]
    fn minshall_sends_the_tail_behind_full_segments_and_classic_holds_it() {
        let data = 2 * 1460 + 100;
        for e in ENGINES {
            let minshall = first_flight(e, Congestion::Unlimited, Nagle::Minshall, data);
            assert_eq!(minshall, [1460, 1460, 100]);
            let classic = first_flight(e, Congestion::Unlimited, Nagle::Classic, data);
            assert_eq!(classic, [1460, 1460]);
        }
        // Minshall holds a second small segment while the first is unacknowledged.
        let mut hosts = pair(TcpEngine::Smoltcp, Congestion::Unlimited, Nagle::Minshall);
        let t = Instant::from_secs(1);
        let mut out = vec![b'a'; 100];
        hosts[0].send(&mut out, false);
        hosts[0].poll(t);
        let _ = hosts[0].take_tx(Duration::ZERO); // the first small segment, not delivered: unacknowledged
        let mut more = vec![b'b'; 100];
        hosts[0].send(&mut more, false);
        assert_eq!(more.len(), 100, "held");
        hosts[0].send(&mut more, true);
        assert!(more.is_empty(), "closing lets it go");
        let _ = exchange(&mut hosts, t);
    }
}
