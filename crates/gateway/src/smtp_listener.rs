//! The LAN SMTP listener: where the ship's mail server (or any client) hands mail to skywave.
//!
//! One tokio task per connection drives a sans-IO [`ServerSession`] from `skywave-smtp`: read,
//! feed, write its output, honour its deadlines with `tokio::time`. The [`GatewayPolicy`] answers
//! `RCPT TO` with the routing table's relay decision (mail only for routed destinations; relaying
//! to HF peers only from `[lan] relay_networks` or authenticated users) and checks AUTH against
//! the configured users. A complete message gets a `Received:` header and is enqueued in the
//! spool from `spawn_blocking`; the client hears 250 only after the spool returned (the file and
//! its directory are synced), and `451 4.3.0` if the spool failed. STARTTLS runs rustls
//! (tokio-rustls) when a certificate is configured.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use skywave_route::SharedRoutes;
use skywave_smtp::{AuthMode, Event, ServerConfig, ServerSession, TlsInfo};
use skywave_spool::unix_seconds;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::config::SmtpConfig;
use crate::intake::{GatewayPolicy, Intake, Source};

/// What every session needs, shared.
pub struct ListenerContext {
    /// Our host name.
    pub hostname: String,
    /// Listener settings.
    pub smtp: SmtpConfig,
    /// The routing table in force.
    pub routes: Arc<SharedRoutes>,
    /// Where accepted mail goes.
    pub intake: Arc<Intake>,
    /// The STARTTLS certificate in force, when STARTTLS is configured.
    pub tls: Option<Arc<Tls>>,
}

impl std::fmt::Debug for ListenerContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerContext")
            .field("hostname", &self.hostname)
            .field("listen", &self.smtp.listen)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("{path}: {what}")]
    Pem {
        /// The file.
        path: String,
        /// What went wrong.
        what: String,
    },
    /// rustls refused the certificate or key.
    #[error("TLS certificate and key do not work together: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The STARTTLS certificate and key in force: loaded from their files at start, and again
/// by [`Tls::reload`] (SIGHUP), so that a renewed certificate is served without a restart.
/// Each connection takes the one in force when it says STARTTLS; a pair of files that does
/// not load leaves the one before in force.
pub struct Tls {
    cert: std::path::PathBuf,
    key: std::path::PathBuf,
    /// Where a copy of the certificate file in force goes, for `skywave status` to compare
    /// with the file ([`IN_FORCE`] under the state directory).
    record: Option<std::path::PathBuf>,
    acceptor: std::sync::RwLock<tokio_rustls::TlsAcceptor>,
}

