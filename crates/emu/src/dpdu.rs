//! STANAG 5066 Annex C D_PDUs: the frames the emulated nodes put on the air.
//!
//! This is the lowest protocol layer of the emulator: the Data Transfer Sublayer hands D_PDUs to
//! the modem, and the bytes produced here are what the channel model corrupts, what the peer
//! decodes and what the pcap writer records. The codec is sans-IO: [`Dpdu::encode`] turns a typed
//! frame into bytes, [`Dpdu::decode`] parses one frame from the start of a slice and [`scan`]
//! finds frames in an arbitrary byte stream (the receive side of the modem).
//!
//! Layout ([ED3-C] §C.3, `reference/s5066-sis.md` §4.1–4.2, checked against Wireshark's
//! `packet-s5066dts.c`):
//!
//! ```text
//! 90 EB | TYPE(b7-4) EOW-type(b3-0) | EOW content | EOT | m(b7-5) h(b4-0) | address (m bytes)
//!       | type-specific header | header CRC-16 (LE) | [segment (n <= 1023) | CRC-32 (LE)]
//! ```
//!
//! `h` counts the bytes from the TYPE byte to the header CRC inclusive, without the address;
//! the header CRC covers those bytes and the address. The address field holds `m` nibbles of
//! destination followed by `m` nibbles of source, most significant nibble first; leading zero
//! nibbles are dropped (the encoder picks the smallest `m` that holds both addresses).
//!
//! The decoder never panics and never reads past its input: every length is checked before
//! use, and every failure is a [`DecodeError`] variant that says what was wrong.

use crate::crc::{crc16, crc32};
use thiserror::Error;

/// The two sync bytes that start every D_PDU (Maury-Styles 0xEB90, sent LSB first).
pub const SYNC: [u8; 2] = [0x90, 0xEB];
/// Largest C_PDU segment a D_PDU can carry (10-bit size field).
pub const MAX_SEGMENT: usize = 1023;
/// Largest selective-ACK bitmap (128 FSNs, the maximum ARQ window).
pub const MAX_ACK_BITMAP: usize = 16;
/// Largest extended management message (h is 5 bits: 31 - 8).
pub const MAX_MANAGEMENT_EXTENSION: usize = 23;
/// Largest node address: 28 bits, written w.x.y.z with w in 0..=15.
pub const MAX_ADDRESS: u32 = 0x0FFF_FFFF;
/// Largest possible D_PDU on the wire: sync, h = 31, m = 7, a full segment and its CRC.
pub const MAX_DPDU_LEN: usize = 2 + 31 + 7 + MAX_SEGMENT + 4;

/// A 28-bit STANAG 5066 node address (Annex C §C.3.2.6), `w.x.y.z` with `w` in 0..=15.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Address(u32);

impl Address {
    /// The address with the given 28-bit value, or `None` if it does not fit in 28 bits.
    pub fn new(value: u32) -> Option<Self> {
        (value <= MAX_ADDRESS).then_some(Self(value))
    }

    /// The address `w.x.y.z`, or `None` if `w` is above 15.
    pub fn from_parts(w: u8, x: u8, y: u8, z: u8) -> Option<Self> {
        Self::new(u32::from_be_bytes([w, x, y, z]))
    }

    /// The 28-bit value.
    pub fn value(self) -> u32 {
        self.0
    }

    /// Number of nibbles needed to write this address (at least 1).
    fn nibbles(self) -> u8 {
        let bits = 32 - self.0.leading_zeros();
        u8::try_from(bits.div_ceil(4).max(1)).unwrap_or(7)
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [w, x, y, z] = self.0.to_be_bytes();
        write!(f, "{w}.{x}.{y}.{z}")
    }
}

/// The 12-bit Engineering Orderwire field: a 4-bit type and 8 bits of content ([ED3-C] §C.5).
///
/// Types 1–7 are decoded into their fields where [ED3-C]/Wireshark give a layout; the fields
/// keep their raw bit values so that every EOW survives a decode/encode round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eow {
    /// Type 0 (reserved; what a D_PDU carries when it has no EOW message), with its content.
    Reserved(u8),
    /// Type 1, DRC request (or advisory): data rate b7–4, interleaver b3–2, other b1–0.
    DrcRequest(RateRequest),
    /// Type 2, DRC response: response b7–5, reason b4–0.
    DrcResponse(Response),
    /// Type 3, unrecognised-type error: response b7–5 (0), reason b4–0 (the EOW type not known).
    UnrecognisedType(Response),
    /// Type 4, capability advertisement (one flag per bit).
    Capability(Capability),
    /// Type 5, frequency change / ALM request (Annex I); same layout as a DRC request.
    AlmRequest(RateRequest),
    /// Type 6, frequency change / ALM response; same layout as a DRC response.
    AlmResponse(Response),
    /// Type 7, HDR DRC request (only valid in a MANAGEMENT D_PDU): waveform b7–3, channels b2–0.
    HdrDrcRequest {
        /// Waveform: 0 MS110A, 1 MS110B, 2 S4285, 3 S4539, 4 S4529, 5 S4415, 6 S4481-FSK, 7–9 user.
        waveform: u8,
        /// Number of channels, 1–8 with 0 meaning 8 (3 bits).
        channels: u8,
    },
    /// Types 8–15: user-defined (Wireshark decodes 15 as the Annex L HFTRP token).
    Other {
        /// The EOW type, 8..=15.
        eow_type: u8,
        /// The content byte.
        content: u8,
    },
}

/// Content of a DRC (type 1) or ALM (type 5) request EOW.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateRequest {
    /// Data-rate code (4 bits): 0 = 75, 1 = 150, 2 = 300, 3 = 600, 4 = 1200, 5 = 2400,
    /// 6 = 3200, 7 = 3600, 8 = 4800, 9 = 6400, 10 = 8000, 11 = 9600 bit/s.
    pub rate: u8,
    /// Interleaver code (2 bits): 0 none, 1 short, 2 long, 3 reserved.
    pub interleaver: u8,
    /// Other parameters (2 bits): 0 request / independent Tx-Rx, 1 request Tx = Rx,
    /// 2 advisory independent, 3 advisory Tx = Rx.
    pub other: u8,
}

impl RateRequest {
    /// The data rate in bit/s that the rate code stands for, if it is a defined code.
    pub fn rate_bps(self) -> Option<u32> {
        const RATES: [u32; 12] = [
            75, 150, 300, 600, 1200, 2400, 3200, 3600, 4800, 6400, 8000, 9600,
        ];
        RATES.get(usize::from(self.rate)).copied()
    }

    fn to_byte(self) -> u8 {
        (self.rate & 0x0F) << 4 | (self.interleaver & 0x03) << 2 | (self.other & 0x03)
    }

    fn from_byte(b: u8) -> Self {
        Self {
            rate: b >> 4,
            interleaver: (b >> 2) & 0x03,
            other: b & 0x03,
        }
    }
}

/// Content of a DRC/ALM response (types 2, 6) or an unrecognised-type error (type 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// Response (3 bits): 0 accept, 1 refuse, 2 cancel, 3 confirm.
    pub response: u8,
    /// Reason (5 bits): 0 none, 1 Tx and Rx must be the same, 2 cannot change rate, 3 cannot
    /// change interleaving, 4 cannot change either, 5 not consistent with local conditions
    /// (for type 3: the EOW type that was not recognised).
    pub reason: u8,
}

impl Response {
    fn to_byte(self) -> u8 {
        (self.response & 0x07) << 5 | (self.reason & 0x1F)
    }

    fn from_byte(b: u8) -> Self {
        Self {
            response: b >> 5,
            reason: b & 0x1F,
        }
    }
}

/// Capability advertisement flags (EOW type 4), MSB first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capability {
    /// b7: adaptive (DRC-capable) modem parameters.
    pub drc: bool,
    /// b6: STANAG 4529 available.
    pub stanag_4529: bool,
    /// b5: MIL-STD-188-110A available.
    pub mil_std_188_110a: bool,
    /// b4: extended data rates available.
    pub extended_rates: bool,
    /// b3: full duplex supported.
    pub full_duplex: bool,
    /// b2: split frequency supported.
    pub split_frequency: bool,
    /// b1: non-ARCS ALE capable.
    pub non_arcs_ale: bool,
    /// b0: ARCS capable.
    pub arcs: bool,
}

