//! The sans-IO SMTP server session.
//!
//! One [`ServerSession`] per client connection (LAN listener, SMTP-over-TCP bearer) or per HMTP
//! session (SAP 3). The owner feeds received bytes with the time they arrived, writes what
//! [`ServerSession::take_output`] returns, reacts to [`Event`]s, and calls
//! [`ServerSession::handle_timeout`] when [`ServerSession::poll_timeout`] says so. Commands are
//! parsed by smtp-proto's `Request` parser; framing, limits, sequencing, DATA and replies are here.
//!
//! Decisions that need the owner's knowledge are made in two ways:
//! - synchronously through the [`Policy`] trait (accept a sender or recipient, check credentials),
//!   which is called while the session processes input;
//! - asynchronously for anything that needs I/O: a complete message is handed over as
//!   [`Event::Message`] and the session says nothing (and processes no further input) until the
//!   owner calls [`ServerSession::message_accepted`] once the spool has made it durable, or
//!   [`ServerSession::message_rejected`]. STARTTLS works the same way with
//!   [`Event::StartTls`] and [`ServerSession::tls_established`].
//!
//! # Input rules
//! - Command lines end at LF; a CR right before the LF is removed. Bare-LF command lines are
//!   accepted (being lenient here cannot end a message early: DATA has its own strict rule, see
//!   [`crate::data`]). A CR anywhere else in a command line, or a NUL, gets
//!   `500 5.5.2` and the command is ignored.
//! - A command line longer than `max_command_line` octets (CRLF included) gets `500 5.5.6` once
//!   its LF arrives; the session never buffers more than the limit of it.
//! - Message text ends only at CRLF "." CRLF; bare CR or LF, NUL, over-long lines and
//!   oversized messages are answered after the final dot (`550 5.6.2`, `550 5.6.0`,
//!   `550 5.6.0`, `552 5.3.4`).
//! - Protocol errors (syntax, unknown command, bad sequence, bad line) are counted; more than
//!   `max_errors` closes the session with `421 4.7.0`. More than `max_commands` commands does
//!   the same. Policy rejections are not counted, so a peer's batch with many unknown
//!   recipients is never cut short.
//!
//! # Pipelining and HMTP-66 reply buffering
//! Everything fed at once is processed at once and replies come out in command order
//! (RFC 2920). With `reply_buffering` (HMTP-66) every reply, the greeting included, is held until
//! QUIT (or until the session closes for another reason) and then released in one piece. In that
//! mode a rejected DATA is followed by reading and discarding the message text up to its final
//! dot, because the HMTP client sends it without waiting; STARTTLS and AUTH, which need a turn of
//! the link before the client can go on, are neither offered nor accepted there. Without
//! `reply_buffering` a rejected DATA is not followed by text (RFC 2920 makes the client wait for
//! the 354), so what follows is read as commands.
//!
//! An HMTP server that meets a client waiting for its EHLO reply (a plain client that pipelines
//! only after EHLO) can send the replies held so far with [`ServerSession::release_held`], or
//! set `immediate_hello` to send greeting and EHLO/HELO replies at once: later replies are still
//! held until QUIT and a refused DATA's text is still discarded.
//!
//! # XLZW (JNOS LZW compression)
//! `XLZW <bits> <mode>` (verb in any case; 9 <= bits <= 16, mode 0 or 1, or omitted for 0 as
//! JNOS's sscanf leaves it) is answered with
//! `250 <bits> <mode> LZW Ok`, sent uncompressed; from then on both directions are JNOS LZW
//! streams (`skywave-compress`), each with its own dictionary, our encoder at the client's
//! `bits`. Invalid values get `500` and the session stays plain; with `xlzw` off (or with
//! `reply_buffering`) the command gets `500 Command unrecognized`, as JNOS with `smtp reclzw
//! off`. The compression lives inside the session: [`ServerSession::feed`] takes wire bytes and
//! [`ServerSession::take_output`] returns wire bytes. Every reply line ends with an encoder
//! flush, as JNOS flushes at each LF. STARTTLS is not offered once compression is on.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use base64::Engine as _;
use skywave_compress::{Limits, LzwSession};
use smtp_proto::{
    AUTH_LOGIN, AUTH_PLAIN, Error as ParseError, MAIL_BODY_7BIT, MAIL_BODY_8BITMIME, MAIL_RET_FULL,
    MAIL_RET_HDRS, MAIL_SMTPUTF8, MailFrom, RcptTo, Request,
};
use thiserror::Error;

use crate::address;
use crate::data::{DataFault, DataLimits, DataReader};
use crate::dsn::{MailDsn, RcptDsn};
use crate::received::Protocol;
use crate::reply::{EnhancedCode, Reply};
use crate::sum::{self, SessionSum};

/// When AUTH is offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// Never offered; AUTH gets `502 5.5.1`.
    Disabled,
    /// Offered and accepted only after STARTTLS; before it AUTH gets `538 5.7.11`.
    AfterTls,
    /// Offered and accepted with or without TLS (for tests and trusted links only).
    AllowPlaintext,
}

