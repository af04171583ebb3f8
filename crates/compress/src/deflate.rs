//! Deflate streams for compressed HMTP sessions: one zlib stream (RFC 1950/1951) per direction
//! for the whole session, with a partial flush at every transmission boundary.
//!
//! Keeping one compressor for the session lets later messages refer back to earlier ones (the
//! 32 KiB window spans message boundaries), which is where most of the gain on a batch of similar
//! mails comes from. The stream starts with the zlib header, whose first byte is `0x78` (32 KiB
//! window): that is how a receiver tells it from JNOS LZW (`0x03`) and plain text.
//!
//! # Why a partial flush
//! Each transmission must be decodable on its own arrival, without the stream ending. A sync
//! flush does that with an empty stored block: the block header, padding to a byte boundary and
//! `00 00 FF FF`, 4-5 bytes. A partial flush (zlib's `Z_PARTIAL_FLUSH`) closes the current block
//! and appends an empty fixed-code block, 10 bits, which guarantees that every bit of the closed
//! block is out; up to 7 bits of the empty block may stay in the compressor and lead the next
//! transmission. That is about 4 bytes less per transmission, which on a one-message session is
//! the difference between three and four interleaver blocks at 1200 bit/s (issue 12). Any
//! inflater decodes it, including skywave builds that sent sync flushes. The price: a stream cut
//! at a block boundary no longer shows it at this layer ([`DeflateDecoder::finish`]); the SMTP
//! dialogue above (no final `.`, no `QUIT`) is what tells a session that did not finish.
//!
//! Backend: flate2 with `zlib-rs`, chosen over miniz_oxide by measurement on the mail corpus
//! (see the crate docs for the figures).

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use crate::error::DecompressError;
use crate::limits::{Budget, Limits};

/// The deflate level used unless a caller picks another: best compression, because air time
/// costs far more than CPU time on an HF link.
pub const DEFAULT_LEVEL: u32 = 9;

/// Output is inflated in chunks of at most this many bytes, each checked against the caps.
const CHUNK: usize = 32 * 1024;

/// The compressor failed internally (flate2 reported a stream error). Not expected with valid
/// use; reported rather than panicking.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("deflate compressor failed: {0}")]
pub struct CompressError(pub String);

/// Streaming zlib encoder for one direction of a session.
#[derive(Debug)]
pub struct DeflateEncoder {
    inner: Compress,
    out: Vec<u8>,
}

impl DeflateEncoder {
    /// A new zlib stream at `level` (0-9, clamped).
    pub fn new(level: u32) -> Self {
        DeflateEncoder {
            inner: Compress::new(Compression::new(level.min(9)), true),
            out: Vec::new(),
        }
    }

    /// A new zlib stream at `level` primed with a preset dictionary (see
    /// [`crate::dictionary`]): the zlib header carries `FDICT` and the dictionary's id, and the
    /// first bytes can already refer back into it. The receiver must know the dictionary.
    pub fn with_dictionary(level: u32, dictionary: &[u8]) -> Result<Self, CompressError> {
        let mut e = Self::new(level);
        e.inner
            .set_dictionary(dictionary)
            .map_err(|err| CompressError(err.to_string()))?;
        Ok(e)
    }

    fn run(&mut self, mut input: &[u8], flush: FlushCompress) -> Result<(), CompressError> {
        // Each round either consumes input or fills output space; a round that does neither
        // means the compressor has nothing more to give.
        loop {
            let room = (input.len() / 2).max(4096);
            self.out.reserve(room);
            let spare = self.out.capacity() - self.out.len();
            let before_in = self.inner.total_in();
            let before_out = self.inner.total_out();
            let status = self
                .inner
                .compress_vec(input, &mut self.out, flush)
                .map_err(|e| CompressError(e.to_string()))?;
            let consumed = usize::try_from(self.inner.total_in() - before_in).unwrap_or(usize::MAX);
            let produced =
                usize::try_from(self.inner.total_out() - before_out).unwrap_or(usize::MAX);
            input = input.get(consumed..).unwrap_or(&[]);
            let output_full = produced >= spare;
            if input.is_empty() && !output_full {
                return Ok(());
            }
            if consumed == 0 && produced == 0 {
                return if matches!(status, Status::BufError) && input.is_empty() {
                    Ok(())
                } else {
                    Err(CompressError("compressor made no progress".into()))
                };
            }
        }
    }

    /// Compresses `input`. Output may stay inside the compressor until the next flush.
    pub fn push(&mut self, input: &[u8]) -> Result<(), CompressError> {
        if input.is_empty() {
            return Ok(());
        }
        self.run(input, FlushCompress::None)
    }

    /// Ends a transmission with a partial flush (see the module docs): everything pushed so far
    /// becomes decodable by the peer from the bytes taken after this call.
    pub fn flush(&mut self) -> Result<(), CompressError> {
        self.run(&[], FlushCompress::Partial)
    }

