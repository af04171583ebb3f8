//! The sending half of a [`Node`]: queued U_PDUs into the ARQ, non-ARQ and expedited
//! services, and one transmission's D_PDUs (ACKs first, then expedited, non-ARQ and ARQ data,
//! within one maximum transmission at one rate), planned on the modem and encoded.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use crate::arq::ArqSender;
use crate::cpdu::{Cpdu, break_reason};
use crate::dpdu::{
    Address, Body, Dpdu, Eow, ExpDataHeader, NonArqHeader, RateRequest, Reset, Response, Warning,
    warning_reason,
};
use crate::modem::{DataRate, Interleaver, ModemConfig, Transmission};
use crate::spdu::{DataPci, Spdu, Ttd};

use super::{Drc, ExpOut, InArq, Node, NonArqOut, Queued, UNANSWERED_STEP_DOWN, fair_shares};

/// One D_PDU of a transmission, as encoded and placed on the modem's timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentDpdu {
    /// Addressee: a node index, or a group (index past the nodes).
    pub dest: usize,
    /// Offset of its first byte in the transmission's payload.
    pub offset: usize,
    /// The encoded D_PDU.
    pub bytes: Vec<u8>,
    /// D_PDU type (0 DATA-ONLY, 1 ACK-ONLY, 2 DATA-ACK, 3 RESET/WIN-RESYNC, ...).
    pub dpdu_type: u8,
    /// FSN for data frames.
    pub fsn: Option<u8>,
    /// EOT written in its header.
    pub eot: u8,
    /// When its first byte's interleaver block starts.
    pub at: Duration,
    /// Retransmission of a data frame.
    pub retransmission: bool,
}

/// One transmission a node wants to make.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeTx {
    /// The modem as keyed for it (its rate may differ from the configured one).
    pub modem: ModemConfig,
    /// Its timing on the air.
    pub tx: Transmission,
    /// Its D_PDUs, in order.
    pub dpdus: Vec<SentDpdu>,
    /// It carries something that expects an answer (data or a reset command).
    pub sent_data: bool,
    /// D_PDU bytes.
    pub bytes: usize,
    /// DATA D_PDUs in it sent again.
    pub retransmissions: u64,
    /// DATA-ACK D_PDUs in it.
    pub data_acks: u64,
}

/// The 4-bit DRC rate code of a data rate (Annex C EOW type 1).
fn rate_code(rate: DataRate) -> u8 {
    const RATES: [u32; 12] = [
        75, 150, 300, 600, 1200, 2400, 3200, 3600, 4800, 6400, 8000, 9600,
    ];
    RATES
        .iter()
        .position(|&b| b == rate.bps())
        .and_then(|p| u8::try_from(p).ok())
        .unwrap_or(0)
}

/// The 2-bit DRC interleaver code (0 none, 1 short, 2 long; everything else short).
fn interleaver_code(il: Interleaver) -> u8 {
    match il {
        Interleaver::Zero => 0,
        Interleaver::Long => 2,
        _ => 1,
    }
}

/// The DATA C_PDU carrying a queued U_PDU in a DATA S_PDU.
fn data_cpdu(q: &Queued) -> Option<Vec<u8>> {
    let spdu = Spdu::Data {
        pci: DataPci {
            priority: q.priority.get(),
            source_sap: q.src_sap.get(),
            destination_sap: q.dest_sap.get(),
            client_delivery_confirm: false,
            ttd: q.deadline.map(Ttd::at),
        },
        updu: q.updu.to_vec(),
    };
    spdu.encode().ok().and_then(|s| Cpdu::Data(s).encode().ok())
}

