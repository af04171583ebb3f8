//! The 27 S_Primitives of STANAG 5066 Annex A as typed Rust values, and their encoder.
//!
//! This is the sans-IO heart of the crate: [`Primitive::encode`] appends one complete frame
//! (preamble `90 EB`, version 0, big-endian size, type, body) to a buffer; the matching
//! incremental decoder is [`crate::decode::Decoder`]. Nothing here touches sockets or clocks.

use bytes::Bytes;
use thiserror::Error;

use crate::address::NodeAddress;
use crate::fields::{HardLinkType, LinkPriority, Priority, Rank, SapId, ServiceType, Ttl, TxMode};
use crate::reason::{
    BindRejectReason, HardLinkRejectReason, HardLinkTerminateReason, SubnetReason, SubnetStatus,
    UnbindReason, UnidataRejectReason,
};

/// The two preamble bytes (0xEB90 sent low byte first) and the version byte.
pub const PREAMBLE: [u8; 2] = [0x90, 0xEB];
/// The only SIS version defined (Ed 1.2 to Ed 4).
pub const VERSION: u8 = 0;
/// Bytes before the part counted by the Size field: preamble, version, size.
pub const HEADER_LEN: usize = 5;

/// S_UNIDATA_INDICATION header bytes counted by Size before the U_PDU (type to U_PDU size).
pub(crate) const INDICATION_FIXED: usize = 13;
/// S_UNIDATA_REQUEST bytes counted by Size before the U_PDU.
pub(crate) const REQUEST_FIXED: usize = 12;
/// Confirm/reject bytes counted by Size before the U_PDU part.
pub(crate) const CONFIRM_FIXED: usize = 8;
/// Management message bytes counted by Size before the body.
pub(crate) const MANAGEMENT_FIXED: usize = 2;

/// Parameters of a hard link: type, priority, remote SAP and remote node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HardLink {
    /// Type of link (b7-6).
    pub link_type: HardLinkType,
    /// Link priority (b5-4).
    pub priority: LinkPriority,
    /// Remote SAP (b3-0, meaningful only for full-bandwidth links).
    pub remote_sap: SapId,
    /// Remote node.
    pub remote: NodeAddress,
}

impl HardLink {
    fn first_byte(&self) -> u8 {
        (self.link_type.bits() << 6) | (self.priority.get() << 4) | self.remote_sap.get()
    }

    pub(crate) fn from_bytes(b: u8, addr: [u8; 4]) -> Self {
        HardLink {
            link_type: HardLinkType::from_bits(b >> 6),
            priority: LinkPriority::from_bits(b >> 4),
            remote_sap: SapId::from_bits(b),
            remote: NodeAddress::from_wire(addr),
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.push(self.first_byte());
        out.extend_from_slice(&self.remote.to_wire());
    }
}

/// S_UNIDATA_REQUEST and S_EXPEDITED_UNIDATA_REQUEST (types 20 and 24).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UnidataRequest {
    /// Priority. Not carried by the expedited form (sent as 0, read back as 0).
    pub priority: Priority,
    /// Destination SAP.
    pub dest_sap: SapId,
    /// Destination node (may be a group address for non-ARQ).
    pub dest: NodeAddress,
    /// Delivery mode; `TxMode::Default` means "as bound".
    pub mode: ServiceType,
    /// Time to live.
    pub ttl: Ttl,
    /// The U_PDU.
    pub updu: Bytes,
}

/// An (offset, size) pair in the errored / non-received block lists of a non-ARQ-with-errors
/// indication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Block {
    /// Offset of the block in the U_PDU.
    pub offset: u16,
    /// Size of the block.
    pub size: u16,
}

/// S_UNIDATA_INDICATION and S_EXPEDITED_UNIDATA_INDICATION (types 21 and 25).
///
/// Invariants the encoder relies on: `errored` and `missing` are only sent when `tx_mode` is
/// [`TxMode::NonArqWithErrors`]; `rockwell_form` only matters for other modes (and then both
/// lists should be empty).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UnidataIndication {
    /// Priority. Not carried by the expedited form (sent as 0, read back as 0).
    pub priority: Priority,
    /// Destination SAP.
    pub dest_sap: SapId,
    /// Destination node (may be a group the node subscribes to).
    pub dest: NodeAddress,
    /// How the U_PDU travelled (1 ARQ, 2 non-ARQ, 3 non-ARQ with errors).
    pub tx_mode: TxMode,
    /// Source SAP.
    pub src_sap: SapId,
    /// Source node.
    pub src: NodeAddress,
    /// Blocks received with errors (non-ARQ with errors only).
    pub errored: Vec<Block>,
    /// Blocks not received (non-ARQ with errors only).
    pub missing: Vec<Block>,
    /// The indication carried the 4 zero bytes (K = 0, L = 0) that Rockwell-Collins servers
    /// up to v2.1 and open5066 add in every mode. Set by the decoder; when set on a
    /// non-mode-3 indication the encoder writes the same form.
    pub rockwell_form: bool,
    /// The U_PDU.
    pub updu: Bytes,
}