impl Capability {
    fn to_byte(self) -> u8 {
        [
            self.drc,
            self.stanag_4529,
            self.mil_std_188_110a,
            self.extended_rates,
            self.full_duplex,
            self.split_frequency,
            self.non_arcs_ale,
            self.arcs,
        ]
        .iter()
        .fold(0u8, |acc, &f| acc << 1 | u8::from(f))
    }

    fn from_byte(b: u8) -> Self {
        let bit = |n: u8| b & (1 << n) != 0;
        Self {
            drc: bit(7),
            stanag_4529: bit(6),
            mil_std_188_110a: bit(5),
            extended_rates: bit(4),
            full_duplex: bit(3),
            split_frequency: bit(2),
            non_arcs_ale: bit(1),
            arcs: bit(0),
        }
    }
}

impl Eow {
    /// No EOW message: type 0, content 0.
    pub const NONE: Eow = Eow::Reserved(0);

    /// The 4-bit EOW type.
    pub fn eow_type(self) -> u8 {
        match self {
            Eow::Reserved(_) => 0,
            Eow::DrcRequest(_) => 1,
            Eow::DrcResponse(_) => 2,
            Eow::UnrecognisedType(_) => 3,
            Eow::Capability(_) => 4,
            Eow::AlmRequest(_) => 5,
            Eow::AlmResponse(_) => 6,
            Eow::HdrDrcRequest { .. } => 7,
            Eow::Other { eow_type, .. } => eow_type & 0x0F,
        }
    }

    /// The 8-bit content.
    pub fn content(self) -> u8 {
        match self {
            Eow::Reserved(c) | Eow::Other { content: c, .. } => c,
            Eow::DrcRequest(r) | Eow::AlmRequest(r) => r.to_byte(),
            Eow::DrcResponse(r) | Eow::UnrecognisedType(r) | Eow::AlmResponse(r) => r.to_byte(),
            Eow::Capability(c) => c.to_byte(),
            Eow::HdrDrcRequest { waveform, channels } => (waveform & 0x1F) << 3 | (channels & 0x07),
        }
    }

    /// Decode an EOW from its type nibble and content byte.
    pub fn from_parts(eow_type: u8, content: u8) -> Eow {
        match eow_type & 0x0F {
            0 => Eow::Reserved(content),
            1 => Eow::DrcRequest(RateRequest::from_byte(content)),
            2 => Eow::DrcResponse(Response::from_byte(content)),
            3 => Eow::UnrecognisedType(Response::from_byte(content)),
            4 => Eow::Capability(Capability::from_byte(content)),
            5 => Eow::AlmRequest(RateRequest::from_byte(content)),
            6 => Eow::AlmResponse(Response::from_byte(content)),
            7 => Eow::HdrDrcRequest {
                waveform: content >> 3,
                channels: content & 0x07,
            },
            t => Eow::Other {
                eow_type: t,
                content,
            },
        }
    }

    fn is_valid(self) -> bool {
        match self {
            Eow::DrcRequest(r) | Eow::AlmRequest(r) => {
                r.rate <= 15 && r.interleaver <= 3 && r.other <= 3
            }
            Eow::DrcResponse(r) | Eow::UnrecognisedType(r) | Eow::AlmResponse(r) => {
                r.response <= 7 && r.reason <= 31
            }
            Eow::HdrDrcRequest { waveform, channels } => waveform <= 31 && channels <= 7,
            Eow::Other { eow_type, .. } => (8..=15).contains(&eow_type),
            Eow::Reserved(_) | Eow::Capability(_) => true,
        }
    }
}

/// Flags and sequence number shared by DATA-ONLY (type 0) and DATA-ACK (type 2) D_PDUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataHeader {
    /// C_PDU START: this segment is the first of its C_PDU.
    pub start: bool,
    /// C_PDU END: this segment is the last of its C_PDU.
    pub end: bool,
    /// DELIVER-IN-ORDER.
    pub deliver_in_order: bool,
    /// DROP C_PDU: the receiver must discard the C_PDU (and still ACK this frame).
    pub drop: bool,
    /// TX-WIN-UWE: this FSN is the transmitter's upper window edge.
    pub tx_uwe: bool,
    /// TX-WIN-LWE: this FSN is the transmitter's lower window edge.
    pub tx_lwe: bool,
    /// TX frame sequence number (mod 256).
    pub fsn: u8,
}

/// Receiver state carried by ACK-ONLY, EXP-ACK-ONLY and DATA-ACK D_PDUs: RX LWE and the
/// selective-ACK bitmap.
///
/// Bit 0 (the LSB of the first byte) stands for FSN `rx_lwe + 1`, bit 1 for `rx_lwe + 2`, and
/// so on through RX UWE; RX LWE itself is not received by definition and has no bit. A set bit
/// means "received with a good segment CRC". The bitmap length (0–16 bytes) is carried by h.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ack {
    /// RX LWE: the oldest FSN not yet received.
    pub rx_lwe: u8,
    /// Selective-ACK bitmap, at most [`MAX_ACK_BITMAP`] bytes.
    pub bitmap: Vec<u8>,
}

impl Ack {
    /// Build the ACK for a receiver whose window runs from `rx_lwe` to `rx_uwe` (inclusive),
    /// asking `received(fsn)` for every FSN after RX LWE. Returns `None` if the window is
    /// wider than the 128 FSNs a bitmap can hold.
    pub fn from_window(rx_lwe: u8, rx_uwe: u8, received: impl Fn(u8) -> bool) -> Option<Ack> {
        let span = usize::from(rx_uwe.wrapping_sub(rx_lwe));
        if span > MAX_ACK_BITMAP * 8 {
            return None;
        }
        let mut bitmap = vec![0u8; span.div_ceil(8)];
        for i in 0..span {
            // i < 128, so the cast cannot truncate.
            let fsn = rx_lwe.wrapping_add(1).wrapping_add(i as u8);
            if received(fsn)
                && let Some(byte) = bitmap.get_mut(i / 8)
            {
                *byte |= 1 << (i % 8);
            }
        }
        Some(Ack { rx_lwe, bitmap })
    }

    /// Whether this ACK acknowledges `fsn`: every FSN in the 128 before RX LWE counts as
    /// acknowledged, and FSNs after it are acknowledged when their bitmap bit is set.
    pub fn acknowledges(&self, fsn: u8) -> bool {
        let ahead = fsn.wrapping_sub(self.rx_lwe);
        if ahead == 0 {
            return false;
        }
        if ahead >= 128 {
            // Behind RX LWE (within the 128-frame window): already received.
            return true;
        }
        let i = usize::from(ahead - 1);
        self.bitmap
            .get(i / 8)
            .is_some_and(|b| b & (1 << (i % 8)) != 0)
    }

    /// The FSNs after RX LWE that the bitmap marks as received, in ascending order.
    pub fn selectively_acked(&self) -> impl Iterator<Item = u8> + '_ {
        let lwe = self.rx_lwe;
        (0..self.bitmap.len() * 8).filter_map(move |i| {
            let byte = self.bitmap.get(i / 8)?;
            // i < 128 because the bitmap is at most 16 bytes long.
            (byte & (1 << (i % 8)) != 0).then(|| lwe.wrapping_add(1).wrapping_add(i as u8))
        })
    }
}

/// RESET/WIN-RESYNC (type 3) fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reset {
    /// b3: FULL RESET CMD.
    pub full_reset: bool,
    /// b2: RESET TX WIN RQST.
    pub reset_tx_win_request: bool,
    /// b1: RESET RX WIN CMND.
    pub reset_rx_win_command: bool,
    /// b0: RESET ACK.
    pub reset_ack: bool,
    /// NEW RX LWE.
    pub new_rx_lwe: u8,
    /// RESET FRAME ID.
    pub reset_frame_id: u8,
}

