//! The P_MUL receiver of one node, sans-IO.
//!
//! The gateway's multicast link feeds every P_MUL PDU heard on the group (and its own) address
//! to [`Receiver::handle_pdu`], takes complete messages from [`Receiver::poll_event`] (to spool
//! them, after which they are this node's responsibility), sends what
//! [`Receiver::poll_transmit`] gives back towards the sender, and calls
//! [`Receiver::handle_timeout`] at [`Receiver::poll_timeout`].
//!
//! Following ACP 142 chapter 3's receiver procedures:
//! - messages are reassembled per (`Source_ID`, `Message_ID`) from Data_PDUs in any order, with
//!   duplicates ignored; Data_PDUs that come before their Address_PDU are kept (bounded) until it
//!   comes;
//! - the Address_PDU says whether this node is a destination and how many Data_PDUs to expect. A
//!   message for other nodes only is dropped;
//! - a complete message is delivered exactly once; its id is remembered until the message's
//!   expiry time, so repeats and repairs for it are not delivered again (but are acknowledged
//!   again when an Address_PDU still lists this node: the sender has not heard the ack);
//! - `ack_delay_ms` after the last PDU of a message addressed to this node (a repeat of the
//!   message counts: a sender's burst of copies is over before anyone answers), an Ack_PDU says
//!   "complete" or lists the Data_PDUs still missing;
//! - in EMCON the receiver still receives and delivers, but sends nothing at all; when EMCON is
//!   lifted ([`Receiver::set_emcon`]) it acknowledges every message it owes an ack;
//! - a Discard_Message_PDU drops a message being received; expiry drops it too.

use std::collections::{BTreeMap, HashMap, VecDeque};

use tracing::debug;

use crate::pdu::{
    ACK_ENTRY_LEN, ACK_HEADER_LEN, AckInfoEntry, AckPdu, AddressPdu, DataPdu, DecodeError, Map, Pdu,
};

/// Settings of a receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiverConfig {
    /// This node's id (`Destination_ID` in Address_PDUs, `Source_ID_of_Ack_Sender` in acks).
    pub own_id: u32,
    /// Wait after the last PDU of a message before acknowledging it.
    pub ack_delay_ms: u64,
    /// Extra wait per place of this node in the Address_PDU's destination list: every ship
    /// hears the last PDU at the same moment, so with one delay for all their acks would key
    /// up together and collide on a half-duplex channel; the n-th destination waits n slots
    /// more (a slot a little longer than one ack's transmission and turnaround).
    pub ack_slot_ms: u64,
    /// Largest Ack_PDU (the bearer's MTU). At least 26.
    pub pdu_size: usize,
    /// P_MUL priority of Ack_PDUs.
    pub priority: u8,
    /// Start in EMCON.
    pub emcon: bool,
    /// Largest message accepted.
    pub max_message_bytes: usize,
    /// Messages being received at once at most.
    pub max_assemblies: usize,
    /// Delivered or discarded message ids remembered at most.
    pub max_remembered: usize,
    /// How long Data_PDUs without their Address_PDU are kept.
    pub orphan_timeout_ms: u64,
}

impl ReceiverConfig {
    /// Defaults for node `own_id`.
    pub fn new(own_id: u32) -> Self {
        ReceiverConfig {
            own_id,
            ack_delay_ms: 5_000,
            ack_slot_ms: 0,
            pdu_size: 2048,
            priority: 0,
            emcon: false,
            max_message_bytes: 16 << 20,
            max_assemblies: 1024,
            max_remembered: 100_000,
            orphan_timeout_ms: 3_600_000,
        }
    }
}

/// What the receiver has for its user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiverEvent {
    /// A complete message for this node, delivered once.
    Message {
        /// `Source_ID`.
        source: u32,
        /// `Message_ID`.
        message_id: u32,
        /// P_MUL priority of its Address_PDU.
        priority: u8,
        /// The reassembled message.
        data: Vec<u8>,
    },
    /// The sender discarded a message this node was receiving.
    Discarded {
        /// `Source_ID`.
        source: u32,
        /// `Message_ID`.
        message_id: u32,
    },
    /// A message for this node expired before it was complete.
    Expired {
        /// `Source_ID`.
        source: u32,
        /// `Message_ID`.
        message_id: u32,
    },
}

