//! STANAG 5066 Annex C selective-repeat ARQ for one link: the sans-IO core of the emulated
//! Data Transfer Sublayer's reliable (normal, non-expedited) data service.
//!
//! [`ArqSender`] cuts C_PDUs into DATA-ONLY segments with 8-bit frame sequence numbers (FSNs),
//! keeps at most `window` (≤ 128) of them unacknowledged, and retransmits whatever the peer's
//! selective ACK did not confirm. [`ArqReceiver`] accepts segments inside its window, builds the
//! ACK (RX LWE and the selective bitmap, [`crate::dpdu::Ack`]) and hands complete C_PDUs up:
//! in order, or as they arrive where their sender cleared DELIVER IN ORDER (below). Neither
//! touches time or I/O: the node that owns them decides when to transmit (one transmission is
//! at most 127.5 s, see [`crate::modem::Transmission::eot_at`]) and feeds them what the modem
//! delivered.
//!
//! Rules followed ([ED3-C] §C.6.2, `reference/s5066-sis.md` §4.3): FSNs mod 256; initial
//! TX LWE = 0, TX UWE = 255, RX LWE = 0; an FSN is reused only after it is acknowledged; the
//! window is at most 128, FSNs outside it are neither accepted nor acknowledged; an ACK's RX LWE
//! acknowledges every FSN below it; the bitmap starts at RX LWE + 1.
//!
//! Both ends can be reset ([`ArqSender::reset`], [`ArqReceiver::reset`]) for the
//! RESET/WIN-RESYNC recovery that the node ([`crate::node`]) runs, and the sender can forget
//! everything ([`ArqSender::clear`]) when the node declares the link lost.
//!
//! DROP C_PDU ([ED3-C] §C.3.3, and the implementation note under §C.3.6, method 1): the sender
//! can discard a C_PDU whose time to live ran out ([`ArqSender::drop_cpdu`]). One not yet
//! segmented simply leaves the queue; one with frames in the window keeps their FSNs (the
//! receiver's RX LWE can only move over every FSN), but each unacknowledged frame goes out
//! again with the DROP C_PDU flag set and no segment data (SIZE OF SEGMENTED C_PDU 0). The
//! receiver acknowledges such a frame like any other and discards whatever it held of that
//! C_PDU ([`ArqReceiver::dropped`] counts them); the sender never reports the C_PDU as
//! confirmed.
//!
//! DELIVER IN ORDER ([ED3-C] §C.3.3 (7) and (8)): a C_PDU pushed in order
//! ([`ArqSender::push`]) has the flag set on its frames and is delivered when it is complete
//! and every C_PDU before it has been delivered; one pushed as it arrives
//! ([`ArqSender::push_with`]) has it cleared and is delivered as soon as all of its frames,
//! START to END, are in, even while an earlier one still has a frame missing. Its frames stay
//! in the window (the ACK covers them, RX LWE moves over them later) but are not delivered
//! again. Stricter than (7) in one case: an in-order C_PDU waits behind any missing frame
//! before it, even one that can only belong to an as-they-arrive C_PDU, since a gap says
//! nothing of what the frames in it carry.
//!
//! Synchronisation ([ED3-C] §C.6.3.2): the sender sets TX WIN UWE and TX WIN LWE on the frames
//! whose FSN is its window's upper and lower edge when they go out, and the receiver runs the
//! three destination-node tests on every frame ([`ArqReceiver::in_sync`]); what to do when one
//! fails (ask the peer for a RESET/WIN-RESYNC) is the node's.
//!
//! Not here: expedited ARQ (the node runs it with one sender per C_PDU).

use crate::dpdu::{Ack, DataHeader, MAX_SEGMENT};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use thiserror::Error;

/// Largest ARQ window [ED3-C] allows.
pub const MAX_WINDOW: u8 = 128;

/// Why an ARQ endpoint could not be configured.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ArqError {
    /// The window is 0 or above 128.
    #[error("ARQ window {0} is invalid (must be 1 to 128 frames)")]
    BadWindow(u8),
    /// The segment size is 0 or above 1023.
    #[error("ARQ segment size {0} is invalid (must be 1 to 1023 bytes)")]
    BadSegmentSize(usize),
    /// The C_PDU needs more segments than the window holds.
    #[error("C_PDU of {len} bytes needs more than the {window} segments the ARQ window holds")]
    CpduTooLarge {
        /// C_PDU length in bytes.
        len: usize,
        /// The window, in frames.
        window: u8,
    },
}

/// One segment the sender wants on the air (it becomes a DATA-ONLY or DATA-ACK D_PDU).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Flags and FSN for the D_PDU header.
    pub header: DataHeader,
    /// The C_PDU bytes of this segment.
    pub data: Vec<u8>,
    /// Whether this is a retransmission.
    pub retransmission: bool,
}

#[derive(Debug, Clone)]
struct Outstanding {
    header: DataHeader,
    data: Vec<u8>,
    cpdu: u64,
    /// Sent at least once and not acknowledged since.
    sent: bool,
}

/// Sending side of one ARQ link.
#[derive(Debug, Clone)]
pub struct ArqSender {
    window: u8,
    segment_size: usize,
    /// C_PDUs not yet segmented: (id, bytes, DELIVER IN ORDER).
    queue: VecDeque<(u64, Vec<u8>, bool)>,
    /// Frames sent or ready to send and not yet acknowledged, by FSN.
    outstanding: BTreeMap<u8, Outstanding>,
    /// Segments per C_PDU still unacknowledged.
    pending: BTreeMap<u64, usize>,
    /// C_PDUs whose every segment is acknowledged, oldest first.
    confirmed: Vec<u64>,
    tx_lwe: u8,
    next_fsn: u8,
    next_id: u64,
    retransmissions: u64,
}

impl ArqSender {
    /// A sender with this window (1–128 frames) and segment size (1–1023 bytes).
    pub fn new(window: u8, segment_size: usize) -> Result<ArqSender, ArqError> {
        if window == 0 || window > MAX_WINDOW {
            return Err(ArqError::BadWindow(window));
        }
        if segment_size == 0 || segment_size > MAX_SEGMENT {
            return Err(ArqError::BadSegmentSize(segment_size));
        }
        Ok(ArqSender {
            window,
            segment_size,
            queue: VecDeque::new(),
            outstanding: BTreeMap::new(),
            pending: BTreeMap::new(),
            confirmed: Vec::new(),
            tx_lwe: 0,
            next_fsn: 0,
            next_id: 0,
            retransmissions: 0,
        })
    }

