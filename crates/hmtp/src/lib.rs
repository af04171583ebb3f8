//! HMTP (STANAG 5066 Annex F, SAP 3) and CFTP (SAP 12) sessions, sans-IO.
//!
//! Sits between the gateway's per-peer link scheduler and the SIS bearer: turns a batch of spooled
//! messages into one pipelined, optionally compressed submission and parses the batched replies.
//!
//! - [`cftp`]: the CFTP byte layouts (mail-file, BFTPv1, RCOPv1, acknowledgement), segmenting and
//!   reassembly.
//! - [`cftp_session`]: the CFTP sender (files in flight, ack timeouts, retransmission) and
//!   receiver session (spool ordering, de-duplication, acknowledgements).
//! - [`client`]: the HMTP client: one batch in one (optionally compressed) submission, outcomes
//!   per recipient, and the batch byte budget.
//! - [`server`]: the HMTP server: scheme detection, HMTP-66 reply buffering (or standard RFC 2920
//!   for a client that waits for the EHLO reply), spool ordering, de-duplication.
//! - [`dedup`]: the receiver's de-duplication cache.
//! - [`collision`]: what two nodes do when their sessions cross, and which stream is which.
//! - [`cut`]: skywave's `XCUT`, a marker that gives up a session a lost link cut short, so
//!   the next one need not wait for the server's timeout.
//! - [`resume`]: skywave's `XRESUME`, which goes on with a cut session from where the peer's
//!   node had it instead of sending it again whole.
//! - [`stream`]: compression choice, U_PDU cutting and counts shared by client and server.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use skywave_hmtp::*;
//! use skywave_smtp::AcceptAll;
//!
//! let now = Instant::now();
//! let batch = vec![BatchMessage {
//!     id: "Q1".into(),
//!     reverse_path: "a@ship.example".into(),
//!     recipients: vec!["b@shore.example".into()],
//!     body: b"Subject: hi\r\n\r\nHello\r\n".to_vec(),
//!     eight_bit: false,
//!     dsn: Default::default(),
//!     rcpt_dsn: Vec::new(),
//! }];
//! let mut client =
//!     HmtpClient::new(ClientSettings::new("ship", 200, Compression::Deflate), batch)?;
//! let mut server = HmtpServer::new(ServerSettings::new("shore", 200), AcceptAll, now)?;
//! let mut dedup = DedupCache::new(Duration::from_secs(86_400), 100_000);
//! for updu in client.transmission() {
//!     server.receive(now, &updu, &mut dedup);
//!     while let Some(event) = server.poll_event() {
//!         if let ServerEvent::Message(m) = event {
//!             // ... write m.body to the spool and fsync, then:
//!             server.accepted(m.ticket, "S1", now, &mut dedup)?;
//!         }
//!     }
//! }
//! let replies = server.take_transmission().unwrap_or_default(); // one transmission
//! for updu in &replies {
//!     client.receive(updu);
//! }
//! let outcome = client.outcome().ok_or("unfinished")?;
//! assert!(matches!(outcome.messages[0].recipients[0].1, Disposition::Delivered(_)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod cftp;
pub mod cftp_session;
pub mod client;
pub mod collision;
pub mod cut;
pub mod dedup;
pub mod error;
pub mod resume;
pub mod server;
pub mod stream;

pub use cftp_session::{
    AckOutcome, CftpReceiverEvent, CftpReceiverSession, CftpReceiverSettings, CftpReceiverStats,
    CftpSender, CftpSenderSettings, CftpSenderStats, CftpSessionError, CftpTicket,
    DEFAULT_BUNDLE_BYTES, DEFAULT_SKYWAVE_BUNDLE, DEFAULT_SKYWAVE_IN_FLIGHT, IncomingFile,
    cftp_message_id,
};
pub use client::{
    BatchMessage, BatchOutcome, ClientSettings, Disposition, HmtpClient, MessageResult, SessionEnd,
    select_batch,
};
pub use collision::{Arbiter, IncomingAction, StreamStart, classify_stream_start};
pub use dedup::{DedupCache, DedupKey};
pub use error::{CftpError, HmtpError};
pub use server::{
    HmtpServer, IncomingMessage, ServeMode, ServerEnd, ServerEvent, ServerSettings, SpoolTicket,
};
pub use stream::{Compression, DirectionStats};