type Key = (u32, u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Addressed {
    Unknown,
    Yes,
    No,
}

#[derive(Debug)]
struct Assembly {
    total: Option<u16>,
    addressed: Addressed,
    fragments: BTreeMap<u16, Vec<u8>>,
    bytes: usize,
    expiry_ms: Option<u64>,
    first_seen: u64,
    ack_due: Option<u64>,
    ack_owed: bool,
    priority: u8,
    /// This node's place in the destination list (see [`ReceiverConfig::ack_slot_ms`]).
    slot: u64,
}

impl Assembly {
    /// A message first heard of at `now`, nothing known about it yet.
    fn new(now: u64, priority: u8) -> Self {
        Assembly {
            total: None,
            addressed: Addressed::Unknown,
            fragments: BTreeMap::new(),
            bytes: 0,
            expiry_ms: None,
            first_seen: now,
            ack_due: None,
            ack_owed: false,
            priority,
            slot: 0,
        }
    }
}

#[derive(Debug)]
struct Done {
    expiry_ms: u64,
    ack_due: Option<u64>,
    /// This node's wait before its ack (the delay and its slot), for repeats that push it back.
    ack_wait_ms: u64,
    ack_owed: bool,
    delivered: bool,
}

/// Whether a message's ack goes out at `now`: its timer has run out, or an ack held back by EMCON
/// is owed and EMCON is over. In EMCON a due ack becomes owed instead.
fn ack_now(due: &mut Option<u64>, owed: &mut bool, now: u64, emcon: bool) -> bool {
    if !(due.is_some_and(|t| t <= now) || (!emcon && *owed)) {
        return false;
    }
    *due = None;
    *owed = emcon;
    !emcon
}

/// Counters of what the receiver did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Messages delivered.
    pub delivered: u64,
    /// Data_PDUs that were duplicates (of a fragment held or of a delivered message).
    pub duplicate_data_pdus: u64,
    /// PDUs dropped for limits (too many messages, too big).
    pub dropped_for_limits: u64,
    /// Ack_PDUs sent.
    pub ack_pdus: u64,
}

/// The P_MUL receiver of one node.
#[derive(Debug)]
pub struct Receiver {
    config: ReceiverConfig,
    emcon: bool,
    assemblies: HashMap<Key, Assembly>,
    done: HashMap<Key, Done>,
    done_order: VecDeque<Key>,
    events: VecDeque<ReceiverEvent>,
    out: VecDeque<Vec<u8>>,
    stats: ReceiverStats,
}

impl Receiver {
    /// A receiver with `config`.
    pub fn new(config: ReceiverConfig) -> Self {
        Receiver {
            emcon: config.emcon,
            config,
            assemblies: HashMap::new(),
            done: HashMap::new(),
            done_order: VecDeque::new(),
            events: VecDeque::new(),
            out: VecDeque::new(),
            stats: ReceiverStats::default(),
        }
    }

    /// Decodes and takes in one received PDU. A PDU that does not decode changes nothing.
    pub fn handle_pdu(&mut self, bytes: &[u8], now: u64) -> Result<(), DecodeError> {
        match Pdu::decode(bytes)? {
            Pdu::Data(d) => self.on_data(d, now),
            Pdu::Address(a) => self.on_address(&a, now),
            Pdu::Discard(d) => self.on_discard((d.source, d.message_id), now),
            // Acks are for senders and the dynamic group PDUs for `groups::GroupManager`; nothing
            // to reassemble here.
            _ => {}
        }
        Ok(())
    }

