//! Codec tests: the worked bytes of the reference (section 1.6), the Rockwell quirk, every
//! error the decoder names, and property tests over all 27 primitives.

use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;

use crate::decode::{DecodeError, Decoder};
use crate::fields::*;
use crate::primitive::*;
use crate::reason::*;
use crate::strategies;

fn decode_one(bytes: &[u8]) -> Result<Option<Primitive>, DecodeError> {
    let mut d = Decoder::new();
    d.push(bytes);
    d.next()
}

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect()
}

#[test]
fn reference_bind_request() {
    let bytes = hex("90 EB 00 00 04 01 30 14 00");
    let p = decode_one(&bytes).unwrap().unwrap();
    assert_eq!(
        p,
        Primitive::BindRequest {
            sap: SapId::HMTP,
            rank: Rank::new(0).unwrap(),
            service: ServiceType::ARQ_NODE_CONFIRM,
        }
    );
    assert_eq!(p.to_bytes().unwrap(), bytes);
}

#[test]
fn reference_bind_accepted() {
    let bytes = hex("90 EB 00 00 04 03 30 08 00");
    let p = decode_one(&bytes).unwrap().unwrap();
    assert_eq!(
        p,
        Primitive::BindAccepted {
            sap: SapId::HMTP,
            mtu: 2048
        }
    );
    assert_eq!(p.to_bytes().unwrap(), bytes);
}

#[test]
fn reference_unidata_request() {
    let mut bytes = hex("90 EB 00 00 14 14 53 E1 23 45 67 00 00 00 3C 00 08");
    bytes.extend_from_slice(b"HELO x\r\n");
    let p = decode_one(&bytes).unwrap().unwrap();
    let Primitive::UnidataRequest(r) = &p else {
        panic!("wrong primitive {p:?}")
    };
    assert_eq!(r.priority.get(), 5);
    assert_eq!(r.dest_sap, SapId::HMTP);
    assert_eq!(r.dest.to_string(), "1.35.69.103");
    assert_eq!(r.mode, ServiceType::DEFAULT);
    assert_eq!(r.ttl.as_secs(), Some(120));
    assert_eq!(&r.updu[..], b"HELO x\r\n");
    assert_eq!(p.to_bytes().unwrap(), bytes);
}

#[test]
fn reference_keep_alive() {
    let bytes = hex("90 EB 00 00 01 11");
    assert_eq!(decode_one(&bytes).unwrap(), Some(Primitive::KeepAlive));
    assert_eq!(Primitive::KeepAlive.to_bytes().unwrap(), bytes);
}

#[test]
fn ttl_high_bits_share_a_byte_with_retransmissions() {
    let r = UnidataRequest {
        mode: ServiceType {
            min_retransmissions: Retransmissions::new(2).unwrap(),
            ..ServiceType::NON_ARQ
        },
        ttl: Ttl::from_units(0x5_1234).unwrap(),
        ..Default::default()
    };
    let bytes = Primitive::UnidataRequest(r.clone()).to_bytes().unwrap();
    assert_eq!(&bytes[11..15], &[0x22, 0x25, 0x12, 0x34]);
    assert_eq!(
        decode_one(&bytes).unwrap(),
        Some(Primitive::UnidataRequest(r))
    );
}

fn indication_bytes(mode: u8, extra: &[u8], updu: &[u8]) -> Vec<u8> {
    let size = 13 + extra.len() + updu.len();
    let mut v = vec![0x90, 0xEB, 0x00];
    v.extend_from_slice(&(size as u16).to_be_bytes());
    v.extend_from_slice(&[
        21,
        0x73,
        0xE1,
        0x23,
        0x45,
        0x67,
        (mode << 4) | 3,
        0xE0,
        0,
        0,
        9,
    ]);
    v.extend_from_slice(&(updu.len() as u16).to_be_bytes());
    v.extend_from_slice(extra);
    v.extend_from_slice(updu);
    v
}

#[test]
fn rockwell_indication_is_accepted_and_reencoded_the_same_way() {
    let bytes = indication_bytes(1, &[0, 0, 0, 0], b"abc");
    let p = decode_one(&bytes).unwrap().unwrap();
    let Primitive::UnidataIndication(i) = &p else {
        panic!("wrong primitive {p:?}")
    };
    assert!(i.rockwell_form);
    assert_eq!(i.tx_mode, TxMode::Arq);
    assert_eq!(i.priority.get(), 7);
    assert_eq!(i.src.to_string(), "0.0.0.9");
    assert_eq!(i.src_sap, SapId::HMTP);
    assert_eq!(&i.updu[..], b"abc");
    assert_eq!(p.to_bytes().unwrap(), bytes);
    // The plain form re-encodes without the padding.
    let plain = indication_bytes(1, &[], b"abc");
    let q = decode_one(&plain).unwrap().unwrap();
    let Primitive::UnidataIndication(j) = &q else {
        panic!()
    };
    assert!(!j.rockwell_form);
    assert_eq!(j.updu, i.updu);
    assert_eq!(q.to_bytes().unwrap(), plain);
}

