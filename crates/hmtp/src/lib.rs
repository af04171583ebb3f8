//! HMTP (STANAG 5066 Annex F, SAP 3) and CFTP (SAP 12) sessions, sans-IO.
//!
//! Sits between the gateway's per-peer link scheduler and the SIS bearer: turns a batch of spooled
//! messages into one pipelined, optionally compressed submission and parses the batched replies.
//!
//! Not yet implemented: this crate is filled by the issue "Mail over the air".