/// EXP-DATA-ONLY (type 4) fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExpDataHeader {
    /// C_PDU START.
    pub start: bool,
    /// C_PDU END.
    pub end: bool,
    /// Expedited C_PDU ID (4 bits, mod 16).
    pub cpdu_id: u8,
    /// TX frame sequence number (reset to 0 for each expedited C_PDU).
    pub fsn: u8,
}

/// MANAGEMENT (type 6) fields. The management message itself is the D_PDU's EOW.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Management {
    /// b1: VALID MESSAGE (the EOW holds a management message).
    pub valid_message: bool,
    /// b0: ACK (this frame acknowledges the management frame with the same ID).
    pub ack: bool,
    /// MANAGEMENT FRAME ID (0–255).
    pub frame_id: u8,
    /// Extended management message (0–23 bytes); `Some` sets the EXTENDED flag (b2).
    pub extended: Option<Vec<u8>>,
}

/// NON-ARQ DATA (type 7) and EXPEDITED NON-ARQ DATA (type 8) fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NonArqHeader {
    /// C_PDU ID (12 bits, mod 4096).
    pub cpdu_id: u16,
    /// DELIVER-IN-ORDER.
    pub deliver_in_order: bool,
    /// GROUP ADDRESS: the destination is a group address (the 29th address bit).
    pub group: bool,
    /// Size of the whole C_PDU in bytes.
    pub cpdu_size: u16,
    /// Offset of this segment in the C_PDU.
    pub segment_offset: u16,
    /// C_PDU reception window in 0.5 s units.
    pub reception_window: u16,
}

/// Reasons of a WARNING D_PDU ([ED3-C]).
pub mod warning_reason {
    /// Unrecognised D_PDU type.
    pub const UNRECOGNISED_TYPE: u8 = 0;
    /// A connection-related D_PDU received while not connected.
    pub const NOT_CONNECTED: u8 = 1;
    /// An invalid D_PDU.
    pub const INVALID: u8 = 2;
    /// A D_PDU invalid for the current state.
    pub const INVALID_FOR_STATE: u8 = 3;
}

/// WARNING (type 15) fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Warning {
    /// The D_PDU type of the frame that caused the warning (4 bits).
    pub received_type: u8,
    /// Reason (4 bits): 0 unrecognised type, 1 connection-related D_PDU while not connected,
    /// 2 invalid D_PDU, 3 invalid for the current state.
    pub reason: u8,
}

/// The type-specific part of a D_PDU, with its segment for the I and I+C frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// Type 0: DATA-ONLY.
    DataOnly {
        /// Flags and FSN.
        header: DataHeader,
        /// C_PDU segment (at most [`MAX_SEGMENT`] bytes).
        segment: Vec<u8>,
    },
    /// Type 1: ACK-ONLY.
    AckOnly(Ack),
    /// Type 2: DATA-ACK.
    DataAck {
        /// Flags and FSN.
        header: DataHeader,
        /// Receiver state piggy-backed on the data.
        ack: Ack,
        /// C_PDU segment.
        segment: Vec<u8>,
    },
    /// Type 3: RESET/WIN-RESYNC.
    ResetWinResync(Reset),
    /// Type 4: EXPEDITED DATA-ONLY.
    ExpDataOnly {
        /// Flags, C_PDU ID and FSN.
        header: ExpDataHeader,
        /// C_PDU segment.
        segment: Vec<u8>,
    },
    /// Type 5: EXPEDITED ACK-ONLY.
    ExpAckOnly(Ack),
    /// Type 6: MANAGEMENT.
    Management(Management),
    /// Type 7: NON-ARQ DATA.
    NonArqData {
        /// Non-ARQ fields.
        header: NonArqHeader,
        /// C_PDU segment.
        segment: Vec<u8>,
    },
    /// Type 8: EXPEDITED NON-ARQ DATA.
    ExpNonArqData {
        /// Non-ARQ fields.
        header: NonArqHeader,
        /// C_PDU segment.
        segment: Vec<u8>,
    },
    /// Type 15: WARNING.
    Warning(Warning),
}

impl Body {
    /// The 4-bit D_PDU type.
    pub fn dpdu_type(&self) -> u8 {
        match self {
            Body::DataOnly { .. } => 0,
            Body::AckOnly(_) => 1,
            Body::DataAck { .. } => 2,
            Body::ResetWinResync(_) => 3,
            Body::ExpDataOnly { .. } => 4,
            Body::ExpAckOnly(_) => 5,
            Body::Management(_) => 6,
            Body::NonArqData { .. } => 7,
            Body::ExpNonArqData { .. } => 8,
            Body::Warning(_) => 15,
        }
    }

    /// The C_PDU segment, for the frame types that carry one.
    pub fn segment(&self) -> Option<&[u8]> {
        match self {
            Body::DataOnly { segment, .. }
            | Body::DataAck { segment, .. }
            | Body::ExpDataOnly { segment, .. }
            | Body::NonArqData { segment, .. }
            | Body::ExpNonArqData { segment, .. } => Some(segment),
            _ => None,
        }
    }

    /// h: header size from the TYPE byte to the header CRC inclusive, address excluded.
    fn header_size(&self) -> usize {
        match self {
            Body::DataOnly { .. } | Body::ExpDataOnly { .. } | Body::ResetWinResync(_) => 9,
            Body::AckOnly(ack) | Body::ExpAckOnly(ack) => 7 + ack.bitmap.len(),
            Body::DataAck { ack, .. } => 10 + ack.bitmap.len(),
            Body::Management(m) => 8 + m.extended.as_ref().map_or(0, Vec::len),
            Body::NonArqData { .. } | Body::ExpNonArqData { .. } => 15,
            Body::Warning(_) => 7,
        }
    }
}

/// One D_PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dpdu {
    /// Engineering orderwire.
    pub eow: Eow,
    /// EOT: time left in the whole transmission, in 0.5 s units (255 = 127.5 s).
    pub eot: u8,
    /// Destination node (a group address if the non-ARQ GROUP flag is set).
    pub destination: Address,
    /// Source node.
    pub source: Address,
    /// Type-specific fields and segment.
    pub body: Body,
}

/// Why a D_PDU could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// The segment is longer than the 10-bit size field allows.
    #[error("C_PDU segment of {0} bytes is longer than the 1023 bytes a D_PDU can carry")]
    SegmentTooLong(usize),
    /// The selective-ACK bitmap is longer than 16 bytes.
    #[error("selective-ACK bitmap of {0} bytes is longer than the 16 bytes (128 FSNs) allowed")]
    AckBitmapTooLong(usize),
    /// The extended management message is longer than 23 bytes.
    #[error("extended management message of {0} bytes is longer than the 23 bytes allowed")]
    ManagementTooLong(usize),
    /// A field holds a value wider than its bit field.
    #[error("field {field} = {value} does not fit in its {bits}-bit field")]
    FieldOutOfRange {
        /// Name of the field.
        field: &'static str,
        /// The value given.
        value: u32,
        /// Width of the field in bits.
        bits: u8,
    },
}

/// Why bytes could not be decoded as a D_PDU.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The input does not start with the sync bytes 0x90 0xEB.
    #[error("no D_PDU sync (0x90 0xEB) at the start of the input")]
    NoSync,
    /// The input ends before the frame does.
    #[error("D_PDU truncated: {needed} bytes needed, {available} available")]
    Truncated {
        /// Bytes the frame needs (so far as known).
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// The SIZE OF ADDRESS field is 0 (it must be 1–7).
    #[error("D_PDU address size is 0 (must be 1 to 7 bytes)")]
    BadAddressSize,
    /// The header CRC-16 does not match.
    #[error("D_PDU header CRC mismatch: computed {computed:#06x}, received {received:#06x}")]
    BadHeaderCrc {
        /// CRC computed over the received header.
        computed: u16,
        /// CRC found in the frame.
        received: u16,
    },
    /// The D_PDU type is one of the reserved values 9–14.
    #[error("unknown D_PDU type {0} (types 9-14 are reserved)")]
    UnknownType(u8),
    /// The header size h is not one the type allows.
    #[error("D_PDU type {dpdu_type} cannot have header size {header_size}")]
    BadHeaderSize {
        /// The D_PDU type.
        dpdu_type: u8,
        /// The h field received.
        header_size: u8,
    },
    /// The segment CRC-32 does not match (the header was good).
    #[error("C_PDU segment CRC mismatch: computed {computed:#010x}, received {received:#010x}")]
    BadSegmentCrc {
        /// CRC computed over the received segment.
        computed: u32,
        /// CRC found in the frame.
        received: u32,
    },
}

