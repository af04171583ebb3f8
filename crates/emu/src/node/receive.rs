//! The receiving half of a [`Node`]: what one transmission from a peer delivered (DRC EOWs,
//! resets, expedited ARQ, non-ARQ reassembly, ARQ data and then ACKs, in that order), and the
//! SIS primitives that follow (indications, confirms, rejections, DATA DELIVERY FAIL).

use std::collections::BTreeMap;
use std::time::Duration;

use skywave_sis::{
    Block, NodeAddress, Primitive, Priority, SapId, UnidataConfirm, UnidataRejectReason,
};

use crate::arq::ArqReceiver;
use crate::cpdu::{Cpdu, reject_reason};
use crate::dpdu::{Body, DataHeader, DecodeError, Dpdu, Eow, Reset, warning_reason};
use crate::modem::DataRate;
use crate::spdu::{DataPci, Spdu};

use super::{
    CompleteCpdu, Drc, ExpOut, InArq, Kind, Link, LinkEvent, Node, NodeCounters, NonArqIn, Queued,
    STALE_ACKS_RESET, cpdu_before, largest_cpdu,
};

/// What one transmission from another node delivered to this one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heard {
    /// The sending node (index).
    pub from: usize,
    /// The rate it was sent at.
    pub rate: DataRate,
    /// The D_PDUs that arrived intact and were addressed to this node or to a group it
    /// listens on, in order, each with the time its first interleaver block started.
    pub dpdus: Vec<(Duration, Vec<u8>)>,
    /// Data D_PDUs (types 0, 2, 4, 7, 8) the transmission addressed to this node alone,
    /// arrived or not, and how many of them were lost: what adaptive DRC judges the link by.
    /// (The emulator's driver knows; a real receiver counts FSN gaps and CRC failures.)
    pub data_sent: usize,
    /// Of `data_sent`, those lost.
    pub data_lost: usize,
}

impl Node {
    /// Acts on a whole transmission from another node at once: [`Node::receive_dpdus`] with
    /// every D_PDU that arrived, then [`Node::end_of_transmission`]. Whether any D_PDU of it
    /// decoded: a node that decoded something from a transmission that addressed it answers in
    /// its turn.
    pub fn handle_heard(&mut self, heard: Heard) -> bool {
        let Heard {
            from,
            rate,
            dpdus,
            data_sent,
            data_lost,
        } = heard;
        let got_any = self.receive_dpdus(from, dpdus);
        self.end_of_transmission(from, rate, got_any, data_sent, data_lost);
        got_any
    }

