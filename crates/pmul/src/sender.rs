//! The P_MUL sender of one message to a destination list, sans-IO.
//!
//! The gateway's multicast link makes one [`Sender`] per message, hands every PDU that
//! [`Sender::poll_transmit`] gives to the bearer (one non-ARQ U_PDU to the group address each),
//! feeds every Ack_PDU that comes back to [`Sender::handle_pdu`], and calls
//! [`Sender::handle_timeout`] at [`Sender::poll_timeout`]. Time is milliseconds since the Unix
//! epoch, from the caller (the Address_PDU's `Expiry_Time` is absolute Unix time).
//!
//! What it does, following ACP 142 chapter 3's sender procedures:
//! - cuts the message into Data_PDUs of at most [`SenderConfig::pdu_size`] bytes, numbered from 1;
//! - sends the Address_PDU(s) with every destination, then every Data_PDU, `1 +
//!   initial_repeats` times (repeats are for bearers without ARQ, where a lost U_PDU costs a
//!   whole repair round trip);
//! - keeps per destination what it acknowledged: complete, or the Data_PDUs it still misses;
//! - `repair_interval_ms` after a round has left, sends a repair round: an Address_PDU listing
//!   only the destinations not yet complete, then only the Data_PDUs that acks reported missing
//!   (the union over destinations). A destination that has not answered at all gets the
//!   Address_PDU only, which makes it answer with its missing list (or re-send a lost ack);
//! - EMCON destinations are not expected to answer (their acks may come hours later): the whole
//!   message is repeated `emcon_repeats` times every `emcon_interval_ms` for them instead, and
//!   they complete whenever their ack finally arrives; one that answers with a missing list is
//!   repaired like any other destination;
//! - at expiry every destination not complete is expired and one Discard_Message_PDU is sent.

use std::collections::{BTreeSet, VecDeque};

use thiserror::Error;
use tracing::debug;

use crate::pdu::{
    ADDRESS_HEADER_LEN, AckPdu, AddressPdu, DATA_HEADER_LEN, DEST_ENTRY_LEN, DataPdu, DecodeError,
    DestEntry, DiscardPdu, EncodeError, Map, Pdu,
};

/// Settings of a sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SenderConfig {
    /// Largest PDU in bytes (the bearer's MTU: 2048 on most STANAG 5066 servers). At least 32.
    pub pdu_size: usize,
    /// P_MUL priority of every PDU.
    pub priority: u8,
    /// Time from [`Sender::new`] until the message expires.
    pub lifetime_ms: u64,
    /// Extra copies of the whole message in the first transmission (0: send it once).
    pub initial_repeats: u32,
    /// Wait after a round has left before a repair round.
    pub repair_interval_ms: u64,
    /// Repair rounds at most; after them the sender waits for acks until expiry.
    pub max_repairs: u32,
    /// Repeats of the whole message for EMCON destinations.
    pub emcon_repeats: u32,
    /// Interval between EMCON repeats.
    pub emcon_interval_ms: u64,
}

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            pdu_size: 2048,
            priority: 0,
            lifetime_ms: 24 * 3_600_000,
            initial_repeats: 0,
            repair_interval_ms: 60_000,
            max_repairs: 10,
            emcon_repeats: 3,
            emcon_interval_ms: 3_600_000,
        }
    }
}

/// One destination of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Destination {
    /// `Destination_ID` (the receiving node's id).
    pub id: u32,
    /// `Message_Sequence_Number` for this destination.
    pub msn: u32,
    /// The destination is under EMCON: expect no ack soon.
    pub emcon: bool,
}

impl Destination {
    /// A destination that acknowledges normally.
    pub fn new(id: u32) -> Self {
        Destination {
            id,
            msn: 0,
            emcon: false,
        }
    }

    /// A destination under EMCON.
    pub fn emcon(id: u32) -> Self {
        Destination {
            id,
            msn: 0,
            emcon: true,
        }
    }
}

/// Where a destination stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DestState {
    /// Not acknowledged completely yet.
    Pending,
    /// Acknowledged the whole message.
    Complete,
    /// The message expired before it acknowledged.
    Expired,
}

