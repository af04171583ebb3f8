//! The emulated STANAG 5066 subnetwork: N nodes on one half-duplex HF frequency, in (virtual)
//! time. This is the discrete-event scheduler that joins the sans-IO layers below it
//! ([`crate::modem`], [`crate::channel`], [`crate::arq`], [`crate::dpdu`], [`crate::cpdu`],
//! [`crate::spdu`]) and the SIS server above it ([`crate::sis_server`]).
//!
//! Each node queues its clients' U_PDUs per destination by priority, wraps each in a DATA
//! S_PDU inside a DATA C_PDU (4 bytes of overhead), and hands them to one Annex C ARQ sender per
//! peer. Turn-taking follows deployed soft-link 5066: a node with data keys up and sends a
//! burst of D_PDUs (ACK-ONLY frames for what it owes first, then DATA-ONLY frames), bounded by
//! the ARQ window and the maximum transmission time (≤ 127.5 s, with EOT counting down in 0.5 s
//! units); the peer answers after the switching time with its ACKs and its own data; and so on.
//! A sender that hears no answer retransmits after a response timeout.
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
//! not responding). FULL RESET CMD and RESET TX WIN RQST are decoded but not used.
//!
//! Every transmission is planned with [`ModemConfig::plan`]; each receiver draws each
//! interleaver block's fate from its own channel direction; a D_PDU is lost if any block
//! carrying its bits is lost or has an error burst inside them. Transmissions that overlap
//! (two nodes keying up before either could hear the other) collide on the [`Air`] and are lost
//! for everyone; colliding nodes back off a random (seeded) time.
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
//! Simplifications (said here so nobody relies on them): the Annex B link is assumed up (no
//! CAS-1 exchanges); hard links are not modelled;
//! non-ARQ "with errors" is served as plain non-ARQ; data-rate change ([`Drc`]) picks one
//! rate per transmission (the slowest of the links it serves) and changes interleaver never; a U_PDU's TTL applies while it waits in its node's queue (once its segments are in
//! the ARQ window it is sent until acknowledged: no DROP); and a node only senses the carrier
//! between transmission rounds: a node that becomes ready while another transmits waits for
//! the end of that transmission (plus switching time) rather than colliding with it.
//! Collisions happen when nodes key up within one key-up time of each other.
//!
//! Several peers on one frequency (a base and its ships): a transmission's bytes are shared
//! max-min fairly among the peers with ARQ data waiting (a short message for one ship rides
//! beside a long batch for another); the nodes a transmission addresses answer one response
//! timeout apart, in the order of their first D_PDU in it, and its sender waits for all of them;
//! nodes that overheard it, or got only group (non-ARQ) data from it, wait for those turns and
//! then a random number (0 to twice the number of nodes) of carrier-sense slots of key-up plus
//! switching time. With two nodes none of this changes anything.
//!
//! Time: simulated time is a [`Duration`] since the subnetwork started; the scheduler sleeps
//! with `tokio::time::sleep_until`, so under `#[tokio::test(start_paused = true)]` a transfer
//! of hours runs in milliseconds, deterministically for a seed. With a time scale K > 1 (the
//! standalone binary), simulated time runs K times faster than the tokio clock.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skywave_sis::{
    NodeAddress, Primitive, Priority, SapId, TxMode, UnidataConfirm, UnidataIndication,
    UnidataRejectReason, UnidataRejected,
};
use thiserror::Error;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use crate::arq::{ArqError, ArqReceiver, ArqSender};
use crate::calibration::required_snr;
use crate::capture::DpduCapture;
use crate::channel::Fading;
use crate::channel::{Channel, ChannelConfig, ChannelError};
use crate::cpdu::Cpdu;
use crate::dpdu::{
    Address, Body, DataHeader, Dpdu, Eow, ExpDataHeader, NonArqHeader, RateRequest, Reset, Response,
};
use crate::modem::{Air, DataRate, Interleaver, ModemConfig, ModemError, Transmission, TxId};
use crate::spdu::{DataPci, Spdu};

/// Bytes a U_PDU gains on the way into the ARQ: 1 (DATA C_PDU) + 3 (DATA S_PDU without TTD).
pub const UPDU_OVERHEAD: usize = 4;

/// Longest transmission STANAG 5066 can announce (EOT 255 × 0.5 s).
pub const MAX_TRANSMISSION: Duration = Duration::from_millis(127_500);

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
    /// Every link starts, and stays, at [`matched_rate`]: the rate the channel's mean SNR
    /// supports.
    Matched,
}

/// Margin over the published required SNR that [`matched_rate`] keeps, dB.
pub const MATCHED_MARGIN_DB: f64 = 3.0;

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
}

/// A group address of the subnetwork and the nodes that listen on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// The group address (`NodeAddress::group`).
    pub address: NodeAddress,
    /// Member nodes (indices into [`SubnetConfig::addresses`]).
    pub members: Vec<usize>,
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

    /// Defaults for these nodes, modem and channel: window 128, 1023-byte segments, 127.5 s
    /// maximum transmission, MTU 2048, flow limit 64, seed 1, response timeout of key-up +
    /// preamble + two blocks + switching time.
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
    /// D_PDUs sent by this node that their addressee did not receive.
    pub lost_dpdus: u64,
    /// U_PDUs delivered to clients of this node.
    pub delivered: u64,
    /// U_PDUs dropped because their TTL expired before they entered the ARQ.
    pub expired: u64,
    /// U_PDUs dropped by the duplicate-datagram filter ([`SubnetConfig::dup_filter`]).
    pub duplicates_dropped: u64,
    /// U_PDUs this node sent in non-ARQ mode (each counted once, whatever its copies).
    pub non_arq_sent: u64,
    /// Non-ARQ U_PDUs this node received complete and delivered (also in `delivered`).
    pub non_arq_delivered: u64,
    /// Non-ARQ U_PDUs this node began to receive but discarded incomplete when their
    /// reception window closed.
    pub non_arq_incomplete: u64,
    /// Changes of this node's own transmit rate to a peer (adaptive or on a DRC request).
    pub rate_changes: u64,
    /// DATA-ACK D_PDUs (type 2) sent: data frames carrying an acknowledgement.
    pub data_acks: u64,
    /// RESET/WIN-RESYNC exchanges this node started (its ACKs for a peer's window kept
    /// falling outside what it had sent).
    pub resets: u64,
    /// U_PDUs this node had on the air when it reset its transmit window: their delivery is
    /// unknown, so they were rejected to their clients instead of being sent again.
    pub reset_lost: u64,
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
    /// Collisions counted by the [`Air`].
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
                "node {i}: {} transmissions, {} bytes on air, {} D_PDUs sent, {} retransmissions, {} collisions, {} D_PDUs lost, {} U_PDUs delivered, {} expired, {} duplicates dropped, non-ARQ {} sent {} delivered {} incomplete, {} rate changes, {} DATA-ACK, {} resets ({} U_PDUs lost)",
                n.transmissions,
                n.bytes_on_air,
                n.dpdus_sent,
                n.retransmissions,
                n.collisions,
                n.lost_dpdus,
                n.delivered,
                n.expired,
                n.duplicates_dropped,
                n.non_arq_sent,
                n.non_arq_delivered,
                n.non_arq_incomplete,
                n.rate_changes,
                n.data_acks,
                n.resets,
                n.reset_lost
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

/// Where one client connection's primitives go.
#[derive(Debug)]
pub(crate) struct Binding {
    pub(crate) conn: u64,
    pub(crate) tx: mpsc::UnboundedSender<Primitive>,
    pub(crate) queued: usize,
    pub(crate) flow_off: bool,
}

