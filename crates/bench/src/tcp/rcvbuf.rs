//! Linux's receive window as a 3.4-3.9 kernel sizes it with its defaults: the window a
//! receiver opens with, how it grows as data arrives (`tcp_grow_window`), and the
//! receive-buffer autotuning ("dynamic right sizing", `tcp_rcv_space_adjust`, on by default
//! since 2.6.7 as `tcp_moderate_rcvbuf`) that raises the buffer and the window's clamp once
//! per receiver round trip to twice what the application read in the last one.
//!
//! It sits inside skywave's TCP (`tcp/tcb.rs`), which asks it what window to advertise and
//! tells it what arrived, what was read and each round-trip sample; no I/O, no clock of its
//! own. A fixed window (`TcbConfig::rx_buffer`) is what every other profile keeps.
//!
//! Why it matters on a 5066 link: a stock Linux receiver does not stay at the 65535 bytes an
//! unscaled window allows. With the application reading as the data comes, every round trip
//! it offers twice what arrived in the last one, so the window stays ahead of the flight, and
//! the sender's congestion window and the node's flow control, not the receiver, decide how
//! much waits in the node's queue.
//!
//! From `net/ipv4/tcp_input.c` and `tcp_output.c` of the 3.x kernels (the `isode-stock` era:
//! after 3.4's `tcp_adv_win_scale` of 1 and `tcp_rmem[2]` of 6 MB, before the initial receive
//! window grew to twice the initial congestion window, 20 segments):
//! - `tcp_select_initial_window`: the SYN's window is the smaller of the buffer's space
//!   (`tcp_full_space`) rounded down to whole segments and 10 segments
//!   (`TCP_DEFAULT_INIT_RCVWND`); the window scale is the one that fits `tcp_rmem[2]`;
//! - `tcp_init_buffer_space`: the clamp is the buffer's space less one segment ("force
//!   reservation of one segment"), `rcv_ssthresh` the initial window, `rcvq_space.space` too;
//! - `tcp_grow_window` on each in-order segment of 128 bytes or more: `rcv_ssthresh` grows by
//!   two segments (the truesize test passes for these sizes, below) up to the clamp, while
//!   the buffer has room;
//! - `__tcp_select_window`: the window offered is the buffer's free space, at most
//!   `rcv_ssthresh`;
//! - `tcp_rcv_rtt_measure_ts`: with timestamps, each full-sized segment gives the receiver a
//!   round-trip sample, now less its echoed timestamp, smoothed by 1/8 (`tcp_rcv_rtt_update`);
//! - `tcp_rcv_space_adjust` on each read: once a smoothed round trip has passed since the last
//!   measure, `space = max(space, 2 × bytes read since)`; if it grew, the buffer becomes
//!   `space / advmss` segments' worth of memory (at most `tcp_rmem[2]`) and, if that is more
//!   than it had, the clamp becomes `space`.
//!
//! Memory is counted as the kernel counts it, in `truesize`: a segment of `advmss` bytes takes
//! `advmss + MAX_TCP_HEADER` plus the aligned `sk_buff` and `skb_shared_info` (x86-64
//! distribution kernels: 304, 256 and 320 bytes), and `tcp_win_from_space` gives half of a
//! buffer to data (`tcp_adv_win_scale` 1). Unread data is charged at its byte count, not its
//! truesize; the bulk and SMTP receivers read at once, so it is zero there. Not modelled:
//! memory pressure (`tcp_clamp_window`, `tcp_prune_queue`) and the window measure without
//! timestamps (`tcp_rcv_rtt_measure`), which no Linux profile needs.

use std::time::Duration;

/// `tcp_rmem[1]`: the buffer a socket starts with.
const RMEM_DEFAULT: usize = 87_380;
/// `tcp_rmem[2]` from 3.4 on: the most autotuning may give it, and what Linux sizes its
/// window scale for.
pub(crate) const RMEM_MAX: usize = 6_291_456;
/// `TCP_DEFAULT_INIT_RCVWND`: the initial window in segments (later kernels offer more).
const INIT_RCVWND: usize = 10;
/// `MAX_TCP_HEADER` plus the aligned `sk_buff` and `skb_shared_info` on x86-64: the memory a
/// segment takes beyond its data.
const SKB_OVERHEAD: usize = 304 + 256 + 320;
/// Segments shorter than this do not grow the window (`tcp_event_data_recv`).
const GROW_MIN: usize = 128;
/// The receiver's round-trip estimate's gain (`tcp_rcv_rtt_update`: 1/8).
const RTT_GAIN: f64 = 0.125;

