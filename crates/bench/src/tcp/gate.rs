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
//!   acknowledged segment below the slow-start threshold, +1 per window of acknowledged
//!   segments above it; when the host resends a segment (a fast retransmit or a timeout, told
//!   apart by neither), threshold and window drop to half the segments in flight (at least 2),
//!   once per window of data;
//! - Nagle: a sub-MSS tail waits while any data is unacknowledged (classic) or while an earlier
//!   sub-MSS segment is (Minshall), unless the application has closed its side.

use std::collections::VecDeque;

use smoltcp::socket::tcp;

use super::profile::{Congestion, Nagle};

/// The congestion state, in segments.
#[derive(Debug, Clone, Copy)]
struct Window {
    cwnd: u32,
    ssthresh: u32,
    /// Acknowledged segments counted towards the next +1 in congestion avoidance.
    counted: u32,
    /// While recovering from a loss: the stream offset whose acknowledgement ends it.
    recovery_until: Option<u64>,
}

/// The send-side gate of one host.
#[derive(Debug)]
pub(crate) struct Gate {
    mss: usize,
    nagle: Nagle,
    window: Option<Window>,
    /// Bytes handed to the socket so far.
    written: u64,
    /// End offset and "smaller than the MSS" of every written segment not yet acknowledged.
    in_flight: VecDeque<(u64, bool)>,
    /// Resent segments the host had counted at the last look.
    resent_seen: u64,
}

impl Gate {
    /// A gate for segments of `mss` bytes; `None` when smoltcp's own Reno and Nagle are used.
    pub(crate) fn new(mss: usize, congestion: Congestion, nagle: Nagle) -> Option<Gate> {
        let window = match congestion {
            Congestion::SmoltcpReno => return None,
            Congestion::Unlimited => None,
            Congestion::Segments { initial } => Some(Window {
                cwnd: u32::from(initial.max(1)),
                ssthresh: u32::MAX,
                counted: 0,
                recovery_until: None,
            }),
        };
        Some(Gate {
            mss: mss.max(1),
            nagle,
            window,
            written: 0,
            in_flight: VecDeque::new(),
            resent_seen: 0,
        })
    }

    /// Current congestion window, segments (`None`: unlimited).
    #[cfg(test)]
    pub(crate) fn cwnd(&self) -> Option<u32> {
        self.window.map(|w| w.cwnd)
    }

    /// Updates the window from the socket's send queue and the host's resent-segment count.
    fn observe(&mut self, queued: usize, resent: u64) {
        let acked = self.written.saturating_sub(queued as u64);
        let mut newly = 0u32;
        while self.in_flight.front().is_some_and(|&(end, _)| end <= acked) {
            self.in_flight.pop_front();
            newly += 1;
        }
        let in_flight = u32::try_from(self.in_flight.len()).unwrap_or(u32::MAX);
        let lost = resent > self.resent_seen;
        self.resent_seen = resent;
        let Some(w) = self.window.as_mut() else {
            return;
        };
        if w.recovery_until.is_some_and(|end| acked >= end) {
            w.recovery_until = None;
        }
        if lost && w.recovery_until.is_none() {
            // One reduction per window of data, as NewReno does.
            w.ssthresh = (in_flight + newly).div_ceil(2).max(2);
            w.cwnd = w.ssthresh;
            w.counted = 0;
            w.recovery_until = Some(self.written);
        } else if w.recovery_until.is_none() {
            for _ in 0..newly {
                if w.cwnd < w.ssthresh {
                    w.cwnd = w.cwnd.saturating_add(1);
                } else {
                    w.counted += 1;
                    if w.counted >= w.cwnd {
                        w.counted = 0;
                        w.cwnd = w.cwnd.saturating_add(1);
                    }
                }
            }
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
        resent: u64,
    ) -> bool {
        self.observe(socket.send_queue(), resent);
        let mut progress = false;
        while !out.is_empty() && socket.may_send() {
            if let Some(w) = self.window
                && self.in_flight.len() >= w.cwnd as usize
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
            progress = true;
        }
        progress
    }
}
