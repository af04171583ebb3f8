//! The link scheduler of one HMTP peer: batches, sessions, crossed sessions, outcomes, records.
//!
//! One task per peer owns everything about that pair of nodes: our own session (at most one at
//! a time), the peer's session we are serving (alongside ours when the two crossed, see
//! `skywave_hmtp::collision`), the de-duplication memory, and the transfer records. It sleeps
//! until mail is due for the peer (the spool's next retry time, or a wake-up from the intake),
//! the link comes back, a U_PDU arrives, or a session deadline passes.
//!
//! A session: the spool's due messages for the peer in priority order under the peer's
//! `batch_bytes` budget are marked in flight and handed to an [`HmtpClient`], whose whole
//! submission goes to the SIS endpoint at once; the replies come back as one transmission
//! and every recipient's outcome goes to the spool ([`Recorder`]). No reply within
//! `reply_timeout` of the peer's node confirming the submission (and at least `reply_timeout`
//! plus twice its air time at `assumed_bps` from the submission), or a U_PDU of this session
//! the subnetwork could not deliver, ends the session: every recipient without an answer is
//! deferred and retried with the spool's backoff, or at once when the link comes back; the peer
//! drops what it already had (de-duplication). Until the confirmation the submission may wait
//! in the node (behind other stations' traffic on a shared frequency) up to `delivery_timeout`:
//! the peer cannot answer what it does not have, and the session sent again would only queue
//! behind its own first copy. While a session of the peer's arrives, the replies to ours
//! cannot (they follow it), so each of its U_PDUs gives ours at least `reply_timeout` plus the
//! air time of two U_PDUs more.
//!
//! Streams from the peer share SAP 3 with our own replies; a stream is told apart by its first
//! decoded byte ([`classify_stream_start`]) and runs until its consumer is done (our client at
//! 221, a server at QUIT). A reply stream whose closing reply does not sum this session's
//! octets (skywave's `XSUM`, see `skywave_smtp::sum`) answers an earlier session of ours whose
//! data reached the peer late: the client sets it aside and the next stream is classified
//! afresh. A session cut short by a lost link is given up with skywave's cut marker
//! (`XCUT`, see `skywave_hmtp::cut`) where the peer advertised it, both as client (the next
//! session starts with it) and as server (a marker ends the peer's session being read);
//! towards any other peer the next session waits until the peer's server must have given up
//! the cut one (`[hf] peer_session_timeout`). Towards a peer that advertised `XRESUME`
//! (`skywave_hmtp::resume`, `[hf] resume`), a session cut short after the peer's node confirmed
//! some of its U_PDUs is kept ([`Suspended`]) and goes on from there when its mail is due again
//! ([`HfContext::take_again`]); as server, the link keeps what it received of a session that
//! ended without its QUIT (in memory and on disk, [`super::tape_file`]) and goes on with it at
//! the peer's resume marker, or refuses. Whether a session of ours may be cut, and what the
//! peer's EHLO said (`XCUT`, `XRESUME`, `XDICT`, `DSN`, `8BITMIME`), outlive a restart
//! ([`super::peer_memory`]): a link that starts after a crash in the middle of a session
//! treats it as cut.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use skywave_hmtp::resume::{self, Verdict as Resume};
use skywave_hmtp::{
    Arbiter, BatchMessage, BatchOutcome, ClientSettings, Compression, Disposition, HmtpClient,
    HmtpServer, IncomingAction, ServerEnd, ServerEvent, ServerSettings, SessionEnd, StreamStart,
    classify_stream_start,
};
use skywave_route::Compression as RouteCompression;
use skywave_sis::{NodeAddress, Priority};
use skywave_smtp::CloseReason;
use skywave_spool::{DueMessage, Handoff, Target};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span, warn};

use super::dedup_store::DedupStore;
use super::peer_memory::MemoryFile;
use super::sis::{Endpoint, LinkInput, Report, priority_5066};
use super::transfer::{Direction, TransferRecord};
use super::{Again, HfContext, Look, Take, sleep_opt};
use crate::intake::{GatewayPolicy, Source};
use crate::outcome::Outcome;

/// Most bytes buffered while the first bytes of a peer's stream do not yet tell what it is.
const MAX_UNCLASSIFIED: usize = 64 * 1024;

/// Our session in progress.
struct Own {
    client: HmtpClient,
    /// The submission's tag in the SIS endpoint's reports.
    submission: u64,
    /// The 5066 priority its U_PDUs went with.
    priority: Priority,
    batch: Vec<DueMessage>,
    start_unix: f64,
    /// When the session is given up without its replies, once the peer has the submission.
    reply_by: Instant,
    /// While the submission waits for the peer's node to confirm it: how long it may (the
    /// peer cannot answer before it has the session, so the reply timeout does not run out
    /// meanwhile). `None` once confirmed, or where the SIS server confirms nothing.
    delivery_by: Option<Instant>,
    /// The session's U_PDUs, kept in case a lost link cuts it short and it goes on later
    /// (`XRESUME`).
    updus: Vec<Vec<u8>>,
    /// The first of them this submission carries: 0, or where a session cut short goes on.
    first: usize,
    /// Markers in front of them in the submission (the cut or the resume marker).
    lead: usize,
    /// The peer refused to go on with the session cut short that this one went on with.
    refused: bool,
}

/// A session of ours cut short by a lost link, towards a peer that goes on with one
/// (`XRESUME`, [`skywave_hmtp::resume`]). Its mail was deferred in the spool like any other
/// session's; when that mail is due again, the next session goes on with this one from where
/// the peer's node had it, unless something makes it a new session ([`HfContext::take_again`]).
pub(super) struct Suspended {
    client: HmtpClient,
    updus: Vec<Vec<u8>>,
    /// U_PDUs the peer's node confirmed, in order from the first: the peer holds these.
    from: usize,
    priority: Priority,
    batch: Vec<DueMessage>,
}

impl Own {
    /// When the session is given up: its reply deadline, or while the peer's node has not
    /// confirmed the submission, the end of the wait for that when later.
    fn deadline(&self) -> Instant {
        self.delivery_by
            .map_or(self.reply_by, |d| d.max(self.reply_by))
    }
}

/// Whether bytes can be the start of a stream from the peer.
#[derive(Debug, PartialEq, Eq)]
enum Plausible {
    Yes,
    NeedMore,
    No,
}

/// A stream starts with a zlib header (0x78 and a valid FCHECK), a JNOS LZW header (0x03 and a
/// width of 9-16 bits), a reply code (three digits) or HELO/EHLO. The first decoded byte alone
/// would take any printable fragment of an old stream for a new session and answer it, which
/// puts the two ends out of step for good after a restart mid-stream.
fn plausible_start(bytes: &[u8]) -> Plausible {
    let need = |n: usize| bytes.len() < n;
    match bytes.first() {
        None => Plausible::NeedMore,
        Some(0x78) if need(2) => Plausible::NeedMore,
        Some(0x78) => {
            if (0x78u16 * 256 + u16::from(bytes[1])).is_multiple_of(31) {
                Plausible::Yes
            } else {
                Plausible::No
            }
        }
        Some(0x03) if need(2) => Plausible::NeedMore,
        Some(0x03) => {
            if (9..=16).contains(&bytes[1]) {
                Plausible::Yes
            } else {
                Plausible::No
            }
        }
        Some(b) if b.is_ascii_digit() => {
            if need(3) {
                Plausible::NeedMore
            } else if bytes[..3].iter().all(u8::is_ascii_digit) {
                Plausible::Yes
            } else {
                Plausible::No
            }
        }
        Some(_) if need(4) => {
            let prefix_of = |verb: &[u8]| {
                bytes
                    .iter()
                    .zip(verb)
                    .all(|(a, v)| a.eq_ignore_ascii_case(v))
            };
            if prefix_of(b"EHLO") || prefix_of(b"HELO") {
                Plausible::NeedMore
            } else {
                Plausible::No
            }
        }
        Some(_) => {
            let verb = &bytes[..4];
            if verb.eq_ignore_ascii_case(b"EHLO") || verb.eq_ignore_ascii_case(b"HELO") {
                Plausible::Yes
            } else {
                Plausible::No
            }
        }
    }
}

