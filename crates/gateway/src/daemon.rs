//! `skywave run`: the daemon's start-up, signal handling and shutdown.
//!
//! Opens the spool as its owner (start-up recovery, logged), loads the routing table, binds the
//! LAN SMTP listener and the metrics endpoint, then runs the listener, the LAN delivery loop and
//! the metrics server until SIGTERM or Ctrl-C. SIGHUP reloads the routing table through
//! [`SharedRoutes::reload`]: sessions keep the table they took for their transaction, peers the
//! table gained get their links ([`hf::Hf::reloaded`]), and a table with errors is logged and not
//! used. It also loads the STARTTLS certificate and key again ([`smtp_listener::Tls::reload`]):
//! a renewed certificate is served from the next connection on, and a pair that does not load
//! is logged and the one in force stays. Shutdown stops accepting at once, lets sessions finish for
//! up to `shutdown_grace`, lets the delivery loop finish the message in hand, and returns.

use std::net::SocketAddr;
use std::sync::Arc;

use skywave_route::{LoadError, RoutingTable, SharedRoutes};
use skywave_spool::{Spool, SpoolConfig};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tracing::{error, info, warn};

use crate::clock::Clock;
use crate::config::Config;
use crate::delivery::{self, DeliveryContext};
use crate::emcon;
use crate::hf;
use crate::intake::{GatewayPolicy, Intake, Source};
use crate::outcome::Recorder;
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
    /// The HF side is misconfigured.
    #[error(transparent)]
    Hf(#[from] hf::HfError),
}

/// The addresses actually bound (port 0 in the config picks a free one).
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    /// The LAN SMTP listener.
    pub smtp: SocketAddr,
    /// The metrics endpoint, if enabled.
    pub metrics: Option<SocketAddr>,
}

/// A running gateway (see [`start`]).
pub struct Gateway {
    bound: Bound,
    config: Config,
    routes: Arc<SharedRoutes>,
    spool: Arc<Spool>,
    intake: Arc<Intake>,
    hf: hf::Hf,
    emcon: Arc<watch::Sender<bool>>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<(&'static str, tokio::task::JoinHandle<()>)>,
    /// The STARTTLS certificate in force, when configured.
    tls: Option<Arc<smtp_listener::Tls>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("hostname", &self.config.hostname)
            .field("bound", &self.bound)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// The addresses actually bound.
    pub fn bound(&self) -> Bound {
        self.bound
    }

    /// Sets or lifts EMCON on the running gateway, as `skywave emcon on|off` does (the switch
    /// file too, so the file's follower agrees).
    pub fn set_emcon(&self, on: bool) {
        if let Err(e) = emcon::write(&self.config.state_dir, on) {
            warn!(error = %e, "cannot write the EMCON switch file");
        }
        self.emcon.send_replace(on);
    }

    /// Whether the gateway keeps EMCON.
    pub fn emcon(&self) -> bool {
        *self.emcon.borrow()
    }

    /// The spool.
    pub fn spool(&self) -> &Arc<Spool> {
        &self.spool
    }

    /// Submits a message as a local client would (routed and relay-checked as from
    /// 127.0.0.1, stamped, spooled durably): for the demo and for tests that run without
    /// sockets. `Err` is the SMTP reply a client would have got.
    pub async fn submit(
        &self,
        sender: &str,
        recipients: &[&str],
        body: &[u8],
    ) -> Result<skywave_spool::QueueId, skywave_smtp::Reply> {
        let recipients: Vec<(&str, skywave_smtp::RcptDsn)> = recipients
            .iter()
            .map(|r| (*r, Default::default()))
            .collect();
        self.submit_with_dsn(sender, Default::default(), &recipients, body)
            .await
    }

    /// [`Gateway::submit`] with the DSN parameters (RFC 3461) a client would give with MAIL
    /// and with each RCPT.
    pub async fn submit_with_dsn(
        &self,
        sender: &str,
        dsn: skywave_smtp::MailDsn,
        recipients: &[(&str, skywave_smtp::RcptDsn)],
        body: &[u8],
    ) -> Result<skywave_spool::QueueId, skywave_smtp::Reply> {
        let mut policy = GatewayPolicy::new(
            Source::Lan {
                client: std::net::IpAddr::from([127, 0, 0, 1]),
                users: Arc::default(),
            },
            Arc::clone(&self.routes),
        );
        for (r, _) in recipients {
            policy.accept_recipient(r)?;
        }
        let envelope = skywave_smtp::Envelope {
            reverse_path: sender.to_owned(),
            recipients: recipients.iter().map(|(r, _)| (*r).to_owned()).collect(),
            declared_size: Some(body.len()),
            body_type: skywave_smtp::BodyType::Unspecified,
            mt_priority: None,
            helo: "localhost".into(),
            protocol: skywave_smtp::Protocol::Esmtp,
            auth_user: None,
            dsn,
            rcpt_dsn: recipients.iter().map(|(_, d)| d.clone()).collect(),
            smtputf8: false,
        };
        self.intake
            .store(
                &policy,
                &envelope,
                body,
                Some(std::net::IpAddr::from([127, 0, 0, 1])),
            )
            .await
    }

    /// The HF side: the links to the peers in the routing table.
    pub fn hf(&self) -> &hf::Hf {
        &self.hf
    }

    /// Reloads the routing table from its file and starts the links of peers it added; a
    /// table with errors is refused and the old one stays in force.
    pub fn reload_routes(&self) -> Result<(), LoadError> {
        match self.routes.reload(&self.config.routes) {
            Ok(table) => {
                for w in table.warnings() {
                    warn!("{}", w.headline());
                }
                info!(file = %self.config.routes.display(), rules = table.route_count(), "routing table reloaded");
                self.hf.reloaded();
                Ok(())
            }
            Err(e) => {
                error!(
                    file = %self.config.routes.display(),
                    "routing table NOT reloaded, the previous one stays in force:\n{e}"
                );
                Err(e)
            }
        }
    }

    /// Loads the STARTTLS certificate and key again, when STARTTLS is configured: the
    /// connections that follow get the new pair; one that does not load is logged and the
    /// pair in force stays.
    pub fn reload_tls(&self) -> Result<(), TlsSetupError> {
        let Some(tls) = &self.tls else {
            return Ok(());
        };
        match tls.reload() {
            Ok(()) => {
                info!("STARTTLS certificate and key reloaded");
                Ok(())
            }
            Err(e) => {
                error!(error = %e, "STARTTLS certificate NOT reloaded, the one in force stays");
                Err(e)
            }
        }
    }

    /// Stops accepting, lets sessions finish within the grace time, ends the link schedulers
    /// after the session in hand, and returns when everything has stopped.
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        for (name, task) in self.tasks {
            if let Err(e) = task.await {
                warn!(task = name, error = %e, "task ended abnormally");
            }
        }
        self.hf.stop().await;
        info!(hostname = %self.config.hostname, "stopped");
    }
}

