//! The sans-IO SMTP client session: delivers a list of messages to one server.
//!
//! Used for the SMTP-over-TCP bearer, the benchmarks' SMTP stacks and, in [`ClientMode::Batch`],
//! as the HMTP client. The owner writes [`ClientSession::take_output`] to the server, feeds the
//! server's bytes to [`ClientSession::feed`] and collects a [`MessageOutcome`] per message from
//! [`ClientSession::poll_event`]. Read timeouts are the owner's (it knows its link); when the
//! connection ends, it calls [`ClientSession::connection_closed`].
//!
//! Modes:
//! - [`ClientMode::Lockstep`]: one command, one reply (RFC 5321).
//! - [`ClientMode::Pipelining`]: RFC 2920 when the server advertises PIPELINING (lockstep
//!   otherwise): after EHLO, MAIL, every RCPT and DATA go as one group; the text goes after the
//!   354; a failed DATA is followed by RSET.
//! - [`ClientMode::Batch`]: everything at once without waiting for anything: EHLO, then for each
//!   message MAIL, RCPT..., DATA, the dot-stuffed text and ".", then QUIT (HMTP, STANAG 5066
//!   Annex F). Replies are then matched in order; when a DATA is refused, the server has
//!   discarded the text (HMTP rule), so no reply for it is expected.
//!
//!
//! # XLZW (JNOS LZW compression)
//! With [`ClientConfig::xlzw`] set (and a mode other than [`ClientMode::Batch`]), the client
//! does what a JNOS client does: after the 220 greeting it sends `XLZW <bits> 0` and waits for
//! the one-line reply. A 2xx switches both directions to LZW (at our bits when the reply echoes
//! them, else at 9 bits, compact, as JNOS falls back), forces JNOS batching and goes on with
//! HELO, not EHLO: HELO, MAIL, every RCPT and DATA go as one burst; the text follows the 354; the
//! next message's MAIL, RCPTs and DATA follow its final reply; QUIT is sent without waiting for
//! the 221 (the session finishes at once). Any other reply means "not supported": the session
//! goes on uncompressed with EHLO. The compression is inside the session: [`ClientSession::feed`]
//! takes wire bytes and [`ClientSession::take_output`] returns wire bytes; every burst ends with
//! an encoder flush, as JNOS flushes before each read of a reply.

use std::collections::VecDeque;

use skywave_compress::lzw::clamp_maxbits;
use skywave_compress::{DecompressError, Limits, LzwSession};
use thiserror::Error;

use crate::data::dot_stuff;
use crate::dsn::{MailDsn, RcptDsn};
use crate::reply::{Reply, ReplyError, ReplyParser};
use crate::sum;

/// How the client sends its commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientMode {
    /// Wait for each reply before the next command.
    Lockstep,
    /// RFC 2920 command groups when the server offers PIPELINING.
    Pipelining,
    /// The whole session in one transmission (HMTP).
    Batch,
}

/// Service extensions, as advertised by the server or as assumed in batch mode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Extensions {
    /// PIPELINING (RFC 2920).
    pub pipelining: bool,
    /// SIZE (RFC 1870), with the advertised limit if any (0 means no limit given).
    pub size: Option<u64>,
    /// 8BITMIME (RFC 6152).
    pub eight_bit_mime: bool,
    /// MT-PRIORITY (RFC 6710).
    pub mt_priority: bool,
    /// STARTTLS (RFC 3207); reported only, the client does not start TLS itself.
    pub starttls: bool,
    /// SMTPUTF8 (RFC 6531): sent on MAIL for a message that needs it
    /// ([`crate::downgrade::needs_smtputf8`]).
    pub smtputf8: bool,
    /// DSN (RFC 3461): the messages' `RET`, `ENVID`, `NOTIFY` and `ORCPT` are sent on.
    pub dsn: bool,
    /// skywave's `XDICT id...`: the preset deflate dictionaries (RFC 1950 DICTIDs, hex) the
    /// server can decode, so that the next session may use one (see the hmtp crate).
    pub dictionaries: Vec<u32>,
    /// skywave's `XSUM`: the reply that closes the session (221 or 421) names how many octets
    /// of it the server read and their checksum (see [`crate::sum`]).
    pub session_sum: bool,
    /// skywave's `XCUT` ([`CUT_KEYWORD`]): the server gives up a session of ours cut short by a
    /// lost link when the next one starts with the cut marker (see the hmtp crate's `cut`).
    pub session_cut: bool,
    /// skywave's `XRESUME` ([`RESUME_KEYWORD`]): the server goes on with a session of ours cut
    /// short by a lost link from where its node had it, when the next one starts with the
    /// resume marker (see the hmtp crate's `resume`).
    pub session_resume: bool,
}

