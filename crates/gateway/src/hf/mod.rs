//! The HF side of the gateway: one link scheduler per peer, over the SIS bearer.
//!
//! [`Hf::start`] reads the peers from the routing table and starts, for every peer using
//! the `sis` bearer, a link task (HMTP on SAP 3, `hmtp_link`; CFTP on SAP 12, `cftp_link`)
//! fed by an SIS [`Endpoint`] (one per SIS server and SAP). Each link pulls its peer's mail from the spool, runs the
//! sessions, records every recipient's outcome and writes a [`TransferRecord`] per session.
//!
//! A reload of the routing table starts the links of peers it added ([`Hf::reloaded`]) and
//! changes the settings (compression, batch budget, hold) of running links, which read the
//! table at every session; a change of a running peer's node, bearer or protocol waits for the
//! next start.

mod cftp_link;
mod cut_record;
mod dedup_store;
mod hmtp_link;
pub(crate) mod peer_memory;
pub mod pmul_ip;
pub(crate) mod pmul_link;
pub mod sis;
pub(crate) mod tape_file;
mod tcp_link;
pub mod transfer;

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use skywave_route::{Bearer, Protocol, ScheduleState, SharedRoutes};
use skywave_sis::{NodeAddress, SapId};
use skywave_spool::{DueMessage, Target};
use tokio::sync::{Notify, mpsc, watch};
use tracing::{error, info, warn};

pub use sis::{Endpoint, LinkInput, SisConnect};
pub use transfer::{Direction, TransferLog, TransferRecord};

use crate::clock::Clock;
use crate::config::HfConfig;
use crate::intake::{GatewayPolicy, Intake};
use crate::outcome::Recorder;
use skywave_spool::dsn::DsnRecipient;

/// What the links share.
#[derive(Debug)]
pub struct HfContext {
    /// Our host name (EHLO, replies).
    pub hostname: String,
    /// The state directory (transfer log, de-duplication memory).
    pub state_dir: PathBuf,
    /// `[hf]` settings.
    pub config: HfConfig,
    /// The routing table.
    pub routes: Arc<SharedRoutes>,
    /// Where received mail goes.
    pub intake: Arc<Intake>,
    /// Where outcomes go.
    pub recorder: Arc<Recorder>,
    /// Woken when mail for an HF peer has been queued.
    pub wake: Arc<Notify>,
    /// The gateway's clock.
    pub clock: Clock,
    /// Where transfer records go (`state_dir/transfers.jsonl`).
    pub transfers: Arc<TransferLog>,
    /// True while the gateway keeps EMCON: no link puts anything on the air (see
    /// `pmul_link`); set from `[hf] emcon` at start and by `skywave emcon` while running.
    pub emcon: Arc<watch::Sender<bool>>,
    /// The schedule window each peer's link last logged, so that each opening and closing is
    /// logged once.
    pub windows_said: std::sync::Mutex<HashMap<String, ScheduleState>>,
    /// What our sessions heard from each peer (the links write it; the fallback reads it).
    pub heard: Arc<crate::heard::Heard>,
}

impl HfContext {
    /// Whether a link must not send to `peer` now: the operator holds the peer, or the gateway
    /// keeps EMCON.
    fn must_not_send(&self, peer: &skywave_route::Peer) -> bool {
        peer.hold || self.in_emcon()
    }

    /// Notes whether `peer` answered a session of ours that just ended ([`crate::heard`]).
    fn heard_from(&self, peer: &str, answered: bool) {
        let now = self.clock.unix_now();
        if answered {
            self.heard.answered(peer, now);
        } else {
            self.heard.unanswered(peer, now);
        }
    }

    /// Whether the gateway keeps EMCON (see [`HfContext::emcon`]).
    fn in_emcon(&self) -> bool {
        *self.emcon.borrow()
    }

    /// When to look at `target`'s queue next, after a look that took nothing: the spool's next
    /// due time, at most `cap`, and at least [`RECHECK`] from now. Mail due now that a look did
    /// not take is another link's (a multicast, a message another session holds): looking again
    /// at once would spin.
    async fn next_due(&self, target: &Target, cap: tokio::time::Instant) -> tokio::time::Instant {
        let spool = Arc::clone(&self.intake.spool);
        let t = target.clone();
        let next = crate::blocking::spawn(move || spool.next_due(&t))
            .await
            .ok()
            .and_then(Result::ok)
            .flatten();
        let floor = tokio::time::Instant::now() + RECHECK;
        next.map_or(cap, |t| self.clock.instant_of(t).max(floor).min(cap))
    }

    /// What a link may send to `peer` now, at unix second `now`: nothing while the operator
    /// holds it or the gateway keeps EMCON; outside its radio schedule, only mail at or above
    /// its `schedule_bypass` priority; inside a window that closes, only what fits in the time
    /// left.
    fn admission(&self, peer: &skywave_route::Peer, now: u64) -> Admission {
        if self.must_not_send(peer) {
            return Admission::Nothing;
        }
        let Some(schedule) = &peer.schedule else {
            return Admission::Due(Admit::default());
        };
        self.scheduled(
            &Gate {
                name: &peer.name,
                group: false,
                schedule,
                bypass: peer.schedule_bypass,
                stagger: self.opening_stagger(peer),
                reserve: 0,
                copies: 1,
            },
            now,
        )
    }

    /// What the multicast link may start for `group` now, at unix second `now`: anything,
    /// without a schedule; outside its schedule, only mail at or above its `schedule_bypass`
    /// priority; inside a window that closes, only what fits in the time left, each byte sent
    /// `1 + repeats` times, with `reserve` seconds of it kept for what the node still holds
    /// and the ships' acknowledgements. EMCON and held members are the link's own affair.
    fn group_admission(&self, group: &skywave_route::Group, now: u64, reserve: u64) -> Admission {
        let Some(schedule) = &group.schedule else {
            return Admission::Due(Admit::default());
        };
        self.scheduled(
            &Gate {
                name: &group.name,
                group: true,
                schedule,
                bypass: group.schedule_bypass,
                stagger: 0,
                reserve,
                copies: u64::from(group.repeats) + 1,
            },
            now,
        )
    }

    /// What a radio schedule lets start at unix second `now` (see [`Gate`]).
    fn scheduled(&self, gate: &Gate<'_>, now: u64) -> Admission {
        let state = gate.schedule.state_at(now);
        self.log_window(gate, state, now);
        gate.admission(state, now, self.config.assumed_bps)
    }

    /// Seconds this gateway lets pass after a window of `peer`'s opens before its own sessions
    /// start there. Both stations of a pair keep the same window, and both hold mail for the
    /// other when it opens: with clocks in step both would key up in the same instant, and
    /// their first transmissions would collide and be lost whole (every time, on the
    /// emulator's channel: `cargo test -p skywave-gateway --test over_the_air
    /// window_opening`). So the station with the lower STANAG 5066 address starts two
    /// turnarounds and two seconds after the other (the peer's gateway hands its session to
    /// its node, the node keys up, and the carrier is on the air), by when its node hears that
    /// carrier and does not key up over it; the crossed sessions are then served alongside
    /// each other (`skywave_hmtp::collision`). 0 for the other station, and for a peer not
    /// reached over the 5066 air.
    fn opening_stagger(&self, peer: &skywave_route::Peer) -> u64 {
        let second = matches!(peer.bearer, skywave_route::Bearer::Sis { .. })
            && matches!((self.config.node, peer.node), (Some(ours), Some(theirs)) if ours.bits() < theirs.bits());
        if second {
            (self.config.turnaround * 2 + std::time::Duration::from_secs(2))
                .as_secs_f64()
                .ceil() as u64
        } else {
            0
        }
    }

