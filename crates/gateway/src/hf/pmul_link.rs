//! The multicast link: fleet mail by ACP 142 P_MUL over STANAG 5066 or UDP/IP, both ways.
//!
//! One task per bearer ([`Carrier`]): per SIS server, bound to SAP 2, T-MMHS (STANAG 4406 annex
//! E's TMI-1 is P_MUL, each PDU one non-ARQ U_PDU behind the 6-byte UDOP header with APP_ID
//! 0x2000, the form Wireshark's SIS dissector hands to its P_MUL dissector,
//! `reference/s5066-sis.md` section 2.2); and one over UDP/IP when the gateway has `[pmul_ip]`
//! (ACP 142's own binding, one PDU per datagram on its four ports: see `pmul_ip`). The P_MUL
//! core, the spool side and the timers are the same; the carrier gives each node its P_MUL id
//! (the 5066 address, or the IP address), sends and receives. Over IP the link also takes
//! dynamic groups (Request, Announce, Release PDUs) for a message to some of a group's ships,
//! when the group has a pool, and joins those announced to it.
//!
//! Sending (a base): for every `[[group]]` of the routing table the task takes from the spool the
//! messages [`RoutingTable::plan`] sends by multicast (recipients on two or more ships of the
//! group, mail for the group itself, or a ship under EMCON), encodes each as an RFC 8494 MULE
//! body (envelope and message, zlib-compressed) and gives it to a `skywave_pmul` [`Sender`]: its
//! Data_PDUs go once (plus the group's blind repeats) to the group's 5066 address, whatever the
//! number of ships; each ship's Ack_PDU names the PDUs it lacks and only those are sent again.
//! Over 5066 a repair round also waits while the node still holds what this gateway handed it
//! (unicast mail queued behind the multicast, [`super::sis::Backlog`]): until that is on the air
//! the ships cannot have answered, and a round would list ships whose acks are still to come.
//! A ship's recipients are delivered when its ack is complete; a ship that never acknowledges
//! (or an expired message) leaves them deferred, and the next attempt goes to the ships still
//! missing it (by unicast if only one of them is left and it keeps no EMCON). The HMTP and CFTP
//! links leave such messages alone: they ask the same plan (see `HfContext::take_due`).
//!
//! A group over 5066 may keep a radio schedule (its `schedule` in the routing table): a message
//! starts only inside a window, when it fits in the time left with its blind repeats, what the
//! node still holds, and the ships' ack slots ([`HfContext::group_admission`], the rule a
//! peer's sessions keep); repair rounds and EMCON repeats due outside a window are postponed to
//! the next ([`Sender::postpone_rounds`]). Mail at or above its `schedule_bypass` goes at any
//! time.
//!
//! Receiving (a ship): a `skywave_pmul` [`Receiver`] reassembles messages addressed to this
//! node (whatever the group address they came on), and acknowledges them after a delay that
//! grows with the node's place in the destination list, so the ships' acks follow each other
//! instead of colliding. A message is taken as HMTP mail is: recipients this gateway delivers on
//! its LAN are accepted (a `Received:` header naming the sending peer), those it refuses for
//! good get a DSN from here, recipients routed elsewhere belong to the other ships of the
//! multicast and are ignored, and the de-duplication memory (on disk, so a restart keeps it)
//! drops a second copy. A message that cannot be kept (a spool error, a temporary refusal) is
//! taken back from the receiver, so no ack goes and the sender repairs: nothing acknowledged is
//! lost.
//!
//! EMCON: while the gateway keeps EMCON ([`HfContext::emcon`]) this task puts nothing on the
//! air: no new messages, no repairs, no acks. The receiver owes its acks and sends them when
//! EMCON ends; senders keep their timers and send what is due then.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use skywave_pmul::groups::{GroupEvent, GroupManager};
use skywave_pmul::mule::{self, MuleEnvelope, MuleLimits, MuleMessage, MuleRecipient};
use skywave_pmul::pdu::Pdu;
use skywave_pmul::receiver::{Receiver, ReceiverConfig, ReceiverEvent};
use skywave_pmul::sender::{DestState, Destination, Sender, SenderConfig};
use skywave_route::{
    AckMode, Destination as RouteTo, Group, GroupBearer, Peer, RoutingTable, pmul_ip_id,
    pool_address,
};
use skywave_sis::{NodeAddress, SapId, ServiceType};
use skywave_smtp::{BodyType, Envelope, MailDsn, Protocol, RcptDsn};
use skywave_spool::{Handoff, Priority, QueueId, Target};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span, warn};

use super::dedup_store::DedupStore;
use super::pmul_ip::{APORT, DPORT, IpCarrier, RPORT, TPORT};
use super::sis::{Endpoint, LinkInput, priority_5066};
use super::transfer::{Direction, TransferRecord};
use super::{
    Admission, Admit, Admitted, Ashore, Classified, HfContext, MAX_SLEEP, OnAir, Used, classify,
    weigh,
};
use crate::intake::{GatewayPolicy, Source};
use crate::outcome::Outcome;

/// The SAP P_MUL binds: T-MMHS (Annex F table F-1).
pub(crate) const SAP: SapId = SapId::T_MMHS;
/// UDOP APP_ID of STANAG 4406 annex E TMI-1 (P_MUL).
pub(crate) const APP_ID_TMI1: u16 = 0x2000;
/// The UDOP header: connection id (b7-4), U_PDU id, segment number (u16), APP_ID (u16).
pub(crate) const UDOP_HEADER: usize = 6;
/// Messages in multicast at once at most (each a P_MUL message with its own timers).
const MAX_IN_FLIGHT: usize = 32;
/// Bytes of mail taken from the spool per look.
const TAKE_BUDGET: u64 = 256 * 1024;
/// A ship waits this long after the last PDU of a message before its ack (place 0), on top
/// of the channel's turnaround (its radio cannot key up before that anyway).
const ACK_DELAY_MS: u64 = 2_000;
/// How long a multicast message lives: an EMCON ship may stay silent for most of a day.
const LIFETIME_MS: u64 = 24 * 3_600_000;
/// How long the P_MUL sender of `message` lives from `now` (unix ms): [`LIFETIME_MS`], or less
/// when the message states an earlier expiry of its own (`Expires:`, see
/// [`skywave_spool::expiry`]). Past it the message is worth nothing, so no EMCON repeat or
/// repair round should take airtime for it; the spool, which no longer finds it due, returns
/// it to its sender with 5.4.7.
fn lifetime_ms(message: &[u8], now: u64) -> u64 {
    skywave_spool::expiry::message_expiry(message).map_or(LIFETIME_MS, |at| {
        at.saturating_mul(1000).saturating_sub(now).min(LIFETIME_MS)
    })
}

/// Repair rounds of a multicast message over HF before ships that have not acknowledged are
/// given up (and reached by HMTP, whose ARQ adapts its data rate to the ship).
const MAX_REPAIRS: u32 = 5;
/// Over IP a round costs a round trip and only the missing datagrams, and a ship without HF
/// has no other way in: more rounds before giving up (at 30 % loss a message of twenty
/// datagrams needs more than five rounds about once in seventy, more than ten once in 30,000).
const IP_MAX_REPAIRS: u32 = 10;
/// Name under which the de-duplication memory of multicast mail is kept (no peer can have it);
/// each multicast link has its own file (see [`Carrier::dedup_name`]).
const DEDUP_NAME: &str = "@pmul";
/// How long a dynamic group's Request_PDU waits for another transmitter's Reject_PDU before
/// the group is taken (over IP a Reject comes back within a round trip, even by satellite).
const REQUEST_WAIT_MS: u64 = 2_000;
/// Between the Announce_PDU and the first Data_PDU of a dynamic group: the receivers join it.
const JOIN_WAIT_MS: u64 = 500;
/// Of an HF ack slot, what is not turnarounds or the ack's bytes: key-up, preamble and one
/// short-interleaver block with its decoding, with a margin. With the default turnaround
/// (150 ms, twice) the slot is 3 s plus the ack's airtime, as it always was.
const HF_ACK_FRAMING_MS: u64 = 2_700;
/// Over IP, acks are spread this far apart (datagrams do not collide; the spread only keeps a
/// base from taking many acks in one burst).
const IP_ACK_SLOT_MS: u64 = 200;
/// Over IP, the wait for acks beyond the ack slots before a repair (a satellite round trip and
/// the receivers' processing).
const IP_REPAIR_MARGIN_MS: u64 = 3_000;

