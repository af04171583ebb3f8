//! The SIS bearer: the gateway's connections to STANAG 5066 servers.
//!
//! One [`Endpoint`] per (SIS server, SAP) pair in use: SAP 3 for HMTP peers, SAP 12 for CFTP
//! peers, each its own SIS connection as Annex A wants (one bound SAP per connection). The
//! endpoint keeps the `skywave_sis::Client` (which answers keep-alives, honours flow control,
//! reconnects and rebinds by itself), hands every received U_PDU to the link of the peer whose
//! node sent it, and tells the links when the subnetwork comes back so queued mail goes at
//! once. Sending cuts nothing: the protocol sessions already cut their streams at the MTU the
//! endpoint reports.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use skywave_sis::{
    Client, ClientConfig, ConfirmedPrefix, Connector, Event, NodeAddress, Priority, SapId,
    ServiceType, SubnetStatus, Ttl, UnidataRequest,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

/// A byte stream to a SIS server.
pub trait SisStream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> SisStream for T {}

/// A boxed SIS byte stream.
pub type Transport = Box<dyn SisStream>;

type ConnectFuture = Pin<Box<dyn Future<Output = io::Result<Transport>> + Send>>;

/// How the gateway opens a connection to a SIS server named `host:port`: over TCP in
/// production, in-process to the bundled emulator in the demo and in tests.
#[derive(Clone)]
pub struct SisConnect(Arc<dyn Fn(&str) -> ConnectFuture + Send + Sync>);

impl std::fmt::Debug for SisConnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SisConnect")
    }
}

impl SisConnect {
    /// TCP to the named server, Nagle off (small primitives such as keep-alive answers leave
    /// at once).
    pub fn tcp() -> Self {
        SisConnect::new(|server: &str| {
            let server = server.to_owned();
            Box::pin(async move {
                let s = tokio::net::TcpStream::connect(&server).await?;
                s.set_nodelay(true)?;
                Ok(Box::new(s) as Transport)
            })
        })
    }

    /// Any way of opening a stream, given the server's name.
    pub fn new(f: impl Fn(&str) -> ConnectFuture + Send + Sync + 'static) -> Self {
        SisConnect(Arc::new(f))
    }

    fn open(&self, server: &str) -> ConnectFuture {
        (self.0)(server)
    }
}

/// A [`Connector`] to one named server.
struct Named {
    connect: SisConnect,
    server: String,
}

impl Connector for Named {
    type Transport = Transport;

    fn connect(&mut self) -> impl Future<Output = io::Result<Transport>> + Send {
        self.connect.open(&self.server)
    }
}

/// What an endpoint tells a peer's link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkInput {
    /// A U_PDU from the peer, in order.
    Updu(Bytes),
    /// The SIS connection is (again) bound and the subnetwork is available.
    LinkUp,
    /// The SIS connection was lost (the client reconnects by itself).
    LinkDown(String),
    /// Every U_PDU of a submission of ours went without failing.
    Delivered {
        /// The submission's tag, as given in its [`Report`].
        submission: u64,
        /// The peer's node confirmed every one (SIS node delivery confirmation): the peer has
        /// all of it now. False when one went without a confirmation (none asked, or dropped
        /// by the duplicate filter as a copy of one still queued): nothing says when.
        confirmed: bool,
    },
    /// A U_PDU of our own submission could not be delivered (rejected or lost).
    SendFailed {
        /// What the server said.
        reason: String,
        /// The submission's tag, as given in its [`Report`].
        submission: u64,
        /// How many of the submission's U_PDUs, in order from the first, the peer's node
        /// confirmed before the failure: the peer has at least these (it may have more: one
        /// delivered just before the link failed has no confirmation).
        confirmed: usize,
    },
}

/// Where an endpoint reports that a submission was delivered or that a U_PDU of it was not, and
/// the sender's tag for that submission: the answer can come long after the U_PDUs were handed
/// over (a busy frequency, a server's confirm wait, a TTL), when the sender has moved on to
/// another submission.
#[derive(Debug, Clone)]
pub struct Report {
    /// The link to tell.
    pub to: mpsc::UnboundedSender<LinkInput>,
    /// The sender's tag for the submission.
    pub submission: u64,
}

