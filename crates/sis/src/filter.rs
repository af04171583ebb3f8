//! Duplicate-datagram filter for the send path (sans-IO; time is passed in).
//!
//! After Johnson, "Interoperability and performance issues in HF e-mail": a client that
//! retransmits on its own timer (TCP over the IP client, SAP 9) keeps re-submitting U_PDUs the
//! HF link has not even had a chance to carry yet, and every copy costs air time. The filter
//! silently drops a U_PDU identical (destination node, destination SAP, bytes) to one that is
//! still queued, or that was sent since the peer last had a chance to acknowledge it.
//!
//! "The peer had a chance to acknowledge" is modelled from the client's side as any of: a
//! confirm or reject for that U_PDU arrived ([`DuplicateFilter::release`]); an indication from
//! the destination node arrived, i.e. the peer transmitted ([`DuplicateFilter::peer_heard`]);
//! or a horizon elapsed since it was sent (default 130 s, a little more than one maximum
//! STANAG 5066 transmission of 127.5 s).
//!
//! Memory is bounded: a U_PDU is remembered as a 64-bit hash of its bytes plus its length, and
//! at most [`FilterConfig::capacity`] entries are kept (the oldest is forgotten first).

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

use crate::address::NodeAddress;
use crate::fields::SapId;

/// Default horizon after which a sent U_PDU may be sent again.
pub const DEFAULT_HORIZON: Duration = Duration::from_secs(130);
/// Default number of remembered U_PDUs.
pub const DEFAULT_CAPACITY: usize = 4096;

/// Filter settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterConfig {
    /// Bit n set: filter U_PDUs for destination SAP n. Default: SAP 9 (the IP client) only.
    pub saps: u16,
    /// How long after sending a U_PDU an identical one is still dropped, if nothing else
    /// showed that the peer had a chance to acknowledge it.
    pub horizon: Duration,
    /// Most U_PDUs remembered at once.
    pub capacity: usize,
}

impl Default for FilterConfig {
    fn default() -> Self {
        FilterConfig {
            saps: 1 << SapId::IP_CLIENT.get(),
            horizon: DEFAULT_HORIZON,
            capacity: DEFAULT_CAPACITY,
        }
    }
}

impl FilterConfig {
    /// A configuration that filters nothing.
    pub fn disabled() -> Self {
        FilterConfig {
            saps: 0,
            ..Self::default()
        }
    }

    /// Switches filtering on or off for one destination SAP.
    pub fn with_sap(mut self, sap: SapId, on: bool) -> Self {
        if on {
            self.saps |= 1 << sap.get();
        } else {
            self.saps &= !(1 << sap.get());
        }
        self
    }

    /// Whether U_PDUs to this SAP are filtered.
    pub fn filters(&self, sap: SapId) -> bool {
        self.saps & (1 << sap.get()) != 0
    }
}

/// What the filter counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FilterStats {
    /// U_PDUs dropped as duplicates.
    pub dropped: u64,
    /// Bytes of U_PDU dropped.
    pub dropped_bytes: u64,
    /// U_PDUs let through (including those to unfiltered SAPs).
    pub passed: u64,
}

/// Identifies one remembered U_PDU; returned for every U_PDU let through on a filtered SAP, and
/// handed back on [`DuplicateFilter::mark_sent`] and [`DuplicateFilter::release`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket {
    dest: NodeAddress,
    sap: SapId,
    hash: u64,
    len: usize,
    serial: u64,
}

/// The filter's answer for a U_PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send it. The ticket is `None` when the SAP is not filtered.
    Pass(Option<Ticket>),
    /// Drop it silently: an identical U_PDU is queued or in flight.
    Drop,
}

#[derive(Debug)]
struct Entry {
    ticket: Ticket,
    /// `None` while queued, the send time once written to the server.
    sent_at: Option<Instant>,
}

/// The filter; see the module documentation.
#[derive(Debug)]
pub struct DuplicateFilter {
    config: FilterConfig,
    entries: VecDeque<Entry>,
    stats: FilterStats,
    serial: u64,
}

impl DuplicateFilter {
    /// A filter with the given settings.
    pub fn new(config: FilterConfig) -> Self {
        DuplicateFilter {
            config,
            entries: VecDeque::new(),
            stats: FilterStats::default(),
            serial: 0,
        }
    }

    /// The settings.
    pub fn config(&self) -> &FilterConfig {
        &self.config
    }

    /// What was counted so far.
    pub fn stats(&self) -> FilterStats {
        self.stats
    }

    /// Number of U_PDUs remembered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Decides on a U_PDU about to be queued for sending, and remembers it if it passes.
    pub fn submit(&mut self, dest: NodeAddress, sap: SapId, updu: &[u8], now: Instant) -> Verdict {
        if !self.config.filters(sap) {
            self.stats.passed += 1;
            return Verdict::Pass(None);
        }
        self.expire(now);
        let mut h = DefaultHasher::new();
        updu.hash(&mut h);
        let hash = h.finish();
        let len = updu.len();
        let duplicate = self.entries.iter().any(|e| {
            let t = &e.ticket;
            t.dest == dest && t.sap == sap && t.hash == hash && t.len == len
        });
        if duplicate {
            self.stats.dropped += 1;
            self.stats.dropped_bytes += len as u64;
            return Verdict::Drop;
        }
        self.stats.passed += 1;
        self.serial += 1;
        let ticket = Ticket {
            dest,
            sap,
            hash,
            len,
            serial: self.serial,
        };
        if self.config.capacity == 0 {
            return Verdict::Pass(None);
        }
        while self.entries.len() >= self.config.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back(Entry {
            ticket,
            sent_at: None,
        });
        Verdict::Pass(Some(ticket))
    }

