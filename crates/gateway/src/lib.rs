//! The skywave daemon's wiring: LAN listeners, spool, routing, per-peer link schedulers,
//! bearers (SIS, TCP) and LAN delivery, metrics and status.
//!
//! Not yet implemented: this crate is filled by the issues "The gateway's LAN side" and
//! "Mail over the air".
