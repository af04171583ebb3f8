//! CFTP sessions (STANAG 5066 Annex F.14, SAP 12): which files are in flight, acknowledgement
//! timeouts and retransmission on the sending side; spool ordering and de-duplication on the
//! receiving side. Sans-IO: bytes and [`Instant`]s in, U_PDUs, events and deadlines out.
//!
//! Sits between the gateway's per-peer link scheduler (which takes messages from the spool and
//! maps outcomes back to it) and the SIS bearer bound on SAP 12; the byte layouts come from
//! [`crate::cftp`].
//!
//! # Sending ([`CftpSender`])
//! Each message becomes one gzip'd mail-file under its own RCOPv1 U_PDU id (consecutive, 8-bit,
//! wrapping; an id is never reused while its file is unacknowledged). Towards a skywave peer the
//! messages queued together share files instead: a bundle is their mail-files end to end, gzipped
//! as one ([`CftpSenderSettings::max_bundle`], [`crate::cftp::encode_bundle`]), so that a batch
//! of small messages compresses as well as in an HMTP session's one deflate stream, where one
//! gzip per message cannot refer back to the messages before it. An acknowledgement settles every
//! message of its file. At most
//! [`CftpSenderSettings::max_in_flight`] files wait for their acknowledgement at once: 1 towards
//! any other CFTP node, as a standard CFTP delivery agent does (Annex F: "nominally
//! stop-and-wait"), several towards a skywave peer, which Annex F allows "with prior knowledge of
//! the peer". A file unacknowledged [`CftpSenderSettings::ack_timeout`] after its last segment
//! was handed to the SIS is sent again under the same ids (with
//! [`CftpSenderSettings::delivery_timeout`], not before the peer's node has confirmed that
//! segment plus the ack timeout, or the delivery timeout passed unconfirmed); after
//! [`CftpSenderSettings::max_transmissions`] the message ends [`Disposition::NoAnswer`] and stays
//! in the spool (the receiver removes any duplicate).
//!
//! An id whose file may still have an acknowledgement on its way (the file was given up, or was
//! sent more than once) is held back from reuse for one ack timeout, so that a late or repeated
//! acknowledgement can never be taken for the next file under that id.
//!
//! # Receiving ([`CftpReceiverSession`])
//! Wraps the reassembling [`Receiver`]. Each message of a complete file (one, or several in a
//! bundle) becomes [`CftpReceiverEvent::File`] with its own [`CftpTicket`]; the file's
//! acknowledgement is released only when the owner has handed back every ticket after the spool
//! writes are durable ([`CftpReceiverSession::accepted`]), as
//! [`crate::server::HmtpServer`] does with its 250. A file the [`DedupCache`] already holds (same
//! Message-ID header and envelope, or same content) is acknowledged at once and reported as
//! [`CftpReceiverEvent::Duplicate`], never delivered twice.
//!
//! CFTP has no negative acknowledgement. A file the owner cannot take is therefore either
//! - [`CftpReceiverSession::deferred`] (a transient problem, e.g. the spool is full): no
//!   acknowledgement, so the sender sends it again after its ack timeout and finally keeps it
//!   queued; or
//! - [`CftpReceiverSession::bounced`] (a permanent failure, e.g. unknown recipient): the owner
//!   has durably queued a delivery status notification to the return path, which is now this
//!   node's responsibility, so the file is acknowledged and remembered like an accepted one.
//!
//! A file that fails to decode (gap, bad BFTP header, corrupt gzip, malformed mail-file) is
//! dropped and counted; the sender, having no acknowledgement, sends it again.
//!
//! # Dispatch
//! Acknowledgements and files for us share SAP 12. Give each U_PDU from the peer to
//! [`CftpSender::receive`] first; if it answers [`AckOutcome::NotAnAck`], give it to
//! [`CftpReceiverSession::receive`]. (A file segment can never look like an acknowledgement: a
//! BFTPv1 PDU is at least 8 bytes long.)
//!
//! Time is `std::time::Instant`, as for [`DedupCache`]; under tokio pass
//! `tokio::time::Instant::now().into_std()`, which follows paused test time.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use skywave_hmtp::*;
//!
//! let now = Instant::now();
//! let mut sender = CftpSender::new(CftpSenderSettings::standard(200))?;
//! sender.push(BatchMessage {
//!     id: "Q1".into(),
//!     reverse_path: "a@ship.example".into(),
//!     recipients: vec!["b@shore.example".into()],
//!     body: b"Subject: hi\r\n\r\nHello\r\n".to_vec(),
//!     eight_bit: false,
//!     dsn: Default::default(),
//!     rcpt_dsn: Vec::new(),
//! })?;
//! let mut receiver = CftpReceiverSession::new(CftpReceiverSettings::default());
//! let mut dedup = DedupCache::new(Duration::from_secs(86_400), 100_000);
//! while let Some(updu) = sender.poll_transmit(now) {
//!     receiver.receive(now, &updu, &mut dedup);
//! }
//! while let Some(event) = receiver.poll_event() {
//!     if let CftpReceiverEvent::File(file) = event {
//!         // ... write file.mail to the spool and fsync, then:
//!         receiver.accepted(file.ticket, now, &mut dedup)?;
//!     }
//! }
//! while let Some(ack) = receiver.poll_transmit() {
//!     assert!(matches!(sender.receive(now, &ack), AckOutcome::Acked { .. }));
//! }
//! let result = sender.poll_outcome().ok_or("no outcome")?;
//! assert!(matches!(result.recipients[0].1, Disposition::Delivered(_)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use skywave_compress::gzip_compress;
use skywave_smtp::{EnhancedCode, Reply};
use thiserror::Error;

use crate::cftp::{
    ACK_BODY, MAX_MESSAGE_ID, MailFile, RCOP_HEADER_LEN, RcopHeader, Received, Receiver,
    ReceiverLimits, bftp_pdu, segment,
};
use crate::client::{BatchMessage, Disposition, MessageResult};
use crate::dedup::{DedupCache, DedupKey};
use crate::error::CftpError;

/// Default acknowledgement timeout: long enough for a file and its acknowledgement to cross a
/// slow HF link with ARQ repeats and a turnaround or two.
pub const DEFAULT_ACK_TIMEOUT: Duration = Duration::from_secs(300);
/// Default number of transmissions of one file before its message is given up for this round.
pub const DEFAULT_MAX_TRANSMISSIONS: u32 = 3;
/// Default number of files in flight towards a skywave peer: enough for a whole batch of small
/// messages to go in one transmission and have its acknowledgements come back in one, as an HMTP
/// batch does (one file at a time costs a turnaround per file: 21 transmissions for 10 messages
/// of 386 bytes at 1200 bit/s against 3). Half the id space, so that ids held back after a
/// retransmission never stall the sender.
pub const DEFAULT_SKYWAVE_IN_FLIGHT: usize = 128;
/// Default number of messages in one file towards a skywave peer (a bundle, see
/// [`crate::cftp::encode_bundle`]): a batch of small messages then compresses as one, as an
/// HMTP session's deflate stream does.
pub const DEFAULT_SKYWAVE_BUNDLE: usize = 256;
/// Default cap on a bundle's mail-file bytes before compression. Each new bundle starts gzip
/// without history, so bundles much smaller than a batch give back part of the gain: with 64 KiB
/// a batch of 100 messages of 1867 bytes put 18 % more on the air than one HMTP session, with
/// 256 KiB 0.6 % less (`skywave-bench compare --scenarios cftp-5066,hmtp-5066-deflate
/// --messages 100`). A bundle is one file: it is delivered when its last byte is in and is sent
/// again whole if its acknowledgement does not come, as an HMTP session of that size would be;
/// the gateway's per-peer `batch_bytes` budget bounds both.
pub const DEFAULT_BUNDLE_BYTES: usize = 256 * 1024;
/// Default time after which a partly received file with no new segment is dropped.
pub const DEFAULT_PARTIAL_TIMEOUT: Duration = Duration::from_secs(900);
/// U_PDU ids: one byte.
const ID_SPACE: usize = 256;
/// Most acknowledgements owed for one pending file (repeats of it that arrived while the spool
/// decided); each is a distinct (connection, U_PDU id) pair, so this is never reached in practice.
const MAX_OWED_ACKS: usize = 64;