/// Configuration of a server session. [`ServerConfig::new`] gives sensible defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Our host name, used in the greeting, EHLO reply and closing replies.
    pub hostname: String,
    /// Send a 220 greeting at the start (false for HMTP, where there is no connection set-up).
    pub send_greeting: bool,
    /// Largest message accepted, in octets; advertised as `SIZE`.
    pub max_message_size: usize,
    /// Most recipients per message; more get `452 4.5.3`.
    pub max_recipients: usize,
    /// Longest command line in octets including CRLF.
    pub max_command_line: usize,
    /// Longest message line in octets including CRLF (RFC 5321: 1000).
    pub max_data_line: usize,
    /// Most commands per session.
    pub max_commands: usize,
    /// Most protocol errors per session.
    pub max_errors: usize,
    /// Most unprocessed input buffered while waiting for the owner (spool or TLS).
    pub max_input_buffer: usize,
    /// Longest silence between commands before `421 4.4.2`.
    pub idle_timeout: Duration,
    /// Longest silence during message text before `421 4.4.2`.
    pub data_timeout: Duration,
    /// Offer STARTTLS (the owner has a certificate and key). Ignored with `reply_buffering`.
    pub starttls: bool,
    /// When AUTH PLAIN/LOGIN is offered. Ignored with `reply_buffering`.
    pub auth: AuthMode,
    /// HMTP-66 mode: hold every reply until QUIT; discard text after a rejected DATA.
    pub reply_buffering: bool,
    /// Advertise and accept MT-PRIORITY (RFC 6710).
    pub mt_priority: bool,
    /// Accept JNOS `XLZW <bits> <mode>` (LZW compression of both directions). When false, XLZW
    /// gets `500 Command unrecognized`, as from a JNOS with `smtp reclzw off`. Never accepted
    /// with `reply_buffering`, where the client could not see the reply before compressing.
    pub xlzw: bool,
    /// With `reply_buffering`: send the replies to EHLO/HELO (and the greeting) at once, with
    /// anything held before them, and hold only the later replies until QUIT. For a client that
    /// waits for the EHLO reply before sending its batch. See also
    /// [`ServerSession::release_held`].
    pub immediate_hello: bool,
    /// Further EHLO keywords to advertise (with their parameters), before HELP: the HMTP
    /// server's `XDICT`.
    pub extra_ehlo: Vec<String>,
    /// Advertise skywave's `XSUM` and end the 221 with the checksum of every octet read in the
    /// session (see [`crate::sum`]), so that a batch client can tell its replies from a late
    /// stream answering an earlier session.
    pub session_sum: bool,
    /// Advertise and accept the DSN extension (RFC 3461): `RET` and `ENVID` on MAIL, `NOTIFY`
    /// and `ORCPT` on RCPT, handed to the owner in the [`Envelope`]. Only for an owner that
    /// keeps them and reports as they ask (the gateway's spool does).
    pub dsn: bool,
    /// Advertise and accept SMTPUTF8 (RFC 6531): the client may say that the envelope or the
    /// header fields are in UTF-8 ([`Envelope::smtputf8`]), and the `Received:` header then
    /// names the protocol `UTF8SMTP`. The session takes UTF-8 addresses either way; without
    /// this, a client that follows RFC 6531 returns internationalized mail to its sender
    /// rather than send it here.
    pub smtputf8: bool,
    /// Advertise and accept 8BITMIME (RFC 6152), on by default. Off, `BODY=` gets `555 5.5.4`
    /// as any parameter not offered: a server that cannot take 8-bit text, against which a
    /// client's conversion to 7 bits is tested (STANAG 5066 Annex F asks HMTP servers only
    /// that they should offer it).
    pub eight_bit_mime: bool,
}

impl ServerConfig {
    /// Defaults: 10 MiB messages, 100 recipients, 2048-octet command lines, 1000-octet message
    /// lines, 10 000 commands, 20 errors, 5 minutes idle and 3 minutes stalled DATA, STARTTLS
    /// and AUTH off, no reply buffering, MT-PRIORITY on, XLZW accepted (JNOS peers connect to
    /// the LAN listener), 8BITMIME on, DSN and SMTPUTF8 off.
    pub fn new(hostname: impl Into<String>) -> Self {
        Self {
            hostname: hostname.into(),
            send_greeting: true,
            max_message_size: 10 * 1024 * 1024,
            max_recipients: 100,
            max_command_line: 2048,
            max_data_line: 1000,
            max_commands: 10_000,
            max_errors: 20,
            max_input_buffer: 16 * 1024 * 1024,
            idle_timeout: Duration::from_secs(300),
            data_timeout: Duration::from_secs(180),
            starttls: false,
            auth: AuthMode::Disabled,
            reply_buffering: false,
            mt_priority: true,
            xlzw: true,
            immediate_hello: false,
            extra_ehlo: Vec::new(),
            session_sum: false,
            dsn: false,
            smtputf8: false,
            eight_bit_mime: true,
        }
    }

    /// The HMTP-66 server profile: no greeting, replies held until QUIT, no XLZW, `XSUM`.
    pub fn hmtp(hostname: impl Into<String>) -> Self {
        Self {
            send_greeting: false,
            reply_buffering: true,
            xlzw: false,
            session_sum: true,
            ..Self::new(hostname)
        }
    }
}

/// The body type declared in MAIL FROM (RFC 6152).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyType {
    /// No BODY parameter.
    Unspecified,
    /// `BODY=7BIT`.
    SevenBit,
    /// `BODY=8BITMIME`.
    EightBitMime,
}

/// The envelope of the message being received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The reverse path without angle brackets; empty for the null sender `<>`.
    pub reverse_path: String,
    /// Accepted recipients, in order.
    pub recipients: Vec<String>,
    /// The `SIZE=` the client declared, if any.
    pub declared_size: Option<usize>,
    /// The declared body type.
    pub body_type: BodyType,
    /// The `MT-PRIORITY=` value (-9..=9), if any.
    pub mt_priority: Option<i8>,
    /// The HELO/EHLO name.
    pub helo: String,
    /// SMTP, ESMTP, ESMTPS, ... for the Received header.
    pub protocol: Protocol,
    /// The authenticated user, if any.
    pub auth_user: Option<String>,
    /// The DSN parameters of MAIL (empty unless [`ServerConfig::dsn`]).
    pub dsn: MailDsn,
    /// The DSN parameters of each RCPT, in the order of `recipients`: the server session gives
    /// one each; an owner building an envelope itself may leave it empty (nothing asked).
    pub rcpt_dsn: Vec<RcptDsn>,
    /// MAIL carried `SMTPUTF8` (RFC 6531; only when [`ServerConfig::smtputf8`]).
    pub smtputf8: bool,
}

/// What the owner learned from the TLS handshake, kept for logs and policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsInfo {
    /// The protocol version, e.g. "TLSv1.3".
    pub version: String,
    /// The cipher suite name.
    pub cipher_suite: String,
}

/// The session state a [`Policy`] can look at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionInfo {
    /// The HELO/EHLO name, once given.
    pub helo: Option<String>,
    /// True after EHLO (false after HELO).
    pub esmtp: bool,
    /// Set once STARTTLS completed.
    pub tls: Option<TlsInfo>,
    /// The authenticated user, if any.
    pub auth_user: Option<String>,
}

/// A parsed MAIL FROM, shown to [`Policy::mail_from`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailRequest {
    /// The reverse path without angle brackets; empty for `<>`.
    pub reverse_path: String,
    /// `SIZE=`, if given.
    pub declared_size: Option<usize>,
    /// `BODY=`, if given.
    pub body_type: BodyType,
    /// `MT-PRIORITY=`, if given.
    pub mt_priority: Option<i8>,
}

/// SASL mechanisms the session implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMechanism {
    /// RFC 4616.
    Plain,
    /// The de-facto LOGIN mechanism.
    Login,
}

/// Credentials presented with AUTH, for [`Policy::authenticate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The mechanism used.
    pub mechanism: AuthMechanism,
    /// PLAIN's authorization identity, when not empty.
    pub authzid: Option<String>,
    /// The user name.
    pub username: String,
    /// The password.
    pub password: String,
}

/// A policy decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Accept with the session's normal reply.
    Accept,
    /// Refuse with this reply (4xx or 5xx).
    Reject(Reply),
}

/// Synchronous decisions the session asks its owner for. Every method has a default: accept
/// senders and recipients, refuse every credential.
pub trait Policy {
    /// Decides on a MAIL FROM that passed the syntax and size checks.
    fn mail_from(&mut self, session: &SessionInfo, mail: &MailRequest) -> Verdict {
        let _ = (session, mail);
        Verdict::Accept
    }