/// The octets of `updus`.
fn octets(updus: &[Vec<u8>]) -> u64 {
    updus.iter().map(|u| u.len() as u64).sum()
}

/// The messages a session carries, from what was taken from the spool.
fn batch_messages(loaded: Vec<(DueMessage, Vec<u8>)>) -> (Vec<DueMessage>, Vec<BatchMessage>) {
    loaded
        .into_iter()
        .map(|(d, body)| {
            let m = super::batch_message(&d, body, true);
            (d, m)
        })
        .unzip()
}

/// The compression of our sessions to `peer`: its route's, towards a skywave gateway; none
/// towards any other (a standard HMTP server reads plain SMTP).
fn session_compression(peer: &skywave_route::Peer) -> Compression {
    match (peer.skywave, peer.compression) {
        (false, _) | (_, RouteCompression::None) => Compression::None,
        (true, RouteCompression::Lzw { bits }) => Compression::Lzw(bits),
        (true, RouteCompression::Deflate) => Compression::Deflate,
    }
}

/// What an attempt to start a session came to.
enum Start {
    Started(Box<Own>),
    /// Nothing started; when to look again.
    Later(Look),
}

/// The peer's stream being read.
enum Current {
    /// Nothing: the next U_PDU starts a new stream.
    Idle,
    /// Replies to our session.
    Replies,
    /// The peer's session, served (or discarded).
    Session(Box<Incoming>),
}

struct Incoming {
    server: HmtpServer<GatewayPolicy>,
    start_unix: f64,
    messages: u64,
    accepted: u64,
    /// U_PDUs and octets of a session cut short that this one read again from the tape
    /// (`XRESUME`): they went on the air in an earlier session.
    replayed: (u64, u64),
    /// The peer went on with this session after a cut (`XRESUME`).
    resumed: bool,
}

/// The first U_PDUs of a stream from the peer while they do not yet tell what it is: their
/// octets, and the U_PDUs themselves, which a session's tape keeps whole (`XRESUME`).
#[derive(Debug, Default)]
struct Unclassified {
    bytes: Vec<u8>,
    updus: Vec<Bytes>,
}

impl Unclassified {
    fn push(&mut self, updu: &Bytes) {
        self.bytes.extend_from_slice(updu);
        self.updus.push(updu.clone());
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.updus.clear();
    }
}

impl std::ops::Deref for Unclassified {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

/// The task of one HMTP peer.
pub(super) struct HmtpLink {
    pub(super) name: String,
    pub(super) node: NodeAddress,
    pub(super) local: NodeAddress,
    pub(super) endpoint: Endpoint,
    pub(super) inbox: mpsc::UnboundedReceiver<LinkInput>,
    pub(super) report: mpsc::UnboundedSender<LinkInput>,
    pub(super) ctx: Arc<HfContext>,
    pub(super) dedup: DedupStore,
    pub(super) shutdown: watch::Receiver<bool>,
    /// After new mail is announced or the link comes up, no session starts before this, so
    /// mail arriving in a burst goes in one batch.
    pub(super) gather_until: Option<Instant>,
    /// After the 5066 server refused a U_PDU of ours, no session starts before this: the
    /// peer's server must first have given up what it holds of the cut session
    /// ([`crate::config::HfConfig::peer_session_timeout`]).
    pub(super) peer_hold: Option<Instant>,
    /// A session of ours was cut and the peer honours `XCUT`: the next session starts with the
    /// cut marker instead of waiting out [`Self::peer_hold`], at no higher priority than the
    /// cut one's (held here), so that any of its U_PDUs the node still holds go first.
    pub(super) cut: Option<Priority>,
    /// A session of ours cut short that the next one goes on with (`XRESUME`).
    pub(super) suspended: Option<Suspended>,
    /// The record of a session of ours cut short before this gateway restarted, to build it
    /// again and go on with it ([`super::cut_record`]).
    pub(super) restored: Option<super::cut_record::CutRecord>,
    /// What this gateway keeps of the peer's sessions, to go on with one cut short
    /// (`XRESUME`).
    pub(super) keeper: super::tape_file::KeptTape,
    /// Sessions of ours started so far: the tag of each one's submission.
    pub(super) submissions: u64,
    /// What outlives a restart: whether a session of ours may be cut at the peer, whether the
    /// peer advertised `XCUT` ([`skywave_hmtp::cut`]) in its last EHLO reply, and the preset
    /// deflate dictionary it advertised there (`XDICT`) that this gateway knows: deflate
    /// sessions start from it (a third fewer bytes for short mail); it is dropped when a
    /// session with it gets no replies, in case the peer lost it (see skywave_hmtp::stream).
    pub(super) memory: MemoryFile,
}

impl HmtpLink {
    pub(super) async fn run(self) {
        let span = info_span!("hmtp", peer = %self.name);
        self.run_inner().instrument(span).await;
    }

