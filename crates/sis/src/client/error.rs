//! Errors of the client API.

use std::io;
use std::time::Duration;

use thiserror::Error;

use crate::primitive::UnidataRejected;
use crate::reason::BindRejectReason;
use crate::stream::StreamError;

/// Connecting, binding or submitting failed. Messages include the underlying error's text
/// (which is therefore not also exposed as `source()`).
#[derive(Debug, Error)]
pub enum ClientError {
    /// The server refused the bind.
    #[error("bind rejected by the SIS server: {0}")]
    BindRejected(BindRejectReason),
    /// The connection could not be opened.
    #[error("cannot connect to the SIS server: {0}")]
    Connect(io::Error),
    /// The connection attempt did not finish in time.
    #[error("no connection to the SIS server within {0:?}")]
    ConnectTimeout(Duration),
    /// No answer to S_BIND_REQUEST in time.
    #[error("no answer to S_BIND_REQUEST within {0:?}")]
    BindTimeout(Duration),
    /// The connection failed or the server sent a bad frame during the bind.
    #[error("SIS connection failed during bind: {0}")]
    Bind(StreamError),
    /// The server closed the connection before answering the bind.
    #[error("the SIS server closed the connection before answering S_BIND_REQUEST")]
    ClosedDuringBind,
    /// The U_PDU is larger than the MTU the server gave in S_BIND_ACCEPTED; it was not sent.
    #[error("U_PDU of {len} bytes exceeds the server's MTU of {mtu} bytes; not sent")]
    TooLarge {
        /// U_PDU length.
        len: usize,
        /// The server's MTU.
        mtu: u16,
    },
    /// The client was unbound or its task ended.
    #[error("the SIS client is closed")]
    Closed,
}

/// A submitted U_PDU did not make it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SendError {
    /// The server answered S_(EXPEDITED_)UNIDATA_REQUEST_REJECTED.
    #[error("U_PDU rejected by the SIS server: {}", .0.reason)]
    Rejected(UnidataRejected),
    /// The connection was lost after the U_PDU was written, so its confirmation can no longer
    /// arrive; the U_PDU may or may not have been delivered, and resending is the caller's call.
    #[error("connection to the SIS server lost before the U_PDU was confirmed")]
    ConnectionLost,
    /// After a reconnection the server's MTU is smaller than this queued U_PDU; it was not sent.
    #[error("U_PDU of {len} bytes exceeds the server's new MTU of {mtu} bytes; not sent")]
    TooLarge {
        /// U_PDU length.
        len: usize,
        /// The server's MTU.
        mtu: u16,
    },
    /// Too many U_PDUs were waiting (flow off or no connection); this one was not queued.
    #[error("send queue full ({0} U_PDUs waiting); not sent")]
    QueueFull(usize),
    /// The client was unbound or dropped before the U_PDU was sent or confirmed.
    #[error("the SIS client closed before the U_PDU was sent or confirmed")]
    Closed,
}