/// A U_PDU waiting in a node's queue.
#[derive(Debug, Clone)]
pub(crate) struct Queued {
    pub(crate) seq: u64,
    pub(crate) dest: usize,
    pub(crate) src_sap: SapId,
    pub(crate) dest_sap: SapId,
    /// Queue order: the priority (expedited U_PDUs have their own queue discipline).
    pub(crate) rank: u8,
    pub(crate) priority: Priority,
    pub(crate) deadline: Option<Duration>,
    pub(crate) confirm: bool,
    pub(crate) expedited: bool,
    /// Non-ARQ: `Some(extra copies)`; `None` for ARQ.
    pub(crate) non_arq: Option<u8>,
    pub(crate) conn: u64,
    pub(crate) updu: Bytes,
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
    /// Segments by offset.
    got: BTreeMap<usize, Vec<u8>>,
    /// When the reception window closes (simulated time).
    deadline: Duration,
    /// Already delivered: later copies are ignored until the deadline.
    done: bool,
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
    q: Queued,
    failed: bool,
}

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
}

/// ACKs outside the transmit window, in a row, after which a sender resets the window.
pub const STALE_ACKS_RESET: u8 = 2;

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

/// Data transmissions without any ACK after which an adaptive sender lowers its rate.
pub const UNANSWERED_STEP_DOWN: u8 = 3;

#[derive(Debug)]
struct Node {
    address: NodeAddress,
    dpdu_address: Address,
    bindings: BTreeMap<u8, Binding>,
    queue: Vec<Queued>,
    links: BTreeMap<usize, Link>,
    non_arq_out: VecDeque<NonArqOut>,
    /// Keyed by (sending node, C_PDU ID).
    non_arq_in: BTreeMap<(usize, u16), NonArqIn>,
    next_cpdu_id: u16,
    not_before: Duration,
    counters: NodeCounters,
}

struct SentDpdu {
    offset: usize,
    len: usize,
    dest: usize,
    bytes: Vec<u8>,
}

struct RoundTx {
    sender: usize,
    /// The modem as keyed for this transmission (its rate may differ from the configured one).
    modem: ModemConfig,
    tx: Transmission,
    id: TxId,
    dpdus: Vec<SentDpdu>,
    sent_data: bool,
    record: TraceRecord,
}

/// Everything the scheduler and the SIS connections share.
pub(crate) struct State {
    config: SubnetConfig,
    nodes: Vec<Node>,
    channels: BTreeMap<(usize, usize), Channel>,
    air: Air,
    rng: ChaCha8Rng,
    trace: Vec<TraceRecord>,
    counters: Counters,
    last_sender: Option<usize>,
    next_seq: u64,
    next_conn: u64,
    dpdu_overhead: usize,
    /// Bytes of D_PDUs one maximum transmission holds, per usable rate.
    budgets: BTreeMap<DataRate, usize>,
    /// The configured response timeout, raised to the slowest rate DRC may use.
    response_timeout: Duration,
    round: Vec<RoundTx>,
    capture: Option<DpduCapture>,
    watchers: Vec<mpsc::UnboundedSender<TraceRecord>>,
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
        ArqSender::new(config.window, config.segment_size)?;
        let biggest = usize::from(config.mtu) + UPDU_OVERHEAD;
        if biggest.div_ceil(config.segment_size) > usize::from(config.window) {
            return Err(NetError::MtuTooLarge {
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
        let probe = Dpdu {
            eow: Eow::NONE,
            eot: 0,
            destination: Address::new(crate::dpdu::MAX_ADDRESS).unwrap_or_default(),
            source: Address::new(crate::dpdu::MAX_ADDRESS).unwrap_or_default(),
            body: Body::DataOnly {
                header: DataHeader::default(),
                segment: vec![0],
            },
        };
        let dpdu_overhead = probe.encoded_len().saturating_sub(1);
        if config.max_transmission > MAX_TRANSMISSION || config.max_transmission <= fixed {
            return Err(NetError::BadMaxTransmission(config.max_transmission));
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
            return Err(NetError::BadMaxTransmission(config.max_transmission));
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
        let start_rate = match config.drc {
            Drc::Matched => {
                let r = matched_rate(modem, &config.channel);
                if budgets.contains_key(&r) {
                    r
                } else {
                    modem.rate
                }
            }
            _ => modem.rate,
        };
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
        let mut nodes = Vec::with_capacity(n);
        for (i, &address) in config.addresses.iter().enumerate() {
            let mut links = BTreeMap::new();
            for peer in (0..n).filter(|&p| p != i) {
                links.insert(
                    peer,
                    Link {
                        sender: ArqSender::new(config.window, config.segment_size)?,
                        receiver: ArqReceiver::new(biggest + 16),
                        owes_ack: false,
                        unconfirmed: BTreeMap::new(),
                        exp_out: None,
                        exp_next_id: 0,
                        exp_in: None,
                        owes_exp_ack: false,
                        tx_rate: start_rate,
                        drc_request: None,
                        drc_response_owed: false,
                        clean_streak: 0,
                        unanswered: 0,
                        stale_acks: 0,
                        reset_out: None,
                        next_reset_id: 0,
                        reset_ack_owed: None,
                    },
                );
            }
            nodes.push(Node {
                address,
                dpdu_address: Address::new(address.bits()).unwrap_or_default(),
                bindings: BTreeMap::new(),
                queue: Vec::new(),
                links,
                non_arq_out: VecDeque::new(),
                non_arq_in: BTreeMap::new(),
                next_cpdu_id: 0,
                not_before: Duration::ZERO,
                counters: NodeCounters::default(),
            });
        }
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
            next_seq: 0,
            next_conn: 0,
            dpdu_overhead,
            budgets,
            response_timeout,
            round: Vec::new(),
            capture: None,
            watchers: Vec::new(),
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
        self.shared.lock().nodes.get(node).map(|n| n.address)
    }

    /// Simulated time now.
    pub fn now(&self) -> Duration {
        self.shared.now()
    }

    /// Counters so far.
    pub fn counters(&self) -> Counters {
        let st = self.shared.lock();
        let mut c = st.counters.clone();
        c.nodes = st.nodes.iter().map(|n| n.counters).collect();
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
        let Some(link) = st.nodes.get_mut(node).and_then(|n| n.links.get_mut(&peer)) else {
            return false;
        };
        link.receiver.reset(0);
        link.owes_ack = false;
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
                    () = shared.sleep_until(t) => {}
                    () = shared.notify.notified() => {}
                }
            }
            Some(_) => {
                let done = shared.lock().start_round(now);
                if let Some(done) = done {
                    shared.sleep_until(done).await;
                    shared.lock().finish_round();
                }
            }
        }
    }
}

fn send_to(node: &Node, sap: SapId, conn: Option<u64>, p: Primitive) {
    if let Some(b) = node.bindings.get(&sap.get())
        && conn.is_none_or(|c| c == b.conn)
    {
        let _ = b.tx.send(p);
    }
}

impl State {
    pub(crate) fn mtu(&self) -> u16 {
        self.config.mtu
    }

    pub(crate) fn node_address(&self, node: usize) -> Option<NodeAddress> {
        self.nodes.get(node).map(|n| n.address)
    }

    pub(crate) fn new_conn(&mut self) -> u64 {
        self.next_conn += 1;
        self.next_conn
    }

    /// Binds `sap` on `node` for connection `conn`; `false` if another connection holds it.
    pub(crate) fn bind(
        &mut self,
        node: usize,
        sap: SapId,
        conn: u64,
        tx: mpsc::UnboundedSender<Primitive>,
    ) -> bool {
        let Some(n) = self.nodes.get_mut(node) else {
            return false;
        };
        if n.bindings.contains_key(&sap.get()) {
            return false;
        }
        n.bindings.insert(
            sap.get(),
            Binding {
                conn,
                tx,
                queued: 0,
                flow_off: false,
            },
        );
        true
    }