    /// Queue a C_PDU for delivery in order; returns its id (used by
    /// [`ArqSender::take_confirmed`]). A C_PDU must fit in one window of segments.
    pub fn push(&mut self, cpdu: Vec<u8>) -> Result<u64, ArqError> {
        self.push_with(cpdu, true)
    }

    /// Queue a C_PDU with its frames' DELIVER IN ORDER flag `in_order` (false: the receiver
    /// delivers it as soon as it is complete); otherwise as [`ArqSender::push`].
    pub fn push_with(&mut self, cpdu: Vec<u8>, in_order: bool) -> Result<u64, ArqError> {
        if cpdu.len().div_ceil(self.segment_size) > usize::from(self.window) {
            return Err(ArqError::CpduTooLarge {
                len: cpdu.len(),
                window: self.window,
            });
        }
        let id = self.next_id;
        self.next_id += 1;
        self.queue.push_back((id, cpdu, in_order));
        Ok(id)
    }

    /// Frames in flight (sent or ready, unacknowledged).
    pub fn in_flight(&self) -> usize {
        self.outstanding.len()
    }

    /// Whether nothing is queued or unacknowledged.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.outstanding.is_empty()
    }

    /// Retransmitted segments so far.
    pub fn retransmissions(&self) -> u64 {
        self.retransmissions
    }

    /// TX LWE: the oldest unacknowledged FSN (the next new FSN if none is outstanding).
    pub fn tx_lwe(&self) -> u8 {
        self.tx_lwe
    }

    /// Segment queued C_PDUs into new frames while the window has room for a whole C_PDU.
    fn fill_window(&mut self) {
        while let Some((_, cpdu, _)) = self.queue.front() {
            let n = cpdu.len().div_ceil(self.segment_size).max(1);
            if self.outstanding.len() + n > usize::from(self.window) {
                break;
            }
            let Some((id, cpdu, in_order)) = self.queue.pop_front() else {
                break;
            };
            let chunks: Vec<&[u8]> = if cpdu.is_empty() {
                vec![&cpdu[..]]
            } else {
                cpdu.chunks(self.segment_size).collect()
            };
            for (i, chunk) in chunks.iter().enumerate() {
                let header = DataHeader {
                    start: i == 0,
                    end: i + 1 == n,
                    deliver_in_order: in_order,
                    fsn: self.next_fsn,
                    ..DataHeader::default()
                };
                self.outstanding.insert(
                    self.next_fsn,
                    Outstanding {
                        header,
                        data: chunk.to_vec(),
                        cpdu: id,
                        sent: false,
                    },
                );
                self.next_fsn = self.next_fsn.wrapping_add(1);
            }
            self.pending.insert(id, n);
        }
    }

    /// The frames to put in the next transmission, at most `max`: retransmissions first (oldest
    /// FSN first), then new segments as the window allows.
    pub fn next_segments(&mut self, max: usize) -> Vec<Segment> {
        self.fill_window();
        let lwe = self.tx_lwe;
        let uwe = self.next_fsn.wrapping_sub(1);
        let mut order: Vec<u8> = self.outstanding.keys().copied().collect();
        order.sort_by_key(|f| f.wrapping_sub(lwe));
        let mut out = Vec::new();
        for fsn in order.into_iter().take(max) {
            if let Some(o) = self.outstanding.get_mut(&fsn) {
                let retransmission = o.sent;
                if retransmission {
                    self.retransmissions += 1;
                }
                o.sent = true;
                let mut header = o.header;
                header.tx_lwe = fsn == lwe;
                header.tx_uwe = fsn == uwe;
                out.push(Segment {
                    header,
                    data: o.data.clone(),
                    retransmission,
                });
            }
        }
        out
    }

    /// Bytes (with `overhead` per frame) of the frames the next transmission would send if its
    /// budget had no limit: what this link asks of a transmission shared with other links.
    pub fn ready_bytes(&mut self, max: usize, overhead: usize) -> usize {
        self.fill_window();
        self.outstanding
            .values()
            .take(max)
            .map(|o| o.data.len() + overhead)
            .sum()
    }

    /// Like [`ArqSender::next_segments`], but also stops before the frames' bytes would pass
    /// `budget`, counting `overhead` bytes of D_PDU framing per frame; always returns at least
    /// one frame if any is ready, so that a transmission is never empty. The node uses this to
    /// keep one transmission inside its maximum duration.
    pub fn next_segments_within(
        &mut self,
        max: usize,
        budget: usize,
        overhead: usize,
    ) -> Vec<Segment> {
        self.fill_window();
        let lwe = self.tx_lwe;
        let mut order: Vec<u8> = self.outstanding.keys().copied().collect();
        order.sort_by_key(|f| f.wrapping_sub(lwe));
        let mut used = 0usize;
        let mut n = 0usize;
        for fsn in order.iter().take(max) {
            let len = self
                .outstanding
                .get(fsn)
                .map_or(0, |o| o.data.len() + overhead);
            if n > 0 && used + len > budget {
                break;
            }
            used += len;
            n += 1;
        }
        self.next_segments(n)
    }

    /// Process the peer's ACK: drop acknowledged frames, move TX LWE, and report C_PDUs whose
    /// last segment was acknowledged through [`ArqSender::take_confirmed`].
    ///
    /// Returns `false` when the ACK's RX LWE lies outside what was sent (the ACK is ignored):
    /// a sign that the peer's receive state no longer matches this window.
    pub fn on_ack(&mut self, ack: &Ack) -> bool {
        // Judge the ACK against what was actually sent: RX LWE must lie in [TX LWE, next FSN],
        // and only frames at or above it are looked up in the bitmap. A stale or corrupt ACK
        // then cannot acknowledge frames the receiver never had.
        let (tx_lwe, next) = (self.tx_lwe, self.next_fsn);
        let lwe_off = ack.rx_lwe.wrapping_sub(tx_lwe);
        if lwe_off > next.wrapping_sub(tx_lwe) {
            // An RX LWE outside what was sent: the ACK is not about this window. Ignore it.
            return false;
        }
        let is_acked = |f: u8| {
            if f.wrapping_sub(tx_lwe) < lwe_off {
                return true;
            }
            let ahead = f.wrapping_sub(ack.rx_lwe);
            ahead > 0 && ahead < MAX_WINDOW && ack.acknowledges(f)
        };
        let acked: Vec<u8> = self
            .outstanding
            .iter()
            .filter(|(f, o)| o.sent && is_acked(**f))
            .map(|(f, _)| *f)
            .collect();
        for fsn in acked {
            if let Some(o) = self.outstanding.remove(&fsn)
                && let Some(left) = self.pending.get_mut(&o.cpdu)
            {
                *left = left.saturating_sub(1);
                if *left == 0 {
                    self.pending.remove(&o.cpdu);
                    self.confirmed.push(o.cpdu);
                }
            }
        }
        let lwe = self.tx_lwe;
        self.tx_lwe = self
            .outstanding
            .keys()
            .copied()
            .min_by_key(|f| f.wrapping_sub(lwe))
            .unwrap_or(self.next_fsn);
        true
    }

    /// Reset the transmit window to its initial state (TX LWE = next FSN = 0), as a
    /// RESET/WIN-RESYNC exchange that commands the peer's RX LWE to 0 requires. C_PDUs none of
    /// whose segments went on the air go back to the front of the queue, to be segmented
    /// again from scratch; the ids of C_PDUs with a segment already sent are returned: the
    /// peer may or may not have delivered them, so they must not be sent again (that could
    /// deliver them twice) and their fate is unknown.
    pub fn reset(&mut self) -> Vec<u64> {
        let lwe = self.tx_lwe;
        let mut order: Vec<u8> = self.outstanding.keys().copied().collect();
        order.sort_by_key(|f| f.wrapping_sub(lwe));
        let mut segs: BTreeMap<u64, usize> = BTreeMap::new();
        let mut lost: Vec<u64> = Vec::new();
        for o in self.outstanding.values() {
            *segs.entry(o.cpdu).or_default() += 1;
            if o.sent && !lost.contains(&o.cpdu) {
                lost.push(o.cpdu);
            }
        }
        // A C_PDU some of whose segments were acknowledged (and so left `outstanding`) was
        // on the air too.
        for (id, n) in &segs {
            if self.pending.get(id).is_some_and(|p| p != n) && !lost.contains(id) {
                lost.push(*id);
            }
        }
        let mut unsent: BTreeMap<u64, (Vec<u8>, bool)> = BTreeMap::new();
        for fsn in order {
            if let Some(o) = self.outstanding.get(&fsn)
                && !lost.contains(&o.cpdu)
            {
                let e = unsent
                    .entry(o.cpdu)
                    .or_insert_with(|| (Vec::new(), o.header.deliver_in_order));
                e.0.extend_from_slice(&o.data);
            }
        }
        for (id, (cpdu, in_order)) in unsent.into_iter().rev() {
            self.queue.push_front((id, cpdu, in_order));
        }
        self.outstanding.clear();
        self.pending.clear();
        self.tx_lwe = 0;
        self.next_fsn = 0;
        lost.sort_unstable();
        lost
    }

    /// Ids of the C_PDUs fully acknowledged since the last call, in the order they completed
    /// (with selective ACKs, not necessarily the order they were pushed).
    pub fn take_confirmed(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.confirmed)
    }

    /// Discards C_PDU `id` (its time to live ran out): if it was not segmented yet it just
    /// leaves the queue; otherwise its unacknowledged frames keep their FSNs but lose their
    /// data and carry DROP C_PDU, so the receiver throws away what it has of it and the
    /// window still moves once the peer acknowledges them. It is never reported confirmed.
    /// Returns what became of it.
    pub fn drop_cpdu(&mut self, id: u64) -> Dropped {
        if let Some(pos) = self.queue.iter().position(|(q, _, _)| *q == id) {
            self.queue.remove(pos);
            return Dropped::Unsent;
        }
        if self.pending.remove(&id).is_none() {
            // Every segment acknowledged already (confirmed, or about to be), or unknown.
            return Dropped::NotHeld;
        }
        self.confirmed.retain(|c| *c != id);
        let mut frames = 0;
        for o in self.outstanding.values_mut().filter(|o| o.cpdu == id) {
            o.header.drop = true;
            o.data.clear();
            frames += 1;
        }
        Dropped::InWindow { frames }
    }

    /// Forgets everything, as a node does with a link it declared lost: queued and
    /// unacknowledged C_PDUs alike are gone (nothing is reported confirmed) and the window
    /// starts again at FSN 0, where the node's next RESET/WIN-RESYNC puts the peer's receive
    /// window too.
    pub fn clear(&mut self) {
        self.queue.clear();
        self.outstanding.clear();
        self.pending.clear();
        self.confirmed.clear();
        self.tx_lwe = 0;
        self.next_fsn = 0;
    }
}

