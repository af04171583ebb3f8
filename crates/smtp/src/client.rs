//! The sans-IO SMTP client session: delivers a list of messages to one server.
//!
//! Used for LAN delivery, the SMTP-over-TCP bearer and, in [`ClientMode::Batch`], as the HMTP
//! client. The owner writes [`ClientSession::take_output`] to the server, feeds the server's bytes
//! to [`ClientSession::feed`] and collects a [`MessageOutcome`] per message from
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
//! XLZW (JNOS compression) is not offered yet; see the crate documentation.

use std::collections::VecDeque;

use thiserror::Error;

use crate::data::dot_stuff;
use crate::reply::{Reply, ReplyError, ReplyParser};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
}

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
}

impl ClientConfig {
    /// A configuration with a greeting, 4096-octet reply lines, 256 lines per reply, and in batch
    /// mode only 8BITMIME assumed.
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
    output: Vec<u8>,
    events: VecDeque<ClientEvent>,
    extensions: Option<Extensions>,
    pipelining: bool,
    next_message: usize,
    finished: bool,
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
            events: VecDeque::new(),
            extensions: None,
            next_message: 0,
            finished: false,
        };
        if session.config.expect_greeting {
            session.expect.push_back(Expect::Greeting);
        }
        if session.config.mode == ClientMode::Batch {
            session.queue_batch();
        } else if !session.config.expect_greeting {
            session.send_ehlo();
        }
        Ok(session)
    }

    /// The extensions the server advertised in its EHLO reply, once known.
    pub fn server_extensions(&self) -> Option<&Extensions> {
        self.extensions.as_ref()
    }

    /// Takes the bytes to send.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.output)
    }

    /// True if there are bytes to send.
    pub fn has_output(&self) -> bool {
        !self.output.is_empty()
    }

    /// Takes the next event.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// True once [`ClientEvent::Finished`] has been queued.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Consumes bytes from the server.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.finished {
            return;
        }
        self.parser.push(bytes);
        // Bounded: each reply consumes buffered bytes.
        while !self.finished {
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
            let error = if self.expect.front() == Some(&Expect::Quit) {
                // QUIT was sent and everything before it answered: closing without 221 is fine.
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
        if let Some(p) = m.mt_priority
            && ext.mt_priority
        {
            line.push_str(&format!(" MT-PRIORITY={}", p.clamp(-9, 9)));
        }
        line
    }

    fn send_mail(&mut self, i: usize) {
        let ext = self.extensions.unwrap_or_default();
        let line = self.mail_command(i, &ext);
        self.send_line(&line);
        self.expect.push_back(Expect::Mail(i));
    }

    fn send_rcpt(&mut self, i: usize, j: usize) {
        let line = format!("RCPT TO:<{}>", self.messages[i].recipients[j]);
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
    }

    fn send_rset(&mut self) {
        self.send_line("RSET");
        self.expect.push_back(Expect::Rset);
    }

    fn queue_batch(&mut self) {
        self.send_ehlo();
        let ext = self.config.batch_extensions;
        for i in 0..self.messages.len() {
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
                    self.send_ehlo();
                }
            }
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
            Expect::Quit => self.finish(None),
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
            Expect::Greeting | Expect::Ehlo | Expect::Helo | Expect::Rset | Expect::Quit => {}
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
