//! Incremental, bounded decoder of S_Primitive frames from a byte stream (sans-IO).
//!
//! Feed it whatever the transport delivered with [`Decoder::push`], then call
//! [`Decoder::next`] until it answers `Ok(None)` (it needs more bytes). The header is checked as
//! soon as it arrives, so an oversize frame is refused from its Size field before any of its
//! body is buffered.
//!
//! **After an error** the decoder is *failed*: it drops everything it had buffered, ignores
//! further [`Decoder::push`]es and answers every [`Decoder::next`] with the same error until
//! [`Decoder::reset`]. SIS has no resynchronisation rule (a preamble can occur inside a U_PDU),
//! so the only safe reaction to a bad frame is to close the connection, which is what the
//! client does.

use bytes::{Buf, Bytes, BytesMut};
use thiserror::Error;

use crate::address::NodeAddress;
use crate::fields::{Priority, Rank, SapId, ServiceType, Ttl, TxMode};
use crate::primitive::{
    Block, CONFIRM_FIXED, HEADER_LEN, HardLink, INDICATION_FIXED, PREAMBLE, Primitive,
    REQUEST_FIXED, UnidataConfirm, UnidataIndication, UnidataRejected, UnidataRequest, VERSION,
    type_name,
};
use crate::reason::{
    BindRejectReason, HardLinkRejectReason, HardLinkTerminateReason, SubnetReason, SubnetStatus,
    UnbindReason, UnidataRejectReason,
};

/// Default upper bound on the Size field: an MTU of 4096 (broadcast-only nodes) plus headers
/// and generous room for the block lists of non-ARQ-with-errors indications.
pub const DEFAULT_MAX_SIZE: u16 = 8192;

/// What was wrong with the bytes.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The first two bytes of a frame were not `90 EB`.
    #[error("bad S_Primitive preamble: expected 90 EB, got {:02X} {:02X}", found[0], found[1])]
    BadPreamble {
        /// The two bytes found.
        found: [u8; 2],
    },
    /// The version byte was not 0.
    #[error("unsupported SIS version {0} (only version 0 exists)")]
    UnsupportedVersion(u8),
    /// The Size field was 0 (it always counts at least the type byte).
    #[error("S_Primitive Size field is 0 (it must count at least the type byte)")]
    ZeroSize,
    /// The Size field exceeds the configured maximum; the body was not buffered.
    #[error("S_Primitive Size field {size} exceeds the maximum of {max} bytes")]
    Oversize {
        /// The Size field.
        size: u16,
        /// The configured maximum.
        max: u16,
    },
    /// The type byte is not one of 1-27.
    #[error("unknown S_Primitive type {0}")]
    UnknownType(u8),
    /// A fixed-size primitive had another size.
    #[error("{primitive}: Size field is {size}, the primitive is always {expected}")]
    WrongSize {
        /// Primitive name.
        primitive: &'static str,
        /// The Size field.
        size: u16,
        /// The size of this primitive.
        expected: usize,
    },
    /// A variable-size primitive was shorter than its fixed part.
    #[error("{primitive}: Size field is {size}, below the minimum of {min}")]
    TooShort {
        /// Primitive name.
        primitive: &'static str,
        /// The Size field.
        size: u16,
        /// The smallest valid Size.
        min: usize,
    },
    /// The U_PDU length (and block lists) inside the body disagree with the Size field.
    #[error("{primitive}: Size field is {size} but the body's length fields imply {implied}")]
    LengthMismatch {
        /// Primitive name.
        primitive: &'static str,
        /// The Size field.
        size: u16,
        /// The Size the inner length fields call for.
        implied: usize,
    },
    /// A Rockwell-form indication whose 4 extra bytes were not zero.
    #[error(
        "{primitive}: the 4 bytes after the U_PDU size (Rockwell form) are {found:02X?}, not zero"
    )]
    NonZeroPadding {
        /// Primitive name.
        primitive: &'static str,
        /// The 4 bytes.
        found: [u8; 4],
    },
    /// The errored / non-received block lists run past the end of the frame.
    #[error("{primitive}: block lists run past the end of a frame of Size {size}")]
    BlockListOverrun {
        /// Primitive name.
        primitive: &'static str,
        /// The Size field.
        size: u16,
    },
}