    /// The U_PDU was written to the server at `now`; the horizon starts.
    pub fn mark_sent(&mut self, ticket: &Ticket, now: Instant) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.ticket == *ticket) {
            e.sent_at = Some(now);
        }
    }

    /// Forgets a U_PDU: a confirm or reject arrived for it, or it was never sent.
    pub fn release(&mut self, ticket: &Ticket) {
        self.entries.retain(|e| e.ticket != *ticket);
    }

    /// Something arrived from `node`: the peer transmitted, so it had its chance to acknowledge
    /// everything sent to it. Queued U_PDUs are kept.
    pub fn peer_heard(&mut self, node: NodeAddress) {
        self.entries
            .retain(|e| e.sent_at.is_none() || e.ticket.dest != node);
    }

    /// Forgets every sent U_PDU (the connection to the server was lost, so they may well be
    /// lost too and the caller may resend them).
    pub fn forget_sent(&mut self) {
        self.entries.retain(|e| e.sent_at.is_none());
    }

    /// Forgets sent U_PDUs older than the horizon.
    pub fn expire(&mut self, now: Instant) {
        let horizon = self.config.horizon;
        self.entries.retain(|e| match e.sent_at {
            Some(at) => now.saturating_duration_since(at) < horizon,
            None => true,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> NodeAddress {
        s.parse().unwrap()
    }

    #[test]
    fn retransmission_dropped_until_peer_speaks() {
        let mut f = DuplicateFilter::new(FilterConfig::default());
        let t0 = Instant::now();
        let peer = addr("0.0.0.2");
        let sap = SapId::IP_CLIENT;
        let Verdict::Pass(Some(ticket)) = f.submit(peer, sap, b"tcp segment 1", t0) else {
            panic!("first copy must pass with a ticket")
        };
        // Still queued: a copy is dropped.
        assert_eq!(f.submit(peer, sap, b"tcp segment 1", t0), Verdict::Drop);
        f.mark_sent(&ticket, t0);
        // Sent, peer silent: a retransmission 3 s later is dropped.
        assert_eq!(
            f.submit(peer, sap, b"tcp segment 1", t0 + Duration::from_secs(3)),
            Verdict::Drop
        );
        // A different segment, or the same bytes to another node or SAP, pass.
        assert!(matches!(
            f.submit(peer, sap, b"tcp segment 2", t0),
            Verdict::Pass(Some(_))
        ));
        assert!(matches!(
            f.submit(addr("0.0.0.3"), sap, b"tcp segment 1", t0),
            Verdict::Pass(_)
        ));
        // The peer transmitted: the next copy goes out again.
        f.peer_heard(peer);
        assert!(matches!(
            f.submit(peer, sap, b"tcp segment 1", t0 + Duration::from_secs(5)),
            Verdict::Pass(Some(_))
        ));
        let s = f.stats();
        assert_eq!((s.dropped, s.dropped_bytes, s.passed), (2, 26, 4));
    }

    #[test]
    fn peer_heard_keeps_queued_copies() {
        let mut f = DuplicateFilter::new(FilterConfig::default());
        let t0 = Instant::now();
        let peer = addr("0.0.0.2");
        assert!(matches!(
            f.submit(peer, SapId::IP_CLIENT, b"x", t0),
            Verdict::Pass(Some(_))
        ));
        f.peer_heard(peer);
        assert_eq!(f.submit(peer, SapId::IP_CLIENT, b"x", t0), Verdict::Drop);
    }

    #[test]
    fn horizon_and_release_let_a_copy_through() {
        let mut f = DuplicateFilter::new(FilterConfig::default());
        let t0 = Instant::now();
        let peer = addr("1.2.3.4");
        let Verdict::Pass(Some(t)) = f.submit(peer, SapId::IP_CLIENT, b"a", t0) else {
            panic!()
        };
        f.mark_sent(&t, t0);
        assert_eq!(
            f.submit(peer, SapId::IP_CLIENT, b"a", t0 + Duration::from_secs(129)),
            Verdict::Drop
        );
        let Verdict::Pass(Some(t2)) = f.submit(peer, SapId::IP_CLIENT, b"a", t0 + DEFAULT_HORIZON)
        else {
            panic!("horizon elapsed")
        };
        f.release(&t2);
        assert!(f.is_empty());
        assert!(matches!(
            f.submit(peer, SapId::IP_CLIENT, b"a", t0),
            Verdict::Pass(Some(_))
        ));
    }

    #[test]
    fn unfiltered_saps_and_capacity() {
        let mut f = DuplicateFilter::new(FilterConfig {
            capacity: 2,
            ..FilterConfig::default()
        });
        let t0 = Instant::now();
        let peer = addr("0.0.0.1");
        assert_eq!(f.submit(peer, SapId::HMTP, b"m", t0), Verdict::Pass(None));
        assert_eq!(f.submit(peer, SapId::HMTP, b"m", t0), Verdict::Pass(None));
        for p in [&b"1"[..], b"2", b"3"] {
            assert!(matches!(
                f.submit(peer, SapId::IP_CLIENT, p, t0),
                Verdict::Pass(Some(_))
            ));
        }
        assert_eq!(f.len(), 2);
        // "1" was forgotten to stay within capacity.
        assert!(matches!(
            f.submit(peer, SapId::IP_CLIENT, b"1", t0),
            Verdict::Pass(Some(_))
        ));
        let cfg = FilterConfig::disabled().with_sap(SapId::HMTP, true);
        assert!(cfg.filters(SapId::HMTP) && !cfg.filters(SapId::IP_CLIENT));
    }
}
