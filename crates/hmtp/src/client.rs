//! The HMTP client: one session delivers one batch of spooled messages to one peer in one
//! submission (STANAG 5066 Annex F, HMTP-66 style).
//!
//! Sits between the gateway's per-peer scheduler (which picks the batch with [`select_batch`]
//! and maps outcomes back to the spool by message id) and the SIS bearer on SAP 3. Internally it
//! drives the smtp crate's [`ClientSession`] in [`ClientMode::Batch`]: EHLO, then per message
//! MAIL, RCPT..., DATA, the dot-stuffed text and ".", then QUIT, all without waiting. Towards a
//! skywave peer the stream is compressed from its first byte (LZW or deflate) and the compressor
//! is flushed at the end of the submission so the receiver can decode all of it; towards any other
//! peer the bytes are exactly standard pipelined SMTP. The replies come back in the same scheme.
//!
//! Sans-IO: [`HmtpClient::transmission`] gives the U_PDUs, [`HmtpClient::receive`] takes the
//! reply U_PDUs in order, and the owner signals the end of the link or its own timeout with
//! [`HmtpClient::close`]. Once finished, [`HmtpClient::outcome`] says what became of every
//! recipient.

use skywave_compress::{Limits, Scheme, StreamDecoder, StreamEncoder};
use skywave_smtp::{
    ClientConfig, ClientError, ClientEvent, ClientMode, ClientSession, MailDsn, OutgoingMessage,
    RcptDsn, RecipientStatus, Reply,
};

use crate::error::HmtpError;
use crate::stream::{Compression, DirectionStats, check_mtu, cut, cut_compressed};

/// One spooled message in a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchMessage {
    /// The caller's id (the spool queue id), handed back in the outcome.
    pub id: String,
    /// The reverse path without angle brackets (empty for `<>`).
    pub reverse_path: String,
    /// The recipients without angle brackets.
    pub recipients: Vec<String>,
    /// The message with CRLF line ends, not dot-stuffed.
    pub body: Vec<u8>,
    /// The message has 8-bit content: `BODY=8BITMIME` is sent, or, towards a peer known not to
    /// offer 8BITMIME ([`ClientSettings::eight_bit_mime`]), the text is made 7-bit first.
    pub eight_bit: bool,
    /// Its DSN parameters (sent when [`ClientSettings::dsn`]).
    pub dsn: MailDsn,
    /// Each recipient's DSN parameters, in the order of `recipients`; empty when none.
    pub rcpt_dsn: Vec<RcptDsn>,
}

impl BatchMessage {
    /// Bytes the message takes in a submission, roughly (text plus envelope commands), for the
    /// batch budget.
    pub fn wire_size(&self) -> usize {
        let envelope: usize = self.recipients.iter().map(|r| r.len() + 12).sum();
        self.body.len() + self.reverse_path.len() + envelope + 32
    }
}

/// Takes messages from the front of `messages` (ordered by priority, highest first) while their
/// total size stays within `budget` bytes, always at least one: the number taken. A long
/// routine batch is thereby cut short so that a high-priority message queued next never waits
/// behind it for more than one budget's worth of air time.
pub fn select_batch<T>(messages: &[T], budget: usize, size: impl Fn(&T) -> usize) -> usize {
    let mut total = 0usize;
    let mut taken = 0usize;
    for m in messages {
        let s = size(m);
        if taken > 0 && total.saturating_add(s) > budget {
            break;
        }
        total = total.saturating_add(s);
        taken += 1;
    }
    taken
}

/// Client settings for one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSettings {
    /// Our host name, sent in EHLO.
    pub hostname: String,
    /// The SIS MTU: no U_PDU is longer.
    pub mtu: usize,
    /// Compression towards this peer (plain for every non-skywave peer).
    pub compression: Compression,
    /// Caps on the decompressed reply stream.
    pub limits: Limits,
    /// With [`Compression::Deflate`]: start the stream from this preset dictionary (an id the
    /// peer advertised in `XDICT`; see [`crate::stream`]). Ignored for other schemes.
    pub dictionary: Option<u32>,
    /// The peer offered `DSN` in its last EHLO reply: the messages' DSN parameters are sent,
    /// and its server reports as they ask. A batch goes before any reply, so this is what the
    /// peer said last time; without it the gateway reports success itself (`relayed`).
    pub dsn: bool,
    /// The peer offered `8BITMIME` in its last EHLO reply, or nothing is known of it yet
    /// (Annex F asks both sides that they should implement it): 8-bit messages go with
    /// `BODY=8BITMIME`. False: they are made 7-bit first (quoted-printable or base64, the smtp
    /// crate's `downgrade`), as RFC 6152 asks; one that cannot be converted goes as it is,
    /// without the parameter.
    pub eight_bit_mime: bool,
    /// What the peer's last EHLO reply said of `SMTPUTF8`, for a peer other than a skywave
    /// gateway: `Some(true)`, messages with UTF-8 header fields go with the `SMTPUTF8`
    /// parameter; `Some(false)`, their header fields go made ASCII (RFC 6857's downgrade, the
    /// smtp crate's `downgrade::ascii_headers`). `None` (a skywave peer, whose server takes
    /// UTF-8 header fields as they are and does not advertise it, or a peer not heard yet):
    /// they go as they are, without the parameter.
    pub smtputf8: Option<bool>,
}