/// A message's due recipients, per target (a member, or the group itself).
type PerTarget = Vec<(String, Vec<String>)>;

/// Over STANAG 5066, from the last PDU of a message to the first ack slot: [`ACK_DELAY_MS`]
/// beyond the turnaround (past the default one).
fn hf_ack_delay_ms(turnaround: std::time::Duration) -> u64 {
    ACK_DELAY_MS.saturating_add(
        millis(turnaround).saturating_sub(millis(crate::config::DEFAULT_TURNAROUND)),
    )
}

/// Over STANAG 5066, one receiver's ack slot (see `Carrier::ack_slot_ms`).
fn hf_ack_slot_ms(bps: u32, turnaround: std::time::Duration) -> u64 {
    HF_ACK_FRAMING_MS
        .saturating_add(millis(turnaround).saturating_mul(2))
        .saturating_add(airtime_ms(100, bps))
}

/// Over STANAG 5066, from the end of a multicast until every one of `members` ships has had
/// its ack slot, with a margin of 10 s: what a repair round waits for, and what a group's
/// radio schedule keeps free after a multicast (`skywave check` weighs a window with it).
pub(crate) fn hf_answer_ms(members: usize, bps: u32, turnaround: std::time::Duration) -> u64 {
    hf_ack_delay_ms(turnaround) + hf_ack_slot_ms(bps, turnaround) * (members as u64 + 1) + 10_000
}

/// Wraps a P_MUL PDU in the UDOP header (connection 0, one segment, APP_ID TMI-1).
pub(crate) fn udop_wrap(updu_id: u8, pdu: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(UDOP_HEADER + pdu.len());
    let [a, b] = APP_ID_TMI1.to_be_bytes();
    v.extend_from_slice(&[0, updu_id, 0, 0, a, b]);
    v.extend_from_slice(pdu);
    v
}

/// The P_MUL PDU inside a UDOP U_PDU, or why it is not one.
pub(crate) fn udop_unwrap(updu: &[u8]) -> Result<&[u8], String> {
    if updu.len() < UDOP_HEADER {
        return Err(format!(
            "{}-byte U_PDU on SAP 2 is shorter than the UDOP header",
            updu.len()
        ));
    }
    let app = u16::from_be_bytes([updu[4], updu[5]]);
    if app != APP_ID_TMI1 {
        return Err(format!(
            "UDOP APP_ID {app:#06x} on SAP 2 is not TMI-1 (P_MUL, 0x2000)"
        ));
    }
    if updu[2] != 0 || updu[3] != 0 {
        return Err("segmented UDOP U_PDU: P_MUL PDUs fit one U_PDU".to_owned());
    }
    Ok(&updu[UDOP_HEADER..])
}

/// The P_MUL id of a 5066 node: its 28-bit address.
fn pmul_id(node: NodeAddress) -> u32 {
    node.bits()
}

/// A duration in whole milliseconds, saturating.
fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Airtime of `bytes` at `bps`, ms, with a quarter more for D_PDU headers and preambles.
fn airtime_ms(bytes: u64, bps: u32) -> u64 {
    bytes.saturating_mul(8 * 1250) / u64::from(bps.max(1))
}

/// Where PDUs go: a 5066 node or group address, or an IP unicast or multicast address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dest {
    Node(NodeAddress),
    Ip(IpAddr),
}

impl fmt::Display for Dest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dest::Node(n) => write!(f, "{n}"),
            Dest::Ip(a) => write!(f, "udp {a}"),
        }
    }
}

/// What the bearer hands the link.
enum Input {
    /// One P_MUL PDU (over IP, with the datagram's source).
    Pdu(Bytes, Option<SocketAddr>),
    Up,
    Down(String),
    SendFailed(String),
}

/// The bearer of a multicast link: one SIS server (SAP 2), or UDP/IP.
pub(super) enum Carrier {
    /// STANAG 5066 through one SIS server.
    Sis {
        server: String,
        local: NodeAddress,
        endpoint: Endpoint,
        inbox: mpsc::UnboundedReceiver<LinkInput>,
    },
    /// ACP 142 over UDP/IP.
    Ip(Box<IpCarrier>),
}

impl Carrier {
    fn name(&self) -> String {
        match self {
            Carrier::Sis { server, .. } => format!("sis {server}"),
            Carrier::Ip(ip) => format!("udp {}", ip.config.address),
        }
    }