/// What went wrong in a CFTP session.
#[derive(Debug, Error)]
pub enum CftpSessionError {
    /// The settings cannot work.
    #[error("CFTP settings: {0}")]
    Settings(&'static str),
    /// The MTU leaves no room for data, or another layout error in the settings.
    #[error(transparent)]
    Layout(#[from] CftpError),
    /// A message that cannot be laid out as a CFTP mail-file.
    #[error("message {id} cannot be sent by CFTP: {source}")]
    Message {
        /// The caller's id of the message.
        id: String,
        /// What is wrong with it.
        #[source]
        source: CftpError,
    },
    /// A message with this id is already queued or in flight.
    #[error("message {0} is already queued or in flight on this CFTP sender")]
    DuplicateMessage(String),
    /// A spool decision for a file this receiver is not waiting on.
    #[error("spool decision for a CFTP file this receiver session is not waiting on")]
    UnknownTicket,
}

/// The CFTP MessageID (Annex F Table F-10: 1-255 letters and digits, unique per message) for a
/// spool queue id: the id itself if it qualifies; otherwise its letters and digits (at most 200)
/// followed by `X` and a 64-bit FNV-1a hash of the whole id in hex, so that it stays unique and
/// is the same every time the message is sent.
pub fn cftp_message_id(queue_id: &str) -> String {
    if !queue_id.is_empty()
        && queue_id.len() <= MAX_MESSAGE_ID
        && queue_id.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return queue_id.to_string();
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in queue_id.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let mut id: String = queue_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(200)
        .collect();
    id.push_str(&format!("X{hash:016x}"));
    id
}

/// Sender settings, one per peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CftpSenderSettings {
    /// The SIS MTU: no U_PDU is longer; segments carry at most MTU - 4 bytes.
    pub mtu: usize,
    /// The RCOPv1 connection id, 0-15 (0 for non-multiplexed use).
    pub connection: u8,
    /// Files waiting for their acknowledgement at once, 1-256: 1 for a standard CFTP peer.
    pub max_in_flight: usize,
    /// Time from handing a file's last segment to the SIS until it is sent again (with
    /// `delivery_timeout`: from the node's confirmation of that segment, when later).
    pub ack_timeout: Duration,
    /// Where the SIS confirms delivery of each U_PDU: how long a file's last segment may wait in
    /// the node for the peer's node to confirm it ([`CftpSender::delivered`]) before the file
    /// is sent again. The peer cannot acknowledge a file it does not have, and a copy sent while
    /// the node still holds the first (behind other stations' traffic on a shared frequency)
    /// only queues behind it. `None`: no confirmations, the ack timeout runs from the hand-over.
    pub delivery_timeout: Option<Duration>,
    /// Transmissions of one file (the first included) before the message ends
    /// [`Disposition::NoAnswer`]; at least 1.
    pub max_transmissions: u32,
    /// gzip level, 0-9.
    pub gzip_level: u32,
    /// Messages in one file, 1-256: 1 for a standard CFTP peer (Annex F: one mail-file per
    /// file); more towards a skywave peer, whose receiver takes bundles.
    pub max_bundle: usize,
    /// A bundle takes further messages only while its mail-files stay within this many bytes
    /// before compression (a message larger than that goes alone).
    pub bundle_bytes: usize,
}

impl CftpSenderSettings {
    /// Towards a standard CFTP node: one file at a time, waiting for its acknowledgement.
    pub fn standard(mtu: usize) -> Self {
        Self {
            mtu,
            connection: 0,
            max_in_flight: 1,
            ack_timeout: DEFAULT_ACK_TIMEOUT,
            delivery_timeout: None,
            max_transmissions: DEFAULT_MAX_TRANSMISSIONS,
            gzip_level: 9,
            max_bundle: 1,
            bundle_bytes: 0,
        }
    }

    /// Towards a skywave peer: `max_in_flight` files (1-256) in flight by U_PDU id, each a
    /// bundle of up to [`DEFAULT_SKYWAVE_BUNDLE`] messages and [`DEFAULT_BUNDLE_BYTES`].
    pub fn skywave(mtu: usize, max_in_flight: usize) -> Self {
        Self {
            max_in_flight,
            max_bundle: DEFAULT_SKYWAVE_BUNDLE,
            bundle_bytes: DEFAULT_BUNDLE_BYTES,
            ..Self::standard(mtu)
        }
    }
}

/// Counts of a CFTP sender.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CftpSenderStats {
    /// Files released (first transmissions).
    pub files: u64,
    /// Messages in those files (more than `files` when bundles were sent).
    pub messages: u64,
    /// Files sent again after an ack timeout.
    pub retransmitted_files: u64,
    /// Files acknowledged.
    pub acked_files: u64,
    /// Files given up after the last transmission timed out, or on [`CftpSender::close`].
    pub given_up_files: u64,
    /// U_PDUs handed out (all transmissions).
    pub updus: u64,
    /// Bytes of those U_PDUs, RCOPv1 headers included.
    pub wire_bytes: u64,
    /// Mail-file bytes before gzip, per file released (once per file).
    pub bytes_plain: u64,
    /// The same files after gzip (the BFTPv1 file data).
    pub bytes_gzip: u64,
    /// Acknowledgements received for a file in flight.
    pub acks: u64,
    /// Acknowledgements for an id that was in use before (a repeat or a late one): ignored.
    pub duplicate_acks: u64,
    /// Acknowledgements for ids never used, or on another connection: ignored.
    pub unknown_acks: u64,
}

/// What [`CftpSender::receive`] made of a U_PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckOutcome {
    /// It acknowledged a file: these messages are delivered.
    Acked {
        /// The caller's ids of the file's messages (one, or several in a bundle).
        ids: Vec<String>,
    },
    /// An acknowledgement for an id used before but not awaiting one now: ignored.
    Duplicate,
    /// An acknowledgement for an id or connection we never used: ignored.
    Unknown,
    /// Not an acknowledgement (a file segment for the receiving side, or garbage).
    NotAnAck,
}

/// One message of a file: the caller's id and its recipients, for the outcome.
#[derive(Debug, Clone)]
struct Member {
    id: String,
    recipients: Vec<String>,
}

/// A file laid out for CFTP, its U_PDU id still to be filled in: one message, or a bundle.
#[derive(Debug)]
struct File {
    members: Vec<Member>,
    /// The CFTP MessageID of its first message (the BFTP file name).
    message_id: String,
    /// The mail-files before compression, kept while queued so that a bundle can be made.
    plain: Vec<u8>,
    updus: Vec<Vec<u8>>,
    plain_len: usize,
    gzip_len: usize,
}

/// A file that has an id and waits for its acknowledgement.
#[derive(Debug)]
struct Flight {
    file: File,
    /// Transmissions started, the current one included.
    transmissions: u32,
    /// Next segment to hand out while (re)sending.
    next_segment: usize,
    /// Set when the last segment went out: the ack timeout.
    deadline: Option<Instant>,
    /// While the last segment waits for the node's delivery confirmation: how long it may.
    delivery_by: Option<Instant>,
}

impl Flight {
    /// When the file is sent again or given up: its ack deadline, or while its delivery is
    /// awaited, the end of that wait when later.
    fn expires(&self) -> Option<Instant> {
        self.deadline
            .map(|d| self.delivery_by.map_or(d, |by| by.max(d)))
    }
}

/// The sending side of CFTP towards one peer.
#[derive(Debug)]
pub struct CftpSender {
    settings: CftpSenderSettings,
    queue: VecDeque<File>,
    flights: BTreeMap<u8, Flight>,
    /// Caller ids of the messages queued or in flight.
    active: HashSet<String>,
    /// Ids with segments to hand out, in order (a file at a time).
    sending: VecDeque<u8>,
    next_id: u8,
    /// Per id: not to be reused before this instant.
    quarantine: Vec<Option<Instant>>,
    /// Per id: has carried a file that left flight (acknowledged or given up) before.
    retired: Vec<bool>,
    outcomes: VecDeque<MessageResult>,
    stats: CftpSenderStats,
}