impl ClientSettings {
    /// Settings with default decompression limits, no DSN, 8BITMIME assumed.
    pub fn new(hostname: impl Into<String>, mtu: usize, compression: Compression) -> Self {
        Self {
            hostname: hostname.into(),
            mtu,
            compression,
            limits: Limits::default(),
            dictionary: None,
            dsn: false,
            eight_bit_mime: true,
            smtputf8: None,
        }
    }
}

/// What became of one recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// The peer took responsibility (2xx after the text).
    Delivered(Reply),
    /// A 4xx (including a 421 that ended the session): keep queued, retry later.
    Deferred(Reply),
    /// A 5xx: do not retry as is (bounce).
    Failed(Reply),
    /// The session ended with no deciding reply (link lost, timeout, corrupt reply stream): the
    /// peer may or may not have the message; keep it queued and retry (the receiver removes
    /// duplicates).
    NoAnswer,
}

impl Disposition {
    /// True when the message must stay queued for this recipient.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Disposition::Deferred(_) | Disposition::NoAnswer)
    }
}

/// The outcome for one message of the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageResult {
    /// The caller's id from [`BatchMessage::id`].
    pub id: String,
    /// Per recipient, in the order given.
    pub recipients: Vec<(String, Disposition)>,
}

/// How the session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEnd {
    /// The 221 arrived.
    Completed,
    /// The peer closed the session with 421.
    ServiceClosing(Reply),
    /// The owner signalled the end of the link or a timeout before the 221.
    Closed,
    /// The reply stream could not be decoded or parsed.
    BadReplies(String),
}

/// Everything the session produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Per message, in batch order.
    pub messages: Vec<MessageResult>,
    /// How the session ended.
    pub end: SessionEnd,
    /// Bytes and U_PDUs of the submission.
    pub sent: DirectionStats,
    /// Bytes and U_PDUs of the replies.
    pub received: DirectionStats,
    /// The preset dictionaries the peer advertised (`XDICT` in its EHLO reply); empty when it
    /// advertised none or the reply did not arrive.
    pub peer_dictionaries: Vec<u32>,
    /// Whether the peer advertised `XCUT` in its EHLO reply, `None` when no EHLO reply was
    /// read (what the peer can do is then not known): after a cut, its server gives the
    /// session up at the marker ([`crate::cut`]).
    pub peer_cuts: Option<bool>,
    /// Whether the peer advertised `XRESUME` in its EHLO reply, `None` when no EHLO reply was
    /// read: after a cut, its server goes on with the session from where its node had it
    /// ([`crate::resume`]).
    pub peer_resumes: Option<bool>,
    /// Whether the peer advertised `DSN` in its EHLO reply, `None` when no EHLO reply was
    /// read.
    pub peer_dsn: Option<bool>,
    /// Whether the peer advertised `8BITMIME` in its EHLO reply, `None` when no EHLO reply
    /// was read.
    pub peer_eight_bit_mime: Option<bool>,
    /// Whether the peer advertised `SMTPUTF8` in its EHLO reply, `None` when no EHLO reply
    /// was read.
    pub peer_smtputf8: Option<bool>,
    /// Whole reply streams read and set aside because their closing reply (221 or 421) did not
    /// name a checksum of this session's octets (`XSUM`): late replies to an earlier session.
    pub stale_reply_streams: usize,
}

/// The client side of one HMTP session (one batch).
#[derive(Debug)]
pub struct HmtpClient {
    settings: ClientSettings,
    ids: Vec<String>,
    recipients: Vec<Vec<String>>,
    /// Per message: `BODY=8BITMIME` went with it.
    body_8bitmime: Vec<bool>,
    session: ClientSession,
    decoder: StreamDecoder,
    submission: Option<Vec<Vec<u8>>>,
    results: Vec<Option<MessageResult>>,
    outcome: Option<BatchOutcome>,
    sent: DirectionStats,
    received: DirectionStats,
    stale_reply_streams: usize,
}

