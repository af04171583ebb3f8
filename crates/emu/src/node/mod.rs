//! One STANAG 5066 node as a sans-IO state machine: its clients' queues, an Annex C ARQ link
//! (normal and expedited) per peer, non-ARQ data to nodes and groups, data-rate change and
//! RESET/WIN-RESYNC, and its counters. Bytes and time in, D_PDUs and SIS events out: no tokio,
//! no clocks, no sockets, no locks, no randomness.
//!
//! It sits between the SIS server above it ([`crate::sis_server`], whose clients' requests it
//! takes) and the modem and channel below it, which the scheduler in [`crate::net`] drives: the
//! scheduler is to a [`Node`] what quinn is to quinn-proto. It owns time, the shared air
//! (who keys up when, collisions, carrier-sense back-off), each receiver's channel and the
//! seeded RNG that decides every block's fate, the trace and the pcap; the node decides what
//! to send and what to do with what arrived. How each mechanism behaves on the air (turn
//! taking, the response timeout, DATA-ACK, non-ARQ reception windows, expedited
//! stop-and-wait, DRC, resets) is described in [`crate::net`], where the pieces meet.
//!
//! The calls, in the order a driver makes them:
//! - [`Node::bind`], [`Node::unbind`], [`Node::submit`]: a client's SIS primitives (already
//!   decoded, and checked against the MTU by the SIS server).
//! - [`Node::handle_timeout`] at "now": drops U_PDUs whose TTL ran out, queued or in the
//!   ARQ (DROP C_PDU for what the peer has not acknowledged), and non-ARQ C_PDUs whose
//!   reception window closed; [`Node::poll_timeout`] says when a TTL runs out next.
//! - [`Node::has_work`], then [`Node::poll_transmit`] when the driver lets the node key up:
//!   the D_PDUs of one transmission (at most one maximum transmission's bytes at the rate the
//!   node picks), planned on the modem and encoded. A link whose ARQ data went unanswered
//!   [`NodeConfig::link_retries`] times too often is declared lost there first.
//! - [`Node::transmission_collided`] if that transmission was lost on the air for everyone.
//! - [`Node::receive_dpdus`] with the D_PDUs a transmission from another node delivered to
//!   this one, as each is decoded (bytes, each with the time its first interleaver block
//!   started), then [`Node::end_of_transmission`] when it ends; [`Node::handle_heard`] does
//!   both for a whole transmission at once.
//! - [`Node::poll_event`] after any of these: the SIS primitives for its clients
//!   (indications, confirms, rejections, flow control), each addressed to a connection; and
//!   [`Node::poll_link_event`]: links declared lost, or heard again.
//!
//! Built: TTL in the queue and in the ARQ (DROP C_PDU, [ED3-C] §C.3.3) and beyond the
//! sender: a U_PDU with a TTL travels with its time to die (VALID TTD in the DATA S_PDU,
//! [ED3-A] §A.3.1.1), and the receiving node discards one that arrives whole after it, as
//! one already on the air when the TTL ran out does (nodes read the emulator's clock as a
//! shared GMT); link loss after
//! unanswered retries (rejections with "destination node not responding", a RESET/WIN-RESYNC
//! at the next contact), CAS-1 link making when [`NodeConfig::cas1`] is set (PHYSICAL LINK
//! REQUEST and ACCEPTED before the first ARQ data to a peer, and again after the link was
//! declared lost), CAS-1 link breaking when [`NodeConfig::link_idle`] is set too (the caller
//! sends PHYSICAL LINK BREAK once the link has idled that long; the peer confirms), a maximum
//! of links per node ([`NodeConfig::max_links`]: PHYSICAL LINK REJECTED beyond it, asked
//! again later; an idle link broken for a waiting peer), the called node's abort of a new
//! link that carries no DATA in time ([`NodeConfig::link_first_data`]) and the WARNING ("not
//! connected") for ARQ data on a link this node has not made; hard-link sessions (Annex A,
//! `node::hard`: establishment, precedence, the data they let through, termination); a
//! restart ([`Node::restart`]: all volatile state lost, then a FULL RESET CMD to each peer
//! before the first ARQ exchange with it, obeyed by the peer). Not built: a
//! BREAK on link loss (declaring a link lost is this node's verdict only, and no BREAK is
//! needed to make another), REJECTED for a broadcast-only node (this node is none), a DROP
//! flag for expedited data (Annex C has none: an expedited U_PDU whose TTL ran out is just
//! abandoned). Annex C's synchronisation tests (§C.6.3.2): at the destination node, (3)-(5) on
//! every DATA frame, a frame that fails them bringing a RESET TX WIN RQST (`receive.rs`); at
//! the originating node, ACKs that keep falling outside the transmit window ((6)) start this
//! node's own RESET RX WIN CMND.
//!
//! Non-ARQ delivery with errors (Annex C, C.4.2): a NON-ARQ DATA D_PDU whose header decoded
//! but whose segment failed its CRC is kept as received until an intact copy replaces it; a
//! C_PDU for a client bound with transmission mode 3 that is damaged or incomplete when its
//! reception window closes is delivered then, its errored and missing blocks listed in the
//! indication (missing bytes zero), if its C_PDU and S_PDU headers came through intact.
//! Annex A has the sending client choose the mode, but nothing on the air carries that
//! choice, so the receiving client's own bind decides here.
//!
//! Non-ARQ order (Annex C, C.4.2(15)): a client's IN-ORDER delivery mode sets the D_PDUs'
//! DELIVER IN ORDER flag, and the receiving node then holds a complete C_PDU back while an
//! earlier one from the same node is still being received (or held), until that one is
//! delivered or its reception window closes. C_PDU IDs count per node, not per destination,
//! so a gap in the IDs a node hears says nothing, and only C_PDUs it has begun to receive hold
//! others back.
//!
//! ARQ order (Annex C, C.3.3 (7) and (8)): the client's delivery mode sets the DATA D_PDUs'
//! DELIVER IN ORDER flag too; the receiving node delivers an AS-THEY-ARRIVE C_PDU as soon as
//! all of its frames are in, ahead of earlier C_PDUs still missing a frame, and an IN-ORDER
//! one only after every C_PDU before it ([`crate::arq`]).
//!
//! Nodes and groups are named by their index in the subnetwork's address list
//! ([`NodeConfig::addresses`]); group `g` of [`NodeConfig::groups`] is destination
//! `addresses.len() + g`. Without [`NodeConfig::cas1`] the Annex B link to every other node
//! is assumed up.

mod hard;
mod receive;
mod transmit;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use skywave_sis::{
    Block, NodeAddress, Primitive, Priority, SapId, TxMode, UnidataConfirm, UnidataIndication,
    UnidataRejectReason, UnidataRejected, UnidataRequest,
};
use thiserror::Error;

use crate::arq::{ArqError, ArqReceiver, ArqSender};
use crate::dpdu::{Address, Body, DataHeader, Dpdu, NonArqHeader};
use crate::modem::{DataRate, ModemConfig, ModemError};

pub use hard::HARD_LINK_TIMEOUT;
pub use receive::Heard;
pub use transmit::{NodeTx, SentDpdu};

/// Bytes a U_PDU gains on the way into the ARQ: 1 (DATA C_PDU) + 3 (DATA S_PDU without TTD).
pub const UPDU_OVERHEAD: usize = 4;

/// Bytes the DATA S_PDU gains when it carries its U_PDU's time to die (VALID TTD: 16 more bits
/// of GMT), as it does for every U_PDU that has one (a TTL, its client's or the default).
pub const TTD_BYTES: usize = 2;

/// The longest C_PDU a U_PDU of at most `mtu` bytes makes: its C_PDU and S_PDU headers and
/// a TTD.
pub(crate) fn largest_cpdu(mtu: u16) -> usize {
    usize::from(mtu) + UPDU_OVERHEAD + TTD_BYTES
}

/// Longest transmission STANAG 5066 can announce (EOT 255 × 0.5 s).
pub const MAX_TRANSMISSION: Duration = Duration::from_millis(127_500);

/// ACKs outside the transmit window, in a row, after which a sender resets the window.
pub const STALE_ACKS_RESET: u8 = 2;

/// Data transmissions without any ACK after which an adaptive sender lowers its rate.
pub const UNANSWERED_STEP_DOWN: u8 = 3;

/// Default of [`NodeConfig::link_retries`]: a node that has sent ARQ data to a peer and then
/// ten more times (eleven transmissions in a row) without decoding anything from it declares
/// the link lost.
///
/// Where the count comes from: STANAG 5066 makes it a "configurable parameter" everywhere
/// (Annex B repeats PHYSICAL LINK REQUEST and BREAK "a maximum number of times (left as a
/// configuration parameter)" before declaring the link failed or broken) and states one
/// default, 3, for the Annex C data-rate-change procedure, whose management message is
/// retried 3 times before D_CONNECTION_LOST (`reference/s5066-sis.md` §4.4). That message is
/// one short D_PDU repeated to fill the interleaver; ARQ data is not, and with 3 the node
/// gave up on links that were still delivering (on AWGN at 3 dB and 1200 bit/s, where most
/// transmissions lose every 1023-byte segment, HMTP delivered 1 run of 5 instead of 5 of 5).
/// 10 is the retry limit of JNOS's TCP (`tcp retries`, `DEF_RETRIES` 10 in `iftcp.h`,
/// `reference/hf-emulator.md` §5), the HF stack the benchmark's `jnos-1998` profile models:
/// its connection resets on the timeout after its tenth consecutive unanswered retry, so the
/// 5066 node and that TCP give up after the same number of silent tries.
pub const DEFAULT_LINK_RETRIES: u8 = 10;

