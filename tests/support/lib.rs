//! Shared helpers for skywave's end-to-end tests (tests/*.rs): locating binaries and tools,
//! writing pcaps of captured traffic.