/// The copy of the certificate in force, under the state directory: `skywave status` says
/// when the file has changed since (a renewal that waits for SIGHUP).
pub const IN_FORCE: &str = "starttls-in-force.pem";

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// Loads the certificate chain and key from their PEM files, and copies the certificate
    /// file to `record` when given.
    pub fn load(
        cert: &std::path::Path,
        key: &std::path::Path,
        record: Option<std::path::PathBuf>,
    ) -> Result<Tls, TlsSetupError> {
        let (acceptor, pem) = acceptor_and_pem(cert, key)?;
        let tls = Tls {
            acceptor: std::sync::RwLock::new(acceptor),
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            record,
        };
        tls.put_on_record(&pem);
        Ok(tls)
    }

    /// Loads the files again and puts them in force for the connections that follow; on an
    /// error the ones in force stay.
    pub fn reload(&self) -> Result<(), TlsSetupError> {
        let (fresh, pem) = acceptor_and_pem(&self.cert, &self.key)?;
        *self
            .acceptor
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = fresh;
        self.put_on_record(&pem);
        Ok(())
    }

    /// Copies the certificate file in force to the record, if any (a failure is logged: the
    /// status then compares with an older copy, or none).
    fn put_on_record(&self, pem: &[u8]) {
        if let Some(path) = &self.record
            && let Err(e) = std::fs::write(path, pem)
        {
            tracing::warn!(file = %path.display(), error = %e, "cannot record which STARTTLS certificate is in force");
        }
    }

    /// The acceptor in force.
    fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        self.acceptor
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Builds the STARTTLS acceptor from PEM files (ring provider).
pub fn tls_acceptor(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<tokio_rustls::TlsAcceptor, TlsSetupError> {
    acceptor_and_pem(cert, key).map(|(a, _)| a)
}

/// [`tls_acceptor`], with the bytes of the certificate file it was built from (read once, so
/// that the copy on record is what is served).
fn acceptor_and_pem(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<(tokio_rustls::TlsAcceptor, Vec<u8>), TlsSetupError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let pem_err = |path: &std::path::Path, what: String| TlsSetupError::Pem {
        path: path.display().to_string(),
        what,
    };
    let pem = std::fs::read(cert)
        .map_err(|e| pem_err(cert, format!("cannot read the certificate: {e}")))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| pem_err(cert, format!("not a PEM certificate chain: {e}")))?;
    if certs.is_empty() {
        return Err(pem_err(cert, "no CERTIFICATE block found".to_owned()));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| pem_err(key, format!("no usable PEM private key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    Ok((tokio_rustls::TlsAcceptor::from(Arc::new(config)), pem))
}

fn session_config(ctx: &ListenerContext) -> ServerConfig {
    let mut c = ServerConfig::new(ctx.hostname.clone());
    c.max_message_size = usize::try_from(ctx.smtp.max_message_size).unwrap_or(usize::MAX);
    c.max_recipients = ctx.smtp.max_recipients;
    c.idle_timeout = ctx.smtp.idle_timeout;
    c.data_timeout = ctx.smtp.data_timeout;
    // The spool keeps NOTIFY, ORCPT, RET and ENVID and reports as they ask.
    c.dsn = true;
    // UTF-8 addresses and header fields are carried as they came (RFC 6531): the spool, the
    // routing table and every bearer take them, so a LAN client may say so.
    c.smtputf8 = true;
    c.starttls = ctx.tls.is_some();
    c.auth = if ctx.tls.is_some() && !ctx.smtp.users.is_empty() {
        AuthMode::AfterTls
    } else {
        AuthMode::Disabled
    };
    c
}

/// Accepts connections until `shutdown` turns true, then lets sessions finish for up to
/// `shutdown_grace` and cuts the rest.
pub async fn serve(
    ctx: Arc<ListenerContext>,
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
) {
    let users = Arc::new(ctx.smtp.users.clone());
    let mut sessions = JoinSet::new();
    let counter = AtomicU64::new(0);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let n = counter.fetch_add(1, Ordering::Relaxed);
                    let conn = format!("S{:X}N{n}", unix_seconds(SystemTime::now()));
                    let span = info_span!("smtp", %peer, conn = %conn);
                    let ctx = Arc::clone(&ctx);
                    let users = Arc::clone(&users);
                    sessions.spawn(async move {
                        connection(ctx, users, stream, peer, conn).await;
                    }.instrument(span));
                }
                Err(e) => {
                    // EMFILE and friends: wait a little rather than spin.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    break;
                }
            }
        }
    }
    drop(listener);
    info!(
        sessions = sessions.len(),
        "listener closed; waiting for sessions to finish"
    );
    let grace = tokio::time::sleep(ctx.smtp.shutdown_grace);
    tokio::pin!(grace);
    while !sessions.is_empty() {
        tokio::select! {
            _ = sessions.join_next() => {}
            () = &mut grace => {
                warn!(sessions = sessions.len(), "shutdown grace over; closing the remaining sessions");
                sessions.abort_all();
                while sessions.join_next().await.is_some() {}
            }
        }
    }
}

enum Step {
    Closed,
    StartTls,
}