impl Node {
    /// Moves queued U_PDUs into the ARQ, best priority first, while each link has room.
    fn feed_arq(&mut self) {
        let window = usize::from(self.setup.config.window);
        let segment = self.setup.config.segment_size.max(1);
        let node = self.index;
        self.queue
            .sort_by(|a, b| b.rank.cmp(&a.rank).then(a.seq.cmp(&b.seq)));
        let mut moved = Vec::new();
        let mut keep = Vec::new();
        // Free window room per link. A U_PDU enters the ARQ only when all its segments fit,
        // so that U_PDUs waiting for room stay here, where priority and TTL still apply.
        let mut room: BTreeMap<usize, usize> = self
            .links
            .iter()
            .map(|(&p, l)| (p, window.saturating_sub(l.sender.in_flight())))
            .collect();
        let mut blocked: Vec<usize> = Vec::new();
        let hard = &self.hard;
        for q in std::mem::take(&mut self.queue) {
            if q.non_arq.is_some() || q.expedited {
                // Served by feed_non_arq or feed_expedited.
                keep.push(q);
                continue;
            }
            if hard.as_ref().is_some_and(|h| !h.allows(&q)) {
                // Held by the hard link; it blocks nothing behind it.
                keep.push(q);
                continue;
            }
            let Some(link) = self.links.get_mut(&q.dest) else {
                continue;
            };
            let need = q.cpdu_len().div_ceil(segment).max(1);
            let free = room.entry(q.dest).or_default();
            if blocked.contains(&q.dest) || need > *free {
                // Keep the order: nothing overtakes a U_PDU waiting for room on its link.
                blocked.push(q.dest);
                keep.push(q);
                continue;
            }
            *free -= need;
            match data_cpdu(&q).map(|c| link.sender.push_with(c, q.in_order)) {
                Some(Ok(id)) => {
                    link.unconfirmed.insert(id, InArq { q, failed: false });
                }
                other => {
                    tracing::warn!(node, ?other, "U_PDU could not enter the ARQ; dropped");
                    moved.push(q);
                }
            }
        }
        self.queue = keep;
        for q in moved {
            self.dequeued(&q);
        }
    }

    /// Moves queued non-ARQ U_PDUs, best priority first, into NON-ARQ DATA D_PDUs (each
    /// segment repeated as many times as asked) waiting for air time.
    fn feed_non_arq(&mut self) {
        let segment = self.setup.config.segment_size.max(1);
        let nodes = self.setup.config.addresses.len();
        let node = self.index;
        let hard = &self.hard;
        let (mut out, keep): (Vec<Queued>, Vec<Queued>) = std::mem::take(&mut self.queue)
            .into_iter()
            .partition(|q| q.non_arq.is_some() && hard.as_ref().is_none_or(|h| h.allows(q)));
        self.queue = keep;
        // Expedited first, then by priority, then in order of submission.
        out.sort_by(|a, b| {
            (b.expedited, b.rank)
                .cmp(&(a.expedited, a.rank))
                .then(a.seq.cmp(&b.seq))
        });
        let mut exp_frames = Vec::new();
        let mut done = Vec::new();
        for q in out {
            let Some(cpdu) = data_cpdu(&q) else {
                tracing::warn!(node, "non-ARQ U_PDU could not be encoded; dropped");
                done.push(q);
                continue;
            };
            let Ok(size) = u16::try_from(cpdu.len()) else {
                tracing::warn!(node, "non-ARQ C_PDU over 65535 bytes; dropped");
                done.push(q);
                continue;
            };
            let cpdu_id = self.next_cpdu_id;
            self.next_cpdu_id = (self.next_cpdu_id + 1) % 4096;
            let copies = 1 + usize::from(q.non_arq.unwrap_or(0));
            let mut frames = VecDeque::new();
            for (k, chunk) in cpdu.chunks(segment).enumerate() {
                let header = NonArqHeader {
                    cpdu_id,
                    deliver_in_order: q.in_order,
                    // Destinations past the nodes are the groups (see `Node::submit`).
                    group: q.dest >= nodes,
                    cpdu_size: size,
                    // Below the C_PDU size, which fits in 16 bits.
                    segment_offset: (k * segment) as u16,
                    reception_window: 0,
                };
                for _ in 0..copies {
                    frames.push_back((header, chunk.to_vec()));
                }
            }
            let o = NonArqOut {
                dest: q.dest,
                expedited: q.expedited,
                frames,
            };
            if q.expedited {
                exp_frames.push(o);
            } else {
                self.non_arq_out.push_back(o);
            }
            self.counters.non_arq_sent += 1;
            done.push(q);
        }
        // Behind expedited C_PDUs already waiting, ahead of every normal one.
        let at = self.non_arq_out.iter().take_while(|o| o.expedited).count();
        for (k, o) in exp_frames.into_iter().enumerate() {
            self.non_arq_out.insert(at + k, o);
        }
        for q in done {
            self.dequeued(&q);
        }
    }