#[test]
fn rockwell_padding_must_be_zero() {
    let bytes = indication_bytes(1, &[0, 1, 0, 0], b"abc");
    assert_eq!(
        decode_one(&bytes),
        Err(DecodeError::NonZeroPadding {
            primitive: "S_UNIDATA_INDICATION",
            found: [0, 1, 0, 0]
        })
    );
}

#[test]
fn non_arq_with_errors_carries_block_lists() {
    // K = 1 (offset 4, size 2), L = 2 (0,1) (8,2).
    let extra = hex("00 01 00 04 00 02 00 02 00 00 00 01 00 08 00 02");
    let bytes = indication_bytes(3, &extra, b"0123456789");
    let p = decode_one(&bytes).unwrap().unwrap();
    let Primitive::UnidataIndication(i) = &p else {
        panic!()
    };
    assert_eq!(i.tx_mode, TxMode::NonArqWithErrors);
    assert_eq!(i.errored, vec![Block { offset: 4, size: 2 }]);
    assert_eq!(
        i.missing,
        vec![Block { offset: 0, size: 1 }, Block { offset: 8, size: 2 }]
    );
    assert_eq!(&i.updu[..], b"0123456789");
    assert_eq!(p.to_bytes().unwrap(), bytes);
    // A list count that runs past the frame.
    let bad = indication_bytes(3, &hex("00 09 00 00"), b"");
    assert!(matches!(
        decode_one(&bad),
        Err(DecodeError::BlockListOverrun { .. })
    ));
}

#[test]
fn confirm_and_reject_layouts() {
    let rej = Primitive::UnidataRequestRejected(UnidataRejected {
        reason: UnidataRejectReason::DestinationNodeNotResponding,
        dest_sap: SapId::HMTP,
        dest: "1.35.69.103".parse().unwrap(),
        updu_part: Bytes::from_static(b"MAIL"),
    });
    let bytes = rej.to_bytes().unwrap();
    assert_eq!(
        bytes,
        hex("90 EB 00 00 0C 17 33 E1 23 45 67 00 04 4D 41 49 4C")
    );
    assert_eq!(decode_one(&bytes).unwrap(), Some(rej));
}

#[test]
fn hard_link_layouts() {
    let link = HardLink {
        link_type: HardLinkType::FullBandwidth,
        priority: LinkPriority::new(1).unwrap(),
        remote_sap: SapId::new(5).unwrap(),
        remote: "0.0.0.7".parse().unwrap(),
    };
    let p = Primitive::HardLinkRejected {
        reason: HardLinkRejectReason::RemoteNodeBusy,
        link,
    };
    let bytes = p.to_bytes().unwrap();
    assert_eq!(bytes, hex("90 EB 00 00 07 09 01 95 E0 00 00 07"));
    assert_eq!(decode_one(&bytes).unwrap(), Some(p));
}

#[test]
fn header_errors_are_named() {
    assert_eq!(
        decode_one(&hex("90 EC 00 00 01 11")),
        Err(DecodeError::BadPreamble {
            found: [0x90, 0xEC]
        })
    );
    assert_eq!(
        decode_one(&hex("90 EB 01 00 01 11")),
        Err(DecodeError::UnsupportedVersion(1))
    );
    assert_eq!(
        decode_one(&hex("90 EB 00 00 00")),
        Err(DecodeError::ZeroSize)
    );
    assert_eq!(
        decode_one(&hex("90 EB 00 00 01 1C")),
        Err(DecodeError::UnknownType(28))
    );
    assert_eq!(
        decode_one(&hex("90 EB 00 00 01 00")),
        Err(DecodeError::UnknownType(0))
    );
    assert_eq!(
        decode_one(&hex("90 EB 00 00 02 11 00")),
        Err(DecodeError::WrongSize {
            primitive: "S_KEEP_ALIVE",
            size: 2,
            expected: 1
        })
    );
    assert_eq!(
        decode_one(&hex("90 EB 00 00 05 14 00 00 00 00")),
        Err(DecodeError::TooShort {
            primitive: "S_UNIDATA_REQUEST",
            size: 5,
            min: 12
        })
    );
    // U_PDU size 9 but only 8 bytes counted by Size.
    let mut bad = hex("90 EB 00 00 14 14 53 E1 23 45 67 00 00 00 3C 00 09");
    bad.extend_from_slice(&[0; 8]);
    assert_eq!(
        decode_one(&bad),
        Err(DecodeError::LengthMismatch {
            primitive: "S_UNIDATA_REQUEST",
            size: 20,
            implied: 21
        })
    );
    let msg = DecodeError::BadPreamble {
        found: [0x12, 0x34],
    }
    .to_string();
    assert_eq!(msg, "bad S_Primitive preamble: expected 90 EB, got 12 34");
}