/// S_(EXPEDITED_)UNIDATA_REQUEST_CONFIRM (types 22 and 26).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UnidataConfirm {
    /// Destination SAP of the confirmed U_PDU.
    pub dest_sap: SapId,
    /// Destination node of the confirmed U_PDU.
    pub dest: NodeAddress,
    /// The U_PDU, or its first bytes (the length is a server setting).
    pub updu_part: Bytes,
}

/// S_(EXPEDITED_)UNIDATA_REQUEST_REJECTED (types 23 and 27).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UnidataRejected {
    /// Why delivery failed (4 bits on the wire).
    pub reason: UnidataRejectReason,
    /// Destination SAP of the rejected U_PDU.
    pub dest_sap: SapId,
    /// Destination node of the rejected U_PDU.
    pub dest: NodeAddress,
    /// The U_PDU, or its first bytes.
    pub updu_part: Bytes,
}

/// One S_Primitive.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Primitive {
    /// 1, client to server: bind a SAP.
    BindRequest {
        /// SAP to bind.
        sap: SapId,
        /// Rank of the client.
        rank: Rank,
        /// Service type used for U_PDUs sent in mode "default".
        service: ServiceType,
    },
    /// 2, client to server: release the binding.
    UnbindRequest,
    /// 3, server to client: the bind succeeded.
    BindAccepted {
        /// The SAP bound.
        sap: SapId,
        /// Largest U_PDU the server accepts (2048 normally, up to 4096 broadcast-only, 200 in
        /// open5066).
        mtu: u16,
    },
    /// 4, server to client: the bind failed.
    BindRejected {
        /// Why.
        reason: BindRejectReason,
    },
    /// 5, server to client: the server released the binding.
    UnbindIndication {
        /// Why.
        reason: UnbindReason,
    },
    /// 6, client to server: ask for a hard link.
    HardLinkEstablish(HardLink),
    /// 7, client to server: end the hard link to a node.
    HardLinkTerminate {
        /// Remote node.
        remote: NodeAddress,
    },
    /// 8, server to client: the hard link is up.
    HardLinkEstablished {
        /// Remote node status (0 = error, non-zero = OK).
        remote_status: u8,
        /// The link.
        link: HardLink,
    },
    /// 9, server to client: the hard link was refused.
    HardLinkRejected {
        /// Why.
        reason: HardLinkRejectReason,
        /// The link.
        link: HardLink,
    },
    /// 10, server to client: the hard link ended.
    HardLinkTerminated {
        /// Why.
        reason: HardLinkTerminateReason,
        /// The link.
        link: HardLink,
    },
    /// 11, server to client: a remote node asks for a hard link.
    HardLinkIndication {
        /// Remote node status (0 = error, non-zero = OK).
        remote_status: u8,
        /// The link.
        link: HardLink,
    },
    /// 12, client to server: accept a hard link.
    HardLinkAccept(HardLink),
    /// 13, client to server: refuse a hard link.
    HardLinkReject {
        /// Reason (values are implementation-defined).
        reason: u8,
        /// The link.
        link: HardLink,
    },
    /// 14, server to client: the subnetwork's availability changed.
    SubnetAvailability {
        /// Node status.
        status: SubnetStatus,
        /// Reason.
        reason: SubnetReason,
    },
    /// 15, server to client: the client may send U_PDUs again.
    DataFlowOn,
    /// 16, server to client: the client shall stop sending U_PDUs.
    DataFlowOff,
    /// 17, both ways: echo within 10 s.
    KeepAlive,
    /// 18, client to server (rank 15 only): implementation-defined management message.
    ManagementRequest {
        /// Message type.
        msg_type: u8,
        /// Message body.
        body: Bytes,
    },
    /// 19, server to client: implementation-defined management message.
    ManagementIndication {
        /// Message type.
        msg_type: u8,
        /// Message body.
        body: Bytes,
    },
    /// 20: send a U_PDU.
    UnidataRequest(UnidataRequest),
    /// 21: a U_PDU arrived.
    UnidataIndication(UnidataIndication),
    /// 22: a U_PDU was delivered.
    UnidataRequestConfirm(UnidataConfirm),
    /// 23: a U_PDU could not be delivered.
    UnidataRequestRejected(UnidataRejected),
    /// 24: send an expedited U_PDU.
    ExpeditedUnidataRequest(UnidataRequest),
    /// 25: an expedited U_PDU arrived.
    ExpeditedUnidataIndication(UnidataIndication),
    /// 26: an expedited U_PDU was delivered.
    ExpeditedUnidataRequestConfirm(UnidataConfirm),
    /// 27: an expedited U_PDU could not be delivered.
    ExpeditedUnidataRequestRejected(UnidataRejected),
}