/// The links an endpoint feeds, by the node of their peer; a reload may add to it.
type LinkMap = Arc<std::sync::Mutex<HashMap<NodeAddress, mpsc::UnboundedSender<LinkInput>>>>;

/// What this gateway has handed one SIS server's node and the node has not had time to send
/// yet, as airtime at `[hf] assumed_bps`: a leaky bucket that every link's submissions on that
/// server fill (all SAPs: HMTP, CFTP and P_MUL share the node and its half-duplex radio) and
/// that drains at the assumed rate. An estimate (the node adds headers, ARQ repeats and the
/// peers' turns); its one use is where the alternative is to take the node for idle: a P_MUL
/// repair round waits until the node has sent what was queued before the ships could answer.
#[derive(Debug)]
pub struct Backlog {
    bytes_per_s: f64,
    /// (bytes not yet sent, when that was last brought up to date).
    state: std::sync::Mutex<(f64, tokio::time::Instant)>,
}

impl Backlog {
    /// An empty backlog draining at `bps` bit/s.
    pub fn new(bps: u32) -> Backlog {
        Backlog {
            bytes_per_s: f64::from(bps.max(1)) / 8.0,
            state: std::sync::Mutex::new((0.0, tokio::time::Instant::now())),
        }
    }

    /// The bytes left now, after draining since the last look.
    fn level(&self) -> std::sync::MutexGuard<'_, (f64, tokio::time::Instant)> {
        let mut s = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = tokio::time::Instant::now();
        let sent = now.duration_since(s.1).as_secs_f64() * self.bytes_per_s;
        *s = ((s.0 - sent).max(0.0), now);
        s
    }

    /// `bytes` more handed to the node.
    pub fn add(&self, bytes: usize) {
        self.level().0 += bytes as f64;
    }

    /// How long the node needs to send what it still holds, at the assumed rate.
    pub fn drain_time(&self) -> Duration {
        Duration::from_secs_f64(self.level().0 / self.bytes_per_s)
    }
}

/// One SIS connection (one server, one SAP), shared by the links of the peers that use it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    server: String,
    sap: SapId,
    client: watch::Receiver<Option<Client>>,
    links: LinkMap,
    backlog: Arc<Backlog>,
    /// Its U_PDUs go with node delivery confirmation (ARQ): each submission is answered,
    /// delivered or not.
    confirms: bool,
}

