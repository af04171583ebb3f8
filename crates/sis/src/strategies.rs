//! proptest strategies for every S_Primitive (test-only). Values respect the invariants the
//! wire format imposes (4-bit reasons, no priority on expedited primitives, block lists only in
//! mode 3, Rockwell form only outside mode 3), so that decode(encode(p)) == p must hold.

use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Union};

use crate::address::NodeAddress;
use crate::fields::*;
use crate::primitive::*;
use crate::reason::*;

pub(crate) fn nibble() -> impl Strategy<Value = u8> {
    0u8..=15
}

pub(crate) fn address() -> impl Strategy<Value = NodeAddress> {
    (0u32..=NodeAddress::MASK, any::<bool>()).prop_map(|(bits, group)| {
        if group {
            NodeAddress::group(bits).unwrap()
        } else {
            NodeAddress::new(bits).unwrap()
        }
    })
}

pub(crate) fn sap() -> impl Strategy<Value = SapId> {
    nibble().prop_map(|v| SapId::new(v).unwrap())
}

fn tx_mode() -> impl Strategy<Value = TxMode> {
    nibble().prop_map(TxMode::from_bits)
}

pub(crate) fn service() -> impl Strategy<Value = ServiceType> {
    (tx_mode(), 0u8..4, any::<bool>(), nibble()).prop_map(|(tx_mode, c, o, r)| ServiceType {
        tx_mode,
        confirmation: Confirmation::from_bits(c),
        order: if o {
            DeliveryOrder::AsTheyArrive
        } else {
            DeliveryOrder::InOrder
        },
        min_retransmissions: Retransmissions::new(r).unwrap(),
    })
}

fn payload(max: usize) -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

fn link() -> impl Strategy<Value = HardLink> {
    (0u8..4, 0u8..4, sap(), address()).prop_map(|(t, p, remote_sap, remote)| HardLink {
        link_type: HardLinkType::from_bits(t),
        priority: LinkPriority::new(p).unwrap(),
        remote_sap,
        remote,
    })
}

pub(crate) fn request(expedited: bool) -> impl Strategy<Value = UnidataRequest> {
    (
        nibble(),
        sap(),
        address(),
        service(),
        0u32..=Ttl::MAX_UNITS,
        payload(300),
    )
        .prop_map(move |(p, dest_sap, dest, mode, ttl, updu)| UnidataRequest {
            priority: Priority::new(if expedited { 0 } else { p }).unwrap(),
            dest_sap,
            dest,
            mode,
            ttl: Ttl::from_units(ttl).unwrap(),
            updu,
        })
}

fn block() -> impl Strategy<Value = Block> {
    (any::<u16>(), any::<u16>()).prop_map(|(offset, size)| Block { offset, size })
}

pub(crate) fn indication(expedited: bool) -> impl Strategy<Value = UnidataIndication> {
    (
        nibble(),
        sap(),
        address(),
        tx_mode(),
        sap(),
        address(),
        vec(block(), 0..5),
        vec(block(), 0..5),
        any::<bool>(),
        payload(300),
    )
        .prop_map(
            move |(p, dest_sap, dest, tx_mode, src_sap, src, e, m, rockwell, updu)| {
                let mode3 = tx_mode == TxMode::NonArqWithErrors;
                UnidataIndication {
                    priority: Priority::new(if expedited { 0 } else { p }).unwrap(),
                    dest_sap,
                    dest,
                    tx_mode,
                    src_sap,
                    src,
                    errored: if mode3 { e } else { Vec::new() },
                    missing: if mode3 { m } else { Vec::new() },
                    rockwell_form: rockwell && !mode3,
                    updu,
                }
            },
        )
}

fn confirm() -> impl Strategy<Value = UnidataConfirm> {
    (sap(), address(), payload(64)).prop_map(|(dest_sap, dest, updu_part)| UnidataConfirm {
        dest_sap,
        dest,
        updu_part,
    })
}

