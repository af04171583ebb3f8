//! The UDP/IP bearer of P_MUL: ACP 142's own binding, for fleet mail over satellite and
//! line-of-sight IP networks (`[pmul_ip]` in the gateway configuration, `bearer = "pmul-ip"`
//! groups in the routing table).
//!
//! The multicast link (`pmul_link`) runs the same sans-IO P_MUL core over this bearer as over
//! STANAG 5066; only the sockets differ. ACP 142 gives P_MUL four UDP ports (see
//! [`crate::config::ACP142_PORTS`]): TPORT between transmitters (Request, Reject, Release PDUs), RPORT for
//! Announce_PDUs to receivers, DPORT for the data (Address, Data, Discard_Message PDUs) and APORT
//! for the receivers' Ack_PDUs back to the transmitter. One PDU is one datagram.
//!
//! Sockets: one per port bound to the gateway's own unicast address (acknowledgements, Reject
//! PDUs and mail for one node alone arrive there; everything this gateway sends leaves from
//! its DPORT socket, so receivers see its own address as the source), and one per (multicast
//! address, port) it listens on, bound to that address with `SO_REUSEADDR` so that several
//! gateways on one host (a test, a lab) each get a copy: a receiver listens on DPORT, RPORT and
//! TPORT of the groups in `join` and of the dynamic groups announced to it; a transmitter on
//! TPORT of its own groups, to hear other transmitters' Requests.
//!
//! Every datagram in and out can be written to a pcap file (raw IPv4/IPv6 with UDP headers
//! synthesised, checksums computed), which Wireshark's P_MUL dissector decodes. A drill setting
//! drops a fraction of received datagrams, as a lossy network would.
//!
//! EMCON: the link sends nothing while EMCON holds (it never calls the send functions); the
//! kernel's own IGMP/MLD membership reports when a group is joined are not the gateway's to
//! suppress: a host that must stay silent on an IP network needs its firewall to say so too.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use skywave_emu::ipnet::{IpNet, Subscription};
use skywave_sis::pcap::{LINKTYPE_RAW, PcapWriter, ip_udp_packet};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use crate::config::{PmulInterface, PmulIpConfig};

/// The role of each of ACP 142's ports, as indexes into `ports`.
pub(crate) const TPORT: usize = 0;
/// Announce_PDUs to receivers.
pub(crate) const RPORT: usize = 1;
/// Address, Data and Discard_Message PDUs.
pub(crate) const DPORT: usize = 2;
/// Ack_PDUs back to the transmitter.
pub(crate) const APORT: usize = 3;

/// Largest datagram read.
const MAX_DATAGRAM: usize = 65_535;

/// A datagram received on one of the bearer's sockets.
#[derive(Debug)]
pub(crate) struct Datagram {
    /// Its bytes: one P_MUL PDU.
    pub bytes: Bytes,
    /// Where it came from.
    pub from: SocketAddr,
}

/// Why the IP bearer could not start.
#[derive(Debug, thiserror::Error)]
pub enum PmulIpError {
    /// A socket could not be opened, bound or joined.
    #[error("P_MUL over IP: cannot {what} {addr}: {source}")]
    Socket {
        /// What was tried.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: io::Error,
    },
    /// The pcap file could not be created.
    #[error("P_MUL over IP: cannot write the capture {path}: {source}")]
    Pcap {
        /// The file.
        path: String,
        /// The error.
        source: io::Error,
    },
}

type Capture = Arc<Mutex<PcapWriter<BufWriter<File>>>>;

/// How the datagrams of P_MUL over IP travel: the host's UDP sockets, or an emulated network
/// (the fleet benchmark's IP bearer, in virtual time).
#[derive(Debug, Clone, Default)]
pub enum IpNetwork {
    /// Real sockets.
    #[default]
    Udp,
    /// [`skywave_emu::ipnet::IpNet`].
    Emulated(Arc<IpNet>),
}

/// Where a carrier's datagrams go out.
enum Out {
    /// Bound to our own address at DPORT.
    Udp(Arc<UdpSocket>),
    /// Sent from our own address at DPORT.
    Emulated(Arc<IpNet>),
}

/// One address and port a carrier listens on: its receive task, and its subscription on an
/// emulated network.
type Listener = (tokio::task::JoinHandle<()>, Option<Subscription>);

/// The sockets of P_MUL over IP.
pub(crate) struct IpCarrier {
    pub(crate) config: PmulIpConfig,
    out: Out,
    tx: mpsc::UnboundedSender<Datagram>,
    rx: mpsc::UnboundedReceiver<Datagram>,
    /// Multicast listeners by (group, port index).
    listening: Mutex<HashMap<(IpAddr, usize), Listener>>,
    capture: Option<Capture>,
    shutdown: watch::Receiver<bool>,
}

impl std::fmt::Debug for IpCarrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpCarrier")
            .field("address", &self.config.address)
            .field("ports", &self.config.ports)
            .finish_non_exhaustive()
    }
}