    /// The protocol's name in transfer records and metrics.
    fn protocol(&self) -> &'static str {
        match self {
            Carrier::Sis { .. } => "pmul",
            Carrier::Ip(_) => "pmul-ip",
        }
    }

    /// The file of this link's de-duplication memory: one per link, as each compacts its
    /// own at start (two links sharing one file raced there). The default SIS server's link
    /// keeps the name it always had.
    fn dedup_name(&self, default_server: &str) -> String {
        match self {
            Carrier::Sis { server, .. } if server == default_server => DEDUP_NAME.to_owned(),
            Carrier::Sis { server, .. } => {
                format!("{DEDUP_NAME}-{}", server.replace(['/', ':'], "_"))
            }
            Carrier::Ip(_) => format!("{DEDUP_NAME}-ip"),
        }
    }

    /// Our own P_MUL id on this bearer.
    fn own_id(&self) -> u32 {
        match self {
            Carrier::Sis { local, .. } => pmul_id(*local),
            Carrier::Ip(ip) => pmul_ip_id(ip.config.address),
        }
    }

    /// A peer's P_MUL id on this bearer.
    fn peer_id(&self, p: &Peer) -> Option<u32> {
        match self {
            Carrier::Sis { .. } => p.node.map(pmul_id),
            Carrier::Ip(_) => p.ip.map(pmul_ip_id),
        }
    }

    /// Where PDUs for one peer alone go.
    fn peer_dest(&self, p: &Peer) -> Option<Dest> {
        match self {
            Carrier::Sis { .. } => p.node.map(Dest::Node),
            Carrier::Ip(_) => p.ip.map(Dest::Ip),
        }
    }

    /// True when this link carries `group`'s multicast.
    fn serves(&self, group: &Group, default_server: &str) -> bool {
        match (self, &group.bearer) {
            (Carrier::Sis { server, .. }, GroupBearer::Sis { server: s, .. }) => {
                s.as_deref().unwrap_or(default_server) == server
            }
            (Carrier::Ip(ip), GroupBearer::PmulIp { address, .. }) => {
                address.is_ipv4() == ip.config.address.is_ipv4()
            }
            _ => false,
        }
    }

    /// The group's own address on this bearer.
    fn group_dest(&self, group: &Group) -> Option<Dest> {
        match &group.bearer {
            GroupBearer::Sis { node, .. } => Some(Dest::Node(*node)),
            GroupBearer::PmulIp { address, .. } => Some(Dest::Ip(*address)),
        }
    }

    fn initially_up(&self) -> bool {
        match self {
            Carrier::Sis { endpoint, .. } => endpoint.mtu().is_some(),
            Carrier::Ip(_) => true,
        }
    }

    fn pdu_size(&self, ctx: &HfContext) -> usize {
        match self {
            Carrier::Sis { .. } => ctx.config.pmul_pdu_size,
            Carrier::Ip(ip) => ip.config.pdu_size,
        }
    }

    /// Time on the air of `bytes` (none to speak of on an IP network).
    fn on_air_ms(&self, bytes: u64, bps: u32) -> u64 {
        match self {
            Carrier::Sis { .. } => airtime_ms(bytes, bps),
            Carrier::Ip(_) => 0,
        }
    }

    /// From the last PDU of a message to the first ack slot: on HF [`ACK_DELAY_MS`] beyond the
    /// turnaround (past the default one), over IP [`ACK_DELAY_MS`].
    fn ack_delay_ms(&self, turnaround: std::time::Duration) -> u64 {
        match self {
            Carrier::Sis { .. } => hf_ack_delay_ms(turnaround),
            Carrier::Ip(_) => ACK_DELAY_MS,
        }
    }

    /// One receiver's ack slot: on HF one ack with its preamble and interleaver block
    /// ([`HF_ACK_FRAMING_MS`]), its bytes, and two turnarounds of the channel: the ship's own
    /// before it keys up, and a turn for the base to answer, which a ship that heard another
    /// ship's ack leaves it before keying up itself (the bundled emulator's nodes do; a slot
    /// that counted one turnaround let acks meet at a 5 s turnaround).
    fn ack_slot_ms(&self, bps: u32, turnaround: std::time::Duration) -> u64 {
        match self {
            Carrier::Sis { .. } => hf_ack_slot_ms(bps, turnaround),
            Carrier::Ip(_) => IP_ACK_SLOT_MS,
        }
    }

    /// Repair rounds before ships that have not acknowledged are given up.
    fn max_repairs(&self) -> u32 {
        match self {
            Carrier::Sis { .. } => MAX_REPAIRS,
            Carrier::Ip(_) => IP_MAX_REPAIRS,
        }
    }

    /// Time the node of this carrier still needs for what this gateway has handed it (every
    /// link on the same SIS server; none over IP, whose datagrams leave at once).
    fn busy_ms(&self) -> u64 {
        match self {
            Carrier::Sis { endpoint, .. } => millis(endpoint.backlog().drain_time()),
            Carrier::Ip(_) => 0,
        }
    }

    /// From the end of a transmission until every one of `members` ships has had its ack
    /// slot, with a margin: what a repair round waits for after the data is on the air.
    fn answer_ms(&self, members: usize, bps: u32, turnaround: std::time::Duration) -> u64 {
        match self {
            Carrier::Sis { .. } => hf_answer_ms(members, bps, turnaround),
            Carrier::Ip(_) => {
                ACK_DELAY_MS + IP_ACK_SLOT_MS * (members as u64 + 1) + IP_REPAIR_MARGIN_MS
            }
        }
    }

    /// How a peer is named in Received headers and logs.
    fn identity(&self, p: &Peer) -> String {
        match self {
            Carrier::Sis { .. } => format!(
                "{}/5066:{}",
                p.name,
                p.node.map_or_else(String::new, |n| n.to_string())
            ),
            Carrier::Ip(_) => format!(
                "{}/udp:{}",
                p.name,
                p.ip.map_or_else(String::new, |a| a.to_string())
            ),
        }
    }

    async fn recv(&mut self) -> Option<Input> {
        match self {
            // Bounded: each pass takes an input off the inbox. A delivery says nothing P_MUL
            // needs: its acknowledgements, not the subnetwork's, tell what arrived.
            Carrier::Sis { inbox, .. } => loop {
                break Some(match inbox.recv().await? {
                    LinkInput::Updu(b) => Input::Pdu(b, None),
                    LinkInput::LinkUp => Input::Up,
                    LinkInput::LinkDown(why) => Input::Down(why),
                    LinkInput::SendFailed { reason, .. } => Input::SendFailed(reason),
                    LinkInput::Delivered { .. } => continue,
                });
            },
            Carrier::Ip(ip) => ip.recv().await.map(|d| Input::Pdu(d.bytes, Some(d.from))),
        }
    }

    /// The P_MUL PDU in what the bearer delivered.
    fn unwrap<'a>(&self, bytes: &'a [u8]) -> Result<&'a [u8], String> {
        match self {
            Carrier::Sis { .. } => udop_unwrap(bytes),
            Carrier::Ip(_) => Ok(bytes),
        }
    }

    /// Sends PDUs to `dest` (over IP at `port`, one of ACP 142's; over 5066 as U_PDUs of
    /// `mode` behind the UDOP header).
    fn send(
        &self,
        dest: Dest,
        port: usize,
        priority: skywave_sis::Priority,
        mode: ServiceType,
        pdus: Vec<Vec<u8>>,
        next_updu_id: &mut u8,
    ) -> Result<(), String> {
        match (self, dest) {
            (Carrier::Sis { endpoint, .. }, Dest::Node(node)) => {
                let updus = pdus
                    .iter()
                    .map(|pdu| {
                        let u = udop_wrap(*next_updu_id, pdu);
                        *next_updu_id = next_updu_id.wrapping_add(1);
                        u
                    })
                    .collect();
                endpoint.send_mode(node, priority, mode, updus, None)
            }
            (Carrier::Ip(ip), Dest::Ip(addr)) => {
                for pdu in &pdus {
                    ip.send(addr, port, pdu)?;
                }
                Ok(())
            }
            (_, dest) => Err(format!("{dest} is not on bearer {}", self.name())),
        }
    }
}

/// One ship of a multicast message.
#[derive(Debug)]
struct Member {
    name: String,
    id: u32,
    /// Its recipients of the message.
    rcpts: Vec<String>,
    /// Its outcome is recorded.
    recorded: bool,
}

/// A message out by multicast.
struct Outgoing {
    sender: Sender,
    group: String,
    /// Where the PDUs go: the group address, a dynamic group's, or one ship's own address.
    dest: Dest,
    /// The group's own address (dynamic groups are requested and announced there).
    group_dest: Dest,
    /// Held until a dynamic group is settled.
    phase: Phase,
    /// The dynamic group taken for the message, and the pool entries tried.
    dynamic: Option<(IpAddr, u64)>,
    /// Repair rounds the dynamic group has been announced for (a member that lost the
    /// Announce_PDU never joined, so every repair round announces it again).
    announced_rounds: u32,
    priority: skywave_sis::Priority,
    /// The mail's own priority (RFC 6710 scale), against the group's `schedule_bypass`.
    mail_priority: i8,
    id: QueueId,
    from: String,
    size: u64,
    members: Vec<Member>,
    /// Recipients of mail for the group itself: delivered when every member has it.
    whole: Vec<String>,
    start: f64,
    wire_bytes: u64,
    updus: u64,
}

/// Where a multicast message stands before its data goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Its PDUs go as the sender has them.
    Sending,
    /// A dynamic group was requested; if no transmitter rejects it by then, it is announced.
    Requesting { until: u64 },
    /// The dynamic group was announced; its members join it until then.
    Announcing { until: u64 },
}

/// A message taken from the spool for a group.
#[derive(Debug)]
struct Taken {
    id: QueueId,
    from: String,
    priority: Priority,
    size: u64,
    message: Vec<u8>,
    /// (member, its due recipients).
    members: Vec<(String, Vec<String>)>,
    whole: Vec<String>,
    /// What its sender asked of reports, passed on in the ACP 142 envelope.
    dsn: MailDsn,
    /// The same per recipient that asked anything, by address.
    rcpt_dsn: Vec<(String, RcptDsn)>,
}

/// The multicast task.
pub(super) struct PmulLink {
    pub(super) carrier: Carrier,
    pub(super) ctx: Arc<HfContext>,
    pub(super) shutdown: watch::Receiver<bool>,
}

/// What the running task holds.
struct State {
    receiver: Receiver,
    /// Dynamic groups (over IP): ours, and those announced to us.
    groups: GroupManager,
    out: Vec<Outgoing>,
    dedup: DedupStore,
    emcon: bool,
    up: bool,
    next_message_id: u32,
    next_updu_id: u8,
    /// When each group's last multicast started (unix seconds): a window's opening lets a
    /// message too large for it go only when nothing else of the group has gone since.
    last_start: HashMap<String, u64>,
}

impl PmulLink {
    pub(super) async fn run(self) {
        let span = info_span!("pmul", bearer = %self.carrier.name());
        self.run_inner().instrument(span).await;
    }

