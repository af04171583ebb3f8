//! Linux's receive window as a kernel sizes it with its defaults: the window a receiver
//! opens with, how it grows as data arrives (`tcp_grow_window`), and the receive-buffer
//! autotuning ("dynamic right sizing", `tcp_rcv_space_adjust`, on by default since 2.6.7 as
//! `tcp_moderate_rcvbuf`) that raises the buffer and the window's clamp once per receiver
//! round trip. Two kernels' rules ([`RcvEra`]): a 3.4-3.9 kernel's (`isode-stock`, a stock
//! Linux of 2012) and a 4.20-6.5 kernel's (`linux`, a current host).
//!
//! It sits inside skywave's TCP (`tcp/tcb.rs`), which asks it what window to advertise and
//! tells it what arrived, what was read and each round-trip sample; no I/O, no clock of its
//! own. A fixed window (`TcbConfig::rx_buffer`) is what every other profile keeps.
//!
//! Why it matters on a 5066 link: a stock Linux receiver does not stay at the 65535 bytes an
//! unscaled window allows. With the application reading as the data comes, every round trip
//! it offers about twice what arrived in the last one, so the window stays ahead of the
//! flight, and the sender's congestion window and the node's flow control, not the receiver,
//! decide how much waits in the node's queue. And a Linux SYN always carries the
//! window-scale option (`tcp_window_scaling`, on by default), four bytes more in each
//! handshake segment, which on a 5066 link shift the handshake against the 1 s initial RTO.
//!
//! Both eras, from `net/ipv4/tcp_input.c` and `tcp_output.c`, with `tcp_adv_win_scale` 1 (3.4
//! on: `tcp_win_from_space` gives half of a buffer to data) and `tcp_rmem[2]` of 6 MB:
//! - `tcp_select_initial_window`: the SYN's window is the buffer's space
//!   (`tcp_full_space`) rounded down to whole segments, and in 3.x at most 10 segments
//!   (`TCP_DEFAULT_INIT_RCVWND`); the window scale is the one that fits `tcp_rmem[2]`;
//! - `tcp_init_buffer_space`: the clamp is the buffer's space less one segment ("force
//!   reservation of one segment"), `rcv_ssthresh` the initial window within the clamp;
//! - `tcp_grow_window` on each in-order segment of 128 bytes or more: `rcv_ssthresh` grows by
//!   two segments (the truesize test passes for these sizes, below) up to the clamp, while
//!   the buffer has room;
//! - `__tcp_select_window`: the window offered is the buffer's free space, at most
//!   `rcv_ssthresh`;
//! - `tcp_rcv_rtt_measure_ts`: with timestamps, each full-sized segment gives the receiver a
//!   round-trip sample, now less its echoed timestamp, smoothed by 1/8 (`tcp_rcv_rtt_update`);
//! - `tcp_rcv_space_adjust` on each read, once a smoothed round trip has passed since the
//!   last measure (the rules differ by era, [`RcvEra`]); when it grows the buffer, the
//!   window's clamp follows.
//!
//! Memory is counted as the kernel counts it, in `truesize`: a segment of `advmss` bytes takes
//! `advmss + MAX_TCP_HEADER` plus the aligned `sk_buff` and `skb_shared_info` (x86-64
//! distribution kernels: 304, 256 and 320 bytes; later kernels differ by a few bytes, which
//! the rounding of `segment_memory` absorbs). Unread data is charged at its byte count, not its
//! truesize; the bulk and SMTP receivers read at once, so it is zero there. Not modelled:
//! memory pressure (`tcp_clamp_window`, `tcp_prune_queue`), the window measure without
//! timestamps (`tcp_rcv_rtt_measure`), which no Linux profile needs, and the payload ratio
//! 6.6 and later measure from the network driver's buffers in place of `tcp_adv_win_scale`
//! (from the same 50 % they open with the same 64240 bytes, then follow the driver).

use std::time::Duration;

/// Which kernel's receive-window rules a host runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RcvEra {
    /// 3.4-3.9: a buffer of 87380 bytes (`tcp_rmem[1]`), a SYN window of ten segments, and
    /// autotuning to `space = max(space, 2 × bytes read)` per receiver round trip, the buffer
    /// that many segments' memory.
    Linux34,
    /// 4.20-6.5: a buffer of 131072 bytes (`tcp_rmem[1]` since 4.20, "tcp: up initial rmem to
    /// 128KB and SYN rwin to around 64KB"), so a SYN window of 44 segments (64240 bytes with
    /// MSS 1460) and a clamp one segment less; autotuning once more than `space` was read in
    /// a round trip (`space` starts at ten segments, "tcp: start receiver buffer autotuning
    /// sooner"): the window becomes `2 × read + 16 segments`, plus twice that times the
    /// growth since the last round trip (slow start), the buffer that many segments' memory.
    Linux420,
}