    async fn run_inner(mut self) {
        let mut arbiter = match Arbiter::new(self.local.bits(), self.node.bits()) {
            Ok(a) => a,
            Err(e) => {
                warn!(error = %e, "cannot run this link");
                return;
            }
        };
        if self.configured_xcut() && self.memory.get().xcut == Some(false) {
            warn!(
                "xcut = true for this peer, but its server did not advertise XCUT in its last EHLO reply: the cut marker is not sent until it does"
            );
        }
        if self.memory.get().unanswered {
            // The process stopped with a session of ours unanswered (a crash, a restart): the
            // node may have sent only part of it, which the peer's server holds.
            info!("a session of ours was unanswered when this gateway stopped; taking it as cut");
            self.after_cut(Priority::default());
            self.restored = super::cut_record::read(&self.links_dir(), &self.name);
        }
        let target = Target::Peer(self.name.clone());
        let mut own: Option<Own> = None;
        let mut current = Current::Idle;
        let mut unclassified = Unclassified::default();
        loop {
            if *self.shutdown.borrow() {
                break;
            }
            // Whatever the peer already sent comes first: a session of theirs that arrived
            // while we were busy is served before we start one of ours, so neither side
            // starves the other by always having new mail (and no sessions cross where none
            // had to).
            let mut closed = false;
            loop {
                match self.inbox.try_recv() {
                    Ok(input) => {
                        self.on_input(
                            input,
                            &target,
                            &mut own,
                            &mut current,
                            &mut unclassified,
                            &mut arbiter,
                        )
                        .await;
                    }
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        closed = true;
                        break;
                    }
                }
            }
            if closed {
                break;
            }
            if self.gather_until.is_some_and(|g| Instant::now() >= g) {
                self.gather_until = None;
            }
            if self.peer_hold.is_some_and(|h| Instant::now() >= h) {
                info!("the peer has given up any session of ours that was cut; sessions resume");
                self.peer_hold = None;
                self.memory.update(|m| m.unanswered = false);
            }
            // Only when a session could have started does the spool's next due time matter;
            // otherwise (link down, peer held, a stream in progress) the next event is an
            // input or the periodic look, and waking for mail already due would spin.
            let mut look = Look::Periodic;
            if own.is_none()
                && self.gather_until.is_none()
                && self.peer_hold.is_none()
                && matches!(current, Current::Idle)
                && unclassified.is_empty()
                && arbiter.can_start()
            {
                match self.start_session(&target).await {
                    Start::Started(o) => {
                        arbiter.own_started();
                        own = Some(*o);
                    }
                    Start::Later(l) => look = l,
                }
            }
            let wake = Arc::clone(&self.ctx.wake);
            let notified = wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next_look = if let Some(g) = self.gather_until.or(self.peer_hold) {
                g
            } else {
                self.ctx.next_look(look, &target).await
            };
            let own_deadline = own.as_ref().map(Own::deadline);
            let server_deadline = match &current {
                Current::Session(inc) => inc.server.poll_timeout().map(Instant::from_std),
                _ => None,
            };
            tokio::select! {
                input = self.inbox.recv() => {
                    let Some(input) = input else { break };
                    self.on_input(input, &target, &mut own, &mut current, &mut unclassified, &mut arbiter).await;
                }
                () = &mut notified, if own.is_none() => {
                    if self.gather_until.is_none() {
                        self.gather_until = Some(Instant::now() + self.ctx.config.batch_delay);
                    }
                }
                () = tokio::time::sleep_until(next_look), if own.is_none() => {}
                () = sleep_opt(own_deadline) => {
                    if let Some(mut o) = own.take() {
                        if o.delivery_by.is_some() {
                            warn!(
                                delivery_timeout_s = self.ctx.config.delivery_timeout.as_secs(),
                                "the 5066 node has not delivered the session within delivery_timeout (a busy frequency, or the peer out of reach); the mail stays queued"
                            );
                        } else {
                            warn!("no reply within the session timeout; the mail stays queued");
                        }
                        if matches!(current, Current::Replies) {
                            current = Current::Idle;
                        }
                        o.client.close();
                        self.finish_own(o, &mut arbiter).await;
                    }
                }
                () = sleep_opt(server_deadline) => {
                    if let Current::Session(inc) = &mut current {
                        inc.server.handle_timeout(Instant::now().into_std(), &mut self.dedup.cache);
                    }
                    self.pump(&mut current, &mut arbiter).await;
                }
                _ = self.shutdown.changed() => {}
            }
        }
        // Shutting down: what had no answer stays queued (the peer drops a copy it already
        // has when we send it again).
        if let Some(mut o) = own.take() {
            o.client.close();
            self.finish_own(o, &mut arbiter).await;
        }
    }

    /// Forms a batch and sends the submission.
    async fn start_session(&mut self, target: &Target) -> Start {
        let Some(mtu) = self.endpoint.mtu() else {
            return Start::Later(Look::Periodic);
        };
        let table = self.ctx.routes.current();
        let Some(peer) = table.peer(&self.name) else {
            return Start::Later(Look::Periodic);
        };
        let compression = session_compression(peer);
        let skywave_peer = peer.skywave;
        if self.suspended.is_none()
            && let Some(record) = self.restored.take()
        {
            self.suspended = self.restore(record, peer, target).await;
            if self.suspended.is_none() {
                self.forget_cut();
            }
        }
        if let Some(cut) = self.suspended.take() {
            let rest = octets(&cut.updus[cut.from..]);
            match self.ctx.take_again(peer, target, &cut.batch, rest).await {
                Again::Taken(batch) => return self.go_on(cut, batch).await,
                Again::Later(look) => {
                    self.suspended = Some(cut);
                    return Start::Later(look);
                }
                Again::No(why) => {
                    info!(
                        %why,
                        "the session a lost link cut short is not gone on with; its mail goes in a new one"
                    );
                    crate::metrics::session_resumption(&self.name, "ours", "given_up");
                    self.forget_cut();
                }
            }
        }
        let loaded = match self.ctx.take_for(peer, target, Vec::new()).await {
            Take::Mail(l) => l,
            Take::Later(look) => return Start::Later(look),
        };
        let priority = loaded
            .iter()
            .map(|(d, _)| d.priority.value())
            .max()
            .unwrap_or(0);
        let (batch, messages) = batch_messages(loaded);
        let start_unix = self.unix_f64();
        let mut settings = ClientSettings::new(self.ctx.hostname.clone(), mtu, compression);
        settings.dictionary = self
            .memory
            .get()
            .dictionary
            .filter(|id| skywave_compress::dictionary::by_id(*id).is_some());
        settings.dsn = self.memory.get().dsn == Some(true);
        // Assumed until the peer's EHLO says otherwise: Annex F asks for it.
        settings.eight_bit_mime = self.memory.get().eight_bit_mime != Some(false);
        // A skywave peer takes UTF-8 header fields as they are (its own delivery converts
        // them where the next hop needs it) and does not advertise SMTPUTF8; any other is
        // taken at its word.
        settings.smtputf8 = self.memory.get().smtputf8.filter(|_| !skywave_peer);
        let mut client = match HmtpClient::new(settings, messages) {
            Ok(c) => c,
            Err(e) => {
                warn!(error = %e, "cannot build the session; the batch stays queued");
                for d in &batch {
                    self.ctx
                        .recorder
                        .defer_all(d, format!("cannot build the HMTP session: {e}"))
                        .await;
                }
                return Start::Later(Look::Periodic);
            }
        };
        let session = client.transmission();
        let wire = octets(&session);
        let mut updus = session.clone();
        let mut lead = 0;
        let mut priority = priority_5066(priority);
        if let Some(cut) = self.cut {
            // After a cut, towards a peer with XCUT: the marker first, in the same submission
            // and at no higher priority than the cut session's, so that the node sends it
            // behind whatever of that session it still holds and ahead of this one.
            updus.insert(0, skywave_hmtp::cut::MARKER.to_vec());
            lead = 1;
            priority = priority.min(cut);
            info!(
                "this session starts with the cut marker: the peer gives the cut one up at once (XCUT)"
            );
        }
        info!(
            messages = batch.len(),
            bytes = wire,
            updus = updus.len(),
            ?compression,
            "session started"
        );
        let own = Own {
            client,
            submission: 0,
            priority,
            batch,
            start_unix,
            reply_by: Instant::now(),
            delivery_by: None,
            updus: session,
            first: 0,
            lead,
            refused: false,
        };
        self.submit(own, updus).await
    }

    /// Goes on with the session cut short `s`, whose mail `batch` is marked in flight again:
    /// the resume marker, then its U_PDUs from where the peer's node had it (`XRESUME`).
    async fn go_on(&mut self, s: Suspended, batch: Vec<DueMessage>) -> Start {
        let Some(updus) = resume::resumption(&s.updus, s.from) else {
            // Not reached: a session is suspended only with something to resume.
            self.forget_cut();
            let mut client = s.client;
            client.close();
            for d in &batch {
                self.ctx
                    .recorder
                    .defer_all(d, "the session cut short could not be resumed".into())
                    .await;
            }
            return Start::Later(Look::Periodic);
        };
        info!(
            messages = batch.len(),
            from = s.from,
            of = s.updus.len(),
            bytes = octets(&updus[1..]),
            "this session goes on with the one a lost link cut short, from where the peer's node had it (XRESUME)"
        );
        crate::metrics::session_resumption(&self.name, "ours", "went_on");
        crate::metrics::resumed_octets_spared(&self.name, octets(&s.updus[..s.from]));
        let mut client = s.client;
        // A 421 from the server that gave the cut session up is not this one's end.
        client.going_on();
        let own = Own {
            client,
            submission: 0,
            priority: s.priority,
            batch,
            start_unix: self.unix_f64(),
            reply_by: Instant::now(),
            delivery_by: None,
            updus: s.updus,
            first: s.from,
            lead: 1,
            refused: false,
        };
        self.submit(own, updus).await
    }