    /// Decides on one recipient; `envelope` holds the sender and the recipients accepted so far.
    fn rcpt_to(&mut self, session: &SessionInfo, envelope: &Envelope, recipient: &str) -> Verdict {
        let _ = (session, envelope, recipient);
        Verdict::Accept
    }

    /// Checks credentials; true means authenticated.
    fn authenticate(&mut self, session: &SessionInfo, credentials: &Credentials) -> bool {
        let _ = (session, credentials);
        false
    }
}

/// Accepts every sender and recipient, knows no credentials.
#[derive(Debug, Clone, Copy, Default)]
pub struct AcceptAll;

impl Policy for AcceptAll {}

/// Why the session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The client sent QUIT.
    Quit,
    /// No command within the idle timeout.
    IdleTimeout,
    /// No message text within the DATA timeout.
    DataTimeout,
    /// More protocol errors than allowed.
    TooManyErrors,
    /// More commands than allowed.
    TooManyCommands,
    /// More unprocessed input than allowed while waiting for the owner.
    InputOverflow,
    /// The owner reported a failed TLS handshake.
    TlsFailed,
    /// The XLZW-compressed input could not be decoded (or expanded beyond the per-chunk cap).
    CompressionError,
}

/// Something the owner must act on or may log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A complete, clean message. Spool it, then call
    /// [`ServerSession::message_accepted`] or [`ServerSession::message_rejected`].
    Message {
        /// Sender, recipients and parameters.
        envelope: Envelope,
        /// The message, dot-unstuffed, CRLF line ends.
        body: Vec<u8>,
    },
    /// The 220 for STARTTLS is in the output: write it, run the TLS handshake, then call
    /// [`ServerSession::tls_established`] or [`ServerSession::tls_failed`].
    StartTls,
    /// AUTH succeeded for this user.
    Authenticated {
        /// The user name.
        username: String,
    },
    /// The session is over: write the remaining output, then close.
    Close(CloseReason),
}

/// Calling a completion method when the session was not waiting for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SessionError {
    /// `message_accepted`/`message_rejected` without a pending [`Event::Message`].
    #[error("no message is waiting for a spool decision")]
    NoMessagePending,
    /// `tls_established`/`tls_failed` without a pending [`Event::StartTls`].
    #[error("no STARTTLS handshake is pending")]
    NoTlsPending,
}

#[derive(Debug)]
enum State {
    Command,
    Data(DataReader),
    Discard(DataReader),
    AuthPlain,
    AuthLoginUser,
    AuthLoginPassword(String),
    AwaitMessage,
    AwaitTls,
    Closed,
}

/// The server side of one SMTP (or HMTP) session.
#[derive(Debug)]
pub struct ServerSession<P> {
    config: ServerConfig,
    policy: P,
    state: State,
    info: SessionInfo,
    envelope: Option<Envelope>,
    input: Vec<u8>,
    skipping_long_line: bool,
    output: Vec<u8>,
    held: Vec<u8>,
    /// Both LZW directions, once XLZW was accepted.
    lzw: Option<LzwSession>,
    /// XLZW was accepted in the line just processed: the rest of the input is compressed.
    lzw_switch: bool,
    /// Received compressed bytes not yet decoded (decoding waits while the session waits).
    wire_in: VecDeque<u8>,
    events: VecDeque<Event>,
    last_activity: Instant,
    commands: usize,
    errors: usize,
    mail_refused: bool,
    /// Every octet read so far, after decompression (for `XSUM`).
    sum: SessionSum,
}

/// Compressed input decoded per step (see `pump`).
const LZW_CHUNK: usize = 512;

/// The caps for decoding XLZW input: no cap over the session's life (the session's own limits
/// bound each message) but at most 16 MiB of text per [`LZW_CHUNK`] of input. Ordinary mail
/// never comes near it (a string grows by one byte per code, so long strings need a long,
/// repetitive history); a crafted stream hits it and closes the session.
fn lzw_limits() -> Limits {
    Limits {
        max_stream_bytes: u64::MAX,
        max_message_bytes: 16 << 20,
    }
}

const fn esc(class: u8, subject: u16, detail: u16) -> EnhancedCode {
    EnhancedCode::new(class, subject, detail)
}

impl<P: Policy> ServerSession<P> {
    /// Starts a session at time `now`; the greeting (if configured) is queued at once.
    pub fn new(config: ServerConfig, policy: P, now: Instant) -> Self {
        let mut session = Self {
            config,
            policy,
            state: State::Command,
            info: SessionInfo::default(),
            envelope: None,
            input: Vec::new(),
            skipping_long_line: false,
            output: Vec::new(),
            held: Vec::new(),
            lzw: None,
            lzw_switch: false,
            wire_in: VecDeque::new(),
            events: VecDeque::new(),
            last_activity: now,
            commands: 0,
            errors: 0,
            mail_refused: false,
            sum: SessionSum::new(),
        };
        if session.config.send_greeting {
            let greeting = Reply::plain(220, format!("{} ESMTP skywave", session.config.hostname));
            session.hello_reply(greeting);
        }
        session
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The policy, e.g. to read statistics it kept.
    pub fn policy(&self) -> &P {
        &self.policy
    }

    /// The policy, e.g. to swap in a reloaded routing table.
    pub fn policy_mut(&mut self) -> &mut P {
        &mut self.policy
    }

    /// What the session knows about its client.
    pub fn info(&self) -> &SessionInfo {
        &self.info
    }

    /// Consumes bytes received at `now`. Replies go to the output, events to the event queue.
    pub fn feed(&mut self, now: Instant, bytes: &[u8]) {
        if matches!(self.state, State::Closed) || bytes.is_empty() {
            return;
        }
        self.last_activity = now;
        if matches!(self.state, State::AwaitTls) {
            // Plaintext after STARTTLS is discarded (RFC 3207 section 4.2 and the STARTTLS
            // command-injection problem): nothing sent before the handshake may count after it.
            return;
        }
        if self.lzw.is_some() {
            self.wire_in.extend(bytes);
        } else {
            self.input.extend_from_slice(bytes);
        }
        self.pump();
        // Only input left unprocessed counts: in the command state that is less than one line,
        // in DATA nothing; it grows only while the owner is deciding on a message.
        if self.input.len().saturating_add(self.wire_in.len()) > self.config.max_input_buffer {
            let reply = Reply::new(421, esc(4, 7, 0), self.closing_text("Too much input"));
            self.close(reply, CloseReason::InputOverflow);
        }
    }

    /// True when the session will process input now; false while it waits for the owner or after
    /// it closed. Owners should stop reading meanwhile (input fed anyway is buffered, bounded by
    /// `max_input_buffer`).
    pub fn wants_input(&self) -> bool {
        !matches!(
            self.state,
            State::AwaitMessage | State::AwaitTls | State::Closed
        )
    }

    /// True once the session has ended (see [`Event::Close`]).
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// True if there are bytes to write.
    pub fn has_output(&self) -> bool {
        !self.output.is_empty()
    }

    /// Takes the bytes to write to the client.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.output)
    }