/// Data-rate change policy (the modem rate of each link, per direction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Drc {
    /// Every link stays at the configured modem rate.
    #[default]
    Fixed,
    /// Start at the configured rate; the receiving node asks the sender (DRC_REQUEST EOW,
    /// "Tx = Rx", answered by a DRC_RESPONSE EOW "accept" as the sender switches) for one rate
    /// lower after a transmission in which a quarter or more of the data D_PDUs addressed to
    /// it were lost, and one rate higher after two clean transmissions with data in a row. A
    /// sender that gets no ACK at all for [`UNANSWERED_STEP_DOWN`] data transmissions steps
    /// down on its own, and a node answers at the rate it last decoded from its peer (Tx = Rx
    /// per link).
    Adaptive,
    /// Every link starts, and stays, at [`crate::net::matched_rate`]: the rate the channel's
    /// mean SNR supports.
    Matched,
}

/// A group address of the subnetwork and the nodes that listen on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// The group address (`NodeAddress::group`).
    pub address: NodeAddress,
    /// Member nodes (indices into the subnetwork's addresses).
    pub members: Vec<usize>,
}

/// The rates a link may use with this modem's interleaver, slowest first.
pub fn rate_ladder(modem: &ModemConfig) -> Vec<DataRate> {
    DataRate::ALL
        .into_iter()
        .filter(|&rate| {
            let m = ModemConfig {
                rate,
                ..modem.clone()
            };
            m.block_duration().is_ok() && m.block_bits().is_ok() && m.preamble().is_ok()
        })
        .collect()
}

/// Per-node counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeCounters {
    /// Transmissions keyed.
    pub transmissions: u64,
    /// Payload bytes (D_PDU bytes) put on the air.
    pub bytes_on_air: u64,
    /// D_PDUs sent (all types).
    pub dpdus_sent: u64,
    /// DATA D_PDUs sent again.
    pub retransmissions: u64,
    /// Own transmissions lost in a collision.
    pub collisions: u64,
    /// D_PDUs sent by this node that their addressee did not receive. Only the air knows
    /// this: a [`Node`] leaves it at 0 and its driver fills it in.
    pub lost_dpdus: u64,
    /// U_PDUs delivered to clients of this node.
    pub delivered: u64,
    /// U_PDUs dropped because their TTL expired before they entered the ARQ.
    pub expired: u64,
    /// U_PDUs whose TTL expired once they were in the ARQ (normal or expedited): never sent
    /// again; the frames of theirs the peer had not acknowledged went with DROP C_PDU.
    pub expired_in_arq: u64,
    /// U_PDUs whose client was told "destination node not responding" because no node
    /// delivery confirmation came within [`NodeConfig::confirm_wait`] (the U_PDU stayed).
    pub confirms_overdue: u64,
    /// U_PDUs this node received whole after the time to die their S_PDU carried, and
    /// discarded instead of delivering (Annex A, A.3.1.1: a U_PDU past its TTD "must be
    /// discarded if it has not yet been delivered to the client").
    pub expired_on_arrival: u64,
    /// C_PDUs this node's ARQ receivers discarded because their sender set DROP C_PDU.
    pub cpdus_dropped: u64,
    /// Times this node declared its link to a peer lost ([`NodeConfig::link_retries`]).
    pub links_lost: u64,
    /// ARQ U_PDUs (in the ARQ or queued for it) discarded when their link was declared lost;
    /// those that asked for a confirm were rejected.
    pub link_lost_updus: u64,
    /// U_PDUs dropped by the duplicate-datagram filter ([`crate::net::SubnetConfig::dup_filter`]).
    pub duplicates_dropped: u64,
    /// U_PDUs this node sent in non-ARQ mode (each counted once, whatever its copies).
    pub non_arq_sent: u64,
    /// Non-ARQ U_PDUs this node received complete and delivered (also in `delivered`).
    pub non_arq_delivered: u64,
    /// Non-ARQ U_PDUs this node began to receive but discarded incomplete (or damaged) when
    /// their reception window closed.
    pub non_arq_incomplete: u64,
    /// Non-ARQ U_PDUs delivered with errored or missing blocks, to a client bound to take
    /// them (also in `delivered`, not in `non_arq_delivered` or `non_arq_incomplete`).
    pub non_arq_with_errors: u64,
    /// Changes of this node's own transmit rate to a peer (adaptive or on a DRC request).
    pub rate_changes: u64,
    /// DATA-ACK D_PDUs (type 2) sent: data frames carrying an acknowledgement.
    pub data_acks: u64,
    /// RESET/WIN-RESYNC exchanges this node started: its ACKs for a peer's window kept
    /// falling outside what it had sent, or it had data for a peer again after it declared
    /// the link to it lost.
    pub resets: u64,
    /// U_PDUs this node had on the air when it reset its transmit window: their delivery is
    /// unknown, so they were rejected to their clients instead of being sent again.
    pub reset_lost: u64,
    /// RESET TX WIN RQSTs this node started ([ED3-C] §C.3.6 (8)): a DATA frame from a peer
    /// failed the destination synchronisation tests of §C.6.3.2
    /// ([`crate::arq::ArqReceiver::in_sync`]). The peer's regular data was then discarded
    /// unacknowledged until it realigned the windows (RESET RX WIN CMND or FULL RESET CMD).
    pub tx_win_requests: u64,
    /// PHYSICAL LINK REQUESTs this node sent (CAS-1, [`NodeConfig::cas1`]), repeats
    /// included.
    pub link_requests: u64,
    /// Physical links this node made (CAS-1): its request accepted, or a peer's accepted.
    pub links_made: u64,
    /// Physical links broken (CAS-1, [`NodeConfig::link_idle`]): by this node (its BREAK
    /// confirmed, or answered by a new request) or by the peer's BREAK. A BREAK unanswered
    /// [`NodeConfig::link_retries`] times counts in `links_lost` instead.
    pub links_broken: u64,
    /// PHYSICAL LINK REJECTED this node sent: a peer asked for a link while this node had
    /// [`NodeConfig::max_links`] already.
    pub link_requests_refused: u64,
    /// PHYSICAL LINK REJECTED this node received for its own requests (it asks again later,
    /// see [`NodeConfig::max_links`]).
    pub link_requests_rejected: u64,
    /// Links this node was called on and aborted because no DATA came on them in time
    /// ([`NodeConfig::link_first_data`]).
    pub links_aborted: u64,
    /// WARNINGs ("connection-related D_PDU while not connected") this node sent for ARQ data
    /// from a peer it had no physical link to (CAS-1); the data was discarded, and the peer
    /// makes the link and sends it again.
    pub not_linked_warnings: u64,
    /// Hard links this node's clients asked for (S_HARD_LINK_ESTABLISH that passed the local
    /// checks and went to the peer as a REQUEST).
    pub hard_links_requested: u64,
    /// Hard links made (the caller's confirmed, or the called node's confirm sent).
    pub hard_links_made: u64,
    /// Hard links ended: terminated by either node, pre-empted, or lost with their link.
    pub hard_links_ended: u64,
    /// Of `resets`, those that were FULL RESET CMDs: this node had restarted ([`Node::restart`]).
    pub full_resets: u64,
    /// FULL RESET CMDs from peers that reset this node's ARQ machines for them (a copy of one
    /// already obeyed, its RESET ACK lost, is obeyed again and counts again).
    pub full_resets_obeyed: u64,
    /// Times this node restarted ([`Node::restart`]).
    pub restarts: u64,
}