fn check(field: &'static str, value: u32, bits: u8) -> Result<(), EncodeError> {
    if value >> bits == 0 {
        Ok(())
    } else {
        Err(EncodeError::FieldOutOfRange { field, value, bits })
    }
}

fn seg_len(segment: &[u8]) -> Result<u16, EncodeError> {
    match u16::try_from(segment.len()) {
        Ok(n) if usize::from(n) <= MAX_SEGMENT => Ok(n),
        _ => Err(EncodeError::SegmentTooLong(segment.len())),
    }
}

fn check_ack(ack: &Ack) -> Result<(), EncodeError> {
    if ack.bitmap.len() > MAX_ACK_BITMAP {
        return Err(EncodeError::AckBitmapTooLong(ack.bitmap.len()));
    }
    Ok(())
}

fn data_flags(h: &DataHeader, size: u16) -> [u8; 2] {
    let flags = u8::from(h.start) << 7
        | u8::from(h.end) << 6
        | u8::from(h.deliver_in_order) << 5
        | u8::from(h.drop) << 4
        | u8::from(h.tx_uwe) << 3
        | u8::from(h.tx_lwe) << 2;
    let [hi, lo] = size.to_be_bytes();
    [flags | (hi & 0x03), lo]
}

fn non_arq_bytes(h: &NonArqHeader, size: u16, out: &mut Vec<u8>) {
    let [size_hi, size_lo] = size.to_be_bytes();
    let [id_hi, id_lo] = h.cpdu_id.to_be_bytes();
    out.push(
        (id_hi & 0x0F) << 4
            | u8::from(h.deliver_in_order) << 3
            | u8::from(h.group) << 2
            | (size_hi & 0x03),
    );
    out.push(size_lo);
    out.push(id_lo);
    out.extend_from_slice(&h.cpdu_size.to_be_bytes());
    out.extend_from_slice(&h.segment_offset.to_be_bytes());
    out.extend_from_slice(&h.reception_window.to_be_bytes());
}

impl Dpdu {
    /// A D_PDU with no EOW and an EOT of 0, which the sender fills in when it plans the
    /// transmission the D_PDU goes in.
    pub fn new(destination: Address, source: Address, body: Body) -> Dpdu {
        Dpdu {
            eow: Eow::NONE,
            eot: 0,
            destination,
            source,
            body,
        }
    }

