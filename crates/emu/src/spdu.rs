//! STANAG 5066 Annex A S_PDUs: the peer protocol between Subnetwork Interface Sublayers,
//! carried inside a DATA C_PDU ([ED3-A] §A.3.1, `reference/s5066-sis.md` §4.6).
//!
//! The emulated node wraps every U_PDU a client submits in a DATA S_PDU (3 bytes of S_PCI, 5
//! with a time-to-die, which it sets for every U_PDU with a TTL: [`Ttd`]), answers
//! client-delivery-confirm requests with DATA DELIVERY CONFIRM or FAIL, and runs the
//! hard-link handshake with the HARD LINK S_PDUs.
//!
//! Sources of the layouts: DATA (Figure A-32) and DATA DELIVERY FAIL are given byte by byte in
//! the reference. DATA DELIVERY CONFIRM repeats the DATA S_PCI with TYPE 1 ([ED3-A]: "the
//! remaining fields … shall be equal in value to the corresponding fields of the DATA S_PDU").
//! The hard-link S_PDUs' figures (A-35…A-39) are images that the reference does not transcribe;
//! the field order used here follows the text of §A.3.1.4–7 (TYPE, then LINK TYPE, LINK
//! PRIORITY, then REQUESTING SAP and REMOTE SAP; REASON in the low nibble of byte 0), which is
//! also how the open `rds-5066` implementation reads those figures. **Derived, not verified
//! against the figure.**

use std::time::Duration;

use thiserror::Error;

/// S_PDU type codes (b7–4 of byte 0).
pub mod kind {
    /// DATA.
    pub const DATA: u8 = 0;
    /// DATA DELIVERY CONFIRM.
    pub const DATA_DELIVERY_CONFIRM: u8 = 1;
    /// DATA DELIVERY FAIL.
    pub const DATA_DELIVERY_FAIL: u8 = 2;
    /// HARD LINK ESTABLISHMENT REQUEST.
    pub const HARD_LINK_REQUEST: u8 = 3;
    /// HARD LINK ESTABLISHMENT CONFIRM.
    pub const HARD_LINK_CONFIRM: u8 = 4;
    /// HARD LINK ESTABLISHMENT REJECTED.
    pub const HARD_LINK_REJECTED: u8 = 5;
    /// HARD LINK TERMINATE.
    pub const HARD_LINK_TERMINATE: u8 = 6;
    /// HARD LINK TERMINATE CONFIRM.
    pub const HARD_LINK_TERMINATE_CONFIRM: u8 = 7;
}

/// Time-to-die of a DATA S_PDU: Julian day mod 16 and GMT seconds with the LSB dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ttd {
    /// Julian day (1–366) modulo 16.
    pub julian_day_mod16: u8,
    /// GMT seconds after midnight, shifted right by one (2 s resolution).
    pub gmt_seconds_half: u16,
}

/// Seconds in a day of GMT.
const DAY_SECS: u64 = 86_400;

impl Ttd {
    /// The TTD field for the instant `t` of the emulator's clock, which nodes read as GMT
    /// counted from 00:00 of Julian day 1 (every node shares it, as a subnetwork's nodes are
    /// assumed to share GMT). The GMT seconds lose their least significant bit, as Annex A
    /// has it, so the field says `t` rounded down to an even second.
    pub fn at(t: Duration) -> Ttd {
        let secs = t.as_secs();
        let day = secs / DAY_SECS;
        Ttd {
            julian_day_mod16: u8::try_from((day + 1) % 16).unwrap_or(0),
            gmt_seconds_half: u16::try_from((secs % DAY_SECS) >> 1).unwrap_or(u16::MAX),
        }
    }