/// What every node of a subnetwork shares: the subnetwork's members and the link settings.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfig {
    /// Node addresses, one per node (index = node number).
    pub addresses: Vec<NodeAddress>,
    /// Group addresses and their member nodes.
    pub groups: Vec<Group>,
    /// Modem used by every node (its rate is the one links start at, unless `start_rate`).
    pub modem: ModemConfig,
    /// ARQ window, frames (1–128).
    pub window: u8,
    /// D_PDU segment size, bytes (1–1023).
    pub segment_size: usize,
    /// Longest transmission (at most [`MAX_TRANSMISSION`]).
    pub max_transmission: Duration,
    /// MTU offered to SIS clients.
    pub mtu: u16,
    /// U_PDUs a client may have queued or unacknowledged before it gets S_DATA_FLOW_OFF (ON
    /// again at half).
    pub flow_limit: usize,
    /// How long a sender waits, after the peer could have answered, before retransmitting
    /// (raised by [`NodeSetup::new`] to the slowest rate DRC may use).
    pub response_timeout: Duration,
    /// Data-rate change policy.
    pub drc: Drc,
    /// Piggy-back acknowledgements on data (DATA-ACK D_PDUs).
    pub data_ack: bool,
    /// The rate every link starts at, if the maximum transmission holds a segment at it (the
    /// driver passes [`crate::net::matched_rate`] for [`Drc::Matched`]); else the modem's.
    pub start_rate: Option<DataRate>,
    /// Link loss: after a transmission carrying ARQ data (or a RESET command) to a peer, this
    /// many more in a row, each without the node decoding anything from that peer in between,
    /// make the node declare the link lost when it would send the next one (see
    /// [`Node::poll_transmit`]); `None`: never (the ARQ retries for ever). Default
    /// [`DEFAULT_LINK_RETRIES`].
    pub link_retries: Option<u8>,
    /// Annex B CAS-1 linking: before its first ARQ data to a peer (and again after declaring
    /// the link lost) a node makes a physical link, a PHYSICAL LINK REQUEST answered by
    /// PHYSICAL LINK ACCEPTED, each a C_PDU in an EXPEDITED NON-ARQ DATA D_PDU (type 8).
    /// The request is resent in every transmission until the answer comes, and counts
    /// towards [`NodeConfig::link_retries`] like data. `false`: the link to every node is
    /// taken as made, as when ALE or an operator makes it ("the CAS-1 linking protocol may be
    /// omitted" then, [ED3-B]).
    pub cas1: bool,
    /// CAS-1 link breaking, with [`NodeConfig::cas1`]: the node whose request made a link
    /// (the caller) breaks it once it has carried nothing either way for this long, with
    /// nothing queued, unacknowledged or owed on it (PHYSICAL LINK BREAK, "no more data",
    /// answered by BREAK CONFIRM). Annex A has the SIS that set up a soft-link session end it
    /// "after a configurable and implementation-dependent time-out period" once all its data
    /// is sent ("the time out period may be zero"). Only the caller times out: with a timer
    /// at both ends, both would find the link idle at the same moment and key up their BREAKs
    /// together. The called node's own abort of a new link that never carries DATA is
    /// another timer ([`NodeConfig::link_first_data`]). The ARQ state is
    /// kept (both ends agree on it once everything is acknowledged), so the next data only
    /// makes the link again. `None`: a made link stays until it is declared lost.
    pub link_idle: Option<Duration>,
    /// CAS-1: the most physical links a node holds at once (Annex B: a request for a
    /// nonexclusive link is accepted "as long as the resulting total number of Nonexclusive
    /// Physical Links does not exceed the maximum number ... allowed by the current subnetwork
    /// configuration"). A node that has made that many answers a new peer's request with
    /// PHYSICAL LINK REJECTED (reason 0, "always a valid reason": Annex B lists none for a
    /// full node). Its own requests awaiting an answer count when it asks for a link (it never
    /// asks for more than it may hold) but not when it is asked (see `on_link_request`). A
    /// node at the maximum breaks any of its links, called ones too, that has idled for
    /// [`NodeConfig::link_idle`] while a peer waits for a slot (peers in index order). A
    /// rejected caller keeps its data (Annex B only has the attempt "Failed"; what next is
    /// the node's choice) and asks again once the peer could have broken an idle link:
    /// [`NodeConfig::link_idle`] plus one response timeout after the rejection. Needs
    /// [`NodeConfig::cas1`] and [`NodeConfig::link_idle`] (without breaking idle links a full
    /// node could never serve another peer). `None`: no limit.
    pub max_links: Option<usize>,
    /// CAS-1: how long a node that was called waits for the first DATA on a new link before
    /// it aborts the link and declares it inactive (Annex B: "the maximum period of time to
    /// wait for the first DATA (TYPE 0) C_PDU before aborting a newly activated Physical
    /// Link shall be a configurable parameter"), counted from the end of the transmission that
    /// carried the ACCEPTED (again from each repeat) and never shorter than one response
    /// timeout, the time the caller needs to answer at all; data of this node's own on the
    /// link counts as use too. Nothing is sent: a caller that sends data later gets a WARNING
    /// ("connection-related D_PDU while not connected", Annex C), which any node with CAS-1
    /// answers ARQ data on an unmade link with, and makes the link again ([ED3-B] §B.3: "the
    /// CAS 1 Linking Protocol shall be followed and the data resent"). Needs
    /// [`NodeConfig::cas1`]. `None`: a new link stays until it is broken or lost.
    pub link_first_data: Option<Duration>,
    /// Hard links (`node::hard`): how long a node waits for the peer's answer to its
    /// request, for its type 2 client's answer to an indication, and for the peer's
    /// TERMINATE CONFIRM (Annex A: "a configurable time-out period" for each, no value
    /// given). Default [`HARD_LINK_TIMEOUT`]; must be above zero.
    pub hard_link_timeout: Duration,
    /// The subnetwork's default maximum TTL, given to a U_PDU submitted with TTL 0 (Annex A,
    /// A.2.1.6: "the subnetwork shall have a default maximum TTL", configurable, and a node
    /// computes the time to die "by adding the specified TTL (or the default maximum value if
    /// the specified TTL is equal to 0)"); the node discards a U_PDU past it wherever it holds
    /// it (queued, or in the ARQ with DROP C_PDU), and the receiving node one that arrives
    /// after it, as for one with its own TTL. Annex A gives no value. `None` (the default):
    /// such U_PDUs never expire.
    pub default_ttl: Option<Duration>,
    /// How long the node waits for the node delivery confirmation of an ARQ U_PDU whose client
    /// asked for one before it answers S_UNIDATA_REQUEST_REJECTED, "destination node not
    /// responding" (Annex A, A.3.2.4: the sublayer "shall wait for a configurable time for a
    /// response", counted here from the submission). The answer is the client's; the U_PDU
    /// itself stays where it is, queued or in the ARQ, and may still be delivered (Annex A
    /// ends only "the client data delivery protocol" for it), so a client that sends it again
    /// can deliver it twice. No value is given. `None` (the default): the client waits as
    /// long as the U_PDU lives.
    pub confirm_wait: Option<Duration>,
}

/// A node configuration could not be used.
#[derive(Debug, Error)]
pub enum NodeError {
    /// Window or segment size invalid.
    #[error(transparent)]
    Arq(#[from] ArqError),
    /// The window cannot hold one C_PDU of MTU size.
    #[error(
        "an MTU of {mtu} bytes needs more than the {window} frames of {segment} bytes the ARQ window holds"
    )]
    MtuTooLarge {
        /// MTU.
        mtu: u16,
        /// Window.
        window: u8,
        /// Segment size.
        segment: usize,
    },
    /// The modem configuration is unusable.
    #[error("modem: {0}")]
    Modem(#[from] ModemError),
    /// Maximum transmission time zero or above 127.5 s, or too short for one D_PDU.
    #[error(
        "maximum transmission time {0:?} must be above the preamble plus one full segment and at most 127.5 s"
    )]
    BadMaxTransmission(Duration),
    /// [`NodeConfig::link_first_data`] without CAS-1.
    #[error("a time to wait for a new link's first data needs CAS-1 linking")]
    FirstDataWithoutCas1,
    /// [`NodeConfig::hard_link_timeout`] of zero.
    #[error("the hard-link time-out must be above zero")]
    ZeroHardLinkTimeout,
    /// [`NodeConfig::confirm_wait`] of zero.
    #[error("the wait for a delivery confirmation must be above zero")]
    ZeroConfirmWait,
    /// [`NodeConfig::max_links`] of zero, or without CAS-1 and an idle time to break links.
    #[error(
        "a maximum number of links needs CAS-1 linking and an idle time after which links are broken, and must be at least 1"
    )]
    BadMaxLinks,
    /// [`Node::new`] for an index past the subnetwork's nodes.
    #[error("there is no node {index} in a subnetwork of {nodes}")]
    NoSuchNode {
        /// The index asked for.
        index: usize,
        /// Nodes in the subnetwork.
        nodes: usize,
    },
}

/// A checked [`NodeConfig`] and what follows from it, computed once per subnetwork.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSetup {
    config: NodeConfig,
    /// Bytes a D_PDU's header and CRCs add to its segment (the largest case).
    dpdu_overhead: usize,
    /// Bytes of D_PDUs one maximum transmission holds, per usable rate.
    budgets: BTreeMap<DataRate, usize>,
    /// The configured response timeout, raised to the slowest rate DRC may use.
    response_timeout: Duration,
    /// The rate every link starts at.
    start_rate: DataRate,
}

impl NodeSetup {
    /// Checks `config` (window, segment size and MTU; the modem; a maximum transmission that
    /// holds one full segment) and works out the byte budget of one transmission at every rate
    /// a link may use.
    pub fn new(config: NodeConfig) -> Result<NodeSetup, NodeError> {
        ArqSender::new(config.window, config.segment_size)?;
        if config
            .max_links
            .is_some_and(|m| m == 0 || !config.cas1 || config.link_idle.is_none())
        {
            return Err(NodeError::BadMaxLinks);
        }
        if config.link_first_data.is_some() && !config.cas1 {
            return Err(NodeError::FirstDataWithoutCas1);
        }
        if config.hard_link_timeout.is_zero() {
            return Err(NodeError::ZeroHardLinkTimeout);
        }
        if config.confirm_wait.is_some_and(|w| w.is_zero()) {
            return Err(NodeError::ZeroConfirmWait);
        }
        let biggest = largest_cpdu(config.mtu);
        if biggest.div_ceil(config.segment_size) > usize::from(config.window) {
            return Err(NodeError::MtuTooLarge {
                mtu: config.mtu,
                window: config.window,
                segment: config.segment_size,
            });
        }
        let modem = &config.modem;
        // Checked here so that a bad modem configuration gets its own error.
        modem.block_duration()?;
        modem.block_bits()?;
        let fixed = modem.key_up + modem.preamble()?;
        let probe = Dpdu::new(
            Address::new(crate::dpdu::MAX_ADDRESS).unwrap_or_default(),
            Address::new(crate::dpdu::MAX_ADDRESS).unwrap_or_default(),
            Body::DataOnly {
                header: DataHeader::default(),
                segment: vec![0],
            },
        );
        let dpdu_overhead = probe.encoded_len().saturating_sub(1);
        if config.max_transmission > MAX_TRANSMISSION || config.max_transmission <= fixed {
            return Err(NodeError::BadMaxTransmission(config.max_transmission));
        }
        let budget_at = |m: &ModemConfig| -> Option<usize> {
            let block = m.block_duration().ok()?;
            let fixed = m.key_up + m.preamble().ok()?;
            let blocks =
                config.max_transmission.checked_sub(fixed)?.as_nanos() / block.as_nanos().max(1);
            let bits = (blocks as u64 * m.block_bits().ok()?)
                .saturating_sub(u64::from(m.eom_bits) + u64::from(m.flush_bits));
            let budget = usize::try_from(bits / 8).unwrap_or(usize::MAX);
            (budget >= config.segment_size + dpdu_overhead).then_some(budget)
        };
        let Some(byte_budget) = budget_at(modem) else {
            return Err(NodeError::BadMaxTransmission(config.max_transmission));
        };
        // Rates a link may change to: those whose maximum transmission still holds a segment.
        let mut budgets = BTreeMap::new();
        budgets.insert(modem.rate, byte_budget);
        let mut response_timeout = config.response_timeout;
        if config.drc != Drc::Fixed {
            for rate in rate_ladder(modem) {
                let m = ModemConfig {
                    rate,
                    ..modem.clone()
                };
                if let Some(b) = budget_at(&m) {
                    budgets.insert(rate, b);
                    // Answers at a slower rate take longer: wait for the slowest.
                    if let (Ok(bd), Ok(pre)) = (m.block_duration(), m.preamble()) {
                        response_timeout =
                            response_timeout.max(m.key_up + pre + bd * 2 + m.switching_time);
                    }
                }
            }
        }
        let start_rate = match config.start_rate {
            Some(r) if budgets.contains_key(&r) => r,
            _ => modem.rate,
        };
        Ok(NodeSetup {
            config,
            dpdu_overhead,
            budgets,
            response_timeout,
            start_rate,
        })
    }

