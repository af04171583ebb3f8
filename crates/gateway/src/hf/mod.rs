//! The HF side of the gateway: one link scheduler per peer, over the SIS bearer.
//!
//! [`Hf::start`] reads the peers from the routing table and starts, for every peer using
//! the `sis` bearer, a link task (HMTP on SAP 3, `hmtp_link`; CFTP on SAP 12, `cftp_link`)
//! fed by an SIS [`Endpoint`] (one per SIS server and SAP). Each link pulls its peer's mail from the spool, runs the
//! sessions, records every recipient's outcome and writes a [`TransferRecord`] per session.
//!
//! Peers added to the routing table by a reload get their link at the next start; a reload
//! does change the settings (compression, batch budget, hold) of running links, which read the
//! table at every session.

mod cftp_link;
mod dedup_store;
mod hmtp_link;
pub mod sis;
mod tcp_link;
pub mod transfer;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use skywave_route::{Bearer, Protocol, SharedRoutes};
use skywave_sis::{NodeAddress, SapId};
use skywave_spool::{DueMessage, Target};
use tokio::sync::{Notify, mpsc, watch};
use tracing::{error, info, warn};

pub use sis::{Endpoint, LinkInput, SisConnect};
pub use transfer::{Direction, TransferLog, TransferRecord};

use crate::clock::Clock;
use crate::config::HfConfig;
use crate::intake::Intake;
use crate::outcome::Recorder;

/// What the links share.
#[derive(Debug)]
pub struct HfContext {
    /// Our host name (EHLO, replies).
    pub hostname: String,
    /// The state directory (transfer log, de-duplication memory).
    pub state_dir: PathBuf,
    /// `[hf]` settings.
    pub config: HfConfig,
    /// The routing table.
    pub routes: Arc<SharedRoutes>,
    /// Where received mail goes.
    pub intake: Arc<Intake>,
    /// Where outcomes go.
    pub recorder: Arc<Recorder>,
    /// Woken when mail for an HF peer has been queued.
    pub wake: Arc<Notify>,
    /// The gateway's clock.
    pub clock: Clock,
    /// Where transfer records go (`state_dir/transfers.jsonl`).
    pub transfers: Arc<TransferLog>,
}

impl HfContext {
    /// When to look at `target`'s queue next: the spool's next due time, at most `cap`.
    async fn next_due(&self, target: &Target, cap: tokio::time::Instant) -> tokio::time::Instant {
        let spool = Arc::clone(&self.intake.spool);
        let t = target.clone();
        let next = tokio::task::spawn_blocking(move || spool.next_due(&t))
            .await
            .ok()
            .and_then(Result::ok)
            .flatten();
        next.map_or(cap, |t| self.clock.instant_of(t).min(cap))
    }

    /// Takes the mail due for `target` (priority order, within `budget` bytes, skipping the
    /// queue ids in `skip`), marks it in flight and loads it: what a session will carry.
    /// `None` when the spool cannot be read (logged).
    async fn take_due(
        &self,
        target: &Target,
        budget: u64,
        skip: Vec<String>,
    ) -> Option<Vec<(DueMessage, Vec<u8>)>> {
        let spool = Arc::clone(&self.intake.spool);
        let t = target.clone();
        let now = self.clock.unix_now();
        let loaded = tokio::task::spawn_blocking(move || {
            let due = spool.due(&t, now, budget)?;
            let mut out = Vec::with_capacity(due.len());
            for d in due {
                if skip.iter().any(|s| s == d.id.as_str()) {
                    continue;
                }
                spool.mark_in_flight(&d.id, &d.recipients, now)?;
                let (_, file) = spool.load(&d.id)?;
                out.push((d, file.message));
            }
            Ok::<_, skywave_spool::Error>(out)
        })
        .await;
        match loaded {
            Ok(Ok(l)) => Some(l),
            other => {
                warn!(?other, "cannot read the spool");
                None
            }
        }
    }
}

/// The HF side is misconfigured.
#[derive(Debug, thiserror::Error)]
pub enum HfError {
    /// A peer needs our own node address.
    #[error(
        "peer {peer} uses STANAG 5066, so this gateway needs its own node address: set node = \"w.x.y.z\" under [hf] in the gateway configuration"
    )]
    NoLocalNode {
        /// The peer.
        peer: String,
    },
    /// A peer has no node address.
    #[error("peer {peer} uses STANAG 5066 but has no node address in the routing table")]
    NoPeerNode {
        /// The peer.
        peer: String,
    },
    /// Two peers share a node address on the same SIS server.
    #[error("peers {a} and {b} have the same node address {node}")]
    SameNode {
        /// One peer.
        a: String,
        /// The other.
        b: String,
        /// The address.
        node: NodeAddress,
    },
}