/// `tcp_win_from_space` with `tcp_adv_win_scale` 1: the data half of `space` bytes of memory.
fn win_from_space(space: usize) -> usize {
    space - space / 2
}

/// One connection's receive-window state.
#[derive(Debug, Clone)]
pub(crate) struct RcvBuf {
    /// The MSS this host advertises (`tp->advmss`).
    advmss: usize,
    /// `sk_rcvbuf`: bytes of memory the receive queue may take.
    rcvbuf: usize,
    /// `window_clamp`: the most the window may grow to.
    clamp: usize,
    /// `rcv_ssthresh`: the window's current ceiling, raised as segments arrive.
    ssthresh: usize,
    /// `rcvq_space.space`: twice the most read in one receiver round trip, at least the
    /// initial window.
    space: usize,
    /// Bytes the application has read (`copied_seq`, as a count).
    copied: u64,
    /// `rcvq_space.seq` and `.time`: what had been read, and when, at the last measure.
    measure: Option<(u64, Duration)>,
    /// The receiver's smoothed round trip, seconds (`rcv_rtt_est`).
    rtt: Option<f64>,
}

impl RcvBuf {
    /// A new connection's state for a host whose MSS is `advmss`.
    pub(crate) fn new(advmss: u16) -> RcvBuf {
        let advmss = usize::from(advmss).max(1);
        let full = win_from_space(RMEM_DEFAULT);
        let rounded = if full > advmss {
            full - full % advmss
        } else {
            full
        };
        let initial = rounded.min(INIT_RCVWND * advmss);
        let clamp = if full > 2 * advmss {
            (full - advmss).max(2 * advmss)
        } else {
            full
        };
        RcvBuf {
            advmss,
            rcvbuf: RMEM_DEFAULT,
            clamp,
            ssthresh: initial.min(clamp),
            space: initial,
            copied: 0,
            measure: None,
            rtt: None,
        }
    }

    /// Bytes of data the buffer holds (`tcp_full_space`).
    pub(crate) fn capacity(&self) -> usize {
        win_from_space(self.rcvbuf)
    }

    /// The window to offer with `unread` bytes waiting for the application.
    pub(crate) fn window(&self, unread: usize) -> usize {
        self.capacity().saturating_sub(unread).min(self.ssthresh)
    }

    /// The memory one full segment takes, rounded up until its data half holds the segment
    /// (`tcp_rcv_space_adjust`'s `rcvmem`).
    fn segment_memory(&self) -> usize {
        let mut mem = self.advmss + SKB_OVERHEAD;
        while win_from_space(mem) < self.advmss {
            mem += 128;
        }
        mem
    }

    /// An in-order segment of `len` bytes arrived with `unread` bytes (itself included) now
    /// waiting: `tcp_grow_window`.
    pub(crate) fn data_received(&mut self, len: usize, unread: usize) {
        if len < GROW_MIN {
            return;
        }
        let room = self.capacity().saturating_sub(unread);
        if self.ssthresh < self.clamp && self.ssthresh < room {
            // A segment of these sizes from a point-to-point interface passes Linux's truesize
            // test (its data is at least half its memory, or a quarter while the window is
            // far below `tcp_rmem[2]`), so the step is two segments.
            let incr = (2 * self.advmss).max(2 * len);
            self.ssthresh = (self.ssthresh + incr).min(self.clamp);
        }
    }

    /// A full-sized segment echoed a timestamp we sent `sample` ago: `tcp_rcv_rtt_update`.
    pub(crate) fn rtt_sample(&mut self, sample: Duration) {
        let m = sample.as_secs_f64().max(0.001);
        self.rtt = Some(match self.rtt {
            None => m,
            Some(r) => r + (m - r) * RTT_GAIN,
        });
    }

