//! The skywave daemon's wiring: the LAN side (SMTP listener, spool, LAN delivery), metrics and
//! status; the HF side (link scheduler per peer, bearers) comes with the issue "Mail over the
//! air".
//!
//! - [`config`]: `skywave.toml`, with compiler-style errors.
//! - [`smtp_listener`]: the LAN SMTP front end (relay control, STARTTLS, AUTH, spooling).
//! - [`delivery`]: LAN delivery into a Maildir or to the smarthost.
//! - [`metrics`]: Prometheus counters and the endpoint.
//! - [`daemon`]: `skywave run` (start-up, SIGHUP reload, graceful shutdown).
//! - [`status`]: `skywave status`.
//!
//! Mail for HF peers is queued and stays in the spool until the link scheduler exists.

pub(crate) mod blocking;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod delivery;
pub mod demo;
pub mod emcon;
pub mod fleet;
pub mod hf;
pub mod intake;
pub mod maildir;
pub mod metrics;
pub mod outcome;
pub mod smtp_listener;
pub mod status;
pub mod tcp_bearer;

pub use config::{Config, ConfigError};
