//! Nodes driven by hand, wired back to back without the scheduler: SIS requests, D_PDU bytes
//! and time in; D_PDUs and client primitives out. The tests play the air themselves: they
//! choose which D_PDUs of a transmission arrive.

use std::time::Duration;

use bytes::Bytes;
use skywave_sis::{
    Block, NodeAddress, Primitive, Priority, SapId, ServiceType, Ttl, TxMode, UnidataIndication,
    UnidataRejectReason, UnidataRequest,
};

use super::{
    ClientEvent, Drc, Group, Heard, LinkEvent, Node, NodeConfig, NodeSetup, NodeTx, SendMode,
    fair_shares,
};
use crate::dpdu::{Body, Dpdu};
use crate::modem::{DataRate, Interleaver, ModemConfig};

const A: u32 = 0x0102_0304;
const B: u32 = 0x0105_0607;
const C: u32 = 0x0108_090A;
const SAP: u8 = 3;
/// Connection ids of the clients of nodes 0 to 3.
const CONN: [u64; 4] = [10, 20, 30, 40];

const ARQ: SendMode = SendMode {
    confirm: true,
    expedited: false,
    non_arq: None,
    in_order: true,
};

fn addr(bits: u32) -> NodeAddress {
    NodeAddress::new(bits).unwrap()
}

fn sap() -> SapId {
    SapId::new(SAP).unwrap()
}

fn node_config(addresses: Vec<NodeAddress>) -> NodeConfig {
    let modem = ModemConfig::new(DataRate::Bps1200, Interleaver::Short).unwrap();
    NodeConfig {
        addresses,
        groups: Vec::new(),
        modem,
        window: 128,
        segment_size: 1023,
        max_transmission: Duration::from_secs(120),
        mtu: 2048,
        flow_limit: 64,
        response_timeout: Duration::from_secs(3),
        drc: Drc::Fixed,
        data_ack: true,
        start_rate: None,
        link_retries: Some(super::DEFAULT_LINK_RETRIES),
        cas1: false,
        link_idle: None,
        max_links: None,
        link_first_data: None,
        hard_link_timeout: super::HARD_LINK_TIMEOUT,
        default_ttl: None,
        confirm_wait: None,
    }
}

/// The nodes of `config`, each with one client bound on SAP 3.
fn nodes(config: NodeConfig) -> Vec<Node> {
    let setup = NodeSetup::new(config).unwrap();
    let count = setup.config().addresses.len();
    (0..count)
        .map(|i| {
            let mut n = Node::new(i, &setup, false).unwrap();
            assert!(n.bind(sap(), 0, CONN[i], false));
            n
        })
        .collect()
}

/// Nodes A (0) and B (1).
fn pair() -> (Node, Node) {
    let mut v = nodes(node_config(vec![addr(A), addr(B)]));
    let b = v.pop().unwrap();
    let a = v.pop().unwrap();
    (a, b)
}

fn request(dest: u32, updu: &[u8]) -> UnidataRequest {
    UnidataRequest {
        priority: Priority::new(5).unwrap(),
        dest_sap: sap(),
        dest: addr(dest),
        mode: ServiceType::DEFAULT,
        ttl: Ttl::INFINITE,
        updu: Bytes::copy_from_slice(updu),
    }
}

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// Hands node `to` (index `to_index`) what `tx` from node `from` carried for it, except the
/// D_PDUs at the positions in `lost`; whether it decoded anything.
fn hear(tx: &NodeTx, from: usize, to: &mut Node, to_index: usize, lost: &[usize]) -> bool {
    hear_damaged(tx, from, to, to_index, lost, &[])
}

/// [`hear`], with the D_PDUs at the positions in `damaged` arriving with one byte of their
/// segment wrong (header intact, segment CRC failing), as a burst of bit errors leaves them.
fn hear_damaged(
    tx: &NodeTx,
    from: usize,
    to: &mut Node,
    to_index: usize,
    lost: &[usize],
    damaged: &[usize],
) -> bool {
    let mut heard = Heard {
        from,
        rate: tx.modem.rate,
        dpdus: Vec::new(),
        data_sent: 0,
        data_lost: 0,
    };
    for (i, d) in tx.dpdus.iter().enumerate() {
        let member = d
            .dest
            .checked_sub(to.setup.config().addresses.len())
            .and_then(|g| to.setup.config().groups.get(g))
            .is_some_and(|g| g.members.contains(&to_index));
        if d.dest != to_index && !member {
            continue;
        }
        if d.dest == to_index && matches!(d.dpdu_type, 0 | 2 | 4 | 7 | 8) {
            heard.data_sent += 1;
            heard.data_lost += usize::from(lost.contains(&i));
        }
        if !lost.contains(&i) {
            let mut bytes = d.bytes.clone();
            if damaged.contains(&i) {
                let header = 2 + usize::from(bytes[5] >> 5) + usize::from(bytes[5] & 0x1F);
                bytes[header + DAMAGED_AT] ^= 0x5A;
            }
            heard.dpdus.push((d.at, bytes));
        }
    }
    to.handle_heard(heard)
}

/// Where in its segment [`hear_damaged`] damages a D_PDU.
const DAMAGED_AT: usize = 10;

/// The one event of `got`, a U_PDU delivered to a client.
fn the_indication(got: &[ClientEvent]) -> &UnidataIndication {
    match got {
        [
            ClientEvent {
                primitive: Primitive::UnidataIndication(ind),
                ..
            },
        ] => ind,
        _ => panic!("expected one indication: {got:?}"),
    }
}

fn events(node: &mut Node) -> Vec<ClientEvent> {
    std::iter::from_fn(|| node.poll_event()).collect()
}

fn types(tx: &NodeTx) -> Vec<u8> {
    tx.dpdus.iter().map(|d| d.dpdu_type).collect()
}

/// The DELIVER IN ORDER flag of each D_PDU of `tx`, all DATA-ONLY or NON-ARQ DATA.
fn in_order_flags(tx: &NodeTx) -> Vec<bool> {
    tx.dpdus
        .iter()
        .map(|d| match Dpdu::decode(&d.bytes).unwrap().0.body {
            Body::DataOnly { header, .. } => header.deliver_in_order,
            Body::NonArqData { header, .. } => header.deliver_in_order,
            other => panic!("not a data D_PDU: {other:?}"),
        })
        .collect()
}

/// The U_PDUs `node`'s client got, by their first byte.
fn first_bytes(node: &mut Node) -> Vec<u8> {
    indications(&events(node)).iter().map(|u| u[0]).collect()
}

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn an_arq_unidata_goes_out_is_delivered_acknowledged_and_confirmed() {
    let (mut a, mut b) = pair();
    let updu = payload(300);
    assert!(!a.has_work());
    a.submit(Duration::ZERO, CONN[0], sap(), &request(B, &updu), ARQ)
        .unwrap();
    assert!(a.has_work());
    assert!(events(&mut a).is_empty());

    let tx = a.poll_transmit(Duration::ZERO).unwrap();
    assert_eq!(types(&tx), [0], "one DATA-ONLY");
    assert!(tx.sent_data);
    assert_eq!(tx.tx.start, Duration::ZERO);
    let (d, _) = Dpdu::decode(&tx.dpdus[0].bytes).unwrap();
    assert_eq!(d.destination.value(), B);
    assert_eq!(d.source.value(), A);
    // Sent but not acknowledged: still work to do (a retransmission if no ACK comes).
    assert!(a.has_work());

    assert!(hear(&tx, 0, &mut b, 1, &[]));
    let got = events(&mut b);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].conn, CONN[1]);
    let Primitive::UnidataIndication(ind) = &got[0].primitive else {
        panic!("expected an indication, got {:?}", got[0].primitive);
    };
    assert_eq!(
        (ind.src, ind.dest, ind.tx_mode),
        (addr(A), addr(B), TxMode::Arq)
    );
    assert_eq!(ind.updu.as_ref(), updu.as_slice());
    assert_eq!(b.counters().delivered, 1);

    // B owes the ACK; it answers with an ACK-ONLY alone.
    assert!(b.has_work());
    let ack = b.poll_transmit(tx.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(types(&ack), [1]);
    assert!(!ack.sent_data);
    assert!(!b.has_work());

    assert!(hear(&ack, 1, &mut a, 0, &[]));
    let got = events(&mut a);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].conn, CONN[0]);
    let Primitive::UnidataRequestConfirm(c) = &got[0].primitive else {
        panic!("expected a confirm, got {:?}", got[0].primitive);
    };
    assert_eq!((c.dest, c.dest_sap), (addr(B), sap()));
    assert!(!a.has_work());
    let counters = a.counters();
    assert_eq!((counters.transmissions, counters.dpdus_sent), (1, 1));
    assert_eq!(counters.bytes_on_air, tx.bytes as u64);
}

#[test]
fn a_lost_segment_is_sent_again_and_only_it() {
    let (mut a, mut b) = pair();
    // 2000 bytes + 4 of overhead: two segments of 1023 bytes and less.
    let updu = payload(2000);
    a.submit(Duration::ZERO, CONN[0], sap(), &request(B, &updu), ARQ)
        .unwrap();
    let tx = a.poll_transmit(Duration::ZERO).unwrap();
    assert_eq!(types(&tx), [0, 0]);
    // The second segment does not arrive: nothing to deliver yet.
    assert!(hear(&tx, 0, &mut b, 1, &[1]));
    assert!(events(&mut b).is_empty());
    let ack = b.poll_transmit(secs(30)).unwrap();
    hear(&ack, 1, &mut a, 0, &[]);
    assert!(
        events(&mut a).is_empty(),
        "no confirm before every segment is acknowledged"
    );

    let again = a.poll_transmit(secs(40)).unwrap();
    assert_eq!(types(&again), [0]);
    assert!(again.dpdus[0].retransmission);
    assert_eq!(again.dpdus[0].fsn, Some(1));
    assert_eq!(again.retransmissions, 1);
    hear(&again, 0, &mut b, 1, &[]);
    let got = events(&mut b);
    assert!(
        matches!(&got[..], [ClientEvent { primitive: Primitive::UnidataIndication(i), .. }] if i.updu.as_ref() == updu.as_slice())
    );
    let ack = b.poll_transmit(secs(70)).unwrap();
    hear(&ack, 1, &mut a, 0, &[]);
    assert!(matches!(
        &events(&mut a)[..],
        [ClientEvent {
            primitive: Primitive::UnidataRequestConfirm(_),
            ..
        }]
    ));
    assert_eq!(a.counters().retransmissions, 1);
}

#[test]
fn an_ack_rides_on_data_as_a_data_ack() {
    let (mut a, mut b) = pair();
    a.submit(Duration::ZERO, CONN[0], sap(), &request(B, b"to B"), ARQ)
        .unwrap();
    let tx = a.poll_transmit(Duration::ZERO).unwrap();
    hear(&tx, 0, &mut b, 1, &[]);
    events(&mut b);
    // B has data of its own for A: its ACK goes in the first data frame.
    b.submit(secs(5), CONN[1], sap(), &request(A, b"to A"), ARQ)
        .unwrap();
    let answer = b.poll_transmit(secs(10)).unwrap();
    assert_eq!(types(&answer), [2], "one DATA-ACK, no ACK-ONLY");
    assert_eq!(answer.data_acks, 1);
    hear(&answer, 1, &mut a, 0, &[]);
    let got: Vec<Primitive> = events(&mut a).into_iter().map(|e| e.primitive).collect();
    assert!(matches!(got[0], Primitive::UnidataIndication(_)));
    assert!(matches!(got[1], Primitive::UnidataRequestConfirm(_)));
    assert_eq!(got.len(), 2);
}

#[test]
fn an_expedited_unidata_uses_the_expedited_arq_ahead_of_normal_data() {
    let (mut a, mut b) = pair();
    let expedited = SendMode {
        expedited: true,
        ..ARQ
    };
    a.submit(Duration::ZERO, CONN[0], sap(), &request(B, b"routine"), ARQ)
        .unwrap();
    a.submit(
        Duration::ZERO,
        CONN[0],
        sap(),
        &request(B, b"flash"),
        expedited,
    )
    .unwrap();
    let tx = a.poll_transmit(Duration::ZERO).unwrap();
    // EXPEDITED DATA-ONLY first (FSN 0 of its own), then the normal DATA-ONLY.
    assert_eq!(types(&tx), [4, 0]);
    assert_eq!(tx.dpdus[0].fsn, Some(0));
    hear(&tx, 0, &mut b, 1, &[]);
    let got: Vec<Primitive> = events(&mut b).into_iter().map(|e| e.primitive).collect();
    let [
        Primitive::ExpeditedUnidataIndication(x),
        Primitive::UnidataIndication(n),
    ] = &got[..]
    else {
        panic!("expected the expedited indication, then the normal one: {got:?}");
    };
    assert_eq!(x.updu.as_ref(), b"flash");
    assert_eq!(n.updu.as_ref(), b"routine");

    // Both ARQs answer: ACK-ONLY and EXPEDITED ACK-ONLY.
    let acks = b.poll_transmit(secs(20)).unwrap();
    assert_eq!(types(&acks), [1, 5]);
    hear(&acks, 1, &mut a, 0, &[]);
    let got: Vec<Primitive> = events(&mut a).into_iter().map(|e| e.primitive).collect();
    assert_eq!(got.len(), 2);
    assert!(
        got.iter()
            .any(|p| matches!(p, Primitive::ExpeditedUnidataRequestConfirm(c) if c.updu_part.as_ref() == b"flash"))
    );
    assert!(got.iter().any(
        |p| matches!(p, Primitive::UnidataRequestConfirm(c) if c.updu_part.as_ref() == b"routine")
    ));
    assert!(!a.has_work());
}

#[test]
fn a_non_arq_unidata_goes_in_copies_and_is_delivered_once_without_an_ack() {
    let (mut a, mut b) = pair();
    let updu = payload(1500);
    let non_arq = SendMode {
        confirm: false,
        expedited: false,
        non_arq: Some(1),
        in_order: false,
    };
    a.submit(Duration::ZERO, CONN[0], sap(), &request(B, &updu), non_arq)
        .unwrap();
    let tx = a.poll_transmit(Duration::ZERO).unwrap();
    // Two segments, each sent twice (1 + one retransmission).
    assert_eq!(types(&tx), [7, 7, 7, 7]);
    assert!(!tx.sent_data, "nothing answers non-ARQ data");
    assert_eq!(a.counters().non_arq_sent, 1);
    // The first copy of the first segment and the second copy of the second are lost.
    assert!(hear(&tx, 0, &mut b, 1, &[0, 3]));
    let got = events(&mut b);
    let ind = the_indication(&got);
    assert_eq!(ind.tx_mode, TxMode::NonArq);
    assert_eq!(ind.updu.as_ref(), updu.as_slice());
    assert_eq!(b.counters().non_arq_delivered, 1);
    // No ACK owed, nothing left to send, no confirm.
    assert!(!b.has_work());
    assert!(!a.has_work());
    assert!(events(&mut a).is_empty());
}

#[test]
fn an_incomplete_non_arq_unidata_is_dropped_when_its_window_closes() {
    let (mut a, mut b) = pair();
    let non_arq = SendMode {
        confirm: false,
        expedited: false,
        non_arq: Some(0),
        in_order: false,
    };
    a.submit(
        Duration::ZERO,
        CONN[0],
        sap(),
        &request(B, &payload(1500)),
        non_arq,
    )
    .unwrap();
    let tx = a.poll_transmit(Duration::ZERO).unwrap();
    assert_eq!(types(&tx), [7, 7]);
    hear(&tx, 0, &mut b, 1, &[1]);
    assert!(events(&mut b).is_empty());
    // Its reception window reaches the end of the transmission: still open just before.
    b.handle_timeout(tx.dpdus[0].at);
    assert_eq!(b.counters().non_arq_incomplete, 0);
    b.handle_timeout(tx.tx.end + secs(1));
    assert_eq!(b.counters().non_arq_incomplete, 1);
    assert!(events(&mut b).is_empty());
}

/// The C_PDU segment offset of each NON-ARQ DATA D_PDU of `tx`.
fn segment_offsets(tx: &NodeTx) -> Vec<usize> {
    tx.dpdus
        .iter()
        .map(|d| match Dpdu::decode(&d.bytes).unwrap().0.body {
            Body::NonArqData { header, .. } => usize::from(header.segment_offset),
            other => panic!("not NON-ARQ DATA: {other:?}"),
        })
        .collect()
}

