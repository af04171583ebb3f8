//! Hard-link data exchange sessions ([ED3-A] §A.3.2.2): a client reserves the link to one
//! node for itself (S_HARD_LINK_ESTABLISH), the SIS sublayers of the two nodes agree on it
//! with HARD LINK ESTABLISHMENT REQUEST / CONFIRM / REJECTED S_PDUs (types 3-5) and end it
//! with TERMINATE / TERMINATE CONFIRM (types 6-7), each sent with the expedited ARQ service so
//! that it overtakes routine data. Part of the sans-IO node ([`super`]); the SIS server maps
//! the client primitives onto [`Node::hard_link_establish`], [`Node::hard_link_terminate`],
//! [`Node::hard_link_accept`] and [`Node::hard_link_reject`].
//!
//! What a node does, per Annex A:
//! - At most one hard link at a time. A request that outranks the existing one (higher
//!   client rank, then higher link priority; between the same two nodes a higher link type;
//!   otherwise the existing link stays) ends it (TERMINATE "higher priority link requested");
//!   one that does not is rejected: locally "higher priority link existing" (or "requested
//!   type 0 link exists" for the same type 0 link again), remotely "remote node busy" when
//!   rank and priority are equal and "higher priority link existing" when they are not.
//! - The called node confirms a type 0 (link reservation) or type 1 (partial bandwidth) link
//!   itself, judging it with the default rank 0 for the called SAP; a type 2 (full
//!   bandwidth) link goes to the client bound on the requested SAP as
//!   S_HARD_LINK_INDICATION (judged with that client's rank), whose S_HARD_LINK_ACCEPT or
//!   REJECT decides; no client bound there: REJECTED "destination SAP ID not bound".
//! - While the link is up, a node sends only to the link's peer: any of its clients' data on
//!   types 0 and 1 (Annex A lets other clients share those links with soft-link traffic),
//!   only the two clients' data to each other on type 2. Everything else stays queued (its
//!   TTL still runs) until the link ends. A link being requested does not hold data back.
//! - The client that asked (or the type 2 called client) ends it with
//!   S_HARD_LINK_TERMINATE; the peer confirms at once and tells its client
//!   (S_HARD_LINK_TERMINATED, "link terminated by remote node"). The terminating node's own
//!   client hears only if no CONFIRM comes in time (Annex A's note to S_HARD_LINK_TERMINATED:
//!   "only if the termination protocol ends without confirmation"). Its client unbinding ends
//!   the link too (TERMINATE "destination SAP ID unbound"). A request its client ends before
//!   the answer is withdrawn the same way, and gets no answer. A link being terminated does
//!   not stand in the way of a new request.
//! - A link declared lost ([`super::NodeConfig::link_retries`]) ends a hard link to that peer
//!   ("physical link broken"); a request it was waiting on is rejected ("remote node not
//!   responding"). A request unanswered for the hard-link time-out is rejected the same way
//!   and withdrawn at the peer with a TERMINATE.
//! - Old news is told apart without any session number: see [`Node::on_hard_spdu`].
//!
//! With CAS-1 ([`super::NodeConfig::cas1`]), the physical link under a hard link is exclusive
//! (Annex B): the caller asks for it with the exclusive bit set, a node whose hard link to
//! another node is up rejects nonexclusive requests with "supporting exclusive link" (one
//! being set up: "higher-priority link request pending"), and once the hard link is up both
//! nodes break their links to every other node and ask for none until it ends (their ARQ
//! data for those nodes waits). Exclusive requests are always accepted, so that the two SIS
//! sublayers can settle precedence; a node holds one hard link, so Annex B's limit of two
//! exclusive links is never reached. Without CAS-1 only the queued U_PDUs are held back.
//!
//! Annex A leaves the time-outs configurable without a value; this node uses one,
//! [`super::NodeConfig::hard_link_timeout`] (default [`HARD_LINK_TIMEOUT`]), for all three
//! waits.

use std::time::Duration;