/// The EHLO keyword of skywave's `XCUT`; the hmtp crate's `cut`, which gives it its meaning,
/// advertises this one.
pub const CUT_KEYWORD: &str = "XCUT";

/// The EHLO keyword of skywave's `XRESUME`; the hmtp crate's `resume` gives it its meaning.
pub const RESUME_KEYWORD: &str = "XRESUME";

impl Extensions {
    /// Reads the keywords from the lines of a 250 reply to EHLO (the first line is the greeting).
    pub fn from_ehlo(reply: &Reply) -> Self {
        let mut ext = Self::default();
        for line in reply.lines.iter().skip(1) {
            let mut words = line.split_ascii_whitespace();
            let keyword = words.next().unwrap_or("").to_ascii_uppercase();
            match keyword.as_str() {
                "PIPELINING" => ext.pipelining = true,
                "SIZE" => ext.size = Some(words.next().and_then(|w| w.parse().ok()).unwrap_or(0)),
                "8BITMIME" => ext.eight_bit_mime = true,
                "MT-PRIORITY" => ext.mt_priority = true,
                "STARTTLS" => ext.starttls = true,
                "SMTPUTF8" => ext.smtputf8 = true,
                "DSN" => ext.dsn = true,
                sum::KEYWORD => ext.session_sum = true,
                CUT_KEYWORD => ext.session_cut = true,
                RESUME_KEYWORD => ext.session_resume = true,
                "XDICT" => ext.dictionaries.extend(
                    words
                        .take(16)
                        .filter_map(|w| u32::from_str_radix(w, 16).ok()),
                ),
                _ => {}
            }
        }
        ext
    }
}

/// Configuration of a client session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// The name we give in EHLO/HELO.
    pub helo_name: String,
    /// How commands are sent.
    pub mode: ClientMode,
    /// Wait for (and expect) a 220 greeting first. False for HMTP, where there is none.
    pub expect_greeting: bool,
    /// In batch mode there is no EHLO reply to read before sending: the extensions used.
    pub batch_extensions: Extensions,
    /// Longest reply line accepted, in octets.
    pub max_reply_line: usize,
    /// Most lines in one reply.
    pub max_reply_lines: usize,
    /// Offer JNOS LZW compression with this many bits (9..=16; other values are clamped as JNOS
    /// does) and mode 0 (compact). None: plain SMTP. Ignored in [`ClientMode::Batch`].
    pub xlzw: Option<u8>,
    /// In batch mode, with `SMTPUTF8` not among the assumed extensions: whether UTF-8 header
    /// fields still go as they are (true: a skywave peer takes them, and so may a peer not
    /// heard from yet) or made ASCII (false: the peer's last EHLO reply lacked `SMTPUTF8`).
    /// Without batch mode the server's own EHLO reply decides.
    pub batch_utf8_headers: bool,
}

impl ClientConfig {
    /// A configuration with a greeting, 4096-octet reply lines, 256 lines per reply, in batch
    /// mode only 8BITMIME assumed, and no XLZW.
    pub fn new(helo_name: impl Into<String>, mode: ClientMode) -> Self {
        Self {
            helo_name: helo_name.into(),
            mode,
            expect_greeting: true,
            batch_extensions: Extensions {
                eight_bit_mime: true,
                ..Extensions::default()
            },
            max_reply_line: 4096,
            max_reply_lines: 256,
            xlzw: None,
            batch_utf8_headers: true,
        }
    }
}

/// A message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingMessage {
    /// The reverse path without angle brackets (empty for `<>`).
    pub reverse_path: String,
    /// The recipients without angle brackets.
    pub recipients: Vec<String>,
    /// The message with CRLF line ends, not dot-stuffed.
    pub body: Vec<u8>,
    /// Send `BODY=8BITMIME` (when the server offers it).
    pub eight_bit: bool,
    /// Send `MT-PRIORITY=` (when the server offers it).
    pub mt_priority: Option<i8>,
    /// The DSN parameters of MAIL (sent when the server offers DSN).
    pub dsn: MailDsn,
    /// The DSN parameters of each recipient, in the order of `recipients`, sent when the server
    /// offers DSN; empty when there are none.
    pub rcpt_dsn: Vec<RcptDsn>,
}

/// What happened to one recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecipientStatus {
    /// The server took responsibility (2xx after the text).
    Delivered(Reply),
    /// A 4xx: try again later.
    Deferred(Reply),
    /// A 5xx (or an unexpected reply): do not retry as is.
    Failed(Reply),
    /// No deciding reply arrived (the connection ended). The server may or may not have the
    /// message; retrying is safe when the receiver removes duplicates.
    Unknown,
}