impl RcvEra {
    /// `tcp_rmem[1]`: the buffer a socket starts with.
    fn rmem_default(self) -> usize {
        match self {
            RcvEra::Linux34 => 87_380,
            RcvEra::Linux420 => 131_072,
        }
    }
}

/// `tcp_rmem[2]` from 3.4 on: the most autotuning may give it, and what Linux sizes its
/// window scale for.
pub(crate) const RMEM_MAX: usize = 6_291_456;
/// `TCP_DEFAULT_INIT_RCVWND` (3.x): the initial window in segments; also `TCP_INIT_CWND`, the
/// first `space` of 4.20-6.5's autotuning.
pub(crate) const INIT_RCVWND: usize = 10;
/// The cushion 4.20-6.5's autotuning adds to twice what was read, in segments.
const CUSHION: usize = 16;
/// `MAX_TCP_HEADER` on x86-64 distribution kernels (128 + `MAX_HEADER`).
pub(crate) const MAX_TCP_HEADER: usize = 304;
/// `SKB_DATA_ALIGN(sizeof(struct sk_buff))` on x86-64.
pub(crate) const SK_BUFF: usize = 256;
/// `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` on x86-64.
pub(crate) const SHARED_INFO: usize = 320;
/// `MAX_TCP_HEADER` plus the aligned `sk_buff` and `skb_shared_info`: the memory a segment
/// takes beyond its data (`SKB_TRUESIZE(advmss + MAX_TCP_HEADER)` less the data).
pub(crate) const SKB_OVERHEAD: usize = MAX_TCP_HEADER + SK_BUFF + SHARED_INFO;
/// Segments shorter than this do not grow the window (`tcp_event_data_recv`).
const GROW_MIN: usize = 128;
/// The receiver's round-trip estimate's gain (`tcp_rcv_rtt_update`: 1/8).
const RTT_GAIN: f64 = 0.125;

/// `tcp_win_from_space` with `tcp_adv_win_scale` 1: the data half of `space` bytes of memory.
fn win_from_space(space: usize) -> usize {
    space - space / 2
}

/// The window a SYN or SYN-ACK offers (`tcp_select_initial_window`'s `rcv_wnd`): the starting
/// buffer's space in whole segments of `advmss`, in 3.x at most ten of them; a SYN's window
/// field is never scaled, so at most 65535.
fn initial_window(era: RcvEra, advmss: usize) -> usize {
    let full = win_from_space(era.rmem_default());
    let rounded = if full > advmss {
        full - full % advmss
    } else {
        full
    };
    match era {
        RcvEra::Linux34 => rounded.min(INIT_RCVWND * advmss),
        RcvEra::Linux420 => rounded.min(65_535),
    }
}

/// One connection's receive-window state.
#[derive(Debug, Clone)]
pub(crate) struct RcvBuf {
    /// Whose rules.
    era: RcvEra,
    /// The MSS this host advertises (`tp->advmss`).
    advmss: usize,
    /// `sk_rcvbuf`: bytes of memory the receive queue may take.
    rcvbuf: usize,
    /// `window_clamp`: the most the window may grow to.
    clamp: usize,
    /// `rcv_ssthresh`: the window's current ceiling, raised as segments arrive.
    ssthresh: usize,
    /// `rcvq_space.space`: 3.4-3.9: twice the most read in one receiver round trip, at least
    /// the initial window; 4.20-6.5: what was read in the last round trip that grew it.
    space: usize,
    /// Bytes the application has read (`copied_seq`, as a count).
    copied: u64,
    /// `rcvq_space.seq` and `.time`: what had been read, and when, at the last measure.
    measure: Option<(u64, Duration)>,
    /// The receiver's smoothed round trip, seconds (`rcv_rtt_est`).
    rtt: Option<f64>,
}

impl RcvBuf {
    /// A new connection's state for a host whose MSS is `advmss`, by `era`'s rules.
    pub(crate) fn new(advmss: u16, era: RcvEra) -> RcvBuf {
        let advmss = usize::from(advmss).max(1);
        let rcvbuf = era.rmem_default();
        let full = win_from_space(rcvbuf);
        let clamp = if full > 2 * advmss {
            (full - advmss).max(2 * advmss)
        } else {
            full
        };
        let initial = initial_window(era, advmss);
        let ssthresh = initial.min(clamp);
        RcvBuf {
            era,
            advmss,
            rcvbuf,
            clamp,
            ssthresh,
            space: match era {
                RcvEra::Linux34 => initial,
                RcvEra::Linux420 => ssthresh.min(INIT_RCVWND * advmss),
            },
            copied: 0,
            measure: None,
            rtt: None,
        }
    }

