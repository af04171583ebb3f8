//! The emulated STANAG 5066 subnetwork: N nodes on one half-duplex HF frequency, in (virtual)
//! time. This is the discrete-event scheduler, the thin driver of the sans-IO nodes
//! ([`crate::node`]) as quinn is of quinn-proto, between them and the SIS server above
//! ([`crate::sis_server`]).
//!
//! Who does what: a [`Node`] decides what it sends (queues, ARQ, expedited and non-ARQ data,
//! DRC, resets) and what it does with what it received, and says what its clients get. This
//! driver owns everything outside one node: the tokio clock, the [`Air`] and its collisions,
//! the channel of every ordered pair of nodes and the one seeded RNG that decides each
//! interleaver block's fate (and every back-off), when each node may key up, the clients'
//! channels, the trace, the pcap and the channel-wide counters. What follows describes the
//! subnetwork as both make it.
//!
//! Each node queues its clients' U_PDUs per destination by priority, wraps each in a DATA
//! S_PDU inside a DATA C_PDU (4 bytes of overhead), and hands them to one Annex C ARQ sender per
//! peer. Turn-taking follows deployed soft-link 5066: a node with data keys up and sends a
//! burst of D_PDUs (ACK-ONLY frames for what it owes first, then DATA-ONLY frames), bounded by
//! the ARQ window and the maximum transmission time (≤ 127.5 s, with EOT counting down in 0.5 s
//! units); the peer answers after the switching time with its ACKs and its own data; and so on.
//! A sender that hears no answer retransmits after a response timeout. Each receiver gets each
//! D_PDU when the interleaver block holding its last byte is decoded (U_PDUs are delivered
//! then), while ACKs and data-rate decisions act once the transmission has ended. A round is
//! planned once every request of its instant has come in (a settle of one timer tick).
//!
//! Several peers in one transmission: the node shares its bytes among them max-min fairly,
//! smallest share first (a short message ahead of a long batch is decoded seconds into the
//! transmission); the peers that got something answer one after another in the order they
//! were addressed, each as soon as the one before has finished (or after one response time if
//! it has nothing to say), and the sender waits for all of them before it sends again.
//!
//! DATA-ACK ([`SubnetConfig::data_ack`], on by default): when a node owes a peer an ACK and
//! sends it ARQ data in the same transmission, the ACK rides on the first data frame to that
//! peer as a DATA-ACK D_PDU (type 2) instead of a separate ACK-ONLY; the receiver processes
//! its ACK part exactly as an ACK-ONLY (after the data, as for separate frames).
//!
//! RESET/WIN-RESYNC (type 3): a node whose ACKs from a peer keep falling outside its transmit
//! window ([`STALE_ACKS_RESET`] in a row; in the emulator this happens only when the peer lost
//! its receive state, see [`Subnet::forget_arq_receive_state`]) resets its transmit window to
//! FSN 0 and sends RESET/WIN-RESYNC with RESET RX WIN CMND and NEW RX LWE 0, repeated in each
//! of its transmissions (and no data to that peer) until the peer answers with RESET ACK
//! carrying the same RESET FRAME ID; then data flows again. At the reset, U_PDUs none of whose
//! segments had gone on the air are segmented again from scratch and sent; U_PDUs with a
//! segment already sent may or may not have been delivered, so they are never sent again
//! (no double delivery) and their clients get S_UNIDATA_REQUEST_REJECTED (destination node
//! not responding). The commanded node first delivers the C_PDUs it held whole behind a gap
//! (waiting for in-order delivery): it acknowledged them, so their sender may have confirmed
//! them, and nothing after the reset brings them again; it discards the rest.
//!
//! A node restart ([`Subnet::restart_node`], `skywave-emu --restart`): the node's bound
//! clients are disconnected at once and the rest of a transmission it was making is lost;
//! while it is down (if at all) it hears nothing and refuses SIS connections; it comes back
//! with nothing it held (queues, ARQ windows, links).
//! Before its first regular ARQ exchange with each peer (its own data, or data the peer
//! sends, which it discards unanswered meanwhile) it sends RESET/WIN-RESYNC with FULL RESET
//! CMD, repeated in each transmission until the RESET ACK; the peer puts both of its ARQ
//! machines for the node back at FSN 0 (the U_PDUs it had on the air rejected as above),
//! ends a hard link with it ("physical link broken") and answers RESET ACK (a copy too,
//! obeyed again: it cannot be told from a second restart's).
//! Without it the peer would take the restarted node's new FSNs for old ones: acknowledged,
//! never delivered. If the peer, having declared the link lost while the node was down,
//! realigns its own direction first (RESET RX WIN CMND), the node only realigns the other the
//! same way. A RESET TX WIN RQST is answered as Annex C says, by the node's own reset of its
//! transmit window and RESET RX WIN CMND; no emulated node sends one (each realigns its own
//! transmit window when its peer's ACKs show the windows disagree), but a real peer may.
//!
//! Every transmission is planned with [`ModemConfig::plan`]; each receiver draws each
//! interleaver block's fate from its own channel direction; a D_PDU is lost if any block
//! carrying its bits is lost or has an error burst inside them. Transmissions that overlap
//! (two nodes keying up before either could hear the other) collide on the [`Air`] and are lost
//! for everyone; colliding nodes back off a random (seeded) time.
//!
//! Giving up: a U_PDU's TTL applies in its node's queue and in the ARQ. One that runs out in
//! the ARQ is never sent again; the frames of it the peer has not acknowledged go once more
//! with DROP C_PDU and no data (Annex C's first method), the peer acknowledges them and
//! discards what it held of that C_PDU, and the client gets S_UNIDATA_REQUEST_REJECTED (TTL
//! expired) if it asked for a confirm. Link loss ([`SubnetConfig::link_retries`]): a node
//! whose transmissions carrying ARQ data (or a RESET command) to a peer draw nothing it can
//! decode from that peer, the first one and [`DEFAULT_LINK_RETRIES`] retries in a row,
//! declares the link lost instead of retrying once more: it discards its transmit state for
//! the peer and the ARQ U_PDUs for it, queued ones included (rejected, "destination node not
//! responding", to clients that asked for a confirm), and the subnetwork reports a
//! [`NodeLinkEvent`] ([`Subnet::watch_links`], [`Subnet::link_events`], and a count in
//! [`NodeCounters::links_lost`]). A client that submits more for that peer starts a new
//! contact: a RESET/WIN-RESYNC to FSN 0 first, then the data.
//!
//! Confirmations: a U_PDU sent with node delivery confirmation is confirmed
//! (S_UNIDATA_REQUEST_CONFIRM) when the ARQ has acknowledged every segment of it. A U_PDU for a
//! SAP nobody bound at the destination is decided there: the destination node sends a DATA
//! DELIVERY FAIL S_PDU back through its own ARQ, and the source node answers its client with
//! S_UNIDATA_REQUEST_REJECTED reason 2. The FAIL travels in the same answer as the ACK and a
//! node processes received data before ACKs, so the client gets the rejection and no confirm;
//! only if the FAIL is lost while the ACK arrives does the client get a confirm instead.
//!
//! Non-ARQ: a U_PDU sent with a non-ARQ service type becomes one C_PDU cut into NON-ARQ DATA
//! D_PDUs (type 7), each repeated 1 + "minimum retransmissions" times, sent after the ACKs and
//! before the ARQ data of the node's transmissions, never acknowledged. Its reception window
//! covers the rest of the transmission (plus, if it spills over, a maximum transmission and
//! two response timeouts per further transmission it needs); the receiver delivers the U_PDU
//! once, when every byte arrived within the window, and otherwise counts it incomplete.
//!
//! Expedited: S_EXPEDITED_UNIDATA_REQUESTs in ARQ mode use the Annex C expedited ARQ, apart
//! from normal data: EXPEDITED DATA-ONLY D_PDUs (type 4) answered by EXPEDITED ACK-ONLY
//! (type 5), stop-and-wait per C_PDU (the next one starts when the previous one is fully
//! acknowledged), FSNs from 0 for every C_PDU, C_PDU IDs mod 16. They go first in a
//! transmission, after the ACKs; in non-ARQ mode they go as EXPEDITED NON-ARQ DATA (type 8)
//! ahead of normal non-ARQ data. Both are delivered with S_EXPEDITED_UNIDATA_INDICATION.
//!
//! Data-rate change ([`SubnetConfig::drc`]): fixed, matched (every link at
//! [`matched_rate`]), or adaptive (see [`Drc::Adaptive`]); the DRC EOWs are real bytes in the
//! D_PDU headers, so they show in the pcap.
//!
//! Group addresses ([`SubnetConfig::groups`]): a U_PDU for a group address goes non-ARQ (ARQ
//! cannot serve a group: an ARQ request to one is rejected, reason 5), once, in NON-ARQ
//! DATA D_PDUs with the group flag set and the group's address; every member node receives the
//! transmission through its own channel from the sender and delivers the U_PDU if all of it
//! arrived, with the group address as the indication's destination. Each ordered pair of nodes
//! has its own channel instance; [`SubnetConfig::link_channels`] gives a pair (or, with
//! [`SubnetConfig::set_receiver_channel`], every pair into one node) its own conditions, so that
//! ships of a fleet hear the base at different SNRs.
//!
//! Options: a server-side duplicate-datagram filter per node ([`SubnetConfig::dup_filter`]);
//! a pcap of every D_PDU put on the air ([`Subnet::capture_pcap`], see [`crate::capture`]);
//! the per-transmission trace, kept ([`Subnet::trace`]) and streamed ([`Subnet::watch_trace`]).
//!
//! Simplifications (said here so nobody relies on them): the Annex B link is assumed up
//! unless [`SubnetConfig::cas1`] makes nodes make it first (and then it is broken only when
//! [`SubnetConfig::link_idle`] is set and the link idles that long, when it is declared
//! lost, or when a hard link (Annex A, `node::hard`) makes a node's link to another node
//! exclusive; with [`SubnetConfig::max_links`] a node holds at most that many, rejects
//! requests beyond them and breaks an idle link for a waiting peer);
//! a damaged NON-ARQ DATA segment reaches its node only if its header came through (a hit
//! header is a lost frame), with every other bit of each error burst flipped; data-rate
//! change ([`Drc`]) picks one rate per transmission (the slowest of the links it serves)
//! and changes interleaver never;
//! link loss is each node's own verdict (no CAS-1 PHYSICAL LINK BREAK is exchanged for it,
//! and the peer finds out by its own count or by the RESET that comes next);
//! and a node only senses the carrier
//! between transmission rounds: a node that becomes ready while another transmits waits for
//! the end of that transmission (plus switching time) rather than colliding with it.
//! Collisions happen when nodes key up within one key-up time of each other.
//!
//! Several peers on one frequency (a base and its ships): a transmission's bytes are shared
//! max-min fairly among the peers with ARQ data waiting (a short message for one ship rides
//! beside a long batch for another); the nodes a transmission addresses that have something to
//! say answer one response timeout apart, in the order of their first D_PDU in it (one with
//! nothing to say waits behind them), and its sender waits for all of them; an answer that
//! addresses nodes of its own queues their answers behind the turns still due, and its
//! sender waits for those too;
//! nodes that overheard it, or got only group (non-ARQ) data from it, wait for those turns and,
//! if they were deferring to it (they have traffic when it ends), then a random number (0 to
//! twice the number of nodes) of carrier-sense slots of key-up plus switching time; traffic
//! that comes later finds the channel idle and goes at once. The same back-off follows a
//! collision for every node that was deferring to it (the colliding senders draw their own, 0.1
//! to 2 s from the end of their transmission): without it, nodes waiting on a collision keyed
//! up together the moment it ended, with any collided sender whose back-off had run out under a
//! longer transmission, and three nodes could collide like that for ever. With two nodes none
//! of this changes anything.
//!
//! Time: simulated time is a [`Duration`] since the subnetwork started; the scheduler sleeps
//! with `tokio::time::sleep_until`, so under `#[tokio::test(start_paused = true)]` a transfer
//! of hours runs in milliseconds, deterministically for a seed. With a time scale K > 1 (the
//! standalone binary), simulated time runs K times faster than the tokio clock.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::io;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skywave_sis::{NodeAddress, Primitive, SapId, UnidataRejectReason};
use thiserror::Error;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use crate::arq::ArqError;
use crate::calibration::required_snr;
use crate::capture::DpduCapture;
use crate::channel::Fading;
use crate::channel::{Channel, ChannelConfig, ChannelError};
use crate::modem::{Air, DataRate, ModemConfig, ModemError, TxId};
use crate::node::{Node, NodeConfig, NodeError, NodeSetup, NodeTx, SendMode, SentDpdu};

