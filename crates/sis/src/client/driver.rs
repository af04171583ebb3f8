//! The client's background task: owns the connection, answers keep-alives, applies flow
//! control, matches confirmations, runs the duplicate filter and reconnects.
//!
//! A reader task per connection decodes primitives and forwards them over a channel, so the
//! server's bytes keep being read while the driver writes (the standard forbids a client to
//! flow-control the server).

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::WriteHalf;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};

use super::config::ClientConfig;
use super::connector::Connector;
use super::error::{ClientError, SendError};
use super::event::{Bound, Event};
use super::{Delivery, Shared};
use crate::address::NodeAddress;
use crate::decode::Decoder;
use crate::fields::{SapId, TxMode};
use crate::filter::{DuplicateFilter, Ticket, Verdict};
use crate::primitive::{Primitive, UnidataConfirm, UnidataRejected, UnidataRequest};
use crate::stream::{SisReader, SisWriter, StreamError};

pub(crate) type Reply = oneshot::Sender<Result<Delivery, SendError>>;

/// Commands from the [`super::Client`] handle.
pub(crate) enum Command {
    Send {
        expedited: bool,
        req: UnidataRequest,
        reply: Reply,
    },
    Unbind {
        done: oneshot::Sender<()>,
    },
}

/// A U_PDU accepted by the filter, waiting to be written.
struct Outgoing {
    expedited: bool,
    req: UnidataRequest,
    reply: Reply,
    ticket: Option<Ticket>,
}

/// A written U_PDU waiting for its confirm or reject.
struct Awaiting {
    expedited: bool,
    dest: NodeAddress,
    sap: SapId,
    updu: Bytes,
    reply: Reply,
    ticket: Option<Ticket>,
}

/// One live connection.
pub(crate) struct Conn<T> {
    writer: SisWriter<WriteHalf<T>>,
    incoming: mpsc::UnboundedReceiver<Result<Primitive, StreamError>>,
    reader: JoinHandle<()>,
    flow_on: bool,
    mtu: u16,
}

impl<T> Drop for Conn<T> {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Why a connected phase ended.
enum End {
    /// Unbound or all handles dropped: the task ends.
    Exit,
    /// The connection was lost; reconnect.
    Lost(String),
}

/// Connects, binds and returns the live connection.
pub(crate) async fn establish<C: Connector>(
    connector: &mut C,
    config: &ClientConfig,
) -> Result<(Conn<C::Transport>, Bound), ClientError> {
    let transport = match timeout(config.connect_timeout, connector.connect()).await {
        Err(_) => return Err(ClientError::ConnectTimeout(config.connect_timeout)),
        Ok(Err(e)) => return Err(ClientError::Connect(e)),
        Ok(Ok(t)) => t,
    };
    let (r, w) = tokio::io::split(transport);
    let (tx, incoming) = mpsc::unbounded_channel();
    let reader = tokio::spawn(read_loop(
        SisReader::with_decoder(r, Decoder::with_max_size(config.max_frame_size)),
        tx,
    ));
    let mut conn = Conn {
        writer: SisWriter::new(w),
        incoming,
        reader,
        flow_on: true,
        mtu: 0,
    };
    let bind = Primitive::BindRequest {
        sap: config.sap,
        rank: config.rank,
        service: config.service,
    };
    conn.writer.send(&bind).await.map_err(ClientError::Bind)?;
    let answer = timeout(config.bind_timeout, async {
        // Bounded by the bind timeout around it.
        loop {
            match conn.incoming.recv().await {
                None => return Err(ClientError::ClosedDuringBind),
                Some(Err(e)) => return Err(ClientError::Bind(e)),
                Some(Ok(Primitive::BindAccepted { sap, mtu })) => return Ok(Bound { sap, mtu }),
                Some(Ok(Primitive::BindRejected { reason })) => {
                    return Err(ClientError::BindRejected(reason));
                }
                Some(Ok(Primitive::KeepAlive)) => {
                    conn.writer
                        .send(&Primitive::KeepAlive)
                        .await
                        .map_err(ClientError::Bind)?;
                }
                Some(Ok(other)) => {
                    tracing::debug!(
                        primitive = other.name(),
                        "ignored while waiting for the bind answer"
                    );
                }
            }
        }
    })
    .await;
    let bound = match answer {
        Err(_) => return Err(ClientError::BindTimeout(config.bind_timeout)),
        Ok(r) => r?,
    };
    conn.mtu = bound.mtu;
    tracing::info!(sap = %bound.sap, mtu = bound.mtu, "bound to SIS server");
    Ok((conn, bound))
}

async fn read_loop<R: tokio::io::AsyncRead + Unpin>(
    mut reader: SisReader<R>,
    tx: mpsc::UnboundedSender<Result<Primitive, StreamError>>,
) {
    loop {
        match reader.recv().await {
            Ok(Some(p)) => {
                if tx.send(Ok(p)).is_err() {
                    return;
                }
            }
            // Clean close: dropping the sender tells the driver.
            Ok(None) => return,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        }
    }
}

pub(crate) struct Driver<C: Connector> {
    pub(crate) connector: C,
    pub(crate) config: ClientConfig,
    pub(crate) commands: mpsc::UnboundedReceiver<Command>,
    pub(crate) events: mpsc::UnboundedSender<Event>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) filter: DuplicateFilter,
    queue: VecDeque<Outgoing>,
    awaiting: VecDeque<Awaiting>,
}