    fn on_data(&mut self, d: DataPdu, now: u64) {
        let key = (d.source, d.message_id);
        if let Some(done) = self.done.get_mut(&key) {
            self.stats.duplicate_data_pdus += 1;
            // A repeat of a message still to be acknowledged: the ack waits until the sender's
            // burst is over ("after the last PDU of a message"), or every ship of a group would
            // answer while the repeats are still on the air and contend when they end.
            if let Some(due) = done.ack_due {
                done.ack_due = Some(due.max(now.saturating_add(done.ack_wait_ms)));
            }
            return;
        }
        if d.seq == 0 {
            return;
        }
        if !self.assemblies.contains_key(&key)
            && self.assemblies.len() >= self.config.max_assemblies
        {
            self.stats.dropped_for_limits += 1;
            return;
        }
        let a = self
            .assemblies
            .entry(key)
            .or_insert_with(|| Assembly::new(now, d.priority));
        if a.addressed == Addressed::No || a.total.is_some_and(|t| d.seq > t) {
            return;
        }
        if a.fragments.contains_key(&d.seq) {
            self.stats.duplicate_data_pdus += 1;
        } else if a.bytes + d.data.len() > self.config.max_message_bytes
            || a.fragments.len() >= usize::from(u16::MAX)
        {
            self.stats.dropped_for_limits += 1;
            return;
        } else {
            a.bytes += d.data.len();
            a.fragments.insert(d.seq, d.data);
        }
        if a.addressed == Addressed::Yes {
            let delay = self
                .config
                .ack_delay_ms
                .saturating_add(a.slot.saturating_mul(self.config.ack_slot_ms));
            a.ack_due = Some(now.saturating_add(delay));
        }
        self.try_complete(key, now);
    }

    fn on_address(&mut self, ad: &AddressPdu, now: u64) {
        let key = (ad.source, ad.message_id);
        let place = ad
            .dests
            .iter()
            .position(|e| e.dest_id == self.config.own_id);
        let listed = place.is_some();
        let slot = place.map_or(0, |p| p as u64);
        let delay = self.ack_delay(slot);
        if let Some(done) = self.done.get_mut(&key) {
            if listed && done.delivered {
                // The sender still lists us: it has not heard our ack. Say it again.
                done.ack_due = Some(now.saturating_add(delay));
            }
            return;
        }
        if !self.assemblies.contains_key(&key) {
            if !listed || self.assemblies.len() >= self.config.max_assemblies {
                if listed {
                    self.stats.dropped_for_limits += 1;
                }
                return;
            }
            self.assemblies.insert(key, Assembly::new(now, ad.priority));
        }
        let Some(a) = self.assemblies.get_mut(&key) else {
            return;
        };
        a.priority = ad.priority;
        a.expiry_ms = Some(u64::from(ad.expiry) * 1000);
        if a.total.is_none() {
            let t = ad.total_pdus;
            a.total = Some(t);
            // Fragments beyond the announced total are not part of this message.
            let beyond: Vec<u16> = a
                .fragments
                .range(t.saturating_add(1)..)
                .map(|(&k, _)| k)
                .collect();
            for k in beyond {
                if let Some(f) = a.fragments.remove(&k) {
                    a.bytes -= f.len();
                }
            }
        }
        if listed {
            a.addressed = Addressed::Yes;
            a.slot = slot;
            a.ack_due = Some(now.saturating_add(delay));
        } else if ad.map == Map::ONLY && a.addressed != Addressed::Yes {
            // The whole destination list is in this PDU and we are not on it.
            a.addressed = Addressed::No;
            a.fragments.clear();
            a.bytes = 0;
        }
        self.try_complete(key, now);
    }

    fn on_discard(&mut self, key: Key, now: u64) {
        if let Some(a) = self.assemblies.remove(&key) {
            if a.addressed == Addressed::Yes {
                self.events.push_back(ReceiverEvent::Discarded {
                    source: key.0,
                    message_id: key.1,
                });
            }
            let expiry = a
                .expiry_ms
                .unwrap_or(now.saturating_add(self.config.orphan_timeout_ms));
            self.remember(key, expiry, false, None, 0);
            debug!(
                source = key.0,
                message_id = key.1,
                "P_MUL message discarded"
            );
        }
    }