    /// Encode the D_PDU with sync, header CRC and (for data frames) segment and CRC-32.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        if !self.eow.is_valid() {
            return Err(EncodeError::FieldOutOfRange {
                field: "EOW",
                value: u32::from(self.eow.eow_type()) << 8 | u32::from(self.eow.content()),
                bits: 12,
            });
        }
        // Type-specific header (after the address, before the CRC) and the segment.
        let mut specific = Vec::with_capacity(32);
        let mut segment: Option<&[u8]> = None;
        match &self.body {
            Body::DataOnly { header, segment: s } => {
                specific.extend_from_slice(&data_flags(header, seg_len(s)?));
                specific.push(header.fsn);
                segment = Some(s);
            }
            Body::AckOnly(ack) | Body::ExpAckOnly(ack) => {
                check_ack(ack)?;
                specific.push(ack.rx_lwe);
                specific.extend_from_slice(&ack.bitmap);
            }
            Body::DataAck {
                header,
                ack,
                segment: s,
            } => {
                check_ack(ack)?;
                specific.extend_from_slice(&data_flags(header, seg_len(s)?));
                specific.push(header.fsn);
                specific.push(ack.rx_lwe);
                specific.extend_from_slice(&ack.bitmap);
                segment = Some(s);
            }
            Body::ResetWinResync(r) => {
                specific.push(
                    u8::from(r.full_reset) << 3
                        | u8::from(r.reset_tx_win_request) << 2
                        | u8::from(r.reset_rx_win_command) << 1
                        | u8::from(r.reset_ack),
                );
                specific.push(r.new_rx_lwe);
                specific.push(r.reset_frame_id);
            }
            Body::ExpDataOnly { header, segment: s } => {
                check("C_PDU ID", u32::from(header.cpdu_id), 4)?;
                let [hi, lo] = seg_len(s)?.to_be_bytes();
                specific.push(
                    u8::from(header.start) << 7
                        | u8::from(header.end) << 6
                        | (header.cpdu_id & 0x0F) << 2
                        | (hi & 0x03),
                );
                specific.push(lo);
                specific.push(header.fsn);
                segment = Some(s);
            }
            Body::Management(m) => {
                if let Some(ext) = &m.extended
                    && ext.len() > MAX_MANAGEMENT_EXTENSION
                {
                    return Err(EncodeError::ManagementTooLong(ext.len()));
                }
                specific.push(
                    u8::from(m.extended.is_some()) << 2
                        | u8::from(m.valid_message) << 1
                        | u8::from(m.ack),
                );
                specific.push(m.frame_id);
                if let Some(ext) = &m.extended {
                    specific.extend_from_slice(ext);
                }
            }
            Body::NonArqData { header, segment: s }
            | Body::ExpNonArqData { header, segment: s } => {
                check("C_PDU ID", u32::from(header.cpdu_id), 12)?;
                non_arq_bytes(header, seg_len(s)?, &mut specific);
                segment = Some(s);
            }
            Body::Warning(w) => {
                check("received frame type", u32::from(w.received_type), 4)?;
                check("warning reason", u32::from(w.reason), 4)?;
                specific.push(w.received_type << 4 | w.reason);
            }
        }

        let m = self.destination.nibbles().max(self.source.nibbles());
        let h = self.body.header_size();
        debug_assert_eq!(h, 4 + specific.len() + 2);
        let mut out =
            Vec::with_capacity(2 + h + usize::from(m) + segment.map_or(0, |s| s.len() + 4));
        out.extend_from_slice(&SYNC);
        out.push(self.body.dpdu_type() << 4 | self.eow.eow_type());
        out.push(self.eow.content());
        out.push(self.eot);
        // h <= 31 for every valid body (checked above), m <= 7.
        out.push(m << 5 | (h as u8 & 0x1F));
        write_addresses(self.destination, self.source, m, &mut out);
        out.extend_from_slice(&specific);
        let hcrc = crc16(out.get(2..).unwrap_or_default());
        out.extend_from_slice(&hcrc.to_le_bytes());
        if let Some(s) = segment {
            out.extend_from_slice(s);
            out.extend_from_slice(&crc32(s).to_le_bytes());
        }
        Ok(out)
    }

    /// Length of the encoded frame in bytes (sync included).
    pub fn encoded_len(&self) -> usize {
        let m = usize::from(self.destination.nibbles().max(self.source.nibbles()));
        2 + self.body.header_size() + m + self.body.segment().map_or(0, |s| s.len() + 4)
    }

    /// Decode one D_PDU from the start of `input` (which must begin with the sync bytes).
    /// Returns the frame and the number of bytes it occupied.
    pub fn decode(input: &[u8]) -> Result<(Dpdu, usize), DecodeError> {
        Self::decode_checked(input, true)
    }

    /// [`Dpdu::decode`] for a frame whose header is good but whose segment may not be: the
    /// segment is taken as received, its CRC unchecked. Annex C (C.3.2.8) has a node act on
    /// a header with a valid CRC "regardless of" the segment's, and non-ARQ delivery with
    /// errors (C.4.2) places such a segment in its C_PDU "just as" received.
    pub fn decode_damaged(input: &[u8]) -> Result<(Dpdu, usize), DecodeError> {
        Self::decode_checked(input, false)
    }

    fn decode_checked(input: &[u8], check_segment: bool) -> Result<(Dpdu, usize), DecodeError> {
        let truncated = |needed: usize| DecodeError::Truncated {
            needed,
            available: input.len(),
        };
        match input {
            [] | [0x90] => return Err(truncated(2)),
            [0x90, 0xEB, ..] => {}
            _ => return Err(DecodeError::NoSync),
        }
        let fixed = input.get(2..6).ok_or_else(|| truncated(6))?;
        let (type_eow, eow_content, eot, sizes) = match fixed {
            &[a, b, c, d] => (a, b, c, d),
            _ => return Err(truncated(6)),
        };
        let m = usize::from(sizes >> 5);
        let h = usize::from(sizes & 0x1F);
        if m == 0 {
            return Err(DecodeError::BadAddressSize);
        }
        let dpdu_type = type_eow >> 4;
        if h < 6 {
            return Err(DecodeError::BadHeaderSize {
                dpdu_type,
                header_size: sizes & 0x1F,
            });
        }
        let header_end = 2 + h + m;
        let header = input
            .get(2..header_end)
            .ok_or_else(|| truncated(header_end))?;
        let (covered, crc_bytes) = header.split_at(h + m - 2);
        let received = u16::from_le_bytes([
            crc_bytes.first().copied().unwrap_or(0),
            crc_bytes.get(1).copied().unwrap_or(0),
        ]);
        let computed = crc16(covered);
        if computed != received {
            return Err(DecodeError::BadHeaderCrc { computed, received });
        }
        let bad_size = || DecodeError::BadHeaderSize {
            dpdu_type,
            header_size: sizes & 0x1F,
        };
        let address = covered.get(4..4 + m).ok_or_else(|| truncated(header_end))?;
        let (destination, source) = read_addresses(address, m);
        // Type-specific header bytes, between the address and the CRC.
        let spec = covered.get(4 + m..).unwrap_or_default();
        let byte = |i: usize| spec.get(i).copied().unwrap_or(0);
        let be16 = |i: usize| u16::from_be_bytes([byte(i), byte(i + 1)]);

        // Fixed header sizes first, so that every later index is in range.
        let expected = match dpdu_type {
            0 | 3 | 4 => Some(9),
            7 | 8 => Some(15),
            15 => Some(7),
            1 | 2 | 5 | 6 => None,
            t => return Err(DecodeError::UnknownType(t)),
        };
        if expected.is_some_and(|e| e != h) {
            return Err(bad_size());
        }
        let seg_size = usize::from(be16(0) & 0x03FF);
        let mut frame_len = header_end;
        let mut take_segment = || -> Result<Vec<u8>, DecodeError> {
            let end = header_end + seg_size + 4;
            let seg = input
                .get(header_end..header_end + seg_size)
                .ok_or_else(|| truncated(end))?;
            let crc = input
                .get(header_end + seg_size..end)
                .ok_or_else(|| truncated(end))?;
            let received = u32::from_le_bytes([
                crc.first().copied().unwrap_or(0),
                crc.get(1).copied().unwrap_or(0),
                crc.get(2).copied().unwrap_or(0),
                crc.get(3).copied().unwrap_or(0),
            ]);
            let computed = crc32(seg);
            if check_segment && computed != received {
                return Err(DecodeError::BadSegmentCrc { computed, received });
            }
            frame_len = end;
            Ok(seg.to_vec())
        };
        let data_header = || DataHeader {
            start: byte(0) & 0x80 != 0,
            end: byte(0) & 0x40 != 0,
            deliver_in_order: byte(0) & 0x20 != 0,
            drop: byte(0) & 0x10 != 0,
            tx_uwe: byte(0) & 0x08 != 0,
            tx_lwe: byte(0) & 0x04 != 0,
            fsn: byte(2),
        };
        let body = match dpdu_type {
            0 => Body::DataOnly {
                header: data_header(),
                segment: take_segment()?,
            },
            1 | 5 => {
                if !(7..=7 + MAX_ACK_BITMAP).contains(&h) {
                    return Err(bad_size());
                }
                let ack = Ack {
                    rx_lwe: byte(0),
                    bitmap: spec.get(1..).unwrap_or_default().to_vec(),
                };
                if dpdu_type == 1 {
                    Body::AckOnly(ack)
                } else {
                    Body::ExpAckOnly(ack)
                }
            }
            2 => {
                if !(10..=10 + MAX_ACK_BITMAP).contains(&h) {
                    return Err(bad_size());
                }
                let header = data_header();
                let ack = Ack {
                    rx_lwe: byte(3),
                    bitmap: spec.get(4..).unwrap_or_default().to_vec(),
                };
                Body::DataAck {
                    header,
                    ack,
                    segment: take_segment()?,
                }
            }
            3 => Body::ResetWinResync(Reset {
                full_reset: byte(0) & 0x08 != 0,
                reset_tx_win_request: byte(0) & 0x04 != 0,
                reset_rx_win_command: byte(0) & 0x02 != 0,
                reset_ack: byte(0) & 0x01 != 0,
                new_rx_lwe: byte(1),
                reset_frame_id: byte(2),
            }),
            4 => {
                let header = ExpDataHeader {
                    start: byte(0) & 0x80 != 0,
                    end: byte(0) & 0x40 != 0,
                    cpdu_id: (byte(0) >> 2) & 0x0F,
                    fsn: byte(2),
                };
                Body::ExpDataOnly {
                    header,
                    segment: take_segment()?,
                }
            }
            6 => {
                if h < 8 {
                    return Err(bad_size());
                }
                let extended_flag = byte(0) & 0x04 != 0;
                let ext = spec.get(2..).unwrap_or_default();
                if !extended_flag && !ext.is_empty() {
                    return Err(bad_size());
                }
                Body::Management(Management {
                    valid_message: byte(0) & 0x02 != 0,
                    ack: byte(0) & 0x01 != 0,
                    frame_id: byte(1),
                    extended: extended_flag.then(|| ext.to_vec()),
                })
            }
            7 | 8 => {
                let header = NonArqHeader {
                    cpdu_id: u16::from(byte(0) >> 4) << 8 | u16::from(byte(2)),
                    deliver_in_order: byte(0) & 0x08 != 0,
                    group: byte(0) & 0x04 != 0,
                    cpdu_size: be16(3),
                    segment_offset: be16(5),
                    reception_window: be16(7),
                };
                let segment = take_segment()?;
                if dpdu_type == 7 {
                    Body::NonArqData { header, segment }
                } else {
                    Body::ExpNonArqData { header, segment }
                }
            }
            _ => Body::Warning(Warning {
                received_type: byte(0) >> 4,
                reason: byte(0) & 0x0F,
            }),
        };
        let dpdu = Dpdu {
            eow: Eow::from_parts(type_eow & 0x0F, eow_content),
            eot,
            destination,
            source,
            body,
        };
        Ok((dpdu, frame_len))
    }
}

fn write_addresses(dest: Address, src: Address, m: u8, out: &mut Vec<u8>) {
    let m = u32::from(m);
    let mut nibbles = [0u8; 14];
    for i in 0..m {
        let shift = 4 * (m - 1 - i);
        let idx = i as usize;
        if let Some(n) = nibbles.get_mut(idx) {
            *n = ((dest.0 >> shift) & 0x0F) as u8;
        }
        if let Some(n) = nibbles.get_mut(idx + m as usize) {
            *n = ((src.0 >> shift) & 0x0F) as u8;
        }
    }
    for pair in nibbles.get(..2 * m as usize).unwrap_or_default().chunks(2) {
        out.push(pair.first().copied().unwrap_or(0) << 4 | pair.get(1).copied().unwrap_or(0));
    }
}

fn read_addresses(field: &[u8], m: usize) -> (Address, Address) {
    let nibble = |i: usize| {
        let b = field.get(i / 2).copied().unwrap_or(0);
        u32::from(if i.is_multiple_of(2) {
            b >> 4
        } else {
            b & 0x0F
        })
    };
    let mut dest = 0u32;
    let mut src = 0u32;
    for i in 0..m {
        dest = dest << 4 | nibble(i);
        src = src << 4 | nibble(i + m);
    }
    // m <= 7, so both values fit in 28 bits.
    (Address(dest & MAX_ADDRESS), Address(src & MAX_ADDRESS))
}

