//! Recording what became of a delivery attempt, whichever way it went (LAN delivery, an HMTP
//! or CFTP session, SMTP over TCP): one place turns "delivered / try again / refused" into
//! spool state, queues the bounce when a message is finished with failures, and expires old
//! mail. Keeping it in one place keeps the rules (which reply is permanent, where a bounce is
//! routed, what wakes whom) the same for every bearer.

use std::sync::Arc;

use skywave_route::{Destination, RoutingTable, SharedRoutes};
use skywave_spool::dsn::{DsnRecipient, DsnRequest, build_dsn};
use skywave_spool::{
    Disposition, DueMessage, Handoff, NewMessage, Priority, QueueId, Spool, Target,
};
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use crate::clock::Clock;
use crate::metrics as m;

/// Where the DSN to `sender` goes by `table`: where mail to the sender goes, or the LAN when
/// the table has no route for it (or the sender is null).
pub fn dsn_target(table: &RoutingTable, sender: &str) -> Target {
    if sender.is_empty() {
        return Target::Lan;
    }
    match table.lookup(sender) {
        Ok(route) => match route.destination {
            Destination::Lan => Target::Lan,
            Destination::Peer(p) => Target::Peer(p.name.clone()),
            Destination::Group(g) => Target::Peer(g.name.clone()),
        },
        Err(e) => {
            warn!(%sender, error = %e, "sender not routable; the bounce goes to the LAN");
            Target::Lan
        }
    }
}

/// What [`give_up`] did to one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenUp {
    /// Recipients failed now.
    pub failed: usize,
    /// Recipients in flight (their outcome is awaited), left alone.
    pub in_flight: usize,
    /// Nothing of the message waits any more: it has left the queue (its DSN queued).
    pub finished: bool,
    /// The DSN queued to the sender, when the message is finished (`None` for a null
    /// sender); while other recipients still wait, their DSN will report these too.
    pub dsn: Option<QueueId>,
}

/// An operator gives up on a queued or held message (`skywave queue bounce`): every recipient
/// still waiting (for `only`, when given) fails with `5.0.0` and `reason`, and once nothing
/// else waits the sender gets the DSN, routed by `table`, as for any other failure. Recipients
/// in flight are left to their outcome. A dead letter is refused: `skywave queue release`
/// brings it back first.
pub fn give_up(
    spool: &Spool,
    table: &RoutingTable,
    id: &QueueId,
    only: Option<&Target>,
    reason: &str,
    now: u64,
) -> Result<GivenUp, skywave_spool::Error> {
    let (failed, in_flight, disposition) = spool.fail_waiting(id, only, "5.0.0", reason, now)?;
    let finished = matches!(disposition, Disposition::NeedsBounce | Disposition::Done);
    let dsn = if disposition == Disposition::NeedsBounce {
        let (_, file) = spool.load(id)?;
        spool
            .bounce(id, dsn_target(table, &file.envelope.sender), now)?
            .map(|r| r.dsn)
    } else {
        None
    };
    Ok(GivenUp {
        failed,
        in_flight,
        finished,
        dsn,
    })
}

/// The outcome of one attempt for a group of recipients of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The next hop took responsibility; how says whether a success report asked for is
    /// this gateway's to send.
    Delivered(Handoff),
    /// Temporary failure: retry after the backoff (or when the link comes back).
    Deferred(String),
    /// Temporary failure whose cause this gateway has removed (the peer refused a parameter
    /// it turned out not to offer, and the next attempt goes without it): due again at once,
    /// the attempt counted ([`skywave_spool::Spool::deferred_due_now`]).
    Again(String),
    /// Permanent failure: the recipient fails and the sender gets a DSN.
    Failed {
        /// RFC 3463 status, e.g. `5.1.1`.
        status: String,
        /// The remote reply or our own text.
        diagnostic: String,
    },
}

impl Outcome {
    /// What a reply from `peer` after the message text means: 2xx delivered (`how`: whether
    /// the peer was given the DSN parameters), 4xx try again, anything else a permanent
    /// failure (with the reply's enhanced status, or 5.0.0).
    pub fn from_reply(peer: &str, reply: &skywave_smtp::Reply, how: Handoff) -> Outcome {
        let text = format!("{peer} said: {} {}", reply.code, reply.text());
        match reply.code {
            200..=299 => Outcome::Delivered(how),
            400..=499 => Outcome::Deferred(text),
            _ => Outcome::Failed {
                status: reply
                    .enhanced
                    .filter(|e| e.class == 5)
                    .map_or_else(|| "5.0.0".to_owned(), |e| e.to_string()),
                diagnostic: text,
            },
        }
    }
}