    fn remember(
        &mut self,
        key: Key,
        expiry_ms: u64,
        delivered: bool,
        ack_due: Option<u64>,
        ack_wait_ms: u64,
    ) {
        if self.done.len() >= self.config.max_remembered {
            while let Some(old) = self.done_order.pop_front() {
                if self.done.remove(&old).is_some() {
                    break;
                }
            }
        }
        self.done.insert(
            key,
            Done {
                expiry_ms,
                ack_due,
                ack_wait_ms,
                ack_owed: false,
                delivered,
            },
        );
        self.done_order.push_back(key);
    }

    fn try_complete(&mut self, key: Key, now: u64) {
        let Some(a) = self.assemblies.get(&key) else {
            return;
        };
        let Some(total) = a.total else { return };
        if a.addressed != Addressed::Yes || a.fragments.len() != usize::from(total) {
            return;
        }
        let Some(a) = self.assemblies.remove(&key) else {
            return;
        };
        let mut data = Vec::with_capacity(a.bytes);
        for f in a.fragments.into_values() {
            data.extend_from_slice(&f);
        }
        self.stats.delivered += 1;
        debug!(
            source = key.0,
            message_id = key.1,
            bytes = data.len(),
            "P_MUL message complete"
        );
        self.events.push_back(ReceiverEvent::Message {
            source: key.0,
            message_id: key.1,
            priority: a.priority,
            data,
        });
        let expiry = a
            .expiry_ms
            .unwrap_or(now.saturating_add(self.config.orphan_timeout_ms));
        let due = Some(
            a.ack_due
                .unwrap_or(now.saturating_add(self.ack_delay(a.slot))),
        );
        let wait = self.ack_delay(a.slot);
        self.remember(key, expiry, true, due, wait);
        if let Some(d) = self.done.get_mut(&key) {
            d.ack_owed = a.ack_owed;
        }
    }

    /// The next event for the user.
    pub fn poll_event(&mut self) -> Option<ReceiverEvent> {
        self.events.pop_front()
    }

    /// The next PDU to send (an Ack_PDU). Always `None` in EMCON.
    pub fn poll_transmit(&mut self, _now: u64) -> Option<Vec<u8>> {
        if self.emcon {
            return None;
        }
        let pdu = self.out.pop_front()?;
        self.stats.ack_pdus += 1;
        Some(pdu)
    }

    /// The next time [`Receiver::handle_timeout`] wants to run.
    pub fn poll_timeout(&self) -> Option<u64> {
        let orphan = self.config.orphan_timeout_ms;
        let a = self.assemblies.values().flat_map(|a| {
            [
                a.ack_due,
                Some(a.expiry_ms.unwrap_or(a.first_seen.saturating_add(orphan))),
            ]
        });
        let d = self
            .done
            .values()
            .flat_map(|d| [d.ack_due, Some(d.expiry_ms)]);
        a.chain(d).flatten().min()
    }

    /// Runs what is due at `now`: acks, expiry.
    pub fn handle_timeout(&mut self, now: u64) {
        let mut entries: Vec<AckInfoEntry> = Vec::new();
        let emcon = self.emcon;
        for (&(source, message_id), a) in &mut self.assemblies {
            if ack_now(&mut a.ack_due, &mut a.ack_owed, now, emcon) {
                let Some(total) = a.total else { continue };
                let missing = (1..=total)
                    .filter(|s| !a.fragments.contains_key(s))
                    .collect();
                entries.push(AckInfoEntry {
                    source,
                    message_id,
                    missing,
                });
            }
        }
        for (&(source, message_id), d) in &mut self.done {
            if ack_now(&mut d.ack_due, &mut d.ack_owed, now, emcon) {
                entries.push(AckInfoEntry {
                    source,
                    message_id,
                    missing: Vec::new(),
                });
            }
        }
        // Expiry.
        let orphan = self.config.orphan_timeout_ms;
        let expired: Vec<Key> = self
            .assemblies
            .iter()
            .filter(|(_, a)| a.expiry_ms.unwrap_or(a.first_seen.saturating_add(orphan)) <= now)
            .map(|(&k, _)| k)
            .collect();
        for k in expired {
            if let Some(a) = self.assemblies.remove(&k)
                && a.addressed == Addressed::Yes
            {
                self.events.push_back(ReceiverEvent::Expired {
                    source: k.0,
                    message_id: k.1,
                });
            }
        }
        self.done.retain(|_, d| d.expiry_ms > now);
        if self.done_order.len() > 2 * self.done.len() + 16 {
            let done = &self.done;
            self.done_order.retain(|k| done.contains_key(k));
        }
        entries.sort_by_key(|e| (e.source, e.message_id));
        self.pack_acks(entries);
    }

