//! The bundled HF emulator: channel, MIL-STD-188-110 modem and STANAG 5066 nodes in virtual time.
//!
//! Stands in for radios, modems and 5066 servers in the demo, the end-to-end tests and the
//! benchmarks. Discrete-event on `tokio::time`, deterministic for a given seed.
//!
//! Not yet implemented: this crate is filled by the issue "The bundled HF emulator".
