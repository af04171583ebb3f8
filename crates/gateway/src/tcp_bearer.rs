//! The SMTP-over-TCP/IP bearer, client side: delivers a batch of spooled messages to a peer's
//! SMTP server over a TCP connection (a LAN, or TCP/IP over an HF modem as JNOS ran it).
//!
//! It sits between the link scheduler (which picks the messages and acts on the outcomes) and
//! the sans-IO [`ClientSession`] of `skywave-smtp`, which does all of SMTP: this module only
//! connects, moves bytes and applies timeouts. Two ways to talk:
//! - plain ESMTP with RFC 2920 pipelining (when the server offers it; lockstep otherwise);
//! - with [`TcpBearerSettings::xlzw_bits`] set, JNOS style: `XLZW <bits> 0` after the greeting
//!   and, when the server takes it, LZW in both directions and JNOS batching (HELO, MAIL, RCPT
//!   and DATA in one burst per message, QUIT without waiting for the 221). A server that answers
//!   XLZW with 500 gets plain ESMTP.
//!
//! Failures before the session starts (no connection) are errors; anything after that ends the
//! transfer with the per-message outcomes known so far and a [`TransferEnd`] saying why, since
//! some messages may already be delivered and must not be sent again.

use std::fmt::Display;
use std::time::Duration;

use skywave_smtp::{
    ClientConfig, ClientError, ClientEvent, ClientMode, ClientSession, MessageOutcome,
    OutgoingMessage,
};
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::time::{Instant, timeout};

/// How to talk to the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpBearerSettings {
    /// Our name in EHLO/HELO.
    pub hostname: String,
    /// Offer JNOS LZW compression with this many bits (9..=16; JNOS clamps other values the
    /// same way). None: plain ESMTP with pipelining.
    pub xlzw_bits: Option<u8>,
    /// Longest wait for the TCP connection.
    pub connect_timeout: Duration,
    /// Longest wait for the next bytes from the server, or for a write to be taken. Sized for
    /// HF: a reply can take minutes over a slow, busy link.
    pub reply_timeout: Duration,
}

impl TcpBearerSettings {
    /// Plain ESMTP, 120 s to connect, 300 s per reply.
    pub fn new(hostname: impl Into<String>) -> Self {
        Self {
            hostname: hostname.into(),
            xlzw_bits: None,
            connect_timeout: Duration::from_secs(120),
            reply_timeout: Duration::from_secs(300),
        }
    }
}

/// How the session ended once it had started.
#[derive(Debug)]
pub enum TransferEnd {
    /// QUIT was sent after every message was answered.
    Completed,
    /// The SMTP session ended abnormally (refused greeting or HELO, 421, bad replies, the
    /// server closing early, an undecodable compressed stream).
    Session(ClientError),
    /// The server sent nothing (or took nothing) for the reply timeout.
    ReplyTimeout(Duration),
    /// Reading or writing the connection failed.
    Io(std::io::Error),
}

/// What one call of [`send_batch`] did.
#[derive(Debug)]
pub struct TcpTransfer {
    /// One outcome per message, in the order given; messages not answered have
    /// [`skywave_smtp::RecipientStatus::Unknown`] recipients.
    pub outcomes: Vec<MessageOutcome>,
    /// How the session ended.
    pub end: TransferEnd,
    /// The LZW bits in use when the server accepted XLZW; None for plain SMTP.
    pub compression: Option<u8>,
    /// The server offered DSN, so the messages' DSN parameters went with them and it reports
    /// as their senders asked.
    pub dsn: bool,
    /// Octets written to the socket.
    pub wire_bytes_written: u64,
    /// Octets read from the socket.
    pub wire_bytes_read: u64,
    /// Octets of commands and text before compression (equal to the wire octets without LZW).
    pub plain_bytes_written: u64,
    /// Octets of replies after decompression.
    pub plain_bytes_read: u64,
    /// When the connection attempt started.
    pub started: Instant,
    /// From the connection attempt to the end of the session.
    pub elapsed: Duration,
}