impl CftpSender {
    /// A sender with these settings. Fails on an MTU of 4 bytes or less, a connection id over
    /// 15, files in flight outside 1-256, a zero ack timeout or zero transmissions.
    pub fn new(settings: CftpSenderSettings) -> Result<Self, CftpSessionError> {
        if settings.mtu <= RCOP_HEADER_LEN {
            return Err(CftpError::MtuTooSmall { mtu: settings.mtu }.into());
        }
        if settings.connection > 15 {
            return Err(CftpSessionError::Settings(
                "the RCOPv1 connection id must be 0-15",
            ));
        }
        if !(1..=ID_SPACE).contains(&settings.max_in_flight) {
            return Err(CftpSessionError::Settings(
                "files in flight must be 1 to 256 (one per U_PDU id)",
            ));
        }
        if settings.ack_timeout.is_zero() {
            return Err(CftpSessionError::Settings(
                "the acknowledgement timeout must be longer than zero",
            ));
        }
        if settings.max_transmissions == 0 {
            return Err(CftpSessionError::Settings(
                "a file needs at least one transmission",
            ));
        }
        if !(1..=ID_SPACE).contains(&settings.max_bundle) {
            return Err(CftpSessionError::Settings(
                "messages in one file must be 1 to 256",
            ));
        }
        Ok(Self {
            settings,
            queue: VecDeque::new(),
            flights: BTreeMap::new(),
            active: HashSet::new(),
            sending: VecDeque::new(),
            next_id: 0,
            quarantine: vec![None; ID_SPACE],
            retired: vec![false; ID_SPACE],
            outcomes: VecDeque::new(),
            stats: CftpSenderStats::default(),
        })
    }

    /// Queues a message: lays out its mail-file, gzips it and cuts it into U_PDUs now, so that a
    /// message CFTP cannot carry is refused here (the caller bounces it) rather than later.
    /// `eight_bit` needs nothing: the mail-file is 8-bit clean.
    pub fn push(&mut self, message: BatchMessage) -> Result<(), CftpSessionError> {
        if self.active.contains(&message.id) {
            return Err(CftpSessionError::DuplicateMessage(message.id));
        }
        let fail = |source: CftpError| CftpSessionError::Message {
            id: message.id.clone(),
            source,
        };
        let mail = MailFile {
            message_id: cftp_message_id(&message.id),
            return_path: (!message.reverse_path.is_empty()).then(|| message.reverse_path.clone()),
            recipients: message.recipients.clone(),
            message: message.body,
        };
        let plain = mail.encode().map_err(fail)?;
        let file = self
            .lay_out(
                vec![Member {
                    id: message.id.clone(),
                    recipients: message.recipients,
                }],
                mail.message_id,
                plain,
            )
            .map_err(fail)?;
        self.active.insert(message.id);
        self.queue.push_back(file);
        Ok(())
    }

    /// Compresses mail-files into one file's U_PDUs (the U_PDU id, byte 1, is filled in when
    /// the file is released).
    fn lay_out(
        &self,
        members: Vec<Member>,
        message_id: String,
        plain: Vec<u8>,
    ) -> Result<File, CftpError> {
        let gz = gzip_compress(&plain, self.settings.gzip_level)
            .map_err(|e| CftpError::Compress(e.to_string()))?;
        let bftp = bftp_pdu(&format!("{message_id}.gz"), &gz)?;
        let updus = segment(self.settings.connection, 0, &bftp, self.settings.mtu)?;
        Ok(File {
            members,
            message_id,
            plain_len: plain.len(),
            plain,
            updus,
            gzip_len: gz.len(),
        })
    }

    /// The next file to release: the first queued one, with the queued messages after it
    /// bundled in while the settings allow (see [`CftpSenderSettings::max_bundle`]).
    fn next_file(&mut self) -> Option<File> {
        let first = self.queue.pop_front()?;
        let mut take = 1;
        let mut bytes = first.plain.len();
        // Only single-message files wait in the queue; a bundle is made once, at release.
        while take < self.settings.max_bundle
            && let Some(next) = self.queue.get(take - 1)
            && bytes + next.plain.len() <= self.settings.bundle_bytes
        {
            bytes += next.plain.len();
            take += 1;
        }
        if take == 1 {
            return Some(first);
        }
        let rest: Vec<File> = self.queue.drain(..take - 1).collect();
        let mut members = Vec::with_capacity(take);
        let mut plain = Vec::with_capacity(bytes);
        for f in std::iter::once(&first).chain(&rest) {
            plain.extend_from_slice(&f.plain);
            members.extend(f.members.iter().cloned());
        }
        match self.lay_out(members, first.message_id.clone(), plain) {
            Ok(bundle) => Some(bundle),
            // Not expected (each message was laid out alone, and the bundle is capped); should
            // it happen, the messages go one file each, as they were queued.
            Err(_) => {
                for f in rest.into_iter().rev() {
                    self.queue.push_front(f);
                }
                Some(first)
            }
        }
    }

