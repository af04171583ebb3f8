//! Caps on decompressed bytes, so that a decompression bomb (a few kilobytes that expand to
//! gigabytes) ends in [`DecompressError::LimitExceeded`] instead of exhausting memory.
//!
//! Every decoder in this crate checks the caps *before* it appends output, and inflates in
//! bounded chunks, so the memory it holds never exceeds the cap plus one chunk.

use crate::error::{DecompressError, LimitKind};

/// Decompression caps for one stream (one direction of a session, or one file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes one stream may decompress to, over its whole life.
    pub max_stream_bytes: u64,
    /// Most bytes one message may decompress to; the counter restarts at each
    /// `start_message` call on the decoder.
    pub max_message_bytes: u64,
}

impl Limits {
    /// 64 MiB per message: well above any mail an HF link carries in practice.
    pub const DEFAULT_MESSAGE_BYTES: u64 = 64 << 20;
    /// 512 MiB per stream.
    pub const DEFAULT_STREAM_BYTES: u64 = 512 << 20;

    /// The same cap for a stream and a message (for single-message uses such as a CFTP file).
    pub fn single(max_bytes: u64) -> Self {
        Limits {
            max_stream_bytes: max_bytes,
            max_message_bytes: max_bytes,
        }
    }

    /// No practical cap (`u64::MAX`). For tools that process trusted local data only.
    pub fn unlimited() -> Self {
        Limits::single(u64::MAX)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_stream_bytes: Self::DEFAULT_STREAM_BYTES,
            max_message_bytes: Self::DEFAULT_MESSAGE_BYTES,
        }
    }
}

/// Running totals checked against [`Limits`].
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    limits: Limits,
    stream: u64,
    message: u64,
}

impl Budget {
    pub(crate) fn new(limits: Limits) -> Self {
        Budget {
            limits,
            stream: 0,
            message: 0,
        }
    }

    /// Bytes that may still be produced before a cap is hit.
    pub(crate) fn remaining(&self) -> u64 {
        let s = self.limits.max_stream_bytes.saturating_sub(self.stream);
        let m = self.limits.max_message_bytes.saturating_sub(self.message);
        s.min(m)
    }

    /// Accounts for `n` more output bytes, or says which cap they would break.
    pub(crate) fn take(&mut self, n: u64) -> Result<(), DecompressError> {
        if self.stream.saturating_add(n) > self.limits.max_stream_bytes {
            return Err(DecompressError::LimitExceeded {
                kind: LimitKind::Stream,
                limit: self.limits.max_stream_bytes,
            });
        }
        if self.message.saturating_add(n) > self.limits.max_message_bytes {
            return Err(DecompressError::LimitExceeded {
                kind: LimitKind::Message,
                limit: self.limits.max_message_bytes,
            });
        }
        self.stream += n;
        self.message += n;
        Ok(())
    }

    pub(crate) fn start_message(&mut self) {
        self.message = 0;
    }

    pub(crate) fn stream_total(&self) -> u64 {
        self.stream
    }
}
