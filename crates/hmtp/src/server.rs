//! The HMTP server: serves one peer's session arriving as U_PDUs on SAP 3.
//!
//! Sits between the SIS bearer and the gateway's spool. The first byte of the stream decides
//! the scheme (`0x03` JNOS LZW, `0x78` zlib, ASCII plain, see `skywave_compress::detect_stream`);
//! the decoded text drives the smtp crate's [`ServerSession`], and the replies go back compressed
//! in the same scheme, cut into U_PDUs of at most the MTU.
//!
//! # Serving modes
//! - **Batch (HMTP-66)**: every reply is held until QUIT and then sent in one transmission, so a
//!   session costs 2 transmissions whatever its size; a rejected DATA's text is read and discarded
//!   up to its "." (the client sent it without waiting). This is the mode for every compressed
//!   stream and for every plain stream that goes on after its first line.
//! - **Standard (RFC 2920)**: a plain stream whose first line is EHLO (or HELO) *and which stops
//!   right there*, i.e. every byte received so far is that one line, comes from a client that
//!   waits for the EHLO reply (a standard pipelining client; Annex F's "amendment of RFC 2920"
//!   waits for it too). Holding that reply until QUIT would deadlock it, so such a session is
//!   served as plain pipelined SMTP: each reply group goes out as soon as the input received so
//!   far is processed. In this mode a refused DATA is *not* followed by discarding text, as
//!   RFC 2920 makes the client wait for the 354. The rule is decided once, on the first line.
//!   Our own client never ends a U_PDU right after its EHLO line, so it always gets batch mode.
//!
//! # Spool ordering
//! A complete message is handed to the owner as [`ServerEvent::Message`] with a [`SpoolTicket`].
//! The session then processes nothing more until the owner passes the ticket back to
//! [`HmtpServer::accepted`] (the spool write is durable: the 250 is said only now, and the message
//! enters the [`DedupCache`]) or [`HmtpServer::rejected`]. A message the cache already holds is
//! answered 250 without bothering the owner beyond a [`ServerEvent::Duplicate`].

use std::collections::VecDeque;
use std::time::Instant;

use skywave_compress::{Limits, Scheme, StreamDecoder, StreamEncoder, StreamKind};
use skywave_smtp::{
    AuthMode, CloseReason, EnhancedCode, Envelope, Event, Policy, Reply, ServerConfig,
    ServerSession,
};

use crate::dedup::{DedupCache, DedupKey};
use crate::error::HmtpError;
use crate::stream::{DirectionStats, check_mtu, cut_compressed};

/// Server settings for one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    /// The SMTP server profile (host name, limits, timeouts). Greeting, reply buffering,
    /// STARTTLS and AUTH are set by the HMTP server itself.
    pub smtp: ServerConfig,
    /// The SIS MTU: no reply U_PDU is longer.
    pub mtu: usize,
    /// Caps on the decompressed command stream.
    pub limits: Limits,
    /// Advertise `XRESUME` ([`crate::resume`]): set by an owner that keeps the U_PDUs of a
    /// session cut short and goes on with it at the client's resume marker.
    pub resume: bool,
    /// A timeout ends the session without its `421` and the replies held: for a client known
    /// to go on with a session cut short, or give it up with the cut marker (a skywave peer
    /// that advertised `XRESUME`). To such a client the `421` only costs air, and arriving after
    /// the session that goes on with this one has begun, it would be read as that session's
    /// end (its `XSUM` names the octets this server read, the first of that session's).
    pub quiet_timeout: bool,
}

impl ServerSettings {
    /// The HMTP profile of the smtp crate with default limits.
    pub fn new(hostname: impl Into<String>, mtu: usize) -> Self {
        Self {
            smtp: ServerConfig::hmtp(hostname),
            mtu,
            limits: Limits::default(),
            resume: false,
            quiet_timeout: false,
        }
    }
}

/// How the session is being served (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeMode {
    /// HMTP-66: every reply held until QUIT.
    Batch,
    /// Standard RFC 2920 pipelining: replies as soon as the input so far is processed.
    Standard,
}