    /// Logs each opening and closing of a peer's or a group's schedule window once, as its
    /// link meets it.
    fn log_window(&self, gate: &Gate<'_>, state: ScheduleState, now: u64) {
        let mut said = self
            .windows_said
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Peer and group names differ (the routing table sees to it).
        if said.get(gate.name) == Some(&state) {
            return;
        }
        said.insert(gate.name.to_owned(), state);
        let bypass = gate
            .bypass
            .map(|p| format!("; mail of priority {p} and above goes at any time"))
            .unwrap_or_default();
        let stagger = match (state, gate.stagger) {
            (ScheduleState::Open { since: Some(_), .. }, s) if s > 0 => format!(
                "; the peer, the higher address, starts first: this gateway's sessions start {s} s after the opening"
            ),
            _ => String::new(),
        };
        let said = format!(
            "radio schedule {}: {}{bypass}{stagger}",
            gate.schedule,
            state.describe(now)
        );
        if gate.group {
            info!(group = %gate.name, "{said}");
        } else {
            info!(peer = %gate.name, "{said}");
        }
    }

    /// Takes what a link may send to `peer` now (see [`HfContext::admission`]), within its
    /// `batch_bytes` and skipping the queue ids in `skip`: the mail a session will carry, marked
    /// in flight, or why there is none.
    async fn take_for(
        &self,
        peer: &skywave_route::Peer,
        target: &Target,
        skip: Vec<String>,
    ) -> Take {
        let admission = self.admission(peer, self.clock.unix_now());
        let opens = match admission {
            Admission::Closed { opens, .. } => Some(opens),
            _ => None,
        };
        let Some(admit) = admission.admit() else {
            return Take::Later(
                opens.map_or(Look::Periodic, |o| Look::At(self.clock.instant_of(o))),
            );
        };
        let admit = Admit {
            budget: peer.batch_bytes,
            ..admit
        };
        match self.take_due(target, skip, admit).await {
            None => Take::Later(Look::Periodic),
            Some(l) if !l.is_empty() => Take::Mail(l),
            // Outside the window with nothing urgent: its opening, or the periodic look for
            // urgent mail due later, comes first.
            Some(_) => Take::Later(opens.map_or(Look::Due, |o| Look::At(self.clock.instant_of(o)))),
        }
    }

    /// When a link that started nothing looks at `target`'s queue again: at the spool's next
    /// due time ([`HfContext::next_due`]), at the given instant, or at the periodic look, and
    /// never later than the periodic look.
    async fn next_look(&self, look: Look, target: &Target) -> tokio::time::Instant {
        let cap = tokio::time::Instant::now() + MAX_SLEEP;
        match look {
            Look::Due => self.next_due(target, cap).await,
            Look::At(at) => at.min(cap),
            Look::Periodic => cap,
        }
    }

    /// Takes the mail due for `target` (priority order, skipping the queue ids in `skip`, as far
    /// as `admit` lets), marks it in flight and loads it: what a session will carry. `None`
    /// when the spool cannot be read (logged).
    async fn take_due(
        &self,
        target: &Target,
        skip: Vec<String>,
        admit: Admit,
    ) -> Option<Vec<(DueMessage, Vec<u8>)>> {
        let spool = Arc::clone(&self.intake.spool);
        let t = target.clone();
        let now = self.clock.unix_now();
        let table = self.routes.current();
        let name = match target {
            Target::Peer(p) => p.clone(),
            Target::Lan => String::new(),
        };
        let (on_air, ashore) = table.peer(&name).map_or_else(
            || (OnAir::Plain, Ashore::default()),
            |p| (OnAir::of(p), Ashore::of_peer(p)),
        );
        let loaded = crate::blocking::spawn(move || {
            // Every due message, in the spool's order: the admission applies the budget, which
            // stops at the first message over it, and the window, which skips a message that
            // does not fit (a smaller one behind it may).
            let due = spool.due(&t, now, u64::MAX)?;
            let mut out = Vec::with_capacity(due.len());
            let mut used = Used::default();
            for d in due {
                if skip.iter().any(|s| s == d.id.as_str()) {
                    continue;
                }
                let (verdict, air, loaded) =
                    weigh(&admit, out.len(), used, &d, on_air, &ashore, || {
                        ashore.load(&spool, &d.id)
                    })?;
                match verdict {
                    Admitted::Take => {}
                    Admitted::Skip | Admitted::NoRoom => continue,
                    Admitted::Stop => break,
                }
                let sending = match loaded {
                    Some(s) => s,
                    None => ashore.load(&spool, &d.id)?,
                };
                let file = &sending.file;
                // Mail for two or more ships of a group (or one under EMCON) is the
                // multicast link's: it goes once for all of them.
                if !table.groups().is_empty() {
                    let pending = pmul_link::pending_targets(&file.envelope.recipients);
                    let plan = table.plan(pending.iter().map(String::as_str));
                    if plan.multicast_for(&name).is_some() {
                        continue;
                    }
                }
                spool.mark_in_flight(&d.id, &d.recipients, now)?;
                used = used.with(d.size, air);
                out.push((d, sending.taken(&name).message));
            }
            Ok::<_, skywave_spool::Error>(out)
        })
        .await;
        match loaded {
            Ok(Ok(l)) => Some(l),
            other => {
                warn!(?other, "cannot read the spool");
                None
            }
        }
    }
}

impl HfContext {
    /// Takes again the mail of a session cut short by a lost link (`batch`, deferred when it
    /// was cut) so that the next session can go on with it from where the peer's node had it
    /// (`XRESUME`, [`hmtp_link`]), `rest` bytes of it still to send: when the peer may be sent
    /// to now (its hold, EMCON, its schedule window and what is left of it, as for
    /// [`HfContext::take_for`]), every message of it still waits for the same recipients, it
    /// is due again or other mail for the peer is (which would go now, and the cut session goes
    /// on first rather than be given up), and no mail of a higher priority waits (which goes
    /// first, in a new session, and the cut one is given up).
    async fn take_again(
        &self,
        peer: &skywave_route::Peer,
        target: &Target,
        batch: &[DueMessage],
        rest: u64,
    ) -> Again {
        let now = self.clock.unix_now();
        let admission = self.admission(peer, now);
        let later = match admission {
            Admission::Closed { opens, .. } => Look::At(self.clock.instant_of(opens)),
            _ => Look::Periodic,
        };
        let Some(admit) = admission.admit() else {
            return Again::Later(later);
        };
        let top = batch.iter().map(|d| d.priority.value()).max().unwrap_or(0);
        if admit.min_priority.is_some_and(|min| top < min) {
            return Again::Later(later);
        }
        let bypass = admit.unlimited_from.is_some_and(|u| top >= u);
        if let Some(fit) = admit.fit.filter(|f| !f.fresh && !bypass)
            && rest > fit.bytes
        {
            // What is left of the window does not carry the rest: the next opening will.
            return Again::Later(Look::Periodic);
        }
        let spool = Arc::clone(&self.intake.spool);
        let t = target.clone();
        let batch = batch.to_vec();
        let again = crate::blocking::spawn(move || {
            let waiting = spool.waiting(&t)?;
            for d in &batch {
                if !waiting
                    .iter()
                    .any(|w| w.id == d.id && same_recipients(&w.recipients, &d.recipients))
                {
                    return Ok(Again::No(format!(
                        "{} no longer waits for the same recipients (delivered, held, moved or bounced meanwhile)",
                        d.id
                    )));
                }
            }
            let due = spool.due(&t, now, u64::MAX)?;
            let ours = |id: &skywave_spool::QueueId| batch.iter().any(|d| d.id == *id);
            let all_due = batch.iter().all(|d| due.iter().any(|x| x.id == d.id));
            if !all_due && due.iter().all(|x| ours(&x.id)) {
                return Ok(Again::Later(Look::Due));
            }
            // Taken before its retry time (other mail goes now): not past its expiry, which
            // only `due` leaves out.
            for d in batch.iter().filter(|d| !due.iter().any(|x| x.id == d.id)) {
                if spool.load(&d.id)?.1.envelope.expires <= now {
                    return Ok(Again::No(format!("{} has expired", d.id)));
                }
            }
            let taken: Vec<DueMessage> = batch
                .iter()
                .filter_map(|d| waiting.iter().find(|w| w.id == d.id).cloned())
                .collect();
            if let Some(u) = due
                .iter()
                .find(|x| x.priority.value() > top && !ours(&x.id))
            {
                return Ok(Again::No(format!(
                    "{} (priority {}) is due and goes first",
                    u.id,
                    u.priority.value()
                )));
            }
            for d in &taken {
                spool.mark_in_flight(&d.id, &d.recipients, now)?;
            }
            Ok::<_, skywave_spool::Error>(Again::Taken(taken))
        })
        .await;
        match again {
            Ok(Ok(a)) => a,
            other => {
                warn!(?other, "cannot read the spool");
                Again::Later(Look::Periodic)
            }
        }
    }
}