/// What [`ArqSender::drop_cpdu`] did with a C_PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// It was still queued, never segmented: nothing of it was on the air.
    Unsent,
    /// It had frames in the window: this many go (again) with DROP C_PDU and no data.
    InWindow {
        /// Its unacknowledged frames, now DROP frames.
        frames: usize,
    },
    /// The sender no longer held it (all of it acknowledged, or an unknown id).
    NotHeld,
}

/// Receiving side of one ARQ link.
#[derive(Debug, Clone)]
pub struct ArqReceiver {
    /// RX LWE: the oldest FSN not yet received.
    rx_lwe: u8,
    /// Furthest FSN received beyond RX LWE, if any.
    rx_uwe: Option<u8>,
    /// Received frames at or beyond RX LWE, waiting for the gap below them to fill.
    held: BTreeMap<u8, (DataHeader, Vec<u8>)>,
    /// Held frames whose C_PDU was delivered as it arrived (DELIVER IN ORDER clear): passed
    /// over, not delivered again, when RX LWE reaches them.
    early: BTreeSet<u8>,
    /// The C_PDU being reassembled from in-order segments.
    partial: Option<Vec<u8>>,
    /// The C_PDU being passed over has been dropped by its sender (a DROP frame came before its
    /// END): its remaining segments are discarded too.
    dropping: bool,
    delivered: Vec<Vec<u8>>,
    duplicates: u64,
    /// C_PDUs discarded because their sender set DROP C_PDU on a segment.
    dropped: u64,
    max_cpdu: usize,
}

impl ArqReceiver {
    /// A receiver that delivers C_PDUs of at most `max_cpdu` bytes (longer ones are dropped as
    /// malformed).
    pub fn new(max_cpdu: usize) -> ArqReceiver {
        ArqReceiver {
            rx_lwe: 0,
            rx_uwe: None,
            held: BTreeMap::new(),
            early: BTreeSet::new(),
            partial: None,
            dropping: false,
            delivered: Vec::new(),
            duplicates: 0,
            dropped: 0,
            max_cpdu,
        }
    }

    /// RX LWE.
    pub fn rx_lwe(&self) -> u8 {
        self.rx_lwe
    }