pub use crate::node::{
    DEFAULT_LINK_RETRIES, Drc, Group, LinkEvent, MAX_TRANSMISSION, NodeCounters, STALE_ACKS_RESET,
    UNANSWERED_STEP_DOWN, UPDU_OVERHEAD, rate_ladder,
};

/// How long the scheduler waits, in simulated time, for the requests of the instant a round
/// is due to come in before it plans the round (as of that instant; see the scheduler loop).
/// One tick of tokio's timer.
const SETTLE: Duration = Duration::from_millis(1);

/// Margin over the published required SNR that [`matched_rate`] keeps, dB.
pub const MATCHED_MARGIN_DB: f64 = 3.0;

/// The fastest rate of [`rate_ladder`] whose published requirement for BER 10⁻⁵
/// (`modem-required-snr.csv`: the AWGN column on AWGN; on a fading channel the ITU-R Poor
/// column for spreads of 0.5 Hz or more, else ITU-R Good, falling back on the other one when
/// a cell is empty) plus [`MATCHED_MARGIN_DB`] is at most the channel's mean SNR; the slowest
/// rate if none is.
pub fn matched_rate(modem: &ModemConfig, channel: &ChannelConfig) -> DataRate {
    let table = required_snr();
    let ladder = rate_ladder(modem);
    let need = |rate: DataRate| {
        let row = table.iter().find(|r| r.rate == rate)?;
        match &channel.fading {
            Fading::Awgn => Some(row.awgn_db),
            Fading::Watterson(p) if p.spread_hz >= 0.5 => row.poor_db.or(row.good_db),
            Fading::Watterson(_) => row.good_db.or(row.poor_db),
        }
    };
    ladder
        .iter()
        .rev()
        .find(|&&r| need(r).is_some_and(|db| db + MATCHED_MARGIN_DB <= channel.snr_db))
        .or(ladder.first())
        .copied()
        .unwrap_or(modem.rate)
}

/// Configuration of the whole subnetwork.
#[derive(Debug, Clone, PartialEq)]
pub struct SubnetConfig {
    /// Node addresses, one per node (index = node number).
    pub addresses: Vec<NodeAddress>,
    /// Modem used by every node.
    pub modem: ModemConfig,
    /// Channel model, instantiated once per ordered pair of nodes (one per direction).
    pub channel: ChannelConfig,
    /// Seed of every random draw (fading, block errors, back-off).
    pub seed: u64,
    /// ARQ window, frames (1–128).
    pub window: u8,
    /// D_PDU segment size, bytes (1–1023).
    pub segment_size: usize,
    /// Longest transmission (at most 127.5 s).
    pub max_transmission: Duration,
    /// MTU offered to SIS clients.
    pub mtu: u16,
    /// U_PDUs a client may have queued or unacknowledged before it gets S_DATA_FLOW_OFF (ON again at half).
    pub flow_limit: usize,
    /// How long a sender waits, after the peer could have answered, before retransmitting.
    pub response_timeout: Duration,
    /// Simulated seconds per tokio-clock second (1 in tests; K in the standalone emulator).
    pub time_scale: f64,
    /// Server-side duplicate-datagram filter per node (index = node; missing = off): a
    /// U_PDU identical (destination node, destination SAP, bytes) to one the node still holds,
    /// queued or in the ARQ and not yet acknowledged, is dropped and counted in
    /// [`NodeCounters::duplicates_dropped`]. For clients that retransmit on their own timer
    /// (TCP over the IP client, SAP 9). U_PDUs that ask for node delivery confirmation are
    /// never dropped, so that every confirm a client waits for still comes.
    pub dup_filter: Vec<bool>,
    /// Data-rate change policy.
    pub drc: Drc,
    /// Piggy-back acknowledgements on data: a node that owes a peer an ACK and sends it
    /// data in the same transmission sends DATA-ACK D_PDUs (type 2) instead of an ACK-ONLY
    /// plus DATA-ONLYs, as Annex C allows. On by default; off only to compare.
    pub data_ack: bool,
    /// Group addresses and their member nodes (indices into `addresses`).
    pub groups: Vec<Group>,
    /// Channel conditions of particular ordered pairs (sender, receiver), instead of `channel`.
    pub link_channels: Vec<LinkChannel>,
    /// Link loss: how many retries of ARQ data to a peer that answers nothing a node makes
    /// before it declares the link lost, discards the ARQ U_PDUs for that peer (rejecting
    /// them to clients that asked for a confirm) and reports it ([`Subnet::watch_links`]);
    /// `None` never gives up. Default [`DEFAULT_LINK_RETRIES`] (10, JNOS's TCP retry limit;
    /// see there for why not Annex C's 3).
    pub link_retries: Option<u8>,
    /// Annex B CAS-1 linking ([`crate::node::NodeConfig::cas1`]): a node makes a physical
    /// link (PHYSICAL LINK REQUEST, ACCEPTED) before its first ARQ data to a peer. Off by
    /// default: every link is taken as made, as when ALE or an operator makes it.
    pub cas1: bool,
    /// With `cas1`: break a link idle this long ([`crate::node::NodeConfig::link_idle`]);
    /// `None` (the default): a made link stays until it is declared lost.
    pub link_idle: Option<Duration>,
    /// With `cas1` and `link_idle`: the most physical links a node holds at once
    /// ([`crate::node::NodeConfig::max_links`]: requests beyond it are rejected, and idle
    /// links are broken for a waiting peer); `None` (the default): no limit.
    pub max_links: Option<usize>,
    /// With `cas1`: how long a called node waits for a new link's first data before it
    /// aborts the link ([`crate::node::NodeConfig::link_first_data`]); `None` (the default):
    /// never.
    pub link_first_data: Option<Duration>,
    /// Hard links: the time-out of each wait ([`crate::node::NodeConfig::hard_link_timeout`],
    /// default [`crate::node::HARD_LINK_TIMEOUT`]).
    pub hard_link_timeout: Duration,
    /// The default maximum TTL a node gives a U_PDU submitted with TTL 0
    /// ([`crate::node::NodeConfig::default_ttl`]); `None` (the default): it never expires.
    pub default_ttl: Option<Duration>,
    /// How long a node waits for a node delivery confirmation before it tells the client
    /// "destination node not responding" ([`crate::node::NodeConfig::confirm_wait`]); `None`
    /// (the default): as long as the U_PDU lives.
    pub confirm_wait: Option<Duration>,
}