/// The link map, even if a thread panicked while holding it (the map itself stays whole).
fn lock(
    links: &LinkMap,
) -> std::sync::MutexGuard<'_, HashMap<NodeAddress, mpsc::UnboundedSender<LinkInput>>> {
    links
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Endpoint {
    /// Starts the endpoint: connects (retrying with backoff until it succeeds or `shutdown`),
    /// binds `sap`, and forwards each U_PDU to the link registered for its source node. What
    /// it sends counts in `backlog`, the server's (shared by its endpoints).
    pub fn start(
        connect: SisConnect,
        server: String,
        sap: SapId,
        links: HashMap<NodeAddress, mpsc::UnboundedSender<LinkInput>>,
        backlog: Arc<Backlog>,
        mut shutdown: watch::Receiver<bool>,
    ) -> (Endpoint, tokio::task::JoinHandle<()>) {
        let (tx, rx) = watch::channel(None);
        let name = server.clone();
        // P_MUL's SAP is non-ARQ by nature (broadcast to a group, repairs its own way).
        let service = if sap == super::pmul_link::SAP {
            ServiceType::NON_ARQ
        } else {
            ServiceType::ARQ_NODE_CONFIRM
        };
        let links: LinkMap = Arc::new(std::sync::Mutex::new(links));
        let shared = Arc::clone(&links);
        let task = tokio::spawn(async move {
            let mut delay = Duration::from_secs(1);
            let (client, bound, mut events) = loop {
                let connector = Named {
                    connect: connect.clone(),
                    server: name.clone(),
                };
                let cfg = ClientConfig::new(sap, service);
                tokio::select! {
                    r = Client::connect(connector, cfg) => match r {
                        Ok(ok) => break ok,
                        Err(e) => {
                            warn!(server = %name, sap = sap.get(), error = %e, retry_in = ?delay, "cannot bind to the SIS server");
                        }
                    },
                    _ = shutdown.changed() => return,
                }
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    _ = shutdown.changed() => return,
                }
                delay = (delay * 2).min(Duration::from_secs(60));
            };
            info!(server = %name, sap = sap.get(), mtu = bound.mtu, "bound to the SIS server");
            let _ = tx.send(Some(client.clone()));
            let all = |input: LinkInput| {
                for l in lock(&links).values() {
                    let _ = l.send(input.clone());
                }
            };
            all(LinkInput::LinkUp);
            loop {
                let event = tokio::select! {
                    e = events.recv() => e,
                    _ = shutdown.changed() => None,
                };
                let Some(event) = event else { break };
                match event {
                    Event::Unidata(ind) | Event::Expedited(ind) => match lock(&links).get(&ind.src)
                    {
                        Some(link) => {
                            let _ = link.send(LinkInput::Updu(ind.updu.clone()));
                        }
                        None => warn!(
                            src = %ind.src,
                            bytes = ind.updu.len(),
                            "U_PDU from a node that is no peer of ours: dropped"
                        ),
                    },
                    Event::Reconnected(b) => {
                        info!(server = %name, mtu = b.mtu, "SIS connection restored");
                        all(LinkInput::LinkUp);
                    }
                    Event::SubnetAvailability { status, reason } => {
                        debug!(?status, ?reason, "subnetwork availability");
                        if !matches!(status, SubnetStatus::Off) {
                            all(LinkInput::LinkUp);
                        }
                    }
                    Event::Disconnected { reason } => {
                        warn!(server = %name, %reason, "SIS connection lost; reconnecting");
                        all(LinkInput::LinkDown(reason));
                    }
                    other => debug!(?other, "SIS event"),
                }
            }
            let _ = client.unbind().await;
        });
        (
            Endpoint {
                server,
                sap,
                client: rx,
                links: shared,
                backlog,
                confirms: service.confirmation.is_requested(),
            },
            task,
        )
    }

    /// Feeds a link started after the endpoint (a peer added by a reload); it takes over
    /// `node` from any link that had it. The new link hears at once that the link is up when
    /// the endpoint is bound, as the others did when it bound.
    pub fn add_link(&self, node: NodeAddress, link: mpsc::UnboundedSender<LinkInput>) {
        if self.mtu().is_some() {
            let _ = link.send(LinkInput::LinkUp);
        }
        lock(&self.links).insert(node, link);
    }

    /// Whether every submission is answered by the server, [`LinkInput::Delivered`] or
    /// [`LinkInput::SendFailed`] (ARQ with node delivery confirmation).
    pub fn confirms(&self) -> bool {
        self.confirms
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// What the server's node still holds from this gateway (every SAP), as an estimate.
    pub fn backlog(&self) -> &Backlog {
        &self.backlog
    }

    /// The MTU while bound; `None` before the first bind or while reconnecting.
    pub fn mtu(&self) -> Option<usize> {
        let c = self.client.borrow();
        c.as_ref().map(|c| usize::from(c.mtu())).filter(|&m| m > 0)
    }

    /// Sends U_PDUs to `dest` in order (ARQ with node delivery confirmation). Failures are
    /// reported on `report` (the link's own inbox), so the link can end a session whose
    /// submission never arrived instead of waiting for its timeout, and so is the confirmation
    /// of the last of them ([`LinkInput::Delivered`]), from when the peer can answer.
    pub fn send(
        &self,
        dest: NodeAddress,
        priority: Priority,
        updus: Vec<Vec<u8>>,
        report: Option<Report>,
    ) -> Result<(), String> {
        self.send_mode(dest, priority, ServiceType::DEFAULT, updus, report)
    }

    /// Sends U_PDUs to `dest` (an individual or a group address) in delivery mode `mode`
    /// (`ServiceType::DEFAULT`: the bind's).
    pub fn send_mode(
        &self,
        dest: NodeAddress,
        priority: Priority,
        mode: ServiceType,
        updus: Vec<Vec<u8>>,
        report: Option<Report>,
    ) -> Result<(), String> {
        let client = self
            .client
            .borrow()
            .clone()
            .ok_or_else(|| format!("not bound to the SIS server {}", self.server))?;
        let bytes = updus.iter().map(Vec::len).sum();
        let sap = self.sap;
        let request = move |u: Vec<u8>| UnidataRequest {
            priority,
            dest_sap: sap,
            dest,
            mode,
            ttl: Ttl::INFINITE,
            updu: Bytes::from(u),
        };
        // The first IN_FLIGHT now, so that a client that cannot take any says so here; the
        // rest as the first are confirmed (see IN_FLIGHT).
        let mut rest = updus.into_iter();
        let mut pending = std::collections::VecDeque::with_capacity(IN_FLIGHT);
        for u in rest.by_ref().take(IN_FLIGHT) {
            pending.push_back(client.send_unidata(request(u)).map_err(|e| e.to_string())?);
        }
        self.backlog.add(bytes);
        tokio::spawn(async move {
            // Written without a confirmation asked (non-ARQ), or dropped as a copy of one still
            // queued: nothing says when the peer has it, nor the ones after it.
            let mut prefix = ConfirmedPrefix::default();
            let failed = |e: String, prefix: ConfirmedPrefix| {
                let text = format!("U_PDU to {dest} not delivered: {e}");
                debug!("{text}");
                if let Some(r) = &report {
                    let _ = r.to.send(LinkInput::SendFailed {
                        reason: text,
                        submission: r.submission,
                        confirmed: prefix.count(),
                    });
                }
            };
            while let Some(p) = pending.pop_front() {
                match p.await {
                    Ok(d) => prefix.record(&d),
                    Err(e) => return failed(e.to_string(), prefix),
                }
                if let Some(u) = rest.next() {
                    match client.send_unidata(request(u)) {
                        Ok(p) => pending.push_back(p),
                        Err(e) => return failed(e.to_string(), prefix),
                    }
                }
            }
            if let Some(r) = report {
                let _ = r.to.send(LinkInput::Delivered {
                    submission: r.submission,
                    confirmed: prefix.unbroken(),
                });
            }
        });
        Ok(())
    }
}