async fn connection(
    ctx: Arc<ListenerContext>,
    users: Arc<BTreeMap<String, String>>,
    mut stream: TcpStream,
    peer: SocketAddr,
    conn: String,
) {
    info!("connected");
    let policy = GatewayPolicy::new(
        Source::Lan {
            client: peer.ip(),
            users,
        },
        Arc::clone(&ctx.routes),
    )
    .reserve_of(Arc::clone(&ctx.intake.spool));
    let mut session = ServerSession::new(session_config(&ctx), policy, now());
    let mut messages = 0u32;
    let step = drive(&ctx, &mut session, &mut stream, peer, &conn, &mut messages).await;
    let result = match (step, &ctx.tls) {
        (Ok(Step::StartTls), Some(tls)) => match tls.acceptor().accept(stream).await {
            Ok(mut tls) => {
                let (_, conn_state) = tls.get_ref();
                let info = TlsInfo {
                    version: conn_state
                        .protocol_version()
                        .and_then(|v| v.as_str())
                        .unwrap_or("TLS")
                        .to_owned(),
                    cipher_suite: conn_state
                        .negotiated_cipher_suite()
                        .and_then(|s| s.suite().as_str())
                        .unwrap_or("unknown")
                        .to_owned(),
                };
                info!(version = %info.version, cipher = %info.cipher_suite, "TLS established");
                match session.tls_established(now(), info) {
                    Ok(()) => drive(&ctx, &mut session, &mut tls, peer, &conn, &mut messages)
                        .await
                        .map(|_| ()),
                    Err(e) => Err(std::io::Error::other(e)),
                }
            }
            Err(e) => {
                let _ = session.tls_failed();
                Err(e)
            }
        },
        (Ok(Step::StartTls), None) => Err(std::io::Error::other("STARTTLS without TLS set up")),
        (Ok(Step::Closed), _) => Ok(()),
        (Err(e), _) => Err(e),
    };
    match result {
        Ok(()) => info!(messages, "session closed"),
        Err(e) => info!(messages, error = %e, "session ended"),
    }
}

fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