    /// Hands `o`'s submission to the SIS server: `updus`, its `o.lead` markers, then its
    /// U_PDUs from `o.first`.
    async fn submit(&mut self, mut o: Own, updus: Vec<Vec<u8>>) -> Start {
        if o.first == 0 {
            // A new session: no session cut short goes on any more.
            self.forget_cut();
        }
        let wire = octets(updus.get(o.lead..).unwrap_or_default());
        let airtime =
            Duration::from_secs_f64(wire as f64 * 8.0 / f64::from(self.ctx.config.assumed_bps));
        o.reply_by = Instant::now() + self.ctx.config.reply_timeout + airtime * 2;
        o.delivery_by = self
            .endpoint
            .confirms()
            .then(|| Instant::now() + self.ctx.config.delivery_timeout);
        self.submissions += 1;
        o.submission = self.submissions;
        let report = Report {
            to: self.report.clone(),
            submission: o.submission,
        };
        // Recorded before the node has any of it: a crash from here on leaves the next start
        // taking this session as cut.
        let unanswered = self.memory.get().unanswered;
        self.memory.update(|m| m.unanswered = true);
        if let Err(e) = self
            .endpoint
            .send(self.node, o.priority, updus, Some(report))
        {
            warn!(error = %e, "cannot hand the submission to the SIS server");
            self.memory.update(|m| m.unanswered = unanswered);
            o.client.close();
            // Not started as far as the arbiter knows: record and go back to waiting.
            self.record_outcome(o).await;
            return Start::Later(Look::Periodic);
        }
        self.cut = None;
        Start::Started(Box::new(o))
    }

    async fn on_input(
        &mut self,
        input: LinkInput,
        target: &Target,
        own: &mut Option<Own>,
        current: &mut Current,
        unclassified: &mut Unclassified,
        arbiter: &mut Arbiter,
    ) {
        match input {
            // In EMCON nothing may answer; the peer keeps its mail and sends it again later.
            LinkInput::Updu(_) if self.ctx.in_emcon() => {
                warn!(
                    "HMTP from the peer while this gateway keeps EMCON: not answered (a peer that knows it should set emcon = true for us)"
                );
            }
            LinkInput::Updu(b) => {
                self.on_updu(b, own, current, unclassified, arbiter).await;
            }
            LinkInput::LinkUp => {
                debug!("link up");
                if self.gather_until.is_none() {
                    self.gather_until = Some(Instant::now() + self.ctx.config.batch_delay);
                }
                self.ctx
                    .intake
                    .spool
                    .link_up(target, self.ctx.clock.unix_now());
            }
            LinkInput::LinkDown(reason) => debug!(%reason, "link down"),
            LinkInput::Delivered {
                submission,
                confirmed,
            } => {
                // The peer has our session now: its replies can come, and the reply timeout
                // runs from here. Unconfirmed, it runs from the submission as it did.
                if let Some(o) = own.as_mut().filter(|o| o.submission == submission) {
                    if confirmed {
                        let waited = self.unix_f64() - o.start_unix;
                        if Instant::now() > o.reply_by {
                            // Past the wait the submission alone would have had: say why the
                            // session was not given up.
                            info!(
                                waited_s = waited.round(),
                                "the peer's node has the session at last (it waited in the node, behind other traffic or an outage); its replies are awaited from now"
                            );
                        } else {
                            debug!(waited_s = waited.round(), "the peer's node has the session");
                        }
                        o.reply_by = o
                            .reply_by
                            .max(Instant::now() + self.ctx.config.reply_timeout);
                    }
                    o.delivery_by = None;
                }
            }
            LinkInput::SendFailed {
                reason,
                submission,
                confirmed,
            } => {
                // Whichever session it was, the peer may now hold the first part of it: the node
                // gave up on the link and discarded the rest. (Which U_PDUs got there is known only
                // in part: the node confirmed the first `confirmed`, but one delivered just before
                // the link failed has no confirmation, and a server's confirm wait refuses U_PDUs
                // that go on.) A session of ours reaching the peer's server before it gives that
                // part up would be read as its rest, so none starts until then. Uncompressed, the
                // next session's text is taken as the rest of the cut message and accepted.
                // Compressed, it is no safer: the peer's decoder takes the new stream's bytes as
                // the rest of the old one, which a cut between two U_PDUs leaves in the middle of a
                // block, and at some cut points decodes them without an error, into text made of
                // the old block's symbols and of back-references to what it already holds, until
                // the new stream's own blocks reappear in it; the first end of data in that text
                // closes the cut message, accepted with a corrupt body, and de-duplication then
                // drops the intact copy (`cargo test -p skywave-hmtp --test hmtp_sessions
                // a_session_cut_short`; JNOS LZW's decoder failed at every cut point tried there,
                // which nothing guarantees). So the hold is the same whatever the compression.
                //
                // A peer that advertised XCUT gives the cut session up at the marker our next
                // session starts with, and nothing need wait (`skywave_hmtp::cut`). The marker goes
                // at no higher priority than the failed U_PDU's session (the lowest when that is an
                // earlier one's, not known here).
                let failed = own
                    .as_ref()
                    .filter(|o| o.submission == submission)
                    .map_or(Priority::default(), |o| o.priority);
                self.after_cut(failed);
                // Only a U_PDU of the session in progress ends it: a rejection of an earlier
                // session's (a server's confirm wait can answer long after the session ended
                // here) says nothing about this one.
                let Some(mut o) = own.take_if(|o| o.submission == submission) else {
                    debug!(%reason, "a U_PDU of an earlier session was not delivered");
                    return;
                };
                if matches!(current, Current::Replies) {
                    *current = Current::Idle;
                }
                warn!(%reason, "submission not delivered; ending the session");
                // Towards a peer that goes on with a session cut short (XRESUME), the next
                // one carries only what its node did not confirm.
                let from = o.first + confirmed.saturating_sub(o.lead);
                if self.resumes() && from > 0 && from < o.updus.len() {
                    arbiter.own_finished();
                    self.suspend(o, from).await;
                    return;
                }
                o.client.close();
                self.finish_own(o, arbiter).await;
            }
        }
    }

    /// Whether a session of ours cut short goes on from where the peer's node had it: this
    /// gateway resumes (`[hf] resume`) and the peer's server advertised `XRESUME` in its last
    /// EHLO reply.
    fn resumes(&self) -> bool {
        self.ctx.config.resume && self.memory.get().xresume == Some(true)
    }

    /// Keeps `o`, cut short with its first `from` U_PDUs at the peer, to go on with when its
    /// mail is due again; the mail is deferred meanwhile, as after any cut, so that the spool
    /// says why it waits and retries it on its usual backoff (or at once when the link comes
    /// back).
    async fn suspend(&mut self, o: Own, from: usize) {
        let total = o.updus.len();
        info!(
            from,
            of = total,
            "the peer's node had part of the session; it goes on from there when its mail is due again (XRESUME)"
        );
        let why = format!(
            "a lost link cut the session to {} short with {from} of its {total} U_PDUs at the peer; it goes on from there (XRESUME)",
            self.name
        );
        for d in &o.batch {
            self.ctx.recorder.defer_all(d, why.clone()).await;
        }
        let at_the_peer = &o.updus[o.first.min(from)..from];
        self.ctx.transfers.record(TransferRecord {
            peer: self.name.clone(),
            protocol: "hmtp".into(),
            direction: Direction::Out,
            start: o.start_unix,
            end: self.unix_f64(),
            messages: o.batch.len() as u64,
            accepted: 0,
            plain_bytes: 0,
            wire_bytes: octets(at_the_peer),
            reply_plain_bytes: 0,
            reply_wire_bytes: 0,
            updus: at_the_peer.len() as u64,
            transmissions: 1,
            retransmissions: None,
            result: format!(
                "cut short: the peer's node had {from} of {total} U_PDUs; to go on from there (XRESUME)"
            ),
        });
        let record = super::cut_record::CutRecord::new(
            o.batch
                .iter()
                .map(|d| (d.id.to_string(), d.recipients.clone()))
                .collect(),
            o.client.settings(),
            &o.updus,
            from,
            o.priority.get(),
        );
        super::cut_record::write(&self.links_dir(), &self.name, &record);
        self.suspended = Some(Suspended {
            client: o.client,
            updus: o.updus,
            from,
            priority: o.priority,
            batch: o.batch,
        });
    }