use skywave_sis::{
    HardLink, HardLinkRejectReason, HardLinkTerminateReason, HardLinkType, LinkPriority,
    NodeAddress, Primitive, SapId,
};

use crate::cpdu::{Cpdu, reject_reason};
use crate::spdu::Spdu;

use super::{Node, Queued};

/// Default of [`super::NodeConfig::hard_link_timeout`]: how long a node waits for the peer's
/// CONFIRM (or REJECTED) of its request, for its type 2 client's answer to an indication, and
/// for the peer's TERMINATE CONFIRM. Annex A makes each "a configurable time-out period"
/// without a value; ten minutes covers making a CAS-1 link and one exchange of the longest
/// transmissions (127.5 s each way) with repeats, at any rate. A peer that does not answer at
/// all is declared lost sooner, by the ARQ ([`super::NodeConfig::link_retries`]).
pub const HARD_LINK_TIMEOUT: Duration = Duration::from_secs(600);

/// "Remote node status" OK in S_HARD_LINK_ESTABLISHED and S_HARD_LINK_INDICATION (0 is
/// ERROR; a hard link that is made "shall always imply a status of OK").
const STATUS_OK: u8 = 1;

/// Reasons of the HARD LINK ESTABLISHMENT REJECTED S_PDU (type 5).
mod rejected {
    pub(super) const REMOTE_NODE_BUSY: u8 = 1;
    pub(super) const HIGHER_PRIORITY_LINK_EXISTING: u8 = 2;
    pub(super) const REMOTE_NODE_NOT_RESPONDING: u8 = 3;
    pub(super) const DESTINATION_SAP_NOT_BOUND: u8 = 4;
}

/// Reasons of the HARD LINK TERMINATE S_PDU (type 6).
mod terminate {
    pub(super) const CLIENT_REQUEST: u8 = 1;
    pub(super) const HIGHER_PRIORITY_LINK_REQUESTED: u8 = 2;
    pub(super) const DESTINATION_SAP_UNBOUND: u8 = 4;
}

/// Where a node's hard link stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HardState {
    /// Caller: REQUEST sent (or waiting for its link); rejected "remote node not responding"
    /// at this time without an answer.
    Requested(Duration),
    /// Called, type 2: S_HARD_LINK_INDICATION given to the client; REJECTED at this time
    /// without its answer.
    Indicated(Duration),
    /// Made: data is restricted to the link ([`Hard::allows`]).
    Up,
    /// The link was up and this node sent TERMINATE; its client hears at this time unless a
    /// CONFIRM came. A new request forgets it (`forget_terminating_link`).
    Terminating(Duration),
}

/// A node's hard link (at most one).
#[derive(Debug, Clone)]
pub(super) struct Hard {
    /// The other node.
    peer: usize,
    link_type: HardLinkType,
    priority: LinkPriority,
    /// The calling client's SAP (on the calling node).
    requesting_sap: SapId,
    /// Type 2: the called client's SAP (0 for the other types).
    called_sap: SapId,
    /// This node asked for the link.
    caller: bool,
    /// The rank the link's precedence is judged with.
    rank: u8,
    /// This node's client of the link: the requester on the calling node, the type 2 client
    /// on the called node (SAP and connection); none for a called type 0 or 1 link.
    client: Option<(SapId, u64)>,
    state: HardState,
}

impl Hard {
    fn deadline(&self) -> Option<Duration> {
        match self.state {
            HardState::Requested(t) | HardState::Indicated(t) | HardState::Terminating(t) => {
                Some(t)
            }
            HardState::Up => None,
        }
    }

    /// Whether a U_PDU of this node for `dest` may go now, from `src_sap` to `dest_sap`.
    pub(super) fn allows(&self, q: &Queued) -> bool {
        if !matches!(self.state, HardState::Up | HardState::Terminating(_)) {
            return true;
        }
        if q.dest != self.peer {
            return false;
        }
        if self.link_type != HardLinkType::FullBandwidth {
            return true;
        }
        let (mine, theirs) = if self.caller {
            (self.requesting_sap, self.called_sap)
        } else {
            (self.called_sap, self.requesting_sap)
        };
        q.src_sap == mine && q.dest_sap == theirs
    }

