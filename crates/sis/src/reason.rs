//! Reason and status codes carried by S_Primitives, one enum per code space. Every enum has an
//! `Unknown(u8)` variant for values the standard leaves open, so decoding never fails on a code
//! a server invents.

use std::fmt;

macro_rules! code_enum {
    (
        $(#[$doc:meta])* $name:ident {
            $( $(#[$vdoc:meta])* $variant:ident = $value:literal => $text:literal, )*
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vdoc])* $variant, )*
            /// A value the standard does not define (kept as received).
            Unknown(u8),
        }

        impl From<u8> for $name {
            fn from(value: u8) -> Self {
                match value {
                    $( $value => $name::$variant, )*
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for u8 {
            fn from(value: $name) -> u8 {
                match value {
                    $( $name::$variant => $value, )*
                    $name::Unknown(other) => other,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $( $name::$variant => f.write_str($text), )*
                    $name::Unknown(v) => write!(f, "unknown reason code {v}"),
                }
            }
        }
    };
}

code_enum!(
    /// Reason in S_BIND_REJECTED (a full byte).
    BindRejectReason {
        /// 1: the node has not enough resources.
        NotEnoughResources = 1 => "not enough resources",
        /// 2: invalid SAP ID.
        InvalidSap = 2 => "invalid SAP ID",
        /// 3: the SAP ID is already bound by another client.
        SapAlreadyAllocated = 3 => "SAP ID already allocated",
        /// 4: ARQ mode cannot be supported during a broadcast session.
        ArqUnsupportableDuringBroadcast = 4 => "ARQ mode unsupportable during broadcast session",
    }
);

code_enum!(
    /// Reason in S_UNBIND_INDICATION (a full byte).
    UnbindReason {
        /// 1: pre-empted by a higher-ranked client.
        PreemptedByHigherRank = 1 => "connection pre-empted by higher-ranked client",
        /// 2: inactivity (no answer to a keep-alive).
        Inactivity = 2 => "inactivity (no response to keep-alive)",
        /// 3: too many invalid primitives.
        TooManyInvalidPrimitives = 3 => "too many invalid primitives",
        /// 4: too many expedited data requests.
        TooManyExpeditedRequests = 4 => "too many expedited data requests",
        /// 5: ARQ mode cannot be supported during a broadcast session.
        ArqUnsupportableDuringBroadcast = 5 => "ARQ mode unsupportable during broadcast session",
    }
);

code_enum!(
    /// Reason in S_(EXPEDITED_)UNIDATA_REQUEST_REJECTED (4 bits; values above 15 cannot be sent).
    UnidataRejectReason {
        /// 1: the TTL expired before delivery.
        TtlExpired = 1 => "TTL expired",
        /// 2: the destination SAP is not bound.
        DestinationSapNotBound = 2 => "destination SAP ID not bound",
        /// 3: the destination node did not respond.
        DestinationNodeNotResponding = 3 => "destination node not responding",
        /// 4: the U_PDU is larger than the MTU.
        UpduLargerThanMtu = 4 => "U_PDU larger than MTU",
        /// 5: the transmission mode was not specified.
        TxModeNotSpecified = 5 => "transmission mode not specified",
    }
);

code_enum!(
    /// Reason in S_HARD_LINK_REJECTED.
    HardLinkRejectReason {
        /// 1: the remote node is busy.
        RemoteNodeBusy = 1 => "remote node busy",
        /// 2: a higher-priority link exists.
        HigherPriorityLinkExists = 2 => "higher priority link existing",
        /// 3: the remote node does not respond.
        RemoteNodeNotResponding = 3 => "remote node not responding",
        /// 4: the destination SAP is not bound.
        DestinationSapNotBound = 4 => "destination SAP ID not bound",
        /// 5: a requested type 0 link exists.
        Type0LinkExists = 5 => "requested type 0 link exists",
    }
);

code_enum!(
    /// Reason in S_HARD_LINK_TERMINATED.
    HardLinkTerminateReason {
        /// 1: terminated by the remote node.
        TerminatedByRemote = 1 => "link terminated by remote node",
        /// 2: a higher-priority link was requested.
        HigherPriorityLinkRequested = 2 => "higher priority link requested",
        /// 3: the remote node stopped responding (timeout).
        RemoteNodeNotResponding = 3 => "remote node not responding (time-out)",
        /// 4: the destination SAP was unbound.
        DestinationSapUnbound = 4 => "destination SAP ID unbound",
        /// 5: the physical link broke.
        PhysicalLinkBroken = 5 => "physical link broken",
    }
);

code_enum!(
    /// Node status in S_SUBNET_AVAILABILITY.
    SubnetStatus {
        /// 0: off.
        Off = 0 => "off",
        /// 1: on.
        On = 1 => "on",
        /// 2: receive only.
        ReceiveOnly = 2 => "receive only",
        /// 3: half duplex.
        HalfDuplex = 3 => "half duplex",
        /// 4: full duplex.
        FullDuplex = 4 => "full duplex",
        /// 5: transmit only.
        TransmitOnly = 5 => "transmit only",
    }
);

code_enum!(
    /// Reason in S_SUBNET_AVAILABILITY.
    SubnetReason {
        /// 0: unspecified.
        Unspecified = 0 => "unspecified",
        /// 1: the local node is in EMCON.
        LocalNodeInEmcon = 1 => "local node in EMCON",
        /// 2: a higher-priority link was requested.
        HigherPriorityLinkRequested = 2 => "higher priority link requested",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_keep_unknowns() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(BindRejectReason::from(v)), v);
            assert_eq!(u8::from(SubnetStatus::from(v)), v);
        }
        assert_eq!(
            BindRejectReason::from(3),
            BindRejectReason::SapAlreadyAllocated
        );
        assert_eq!(BindRejectReason::from(0), BindRejectReason::Unknown(0));
        assert_eq!(
            UnbindReason::from(2).to_string(),
            "inactivity (no response to keep-alive)"
        );
        assert_eq!(
            UnidataRejectReason::from(9).to_string(),
            "unknown reason code 9"
        );
    }
}