    /// Whether nothing of the peer's data waits here: no frame held beyond a gap and no C_PDU
    /// half reassembled (the peer is not in the middle of sending something).
    pub fn is_idle(&self) -> bool {
        self.held.is_empty() && self.partial.is_none()
    }

    /// Frames received again after they had already been received.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// C_PDUs discarded so far because their sender set DROP C_PDU (their time to live ran
    /// out at the sender).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// [ED3-C] §C.6.3.2's synchronisation tests at the destination node, (3) to (5): whether a
    /// frame with `header` can come from a sender whose transmit window agrees with this
    /// receive window. Every frame must lie within a window's reach of both edges
    /// (`RX UWE - 127 <= TX FSN <= RX LWE + 127`); a frame flagged TX WIN UWE names the
    /// sender's newest frame, which cannot be behind the newest one received here
    /// (`RX UWE <= TX UWE <= RX LWE + 127`); one flagged TX WIN LWE names its oldest
    /// unacknowledged frame, which cannot be ahead of the oldest one missing here
    /// (`RX UWE - 127 <= TX LWE <= RX LWE`): a sender whose lower edge is ahead counts as
    /// acknowledged frames this receiver never had.
    ///
    /// The standard writes the tests on integers; on FSNs mod 256 each is taken relative to
    /// RX LWE, frames up to 127 ahead of it being ahead and the others behind, as
    /// [`ArqReceiver::on_segment`] reads them. RX UWE with nothing held beyond RX LWE is the
    /// frame before it.
    pub fn in_sync(&self, header: &DataHeader) -> bool {
        let edge = i16::from(MAX_WINDOW) - 1;
        // Signed distance from RX LWE: 0..=127 ahead, -128..=-1 behind.
        let from_lwe = |f: u8| i16::from(f.wrapping_sub(self.rx_lwe) as i8);
        let uwe = self.rx_uwe.map_or(-1, from_lwe);
        let fsn = from_lwe(header.fsn);
        let mut ok = fsn >= uwe - edge && fsn <= edge;
        if header.tx_uwe {
            ok &= fsn >= uwe;
        }
        if header.tx_lwe {
            ok &= fsn <= 0;
        }
        ok
    }

    /// Accept a data segment whose segment CRC was good. Returns whether its FSN was inside the
    /// receive window (a frame behind RX LWE is a duplicate, already covered by RX LWE; one
    /// further ahead is neither accepted nor acknowledged).
    pub fn on_segment(&mut self, header: &DataHeader, data: &[u8]) -> bool {
        let ahead = header.fsn.wrapping_sub(self.rx_lwe);
        if ahead >= MAX_WINDOW {
            // Behind RX LWE: an old frame the peer has not yet seen acknowledged.
            if self.rx_lwe.wrapping_sub(header.fsn) <= MAX_WINDOW {
                self.duplicates += 1;
            }
            return false;
        }
        if self.held.contains_key(&header.fsn) {
            self.duplicates += 1;
            return true;
        }
        self.held.insert(header.fsn, (*header, data.to_vec()));
        let beyond = |f: u8| f.wrapping_sub(self.rx_lwe);
        if self.rx_uwe.is_none_or(|u| beyond(header.fsn) > beyond(u)) {
            self.rx_uwe = Some(header.fsn);
        }
        // Move RX LWE over every frame now contiguous, reassembling C_PDUs in order.
        while let Some((h, seg)) = self.held.remove(&self.rx_lwe) {
            let early = self.early.remove(&self.rx_lwe);
            self.rx_lwe = self.rx_lwe.wrapping_add(1);
            if !early {
                self.reassemble(&h, seg);
            } else if h.start {
                // A whole C_PDU already delivered: whatever was open before it had lost its
                // END, as a START in `reassemble` would find.
                self.partial = None;
                self.dropping = false;
            }
        }
        if !header.deliver_in_order && self.held.contains_key(&header.fsn) {
            self.deliver_as_arrived(header.fsn);
        }
        if self
            .rx_uwe
            .is_some_and(|u| u.wrapping_sub(self.rx_lwe) >= MAX_WINDOW)
        {
            // RX LWE has passed RX UWE: nothing is held beyond it.
            self.rx_uwe = None;
        }
        true
    }

    /// The held frame `fsn` (beyond a gap, DELIVER IN ORDER clear) may have completed its
    /// C_PDU: if every frame from its START to its END is held, none dropped, none in order,
    /// none delivered before, deliver the C_PDU now and mark its frames.
    fn deliver_as_arrived(&mut self, fsn: u8) {
        let eligible = |f: u8| {
            self.held
                .get(&f)
                .filter(|(h, _)| !h.deliver_in_order && !h.drop && !self.early.contains(&f))
        };
        // Back to the START (never below RX LWE: those frames are not held, so the walk ends
        // within the window).
        let mut first = fsn;
        for _ in 0..MAX_WINDOW {
            match eligible(first) {
                Some((h, _)) if h.start => break,
                Some(_) => first = first.wrapping_sub(1),
                None => return,
            }
        }
        if !eligible(first).is_some_and(|(h, _)| h.start) {
            return;
        }
        let mut frames = Vec::new();
        let mut done = Vec::new();
        let mut f = first;
        for _ in 0..MAX_WINDOW {
            let Some((h, seg)) = eligible(f) else {
                return;
            };
            if f != first && h.start {
                return;
            }
            done.extend_from_slice(seg);
            if done.len() > self.max_cpdu {
                return;
            }
            frames.push(f);
            if h.end {
                self.delivered.push(done);
                self.early.extend(frames);
                return;
            }
            f = f.wrapping_add(1);
        }
    }

    fn reassemble(&mut self, header: &DataHeader, seg: Vec<u8>) {
        if header.drop {
            // [ED3-C] §C.3.3: discard this segment and everything received of its C_PDU. Its
            // later segments (held ones included) follow without START and are passed over
            // like those of any C_PDU whose beginning is missing. Count the C_PDU once, at
            // its first DROP frame.
            if header.start || !self.dropping {
                self.dropped += 1;
            }
            self.partial = None;
            self.dropping = !header.end;
            return;
        }
        if header.start || header.end {
            self.dropping = false;
        }
        if header.start {
            // A START while a C_PDU is open means the open one lost its END: drop it.
            self.partial = Some(Vec::new());
        }
        let Some(buf) = self.partial.as_mut() else {
            return;
        };
        if buf.len() + seg.len() > self.max_cpdu {
            self.partial = None;
            return;
        }
        buf.extend_from_slice(&seg);
        if header.end
            && let Some(done) = self.partial.take()
        {
            self.delivered.push(done);
        }
    }

