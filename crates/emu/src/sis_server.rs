//! The SIS server of each emulated node (STANAG 5066 Annex A, server side): one client per
//! connection, over any byte stream: an in-process `tokio::io::duplex` pipe (virtual-time tests,
//! the demo) or TCP (the standalone `skywave-emu`).
//!
//! Handled: S_BIND_REQUEST (accepted with the configured MTU and followed by
//! S_SUBNET_AVAILABILITY "half duplex", or rejected with reason 3 when another client holds
//! the SAP, or with reason 2 for a second bind on the same connection; rank 15 gets no
//! special rights), S_UNBIND_REQUEST (releases the SAP and closes),
//! S_UNIDATA_REQUEST and S_EXPEDITED_UNIDATA_REQUEST (larger than the MTU: rejected with
//! reason 4; unknown destination node: reason 3; ARQ or non-ARQ per the delivery mode or the
//! bind's service type, expedited ones through the expedited ARQ or as expedited non-ARQ,
//! see [`crate::net`]), S_KEEP_ALIVE (echoed), and S_DATA_FLOW_OFF / ON when
//! the client's queue passes the subnetwork's flow limit and drains to half of it,
//! S_HARD_LINK_ESTABLISH, TERMINATE, ACCEPT and REJECT (the node's hard-link sessions, see
//! `node::hard`; answered with S_HARD_LINK_ESTABLISHED, REJECTED, TERMINATED and, on the
//! called node, INDICATION). Management requests are logged and ignored. A frame that does
//! not decode closes the connection with a log line.

use std::sync::Arc;

use skywave_sis::stream::SisStream;
use skywave_sis::{
    Confirmation, DeliveryOrder, Primitive, SubnetReason, SubnetStatus, TxMode,
    UnidataRejectReason, UnidataRejected, UnidataRequest,
};
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::net::{Shared, Subnet};
use crate::node::SendMode;

/// Buffer of the in-process pipe, bytes (a few MTU-size frames).
const DUPLEX_BUFFER: usize = 64 * 1024;

impl Subnet {
    /// A new in-process SIS connection to node `node`: the returned stream is the client's
    /// end (give it to `skywave_sis::Client` through a `Connector` closure). A node index out
    /// of range gives a stream the server closes at once.
    pub fn connect_in_process(&self, node: usize) -> DuplexStream {
        let (client, server) = tokio::io::duplex(DUPLEX_BUFFER);
        tokio::spawn(serve_connection(Arc::clone(&self.shared), node, server));
        client
    }

    /// Serves SIS for node `node` on every connection `listener` accepts, until the listener
    /// fails.
    pub async fn serve_tcp(&self, node: usize, listener: TcpListener) -> std::io::Result<()> {
        self.serve_tcp_captured(node, listener, None).await
    }

    /// [`Subnet::serve_tcp`], recording every connection's SIS traffic into `capture` (a pcap
    /// that Wireshark's `s5066sis` dissector decodes) when one is given.
    pub async fn serve_tcp_captured(
        &self,
        node: usize,
        listener: TcpListener,
        capture: Option<skywave_sis::client::PcapCapture>,
    ) -> std::io::Result<()> {
        loop {
            let (sock, peer) = listener.accept().await?;
            let _ = sock.set_nodelay(true);
            tracing::info!(node, %peer, "SIS client connected");
            let shared = Arc::clone(&self.shared);
            match &capture {
                Some(c) => tokio::spawn(serve_connection(shared, node, c.tap_server(sock))),
                None => tokio::spawn(serve_connection(shared, node, sock)),
            };
        }
    }
}

/// Serves one client connection until it closes, unbinds or sends a bad frame.
pub(crate) async fn serve_connection<T>(shared: Arc<Shared>, node: usize, io: T)
where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let mut stream = SisStream::new(io);
    let (tx, mut rx) = mpsc::unbounded_channel::<Primitive>();
    // Held here only until the client binds; then the node's slot holds the only sender, so
    // that a node restart (`Subnet::restart_node`), which drops it, ends this connection.
    let mut tx = Some(tx);
    let now = shared.now();
    let (conn, known, down) = {
        let mut st = shared.lock();
        (
            st.new_conn(),
            st.node_address(node).is_some(),
            st.is_down(node, now),
        )
    };
    if !known {
        tracing::warn!(node, "SIS connection to a node that does not exist; closed");
        return;
    }
    if down {
        tracing::info!(
            node,
            "SIS connection while the node is down (restarting); closed"
        );
        return;
    }
    let mut bound: Option<(skywave_sis::SapId, skywave_sis::ServiceType)> = None;
    loop {
        tokio::select! {
            // A fixed order keeps emulated runs repeatable (select! otherwise polls at
            // random): what the node has for the client goes out before the next request.
            biased;
            out = rx.recv() => {
                let Some(p) = out else { break };
                if let Err(e) = stream.send(&p).await {
                    tracing::info!(node, conn, "SIS client gone: {e}");
                    break;
                }
            }
            got = stream.recv() => {
                let p = match got {
                    Ok(Some(p)) => p,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(node, conn, "closing SIS connection: {e}");
                        break;
                    }
                };
                let replies = handle(&shared, node, conn, &mut tx, &mut bound, p);
                let mut closing = false;
                for r in replies {
                    match r {
                        Reply::Send(p) => {
                            if let Err(e) = stream.send(&p).await {
                                tracing::info!(node, conn, "SIS client gone: {e}");
                                closing = true;
                            }
                        }
                        Reply::Close => closing = true,
                    }
                }
                if closing {
                    break;
                }
            }
        }
    }
    shared.lock().unbind(node, conn);
    // Wake the scheduler: nothing to do for it, but bindings changed.
    shared.notify.notify_one();
}

