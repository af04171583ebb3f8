//! Sans-IO SMTP sessions for skywave.
//!
//! The server session ([`server::ServerSession`]) serves the LAN listener, the HMTP server and the
//! SMTP-over-TCP baseline; the client session ([`client::ClientSession`]) serves LAN delivery, the
//! SMTP-over-TCP bearer and the HMTP client (lockstep, RFC 2920 pipelining, whole-batch). Bytes
//! and time in, bytes, events and deadlines out: no sockets, no TLS, no clock in this crate.
//!
//! - [`reply`]: the reply type, its wire form and a bounded reply parser.
//! - [`data`]: dot-stuffing and the streaming DATA reader (end of data only at CRLF.CRLF).
//! - [`dsn`]: the DSN extension's parameters (RFC 3461: `NOTIFY`, `ORCPT`, `RET`, `ENVID`).
//! - [`downgrade`]: an 8-bit message made 7-bit for a server without `8BITMIME` (RFC 6152).
//! - [`strip`]: header fields left out on the air (DKIM signatures, ARC seals, `X-` fields).
//! - [`server`]: the server session with its policy hook, limits and HMTP-66 reply buffering.
//! - [`client`]: the client session.
//! - [`received`]: the `Received:` trace header and RFC 5322 dates.
//! - [`sum`]: skywave's `XSUM`, which ties a batch session's replies to the session they answer.
//!
//! ```
//! use std::time::Instant;
//! use skywave_smtp::{AcceptAll, Event, ServerConfig, ServerSession};
//!
//! let now = Instant::now();
//! let mut server = ServerSession::new(ServerConfig::hmtp("gw.example"), AcceptAll, now);
//! server.feed(now, b"EHLO ship\r\nMAIL FROM:<a@ship>\r\nRCPT TO:<b@shore>\r\nDATA\r\nHi\r\n.\r\n");
//! let Some(Event::Message { envelope, body }) = server.poll_event() else { unreachable!() };
//! assert_eq!((envelope.recipients.len(), &body[..]), (1, &b"Hi\r\n"[..]));
//! server.message_accepted("Q1").unwrap(); // once the spool has it on disk
//! assert!(server.take_output().is_empty()); // HMTP-66: replies wait for QUIT
//! server.feed(now, b"QUIT\r\n");
//! // The HMTP profile's 221 names how many octets it read and their CRC-64 (XSUM, see `sum`).
//! let read = b"EHLO ship\r\nMAIL FROM:<a@ship>\r\nRCPT TO:<b@shore>\r\nDATA\r\nHi\r\n.\r\nQUIT\r\n";
//! let tag = format!("XSUM={}:{:016x}", read.len(), skywave_smtp::sum::of(read));
//! let out = String::from_utf8(server.take_output()).unwrap();
//! assert!(out.ends_with(&format!("221 2.0.0 gw.example closing connection {tag}\r\n")));
//! ```
//!
//! Both sessions speak the JNOS `XLZW` extension (LZW compression of both directions, codec in
//! `skywave-compress`) inside the session: callers feed and take wire bytes either way.
//!
//! Paths that smtp-proto's parser refuses but RFC 5321 allows (address literals such as
//! `user@[192.0.2.1]` and `user@[IPv6:2001:db8::1]`) and UUCP bang paths (`host!user`) reach the
//! [`Policy`], which decides whether they are routed; malformed paths get `501`.

mod address;
pub mod client;
pub mod data;
pub mod downgrade;
pub mod dsn;
pub mod received;
pub mod reply;
pub mod server;
pub mod shrink;
pub mod strip;
pub mod sum;

pub use client::{
    ClientConfig, ClientError, ClientEvent, ClientMode, ClientSession, Extensions, MessageOutcome,
    OutgoingMessage, RecipientOutcome, RecipientStatus,
};
pub use data::dot_stuff;
pub use dsn::{MailDsn, Notify, RcptDsn, Ret};
pub use received::{DateTime, Protocol, ReceivedInfo, received_header, rfc5322_date};
pub use reply::{EnhancedCode, Reply, ReplyError, ReplyParser};
pub use server::{
    AcceptAll, AuthMechanism, AuthMode, BodyType, CloseReason, Credentials, Envelope, Event,
    MailRequest, Policy, ServerConfig, ServerSession, SessionError, SessionInfo, TlsInfo, Verdict,
};