    /// Packs ack info entries into Ack_PDUs of at most `pdu_size` bytes. A missing list too long
    /// for one PDU is cut; the sender repairs what was listed and the next ack lists the rest.
    fn pack_acks(&mut self, entries: Vec<AckInfoEntry>) {
        let size = self
            .config
            .pdu_size
            .clamp(ACK_HEADER_LEN + ACK_ENTRY_LEN + 2, crate::pdu::MAX_PDU_LEN);
        let max_missing = (size - ACK_HEADER_LEN - ACK_ENTRY_LEN) / 2;
        let mut pdu = self.empty_ack();
        let mut len = ACK_HEADER_LEN;
        for mut e in entries {
            e.missing.truncate(max_missing);
            let elen = ACK_ENTRY_LEN + 2 * e.missing.len();
            if len + elen > size && !pdu.entries.is_empty() {
                self.push_ack(std::mem::replace(&mut pdu, self.empty_ack()));
                len = ACK_HEADER_LEN;
            }
            len += elen;
            pdu.entries.push(e);
        }
        if !pdu.entries.is_empty() {
            self.push_ack(pdu);
        }
    }

    fn empty_ack(&self) -> AckPdu {
        AckPdu {
            priority: self.config.priority,
            ack_sender: self.config.own_id,
            entries: Vec::new(),
            timestamp: None,
        }
    }

    /// The wait before an ack of a node at `slot` in the destination list.
    fn ack_delay(&self, slot: u64) -> u64 {
        self.config
            .ack_delay_ms
            .saturating_add(slot.saturating_mul(self.config.ack_slot_ms))
    }

    fn push_ack(&mut self, ack: AckPdu) {
        // Entries were built strictly increasing and sized to fit, so encoding cannot fail.
        if let Ok(b) = Pdu::Ack(ack).encode() {
            self.out.push_back(b);
        }
    }

    /// Takes back a delivered message its user could not keep (a full disk, a spool error): no
    /// ack goes for it, and a retransmission is assembled and delivered again, so the sender,
    /// hearing nothing, repairs and nothing accepted is lost. Returns whether the message was
    /// known.
    pub fn forget(&mut self, source: u32, message_id: u32) -> bool {
        self.done.remove(&(source, message_id)).is_some()
    }

    /// Enters or leaves EMCON. Leaving it acknowledges at once every message an ack is owed for.
    pub fn set_emcon(&mut self, on: bool, now: u64) {
        self.emcon = on;
        if !on {
            self.handle_timeout(now);
        }
    }

    /// Whether the receiver is in EMCON.
    pub fn emcon(&self) -> bool {
        self.emcon
    }

    /// Counters.
    pub fn stats(&self) -> ReceiverStats {
        self.stats
    }