    /// The link as this node's client sees it (the remote node and the remote client's SAP).
    fn as_primitive(&self, remote: NodeAddress) -> HardLink {
        HardLink {
            link_type: self.link_type,
            priority: self.priority,
            remote_sap: if self.caller {
                self.called_sap
            } else {
                self.requesting_sap
            },
            remote,
        }
    }

    /// Annex A §A.3.2.2.1: whether a request of `rank`, `priority` and `link_type` between
    /// this node and `peer` takes precedence over this link.
    fn outranked_by(&self, rank: u8, priority: u8, link_type: HardLinkType, peer: usize) -> bool {
        if rank != self.rank {
            return rank > self.rank;
        }
        if priority != self.priority.get() {
            return priority > self.priority.get();
        }
        peer == self.peer && link_type.bits() > self.link_type.bits()
    }
}

impl Node {
    /// S_HARD_LINK_ESTABLISH from the client on connection `conn` at `now`: rejected at once
    /// if the remote node is unknown or an existing link takes precedence, else a REQUEST to
    /// the peer (ending a link it outranks). The answer comes as S_HARD_LINK_ESTABLISHED or
    /// S_HARD_LINK_REJECTED.
    pub fn hard_link_establish(&mut self, now: Duration, conn: u64, link: HardLink) {
        self.clock = self.clock.max(now);
        let Some((sap, rank)) = self.binding_of(conn) else {
            tracing::warn!(
                node = self.index,
                conn,
                "S_HARD_LINK_ESTABLISH from a client that is not bound; ignored"
            );
            return;
        };
        let refuse = |reason| Primitive::HardLinkRejected { reason, link };
        let peer = self
            .setup
            .config
            .addresses
            .iter()
            .position(|a| *a == link.remote)
            .filter(|&p| p != self.index);
        let Some(peer) = peer else {
            let p = refuse(HardLinkRejectReason::RemoteNodeNotResponding);
            self.send_to(sap, Some(conn), p);
            return;
        };
        if link.link_type == HardLinkType::Undefined {
            // Link type 3 is not defined: no node could make it.
            self.send_to(
                sap,
                Some(conn),
                refuse(HardLinkRejectReason::RemoteNodeBusy),
            );
            return;
        }
        self.forget_terminating_link();
        if let Some(old) = &self.hard {
            let same_type0 = old.link_type == HardLinkType::Reservation
                && link.link_type == HardLinkType::Reservation
                && old.peer == peer
                && old.priority == link.priority
                && old.rank == rank;
            if same_type0 {
                self.send_to(
                    sap,
                    Some(conn),
                    refuse(HardLinkRejectReason::Type0LinkExists),
                );
                return;
            }
            if !old.outranked_by(rank, link.priority.get(), link.link_type, peer) {
                let p = refuse(HardLinkRejectReason::HigherPriorityLinkExists);
                self.send_to(sap, Some(conn), p);
                return;
            }
            self.preempt_hard_link();
        }
        let called_sap = if link.link_type == HardLinkType::FullBandwidth {
            link.remote_sap
        } else {
            SapId::default()
        };
        self.hard = Some(Hard {
            peer,
            link_type: link.link_type,
            priority: link.priority,
            requesting_sap: sap,
            called_sap,
            caller: true,
            rank,
            client: Some((sap, conn)),
            state: HardState::Requested(now + self.setup.config.hard_link_timeout),
        });
        self.counters.hard_links_requested += 1;
        self.send_hard_spdu(
            peer,
            Spdu::HardLinkRequest {
                link_type: link.link_type.bits(),
                link_priority: link.priority.get(),
                requesting_sap: sap.get(),
                remote_sap: called_sap.get(),
            },
        );
    }