/// The message a session carries of `d`, taken from the spool with `body` as its link sends
/// it; `dsn`: with the DSN parameters the sender gave (HMTP carries them, CFTP cannot).
pub(crate) fn batch_message(
    d: &DueMessage,
    body: Vec<u8>,
    dsn: bool,
) -> skywave_hmtp::BatchMessage {
    skywave_hmtp::BatchMessage {
        id: d.id.to_string(),
        reverse_path: d.sender.clone(),
        recipients: d.recipients.clone(),
        eight_bit: body.iter().any(|&b| b >= 0x80),
        body,
        dsn: if dsn {
            d.dsn.clone()
        } else {
            Default::default()
        },
        rcpt_dsn: if dsn { d.rcpt_dsn.clone() } else { Vec::new() },
    }
}

/// Whether two lists name the same recipients, in any order.
pub(crate) fn same_recipients(a: &[String], b: &[String]) -> bool {
    let sorted = |r: &[String]| {
        let mut r = r.to_vec();
        r.sort();
        r
    };
    a.len() == b.len() && sorted(a) == sorted(b)
}

/// What [`HfContext::take_again`] found for a session cut short.
#[derive(Debug)]
enum Again {
    /// Its mail, due again and marked in flight, in the cut session's order.
    Taken(Vec<DueMessage>),
    /// Not now; when to look again.
    Later(Look),
    /// It cannot go on, and why: its mail goes in a new session.
    No(String),
}

/// What the links of `name` (a peer or a group in `table`) send of `message` when it is not
/// the message as it came: its size on the air and, in words, what stays ashore. `None`: it
/// goes as it came (or `name` is neither).
pub fn on_the_air(
    table: &skywave_route::RoutingTable,
    name: &str,
    message: &[u8],
) -> Option<(u64, String)> {
    let ashore = match table.peer(name) {
        Some(p) => Ashore::of_peer(p),
        None => Ashore::of_group(table.group(name)?),
    };
    if !ashore.leaves_any() {
        return None;
    }
    let (sent, left) = ashore.leave_ashore(message);
    let Cow::Owned(sent) = sent else {
        return None;
    };
    let Left {
        alternatives,
        headers,
        images,
    } = left;
    let bytes = skywave_spool::Bytes;
    let mut said = Vec::new();
    if images.images > 0 {
        said.push(format!(
            "{} image(s) scaled down, {} less",
            images.images,
            bytes(images.saved as u64)
        ));
    }
    if alternatives > 0 {
        said.push(format!(
            "an HTML twin of {} left ashore",
            bytes(alternatives)
        ));
    }
    if headers > 0 {
        said.push(format!("{} of header fields left out", bytes(headers)));
    }
    Some((sent.len() as u64, said.join("; ")))
}

/// What a peer's or a group's links leave ashore of each message ([`skywave_smtp::strip`],
/// [`skywave_smtp::shrink`]): the header fields of its `strip_headers`, with `text_only` the
/// HTML twin of a text, and with `shrink_images` the pixels of its images over the limit.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ashore {
    patterns: Vec<skywave_smtp::strip::FieldPattern>,
    text_only: bool,
    images: Option<skywave_smtp::shrink::ImageLimit>,
}

/// A queued message loaded to go: its file, the message in it as the link sends it, and what
/// stayed ashore, counted once it is taken.
pub(crate) struct Sending {
    pub(crate) file: skywave_spool::QueueFile,
    left: Left,
}

/// What stayed ashore of a message: bytes of HTML twins, of header fields, and images made
/// smaller with the bytes it saved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Left {
    alternatives: u64,
    headers: u64,
    images: skywave_smtp::shrink::Shrunk,
}

impl Sending {
    /// Its file, once a session to `to` (a peer or a group) has taken it: what stayed ashore
    /// is counted in the metrics.
    pub(crate) fn taken(self, to: &str) -> skywave_spool::QueueFile {
        let Left {
            alternatives,
            headers,
            images,
        } = self.left;
        if alternatives > 0 {
            crate::metrics::alternatives_left_ashore(to, alternatives);
        }
        if headers > 0 {
            crate::metrics::header_bytes_stripped(to, headers);
        }
        if images.images > 0 {
            crate::metrics::images_shrunk(to, images.images as u64, images.saved as u64);
        }
        self.file
    }
}

impl Ashore {
    pub(crate) fn new(patterns: &[skywave_smtp::strip::FieldPattern], text_only: bool) -> Ashore {
        Ashore {
            patterns: patterns.to_vec(),
            text_only,
            images: None,
        }
    }

    /// What a peer's links leave ashore.
    pub(crate) fn of_peer(peer: &skywave_route::Peer) -> Ashore {
        Ashore::new(&peer.strip_headers, peer.text_only).shrinking(peer.shrink_images)
    }

    /// What a group's multicasts leave ashore.
    pub(crate) fn of_group(group: &skywave_route::Group) -> Ashore {
        Ashore::new(&group.strip_headers, group.text_only).shrinking(group.shrink_images)
    }

    /// The same, with images made to fit `limit` (none: as they came).
    pub(crate) fn shrinking(mut self, limit: Option<skywave_smtp::shrink::ImageLimit>) -> Ashore {
        self.images = limit;
        self
    }

    /// Whether it leaves anything ashore at all.
    pub(crate) fn leaves_any(&self) -> bool {
        self.text_only || !self.patterns.is_empty() || self.images.is_some()
    }

    /// Loads message `id` from `spool` as a link sends it; the spool keeps it whole.
    pub(crate) fn load(
        &self,
        spool: &skywave_spool::Spool,
        id: &skywave_spool::QueueId,
    ) -> skywave_spool::Result<Sending> {
        let (_, mut file) = spool.load(id)?;
        let (sent, left) = self.leave_ashore(&file.message);
        if let Cow::Owned(sent) = sent {
            file.message = sent;
        }
        Ok(Sending { file, left })
    }

    /// The size of `message` as a link sends it: what a peer's `size_limit` and `hold_above`
    /// weigh.
    pub(crate) fn weigh(&self, message: &[u8]) -> u64 {
        self.leave_ashore(message).0.len() as u64
    }

    /// `message` as a link sends it (borrowed: as it came), and what stayed ashore.
    fn leave_ashore<'a>(&self, message: &'a [u8]) -> (Cow<'a, [u8]>, Left) {
        use skywave_smtp::shrink::shrink_images;
        use skywave_smtp::strip::{strip_fields, text_only};
        let mut sent = Cow::Borrowed(message);
        let mut left = Left::default();
        if self.text_only
            && let (Cow::Owned(shorter), removed) = text_only(&sent)
        {
            sent = Cow::Owned(shorter);
            left.alternatives = removed as u64;
        }
        // After text_only: the images of an HTML twin left ashore are not worth decoding.
        if let Some(limit) = &self.images
            && let (Cow::Owned(shorter), shrunk) = shrink_images(&sent, limit)
        {
            sent = Cow::Owned(shorter);
            left.images = shrunk;
        }
        if let (Cow::Owned(shorter), removed) = strip_fields(&sent, &self.patterns) {
            sent = Cow::Owned(shorter);
            left.headers = removed as u64;
        }
        (sent, left)
    }
}