/// A [`LinkEvent`] of one node, as the subnetwork reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLinkEvent {
    /// The node whose view of the link changed (index).
    pub node: usize,
    /// What changed.
    pub event: LinkEvent,
}

impl fmt::Display for NodeLinkEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.event {
            LinkEvent::Lost {
                peer,
                at,
                discarded,
            } => write!(
                f,
                "{:9.3} s node {}: link to node {peer} lost (no answer), {discarded} U_PDUs discarded",
                at.as_secs_f64(),
                self.node
            ),
            LinkEvent::Regained { peer, at } => write!(
                f,
                "{:9.3} s node {}: node {peer} heard again",
                at.as_secs_f64(),
                self.node
            ),
        }
    }
}

/// The channel of one direction between two nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkChannel {
    /// Sending node (index).
    pub from: usize,
    /// Receiving node (index).
    pub to: usize,
    /// Its conditions.
    pub channel: ChannelConfig,
}

impl SubnetConfig {
    /// Node `node` hears every other node through `channel` (a ship's reception conditions),
    /// replacing earlier settings for those pairs.
    pub fn set_receiver_channel(&mut self, node: usize, channel: ChannelConfig) {
        self.link_channels.retain(|l| l.to != node);
        for from in (0..self.addresses.len()).filter(|&f| f != node) {
            self.link_channels.push(LinkChannel {
                from,
                to: node,
                channel: channel.clone(),
            });
        }
    }

    /// Gives every node named in `snr_db` or `impairments` a receiving channel of its own
    /// ([`SubnetConfig::set_receiver_channel`]): the subnetwork's channel (its fading, drift
    /// and impairments) at the node's SNR from `snr_db` (the subnetwork's if not named, the
    /// last entry if named twice), with the node's own impairments added, as a ship of a
    /// fleet hears the base at its range and through its own drop-outs.
    pub fn set_receiver_conditions(
        &mut self,
        snr_db: &[(usize, f64)],
        impairments: &[(usize, crate::channel::ScheduledImpairment)],
    ) {
        let mut own: BTreeMap<usize, f64> = BTreeMap::new();
        for &(node, _) in impairments {
            own.insert(node, self.channel.snr_db);
        }
        for &(node, db) in snr_db {
            own.insert(node, db);
        }
        for (node, db) in own {
            let mut channel = self.channel.clone();
            channel.snr_db = db;
            channel.impairments.extend(
                impairments
                    .iter()
                    .filter(|(n, _)| *n == node)
                    .map(|(_, i)| *i),
            );
            self.set_receiver_channel(node, channel);
        }
    }

    /// Defaults for these nodes, modem and channel: window 128, 1023-byte segments, 127.5 s
    /// maximum transmission, MTU 2048, flow limit 64, seed 1, response timeout of key-up +
    /// preamble + two blocks + switching time, link lost after [`DEFAULT_LINK_RETRIES`]
    /// unanswered retries.
    pub fn new(addresses: Vec<NodeAddress>, modem: ModemConfig, channel: ChannelConfig) -> Self {
        let block = modem.block_duration().unwrap_or(Duration::from_secs(1));
        let preamble = modem.preamble().unwrap_or(Duration::from_secs(1));
        let response_timeout = modem.key_up + preamble + block * 2 + modem.switching_time;
        SubnetConfig {
            addresses,
            modem,
            channel,
            seed: 1,
            window: 128,
            segment_size: 1023,
            max_transmission: MAX_TRANSMISSION,
            mtu: 2048,
            flow_limit: 64,
            response_timeout,
            time_scale: 1.0,
            dup_filter: Vec::new(),
            drc: Drc::Fixed,
            data_ack: true,
            groups: Vec::new(),
            link_channels: Vec::new(),
            link_retries: Some(DEFAULT_LINK_RETRIES),
            cas1: false,
            link_idle: None,
            max_links: None,
            link_first_data: None,
            hard_link_timeout: crate::node::HARD_LINK_TIMEOUT,
            default_ttl: None,
            confirm_wait: None,
        }
    }
}

/// The subnetwork could not be built.
#[derive(Debug, Error)]
pub enum NetError {
    /// Fewer than two nodes, or the same address twice.
    #[error("a subnetwork needs at least two nodes with distinct addresses (got {0:?})")]
    BadAddresses(Vec<NodeAddress>),
    /// A group is not a group address, clashes with another, or names a node that does not exist.
    #[error("bad group or link channel: {0}")]
    BadGroup(String),
    /// The modem configuration is unusable.
    #[error("modem: {0}")]
    Modem(#[from] ModemError),
    /// The channel configuration is unusable.
    #[error("channel: {0}")]
    Channel(#[from] ChannelError),
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
    /// Maximum transmission time zero or above 127.5 s, or too short for one D_PDU.
    #[error(
        "maximum transmission time {0:?} must be above the preamble plus one full segment and at most 127.5 s"
    )]
    BadMaxTransmission(Duration),
    /// Time scale not a positive number.
    #[error("time scale {0} must be a positive number")]
    BadTimeScale(f64),
    /// A maximum number of links of zero, or without CAS-1 and an idle time.
    #[error(
        "a maximum number of links needs CAS-1 linking and an idle time after which links are broken, and must be at least 1"
    )]
    BadMaxLinks,
    /// A time to wait for a new link's first data without CAS-1.
    #[error("a time to wait for a new link's first data needs CAS-1 linking")]
    FirstDataWithoutCas1,
    /// A hard-link time-out of zero.
    #[error("the hard-link time-out must be above zero")]
    ZeroHardLinkTimeout,
    /// A wait for a delivery confirmation of zero.
    #[error("the wait for a delivery confirmation must be above zero")]
    ZeroConfirmWait,
}

impl From<NodeError> for NetError {
    fn from(e: NodeError) -> NetError {
        match e {
            NodeError::Arq(e) => NetError::Arq(e),
            NodeError::MtuTooLarge {
                mtu,
                window,
                segment,
            } => NetError::MtuTooLarge {
                mtu,
                window,
                segment,
            },
            NodeError::Modem(e) => NetError::Modem(e),
            NodeError::BadMaxTransmission(d) => NetError::BadMaxTransmission(d),
            NodeError::BadMaxLinks => NetError::BadMaxLinks,
            NodeError::FirstDataWithoutCas1 => NetError::FirstDataWithoutCas1,
            NodeError::ZeroHardLinkTimeout => NetError::ZeroHardLinkTimeout,
            NodeError::ZeroConfirmWait => NetError::ZeroConfirmWait,
            // `Subnet::start` makes one node per address, so this cannot happen; were it to,
            // the address list is what is wrong.
            NodeError::NoSuchNode { .. } => NetError::BadAddresses(Vec::new()),
        }
    }
}

/// Counters of the whole channel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Per node, in node order.
    pub nodes: Vec<NodeCounters>,
    /// Transmissions on the channel.
    pub transmissions: u64,
    /// Payload bytes on the air.
    pub bytes_on_air: u64,
    /// Changes of the transmitting node.
    pub turnarounds: u64,
    /// Collisions counted by the [`Air`]: pairs of overlapping transmissions (see
    /// [`Counters::collided_transmissions`]).
    pub collisions: u64,
    /// D_PDUs sent.
    pub dpdus_sent: u64,
    /// Retransmitted DATA D_PDUs.
    pub retransmissions: u64,
    /// D_PDUs their addressee lost.
    pub lost_dpdus: u64,
    /// DATA-ACK D_PDUs sent.
    pub data_acks: u64,
    /// Simulated time of the last transmission's end.
    pub busy_until: Duration,
}

impl Counters {
    /// Transmissions lost to a collision, every node's: what a reader means by collisions.
    /// [`Counters::collisions`] counts overlapping pairs, so twenty stations keying up
    /// together are 190 of those and twenty of these.
    pub fn collided_transmissions(&self) -> u64 {
        self.nodes.iter().map(|n| n.collisions).sum()
    }
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "channel: {} transmissions, {} bytes on air, {} turnarounds, {} D_PDUs sent ({} DATA-ACK), {} retransmissions, {} collisions, {} D_PDUs lost, last transmission ended at {:.1} s",
            self.transmissions,
            self.bytes_on_air,
            self.turnarounds,
            self.dpdus_sent,
            self.data_acks,
            self.retransmissions,
            self.collisions,
            self.lost_dpdus,
            self.busy_until.as_secs_f64()
        )?;
        for (i, n) in self.nodes.iter().enumerate() {
            writeln!(
                f,
                "node {i}: {} transmissions, {} bytes on air, {} D_PDUs sent, {} retransmissions, {} collisions, {} D_PDUs lost, {} U_PDUs delivered, {} expired ({} in the ARQ, {} on arrival), {} confirms overdue, {} C_PDUs dropped on DROP, {} duplicates dropped, non-ARQ {} sent {} delivered {} incomplete {} with errors, {} rate changes, {} DATA-ACK, {} resets ({} full, {} U_PDUs lost), {} full resets obeyed, {} RESET TX WIN RQSTs, {} restarts, {} links lost ({} U_PDUs discarded), {} link requests, {} links made, {} links broken, {} link requests refused, {} of its own rejected, {} links aborted, {} not-linked warnings, hard links {} requested {} made {} ended",
                n.transmissions,
                n.bytes_on_air,
                n.dpdus_sent,
                n.retransmissions,
                n.collisions,
                n.lost_dpdus,
                n.delivered,
                n.expired,
                n.expired_in_arq,
                n.expired_on_arrival,
                n.confirms_overdue,
                n.cpdus_dropped,
                n.duplicates_dropped,
                n.non_arq_sent,
                n.non_arq_delivered,
                n.non_arq_incomplete,
                n.non_arq_with_errors,
                n.rate_changes,
                n.data_acks,
                n.resets,
                n.full_resets,
                n.reset_lost,
                n.full_resets_obeyed,
                n.tx_win_requests,
                n.restarts,
                n.links_lost,
                n.link_lost_updus,
                n.link_requests,
                n.links_made,
                n.links_broken,
                n.link_requests_refused,
                n.link_requests_rejected,
                n.links_aborted,
                n.not_linked_warnings,
                n.hard_links_requested,
                n.hard_links_made,
                n.hard_links_ended
            )?;
        }
        Ok(())
    }
}

