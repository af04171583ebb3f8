//! STANAG 5066 Annex B C_PDUs (Channel Access Sublayer, CAS type 1).
//!
//! A C_PDU is what the Data Transfer Sublayer segments into D_PDUs: either a DATA C_PDU that
//! wraps an S_PDU, or one of the one-byte physical-link control C_PDUs with which two nodes make
//! and break a link ([ED3-B] §B.3, `reference/s5066-sis.md` §4.5). The control C_PDUs travel in
//! expedited non-ARQ (type 8) D_PDUs.
//!
//! Every C_PDU starts with one byte whose b7–4 hold the TYPE. Unused low bits are ignored on
//! decode (and sent as zero), so a peer that sets them is still understood.

use thiserror::Error;

/// C_PDU type codes (b7–4 of the first byte).
pub mod kind {
    /// DATA: the C_PCI byte 0x00 followed by an S_PDU.
    pub const DATA: u8 = 0;
    /// PHYSICAL LINK REQUEST (b0: 0 non-exclusive, 1 exclusive).
    pub const PHYSICAL_LINK_REQUEST: u8 = 1;
    /// PHYSICAL LINK ACCEPTED.
    pub const PHYSICAL_LINK_ACCEPTED: u8 = 2;
    /// PHYSICAL LINK REJECTED (reason in b3–0).
    pub const PHYSICAL_LINK_REJECTED: u8 = 3;
    /// PHYSICAL LINK BREAK (reason in b3–0).
    pub const PHYSICAL_LINK_BREAK: u8 = 4;
    /// PHYSICAL LINK BREAK CONFIRM.
    pub const PHYSICAL_LINK_BREAK_CONFIRM: u8 = 5;
}

/// Reasons a PHYSICAL LINK REQUEST is rejected ([ED3-B]).
pub mod reject_reason {
    /// Reason unknown.
    pub const UNKNOWN: u8 = 0;
    /// The called node is broadcast-only.
    pub const BROADCAST_ONLY_NODE: u8 = 1;
    /// A higher-priority link request is pending.
    pub const HIGHER_PRIORITY_REQUEST_PENDING: u8 = 2;
    /// The called node is supporting an exclusive link.
    pub const SUPPORTING_EXCLUSIVE_LINK: u8 = 3;
}

/// Reasons for a PHYSICAL LINK BREAK ([ED3-B]).
pub mod break_reason {
    /// Reason unknown.
    pub const UNKNOWN: u8 = 0;
    /// A higher layer asked for the break.
    pub const HIGHER_LAYER_REQUEST: u8 = 1;
    /// Switching to a broadcast session.
    pub const SWITCHING_TO_BROADCAST: u8 = 2;
    /// A higher-priority link request is pending.
    pub const HIGHER_PRIORITY_REQUEST_PENDING: u8 = 3;
    /// No more data to send.
    pub const NO_MORE_DATA: u8 = 4;
}

/// One C_PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cpdu {
    /// DATA: carries an S_PDU (its bytes, undecoded).
    Data(Vec<u8>),
    /// PHYSICAL LINK REQUEST.
    PhysicalLinkRequest {
        /// `true` for an exclusive link (hard-link sessions), `false` for non-exclusive.
        exclusive: bool,
    },
    /// PHYSICAL LINK ACCEPTED.
    PhysicalLinkAccepted,
    /// PHYSICAL LINK REJECTED with a reason from [`reject_reason`] (4 bits).
    PhysicalLinkRejected {
        /// Reason code.
        reason: u8,
    },
    /// PHYSICAL LINK BREAK with a reason from [`break_reason`] (4 bits).
    PhysicalLinkBreak {
        /// Reason code.
        reason: u8,
    },
    /// PHYSICAL LINK BREAK CONFIRM.
    PhysicalLinkBreakConfirm,
}

/// Why a C_PDU could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// A reason code does not fit in its 4 bits.
    #[error("C_PDU reason {0} does not fit in 4 bits")]
    ReasonOutOfRange(u8),
}

/// Why bytes could not be decoded as a C_PDU.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// No bytes at all.
    #[error("empty C_PDU")]
    Empty,
    /// The TYPE is not one of 0–5.
    #[error("unknown C_PDU type {0} (CAS type 1 defines 0 to 5)")]
    UnknownType(u8),
    /// A one-byte control C_PDU was followed by more bytes.
    #[error("C_PDU type {cpdu_type} is one byte long but {len} bytes were received")]
    TrailingBytes {
        /// The C_PDU type.
        cpdu_type: u8,
        /// The number of bytes received.
        len: usize,
    },
}

impl Cpdu {
    /// The 4-bit C_PDU type.
    pub fn cpdu_type(&self) -> u8 {
        match self {
            Cpdu::Data(_) => kind::DATA,
            Cpdu::PhysicalLinkRequest { .. } => kind::PHYSICAL_LINK_REQUEST,
            Cpdu::PhysicalLinkAccepted => kind::PHYSICAL_LINK_ACCEPTED,
            Cpdu::PhysicalLinkRejected { .. } => kind::PHYSICAL_LINK_REJECTED,
            Cpdu::PhysicalLinkBreak { .. } => kind::PHYSICAL_LINK_BREAK,
            Cpdu::PhysicalLinkBreakConfirm => kind::PHYSICAL_LINK_BREAK_CONFIRM,
        }
    }