    /// Acts on D_PDUs of a transmission from `sender` as the modem hands them over, in the
    /// order sent: a real node takes each D_PDU once the interleaver block holding its last
    /// byte is decoded, so U_PDUs are delivered then, not when the sender unkeys. Within one
    /// call: DRC EOWs first, then CAS-1 link control (and, with CAS-1, ARQ data on a link
    /// this node has not made is discarded and the peer warned), RESET/WIN-RESYNC, expedited
    /// data and ACKs, non-ARQ data and ARQ data. ACKs of this node's own data wait for [`Node::end_of_transmission`]: data
    /// before ACKs over the whole transmission, so that a DATA DELIVERY FAIL sent with the ACK
    /// of its U_PDU rejects it before it could be confirmed, wherever the two D_PDUs fall (and
    /// this node cannot send before the transmission ends anyway). Whether any D_PDU decoded.
    pub fn receive_dpdus(&mut self, sender: usize, dpdus: Vec<(Duration, Vec<u8>)>) -> bool {
        let mut got_any = false;
        // When the first D_PDU this node decoded from the transmission started.
        let mut heard_at: Option<Duration> = None;
        let mut data: Vec<Dpdu> = Vec::new();
        let mut acks: Vec<Dpdu> = Vec::new();
        let mut non_arq: Vec<(Duration, Dpdu)> = Vec::new();
        // NON-ARQ DATA D_PDUs whose header decoded but whose segment did not.
        let mut damaged: Vec<(Duration, Dpdu)> = Vec::new();
        let mut exp: Vec<Dpdu> = Vec::new();
        let mut eows: Vec<Eow> = Vec::new();
        let mut resets: Vec<Reset> = Vec::new();
        for (at, bytes) in dpdus {
            self.clock = self.clock.max(at);
            match Dpdu::decode(&bytes) {
                Ok((d, _)) => {
                    got_any = true;
                    heard_at.get_or_insert(at);
                    if d.eow != Eow::NONE {
                        eows.push(d.eow);
                    }
                    match d.body {
                        Body::AckOnly(_) => acks.push(d),
                        // The ACK part of a DATA-ACK counts exactly like an
                        // ACK-ONLY, after the data (as for separate frames).
                        Body::DataAck { .. } => {
                            acks.push(d.clone());
                            data.push(d);
                        }
                        Body::ResetWinResync(rs) => resets.push(rs),
                        Body::ExpDataOnly { .. } | Body::ExpAckOnly(_) => exp.push(d),
                        Body::NonArqData { .. } | Body::ExpNonArqData { .. } => {
                            non_arq.push((at, d));
                        }
                        _ => data.push(d),
                    }
                }
                // A header with a good CRC is acted on whatever the segment's CRC (Annex C,
                // C.3.2.8): a non-ARQ segment is kept for a client that takes data with
                // errors. It does not count as hearing the peer: nothing answers it.
                Err(DecodeError::BadSegmentCrc { .. }) => {
                    if let Ok((d, _)) = Dpdu::decode_damaged(&bytes)
                        && matches!(d.body, Body::NonArqData { .. } | Body::ExpNonArqData { .. })
                    {
                        damaged.push((at, d));
                    }
                }
                Err(e) => tracing::error!("D_PDU failed to decode: {e}"),
            }
        }
        if let (Some(at), Some(l)) = (heard_at, self.links.get_mut(&sender)) {
            // The peer is alive: whatever this node sent it so far was not sent into silence.
            l.silent = 0;
            l.last_activity = l.last_activity.max(at);
            if l.down {
                l.down = false;
                self.link_events
                    .push_back(LinkEvent::Regained { peer: sender, at });
            }
        }
        self.on_drc_eows(sender, &eows);
        // CAS-1 link control first (a one-byte C_PDU in one type-8 D_PDU): a link that this
        // transmission makes carries the transmission's own data.
        let (control, non_arq): (Vec<_>, Vec<_>) =
            non_arq.into_iter().partition(|(_, d)| is_link_control(d));
        self.on_non_arq(sender, control, Vec::new());
        let is_arq_data = |d: &Dpdu| {
            matches!(
                d.body,
                Body::DataOnly { .. } | Body::DataAck { .. } | Body::ExpDataOnly { .. }
            )
        };
        // Annex C: a node answers a WARNING from the peer ("not connected") by making the
        // link again before its data goes again.
        if data.iter().any(
            |d| matches!(d.body, Body::Warning(w) if w.reason == warning_reason::NOT_CONNECTED),
        ) {
            self.on_not_connected_warning(sender);
        }
        // The D_PDU type of the first ARQ data frame of the transmission, if any.
        let arq_data = data
            .iter()
            .chain(&exp)
            .find(|d| is_arq_data(d))
            .map(|d| d.body.dpdu_type());
        if arq_data.is_some()
            && self
                .links
                .get(&sender)
                .is_some_and(|l| !l.linked && l.link_request_out)
        {
            // The peer sends ARQ data only on a link it has made, so it accepted this node's
            // request: its ACCEPTED was lost on the way.
            self.on_link_accepted(sender);
        }
        if let Some(l) = self.links.get_mut(&sender) {
            if self.setup.config.cas1 && !l.linked && !l.break_out {
                // CAS-1: ARQ data on a link this node has not made (it aborted it, or lost
                // it, and the peer did not know): discarded, and the peer warned, so that it
                // makes the link and sends the data again ([ED3-B] §B.3, [ED3-C] WARNING).
                if let Some(received_type) = arq_data {
                    l.warning_owed = Some(received_type);
                    data.retain(|d| !is_arq_data(d));
                    exp.retain(|d| !is_arq_data(d));
                }
            } else if arq_data.is_some() {
                // The caller has used its new link: no abort.
                l.first_data_by = None;
            }
        }
        self.on_resets(sender, &resets);
        if let Some(l) = self.links.get_mut(&sender) {
            let regular = |d: &Dpdu| matches!(d.body, Body::DataOnly { .. } | Body::DataAck { .. });
            if l.tx_win_request.is_some() && data.iter().any(regular) {
                // This node asked the peer to realign its windows and the peer's data still
                // comes: about windows that disagree with ours, taken and acknowledged
                // nowhere. The request (or its answer) was lost: ask again.
                l.tx_win_request_owed = true;
                data.retain(|d| !regular(d));
            }
            if l.full_reset_due || l.reset_full {
                // This node restarted: the peer's regular ARQ data and ACKs are about windows
                // it no longer has. Discarded unanswered; data from the peer starts the FULL
                // RESET now if this node had none of its own to start it with.
                if l.full_reset_due && l.linked && data.iter().any(regular) {
                    start_full_reset(l, &mut self.counters);
                }
                data.retain(|d| !regular(d));
                acks.clear();
            }
        }
        // (A WARNING wants no ACK.)
        let had_data = data.iter().any(|d| !matches!(d.body, Body::Warning(_)));
        self.on_expedited(sender, exp);
        self.on_non_arq(sender, non_arq, damaged);
        self.on_data(sender, data);
        if let Some(l) = self.links.get_mut(&sender) {
            // No ACK of a window found out of step (see `on_data`).
            l.owes_ack |= had_data && l.tx_win_request.is_none();
            l.acks_heard.extend(acks);
        }
        got_any
    }

    /// The transmission from `sender` ended (its last block released): `decoded` says whether
    /// this node decoded any D_PDU of it, `data_sent` and `data_lost` count the data D_PDUs it
    /// addressed to this node alone and those lost. The transmission's ACKs are acted on here,
    /// and adaptive DRC judges the link, once per transmission.
    pub fn end_of_transmission(
        &mut self,
        sender: usize,
        rate: DataRate,
        decoded: bool,
        data_sent: usize,
        data_lost: usize,
    ) {
        let acks = self
            .links
            .get_mut(&sender)
            .map(|l| std::mem::take(&mut l.acks_heard))
            .unwrap_or_default();
        self.on_acks(sender, acks);
        self.on_drc_judge(sender, decoded.then_some(rate), data_sent, data_lost);
    }

    /// The DRC EOWs of D_PDUs from `sender`: a DRC_REQUEST for a rate this node can use
    /// changes its transmit rate towards `sender` (answered "accept" in its next
    /// transmission); a DRC_RESPONSE "accept" ends this node's own request.
    fn on_drc_eows(&mut self, sender: usize, eows: &[Eow]) {
        let r = self.index;
        let budgets = &self.setup.budgets;
        let Some(link) = self.links.get_mut(&sender) else {
            return;
        };
        for eow in eows {
            match eow {
                Eow::DrcRequest(req) => {
                    link.asked_this_transmission = true;
                    let wanted = req.rate_bps().and_then(DataRate::from_bps);
                    if let Some(w) = wanted.filter(|w| budgets.contains_key(w)) {
                        if w != link.tx_rate {
                            link.tx_rate = w;
                            self.counters.rate_changes += 1;
                            tracing::debug!(r, sender, bps = w.bps(), "DRC: transmit rate changed");
                        }
                        link.drc_response_owed = true;
                    }
                }
                Eow::DrcResponse(resp) if resp.response == 0 => link.drc_request = None,
                _ => {}
            }
        }
    }