/// Records outcomes in the spool and queues bounces.
#[derive(Debug)]
pub struct Recorder {
    /// The spool.
    pub spool: Arc<Spool>,
    /// The routing table, to route bounces back to senders.
    pub routes: Arc<SharedRoutes>,
    /// Woken when mail for the LAN has been queued (a bounce to a LAN sender).
    pub lan_wake: Arc<Notify>,
    /// Woken when mail for an HF peer has been queued (a bounce to a sender over HF).
    pub hf_wake: Arc<Notify>,
    /// The gateway's clock.
    pub clock: Clock,
}

impl Recorder {
    /// Records `outcome` for `rcpts` of message `id` (`size` bytes, from `sender`); queues the
    /// bounce if the message is now finished with failures. False when the spool could not
    /// record it (logged here; the recipients stay as they were).
    pub async fn record(
        &self,
        id: &QueueId,
        sender: &str,
        size: u64,
        rcpts: Vec<String>,
        outcome: Outcome,
    ) -> bool {
        let spool = Arc::clone(&self.spool);
        let qid = id.clone();
        let now = self.clock.unix_now();
        let n = rcpts.len() as u64;
        let result = crate::blocking::spawn(move || match &outcome {
            Outcome::Delivered(how) => spool
                .delivered(&qid, &rcpts, *how, now)
                .map(|d| (d, outcome)),
            Outcome::Deferred(e) => spool.deferred(&qid, &rcpts, e, now).map(|d| (d, outcome)),
            Outcome::Again(e) => spool
                .deferred_due_now(&qid, &rcpts, e, now)
                .map(|d| (d, outcome)),
            Outcome::Failed { status, diagnostic } => spool
                .failed(&qid, &rcpts, status, diagnostic, now)
                .map(|d| (d, outcome)),
        })
        .await;
        match result {
            Ok(Ok((disposition, outcome))) => {
                match &outcome {
                    Outcome::Delivered(_) => {
                        info!(queue_id = %id, recipients = n, "delivered");
                        m::delivered(n, size);
                    }
                    Outcome::Deferred(e) => warn!(queue_id = %id, error = %e, "delivery deferred"),
                    Outcome::Again(e) => {
                        warn!(queue_id = %id, error = %e, "delivery deferred; again at once")
                    }
                    Outcome::Failed { diagnostic, .. } => {
                        warn!(queue_id = %id, error = %diagnostic, "delivery failed permanently");
                    }
                }
                if let Disposition::NeedsBounce = disposition {
                    self.bounce(id, sender).await;
                } else if let Disposition::Dead(reason) = disposition {
                    warn!(queue_id = %id, %reason, "message is now a dead letter");
                }
                true
            }
            other => {
                warn!(queue_id = %id, ?other, "cannot record the delivery outcome");
                false
            }
        }
    }

    /// Defers every recipient of a message taken from the spool that could not be sent at all
    /// (false: the spool could not record it).
    pub async fn defer_all(&self, d: &DueMessage, why: String) -> bool {
        self.record(
            &d.id,
            &d.sender,
            d.size,
            d.recipients.clone(),
            Outcome::Deferred(why),
        )
        .await
    }

    /// Where a DSN to `sender` goes: routed by the table, the LAN if the sender's domain is not
    /// routed.
    fn dsn_target(&self, sender: &str) -> Target {
        dsn_target(&self.routes.current(), sender)
    }

    /// A DSN was queued towards `target`: counted as a bounce when it reports a failure, else
    /// as a success report.
    fn bounce_queued(&self, target: &Target, failure: bool) {
        if failure {
            m::bounced();
        } else {
            m::success_reported();
        }
        self.wake(target);
    }

    /// Wakes whoever carries mail to `target`.
    fn wake(&self, target: &Target) {
        if *target == Target::Lan {
            self.lan_wake.notify_one();
        } else {
            self.hf_wake.notify_waiters();
        }
    }

