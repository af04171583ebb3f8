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
//! makes the `linux` profile optimistic, never pessimistic.

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
            Congestion::SmoltcpReno => return None,
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