fn rejected() -> impl Strategy<Value = UnidataRejected> {
    (nibble(), sap(), address(), payload(64)).prop_map(|(r, dest_sap, dest, updu_part)| {
        UnidataRejected {
            reason: UnidataRejectReason::from(r),
            dest_sap,
            dest,
            updu_part,
        }
    })
}

/// Any of the 27 primitives.
pub(crate) fn primitive() -> impl Strategy<Value = Primitive> {
    let arms: Vec<BoxedStrategy<Primitive>> = vec![
        (sap(), nibble(), service())
            .prop_map(|(sap, r, service)| Primitive::BindRequest {
                sap,
                rank: Rank::new(r).unwrap(),
                service: ServiceType { ..service },
            })
            .boxed(),
        Just(Primitive::UnbindRequest).boxed(),
        (sap(), any::<u16>())
            .prop_map(|(sap, mtu)| Primitive::BindAccepted { sap, mtu })
            .boxed(),
        any::<u8>()
            .prop_map(|r| Primitive::BindRejected {
                reason: BindRejectReason::from(r),
            })
            .boxed(),
        any::<u8>()
            .prop_map(|r| Primitive::UnbindIndication {
                reason: UnbindReason::from(r),
            })
            .boxed(),
        link().prop_map(Primitive::HardLinkEstablish).boxed(),
        address()
            .prop_map(|remote| Primitive::HardLinkTerminate { remote })
            .boxed(),
        (any::<u8>(), link())
            .prop_map(|(remote_status, link)| Primitive::HardLinkEstablished {
                remote_status,
                link,
            })
            .boxed(),
        (any::<u8>(), link())
            .prop_map(|(r, link)| Primitive::HardLinkRejected {
                reason: HardLinkRejectReason::from(r),
                link,
            })
            .boxed(),
        (any::<u8>(), link())
            .prop_map(|(r, link)| Primitive::HardLinkTerminated {
                reason: HardLinkTerminateReason::from(r),
                link,
            })
            .boxed(),
        (any::<u8>(), link())
            .prop_map(|(remote_status, link)| Primitive::HardLinkIndication {
                remote_status,
                link,
            })
            .boxed(),
        link().prop_map(Primitive::HardLinkAccept).boxed(),
        (any::<u8>(), link())
            .prop_map(|(reason, link)| Primitive::HardLinkReject { reason, link })
            .boxed(),
        (any::<u8>(), any::<u8>())
            .prop_map(|(s, r)| Primitive::SubnetAvailability {
                status: SubnetStatus::from(s),
                reason: SubnetReason::from(r),
            })
            .boxed(),
        Just(Primitive::DataFlowOn).boxed(),
        Just(Primitive::DataFlowOff).boxed(),
        Just(Primitive::KeepAlive).boxed(),
        (any::<u8>(), payload(64))
            .prop_map(|(msg_type, body)| Primitive::ManagementRequest { msg_type, body })
            .boxed(),
        (any::<u8>(), payload(64))
            .prop_map(|(msg_type, body)| Primitive::ManagementIndication { msg_type, body })
            .boxed(),
        request(false).prop_map(Primitive::UnidataRequest).boxed(),
        indication(false)
            .prop_map(Primitive::UnidataIndication)
            .boxed(),
        confirm().prop_map(Primitive::UnidataRequestConfirm).boxed(),
        rejected()
            .prop_map(Primitive::UnidataRequestRejected)
            .boxed(),
        request(true)
            .prop_map(Primitive::ExpeditedUnidataRequest)
            .boxed(),
        indication(true)
            .prop_map(Primitive::ExpeditedUnidataIndication)
            .boxed(),
        confirm()
            .prop_map(Primitive::ExpeditedUnidataRequestConfirm)
            .boxed(),
        rejected()
            .prop_map(Primitive::ExpeditedUnidataRequestRejected)
            .boxed(),
    ];
    Union::new(arms)
}
