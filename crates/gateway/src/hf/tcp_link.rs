//! The link scheduler of one SMTP-over-TCP/IP peer (a JNOS node, or a gateway reached through
//! an IP-over-HF router): batches from the spool, delivered with [`send_batch`] (pipelined
//! ESMTP, or JNOS's XLZW with batching when the routing table asks for LZW), outcomes to the
//! spool, one transfer record per connection.
//!
//! Mail from such peers comes in through the LAN listener, which speaks XLZW too.
//!
//! A peer with a fallback is also probed while that can bring mail home: when mail fell back
//! from it while it answered nothing, and still waits, and no session has heard it answer since
//! (`probe_every` in `routes.toml`). A probe is a session without mail (the connection, the
//! greeting, EHLO and QUIT); an answer tells the peer fallback ([`crate::fallback`]), which
//! brings the mail back. Without it, that mail came back only with the next message for the
//! peer, and after a satellite outage in a quiet night it went by HF instead.

use std::sync::Arc;
use std::time::Duration;

use skywave_route::Compression as RouteCompression;
use skywave_smtp::{OutgoingMessage, RecipientStatus};
use skywave_spool::{DueMessage, Handoff, Target};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{Instrument, info, info_span, warn};

use super::transfer::{Direction, TransferRecord};
use super::{Admission, HfContext, Look, Take, sleep_opt};
use crate::outcome::Outcome;
use crate::tcp_bearer::{TcpBearerError, TcpBearerSettings, TransferEnd, send_batch};

/// The task of one TCP peer.
pub(super) struct TcpLink {
    pub(super) name: String,
    pub(super) address: String,
    pub(super) ctx: Arc<HfContext>,
    pub(super) shutdown: watch::Receiver<bool>,
    /// When this link last tried its peer, by a session or a probe; `None` before the first.
    pub(super) last_try: Option<Instant>,
}

/// How a probe of the peer went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probed {
    /// A whole session without mail: greeting, EHLO and QUIT answered.
    Answered,
    /// It answered but would not take mail now (a 421 or 554 greeting, say): not back yet, and
    /// not silent either.
    Refusing,
    /// No connection, or nothing read from it.
    Silent,
}

impl Probed {
    fn name(self) -> &'static str {
        match self {
            Probed::Answered => "answered",
            Probed::Refusing => "refusing",
            Probed::Silent => "silent",
        }
    }
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
            let (next_look, probe_at) = match self.session(&target).await {
                // After a session, look again at once.
                None => (Instant::now(), None),
                Some(look) => (
                    self.ctx.next_look(look, &target).await,
                    self.probe_at().await,
                ),
            };
            tokio::select! {
                () = &mut notified => {
                    tokio::time::sleep(self.ctx.config.batch_delay).await;
                }
                () = tokio::time::sleep_until(next_look) => {}
                () = sleep_opt(probe_at) => self.probe().await,
                _ = self.shutdown.changed() => {}
            }
        }
    }

    /// When to probe the peer, if at all (see the module's docs): `probe_every` after this
    /// link last tried it (now, when it has not yet), while mail that fell back from it when it
    /// did not answer still waits and could come back, nothing stops a session (a hold, EMCON, a
    /// closed radio window), and no session has heard it answer since that mail moved.
    async fn probe_at(&self) -> Option<Instant> {
        let every = {
            let table = self.ctx.routes.current();
            let peer = table.peer(&self.name)?;
            let every = peer.fallback.as_ref()?.probe_every;
            let open = matches!(
                self.ctx.admission(peer, self.ctx.clock.unix_now()),
                Admission::Due(_)
            );
            if every == 0 || !open {
                return None;
            }
            every
        };
        let spool = Arc::clone(&self.ctx.intake.spool);
        let name = self.name.clone();
        let moved = crate::blocking::spawn(move || spool.awaiting_return(&name))
            .await
            .ok()?
            .ok()??;
        // An answer since the move: the fallback's next look brings it back without a probe.
        if self.ctx.heard.get(&self.name).answered >= Some(moved) {
            return None;
        }
        let now = Instant::now();
        // An interval past what a clock can hold (`probe_every = 9223372036854775807`) never
        // comes round.
        match self.last_try {
            None => Some(now),
            Some(t) => t
                .checked_add(Duration::from_secs(every))
                .map(|at| at.max(now)),
        }
    }

    /// Probes the peer (see the module's docs) and tells the fallback what it heard.
    async fn probe(&mut self) {
        let result = send_batch(self.address.as_str(), &self.settings(None), Vec::new()).await;
        self.last_try = Some(Instant::now());
        let probed = match &result {
            Ok(t) if matches!(t.end, TransferEnd::Completed) => Probed::Answered,
            Ok(t) if t.plain_bytes_read > 0 => Probed::Refusing,
            _ => Probed::Silent,
        };
        crate::metrics::fallback_probe(probed.name());
        match probed {
            Probed::Answered => {
                info!(
                    "probe answered: what fell back from this peer while it was silent comes back"
                );
                // Its own deferred mail goes now too, not at its next retry.
                self.ctx
                    .intake
                    .spool
                    .link_up(&Target::Peer(self.name.clone()), self.ctx.clock.unix_now());
                self.ctx.heard_from(&self.name, true);
            }
            Probed::Refusing => {
                let end = result.map(|t| format!("{:?}", t.end)).unwrap_or_default();
                info!(%end, "probe: the peer answers but takes no mail yet");
            }
            Probed::Silent => {
                let why = match result {
                    Err(e) => e.to_string(),
                    Ok(t) => format!("{:?}", t.end),
                };
                info!(%why, "probe: no answer yet");
                self.ctx.heard_from(&self.name, false);
            }
        }
    }

    /// How to talk to the peer: LZW with `xlzw_bits`, and the gateway's reply timeout.
    fn settings(&self, xlzw_bits: Option<u8>) -> TcpBearerSettings {
        let mut settings = TcpBearerSettings::new(self.ctx.hostname.clone());
        settings.xlzw_bits = xlzw_bits;
        settings.reply_timeout = self.ctx.config.reply_timeout;
        settings
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
        let start = self.ctx.clock.unix_f64();
        info!(messages = loaded.len(), ?xlzw_bits, "session started");
        let result = send_batch(self.address.as_str(), &self.settings(xlzw_bits), messages).await;
        self.last_try = Some(Instant::now());
        match result {
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