    /// The next U_PDU to hand to the SIS at `now`, if any: segments of one file after another,
    /// retransmissions in turn with new files. A file's ack timer starts when its last segment
    /// is taken, so take U_PDUs only as fast as the bearer accepts them (SIS flow control):
    /// a file waiting in a deep local queue would otherwise time out before it was on the air.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        self.release(now);
        // Bounded: each pass either returns or removes an entry from `sending`.
        while let Some(&id) = self.sending.front() {
            let Some(flight) = self.flights.get_mut(&id) else {
                self.sending.pop_front();
                continue;
            };
            let Some(updu) = flight.file.updus.get(flight.next_segment) else {
                self.sending.pop_front();
                continue;
            };
            let updu = updu.clone();
            flight.next_segment += 1;
            if flight.next_segment >= flight.file.updus.len() {
                self.sending.pop_front();
                flight.deadline = now.checked_add(self.settings.ack_timeout);
                flight.delivery_by = self
                    .settings
                    .delivery_timeout
                    .and_then(|t| now.checked_add(t));
            }
            self.stats.updus += 1;
            self.stats.wire_bytes += updu.len() as u64;
            return Some(updu);
        }
        None
    }

    /// Takes one U_PDU from the peer on SAP 12 at `now`. Acknowledgements of files in flight
    /// settle their messages; others are counted and ignored; anything else is
    /// [`AckOutcome::NotAnAck`], for the receiving side.
    pub fn receive(&mut self, now: Instant, updu: &[u8]) -> AckOutcome {
        let Ok((header, body)) = RcopHeader::decode(updu) else {
            return AckOutcome::NotAnAck;
        };
        if body != ACK_BODY || header.segment != 0 {
            return AckOutcome::NotAnAck;
        }
        let id = header.updu_id;
        if header.connection != self.settings.connection {
            self.stats.unknown_acks += 1;
            return AckOutcome::Unknown;
        }
        // An acknowledgement is sent on the last byte of a file: for a file whose first
        // transmission is not complete it can only belong to an earlier file under this id.
        let settles = self
            .flights
            .get(&id)
            .is_some_and(|f| f.transmissions > 1 || f.deadline.is_some());
        if !settles {
            return if self.retired[usize::from(id)] {
                self.stats.duplicate_acks += 1;
                AckOutcome::Duplicate
            } else {
                self.stats.unknown_acks += 1;
                AckOutcome::Unknown
            };
        }
        let Some(flight) = self.flights.remove(&id) else {
            return AckOutcome::Unknown;
        };
        self.sending.retain(|&s| s != id);
        self.retired[usize::from(id)] = true;
        if flight.transmissions > 1 {
            // Another acknowledgement of this file may still come.
            self.quarantine[usize::from(id)] = now.checked_add(self.settings.ack_timeout);
        }
        self.stats.acks += 1;
        self.stats.acked_files += 1;
        let reply = Reply::new(250, EnhancedCode::new(2, 0, 0), "CFTP file acknowledged");
        let ids = flight.file.members.iter().map(|m| m.id.clone()).collect();
        self.finish(flight.file, Disposition::Delivered(reply));
        self.release(now);
        AckOutcome::Acked { ids }
    }

    /// The peer's node confirmed segment `segment` of U_PDU id `updu_id` (one this sender
    /// handed out) at `now`. The confirmation of a file's last segment, once all of it was
    /// handed out, means the peer has the file: its ack timeout runs from here (at the
    /// earliest from the hand-over, as without confirmations). Any other is ignored. Returns
    /// whether it settled a wait.
    pub fn delivered(&mut self, now: Instant, updu_id: u8, segment: u16) -> bool {
        let Some(flight) = self.flights.get_mut(&updu_id) else {
            return false;
        };
        let last = flight.file.updus.len().saturating_sub(1);
        if flight.deadline.is_none() || usize::from(segment) != last {
            return false;
        }
        flight.delivery_by = None;
        if let Some(by) = now.checked_add(self.settings.ack_timeout) {
            flight.deadline = flight.deadline.map(|d| d.max(by));
        }
        true
    }

    /// The next instant [`CftpSender::handle_timeout`] has work: an ack timeout, or an id
    /// becoming free for a waiting file.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let acks = self.flights.values().filter_map(Flight::expires).min();
        let waiting = !self.queue.is_empty() && self.flights.len() < self.settings.max_in_flight;
        let ids = waiting
            .then(|| self.quarantine.iter().flatten().min().copied())
            .flatten();
        match (acks, ids) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Sends again every file whose ack timeout has passed at `now`, or gives its message up
    /// ([`Disposition::NoAnswer`]) after the last transmission; releases waiting files.
    pub fn handle_timeout(&mut self, now: Instant) {
        let expired: Vec<u8> = self
            .flights
            .iter()
            .filter(|(_, f)| f.expires().is_some_and(|d| d <= now))
            .map(|(&id, _)| id)
            .collect();
        for id in expired {
            let Some(flight) = self.flights.get_mut(&id) else {
                continue;
            };
            if flight.transmissions < self.settings.max_transmissions {
                flight.transmissions += 1;
                flight.next_segment = 0;
                flight.deadline = None;
                flight.delivery_by = None;
                self.sending.push_back(id);
                self.stats.retransmitted_files += 1;
            } else if let Some(flight) = self.flights.remove(&id) {
                self.give_up(now, id, flight);
            }
        }
        self.release(now);
    }

    /// The link to the peer is gone or the owner stops: every queued or unacknowledged message
    /// ends [`Disposition::NoAnswer`] (stays in the spool). The sender can be used again.
    pub fn close(&mut self, now: Instant) {
        self.sending.clear();
        for (id, flight) in std::mem::take(&mut self.flights) {
            self.give_up(now, id, flight);
        }
        while let Some(file) = self.queue.pop_front() {
            self.finish(file, Disposition::NoAnswer);
        }
    }

    /// The next finished message, in the order they finished.
    pub fn poll_outcome(&mut self) -> Option<MessageResult> {
        self.outcomes.pop_front()
    }

    /// The outcome of message `id`, if it finished and was not yet taken by
    /// [`CftpSender::poll_outcome`].
    pub fn outcome(&self, id: &str) -> Option<&MessageResult> {
        self.outcomes.iter().rev().find(|r| r.id == id)
    }

    /// Messages waiting for a free slot.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Files sent (or being sent) and not yet acknowledged.
    pub fn in_flight(&self) -> usize {
        self.flights.len()
    }

    /// True when nothing is queued or in flight.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.flights.is_empty()
    }

    /// The counts so far.
    pub fn stats(&self) -> CftpSenderStats {
        self.stats
    }

    /// The settings.
    pub fn settings(&self) -> &CftpSenderSettings {
        &self.settings
    }

    fn give_up(&mut self, now: Instant, id: u8, flight: Flight) {
        self.retired[usize::from(id)] = true;
        self.quarantine[usize::from(id)] = now.checked_add(self.settings.ack_timeout);
        self.stats.given_up_files += 1;
        self.finish(flight.file, Disposition::NoAnswer);
    }

    fn finish(&mut self, file: File, disposition: Disposition) {
        for m in file.members {
            self.active.remove(&m.id);
            self.outcomes.push_back(MessageResult {
                id: m.id,
                recipients: m
                    .recipients
                    .into_iter()
                    .map(|r| (r, disposition.clone()))
                    .collect(),
            });
        }
    }

    /// Gives queued files ids while slots and ids are free.
    fn release(&mut self, now: Instant) {
        // Bounded: each pass removes a queued file or stops.
        while self.flights.len() < self.settings.max_in_flight && !self.queue.is_empty() {
            let Some(id) = self.free_id(now) else {
                break;
            };
            let Some(mut file) = self.next_file() else {
                continue;
            };
            // Released: the plain mail-files are no longer needed.
            file.plain = Vec::new();
            for updu in &mut file.updus {
                if let Some(b) = updu.get_mut(1) {
                    *b = id;
                }
            }
            self.stats.files += 1;
            self.stats.messages += file.members.len() as u64;
            self.stats.bytes_plain += file.plain_len as u64;
            self.stats.bytes_gzip += file.gzip_len as u64;
            self.flights.insert(
                id,
                Flight {
                    file,
                    transmissions: 1,
                    next_segment: 0,
                    deadline: None,
                    delivery_by: None,
                },
            );
            self.sending.push_back(id);
            self.next_id = id.wrapping_add(1);
        }
    }

    /// The first id from `next_id` on that is neither in flight nor held back.
    fn free_id(&mut self, now: Instant) -> Option<u8> {
        let mut id = self.next_id;
        for _ in 0..ID_SPACE {
            let slot = usize::from(id);
            if self.quarantine[slot].is_some_and(|until| until <= now) {
                self.quarantine[slot] = None;
            }
            if self.quarantine[slot].is_none() && !self.flights.contains_key(&id) {
                return Some(id);
            }
            id = id.wrapping_add(1);
        }
        None
    }
}

/// Receiver settings, one per peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CftpReceiverSettings {
    /// Reassembly limits.
    pub limits: ReceiverLimits,
    /// A partly received file with no new segment for this long is dropped.
    pub partial_timeout: Duration,
}

impl Default for CftpReceiverSettings {
    fn default() -> Self {
        Self {
            limits: ReceiverLimits::default(),
            partial_timeout: DEFAULT_PARTIAL_TIMEOUT,
        }
    }
}

/// Proof that a received file waits for the spool; hand it back to
/// [`CftpReceiverSession::accepted`], [`CftpReceiverSession::bounced`] or
/// [`CftpReceiverSession::deferred`]. Neither cloneable nor constructible outside this crate.
#[derive(Debug, PartialEq, Eq)]
pub struct CftpTicket {
    session: u64,
    serial: u64,
    /// The message's place among the file's messages handed to the owner.
    index: usize,
}

/// A complete file to spool.
#[derive(Debug, PartialEq, Eq)]
pub struct IncomingFile {
    /// The mail-file: CFTP message id, envelope and the message (dot-unstuffed, CRLF line ends).
    pub mail: MailFile,
    /// Its de-duplication key.
    pub key: DedupKey,
    /// RCOPv1 connection id it came under.
    pub connection: u8,
    /// RCOPv1 U_PDU id it came under.
    pub updu_id: u8,
    /// To pass back once the spool decided.
    pub ticket: CftpTicket,
}

/// Something for the owner of a [`CftpReceiverSession`].
#[derive(Debug)]
pub enum CftpReceiverEvent {
    /// A file to spool; then hand its ticket back.
    File(IncomingFile),
    /// A file already accepted (or waiting for the spool): acknowledged, not delivered again.
    Duplicate {
        /// Its CFTP message id.
        message_id: String,
        /// Its de-duplication key.
        key: DedupKey,
    },
    /// A U_PDU or a file that could not be used: the partial file is dropped.
    Dropped(CftpError),
}

/// Counts of a CFTP receiver session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CftpReceiverStats {
    /// U_PDUs received.
    pub updus: u64,
    /// Bytes of those U_PDUs.
    pub bytes: u64,
    /// Files completed and decoded.
    pub files: u64,
    /// Of those, duplicates (acknowledged without delivery).
    pub duplicates: u64,
    /// Files accepted by the spool.
    pub accepted: u64,
    /// Files bounced by the owner (acknowledged).
    pub bounced: u64,
    /// Files deferred by the owner (not acknowledged).
    pub deferred: u64,
    /// U_PDUs or files dropped because they could not be decoded.
    pub decode_errors: u64,
    /// Partial files dropped after the partial timeout.
    pub partials_expired: u64,
    /// Acknowledgements that reached the receiving side (they belong to the sender).
    pub stray_acks: u64,
    /// Acknowledgement U_PDUs released.
    pub acks_sent: u64,
}

/// A file whose messages were handed to the owner and are not all decided.
#[derive(Debug)]
struct Pending {
    /// The keys of every message of the file, to recognise a copy of it.
    keys: Vec<DedupKey>,
    /// Messages handed to the owner and not yet decided, by ticket index.
    waiting: BTreeMap<usize, DedupKey>,
    /// Messages spooled or bounced: remembered for de-duplication once the file is settled.
    decided: Vec<DedupKey>,
    /// A message was deferred (or waits under another file): no acknowledgement.
    deferred: bool,
    /// (connection, U_PDU id) of every copy that arrived meanwhile: each is acknowledged.
    acks: Vec<(u8, u8)>,
}

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// The receiving side of CFTP from one peer (the reassembly key of Annex F is source node and
/// SAP, then connection and U_PDU id: keep one session per peer).
#[derive(Debug)]
pub struct CftpReceiverSession {
    settings: CftpReceiverSettings,
    session: u64,
    receiver: Receiver,
    /// Last segment time of each partial file.
    activity: BTreeMap<(u8, u8), Instant>,
    pending: BTreeMap<u64, Pending>,
    pending_keys: HashMap<DedupKey, u64>,
    serial: u64,
    events: VecDeque<CftpReceiverEvent>,
    acks: VecDeque<Vec<u8>>,
    stats: CftpReceiverStats,
}