/// One D_PDU of a traced transmission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracedDpdu {
    /// D_PDU type (0 DATA-ONLY, 1 ACK-ONLY, 2 DATA-ACK, 3 RESET/WIN-RESYNC, ...).
    pub dpdu_type: u8,
    /// FSN for data frames.
    pub fsn: Option<u8>,
    /// Encoded length, bytes.
    pub len: usize,
    /// EOT written in its header.
    pub eot: u8,
    /// When its first byte's interleaver block starts.
    pub at: Duration,
    /// Retransmission of a data frame.
    pub retransmission: bool,
    /// The addressee did not receive it.
    pub lost: bool,
}

/// One transmission, as the trace records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRecord {
    /// Key-up.
    pub start: Duration,
    /// Unkey.
    pub end: Duration,
    /// Sending node index.
    pub sender: usize,
    /// Data rate, bit/s.
    pub rate_bps: u32,
    /// D_PDU bytes.
    pub bytes: usize,
    /// The D_PDUs, in order.
    pub dpdus: Vec<TracedDpdu>,
    /// Every D_PDU was lost.
    pub lost: bool,
    /// Why D_PDUs were lost ("" when none was).
    pub why: String,
}

impl fmt::Display for TracedDpdu {
    /// Short form: `D12` (DATA-ONLY, FSN 12), `ACK`, `DA3` (DATA-ACK, FSN 3), `RST`
    /// (RESET/WIN-RESYNC), `XD3` (EXPEDITED DATA-ONLY), `XACK`,
    /// `N` (NON-ARQ DATA), `T<type>` otherwise; `r` marks a retransmission, `x` a D_PDU its
    /// addressee did not receive.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.dpdu_type, self.fsn) {
            (0, Some(n)) => write!(f, "D{n}")?,
            (2, Some(n)) => write!(f, "DA{n}")?,
            (3, _) => f.write_str("RST")?,
            (4, Some(n)) => write!(f, "XD{n}")?,
            (1, _) => f.write_str("ACK")?,
            (5, _) => f.write_str("XACK")?,
            (7, _) => f.write_str("N")?,
            (t, _) => write!(f, "T{t}")?,
        }
        if self.retransmission {
            f.write_str("r")?;
        }
        if self.lost {
            f.write_str("x")?;
        }
        Ok(())
    }
}

impl fmt::Display for TraceRecord {
    /// One line: key-up and unkey times, sending node, rate, D_PDU bytes, the EOT announced
    /// by the first D_PDU (0.5 s units), each D_PDU in order (see [`TracedDpdu`]'s format),
    /// and why D_PDUs were lost.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:9.3}-{:9.3} s node {} {} bit/s {} bytes EOT {} [",
            self.start.as_secs_f64(),
            self.end.as_secs_f64(),
            self.sender,
            self.rate_bps,
            self.bytes,
            self.dpdus.first().map_or(0, |d| d.eot),
        )?;
        for (i, d) in self.dpdus.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")?;
        if !self.why.is_empty() {
            write!(f, " lost: {}", self.why)?;
        }
        Ok(())
    }
}

/// One node as the scheduler holds it: the sans-IO node, and what only the driver knows
/// about it (when it may key up, its clients' channels, what the air did to its D_PDUs).
struct Slot {
    node: Node,
    /// Earliest time it may key up (turn-taking, back-off, response timeout).
    not_before: Duration,
    /// Each bound connection's channel to its SIS server task.
    clients: BTreeMap<u64, mpsc::UnboundedSender<Primitive>>,
    /// D_PDUs it sent that their addressee did not receive.
    lost_dpdus: u64,
    /// Link events taken from the node, not yet reported ([`State::report_links`]).
    link_events: Vec<LinkEvent>,
    /// Until then the node is down ([`Subnet::restart_node`]): it hears nothing, and its SIS
    /// server takes no connection (with nothing to hear and no client, it sends nothing).
    down_until: Duration,
}

impl Slot {
    /// Whether the node is down at `t` ([`Subnet::restart_node`]).
    fn down_at(&self, t: Duration) -> bool {
        self.down_until > t
    }

    /// Hands the node's pending SIS primitives to their connections, and sets its link
    /// events aside for [`State::report_links`].
    fn flush_events(&mut self) {
        while let Some(ev) = self.node.poll_event() {
            if let Some(tx) = self.clients.get(&ev.conn) {
                let _ = tx.send(ev.primitive);
            }
        }
        while let Some(ev) = self.node.poll_link_event() {
            self.link_events.push(ev);
        }
    }
}

/// One transmission of the current round.
struct RoundTx {
    sender: usize,
    sent: NodeTx,
    id: TxId,
    record: TraceRecord,
    /// Lost on the air for everyone (decided when the round starts).
    collided: bool,
    /// What each other node got of it (empty when it collided).
    receptions: Vec<Reception>,
    /// Its D_PDUs lost, counted over every receiver that should have had them.
    lost_count: u64,
    /// The individual nodes it addressed, in the order of their first D_PDU. Each may owe an
    /// answer; on one frequency they answer one after another (first slots one response time
    /// apart, moved on by `take_turns` as each answer ends), or their answers would key up
    /// together and collide every time (with one addressee, the point-to-point case, nothing
    /// changes).
    addressees: Vec<usize>,
    /// After a collision: how long its sender backs off before trying again.
    collision_backoff: Duration,
}

/// What one receiver got of a transmission, decided when the round starts: the channel's
/// fate of each block depends only on the block's time and the seeded RNG.
struct Reception {
    receiver: usize,
    /// It decoded a D_PDU it listens for (filled in as its arrivals are handed over).
    got_any: bool,
    /// Data D_PDUs addressed to it alone, and of those the lost (adaptive DRC's evidence).
    data_sent: usize,
    data_lost: usize,
    /// Carrier-sense back-off when it heard the transmission but owes no answer to it.
    backoff: Option<Duration>,
}

/// The answers owed to a transmission that addressed several nodes which each got something
/// from it: they answer one after another, in the order they were addressed, each as soon as
/// the one before has finished (or its turn passed unused), and the node that sent it waits
/// for all of them before it sends again.
struct Turns {
    /// The node that sent the transmission.
    owner: usize,
    /// The nodes still to answer, in order.
    queue: Vec<usize>,
}

/// D_PDUs a receiver gets at one instant: those whose last byte is in an interleaver block
/// released (decoded) then.
struct Arrival {
    at: Duration,
    /// Index of the transmission in the round.
    tx: usize,
    /// Index of the reception in that transmission's.
    reception: usize,
    dpdus: Vec<(Duration, Vec<u8>)>,
}

/// Everything the scheduler and the SIS connections share.
pub(crate) struct State {
    config: SubnetConfig,
    nodes: Vec<Slot>,
    channels: BTreeMap<(usize, usize), Channel>,
    air: Air,
    rng: ChaCha8Rng,
    trace: Vec<TraceRecord>,
    counters: Counters,
    last_sender: Option<usize>,
    next_conn: u64,
    /// The configured response timeout, raised to the slowest rate DRC may use.
    response_timeout: Duration,
    round: Vec<RoundTx>,
    /// The current round's D_PDUs still to hand to their receivers, earliest first.
    arrivals: VecDeque<Arrival>,
    /// Answers still owed to a transmission that addressed several nodes (see `finish_round`).
    turns: Option<Turns>,
    capture: Option<DpduCapture>,
    watchers: Vec<mpsc::UnboundedSender<TraceRecord>>,
    /// Every link event so far, in order.
    link_log: Vec<NodeLinkEvent>,
    link_watchers: Vec<mpsc::UnboundedSender<NodeLinkEvent>>,
}

pub(crate) struct Shared {
    state: Mutex<State>,
    pub(crate) notify: Notify,
    start: Instant,
    scale: f64,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Simulated time now.
    pub(crate) fn now(&self) -> Duration {
        self.start.elapsed().mul_f64(self.scale)
    }

    async fn sleep_until(&self, t: Duration) {
        tokio::time::sleep_until(self.start + t.div_f64(self.scale)).await;
    }
}

/// Handle to a running subnetwork. Cheap to clone; the simulation stops when the last handle
/// is dropped.
#[derive(Clone)]
pub struct Subnet {
    pub(crate) shared: Arc<Shared>,
    _task: Arc<TaskGuard>,
}

impl fmt::Debug for Subnet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subnet").finish_non_exhaustive()
    }
}