/// Starts a gateway: spool recovery, routing table, LAN listener, LAN delivery, metrics, and
/// one link scheduler per HF peer reaching its SIS server through `sis` (TCP in production,
/// in-process for the demo and tests).
pub async fn start(config: Config, sis: hf::SisConnect) -> Result<Gateway, DaemonError> {
    start_with(config, sis, hf::pmul_ip::IpNetwork::Udp).await
}

/// As [`start`], P_MUL over IP going through `ip` (an emulated network in the benchmarks).
pub async fn start_with(
    config: Config,
    sis: hf::SisConnect,
    ip: hf::pmul_ip::IpNetwork,
) -> Result<Gateway, DaemonError> {
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
        id_salt: config.simulation.map(|s| s.id_salt),
        min_free_space: config.spool.min_free_space,
        delay_warning: config.spool.delay_warning,
        return_full_limit: config.spool.return_full_limit,
        ..SpoolConfig::default()
    };
    let spool_dir = config.spool_dir();
    let (spool, report) = crate::blocking::spawn(move || Spool::open(spool_dir, spool_config))
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
        Some(files) => Some(Arc::new(smtp_listener::Tls::load(
            &files.cert,
            &files.key,
            Some(config.state_dir.join(smtp_listener::IN_FORCE)),
        )?)),
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

    let clock = config
        .simulation
        .map_or_else(Clock::start, |s| Clock::starting_at(s.epoch_unix));
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let lan_wake = Arc::new(Notify::new());
    let hf_wake = Arc::new(Notify::new());
    let intake = Arc::new(Intake {
        hostname: config.hostname.clone(),
        spool: Arc::clone(&spool),
        lan_wake: Arc::clone(&lan_wake),
        hf_wake: Arc::clone(&hf_wake),
        clock,
    });
    let recorder = Arc::new(Recorder {
        spool: Arc::clone(&spool),
        routes: Arc::clone(&routes),
        lan_wake: Arc::clone(&lan_wake),
        hf_wake: Arc::clone(&hf_wake),
        clock,
    });
    // The configuration decides EMCON at start; `skywave emcon` changes it while running.
    if let Err(e) = emcon::write(&config.state_dir, config.hf.emcon) {
        warn!(error = %e, "cannot write the EMCON switch file; `skywave emcon` will not reach this gateway");
    }
    let emcon_state = Arc::new(watch::Sender::new(config.hf.emcon));
    let heard = Arc::new(crate::heard::Heard::open(&config.state_dir));
    let hf = hf::Hf::start(
        hf::HfContext {
            hostname: config.hostname.clone(),
            state_dir: config.state_dir.clone(),
            config: config.hf.clone(),
            routes: Arc::clone(&routes),
            intake: Arc::clone(&intake),
            recorder: Arc::clone(&recorder),
            wake: Arc::clone(&hf_wake),
            clock,
            transfers: Arc::new(hf::TransferLog::new(
                config.state_dir.join("transfers.jsonl"),
            )),
            emcon: Arc::clone(&emcon_state),
            windows_said: std::sync::Mutex::default(),
            heard: Arc::clone(&heard),
        },
        sis,
        ip,
        shutdown_rx.clone(),
    )?;
    let ctx = Arc::new(ListenerContext {
        hostname: config.hostname.clone(),
        smtp: config.smtp.clone(),
        routes: Arc::clone(&routes),
        intake: Arc::clone(&intake),
        tls: tls.clone(),
    });
    let mut tasks = vec![
        (
            "smtp listener",
            tokio::spawn(smtp_listener::serve(ctx, listener, shutdown_rx.clone())),
        ),
        (
            "LAN delivery",
            tokio::spawn(delivery::run(
                Arc::new(DeliveryContext {
                    hostname: config.hostname.clone(),
                    delivery: config.delivery.clone(),
                    spool: Arc::clone(&spool),
                    recorder,
                    wake: Arc::clone(&lan_wake),
                    journal: config.state_dir.join("maildir-handoff.jsonl"),
                }),
                shutdown_rx.clone(),
            )),
        ),
        (
            "operator nudges",
            tokio::spawn(watch_nudges(
                Arc::clone(&spool),
                Arc::clone(&lan_wake),
                Arc::clone(&hf_wake),
                shutdown_rx.clone(),
            )),
        ),
        (
            "peer fallback",
            tokio::spawn(crate::fallback::run(
                Arc::clone(&spool),
                Arc::clone(&routes),
                heard,
                clock,
                Arc::clone(&hf_wake),
                shutdown_rx.clone(),
            )),
        ),
        (
            "EMCON switch",
            tokio::spawn(emcon::follow(
                config.state_dir.clone(),
                Arc::clone(&emcon_state),
                shutdown_rx.clone(),
            )),
        ),
    ];
    let mut metrics_addr = None;
    if let Some((l, bound)) = metrics {
        match metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder() {
            Ok(handle) => {
                metrics_addr = Some(bound);
                tasks.push((
                    "metrics",
                    tokio::spawn(crate::metrics::serve(
                        l,
                        handle,
                        Arc::clone(&spool),
                        Arc::clone(&routes),
                        clock,
                        shutdown_rx.clone(),
                    )),
                ));
            }
            Err(e) => {
                warn!(error = %e, "metrics recorder not installed; no metrics endpoint");
            }
        }
    }
    let bound = Bound {
        smtp: smtp_addr,
        metrics: metrics_addr,
    };
    let metrics_text = bound
        .metrics
        .map_or_else(|| "off".to_owned(), |a| a.to_string());
    info!(smtp = %bound.smtp, metrics = %metrics_text, hostname = %config.hostname, "skywave running");
    Ok(Gateway {
        bound,
        config,
        routes,
        spool,
        intake,
        hf,
        emcon: emcon_state,
        shutdown: shutdown_tx,
        tasks,
        tls,
    })
}