impl<C: Connector> Driver<C> {
    pub(crate) fn new(
        connector: C,
        config: ClientConfig,
        commands: mpsc::UnboundedReceiver<Command>,
        events: mpsc::UnboundedSender<Event>,
        shared: Arc<Shared>,
    ) -> Self {
        let filter = DuplicateFilter::new(config.filter);
        Driver {
            connector,
            config,
            commands,
            events,
            shared,
            filter,
            queue: VecDeque::new(),
            awaiting: VecDeque::new(),
        }
    }

    /// Runs until unbound or dropped, reconnecting after every loss.
    pub(crate) async fn run(mut self, mut conn: Conn<C::Transport>) {
        loop {
            let reason = match self.connected(&mut conn).await {
                End::Exit => break,
                End::Lost(reason) => reason,
            };
            drop(conn);
            self.shared.set_mtu(0);
            tracing::warn!(%reason, "SIS connection lost; reconnecting");
            self.lost();
            self.emit(Event::Disconnected { reason });
            match self.reconnect().await {
                Some(c) => conn = c,
                None => break,
            }
        }
        self.close_all();
    }

    fn emit(&self, event: Event) {
        // The user may have dropped the event stream; the client keeps working regardless.
        let _ = self.events.send(event);
    }

    /// Confirmations that can no longer arrive fail; sent U_PDUs are forgotten by the filter.
    fn lost(&mut self) {
        for a in self.awaiting.drain(..) {
            if let Some(t) = &a.ticket {
                self.filter.release(t);
            }
            let _ = a.reply.send(Err(SendError::ConnectionLost));
        }
        self.filter.forget_sent();
    }

    fn close_all(&mut self) {
        for a in self.awaiting.drain(..) {
            let _ = a.reply.send(Err(SendError::Closed));
        }
        for o in self.queue.drain(..) {
            let _ = o.reply.send(Err(SendError::Closed));
        }
        self.shared.set_mtu(0);
    }

    /// Backoff loop; keeps accepting commands meanwhile. `None` when told to stop.
    async fn reconnect(&mut self) -> Option<Conn<C::Transport>> {
        let mut delay = self.config.backoff.initial;
        loop {
            let wake = Instant::now() + delay;
            // Bounded: each iteration either handles a command or reaches the deadline.
            loop {
                tokio::select! {
                    // A fixed order keeps runs repeatable (select! otherwise polls at random).
                    biased;
                    () = tokio::time::sleep_until(wake) => break,
                    cmd = self.commands.recv() => match cmd {
                        None => return None,
                        Some(Command::Unbind { done }) => {
                            let _ = done.send(());
                            return None;
                        }
                        Some(Command::Send { expedited, req, reply }) => {
                            self.submit(expedited, req, reply);
                        }
                    },
                }
            }
            match establish(&mut self.connector, &self.config).await {
                Ok((conn, bound)) => {
                    self.shared.set_mtu(bound.mtu);
                    tracing::info!(mtu = bound.mtu, "reconnected and bound again");
                    self.emit(Event::Reconnected(bound));
                    return Some(conn);
                }
                Err(ClientError::BindRejected(reason)) => {
                    tracing::warn!(%reason, "rebind rejected; will retry");
                    self.emit(Event::RebindRejected(reason));
                }
                Err(e) => tracing::debug!(error = %e, ?delay, "reconnection attempt failed"),
            }
            delay = self.config.backoff.next(delay);
        }
    }

