//! Linux's send buffer as a kernel sizes it with its defaults: what a socket starts with
//! (`tcp_wmem[1]`), what it is raised to once the connection is open
//! (`tcp_init_buffer_space`), and how it grows while the application waits for room
//! (`tcp_new_space`). Two kernels' rules ([`SndEra`]): before 3.16 (`isode-stock`, a Linux of
//! 2012) and from 3.16 on ("tcp: sndbuf autotuning improvements"; `linux`, a current host).
//!
//! It sits inside skywave's TCP (`tcp/tcb.rs`), which asks it how much the application may
//! have queued (sent and unacknowledged, or not sent yet) and tells it when the connection
//! opens and when an ACK freed room while the writer waited; no I/O, no clock of its own. A
//! fixed buffer (`TcbConfig::tx_buffer`) is what every other profile keeps.
//!
//! Why it matters on a 5066 link: a buffer fixed at some size caps the flight at that size
//! whatever the congestion and receive windows allow, and at 1200 and 9600 bit/s with MTU
//! 1500 a stock Linux's flight grows past 64 KB into the node's queue. Linux sizes the
//! buffer for twice the congestion window ("Fast Recovery (RFC 5681 3.2): Cubic needs 1.7
//! factor, rounded to 2"), so it never holds the flight back for longer than one ACK: it is
//! raised whenever it binds, up to `tcp_wmem[2]`.
//!
//! The rules, from `net/ipv4/tcp_input.c` (`tcp_fixup_sndbuf`, `tcp_sndbuf_expand`,
//! `tcp_new_space`, `tcp_should_expand_sndbuf`, `tcp_check_space`) with the defaults
//! `tcp_wmem` = 4096 16384 4194304 and `tcp_reordering` 3:
//! - a socket starts with 16384 bytes;
//! - once open, before 3.16: at least ten segments' `SKB_TRUESIZE(mss + MAX_TCP_HEADER)`
//!   (`tcp_fixup_sndbuf`); from 3.16: `tcp_sndbuf_expand` below, from ten segments;
//! - after an ACK that freed room in the queue, once the output it let out has gone
//!   (`tcp_data_snd_check` pushes, then checks the space), if the writer is waiting for room
//!   (`SOCK_NOSPACE`) and the window is not full (the 3.x kernels: segments unacknowledged,
//!   `packets_out`, below the congestion window; the 4.x and later ones: segments in flight,
//!   `tcp_packets_in_flight`; which release changed it was not pinned): twice
//!   `max(cwnd, reordering + 1)` segments' memory (3.16 on: and at least ten segments),
//!   where a segment's memory is `SKB_TRUESIZE(mss + MAX_TCP_HEADER)` before 3.16 and the
//!   power of two that holds `mss + MAX_TCP_HEADER + skb_shared_info`, plus the `sk_buff`,
//!   from 3.16 ("Worst case is non GSO/TSO"); the buffer never shrinks and never passes
//!   `tcp_wmem[2]`.
//!
//! The buffer counts memory, and the queue is charged here at its byte count: a bulk writer's
//! data sits in GSO buffers of up to 64 KB filled from page fragments, whose truesize is their
//! data plus about a kilobyte each, so the room the model allows is at most a few per cent
//! more than the kernel's. Not modelled: memory pressure (`tcp_mem`), and a buffer an
//! application sets (`SO_SNDBUF`, which locks it: `SOCK_SNDBUF_LOCK`).

use super::rcvbuf::{INIT_RCVWND, MAX_TCP_HEADER, SHARED_INFO, SK_BUFF, SKB_OVERHEAD};

/// Which kernel's send-buffer rules a host runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SndEra {
    /// Before 3.16: raised to ten segments once open (`tcp_fixup_sndbuf`), then to twice the
    /// congestion window's `SKB_TRUESIZE` per segment while the writer waits and the segments
    /// unacknowledged (`packets_out`) do not fill the window.
    Linux3,
    /// 3.16 on: `tcp_sndbuf_expand` once open and while the writer waits and the segments in
    /// flight (`tcp_packets_in_flight`, as the 4.x and later kernels count them) do not fill
    /// the window: twice the congestion window, at least ten segments, each a power-of-two
    /// head plus its `sk_buff`.
    Linux316,
}