    /// The instant of the emulator's clock this field names, read near `now`: the field
    /// repeats every 16 days, so of the instants it can name the one closest to `now` is
    /// meant (a TTD more than 8 days away from the receiving node's clock cannot be told
    /// apart from one 16 days the other way).
    pub fn resolve(self, now: Duration) -> Duration {
        let time_of_day = u64::from(self.gmt_seconds_half) << 1;
        let now_secs = now.as_secs();
        let today = now_secs / DAY_SECS;
        // The latest day at or before today whose Julian day mod 16 is this field's.
        let back = (today + 1 + 16 - u64::from(self.julian_day_mod16 & 0x0F)) % 16;
        let on = |day: u64| day.checked_mul(DAY_SECS)?.checked_add(time_of_day);
        let mut best = None::<u64>;
        let days = [
            today.checked_sub(back + 16),
            today.checked_sub(back),
            (today + 16).checked_sub(back),
        ];
        for t in days.into_iter().flatten().filter_map(on) {
            if best.is_none_or(|b| t.abs_diff(now_secs) < b.abs_diff(now_secs)) {
                best = Some(t);
            }
        }
        Duration::from_secs(best.unwrap_or(time_of_day))
    }
}

/// The S_PCI of a DATA (and DATA DELIVERY CONFIRM) S_PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataPci {
    /// Priority (0–15) of the U_PDU; 0 for expedited U_PDUs.
    pub priority: u8,
    /// Source SAP (0–15).
    pub source_sap: u8,
    /// Destination SAP (0–15).
    pub destination_sap: u8,
    /// CLIENT DELIVERY CONFIRM REQUIRED.
    pub client_delivery_confirm: bool,
    /// Time-to-die, if VALID TTD is set.
    pub ttd: Option<Ttd>,
}

/// One S_PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spdu {
    /// DATA: a client's U_PDU.
    Data {
        /// Protocol control information.
        pci: DataPci,
        /// The U_PDU.
        updu: Vec<u8>,
    },
    /// DATA DELIVERY CONFIRM: the U_PDU was delivered to the destination client.
    DataDeliveryConfirm {
        /// The S_PCI of the DATA S_PDU being confirmed.
        pci: DataPci,
        /// All or part of the U_PDU.
        updu: Vec<u8>,
    },
    /// DATA DELIVERY FAIL: the U_PDU could not be delivered.
    DataDeliveryFail {
        /// Reason (4 bits): 1 = destination SAP not bound.
        reason: u8,
        /// Source SAP of the failed DATA S_PDU.
        source_sap: u8,
        /// Destination SAP of the failed DATA S_PDU.
        destination_sap: u8,
        /// All or part of the U_PDU.
        updu: Vec<u8>,
    },
    /// HARD LINK ESTABLISHMENT REQUEST.
    HardLinkRequest {
        /// Link type (2 bits): 0 link reservation, 1 partial bandwidth, 2 full bandwidth.
        link_type: u8,
        /// Link priority (2 bits, 0–3).
        link_priority: u8,
        /// SAP of the requesting client.
        requesting_sap: u8,
        /// Remote SAP (meaningful only for link type 2).
        remote_sap: u8,
    },
    /// HARD LINK ESTABLISHMENT CONFIRM.
    HardLinkConfirm,
    /// HARD LINK ESTABLISHMENT REJECTED.
    HardLinkRejected {
        /// Reason (4 bits): 1 remote node busy, 2 higher-priority link existing, 3 remote node
        /// not responding, 4 destination SAP not bound.
        reason: u8,
    },
    /// HARD LINK TERMINATE.
    HardLinkTerminate {
        /// Reason (4 bits): 1 client request, 2 higher-priority link requested, 4 destination
        /// SAP unbound.
        reason: u8,
    },
    /// HARD LINK TERMINATE CONFIRM.
    HardLinkTerminateConfirm,
}

/// Why an S_PDU could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// A field holds a value wider than its bit field.
    #[error("S_PDU field {field} = {value} does not fit in {bits} bits")]
    FieldOutOfRange {
        /// Name of the field.
        field: &'static str,
        /// The value given.
        value: u8,
        /// Width of the field in bits.
        bits: u8,
    },
}

