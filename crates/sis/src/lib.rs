//! STANAG 5066 Annex A Subnetwork Interface Sublayer (SIS) for skywave.
//!
//! Sits at the bottom of skywave's HF stack: every byte the gateway sends over a STANAG 5066
//! subnetwork passes through here on its way to a 5066 server (a vendor's, or the bundled
//! emulator in `skywave-emu`).
//!
//! # Layers
//!
//! * **Codec (sans-IO)**: [`Primitive`] models all 27 S_Primitives with typed fields
//!   ([`NodeAddress`], [`SapId`], [`ServiceType`] / [`DeliveryMode`], [`Ttl`], [`Priority`],
//!   one enum per reason code, each with an `Unknown` variant). [`Primitive::encode`] writes a
//!   frame; [`Decoder`] reads frames incrementally from a byte stream, bounded by a maximum
//!   Size, and names what was wrong with bad input ([`DecodeError`]). It accepts the Rockwell
//!   form of S_UNIDATA_INDICATION (4 zero bytes after the U_PDU size) and models the block
//!   lists of non-ARQ-with-errors indications.
//! * **Duplicate-datagram filter (sans-IO)**: [`filter::DuplicateFilter`] drops U_PDUs that
//!   repeat one still queued or in flight (on by default for SAP 9, the IP client).
//! * **Async framing**: [`stream`] reads and writes primitives over any tokio byte stream.
//! * **Client**: [`Client`] binds one SAP over a [`Connector`] (TCP or anything else), answers
//!   keep-alives, honours flow control and the server's MTU, matches confirmations, and
//!   reconnects with backoff. [`client::PcapCapture`] records its traffic for Wireshark.
//! * **pcap**: [`pcap`] writes TCP conversations that Wireshark's `s5066sis` dissector decodes.
//!
//! # Example
//!
//! Bind SAP 3 (HMTP) on a local server, send one U_PDU with node delivery confirmation and
//! print what arrives:
//!
//! ```no_run
//! use bytes::Bytes;
//! use skywave_sis::client::{Delivery, Event, TcpConnector};
//! use skywave_sis::{Client, ClientConfig, Priority, SapId, ServiceType, Ttl, UnidataRequest};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = ClientConfig::new(SapId::HMTP, ServiceType::ARQ_NODE_CONFIRM);
//! let (client, bound, mut events) =
//!     Client::connect(TcpConnector::new("127.0.0.1:5066"), config).await?;
//! println!("bound, MTU {}", bound.mtu);
//!
//! let pending = client.send_unidata(UnidataRequest {
//!     priority: Priority::new(5)?,
//!     dest_sap: SapId::HMTP,
//!     dest: "1.35.69.103".parse()?,
//!     mode: ServiceType::DEFAULT, // as bound: ARQ, node delivery confirmation
//!     ttl: Ttl::from_secs(600)?,
//!     updu: Bytes::from_static(b"EHLO ship.example\r\n"),
//! })?;
//! match pending.await {
//!     Ok(Delivery::Confirmed(_)) => println!("delivered"),
//!     Ok(other) => println!("{other:?}"),
//!     Err(e) => println!("not delivered: {e}"),
//! }
//!
//! while let Some(event) = events.recv().await {
//!     match event {
//!         Event::Unidata(ind) => println!("{} bytes from {}", ind.updu.len(), ind.src),
//!         Event::Disconnected { reason } => println!("lost: {reason}; reconnecting"),
//!         other => println!("{other:?}"),
//!     }
//! }
//! # Ok(())
//! # }
//! ```

pub mod address;
pub mod client;
pub mod decode;
pub mod fields;
pub mod filter;
pub mod pcap;
pub mod primitive;
pub mod reason;
pub mod stream;

#[cfg(test)]
mod codec_tests;
#[cfg(test)]
pub(crate) mod strategies;

pub use address::{AddressError, NodeAddress};
pub use client::{
    Backoff, Bound, Client, ClientConfig, ClientError, ConfirmedPrefix, Connector, Delivery, Event,
    Events, Pending, SendError, TcpConnector,
};
pub use decode::{DEFAULT_MAX_SIZE, DecodeError, Decoder};
pub use fields::{
    Confirmation, DeliveryMode, DeliveryOrder, HardLinkType, LinkPriority, OutOfRange, Priority,
    Rank, Retransmissions, SapId, ServiceType, Ttl, TxMode,
};
pub use primitive::{
    Block, EncodeError, HardLink, Primitive, UnidataConfirm, UnidataIndication, UnidataRejected,
    UnidataRequest,
};
pub use reason::{
    BindRejectReason, HardLinkRejectReason, HardLinkTerminateReason, SubnetReason, SubnetStatus,
    UnbindReason, UnidataRejectReason,
};