impl IpCarrier {
    /// Opens the unicast sockets on our own address and joins the configured groups.
    pub(crate) fn start(
        config: PmulIpConfig,
        network: IpNetwork,
        shutdown: watch::Receiver<bool>,
    ) -> Result<IpCarrier, PmulIpError> {
        let capture = match &config.pcap {
            Some(path) => Some(open_capture(path)?),
            None => None,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let own = |i: usize| SocketAddr::new(config.address, config.ports[i]);
        let out = match &network {
            IpNetwork::Udp => {
                // Indexed by port role, TPORT to APORT.
                let mut sockets = Vec::with_capacity(4);
                for i in [TPORT, RPORT, DPORT, APORT] {
                    let addr = own(i);
                    let socket = Arc::new(open(addr, false, &config).map_err(|source| {
                        PmulIpError::Socket {
                            what: "bind",
                            addr,
                            source,
                        }
                    })?);
                    sockets.push(Arc::clone(&socket));
                    tokio::spawn(pump(
                        socket,
                        addr,
                        tx.clone(),
                        config.clone(),
                        capture.clone(),
                        shutdown.clone(),
                    ));
                }
                Out::Udp(Arc::clone(&sockets[DPORT]))
            }
            IpNetwork::Emulated(net) => {
                for i in [TPORT, RPORT, DPORT, APORT] {
                    subscribe(net, own(i), &tx, &config, &capture, &shutdown);
                }
                Out::Emulated(Arc::clone(net))
            }
        };
        let carrier = IpCarrier {
            config,
            out,
            tx,
            rx,
            listening: Mutex::new(HashMap::new()),
            capture,
            shutdown,
        };
        for g in carrier.config.join.clone() {
            for port in [TPORT, RPORT, DPORT] {
                carrier.listen(g, port)?;
            }
        }
        info!(
            address = %carrier.config.address,
            ports = ?carrier.config.ports,
            joined = ?carrier.config.join,
            emulated = matches!(carrier.out, Out::Emulated(_)),
            "P_MUL over UDP/IP listening"
        );
        Ok(carrier)
    }

    /// Listens on `group` at port `port` (an index: [`TPORT`] ...), once.
    pub(crate) fn listen(&self, group: IpAddr, port: usize) -> Result<(), PmulIpError> {
        let mut listening = self.listening.lock().unwrap_or_else(|p| p.into_inner());
        if listening.contains_key(&(group, port)) {
            return Ok(());
        }
        let addr = SocketAddr::new(group, self.config.ports[port]);
        let listener = match &self.out {
            Out::Udp(_) => {
                let socket = open(addr, true, &self.config)
                    .and_then(|s| {
                        join(&s, group, &self.config)?;
                        Ok(s)
                    })
                    .map_err(|source| PmulIpError::Socket {
                        what: "join",
                        addr,
                        source,
                    })?;
                let task = tokio::spawn(pump(
                    Arc::new(socket),
                    addr,
                    self.tx.clone(),
                    self.config.clone(),
                    self.capture.clone(),
                    self.shutdown.clone(),
                ));
                (task, None)
            }
            Out::Emulated(net) => subscribe(
                net,
                addr,
                &self.tx,
                &self.config,
                &self.capture,
                &self.shutdown,
            ),
        };
        listening.insert((group, port), listener);
        debug!(%addr, "listening on a multicast group");
        Ok(())
    }

    /// Stops listening on `group` (a dynamic group released or expired).
    pub(crate) fn leave(&self, group: IpAddr) {
        let mut listening = self.listening.lock().unwrap_or_else(|p| p.into_inner());
        listening.retain(|(g, _), (task, sub)| {
            if *g != group {
                return true;
            }
            task.abort();
            if let (Out::Emulated(net), Some(sub)) = (&self.out, sub) {
                net.unsubscribe(*sub);
            }
            false
        });
    }

    /// The next datagram received (none once every socket task ended).
    pub(crate) async fn recv(&mut self) -> Option<Datagram> {
        self.rx.recv().await
    }

    /// Sends one PDU to `to:port` (an index: [`DPORT`] ...).
    pub(crate) fn send(&self, to: IpAddr, port: usize, pdu: &[u8]) -> Result<(), String> {
        let dest = SocketAddr::new(to, self.config.ports[port]);
        let local = match &self.out {
            Out::Udp(socket) => {
                socket
                    .try_send_to(pdu, dest)
                    .map_err(|e| format!("UDP to {dest}: {e}"))?;
                socket.local_addr().ok()
            }
            Out::Emulated(net) => {
                let local = SocketAddr::new(self.config.address, self.config.ports[DPORT]);
                net.send(local, dest, Bytes::copy_from_slice(pdu));
                Some(local)
            }
        };
        if let (Some(c), Some(local)) = (&self.capture, local) {
            record(c, local, dest, pdu);
        }
        Ok(())
    }
}

/// What every receive path does with a datagram: drops our own multicast echoes (and, in a
/// drill, a share of the rest), captures what it keeps. True to keep it.
fn keep(
    config: &PmulIpConfig,
    capture: Option<&Capture>,
    from: SocketAddr,
    local: SocketAddr,
    bytes: &[u8],
) -> bool {
    if from.ip() == config.address {
        return false;
    }
    if config.drop_inbound > 0.0 && rand::random::<f64>() < config.drop_inbound {
        debug!(%from, %local, bytes = bytes.len(), "datagram dropped (drop_inbound drill)");
        return false;
    }
    if let Some(c) = capture {
        record(c, from, local, bytes);
    }
    true
}

/// Listens on `addr` of an emulated network: its deliveries go through [`keep`] to `tx`.
fn subscribe(
    net: &Arc<IpNet>,
    addr: SocketAddr,
    tx: &mpsc::UnboundedSender<Datagram>,
    config: &PmulIpConfig,
    capture: &Option<Capture>,
    shutdown: &watch::Receiver<bool>,
) -> Listener {
    let (sink, mut deliveries) = mpsc::unbounded_channel();
    let sub = net.subscribe(addr, sink);
    let (tx, config, capture, mut shutdown) = (
        tx.clone(),
        config.clone(),
        capture.clone(),
        shutdown.clone(),
    );
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                d = deliveries.recv() => {
                    let Some((from, to, bytes)) = d else { return };
                    if keep(&config, capture.as_ref(), from, to, &bytes)
                        && tx.send(Datagram { bytes, from }).is_err()
                    {
                        return;
                    }
                }
                _ = shutdown.changed() => return,
            }
        }
    });
    (task, Some(sub))
}