/// A radio schedule as a link meets it: a peer's, which gates that peer's sessions, or a
/// group's, which gates its multicasts ([`HfContext::scheduled`]).
struct Gate<'a> {
    /// The peer's or the group's name.
    name: &'a str,
    /// A group's (for the log).
    group: bool,
    schedule: &'a skywave_route::Schedule,
    /// Mail at or above this priority goes at any time.
    bypass: Option<skywave_route::Priority>,
    /// Seconds after an opening before this gateway starts (see
    /// [`HfContext::opening_stagger`]).
    stagger: u64,
    /// Seconds of the window kept for other things than the data: for a multicast, what the
    /// node still holds and the ships' acknowledgement slots.
    reserve: u64,
    /// How many times each byte goes on the air: a group's blind repeats, plus one.
    copies: u64,
}

impl Gate<'_> {
    /// What the schedule, standing at `state`, lets start at unix second `now`, on a link
    /// whose slowest rate is `bps`.
    fn admission(&self, state: ScheduleState, now: u64, bps: u32) -> Admission {
        let urgent = self.bypass.map(skywave_route::Priority::value);
        let stagger = self.stagger;
        match state {
            ScheduleState::Closed { opens } => Admission::Closed { urgent, opens },
            // The second station of the pair at the opening (see `opening_stagger`).
            ScheduleState::Open {
                since: Some(since), ..
            } if now < since.saturating_add(stagger) => Admission::Closed {
                urgent,
                opens: since.saturating_add(stagger),
            },
            ScheduleState::Open {
                since: Some(since),
                until: Some(until),
            } => {
                let left = until.saturating_sub(now).saturating_sub(self.reserve);
                Admission::Due(Admit {
                    fit: Some(Fit {
                        bytes: window_bytes(left, bps, self.copies),
                        fresh: now.saturating_sub(since) <= FRESH_WINDOW.as_secs(),
                    }),
                    unlimited_from: urgent,
                    ..Admit::default()
                })
            }
            ScheduleState::Open { .. } => Admission::Due(Admit::default()),
        }
    }
}

/// Bytes of mail `secs` of a window carry at `bps`, each byte sent `copies` times: what a
/// schedule's window admits ([`Gate::admission`]), and what `skywave check` says it holds.
pub(crate) fn window_bytes(secs: u64, bps: u32, copies: u64) -> u64 {
    let bytes_per_s = (u64::from(bps.max(1)) / 8).max(1);
    secs.saturating_mul(bytes_per_s) / copies.max(1)
}

/// What a link may send to its peer now ([`HfContext::admission`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    /// Nothing: the operator holds the peer, or the gateway keeps EMCON.
    Nothing,
    /// Outside the peer's radio schedule: only mail at or above `urgent` priority (its
    /// `schedule_bypass`), if any, until the next window opens at unix second `opens`.
    Closed { urgent: Option<i8>, opens: u64 },
    /// Due mail, as far as the [`Admit`] lets.
    Due(Admit),
}

impl Admission {
    /// What mail it lets go, if any: outside a window only mail at or above the bypass.
    fn admit(self) -> Option<Admit> {
        match self {
            Admission::Nothing | Admission::Closed { urgent: None, .. } => None,
            Admission::Closed {
                urgent: Some(min), ..
            } => Some(Admit {
                min_priority: Some(min),
                ..Admit::default()
            }),
            Admission::Due(admit) => Some(admit),
        }
    }
}

/// Which due messages a session may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Admit {
    /// The session's byte budget (the peer's `batch_bytes`): it takes due mail in priority
    /// order until the next message would pass it, and always at least one, so that nothing
    /// overtakes a more urgent message.
    budget: u64,
    /// Only mail at or above this priority (RFC 6710 scale).
    min_priority: Option<i8>,
    /// Only what fits in what is left of a schedule window...
    fit: Option<Fit>,
    /// ...except mail at or above this priority (the peer's `schedule_bypass`), which goes
    /// whatever the schedule.
    unlimited_from: Option<i8>,
}

/// What is left of the schedule window a session starts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fit {
    /// Bytes the time left carries at `[hf] assumed_bps`, the slowest rate the link runs at.
    /// Messages count at what they take on the air ([`OnAir`]): their size, or, when that does
    /// not fit, their size compressed alone, which the session's own compression matches or
    /// beats; so a session that fits by this count ends inside the window.
    bytes: u64,
    /// The window has just opened: a message larger than the time left still goes, alone, as
    /// it would fit no better in any later window.
    fresh: bool,
}

/// How long after its window opens a message too large for the window still goes alone: links
/// look at the spool at least every [`MAX_SLEEP`], and wake at a window's opening.
const FRESH_WINDOW: std::time::Duration = std::time::Duration::from_secs(120);

impl Default for Admit {
    fn default() -> Self {
        Admit {
            budget: u64::MAX,
            min_priority: None,
            fit: None,
            unlimited_from: None,
        }
    }
}

/// Whether a due message joins a session ([`Admit::takes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admitted {
    /// It goes.
    Take,
    /// It waits; look at the next one.
    Skip,
    /// It waits, as it does not fit in what is left of the window by the bytes it was counted
    /// at; look at the next one.
    NoRoom,
    /// It waits, and so does everything after it (the budget is spent).
    Stop,
}

/// What a session has taken so far: bytes of mail for its budget, and bytes on the air
/// ([`OnAir`]) for its window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Used {
    plain: u64,
    air: u64,
}

impl Used {
    /// With one more message of `plain` bytes that takes `air` on the air.
    fn with(self, plain: u64, air: u64) -> Used {
        Used {
            plain: self.plain.saturating_add(plain),
            air: self.air.saturating_add(air),
        }
    }
}

impl Admit {
    /// Whether `d`, counted at `air` bytes on the air, may join a session that has taken
    /// `taken` messages (`used`) so far.
    fn takes(&self, taken: usize, used: Used, d: &DueMessage, air: u64) -> Admitted {
        let p = d.priority.value();
        if self.min_priority.is_some_and(|min| p < min) {
            return Admitted::Skip;
        }
        if taken > 0 && used.plain.saturating_add(d.size) > self.budget {
            return Admitted::Stop;
        }
        let urgent = self.unlimited_from.is_some_and(|u| p >= u);
        match self.fit {
            Some(fit)
                if !urgent
                    && used.air.saturating_add(air) > fit.bytes
                    && !(taken == 0 && fit.fresh) =>
            {
                Admitted::NoRoom
            }
            _ => Admitted::Take,
        }
    }
}

/// How a link's mail is compressed on the air, which is what a schedule window counts of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnAir {
    /// As it is.
    Plain,
    /// Deflate: HMTP's towards a skywave gateway that asks for it, CFTP's gzip files, P_MUL's
    /// MULE bodies.
    Deflate,
    /// JNOS LZW with codes of at most this many bits.
    Lzw(u8),
}

impl OnAir {
    /// How `peer`'s sessions compress: as the link to it does (HMTP compresses only towards a
    /// skywave gateway; CFTP always).
    pub(crate) fn of(peer: &skywave_route::Peer) -> OnAir {
        use skywave_route::Compression as C;
        match (peer.protocol, peer.skywave, peer.compression) {
            (Protocol::Cftp, _, _) | (Protocol::Hmtp, true, C::Deflate) => OnAir::Deflate,
            (Protocol::Hmtp, true, C::Lzw { bits }) | (Protocol::Smtp, _, C::Lzw { bits }) => {
                OnAir::Lzw(bits)
            }
            _ => OnAir::Plain,
        }
    }