    /// The window the SYN or SYN-ACK offers ([`initial_window`]).
    pub(crate) fn syn_window(&self) -> usize {
        initial_window(self.era, self.advmss)
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

    /// The memory `window` bytes of full segments take, at most `tcp_rmem[2]`.
    fn buffer_for(&self, window: usize) -> usize {
        let segments = (window / self.advmss).max(1);
        segments.saturating_mul(self.segment_memory()).min(RMEM_MAX)
    }

    /// Autotuning asks for `buf` bytes of memory: if that is more than the buffer has, it
    /// gets it, and the clamp becomes `clamp`.
    fn grow_buffer(&mut self, buf: usize, clamp: usize) {
        if buf > self.rcvbuf {
            self.rcvbuf = buf;
            self.clamp = clamp;
        }
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
        match self.era {
            RcvEra::Linux34 => {
                let space = self.space.max(read.saturating_mul(2));
                if space != self.space {
                    self.space = space;
                    self.grow_buffer(self.buffer_for(space), space);
                }
            }
            RcvEra::Linux420 => {
                if read > self.space {
                    let mut rcvwin = read.saturating_mul(2).saturating_add(CUSHION * self.advmss);
                    // "Accommodate for sender rate increase (eg. slow start)".
                    let grow = (rcvwin as u128 * (read - self.space) as u128
                        / self.space.max(1) as u128)
                        .min(usize::MAX as u128) as usize;
                    rcvwin = rcvwin.saturating_add(grow.saturating_mul(2));
                    let buf = self.buffer_for(rcvwin);
                    self.grow_buffer(buf, win_from_space(buf));
                    self.space = read;
                }
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
        let r = RcvBuf::new(1460, RcvEra::Linux34);
        // 87380 bytes of memory, half of it for data; ten segments of it offered.
        assert_eq!(r.capacity(), 43_690);
        assert_eq!(r.window(0), 14_600);
        // The clamp keeps one segment in reserve.
        assert_eq!(r.ceiling(), (14_600, 42_230));
        assert_eq!(RcvBuf::new(460, RcvEra::Linux34).window(0), 4_600);
        // 6 MB in 16 bits takes a shift of 7.
        assert_eq!(super::super::tcb::window_shift(RMEM_MAX), 7);
    }

    #[test]
    fn each_full_segment_raises_the_ceiling_by_two_segments_up_to_the_clamp() {
        let mut r = RcvBuf::new(1460, RcvEra::Linux34);
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
        let mut r = RcvBuf::new(1460, RcvEra::Linux34);
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
        let mut r = RcvBuf::new(1460, RcvEra::Linux34);
        r.rtt_sample(secs(1.0));
        r.read(secs(0.0), 0);
        r.read(secs(2.0), 10_000_000);
        assert_eq!(r.capacity(), RMEM_MAX / 2);
    }

    #[test]
    fn the_receivers_round_trip_is_smoothed_by_an_eighth() {
        let mut r = RcvBuf::new(1460, RcvEra::Linux34);
        r.rtt_sample(secs(8.0));
        r.rtt_sample(secs(16.0));
        assert_eq!(r.rtt, Some(9.0));
    }

    #[test]
    fn a_current_kernel_opens_at_44_segments_and_autotunes_past_what_was_read() {
        let mut r = RcvBuf::new(1460, RcvEra::Linux420);
        // 131072 bytes of memory, half of it for data: 44 whole segments in the SYN, the
        // clamp one segment short of the half.
        assert_eq!(r.capacity(), 65_536);
        assert_eq!(r.syn_window(), 64_240);
        assert_eq!(r.ceiling(), (64_076, 64_076));
        assert_eq!(r.window(0), 64_076);
        // Segments arriving do not raise the ceiling past the clamp.
        r.data_received(1448, 0);
        assert_eq!(r.window(0), 64_076);
        // Autotuning waits for more than ten segments (its first `space`) read in one
        // receiver round trip.
        r.rtt_sample(secs(10.0));
        r.read(secs(0.0), 0);
        r.read(secs(10.0), 14_600);
        assert_eq!(r.capacity(), 65_536);
        // 29200 read in the next: the window asked is 2 × 29200 + 16 segments = 81760, plus
        // twice that times the growth (29200 - 14600) / 14600, 163520: 245280 bytes, 168
        // segments of 2980 bytes of memory, and the clamp is half of that memory.
        r.read(secs(20.0), 29_200);
        assert_eq!(r.capacity(), 168 * 2980 / 2);
        assert_eq!(r.ceiling(), (64_076, 168 * 2980 / 2));
        // The ceiling then grows towards it two segments a segment.
        r.data_received(1448, 0);
        assert_eq!(r.window(0), 64_076 + 2_920);
        // A round trip that reads no more than the last leaves the buffer as it is.
        r.read(secs(30.0), 29_200);
        assert_eq!(r.capacity(), 168 * 2980 / 2);
        // The 3.x rules of the same reads: a SYN of ten segments and a buffer of twice the
        // most read.
        let mut old = RcvBuf::new(1460, RcvEra::Linux34);
        assert_eq!(old.syn_window(), 14_600);
        old.rtt_sample(secs(10.0));
        old.read(secs(0.0), 0);
        old.read(secs(10.0), 14_600);
        old.read(secs(20.0), 29_200);
        assert_eq!(old.ceiling().1, 58_400);
    }
}