/// `tcp_wmem[1]`: the buffer a socket starts with.
pub(crate) const WMEM_DEFAULT: usize = 16_384;
/// `tcp_wmem[2]` (4 MB on a host with the memory for it): the most the buffer grows to.
pub(crate) const WMEM_MAX: usize = 4_194_304;
/// `tcp_reordering`'s default: the buffer holds at least `reordering + 1` segments' worth.
const REORDERING: usize = 3;

/// One connection's send-buffer state.
#[derive(Debug, Clone)]
pub(crate) struct SndBuf {
    era: SndEra,
    /// `sk_sndbuf`: bytes of memory the queue may take.
    sndbuf: usize,
    /// An ACK freed room in the queue since the last check (`SOCK_QUEUE_SHRUNK`).
    shrunk: bool,
}

impl SndBuf {
    /// A new socket's buffer, by `era`'s rules.
    pub(crate) fn new(era: SndEra) -> SndBuf {
        SndBuf {
            era,
            sndbuf: WMEM_DEFAULT,
            shrunk: false,
        }
    }

    /// Bytes the application may have queued in all.
    pub(crate) fn capacity(&self) -> usize {
        self.sndbuf
    }

    /// The memory one segment of `mss` bytes takes, as the era's rule counts it.
    fn per_segment(&self, mss: usize) -> usize {
        match self.era {
            // SKB_TRUESIZE(mss + MAX_TCP_HEADER).
            SndEra::Linux3 => mss + SKB_OVERHEAD,
            SndEra::Linux316 => (mss + MAX_TCP_HEADER + SHARED_INFO).next_power_of_two() + SK_BUFF,
        }
    }

    /// Raises the buffer to `segments` segments' memory, twice over (`tcp_sndbuf_expand`, and
    /// the same sum in 3.x's `tcp_new_space`), never past `tcp_wmem[2]` and never down.
    fn expand(&mut self, mss: usize, segments: usize) {
        let want = 2usize
            .saturating_mul(segments)
            .saturating_mul(self.per_segment(mss))
            .min(WMEM_MAX);
        self.sndbuf = self.sndbuf.max(want);
    }

    /// The connection is open (`tcp_init_buffer_space`), with `mss` the larger of the MSS
    /// agreed and the one in use and `cwnd` the congestion window in segments.
    pub(crate) fn opened(&mut self, mss: usize, cwnd: usize) {
        match self.era {
            SndEra::Linux3 => {
                let fixup = INIT_RCVWND
                    .saturating_mul(self.per_segment(mss))
                    .min(WMEM_MAX);
                self.sndbuf = self.sndbuf.max(fixup);
            }
            SndEra::Linux316 => self.expand(mss, cwnd.max(INIT_RCVWND).max(REORDERING + 1)),
        }
    }

    /// An ACK freed room in the queue (`SOCK_QUEUE_SHRUNK`).
    pub(crate) fn freed(&mut self) {
        self.shrunk = true;
    }

    /// After the output an ACK let out (`tcp_check_space`): a check is due if an ACK freed
    /// room since the last one (the mark is cleared here) and the writer waits for room
    /// (`SOCK_NOSPACE`). Returns what the era then counts against the congestion window, so
    /// that the caller counts only when a check is due; `None`: no check.
    pub(crate) fn check_due(&mut self, writer_waits: bool) -> Option<Counting> {
        if !std::mem::take(&mut self.shrunk) || !writer_waits {
            return None;
        }
        Some(match self.era {
            SndEra::Linux3 => Counting::Unacknowledged,
            SndEra::Linux316 => Counting::InFlight,
        })
    }

    /// The check [`SndBuf::check_due`] asked for (`tcp_should_expand_sndbuf`, then
    /// `tcp_sndbuf_expand` or 3.x's sum in `tcp_new_space`): with `out` segments counted as it
    /// said and `cwnd` the congestion window in segments (`None`: no congestion window to
    /// size the buffer by, which no Linux host lacks; the buffer stays), the buffer grows to
    /// twice the window's memory if the window is not full. Returns whether the test passed,
    /// whether or not the buffer grew: `tcp_new_space` then also restarts the window's idle
    /// clock (`snd_cwnd_stamp`).
    pub(crate) fn expand_if_room(&mut self, mss: usize, cwnd: Option<usize>, out: usize) -> bool {
        let floor = match self.era {
            SndEra::Linux3 => REORDERING + 1,
            SndEra::Linux316 => INIT_RCVWND.max(REORDERING + 1),
        };
        let Some(cwnd) = cwnd else {
            return false;
        };
        if out >= cwnd {
            return false;
        }
        self.expand(mss, cwnd.max(floor));
        true
    }
}