#[test]
fn a_client_bound_for_errors_gets_a_damaged_or_incomplete_non_arq_unidata_with_its_blocks() {
    let non_arq = |copies| SendMode {
        confirm: false,
        expedited: false,
        non_arq: Some(copies),
        in_order: false,
    };
    // A 2500-byte U_PDU: a C_PDU of 2504 bytes (1 of C_PDU and 3 of S_PDU header) in
    // segments at 0, 1023 and 2046.
    let updu = payload(2500);
    let run = |with_errors: bool, copies: u8, lost: &[usize], damaged: &[usize]| {
        let (mut a, mut b) = pair();
        b.unbind(CONN[1]);
        assert!(b.bind(sap(), 0, CONN[1], with_errors));
        a.submit(
            Duration::ZERO,
            CONN[0],
            sap(),
            &request(B, &updu),
            non_arq(copies),
        )
        .unwrap();
        let tx = a.poll_transmit(Duration::ZERO).unwrap();
        let offsets = segment_offsets(&tx);
        let at = |offset: usize, copy: usize| {
            offsets
                .iter()
                .enumerate()
                .filter(|&(_, &o)| o == offset)
                .nth(copy)
                .unwrap()
                .0
        };
        // Every copy of a lost segment is lost; only the first of a damaged one is damaged.
        let lost: Vec<usize> = (0..offsets.len())
            .filter(|&i| lost.contains(&offsets[i]))
            .collect();
        let damaged: Vec<usize> = damaged.iter().map(|&o| at(o, 0)).collect();
        hear_damaged(&tx, 0, &mut b, 1, &lost, &damaged);
        let at_once = events(&mut b);
        // The closing of the reception window is a time the node wakes at if it may deliver
        // with errors then.
        let wakes = b.poll_timeout();
        assert!(wakes.is_none_or(|w| w > tx.dpdus[0].at && w <= tx.tx.end + secs(1)));
        b.handle_timeout(tx.tx.end + secs(1));
        (at_once, wakes.is_some(), events(&mut b), b.counters())
    };

    // The middle segment damaged, the last lost: delivered with both blocks listed, in U_PDU
    // offsets; the damaged bytes as received, the missing ones zero, the rest intact.
    let (at_once, wakes, got, c) = run(true, 0, &[2046], &[1023]);
    assert!(at_once.is_empty() && wakes, "{at_once:?}");
    let ind = the_indication(&got);
    assert_eq!(ind.tx_mode, TxMode::NonArqWithErrors);
    assert_eq!(
        ind.errored,
        [Block {
            offset: 1019,
            size: 1023
        }]
    );
    assert_eq!(
        ind.missing,
        [Block {
            offset: 2042,
            size: 458
        }]
    );
    let mut expected = updu.clone();
    expected[1019 + DAMAGED_AT] ^= 0x5A;
    expected[2042..].fill(0);
    assert_eq!(ind.updu.as_ref(), expected.as_slice());
    assert_eq!(
        (
            c.non_arq_with_errors,
            c.non_arq_incomplete,
            c.non_arq_delivered,
            c.delivered
        ),
        (1, 0, 0, 1)
    );

    // Two copies: an intact second copy of the damaged segment replaces it.
    let (_, _, got, _) = run(true, 1, &[2046], &[1023]);
    let ind = the_indication(&got);
    assert!(ind.errored.is_empty(), "{ind:?}");
    assert_eq!(ind.missing.len(), 1, "{ind:?}");
    // Whole and intact: delivered at once as plain non-ARQ, nothing at the window's end.
    let (at_once, wakes, got, c) = run(true, 1, &[], &[1023]);
    assert!(!wakes);
    assert!(
        matches!(&at_once[..], [ClientEvent { primitive: Primitive::UnidataIndication(i), .. }]
        if i.tx_mode == TxMode::NonArq && i.updu.as_ref() == updu.as_slice())
    );
    assert!(got.is_empty(), "{got:?}");
    assert_eq!((c.non_arq_delivered, c.non_arq_with_errors), (1, 0));

    // Without the S_PDU header (the first segment damaged) the client is not known: dropped.
    let (_, wakes, got, c) = run(true, 0, &[], &[0]);
    assert!(!wakes);
    assert!(got.is_empty(), "{got:?}");
    assert_eq!((c.non_arq_with_errors, c.non_arq_incomplete), (0, 1));
    // A client bound for error-free delivery never gets a damaged U_PDU.
    let (_, wakes, got, c) = run(false, 0, &[], &[1023]);
    assert!(!wakes);
    assert!(got.is_empty(), "{got:?}");
    assert_eq!((c.non_arq_with_errors, c.non_arq_incomplete), (0, 1));
}

#[test]
fn non_arq_in_order_holds_a_cpdu_back_behind_an_earlier_one_still_being_received() {
    let run = |in_order: bool, lost: &[usize]| {
        let (mut a, mut b) = pair();
        let mode = SendMode {
            confirm: false,
            expedited: false,
            non_arq: Some(0),
            in_order,
        };
        for k in 0..2u8 {
            let updu = vec![k; 1500];
            a.submit(Duration::ZERO, CONN[0], sap(), &request(B, &updu), mode)
                .unwrap();
        }
        let tx = a.poll_transmit(Duration::ZERO).unwrap();
        // Two U_PDUs of two segments each, flagged as the client asked.
        assert_eq!(types(&tx), [7, 7, 7, 7]);
        assert_eq!(in_order_flags(&tx), [in_order; 4]);
        hear(&tx, 0, &mut b, 1, lost);
        let first = first_bytes(&mut b);
        let wakes = b.poll_timeout().is_some();
        b.handle_timeout(tx.tx.end + secs(1));
        (first, wakes, first_bytes(&mut b), b.counters())
    };
    // The first U_PDU's second segment lost: in order, the second waits until the first's
    // reception window closes (a time the node wakes at), then goes; the first is dropped.
    let (first, wakes, later, c) = run(true, &[1]);
    assert!(first.is_empty() && wakes, "{first:?}");
    assert_eq!(later, [1]);
    assert_eq!((c.non_arq_delivered, c.non_arq_incomplete), (1, 1));
    // As they arrive, it goes at once.
    let (first, wakes, later, _) = run(false, &[1]);
    assert_eq!((first, wakes, later), (vec![1], false, vec![]));
    // Nothing lost: both at once, in order, either way.
    for in_order in [true, false] {
        let (first, wakes, later, _) = run(in_order, &[]);
        assert_eq!((first, wakes, later), (vec![0, 1], false, vec![]));
    }
}

/// ARQ honours the client's delivery order too (Annex C, C.3.3 (7) and (8)): two U_PDUs of
/// two segments each, the first's second segment lost. Sent AS-THEY-ARRIVE, the second goes
/// up at once and the first after its retransmission; sent IN-ORDER, the second waits for
/// the first. Either way each goes up once.
#[test]
fn arq_as_they_arrive_delivers_a_whole_updu_ahead_of_an_earlier_incomplete_one() {
    for in_order in [false, true] {
        let (mut a, mut b) = pair();
        let mode = SendMode { in_order, ..ARQ };
        for k in 0..2u8 {
            a.submit(
                Duration::ZERO,
                CONN[0],
                sap(),
                &request(B, &[k; 1500]),
                mode,
            )
            .unwrap();
        }
        let tx = a.poll_transmit(Duration::ZERO).unwrap();
        assert_eq!(types(&tx), [0, 0, 0, 0]);
        assert_eq!(in_order_flags(&tx), [in_order; 4]);
        hear(&tx, 0, &mut b, 1, &[1]);
        let first = first_bytes(&mut b);
        let ack = b.poll_transmit(secs(30)).unwrap();
        hear(&ack, 1, &mut a, 0, &[]);
        let again = a.poll_transmit(secs(40)).unwrap();
        assert_eq!((types(&again), again.retransmissions), (vec![0], 1));
        hear(&again, 0, &mut b, 1, &[]);
        let later = first_bytes(&mut b);
        if in_order {
            assert_eq!((first, later), (vec![], vec![0, 1]));
        } else {
            assert_eq!((first, later), (vec![1], vec![0]));
        }
    }
}

#[test]
fn a_group_gets_non_arq_data_and_refuses_arq() {
    let mut config = node_config(vec![addr(A), addr(B), addr(C)]);
    let group = NodeAddress::group(0x0ABC).unwrap();
    config.groups.push(Group {
        address: group,
        members: vec![1, 2],
    });
    let mut v = nodes(config);
    let to_group = UnidataRequest {
        dest: group,
        ..request(A, b"to the fleet")
    };
    // ARQ needs one peer to acknowledge: refused.
    assert_eq!(
        v[0].submit(Duration::ZERO, CONN[0], sap(), &to_group, ARQ),
        Err(UnidataRejectReason::TxModeNotSpecified)
    );
    let non_arq = SendMode {
        confirm: true,
        expedited: false,
        non_arq: Some(0),
        in_order: false,
    };
    v[0].submit(Duration::ZERO, CONN[0], sap(), &to_group, non_arq)
        .unwrap();
    let tx = v[0].poll_transmit(Duration::ZERO).unwrap();
    assert_eq!(types(&tx), [7]);
    assert_eq!(tx.dpdus[0].dest, 3, "the group, past the three nodes");
    for member in [1, 2] {
        assert!(hear(&tx, 0, &mut v[member], member, &[]));
        let got = events(&mut v[member]);
        let [
            ClientEvent {
                conn,
                primitive: Primitive::UnidataIndication(ind),
            },
        ] = &got[..]
        else {
            panic!("expected one indication at node {member}: {got:?}");
        };
        assert_eq!(*conn, CONN[member]);
        assert_eq!((ind.dest, ind.src), (group, addr(A)));
    }
    // A group gets no confirm (nobody acknowledges), even when one was asked for.
    assert!(events(&mut v[0]).is_empty());
}

#[test]
fn a_unidata_for_an_unbound_sap_is_rejected_not_confirmed() {
    let (mut a, mut b) = pair();
    b.unbind(CONN[1]);
    a.submit(Duration::ZERO, CONN[0], sap(), &request(B, b"nobody"), ARQ)
        .unwrap();
    let tx = a.poll_transmit(Duration::ZERO).unwrap();
    hear(&tx, 0, &mut b, 1, &[]);
    assert!(events(&mut b).is_empty());
    // B answers with its ACK and a DATA DELIVERY FAIL riding on a DATA-ACK.
    let answer = b.poll_transmit(secs(20)).unwrap();
    assert_eq!(types(&answer), [2]);
    hear(&answer, 1, &mut a, 0, &[]);
    let got = events(&mut a);
    let [
        ClientEvent {
            primitive: Primitive::UnidataRequestRejected(r),
            ..
        },
    ] = &got[..]
    else {
        panic!("expected one rejection: {got:?}");
    };
    assert_eq!(r.reason, UnidataRejectReason::DestinationSapNotBound);
}

#[test]
fn flow_control_turns_off_past_the_limit_and_on_at_half() {
    let mut config = node_config(vec![addr(A), addr(B)]);
    config.flow_limit = 2;
    let mut v = nodes(config);
    let mut b = v.pop().unwrap();
    let mut a = v.pop().unwrap();
    for i in 0..3u8 {
        a.submit(Duration::ZERO, CONN[0], sap(), &request(B, &[i; 10]), ARQ)
            .unwrap();
    }
    assert_eq!(
        events(&mut a),
        [ClientEvent {
            conn: CONN[0],
            primitive: Primitive::DataFlowOff
        }]
    );
    let tx = a.poll_transmit(Duration::ZERO).unwrap();
    assert_eq!(types(&tx), [0, 0, 0]);
    hear(&tx, 0, &mut b, 1, &[]);
    let ack = b.poll_transmit(secs(10)).unwrap();
    hear(&ack, 1, &mut a, 0, &[]);
    let got: Vec<Primitive> = events(&mut a).into_iter().map(|e| e.primitive).collect();
    assert_eq!(got.len(), 4, "three confirms and flow on: {got:?}");
    assert_eq!(
        got.iter()
            .filter(|p| matches!(p, Primitive::DataFlowOn))
            .count(),
        1
    );
}

#[test]
fn a_unidata_whose_ttl_runs_out_in_the_queue_is_rejected() {
    let (mut a, _) = pair();
    let req = UnidataRequest {
        ttl: Ttl::from_secs(10).unwrap(),
        ..request(B, b"late")
    };
    a.submit(secs(5), CONN[0], sap(), &req, ARQ).unwrap();
    assert_eq!(a.poll_timeout(), Some(secs(15)));
    a.handle_timeout(secs(14));
    assert!(events(&mut a).is_empty());
    a.handle_timeout(secs(15));
    let got = events(&mut a);
    assert!(matches!(
        &got[..],
        [ClientEvent { primitive: Primitive::UnidataRequestRejected(r), .. }] if r.reason == UnidataRejectReason::TtlExpired
    ));
    assert_eq!(a.counters().expired, 1);
    assert!(!a.has_work());
    assert_eq!(a.poll_timeout(), None);
}

/// Annex A, A.2.1.6: a U_PDU submitted with TTL 0 gets the subnetwork's default maximum TTL,
/// where one is configured, and expires as one with its own TTL would; one with its own TTL
/// keeps it. Without a default it never expires.
#[test]
fn a_unidata_with_ttl_zero_gets_the_default_maximum_ttl() {
    for default_ttl in [Some(secs(30)), None] {
        let mut config = node_config(vec![addr(A), addr(B)]);
        config.default_ttl = default_ttl;
        let mut v = nodes(config);
        let a = &mut v[0];
        a.submit(secs(5), CONN[0], sap(), &request(B, b"ttl 0"), ARQ)
            .unwrap();
        let own = UnidataRequest {
            ttl: Ttl::from_secs(60).unwrap(),
            ..request(B, b"ttl 60")
        };
        a.submit(secs(5), CONN[0], sap(), &own, ARQ).unwrap();
        match default_ttl {
            Some(_) => {
                assert_eq!(a.poll_timeout(), Some(secs(35)));
                a.handle_timeout(secs(35));
                assert_eq!(
                    rejections(&events(a)),
                    [(UnidataRejectReason::TtlExpired, b"ttl 0".to_vec())]
                );
                assert_eq!(a.poll_timeout(), Some(secs(65)));
            }
            None => assert_eq!(a.poll_timeout(), Some(secs(65))),
        }
        a.handle_timeout(secs(65));
        let expired = rejections(&events(a));
        assert_eq!(
            expired,
            [(UnidataRejectReason::TtlExpired, b"ttl 60".to_vec())]
        );
        assert_eq!(a.has_work(), default_ttl.is_none(), "the TTL 0 one is left");
    }
}

/// Annex A, A.3.1.1: a U_PDU with a TTL travels in a DATA S_PDU with VALID TTD (two bytes
/// more), and the receiving node discards one that arrives whole after that time, though it
/// went on the air before it (the sender cannot call a transmission back); its frames are
/// acknowledged all the same. One with a longer TTL is delivered; one without a TTL carries
/// no TTD.
#[test]
fn a_unidata_arriving_after_its_time_to_die_is_discarded() {
    // (S_PCI byte 2 of the first D_PDU, the U_PDU's C_PDU bytes in it, its last D_PDU's
    // arrival, the U_PDUs B's client got, B's discards) for a 2000-byte U_PDU with `ttl`.
    let run = |ttl: Ttl| {
        let (mut a, mut b) = pair();
        let updu = payload(2000);
        let req = UnidataRequest {
            ttl,
            ..request(B, &updu)
        };
        a.submit(Duration::ZERO, CONN[0], sap(), &req, ARQ).unwrap();
        let tx = a.poll_transmit(Duration::ZERO).unwrap();
        assert_eq!(types(&tx), [0, 0]);
        let segments: Vec<Vec<u8>> = tx
            .dpdus
            .iter()
            .map(|d| match Dpdu::decode(&d.bytes).unwrap().0.body {
                Body::DataOnly { segment, .. } => segment,
                other => panic!("expected DATA-ONLY, got {other:?}"),
            })
            .collect();
        let last = tx.dpdus.last().unwrap().at;
        assert!(hear(&tx, 0, &mut b, 1, &[]));
        let got = events(&mut b);
        // The frames are acknowledged whether the U_PDU was delivered or not.
        let ack = b.poll_transmit(tx.tx.peer_may_transmit_at()).unwrap();
        assert_eq!(types(&ack), [1]);
        let flags = segments[0][3];
        let len: usize = segments.iter().map(Vec::len).sum();
        (
            flags,
            len,
            last,
            delivered(&got, &updu),
            b.counters().expired_on_arrival,
        )
    };
    // The second D_PDU is decoded after 4 s.
    let (flags, len, last, got, discarded) = run(Ttl::from_secs(4).unwrap());
    assert!(last > secs(4), "{last:?}");
    assert_eq!(flags & 0x40, 0x40, "VALID TTD");
    assert_eq!(len, 2000 + super::UPDU_OVERHEAD + super::TTD_BYTES);
    assert_eq!((got, discarded), (false, 1));
    let (flags, _, _, got, discarded) = run(Ttl::from_secs(60).unwrap());
    assert_eq!((flags & 0x40, got, discarded), (0x40, true, 0));
    let (flags, len, _, got, discarded) = run(Ttl::INFINITE);
    assert_eq!(flags & 0x40, 0, "no TTD without a TTL");
    assert_eq!(len, 2000 + super::UPDU_OVERHEAD);
    assert_eq!((got, discarded), (true, 0));
}