    /// Queues the DSN of `id` towards its sender, routed by the table (the LAN if the sender's
    /// domain is not routed).
    pub async fn bounce(&self, id: &QueueId, sender: &str) {
        let target = self.dsn_target(sender);
        let spool = Arc::clone(&self.spool);
        let qid = id.clone();
        let dsn_target = target.clone();
        let now = self.clock.unix_now();
        let queued = crate::blocking::spawn(move || spool.bounce(&qid, dsn_target, now)).await;
        match queued {
            Ok(Ok(Some(r))) => {
                info!(queue_id = %id, dsn = %r.dsn, %target, failure = r.failure, "DSN queued");
                self.bounce_queued(&target, r.failure);
            }
            Ok(Ok(None)) => debug!("no bounce for a null sender"),
            other => warn!(?other, "cannot queue the bounce"),
        }
    }

    /// Queues, durably, the DSN of a message this gateway has taken responsibility for but
    /// cannot deliver to `refused`, without the message itself ever entering the spool: a
    /// protocol with no way to refuse (CFTP) must bounce instead. `reference` names the
    /// message in the DSN. `Ok(None)` when no DSN is due (null sender); `Err` when it could
    /// not be written, and the caller must not acknowledge the message.
    pub async fn bounce_refused(
        &self,
        sender: &str,
        reference: &str,
        message: &[u8],
        refused: Vec<DsnRecipient>,
    ) -> Result<Option<QueueId>, String> {
        if sender.is_empty() || refused.is_empty() {
            return Ok(None);
        }
        let target = self.dsn_target(sender);
        let now = self.clock.unix_now();
        let dsn = build_dsn(&DsnRequest {
            reporting_mta: &self.spool.config().reporting_mta,
            queue_id: reference,
            original_sender: sender,
            arrival: now,
            now,
            recipients: &refused,
            original_message: message,
            delayed: None,
            envid: None,
            returned: skywave_spool::dsn::Returned::Headers,
        });
        let spool = Arc::clone(&self.spool);
        let new = (sender.to_owned(), target.clone());
        let queued = crate::blocking::spawn(move || {
            spool.enqueue(
                &NewMessage {
                    sender: String::new(),
                    recipients: vec![new],
                    priority: Priority::default(),
                    message: &dsn,
                    dsn: Default::default(),
                    rcpt_dsn: Vec::new(),
                    origin: None,
                },
                now,
            )
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
        info!(dsn = %queued, to = %sender, %target, refused = refused.len(), "bounce queued for recipients refused on arrival");
        self.bounce_queued(&target, true);
        Ok(Some(queued))
    }

    /// Queues the bounces a crash left pending.
    pub async fn send_pending_bounces(&self) {
        let spool = Arc::clone(&self.spool);
        if let Ok(Ok(pending)) = crate::blocking::spawn(move || spool.pending_bounces()).await {
            for (id, sender) in pending {
                self.bounce(&id, &sender).await;
            }
        }
    }

    /// Tells the senders of messages that have waited longer than the spool's `delay_warning`
    /// that their mail is delayed (once per message), each warning routed as a DSN is.
    pub async fn warn_delayed(&self) {
        let spool = Arc::clone(&self.spool);
        let routes = Arc::clone(&self.routes);
        let now = self.clock.unix_now();
        let warned = crate::blocking::spawn(move || {
            let table = routes.current();
            spool.warn_delayed(now, |sender| dsn_target(&table, sender))
        })
        .await;
        match warned {
            Ok(Ok(warned)) => {
                for (id, dsn, target) in warned {
                    info!(queue_id = %id, %dsn, %target, "the sender was told the message is delayed");
                    m::delay_warned();
                    self.wake(&target);
                }
            }
            other => warn!(?other, "cannot send delay warnings"),
        }
    }

    /// Fails the remaining recipients of messages past their lifetime, with bounces.
    pub async fn expire(&self) {
        let spool = Arc::clone(&self.spool);
        let now = self.clock.unix_now();
        let expired = crate::blocking::spawn(move || {
            let changed = spool.expire(now)?;
            let mut bounces = Vec::new();
            for (id, d) in changed {
                if d == Disposition::NeedsBounce
                    && let Ok((_, file)) = spool.load(&id)
                {
                    bounces.push((id, file.envelope.sender));
                }
            }
            Ok::<_, skywave_spool::Error>(bounces)
        })
        .await;
        if let Ok(Ok(bounces)) = expired {
            for (id, sender) in bounces {
                info!(queue_id = %id, "expired");
                self.bounce(&id, &sender).await;
            }
        }
    }
}