impl CftpReceiverSession {
    /// A receiver session with these settings.
    pub fn new(settings: CftpReceiverSettings) -> Self {
        Self {
            settings,
            session: NEXT_SESSION.fetch_add(1, Ordering::Relaxed),
            receiver: Receiver::new(settings.limits),
            activity: BTreeMap::new(),
            pending: BTreeMap::new(),
            pending_keys: HashMap::new(),
            serial: 0,
            events: VecDeque::new(),
            acks: VecDeque::new(),
            stats: CftpReceiverStats::default(),
        }
    }

    /// Takes one U_PDU from the peer on SAP 12, received at `now`.
    pub fn receive(&mut self, now: Instant, updu: &[u8], dedup: &mut DedupCache) {
        self.stats.updus += 1;
        self.stats.bytes += updu.len() as u64;
        let ids = RcopHeader::decode(updu)
            .ok()
            .map(|(h, _)| (h.connection, h.updu_id));
        match self.receiver.receive(updu) {
            Ok(Received::Partial) => {
                if let Some(ids) = ids {
                    self.activity.insert(ids, now);
                }
            }
            Ok(Received::Ack { .. }) => self.stats.stray_acks += 1,
            Ok(Received::Complete { mails, ack }) => {
                if let Some(ids) = ids {
                    self.activity.remove(&ids);
                    self.complete(now, mails, ids, ack, dedup);
                }
            }
            Err(e) => {
                // Every error leaves no file under these ids (the receiver drops it).
                if let Some(ids) = ids {
                    self.activity.remove(&ids);
                }
                self.stats.decode_errors += 1;
                self.events.push_back(CftpReceiverEvent::Dropped(e));
            }
        }
    }

    /// A file arrived whole: each of its messages (one, or several in a bundle) not already
    /// delivered goes to the owner with its own ticket; the file is acknowledged once every
    /// one of them is durably spooled (or bounced), never before.
    fn complete(
        &mut self,
        now: Instant,
        mails: Vec<MailFile>,
        (connection, updu_id): (u8, u8),
        ack: Vec<u8>,
        dedup: &mut DedupCache,
    ) {
        self.stats.files += 1;
        let keys: Vec<DedupKey> = mails
            .iter()
            .map(|m| {
                DedupKey::new(
                    m.return_path.as_deref().unwrap_or(""),
                    &m.recipients,
                    &m.message,
                )
            })
            .collect();
        // The same file sent again (under the same ids) while its first copy waits for the
        // spool: acknowledge it with the first.
        if let Some(pending) = keys
            .iter()
            .find_map(|k| self.pending_keys.get(k))
            .and_then(|serial| self.pending.get_mut(serial))
            && pending.keys == keys
        {
            if !pending.acks.contains(&(connection, updu_id)) && pending.acks.len() < MAX_OWED_ACKS
            {
                pending.acks.push((connection, updu_id));
            }
            for (mail, key) in mails.into_iter().zip(keys) {
                self.duplicate(mail.message_id, key);
            }
            return;
        }
        let mut fresh = Vec::new();
        // A message of this file waits for the spool under another file: this one must not be
        // acknowledged before that one is decided (it might yet be deferred).
        let mut held = false;
        for (mail, key) in mails.into_iter().zip(keys.iter().cloned()) {
            if self.pending_keys.contains_key(&key) {
                held = true;
                self.duplicate(mail.message_id, key);
            } else if dedup.check(&key, now) {
                self.duplicate(mail.message_id, key);
            } else {
                fresh.push((mail, key));
            }
        }
        if fresh.is_empty() {
            // Everything is spooled already: acknowledge at once (unless held, when the sender
            // sends it again and finds everything spooled then).
            if !held {
                self.push_ack(ack);
            }
            return;
        }
        self.serial += 1;
        let serial = self.serial;
        for (_, key) in &fresh {
            self.pending_keys.insert(key.clone(), serial);
        }
        self.pending.insert(
            serial,
            Pending {
                keys,
                waiting: fresh.iter().map(|(_, k)| k.clone()).enumerate().collect(),
                decided: Vec::new(),
                deferred: held,
                acks: vec![(connection, updu_id)],
            },
        );
        for (index, (mail, key)) in fresh.into_iter().enumerate() {
            self.events.push_back(CftpReceiverEvent::File(IncomingFile {
                mail,
                key,
                connection,
                updu_id,
                ticket: CftpTicket {
                    session: self.session,
                    serial,
                    index,
                },
            }));
        }
    }

    fn duplicate(&mut self, message_id: String, key: DedupKey) {
        self.stats.duplicates += 1;
        self.events
            .push_back(CftpReceiverEvent::Duplicate { message_id, key });
    }

    /// The spool holds the file's message durably: remember it for de-duplication and release
    /// its acknowledgement.
    pub fn accepted(
        &mut self,
        ticket: CftpTicket,
        now: Instant,
        dedup: &mut DedupCache,
    ) -> Result<(), CftpSessionError> {
        self.decide(&ticket, true, now, dedup)?;
        self.stats.accepted += 1;
        Ok(())
    }

    /// The message cannot be delivered (a permanent failure) and the owner has durably queued a
    /// delivery status notification to its return path: CFTP has no negative acknowledgement,
    /// so the file is acknowledged and remembered like an accepted one.
    pub fn bounced(
        &mut self,
        ticket: CftpTicket,
        now: Instant,
        dedup: &mut DedupCache,
    ) -> Result<(), CftpSessionError> {
        self.decide(&ticket, true, now, dedup)?;
        self.stats.bounced += 1;
        Ok(())
    }

    /// The message cannot be taken now (a transient problem): its file is not acknowledged, so
    /// its sender sends it again after its ack timeout (the file's other messages that were
    /// spooled meanwhile are then recognised as duplicates).
    pub fn deferred(
        &mut self,
        ticket: CftpTicket,
        now: Instant,
        dedup: &mut DedupCache,
    ) -> Result<(), CftpSessionError> {
        self.decide(&ticket, false, now, dedup)?;
        self.stats.deferred += 1;
        Ok(())
    }