/// Annex A, A.3.2.4 (12)-(15): a node that waits a configurable time for a node delivery
/// confirmation tells the client "destination node not responding" when it runs out, once,
/// and nothing more of that U_PDU: not the confirm when its ACK comes later, though the
/// U_PDU went on and was delivered. A U_PDU whose client asked for no confirm is not
/// answered; a zero wait is refused.
#[test]
fn a_confirm_that_does_not_come_in_time_is_answered_not_responding() {
    let mut config = node_config(vec![addr(A), addr(B)]);
    config.confirm_wait = Some(secs(20));
    let mut v = nodes(config.clone());
    let (a, b) = v.split_at_mut(1);
    let (a, b) = (&mut a[0], &mut b[0]);
    a.submit(Duration::ZERO, CONN[0], sap(), &request(B, b"waits"), ARQ)
        .unwrap();
    let quiet = SendMode {
        confirm: false,
        ..ARQ
    };
    a.submit(
        Duration::ZERO,
        CONN[0],
        sap(),
        &request(B, b"asks nothing"),
        quiet,
    )
    .unwrap();
    let tx = a.poll_transmit(Duration::ZERO).unwrap();
    assert!(hear(&tx, 0, b, 1, &[]));
    let got = events(b);
    assert!(delivered(&got, b"waits") && delivered(&got, b"asks nothing"));
    // The ACK is lost; the wait runs out.
    b.poll_transmit(tx.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(a.poll_timeout(), Some(secs(20)));
    a.handle_timeout(secs(20));
    assert_eq!(
        rejections(&events(a)),
        [(
            UnidataRejectReason::DestinationNodeNotResponding,
            b"waits".to_vec()
        )]
    );
    assert_eq!(a.counters().confirms_overdue, 1);
    assert_eq!(a.poll_timeout(), None, "answered once");
    // Still in the ARQ: sent again, acknowledged, and no confirm follows the rejection.
    let again = a.poll_transmit(secs(30)).unwrap();
    assert_eq!(types(&again), [0, 0]);
    assert!(hear(&again, 0, b, 1, &[]));
    assert!(events(b).is_empty(), "delivered once");
    let ack = b.poll_transmit(again.tx.peer_may_transmit_at()).unwrap();
    assert!(hear(&ack, 1, a, 0, &[]));
    assert!(events(a).is_empty());
    assert!(!a.has_work());
    config.confirm_wait = Some(Duration::ZERO);
    assert!(matches!(
        NodeSetup::new(config),
        Err(super::NodeError::ZeroConfirmWait)
    ));
}

/// The client primitives of `events` that are rejections, as (reason, U_PDU bytes).
fn rejections(events: &[ClientEvent]) -> Vec<(UnidataRejectReason, Vec<u8>)> {
    events
        .iter()
        .filter_map(|e| match &e.primitive {
            Primitive::UnidataRequestRejected(r) => Some((r.reason, r.updu_part.to_vec())),
            _ => None,
        })
        .collect()
}

/// The U_PDUs among the indications of `events`.
fn indications(events: &[ClientEvent]) -> Vec<Vec<u8>> {
    events
        .iter()
        .filter_map(|e| match &e.primitive {
            Primitive::UnidataIndication(i) => Some(i.updu.to_vec()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_unidata_whose_ttl_runs_out_in_the_arq_is_dropped_on_both_sides_and_rejected() {
    let (mut a, mut b) = pair();
    // Two segments (2000 + 4 bytes), with a TTL of 60 s; then a second U_PDU without one.
    let late = payload(2000);
    let req = UnidataRequest {
        ttl: Ttl::from_secs(60).unwrap(),
        ..request(B, &late)
    };
    a.submit(Duration::ZERO, CONN[0], sap(), &req, ARQ).unwrap();
    a.submit(Duration::ZERO, CONN[0], sap(), &request(B, b"after"), ARQ)
        .unwrap();
    let tx = a.poll_transmit(Duration::ZERO).unwrap();
    assert_eq!(types(&tx), [0, 0, 0]);
    // The second segment of the first U_PDU is lost: B holds its first segment and the
    // second U_PDU (FSN 2), which in-order delivery keeps behind the gap.
    hear(&tx, 0, &mut b, 1, &[1]);
    assert!(events(&mut b).is_empty());
    hear(&b.poll_transmit(secs(30)).unwrap(), 1, &mut a, 0, &[]);
    // The selective ACK covers all of "after" (node delivery confirmation is the ARQ's),
    // not the first U_PDU.
    let got = events(&mut a);
    assert!(matches!(
        &got[..],
        [ClientEvent { primitive: Primitive::UnidataRequestConfirm(c), .. }] if c.updu_part.as_ref() == b"after"
    ));
    // The TTL is a timer of the node even once the U_PDU is in the ARQ.
    assert_eq!(a.poll_timeout(), Some(secs(60)));
    a.handle_timeout(secs(59));
    assert!(events(&mut a).is_empty());
    a.handle_timeout(secs(60));
    assert_eq!(
        rejections(&events(&mut a)),
        [(UnidataRejectReason::TtlExpired, late.clone())]
    );
    assert_eq!((a.counters().expired_in_arq, a.counters().expired), (1, 0));
    assert_eq!(a.poll_timeout(), None);
    // Its missing frame goes again, with DROP C_PDU and no data, so that B need not wait.
    assert!(a.has_work());
    let drop = a.poll_transmit(secs(70)).unwrap();
    assert_eq!(types(&drop), [0]);
    assert_eq!(drop.dpdus[0].fsn, Some(1));
    let (d, _) = Dpdu::decode(&drop.dpdus[0].bytes).unwrap();
    let Body::DataOnly { header, segment } = d.body else {
        panic!("expected a DATA-ONLY: {d:?}");
    };
    assert!(header.drop && segment.is_empty());
    // B throws away what it had of the dropped U_PDU and delivers the one behind it.
    hear(&drop, 0, &mut b, 1, &[]);
    assert_eq!(indications(&events(&mut b)), [b"after".to_vec()]);
    assert_eq!(b.counters().cpdus_dropped, 1);
    assert_eq!(b.counters().delivered, 1);
    // The DROP frame is acknowledged like any other, and confirms nothing.
    hear(&b.poll_transmit(secs(100)).unwrap(), 1, &mut a, 0, &[]);
    assert!(events(&mut a).is_empty());
    assert!(!a.has_work());
}

#[test]
fn an_expedited_unidata_whose_ttl_runs_out_in_the_arq_is_abandoned_and_rejected() {
    let (mut a, mut b) = pair();
    let req = UnidataRequest {
        ttl: Ttl::from_secs(20).unwrap(),
        ..request(B, b"flash")
    };
    let expedited = SendMode {
        expedited: true,
        ..ARQ
    };
    a.submit(Duration::ZERO, CONN[0], sap(), &req, expedited)
        .unwrap();
    let tx = a.poll_transmit(Duration::ZERO).unwrap();
    assert_eq!(types(&tx), [4]);
    // Lost; then the TTL runs out: rejected, and nothing more goes out for it.
    a.handle_timeout(secs(20));
    let got = events(&mut a);
    assert!(matches!(
        &got[..],
        [ClientEvent { primitive: Primitive::ExpeditedUnidataRequestRejected(r), .. }] if r.reason == UnidataRejectReason::TtlExpired
    ));
    assert_eq!(a.counters().expired_in_arq, 1);
    assert!(!a.has_work());
    // The next expedited U_PDU gets through (a new C_PDU ID).
    a.submit(secs(30), CONN[0], sap(), &request(B, b"next"), expedited)
        .unwrap();
    let tx = a.poll_transmit(secs(30)).unwrap();
    hear(&tx, 0, &mut b, 1, &[]);
    let got = events(&mut b);
    assert!(matches!(
        &got[..],
        [ClientEvent { primitive: Primitive::ExpeditedUnidataIndication(i), .. }] if i.updu.as_ref() == b"next"
    ));
}

#[test]
fn a_silent_peer_makes_the_link_lost_and_it_recovers_when_the_peer_comes_back() {
    let (mut a, mut b) = pair();
    // One U_PDU through, so that B's receive window is no longer at 0.
    a.submit(Duration::ZERO, CONN[0], sap(), &request(B, b"one"), ARQ)
        .unwrap();
    hear(&a.poll_transmit(Duration::ZERO).unwrap(), 0, &mut b, 1, &[]);
    hear(&b.poll_transmit(secs(10)).unwrap(), 1, &mut a, 0, &[]);
    events(&mut a);
    events(&mut b);
    // B goes silent: from now on it receives nothing, so it answers nothing.
    a.submit(secs(20), CONN[0], sap(), &request(B, b"two"), ARQ)
        .unwrap();
    a.submit(secs(20), CONN[0], sap(), &request(B, b"three"), ARQ)
        .unwrap();
    let mut t = secs(20);
    // The first transmission and DEFAULT_LINK_RETRIES (10) retries go out.
    for k in 0..=super::DEFAULT_LINK_RETRIES {
        let tx = a.poll_transmit(t).unwrap();
        assert_eq!(types(&tx), [0, 0], "transmission {k}");
        assert_eq!(tx.dpdus[0].retransmission, k > 0);
        assert!(a.poll_link_event().is_none());
        t += secs(30);
    }
    // The next would be one retry too many: the link is declared lost instead.
    assert!(a.has_work());
    assert!(a.poll_transmit(t).is_none(), "nothing else to send");
    assert_eq!(
        a.poll_link_event(),
        Some(LinkEvent::Lost {
            peer: 1,
            at: t,
            discarded: 2
        })
    );
    let reason = UnidataRejectReason::DestinationNodeNotResponding;
    assert_eq!(
        rejections(&events(&mut a)),
        [(reason, b"two".to_vec()), (reason, b"three".to_vec())]
    );
    assert_eq!(
        (a.counters().links_lost, a.counters().link_lost_updus),
        (1, 2)
    );
    assert!(!a.has_work(), "no retrying for ever");

    // B comes back. New data for it waits behind a RESET/WIN-RESYNC to FSN 0.
    t += secs(600);
    a.submit(t, CONN[0], sap(), &request(B, b"four"), ARQ)
        .unwrap();
    let reset = a.poll_transmit(t).unwrap();
    assert_eq!(types(&reset), [3], "the command alone, no data meanwhile");
    hear(&reset, 0, &mut b, 1, &[]);
    let ack = b.poll_transmit(t + secs(10)).unwrap();
    assert_eq!(types(&ack), [3]);
    hear(&ack, 1, &mut a, 0, &[]);
    assert_eq!(
        a.poll_link_event(),
        Some(LinkEvent::Regained {
            peer: 1,
            at: ack.dpdus[0].at
        })
    );
    let tx = a.poll_transmit(t + secs(20)).unwrap();
    assert_eq!(types(&tx), [0]);
    assert_eq!(tx.dpdus[0].fsn, Some(0));
    hear(&tx, 0, &mut b, 1, &[]);
    assert_eq!(indications(&events(&mut b)), [b"four".to_vec()]);
    hear(&b.poll_transmit(t + secs(30)).unwrap(), 1, &mut a, 0, &[]);
    assert!(matches!(
        &events(&mut a)[..],
        [ClientEvent { primitive: Primitive::UnidataRequestConfirm(c), .. }] if c.updu_part.as_ref() == b"four"
    ));
    assert!(!a.has_work());
}

#[test]
fn a_peer_that_answers_now_and_then_keeps_the_link_and_none_never_gives_up() {
    // An answer between unanswered transmissions starts the count again.
    let (mut a, mut b) = pair();
    a.submit(
        Duration::ZERO,
        CONN[0],
        sap(),
        &request(B, &payload(2000)),
        ARQ,
    )
    .unwrap();
    let mut t = Duration::ZERO;
    for round in 0..22 {
        let tx = a.poll_transmit(t).unwrap();
        t += secs(30);
        if round % 11 == 10 {
            // Every eleventh transmission B hears one frame of, and answers.
            hear(&tx, 0, &mut b, 1, &[1]);
            hear(&b.poll_transmit(t).unwrap(), 1, &mut a, 0, &[]);
            t += secs(30);
        }
    }
    // Two answers, one frame each: all through, never declared lost.
    assert_eq!(a.counters().links_lost, 0);
    assert!(a.poll_link_event().is_none());
    assert!(!a.has_work());
    assert_eq!(b.counters().delivered, 1);
    // With link loss off, a silent peer is retried for ever.
    let mut config = node_config(vec![addr(A), addr(B)]);
    config.link_retries = None;
    let mut v = nodes(config);
    let mut a = v.swap_remove(0);
    a.submit(Duration::ZERO, CONN[0], sap(), &request(B, b"x"), ARQ)
        .unwrap();
    for k in 0..40 {
        assert!(a.poll_transmit(secs(30 * k)).is_some());
    }
    assert_eq!(a.counters().links_lost, 0);
}

#[test]
fn an_ack_lost_in_a_collision_is_owed_again() {
    let (mut a, mut b) = pair();
    a.submit(Duration::ZERO, CONN[0], sap(), &request(B, b"x"), ARQ)
        .unwrap();
    let tx = a.poll_transmit(Duration::ZERO).unwrap();
    hear(&tx, 0, &mut b, 1, &[]);
    let ack = b.poll_transmit(secs(10)).unwrap();
    assert!(!b.has_work());
    b.transmission_collided(&ack);
    assert!(b.has_work());
    assert_eq!(b.counters().collisions, 1);
    assert_eq!(types(&b.poll_transmit(secs(20)).unwrap()), [1]);
}

#[test]
fn a_peer_that_lost_its_receive_state_is_resynchronised_by_reset() {
    let (mut a, mut b) = pair();
    // One U_PDU through, acknowledged: A's TX window now starts at FSN 1.
    a.submit(Duration::ZERO, CONN[0], sap(), &request(B, b"one"), ARQ)
        .unwrap();
    let tx = a.poll_transmit(Duration::ZERO).unwrap();
    hear(&tx, 0, &mut b, 1, &[]);
    hear(&b.poll_transmit(secs(10)).unwrap(), 1, &mut a, 0, &[]);
    events(&mut a);
    events(&mut b);
    // B restarts: its RX window is back at 0, so its ACKs fall outside A's window.
    assert!(b.forget_arq_receive_state(0));
    assert!(!b.forget_arq_receive_state(5));
    a.submit(secs(20), CONN[0], sap(), &request(B, b"two"), ARQ)
        .unwrap();
    let mut t = secs(20);
    let mut reset_sent = None;
    for _ in 0..6 {
        let tx = a.poll_transmit(t).unwrap();
        if types(&tx).contains(&3) {
            reset_sent = Some(tx);
            break;
        }
        hear(&tx, 0, &mut b, 1, &[]);
        t += secs(10);
        hear(&b.poll_transmit(t).unwrap(), 1, &mut a, 0, &[]);
        t += secs(10);
    }
    let reset = reset_sent.expect("A resets the window");
    assert_eq!(types(&reset), [3], "the command alone, no data meanwhile");
    assert_eq!(a.counters().resets, 1);
    // "two" had gone on the air: its fate is unknown, so it is rejected, never sent again.
    assert_eq!(a.counters().reset_lost, 1);
    let got = events(&mut a);
    assert!(got.iter().any(|e| matches!(
        &e.primitive,
        Primitive::UnidataRequestRejected(r) if r.reason == UnidataRejectReason::DestinationNodeNotResponding
    )));
    // B answers RESET ACK; then data flows again from FSN 0.
    hear(&reset, 0, &mut b, 1, &[]);
    let answer = b.poll_transmit(t + secs(10)).unwrap();
    assert_eq!(types(&answer), [3]);
    hear(&answer, 1, &mut a, 0, &[]);
    a.submit(t + secs(20), CONN[0], sap(), &request(B, b"three"), ARQ)
        .unwrap();
    let tx = a.poll_transmit(t + secs(20)).unwrap();
    assert_eq!(types(&tx), [0]);
    assert_eq!(tx.dpdus[0].fsn, Some(0));
    hear(&tx, 0, &mut b, 1, &[]);
    assert!(events(&mut b).iter().any(|e| matches!(
        &e.primitive,
        Primitive::UnidataIndication(i) if i.updu.as_ref() == b"three"
    )));
}

/// The RESET/WIN-RESYNC D_PDUs of `tx`.
fn resets_in(tx: &NodeTx) -> Vec<crate::dpdu::Reset> {
    tx.dpdus
        .iter()
        .filter_map(|d| match Dpdu::decode(&d.bytes) {
            Ok((
                Dpdu {
                    body: Body::ResetWinResync(r),
                    ..
                },
                _,
            )) => Some(r),
            _ => None,
        })
        .collect()
}

/// Whether `node`'s client got `updu` delivered, among `got`.
fn delivered(got: &[ClientEvent], updu: &[u8]) -> bool {
    got.iter()
        .any(|e| matches!(&e.primitive, Primitive::UnidataIndication(i) if i.updu.as_ref() == updu))
}

/// Whether a rejection "destination node not responding" is among `got`.
fn rejected_not_responding(got: &[ClientEvent]) -> bool {
    got.iter().any(|e| {
        matches!(
            &e.primitive,
            Primitive::UnidataRequestRejected(r)
                if r.reason == UnidataRejectReason::DestinationNodeNotResponding
        )
    })
}

/// A → B and B → A, one U_PDU each way through and acknowledged: both windows of both nodes
/// at FSN 1. Returns the time reached.
fn both_windows_moved(a: &mut Node, b: &mut Node) -> Duration {
    a.submit(Duration::ZERO, CONN[0], sap(), &request(B, b"a1"), ARQ)
        .unwrap();
    hear(&a.poll_transmit(Duration::ZERO).unwrap(), 0, b, 1, &[]);
    b.submit(secs(5), CONN[1], sap(), &request(A, b"b1"), ARQ)
        .unwrap();
    hear(&b.poll_transmit(secs(10)).unwrap(), 1, a, 0, &[]);
    hear(&a.poll_transmit(secs(20)).unwrap(), 0, b, 1, &[]);
    assert!(!a.has_work() && !b.has_work());
    assert!(delivered(&events(a), b"b1") && delivered(&events(b), b"a1"));
    secs(30)
}

#[test]
fn a_restarted_node_full_resets_its_peer_before_its_first_data() {
    let (mut a, mut b) = pair();
    let mut t = both_windows_moved(&mut a, &mut b);
    // B has a U_PDU on the air to A that A never hears.
    b.submit(t, CONN[1], sap(), &request(A, b"b2"), ARQ)
        .unwrap();
    let _unheard = b.poll_transmit(t).unwrap();
    t += secs(10);
    // A restarts: bindings, queues, windows gone; its client binds again and sends.
    a.restart(t).unwrap();
    assert_eq!(a.counters().restarts, 1);
    assert!(!a.has_work());
    assert!(a.bind(sap(), 0, CONN[0], false));
    a.submit(t, CONN[0], sap(), &request(B, b"a2"), ARQ)
        .unwrap();
    let reset = a.poll_transmit(t).unwrap();
    assert_eq!(
        types(&reset),
        [3],
        "the FULL RESET alone, no data before its RESET ACK"
    );
    let rs = resets_in(&reset);
    assert!(rs[0].full_reset && !rs[0].reset_rx_win_command, "{rs:?}");
    assert_eq!((a.counters().resets, a.counters().full_resets), (1, 1));
    // B obeys: "b2", on the air, may or may not have arrived: rejected, never sent again.
    hear(&reset, 0, &mut b, 1, &[]);
    assert_eq!(b.counters().full_resets_obeyed, 1);
    assert_eq!(b.counters().reset_lost, 1);
    assert!(rejected_not_responding(&events(&mut b)));
    t += secs(10);
    let answer = b.poll_transmit(t).unwrap();
    assert_eq!(types(&answer), [3]);
    assert!(resets_in(&answer)[0].reset_ack);
    hear(&answer, 1, &mut a, 0, &[]);
    // Both machines start again at FSN 0, each way.
    t += secs(10);
    let data = a.poll_transmit(t).unwrap();
    assert_eq!((types(&data), data.dpdus[0].fsn), (vec![0], Some(0)));
    hear(&data, 0, &mut b, 1, &[]);
    assert!(delivered(&events(&mut b), b"a2"));
    b.submit(t, CONN[1], sap(), &request(A, b"b3"), ARQ)
        .unwrap();
    t += secs(10);
    let back = b.poll_transmit(t).unwrap();
    assert_eq!(
        back.dpdus
            .iter()
            .find(|d| d.dpdu_type == 2)
            .and_then(|d| d.fsn),
        Some(0)
    );
    hear(&back, 1, &mut a, 0, &[]);
    assert!(delivered(&events(&mut a), b"b3"));
    // Each side acknowledges the other: nothing left to do.
    hear(&a.poll_transmit(t + secs(10)).unwrap(), 0, &mut b, 1, &[]);
    assert!(!a.has_work() && !b.has_work());
    assert_eq!(a.counters().delivered, 2, "b1 before the restart, b3 after");
}

#[test]
fn a_restarted_node_answers_data_with_a_full_reset_and_a_copy_is_obeyed_again() {
    let (mut a, mut b) = pair();
    let mut t = both_windows_moved(&mut a, &mut b);
    a.restart(t).unwrap();
    assert!(a.bind(sap(), 0, CONN[0], false));
    // B sends on from FSN 1; A, back at 0, discards it unanswered and resets B first.
    b.submit(t, CONN[1], sap(), &request(A, b"b2"), ARQ)
        .unwrap();
    hear(&b.poll_transmit(t).unwrap(), 1, &mut a, 0, &[]);
    assert!(events(&mut a).is_empty());
    t += secs(10);
    let reset = a.poll_transmit(t).unwrap();
    assert_eq!(
        types(&reset),
        [3],
        "no ACK of B's data, only the FULL RESET"
    );
    assert!(resets_in(&reset)[0].full_reset);
    hear(&reset, 0, &mut b, 1, &[]);
    assert!(
        rejected_not_responding(&events(&mut b)),
        "b2 was on the air"
    );
    b.submit(t, CONN[1], sap(), &request(A, b"b3"), ARQ)
        .unwrap();
    t += secs(10);
    // B's RESET ACK and "b3" from FSN 0 are lost on the way: A sends the command again.
    let lost = b.poll_transmit(t).unwrap();
    assert!(types(&lost).contains(&3) && lost.dpdus.iter().any(|d| d.fsn == Some(0)));
    t += secs(10);
    let again = a.poll_transmit(t).unwrap();
    assert_eq!(types(&again), [3]);
    assert_eq!(
        resets_in(&again)[0].reset_frame_id,
        resets_in(&reset)[0].reset_frame_id
    );
    hear(&again, 0, &mut b, 1, &[]);
    // Obeyed again: B cannot tell a copy from a second restart's command (whose IDs start
    // again at the same value), and taking one for a copy could deliver twice what A had
    // before it went down. So "b3", on the air, is rejected as "b2" was, never sent again:
    // A threw it away, waiting for the RESET ACK, so it is rejected, not lost unreported.
    assert_eq!(b.counters().full_resets_obeyed, 2);
    assert!(
        rejected_not_responding(&events(&mut b)),
        "b3 was on the air"
    );
    t += secs(10);
    let answer = b.poll_transmit(t).unwrap();
    assert_eq!(types(&answer), [3]);
    assert!(resets_in(&answer)[0].reset_ack);
    hear(&answer, 1, &mut a, 0, &[]);
    // Then data flows from FSN 0 both ways.
    b.submit(t, CONN[1], sap(), &request(A, b"b4"), ARQ)
        .unwrap();
    let data = b.poll_transmit(t + secs(10)).unwrap();
    assert_eq!((types(&data), data.dpdus[0].fsn), (vec![0], Some(0)));
    hear(&data, 1, &mut a, 0, &[]);
    assert!(delivered(&events(&mut a), b"b4"));
    hear(&a.poll_transmit(t + secs(20)).unwrap(), 0, &mut b, 1, &[]);
    assert!(!a.has_work() && !b.has_work());
    assert_eq!(b.counters().reset_lost, 2, "b2 and b3");
}

#[test]
fn a_reset_tx_win_request_is_answered_by_a_reset_of_the_transmit_window() {
    let (mut a, mut b) = pair();
    let t = both_windows_moved(&mut a, &mut b);
    // A real peer (no emulated node sends it) asks A to realign its transmit window, with
    // "a2" on the air and unacknowledged.
    a.submit(t, CONN[0], sap(), &request(B, b"a2"), ARQ)
        .unwrap();
    let _unheard = a.poll_transmit(t).unwrap();
    let rq = Dpdu::new(
        crate::dpdu::Address::new(B).unwrap(),
        crate::dpdu::Address::new(A).unwrap(),
        Body::ResetWinResync(crate::dpdu::Reset {
            reset_tx_win_request: true,
            reset_frame_id: 7,
            ..crate::dpdu::Reset::default()
        }),
    );
    let bytes = rq.encode().unwrap();
    for _ in 0..2 {
        // Asked twice (its answer lost, say): one reset.
        a.receive_dpdus(1, vec![(t, bytes.clone())]);
    }
    assert_eq!((a.counters().resets, a.counters().reset_lost), (1, 1));
    assert!(
        rejected_not_responding(&events(&mut a)),
        "a2 was on the air"
    );
    let command = a.poll_transmit(t + secs(10)).unwrap();
    let rs = resets_in(&command);
    assert_eq!(types(&command), [3], "the command alone, no data meanwhile");
    assert!(rs[0].reset_rx_win_command && rs[0].new_rx_lwe == 0 && !rs[0].full_reset);
    // B obeys and answers; then A's data goes from FSN 0.
    hear(&command, 0, &mut b, 1, &[]);
    hear(&b.poll_transmit(t + secs(20)).unwrap(), 1, &mut a, 0, &[]);
    a.submit(t + secs(30), CONN[0], sap(), &request(B, b"a3"), ARQ)
        .unwrap();
    let data = a.poll_transmit(t + secs(30)).unwrap();
    assert_eq!((types(&data), data.dpdus[0].fsn), (vec![0], Some(0)));
    hear(&data, 0, &mut b, 1, &[]);
    assert!(delivered(&events(&mut b), b"a3"));
}

#[test]
fn a_receive_window_out_of_step_asks_the_peer_to_realign_its_transmit_window() {
    let (mut a, mut b) = pair();
    let t = both_windows_moved(&mut a, &mut b);
    // B's receive window for A falls back to FSN 0 (its state went astray without a restart),
    // while A counts frame 0 as acknowledged: A's next frame, FSN 1, is its TX LWE, ahead of
    // B's RX LWE. Read against B's window it would wait behind a gap that never fills.
    assert!(b.forget_arq_receive_state(0));
    a.submit(t, CONN[0], sap(), &request(B, b"a2"), ARQ)
        .unwrap();
    let data = a.poll_transmit(t).unwrap();
    assert_eq!(data.dpdus[0].fsn, Some(1));
    hear(&data, 0, &mut b, 1, &[]);
    assert_eq!(b.counters().tx_win_requests, 1);
    let ask = b.poll_transmit(t + secs(10)).unwrap();
    assert_eq!(
        types(&ask),
        [3],
        "the request alone: no ACK of a window out of step"
    );
    let rs = resets_in(&ask);
    assert!(rs[0].reset_tx_win_request && !rs[0].reset_rx_win_command && !rs[0].full_reset);
    // The request is lost; A sends a2 again, and B asks again (without counting a new one).
    let again = a.poll_transmit(t + secs(60)).unwrap();
    assert_eq!(again.dpdus[0].fsn, Some(1));
    hear(&again, 0, &mut b, 1, &[]);
    assert_eq!(b.counters().tx_win_requests, 1);
    let ask = b.poll_transmit(t + secs(70)).unwrap();
    assert_eq!(types(&ask), [3]);
    assert!(
        b.poll_transmit(t + secs(75)).is_none(),
        "asked once per transmission of A"
    );
    hear(&ask, 1, &mut a, 0, &[]);
    // A resets its transmit window (a2 was on the air: rejected to its client, as for any
    // reset) and commands B's receive window to 0.
    assert!(rejected_not_responding(&events(&mut a)));
    let command = a.poll_transmit(t + secs(80)).unwrap();
    let rs = resets_in(&command);
    assert!(rs[0].reset_rx_win_command && rs[0].new_rx_lwe == 0);
    hear(&command, 0, &mut b, 1, &[]);
    assert!(b.links[&0].tx_win_request.is_none());
    hear(&b.poll_transmit(t + secs(90)).unwrap(), 1, &mut a, 0, &[]);
    // In step again: A's data goes from FSN 0 and is delivered once.
    a.submit(t + secs(100), CONN[0], sap(), &request(B, b"a3"), ARQ)
        .unwrap();
    let data = a.poll_transmit(t + secs(100)).unwrap();
    assert_eq!(data.dpdus[0].fsn, Some(0));
    hear(&data, 0, &mut b, 1, &[]);
    let got = events(&mut b);
    assert!(delivered(&got, b"a3") && !delivered(&got, b"a2"));
    hear(&b.poll_transmit(t + secs(110)).unwrap(), 1, &mut a, 0, &[]);
    assert!(!a.has_work() && !b.has_work());
    assert_eq!(b.counters().tx_win_requests, 1);
}

/// Every node of `v` in turn handles its timers at `t` and keys up if it has something to
/// send; each other node hears its transmission with every D_PDU lost one time in ten. The
/// time one second after the last transmission ends.
fn lossy_round(v: &mut [Node], mut t: Duration, rng: &mut impl rand::Rng) -> Duration {
    for i in 0..v.len() {
        v[i].handle_timeout(t);
        let Some(tx) = v[i].poll_transmit(t) else {
            continue;
        };
        for j in (0..v.len()).filter(|&j| j != i) {
            let lost: Vec<usize> = (0..tx.dpdus.len())
                .filter(|_| rng.random_bool(0.1))
                .collect();
            hear(&tx, i, &mut v[j], j, &lost);
        }
        t = tx.tx.peer_may_transmit_at();
    }
    t + secs(1)
}

/// One seeded run of three nodes on air that loses a tenth of the D_PDUs: their clients send
/// each other U_PDUs (confirm asked) while nodes restart at random, each binding its client
/// again at once, or lose their receive state for one peer without restarting; at the end
/// each node sends each other one more. No U_PDU may be delivered twice (but one delivered
/// before its receiver lost its state, its ACK not yet heard, see `may_repeat`); delivered
/// ones arrive in the order sent; every one whose sender did not restart
/// while holding it is confirmed or rejected, never silently lost; and a confirmed one was
/// delivered, unless its receiver restarted before delivering it (a node confirms what the
/// peer node acknowledged: a frame held there behind a gap, waiting to be delivered in order,
/// goes down with the peer, as in any STANAG 5066 server). Some runs give up on a silent peer
/// after two retries, so that link loss meets the resets too.
fn random_restarts(seed: u64) {
    use rand::{Rng, SeedableRng};
    type Rng8 = rand_chacha::ChaCha8Rng;
    #[derive(Debug, Default, Clone, Copy, PartialEq)]
    enum Fate {
        #[default]
        Pending,
        Confirmed,
        Rejected,
        /// Its sender restarted while holding it: its client will never hear.
        GoneWithSender,
    }
    /// One U_PDU: its text names it.
    #[derive(Debug)]
    struct Sent {
        from: usize,
        to: usize,
        updu: Vec<u8>,
        fate: Fate,
        /// Its receiver restarted, or lost its receive state for the sender, before it was
        /// delivered.
        receiver_restarted: bool,
        /// Delivered, and its receiver lost its receive state for the sender before the
        /// sender heard the ACK: nothing is left to tell the copy the sender sends again from
        /// the first (a restart is different: its FULL RESET makes the sender give up what
        /// it had on the air), so it may be delivered twice.
        may_repeat: bool,
    }
    struct Run {
        t: Duration,
        sent: Vec<Sent>,
        /// (receiving node, U_PDU), in delivery order.
        got: Vec<(usize, Vec<u8>)>,
    }
    let names = [A, B, C];
    let mut rng = Rng8::seed_from_u64(seed);
    let mut v = nodes(NodeConfig {
        link_retries: seed.is_multiple_of(3).then_some(2),
        ..node_config(names.iter().map(|&n| addr(n)).collect())
    });
    let mut run = Run {
        t: Duration::ZERO,
        sent: Vec::new(),
        got: Vec::new(),
    };
    let submit = |v: &mut [Node], run: &mut Run, from: usize, to: usize, updu: Vec<u8>| {
        v[from]
            .submit(run.t, CONN[from], sap(), &request(names[to], &updu), ARQ)
            .unwrap();
        run.sent.push(Sent {
            from,
            to,
            updu,
            fate: Fate::Pending,
            receiver_restarted: false,
            may_repeat: false,
        });
    };
    // Every node keys up in turn; then what the clients heard.
    let step = |v: &mut [Node], run: &mut Run, rng: &mut Rng8| {
        run.t = lossy_round(v, run.t, rng);
        for (i, n) in v.iter_mut().enumerate() {
            for e in events(n) {
                let (updu, fate) = match e.primitive {
                    Primitive::UnidataIndication(ind) => {
                        run.got.push((i, ind.updu.to_vec()));
                        continue;
                    }
                    Primitive::UnidataRequestConfirm(c) => (c.updu_part, Fate::Confirmed),
                    Primitive::UnidataRequestRejected(r) => (r.updu_part, Fate::Rejected),
                    _ => continue,
                };
                let Some(u) = run
                    .sent
                    .iter_mut()
                    .find(|u| u.from == i && u.updu == updu.as_ref())
                else {
                    panic!("seed {seed}: node {i} heard of a U_PDU it did not send: {updu:?}");
                };
                assert_eq!(u.fate, Fate::Pending, "seed {seed}: {u:?} answered twice");
                u.fate = fate;
            }
        }
    };
    let quiet = |v: &mut [Node], run: &mut Run, rng: &mut Rng8| {
        for round in 0..3000 {
            step(v, run, rng);
            if !v.iter().any(Node::has_work) {
                match v.iter().filter_map(Node::poll_timeout).min() {
                    Some(next) => run.t = next.max(run.t) + secs(1),
                    None => return,
                }
            }
            assert!(round < 2999, "seed {seed}: the nodes never went quiet");
        }
    };
    for k in 0..80u32 {
        let i = rng.random_range(0..3);
        let event = rng.random_range(0..12);
        if event == 1 {
            // Node i's receive window for j goes astray without a restart (RX LWE back to 0,
            // held frames gone): the windows are out of step until the synchronisation tests
            // or the stale ACKs realign them.
            let j = (i + rng.random_range(1..3)) % 3;
            assert!(v[i].forget_arq_receive_state(j));
            let got = &run.got;
            for u in &mut run.sent {
                if (u.from, u.to) != (j, i) {
                    continue;
                }
                if !got.iter().any(|g| g.0 == i && g.1 == u.updu) {
                    u.receiver_restarted = true;
                } else if u.fate == Fate::Pending {
                    u.may_repeat = true;
                }
            }
        } else if event == 0 {
            v[i].restart(run.t).unwrap();
            assert!(v[i].bind(sap(), 0, CONN[i], false));
            let got = &run.got;
            for u in &mut run.sent {
                if u.from == i && u.fate == Fate::Pending {
                    u.fate = Fate::GoneWithSender;
                }
                if u.to == i && !got.iter().any(|g| g.0 == i && g.1 == u.updu) {
                    u.receiver_restarted = true;
                }
            }
        } else {
            let j = (i + rng.random_range(1..3)) % 3;
            submit(
                &mut v,
                &mut run,
                i,
                j,
                format!("{seed}/{k} {i}>{j}").into_bytes(),
            );
        }
        for _ in 0..rng.random_range(0..4) {
            step(&mut v, &mut run, &mut rng);
        }
    }
    // Until quiet; then every node sends each other one more U_PDU, and until quiet again. A
    // node's C_PDUs whole at a peer behind a gap its restart left (the frames before them
    // gone with it) wait there, acknowledged, for its next contact: its FULL RESET delivers
    // them.
    quiet(&mut v, &mut run, &mut rng);
    for i in 0..3 {
        for j in (0..3).filter(|&j| j != i) {
            submit(
                &mut v,
                &mut run,
                i,
                j,
                format!("{seed}/last {i}>{j}").into_bytes(),
            );
        }
    }
    quiet(&mut v, &mut run, &mut rng);
    for u in &run.sent {
        let times = run
            .got
            .iter()
            .filter(|g| g.0 == u.to && g.1 == u.updu)
            .count();
        let most = if u.may_repeat { 2 } else { 1 };
        assert!(times <= most, "seed {seed}: {u:?} delivered {times} times");
        match u.fate {
            Fate::Confirmed if !u.receiver_restarted => {
                assert!(times >= 1, "seed {seed}: {u:?} confirmed, never delivered");
            }
            Fate::Pending => panic!("seed {seed}: {u:?}: no confirm, no rejection"),
            _ => {}
        }
    }
    // Per pair of nodes, what arrived arrived in the order it was sent.
    for (i, j) in [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)] {
        let order: Vec<&Vec<u8>> = run
            .sent
            .iter()
            .filter(|u| (u.from, u.to) == (i, j))
            .map(|u| &u.updu)
            .collect();
        let arrived: Vec<usize> = run
            .got
            .iter()
            .filter(|g| g.0 == j)
            .filter_map(|g| order.iter().position(|o| **o == g.1))
            .collect();
        // A copy delivered again (`may_repeat`) is not a reordering: the first arrivals count.
        let mut seen = std::collections::BTreeSet::new();
        let arrived: Vec<usize> = arrived.into_iter().filter(|p| seen.insert(*p)).collect();
        assert!(
            arrived.windows(2).all(|w| w[0] < w[1]),
            "seed {seed}: {i}>{j} out of order: {arrived:?}"
        );
    }
}

#[test]
fn random_restarts_on_lossy_air_never_lose_silently_deliver_twice_or_reorder() {
    for seed in 0..200 {
        random_restarts(seed);
    }
}

#[test]
fn a_loopback_unidata_is_delivered_and_confirmed_at_once() {
    let (mut a, _) = pair();
    a.submit(Duration::ZERO, CONN[0], sap(), &request(A, b"me"), ARQ)
        .unwrap();
    let got: Vec<Primitive> = events(&mut a).into_iter().map(|e| e.primitive).collect();
    assert!(matches!(
        got[..],
        [
            Primitive::UnidataIndication(_),
            Primitive::UnidataRequestConfirm(_)
        ]
    ));
    assert!(!a.has_work());
    // An unknown node is refused.
    assert_eq!(
        a.submit(Duration::ZERO, CONN[0], sap(), &request(C, b"?"), ARQ),
        Err(UnidataRejectReason::DestinationNodeNotResponding)
    );
}

#[test]
fn a_bad_setup_is_refused() {
    let mut config = node_config(vec![addr(A), addr(B)]);
    config.window = 1;
    assert!(matches!(
        NodeSetup::new(config),
        Err(super::NodeError::MtuTooLarge { .. })
    ));
    let mut config = node_config(vec![addr(A), addr(B)]);
    config.max_transmission = secs(200);
    assert!(matches!(
        NodeSetup::new(config),
        Err(super::NodeError::BadMaxTransmission(_))
    ));
    let setup = NodeSetup::new(node_config(vec![addr(A), addr(B)])).unwrap();
    assert!(matches!(
        Node::new(2, &setup, false),
        Err(super::NodeError::NoSuchNode { index: 2, nodes: 2 })
    ));
}

#[test]
fn a_shared_transmission_is_split_max_min_fairly() {
    // One peer: everything it asks, up to the budget.
    assert_eq!(fair_shares(1000, &[(1, 400)])[&1], 400);
    assert_eq!(fair_shares(1000, &[(1, 4000)])[&1], 1000);
    // A short message beside a long batch gets all it asks; the batch gets the rest.
    let s = fair_shares(10_000, &[(1, 50_000), (2, 600)]);
    assert_eq!((s[&1], s[&2]), (9_400, 600));
    // Three long batches split evenly.
    let s = fair_shares(9_000, &[(1, 50_000), (2, 60_000), (3, 70_000)]);
    assert_eq!((s[&1], s[&2], s[&3]), (3_000, 3_000, 3_000));
    assert!(fair_shares(100, &[]).is_empty());
}

#[test]
fn each_u_pdu_is_delivered_as_its_d_pdus_arrive_and_acks_wait_for_the_end() {
    // A transmission of two U_PDUs handed over D_PDU by D_PDU, as the driver does when each
    // interleaver block is decoded: the first U_PDU is delivered before the second arrives,
    // and the ACK riding in the transmission (a DATA-ACK) confirms only at its end.
    let (mut a, mut b) = pair();
    b.submit(Duration::ZERO, CONN[1], sap(), &request(A, b"B to A"), ARQ)
        .unwrap();
    let from_b = b.poll_transmit(Duration::ZERO).unwrap();
    hear(&from_b, 1, &mut a, 0, &[]);
    events(&mut a);
    a.submit(secs(5), CONN[0], sap(), &request(B, &payload(300)), ARQ)
        .unwrap();
    a.submit(secs(5), CONN[0], sap(), &request(B, &payload(200)), ARQ)
        .unwrap();
    let tx = a.poll_transmit(secs(10)).unwrap();
    assert_eq!(types(&tx), [2, 0], "a DATA-ACK, then a DATA-ONLY");
    let mut dpdus = tx.dpdus.iter().map(|d| (d.at, d.bytes.clone()));

    assert!(b.receive_dpdus(0, dpdus.next().into_iter().collect()));
    let got: Vec<Primitive> = events(&mut b).into_iter().map(|e| e.primitive).collect();
    assert!(
        matches!(&got[..], [Primitive::UnidataIndication(i)] if i.updu.len() == 300),
        "the first U_PDU at once, no confirm yet: {got:?}"
    );
    assert!(b.receive_dpdus(0, dpdus.collect()));
    let got: Vec<Primitive> = events(&mut b).into_iter().map(|e| e.primitive).collect();
    assert!(
        matches!(&got[..], [Primitive::UnidataIndication(i)] if i.updu.len() == 200),
        "{got:?}"
    );
    b.end_of_transmission(0, tx.modem.rate, true, 2, 0);
    let got: Vec<Primitive> = events(&mut b).into_iter().map(|e| e.primitive).collect();
    assert!(
        matches!(&got[..], [Primitive::UnidataRequestConfirm(_)]),
        "the ACK acts at the end: {got:?}"
    );
}

#[test]
fn a_transmission_for_several_peers_carries_the_smallest_share_first() {
    // A long batch for B (node 1) and a short message for C (node 2), queued together: C's
    // D_PDU goes first, so C decodes it seconds into the transmission, while B's batch ends
    // where it would have anyway.
    let mut v = nodes(node_config(vec![addr(A), addr(B), addr(C)]));
    let a = &mut v[0];
    for _ in 0..3 {
        a.submit(
            Duration::ZERO,
            CONN[0],
            sap(),
            &request(B, &payload(2000)),
            ARQ,
        )
        .unwrap();
    }
    a.submit(
        Duration::ZERO,
        CONN[0],
        sap(),
        &request(C, &payload(100)),
        ARQ,
    )
    .unwrap();
    let tx = a.poll_transmit(Duration::ZERO).unwrap();
    let dests: Vec<usize> = tx.dpdus.iter().map(|d| d.dest).collect();
    assert_eq!(dests.first(), Some(&2), "{dests:?}");
    assert!(dests.iter().skip(1).all(|&d| d == 1), "{dests:?}");
    assert_eq!(dests.len(), 7, "one for C, six segments for B: {dests:?}");
}

/// Nodes A (0) and B (1) that make their physical link with CAS-1.
fn cas1_pair() -> (Node, Node) {
    let mut v = nodes(NodeConfig {
        cas1: true,
        ..node_config(vec![addr(A), addr(B)])
    });
    let b = v.pop().unwrap();
    let a = v.pop().unwrap();
    (a, b)
}

/// The C_PDU of the one EXPEDITED NON-ARQ DATA D_PDU (type 8) of `tx`.
fn cas1_cpdu(tx: &NodeTx) -> crate::cpdu::Cpdu {
    assert_eq!(types(tx), [8], "one EXPEDITED NON-ARQ DATA D_PDU");
    let (d, _) = Dpdu::decode(&tx.dpdus[0].bytes).unwrap();
    let Body::ExpNonArqData { header, segment } = d.body else {
        panic!("not type 8: {d:?}");
    };
    assert_eq!(usize::from(header.cpdu_size), segment.len());
    crate::cpdu::Cpdu::decode(&segment).unwrap()
}

#[test]
fn with_cas1_a_physical_link_is_made_before_the_first_arq_data() {
    use crate::cpdu::Cpdu;
    let (mut a, mut b) = cas1_pair();
    let updu = payload(300);
    a.submit(Duration::ZERO, CONN[0], sap(), &request(B, &updu), ARQ)
        .unwrap();
    // A's first transmission asks for the link, and carries no data.
    let req = a.poll_transmit(Duration::ZERO).unwrap();
    assert_eq!(
        cas1_cpdu(&req),
        Cpdu::PhysicalLinkRequest { exclusive: false }
    );
    // It expects an answer (the driver waits for one, link loss counts it).
    assert!(req.sent_data);
    assert_eq!(a.counters().link_requests, 1);

    // Unheard, it goes again in the next transmission.
    let again = a.poll_transmit(secs(10)).unwrap();
    assert_eq!(
        cas1_cpdu(&again),
        Cpdu::PhysicalLinkRequest { exclusive: false }
    );
    assert_eq!(a.counters().link_requests, 2);

    // B accepts, and nothing reaches B's client yet.
    assert!(hear(&again, 0, &mut b, 1, &[]));
    assert!(events(&mut b).is_empty());
    assert!(b.has_work());
    let acc = b.poll_transmit(again.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(cas1_cpdu(&acc), Cpdu::PhysicalLinkAccepted);
    assert!(!acc.sent_data);
    assert!(!b.has_work());
    assert_eq!(b.counters().links_made, 1);

    // Then A's data, and the exchange goes on as without CAS-1.
    assert!(hear(&acc, 1, &mut a, 0, &[]));
    assert_eq!(a.counters().links_made, 1);
    let tx = a.poll_transmit(acc.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(types(&tx), [0], "one DATA-ONLY");
    assert!(hear(&tx, 0, &mut b, 1, &[]));
    let got = events(&mut b);
    assert!(
        matches!(&got[..], [ClientEvent { primitive: Primitive::UnidataIndication(i), .. }] if i.updu.as_ref() == updu.as_slice()),
        "{got:?}"
    );
    let ack = b.poll_transmit(tx.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(types(&ack), [1]);
    assert!(hear(&ack, 1, &mut a, 0, &[]));
    assert!(!a.has_work());

    // The link stays made: the next U_PDU goes at once.
    a.submit(secs(60), CONN[0], sap(), &request(B, &updu), ARQ)
        .unwrap();
    let tx = a.poll_transmit(secs(60)).unwrap();
    assert_eq!(types(&tx), [0]);
    assert_eq!(a.counters().link_requests, 2);
}

#[test]
fn with_cas1_a_link_request_nobody_answers_ends_in_link_loss_and_a_new_request() {
    let (mut a, _b) = cas1_pair();
    a.submit(
        Duration::ZERO,
        CONN[0],
        sap(),
        &request(B, &payload(100)),
        ARQ,
    )
    .unwrap();
    // The request and its ten retries go unanswered; the next turn declares the link lost
    // and rejects the U_PDU that asked for a confirm.
    for k in 0..=u64::from(super::DEFAULT_LINK_RETRIES) {
        let tx = a.poll_transmit(secs(10 * k)).unwrap();
        assert_eq!(types(&tx), [8]);
    }
    assert!(a.poll_transmit(secs(200)).is_none());
    assert_eq!(a.counters().links_lost, 1);
    let got = events(&mut a);
    assert!(
        got.iter().any(|e| matches!(&e.primitive, Primitive::UnidataRequestRejected(r) if r.reason == UnidataRejectReason::DestinationNodeNotResponding)),
        "{got:?}"
    );
    // New data asks for a link again.
    a.submit(secs(300), CONN[0], sap(), &request(B, &payload(100)), ARQ)
        .unwrap();
    let tx = a.poll_transmit(secs(300)).unwrap();
    assert_eq!(types(&tx), [8]);
}

/// CAS-1 link making by hand: `caller` (node index `ci`) asks `called` (index `di`) for a
/// link at `t`, `called` accepts, and `caller` sends the ARQ data it holds, which `called`
/// hears whole. Returns that data transmission.
fn make_link_and_send(
    caller: &mut Node,
    ci: usize,
    called: &mut Node,
    di: usize,
    t: Duration,
) -> NodeTx {
    use crate::cpdu::Cpdu;
    let req = caller.poll_transmit(t).unwrap();
    assert_eq!(
        cas1_cpdu(&req),
        Cpdu::PhysicalLinkRequest { exclusive: false }
    );
    assert!(hear(&req, ci, called, di, &[]));
    let acc = called.poll_transmit(req.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(cas1_cpdu(&acc), Cpdu::PhysicalLinkAccepted);
    assert!(hear(&acc, di, caller, ci, &[]));
    let data = caller.poll_transmit(acc.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(types(&data), [0]);
    assert!(hear(&data, ci, called, di, &[]));
    data
}

/// Node A (index 0) submits a 300-byte ARQ U_PDU for B at 0.
fn a_submits_300_bytes_for_b(a: &mut Node) {
    a.submit(
        Duration::ZERO,
        CONN[0],
        sap(),
        &request(B, &payload(300)),
        ARQ,
    )
    .unwrap();
}

/// Nodes A and B of `config`, with a 300-byte ARQ U_PDU of A's for B submitted at 0.
fn pair_with_an_updu_for_b(config: NodeConfig) -> (Node, Node) {
    let mut v = nodes(config);
    let b = v.pop().unwrap();
    let mut a = v.pop().unwrap();
    a_submits_300_bytes_for_b(&mut a);
    (a, b)
}

/// A and B with CAS-1 and an idle timer of `idle` seconds; A's U_PDU to B made their link
/// and was acknowledged. Returns them and when A heard B's ACK (its first block started).
fn cas1_pair_after_one_updu(idle: u64) -> (Node, Node, Duration) {
    let (mut a, mut b) = pair_with_an_updu_for_b(NodeConfig {
        cas1: true,
        link_idle: Some(secs(idle)),
        ..node_config(vec![addr(A), addr(B)])
    });
    let data = make_link_and_send(&mut a, 0, &mut b, 1, Duration::ZERO);
    let ack = b.poll_transmit(data.tx.peer_may_transmit_at()).unwrap();
    assert!(hear(&ack, 1, &mut a, 0, &[]));
    assert!(!a.has_work() && !b.has_work());
    events(&mut a);
    events(&mut b);
    (a, b, ack.dpdus[0].at)
}

#[test]
fn with_cas1_an_idle_link_is_broken_and_made_again_for_new_data() {
    use crate::cpdu::{Cpdu, break_reason};
    let (mut a, mut b, heard_ack) = cas1_pair_after_one_updu(30);
    // The idle timer runs from the last thing A heard from B; only A, whose request made the
    // link, has one.
    let due = heard_ack + secs(30);
    assert_eq!(a.poll_timeout(), Some(due));
    assert_eq!(b.poll_timeout(), None);
    a.handle_timeout(due - Duration::from_millis(1));
    assert!(!a.has_work());
    a.handle_timeout(due);
    assert!(a.has_work());
    // The BREAK ("no more data") goes alone, expects an answer, and holds no timer.
    let brk = a.poll_transmit(due).unwrap();
    assert_eq!(
        cas1_cpdu(&brk),
        Cpdu::PhysicalLinkBreak {
            reason: break_reason::NO_MORE_DATA
        }
    );
    assert!(brk.sent_data);
    assert_eq!(a.poll_timeout(), None);
    // B declares the link broken at once and confirms; then neither has anything to do.
    assert!(hear(&brk, 0, &mut b, 1, &[]));
    assert_eq!(b.counters().links_broken, 1);
    let confirm = b.poll_transmit(brk.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(cas1_cpdu(&confirm), Cpdu::PhysicalLinkBreakConfirm);
    assert!(!confirm.sent_data);
    assert!(hear(&confirm, 1, &mut a, 0, &[]));
    assert_eq!(a.counters().links_broken, 1);
    assert!(!a.has_work() && !b.has_work());
    assert_eq!((a.poll_timeout(), b.poll_timeout()), (None, None));

    // New data makes the link again before it goes; the ARQ carries on where it was.
    let later = secs(600);
    let updu = payload(200);
    a.submit(later, CONN[0], sap(), &request(B, &updu), ARQ)
        .unwrap();
    let req = a.poll_transmit(later).unwrap();
    assert_eq!(
        cas1_cpdu(&req),
        Cpdu::PhysicalLinkRequest { exclusive: false }
    );
    assert!(hear(&req, 0, &mut b, 1, &[]));
    let acc = b.poll_transmit(req.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(cas1_cpdu(&acc), Cpdu::PhysicalLinkAccepted);
    assert!(hear(&acc, 1, &mut a, 0, &[]));
    let data = a.poll_transmit(acc.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(types(&data), [0]);
    assert!(hear(&data, 0, &mut b, 1, &[]));
    let got = events(&mut b);
    assert!(
        matches!(&got[..], [ClientEvent { primitive: Primitive::UnidataIndication(i), .. }] if i.updu.as_ref() == updu.as_slice()),
        "{got:?}"
    );
    assert_eq!(
        (a.counters().link_requests, a.counters().links_made),
        (2, 2)
    );
    assert_eq!(b.counters().links_made, 2);
}

#[test]
fn with_cas1_data_that_comes_before_the_break_goes_calls_the_break_off() {
    let (mut a, mut b, heard_ack) = cas1_pair_after_one_updu(30);
    let due = heard_ack + secs(30);
    a.handle_timeout(due);
    assert!(a.has_work());
    // A U_PDU for B turns up before A keys up: it goes on the made link, with no BREAK.
    a.submit(due, CONN[0], sap(), &request(B, &payload(100)), ARQ)
        .unwrap();
    let tx = a.poll_transmit(due).unwrap();
    assert_eq!(types(&tx), [0]);
    assert!(hear(&tx, 0, &mut b, 1, &[]));
    assert_eq!(events(&mut b).len(), 1);
    let ack = b.poll_transmit(tx.tx.peer_may_transmit_at()).unwrap();
    assert!(hear(&ack, 1, &mut a, 0, &[]));
    // The idle timer starts again from there.
    assert_eq!(a.poll_timeout(), Some(ack.dpdus[0].at + secs(30)));
    assert_eq!(a.counters().links_broken, 0);
}

#[test]
fn with_cas1_a_break_nobody_confirms_ends_in_link_loss() {
    let (mut a, _b, heard_ack) = cas1_pair_after_one_updu(30);
    let due = heard_ack + secs(30);
    a.handle_timeout(due);
    // The BREAK and its ten repeats go unanswered: the next turn declares the link lost,
    // with nothing to discard, and the node is quiet.
    for k in 0..=u64::from(super::DEFAULT_LINK_RETRIES) {
        let tx = a.poll_transmit(due + secs(10 * k)).unwrap();
        assert_eq!(types(&tx), [8]);
    }
    assert!(a.poll_transmit(due + secs(200)).is_none());
    assert!(!a.has_work());
    assert_eq!((a.counters().links_lost, a.counters().links_broken), (1, 0));
    assert_eq!(
        a.poll_link_event(),
        Some(LinkEvent::Lost {
            peer: 1,
            at: due + secs(200),
            discarded: 0
        })
    );
}

#[test]
fn with_cas1_a_request_that_comes_instead_of_the_confirm_ends_the_break() {
    use crate::cpdu::Cpdu;
    let (mut a, mut b, heard_ack) = cas1_pair_after_one_updu(30);
    let due = heard_ack + secs(30);
    a.handle_timeout(due);
    let brk = a.poll_transmit(due).unwrap();
    assert!(hear(&brk, 0, &mut b, 1, &[]));
    // B has data for A by the time it answers: its CONFIRM and its new request go together,
    // and the CONFIRM is lost.
    b.submit(due, CONN[1], sap(), &request(A, &payload(80)), ARQ)
        .unwrap();
    let answer = b.poll_transmit(brk.tx.peer_may_transmit_at()).unwrap();
    let cpdus: Vec<Cpdu> = answer
        .dpdus
        .iter()
        .map(|d| {
            let (d, _) = Dpdu::decode(&d.bytes).unwrap();
            let Body::ExpNonArqData { segment, .. } = d.body else {
                panic!("not type 8: {d:?}");
            };
            Cpdu::decode(&segment).unwrap()
        })
        .collect();
    assert_eq!(
        cpdus,
        [
            Cpdu::PhysicalLinkBreakConfirm,
            Cpdu::PhysicalLinkRequest { exclusive: false }
        ]
    );
    assert!(hear(&answer, 1, &mut a, 0, &[0]));
    // The request tells A the link is broken at B: A's break is done, and it accepts anew.
    assert_eq!((a.counters().links_broken, a.counters().links_made), (1, 2));
    let acc = a.poll_transmit(answer.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(cas1_cpdu(&acc), Cpdu::PhysicalLinkAccepted);
    assert!(hear(&acc, 0, &mut b, 1, &[]));
    let data = b.poll_transmit(acc.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(types(&data), [0]);
}

/// A (0), B (1) and C (2) with CAS-1, a 30 s idle timer and at most one link each.
fn one_link_trio() -> (Node, Node, Node) {
    let mut v = nodes(NodeConfig {
        cas1: true,
        link_idle: Some(secs(30)),
        max_links: Some(1),
        ..node_config(vec![addr(A), addr(B), addr(C)])
    });
    let c = v.pop().unwrap();
    let b = v.pop().unwrap();
    let a = v.pop().unwrap();
    (a, b, c)
}

/// The same trio, after A's U_PDU to B made their link (A called) and was acknowledged.
/// Returns them, when B keyed up its ACK and when A heard it.
fn one_link_trio_a_linked_to_b() -> (Node, Node, Node, Duration, Duration) {
    let (mut a, mut b, mut c) = one_link_trio();
    a_submits_300_bytes_for_b(&mut a);
    let data = make_link_and_send(&mut a, 0, &mut b, 1, Duration::ZERO);
    let acked = data.tx.peer_may_transmit_at();
    let ack = b.poll_transmit(acked).unwrap();
    assert!(hear(&ack, 1, &mut a, 0, &[]));
    assert!(!a.has_work() && !b.has_work() && !c.has_work());
    for n in [&mut a, &mut b, &mut c] {
        events(n);
    }
    (a, b, c, acked, ack.dpdus[0].at)
}

#[test]
fn a_node_at_its_maximum_of_links_rejects_a_new_peer_which_asks_again_later() {
    use crate::cpdu::{Cpdu, reject_reason};
    let (mut a, mut b, mut c, _, heard_ack) = one_link_trio_a_linked_to_b();
    // C has data for A and asks for a link; A holds its one link (to B) and rejects.
    let t0 = heard_ack + secs(5);
    c.submit(t0, CONN[2], sap(), &request(A, &payload(200)), ARQ)
        .unwrap();
    let req = c.poll_transmit(t0).unwrap();
    assert_eq!(
        cas1_cpdu(&req),
        Cpdu::PhysicalLinkRequest { exclusive: false }
    );
    assert!(hear(&req, 2, &mut a, 0, &[]));
    assert_eq!(a.counters().link_requests_refused, 1);
    let rej = a.poll_transmit(req.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(
        cas1_cpdu(&rej),
        Cpdu::PhysicalLinkRejected {
            reason: reject_reason::UNKNOWN
        }
    );
    // A rejection expects no answer.
    assert!(!rej.sent_data);
    assert!(hear(&rej, 0, &mut c, 2, &[]));
    assert_eq!(c.counters().link_requests_rejected, 1);
    // C keeps its U_PDU (nothing rejected to its client), has nothing it may send, and asks
    // again once A could have broken an idle link: 30 s plus one 3 s response timeout after
    // the rejection arrived.
    assert!(events(&mut c).is_empty());
    assert!(!c.has_work());
    let again = rej.dpdus[0].at + secs(33);
    assert_eq!(c.poll_timeout(), Some(again));
    c.handle_timeout(again - Duration::from_millis(1));
    assert!(!c.has_work());
    // Meanwhile A's link to B idles out (A called it): BREAK, CONFIRM.
    let due = heard_ack + secs(30);
    assert_eq!(a.poll_timeout(), Some(due));
    a.handle_timeout(due);
    let brk = a.poll_transmit(due).unwrap();
    assert!(matches!(cas1_cpdu(&brk), Cpdu::PhysicalLinkBreak { .. }));
    assert!(hear(&brk, 0, &mut b, 1, &[]));
    let confirm = b.poll_transmit(brk.tx.peer_may_transmit_at()).unwrap();
    assert!(hear(&confirm, 1, &mut a, 0, &[]));
    assert!(!a.has_work());
    // C's hold runs out: it asks again, A accepts, and the U_PDU goes.
    c.handle_timeout(again);
    assert!(c.has_work());
    make_link_and_send(&mut c, 2, &mut a, 0, again);
    assert_eq!(a.counters().delivered, 1);
    assert_eq!((a.counters().links_made, c.counters().links_made), (2, 1));
}

#[test]
fn a_node_at_its_maximum_breaks_a_link_it_was_called_on_for_a_waiting_peer() {
    use crate::cpdu::{Cpdu, break_reason};
    let (mut a, mut b, mut c, acked, heard_ack) = one_link_trio_a_linked_to_b();
    // B, the called node, has data for C, but its one link is A's: it may not ask for
    // another, so it has nothing to send...
    let t0 = heard_ack + secs(1);
    b.submit(t0, CONN[1], sap(), &request(C, &payload(200)), ARQ)
        .unwrap();
    assert!(!b.has_work());
    // ...until the link to A has idled for 30 s (from the ACK B sent, the last thing on it).
    let due = acked + secs(30);
    assert_eq!(b.poll_timeout(), Some(due));
    b.handle_timeout(due);
    assert!(b.has_work());
    // The BREAK to A frees B's slot at once (the link counts as broken from then on), so the
    // same transmission asks C for a link.
    let brk = b.poll_transmit(due).unwrap();
    assert_eq!(types(&brk), [8, 8]);
    let cpdus: Vec<(usize, Cpdu)> = brk
        .dpdus
        .iter()
        .map(|d| {
            let (dpdu, _) = Dpdu::decode(&d.bytes).unwrap();
            let Body::ExpNonArqData { segment, .. } = dpdu.body else {
                panic!("not type 8: {dpdu:?}");
            };
            (d.dest, Cpdu::decode(&segment).unwrap())
        })
        .collect();
    assert_eq!(
        cpdus,
        [
            (
                0,
                Cpdu::PhysicalLinkBreak {
                    reason: break_reason::NO_MORE_DATA
                }
            ),
            (2, Cpdu::PhysicalLinkRequest { exclusive: false })
        ]
    );
    // A (whose own idle timer was not yet due) takes the break and confirms; C accepts.
    assert!(hear(&brk, 1, &mut a, 0, &[]));
    assert!(hear(&brk, 1, &mut c, 2, &[]));
    let confirm = a.poll_transmit(brk.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(cas1_cpdu(&confirm), Cpdu::PhysicalLinkBreakConfirm);
    assert!(hear(&confirm, 0, &mut b, 1, &[]));
    let acc = c.poll_transmit(confirm.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(cas1_cpdu(&acc), Cpdu::PhysicalLinkAccepted);
    assert!(hear(&acc, 2, &mut b, 1, &[]));
    // B's U_PDU goes over the new link.
    let data = b.poll_transmit(acc.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(types(&data), [0]);
    assert!(hear(&data, 1, &mut c, 2, &[]));
    assert_eq!(c.counters().delivered, 1);
    assert_eq!(b.counters().links_broken, 1);
}

#[test]
fn a_maximum_of_links_needs_cas1_and_an_idle_timer() {
    let base = node_config(vec![addr(A), addr(B)]);
    for (cas1, idle, max) in [
        (false, Some(secs(5)), Some(1)),
        (true, None, Some(1)),
        (true, Some(secs(5)), Some(0)),
    ] {
        let config = NodeConfig {
            cas1,
            link_idle: idle,
            max_links: max,
            ..base.clone()
        };
        let err = NodeSetup::new(config).unwrap_err();
        assert!(err.to_string().contains("maximum number of links"), "{err}");
    }
    assert!(
        NodeSetup::new(NodeConfig {
            cas1: true,
            link_idle: Some(secs(0)),
            max_links: Some(1),
            ..base
        })
        .is_ok()
    );
}

#[test]
fn a_caller_that_fills_the_last_slot_withdraws_a_request_and_undoes_its_late_acceptance() {
    use crate::cpdu::{Cpdu, break_reason};
    let (mut a, mut b, mut c) = one_link_trio();
    // A asks B for a link, and C asks A, each with data.
    a.submit(
        Duration::ZERO,
        CONN[0],
        sap(),
        &request(B, &payload(100)),
        ARQ,
    )
    .unwrap();
    c.submit(
        Duration::ZERO,
        CONN[2],
        sap(),
        &request(A, &payload(100)),
        ARQ,
    )
    .unwrap();
    let req_ab = a.poll_transmit(Duration::ZERO).unwrap();
    assert!(hear(&req_ab, 0, &mut b, 1, &[]));
    let t = req_ab.tx.peer_may_transmit_at();
    let req_ca = c.poll_transmit(t).unwrap();
    // A's own request awaiting an answer does not make it refuse C: it accepts, and
    // withdraws its request to B, which C's link leaves no slot for.
    assert!(hear(&req_ca, 2, &mut a, 0, &[]));
    assert_eq!(a.counters().link_requests_refused, 0);
    let t = req_ca.tx.peer_may_transmit_at();
    let acc_ac = a.poll_transmit(t).unwrap();
    assert_eq!(cas1_cpdu(&acc_ac), Cpdu::PhysicalLinkAccepted);
    assert_eq!(acc_ac.dpdus[0].dest, 2);
    assert!(hear(&acc_ac, 0, &mut c, 2, &[]));
    // B accepted A's request all the same; its answer comes after A has no slot for it, so A
    // breaks that link at once.
    let acc_ba = b.poll_transmit(acc_ac.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(cas1_cpdu(&acc_ba), Cpdu::PhysicalLinkAccepted);
    assert!(hear(&acc_ba, 1, &mut a, 0, &[]));
    let brk = a.poll_transmit(acc_ba.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(
        cas1_cpdu(&brk),
        Cpdu::PhysicalLinkBreak {
            reason: break_reason::NO_MORE_DATA
        }
    );
    assert_eq!(brk.dpdus[0].dest, 1);
    assert!(hear(&brk, 0, &mut b, 1, &[]));
    let confirm = b.poll_transmit(brk.tx.peer_may_transmit_at()).unwrap();
    assert!(hear(&confirm, 1, &mut a, 0, &[]));
    assert_eq!((a.counters().links_made, a.counters().links_broken), (2, 1));
    assert_eq!(b.counters().links_broken, 1);
    // C's U_PDU goes over its link; A's for B waits for A's slot.
    let data = c.poll_transmit(confirm.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(types(&data), [0]);
    assert!(hear(&data, 2, &mut a, 0, &[]));
    assert_eq!(a.counters().delivered, 1);
}

#[test]
fn a_called_node_aborts_a_link_without_data_and_warns_when_data_comes_later() {
    use crate::dpdu::{Warning, warning_reason};
    let (mut a, mut b) = pair_with_an_updu_for_b(NodeConfig {
        cas1: true,
        link_first_data: Some(secs(20)),
        ..node_config(vec![addr(A), addr(B)])
    });
    let req = a.poll_transmit(Duration::ZERO).unwrap();
    assert!(hear(&req, 0, &mut b, 1, &[]));
    // B accepts and waits 20 s, from when A could answer its ACCEPTED, for A's first data.
    let acc = b.poll_transmit(req.tx.peer_may_transmit_at()).unwrap();
    let due = acc.tx.peer_may_transmit_at() + secs(20);
    assert_eq!(b.poll_timeout(), Some(due));
    assert!(hear(&acc, 1, &mut a, 0, &[]));
    // A's data is lost on the air, every D_PDU of it; B aborts the link, sending nothing.
    let data = a.poll_transmit(acc.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(types(&data), [0]);
    assert!(!hear(&data, 0, &mut b, 1, &[0]));
    b.handle_timeout(due - Duration::from_millis(1));
    assert_eq!(b.counters().links_aborted, 0);
    b.handle_timeout(due);
    assert_eq!(b.counters().links_aborted, 1);
    assert!(!b.has_work());
    assert_eq!(b.poll_timeout(), None);
    // A sends its data again on the link it believes made: B discards it and warns.
    let again = a.poll_transmit(due + secs(1)).unwrap();
    assert_eq!(types(&again), [0]);
    assert!(hear(&again, 0, &mut b, 1, &[]));
    assert_eq!(b.counters().delivered, 0);
    let warn = b.poll_transmit(again.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(types(&warn), [15]);
    let (d, _) = Dpdu::decode(&warn.dpdus[0].bytes).unwrap();
    assert_eq!(
        d.body,
        Body::Warning(Warning {
            received_type: 0,
            reason: warning_reason::NOT_CONNECTED
        })
    );
    assert_eq!(b.counters().not_linked_warnings, 1);
    // A makes the link again, and its U_PDU goes over it once.
    assert!(hear(&warn, 1, &mut a, 0, &[]));
    make_link_and_send(&mut a, 0, &mut b, 1, warn.tx.peer_may_transmit_at());
    assert_eq!(b.counters().delivered, 1);
    // Data came in time on the new link: no second abort.
    assert_eq!(b.poll_timeout(), None);
    assert_eq!((b.counters().links_made, a.counters().links_made), (2, 2));
}

#[test]
fn arq_data_before_a_lost_accepted_makes_the_link() {
    let (mut a, mut b) = cas1_pair();
    // A and B both have data and ask each other; A's request arrives first and B accepts it,
    // sending its ACCEPTED and its own data in one transmission.
    a.submit(
        Duration::ZERO,
        CONN[0],
        sap(),
        &request(B, &payload(100)),
        ARQ,
    )
    .unwrap();
    b.submit(
        Duration::ZERO,
        CONN[1],
        sap(),
        &request(A, &payload(100)),
        ARQ,
    )
    .unwrap();
    let req = a.poll_transmit(Duration::ZERO).unwrap();
    assert!(hear(&req, 0, &mut b, 1, &[]));
    let tx = b.poll_transmit(req.tx.peer_may_transmit_at()).unwrap();
    assert_eq!(types(&tx), [8, 0]);
    // The ACCEPTED is lost, the data arrives: A takes it as the answer, and no WARNING.
    assert!(hear(&tx, 1, &mut a, 0, &[0]));
    assert_eq!(a.counters().delivered, 1);
    assert_eq!(a.counters().links_made, 1);
    let answer = a.poll_transmit(tx.tx.peer_may_transmit_at()).unwrap();
    assert!(!types(&answer).contains(&15), "{:?}", types(&answer));
    assert_eq!(a.counters().not_linked_warnings, 0);
}

// Hard links (Annex A §A.3.2.2, `super::hard`).

mod hard_links {
    use skywave_sis::{
        HardLink, HardLinkRejectReason, HardLinkTerminateReason, HardLinkType, LinkPriority,
    };

    use super::*;

    /// A second client on node A, SAP 5.
    const OTHER: (u8, u64) = (5, 11);

    fn link(link_type: HardLinkType, priority: u8, remote: u32, remote_sap: u8) -> HardLink {
        HardLink {
            link_type,
            priority: LinkPriority::new(priority).unwrap(),
            remote_sap: SapId::new(remote_sap).unwrap(),
            remote: addr(remote),
        }
    }

    /// Three nodes, A's client having asked for `link` to B at time 0 and the nodes having
    /// talked until quiet: the nodes, the link asked for and the time reached.
    fn asked_of_b(link: HardLink) -> (Vec<Node>, HardLink, Duration) {
        let mut v = trio();
        v[0].hard_link_establish(Duration::ZERO, CONN[0], link);
        let t = converse(&mut v, Duration::ZERO);
        (v, link, t)
    }

    /// What A's client (connection `CONN[0]`) is told when its hard link `link` ends.
    fn ended_for_a(reason: HardLinkTerminateReason, link: HardLink) -> (u64, Primitive) {
        (CONN[0], Primitive::HardLinkTerminated { reason, link })
    }

    /// One counter of every node, in node order.
    fn each(v: &[Node], counter: impl Fn(&super::super::NodeCounters) -> u64) -> Vec<u64> {
        v.iter().map(|n| counter(&n.counters())).collect()
    }

    /// S_HARD_LINK_ESTABLISHED for `link` to A's client on SAP 3.
    fn made_for_a(link: HardLink) -> (u64, Primitive) {
        let p = Primitive::HardLinkEstablished {
            remote_status: 1,
            link,
        };
        (CONN[0], p)
    }

    /// Nodes A, B and C (each with its client on SAP 3), and a second client on A.
    fn trio() -> Vec<Node> {
        let mut v = nodes(node_config(vec![addr(A), addr(B), addr(C)]));
        assert!(v[0].bind(SapId::new(OTHER.0).unwrap(), 0, OTHER.1, false));
        v
    }

    /// Lets every node send in turn, everyone hearing everything, until none has anything
    /// to send; the time after the last transmission.
    fn converse(v: &mut [Node], mut t: Duration) -> Duration {
        for _ in 0..30 {
            let mut any = false;
            for i in 0..v.len() {
                let Some(tx) = v[i].poll_transmit(t) else {
                    continue;
                };
                any = true;
                for j in (0..v.len()).filter(|&j| j != i) {
                    hear(&tx, i, &mut v[j], j, &[]);
                }
                t = tx.tx.peer_may_transmit_at();
            }
            if !any {
                return t;
            }
        }
        panic!("still talking after 30 turns");
    }

    fn primitives(node: &mut Node) -> Vec<(u64, Primitive)> {
        events(node)
            .into_iter()
            .map(|e| (e.conn, e.primitive))
            .collect()
    }

    fn sent_from(node: &mut Node, src: (u8, u64), dest: u32, updu: &[u8]) {
        let sap = SapId::new(src.0).unwrap();
        node.submit(Duration::ZERO, src.1, sap, &request(dest, updu), ARQ)
            .unwrap();
    }

    fn delivered(node: &mut Node) -> Vec<Vec<u8>> {
        events(node)
            .into_iter()
            .filter_map(|e| match e.primitive {
                Primitive::UnidataIndication(i) => Some(i.updu.to_vec()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_full_bandwidth_link_is_accepted_by_the_called_client_and_carries_only_its_two_clients() {
        let (mut v, asked, t) = asked_of_b(link(HardLinkType::FullBandwidth, 1, B, SAP));
        // B's client on SAP 3 is asked, with A's client's SAP as the remote SAP.
        let seen = link(HardLinkType::FullBandwidth, 1, A, SAP);
        assert_eq!(
            primitives(&mut v[1]),
            [(
                CONN[1],
                Primitive::HardLinkIndication {
                    remote_status: 1,
                    link: seen
                }
            )]
        );
        assert!(primitives(&mut v[0]).is_empty());
        v[1].hard_link_accept(t, CONN[1], seen);
        let t = converse(&mut v, t);
        assert_eq!(primitives(&mut v[0]), [made_for_a(asked)]);
        assert_eq!(each(&v, |c| c.hard_links_made)[..2], [1, 1]);
        // While the link is up, A sends only its client's data to B's client: the other
        // client's U_PDU for B and the data for C wait (and are no work to key up for).
        sent_from(&mut v[0], OTHER, B, b"other client");
        sent_from(&mut v[0], (SAP, CONN[0]), C, b"for C");
        assert!(!v[0].has_work());
        sent_from(&mut v[0], (SAP, CONN[0]), B, b"on the link");
        let t = converse(&mut v, t);
        assert_eq!(delivered(&mut v[1]), [b"on the link".to_vec()]);
        assert!(delivered(&mut v[2]).is_empty());
        // A's client ends it: B confirms and tells its client; then the rest goes.
        v[0].hard_link_terminate(t, CONN[0], addr(B));
        converse(&mut v, t);
        let got = primitives(&mut v[1]);
        assert_eq!(
            got[0],
            (
                CONN[1],
                Primitive::HardLinkTerminated {
                    reason: HardLinkTerminateReason::TerminatedByRemote,
                    link: seen
                }
            )
        );
        assert!(
            matches!(&got[1].1, Primitive::UnidataIndication(i) if i.updu.as_ref() == b"other client"),
            "{got:?}"
        );
        assert_eq!(delivered(&mut v[2]), [b"for C".to_vec()]);
        // A's client hears nothing more of a termination its peer confirmed (Annex A).
        assert!(
            primitives(&mut v[0])
                .iter()
                .all(|(_, p)| matches!(p, Primitive::UnidataRequestConfirm(_))),
        );
        assert_eq!(each(&v, |c| c.hard_links_ended)[..2], [1, 1]);
    }

    #[test]
    fn a_reservation_is_confirmed_by_the_called_node_and_shared_by_every_client_of_the_pair() {
        let (mut v, asked, t) = asked_of_b(link(HardLinkType::Reservation, 0, B, 0));
        assert!(primitives(&mut v[1]).is_empty(), "no client is asked");
        assert!(matches!(
            primitives(&mut v[0])[..],
            [(_, Primitive::HardLinkEstablished { .. })]
        ));
        sent_from(&mut v[0], OTHER, B, b"shared");
        sent_from(&mut v[0], OTHER, C, b"waits");
        // B sends to A over the link; to C it waits too.
        sent_from(&mut v[1], (SAP, CONN[1]), A, b"back");
        sent_from(&mut v[1], (SAP, CONN[1]), C, b"B waits");
        let t = converse(&mut v, t);
        assert_eq!(delivered(&mut v[1]), [b"shared".to_vec()]);
        assert_eq!(delivered(&mut v[0]), [b"back".to_vec()]);
        assert!(delivered(&mut v[2]).is_empty());
        // The same reservation again is refused locally; another client's is too.
        v[0].hard_link_establish(t, CONN[0], asked);
        v[0].hard_link_establish(t, OTHER.1, link(HardLinkType::Reservation, 0, C, 0));
        let refusals: Vec<_> = primitives(&mut v[0])
            .into_iter()
            .map(|(conn, p)| match p {
                Primitive::HardLinkRejected { reason, .. } => (conn, reason),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            refusals,
            [
                (CONN[0], HardLinkRejectReason::Type0LinkExists),
                (OTHER.1, HardLinkRejectReason::HigherPriorityLinkExists)
            ]
        );
        // A's client unbinds: the link ends at both nodes and the held data goes.
        v[0].unbind(CONN[0]);
        converse(&mut v, t);
        let mut at_c = delivered(&mut v[2]);
        at_c.sort();
        assert_eq!(at_c, [b"B waits".to_vec(), b"waits".to_vec()]);
    }

    #[test]
    fn refusals_and_precedence() {
        let mut v = trio();
        // Unknown node: refused at once. No client on B's SAP 9: refused by B.
        v[0].hard_link_establish(
            Duration::ZERO,
            CONN[0],
            link(HardLinkType::Reservation, 0, 0x0909_0909, 0),
        );
        v[0].hard_link_establish(
            Duration::ZERO,
            CONN[0],
            link(HardLinkType::FullBandwidth, 0, B, 9),
        );
        let t = converse(&mut v, Duration::ZERO);
        let reasons = |node: &mut Node| -> Vec<HardLinkRejectReason> {
            primitives(node)
                .into_iter()
                .filter_map(|(_, p)| match p {
                    Primitive::HardLinkRejected { reason, .. } => Some(reason),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(
            reasons(&mut v[0]),
            [
                HardLinkRejectReason::RemoteNodeNotResponding,
                HardLinkRejectReason::DestinationSapNotBound
            ]
        );
        // B's client refuses.
        v[0].hard_link_establish(t, CONN[0], link(HardLinkType::FullBandwidth, 0, B, SAP));
        let t = converse(&mut v, t);
        let ind = link(HardLinkType::FullBandwidth, 0, A, SAP);
        assert!(matches!(
            primitives(&mut v[1])[..],
            [(_, Primitive::HardLinkIndication { .. })]
        ));
        v[1].hard_link_reject(t, CONN[1], ind);
        let t = converse(&mut v, t);
        assert_eq!(reasons(&mut v[0]), [HardLinkRejectReason::RemoteNodeBusy]);
        // A partial-bandwidth link of priority 1 from A to B; C asks A for one of priority 1
        // too (equal: busy) and of priority 0 (lower), then A's other client asks for one of
        // priority 2 to C, which ends the first.
        v[0].hard_link_establish(t, CONN[0], link(HardLinkType::PartialBandwidth, 1, B, 0));
        let t = converse(&mut v, t);
        assert!(matches!(
            primitives(&mut v[0])[..],
            [(_, Primitive::HardLinkEstablished { .. })]
        ));
        v[2].hard_link_establish(t, CONN[2], link(HardLinkType::PartialBandwidth, 1, A, 0));
        let t = converse(&mut v, t);
        v[2].hard_link_establish(t, CONN[2], link(HardLinkType::PartialBandwidth, 0, A, 0));
        let t = converse(&mut v, t);
        assert_eq!(
            reasons(&mut v[2]),
            [
                HardLinkRejectReason::RemoteNodeBusy,
                HardLinkRejectReason::HigherPriorityLinkExists
            ]
        );
        v[0].hard_link_establish(t, OTHER.1, link(HardLinkType::PartialBandwidth, 2, C, 0));
        let t = converse(&mut v, t);
        let a = primitives(&mut v[0]);
        assert!(
            a.contains(&ended_for_a(
                HardLinkTerminateReason::HigherPriorityLinkRequested,
                link(HardLinkType::PartialBandwidth, 1, B, 0)
            )),
            "{a:?}"
        );
        assert!(
            a.iter()
                .any(|(c, p)| *c == OTHER.1 && matches!(p, Primitive::HardLinkEstablished { .. })),
            "{a:?}"
        );
        // B, pre-empted, sends again to everyone; A's data for B waits behind the link to C.
        sent_from(&mut v[0], (SAP, CONN[0]), B, b"waits for C's link");
        converse(&mut v, t);
        assert!(delivered(&mut v[1]).is_empty());
        assert_eq!(each(&v, |c| c.hard_links_ended)[..2], [1, 1]);
    }

    #[test]
    fn with_cas1_a_hard_link_takes_an_exclusive_link_and_keeps_other_nodes_off_until_it_ends() {
        let mut v = nodes(NodeConfig {
            cas1: true,
            ..node_config(vec![addr(A), addr(B), addr(C)])
        });
        // A has a link to C (its data went there first).
        sent_from(&mut v[0], (SAP, CONN[0]), C, b"before");
        let t = converse(&mut v, Duration::ZERO);
        assert_eq!(delivered(&mut v[2]), [b"before".to_vec()]);
        assert_eq!(v[0].counters().links_made, 1);
        primitives(&mut v[0]);
        v[0].hard_link_establish(t, CONN[0], link(HardLinkType::PartialBandwidth, 0, B, 0));
        // A's request for B's link is exclusive.
        let tx = v[0].poll_transmit(t).unwrap();
        let exclusive = tx.dpdus.iter().any(|d| {
            matches!(Dpdu::decode(&d.bytes), Ok((Dpdu { body: Body::ExpNonArqData { segment, .. }, .. }, _))
                if crate::cpdu::Cpdu::decode(&segment)
                    == Ok(crate::cpdu::Cpdu::PhysicalLinkRequest { exclusive: true }))
        });
        assert!(exclusive, "{:?}", types(&tx));
        for (j, n) in v.iter_mut().enumerate().skip(1) {
            hear(&tx, 0, n, j, &[]);
        }
        let t = converse(&mut v, tx.tx.peer_may_transmit_at());
        let got = primitives(&mut v[0]);
        assert!(
            matches!(got[..], [(_, Primitive::HardLinkEstablished { .. })]),
            "{got:?}"
        );
        // The hard link up, A broke its link to C (Annex B: the caller breaks its
        // nonexclusive links), and C's request for one is rejected: "supporting exclusive
        // link". C's data waits.
        assert_eq!(v[0].counters().links_broken, 1);
        sent_from(&mut v[2], (SAP, CONN[2]), A, b"from C");
        let t = converse(&mut v, t);
        assert_eq!(v[0].counters().link_requests_refused, 1);
        assert_eq!(v[2].counters().link_requests_rejected, 1);
        assert!(delivered(&mut v[0]).is_empty());
        // The hard link ends; C asks again once its hold is over, and its data goes.
        v[0].hard_link_terminate(t, CONN[0], addr(B));
        let t = converse(&mut v, t) + secs(10);
        v[2].handle_timeout(t);
        converse(&mut v, t);
        assert_eq!(delivered(&mut v[0]), [b"from C".to_vec()]);
        assert_eq!(v[0].counters().hard_links_ended, 1);
    }

    #[test]
    fn with_cas1_the_link_under_a_hard_link_is_not_broken_for_idling() {
        let mut v = nodes(NodeConfig {
            cas1: true,
            link_idle: Some(secs(5)),
            ..node_config(vec![addr(A), addr(B)])
        });
        v[0].hard_link_establish(
            Duration::ZERO,
            CONN[0],
            link(HardLinkType::Reservation, 0, B, 0),
        );
        let mut t = converse(&mut v, Duration::ZERO);
        assert!(matches!(
            primitives(&mut v[0])[..],
            [(_, Primitive::HardLinkEstablished { .. })]
        ));
        // A minute of silence: A, the caller, keeps the link its hard link needs.
        let idle = |v: &mut Vec<Node>, t: &mut Duration| {
            for _ in 0..12 {
                *t += secs(5);
                for n in v.iter_mut() {
                    n.handle_timeout(*t);
                }
                *t = converse(v, *t);
            }
        };
        idle(&mut v, &mut t);
        assert_eq!(v[0].counters().links_broken, 0);
        // Once the hard link ends, the idle link is broken as any other.
        v[0].hard_link_terminate(t, CONN[0], addr(B));
        t = converse(&mut v, t);
        idle(&mut v, &mut t);
        assert_eq!(v[0].counters().links_broken, 1);
    }

    #[test]
    fn a_withdrawn_request_s_late_confirm_does_not_answer_the_next_request() {
        let mut v = trio();
        let first = link(HardLinkType::PartialBandwidth, 0, B, 0);
        v[0].hard_link_establish(Duration::ZERO, CONN[0], first);
        let request = v[0].poll_transmit(Duration::ZERO).unwrap();
        hear(&request, 0, &mut v[1], 1, &[]);
        let t = request.tx.peer_may_transmit_at();
        // A's client withdraws it before B's CONFIRM is back, and asks for another link to B.
        v[0].hard_link_terminate(t, CONN[0], addr(B));
        let second = link(HardLinkType::Reservation, 1, B, 0);
        v[0].hard_link_establish(t, CONN[0], second);
        let confirm = v[1].poll_transmit(t).unwrap();
        hear(&confirm, 1, &mut v[0], 0, &[]);
        // That CONFIRM answered the first request: it does not make the second.
        assert!(primitives(&mut v[0]).is_empty());
        converse(&mut v, confirm.tx.peer_may_transmit_at());
        // B ended the first on A's TERMINATE and confirmed the second, which A's client hears
        // about once.
        assert_eq!(primitives(&mut v[0]), [made_for_a(second)]);
        assert_eq!(
            (
                v[1].counters().hard_links_made,
                v[1].counters().hard_links_ended
            ),
            (2, 1)
        );
    }

    /// One seeded run of four nodes whose clients send U_PDUs to each other and ask for,
    /// accept, refuse and end hard links at random over a channel that loses a tenth of the
    /// D_PDUs; then every client ends its hard links. Every U_PDU must arrive exactly once,
    /// every request be answered, and every node go quiet.
    fn random_hard_links(seed: u64, cas1: bool) {
        use rand::{Rng, SeedableRng};
        type Rng8 = rand_chacha::ChaCha8Rng;
        const D: u32 = 0x010B_0C0D;
        let names = [A, B, C, D];
        let mut rng = Rng8::seed_from_u64(seed);
        let mut v = nodes(NodeConfig {
            cas1,
            // Every other CAS-1 run breaks idle links too.
            link_idle: (cas1 && seed % 4 == 3).then_some(secs(10)),
            link_retries: None,
            ..node_config(names.iter().map(|&n| addr(n)).collect())
        });
        struct Run {
            t: Duration,
            sent: Vec<(usize, Vec<u8>)>,
            got: Vec<(usize, Vec<u8>)>,
            /// Per node: hard-link requests of its client not answered yet.
            open: [u32; 4],
            /// Per node: the remote node of its client's hard link, once made.
            holds: [Option<u32>; 4],
        }
        let mut run = Run {
            t: Duration::ZERO,
            sent: Vec::new(),
            got: Vec::new(),
            open: [0; 4],
            holds: [None; 4],
        };
        // Every node keys up in turn; the clients answer what they got.
        let step = |v: &mut Vec<Node>, run: &mut Run, rng: &mut Rng8| {
            run.t = super::lossy_round(v, run.t, rng);
            for (i, n) in v.iter_mut().enumerate() {
                for e in events(n) {
                    match e.primitive {
                        Primitive::UnidataIndication(ind) => run.got.push((i, ind.updu.to_vec())),
                        Primitive::HardLinkIndication { link, .. } => {
                            if rng.random_bool(0.7) {
                                n.hard_link_accept(run.t, e.conn, link);
                                run.holds[i] = Some(link.remote.bits());
                            } else {
                                n.hard_link_reject(run.t, e.conn, link);
                            }
                        }
                        Primitive::HardLinkEstablished { link, .. } => {
                            run.open[i] -= 1;
                            run.holds[i] = Some(link.remote.bits());
                        }
                        Primitive::HardLinkRejected { .. } => run.open[i] -= 1,
                        Primitive::HardLinkTerminated { .. } => run.holds[i] = None,
                        _ => {}
                    }
                }
            }
        };
        // A client ends its link only with no request of its own open (ending a link
        // while asking for another would withdraw the request, which is then unanswered).
        let end = |v: &mut Vec<Node>, run: &mut Run, i: usize| {
            if run.open[i] == 0
                && let Some(remote) = run.holds[i].take()
            {
                v[i].hard_link_terminate(run.t, CONN[i], addr(remote));
            }
        };
        let types = [
            HardLinkType::Reservation,
            HardLinkType::PartialBandwidth,
            HardLinkType::FullBandwidth,
        ];
        for k in 0..60u32 {
            let i = rng.random_range(0..4);
            let j = (i + rng.random_range(1..4)) % 4;
            match rng.random_range(0..10) {
                0..6 => {
                    let updu = format!("{seed}/{k} from {i}").into_bytes();
                    run.sent.push((j, updu.clone()));
                    sent_from(&mut v[i], (SAP, CONN[i]), names[j], &updu);
                }
                6..8 => {
                    let ty = types[rng.random_range(0..3)];
                    let l = link(ty, rng.random_range(0..4), names[j], SAP);
                    run.open[i] += 1;
                    v[i].hard_link_establish(run.t, CONN[i], l);
                }
                8 => end(&mut v, &mut run, i),
                _ => {
                    // The client withdraws its request still waiting for an answer, if any
                    // (it then gets none).
                    if let Some(p) = v[i].hard_request_pending() {
                        v[i].hard_link_terminate(run.t, CONN[i], addr(names[p]));
                        run.open[i] -= 1;
                    }
                }
            }
            for _ in 0..rng.random_range(0..4) {
                step(&mut v, &mut run, &mut rng);
            }
        }
        // Every client ends what it holds; the channel runs until everything is done,
        // skipping idle time to the next timer (bounded: a node that never goes quiet fails).
        for round in 0..3000 {
            for i in 0..4 {
                end(&mut v, &mut run, i);
            }
            step(&mut v, &mut run, &mut rng);
            let busy = v.iter().any(|n| n.has_work() || n.poll_timeout().is_some());
            if !busy && run.got.len() >= run.sent.len() && run.open == [0; 4] {
                break;
            }
            if !v.iter().any(Node::has_work) {
                let next = v.iter().filter_map(Node::poll_timeout).min();
                run.t = next.unwrap_or(run.t).max(run.t) + secs(1);
            }
            assert!(
                round < 2999,
                "seed {seed}: not quiet: {} of {} delivered, requests open {:?}",
                run.got.len(),
                run.sent.len(),
                run.open
            );
        }
        run.sent.sort();
        run.got.sort();
        assert_eq!(run.got, run.sent, "seed {seed}, cas1 {cas1}");
    }

    #[test]
    fn random_hard_links_with_lossy_air_deliver_everything_once_and_answer_every_request() {
        for seed in 0..40 {
            random_hard_links(seed, seed % 2 == 1);
        }
    }

    #[test]
    fn a_hard_link_ends_when_its_peer_restarts() {
        let (mut v, made, t) = asked_of_b(link(HardLinkType::PartialBandwidth, 0, B, 0));
        primitives(&mut v[0]);
        assert_eq!(v[0].hard_link_peer(), Some(1));
        // B goes down and comes back knowing nothing of it; its client sends A data, which B
        // sends only after its FULL RESET, and A, obeying, ends the hard link.
        v[1].restart(t).unwrap();
        assert!(v[1].bind(sap(), 0, CONN[1], false));
        sent_from(&mut v[1], (SAP, CONN[1]), A, b"after the restart");
        converse(&mut v, t);
        let a = primitives(&mut v[0]);
        assert!(
            a.contains(&ended_for_a(
                HardLinkTerminateReason::PhysicalLinkBroken,
                made
            )),
            "{a:?}"
        );
        assert!(
            a.iter().any(|(_, p)| matches!(
                p,
                Primitive::UnidataIndication(i) if i.updu.as_ref() == b"after the restart"
            )),
            "{a:?}"
        );
        assert_eq!(v[0].hard_link_peer(), None);
        assert_eq!(v[0].counters().full_resets_obeyed, 1);
    }

    #[test]
    fn a_hard_link_ends_with_its_lost_link_and_a_request_nobody_answers_is_rejected() {
        let mut v = trio();
        v[0].hard_link_establish(
            Duration::ZERO,
            CONN[0],
            link(HardLinkType::PartialBandwidth, 0, B, 0),
        );
        let mut t = converse(&mut v, Duration::ZERO);
        primitives(&mut v[0]);
        // B falls silent; A keeps sending it data until it declares the link lost.
        sent_from(&mut v[0], (SAP, CONN[0]), B, b"into silence");
        for _ in 0..=super::super::DEFAULT_LINK_RETRIES + 1 {
            v[0].handle_timeout(t);
            match v[0].poll_transmit(t) {
                Some(tx) => t = tx.tx.end + secs(5),
                None => t += secs(5),
            }
        }
        let a = primitives(&mut v[0]);
        assert!(
            a.contains(&ended_for_a(
                HardLinkTerminateReason::PhysicalLinkBroken,
                link(HardLinkType::PartialBandwidth, 0, B, 0)
            )),
            "{a:?}"
        );
        // A request to C, whose answers never arrive: rejected, not responding.
        v[0].hard_link_establish(t, CONN[0], link(HardLinkType::PartialBandwidth, 0, C, 0));
        for _ in 0..40 {
            v[0].handle_timeout(t);
            match v[0].poll_transmit(t) {
                Some(tx) => t = tx.tx.end + secs(5),
                None => t = v[0].poll_timeout().map_or(t + secs(5), |d| d.max(t)),
            }
        }
        let a = primitives(&mut v[0]);
        assert!(
            a.iter().any(|(_, p)| matches!(
                p,
                Primitive::HardLinkRejected {
                    reason: HardLinkRejectReason::RemoteNodeNotResponding,
                    ..
                }
            )),
            "{a:?}"
        );
    }
}
