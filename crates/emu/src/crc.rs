//! The two STANAG 5066 Annex C CRCs: CRC-16 over every D_PDU header, CRC-32 over every C_PDU
//! segment.
//!
//! Both are computed exactly as [ED3-C] §C.3.2 specifies (see `reference/s5066-sis.md` §4.1):
//! register initialised to 0, bits processed least significant first with the *reflected*
//! constant, no final inversion, and the result sent low byte first.
//!
//! * CRC-16: polynomial x¹⁶+x¹⁵+x¹²+x¹¹+x⁸+x⁶+x³+1 (0x19949), reflected constant 0x9299.
//! * CRC-32: polynomial 0x10AA725CF (not Ethernet's), reflected constant 0xF3A4E550.
//!
//! Computed by the `crc` crate from the two algorithms below (its table-driven engine); the
//! tests check it against a bit-at-a-time implementation written from the text of [ED3-C] and
//! against the standard's worked example.

use crc::{Algorithm, Crc};

/// Reflected CRC-16 constant of [ED3-C] (polynomial 0x19949).
pub const CRC16_REFLECTED: u16 = 0x9299;
/// Reflected CRC-32 constant of [ED3-C] (polynomial 0x10AA725CF).
pub const CRC32_REFLECTED: u32 = 0xF3A4_E550;

/// The D_PDU header CRC as a `crc` algorithm: the polynomial without its top term, in normal
/// (unreflected) form as the crate takes it; `check` is the CRC of `b"123456789"`.
pub const CRC16_5066: Algorithm<u16> = Algorithm {
    width: 16,
    poly: 0x9949,
    init: 0,
    refin: true,
    refout: true,
    xorout: 0,
    check: 0x7D01,
    residue: 0,
};

/// The C_PDU segment CRC as a `crc` algorithm (see [`CRC16_5066`]).
pub const CRC32_5066: Algorithm<u32> = Algorithm {
    width: 32,
    poly: 0x0AA7_25CF,
    init: 0,
    refin: true,
    refout: true,
    xorout: 0,
    check: 0x6738_A384,
    residue: 0,
};

static CRC16: Crc<u16> = Crc::<u16>::new(&CRC16_5066);
static CRC32: Crc<u32> = Crc::<u32>::new(&CRC32_5066);

/// CRC-16 of a D_PDU header (all header bytes after the sync, up to but excluding the CRC).
pub fn crc16(bytes: &[u8]) -> u16 {
    CRC16.checksum(bytes)
}

/// CRC-32 of a C_PDU segment.
pub fn crc32(bytes: &[u8]) -> u32 {
    CRC32.checksum(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit-at-a-time reference implementation, written straight from the text of [ED3-C].
    fn crc16_bitwise(bytes: &[u8]) -> u16 {
        let mut crc = 0u16;
        for &b in bytes {
            crc ^= u16::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ CRC16_REFLECTED
                } else {
                    crc >> 1
                };
            }
        }
        crc
    }

    fn crc32_bitwise(bytes: &[u8]) -> u32 {
        let mut crc = 0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ CRC32_REFLECTED
                } else {
                    crc >> 1
                };
            }
        }
        crc
    }

    const WARNING: [u8; 7] = [0xF0, 0x00, 0x00, 0x47, 0x05, 0x64, 0x02];

    #[test]
    fn reference_vector_crc16() {
        assert_eq!(crc16(&WARNING), 0x1E5F);
        // Low byte first on the wire.
        assert_eq!(crc16(&WARNING).to_le_bytes(), [0x5F, 0x1E]);
    }

    #[test]
    fn reference_vector_crc32() {
        assert_eq!(crc32(&WARNING), 0xF417_8F95);
        assert_eq!(crc32(&WARNING).to_le_bytes(), [0x95, 0x8F, 0x17, 0xF4]);
    }

    #[test]
    fn reflected_constants_match_polynomials() {
        // 0x19949 without its x^16 term, bit-reversed.
        assert_eq!(CRC16_5066.poly.reverse_bits(), CRC16_REFLECTED);
        // 0x10AA725CF without its x^32 term, bit-reversed.
        assert_eq!(CRC32_5066.poly.reverse_bits(), CRC32_REFLECTED);
        // The algorithms' own check values, by the bitwise reference.
        assert_eq!(crc16_bitwise(b"123456789"), CRC16_5066.check);
        assert_eq!(crc32_bitwise(b"123456789"), CRC32_5066.check);
    }

    #[test]
    fn empty_input_is_zero() {
        assert_eq!(crc16(&[]), 0);
        assert_eq!(crc32(&[]), 0);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        #[test]
        fn crate_matches_bitwise(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            proptest::prop_assert_eq!(crc16(&bytes), crc16_bitwise(&bytes));
            proptest::prop_assert_eq!(crc32(&bytes), crc32_bitwise(&bytes));
        }
    }
}
