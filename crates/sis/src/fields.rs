//! Small typed fields shared by the S_Primitives: 4-bit identifiers (SAP, rank, priority,
//! retransmission count), the service type / delivery mode bit fields and the time-to-live.
//!
//! These sit below [`crate::primitive`]: every value here knows its own wire width, so the
//! encoder never has to mask or truncate anything a caller gave it.

use std::fmt;
use std::time::Duration;

use thiserror::Error;

/// A value did not fit the width of the field it was meant for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("{field} must be at most {max}, got {value}")]
pub struct OutOfRange {
    /// Which field was being built.
    pub field: &'static str,
    /// The largest value the field can hold.
    pub max: u32,
    /// The value that was offered.
    pub value: u32,
}

macro_rules! bounded_u8 {
    ($(#[$doc:meta])* $name:ident, $field:literal, $max:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(u8);

        impl $name {
            /// The largest value this field can carry.
            pub const MAX: u8 = $max;

            /// Builds the field, refusing values wider than the wire field.
            pub const fn new(value: u8) -> Result<Self, OutOfRange> {
                if value <= $max {
                    Ok(Self(value))
                } else {
                    Err(OutOfRange { field: $field, max: $max, value: value as u32 })
                }
            }

            /// Builds the field from the low bits of a wire byte (the higher bits are dropped).
            pub(crate) const fn from_bits(bits: u8) -> Self {
                Self(bits & $max)
            }

            /// The numeric value.
            pub const fn get(self) -> u8 {
                self.0
            }
        }

        impl TryFrom<u8> for $name {
            type Error = OutOfRange;
            fn try_from(value: u8) -> Result<Self, OutOfRange> {
                Self::new(value)
            }
        }

        impl From<$name> for u8 {
            fn from(value: $name) -> u8 {
                value.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

bounded_u8!(
    /// A Service Access Point identifier, 0-15 (Annex F assigns e.g. 3 = HMTP, 9 = IP client,
    /// 12 = CFTP).
    SapId, "SAP ID", 15
);
bounded_u8!(
    /// The rank a client binds with, 0-15; only clients allowed to change the node's
    /// configuration may bind with rank 15.
    Rank, "rank", 15
);
bounded_u8!(
    /// U_PDU priority, 0-15. The standard asks the subnetwork for a best effort to give
    /// precedence to high-priority U_PDUs.
    Priority, "priority", 15
);
bounded_u8!(
    /// Minimum number of retransmissions for non-ARQ delivery, 0-15 (0 = send once).
    Retransmissions, "minimum number of retransmissions", 15
);
bounded_u8!(
    /// Hard-link priority, 0-3.
    LinkPriority, "hard-link priority", 3
);

impl SapId {
    /// SAP 2: T-MMHS (STANAG 4406 annex E), whose TMI-1 is ACP 142 P_MUL in UDOP U_PDUs.
    pub const T_MMHS: SapId = SapId(2);
    /// SAP 3: HMTP (HF Mail Transfer Protocol).
    pub const HMTP: SapId = SapId(3);
    /// SAP 9: the IP client (mandatory in Annex F).
    pub const IP_CLIENT: SapId = SapId(9);
    /// SAP 12: CFTP (Compressed File Transfer Protocol).
    pub const CFTP: SapId = SapId(12);
}

/// Transmission mode (4 bits) of a service type, delivery mode or indication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TxMode {
    /// 0: in a bind, invalid; in a unidata request, "use the service type of the bind" (the
    /// other delivery-mode attributes are then ignored by the server).
    #[default]
    Default,
    /// 1: ARQ (reliable, point to point).
    Arq,
    /// 2: non-ARQ (broadcast).
    NonArq,
    /// 3: non-ARQ with errors: U_PDUs with errored or missing blocks are delivered, with the
    /// lists of those blocks.
    NonArqWithErrors,
    /// 4-15: values the standard leaves to be defined.
    Other(u8),
}

impl TxMode {
    /// The 4-bit wire value.
    pub const fn bits(self) -> u8 {
        match self {
            TxMode::Default => 0,
            TxMode::Arq => 1,
            TxMode::NonArq => 2,
            TxMode::NonArqWithErrors => 3,
            TxMode::Other(v) => v & 0x0F,
        }
    }

    /// Decodes the low 4 bits of `bits`.
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 0x0F {
            0 => TxMode::Default,
            1 => TxMode::Arq,
            2 => TxMode::NonArq,
            3 => TxMode::NonArqWithErrors,
            v => TxMode::Other(v),
        }
    }
}

/// Delivery confirmation requested with a service type or delivery mode (2 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Confirmation {
    /// 0: no confirmation.
    #[default]
    None,
    /// 1: node delivery confirmation (the remote node's DTS acknowledged the U_PDU).
    Node,
    /// 2: client delivery confirmation (the remote client received it).
    Client,
    /// 3: undefined by the standard.
    Undefined,
}

impl Confirmation {
    /// The 2-bit wire value.
    pub const fn bits(self) -> u8 {
        match self {
            Confirmation::None => 0,
            Confirmation::Node => 1,
            Confirmation::Client => 2,
            Confirmation::Undefined => 3,
        }
    }

    /// Decodes the low 2 bits of `bits`.
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 0x03 {
            0 => Confirmation::None,
            1 => Confirmation::Node,
            2 => Confirmation::Client,
            _ => Confirmation::Undefined,
        }
    }

    /// Whether the server will answer with a confirm or reject primitive.
    pub const fn is_requested(self) -> bool {
        matches!(self, Confirmation::Node | Confirmation::Client)
    }
}

/// Delivery order (1 bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DeliveryOrder {
    /// 0: deliver in the order submitted.
    #[default]
    InOrder,
    /// 1: deliver as the U_PDUs arrive.
    AsTheyArrive,
}