    /// S_HARD_LINK_TERMINATE from the client on `conn` for its link to `remote`: TERMINATE
    /// to the peer (for a request still unanswered, it withdraws the request; for an
    /// indication the client has not answered, it refuses it). Only the client that asked for
    /// the link (or the called type 2 client) may end it; from another client it is ignored.
    pub fn hard_link_terminate(&mut self, now: Duration, conn: u64, remote: NodeAddress) {
        self.clock = self.clock.max(now);
        let peer_address = self.hard.as_ref().map(|h| self.peer_address(h.peer));
        let Some(h) = self.hard.as_mut() else {
            tracing::debug!(
                node = self.index,
                conn,
                "S_HARD_LINK_TERMINATE with no hard link; ignored"
            );
            return;
        };
        if h.client.is_none_or(|(_, c)| c != conn) || peer_address != Some(remote) {
            tracing::warn!(
                node = self.index,
                conn,
                "S_HARD_LINK_TERMINATE from a client not on the link; ignored"
            );
            return;
        }
        match h.state {
            HardState::Indicated(_) | HardState::Requested(_) => {
                // An indication ended before it was accepted is refused; a request ended
                // before its answer is withdrawn (an answer that comes anyway is recognised
                // as old), and the client, who asked for this, hears nothing.
                if let Some(h) = self.hard.take() {
                    self.end_towards_peer(
                        &h,
                        rejected::REMOTE_NODE_BUSY,
                        terminate::CLIENT_REQUEST,
                    );
                }
            }
            HardState::Up => {
                h.state = HardState::Terminating(now + self.setup.config.hard_link_timeout);
                let peer = h.peer;
                let spdu = Spdu::HardLinkTerminate {
                    reason: terminate::CLIENT_REQUEST,
                };
                self.send_hard_spdu(peer, spdu);
            }
            HardState::Terminating(_) => {}
        }
    }

    /// S_HARD_LINK_ACCEPT from the called type 2 client on `conn`: CONFIRM to the caller, and
    /// the link is up.
    pub fn hard_link_accept(&mut self, now: Duration, conn: u64, link: HardLink) {
        self.answer_indication(now, conn, link, true);
    }

    /// S_HARD_LINK_REJECT from the called type 2 client on `conn`: REJECTED ("remote node
    /// busy": Annex A leaves the client's reasons open and maps none onto the S_PDU's) to
    /// the caller.
    pub fn hard_link_reject(&mut self, now: Duration, conn: u64, link: HardLink) {
        self.answer_indication(now, conn, link, false);
    }

    fn answer_indication(&mut self, now: Duration, conn: u64, link: HardLink, accept: bool) {
        self.clock = self.clock.max(now);
        let Some(h) = self.hard.as_mut().filter(|h| {
            matches!(h.state, HardState::Indicated(_)) && h.client.is_some_and(|(_, c)| c == conn)
        }) else {
            tracing::warn!(
                node = self.index,
                conn,
                ?link,
                "answer to no hard-link indication; ignored"
            );
            return;
        };
        let peer = h.peer;
        if accept {
            h.state = HardState::Up;
            self.hard_link_up();
            self.send_hard_spdu(peer, Spdu::HardLinkConfirm);
        } else {
            self.hard = None;
            let spdu = Spdu::HardLinkRejected {
                reason: rejected::REMOTE_NODE_BUSY,
            };
            self.send_hard_spdu(peer, spdu);
        }
    }

    /// The client on `conn` unbound: a hard link it held ends (TERMINATE, or REJECTED for an
    /// indication it had not answered, "destination SAP ID (un)bound").
    pub(super) fn hard_link_client_gone(&mut self, conn: u64) {
        if let Some(h) = self
            .hard
            .take_if(|h| h.client.is_some_and(|(_, c)| c == conn))
        {
            self.end_towards_peer(
                &h,
                rejected::DESTINATION_SAP_NOT_BOUND,
                terminate::DESTINATION_SAP_UNBOUND,
            );
        }
    }

    /// Tells the peer of ended link `h`: REJECTED with `rejected` if this node had not
    /// answered its request yet, else TERMINATE with `terminate` (nothing if this node was
    /// terminating it already).
    fn end_towards_peer(&mut self, h: &Hard, rejected: u8, terminate: u8) {
        let spdu = match h.state {
            HardState::Indicated(_) => Spdu::HardLinkRejected { reason: rejected },
            HardState::Requested(_) | HardState::Up => {
                Spdu::HardLinkTerminate { reason: terminate }
            }
            HardState::Terminating(_) => return,
        };
        self.send_hard_spdu(h.peer, spdu);
    }

