//! The queue's journal: one JSON line for each thing that happens to a message, for the
//! operator who is asked "where is my mail?".
//!
//! Every change the spool makes to a queue file goes through one place ([`crate::Spool`]'s
//! update), which compares the envelope before and after and writes what changed: handed to a
//! peer, deferred and why, delivered, failed and why, moved to a fallback or back, held,
//! released, warned, made a dead letter, gone from the queue. Enqueueing writes the sender, the
//! `Message-ID`, the size, where the message came from (as its caller words it) and where each
//! recipient goes; a delivery report says which message it reports on. `skywave trace` reads it back by queue id, `Message-ID` or address, as Postfix's
//! log is grepped for a queue id.
//!
//! The journal is a record, not state: it is written after the change it tells of is durable,
//! without a sync of its own, and a write that fails is reported once and changes nothing else
//! (a crash may lose its last lines, never a message). It lives beside the queue
//! (`<spool>/journal.jsonl`) and is bounded: past [`MAX_BYTES`] the file becomes
//! `journal.jsonl.1` (replacing the one before) and a new one starts, so that a ship's disk
//! holds the last few months of an ordinary traffic and never more than twice the bound.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::record::{Envelope, Moved, RcptState};
use crate::spool::QueueState;

/// The journal's file name under the spool's root.
pub const FILE: &str = "journal.jsonl";
/// The previous file, once the journal has passed [`MAX_BYTES`].
pub const PREVIOUS: &str = "journal.jsonl.1";
/// Size at which the journal starts a new file.
pub const MAX_BYTES: u64 = 8 * 1024 * 1024;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum What {
    /// Taken into the queue.
    Queued,
    /// Taken into the queue and held for the operator from the start.
    QueuedHeld,
    /// Handed to the link (or the LAN delivery) that carries it to `via`.
    Sent,
    /// Delivered: the next hop took it.
    Delivered,
    /// A temporary failure; tried again later.
    Deferred,
    /// A permanent failure.
    Failed,
    /// Moved to another target by a peer's fallback or the operator.
    Moved,
    /// Waiting again (after a restart, or released from a dead letter).
    Requeued,
    /// Held by the operator.
    Held,
    /// Released by the operator.
    Released,
    /// The sender was told of the delay.
    Warned,
    /// A delivery report (DSN) on it was queued; `text` names it.
    Report,
    /// Made a dead letter; `text` says why.
    Dead,
    /// Every recipient is done: it has left the queue.
    Done,
    /// Deleted by the operator.
    Deleted,
}

impl What {
    /// The word `skywave trace` prints.
    pub fn word(self) -> &'static str {
        match self {
            What::Queued => "queued",
            What::QueuedHeld => "queued, held for the operator",
            What::Sent => "sent",
            What::Delivered => "delivered",
            What::Deferred => "deferred",
            What::Failed => "failed",
            What::Moved => "moved",
            What::Requeued => "waiting again",
            What::Held => "held",
            What::Released => "released",
            What::Warned => "sender warned of the delay",
            What::Report => "report",
            What::Dead => "dead letter",
            What::Done => "left the queue",
            What::Deleted => "deleted",
        }
    }
}

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// When (unix seconds).
    pub t: u64,
    /// The message's queue id.
    pub id: String,
    /// What happened.
    pub what: What,
    /// The recipients it concerns (none: the whole message).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rcpts: Vec<String>,
    /// Where they go (`lan`, `peer:NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// Why, or what: the error, the failure, the move, the report's queue id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// On `queued`: the sender (empty for a delivery report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// On `queued`: the message's `Message-ID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// On `queued`: its size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// On `queued`: where it came from, in words (the client and how it spoke, or the peer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

impl Event {
    /// An event on `id` at `t`, nothing else said.
    pub fn new(t: u64, id: &str, what: What) -> Event {
        Event {
            t,
            id: id.to_owned(),
            what,
            rcpts: Vec::new(),
            via: None,
            text: None,
            from: None,
            message_id: None,
            size: None,
            origin: None,
        }
    }
}

/// `text` with its control characters shown as `?`: the journal holds what clients and peers
/// said (a HELO, addresses, replies), and none of it may drive the terminal of the operator who
/// reads it (`skywave queue trace`).
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if text.chars().any(char::is_control) {
        text.chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect::<String>()
            .into()
    } else {
        text.into()
    }
}

