//! The queue on disk: layout, durable writes, state changes, scheduling, recovery and listing.
//!
//! # Layout
//!
//! ```text
//! <state dir>/
//!   tmp/            files being written; anything here at start-up is garbage and removed
//!   queue/<id>      live messages (Postfix's incoming + active + deferred in one directory)
//!   hold/<id>       messages held by the operator: never due until released
//!   dead/<id>       dead letters (too many attempts, or a file that does not decode)
//!   held-targets/   one empty marker file per held peer (or "lan"): that target is never due
//!   spool.lock      advisory lock taken around every read-modify-write of a queue file
//!   owner.lock      held for its lifetime by the one process that owns the spool (the gateway)
//!   nudge           rewritten by an operator's change (`skywave queue`), so the running gateway
//!                   looks at the queue at once instead of at its next timer
//!   journal.jsonl   what happened to each message, for `skywave queue trace` (a record, not
//!                   state: see [`crate::journal`]); journal.jsonl.1 the file before it
//! ```
//!
//! Postfix moves a message between `incoming`, `active` and `deferred`. Here the status is per
//! recipient (a message may be due for the LAN and deferred for an HF peer at the same time), so
//! the file's content says what is due and one `queue/` directory holds all live messages. The
//! directories that remain are the ones an operator acts on: hold and dead.
//!
//! # Durability
//!
//! A new file is written under `tmp/`, `sync_all`ed, renamed to its place, and the directory is
//! fsynced (a rename is atomic but only durable once its directory is synced). A status update
//! writes a complete new file the same way and renames it over the old one, so a reader or a
//! crash sees either the old file or the new one, never a mix. A move between directories is one
//! `rename` followed by syncing both directories. [`Spool::enqueue`] returns only after all of
//! that: the SMTP server may then say 250.
//!
//! When a change needs two steps (turning a message into a dead letter, or reviving one), the
//! file's content changes first and the move follows; start-up recovery finishes a move that a
//! crash interrupted, because the content says where the file belongs.
//!
//! # Sharing the spool between processes
//!
//! The gateway opens the spool with [`Spool::open`]: it takes `owner.lock` (a second gateway on
//! the same directory gets [`Error::Busy`]) and runs recovery. The admin CLI opens it with
//! [`Spool::open_admin`], running or not. Every read-modify-write of a queue file, by either
//! process, happens under an exclusive advisory lock on `spool.lock` (`flock`), held only for that
//! one change, so the CLI holding a message cannot be undone by the gateway writing a status
//! update it had read before. Readers (`list`, `show`, `due`) take no lock: files change only by
//! atomic rename, so every file they open is complete; a file that vanishes while they look is
//! searched for in the other directories or skipped. The gateway caches decoded envelopes keyed
//! by the file's inode, size and mtime, so changes made by the CLI are seen on the next scan.
//!
//! The spool never reads the clock: every operation that needs the time takes `now` in unix
//! seconds, except that the journal dates what an operator or a start-up does (hold, release,
//! flush, delete, recovery) by the wall clock, no caller's time being at hand.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::dsn::{Delay, DsnRecipient, DsnRequest, Returned, build_dsn};
use crate::expiry::message_expiry;
use crate::id::{InvalidQueueId, QueueId};
use crate::priority::Priority;
use crate::record::{
    DecodeError, EncodeError, Envelope, Failure, MAX_BODY, MAX_TEXT, Moved, QueueFile, RcptState,
    Recipient, Success, Target, decode, encode,
};
use crate::room::{Room, Space, available_space};
use skywave_smtp::dsn::{MailDsn, RcptDsn, Ret};

const TMP: &str = "tmp";
const QUEUE: &str = "queue";
const HOLD: &str = "hold";
const DEAD: &str = "dead";
const HELD_TARGETS: &str = "held-targets";
const LOCK_FILE: &str = "spool.lock";
const OWNER_FILE: &str = "owner.lock";
const NUDGE_FILE: &str = "nudge";
/// Largest file the spool reads: the largest body plus generous room for the envelope.
const MAX_FILE: u64 = MAX_BODY as u64 + 64 * 1024 * 1024;
/// Longest marker file name in `held-targets/` (peer names up to 100 bytes; file names are
/// limited to 255 bytes, and the temporary name adds a suffix).
const MAX_MARKER_NAME: usize = 205;
/// Longest error text kept per recipient (longer texts are cut, on a character boundary).
const MAX_ERROR_TEXT: usize = 1000;

/// Converts a `SystemTime` into the unix seconds the spool's API takes.
pub fn unix_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Which directory a message is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueueState {
    /// In `queue/`: live, due according to its recipients' status.
    Queued,
    /// In `hold/`: held by the operator.
    Held,
    /// In `dead/`: a dead letter, kept for the operator.
    Dead,
}

impl QueueState {
    fn dir(self) -> &'static str {
        match self {
            QueueState::Queued => QUEUE,
            QueueState::Held => HOLD,
            QueueState::Dead => DEAD,
        }
    }

    /// A short name for listings.
    pub fn name(self) -> &'static str {
        match self {
            QueueState::Queued => "queued",
            QueueState::Held => "held",
            QueueState::Dead => "dead",
        }
    }

    const ALL: [QueueState; 3] = [QueueState::Queued, QueueState::Held, QueueState::Dead];
}

/// Errors of spool operations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file system operation failed.
    #[error("spool I/O error: {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Another gateway process owns this spool.
    #[error("the spool at {0} is owned by another running gateway (owner.lock is locked)")]
    Busy(PathBuf),
    /// The directory is not a spool (for admin access, which never creates one).
    #[error("{0} is not a skywave spool directory (its queue/ subdirectory is missing)")]
    NotASpool(PathBuf),
    /// No message with this id.
    #[error("no message {0} in the spool")]
    NotFound(QueueId),
    /// The id given is not a queue id.
    #[error(transparent)]
    InvalidId(#[from] InvalidQueueId),
    /// A queue file does not decode; it has been moved to `dead/` if it was elsewhere.
    #[error("queue file {path} is corrupt: {source}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: DecodeError,
    },
    /// The message cannot be stored (a field or the body is too large).
    #[error("cannot store message: {0}")]
    Encode(#[from] EncodeError),
    /// A message without recipients was offered.
    #[error("a message needs at least one recipient")]
    NoRecipients,
    /// The operation does not apply to the message in its present state.
    #[error("message {id} is {state}: cannot {op}")]
    WrongState {
        /// The message.
        id: QueueId,
        /// Its state, described.
        state: String,
        /// The refused operation.
        op: &'static str,
    },
    /// A peer name too long to be held (more than 100 bytes).
    #[error("peer name {0:?} is too long to hold the peer (at most 100 bytes)")]
    TargetNameTooLong(String),
    /// A crash simulated by the crash-safety tests (never produced otherwise).
    #[error("simulated crash before step {0:?}")]
    SimulatedCrash(&'static str),
}

/// Short alias for spool results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io { op, path, source }
}

/// The default of [`SpoolConfig::min_free_space`]: 100 MB, ten of the gateway's default largest
/// messages, and far more than the status rewrites of a full queue take.
pub const DEFAULT_MIN_FREE_SPACE: u64 = 100_000_000;

/// The default of [`SpoolConfig::delay_warning`]: 4 hours, sendmail's `Timeout.queuewarn`. Long
/// enough that a ship's ordinary wait for its next session says nothing; short enough that a
/// sender hears of an outage the same watch.
pub const DEFAULT_DELAY_WARNING: u64 = 4 * 3600;

/// The default of [`SpoolConfig::return_full_limit`]: 10 kB, a fifth of Postfix's
/// `bounce_size_limit`, because the returned message crosses the air a second time (some
/// 30 s at 1200 bit/s once compressed).
pub const DEFAULT_RETURN_FULL_LIMIT: u64 = 10_000;

/// Spool settings.
#[derive(Clone, Debug)]
pub struct SpoolConfig {
    /// First retry delay after a temporary failure, seconds (Postfix `minimal_backoff_time`: 300).
    pub min_backoff: u64,
    /// Longest retry delay, seconds (Postfix `maximal_backoff_time`: 4000). Delays double from
    /// `min_backoff` up to this.
    pub max_backoff: u64,
    /// How long a message may stay queued before its remaining recipients fail with a DSN,
    /// seconds (Postfix `maximal_queue_lifetime`: 5 days).
    pub max_lifetime: u64,
    /// After this many attempts for one recipient the message becomes a dead letter instead of
    /// being retried again. The default, 200, lies beyond what the default backoff allows in
    /// 5 days, so normally expiry (with a DSN) comes first; attempts forced by links coming back
    /// count too, and this bounds them.
    pub max_attempts: u32,
    /// This gateway's host name, for DSNs.
    pub reporting_mta: String,
    /// Sync files and directories (on by default). Turning it off keeps the same atomic renames
    /// but loses durability on power failure: only for simulations and benchmarks in virtual time.
    pub durable: bool,
    /// The salt of new queue ids. `None` (the default): drawn afresh at every open, so ids stay
    /// unique across restarts in the same second. A fixed salt is for simulations that must
    /// repeat byte for byte (the ids travel in `Received:` headers).
    pub id_salt: Option<u32>,
    /// Bytes of free space new mail must leave on the spool's file system ([`Spool::admit`],
    /// [`crate::room`]). 0: new mail may fill the disk.
    pub min_free_space: u64,
    /// How free space is measured: [`crate::room::available_space`] (`statvfs`) unless a test
    /// needs a disk it can fill at will.
    pub free_space: fn(&Path) -> io::Result<Space>,
    /// After this many seconds in the queue a message's sender is told, once, that it is still
    /// waiting ([`Spool::warn_delayed`]; sendmail's `Timeout.queuewarn`, Postfix's
    /// `delay_warning_time`). `None`: never.
    pub delay_warning: Option<u64>,
    /// The largest message a failure report returns whole, in bytes, when its sender asked
    /// `RET=FULL` (Postfix's `bounce_size_limit`); a larger one, and every other report, returns
    /// the header block only. 0: never the whole message.
    pub return_full_limit: u64,
}

impl Default for SpoolConfig {
    fn default() -> Self {
        SpoolConfig {
            min_backoff: 300,
            max_backoff: 4000,
            max_lifetime: 5 * 86_400,
            max_attempts: 200,
            delay_warning: Some(DEFAULT_DELAY_WARNING),
            return_full_limit: DEFAULT_RETURN_FULL_LIMIT,
            reporting_mta: "localhost".into(),
            durable: true,
            id_salt: None,
            min_free_space: DEFAULT_MIN_FREE_SPACE,
            free_space: available_space,
        }
    }
}

