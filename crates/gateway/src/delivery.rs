//! LAN delivery: hands mail queued for [`Target::Lan`] to the ship's own mail system.
//!
//! Sits after the spool on the receiving side of the data path (mail that arrived over HF, and
//! mail between LAN domains). Two ways, chosen in `[delivery]`:
//! - a Maildir (maildir(5)), see [`crate::maildir`]: the message, with a `Return-Path:` header
//!   and LF line ends (or CRLF, `[delivery] line_ends`), is written under a name unique to the
//!   attempt; the names of a round's attempts go to the hand-off journal before any is written,
//!   so that a delivery cut off by a crash is checked by its one name (never by scanning the
//!   mailbox); up to [`MAILDIR_PARALLEL`] messages are written at once, so that fsync latency
//!   does not set the pace;
//! - SMTP to the LAN smarthost, see [`crate::smarthost`]: the round's messages over one
//!   connection, one transaction each, where a 4xx or a connection failure defers a recipient
//!   (retried with the spool's backoff) and a 5xx fails it (the spool builds a DSN and
//!   [`Spool::bounce`] queues it to the sender), each recipient by its own RCPT reply.
//!
//! The loop runs whatever [`Spool::due`] returns for the LAN, sleeps until the spool's next due
//! time (at most a minute, so expiry is checked too), and wakes at once when the listener has
//! queued mail for the LAN. Mail for HF peers stays queued for the link scheduler.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use skywave_spool::{DirSync, DueMessage, Handoff, Spool, Target};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tracing::{Instrument, info, info_span, warn};

use crate::config::{Delivery, LineEnds};
use crate::maildir::{self, Attempt, Journal, Namer};
use crate::outcome::{Outcome, Recorder};
use crate::smarthost::{Connection, Hop, ROUND_FILE, RoundReport};

/// Most bytes of LAN mail taken from the spool in one round.
const ROUND_BYTES: u64 = 4 << 20;
/// Longest sleep between rounds (expiry is checked at least this often).
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// Messages written into the Maildir at once. Each costs an fsync of its file and shares the
/// syncs of `new/` and of the spool's queue directory ([`DirSync`]) with the others in flight,
/// as concurrent SMTP sessions share them on the ingest side. The smarthost gets one message at
/// a time.
pub const MAILDIR_PARALLEL: usize = 32;

/// What the delivery loop needs.
#[derive(Debug)]
pub struct DeliveryContext {
    /// Our host name (Maildir file names, SMTP HELO).
    pub hostname: String,
    /// Where LAN mail goes.
    pub delivery: Delivery,
    /// The spool.
    pub spool: Arc<Spool>,
    /// Records outcomes and queues bounces.
    pub recorder: Arc<Recorder>,
    /// Woken when LAN mail has been queued.
    pub wake: Arc<Notify>,
    /// The Maildir hand-off journal ([`crate::maildir::Journal`]), in the state directory.
    pub journal: PathBuf,
}

/// What all Maildir deliveries of one gateway share: the file namer, and the group commit of
/// `new/` syncs (concurrent deliveries share one fsync of the directory).
struct Shared {
    namer: Namer,
    sync: DirSync,
}

impl Shared {
    fn new(hostname: &str) -> Self {
        Self {
            namer: Namer::new(hostname),
            sync: DirSync::new(),
        }
    }
}

/// Maildir attempts whose outcome is not known to the spool: the attempts of a round cut off by
/// a crash (read back from the journal at start-up), and attempts whose file may be in `new/`
/// although the spool did not record a delivery (the link was made but its sync failed, or the
/// spool write failed). Each is looked up by name before its message is attempted again, and
/// each is written to every journal until then.
struct Handoffs {
    journal: Journal,
    unsettled: HashMap<String, Vec<Attempt>>,
}

impl Handoffs {
    fn add(&mut self, a: Attempt) {
        self.unsettled.entry(a.id.clone()).or_default().push(a);
    }

    fn all(&self) -> impl Iterator<Item = &Attempt> {
        self.unsettled.values().flatten()
    }
}

