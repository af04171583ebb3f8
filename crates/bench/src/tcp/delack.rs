//! When a Linux receiver acknowledges: the delayed-ACK engine of `tcp_input.c`,
//! `tcp_output.c` and `tcp_timer.c` (read for their behaviour, nothing copied), for skywave's
//! TCP (`tcp/tcb.rs`) in the `linux` and `isode-stock` profiles.
//!
//! It sits inside one connection's receive side. `Tcb` tells it what arrived, what it sent and
//! what the application read, and asks it whether an ACK goes now or when the delayed-ACK
//! timer fires. Sans-IO: time comes in as the caller's clock.
//!
//! What it does, as Linux does it:
//! - **Quick-ACK start.** The first data a connection receives puts it in quick-ACK mode for
//!   `min(window / (2 × rcv_mss), 16)` ACKs (at least 2; `tcp_incr_quickack`,
//!   `TCP_MAX_QUICKACKS`): every segment is acknowledged at once, so a peer in slow start is
//!   not held back. So does a gap between two arrivals longer than the RTO, and data received
//!   twice (`tcp_enter_quickack_mode`, which also leaves interactive mode).
//! - **Interactive ("ping-pong") mode.** A host that sends data within `ato` of receiving some
//!   is answering requests (`tcp_event_data_sent`): quick-ACK mode no longer applies, and its
//!   ACKs wait to ride on the reply. A delayed-ACK timer that fires in this mode shows the
//!   guess wrong and leaves it (`tcp_delack_timer_handler`).
//! - **The delay** (`ato`, from 40 ms, `TCP_ATO_MIN`) follows the gaps between arrivals
//!   (`tcp_event_data_recv`) and doubles, up to the RTO, each time the timer fires outside
//!   interactive mode. The timer is set to `ato`, at most 500 ms (200 ms in interactive mode
//!   or after a pushed segment, `TCP_DELACK_MAX`) and at most the smoothed round trip
//!   (`tcp_send_delayed_ack`); an earlier timer already running stands, and one due within a
//!   quarter of `ato` sends at once.
//! - **At once** for more than one receive MSS unacknowledged (`__tcp_ack_snd_check`), the
//!   receive MSS being learnt from the segments (`tcp_measure_rcv_mss`: from at most 536
//!   bytes up to the largest full segment, or down to a repeated short one sent without PSH).
//! - **On reading** (`tcp_cleanup_rbuf`): more than one receive MSS unacknowledged, or a read
//!   that empties the queue after a segment shorter than the receive MSS, or one with PSH
//!   outside interactive mode. The window update on reading is `tcp.rs`'s
//!   [`WindowRules`](super::profile::WindowRules).
//!
//! Left out: the test that the window's right edge advances before an ACK goes at once (a
//! Linux receiver's window follows `rcv_ssthresh`, not its free buffer, which this model's
//! fixed window does not have; here the application reads every arrival at once anyway),
//! SACK compression for out-of-order data (Linux 4.18 on; every out-of-order segment is
//! acknowledged at once here, as before it), and ECN's quick ACKs.
//!
//! Versions: `linux` is a current kernel, `isode-stock` one from about 2012. Their engines
//! differ in details this model does not follow: for a while between the two, interactive
//! mode took three quick replies instead of one (`TCP_PINGPONG_THRESH`, later back to one);
//! older kernels count every segment carrying an ACK against the quick-ACK budget, recent ones
//! only ACKs of data not acknowledged before (here: the recent rule, so a host sending data
//! while in quick-ACK mode keeps its budget longer than a 2012 kernel would); and a passive
//! open's first `lrcvtime` was set at the handshake only from 2017 on. The model takes one
//! reply, as both ends of that span do.

use std::time::Duration;

/// `TCP_ATO_MIN` (HZ/25) and `TCP_DELACK_MIN`: the delay's floor.
pub(super) const ATO_MIN: Duration = Duration::from_millis(40);
/// `TCP_DELACK_MAX` (HZ/5): the longest delay in interactive mode or after a pushed segment.
pub(super) const DELACK_MAX: Duration = Duration::from_millis(200);
/// HZ/2: the longest delay otherwise.
const ATO_MAX: Duration = Duration::from_millis(500);
/// `TCP_MAX_QUICKACKS`.
pub(super) const MAX_QUICKACKS: u32 = 16;
/// `TCP_MSS_DEFAULT`: the receive MSS before full segments show a larger one.
const MSS_DEFAULT: usize = 536;
/// `TCP_MIN_MSS`.
const MIN_MSS: usize = 88;
/// A TCP header without options.
const TCP_HEADER: usize = 20;