    /// The application read `n` bytes at `now`: `tcp_rcv_space_adjust`.
    pub(crate) fn read(&mut self, now: Duration, n: usize) {
        self.copied += n as u64;
        let Some((seq, time)) = self.measure else {
            self.measure = Some((self.copied, now));
            return;
        };
        let Some(rtt) = self.rtt else {
            return;
        };
        if now.saturating_sub(time).as_secs_f64() < rtt {
            return;
        }
        let read = usize::try_from(self.copied - seq).unwrap_or(usize::MAX);
        let space = self.space.max(read.saturating_mul(2));
        if space != self.space {
            self.space = space;
            let segments = (space / self.advmss).max(1);
            let buf = segments.saturating_mul(self.segment_memory()).min(RMEM_MAX);
            if buf > self.rcvbuf {
                self.rcvbuf = buf;
                self.clamp = space;
            }
        }
        self.measure = Some((self.copied, now));
    }

    /// The window's current ceiling (`rcv_ssthresh`), for tests and traces.
    #[cfg(test)]
    pub(crate) fn ceiling(&self) -> (usize, usize) {
        (self.ssthresh, self.clamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn a_receiver_opens_with_ten_segments_of_a_half_used_buffer() {
        let r = RcvBuf::new(1460);
        // 87380 bytes of memory, half of it for data; ten segments of it offered.
        assert_eq!(r.capacity(), 43_690);
        assert_eq!(r.window(0), 14_600);
        // The clamp keeps one segment in reserve.
        assert_eq!(r.ceiling(), (14_600, 42_230));
        assert_eq!(RcvBuf::new(460).window(0), 4_600);
        // 6 MB in 16 bits takes a shift of 7.
        assert_eq!(super::super::tcb::window_shift(RMEM_MAX), 7);
    }

    #[test]
    fn each_full_segment_raises_the_ceiling_by_two_segments_up_to_the_clamp() {
        let mut r = RcvBuf::new(1460);
        r.data_received(1448, 1448);
        assert_eq!(r.window(0), 14_600 + 2_920);
        // Short segments do not count.
        r.data_received(100, 100);
        assert_eq!(r.window(0), 17_520);
        for _ in 0..20 {
            r.data_received(1448, 0);
        }
        assert_eq!(r.ceiling().0, 42_230);
        // Unread data takes its room.
        assert_eq!(r.window(40_000), 3_690);
    }

    #[test]
    fn autotuning_offers_twice_what_was_read_in_a_round_trip() {
        let mut r = RcvBuf::new(1460);
        for _ in 0..30 {
            r.data_received(1448, 0);
        }
        // Nothing moves before a round-trip sample, or within one round trip of the last
        // measure.
        r.read(secs(10.0), 1000);
        r.read(secs(20.0), 40_000);
        assert_eq!(r.capacity(), 43_690);
        r.rtt_sample(secs(30.0));
        r.read(secs(30.0), 1000);
        assert_eq!(r.capacity(), 43_690);
        r.read(secs(45.0), 20_000);
        // 61000 bytes read since the measure at 10 s, more than a round trip ago: space
        // 122000, that is 83 segments of 2980 bytes of memory each, and the clamp 122000.
        assert_eq!(r.capacity(), 83 * 2980 / 2);
        assert_eq!(r.ceiling().1, 122_000);
        // The ceiling then grows to it segment by segment.
        for _ in 0..40 {
            r.data_received(1448, 0);
        }
        assert_eq!(r.window(0), 122_000);
        // A slower round trip never shrinks it.
        r.read(secs(100.0), 10);
        assert_eq!(r.window(0), 122_000);
    }

    #[test]
    fn the_buffer_stops_at_tcp_rmem_max() {
        let mut r = RcvBuf::new(1460);
        r.rtt_sample(secs(1.0));
        r.read(secs(0.0), 0);
        r.read(secs(2.0), 10_000_000);
        assert_eq!(r.capacity(), RMEM_MAX / 2);
    }

    #[test]
    fn the_receivers_round_trip_is_smoothed_by_an_eighth() {
        let mut r = RcvBuf::new(1460);
        r.rtt_sample(secs(8.0));
        r.rtt_sample(secs(16.0));
        assert_eq!(r.rtt, Some(9.0));
    }
}