    /// Messages being received.
    pub fn in_progress(&self) -> usize {
        self.assemblies.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pdu::DestEntry;

    fn address(total: u16, dests: &[u32]) -> Vec<u8> {
        address_part(Map::ONLY, 7, total, dests)
    }

    /// An Address_PDU from source 1 for `message_id`, priority 3, expiring at 100 s.
    fn address_part(map: Map, message_id: u32, total: u16, dests: &[u32]) -> Vec<u8> {
        Pdu::Address(AddressPdu {
            priority: 3,
            map,
            extra: false,
            fec: None,
            total_pdus: total,
            source: 1,
            message_id,
            expiry: 100,
            reserved_len: 0,
            dests: dests
                .iter()
                .map(|&dest_id| DestEntry {
                    dest_id,
                    msn: 0,
                    reserved: vec![],
                })
                .collect(),
        })
        .encode()
        .unwrap_or_default()
    }

    fn data(seq: u16, bytes: &[u8]) -> Vec<u8> {
        Pdu::Data(DataPdu {
            priority: 3,
            seq,
            source: 1,
            message_id: 7,
            data: bytes.to_vec(),
        })
        .encode()
        .unwrap_or_default()
    }

    fn acks(r: &mut Receiver, now: u64) -> Vec<AckPdu> {
        let mut v = Vec::new();
        while let Some(b) = r.poll_transmit(now) {
            match Pdu::decode(&b) {
                Ok(Pdu::Ack(a)) => v.push(a),
                other => panic!("not an ack: {other:?}"),
            }
        }
        v
    }

    #[test]
    fn out_of_order_with_duplicates_delivers_once_and_acks() {
        let mut r = Receiver::new(ReceiverConfig::new(2));
        for pdu in [
            data(3, b"c"),
            data(1, b"a"),
            data(1, b"a"),
            address(3, &[2, 4]),
        ] {
            r.handle_pdu(&pdu, 10).unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(r.poll_event(), None);
        // Ack timer: 5 s after the last PDU, listing Data_PDU 2 missing.
        assert_eq!(r.poll_timeout(), Some(5010));
        r.handle_timeout(5010);
        let a = acks(&mut r, 5010);
        assert_eq!(a[0].entries[0].missing, vec![2]);
        r.handle_pdu(&data(2, b"b"), 6000)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            r.poll_event(),
            Some(ReceiverEvent::Message {
                source: 1,
                message_id: 7,
                priority: 3,
                data: b"abc".to_vec()
            })
        );
        // Repeats after delivery are not delivered again.
        r.handle_pdu(&data(2, b"b"), 6001)
            .unwrap_or_else(|e| panic!("{e}"));
        r.handle_pdu(&address(3, &[2]), 6001)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.poll_event(), None);
        r.handle_timeout(11_001);
        let a = acks(&mut r, 11_001);
        assert_eq!(a.len(), 1);
        assert!(a[0].entries[0].missing.is_empty());
        // Remembered until the expiry (100 s), then forgotten.
        r.handle_timeout(100_000);
        assert_eq!(r.poll_timeout(), None);
    }

    #[test]
    fn a_repeat_after_the_message_is_complete_pushes_the_ack_past_it() {
        // The sender repeats the message in one burst: the first copy completes it, and the
        // ack waits until the last PDU of the burst (5 s after it), not 5 s after the first.
        let mut r = Receiver::new(ReceiverConfig::new(2));
        for pdu in [address(2, &[2]), data(1, b"a"), data(2, b"b")] {
            r.handle_pdu(&pdu, 1_000).unwrap_or_else(|e| panic!("{e}"));
        }
        assert!(matches!(
            r.poll_event(),
            Some(ReceiverEvent::Message { .. })
        ));
        assert_eq!(r.poll_timeout(), Some(6_000));
        // The repeat: its Address_PDU and Data_PDUs come over the next 4 seconds.
        for (t, pdu) in [
            (2_000, address(2, &[2])),
            (3_000, data(1, b"a")),
            (5_000, data(2, b"b")),
        ] {
            r.handle_pdu(&pdu, t).unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(r.poll_event(), None, "delivered once");
        assert_eq!(r.poll_timeout(), Some(10_000));
        r.handle_timeout(6_000);
        assert!(acks(&mut r, 6_000).is_empty());
        r.handle_timeout(10_000);
        assert_eq!(acks(&mut r, 10_000).len(), 1);
    }

    #[test]
    fn not_addressed_is_dropped() {
        let mut r = Receiver::new(ReceiverConfig::new(9));
        r.handle_pdu(&data(1, b"a"), 0)
            .unwrap_or_else(|e| panic!("{e}"));
        r.handle_pdu(&address(1, &[2]), 0)
            .unwrap_or_else(|e| panic!("{e}"));
        r.handle_timeout(10_000);
        assert_eq!(r.poll_event(), None);
        assert!(acks(&mut r, 10_000).is_empty());
    }

    #[test]
    fn emcon_sends_nothing_until_lifted() {
        let mut c = ReceiverConfig::new(2);
        c.emcon = true;
        let mut r = Receiver::new(c);
        r.handle_pdu(&address(1, &[2]), 0)
            .unwrap_or_else(|e| panic!("{e}"));
        r.handle_pdu(&data(1, b"z"), 0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            r.poll_event(),
            Some(ReceiverEvent::Message { .. })
        ));
        r.handle_timeout(50_000);
        assert!(acks(&mut r, 50_000).is_empty());
        r.set_emcon(false, 60_000);
        let a = acks(&mut r, 60_000);
        assert_eq!(a.len(), 1);
        assert!(a[0].entries[0].missing.is_empty());
    }

