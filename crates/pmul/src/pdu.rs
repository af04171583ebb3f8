//! Byte layouts of every P_MUL PDU (ACP 142 chapter 2), their encoder and their bounded decoder.
//!
//! All integers are big-endian ("network order"). Offsets are in bytes from the start of the PDU.
//! The PDU is the whole datagram: one P_MUL PDU per UDP datagram or per STANAG 5066 U_PDU, so
//! `Length_of_PDU` must equal the number of bytes received.
//!
//! # Sources
//!
//! - ACP 142, "P_MUL - A Protocol for Reliable Multicast Messaging in Bandwidth Constrained and
//!   Delayed Acknowledgement (EMCON) Environments", chapter 2 (PDU formats) and annex B (checksum).
//!   The document text itself was not readable in full from the reference store used to write
//!   this crate (only its table of contents and summaries); the layouts below were therefore
//!   cross-checked field by field against two independent readings of it: Wireshark's dissector
//!   `epan/dissectors/packet-p_mul.c` (which cites "ACP142 annex B-3" for the checksum) and the
//!   NTNU `no.ntnu.acp142` implementation (which says its checksum is "a direct adaption from
//!   Annex B of the ACP142 specification"). Where the two agree the layout is taken as given;
//!   where only Wireshark has a field (FEC and Extra Address PDUs, the Ack_PDU timestamp option,
//!   missing-number ranges) that is said beside the field.
//!
//! Where the readings differ (none of these changes a byte this crate sends):
//! - Checksum: the Wireshark version of 2012 accepts only annex B; the current one first tries the
//!   RFC 1071 Internet checksum and falls back to annex B. We send annex B and accept both.
//! - `Message_Sequence_Number`: both readings put 4 bytes on the wire; Wireshark displays the
//!   field as 16-bit (`FT_UINT16`) while stepping over 4 bytes. We keep all 32 bits.
//! - Ack_PDU: NTNU knows only plain missing lists and no trailing option; Wireshark also decodes
//!   the `a, 0, b` range form and an 8-byte timestamp option after the entries. We decode both and
//!   send neither.
//! - MAP: NTNU's prose says "'0': this is the last one" for both bits, its code sets 0x80 for "not
//!   first" and 0x40 for "not last" exactly as Wireshark decodes them; we follow the code.
//!
//! No byte examples (hex dumps) were found in either document; the test vectors below are built
//! by hand from these tables, field by field, and their checksums by the annex B formulas, not by
//! this encoder.
//!
//! # Common header (every PDU type)
//!
//! | Offset | Size | Field | Notes |
//! |---|---|---|---|
//! | 0 | 2 | `Length_of_PDU` | whole PDU, header included |
//! | 2 | 1 | `Priority` | Data, Ack, Address, Discard_Message; unused (0) in the group PDUs |
//! | 3 | 1 | `MAP` (bits 7-6) + `PDU_Type` (bits 5-0) | MAP only in Address and Announce PDUs: bit 7 set = not the first PDU of a set, bit 6 set = not the last; both clear = the only one |
//! | 4 | 2 | type-specific | Data: `Sequence_Number_of_Data_PDU`; Address: `Total_Number_of_PDUs`; Announce: `Count_of_Destination_Entries`; others unused (0) |
//! | 6 | 2 | `Checksum` | ACP 142 annex B (ISO 8073 annex B Fletcher), see [`checksum`] |
//!
//! PDU type codes: Data 0x00, Ack 0x01, Address 0x02, Discard_Message 0x03, Announce 0x04,
//! Request 0x05, Reject 0x06, Release 0x07, FEC_Address 0x08, Extra_Address 0x12,
//! Extra_FEC_Address 0x18 (the last three as Wireshark decodes them).
//!
//! # Data_PDU (16 + fragment)
//!
//! | Offset | Size | Field |
//! |---|---|---|
//! | 4 | 2 | `Sequence_Number_of_Data_PDU`: "the order of the message fragment within the original message, starting from 1" (ACP 142 as NTNU quotes it; Wireshark reassembles fragment `seq - 1`) |
//! | 8 | 4 | `Source_ID` (an IPv4 address or node id) |
//! | 12 | 4 | `Message_ID` (MSID, unique within `Source_ID`) |
//! | 16 | n | `Fragment_of_Data` |
//!
//! # Address_PDU (24 + entries), Extra_Address_PDU
//!
//! | Offset | Size | Field |
//! |---|---|---|
//! | 4 | 2 | `Total_Number_of_PDUs` (Data_PDUs of the message) |
//! | 8 | 4 | `Source_ID` |
//! | 12 | 4 | `Message_ID` |
//! | 16 | 4 | `Expiry_Time` (seconds since 1970-01-01 UTC) |
//! | (FEC only) 20 | 1 | `FEC_Parameters_Length` (f) |
//! | (FEC only) 21 | 1 | `FEC_ID` |
//! | (FEC only) 22 | f | `FEC_Parameters` |
//! | 20 (+2+f) | 2 | `Count_of_Destination_Entries` (d) |
//! | 22 (+2+f) | 2 | `Length_of_Reserved_Field` (r) |
//! | 24 (+2+f) | d x (8 + r) | destination entries |
//!
//! A destination entry: `Destination_ID` (4), `Message_Sequence_Number` (4, per source and
//! destination), `Reserved_Field` (r bytes; Wireshark labels it a symmetric key). An Address_PDU
//! with no destination entries is what Wireshark calls an "Ack-Ack".
//!
//! # Ack_PDU (14 + entries \[+ 8\])
//!
//! | Offset | Size | Field |
//! |---|---|---|
//! | 4 | 2 | unused |
//! | 8 | 4 | `Source_ID_of_Ack_Sender` |
//! | 12 | 2 | `Count_of_Ack_Info_Entries` |
//! | 14 | ... | Ack info entries |
//! | end | 8 | optional timestamp option, units of 100 ms (Wireshark decodes it when 8 bytes follow the entries) |
//!
//! An ack info entry: `Length_of_Ack_Info_Entry` (2, the entry's own bytes, at least 10),
//! `Source_ID` (4) and `Message_ID` (4) of the acknowledged message, then
//! `Missing_Data_PDU_Seq_Number`s (2 each). An empty list acknowledges the whole message. The
//! decoder also understands the range form Wireshark decodes (`a, 0, b` = `a ..= b`); the encoder
//! writes plain lists only, which every reader understands.
//!
//! # Discard_Message_PDU (16)
//!
//! `Source_ID` at 8, `Message_ID` at 12: the sender gave the message up; receivers drop it.
//!
//! # Announce_PDU (24 + 4 x d)
//!
//! | Offset | Size | Field |
//! |---|---|---|
//! | 4 | 2 | `Count_of_Destination_Entries` (d) |
//! | 8 | 4 | `Source_ID` |
//! | 12 | 4 | `Message_ID` |
//! | 16 | 4 | `Expiry_Time` |
//! | 20 | 4 | `Announced_Multicast_Group` |
//! | 24 | 4 x d | `Destination_ID`s |
//!
//! # Request_PDU, Reject_PDU, Release_PDU (20)
//!
//! `Source_ID` at 8, `Message_ID` at 12, `Multicast_Group` at 16 (the dynamic group being asked
//! for, refused or given back).