/// The running HF side.
#[derive(Debug)]
pub struct Hf {
    transfers: Arc<TransferLog>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Hf {
    /// Starts the links of every HF peer in the routing table (`None` when there are none).
    pub fn start(
        ctx: HfContext,
        connect: SisConnect,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Option<Hf>, HfError> {
        let table = ctx.routes.current();
        let transfers = Arc::clone(&ctx.transfers);
        let ctx = Arc::new(ctx);
        // Group the SIS peers by (server, SAP).
        struct LinkPlan {
            name: String,
            node: NodeAddress,
            tx: mpsc::UnboundedSender<LinkInput>,
            rx: mpsc::UnboundedReceiver<LinkInput>,
        }
        let mut groups: HashMap<(String, u8), Vec<LinkPlan>> = HashMap::new();
        let mut tcp_peers: Vec<(String, String)> = Vec::new();
        for peer in table.peers() {
            let (server, sap) = match (&peer.bearer, peer.protocol) {
                (Bearer::Sis { server }, Protocol::Hmtp) => (
                    server
                        .clone()
                        .unwrap_or_else(|| ctx.config.sis_server.clone()),
                    SapId::HMTP,
                ),
                (Bearer::Sis { server }, Protocol::Cftp) => (
                    server
                        .clone()
                        .unwrap_or_else(|| ctx.config.sis_server.clone()),
                    SapId::CFTP,
                ),
                (Bearer::Sis { .. }, Protocol::Smtp) => {
                    warn!(peer = %peer.name, "SMTP peers are reached over TCP/IP (bearer = \"tcp\"); its mail stays queued");
                    continue;
                }
                (Bearer::Tcp { address }, _) => {
                    tcp_peers.push((peer.name.clone(), address.clone()));
                    continue;
                }
            };
            if ctx.config.node.is_none() {
                // Not fatal: the LAN side works, and the mail waits in the spool (visible in
                // `skywave status`) until the configuration is completed and reloaded by a
                // restart. Said loudly, once per peer.
                error!(
                    "{}; mail for {} stays queued",
                    HfError::NoLocalNode {
                        peer: peer.name.clone()
                    },
                    peer.name
                );
                continue;
            }
            let node = peer.node.ok_or_else(|| HfError::NoPeerNode {
                peer: peer.name.clone(),
            })?;
            let group = groups.entry((server, sap.get())).or_default();
            if let Some(other) = group.iter().find(|p| p.node == node) {
                return Err(HfError::SameNode {
                    a: other.name.clone(),
                    b: peer.name.clone(),
                    node,
                });
            }
            let (tx, rx) = mpsc::unbounded_channel();
            group.push(LinkPlan {
                name: peer.name.clone(),
                node,
                tx,
                rx,
            });
        }
        // Messages still queued count as accepted for de-duplication (see dedup_store).
        let queued = if groups.is_empty() {
            Vec::new()
        } else {
            dedup_store::spool_keys(&ctx.intake.spool)
        };
        let mut tasks = Vec::new();
        for (name, address) in tcp_peers {
            info!(peer = %name, %address, "SMTP-over-TCP link starting");
            let link = tcp_link::TcpLink {
                name,
                address,
                ctx: Arc::clone(&ctx),
                shutdown: shutdown.clone(),
            };
            tasks.push(tokio::spawn(link.run()));
        }
        let local = match ctx.config.node {
            Some(l) => l,
            None if groups.is_empty() && !tasks.is_empty() => {
                return Ok(Some(Hf { transfers, tasks }));
            }
            None => return Ok(None),
        };
        for ((server, sap), plans) in groups {
            let Ok(sap) = SapId::new(sap) else { continue };
            let links = plans.iter().map(|p| (p.node, p.tx.clone())).collect();
            let (endpoint, task) = Endpoint::start(
                connect.clone(),
                server.clone(),
                sap,
                links,
                shutdown.clone(),
            );
            tasks.push(task);
            for p in plans {
                let dedup = dedup_store::DedupStore::open(
                    ctx.state_dir.join("dedup"),
                    &p.name,
                    ctx.config.dedup_window,
                    ctx.clock,
                    &queued,
                );
                if sap == SapId::CFTP {
                    info!(peer = %p.name, node = %p.node, %server, "CFTP link starting");
                    let link = cftp_link::CftpLink {
                        name: p.name,
                        node: p.node,
                        endpoint: endpoint.clone(),
                        inbox: p.rx,
                        report: p.tx,
                        ctx: Arc::clone(&ctx),
                        dedup,
                        shutdown: shutdown.clone(),
                    };
                    tasks.push(tokio::spawn(link.run()));
                    continue;
                }
                info!(peer = %p.name, node = %p.node, %server, "HMTP link starting");
                let link = hmtp_link::HmtpLink {
                    name: p.name,
                    node: p.node,
                    local,
                    endpoint: endpoint.clone(),
                    inbox: p.rx,
                    report: p.tx,
                    ctx: Arc::clone(&ctx),
                    dedup,
                    shutdown: shutdown.clone(),
                    gather_until: None,
                };
                tasks.push(tokio::spawn(link.run()));
            }
        }
        Ok(Some(Hf { transfers, tasks }))
    }

    /// The transfer records of this run, oldest first.
    pub fn transfers(&self) -> Vec<TransferRecord> {
        self.transfers.recent()
    }

    /// Waits for the links and endpoints to end (after the shutdown signal).
    pub async fn stop(self) {
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Longest sleep of a link between looks at the spool (expiry, a peer released by an
/// operator).
const MAX_SLEEP: std::time::Duration = std::time::Duration::from_secs(60);

/// Sleeps until `at`, or forever without a deadline.
async fn sleep_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