/// Proof that a message is waiting for the spool; hand it back to [`HmtpServer::accepted`] or
/// [`HmtpServer::rejected`]. Neither cloneable nor constructible outside this crate.
#[derive(Debug, PartialEq, Eq)]
pub struct SpoolTicket {
    serial: u64,
    key: DedupKey,
}

/// A complete message to spool.
#[derive(Debug, PartialEq, Eq)]
pub struct IncomingMessage {
    /// Sender, accepted recipients and parameters.
    pub envelope: Envelope,
    /// The message, dot-unstuffed, CRLF line ends.
    pub body: Vec<u8>,
    /// To pass back once the spool decided.
    pub ticket: SpoolTicket,
}

/// Why the server session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEnd {
    /// The SMTP session closed (QUIT, timeout, too many errors, ...).
    Session(CloseReason),
    /// The received stream could not be decoded; nothing more is read and nothing is sent.
    BadStream(String),
    /// The client gave the session up ([`crate::cut::MARKER`]): nothing more is read and
    /// nothing is sent, since no client waits for the replies.
    Cut,
}

/// Something for the owner.
#[derive(Debug, PartialEq, Eq)]
pub enum ServerEvent {
    /// A message to spool; then call [`HmtpServer::accepted`] or [`HmtpServer::rejected`].
    Message(IncomingMessage),
    /// A message already accepted within the de-duplication window: answered 250 and dropped.
    Duplicate {
        /// Its envelope.
        envelope: Envelope,
        /// Its de-duplication key.
        key: DedupKey,
    },
    /// The session is over (after its last transmission was queued).
    Closed(ServerEnd),
}

/// The server side of one HMTP session.
#[derive(Debug)]
pub struct HmtpServer<P> {
    settings: ServerSettings,
    policy: Option<P>,
    session: Option<ServerSession<P>>,
    mode: Option<ServeMode>,
    decoder: StreamDecoder,
    encoder: Option<StreamEncoder>,
    pending: Vec<u8>,
    started: Instant,
    events: VecDeque<ServerEvent>,
    transmissions: VecDeque<Vec<Vec<u8>>>,
    awaiting: Option<u64>,
    serial: u64,
    closed: bool,
    received: DirectionStats,
    sent: DirectionStats,
}

impl<P: Policy> HmtpServer<P> {
    /// A server for one session starting at `now`, deciding recipients with `policy`.
    pub fn new(mut settings: ServerSettings, policy: P, now: Instant) -> Result<Self, HmtpError> {
        check_mtu(settings.mtu)?;
        settings.smtp.send_greeting = false;
        settings.smtp.starttls = false;
        settings.smtp.auth = AuthMode::Disabled;
        Ok(Self {
            decoder: StreamDecoder::detect(settings.limits),
            settings,
            policy: Some(policy),
            session: None,
            mode: None,
            encoder: None,
            pending: Vec::new(),
            started: now,
            events: VecDeque::new(),
            transmissions: VecDeque::new(),
            awaiting: None,
            serial: 0,
            closed: false,
            received: DirectionStats::default(),
            sent: DirectionStats::default(),
        })
    }

    /// Consumes one U_PDU received at `now` (U_PDUs in order). The cut marker
    /// ([`crate::cut`]) ends the session there, with no replies.
    pub fn receive(&mut self, now: Instant, updu: &[u8], dedup: &mut DedupCache) {
        if crate::cut::is_marker(updu) {
            if !self.closed {
                self.transmissions.clear();
                self.close(ServerEnd::Cut);
            }
            return;
        }
        if self.closed {
            // Counted, not read: the session is over.
            self.received.count_received(updu.len(), 0);
            return;
        }
        if let Err(e) = self.decoder.feed(updu) {
            self.received.count_received(updu.len(), 0);
            self.close(ServerEnd::BadStream(e.to_string()));
            return;
        }
        let text = self.decoder.take_output();
        self.received.count_received(updu.len(), text.len());
        match &mut self.session {
            Some(session) => session.feed(now, &text),
            None => {
                self.pending.extend_from_slice(&text);
                if let Some(mode) = self.decide() {
                    self.start(now, mode);
                }
            }
        }
        self.pump(now, dedup);
    }