/// One connection's delayed-ACK state (Linux's `icsk_ack`).
#[derive(Debug, Clone)]
pub(super) struct LinuxAcks {
    /// The delay; zero until the first data arrives.
    ato: Duration,
    /// Quick ACKs left.
    quick: u32,
    /// Interactive mode.
    pingpong: bool,
    /// When data last arrived.
    lrcvtime: Duration,
    /// The peer's segment size as learnt from what arrived.
    rcv_mss: usize,
    /// The last short segment's length, when it looked like a full one (no PSH).
    last_seg_size: usize,
    /// A pushed segment arrived since the last ACK (`ICSK_ACK_PUSHED`); two or more
    /// (`ICSK_ACK_PUSHED2`).
    pushed: bool,
    pushed2: bool,
    /// This end's own MSS (the largest `rcv_mss` may be).
    advmss: usize,
    /// The header length of a segment carrying only the options every segment carries (20,
    /// 32 with timestamps): Linux's `tcp_header_len`.
    header_len: usize,
}

impl LinuxAcks {
    /// The state of a connection just opened at `now` (Linux 4.11 on sets `lrcvtime` then),
    /// with this end's MSS, the window it advertises, and whether timestamps are on.
    pub(super) fn new(now: Duration, advmss: usize, window: usize, timestamps: bool) -> Self {
        // `tcp_initialize_rcv_mss`: no more than the default MSS or half the window.
        let rcv_mss = advmss.min(MSS_DEFAULT).min(window / 2).max(MIN_MSS);
        LinuxAcks {
            ato: Duration::ZERO,
            quick: 0,
            pingpong: false,
            lrcvtime: now,
            rcv_mss,
            last_seg_size: 0,
            pushed: false,
            pushed2: false,
            advmss: advmss.max(MIN_MSS),
            header_len: TCP_HEADER + if timestamps { 12 } else { 0 },
        }
    }

    /// Quick-ACK mode, and not interactive (`tcp_in_quickack_mode`).
    pub(super) fn quick_mode(&self) -> bool {
        self.quick > 0 && !self.pingpong
    }

    /// More quick ACKs, for a window of `window` bytes (`tcp_incr_quickack`).
    fn incr_quickack(&mut self, window: usize) {
        let n = (window / (2 * self.rcv_mss)).max(2) as u32;
        self.quick = self.quick.max(n.min(MAX_QUICKACKS));
    }

    /// Data arrived twice, or outside the window: quick ACKs from the delay's floor, out of
    /// interactive mode (`tcp_enter_quickack_mode`).
    pub(super) fn enter_quickack(&mut self, window: usize) {
        self.incr_quickack(window);
        self.pingpong = false;
        self.ato = ATO_MIN;
    }

    /// `len` bytes arrived in order at `now` in a segment whose TCP header was `seg_header`
    /// bytes, with PSH or not; `window` is the window last advertised, `rto` the current RTO
    /// (`tcp_event_data_recv` with `tcp_measure_rcv_mss`).
    pub(super) fn data_received(
        &mut self,
        now: Duration,
        len: usize,
        seg_header: usize,
        psh: bool,
        window: usize,
        rto: Duration,
    ) {
        self.measure_rcv_mss(len, seg_header, psh);
        if self.ato.is_zero() {
            // The first data: the engine starts in quick-ACK mode.
            self.incr_quickack(window);
            self.ato = ATO_MIN;
        } else {
            let m = now.saturating_sub(self.lrcvtime);
            if m <= ATO_MIN / 2 {
                self.ato = self.ato / 2 + ATO_MIN / 2;
            } else if m < self.ato {
                self.ato = (self.ato / 2 + m).min(rto);
            } else if m > rto {
                // So long a gap that the sender has likely restarted its window: help it.
                self.incr_quickack(window);
            }
        }
        self.lrcvtime = now;
    }

    fn measure_rcv_mss(&mut self, len: usize, seg_header: usize, psh: bool) {
        let lss = self.last_seg_size;
        self.last_seg_size = 0;
        if len >= self.rcv_mss {
            self.rcv_mss = len.min(self.advmss);
            if psh {
                self.pushed = true;
            }
            return;
        }
        // A short segment: with the header, as big as a default segment, or big enough and
        // sent without PSH (so a full one of a small-MSS peer), and twice the same: that is
        // the peer's MSS.
        let whole = len + seg_header;
        if whole >= MSS_DEFAULT + TCP_HEADER || (whole >= MIN_MSS + TCP_HEADER && !psh) {
            let l = whole.saturating_sub(self.header_len);
            self.last_seg_size = l;
            if l == lss {
                self.rcv_mss = l.max(MIN_MSS);
                return;
            }
        }
        if self.pushed {
            self.pushed2 = true;
        }
        self.pushed = true;
    }

    /// Whether the ACK for what arrived goes at once (`__tcp_ack_snd_check`), with `unacked`
    /// bytes received and not yet acknowledged.
    pub(super) fn ack_at_once(&self, unacked: usize) -> bool {
        unacked > self.rcv_mss || self.quick_mode()
    }