/// What [`scan`] found at the front of a byte stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// Bytes at the front of the stream that the caller should now drop.
    pub consumed: usize,
    /// Bytes skipped before a sync was found (noise between frames), part of `consumed`.
    pub skipped: usize,
    /// A decoded frame or the reason the frame at the sync could not be decoded; `None` if more
    /// bytes are needed.
    pub item: Option<Result<Dpdu, DecodeError>>,
}

/// Find the next D_PDU in a received byte stream.
///
/// Skips bytes up to the next sync. A frame whose header CRC (or address or header size) is
/// bad is reported and only its sync byte is consumed, so that a real frame starting inside
/// it is still found. A frame with a good header is consumed whole, even if its type is
/// unknown or its segment CRC is bad. If the frame is incomplete, nothing but the skipped noise
/// is consumed and `item` is `None`.
pub fn scan(stream: &[u8]) -> Scan {
    let sync_at = stream.windows(2).position(|w| w == SYNC);
    let Some(start) = sync_at else {
        // Keep a trailing 0x90: it may be the first half of a sync.
        let keep = usize::from(stream.last() == Some(&0x90));
        let skipped = stream.len() - keep;
        return Scan {
            consumed: skipped,
            skipped,
            item: None,
        };
    };
    let frame = stream.get(start..).unwrap_or_default();
    match Dpdu::decode(frame) {
        Ok((dpdu, len)) => Scan {
            consumed: start + len,
            skipped: start,
            item: Some(Ok(dpdu)),
        },
        Err(DecodeError::Truncated { .. }) => Scan {
            consumed: start,
            skipped: start,
            item: None,
        },
        Err(e @ (DecodeError::UnknownType(_) | DecodeError::BadSegmentCrc { .. })) => Scan {
            consumed: start + good_header_len(frame).unwrap_or(1),
            skipped: start,
            item: Some(Err(e)),
        },
        Err(e @ DecodeError::BadHeaderSize { .. }) => {
            // The CRC may or may not have been checked; only skip the whole frame if it was.
            let len = good_header_len(frame).unwrap_or(1);
            Scan {
                consumed: start + len,
                skipped: start,
                item: Some(Err(e)),
            }
        }
        Err(e) => Scan {
            consumed: start + 1,
            skipped: start,
            item: Some(Err(e)),
        },
    }
}