    /// Filters and queues a U_PDU (written by the connected loop when flow allows).
    fn submit(&mut self, expedited: bool, req: UnidataRequest, reply: Reply) {
        let now = Instant::now().into_std();
        match self.filter.submit(req.dest, req.dest_sap, &req.updu, now) {
            Verdict::Drop => {
                tracing::debug!(dest = %req.dest, sap = %req.dest_sap, len = req.updu.len(), "duplicate U_PDU dropped");
                let _ = reply.send(Ok(Delivery::DuplicateDropped));
            }
            Verdict::Pass(ticket) => {
                if self.queue.len() >= self.config.queue_limit {
                    if let Some(t) = &ticket {
                        self.filter.release(t);
                    }
                    let _ = reply.send(Err(SendError::QueueFull(self.queue.len())));
                } else {
                    self.queue.push_back(Outgoing {
                        expedited,
                        req,
                        reply,
                        ticket,
                    });
                }
            }
        }
        self.shared.set_filter_stats(self.filter.stats());
    }

    /// Whether the server will answer this request with a confirm or reject.
    fn wants_confirmation(&self, req: &UnidataRequest) -> bool {
        if req.mode.tx_mode == TxMode::Default {
            self.config.service.confirmation.is_requested()
        } else {
            req.mode.confirmation.is_requested()
        }
    }

