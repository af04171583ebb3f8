//! gzip files (RFC 1952) for CFTP: Annex F compresses the whole mail-file with gzip and the
//! receiver decompresses "using a method compliant with RFC 1952", so the wire carries the gzip
//! container (10-byte header, deflate data, CRC-32 and length trailer).
//!
//! The compressor writes a minimal header (no name, mtime 0) so that output is reproducible. The
//! decompressor accepts concatenated members as RFC 1952 allows, checks every CRC-32 and length,
//! rejects trailing bytes that are not another member, and inflates in bounded chunks under a
//! byte cap.

use std::io::{Read, Write};

use flate2::Compression;
use flate2::bufread::MultiGzDecoder;
use flate2::write::GzEncoder;

use crate::deflate::CompressError;
use crate::error::DecompressError;
use crate::limits::{Budget, Limits};

/// The two magic bytes every gzip member starts with.
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

const CHUNK: usize = 32 * 1024;

/// True if `data` starts like a gzip file.
pub fn is_gzip(data: &[u8]) -> bool {
    data.starts_with(&GZIP_MAGIC)
}

/// Compresses a whole file into one gzip member at `level` (0-9, clamped).
pub fn gzip_compress(data: &[u8], level: u32) -> Result<Vec<u8>, CompressError> {
    let mut enc = GzEncoder::new(
        Vec::with_capacity(data.len() / 2 + 64),
        Compression::new(level.min(9)),
    );
    enc.write_all(data)
        .map_err(|e| CompressError(e.to_string()))?;
    enc.finish().map_err(|e| CompressError(e.to_string()))
}

/// Decompresses a gzip file, failing with [`DecompressError::LimitExceeded`] as soon as the output
/// would exceed the caps (a gzip file is one message and one stream).
pub fn gzip_decompress(data: &[u8], limits: Limits) -> Result<Vec<u8>, DecompressError> {
    if data.is_empty() {
        return Err(DecompressError::Gzip("empty input, no gzip header".into()));
    }
    if !is_gzip(data) {
        return Err(DecompressError::Gzip(format!(
            "bad magic {:02x?}, expected 1f 8b",
            &data[..data.len().min(2)]
        )));
    }
    let mut budget = Budget::new(limits);
    let mut dec = MultiGzDecoder::new(data);
    let mut out = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    // Each round produces bytes (bounded by the caps) or ends.
    loop {
        let room = usize::try_from(budget.remaining().saturating_add(1))
            .unwrap_or(CHUNK)
            .min(CHUNK);
        let n = dec
            .read(&mut chunk[..room])
            .map_err(|e| DecompressError::Gzip(e.to_string()))?;
        if n == 0 {
            return Ok(out);
        }
        budget.take(n as u64)?;
        out.extend_from_slice(&chunk[..n]);
    }
}
