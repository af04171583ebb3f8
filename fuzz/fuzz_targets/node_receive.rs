//! Fuzz a STANAG 5066 node's receive path (`skywave_emu::node::Node`) with what a peer could
//! put on the air: well-formed D_PDUs of the data, acknowledgement and reset types (their
//! CRCs right, so they get past the D_PDU decoder) with any field values and any bytes in
//! their segments, DATA C_PDUs with DATA S_PDUs (a time to die among them) made to go
//! further in, and raw bytes, at times that only go forward, with ends of transmission,
//! timeouts, the node's own transmissions and its client's submissions between. No input may
//! panic, and no U_PDU longer than the MTU may reach a client.
#![no_main]

#[path = "shared/data_header.rs"]
mod shared;

use std::time::Duration;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use skywave_emu::dpdu::{Ack, Address, Body, Dpdu, Eow, ExpDataHeader, NonArqHeader, Reset};
use skywave_emu::modem::{DataRate, Interleaver, ModemConfig};
use skywave_emu::node::{
    DEFAULT_LINK_RETRIES, Drc, HARD_LINK_TIMEOUT, Node, NodeConfig, NodeSetup, SendMode,
};
use skywave_sis::{NodeAddress, Primitive, Priority, SapId, ServiceType, Ttl, UnidataRequest};

const ME: u32 = 0x0102_0304;
const PEER: u32 = 0x0105_0607;
const MTU: u16 = 2048;

/// The node under test (index 0) and its one peer (index 1), a client bound on SAP 3.
fn node() -> Option<Node> {
    let modem = ModemConfig::new(DataRate::Bps1200, Interleaver::Short).ok()?;
    let setup = NodeSetup::new(NodeConfig {
        addresses: vec![NodeAddress::new(ME).ok()?, NodeAddress::new(PEER).ok()?],
        groups: Vec::new(),
        modem,
        window: 128,
        segment_size: 200,
        max_transmission: Duration::from_secs(120),
        mtu: MTU,
        flow_limit: 64,
        response_timeout: Duration::from_secs(3),
        drc: Drc::Fixed,
        data_ack: true,
        start_rate: None,
        link_retries: Some(DEFAULT_LINK_RETRIES),
        cas1: false,
        link_idle: None,
        max_links: None,
        link_first_data: None,
        hard_link_timeout: HARD_LINK_TIMEOUT,
        default_ttl: Some(Duration::from_secs(30)),
        confirm_wait: Some(Duration::from_secs(20)),
    })
    .ok()?;
    let mut n = Node::new(0, &setup, false).ok()?;
    n.bind(SapId::new(3).ok()?, 0, 1, true).then_some(n)
}

/// Up to `max` bytes taken from the input.
fn take(bytes: &mut impl Iterator<Item = u8>, max: usize) -> Vec<u8> {
    let n = bytes.next().map_or(0, |b| usize::from(b) % (max + 1));
    bytes.take(n).collect()
}

/// A segment: raw bytes, or a DATA C_PDU holding a DATA S_PDU for SAP 3 (with a time to die
/// if the input says so) and a U_PDU.
fn segment(bytes: &mut impl Iterator<Item = u8>) -> Vec<u8> {
    let kind = bytes.next().unwrap_or(0);
    let mut s = Vec::new();
    if kind & 1 != 0 {
        // C_PDU type 0 (DATA), then the S_PCI: TYPE 0 | PRIORITY, SAPs 3 -> 3, flags.
        s.extend_from_slice(&[0x00, kind >> 4, 0x33]);
        if kind & 2 != 0 {
            s.push(0x40 | (kind >> 4));
            s.extend(take(bytes, 2));
        } else {
            s.push(0);
        }
    }
    s.extend(take(bytes, 180));
    s
}