use thiserror::Error;

/// Largest PDU the 16-bit `Length_of_PDU` can describe.
pub const MAX_PDU_LEN: usize = u16::MAX as usize;
/// Bytes of a Data_PDU before its fragment.
pub const DATA_HEADER_LEN: usize = 16;
/// Bytes of an Address_PDU before its destination entries (no FEC).
pub const ADDRESS_HEADER_LEN: usize = 24;
/// Bytes of a destination entry without its reserved field.
pub const DEST_ENTRY_LEN: usize = 8;
/// Bytes of an Ack_PDU before its ack info entries.
pub const ACK_HEADER_LEN: usize = 14;
/// Bytes of an ack info entry without missing numbers.
pub const ACK_ENTRY_LEN: usize = 10;
/// Bytes of a Discard_Message_PDU.
pub const DISCARD_LEN: usize = 16;
/// Offset of the checksum field.
pub const CHECKSUM_OFFSET: usize = 6;

/// The 6-bit PDU type code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PduType {
    /// 0x00
    Data,
    /// 0x01
    Ack,
    /// 0x02
    Address,
    /// 0x03
    DiscardMessage,
    /// 0x04
    Announce,
    /// 0x05
    Request,
    /// 0x06
    Reject,
    /// 0x07
    Release,
    /// 0x08
    FecAddress,
    /// 0x12
    ExtraAddress,
    /// 0x18
    ExtraFecAddress,
}

impl PduType {
    /// The wire code.
    pub fn code(self) -> u8 {
        match self {
            PduType::Data => 0x00,
            PduType::Ack => 0x01,
            PduType::Address => 0x02,
            PduType::DiscardMessage => 0x03,
            PduType::Announce => 0x04,
            PduType::Request => 0x05,
            PduType::Reject => 0x06,
            PduType::Release => 0x07,
            PduType::FecAddress => 0x08,
            PduType::ExtraAddress => 0x12,
            PduType::ExtraFecAddress => 0x18,
        }
    }

    /// The type of a wire code, if P_MUL defines it.
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0x00 => PduType::Data,
            0x01 => PduType::Ack,
            0x02 => PduType::Address,
            0x03 => PduType::DiscardMessage,
            0x04 => PduType::Announce,
            0x05 => PduType::Request,
            0x06 => PduType::Reject,
            0x07 => PduType::Release,
            0x08 => PduType::FecAddress,
            0x12 => PduType::ExtraAddress,
            0x18 => PduType::ExtraFecAddress,
            _ => return None,
        })
    }
}

/// The MAP bits of Address and Announce PDUs: where this PDU sits in a set of PDUs that together
/// carry one destination list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Map {
    /// Bit 7 set: this is not the first PDU of the set.
    pub not_first: bool,
    /// Bit 6 set: this is not the last PDU of the set.
    pub not_last: bool,
}

impl Map {
    /// The only PDU of its set (both bits clear).
    pub const ONLY: Map = Map {
        not_first: false,
        not_last: false,
    };

    fn bits(self) -> u8 {
        (u8::from(self.not_first) << 7) | (u8::from(self.not_last) << 6)
    }

    fn from_byte(b: u8) -> Self {
        Map {
            not_first: b & 0x80 != 0,
            not_last: b & 0x40 != 0,
        }
    }
}

/// A Data_PDU: one fragment of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataPdu {
    /// P_MUL priority.
    pub priority: u8,
    /// `Sequence_Number_of_Data_PDU`, from 1.
    pub seq: u16,
    /// `Source_ID` of the message's originator.
    pub source: u32,
    /// `Message_ID`.
    pub message_id: u32,
    /// `Fragment_of_Data`.
    pub data: Vec<u8>,
}

/// One destination entry of an Address_PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestEntry {
    /// `Destination_ID`.
    pub dest_id: u32,
    /// `Message_Sequence_Number` (per source and destination).
    pub msn: u32,
    /// `Reserved_Field`; every entry of a PDU has the PDU's `Length_of_Reserved_Field` bytes.
    pub reserved: Vec<u8>,
}

/// The FEC part of FEC_Address_PDUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fec {
    /// `FEC_ID`.
    pub id: u8,
    /// `FEC_Parameters` (at most 255 bytes).
    pub params: Vec<u8>,
}

/// An Address_PDU (and its Extra and FEC variants): the destination list of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressPdu {
    /// P_MUL priority.
    pub priority: u8,
    /// Position in a set of Address_PDUs.
    pub map: Map,
    /// Extra_Address_PDU (0x12 / 0x18) rather than Address_PDU (0x02 / 0x08).
    pub extra: bool,
    /// FEC parameters: present for FEC_Address_PDUs (0x08 / 0x18).
    pub fec: Option<Fec>,
    /// `Total_Number_of_PDUs`: Data_PDUs of the message.
    pub total_pdus: u16,
    /// `Source_ID`.
    pub source: u32,
    /// `Message_ID`.
    pub message_id: u32,
    /// `Expiry_Time`, seconds since 1970-01-01 UTC.
    pub expiry: u32,
    /// `Length_of_Reserved_Field` of every entry.
    pub reserved_len: u16,
    /// Destination entries.
    pub dests: Vec<DestEntry>,
}