/// Start-up for Maildir delivery: the Maildir created, our `tmp/` leftovers removed (after the
/// journal's attempts have had theirs checked), and the last journal read back. An unreadable
/// journal is set aside and replaced by a look through the mailbox for files of every queued
/// LAN message (at most once, and only then).
async fn maildir_start(
    ctx: &DeliveryContext,
    shared: &Arc<Shared>,
    dir: &std::path::Path,
) -> Option<Handoffs> {
    let mut handoffs = Handoffs {
        journal: Journal::new(ctx.journal.clone()),
        unsettled: HashMap::new(),
    };
    if let Err(e) = maildir::create(dir) {
        warn!(maildir = %dir.display(), error = %e, "cannot prepare the Maildir; deliveries will be deferred");
    }
    let journal_path = ctx.journal.clone();
    let (dir2, shared2, spool) = (
        dir.to_path_buf(),
        Arc::clone(shared),
        Arc::clone(&ctx.spool),
    );
    let loaded = crate::blocking::spawn(move || {
        match Journal::new(journal_path.clone()).load() {
            Ok(attempts) => Ok::<_, String>(attempts),
            Err(e) => {
                let aside = journal_path.with_extension("unreadable");
                let _ = std::fs::rename(&journal_path, &aside);
                // Every queued LAN message may have been in the cut-off round.
                let queued = spool
                    .waiting(&Target::Lan)
                    .map_err(|s| format!("{e}; and the spool: {s}"))?;
                let ids: HashSet<&str> = queued.iter().map(|m| m.id.as_str()).collect();
                let found = maildir::names_by_queue_id(&dir2, &shared2.namer, &ids)
                    .map_err(|m| format!("{e}; and the Maildir: {m}"))?;
                let attempts = found
                    .into_iter()
                    .filter_map(|(id, name)| {
                        let m = queued.iter().find(|m| m.id.as_str() == id)?;
                        Some(Attempt { id, name, rcpts: m.recipients.clone() })
                    })
                    .collect::<Vec<_>>();
                tracing::error!(journal = %aside.display(), error = %e, files = attempts.len(),
                    "the Maildir hand-off journal is unreadable (set aside); queued messages with a file in the Maildir are taken as delivered");
                Ok(attempts)
            }
        }
    })
    .await;
    match loaded {
        Ok(Ok(attempts)) => {
            for a in attempts {
                handoffs.add(a);
            }
            if !handoffs.unsettled.is_empty() {
                info!(
                    attempts = handoffs.unsettled.len(),
                    "checking the Maildir for the deliveries of a round cut off by a restart"
                );
            }
        }
        other => {
            // Neither the journal nor the fallback can say what was delivered: delivering
            // anyway could deliver twice, so LAN delivery does not start.
            tracing::error!(
                ?other,
                "cannot tell which Maildir deliveries were cut off; LAN delivery is stopped until the cause is fixed and the gateway restarted"
            );
            return None;
        }
    }
    // Only now: the journal's attempts have been read, and their leftovers are ours to remove.
    match maildir::clean_tmp(dir, &shared.namer, SystemTime::now()) {
        Ok(c) if c.ours + c.stale > 0 => {
            info!(maildir = %dir.display(), ours = c.ours, stale = c.stale,
                "removed files left in the Maildir's tmp/");
        }
        Ok(_) => {}
        Err(e) => warn!(maildir = %dir.display(), error = %e, "cannot clean the Maildir's tmp/"),
    }
    Some(handoffs)
}