    /// Tells this node's client of ended link `h`: S_HARD_LINK_REJECTED with `rejected` if it
    /// was still asking for it, else S_HARD_LINK_TERMINATED with `terminated` (the link
    /// counts as ended).
    fn tell_ended(
        &mut self,
        h: &Hard,
        rejected: HardLinkRejectReason,
        terminated: HardLinkTerminateReason,
    ) {
        if matches!(h.state, HardState::Requested(_)) {
            self.tell_hard_client(h, |link| Primitive::HardLinkRejected {
                reason: rejected,
                link,
            });
        } else {
            self.counters.hard_links_ended += 1;
            self.tell_hard_client(h, |link| Primitive::HardLinkTerminated {
                reason: terminated,
                link,
            });
        }
    }

    /// A hard-link S_PDU (types 3-7) from `sender`.
    ///
    /// The peer's hard-link S_PDUs come in the order it sent them (one expedited ARQ
    /// C_PDU at a time), and it answers each of this node's before sending anything newer.
    /// So until the peer has confirmed every TERMINATE this node sent it, its CONFIRMs and
    /// REJECTEDs answer requests this node has since withdrawn (it withdraws a request with a
    /// TERMINATE before asking again); and a TERMINATE that comes before its answer to this
    /// node's pending REQUEST is about an earlier link. Neither touches the link this node
    /// has now. (A TERMINATE after the peer's own REQUEST or CONFIRM is about that link.)
    pub(super) fn on_hard_spdu(&mut self, sender: usize, spdu: Spdu) {
        let remote = self.peer_address(sender);
        let from_peer = |h: &Hard| h.peer == sender;
        let stale = self
            .links
            .get(&sender)
            .is_some_and(|l| l.hard_tc_awaited > 0);
        if stale && matches!(spdu, Spdu::HardLinkConfirm | Spdu::HardLinkRejected { .. }) {
            tracing::debug!(
                node = self.index,
                sender,
                ?spdu,
                "answer to a withdrawn hard-link request"
            );
            return;
        }
        match spdu {
            Spdu::HardLinkRequest {
                link_type,
                link_priority,
                requesting_sap,
                remote_sap,
            } => self.on_hard_request(
                sender,
                HardLinkType::from_bits(link_type),
                LinkPriority::new(link_priority & 0x03).unwrap_or_default(),
                SapId::new(requesting_sap & 0x0F).unwrap_or_default(),
                SapId::new(remote_sap & 0x0F).unwrap_or_default(),
            ),
            Spdu::HardLinkConfirm => {
                let Some(h) = self.hard.as_mut().filter(|h| {
                    from_peer(h) && h.caller && matches!(h.state, HardState::Requested(_))
                }) else {
                    tracing::debug!(
                        node = self.index,
                        sender,
                        "HARD LINK CONFIRM for no request of ours"
                    );
                    return;
                };
                h.state = HardState::Up;
                let (client, link) = (h.client, h.as_primitive(remote));
                self.hard_link_up();
                if let Some((sap, conn)) = client {
                    let p = Primitive::HardLinkEstablished {
                        remote_status: STATUS_OK,
                        link,
                    };
                    self.send_to(sap, Some(conn), p);
                }
            }
            Spdu::HardLinkRejected { reason } => {
                let Some(h) = self.hard.take_if(|h| {
                    from_peer(h) && h.caller && matches!(h.state, HardState::Requested(_))
                }) else {
                    return;
                };
                self.tell_hard_client(&h, |link| Primitive::HardLinkRejected {
                    reason: HardLinkRejectReason::from(reason),
                    link,
                });
            }
            Spdu::HardLinkTerminate { reason } => {
                // Confirmed at once, whatever this node knew of the link.
                self.send_hard_spdu(sender, Spdu::HardLinkTerminateConfirm);
                let Some(h) = self.hard.take_if(|h| {
                    from_peer(h) && !(h.caller && matches!(h.state, HardState::Requested(_)))
                }) else {
                    return;
                };
                if matches!(h.state, HardState::Up | HardState::Terminating(_)) {
                    self.counters.hard_links_ended += 1;
                }
                if matches!(h.state, HardState::Terminating(_)) {
                    // Both ended it at once: this node's client asked for that.
                    return;
                }
                let reason = match reason {
                    terminate::HIGHER_PRIORITY_LINK_REQUESTED => {
                        HardLinkTerminateReason::HigherPriorityLinkRequested
                    }
                    terminate::DESTINATION_SAP_UNBOUND => {
                        HardLinkTerminateReason::DestinationSapUnbound
                    }
                    _ => HardLinkTerminateReason::TerminatedByRemote,
                };
                self.tell_hard_client(&h, |link| Primitive::HardLinkTerminated { reason, link });
            }
            Spdu::HardLinkTerminateConfirm => {
                let awaited = self.links.get_mut(&sender).map_or(0, |l| {
                    l.hard_tc_awaited = l.hard_tc_awaited.saturating_sub(1);
                    l.hard_tc_awaited
                });
                // The confirm of this node's last TERMINATE ends the link it is ending.
                if awaited == 0
                    && self
                        .hard
                        .take_if(|h| from_peer(h) && matches!(h.state, HardState::Terminating(_)))
                        .is_some()
                {
                    self.counters.hard_links_ended += 1;
                }
            }
            other => tracing::debug!(?other, "not a hard-link S_PDU"),
        }
    }