/// Incremental decoder; see the module documentation for its error behaviour.
#[derive(Debug)]
pub struct Decoder {
    buf: BytesMut,
    max_size: u16,
    failed: Option<DecodeError>,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

/// How the Size field of a type is constrained.
enum SizeRule {
    Exact(usize),
    AtLeast(usize),
}

fn size_rule(code: u8) -> Option<SizeRule> {
    Some(match code {
        2 | 15 | 16 | 17 => SizeRule::Exact(1),
        4 | 5 => SizeRule::Exact(2),
        14 => SizeRule::Exact(3),
        1 | 3 => SizeRule::Exact(4),
        7 => SizeRule::Exact(5),
        6 | 12 => SizeRule::Exact(6),
        8..=11 | 13 => SizeRule::Exact(7),
        18 | 19 => SizeRule::AtLeast(2),
        20 | 24 => SizeRule::AtLeast(REQUEST_FIXED),
        21 | 25 => SizeRule::AtLeast(INDICATION_FIXED),
        22 | 23 | 26 | 27 => SizeRule::AtLeast(CONFIRM_FIXED),
        _ => return None,
    })
}

impl Decoder {
    /// A decoder refusing frames whose Size exceeds [`DEFAULT_MAX_SIZE`].
    pub fn new() -> Self {
        Self::with_max_size(DEFAULT_MAX_SIZE)
    }

    /// A decoder refusing frames whose Size field exceeds `max_size`.
    pub fn with_max_size(max_size: u16) -> Self {
        Decoder {
            buf: BytesMut::new(),
            max_size,
            failed: None,
        }
    }

    /// Appends received bytes. Ignored once the decoder has failed. Call [`Decoder::next`]
    /// until it answers `Ok(None)` after every push: the buffer then never holds more than one
    /// frame of at most the maximum Size plus one push.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.failed.is_none() {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// Bytes buffered but not yet returned as a primitive (non-zero at end of stream means the
    /// peer closed in the middle of a frame).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The error that failed the decoder, if any.
    pub fn failure(&self) -> Option<&DecodeError> {
        self.failed.as_ref()
    }

    /// Forgets buffered bytes and any failure (for a new connection).
    pub fn reset(&mut self) {
        self.buf.clear();
        self.failed = None;
    }