/// A primitive could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// The frame's Size field (type byte plus body) would not fit in 16 bits.
    #[error("{primitive}: {size} bytes after the header do not fit the 16-bit Size field")]
    TooLarge {
        /// Primitive name.
        primitive: &'static str,
        /// Bytes the Size field would have to count.
        size: usize,
    },
    /// A length or count field would not fit in 16 bits.
    #[error("{primitive}: {what} is {len}, more than a 16-bit field holds")]
    FieldTooLarge {
        /// Primitive name.
        primitive: &'static str,
        /// Which field.
        what: &'static str,
        /// The value.
        len: usize,
    },
}

fn u16_len(primitive: &'static str, what: &'static str, len: usize) -> Result<u16, EncodeError> {
    u16::try_from(len).map_err(|_| EncodeError::FieldTooLarge {
        primitive,
        what,
        len,
    })
}

impl Primitive {
    /// The S_Primitive type number (1-27).
    pub fn type_code(&self) -> u8 {
        match self {
            Primitive::BindRequest { .. } => 1,
            Primitive::UnbindRequest => 2,
            Primitive::BindAccepted { .. } => 3,
            Primitive::BindRejected { .. } => 4,
            Primitive::UnbindIndication { .. } => 5,
            Primitive::HardLinkEstablish(_) => 6,
            Primitive::HardLinkTerminate { .. } => 7,
            Primitive::HardLinkEstablished { .. } => 8,
            Primitive::HardLinkRejected { .. } => 9,
            Primitive::HardLinkTerminated { .. } => 10,
            Primitive::HardLinkIndication { .. } => 11,
            Primitive::HardLinkAccept(_) => 12,
            Primitive::HardLinkReject { .. } => 13,
            Primitive::SubnetAvailability { .. } => 14,
            Primitive::DataFlowOn => 15,
            Primitive::DataFlowOff => 16,
            Primitive::KeepAlive => 17,
            Primitive::ManagementRequest { .. } => 18,
            Primitive::ManagementIndication { .. } => 19,
            Primitive::UnidataRequest(_) => 20,
            Primitive::UnidataIndication(_) => 21,
            Primitive::UnidataRequestConfirm(_) => 22,
            Primitive::UnidataRequestRejected(_) => 23,
            Primitive::ExpeditedUnidataRequest(_) => 24,
            Primitive::ExpeditedUnidataIndication(_) => 25,
            Primitive::ExpeditedUnidataRequestConfirm(_) => 26,
            Primitive::ExpeditedUnidataRequestRejected(_) => 27,
        }
    }