    /// When the delayed ACK goes (`tcp_send_delayed_ack`), given the timer already running
    /// and the smoothed round trip; `None`: at once.
    pub(super) fn delayed_ack_at(
        &self,
        now: Duration,
        running: Option<Duration>,
        srtt: Option<Duration>,
    ) -> Option<Duration> {
        let mut ato = self.ato.max(ATO_MIN);
        if ato > ATO_MIN {
            let mut max_ato = if self.pingpong || self.pushed {
                DELACK_MAX
            } else {
                ATO_MAX
            };
            if let Some(rtt) = srtt {
                max_ato = max_ato.min(rtt.max(ATO_MIN));
            }
            ato = ato.min(max_ato);
        }
        let at = now + ato;
        match running {
            // A timer about to run out sends now; an earlier one stands.
            Some(t) if t <= now + ato / 4 => None,
            Some(t) => Some(t.min(at)),
            None => Some(at),
        }
    }

    /// The delayed-ACK timer fired with an ACK owed (`tcp_delack_timer_handler`): the delay
    /// was too short (double it, up to the RTO) or the connection is not interactive after
    /// all (leave that mode, from the floor).
    pub(super) fn timer_fired(&mut self, rto: Duration) {
        if self.pingpong {
            self.pingpong = false;
            self.ato = ATO_MIN;
        } else {
            self.ato = (self.ato * 2).min(rto).max(ATO_MIN);
        }
    }

    /// A segment carrying an ACK went; `owed`: it acknowledged data not acknowledged before
    /// (`tcp_event_ack_sent`: one quick ACK used, the pushed marks cleared).
    pub(super) fn ack_sent(&mut self, owed: bool) {
        if owed && self.quick > 0 {
            self.quick -= 1;
            if self.quick == 0 {
                self.ato = ATO_MIN;
            }
        }
        self.pushed = false;
        self.pushed2 = false;
    }

    /// Data went at `now` (`tcp_event_data_sent`): a reply within `ato` of the last arrival
    /// makes the connection interactive.
    pub(super) fn data_sent(&mut self, now: Duration) {
        if now.saturating_sub(self.lrcvtime) < self.ato {
            self.pingpong = true;
        }
    }

