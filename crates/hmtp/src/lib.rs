//! HMTP (STANAG 5066 Annex F, SAP 3) and CFTP (SAP 12) sessions, sans-IO.
//!
//! Sits between the gateway's per-peer link scheduler and the SIS bearer: turns a batch of spooled
//! messages into one pipelined, optionally compressed submission and parses the batched replies.
//!
//! - [`cftp`]: the CFTP byte layouts (mail-file, BFTPv1, RCOPv1, acknowledgement), segmenting and
//!   reassembly.
//!
//! Not yet here: the HMTP client and server sessions and the CFTP session logic (issue "Mail over
//! the air").

pub mod cftp;
pub mod error;

pub use error::CftpError;