struct TaskGuard(tokio::task::JoinHandle<()>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Subnet {
    /// Builds the subnetwork and starts its scheduler task (call inside a tokio runtime).
    pub fn start(config: SubnetConfig) -> Result<Subnet, NetError> {
        let mut sorted = config.addresses.clone();
        sorted.sort_by_key(|a| a.bits());
        sorted.dedup();
        if sorted.len() < 2 || sorted.len() != config.addresses.len() {
            return Err(NetError::BadAddresses(config.addresses.clone()));
        }
        for (i, g) in config.groups.iter().enumerate() {
            if !g.address.is_group() {
                return Err(NetError::BadGroup(format!(
                    "{} is not a group address",
                    g.address
                )));
            }
            if config.groups[..i].iter().any(|o| o.address == g.address) {
                return Err(NetError::BadGroup(format!("{} is given twice", g.address)));
            }
            if let Some(m) = g.members.iter().find(|&&m| m >= config.addresses.len()) {
                return Err(NetError::BadGroup(format!(
                    "{} names node {m}, but there are {} nodes",
                    g.address,
                    config.addresses.len()
                )));
            }
        }
        if let Some(l) = config
            .link_channels
            .iter()
            .find(|l| l.from == l.to || l.from.max(l.to) >= config.addresses.len())
        {
            return Err(NetError::BadGroup(format!(
                "link channel {} -> {} is not between two nodes of the subnetwork",
                l.from, l.to
            )));
        }
        if !(config.time_scale.is_finite() && config.time_scale > 0.0) {
            return Err(NetError::BadTimeScale(config.time_scale));
        }
        let start_rate =
            (config.drc == Drc::Matched).then(|| matched_rate(&config.modem, &config.channel));
        let setup = NodeSetup::new(NodeConfig {
            addresses: config.addresses.clone(),
            groups: config.groups.clone(),
            modem: config.modem.clone(),
            window: config.window,
            segment_size: config.segment_size,
            max_transmission: config.max_transmission,
            mtu: config.mtu,
            flow_limit: config.flow_limit,
            response_timeout: config.response_timeout,
            drc: config.drc,
            data_ack: config.data_ack,
            start_rate,
            link_retries: config.link_retries,
            cas1: config.cas1,
            link_idle: config.link_idle,
            max_links: config.max_links,
            link_first_data: config.link_first_data,
            hard_link_timeout: config.hard_link_timeout,
            default_ttl: config.default_ttl,
            confirm_wait: config.confirm_wait,
        })?;
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let n = config.addresses.len();
        let mut channels = BTreeMap::new();
        for a in 0..n {
            for b in 0..n {
                if a != b {
                    let cfg = config
                        .link_channels
                        .iter()
                        .rev()
                        .find(|l| l.from == a && l.to == b)
                        .map_or(&config.channel, |l| &l.channel);
                    channels.insert((a, b), Channel::new(cfg.clone(), &mut rng)?);
                }
            }
        }
        let nodes = (0..n)
            .map(|i| {
                let dup_filter = config.dup_filter.get(i).copied().unwrap_or(false);
                Ok(Slot {
                    node: Node::new(i, &setup, dup_filter)?,
                    not_before: Duration::ZERO,
                    clients: BTreeMap::new(),
                    lost_dpdus: 0,
                    link_events: Vec::new(),
                    down_until: Duration::ZERO,
                })
            })
            .collect::<Result<Vec<Slot>, NodeError>>()?;
        let scale = config.time_scale;
        let state = State {
            counters: Counters {
                nodes: vec![NodeCounters::default(); n],
                ..Counters::default()
            },
            config,
            nodes,
            channels,
            air: Air::new(),
            rng,
            trace: Vec::new(),
            last_sender: None,
            next_conn: 0,
            response_timeout: setup.response_timeout(),
            round: Vec::new(),
            arrivals: VecDeque::new(),
            turns: None,
            capture: None,
            watchers: Vec::new(),
            link_log: Vec::new(),
            link_watchers: Vec::new(),
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            notify: Notify::new(),
            start: Instant::now(),
            scale,
        });
        let task = tokio::spawn(run(Arc::clone(&shared)));
        Ok(Subnet {
            shared,
            _task: Arc::new(TaskGuard(task)),
        })
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.shared.lock().nodes.len()
    }

    /// Whether the subnetwork has no node (never true for a started one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The address of node `node`.
    pub fn address(&self, node: usize) -> Option<NodeAddress> {
        self.shared.lock().nodes.get(node).map(|n| n.node.address())
    }

    /// Simulated time now.
    pub fn now(&self) -> Duration {
        self.shared.now()
    }

    /// Counters so far.
    pub fn counters(&self) -> Counters {
        let st = self.shared.lock();
        let mut c = st.counters.clone();
        c.nodes = st
            .nodes
            .iter()
            .map(|n| NodeCounters {
                lost_dpdus: n.lost_dpdus,
                ..n.node.counters()
            })
            .collect();
        c.collisions = st.air.collisions();
        c
    }

    /// Every transmission so far.
    pub fn trace(&self) -> Vec<TraceRecord> {
        self.shared.lock().trace.clone()
    }

    /// Every transmission from now on, as each one ends (with its losses decided). The
    /// channel is unbounded, but it gets one record per transmission, at most one every
    /// key-up time of simulated time.
    pub fn watch_trace(&self) -> mpsc::UnboundedReceiver<TraceRecord> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.shared.lock().watchers.push(tx);
        rx
    }

    /// Every link event so far (a node declared its link to a peer lost, or heard the peer
    /// again), in order.
    pub fn link_events(&self) -> Vec<NodeLinkEvent> {
        self.shared.lock().link_log.clone()
    }

    /// Every link event from now on, as it happens. At most one per node and peer per
    /// transmission round.
    pub fn watch_links(&self) -> mpsc::UnboundedReceiver<NodeLinkEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.shared.lock().link_watchers.push(tx);
        rx
    }

    /// Starts recording every D_PDU put on the air from now on into a pcap written to `out`
    /// (see [`crate::capture`]), stamped `epoch` + simulated time. Replaces (and finishes)
    /// any capture already running; fails only if the pcap header cannot be written.
    pub fn capture_pcap<W: io::Write + Send + 'static>(
        &self,
        out: W,
        epoch: Duration,
    ) -> io::Result<()> {
        let capture = DpduCapture::new(out, epoch)?;
        let old = self.shared.lock().capture.replace(capture);
        if let Some(old) = old
            && let Err(e) = old.finish()
        {
            tracing::warn!("previous D_PDU capture ended with an error: {e}");
        }
        Ok(())
    }

    /// Makes `node` forget its ARQ receive state for `peer`, as a restart of the node would
    /// (RX LWE back to 0, held frames and the C_PDU being reassembled gone). The peer's
    /// sender notices from the ACKs that follow and realigns the window with a
    /// RESET/WIN-RESYNC exchange. `false` if there is no such link.
    pub fn forget_arq_receive_state(&self, node: usize, peer: usize) -> bool {
        let mut st = self.shared.lock();
        let forgot = st
            .nodes
            .get_mut(node)
            .is_some_and(|n| n.node.forget_arq_receive_state(peer));
        if forgot {
            self.shared.notify.notify_one();
        }
        forgot
    }

    /// Crashes `node` now and restarts it after `down`, as a STANAG 5066 server that went
    /// down and came back ([`Node::restart`]: every U_PDU it held, its ARQ windows and links
    /// are gone, and it sends each peer a FULL RESET CMD before its first ARQ exchange with
    /// it). Every client bound to it loses its SIS connection at once, as with a real server;
    /// while it is down it hears nothing and refuses connections (so it sends nothing), and
    /// its clients bind again once it is back. Of a transmission it was making, its receivers
    /// decode nothing more (its modem is fed as it goes). `false` if there is no such node.
    pub fn restart_node(&self, node: usize, down: Duration) -> bool {
        let now = self.shared.now();
        let mut st = self.shared.lock();
        let Some(slot) = st.nodes.get_mut(node) else {
            return false;
        };
        if let Err(e) = slot.node.restart(now + down) {
            tracing::error!(node, "node could not restart: {e}");
            return false;
        }
        // Each bound connection's task ends when its channel closes (`sis_server`).
        slot.clients.clear();
        slot.down_until = now + down;
        st.cut_transmission(node, now);
        tracing::info!(
            node,
            down_s = down.as_secs_f64(),
            "node restarted: its clients are disconnected"
        );
        drop(st);
        self.shared.notify.notify_one();
        true
    }

    /// Stops the capture and flushes it: the number of D_PDUs it recorded (0 if none was
    /// running), or the first error met while writing it.
    pub fn finish_capture(&self) -> io::Result<u64> {
        let capture = self.shared.lock().capture.take();
        capture.map_or(Ok(0), DpduCapture::finish)
    }
}