    /// Encode the C_PDU.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let low = match self {
            Cpdu::Data(spdu) => {
                let mut out = Vec::with_capacity(1 + spdu.len());
                out.push(kind::DATA << 4);
                out.extend_from_slice(spdu);
                return Ok(out);
            }
            Cpdu::PhysicalLinkRequest { exclusive } => u8::from(*exclusive),
            Cpdu::PhysicalLinkRejected { reason } | Cpdu::PhysicalLinkBreak { reason } => {
                if *reason > 0x0F {
                    return Err(EncodeError::ReasonOutOfRange(*reason));
                }
                *reason
            }
            Cpdu::PhysicalLinkAccepted | Cpdu::PhysicalLinkBreakConfirm => 0,
        };
        Ok(vec![self.cpdu_type() << 4 | low])
    }

    /// Decode a C_PDU (a whole reassembled C_PDU, as delivered by the DTS).
    pub fn decode(bytes: &[u8]) -> Result<Cpdu, DecodeError> {
        let (&first, rest) = bytes.split_first().ok_or(DecodeError::Empty)?;
        let cpdu_type = first >> 4;
        if cpdu_type == kind::DATA {
            return Ok(Cpdu::Data(rest.to_vec()));
        }
        let cpdu = match cpdu_type {
            kind::PHYSICAL_LINK_REQUEST => Cpdu::PhysicalLinkRequest {
                exclusive: first & 0x01 != 0,
            },
            kind::PHYSICAL_LINK_ACCEPTED => Cpdu::PhysicalLinkAccepted,
            kind::PHYSICAL_LINK_REJECTED => Cpdu::PhysicalLinkRejected {
                reason: first & 0x0F,
            },
            kind::PHYSICAL_LINK_BREAK => Cpdu::PhysicalLinkBreak {
                reason: first & 0x0F,
            },
            kind::PHYSICAL_LINK_BREAK_CONFIRM => Cpdu::PhysicalLinkBreakConfirm,
            t => return Err(DecodeError::UnknownType(t)),
        };
        if !rest.is_empty() {
            return Err(DecodeError::TrailingBytes {
                cpdu_type,
                len: bytes.len(),
            });
        }
        Ok(cpdu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hand_checked_bytes() {
        assert_eq!(
            Cpdu::Data(vec![0x0F, 0x33, 0x00]).encode().unwrap(),
            [0x00, 0x0F, 0x33, 0x00]
        );
        assert_eq!(
            Cpdu::PhysicalLinkRequest { exclusive: false }
                .encode()
                .unwrap(),
            [0x10]
        );
        assert_eq!(
            Cpdu::PhysicalLinkRequest { exclusive: true }
                .encode()
                .unwrap(),
            [0x11]
        );
        assert_eq!(Cpdu::PhysicalLinkAccepted.encode().unwrap(), [0x20]);
        assert_eq!(
            Cpdu::PhysicalLinkRejected {
                reason: reject_reason::SUPPORTING_EXCLUSIVE_LINK
            }
            .encode()
            .unwrap(),
            [0x33]
        );
        assert_eq!(
            Cpdu::PhysicalLinkBreak {
                reason: break_reason::NO_MORE_DATA
            }
            .encode()
            .unwrap(),
            [0x44]
        );
        assert_eq!(Cpdu::PhysicalLinkBreakConfirm.encode().unwrap(), [0x50]);
    }

    #[test]
    fn decode_errors() {
        assert_eq!(Cpdu::decode(&[]), Err(DecodeError::Empty));
        assert_eq!(Cpdu::decode(&[0x60]), Err(DecodeError::UnknownType(6)));
        assert_eq!(
            Cpdu::decode(&[0x20, 0x00]),
            Err(DecodeError::TrailingBytes {
                cpdu_type: 2,
                len: 2
            })
        );
        assert_eq!(
            Cpdu::PhysicalLinkBreak { reason: 16 }.encode(),
            Err(EncodeError::ReasonOutOfRange(16))
        );
        // Unused bits are tolerated.
        assert_eq!(Cpdu::decode(&[0x2F]), Ok(Cpdu::PhysicalLinkAccepted));
        assert_eq!(Cpdu::decode(&[0x00]), Ok(Cpdu::Data(vec![])));
    }

    fn arb_cpdu() -> impl Strategy<Value = Cpdu> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..64).prop_map(Cpdu::Data),
            any::<bool>().prop_map(|exclusive| Cpdu::PhysicalLinkRequest { exclusive }),
            Just(Cpdu::PhysicalLinkAccepted),
            (0u8..16).prop_map(|reason| Cpdu::PhysicalLinkRejected { reason }),
            (0u8..16).prop_map(|reason| Cpdu::PhysicalLinkBreak { reason }),
            Just(Cpdu::PhysicalLinkBreakConfirm),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn round_trip(c in arb_cpdu()) {
            prop_assert_eq!(Cpdu::decode(&c.encode().unwrap()), Ok(c));
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            let _ = Cpdu::decode(&bytes);
        }
    }
}