/// One ack info entry of an Ack_PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckInfoEntry {
    /// `Source_ID` of the acknowledged message.
    pub source: u32,
    /// `Message_ID` of the acknowledged message.
    pub message_id: u32,
    /// Data_PDU sequence numbers not yet received, strictly increasing, none 0. Empty: the whole
    /// message arrived.
    pub missing: Vec<u16>,
}

/// An Ack_PDU: a receiver's status of one or more messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckPdu {
    /// P_MUL priority.
    pub priority: u8,
    /// `Source_ID_of_Ack_Sender`.
    pub ack_sender: u32,
    /// Ack info entries.
    pub entries: Vec<AckInfoEntry>,
    /// Optional timestamp option (100 ms units), as Wireshark decodes it.
    pub timestamp: Option<u64>,
}

/// A Discard_Message_PDU: the sender gave the message up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscardPdu {
    /// P_MUL priority.
    pub priority: u8,
    /// `Source_ID`.
    pub source: u32,
    /// `Message_ID`.
    pub message_id: u32,
}

/// An Announce_PDU: a dynamic multicast group and its members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnouncePdu {
    /// Position in a set of Announce_PDUs.
    pub map: Map,
    /// `Source_ID`.
    pub source: u32,
    /// `Message_ID`.
    pub message_id: u32,
    /// `Expiry_Time`.
    pub expiry: u32,
    /// `Announced_Multicast_Group`.
    pub group: u32,
    /// `Destination_ID`s of the group's members.
    pub members: Vec<u32>,
}

/// Request_PDU, Reject_PDU or Release_PDU: one dynamic multicast group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupPdu {
    /// `Source_ID`.
    pub source: u32,
    /// `Message_ID`.
    pub message_id: u32,
    /// `Multicast_Group`.
    pub group: u32,
}

/// Any P_MUL PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pdu {
    /// Data_PDU.
    Data(DataPdu),
    /// Ack_PDU.
    Ack(AckPdu),
    /// Address_PDU, Extra_Address_PDU, FEC_Address_PDU, Extra_FEC_Address_PDU.
    Address(AddressPdu),
    /// Discard_Message_PDU.
    Discard(DiscardPdu),
    /// Announce_PDU.
    Announce(AnnouncePdu),
    /// Request_PDU.
    Request(GroupPdu),
    /// Reject_PDU.
    Reject(GroupPdu),
    /// Release_PDU.
    Release(GroupPdu),
}

/// Why bytes are not a P_MUL PDU.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// Fewer bytes than a field needs.
    #[error("truncated P_MUL PDU: {what} needs {needed} bytes at offset {offset}, {got} left")]
    Truncated {
        /// The field.
        what: &'static str,
        /// Its offset.
        offset: usize,
        /// Bytes it needs.
        needed: usize,
        /// Bytes left.
        got: usize,
    },
    /// `Length_of_PDU` is not the datagram's length.
    #[error("Length_of_PDU says {field} bytes, the datagram has {actual}")]
    LengthMismatch {
        /// The field's value.
        field: usize,
        /// Bytes received.
        actual: usize,
    },
    /// The checksum does not verify (neither ACP 142 annex B nor the Internet checksum).
    #[error("bad P_MUL checksum 0x{found:04x}, ACP 142 annex B gives 0x{expected:04x}")]
    BadChecksum {
        /// The checksum field.
        found: u16,
        /// What annex B gives for these bytes.
        expected: u16,
    },
    /// A PDU type P_MUL does not define.
    #[error("unknown P_MUL PDU type 0x{0:02x}")]
    UnknownType(u8),
    /// Bytes after the last field.
    #[error("{0} bytes after the last field of the PDU")]
    TrailingBytes(usize),
    /// An ack info entry length below the 10 fixed bytes or odd.
    #[error("Length_of_Ack_Info_Entry {0} is invalid (at least 10, even)")]
    BadAckEntryLength(usize),
    /// A missing sequence number 0, or a range whose start is not below its end.
    #[error("invalid missing Data_PDU sequence number list: {0}")]
    BadMissingList(&'static str),
}

/// Why a PDU cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// The PDU would be longer than `Length_of_PDU` can say.
    #[error("PDU of {0} bytes exceeds the 65535-byte Length_of_PDU")]
    TooLong(usize),
    /// A count field would overflow.
    #[error("{what}: {count} entries exceed the 16-bit count")]
    TooMany {
        /// The list.
        what: &'static str,
        /// Its length.
        count: usize,
    },
    /// A destination entry's reserved field is not `reserved_len` bytes.
    #[error("destination entry reserved field of {got} bytes, Length_of_Reserved_Field is {want}")]
    ReservedLen {
        /// The entry's bytes.
        got: usize,
        /// The PDU's reserved length.
        want: u16,
    },
    /// FEC parameters longer than 255 bytes.
    #[error("FEC parameters of {0} bytes exceed 255")]
    FecTooLong(usize),
    /// A missing list that is not strictly increasing or contains 0.
    #[error("missing Data_PDU list must be strictly increasing and without 0")]
    BadMissingList,
}

/// ACP 142 annex B checksum (the ISO 8073 annex B Fletcher sum, mod 255) of `pdu`, computed as
/// if the two checksum bytes at offset 6 were zero. `pdu` must be at least 8 bytes; shorter input
/// gives 0.
pub fn checksum(pdu: &[u8]) -> u16 {
    if pdu.len() < CHECKSUM_OFFSET + 2 {
        return 0;
    }
    let (c0, c1) = fletcher_sums(pdu, true);
    // n (1-based octet number of the first checksum octet) is 7, so L - n = len - 7.
    let k = ((pdu.len() - CHECKSUM_OFFSET - 1) % 255) as u32;
    let x = (k * c0 + 255 * 255 - c1) % 255;
    let y = (c1 + 255 * 255 - ((k + 1) % 255) * c0) % 255;
    ((x as u16) << 8) | y as u16
}