    /// The standard's name of the primitive (e.g. `S_BIND_REQUEST`).
    pub fn name(&self) -> &'static str {
        type_name(self.type_code()).unwrap_or("S_UNKNOWN")
    }

    /// The value of the Size field: type byte plus body.
    pub fn size(&self) -> usize {
        match self {
            Primitive::UnbindRequest
            | Primitive::DataFlowOn
            | Primitive::DataFlowOff
            | Primitive::KeepAlive => 1,
            Primitive::BindRejected { .. } | Primitive::UnbindIndication { .. } => 2,
            Primitive::SubnetAvailability { .. } => 3,
            Primitive::BindRequest { .. } | Primitive::BindAccepted { .. } => 4,
            Primitive::HardLinkTerminate { .. } => 5,
            Primitive::HardLinkEstablish(_) | Primitive::HardLinkAccept(_) => 6,
            Primitive::HardLinkEstablished { .. }
            | Primitive::HardLinkRejected { .. }
            | Primitive::HardLinkTerminated { .. }
            | Primitive::HardLinkIndication { .. }
            | Primitive::HardLinkReject { .. } => 7,
            Primitive::ManagementRequest { body, .. }
            | Primitive::ManagementIndication { body, .. } => MANAGEMENT_FIXED + body.len(),
            Primitive::UnidataRequest(r) | Primitive::ExpeditedUnidataRequest(r) => {
                REQUEST_FIXED + r.updu.len()
            }
            Primitive::UnidataIndication(i) | Primitive::ExpeditedUnidataIndication(i) => {
                INDICATION_FIXED + i.updu.len() + indication_lists_len(i)
            }
            Primitive::UnidataRequestConfirm(c) | Primitive::ExpeditedUnidataRequestConfirm(c) => {
                CONFIRM_FIXED + c.updu_part.len()
            }
            Primitive::UnidataRequestRejected(r)
            | Primitive::ExpeditedUnidataRequestRejected(r) => CONFIRM_FIXED + r.updu_part.len(),
        }
    }

    /// Appends the complete frame to `out`. On error `out` is left unchanged.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let name = self.name();
        let size = self.size();
        let size16 = u16::try_from(size).map_err(|_| EncodeError::TooLarge {
            primitive: name,
            size,
        })?;
        // Validate every 16-bit inner field before writing anything.
        match self {
            Primitive::UnidataIndication(i) | Primitive::ExpeditedUnidataIndication(i)
                if i.tx_mode == TxMode::NonArqWithErrors =>
            {
                u16_len(name, "number of errored blocks", i.errored.len())?;
                u16_len(name, "number of non-received blocks", i.missing.len())?;
            }
            _ => {}
        }
        out.reserve(HEADER_LEN + size);
        out.extend_from_slice(&PREAMBLE);
        out.push(VERSION);
        out.extend_from_slice(&size16.to_be_bytes());
        out.push(self.type_code());
        match self {
            Primitive::UnbindRequest
            | Primitive::DataFlowOn
            | Primitive::DataFlowOff
            | Primitive::KeepAlive => {}
            Primitive::BindRequest { sap, rank, service } => {
                out.push((sap.get() << 4) | rank.get());
                out.push(service.first_byte());
                out.push(service.second_byte_high());
            }
            Primitive::BindAccepted { sap, mtu } => {
                out.push(sap.get() << 4);
                out.extend_from_slice(&mtu.to_be_bytes());
            }
            Primitive::BindRejected { reason } => out.push((*reason).into()),
            Primitive::UnbindIndication { reason } => out.push((*reason).into()),
            Primitive::HardLinkEstablish(link) | Primitive::HardLinkAccept(link) => link.write(out),
            Primitive::HardLinkTerminate { remote } => out.extend_from_slice(&remote.to_wire()),
            Primitive::HardLinkEstablished {
                remote_status,
                link,
            }
            | Primitive::HardLinkIndication {
                remote_status,
                link,
            } => {
                out.push(*remote_status);
                link.write(out);
            }
            Primitive::HardLinkRejected { reason, link } => {
                out.push((*reason).into());
                link.write(out);
            }
            Primitive::HardLinkTerminated { reason, link } => {
                out.push((*reason).into());
                link.write(out);
            }
            Primitive::HardLinkReject { reason, link } => {
                out.push(*reason);
                link.write(out);
            }
            Primitive::SubnetAvailability { status, reason } => {
                out.push((*status).into());
                out.push((*reason).into());
            }
            Primitive::ManagementRequest { msg_type, body }
            | Primitive::ManagementIndication { msg_type, body } => {
                out.push(*msg_type);
                out.extend_from_slice(body);
            }
            Primitive::UnidataRequest(r) => write_request(out, r, true),
            Primitive::ExpeditedUnidataRequest(r) => write_request(out, r, false),
            Primitive::UnidataIndication(i) => write_indication(out, i, true),
            Primitive::ExpeditedUnidataIndication(i) => write_indication(out, i, false),
            Primitive::UnidataRequestConfirm(c) | Primitive::ExpeditedUnidataRequestConfirm(c) => {
                write_tail(out, c.dest_sap.get(), c.dest, &c.updu_part);
            }
            Primitive::UnidataRequestRejected(r)
            | Primitive::ExpeditedUnidataRequestRejected(r) => {
                let reason = u8::from(r.reason) & 0x0F;
                write_tail(out, (reason << 4) | r.dest_sap.get(), r.dest, &r.updu_part);
            }
        }
        Ok(())
    }

    /// Encodes into a new buffer.
    pub fn to_bytes(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.size());
        self.encode(&mut out)?;
        Ok(out)
    }
}