    /// The next acknowledgement U_PDU to send.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.acks.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<CftpReceiverEvent> {
        self.events.pop_front()
    }

    /// When the oldest partial file expires, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.activity
            .values()
            .min()
            .and_then(|t| t.checked_add(self.settings.partial_timeout))
    }

    /// Drops partial files with no new segment for the partial timeout at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let timeout = self.settings.partial_timeout;
        let expired: Vec<(u8, u8)> = self
            .activity
            .iter()
            .filter(|&(_, &t)| now.saturating_duration_since(t) >= timeout)
            .map(|(&k, _)| k)
            .collect();
        for (connection, updu_id) in expired {
            self.activity.remove(&(connection, updu_id));
            if self.receiver.abandon(connection, updu_id) {
                self.stats.partials_expired += 1;
            }
        }
    }

    /// Files waiting for the owner's spool decision.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Files being reassembled.
    pub fn in_progress(&self) -> usize {
        self.receiver.in_progress()
    }

    /// The counts so far.
    pub fn stats(&self) -> CftpReceiverStats {
        self.stats
    }

    /// Records the owner's decision on one message of a pending file: `spooled` (accepted or
    /// bounced, so remembered for de-duplication) or deferred. Once every message of the file is
    /// decided, the file is acknowledged, unless one was deferred.
    fn decide(
        &mut self,
        ticket: &CftpTicket,
        spooled: bool,
        now: Instant,
        dedup: &mut DedupCache,
    ) -> Result<(), CftpSessionError> {
        if ticket.session != self.session {
            return Err(CftpSessionError::UnknownTicket);
        }
        let pending = self
            .pending
            .get_mut(&ticket.serial)
            .ok_or(CftpSessionError::UnknownTicket)?;
        let key = pending
            .waiting
            .remove(&ticket.index)
            .ok_or(CftpSessionError::UnknownTicket)?;
        self.pending_keys.remove(&key);
        if spooled {
            pending.decided.push(key);
        } else {
            pending.deferred = true;
        }
        if !pending.waiting.is_empty() {
            return Ok(());
        }
        let Some(done) = self.pending.remove(&ticket.serial) else {
            return Ok(());
        };
        for key in done.decided {
            dedup.insert(key, now);
        }
        if !done.deferred {
            for (connection, updu_id) in done.acks {
                self.push_ack(crate::cftp::ack_pdu(connection, updu_id));
            }
        }
        Ok(())
    }

    fn push_ack(&mut self, ack: Vec<u8>) {
        self.stats.acks_sent += 1;
        self.acks.push_back(ack);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cftp::ack_pdu;

    fn msg(id: &str, body: &[u8]) -> BatchMessage {
        BatchMessage {
            id: id.into(),
            reverse_path: "a@ship".into(),
            recipients: vec!["b@shore".into(), "c@shore".into()],
            body: body.to_vec(),
            eight_bit: false,
            dsn: Default::default(),
            rcpt_dsn: Vec::new(),
        }
    }

    fn dedup() -> DedupCache {
        DedupCache::new(Duration::from_secs(86_400), 1000)
    }

    #[test]
    fn message_ids_are_alphanumeric_stable_and_distinct() {
        assert_eq!(cftp_message_id("Q1abc"), "Q1abc");
        let a = cftp_message_id("4Xb2.17-a");
        let b = cftp_message_id("4Xb2.17a");
        assert_ne!(a, b);
        assert_eq!(a, cftp_message_id("4Xb2.17-a"));
        assert!(a.starts_with("4Xb217aX") && a.len() == 8 + 16);
        for id in [a, b, cftp_message_id(""), cftp_message_id(&"é".repeat(300))] {
            assert!(!id.is_empty() && id.len() <= MAX_MESSAGE_ID);
            assert!(id.bytes().all(|c| c.is_ascii_alphanumeric()));
        }
    }

    #[test]
    fn bad_settings_are_refused() {
        let bad = [
            CftpSenderSettings::standard(4),
            CftpSenderSettings {
                connection: 16,
                ..CftpSenderSettings::standard(200)
            },
            CftpSenderSettings::skywave(200, 0),
            CftpSenderSettings::skywave(200, 257),
            CftpSenderSettings {
                ack_timeout: Duration::ZERO,
                ..CftpSenderSettings::standard(200)
            },
            CftpSenderSettings {
                max_transmissions: 0,
                ..CftpSenderSettings::standard(200)
            },
        ];
        for s in bad {
            assert!(CftpSender::new(s).is_err());
        }
        assert!(CftpSender::new(CftpSenderSettings::skywave(5, 256)).is_ok());
    }

    #[test]
    fn unsendable_and_duplicate_messages_are_refused_at_push() {
        let mut tx = CftpSender::new(CftpSenderSettings::standard(200)).unwrap();
        let mut m = msg("Q1", b"x\r\n");
        m.recipients.clear();
        assert!(matches!(
            tx.push(m),
            Err(CftpSessionError::Message {
                source: CftpError::NoRecipients,
                ..
            })
        ));
        tx.push(msg("Q1", b"x\r\n")).unwrap();
        assert!(matches!(
            tx.push(msg("Q1", b"y\r\n")),
            Err(CftpSessionError::DuplicateMessage(_))
        ));
    }

    #[test]
    fn one_file_at_a_time_towards_a_standard_peer() {
        let t0 = Instant::now();
        let mut tx = CftpSender::new(CftpSenderSettings::standard(64)).unwrap();
        tx.push(msg("Q1", b"first\r\n")).unwrap();
        tx.push(msg("Q2", b"second\r\n")).unwrap();
        let mut first = Vec::new();
        while let Some(u) = tx.poll_transmit(t0) {
            first.push(u);
        }
        assert!(first.len() > 1);
        assert!(
            first
                .iter()
                .all(|u| u.len() <= 64 && u[0] == 0 && u[1] == 0)
        );
        assert_eq!((tx.in_flight(), tx.queued()), (1, 1));
        // Acknowledgement of an id never used: ignored.
        assert_eq!(tx.receive(t0, &ack_pdu(0, 9)), AckOutcome::Unknown);
        // Another connection: ignored.
        assert_eq!(tx.receive(t0, &ack_pdu(1, 0)), AckOutcome::Unknown);
        assert_eq!(tx.receive(t0, &first[0]), AckOutcome::NotAnAck);
        assert_eq!(
            tx.receive(t0, &ack_pdu(0, 0)),
            AckOutcome::Acked {
                ids: vec!["Q1".into()]
            }
        );
        assert_eq!(tx.receive(t0, &ack_pdu(0, 0)), AckOutcome::Duplicate);
        let second = tx.poll_transmit(t0).unwrap();
        assert_eq!(second[1], 1, "the next file takes the next id");
        let r = tx.outcome("Q1").unwrap();
        assert!(
            r.recipients
                .iter()
                .all(|(_, d)| matches!(d, Disposition::Delivered(_)))
        );
        let s = tx.stats();
        assert_eq!((s.acks, s.duplicate_acks, s.unknown_acks), (1, 1, 2));
        assert_eq!(s.files, 2);
        assert!(s.bytes_plain > 0 && s.bytes_gzip > 0);
    }

    #[test]
    fn an_ack_during_the_first_transmission_is_not_for_this_file() {
        let t0 = Instant::now();
        let mut tx = CftpSender::new(CftpSenderSettings::standard(32)).unwrap();
        tx.push(msg("Q1", &[b'x'; 200])).unwrap();
        let _ = tx.poll_transmit(t0).unwrap();
        assert_eq!(tx.receive(t0, &ack_pdu(0, 0)), AckOutcome::Unknown);
        assert_eq!(tx.in_flight(), 1);
    }

    #[test]
    fn a_file_the_node_still_holds_is_not_sent_again_and_its_ack_wait_runs_from_delivery() {
        let t0 = Instant::now();
        let settings = CftpSenderSettings {
            ack_timeout: Duration::from_secs(10),
            delivery_timeout: Some(Duration::from_secs(600)),
            ..CftpSenderSettings::standard(40)
        };
        let mut tx = CftpSender::new(settings).unwrap();
        tx.push(msg("Q1", &[b'x'; 200])).unwrap();
        let mut segments = Vec::new();
        while let Some(u) = tx.poll_transmit(t0) {
            segments.push(u);
        }
        assert!(segments.len() > 1);
        let last = u16::try_from(segments.len() - 1).unwrap();
        // Unconfirmed, the file waits for its delivery, not for the ack timeout.
        assert_eq!(tx.poll_timeout(), Some(t0 + Duration::from_secs(600)));
        let t1 = t0 + Duration::from_secs(100);
        tx.handle_timeout(t1);
        assert!(
            tx.poll_transmit(t1).is_none(),
            "not sent again while undelivered"
        );
        // A confirmation of another segment settles nothing; the last one's does.
        assert!(!tx.delivered(t1, 0, 0));
        assert!(!tx.delivered(t1, 7, last));
        assert!(tx.delivered(t1, 0, last));
        assert_eq!(tx.poll_timeout(), Some(t1 + Duration::from_secs(10)));
        tx.handle_timeout(t1 + Duration::from_secs(10));
        assert!(
            tx.poll_transmit(t1).is_some(),
            "sent again after the ack timeout"
        );
        assert_eq!(tx.stats().retransmitted_files, 1);
        // Never delivered: sent again when the delivery wait ends.
        while tx.poll_transmit(t1).is_some() {}
        assert_eq!(tx.poll_timeout(), Some(t1 + Duration::from_secs(600)));
    }

    #[test]
    fn timeouts_resend_then_give_up_and_hold_the_id_back() {
        let t0 = Instant::now();
        let settings = CftpSenderSettings {
            max_transmissions: 2,
            ack_timeout: Duration::from_secs(10),
            ..CftpSenderSettings::standard(200)
        };
        let mut tx = CftpSender::new(settings).unwrap();
        tx.push(msg("Q1", b"x\r\n")).unwrap();
        assert!(tx.poll_transmit(t0).is_some());
        assert!(tx.poll_transmit(t0).is_none());
        let d1 = tx.poll_timeout().unwrap();
        assert_eq!(d1, t0 + Duration::from_secs(10));
        tx.handle_timeout(d1 - Duration::from_secs(1));
        assert!(tx.poll_transmit(d1).is_none());
        tx.handle_timeout(d1);
        assert!(tx.poll_transmit(d1).is_some());
        let d2 = tx.poll_timeout().unwrap();
        tx.push(msg("Q2", b"y\r\n")).unwrap();
        tx.handle_timeout(d2);
        let r = tx.poll_outcome().unwrap();
        assert_eq!(r.id, "Q1");
        assert!(
            r.recipients
                .iter()
                .all(|(_, d)| *d == Disposition::NoAnswer)
        );
        // Q2 goes out under id 1; id 0 is held back for one ack timeout.
        assert_eq!(tx.poll_transmit(d2).unwrap()[1], 1);
        let s = tx.stats();
        assert_eq!((s.retransmitted_files, s.given_up_files), (1, 1));
        // A late acknowledgement of the given-up file is ignored.
        assert_eq!(tx.receive(d2, &ack_pdu(0, 0)), AckOutcome::Duplicate);
    }

    /// Sends everything due and returns the U_PDU id of each file started.
    fn drain_ids(tx: &mut CftpSender, now: Instant) -> Vec<u8> {
        let mut ids = Vec::new();
        while let Some(u) = tx.poll_transmit(now) {
            if u[2..4] == [0, 0] {
                ids.push(u[1]);
            }
        }
        ids
    }

    #[test]
    fn an_id_with_a_possible_late_ack_is_skipped_when_ids_wrap() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(10);
        let settings = CftpSenderSettings {
            ack_timeout: timeout,
            ..CftpSenderSettings::standard(200)
        };
        let mut tx = CftpSender::new(settings).unwrap();
        for i in 0..257 {
            tx.push(msg(&format!("Q{i}"), b"x\r\n")).unwrap();
        }
        // File 0 is sent twice, then acknowledged once: a second ack may still come.
        assert_eq!(drain_ids(&mut tx, t0), [0]);
        tx.handle_timeout(t0 + timeout);
        assert_eq!(drain_ids(&mut tx, t0 + timeout), [0]);
        let t1 = t0 + timeout;
        assert!(matches!(
            tx.receive(t1, &ack_pdu(0, 0)),
            AckOutcome::Acked { .. }
        ));
        // Ids 1-255 are used and acknowledged at once.
        for id in 1..=255u8 {
            assert_eq!(drain_ids(&mut tx, t1), [id]);
            assert!(matches!(
                tx.receive(t1, &ack_pdu(0, id)),
                AckOutcome::Acked { .. }
            ));
        }
        // Wrapped: id 0 is held back, id 1 is taken.
        assert_eq!(drain_ids(&mut tx, t1), [1]);
        // The late second ack of file 0 settles nothing.
        assert_eq!(tx.receive(t1, &ack_pdu(0, 0)), AckOutcome::Duplicate);
        assert_eq!(tx.in_flight(), 1);
    }

    #[test]
    fn a_file_waits_while_every_id_is_held_back() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(10);
        let settings = CftpSenderSettings {
            ack_timeout: timeout,
            max_transmissions: 1,
            // One message per file: this is about U_PDU ids.
            max_bundle: 1,
            ..CftpSenderSettings::skywave(200, 256)
        };
        let mut tx = CftpSender::new(settings).unwrap();
        for i in 0..257 {
            tx.push(msg(&format!("Q{i}"), b"x\r\n")).unwrap();
        }
        assert_eq!(drain_ids(&mut tx, t0).len(), 256);
        assert_eq!(tx.queued(), 1);
        // All 256 time out and are given up: every id is held back for one more timeout.
        let t1 = tx.poll_timeout().unwrap();
        assert_eq!(t1, t0 + timeout);
        tx.handle_timeout(t1);
        assert!(drain_ids(&mut tx, t1).is_empty());
        assert_eq!((tx.in_flight(), tx.queued()), (0, 1));
        let t2 = tx.poll_timeout().unwrap();
        assert_eq!(t2, t1 + timeout);
        tx.handle_timeout(t2);
        assert_eq!(drain_ids(&mut tx, t2), [0]);
        assert_eq!(tx.stats().given_up_files, 256);
    }

    #[test]
    fn close_leaves_everything_queued() {
        let t0 = Instant::now();
        let mut tx = CftpSender::new(CftpSenderSettings::skywave(200, 2)).unwrap();
        for i in 0..3 {
            tx.push(msg(&format!("Q{i}"), b"x\r\n")).unwrap();
        }
        let _ = tx.poll_transmit(t0);
        tx.close(t0);
        assert!(tx.is_idle());
        let mut n = 0;
        while let Some(r) = tx.poll_outcome() {
            assert!(
                r.recipients
                    .iter()
                    .all(|(_, d)| *d == Disposition::NoAnswer)
            );
            n += 1;
        }
        assert_eq!(n, 3);
    }

    fn deliver(tx: &mut CftpSender, rx: &mut CftpReceiverSession, d: &mut DedupCache, t: Instant) {
        while let Some(u) = tx.poll_transmit(t) {
            rx.receive(t, &u, d);
        }
    }

    #[test]
    fn ack_only_after_the_spool_decides() {
        let t0 = Instant::now();
        let mut d = dedup();
        let mut tx = CftpSender::new(CftpSenderSettings::standard(100)).unwrap();
        let mut rx = CftpReceiverSession::new(CftpReceiverSettings::default());
        tx.push(msg("Q1", b"Message-ID: <1@a>\r\n\r\nhi\r\n"))
            .unwrap();
        deliver(&mut tx, &mut rx, &mut d, t0);
        let Some(CftpReceiverEvent::File(file)) = rx.poll_event() else {
            panic!("expected a file");
        };
        assert_eq!(file.mail.message, b"Message-ID: <1@a>\r\n\r\nhi\r\n");
        assert_eq!(file.mail.return_path.as_deref(), Some("a@ship"));
        assert!(
            rx.poll_transmit().is_none(),
            "no ack before the spool write"
        );
        // The file arrives again meanwhile (sender timeout): not delivered a second time.
        tx.handle_timeout(t0 + DEFAULT_ACK_TIMEOUT);
        deliver(&mut tx, &mut rx, &mut d, t0);
        assert!(matches!(
            rx.poll_event(),
            Some(CftpReceiverEvent::Duplicate { .. })
        ));
        assert!(rx.poll_transmit().is_none());
        rx.accepted(file.ticket, t0, &mut d).unwrap();
        let ack = rx.poll_transmit().unwrap();
        assert_eq!(ack, ack_pdu(0, 0));
        assert!(rx.poll_transmit().is_none(), "one ack per (connection, id)");
        assert!(matches!(tx.receive(t0, &ack), AckOutcome::Acked { .. }));
        // Later copies are duplicates from the cache, acknowledged at once.
        let mut tx2 = CftpSender::new(CftpSenderSettings::standard(100)).unwrap();
        tx2.push(msg("Q9", b"Message-ID: <1@a>\r\n\r\nhi\r\n"))
            .unwrap();
        deliver(&mut tx2, &mut rx, &mut d, t0);
        assert!(matches!(
            rx.poll_event(),
            Some(CftpReceiverEvent::Duplicate { .. })
        ));
        assert_eq!(rx.poll_transmit(), Some(ack_pdu(0, 0)));
        let s = rx.stats();
        assert_eq!(
            (s.files, s.duplicates, s.accepted, s.acks_sent),
            (3, 2, 1, 2)
        );
    }

    #[test]
    fn deferred_files_are_not_acked_and_bounced_ones_are() {
        let t0 = Instant::now();
        let mut d = dedup();
        let settings = CftpSenderSettings {
            max_bundle: 1,
            ..CftpSenderSettings::skywave(100, 2)
        };
        let mut tx = CftpSender::new(settings).unwrap();
        let mut rx = CftpReceiverSession::new(CftpReceiverSettings::default());
        tx.push(msg("Q1", b"one\r\n")).unwrap();
        tx.push(msg("Q2", b"two\r\n")).unwrap();
        deliver(&mut tx, &mut rx, &mut d, t0);
        let mut files = Vec::new();
        while let Some(CftpReceiverEvent::File(f)) = rx.poll_event() {
            files.push(f);
        }
        assert_eq!(files.len(), 2);
        let second = files.pop().unwrap();
        let first = files.pop().unwrap();
        rx.deferred(first.ticket, t0, &mut d).unwrap();
        rx.bounced(second.ticket, t0, &mut d).unwrap();
        assert_eq!(rx.poll_transmit(), Some(ack_pdu(0, 1)));
        assert!(rx.poll_transmit().is_none());
        // The deferred file comes again and is offered again (it was never accepted).
        tx.handle_timeout(t0 + DEFAULT_ACK_TIMEOUT);
        deliver(&mut tx, &mut rx, &mut d, t0 + DEFAULT_ACK_TIMEOUT);
        assert!(matches!(rx.poll_event(), Some(CftpReceiverEvent::File(_))));
        assert_eq!(rx.pending(), 1);
    }

    fn files(rx: &mut CftpReceiverSession) -> Vec<IncomingFile> {
        std::iter::from_fn(|| rx.poll_event())
            .filter_map(|e| match e {
                CftpReceiverEvent::File(f) => Some(f),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_skywave_sender_bundles_queued_messages_into_one_file() {
        let t0 = Instant::now();
        let mut d = dedup();
        let settings = CftpSenderSettings {
            max_bundle: 3,
            ..CftpSenderSettings::skywave(200, 8)
        };
        let mut tx = CftpSender::new(settings).unwrap();
        let mut rx = CftpReceiverSession::new(CftpReceiverSettings::default());
        for i in 0..5 {
            tx.push(msg(&format!("Q{i}"), format!("body {i}\r\n").as_bytes()))
                .unwrap();
        }
        deliver(&mut tx, &mut rx, &mut d, t0);
        // Three messages in the first file, two in the second.
        let s = tx.stats();
        assert_eq!((s.files, s.messages), (2, 5));
        let got = files(&mut rx);
        assert_eq!(got.len(), 5);
        assert_eq!(
            got.iter().map(|f| f.updu_id).collect::<Vec<_>>(),
            [0, 0, 0, 1, 1]
        );
        // The first file is acknowledged only when all three of its messages are spooled.
        let mut got = got.into_iter();
        for f in got.by_ref().take(2) {
            rx.accepted(f.ticket, t0, &mut d).unwrap();
        }
        assert!(rx.poll_transmit().is_none(), "one message still undecided");
        for f in got {
            rx.accepted(f.ticket, t0, &mut d).unwrap();
        }
        let acks: Vec<Vec<u8>> = std::iter::from_fn(|| rx.poll_transmit()).collect();
        assert_eq!(acks, [ack_pdu(0, 0), ack_pdu(0, 1)]);
        assert_eq!(
            tx.receive(t0, &acks[0]),
            AckOutcome::Acked {
                ids: vec!["Q0".into(), "Q1".into(), "Q2".into()]
            }
        );
        tx.receive(t0, &acks[1]);
        let outcomes: Vec<MessageResult> = std::iter::from_fn(|| tx.poll_outcome()).collect();
        assert_eq!(outcomes.len(), 5);
        assert!(outcomes.iter().all(|o| {
            o.recipients
                .iter()
                .all(|(_, d)| matches!(d, Disposition::Delivered(_)))
        }));
        assert!(tx.is_idle());
    }

    #[test]
    fn a_bundle_stops_at_its_byte_cap_and_a_standard_sender_never_bundles() {
        let t0 = Instant::now();
        let big = vec![b'x'; 700];
        let mut body = big.clone();
        body.extend_from_slice(b"\r\n");
        let settings = CftpSenderSettings {
            bundle_bytes: 2000,
            ..CftpSenderSettings::skywave(4000, 8)
        };
        let mut tx = CftpSender::new(settings).unwrap();
        for i in 0..3 {
            tx.push(msg(&format!("Q{i}"), &body)).unwrap();
        }
        while tx.poll_transmit(t0).is_some() {}
        // Two mail-files of ~750 bytes fit under 2000 bytes, a third does not.
        assert_eq!((tx.stats().files, tx.stats().messages), (2, 3));
        let mut tx = CftpSender::new(CftpSenderSettings::standard(4000)).unwrap();
        for i in 0..3 {
            tx.push(msg(&format!("Q{i}"), b"small\r\n")).unwrap();
        }
        while tx.poll_transmit(t0).is_some() {}
        assert_eq!((tx.stats().files, tx.stats().messages), (1, 1));
    }

    #[test]
    fn a_bundle_with_a_deferred_message_is_sent_again_and_only_that_one_is_offered() {
        let t0 = Instant::now();
        let mut d = dedup();
        let mut tx = CftpSender::new(CftpSenderSettings::skywave(200, 8)).unwrap();
        let mut rx = CftpReceiverSession::new(CftpReceiverSettings::default());
        for i in 0..3 {
            tx.push(msg(&format!("Q{i}"), format!("body {i}\r\n").as_bytes()))
                .unwrap();
        }
        deliver(&mut tx, &mut rx, &mut d, t0);
        let mut got = files(&mut rx);
        assert_eq!(got.len(), 3);
        let last = got.pop().unwrap();
        for f in got {
            rx.accepted(f.ticket, t0, &mut d).unwrap();
        }
        rx.deferred(last.ticket, t0, &mut d).unwrap();
        assert!(
            rx.poll_transmit().is_none(),
            "a deferred message holds the ack"
        );
        assert_eq!(rx.pending(), 0);
        // The sender's ack timeout: the whole bundle again, the two spooled messages are
        // duplicates, the deferred one is offered again.
        let t1 = t0 + DEFAULT_ACK_TIMEOUT;
        tx.handle_timeout(t1);
        deliver(&mut tx, &mut rx, &mut d, t1);
        let events: Vec<CftpReceiverEvent> = std::iter::from_fn(|| rx.poll_event()).collect();
        let dups = events
            .iter()
            .filter(|e| matches!(e, CftpReceiverEvent::Duplicate { .. }))
            .count();
        let again: Vec<IncomingFile> = events
            .into_iter()
            .filter_map(|e| match e {
                CftpReceiverEvent::File(f) => Some(f),
                _ => None,
            })
            .collect();
        assert_eq!((dups, again.len()), (2, 1));
        assert_eq!(again[0].mail.message, b"body 2\r\n");
        assert!(rx.poll_transmit().is_none());
        for f in again {
            rx.accepted(f.ticket, t1, &mut d).unwrap();
        }
        let ack = rx.poll_transmit().unwrap();
        assert!(matches!(tx.receive(t1, &ack), AckOutcome::Acked { ids } if ids.len() == 3));
    }

    #[test]
    fn foreign_tickets_are_refused() {
        let t0 = Instant::now();
        let mut d = dedup();
        let mut tx = CftpSender::new(CftpSenderSettings::standard(100)).unwrap();
        let mut rx = CftpReceiverSession::new(CftpReceiverSettings::default());
        let mut other = CftpReceiverSession::new(CftpReceiverSettings::default());
        tx.push(msg("Q1", b"one\r\n")).unwrap();
        deliver(&mut tx, &mut rx, &mut d, t0);
        let Some(CftpReceiverEvent::File(f)) = rx.poll_event() else {
            panic!("expected a file");
        };
        assert!(matches!(
            other.accepted(f.ticket, t0, &mut d),
            Err(CftpSessionError::UnknownTicket)
        ));
        assert_eq!(rx.pending(), 1);
    }

    #[test]
    fn bad_files_are_dropped_and_partials_expire() {
        let t0 = Instant::now();
        let mut d = dedup();
        let mut rx = CftpReceiverSession::new(CftpReceiverSettings::default());
        // A BFTP PDU whose gzip data is garbage.
        let pdu = bftp_pdu("x.gz", b"not gzip at all").unwrap();
        for u in segment(0, 3, &pdu, 10).unwrap() {
            rx.receive(t0, &u, &mut d);
        }
        assert!(matches!(
            rx.poll_event(),
            Some(CftpReceiverEvent::Dropped(CftpError::Decompress(_)))
        ));
        assert_eq!(rx.stats().decode_errors, 1);
        // A file that stops half-way.
        let segs = segment(0, 4, &pdu, 10).unwrap();
        rx.receive(t0, &segs[0], &mut d);
        assert_eq!(rx.in_progress(), 1);
        let expiry = rx.poll_timeout().unwrap();
        assert_eq!(expiry, t0 + DEFAULT_PARTIAL_TIMEOUT);
        rx.handle_timeout(expiry - Duration::from_secs(1));
        assert_eq!(rx.in_progress(), 1);
        rx.handle_timeout(expiry);
        assert_eq!((rx.in_progress(), rx.stats().partials_expired), (0, 1));
        assert!(rx.poll_timeout().is_none());
        rx.receive(t0, &ack_pdu(0, 1), &mut d);
        assert_eq!(rx.stats().stray_acks, 1);
        assert!(rx.poll_transmit().is_none());
    }
}