    async fn run_inner(mut self) {
        let mut emcon_rx = self.ctx.emcon.subscribe();
        let emcon = *emcon_rx.borrow_and_update();
        let bps = self.ctx.config.assumed_bps;
        let own_id = self.carrier.own_id();
        let mut rc = ReceiverConfig::new(own_id);
        rc.ack_delay_ms = self.carrier.ack_delay_ms(self.ctx.config.turnaround);
        rc.ack_slot_ms = self.carrier.ack_slot_ms(bps, self.ctx.config.turnaround);
        rc.pdu_size = self.carrier.pdu_size(&self.ctx);
        rc.emcon = emcon;
        let queued = super::dedup_store::spool_keys(&self.ctx.intake.spool);
        let mut st = State {
            receiver: Receiver::new(rc),
            groups: GroupManager::new(own_id),
            out: Vec::new(),
            dedup: DedupStore::open(
                self.ctx.state_dir.join("dedup"),
                &self.carrier.dedup_name(&self.ctx.config.sis_server),
                self.ctx.config.dedup_window,
                self.ctx.clock,
                &queued,
            ),
            emcon,
            up: self.carrier.initially_up(),
            // Unique per source across restarts as long as fewer than one message a second
            // goes out on average; receivers also de-duplicate by content.
            next_message_id: u32::try_from(self.ctx.clock.unix_now() & 0xFFFF_FFFF).unwrap_or(1),
            next_updu_id: 0,
            last_start: HashMap::new(),
        };
        if emcon {
            info!("EMCON: this gateway transmits nothing until it is lifted");
        }
        let mut look_at = Instant::now();
        loop {
            // Registered before the spool is read, so that mail queued while we read it still
            // wakes us (`notify_waiters` only reaches futures that wait already).
            let wake = Arc::clone(&self.ctx.wake);
            let notified = wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if st.up && !st.emcon && Instant::now() >= look_at {
                self.take_work(&mut st).await;
                look_at = self.next_look().await;
            }
            if self.flush(&mut st).await {
                // Room for more, and the next attempts of what did not finish well.
                look_at = Instant::now();
                continue;
            }
            let mut deadline = look_at;
            if st.emcon || !st.up {
                deadline = Instant::now() + MAX_SLEEP;
            }
            for o in &st.out {
                let t = match o.phase {
                    Phase::Sending => o.sender.poll_timeout(),
                    Phase::Requesting { until } | Phase::Announcing { until } => Some(until),
                };
                if let Some(t) = t {
                    deadline = deadline.min(self.ctx.clock.instant_of_ms(t));
                }
            }
            if let Some(t) = st.receiver.poll_timeout() {
                deadline = deadline.min(self.ctx.clock.instant_of_ms(t));
            }
            tokio::select! {
                input = self.carrier.recv() => match input {
                    None => return,
                    Some(Input::Pdu(b, from)) => self.on_pdu(&mut st, &b, from),
                    Some(Input::Up) => {
                        st.up = true;
                        look_at = Instant::now();
                    }
                    Some(Input::Down(why)) => {
                        debug!(%why, "SIS connection down");
                        st.up = false;
                    }
                    Some(Input::SendFailed(why)) => debug!(%why, "P_MUL U_PDU not sent"),
                },
                () = &mut notified => look_at = Instant::now(),
                changed = emcon_rx.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let on = *emcon_rx.borrow_and_update();
                    if on != st.emcon {
                        st.emcon = on;
                        st.receiver.set_emcon(on, self.ctx.clock.unix_ms());
                        if on {
                            info!("EMCON set: transmitting nothing");
                        } else {
                            info!("EMCON lifted: sending owed acknowledgements and queued mail");
                            look_at = Instant::now();
                            self.ctx.wake.notify_waiters();
                        }
                    }
                }
                () = tokio::time::sleep_until(deadline) => {
                    let now = self.ctx.clock.unix_ms();
                    let busy = self.carrier.busy_ms();
                    let bps = self.ctx.config.assumed_bps;
                    // Outside its group's radio schedule a message's rounds wait for the next
                    // window, as its new messages do; mail at or above the bypass goes.
                    let table = self.ctx.routes.current();
                    let closed: HashMap<&str, (u64, Option<i8>)> = table
                        .groups()
                        .iter()
                        .filter(|g| g.schedule.is_some())
                        .filter_map(|g| match self.admission(g, now / 1000) {
                            Admission::Closed { opens, urgent } => {
                                Some((g.name.as_str(), (opens, urgent)))
                            }
                            _ => None,
                        })
                        .collect();
                    for o in &mut st.out {
                        if o.phase == Phase::Sending {
                            if let Some(&(opens, urgent)) = closed.get(o.group.as_str())
                                && urgent.is_none_or(|u| o.mail_priority < u)
                            {
                                o.sender.postpone_rounds(opens.saturating_mul(1000));
                            }
                            // Our node is still sending what this gateway handed it (unicast
                            // mail queued behind the multicast): on a half-duplex radio no ship
                            // has answered yet, and a round now would list ships whose acks
                            // are still to come. It waits until they have had their slots.
                            if busy > 0 && o.sender.repair_due().is_some_and(|t| t <= now) {
                                let answered =
                                    self.carrier.answer_ms(o.members.len(), bps, self.ctx.config.turnaround);
                                o.sender.postpone_repair(now + busy + answered);
                            }
                            o.sender.handle_timeout(now);
                        }
                    }
                    st.receiver.handle_timeout(now);
                }
                _ = self.shutdown.changed() => return,
            }
        }
    }

    /// When to look at the groups' queues next: a group outside its radio schedule at its
    /// next window (or at the periodic look, for mail that may go at any time).
    async fn next_look(&self) -> Instant {
        let cap = Instant::now() + MAX_SLEEP;
        let table = self.ctx.routes.current();
        let now = self.ctx.clock.unix_now();
        let mut at = cap;
        for g in table.groups() {
            if let Admission::Closed { opens, .. } = self.admission(g, now) {
                at = at.min(self.ctx.clock.instant_of(opens));
                continue;
            }
            for t in g.members.iter().chain(std::iter::once(&g.name)) {
                at = at.min(self.ctx.next_due(&Target::Peer(t.clone()), cap).await);
            }
        }
        at
    }

    /// Takes the multicast mail of every group (up to [`MAX_IN_FLIGHT`] messages out).
    async fn take_work(&self, st: &mut State) {
        let table = self.ctx.routes.current();
        for group in table.groups() {
            if !self.carrier.serves(group, &self.ctx.config.sis_server) {
                continue;
            }
            if let (Carrier::Ip(ip), Some(address)) = (&self.carrier, group.ip())
                && let Err(e) = ip.listen(address, TPORT)
            {
                // Without it we would not hear another transmitter's Request for a group we
                // hold; the mail still goes.
                warn!(group = %group.name, error = %e, "cannot listen for other transmitters");
            }
            let room = MAX_IN_FLIGHT.saturating_sub(st.out.len());
            if room == 0 {
                return;
            }
            let now = self.ctx.clock.unix_now();
            let Some(mut admit) = self.admission(group, now).admit() else {
                continue;
            };
            // A message too large for the window goes alone at its opening: not after another
            // of the group's that started since (a peer's link looks again only once its
            // session has ended, this one at any time).
            let recent = now.saturating_sub(super::FRESH_WINDOW.as_secs());
            if st.last_start.get(&group.name).is_some_and(|&t| t >= recent)
                && let Some(fit) = admit.fit.as_mut()
            {
                fit.fresh = false;
            }
            let taken = self.take_group(&table, group, room, admit).await;
            if !taken.is_empty() {
                st.last_start.insert(group.name.clone(), now);
            }
            for t in taken {
                self.start_message(st, &table, group, t);
            }
        }
    }

    /// What the group's radio schedule lets start at unix second `now` (see
    /// [`HfContext::group_admission`]): the window must also hold what the node still has to
    /// send of this gateway's (multicasts started earlier in the window, unicast), and the
    /// ships' acknowledgements after it.
    fn admission(&self, group: &Group, now: u64) -> Admission {
        let answer = self.carrier.answer_ms(
            group.members.len(),
            self.ctx.config.assumed_bps,
            self.ctx.config.turnaround,
        );
        let reserve = answer.saturating_add(self.carrier.busy_ms());
        self.ctx.group_admission(group, now, reserve.div_ceil(1000))
    }

    /// Takes from the spool the messages due for `group`'s members (or the group) that go by
    /// multicast, as far as `admit` (the group's radio schedule) lets, marking their
    /// recipients in flight.
    async fn take_group(
        &self,
        table: &Arc<RoutingTable>,
        group: &Group,
        room: usize,
        admit: Admit,
    ) -> Vec<Taken> {
        let spool = Arc::clone(&self.ctx.intake.spool);
        let table = Arc::clone(table);
        let group = group.clone();
        let now = self.ctx.clock.unix_now();
        let done = crate::blocking::spawn(move || {
            // Due recipients per message, per target.
            let mut due: BTreeMap<String, PerTarget> = BTreeMap::new();
            let mut info: HashMap<String, skywave_spool::DueMessage> = HashMap::new();
            // A member an operator holds keeps its mail queued, as its own link would.
            let held = |t: &String| table.peer(t).is_some_and(|p| p.hold);
            for t in group
                .members
                .iter()
                .filter(|t| !held(t))
                .chain(std::iter::once(&group.name))
            {
                for d in spool.due(&Target::Peer(t.clone()), now, TAKE_BUDGET)? {
                    let key = d.id.to_string();
                    due.entry(key.clone())
                        .or_default()
                        .push((t.clone(), d.recipients.clone()));
                    info.entry(key).or_insert(d);
                }
            }
            // The most urgent first, then the oldest, as the spool hands a peer's link its mail:
            // a window with room for one message gives it to the flash one.
            let mut due: Vec<(String, PerTarget)> = due.into_iter().collect();
            due.sort_by_key(|(key, _)| {
                info.get(key)
                    .map(|d| (std::cmp::Reverse(d.priority), d.arrival))
            });
            let mut out = Vec::new();
            let mut used = Used::default();
            let ashore = Ashore::of_group(&group);
            for (key, per_target) in due {
                if out.len() >= room {
                    break;
                }
                let Some(d) = info.remove(&key) else { continue };
                // MULE bodies are deflated: a window counts them so.
                let (verdict, air, loaded) =
                    weigh(&admit, out.len(), used, &d, OnAir::Deflate, &ashore, || {
                        ashore.load(&spool, &d.id)
                    })?;
                match verdict {
                    Admitted::Take => {}
                    Admitted::Skip | Admitted::NoRoom => continue,
                    Admitted::Stop => break,
                }
                let sending = match loaded {
                    Some(s) => s,
                    None => ashore.load(&spool, &d.id)?,
                };
                let file = &sending.file;
                let pending = pending_targets(&file.envelope.recipients);
                let plan = table.plan(pending.iter().map(String::as_str));
                // A leg for this group exists exactly when the group's name finds it.
                if plan.multicast_for(&group.name).is_none() {
                    continue;
                }
                used = used.with(d.size, air);
                let mut members = Vec::new();
                let mut whole = Vec::new();
                let mut all = Vec::new();
                for (t, rcpts) in per_target {
                    all.extend(rcpts.iter().cloned());
                    if t == group.name {
                        whole = rcpts;
                    } else {
                        members.push((t, rcpts));
                    }
                }
                spool.mark_in_flight(&d.id, &all, now)?;
                let rcpt_dsn = file
                    .envelope
                    .recipients
                    .iter()
                    .filter(|r| !r.dsn.is_empty())
                    .map(|r| (r.address.clone(), r.dsn.clone()))
                    .collect();
                let dsn = file.envelope.dsn.clone();
                out.push(Taken {
                    dsn,
                    rcpt_dsn,
                    id: d.id,
                    from: d.sender,
                    priority: d.priority,
                    size: d.size,
                    message: sending.taken(&group.name).message,
                    members,
                    whole,
                });
            }
            Ok::<_, skywave_spool::Error>(out)
        })
        .await;
        match done {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                warn!(error = %e, "cannot read the spool");
                Vec::new()
            }
            Err(e) => {
                warn!(error = %e, "spool task failed");
                Vec::new()
            }
        }
    }

    /// Encodes a taken message and starts its P_MUL sender.
    fn start_message(&self, st: &mut State, table: &RoutingTable, group: &Group, t: Taken) {
        // Every member is a destination of mail for the group; else the members with
        // recipients.
        let mut members: Vec<Member> = Vec::new();
        let names: Vec<String> = if t.whole.is_empty() {
            t.members.iter().map(|(m, _)| m.clone()).collect()
        } else {
            group.members.clone()
        };
        for name in names {
            let Some(peer) = table.peer(&name) else {
                continue;
            };
            let Some(id) = self.carrier.peer_id(peer) else {
                continue;
            };
            let rcpts = t
                .members
                .iter()
                .find(|(m, _)| *m == name)
                .map(|(_, r)| r.clone())
                .unwrap_or_default();
            members.push(Member {
                name,
                id,
                rcpts,
                recorded: false,
            });
        }
        let dests: Vec<Destination> = members
            .iter()
            .map(|m| {
                if table.peer(&m.name).is_some_and(|p| p.emcon) {
                    Destination::emcon(m.id)
                } else {
                    Destination::new(m.id)
                }
            })
            .collect();
        let recipients: Vec<MuleRecipient> = members
            .iter()
            .flat_map(|m| m.rcpts.iter())
            .chain(t.whole.iter())
            .map(|r| MuleRecipient {
                address: r.clone(),
                params: t
                    .rcpt_dsn
                    .iter()
                    .find(|(a, _)| a == r)
                    .map(|(_, d)| d.esmtp().trim_start().to_owned())
                    .unwrap_or_default(),
            })
            .collect();
        let mut mail_params = if t.priority.value() == 0 {
            String::new()
        } else {
            format!("MT-PRIORITY={}", t.priority.value())
        };
        mail_params.push_str(&t.dsn.esmtp());
        let mail_params = mail_params.trim_start().to_owned();
        let now = self.ctx.clock.unix_ms();
        let lifetime = lifetime_ms(&t.message, now);

        let body = mule::encode(&MuleMessage {
            envelope: MuleEnvelope {
                reverse_path: t.from.clone(),
                mail_params,
                recipients,
            },
            message: t.message,
        });
        let all: Vec<String> = members
            .iter()
            .flat_map(|m| m.rcpts.iter().cloned())
            .chain(t.whole.iter().cloned())
            .collect();
        let body = match body {
            Ok(b) => b,
            Err(e) => {
                // Only a message beyond MULE's limits gets here: no retry can help.
                self.record_later(
                    t.id.clone(),
                    t.from.clone(),
                    t.size,
                    all,
                    Outcome::Failed {
                        status: "5.3.4".into(),
                        diagnostic: format!("cannot be carried by P_MUL: {e}"),
                    },
                );
                return;
            }
        };
        let bps = self.ctx.config.assumed_bps;
        let pdu_size = self.carrier.pdu_size(&self.ctx);
        let repeats = u64::from(group.repeats) + 1;
        let on_air = body.len() as u64 * repeats + 64 * (body.len() / pdu_size + 2) as u64;
        let config = SenderConfig {
            pdu_size,
            priority: 0,
            lifetime_ms: lifetime,
            initial_repeats: u32::from(group.repeats),
            // The whole first transmission must be on the air, and every ship's ack (one slot
            // each after the last PDU) back, before a repair makes sense.
            repair_interval_ms: self.carrier.on_air_ms(on_air, bps)
                + self
                    .carrier
                    .answer_ms(members.len(), bps, self.ctx.config.turnaround),
            // A ship still missing PDUs after this many rounds is better reached another way
            // (HMTP's ARQ adapts its data rate to that ship; P_MUL's rounds go at the group's).
            max_repairs: self.carrier.max_repairs(),
            ..SenderConfig::default()
        };
        let message_id = st.next_message_id;
        st.next_message_id = st.next_message_id.wrapping_add(1);
        let size = t.size;
        let Some(group_dest) = self.carrier.group_dest(group) else {
            return;
        };
        match Sender::new(config, message_id, self.carrier.own_id(), dests, body, now) {
            Ok(sender) => {
                let mut dest = if members.len() == 1 {
                    table
                        .peer(&members[0].name)
                        .and_then(|p| self.carrier.peer_dest(p))
                        .unwrap_or(group_dest)
                } else {
                    group_dest
                };
                // Some of an IP group's members only: a dynamic group of just them, if the
                // group has a pool, so the others' hosts are not bothered with the data.
                let mut phase = Phase::Sending;
                let mut dynamic = None;
                if let GroupBearer::PmulIp {
                    dynamic: Some(pool),
                    ..
                } = &group.bearer
                    && members.len() >= 2
                    && members.len() < group.members.len()
                    && t.whole.is_empty()
                    && let Some((address, tried)) = self.free_dynamic(st, pool, 0)
                    && self.request_group(st, address, message_id, group_dest)
                {
                    dest = Dest::Ip(address);
                    dynamic = Some((address, tried));
                    phase = Phase::Requesting {
                        until: now + REQUEST_WAIT_MS,
                    };
                }
                info!(
                    queue_id = %t.id,
                    group = %group.name,
                    message_id,
                    ships = %members.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(","),
                    pdus = sender.total_pdus(),
                    to = %dest,
                    "multicast by P_MUL"
                );
                st.out.push(Outgoing {
                    sender,
                    group: group.name.clone(),
                    dest,
                    group_dest,
                    phase,
                    dynamic,
                    announced_rounds: 0,
                    priority: priority_5066(t.priority.value()),
                    mail_priority: t.priority.value(),
                    id: t.id,
                    from: t.from,
                    size,
                    members,
                    whole: t.whole,
                    start: self.ctx.clock.unix_f64(),
                    wire_bytes: 0,
                    updus: 0,
                });
            }
            Err(e) => self.record_later(
                t.id,
                t.from,
                size,
                all,
                Outcome::Deferred(format!("P_MUL: {e}")),
            ),
        }
    }

    /// The first address of `pool` from entry `from` on that none of our messages holds, with
    /// its entry number.
    fn free_dynamic(
        &self,
        st: &State,
        pool: &skywave_route::Cidr,
        from: u64,
    ) -> Option<(IpAddr, u64)> {
        (from..)
            .map_while(|i| pool_address(pool, i).map(|a| (a, i)))
            .find(|(a, _)| !st.out.iter().any(|o| o.dynamic.map(|d| d.0) == Some(*a)))
    }

    /// Asks the other transmitters for dynamic group `address` (a Request_PDU to the group's
    /// own address at TPORT). False when it could not be asked.
    fn request_group(&self, st: &mut State, address: IpAddr, message_id: u32, at: Dest) -> bool {
        let IpAddr::V4(v4) = address else {
            return false;
        };
        if let Err(e) = st.groups.request(u32::from(v4), message_id) {
            warn!(error = %e, "Request_PDU not encoded");
            return false;
        }
        info!(group = %address, message_id, "dynamic group requested");
        self.send_group_pdus(st, at, None);
        true
    }

    /// Sends what the dynamic-group state has for the air: Request and Release PDUs to the
    /// transmitters (TPORT of the group's own address `at`), Announce PDUs to the receivers
    /// (its RPORT), a Reject_PDU to the node that asked (`reply_to`, its TPORT). Nothing in
    /// EMCON.
    fn send_group_pdus(&self, st: &mut State, at: Dest, reply_to: Option<IpAddr>) {
        while let Some(out) = st.groups.poll_transmit() {
            if st.emcon {
                continue;
            }
            let (dest, port) = match Pdu::decode(&out.bytes) {
                Ok(Pdu::Announce(_)) => (at, RPORT),
                Ok(Pdu::Reject(_)) => match reply_to {
                    Some(a) => (Dest::Ip(a), TPORT),
                    None => continue,
                },
                _ => (at, TPORT),
            };
            if let Err(e) = self.carrier.send(
                dest,
                port,
                priority_5066(0),
                ServiceType::NON_ARQ,
                vec![out.bytes],
                &mut st.next_updu_id,
            ) {
                debug!(error = %e, "dynamic group PDU not sent");
            }
        }
    }

    /// Moves dynamic groups on: announced when no Reject came, data when the members joined.
    fn settle_groups(&self, st: &mut State, now: u64) {
        for i in 0..st.out.len() {
            let o = &st.out[i];
            match o.phase {
                Phase::Requesting { until } if until <= now => {
                    let Some((IpAddr::V4(v4), _)) = o.dynamic else {
                        continue;
                    };
                    let members = o.members.iter().map(|m| m.id).collect();
                    let expiry = u32::try_from(o.sender.expiry_ms() / 1000).unwrap_or(u32::MAX);
                    let (id, at) = (o.sender.message_id(), o.group_dest);
                    if let Err(e) = st.groups.announce(u32::from(v4), id, expiry, members) {
                        warn!(error = %e, "Announce_PDU not encoded");
                    }
                    info!(group = %v4, message_id = id, "dynamic group announced");
                    self.send_group_pdus(st, at, None);
                    st.out[i].phase = Phase::Announcing {
                        until: now + JOIN_WAIT_MS,
                    };
                }
                Phase::Announcing { until } if until <= now => {
                    st.out[i].phase = Phase::Sending;
                }
                _ => {}
            }
        }
    }

    /// Announces a dynamic group again before each of its message's repair rounds, for the
    /// members whose first Announce_PDU was lost (those that joined ignore it).
    fn reannounce(&self, st: &mut State) {
        for i in 0..st.out.len() {
            let o = &st.out[i];
            let rounds = o.sender.stats().repair_rounds;
            let (Phase::Sending, Some((IpAddr::V4(v4), _))) = (o.phase, o.dynamic) else {
                continue;
            };
            if rounds <= o.announced_rounds {
                continue;
            }
            let pending: Vec<u32> = o
                .sender
                .status()
                .iter()
                .filter(|d| d.state == DestState::Pending)
                .map(|d| d.dest.id)
                .collect();
            let expiry = u32::try_from(o.sender.expiry_ms() / 1000).unwrap_or(u32::MAX);
            let (id, at) = (o.sender.message_id(), o.group_dest);
            st.out[i].announced_rounds = rounds;
            if pending.is_empty() {
                continue;
            }
            if let Err(e) = st.groups.announce(u32::from(v4), id, expiry, pending) {
                warn!(error = %e, "Announce_PDU not encoded");
            }
            self.send_group_pdus(st, at, None);
        }
    }

    /// Another transmitter holds the dynamic group we asked for: try the pool's next address,
    /// or send to the group's own address when the pool is spent.
    fn on_rejected(&self, st: &mut State, group: u32, by: u32, table: &RoutingTable) {
        let Some(i) = st.out.iter().position(|o| {
            matches!(o.phase, Phase::Requesting { .. })
                && o.dynamic.map(|d| d.0) == Some(IpAddr::V4(group.into()))
        }) else {
            return;
        };
        let tried = st.out[i].dynamic.map_or(0, |d| d.1);
        warn!(group = %std::net::Ipv4Addr::from(group), by, "dynamic group held by another transmitter");
        let pool = table.group(&st.out[i].group).and_then(|g| match &g.bearer {
            GroupBearer::PmulIp { dynamic, .. } => *dynamic,
            GroupBearer::Sis { .. } => None,
        });
        let next = pool.and_then(|p| self.free_dynamic(st, &p, tried + 1));
        let (id, at) = (st.out[i].sender.message_id(), st.out[i].group_dest);
        match next {
            Some((address, n)) if self.request_group(st, address, id, at) => {
                let o = &mut st.out[i];
                o.dest = Dest::Ip(address);
                o.dynamic = Some((address, n));
                o.phase = Phase::Requesting {
                    until: self.ctx.clock.unix_ms() + REQUEST_WAIT_MS,
                };
            }
            _ => {
                let o = &mut st.out[i];
                info!(
                    message_id = id,
                    "no dynamic group free: sending to the group's own address"
                );
                o.dest = o.group_dest;
                o.dynamic = None;
                o.phase = Phase::Sending;
            }
        }
    }

    /// Records an outcome without holding up the task.
    fn record_later(&self, id: QueueId, from: String, size: u64, rcpts: Vec<String>, o: Outcome) {
        let recorder = Arc::clone(&self.ctx.recorder);
        tokio::spawn(async move {
            recorder.record(&id, &from, size, rcpts, o).await;
        });
    }

    /// Sends what the senders and the receiver have for the air (nothing in EMCON), records
    /// the ships that have acknowledged, and ends the messages that are finished (true when
    /// one did).
    async fn flush(&self, st: &mut State) -> bool {
        self.deliver_received(st).await;
        if st.emcon || !st.up {
            return false;
        }
        let now = self.ctx.clock.unix_ms();
        let table = self.ctx.routes.current();
        while let Some(ack) = st.receiver.poll_transmit(now) {
            // An ack goes to the source of the messages it acknowledges.
            let to = match Pdu::decode(&ack) {
                Ok(Pdu::Ack(a)) => a.entries.first().map(|e| e.source),
                _ => None,
            };
            let Some(peer) = to.and_then(|id| {
                table
                    .peers()
                    .iter()
                    .find(|p| self.carrier.peer_id(p) == Some(id))
            }) else {
                continue;
            };
            let Some(dest) = self.carrier.peer_dest(peer) else {
                continue;
            };
            // Over 5066 as the routing table says for that peer: non-ARQ unless
            // `pmul_acks = "arq"`.
            let mode = match peer.pmul_acks {
                AckMode::Arq => ServiceType::ARQ,
                AckMode::NonArq => ServiceType::NON_ARQ,
            };
            if let Err(e) = self.carrier.send(
                dest,
                APORT,
                priority_5066(0),
                mode,
                vec![ack],
                &mut st.next_updu_id,
            ) {
                debug!(error = %e, "P_MUL ack not sent");
            }
        }
        self.settle_groups(st, now);
        self.reannounce(st);
        for o in &mut st.out {
            if o.phase == Phase::Sending {
                self.send_queued(o, &mut st.next_updu_id, now);
            }
        }
        self.record_acks(st).await
    }

    /// Sends what a message's sender has queued, counting it for the transfer record.
    fn send_queued(&self, o: &mut Outgoing, next_updu_id: &mut u8, now: u64) {
        let mut pdus = Vec::new();
        while let Some(pdu) = o.sender.poll_transmit(now) {
            o.wire_bytes += pdu.len() as u64;
            o.updus += 1;
            pdus.push(pdu);
        }
        if !pdus.is_empty()
            && let Err(e) = self.carrier.send(
                o.dest,
                DPORT,
                o.priority,
                ServiceType::NON_ARQ,
                pdus,
                next_updu_id,
            )
        {
            // The SIS connection is down, or the network: the sender's repair timer tries
            // again.
            debug!(error = %e, "P_MUL PDUs not sent");
        }
    }

    /// Records the recipients of ships whose ack is complete, and ends finished messages (true
    /// when one ended).
    async fn record_acks(&self, st: &mut State) -> bool {
        let mut finished = Vec::new();
        for (i, o) in st.out.iter_mut().enumerate() {
            let status: HashMap<u32, DestState> = o
                .sender
                .status()
                .iter()
                .map(|d| (d.dest.id, d.state))
                .collect();
            for m in &mut o.members {
                if m.recorded || status.get(&m.id) != Some(&DestState::Complete) {
                    continue;
                }
                m.recorded = true;
                info!(queue_id = %o.id, ship = %m.name, "P_MUL message acknowledged");
                if !m.rcpts.is_empty() {
                    self.ctx
                        .recorder
                        .record(
                            &o.id,
                            &o.from,
                            o.size,
                            m.rcpts.clone(),
                            // The DSN parameters went in the envelope: the ship reports.
                            Outcome::Delivered(Handoff::Passed),
                        )
                        .await;
                }
            }
            // Repairs spent and only ships that acknowledge normally still missing: they are
            // off the air. Give up now (Discard_Message_PDU) so their mail goes another way,
            // rather than at the day-long expiry kept for ships under EMCON.
            let waiting_emcon = o
                .sender
                .status()
                .iter()
                .any(|d| d.state == DestState::Pending && d.dest.emcon);
            if o.phase == Phase::Sending
                && !o.sender.is_finished()
                && !waiting_emcon
                && o.sender.poll_timeout() == Some(o.sender.expiry_ms())
            {
                info!(queue_id = %o.id, "P_MUL repairs spent; ships that never acknowledged are given up");
                o.sender.handle_timeout(o.sender.expiry_ms());
                self.send_queued(o, &mut st.next_updu_id, self.ctx.clock.unix_ms());
            }
            if o.sender.is_finished() {
                finished.push(i);
            }
        }
        let any = !finished.is_empty();
        for i in finished.into_iter().rev() {
            let o = st.out.remove(i);
            if let Some((IpAddr::V4(v4), _)) = o.dynamic {
                if let Err(e) = st.groups.release(u32::from(v4)) {
                    warn!(error = %e, "Release_PDU not encoded");
                }
                info!(group = %v4, "dynamic group released");
                self.send_group_pdus(st, o.group_dest, None);
            }
            let complete = o.members.iter().filter(|m| m.recorded).count();
            for m in o
                .members
                .iter()
                .filter(|m| !m.recorded && !m.rcpts.is_empty())
            {
                self.ctx
                    .recorder
                    .record(
                        &o.id,
                        &o.from,
                        o.size,
                        m.rcpts.clone(),
                        Outcome::Deferred(format!(
                            "no P_MUL acknowledgement from {} (repairs spent or message expired)",
                            m.name
                        )),
                    )
                    .await;
            }
            if !o.whole.is_empty() {
                let outcome = if complete == o.members.len() {
                    Outcome::Delivered(Handoff::Passed)
                } else {
                    Outcome::Deferred(format!(
                        "{} of {} ships of {} acknowledged",
                        complete,
                        o.members.len(),
                        o.group
                    ))
                };
                self.ctx
                    .recorder
                    .record(&o.id, &o.from, o.size, o.whole.clone(), outcome)
                    .await;
            }
            let stats = o.sender.stats();
            self.ctx.transfers.record(TransferRecord {
                peer: o.group.clone(),
                protocol: self.carrier.protocol().into(),
                direction: Direction::Out,
                start: o.start,
                end: self.ctx.clock.unix_f64(),
                messages: 1,
                accepted: u64::from(complete == o.members.len()),
                plain_bytes: o.size,
                wire_bytes: o.wire_bytes,
                reply_plain_bytes: 0,
                reply_wire_bytes: 0,
                updus: o.updus,
                transmissions: 0,
                retransmissions: Some(stats.repair_data_pdus + stats.emcon_data_pdus),
                result: format!(
                    "acknowledged by {complete} of {} ships ({} repair rounds)",
                    o.members.len(),
                    stats.repair_rounds
                ),
            });
        }
        any
    }

    /// Hands a received PDU to the dynamic groups, to every sender (acks) and to the receiver.
    fn on_pdu(&self, st: &mut State, bytes: &Bytes, from: Option<SocketAddr>) {
        let pdu = match self.carrier.unwrap(bytes) {
            Ok(p) => p,
            Err(why) => {
                warn!(%why, "U_PDU on the P_MUL SAP dropped");
                return;
            }
        };
        let now = self.ctx.clock.unix_ms();
        if let Carrier::Ip(ip) = &self.carrier
            && let Ok(
                decoded @ (Pdu::Announce(_) | Pdu::Request(_) | Pdu::Reject(_) | Pdu::Release(_)),
            ) = Pdu::decode(pdu)
        {
            if let Err(e) = st.groups.handle(&decoded) {
                warn!(error = %e, "dynamic group PDU not answered");
            }
            // What `handle` queued: a Reject to the requester's TPORT, or (when another
            // transmitter rejected ours) the Release of that group at its group's address.
            let at = match &decoded {
                Pdu::Reject(r) => st
                    .out
                    .iter()
                    .find(|o| o.dynamic.map(|d| d.0) == Some(IpAddr::V4(r.group.into())))
                    .map(|o| o.group_dest),
                _ => None,
            };
            self.send_group_pdus(
                st,
                at.unwrap_or(Dest::Ip(ip.config.address)),
                from.map(|f| f.ip()),
            );
            let table = self.ctx.routes.current();
            while let Some(event) = st.groups.poll_event() {
                match event {
                    GroupEvent::Join { group, owner } => {
                        let address = IpAddr::V4(group.into());
                        info!(group = %address, owner, "joining a dynamic group announced to us");
                        // Its data comes there; its Release comes to the group's own TPORT.
                        if let Err(e) = ip.listen(address, DPORT) {
                            warn!(error = %e, "cannot join the dynamic group");
                        }
                    }
                    GroupEvent::Leave { group, owner } => {
                        let address = IpAddr::V4(group.into());
                        info!(group = %address, owner, "leaving a released dynamic group");
                        ip.leave(address);
                    }
                    GroupEvent::Rejected { group, by } => self.on_rejected(st, group, by, &table),
                }
            }
            return;
        }
        let mut for_sender = false;
        for o in &mut st.out {
            for_sender |= matches!(o.sender.handle_pdu(pdu, now), Ok(true));
        }
        if !for_sender && let Err(e) = st.receiver.handle_pdu(pdu, now) {
            warn!(error = %e, "P_MUL PDU dropped");
        }
    }

    /// Takes the messages the receiver has completed.
    async fn deliver_received(&self, st: &mut State) {
        while let Some(event) = st.receiver.poll_event() {
            match event {
                ReceiverEvent::Message {
                    source,
                    message_id,
                    data,
                    ..
                } => {
                    if !self.take_message(st, source, message_id, &data).await {
                        st.receiver.forget(source, message_id);
                    }
                }
                ReceiverEvent::Discarded { source, message_id } => {
                    info!(source, message_id, "P_MUL message discarded by its sender");
                }
                ReceiverEvent::Expired { source, message_id } => {
                    warn!(
                        source,
                        message_id, "P_MUL message expired before it was complete"
                    );
                }
            }
        }
    }

    /// Spools a multicast message for the recipients this gateway delivers. False when it
    /// could not be kept (no ack then: the sender repairs and it comes again).
    async fn take_message(
        &self,
        st: &mut State,
        source: u32,
        message_id: u32,
        data: &[u8],
    ) -> bool {
        let start = self.ctx.clock.unix_f64();
        let table = self.ctx.routes.current();
        let Some(peer) = table
            .peers()
            .iter()
            .find(|p| self.carrier.peer_id(p) == Some(source))
        else {
            warn!(
                source,
                message_id, "P_MUL message from a node that is no peer: not taken"
            );
            return false;
        };
        let mail = match mule::decode(data, MuleLimits::default()) {
            Ok(m) => m,
            Err(e) => {
                warn!(peer = %peer.name, message_id, error = %e, "P_MUL message is no MULE mail: not taken");
                return false;
            }
        };
        // The recipients this gateway delivers on its LAN; the others are for the other ships
        // of the multicast.
        let ours: Vec<String> = mail
            .envelope
            .recipients
            .iter()
            .map(|r| r.address.clone())
            .filter(|a| matches!(table.lookup(a).map(|r| r.destination), Ok(RouteTo::Lan)))
            .collect();
        if ours.is_empty() {
            debug!(peer = %peer.name, message_id, "P_MUL message has no recipient here");
            return true;
        }
        let mut policy = GatewayPolicy::new(
            Source::Peer {
                name: peer.name.clone(),
                identity: self.carrier.identity(peer),
                link: "P_MUL",
            },
            Arc::clone(&self.ctx.routes),
        );
        let Classified {
            taken,
            refused,
            later,
        } = classify(&mut policy, &ours);
        if let Some(why) = later {
            warn!(peer = %peer.name, message_id, reason = %why, "P_MUL message not taken now; not acknowledged");
            return false;
        }
        let key = skywave_hmtp::DedupKey::new(&mail.envelope.reverse_path, &ours, &mail.message);
        let now = Instant::now().into_std();
        if st.dedup.cache.check(&key, now) {
            info!(peer = %peer.name, message_id, "duplicate P_MUL message: acknowledged and dropped");
            return true;
        }
        let mt_priority = mail
            .envelope
            .mail_params
            .split_ascii_whitespace()
            .find_map(|p| p.strip_prefix("MT-PRIORITY="))
            .and_then(|v| v.parse::<i8>().ok());
        // The envelope carries the DSN parameters as SMTP writes them (RFC 8494's example
        // envelope, in `skywave_pmul::mule`, has `RET`, `ENVID`, `NOTIFY` and `ORCPT`).
        let rcpt_dsn = taken
            .iter()
            .map(|a| {
                mail.envelope
                    .recipients
                    .iter()
                    .find(|r| r.address == *a)
                    .map(|r| RcptDsn::parse(&r.params))
                    .unwrap_or_default()
            })
            .collect();
        let envelope = Envelope {
            reverse_path: mail.envelope.reverse_path.clone(),
            recipients: taken,
            declared_size: Some(mail.message.len()),
            body_type: BodyType::Unspecified,
            mt_priority,
            helo: peer.name.clone(),
            protocol: Protocol::Smtp,
            auth_user: None,
            dsn: MailDsn::parse(&mail.envelope.mail_params),
            rcpt_dsn,
            smtputf8: false,
        };
        let reference = format!("pmul-{}-{message_id}", peer.name);
        let stored = self
            .ctx
            .store_received(&reference, &policy, &envelope, &mail.message, refused)
            .await;
        let ok = match stored {
            Ok(id) => {
                st.dedup.persist(&key);
                st.dedup.cache.insert(key, now);
                info!(peer = %peer.name, message_id, queued = %id, "received by P_MUL multicast");
                true
            }
            Err(why) => {
                warn!(peer = %peer.name, message_id, reason = %why, "P_MUL message not kept; not acknowledged, so the sender repairs");
                false
            }
        };
        self.ctx.transfers.record(TransferRecord {
            peer: peer.name.clone(),
            protocol: self.carrier.protocol().into(),
            direction: Direction::In,
            start,
            end: self.ctx.clock.unix_f64(),
            messages: 1,
            accepted: u64::from(ok),
            plain_bytes: mail.message.len() as u64,
            wire_bytes: data.len() as u64,
            reply_plain_bytes: 0,
            reply_wire_bytes: 0,
            updus: 0,
            transmissions: 0,
            retransmissions: None,
            result: if ok {
                "taken".into()
            } else {
                "not taken".into()
            },
        });
        ok
    }
}