fn indication_lists_len(i: &UnidataIndication) -> usize {
    if i.tx_mode == TxMode::NonArqWithErrors {
        4 + 4 * (i.errored.len() + i.missing.len())
    } else if i.rockwell_form {
        4
    } else {
        0
    }
}

fn write_request(out: &mut Vec<u8>, r: &UnidataRequest, with_priority: bool) {
    let prio = if with_priority {
        r.priority.get() << 4
    } else {
        0
    };
    out.push(prio | r.dest_sap.get());
    out.extend_from_slice(&r.dest.to_wire());
    let ttl = r.ttl.units();
    out.push(r.mode.first_byte());
    // Truncation is intended: TTL bits 19-16 go in the low nibble, 15-0 in the next two bytes.
    out.push(r.mode.second_byte_high() | ((ttl >> 16) as u8 & 0x0F));
    out.extend_from_slice(&((ttl & 0xFFFF) as u16).to_be_bytes());
    // The Size field check in `encode` bounds the U_PDU below 65536 bytes.
    out.extend_from_slice(&(r.updu.len() as u16).to_be_bytes());
    out.extend_from_slice(&r.updu);
}

fn write_indication(out: &mut Vec<u8>, i: &UnidataIndication, with_priority: bool) {
    let prio = if with_priority {
        i.priority.get() << 4
    } else {
        0
    };
    out.push(prio | i.dest_sap.get());
    out.extend_from_slice(&i.dest.to_wire());
    out.push((i.tx_mode.bits() << 4) | i.src_sap.get());
    out.extend_from_slice(&i.src.to_wire());
    // Bounded by the Size check in `encode`.
    out.extend_from_slice(&(i.updu.len() as u16).to_be_bytes());
    if i.tx_mode == TxMode::NonArqWithErrors {
        // Counts were checked against u16 in `encode`.
        for list in [&i.errored, &i.missing] {
            out.extend_from_slice(&(list.len() as u16).to_be_bytes());
            for b in list {
                out.extend_from_slice(&b.offset.to_be_bytes());
                out.extend_from_slice(&b.size.to_be_bytes());
            }
        }
    } else if i.rockwell_form {
        out.extend_from_slice(&[0, 0, 0, 0]);
    }
    out.extend_from_slice(&i.updu);
}

fn write_tail(out: &mut Vec<u8>, first: u8, dest: NodeAddress, part: &[u8]) {
    out.push(first);
    out.extend_from_slice(&dest.to_wire());
    // Bounded by the Size check in `encode`.
    out.extend_from_slice(&(part.len() as u16).to_be_bytes());
    out.extend_from_slice(part);
}

/// The standard's name of a type number, `None` for numbers outside 1-27.
pub fn type_name(code: u8) -> Option<&'static str> {
    const NAMES: [&str; 27] = [
        "S_BIND_REQUEST",
        "S_UNBIND_REQUEST",
        "S_BIND_ACCEPTED",
        "S_BIND_REJECTED",
        "S_UNBIND_INDICATION",
        "S_HARD_LINK_ESTABLISH",
        "S_HARD_LINK_TERMINATE",
        "S_HARD_LINK_ESTABLISHED",
        "S_HARD_LINK_REJECTED",
        "S_HARD_LINK_TERMINATED",
        "S_HARD_LINK_INDICATION",
        "S_HARD_LINK_ACCEPT",
        "S_HARD_LINK_REJECT",
        "S_SUBNET_AVAILABILITY",
        "S_DATA_FLOW_ON",
        "S_DATA_FLOW_OFF",
        "S_KEEP_ALIVE",
        "S_MANAGEMENT_MSG_REQUEST",
        "S_MANAGEMENT_MSG_INDICATION",
        "S_UNIDATA_REQUEST",
        "S_UNIDATA_INDICATION",
        "S_UNIDATA_REQUEST_CONFIRM",
        "S_UNIDATA_REQUEST_REJECTED",
        "S_EXPEDITED_UNIDATA_REQUEST",
        "S_EXPEDITED_UNIDATA_INDICATION",
        "S_EXPEDITED_UNIDATA_REQUEST_CONFIRM",
        "S_EXPEDITED_UNIDATA_REQUEST_REJECTED",
    ];
    NAMES.get(usize::from(code).checked_sub(1)?).copied()
}
