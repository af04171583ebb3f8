//! The link scheduler of one SMTP-over-TCP/IP peer (a JNOS node, or a gateway reached through
//! an IP-over-HF router): batches from the spool, delivered with [`send_batch`] (pipelined
//! ESMTP, or JNOS's XLZW with batching when the routing table asks for LZW), outcomes to the
//! spool, one transfer record per connection.
//!
//! Mail from such peers comes in through the LAN listener, which speaks XLZW too.

use std::sync::Arc;

use skywave_route::Compression as RouteCompression;
use skywave_smtp::{OutgoingMessage, RecipientStatus};
use skywave_spool::{DueMessage, Handoff, Target};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{Instrument, info, info_span, warn};

use super::transfer::{Direction, TransferRecord};
use super::{HfContext, Look, Take};
use crate::outcome::Outcome;
use crate::tcp_bearer::{TcpBearerError, TcpBearerSettings, TransferEnd, send_batch};

/// The task of one TCP peer.
pub(super) struct TcpLink {
    pub(super) name: String,
    pub(super) address: String,
    pub(super) ctx: Arc<HfContext>,
    pub(super) shutdown: watch::Receiver<bool>,
}

impl TcpLink {
    pub(super) async fn run(self) {
        let span = info_span!("smtp-tcp", peer = %self.name, address = %self.address);
        self.run_inner().instrument(span).await;
    }

    async fn run_inner(mut self) {
        let target = Target::Peer(self.name.clone());
        loop {
            if *self.shutdown.borrow() {
                break;
            }
            let wake = Arc::clone(&self.ctx.wake);
            let notified = wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next_look = match self.session(&target).await {
                // After a session, look again at once.
                None => Instant::now(),
                Some(look) => self.ctx.next_look(look, &target).await,
            };
            tokio::select! {
                () = &mut notified => {
                    tokio::time::sleep(self.ctx.config.batch_delay).await;
                }
                () = tokio::time::sleep_until(next_look) => {}
                _ = self.shutdown.changed() => {}
            }
        }
    }

    /// Runs one session if mail may go; `None` when one ran, else when to look again.
    async fn session(&mut self, target: &Target) -> Option<Look> {
        let table = self.ctx.routes.current();
        let Some(peer) = table.peer(&self.name) else {
            return Some(Look::Periodic);
        };
        let xlzw_bits = match peer.compression {
            RouteCompression::Lzw { bits } => Some(bits),
            _ => None,
        };
        let loaded: Vec<(DueMessage, Vec<u8>)> =
            match self.ctx.take_for(peer, target, Vec::new()).await {
                Take::Mail(l) => l,
                Take::Later(look) => return Some(look),
            };
        drop(table);
        let messages = loaded
            .iter()
            .map(|(d, body)| OutgoingMessage {
                reverse_path: d.sender.clone(),
                recipients: d.recipients.clone(),
                eight_bit: body.iter().any(|&b| b >= 0x80),
                body: body.clone(),
                mt_priority: Some(d.priority.value()),
                dsn: d.dsn.clone(),
                rcpt_dsn: d.rcpt_dsn.clone(),
            })
            .collect();
        let mut settings = TcpBearerSettings::new(self.ctx.hostname.clone());
        settings.xlzw_bits = xlzw_bits;
        settings.reply_timeout = self.ctx.config.reply_timeout;
        let start = self.ctx.clock.unix_f64();
        info!(messages = loaded.len(), ?xlzw_bits, "session started");
        match send_batch(self.address.as_str(), &settings, messages).await {
            Ok(t) => {
                // Anything read from the peer is an answer: its greeting at least.
                self.ctx.heard_from(&self.name, t.plain_bytes_read > 0);
                let mut accepted = 0u64;
                let how = Handoff::onward(t.dsn);
                for ((d, _), o) in loaded.iter().zip(&t.outcomes) {
                    let mut groups: Vec<(Outcome, Vec<String>)> = Vec::new();
                    for r in &o.recipients {
                        let out = match &r.status {
                            RecipientStatus::Delivered(reply)
                            | RecipientStatus::Deferred(reply)
                            | RecipientStatus::Failed(reply) => {
                                Outcome::from_reply(&self.name, reply, how)
                            }
                            RecipientStatus::Unknown => Outcome::Deferred(format!(
                                "no answer from {} ({:?})",
                                self.name, t.end
                            )),
                        };
                        match groups.iter_mut().find(|(g, _)| *g == out) {
                            Some((_, v)) => v.push(r.address.clone()),
                            None => groups.push((out, vec![r.address.clone()])),
                        }
                    }
                    if groups
                        .iter()
                        .any(|(g, _)| matches!(g, Outcome::Delivered(_)))
                    {
                        accepted += 1;
                    }
                    for (out, rcpts) in groups {
                        self.ctx
                            .recorder
                            .record(&d.id, &d.sender, d.size, rcpts, out)
                            .await;
                    }
                }
                self.ctx.transfers.record(TransferRecord {
                    peer: self.name.clone(),
                    protocol: match t.compression {
                        Some(bits) => format!("smtp+xlzw{bits}"),
                        None => "smtp".into(),
                    },
                    direction: Direction::Out,
                    start,
                    end: self.ctx.clock.unix_f64(),
                    messages: loaded.len() as u64,
                    accepted,
                    plain_bytes: t.plain_bytes_written,
                    wire_bytes: t.wire_bytes_written,
                    reply_plain_bytes: t.plain_bytes_read,
                    reply_wire_bytes: t.wire_bytes_read,
                    updus: 0,
                    transmissions: 0,
                    retransmissions: None,
                    result: match &t.end {
                        TransferEnd::Completed => "completed".into(),
                        other => format!("{other:?}"),
                    },
                });
            }
            Err(e) => {
                if matches!(
                    e,
                    TcpBearerError::Connect { .. } | TcpBearerError::ConnectTimeout { .. }
                ) {
                    self.ctx.heard_from(&self.name, false);
                }
                warn!(error = %e, "no session; the mail stays queued");
                for (d, _) in &loaded {
                    self.ctx.recorder.defer_all(d, e.to_string()).await;
                }
            }
        }
        None
    }
}