    /// The spool holds the message durably: say 250 and remember it for de-duplication.
    pub fn accepted(
        &mut self,
        ticket: SpoolTicket,
        queue_id: &str,
        now: Instant,
        dedup: &mut DedupCache,
    ) -> Result<(), HmtpError> {
        self.take_ticket(&ticket)?;
        dedup.insert(ticket.key, now);
        if let Some(s) = &mut self.session {
            s.message_accepted(queue_id)
                .map_err(|_| HmtpError::NoMessagePending)?;
        }
        self.pump(now, dedup);
        Ok(())
    }

    /// The message was not taken: answer `reply` (4xx or 5xx) and go on.
    pub fn rejected(
        &mut self,
        ticket: SpoolTicket,
        reply: Reply,
        now: Instant,
        dedup: &mut DedupCache,
    ) -> Result<(), HmtpError> {
        self.take_ticket(&ticket)?;
        if let Some(s) = &mut self.session {
            s.message_rejected(reply)
                .map_err(|_| HmtpError::NoMessagePending)?;
        }
        self.pump(now, dedup);
        Ok(())
    }

    /// The client is heard from at `now` though no octet of the session came (a resume
    /// marker, [`crate::resume`]): the session's timeouts run from here.
    pub fn touch(&mut self, now: Instant) {
        match &mut self.session {
            Some(s) => s.touch(now),
            None => self.started = now,
        }
    }