/// Runs until `shutdown` turns true (after finishing the message in hand).
pub async fn run(ctx: Arc<DeliveryContext>, mut shutdown: watch::Receiver<bool>) {
    let shared = Arc::new(Shared::new(&ctx.hostname));
    let mut handoffs = match &ctx.delivery {
        Delivery::Maildir { dir, .. } => match maildir_start(&ctx, &shared, dir).await {
            Some(h) => Some(h),
            None => {
                let _ = shutdown.changed().await;
                return;
            }
        },
        Delivery::Smarthost { .. } => None,
    };
    ctx.recorder.send_pending_bounces().await;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let now = ctx.recorder.clock.unix_now();
        let spool = Arc::clone(&ctx.spool);
        let due = crate::blocking::spawn(move || spool.due(&Target::Lan, now, ROUND_BYTES)).await;
        let due = match due {
            Ok(Ok(due)) => due,
            other => {
                warn!(?other, "cannot read the spool for LAN delivery");
                Vec::new()
            }
        };
        let worked = !due.is_empty();
        match (&ctx.delivery, handoffs.as_mut()) {
            (Delivery::Maildir { dir, line_ends }, Some(h)) => {
                maildir_round(&ctx, &shared, h, dir, *line_ends, due, &shutdown).await;
            }
            (
                Delivery::Smarthost {
                    host,
                    port,
                    timeout,
                    tls,
                    auth,
                },
                _,
            ) => {
                let hop = Hop {
                    host,
                    port: *port,
                    timeout: *timeout,
                    tls,
                    auth: auth.as_ref(),
                };
                smarthost_round(&ctx, &hop, due, &shutdown).await;
            }
            (Delivery::Maildir { .. }, None) => {}
        }
        if *shutdown.borrow() {
            return;
        }
        if worked {
            continue;
        }
        ctx.recorder.expire().await;
        ctx.recorder.warn_delayed().await;
        let spool = Arc::clone(&ctx.spool);
        let next = crate::blocking::spawn(move || spool.next_due(&Target::Lan))
            .await
            .ok()
            .and_then(Result::ok)
            .flatten();
        let now = ctx.recorder.clock.unix_now();
        let sleep = next.map_or(MAX_SLEEP, |t| {
            Duration::from_secs(t.saturating_sub(now).max(1)).min(MAX_SLEEP)
        });
        tokio::select! {
            () = ctx.wake.notified() => {}
            () = tokio::time::sleep(sleep) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// One round of deliveries to the LAN smarthost over one connection (see [`crate::smarthost`]):
/// each message in one transaction, each recipient recorded as the smarthost answered it. A
/// connection that breaks defers what it was carrying, and the next message tries a new one;
/// one that cannot be made defers the rest of the round too, without trying again (a host that
/// does not answer would otherwise cost the whole timeout per message).
async fn smarthost_round(
    ctx: &Arc<DeliveryContext>,
    hop: &Hop<'_>,
    due: Vec<DueMessage>,
    shutdown: &watch::Receiver<bool>,
) {
    if due.is_empty() {
        return;
    }
    let mut link: Result<Option<Connection>, String> = Ok(None);
    let mut report = RoundReport {
        host: crate::smarthost::host_port(hop.host, hop.port),
        ..RoundReport::default()
    };
    for msg in due {
        if *shutdown.borrow() {
            break;
        }
        let span = info_span!("deliver", queue_id = %msg.id);
        link = to_smarthost(ctx, hop, link, msg, &mut report)
            .instrument(span)
            .await;
    }
    if let Ok(Some(c)) = link {
        c.close(hop.timeout).await;
    }
    report.at = ctx.recorder.clock.unix_now();
    // Beside the hand-off journal: in the state directory.
    let path = ctx.journal.with_file_name(ROUND_FILE);
    let written = match serde_json::to_vec(&report) {
        Ok(bytes) => crate::blocking::spawn(move || crate::durable::replace(&path, &bytes))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string())),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = written {
        warn!(error = %e, "cannot write the smarthost's round report for skywave status");
    }
}

/// One message to the smarthost, on the round's connection or a new one; gives back the
/// connection for the next message (`None` when it broke), or why none can be made.
async fn to_smarthost(
    ctx: &Arc<DeliveryContext>,
    hop: &Hop<'_>,
    link: Result<Option<Connection>, String>,
    msg: DueMessage,
    report: &mut RoundReport,
) -> Result<Option<Connection>, String> {
    let now = ctx.recorder.clock.unix_now();
    let spool = Arc::clone(&ctx.spool);
    let id = msg.id.clone();
    let rcpts = msg.recipients.clone();
    let loaded = crate::blocking::spawn(move || {
        spool.mark_in_flight(&id, &rcpts, now)?;
        spool.load(&id)
    })
    .await;
    let file = match loaded {
        Ok(Ok((_, file))) => file,
        other => {
            warn!(?other, "cannot load the message");
            return link;
        }
    };
    let conn = match link {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Connection::open(hop, &ctx.hostname).await.inspect(|c| {
            // Once per connection: what it offered stays so for its life.
            c.describe_into(report);
        }),
        Err(why) => Err(why),
    };
    let (link, outcomes) = match conn {
        Ok(c) => {
            let (kept, outcomes) = c.send(hop, &msg, &file.message).await;
            (Ok(kept), outcomes)
        }
        Err(why) => {
            let o = Outcome::Deferred(why.clone());
            let outcomes = msg.recipients.iter().map(|r| (r.clone(), o.clone()));
            (Err(why), outcomes.collect())
        }
    };
    // One record per distinct outcome, so that a message wholly delivered is one spool write.
    let mut groups: Vec<(Outcome, Vec<String>)> = Vec::new();
    for (rcpt, o) in outcomes {
        report.count(&o);
        match groups.iter_mut().find(|(g, _)| *g == o) {
            Some((_, rs)) => rs.push(rcpt),
            None => groups.push((o, vec![rcpt])),
        }
    }
    for (outcome, rcpts) in groups {
        if let Outcome::Delivered(how) = &outcome {
            info!(smarthost = %hop.host, recipients = rcpts.len(), ?how, "delivered to the smarthost");
        }
        ctx.recorder
            .record(&msg.id, &msg.sender, msg.size, rcpts, outcome)
            .await;
    }
    link
}

/// One round of Maildir deliveries, in the order the module docs of [`crate::maildir`] give:
/// earlier attempts of the due messages looked up by name (recipients whose file already landed
/// are recorded as delivered without a second copy), this round's attempts written to the
/// journal, then the files written, [`MAILDIR_PARALLEL`] at a time, each outcome recorded in the
/// spool as it comes. Attempts that may have landed unrecorded stay in `h` for the next round.
async fn maildir_round(
    ctx: &Arc<DeliveryContext>,
    shared: &Arc<Shared>,
    h: &mut Handoffs,
    dir: &std::path::Path,
    line_ends: LineEnds,
    mut due: Vec<DueMessage>,
    shutdown: &watch::Receiver<bool>,
) {
    settle_earlier(ctx, shared, h, dir, &mut due).await;
    forget_gone(ctx, h).await;
    let attempts: Vec<Attempt> = due
        .iter()
        .map(|m| Attempt {
            id: m.id.to_string(),
            name: shared.namer.next(m.id.as_str()),
            rcpts: m.recipients.clone(),
        })
        .collect();
    if attempts.is_empty() && h.unsettled.is_empty() {
        return;
    }
    let mut journal: Vec<Attempt> = h.all().cloned().collect();
    journal.extend(attempts.iter().cloned());
    let path = h.journal.path().to_path_buf();
    match crate::blocking::spawn(move || Journal::new(path).record(&journal)).await {
        Ok(Ok(())) => {}
        other => {
            // Without the journal a crash could deliver twice: write nothing this round.
            let why = match other {
                Ok(Err(e)) => format!("cannot write the Maildir hand-off journal: {e}"),
                _ => "cannot write the Maildir hand-off journal".to_owned(),
            };
            warn!(journal = %h.journal.path().display(), "{why}");
            for m in &due {
                ctx.recorder.defer_all(m, why.clone()).await;
            }
            return;
        }
    }
    let mut running = JoinSet::new();
    for (msg, attempt) in due.into_iter().zip(attempts) {
        while running.len() >= MAILDIR_PARALLEL {
            if let Some(Ok(Some(a))) = running.join_next().await {
                h.add(a);
            }
        }
        if *shutdown.borrow() {
            break;
        }
        let span = info_span!("deliver", queue_id = %msg.id);
        running.spawn(
            into_maildir(
                Arc::clone(ctx),
                Arc::clone(shared),
                dir.to_path_buf(),
                line_ends,
                msg,
                attempt,
            )
            .instrument(span),
        );
    }
    // Finish what is in hand, also when stopping.
    while let Some(done) = running.join_next().await {
        if let Ok(Some(a)) = done {
            h.add(a);
        }
    }
}

/// Drops the unsettled attempts of messages no longer in the spool (an operator deleted one, or
/// it expired): nothing will attempt them again, so they need not stay in the journal.
async fn forget_gone(ctx: &Arc<DeliveryContext>, h: &mut Handoffs) {
    if h.unsettled.is_empty() {
        return;
    }
    let ids: Vec<String> = h.unsettled.keys().cloned().collect();
    let spool = Arc::clone(&ctx.spool);
    let gone = crate::blocking::spawn(move || {
        ids.into_iter()
            .filter(|id| {
                skywave_spool::QueueId::parse(id)
                    .is_ok_and(|q| matches!(spool.load(&q), Err(skywave_spool::Error::NotFound(_))))
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    for id in gone {
        h.unsettled.remove(&id);
    }
}

/// The first step of a round: the due messages with an unsettled earlier attempt have it looked
/// up by name. Recipients whose file landed are recorded as delivered and leave `due`; the rest
/// get a fresh attempt. A message whose earlier attempt cannot be checked is deferred (a second
/// copy could be a duplicate) and keeps its attempt.
async fn settle_earlier(
    ctx: &Arc<DeliveryContext>,
    shared: &Arc<Shared>,
    h: &mut Handoffs,
    dir: &std::path::Path,
    due: &mut Vec<DueMessage>,
) {
    let earlier: Vec<Attempt> = due
        .iter()
        .filter_map(|m| h.unsettled.remove(m.id.as_str()))
        .flatten()
        .collect();
    if earlier.is_empty() {
        return;
    }
    let names: Vec<String> = earlier.iter().map(|a| a.name.clone()).collect();
    let (d, sh) = (dir.to_path_buf(), Arc::clone(shared));
    let found = crate::blocking::spawn(move || {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        maildir::delivered_names(&d, &names, &sh.sync)
    })
    .await;
    let found = match found {
        Ok(Ok(found)) => found,
        other => {
            let why = match other {
                Ok(Err(e)) => format!("cannot check the Maildir for an earlier copy: {e}"),
                _ => "cannot check the Maildir for an earlier copy".to_owned(),
            };
            for a in earlier {
                if let Some(m) = due.iter().find(|m| m.id.as_str() == a.id) {
                    ctx.recorder.defer_all(m, why.clone()).await;
                }
                h.add(a);
            }
            due.retain(|m| !h.unsettled.contains_key(m.id.as_str()));
            return;
        }
    };
    for a in earlier {
        if !found.contains(&a.name) {
            // It did not land (its tmp/ leftover is gone): a fresh attempt follows.
            continue;
        }
        let Some(m) = due.iter_mut().find(|m| m.id.as_str() == a.id) else {
            continue;
        };
        let landed: Vec<String> = m
            .recipients
            .iter()
            .filter(|r| a.rcpts.contains(r))
            .cloned()
            .collect();
        info!(queue_id = %m.id, file = %a.name, "already in the Maildir (written before a restart)");
        let recorded = ctx
            .recorder
            .record(
                &m.id,
                &m.sender,
                m.size,
                landed.clone(),
                Outcome::Delivered(Handoff::Final),
            )
            .await;
        if recorded {
            m.recipients.retain(|r| !landed.contains(r));
        } else {
            m.recipients.clear();
            h.add(a);
        }
    }
    due.retain(|m| !m.recipients.is_empty());
}

/// One Maildir delivery: the queued message read, written under the attempt's name, the outcome
/// recorded. Returns the attempt when its file may be in `new/` although the spool did not
/// record a delivery, so that it is looked up before the message is attempted again.
async fn into_maildir(
    ctx: Arc<DeliveryContext>,
    shared: Arc<Shared>,
    dir: PathBuf,
    line_ends: LineEnds,
    msg: DueMessage,
    attempt: Attempt,
) -> Option<Attempt> {
    let spool = Arc::clone(&ctx.spool);
    let (id, sender, name) = (msg.id.clone(), msg.sender.clone(), attempt.name.clone());
    let written = crate::blocking::spawn(move || -> Result<(), (bool, String)> {
        let (_, file) = spool
            .load(&id)
            .map_err(|e| (false, format!("cannot read the queued message: {e}")))?;
        let bytes = maildir::file_bytes(&sender, &file.message, line_ends);
        maildir::create(&dir).map_err(|e| (false, format!("Maildir write failed: {e}")))?;
        maildir::write(&dir, &name, &bytes, &shared.sync)
            .map_err(|e| (e.linked, format!("Maildir write failed: {e}")))
    })
    .await;
    let (outcome, may_have_landed) = match written {
        Ok(Ok(())) => {
            info!(file = %attempt.name, "delivered to the Maildir");
            (Outcome::Delivered(Handoff::Final), true)
        }
        Ok(Err((linked, why))) => (Outcome::Deferred(why), linked),
        // The task died part-way: whether the file landed is unknown.
        Err(e) => (
            Outcome::Deferred(format!("Maildir delivery failed: {e}")),
            true,
        ),
    };
    let delivered = matches!(outcome, Outcome::Delivered(_));
    let recorded = ctx
        .recorder
        .record(
            &msg.id,
            &msg.sender,
            msg.size,
            attempt.rcpts.clone(),
            outcome,
        )
        .await;
    (may_have_landed && !(recorded && delivered)).then_some(attempt)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::clock::Clock;
    use skywave_route::{RoutingTable, SharedRoutes};
    use skywave_spool::{NewMessage, Priority, QueueId, SpoolConfig};
    use std::path::Path;

    const BODY: &[u8] = b"Subject: x\r\nMessage-ID: <1@ship>\r\n\r\nhi\r\n";
    const ROUTES: &str = "[lan]\ndomains = [\"ship\"]\n";

    /// A gateway's LAN delivery over the spool in `root/spool`, into `root/Maildir`.
    fn context(root: &Path, line_ends: LineEnds) -> Arc<DeliveryContext> {
        let (spool, _) = Spool::open(root.join("spool"), SpoolConfig::default()).unwrap();
        let spool = Arc::new(spool);
        let table = RoutingTable::parse("routes.toml", ROUTES).unwrap();
        let lan_wake = Arc::new(Notify::new());
        Arc::new(DeliveryContext {
            hostname: "gw".into(),
            delivery: Delivery::Maildir {
                dir: root.join("Maildir"),
                line_ends,
            },
            spool: Arc::clone(&spool),
            recorder: Arc::new(Recorder {
                spool,
                routes: Arc::new(SharedRoutes::new(table)),
                lan_wake: Arc::clone(&lan_wake),
                hf_wake: Arc::new(Notify::new()),
                clock: Clock::start(),
            }),
            wake: lan_wake,
            journal: root.join("maildir-handoff.jsonl"),
        })
    }

    /// One message for two LAN recipients.
    fn enqueue(ctx: &DeliveryContext) -> QueueId {
        ctx.spool
            .enqueue(
                &NewMessage {
                    sender: "a@shore".into(),
                    recipients: vec![
                        ("ops@ship".into(), Target::Lan),
                        ("cdr@ship".into(), Target::Lan),
                    ],
                    priority: Priority::NORMAL,
                    message: BODY,
                    dsn: Default::default(),
                    rcpt_dsn: Vec::new(),
                    origin: None,
                },
                ctx.recorder.clock.unix_now(),
            )
            .unwrap()
    }

    fn due(ctx: &DeliveryContext) -> Vec<DueMessage> {
        let now = ctx.recorder.clock.unix_now();
        ctx.spool.due(&Target::Lan, now, u64::MAX).unwrap()
    }

    /// One round of delivery, as the loop runs it.
    async fn round(
        ctx: &Arc<DeliveryContext>,
        shared: &Arc<Shared>,
        h: &mut Handoffs,
        due: Vec<DueMessage>,
    ) {
        let (_stop, shutdown) = watch::channel(false);
        let Delivery::Maildir { dir, line_ends } = &ctx.delivery else {
            unreachable!()
        };
        maildir_round(ctx, shared, h, dir, *line_ends, due, &shutdown).await;
    }

    /// What a restart does: the spool and the journal opened again, the Maildir checked.
    async fn restart(root: &Path) -> (Arc<DeliveryContext>, Arc<Shared>, Handoffs) {
        let ctx = context(root, LineEnds::Lf);
        let shared = Arc::new(Shared::new("gw"));
        let Delivery::Maildir { dir, .. } = &ctx.delivery else {
            unreachable!()
        };
        let h = maildir_start(&ctx, &shared, dir).await.expect("start");
        (ctx, shared, h)
    }

    /// A round cut off by a crash after its journal was written: the attempt as the journal
    /// holds it.
    fn cut_off_round(root: &Path) -> (QueueId, Attempt) {
        let ctx = context(root, LineEnds::Lf);
        maildir::create(&root.join("Maildir")).unwrap();
        let id = enqueue(&ctx);
        let a = Attempt {
            id: id.to_string(),
            name: Shared::new("gw").namer.next(id.as_str()),
            rcpts: vec!["ops@ship".into(), "cdr@ship".into()],
        };
        Journal::new(ctx.journal.clone())
            .record(std::slice::from_ref(&a))
            .unwrap();
        (id, a)
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[tokio::test]
    async fn a_round_journals_its_names_before_writing_and_delivers_each_message_once() {
        let dir = tempfile::tempdir().unwrap();
        let (ctx, shared, mut h) = restart(dir.path()).await;
        let ids: Vec<QueueId> = (0..40).map(|_| enqueue(&ctx)).collect();
        round(&ctx, &shared, &mut h, due(&ctx)).await;
        let md = dir.path().join("Maildir");
        let new = files(&md.join("new"));
        assert_eq!(new.len(), 40);
        assert!(files(&md.join("tmp")).is_empty());
        assert!(h.unsettled.is_empty());
        assert!(due(&ctx).is_empty(), "all recorded as delivered");
        // The journal named every file of the round before it was written.
        let journal = Journal::new(ctx.journal.clone()).load().unwrap();
        let mut named: Vec<String> = journal.iter().map(|a| a.name.clone()).collect();
        named.sort();
        assert_eq!(named, new);
        for id in &ids {
            assert!(journal.iter().any(|a| a.id == id.as_str()));
        }
        assert_eq!(
            std::fs::read(md.join("new").join(&new[0])).unwrap(),
            b"Return-Path: <a@shore>\nSubject: x\nMessage-ID: <1@ship>\n\nhi\n"
        );
    }

    /// Issue 14's clash: a delivery cut off after its tmp/ write is retried at once after the
    /// restart, under a new name; exactly one copy lands in new/ and tmp/ is left empty.
    #[tokio::test]
    async fn an_attempt_cut_off_after_the_tmp_write_is_retried_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let md = dir.path().join("Maildir");
        let (_, first) = cut_off_round(dir.path());
        std::fs::write(md.join("tmp").join(&first.name), b"half a mess").unwrap();

        let (ctx, shared, mut h) = restart(dir.path()).await;
        assert_eq!(h.all().count(), 1);
        let due = due(&ctx);
        assert_eq!(due.len(), 1, "due at once, no backoff");
        round(&ctx, &shared, &mut h, due).await;
        let new = files(&md.join("new"));
        assert_eq!(new.len(), 1);
        assert_ne!(new[0], first.name, "a fresh name for the new attempt");
        assert!(files(&md.join("tmp")).is_empty());
        assert!(h.unsettled.is_empty());
        assert!(self::due(&ctx).is_empty());
    }

    /// A delivery cut off after the link into new/ (before the spool heard of it, with or without
    /// its tmp/ file unlinked, and after a mail reader moved it to cur/) is found by its recorded
    /// name: no second copy.
    #[tokio::test]
    async fn an_attempt_cut_off_after_the_link_is_not_written_twice() {
        for (leftover_in_tmp, moved_to_cur) in [(false, false), (true, false), (false, true)] {
            let dir = tempfile::tempdir().unwrap();
            let md = dir.path().join("Maildir");
            let (_, first) = cut_off_round(dir.path());
            maildir::write(&md, &first.name, b"the first copy", &DirSync::new()).unwrap();
            if leftover_in_tmp {
                std::fs::write(md.join("tmp").join(&first.name), b"the first copy").unwrap();
            }
            if moved_to_cur {
                std::fs::rename(
                    md.join("new").join(&first.name),
                    md.join("cur").join(format!("{}:2,S", first.name)),
                )
                .unwrap();
            }
            let (ctx, shared, mut h) = restart(dir.path()).await;
            round(&ctx, &shared, &mut h, due(&ctx)).await;
            let copies = files(&md.join("new")).len() + files(&md.join("cur")).len();
            assert_eq!(copies, 1, "tmp {leftover_in_tmp}, cur {moved_to_cur}");
            assert!(files(&md.join("tmp")).is_empty());
            assert!(due(&ctx).is_empty(), "recorded as delivered");
            assert!(h.unsettled.is_empty());
        }
    }

    /// A journal that does not decode is set aside, and the mailbox is searched (once) for files
    /// of the queued messages instead: the one that landed is not written again.
    #[tokio::test]
    async fn an_unreadable_journal_falls_back_to_the_files_in_the_mailbox() {
        let dir = tempfile::tempdir().unwrap();
        let md = dir.path().join("Maildir");
        let (_, first) = cut_off_round(dir.path());
        maildir::write(&md, &first.name, b"the first copy", &DirSync::new()).unwrap();
        let journal = dir.path().join("maildir-handoff.jsonl");
        std::fs::write(&journal, b"{\"id\": 3, not json\n").unwrap();
        let (ctx, shared, mut h) = restart(dir.path()).await;
        assert!(dir.path().join("maildir-handoff.unreadable").exists());
        assert_eq!(h.all().count(), 1);
        round(&ctx, &shared, &mut h, due(&ctx)).await;
        assert_eq!(files(&md.join("new")), std::slice::from_ref(&first.name));
        assert!(due(&ctx).is_empty());
    }

    /// An unsettled attempt of a message an operator deleted meanwhile leaves the journal.
    #[tokio::test]
    async fn attempts_of_deleted_messages_leave_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let (id, _) = cut_off_round(dir.path());
        let (ctx, shared, mut h) = restart(dir.path()).await;
        assert_eq!(h.all().count(), 1);
        ctx.spool.delete(&id).unwrap();
        let other = enqueue(&ctx);
        round(&ctx, &shared, &mut h, due(&ctx)).await;
        assert!(h.unsettled.is_empty());
        let journal = Journal::new(ctx.journal.clone()).load().unwrap();
        assert!(
            journal.iter().all(|a| a.id == other.as_str()),
            "{journal:?}"
        );
    }

    /// Recipients of one message delivered in two rounds (one deferred the first time) each end
    /// up in exactly one file; the first file is not rewritten for the second round.
    #[tokio::test]
    async fn a_second_round_for_other_recipients_writes_a_second_file() {
        let dir = tempfile::tempdir().unwrap();
        let md = dir.path().join("Maildir");
        let ctx = context(dir.path(), LineEnds::Crlf);
        let shared = Arc::new(Shared::new("gw"));
        let mut h = maildir_start(&ctx, &shared, &md).await.unwrap();
        enqueue(&ctx);
        let mut first = due(&ctx);
        first[0].recipients = vec!["ops@ship".into()];
        round(&ctx, &shared, &mut h, first).await;
        let second = due(&ctx);
        assert_eq!(second[0].recipients, ["cdr@ship"]);
        round(&ctx, &shared, &mut h, second).await;
        assert!(due(&ctx).is_empty());
        let new = files(&md.join("new"));
        assert_eq!(new.len(), 2);
        let mut want = b"Return-Path: <a@shore>\r\n".to_vec();
        want.extend_from_slice(BODY);
        for f in new {
            assert_eq!(std::fs::read(md.join("new").join(f)).unwrap(), want);
        }
    }
}