/// The spool targets (peer or group names) of a message's recipients still waiting.
pub(super) fn pending_targets(recipients: &[skywave_spool::Recipient]) -> HashSet<String> {
    recipients
        .iter()
        .filter(|r| !r.state.is_final())
        .filter_map(|r| match &r.target {
            Target::Peer(p) => Some(p.clone()),
            Target::Lan => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udop_header_round_trip_and_checks() {
        let pdu = [0x00, 0x24, 0x01, 0x02];
        let u = udop_wrap(7, &pdu);
        assert_eq!(u[..6], [0x00, 0x07, 0x00, 0x00, 0x20, 0x00]);
        assert_eq!(udop_unwrap(&u), Ok(&pdu[..]));
        assert!(udop_unwrap(&u[..5]).unwrap_err().contains("shorter"));
        let mut other = u.clone();
        other[4] = 0x10;
        other[5] = 0x02;
        assert!(udop_unwrap(&other).unwrap_err().contains("0x1002"));
        let mut seg = u;
        seg[3] = 1;
        assert!(udop_unwrap(&seg).unwrap_err().contains("segmented"));
    }

    #[test]
    fn a_multicast_lives_no_longer_than_its_message() {
        let now = 1_800_000_000_000;
        let plain = b"Subject: plain\r\n\r\nbody\r\n";
        assert_eq!(lifetime_ms(plain, now), LIFETIME_MS);
        let soon = format!(
            "Expires: {}\r\nSubject: wx\r\n\r\nbody\r\n",
            skywave_spool::dsn::rfc5322_date(now / 1000 + 600)
        );
        assert_eq!(lifetime_ms(soon.as_bytes(), now), 600_000);
        let past = b"Expires: 1 Jan 2000 00:00 +0000\r\n\r\nbody\r\n";
        assert_eq!(lifetime_ms(past, now), 0);
        let far = b"Expires: 1 Jan 2999 00:00 +0000\r\n\r\nbody\r\n";
        assert_eq!(lifetime_ms(far, now), LIFETIME_MS);
    }

    #[test]
    fn airtime_counts_a_quarter_of_overhead() {
        assert_eq!(airtime_ms(1200, 1200), 10_000);
        assert_eq!(airtime_ms(150, 300), 5_000);
    }
}