/// Why bytes could not be decoded as an S_PDU.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The S_PDU is shorter than its S_PCI.
    #[error(
        "S_PDU type {spdu_type} truncated: {needed} bytes of S_PCI needed, {available} received"
    )]
    Truncated {
        /// The S_PDU type (0 if not even the type byte was there).
        spdu_type: u8,
        /// Bytes the S_PCI needs.
        needed: usize,
        /// Bytes received.
        available: usize,
    },
    /// The TYPE is not one of 0–7.
    #[error("unknown S_PDU type {0} (Annex A defines 0 to 7)")]
    UnknownType(u8),
    /// A fixed-size S_PDU was followed by more bytes.
    #[error("S_PDU type {spdu_type} is {expected} bytes long but {len} bytes were received")]
    TrailingBytes {
        /// The S_PDU type.
        spdu_type: u8,
        /// Its fixed length.
        expected: usize,
        /// The length received.
        len: usize,
    },
}

fn check(field: &'static str, value: u8, bits: u8) -> Result<u8, EncodeError> {
    if value >> bits == 0 {
        Ok(value)
    } else {
        Err(EncodeError::FieldOutOfRange { field, value, bits })
    }
}

fn encode_pci(spdu_type: u8, pci: &DataPci, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    out.push(spdu_type << 4 | check("priority", pci.priority, 4)?);
    out.push(
        check("source SAP", pci.source_sap, 4)? << 4
            | check("destination SAP", pci.destination_sap, 4)?,
    );
    let julian = match pci.ttd {
        Some(t) => check("TTD Julian day", t.julian_day_mod16, 4)?,
        None => 0,
    };
    out.push(
        u8::from(pci.client_delivery_confirm) << 7 | u8::from(pci.ttd.is_some()) << 6 | julian,
    );
    if let Some(t) = pci.ttd {
        out.extend_from_slice(&t.gmt_seconds_half.to_be_bytes());
    }
    Ok(())
}

fn decode_pci(spdu_type: u8, bytes: &[u8]) -> Result<(DataPci, &[u8]), DecodeError> {
    let truncated = |needed| DecodeError::Truncated {
        spdu_type,
        needed,
        available: bytes.len(),
    };
    let (b0, b1, b2) = match bytes {
        [b0, b1, b2, ..] => (*b0, *b1, *b2),
        _ => return Err(truncated(3)),
    };
    let valid_ttd = b2 & 0x40 != 0;
    let (ttd, rest) = if valid_ttd {
        match bytes.get(3..) {
            Some([hi, lo, rest @ ..]) => (
                Some(Ttd {
                    julian_day_mod16: b2 & 0x0F,
                    gmt_seconds_half: u16::from_be_bytes([*hi, *lo]),
                }),
                rest,
            ),
            _ => return Err(truncated(5)),
        }
    } else {
        (None, bytes.get(3..).unwrap_or_default())
    };
    let pci = DataPci {
        priority: b0 & 0x0F,
        source_sap: b1 >> 4,
        destination_sap: b1 & 0x0F,
        client_delivery_confirm: b2 & 0x80 != 0,
        ttd,
    };
    Ok((pci, rest))
}

impl Spdu {
    /// The 4-bit S_PDU type.
    pub fn spdu_type(&self) -> u8 {
        match self {
            Spdu::Data { .. } => kind::DATA,
            Spdu::DataDeliveryConfirm { .. } => kind::DATA_DELIVERY_CONFIRM,
            Spdu::DataDeliveryFail { .. } => kind::DATA_DELIVERY_FAIL,
            Spdu::HardLinkRequest { .. } => kind::HARD_LINK_REQUEST,
            Spdu::HardLinkConfirm => kind::HARD_LINK_CONFIRM,
            Spdu::HardLinkRejected { .. } => kind::HARD_LINK_REJECTED,
            Spdu::HardLinkTerminate { .. } => kind::HARD_LINK_TERMINATE,
            Spdu::HardLinkTerminateConfirm => kind::HARD_LINK_TERMINATE_CONFIRM,
        }
    }

