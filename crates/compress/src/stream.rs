//! One interface over the three session-stream schemes (plain, JNOS LZW, zlib deflate), and a
//! decoder that picks the scheme from the stream's first byte.
//!
//! This is what the HMTP and SMTP session layers hold per direction: push text and flush at each
//! transmission boundary on the sending side; feed received bytes, call `start_message` at each
//! message boundary (for the per-message cap) and take the text on the receiving side.

use crate::deflate::{CompressError, DeflateDecoder, DeflateEncoder};
use crate::error::{DecompressError, SchemeError};
use crate::limits::{Budget, Limits};
use crate::lzw::{LzwDecoder, LzwEncoder};
use crate::scheme::{Scheme, StreamKind, detect_stream};

/// The sending side of a session stream in one of the stream schemes.
#[derive(Debug)]
pub enum StreamEncoder {
    /// No compression: bytes pass through.
    Plain(Vec<u8>),
    /// JNOS LZW.
    Lzw(LzwEncoder),
    /// zlib deflate with partial flushes.
    Deflate(DeflateEncoder),
}

impl StreamEncoder {
    /// An encoder for `scheme`; gzip is a file format, not a session stream, and is refused.
    pub fn for_scheme(scheme: Scheme) -> Result<Self, SchemeError> {
        match scheme {
            Scheme::Lzw(bits) => Ok(StreamEncoder::Lzw(LzwEncoder::new(bits)?)),
            Scheme::Deflate => Ok(StreamEncoder::Deflate(DeflateEncoder::new(
                crate::deflate::DEFAULT_LEVEL,
            ))),
            Scheme::Gzip => Err(SchemeError::NotAStream(scheme.to_string())),
        }
    }

    /// A deflate encoder primed with the known dictionary `id` (see [`crate::dictionary`]).
    pub fn deflate_with_dictionary(id: u32) -> Result<Self, SchemeError> {
        let dictionary = crate::dictionary::by_id(id).ok_or(SchemeError::UnknownDictionary(id))?;
        crate::deflate::DeflateEncoder::with_dictionary(crate::deflate::DEFAULT_LEVEL, dictionary)
            .map(StreamEncoder::Deflate)
            .map_err(|e| SchemeError::Dictionary(e.to_string()))
    }

    /// Compresses `input`.
    pub fn push(&mut self, input: &[u8]) -> Result<(), CompressError> {
        match self {
            StreamEncoder::Plain(out) => {
                out.extend_from_slice(input);
                Ok(())
            }
            StreamEncoder::Lzw(e) => {
                e.push(input);
                Ok(())
            }
            StreamEncoder::Deflate(e) => e.push(input),
        }
    }

    /// Ends a transmission: everything pushed so far becomes decodable by the peer.
    pub fn flush(&mut self) -> Result<(), CompressError> {
        match self {
            StreamEncoder::Plain(_) => Ok(()),
            StreamEncoder::Lzw(e) => {
                e.flush();
                Ok(())
            }
            StreamEncoder::Deflate(e) => e.flush(),
        }
    }

    /// Takes the bytes ready to send (after a flush: exactly the transmission it ended).
    pub fn take_output(&mut self) -> Vec<u8> {
        match self {
            StreamEncoder::Plain(out) => std::mem::take(out),
            StreamEncoder::Lzw(e) => e.take_output(),
            StreamEncoder::Deflate(e) => e.take_output(),
        }
    }
}

/// Pass-through decoder for plain streams, still under the caps.
#[derive(Debug)]
struct PlainDecoder {
    out: Vec<u8>,
    budget: Budget,
}

#[derive(Debug)]
enum Inner {
    Undetected,
    Plain(PlainDecoder),
    Lzw(LzwDecoder),
    Deflate(DeflateDecoder),
}