    /// Number of bytes [`take_output`](Self::take_output) would return now.
    pub fn output_len(&self) -> usize {
        self.out.len()
    }

    /// Takes the compressed bytes produced so far.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }
}

/// Streaming zlib decoder for one direction of a session, bounded by [`Limits`].
#[derive(Debug)]
pub struct DeflateDecoder {
    inner: Decompress,
    out: Vec<u8>,
    budget: Budget,
    ended: bool,
    /// Scratch space for one inflate chunk, kept between calls.
    chunk: Vec<u8>,
    failed: Option<DecompressError>,
    /// The preset dictionary the stream asked for, once supplied.
    dictionary: Option<u32>,
}

impl DeflateDecoder {
    /// A decoder that expects a zlib header first.
    pub fn new(limits: Limits) -> Self {
        DeflateDecoder {
            inner: Decompress::new(true),
            out: Vec::new(),
            budget: Budget::new(limits),
            ended: false,
            chunk: Vec::new(),
            failed: None,
            dictionary: None,
        }
    }

    /// The id of the preset dictionary the stream uses, once its header has been read.
    pub fn dictionary(&self) -> Option<u32> {
        self.dictionary
    }

    /// Starts a new message for the per-message cap.
    pub fn start_message(&mut self) {
        self.budget.start_message();
    }

    /// Total bytes decoded over the stream's life.
    pub fn total_out(&self) -> u64 {
        self.budget.stream_total()
    }

    /// Decodes `input`, appending the text to the output buffer. An error is final.
    pub fn feed(&mut self, input: &[u8]) -> Result<(), DecompressError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = self.feed_inner(input);
        if let Err(e) = &result {
            self.failed = Some(e.clone());
        }
        result
    }

    fn feed_inner(&mut self, input: &[u8]) -> Result<(), DecompressError> {
        if input.is_empty() {
            return Ok(());
        }
        if self.ended {
            return Err(DecompressError::ZlibTrailingData(input.len()));
        }
        if self.chunk.len() != CHUNK {
            self.chunk = vec![0u8; CHUNK];
        }
        let mut rest = input;
        // Each round consumes input or produces output (bounded by the caps), or stops.
        loop {
            // One byte over the remaining budget, so that going over is seen, not silently cut.
            let room = usize::try_from(self.budget.remaining().saturating_add(1))
                .unwrap_or(CHUNK)
                .min(CHUNK);
            let before_in = self.inner.total_in();
            let before_out = self.inner.total_out();
            let status =
                match self
                    .inner
                    .decompress(rest, &mut self.chunk[..room], FlushDecompress::None)
                {
                    Ok(status) => status,
                    // The header named a preset dictionary (RFC 1950 FDICT): the inflater stopped
                    // after the header, waiting for it. Supply it if it is one we know.
                    Err(e) if e.needs_dictionary().is_some() && self.dictionary.is_none() => {
                        let id = e.needs_dictionary().unwrap_or_default();
                        let dictionary = crate::dictionary::by_id(id)
                            .ok_or(DecompressError::UnknownDictionary(id))?;
                        self.inner
                            .set_dictionary(dictionary)
                            .map_err(|e| DecompressError::Zlib(e.to_string()))?;
                        self.dictionary = Some(id);
                        Status::Ok
                    }
                    Err(e) => return Err(DecompressError::Zlib(e.to_string())),
                };
            let consumed = usize::try_from(self.inner.total_in() - before_in).unwrap_or(usize::MAX);
            let produced =
                usize::try_from(self.inner.total_out() - before_out).unwrap_or(usize::MAX);
            rest = rest.get(consumed..).unwrap_or(&[]);
            self.budget.take(produced as u64)?;
            self.out
                .extend_from_slice(&self.chunk[..produced.min(room)]);
            if matches!(status, Status::StreamEnd) {
                self.ended = true;
                if !rest.is_empty() {
                    return Err(DecompressError::ZlibTrailingData(rest.len()));
                }
                return Ok(());
            }
            if rest.is_empty() && produced < room {
                return Ok(());
            }
            if consumed == 0 && produced == 0 {
                return Err(DecompressError::Zlib(
                    "the inflater made no progress on its input".into(),
                ));
            }
        }
    }

    /// Ends the stream: the error that stopped decoding, if one did. A stream cut short is not
    /// an error here: with partial flushes (see the module docs) a cut at a block boundary looks
    /// like a flush point, and a cut inside a block has given out only whole symbols, a prefix
    /// of what was sent. The protocol above tells a complete session from a cut one.
    pub fn finish(&mut self) -> Result<(), DecompressError> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Bytes of decoded text waiting in the output buffer.
    pub fn output_len(&self) -> usize {
        self.out.len()
    }

    /// Takes the decoded text so far.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }
}
