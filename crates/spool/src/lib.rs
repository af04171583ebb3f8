//! The durable store-and-forward mail queue of a skywave gateway.
//!
//! Sits between the LAN SMTP front end (which enqueues and says 250 only once [`Spool::enqueue`]
//! has returned) and the per-peer link schedulers (which ask [`Spool::due`] what to send and
//! report each recipient's outcome). Postfix-style: one file per message ([`record`] describes
//! the format), written to a temporary name, fsynced, renamed into the queue, directory fsynced;
//! state changes by atomic rename. Per-recipient status, retries with exponential backoff (and at
//! once when a link comes back), expiry with an RFC 3464 DSN ([`dsn`]), hold and release per
//! message and per target, dead letters, and priorities from MT-PRIORITY or
//! MMHS-Primary-Precedence ([`priority`]), and a reserve of free space that new mail may not
//! take, so a full disk never stops the mail already queued ([`room`]), and a journal of what
//! happens to each message, for `skywave queue trace` ([`journal`]). See [`spool`] for the
//! directory layout, the durability argument and how the gateway and the admin CLI share a
//! spool.
//!
//! The API is synchronous (`std::fs`); the async gateway calls it from `spawn_blocking`. Time is
//! always an argument (unix seconds), never read inside, so tests control it; the one exception
//! is the date of a [`journal`] line for what only an operator or a start-up does (hold,
//! release, flush, delete, recovery), which no caller's time accompanies.

mod dirsync;
pub mod dsn;
pub mod expiry;
mod id;
pub mod journal;
pub mod priority;
pub mod record;
pub mod room;
pub mod spool;

pub use dirsync::DirSync;
pub use id::{InvalidQueueId, QueueId};
pub use priority::Priority;
pub use record::{
    DecodeError, EncodeError, Envelope, Failure, Moved, QueueFile, RcptState, Recipient, Success,
    Target,
};
pub use room::{Bytes, Room, Space};
pub use spool::{
    DEFAULT_DELAY_WARNING, DEFAULT_MIN_FREE_SPACE, DEFAULT_RETURN_FULL_LIMIT, Disposition,
    DueMessage, Entries, Entry, Error, FallBack, Handoff, NewMessage, QueueState, QueuedReport,
    RecoveryReport, Result, Spool, SpoolConfig, unix_seconds,
};