/// How often the daemon looks for an operator's nudge ([`Spool::nudge`]).
const NUDGE_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Wakes LAN delivery and the HF links when `skywave queue` changed the queue (a release, a
/// flush), so the change takes effect within [`NUDGE_POLL`] instead of at the next timer (up to
/// a minute). A file rather than a signal: the admin command needs no pid, and works the same
/// whether the gateway runs or not.
async fn watch_nudges(
    spool: Arc<Spool>,
    lan_wake: Arc<Notify>,
    hf_wake: Arc<Notify>,
    mut shutdown: watch::Receiver<bool>,
) {
    let read = |spool: &Arc<Spool>| {
        let spool = Arc::clone(spool);
        async move {
            crate::blocking::spawn(move || spool.nudged())
                .await
                .ok()
                .flatten()
        }
    };
    let mut last = read(&spool).await;
    loop {
        tokio::select! {
            () = tokio::time::sleep(NUDGE_POLL) => {}
            _ = shutdown.changed() => return,
        }
        let now = read(&spool).await;
        if now != last {
            info!("the queue was changed by an operator: looking at it now");
            lan_wake.notify_one();
            hf_wake.notify_waiters();
            last = now;
        }
    }
}

/// Runs the gateway until SIGTERM or Ctrl-C; `ready` is called once everything listens.
/// SIS servers are reached over TCP.
pub async fn run(config: Config, ready: impl FnOnce(&Bound)) -> Result<(), DaemonError> {
    use tokio::signal::unix::{SignalKind, signal};

    let mut sigterm = signal(SignalKind::terminate()).map_err(DaemonError::Signals)?;
    let mut sighup = signal(SignalKind::hangup()).map_err(DaemonError::Signals)?;
    let mut sigint = signal(SignalKind::interrupt()).map_err(DaemonError::Signals)?;
    let gateway = start(config, hf::SisConnect::tcp()).await?;
    ready(&gateway.bound());
    loop {
        tokio::select! {
            _ = sighup.recv() => {
                let _ = gateway.reload_routes();
                let _ = gateway.reload_tls();
            }
            _ = sigterm.recv() => { info!("SIGTERM: shutting down"); break; }
            _ = sigint.recv() => { info!("interrupt: shutting down"); break; }
        }
    }
    gateway.stop().await;
    Ok(())
}