    /// Data-rate change at the end of a transmission from `sender`, `decoded` (at that rate)
    /// if this node decoded any D_PDU of it: with adaptive DRC, answers at the rate it hears
    /// (Tx = Rx) and judges how many of the `sent` data D_PDUs addressed to it were `lost`,
    /// asking `sender` for another rate when it is time. A node that decoded nothing knows
    /// nothing and does nothing.
    fn on_drc_judge(&mut self, sender: usize, decoded: Option<DataRate>, sent: usize, lost: usize) {
        let adaptive = self.setup.config.drc == Drc::Adaptive;
        let budgets = &self.setup.budgets;
        let Some(link) = self.links.get_mut(&sender) else {
            return;
        };
        // Whether this very transmission asked us to change rate (then we do not follow it).
        let asked = std::mem::take(&mut link.asked_this_transmission);
        let Some(rate) = decoded.filter(|_| adaptive) else {
            return;
        };
        // Follow the peer's rate (Tx = Rx), unless this very transmission asked us to change.
        if !asked && link.tx_rate != rate && budgets.contains_key(&rate) {
            link.tx_rate = rate;
            self.counters.rate_changes += 1;
        }
        if sent == 0 {
            return;
        }
        // The ladder of usable rates, slowest first.
        let ladder: Vec<DataRate> = budgets.keys().copied().collect();
        let Some(pos) = ladder.iter().position(|&x| x == rate) else {
            return;
        };
        if lost * 4 >= sent {
            link.clean_streak = 0;
            if let Some(&down) = pos.checked_sub(1).and_then(|p| ladder.get(p)) {
                link.drc_request = Some(down);
            }
        } else if lost == 0 {
            link.clean_streak = link.clean_streak.saturating_add(1);
            if link.clean_streak >= 2
                && let Some(&up) = ladder.get(pos + 1)
            {
                link.clean_streak = 0;
                link.drc_request = Some(up);
            }
        } else {
            link.clean_streak = 0;
        }
    }

    /// RESET/WIN-RESYNC D_PDUs from `sender`: a RESET RX WIN CMND moves this node's receive
    /// window for `sender` to NEW RX LWE (delivering the C_PDUs it held whole behind a gap,
    /// dropping the rest: [`crate::arq::ArqReceiver::reset`]) and is answered with a RESET
    /// ACK carrying the same RESET FRAME ID (also when the command is repeated); a FULL RESET
    /// CMD (the peer restarted, [`Node::restart`]) puts both of this node's ARQ machines for
    /// the peer back at 0, its transmit window as a reset of its own would (the U_PDUs it had
    /// on the air are rejected, not sent again), ends a hard link with it, and is answered
    /// with a RESET ACK (a repeat too, obeyed again); a RESET ACK for this node's own pending
    /// command ends it, and data flows again. A RESET TX WIN RQST (a peer's data failed this
    /// node's synchronisation tests, see `on_data`) is answered as Annex C says, with this
    /// node's own RESET RX WIN CMND after resetting its transmit window.
    fn on_resets(&mut self, sender: usize, resets: &[Reset]) {
        let mut lost: Vec<InArq> = Vec::new();
        let mut peer_restarted = false;
        let Some(link) = self.links.get_mut(&sender) else {
            return;
        };
        for rs in resets {
            if rs.full_reset {
                // A copy (our RESET ACK was lost) is obeyed again: it cannot be told from the
                // command of a second restart, whose RESET FRAME IDs start again, and a node
                // that takes a second restart's command for a copy would send again what the
                // peer may have delivered before it went down. Obeying again only rejects what
                // this node sent since, which the peer (still waiting for the RESET ACK) threw
                // away.
                link.reset_ack_owed = Some(rs.reset_frame_id);
                self.counters.full_resets_obeyed += 1;
                peer_restarted = true;
                lost.extend(link.reset_transmit_window());
                // Its hard-link state went with it: no TERMINATE CONFIRM will come.
                link.hard_tc_awaited = 0;
                link.receiver.reset(0);
                link.owes_ack = false;
                link.tx_win_request = None;
                link.tx_win_request_owed = false;
                link.exp_in = None;
                link.owes_exp_ack = false;
                // Whatever this node was resetting itself, both windows are at 0 now.
                link.reset_out = None;
                link.reset_full = false;
                link.full_reset_due = false;
                link.resync = false;
            } else if rs.reset_rx_win_command {
                // A repeated command (our RESET ACK was lost) resets again: harmless, since
                // its sender sends no data until it has the RESET ACK.
                link.receiver.reset(rs.new_rx_lwe);
                link.reset_ack_owed = Some(rs.reset_frame_id);
                link.owes_ack = false;
                // Our RESET TX WIN RQST, if any, is answered: the windows agree again.
                link.tx_win_request = None;
                link.tx_win_request_owed = false;
                if link.full_reset_due {
                    // This node restarted, and the peer (which declared the link lost while
                    // it was down) has just realigned this direction itself. Only the other
                    // is left: the peer's receive window, which a RESET RX WIN CMND puts at
                    // 0 before this node's first data. A FULL RESET would reset the peer's
                    // transmit window again and lose what it has sent since.
                    link.full_reset_due = false;
                    link.resync = true;
                }
            } else if rs.reset_tx_win_request {
                // [ED3-C] C.3.5: "respond by forcing resynchronization of the windows using a
                // RESET/WIN RESYNC D_PDU and the RESET RX WIN CMND flag", as this node does
                // when its own ACKs tell it the windows disagree. A repeat finds that command
                // still pending (it goes in every transmission until its RESET ACK).
                if link.reset_out.is_none() {
                    lost.extend(start_rx_win_reset(link, &mut self.counters));
                }
            } else if rs.reset_ack && link.reset_out == Some(rs.reset_frame_id) {
                link.reset_out = None;
                link.stale_acks = 0;
                if std::mem::take(&mut link.reset_full) {
                    // What the peer sent before it obeyed was discarded here; it sends again
                    // from FSN 0.
                    link.receiver.reset(0);
                    link.owes_ack = false;
                }
            }
        }
        self.abandon_lost_at_reset(lost);
        if peer_restarted {
            // A hard link with the peer went down with it ("physical link broken").
            self.hard_link_lost(sender);
        }
    }

