//! The routing table: which domains and addresses go to which HF peer or to the LAN.
//!
//! TOML edited by people, validated with file:line:column errors, looked up most-specific-first,
//! and explained on request (`skywave routes check FILE`, `skywave routes explain FILE ADDRESS`).
//! The gateway's SMTP front end asks [`RoutingTable::relay_decision`] for every `RCPT TO`; the
//! spool and link scheduler use [`RoutingTable::route`] to pick the peer, protocol and priority.
//!
//! `config/routes.toml` in the repository is the documented example (a ship gateway with a shore
//! peer); every key is explained there, and the tests load it to keep it valid.
//!
//! ```toml
//! [lan]
//! domains = ["ship.navy.example"]          # mail for us: delivered on the LAN
//! relay_networks = ["10.1.0.0/16"]         # LAN clients that may send to HF peers
//!
//! [[peer]]
//! name = "shore"
//! node = "0.0.1.1"                         # its STANAG 5066 address
//! protocol = "hmtp"
//! skywave = true
//! compression = "deflate"
//!
//! [[route]]
//! match = "*"                              # everything else goes ashore
//! to = "shore"
//! ```
//!
//! Modules, from the bottom: [`address`] (recipient parsing and relay-trick refusal),
//! [`pattern`] (rule patterns), [`schedule`] (a peer's or a group's radio schedule), [`model`]
//! (peers and the LAN side), `config` (the TOML file and its checks), [`diag`]
//! (compiler-style messages), and the table with lookup and explain.
//!
//! Reload: a [`RoutingTable`] is immutable. [`SharedRoutes`] holds the current one behind an
//! `Arc`; the daemon calls [`SharedRoutes::reload`] on SIGHUP, which swaps in the new table only
//! if it loads without errors. Sessions in progress keep the `Arc` they took, so no connection
//! or message sees a half-changed table.

pub mod address;
mod config;
pub mod diag;
pub mod model;
pub mod pattern;
pub mod schedule;
mod table;

use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};

pub use address::{Address, AddressError, DomainError, Refusal};
pub use config::{
    DEFAULT_BATCH_BYTES, DEFAULT_RELAY_NETWORKS, DEFAULT_SIZE_LIMIT, LAN, MAX_FILE_SIZE,
};
pub use diag::{Diagnostic, Severity};
pub use model::{
    AckMode, Bearer, Cidr, Compression, DEFAULT_FALLBACK_AFTER, DEFAULT_GROUP_REPEATS,
    DEFAULT_PROBE_EVERY, Fallback, Group, GroupBearer, Lan, NodeAddress, Peer, Priority, Protocol,
    duration_text, parse_duration, parse_group_node, parse_peer_node, pmul_ip_id, pool_address,
};
pub use pattern::{Pattern, PatternKind};
pub use schedule::{Schedule, ScheduleError, ScheduleState};
pub use table::{
    Candidate, CandidateRule, Destination, Explanation, LookupError, MulticastLeg, Plan,
    RelayCheck, RelayDecision, Route, RouteSummary, RoutingTable, Rule, RuleOrigin,
};

/// Why a routing table could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{path}: cannot read the routing table: {source}")]
    Io {
        /// The path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid; every diagnostic (errors and warnings) is listed.
    #[error("{}", render(.0))]
    Invalid(Vec<Diagnostic>),
}

impl LoadError {
    /// The diagnostics of an invalid table (empty for an I/O error).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            LoadError::Io { .. } => &[],
            LoadError::Invalid(d) => d,
        }
    }

    /// The number of errors (not warnings).
    pub fn error_count(&self) -> usize {
        match self {
            LoadError::Io { .. } => 1,
            LoadError::Invalid(d) => d.iter().filter(|d| d.severity == Severity::Error).count(),
        }
    }
}

fn render(diagnostics: &[Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

impl RoutingTable {
    /// Parses and checks a routing table from text; `file` names it in diagnostics.
    pub fn parse(file: &str, text: &str) -> Result<RoutingTable, LoadError> {
        config::parse(file, text).map_err(LoadError::Invalid)
    }

    /// Reads, parses and checks a routing table file.
    pub fn load(path: &Path) -> Result<RoutingTable, LoadError> {
        let name = path.display().to_string();
        let io = |source| LoadError::Io {
            path: name.clone(),
            source,
        };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > MAX_FILE_SIZE as u64 {
            return Err(LoadError::Invalid(vec![Diagnostic {
                severity: Severity::Error,
                file: name.clone(),
                line: 1,
                column: 1,
                message: format!(
                    "file is {len} bytes; a routing table may be at most {MAX_FILE_SIZE} bytes"
                ),
                source_line: String::new(),
                width: 1,
            }]));
        }
        let bytes = std::fs::read(path).map_err(io)?;
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => {
                let offset = e.utf8_error().valid_up_to();
                let valid = String::from_utf8_lossy(e.as_bytes()).into_owned();
                return Err(LoadError::Invalid(vec![Diagnostic::at(
                    Severity::Error,
                    &name,
                    &valid,
                    offset..offset + 1,
                    "the file is not valid UTF-8; TOML files must be UTF-8".to_owned(),
                )]));
            }
        };
        Self::parse(&name, &text)
    }
}

/// The current routing table, shared by every session and swapped whole on reload.
///
/// Readers take an `Arc` with [`SharedRoutes::current`] and keep it for as long as they need a
/// consistent view (one SMTP transaction, one HF batch); a reload never changes a table in use.
#[derive(Debug)]
pub struct SharedRoutes {
    current: RwLock<Arc<RoutingTable>>,
}

impl SharedRoutes {
    /// Starts with `table`.
    pub fn new(table: RoutingTable) -> SharedRoutes {
        SharedRoutes {
            current: RwLock::new(Arc::new(table)),
        }
    }

    /// The table in force now. The lock is held only to clone the `Arc`.
    pub fn current(&self) -> Arc<RoutingTable> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Replaces the table; returns the previous one.
    pub fn replace(&self, table: RoutingTable) -> Arc<RoutingTable> {
        let mut guard = self.current.write().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut *guard, Arc::new(table))
    }

    /// Loads `path` and, if it is valid, swaps it in and returns the new table (its warnings
    /// are in [`RoutingTable::warnings`]). On error the table in force is kept.
    pub fn reload(&self, path: &Path) -> Result<Arc<RoutingTable>, LoadError> {
        let table = Arc::new(RoutingTable::load(path)?);
        let mut guard = self.current.write().unwrap_or_else(PoisonError::into_inner);
        *guard = Arc::clone(&table);
        Ok(table)
    }
}