    /// The ACK to send now: RX LWE and the selective bitmap up to RX UWE.
    pub fn ack(&self) -> Ack {
        let uwe = self.rx_uwe.unwrap_or(self.rx_lwe);
        Ack::from_window(self.rx_lwe, uwe, |f| self.held.contains_key(&f)).unwrap_or(Ack {
            rx_lwe: self.rx_lwe,
            bitmap: Vec::new(),
        })
    }

    /// Reset the receive window (a RESET/WIN-RESYNC D_PDU's RESET RX WIN CMND, or FULL RESET
    /// CMD): RX LWE becomes `new_rx_lwe`; the C_PDUs held whole beyond a gap (every segment
    /// from START to END received, none with DROP C_PDU) are delivered, in FSN order, after
    /// those already complete; the other held frames and the C_PDU being reassembled are
    /// discarded. The whole ones were acknowledged, so their sender may have confirmed them to
    /// its client, and nothing sent after the reset carries them again: discarding them would
    /// lose confirmed data ([ED3-C]: a full reset deletes the C_PDUs "still waiting to be
    /// completed"; these are complete, waiting only for the gap before them).
    pub fn reset(&mut self, new_rx_lwe: u8) {
        let lwe = self.rx_lwe;
        let mut frames: Vec<(u8, (DataHeader, Vec<u8>))> =
            std::mem::take(&mut self.held).into_iter().collect();
        frames.sort_by_key(|(f, _)| f.wrapping_sub(lwe));
        // The C_PDU being gathered from the held frames: its next FSN and its bytes so far.
        let mut run: Option<(u8, Vec<u8>)> = None;
        for (fsn, (h, seg)) in frames {
            let continues = run.as_ref().is_some_and(|(next, _)| *next == fsn);
            if self.early.contains(&fsn) || h.drop || (!h.start && !continues) {
                // Delivered already as it arrived, dropped, or part of an incomplete C_PDU.
                run = None;
                continue;
            }
            let mut buf = if h.start {
                Vec::new()
            } else {
                run.take().map(|(_, b)| b).unwrap_or_default()
            };
            buf.extend_from_slice(&seg);
            if buf.len() > self.max_cpdu {
                run = None;
            } else if h.end {
                self.delivered.push(buf);
                run = None;
            } else {
                run = Some((fsn.wrapping_add(1), buf));
            }
        }
        self.forget(new_rx_lwe);
    }

    /// Forget everything received, as a node that restarted has (or one told to drop its
    /// receive state): RX LWE becomes `new_rx_lwe`, held frames and the C_PDU being
    /// reassembled are gone. C_PDUs already complete stay deliverable.
    pub fn forget(&mut self, new_rx_lwe: u8) {
        self.rx_lwe = new_rx_lwe;
        self.rx_uwe = None;
        self.held.clear();
        self.early.clear();
        self.partial = None;
        self.dropping = false;
    }

