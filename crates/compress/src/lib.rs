//! Compression for skywave's HF paths: JNOS-compatible LZW (9-16 bits), zlib deflate streams
//! with sync flush at transmission boundaries, and gzip files for CFTP.
//!
//! Used by `skywave-smtp` (XLZW towards JNOS nodes) and `skywave-hmtp` (compressed HMTP sessions and
//! CFTP mail files). Sans-IO: bytes in, bytes out.