    /// Encode the S_PDU.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let t = self.spdu_type();
        let mut out = Vec::new();
        match self {
            Spdu::Data { pci, updu } | Spdu::DataDeliveryConfirm { pci, updu } => {
                out.reserve(5 + updu.len());
                encode_pci(t, pci, &mut out)?;
                out.extend_from_slice(updu);
            }
            Spdu::DataDeliveryFail {
                reason,
                source_sap,
                destination_sap,
                updu,
            } => {
                out.push(t << 4 | check("reason", *reason, 4)?);
                out.push(
                    check("source SAP", *source_sap, 4)? << 4
                        | check("destination SAP", *destination_sap, 4)?,
                );
                out.extend_from_slice(updu);
            }
            Spdu::HardLinkRequest {
                link_type,
                link_priority,
                requesting_sap,
                remote_sap,
            } => {
                out.push(
                    t << 4
                        | check("link type", *link_type, 2)? << 2
                        | check("link priority", *link_priority, 2)?,
                );
                out.push(
                    check("requesting SAP", *requesting_sap, 4)? << 4
                        | check("remote SAP", *remote_sap, 4)?,
                );
            }
            Spdu::HardLinkRejected { reason } | Spdu::HardLinkTerminate { reason } => {
                out.push(t << 4 | check("reason", *reason, 4)?);
            }
            Spdu::HardLinkConfirm | Spdu::HardLinkTerminateConfirm => out.push(t << 4),
        }
        Ok(out)
    }

    /// Decode an S_PDU (the bytes after the DATA C_PDU's C_PCI).
    pub fn decode(bytes: &[u8]) -> Result<Spdu, DecodeError> {
        let &first = bytes.first().ok_or(DecodeError::Truncated {
            spdu_type: 0,
            needed: 1,
            available: 0,
        })?;
        let t = first >> 4;
        let fixed = |expected: usize| {
            if bytes.len() < expected {
                Err(DecodeError::Truncated {
                    spdu_type: t,
                    needed: expected,
                    available: bytes.len(),
                })
            } else if bytes.len() > expected {
                Err(DecodeError::TrailingBytes {
                    spdu_type: t,
                    expected,
                    len: bytes.len(),
                })
            } else {
                Ok(())
            }
        };
        let second = bytes.get(1).copied().unwrap_or(0);
        Ok(match t {
            kind::DATA | kind::DATA_DELIVERY_CONFIRM => {
                let (pci, rest) = decode_pci(t, bytes)?;
                let updu = rest.to_vec();
                if t == kind::DATA {
                    Spdu::Data { pci, updu }
                } else {
                    Spdu::DataDeliveryConfirm { pci, updu }
                }
            }
            kind::DATA_DELIVERY_FAIL => {
                if bytes.len() < 2 {
                    return Err(DecodeError::Truncated {
                        spdu_type: t,
                        needed: 2,
                        available: bytes.len(),
                    });
                }
                Spdu::DataDeliveryFail {
                    reason: first & 0x0F,
                    source_sap: second >> 4,
                    destination_sap: second & 0x0F,
                    updu: bytes.get(2..).unwrap_or_default().to_vec(),
                }
            }
            kind::HARD_LINK_REQUEST => {
                fixed(2)?;
                Spdu::HardLinkRequest {
                    link_type: (first >> 2) & 0x03,
                    link_priority: first & 0x03,
                    requesting_sap: second >> 4,
                    remote_sap: second & 0x0F,
                }
            }
            kind::HARD_LINK_CONFIRM => {
                fixed(1)?;
                Spdu::HardLinkConfirm
            }
            kind::HARD_LINK_REJECTED => {
                fixed(1)?;
                Spdu::HardLinkRejected {
                    reason: first & 0x0F,
                }
            }
            kind::HARD_LINK_TERMINATE => {
                fixed(1)?;
                Spdu::HardLinkTerminate {
                    reason: first & 0x0F,
                }
            }
            kind::HARD_LINK_TERMINATE_CONFIRM => {
                fixed(1)?;
                Spdu::HardLinkTerminateConfirm
            }
            other => return Err(DecodeError::UnknownType(other)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn data_without_ttd_is_three_bytes_of_pci() {
        let s = Spdu::Data {
            pci: DataPci {
                priority: 5,
                source_sap: 3,
                destination_sap: 3,
                client_delivery_confirm: false,
                ttd: None,
            },
            updu: b"HELO".to_vec(),
        };
        let wire = s.encode().unwrap();
        assert_eq!(wire, [0x05, 0x33, 0x00, b'H', b'E', b'L', b'O']);
        assert_eq!(Spdu::decode(&wire).unwrap(), s);
        // Inside a DATA C_PDU: 4 bytes of overhead per U_PDU, as the reference says.
        let cpdu = crate::cpdu::Cpdu::Data(wire).encode().unwrap();
        assert_eq!(cpdu.len() - 4, 4);
    }

    /// The emulator's clock as GMT from 00:00 of Julian day 1: day 1 is 1 mod 16, the
    /// seconds lose their LSB, and the field reads back to the instant it names (rounded
    /// down to an even second) from anywhere within 8 days of it, across the day and the
    /// 16-day wrap.
    #[test]
    fn a_ttd_names_an_instant_of_the_shared_clock() {
        let s = Duration::from_secs;
        assert_eq!(
            Ttd::at(s(3601)),
            Ttd {
                julian_day_mod16: 1,
                gmt_seconds_half: 1800
            }
        );
        assert_eq!(
            Ttd::at(s(15 * 86_400 + 86_399)),
            Ttd {
                julian_day_mod16: 0,
                gmt_seconds_half: 43_199
            }
        );
        for t in [
            0,
            3601,
            86_399,
            86_400,
            15 * 86_400 + 7,
            16 * 86_400 + 5,
            40 * 86_400 + 1,
        ] {
            let ttd = Ttd::at(s(t));
            let named = s(t & !1);
            for now in [
                t.saturating_sub(8 * 86_400 - 10),
                t.saturating_sub(60),
                t,
                t + 60,
                t + 8 * 86_400 - 10,
            ] {
                assert_eq!(ttd.resolve(s(now)), named, "TTD for {t} read at {now}");
            }
        }
    }

    #[test]
    fn data_with_ttd_is_five_bytes_of_pci() {
        let pci = DataPci {
            priority: 0,
            source_sap: 12,
            destination_sap: 6,
            client_delivery_confirm: true,
            ttd: Some(Ttd {
                julian_day_mod16: 9,
                gmt_seconds_half: 0x1234,
            }),
        };
        let s = Spdu::Data {
            pci,
            updu: vec![0xAB],
        };
        let wire = s.encode().unwrap();
        assert_eq!(wire, [0x00, 0xC6, 0xC9, 0x12, 0x34, 0xAB]);
        assert_eq!(Spdu::decode(&wire).unwrap(), s);
        // The confirm repeats the S_PCI with type 1.
        let c = Spdu::DataDeliveryConfirm { pci, updu: vec![] };
        assert_eq!(c.encode().unwrap(), [0x10, 0xC6, 0xC9, 0x12, 0x34]);
    }

    #[test]
    fn fail_and_hard_link_bytes() {
        let f = Spdu::DataDeliveryFail {
            reason: 1,
            source_sap: 3,
            destination_sap: 4,
            updu: vec![9],
        };
        assert_eq!(f.encode().unwrap(), [0x21, 0x34, 9]);
        let r = Spdu::HardLinkRequest {
            link_type: 2,
            link_priority: 3,
            requesting_sap: 5,
            remote_sap: 7,
        };
        assert_eq!(r.encode().unwrap(), [0x3B, 0x57]);
        assert_eq!(Spdu::HardLinkConfirm.encode().unwrap(), [0x40]);
        assert_eq!(
            Spdu::HardLinkRejected { reason: 4 }.encode().unwrap(),
            [0x54]
        );
        assert_eq!(
            Spdu::HardLinkTerminate { reason: 1 }.encode().unwrap(),
            [0x61]
        );
        assert_eq!(Spdu::HardLinkTerminateConfirm.encode().unwrap(), [0x70]);
    }

    #[test]
    fn decode_errors() {
        assert!(matches!(
            Spdu::decode(&[]),
            Err(DecodeError::Truncated { needed: 1, .. })
        ));
        assert!(matches!(
            Spdu::decode(&[0x00, 0x11]),
            Err(DecodeError::Truncated { needed: 3, .. })
        ));
        assert!(matches!(
            Spdu::decode(&[0x00, 0x11, 0x40, 0x01]),
            Err(DecodeError::Truncated { needed: 5, .. })
        ));
        assert_eq!(Spdu::decode(&[0x80]), Err(DecodeError::UnknownType(8)));
        assert_eq!(
            Spdu::decode(&[0x40, 0x00]),
            Err(DecodeError::TrailingBytes {
                spdu_type: 4,
                expected: 1,
                len: 2
            })
        );
        assert!(matches!(
            Spdu::decode(&[0x30]),
            Err(DecodeError::Truncated { needed: 2, .. })
        ));
        let bad = Spdu::HardLinkRequest {
            link_type: 4,
            link_priority: 0,
            requesting_sap: 0,
            remote_sap: 0,
        };
        assert!(bad.encode().is_err());
    }

    fn arb_pci() -> impl Strategy<Value = DataPci> {
        (
            0u8..16,
            0u8..16,
            0u8..16,
            any::<bool>(),
            proptest::option::of((0u8..16, any::<u16>())),
        )
            .prop_map(
                |(priority, source_sap, destination_sap, client_delivery_confirm, ttd)| DataPci {
                    priority,
                    source_sap,
                    destination_sap,
                    client_delivery_confirm,
                    ttd: ttd.map(|(julian_day_mod16, gmt_seconds_half)| Ttd {
                        julian_day_mod16,
                        gmt_seconds_half,
                    }),
                },
            )
    }

    fn arb_spdu() -> impl Strategy<Value = Spdu> {
        let updu = || proptest::collection::vec(any::<u8>(), 0..64);
        prop_oneof![
            (arb_pci(), updu()).prop_map(|(pci, updu)| Spdu::Data { pci, updu }),
            (arb_pci(), updu()).prop_map(|(pci, updu)| Spdu::DataDeliveryConfirm { pci, updu }),
            (0u8..16, 0u8..16, 0u8..16, updu()).prop_map(
                |(reason, source_sap, destination_sap, updu)| {
                    Spdu::DataDeliveryFail {
                        reason,
                        source_sap,
                        destination_sap,
                        updu,
                    }
                }
            ),
            (0u8..4, 0u8..4, 0u8..16, 0u8..16).prop_map(
                |(link_type, link_priority, requesting_sap, remote_sap)| {
                    Spdu::HardLinkRequest {
                        link_type,
                        link_priority,
                        requesting_sap,
                        remote_sap,
                    }
                }
            ),
            Just(Spdu::HardLinkConfirm),
            (0u8..16).prop_map(|reason| Spdu::HardLinkRejected { reason }),
            (0u8..16).prop_map(|reason| Spdu::HardLinkTerminate { reason }),
            Just(Spdu::HardLinkTerminateConfirm),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn round_trip(s in arb_spdu()) {
            let wire = s.encode().unwrap();
            prop_assert_eq!(Spdu::decode(&wire), Ok(s));
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            let _ = Spdu::decode(&bytes);
        }
    }
}
