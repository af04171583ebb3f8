//! ACP 142 P_MUL (reliable multicast for bandwidth-constrained and EMCON links) and the RFC 8494
//! MULE mail envelope, sans-IO.
//!
//! Sits under the gateway's multicast link (which takes messages for two or more ships of a group
//! from the spool) and over the STANAG 5066 SIS bearer, which carries each P_MUL PDU as one
//! non-ARQ U_PDU to a 5066 group address (or, with Isode-style deployments, as one UDP datagram).
//! Nothing here does IO or reads a clock: bytes and the time (`now`, milliseconds since the Unix
//! epoch, supplied by the caller) go in, bytes, events and deadlines come out.
//!
//! How the PDUs travel is the gateway's choice; what interoperates, as far as the references in
//! this repository go: Isode's ACP 142 channel and RFC 8494 run P_MUL over UDP (over the 5066 IP
//! client, SAP 9); on STANAG 5066 itself P_MUL is STANAG 4406 annex E "TMI-1", the client of SAP 2,
//! and Wireshark's SIS dissector hands RCOP/UDOP U_PDUs with APP_ID 0x2000 (TMI-1) to its P_MUL
//! dissector (`reference/s5066-sis.md` section 2.2). One PDU is one datagram either way.
//!
//! - [`pdu`]: the byte layouts of every P_MUL PDU with their sources, encoder, bounded decoder and
//!   the ACP 142 annex B checksum.
//! - [`sender`]: one message to a destination list: segmentation, Address_PDU, repeats, per
//!   destination state, repair of only the Data_PDUs acks report missing, EMCON repeat policy,
//!   expiry and Discard_Message_PDU.
//! - [`receiver`]: reassembly per (source, message id), ack timer, EMCON silence, duplicate
//!   suppression until expiry, Discard_Message_PDU.
//! - [`groups`]: the dynamic multicast groups (Announce, Request, Reject, Release PDUs): joins
//!   and leaves for the gateway, Reject_PDUs for requests of groups this node owns.
//! - [`mule`]: the RFC 8494 message body: envelope and RFC 5322 message, zlib-compressed inside the
//!   BER `CompressedData` of STANAG 4406 annex E.
//!
//! ```
//! use skywave_pmul::sender::{Destination, Sender, SenderConfig};
//! use skywave_pmul::receiver::{Receiver, ReceiverConfig, ReceiverEvent};
//!
//! let now = 1_700_000_000_000; // ms since the epoch, from the caller's clock
//! let mut tx = Sender::new(SenderConfig::default(), 1, 0x0a00_0001,
//!     vec![Destination::new(0x0a00_0002)], b"hello fleet".to_vec(), now)?;
//! let mut rx = Receiver::new(ReceiverConfig::new(0x0a00_0002));
//! while let Some(pdu) = tx.poll_transmit(now) {
//!     rx.handle_pdu(&pdu, now)?;
//! }
//! let Some(ReceiverEvent::Message { data, .. }) = rx.poll_event() else { panic!() };
//! assert_eq!(data, b"hello fleet");
//! let later = rx.poll_timeout().unwrap_or(now);
//! rx.handle_timeout(later);
//! while let Some(ack) = rx.poll_transmit(later) {
//!     tx.handle_pdu(&ack, later)?;
//! }
//! assert!(tx.is_complete());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod groups;
pub mod mule;
pub mod pdu;
pub mod receiver;
pub mod sender;