    /// `message`'s bytes on the air: compressed alone, never more than its size. A session's
    /// stream, whose context runs on across its messages (and from a preset dictionary), does
    /// as well or better, so a count by this stays inside the window.
    fn bytes(self, message: &[u8]) -> u64 {
        let len = message.len() as u64;
        let compressed = match self {
            OnAir::Plain => return len,
            OnAir::Deflate => {
                let mut e = skywave_compress::deflate::DeflateEncoder::new(6);
                e.push(message)
                    .and_then(|()| e.flush())
                    .map_or(len, |()| e.output_len() as u64)
            }
            OnAir::Lzw(bits) => match skywave_compress::lzw::LzwEncoder::new(bits) {
                Ok(mut e) => {
                    e.push(message);
                    e.flush();
                    e.output_len() as u64
                }
                Err(_) => len,
            },
        };
        compressed.min(len)
    }
}

/// Whether `d` joins a session that has taken `taken` messages (`used`) so far, and what it
/// takes on the air. Counted at its size first; a message that does not fit what is left of
/// the window so, on a link that compresses (`on_air`) or leaves something ashore (`ashore`),
/// is loaded as the link sends it (`load`) and counted again at that size compressed: a
/// 100 kB text that deflates to 30 kB goes in a window with 40 kB left instead of waiting
/// for the next. Returns the message when it was loaded.
fn weigh(
    admit: &Admit,
    taken: usize,
    used: Used,
    d: &DueMessage,
    on_air: OnAir,
    ashore: &Ashore,
    load: impl FnOnce() -> skywave_spool::Result<Sending>,
) -> skywave_spool::Result<(Admitted, u64, Option<Sending>)> {
    match admit.takes(taken, used, d, d.size) {
        Admitted::NoRoom if on_air != OnAir::Plain || ashore.leaves_any() => {
            let sending = load()?;
            let air = on_air.bytes(&sending.file.message);
            Ok((admit.takes(taken, used, d, air), air, Some(sending)))
        }
        verdict => Ok((verdict, d.size, None)),
    }
}

/// What [`HfContext::take_for`] found for a session.
#[derive(Debug)]
enum Take {
    /// Mail to send, marked in flight.
    Mail(Vec<(DueMessage, Vec<u8>)>),
    /// None now; when to look again.
    Later(Look),
}

/// When a link that started nothing looks at the spool again ([`HfContext::next_look`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Look {
    /// Nothing was due: at the spool's next due time.
    Due,
    /// Not now (link down, peer held, EMCON, the spool unreadable): at the periodic look, or
    /// at an input.
    Periodic,
    /// Outside the peer's radio schedule with nothing urgent due: when its window opens.
    At(tokio::time::Instant),
}

/// The recipients of a message received from a peer that cannot be refused in the protocol
/// (CFTP, P_MUL), sorted by what this gateway's policy says of each.
#[derive(Debug, Default)]
struct Classified {
    /// Accepted (remembered by the policy for [`Intake::store`]).
    taken: Vec<String>,
    /// Refused for good: they get a DSN from here.
    refused: Vec<DsnRecipient>,
    /// A temporary refusal (the first one): the whole message is left for the peer to send
    /// again later.
    later: Option<String>,
}

/// Asks `policy` about each recipient (see [`Classified`]).
fn classify<'a>(
    policy: &mut GatewayPolicy,
    recipients: impl IntoIterator<Item = &'a String>,
) -> Classified {
    let mut c = Classified::default();
    for r in recipients {
        match policy.accept_recipient(r) {
            Ok(()) => c.taken.push(r.clone()),
            Err(reply) if reply.is_permanent() => c.refused.push(DsnRecipient {
                address: r.clone(),
                original: None,
                success: None,
                status: reply
                    .enhanced
                    .map_or_else(|| "5.0.0".to_owned(), |e| e.to_string()),
                diagnostic: format!("{} {}", reply.code, reply.text()),
                last_attempt: None,
            }),
            Err(reply) => {
                c.later = Some(format!("{r}: {} {}", reply.code, reply.text()));
                break;
            }
        }
    }
    c
}

impl HfContext {
    /// Keeps a message received from a peer that cannot refuse in its protocol: bounces the
    /// `refused` recipients to the sender (`reference` names the transfer in the DSN) and
    /// spools the message for the others. Returns what was queued, or why nothing was (the
    /// caller then leaves the message unacknowledged, so the peer sends it again).
    async fn store_received(
        &self,
        reference: &str,
        policy: &GatewayPolicy,
        envelope: &skywave_smtp::Envelope,
        message: &[u8],
        refused: Vec<DsnRecipient>,
    ) -> Result<String, String> {
        let said = |r: skywave_smtp::Reply| format!("{} {}", r.code, r.text());
        // First, so that a file resent while the disk is short does not bounce its refused
        // recipients again at every attempt.
        self.intake.admit(message.len() as u64).map_err(said)?;
        let bounced = if refused.is_empty() {
            None
        } else {
            for r in &refused {
                warn!(transfer = %reference, rcpt = %r.address, reason = %r.diagnostic, "recipient refused; bounced to the sender");
            }
            self.recorder
                .bounce_refused(&envelope.reverse_path, reference, message, refused)
                .await?
        };
        if envelope.recipients.is_empty() {
            return Ok(bounced.map_or_else(
                || "nothing (every recipient refused, null sender)".to_owned(),
                |d| format!("a DSN {d} (every recipient refused)"),
            ));
        }
        self.intake
            .store(policy, envelope, message, None)
            .await
            .map(|id| id.to_string())
            .map_err(said)
    }
}

/// The HF side is misconfigured.
#[derive(Debug, thiserror::Error)]
pub enum HfError {
    /// A peer needs our own node address.
    #[error(
        "peer {peer} uses STANAG 5066, so this gateway needs its own node address: set node = \"w.x.y.z\" under [hf] in the gateway configuration"
    )]
    NoLocalNode {
        /// The peer.
        peer: String,
    },
    /// A peer has no node address.
    #[error("peer {peer} uses STANAG 5066 but has no node address in the routing table")]
    NoPeerNode {
        /// The peer.
        peer: String,
    },
    /// Two peers share a node address on the same SIS server.
    #[error("peers {a} and {b} have the same node address {node}")]
    SameNode {
        /// One peer.
        a: String,
        /// The other.
        b: String,
        /// The address.
        node: NodeAddress,
    },
    /// A peer speaks SMTP but is set to be reached through a SIS server.
    #[error(
        "peer {peer} speaks SMTP, which goes over TCP/IP (bearer = \"tcp\" with its address), not through a SIS server"
    )]
    SmtpOverSis {
        /// The peer.
        peer: String,
    },
    /// The sockets of P_MUL over IP could not be opened.
    #[error(transparent)]
    PmulIp(#[from] pmul_ip::PmulIpError),
    /// A group of the routing table runs over IP but the gateway has no `[pmul_ip]`.
    #[error(
        "group {group} runs P_MUL over IP (bearer = \"pmul-ip\"), so this gateway needs [pmul_ip] with its own address in the gateway configuration"
    )]
    NoPmulIp {
        /// The group.
        group: String,
    },
}

/// The running HF side.
#[derive(Debug)]
pub struct Hf {
    transfers: Arc<TransferLog>,
    links: std::sync::Mutex<Links>,
}

/// How a started link reaches its peer: what a reload may not change under a running link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reach {
    Sis {
        server: String,
        sap: u8,
        node: NodeAddress,
    },
    Tcp {
        address: String,
    },
}

impl std::fmt::Display for Reach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reach::Sis { server, sap, node } => {
                write!(f, "node {node} through the SIS server {server} (SAP {sap})")
            }
            Reach::Tcp { address } => write!(f, "TCP/IP to {address}"),
        }
    }
}

