//! STANAG 5066 Annex A Subnetwork Interface Sublayer (SIS) for skywave.
//!
//! Sits at the bottom of skywave's HF stack: every byte the gateway sends over a STANAG 5066
//! subnetwork passes through here on its way to a 5066 server (a vendor's, or the bundled
//! emulator in `skywave-emu`).