/// What a kernel counts against the congestion window when it decides whether to grow the
/// send buffer (`tcp_should_expand_sndbuf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counting {
    /// Segments sent and not acknowledged (`packets_out`), the 3.x kernels.
    Unacknowledged,
    /// Segments still in the network (`tcp_packets_in_flight`), the 4.x and later ones.
    InFlight,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tcp_check_space` whole: whether the test to expand passed, with `unacked` and
    /// `in_flight` segments out.
    fn check_space(
        b: &mut SndBuf,
        writer_waits: bool,
        mss: usize,
        cwnd: Option<usize>,
        unacked: usize,
        in_flight: usize,
    ) -> bool {
        match b.check_due(writer_waits) {
            None => false,
            Some(Counting::Unacknowledged) => b.expand_if_room(mss, cwnd, unacked),
            Some(Counting::InFlight) => b.expand_if_room(mss, cwnd, in_flight),
        }
    }

    #[test]
    fn a_2012_kernel_opens_at_ten_segments_truesize_and_a_current_one_at_twice_that_rounded() {
        // MSS 1460: 3.x's SKB_TRUESIZE(1460 + 304) is 2340 bytes, ten of them 23400.
        let mut old = SndBuf::new(SndEra::Linux3);
        assert_eq!(old.capacity(), 16_384);
        old.opened(1460, 10);
        assert_eq!(old.capacity(), 23_400);
        // MSS 460 (MTU 500): ten segments of 1340 bytes are less than the default.
        let mut small = SndBuf::new(SndEra::Linux3);
        small.opened(460, 10);
        assert_eq!(small.capacity(), 16_384);
        // 3.16 on: 1460 + 304 + 320 rounds up to 4096, plus 256; twice ten of them.
        let mut new = SndBuf::new(SndEra::Linux316);
        new.opened(1460, 10);
        assert_eq!(new.capacity(), 2 * 10 * 4352);
    }

    #[test]
    fn the_buffer_grows_to_twice_the_window_only_while_the_writer_waits_and_the_window_has_room() {
        let mut b = SndBuf::new(SndEra::Linux3);
        b.opened(1460, 10);
        // Nothing freed: no check.
        assert!(!check_space(&mut b, true, 1460, Some(40), 10, 10));
        // Freed, but the writer is not waiting.
        b.freed();
        assert!(!check_space(&mut b, false, 1460, Some(40), 10, 10));
        // Freed and waiting, but the window is full (3.x counts what is unacknowledged).
        b.freed();
        assert!(!check_space(&mut b, true, 1460, Some(40), 40, 30));
        assert_eq!(b.capacity(), 23_400);
        // Room in the window: twice 40 segments of 2340 bytes.
        b.freed();
        assert!(check_space(&mut b, true, 1460, Some(40), 39, 39));
        assert_eq!(b.capacity(), 2 * 40 * 2340);
        // It never shrinks with the window (the test passes; the buffer stays).
        b.freed();
        assert!(check_space(&mut b, true, 1460, Some(8), 2, 2));
        assert_eq!(b.capacity(), 2 * 40 * 2340);
        // A current kernel counts what is in flight: SACKed segments leave room.
        let mut c = SndBuf::new(SndEra::Linux316);
        c.opened(1460, 10);
        c.freed();
        assert!(check_space(&mut c, true, 1460, Some(40), 40, 30));
        assert_eq!(c.capacity(), 2 * 40 * 4352);
    }

    #[test]
    fn the_buffer_stops_at_tcp_wmem_max() {
        let mut b = SndBuf::new(SndEra::Linux316);
        b.opened(1460, 10);
        b.freed();
        assert!(check_space(&mut b, true, 1460, Some(100_000), 0, 0));
        assert_eq!(b.capacity(), WMEM_MAX);
    }
}