    /// Where the link keeps what outlives a restart.
    fn links_dir(&self) -> std::path::PathBuf {
        self.ctx.state_dir.join("links")
    }

    /// No session of ours cut short goes on any more: its record goes.
    fn forget_cut(&mut self) {
        super::cut_record::remove(&self.links_dir(), &self.name);
    }

    /// Builds again the session of ours cut short before this gateway restarted, from its
    /// record and the spool (`XRESUME`): `None` unless the peer goes on with sessions, every
    /// message still waits for the same recipients, and the U_PDUs built are the ones the
    /// peer's node had part of.
    async fn restore(
        &self,
        record: super::cut_record::CutRecord,
        peer: &skywave_route::Peer,
        target: &Target,
    ) -> Option<Suspended> {
        let priority = Priority::new(record.priority).ok()?;
        let settings = record.settings()?;
        if !self.resumes() {
            return None;
        }
        let spool = Arc::clone(&self.ctx.intake.spool);
        let t = target.clone();
        let ashore = super::Ashore::of_peer(peer);
        let wanted = record.messages.clone();
        let loaded = crate::blocking::spawn(move || {
            let waiting = spool.waiting(&t)?;
            let mut out = Vec::with_capacity(wanted.len());
            for (id, recipients) in &wanted {
                let Some(d) = waiting.iter().find(|w| {
                    w.id.as_str() == id && super::same_recipients(&w.recipients, recipients)
                }) else {
                    return Ok(None);
                };
                // As the cut session loaded it (what stayed ashore was counted then).
                let body = ashore.load(&spool, &d.id)?.file.message;
                out.push((d.clone(), body));
            }
            Ok::<_, skywave_spool::Error>(Some(out))
        })
        .await;
        let Ok(Ok(Some(loaded))) = loaded else {
            info!(
                "the session cut short before the restart: its mail no longer all waits as it went; it goes in a new session"
            );
            return None;
        };
        let (batch, messages) = batch_messages(loaded);
        let mut client = HmtpClient::new(settings, messages).ok()?;
        let updus = client.transmission();
        if !record.is_the_same(&updus) {
            info!(
                "the session cut short before the restart builds again into other octets (its messages or the routing table changed); it goes in a new session"
            );
            return None;
        }
        info!(
            from = record.from,
            of = updus.len(),
            "the session cut short before the restart is built again; it goes on from where the peer's node had it (XRESUME)"
        );
        Some(Suspended {
            client,
            updus,
            from: record.from,
            priority,
            batch,
        })
    }

    /// Whether the peer's server honours the cut marker: what its last EHLO reply said, or
    /// before any, what the routing table states (`xcut = true`).
    fn peer_cuts(&self) -> bool {
        self.memory
            .get()
            .xcut
            .unwrap_or_else(|| self.configured_xcut())
    }

    /// A U_PDU of the peer's session arrived while ours waits: the replies to ours come after
    /// that session, so ours waits at least as long for them from now as after its submission
    /// (the reply timeout) and for two more U_PDUs of the peer's on the air.
    fn replies_follow_the_peers_session(&self, own: &mut Option<Own>) {
        if let Some(o) = own.as_mut() {
            let mtu = self.endpoint.mtu().unwrap_or(2048);
            let two = Duration::from_secs_f64(
                2.0 * mtu as f64 * 8.0 / f64::from(self.ctx.config.assumed_bps),
            );
            o.reply_by = o
                .reply_by
                .max(Instant::now() + self.ctx.config.reply_timeout + two);
        }
    }

    fn configured_xcut(&self) -> bool {
        self.ctx
            .routes
            .current()
            .peer(&self.name)
            .is_some_and(|p| p.xcut)
    }

    /// A session of ours sent at priority `failed` may have been cut at the peer: the next one
    /// starts with the cut marker (XCUT) or waits until the peer's server has given it up.
    fn after_cut(&mut self, failed: Priority) {
        if self.peer_cuts() {
            self.cut = Some(self.cut.map_or(failed, |c| c.min(failed)));
            info!(
                "part of a session may be at the peer; the next one starts with the cut marker (XCUT)"
            );
        } else {
            let mtu = self.endpoint.mtu().unwrap_or(2048);
            let hold = self.ctx.config.peer_session_wait(mtu);
            let until = Instant::now() + hold;
            if self.peer_hold.is_none_or(|h| h < until) {
                warn!(
                    hold_s = hold.as_secs(),
                    "part of a session may be at the peer; no session starts until its server has given it up"
                );
                self.peer_hold = Some(until);
            }
        }
    }