    /// The application read `copied` bytes and left the receive queue empty, with `unacked`
    /// bytes not yet acknowledged: whether the ACK goes now (`tcp_cleanup_rbuf`).
    pub(super) fn ack_on_read(&self, copied: usize, unacked: usize) -> bool {
        if unacked == 0 {
            return false;
        }
        unacked > self.rcv_mss || (copied > 0 && (self.pushed2 || (self.pushed && !self.pingpong)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A connection with Linux's numbers: MSS 1448 with timestamps, a 65535-byte window.
    fn fresh() -> LinuxAcks {
        LinuxAcks::new(Duration::ZERO, 1448, 65_535, true)
    }

    #[test]
    fn the_first_data_opens_sixteen_quick_acks() {
        let mut a = fresh();
        assert_eq!(a.rcv_mss, 536);
        assert!(!a.quick_mode());
        a.data_received(ms(100), 100, 32, true, 65_535, Duration::from_secs(1));
        // 65535 / (2 × 536) = 61, capped at 16.
        assert_eq!(a.quick, 16);
        assert!(a.quick_mode() && a.ack_at_once(100));
        for _ in 0..15 {
            a.ack_sent(true);
        }
        assert!(a.quick_mode());
        a.ack_sent(true);
        assert!(!a.quick_mode() && !a.ack_at_once(100));
        // A bare ACK of nothing new uses none.
        let mut b = fresh();
        b.data_received(ms(100), 100, 32, true, 65_535, Duration::from_secs(1));
        b.ack_sent(false);
        assert_eq!(b.quick, 16);
    }

    #[test]
    fn a_small_window_still_gets_two_quick_acks() {
        let mut a = LinuxAcks::new(Duration::ZERO, 460, 1024, false);
        assert_eq!(a.rcv_mss, 460);
        a.data_received(ms(10), 460, 20, false, 700, Duration::from_secs(1));
        assert_eq!(a.quick, 2);
    }

    #[test]
    fn a_reply_within_ato_makes_the_connection_interactive() {
        let mut a = fresh();
        a.data_received(ms(1000), 40, 32, true, 65_535, Duration::from_secs(3));
        a.data_sent(ms(1010));
        assert!(a.pingpong && !a.quick_mode() && !a.ack_at_once(40));
        // Its delayed ACK waits at most 200 ms, and a timer that fires leaves the mode.
        a.ato = ms(900);
        assert_eq!(a.delayed_ack_at(ms(2000), None, None), Some(ms(2200)));
        a.timer_fired(Duration::from_secs(3));
        assert!(!a.pingpong);
        assert_eq!(a.ato, ATO_MIN);
        // A reply later than ato does not.
        let mut b = fresh();
        b.data_received(ms(1000), 40, 32, true, 65_535, Duration::from_secs(3));
        b.data_sent(ms(1040));
        assert!(!b.pingpong);
    }

    #[test]
    fn the_delay_doubles_on_each_timer_up_to_the_bounds() {
        let mut a = fresh();
        a.data_received(ms(0), 1448, 32, false, 65_535, Duration::from_secs(4));
        a.quick = 0;
        assert_eq!(a.delayed_ack_at(ms(0), None, None), Some(ms(40)));
        a.timer_fired(Duration::from_secs(4));
        assert_eq!(a.ato, ms(80));
        for _ in 0..10 {
            a.timer_fired(Duration::from_secs(4));
        }
        assert_eq!(a.ato, Duration::from_secs(4));
        // Bulk: at most 500 ms; after a pushed segment 200 ms; never beyond the round trip.
        assert_eq!(a.delayed_ack_at(ms(0), None, None), Some(ms(500)));
        assert_eq!(a.delayed_ack_at(ms(0), None, Some(ms(300))), Some(ms(300)));
        a.pushed = true;
        assert_eq!(a.delayed_ack_at(ms(0), None, None), Some(ms(200)));
        // A running timer that is earlier stands; one about to run out sends now.
        assert_eq!(a.delayed_ack_at(ms(0), Some(ms(150)), None), Some(ms(150)));
        assert_eq!(a.delayed_ack_at(ms(0), Some(ms(50)), None), None);
    }

    #[test]
    fn the_delay_follows_the_gaps_between_arrivals() {
        let rto = Duration::from_secs(3);
        let mut a = fresh();
        a.data_received(ms(0), 1448, 32, false, 65_535, rto);
        a.ato = ms(400);
        // Back to back: halved towards 20 ms plus half.
        a.data_received(ms(0), 1448, 32, false, 65_535, rto);
        assert_eq!(a.ato, ms(220));
        // A gap shorter than ato: half of it plus the gap.
        a.data_received(ms(100), 1448, 32, false, 65_535, rto);
        assert_eq!(a.ato, ms(210));
        // A gap longer than the RTO: quick ACKs again.
        a.quick = 0;
        a.data_received(ms(5000), 1448, 32, false, 65_535, rto);
        assert!(a.quick > 0);
    }

    #[test]
    fn the_receive_mss_is_learnt_from_full_segments_and_repeated_short_ones() {
        let mut a = fresh();
        a.data_received(ms(0), 1448, 32, false, 65_535, Duration::from_secs(1));
        assert_eq!(a.rcv_mss, 1448);
        a.quick = 0;
        assert!(!a.ack_at_once(1448) && a.ack_at_once(1449));
        // A peer with MSS 448 (MTU 500 with timestamps): two full segments without PSH.
        let mut b = fresh();
        b.data_received(ms(0), 448, 32, false, 65_535, Duration::from_secs(1));
        assert_eq!(b.rcv_mss, 536);
        b.data_received(ms(0), 448, 32, false, 65_535, Duration::from_secs(1));
        assert_eq!(b.rcv_mss, 448);
        // Short pushed segments never teach it; they mark the ACK as pushed.
        let mut c = fresh();
        c.data_received(ms(0), 30, 32, true, 65_535, Duration::from_secs(1));
        c.data_received(ms(0), 30, 32, true, 65_535, Duration::from_secs(1));
        assert_eq!(c.rcv_mss, 536);
        assert!(c.pushed && c.pushed2);
    }

    #[test]
    fn a_read_acknowledges_pushed_data_unless_interactive() {
        let mut a = fresh();
        a.data_received(ms(0), 1448, 32, true, 65_535, Duration::from_secs(1));
        a.quick = 0;
        assert!(a.ack_on_read(1448, 1448));
        a.pingpong = true;
        assert!(!a.ack_on_read(1448, 1448));
        // Two short pushed segments go at once even then; so does more than one MSS.
        a.data_received(ms(0), 30, 32, true, 65_535, Duration::from_secs(1));
        a.data_received(ms(0), 30, 32, true, 65_535, Duration::from_secs(1));
        assert!(a.ack_on_read(60, 1508));
        assert!(a.ack_on_read(0, 3000));
        // Nothing owed, nothing sent.
        assert!(!a.ack_on_read(60, 0));
        a.ack_sent(true);
        assert!(!a.pushed && !a.pushed2);
    }

    #[test]
    fn data_received_twice_leaves_interactive_mode() {
        let mut a = fresh();
        a.data_received(ms(0), 40, 32, true, 65_535, Duration::from_secs(1));
        a.data_sent(ms(1));
        assert!(a.pingpong);
        a.enter_quickack(65_535);
        assert!(!a.pingpong && a.quick_mode());
    }
}