impl HmtpClient {
    /// Prepares a session delivering `messages` (one submission). Fails on an empty batch, an
    /// MTU under [`crate::stream::MIN_MTU`], a bad LZW width, or an address that cannot be sent.
    pub fn new(settings: ClientSettings, messages: Vec<BatchMessage>) -> Result<Self, HmtpError> {
        check_mtu(settings.mtu)?;
        if messages.is_empty() {
            return Err(HmtpError::EmptyBatch);
        }
        let scheme = settings.compression.scheme()?;
        let mut config = ClientConfig::new(settings.hostname.clone(), ClientMode::Batch);
        config.expect_greeting = false;
        config.batch_extensions.dsn = settings.dsn;
        config.batch_extensions.eight_bit_mime = settings.eight_bit_mime;
        config.batch_extensions.smtputf8 = settings.smtputf8 == Some(true);
        config.batch_utf8_headers = settings.smtputf8 != Some(false);
        let ids = messages.iter().map(|m| m.id.clone()).collect();
        let body_8bitmime = messages
            .iter()
            .map(|m| m.eight_bit && settings.eight_bit_mime)
            .collect();
        let recipients = messages.iter().map(|m| m.recipients.clone()).collect();
        let outgoing = messages
            .into_iter()
            .map(|m| OutgoingMessage {
                reverse_path: m.reverse_path,
                recipients: m.recipients,
                body: m.body,
                eight_bit: m.eight_bit,
                mt_priority: None,
                dsn: m.dsn,
                rcpt_dsn: m.rcpt_dsn,
            })
            .collect::<Vec<_>>();
        let count = outgoing.len();
        let mut session = ClientSession::new(config, outgoing)?;
        let plain = session.take_output();
        let updus = match scheme {
            None => {
                // A plain stream cut right after the EHLO line would read, to our own server,
                // as a standard client waiting for the EHLO reply: never cut there.
                let ehlo_end = plain.iter().position(|&b| b == b'\n').map(|p| p as u64 + 1);
                cut(&plain, settings.mtu, 0, ehlo_end)
            }
            Some(scheme) => {
                let mut encoder = match (scheme, settings.dictionary) {
                    (Scheme::Deflate, Some(id)) => StreamEncoder::deflate_with_dictionary(id)?,
                    _ => StreamEncoder::for_scheme(scheme)?,
                };
                encoder.push(&plain)?;
                encoder.flush()?;
                cut_compressed(&encoder.take_output(), settings.mtu)
            }
        };
        let mut sent = DirectionStats::default();
        sent.count_transmission(plain.len(), &updus);
        Ok(Self {
            decoder: StreamDecoder::expecting(settings.compression.stream_kind(), settings.limits),
            settings,
            ids,
            recipients,
            body_8bitmime,
            session,
            submission: Some(updus),
            results: vec![None; count],
            outcome: None,
            sent,
            received: DirectionStats::default(),
            stale_reply_streams: 0,
        })
    }

    /// The whole submission as U_PDUs of at most the MTU, to be sent in order as one
    /// transmission. Given once; later calls return nothing.
    pub fn transmission(&mut self) -> Vec<Vec<u8>> {
        self.submission.take().unwrap_or_default()
    }

    /// The settings.
    pub fn settings(&self) -> &ClientSettings {
        &self.settings
    }

    /// Whether message `index` of the batch went with `BODY=8BITMIME`: a refusal from a peer
    /// that no longer offers 8BITMIME may be of the parameter, not of the mail.
    pub fn sent_8bitmime(&self, index: usize) -> bool {
        self.body_8bitmime.get(index).copied().unwrap_or(false)
    }

    /// Consumes one reply U_PDU (in order).
    pub fn receive(&mut self, updu: &[u8]) {
        if self.outcome.is_some() {
            return;
        }
        if let Err(e) = self.decoder.feed(updu) {
            self.received.count_received(updu.len(), 0);
            self.session.connection_closed();
            self.collect(Some(SessionEnd::BadReplies(e.to_string())));
            return;
        }
        let text = self.decoder.take_output();
        self.received.count_received(updu.len(), text.len());
        self.session.feed(&text);
        self.collect(None);
    }

    /// The link ended or the owner's reply timeout expired: whatever has no deciding reply
    /// becomes [`Disposition::NoAnswer`].
    pub fn close(&mut self) {
        if self.outcome.is_some() {
            return;
        }
        self.session.connection_closed();
        self.collect(Some(SessionEnd::Closed));
    }

