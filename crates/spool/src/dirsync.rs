//! Group commit for directory fsyncs: many threads that each renamed or linked a file into the
//! same directory share one `fsync(2)` of that directory instead of issuing one each.
//!
//! Why: a durable rename needs the directory synced afterwards, and on a busy gateway dozens of
//! deliveries (and SMTP sessions) rename into the same queue directory at once. Each directory
//! fsync writes the directory's blocks and flushes the disk cache; issued one per message they
//! made the disk, not the CPU, the limit of both ingest and LAN delivery. A sync that *starts*
//! after a rename covers it, so a caller only waits for the first sync started after its own
//! request: while one sync runs, every request that arrives joins the next one.
//!
//! Used by [`crate::Spool`] for its own directories and by the gateway's Maildir writer for
//! `new/`.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// Shares directory fsyncs between concurrent callers (see the module docs). One value serves
/// any number of directories; cheap to share behind an `Arc`.
#[derive(Debug, Default)]
pub struct DirSync {
    groups: Mutex<HashMap<PathBuf, Arc<Group>>>,
}

#[derive(Debug, Default)]
struct Group {
    state: Mutex<Tickets>,
    turn: Condvar,
}

#[derive(Debug, Default)]
struct Tickets {
    /// Requests handed out so far (the newest ticket number).
    requested: u64,
    /// Every ticket up to this one is covered by a completed sync.
    covered: u64,
    /// A sync of this directory is running now.
    running: bool,
    /// Syncs actually issued (for tests and metrics: requests minus this is what was saved).
    issued: u64,
}

fn relock<'a, T>(
    r: Result<MutexGuard<'a, T>, PoisonError<MutexGuard<'a, T>>>,
) -> MutexGuard<'a, T> {
    // The state is a few counters that stay consistent at every step: a panic elsewhere while
    // holding the lock cannot leave them half-updated, so a poisoned lock is still usable.
    r.unwrap_or_else(PoisonError::into_inner)
}

impl DirSync {
    /// No directory synced yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn group(&self, dir: &Path) -> Arc<Group> {
        let mut groups = relock(self.groups.lock());
        Arc::clone(groups.entry(dir.to_path_buf()).or_default())
    }

    /// Returns once a sync of `dir` that started after this call has completed: everything
    /// renamed, linked or removed in `dir` before the call is then durable.
    pub fn sync(&self, dir: &Path) -> io::Result<()> {
        let group = self.group(dir);
        let mut t = relock(group.state.lock());
        t.requested += 1;
        let ticket = t.requested;
        loop {
            if t.covered >= ticket {
                return Ok(());
            }
            if t.running {
                t = relock(group.turn.wait(t));
                continue;
            }
            // This thread runs the next sync, for every request made so far.
            t.running = true;
            t.issued += 1;
            let upto = t.requested;
            drop(t);
            let result = File::open(dir).and_then(|d| d.sync_all());
            t = relock(group.state.lock());
            t.running = false;
            if result.is_ok() {
                t.covered = t.covered.max(upto);
            }
            group.turn.notify_all();
            // On failure the waiters find their ticket uncovered and try a sync of their own,
            // so each of them gets its own error rather than this one.
            result?;
        }
    }

    /// Syncs actually issued for `dir` so far.
    pub fn issued(&self, dir: &Path) -> u64 {
        relock(self.group(dir).state.lock()).issued
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn one_caller_gets_one_sync_per_call() {
        let dir = tempfile::tempdir().unwrap();
        let s = DirSync::new();
        for _ in 0..3 {
            s.sync(dir.path()).unwrap();
        }
        assert_eq!(s.issued(dir.path()), 3);
    }

    #[test]
    fn concurrent_callers_share_syncs_and_all_return() {
        let dir = tempfile::tempdir().unwrap();
        let s = Arc::new(DirSync::new());
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let s = Arc::clone(&s);
                let d = dir.path().to_path_buf();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        s.sync(&d).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let issued = s.issued(dir.path());
        // Never more syncs than requests; how many fewer depends on the scheduler.
        assert!((1..=800).contains(&issued), "{issued}");
    }

    #[test]
    fn a_failed_sync_is_reported_and_the_next_call_tries_again() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        let s = DirSync::new();
        assert!(s.sync(&gone).is_err());
        std::fs::create_dir(&gone).unwrap();
        s.sync(&gone).unwrap();
        assert_eq!(s.issued(&gone), 2);
    }
}
