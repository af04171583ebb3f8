//! The two IP links TCP runs over: the raw modem ([`skywave_emu::raw`]) and the STANAG 5066 IP
//! client (datagrams as U_PDUs on SAP 9 through real SIS clients on an emulated
//! [`Subnet`]). Station 0 is the ship (SMTP client), station 1 the shore (SMTP server).
//!
//! The 5066 link also counts the times one of its nodes declared the link lost
//! ([`IpLink::losses`]). That ends no TCP run: the node rejects the U_PDUs it held for the
//! peer (the IP client drops them, as Annex F.12 leaves IP best-effort), TCP resends when its
//! timer says, and the next datagram makes the link again (CAS-1), until a TCP gives up by its
//! own rule. (An HMTP session ends at the loss, and the ship's spool tries again later: see
//! [`crate::hmtp5066`].)
//! An IP client with a hold ([`crate::model::TcpSettings::ip_client_hold`]) drops what it
//! cannot hold while its node has flow off, and the link counts those datagrams.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use skywave_emu::net::{Counters, Subnet};
use skywave_emu::raw::{RawCounters, RawLink};
use skywave_sis::client::{Event, Pending, SendError};
use skywave_sis::filter::FilterConfig;
use skywave_sis::{
    Client, ClientConfig, NodeAddress, Priority, SapId, ServiceType, Ttl, UnidataRequest,
};
use tokio::sync::mpsc;

use super::TcpBenchError;
use crate::stack::LinkWatch;

/// A datagram the link delivered: (receiving station, bytes).
pub(crate) type Arrival = (usize, Vec<u8>);

/// The raw modem, run on its own virtual clock (no tokio time involved).
pub(crate) struct RawIp {
    link: RawLink,
    now: Duration,
}

/// The STANAG 5066 IP client on both nodes of a [`Subnet`] (tokio time).
pub(crate) struct S5066Ip {
    subnet: Subnet,
    clients: [Client; 2],
    addresses: [NodeAddress; 2],
    priority: Priority,
    /// The TTL every datagram's S_UNIDATA_REQUEST asks for.
    ttl: Ttl,
    arrivals: mpsc::UnboundedReceiver<Arrival>,
    _forwarders: [tokio::task::JoinHandle<()>; 2],
    links: LinkWatch,
    /// Times a node declared the link lost.
    losses: usize,
    /// Submissions whose outcome is not known yet (the IP client asks for no confirmation:
    /// each resolves once its U_PDU is written, or refused by a full hold).
    pending: Vec<Pending>,
    /// Datagrams the IP clients dropped because their hold was full.
    overflow: u64,
}

impl S5066Ip {
    /// Takes the outcomes that are in, counting the datagrams a full hold refused.
    fn reap(&mut self) {
        let mut cx = Context::from_waker(Waker::noop());
        let mut overflow = 0;
        self.pending
            .retain_mut(|p| match Pin::new(p).poll(&mut cx) {
                Poll::Ready(Err(SendError::QueueFull(_))) => {
                    overflow += 1;
                    false
                }
                Poll::Ready(_) => false,
                Poll::Pending => true,
            });
        self.overflow += overflow;
    }
}

impl Drop for S5066Ip {
    fn drop(&mut self) {
        for f in &self._forwarders {
            f.abort();
        }
    }
}

/// Either link.
pub(crate) enum IpLink {
    Raw(Box<RawIp>),
    S5066(Box<S5066Ip>),
}

impl IpLink {
    pub(crate) fn raw(link: RawLink) -> IpLink {
        IpLink::Raw(Box::new(RawIp {
            link,
            now: Duration::ZERO,
        }))
    }

    /// Binds a SIS client on SAP 9 at both nodes of `subnet` (node 0 and node 1), with the
    /// duplicate filter on SAP 9 on or off, each holding at most `hold` datagrams while its node
    /// has flow off (`None`: the SIS client's own queue) and asking for `ttl` for each one.
    pub(crate) async fn s5066(
        subnet: Subnet,
        dup_filter: bool,
        hold: Option<usize>,
        ttl: Ttl,
    ) -> Result<IpLink, TcpBenchError> {
        let (tx, arrivals) = mpsc::unbounded_channel();
        let mut clients = Vec::with_capacity(2);
        let mut forwarders = Vec::with_capacity(2);
        let mut addresses = Vec::with_capacity(2);
        for node in 0..2usize {
            let s = subnet.clone();
            let connector = move || {
                let s = s.clone();
                async move { Ok::<_, std::io::Error>(s.connect_in_process(node)) }
            };
            let mut cfg = ClientConfig::new(SapId::IP_CLIENT, ServiceType::ARQ);
            if let Some(hold) = hold {
                cfg.queue_limit = hold;
            }
            cfg.filter = if dup_filter {
                FilterConfig::default().with_sap(SapId::IP_CLIENT, true)
            } else {
                FilterConfig::disabled()
            };
            let (client, bound, mut events) = Client::connect(connector, cfg)
                .await
                .map_err(|e| TcpBenchError::Sis(format!("binding SAP 9 on node {node}: {e}")))?;
            if bound.mtu < 576 {
                return Err(TcpBenchError::Sis(format!(
                    "node {node} granted an MTU of {} bytes, too small for IP",
                    bound.mtu
                )));
            }
            let tx = tx.clone();
            forwarders.push(tokio::spawn(async move {
                while let Some(ev) = events.recv().await {
                    if let Event::Unidata(ind) = ev
                        && tx.send((node, ind.updu.to_vec())).is_err()
                    {
                        break;
                    }
                }
            }));
            clients.push(client);
            addresses.push(
                subnet
                    .address(node)
                    .ok_or_else(|| TcpBenchError::Sis(format!("no node {node}")))?,
            );
        }
        let (Ok(clients), Ok(forwarders), Ok(addresses)) = (
            <[Client; 2]>::try_from(clients),
            <[tokio::task::JoinHandle<()>; 2]>::try_from(forwarders),
            <[NodeAddress; 2]>::try_from(addresses),
        ) else {
            return Err(TcpBenchError::Sis("expected two nodes".into()));
        };
        let priority = Priority::new(0).map_err(|e| TcpBenchError::Sis(e.to_string()))?;
        let links = LinkWatch::new(&subnet);
        Ok(IpLink::S5066(Box::new(S5066Ip {
            links,
            losses: 0,
            pending: Vec::new(),
            overflow: 0,
            subnet,
            clients,
            addresses,
            priority,
            ttl,
            arrivals,
            _forwarders: forwarders,
        })))
    }