    async fn on_updu(
        &mut self,
        b: Bytes,
        own: &mut Option<Own>,
        current: &mut Current,
        unclassified: &mut Unclassified,
        arbiter: &mut Arbiter,
    ) {
        if resume::is_refusal(&b) {
            unclassified.clear();
            self.refused(own, current, arbiter).await;
            return;
        }
        match self
            .keeper
            .check(&b, matches!(current, Current::Session(_)))
        {
            Resume::Pass => {}
            Resume::Copy => {
                debug!("a U_PDU of the session cut short that was here already: dropped (XRESUME)");
                return;
            }
            Resume::Discard => {
                debug!("the rest of a session cut short that was refused: dropped (XRESUME)");
                return;
            }
            Resume::OutOfStep => {
                warn!(
                    "the peer went on with its session cut short, but a U_PDU it sent again differs from the one here: the session is given up, and the peer sends its mail again (XRESUME)"
                );
                if let Current::Session(inc) = current {
                    inc.server.receive(
                        Instant::now().into_std(),
                        skywave_hmtp::cut::MARKER,
                        &mut self.dedup.cache,
                    );
                    self.pump(current, arbiter).await;
                }
                return;
            }
            Resume::GoOn { copies } => {
                crate::metrics::session_resumption(&self.name, "theirs", "went_on");
                info!(
                    copies,
                    "the peer goes on with its session a lost link cut short (XRESUME)"
                );
                if let Current::Session(inc) = current {
                    inc.resumed = true;
                    // Its waits run from here: the rest is on its way, and may take long.
                    inc.server.touch(Instant::now().into_std());
                }
                return;
            }
            Resume::Rebuild { updus, copies } => {
                crate::metrics::session_resumption(&self.name, "theirs", "went_on");
                unclassified.clear();
                self.rebuild(updus, copies, own, current, arbiter).await;
                return;
            }
            Resume::Refuse(why) => {
                crate::metrics::session_resumption(&self.name, "theirs", "refused");
                warn!(
                    %why,
                    "the peer would go on with a session cut short: refused, it sends its mail again whole (XRESUME)"
                );
                unclassified.clear();
                let refusal = vec![resume::REFUSAL.to_vec()];
                if let Err(e) = self
                    .endpoint
                    .send(self.node, priority_5066(0), refusal, None)
                {
                    warn!(error = %e, "cannot send the refusal; the peer's reply timeout ends its session");
                }
                return;
            }
            Resume::Malformed(e) => {
                warn!(error = %e, "a resume marker from the peer that is not well formed: dropped");
                return;
            }
        }
        if skywave_hmtp::cut::is_marker(&b) {
            // The peer gives up a session of its own that a lost link cut short (XCUT); its
            // next session follows. Not a stream's octets, whatever we are reading.
            unclassified.clear();
            match current {
                Current::Session(inc) => {
                    info!("the peer gave up its session, cut short by a lost link (XCUT)");
                    inc.server
                        .receive(Instant::now().into_std(), &b, &mut self.dedup.cache);
                    self.pump(current, arbiter).await;
                }
                Current::Replies | Current::Idle => {
                    debug!("cut marker from the peer with no session of its open: nothing to end");
                }
            }
            return;
        }
        match current {
            Current::Replies => {
                self.feed_replies(&b, own, current, arbiter).await;
                return;
            }
            Current::Session(inc) => {
                self.replies_follow_the_peers_session(own);
                self.keeper.read(&b);
                inc.server
                    .receive(Instant::now().into_std(), &b, &mut self.dedup.cache);
                self.pump(current, arbiter).await;
                return;
            }
            Current::Idle => {}
        }
        // A new stream: its first decoded byte says what it is.
        unclassified.push(&b);
        match plausible_start(unclassified) {
            Plausible::Yes => {}
            Plausible::NeedMore => return,
            Plausible::No => {
                // The tail of a stream whose start this process never saw (it restarted in
                // the middle of the peer's transmission): dropping it keeps us in step; the
                // peer's session times out and is sent again whole.
                warn!(
                    bytes = unclassified.len(),
                    first = unclassified.first().copied().unwrap_or(0),
                    "data from the peer that starts no stream (the rest of one begun before a restart?): dropped"
                );
                unclassified.clear();
                return;
            }
        }
        let kind = match classify_stream_start(unclassified) {
            Ok(Some(k)) => k,
            Ok(None) if unclassified.len() < MAX_UNCLASSIFIED => return,
            Ok(None) => StreamStart::Session,
            Err(e) => {
                warn!(error = %e, bytes = unclassified.len(), "undecodable stream from the peer: dropped");
                unclassified.clear();
                return;
            }
        };
        let first = std::mem::take(unclassified);
        match kind {
            StreamStart::Replies => {
                if own.is_none() {
                    warn!(
                        bytes = first.len(),
                        "replies from the peer with no session of ours: dropped"
                    );
                    return;
                }
                *current = Current::Replies;
                self.feed_replies(&first.bytes, own, current, arbiter).await;
            }
            StreamStart::Session => {
                let Some(inc) = self.open_session(own, arbiter) else {
                    return;
                };
                *current = Current::Session(inc);
                if let Current::Session(inc) = current {
                    for u in &first.updus {
                        self.keeper.read(u);
                    }
                    inc.server.receive(
                        Instant::now().into_std(),
                        &first.bytes,
                        &mut self.dedup.cache,
                    );
                }
                self.pump(current, arbiter).await;
            }
        }
    }