/// A destination's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestStatus {
    /// The destination.
    pub dest: Destination,
    /// Its state.
    pub state: DestState,
    /// Whether any ack from it arrived.
    pub heard: bool,
    /// The Data_PDUs its last ack reported missing.
    pub missing: Vec<u16>,
    /// When it completed.
    pub completed_at: Option<u64>,
}

/// Counters of what the sender sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Address_PDUs sent.
    pub address_pdus: u64,
    /// Data_PDUs of the first transmission and its initial repeats.
    pub initial_data_pdus: u64,
    /// Data_PDUs sent in repair rounds (only ones reported missing).
    pub repair_data_pdus: u64,
    /// Data_PDUs sent in EMCON repeats.
    pub emcon_data_pdus: u64,
    /// Repair rounds.
    pub repair_rounds: u32,
    /// Discard_Message_PDUs sent.
    pub discard_pdus: u64,
}

/// Why a sender cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SenderError {
    /// The PDU size leaves no room for data or a destination entry.
    #[error("PDU size {0} is below the 32-byte minimum")]
    PduSizeTooSmall(usize),
    /// The message needs more Data_PDUs than a 16-bit sequence number counts.
    #[error("message of {bytes} bytes needs {pdus} Data_PDUs, more than 65535")]
    TooManyPdus {
        /// Message bytes.
        bytes: usize,
        /// Data_PDUs it needs.
        pdus: usize,
    },
    /// No destinations.
    #[error("no destinations")]
    NoDestinations,
    /// A destination listed twice.
    #[error("destination {0:#010x} listed twice")]
    DuplicateDestination(u32),
    /// A PDU failed to encode (a bug or an absurd setting).
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// The P_MUL sender of one message.
#[derive(Debug)]
pub struct Sender {
    config: SenderConfig,
    source: u32,
    message_id: u32,
    expiry_ms: u64,
    fragments: Vec<Vec<u8>>,
    dests: Vec<DestStatus>,
    queue: VecDeque<Vec<u8>>,
    /// Arm the repair timer once the queue has drained.
    arm_on_drain: bool,
    repair_at: Option<u64>,
    emcon_at: Option<u64>,
    emcon_left: u32,
    expired: bool,
    stats: SenderStats,
}

impl Sender {
    /// A sender of `data` from `source` as `message_id` to `destinations`, starting at `now`.
    pub fn new(
        config: SenderConfig,
        message_id: u32,
        source: u32,
        destinations: Vec<Destination>,
        data: Vec<u8>,
        now: u64,
    ) -> Result<Self, SenderError> {
        if config.pdu_size < 32 {
            return Err(SenderError::PduSizeTooSmall(config.pdu_size));
        }
        if destinations.is_empty() {
            return Err(SenderError::NoDestinations);
        }
        let mut seen = BTreeSet::new();
        for d in &destinations {
            if !seen.insert(d.id) {
                return Err(SenderError::DuplicateDestination(d.id));
            }
        }
        let chunk = config.pdu_size.min(crate::pdu::MAX_PDU_LEN) - DATA_HEADER_LEN;
        // An empty message is still one (empty) Data_PDU, so that receivers see it complete.
        let fragments: Vec<Vec<u8>> = if data.is_empty() {
            vec![Vec::new()]
        } else {
            data.chunks(chunk).map(<[u8]>::to_vec).collect()
        };
        if fragments.len() > usize::from(u16::MAX) {
            return Err(SenderError::TooManyPdus {
                bytes: data.len(),
                pdus: fragments.len(),
            });
        }
        let has_emcon = destinations.iter().any(|d| d.emcon);
        let mut s = Sender {
            expiry_ms: now.saturating_add(config.lifetime_ms),
            emcon_at: (has_emcon && config.emcon_repeats > 0)
                .then(|| now.saturating_add(config.emcon_interval_ms)),
            emcon_left: config.emcon_repeats,
            config,
            source,
            message_id,
            fragments,
            dests: destinations
                .into_iter()
                .map(|dest| DestStatus {
                    dest,
                    state: DestState::Pending,
                    heard: false,
                    missing: Vec::new(),
                    completed_at: None,
                })
                .collect(),
            queue: VecDeque::new(),
            arm_on_drain: true,
            repair_at: None,
            expired: false,
            stats: SenderStats::default(),
        };
        let all: Vec<u16> = (1..=s.total_pdus()).collect();
        for _ in 0..=s.config.initial_repeats {
            s.queue_round(&all, Kind::Initial)?;
        }
        debug!(
            message_id,
            pdus = s.fragments.len(),
            dests = s.dests.len(),
            "P_MUL message queued"
        );
        Ok(s)
    }