/// The events of a message just queued (`held`: held from the start): one per target, with
/// its recipients, the first saying the sender, `message_id`, size and `origin`.
pub fn queued(
    env: &Envelope,
    message_id: Option<String>,
    origin: Option<String>,
    held: bool,
) -> Vec<Event> {
    let what = if held { What::QueuedHeld } else { What::Queued };
    let mut out: Vec<Event> = Vec::new();
    for r in &env.recipients {
        let event = Event::new(env.arrival, env.id.as_str(), what);
        add_recipient(&mut out, event, r);
    }
    if let Some(first) = out.first_mut() {
        first.from = Some(env.sender.clone());
        first.message_id = message_id;
        first.size = Some(env.size);
        first.origin = origin;
    }
    out
}

/// What changed between `before` and `after`, the file going from queue state `from` to `to`
/// (`None`: removed, its last recipients done), at `t`.
pub fn changes(
    t: u64,
    before: &Envelope,
    after: &Envelope,
    from: QueueState,
    to: Option<QueueState>,
) -> Vec<Event> {
    let id = before.id.as_str();
    let mut out: Vec<Event> = Vec::new();
    // Recipients, grouped by what happened to them, where, and why.
    for (old, new) in before.recipients.iter().zip(&after.recipients) {
        let Some((what, text)) = recipient_change(old, new) else {
            continue;
        };
        add_recipient(
            &mut out,
            Event {
                text,
                ..Event::new(t, id, what)
            },
            new,
        );
    }
    if before.delay_warned.is_none() && after.delay_warned.is_some() {
        out.push(Event::new(t, id, What::Warned));
    }
    match (from, to) {
        (_, None) => out.push(Event::new(t, id, What::Done)),
        (f, Some(QueueState::Dead)) if f != QueueState::Dead => out.push(Event {
            text: after.dead_reason.clone(),
            ..Event::new(t, id, What::Dead)
        }),
        (QueueState::Queued, Some(QueueState::Held)) => out.push(Event::new(t, id, What::Held)),
        (QueueState::Held | QueueState::Dead, Some(QueueState::Queued)) => {
            out.push(Event::new(t, id, What::Released));
        }
        _ => {}
    }
    out
}

/// Adds recipient `r` to the event in `out` that says the same as `event` of the same target,
/// or adds `event` for it: one line per kind of news, target and reason.
fn add_recipient(out: &mut Vec<Event>, event: Event, r: &crate::record::Recipient) {
    let via = r.target.to_string();
    let same = |e: &&mut Event| {
        e.what == event.what && e.text == event.text && e.via.as_deref() == Some(&via)
    };
    match out.iter_mut().find(same) {
        Some(e) => e.rcpts.push(r.address.clone()),
        None => out.push(Event {
            rcpts: vec![r.address.clone()],
            via: Some(via),
            ..event
        }),
    }
}

/// What happened to one recipient, and why, if anything an operator would ask about.
fn recipient_change(
    old: &crate::record::Recipient,
    new: &crate::record::Recipient,
) -> Option<(What, Option<String>)> {
    if old.target != new.target {
        let text = match &new.moved {
            Some(Moved::FellBack { back: true, .. }) => {
                format!("from {}, which did not answer", old.target)
            }
            Some(Moved::Returned { .. }) => format!("back from {}, its peer answering", old.target),
            _ => format!("from {}", old.target),
        };
        return Some((What::Moved, Some(text)));
    }
    match (&old.state, &new.state) {
        (a, b) if a == b && old.attempts == new.attempts => None,
        (_, RcptState::InFlight) => Some((What::Sent, None)),
        (_, RcptState::Delivered { .. }) => Some((What::Delivered, None)),
        (_, RcptState::Failed(f)) => {
            Some((What::Failed, Some(format!("{} {}", f.status, f.diagnostic))))
        }
        (_, RcptState::Deferred) => Some((What::Deferred, new.last_error.clone())),
        (RcptState::InFlight, RcptState::Pending) => Some((What::Requeued, None)),
        _ => None,
    }
}

/// The journal file of a spool, appended to by its writers.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    /// The file open for appending, and the appends since it was last checked.
    open: Mutex<(Option<Arc<File>>, u32)>,
    /// A write failed and was reported; reported again only after one succeeds.
    failing: AtomicBool,
}