    /// Releases whatever `conn` bound on `node`.
    pub(crate) fn unbind(&mut self, node: usize, conn: u64) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.bindings.retain(|_, b| b.conn != conn);
        }
    }

    /// Queues a U_PDU from a client of `node` (already checked against the MTU).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn submit(
        &mut self,
        node: usize,
        conn: u64,
        src_sap: SapId,
        req: &skywave_sis::UnidataRequest,
        confirm: bool,
        expedited: bool,
        non_arq: Option<u8>,
        now: Duration,
    ) -> Result<(), UnidataRejectReason> {
        let group = self
            .config
            .groups
            .iter()
            .position(|g| g.address == req.dest)
            .map(|g| self.nodes.len() + g);
        let dest = match group {
            Some(g) => g,
            None => self
                .nodes
                .iter()
                .position(|n| n.address == req.dest)
                .ok_or(UnidataRejectReason::DestinationNodeNotResponding)?,
        };
        // ARQ cannot serve a group address (no single peer acknowledges); the client must ask
        // for non-ARQ, and is told so rather than left waiting for a confirm that cannot come.
        if group.is_some() && non_arq.is_none() {
            return Err(UnidataRejectReason::TxModeNotSpecified);
        }
        let confirm = confirm && group.is_none();
        let src = self.nodes.get(node).map(|n| n.address).unwrap_or_default();
        if dest == node {
            // Loopback: deliver at once, as a real node does for its own address.
            let mode = match (non_arq.is_some(), expedited) {
                (false, false) => Kind::Arq,
                (true, false) => Kind::NonArq,
                (false, true) => Kind::Expedited,
                (true, true) => Kind::ExpeditedNonArq,
            };
            let delivered = self.deliver(
                dest,
                src,
                src_sap,
                req.dest_sap,
                req.priority,
                &req.updu,
                mode,
                None,
            );
            return if delivered {
                if confirm && let Some(n) = self.nodes.get(node) {
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
                    send_to(n, src_sap, Some(conn), p);
                }
                Ok(())
            } else {
                Err(UnidataRejectReason::DestinationSapNotBound)
            };
        }
        if !confirm && self.is_duplicate(node, dest, req.dest_sap, &req.updu) {
            tracing::debug!(node, dest, "duplicate U_PDU dropped by the filter");
            if let Some(n) = self.nodes.get_mut(node) {
                n.counters.duplicates_dropped += 1;
            }
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
            deadline: req.ttl.as_duration().map(|d| now + d),
            confirm,
            expedited,
            non_arq,
            conn,
            updu: req.updu.clone(),
        };
        let limit = self.config.flow_limit;
        if let Some(n) = self.nodes.get_mut(node) {
            n.queue.push(q);
            if let Some(b) = n.bindings.get_mut(&src_sap.get())
                && b.conn == conn
            {
                b.queued += 1;
                if b.queued > limit && !b.flow_off {
                    b.flow_off = true;
                    let _ = b.tx.send(Primitive::DataFlowOff);
                }
            }
        }
        Ok(())
    }

    /// Whether node `node` filters duplicates and still holds (queued, or in the ARQ and not
    /// yet acknowledged) a U_PDU for `dest`/`sap` with these bytes.
    fn is_duplicate(&self, node: usize, dest: usize, sap: SapId, updu: &[u8]) -> bool {
        if !self.config.dup_filter.get(node).copied().unwrap_or(false) {
            return false;
        }
        let Some(n) = self.nodes.get(node) else {
            return false;
        };
        let same = |q: &Queued| q.dest == dest && q.dest_sap == sap && q.updu.as_ref() == updu;
        n.queue.iter().any(same)
            || n.links.get(&dest).is_some_and(|l| {
                l.unconfirmed.values().any(|a| same(&a.q))
                    || l.exp_out.as_ref().is_some_and(|e| same(&e.q))
            })
    }

    /// One U_PDU of a client was acknowledged, expired or dropped: it no longer counts
    /// against the client's flow-control limit.
    fn dequeued(&mut self, node: usize, q: &Queued) {
        let on_at = self.config.flow_limit / 2;
        if let Some(b) = self
            .nodes
            .get_mut(node)
            .and_then(|n| n.bindings.get_mut(&q.src_sap.get()))
            && b.conn == q.conn
        {
            b.queued = b.queued.saturating_sub(1);
            if b.flow_off && b.queued <= on_at {
                b.flow_off = false;
                let _ = b.tx.send(Primitive::DataFlowOn);
            }
        }
    }

    fn reject(&self, node: usize, q: &Queued, reason: UnidataRejectReason) {
        let Some(n) = self.nodes.get(node) else {
            return;
        };
        let dest = self
            .nodes
            .get(q.dest)
            .map(|d| d.address)
            .unwrap_or_default();
        let r = UnidataRejected {
            reason,
            dest_sap: q.dest_sap,
            dest,
            updu_part: q.updu.clone(),
        };
        let p = if q.expedited {
            Primitive::ExpeditedUnidataRequestRejected(r)
        } else {
            Primitive::UnidataRequestRejected(r)
        };
        send_to(n, q.src_sap, Some(q.conn), p);
    }

    /// Drops queued U_PDUs whose TTL ran out, and non-ARQ C_PDUs whose reception window
    /// closed.
    fn expire(&mut self, now: Duration) {
        for node in 0..self.nodes.len() {
            let Some(n) = self.nodes.get_mut(node) else {
                continue;
            };
            let before = n.non_arq_in.len();
            let mut incomplete = 0;
            n.non_arq_in.retain(|_, p| {
                let open = p.deadline > now;
                incomplete += u64::from(!open && !p.done);
                open
            });
            if n.non_arq_in.len() != before {
                n.counters.non_arq_incomplete += incomplete;
            }
            let (dead, live): (Vec<Queued>, Vec<Queued>) = std::mem::take(&mut n.queue)
                .into_iter()
                .partition(|q| q.deadline.is_some_and(|d| d <= now));
            n.queue = live;
            n.counters.expired += dead.len() as u64;
            for q in dead {
                tracing::debug!(node, seq = q.seq, "U_PDU TTL expired before transmission");
                if q.confirm {
                    self.reject(node, &q, UnidataRejectReason::TtlExpired);
                }
                self.dequeued(node, &q);
            }
        }
    }

    fn has_work(&self, node: usize) -> bool {
        self.nodes.get(node).is_some_and(|n| {
            !n.queue.is_empty()
                || !n.non_arq_out.is_empty()
                || n.links.values().any(|l| {
                    l.owes_ack
                        || l.owes_exp_ack
                        || l.exp_out.is_some()
                        || !l.sender.is_idle()
                        || l.reset_out.is_some()
                        || l.reset_ack_owed.is_some()
                })
        })
    }

    /// The next time something must happen: a node keys up or a TTL expires.
    fn next_event(&self, now: Duration) -> Option<Duration> {
        let ready = (0..self.nodes.len())
            .filter(|&i| self.has_work(i))
            .filter_map(|i| self.nodes.get(i).map(|n| n.not_before.max(now)));
        let ttl = self
            .nodes
            .iter()
            .flat_map(|n| n.queue.iter().filter_map(|q| q.deadline));
        ready.chain(ttl).min()
    }

    /// Keys up every node ready now or within one key-up time (they cannot hear each other
    /// yet); returns when the last receiver is done.
    fn start_round(&mut self, now: Duration) -> Option<Duration> {
        let key_up = self.config.modem.key_up;
        let starters: Vec<(usize, Duration)> = (0..self.nodes.len())
            .filter(|&i| self.has_work(i))
            .filter_map(|i| self.nodes.get(i).map(|n| (i, n.not_before.max(now))))
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
        self.round.iter().map(|r| r.tx.receiver_done()).max()
    }

    /// Moves queued U_PDUs into the ARQ, best priority first, while each link has room.
    fn feed_arq(&mut self, node: usize) {
        let window = usize::from(self.config.window);
        let segment = self.config.segment_size.max(1);
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        n.queue
            .sort_by(|a, b| b.rank.cmp(&a.rank).then(a.seq.cmp(&b.seq)));
        let mut moved = Vec::new();
        let mut keep = Vec::new();
        // Free window room per link. A U_PDU enters the ARQ only when all its segments fit,
        // so that U_PDUs waiting for room stay here, where priority and TTL still apply.
        let mut room: BTreeMap<usize, usize> = n
            .links
            .iter()
            .map(|(&p, l)| (p, window.saturating_sub(l.sender.in_flight())))
            .collect();
        let mut blocked: Vec<usize> = Vec::new();
        for q in std::mem::take(&mut n.queue) {
            if q.non_arq.is_some() || q.expedited {
                // Served by feed_non_arq or feed_expedited.
                keep.push(q);
                continue;
            }
            let Some(link) = n.links.get_mut(&q.dest) else {
                continue;
            };
            let need = (q.updu.len() + UPDU_OVERHEAD).div_ceil(segment).max(1);
            let free = room.entry(q.dest).or_default();
            if blocked.contains(&q.dest) || need > *free {
                // Keep the order: nothing overtakes a U_PDU waiting for room on its link.
                blocked.push(q.dest);
                keep.push(q);
                continue;
            }
            *free -= need;
            let spdu = Spdu::Data {
                pci: DataPci {
                    priority: q.priority.get(),
                    source_sap: q.src_sap.get(),
                    destination_sap: q.dest_sap.get(),
                    client_delivery_confirm: false,
                    ttd: None,
                },
                updu: q.updu.to_vec(),
            };
            let pushed = spdu
                .encode()
                .ok()
                .and_then(|s| Cpdu::Data(s).encode().ok())
                .map(|c| link.sender.push(c));
            match pushed {
                Some(Ok(id)) => {
                    link.unconfirmed.insert(id, InArq { q, failed: false });
                }
                other => {
                    tracing::warn!(node, ?other, "U_PDU could not enter the ARQ; dropped");
                    moved.push(q);
                }
            }
        }
        n.queue = keep;
        for q in moved {
            self.dequeued(node, &q);
        }
    }

    /// Moves queued non-ARQ U_PDUs, best priority first, into NON-ARQ DATA D_PDUs (each
    /// segment repeated as many times as asked) waiting for air time.
    fn feed_non_arq(&mut self, node: usize) {
        let segment = self.config.segment_size.max(1);
        let nodes = self.nodes.len();
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        let (mut out, keep): (Vec<Queued>, Vec<Queued>) = std::mem::take(&mut n.queue)
            .into_iter()
            .partition(|q| q.non_arq.is_some());
        n.queue = keep;
        // Expedited first, then by priority, then in order of submission.
        out.sort_by(|a, b| {
            (b.expedited, b.rank)
                .cmp(&(a.expedited, a.rank))
                .then(a.seq.cmp(&b.seq))
        });
        let mut exp_frames = Vec::new();
        let mut done = Vec::new();
        for q in out {
            let spdu = Spdu::Data {
                pci: DataPci {
                    priority: q.priority.get(),
                    source_sap: q.src_sap.get(),
                    destination_sap: q.dest_sap.get(),
                    client_delivery_confirm: false,
                    ttd: None,
                },
                updu: q.updu.to_vec(),
            };
            let Some(cpdu) = spdu.encode().ok().and_then(|s| Cpdu::Data(s).encode().ok()) else {
                tracing::warn!(node, "non-ARQ U_PDU could not be encoded; dropped");
                done.push(q);
                continue;
            };
            let Ok(size) = u16::try_from(cpdu.len()) else {
                tracing::warn!(node, "non-ARQ C_PDU over 65535 bytes; dropped");
                done.push(q);
                continue;
            };
            let cpdu_id = n.next_cpdu_id;
            n.next_cpdu_id = (n.next_cpdu_id + 1) % 4096;
            let copies = 1 + usize::from(q.non_arq.unwrap_or(0));
            let mut frames = VecDeque::new();
            for (k, chunk) in cpdu.chunks(segment).enumerate() {
                let header = NonArqHeader {
                    cpdu_id,
                    deliver_in_order: true,
                    // Destinations past the nodes are the groups (see `State::submit`).
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
                n.non_arq_out.push_back(o);
            }
            n.counters.non_arq_sent += 1;
            done.push(q);
        }
        // Behind expedited C_PDUs already waiting, ahead of every normal one.
        let at = n.non_arq_out.iter().take_while(|o| o.expedited).count();
        for (k, o) in exp_frames.into_iter().enumerate() {
            n.non_arq_out.insert(at + k, o);
        }
        for q in done {
            self.dequeued(node, &q);
        }
    }

    /// Starts the next expedited ARQ C_PDU on every link whose previous one is acknowledged
    /// (stop-and-wait per C_PDU; a fresh sender restarts the FSNs at 0).
    fn feed_expedited(&mut self, node: usize) {
        let window = self.config.window;
        let segment = self.config.segment_size;
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        let mut dropped = Vec::new();
        for (&peer, link) in n.links.iter_mut() {
            if link.exp_out.is_some() {
                continue;
            }
            let Some(pos) = n
                .queue
                .iter()
                .enumerate()
                .filter(|(_, q)| q.expedited && q.non_arq.is_none() && q.dest == peer)
                .min_by_key(|(_, q)| q.seq)
                .map(|(i, _)| i)
            else {
                continue;
            };
            let q = n.queue.remove(pos);
            let spdu = Spdu::Data {
                pci: DataPci {
                    priority: q.priority.get(),
                    source_sap: q.src_sap.get(),
                    destination_sap: q.dest_sap.get(),
                    client_delivery_confirm: false,
                    ttd: None,
                },
                updu: q.updu.to_vec(),
            };
            let started = spdu
                .encode()
                .ok()
                .and_then(|s| Cpdu::Data(s).encode().ok())
                .and_then(|c| {
                    let mut sender = ArqSender::new(window, segment).ok()?;
                    sender.push(c).ok()?;
                    Some(sender)
                });
            match started {
                Some(sender) => {
                    link.exp_out = Some(ExpOut {
                        sender,
                        cpdu_id: link.exp_next_id,
                        q,
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
            self.dequeued(node, &q);
        }
    }

    /// Plans node `node`'s transmission starting at `t`.
    fn build(&mut self, node: usize, t: Duration) -> Option<RoundTx> {
        self.feed_arq(node);
        self.feed_non_arq(node);
        self.feed_expedited(node);
        let overhead = self.dpdu_overhead;
        let window = usize::from(self.config.window);
        if self.config.drc == Drc::Adaptive {
            let ladder: Vec<DataRate> = self.budgets.keys().copied().collect();
            if let Some(n) = self.nodes.get_mut(node) {
                for l in n.links.values_mut() {
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
                        n.counters.rate_changes += 1;
                    }
                }
            }
        }
        // One rate per transmission: the slowest of the links it serves.
        let rate = {
            let n = self.nodes.get(node)?;
            n.links
                .iter()
                .filter(|(p, l)| {
                    l.owes_ack
                        || l.owes_exp_ack
                        || l.exp_out.is_some()
                        || !l.sender.is_idle()
                        || l.drc_response_owed
                        || l.reset_out.is_some()
                        || l.reset_ack_owed.is_some()
                        || n.non_arq_out.iter().any(|o| o.dest == **p)
                        || n.queue.iter().any(|q| q.dest == **p)
                })
                .map(|(_, l)| l.tx_rate)
                .min()
                .unwrap_or(self.config.modem.rate)
        };
        let (rate, mut budget) = match self.budgets.get(&rate) {
            Some(&b) => (rate, b),
            None => (
                self.config.modem.rate,
                self.budgets
                    .get(&self.config.modem.rate)
                    .copied()
                    .unwrap_or_default(),
            ),
        };
        let full_budget = budget;
        let modem = ModemConfig {
            rate,
            ..self.config.modem.clone()
        };
        let interleaver = interleaver_code(modem.interleaver);
        let n = self.nodes.get_mut(node)?;
        let src = n.dpdu_address;
        let mut frames: Vec<(usize, Dpdu, bool)> = Vec::new();
        let mut dests: BTreeMap<usize, Address> = BTreeMap::new();
        for (&peer, _) in n.links.iter() {
            let addr = self
                .config
                .addresses
                .get(peer)
                .map(|a| a.bits())
                .unwrap_or(0);
            dests.insert(peer, Address::new(addr).unwrap_or_default());
        }
        let nodes = self.config.addresses.len();
        for (g, group) in self.config.groups.iter().enumerate() {
            dests.insert(
                nodes + g,
                Address::new(group.address.bits()).unwrap_or_default(),
            );
        }
        let data_ack = self.config.data_ack;
        // Peers whose ACK waits to ride on DATA-ACK frames (ACK-ONLY if no data goes after all).
        let mut deferred: BTreeMap<usize, Dpdu> = BTreeMap::new();
        let mut sent_data = false;
        for (&peer, link) in n.links.iter_mut() {
            let dest = dests.get(&peer).copied().unwrap_or_default();
            if let Some(id) = link.reset_ack_owed.take() {
                let d = Dpdu {
                    eow: Eow::NONE,
                    eot: 0,
                    destination: dest,
                    source: src,
                    body: Body::ResetWinResync(Reset {
                        reset_ack: true,
                        reset_frame_id: id,
                        ..Reset::default()
                    }),
                };
                budget = budget.saturating_sub(d.encoded_len());
                frames.push((peer, d, false));
            }
            if let Some(id) = link.reset_out {
                // Command the peer's RX window back to 0, where this node's TX window now
                // starts; resent in every transmission until the RESET ACK comes.
                let d = Dpdu {
                    eow: Eow::NONE,
                    eot: 0,
                    destination: dest,
                    source: src,
                    body: Body::ResetWinResync(Reset {
                        reset_rx_win_command: true,
                        new_rx_lwe: 0,
                        reset_frame_id: id,
                        ..Reset::default()
                    }),
                };
                budget = budget.saturating_sub(d.encoded_len());
                frames.push((peer, d, false));
                // It expects an answer, like data.
                sent_data = true;
            }
        }
        for (&peer, link) in n.links.iter_mut() {
            if link.owes_ack {
                link.owes_ack = false;
                let d = Dpdu {
                    eow: Eow::NONE,
                    eot: 0,
                    destination: dests.get(&peer).copied().unwrap_or_default(),
                    source: src,
                    body: Body::AckOnly(link.receiver.ack()),
                };
                // Reserve its room either way: a DATA-ACK carries the same ACK bytes.
                budget = budget.saturating_sub(d.encoded_len());
                if data_ack && link.reset_out.is_none() && !link.sender.is_idle() {
                    deferred.insert(peer, d);
                } else {
                    frames.push((peer, d, false));
                }
            }
        }
        for (&peer, link) in n.links.iter_mut() {
            if link.owes_exp_ack {
                link.owes_exp_ack = false;
                let Some((_, rx)) = &link.exp_in else {
                    continue;
                };
                let d = Dpdu {
                    eow: Eow::NONE,
                    eot: 0,
                    destination: dests.get(&peer).copied().unwrap_or_default(),
                    source: src,
                    body: Body::ExpAckOnly(rx.ack()),
                };
                budget = budget.saturating_sub(d.encoded_len());
                frames.push((peer, d, false));
            }
        }
        // Expedited data before anything else.
        for (&peer, link) in n.links.iter_mut() {
            let Some(e) = &mut link.exp_out else {
                continue;
            };
            if budget < overhead + 1 {
                break;
            }
            for seg in e.sender.next_segments_within(window, budget, overhead) {
                let d = Dpdu {
                    eow: Eow::NONE,
                    eot: 0,
                    destination: dests.get(&peer).copied().unwrap_or_default(),
                    source: src,
                    body: Body::ExpDataOnly {
                        header: ExpDataHeader {
                            start: seg.header.start,
                            end: seg.header.end,
                            cpdu_id: e.cpdu_id,
                            fsn: seg.header.fsn,
                        },
                        segment: seg.data,
                    },
                };
                budget = budget.saturating_sub(d.encoded_len());
                sent_data = true;
                frames.push((peer, d, seg.retransmission));
            }
        }
        // Non-ARQ data after the ACKs and before ARQ data; whatever does not fit waits for
        // the node's next transmission. (Its reception window is set once the plan is known.)
        while let Some(out) = n.non_arq_out.front_mut() {
            let Some((header, seg)) = out.frames.front() else {
                n.non_arq_out.pop_front();
                continue;
            };
            if budget < overhead + seg.len() {
                break;
            }
            let d = Dpdu {
                eow: Eow::NONE,
                eot: 0,
                destination: dests.get(&out.dest).copied().unwrap_or_default(),
                source: src,
                body: if out.expedited {
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
            };
            budget = budget.saturating_sub(d.encoded_len());
            frames.push((out.dest, d, false));
            out.frames.pop_front();
            if out.frames.is_empty() {
                n.non_arq_out.pop_front();
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
        let demands: Vec<(usize, usize)> = n
            .links
            .iter_mut()
            .filter(|(_, l)| l.reset_out.is_none())
            .map(|(&p, l)| (p, l.sender.ready_bytes(window, overhead)))
            .filter(|&(_, d)| d > 0)
            .map(|(p, d)| (p, d + ack_extra(&p)))
            .collect();
        let shares = fair_shares(budget, &demands);
        for (&peer, link) in n.links.iter_mut() {
            if budget < overhead + 1 {
                break;
            }
            if link.reset_out.is_some() {
                // No data until the peer's receive window is realigned.
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
                let d = Dpdu {
                    eow: Eow::NONE,
                    eot: 0,
                    destination: dests.get(&peer).copied().unwrap_or_default(),
                    source: src,
                    body,
                };
                budget = budget.saturating_sub(d.encoded_len());
                sent_data = true;
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
            let Some(link) = n.links.get(peer) else {
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
        for l in n.links.values_mut() {
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
        let per_tx = self.config.max_transmission + self.response_timeout * 2;
        let half_secs =
            |d: Duration| u16::try_from(d.as_millis().div_ceil(500)).unwrap_or(u16::MAX);
        let extra: BTreeMap<u16, u16> = self
            .nodes
            .get(node)
            .map(|n| {
                n.non_arq_out
                    .iter()
                    .filter_map(|o| {
                        let (h, _) = o.frames.front()?;
                        let rest: usize = o.frames.iter().map(|(_, s)| s.len() + overhead).sum();
                        let txs =
                            u32::try_from(rest.div_ceil(full_budget.max(1))).unwrap_or(u32::MAX);
                        Some((h.cpdu_id, half_secs(per_tx.saturating_mul(txs))))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut dpdus = Vec::new();
        let mut traced = Vec::new();
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
            if let Some(c) = &mut self.capture {
                c.record(at, &bytes);
            }
            traced.push(TracedDpdu {
                dpdu_type: d.body.dpdu_type(),
                fsn,
                len: bytes.len(),
                eot: d.eot,
                at,
                retransmission,
                lost: false,
            });
            dpdus.push(SentDpdu {
                offset,
                len: bytes.len(),
                dest: peer,
                bytes,
            });
            offset += dpdus.last().map_or(0, |s| s.len);
        }
        let id = self.air.transmit(node, &tx);
        let count = dpdus.len() as u64;
        if let Some(n) = self.nodes.get_mut(node) {
            n.counters.transmissions += 1;
            n.counters.bytes_on_air += offset as u64;
            n.counters.dpdus_sent += count;
            n.counters.retransmissions += retrans;
            n.counters.data_acks += data_acks;
        }
        let c = &mut self.counters;
        c.transmissions += 1;
        c.bytes_on_air += offset as u64;
        c.dpdus_sent += count;
        c.retransmissions += retrans;
        c.data_acks += data_acks;
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
            bytes: offset,
            dpdus: traced,
            lost: false,
            why: String::new(),
        };
        Some(RoundTx {
            sender: node,
            modem,
            tx,
            id,
            dpdus,
            sent_data,
            record,
        })
    }

    /// Decides what every receiver got from the round's transmissions and acts on it.
    fn finish_round(&mut self) {
        let round = std::mem::take(&mut self.round);
        for mut rt in round {
            let collided = self.air.collided(rt.id);
            let sender = rt.sender;
            let mut why: Vec<&str> = Vec::new();
            let mut lost_count = 0u64;
            if collided {
                why.push("collision");
                for d in &mut rt.record.dpdus {
                    d.lost = true;
                }
                lost_count = rt.dpdus.len() as u64;
                let backoff = Duration::from_millis(100 * self.rng.random_range(1..=20u64));
                if let Some(n) = self.nodes.get_mut(sender) {
                    n.counters.collisions += 1;
                    n.not_before = rt.tx.end + backoff;
                    // The ACKs it carried never arrived: they are still owed.
                    for (sd, t) in rt.dpdus.iter().zip(&rt.record.dpdus) {
                        if let Some(l) = n.links.get_mut(&sd.dest) {
                            match t.dpdu_type {
                                1 | 2 => l.owes_ack = true,
                                5 => l.owes_exp_ack = true,
                                3 => {
                                    if let Ok((d, _)) = Dpdu::decode(&sd.bytes)
                                        && let Body::ResetWinResync(rs) = d.body
                                        && rs.reset_ack
                                    {
                                        l.reset_ack_owed = Some(rs.reset_frame_id);
                                    }
                                }
                                _ => {}
                            }
                        }
                    }
                }
            } else {
                let peer_may = rt.tx.peer_may_transmit_at();
                // The individual nodes this transmission addressed, in the order of their first
                // D_PDU. Each may owe an answer; on one frequency they answer one after another,
                // one response slot apart, or their answers would key up together and collide
                // every time (with one addressee, the point-to-point case, nothing changes).
                let mut addressees: Vec<usize> = Vec::new();
                for sd in &rt.dpdus {
                    if sd.dest < self.nodes.len() && !addressees.contains(&sd.dest) {
                        addressees.push(sd.dest);
                    }
                }
                let slot = self.response_timeout;
                // Carrier-sense slots to draw from: twice the nodes that might contend.
                let slots = u32::try_from(self.nodes.len().max(4) * 2).unwrap_or(u32::MAX);
                for r in (0..self.nodes.len()).filter(|&r| r != sender) {
                    let (heard, fates) = self.receive(sender, r, &rt);
                    let mut got_any = false;
                    let mut data: Vec<Dpdu> = Vec::new();
                    let mut acks: Vec<Dpdu> = Vec::new();
                    let mut non_arq: Vec<(Duration, Dpdu)> = Vec::new();
                    let mut exp: Vec<Dpdu> = Vec::new();
                    let mut eows: Vec<Eow> = Vec::new();
                    let mut resets: Vec<Reset> = Vec::new();
                    let (mut data_sent, mut data_lost) = (0usize, 0usize);
                    for (i, (sd, ok)) in rt.dpdus.iter().zip(&fates).enumerate() {
                        if sd.dest != r && !self.member(sd.dest, r) {
                            continue;
                        }
                        // Group traffic is not the sender's link to `r`: it does not count
                        // for that link's data-rate decisions.
                        if sd.dest == r
                            && rt
                                .record
                                .dpdus
                                .get(i)
                                .is_some_and(|t| matches!(t.dpdu_type, 0 | 2 | 4 | 7 | 8))
                        {
                            data_sent += 1;
                            data_lost += usize::from(!ok.0);
                        }
                        if !ok.0 {
                            lost_count += 1;
                            if let Some(t) = rt.record.dpdus.get_mut(i) {
                                t.lost = true;
                            }
                            if !why.contains(&ok.1) {
                                why.push(ok.1);
                            }
                            continue;
                        }
                        match Dpdu::decode(&sd.bytes) {
                            Ok((d, _)) => {
                                got_any = true;
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
                                        let at = rt.record.dpdus.get(i).map_or(rt.tx.end, |t| t.at);
                                        non_arq.push((at, d));
                                    }
                                    _ => data.push(d),
                                }
                            }
                            Err(e) => tracing::error!("own D_PDU failed to decode: {e}"),
                        }
                    }
                    let had_data = !data.is_empty();
                    let decoded = got_any.then_some(rt.modem.rate);
                    self.on_drc(r, sender, &eows, decoded, data_sent, data_lost);
                    self.on_resets(r, sender, &resets);
                    self.on_expedited(r, sender, exp);
                    self.on_non_arq(r, sender, non_arq);
                    self.on_data(r, sender, data);
                    self.on_acks(r, sender, acks);
                    if let Some(n) = self.nodes.get_mut(r) {
                        if had_data && let Some(l) = n.links.get_mut(&sender) {
                            l.owes_ack = true;
                        }
                        let place = addressees.iter().position(|&a| a == r);
                        if let (true, Some(k)) = (got_any, place) {
                            let k = u32::try_from(k).unwrap_or(u32::MAX);
                            n.not_before = peer_may + slot.saturating_mul(k);
                        } else if heard {
                            // Overheard a transmission for someone else, or got only group
                            // (non-ARQ) data that nobody answers: leave the addressees their
                            // turns to answer, then contend after a random number of
                            // carrier-sense slots (as HF CSMA does), so that nodes deferring to
                            // the same transmission do not all key up at its end.
                            let turns = u32::try_from(addressees.len()).unwrap_or(u32::MAX);
                            let sense = self.config.modem.key_up + self.config.modem.switching_time;
                            let backoff = sense.saturating_mul(self.rng.random_range(0..slots));
                            n.not_before = n
                                .not_before
                                .max(peer_may + slot.saturating_mul(turns) + backoff);
                        }
                    }
                }
                // The sender waits for every addressee's turn before it sends again.
                let turns = u32::try_from(addressees.len().saturating_sub(1)).unwrap_or(u32::MAX);
                let wait = if rt.sent_data {
                    peer_may + slot.saturating_mul(turns) + self.response_timeout
                } else {
                    peer_may
                };
                if let Some(n) = self.nodes.get_mut(sender) {
                    n.not_before = wait;
                }
            }
            if let Some(n) = self.nodes.get_mut(sender) {
                n.counters.lost_dpdus += lost_count;
            }
            self.counters.lost_dpdus += lost_count;
            rt.record.lost = !rt.record.dpdus.is_empty() && rt.record.dpdus.iter().all(|d| d.lost);
            rt.record.why = why.join(", ");
            self.watchers.retain(|w| w.send(rt.record.clone()).is_ok());
            self.trace.push(rt.record);
        }
        let now_end = self.counters.busy_until;
        self.air
            .forget_before(now_end.saturating_sub(Duration::from_secs(300)));
    }

    /// Whether `dest` is a group (a destination past the nodes) that node `r` listens on.
    fn member(&self, dest: usize, r: usize) -> bool {
        dest.checked_sub(self.nodes.len())
            .and_then(|g| self.config.groups.get(g))
            .is_some_and(|g| g.members.contains(&r))
    }

    /// Fates, at receiver `r`, of each D_PDU of a transmission: (received, why not), and
    /// whether `r` heard the carrier at all.
    fn receive(
        &mut self,
        sender: usize,
        r: usize,
        rt: &RoundTx,
    ) -> (bool, Vec<(bool, &'static str)>) {
        let Some(channel) = self.channels.get(&(sender, r)) else {
            return (false, vec![(false, "no channel"); rt.dpdus.len()]);
        };
        let decisions: Vec<_> = rt
            .tx
            .blocks
            .iter()
            .map(|b| rt.modem.receive_block(channel, b, &mut self.rng))
            .collect();
        let heard = decisions.iter().any(|d| !d.lost);
        let block_bits = rt.tx.block_bits.max(1);
        let fates = rt
            .dpdus
            .iter()
            .map(|sd| {
                let lo = sd.offset as u64 * 8;
                let hi = (sd.offset + sd.len) as u64 * 8;
                let mut fate = (true, "");
                for k in lo / block_bits..hi.div_ceil(block_bits) {
                    let Some(d) = decisions.get(k as usize) else {
                        continue;
                    };
                    let base = k * block_bits;
                    let local = lo.max(base) - base..hi.min(base + block_bits) - base;
                    if d.lost {
                        fate = (false, "block lost (outage or fade)");
                        break;
                    }
                    if d.damages(&local) {
                        fate = (false, "bit errors");
                        break;
                    }
                }
                fate
            })
            .collect();
        (heard, fates)
    }

    /// Data-rate change at node `r` after a transmission from `sender`, `decoded` (at that
    /// rate) if `r` decoded any D_PDU of it: acts on the DRC EOWs it carried and, with
    /// adaptive DRC, answers at the rate it hears (Tx = Rx) and judges how many of the `sent`
    /// data D_PDUs addressed to `r` were `lost`, asking `sender` for another rate when it is
    /// time. A node that decoded nothing knows nothing and does nothing.
    fn on_drc(
        &mut self,
        r: usize,
        sender: usize,
        eows: &[Eow],
        decoded: Option<DataRate>,
        sent: usize,
        lost: usize,
    ) {
        let adaptive = self.config.drc == Drc::Adaptive;
        let Some(n) = self.nodes.get_mut(r) else {
            return;
        };
        let Some(link) = n.links.get_mut(&sender) else {
            return;
        };
        for eow in eows {
            match eow {
                Eow::DrcRequest(req) => {
                    let wanted = req.rate_bps().and_then(DataRate::from_bps);
                    if let Some(w) = wanted.filter(|w| self.budgets.contains_key(w)) {
                        if w != link.tx_rate {
                            link.tx_rate = w;
                            n.counters.rate_changes += 1;
                            tracing::debug!(r, sender, bps = w.bps(), "DRC: transmit rate changed");
                        }
                        link.drc_response_owed = true;
                    }
                }
                Eow::DrcResponse(resp) if resp.response == 0 => link.drc_request = None,
                _ => {}
            }
        }
        let Some(rate) = decoded.filter(|_| adaptive) else {
            return;
        };
        // Follow the peer's rate (Tx = Rx), unless this very transmission asked us to change.
        let asked = eows.iter().any(|e| matches!(e, Eow::DrcRequest(_)));
        if !asked && link.tx_rate != rate && self.budgets.contains_key(&rate) {
            link.tx_rate = rate;
            n.counters.rate_changes += 1;
        }
        if sent == 0 {
            return;
        }
        // The ladder of usable rates, slowest first.
        let ladder: Vec<DataRate> = self.budgets.keys().copied().collect();
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

    /// NON-ARQ DATA D_PDUs that node `r` received from `sender`, with their arrival times:
    /// reassembles each C_PDU and delivers it once, when every byte has arrived within its
    /// reception window. Nothing is acknowledged.
    fn on_non_arq(&mut self, r: usize, sender: usize, frames: Vec<(Duration, Dpdu)>) {
        let mut complete = Vec::new();
        let Some(n) = self.nodes.get_mut(r) else {
            return;
        };
        for (at, d) in frames {
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
            let entry = n.non_arq_in.entry(key).or_insert_with(|| NonArqIn {
                size,
                expedited,
                group,
                got: BTreeMap::new(),
                deadline,
                done: false,
            });
            if entry.size != size {
                // A new C_PDU reusing the ID (mod 4096) after the old one was abandoned.
                *entry = NonArqIn {
                    size,
                    expedited,
                    group,
                    got: BTreeMap::new(),
                    deadline,
                    done: false,
                };
            }
            if entry.done {
                continue;
            }
            entry.deadline = entry.deadline.max(deadline);
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
                complete.push((cpdu, entry.expedited, entry.group));
            }
        }
        let src = self
            .nodes
            .get(sender)
            .map(|n| n.address)
            .unwrap_or_default();
        for (c, expedited, group) in complete {
            let kind = if expedited {
                Kind::ExpeditedNonArq
            } else {
                Kind::NonArq
            };
            let updu = match Cpdu::decode(&c).map(|c| match c {
                Cpdu::Data(s) => Spdu::decode(&s).ok(),
                _ => None,
            }) {
                Ok(Some(Spdu::Data { pci, updu })) => (pci, updu),
                other => {
                    tracing::warn!(r, ?other, "non-ARQ C_PDU without a DATA S_PDU; dropped");
                    continue;
                }
            };
            let (pci, updu) = updu;
            let (Ok(ssap), Ok(dsap), Ok(prio)) = (
                SapId::new(pci.source_sap),
                SapId::new(pci.destination_sap),
                Priority::new(pci.priority),
            ) else {
                continue;
            };
            // No DATA DELIVERY FAIL in non-ARQ mode: an unbound SAP just drops it.
            if self.deliver(r, src, ssap, dsap, prio, &updu, kind, group)
                && let Some(n) = self.nodes.get_mut(r)
            {
                n.counters.non_arq_delivered += 1;
            }
        }
    }

    fn on_data(&mut self, r: usize, sender: usize, data: Vec<Dpdu>) {
        let Some(link) = self.nodes.get_mut(r).and_then(|n| n.links.get_mut(&sender)) else {
            return;
        };
        for d in &data {
            if let Body::DataOnly { header, segment }
            | Body::DataAck {
                header, segment, ..
            } = &d.body
            {
                link.receiver.on_segment(header, segment);
            }
        }
        let cpdus = link.receiver.take_delivered();
        self.on_cpdus(r, sender, cpdus, Kind::Arq);
    }

    /// EXPEDITED DATA-ONLY and EXPEDITED ACK-ONLY D_PDUs that node `r` received from
    /// `sender`: the stop-and-wait expedited ARQ of Annex C, apart from normal data.
    fn on_expedited(&mut self, r: usize, sender: usize, frames: Vec<Dpdu>) {
        let biggest = usize::from(self.config.mtu) + UPDU_OVERHEAD + 16;
        let dest = self
            .config
            .addresses
            .get(sender)
            .copied()
            .unwrap_or_default();
        let Some(n) = self.nodes.get_mut(r) else {
            return;
        };
        let Some(link) = n.links.get_mut(&sender) else {
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
        if let Some(e) = finished {
            if e.q.confirm && !e.failed {
                let c = UnidataConfirm {
                    dest_sap: e.q.dest_sap,
                    dest,
                    updu_part: e.q.updu.clone(),
                };
                send_to(
                    n,
                    e.q.src_sap,
                    Some(e.q.conn),
                    Primitive::ExpeditedUnidataRequestConfirm(c),
                );
            }
            self.dequeued(r, &e.q);
        }
        self.on_cpdus(r, sender, cpdus, Kind::Expedited);
    }

    /// C_PDUs that node `r`'s ARQ (normal or expedited) reassembled from `sender`'s data.
    fn on_cpdus(&mut self, r: usize, sender: usize, cpdus: Vec<Vec<u8>>, kind: Kind) {
        let src = self
            .nodes
            .get(sender)
            .map(|n| n.address)
            .unwrap_or_default();
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
                    let (Ok(ssap), Ok(dsap), Ok(prio)) = (
                        SapId::new(pci.source_sap),
                        SapId::new(pci.destination_sap),
                        Priority::new(pci.priority),
                    ) else {
                        continue;
                    };
                    if !self.deliver(r, src, ssap, dsap, prio, &updu, kind, None) {
                        // Report back to the source node with a DATA DELIVERY FAIL S_PDU.
                        let fail = Spdu::DataDeliveryFail {
                            reason: 1,
                            source_sap: pci.source_sap,
                            destination_sap: pci.destination_sap,
                            updu,
                        };
                        if let Some(link) =
                            self.nodes.get_mut(r).and_then(|n| n.links.get_mut(&sender))
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
                }) => self.on_fail(r, sender, source_sap, destination_sap, &updu),
                Ok(other) => tracing::debug!(?other, "S_PDU not handled by the emulator"),
                Err(e) => tracing::warn!("bad S_PDU: {e}"),
            }
        }
    }

    /// A DATA DELIVERY FAIL came back: reject the matching U_PDU (reason 2) if it asked for
    /// confirmation and was not confirmed yet.
    fn on_fail(&mut self, node: usize, dest: usize, src_sap: u8, dest_sap: u8, updu: &[u8]) {
        let Some(link) = self
            .nodes
            .get_mut(node)
            .and_then(|n| n.links.get_mut(&dest))
        else {
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
                .filter(|e| !e.failed && matches(&e.q))?;
            e.failed = true;
            Some(e.q.clone())
        });
        let Some(q) = hit else {
            tracing::debug!("DATA DELIVERY FAIL for a U_PDU already answered");
            return;
        };
        if q.confirm {
            self.reject(node, &q, UnidataRejectReason::DestinationSapNotBound);
        }
    }

    fn on_acks(&mut self, r: usize, sender: usize, acks: Vec<Dpdu>) {
        let Some(n) = self.nodes.get_mut(r) else {
            return;
        };
        let Some(link) = n.links.get_mut(&sender) else {
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
            link.stale_acks = 0;
            link.reset_out = Some(link.next_reset_id);
            link.next_reset_id = link.next_reset_id.wrapping_add(1);
            n.counters.resets += 1;
            for id in link.sender.reset() {
                if let Some(a) = link.unconfirmed.remove(&id) {
                    lost_at_reset.push(a);
                }
            }
            n.counters.reset_lost += lost_at_reset.len() as u64;
            tracing::debug!(
                r,
                sender,
                lost = lost_at_reset.len(),
                "ARQ window reset: RESET/WIN-RESYNC"
            );
        }
        let dest = self
            .config
            .addresses
            .get(sender)
            .copied()
            .unwrap_or_default();
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
            send_to(n, a.q.src_sap, Some(a.q.conn), p);
        }
        for a in &done {
            self.dequeued(r, &a.q);
        }
        for a in &lost_at_reset {
            // Sent, perhaps delivered, perhaps not: never sent again (that could deliver it
            // twice), so its client hears it was not delivered as far as the node knows.
            if !a.failed {
                self.reject(r, &a.q, UnidataRejectReason::DestinationNodeNotResponding);
            }
            self.dequeued(r, &a.q);
        }
    }

    /// RESET/WIN-RESYNC D_PDUs that node `r` received from `sender`: a RESET RX WIN CMND
    /// moves `r`'s receive window for `sender` to NEW RX LWE (dropping what it held) and is
    /// answered with a RESET ACK carrying the same RESET FRAME ID (also when the command is
    /// repeated); a RESET ACK for `r`'s own pending command ends it, and data flows again.
    /// (Emulated nodes never send FULL RESET CMD or RESET TX WIN RQST, so those are ignored.)
    fn on_resets(&mut self, r: usize, sender: usize, resets: &[Reset]) {
        let Some(link) = self.nodes.get_mut(r).and_then(|n| n.links.get_mut(&sender)) else {
            return;
        };
        for rs in resets {
            if rs.reset_rx_win_command {
                // A repeated command (our RESET ACK was lost) resets again: harmless, since
                // its sender sends no data until it has the RESET ACK.
                link.receiver.reset(rs.new_rx_lwe);
                link.reset_ack_owed = Some(rs.reset_frame_id);
                link.owes_ack = false;
            } else if rs.reset_ack && link.reset_out == Some(rs.reset_frame_id) {
                link.reset_out = None;
                link.stale_acks = 0;
            }
        }
    }

    /// Hands a U_PDU to the client bound on `dest_sap` of node `r`; `false` if none is.
    #[allow(clippy::too_many_arguments)]
    /// Hands a U_PDU to the client bound on `dest_sap` at node `r`; `group` is the group
    /// address it was sent to, if it was (the indication's destination then).
    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &mut self,
        r: usize,
        src: NodeAddress,
        src_sap: SapId,
        dest_sap: SapId,
        priority: Priority,
        updu: &[u8],
        kind: Kind,
        group: Option<NodeAddress>,
    ) -> bool {
        let Some(n) = self.nodes.get_mut(r) else {
            return false;
        };
        let Some(b) = n.bindings.get(&dest_sap.get()) else {
            return false;
        };
        let ind = UnidataIndication {
            priority,
            dest_sap,
            dest: group.unwrap_or(n.address),
            tx_mode: kind.tx_mode(),
            src_sap,
            src,
            errored: Vec::new(),
            missing: Vec::new(),
            rockwell_form: false,
            updu: Bytes::copy_from_slice(updu),
        };
        let p = if kind.expedited() {
            Primitive::ExpeditedUnidataIndication(ind)
        } else {
            Primitive::UnidataIndication(ind)
        };
        let _ = b.tx.send(p);
        n.counters.delivered += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::fair_shares;

    #[test]
    fn a_shared_transmission_is_split_max_min_fairly() {
        // One peer: everything it asks, up to the budget.
        assert_eq!(fair_shares(1000, &[(1, 400)])[&1], 400);
        assert_eq!(fair_shares(1000, &[(1, 4000)])[&1], 1000);
        // A short message beside a long batch gets all it asks; the batch gets the rest.
        let s = fair_shares(10_000, &[(1, 50_000), (2, 600)]);
        assert_eq!((s[&1], s[&2]), (9_400, 600));
        // Three long batches split evenly.
        let s = fair_shares(9_000, &[(1, 50_000), (2, 60_000), (3, 70_000)]);
        assert_eq!((s[&1], s[&2], s[&3]), (3_000, 3_000, 3_000));
        assert!(fair_shares(100, &[]).is_empty());
    }
}
