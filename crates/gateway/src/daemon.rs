//! `skywave run`: the daemon's start-up, signal handling and shutdown.
//!
//! Opens the spool as its owner (start-up recovery, logged), loads the routing table, binds the
//! LAN SMTP listener and the metrics endpoint, then runs the listener, the LAN delivery loop and
//! the metrics server until SIGTERM or Ctrl-C. SIGHUP reloads the routing table through
//! [`SharedRoutes::reload`]: sessions keep the table they took for their transaction, and a table
//! with errors is logged and not used. Shutdown stops accepting at once, lets sessions finish for
//! up to `shutdown_grace`, lets the delivery loop finish the message in hand, and returns.

use std::net::SocketAddr;
use std::sync::Arc;

use skywave_route::{LoadError, RoutingTable, SharedRoutes};
use skywave_spool::{Spool, SpoolConfig};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tracing::{error, info, warn};

use crate::config::Config;
use crate::delivery::{self, DeliveryContext};
use crate::smtp_listener::{self, ListenerContext, TlsSetupError};

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The routing table has errors.
    #[error("the routing table cannot be loaded:\n{0}")]
    Routes(#[from] LoadError),
    /// The spool could not be opened (or another gateway owns it).
    #[error("cannot open the spool: {0}")]
    Spool(#[from] skywave_spool::Error),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// STARTTLS set-up failed.
    #[error("cannot set up STARTTLS: {0}")]
    Tls(#[from] TlsSetupError),
    /// The state directory could not be created.
    #[error("cannot create the state directory {path}: {source}")]
    StateDir {
        /// The directory.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Signal handlers could not be installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
}

/// The addresses actually bound (port 0 in the config picks a free one).
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    /// The LAN SMTP listener.
    pub smtp: SocketAddr,
    /// The metrics endpoint, if enabled.
    pub metrics: Option<SocketAddr>,
}

/// Runs the gateway until SIGTERM or Ctrl-C; `ready` is called once everything listens.
pub async fn run(config: Config, ready: impl FnOnce(&Bound)) -> Result<(), DaemonError> {
    use tokio::signal::unix::{SignalKind, signal};

    std::fs::create_dir_all(&config.state_dir).map_err(|source| DaemonError::StateDir {
        path: config.state_dir.display().to_string(),
        source,
    })?;
    let table = RoutingTable::load(&config.routes)?;
    for w in table.warnings() {
        warn!("{}", w.headline());
    }
    let routes = Arc::new(SharedRoutes::new(table));

    let spool_config = SpoolConfig {
        min_backoff: config.spool.min_backoff,
        max_backoff: config.spool.max_backoff,
        max_lifetime: config.spool.max_lifetime,
        max_attempts: config.spool.max_attempts,
        reporting_mta: config.hostname.clone(),
        durable: true,
    };
    let spool_dir = config.spool_dir();
    let (spool, report) = tokio::task::spawn_blocking(move || Spool::open(spool_dir, spool_config))
        .await
        .map_err(|e| {
            DaemonError::Spool(skywave_spool::Error::Io {
                op: "open",
                path: config.spool_dir(),
                source: std::io::Error::other(e),
            })
        })??;
    info!(
        removed_tmp = report.removed_tmp,
        requeued_in_flight = report.requeued_in_flight.len(),
        moved_to_dead = report.moved_to_dead.len(),
        finished_moves = report.finished_moves.len(),
        removed_complete = report.removed_complete.len(),
        pending_bounces = report.pending_bounces.len(),
        "spool recovered"
    );
    for (name, reason) in &report.moved_to_dead {
        warn!(file = %name, %reason, "queue file moved to dead/");
    }
    let spool = Arc::new(spool);

    let tls = match &config.smtp.tls {
        Some(files) => Some(smtp_listener::tls_acceptor(&files.cert, &files.key)?),
        None => None,
    };
    let listener = TcpListener::bind(config.smtp.listen)
        .await
        .map_err(|source| DaemonError::Bind {
            addr: config.smtp.listen,
            source,
        })?;
    let smtp_addr = listener.local_addr().map_err(|source| DaemonError::Bind {
        addr: config.smtp.listen,
        source,
    })?;
    let metrics = match config.metrics_listen {
        Some(addr) => {
            let l = TcpListener::bind(addr)
                .await
                .map_err(|source| DaemonError::Bind { addr, source })?;
            let bound = l
                .local_addr()
                .map_err(|source| DaemonError::Bind { addr, source })?;
            Some((l, bound))
        }
        None => None,
    };

    let mut sigterm = signal(SignalKind::terminate()).map_err(DaemonError::Signals)?;
    let mut sighup = signal(SignalKind::hangup()).map_err(DaemonError::Signals)?;
    let mut sigint = signal(SignalKind::interrupt()).map_err(DaemonError::Signals)?;

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let lan_wake = Arc::new(Notify::new());
    let ctx = Arc::new(ListenerContext {
        hostname: config.hostname.clone(),
        smtp: config.smtp.clone(),
        routes: Arc::clone(&routes),
        spool: Arc::clone(&spool),
        tls,
        lan_wake: Arc::clone(&lan_wake),
    });
    let listener_task = tokio::spawn(smtp_listener::serve(ctx, listener, shutdown_rx.clone()));
    let delivery_task = tokio::spawn(delivery::run(
        Arc::new(DeliveryContext {
            hostname: config.hostname.clone(),
            delivery: config.delivery.clone(),
            spool: Arc::clone(&spool),
            routes: Arc::clone(&routes),
            wake: lan_wake,
        }),
        shutdown_rx.clone(),
    ));
    let mut metrics_addr = None;
    let metrics_task = match metrics {
        Some((l, bound)) => {
            metrics_addr = Some(bound);
            match metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder() {
                Ok(handle) => Some(tokio::spawn(crate::metrics::serve(
                    l,
                    handle,
                    Arc::clone(&spool),
                    Arc::clone(&routes),
                    shutdown_rx.clone(),
                ))),
                Err(e) => {
                    warn!(error = %e, "metrics recorder not installed; no metrics endpoint");
                    metrics_addr = None;
                    None
                }
            }
        }
        None => None,
    };
    let bound = Bound {
        smtp: smtp_addr,
        metrics: metrics_addr,
    };
    let metrics_text = bound
        .metrics
        .map_or_else(|| "off".to_owned(), |a| a.to_string());
    info!(smtp = %bound.smtp, metrics = %metrics_text, hostname = %config.hostname, "skywave running");
    ready(&bound);

    loop {
        tokio::select! {
            _ = sighup.recv() => {
                match routes.reload(&config.routes) {
                    Ok(table) => {
                        for w in table.warnings() {
                            warn!("{}", w.headline());
                        }
                        info!(file = %config.routes.display(), rules = table.route_count(), "routing table reloaded");
                    }
                    Err(e) => error!(
                        file = %config.routes.display(),
                        "routing table NOT reloaded, the previous one stays in force:\n{e}"
                    ),
                }
            }
            _ = sigterm.recv() => { info!("SIGTERM: shutting down"); break; }
            _ = sigint.recv() => { info!("interrupt: shutting down"); break; }
        }
    }
    let _ = shutdown_tx.send(true);
    if let Err(e) = listener_task.await {
        warn!(error = %e, "listener task ended abnormally");
    }
    if let Err(e) = delivery_task.await {
        warn!(error = %e, "delivery task ended abnormally");
    }
    if let Some(t) = metrics_task {
        let _ = t.await;
    }
    info!("stopped");
    Ok(())
}