impl SpoolConfig {
    /// The retry delay after the `attempts`-th attempt (1 = first): `min_backoff` doubled for each
    /// further attempt, at most `max_backoff`.
    pub fn backoff(&self, attempts: u32) -> u64 {
        let doublings = attempts.saturating_sub(1).min(63);
        self.min_backoff
            .saturating_mul(1u64 << doublings)
            .min(self.max_backoff.max(self.min_backoff))
    }
}

/// A message offered to the spool.
#[derive(Clone, Debug)]
pub struct NewMessage<'a> {
    /// MAIL FROM reverse path without brackets; empty for the null reverse path.
    pub sender: String,
    /// Recipients with the target the routing table chose for each.
    pub recipients: Vec<(String, Target)>,
    /// The message's priority (see [`Priority::resolve`]).
    pub priority: Priority,
    /// The message bytes (RFC 5322, CRLF lines, not dot-stuffed).
    pub message: &'a [u8],
    /// What its sender asked of reports (RFC 3461 `RET`, `ENVID`).
    pub dsn: MailDsn,
    /// What its sender asked of reports on each recipient that asked anything (`NOTIFY`,
    /// `ORCPT`), by address; a recipient not listed asked nothing.
    pub rcpt_dsn: Vec<(String, RcptDsn)>,
    /// Where it came from, in words, for the journal only (`from 10.1.2.3 (HELO pc) with
    /// ESMTPA as alice`); `None` for what the gateway makes itself, a delivery report.
    pub origin: Option<String>,
}

/// Which waiting recipients a peer's fallback takes ([`Spool::fall_back`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FallBack {
    /// Those that have waited for the peer since this unix second or before.
    pub waited_since: u64,
    /// Also those the peer was tried for at least once, whatever their wait: the peer has not
    /// answered for as long as its fallback waits.
    pub tried: bool,
    /// They go back to the peer when it answers again: it did not answer the last time.
    pub back: bool,
    /// Only messages of at most this many bytes (what the fallback peer takes).
    pub max_size: u64,
    /// Now (unix seconds), recorded with each move.
    pub now: u64,
}

/// What weighs a message as a fallback's links send it ([`Spool::fall_back_weighed`]); `None`:
/// as it came.
type Weigher<'a> = Option<&'a dyn Fn(&[u8]) -> u64>;

/// A message due for a target, as returned by [`Spool::due`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DueMessage {
    /// Queue id.
    pub id: QueueId,
    /// Priority.
    pub priority: Priority,
    /// Arrival time (unix seconds).
    pub arrival: u64,
    /// Message size in bytes.
    pub size: u64,
    /// MAIL FROM of the message (empty for a bounce).
    pub sender: String,
    /// The recipients due for this target.
    pub recipients: Vec<String>,
    /// What its sender asked of reports (`RET`, `ENVID`), to pass on to a next hop.
    pub dsn: MailDsn,
    /// Each due recipient's `NOTIFY` and `ORCPT`, in the order of `recipients`.
    pub rcpt_dsn: Vec<RcptDsn>,
}

/// How the next hop took a message (RFC 3461 section 6.2): whether success reports are
/// this gateway's to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handoff {
    /// Delivered here for good (a Maildir): `delivered`.
    Final,
    /// Taken by a next hop that was not given the DSN parameters (it does not offer DSN, or
    /// the bearer cannot carry them): `relayed`.
    Relayed,
    /// Taken by a next hop that was given the DSN parameters: it reports, not this gateway.
    Passed,
}

impl Handoff {
    /// Taken by a next hop, which was given the DSN parameters or not.
    pub fn onward(parameters_given: bool) -> Handoff {
        if parameters_given {
            Handoff::Passed
        } else {
            Handoff::Relayed
        }
    }
}

/// The DSN [`Spool::bounce`] queued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedReport {
    /// Its queue id.
    pub dsn: QueueId,
    /// It tells of a failure (a bounce), not of deliveries only.
    pub failure: bool,
}

/// What became of a message after a status change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Some recipients still wait for delivery.
    Queued,
    /// Every recipient is delivered or failed, and no DSN is needed (the sender is null, or
    /// asked for none, [`Envelope::needs_report`]): the message has left the spool.
    Done,
    /// Every recipient is final and its sender is to get a report: some failed, or were
    /// delivered and the sender asked to hear so. The message stays until [`Spool::bounce`]
    /// has queued its DSN. [`Spool::pending_bounces`] lists such messages after a restart.
    NeedsBounce,
    /// The message became a dead letter, for this reason.
    Dead(String),
}

/// What start-up recovery found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Incomplete files removed from `tmp/`.
    pub removed_tmp: usize,
    /// Messages whose in-flight recipients were made pending again.
    pub requeued_in_flight: Vec<QueueId>,
    /// Files moved to `dead/`, with the reason.
    pub moved_to_dead: Vec<(String, String)>,
    /// Messages whose interrupted move (to or from `dead/`) was completed.
    pub finished_moves: Vec<QueueId>,
    /// Complete messages without failures that a crash left behind, now removed.
    pub removed_complete: Vec<QueueId>,
    /// Messages waiting for their DSN to be queued (see [`Spool::bounce`]).
    pub pending_bounces: Vec<QueueId>,
}

/// One message in a listing.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The file name: the queue id for every file the spool wrote.
    pub name: String,
    /// Which directory it is in.
    pub state: QueueState,
    /// The envelope, if the file decodes.
    pub envelope: Option<Arc<Envelope>>,
    /// Why it is dead, or what is wrong with a file that does not decode.
    pub problem: Option<String>,
    /// Size of the queue file in bytes.
    pub file_size: u64,
}

/// What a state-change closure asks the spool to do with the file.
enum Change {
    Nothing,
    Rewrite,
    Move(QueueState),
    RewriteThenMove(QueueState),
    Remove,
}

impl Change {
    /// The queue state of a file in `state` after this change (`None`: removed).
    fn state_after(&self, state: QueueState) -> Option<QueueState> {
        match self {
            Change::Nothing | Change::Rewrite => Some(state),
            Change::Move(to) | Change::RewriteThenMove(to) => Some(*to),
            Change::Remove => None,
        }
    }
}

/// A [`Change`] ready to apply: a rewrite's new version is already written and synced under
/// `tmp/` (then maybe moved to another state).
enum Staged {
    Nothing,
    Rewrite(PathBuf, Option<QueueState>),
    Move(QueueState),
    Remove,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Stamp {
    fn of(m: &fs::Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: m.mtime(),
            mtime_nsec: m.mtime_nsec(),
        }
    }
}

/// A file that could not be read or decoded, and why.
type Unreadable = (PathBuf, String);

type EnvelopeCache = HashMap<(QueueState, String), (Stamp, Arc<Envelope>)>;

/// The durable store-and-forward queue. Synchronous: the async gateway calls it from
/// `spawn_blocking`. Shareable between threads (`Arc<Spool>`).
pub struct Spool {
    root: PathBuf,
    config: SpoolConfig,
    lock_file: Mutex<File>,
    _owner: Option<File>,
    cache: Mutex<EnvelopeCache>,
    link_up: Mutex<HashMap<Target, u64>>,
    counter: AtomicU64,
    tmp_counter: AtomicU64,
    /// Directory fsyncs shared between concurrent writers (group commit).
    dir_sync: crate::DirSync,
    salt: u32,
    /// Crash simulation for tests: steps left before the simulated crash (`u64::MAX`: off).
    crash_countdown: AtomicU64,
    crashed: AtomicBool,
    /// At the last look the reserve itself was touched: no new mail at all ([`Spool::admit`]
    /// logs the change, not every refusal).
    short: AtomicBool,
    /// The last measurement of free space failed (logged once until one succeeds).
    unmeasured: AtomicBool,
    /// What happens to each message, for the operator ([`crate::journal`]).
    journal: crate::journal::Journal,
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spool")
            .field("root", &self.root)
            .field("owner", &self._owner.is_some())
            .finish()
    }
}

/// Holds `spool.lock` (and the in-process mutex guarding the shared handle) until dropped.
struct LockGuard<'a> {
    file: MutexGuard<'a, File>,
}

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        // Unlocking only fails on a bad descriptor; closing at exit releases it anyway.
        let _ = self.file.unlock();
    }
}

fn random_salt() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish() as u32
}

/// The RFC 3463 status a delay warning gives `r`: the enhanced code of its last temporary
/// reply when that carried one (`421 4.3.2 ...`), else "no answer from host" (4.4.1) once it was
/// tried, else "other network or routing status" (4.4.0): it waits for its link.
fn delay_status(r: &Recipient) -> String {
    let coded = r.last_error.as_deref().and_then(|e| {
        let mut words = e.split_whitespace();
        let code = words.next()?;
        let enhanced = crate::dsn::valid_status(words.next()?)?;
        (code.len() == 3 && code.starts_with('4') && enhanced.starts_with('4'))
            .then(|| enhanced.to_owned())
    });
    coded.unwrap_or_else(|| if r.attempts > 0 { "4.4.1" } else { "4.4.0" }.to_owned())
}

/// What a delay warning says `r` waits for: its copy on its way (a session or a multicast
/// whose answer has not come), its last temporary error, or its link.
fn delay_diagnostic(r: &Recipient) -> String {
    let link = match &r.target {
        Target::Lan => "delivery on this gateway's LAN".to_owned(),
        Target::Peer(p) => format!("the radio link to {p}"),
    };
    match (&r.state, &r.last_error) {
        (RcptState::InFlight, _) => match &r.target {
            Target::Lan => "being delivered on this gateway's LAN".to_owned(),
            Target::Peer(p) => format!("sent; {p} has not yet confirmed it"),
        },
        (_, Some(e)) => e.clone(),
        (_, None) => format!("not yet tried: waiting for {link}"),
    }
}