/// The scheduler: forever pick the next transmission round, play it, deliver what arrived.
async fn run(shared: Arc<Shared>) {
    loop {
        let now = shared.now();
        let next = {
            let mut st = shared.lock();
            st.expire(now);
            st.next_event(now)
        };
        match next {
            None => shared.notify.notified().await,
            Some(t) if t > now => {
                tokio::select! {
                    // A fixed order keeps runs repeatable (select! otherwise polls at random).
                    biased;
                    () = shared.sleep_until(t) => {}
                    () = shared.notify.notified() => {}
                }
            }
            Some(_) => {
                // Requests made at this very instant by tasks that have not run yet (another
                // client's U_PDUs, the other half of a batch) belong in this transmission:
                // which of them had run when the node keyed up would otherwise decide it, and
                // that is task order, not physics. So plan the round only once the runtime has
                // settled (paused time moves on only when every task is idle; tokio's timer
                // ticks in milliseconds), and plan it at `now`, as if keyed up then.
                shared.sleep_until(now + SETTLE).await;
                let done = shared.lock().start_round(now);
                if let Some(done) = done {
                    // Each receiver gets each D_PDU when the block holding its last byte is
                    // decoded (a node delivers a U_PDU then, not when the sender unkeys);
                    // turn-taking and DRC wait for the end of the round.
                    loop {
                        let next = shared.lock().next_arrival().filter(|&t| t < done);
                        let Some(t) = next else { break };
                        shared.sleep_until(t).await;
                        shared.lock().deliver_arrivals(t);
                    }
                    shared.sleep_until(done).await;
                    shared.lock().finish_round();
                }
            }
        }
    }
}

impl State {
    pub(crate) fn mtu(&self) -> u16 {
        self.config.mtu
    }

    pub(crate) fn node_address(&self, node: usize) -> Option<NodeAddress> {
        self.nodes.get(node).map(|n| n.node.address())
    }

    /// Whether `node` is down at `now` ([`Subnet::restart_node`]).
    pub(crate) fn is_down(&self, node: usize, now: Duration) -> bool {
        self.nodes.get(node).is_some_and(|n| n.down_at(now))
    }

    /// `node` went down at `now` in the middle of a transmission: its modem, fed as the
    /// transmission goes, stops sending data, so the D_PDUs of it that its receivers had not
    /// decoded by then are lost to every one of them (the trace marks them lost). The carrier
    /// is taken to run to its planned end, so turn taking is left as it was.
    fn cut_transmission(&mut self, node: usize, now: Duration) {
        let cut: Vec<usize> = self
            .round
            .iter()
            .enumerate()
            .filter(|(_, rt)| rt.sender == node && rt.sent.tx.end > now)
            .map(|(i, _)| i)
            .collect();
        if cut.is_empty() {
            return;
        }
        let mut lost = vec![0u64; self.round.len()];
        self.arrivals.retain(|a| {
            let keep = a.at <= now || !cut.contains(&a.tx);
            if !keep && let Some(n) = lost.get_mut(a.tx) {
                *n += a.dpdus.len() as u64;
            }
            keep
        });
        for &i in &cut {
            if let Some(rt) = self.round.get_mut(i) {
                rt.lost_count += lost.get(i).copied().unwrap_or(0);
                for d in rt.record.dpdus.iter_mut().filter(|d| d.at >= now) {
                    d.lost = true;
                }
                if !rt.record.why.is_empty() {
                    rt.record.why.push_str(", ");
                }
                rt.record.why.push_str("its node went down");
            }
        }
    }

    pub(crate) fn new_conn(&mut self) -> u64 {
        self.next_conn += 1;
        self.next_conn
    }

    /// Binds `sap` on `node` for connection `conn`, a client of `rank` (taking non-ARQ data
    /// with errors if `with_errors`), whose primitives go to `tx`; `false` if another
    /// connection holds it.
    pub(crate) fn bind(
        &mut self,
        node: usize,
        sap: SapId,
        rank: u8,
        with_errors: bool,
        conn: u64,
        tx: mpsc::UnboundedSender<Primitive>,
    ) -> bool {
        let Some(n) = self.nodes.get_mut(node) else {
            return false;
        };
        if !n.node.bind(sap, rank, conn, with_errors) {
            return false;
        }
        n.clients.insert(conn, tx);
        true
    }