    /// The next complete primitive: `Ok(None)` when more bytes are needed.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Primitive>, DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        match self.try_next() {
            Ok(p) => Ok(p),
            Err(e) => {
                self.buf = BytesMut::new();
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    fn try_next(&mut self) -> Result<Option<Primitive>, DecodeError> {
        let b = &self.buf;
        if b.len() < 2 {
            return Ok(None);
        }
        if b[..2] != PREAMBLE {
            return Err(DecodeError::BadPreamble {
                found: [b[0], b[1]],
            });
        }
        if b.len() < 3 {
            return Ok(None);
        }
        if b[2] != VERSION {
            return Err(DecodeError::UnsupportedVersion(b[2]));
        }
        if b.len() < HEADER_LEN {
            return Ok(None);
        }
        let size = u16::from_be_bytes([b[3], b[4]]);
        if size == 0 {
            return Err(DecodeError::ZeroSize);
        }
        if size > self.max_size {
            return Err(DecodeError::Oversize {
                size,
                max: self.max_size,
            });
        }
        if b.len() < HEADER_LEN + 1 {
            return Ok(None);
        }
        let code = b[HEADER_LEN];
        let (Some(rule), Some(primitive)) = (size_rule(code), type_name(code)) else {
            return Err(DecodeError::UnknownType(code));
        };
        match rule {
            SizeRule::Exact(expected) if usize::from(size) != expected => {
                return Err(DecodeError::WrongSize {
                    primitive,
                    size,
                    expected,
                });
            }
            SizeRule::AtLeast(min) if usize::from(size) < min => {
                return Err(DecodeError::TooShort {
                    primitive,
                    size,
                    min,
                });
            }
            _ => {}
        }
        let total = HEADER_LEN + usize::from(size);
        if b.len() < total {
            // Reserve once so that a large frame arriving in small chunks does not regrow.
            self.buf.reserve(total - b.len());
            return Ok(None);
        }
        let mut frame = self.buf.split_to(total).freeze();
        frame.advance(HEADER_LEN + 1);
        parse_body(code, primitive, size, frame).map(Some)
    }
}

/// Reads the body of a frame whose size has already been checked against the type's rule, so
/// the fixed parts are always present.
fn parse_body(
    code: u8,
    primitive: &'static str,
    size: u16,
    mut body: Bytes,
) -> Result<Primitive, DecodeError> {
    Ok(match code {
        1 => {
            let (b0, b1, b2) = (body[0], body[1], body[2]);
            Primitive::BindRequest {
                sap: SapId::from_bits(b0 >> 4),
                rank: Rank::from_bits(b0),
                service: ServiceType::from_bytes(b1, b2),
            }
        }
        2 => Primitive::UnbindRequest,
        3 => Primitive::BindAccepted {
            sap: SapId::from_bits(body[0] >> 4),
            mtu: u16::from_be_bytes([body[1], body[2]]),
        },
        4 => Primitive::BindRejected {
            reason: BindRejectReason::from(body[0]),
        },
        5 => Primitive::UnbindIndication {
            reason: UnbindReason::from(body[0]),
        },
        6 => Primitive::HardLinkEstablish(HardLink::from_bytes(body[0], addr(&body[1..5]))),
        7 => Primitive::HardLinkTerminate {
            remote: NodeAddress::from_wire(addr(&body[0..4])),
        },
        8 | 11 => {
            let remote_status = body[0];
            let link = HardLink::from_bytes(body[1], addr(&body[2..6]));
            if code == 8 {
                Primitive::HardLinkEstablished {
                    remote_status,
                    link,
                }
            } else {
                Primitive::HardLinkIndication {
                    remote_status,
                    link,
                }
            }
        }
        9 => Primitive::HardLinkRejected {
            reason: HardLinkRejectReason::from(body[0]),
            link: HardLink::from_bytes(body[1], addr(&body[2..6])),
        },
        10 => Primitive::HardLinkTerminated {
            reason: HardLinkTerminateReason::from(body[0]),
            link: HardLink::from_bytes(body[1], addr(&body[2..6])),
        },
        12 => Primitive::HardLinkAccept(HardLink::from_bytes(body[0], addr(&body[1..5]))),
        13 => Primitive::HardLinkReject {
            reason: body[0],
            link: HardLink::from_bytes(body[1], addr(&body[2..6])),
        },
        14 => Primitive::SubnetAvailability {
            status: SubnetStatus::from(body[0]),
            reason: SubnetReason::from(body[1]),
        },
        15 => Primitive::DataFlowOn,
        16 => Primitive::DataFlowOff,
        17 => Primitive::KeepAlive,
        18 | 19 => {
            let msg_type = body.get_u8();
            if code == 18 {
                Primitive::ManagementRequest { msg_type, body }
            } else {
                Primitive::ManagementIndication { msg_type, body }
            }
        }
        20 | 24 => {
            let r = parse_request(primitive, size, body, code == 20)?;
            if code == 20 {
                Primitive::UnidataRequest(r)
            } else {
                Primitive::ExpeditedUnidataRequest(r)
            }
        }
        21 | 25 => {
            let i = parse_indication(primitive, size, body, code == 21)?;
            if code == 21 {
                Primitive::UnidataIndication(i)
            } else {
                Primitive::ExpeditedUnidataIndication(i)
            }
        }
        22 | 26 => {
            let (first, dest, updu_part) = parse_tail(primitive, size, body)?;
            let c = UnidataConfirm {
                dest_sap: SapId::from_bits(first),
                dest,
                updu_part,
            };
            if code == 22 {
                Primitive::UnidataRequestConfirm(c)
            } else {
                Primitive::ExpeditedUnidataRequestConfirm(c)
            }
        }
        23 | 27 => {
            let (first, dest, updu_part) = parse_tail(primitive, size, body)?;
            let r = UnidataRejected {
                reason: UnidataRejectReason::from(first >> 4),
                dest_sap: SapId::from_bits(first),
                dest,
                updu_part,
            };
            if code == 23 {
                Primitive::UnidataRequestRejected(r)
            } else {
                Primitive::ExpeditedUnidataRequestRejected(r)
            }
        }
        // `size_rule` admitted only 1-27.
        other => return Err(DecodeError::UnknownType(other)),
    })
}

fn addr(b: &[u8]) -> [u8; 4] {
    [b[0], b[1], b[2], b[3]]
}

fn parse_request(
    primitive: &'static str,
    size: u16,
    mut body: Bytes,
    with_priority: bool,
) -> Result<UnidataRequest, DecodeError> {
    let b0 = body.get_u8();
    let dest = NodeAddress::from_wire(addr(&body[..4]));
    body.advance(4);
    let (m0, m1) = (body.get_u8(), body.get_u8());
    let ttl_low = body.get_u16();
    let k = usize::from(body.get_u16());
    if body.len() != k {
        return Err(DecodeError::LengthMismatch {
            primitive,
            size,
            implied: REQUEST_FIXED + k,
        });
    }
    let ttl_units = (u32::from(m1 & 0x0F) << 16) | u32::from(ttl_low);
    Ok(UnidataRequest {
        priority: if with_priority {
            Priority::from_bits(b0 >> 4)
        } else {
            Priority::default()
        },
        dest_sap: SapId::from_bits(b0),
        dest,
        mode: ServiceType::from_bytes(m0, m1),
        // 20 bits always fit.
        ttl: Ttl::from_units(ttl_units).unwrap_or_default(),
        updu: body,
    })
}

fn parse_indication(
    primitive: &'static str,
    size: u16,
    mut body: Bytes,
    with_priority: bool,
) -> Result<UnidataIndication, DecodeError> {
    let b0 = body.get_u8();
    let dest = NodeAddress::from_wire(addr(&body[..4]));
    body.advance(4);
    let m = body.get_u8();
    let src = NodeAddress::from_wire(addr(&body[..4]));
    body.advance(4);
    let n = usize::from(body.get_u16());
    let tx_mode = TxMode::from_bits(m >> 4);
    let mut errored = Vec::new();
    let mut missing = Vec::new();
    let mut rockwell_form = false;
    if tx_mode == TxMode::NonArqWithErrors {
        let overrun = || DecodeError::BlockListOverrun { primitive, size };
        for list in [&mut errored, &mut missing] {
            if body.len() < 2 {
                return Err(overrun());
            }
            let count = usize::from(body.get_u16());
            if body.len() < count * 4 {
                return Err(overrun());
            }
            list.reserve_exact(count);
            for _ in 0..count {
                list.push(Block {
                    offset: body.get_u16(),
                    size: body.get_u16(),
                });
            }
        }
        if body.len() != n {
            let implied = usize::from(size) - body.len() + n;
            return Err(DecodeError::LengthMismatch {
                primitive,
                size,
                implied,
            });
        }
    } else if body.len() == n + 4 {
        let pad = addr(&body[..4]);
        if pad != [0; 4] {
            return Err(DecodeError::NonZeroPadding {
                primitive,
                found: pad,
            });
        }
        body.advance(4);
        rockwell_form = true;
    } else if body.len() != n {
        return Err(DecodeError::LengthMismatch {
            primitive,
            size,
            implied: INDICATION_FIXED + n,
        });
    }
    Ok(UnidataIndication {
        priority: if with_priority {
            Priority::from_bits(b0 >> 4)
        } else {
            Priority::default()
        },
        dest_sap: SapId::from_bits(b0),
        dest,
        tx_mode,
        src_sap: SapId::from_bits(m),
        src,
        errored,
        missing,
        rockwell_form,
        updu: body,
    })
}

fn parse_tail(
    primitive: &'static str,
    size: u16,
    mut body: Bytes,
) -> Result<(u8, NodeAddress, Bytes), DecodeError> {
    let first = body.get_u8();
    let dest = NodeAddress::from_wire(addr(&body[..4]));
    body.advance(4);
    let n = usize::from(body.get_u16());
    if body.len() != n {
        return Err(DecodeError::LengthMismatch {
            primitive,
            size,
            implied: CONFIRM_FIXED + n,
        });
    }
    Ok((first, dest, body))
}