/// The SERVICE TYPE of S_BIND_REQUEST, also the DELIVERY MODE of S_(EXPEDITED_)UNIDATA_REQUEST
/// (Annex A figures ): 2 bytes, of which the unidata requests use the low nibble of
/// the second byte for TTL bits 19-16.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ServiceType {
    /// Transmission mode.
    pub tx_mode: TxMode,
    /// Delivery confirmation.
    pub confirmation: Confirmation,
    /// Delivery order.
    pub order: DeliveryOrder,
    /// Minimum number of retransmissions (non-ARQ only).
    pub min_retransmissions: Retransmissions,
}

/// The delivery mode of a unidata request has the same layout as a bind's service type.
pub type DeliveryMode = ServiceType;

impl ServiceType {
    /// ARQ with node delivery confirmation, in order: the HMTP default of Annex F.
    pub const ARQ_NODE_CONFIRM: ServiceType = ServiceType {
        tx_mode: TxMode::Arq,
        confirmation: Confirmation::Node,
        order: DeliveryOrder::InOrder,
        min_retransmissions: Retransmissions(0),
    };

    /// ARQ without delivery confirmation, in order.
    pub const ARQ: ServiceType = ServiceType {
        tx_mode: TxMode::Arq,
        confirmation: Confirmation::None,
        order: DeliveryOrder::InOrder,
        min_retransmissions: Retransmissions(0),
    };

    /// Non-ARQ (broadcast), sent once, delivered as it arrives.
    pub const NON_ARQ: ServiceType = ServiceType {
        tx_mode: TxMode::NonArq,
        confirmation: Confirmation::None,
        order: DeliveryOrder::AsTheyArrive,
        min_retransmissions: Retransmissions(0),
    };

    /// Mode 0 in a unidata request: "use the service type of the bind".
    pub const DEFAULT: ServiceType = ServiceType {
        tx_mode: TxMode::Default,
        confirmation: Confirmation::None,
        order: DeliveryOrder::InOrder,
        min_retransmissions: Retransmissions(0),
    };

    /// First byte: mode (b7-4), confirmation (b3-2), order (b1); the extended-field bit b0 is 0.
    pub(crate) const fn first_byte(self) -> u8 {
        (self.tx_mode.bits() << 4)
            | (self.confirmation.bits() << 2)
            | match self.order {
                DeliveryOrder::InOrder => 0,
                DeliveryOrder::AsTheyArrive => 0x02,
            }
    }

    /// High nibble of the second byte.
    pub(crate) const fn second_byte_high(self) -> u8 {
        self.min_retransmissions.get() << 4
    }

    /// Decodes the two bytes; the low nibble of `b1` (unused, or TTL bits) is ignored here, and
    /// so is the extended-field bit, which the standard says shall be 0.
    pub(crate) const fn from_bytes(b0: u8, b1: u8) -> Self {
        ServiceType {
            tx_mode: TxMode::from_bits(b0 >> 4),
            confirmation: Confirmation::from_bits(b0 >> 2),
            order: if b0 & 0x02 == 0 {
                DeliveryOrder::InOrder
            } else {
                DeliveryOrder::AsTheyArrive
            },
            min_retransmissions: Retransmissions::from_bits(b1 >> 4),
        }
    }
}

/// Time to live of a U_PDU: 20 bits in units of 2 seconds; 0 means "infinite", i.e. the
/// server's configured default maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Ttl(u32);