    /// Releases whatever `conn` bound on `node`.
    pub(crate) fn unbind(&mut self, node: usize, conn: u64) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.node.unbind(conn);
            n.clients.remove(&conn);
        }
    }

    /// A hard-link primitive from client connection `conn` of `node` at `now`
    /// (S_HARD_LINK_ESTABLISH, TERMINATE, ACCEPT or REJECT; see [`crate::node`]'s `hard`);
    /// `false` for any other primitive.
    pub(crate) fn hard_link(
        &mut self,
        node: usize,
        conn: u64,
        p: &Primitive,
        now: Duration,
    ) -> bool {
        let Some(n) = self.nodes.get_mut(node) else {
            return false;
        };
        match *p {
            Primitive::HardLinkEstablish(link) => n.node.hard_link_establish(now, conn, link),
            Primitive::HardLinkTerminate { remote } => {
                n.node.hard_link_terminate(now, conn, remote)
            }
            Primitive::HardLinkAccept(link) => n.node.hard_link_accept(now, conn, link),
            Primitive::HardLinkReject { link, .. } => n.node.hard_link_reject(now, conn, link),
            _ => return false,
        }
        n.flush_events();
        true
    }

    /// Queues a U_PDU from a client of `node` (already checked against the MTU).
    pub(crate) fn submit(
        &mut self,
        node: usize,
        conn: u64,
        src_sap: SapId,
        req: &skywave_sis::UnidataRequest,
        mode: SendMode,
        now: Duration,
    ) -> Result<(), UnidataRejectReason> {
        let Some(n) = self.nodes.get_mut(node) else {
            return Err(UnidataRejectReason::DestinationNodeNotResponding);
        };
        let result = n.node.submit(now, conn, src_sap, req, mode);
        n.flush_events();
        result
    }

    /// Drops queued U_PDUs whose TTL ran out, and non-ARQ C_PDUs whose reception window
    /// closed.
    fn expire(&mut self, now: Duration) {
        for n in &mut self.nodes {
            n.node.handle_timeout(now);
            n.flush_events();
        }
        self.report_links();
    }

    /// Logs, keeps and hands to the watchers the link events the nodes raised.
    fn report_links(&mut self) {
        for (node, slot) in self.nodes.iter_mut().enumerate() {
            for event in slot.link_events.drain(..) {
                let ev = NodeLinkEvent { node, event };
                tracing::info!("{ev}");
                self.link_watchers.retain(|w| w.send(ev).is_ok());
                self.link_log.push(ev);
            }
        }
    }

    /// The next time something must happen: a node keys up or a TTL expires.
    fn next_event(&self, now: Duration) -> Option<Duration> {
        let ready = self
            .nodes
            .iter()
            .filter(|n| n.node.has_work())
            .map(|n| n.not_before.max(now));
        let ttl = self.nodes.iter().filter_map(|n| n.node.poll_timeout());
        ready.chain(ttl).min()
    }

    /// Keys up every node ready now or within one key-up time (they cannot hear each other
    /// yet); returns when the last receiver is done.
    fn start_round(&mut self, now: Duration) -> Option<Duration> {
        let key_up = self.config.modem.key_up;
        let starters: Vec<(usize, Duration)> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.node.has_work())
            .map(|(i, n)| (i, n.not_before.max(now)))
            .filter(|&(_, t)| t < now + key_up.max(Duration::from_nanos(1)))
            .collect();
        for (node, t) in starters {
            if let Some(rt) = self.build(node, t) {
                self.round.push(rt);
            } else if let Some(n) = self.nodes.get_mut(node) {
                // Work but nothing sendable (should not happen): do not spin on it.
                n.not_before = t + self.response_timeout;
            }
        }
        // Every transmission of the round is on the air now, so collisions are known; decide
        // what each receiver gets and when.
        let mut round = std::mem::take(&mut self.round);
        let mut arrivals = Vec::new();
        let senders: Vec<usize> = round.iter().map(|rt| rt.sender).collect();
        for (i, rt) in round.iter_mut().enumerate() {
            self.decide(i, rt, &senders, &mut arrivals);
        }
        self.round = round;
        // Stable: arrivals at the same instant keep the round's and the receivers' order.
        arrivals.sort_by_key(|a: &Arrival| a.at);
        self.arrivals = arrivals.into();
        self.round.iter().map(|r| r.sent.tx.receiver_done()).max()
    }

    /// Decides the fate of transmission `i` of the round at every other node: whether it
    /// collided, what each receiver heard, and the [`Arrival`]s of the D_PDUs each got. Every
    /// random draw of the round happens here, in a fixed order (the channel's blocks for each
    /// receiver in turn, each followed by that receiver's back-off), so that when D_PDUs are
    /// handed over does not change what the seeded channel does. `senders`: every sender of
    /// the round.
    fn decide(
        &mut self,
        i: usize,
        rt: &mut RoundTx,
        senders: &[usize],
        arrivals: &mut Vec<Arrival>,
    ) {
        rt.collided = self.air.collided(rt.id);
        // Carrier-sense slots to draw from: twice the nodes that might contend.
        let slots = u32::try_from(self.nodes.len().max(4) * 2).unwrap_or(u32::MAX);
        let sense = self.config.modem.key_up + self.config.modem.switching_time;
        if rt.collided {
            rt.collision_backoff = Duration::from_millis(100 * self.rng.random_range(1..=20u64));
            // A node that was deferring to the collided carriers (it has something to send)
            // contends at their end after a carrier-sense back-off, as after any carrier it
            // overhears (see finish_round): else every such node keys up the moment the
            // channel falls quiet, together with any collided sender whose own back-off ran
            // out under a longer transmission, and three nodes can collide like that for ever.
            for r in (0..self.nodes.len()).filter(|r| !senders.contains(r)) {
                if self.nodes.get(r).is_some_and(|n| n.node.has_work()) {
                    rt.receptions.push(Reception {
                        receiver: r,
                        got_any: false,
                        data_sent: 0,
                        data_lost: 0,
                        backoff: Some(sense.saturating_mul(self.rng.random_range(0..slots))),
                    });
                }
            }
            for d in &mut rt.record.dpdus {
                d.lost = true;
            }
            rt.lost_count = rt.sent.dpdus.len() as u64;
            rt.record.why = "collision".into();
            return;
        }
        let sender = rt.sender;
        let mut why: Vec<&str> = Vec::new();
        let block_bits = rt.sent.tx.block_bits.max(1);
        for r in (0..self.nodes.len()).filter(|&r| r != sender) {
            let (heard, fates) = self.receive(sender, r, rt);
            let mut reception = Reception {
                receiver: r,
                got_any: false,
                data_sent: 0,
                data_lost: 0,
                backoff: None,
            };
            let k = rt.receptions.len();
            let mut mine: Vec<Arrival> = Vec::new();
            // Whether any D_PDU for `r` decoded intact (a damaged one is nothing to answer).
            let mut intact_any = false;
            for (j, (sd, fate)) in rt.sent.dpdus.iter().zip(fates).enumerate() {
                if sd.dest != r && !self.member(sd.dest, r) {
                    continue;
                }
                let intact = fate == Fate::Intact;
                // Group traffic is not the sender's link to `r`: it does not count for that
                // link's data-rate decisions.
                if sd.dest == r && matches!(sd.dpdu_type, 0 | 2 | 4 | 7 | 8) {
                    reception.data_sent += 1;
                    reception.data_lost += usize::from(!intact);
                }
                // Anything not intact counts as lost, in the counters and the trace, even a
                // damaged segment that is handed over.
                let bytes = match fate {
                    Fate::Intact => sd.bytes.clone(),
                    Fate::Damaged(bytes) => {
                        mark_lost(
                            &mut rt.lost_count,
                            &mut rt.record,
                            j,
                            "bit errors",
                            &mut why,
                        );
                        bytes
                    }
                    Fate::Lost(reason) => {
                        mark_lost(&mut rt.lost_count, &mut rt.record, j, reason, &mut why);
                        continue;
                    }
                };
                intact_any |= intact;
                // Released with the block that holds its last byte.
                let last_bit = ((sd.offset + sd.bytes.len()) as u64 * 8).saturating_sub(1);
                let at = rt
                    .sent
                    .tx
                    .blocks
                    .get((last_bit / block_bits) as usize)
                    .map_or(rt.sent.tx.receiver_done(), |b| b.release);
                match mine.last_mut() {
                    Some(a) if a.at == at => a.dpdus.push((sd.at, bytes)),
                    _ => mine.push(Arrival {
                        at,
                        tx: i,
                        reception: k,
                        dpdus: vec![(sd.at, bytes)],
                    }),
                }
            }
            // A receiver that gets something addressed to it answers in its turn; one that
            // only heard the carrier (or got group data nobody answers) contends after a
            // random number of carrier-sense slots, as HF CSMA does (see finish_round).
            let answers = intact_any && rt.addressees.contains(&r);
            if heard && !answers {
                reception.backoff = Some(sense.saturating_mul(self.rng.random_range(0..slots)));
            }
            arrivals.extend(mine);
            rt.receptions.push(reception);
        }
        rt.record.why = why.join(", ");
    }

    /// When the round's next D_PDUs reach their receiver.
    fn next_arrival(&self) -> Option<Duration> {
        self.arrivals.front().map(|a| a.at)
    }

    /// Hands every receiver the D_PDUs it has decoded by `upto`.
    fn deliver_arrivals(&mut self, upto: Duration) {
        while self.arrivals.front().is_some_and(|a| a.at <= upto) {
            let Some(a) = self.arrivals.pop_front() else {
                break;
            };
            let Some(rt) = self.round.get_mut(a.tx) else {
                continue;
            };
            let from = rt.sender;
            let Some(reception) = rt.receptions.get_mut(a.reception) else {
                continue;
            };
            let Some(n) = self.nodes.get_mut(reception.receiver) else {
                continue;
            };
            if n.down_at(a.at) {
                // Its radio is off: the D_PDUs are lost to it.
                continue;
            }
            reception.got_any |= n.node.receive_dpdus(from, a.dpdus);
            n.flush_events();
        }
    }

    /// Has node `node` plan its transmission starting at `t`, and puts it on the air: the
    /// pcap, the [`Air`], the channel's counters.
    fn build(&mut self, node: usize, t: Duration) -> Option<RoundTx> {
        let slot = self.nodes.get_mut(node)?;
        let sent = slot.node.poll_transmit(t);
        // Feeding the ARQ may have released flow control or dropped U_PDUs, and the node may
        // have declared a link lost.
        slot.flush_events();
        self.report_links();
        let sent = sent?;
        let mut addressees: Vec<usize> = Vec::new();
        for d in &sent.dpdus {
            if d.dest < self.nodes.len() && !addressees.contains(&d.dest) {
                addressees.push(d.dest);
            }
        }
        let mut traced = Vec::with_capacity(sent.dpdus.len());
        for d in &sent.dpdus {
            if let Some(c) = &mut self.capture {
                c.record(d.at, &d.bytes);
            }
            traced.push(TracedDpdu {
                dpdu_type: d.dpdu_type,
                fsn: d.fsn,
                len: d.bytes.len(),
                eot: d.eot,
                at: d.at,
                retransmission: d.retransmission,
                lost: false,
            });
        }
        let tx = &sent.tx;
        let id = self.air.transmit(node, tx);
        let count = sent.dpdus.len() as u64;
        let c = &mut self.counters;
        c.transmissions += 1;
        c.bytes_on_air += sent.bytes as u64;
        c.dpdus_sent += count;
        c.retransmissions += sent.retransmissions;
        c.data_acks += sent.data_acks;
        c.busy_until = c.busy_until.max(tx.end);
        if self.last_sender.is_some_and(|s| s != node) {
            c.turnarounds += 1;
        }
        self.last_sender = Some(node);
        let record = TraceRecord {
            start: tx.start,
            end: tx.end,
            sender: node,
            rate_bps: tx.rate.bps(),
            bytes: sent.bytes,
            dpdus: traced,
            lost: false,
            why: String::new(),
        };
        Some(RoundTx {
            sender: node,
            sent,
            id,
            record,
            collided: false,
            receptions: Vec::new(),
            lost_count: 0,
            addressees,
            collision_backoff: Duration::ZERO,
        })
    }

    /// Ends the round: hands over what is left of its arrivals, tells every receiver its
    /// transmission ended, and sets who may key up when.
    fn finish_round(&mut self) {
        self.deliver_arrivals(Duration::MAX);
        let round = std::mem::take(&mut self.round);
        // When the last carrier of the round has ended for everyone.
        let quiet = round
            .iter()
            .map(|rt| rt.sent.tx.peer_may_transmit_at())
            .max()
            .unwrap_or_default();
        for mut rt in round {
            let sender = rt.sender;
            if rt.collided {
                // Whoever's turn it was, the order is broken: back to contention.
                self.turns = None;
                if let Some(n) = self.nodes.get_mut(sender) {
                    n.not_before = rt.sent.tx.end + rt.collision_backoff;
                    // The ACKs it carried never arrived: they are still owed.
                    n.node.transmission_collided(&rt.sent);
                }
                for rc in &rt.receptions {
                    if let (Some(n), Some(backoff)) = (self.nodes.get_mut(rc.receiver), rc.backoff)
                    {
                        n.not_before = n.not_before.max(quiet + backoff);
                    }
                }
            } else {
                let peer_may = rt.sent.tx.peer_may_transmit_at();
                let addressees = std::mem::take(&mut rt.addressees);
                let slot = self.response_timeout;
                let rate = rt.sent.modem.rate;
                // The addressees that got something and have something to say (an ACK owed,
                // data of their own): the ones whose turns the sender waits for.
                let mut answering: Vec<usize> = Vec::new();
                // Nodes whose answer to an earlier transmission is still due: their turn is
                // set below, not by what they overheard now.
                let waiting: Vec<usize> = self
                    .turns
                    .as_ref()
                    .map(|t| t.queue.clone())
                    .unwrap_or_default();
                for rc in &rt.receptions {
                    let r = rc.receiver;
                    let Some(n) = self.nodes.get_mut(r) else {
                        continue;
                    };
                    if n.down_at(rt.sent.tx.end) {
                        continue;
                    }
                    n.node.end_of_transmission(
                        sender,
                        rate,
                        rc.got_any,
                        rc.data_sent,
                        rc.data_lost,
                    );
                    n.flush_events();
                    if rc.got_any && addressees.contains(&r) && n.node.has_work() {
                        answering.push(r);
                    }
                }
                // In the order they were addressed (the receptions go by node index).
                answering.sort_by_key(|a| addressees.iter().position(|x| x == a));
                for rc in &rt.receptions {
                    let r = rc.receiver;
                    let Some(n) = self.nodes.get_mut(r) else {
                        continue;
                    };
                    let addressed = rc.got_any && addressees.contains(&r);
                    if let Some(k) = answering.iter().position(|&a| a == r) {
                        // Answers go in turn. An addressee with nothing to say takes no turn:
                        // it waits behind those that answer (below), else work that turns up
                        // for it later (a rejected link request asked again) keys up in the
                        // turn of an addressee that had an answer, and can do so each time.
                        let k = u32::try_from(k).unwrap_or(u32::MAX);
                        n.not_before = peer_may + slot.saturating_mul(k);
                    } else if addressed {
                        let turns = u32::try_from(answering.len()).unwrap_or(u32::MAX);
                        n.not_before = peer_may + slot.saturating_mul(turns);
                    } else if waiting.contains(&r) && r != sender {
                        // Its turn comes from the queue of answers below.
                    } else if let Some(backoff) = rc.backoff {
                        // Overheard a transmission for someone else, or got only group
                        // (non-ARQ) data that nobody answers: leave the addressees their
                        // turns to answer. A node that was deferring (it has something to
                        // send now, at the carrier's end) then contends after the
                        // carrier-sense back-off drawn in `decide`, so that nodes deferring to
                        // the same transmission do not all key up at its end. One with nothing
                        // to send owes no back-off: when its traffic comes, the channel has been
                        // idle and it keys up at once, as CSMA does on an idle channel (a ship's
                        // P_MUL ack in its own slot after another ship's ack).
                        let turns = u32::try_from(addressees.len()).unwrap_or(u32::MAX);
                        let backoff = if n.node.has_work() {
                            backoff
                        } else {
                            Duration::ZERO
                        };
                        n.not_before = n
                            .not_before
                            .max(peer_may + slot.saturating_mul(turns) + backoff);
                    }
                }
                // The sender waits for every addressee's turn before it sends again.
                let turns = u32::try_from(addressees.len().saturating_sub(1)).unwrap_or(u32::MAX);
                let wait = if rt.sent.sent_data {
                    peer_may + slot.saturating_mul(turns) + self.response_timeout
                } else {
                    peer_may
                };
                if let Some(n) = self.nodes.get_mut(sender) {
                    n.not_before = wait;
                }
                self.take_turns(sender, answering, peer_may);
            }
            if let Some(n) = self.nodes.get_mut(sender) {
                n.lost_dpdus += rt.lost_count;
            }
            self.counters.lost_dpdus += rt.lost_count;
            rt.record.lost = !rt.record.dpdus.is_empty() && rt.record.dpdus.iter().all(|d| d.lost);
            self.watchers.retain(|w| w.send(rt.record.clone()).is_ok());
            self.trace.push(rt.record);
        }
        self.report_links();
        let now_end = self.counters.busy_until;
        self.air
            .forget_before(now_end.saturating_sub(Duration::from_secs(300)));
    }

    /// Keeps the order of answers when one transmission addressed several nodes. `sender` just
    /// finished a transmission (the receivers and `sender` have their times from the usual
    /// rules already), `answering` are the nodes it addressed that got something from it and
    /// have something to send back (an ACK owed, data of their own), in order, and `peer_may`
    /// is when another node may key up after it. With one answering node (the point-to-point
    /// case) nothing changes. With several, each answers right after the one before it, not in
    /// a fixed slot that a long answer overruns (the next one then heard a carrier and backed
    /// off, and the first sender took the channel back before it ever answered); the first
    /// sender waits until every turn has come. An answer that was due and addressed nodes that
    /// answer it in turn queues them behind the turns still due (or starts a new order when
    /// none is), and its sender waits for them too.
    fn take_turns(&mut self, sender: usize, answering: Vec<usize>, peer_may: Duration) {
        let slot = self.response_timeout;
        let queue = match self.turns.take() {
            // An answer that was due: the others' turns follow it.
            Some(mut t) if t.queue.contains(&sender) && t.owner != sender => {
                t.queue.retain(|&q| q != sender);
                if t.queue.is_empty() && answering.len() > 1 {
                    // The last answer due addressed several nodes that answer in turn
                    // themselves (an ACK and a rejected link request, say): their order
                    // holds as any other's.
                    Some(Turns {
                        owner: sender,
                        queue: answering,
                    })
                } else {
                    // Those this answer addressed that answer it take their turns after the
                    // ones still due; else a node addressed by an answer that others' turns
                    // follow is only an overhearer of those turns, and can be put off by each
                    // of them for ever.
                    for a in answering {
                        if a != t.owner && !t.queue.contains(&a) {
                            t.queue.push(a);
                        }
                    }
                    (!t.queue.is_empty()).then_some(t)
                }
            }
            _ if answering.len() > 1 => Some(Turns {
                owner: sender,
                queue: answering,
            }),
            _ => None,
        };
        let Some(t) = queue else {
            return;
        };
        if t.owner != sender {
            for (k, &q) in t.queue.iter().enumerate() {
                if let Some(n) = self.nodes.get_mut(q) {
                    n.not_before =
                        peer_may + slot.saturating_mul(u32::try_from(k).unwrap_or(u32::MAX));
                }
            }
            // The first sender, and this one, wait until every turn has come.
            let turns = u32::try_from(t.queue.len()).unwrap_or(u32::MAX);
            for waiter in [t.owner, sender] {
                if let Some(n) = self.nodes.get_mut(waiter) {
                    n.not_before = n.not_before.max(peer_may + slot.saturating_mul(turns));
                }
            }
        }
        self.turns = Some(t);
    }

    /// Whether `dest` is a group (a destination past the nodes) that node `r` listens on.
    fn member(&self, dest: usize, r: usize) -> bool {
        dest.checked_sub(self.nodes.len())
            .and_then(|g| self.config.groups.get(g))
            .is_some_and(|g| g.members.contains(&r))
    }

    /// Fates, at receiver `r`, of each D_PDU of a transmission: (received, why not), and
    /// whether `r` heard the carrier at all.
    fn receive(&mut self, sender: usize, r: usize, rt: &RoundTx) -> (bool, Vec<Fate>) {
        let Some(channel) = self.channels.get(&(sender, r)) else {
            return (false, vec![Fate::Lost("no channel"); rt.sent.dpdus.len()]);
        };
        let decisions: Vec<_> = rt
            .sent
            .tx
            .blocks
            .iter()
            .map(|b| rt.sent.modem.receive_block(channel, b, &mut self.rng))
            .collect();
        let heard = decisions.iter().any(|d| !d.lost);
        let block_bits = rt.sent.tx.block_bits.max(1);
        let fates = rt
            .sent
            .dpdus
            .iter()
            .map(|sd| {
                let lo = sd.offset as u64 * 8;
                let hi = (sd.offset + sd.bytes.len()) as u64 * 8;
                // The D_PDU's bits that error bursts hit, counted from its first bit.
                let mut hit: Vec<Range<u64>> = Vec::new();
                for k in lo / block_bits..hi.div_ceil(block_bits) {
                    let Some(d) = decisions.get(k as usize) else {
                        continue;
                    };
                    if d.lost {
                        return Fate::Lost(if hit.is_empty() {
                            "block lost (outage or fade)"
                        } else {
                            "bit errors"
                        });
                    }
                    let base = k * block_bits;
                    let (from, to) = (lo.max(base), hi.min(base + block_bits));
                    for b in &d.bursts {
                        let (s, e) = ((base + b.start).max(from), (base + b.end).min(to));
                        if s < e {
                            hit.push(s - lo..e - lo);
                        }
                    }
                }
                if hit.is_empty() {
                    Fate::Intact
                } else {
                    damaged_non_arq(sd, &hit).map_or(Fate::Lost("bit errors"), Fate::Damaged)
                }
            })
            .collect();
        (heard, fates)
    }
}