    /// The maxbits of our LZW encoder once XLZW was accepted (the value the client asked for);
    /// None while the session is uncompressed.
    pub fn compression(&self) -> Option<u8> {
        self.lzw.as_ref().map(|l| l.encoder.header_maxbits())
    }

    /// Sends every reply held so far (HMTP-66 `reply_buffering`) now, in order; replies to later
    /// commands are held again until QUIT. For an HMTP server that sees a client wait after its
    /// EHLO (a plain client that pipelines only once it has the EHLO reply): release the EHLO
    /// reply, keep batching the rest. Does nothing when nothing is held.
    pub fn release_held(&mut self) {
        self.flush_held();
    }

    /// Takes the next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The client is heard from at `now` though no octet of the session came (skywave's
    /// resume marker, which says the rest of a session cut short is on its way): the idle and
    /// DATA timeouts run from here.
    pub fn touch(&mut self, now: Instant) {
        if !matches!(self.state, State::Closed) {
            self.last_activity = now;
        }
    }

    /// The next deadline, if any. None while waiting for the owner and after closing.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Data(_) | State::Discard(_) => {
                self.last_activity.checked_add(self.config.data_timeout)
            }
            State::Command
            | State::AuthPlain
            | State::AuthLoginUser
            | State::AuthLoginPassword(_) => {
                self.last_activity.checked_add(self.config.idle_timeout)
            }
            State::AwaitMessage | State::AwaitTls | State::Closed => None,
        }
    }

    /// Closes the session with `421 4.4.2` if its deadline has passed at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(deadline) = self.poll_timeout() else {
            return;
        };
        if now < deadline {
            return;
        }
        let reason = if matches!(self.state, State::Data(_) | State::Discard(_)) {
            CloseReason::DataTimeout
        } else {
            CloseReason::IdleTimeout
        };
        let reply = Reply::new(
            421,
            esc(4, 4, 2),
            self.closing_text("Error: timeout exceeded"),
        );
        self.close(reply, reason);
    }

    /// The spool holds the message durably: reply 250 with the queue id and go on.
    pub fn message_accepted(&mut self, queue_id: &str) -> Result<(), SessionError> {
        self.finish_message(Reply::new(
            250,
            esc(2, 0, 0),
            format!("Ok: queued as {queue_id}"),
        ))
    }

    /// The message was not taken (spool full, duplicate refused, ...): send `reply` and go on.
    pub fn message_rejected(&mut self, reply: Reply) -> Result<(), SessionError> {
        self.finish_message(reply)
    }

    /// The TLS handshake completed at `now`: the session starts afresh (RFC 3207 section 4.2),
    /// forgetting HELO, transaction and any input received before.
    pub fn tls_established(&mut self, now: Instant, tls: TlsInfo) -> Result<(), SessionError> {
        if !matches!(self.state, State::AwaitTls) {
            return Err(SessionError::NoTlsPending);
        }
        self.input.clear();
        self.envelope = None;
        self.info = SessionInfo {
            tls: Some(tls),
            ..SessionInfo::default()
        };
        self.last_activity = now;
        self.state = State::Command;
        Ok(())
    }

    /// The TLS handshake failed: the session ends without a reply (there is no channel left).
    pub fn tls_failed(&mut self) -> Result<(), SessionError> {
        if !matches!(self.state, State::AwaitTls) {
            return Err(SessionError::NoTlsPending);
        }
        self.input.clear();
        self.state = State::Closed;
        self.events.push_back(Event::Close(CloseReason::TlsFailed));
        Ok(())
    }

    fn finish_message(&mut self, reply: Reply) -> Result<(), SessionError> {
        if !matches!(self.state, State::AwaitMessage) {
            return Err(SessionError::NoMessagePending);
        }
        self.state = State::Command;
        self.envelope = None;
        self.reply(reply);
        self.pump();
        Ok(())
    }

    // ----- output -----

    fn reply(&mut self, reply: Reply) {
        if self.config.reply_buffering {
            reply.write_to(&mut self.held);
        } else {
            let bytes = reply.to_bytes();
            self.emit(&bytes);
        }
    }

    /// The greeting and the replies to EHLO/HELO: sent at once (after anything held before
    /// them, so the order stays) when `immediate_hello` says so.
    fn hello_reply(&mut self, reply: Reply) {
        if self.config.reply_buffering && self.config.immediate_hello {
            self.flush_held();
            let bytes = reply.to_bytes();
            self.emit(&bytes);
        } else {
            self.reply(reply);
        }
    }

    fn flush_held(&mut self) {
        let held = std::mem::take(&mut self.held);
        self.emit(&held);
    }

    /// Appends reply text to the output, compressed once XLZW is active. JNOS flushes its
    /// encoder at every LF of server output, so each reply line ends a transmission that the
    /// client can decode at once (the flush code's tail opens the next one).
    fn emit(&mut self, plain: &[u8]) {
        let Some(lzw) = self.lzw.as_mut() else {
            self.output.extend_from_slice(plain);
            return;
        };
        for line in plain.split_inclusive(|&b| b == b'\n') {
            lzw.encoder.push(line);
            lzw.encoder.flush();
            self.output.extend(lzw.encoder.take_output());
        }
    }

    fn closing_text(&self, what: &str) -> String {
        format!("{} {what}, closing connection", self.config.hostname)
    }

    fn close(&mut self, mut reply: Reply, reason: CloseReason) {
        tracing::debug!(?reason, code = reply.code, "SMTP server session closing");
        if self.config.session_sum {
            // XSUM: what was read up to here, so that a batch client knows these replies are
            // its own (see `crate::sum`).
            let tag = self.sum.tag();
            match reply.lines.last_mut() {
                Some(line) if !line.is_empty() => {
                    line.push(' ');
                    line.push_str(&tag);
                }
                Some(line) => *line = tag,
                None => reply.lines.push(tag),
            }
        }
        self.reply(reply);
        self.flush_held();
        self.state = State::Closed;
        self.input.clear();
        self.wire_in.clear();
        self.events.push_back(Event::Close(reason));
    }

    /// A 503 for a missing MAIL: not counted as an error when the MAIL was refused by policy or
    /// size, because pipelining (and HMTP) clients send RCPT and DATA regardless.
    fn sequence_error(&mut self, reply: Reply) {
        if self.mail_refused {
            self.reply(reply);
        } else {
            self.error(reply);
        }
    }

    /// Sends a reply for a protocol error and closes if there were too many.
    fn error(&mut self, reply: Reply) {
        self.reply(reply);
        self.errors += 1;
        if self.errors > self.config.max_errors {
            let reply = Reply::new(421, esc(4, 7, 0), self.closing_text("Too many errors"));
            self.close(reply, CloseReason::TooManyErrors);
        }
    }

    // ----- input -----

    /// Processes the plain input, then decodes compressed input a chunk at a time while the
    /// session wants input. Decoding in chunks, each with its own cap on the text it may yield,
    /// bounds the memory a decompression bomb can take, and leaves the rest compressed while the
    /// owner decides on a message.
    fn pump(&mut self) {
        // Bounded: every pass after the first decodes at least one byte of `wire_in` or leaves
        // the loop; the switch to LZW happens at most once.
        loop {
            self.process();
            if self.lzw_switch {
                self.lzw_switch = false;
                // What followed the XLZW line is already compressed.
                let rest = std::mem::take(&mut self.input);
                for &b in rest.iter().rev() {
                    self.wire_in.push_front(b);
                }
            }
            if self.wire_in.is_empty() || !self.wants_input() {
                break;
            }
            let Some(lzw) = self.lzw.as_mut() else {
                break;
            };
            let n = self.wire_in.len().min(LZW_CHUNK);
            let chunk: Vec<u8> = self.wire_in.drain(..n).collect();
            lzw.decoder.start_message();
            match lzw.receive(&chunk) {
                Ok(()) => {
                    let text = lzw.decoder.take_output();
                    self.input.extend_from_slice(&text);
                }
                Err(err) => {
                    tracing::debug!(%err, "XLZW input cannot be decoded");
                    let reply = Reply::new(
                        421,
                        esc(4, 5, 0),
                        self.closing_text("Compressed input cannot be decoded"),
                    );
                    self.close(reply, CloseReason::CompressionError);
                    break;
                }
            }
        }
    }

    fn process(&mut self) {
        let mut pos = 0;
        // Bounded: every pass consumes input or leaves the loop.
        while pos < self.input.len() && !self.lzw_switch {
            match &mut self.state {
                State::Closed | State::AwaitMessage | State::AwaitTls => break,
                State::Data(reader) | State::Discard(reader) => {
                    let (n, done) = reader.feed(&self.input[pos..]);
                    self.sum.update(&self.input[pos..pos + n]);
                    pos += n;
                    if done {
                        self.end_of_data();
                    }
                }
                State::Command
                | State::AuthPlain
                | State::AuthLoginUser
                | State::AuthLoginPassword(_) => {
                    let rest = &self.input[pos..];
                    let max = self.config.max_command_line.max(8);
                    match rest.iter().position(|&b| b == b'\n') {
                        None => {
                            if self.skipping_long_line || rest.len() >= max {
                                self.skipping_long_line = true;
                                self.sum.update(rest);
                                pos = self.input.len();
                            }
                            break;
                        }
                        Some(lf) => {
                            let mut content = &rest[..lf];
                            if content.last() == Some(&b'\r') {
                                content = &content[..content.len() - 1];
                            }
                            let too_long =
                                self.skipping_long_line || content.len().saturating_add(2) > max;
                            let line = if too_long {
                                Vec::new()
                            } else {
                                content.to_vec()
                            };
                            // Summed before the line is acted on: QUIT's 221 names a sum that
                            // includes the QUIT line itself.
                            self.sum.update(&rest[..=lf]);
                            pos += lf + 1;
                            self.skipping_long_line = false;
                            if too_long {
                                self.line_too_long();
                            } else {
                                self.line(&line);
                            }
                        }
                    }
                }
            }
        }
        self.input.drain(..pos.min(self.input.len()));
    }

    fn line_too_long(&mut self) {
        let in_command = matches!(self.state, State::Command);
        if in_command && !self.count_command() {
            return;
        }
        // An over-long SASL response also ends the AUTH exchange.
        self.state = State::Command;
        let max = self.config.max_command_line;
        self.error(Reply::new(
            500,
            esc(5, 5, 6),
            format!("Line too long (limit {max} octets)"),
        ));
    }

    /// Counts a command; returns false (and closes) when over the limit.
    fn count_command(&mut self) -> bool {
        self.commands += 1;
        if self.commands > self.config.max_commands {
            let reply = Reply::new(421, esc(4, 7, 0), self.closing_text("Too many commands"));
            self.close(reply, CloseReason::TooManyCommands);
            return false;
        }
        true
    }

    fn line(&mut self, line: &[u8]) {
        match std::mem::replace(&mut self.state, State::Command) {
            State::AuthPlain => self.auth_plain_response(line),
            State::AuthLoginUser => self.auth_login_user(line),
            State::AuthLoginPassword(user) => self.auth_login_password(user, line),
            State::Command => self.command(line),
            other => self.state = other,
        }
    }

    fn command(&mut self, line: &[u8]) {
        if !self.count_command() {
            return;
        }
        if line.contains(&0) {
            return self.error(Reply::new(
                500,
                esc(5, 5, 2),
                "Syntax error: NUL octet in command",
            ));
        }
        if line.contains(&b'\r') {
            return self.error(Reply::new(
                500,
                esc(5, 5, 2),
                "Syntax error: bare CR in command",
            ));
        }
        let verb = line.split(|&b| b == b' ').next().unwrap_or(&[]);
        if verb.eq_ignore_ascii_case(b"XLZW") {
            return self.xlzw(&line[verb.len()..]);
        }
        let mut framed = Vec::with_capacity(line.len() + 2);
        framed.extend_from_slice(line);
        framed.extend_from_slice(b"\r\n");
        let parsed = Request::parse(&mut framed.iter()).map(Request::into_owned);
        match parsed {
            Ok(request) => self.request(request, line),
            Err(err @ (ParseError::InvalidSenderAddress | ParseError::InvalidRecipientAddress)) => {
                match reparse_with_literal_path(line) {
                    Some(Ok(request)) => self.request(request, line),
                    Some(Err(other)) => self.parse_error(other),
                    None => self.parse_error(err),
                }
            }
            Err(err) => self.parse_error(err),
        }
    }

    fn parse_error(&mut self, err: ParseError) {
        let reply = match err {
            ParseError::UnknownCommand => Reply::new(500, esc(5, 5, 2), "Command unrecognized"),
            ParseError::InvalidSenderAddress => {
                Reply::new(501, esc(5, 1, 7), "Bad sender address syntax")
            }
            ParseError::InvalidRecipientAddress => {
                Reply::new(501, esc(5, 1, 3), "Bad recipient address syntax")
            }
            ParseError::SyntaxError { syntax } => {
                Reply::new(501, esc(5, 5, 4), format!("Syntax: {syntax}"))
            }
            ParseError::InvalidParameter { param } => {
                Reply::new(501, esc(5, 5, 4), format!("Invalid {param} parameter"))
            }
            ParseError::UnsupportedParameter { param } => Reply::new(
                555,
                esc(5, 5, 4),
                format!("Unsupported parameter {}", printable(&param, 64)),
            ),
            ParseError::NeedsMoreData { .. }
            | ParseError::ResponseTooLong
            | ParseError::InvalidResponse { .. } => Reply::new(500, esc(5, 5, 2), "Syntax error"),
        };
        self.error(reply);
    }

    fn request(&mut self, request: Request<String>, line: &[u8]) {
        match request {
            Request::Ehlo { host } => self.hello(host, true),
            Request::Helo { host } => self.hello(host, false),
            Request::Mail { from } => self.mail(from, line),
            Request::Rcpt { to } => self.rcpt(to),
            Request::Data => self.data(),
            Request::Rset => {
                self.envelope = None;
                self.mail_refused = false;
                self.reply(Reply::new(250, esc(2, 0, 0), "Ok"));
            }
            Request::Noop { .. } => self.reply(Reply::new(250, esc(2, 0, 0), "Ok")),
            Request::Vrfy { .. } => self.reply(Reply::new(
                252,
                esc(2, 5, 0),
                "Cannot VRFY user, but will accept message and attempt delivery",
            )),
            Request::Help { .. } => {
                let mut commands =
                    "Commands: EHLO HELO MAIL RCPT DATA RSET NOOP QUIT VRFY HELP STARTTLS AUTH"
                        .to_owned();
                if self.config.xlzw && !self.config.reply_buffering {
                    commands.push_str(" XLZW");
                }
                self.reply(Reply {
                    code: 214,
                    enhanced: Some(esc(2, 0, 0)),
                    lines: vec![commands, "See RFC 5321".to_owned()],
                });
            }
            Request::Quit => {
                let text = format!("{} closing connection", self.config.hostname);
                self.close(Reply::new(221, esc(2, 0, 0), text), CloseReason::Quit);
            }
            Request::StartTls => self.starttls(),
            Request::Auth {
                mechanism,
                initial_response,
            } => self.auth(mechanism, initial_response),
            Request::Lhlo { .. }
            | Request::Bdat { .. }
            | Request::Expn { .. }
            | Request::Etrn { .. }
            | Request::Atrn { .. }
            | Request::Burl { .. } => {
                self.error(Reply::new(502, esc(5, 5, 1), "Command not implemented"));
            }
        }
    }

    /// JNOS `XLZW <bits> <mode>`: valid for mode 0 or 1 and 9 to 16 bits. The reply echoes the
    /// client's values and goes out uncompressed; everything after it, both ways, is LZW.
    fn xlzw(&mut self, args: &[u8]) {
        if !self.config.xlzw || self.config.reply_buffering {
            return self.error(Reply::new(500, esc(5, 5, 2), "Command unrecognized"));
        }
        if self.lzw.is_some() {
            return self.error(Reply::new(
                503,
                esc(5, 5, 1),
                "XLZW compression is already active",
            ));
        }
        let text = String::from_utf8_lossy(args);
        // JNOS reads "%d %d" with sscanf and ignores anything after; a missing mode leaves its
        // default (0, compact), so `XLZW 16` is accepted as `XLZW 16 0`.
        let mut words = text.split_ascii_whitespace().map(str::parse::<i64>);
        let params = match (words.next(), words.next()) {
            (Some(Ok(bits)), mode @ (None | Some(Ok(0 | 1)))) => u8::try_from(bits)
                .ok()
                .map(|bits| (bits, mode.and_then(Result::ok).unwrap_or(0))),
            _ => None,
        };
        let session = params.and_then(|(bits, mode)| {
            LzwSession::new(bits, lzw_limits())
                .ok()
                .map(|s| (bits, mode, s))
        });
        let Some((bits, mode, session)) = session else {
            return self.error(Reply::new(
                500,
                esc(5, 5, 4),
                "Syntax: XLZW <bits 9-16> <mode 0-1>",
            ));
        };
        self.reply(Reply::plain(250, format!("{bits} {mode} LZW Ok")));
        self.lzw = Some(session);
        self.lzw_switch = true;
    }

    fn starttls_offered(&self) -> bool {
        // STARTTLS under an LZW session would put the TLS records inside the compressed stream.
        self.config.starttls
            && !self.config.reply_buffering
            && self.info.tls.is_none()
            && self.lzw.is_none()
    }

    fn auth_offered(&self) -> bool {
        !self.config.reply_buffering
            && self.info.auth_user.is_none()
            && match self.config.auth {
                AuthMode::Disabled => false,
                AuthMode::AfterTls => self.info.tls.is_some(),
                AuthMode::AllowPlaintext => true,
            }
    }

    fn protocol(&self) -> Protocol {
        Protocol::from_session(
            self.info.esmtp,
            self.info.tls.is_some(),
            self.info.auth_user.is_some(),
        )
    }

    fn hello(&mut self, host: String, esmtp: bool) {
        self.envelope = None;
        self.mail_refused = false;
        self.info.helo = Some(host);
        self.info.esmtp = esmtp;
        let hostname = self.config.hostname.clone();
        if !esmtp {
            return self.hello_reply(Reply::plain(250, hostname));
        }
        let mut lines = vec![
            hostname,
            "PIPELINING".to_owned(),
            format!("SIZE {}", self.config.max_message_size),
            "ENHANCEDSTATUSCODES".to_owned(),
        ];
        if self.config.eight_bit_mime {
            lines.insert(3, "8BITMIME".to_owned());
        }
        if self.config.mt_priority {
            lines.push("MT-PRIORITY".to_owned());
        }
        if self.starttls_offered() {
            lines.push("STARTTLS".to_owned());
        }
        if self.auth_offered() {
            lines.push("AUTH PLAIN LOGIN".to_owned());
        }
        if self.config.dsn {
            lines.push("DSN".to_owned());
        }
        if self.config.smtputf8 {
            lines.push("SMTPUTF8".to_owned());
        }
        if self.config.session_sum {
            lines.push(sum::KEYWORD.to_owned());
        }
        lines.extend(self.config.extra_ehlo.iter().cloned());
        lines.push("HELP".to_owned());
        self.hello_reply(Reply {
            code: 250,
            enhanced: None,
            lines,
        });
    }

    fn mail(&mut self, from: MailFrom<String>, line: &[u8]) {
        // Until this MAIL is accepted, the RCPTs and DATA pipelined behind it are not blamed.
        self.mail_refused = true;
        if self.info.helo.is_none() {
            return self.error(Reply::new(503, esc(5, 5, 1), "Send HELO/EHLO first"));
        }
        if self.envelope.is_some() {
            return self.error(Reply::new(503, esc(5, 5, 1), "Nested MAIL command"));
        }
        let dsn_flags = if self.config.dsn {
            MAIL_RET_FULL | MAIL_RET_HDRS
        } else {
            0
        };
        let utf8_flag = if self.config.smtputf8 {
            MAIL_SMTPUTF8
        } else {
            0
        };
        let body_flags = if self.config.eight_bit_mime {
            MAIL_BODY_7BIT | MAIL_BODY_8BITMIME
        } else {
            0
        };
        let unsupported = from.flags & !(body_flags | dsn_flags | utf8_flag) != 0
            || from.trans_id.is_some()
            || from.by != 0
            || (from.env_id.is_some() && !self.config.dsn)
            || from.solicit.is_some()
            || from.mtrk.is_some()
            || (from.auth.is_some() && !self.auth_offered() && self.info.auth_user.is_none())
            || from.hold_for != 0
            || from.hold_until != 0;
        let upper = line.to_ascii_uppercase();
        let has_priority = contains(&upper, b"MT-PRIORITY=");
        let has_params = from.size != 0 || from.flags != 0 || from.env_id.is_some() || has_priority;
        if unsupported
            || (has_priority && !self.config.mt_priority)
            || (has_params && !self.info.esmtp)
        {
            return self.error(Reply::new(
                555,
                esc(5, 5, 4),
                "MAIL parameters not recognized or not implemented",
            ));
        }
        let dsn = match MailDsn::from_mail(&from) {
            Ok(d) => d,
            Err(why) => return self.error(Reply::new(501, esc(5, 5, 4), why)),
        };
        let mt_priority = if has_priority {
            match i8::try_from(from.mt_priority) {
                Ok(p) if (-9..=9).contains(&p) => Some(p),
                _ => {
                    return self.error(Reply::new(
                        501,
                        esc(5, 5, 4),
                        "Invalid MT-PRIORITY value (must be -9 to 9)",
                    ));
                }
            }
        } else {
            None
        };
        if from.size > self.config.max_message_size {
            return self.reply(Reply::new(
                552,
                esc(5, 3, 4),
                "Message size exceeds fixed maximum message size",
            ));
        }
        let body_type = if from.flags & MAIL_BODY_8BITMIME != 0 {
            BodyType::EightBitMime
        } else if from.flags & MAIL_BODY_7BIT != 0 {
            BodyType::SevenBit
        } else {
            BodyType::Unspecified
        };
        let smtputf8 = from.flags & MAIL_SMTPUTF8 != 0;
        let request = MailRequest {
            reverse_path: from.address,
            declared_size: (from.size != 0).then_some(from.size),
            body_type,
            mt_priority,
        };
        match self.policy.mail_from(&self.info, &request) {
            Verdict::Accept => {
                self.mail_refused = false;
                self.envelope = Some(Envelope {
                    reverse_path: request.reverse_path,
                    recipients: Vec::new(),
                    declared_size: request.declared_size,
                    body_type,
                    mt_priority,
                    helo: self.info.helo.clone().unwrap_or_default(),
                    protocol: self.protocol().utf8(smtputf8),
                    auth_user: self.info.auth_user.clone(),
                    dsn,
                    rcpt_dsn: Vec::new(),
                    smtputf8,
                });
                self.reply(Reply::new(250, esc(2, 1, 0), "Ok"));
            }
            Verdict::Reject(reply) => self.reply(reply),
        }
    }

    fn rcpt(&mut self, to: RcptTo<String>) {
        let Some(envelope) = self.envelope.as_ref() else {
            return self.sequence_error(Reply::new(503, esc(5, 5, 1), "Need MAIL before RCPT"));
        };
        let dsn_params = (to.flags != 0 || to.orcpt.is_some()) && self.config.dsn;
        if (to.flags != 0 || to.orcpt.is_some()) && !dsn_params
            || to.rrvs != 0
            || (dsn_params && !self.info.esmtp)
        {
            return self.error(Reply::new(
                555,
                esc(5, 5, 4),
                "RCPT parameters not recognized or not implemented",
            ));
        }
        let rcpt_dsn = match RcptDsn::from_rcpt(&to) {
            Ok(d) => d,
            Err(why) => return self.error(Reply::new(501, esc(5, 5, 4), why)),
        };
        if to.address.is_empty() {
            return self.error(Reply::new(501, esc(5, 1, 3), "Null recipient not allowed"));
        }
        if envelope.recipients.len() >= self.config.max_recipients {
            return self.reply(Reply::new(452, esc(4, 5, 3), "Too many recipients"));
        }
        match self.policy.rcpt_to(&self.info, envelope, &to.address) {
            Verdict::Accept => {
                if let Some(envelope) = self.envelope.as_mut() {
                    envelope.recipients.push(to.address);
                    envelope.rcpt_dsn.push(rcpt_dsn);
                }
                self.reply(Reply::new(250, esc(2, 1, 5), "Ok"));
            }
            Verdict::Reject(reply) => self.reply(reply),
        }
    }

    fn data(&mut self) {
        let refusal = match &self.envelope {
            None => Some((Reply::new(503, esc(5, 5, 1), "Need MAIL command"), true)),
            Some(env) if env.recipients.is_empty() => {
                Some((Reply::new(554, esc(5, 5, 1), "No valid recipients"), false))
            }
            Some(_) => None,
        };
        let limits = DataLimits {
            max_size: self.config.max_message_size,
            max_line: self.config.max_data_line,
        };
        match refusal {
            Some((reply, protocol_error)) => {
                if protocol_error {
                    self.sequence_error(reply);
                } else {
                    self.reply(reply);
                }
                if self.config.reply_buffering && !self.is_closed() {
                    // HMTP: the client sends the text without waiting for a 354.
                    self.state = State::Discard(DataReader::new(limits, true));
                }
            }
            None => {
                self.reply(Reply::plain(354, "End data with <CR><LF>.<CR><LF>"));
                self.state = State::Data(DataReader::new(limits, false));
            }
        }
    }

    fn end_of_data(&mut self) {
        let state = std::mem::replace(&mut self.state, State::Command);
        let reader = match state {
            State::Discard(_) => {
                // The refusal was sent for DATA already; the transaction is over.
                self.envelope = None;
                return;
            }
            State::Data(reader) => reader,
            other => {
                self.state = other;
                return;
            }
        };
        let faults = reader.faults();
        let fault_reply = if faults.contains(&DataFault::TooBig) {
            Some(Reply::new(
                552,
                esc(5, 3, 4),
                "Message size exceeds fixed maximum message size",
            ))
        } else if faults.contains(&DataFault::BareCrOrLf) {
            Some(Reply::new(
                550,
                esc(5, 6, 2),
                "Message contains bare CR or LF (RFC 5321 section 2.3.8)",
            ))
        } else if faults.contains(&DataFault::Nul) {
            Some(Reply::new(550, esc(5, 6, 0), "Message contains NUL octets"))
        } else if faults.contains(&DataFault::LineTooLong) {
            Some(Reply::new(
                550,
                esc(5, 6, 0),
                format!(
                    "Message contains a line longer than {} octets",
                    self.config.max_data_line
                ),
            ))
        } else {
            None
        };
        if let Some(reply) = fault_reply {
            self.envelope = None;
            return self.reply(reply);
        }
        match self.envelope.clone() {
            Some(envelope) => {
                self.events.push_back(Event::Message {
                    envelope,
                    body: reader.into_body(),
                });
                self.state = State::AwaitMessage;
            }
            None => self.reply(Reply::new(503, esc(5, 5, 1), "Need MAIL command")),
        }
    }

    fn starttls(&mut self) {
        if self.info.tls.is_some() && self.config.starttls {
            return self.error(Reply::new(554, esc(5, 5, 1), "TLS already active"));
        }
        if !self.starttls_offered() {
            return self.error(Reply::new(502, esc(5, 5, 1), "Command not implemented"));
        }
        if self.envelope.is_some() {
            return self.error(Reply::new(
                503,
                esc(5, 5, 1),
                "STARTTLS not allowed during a mail transaction",
            ));
        }
        self.reply(Reply::new(220, esc(2, 0, 0), "Ready to start TLS"));
        self.state = State::AwaitTls;
        self.input.clear();
        self.events.push_back(Event::StartTls);
    }

    fn auth(&mut self, mechanism: u64, initial: String) {
        if self.info.auth_user.is_some() {
            return self.error(Reply::new(503, esc(5, 5, 1), "Already authenticated"));
        }
        if !self.auth_offered() {
            if self.config.auth == AuthMode::AfterTls && !self.config.reply_buffering {
                return self.error(Reply::new(
                    538,
                    esc(5, 7, 11),
                    "Encryption required for requested authentication mechanism",
                ));
            }
            return self.error(Reply::new(502, esc(5, 5, 1), "Command not implemented"));
        }
        if self.info.helo.is_none() || !self.info.esmtp {
            return self.error(Reply::new(503, esc(5, 5, 1), "Send EHLO first"));
        }
        if self.envelope.is_some() {
            return self.error(Reply::new(
                503,
                esc(5, 5, 1),
                "AUTH not allowed during a mail transaction",
            ));
        }
        match mechanism {
            AUTH_PLAIN if initial.is_empty() => {
                self.reply(Reply::plain(334, ""));
                self.state = State::AuthPlain;
            }
            AUTH_PLAIN => self.auth_plain_response(initial.as_bytes()),
            AUTH_LOGIN if initial.is_empty() => {
                self.reply(Reply::plain(334, "VXNlcm5hbWU6"));
                self.state = State::AuthLoginUser;
            }
            AUTH_LOGIN => self.auth_login_user(initial.as_bytes()),
            _ => self.error(Reply::new(
                504,
                esc(5, 5, 4),
                "Unrecognized authentication type",
            )),
        }
    }

    /// Decodes one client SASL response; sends the error reply itself when it fails.
    fn sasl_response(&mut self, line: &[u8]) -> Option<Vec<u8>> {
        if line == b"*" {
            self.error(Reply::new(501, esc(5, 0, 0), "Authentication cancelled"));
            return None;
        }
        if line == b"=" {
            return Some(Vec::new());
        }
        // Strict: padding required, no white space, no stray bits (RFC 4954 §4 asks for
        // RFC 4648 base64, and a malformed response is refused with 501).
        match base64::engine::general_purpose::STANDARD.decode(line) {
            Ok(decoded) => Some(decoded),
            Err(_) => {
                self.error(Reply::new(501, esc(5, 5, 2), "Invalid base64 data"));
                None
            }
        }
    }

    fn auth_plain_response(&mut self, line: &[u8]) {
        let Some(decoded) = self.sasl_response(line) else {
            return;
        };
        let mut parts = decoded.split(|&b| b == 0);
        let (Some(authzid), Some(username), Some(password), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return self.error(Reply::new(501, esc(5, 5, 2), "Malformed PLAIN response"));
        };
        let credentials = Credentials {
            mechanism: AuthMechanism::Plain,
            authzid: (!authzid.is_empty()).then(|| String::from_utf8_lossy(authzid).into_owned()),
            username: String::from_utf8_lossy(username).into_owned(),
            password: String::from_utf8_lossy(password).into_owned(),
        };
        self.check_credentials(credentials);
    }

    fn auth_login_user(&mut self, line: &[u8]) {
        let Some(user) = self.sasl_response(line) else {
            return;
        };
        self.reply(Reply::plain(334, "UGFzc3dvcmQ6"));
        self.state = State::AuthLoginPassword(String::from_utf8_lossy(&user).into_owned());
    }

    fn auth_login_password(&mut self, username: String, line: &[u8]) {
        let Some(password) = self.sasl_response(line) else {
            return;
        };
        let credentials = Credentials {
            mechanism: AuthMechanism::Login,
            authzid: None,
            username,
            password: String::from_utf8_lossy(&password).into_owned(),
        };
        self.check_credentials(credentials);
    }

    fn check_credentials(&mut self, credentials: Credentials) {
        if self.policy.authenticate(&self.info, &credentials) {
            self.info.auth_user = Some(credentials.username.clone());
            self.events.push_back(Event::Authenticated {
                username: credentials.username,
            });
            self.reply(Reply::new(235, esc(2, 7, 0), "Authentication successful"));
        } else {
            self.error(Reply::new(
                535,
                esc(5, 7, 8),
                "Authentication credentials invalid",
            ));
        }
    }
}

/// A MAIL or RCPT whose path smtp-proto refused but which is an RFC 5321 address literal or a
/// bang path ([`crate::address`]): parsed with a placeholder path, then given the real one. None
/// when the path is not one of those forms either.
fn reparse_with_literal_path(line: &[u8]) -> Option<Result<Request<String>, ParseError>> {
    let (mut rewritten, address) = address::rewrite_path(line)?;
    rewritten.extend_from_slice(b"\r\n");
    let parsed = Request::parse(&mut rewritten.iter()).map(Request::into_owned);
    Some(match parsed {
        Ok(Request::Mail { mut from }) => {
            from.address = address;
            Ok(Request::Mail { from })
        }
        Ok(Request::Rcpt { mut to }) => {
            to.address = address;
            Ok(Request::Rcpt { to })
        }
        Ok(_) => Err(ParseError::SyntaxError {
            syntax: "MAIL FROM:<address> or RCPT TO:<address>",
        }),
        Err(e) => Err(e),
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn printable(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max && s.chars().all(|c| c.is_ascii_graphic()) {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(
            s.chars()
                .take(max)
                .map(|c| if c.is_ascii_graphic() { c } else { '?' })
                .collect(),
        )
    }
}