impl Ttl {
    /// The largest value of the 20-bit field, in 2-second units.
    pub const MAX_UNITS: u32 = 0x000F_FFFF;
    /// 0: the server's default maximum TTL.
    pub const INFINITE: Ttl = Ttl(0);

    /// From the wire value in 2-second units.
    pub const fn from_units(units: u32) -> Result<Self, OutOfRange> {
        if units <= Self::MAX_UNITS {
            Ok(Ttl(units))
        } else {
            Err(OutOfRange {
                field: "TTL (2-s units)",
                max: Self::MAX_UNITS,
                value: units,
            })
        }
    }

    /// From seconds, rounded up to the next 2-second unit (so a TTL is never shortened).
    /// Zero seconds gives [`Ttl::INFINITE`].
    pub const fn from_secs(secs: u32) -> Result<Self, OutOfRange> {
        let units = secs / 2 + secs % 2;
        if units <= Self::MAX_UNITS {
            Ok(Ttl(units))
        } else {
            Err(OutOfRange {
                field: "TTL (seconds)",
                max: Self::MAX_UNITS * 2,
                value: secs,
            })
        }
    }

    /// The wire value in 2-second units.
    pub const fn units(self) -> u32 {
        self.0
    }

    /// Whether this is the "infinite" TTL (the server's default maximum).
    pub const fn is_infinite(self) -> bool {
        self.0 == 0
    }

    /// The TTL in seconds, `None` when infinite.
    pub const fn as_secs(self) -> Option<u32> {
        if self.0 == 0 { None } else { Some(self.0 * 2) }
    }

    /// The TTL as a duration, `None` when infinite.
    pub const fn as_duration(self) -> Option<Duration> {
        match self.as_secs() {
            Some(s) => Some(Duration::from_secs(s as u64)),
            None => None,
        }
    }
}

impl fmt::Display for Ttl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_secs() {
            Some(s) => write!(f, "{s} s"),
            None => f.write_str("infinite"),
        }
    }
}

/// Type of a hard link (2 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HardLinkType {
    /// 0: link reservation.
    #[default]
    Reservation,
    /// 1: partial-bandwidth reservation.
    PartialBandwidth,
    /// 2: full-bandwidth reservation (the remote SAP is meaningful only here).
    FullBandwidth,
    /// 3: not defined by the standard.
    Undefined,
}

impl HardLinkType {
    /// The 2-bit wire value.
    pub const fn bits(self) -> u8 {
        match self {
            HardLinkType::Reservation => 0,
            HardLinkType::PartialBandwidth => 1,
            HardLinkType::FullBandwidth => 2,
            HardLinkType::Undefined => 3,
        }
    }

    /// Decodes the low 2 bits.
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 0x03 {
            0 => HardLinkType::Reservation,
            1 => HardLinkType::PartialBandwidth,
            2 => HardLinkType::FullBandwidth,
            _ => HardLinkType::Undefined,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nibbles_refuse_wide_values() {
        assert!(SapId::new(15).is_ok());
        let err = SapId::new(16).unwrap_err();
        assert_eq!(err.to_string(), "SAP ID must be at most 15, got 16");
        assert!(LinkPriority::new(4).is_err());
    }

    #[test]
    fn ttl_rounds_up_to_two_seconds() {
        assert_eq!(Ttl::from_secs(120).unwrap().units(), 60);
        assert_eq!(Ttl::from_secs(121).unwrap().units(), 61);
        assert_eq!(Ttl::from_secs(1).unwrap().as_secs(), Some(2));
        assert!(Ttl::from_secs(0).unwrap().is_infinite());
        assert_eq!(Ttl::INFINITE.as_duration(), None);
        assert!(Ttl::from_units(Ttl::MAX_UNITS + 1).is_err());
        assert_eq!(Ttl::from_units(60).unwrap().to_string(), "120 s");
    }

    #[test]
    fn service_type_bits() {
        // Reference 1.6: ARQ, node delivery confirmation, in order = 0x14 0x00.
        let st = ServiceType::ARQ_NODE_CONFIRM;
        assert_eq!(st.first_byte(), 0x14);
        assert_eq!(ServiceType::from_bytes(0x14, 0x00), st);
        let st = ServiceType::from_bytes(0x3B, 0x5F);
        assert_eq!(st.tx_mode, TxMode::NonArqWithErrors);
        assert_eq!(st.confirmation, Confirmation::Client);
        assert_eq!(st.order, DeliveryOrder::AsTheyArrive);
        assert_eq!(st.min_retransmissions.get(), 5);
        // The extended-field bit (b0) is dropped.
        assert_eq!(st.first_byte(), 0x3A);
    }
}
