//! Async framing of S_Primitives over any tokio byte stream: [`SisReader`] (decoder + read
//! buffer) and [`SisWriter`] (encoder + write), and [`SisStream`] joining both halves of one
//! transport. The client uses the halves; a SIS server (the emulator's, or a test script) can
//! use [`SisStream`] directly.

use std::io;

use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};

use crate::decode::{DecodeError, Decoder};
use crate::fields::{Rank, SapId, ServiceType};
use crate::primitive::{EncodeError, Primitive};

/// Reading or writing primitives failed.
#[derive(Debug, Error)]
pub enum StreamError {
    /// The transport failed.
    #[error("SIS transport error: {0}")]
    Io(io::Error),
    /// The peer sent a bad frame (the connection should be closed).
    #[error("bad frame from peer: {0}")]
    Decode(DecodeError),
    /// A primitive could not be encoded.
    #[error("cannot encode primitive: {0}")]
    Encode(EncodeError),
    /// The peer closed the connection in the middle of a frame.
    #[error("connection closed in the middle of a frame ({buffered} bytes of it received)")]
    Truncated {
        /// Bytes of the incomplete frame.
        buffered: usize,
    },
}

// The messages above already include the inner error's text, so it is not also exposed as
// `source()` (that would print it twice in a `{:#}` error chain).
impl From<io::Error> for StreamError {
    fn from(e: io::Error) -> Self {
        StreamError::Io(e)
    }
}

impl From<DecodeError> for StreamError {
    fn from(e: DecodeError) -> Self {
        StreamError::Decode(e)
    }
}

impl From<EncodeError> for StreamError {
    fn from(e: EncodeError) -> Self {
        StreamError::Encode(e)
    }
}

/// Reads primitives from a byte stream.
#[derive(Debug)]
pub struct SisReader<R> {
    io: R,
    decoder: Decoder,
    buf: Vec<u8>,
}

impl<R: AsyncRead + Unpin> SisReader<R> {
    /// A reader with the default decoder bound.
    pub fn new(io: R) -> Self {
        Self::with_decoder(io, Decoder::new())
    }

    /// A reader using the given decoder (e.g. one with another size bound).
    pub fn with_decoder(io: R, decoder: Decoder) -> Self {
        SisReader {
            io,
            decoder,
            buf: vec![0; 16 * 1024],
        }
    }

    /// The next primitive; `Ok(None)` when the peer closed cleanly between frames.
    /// Cancel-safe: no bytes are lost if the future is dropped while waiting.
    pub async fn recv(&mut self) -> Result<Option<Primitive>, StreamError> {
        loop {
            if let Some(p) = self.decoder.next()? {
                return Ok(Some(p));
            }
            let n = self.io.read(&mut self.buf).await?;
            if n == 0 {
                return match self.decoder.buffered() {
                    0 => Ok(None),
                    buffered => Err(StreamError::Truncated { buffered }),
                };
            }
            self.decoder.push(&self.buf[..n]);
        }
    }

    /// Gives back the transport.
    pub fn into_inner(self) -> R {
        self.io
    }
}

/// Writes primitives to a byte stream.
#[derive(Debug)]
pub struct SisWriter<W> {
    io: W,
    buf: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> SisWriter<W> {
    /// A writer over `io`.
    pub fn new(io: W) -> Self {
        SisWriter {
            io,
            buf: Vec::new(),
        }
    }

    /// Encodes and writes one primitive, then flushes.
    pub async fn send(&mut self, p: &Primitive) -> Result<(), StreamError> {
        self.buf.clear();
        p.encode(&mut self.buf)?;
        self.io.write_all(&self.buf).await?;
        self.io.flush().await?;
        Ok(())
    }

    /// Writes raw bytes (for tests and servers that must send odd frames on purpose).
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), StreamError> {
        self.io.write_all(bytes).await?;
        self.io.flush().await?;
        Ok(())
    }

    /// Shuts the write side down.
    pub async fn shutdown(&mut self) -> Result<(), StreamError> {
        self.io.shutdown().await?;
        Ok(())
    }

    /// Gives back the transport.
    pub fn into_inner(self) -> W {
        self.io
    }
}

/// Both directions of one transport.
#[derive(Debug)]
pub struct SisStream<T> {
    /// The reading half.
    pub reader: SisReader<ReadHalf<T>>,
    /// The writing half.
    pub writer: SisWriter<WriteHalf<T>>,
}

impl<T: AsyncRead + AsyncWrite> SisStream<T> {
    /// Splits `io` into a primitive reader and writer.
    pub fn new(io: T) -> Self {
        let (r, w) = tokio::io::split(io);
        SisStream {
            reader: SisReader::new(r),
            writer: SisWriter::new(w),
        }
    }

    /// See [`SisReader::recv`].
    pub async fn recv(&mut self) -> Result<Option<Primitive>, StreamError> {
        self.reader.recv().await
    }

    /// See [`SisWriter::send`].
    pub async fn send(&mut self, p: &Primitive) -> Result<(), StreamError> {
        self.writer.send(p).await
    }

    /// S_BIND_REQUEST for `sap`, as a client of `rank` whose default service is `service`,
    /// then the server's answer (S_BIND_ACCEPTED or S_BIND_REJECTED; `None` if it closed the
    /// connection first). The S_SUBNET_AVAILABILITY a server may send after accepting is left
    /// to the caller. For raw SIS use; [`crate::Client`] binds by itself.
    pub async fn bind(
        &mut self,
        sap: SapId,
        rank: Rank,
        service: ServiceType,
    ) -> Result<Option<Primitive>, StreamError> {
        self.send(&Primitive::BindRequest { sap, rank, service })
            .await?;
        self.recv().await
    }
}