/// Why no session took place.
#[derive(Debug, Error)]
pub enum TcpBearerError {
    /// The message list or our host name cannot be sent (an address with spaces or brackets, a
    /// message without recipients).
    #[error("the batch cannot be sent: {0}")]
    Batch(#[from] ClientError),
    /// No connection within the connect timeout.
    #[error("connecting to {addr} timed out after {timeout:?}")]
    ConnectTimeout {
        /// The peer address as given.
        addr: String,
        /// The timeout that expired.
        timeout: Duration,
    },
    /// The connection could not be made (refused, unreachable, name not resolved).
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The peer address as given.
        addr: String,
        /// The socket error.
        source: std::io::Error,
    },
}

/// Size of one socket read.
const READ_CHUNK: usize = 16 * 1024;

/// Connects to `addr` and delivers `messages` in one SMTP session (see the module
/// documentation for the two ways). Returns the per-message outcomes and the byte counts; an
/// error only when no session could start.
pub async fn send_batch<A>(
    addr: A,
    settings: &TcpBearerSettings,
    messages: Vec<OutgoingMessage>,
) -> Result<TcpTransfer, TcpBearerError>
where
    A: ToSocketAddrs + Display,
{
    let mut config = ClientConfig::new(settings.hostname.clone(), ClientMode::Pipelining);
    config.xlzw = settings.xlzw_bits;
    let count = messages.len();
    let mut client = ClientSession::new(config, messages)?;
    let started = Instant::now();
    let stream = match timeout(settings.connect_timeout, TcpStream::connect(&addr)).await {
        Err(_) => {
            return Err(TcpBearerError::ConnectTimeout {
                addr: addr.to_string(),
                timeout: settings.connect_timeout,
            });
        }
        Ok(Err(source)) => {
            return Err(TcpBearerError::Connect {
                addr: addr.to_string(),
                source,
            });
        }
        Ok(Ok(stream)) => stream,
    };
    // Each burst is written whole; Nagle would only hold its tail back.
    let _ = stream.set_nodelay(true);
    let mut run = Run {
        stream,
        reply_timeout: settings.reply_timeout,
        outcomes: Vec::with_capacity(count),
        session_error: None,
        wire_written: 0,
        wire_read: 0,
    };
    let failure = run.drive(&mut client).await;
    run.collect(&mut client);
    // Best effort: the session is over whatever the peer does with the FIN.
    let _ = timeout(Duration::from_secs(5), run.stream.shutdown()).await;
    let end = match (failure, run.session_error.take()) {
        (Some(end), _) => end,
        (None, Some(error)) => TransferEnd::Session(error),
        (None, None) => TransferEnd::Completed,
    };
    let mut outcomes = run.outcomes;
    outcomes.sort_by_key(|m| m.index);
    tracing::debug!(
        messages = count,
        wire_out = run.wire_written,
        wire_in = run.wire_read,
        plain_out = client.plain_bytes_written(),
        compression = ?client.compression(),
        "SMTP TCP bearer session over"
    );
    Ok(TcpTransfer {
        outcomes,
        end,
        compression: client.compression(),
        dsn: client.server_extensions().is_some_and(|e| e.dsn),
        wire_bytes_written: run.wire_written,
        wire_bytes_read: run.wire_read,
        plain_bytes_written: client.plain_bytes_written(),
        plain_bytes_read: client.plain_bytes_read(),
        started,
        elapsed: started.elapsed(),
    })
}

struct Run {
    stream: TcpStream,
    reply_timeout: Duration,
    outcomes: Vec<MessageOutcome>,
    session_error: Option<ClientError>,
    wire_written: u64,
    wire_read: u64,
}