    /// The configuration it was built from.
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// How long a sender waits for an answer: the configured response timeout, raised to the
    /// slowest rate data-rate change may use. The driver's turn-taking uses it too.
    pub fn response_timeout(&self) -> Duration {
        self.response_timeout
    }
}

/// An SIS primitive for one client connection of the node.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientEvent {
    /// The connection (as given to [`Node::bind`]).
    pub conn: u64,
    /// What to send it.
    pub primitive: Primitive,
}

/// How a client asked for a U_PDU to be sent (worked out by the SIS server from the request
/// and the bind's service type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendMode {
    /// Node delivery confirmation wanted (ARQ only).
    pub confirm: bool,
    /// S_EXPEDITED_UNIDATA_REQUEST.
    pub expedited: bool,
    /// Non-ARQ: `Some(minimum retransmissions)`; `None` for ARQ.
    pub non_arq: Option<u8>,
    /// The client asked for IN-ORDER delivery (not AS-THEY-ARRIVE): the D_PDUs say so
    /// (DELIVER IN ORDER). Non-ARQ: the receiving node holds a C_PDU back while an earlier one
    /// from the same node is still being received. ARQ: it holds a complete C_PDU back until
    /// every C_PDU before it has been delivered; one sent AS-THEY-ARRIVE goes up once whole.
    pub in_order: bool,
}

/// Where one client connection's primitives go.
#[derive(Debug)]
struct Binding {
    conn: u64,
    /// The client's rank (S_BIND_REQUEST): hard-link precedence.
    rank: u8,
    queued: usize,
    flow_off: bool,
    /// Takes non-ARQ U_PDUs with errors (see [`Node::bind`]).
    with_errors: bool,
}

/// A U_PDU waiting in a node's queue.
#[derive(Debug, Clone)]
struct Queued {
    seq: u64,
    dest: usize,
    src_sap: SapId,
    dest_sap: SapId,
    /// Queue order: the priority (expedited U_PDUs have their own queue discipline).
    rank: u8,
    priority: Priority,
    deadline: Option<Duration>,
    confirm: bool,
    /// When the client is told "destination node not responding" if no confirm came
    /// ([`NodeConfig::confirm_wait`]); `confirm` goes false then, so it is answered once.
    answer_by: Option<Duration>,
    expedited: bool,
    /// Non-ARQ: `Some(extra copies)`; `None` for ARQ.
    non_arq: Option<u8>,
    /// IN-ORDER delivery asked for (see [`SendMode::in_order`]).
    in_order: bool,
    conn: u64,
    updu: Bytes,
}

impl Queued {
    /// Bytes the U_PDU takes in its DATA C_PDU: the U_PDU, the C_PDU and S_PDU headers, and
    /// the TTD if it has one.
    fn cpdu_len(&self) -> usize {
        self.updu.len()
            + UPDU_OVERHEAD
            + if self.deadline.is_some() {
                TTD_BYTES
            } else {
                0
            }
    }
}

/// A non-ARQ C_PDU on its way out: its NON-ARQ DATA D_PDUs not yet sent (all copies).
#[derive(Debug)]
struct NonArqOut {
    dest: usize,
    /// Sent as EXPEDITED NON-ARQ DATA (type 8).
    expedited: bool,
    frames: VecDeque<(NonArqHeader, Vec<u8>)>,
}

/// A non-ARQ C_PDU being received.
#[derive(Debug)]
struct NonArqIn {
    size: usize,
    expedited: bool,
    /// Sent to this group address (the D_PDUs' destination, with the group flag), not to us.
    group: Option<NodeAddress>,
    /// Segments received intact, by offset.
    got: BTreeMap<usize, Vec<u8>>,
    /// Segments received only with errors (header good, segment CRC failed), by offset; an
    /// intact copy replaces one.
    damaged: BTreeMap<usize, Vec<u8>>,
    /// Its destination client takes U_PDUs with errors (known once the segment holding the
    /// S_PDU header is in): then it is delivered, damaged or incomplete, when its window
    /// closes, and that closing is a time the node must wake at.
    with_errors: bool,
    /// When the reception window closes (simulated time).
    deadline: Duration,
    /// Already complete: later copies are ignored until the deadline.
    done: bool,
    /// Its D_PDUs said DELIVER IN ORDER.
    in_order: bool,
    /// Complete but held back behind an earlier C_PDU from the same node that is not yet
    /// delivered (DELIVER IN ORDER, Annex C C.4.2); delivered when that one is, or closes.
    held: Option<Vec<u8>>,
}

impl NonArqIn {
    /// Not yet handed to a client: still being received, or held back.
    fn undelivered(&self) -> bool {
        !self.done || self.held.is_some()
    }
}

/// A complete non-ARQ C_PDU on its way to a client: its bytes, whether it came as EXPEDITED
/// NON-ARQ DATA, and the group address it was sent to, if any.
type CompleteCpdu = (Vec<u8>, bool, Option<NodeAddress>);

/// Whether C_PDU ID `a` comes before `b` (IDs count modulo 4096; half the range back is
/// "before").
fn cpdu_before(a: u16, b: u16) -> bool {
    let d = b.wrapping_sub(a) & 0x0FFF;
    d != 0 && d < 2048
}

/// A U_PDU inside the ARQ, awaiting acknowledgement.
#[derive(Debug, Clone)]
struct InArq {
    q: Queued,
    failed: bool,
}

/// How a U_PDU travelled, which decides the indication that delivers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Arq,
    NonArq,
    Expedited,
    ExpeditedNonArq,
}

impl Kind {
    /// How a non-ARQ U_PDU travelled: as EXPEDITED NON-ARQ DATA or not.
    fn non_arq(expedited: bool) -> Kind {
        if expedited {
            Kind::ExpeditedNonArq
        } else {
            Kind::NonArq
        }
    }

    fn tx_mode(self) -> TxMode {
        match self {
            Kind::Arq | Kind::Expedited => TxMode::Arq,
            Kind::NonArq | Kind::ExpeditedNonArq => TxMode::NonArq,
        }
    }

    fn expedited(self) -> bool {
        matches!(self, Kind::Expedited | Kind::ExpeditedNonArq)
    }
}

/// The one expedited C_PDU a link has in flight (Annex C expedited ARQ is stop-and-wait per
/// C_PDU): its own sender, so that FSNs restart at 0 for every expedited C_PDU.
#[derive(Debug)]
struct ExpOut {
    sender: ArqSender,
    cpdu_id: u8,
    /// The client's U_PDU; `None` for a hard-link S_PDU of the SIS itself (`node::hard`).
    q: Option<Queued>,
    failed: bool,
}