    /// Starts the next expedited ARQ C_PDU on every link whose previous one is acknowledged
    /// (stop-and-wait per C_PDU; a fresh sender restarts the FSNs at 0).
    fn feed_expedited(&mut self) {
        let window = self.setup.config.window;
        let segment = self.setup.config.segment_size;
        let node = self.index;
        let mut dropped = Vec::new();
        for (&peer, link) in self.links.iter_mut() {
            if link.exp_out.is_some() {
                continue;
            }
            if let Some(c) = link.exp_control.pop_front() {
                // A hard-link S_PDU of the SIS goes ahead of the clients' expedited data.
                let started = ArqSender::new(window, segment)
                    .ok()
                    .and_then(|mut s| s.push(c).ok().map(|_| s));
                match started {
                    Some(sender) => {
                        link.exp_out = Some(ExpOut {
                            sender,
                            cpdu_id: link.exp_next_id,
                            q: None,
                            failed: false,
                        });
                        link.exp_next_id = (link.exp_next_id + 1) % 16;
                    }
                    None => tracing::warn!(node, peer, "hard-link S_PDU could not enter the ARQ"),
                }
                continue;
            }
            let hard = self.hard.as_ref();
            let Some(pos) = self
                .queue
                .iter()
                .enumerate()
                .filter(|(_, q)| {
                    q.expedited
                        && q.non_arq.is_none()
                        && q.dest == peer
                        && hard.is_none_or(|h| h.allows(q))
                })
                .min_by_key(|(_, q)| q.seq)
                .map(|(i, _)| i)
            else {
                continue;
            };
            let q = self.queue.remove(pos);
            let started = data_cpdu(&q).and_then(|c| {
                let mut sender = ArqSender::new(window, segment).ok()?;
                sender.push(c).ok()?;
                Some(sender)
            });
            match started {
                Some(sender) => {
                    link.exp_out = Some(ExpOut {
                        sender,
                        cpdu_id: link.exp_next_id,
                        q: Some(q),
                        failed: false,
                    });
                    link.exp_next_id = (link.exp_next_id + 1) % 16;
                }
                None => {
                    tracing::warn!(node, "expedited U_PDU could not enter the ARQ; dropped");
                    dropped.push(q);
                }
            }
        }
        for q in dropped {
            self.dequeued(&q);
        }
    }