    #[test]
    fn discard_drops_and_reports() {
        let mut r = Receiver::new(ReceiverConfig::new(2));
        r.handle_pdu(&address(2, &[2]), 0)
            .unwrap_or_else(|e| panic!("{e}"));
        r.handle_pdu(&data(1, b"a"), 0)
            .unwrap_or_else(|e| panic!("{e}"));
        let discard = Pdu::Discard(crate::pdu::DiscardPdu {
            priority: 0,
            source: 1,
            message_id: 7,
        })
        .encode()
        .unwrap_or_default();
        r.handle_pdu(&discard, 1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            r.poll_event(),
            Some(ReceiverEvent::Discarded {
                source: 1,
                message_id: 7
            })
        );
        r.handle_pdu(&data(2, b"b"), 2)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.poll_event(), None);
        assert_eq!(r.in_progress(), 0);
    }

    #[test]
    fn split_destination_list_waits_for_the_part_that_lists_us() {
        let mut r = Receiver::new(ReceiverConfig::new(5));
        r.handle_pdu(&data(1, b"q"), 0)
            .unwrap_or_else(|e| panic!("{e}"));
        let first = Map {
            not_first: false,
            not_last: true,
        };
        r.handle_pdu(&address_part(first, 7, 1, &[2, 3]), 0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.poll_event(), None);
        let last = Map {
            not_first: true,
            not_last: false,
        };
        r.handle_pdu(&address_part(last, 7, 1, &[4, 5]), 0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            r.poll_event(),
            Some(ReceiverEvent::Message { .. })
        ));
    }

    #[test]
    fn many_acks_are_packed_into_pdus_that_fit() {
        let mut c = ReceiverConfig::new(2);
        c.pdu_size = 40; // 14-byte header + two 10-byte entries
        let mut r = Receiver::new(c);
        for id in 0..5u32 {
            let a = address_part(Map::ONLY, id, 3, &[2]);
            r.handle_pdu(&a, 0).unwrap_or_else(|e| panic!("{e}"));
        }
        r.handle_timeout(5000);
        let a = acks(&mut r, 5000);
        // Each entry lists 3 missing (16 bytes): one entry per 40-byte PDU.
        assert_eq!(a.len(), 5);
        assert!(
            a.iter()
                .all(|p| p.entries.len() == 1 && p.entries[0].missing == vec![1, 2, 3])
        );
    }

    #[test]
    fn limits_hold() {
        let mut c = ReceiverConfig::new(2);
        c.max_message_bytes = 3;
        c.max_assemblies = 1;
        let mut r = Receiver::new(c);
        r.handle_pdu(&data(1, b"abcd"), 0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.stats().dropped_for_limits, 1);
        let other = Pdu::Data(DataPdu {
            priority: 0,
            seq: 1,
            source: 5,
            message_id: 5,
            data: vec![1],
        })
        .encode()
        .unwrap_or_default();
        r.handle_pdu(&other, 0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.stats().dropped_for_limits, 2);
        assert!(r.handle_pdu(&[1, 2, 3], 0).is_err());
    }
}