    /// A server for a session of the peer's that starts (a new stream, or one cut short that
    /// the peer goes on with).
    fn open_session(
        &mut self,
        own: &mut Option<Own>,
        arbiter: &mut Arbiter,
    ) -> Option<Box<Incoming>> {
        if arbiter.incoming_session() == IncomingAction::ServeAlongside {
            info!("sessions crossed: the peer's is served alongside ours, whose replies follow it");
            self.replies_follow_the_peers_session(own);
        }
        let mtu = self.endpoint.mtu().unwrap_or(2048);
        let policy = GatewayPolicy::new(
            Source::Peer {
                name: self.name.clone(),
                identity: format!("{}/5066:{}", self.name, self.node),
                link: "HMTP",
            },
            Arc::clone(&self.ctx.routes),
        )
        .reserve_of(Arc::clone(&self.ctx.intake.spool));
        let mut settings = ServerSettings::new(self.ctx.hostname.clone(), mtu);
        // A LAN's 5 and 3 minutes would end a session whose next U_PDU is still on the air at
        // a slow rate.
        let wait = self.ctx.config.session_wait(mtu);
        settings.smtp.idle_timeout = wait;
        settings.smtp.data_timeout = wait;
        // The spool keeps NOTIFY, ORCPT, RET and ENVID and reports as they ask.
        settings.smtp.dsn = true;
        settings.resume = self.ctx.config.resume;
        // A peer that goes on with a session cut short reads no 421 at our timeout.
        settings.quiet_timeout = self.resumes();
        let server = match HmtpServer::new(settings, policy, Instant::now().into_std()) {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "cannot serve the peer's session");
                return None;
            }
        };
        self.keeper.started();
        Some(Box::new(Incoming {
            server,
            start_unix: self.unix_f64(),
            messages: 0,
            accepted: 0,
            replayed: (0, 0),
            resumed: false,
        }))
    }

    /// The peer goes on with its session that a lost link cut short and this gateway's
    /// server gave up (`XRESUME`): a new server reads again what was kept of it (the messages
    /// accepted then are duplicates now, acknowledged and not spooled twice), then the rest as
    /// it comes.
    async fn rebuild(
        &mut self,
        kept: Vec<Vec<u8>>,
        copies: usize,
        own: &mut Option<Own>,
        current: &mut Current,
        arbiter: &mut Arbiter,
    ) {
        info!(
            kept = kept.len(),
            copies,
            "the peer goes on with its session a lost link cut short: read again from what was kept (XRESUME)"
        );
        let Some(mut inc) = self.open_session(own, arbiter) else {
            return;
        };
        inc.resumed = true;
        inc.replayed = (kept.len() as u64, octets(&kept));
        *current = Current::Session(inc);
        for u in &kept {
            // A session that ends on what was kept (a bad stream) reads no more of it.
            let Current::Session(inc) = current else {
                break;
            };
            self.keeper.read(u);
            inc.server
                .receive(Instant::now().into_std(), u, &mut self.dedup.cache);
            self.pump(current, arbiter).await;
        }
    }

    /// The peer has nothing of a session of ours cut short that ours went on with
    /// (`XRESUME`): it restarted since, or took another stream. Its mail goes again whole, at
    /// once.
    async fn refused(
        &mut self,
        own: &mut Option<Own>,
        current: &mut Current,
        arbiter: &mut Arbiter,
    ) {
        let Some(mut o) = own.take_if(|o| o.first > 0) else {
            debug!("the peer refused to go on with a session of ours that is not in progress");
            return;
        };
        warn!(
            "the peer has nothing of the session cut short (it restarted, or took another since): its mail goes again whole (XRESUME)"
        );
        if matches!(current, Current::Replies) {
            *current = Current::Idle;
        }
        crate::metrics::session_resumption(&self.name, "ours", "refused");
        o.client.close();
        o.refused = true;
        self.finish_own(o, arbiter).await;
    }

    async fn feed_replies(
        &mut self,
        b: &[u8],
        own: &mut Option<Own>,
        current: &mut Current,
        arbiter: &mut Arbiter,
    ) {
        let Some(o) = own.as_mut() else {
            *current = Current::Idle;
            return;
        };
        let stale = o.client.stale_reply_streams();
        o.client.receive(b);
        if o.client.is_finished() {
            *current = Current::Idle;
            if let Some(o) = own.take() {
                self.finish_own(o, arbiter).await;
            }
        } else if o.client.stale_reply_streams() > stale {
            // That stream answered an earlier session of ours (XSUM): ours may still come, but
            // so may a session of the peer's, so the next stream is classified afresh.
            *current = Current::Idle;
        }
    }

    /// Handles the served session's events and sends its transmissions.
    async fn pump(&mut self, current: &mut Current, arbiter: &mut Arbiter) {
        let Current::Session(inc) = current else {
            return;
        };
        let mut end = None;
        // Bounded: each message event waits for our answer before the server goes on.
        while let Some(event) = inc.server.poll_event() {
            match event {
                ServerEvent::Message(m) => {
                    inc.messages += 1;
                    let stored = match inc.server.policy() {
                        Some(policy) => {
                            self.ctx
                                .intake
                                .store(policy, &m.envelope, &m.body, None)
                                .await
                        }
                        None => Err(crate::intake::reply(451, "4.3.0", "session state lost")),
                    };
                    let now = Instant::now().into_std();
                    let r = match stored {
                        Ok(id) => {
                            inc.accepted += 1;
                            let key = skywave_hmtp::DedupKey::new(
                                &m.envelope.reverse_path,
                                &m.envelope.recipients,
                                &m.body,
                            );
                            self.dedup.persist(&key);
                            info!(queue_id = %id, from = %m.envelope.reverse_path, "received over HF");
                            inc.server
                                .accepted(m.ticket, id.as_str(), now, &mut self.dedup.cache)
                        }
                        Err(reply) => {
                            inc.server
                                .rejected(m.ticket, reply, now, &mut self.dedup.cache)
                        }
                    };
                    if let Err(e) = r {
                        warn!(error = %e, "session bookkeeping failed");
                    }
                }
                ServerEvent::Duplicate { envelope, .. } => {
                    inc.messages += 1;
                    inc.accepted += 1;
                    info!(from = %envelope.reverse_path, "duplicate of a message already accepted: acknowledged and dropped");
                }
                ServerEvent::Closed(e) => end = Some(e),
            }
        }
        let prio = priority_5066(0);
        while let Some(tx) = inc.server.take_transmission() {
            if let Err(e) = self.endpoint.send(self.node, prio, tx, None) {
                warn!(error = %e, "cannot send the replies; the peer will retry");
            }
        }
        if let Some(end) = end {
            let received = inc.server.received_stats();
            let sent = inc.server.sent_stats();
            // Given up before its end: the peer may go on with it (XRESUME).
            let kept = self.ctx.config.resume
                && matches!(
                    end,
                    ServerEnd::Session(CloseReason::IdleTimeout | CloseReason::DataTimeout)
                );
            self.keeper.ended(kept);
            let mut result = match &end {
                ServerEnd::Session(reason) => format!("{reason:?}"),
                ServerEnd::BadStream(e) => format!("bad stream: {e}"),
                ServerEnd::Cut => "cut: given up by the peer after a lost link (XCUT)".to_owned(),
            };
            if inc.resumed {
                result.push_str("; went on with a session a lost link cut short (XRESUME)");
                if inc.replayed.0 > 0 {
                    result.push_str(&format!(
                        ", {} U_PDU(s) of it read again from what was kept",
                        inc.replayed.0
                    ));
                }
            }
            if self.keeper.holds_a_cut_session() {
                result.push_str("; what came of it is kept for the peer to go on with (XRESUME)");
            }
            self.ctx.transfers.record(TransferRecord {
                peer: self.name.clone(),
                protocol: "hmtp".into(),
                direction: Direction::In,
                start: inc.start_unix,
                end: self.unix_f64(),
                messages: inc.messages,
                accepted: inc.accepted,
                plain_bytes: received.plain_bytes,
                wire_bytes: received.wire_bytes.saturating_sub(inc.replayed.1),
                reply_plain_bytes: sent.plain_bytes,
                reply_wire_bytes: sent.wire_bytes,
                updus: (received.updus + sent.updus).saturating_sub(inc.replayed.0),
                transmissions: received.transmissions.max(1) + sent.transmissions,
                retransmissions: None,
                result,
            });
            arbiter.incoming_finished();
            *current = Current::Idle;
        }
    }

    async fn finish_own(&mut self, o: Own, arbiter: &mut Arbiter) {
        arbiter.own_finished();
        self.record_outcome(o).await;
    }

    /// Applies every recipient's outcome to the spool and writes the transfer record.
    async fn record_outcome(&mut self, o: Own) {
        if o.first > 0 {
            // The session that went on with one cut short ended, answered or not.
            self.forget_cut();
        }
        let Some(outcome) = o.client.outcome().cloned() else {
            return;
        };
        let used = o.client.settings().dictionary;
        // Replies of any kind, late ones to an earlier session included, say the peer hears us.
        self.ctx.heard_from(&self.name, outcome.received.updus > 0);
        match (&outcome.end, outcome.received.updus) {
            // The peer's replies arrived: its EHLO says what it can decode now.
            (_, n) if n > 0 => {
                let dictionary = outcome
                    .peer_dictionaries
                    .iter()
                    .copied()
                    .find(|id| skywave_compress::dictionary::by_id(*id).is_some());
                // Replies to this session (its server read it to the end, or gave it up with
                // a 421) say nothing of it is left at the peer. Late replies to an earlier
                // session, set aside, say nothing of this one.
                let answered = matches!(
                    outcome.end,
                    SessionEnd::Completed | SessionEnd::ServiceClosing(_)
                );
                self.memory.update(|m| {
                    if let Some(cuts) = outcome.peer_cuts {
                        m.xcut = Some(cuts);
                        m.xresume = outcome.peer_resumes;
                        m.dictionary = dictionary;
                    }
                    if outcome.peer_dsn.is_some() {
                        m.dsn = outcome.peer_dsn;
                    }
                    if outcome.peer_eight_bit_mime.is_some() {
                        m.eight_bit_mime = outcome.peer_eight_bit_mime;
                    }
                    if outcome.peer_smtputf8.is_some() {
                        m.smtputf8 = outcome.peer_smtputf8;
                    }
                    m.unanswered &= !answered;
                });
            }
            // A session that started from a dictionary and got nothing back: the peer may not
            // decode it any more. Plain deflate until it advertises one again.
            (SessionEnd::Closed | SessionEnd::BadReplies(_), _) if used.is_some() => {
                warn!(peer = %self.name, "no replies to a session with a preset dictionary; the next one goes without");
                self.memory.update(|m| m.dictionary = None);
            }
            _ => {}
        }
        let mut accepted = 0u64;
        for (i, (d, result)) in o.batch.iter().zip(&outcome.messages).enumerate() {
            let mut groups: Vec<(Outcome, Vec<String>)> = Vec::new();
            let sent = Sent {
                dsn: o.client.settings().dsn,
                body_8bitmime: o.client.sent_8bitmime(i),
            };
            for (rcpt, disp) in &result.recipients {
                let out = if o.refused {
                    Outcome::Again(format!(
                        "{} has nothing of the session cut short that this one went on with (XRESUME); sent again whole",
                        self.name
                    ))
                } else {
                    to_outcome(&self.name, disp, &outcome, sent)
                };
                match groups.iter_mut().find(|(g, _)| *g == out) {
                    Some((_, v)) => v.push(rcpt.clone()),
                    None => groups.push((out, vec![rcpt.clone()])),
                }
            }
            if result
                .recipients
                .iter()
                .any(|(_, d)| matches!(d, Disposition::Delivered(_)))
            {
                accepted += 1;
            }
            for (out, rcpts) in groups {
                self.ctx
                    .recorder
                    .record(&d.id, &d.sender, d.size, rcpts, out)
                    .await;
            }
        }
        let mut result = match &outcome.end {
            SessionEnd::Completed => "completed".to_owned(),
            SessionEnd::ServiceClosing(r) => format!("peer closed: {} {}", r.code, r.text()),
            SessionEnd::Closed if o.refused => {
                "refused: the peer has nothing of the session cut short (it restarted, or took another since); the mail goes again whole".to_owned()
            }
            SessionEnd::Closed => "no reply (timeout or link lost)".to_owned(),
            SessionEnd::BadReplies(e) => format!("bad replies: {e}"),
        };
        if outcome.stale_reply_streams > 0 {
            result.push_str(&format!(
                "; set aside {} late reply stream(s) to an earlier session (XSUM)",
                outcome.stale_reply_streams
            ));
        }
        // A session that went on with one cut short sent only the rest (and the marker).
        let (plain_bytes, wire_bytes, updus) = if o.first > 0 {
            let rest = octets(&o.updus[o.first..]);
            result.push_str(&format!(
                "; went on from U_PDU {} of {} after a lost link cut it short (XRESUME)",
                o.first,
                o.updus.len()
            ));
            (
                outcome.sent.plain_bytes * rest / octets(&o.updus).max(1),
                rest,
                (o.updus.len() - o.first) as u64,
            )
        } else {
            (
                outcome.sent.plain_bytes,
                outcome.sent.wire_bytes,
                outcome.sent.updus,
            )
        };
        self.ctx.transfers.record(TransferRecord {
            peer: self.name.clone(),
            protocol: "hmtp".into(),
            direction: Direction::Out,
            start: o.start_unix,
            end: self.unix_f64(),
            messages: o.batch.len() as u64,
            accepted,
            plain_bytes,
            wire_bytes,
            reply_plain_bytes: outcome.received.plain_bytes,
            reply_wire_bytes: outcome.received.wire_bytes,
            updus: updus + outcome.received.updus,
            transmissions: outcome.sent.transmissions + u64::from(outcome.received.updus > 0),
            retransmissions: None,
            result,
        });
        if matches!(outcome.end, SessionEnd::Completed) {
            // Anything else due goes in the next session without waiting.
            self.ctx.wake.notify_waiters();
        }
    }

    fn unix_f64(&self) -> f64 {
        self.ctx.clock.unix_f64()
    }
}