/// Length of the frame at the front of `frame` if its header CRC is good (the length a
/// receiver can trust enough to skip).
fn good_header_len(frame: &[u8]) -> Option<usize> {
    let sizes = *frame.get(5)?;
    let m = usize::from(sizes >> 5);
    let h = usize::from(sizes & 0x1F);
    if m == 0 || h < 6 {
        return None;
    }
    let header = frame.get(2..2 + h + m)?;
    let (covered, crc) = header.split_at(h + m - 2);
    if crc16(covered) != u16::from_le_bytes([*crc.first()?, *crc.get(1)?]) {
        return None;
    }
    let data = matches!(frame.get(2).map(|b| b >> 4), Some(0 | 2 | 4 | 7 | 8));
    let seg = if data {
        usize::from(u16::from_be_bytes([*covered.get(4 + m)?, *covered.get(5 + m)?]) & 0x03FF) + 4
    } else {
        0
    };
    Some((2 + h + m + seg).min(frame.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn addr(v: u32) -> Address {
        Address::new(v).unwrap()
    }

    /// The WARNING D_PDU of [ED3-C]: 0.0.0.5 <- 0.0.0.100, "invalid D_PDU" about a type-0 frame.
    fn reference_warning() -> Dpdu {
        Dpdu {
            eow: Eow::NONE,
            eot: 0,
            destination: addr(5),
            source: addr(100),
            body: Body::Warning(Warning {
                received_type: 0,
                reason: 2,
            }),
        }
    }

    const REFERENCE_WIRE: [u8; 11] = [
        0x90, 0xEB, 0xF0, 0x00, 0x00, 0x47, 0x05, 0x64, 0x02, 0x5F, 0x1E,
    ];

    #[test]
    fn reference_warning_encodes_to_the_published_bytes() {
        assert_eq!(reference_warning().encode().unwrap(), REFERENCE_WIRE);
        assert_eq!(reference_warning().encoded_len(), REFERENCE_WIRE.len());
    }

    #[test]
    fn reference_warning_decodes() {
        let (dpdu, len) = Dpdu::decode(&REFERENCE_WIRE).unwrap();
        assert_eq!(len, 11);
        assert_eq!(dpdu, reference_warning());
        assert_eq!(dpdu.destination.to_string(), "0.0.0.5");
        assert_eq!(dpdu.source.to_string(), "0.0.0.100");
    }

    #[test]
    fn corrupted_header_is_a_crc_error() {
        let mut wire = REFERENCE_WIRE;
        wire[8] ^= 0x01;
        assert!(matches!(
            Dpdu::decode(&wire),
            Err(DecodeError::BadHeaderCrc {
                received: 0x1E5F,
                ..
            })
        ));
    }

    #[test]
    fn data_only_hand_checked() {
        // DATA-ONLY 1.2.3.4 <- 0.0.0.9, START|END|DELIVER-IN-ORDER, FSN 7, segment "AB".
        let dpdu = Dpdu {
            eow: Eow::NONE,
            eot: 10,
            destination: Address::from_parts(1, 2, 3, 4).unwrap(),
            source: addr(9),
            body: Body::DataOnly {
                header: DataHeader {
                    start: true,
                    end: true,
                    deliver_in_order: true,
                    fsn: 7,
                    ..Default::default()
                },
                segment: b"AB".to_vec(),
            },
        };
        let wire = dpdu.encode().unwrap();
        // 1.2.3.4 = 0x1020304 needs 7 nibbles, so m = 7 and h = 9.
        assert_eq!(&wire[..6], &[0x90, 0xEB, 0x00, 0x00, 10, 7 << 5 | 9]);
        // Destination nibbles 1020304, source nibbles 0000009, packed two per byte.
        assert_eq!(&wire[6..13], &[0x10, 0x20, 0x30, 0x40, 0x00, 0x00, 0x09]);
        // Flags 1110_0000 | size high bits 00, size low 2, FSN 7.
        assert_eq!(&wire[13..16], &[0xE0, 0x02, 0x07]);
        let hcrc = crc16(&wire[2..16]);
        assert_eq!(&wire[16..18], &hcrc.to_le_bytes());
        assert_eq!(&wire[18..20], b"AB");
        assert_eq!(&wire[20..24], &crc32(b"AB").to_le_bytes());
        assert_eq!(wire.len(), 2 + 9 + 7 + 2 + 4);
        assert_eq!(Dpdu::decode(&wire).unwrap(), (dpdu, wire.len()));
    }

    #[test]
    fn header_sizes_match_the_reference_table() {
        let a = addr(1);
        let mk = |body| Dpdu {
            eow: Eow::NONE,
            eot: 0,
            destination: a,
            source: a,
            body,
        };
        let ack = |n: usize| Ack {
            rx_lwe: 0,
            bitmap: vec![0; n],
        };
        let cases: Vec<(Body, usize)> = vec![
            (
                Body::DataOnly {
                    header: DataHeader::default(),
                    segment: vec![],
                },
                9,
            ),
            (Body::AckOnly(ack(0)), 7),
            (Body::AckOnly(ack(16)), 23),
            (
                Body::DataAck {
                    header: DataHeader::default(),
                    ack: ack(0),
                    segment: vec![],
                },
                10,
            ),
            (
                Body::DataAck {
                    header: DataHeader::default(),
                    ack: ack(16),
                    segment: vec![],
                },
                26,
            ),
            (Body::ResetWinResync(Reset::default()), 9),
            (
                Body::ExpDataOnly {
                    header: ExpDataHeader::default(),
                    segment: vec![],
                },
                9,
            ),
            (Body::ExpAckOnly(ack(3)), 10),
            (Body::Management(Management::default()), 8),
            (
                Body::Management(Management {
                    extended: Some(vec![0; 23]),
                    ..Default::default()
                }),
                31,
            ),
            (
                Body::NonArqData {
                    header: NonArqHeader::default(),
                    segment: vec![],
                },
                15,
            ),
            (
                Body::ExpNonArqData {
                    header: NonArqHeader::default(),
                    segment: vec![],
                },
                15,
            ),
            (Body::Warning(Warning::default()), 7),
        ];
        for (body, h) in cases {
            let wire = mk(body).encode().unwrap();
            assert_eq!(usize::from(wire[5] & 0x1F), h, "type {}", wire[2] >> 4);
        }
    }

    #[test]
    fn data_ack_hand_checked_field_order() {
        let dpdu = Dpdu {
            eow: Eow::DrcRequest(RateRequest {
                rate: 5,
                interleaver: 2,
                other: 3,
            }),
            eot: 255,
            destination: addr(0x12),
            source: addr(0x34),
            body: Body::DataAck {
                header: DataHeader {
                    drop: true,
                    tx_uwe: true,
                    tx_lwe: true,
                    fsn: 200,
                    ..Default::default()
                },
                ack: Ack {
                    rx_lwe: 17,
                    bitmap: vec![0b0000_0101],
                },
                segment: vec![0xAA; 300],
            },
        };
        let wire = dpdu.encode().unwrap();
        // TYPE 2, EOW type 1; content 0101 10 11.
        assert_eq!(&wire[2..6], &[0x21, 0x5B, 255, 2 << 5 | 11]);
        assert_eq!(&wire[6..8], &[0x12, 0x34]);
        // DROP|UWE|LWE = 0001_1100, size 300 = 0x12C -> high bits 01, low 0x2C, FSN 200, RX LWE 17.
        assert_eq!(&wire[8..13], &[0x1D, 0x2C, 200, 17, 0b101]);
        let (back, _) = Dpdu::decode(&wire).unwrap();
        assert_eq!(back, dpdu);
        if let Body::DataAck { ack, .. } = &back.body {
            assert_eq!(ack.selectively_acked().collect::<Vec<_>>(), vec![18, 20]);
        }
    }

    #[test]
    fn non_arq_hand_checked() {
        let dpdu = Dpdu {
            eow: Eow::NONE,
            eot: 0,
            destination: addr(0x0FFF_FFFF),
            source: addr(1),
            body: Body::NonArqData {
                header: NonArqHeader {
                    cpdu_id: 0xABC,
                    deliver_in_order: true,
                    group: true,
                    cpdu_size: 0x0102,
                    segment_offset: 0x0304,
                    reception_window: 0x0506,
                },
                segment: vec![1, 2, 3],
            },
        };
        let wire = dpdu.encode().unwrap();
        assert_eq!(wire[5], 7 << 5 | 15);
        // 7 nibbles FFFFFFF then 0000001.
        assert_eq!(&wire[6..13], &[0xFF, 0xFF, 0xFF, 0xF0, 0x00, 0x00, 0x01]);
        assert_eq!(
            &wire[13..22],
            &[0xAC, 0x03, 0xBC, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06]
        );
        assert_eq!(Dpdu::decode(&wire).unwrap().0, dpdu);
    }

    #[test]
    fn exp_data_and_management_hand_checked() {
        let exp = Dpdu {
            eow: Eow::NONE,
            eot: 1,
            destination: addr(2),
            source: addr(3),
            body: Body::ExpDataOnly {
                header: ExpDataHeader {
                    start: true,
                    end: false,
                    cpdu_id: 9,
                    fsn: 4,
                },
                segment: vec![0; 1023],
            },
        };
        let wire = exp.encode().unwrap();
        // START | ID 1001 << 2 | size 1023 -> high bits 11.
        assert_eq!(&wire[7..10], &[0x80 | 9 << 2 | 3, 0xFF, 4]);
        assert_eq!(Dpdu::decode(&wire).unwrap().0, exp);

        let mgmt = Dpdu {
            eow: Eow::HdrDrcRequest {
                waveform: 3,
                channels: 1,
            },
            eot: 0,
            destination: addr(2),
            source: addr(3),
            body: Body::Management(Management {
                valid_message: true,
                ack: false,
                frame_id: 77,
                extended: Some(vec![0, 0, 0x25, 0x80, 0x01, 0x0E]),
            }),
        };
        let wire = mgmt.encode().unwrap();
        assert_eq!(&wire[2..4], &[0x67, 3 << 3 | 1]);
        assert_eq!(wire[5] & 0x1F, 14);
        assert_eq!(&wire[7..9], &[0x06, 77]);
        assert_eq!(Dpdu::decode(&wire).unwrap().0, mgmt);
    }

    #[test]
    fn segment_crc_error_is_reported() {
        let dpdu = Dpdu {
            eow: Eow::NONE,
            eot: 0,
            destination: addr(2),
            source: addr(3),
            body: Body::DataOnly {
                header: DataHeader::default(),
                segment: vec![1, 2, 3, 4],
            },
        };
        let mut wire = dpdu.encode().unwrap();
        let n = wire.len();
        wire[n - 6] ^= 0xFF;
        assert!(matches!(
            Dpdu::decode(&wire),
            Err(DecodeError::BadSegmentCrc { .. })
        ));
        // The scanner skips the whole frame: its header was good.
        let s = scan(&wire);
        assert_eq!(s.consumed, n);
        // Taken as damaged, the frame decodes with its segment as received.
        let (damaged, len) = Dpdu::decode_damaged(&wire).unwrap();
        assert_eq!(len, n);
        assert_eq!(damaged.body.segment(), Some(&[1, 2, 0xFC, 4][..]));
        // A bad header is bad either way.
        wire[3] ^= 0x01;
        assert!(matches!(
            Dpdu::decode_damaged(&wire),
            Err(DecodeError::BadHeaderCrc { .. })
        ));
    }

    #[test]
    fn typed_errors() {
        assert_eq!(Dpdu::decode(&[0x12, 0x34]), Err(DecodeError::NoSync));
        assert!(matches!(
            Dpdu::decode(&REFERENCE_WIRE[..9]),
            Err(DecodeError::Truncated {
                needed: 11,
                available: 9
            })
        ));
        // Address size 0.
        let mut bad = REFERENCE_WIRE;
        bad[5] = 0x07;
        assert_eq!(Dpdu::decode(&bad), Err(DecodeError::BadAddressSize));
        // Unknown type 9, with a correct header CRC.
        let mut frame = vec![0x90, 0xEB, 0x90, 0x00, 0x00, 0x26, 0x12];
        let c = crc16(&frame[2..]);
        frame.extend_from_slice(&c.to_le_bytes());
        assert_eq!(Dpdu::decode(&frame), Err(DecodeError::UnknownType(9)));
        // WARNING with h = 8 instead of 7.
        let mut frame = vec![0x90, 0xEB, 0xF0, 0x00, 0x00, 0x48, 0x05, 0x64, 0x02, 0x00];
        let c = crc16(&frame[2..]);
        frame.extend_from_slice(&c.to_le_bytes());
        assert_eq!(
            Dpdu::decode(&frame),
            Err(DecodeError::BadHeaderSize {
                dpdu_type: 15,
                header_size: 8
            })
        );
    }

    #[test]
    fn encoder_rejects_oversized_fields() {
        let mk = |body| Dpdu {
            eow: Eow::NONE,
            eot: 0,
            destination: addr(1),
            source: addr(1),
            body,
        };
        assert_eq!(
            mk(Body::DataOnly {
                header: DataHeader::default(),
                segment: vec![0; 1024]
            })
            .encode(),
            Err(EncodeError::SegmentTooLong(1024))
        );
        assert_eq!(
            mk(Body::AckOnly(Ack {
                rx_lwe: 0,
                bitmap: vec![0; 17]
            }))
            .encode(),
            Err(EncodeError::AckBitmapTooLong(17))
        );
        assert!(
            mk(Body::ExpDataOnly {
                header: ExpDataHeader {
                    cpdu_id: 16,
                    ..Default::default()
                },
                segment: vec![]
            })
            .encode()
            .is_err()
        );
        assert!(Address::new(0x1000_0000).is_none());
    }

    #[test]
    fn scanner_finds_frames_in_noise() {
        let mut stream = vec![0x00, 0x90, 0x11, 0xEB];
        stream.extend_from_slice(&REFERENCE_WIRE);
        stream.extend_from_slice(&[0x90, 0xEB, 0xF0]); // a truncated second frame
        let s = scan(&stream);
        assert_eq!(s.skipped, 4);
        assert_eq!(s.consumed, 4 + 11);
        assert_eq!(s.item, Some(Ok(reference_warning())));
        let rest = &stream[s.consumed..];
        let s = scan(rest);
        assert_eq!((s.consumed, s.item), (0, None));
        // A frame with a bad header CRC costs one byte, then the real frame behind it is found.
        let mut stream = vec![0x90, 0xEB, 0x00, 0x00, 0x00, 0x27];
        stream.extend_from_slice(&REFERENCE_WIRE);
        let s = scan(&stream);
        assert!(matches!(
            s.item,
            Some(Err(DecodeError::BadHeaderCrc { .. }))
        ));
        assert_eq!(s.consumed, 1);
        let s = scan(&stream[1..]);
        assert_eq!(s.item, Some(Ok(reference_warning())));
        // No sync at all: everything but a trailing 0x90 is dropped.
        assert_eq!(scan(&[1, 2, 0x90]).consumed, 2);
    }

    #[test]
    fn ack_bitmap_semantics() {
        // RX LWE 250, received 251, 253 and 4 (wrapping), RX UWE 4.
        let got = [251u8, 253, 4];
        let ack = Ack::from_window(250, 4, |f| got.contains(&f)).unwrap();
        // Span 10 FSNs (251..=4) -> 2 bytes; bit 0 = 251, bit 2 = 253, bit 9 = 4.
        assert_eq!(ack.bitmap, vec![0b0000_0101, 0b0000_0010]);
        assert_eq!(
            ack.selectively_acked().collect::<Vec<_>>(),
            vec![251, 253, 4]
        );
        assert!(ack.acknowledges(249)); // behind RX LWE
        assert!(!ack.acknowledges(250)); // RX LWE itself
        assert!(!ack.acknowledges(252));
        assert!(ack.acknowledges(4));
        assert!(!ack.acknowledges(5));
        assert_eq!(
            Ack::from_window(0, 0, |_| true).unwrap().bitmap,
            Vec::<u8>::new()
        );
        assert_eq!(Ack::from_window(0, 128, |_| true).unwrap().bitmap.len(), 16);
        assert!(Ack::from_window(0, 129, |_| true).is_none());
    }

    #[test]
    fn eow_types_round_trip() {
        for t in 0..16u8 {
            for c in [0u8, 0x5A, 0xFF] {
                let e = Eow::from_parts(t, c);
                assert_eq!((e.eow_type(), e.content()), (t, c));
            }
        }
        let cap = Eow::from_parts(4, 0b1010_0000);
        assert_eq!(
            cap,
            Eow::Capability(Capability {
                drc: true,
                mil_std_188_110a: true,
                ..Default::default()
            })
        );
        if let Eow::DrcRequest(r) = Eow::from_parts(1, 0x58) {
            assert_eq!((r.rate_bps(), r.interleaver, r.other), (Some(2400), 2, 0));
        }
    }

    fn arb_addr() -> impl Strategy<Value = Address> {
        prop_oneof![0u32..=0xFF, 0u32..=0xFFFF, 0u32..=MAX_ADDRESS].prop_map(addr)
    }

    fn arb_data_header() -> impl Strategy<Value = DataHeader> {
        (any::<[bool; 6]>(), any::<u8>()).prop_map(|(f, fsn)| DataHeader {
            start: f[0],
            end: f[1],
            deliver_in_order: f[2],
            drop: f[3],
            tx_uwe: f[4],
            tx_lwe: f[5],
            fsn,
        })
    }

    fn arb_ack() -> impl Strategy<Value = Ack> {
        (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..=16))
            .prop_map(|(rx_lwe, bitmap)| Ack { rx_lwe, bitmap })
    }

    fn arb_segment() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..40),
            proptest::collection::vec(any::<u8>(), 1000..=1023),
        ]
    }

    fn arb_non_arq() -> impl Strategy<Value = NonArqHeader> {
        (0u16..4096, any::<[bool; 2]>(), any::<[u16; 3]>()).prop_map(|(cpdu_id, f, v)| {
            NonArqHeader {
                cpdu_id,
                deliver_in_order: f[0],
                group: f[1],
                cpdu_size: v[0],
                segment_offset: v[1],
                reception_window: v[2],
            }
        })
    }

    fn arb_body() -> impl Strategy<Value = Body> {
        prop_oneof![
            (arb_data_header(), arb_segment())
                .prop_map(|(header, segment)| Body::DataOnly { header, segment }),
            arb_ack().prop_map(Body::AckOnly),
            (arb_data_header(), arb_ack(), arb_segment()).prop_map(|(header, ack, segment)| {
                Body::DataAck {
                    header,
                    ack,
                    segment,
                }
            }),
            (any::<[bool; 4]>(), any::<u8>(), any::<u8>()).prop_map(
                |(f, new_rx_lwe, reset_frame_id)| {
                    Body::ResetWinResync(Reset {
                        full_reset: f[0],
                        reset_tx_win_request: f[1],
                        reset_rx_win_command: f[2],
                        reset_ack: f[3],
                        new_rx_lwe,
                        reset_frame_id,
                    })
                }
            ),
            (any::<[bool; 2]>(), 0u8..16, any::<u8>(), arb_segment()).prop_map(
                |(f, cpdu_id, fsn, segment)| {
                    Body::ExpDataOnly {
                        header: ExpDataHeader {
                            start: f[0],
                            end: f[1],
                            cpdu_id,
                            fsn,
                        },
                        segment,
                    }
                }
            ),
            arb_ack().prop_map(Body::ExpAckOnly),
            (
                any::<[bool; 2]>(),
                any::<u8>(),
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..=23))
            )
                .prop_map(|(f, frame_id, extended)| Body::Management(Management {
                    valid_message: f[0],
                    ack: f[1],
                    frame_id,
                    extended
                })),
            (arb_non_arq(), arb_segment())
                .prop_map(|(header, segment)| Body::NonArqData { header, segment }),
            (arb_non_arq(), arb_segment())
                .prop_map(|(header, segment)| Body::ExpNonArqData { header, segment }),
            (0u8..16, 0u8..16).prop_map(|(received_type, reason)| Body::Warning(Warning {
                received_type,
                reason
            })),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn round_trip_every_type(
            eow_type in 0u8..16, eow_content in any::<u8>(), eot in any::<u8>(),
            destination in arb_addr(), source in arb_addr(), body in arb_body(),
        ) {
            let dpdu = Dpdu { eow: Eow::from_parts(eow_type, eow_content), eot, destination, source, body };
            let wire = dpdu.encode().unwrap();
            prop_assert_eq!(wire.len(), dpdu.encoded_len());
            prop_assert!(wire.len() <= MAX_DPDU_LEN);
            let (back, len) = Dpdu::decode(&wire).unwrap();
            prop_assert_eq!(len, wire.len());
            prop_assert_eq!(&back, &dpdu);
            // Minimal encodings come back byte for byte.
            prop_assert_eq!(back.encode().unwrap(), wire.clone());
            // In a stream with noise around it, the scanner finds the same frame.
            let mut stream = vec![0x55, 0x90];
            stream.extend_from_slice(&wire);
            stream.push(0x90);
            let s = scan(&stream);
            prop_assert_eq!(s.item, Some(Ok(dpdu)));
            prop_assert_eq!(s.consumed, 2 + wire.len());
        }

        #[test]
        fn decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Dpdu::decode(&bytes);
            let mut rest: &[u8] = &bytes;
            for _ in 0..=bytes.len() {
                let s = scan(rest);
                prop_assert!(s.consumed <= rest.len());
                if s.consumed == 0 { break; }
                rest = &rest[s.consumed..];
            }
        }
    }
}