/// The result for one recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipientOutcome {
    /// The recipient address.
    pub address: String,
    /// Its status.
    pub status: RecipientStatus,
}

/// The result for one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageOutcome {
    /// Index of the message in the list given to [`ClientSession::new`].
    pub index: usize,
    /// The reply to MAIL, if received.
    pub mail_reply: Option<Reply>,
    /// The reply to DATA, if received.
    pub data_reply: Option<Reply>,
    /// The reply after the final dot, if received.
    pub final_reply: Option<Reply>,
    /// Per-recipient results, in the order given.
    pub recipients: Vec<RecipientOutcome>,
}

/// Why a client session ended abnormally.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClientError {
    /// The server's bytes were not a valid reply.
    #[error("invalid reply from server: {0}")]
    BadReply(#[from] ReplyError),
    /// A reply arrived when none was expected.
    #[error("unexpected reply from server: {0}")]
    UnexpectedReply(Reply),
    /// The greeting was not 220, or HELO was refused.
    #[error("server refused the session: {0}")]
    Refused(Reply),
    /// The server closed the session with 421.
    #[error("server is closing the session: {0}")]
    ServiceClosing(Reply),
    /// The connection ended before the session was complete.
    #[error("connection closed before the session was complete")]
    ConnectionClosed,
    /// An address would break the command syntax (control characters, spaces, angle brackets).
    #[error("address {0:?} cannot be sent in an SMTP command")]
    BadAddress(String),
    /// The server's XLZW-compressed stream could not be decoded.
    #[error("compressed reply stream from server cannot be decoded: {0}")]
    Compression(#[from] DecompressError),
    /// Batch mode, a server with `XSUM`: the reply that closed the session names no sum, or
    /// not the sum of as many of our first octets, so these replies answer another session
    /// (see [`crate::sum`]).
    #[error(
        "the replies answer another session: the closing {code} names {}, not a sum of this session's first octets",
        named.map_or_else(|| "no XSUM".to_owned(), |(n, s)| format!("XSUM={n}:{s:016x}"))
    )]
    StaleReplies {
        /// The closing reply's code.
        code: u16,
        /// The (octets, sum) it named, if any.
        named: Option<(u64, u64)>,
    },
}

/// Something for the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientEvent {
    /// One message is finished (successfully or not).
    Message(MessageOutcome),
    /// The session is over; close the connection once the output is written.
    Finished {
        /// None after a normal QUIT; otherwise what went wrong.
        error: Option<ClientError>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Greeting,
    Xlzw(u8),
    Ehlo,
    Helo,
    Mail(usize),
    Rcpt(usize, usize),
    Data(usize),
    Dot(usize),
    Rset,
    Quit,
}

#[derive(Debug, Default)]
struct Progress {
    mail: Option<Reply>,
    rcpt: Vec<Option<Reply>>,
    data: Option<Reply>,
    dot: Option<Reply>,
    done: bool,
}

/// The client side of one SMTP (or HMTP) session.
#[derive(Debug)]
pub struct ClientSession {
    config: ClientConfig,
    messages: Vec<OutgoingMessage>,
    progress: Vec<Progress>,
    parser: ReplyParser,
    expect: VecDeque<Expect>,
    /// Commands and text not yet encoded (plain).
    output: Vec<u8>,
    /// Bytes ready for the wire.
    wire: Vec<u8>,
    /// Both LZW directions once XLZW was accepted.
    lzw: Option<LzwSession>,
    /// XLZW was accepted by the reply just handled: the rest of the input is compressed.
    lzw_started_now: bool,
    /// JNOS batching (after XLZW): HELO and the first message's commands went as one burst.
    jnos: bool,
    helo_group_sent: bool,
    plain_written: u64,
    plain_read: u64,
    events: VecDeque<ClientEvent>,
    extensions: Option<Extensions>,
    pipelining: bool,
    next_message: usize,
    finished: bool,
    /// Batch mode: every octet written, before compression (for `XSUM`).
    sent: Vec<u8>,
    /// The closing reply named the sum of our first octets.
    sum_matched: bool,
    /// Only a `221` closing the whole session proves the replies ours
    /// ([`ClientSession::whole_session_only`]).
    whole_only: bool,
}