/// What a session sent with one message beyond the envelope: what a refusal may be of.
#[derive(Debug, Clone, Copy)]
struct Sent {
    /// The DSN parameters.
    dsn: bool,
    /// `BODY=8BITMIME`.
    body_8bitmime: bool,
}

/// What `d`, a recipient's disposition in a session to `peer`, means for the spool.
fn to_outcome(peer: &str, d: &Disposition, outcome: &BatchOutcome, sent: Sent) -> Outcome {
    match d {
        // Sent with a parameter the peer's server, this time, did not offer (the batch went
        // before its EHLO reply, on what it said last time or on Annex F's word; or it was
        // replaced or reconfigured): its refusal is of the parameter, not of the mail. Again
        // at once, without it (the memory now says so).
        Disposition::Failed(r) => {
            let mut not_offered = Vec::new();
            if sent.dsn && outcome.peer_dsn == Some(false) {
                not_offered.push(("DSN", "without the DSN parameters"));
            }
            if sent.body_8bitmime && outcome.peer_eight_bit_mime == Some(false) {
                not_offered.push(("8BITMIME", "with its 8-bit text made 7-bit"));
            }
            if not_offered.is_empty() {
                return Outcome::from_reply(peer, r, Handoff::onward(sent.dsn));
            }
            let (names, agains): (Vec<&str>, Vec<&str>) = not_offered.into_iter().unzip();
            Outcome::Again(format!(
                "{peer} does not offer {} and said: {} {}; sent again {}",
                names.join(" or "),
                r.code,
                r.text(),
                agains.join(" and ")
            ))
        }
        Disposition::Delivered(r) | Disposition::Deferred(r) => {
            Outcome::from_reply(peer, r, Handoff::onward(sent.dsn))
        }
        Disposition::NoAnswer => Outcome::Deferred(format!(
            "no answer from {peer} ({:?}); the peer drops a copy it already has",
            outcome.end
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session_to(peer_dsn: Option<bool>, peer_eight_bit_mime: Option<bool>) -> BatchOutcome {
        BatchOutcome {
            messages: Vec::new(),
            end: SessionEnd::Completed,
            sent: Default::default(),
            received: Default::default(),
            peer_dictionaries: Vec::new(),
            peer_cuts: Some(true),
            peer_resumes: Some(true),
            peer_dsn,
            peer_eight_bit_mime,
            peer_smtputf8: Some(false),
            stale_reply_streams: 0,
        }
    }

    #[test]
    fn a_refusal_of_a_parameter_the_peer_does_not_offer_waits_to_go_without_it() {
        let refused = Disposition::Failed(skywave_smtp::Reply::new(
            555,
            skywave_smtp::EnhancedCode::new(5, 5, 4),
            "MAIL parameters not recognized or not implemented",
        ));
        let eight = Sent {
            dsn: false,
            body_8bitmime: true,
        };
        assert_eq!(
            to_outcome("shore", &refused, &session_to(None, Some(false)), eight),
            Outcome::Again(
                "shore does not offer 8BITMIME and said: 555 MAIL parameters not recognized or \
                 not implemented; sent again with its 8-bit text made 7-bit"
                    .into()
            )
        );
        let both = Sent {
            dsn: true,
            body_8bitmime: true,
        };
        let Outcome::Again(why) = to_outcome(
            "shore",
            &refused,
            &session_to(Some(false), Some(false)),
            both,
        ) else {
            panic!("not sent again at once");
        };
        assert!(
            why.starts_with("shore does not offer DSN or 8BITMIME and said: 555 ")
                && why.ends_with(
                    "; sent again without the DSN parameters and with its 8-bit text made 7-bit"
                ),
            "{why}"
        );
        // The peer offers what was sent, or was sent none of what it lacks: a refusal is of
        // the mail.
        for (session, sent) in [
            (session_to(Some(true), Some(true)), both),
            (
                session_to(Some(true), Some(false)),
                Sent {
                    dsn: true,
                    body_8bitmime: false,
                },
            ),
            (session_to(None, None), both),
        ] {
            assert!(
                matches!(
                    to_outcome("shore", &refused, &session, sent),
                    Outcome::Failed { ref status, .. } if status == "5.5.4"
                ),
                "{session:?} {sent:?}"
            );
        }
    }

    #[test]
    fn only_real_stream_starts_are_taken() {
        assert_eq!(plausible_start(b"\x78\x9c"), Plausible::Yes);
        assert_eq!(plausible_start(b"\x78\x01"), Plausible::Yes);
        assert_eq!(plausible_start(b"\x78\x9d"), Plausible::No);
        assert_eq!(plausible_start(b"\x78"), Plausible::NeedMore);
        assert_eq!(plausible_start(b"\x03\x10"), Plausible::Yes);
        assert_eq!(plausible_start(b"\x03\x11"), Plausible::No);
        assert_eq!(plausible_start(b"250-gw"), Plausible::Yes);
        assert_eq!(plausible_start(b"25"), Plausible::NeedMore);
        assert_eq!(plausible_start(b"2x0"), Plausible::No);
        assert_eq!(plausible_start(b"EHLO gw"), Plausible::Yes);
        assert_eq!(plausible_start(b"helo gw"), Plausible::Yes);
        assert_eq!(plausible_start(b"He"), Plausible::NeedMore);
        assert_eq!(plausible_start(b"Line 5 of the report"), Plausible::No);
        assert_eq!(plausible_start(b"\xae\x11"), Plausible::No);
        assert_eq!(plausible_start(b""), Plausible::NeedMore);
    }
}