impl Run {
    fn collect(&mut self, client: &mut ClientSession) {
        while let Some(event) = client.poll_event() {
            match event {
                ClientEvent::Message(outcome) => self.outcomes.push(outcome),
                ClientEvent::Finished { error } => self.session_error = error,
            }
        }
    }

    /// Moves bytes until the client session is finished. Returns why it stopped when that was
    /// the connection's fault rather than the session's.
    async fn drive(&mut self, client: &mut ClientSession) -> Option<TransferEnd> {
        let mut buf = vec![0u8; READ_CHUNK];
        // Bounded: every pass writes the session's output or reads bytes, and the session
        // finishes at the latest when the connection ends or a timeout expires.
        loop {
            self.collect(client);
            if client.has_output() {
                let out = client.take_output();
                match timeout(self.reply_timeout, self.stream.write_all(&out)).await {
                    Ok(Ok(())) => self.wire_written += out.len() as u64,
                    Ok(Err(e)) => {
                        client.connection_closed();
                        return Some(TransferEnd::Io(e));
                    }
                    Err(_) => {
                        client.connection_closed();
                        return Some(TransferEnd::ReplyTimeout(self.reply_timeout));
                    }
                }
            }
            if client.is_finished() {
                return None;
            }
            match timeout(self.reply_timeout, self.stream.read(&mut buf)).await {
                Ok(Ok(0)) => client.connection_closed(),
                Ok(Ok(n)) => {
                    self.wire_read += n as u64;
                    client.feed(&buf[..n]);
                }
                Ok(Err(e)) => {
                    client.connection_closed();
                    return Some(TransferEnd::Io(e));
                }
                Err(_) => {
                    client.connection_closed();
                    return Some(TransferEnd::ReplyTimeout(self.reply_timeout));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use skywave_smtp::{
        EnhancedCode, Envelope, Event, Policy, RecipientStatus, Reply, ServerConfig, ServerSession,
        SessionInfo, Verdict,
    };
    use tokio::net::TcpListener;

    /// Refuses recipients containing "unknown".
    struct Recording;

    impl Policy for Recording {
        fn rcpt_to(&mut self, _: &SessionInfo, _: &Envelope, rcpt: &str) -> Verdict {
            if rcpt.contains("unknown") {
                Verdict::Reject(Reply::new(550, EnhancedCode::new(5, 1, 1), "No such user"))
            } else {
                Verdict::Accept
            }
        }
    }

    /// What the test server saw: the messages, and the wire octets read.
    struct Served {
        messages: Vec<(Envelope, Vec<u8>)>,
        wire_read: u64,
        compression: Option<u8>,
    }

    /// A one-connection SMTP server on 127.0.0.1 running our server session.
    async fn serve_one(config: ServerConfig) -> (String, tokio::task::JoinHandle<Served>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut session = ServerSession::new(config, Recording, std::time::Instant::now());
            let mut served = Served {
                messages: Vec::new(),
                wire_read: 0,
                compression: None,
            };
            let mut buf = vec![0u8; 4096];
            for _ in 0..100_000 {
                while let Some(event) = session.poll_event() {
                    if let Event::Message { envelope, body } = event {
                        served.messages.push((envelope, body));
                        let id = format!("Q{}", served.messages.len());
                        session.message_accepted(&id).unwrap();
                    }
                }
                let out = session.take_output();
                // A JNOS-style client closes right after QUIT, so the 221 may find no reader.
                if !out.is_empty() && stream.write_all(&out).await.is_err() {
                    break;
                }
                if session.is_closed() {
                    break;
                }
                let n = stream.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                served.wire_read += n as u64;
                session.feed(std::time::Instant::now(), &buf[..n]);
            }
            served.compression = session.compression();
            served
        });
        (addr, task)
    }

    fn batch() -> Vec<OutgoingMessage> {
        let mut long = Vec::new();
        for i in 0..2000 {
            long.extend_from_slice(
                format!("Line {i} of a long report from the ship.\r\n").as_bytes(),
            );
        }
        vec![
            OutgoingMessage {
                reverse_path: "ops@ship.example".into(),
                recipients: vec!["a@shore.example".into(), "unknown@shore.example".into()],
                body: b"Subject: one\r\n\r\n.hidden dot\r\n".to_vec(),
                eight_bit: false,
                mt_priority: Some(2),
                dsn: Default::default(),
                rcpt_dsn: Vec::new(),
            },
            OutgoingMessage {
                reverse_path: String::new(),
                recipients: vec!["b@shore.example".into()],
                body: long,
                eight_bit: true,
                mt_priority: None,
                dsn: Default::default(),
                rcpt_dsn: Vec::new(),
            },
            OutgoingMessage {
                reverse_path: "ops@ship.example".into(),
                recipients: vec!["unknown2@shore.example".into()],
                body: b"never delivered\r\n".to_vec(),
                eight_bit: false,
                mt_priority: None,
                dsn: Default::default(),
                rcpt_dsn: Vec::new(),
            },
        ]
    }

    fn check_delivery(transfer: &TcpTransfer, served: &Served, sent: &[OutgoingMessage]) {
        assert!(
            matches!(transfer.end, TransferEnd::Completed),
            "{:?}",
            transfer.end
        );
        assert_eq!(served.messages.len(), 2);
        assert_eq!(served.messages[0].1, sent[0].body);
        assert_eq!(served.messages[1].1, sent[1].body);
        assert_eq!(served.messages[0].0.recipients, vec!["a@shore.example"]);
        let statuses: Vec<Vec<bool>> = transfer
            .outcomes
            .iter()
            .map(|o| {
                o.recipients
                    .iter()
                    .map(|r| matches!(r.status, RecipientStatus::Delivered(_)))
                    .collect()
            })
            .collect();
        assert_eq!(statuses, vec![vec![true, false], vec![true], vec![false]]);
        assert_eq!(transfer.wire_bytes_written, served.wire_read);
        assert!(transfer.wire_bytes_read > 0);
    }

    #[tokio::test]
    async fn plain_pipelined_batch() {
        let (addr, server) = serve_one(ServerConfig::new("mx.test")).await;
        let sent = batch();
        let transfer = send_batch(addr.as_str(), &TcpBearerSettings::new("gw"), sent.clone())
            .await
            .unwrap();
        let served = server.await.unwrap();
        check_delivery(&transfer, &served, &sent);
        assert_eq!(transfer.compression, None);
        assert_eq!(served.compression, None);
        assert_eq!(transfer.plain_bytes_written, transfer.wire_bytes_written);
        assert_eq!(transfer.plain_bytes_read, transfer.wire_bytes_read);
        // Pipelining: the server saw EHLO, so the priority went along.
        assert_eq!(served.messages[0].0.mt_priority, Some(2));
    }

    #[tokio::test]
    async fn jnos_batch_with_xlzw() {
        for bits in [9u8, 12, 16] {
            let (addr, server) = serve_one(ServerConfig::new("mx.test")).await;
            let sent = batch();
            let mut settings = TcpBearerSettings::new("gw");
            settings.xlzw_bits = Some(bits);
            let transfer = send_batch(addr.as_str(), &settings, sent.clone())
                .await
                .unwrap();
            let served = server.await.unwrap();
            check_delivery(&transfer, &served, &sent);
            assert_eq!(transfer.compression, Some(bits));
            assert_eq!(served.compression, Some(bits));
            assert_eq!(served.messages[0].0.helo, "gw");
            // The long, repetitive report compresses well.
            assert!(
                transfer.wire_bytes_written * 2 < transfer.plain_bytes_written,
                "{} vs {}",
                transfer.wire_bytes_written,
                transfer.plain_bytes_written
            );
        }
    }

    #[tokio::test]
    async fn xlzw_refused_falls_back_to_plain() {
        let mut config = ServerConfig::new("mx.test");
        config.xlzw = false;
        let (addr, server) = serve_one(config).await;
        let sent = batch();
        let mut settings = TcpBearerSettings::new("gw");
        settings.xlzw_bits = Some(16);
        let transfer = send_batch(addr.as_str(), &settings, sent.clone())
            .await
            .unwrap();
        let served = server.await.unwrap();
        check_delivery(&transfer, &served, &sent);
        assert_eq!(transfer.compression, None);
    }

    #[tokio::test]
    async fn silent_server_ends_in_a_reply_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let holder = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            // Keep the connection open without a word until the client gives up.
            let mut stream = stream;
            let mut buf = [0u8; 64];
            let _ = stream.read(&mut buf).await;
        });
        let mut settings = TcpBearerSettings::new("gw");
        settings.reply_timeout = Duration::from_millis(100);
        let transfer = send_batch(addr, &settings, batch()).await.unwrap();
        assert!(
            matches!(transfer.end, TransferEnd::ReplyTimeout(_)),
            "{:?}",
            transfer.end
        );
        assert_eq!(transfer.outcomes.len(), 3);
        assert!(transfer.outcomes.iter().all(|o| {
            o.recipients
                .iter()
                .all(|r| r.status == RecipientStatus::Unknown)
        }));
        holder.await.unwrap();
    }

    #[tokio::test]
    async fn server_closing_early_is_a_session_end() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let closer = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            stream
                .write_all(b"421 4.3.2 mx.test shutting down\r\n")
                .await
                .unwrap();
        });
        let transfer = send_batch(addr, &TcpBearerSettings::new("gw"), batch())
            .await
            .unwrap();
        closer.await.unwrap();
        assert!(
            matches!(
                transfer.end,
                TransferEnd::Session(ClientError::Refused(_) | ClientError::ServiceClosing(_))
            ),
            "{:?}",
            transfer.end
        );
    }

    /// A session without mail is the peer fallback's probe: greeting, EHLO and QUIT, a whole
    /// session when the server takes mail, a session error with its reply read when it does
    /// not.
    #[tokio::test]
    async fn a_session_without_mail_is_a_probe() {
        let (addr, server) = serve_one(ServerConfig::new("mx.test")).await;
        let probe = send_batch(addr.as_str(), &TcpBearerSettings::new("gw"), Vec::new())
            .await
            .unwrap();
        let served = server.await.unwrap();
        assert!(
            matches!(probe.end, TransferEnd::Completed),
            "{:?}",
            probe.end
        );
        assert!(probe.outcomes.is_empty() && served.messages.is_empty());
        assert_eq!(probe.wire_bytes_written, served.wire_read);
        assert_eq!(
            probe.wire_bytes_written,
            b"EHLO gw\r\nQUIT\r\n".len() as u64
        );
        assert!(probe.plain_bytes_read > 0);

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let refusing = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let _ = stream.write_all(b"421 4.3.2 mx.test busy\r\n").await;
        });
        let probe = send_batch(addr, &TcpBearerSettings::new("gw"), Vec::new())
            .await
            .unwrap();
        refusing.await.unwrap();
        assert!(
            matches!(probe.end, TransferEnd::Session(_)),
            "{:?}",
            probe.end
        );
        assert!(probe.plain_bytes_read > 0);
    }

    #[tokio::test]
    async fn connection_refused_and_bad_batches_are_errors() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let err = send_batch(addr, &TcpBearerSettings::new("gw"), batch())
            .await
            .unwrap_err();
        assert!(matches!(err, TcpBearerError::Connect { .. }), "{err}");

        let mut bad = batch();
        bad[0].recipients[0] = "a b@c".into();
        let err = send_batch(addr, &TcpBearerSettings::new("gw"), bad)
            .await
            .unwrap_err();
        assert!(matches!(err, TcpBearerError::Batch(_)), "{err}");
    }
}