    /// A HARD LINK ESTABLISHMENT REQUEST from `sender` (see the module docs).
    fn on_hard_request(
        &mut self,
        sender: usize,
        link_type: HardLinkType,
        priority: LinkPriority,
        requesting_sap: SapId,
        called_sap: SapId,
    ) {
        let refuse = |node: &mut Node, reason| {
            node.send_hard_spdu(sender, Spdu::HardLinkRejected { reason });
        };
        if link_type == HardLinkType::Undefined {
            refuse(self, rejected::REMOTE_NODE_BUSY);
            return;
        }
        // Type 2 is judged with the called client's rank, the others with the default rank
        // of the called SAP (0 here).
        let client = if link_type == HardLinkType::FullBandwidth {
            let Some(b) = self.bindings.get(&called_sap.get()) else {
                refuse(self, rejected::DESTINATION_SAP_NOT_BOUND);
                return;
            };
            Some((called_sap, b.conn, b.rank))
        } else {
            None
        };
        let rank = client.map_or(0, |(_, _, r)| r);
        self.forget_terminating_link();
        if let Some(old) = &self.hard {
            if old.peer == sender && !old.caller {
                // The peer holds one hard link at a time: a new request from the caller of
                // this node's link means it has given that one up.
                let old = self.hard.take();
                if let Some(old) = old {
                    self.tell_hard_client(&old, |link| Primitive::HardLinkTerminated {
                        reason: HardLinkTerminateReason::TerminatedByRemote,
                        link,
                    });
                }
            } else if !old.outranked_by(rank, priority.get(), link_type, sender) {
                let reason = if rank == old.rank && priority == old.priority {
                    rejected::REMOTE_NODE_BUSY
                } else {
                    rejected::HIGHER_PRIORITY_LINK_EXISTING
                };
                refuse(self, reason);
                return;
            } else {
                self.preempt_hard_link();
            }
        }
        let mut h = Hard {
            peer: sender,
            link_type,
            priority,
            requesting_sap,
            called_sap: if link_type == HardLinkType::FullBandwidth {
                called_sap
            } else {
                SapId::default()
            },
            caller: false,
            rank,
            client: client.map(|(sap, conn, _)| (sap, conn)),
            state: HardState::Up,
        };
        if client.is_some() {
            h.state = HardState::Indicated(self.clock + self.setup.config.hard_link_timeout);
            let link = h.as_primitive(self.peer_address(sender));
            self.hard = Some(h);
            if let Some((sap, conn, _)) = client {
                let p = Primitive::HardLinkIndication {
                    remote_status: STATUS_OK,
                    link,
                };
                self.send_to(sap, Some(conn), p);
            }
        } else {
            self.hard = Some(h);
            self.hard_link_up();
            self.send_hard_spdu(sender, Spdu::HardLinkConfirm);
        }
    }