/// Receives on one socket until shutdown, dropping our own multicast echoes (and, in a drill,
/// a share of the rest), capturing what it keeps.
async fn pump(
    socket: Arc<UdpSocket>,
    local: SocketAddr,
    tx: mpsc::UnboundedSender<Datagram>,
    config: PmulIpConfig,
    capture: Option<Capture>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        tokio::select! {
            r = socket.recv_from(&mut buf) => match r {
                Ok((n, from)) => {
                    if !keep(&config, capture.as_ref(), from, local, &buf[..n]) {
                        continue;
                    }
                    let bytes = Bytes::copy_from_slice(&buf[..n]);
                    if tx.send(Datagram { bytes, from }).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    // ICMP errors of earlier sends surface here on some systems: not fatal.
                    debug!(%local, error = %e, "UDP receive error");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            _ = shutdown.changed() => return,
        }
    }
}

/// A UDP socket bound to `addr`, with the multicast sending options of `config`.
fn open(addr: SocketAddr, shared: bool, config: &PmulIpConfig) -> io::Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if shared {
        s.set_reuse_address(true)?;
    }
    match addr.ip() {
        IpAddr::V4(own) => {
            let iface = match config.interface {
                Some(PmulInterface::V4(i)) => i,
                _ if own.is_multicast() => own_v4(config),
                _ => own,
            };
            s.set_multicast_if_v4(&iface)?;
            s.set_multicast_ttl_v4(config.ttl)?;
            s.set_multicast_loop_v4(true)?;
        }
        IpAddr::V6(_) => {
            s.set_only_v6(true)?;
            if let Some(PmulInterface::V6(i)) = config.interface {
                s.set_multicast_if_v6(i)?;
            }
            s.set_multicast_hops_v6(config.ttl)?;
            s.set_multicast_loop_v6(true)?;
        }
    }
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    UdpSocket::from_std(s.into())
}

fn own_v4(config: &PmulIpConfig) -> Ipv4Addr {
    match config.address {
        IpAddr::V4(a) => a,
        IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
    }
}

/// Joins `group` on the configured interface (IPv4: the interface's address, by default our
/// own; IPv6: its index, by default the system's choice).
fn join(socket: &UdpSocket, group: IpAddr, config: &PmulIpConfig) -> io::Result<()> {
    match group {
        IpAddr::V4(g) => {
            let iface = match config.interface {
                Some(PmulInterface::V4(i)) => i,
                _ => own_v4(config),
            };
            socket.join_multicast_v4(g, iface)
        }
        IpAddr::V6(g) => {
            let iface = match config.interface {
                Some(PmulInterface::V6(i)) => i,
                _ => 0,
            };
            socket.join_multicast_v6(&g, iface)
        }
    }
}

fn open_capture(path: &Path) -> Result<Capture, PmulIpError> {
    let err = |source| PmulIpError::Pcap {
        path: path.display().to_string(),
        source,
    };
    let file = File::create(path).map_err(err)?;
    let w = PcapWriter::with_link_type(BufWriter::new(file), LINKTYPE_RAW).map_err(err)?;
    Ok(Arc::new(Mutex::new(w)))
}

/// Writes one datagram to the capture as a raw IP packet.
fn record(capture: &Capture, from: SocketAddr, to: SocketAddr, payload: &[u8]) {
    let Some(packet) = ip_udp_packet(from, to, payload) else {
        return;
    };
    let ts = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let mut w = capture.lock().unwrap_or_else(|p| p.into_inner());
    // Flushed per record: the capture is for people reading it while the gateway runs.
    if let Err(e) = w.write_frame(ts, &packet).and_then(|()| w.flush()) {
        warn!(error = %e, "cannot write the P_MUL capture");
    }
}