/// The receiving side of a session stream: detects the scheme from the first byte (or checks
/// that it is the one expected) and decodes under [`Limits`].
#[derive(Debug)]
pub struct StreamDecoder {
    inner: Inner,
    expected: Option<StreamKind>,
    limits: Limits,
}

impl StreamDecoder {
    /// A decoder that takes whatever scheme the first byte announces.
    pub fn detect(limits: Limits) -> Self {
        StreamDecoder {
            inner: Inner::Undetected,
            expected: None,
            limits,
        }
    }

    /// A decoder that requires `kind` and fails with [`DecompressError::SchemeMismatch`] otherwise.
    pub fn expecting(kind: StreamKind, limits: Limits) -> Self {
        StreamDecoder {
            inner: Inner::Undetected,
            expected: Some(kind),
            limits,
        }
    }

    /// The scheme, once the first byte has arrived.
    pub fn kind(&self) -> Option<StreamKind> {
        match self.inner {
            Inner::Undetected => None,
            Inner::Plain(_) => Some(StreamKind::Plain),
            Inner::Lzw(_) => Some(StreamKind::Lzw),
            Inner::Deflate(_) => Some(StreamKind::Zlib),
        }
    }

    /// For a deflate stream with a preset dictionary, its id, once the header has arrived.
    pub fn dictionary(&self) -> Option<u32> {
        match &self.inner {
            Inner::Deflate(d) => d.dictionary(),
            _ => None,
        }
    }

    /// For an LZW stream, the sender's maxbits once its header has arrived.
    pub fn lzw_maxbits(&self) -> Option<u8> {
        match &self.inner {
            Inner::Lzw(d) => d.peer_maxbits(),
            _ => None,
        }
    }

    /// Decodes `input`, appending the text to the output buffer.
    pub fn feed(&mut self, input: &[u8]) -> Result<(), DecompressError> {
        if matches!(self.inner, Inner::Undetected) {
            if input.is_empty() {
                return Ok(());
            }
            let kind = detect_stream(input)?;
            if let Some(expected) = self.expected
                && expected != kind
            {
                return Err(DecompressError::SchemeMismatch {
                    found: kind.to_string(),
                    expected: expected.to_string(),
                });
            }
            self.inner = match kind {
                StreamKind::Plain => Inner::Plain(PlainDecoder {
                    out: Vec::new(),
                    budget: Budget::new(self.limits),
                }),
                StreamKind::Lzw => Inner::Lzw(LzwDecoder::new(self.limits)),
                StreamKind::Zlib => Inner::Deflate(DeflateDecoder::new(self.limits)),
            };
        }
        match &mut self.inner {
            Inner::Undetected => Ok(()),
            Inner::Plain(p) => {
                p.budget.take(input.len() as u64)?;
                p.out.extend_from_slice(input);
                Ok(())
            }
            Inner::Lzw(d) => d.feed(input),
            Inner::Deflate(d) => d.feed(input),
        }
    }

    /// Starts a new message for the per-message cap.
    pub fn start_message(&mut self) {
        match &mut self.inner {
            Inner::Undetected => {}
            Inner::Plain(p) => p.budget.start_message(),
            Inner::Lzw(d) => d.start_message(),
            Inner::Deflate(d) => d.start_message(),
        }
    }

    /// Ends the stream, checking that it did not stop where it should not.
    pub fn finish(&mut self) -> Result<(), DecompressError> {
        match &mut self.inner {
            Inner::Undetected | Inner::Plain(_) => Ok(()),
            Inner::Lzw(d) => d.finish(),
            Inner::Deflate(d) => d.finish(),
        }
    }

    /// Takes the decoded text so far.
    pub fn take_output(&mut self) -> Vec<u8> {
        match &mut self.inner {
            Inner::Undetected => Vec::new(),
            Inner::Plain(p) => std::mem::take(&mut p.out),
            Inner::Lzw(d) => d.take_output(),
            Inner::Deflate(d) => d.take_output(),
        }
    }
}