    /// Simulated time now.
    pub(crate) fn now(&self) -> Duration {
        match self {
            IpLink::Raw(r) => r.now,
            IpLink::S5066(s) => s.subnet.now(),
        }
    }

    /// Hands a datagram from `station` to the link at the current time; any datagrams the
    /// link released meanwhile are appended to `out`.
    pub(crate) fn send(
        &mut self,
        station: usize,
        datagram: Vec<u8>,
        out: &mut Vec<Arrival>,
    ) -> Result<(), TcpBenchError> {
        match self {
            IpLink::Raw(r) => {
                let got = r
                    .link
                    .send(r.now, station, datagram)
                    .map_err(|e| TcpBenchError::Link(e.to_string()))?;
                out.extend(got.into_iter().map(|d| (d.to, d.datagram)));
                Ok(())
            }
            IpLink::S5066(s) => {
                let (Some(client), Some(&dest)) =
                    (s.clients.get(station), s.addresses.get(1 - station.min(1)))
                else {
                    return Err(TcpBenchError::Link(format!("no station {station}")));
                };
                let req = UnidataRequest {
                    priority: s.priority,
                    dest_sap: SapId::IP_CLIENT,
                    dest,
                    mode: ServiceType::DEFAULT,
                    ttl: s.ttl,
                    updu: Bytes::from(datagram),
                };
                // The IP client asks for no confirmation: the pending outcome resolves when
                // the U_PDU is written (or dropped by the duplicate filter or a full hold);
                // nobody waits, the link only counts the drops.
                let p = client
                    .send_unidata(req)
                    .map_err(|e| TcpBenchError::Sis(format!("submitting a datagram: {e}")))?;
                s.pending.push(p);
                s.reap();
                Ok(())
            }
        }
    }

    /// Waits until `deadline` (simulated time) or until the link delivers something,
    /// whichever is first, and returns the deliveries (none at the deadline).
    pub(crate) async fn wait(&mut self, deadline: Duration) -> Vec<Arrival> {
        match self {
            IpLink::Raw(r) => {
                let next = r.link.poll_at().map_or(deadline, |t| t.min(deadline));
                r.now = r.now.max(next);
                let got = r.link.advance(r.now);
                got.into_iter().map(|d| (d.to, d.datagram)).collect()
            }
            IpLink::S5066(s) => {
                let mut got = Vec::new();
                let wait = deadline.saturating_sub(s.subnet.now());
                tokio::select! {
                    // A fixed order keeps runs repeatable (select! otherwise polls at random); what
                    // arrived is collected below whichever branch wins.
                    biased;
                    a = s.arrivals.recv() => got.extend(a),
                    _ = s.links.lost() => s.losses += 1,
                    () = tokio::time::sleep(wait) => {}
                }
                while let Ok(a) = s.arrivals.try_recv() {
                    got.push(a);
                }
                got
            }
        }
    }

    /// Whether a node of the 5066 link declared it lost during a [`IpLink::wait`] (never on
    /// the raw modem, which has no ARQ to give up).
    pub(crate) fn link_lost(&self) -> bool {
        self.losses() > 0
    }

    /// How many times a node of the 5066 link declared it lost (0 on the raw modem).
    pub(crate) fn losses(&self) -> usize {
        match self {
            IpLink::Raw(_) => 0,
            IpLink::S5066(s) => s.losses,
        }
    }

    /// Waits (5066 only) until the channel has been quiet for a minute, so the counters
    /// include the trailing ARQ acknowledgements.
    pub(crate) async fn settle(&self) {
        if let IpLink::S5066(s) = self {
            crate::stack::settle(&s.subnet).await;
        }
    }

    /// What the link counted so far.
    pub(crate) fn counters(&mut self) -> LinkCounters {
        match self {
            IpLink::Raw(r) => LinkCounters::Raw(r.link.counters()),
            IpLink::S5066(s) => {
                s.reap();
                LinkCounters::S5066 {
                    channel: Box::new(s.subnet.counters()),
                    filtered: s.clients.iter().map(|c| c.filter_stats().dropped).sum(),
                    overflow: s.overflow,
                }
            }
        }
    }
}

/// What a link counted.
#[derive(Debug, Clone)]
pub(crate) enum LinkCounters {
    Raw(RawCounters),
    S5066 {
        channel: Box<Counters>,
        filtered: u64,
        /// Datagrams the IP clients dropped for a full hold.
        overflow: u64,
    },
}