/// Counts D_PDU `j` of a transmission lost to one receiver, marks it so in the trace, and
/// adds `reason` to the transmission's reasons.
fn mark_lost(
    lost_count: &mut u64,
    record: &mut TraceRecord,
    j: usize,
    reason: &'static str,
    why: &mut Vec<&'static str>,
) {
    *lost_count += 1;
    if let Some(t) = record.dpdus.get_mut(j) {
        t.lost = true;
    }
    if !why.contains(&reason) {
        why.push(reason);
    }
}

/// What a receiver's modem made of one D_PDU of a transmission.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fate {
    /// Decoded without error.
    Intact,
    /// A NON-ARQ DATA D_PDU (type 7 or 8) whose header came through but whose segment (or
    /// its CRC) has bit errors: the bytes as the receiver got them. Its header CRC holds, so
    /// the node reads it and keeps the segment for a client that takes data with errors
    /// (Annex C, C.3.2.8 and C.4.2); for any other it is as good as lost.
    Damaged(Vec<u8>),
    /// Not decoded, and why.
    Lost(&'static str),
}

/// The bytes a receiver got of NON-ARQ DATA D_PDU `sd` when error bursts hit bits `hit` (from
/// its first bit) outside its header; `None` for any other D_PDU type, or a hit header (whose
/// CRC then fails, so nothing of the frame can be trusted). About half the bits of a burst
/// are wrong ([`crate::modem::BlockDecision::bursts`]): every other bit is flipped, with no
/// random draw, so that what the seeded channel does elsewhere stays as it was.
fn damaged_non_arq(sd: &SentDpdu, hit: &[Range<u64>]) -> Option<Vec<u8>> {
    if !matches!(sd.dpdu_type, 7 | 8) {
        return None;
    }
    let sizes = *sd.bytes.get(5)?;
    let header_bits = (2 + usize::from(sizes >> 5) + usize::from(sizes & 0x1F)) as u64 * 8;
    if hit.iter().any(|r| r.start < header_bits) {
        return None;
    }
    let mut bytes = sd.bytes.clone();
    for r in hit {
        for bit in r.clone().filter(|b| b % 2 == 0) {
            if let Some(byte) = bytes.get_mut((bit / 8) as usize) {
                *byte ^= 0x80 >> (bit % 8);
            }
        }
    }
    Some(bytes)
}