    /// Ends this node's hard link for one that outranks it: TERMINATE (or REJECTED, for a
    /// request it had not answered) "higher priority link requested" to its peer, and its
    /// client told.
    fn preempt_hard_link(&mut self) {
        let Some(h) = self.hard.take() else {
            return;
        };
        if matches!(h.state, HardState::Terminating(_)) {
            return;
        }
        self.end_towards_peer(
            &h,
            rejected::HIGHER_PRIORITY_LINK_EXISTING,
            terminate::HIGHER_PRIORITY_LINK_REQUESTED,
        );
        self.tell_ended(
            &h,
            HardLinkRejectReason::HigherPriorityLinkExists,
            HardLinkTerminateReason::HigherPriorityLinkRequested,
        );
    }

    /// The hard link's waits that ran out by `now` (see [`HARD_LINK_TIMEOUT`]).
    pub(super) fn expire_hard_link(&mut self, now: Duration) {
        let Some(h) = self
            .hard
            .take_if(|h| h.deadline().is_some_and(|d| d <= now))
        else {
            return;
        };
        match h.state {
            HardState::Requested(_) => {
                // Withdrawn at the peer too, so that a late CONFIRM leaves no link there.
                let spdu = Spdu::HardLinkTerminate {
                    reason: terminate::CLIENT_REQUEST,
                };
                self.send_hard_spdu(h.peer, spdu);
                self.tell_hard_client(&h, |link| Primitive::HardLinkRejected {
                    reason: HardLinkRejectReason::RemoteNodeNotResponding,
                    link,
                });
            }
            HardState::Indicated(_) => {
                let spdu = Spdu::HardLinkRejected {
                    reason: rejected::REMOTE_NODE_NOT_RESPONDING,
                };
                self.send_hard_spdu(h.peer, spdu);
            }
            HardState::Terminating(_) => {
                self.counters.hard_links_ended += 1;
                self.tell_hard_client(&h, |link| Primitive::HardLinkTerminated {
                    reason: HardLinkTerminateReason::RemoteNodeNotResponding,
                    link,
                });
            }
            HardState::Up => {}
        }
    }

    /// A link this node is terminating stands in the way of no new one: it is forgotten (its
    /// peer's late S_PDUs about it are recognised as old, see [`Node::on_hard_spdu`]).
    fn forget_terminating_link(&mut self) {
        if self
            .hard
            .take_if(|h| matches!(h.state, HardState::Terminating(_)))
            .is_some()
        {
            self.counters.hard_links_ended += 1;
        }
    }

    /// When the hard link's current wait runs out.
    pub(super) fn hard_link_deadline(&self) -> Option<Duration> {
        self.hard.as_ref().and_then(Hard::deadline)
    }

    /// The link to `peer` was declared lost: a hard link to it ends ("physical link broken"),
    /// a request to it is rejected ("remote node not responding").
    pub(super) fn hard_link_lost(&mut self, peer: usize) {
        if let Some(h) = self.hard.take_if(|h| h.peer == peer) {
            self.tell_ended(
                &h,
                HardLinkRejectReason::RemoteNodeNotResponding,
                HardLinkTerminateReason::PhysicalLinkBroken,
            );
        }
    }

    /// Sends `make(link)` to the hard link's client on this node, if it has one.
    fn tell_hard_client(&mut self, h: &Hard, make: impl FnOnce(HardLink) -> Primitive) {
        if let Some((sap, conn)) = h.client {
            let p = make(h.as_primitive(self.peer_address(h.peer)));
            self.send_to(sap, Some(conn), p);
        }
    }

