//! Client settings: what to bind, how long to wait, how to back off between reconnections.

use std::time::Duration;

use crate::decode::DEFAULT_MAX_SIZE;
use crate::fields::{Rank, SapId, ServiceType};
use crate::filter::FilterConfig;

/// Exponential backoff between reconnection attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay before the first attempt after a loss.
    pub initial: Duration,
    /// Upper bound of the delay.
    pub max: Duration,
    /// Factor applied after each failed attempt (at least 1).
    pub factor: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
            factor: 2,
        }
    }
}

impl Backoff {
    /// The delay after `delay`, capped.
    pub fn next(&self, delay: Duration) -> Duration {
        delay.saturating_mul(self.factor.max(1)).min(self.max)
    }
}

/// Everything the client needs besides the transport.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// SAP to bind.
    pub sap: SapId,
    /// Rank to bind with (do not use 15 unless you manage the node).
    pub rank: Rank,
    /// Service type of the bind (used by U_PDUs sent in mode "default").
    pub service: ServiceType,
    /// Limit on one connection attempt (TCP connect or whatever the connector does).
    pub connect_timeout: Duration,
    /// Limit on waiting for S_BIND_ACCEPTED / S_BIND_REJECTED.
    pub bind_timeout: Duration,
    /// Reconnection backoff.
    pub backoff: Backoff,
    /// Duplicate-datagram filter (default: SAP 9 only).
    pub filter: FilterConfig,
    /// Largest Size field accepted from the server.
    pub max_frame_size: u16,
    /// Most U_PDUs held while the server has flow off or the connection is down.
    pub queue_limit: usize,
}

impl ClientConfig {
    /// Defaults for binding `sap` with `service`: rank 0, 10 s connect and bind timeouts,
    /// 1-60 s backoff, filter on SAP 9, queue of 1024 U_PDUs.
    pub fn new(sap: SapId, service: ServiceType) -> Self {
        ClientConfig {
            sap,
            rank: Rank::default(),
            service,
            connect_timeout: Duration::from_secs(10),
            bind_timeout: Duration::from_secs(10),
            backoff: Backoff::default(),
            filter: FilterConfig::default(),
            max_frame_size: DEFAULT_MAX_SIZE,
            queue_limit: 1024,
        }
    }
}