    /// EXPEDITED DATA-ONLY and EXPEDITED ACK-ONLY D_PDUs from `sender`: the stop-and-wait
    /// expedited ARQ of Annex C, apart from normal data.
    fn on_expedited(&mut self, sender: usize, frames: Vec<Dpdu>) {
        let biggest = largest_cpdu(self.setup.config.mtu) + 16;
        let dest = self.peer_address(sender);
        let Some(link) = self.links.get_mut(&sender) else {
            return;
        };
        let mut cpdus = Vec::new();
        let mut finished = None;
        for d in frames {
            match d.body {
                Body::ExpDataOnly { header, segment } => {
                    // A new C_PDU ID starts a new expedited C_PDU (FSNs from 0 again).
                    if link
                        .exp_in
                        .as_ref()
                        .is_none_or(|(id, _)| *id != header.cpdu_id)
                    {
                        link.exp_in = Some((header.cpdu_id, ArqReceiver::new(biggest)));
                    }
                    if let Some((_, rx)) = &mut link.exp_in {
                        let h = DataHeader {
                            start: header.start,
                            end: header.end,
                            deliver_in_order: true,
                            fsn: header.fsn,
                            ..DataHeader::default()
                        };
                        rx.on_segment(&h, &segment);
                        cpdus.extend(rx.take_delivered());
                    }
                    link.owes_exp_ack = true;
                }
                Body::ExpAckOnly(ack) => {
                    if let Some(e) = &mut link.exp_out {
                        e.sender.on_ack(&ack);
                        if !e.sender.take_confirmed().is_empty() {
                            finished = link.exp_out.take();
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(ExpOut {
            q: Some(q), failed, ..
        }) = finished
        {
            if q.confirm && !failed {
                let c = UnidataConfirm {
                    dest_sap: q.dest_sap,
                    dest,
                    updu_part: q.updu.clone(),
                };
                self.send_to(
                    q.src_sap,
                    Some(q.conn),
                    Primitive::ExpeditedUnidataRequestConfirm(c),
                );
            }
            self.dequeued(&q);
        }
        self.on_cpdus(sender, cpdus, Kind::Expedited);
    }

    /// NON-ARQ DATA D_PDUs from `sender`, with their arrival times, intact (`frames`) or with
    /// a damaged segment (`damaged`): reassembles each C_PDU and delivers it once, when every
    /// byte has arrived intact within its reception window. Nothing is acknowledged. A
    /// damaged segment is kept until an intact copy replaces it, for delivery with errors
    /// when the window closes ([`Node::deliver_damaged`]).
    fn on_non_arq(
        &mut self,
        sender: usize,
        frames: Vec<(Duration, Dpdu)>,
        damaged: Vec<(Duration, Dpdu)>,
    ) {
        let r = self.index;
        let mut complete = Vec::new();
        let frames = frames.into_iter().map(|(at, d)| (at, d, true));
        for (at, d, intact) in frames.chain(damaged.into_iter().map(|(at, d)| (at, d, false))) {
            let group = NodeAddress::group(d.destination.value()).ok();
            let (header, segment, expedited) = match d.body {
                Body::NonArqData { header, segment } => (header, segment, false),
                Body::ExpNonArqData { header, segment } => (header, segment, true),
                _ => continue,
            };
            let size = usize::from(header.cpdu_size);
            let offset = usize::from(header.segment_offset);
            if offset + segment.len() > size {
                tracing::warn!(r, "NON-ARQ DATA segment beyond its C_PDU size; ignored");
                continue;
            }
            let deadline = at + Duration::from_millis(500) * u32::from(header.reception_window);
            let key = (sender, header.cpdu_id);
            let group = group.filter(|_| header.group);
            let fresh = || NonArqIn {
                size,
                expedited,
                group,
                got: BTreeMap::new(),
                damaged: BTreeMap::new(),
                with_errors: false,
                deadline,
                done: false,
                in_order: header.deliver_in_order,
                held: None,
            };
            // The segment with the S_PDU header says whose the U_PDU is.
            let with_errors = intact && offset == 0 && self.takes_errors(&segment);
            let entry = self.non_arq_in.entry(key).or_insert_with(fresh);
            if entry.size != size {
                // A new C_PDU reusing the ID (mod 4096) after the old one was abandoned.
                *entry = fresh();
            }
            if entry.done {
                continue;
            }
            entry.deadline = entry.deadline.max(deadline);
            entry.with_errors |= with_errors;
            if !intact {
                if !entry.got.contains_key(&offset) {
                    entry.damaged.insert(offset, segment);
                }
                continue;
            }
            entry.damaged.remove(&offset);
            entry.got.insert(offset, segment);
            let mut covered = 0;
            for (&o, seg) in &entry.got {
                if o > covered {
                    break;
                }
                covered = covered.max(o + seg.len());
            }
            if covered >= size {
                let mut cpdu = vec![0u8; size];
                for (&o, seg) in &entry.got {
                    if let Some(dst) = cpdu.get_mut(o..o + seg.len()) {
                        dst.copy_from_slice(seg);
                    }
                }
                entry.done = true;
                entry.got.clear();
                entry.damaged.clear();
                if entry.in_order {
                    // Delivered by `release_held` below, once nothing before it is pending.
                    entry.held = Some(cpdu);
                } else {
                    complete.push((cpdu, entry.expedited, entry.group));
                }
            }
        }
        complete.extend(self.release_held(sender));
        self.deliver_non_arq(sender, complete);
    }

    /// The C_PDUs from `sender` held back in order (see `NonArqIn::held`) that nothing before
    /// them holds up any more, in order, taken out of their entries.
    pub(super) fn release_held(&mut self, sender: usize) -> Vec<CompleteCpdu> {
        let mut out = Vec::new();
        loop {
            let pending = |&(s, _): &(usize, u16), p: &NonArqIn| s == sender && p.undelivered();
            let free = self
                .non_arq_in
                .iter()
                .filter(|(k, p)| pending(k, p) && p.held.is_some())
                .map(|(&k, _)| k)
                .find(|&(_, id)| {
                    !self
                        .non_arq_in
                        .iter()
                        .any(|(k, p)| pending(k, p) && cpdu_before(k.1, id))
                });
            let Some(p) = free.and_then(|k| self.non_arq_in.get_mut(&k)) else {
                return out;
            };
            if let Some(cpdu) = p.held.take() {
                out.push((cpdu, p.expedited, p.group));
            }
        }
    }

    /// Hands complete non-ARQ C_PDUs from `sender` on: CAS-1 link control to the link
    /// machine, data to its client.
    pub(super) fn deliver_non_arq(&mut self, sender: usize, complete: Vec<CompleteCpdu>) {
        let r = self.index;
        let src = self.peer_address(sender);
        for (c, expedited, group) in complete {
            let kind = Kind::non_arq(expedited);
            let updu = match Cpdu::decode(&c) {
                Ok(Cpdu::Data(s)) => Spdu::decode(&s).ok(),
                // CAS-1 link making ([ED3-B]: its C_PDUs travel as EXPEDITED NON-ARQ DATA).
                Ok(Cpdu::PhysicalLinkRequest { exclusive }) if group.is_none() => {
                    self.on_link_request(sender, exclusive);
                    continue;
                }
                Ok(Cpdu::PhysicalLinkAccepted) if group.is_none() => {
                    self.on_link_accepted(sender);
                    continue;
                }
                Ok(Cpdu::PhysicalLinkRejected { reason }) if group.is_none() => {
                    self.on_link_rejected(sender, reason);
                    continue;
                }
                Ok(Cpdu::PhysicalLinkBreak { .. }) if group.is_none() => {
                    self.on_link_break(sender);
                    continue;
                }
                Ok(Cpdu::PhysicalLinkBreakConfirm) if group.is_none() => {
                    self.on_link_break_confirm(sender);
                    continue;
                }
                other => {
                    tracing::warn!(r, ?other, "non-ARQ C_PDU not handled here; dropped");
                    continue;
                }
            };
            let updu = match updu {
                Some(Spdu::Data { pci, updu }) => (pci, updu),
                other => {
                    tracing::warn!(r, ?other, "non-ARQ C_PDU without a DATA S_PDU; dropped");
                    continue;
                }
            };
            let (pci, updu) = updu;
            let Some((ssap, dsap, prio)) = sis_ids(&pci) else {
                continue;
            };
            if self.past_ttd(&pci) {
                continue;
            }
            // No DATA DELIVERY FAIL in non-ARQ mode: an unbound SAP just drops it.
            if self.deliver(src, ssap, dsap, prio, &updu, kind, group, None) {
                self.counters.non_arq_delivered += 1;
            }
        }
    }

    /// Whether the U_PDU whose C_PDU starts with `first_segment` is for a client bound to
    /// take non-ARQ data with errors.
    fn takes_errors(&self, first_segment: &[u8]) -> bool {
        // Most nodes have no such client: no need to read the header then.
        if !self.bindings.values().any(|b| b.with_errors) {
            return false;
        }
        let Ok(Cpdu::Data(s)) = Cpdu::decode(first_segment) else {
            return false;
        };
        let Ok(Spdu::Data { pci, .. }) = Spdu::decode(&s) else {
            return false;
        };
        let dsap = pci.destination_sap;
        self.bindings.get(&dsap).is_some_and(|b| b.with_errors)
    }

    /// Non-ARQ delivery with errors (Annex C, C.4.2): C_PDU `p` from `sender` reached the end
    /// of its reception window without arriving whole and intact. Damaged segments are placed
    /// as received, missing bytes are zero, and the indication (transmission mode 3, "non-ARQ
    /// w/ errors") lists both kinds of block by their place in the U_PDU (Annex A, A.2.1.9).
    /// Delivered only if the C_PDU and S_PDU headers arrived intact (without them neither the
    /// client nor the TTD is known; the standard is silent) and the destination client is
    /// bound to take errors. Whether it was delivered.
    pub(super) fn deliver_damaged(&mut self, sender: usize, p: &NonArqIn) -> bool {
        #[derive(Clone, Copy, PartialEq)]
        enum Got {
            Missing,
            Errored,
            Intact,
        }
        let mut buf = vec![0u8; p.size];
        let mut state = vec![Got::Missing; p.size];
        let segments = p.damaged.iter().map(|s| (s, Got::Errored));
        for ((&o, seg), got) in segments.chain(p.got.iter().map(|s| (s, Got::Intact))) {
            let end = (o + seg.len()).min(p.size);
            if let (Some(dst), Some(st)) = (buf.get_mut(o..end), state.get_mut(o..end)) {
                dst.copy_from_slice(seg.get(..end - o).unwrap_or_default());
                st.fill(got);
            }
        }
        let Ok(Cpdu::Data(s)) = Cpdu::decode(&buf) else {
            return false;
        };
        let Ok(Spdu::Data { pci, updu }) = Spdu::decode(&s) else {
            return false;
        };
        let header = p.size - updu.len();
        if state
            .get(..header)
            .is_none_or(|h| h.iter().any(|&g| g != Got::Intact))
        {
            return false;
        }
        let Some((ssap, dsap, prio)) = sis_ids(&pci) else {
            return false;
        };
        if self.past_ttd(&pci) {
            return false;
        }
        // Runs of errored and of missing bytes, as U_PDU blocks (a U_PDU is at most the
        // MTU, 2048 bytes, so offsets and sizes fit the indication's 16 bits).
        let (mut errored, mut missing) = (Vec::new(), Vec::new());
        let mut offset = 0;
        for run in state
            .get(header..)
            .unwrap_or_default()
            .chunk_by(|a, b| a == b)
        {
            let block = Block {
                offset: u16::try_from(offset).unwrap_or(u16::MAX),
                size: u16::try_from(run.len()).unwrap_or(u16::MAX),
            };
            match run.first() {
                Some(Got::Errored) => errored.push(block),
                Some(Got::Missing) => missing.push(block),
                _ => {}
            }
            offset += run.len();
        }
        let src = self.peer_address(sender);
        let (kind, damage) = (Kind::non_arq(p.expedited), Some((errored, missing)));
        self.deliver(src, ssap, dsap, prio, &updu, kind, p.group, damage)
    }

    /// CAS-1: `sender` asks for a physical link, `exclusive` for a hard link's. This node
    /// accepts every request (again, if the peer lost the link and asks anew) unless it has
    /// made [`super::NodeConfig::max_links`] links to other peers already (reason 0), or it
    /// has a hard link to another node (its exclusive link, reason 3 "supporting exclusive
    /// link"; one being requested, reason 2 "higher-priority link request pending": Annex B
    /// accepts a nonexclusive request only with no exclusive link "active or with requests
    /// pending"). An exclusive request is accepted whatever this node holds (Annex B accepts
    /// one beyond an existing exclusive link, so that the two SIS sublayers can settle the
    /// hard links' precedence; this node holds at most one hard link, see `node::hard`). Its own requests awaiting an answer do not count ([ED3-B] counts pending requests
    /// only for exclusive links): a node that held its slot for a request of its own and
    /// refused every caller meanwhile would, on a ring of nodes each waiting for the next,
    /// have every request rejected for ever. Accepting one that fills the last slot withdraws
    /// this node's own requests instead (an answer that comes anyway is kept if a slot has come
    /// free, else undone with a BREAK: see `on_link_accepted`). Accepting makes the link, so a request of this node's own to
    /// the same peer (both had data) is dropped.
    fn on_link_request(&mut self, sender: usize, exclusive: bool) {
        let max = self.setup.config.max_links.unwrap_or(usize::MAX);
        let full = !exclusive && self.links_held(Some(sender), false) >= max;
        let hard = (!exclusive)
            .then(|| self.hard_link_refusal(sender))
            .flatten();
        let Some(link) = self.links.get_mut(&sender) else {
            return;
        };
        let refusal = hard.or((full && !link.linked).then_some(reject_reason::UNKNOWN));
        if let Some(reason) = refusal {
            // Answered each time the peer asks. The peer asks only for a link it does not
            // have, so one this node still counted is gone.
            link.linked = false;
            link.reject_owed = Some(reason);
            link.link_accept_owed = false;
            link.break_due = false;
            if std::mem::take(&mut link.break_out) {
                // As below: the peer asks anew, so it took this node's BREAK.
                self.counters.links_broken += 1;
            }
            self.counters.link_requests_refused += 1;
            return;
        }
        link.reject_owed = None;
        link.link_accept_owed = true;
        link.link_request_out = false;
        link.caller = false;
        let newly = !link.linked;
        if newly && self.links_held(None, true) >= max {
            // The new link takes the slot of this node's own requests: withdraw them.
            for l in self.links.values_mut().filter(|l| l.link_request_out) {
                l.link_request_out = false;
            }
        }
        let Some(link) = self.links.get_mut(&sender) else {
            return;
        };
        // A break of this node's own is moot once the peer wants the link again; one already
        // sent is done (the peer would not ask for a link it still had, so it took the BREAK
        // though its CONFIRM was lost).
        link.break_due = false;
        if std::mem::take(&mut link.break_out) {
            self.counters.links_broken += 1;
        }
        if !link.linked {
            link.linked = true;
            self.counters.links_made += 1;
        }
    }

    /// CAS-1: `sender` accepted this node's request: ARQ data may go.
    fn on_link_accepted(&mut self, sender: usize) {
        let max = self.setup.config.max_links;
        let room = self.links_held(Some(sender), false) < max.unwrap_or(usize::MAX);
        let Some(link) = self.links.get_mut(&sender) else {
            return;
        };
        if !link.link_request_out {
            if !link.linked && !link.break_out && max.is_some() {
                // A request this node withdrew when a caller took its last slot: the peer
                // has made the link and holds a slot for it. Keep it if a slot has come free
                // meanwhile, else break it at once.
                self.counters.links_made += 1;
                if room {
                    link.linked = true;
                    link.caller = true;
                } else {
                    link.break_out = true;
                    link.break_due = false;
                }
            }
            // Else an answer to a repeat sent before the first ACCEPTED came: nothing to do.
            return;
        }
        link.link_request_out = false;
        link.caller = true;
        if !link.linked {
            link.linked = true;
            self.counters.links_made += 1;
        }
    }

    /// CAS-1: `sender` warned that this node's ARQ data came on a link it has not made (it
    /// aborted or lost it): the link is not made after all, and the data still in the ARQ
    /// goes again once a new request is accepted.
    fn on_not_connected_warning(&mut self, sender: usize) {
        if !self.setup.config.cas1 {
            return;
        }
        let Some(link) = self.links.get_mut(&sender) else {
            return;
        };
        if link.linked {
            link.linked = false;
            link.caller = false;
            link.break_due = false;
            tracing::debug!(
                node = self.index,
                peer = sender,
                "peer says the link is not made"
            );
        }
    }

    /// CAS-1: `sender` rejected this node's request ([ED3-B]: the caller "shall declare the
    /// Physical Link as Failed"). This node keeps its data for the peer and asks again once
    /// the peer could have broken an idle link to make room: [`super::NodeConfig::link_idle`]
    /// plus one response timeout after the rejection arrived (reason 0 and the full node's
    /// case; a broadcast-only or exclusively linked peer, reasons 1 and 3, is asked again on
    /// the same terms, as this node cannot tell when that ends).
    fn on_link_rejected(&mut self, sender: usize, reason: u8) {
        let hold = self.setup.config.link_idle.unwrap_or_default() + self.setup.response_timeout;
        let Some(link) = self.links.get_mut(&sender) else {
            return;
        };
        if !link.link_request_out {
            // An answer to a repeat of a request already answered: nothing to do.
            return;
        }
        link.link_request_out = false;
        link.rejected_until = Some(link.last_activity + hold);
        self.counters.link_requests_rejected += 1;
        tracing::debug!(
            node = self.index,
            peer = sender,
            reason,
            "link request rejected"
        );
    }

    /// CAS-1: `sender` breaks the link ([ED3-B] B.3.2.2: the responder "shall immediately
    /// declare the Physical Link as broken" and confirm; again for a repeat whose first
    /// confirm was lost). ARQ state stays: the peer broke an idle link, on which everything
    /// was acknowledged; whatever this node has for the peer makes the link again.
    fn on_link_break(&mut self, sender: usize) {
        let Some(link) = self.links.get_mut(&sender) else {
            return;
        };
        link.break_confirm_owed = true;
        link.break_due = false;
        if link.linked || link.break_out {
            link.linked = false;
            link.caller = false;
            link.break_out = false;
            self.counters.links_broken += 1;
        }
    }

    /// CAS-1: `sender` confirmed this node's BREAK: the link is broken.
    fn on_link_break_confirm(&mut self, sender: usize) {
        let Some(link) = self.links.get_mut(&sender) else {
            return;
        };
        if link.break_out {
            link.break_out = false;
            self.counters.links_broken += 1;
        }
    }

    /// DATA-ONLY and DATA-ACK D_PDUs from `sender`: its ARQ receiver, and the C_PDUs it
    /// completes. Each frame first passes the destination synchronisation tests ([ED3-C]
    /// §C.6.3.2, [`crate::arq::ArqReceiver::in_sync`]); the first that fails shows the peer's
    /// transmit window and this receive window out of step (a frame read against the wrong
    /// window would be taken for a duplicate, or held for a gap that never fills): it and the
    /// rest of the transmission are discarded unacknowledged, and this node asks the peer to
    /// realign them with a RESET TX WIN RQST ([ED3-C] §C.3.6 (8)), which the peer answers
    /// with a RESET RX WIN CMND (see `on_resets`).
    fn on_data(&mut self, sender: usize, data: Vec<Dpdu>) {
        let r = self.index;
        let Some(link) = self.links.get_mut(&sender) else {
            return;
        };
        let dropped_before = link.receiver.dropped();
        for d in &data {
            if let Body::DataOnly { header, segment }
            | Body::DataAck {
                header, segment, ..
            } = &d.body
            {
                if !link.receiver.in_sync(header) {
                    tracing::debug!(
                        r,
                        sender,
                        fsn = header.fsn,
                        rx_lwe = link.receiver.rx_lwe(),
                        "ARQ windows out of step: RESET TX WIN RQST"
                    );
                    link.tx_win_request = Some(link.next_reset_id);
                    link.next_reset_id = link.next_reset_id.wrapping_add(1);
                    link.tx_win_request_owed = true;
                    link.owes_ack = false;
                    self.counters.tx_win_requests += 1;
                    break;
                }
                link.receiver.on_segment(header, segment);
            }
        }
        self.counters.cpdus_dropped += link.receiver.dropped() - dropped_before;
        let cpdus = link.receiver.take_delivered();
        self.on_cpdus(sender, cpdus, Kind::Arq);
    }

    /// C_PDUs that this node's ARQ (normal or expedited) reassembled from `sender`'s data.
    fn on_cpdus(&mut self, sender: usize, cpdus: Vec<Vec<u8>>, kind: Kind) {
        let src = self.peer_address(sender);
        for c in cpdus {
            let spdu = match Cpdu::decode(&c) {
                Ok(Cpdu::Data(s)) => Spdu::decode(&s),
                Ok(other) => {
                    tracing::debug!(?other, "C_PDU ignored (the link is assumed up)");
                    continue;
                }
                Err(e) => {
                    tracing::warn!("bad C_PDU: {e}");
                    continue;
                }
            };
            match spdu {
                Ok(Spdu::Data { pci, updu }) => {
                    let Some((ssap, dsap, prio)) = sis_ids(&pci) else {
                        continue;
                    };
                    // Acknowledged all the same (its frames did arrive), so a client that
                    // asked for a node delivery confirm gets one: the node did take it.
                    if self.past_ttd(&pci) {
                        continue;
                    }
                    if !self.deliver(src, ssap, dsap, prio, &updu, kind, None, None) {
                        // Report back to the source node with a DATA DELIVERY FAIL S_PDU.
                        let fail = Spdu::DataDeliveryFail {
                            reason: 1,
                            source_sap: pci.source_sap,
                            destination_sap: pci.destination_sap,
                            updu,
                        };
                        if let Some(link) = self.links.get_mut(&sender)
                            && let Some(Ok(id)) = fail
                                .encode()
                                .ok()
                                .and_then(|s| Cpdu::Data(s).encode().ok())
                                .map(|c| link.sender.push(c))
                        {
                            tracing::debug!(id, "destination SAP not bound: DATA DELIVERY FAIL");
                        }
                    }
                }
                Ok(Spdu::DataDeliveryFail {
                    source_sap,
                    destination_sap,
                    updu,
                    ..
                }) => self.on_fail(sender, source_sap, destination_sap, &updu),
                Ok(
                    hard @ (Spdu::HardLinkRequest { .. }
                    | Spdu::HardLinkConfirm
                    | Spdu::HardLinkRejected { .. }
                    | Spdu::HardLinkTerminate { .. }
                    | Spdu::HardLinkTerminateConfirm),
                ) => self.on_hard_spdu(sender, hard),
                Ok(other) => tracing::debug!(?other, "S_PDU not handled by the emulator"),
                Err(e) => tracing::warn!("bad S_PDU: {e}"),
            }
        }
    }

    /// Whether a DATA S_PDU that arrived whole by now (the clock is at the decode of its last
    /// interleaver block) is past the time to die its sender gave it; if so it is counted and
    /// not delivered. Annex A, A.3.1.1: the TTD is the time "after which the S_PDU must be
    /// discarded if it has not yet been delivered to the client", and VALID TTD is how "the
    /// transmitting peer" tells "the receiving peer" to. This is what a sender cannot do once
    /// a U_PDU is on the air: its own deadline drops only what it still holds.
    fn past_ttd(&mut self, pci: &DataPci) -> bool {
        let Some(ttd) = pci.ttd else {
            return false;
        };
        let due = ttd.resolve(self.clock);
        if self.clock <= due {
            return false;
        }
        self.counters.expired_on_arrival += 1;
        tracing::debug!(
            node = self.index,
            ?due,
            now = ?self.clock,
            "U_PDU past its time to die on arrival: discarded"
        );
        true
    }

    /// A DATA DELIVERY FAIL came back from `dest`: reject the matching U_PDU (reason 2) if it
    /// asked for confirmation and was not confirmed yet.
    fn on_fail(&mut self, dest: usize, src_sap: u8, dest_sap: u8, updu: &[u8]) {
        let Some(link) = self.links.get_mut(&dest) else {
            return;
        };
        let matches = |q: &Queued| {
            q.src_sap.get() == src_sap && q.dest_sap.get() == dest_sap && q.updu.as_ref() == updu
        };
        let hit = link
            .unconfirmed
            .values_mut()
            .find(|a| !a.failed && matches(&a.q))
            .map(|a| {
                a.failed = true;
                a.q.clone()
            });
        let hit = hit.or_else(|| {
            let e = link
                .exp_out
                .as_mut()
                .filter(|e| !e.failed && e.q.as_ref().is_some_and(matches))?;
            e.failed = true;
            e.q.clone()
        });
        let Some(q) = hit else {
            tracing::debug!("DATA DELIVERY FAIL for a U_PDU already answered");
            return;
        };
        if q.confirm {
            self.reject(&q, UnidataRejectReason::DestinationSapNotBound);
        }
    }

    /// ACK-ONLY D_PDUs and the ACK parts of DATA-ACKs from `sender`: confirms what they
    /// acknowledge, and starts a RESET/WIN-RESYNC when they keep falling outside the window.
    fn on_acks(&mut self, sender: usize, acks: Vec<Dpdu>) {
        let r = self.index;
        let dest = self.peer_address(sender);
        let Some(link) = self.links.get_mut(&sender) else {
            return;
        };
        for d in &acks {
            if let Body::AckOnly(ack) | Body::DataAck { ack, .. } = &d.body {
                if link.reset_out.is_some() {
                    // About the window before the reset: meaningless now.
                    continue;
                }
                link.unanswered = 0;
                if link.sender.on_ack(ack) {
                    link.stale_acks = 0;
                } else {
                    link.stale_acks = link.stale_acks.saturating_add(1);
                }
            }
        }
        let mut lost_at_reset: Vec<InArq> = Vec::new();
        if link.stale_acks >= STALE_ACKS_RESET && link.reset_out.is_none() {
            // The peer's receive window no longer matches ours (it lost its state): its ACKs
            // cannot move our TX LWE. Reset our TX window to 0 and command the peer's RX
            // window there (RESET/WIN-RESYNC, RESET RX WIN CMND, NEW RX LWE 0).
            lost_at_reset = start_rx_win_reset(link, &mut self.counters);
            tracing::debug!(
                r,
                sender,
                lost = lost_at_reset.len(),
                "ARQ window reset: RESET/WIN-RESYNC"
            );
        }
        let done: Vec<InArq> = link
            .sender
            .take_confirmed()
            .into_iter()
            .filter_map(|id| link.unconfirmed.remove(&id))
            .collect();
        for a in &done {
            if !a.q.confirm || a.failed {
                continue;
            }
            let c = UnidataConfirm {
                dest_sap: a.q.dest_sap,
                dest,
                updu_part: a.q.updu.clone(),
            };
            let p = if a.q.expedited {
                Primitive::ExpeditedUnidataRequestConfirm(c)
            } else {
                Primitive::UnidataRequestConfirm(c)
            };
            self.send_to(a.q.src_sap, Some(a.q.conn), p);
        }
        for a in &done {
            self.dequeued(&a.q);
        }
        self.abandon_lost_at_reset(lost_at_reset);
    }

    /// The U_PDUs a reset of this node's transmit window found on the air: sent, perhaps
    /// delivered, perhaps not, they are never sent again (that could deliver them twice), so
    /// the clients that asked for a confirm, and have had no answer yet, hear they were not
    /// delivered as far as the node knows.
    fn abandon_lost_at_reset(&mut self, lost: Vec<InArq>) {
        self.counters.reset_lost += lost.len() as u64;
        for a in &lost {
            if a.q.confirm && !a.failed {
                self.reject(&a.q, UnidataRejectReason::DestinationNodeNotResponding);
            }
            self.dequeued(&a.q);
        }
    }
}

/// Resets this node's transmit window to `link`'s peer and starts the RESET/WIN-RESYNC with
/// RESET RX WIN CMND (NEW RX LWE 0) that realigns the peer's receive window with it; the
/// U_PDUs that had a segment on the air, their fate unknown.
fn start_rx_win_reset(link: &mut Link, counters: &mut NodeCounters) -> Vec<InArq> {
    link.stale_acks = 0;
    link.command_reset(counters);
    link.reset_transmit_window()
}

/// Starts the FULL RESET CMD a restarted node owes `link`'s peer ([`Node::restart`]).
pub(super) fn start_full_reset(link: &mut Link, counters: &mut NodeCounters) {
    link.full_reset_due = false;
    link.reset_full = true;
    link.resync = false;
    link.command_reset(counters);
    counters.full_resets += 1;
}

/// Whether `d` is a CAS-1 link control C_PDU (REQUEST, ACCEPTED, REJECTED, BREAK, CONFIRM)
/// whole in one EXPEDITED NON-ARQ DATA D_PDU to one node, as every node sends them.
fn is_link_control(d: &Dpdu) -> bool {
    match &d.body {
        Body::ExpNonArqData { header, segment } => {
            !header.group
                && header.segment_offset == 0
                && usize::from(header.cpdu_size) == segment.len()
                && matches!(Cpdu::decode(segment), Ok(c) if !matches!(c, Cpdu::Data(_)))
        }
        _ => false,
    }
}

/// The SAPs and priority of a DATA S_PDU as SIS values; `None` if one is out of range (the
/// S_PDU is then dropped, in ARQ and non-ARQ reception alike).
fn sis_ids(pci: &DataPci) -> Option<(SapId, SapId, Priority)> {
    Some((
        SapId::new(pci.source_sap).ok()?,
        SapId::new(pci.destination_sap).ok()?,
        Priority::new(pci.priority).ok()?,
    ))
}