    /// Queues a hard-link S_PDU for `peer` on the expedited ARQ (ahead of expedited U_PDUs).
    fn send_hard_spdu(&mut self, peer: usize, spdu: Spdu) {
        let node = self.index;
        let cpdu = spdu.encode().ok().and_then(|s| Cpdu::Data(s).encode().ok());
        let terminate = matches!(spdu, Spdu::HardLinkTerminate { .. });
        match (cpdu, self.links.get_mut(&peer)) {
            (Some(c), Some(link)) => {
                link.exp_control.push_back(c);
                link.hard_tc_awaited += u32::from(terminate);
            }
            (c, _) => tracing::warn!(
                node,
                peer,
                encoded = c.is_some(),
                "hard-link S_PDU not sent"
            ),
        }
    }

    /// The SAP and rank of the client on `conn`.
    fn binding_of(&self, conn: u64) -> Option<(SapId, u8)> {
        self.bindings
            .iter()
            .find(|(_, b)| b.conn == conn)
            .map(|(&sap, b)| (SapId::new(sap).unwrap_or_default(), b.rank))
    }

    /// The peer of this node's own hard-link request still waiting for its answer.
    #[cfg(test)]
    pub(super) fn hard_request_pending(&self) -> Option<usize> {
        self.hard
            .as_ref()
            .filter(|h| h.caller && matches!(h.state, HardState::Requested(_)))
            .map(|h| h.peer)
    }

    /// Whether the hard link lets queued U_PDU `q` go now.
    pub(super) fn hard_allows(&self, q: &Queued) -> bool {
        self.hard.as_ref().is_none_or(|h| h.allows(q))
    }

    /// CAS-1: the PHYSICAL LINK REJECTED reason for a nonexclusive request from `sender`
    /// while this node has a hard link to another node: 3 "supporting exclusive link" once
    /// it is up, 2 "higher-priority link request pending" while it is being set up.
    pub(super) fn hard_link_refusal(&self, sender: usize) -> Option<u8> {
        let h = self.hard.as_ref().filter(|h| h.peer != sender)?;
        Some(match h.state {
            HardState::Up | HardState::Terminating(_) => reject_reason::SUPPORTING_EXCLUSIVE_LINK,
            HardState::Requested(_) | HardState::Indicated(_) => {
                reject_reason::HIGHER_PRIORITY_REQUEST_PENDING
            }
        })
    }

    /// CAS-1: whether the hard link keeps this node off `peer` altogether (it is up, to
    /// another node): no link to it is asked for, and its ARQ data waits.
    pub(super) fn hard_link_holds(&self, peer: usize) -> bool {
        self.setup.config.cas1
            && self.hard.as_ref().is_some_and(|h| {
                h.peer != peer && matches!(h.state, HardState::Up | HardState::Terminating(_))
            })
    }

    /// The peer of this node's hard link in any state, if any.
    pub(super) fn hard_link_any_peer(&self) -> Option<usize> {
        self.hard.as_ref().map(|h| h.peer)
    }

    /// The peer of this node's own hard-link request or link, if any (its physical link is
    /// asked for as exclusive).
    pub(super) fn hard_link_peer(&self) -> Option<usize> {
        self.hard.as_ref().filter(|h| h.caller).map(|h| h.peer)
    }

    /// The hard link is up: with CAS-1, this node breaks its physical links to every other
    /// node (Annex B: the caller of an exclusive link "shall break any existing
    /// Nonexclusive Physical Links"; the called node does too, so that neither carries
    /// other nodes' ARQ traffic during the hard link). Their ARQ state stays, and the links
    /// are made again once the hard link ends.
    fn hard_link_up(&mut self) {
        self.counters.hard_links_made += 1;
        let Some(peer) = self.hard.as_ref().map(|h| h.peer) else {
            return;
        };
        if !self.setup.config.cas1 {
            return;
        }
        for (&p, l) in self.links.iter_mut() {
            if p != peer && l.linked {
                l.linked = false;
                l.caller = false;
                l.break_due = false;
                l.break_out = true;
            }
        }
    }
}
