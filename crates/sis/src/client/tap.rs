//! Recording the client's traffic as a pcap: a transport wrapper that taps reads and writes,
//! and a connector wrapper that taps every connection it opens (each becomes its own TCP
//! conversation in the capture, server side on port 5066).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::connector::Connector;
use crate::pcap::{Direction, PcapWriter, SIS_PORT, TcpFlow};

const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 66, 0, 1);
const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 66, 0, 2);

struct CaptureState {
    writer: PcapWriter<Box<dyn Write + Send>>,
    epoch: Duration,
    start: tokio::time::Instant,
    next_port: u16,
    error: Option<io::Error>,
}

impl CaptureState {
    /// Wall-clock start plus elapsed tokio time, so paused-time tests give sensible stamps.
    fn now(&self) -> Duration {
        self.epoch + self.start.elapsed()
    }

    fn record(&mut self, result: io::Result<()>) {
        if let Err(e) = result {
            self.error.get_or_insert(e);
        }
    }
}

/// A pcap capture shared by every connection tapped into it. Write errors are kept and
/// reported by [`PcapCapture::flush`] rather than disturbing the traffic.
#[derive(Clone)]
pub struct PcapCapture {
    state: Arc<Mutex<CaptureState>>,
}

impl std::fmt::Debug for PcapCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapCapture").finish_non_exhaustive()
    }
}

impl PcapCapture {
    /// A capture writing to `out` (a buffer, or a buffered file: writes happen inline).
    pub fn new(out: impl Write + Send + 'static) -> io::Result<Self> {
        let writer = PcapWriter::new(Box::new(out) as Box<dyn Write + Send>)?;
        let epoch = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let state = CaptureState {
            writer,
            epoch,
            start: tokio::time::Instant::now(),
            next_port: 40_000,
            error: None,
        };
        Ok(PcapCapture {
            state: Arc::new(Mutex::new(state)),
        })
    }

    /// A capture written to a new file at `path`.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        Self::new(BufWriter::new(File::create(path)?))
    }

    fn lock(&self) -> MutexGuard<'_, CaptureState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wraps one transport; its traffic becomes a new TCP conversation in the capture.
    pub fn tap<T>(&self, inner: T) -> Tapped<T> {
        self.tap_as(inner, false)
    }

    /// Wraps the server's end of a connection (a SIS server capturing its clients): what it
    /// reads is recorded as client to server, what it writes as server to client.
    pub fn tap_server<T>(&self, inner: T) -> Tapped<T> {
        self.tap_as(inner, true)
    }

    fn tap_as<T>(&self, inner: T, server_side: bool) -> Tapped<T> {
        let mut s = self.lock();
        let port = s.next_port;
        s.next_port = s.next_port.wrapping_add(1).max(40_000);
        let mut flow = TcpFlow::new(
            SocketAddrV4::new(CLIENT_IP, port),
            SocketAddrV4::new(SERVER_IP, SIS_PORT),
        );
        let ts = s.now();
        let r = flow.handshake(&mut s.writer, ts);
        s.record(r);
        Tapped {
            inner,
            capture: self.clone(),
            flow,
            closed: false,
            server_side,
        }
    }

    /// Wraps a connector so that every connection it opens is tapped.
    pub fn connector<C: Connector>(&self, inner: C) -> TappedConnector<C> {
        TappedConnector {
            inner,
            capture: self.clone(),
        }
    }

    /// Flushes the output; reports the first write error met, if any.
    pub fn flush(&self) -> io::Result<()> {
        let mut s = self.lock();
        if let Some(e) = s.error.take() {
            return Err(e);
        }
        s.writer.flush()
    }
}

/// A transport whose reads (server to client) and writes (client to server) are recorded.
pub struct Tapped<T> {
    inner: T,
    capture: PcapCapture,
    flow: TcpFlow,
    closed: bool,
    /// The tapped end is the server's: reads come from the client.
    server_side: bool,
}

impl<T> std::fmt::Debug for Tapped<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tapped")
            .field("flow", &self.flow)
            .finish_non_exhaustive()
    }
}

impl<T> Tapped<T> {
    /// The direction of what this end reads.
    fn incoming(&self) -> Direction {
        if self.server_side {
            Direction::ClientToServer
        } else {
            Direction::ServerToClient
        }
    }

    /// The direction of what this end writes.
    fn outgoing(&self) -> Direction {
        if self.server_side {
            Direction::ServerToClient
        } else {
            Direction::ClientToServer
        }
    }

    fn record(&mut self, dir: Direction, bytes: &[u8]) {
        let mut s = self.capture.lock();
        let ts = s.now();
        let r = self.flow.data(&mut s.writer, ts, dir, bytes);
        s.record(r);
    }

    fn record_fin(&mut self, dir: Direction) {
        if self.closed {
            return;
        }
        self.closed = true;
        let mut s = self.capture.lock();
        let ts = s.now();
        let r = self.flow.fin(&mut s.writer, ts, dir);
        s.record(r);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Tapped<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &r {
            let filled = &buf.filled()[before..];
            let dir = self.incoming();
            if filled.is_empty() {
                self.record_fin(dir);
            } else {
                let data = filled.to_vec();
                self.record(dir, &data);
            }
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tapped<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            let n = *n;
            let dir = self.outgoing();
            self.record(dir, &buf[..n]);
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        if let Poll::Ready(Ok(())) = &r {
            let dir = self.outgoing();
            self.record_fin(dir);
        }
        r
    }
}

/// A connector whose connections are tapped into a [`PcapCapture`].
#[derive(Debug)]
pub struct TappedConnector<C> {
    inner: C,
    capture: PcapCapture,
}

impl<C: Connector> Connector for TappedConnector<C> {
    type Transport = Tapped<C::Transport>;

    fn connect(&mut self) -> impl std::future::Future<Output = io::Result<Self::Transport>> + Send {
        let capture = self.capture.clone();
        let fut = self.inner.connect();
        async move { Ok(capture.tap(fut.await?)) }
    }
}