    /// The next deadline (idle or stalled-DATA timeout), if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        match &self.session {
            Some(s) => s.poll_timeout(),
            None => self.started.checked_add(self.settings.smtp.idle_timeout),
        }
    }

    /// Ends the session with `421 4.4.2` (sent in one transmission with every held reply) if its
    /// deadline has passed at `now`.
    pub fn handle_timeout(&mut self, now: Instant, dedup: &mut DedupCache) {
        if self.closed {
            return;
        }
        if self.session.is_none() {
            if self.poll_timeout().is_some_and(|d| now < d) {
                return;
            }
            self.start(now, ServeMode::Batch);
        }
        if let Some(s) = &mut self.session {
            s.handle_timeout(now);
        }
        self.pump(now, dedup);
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// The next transmission to send: U_PDUs of at most the MTU, in order.
    pub fn take_transmission(&mut self) -> Option<Vec<Vec<u8>>> {
        self.transmissions.pop_front()
    }

    /// The serving mode, once decided.
    pub fn mode(&self) -> Option<ServeMode> {
        self.mode
    }

    /// The scheme of the received stream, once its first byte arrived.
    pub fn stream_kind(&self) -> Option<StreamKind> {
        self.decoder.kind()
    }

    /// True once the session is over.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Counts of the received command stream.
    pub fn received_stats(&self) -> DirectionStats {
        self.received
    }

    /// Counts of the replies sent.
    pub fn sent_stats(&self) -> DirectionStats {
        self.sent
    }

    /// The owner's policy (e.g. for counters it keeps).
    pub fn policy(&self) -> Option<&P> {
        match &self.session {
            Some(s) => Some(s.policy()),
            None => self.policy.as_ref(),
        }
    }

    fn take_ticket(&mut self, ticket: &SpoolTicket) -> Result<(), HmtpError> {
        if self.awaiting != Some(ticket.serial) {
            return Err(HmtpError::NoMessagePending);
        }
        self.awaiting = None;
        Ok(())
    }

    /// Decides the serving mode from what has arrived before the session exists.
    fn decide(&self) -> Option<ServeMode> {
        if self.decoder.kind() != Some(StreamKind::Plain) {
            return self.decoder.kind().map(|_| ServeMode::Batch);
        }
        let Some(lf) = self.pending.iter().position(|&b| b == b'\n') else {
            return (self.pending.len() >= self.settings.smtp.max_command_line)
                .then_some(ServeMode::Batch);
        };
        let line = &self.pending[..lf];
        let verb = line.get(..4).unwrap_or(line);
        let greeting = verb.eq_ignore_ascii_case(b"EHLO") || verb.eq_ignore_ascii_case(b"HELO");
        if greeting && lf + 1 == self.pending.len() {
            Some(ServeMode::Standard)
        } else {
            Some(ServeMode::Batch)
        }
    }

    fn start(&mut self, now: Instant, mode: ServeMode) {
        let Some(policy) = self.policy.take() else {
            return;
        };
        let mut config = self.settings.smtp.clone();
        config.reply_buffering = mode == ServeMode::Batch;
        // Whatever the client: one that does not know the keyword ignores it.
        config.extra_ehlo.push(crate::cut::KEYWORD.to_owned());
        if self.settings.resume {
            config.extra_ehlo.push(crate::resume::KEYWORD.to_owned());
        }
        // A deflate stream comes from a skywave peer: tell it which preset dictionaries this
        // server decodes, so that its next session can use one (see `crate::stream`).
        if self.decoder.kind() == Some(StreamKind::Zlib) {
            config.extra_ehlo.push(crate::stream::xdict_keyword());
        }
        let mut session = ServerSession::new(config, policy, now);
        let pending = std::mem::take(&mut self.pending);
        session.feed(now, &pending);
        self.session = Some(session);
        self.mode = Some(mode);
    }

    /// Handles the session's events and output.
    fn pump(&mut self, now: Instant, dedup: &mut DedupCache) {
        let Some(session) = &mut self.session else {
            return;
        };
        let mut ended = None;
        // Bounded: every event is consumed, and a duplicate's completion only processes input
        // already buffered.
        while let Some(event) = session.poll_event() {
            match event {
                Event::Message { envelope, body } => {
                    self.decoder.start_message();
                    let key = DedupKey::new(&envelope.reverse_path, &envelope.recipients, &body);
                    if dedup.check(&key, now) {
                        let _ = session.message_rejected(Reply::new(
                            250,
                            EnhancedCode::new(2, 0, 0),
                            "Ok: already accepted (duplicate dropped)",
                        ));
                        self.events
                            .push_back(ServerEvent::Duplicate { envelope, key });
                    } else {
                        self.serial += 1;
                        self.awaiting = Some(self.serial);
                        self.events.push_back(ServerEvent::Message(IncomingMessage {
                            envelope,
                            body,
                            ticket: SpoolTicket {
                                serial: self.serial,
                                key,
                            },
                        }));
                    }
                }
                Event::Close(reason) => ended = Some(reason),
                Event::StartTls | Event::Authenticated { .. } => {}
            }
        }
        let output = session.take_output();
        let quiet = self.settings.quiet_timeout
            && matches!(
                ended,
                Some(CloseReason::IdleTimeout | CloseReason::DataTimeout)
            );
        if !output.is_empty() && !quiet {
            match self.encode(&output) {
                Ok(updus) => {
                    self.sent.count_transmission(output.len(), &updus);
                    self.transmissions.push_back(updus);
                }
                Err(e) => {
                    self.close(ServerEnd::BadStream(e.to_string()));
                    return;
                }
            }
        }
        if let Some(reason) = ended {
            self.close(ServerEnd::Session(reason));
        }
    }

    /// Ends the session for `end`: nothing more is read (text held before the session began
    /// is dropped) and the owner is told why.
    fn close(&mut self, end: ServerEnd) {
        self.closed = true;
        self.pending.clear();
        self.events.push_back(ServerEvent::Closed(end));
    }

    /// Compresses `text` in the stream's scheme and cuts it into U_PDUs.
    fn encode(&mut self, text: &[u8]) -> Result<Vec<Vec<u8>>, HmtpError> {
        if self.encoder.is_none() {
            let encoder = match self.decoder.kind() {
                Some(StreamKind::Lzw) => {
                    let bits = self.decoder.lzw_maxbits().unwrap_or(16);
                    StreamEncoder::for_scheme(Scheme::Lzw(bits))?
                }
                // Replies use the dictionary the client chose: it certainly has it.
                Some(StreamKind::Zlib) => match self.decoder.dictionary() {
                    Some(id) => StreamEncoder::deflate_with_dictionary(id)?,
                    None => StreamEncoder::for_scheme(Scheme::Deflate)?,
                },
                Some(StreamKind::Plain) | None => StreamEncoder::Plain(Vec::new()),
            };
            self.encoder = Some(encoder);
        }
        let Some(encoder) = &mut self.encoder else {
            return Ok(Vec::new());
        };
        encoder.push(text)?;
        encoder.flush()?;
        let wire = encoder.take_output();
        Ok(cut_compressed(&wire, self.settings.mtu))
    }
}