/// Sums C0 and C1 (mod 255) over `pdu`, optionally reading the checksum bytes as zero.
fn fletcher_sums(pdu: &[u8], zero_checksum: bool) -> (u32, u32) {
    let (mut c0, mut c1) = (0u32, 0u32);
    for (i, &b) in pdu.iter().enumerate() {
        let b = if zero_checksum && (i == CHECKSUM_OFFSET || i == CHECKSUM_OFFSET + 1) {
            0
        } else {
            u32::from(b)
        };
        c0 = (c0 + b) % 255;
        c1 = (c1 + c0) % 255;
    }
    (c0, c1)
}

/// The RFC 1071 Internet checksum of `pdu` with the checksum field read as zero. Wireshark
/// accepts it besides annex B for P_MUL, so some implementations send it; we verify it, never
/// send it.
fn internet_checksum(pdu: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for (i, pair) in pdu.chunks(2).enumerate() {
        if i == CHECKSUM_OFFSET / 2 {
            continue;
        }
        let hi = u32::from(pair[0]);
        let lo = pair.get(1).copied().map_or(0, u32::from);
        sum += (hi << 8) | lo;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Whether the checksum field of `pdu` verifies.
pub fn checksum_ok(pdu: &[u8]) -> bool {
    if pdu.len() < CHECKSUM_OFFSET + 2 {
        return false;
    }
    // Annex B: the sums over the whole PDU, checksum included, are both zero mod 255. This also
    // accepts the equivalent 0xff for a 0 octet that one's-complement senders may write.
    let (c0, c1) = fletcher_sums(pdu, false);
    if c0 == 0 && c1 == 0 {
        return true;
    }
    let found = u16::from_be_bytes([pdu[CHECKSUM_OFFSET], pdu[CHECKSUM_OFFSET + 1]]);
    found == internet_checksum(pdu)
}

/// A bounded big-endian reader.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let left = self.buf.len() - self.pos;
        if n > left {
            return Err(DecodeError::Truncated {
                what,
                offset: self.pos,
                needed: n,
                got: left,
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.bytes(1, what)?[0])
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        let b = self.bytes(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let b = self.bytes(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }
}

/// Expands a received missing list: plain numbers and Wireshark's `a, 0, b` ranges. Numbers not
/// above the previous one are what Wireshark calls end-of-list indicators and are skipped.
fn expand_missing(raw: &[u16]) -> Result<Vec<u16>, DecodeError> {
    let mut out: Vec<u16> = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let a = raw[i];
        if a == 0 {
            return Err(DecodeError::BadMissingList("sequence number 0"));
        }
        let prev = out.last().copied().unwrap_or(0);
        if i + 2 < raw.len() && raw[i + 1] == 0 {
            let b = raw[i + 2];
            if a >= b {
                return Err(DecodeError::BadMissingList("range start not below its end"));
            }
            // The list stays strictly increasing, so it can never hold more than 65535 numbers.
            for s in a.max(prev.saturating_add(1))..=b {
                if s > prev {
                    out.push(s);
                }
            }
            i += 3;
        } else {
            if a > prev {
                out.push(a);
            }
            i += 1;
        }
    }
    Ok(out)
}

impl Pdu {
    /// The PDU's type.
    pub fn pdu_type(&self) -> PduType {
        match self {
            Pdu::Data(_) => PduType::Data,
            Pdu::Ack(_) => PduType::Ack,
            Pdu::Address(a) => match (a.extra, a.fec.is_some()) {
                (false, false) => PduType::Address,
                (true, false) => PduType::ExtraAddress,
                (false, true) => PduType::FecAddress,
                (true, true) => PduType::ExtraFecAddress,
            },
            Pdu::Discard(_) => PduType::DiscardMessage,
            Pdu::Announce(_) => PduType::Announce,
            Pdu::Request(_) => PduType::Request,
            Pdu::Reject(_) => PduType::Reject,
            Pdu::Release(_) => PduType::Release,
        }
    }

    /// Decodes one PDU that fills `buf`, verifying length and checksum. Never panics; allocates at
    /// most a small multiple of `buf.len()`.
    pub fn decode(buf: &[u8]) -> Result<Pdu, DecodeError> {
        let mut r = Reader { buf, pos: 0 };
        let len = usize::from(r.u16("Length_of_PDU")?);
        if len != buf.len() {
            return Err(DecodeError::LengthMismatch {
                field: len,
                actual: buf.len(),
            });
        }
        let priority = r.u8("Priority")?;
        let map_type = r.u8("MAP/PDU_Type")?;
        let word4 = r.u16("PDU_Type specific field")?;
        let found = r.u16("Checksum")?;
        if !checksum_ok(buf) {
            return Err(DecodeError::BadChecksum {
                found,
                expected: checksum(buf),
            });
        }
        let ty =
            PduType::from_code(map_type & 0x3f).ok_or(DecodeError::UnknownType(map_type & 0x3f))?;
        let map = Map::from_byte(map_type);
        let pdu = match ty {
            PduType::Data => {
                let source = r.u32("Source_ID")?;
                let message_id = r.u32("Message_ID")?;
                let data = r.bytes(r.left(), "Fragment_of_Data")?.to_vec();
                Pdu::Data(DataPdu {
                    priority,
                    seq: word4,
                    source,
                    message_id,
                    data,
                })
            }
            PduType::Address
            | PduType::ExtraAddress
            | PduType::FecAddress
            | PduType::ExtraFecAddress => {
                let source = r.u32("Source_ID")?;
                let message_id = r.u32("Message_ID")?;
                let expiry = r.u32("Expiry_Time")?;
                let fec = if matches!(ty, PduType::FecAddress | PduType::ExtraFecAddress) {
                    let flen = usize::from(r.u8("FEC_Parameters_Length")?);
                    let id = r.u8("FEC_ID")?;
                    let params = r.bytes(flen, "FEC_Parameters")?.to_vec();
                    Some(Fec { id, params })
                } else {
                    None
                };
                let count = usize::from(r.u16("Count_of_Destination_Entries")?);
                let reserved_len = r.u16("Length_of_Reserved_Field")?;
                let entry_len = DEST_ENTRY_LEN + usize::from(reserved_len);
                // Check the whole list fits before allocating for it.
                if count * entry_len > r.left() {
                    return Err(DecodeError::Truncated {
                        what: "destination entries",
                        offset: r.pos,
                        needed: count * entry_len,
                        got: r.left(),
                    });
                }
                let mut dests = Vec::with_capacity(count);
                for _ in 0..count {
                    let dest_id = r.u32("Destination_ID")?;
                    let msn = r.u32("Message_Sequence_Number")?;
                    let reserved = r
                        .bytes(usize::from(reserved_len), "Reserved_Field")?
                        .to_vec();
                    dests.push(DestEntry {
                        dest_id,
                        msn,
                        reserved,
                    });
                }
                Pdu::Address(AddressPdu {
                    priority,
                    map,
                    extra: matches!(ty, PduType::ExtraAddress | PduType::ExtraFecAddress),
                    fec,
                    total_pdus: word4,
                    source,
                    message_id,
                    expiry,
                    reserved_len,
                    dests,
                })
            }
            PduType::Ack => {
                let ack_sender = r.u32("Source_ID_of_Ack_Sender")?;
                let count = usize::from(r.u16("Count_of_Ack_Info_Entries")?);
                if count * ACK_ENTRY_LEN > r.left() {
                    return Err(DecodeError::Truncated {
                        what: "ack info entries",
                        offset: r.pos,
                        needed: count * ACK_ENTRY_LEN,
                        got: r.left(),
                    });
                }
                let mut entries = Vec::with_capacity(count);
                for _ in 0..count {
                    let elen = usize::from(r.u16("Length_of_Ack_Info_Entry")?);
                    if elen < ACK_ENTRY_LEN || elen % 2 != 0 {
                        return Err(DecodeError::BadAckEntryLength(elen));
                    }
                    let source = r.u32("Source_ID")?;
                    let message_id = r.u32("Message_ID")?;
                    let raw = r.bytes(elen - ACK_ENTRY_LEN, "Missing_Data_PDU_Seq_Numbers")?;
                    let raw: Vec<u16> = raw
                        .chunks_exact(2)
                        .map(|c| u16::from_be_bytes([c[0], c[1]]))
                        .collect();
                    entries.push(AckInfoEntry {
                        source,
                        message_id,
                        missing: expand_missing(&raw)?,
                    });
                }
                let timestamp = match r.left() {
                    0 => None,
                    8 => {
                        let b = r.bytes(8, "Timestamp option")?;
                        let mut a = [0u8; 8];
                        a.copy_from_slice(b);
                        Some(u64::from_be_bytes(a))
                    }
                    n => return Err(DecodeError::TrailingBytes(n)),
                };
                Pdu::Ack(AckPdu {
                    priority,
                    ack_sender,
                    entries,
                    timestamp,
                })
            }
            PduType::DiscardMessage => Pdu::Discard(DiscardPdu {
                priority,
                source: r.u32("Source_ID")?,
                message_id: r.u32("Message_ID")?,
            }),
            PduType::Announce => {
                let source = r.u32("Source_ID")?;
                let message_id = r.u32("Message_ID")?;
                let expiry = r.u32("Expiry_Time")?;
                let group = r.u32("Announced_Multicast_Group")?;
                let count = usize::from(word4);
                if count * 4 > r.left() {
                    return Err(DecodeError::Truncated {
                        what: "Destination_IDs",
                        offset: r.pos,
                        needed: count * 4,
                        got: r.left(),
                    });
                }
                let mut members = Vec::with_capacity(count);
                for _ in 0..count {
                    members.push(r.u32("Destination_ID")?);
                }
                Pdu::Announce(AnnouncePdu {
                    map,
                    source,
                    message_id,
                    expiry,
                    group,
                    members,
                })
            }
            PduType::Request | PduType::Reject | PduType::Release => {
                let g = GroupPdu {
                    source: r.u32("Source_ID")?,
                    message_id: r.u32("Message_ID")?,
                    group: r.u32("Multicast_Group")?,
                };
                match ty {
                    PduType::Request => Pdu::Request(g),
                    PduType::Reject => Pdu::Reject(g),
                    _ => Pdu::Release(g),
                }
            }
        };
        if r.left() != 0 {
            return Err(DecodeError::TrailingBytes(r.left()));
        }
        Ok(pdu)
    }

    /// The encoded length of this PDU.
    pub fn encoded_len(&self) -> usize {
        match self {
            Pdu::Data(d) => DATA_HEADER_LEN + d.data.len(),
            Pdu::Address(a) => {
                ADDRESS_HEADER_LEN
                    + a.fec.as_ref().map_or(0, |f| 2 + f.params.len())
                    + a.dests.len() * (DEST_ENTRY_LEN + usize::from(a.reserved_len))
            }
            Pdu::Ack(a) => {
                ACK_HEADER_LEN
                    + a.entries
                        .iter()
                        .map(|e| ACK_ENTRY_LEN + 2 * e.missing.len())
                        .sum::<usize>()
                    + if a.timestamp.is_some() { 8 } else { 0 }
            }
            Pdu::Discard(_) => DISCARD_LEN,
            Pdu::Announce(a) => 24 + 4 * a.members.len(),
            Pdu::Request(_) | Pdu::Reject(_) | Pdu::Release(_) => 20,
        }
    }

    /// Encodes the PDU with its length and annex B checksum.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let len = self.encoded_len();
        if len > MAX_PDU_LEN {
            return Err(EncodeError::TooLong(len));
        }
        let (priority, map, word4) = match self {
            Pdu::Data(d) => (d.priority, Map::ONLY, d.seq),
            Pdu::Address(a) => (a.priority, a.map, a.total_pdus),
            Pdu::Ack(a) => (a.priority, Map::ONLY, 0),
            Pdu::Discard(d) => (d.priority, Map::ONLY, 0),
            Pdu::Announce(a) => (0, a.map, count16("Destination_IDs", a.members.len())?),
            Pdu::Request(_) | Pdu::Reject(_) | Pdu::Release(_) => (0, Map::ONLY, 0),
        };
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&(len as u16).to_be_bytes());
        out.push(priority);
        out.push(map.bits() | self.pdu_type().code());
        out.extend_from_slice(&word4.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        match self {
            Pdu::Data(d) => {
                out.extend_from_slice(&d.source.to_be_bytes());
                out.extend_from_slice(&d.message_id.to_be_bytes());
                out.extend_from_slice(&d.data);
            }
            Pdu::Address(a) => {
                out.extend_from_slice(&a.source.to_be_bytes());
                out.extend_from_slice(&a.message_id.to_be_bytes());
                out.extend_from_slice(&a.expiry.to_be_bytes());
                if let Some(f) = &a.fec {
                    let flen = u8::try_from(f.params.len())
                        .map_err(|_| EncodeError::FecTooLong(f.params.len()))?;
                    out.push(flen);
                    out.push(f.id);
                    out.extend_from_slice(&f.params);
                }
                out.extend_from_slice(
                    &count16("destination entries", a.dests.len())?.to_be_bytes(),
                );
                out.extend_from_slice(&a.reserved_len.to_be_bytes());
                for e in &a.dests {
                    if e.reserved.len() != usize::from(a.reserved_len) {
                        return Err(EncodeError::ReservedLen {
                            got: e.reserved.len(),
                            want: a.reserved_len,
                        });
                    }
                    out.extend_from_slice(&e.dest_id.to_be_bytes());
                    out.extend_from_slice(&e.msn.to_be_bytes());
                    out.extend_from_slice(&e.reserved);
                }
            }
            Pdu::Ack(a) => {
                out.extend_from_slice(&a.ack_sender.to_be_bytes());
                out.extend_from_slice(&count16("ack info entries", a.entries.len())?.to_be_bytes());
                for e in &a.entries {
                    let strictly_increasing = e.missing.windows(2).all(|w| w[0] < w[1]);
                    if !strictly_increasing || e.missing.first() == Some(&0) {
                        return Err(EncodeError::BadMissingList);
                    }
                    // Bounded by the total length check above, so this fits 16 bits.
                    let elen = (ACK_ENTRY_LEN + 2 * e.missing.len()) as u16;
                    out.extend_from_slice(&elen.to_be_bytes());
                    out.extend_from_slice(&e.source.to_be_bytes());
                    out.extend_from_slice(&e.message_id.to_be_bytes());
                    for s in &e.missing {
                        out.extend_from_slice(&s.to_be_bytes());
                    }
                }
                if let Some(t) = a.timestamp {
                    out.extend_from_slice(&t.to_be_bytes());
                }
            }
            Pdu::Discard(d) => {
                out.extend_from_slice(&d.source.to_be_bytes());
                out.extend_from_slice(&d.message_id.to_be_bytes());
            }
            Pdu::Announce(a) => {
                out.extend_from_slice(&a.source.to_be_bytes());
                out.extend_from_slice(&a.message_id.to_be_bytes());
                out.extend_from_slice(&a.expiry.to_be_bytes());
                out.extend_from_slice(&a.group.to_be_bytes());
                for m in &a.members {
                    out.extend_from_slice(&m.to_be_bytes());
                }
            }
            Pdu::Request(g) | Pdu::Reject(g) | Pdu::Release(g) => {
                out.extend_from_slice(&g.source.to_be_bytes());
                out.extend_from_slice(&g.message_id.to_be_bytes());
                out.extend_from_slice(&g.group.to_be_bytes());
            }
        }
        debug_assert_eq!(out.len(), len);
        let c = checksum(&out);
        out[CHECKSUM_OFFSET..CHECKSUM_OFFSET + 2].copy_from_slice(&c.to_be_bytes());
        Ok(out)
    }
}

fn count16(what: &'static str, count: usize) -> Result<u16, EncodeError> {
    u16::try_from(count).map_err(|_| EncodeError::TooMany { what, count })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Verifies a hand-built PDU's checksum by the annex B checking rule (B.4: both running sums
    /// over the whole PDU are zero mod 255), independently of [`checksum`].
    fn annex_b_check(pdu: &[u8]) -> bool {
        let (mut c0, mut c1) = (0u32, 0u32);
        for &b in pdu {
            c0 = (c0 + u32::from(b)) % 255;
            c1 = (c1 + c0) % 255;
        }
        c0 == 0 && c1 == 0
    }

    /// Fills in the checksum of a hand-built vector by the annex B generating rule (B.3), written
    /// out from its formula X = -C1 + (L-n)C0, Y = C1 - (L-n+1)C0, n = 7.
    fn annex_b_fill(mut pdu: Vec<u8>) -> Vec<u8> {
        pdu[6] = 0;
        pdu[7] = 0;
        let (mut c0, mut c1) = (0i64, 0i64);
        for &b in &pdu {
            c0 = (c0 + i64::from(b)) % 255;
            c1 = (c1 + c0) % 255;
        }
        let l_n = pdu.len() as i64 - 7;
        pdu[6] = (-c1 + l_n * c0).rem_euclid(255) as u8;
        pdu[7] = (c1 - (l_n + 1) * c0).rem_euclid(255) as u8;
        assert!(annex_b_check(&pdu));
        pdu
    }

    #[test]
    fn data_pdu_vector_from_the_layout_table() {
        // Data_PDU, built field by field from ACP 142 chapter 2 as the module table gives it.
        let v = annex_b_fill(vec![
            0x00, 0x13, // Length_of_PDU = 19
            0x02, // Priority 2
            0x00, // MAP 0, PDU_Type 0 (Data)
            0x00, 0x01, // Sequence_Number_of_Data_PDU 1
            0x00, 0x00, // Checksum (filled in)
            10, 0, 0, 1, // Source_ID 10.0.0.1
            0x00, 0x00, 0x01, 0x00, // Message_ID 256
            b'a', b'b', b'c', // Fragment_of_Data
        ]);
        let want = Pdu::Data(DataPdu {
            priority: 2,
            seq: 1,
            source: 0x0a00_0001,
            message_id: 256,
            data: b"abc".to_vec(),
        });
        assert_eq!(Pdu::decode(&v), Ok(want.clone()));
        assert_eq!(want.encode(), Ok(v));
    }

    #[test]
    fn address_pdu_vector_from_the_layout_table() {
        let v = annex_b_fill(vec![
            0x00, 0x28, // Length_of_PDU = 40
            0x01, // Priority 1
            0x02, // MAP 00 (only one), PDU_Type 2
            0x00, 0x03, // Total_Number_of_PDUs 3
            0x00, 0x00, // Checksum
            10, 0, 0, 1, // Source_ID
            0x00, 0x00, 0x00, 0x07, // Message_ID 7
            0x5f, 0x5e, 0x10, 0x00, // Expiry_Time
            0x00, 0x02, // Count_of_Destination_Entries 2
            0x00, 0x00, // Length_of_Reserved_Field 0
            10, 0, 0, 2, 0, 0, 0, 1, // Destination_ID 10.0.0.2, MSN 1
            10, 0, 0, 3, 0, 0, 0, 9, // Destination_ID 10.0.0.3, MSN 9
        ]);
        let want = Pdu::Address(AddressPdu {
            priority: 1,
            map: Map::ONLY,
            extra: false,
            fec: None,
            total_pdus: 3,
            source: 0x0a00_0001,
            message_id: 7,
            expiry: 0x5f5e_1000,
            reserved_len: 0,
            dests: vec![
                DestEntry {
                    dest_id: 0x0a00_0002,
                    msn: 1,
                    reserved: vec![],
                },
                DestEntry {
                    dest_id: 0x0a00_0003,
                    msn: 9,
                    reserved: vec![],
                },
            ],
        });
        assert_eq!(Pdu::decode(&v), Ok(want.clone()));
        assert_eq!(want.encode(), Ok(v));
    }

    #[test]
    fn ack_pdu_vector_with_missing_numbers_and_range() {
        let v = annex_b_fill(vec![
            0x00, 0x24, // Length_of_PDU = 36
            0x00, // Priority
            0x01, // PDU_Type 1 (Ack)
            0x00, 0x00, // unused
            0x00, 0x00, // Checksum
            10, 0, 0, 2, // Source_ID_of_Ack_Sender
            0x00, 0x02, // Count_of_Ack_Info_Entries 2
            0x00, 0x0a, // entry 1: length 10 (no missing: complete)
            10, 0, 0, 1, 0, 0, 0, 7, // Source_ID, Message_ID 7
            0x00, 0x0c, // entry 2: length 12
            10, 0, 0, 1, 0, 0, 0, 8, // Source_ID, Message_ID 8
            0x00, 0x05, // missing Data_PDU 5
        ]);
        let Ok(Pdu::Ack(a)) = Pdu::decode(&v) else {
            panic!("not an ack: {:?}", Pdu::decode(&v));
        };
        assert_eq!(a.ack_sender, 0x0a00_0002);
        assert_eq!(a.entries[0].missing, Vec::<u16>::new());
        assert_eq!(a.entries[1].missing, vec![5]);
        assert_eq!(Pdu::Ack(a).encode(), Ok(v));

        // Wireshark's range form: 3, 0, 6 = 3 ..= 6.
        let r = annex_b_fill(vec![
            0x00, 0x1e, 0x00, 0x01, 0, 0, 0, 0, 10, 0, 0, 2, 0x00, 0x01, // header, 1 entry
            0x00, 0x10, 10, 0, 0, 1, 0, 0, 0, 8, // length 16
            0x00, 0x03, 0x00, 0x00, 0x00, 0x06,
        ]);
        let Ok(Pdu::Ack(a)) = Pdu::decode(&r) else {
            panic!("range ack did not decode");
        };
        assert_eq!(a.entries[0].missing, vec![3, 4, 5, 6]);
    }

    #[test]
    fn group_pdus_vectors() {
        let v = annex_b_fill(vec![
            0x00, 0x14, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, // Request_PDU, 20 bytes
            10, 0, 0, 1, 0, 0, 0, 1, // Source_ID, Message_ID
            0xe0, 0x00, 0x00, 0x07, // Multicast_Group
        ]);
        assert_eq!(
            Pdu::decode(&v),
            Ok(Pdu::Request(GroupPdu {
                source: 0x0a00_0001,
                message_id: 1,
                group: 0xe000_0007
            }))
        );
        let a = annex_b_fill(vec![
            0x00, 0x20, 0x00, 0x04, 0x00, 0x02, 0x00, 0x00, // Announce_PDU, 2 members
            10, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0x10, 0, // Source, Message_ID, Expiry
            0xe0, 0, 0, 7, 10, 0, 0, 2, 10, 0, 0, 3,
        ]);
        let Ok(Pdu::Announce(ann)) = Pdu::decode(&a) else {
            panic!("announce did not decode");
        };
        assert_eq!(ann.members, vec![0x0a00_0002, 0x0a00_0003]);
        assert_eq!(Pdu::Announce(ann).encode(), Ok(a));
    }

    #[test]
    fn bad_checksum_and_length_are_typed_errors() {
        let mut v = Pdu::Discard(DiscardPdu {
            priority: 0,
            source: 1,
            message_id: 2,
        })
        .encode()
        .unwrap_or_default();
        assert!(Pdu::decode(&v).is_ok());
        v[15] ^= 1;
        assert!(matches!(
            Pdu::decode(&v),
            Err(DecodeError::BadChecksum { .. })
        ));
        assert!(matches!(
            Pdu::decode(&v[..10]),
            Err(DecodeError::LengthMismatch { .. })
        ));
        assert!(matches!(
            Pdu::decode(&[0, 2]),
            Err(DecodeError::Truncated { .. })
        ));
        let unknown = annex_b_fill(vec![0, 8, 0, 0x3f, 0, 0, 0, 0]);
        assert_eq!(Pdu::decode(&unknown), Err(DecodeError::UnknownType(0x3f)));
        // A huge destination count in a short PDU is refused before any allocation.
        let huge = annex_b_fill(vec![
            0, 24, 0, 2, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff,
        ]);
        assert!(matches!(
            Pdu::decode(&huge),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn internet_checksum_is_accepted() {
        let mut v = Pdu::Release(GroupPdu {
            source: 9,
            message_id: 8,
            group: 7,
        })
        .encode()
        .unwrap_or_default();
        let c = internet_checksum(&v);
        v[6..8].copy_from_slice(&c.to_be_bytes());
        assert!(Pdu::decode(&v).is_ok());
    }

    fn arb_missing() -> impl Strategy<Value = Vec<u16>> {
        proptest::collection::btree_set(1u16..=u16::MAX, 0..20)
            .prop_map(|s| s.into_iter().collect())
    }

    fn arb_pdu() -> impl Strategy<Value = Pdu> {
        let map = (any::<bool>(), any::<bool>()).prop_map(|(a, b)| Map {
            not_first: a,
            not_last: b,
        });
        prop_oneof![
            (
                any::<u8>(),
                any::<u16>(),
                any::<u32>(),
                any::<u32>(),
                proptest::collection::vec(any::<u8>(), 0..300)
            )
                .prop_map(|(priority, seq, source, message_id, data)| Pdu::Data(
                    DataPdu {
                        priority,
                        seq,
                        source,
                        message_id,
                        data
                    }
                )),
            (
                any::<u8>(),
                map.clone(),
                any::<bool>(),
                proptest::option::of((any::<u8>(), proptest::collection::vec(any::<u8>(), 0..10))),
                any::<u16>(),
                any::<u32>(),
                any::<u32>(),
                any::<u32>(),
                0u16..6,
                proptest::collection::vec((any::<u32>(), any::<u32>()), 0..10)
            )
                .prop_flat_map(
                    |(
                        priority,
                        map,
                        extra,
                        fec,
                        total_pdus,
                        source,
                        message_id,
                        expiry,
                        rl,
                        ids,
                    )| {
                        let n = ids.len();
                        proptest::collection::vec(
                            proptest::collection::vec(any::<u8>(), usize::from(rl)),
                            n,
                        )
                        .prop_map(move |res| {
                            Pdu::Address(AddressPdu {
                                priority,
                                map,
                                extra,
                                fec: fec.clone().map(|(id, params)| Fec { id, params }),
                                total_pdus,
                                source,
                                message_id,
                                expiry,
                                reserved_len: rl,
                                dests: ids
                                    .iter()
                                    .zip(res)
                                    .map(|(&(dest_id, msn), reserved)| DestEntry {
                                        dest_id,
                                        msn,
                                        reserved,
                                    })
                                    .collect(),
                            })
                        })
                    }
                ),
            (
                any::<u8>(),
                any::<u32>(),
                proptest::collection::vec((any::<u32>(), any::<u32>(), arb_missing()), 0..5),
                proptest::option::of(any::<u64>())
            )
                .prop_map(|(priority, ack_sender, es, timestamp)| Pdu::Ack(AckPdu {
                    priority,
                    ack_sender,
                    timestamp,
                    entries: es
                        .into_iter()
                        .map(|(source, message_id, missing)| AckInfoEntry {
                            source,
                            message_id,
                            missing
                        })
                        .collect(),
                })),
            (any::<u8>(), any::<u32>(), any::<u32>()).prop_map(|(priority, source, message_id)| {
                Pdu::Discard(DiscardPdu {
                    priority,
                    source,
                    message_id,
                })
            }),
            (
                map,
                any::<u32>(),
                any::<u32>(),
                any::<u32>(),
                any::<u32>(),
                proptest::collection::vec(any::<u32>(), 0..20)
            )
                .prop_map(|(map, source, message_id, expiry, group, members)| {
                    Pdu::Announce(AnnouncePdu {
                        map,
                        source,
                        message_id,
                        expiry,
                        group,
                        members,
                    })
                }),
            (0u8..3, any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
                |(k, source, message_id, group)| {
                    let g = GroupPdu {
                        source,
                        message_id,
                        group,
                    };
                    match k {
                        0 => Pdu::Request(g),
                        1 => Pdu::Reject(g),
                        _ => Pdu::Release(g),
                    }
                }
            ),
        ]
    }

    proptest! {
        #[test]
        fn every_pdu_round_trips(pdu in arb_pdu()) {
            let wire = pdu.encode().map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(wire.len(), pdu.encoded_len());
            prop_assert!(annex_b_check(&wire));
            prop_assert_eq!(Pdu::decode(&wire), Ok(pdu));
        }

        #[test]
        fn truncated_pdus_are_errors(pdu in arb_pdu(), cut in any::<prop::sample::Index>()) {
            let wire = pdu.encode().map_err(|e| TestCaseError::fail(e.to_string()))?;
            let n = cut.index(wire.len());
            prop_assert!(Pdu::decode(&wire[..n]).is_err());
        }

        #[test]
        fn hostile_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Pdu::decode(&bytes);
        }

        #[test]
        fn hostile_bytes_with_valid_length_and_checksum(body in proptest::collection::vec(any::<u8>(), 6..200)) {
            let mut v = body;
            let len = v.len() + 2;
            v.splice(0..0, (len as u16).to_be_bytes());
            let c = checksum(&v);
            v[6..8].copy_from_slice(&c.to_be_bytes());
            if let Ok(p) = Pdu::decode(&v) {
                // Anything accepted re-encodes to a PDU that decodes the same.
                // (A range form may expand past what one PDU can carry plainly.)
                match p.encode() {
                    Ok(again) => prop_assert_eq!(Pdu::decode(&again), Ok(p)),
                    Err(EncodeError::TooLong(_)) => {}
                    Err(e) => return Err(TestCaseError::fail(e.to_string())),
                }
            }
        }
    }
}
