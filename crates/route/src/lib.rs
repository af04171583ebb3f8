//! The routing table: which domains and addresses go to which HF peer or to the LAN.
//!
//! TOML edited by people, validated with file:line:column errors, looked up most-specific-first,
//! and explained on request (`skywave routes explain`).
//!
//! Not yet implemented: this crate is filled by the issue "The gateway's LAN side".
