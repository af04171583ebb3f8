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

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use skywave_route::{Destination, RelayDecision, RoutingTable, SharedRoutes};
use skywave_smtp::{
    AuthMode, Credentials, DateTime, EnhancedCode, Envelope, Event, MailRequest, Policy,
    ReceivedInfo, Reply, ServerConfig, ServerSession, SessionInfo, TlsInfo, Verdict,
    received_header,
};
use skywave_spool::{NewMessage, Priority, Spool, Target, unix_seconds};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::config::SmtpConfig;
use crate::metrics as m;

/// What every session needs, shared.
pub struct ListenerContext {
    /// Our host name.
    pub hostname: String,
    /// Listener settings.
    pub smtp: SmtpConfig,
    /// The routing table in force.
    pub routes: Arc<SharedRoutes>,
    /// The spool.
    pub spool: Arc<Spool>,
    /// The TLS acceptor, when STARTTLS is configured.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Woken whenever mail for the LAN has been queued.
    pub lan_wake: Arc<Notify>,
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

/// Builds the STARTTLS acceptor from PEM files (ring provider).
pub fn tls_acceptor(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<tokio_rustls::TlsAcceptor, TlsSetupError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let pem_err = |path: &std::path::Path, what: String| TlsSetupError::Pem {
        path: path.display().to_string(),
        what,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| pem_err(cert, format!("cannot read the certificate: {e}")))?
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
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// The session policy: relay control from the routing table, size limits per peer, AUTH.
pub struct GatewayPolicy {
    client: IpAddr,
    routes: Arc<SharedRoutes>,
    users: Arc<BTreeMap<String, String>>,
    /// The table taken at MAIL FROM, kept for the whole transaction.
    table: Arc<RoutingTable>,
    declared_size: Option<usize>,
    /// Where each accepted recipient goes, and its route's default priority.
    targets: HashMap<String, (Target, i8, Option<u64>)>,
}

impl std::fmt::Debug for GatewayPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayPolicy")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl GatewayPolicy {
    /// A policy for a client at `client`.
    pub fn new(
        client: IpAddr,
        routes: Arc<SharedRoutes>,
        users: Arc<BTreeMap<String, String>>,
    ) -> Self {
        let table = routes.current();
        GatewayPolicy {
            client,
            routes,
            users,
            table,
            declared_size: None,
            targets: HashMap::new(),
        }
    }
}

fn reply(code: u16, enhanced: &str, text: impl Into<String>) -> Reply {
    let mut parts = enhanced.split('.').map(|p| p.parse::<u16>().unwrap_or(0));
    let class = u8::try_from(parts.next().unwrap_or(5)).unwrap_or(5);
    let code_e = EnhancedCode::new(class, parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    Reply::new(code, code_e, text)
}

impl Policy for GatewayPolicy {
    fn mail_from(&mut self, _session: &SessionInfo, mail: &MailRequest) -> Verdict {
        // One table per transaction: a reload never changes a transaction half-way.
        self.table = self.routes.current();
        self.declared_size = mail.declared_size;
        self.targets.clear();
        Verdict::Accept
    }

    fn rcpt_to(&mut self, session: &SessionInfo, _env: &Envelope, recipient: &str) -> Verdict {
        let authenticated = session.auth_user.is_some();
        match self
            .table
            .relay_decision(self.client, authenticated, recipient)
        {
            RelayDecision::Accept(route) => {
                let (target, limit) = match route.destination {
                    Destination::Lan => (Target::Lan, None),
                    Destination::Peer(peer) => {
                        (Target::Peer(peer.name.clone()), Some(peer.size_limit))
                    }
                };
                if let (Some(limit), Some(size)) = (limit, self.declared_size)
                    && size as u64 > limit
                {
                    return Verdict::Reject(reply(
                        552,
                        "5.3.4",
                        format!(
                            "message size {size} exceeds the limit of {limit} octets for {target}"
                        ),
                    ));
                }
                self.targets.insert(
                    recipient.to_owned(),
                    (target, route.priority.value(), limit),
                );
                Verdict::Accept
            }
            RelayDecision::Refuse(refusal) => {
                debug!(client = %self.client, recipient, code = refusal.code, "recipient refused");
                Verdict::Reject(reply(refusal.code, refusal.enhanced, refusal.text))
            }
        }
    }

    fn authenticate(&mut self, _session: &SessionInfo, credentials: &Credentials) -> bool {
        let ok = self
            .users
            .get(&credentials.username)
            .is_some_and(|p| constant_time_eq(p.as_bytes(), credentials.password.as_bytes()));
        if !ok {
            warn!(client = %self.client, user = %credentials.username, "authentication failed");
        }
        ok
    }
}

/// Compares without an early exit, so response times tell nothing about the password.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for (i, x) in a.iter().enumerate() {
        diff |= x ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

fn session_config(ctx: &ListenerContext) -> ServerConfig {
    let mut c = ServerConfig::new(ctx.hostname.clone());
    c.max_message_size = usize::try_from(ctx.smtp.max_message_size).unwrap_or(usize::MAX);
    c.max_recipients = ctx.smtp.max_recipients;
    c.idle_timeout = ctx.smtp.idle_timeout;
    c.data_timeout = ctx.smtp.data_timeout;
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
    let policy = GatewayPolicy::new(peer.ip(), Arc::clone(&ctx.routes), users);
    let mut session = ServerSession::new(session_config(&ctx), policy, now());
    let mut messages = 0u32;
    let step = drive(&ctx, &mut session, &mut stream, peer, &conn, &mut messages).await;
    let result = match (step, &ctx.tls) {
        (Ok(Step::StartTls), Some(acceptor)) => match acceptor.accept(stream).await {
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
                    spool_message(ctx, session, peer, &trace, envelope, body)
                        .instrument(span)
                        .await;
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

async fn spool_message(
    ctx: &ListenerContext,
    session: &mut ServerSession<GatewayPolicy>,
    peer: SocketAddr,
    trace: &str,
    envelope: Envelope,
    body: Vec<u8>,
) {
    let table = Arc::clone(&session.policy().table);
    let mut recipients = Vec::with_capacity(envelope.recipients.len());
    let mut route_priority: Option<i8> = None;
    let mut too_big = None;
    for rcpt in &envelope.recipients {
        let known = session.policy().targets.get(rcpt).cloned();
        let (target, prio, limit) = match known {
            Some(t) => t,
            // Not seen by rcpt_to (cannot happen with the smtp crate); route it again.
            None => match table.lookup(rcpt) {
                Ok(r) => match r.destination {
                    Destination::Lan => (Target::Lan, r.priority.value(), None),
                    Destination::Peer(p) => (
                        Target::Peer(p.name.clone()),
                        r.priority.value(),
                        Some(p.size_limit),
                    ),
                },
                Err(_) => continue,
            },
        };
        if let Some(limit) = limit
            && body.len() as u64 > limit
        {
            too_big = Some((target.clone(), limit));
        }
        route_priority = Some(route_priority.map_or(prio, |p| p.max(prio)));
        recipients.push((rcpt.clone(), target));
    }
    if let Some((target, limit)) = too_big {
        let r = reply(
            552,
            "5.3.4",
            format!("message exceeds the limit of {limit} octets for {target}"),
        );
        let _ = session.message_rejected(r);
        return;
    }
    let now_unix = unix_seconds(SystemTime::now());
    let header = received_header(&ReceivedInfo {
        helo: &envelope.helo,
        client_ip: Some(peer.ip()),
        client_name: None,
        by_host: &ctx.hostname,
        protocol: envelope.protocol,
        queue_id: trace,
        recipients: &envelope.recipients,
        date: DateTime {
            unix_seconds: i64::try_from(now_unix).unwrap_or(i64::MAX),
            offset_minutes: 0,
        },
    });
    let mut message = header.into_bytes();
    message.extend_from_slice(&body);
    let default = route_priority
        .and_then(Priority::new)
        .unwrap_or(Priority::NORMAL);
    let priority = Priority::resolve(
        envelope.mt_priority.and_then(Priority::new),
        &message,
        default,
    );
    let bytes = message.len() as u64;
    let lan = recipients.iter().any(|(_, t)| *t == Target::Lan);
    let relayed = recipients.iter().filter(|(_, t)| *t != Target::Lan).count() as u64;
    let sender = envelope.reverse_path.clone();
    let spool = Arc::clone(&ctx.spool);
    let stored = tokio::task::spawn_blocking(move || {
        spool.enqueue(
            &NewMessage {
                sender,
                recipients,
                priority,
                message: &message,
            },
            now_unix,
        )
    })
    .await;
    match stored {
        Ok(Ok(id)) => {
            tracing::Span::current().record("queue_id", tracing::field::display(&id));
            info!(
                from = %envelope.reverse_path,
                rcpts = envelope.recipients.len(),
                bytes,
                %priority,
                "queued"
            );
            m::accepted(bytes, relayed);
            let _ = session.message_accepted(id.as_str());
            if lan {
                ctx.lan_wake.notify_one();
            }
        }
        Ok(Err(e)) => {
            warn!(error = %e, "spool refused the message");
            let _ = session.message_rejected(reply(
                451,
                "4.3.0",
                "local error in processing: the message could not be queued, try again later",
            ));
        }
        Err(e) => {
            warn!(error = %e, "spool task failed");
            let _ = session.message_rejected(reply(
                451,
                "4.3.0",
                "local error in processing: the message could not be queued, try again later",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use skywave_spool::SpoolConfig;
    use tokio::io::{AsyncBufReadExt, BufReader};

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

[[route]]
match = "shore.test"
to = "shore"
"#;

    struct Fixture {
        _dir: tempfile::TempDir,
        spool: Arc<Spool>,
        addr: SocketAddr,
        stop: watch::Sender<bool>,
        wake: Arc<Notify>,
    }

    async fn start() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let (spool, _) = Spool::open(dir.path().join("spool"), SpoolConfig::default()).unwrap();
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
            spool: Arc::clone(&spool),
            tls: None,
            lan_wake: Arc::clone(&wake),
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
                "Received: from client.test ([127.0.0.1])\r\n\tby gw.test (skywave) with ESMTP id S"
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

    #[test]
    fn passwords_compare_exactly() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(!constant_time_eq(b"s3cret", b"s3cre"));
        assert!(!constant_time_eq(b"s3cre", b"s3cret"));
        assert!(!constant_time_eq(b"s3cret", b"s3creT"));
    }
}