    /// The node's next transmission, keyed at `t`: CAS-1 PHYSICAL LINK REQUESTs, ACCEPTEDs,
    /// BREAKs and BREAK CONFIRMs (with [`super::NodeConfig::cas1`]; no ARQ data to a peer until
    /// its link is made; a link whose idle time ran out is broken here unless data for the
    /// peer came meanwhile), RESET/WIN-RESYNC frames, the ACKs it owes,
    /// expedited data, non-ARQ data and ARQ data shared max-min fairly among its peers, at the
    /// slowest rate of the links it serves and within one maximum transmission at that rate;
    /// planned on the modem, each D_PDU's EOT (and non-ARQ reception window) filled in and
    /// encoded. `None` if it has nothing to send (or the modem cannot plan it).
    ///
    /// First, a link whose last 1 + [`super::NodeConfig::link_retries`] transmissions of ARQ
    /// data (or RESET commands) all went unanswered is declared lost (this would be one
    /// retry too many; see [`super::LinkEvent::Lost`]), and a lost link that has data again
    /// starts with a RESET/WIN-RESYNC.
    pub fn poll_transmit(&mut self, t: Duration) -> Option<NodeTx> {
        self.clock = self.clock.max(t);
        if let Some(retries) = self.setup.config.link_retries {
            let lost: Vec<usize> = self
                .links
                .iter()
                .filter(|(_, l)| {
                    l.silent > retries
                        && (!l.sender.is_idle()
                            || l.exp_out.is_some()
                            || l.reset_out.is_some()
                            || l.link_request_out
                            || l.break_out)
                })
                .map(|(&p, _)| p)
                .collect();
            for peer in lost {
                self.lose_link(peer, t);
            }
        }
        self.feed_arq();
        self.feed_non_arq();
        self.feed_expedited();
        if self.setup.config.cas1 {
            // CAS-1: a link idle for its time is broken now, unless data for the peer came
            // meanwhile (then the break is off and the idle timer starts again).
            let due: Vec<usize> = self
                .links
                .iter()
                .filter(|(_, l)| l.break_due)
                .map(|(&p, _)| p)
                .collect();
            for peer in due {
                let idle = self.link_is_idle(peer);
                if let Some(l) = self.links.get_mut(&peer) {
                    l.break_due = false;
                    if idle && l.linked {
                        l.linked = false;
                        l.caller = false;
                        l.break_out = true;
                    } else {
                        l.last_activity = t;
                    }
                }
            }
            // CAS-1: ARQ data for a peer without a physical link asks for one first (once a
            // break this node started is confirmed, the peer's rejection has been waited out,
            // and while this node may hold one more link), peers in index order.
            let peers: Vec<usize> = self.links.keys().copied().collect();
            for peer in peers {
                let ask = self.wants_link(peer) && self.link_slot_free(Some(peer));
                if let Some(l) = self.links.get_mut(&peer)
                    && ask
                    && l.rejected_until.is_none()
                    && (!l.sender.is_idle() || l.exp_out.is_some())
                {
                    l.link_request_out = true;
                }
            }
        }
        for l in self.links.values_mut() {
            if l.full_reset_due && l.linked && !l.sender.is_idle() {
                // This node restarted: reset the peer's ARQ machines before any data.
                super::receive::start_full_reset(l, &mut self.counters);
            }
            if l.resync && l.linked && !l.sender.is_idle() {
                // The peer's receive window may still be where the lost link left it: command
                // it to 0, where this node's cleared transmit window starts, before any data.
                l.resync = false;
                l.command_reset(&mut self.counters);
            }
        }
        let node = self.index;
        let overhead = self.setup.dpdu_overhead;
        let window = usize::from(self.setup.config.window);
        let config = &self.setup.config;
        if config.drc == Drc::Adaptive {
            let ladder: Vec<DataRate> = self.setup.budgets.keys().copied().collect();
            for l in self.links.values_mut() {
                if l.unanswered < UNANSWERED_STEP_DOWN {
                    continue;
                }
                l.unanswered = 0;
                let pos = ladder.iter().position(|&r| r == l.tx_rate);
                if let Some(&down) = pos
                    .and_then(|p| p.checked_sub(1))
                    .and_then(|p| ladder.get(p))
                {
                    l.tx_rate = down;
                    self.counters.rate_changes += 1;
                }
            }
        }
        // One rate per transmission: the slowest of the links it serves.
        let rate = self
            .links
            .iter()
            .filter(|(p, l)| {
                l.owes()
                    || l.asks_tx_win()
                    || l.exp_out.is_some()
                    || !l.sender.is_idle()
                    || l.drc_response_owed
                    || self.non_arq_out.iter().any(|o| o.dest == **p)
                    || self.queue.iter().any(|q| q.dest == **p)
            })
            .map(|(_, l)| l.tx_rate)
            .min()
            .unwrap_or(config.modem.rate);
        let (rate, mut budget) = match self.setup.budgets.get(&rate) {
            Some(&b) => (rate, b),
            None => (
                config.modem.rate,
                self.setup
                    .budgets
                    .get(&config.modem.rate)
                    .copied()
                    .unwrap_or_default(),
            ),
        };
        let full_budget = budget;
        let modem = ModemConfig {
            rate,
            ..config.modem.clone()
        };
        let interleaver = interleaver_code(modem.interleaver);
        let src = self.dpdu_address;
        let mut frames: Vec<(usize, Dpdu, bool)> = Vec::new();
        let mut dests: BTreeMap<usize, Address> = BTreeMap::new();
        for (&peer, _) in self.links.iter() {
            let addr = config.addresses.get(peer).map(|a| a.bits()).unwrap_or(0);
            dests.insert(peer, Address::new(addr).unwrap_or_default());
        }
        let nodes = config.addresses.len();
        for (g, group) in config.groups.iter().enumerate() {
            dests.insert(
                nodes + g,
                Address::new(group.address.bits()).unwrap_or_default(),
            );
        }
        let data_ack = config.data_ack;
        // Peers whose ACK waits to ride on DATA-ACK frames (ACK-ONLY if no data goes after all).
        let mut deferred: BTreeMap<usize, Dpdu> = BTreeMap::new();
        let mut sent_data = false;
        // Peers this transmission sends something that expects an answer (link loss).
        let mut asking: BTreeSet<usize> = BTreeSet::new();
        // CAS-1 first: a link must be made before any ARQ frame goes to the peer.
        let mut cas: Vec<(usize, Cpdu)> = Vec::new();
        // Peers this transmission accepts (their first data is awaited from its end).
        let mut accepted: Vec<usize> = Vec::new();
        let hard_peer = self.hard_link_peer();
        for (&peer, link) in self.links.iter_mut() {
            if std::mem::take(&mut link.break_confirm_owed) {
                cas.push((peer, Cpdu::PhysicalLinkBreakConfirm));
            }
            if std::mem::take(&mut link.link_accept_owed) {
                cas.push((peer, Cpdu::PhysicalLinkAccepted));
                accepted.push(peer);
            }
            if let Some(reason) = link.reject_owed.take() {
                cas.push((peer, Cpdu::PhysicalLinkRejected { reason }));
            }
            if link.break_out {
                cas.push((
                    peer,
                    Cpdu::PhysicalLinkBreak {
                        reason: break_reason::NO_MORE_DATA,
                    },
                ));
                // Resent until BREAK CONFIRM comes; unanswered, it ends like an unanswered
                // request (the link is declared lost, which it is).
                sent_data = true;
                asking.insert(peer);
            }
            if link.link_request_out {
                // Exclusive for the physical link under this node's own hard link (Annex B).
                let exclusive = hard_peer == Some(peer);
                cas.push((peer, Cpdu::PhysicalLinkRequest { exclusive }));
                // It expects an answer, like data: resent until ACCEPTED comes, and counted
                // towards link loss.
                sent_data = true;
                asking.insert(peer);
                self.counters.link_requests += 1;
            }
        }
        for (peer, cpdu) in cas {
            let Ok(bytes) = cpdu.encode() else {
                continue;
            };
            let cpdu_id = self.next_cpdu_id;
            self.next_cpdu_id = (self.next_cpdu_id + 1) % 4096;
            let d = Dpdu::new(
                dests.get(&peer).copied().unwrap_or_default(),
                src,
                Body::ExpNonArqData {
                    header: NonArqHeader {
                        cpdu_id,
                        // Link control is no client's data: it never waits behind any.
                        deliver_in_order: false,
                        group: false,
                        // One byte: every CAS-1 control C_PDU is.
                        cpdu_size: bytes.len() as u16,
                        segment_offset: 0,
                        reception_window: 0,
                    },
                    segment: bytes,
                },
            );
            budget = budget.saturating_sub(d.encoded_len());
            frames.push((peer, d, false));
        }
        for (&peer, link) in self.links.iter_mut() {
            let dest = dests.get(&peer).copied().unwrap_or_default();
            if let Some(received_type) = link.warning_owed.take() {
                // ARQ data came on a link this node has not made: the peer makes it again.
                let d = Dpdu::new(
                    dest,
                    src,
                    Body::Warning(Warning {
                        received_type,
                        reason: warning_reason::NOT_CONNECTED,
                    }),
                );
                budget = budget.saturating_sub(d.encoded_len());
                frames.push((peer, d, false));
                self.counters.not_linked_warnings += 1;
            }
            // The RESET/WIN-RESYNC frames owed to the peer, in this order.
            let mut resets = Vec::new();
            if let Some(id) = link.reset_ack_owed.take() {
                resets.push(Reset {
                    reset_ack: true,
                    reset_frame_id: id,
                    ..Reset::default()
                });
            }
            if link.linked
                && std::mem::take(&mut link.tx_win_request_owed)
                && let Some(id) = link.tx_win_request
            {
                // The peer's windows disagree with this node's receive window: ask it to
                // realign them ([ED3-C] §C.3.6 (8)); it answers with a RESET RX WIN CMND.
                resets.push(Reset {
                    reset_tx_win_request: true,
                    reset_frame_id: id,
                    ..Reset::default()
                });
            }
            let command = link.reset_out.filter(|_| link.linked);
            if let Some(id) = command {
                // Command the peer's RX window back to 0, where this node's TX window now
                // starts (or, after a restart, both of the peer's ARQ machines); resent in
                // every transmission until the RESET ACK comes.
                resets.push(Reset {
                    full_reset: link.reset_full,
                    reset_rx_win_command: !link.reset_full,
                    new_rx_lwe: 0,
                    reset_frame_id: id,
                    ..Reset::default()
                });
            }
            for rs in resets {
                let d = Dpdu::new(dest, src, Body::ResetWinResync(rs));
                budget = budget.saturating_sub(d.encoded_len());
                frames.push((peer, d, false));
            }
            if command.is_some() {
                // It expects an answer, like data.
                sent_data = true;
                asking.insert(peer);
            }
        }
        for (&peer, link) in self.links.iter_mut() {
            if link.owes_ack {
                link.owes_ack = false;
                if link.full_reset_due || link.reset_full {
                    // Restarted: no ACK of a window the peer does not share until the reset.
                    continue;
                }
                let d = Dpdu::new(
                    dests.get(&peer).copied().unwrap_or_default(),
                    src,
                    Body::AckOnly(link.receiver.ack()),
                );
                // Reserve its room either way: a DATA-ACK carries the same ACK bytes.
                budget = budget.saturating_sub(d.encoded_len());
                if data_ack && link.reset_out.is_none() && !link.sender.is_idle() {
                    deferred.insert(peer, d);
                } else {
                    frames.push((peer, d, false));
                }
            }
        }
        for (&peer, link) in self.links.iter_mut() {
            if link.owes_exp_ack {
                link.owes_exp_ack = false;
                let Some((_, rx)) = &link.exp_in else {
                    continue;
                };
                let d = Dpdu::new(
                    dests.get(&peer).copied().unwrap_or_default(),
                    src,
                    Body::ExpAckOnly(rx.ack()),
                );
                budget = budget.saturating_sub(d.encoded_len());
                frames.push((peer, d, false));
            }
        }
        // Expedited data before anything else.
        for (&peer, link) in self.links.iter_mut() {
            if !link.linked {
                continue;
            }
            let Some(e) = &mut link.exp_out else {
                continue;
            };
            if budget < overhead + 1 {
                break;
            }
            for seg in e.sender.next_segments_within(window, budget, overhead) {
                let d = Dpdu::new(
                    dests.get(&peer).copied().unwrap_or_default(),
                    src,
                    Body::ExpDataOnly {
                        header: ExpDataHeader {
                            start: seg.header.start,
                            end: seg.header.end,
                            cpdu_id: e.cpdu_id,
                            fsn: seg.header.fsn,
                        },
                        segment: seg.data,
                    },
                );
                budget = budget.saturating_sub(d.encoded_len());
                sent_data = true;
                asking.insert(peer);
                frames.push((peer, d, seg.retransmission));
            }
        }
        // Non-ARQ data after the ACKs and before ARQ data; whatever does not fit waits for
        // the node's next transmission. (Its reception window is set once the plan is known.)
        while let Some(out) = self.non_arq_out.front_mut() {
            let Some((header, seg)) = out.frames.front() else {
                self.non_arq_out.pop_front();
                continue;
            };
            if budget < overhead + seg.len() {
                break;
            }
            let d = Dpdu::new(
                dests.get(&out.dest).copied().unwrap_or_default(),
                src,
                if out.expedited {
                    Body::ExpNonArqData {
                        header: *header,
                        segment: seg.clone(),
                    }
                } else {
                    Body::NonArqData {
                        header: *header,
                        segment: seg.clone(),
                    }
                },
            );
            budget = budget.saturating_sub(d.encoded_len());
            frames.push((out.dest, d, false));
            out.frames.pop_front();
            if out.frames.is_empty() {
                self.non_arq_out.pop_front();
            }
        }
        let mut data_acks = 0u64;
        // A transmission serving several peers shares its bytes among them, max-min fairly:
        // a peer asking less than an equal share gets all it asks, the others split the rest,
        // so a long batch for one ship never holds up a short message for another (with one
        // peer, it gets the whole budget as before).
        let ack_extra = |peer: &usize| match deferred.get(peer).map(|d| &d.body) {
            Some(Body::AckOnly(a)) => 1 + a.bitmap.len(),
            _ => 0,
        };
        let demands: Vec<(usize, usize)> = self
            .links
            .iter_mut()
            .filter(|(_, l)| l.reset_out.is_none() && l.linked)
            .map(|(&p, l)| (p, l.sender.ready_bytes(window, overhead)))
            .filter(|&(_, d)| d > 0)
            .map(|(p, d)| (p, d + ack_extra(&p)))
            .collect();
        let shares = fair_shares(budget, &demands);
        // Smallest share first: the receiver takes each D_PDU as its block is decoded, so a
        // short message ahead of a long batch arrives seconds into the transmission, while
        // the batch ends where it would have anyway.
        let mut order: Vec<(usize, usize)> = shares.iter().map(|(&p, &s)| (s, p)).collect();
        order.sort_unstable();
        for (_, peer) in order {
            let Some(link) = self.links.get_mut(&peer) else {
                continue;
            };
            if budget < overhead + 1 {
                break;
            }
            if link.reset_out.is_some() || !link.linked {
                // No data until the peer's receive window is realigned, or (CAS-1) until the
                // physical link is made.
                continue;
            }
            let Some(&share) = shares.get(&peer) else {
                continue;
            };
            // A DATA-ACK carries the ACK's RX LWE and bitmap on top of the DATA-ONLY fields.
            // Only the first frame to the peer carries it: the ACK is the same for all, and
            // repeating it would cost more bytes than the ACK-ONLY it replaces.
            let mut ack = match deferred.get(&peer).map(|d| &d.body) {
                Some(Body::AckOnly(a)) => Some(a.clone()),
                _ => None,
            };
            let extra = ack.as_ref().map_or(0, |a| 1 + a.bitmap.len());
            let segments = link.sender.next_segments_within(
                window,
                share.min(budget).saturating_sub(extra),
                overhead,
            );
            if !segments.is_empty() {
                link.unanswered = link.unanswered.saturating_add(1);
                if ack.is_some() {
                    deferred.remove(&peer);
                }
            }
            for seg in segments {
                let body = match ack.take() {
                    Some(a) => {
                        data_acks += 1;
                        Body::DataAck {
                            header: seg.header,
                            ack: a,
                            segment: seg.data,
                        }
                    }
                    None => Body::DataOnly {
                        header: seg.header,
                        segment: seg.data,
                    },
                };
                let d = Dpdu::new(dests.get(&peer).copied().unwrap_or_default(), src, body);
                budget = budget.saturating_sub(d.encoded_len());
                sent_data = true;
                asking.insert(peer);
                frames.push((peer, d, seg.retransmission));
            }
        }
        // ACKs that found no data to ride on go as ACK-ONLY, ahead of the data as usual.
        for (i, (peer, d)) in deferred.into_iter().enumerate() {
            frames.insert(i, (peer, d, false));
        }
        if frames.is_empty() {
            return None;
        }
        // DRC signalling rides in the EOW of every D_PDU to the peer concerned: "accept" for a
        // change just made, else a pending request.
        for (peer, d, _) in &mut frames {
            let Some(link) = self.links.get(peer) else {
                continue;
            };
            if link.drc_response_owed {
                d.eow = Eow::DrcResponse(Response {
                    response: 0,
                    reason: 0,
                });
            } else if let Some(r) = link.drc_request {
                // Other parameters 1: "request, Tx = Rx at the master".
                d.eow = Eow::DrcRequest(RateRequest {
                    rate: rate_code(r),
                    interleaver,
                    other: 1,
                });
            }
        }
        for l in self.links.values_mut() {
            l.drc_response_owed = false;
        }
        let total: usize = frames.iter().map(|(_, d, _)| d.encoded_len()).sum();
        let tx = match modem.plan(t, total) {
            Ok(tx) => tx,
            Err(e) => {
                tracing::error!(node, "cannot plan a transmission: {e}");
                return None;
            }
        };
        // Reception window of a non-ARQ C_PDU: to the end of this transmission, plus, if
        // some of its D_PDUs must wait, a full transmission and two response timeouts for
        // every transmission they need.
        let per_tx = self.setup.config.max_transmission + self.setup.response_timeout * 2;
        let half_secs =
            |d: Duration| u16::try_from(d.as_millis().div_ceil(500)).unwrap_or(u16::MAX);
        let extra: BTreeMap<u16, u16> = self
            .non_arq_out
            .iter()
            .filter_map(|o| {
                let (h, _) = o.frames.front()?;
                let rest: usize = o.frames.iter().map(|(_, s)| s.len() + overhead).sum();
                let txs = u32::try_from(rest.div_ceil(full_budget.max(1))).unwrap_or(u32::MAX);
                Some((h.cpdu_id, half_secs(per_tx.saturating_mul(txs))))
            })
            .collect();
        let mut dpdus = Vec::new();
        let mut offset = 0;
        let mut retrans = 0;
        for (peer, mut d, retransmission) in frames {
            let at = tx
                .block_of_byte(offset)
                .map_or(tx.preamble_end, |b| b.start);
            d.eot = tx.eot_at(at);
            if let Body::NonArqData { header, .. } | Body::ExpNonArqData { header, .. } =
                &mut d.body
            {
                let more = extra.get(&header.cpdu_id).copied().unwrap_or(0);
                header.reception_window = u16::from(d.eot).saturating_add(more);
            }
            let bytes = match d.encode() {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!(node, "cannot encode a D_PDU: {e}");
                    continue;
                }
            };
            let fsn = match &d.body {
                Body::DataOnly { header, .. } | Body::DataAck { header, .. } => Some(header.fsn),
                Body::ExpDataOnly { header, .. } => Some(header.fsn),
                _ => None,
            };
            retrans += u64::from(retransmission);
            let len = bytes.len();
            dpdus.push(SentDpdu {
                dest: peer,
                offset,
                bytes,
                dpdu_type: d.body.dpdu_type(),
                fsn,
                eot: d.eot,
                at,
                retransmission,
            });
            offset += len;
        }
        for peer in asking {
            if let Some(l) = self.links.get_mut(&peer) {
                l.silent = l.silent.saturating_add(1);
            }
        }
        for sd in &dpdus {
            if let Some(l) = self.links.get_mut(&sd.dest) {
                l.last_activity = t;
            }
        }
        if let Some(wait) = self.setup.config.link_first_data {
            // The caller can answer once this transmission has ended; give it at least a
            // response timeout, else a short wait aborts every link before its data can come
            // (each repeat of the ACCEPTED starts the wait again).
            let by = tx.peer_may_transmit_at() + wait.max(self.setup.response_timeout);
            for peer in accepted {
                if let Some(l) = self.links.get_mut(&peer) {
                    l.first_data_by = Some(by);
                }
            }
        }
        let count = dpdus.len() as u64;
        self.counters.transmissions += 1;
        self.counters.bytes_on_air += offset as u64;
        self.counters.dpdus_sent += count;
        self.counters.retransmissions += retrans;
        self.counters.data_acks += data_acks;
        Some(NodeTx {
            modem,
            tx,
            dpdus,
            sent_data,
            bytes: offset,
            retransmissions: retrans,
            data_acks,
        })
    }

    /// The node's transmission `sent` collided on the air and nobody received it: the ACKs
    /// (and RESET ACKs) it carried are owed again. Counted in
    /// [`super::NodeCounters::collisions`].
    pub fn transmission_collided(&mut self, sent: &NodeTx) {
        self.counters.collisions += 1;
        for sd in &sent.dpdus {
            if let Some(l) = self.links.get_mut(&sd.dest) {
                match sd.dpdu_type {
                    1 | 2 => l.owes_ack = true,
                    5 => l.owes_exp_ack = true,
                    3 => {
                        if let Ok((d, _)) = Dpdu::decode(&sd.bytes)
                            && let Body::ResetWinResync(rs) = d.body
                        {
                            if rs.reset_ack {
                                l.reset_ack_owed = Some(rs.reset_frame_id);
                            }
                            if rs.reset_tx_win_request && l.tx_win_request.is_some() {
                                l.tx_win_request_owed = true;
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}