impl ClientSession {
    /// Starts a session. In batch mode the whole transmission is queued at once; otherwise only
    /// EHLO is (or nothing, while the greeting is awaited).
    pub fn new(config: ClientConfig, messages: Vec<OutgoingMessage>) -> Result<Self, ClientError> {
        for m in &messages {
            for addr in std::iter::once(&m.reverse_path).chain(&m.recipients) {
                if addr
                    .bytes()
                    .any(|b| b <= b' ' || b == b'<' || b == b'>' || b == 0x7f)
                {
                    return Err(ClientError::BadAddress(addr.clone()));
                }
            }
            if m.recipients.is_empty() {
                return Err(ClientError::BadAddress(String::new()));
            }
        }
        if config.helo_name.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(ClientError::BadAddress(config.helo_name.clone()));
        }
        let progress = messages
            .iter()
            .map(|m| Progress {
                rcpt: vec![None; m.recipients.len()],
                ..Progress::default()
            })
            .collect();
        let mut session = Self {
            parser: ReplyParser::new(config.max_reply_line, config.max_reply_lines),
            pipelining: config.mode == ClientMode::Pipelining,
            config,
            messages,
            progress,
            expect: VecDeque::new(),
            output: Vec::new(),
            wire: Vec::new(),
            lzw: None,
            lzw_started_now: false,
            jnos: false,
            helo_group_sent: false,
            plain_written: 0,
            plain_read: 0,
            events: VecDeque::new(),
            extensions: None,
            next_message: 0,
            finished: false,
            sent: Vec::new(),
            sum_matched: false,
            whole_only: false,
        };
        if session.config.expect_greeting {
            session.expect.push_back(Expect::Greeting);
        }
        if session.config.mode == ClientMode::Batch {
            session.queue_batch();
        } else if !session.config.expect_greeting {
            session.open();
        }
        Ok(session)
    }

    /// The LZW bits in use once XLZW was accepted (ours, or 9 after a differing echo); None while
    /// the session is uncompressed.
    pub fn compression(&self) -> Option<u8> {
        self.lzw.as_ref().map(|l| l.encoder.header_maxbits())
    }

    /// Octets of commands and text produced so far, before compression (with XLZW off, the
    /// same as the wire octets taken).
    pub fn plain_bytes_written(&self) -> u64 {
        self.plain_written
    }

    /// Octets of reply text received so far, after decompression.
    pub fn plain_bytes_read(&self) -> u64 {
        self.plain_read
    }

    /// The extensions the server advertised in its EHLO reply, once known.
    pub fn server_extensions(&self) -> Option<&Extensions> {
        self.extensions.as_ref()
    }

    /// Whether the replies read can be taken as answers to this session. Always true outside
    /// batch mode (one connection carries one session) and with a server that did not advertise
    /// `XSUM` (position is all there is); otherwise true only once the reply that closed the
    /// session (221 or 421) named the sum of this session's first octets (see [`crate::sum`]).
    pub fn replies_verified(&self) -> bool {
        !self.sum_expected() || self.sum_matched
    }

    /// Batch mode, after [`ClientError::StaleReplies`]: forgets every reply read and waits for a
    /// reply stream from its beginning again (the one to this session may still come). Sends
    /// nothing. Does nothing outside batch mode.
    pub fn expect_replies_again(&mut self) {
        if self.config.mode != ClientMode::Batch {
            return;
        }
        self.parser = ReplyParser::new(self.config.max_reply_line, self.config.max_reply_lines);
        self.progress = self
            .messages
            .iter()
            .map(|m| Progress {
                rcpt: vec![None; m.recipients.len()],
                ..Progress::default()
            })
            .collect();
        self.expect.clear();
        self.events.clear();
        self.extensions = None;
        self.sum_matched = false;
        self.finished = false;
        if self.config.expect_greeting {
            self.expect.push_back(Expect::Greeting);
        }
        // The same expectations as the first time; the commands themselves were sent then.
        let output = std::mem::take(&mut self.output);
        self.queue_batch();
        self.output = output;
    }

    /// From now on a closing `421` proves nothing: only a `221` naming our sum does. For a
    /// session that goes on with one a lost link cut short (skywave's `XRESUME`): the server
    /// that gave the cut one up may have said `421` naming the octets it read, the first of
    /// this session's, and that reply may arrive after this session has begun.
    pub fn whole_session_only(&mut self) {
        self.whole_only = true;
    }

    /// A batch session whose server advertised `XSUM`: its closing reply must name our sum.
    fn sum_expected(&self) -> bool {
        self.config.mode == ClientMode::Batch
            && self.extensions.as_ref().is_some_and(|e| e.session_sum)
    }

    /// A reply that closes the session (221, 421): in a session that expects `XSUM`, it must
    /// prove that the server read our own first octets, else the replies answer another session.
    fn check_closing(&mut self, reply: &Reply) -> Result<(), ClientError> {
        if !self.sum_expected() {
            return Ok(());
        }
        if sum::proves(reply, &self.sent) && !(self.whole_only && reply.code != 221) {
            self.sum_matched = true;
            return Ok(());
        }
        Err(ClientError::StaleReplies {
            code: reply.code,
            named: sum::named_in(reply),
        })
    }

    /// Takes the bytes to send. With XLZW on, what was produced since the last call is one
    /// burst: compressed and ended with an encoder flush so that the server can decode all of it.
    pub fn take_output(&mut self) -> Vec<u8> {
        self.encode_pending();
        std::mem::take(&mut self.wire)
    }

    /// True if there are bytes to send.
    pub fn has_output(&self) -> bool {
        !self.output.is_empty() || !self.wire.is_empty()
    }

    fn encode_pending(&mut self) {
        if self.output.is_empty() {
            return;
        }
        let plain = std::mem::take(&mut self.output);
        self.plain_written += plain.len() as u64;
        if self.config.mode == ClientMode::Batch {
            self.sent.extend_from_slice(&plain);
        }
        match self.lzw.as_mut() {
            Some(lzw) => {
                lzw.encoder.push(&plain);
                lzw.encoder.flush();
                self.wire.extend(lzw.encoder.take_output());
            }
            None => self.wire.extend_from_slice(&plain),
        }
    }

    /// Takes the next event.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// True once [`ClientEvent::Finished`] has been queued.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Consumes bytes from the server (wire bytes: compressed once XLZW is on).
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.finished {
            return;
        }
        if self.lzw.is_some() {
            return self.feed_compressed(bytes);
        }
        self.plain_read += bytes.len() as u64;
        self.parser.push(bytes);
        self.drain_replies();
        if self.lzw.is_some() && !self.finished {
            // Whatever followed the XLZW reply is compressed.
            let rest = self.parser.take_buffered();
            self.plain_read = self.plain_read.saturating_sub(rest.len() as u64);
            self.feed_compressed(&rest);
        }
    }

    /// Decodes a chunk at a time, each with its own cap on the text it may yield, so that a
    /// decompression bomb costs bounded memory (see `LZW_CHUNK`).
    fn feed_compressed(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(LZW_CHUNK) {
            if self.finished {
                return;
            }
            let Some(lzw) = self.lzw.as_mut() else {
                return;
            };
            lzw.decoder.start_message();
            if let Err(err) = lzw.receive(chunk) {
                return self.finish(Some(ClientError::Compression(err)));
            }
            let text = lzw.decoder.take_output();
            self.plain_read += text.len() as u64;
            self.parser.push(&text);
            self.drain_replies();
        }
    }

    fn drain_replies(&mut self) {
        // Bounded: each reply consumes buffered bytes.
        while !self.finished {
            if self.lzw_started_now {
                self.lzw_started_now = false;
                break;
            }
            match self.parser.next_reply() {
                Ok(Some(reply)) => self.on_reply(reply),
                Ok(None) => break,
                Err(err) => self.finish(Some(ClientError::BadReply(err))),
            }
        }
    }

    /// The connection ended (EOF or error). Unfinished messages are reported with what is known.
    pub fn connection_closed(&mut self) {
        if !self.finished {
            let error = if self.expect.front() == Some(&Expect::Quit) && !self.sum_expected() {
                // QUIT was sent and everything before it answered: closing without 221 is fine
                // (unless the 221 is what ties the replies to this session).
                None
            } else {
                Some(ClientError::ConnectionClosed)
            };
            self.finish(error);
        }
    }

    // ----- sending -----

    fn send_line(&mut self, line: &str) {
        self.output.extend_from_slice(line.as_bytes());
        self.output.extend_from_slice(b"\r\n");
    }

    fn send_ehlo(&mut self) {
        let line = format!("EHLO {}", self.config.helo_name);
        self.send_line(&line);
        self.expect.push_back(Expect::Ehlo);
    }

    fn mail_command(&self, i: usize, ext: &Extensions) -> String {
        let m = &self.messages[i];
        let mut line = format!("MAIL FROM:<{}>", m.reverse_path);
        if ext.size.is_some() {
            let crlf = if m.body.is_empty() || m.body.ends_with(b"\r\n") {
                0
            } else {
                2
            };
            line.push_str(&format!(" SIZE={}", m.body.len() + crlf));
        }
        if m.eight_bit && ext.eight_bit_mime {
            line.push_str(" BODY=8BITMIME");
        }
        // To a server without it, such mail goes as it is, as it did before: the old peers
        // this path serves take UTF-8 as octets.
        if ext.smtputf8
            && crate::downgrade::needs_smtputf8(
                &m.reverse_path,
                m.recipients.iter().map(String::as_str),
                &m.body,
            )
        {
            line.push_str(" SMTPUTF8");
        }
        if let Some(p) = m.mt_priority
            && ext.mt_priority
        {
            line.push_str(&format!(" MT-PRIORITY={}", p.clamp(-9, 9)));
        }
        if ext.dsn {
            line.push_str(&m.dsn.esmtp());
        }
        line
    }

    /// RFC 6152 section 3: 8-bit text for a server that does not offer `8BITMIME` (JNOS answers
    /// HELO only) goes made 7-bit ([`crate::downgrade::seven_bit`]), and UTF-8 header fields
    /// for a server that does not offer `SMTPUTF8` go made ASCII (RFC 6531 §3.2 forbids sending
    /// them as they are; [`crate::downgrade::ascii_headers`], RFC 6857's downgrade). Text that
    /// cannot be converted (a header field that is not UTF-8, 8-bit text under a signature)
    /// goes as it is, as it did before this conversion existed: the old peers this path serves
    /// keep 8-bit text as it comes, and holding the mail back would strand it.
    ///
    /// In batch mode (HMTP) the extensions are assumed, not read from the server: a skywave
    /// peer takes UTF-8 header fields as they are and its own delivery converts them for a
    /// next hop that needs it, so they are converted only for a peer known to lack `SMTPUTF8`
    /// ([`ClientConfig::batch_utf8_headers`]) or, with the rest of an 8-bit message, one known
    /// to lack `8BITMIME`.
    fn fit_body(&mut self, i: usize, ext: &Extensions) {
        let known = self.config.mode != ClientMode::Batch || !self.config.batch_utf8_headers;
        let Some(m) = self.messages.get_mut(i) else {
            return;
        };
        if !m.eight_bit {
            return;
        }
        let (fitted, lacking) = if !ext.eight_bit_mime {
            (crate::downgrade::seven_bit(&m.body), "8BITMIME")
        } else if known && !ext.smtputf8 {
            (crate::downgrade::ascii_headers(&m.body), "SMTPUTF8")
        } else {
            return;
        };
        match fitted {
            Ok(std::borrow::Cow::Owned(text)) => {
                m.eight_bit = !text.is_ascii();
                m.body = text;
            }
            Ok(std::borrow::Cow::Borrowed(_)) => m.eight_bit = ext.eight_bit_mime,
            Err(e) => tracing::warn!(
                message = i,
                "8-bit text for a server without {lacking} goes as it is: {e}"
            ),
        }
    }

    fn send_mail(&mut self, i: usize) {
        let ext = self.extensions.clone().unwrap_or_default();
        self.fit_body(i, &ext);
        let line = self.mail_command(i, &ext);
        self.send_line(&line);
        self.expect.push_back(Expect::Mail(i));
    }

    fn send_rcpt(&mut self, i: usize, j: usize) {
        // In batch mode there is no EHLO reply: the assumed extensions apply.
        let dsn = match self.config.mode {
            ClientMode::Batch => self.config.batch_extensions.dsn,
            _ => self.extensions.as_ref().is_some_and(|e| e.dsn),
        };
        let m = &self.messages[i];
        let mut line = format!("RCPT TO:<{}>", m.recipients[j]);
        if dsn && let Some(d) = m.rcpt_dsn.get(j) {
            line.push_str(&d.esmtp());
        }
        self.send_line(&line);
        self.expect.push_back(Expect::Rcpt(i, j));
    }

    fn send_data(&mut self, i: usize) {
        self.send_line("DATA");
        self.expect.push_back(Expect::Data(i));
    }

    fn send_text(&mut self, i: usize, empty: bool) {
        let stuffed = if empty {
            b".\r\n".to_vec()
        } else {
            dot_stuff(&self.messages[i].body)
        };
        self.output.extend_from_slice(&stuffed);
        self.expect.push_back(Expect::Dot(i));
    }

    fn send_quit(&mut self) {
        self.send_line("QUIT");
        self.expect.push_back(Expect::Quit);
        if self.jnos {
            // JNOS does not wait for the 221: everything before QUIT has been answered.
            self.finish(None);
        }
    }

    /// After the greeting (or at once without one): XLZW when configured, else EHLO.
    fn open(&mut self) {
        match self.config.xlzw {
            Some(bits) if self.config.mode != ClientMode::Batch => {
                let bits = clamp_maxbits(u32::from(bits));
                let line = format!("XLZW {bits} 0");
                self.send_line(&line);
                self.expect.push_back(Expect::Xlzw(bits));
            }
            _ => self.send_ehlo(),
        }
    }

    /// The reply to XLZW: a 2xx starts LZW and JNOS batching; anything else, plain EHLO.
    fn on_xlzw_reply(&mut self, bits: u8, reply: &Reply) {
        if !reply.is_positive() {
            return self.send_ehlo();
        }
        let first = reply.lines.first().map(String::as_str).unwrap_or("");
        let mut words = first.split_ascii_whitespace().map(str::parse::<i64>);
        let echoed = matches!(
            (words.next(), words.next()),
            (Some(Ok(b)), Some(Ok(0))) if b == i64::from(bits)
        );
        // JNOS falls back to compact mode at 9 bits when the echo differs.
        let bits = if echoed { bits } else { 9 };
        let Ok(lzw) = LzwSession::new(bits, lzw_limits()) else {
            return self.send_ehlo();
        };
        // Anything still queued was meant to go uncompressed.
        self.encode_pending();
        self.lzw = Some(lzw);
        self.lzw_started_now = true;
        self.jnos = true;
        self.pipelining = true;
        self.extensions = Some(Extensions::default());
        let line = format!("HELO {}", self.config.helo_name);
        self.send_line(&line);
        self.expect.push_back(Expect::Helo);
        if self.next_message < self.messages.len() {
            self.helo_group_sent = true;
            self.start_next();
        }
    }

    fn send_rset(&mut self) {
        self.send_line("RSET");
        self.expect.push_back(Expect::Rset);
    }

    fn queue_batch(&mut self) {
        self.send_ehlo();
        let ext = self.config.batch_extensions.clone();
        for i in 0..self.messages.len() {
            self.fit_body(i, &ext);
            let line = self.mail_command(i, &ext);
            self.send_line(&line);
            self.expect.push_back(Expect::Mail(i));
            for j in 0..self.messages[i].recipients.len() {
                self.send_rcpt(i, j);
            }
            self.send_data(i);
            self.send_text(i, false);
        }
        self.next_message = self.messages.len();
        self.send_quit();
    }

    /// Starts the next message (or QUIT) in lockstep or pipelining mode.
    fn start_next(&mut self) {
        let i = self.next_message;
        if i >= self.messages.len() {
            return self.send_quit();
        }
        self.next_message += 1;
        self.send_mail(i);
        if self.pipelining {
            for j in 0..self.messages[i].recipients.len() {
                self.send_rcpt(i, j);
            }
            self.send_data(i);
        }
    }

    // ----- receiving -----

    fn on_reply(&mut self, reply: Reply) {
        let Some(expect) = self.expect.pop_front() else {
            return self.finish(Some(ClientError::UnexpectedReply(reply)));
        };
        let batch = self.config.mode == ClientMode::Batch;
        if reply.code == 421 && expect != Expect::Quit {
            if let Err(stale) = self.check_closing(&reply) {
                return self.finish(Some(stale));
            }
            // The server is going away; whatever was in flight has no answer.
            self.record(expect, reply.clone());
            return self.finish(Some(ClientError::ServiceClosing(reply)));
        }
        match expect {
            Expect::Greeting => {
                if reply.code != 220 {
                    self.send_quit_if_lockstep(batch);
                    return self.finish(Some(ClientError::Refused(reply)));
                }
                if !batch {
                    self.open();
                }
            }
            Expect::Xlzw(bits) => self.on_xlzw_reply(bits, &reply),
            Expect::Ehlo => {
                if reply.code == 250 {
                    let ext = Extensions::from_ehlo(&reply);
                    self.pipelining = self.config.mode == ClientMode::Pipelining && ext.pipelining;
                    self.extensions = Some(ext);
                    if !batch {
                        self.start_next();
                    }
                } else if !batch {
                    let line = format!("HELO {}", self.config.helo_name);
                    self.send_line(&line);
                    self.expect.push_back(Expect::Helo);
                }
            }
            Expect::Helo => {
                if reply.code != 250 {
                    self.send_quit_if_lockstep(batch);
                    return self.finish(Some(ClientError::Refused(reply)));
                }
                if self.jnos {
                    // The first message's commands went with HELO, unless there was none.
                    if !std::mem::take(&mut self.helo_group_sent) {
                        self.start_next();
                    }
                    return;
                }
                self.pipelining = false;
                self.extensions = Some(Extensions::default());
                self.start_next();
            }
            Expect::Mail(i) => {
                let ok = reply.is_positive();
                self.progress[i].mail = Some(reply);
                if !batch && !self.pipelining {
                    if ok {
                        self.send_rcpt(i, 0);
                    } else {
                        self.complete(i);
                        self.start_next();
                    }
                }
            }
            Expect::Rcpt(i, j) => {
                self.progress[i].rcpt[j] = Some(reply);
                if !batch && !self.pipelining {
                    if j + 1 < self.messages[i].recipients.len() {
                        self.send_rcpt(i, j + 1);
                    } else if self.any_recipient_accepted(i) {
                        self.send_data(i);
                    } else {
                        self.complete(i);
                        self.send_rset();
                    }
                }
            }
            Expect::Data(i) => {
                let go = reply.code == 354;
                self.progress[i].data = Some(reply);
                if batch {
                    if !go {
                        // The server discarded the text: no reply will come for it.
                        if self.expect.front() == Some(&Expect::Dot(i)) {
                            self.expect.pop_front();
                        }
                        self.complete(i);
                    }
                } else if go {
                    let empty = !self.any_recipient_accepted(i);
                    self.send_text(i, empty);
                } else {
                    self.complete(i);
                    self.send_rset();
                }
            }
            Expect::Dot(i) => {
                self.progress[i].dot = Some(reply);
                self.complete(i);
                if !batch {
                    self.start_next();
                }
            }
            Expect::Rset => {
                if !batch {
                    self.start_next();
                }
            }
            Expect::Quit => {
                let stale = self.check_closing(&reply).err();
                self.finish(stale);
            }
        }
    }

    fn send_quit_if_lockstep(&mut self, batch: bool) {
        if !batch {
            self.send_line("QUIT");
        }
    }

    fn any_recipient_accepted(&self, i: usize) -> bool {
        self.progress[i]
            .rcpt
            .iter()
            .any(|r| r.as_ref().is_some_and(Reply::is_positive))
    }

    /// Stores a reply that ended the session early where it belongs.
    fn record(&mut self, expect: Expect, reply: Reply) {
        match expect {
            Expect::Mail(i) => self.progress[i].mail = Some(reply),
            Expect::Rcpt(i, j) => self.progress[i].rcpt[j] = Some(reply),
            Expect::Data(i) => self.progress[i].data = Some(reply),
            Expect::Dot(i) => self.progress[i].dot = Some(reply),
            Expect::Greeting
            | Expect::Xlzw(_)
            | Expect::Ehlo
            | Expect::Helo
            | Expect::Rset
            | Expect::Quit => {}
        }
    }

    fn complete(&mut self, i: usize) {
        let p = &mut self.progress[i];
        if p.done {
            return;
        }
        p.done = true;
        let recipients = self.messages[i]
            .recipients
            .iter()
            .enumerate()
            .map(|(j, address)| RecipientOutcome {
                address: address.clone(),
                status: recipient_status(p, j),
            })
            .collect();
        self.events.push_back(ClientEvent::Message(MessageOutcome {
            index: i,
            mail_reply: p.mail.clone(),
            data_reply: p.data.clone(),
            final_reply: p.dot.clone(),
            recipients,
        }));
    }

    fn finish(&mut self, error: Option<ClientError>) {
        if self.finished {
            return;
        }
        // A 421 also answers for everything still in flight.
        if let Some(ClientError::ServiceClosing(reply)) = &error {
            let reply = reply.clone();
            for e in self.expect.clone() {
                self.record(e, reply.clone());
            }
        }
        for i in 0..self.messages.len() {
            self.complete(i);
        }
        self.expect.clear();
        self.finished = true;
        self.events.push_back(ClientEvent::Finished { error });
    }
}