enum Reply {
    Send(Primitive),
    Close,
}

fn handle(
    shared: &Shared,
    node: usize,
    conn: u64,
    tx: &mut Option<mpsc::UnboundedSender<Primitive>>,
    bound: &mut Option<(skywave_sis::SapId, skywave_sis::ServiceType)>,
    p: Primitive,
) -> Vec<Reply> {
    match p {
        Primitive::BindRequest { sap, rank, service } => {
            if bound.is_some() {
                // One binding per connection (Annex A); a second bind is refused.
                return vec![Reply::Send(Primitive::BindRejected {
                    reason: skywave_sis::BindRejectReason::InvalidSap,
                })];
            }
            let mut st = shared.lock();
            let Some(sender) = tx.clone() else {
                // Only a bound connection has given its sender away, and it was refused above.
                return vec![Reply::Close];
            };
            let with_errors = service.tx_mode == TxMode::NonArqWithErrors;
            if st.bind(node, sap, rank.get(), with_errors, conn, sender) {
                *tx = None;
                *bound = Some((sap, service));
                vec![
                    Reply::Send(Primitive::BindAccepted { sap, mtu: st.mtu() }),
                    Reply::Send(Primitive::SubnetAvailability {
                        status: SubnetStatus::HalfDuplex,
                        reason: SubnetReason::Unspecified,
                    }),
                ]
            } else {
                vec![Reply::Send(Primitive::BindRejected {
                    reason: skywave_sis::BindRejectReason::SapAlreadyAllocated,
                })]
            }
        }
        Primitive::UnbindRequest => vec![Reply::Close],
        Primitive::KeepAlive => vec![Reply::Send(Primitive::KeepAlive)],
        Primitive::UnidataRequest(req) => unidata(shared, node, conn, bound, req, false),
        Primitive::ExpeditedUnidataRequest(req) => unidata(shared, node, conn, bound, req, true),
        p @ (Primitive::HardLinkEstablish(_)
        | Primitive::HardLinkTerminate { .. }
        | Primitive::HardLinkAccept(_)
        | Primitive::HardLinkReject { .. }) => {
            if bound.is_none() {
                tracing::warn!(
                    node,
                    conn,
                    primitive = p.name(),
                    "hard-link request from a client that is not bound; ignored"
                );
                return Vec::new();
            }
            let now = shared.now();
            shared.lock().hard_link(node, conn, &p, now);
            // The answers went to the client through its channel; the node may have S_PDUs to send.
            shared.notify.notify_one();
            Vec::new()
        }
        other => {
            tracing::info!(
                node,
                conn,
                primitive = other.name(),
                "primitive not supported by the emulator; ignored"
            );
            Vec::new()
        }
    }
}

fn unidata(
    shared: &Shared,
    node: usize,
    conn: u64,
    bound: &Option<(skywave_sis::SapId, skywave_sis::ServiceType)>,
    req: UnidataRequest,
    expedited: bool,
) -> Vec<Reply> {
    let Some((sap, service)) = *bound else {
        tracing::warn!(node, conn, "U_PDU from a client that is not bound; ignored");
        return Vec::new();
    };
    let mode = if req.mode.tx_mode == TxMode::Default {
        service
    } else {
        req.mode
    };
    // Non-ARQ U_PDUs go as NON-ARQ DATA D_PDUs, each segment sent 1 + the minimum number of
    // retransmissions times; nothing acknowledges them, so no confirmation is ever given.
    // Non-ARQ with errors goes the same way: nothing on the air carries the sender's choice
    // (Annex C's NON-ARQ DATA header has no field for it), so what reaches the peer's client
    // with errors is decided by that client's own bind (see `Node::bind`).
    let non_arq = match mode.tx_mode {
        TxMode::NonArq | TxMode::NonArqWithErrors => Some(mode.min_retransmissions.get()),
        _ => None,
    };
    let confirm =
        non_arq.is_none() && matches!(mode.confirmation, Confirmation::Node | Confirmation::Client);
    let now = shared.now();
    let result = {
        let mut st = shared.lock();
        if req.updu.len() > usize::from(st.mtu()) {
            Err(UnidataRejectReason::UpduLargerThanMtu)
        } else {
            let mode = SendMode {
                confirm,
                expedited,
                non_arq,
                in_order: mode.order == DeliveryOrder::InOrder,
            };
            st.submit(node, conn, sap, &req, mode, now)
        }
    };
    shared.notify.notify_one();
    match result {
        Ok(()) => Vec::new(),
        Err(reason) => {
            let r = UnidataRejected {
                reason,
                dest_sap: req.dest_sap,
                dest: req.dest,
                updu_part: req.updu,
            };
            vec![Reply::Send(if expedited {
                Primitive::ExpeditedUnidataRequestRejected(r)
            } else {
                Primitive::UnidataRequestRejected(r)
            })]
        }
    }
}