/// How this gateway reaches `peer` of its routing table: `Ok(None)` for a peer reached only by
/// P_MUL over IP (the multicast link carries all its mail), an error for one whose mail would
/// stay queued. The daemon starts its links from this, and `skywave check` reports it.
pub(crate) fn reach_of(
    config: &HfConfig,
    peer: &skywave_route::Peer,
) -> Result<Option<Reach>, HfError> {
    match (&peer.bearer, peer.protocol) {
        (Bearer::Tcp { address }, _) => Ok(Some(Reach::Tcp {
            address: address.clone(),
        })),
        (Bearer::PmulIp, _) => Ok(None),
        (Bearer::Sis { .. }, Protocol::Smtp) => Err(HfError::SmtpOverSis {
            peer: peer.name.clone(),
        }),
        (Bearer::Sis { server }, protocol) => {
            if config.node.is_none() {
                return Err(HfError::NoLocalNode {
                    peer: peer.name.clone(),
                });
            }
            let sap = if protocol == Protocol::Cftp {
                SapId::CFTP
            } else {
                SapId::HMTP
            };
            let node = peer.node.ok_or_else(|| HfError::NoPeerNode {
                peer: peer.name.clone(),
            })?;
            Ok(Some(Reach::Sis {
                server: server.clone().unwrap_or_else(|| config.sis_server.clone()),
                sap: sap.get(),
                node,
            }))
        }
    }
}

