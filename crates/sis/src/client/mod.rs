//! Async SIS client on tokio: one connection, one bound SAP.
//!
//! [`Client::connect`] opens a transport through a [`Connector`], binds, and spawns a driver
//! task that owns the connection from then on. The driver answers S_KEEP_ALIVE at once, holds
//! U_PDUs while the server has S_DATA_FLOW_OFF, matches confirms and rejects to requests
//! (destination node, destination SAP and leading U_PDU bytes; oldest first), runs the
//! [duplicate filter](crate::filter), and after a loss (server gone, bad frame, unbind)
//! reports it, reconnects with exponential backoff, binds again with the same parameters and
//! reports [`Event::Reconnected`]. All waiting uses `tokio::time`.

mod config;
mod connector;
mod driver;
mod error;
mod event;
mod tap;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::sync::{mpsc, oneshot};

pub use config::{Backoff, ClientConfig};
pub use connector::{Connector, TcpConnector};
pub use error::{ClientError, SendError};
pub use event::{Bound, Event, Events};
pub use tap::{PcapCapture, Tapped, TappedConnector};

use crate::filter::FilterStats;
use crate::primitive::{UnidataConfirm, UnidataRequest};
use driver::{Command, Driver};

/// How a submitted U_PDU ended, when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Written to the server; no confirmation was requested.
    Sent,
    /// The server confirmed delivery.
    Confirmed(UnidataConfirm),
    /// Silently dropped by the duplicate filter: an identical U_PDU is queued or in flight.
    DuplicateDropped,
}

/// How many U_PDUs of one submission the peer's node confirmed, in order from the first (SIS
/// node delivery confirmation): what a sender knows the peer holds when the rest fails. A
/// U_PDU that ends otherwise (written without a confirmation asked, dropped as a duplicate, or
/// failed) ends the count: nothing says the peer has the ones after it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConfirmedPrefix {
    count: usize,
    broken: bool,
}

impl ConfirmedPrefix {
    /// The next U_PDU in order ended as `delivery`.
    pub fn record(&mut self, delivery: &Delivery) {
        match delivery {
            Delivery::Confirmed(_) => self.count += usize::from(!self.broken),
            Delivery::Sent | Delivery::DuplicateDropped => self.broken = true,
        }
    }

    /// The next U_PDU in order failed.
    pub fn stop(&mut self) {
        self.broken = true;
    }

    /// The U_PDUs confirmed in order from the first.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Whether every U_PDU so far was confirmed.
    pub fn unbroken(&self) -> bool {
        !self.broken
    }
}

/// The outcome of one submitted U_PDU; resolves when it was written (no confirmation asked),
/// confirmed, rejected, dropped as a duplicate, or lost with the connection.
#[derive(Debug)]
pub struct Pending {
    rx: oneshot::Receiver<Result<Delivery, SendError>>,
}

impl Future for Pending {
    type Output = Result<Delivery, SendError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(SendError::Closed)))
    }
}

/// State shared between the handle and the driver task.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Current MTU; 0 while not bound.
    mtu: AtomicU16,
    /// Last known MTU, used to refuse oversize U_PDUs while reconnecting.
    last_mtu: AtomicU16,
    filter: Mutex<FilterStats>,
}

impl Shared {
    pub(crate) fn set_mtu(&self, mtu: u16) {
        self.mtu.store(mtu, Ordering::Relaxed);
        if mtu != 0 {
            self.last_mtu.store(mtu, Ordering::Relaxed);
        }
    }

    pub(crate) fn set_filter_stats(&self, stats: FilterStats) {
        *self.filter.lock().unwrap_or_else(|p| p.into_inner()) = stats;
    }
}

/// Handle to a bound SIS client. Cheap to clone; the connection ends when it is unbound or
/// every handle is dropped.
#[derive(Debug, Clone)]
pub struct Client {
    commands: mpsc::UnboundedSender<Command>,
    shared: Arc<Shared>,
}

impl Client {
    /// Connects, binds, and starts the driver task. Fails at once (no retry) if the first
    /// connection or bind fails; later losses are handled by reconnecting.
    pub async fn connect<C: Connector>(
        mut connector: C,
        config: ClientConfig,
    ) -> Result<(Client, Bound, Events), ClientError> {
        let (conn, bound) = driver::establish(&mut connector, &config).await?;
        let shared = Arc::new(Shared::default());
        shared.set_mtu(bound.mtu);
        let (commands, command_rx) = mpsc::unbounded_channel();
        let (event_tx, rx) = mpsc::unbounded_channel();
        let driver = Driver::new(connector, config, command_rx, event_tx, Arc::clone(&shared));
        tokio::spawn(driver.run(conn));
        Ok((Client { commands, shared }, bound, Events { rx }))
    }

    /// The MTU of the current binding (0 while reconnecting).
    pub fn mtu(&self) -> u16 {
        self.shared.mtu.load(Ordering::Relaxed)
    }

    /// What the duplicate filter has counted.
    pub fn filter_stats(&self) -> FilterStats {
        *self.shared.filter.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Submits an S_UNIDATA_REQUEST. A U_PDU larger than the server's MTU is refused here and
    /// never sent.
    pub fn send_unidata(&self, req: UnidataRequest) -> Result<Pending, ClientError> {
        self.submit(false, req)
    }

    /// Submits an S_EXPEDITED_UNIDATA_REQUEST (its priority field is not sent).
    pub fn send_expedited(&self, req: UnidataRequest) -> Result<Pending, ClientError> {
        self.submit(true, req)
    }

    fn submit(&self, expedited: bool, req: UnidataRequest) -> Result<Pending, ClientError> {
        let mtu = self.shared.last_mtu.load(Ordering::Relaxed);
        if req.updu.len() > usize::from(mtu) {
            return Err(ClientError::TooLarge {
                len: req.updu.len(),
                mtu,
            });
        }
        let (reply, rx) = oneshot::channel();
        self.commands
            .send(Command::Send {
                expedited,
                req,
                reply,
            })
            .map_err(|_| ClientError::Closed)?;
        Ok(Pending { rx })
    }

    /// Sends S_UNBIND_REQUEST, closes the connection and ends the driver task. U_PDUs still
    /// queued or awaiting confirmation fail with [`SendError::Closed`].
    pub async fn unbind(&self) -> Result<(), ClientError> {
        let (done, rx) = oneshot::channel();
        self.commands
            .send(Command::Unbind { done })
            .map_err(|_| ClientError::Closed)?;
        rx.await.map_err(|_| ClientError::Closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NodeAddress, SapId};

    fn confirmed() -> Delivery {
        Delivery::Confirmed(UnidataConfirm {
            dest_sap: SapId::HMTP,
            dest: NodeAddress::new(0x0102_0304).unwrap_or_else(|e| panic!("{e}")),
            updu_part: bytes::Bytes::new(),
        })
    }

    #[test]
    fn a_prefix_counts_confirmations_until_one_is_missing() {
        let mut p = ConfirmedPrefix::default();
        p.record(&confirmed());
        p.record(&confirmed());
        assert_eq!((p.count(), p.unbroken()), (2, true));
        p.record(&Delivery::Sent);
        p.record(&confirmed());
        assert_eq!((p.count(), p.unbroken()), (2, false));
        let mut p = ConfirmedPrefix::default();
        p.record(&confirmed());
        p.stop();
        p.record(&confirmed());
        assert_eq!((p.count(), p.unbroken()), (1, false));
    }
}