/// Appends between two looks at the file's size and at whether another process started a
/// new file: a look costs two `stat`s under the lock, and the journal is written several
/// times per message, on the path to the client's "250".
const CHECK_EVERY: u32 = 64;

impl Journal {
    /// The journal of the spool at `root` (the file is opened at the first write).
    pub(crate) fn new(root: &Path) -> Journal {
        Journal {
            path: root.join(FILE),
            open: Mutex::new((None, 0)),
            failing: AtomicBool::new(false),
        }
    }

    /// Appends `events`, one line each, starting a new file first when this one has passed
    /// [`MAX_BYTES`] (looked at every [`CHECK_EVERY`] appends, so it may pass it by a few
    /// kilobytes).
    pub(crate) fn append(&self, events: &[Event]) {
        if events.is_empty() {
            return;
        }
        let mut text = Vec::new();
        for e in events {
            if serde_json::to_writer(&mut text, e).is_ok() {
                text.push(b'\n');
            }
        }
        let result = self.file().and_then(|f| {
            // One write per batch, outside the lock: appends to a file opened with O_APPEND
            // go whole at its end, whichever thread or process makes them.
            (&*f).write_all(&text)
        });
        match result {
            Ok(()) => self.failing.store(false, Ordering::Relaxed),
            Err(e) => {
                self.lock().0 = None;
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(file = %self.path.display(), error = %e, "cannot write the queue's journal; `skywave trace` will miss what happens meanwhile");
                }
            }
        }
    }

    /// The file to append to: the one open, or, at every [`CHECK_EVERY`]th append, a new one
    /// when it has passed [`MAX_BYTES`] or another process (the operator's `skywave queue`)
    /// has started one.
    fn file(&self) -> std::io::Result<Arc<File>> {
        let mut open = self.lock();
        let (file, appends) = &mut *open;
        *appends = appends.wrapping_add(1);
        if let Some(f) = file.as_ref()
            && *appends % CHECK_EVERY != 0
        {
            return Ok(Arc::clone(f));
        }
        let fresh = match (file.as_ref(), std::fs::metadata(&self.path)) {
            (Some(f), Ok(on_disk)) => {
                let held = f.metadata()?;
                held.len() < MAX_BYTES && same_file(&held, &on_disk)
            }
            _ => false,
        };
        if !fresh {
            if std::fs::metadata(&self.path).is_ok_and(|m| m.len() >= MAX_BYTES) {
                std::fs::rename(&self.path, self.path.with_file_name(PREVIOUS))?;
            }
            *file = Some(Arc::new(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)?,
            ));
        }
        file.as_ref()
            .map(Arc::clone)
            .ok_or_else(|| std::io::Error::other("the journal is not open"))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Option<Arc<File>>, u32)> {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether two metadata are of the same file (device and inode).
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// Every event in the journal of the spool at `root`, oldest first (the previous file, then
/// the current one). Lines that do not read as events (a line cut by a crash) are passed over.
pub fn read(root: &Path) -> std::io::Result<Vec<Event>> {
    let mut out = Vec::new();
    for name in [PREVIOUS, FILE] {
        let file = match File::open(root.join(name)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for line in BufReader::new(file).split(b'\n') {
            if let Ok(e) = serde_json::from_slice::<Event>(&line?) {
                out.push(e);
            }
        }
    }
    Ok(out)
}

/// The queue ids of the messages `term` names: a queue id, a `Message-ID` (with or without its
/// angle brackets) or an address (a sender or a recipient, compared without regard to case),
/// and the delivery reports on those messages, in the order they first appear.
pub fn matching(events: &[Event], term: &str) -> Vec<String> {
    let term = unbracketed(term);
    let mut ids: Vec<String> = Vec::new();
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut add = |ids: &mut Vec<String>, id: &str| {
        if seen.insert(id.to_owned()) {
            ids.push(id.to_owned());
        }
    };
    for e in events {
        let named = e.id == term
            || e.message_id
                .as_deref()
                .is_some_and(|m| unbracketed(m) == term)
            || e.from
                .as_deref()
                .is_some_and(|f| f.eq_ignore_ascii_case(term))
            || e.rcpts.iter().any(|r| r.eq_ignore_ascii_case(term));
        if named {
            add(&mut ids, &e.id);
        }
    }
    // The reports on them, named by a `report` event.
    let named: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
    let reports: Vec<String> = events
        .iter()
        .filter(|e| e.what == What::Report && named.contains(e.id.as_str()))
        .filter_map(|e| e.text.as_deref().and_then(report_id).map(str::to_owned))
        .collect();
    for r in reports {
        add(&mut ids, &r);
    }
    ids
}

/// A Message-ID (or a term for one) without its white space and angle brackets.
fn unbracketed(id: &str) -> &str {
    id.trim().trim_start_matches('<').trim_end_matches('>')
}

/// The queue id a `report` event's text names (its last word).
fn report_id(text: &str) -> Option<&str> {
    text.split_whitespace().last()
}

/// The text of a `report` event: which report, queued as which id.
pub(crate) fn report_text(delay: bool, failure: bool, id: &str) -> String {
    let kind = match (delay, failure) {
        (true, _) => "delay warning",
        (false, true) => "failure report",
        (false, false) => "success report",
    };
    format!("{kind} to the sender queued as {id}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::record::{Failure, Recipient, Target};
    use crate::{Priority, QueueId};
    use skywave_smtp::dsn::MailDsn;

    fn envelope() -> Envelope {
        Envelope {
            id: QueueId::parse("006B0E02CD00000000486072").unwrap(),
            arrival: 100,
            sender: "alice@ship.example".into(),
            priority: Priority::NORMAL,
            expires: 1000,
            recipients: vec![
                Recipient::new("a@shore.example", Target::Peer("sat".into())),
                Recipient::new("b@shore.example", Target::Peer("sat".into())),
                Recipient::new("c@ship.example", Target::Lan),
            ],
            delay_warned: None,
            dead_reason: None,
            size: 2000,
            dsn: MailDsn::default(),
        }
    }

    #[test]
    fn a_new_message_is_one_line_per_target_the_first_with_its_sender() {
        let env = envelope();
        let origin = "from 10.1.2.3 (HELO pc) with ESMTP";
        let ev = queued(&env, Some("<1@ship>".into()), Some(origin.into()), false);
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].rcpts, ["a@shore.example", "b@shore.example"]);
        assert_eq!(ev[0].via.as_deref(), Some("peer:sat"));
        assert_eq!(
            (
                ev[0].from.as_deref(),
                ev[0].message_id.as_deref(),
                ev[0].size
            ),
            (Some("alice@ship.example"), Some("<1@ship>"), Some(2000))
        );
        assert_eq!(ev[0].origin.as_deref(), Some(origin));
        assert_eq!(ev[1].rcpts, ["c@ship.example"]);
        assert_eq!(
            (ev[1].from.as_ref(), ev[1].size, ev[1].origin.as_ref()),
            (None, None, None)
        );
        // As a line: only what is said.
        assert_eq!(
            serde_json::to_string(&ev[1]).unwrap(),
            r#"{"t":100,"id":"006B0E02CD00000000486072","what":"queued","rcpts":["c@ship.example"],"via":"lan"}"#
        );
    }

    #[test]
    fn each_change_of_a_recipient_is_said_with_where_and_why() {
        let before = envelope();
        let mut after = before.clone();
        after.recipients[0].state = RcptState::InFlight;
        after.recipients[1].state = RcptState::Deferred;
        after.recipients[1].attempts = 1;
        after.recipients[1].last_error = Some("connection refused".into());
        after.recipients[2].state = RcptState::Failed(Failure {
            status: "5.1.1".into(),
            diagnostic: "no such user".into(),
            at: 7,
        });
        let ev = changes(
            7,
            &before,
            &after,
            QueueState::Queued,
            Some(QueueState::Queued),
        );
        let said: Vec<_> = ev
            .iter()
            .map(|e| (e.what, e.rcpts.clone(), e.via.clone(), e.text.clone()))
            .collect();
        assert_eq!(
            said,
            [
                (
                    What::Sent,
                    vec!["a@shore.example".to_owned()],
                    Some("peer:sat".to_owned()),
                    None
                ),
                (
                    What::Deferred,
                    vec!["b@shore.example".to_owned()],
                    Some("peer:sat".to_owned()),
                    Some("connection refused".to_owned())
                ),
                (
                    What::Failed,
                    vec!["c@ship.example".to_owned()],
                    Some("lan".to_owned()),
                    Some("5.1.1 no such user".to_owned())
                ),
            ]
        );
        // Nothing changed, nothing said; a move says from where.
        assert!(
            changes(
                8,
                &after,
                &after,
                QueueState::Queued,
                Some(QueueState::Queued)
            )
            .is_empty()
        );
        let mut moved = after.clone();
        moved.recipients[1].target = Target::Peer("hf".into());
        moved.recipients[1].moved = Some(Moved::FellBack {
            from: "sat".into(),
            at: 9,
            back: true,
        });
        let ev = changes(
            9,
            &after,
            &moved,
            QueueState::Queued,
            Some(QueueState::Queued),
        );
        assert_eq!(ev.len(), 1);
        assert_eq!(
            (ev[0].what, ev[0].via.as_deref(), ev[0].text.as_deref()),
            (
                What::Moved,
                Some("peer:hf"),
                Some("from peer:sat, which did not answer")
            )
        );
        // The message as a whole: held, released, dead, gone.
        let whole = |from, to| {
            changes(10, &before, &before, from, to)
                .iter()
                .map(|e| e.what)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            whole(QueueState::Queued, Some(QueueState::Held)),
            [What::Held]
        );
        assert_eq!(
            whole(QueueState::Held, Some(QueueState::Queued)),
            [What::Released]
        );
        assert_eq!(whole(QueueState::Queued, None), [What::Done]);
        // The last recipients' outcome is said before the message leaves.
        let mut last = before.clone();
        for r in &mut last.recipients {
            r.state = RcptState::Delivered { at: 10 };
        }
        let ev = changes(10, &before, &last, QueueState::Queued, None);
        assert_eq!(
            ev.iter().map(|e| e.what).collect::<Vec<_>>(),
            [What::Delivered, What::Delivered, What::Done]
        );
        let mut dead = before.clone();
        dead.dead_reason = Some("gave up".into());
        let ev = changes(
            10,
            &before,
            &dead,
            QueueState::Queued,
            Some(QueueState::Dead),
        );
        assert_eq!(
            (ev[0].what, ev[0].text.as_deref()),
            (What::Dead, Some("gave up"))
        );
    }

    #[test]
    fn a_search_finds_a_message_by_its_id_its_message_id_or_an_address_and_its_reports() {
        let env = envelope();
        let mut events = queued(&env, Some("<1@ship>".into()), None, false);
        let other = Event {
            rcpts: vec!["z@else.example".into()],
            from: Some("zed@ship.example".into()),
            ..Event::new(101, "006B0E02CD00000000486073", What::Queued)
        };
        events.push(other);
        events.push(Event {
            text: Some(report_text(false, true, "006B0E02CD00000000486099")),
            ..Event::new(102, env.id.as_str(), What::Report)
        });
        let both = ["006B0E02CD00000000486072", "006B0E02CD00000000486099"];
        assert_eq!(matching(&events, "006B0E02CD00000000486072"), both);
        assert_eq!(matching(&events, "1@ship"), both);
        assert_eq!(matching(&events, "<1@ship>"), both);
        assert_eq!(matching(&events, "Alice@Ship.Example"), both);
        assert_eq!(matching(&events, "C@ship.example"), both);
        assert_eq!(
            matching(&events, "zed@ship.example"),
            ["006B0E02CD00000000486073"]
        );
        assert!(matching(&events, "nobody@nowhere").is_empty());
    }

    #[test]
    fn the_journal_is_read_back_across_a_new_file_and_a_cut_line() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::new(dir.path());
        let a = Event::new(1, "A", What::Queued);
        let b = Event::new(2, "A", What::Done);
        j.append(std::slice::from_ref(&a));
        // Past the bound, the file becomes the previous one and a new one starts.
        let f = OpenOptions::new()
            .append(true)
            .open(dir.path().join(FILE))
            .unwrap();
        f.set_len(MAX_BYTES).unwrap();
        drop(f);
        // It is looked at every CHECK_EVERY appends.
        for _ in 0..CHECK_EVERY {
            j.append(std::slice::from_ref(&b));
        }
        assert!(dir.path().join(PREVIOUS).exists());
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(FILE))
            .unwrap()
            .write_all(b"{\"t\":3,\"id\"")
            .unwrap();
        let back = read(dir.path()).unwrap();
        assert_eq!(back.first(), Some(&a));
        assert_eq!(back.last(), Some(&b));
    }
}