/// This node's side of its link with one peer.
#[derive(Debug)]
struct Link {
    sender: ArqSender,
    receiver: ArqReceiver,
    owes_ack: bool,
    unconfirmed: BTreeMap<u64, InArq>,
    /// Expedited ARQ, kept apart from normal data (own FSNs, C_PDU IDs mod 16, ACKs).
    exp_out: Option<ExpOut>,
    exp_next_id: u8,
    /// Receiver of the peer's current expedited C_PDU, by its C_PDU ID.
    exp_in: Option<(u8, ArqReceiver)>,
    owes_exp_ack: bool,
    /// This node's transmit rate towards the peer.
    tx_rate: DataRate,
    /// A rate this node asked the peer to send at, until the peer's DRC_RESPONSE.
    drc_request: Option<DataRate>,
    /// The peer asked for a rate change that this node made: answer "accept".
    drc_response_owed: bool,
    /// The peer's transmission being received carried a DRC_REQUEST (until its end).
    asked_this_transmission: bool,
    /// ACKs (and DATA-ACKs) of the peer's transmission being received, acted on at its end.
    acks_heard: Vec<Dpdu>,
    /// Clean transmissions in a row received from the peer (adaptive DRC).
    clean_streak: u8,
    /// Data transmissions to the peer since its last ACK (adaptive DRC: after
    /// [`UNANSWERED_STEP_DOWN`] the sender steps down on its own, since a peer that decodes
    /// nothing cannot ask).
    unanswered: u8,
    /// ACKs from the peer in a row that fell outside this node's transmit window.
    stale_acks: u8,
    /// RESET FRAME ID of this node's RESET/WIN-RESYNC command awaiting the peer's RESET ACK
    /// (no data goes to the peer meanwhile).
    reset_out: Option<u8>,
    next_reset_id: u8,
    /// The peer commanded a reset with this RESET FRAME ID: answer RESET ACK.
    reset_ack_owed: Option<u8>,
    /// This node asked the peer, under this RESET FRAME ID, to realign its transmit window
    /// (RESET TX WIN RQST): the peer's data failed the synchronisation tests. Its regular data
    /// is discarded unacknowledged until its RESET RX WIN CMND or FULL RESET CMD comes.
    tx_win_request: Option<u8>,
    /// Send that RESET TX WIN RQST in the next transmission to the peer. Owed when the tests
    /// first fail and again after each transmission of the peer that still brings data, so a
    /// lost request is repeated, but only while the peer is still sending.
    tx_win_request_owed: bool,
    /// Transmissions in a row that carried ARQ data or a RESET command to the peer since this
    /// node last decoded anything from it (link loss, [`NodeConfig::link_retries`]).
    silent: u8,
    /// The link was declared lost and the transmit window restarted at 0: the next data for
    /// the peer waits behind a RESET/WIN-RESYNC that puts the peer's receive window there.
    resync: bool,
    /// Declared lost and not heard from since (for [`LinkEvent::Regained`]).
    down: bool,
    /// CAS-1: the physical link to the peer is made (always, without [`NodeConfig::cas1`]).
    linked: bool,
    /// CAS-1: this node's PHYSICAL LINK REQUEST awaits the peer's ACCEPTED (no ARQ data to
    /// the peer meanwhile).
    link_request_out: bool,
    /// CAS-1: the peer asked for a link: answer PHYSICAL LINK ACCEPTED.
    link_accept_owed: bool,
    /// CAS-1: this node's request made the link (it breaks it when idle,
    /// [`NodeConfig::link_idle`]).
    caller: bool,
    /// When this node last sent anything to the peer or decoded anything from it (the idle
    /// timer of [`NodeConfig::link_idle`] runs from here).
    last_activity: Duration,
    /// CAS-1: the link has been idle for [`NodeConfig::link_idle`]: break it in the next
    /// transmission, unless data for the peer turns up first.
    break_due: bool,
    /// CAS-1: this node sent PHYSICAL LINK BREAK and awaits BREAK CONFIRM (the link counts as
    /// broken already: new data waits for the confirm, then makes the link again).
    break_out: bool,
    /// CAS-1: the peer broke the link: answer PHYSICAL LINK BREAK CONFIRM.
    break_confirm_owed: bool,
    /// CAS-1: the peer asked for a link this node cannot hold ([`NodeConfig::max_links`]):
    /// answer PHYSICAL LINK REJECTED.
    reject_owed: Option<u8>,
    /// CAS-1: the peer rejected this node's request; it asks again at this time
    /// ([`Node::handle_timeout`] clears it).
    rejected_until: Option<Duration>,
    /// CAS-1: the peer made this link by its request and has sent no DATA on it yet; this
    /// node aborts it at this time ([`NodeConfig::link_first_data`]).
    first_data_by: Option<Duration>,
    /// CAS-1: the peer sent ARQ data of this D_PDU type on a link this node has not made:
    /// answer WARNING ("not connected").
    warning_owed: Option<u8>,
    /// Hard-link S_PDUs for the peer, each a C_PDU for the expedited ARQ ahead of expedited
    /// U_PDUs (`node::hard`).
    exp_control: VecDeque<Vec<u8>>,
    /// HARD LINK TERMINATEs sent to the peer whose TERMINATE CONFIRM has not come back:
    /// until it has, what the peer sends about hard links is about a link this node has
    /// already ended (`node::hard`).
    hard_tc_awaited: u32,
    /// This node restarted and has not reset the peer's ARQ machines yet: before any regular
    /// ARQ exchange with the peer (its own data, or an answer to the peer's) it sends a FULL
    /// RESET CMD.
    full_reset_due: bool,
    /// This node's pending RESET/WIN-RESYNC (`reset_out`) is a FULL RESET CMD: until the
    /// RESET ACK comes, the peer's regular ARQ data and ACKs are about windows this node no
    /// longer has, and are discarded unanswered ([ED3-C] C.3.5: regular data is suspended
    /// while a RESET/WIN-RESYNC exchange is under way).
    reset_full: bool,
}

impl Link {
    /// Starts a RESET/WIN-RESYNC command of this node's to the peer under the next RESET
    /// FRAME ID, counted in `resets`; it goes in every transmission until its RESET ACK.
    fn command_reset(&mut self, counters: &mut NodeCounters) {
        self.reset_out = Some(self.next_reset_id);
        self.next_reset_id = self.next_reset_id.wrapping_add(1);
        counters.resets += 1;
    }

    /// Whether this node owes the peer an answer or a control C_PDU: an ACK, a RESET/WIN-RESYNC
    /// command or its ACK, a CAS-1 request, acceptance, rejection, break or confirmation, or a
    /// WARNING. An open RESET TX WIN RQST is not counted: it is asked again only when the peer's
    /// data comes, so it neither keeps a link up nor wakes the node by itself (the callers that
    /// send it add [`Link::asks_tx_win`]).
    fn owes(&self) -> bool {
        self.owes_ack
            || self.owes_exp_ack
            || self.reset_out.is_some()
            || self.reset_ack_owed.is_some()
            || self.link_request_out
            || self.link_accept_owed
            || self.break_out
            || self.break_confirm_owed
            || self.reject_owed.is_some()
            || self.warning_owed.is_some()
    }

    /// The RESET TX WIN RQST goes in this transmission: one is open and the link is made.
    fn asks_tx_win(&self) -> bool {
        self.tx_win_request_owed && self.linked
    }

    /// Resets the transmit window to FSN 0 for a RESET/WIN-RESYNC (this node's, or a peer's
    /// FULL RESET CMD): C_PDUs not yet on the air go again from scratch; the U_PDUs with a
    /// segment on the air are returned, their fate unknown ([`ArqSender::reset`]).
    fn reset_transmit_window(&mut self) -> Vec<InArq> {
        let mut lost = Vec::new();
        for id in self.sender.reset() {
            if let Some(a) = self.unconfirmed.remove(&id) {
                lost.push(a);
            }
        }
        lost
    }
}

/// A change in a node's view of its link to a peer, for its driver to report (the SIS has no
/// primitive for a soft link's state: the clients learn of it from the rejections).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEvent {
    /// The node declared its link to `peer` lost at `at` ([`NodeConfig::link_retries`]
    /// transmissions went unanswered): its ARQ state for the peer is gone and `discarded`
    /// ARQ U_PDUs with it (rejected to the clients that asked for a confirm).
    Lost {
        /// The peer (node index).
        peer: usize,
        /// When (simulated time).
        at: Duration,
        /// ARQ U_PDUs discarded: in the ARQ, or queued for it.
        discarded: usize,
    },
    /// The node decoded something from `peer` again, at `at`, after declaring the link lost.
    Regained {
        /// The peer (node index).
        peer: usize,
        /// When its first interleaver block started.
        at: Duration,
    },
}

/// One STANAG 5066 node (see the module documentation).
#[derive(Debug)]
pub struct Node {
    /// This node's index in [`NodeConfig::addresses`].
    index: usize,
    setup: NodeSetup,
    address: NodeAddress,
    dpdu_address: Address,
    /// Server-side duplicate-datagram filter on.
    dup_filter: bool,
    /// Client bindings by SAP.
    bindings: BTreeMap<u8, Binding>,
    queue: Vec<Queued>,
    /// Links by peer index.
    links: BTreeMap<usize, Link>,
    non_arq_out: VecDeque<NonArqOut>,
    /// Keyed by (sending node, C_PDU ID).
    non_arq_in: BTreeMap<(usize, u16), NonArqIn>,
    next_cpdu_id: u16,
    /// Submission order, for the queue's tie-breaks.
    next_seq: u64,
    counters: NodeCounters,
    events: VecDeque<ClientEvent>,
    link_events: VecDeque<LinkEvent>,
    /// The hard link, if any (`node::hard`).
    hard: Option<hard::Hard>,
    /// The latest time the node has been told of (for timers started by what it receives).
    clock: Duration,
}

impl Node {
    /// Node number `index` of the subnetwork `setup` describes, with a link to every other
    /// node and the server-side duplicate-datagram filter on or off.
    pub fn new(index: usize, setup: &NodeSetup, dup_filter: bool) -> Result<Node, NodeError> {
        let config = &setup.config;
        let Some(&address) = config.addresses.get(index) else {
            return Err(NodeError::NoSuchNode {
                index,
                nodes: config.addresses.len(),
            });
        };
        let biggest = largest_cpdu(config.mtu);
        let mut links = BTreeMap::new();
        for peer in (0..config.addresses.len()).filter(|&p| p != index) {
            links.insert(
                peer,
                Link {
                    // Checked by `NodeSetup::new`.
                    sender: ArqSender::new(config.window, config.segment_size)?,
                    receiver: ArqReceiver::new(biggest + 16),
                    owes_ack: false,
                    unconfirmed: BTreeMap::new(),
                    exp_out: None,
                    exp_next_id: 0,
                    exp_in: None,
                    owes_exp_ack: false,
                    tx_rate: setup.start_rate,
                    drc_request: None,
                    drc_response_owed: false,
                    clean_streak: 0,
                    asked_this_transmission: false,
                    acks_heard: Vec::new(),
                    unanswered: 0,
                    stale_acks: 0,
                    reset_out: None,
                    next_reset_id: 0,
                    reset_ack_owed: None,
                    tx_win_request: None,
                    tx_win_request_owed: false,
                    silent: 0,
                    resync: false,
                    down: false,
                    linked: !config.cas1,
                    link_request_out: false,
                    link_accept_owed: false,
                    caller: false,
                    last_activity: Duration::ZERO,
                    break_due: false,
                    break_out: false,
                    break_confirm_owed: false,
                    reject_owed: None,
                    rejected_until: None,
                    first_data_by: None,
                    warning_owed: None,
                    exp_control: VecDeque::new(),
                    hard_tc_awaited: 0,
                    full_reset_due: false,
                    reset_full: false,
                },
            );
        }
        Ok(Node {
            index,
            setup: setup.clone(),
            address,
            dpdu_address: Address::new(address.bits()).unwrap_or_default(),
            dup_filter,
            bindings: BTreeMap::new(),
            queue: Vec::new(),
            links,
            non_arq_out: VecDeque::new(),
            non_arq_in: BTreeMap::new(),
            next_cpdu_id: 0,
            next_seq: 0,
            counters: NodeCounters::default(),
            events: VecDeque::new(),
            link_events: VecDeque::new(),
            hard: None,
            clock: Duration::ZERO,
        })
    }

