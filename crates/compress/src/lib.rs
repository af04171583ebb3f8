//! Compression for skywave's HF paths: JNOS-compatible LZW (9-16 bits), zlib deflate streams
//! with a partial flush at transmission boundaries, and gzip files for CFTP.
//!
//! Used by `skywave-smtp` (XLZW towards JNOS nodes) and `skywave-hmtp` (compressed HMTP sessions and
//! CFTP mail files). Sans-IO: bytes in, bytes out; no sockets, no clocks.
//!
//! - [`lzw`]: JNOS LZW, clean-room from the stream description (header `03 maxbits`, clear code
//!   256 sent at M+1 bits when the table fills, flush code 257 whose tail opens the next
//!   transmission, dictionary kept for the whole session).
//! - [`deflate`]: one zlib stream per session direction, partial-flushed per transmission.
//! - [`gzip`]: RFC 1952 files for CFTP.
//! - [`scheme`]: scheme names and first-byte detection (`0x03` LZW, `0x78` zlib, ASCII plain).
//! - [`stream`]: one encoder/decoder interface over the stream schemes, with detection.
//! - [`limits`]: caps on decompressed bytes per stream and per message; every decoder checks them
//!   before producing output, so a decompression bomb ends in an error, never in memory exhaustion.
//! - [`corpus`]: a reproducible synthetic mail corpus for tests and benchmarks.
//!
//! # Deflate backend
//!
//! flate2 with its `zlib-rs` backend (set in the workspace `Cargo.toml`), chosen by measurement
//! against the default miniz_oxide backend on the standard corpus (64 messages, 696 kB; deflate
//! level 9; release build, best of 8 runs, three runs each on a shared 2-core machine):
//!
//! | backend | session compress | session inflate | gzip compress | gunzip | session size |
//! |---|---:|---:|---:|---:|---:|
//! | miniz_oxide 0.9 | 9-13 MB/s | 488-497 MB/s | 12-15 MB/s | 407-409 MB/s | 161205 B |
//! | zlib-rs 0.6 | 13-15 MB/s | 639-655 MB/s | 13-14 MB/s | 655-674 MB/s | 161100 B |
//!
//! The compressed sizes are the same to 0.1 %, compression speed is the same within noise, and
//! zlib-rs inflates 1.3-1.6 times faster, so zlib-rs it is. Both are pure Rust; zlib-rs is under
//! the Zlib licence, which `deny.toml` allows. On an HF link neither speed matters next to air
//! time; the gateway decompresses every received stream, so the faster inflater is the one that
//! counts.

pub mod corpus;
pub mod deflate;
pub mod dictionary;
pub mod error;
pub mod gzip;
pub mod limits;
pub mod lzw;
pub mod scheme;
pub mod stream;

pub use deflate::{CompressError, DeflateDecoder, DeflateEncoder};
pub use error::{DecompressError, DetectError, LimitKind, SchemeError};
pub use gzip::{gzip_compress, gzip_decompress, is_gzip};
pub use limits::Limits;
pub use lzw::{LzwDecoder, LzwEncoder, LzwSession};
pub use scheme::{Scheme, StreamKind, detect_stream};
pub use stream::{StreamDecoder, StreamEncoder};
