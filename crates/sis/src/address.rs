//! STANAG 5066 node addresses: 28 bits written `w.x.y.z` (w 0-15, x/y/z 0-255), plus the
//! group flag, which Annex C treats as a 29th bit (group addresses are written
//! 16.0.0.0-31.255.255.255; 31.255.255.255 is the broadcast address).
//!
//! On the SIS wire an address is 4 bytes: SIZE OF ADDRESS (b7-5, in nibbles), GROUP (b4) and the
//! 28 address bits right-aligned. We always send size 7 and mask with `0x0FFFFFFF` on receive,
//! as the reference notes recommend (the standard is ambiguous for smaller sizes).

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// A node address (unicast or group).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct NodeAddress {
    bits: u32,
    group: bool,
}

/// Why a node address could not be built or parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AddressError {
    /// The numeric address needs more than 28 bits.
    #[error("node address {0:#x} does not fit in 28 bits")]
    TooWide(u32),
    /// The text is not four dot-separated decimal numbers.
    #[error("node address {0:?} is not of the form w.x.y.z")]
    Syntax(String),
    /// One of the four numbers is out of range.
    #[error("node address {text:?}: {part} must be at most {max}")]
    PartOutOfRange {
        /// The text that was parsed.
        text: String,
        /// Which part (w, x, y or z).
        part: &'static str,
        /// The largest value allowed for it.
        max: u32,
    },
}

impl NodeAddress {
    /// Mask of the 28 address bits.
    pub const MASK: u32 = 0x0FFF_FFFF;
    /// The all-stations broadcast address, 31.255.255.255.
    pub const BROADCAST: NodeAddress = NodeAddress {
        bits: Self::MASK,
        group: true,
    };

    /// An individual (unicast) address from its 28-bit value.
    pub const fn new(bits: u32) -> Result<Self, AddressError> {
        if bits > Self::MASK {
            Err(AddressError::TooWide(bits))
        } else {
            Ok(NodeAddress { bits, group: false })
        }
    }

    /// A group address from its 28-bit value.
    pub const fn group(bits: u32) -> Result<Self, AddressError> {
        if bits > Self::MASK {
            Err(AddressError::TooWide(bits))
        } else {
            Ok(NodeAddress { bits, group: true })
        }
    }

    /// The 28-bit address value.
    pub const fn bits(self) -> u32 {
        self.bits
    }

    /// Whether this is a group address (allowed only as a non-ARQ destination).
    pub const fn is_group(self) -> bool {
        self.group
    }

    /// The 4 wire bytes: size 7 (b7-5 = 111), group flag, 28 bits big-endian.
    pub const fn to_wire(self) -> [u8; 4] {
        let v = 0xE000_0000 | if self.group { 0x1000_0000 } else { 0 } | self.bits;
        v.to_be_bytes()
    }

    /// Decodes 4 wire bytes; the SIZE OF ADDRESS bits are ignored and the address is masked to
    /// 28 bits.
    pub const fn from_wire(bytes: [u8; 4]) -> Self {
        let v = u32::from_be_bytes(bytes);
        NodeAddress {
            bits: v & Self::MASK,
            group: v & 0x1000_0000 != 0,
        }
    }
}

impl fmt::Display for NodeAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = (self.bits >> 24) + if self.group { 16 } else { 0 };
        write!(
            f,
            "{}.{}.{}.{}",
            w,
            (self.bits >> 16) & 0xFF,
            (self.bits >> 8) & 0xFF,
            self.bits & 0xFF
        )
    }
}

impl FromStr for NodeAddress {
    type Err = AddressError;

    /// Parses `w.x.y.z`; `w` of 16-31 gives a group address (w - 16 in the top nibble).
    fn from_str(s: &str) -> Result<Self, AddressError> {
        let syntax = || AddressError::Syntax(s.to_owned());
        let mut parts = [0u32; 4];
        let mut count = 0;
        for piece in s.split('.') {
            if count == 4
                || piece.is_empty()
                || piece.len() > 3
                || !piece.bytes().all(|b| b.is_ascii_digit())
            {
                return Err(syntax());
            }
            parts[count] = piece.parse().map_err(|_| syntax())?;
            count += 1;
        }
        if count != 4 {
            return Err(syntax());
        }
        let names = ["w", "x", "y", "z"];
        for (i, &p) in parts.iter().enumerate() {
            let max = if i == 0 { 31 } else { 255 };
            if p > max {
                return Err(AddressError::PartOutOfRange {
                    text: s.to_owned(),
                    part: names[i],
                    max,
                });
            }
        }
        let group = parts[0] >= 16;
        let bits = ((parts[0] & 0x0F) << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3];
        Ok(NodeAddress { bits, group })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_example_bytes() {
        // Reference 1.4 / 1.6: 1.35.69.103 is sent as E1 23 45 67.
        let a: NodeAddress = "1.35.69.103".parse().unwrap();
        assert_eq!(a.bits(), 0x0123_4567);
        assert_eq!(a.to_wire(), [0xE1, 0x23, 0x45, 0x67]);
        assert_eq!(NodeAddress::from_wire([0xE1, 0x23, 0x45, 0x67]), a);
        assert_eq!(a.to_string(), "1.35.69.103");
    }

    #[test]
    fn receive_ignores_size_bits_and_keeps_group() {
        let a = NodeAddress::from_wire([0x31, 0x00, 0x00, 0x05]);
        assert!(a.is_group());
        assert_eq!(a.bits(), 0x0100_0005);
        assert_eq!(a.to_string(), "17.0.0.5");
        assert_eq!(NodeAddress::BROADCAST.to_string(), "31.255.255.255");
        assert_eq!(
            "31.255.255.255".parse::<NodeAddress>().unwrap(),
            NodeAddress::BROADCAST
        );
    }

    #[test]
    fn parse_errors() {
        assert!(matches!(
            "1.2.3".parse::<NodeAddress>(),
            Err(AddressError::Syntax(_))
        ));
        assert!(matches!(
            "1.2.3.4.5".parse::<NodeAddress>(),
            Err(AddressError::Syntax(_))
        ));
        assert!(matches!(
            "1.2.-3.4".parse::<NodeAddress>(),
            Err(AddressError::Syntax(_))
        ));
        assert!(matches!(
            "32.0.0.0".parse::<NodeAddress>(),
            Err(AddressError::PartOutOfRange { part: "w", .. })
        ));
        assert!(matches!(
            "0.256.0.0".parse::<NodeAddress>(),
            Err(AddressError::PartOutOfRange { part: "x", .. })
        ));
        assert!(matches!(
            NodeAddress::new(0x1000_0000),
            Err(AddressError::TooWide(_))
        ));
    }
}
