//! What the client reports to its user, in the order it happened.

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::fields::SapId;
use crate::primitive::{Primitive, UnidataIndication};
use crate::reason::{BindRejectReason, SubnetReason, SubnetStatus, UnbindReason};

/// The result of a successful bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// The SAP bound.
    pub sap: SapId,
    /// Largest U_PDU the server accepts; larger ones are refused locally.
    pub mtu: u16,
}

/// Something the server said or something that happened to the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// S_UNIDATA_INDICATION: a U_PDU arrived.
    Unidata(UnidataIndication),
    /// S_EXPEDITED_UNIDATA_INDICATION: an expedited U_PDU arrived.
    Expedited(UnidataIndication),
    /// S_SUBNET_AVAILABILITY.
    SubnetAvailability {
        /// Node status.
        status: SubnetStatus,
        /// Reason.
        reason: SubnetReason,
    },
    /// S_UNBIND_INDICATION: the server released the binding (the client then reconnects and
    /// binds again with backoff).
    Unbound(UnbindReason),
    /// One of the hard-link indications (S_HARD_LINK_ESTABLISHED, _REJECTED, _TERMINATED,
    /// _INDICATION), as received.
    HardLink(Primitive),
    /// S_MANAGEMENT_MSG_INDICATION.
    Management {
        /// Message type.
        msg_type: u8,
        /// Message body.
        body: Bytes,
    },
    /// The connection was lost (server gone, bad frame, unbind); reconnection starts.
    Disconnected {
        /// Why, for logs and operators.
        reason: String,
    },
    /// A reconnection attempt got S_BIND_REJECTED; the client keeps trying with backoff.
    RebindRejected(BindRejectReason),
    /// Connected and bound again, with the same parameters; the MTU may have changed.
    Reconnected(Bound),
}

/// The stream of [`Event`]s. Unbounded on purpose: the standard forbids a client to
/// flow-control the server, so the client never stops reading because its user is slow.
#[derive(Debug)]
pub struct Events {
    pub(crate) rx: mpsc::UnboundedReceiver<Event>,
}

impl Events {
    /// The next event; `None` once the client has ended (unbound or dropped).
    pub async fn recv(&mut self) -> Option<Event> {
        self.rx.recv().await
    }

    /// An event if one is waiting.
    pub fn try_recv(&mut self) -> Option<Event> {
        self.rx.try_recv().ok()
    }
}