fuzz_target!(|data: &[u8]| {
    let Some(mut node) = node() else {
        return;
    };
    let (Some(me), Some(peer)) = (Address::new(ME), Address::new(PEER)) else {
        return;
    };
    let mut now = Duration::ZERO;
    let mut bytes = data.iter().copied();
    // Bounded by the input: every step takes at least one byte.
    while let Some(op) = bytes.next() {
        let a = bytes.next().unwrap_or(0);
        let b = bytes.next().unwrap_or(0);
        let body = match op % 12 {
            0 | 1 => Some(Body::DataOnly {
                header: shared::data_header(a, b),
                segment: segment(&mut bytes),
            }),
            2 => Some(Body::DataAck {
                header: shared::data_header(a, b),
                ack: Ack {
                    rx_lwe: bytes.next().unwrap_or(0),
                    bitmap: take(&mut bytes, 16),
                },
                segment: segment(&mut bytes),
            }),
            3 => Some(Body::AckOnly(Ack {
                rx_lwe: a,
                bitmap: take(&mut bytes, 16),
            })),
            4 => Some(Body::ResetWinResync(Reset {
                full_reset: a & 1 != 0,
                reset_tx_win_request: a & 2 != 0,
                reset_rx_win_command: a & 4 != 0,
                reset_ack: a & 8 != 0,
                new_rx_lwe: b,
                reset_frame_id: a >> 4,
            })),
            5 | 6 => {
                let size = u16::from_be_bytes([bytes.next().unwrap_or(0) & 0x07, b]);
                let header = NonArqHeader {
                    cpdu_id: u16::from(a) << 4 | u16::from(b & 0x0F),
                    deliver_in_order: a & 1 != 0,
                    group: false,
                    cpdu_size: size,
                    segment_offset: u16::from(bytes.next().unwrap_or(0)),
                    reception_window: u16::from(bytes.next().unwrap_or(0)),
                };
                let segment = segment(&mut bytes);
                Some(if op % 12 == 5 {
                    Body::NonArqData { header, segment }
                } else {
                    Body::ExpNonArqData { header, segment }
                })
            }
            7 => Some(Body::ExpDataOnly {
                header: ExpDataHeader {
                    start: a & 1 != 0,
                    end: a & 2 != 0,
                    cpdu_id: a >> 4,
                    fsn: b,
                },
                segment: segment(&mut bytes),
            }),
            8 => Some(Body::ExpAckOnly(Ack {
                rx_lwe: a,
                bitmap: take(&mut bytes, 16),
            })),
            _ => None,
        };
        match (body, op % 12) {
            (Some(body), _) => {
                let d = Dpdu {
                    eow: Eow::NONE,
                    eot: a,
                    destination: me,
                    source: peer,
                    body,
                };
                if let Ok(wire) = d.encode() {
                    node.receive_dpdus(1, vec![(now, wire)]);
                }
            }
            (None, 9) => {
                node.receive_dpdus(1, vec![(now, take(&mut bytes, 64))]);
            }
            (None, 10) => {
                now += Duration::from_millis(500) * u32::from(a);
                node.end_of_transmission(1, DataRate::Bps1200, b & 1 != 0, 1, 0);
                node.handle_timeout(now);
                if b & 2 != 0 {
                    let _ = node.poll_transmit(now);
                }
            }
            _ => {
                let Ok(priority) = Priority::new(a & 0x0F) else {
                    continue;
                };
                let (Ok(sap), Ok(dest)) = (SapId::new(3), NodeAddress::new(PEER)) else {
                    continue;
                };
                let req = UnidataRequest {
                    priority,
                    dest_sap: sap,
                    dest,
                    mode: ServiceType::DEFAULT,
                    ttl: Ttl::from_secs(u32::from(b)).unwrap_or(Ttl::INFINITE),
                    updu: Bytes::from(take(&mut bytes, 255)),
                };
                let mode = SendMode {
                    confirm: a & 0x10 != 0,
                    expedited: a & 0x20 != 0,
                    non_arq: (a & 0x40 != 0).then_some(b & 3),
                    in_order: a & 0x80 != 0,
                };
                let _ = node.submit(now, 1, sap, &req, mode);
            }
        }
        while let Some(ev) = node.poll_event() {
            if let Primitive::UnidataIndication(ind) | Primitive::ExpeditedUnidataIndication(ind) =
                &ev.primitive
            {
                assert!(
                    ind.updu.len() <= usize::from(MTU),
                    "a U_PDU of {} bytes reached the client",
                    ind.updu.len()
                );
            }
        }
    }
});
