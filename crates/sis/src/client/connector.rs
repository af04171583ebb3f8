//! How the client obtains a transport, again after every loss: the [`Connector`] trait, its
//! blanket implementation for closures, and [`TcpConnector`].

use std::future::Future;
use std::io;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// Something that can open a new byte stream to a SIS server.
pub trait Connector: Send + 'static {
    /// The byte stream.
    type Transport: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// Opens a new connection. The client applies its own connect timeout around this.
    fn connect(&mut self) -> impl Future<Output = io::Result<Self::Transport>> + Send;
}

impl<F, Fut, T> Connector for F
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = io::Result<T>> + Send,
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Transport = T;

    fn connect(&mut self) -> impl Future<Output = io::Result<T>> + Send {
        self()
    }
}

/// Connects over TCP to `host:port` (resolved again on every attempt), with Nagle off so
/// that small primitives such as keep-alive answers leave at once.
#[derive(Debug, Clone)]
pub struct TcpConnector {
    addr: String,
}

impl TcpConnector {
    /// A connector to `addr` (`host:port`).
    pub fn new(addr: impl Into<String>) -> Self {
        TcpConnector { addr: addr.into() }
    }

    /// The address it connects to.
    pub fn addr(&self) -> &str {
        &self.addr
    }
}

impl Connector for TcpConnector {
    type Transport = TcpStream;

    fn connect(&mut self) -> impl Future<Output = io::Result<TcpStream>> + Send {
        let addr = self.addr.clone();
        async move {
            let stream = TcpStream::connect(&addr).await?;
            stream.set_nodelay(true)?;
            Ok(stream)
        }
    }
}