async fn drive<S: AsyncRead + AsyncWrite + Unpin>(
    ctx: &ListenerContext,
    session: &mut ServerSession<GatewayPolicy>,
    stream: &mut S,
    peer: SocketAddr,
    conn: &str,
    messages: &mut u32,
) -> std::io::Result<Step> {
    let mut buf = vec![0u8; 16 * 1024];
    // Bounded: every turn either writes, handles an event, reads, or times out; the session
    // closes itself after its command, error and idle limits.
    loop {
        let out = session.take_output();
        if !out.is_empty() {
            stream.write_all(&out).await?;
            stream.flush().await?;
        }
        if let Some(event) = session.poll_event() {
            match event {
                Event::Message { envelope, body } => {
                    *messages += 1;
                    let trace = format!("{conn}M{messages}");
                    let span =
                        info_span!("message", trace = %trace, queue_id = tracing::field::Empty);
                    let stored = ctx
                        .intake
                        .store(session.policy(), &envelope, &body, Some(peer.ip()))
                        .instrument(span)
                        .await;
                    let _ = match stored {
                        Ok(id) => session.message_accepted(id.as_str()),
                        Err(r) => session.message_rejected(r),
                    };
                }
                Event::StartTls => {
                    let out = session.take_output();
                    stream.write_all(&out).await?;
                    stream.flush().await?;
                    return Ok(Step::StartTls);
                }
                Event::Authenticated { username } => info!(user = %username, "authenticated"),
                Event::Close(reason) => {
                    let out = session.take_output();
                    stream.write_all(&out).await?;
                    stream.flush().await?;
                    let _ = stream.shutdown().await;
                    debug!(?reason, "closing");
                    return Ok(Step::Closed);
                }
            }
            continue;
        }
        if session.is_closed() {
            return Ok(Step::Closed);
        }
        let deadline = session.poll_timeout().map(tokio::time::Instant::from_std);
        tokio::select! {
            read = stream.read(&mut buf) => {
                let n = read?;
                if n == 0 {
                    return Ok(Step::Closed);
                }
                session.feed(now(), &buf[..n]);
            }
            () = sleep_until(deadline) => session.handle_timeout(now()),
        }
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use skywave_route::RoutingTable;
    use skywave_spool::{Spool, SpoolConfig, Target};
    use tokio::io::{AsyncBufReadExt, BufReader};
    use tokio::sync::Notify;

    const ROUTES: &str = r#"
[lan]
domains = ["ship.test"]
relay_networks = ["127.0.0.0/8"]

[[peer]]
name = "shore"
node = "0.0.1.1"
protocol = "hmtp"
priority = "routine"
size_limit = 200

[[peer]]
name = "sat"
node = "0.0.1.2"
protocol = "hmtp"
priority = "routine"
size_limit = 200
strip_headers = true
shrink_images = 1024

[[route]]
match = "shore.test"
to = "shore"

[[route]]
match = "sat.test"
to = "sat"
"#;

    struct Fixture {
        _dir: tempfile::TempDir,
        spool: Arc<Spool>,
        addr: SocketAddr,
        stop: watch::Sender<bool>,
        wake: Arc<Notify>,
    }

    async fn start() -> Fixture {
        start_with(SpoolConfig::default()).await
    }

    async fn start_with(spool_config: SpoolConfig) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let (spool, _) = Spool::open(dir.path().join("spool"), spool_config).unwrap();
        let spool = Arc::new(spool);
        let table = RoutingTable::parse("routes.toml", ROUTES).unwrap();
        let smtp = crate::config::parse(
            "skywave.toml",
            "hostname = \"gw.test\"\nstate_dir = \"s\"\nroutes = \"r\"\n",
            dir.path(),
        )
        .unwrap()
        .smtp;
        let wake = Arc::new(Notify::new());
        let ctx = Arc::new(ListenerContext {
            hostname: "gw.test".into(),
            smtp,
            routes: Arc::new(SharedRoutes::new(table)),
            intake: Arc::new(Intake {
                hostname: "gw.test".into(),
                spool: Arc::clone(&spool),
                lan_wake: Arc::clone(&wake),
                hf_wake: Arc::new(Notify::new()),
                clock: crate::clock::Clock::start(),
            }),
            tls: None,
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, rx) = watch::channel(false);
        tokio::spawn(serve(ctx, listener, rx));
        Fixture {
            _dir: dir,
            spool,
            addr,
            stop,
            wake,
        }
    }

    /// Sends `script` in one write (pipelined) and reads until the server closes.
    async fn converse(addr: SocketAddr, script: &str) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(script.as_bytes()).await.unwrap();
        let mut out = String::new();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        while tokio::time::timeout(Duration::from_secs(20), r.read_line(&mut line))
            .await
            .unwrap()
            .unwrap()
            > 0
        {
            out.push_str(&line);
            line.clear();
        }
        out
    }

    const MESSAGE: &str = "EHLO client.test\r\nMAIL FROM:<a@ship.test> MT-PRIORITY=4\r\n\
        RCPT TO:<ops@shore.test>\r\nRCPT TO:<ops@ship.test>\r\nRCPT TO:<x@elsewhere.test>\r\n\
        DATA\r\nSubject: t\r\n\r\nhello\r\n.\r\nQUIT\r\n";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn message_is_spooled_with_targets_priority_and_received_header() {
        let f = start().await;
        let notified = f.wake.notified();
        let out = converse(f.addr, MESSAGE).await;
        assert!(out.contains("550 5.1.2"), "{out}");
        let queued = out
            .lines()
            .find(|l| l.starts_with("250 2.0.0") && l.contains("queued"))
            .unwrap_or_else(|| panic!("no 250 for the message: {out}"));
        let entries: Vec<_> = f.spool.entries().unwrap().map(Result::unwrap).collect();
        assert_eq!(entries.len(), 1);
        let id = entries[0].name.as_str();
        assert!(queued.contains(id), "{queued}");
        let (_, file) = f
            .spool
            .load(&skywave_spool::QueueId::parse(id).unwrap())
            .unwrap();
        let env = &file.envelope;
        assert_eq!(env.sender, "a@ship.test");
        assert_eq!(
            env.priority.value(),
            4,
            "MT-PRIORITY wins over the route default"
        );
        let targets: Vec<_> = env
            .recipients
            .iter()
            .map(|r| (r.address.as_str(), r.target.clone()))
            .collect();
        assert_eq!(
            targets,
            vec![
                ("ops@shore.test", Target::Peer("shore".into())),
                ("ops@ship.test", Target::Lan)
            ]
        );
        let text = String::from_utf8(file.message).unwrap();
        assert!(
            text.starts_with(
                "Received: from client.test ([127.0.0.1])\r\n\tby gw.test (skywave) with ESMTP id "
            ),
            "{text}"
        );
        assert!(text.ends_with("Subject: t\r\n\r\nhello\r\n"), "{text}");
        // LAN mail wakes the delivery loop.
        tokio::time::timeout(Duration::from_secs(5), notified)
            .await
            .unwrap();
        let _ = f.stop.send(true);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_spool_failure_is_a_451_and_nothing_is_acknowledged() {
        let f = start().await;
        // Take the queue directory away: the spool cannot store anything now.
        std::fs::remove_dir_all(f.spool.root().join("queue")).unwrap();
        std::fs::write(f.spool.root().join("queue"), b"not a directory").unwrap();
        let out = converse(f.addr, MESSAGE).await;
        assert!(out.contains("451 4.3.0"), "{out}");
        assert!(!out.contains("Ok: queued"), "{out}");
        assert!(
            out.ends_with("221 2.0.0 gw.test closing connection\r\n"),
            "{out}"
        );
        let _ = f.stop.send(true);
    }

    /// A disk with 1000 bytes beyond the reserve of 1 MB used in the next test.
    fn nearly_full(_: &std::path::Path) -> std::io::Result<skywave_spool::Space> {
        Ok(skywave_spool::Space {
            bytes: 1_001_000,
            files: None,
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mail_that_would_take_the_spools_reserve_is_refused_with_452() {
        let f = start_with(SpoolConfig {
            min_free_space: 1_000_000,
            free_space: nearly_full,
            ..SpoolConfig::default()
        })
        .await;
        // 16 lines of 80 bytes: 1280 bytes, more than the 1000 beyond the reserve.
        let big = format!("{}\r\n", "x".repeat(78)).repeat(16);
        let script = format!(
            "EHLO client.test\r\n\
             MAIL FROM:<a@ship.test> SIZE=2000\r\nRCPT TO:<ops@ship.test>\r\nDATA\r\nRSET\r\n\
             MAIL FROM:<a@ship.test>\r\nRCPT TO:<ops@ship.test>\r\nDATA\r\n\
             Subject: big\r\n\r\n{big}.\r\n\
             MAIL FROM:<a@ship.test> SIZE=500\r\nRCPT TO:<ops@ship.test>\r\nDATA\r\n\
             Subject: small\r\n\r\nhello\r\n.\r\nQUIT\r\n"
        );
        let out = converse(f.addr, &script).await;
        let refusals: Vec<&str> = out.lines().filter(|l| l.starts_with("452 4.3.1")).collect();
        // The declared 2000 bytes at MAIL FROM; the undeclared 1200 after its text.
        assert_eq!(refusals.len(), 2, "{out}");
        assert!(
            refusals[0].contains("1.00 MB free, 1.00 MB kept in reserve"),
            "{out}"
        );
        // The small message fits and is taken.
        assert_eq!(out.matches("Ok: queued").count(), 1, "{out}");
        let entries: Vec<_> = f.spool.entries().unwrap().map(Result::unwrap).collect();
        assert_eq!(entries.len(), 1);
        let id = skywave_spool::QueueId::parse(&entries[0].name).unwrap();
        let (_, file) = f.spool.load(&id).unwrap();
        assert!(file.message.ends_with(b"hello\r\n"));
        let _ = f.stop.send(true);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_message_past_its_own_expiry_is_refused_after_its_text() {
        let f = start().await;
        let script = "EHLO client.test\r\n\
             MAIL FROM:<a@ship.test>\r\nRCPT TO:<ops@ship.test>\r\nDATA\r\n\
             Expires: Sat, 1 Jan 2000 00:00:00 +0000\r\nSubject: stale\r\n\r\nwx\r\n.\r\n\
             MAIL FROM:<a@ship.test>\r\nRCPT TO:<ops@ship.test>\r\nDATA\r\n\
             Expires: Fri, 1 Jan 2100 00:00:00 +0000\r\nSubject: fresh\r\n\r\nwx\r\n.\r\n\
             QUIT\r\n";
        let out = converse(f.addr, script).await;
        assert!(
            out.contains(
                "554 5.4.7 the message's own expiry time (Sat, 01 Jan 2000 00:00:00 +0000) has \
                 passed"
            ),
            "{out}"
        );
        assert_eq!(out.matches("Ok: queued").count(), 1, "{out}");
        assert_eq!(f.spool.entries().unwrap().count(), 1);
        let _ = f.stop.send(true);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_peers_size_limit_is_enforced_at_rcpt_and_after_data() {
        let f = start().await;
        let big = "x".repeat(300);
        let script = format!(
            "EHLO client.test\r\nMAIL FROM:<a@ship.test> SIZE=1000\r\nRCPT TO:<ops@shore.test>\r\n\
             RCPT TO:<ops@ship.test>\r\nRSET\r\nMAIL FROM:<a@ship.test>\r\nRCPT TO:<ops@shore.test>\r\n\
             DATA\r\nSubject: big\r\n\r\n{big}\r\n.\r\nQUIT\r\n"
        );
        let out = converse(f.addr, &script).await;
        let replies: Vec<&str> = out.lines().filter(|l| !l.starts_with("250-")).collect();
        assert!(
            replies[3].starts_with(
                "552 5.3.4 message size 1000 exceeds the limit of 200 octets for peer:shore"
            ),
            "{out}"
        );
        // The LAN has no such limit.
        assert!(replies[4].starts_with("250 2.1.5"), "{out}");
        assert!(
            replies[9]
                .starts_with("552 5.3.4 message exceeds the limit of 200 octets for peer:shore"),
            "{out}"
        );
        assert_eq!(f.spool.entries().unwrap().count(), 0);
        let _ = f.stop.send(true);
    }

    /// A peer whose link leaves part of a message ashore (`strip_headers`, `shrink_images`)
    /// weighs it as it goes: not at RCPT by the size declared, and after DATA without what
    /// stays ashore.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_peer_that_leaves_part_ashore_weighs_a_message_as_it_goes() {
        let f = start().await;
        let junk = "x".repeat(300);
        let big = "y".repeat(300);
        let script = format!(
            "EHLO client.test\r\nMAIL FROM:<a@ship.test> SIZE=1000\r\nRCPT TO:<ops@sat.test>\r\n\
             DATA\r\nX-Junk: {junk}\r\nSubject: s\r\n\r\nhello\r\n.\r\n\
             MAIL FROM:<a@ship.test>\r\nRCPT TO:<ops@sat.test>\r\n\
             DATA\r\nSubject: big\r\n\r\n{big}\r\n.\r\nQUIT\r\n"
        );
        let out = converse(f.addr, &script).await;
        let replies: Vec<&str> = out.lines().filter(|l| !l.starts_with("250-")).collect();
        // The declared 1000 octets are not refused; the message, 300 of them an X- field
        // stripped on the air, is taken.
        assert!(replies[3].starts_with("250 2.1.5"), "{out}");
        assert!(replies[5].contains("Ok: queued"), "{out}");
        assert!(
            replies[9]
                .starts_with("552 5.3.4 message exceeds the limit of 200 octets for peer:sat"),
            "{out}"
        );
        assert_eq!(f.spool.entries().unwrap().count(), 1);
        let _ = f.stop.send(true);
    }
}
