//! Sans-IO SMTP sessions for skywave.
//!
//! The server session serves the LAN listener, the HMTP server and the SMTP-over-TCP baseline; the
//! client session serves LAN delivery and the SMTP-over-TCP bearer (lockstep, RFC 2920 pipelining,
//! XLZW). Bytes and time in, bytes and events out; no sockets here.
//!
//! Not yet implemented: this crate is filled by the issue "The gateway's LAN side".