#[test]
fn oversize_is_refused_from_the_header_alone() {
    let mut d = Decoder::with_max_size(2100);
    d.push(&hex("90 EB 00 08 35"));
    assert_eq!(
        d.next(),
        Err(DecodeError::Oversize {
            size: 0x0835,
            max: 2100
        })
    );
    assert_eq!(d.buffered(), 0);
    // The default allows a 4096-byte U_PDU.
    let big = Primitive::UnidataIndication(UnidataIndication {
        updu: Bytes::from(vec![7u8; 4096]),
        ..Default::default()
    });
    assert!(decode_one(&big.to_bytes().unwrap()).unwrap().is_some());
}

#[test]
fn failed_decoder_stays_failed_until_reset() {
    let mut d = Decoder::new();
    d.push(&hex("00 00"));
    let err = d.next().unwrap_err();
    assert_eq!(d.failure(), Some(&err));
    d.push(&hex("90 EB 00 00 01 11"));
    assert_eq!(d.next(), Err(err));
    assert_eq!(d.buffered(), 0);
    d.reset();
    d.push(&hex("90 EB 00 00 01 11"));
    assert_eq!(d.next(), Ok(Some(Primitive::KeepAlive)));
    assert_eq!(d.next(), Ok(None));
}

#[test]
fn encode_refuses_what_the_size_field_cannot_hold() {
    let p = Primitive::UnidataRequest(UnidataRequest {
        updu: Bytes::from(vec![0u8; 65_524]),
        ..Default::default()
    });
    let mut out = vec![1, 2];
    assert_eq!(
        p.encode(&mut out),
        Err(EncodeError::TooLarge {
            primitive: "S_UNIDATA_REQUEST",
            size: 65_536
        })
    );
    assert_eq!(out, vec![1, 2]);
}

/// Feeds `bytes` to a decoder in chunks of the given sizes (cycled), collecting primitives.
fn decode_chunked(bytes: &[u8], chunks: &[usize]) -> Result<Vec<Primitive>, DecodeError> {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    let mut pos = 0;
    let mut i = 0;
    while pos < bytes.len() {
        let n = chunks[i % chunks.len()].max(1).min(bytes.len() - pos);
        d.push(&bytes[pos..pos + n]);
        pos += n;
        i += 1;
        while let Some(p) = d.next()? {
            out.push(p);
        }
    }
    assert_eq!(d.buffered(), 0);
    Ok(out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn round_trip(p in strategies::primitive()) {
        let bytes = p.to_bytes().unwrap();
        prop_assert_eq!(bytes.len(), 5 + p.size());
        prop_assert_eq!(decode_one(&bytes).unwrap(), Some(p));
    }

    #[test]
    fn round_trip_stream_in_random_chunks(
        ps in vec(strategies::primitive(), 1..8),
        chunks in vec(1usize..40, 1..10),
    ) {
        let mut bytes = Vec::new();
        for p in &ps {
            p.encode(&mut bytes).unwrap();
        }
        prop_assert_eq!(decode_chunked(&bytes, &chunks).unwrap(), ps);
    }

    #[test]
    fn truncated_frame_needs_more_bytes(p in strategies::primitive(), cut in any::<prop::sample::Index>()) {
        let bytes = p.to_bytes().unwrap();
        let n = cut.index(bytes.len());
        let mut d = Decoder::new();
        d.push(&bytes[..n]);
        prop_assert_eq!(d.next(), Ok(None));
        d.push(&bytes[n..]);
        prop_assert_eq!(d.next(), Ok(Some(p)));
    }

    #[test]
    fn garbage_never_panics_and_reencodes(bytes in vec(any::<u8>(), 0..200), chunks in vec(1usize..20, 1..5)) {
        let mut d = Decoder::new();
        for chunk in bytes.chunks(chunks[0]) {
            d.push(chunk);
            loop {
                match d.next() {
                    Ok(Some(p)) => {
                        let again = p.to_bytes().unwrap();
                        prop_assert_eq!(decode_one(&again).unwrap(), Some(p));
                    }
                    Ok(None) => break,
                    Err(e) => {
                        prop_assert!(!e.to_string().is_empty());
                        prop_assert_eq!(d.next(), Err(e));
                        return Ok(());
                    }
                }
            }
        }
    }

    #[test]
    fn garbage_after_valid_header(code in 1u8..=27, size in 1u16..400, body in vec(any::<u8>(), 0..400)) {
        let mut bytes = vec![0x90, 0xEB, 0x00];
        bytes.extend_from_slice(&size.to_be_bytes());
        bytes.push(code);
        bytes.extend_from_slice(&body);
        // Never panics; either a primitive, a need for more bytes or a named error.
        let _ = decode_one(&bytes);
    }

    #[test]
    fn oversize_header_is_refused(size in 101u16..=u16::MAX, code in any::<u8>()) {
        let mut d = Decoder::with_max_size(100);
        let mut bytes = vec![0x90, 0xEB, 0x00];
        bytes.extend_from_slice(&size.to_be_bytes());
        bytes.push(code);
        d.push(&bytes);
        prop_assert_eq!(d.next(), Err(DecodeError::Oversize { size, max: 100 }));
    }
}