fn truncate_text(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

fn target_marker(target: &Target) -> String {
    match target {
        Target::Lan => "lan".to_owned(),
        Target::Peer(name) => {
            let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
            format!("peer-{hex}")
        }
    }
}

fn marker_target(name: &str) -> Option<Target> {
    if name == "lan" {
        return Some(Target::Lan);
    }
    let hex = name.strip_prefix("peer-")?;
    if hex.len() % 2 != 0 || hex.len() > 2 * MAX_TEXT {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok().map(Target::Peer)
}

impl Spool {
    /// Opens (creating if needed) the spool under `root` as its owner, the gateway: takes
    /// `owner.lock` and runs start-up recovery.
    pub fn open(root: impl Into<PathBuf>, config: SpoolConfig) -> Result<(Spool, RecoveryReport)> {
        let root = root.into();
        for d in [TMP, QUEUE, HOLD, DEAD, HELD_TARGETS] {
            let p = root.join(d);
            fs::create_dir_all(&p).map_err(io_err("create directory", &p))?;
        }
        if config.durable {
            sync_dir(&root)?;
        }
        let owner_path = root.join(OWNER_FILE);
        let owner = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&owner_path)
            .map_err(io_err("open", &owner_path))?;
        match owner.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Err(Error::Busy(root)),
            Err(fs::TryLockError::Error(e)) => return Err(io_err("lock", &owner_path)(e)),
        }
        let spool = Spool::new(root, config, Some(owner))?;
        let report = spool.recover()?;
        Ok((spool, report))
    }

    /// Opens an existing spool for the admin CLI, whether the gateway runs or not. Runs no
    /// recovery (the gateway does that when it starts) and never creates the spool.
    pub fn open_admin(root: impl Into<PathBuf>, config: SpoolConfig) -> Result<Spool> {
        let root = root.into();
        if !root.join(QUEUE).is_dir() {
            return Err(Error::NotASpool(root));
        }
        Spool::new(root, config, None)
    }

    fn new(root: PathBuf, config: SpoolConfig, owner: Option<File>) -> Result<Spool> {
        let lock_path = root.join(LOCK_FILE);
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_err("open", &lock_path))?;
        let salt = config.id_salt.unwrap_or_else(random_salt);
        Ok(Spool {
            journal: crate::journal::Journal::new(&root),
            root,
            config,
            lock_file: Mutex::new(lock_file),
            _owner: owner,
            cache: Mutex::new(HashMap::new()),
            link_up: Mutex::new(HashMap::new()),
            counter: AtomicU64::new(0),
            tmp_counter: AtomicU64::new(0),
            dir_sync: crate::DirSync::new(),
            salt,
            crash_countdown: AtomicU64::new(u64::MAX),
            crashed: AtomicBool::new(false),
            short: AtomicBool::new(false),
            unmeasured: AtomicBool::new(false),
        })
    }

    /// The free space of the spool's file system against the reserve new mail must leave.
    pub fn room(&self) -> Result<Room> {
        let space = (self.config.free_space)(&self.root).map_err(io_err("statvfs", &self.root))?;
        Ok(Room {
            space,
            reserve: self.config.min_free_space,
        })
    }

    /// Whether a new message of `incoming` bytes may come in: `Err` with the room there is
    /// when it would leave less than the reserve, and new mail is then to be refused with a
    /// temporary failure. Mail already queued is never held back by this. A file system that
    /// cannot be measured takes the mail (refusing would stop the gateway for a measurement),
    /// with one warning in the log until a measurement succeeds. The log warns when the
    /// reserve is first touched (no new mail at all) and when there is room again.
    pub fn admit(&self, incoming: u64) -> Result<(), Room> {
        let room = match self.room() {
            Ok(room) => {
                self.unmeasured.store(false, Ordering::Relaxed);
                room
            }
            Err(e) => {
                if !self.unmeasured.swap(true, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "cannot measure the spool's free space; new mail is taken without the reserve check");
                }
                return Ok(());
            }
        };
        // The state logged is the reserve's own (no new mail at all); one large message that
        // does not fit while small ones do is the client's business, told in its reply.
        let exhausted = room.exhausted();
        let was_exhausted = self.short.swap(exhausted, Ordering::Relaxed);
        if exhausted && !was_exhausted {
            tracing::warn!(%room, "the spool's file system is short of space: new mail is refused (452 4.3.1) until space is freed; queued mail keeps moving");
        } else if !exhausted && was_exhausted {
            tracing::warn!(%room, "the spool's file system has room again: new mail is taken");
        }
        if room.takes(incoming) {
            Ok(())
        } else {
            if !exhausted {
                tracing::info!(%room, incoming, "a message refused (452 4.3.1): it would take the spool's reserve");
            }
            Err(room)
        }
    }

    /// The spool's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The settings in force.
    pub fn config(&self) -> &SpoolConfig {
        &self.config
    }

    /// True when a gateway process other than this handle owns the spool (admin handles use this
    /// to tell the operator whether the gateway is running).
    pub fn owned_elsewhere(&self) -> Result<bool> {
        if self._owner.is_some() {
            return Ok(false);
        }
        let p = self.root.join(OWNER_FILE);
        let f = match File::open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_err("open", &p)(e)),
        };
        match f.try_lock_shared() {
            Ok(()) => {
                let _ = f.unlock();
                Ok(false)
            }
            Err(fs::TryLockError::WouldBlock) => Ok(true),
            Err(fs::TryLockError::Error(e)) => Err(io_err("lock", &p)(e)),
        }
    }

    // ---- crash simulation -------------------------------------------------------------------

    /// Arms the crash simulation: the `steps`-th durable step from now fails, and so does every
    /// step after it, as if the process had died there.
    #[cfg(test)]
    pub(crate) fn crash_after(&self, steps: u64) {
        self.crash_countdown.store(steps, Ordering::SeqCst);
    }

    fn step(&self, name: &'static str) -> Result<()> {
        if self.crashed.load(Ordering::SeqCst) {
            return Err(Error::SimulatedCrash(name));
        }
        let before = self
            .crash_countdown
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
                u64::MAX | 0 => None,
                n => Some(n - 1),
            });
        if before == Ok(1) {
            self.crashed.store(true, Ordering::SeqCst);
            return Err(Error::SimulatedCrash(name));
        }
        Ok(())
    }

    fn alive(&self) -> bool {
        !self.crashed.load(Ordering::SeqCst)
    }

    // ---- low-level durable file operations --------------------------------------------------

    fn dir(&self, state: QueueState) -> PathBuf {
        self.root.join(state.dir())
    }

    fn lock(&self) -> Result<LockGuard<'_>> {
        let file = self.lock_file.lock().unwrap_or_else(|e| e.into_inner());
        file.lock()
            .map_err(io_err("lock", &self.root.join(LOCK_FILE)))?;
        Ok(LockGuard { file })
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        if self.config.durable {
            self.dir_sync
                .sync(dir)
                .map_err(io_err("sync directory", dir))
        } else {
            Ok(())
        }
    }

    /// Writes `bytes` to `dir/name` atomically and durably (tmp file, sync, rename, dir sync).
    fn write_file(&self, dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
        let tmp = self.tmp_path(name);
        let result = self.write_file_via(&tmp, dir, name, bytes);
        if result.is_err() && self.alive() {
            // An ordinary error (disk full...): clean up. After a simulated crash nothing runs.
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    fn write_file_via(&self, tmp: &Path, dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
        self.stage(tmp, bytes)?;
        self.place(tmp, dir, name)
    }

    /// The first half of a durable write: `bytes` in a new file at `tmp`, synced.
    fn stage(&self, tmp: &Path, bytes: &[u8]) -> Result<()> {
        self.step("create tmp")?;
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(tmp)
            .map_err(io_err("create", tmp))?;
        if let Err(e) = self.step("write") {
            // The crash happens half-way through the write.
            let _ = f.write_all(&bytes[..bytes.len() / 2]);
            return Err(e);
        }
        f.write_all(bytes).map_err(io_err("write", tmp))?;
        self.step("sync file")?;
        if self.config.durable {
            f.sync_all().map_err(io_err("sync", tmp))?;
        }
        Ok(())
    }

    /// The second half: the staged file renamed over `dir/name`, and `dir` synced.
    fn place(&self, tmp: &Path, dir: &Path, name: &str) -> Result<()> {
        self.place_unsynced(tmp, dir, name)?;
        self.sync_dirs(&[dir.to_path_buf()])
    }

    /// [`Spool::place`] without the directory sync, for callers that sync after releasing
    /// the lock ([`Spool::sync_dirs`]).
    fn place_unsynced(&self, tmp: &Path, dir: &Path, name: &str) -> Result<()> {
        self.step("rename into place")?;
        let dest = dir.join(name);
        fs::rename(tmp, &dest).map_err(io_err("rename into", &dest))
    }

    /// Syncs directories whose entries changed. Called outside the spool lock where it can be:
    /// the lock orders the renames, and the syncs of concurrent changes then share one fsync
    /// per directory ([`crate::DirSync`]) instead of queueing behind the lock one by one.
    fn sync_dirs(&self, dirs: &[PathBuf]) -> Result<()> {
        for d in dirs {
            self.step("sync directory")?;
            self.sync_dir(d)?;
        }
        Ok(())
    }

    /// A fresh name under `tmp/` for a new version of `name`.
    fn tmp_path(&self, name: &str) -> PathBuf {
        let n = self.tmp_counter.fetch_add(1, Ordering::Relaxed);
        self.root
            .join(TMP)
            .join(format!("{name}.{}.{n}.tmp", std::process::id()))
    }

    fn move_file(&self, name: &str, from: QueueState, to: QueueState) -> Result<()> {
        let dirs = self.move_unsynced(name, from, to)?;
        self.sync_dirs(&dirs)
    }

    /// Moves a file between state directories; returns the directories to sync, destination
    /// first (the file must be durable in its new place before it is gone from the old).
    fn move_unsynced(&self, name: &str, from: QueueState, to: QueueState) -> Result<[PathBuf; 2]> {
        let (src, dst) = (self.dir(from), self.dir(to));
        self.step("rename between directories")?;
        let dst_path = dst.join(name);
        fs::rename(src.join(name), &dst_path).map_err(io_err("move to", &dst_path))?;
        Ok([dst, src])
    }

    fn remove(&self, state: QueueState, name: &str) -> Result<()> {
        let dir = self.remove_unsynced(state, name)?;
        self.sync_dirs(&[dir])
    }

    /// Removes a file; returns its directory, to sync.
    fn remove_unsynced(&self, state: QueueState, name: &str) -> Result<PathBuf> {
        let dir = self.dir(state);
        self.step("remove")?;
        let p = dir.join(name);
        fs::remove_file(&p).map_err(io_err("remove", &p))?;
        Ok(dir)
    }

    fn read_bounded(path: &Path) -> io::Result<Vec<u8>> {
        let len = fs::metadata(path)?.len();
        if len > MAX_FILE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("file of {len} bytes is too large"),
            ));
        }
        fs::read(path)
    }

    /// Finds a message: which directory it is in.
    fn locate(&self, name: &str) -> Option<QueueState> {
        QueueState::ALL
            .into_iter()
            .find(|s| self.dir(*s).join(name).is_file())
    }

    fn names(&self, state: QueueState) -> Result<Vec<String>> {
        let dir = self.dir(state);
        let mut out = Vec::new();
        for entry in fs::read_dir(&dir).map_err(io_err("list", &dir))? {
            let entry = entry.map_err(io_err("list", &dir))?;
            if let Some(name) = entry.file_name().to_str() {
                out.push(name.to_owned());
            } else {
                tracing::warn!(dir = %dir.display(), "ignoring a file whose name is not UTF-8");
            }
        }
        out.sort();
        Ok(out)
    }

    // ---- enqueue ----------------------------------------------------------------------------

    /// Stores a new message durably and returns its id. When this returns `Ok`, the message is
    /// on disk (file and directory synced): the SMTP server may accept it.
    pub fn enqueue(&self, msg: &NewMessage<'_>, now: u64) -> Result<QueueId> {
        self.enqueue_with_header(msg, now, |_| String::new())
    }

    /// Like [`Spool::enqueue`], with a header line built from the id the message gets and put
    /// in front of the message: the `Received:` header names the queue id, which exists only
    /// once the spool has chosen it.
    pub fn enqueue_with_header(
        &self,
        msg: &NewMessage<'_>,
        now: u64,
        header: impl FnOnce(&QueueId) -> String,
    ) -> Result<QueueId> {
        self.enqueue_into(msg, now, header, None)
    }

    /// Like [`Spool::enqueue_with_header`], but the message is held from the start, until an
    /// operator releases it ([`Spool::release`]): `why` is each recipient's last error, which
    /// `skywave queue show` and the sender's notice ([`Spool::warn_now`]) give.
    pub fn enqueue_held_with_header(
        &self,
        msg: &NewMessage<'_>,
        now: u64,
        header: impl FnOnce(&QueueId) -> String,
        why: &str,
    ) -> Result<QueueId> {
        self.enqueue_into(msg, now, header, Some(why))
    }

    fn enqueue_into(
        &self,
        msg: &NewMessage<'_>,
        now: u64,
        header: impl FnOnce(&QueueId) -> String,
        held: Option<&str>,
    ) -> Result<QueueId> {
        if msg.recipients.is_empty() {
            return Err(Error::NoRecipients);
        }
        let queue = self.dir(match held {
            None => QueueState::Queued,
            Some(_) => QueueState::Held,
        });
        // A fresh id; bounded retries in the (practically impossible) case of a clash.
        let mut id = None;
        for _ in 0..16 {
            let n = self.counter.fetch_add(1, Ordering::Relaxed);
            let candidate = QueueId::generate(now, n, self.salt);
            if self.locate(candidate.as_str()).is_none() {
                id = Some(candidate);
                break;
            }
        }
        let id = id.ok_or_else(|| Error::Io {
            op: "choose a queue id in",
            path: queue.clone(),
            source: io::Error::new(io::ErrorKind::AlreadyExists, "every candidate id is taken"),
        })?;
        let mut message = header(&id).into_bytes();
        message.extend_from_slice(msg.message);
        let file = QueueFile {
            envelope: Envelope {
                id: id.clone(),
                arrival: now,
                sender: msg.sender.clone(),
                priority: msg.priority,
                // The message's own expiry, if it states an earlier one (crate::expiry).
                expires: now
                    .saturating_add(self.config.max_lifetime)
                    .min(message_expiry(&message).unwrap_or(u64::MAX)),
                recipients: msg
                    .recipients
                    .iter()
                    .map(|(a, t)| Recipient {
                        last_error: held.map(|w| truncate_text(w, MAX_ERROR_TEXT)),
                        dsn: msg
                            .rcpt_dsn
                            .iter()
                            .find(|(r, _)| r == a)
                            .map(|(_, d)| d.clone())
                            .unwrap_or_default(),
                        ..Recipient::new(a.clone(), t.clone())
                    })
                    .collect(),
                delay_warned: None,
                dead_reason: None,
                size: message.len() as u64,
                dsn: msg.dsn.clone(),
            },
            message,
        };
        let bytes = encode(&file)?;
        self.write_file(&queue, id.as_str(), &bytes)?;
        tracing::debug!(queue_id = %id, size = file.envelope.size, rcpts = msg.recipients.len(), held = held.is_some(), "queued");
        self.journal.append(&crate::journal::queued(
            &file.envelope,
            crate::priority::header_value(&file.message, "Message-ID"),
            msg.origin.clone(),
            held.is_some(),
        ));
        Ok(id)
    }

    // ---- reading ----------------------------------------------------------------------------

    /// Reads and decodes a whole message (to send it, or for `queue show`).
    pub fn load(&self, id: &QueueId) -> Result<(QueueState, QueueFile)> {
        // A file may move between our look-up and our read: retry a few times.
        for _ in 0..4 {
            let Some(state) = self.locate(id.as_str()) else {
                break;
            };
            let path = self.dir(state).join(id.as_str());
            match Self::read_bounded(&path) {
                Ok(bytes) => {
                    let file = decode(&bytes).map_err(|source| Error::Corrupt { path, source })?;
                    return Ok((state, file));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err("read", &path)(e)),
            }
        }
        Err(Error::NotFound(id.clone()))
    }

    /// Reads the envelope of `dir/name`, from the cache if the file has not changed.
    /// `Ok(None)`: the file has gone.
    fn envelope(
        &self,
        state: QueueState,
        name: &str,
    ) -> Result<Option<(Arc<Envelope>, u64)>, Unreadable> {
        let path = self.dir(state).join(name);
        let meta = match fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err((path, e.to_string())),
        };
        let stamp = Stamp::of(&meta);
        let key = (state, name.to_owned());
        if let Some((s, env)) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            && *s == stamp
        {
            return Ok(Some((env.clone(), meta.len())));
        }
        let bytes = match Self::read_bounded(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err((path, e.to_string())),
        };
        let file = decode(&bytes).map_err(|e| (path.clone(), e.to_string()))?;
        if file.envelope.id.as_str() != name {
            return Err((
                path,
                format!("file holds message {} under another name", file.envelope.id),
            ));
        }
        let env = Arc::new(file.envelope);
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, (stamp, env.clone()));
        Ok(Some((env, bytes.len() as u64)))
    }

    /// Envelopes of every decodable message in a directory. Files that do not decode are moved
    /// to `dead/` (when found outside it) and logged.
    fn scan(&self, state: QueueState) -> Result<Vec<Arc<Envelope>>> {
        let names = self.names(state)?;
        let mut out = Vec::with_capacity(names.len());
        let mut live = HashSet::new();
        for name in names {
            match self.envelope(state, &name) {
                Ok(Some((env, _))) => {
                    live.insert(name);
                    out.push(env);
                }
                Ok(None) => {}
                Err((path, reason)) => {
                    tracing::error!(path = %path.display(), %reason, "corrupt queue file");
                    if state != QueueState::Dead {
                        self.quarantine(state, &name, &reason)?;
                    }
                }
            }
        }
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(s, n), _| *s != state || live.contains(n));
        Ok(out)
    }

    /// Moves a file that does not decode to `dead/` (its listing then shows why).
    fn quarantine(&self, state: QueueState, name: &str, reason: &str) -> Result<()> {
        let _guard = self.lock()?;
        self.quarantine_locked(state, name, reason)
    }

    fn quarantine_locked(&self, state: QueueState, name: &str, reason: &str) -> Result<()> {
        if !self.dir(state).join(name).exists() {
            return Ok(());
        }
        let mut dead_name = name.to_owned();
        // Never overwrite a dead letter: a second corrupt file of the same name gets a suffix.
        for n in 0..1000 {
            if !self.dir(QueueState::Dead).join(&dead_name).exists() {
                break;
            }
            dead_name = format!("{name}x{n}");
        }
        let src = self.dir(state).join(name);
        let dead_dir = self.dir(QueueState::Dead);
        let dst = dead_dir.join(&dead_name);
        self.step("rename between directories")?;
        fs::rename(&src, &dst).map_err(io_err("move to", &dst))?;
        self.step("sync destination directory")?;
        self.sync_dir(&dead_dir)?;
        self.step("sync source directory")?;
        self.sync_dir(&self.dir(state))?;
        tracing::error!(file = name, %reason, "moved corrupt queue file to dead/");
        Ok(())
    }

    // ---- state changes ----------------------------------------------------------------------

    /// Read-modify-write of one message under the spool lock.
    fn update<R>(
        &self,
        id: &QueueId,
        now: u64,
        f: impl FnOnce(&mut QueueFile, QueueState) -> Result<(Change, R)>,
    ) -> Result<R> {
        let guard = self.lock()?;
        let Some(state) = self.locate(id.as_str()) else {
            return Err(Error::NotFound(id.clone()));
        };
        let path = self.dir(state).join(id.as_str());
        let bytes = Self::read_bounded(&path).map_err(io_err("read", &path))?;
        let mut file = match decode(&bytes) {
            Ok(f) => f,
            Err(source) => {
                if state != QueueState::Dead {
                    self.quarantine_locked(state, id.as_str(), &source.to_string())?;
                }
                return Err(Error::Corrupt { path, source });
            }
        };
        let before = file.envelope.clone();
        let (change, result) = f(&mut file, state)?;
        let to = change.state_after(state);
        let staged = self.stage_change(id, change, &file)?;
        let dirs = self.apply_change(id, state, staged)?;
        drop(guard);
        self.sync_dirs(&dirs)?;
        self.journal_change(now, &before, &file, state, to);
        Ok(result)
    }

    /// Writes to the journal what a change that is now durable did to a message (`to`: its
    /// queue state after, `None` when it was removed).
    fn journal_change(
        &self,
        now: u64,
        before: &Envelope,
        after: &QueueFile,
        from: QueueState,
        to: Option<QueueState>,
    ) {
        let events = crate::journal::changes(now, before, &after.envelope, from, to);
        self.journal.append(&events);
    }

    /// [`Spool::update`] for changes whose closure only computes (no side effects, so it may run
    /// more than once): the file is read, changed, and its new version written and synced
    /// *outside* the lock, so that the slow part (the file's fsync) of concurrent updates of
    /// different messages overlaps, as concurrent enqueues do. Under the lock only the check that
    /// the file is still the one read (same inode, size and mtime: every change replaces or
    /// removes the file) and the renames remain. A file changed meanwhile (by the CLI, or by
    /// another task on the same message) means another try; after a few, or for a file that does
    /// not decode, [`Spool::update`] does the whole change under the lock.
    fn update_pure<R>(
        &self,
        id: &QueueId,
        now: u64,
        mut f: impl FnMut(&mut QueueFile, QueueState) -> Result<(Change, R)>,
    ) -> Result<R> {
        const TRIES: usize = 4;
        for _ in 0..TRIES {
            let Some(state) = self.locate(id.as_str()) else {
                return Err(Error::NotFound(id.clone()));
            };
            let path = self.dir(state).join(id.as_str());
            let read = (|| -> io::Result<(Vec<u8>, Stamp)> {
                let before = Stamp::of(&fs::metadata(&path)?);
                let bytes = Self::read_bounded(&path)?;
                Ok((bytes, before))
            })();
            let (bytes, seen) = match read {
                Ok(r) => r,
                // Moved or removed between locate and read: look again.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err("read", &path)(e)),
            };
            let Ok(mut file) = decode(&bytes) else {
                break;
            };
            let before = file.envelope.clone();
            let (change, result) = f(&mut file, state)?;
            let to = change.state_after(state);
            let staged = self.stage_change(id, change, &file)?;
            let guard = self.lock()?;
            let stamp = fs::metadata(&path).ok().map(|m| Stamp::of(&m));
            if stamp != Some(seen) {
                drop(guard);
                if let Staged::Rewrite(tmp, _) = staged {
                    let _ = fs::remove_file(tmp);
                }
                continue;
            }
            let dirs = self.apply_change(id, state, staged)?;
            drop(guard);
            self.sync_dirs(&dirs)?;
            self.journal_change(now, &before, &file, state, to);
            return Ok(result);
        }
        self.update(id, now, f)
    }

    /// Makes `change` ready to apply: a rewrite gets the new version of the file written and
    /// synced under `tmp/`.
    fn stage_change(&self, id: &QueueId, change: Change, file: &QueueFile) -> Result<Staged> {
        let rewrite = |then: Option<QueueState>| -> Result<Staged> {
            let bytes = encode(file)?;
            let tmp = self.tmp_path(id.as_str());
            match self.stage(&tmp, &bytes) {
                Ok(()) => Ok(Staged::Rewrite(tmp, then)),
                Err(e) => {
                    if self.alive() {
                        let _ = fs::remove_file(&tmp);
                    }
                    Err(e)
                }
            }
        };
        match change {
            Change::Nothing => Ok(Staged::Nothing),
            Change::Rewrite => rewrite(None),
            Change::RewriteThenMove(to) => rewrite(Some(to)),
            Change::Move(to) => Ok(Staged::Move(to)),
            Change::Remove => Ok(Staged::Remove),
        }
    }

    /// Carries out a staged change on the file of `id` in `state` (under the lock); returns the
    /// directories to sync (after the lock is released) before the change is durable.
    fn apply_change(
        &self,
        id: &QueueId,
        state: QueueState,
        staged: Staged,
    ) -> Result<Vec<PathBuf>> {
        let name = id.as_str();
        match staged {
            Staged::Nothing => Ok(Vec::new()),
            Staged::Rewrite(tmp, then) => {
                let dir = self.dir(state);
                let placed = self.place_unsynced(&tmp, &dir, name);
                if placed.is_err() && self.alive() {
                    let _ = fs::remove_file(&tmp);
                }
                placed?;
                match then {
                    // The rewrite's own directory is the move's source: synced after the move.
                    Some(to) => Ok(self.move_unsynced(name, state, to)?.to_vec()),
                    None => Ok(vec![dir]),
                }
            }
            Staged::Move(to) => Ok(self.move_unsynced(name, state, to)?.to_vec()),
            Staged::Remove => Ok(vec![self.remove_unsynced(state, name)?]),
        }
    }

    /// After recipients changed: what happens to the message as a whole.
    fn settle(file: &QueueFile) -> (Change, Disposition) {
        let env = &file.envelope;
        if !env.is_complete() {
            (Change::Rewrite, Disposition::Queued)
        } else if env.needs_report() {
            (Change::Rewrite, Disposition::NeedsBounce)
        } else {
            (Change::Remove, Disposition::Done)
        }
    }

    fn select<'a>(
        file: &'a mut QueueFile,
        rcpts: &[impl AsRef<str>],
    ) -> impl Iterator<Item = &'a mut Recipient> {
        let wanted: HashSet<String> = rcpts.iter().map(|r| r.as_ref().to_owned()).collect();
        file.envelope
            .recipients
            .iter_mut()
            .filter(move |r| !r.state.is_final() && wanted.contains(&r.address))
    }

    /// Marks recipients as handed to a bearer (counts an attempt). A crash before the outcome
    /// is recorded makes them pending again at start-up.
    pub fn mark_in_flight(&self, id: &QueueId, rcpts: &[impl AsRef<str>], now: u64) -> Result<()> {
        self.update_pure(id, now, |file, _| {
            for r in Self::select(file, rcpts) {
                if r.state != RcptState::InFlight {
                    r.state = RcptState::InFlight;
                    r.attempts = r.attempts.saturating_add(1);
                    r.last_attempt = now;
                }
            }
            Ok((Change::Rewrite, ()))
        })
    }

    /// Records that the next hop accepted the message for these recipients, `how` saying
    /// whether a success report is now this gateway's to send (for those whose sender asked for
    /// one, `NOTIFY=SUCCESS`): it goes with the message's report once it is complete.
    pub fn delivered(
        &self,
        id: &QueueId,
        rcpts: &[impl AsRef<str>],
        how: Handoff,
        now: u64,
    ) -> Result<Disposition> {
        let d = self.update_pure(id, now, |file, _| {
            for r in Self::select(file, rcpts) {
                if r.state != RcptState::InFlight {
                    r.attempts = r.attempts.saturating_add(1);
                }
                r.state = RcptState::Delivered { at: now };
                r.last_attempt = now;
                r.success = match how {
                    _ if !r.dsn.wants_success() => None,
                    Handoff::Final => Some(Success::Delivered),
                    Handoff::Relayed => Some(Success::Relayed),
                    Handoff::Passed => None,
                };
            }
            Ok(Self::settle(file))
        })?;
        tracing::debug!(queue_id = %id, disposition = ?d, "delivered");
        Ok(d)
    }

    /// Records a temporary failure for these recipients: retried after the backoff delay (or
    /// at once when their link comes back), or made a dead letter after `max_attempts`.
    pub fn deferred(
        &self,
        id: &QueueId,
        rcpts: &[impl AsRef<str>],
        error: &str,
        now: u64,
    ) -> Result<Disposition> {
        self.defer(id, rcpts, error, now, false)
    }

    /// [`Spool::deferred`] for a failure whose cause the caller has removed (the next hop
    /// refused a parameter it turned out not to offer, and the next attempt goes without it):
    /// due again at once, not after the backoff. The attempt counts all the same, so that a
    /// next hop that keeps refusing cannot keep the message going round for ever.
    pub fn deferred_due_now(
        &self,
        id: &QueueId,
        rcpts: &[impl AsRef<str>],
        error: &str,
        now: u64,
    ) -> Result<Disposition> {
        self.defer(id, rcpts, error, now, true)
    }

    fn defer(
        &self,
        id: &QueueId,
        rcpts: &[impl AsRef<str>],
        error: &str,
        now: u64,
        due_now: bool,
    ) -> Result<Disposition> {
        let error = truncate_text(error, MAX_ERROR_TEXT);
        let max_attempts = self.config.max_attempts;
        let d = self.update_pure(id, now, |file, _| {
            let mut give_up = None;
            for r in Self::select(file, rcpts) {
                if r.state != RcptState::InFlight {
                    r.attempts = r.attempts.saturating_add(1);
                }
                r.state = RcptState::Deferred;
                r.last_attempt = now;
                r.next_attempt = if due_now {
                    now
                } else {
                    now.saturating_add(self.config.backoff(r.attempts))
                };
                r.last_error = Some(error.clone());
                if r.attempts >= max_attempts {
                    give_up = Some(r.attempts);
                }
            }
            if let Some(n) = give_up {
                let reason = truncate_text(
                    &format!("gave up after {n} attempts; last error: {error}"),
                    MAX_TEXT,
                );
                file.envelope.dead_reason = Some(reason.clone());
                return Ok((
                    Change::RewriteThenMove(QueueState::Dead),
                    Disposition::Dead(reason),
                ));
            }
            Ok((Change::Rewrite, Disposition::Queued))
        })?;
        tracing::debug!(queue_id = %id, %error, disposition = ?d, "deferred");
        Ok(d)
    }

    /// Records a permanent failure for these recipients (`status`: RFC 3463 code such as
    /// `5.1.1`; `diagnostic`: the remote reply or our own text).
    pub fn failed(
        &self,
        id: &QueueId,
        rcpts: &[impl AsRef<str>],
        status: &str,
        diagnostic: &str,
        now: u64,
    ) -> Result<Disposition> {
        let failure = Failure {
            status: truncate_text(status, 32),
            diagnostic: truncate_text(diagnostic, MAX_ERROR_TEXT),
            at: now,
        };
        let d = self.update_pure(id, now, |file, _| {
            for r in Self::select(file, rcpts) {
                if r.state != RcptState::InFlight {
                    r.attempts = r.attempts.saturating_add(1);
                }
                r.state = RcptState::Failed(failure.clone());
                r.last_attempt = now;
            }
            Ok(Self::settle(file))
        })?;
        tracing::debug!(queue_id = %id, status, diagnostic, disposition = ?d, "failed");
        Ok(d)
    }

    /// Fails, in one change under the lock, every recipient of `id` still waiting (pending or
    /// deferred), only those for `only` when given, as [`Spool::failed`] would: for an operator
    /// giving up on mail. Recipients in flight are left to their outcome, and none that the
    /// gateway takes in flight meanwhile is touched. Returns how many failed, how many were in
    /// flight, and what became of the message. A dead letter is refused.
    pub fn fail_waiting(
        &self,
        id: &QueueId,
        only: Option<&Target>,
        status: &str,
        diagnostic: &str,
        now: u64,
    ) -> Result<(usize, usize, Disposition)> {
        let failure = Failure {
            status: truncate_text(status, 32),
            diagnostic: truncate_text(diagnostic, MAX_ERROR_TEXT),
            at: now,
        };
        self.update_pure(id, now, |file, state| {
            if state == QueueState::Dead {
                return Err(Error::WrongState {
                    id: id.clone(),
                    state: "a dead letter (release it first)".into(),
                    op: "give up on",
                });
            }
            let (mut failed, mut in_flight) = (0, 0);
            for r in file
                .envelope
                .recipients
                .iter_mut()
                .filter(|r| only.is_none_or(|t| &r.target == t))
            {
                match r.state {
                    RcptState::Pending | RcptState::Deferred => {
                        r.attempts = r.attempts.saturating_add(1);
                        r.state = RcptState::Failed(failure.clone());
                        r.last_attempt = now;
                        failed += 1;
                    }
                    RcptState::InFlight => in_flight += 1,
                    _ => {}
                }
            }
            if failed == 0 {
                return Ok((Change::Nothing, (0, in_flight, Disposition::Queued)));
            }
            let (change, d) = Self::settle(file);
            Ok((change, (failed, in_flight, d)))
        })
    }

    /// Moves to `to` the recipients still waiting for `from` (pending or deferred, not in
    /// flight) of every queued message of at most `rule.max_size` bytes that have waited for
    /// `from` since `rule.waited_since` or before (since the message's arrival, or since they
    /// came back from a fallback, [`Moved::Returned`]), and, when `rule.tried`, those that
    /// `from` was tried for at least once: a peer's fallback (the routing table's `fallback`)
    /// taking the mail that has waited too long for the peer, or that a peer that has not
    /// answered for that long was tried for. Each moved recipient starts afresh for `to`:
    /// pending, due at once, no attempt counted, its last error kept for the operator, and
    /// [`Moved::FellBack`] from `from` (with `rule.back`: it goes back when `from` answers
    /// again, [`Spool::fall_back_return`]). Nothing moves while `from` is held by an operator,
    /// nor out of a held message or a dead letter: hold means that the mail waits. Returns
    /// each message changed with the recipients moved.
    ///
    /// A recipient a link took for `from` just before the move still goes there (its state is
    /// what counts): at worst it travels both ways once and the receiver drops the duplicate.
    pub fn fall_back(
        &self,
        from: &Target,
        to: &Target,
        rule: &FallBack,
    ) -> Result<Vec<(QueueId, Vec<String>)>> {
        self.fall_back_by(from, to, rule, None)
    }

    /// [`Spool::fall_back`] for a fallback whose links send less than a message as it came
    /// (what they leave ashore, such as images scaled down): a message over `rule.max_size`
    /// as it came is weighed by `weigh` (its size as they send it) and moves if that is within
    /// it.
    pub fn fall_back_weighed(
        &self,
        from: &Target,
        to: &Target,
        rule: &FallBack,
        weigh: &dyn Fn(&[u8]) -> u64,
    ) -> Result<Vec<(QueueId, Vec<String>)>> {
        self.fall_back_by(from, to, rule, Some(weigh))
    }

    fn fall_back_by(
        &self,
        from: &Target,
        to: &Target,
        rule: &FallBack,
        weigh: Weigher<'_>,
    ) -> Result<Vec<(QueueId, Vec<String>)>> {
        let Target::Peer(from_name) = from else {
            return Ok(Vec::new());
        };
        if from == to || self.is_target_held(from)? {
            return Ok(Vec::new());
        }
        let moves = |r: &Recipient, arrival: u64| {
            &r.target == from
                && matches!(r.state, RcptState::Pending | RcptState::Deferred)
                && (Moved::waiting_since(r.moved.as_ref(), arrival) <= rule.waited_since
                    || (rule.tried && r.attempts > 0))
        };
        let moved = Moved::FellBack {
            from: from_name.clone(),
            at: rule.now,
            back: rule.back,
        };
        self.move_recipients((rule.max_size, weigh), to, &moved, rule.now, moves)
    }

    /// Moves back to peer `to` the recipients that fell back from it to `from` while it did
    /// not answer ([`Moved::FellBack`] with `back`), at or before unix second `answered` (when
    /// `to` answered again), and still wait for `from` (pending or deferred, not in flight),
    /// in messages of at most `max_size` bytes. They start afresh for `to`
    /// ([`Moved::Returned`] at `now`, from when its fallback's wait counts again). Nothing
    /// moves while an operator holds either peer: hold means that the mail waits where it is.
    pub fn fall_back_return(
        &self,
        from: &Target,
        to: &str,
        answered: u64,
        max_size: u64,
        now: u64,
    ) -> Result<Vec<(QueueId, Vec<String>)>> {
        let to = Target::Peer(to.to_owned());
        if self.is_target_held(from)? || self.is_target_held(&to)? {
            return Ok(Vec::new());
        }
        let Target::Peer(name) = &to else {
            return Ok(Vec::new());
        };
        let moves = |r: &Recipient, _: u64| {
            &r.target == from
                && matches!(r.state, RcptState::Pending | RcptState::Deferred)
                && matches!(&r.moved, Some(Moved::FellBack { from, at, back: true })
                    if from == name && *at <= answered)
        };
        self.move_recipients(
            (max_size, None),
            &to,
            &Moved::Returned { at: now },
            now,
            moves,
        )
    }

    /// When the latest recipient still waiting (pending or deferred, not in flight, in a queued
    /// message that is not a dead letter) fell back from peer `from` while `from` did not answer
    /// ([`Moved::FellBack`] with `back`), as a unix second: an answer from `from` after it would
    /// bring that recipient back ([`Spool::fall_back_return`]). `None` when nothing would come
    /// back: nothing fell back so, or an operator holds `from` or where the recipients wait.
    /// What tells a link whether probing a silent peer can bring anything home.
    pub fn awaiting_return(&self, from: &str) -> Result<Option<u64>> {
        if self.is_target_held(&Target::Peer(from.to_owned()))? {
            return Ok(None);
        }
        let mut latest = None;
        for env in self.scan(QueueState::Queued)? {
            if env.dead_reason.is_some() {
                continue;
            }
            for r in &env.recipients {
                let Some(Moved::FellBack {
                    from: f,
                    at,
                    back: true,
                }) = &r.moved
                else {
                    continue;
                };
                if f == from
                    && matches!(r.state, RcptState::Pending | RcptState::Deferred)
                    && latest.is_none_or(|l| *at > l)
                    && !self.is_target_held(&r.target)?
                {
                    latest = Some(*at);
                }
            }
        }
        Ok(latest)
    }

    /// Moves to `to` every recipient for which `moves` (the recipient, its message's arrival)
    /// holds, in queued messages that are not dead letters and are of at most `max_size`
    /// bytes, as they came or as `weigh` weighs them; each starts afresh (pending, due at once,
    /// no attempt counted) and says how it came (`moved`).
    fn move_recipients(
        &self,
        (max_size, weigh): (u64, Weigher<'_>),
        to: &Target,
        moved: &Moved,
        now: u64,
        moves: impl Fn(&Recipient, u64) -> bool,
    ) -> Result<Vec<(QueueId, Vec<String>)>> {
        let mut out = Vec::new();
        for env in self.scan(QueueState::Queued)? {
            // Over the size as it came: only what `to` sends smaller may still fit.
            let over = env.size > max_size;
            if env.dead_reason.is_some()
                || (over && weigh.is_none())
                || !env.recipients.iter().any(|r| moves(r, env.arrival))
            {
                continue;
            }
            let result = self.update_pure(&env.id, now, |file, state| {
                if state != QueueState::Queued
                    || (over && weigh.is_some_and(|w| w(&file.message) > max_size))
                {
                    return Ok((Change::Nothing, Vec::new()));
                }
                let arrival = file.envelope.arrival;
                let mut these = Vec::new();
                for r in file
                    .envelope
                    .recipients
                    .iter_mut()
                    .filter(|r| moves(r, arrival))
                {
                    r.target = to.clone();
                    r.state = RcptState::Pending;
                    r.attempts = 0;
                    r.next_attempt = 0;
                    r.moved = Some(moved.clone());
                    these.push(r.address.clone());
                }
                let change = if these.is_empty() {
                    Change::Nothing
                } else {
                    Change::Rewrite
                };
                Ok((change, these))
            });
            match result {
                Ok(these) if !these.is_empty() => out.push((env.id.clone(), these)),
                Ok(_) | Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Builds the DSN of a complete message, on its failed recipients (those whose sender did
    /// not say `NOTIFY` without `FAILURE`) and on those delivered whose sender asked to hear
    /// so, queues it to the original sender via `dsn_target` (chosen by the caller's routing
    /// table), then removes the original. Returns the DSN queued (`None` when no DSN was due:
    /// null sender).
    ///
    /// A crash between queueing the DSN and removing the original can send the DSN twice,
    /// never zero times.
    pub fn bounce(
        &self,
        id: &QueueId,
        dsn_target: Target,
        now: u64,
    ) -> Result<Option<QueuedReport>> {
        self.update(id, now, |file, state| {
            let env = &file.envelope;
            if !env.is_complete()
                || !(env.needs_report() || (env.sender.is_empty() && env.has_failures()))
            {
                return Err(Error::WrongState {
                    id: env.id.clone(),
                    state: "not complete with anything to report".into(),
                    op: "bounce",
                });
            }
            if state == QueueState::Dead {
                return Err(Error::WrongState {
                    id: env.id.clone(),
                    state: "dead".into(),
                    op: "bounce",
                });
            }
            if env.sender.is_empty() {
                return Ok((Change::Remove, None));
            }
            let recipients: Vec<DsnRecipient> = env
                .recipients
                .iter()
                .filter_map(|r| match (&r.state, r.success) {
                    (RcptState::Failed(f), _) if r.dsn.wants_failure() => Some(DsnRecipient {
                        status: f.status.clone(),
                        diagnostic: f.diagnostic.clone(),
                        ..DsnRecipient::of(r)
                    }),
                    (RcptState::Delivered { .. }, Some(success)) => Some(DsnRecipient {
                        success: Some(success),
                        ..DsnRecipient::of(r)
                    }),
                    _ => None,
                })
                .collect();
            let failure = env.reports_failure();
            let dsn = self.queue_dsn(file, &recipients, None, dsn_target, now)?;
            tracing::info!(queue_id = %env.id, %dsn, to = %env.sender, failure, "queued a DSN");
            Ok((Change::Remove, Some(QueuedReport { dsn, failure })))
        })
    }

    /// Queues, towards `target`, the DSN of `file` to its sender on `recipients` (a delay
    /// warning when `delayed` says until when they are tried), at the message's priority and
    /// with the null reverse path. It returns the header block, or all of a failed message
    /// whose sender asked `RET=FULL` when it is within [`SpoolConfig::return_full_limit`].
    fn queue_dsn(
        &self,
        file: &QueueFile,
        recipients: &[DsnRecipient],
        delayed: Option<Delay>,
        target: Target,
        now: u64,
    ) -> Result<QueueId> {
        let env = &file.envelope;
        let failure = delayed.is_none() && recipients.iter().any(|r| r.success.is_none());
        let limit = self.config.return_full_limit;
        let returned = match env.dsn.ret {
            Some(Ret::Full) if failure && env.size <= limit => Returned::Whole,
            Some(Ret::Full) if failure => Returned::HeadersOver(limit),
            _ => Returned::Headers,
        };
        let dsn = build_dsn(&DsnRequest {
            reporting_mta: &self.config.reporting_mta,
            queue_id: env.id.as_str(),
            original_sender: &env.sender,
            arrival: env.arrival,
            now,
            recipients,
            original_message: &file.message,
            delayed,
            envid: env.dsn.envid.as_deref(),
            returned,
        });
        let id = self.enqueue(
            &NewMessage {
                sender: String::new(),
                recipients: vec![(env.sender.clone(), target)],
                priority: env.priority,
                message: &dsn,
                dsn: MailDsn::default(),
                rcpt_dsn: Vec::new(),
                origin: None,
            },
            now,
        )?;
        self.journal.append(&[crate::journal::Event {
            text: Some(crate::journal::report_text(
                delayed.is_some(),
                failure,
                id.as_str(),
            )),
            ..crate::journal::Event::new(now, env.id.as_str(), crate::journal::What::Report)
        }]);
        Ok(id)
    }

    /// Messages waiting for [`Spool::bounce`], with their sender (to route the DSN).
    pub fn pending_bounces(&self) -> Result<Vec<(QueueId, String)>> {
        let mut out = Vec::new();
        for state in [QueueState::Queued, QueueState::Held] {
            for env in self.scan(state)? {
                if env.dead_reason.is_none() && env.is_complete() && env.needs_report() {
                    out.push((env.id.clone(), env.sender.clone()));
                }
            }
        }
        Ok(out)
    }

    /// Tells the sender of every message that has waited [`SpoolConfig::delay_warning`] and is
    /// still being retried (queued or held, not a dead letter, not past its expiry, with a
    /// recipient not yet delivered or failed) that it is delayed: a DSN with `Action: delayed`
    /// and `Will-Retry-Until` its expiry, for those recipients, queued towards `route(sender)`.
    /// Once per message (the queue file records it); never for a null sender. Returns each
    /// message warned, its warning's queue id and where that goes. A crash between queueing
    /// the warning and recording it can warn twice, never zero times.
    pub fn warn_delayed(
        &self,
        now: u64,
        route: impl Fn(&str) -> Target,
    ) -> Result<Vec<(QueueId, QueueId, Target)>> {
        let Some(after) = self.config.delay_warning else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for state in [QueueState::Queued, QueueState::Held] {
            for env in self.scan(state)? {
                if env.delay_warned.is_some()
                    || env.dead_reason.is_some()
                    || env.sender.is_empty()
                    || env.arrival.saturating_add(after) > now
                    || env.expires <= now
                    || env.is_complete()
                {
                    continue;
                }
                let target = route(&env.sender);
                let result = self.warn_now(&env.id, target.clone(), now);
                match result {
                    Ok(Some(dsn)) => out.push((env.id.clone(), dsn, target)),
                    Ok(None) | Err(Error::NotFound(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(out)
    }

    /// Tells the sender of `id` now that the message is delayed, as [`Spool::warn_delayed`]
    /// does once its time has come: a DSN with `Action: delayed` for the recipients not yet
    /// delivered or failed, towards `target`, saying they are retried until the expiry, or,
    /// for a held message, that it waits for the operator. `None` (nothing queued) when the
    /// sender was told already, is null, or nothing waits.
    pub fn warn_now(&self, id: &QueueId, target: Target, now: u64) -> Result<Option<QueueId>> {
        self.update(id, now, |file, state| {
            let env = &file.envelope;
            if env.delay_warned.is_some() || env.dead_reason.is_some() || env.sender.is_empty() {
                return Ok((Change::Nothing, None));
            }
            // Those whose sender did not refuse delay reports (`NOTIFY` without `DELAY`).
            let mut recipients: Vec<DsnRecipient> = env
                .recipients
                .iter()
                .filter(|r| !r.state.is_final() && r.dsn.wants_delay())
                .map(|r| DsnRecipient {
                    status: delay_status(r),
                    diagnostic: delay_diagnostic(r),
                    ..DsnRecipient::of(r)
                })
                .collect();
            if recipients.is_empty() {
                return Ok((Change::Nothing, None));
            }
            // Deliveries the sender asked to hear of go with it rather than wait for the rest
            // of the message, and are not told again in its final report.
            recipients.extend(env.recipients.iter().filter_map(|r| {
                r.success.map(|s| DsnRecipient {
                    success: Some(s),
                    ..DsnRecipient::of(r)
                })
            }));
            let delay = match state {
                QueueState::Held => Delay::Held,
                _ => Delay::Retried { until: env.expires },
            };
            let dsn_id = self.queue_dsn(file, &recipients, Some(delay), target, now)?;
            tracing::info!(queue_id = %env.id, dsn = %dsn_id, to = %env.sender, "queued a delay warning");
            file.envelope.delay_warned = Some(now);
            for r in &mut file.envelope.recipients {
                r.success = None;
            }
            Ok((Change::Rewrite, Some(dsn_id)))
        })
    }

    /// Fails the waiting recipients of every queued message past its expiry: with status 4.4.7
    /// when its lifetime in the queue is over, 5.4.7 when the time the message itself states
    /// (`Expires:`, [`crate::expiry`]) came first. Returns the messages changed and what became
    /// of them ([`Disposition::NeedsBounce`]: call [`Spool::bounce`]). Held and dead messages
    /// do not expire; in-flight recipients wait for their outcome.
    pub fn expire(&self, now: u64) -> Result<Vec<(QueueId, Disposition)>> {
        let mut out = Vec::new();
        for env in self.scan(QueueState::Queued)? {
            let waiting = env
                .recipients
                .iter()
                .any(|r| matches!(r.state, RcptState::Pending | RcptState::Deferred));
            if env.expires > now || !waiting || env.dead_reason.is_some() {
                continue;
            }
            let days = now.saturating_sub(env.arrival) as f64 / 86_400.0;
            let result = self.update(&env.id, now, |file, state| {
                if state != QueueState::Queued {
                    return Ok((Change::Nothing, None));
                }
                // The message's own expiry time set the envelope's, or the lifetime did.
                let own = message_expiry(&file.message) == Some(file.envelope.expires);
                let (status, why) = if own {
                    (
                        "5.4.7",
                        format!(
                            "the message's own expiry time ({}) passed before it could be \
                             delivered",
                            crate::dsn::rfc5322_date(file.envelope.expires)
                        ),
                    )
                } else {
                    (
                        "4.4.7",
                        format!("message expired after {days:.1} days in the queue"),
                    )
                };
                for r in file.envelope.recipients.iter_mut() {
                    if matches!(r.state, RcptState::Pending | RcptState::Deferred) {
                        let mut diagnostic = why.clone();
                        if let Some(e) = &r.last_error {
                            diagnostic = truncate_text(
                                &format!("{diagnostic}; last error: {e}"),
                                MAX_ERROR_TEXT,
                            );
                        }
                        r.state = RcptState::Failed(Failure {
                            status: status.into(),
                            diagnostic,
                            at: now,
                        });
                    }
                }
                let (change, d) = Self::settle(file);
                Ok((change, Some(d)))
            });
            match result {
                Ok(Some(d)) => out.push((env.id.clone(), d)),
                Ok(None) | Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    // ---- scheduling -------------------------------------------------------------------------

    /// Messages due for `target` at `now`: queued (not held), with at least one recipient for
    /// that target pending, or deferred with its retry time reached (or deferred before the
    /// target's link last came up). Ordered by priority (highest first), then age (oldest
    /// first); as many as fit in `byte_budget`, stopping at the first that does not fit so that
    /// nothing overtakes a more urgent message, but always at least one. Nothing is due for a
    /// held target, nor a message past its expiry.
    pub fn due(&self, target: &Target, now: u64, byte_budget: u64) -> Result<Vec<DueMessage>> {
        self.collect_due(target, now, byte_budget, true)
    }

    /// Every queued message with a recipient for `target` still to be tried (pending or
    /// deferred), whatever its retry time or expiry, in [`Spool::due`]'s order: for recovery,
    /// which must find every message a cut-off round may have carried.
    pub fn waiting(&self, target: &Target) -> Result<Vec<DueMessage>> {
        self.collect_due(target, u64::MAX, u64::MAX, false)
    }

    fn collect_due(
        &self,
        target: &Target,
        now: u64,
        byte_budget: u64,
        expiring: bool,
    ) -> Result<Vec<DueMessage>> {
        if self.is_target_held(target)? {
            return Ok(Vec::new());
        }
        let boost = self
            .link_up
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(target)
            .copied();
        let mut due: Vec<DueMessage> = Vec::new();
        for env in self.scan(QueueState::Queued)? {
            // Past its expiry a message is never sent, however soon the sweep
            // ([`Spool::expire`]) comes to fail it.
            if env.dead_reason.is_some() || (expiring && env.expires <= now) {
                continue;
            }
            let (recipients, rcpt_dsn): (Vec<String>, Vec<RcptDsn>) = env
                .recipients
                .iter()
                .filter(|r| &r.target == target)
                .filter(|r| match r.state {
                    RcptState::Pending => r.next_attempt <= now,
                    RcptState::Deferred => {
                        r.next_attempt <= now || boost.is_some_and(|b| r.last_attempt < b)
                    }
                    _ => false,
                })
                .map(|r| (r.address.clone(), r.dsn.clone()))
                .unzip();
            if !recipients.is_empty() {
                due.push(DueMessage {
                    id: env.id.clone(),
                    priority: env.priority,
                    arrival: env.arrival,
                    size: env.size,
                    sender: env.sender.clone(),
                    recipients,
                    dsn: env.dsn.clone(),
                    rcpt_dsn,
                });
            }
        }
        due.sort_by(|a, b| {
            b.priority
                .cmp(&a.priority)
                .then(a.arrival.cmp(&b.arrival))
                .then(a.id.cmp(&b.id))
        });
        let mut used = 0u64;
        let mut take = 0;
        for m in &due {
            if take > 0 && used.saturating_add(m.size) > byte_budget {
                break;
            }
            used = used.saturating_add(m.size);
            take += 1;
        }
        due.truncate(take);
        Ok(due)
    }

    /// The earliest time anything queued for `target` becomes due (`None`: nothing waits),
    /// so the link scheduler knows when to wake up.
    pub fn next_due(&self, target: &Target) -> Result<Option<u64>> {
        if self.is_target_held(target)? {
            return Ok(None);
        }
        Ok(self
            .scan(QueueState::Queued)?
            .iter()
            .filter(|e| e.dead_reason.is_none())
            .flat_map(|e| e.recipients.iter().map(move |r| (r, e.expires)))
            .filter(|(r, expires)| {
                &r.target == target
                    && matches!(r.state, RcptState::Pending | RcptState::Deferred)
                    // A retry after the message expires never comes.
                    && r.next_attempt < *expires
            })
            .map(|(r, _)| r.next_attempt)
            .min())
    }

    /// The link to `target` has come (back) up at `now`: its deferred mail is due at once.
    /// Kept in memory only: after a restart every link comes up again anyway.
    pub fn link_up(&self, target: &Target, now: u64) {
        self.link_up
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(target.clone(), now);
    }

    // ---- operator actions -------------------------------------------------------------------

    /// Tells the gateway that owns the spool that an operator changed the queue (a release, a
    /// flush), so it looks at once instead of at its next timer. Best effort: the gateway's
    /// timer finds the change anyway.
    pub fn nudge(&self) {
        let stamp = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let path = self.root.join(NUDGE_FILE);
        if let Err(e) = fs::write(&path, format!("{stamp} {}\n", std::process::id())) {
            tracing::debug!(path = %path.display(), error = %e, "cannot nudge the gateway");
        }
    }

    /// The last [`Spool::nudge`]'s token (`None` before the first): a gateway that sees it
    /// change looks at its queue.
    pub fn nudged(&self) -> Option<String> {
        fs::read_to_string(self.root.join(NUDGE_FILE)).ok()
    }

    /// Holds a queued message: it is never due until released.
    pub fn hold(&self, id: &QueueId) -> Result<()> {
        self.update(id, wall_now(), |file, state| match state {
            QueueState::Queued => Ok((Change::Move(QueueState::Held), ())),
            QueueState::Held => Ok((Change::Nothing, ())),
            QueueState::Dead => Err(Error::WrongState {
                id: file.envelope.id.clone(),
                state: "a dead letter".into(),
                op: "hold",
            }),
        })
    }

    /// Releases a held message, or revives a dead letter (its attempt counts start again and
    /// it is due at once).
    pub fn release(&self, id: &QueueId) -> Result<()> {
        self.update(id, wall_now(), |file, state| match state {
            QueueState::Queued => Ok((Change::Nothing, ())),
            QueueState::Held => Ok((Change::Move(QueueState::Queued), ())),
            QueueState::Dead => {
                file.envelope.dead_reason = None;
                for r in file
                    .envelope
                    .recipients
                    .iter_mut()
                    .filter(|r| !r.state.is_final())
                {
                    r.state = RcptState::Pending;
                    r.attempts = 0;
                    r.next_attempt = 0;
                }
                Ok((Change::RewriteThenMove(QueueState::Queued), ()))
            }
        })
    }

    /// Deletes a message from whichever directory it is in, without a DSN (an operator's
    /// decision). Works on corrupt files too.
    pub fn delete(&self, id: &QueueId) -> Result<QueueState> {
        let guard = self.lock()?;
        let state = self
            .locate(id.as_str())
            .ok_or_else(|| Error::NotFound(id.clone()))?;
        self.remove(state, id.as_str())?;
        drop(guard);
        tracing::info!(queue_id = %id, from = state.name(), "deleted by the operator");
        self.journal.append(&[crate::journal::Event {
            text: Some(format!("by the operator, from {}", state.name())),
            ..crate::journal::Event::new(wall_now(), id.as_str(), crate::journal::What::Deleted)
        }]);
        Ok(state)
    }

    /// Makes every deferred recipient of queued messages due now (only those for `target` if
    /// given). Written to the files, so a flush from the CLI reaches the running gateway.
    /// Returns how many messages changed.
    pub fn flush(&self, target: Option<&Target>) -> Result<usize> {
        let mut changed = 0;
        for env in self.scan(QueueState::Queued)? {
            let matches = |r: &Recipient| {
                r.state == RcptState::Deferred
                    && r.next_attempt > 0
                    && target.is_none_or(|t| &r.target == t)
            };
            if !env.recipients.iter().any(matches) {
                continue;
            }
            let r = self.update(&env.id, wall_now(), |file, _| {
                let mut any = false;
                for r in file.envelope.recipients.iter_mut().filter(|r| matches(r)) {
                    r.next_attempt = 0;
                    any = true;
                }
                Ok((
                    if any {
                        Change::Rewrite
                    } else {
                        Change::Nothing
                    },
                    any,
                ))
            });
            match r {
                Ok(true) => changed += 1,
                Ok(false) | Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(changed)
    }

    /// Holds a whole target (peer or LAN): none of its mail is due until released. Durable.
    pub fn hold_target(&self, target: &Target) -> Result<()> {
        let dir = self.root.join(HELD_TARGETS);
        let name = target_marker(target);
        if name.len() > MAX_MARKER_NAME {
            return Err(Error::TargetNameTooLong(
                target.to_string().chars().take(80).collect(),
            ));
        }
        if dir.join(&name).exists() {
            return Ok(());
        }
        self.write_file(&dir, &name, b"")
    }

    /// Releases a held target.
    pub fn release_target(&self, target: &Target) -> Result<()> {
        let dir = self.root.join(HELD_TARGETS);
        let p = dir.join(target_marker(target));
        match fs::remove_file(&p) {
            Ok(()) => self.sync_dir(&dir),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("remove", &p)(e)),
        }
    }

    /// Whether a target is held.
    pub fn is_target_held(&self, target: &Target) -> Result<bool> {
        Ok(self
            .root
            .join(HELD_TARGETS)
            .join(target_marker(target))
            .exists())
    }

    /// Every held target.
    pub fn held_targets(&self) -> Result<Vec<Target>> {
        let dir = self.root.join(HELD_TARGETS);
        let mut out = Vec::new();
        for e in fs::read_dir(&dir).map_err(io_err("list", &dir))? {
            let e = e.map_err(io_err("list", &dir))?;
            if let Some(t) = e.file_name().to_str().and_then(marker_target) {
                out.push(t);
            }
        }
        out.sort();
        Ok(out)
    }

    // ---- listing ----------------------------------------------------------------------------

    /// Every message in the spool (queued, then held, then dead), read lazily. Safe while the
    /// gateway runs: a message that moves during the listing is reported once, where it was
    /// found.
    pub fn entries(&self) -> Result<Entries<'_>> {
        let mut pending = VecDeque::new();
        for state in QueueState::ALL {
            for name in self.names(state)? {
                pending.push_back((state, name));
            }
        }
        Ok(Entries {
            spool: self,
            pending,
            seen: HashSet::new(),
        })
    }

    fn entry(&self, state: QueueState, name: &str) -> Result<Option<Entry>> {
        match self.envelope(state, name) {
            Ok(Some((env, file_size))) => Ok(Some(Entry {
                name: name.to_owned(),
                state,
                problem: env.dead_reason.clone(),
                envelope: Some(env),
                file_size,
            })),
            Ok(None) => Ok(None),
            Err((path, reason)) => {
                let file_size = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                Ok(Some(Entry {
                    name: name.to_owned(),
                    state,
                    envelope: None,
                    problem: Some(reason),
                    file_size,
                }))
            }
        }
    }

    // ---- recovery ---------------------------------------------------------------------------

    fn recover(&self) -> Result<RecoveryReport> {
        let _guard = self.lock()?;
        let mut report = RecoveryReport::default();

        // 1. Files being written when the process died.
        let tmp = self.root.join(TMP);
        for e in fs::read_dir(&tmp).map_err(io_err("list", &tmp))? {
            let p = e.map_err(io_err("list", &tmp))?.path();
            fs::remove_file(&p).map_err(io_err("remove", &p))?;
            report.removed_tmp += 1;
        }
        if report.removed_tmp > 0 {
            self.sync_dir(&tmp)?;
        }

        // 2. Every queue file: decodable, in the right directory, nothing left in flight.
        for state in QueueState::ALL {
            for name in self.names(state)? {
                let path = self.dir(state).join(&name);
                let decoded = match (QueueId::parse(&name), Self::read_bounded(&path)) {
                    (Err(e), _) => Err(e.to_string()),
                    (_, Err(e)) => Err(format!("unreadable: {e}")),
                    (Ok(id), Ok(bytes)) => match decode(&bytes) {
                        Ok(f) if f.envelope.id == id => Ok(f),
                        Ok(f) => Err(format!(
                            "file holds message {} under another name",
                            f.envelope.id
                        )),
                        Err(e) => Err(e.to_string()),
                    },
                };
                let mut file = match decoded {
                    Ok(f) => f,
                    Err(reason) => {
                        if state != QueueState::Dead {
                            self.quarantine_locked(state, &name, &reason)?;
                            report.moved_to_dead.push((name, reason));
                        }
                        continue;
                    }
                };
                self.recover_one(&mut file, state, &mut report)?;
            }
        }
        Ok(report)
    }

    fn recover_one(
        &self,
        file: &mut QueueFile,
        state: QueueState,
        report: &mut RecoveryReport,
    ) -> Result<()> {
        let id = file.envelope.id.clone();
        let name = id.as_str().to_owned();
        // A move to or from dead/ that a crash interrupted: the content says where it belongs.
        match (state, file.envelope.dead_reason.is_some()) {
            (QueueState::Queued | QueueState::Held, true) => {
                self.move_file(&name, state, QueueState::Dead)?;
                report.finished_moves.push(id);
                return Ok(());
            }
            (QueueState::Dead, false) => {
                self.move_file(&name, state, QueueState::Queued)?;
                report.finished_moves.push(id.clone());
                return self.recover_one(file, QueueState::Queued, report);
            }
            (QueueState::Dead, true) => return Ok(()),
            _ => {}
        }
        let mut changed = false;
        for r in file.envelope.recipients.iter_mut() {
            if r.state == RcptState::InFlight {
                r.state = RcptState::Pending;
                changed = true;
            }
        }
        if changed {
            report.requeued_in_flight.push(id.clone());
            self.journal.append(&[crate::journal::Event {
                text: Some("its outcome unknown when the gateway stopped".into()),
                ..crate::journal::Event::new(
                    wall_now(),
                    id.as_str(),
                    crate::journal::What::Requeued,
                )
            }]);
        }
        let env = &file.envelope;
        if env.is_complete() {
            if env.needs_report() {
                report.pending_bounces.push(id.clone());
            } else {
                self.remove(state, &name)?;
                report.removed_complete.push(id);
                return Ok(());
            }
        }
        if changed {
            self.write_file(&self.dir(state), &name, &encode(file)?)?;
        }
        Ok(())
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync directory", dir))
}

/// Lazy listing of the spool, from [`Spool::entries`].
pub struct Entries<'s> {
    spool: &'s Spool,
    pending: VecDeque<(QueueState, String)>,
    seen: HashSet<String>,
}

impl Iterator for Entries<'_> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        while let Some((state, name)) = self.pending.pop_front() {
            if self.seen.contains(&name) {
                continue;
            }
            let found = match self.spool.entry(state, &name) {
                Ok(Some(e)) => Some(e),
                // It moved since the directory was listed: look where it went.
                Ok(None) => match self.spool.locate(&name) {
                    Some(now_in) => match self.spool.entry(now_in, &name) {
                        Ok(e) => e,
                        Err(e) => return Some(Err(e)),
                    },
                    None => None,
                },
                Err(e) => return Some(Err(e)),
            };
            if let Some(entry) = found {
                self.seen.insert(name);
                return Some(Ok(entry));
            }
        }
        None
    }
}

#[cfg(test)]
#[path = "spool_tests.rs"]
mod tests;

/// The wall clock, for what only an operator or a start-up does (hold, release, flush,
/// delete, recovery), where no caller's time is at hand: their journal lines are dated by it.
fn wall_now() -> u64 {
    unix_seconds(SystemTime::now())
}