    async fn connected(&mut self, conn: &mut Conn<C::Transport>) -> End {
        // Bounded: every iteration consumes a command, a primitive or queued U_PDUs.
        loop {
            if let Err(reason) = self.flush_queue(conn).await {
                return End::Lost(reason);
            }
            tokio::select! {
                // Biased, server first: a primitive already in (flow off, a confirmation)
                // happened before the sends behind it, and handling sends first could let a
                // burst through that flow control had stopped. It also keeps runs under the
                // paused clock repeatable (unbiased, select! picks at random).
                biased;
                msg = conn.incoming.recv() => match msg {
                    None => return End::Lost("the SIS server closed the connection".into()),
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "closing SIS connection");
                        return End::Lost(e.to_string());
                    }
                    Some(Ok(p)) => {
                        if let Err(reason) = self.handle(conn, p).await {
                            return End::Lost(reason);
                        }
                    }
                },
                cmd = self.commands.recv() => match cmd {
                    None => {
                        let _ = conn.writer.send(&Primitive::UnbindRequest).await;
                        return End::Exit;
                    }
                    Some(Command::Unbind { done }) => {
                        if let Err(e) = conn.writer.send(&Primitive::UnbindRequest).await {
                            tracing::debug!(error = %e, "S_UNBIND_REQUEST could not be written");
                        }
                        let _ = conn.writer.shutdown().await;
                        let _ = done.send(());
                        return End::Exit;
                    }
                    Some(Command::Send { expedited, req, reply }) => self.submit(expedited, req, reply),
                },
            }
        }
    }

    async fn flush_queue(&mut self, conn: &mut Conn<C::Transport>) -> Result<(), String> {
        while conn.flow_on {
            let Some(o) = self.queue.pop_front() else {
                break;
            };
            if o.req.updu.len() > usize::from(conn.mtu) {
                if let Some(t) = &o.ticket {
                    self.filter.release(t);
                }
                let _ = o.reply.send(Err(SendError::TooLarge {
                    len: o.req.updu.len(),
                    mtu: conn.mtu,
                }));
                continue;
            }
            let wants = self.wants_confirmation(&o.req);
            let (dest, sap, updu) = (o.req.dest, o.req.dest_sap, o.req.updu.clone());
            let p = if o.expedited {
                Primitive::ExpeditedUnidataRequest(o.req)
            } else {
                Primitive::UnidataRequest(o.req)
            };
            if let Err(e) = conn.writer.send(&p).await {
                // Not known to have reached the server: fail it like an in-flight one.
                let _ = o.reply.send(Err(SendError::ConnectionLost));
                return Err(format!("writing {} failed: {e}", p.name()));
            }
            if let Some(t) = &o.ticket {
                self.filter.mark_sent(t, Instant::now().into_std());
            }
            if wants {
                self.awaiting.push_back(Awaiting {
                    expedited: o.expedited,
                    dest,
                    sap,
                    updu,
                    reply: o.reply,
                    ticket: o.ticket,
                });
            } else {
                let _ = o.reply.send(Ok(Delivery::Sent));
            }
        }
        Ok(())
    }

    /// Finds the oldest awaiting request matching a confirm or reject.
    fn take_awaiting(
        &mut self,
        expedited: bool,
        dest: NodeAddress,
        sap: SapId,
        part: &[u8],
    ) -> Option<Awaiting> {
        let i = self.awaiting.iter().position(|a| {
            a.expedited == expedited && a.dest == dest && a.sap == sap && a.updu.starts_with(part)
        })?;
        let a = self.awaiting.remove(i)?;
        if let Some(t) = &a.ticket {
            self.filter.release(t);
        }
        Some(a)
    }

    fn confirmed(&mut self, expedited: bool, c: UnidataConfirm) {
        match self.take_awaiting(expedited, c.dest, c.dest_sap, &c.updu_part) {
            Some(a) => {
                let _ = a.reply.send(Ok(Delivery::Confirmed(c)));
            }
            None => {
                tracing::warn!(dest = %c.dest, sap = %c.dest_sap, expedited, "confirmation matches no request")
            }
        }
    }

    fn rejected(&mut self, expedited: bool, r: UnidataRejected) {
        match self.take_awaiting(expedited, r.dest, r.dest_sap, &r.updu_part) {
            Some(a) => {
                tracing::info!(dest = %r.dest, sap = %r.dest_sap, reason = %r.reason, "U_PDU rejected");
                let _ = a.reply.send(Err(SendError::Rejected(r)));
            }
            None => {
                tracing::warn!(dest = %r.dest, sap = %r.dest_sap, reason = %r.reason, expedited, "rejection matches no request")
            }
        }
    }

    async fn handle(&mut self, conn: &mut Conn<C::Transport>, p: Primitive) -> Result<(), String> {
        match p {
            Primitive::KeepAlive => {
                conn.writer
                    .send(&Primitive::KeepAlive)
                    .await
                    .map_err(|e| format!("answering S_KEEP_ALIVE failed: {e}"))?;
            }
            Primitive::DataFlowOff => {
                tracing::debug!("S_DATA_FLOW_OFF: holding U_PDUs");
                conn.flow_on = false;
            }
            Primitive::DataFlowOn => {
                tracing::debug!("S_DATA_FLOW_ON: sending again");
                conn.flow_on = true;
            }
            Primitive::UnidataIndication(i) => {
                self.filter.peer_heard(i.src);
                self.emit(Event::Unidata(i));
            }
            Primitive::ExpeditedUnidataIndication(i) => {
                self.filter.peer_heard(i.src);
                self.emit(Event::Expedited(i));
            }
            Primitive::UnidataRequestConfirm(c) => self.confirmed(false, c),
            Primitive::ExpeditedUnidataRequestConfirm(c) => self.confirmed(true, c),
            Primitive::UnidataRequestRejected(r) => self.rejected(false, r),
            Primitive::ExpeditedUnidataRequestRejected(r) => self.rejected(true, r),
            Primitive::SubnetAvailability { status, reason } => {
                tracing::info!(%status, %reason, "subnet availability");
                self.emit(Event::SubnetAvailability { status, reason });
            }
            Primitive::UnbindIndication { reason } => {
                self.emit(Event::Unbound(reason));
                return Err(format!("the SIS server unbound the client: {reason}"));
            }
            Primitive::HardLinkEstablished { .. }
            | Primitive::HardLinkRejected { .. }
            | Primitive::HardLinkTerminated { .. }
            | Primitive::HardLinkIndication { .. } => self.emit(Event::HardLink(p)),
            Primitive::ManagementIndication { msg_type, body } => {
                self.emit(Event::Management { msg_type, body });
            }
            other => {
                tracing::warn!(
                    primitive = other.name(),
                    "unexpected primitive from the SIS server ignored"
                );
            }
        }
        Ok(())
    }
}