    /// Complete C_PDUs received since the last call, in the order they were delivered.
    pub fn take_delivered(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.delivered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpdu::{Address, Body, Dpdu, Eow};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn a_receiver_is_idle_only_with_nothing_half_received() {
        let mut tx = ArqSender::new(8, 100).unwrap();
        tx.push(vec![7; 250]).unwrap(); // FSNs 0, 1, 2
        let segs = tx.next_segments(8);
        let mut rx = ArqReceiver::new(1000);
        assert!(rx.is_idle());
        // FSN 0 (the START) in: a C_PDU half reassembled.
        rx.on_segment(&segs[0].header, &segs[0].data);
        assert!(!rx.is_idle());
        // FSN 2 before FSN 1: held beyond the gap.
        rx.on_segment(&segs[2].header, &segs[2].data);
        assert!(!rx.is_idle());
        rx.on_segment(&segs[1].header, &segs[1].data);
        assert_eq!(rx.take_delivered(), vec![vec![7; 250]]);
        assert!(rx.is_idle());
    }

    #[test]
    fn reset_keeps_unsent_cpdus_and_reports_sent_ones() {
        let mut tx = ArqSender::new(8, 100).unwrap();
        let a = tx.push(vec![1; 150]).unwrap(); // FSNs 0, 1
        let b = tx.push(vec![2; 50]).unwrap(); // FSN 2
        let c = tx.push(vec![3; 250]).unwrap(); // FSNs 3, 4, 5
        // Only FSNs 0 and 1 (all of `a`) go on the air.
        assert_eq!(tx.next_segments(2).len(), 2);
        assert_eq!(tx.reset(), vec![a]);
        assert_eq!((tx.tx_lwe(), tx.in_flight()), (0, 0));
        // `b` and `c` start again from FSN 0, whole.
        let segs = tx.next_segments(8);
        let fsns: Vec<u8> = segs.iter().map(|s| s.header.fsn).collect();
        assert_eq!(fsns, vec![0, 1, 2, 3]);
        assert!(segs.iter().all(|s| !s.retransmission));
        let mut rx = ArqReceiver::new(1000);
        // A receiver that held part of a C_PDU from the old window drops it at its reset.
        rx.on_segment(
            &DataHeader {
                fsn: 40,
                start: true,
                ..DataHeader::default()
            },
            b"old",
        );
        rx.reset(0);
        for s in &segs {
            rx.on_segment(&s.header, &s.data);
        }
        assert_eq!(rx.take_delivered(), vec![vec![2; 50], vec![3; 250]]);
        assert!(tx.on_ack(&rx.ack()));
        assert_eq!(tx.take_confirmed(), vec![b, c]);
        // An ACK from a receiver that lost its state lies outside the window.
        assert!(!tx.on_ack(&Ack {
            rx_lwe: 200,
            bitmap: Vec::new()
        }));
    }

    #[test]
    fn a_reset_delivers_the_whole_cpdus_held_beyond_a_gap_and_drops_the_rest() {
        let frame = |fsn: u8, start: bool, end: bool, drop: bool| DataHeader {
            fsn,
            start,
            end,
            drop,
            deliver_in_order: true,
            ..DataHeader::default()
        };
        let mut rx = ArqReceiver::new(1000);
        // FSN 0 never comes. Held beyond it: a one-frame C_PDU (2), a two-frame one (4, 5), a
        // START without its END (7), a C_PDU with a DROP frame (9, 10), a middle segment
        // without its START (12), and a C_PDU whose first frame is missing (14 lost, 15).
        for (h, data) in [
            (frame(2, true, true, false), &b"A"[..]),
            (frame(4, true, false, false), b"B"),
            (frame(5, false, true, false), b"C"),
            (frame(7, true, false, false), b"D"),
            (frame(9, true, false, false), b"E"),
            (frame(10, false, true, true), b""),
            (frame(12, false, false, false), b"F"),
            (frame(15, false, true, false), b"G"),
        ] {
            assert!(rx.on_segment(&h, data));
        }
        assert!(rx.take_delivered().is_empty(), "all held behind FSN 0");
        rx.reset(0);
        assert_eq!(rx.take_delivered(), vec![b"A".to_vec(), b"BC".to_vec()]);
        assert!(rx.is_idle());
        // Forgetting (a restart) delivers nothing of what was held.
        rx.on_segment(&frame(3, true, true, false), b"H");
        rx.forget(0);
        assert!(rx.take_delivered().is_empty() && rx.is_idle());
    }

    #[test]
    fn the_destination_synchronisation_tests_catch_windows_that_disagree() {
        let frame = |fsn: u8, tx_lwe: bool, tx_uwe: bool| DataHeader {
            start: true,
            end: true,
            deliver_in_order: true,
            drop: false,
            tx_uwe,
            tx_lwe,
            fsn,
        };
        let mut rx = ArqReceiver::new(4096);
        // Fresh (RX LWE 0, nothing beyond): a sender at its start is in step.
        assert!(rx.in_sync(&frame(0, true, true)));
        // A sender whose lower edge is 5 counts frames 0-4 as acknowledged: out of step.
        assert!(!rx.in_sync(&frame(5, true, false)));
        assert!(rx.in_sync(&frame(5, false, true)), "5 may be its newest");
        for f in 0..10 {
            assert!(rx.on_segment(&frame(f, false, false), b"x"));
        }
        // RX LWE 10, everything before it held: a retransmitted copy of the sender's oldest
        // frame (its ACK lost) is in step, and so is its newest one, 9.
        assert!(rx.in_sync(&frame(3, true, false)));
        assert!(rx.in_sync(&frame(9, false, true)));
        // A sender whose newest frame is 3 never sent 4-9, which arrived here: out of step.
        assert!(!rx.in_sync(&frame(3, false, true)));
        // Its lower edge may not be beyond RX LWE.
        assert!(rx.in_sync(&frame(10, true, true)));
        assert!(!rx.in_sync(&frame(12, true, false)));
        // A gap at 10 with 11-20 held: RX UWE 20. Its window reaches back to 20 - 127 = 149
        // (mod 256) at most: a frame at 148 cannot share a 128-frame window with 20.
        for f in 11..=20 {
            assert!(rx.on_segment(&frame(f, false, false), b"x"));
        }
        assert!(rx.in_sync(&frame(149, false, false)));
        assert!(!rx.in_sync(&frame(148, false, false)));
        assert!(rx.in_sync(&frame(10, true, false)));
        assert!(
            !rx.in_sync(&frame(15, false, true)),
            "20 arrived, so 15 is not its newest"
        );
        assert!(
            rx.in_sync(&frame(137, false, true)),
            "137 = 10 + 127 is in reach"
        );
        assert!(rx.in_sync(&frame(20, false, true)));
    }

    #[test]
    fn a_dropped_cpdu_is_discarded_by_the_receiver_and_the_window_moves_on() {
        let mut tx = ArqSender::new(4, 100).unwrap();
        let a = tx.push(vec![1; 250]).unwrap(); // FSNs 0, 1, 2
        let b = tx.push(vec![2; 50]).unwrap(); // FSN 3
        let c = tx.push(vec![3; 50]).unwrap(); // waits: the window of 4 is full
        let first = tx.next_segments(2); // FSNs 0 and 1 of `a` on the air
        let mut rx = ArqReceiver::new(1000);
        // FSN 0 arrives; FSN 1 is lost.
        rx.on_segment(&first[0].header, &first[0].data);
        assert!(tx.on_ack(&rx.ack()));
        assert!(tx.take_confirmed().is_empty());
        // `a` runs out of time: FSNs 1 and 2 become DROP frames without data, `c` (never
        // segmented) just leaves the queue.
        assert_eq!(tx.drop_cpdu(a), Dropped::InWindow { frames: 2 });
        assert_eq!(tx.drop_cpdu(c), Dropped::Unsent);
        assert_eq!(tx.drop_cpdu(c), Dropped::NotHeld);
        let second = tx.next_segments(8);
        let seen: Vec<(u8, bool, usize, bool)> = second
            .iter()
            .map(|s| (s.header.fsn, s.header.drop, s.data.len(), s.retransmission))
            .collect();
        assert_eq!(
            seen,
            vec![
                (1, true, 0, true),
                (2, true, 0, false),
                (3, false, 50, false)
            ]
        );
        // Through the real codec: a DROP frame has an empty segment.
        let a0 = Address::new(1).unwrap();
        for s in &second {
            let wire = Dpdu::new(
                a0,
                a0,
                Body::DataOnly {
                    header: s.header,
                    segment: s.data.clone(),
                },
            )
            .encode()
            .unwrap();
            let Ok((
                Dpdu {
                    body: Body::DataOnly { header, segment },
                    ..
                },
                _,
            )) = Dpdu::decode(&wire)
            else {
                panic!("a DROP frame must decode");
            };
            rx.on_segment(&header, &segment);
        }
        // The receiver discards `a` (its first segment included) and delivers `b`.
        assert_eq!(rx.take_delivered(), vec![vec![2; 50]]);
        assert_eq!(rx.dropped(), 1);
        // DROP frames are acknowledged like any other; only `b` is confirmed.
        assert!(tx.on_ack(&rx.ack()));
        assert_eq!(tx.take_confirmed(), vec![b]);
        assert!(tx.is_idle());
        assert_eq!((tx.tx_lwe(), rx.rx_lwe()), (4, 4));
    }

    #[test]
    fn a_cleared_sender_starts_again_at_fsn_zero() {
        let mut tx = ArqSender::new(8, 100).unwrap();
        tx.push(vec![1; 150]).unwrap();
        tx.push(vec![2; 50]).unwrap();
        assert_eq!(tx.next_segments(1).len(), 1);
        tx.clear();
        assert!(tx.is_idle());
        assert!(tx.take_confirmed().is_empty());
        tx.push(vec![3; 10]).unwrap();
        let segs = tx.next_segments(8);
        assert_eq!((segs.len(), segs[0].header.fsn), (1, 0));
        assert!(!segs[0].retransmission);
    }

    #[test]
    fn next_segments_within_respects_the_byte_budget() {
        let mut tx = ArqSender::new(16, 100).unwrap();
        tx.push(vec![7; 450]).unwrap();
        // 5 frames of 100, 100, 100, 100, 50 bytes; 20 bytes of framing each.
        let first = tx.next_segments_within(16, 250, 20);
        assert_eq!(first.len(), 2);
        // Always at least one frame, even over budget.
        let next = tx.next_segments_within(16, 10, 20);
        assert_eq!(next.len(), 1);
        // The window bound still applies.
        let rest = tx.next_segments_within(1, 10_000, 20);
        assert_eq!(rest.len(), 1);
    }

    fn cpdu(i: usize, len: usize) -> Vec<u8> {
        (0..len).map(|j| (i * 31 + j) as u8).collect()
    }

    /// Run a link where each frame and each ACK is lost with probability `loss`, passing every
    /// frame through the real D_PDU codec. Returns (delivered C_PDUs, retransmissions, rounds).
    fn run(loss: f64, count: usize, window: u8, seed: u64) -> (Vec<Vec<u8>>, Vec<Vec<u8>>, u64) {
        run_ordered(loss, &vec![true; count], window, seed)
    }

    /// [`run`] with each C_PDU's DELIVER IN ORDER flag given.
    fn run_ordered(
        loss: f64,
        in_order: &[bool],
        window: u8,
        seed: u64,
    ) -> (Vec<Vec<u8>>, Vec<Vec<u8>>, u64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut tx = ArqSender::new(window, 200).unwrap();
        let mut rx = ArqReceiver::new(4096);
        let sent: Vec<Vec<u8>> = (0..in_order.len())
            .map(|i| cpdu(i, 1 + (i * 97) % 700))
            .collect();
        let mut ids = Vec::new();
        for (c, &o) in sent.iter().zip(in_order) {
            ids.push(tx.push_with(c.clone(), o).unwrap());
        }
        let mut delivered = Vec::new();
        let mut confirmed = Vec::new();
        let a = Address::new(1).unwrap();
        for _round in 0..10_000 {
            if tx.is_idle() {
                break;
            }
            for seg in tx.next_segments(20) {
                let dpdu = Dpdu {
                    eow: Eow::NONE,
                    eot: 0,
                    destination: a,
                    source: a,
                    body: Body::DataOnly {
                        header: seg.header,
                        segment: seg.data,
                    },
                };
                let wire = dpdu.encode().unwrap();
                if rng.random::<f64>() < loss {
                    continue;
                }
                if let Ok((
                    Dpdu {
                        body: Body::DataOnly { header, segment },
                        ..
                    },
                    _,
                )) = Dpdu::decode(&wire)
                {
                    rx.on_segment(&header, &segment);
                }
            }
            delivered.extend(rx.take_delivered());
            let ack = rx.ack();
            let wire = Dpdu {
                eow: Eow::NONE,
                eot: 0,
                destination: a,
                source: a,
                body: Body::AckOnly(ack),
            }
            .encode()
            .unwrap();
            if rng.random::<f64>() >= loss
                && let Ok((
                    Dpdu {
                        body: Body::AckOnly(ack),
                        ..
                    },
                    _,
                )) = Dpdu::decode(&wire)
            {
                tx.on_ack(&ack);
            }
            confirmed.extend(tx.take_confirmed());
        }
        // Selective ACKs confirm C_PDUs as their segments arrive, not necessarily in order.
        confirmed.sort_unstable();
        assert_eq!(confirmed, ids, "every C_PDU confirmed exactly once");
        (sent, delivered, tx.retransmissions())
    }

    #[test]
    fn lossless_link_delivers_in_order_without_retransmissions() {
        let (sent, delivered, retx) = run(0.0, 50, 128, 1);
        assert_eq!(delivered, sent);
        assert_eq!(retx, 0);
    }

    #[test]
    fn lossy_link_delivers_everything_exactly_once() {
        for (seed, window) in [(2, 128), (3, 16), (4, 4)] {
            let (sent, delivered, retx) = run(0.3, 120, window, seed);
            assert_eq!(delivered, sent, "seed {seed} window {window}");
            assert!(retx > 0);
        }
    }

    #[test]
    fn fsns_wrap_around() {
        // 300 one-segment C_PDUs use FSNs 0..=255 and then wrap.
        let mut tx = ArqSender::new(128, 1023).unwrap();
        let mut rx = ArqReceiver::new(2048);
        for i in 0..300 {
            tx.push(cpdu(i, 10)).unwrap();
        }
        let mut got = 0;
        for _ in 0..10 {
            for s in tx.next_segments(64) {
                rx.on_segment(&s.header, &s.data);
            }
            got += rx.take_delivered().len();
            tx.on_ack(&rx.ack());
        }
        assert_eq!(got, 300);
        assert!(tx.is_idle());
        assert_eq!(rx.rx_lwe(), (300 % 256) as u8);
    }

    #[test]
    fn window_limits_frames_in_flight_and_selective_ack_is_exact() {
        let mut tx = ArqSender::new(4, 10).unwrap();
        for i in 0..3 {
            tx.push(cpdu(i, 10)).unwrap();
        }
        tx.push(cpdu(9, 25)).unwrap(); // 3 segments: waits for room
        let first = tx.next_segments(100);
        assert_eq!(
            first.iter().map(|s| s.header.fsn).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert!(first[0].header.tx_lwe && first[2].header.tx_uwe);
        let mut rx = ArqReceiver::new(100);
        rx.on_segment(&first[0].header, &first[0].data);
        rx.on_segment(&first[2].header, &first[2].data);
        let ack = rx.ack();
        // RX LWE 1 (frame 1 missing), bit 0 = FSN 2 received.
        assert_eq!(
            ack,
            Ack {
                rx_lwe: 1,
                bitmap: vec![0b1]
            }
        );
        tx.on_ack(&ack);
        assert_eq!(tx.tx_lwe(), 1);
        assert_eq!(tx.take_confirmed(), vec![0, 2]);
        // Only frame 1 is retransmitted; the 3-segment C_PDU now fits (1 + 3 <= 4).
        let second = tx.next_segments(100);
        assert_eq!(
            second
                .iter()
                .map(|s| (s.header.fsn, s.retransmission))
                .collect::<Vec<_>>(),
            vec![(1, true), (3, false), (4, false), (5, false)]
        );
        assert!(second[1].header.start && !second[1].header.end && second[3].header.end);
        // Out-of-window FSNs are refused.
        let far = DataHeader {
            fsn: 200,
            ..DataHeader::default()
        };
        assert!(!rx.on_segment(&far, b"x"));
    }

    #[test]
    fn stale_or_corrupt_acks_acknowledge_nothing_unsent() {
        let mut tx = ArqSender::new(8, 10).unwrap();
        for i in 0..4 {
            tx.push(cpdu(i, 5)).unwrap();
        }
        let sent = tx.next_segments(2); // FSNs 0 and 1 sent, 2 and 3 ready
        assert_eq!(sent.len(), 2);
        // RX LWE 200 is far outside [0, 4]: the whole ACK is ignored.
        tx.on_ack(&Ack {
            rx_lwe: 200,
            bitmap: vec![0xFF; 16],
        });
        assert_eq!(tx.in_flight(), 4);
        tx.on_ack(&Ack {
            rx_lwe: 0,
            bitmap: vec![0xFF],
        });
        // Bit 0 = FSN 1 (sent) is acknowledged; FSNs 2.. were never sent.
        assert_eq!(tx.in_flight(), 3);
        assert_eq!(tx.take_confirmed(), vec![1]);
        tx.on_ack(&Ack {
            rx_lwe: 2,
            bitmap: vec![],
        });
        assert_eq!(tx.take_confirmed(), vec![0]);
        assert_eq!(tx.tx_lwe(), 2);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        #[test]
        fn any_loss_pattern_delivers_in_order_exactly_once(
            seed in proptest::prelude::any::<u64>(),
            loss in 0.0f64..0.6,
            window in 4u8..=128,
        ) {
            let (sent, delivered, _) = run(loss, 40, window, seed);
            proptest::prop_assert_eq!(delivered, sent);
        }

        /// Any mix of DELIVER IN ORDER flags under any loss: every C_PDU is delivered exactly
        /// once, and each in-order one after every C_PDU sent before it.
        #[test]
        fn any_mix_of_delivery_orders_delivers_each_cpdu_once(
            seed in proptest::prelude::any::<u64>(),
            loss in 0.0f64..0.6,
            window in 4u8..=128,
            in_order in proptest::collection::vec(proptest::prelude::any::<bool>(), 1..40),
        ) {
            let (sent, delivered, _) = run_ordered(loss, &in_order, window, seed);
            let mut position = Vec::new();
            for c in &sent {
                let at: Vec<usize> = delivered
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| *d == c)
                    .map(|(i, _)| i)
                    .collect();
                proptest::prop_assert_eq!(at.len(), 1, "delivered once");
                position.push(at[0]);
            }
            for (i, _) in in_order.iter().enumerate().filter(|(_, o)| **o) {
                for j in 0..i {
                    proptest::prop_assert!(position[j] < position[i], "{} before {}", j, i);
                }
            }
        }
    }

    /// [ED3-C] §C.3.3 (7) and (8): three C_PDUs, A (two frames), B (two frames) and C (one
    /// frame), A's second frame lost. With B sent as-they-arrive, B goes up as soon as its
    /// frames are in, and C (in order) waits for A; with B in order, both wait. The frames of
    /// B stay in the window until RX LWE passes them, and B never goes up twice.
    #[test]
    fn an_as_they_arrive_cpdu_overtakes_a_gap_and_an_in_order_one_waits() {
        for b_in_order in [false, true] {
            let mut tx = ArqSender::new(16, 10).unwrap();
            let (a, b, c) = (cpdu(1, 20), cpdu(2, 15), cpdu(3, 5));
            tx.push(a.clone()).unwrap();
            tx.push_with(b.clone(), b_in_order).unwrap();
            tx.push(c.clone()).unwrap();
            let first = tx.next_segments(100);
            assert_eq!(first.len(), 5);
            assert_eq!(
                first
                    .iter()
                    .map(|s| s.header.deliver_in_order)
                    .collect::<Vec<_>>(),
                [true, true, b_in_order, b_in_order, true]
            );
            let mut rx = ArqReceiver::new(100);
            for s in first.iter().filter(|s| s.header.fsn != 1) {
                rx.on_segment(&s.header, &s.data);
            }
            let now = rx.take_delivered();
            if b_in_order {
                assert!(now.is_empty());
            } else {
                assert_eq!(now, vec![b.clone()]);
            }
            // The ACK still shows the gap, and B's frames as received.
            assert_eq!(
                rx.ack(),
                Ack {
                    rx_lwe: 1,
                    bitmap: vec![0b111]
                }
            );
            assert!(!rx.is_idle());
            tx.on_ack(&rx.ack());
            let again = tx.next_segments(100);
            assert_eq!(again.len(), 1);
            rx.on_segment(&again[0].header, &again[0].data);
            let later = rx.take_delivered();
            if b_in_order {
                assert_eq!(later, vec![a.clone(), b.clone(), c.clone()]);
            } else {
                assert_eq!(later, vec![a.clone(), c.clone()]);
            }
            assert_eq!(rx.rx_lwe(), 5);
            assert!(rx.is_idle());
        }
    }

    /// A reset delivers the whole C_PDUs held beyond a gap, but not one already delivered as it
    /// arrived.
    #[test]
    fn a_reset_does_not_deliver_again_what_went_up_as_it_arrived() {
        let mut tx = ArqSender::new(16, 10).unwrap();
        tx.push(cpdu(1, 20)).unwrap();
        tx.push_with(cpdu(2, 15), false).unwrap();
        tx.push(cpdu(3, 5)).unwrap();
        let mut rx = ArqReceiver::new(100);
        for s in tx.next_segments(100).iter().filter(|s| s.header.fsn != 1) {
            rx.on_segment(&s.header, &s.data);
        }
        assert_eq!(rx.take_delivered(), vec![cpdu(2, 15)]);
        rx.reset(0);
        assert_eq!(rx.take_delivered(), vec![cpdu(3, 5)]);
        assert!(rx.is_idle());
    }

    #[test]
    fn configuration_is_checked() {
        assert_eq!(ArqSender::new(0, 10).unwrap_err(), ArqError::BadWindow(0));
        assert_eq!(
            ArqSender::new(129, 10).unwrap_err(),
            ArqError::BadWindow(129)
        );
        assert_eq!(
            ArqSender::new(8, 1024).unwrap_err(),
            ArqError::BadSegmentSize(1024)
        );
        let mut tx = ArqSender::new(2, 10).unwrap();
        assert!(matches!(
            tx.push(vec![0; 21]),
            Err(ArqError::CpduTooLarge { len: 21, window: 2 })
        ));
    }
}