/// U_PDUs of one submission handed to the SIS client at once; the rest follow one by one as
/// the first are confirmed (or written, without a confirmation). The client holds at most
/// 1024 while its server has flow off, and refuses the next: a session of more (a message of
/// some 2 MB at a 2048-octet MTU) lost its end that way at every attempt, after hours of air.
/// 256 keep any node's ARQ window full (128 D_PDUs) and leave room for four submissions at
/// once (sessions to other peers, replies, markers).
const IN_FLIGHT: usize = 256;

/// The STANAG 5066 priority (0-15) of mail with this RFC 6710 priority (-9..9).
pub fn priority_5066(mt_priority: i8) -> Priority {
    let p = (i16::from(mt_priority.clamp(-9, 9)) + 9) * 15 / 18;
    Priority::new(u8::try_from(p).unwrap_or(0)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_map_onto_the_5066_range() {
        assert_eq!(priority_5066(-9).get(), 0);
        assert_eq!(priority_5066(0).get(), 7);
        assert_eq!(priority_5066(9).get(), 15);
        assert_eq!(priority_5066(6).get(), 12);
    }

    #[tokio::test(start_paused = true)]
    async fn the_backlog_drains_at_the_assumed_rate() {
        let b = Backlog::new(1200);
        assert_eq!(b.drain_time(), Duration::ZERO);
        // 1500 bytes at 1200 bit/s: 10 s of air.
        b.add(1500);
        assert_eq!(b.drain_time(), Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(b.drain_time(), Duration::from_secs(6));
        b.add(300);
        assert_eq!(b.drain_time(), Duration::from_secs(8));
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(b.drain_time(), Duration::ZERO, "never below empty");
        b.add(150);
        assert_eq!(b.drain_time(), Duration::from_secs(1));
    }
}