/// The links started so far, and what it takes to start more.
#[derive(Debug)]
struct Links {
    ctx: Arc<HfContext>,
    connect: SisConnect,
    shutdown: watch::Receiver<bool>,
    /// One SIS connection per (server, SAP), shared by the links of the peers that use it.
    endpoints: HashMap<(String, u8), Endpoint>,
    /// What each server's node holds from us, shared by that server's endpoints.
    backlogs: HashMap<String, Arc<sis::Backlog>>,
    /// Started links by peer name.
    started: HashMap<String, Reach>,
    /// Peers whose problem has been said, so a reload does not say it again.
    said: HashMap<String, String>,
    /// The multicast link of each SIS server in use: its endpoint (SAP 2) and inbox.
    pmul: HashMap<String, (Endpoint, mpsc::UnboundedSender<LinkInput>)>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Hf {
    /// Starts the links of every HF peer in the routing table. A peer without a node
    /// address, or two peers with the same node on the same SIS server, stop the start-up.
    pub fn start(
        ctx: HfContext,
        connect: SisConnect,
        ip: pmul_ip::IpNetwork,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Hf, HfError> {
        let transfers = Arc::clone(&ctx.transfers);
        let mut links = Links {
            ctx: Arc::new(ctx),
            connect,
            shutdown,
            endpoints: HashMap::new(),
            backlogs: HashMap::new(),
            started: HashMap::new(),
            said: HashMap::new(),
            pmul: HashMap::new(),
            tasks: Vec::new(),
        };
        if let Some(e) = links.start_new().into_iter().next() {
            return Err(e);
        }
        links.start_ip(ip)?;
        Ok(Hf {
            transfers,
            links: std::sync::Mutex::new(links),
        })
    }

    /// After a reload of the routing table: starts the links of peers the table has gained.
    /// A peer that cannot be started is logged and its mail stays queued; a peer whose node,
    /// bearer or protocol changed keeps its running link until the next start (said in the
    /// log), and a peer taken out of the table leaves its link idle.
    pub fn reloaded(&self) {
        let mut links = match self.links.lock() {
            Ok(l) => l,
            Err(poisoned) => poisoned.into_inner(),
        };
        for e in links.start_new() {
            error!("{e}; the peer's mail stays queued");
        }
    }

    /// The transfer records of this run, oldest first.
    pub fn transfers(&self) -> Vec<TransferRecord> {
        self.transfers.recent()
    }

    /// Waits for the links and endpoints to end (after the shutdown signal).
    pub async fn stop(self) {
        let links = match self.links.into_inner() {
            Ok(l) => l,
            Err(poisoned) => poisoned.into_inner(),
        };
        for t in links.tasks {
            let _ = t.await;
        }
    }
}

/// The backlog of `server`'s node in `backlogs`, made on first use.
fn backlog_of(
    backlogs: &mut HashMap<String, Arc<sis::Backlog>>,
    server: &str,
    bps: u32,
) -> Arc<sis::Backlog> {
    Arc::clone(
        backlogs
            .entry(server.to_owned())
            .or_insert_with(|| Arc::new(sis::Backlog::new(bps))),
    )
}

impl Links {
    /// Starts a link for every peer of the current table that has none yet, and returns why
    /// the others could not start: start-up refuses such a table, a reload logs it and tries
    /// again at the next reload.
    fn start_new(&mut self) -> Vec<HfError> {
        let table = self.ctx.routes.current();
        let mut errors = Vec::new();
        let mut queued: Option<Vec<u128>> = None;
        for peer in table.peers() {
            let reach = match reach_of(&self.ctx.config, peer) {
                Ok(Some(reach)) => reach,
                // Reached only by P_MUL over IP: the multicast link carries all its mail.
                Ok(None) => continue,
                Err(e @ HfError::NoPeerNode { .. }) => {
                    errors.push(e);
                    continue;
                }
                Err(e) => {
                    // Not fatal: the LAN side works, and the mail waits in the spool (visible
                    // in `skywave status`) until the configuration is completed and the
                    // gateway restarted. Said loudly, once per peer.
                    self.say_once(
                        &peer.name,
                        format!("{e}; mail for {} stays queued", peer.name),
                    );
                    continue;
                }
            };
            match self.started.get(&peer.name) {
                Some(running) if *running == reach => continue,
                Some(running) => {
                    self.say_once(
                        &peer.name,
                        format!(
                            "peer {} now reached as {reach:?} but its link runs as {running:?} until the gateway restarts",
                            peer.name
                        ),
                    );
                    continue;
                }
                None => {}
            }
            if let Reach::Sis { server, sap, node } = &reach {
                // Another peer of the current table on the same node and SAP is a mistake; a
                // peer that left the table gives its node to the newcomer (a renamed peer).
                let clash = self.started.iter().find(|(name, r)| {
                    matches!(r, Reach::Sis { server: s, sap: p, node: n } if s == server && p == sap && n == node)
                        && table.peer(name).is_some()
                });
                if let Some((other, _)) = clash {
                    errors.push(HfError::SameNode {
                        a: other.clone(),
                        b: peer.name.clone(),
                        node: *node,
                    });
                    continue;
                }
            }
            if matches!(reach, Reach::Sis { .. }) && queued.is_none() {
                // Messages still queued count as accepted for de-duplication (see dedup_store).
                queued = Some(dedup_store::spool_keys(&self.ctx.intake.spool));
            }
            self.start_link(&peer.name, &reach, queued.as_deref().unwrap_or_default());
            self.said.remove(&peer.name);
            self.started.insert(peer.name.clone(), reach);
        }
        self.start_multicast(&table);
        errors
    }

    /// Starts the multicast link of every SIS server a peer or group uses, and has it hear
    /// every peer there: any of them may multicast to us (a base), and ships acknowledge ours.
    fn start_multicast(&mut self, table: &skywave_route::RoutingTable) {
        let Some(local) = self.ctx.config.node else {
            return;
        };
        for r in self.started.values() {
            let Reach::Sis { server, node, .. } = r else {
                continue;
            };
            let tx = match self.pmul.get(server) {
                Some((endpoint, tx)) => {
                    endpoint.add_link(*node, tx.clone());
                    continue;
                }
                None => {
                    let (tx, rx) = mpsc::unbounded_channel();
                    let backlog =
                        backlog_of(&mut self.backlogs, server, self.ctx.config.assumed_bps);
                    let (endpoint, task) = Endpoint::start(
                        self.connect.clone(),
                        server.clone(),
                        pmul_link::SAP,
                        HashMap::from([(*node, tx.clone())]),
                        backlog,
                        self.shutdown.clone(),
                    );
                    self.tasks.push(task);
                    info!(%server, groups = table.groups().len(), "P_MUL multicast link starting (SAP 2)");
                    let link = pmul_link::PmulLink {
                        carrier: pmul_link::Carrier::Sis {
                            server: server.clone(),
                            local,
                            endpoint: endpoint.clone(),
                            inbox: rx,
                        },
                        ctx: Arc::clone(&self.ctx),
                        shutdown: self.shutdown.clone(),
                    };
                    self.tasks.push(tokio::spawn(link.run()));
                    (endpoint, tx)
                }
            };
            self.pmul.insert(server.clone(), tx);
        }
    }

    /// Starts the multicast link over UDP/IP when the gateway has `[pmul_ip]`; a group over IP
    /// without it stops the start-up.
    fn start_ip(&mut self, network: pmul_ip::IpNetwork) -> Result<(), HfError> {
        let Some(config) = self.ctx.config.pmul_ip.clone() else {
            let table = self.ctx.routes.current();
            return match table.groups().iter().find(|g| g.ip().is_some()) {
                Some(g) => Err(HfError::NoPmulIp {
                    group: g.name.clone(),
                }),
                None => Ok(()),
            };
        };
        let carrier = pmul_ip::IpCarrier::start(config, network, self.shutdown.clone())?;
        let link = pmul_link::PmulLink {
            carrier: pmul_link::Carrier::Ip(Box::new(carrier)),
            ctx: Arc::clone(&self.ctx),
            shutdown: self.shutdown.clone(),
        };
        self.tasks.push(tokio::spawn(link.run()));
        Ok(())
    }

    /// Logs a peer's problem once (until it changes or the peer starts).
    fn say_once(&mut self, peer: &str, text: String) {
        if self.said.get(peer) != Some(&text) {
            error!("{text}");
            self.said.insert(peer.to_owned(), text);
        }
    }

    fn start_link(&mut self, name: &str, reach: &Reach, queued: &[u128]) {
        let ctx = Arc::clone(&self.ctx);
        let shutdown = self.shutdown.clone();
        let (server, sap, node) = match reach {
            Reach::Tcp { address } => {
                info!(peer = %name, %address, "SMTP-over-TCP link starting");
                let link = tcp_link::TcpLink {
                    name: name.to_owned(),
                    address: address.clone(),
                    ctx,
                    shutdown,
                    last_try: None,
                };
                self.tasks.push(tokio::spawn(link.run()));
                return;
            }
            Reach::Sis { server, sap, node } => (server, *sap, *node),
        };
        let Some(local) = ctx.config.node else { return };
        let Ok(sap_id) = SapId::new(sap) else { return };
        let (tx, rx) = mpsc::unbounded_channel();
        let endpoint = match self.endpoints.get(&(server.clone(), sap)) {
            Some(e) => {
                e.add_link(node, tx.clone());
                e.clone()
            }
            None => {
                let backlog = backlog_of(&mut self.backlogs, server, ctx.config.assumed_bps);
                let (e, task) = Endpoint::start(
                    self.connect.clone(),
                    server.clone(),
                    sap_id,
                    HashMap::from([(node, tx.clone())]),
                    backlog,
                    shutdown.clone(),
                );
                self.tasks.push(task);
                self.endpoints.insert((server.clone(), sap), e.clone());
                e
            }
        };
        let dedup = dedup_store::DedupStore::open(
            ctx.state_dir.join("dedup"),
            name,
            ctx.config.dedup_window,
            ctx.clock,
            queued,
        );
        if sap_id == SapId::CFTP {
            info!(peer = %name, %node, %server, "CFTP link starting");
            let link = cftp_link::CftpLink {
                name: name.to_owned(),
                node,
                endpoint,
                inbox: rx,
                report: tx,
                ctx,
                dedup,
                shutdown,
            };
            self.tasks.push(tokio::spawn(link.run()));
            return;
        }
        info!(peer = %name, %node, %server, "HMTP link starting");
        let memory = peer_memory::MemoryFile::open(&ctx.state_dir.join("links"), name);
        let keeper =
            tape_file::KeptTape::open(&ctx.state_dir.join("links"), name, ctx.config.resume);
        let link = hmtp_link::HmtpLink {
            name: name.to_owned(),
            node,
            local,
            endpoint,
            inbox: rx,
            report: tx,
            ctx,
            dedup,
            shutdown,
            gather_until: None,
            peer_hold: None,
            cut: None,
            suspended: None,
            restored: None,
            keeper,
            submissions: 0,
            memory,
        };
        self.tasks.push(tokio::spawn(link.run()));
    }
}

/// Longest sleep of a link between looks at the spool (expiry, a peer released by an
/// operator).
const MAX_SLEEP: std::time::Duration = std::time::Duration::from_secs(60);

/// Shortest wait before a link looks again at mail that is due but was not for it.
const RECHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// Sleeps until `at`, or forever without a deadline.
async fn sleep_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipients_are_the_same_in_any_order() {
        let v = |r: &[&str]| r.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(same_recipients(&v(&["a@x", "b@x"]), &v(&["b@x", "a@x"])));
        assert!(!same_recipients(&v(&["a@x", "b@x"]), &v(&["a@x"])));
        assert!(!same_recipients(&v(&["a@x", "a@x"]), &v(&["a@x", "b@x"])));
    }

    fn due(priority: i8, size: u64) -> DueMessage {
        DueMessage {
            id: skywave_spool::QueueId::parse("A1").unwrap_or_else(|e| panic!("{e}")),
            priority: skywave_spool::Priority::new(priority).unwrap_or_default(),
            arrival: 0,
            size,
            sender: String::new(),
            recipients: Vec::new(),
            dsn: Default::default(),
            rcpt_dsn: Vec::new(),
        }
    }

    #[test]
    fn a_window_takes_what_fits_and_urgent_mail_whatever_its_size() {
        use Admitted::{NoRoom, Skip, Stop, Take};
        let fit = |bytes, fresh| Admit {
            fit: Some(Fit { bytes, fresh }),
            unlimited_from: Some(4),
            ..Admit::default()
        };
        // A message counted at its size, after messages of `used` bytes so counted.
        let takes = |admit: Admit, taken: usize, used: u64, d: &DueMessage| {
            admit.takes(
                taken,
                Used {
                    plain: used,
                    air: used,
                },
                d,
                d.size,
            )
        };
        // 10,000 bytes left: a second message that would pass them waits, and a smaller one
        // behind it may still go.
        assert_eq!(takes(fit(10_000, false), 0, 0, &due(0, 6000)), Take);
        assert_eq!(takes(fit(10_000, false), 1, 6000, &due(0, 6000)), NoRoom);
        assert_eq!(takes(fit(10_000, false), 1, 6000, &due(0, 4000)), Take);
        // Too large for the time left: waits, unless the window has just opened and nothing
        // else goes with it.
        assert_eq!(takes(fit(10_000, false), 0, 0, &due(0, 50_000)), NoRoom);
        assert_eq!(takes(fit(10_000, true), 0, 0, &due(0, 50_000)), Take);
        assert_eq!(takes(fit(10_000, true), 1, 100, &due(0, 50_000)), NoRoom);
        // Flash mail goes whatever is left.
        assert_eq!(takes(fit(10_000, false), 3, 9000, &due(4, 50_000)), Take);
        // The window counts bytes on the air, the budget bytes of mail: 50,000 bytes that go
        // as 9,000 fit in the 10,000 left.
        let after = Used {
            plain: 6000,
            air: 1000,
        };
        assert_eq!(
            fit(10_000, false).takes(1, after, &due(0, 50_000), 9000),
            Take
        );
        assert_eq!(
            fit(10_000, false).takes(1, after, &due(0, 50_000), 9001),
            NoRoom
        );
        // Outside a window only mail at or above the bypass goes.
        let closed = Admit {
            min_priority: Some(4),
            ..Admit::default()
        };
        assert_eq!(takes(closed, 0, 0, &due(4, 50_000)), Take);
        assert_eq!(takes(closed, 0, 0, &due(2, 100)), Skip);
        // No schedule: anything due, within the budget, which stops at the first message over
        // it (nothing overtakes it) but always takes one.
        let budget = Admit {
            budget: 32_768,
            ..Admit::default()
        };
        assert_eq!(takes(budget, 0, 0, &due(-9, 100_000)), Take);
        assert_eq!(takes(budget, 1, 30_000, &due(0, 5000)), Stop);
        assert_eq!(takes(budget, 1, 20_000, &due(0, 5000)), Take);
        assert_eq!(
            takes(Admit::default(), 9, u64::MAX, &due(-9, u64::MAX)),
            Take
        );
    }

    /// A message too large for what is left of the window by its size is weighed again as the
    /// link compresses it: text that deflates to a third goes; what does not compress waits;
    /// a plain link never loads it.
    #[test]
    fn a_window_counts_a_message_as_it_goes_on_the_air() {
        let text: Vec<u8> = (0..600)
            .flat_map(|i| {
                format!("Line {i} of the noon report: position 47N 008W, course 270.\r\n")
                    .into_bytes()
            })
            .collect();
        let size = text.len() as u64;
        let deflated = OnAir::Deflate.bytes(&text);
        let lzw = OnAir::Lzw(12).bytes(&text);
        assert!(
            deflated * 3 < size && lzw * 2 < size,
            "{size} {deflated} {lzw}"
        );
        // Noise does not compress: counted at its size, never more.
        let noise = skywave_compress::corpus::noise(1, text.len());
        assert_eq!(OnAir::Deflate.bytes(&noise), size);
        let admit = Admit {
            fit: Some(Fit {
                bytes: size / 2,
                fresh: false,
            }),
            ..Admit::default()
        };
        let file = |message: &[u8]| skywave_spool::QueueFile {
            envelope: skywave_spool::Envelope {
                id: skywave_spool::QueueId::parse("A1").unwrap_or_else(|e| panic!("{e}")),
                arrival: 0,
                sender: String::new(),
                priority: skywave_spool::Priority::NORMAL,
                expires: u64::MAX,
                recipients: Vec::new(),
                delay_warned: None,
                dead_reason: None,
                size: message.len() as u64,
                dsn: Default::default(),
            },
            message: message.to_vec(),
        };
        // What `weigh` finds, the loader giving `message` as the link sends it.
        let weighed = |on_air: OnAir, ashore: &Ashore, message: &[u8]| {
            let mut loaded = false;
            let (verdict, air, kept) = weigh(
                &admit,
                0,
                Used::default(),
                &due(0, size),
                on_air,
                ashore,
                || {
                    loaded = true;
                    Ok(Sending {
                        file: file(message),
                        left: Left::default(),
                    })
                },
            )
            .unwrap_or_else(|e| panic!("{e}"));
            (verdict, air, kept.is_some(), loaded)
        };
        let none = Ashore::default();
        assert_eq!(
            weighed(OnAir::Deflate, &none, &text),
            (Admitted::Take, deflated, true, true)
        );
        assert_eq!(
            weighed(OnAir::Lzw(12), &none, &text),
            (Admitted::Take, lzw, true, true)
        );
        assert_eq!(
            weighed(OnAir::Deflate, &none, &noise),
            (Admitted::NoRoom, size, true, true)
        );
        assert_eq!(
            weighed(OnAir::Plain, &none, &text),
            (Admitted::NoRoom, size, false, false)
        );
        // A plain link that leaves something ashore weighs the message as it sends it: here
        // the first half, what is left once an HTML twin, say, stayed ashore.
        let text_only = Ashore::new(&[], true);
        let half = &noise[..noise.len() / 2];
        assert_eq!(
            weighed(OnAir::Plain, &text_only, half),
            (Admitted::Take, half.len() as u64, true, true)
        );
    }

    /// What a link sends of a queued message: the text without its HTML twin, without the
    /// header fields its `strip_headers` names; the spool keeps it whole, and what stayed ashore
    /// is counted only once a session takes it.
    #[test]
    fn a_link_loads_a_message_as_it_sends_it() {
        use skywave_compress::corpus::{Style, from_the_internet, message_of_size_with_style};
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (spool, _) = skywave_spool::Spool::open(dir.path().join("spool"), Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let alt = message_of_size_with_style(7, 20_000, Style::Alternative)
            .unwrap_or_else(|e| panic!("{e}"));
        let message = from_the_internet(1, &alt);
        let id = spool
            .enqueue(
                &skywave_spool::NewMessage {
                    sender: "a@shore.example".into(),
                    recipients: vec![("b@ship.example".into(), Target::Peer("ship".into()))],
                    priority: skywave_spool::Priority::NORMAL,
                    message: &message,
                    dsn: Default::default(),
                    rcpt_dsn: Vec::new(),
                    origin: None,
                },
                1,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let patterns = skywave_smtp::strip::FieldPattern::defaults();
        let sending = Ashore::new(&patterns, true)
            .load(&spool, &id)
            .unwrap_or_else(|e| panic!("{e}"));
        let (text, twin) = skywave_smtp::strip::text_only(&message);
        let (expected, fields) = skywave_smtp::strip::strip_fields(&text, &patterns);
        assert_eq!(sending.file.message, expected.as_ref());
        let left = |alternatives, headers| Left {
            alternatives,
            headers,
            images: Default::default(),
        };
        assert_eq!(sending.left, left(twin as u64, fields as u64));
        // The corpus's HTML twin; the provider's fields and the corpus message's own X- fields.
        assert_eq!(sending.left, left(8572, 4812));
        let (_, whole) = spool.load(&id).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(whole.message, message);
        // Nothing left ashore: the message as it came.
        let plain = Ashore::default()
            .load(&spool, &id)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((plain.file.message, plain.left), (message, left(0, 0)));
    }

    #[test]
    fn a_groups_window_must_hold_every_copy_and_the_acknowledgements() {
        let schedule =
            skywave_route::Schedule::parse(&["*:00-*:03"]).unwrap_or_else(|e| panic!("{e}"));
        let gate = Gate {
            name: "fleet",
            group: true,
            schedule: &schedule,
            bypass: None,
            stagger: 0,
            reserve: 30,
            copies: 2,
        };
        // An hour's start plus 60 s: 120 s left, 30 of them the ships' acks; 90 s at 1200
        // bit/s is 13,500 bytes on the air, each sent twice.
        let hour = 1_796_083_200;
        let state = schedule.state_at(hour + 60);
        let Admission::Due(admit) = gate.admission(state, hour + 60, 1200) else {
            panic!("open window");
        };
        assert_eq!(admit.fit.map(|f| (f.bytes, f.fresh)), Some((6750, true)));
        let used = |bytes| Used {
            plain: bytes,
            air: bytes,
        };
        assert_eq!(admit.takes(0, used(0), &due(0, 6000), 6000), Admitted::Take);
        assert_eq!(
            admit.takes(1, used(6000), &due(0, 1000), 1000),
            Admitted::NoRoom
        );
        // Ten seconds before the close nothing fits beside the acks, and the window is not
        // fresh: even a small message waits for the next.
        let late = hour + 170;
        let Admission::Due(admit) = gate.admission(schedule.state_at(late), late, 1200) else {
            panic!("open window");
        };
        assert_eq!(admit.fit.map(|f| f.bytes), Some(0));
        assert_eq!(admit.takes(0, used(0), &due(0, 100), 100), Admitted::NoRoom);
        // Closed: until the next hour.
        let closed = hour + 200;
        assert_eq!(
            gate.admission(schedule.state_at(closed), closed, 1200),
            Admission::Closed {
                urgent: None,
                opens: hour + 3600
            }
        );
    }
}