    /// Data_PDUs of the message (`Total_Number_of_PDUs`).
    pub fn total_pdus(&self) -> u16 {
        // Checked in `new`.
        self.fragments.len() as u16
    }

    /// The Expiry_Time field: whole seconds since the epoch.
    fn expiry_secs(&self) -> u32 {
        u32::try_from(self.expiry_ms / 1000).unwrap_or(u32::MAX)
    }

    /// Queues Address_PDU(s) for the pending destinations and the Data_PDUs `seqs`.
    fn queue_round(&mut self, seqs: &[u16], kind: Kind) -> Result<(), EncodeError> {
        let pending: Vec<DestEntry> = self
            .dests
            .iter()
            .filter(|d| d.state == DestState::Pending)
            .map(|d| DestEntry {
                dest_id: d.dest.id,
                msn: d.dest.msn,
                reserved: Vec::new(),
            })
            .collect();
        let per_pdu = ((self.config.pdu_size.min(crate::pdu::MAX_PDU_LEN) - ADDRESS_HEADER_LEN)
            / DEST_ENTRY_LEN)
            .max(1);
        let parts: Vec<&[DestEntry]> = pending.chunks(per_pdu).collect();
        let n = parts.len();
        for (i, part) in parts.into_iter().enumerate() {
            let pdu = Pdu::Address(AddressPdu {
                priority: self.config.priority,
                map: Map {
                    not_first: i > 0,
                    not_last: i + 1 < n,
                },
                extra: false,
                fec: None,
                total_pdus: self.total_pdus(),
                source: self.source,
                message_id: self.message_id,
                expiry: self.expiry_secs(),
                reserved_len: 0,
                dests: part.to_vec(),
            });
            self.queue.push_back(pdu.encode()?);
            self.stats.address_pdus += 1;
        }
        for &seq in seqs {
            let Some(data) = self.fragments.get(usize::from(seq).wrapping_sub(1)) else {
                continue;
            };
            let pdu = Pdu::Data(DataPdu {
                priority: self.config.priority,
                seq,
                source: self.source,
                message_id: self.message_id,
                data: data.clone(),
            });
            self.queue.push_back(pdu.encode()?);
            match kind {
                Kind::Initial => self.stats.initial_data_pdus += 1,
                Kind::Repair => self.stats.repair_data_pdus += 1,
                Kind::Emcon => self.stats.emcon_data_pdus += 1,
            }
        }
        Ok(())
    }

    /// The next PDU to send, if any.
    pub fn poll_transmit(&mut self, now: u64) -> Option<Vec<u8>> {
        if !self.expired && now >= self.expiry_ms {
            self.expire();
        }
        let pdu = self.queue.pop_front()?;
        if self.queue.is_empty() && self.arm_on_drain {
            self.arm_on_drain = false;
            if self.repairable().next().is_some() || self.any_pending_non_emcon() {
                self.repair_at = Some(now.saturating_add(self.config.repair_interval_ms));
            }
        }
        Some(pdu)
    }

    fn any_pending_non_emcon(&self) -> bool {
        self.dests
            .iter()
            .any(|d| d.state == DestState::Pending && (!d.dest.emcon || d.heard))
    }

    /// Pending destinations that repair rounds serve: non-EMCON ones, and EMCON ones that spoke.
    fn repairable(&self) -> impl Iterator<Item = &DestStatus> {
        self.dests
            .iter()
            .filter(|d| d.state == DestState::Pending && (!d.dest.emcon || d.heard))
    }