    /// This node's address.
    pub fn address(&self) -> NodeAddress {
        self.address
    }

    /// Its counters so far (`lost_dpdus` excepted, which only the air knows).
    pub fn counters(&self) -> NodeCounters {
        self.counters
    }

    /// The next SIS primitive for a client, in the order they arose.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// The next change in the node's links (lost, regained), in the order they arose.
    pub fn poll_link_event(&mut self) -> Option<LinkEvent> {
        self.link_events.pop_front()
    }

    /// Binds `sap` for connection `conn`, a client of `rank` (0-15); `false` if another
    /// connection holds it. `with_errors`: the client bound for non-ARQ delivery with errors
    /// (service type transmission mode 3), so non-ARQ U_PDUs for it that are damaged or
    /// incomplete when their reception window closes are delivered with their errored and
    /// missing blocks listed (see `Node::deliver_damaged`).
    pub fn bind(&mut self, sap: SapId, rank: u8, conn: u64, with_errors: bool) -> bool {
        if self.bindings.contains_key(&sap.get()) {
            return false;
        }
        self.bindings.insert(
            sap.get(),
            Binding {
                conn,
                rank,
                queued: 0,
                flow_off: false,
                with_errors,
            },
        );
        true
    }

    /// Releases whatever `conn` bound, and ends a hard link it held.
    pub fn unbind(&mut self, conn: u64) {
        self.hard_link_client_gone(conn);
        self.bindings.retain(|_, b| b.conn != conn);
    }

    /// Restarts the node at `now`, as a STANAG 5066 server that crashed and came back does:
    /// whatever it held in memory is gone. Its clients' bindings (the driver closes their
    /// connections), the U_PDUs queued or in the ARQ (neither delivered, confirmed nor
    /// rejected: the clients that submitted them went with the connections), its ARQ windows
    /// and the C_PDUs it was receiving, normal and expedited, its CAS-1 links (with
    /// [`NodeConfig::cas1`] it makes each again before its first ARQ data), a hard link, the
    /// non-ARQ C_PDUs it was reassembling and its data rates. Its configuration stays, and so
    /// do its counters (the emulator's view, not the server's), `restarts` one more.
    ///
    /// Its peers know none of this. So before its first regular ARQ exchange with each peer
    /// (its own data for it, or data from it) it sends a RESET/WIN-RESYNC with FULL RESET
    /// CMD, which Annex C has for exactly this: it "will put the ARQ machine back into its
    /// starting position upon the creation of a physical link" at both ends, and "delete all
    /// partially received and acknowledged C_PDUs still waiting to be completed". Until the
    /// RESET ACK, the peer's regular ARQ data and ACKs are discarded unanswered. The peer,
    /// obeying, resets its transmit window as for any RESET/WIN-RESYNC (the U_PDUs it had on
    /// the air are not sent again: this node may have delivered them before it went down) and
    /// its receive window to 0, and ends a hard link it held with this node.
    pub fn restart(&mut self, now: Duration) -> Result<(), NodeError> {
        let mut fresh = Node::new(self.index, &self.setup, self.dup_filter)?;
        fresh.counters = self.counters;
        fresh.counters.restarts += 1;
        fresh.clock = self.clock.max(now);
        for l in fresh.links.values_mut() {
            l.full_reset_due = true;
            l.last_activity = fresh.clock;
        }
        *self = fresh;
        Ok(())
    }

    /// Makes the node forget its ARQ receive state for `peer`, as a restart would (RX LWE
    /// back to 0, held frames and the C_PDU being reassembled gone). `false` if there is no
    /// such link.
    pub fn forget_arq_receive_state(&mut self, peer: usize) -> bool {
        let Some(link) = self.links.get_mut(&peer) else {
            return false;
        };
        link.receiver.forget(0);
        link.owes_ack = false;
        true
    }

    /// Queues a U_PDU that client `conn`, bound on `src_sap`, asked to send at `now` (already
    /// checked against the MTU). A request for this node's own address is delivered at once.
    pub fn submit(
        &mut self,
        now: Duration,
        conn: u64,
        src_sap: SapId,
        req: &UnidataRequest,
        mode: SendMode,
    ) -> Result<(), UnidataRejectReason> {
        let SendMode {
            confirm,
            expedited,
            non_arq,
            in_order,
        } = mode;
        let nodes = self.setup.config.addresses.len();
        let group = self
            .setup
            .config
            .groups
            .iter()
            .position(|g| g.address == req.dest)
            .map(|g| nodes + g);
        let dest = match group {
            Some(g) => g,
            None => self
                .setup
                .config
                .addresses
                .iter()
                .position(|&a| a == req.dest)
                .ok_or(UnidataRejectReason::DestinationNodeNotResponding)?,
        };
        // ARQ cannot serve a group address (no single peer acknowledges); the client must ask
        // for non-ARQ, and is told so rather than left waiting for a confirm that cannot come.
        if group.is_some() && non_arq.is_none() {
            return Err(UnidataRejectReason::TxModeNotSpecified);
        }
        let confirm = confirm && group.is_none();
        let src = self.address;
        if dest == self.index {
            // Loopback: deliver at once, as a real node does for its own address.
            let kind = match (non_arq.is_some(), expedited) {
                (false, false) => Kind::Arq,
                (true, false) => Kind::NonArq,
                (false, true) => Kind::Expedited,
                (true, true) => Kind::ExpeditedNonArq,
            };
            let delivered = self.deliver(
                src,
                src_sap,
                req.dest_sap,
                req.priority,
                &req.updu,
                kind,
                None,
                None,
            );
            return if delivered {
                if confirm {
                    let c = UnidataConfirm {
                        dest_sap: req.dest_sap,
                        dest: req.dest,
                        updu_part: req.updu.clone(),
                    };
                    let p = if expedited {
                        Primitive::ExpeditedUnidataRequestConfirm(c)
                    } else {
                        Primitive::UnidataRequestConfirm(c)
                    };
                    self.send_to(src_sap, Some(conn), p);
                }
                Ok(())
            } else {
                Err(UnidataRejectReason::DestinationSapNotBound)
            };
        }
        if !confirm && self.is_duplicate(dest, req.dest_sap, &req.updu) {
            tracing::debug!(
                node = self.index,
                dest,
                "duplicate U_PDU dropped by the filter"
            );
            self.counters.duplicates_dropped += 1;
            return Ok(());
        }
        self.next_seq += 1;
        let q = Queued {
            seq: self.next_seq,
            dest,
            src_sap,
            dest_sap: req.dest_sap,
            rank: req.priority.get(),
            priority: req.priority,
            deadline: req
                .ttl
                .as_duration()
                .or(self.setup.config.default_ttl)
                .map(|d| now + d),
            confirm,
            answer_by: self
                .setup
                .config
                .confirm_wait
                .filter(|_| confirm)
                .map(|w| now + w),
            expedited,
            non_arq,
            in_order,
            conn,
            updu: req.updu.clone(),
        };
        let limit = self.setup.config.flow_limit;
        self.queue.push(q);
        if let Some(b) = self.bindings.get_mut(&src_sap.get())
            && b.conn == conn
        {
            b.queued += 1;
            if b.queued > limit && !b.flow_off {
                b.flow_off = true;
                self.events.push_back(ClientEvent {
                    conn,
                    primitive: Primitive::DataFlowOff,
                });
            }
        }
        Ok(())
    }