/// Compressed input decoded per step.
const LZW_CHUNK: usize = 512;

/// No cap over the session's life, at most 16 MiB of reply text per [`LZW_CHUNK`] of input:
/// replies are short, so only a crafted stream comes near it.
fn lzw_limits() -> Limits {
    Limits {
        max_stream_bytes: u64::MAX,
        max_message_bytes: 16 << 20,
    }
}

fn status_of(reply: &Reply) -> RecipientStatus {
    if reply.is_transient() {
        RecipientStatus::Deferred(reply.clone())
    } else {
        RecipientStatus::Failed(reply.clone())
    }
}

fn recipient_status(p: &Progress, j: usize) -> RecipientStatus {
    match &p.mail {
        None => return RecipientStatus::Unknown,
        Some(r) if !r.is_positive() => return status_of(r),
        Some(_) => {}
    }
    match p.rcpt.get(j).and_then(Option::as_ref) {
        None => return RecipientStatus::Unknown,
        Some(r) if !r.is_positive() => return status_of(r),
        Some(_) => {}
    }
    match &p.data {
        None => return RecipientStatus::Unknown,
        Some(r) if r.code != 354 => return status_of(r),
        Some(_) => {}
    }
    match &p.dot {
        None => RecipientStatus::Unknown,
        Some(r) if r.is_positive() => RecipientStatus::Delivered(r.clone()),
        Some(r) => status_of(r),
    }
}