    /// This session goes on with one a lost link cut short ([`crate::resume`]): a `421` read
    /// from now on was said to the cut one, by a server that gave it up, and is set aside;
    /// only the `221` of the whole session proves the replies ours.
    pub fn going_on(&mut self) {
        self.session.whole_session_only();
    }

    /// Reply streams set aside so far as answers to another session (see
    /// [`BatchOutcome::stale_reply_streams`]). After one, the next U_PDU starts a new stream.
    pub fn stale_reply_streams(&self) -> usize {
        self.stale_reply_streams
    }

    /// True once the session is over.
    pub fn is_finished(&self) -> bool {
        self.outcome.is_some()
    }

    /// The outcome, once finished.
    pub fn outcome(&self) -> Option<&BatchOutcome> {
        self.outcome.as_ref()
    }

    fn collect(&mut self, forced_end: Option<SessionEnd>) {
        let mut end = None;
        while let Some(event) = self.session.poll_event() {
            match event {
                ClientEvent::Message(m) => {
                    let Some(id) = self.ids.get(m.index) else {
                        continue;
                    };
                    let recipients = m
                        .recipients
                        .into_iter()
                        .map(|r| (r.address, disposition(r.status)))
                        .collect();
                    if let Some(slot) = self.results.get_mut(m.index) {
                        *slot = Some(MessageResult {
                            id: id.clone(),
                            recipients,
                        });
                    }
                }
                ClientEvent::Finished {
                    error: Some(stale @ ClientError::StaleReplies { .. }),
                } => {
                    // A whole stream answering another session's bytes (its data reached the
                    // peer after that session had ended here): set it aside and wait for ours,
                    // which starts a new stream. Forgets the replies read, clears the events.
                    tracing::info!(%stale, "HMTP replies set aside");
                    self.stale_reply_streams += 1;
                    self.session.expect_replies_again();
                    self.decoder = StreamDecoder::expecting(
                        self.settings.compression.stream_kind(),
                        self.settings.limits,
                    );
                    self.results = vec![None; self.ids.len()];
                }
                ClientEvent::Finished { error } => {
                    end = Some(match error {
                        None => SessionEnd::Completed,
                        Some(ClientError::ServiceClosing(r)) => SessionEnd::ServiceClosing(r),
                        Some(ClientError::ConnectionClosed) => SessionEnd::Closed,
                        Some(e) => SessionEnd::BadReplies(e.to_string()),
                    });
                }
            }
        }
        let end = match (forced_end, end) {
            (Some(SessionEnd::BadReplies(e)), _) => Some(SessionEnd::BadReplies(e)),
            (_, Some(end)) => Some(end),
            (forced, None) => forced,
        };
        if let Some(end) = end {
            // Replies from a peer with XSUM count only once its 221 proved them ours.
            let fill = (!self.session.replies_verified()).then_some(Disposition::NoAnswer);
            self.finish(end, fill);
        }
    }

    fn finish(&mut self, end: SessionEnd, all: Option<Disposition>) {
        let messages = (0..self.ids.len())
            .map(|i| {
                let result = self.results.get_mut(i).and_then(Option::take);
                match (result, &all) {
                    (Some(r), None) => r,
                    (_, fill) => {
                        let d = fill.clone().unwrap_or(Disposition::NoAnswer);
                        MessageResult {
                            id: self.ids[i].clone(),
                            recipients: self.recipients[i]
                                .iter()
                                .map(|r| (r.clone(), d.clone()))
                                .collect(),
                        }
                    }
                }
            })
            .collect();
        self.outcome = Some(BatchOutcome {
            messages,
            end,
            sent: self.sent,
            received: self.received,
            peer_dictionaries: self
                .session
                .server_extensions()
                .map(|e| e.dictionaries.clone())
                .unwrap_or_default(),
            peer_cuts: self.session.server_extensions().map(|e| e.session_cut),
            peer_resumes: self.session.server_extensions().map(|e| e.session_resume),
            peer_dsn: self.session.server_extensions().map(|e| e.dsn),
            peer_eight_bit_mime: self.session.server_extensions().map(|e| e.eight_bit_mime),
            peer_smtputf8: self.session.server_extensions().map(|e| e.smtputf8),
            stale_reply_streams: self.stale_reply_streams,
        });
    }
}

fn disposition(status: RecipientStatus) -> Disposition {
    match status {
        RecipientStatus::Delivered(r) => Disposition::Delivered(r),
        RecipientStatus::Deferred(r) => Disposition::Deferred(r),
        RecipientStatus::Failed(r) => Disposition::Failed(r),
        RecipientStatus::Unknown => Disposition::NoAnswer,
    }
}
