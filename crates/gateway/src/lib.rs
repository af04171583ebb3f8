//! The skywave daemon's wiring: the LAN side (SMTP listener, spool, LAN delivery), the HF side
//! (a link scheduler per peer over its bearer), metrics and status.
//!
//! - [`config`]: `skywave.toml`, with compiler-style errors.
//! - [`smtp_listener`]: the LAN SMTP front end (relay control, STARTTLS, AUTH, spooling), and
//!   [`intake`], what it and the HF side share to take a message into the spool.
//! - [`delivery`], [`maildir`] and [`smarthost`]: LAN delivery into a Maildir or to the
//!   smarthost (a connection per round, a reply per recipient, DSN, AUTH, TLS).
//! - [`hf`]: the HF side: SIS endpoints, one link per peer (HMTP, CFTP, P_MUL), transfer
//!   records; [`tcp_bearer`] for SMTP peers over TCP/IP (JNOS, XLZW).
//! - [`outcome`]: what a delivery attempt did to each recipient, applied to the spool.
//! - [`fallback`]: a peer's mail that waited too long goes to the peer behind it, and
//!   [`heard`], what our sessions heard from each peer, which moves it sooner and back.
//! - [`emcon`]: the EMCON switch.
//! - [`metrics`]: Prometheus counters and the endpoint.
//! - [`daemon`]: `skywave run` (start-up, SIGHUP reload, graceful shutdown).
//! - [`status`]: `skywave status`; [`check`]: `skywave check`, the configuration checked as a
//!   whole before a restart.
//! - [`demo`] and [`fleet`]: gateways over the bundled emulator, for `skywave demo`, the tests
//!   and the benchmarks.
//! - [`clock`]: the one clock, tokio time counted from the wall clock at start.
//! - `durable`: small state files replaced whole and durably; `blocking`: file work off the
//!   runtime's threads, or inline in simulations.

pub(crate) mod blocking;
pub mod check;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod delivery;
pub mod demo;
pub(crate) mod durable;
pub mod emcon;
pub mod fallback;
pub mod fleet;
pub mod heard;
pub mod hf;
pub mod intake;
pub mod maildir;
pub mod metrics;
pub mod outcome;
pub mod smarthost;
pub mod smtp_listener;
pub mod status;
pub mod tcp_bearer;

pub use config::{Config, ConfigError};