    /// The next time [`Sender::handle_timeout`] wants to run.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.is_finished() {
            return None;
        }
        [self.repair_at, self.emcon_at, Some(self.expiry_ms)]
            .into_iter()
            .flatten()
            .min()
    }

    /// Runs what is due at `now`: expiry, a repair round, an EMCON repeat.
    pub fn handle_timeout(&mut self, now: u64) {
        if self.is_finished() {
            return;
        }
        if now >= self.expiry_ms {
            self.expire();
            return;
        }
        if self.repair_at.is_some_and(|t| t <= now) {
            self.repair_at = None;
            self.repair_round();
        }
        if self.emcon_at.is_some_and(|t| t <= now) {
            self.emcon_at = None;
            self.emcon_round(now);
        }
    }

    fn repair_round(&mut self) {
        if !self.any_pending_non_emcon() || self.stats.repair_rounds >= self.config.max_repairs {
            return;
        }
        let union: BTreeSet<u16> = self
            .repairable()
            .flat_map(|d| d.missing.iter().copied())
            .collect();
        let seqs: Vec<u16> = union.into_iter().collect();
        self.stats.repair_rounds += 1;
        debug!(
            message_id = self.message_id,
            missing = seqs.len(),
            round = self.stats.repair_rounds,
            "P_MUL repair round"
        );
        // Encoding cannot fail for PDUs that encoded in `new`.
        if self.queue_round(&seqs, Kind::Repair).is_ok() {
            self.arm_on_drain = true;
        }
    }

    fn emcon_round(&mut self, now: u64) {
        let waiting = self
            .dests
            .iter()
            .any(|d| d.state == DestState::Pending && d.dest.emcon && !d.heard);
        if !waiting || self.emcon_left == 0 {
            return;
        }
        self.emcon_left -= 1;
        let all: Vec<u16> = (1..=self.total_pdus()).collect();
        debug!(
            message_id = self.message_id,
            left = self.emcon_left,
            "P_MUL EMCON repeat"
        );
        let _ = self.queue_round(&all, Kind::Emcon);
        if self.emcon_left > 0 {
            self.emcon_at = Some(now.saturating_add(self.config.emcon_interval_ms));
        }
    }

    fn expire(&mut self) {
        self.expired = true;
        self.queue.clear();
        self.repair_at = None;
        self.emcon_at = None;
        let mut any = false;
        for d in &mut self.dests {
            if d.state == DestState::Pending {
                d.state = DestState::Expired;
                any = true;
            }
        }
        if any {
            let pdu = Pdu::Discard(DiscardPdu {
                priority: self.config.priority,
                source: self.source,
                message_id: self.message_id,
            });
            if let Ok(bytes) = pdu.encode() {
                self.queue.push_back(bytes);
                self.stats.discard_pdus += 1;
            }
            debug!(message_id = self.message_id, "P_MUL message expired");
        }
    }

    /// Decodes a received PDU and takes in what concerns this message (Ack_PDU entries for it).
    /// Returns whether it did.
    pub fn handle_pdu(&mut self, bytes: &[u8], now: u64) -> Result<bool, DecodeError> {
        match Pdu::decode(bytes)? {
            Pdu::Ack(ack) => Ok(self.handle_ack(&ack, now)),
            _ => Ok(false),
        }
    }

    /// Takes in an Ack_PDU's entries for this message. Returns whether any concerned it.
    pub fn handle_ack(&mut self, ack: &AckPdu, now: u64) -> bool {
        if self.expired {
            return false;
        }
        let total = self.total_pdus();
        let mut touched = false;
        for e in &ack.entries {
            if e.source != self.source || e.message_id != self.message_id {
                continue;
            }
            let Some(d) = self.dests.iter_mut().find(|d| d.dest.id == ack.ack_sender) else {
                continue;
            };
            touched = true;
            if d.state != DestState::Pending {
                continue;
            }
            d.heard = true;
            d.missing = e
                .missing
                .iter()
                .copied()
                .filter(|&s| s >= 1 && s <= total)
                .collect();
            if e.missing.is_empty() {
                d.state = DestState::Complete;
                d.completed_at = Some(now);
                d.missing.clear();
                debug!(
                    message_id = self.message_id,
                    dest = d.dest.id,
                    "P_MUL destination complete"
                );
            }
        }
        if self.is_finished() {
            // Nothing left to repair: what is still queued would only cost airtime.
            self.queue.clear();
            self.repair_at = None;
            self.emcon_at = None;
        } else if touched && self.repair_at.is_none() && self.queue.is_empty() {
            // An ack after the repair timer went idle (e.g. an EMCON destination that has just
            // spoken): schedule a repair round for it.
            self.repair_at = Some(now.saturating_add(self.config.repair_interval_ms));
        }
        touched
    }

    /// Every destination's status.
    pub fn status(&self) -> &[DestStatus] {
        &self.dests
    }

    /// Counters of what was sent.
    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    /// Every destination acknowledged the whole message.
    pub fn is_complete(&self) -> bool {
        self.dests.iter().all(|d| d.state == DestState::Complete)
    }

    /// No destination is pending any more (complete or expired) and nothing is left to send.
    pub fn is_finished(&self) -> bool {
        self.queue.is_empty() && self.dests.iter().all(|d| d.state != DestState::Pending)
    }

    /// The message id.
    pub fn message_id(&self) -> u32 {
        self.message_id
    }

    /// When the message expires (ms since the epoch).
    pub fn expiry_ms(&self) -> u64 {
        self.expiry_ms
    }

    /// When the next repair round is due (ms since the epoch), if one is armed.
    pub fn repair_due(&self) -> Option<u64> {
        self.repair_at
    }

    /// Moves an armed repair round to `until` if it was due earlier: the caller knows the
    /// receivers cannot have answered yet (on a half-duplex channel its own node is still
    /// transmitting). Nothing happens when no round is armed.
    pub fn postpone_repair(&mut self, until: u64) {
        if let Some(t) = self.repair_at.as_mut() {
            *t = (*t).max(until);
        }
    }

    /// Moves an armed repair round and an armed EMCON repeat to `until` if they were due
    /// earlier: the caller's radio schedule leaves the frequency to other stations until then.
    /// A repeat that goes late puts the next one an interval after it. Expiry keeps its time.
    pub fn postpone_rounds(&mut self, until: u64) {
        self.postpone_repair(until);
        if let Some(t) = self.emcon_at.as_mut() {
            *t = (*t).max(until);
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Initial,
    Repair,
    Emcon,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pdu::AckInfoEntry;

    fn drain(s: &mut Sender, now: u64) -> Vec<Pdu> {
        let mut out = Vec::new();
        while let Some(b) = s.poll_transmit(now) {
            out.push(Pdu::decode(&b).unwrap_or_else(|e| panic!("{e}")));
        }
        out
    }

    fn ack(from: u32, missing: Vec<u16>) -> AckPdu {
        AckPdu {
            priority: 0,
            ack_sender: from,
            entries: vec![AckInfoEntry {
                source: 1,
                message_id: 5,
                missing,
            }],
            timestamp: None,
        }
    }

    fn cfg() -> SenderConfig {
        SenderConfig {
            pdu_size: 32,
            repair_interval_ms: 1000,
            ..SenderConfig::default()
        }
    }

    #[test]
    fn segments_and_repairs_only_missing() {
        let data: Vec<u8> = (0..100u8).collect();
        let mut s = Sender::new(
            cfg(),
            5,
            1,
            vec![Destination::new(2), Destination::new(3)],
            data,
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let first = drain(&mut s, 0);
        // 100 bytes at 16 per Data_PDU: 7 Data_PDUs, after two Address_PDUs (a 32-byte PDU
        // holds one destination entry).
        assert_eq!(first.len(), 9);
        assert!(matches!(&first[0], Pdu::Address(a) if a.total_pdus == 7 && a.map.not_last));
        assert!(matches!(&first[1], Pdu::Address(a) if a.map.not_first && !a.map.not_last));
        assert_eq!(s.poll_timeout(), Some(1000));
        assert!(s.handle_ack(&ack(2, vec![3, 6]), 500));
        assert!(s.handle_ack(&ack(3, vec![]), 600));
        s.handle_timeout(1000);
        let repair = drain(&mut s, 1000);
        let seqs: Vec<u16> = repair
            .iter()
            .filter_map(|p| match p {
                Pdu::Data(d) => Some(d.seq),
                _ => None,
            })
            .collect();
        assert_eq!(seqs, vec![3, 6]);
        assert!(
            matches!(&repair[0], Pdu::Address(a) if a.dests.len() == 1 && a.dests[0].dest_id == 2)
        );
        s.handle_ack(&ack(2, vec![]), 1500);
        assert!(s.is_complete() && s.is_finished());
        assert_eq!(s.poll_timeout(), None);
        assert_eq!(s.stats().repair_data_pdus, 2);
    }

    #[test]
    fn a_postponed_repair_round_lists_only_who_still_has_not_acknowledged() {
        let mut s = Sender::new(
            cfg(),
            5,
            1,
            vec![Destination::new(2), Destination::new(3)],
            b"hello".to_vec(),
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        drain(&mut s, 0);
        assert_eq!(s.repair_due(), Some(1000));
        // The node is still busy at 1000: the round waits, and the acks that come meanwhile
        // leave it only the destination that stayed silent.
        s.postpone_repair(3000);
        s.postpone_repair(2000);
        assert_eq!(s.repair_due(), Some(3000));
        s.handle_timeout(1000);
        assert!(drain(&mut s, 1000).is_empty(), "no round before 3000");
        assert!(s.handle_ack(&ack(3, vec![]), 2500));
        s.handle_timeout(3000);
        let r = drain(&mut s, 3000);
        assert!(
            matches!(&r[0], Pdu::Address(a) if a.dests.len() == 1 && a.dests[0].dest_id == 2),
            "{r:?}"
        );
    }

    #[test]
    fn silent_destination_gets_address_only_and_expiry_discards() {
        let mut s = Sender::new(
            SenderConfig {
                lifetime_ms: 10_000,
                max_repairs: 2,
                ..cfg()
            },
            5,
            1,
            vec![Destination::new(2)],
            b"x".to_vec(),
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        drain(&mut s, 0);
        s.handle_timeout(1000);
        let r = drain(&mut s, 1000);
        assert_eq!(r.len(), 1);
        assert!(matches!(r[0], Pdu::Address(_)));
        s.handle_timeout(2000);
        drain(&mut s, 2000);
        s.handle_timeout(3000);
        assert!(drain(&mut s, 3000).is_empty(), "max_repairs reached");
        assert_eq!(s.poll_timeout(), Some(10_000));
        s.handle_timeout(10_000);
        let d = drain(&mut s, 10_000);
        assert!(matches!(d[..], [Pdu::Discard(_)]));
        assert_eq!(s.status()[0].state, DestState::Expired);
        assert!(s.is_finished());
    }

    #[test]
    fn emcon_destination_gets_repeats_and_completes_late() {
        let mut s = Sender::new(
            SenderConfig {
                emcon_repeats: 2,
                emcon_interval_ms: 3_600_000,
                ..cfg()
            },
            5,
            1,
            vec![Destination::emcon(9)],
            vec![7; 40],
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(drain(&mut s, 0).len(), 4);
        // No repair timer for a lone EMCON destination: the next thing is the EMCON repeat.
        assert_eq!(s.poll_timeout(), Some(3_600_000));
        s.handle_timeout(3_600_000);
        assert_eq!(drain(&mut s, 3_600_000).len(), 4);
        s.handle_timeout(7_200_000);
        assert_eq!(drain(&mut s, 7_200_000).len(), 4);
        assert_eq!(s.stats().emcon_data_pdus, 6);
        s.handle_ack(&ack(9, vec![]), 9_000_000);
        assert!(s.is_complete());
    }

    #[test]
    fn rounds_postponed_by_a_schedule_go_when_it_opens() {
        let mut s = Sender::new(
            SenderConfig {
                emcon_repeats: 2,
                emcon_interval_ms: 3_600_000,
                ..cfg()
            },
            5,
            1,
            vec![Destination::new(2), Destination::emcon(9)],
            vec![7; 40],
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let data = |pdus: Vec<Pdu>| pdus.iter().filter(|p| matches!(p, Pdu::Data(_))).count();
        assert_eq!(data(drain(&mut s, 0)), 3);
        assert_eq!(s.poll_timeout(), Some(1000));
        // The repair round is due at 1 s, outside the window; the window opens at 600 s.
        s.postpone_rounds(600_000);
        assert_eq!(s.poll_timeout(), Some(600_000));
        s.handle_timeout(1000);
        assert!(drain(&mut s, 1000).is_empty(), "nothing before the opening");
        s.handle_timeout(600_000);
        assert!(
            !drain(&mut s, 600_000).is_empty(),
            "the repair round at the opening"
        );
        assert_eq!(s.stats().repair_rounds, 1);
        assert!(s.handle_ack(&ack(2, vec![]), 601_000));
        // The timer the repair round armed finds nobody left to repair.
        s.handle_timeout(601_000);
        assert!(drain(&mut s, 601_000).is_empty());
        // The EMCON repeat, due at 3600 s, waits for a window at 4000 s; the next repeat is an
        // interval after the one that went, and a later time is never moved earlier.
        assert_eq!(s.poll_timeout(), Some(3_600_000));
        s.postpone_rounds(4_000_000);
        s.postpone_rounds(10);
        assert_eq!(s.poll_timeout(), Some(4_000_000));
        s.handle_timeout(4_000_000);
        assert_eq!(data(drain(&mut s, 4_000_000)), 3);
        assert_eq!(s.poll_timeout(), Some(7_600_000));
        assert_eq!(s.stats().emcon_data_pdus, 3);
    }

    #[test]
    fn initial_repeats_send_the_whole_message_again() {
        let mut s = Sender::new(
            SenderConfig {
                initial_repeats: 2,
                ..cfg()
            },
            5,
            1,
            vec![Destination::new(2)],
            vec![1; 20],
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // Address + 2 Data_PDUs, three times.
        assert_eq!(drain(&mut s, 0).len(), 9);
        assert_eq!(s.stats().initial_data_pdus, 6);
        // An ack from a node not on the list, or for another message, changes nothing.
        assert!(!s.handle_ack(&ack(77, vec![]), 10));
        let mut other = ack(2, vec![]);
        other.entries[0].message_id = 6;
        assert!(!s.handle_ack(&other, 10));
        assert!(!s.is_complete());
    }

    #[test]
    fn bad_settings_are_errors() {
        let d = vec![Destination::new(1)];
        assert_eq!(
            Sender::new(
                SenderConfig {
                    pdu_size: 10,
                    ..cfg()
                },
                1,
                1,
                d.clone(),
                vec![],
                0
            )
            .err(),
            Some(SenderError::PduSizeTooSmall(10))
        );
        assert_eq!(
            Sender::new(cfg(), 1, 1, vec![], vec![], 0).err(),
            Some(SenderError::NoDestinations)
        );
        assert_eq!(
            Sender::new(cfg(), 1, 1, vec![d[0], d[0]], vec![], 0).err(),
            Some(SenderError::DuplicateDestination(1))
        );
        assert!(matches!(
            Sender::new(cfg(), 1, 1, d, vec![0; 16 * 65536], 0).err(),
            Some(SenderError::TooManyPdus { .. })
        ));
    }

    #[test]
    fn long_destination_lists_split_over_address_pdus() {
        let dests: Vec<Destination> = (1..=5).map(Destination::new).collect();
        // 40-byte PDUs hold 2 destination entries each.
        let mut s = Sender::new(
            SenderConfig {
                pdu_size: 40,
                ..cfg()
            },
            5,
            1,
            dests,
            vec![1],
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let maps: Vec<Map> = drain(&mut s, 0)
            .into_iter()
            .filter_map(|p| match p {
                Pdu::Address(a) => Some(a.map),
                _ => None,
            })
            .collect();
        assert_eq!(maps.len(), 3);
        assert!(!maps[0].not_first && maps[0].not_last);
        assert!(maps[1].not_first && maps[1].not_last);
        assert!(maps[2].not_first && !maps[2].not_last);
    }
}