    /// Drops U_PDUs whose TTL ran out by `now`, queued or already in the ARQ (rejecting those
    /// that asked for a confirm; see `Node::expire_in_arq`), and non-ARQ C_PDUs whose
    /// reception window closed (counted incomplete if they were not delivered); runs the
    /// CAS-1 timers: a rejected request's hold, the abort of a new link without data, and
    /// the breaking of idle links; and the hard link's waits ([`HARD_LINK_TIMEOUT`]).
    pub fn handle_timeout(&mut self, now: Duration) {
        self.clock = self.clock.max(now);
        self.expire_in_arq(now);
        self.answer_overdue(now);
        self.expire_hard_link(now);
        let closed: Vec<_> = self
            .non_arq_in
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(&k, _)| k)
            .collect();
        let mut senders = Vec::new();
        for key in closed {
            let Some(mut p) = self.non_arq_in.remove(&key) else {
                continue;
            };
            if !senders.contains(&key.0) {
                senders.push(key.0);
            }
            if let Some(cpdu) = p.held.take() {
                // Its own window closed: it waits no longer.
                self.deliver_non_arq(key.0, vec![(cpdu, p.expedited, p.group)]);
                continue;
            }
            if p.done {
                continue;
            }
            if p.with_errors && self.deliver_damaged(key.0, &p) {
                self.counters.non_arq_with_errors += 1;
            } else {
                self.counters.non_arq_incomplete += 1;
            }
        }
        for sender in senders {
            let released = self.release_held(sender);
            self.deliver_non_arq(sender, released);
        }
        for l in self.links.values_mut() {
            if l.rejected_until.is_some_and(|at| at <= now) {
                l.rejected_until = None;
            }
            if l.first_data_by.is_some_and(|at| at <= now) {
                l.first_data_by = None;
                // Annex B: the called node "shall abort the Physical Link and declare it
                // inactive"; nothing is sent. Not while its ACCEPTED still waits to go, or
                // while this node has data of its own on the link.
                if l.linked
                    && !l.caller
                    && !l.link_accept_owed
                    && l.sender.is_idle()
                    && l.exp_out.is_none()
                {
                    l.linked = false;
                    self.counters.links_aborted += 1;
                }
            }
        }
        for (peer, at) in self.idle_deadlines() {
            if at <= now
                && let Some(l) = self.links.get_mut(&peer)
            {
                l.break_due = true;
            }
        }
        let (dead, live): (Vec<Queued>, Vec<Queued>) = std::mem::take(&mut self.queue)
            .into_iter()
            .partition(|q| q.deadline.is_some_and(|d| d <= now));
        self.queue = live;
        self.counters.expired += dead.len() as u64;
        for q in dead {
            tracing::debug!(
                node = self.index,
                seq = q.seq,
                "U_PDU TTL expired before transmission"
            );
            if q.confirm {
                self.reject(&q, UnidataRejectReason::TtlExpired);
            }
            self.dequeued(&q);
        }
    }

    /// When the TTL of a U_PDU, queued or in the ARQ, or a CAS-1 timer (a link's idle time,
    /// [`NodeConfig::link_idle`]; a rejected request's hold, [`NodeConfig::max_links`]; the
    /// wait for a new link's first data, [`NodeConfig::link_first_data`]) runs out next
    /// ([`Node::handle_timeout`] then). Non-ARQ
    /// reception windows are not timers: they close whenever the node is next handled after
    /// them.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let idle = self
            .idle_deadlines()
            .into_iter()
            .map(|(_, at)| at)
            .chain(
                self.links
                    .values()
                    .flat_map(|l| [l.rejected_until, l.first_data_by])
                    .flatten()
                    .chain(self.hard_link_deadline()),
            )
            .min();
        let in_arq = self.links.values().flat_map(|l| {
            l.unconfirmed
                .values()
                .map(|a| &a.q)
                .chain(l.exp_out.as_ref().and_then(|e| e.q.as_ref()))
        });
        // A non-ARQ U_PDU for a client that takes errors is delivered when its window
        // closes, complete or not, and one held back in order goes when the windows of those
        // before it close; any other that is incomplete then is just dropped, which can wait
        // for the node's next wake-up.
        let holding: Vec<usize> = self
            .non_arq_in
            .iter()
            .filter(|(_, p)| p.held.is_some())
            .map(|(&(sender, _), _)| sender)
            .collect();
        let non_arq = self
            .non_arq_in
            .iter()
            .filter(|((sender, _), p)| {
                (p.with_errors && !p.done) || (holding.contains(sender) && p.undelivered())
            })
            .map(|(_, p)| p.deadline);
        self.queue
            .iter()
            .chain(in_arq)
            .flat_map(|q| [q.deadline, q.answer_by.filter(|_| q.confirm)])
            .flatten()
            .chain(idle)
            .chain(non_arq)
            .min()
    }

    /// U_PDUs, queued or in the ARQ, whose client has waited [`NodeConfig::confirm_wait`] by
    /// `now` for a confirm that has not come: the client is told "destination node not
    /// responding" and hears nothing more of it; the U_PDU goes on (Annex A, A.3.2.4 (15)).
    fn answer_overdue(&mut self, now: Duration) {
        let mut overdue = Vec::new();
        let mut answer = |q: &mut Queued| {
            if q.confirm && q.answer_by.is_some_and(|t| t <= now) {
                q.confirm = false;
                overdue.push(q.clone());
            }
        };
        self.queue.iter_mut().for_each(&mut answer);
        for link in self.links.values_mut() {
            link.unconfirmed.values_mut().for_each(|a| answer(&mut a.q));
            if let Some(q) = link.exp_out.as_mut().and_then(|e| e.q.as_mut()) {
                answer(q);
            }
        }
        self.counters.confirms_overdue += overdue.len() as u64;
        for q in overdue {
            tracing::debug!(
                node = self.index,
                seq = q.seq,
                "no delivery confirmation within the wait: destination node not responding"
            );
            self.reject(&q, UnidataRejectReason::DestinationNodeNotResponding);
        }
    }

    /// U_PDUs in the ARQ whose TTL ran out by `now`: normal ones are dropped from their
    /// sender ([`crate::arq::ArqSender::drop_cpdu`]: frames not yet acknowledged go with DROP
    /// C_PDU and no data, so the peer discards what it has of them and does not wait for the
    /// rest), expedited ones are abandoned (their D_PDU has no DROP flag; the peer's partial
    /// C_PDU is replaced by the next expedited C_PDU, whose C_PDU ID differs). Their clients
    /// get S_UNIDATA_REQUEST_REJECTED, TTL expired, if they asked for a confirm, as for a
    /// U_PDU that expired in the queue. A U_PDU whose every frame had arrived but whose ACK
    /// had not is rejected too, though delivered: the sender cannot know.
    fn expire_in_arq(&mut self, now: Duration) {
        let node = self.index;
        let due = |q: &Queued| q.deadline.is_some_and(|d| d <= now);
        let mut dead: Vec<InArq> = Vec::new();
        for (&peer, link) in self.links.iter_mut() {
            let ids: Vec<u64> = link
                .unconfirmed
                .iter()
                .filter(|(_, a)| due(&a.q))
                .map(|(&id, _)| id)
                .collect();
            for id in ids {
                let Some(a) = link.unconfirmed.remove(&id) else {
                    continue;
                };
                let what = link.sender.drop_cpdu(id);
                tracing::debug!(
                    node,
                    peer,
                    seq = a.q.seq,
                    ?what,
                    "U_PDU TTL expired in the ARQ"
                );
                dead.push(a);
            }
            if link
                .exp_out
                .as_ref()
                .is_some_and(|e| e.q.as_ref().is_some_and(due))
                && let Some(ExpOut {
                    q: Some(q), failed, ..
                }) = link.exp_out.take()
            {
                tracing::debug!(
                    node,
                    peer,
                    seq = q.seq,
                    "expedited U_PDU TTL expired in the ARQ"
                );
                dead.push(InArq { q, failed });
            }
        }
        self.counters.expired_in_arq += dead.len() as u64;
        for a in dead {
            // One already refused by the destination (DATA DELIVERY FAIL) had its rejection.
            if a.q.confirm && !a.failed {
                self.reject(&a.q, UnidataRejectReason::TtlExpired);
            }
            self.dequeued(&a.q);
        }
    }

    /// Declares the link to `peer` lost at `at`: its transmit side (normal and expedited) is
    /// discarded and restarts from FSN 0, to be realigned by a RESET/WIN-RESYNC when data for
    /// the peer comes again; the ARQ U_PDUs for the peer, in the ARQ and queued for it alike,
    /// are discarded and those that asked for a confirm rejected with "destination node not
    /// responding" (Annex A reason 3: of the five reasons, the one that says the peer did not
    /// answer; "TTL expired" would blame the client's TTL). Queued ones go too: behind lost
    /// U_PDUs of the same client stream they would deliver a stream with a hole, and they
    /// would only start the same futile retries again. Non-ARQ U_PDUs stay (nothing answers
    /// them anyway). The receive side is kept: it follows the peer's sender, which realigns
    /// it with its own RESET if it lost its state too.
    fn lose_link(&mut self, peer: usize, at: Duration) {
        let node = self.index;
        let Some(link) = self.links.get_mut(&peer) else {
            return;
        };
        link.sender.clear();
        link.exp_control.clear();
        link.hard_tc_awaited = 0;
        let mut gone: Vec<InArq> = std::mem::take(&mut link.unconfirmed)
            .into_values()
            .collect();
        if let Some(ExpOut {
            q: Some(q), failed, ..
        }) = link.exp_out.take()
        {
            gone.push(InArq { q, failed });
        }
        link.reset_out = None;
        // A FULL RESET still unanswered is still owed: the peer's machines are where they were.
        link.full_reset_due |= std::mem::take(&mut link.reset_full);
        link.resync = !link.full_reset_due;
        link.down = true;
        // CAS-1: the physical link is gone too; the next data makes a new one.
        link.linked = !self.setup.config.cas1;
        link.link_request_out = false;
        link.break_due = false;
        link.break_out = false;
        link.caller = false;
        link.rejected_until = None;
        link.first_data_by = None;
        link.silent = 0;
        link.unanswered = 0;
        link.stale_acks = 0;
        link.drc_request = None;
        let (queued, keep): (Vec<Queued>, Vec<Queued>) = std::mem::take(&mut self.queue)
            .into_iter()
            .partition(|q| q.dest == peer && q.non_arq.is_none());
        self.queue = keep;
        gone.extend(queued.into_iter().map(|q| InArq { q, failed: false }));
        gone.sort_by_key(|a| a.q.seq);
        let discarded = gone.len();
        tracing::info!(node, peer, discarded, "link lost: no answer from the peer");
        self.counters.links_lost += 1;
        self.counters.link_lost_updus += discarded as u64;
        for a in gone {
            if a.q.confirm && !a.failed {
                self.reject(&a.q, UnidataRejectReason::DestinationNodeNotResponding);
            }
            self.dequeued(&a.q);
        }
        self.hard_link_lost(peer);
        self.link_events.push_back(LinkEvent::Lost {
            peer,
            at,
            discarded,
        });
    }

    /// Whether the node has anything to send: queued U_PDUs, non-ARQ frames, ACKs or resets
    /// owed, ARQ data not yet acknowledged, or CAS-1 C_PDUs owed. ARQ data that waits for a
    /// link this node may not ask for yet (the peer's rejection is being waited out, or the
    /// node holds [`NodeConfig::max_links`]) does not count: its timer wakes the node.
    pub fn has_work(&self) -> bool {
        // Once per peer: each look scans the queue.
        let blocked: Vec<usize> = self
            .links
            .keys()
            .copied()
            .filter(|&p| self.link_blocked(p))
            .collect();
        self.queue
            .iter()
            .any(|q| (q.non_arq.is_some() || !blocked.contains(&q.dest)) && self.hard_allows(q))
            || !self.non_arq_out.is_empty()
            || self.links.iter().any(|(p, l)| {
                l.owes()
                    || l.asks_tx_win()
                    || l.break_due
                    || ((l.exp_out.is_some() || !l.sender.is_idle() || !l.exp_control.is_empty())
                        && !blocked.contains(p))
            })
    }

    /// Whether the link to `peer` carries nothing now: no ARQ U_PDU queued for the peer, none
    /// unacknowledged, none of the peer's half received, nothing owed to it (ACKs, resets, DRC,
    /// CAS-1 answers) and no CAS-1 exchange under way (what [`NodeConfig::link_idle`] waits
    /// for). An open RESET TX WIN RQST does not keep a link up: it is asked again only when the
    /// peer's data comes.
    fn link_is_idle(&self, peer: usize) -> bool {
        let Some(l) = self.links.get(&peer) else {
            return false;
        };
        l.sender.is_idle()
            && l.receiver.is_idle()
            && l.exp_out.is_none()
            && !l.owes()
            && !l.drc_response_owed
            && l.exp_control.is_empty()
            && !self
                .queue
                .iter()
                .any(|q| q.dest == peer && q.non_arq.is_none())
    }

    /// CAS-1: whether this node has ARQ data for `peer` (queued, in the ARQ or expedited) and
    /// no physical link to it, nor a request or a break of its own under way.
    fn wants_link(&self, peer: usize) -> bool {
        let Some(l) = self.links.get(&peer) else {
            return false;
        };
        self.setup.config.cas1
            && !l.linked
            && !l.link_request_out
            && !l.break_out
            && !self.hard_link_holds(peer)
            && (!l.sender.is_idle()
                || l.exp_out.is_some()
                || !l.exp_control.is_empty()
                || self
                    .queue
                    .iter()
                    .any(|q| q.dest == peer && q.non_arq.is_none() && self.hard_allows(q)))
    }

    /// CAS-1: whether this node may ask for one more physical link, besides any to `except`
    /// ([`NodeConfig::max_links`]): its made links and its own requests awaiting an answer
    /// count, so that it never asks for more than it may hold.
    fn link_slot_free(&self, except: Option<usize>) -> bool {
        self.links_held(except, true) < self.setup.config.max_links.unwrap_or(usize::MAX)
    }

    /// CAS-1: this node's made links to peers other than `except`, and with `requests` its
    /// own requests awaiting an answer too.
    fn links_held(&self, except: Option<usize>, requests: bool) -> usize {
        self.links
            .iter()
            .filter(|(p, l)| Some(**p) != except && (l.linked || (requests && l.link_request_out)))
            .count()
    }

    /// CAS-1: whether ARQ data for `peer` must wait for a link this node may not ask for yet:
    /// the peer rejected the last request (until the hold runs out), this node holds
    /// [`NodeConfig::max_links`] links already, or its hard link to another node is up.
    fn link_blocked(&self, peer: usize) -> bool {
        self.hard_link_holds(peer)
            || self.wants_link(peer)
                && (self
                    .links
                    .get(&peer)
                    .is_some_and(|l| l.rejected_until.is_some())
                    || !self.link_slot_free(Some(peer)))
    }

    /// CAS-1: whether a peer waits for a link only because this node holds
    /// [`NodeConfig::max_links`] already (then any idle link of this node is broken).
    fn starved(&self) -> bool {
        self.setup.config.max_links.is_some()
            && !self.link_slot_free(None)
            && self
                .links
                .iter()
                .any(|(&p, l)| l.rejected_until.is_none() && self.wants_link(p))
    }

    /// Made CAS-1 links that are idle and that this node breaks when their idle time runs
    /// out ([`NodeConfig::link_idle`]), with when that is: those it called, and any while a
    /// peer waits for a slot ([`NodeConfig::max_links`]); never the link under this node's
    /// hard link, which stays as long as the hard link does.
    fn idle_deadlines(&self) -> Vec<(usize, Duration)> {
        let Some(idle) = self
            .setup
            .config
            .link_idle
            .filter(|_| self.setup.config.cas1)
        else {
            return Vec::new();
        };
        let starved = self.starved();
        // The link under a hard link stays while the hard link does, idle or not.
        let hard_peer = self.hard_link_any_peer();
        self.links
            .iter()
            .filter(|(p, l)| {
                l.linked
                    && (l.caller || starved)
                    && !l.break_due
                    && hard_peer != Some(**p)
                    && self.link_is_idle(**p)
            })
            .map(|(&p, l)| (p, l.last_activity + idle))
            .collect()
    }

    /// The address of node or group `dest` (the default address for neither).
    fn peer_address(&self, dest: usize) -> NodeAddress {
        self.setup
            .config
            .addresses
            .get(dest)
            .copied()
            .unwrap_or_default()
    }

    /// Queues `p` for the client bound on `sap` (if `conn` is given, only if it is that
    /// connection).
    fn send_to(&mut self, sap: SapId, conn: Option<u64>, p: Primitive) {
        if let Some(b) = self.bindings.get(&sap.get())
            && conn.is_none_or(|c| c == b.conn)
        {
            self.events.push_back(ClientEvent {
                conn: b.conn,
                primitive: p,
            });
        }
    }

    /// Whether this node filters duplicates and still holds (queued, or in the ARQ and not
    /// yet acknowledged) a U_PDU for `dest`/`sap` with these bytes.
    fn is_duplicate(&self, dest: usize, sap: SapId, updu: &[u8]) -> bool {
        if !self.dup_filter {
            return false;
        }
        let same = |q: &Queued| q.dest == dest && q.dest_sap == sap && q.updu.as_ref() == updu;
        self.queue.iter().any(same)
            || self.links.get(&dest).is_some_and(|l| {
                l.unconfirmed.values().any(|a| same(&a.q))
                    || l.exp_out
                        .as_ref()
                        .is_some_and(|e| e.q.as_ref().is_some_and(&same))
            })
    }

    /// One U_PDU of a client was acknowledged, expired or dropped: it no longer counts
    /// against the client's flow-control limit.
    fn dequeued(&mut self, q: &Queued) {
        let on_at = self.setup.config.flow_limit / 2;
        if let Some(b) = self.bindings.get_mut(&q.src_sap.get())
            && b.conn == q.conn
        {
            b.queued = b.queued.saturating_sub(1);
            if b.flow_off && b.queued <= on_at {
                b.flow_off = false;
                self.events.push_back(ClientEvent {
                    conn: b.conn,
                    primitive: Primitive::DataFlowOn,
                });
            }
        }
    }

    fn reject(&mut self, q: &Queued, reason: UnidataRejectReason) {
        let r = UnidataRejected {
            reason,
            dest_sap: q.dest_sap,
            dest: self.peer_address(q.dest),
            updu_part: q.updu.clone(),
        };
        let p = if q.expedited {
            Primitive::ExpeditedUnidataRequestRejected(r)
        } else {
            Primitive::UnidataRequestRejected(r)
        };
        self.send_to(q.src_sap, Some(q.conn), p);
    }

    /// Hands a U_PDU to the client bound on `dest_sap`; `false` if none is. `group` is the
    /// group address it was sent to, if it was (the indication's destination then).
    /// `damage`: the U_PDU's errored and missing blocks, for delivery with errors (mode 3),
    /// made only to a client bound to take it.
    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &mut self,
        src: NodeAddress,
        src_sap: SapId,
        dest_sap: SapId,
        priority: Priority,
        updu: &[u8],
        kind: Kind,
        group: Option<NodeAddress>,
        damage: Option<(Vec<Block>, Vec<Block>)>,
    ) -> bool {
        let Some(b) = self.bindings.get(&dest_sap.get()) else {
            return false;
        };
        if damage.is_some() && !b.with_errors {
            return false;
        }
        let tx_mode = if damage.is_some() {
            TxMode::NonArqWithErrors
        } else {
            kind.tx_mode()
        };
        let (errored, missing) = damage.unwrap_or_default();
        let ind = UnidataIndication {
            priority,
            dest_sap,
            dest: group.unwrap_or(self.address),
            tx_mode,
            src_sap,
            src,
            errored,
            missing,
            rockwell_form: false,
            updu: Bytes::copy_from_slice(updu),
        };
        let p = if kind.expedited() {
            Primitive::ExpeditedUnidataIndication(ind)
        } else {
            Primitive::UnidataIndication(ind)
        };
        self.events.push_back(ClientEvent {
            conn: b.conn,
            primitive: p,
        });
        self.counters.delivered += 1;
        true
    }
}

/// Max-min fair shares of `budget` bytes among peers asking `demands` bytes: in ascending order
/// of demand, each gets what it asks or an equal share of what is left, whichever is less.
fn fair_shares(budget: usize, demands: &[(usize, usize)]) -> BTreeMap<usize, usize> {
    let mut order: Vec<(usize, usize)> = demands.to_vec();
    order.sort_by_key(|&(p, d)| (d, p));
    let mut left = budget;
    let mut out = BTreeMap::new();
    let count = order.len();
    for (i, (peer, demand)) in order.into_iter().enumerate() {
        let share = demand.min(left / (count - i));
        left -= share;
        out.insert(peer, share);
    }
    out
}
