//! The durable store-and-forward mail queue of a skywave gateway.
//!
//! Postfix-style: one file per message, written to a temporary name, fsynced, renamed into the
//! queue, directory fsynced; state changes by rename. "250 OK" is said only once a message is here.
//!
//! Not yet implemented: this crate is filled by the issue "The gateway's LAN side".
