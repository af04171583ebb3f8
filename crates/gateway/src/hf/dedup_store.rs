//! The receiver's de-duplication memory, on disk.
//!
//! An HMTP server holds its replies until QUIT, so a receiving gateway that dies after spooling
//! some messages of a batch but before its reply transmission leaves the sender without an
//! answer: the sender keeps the messages and sends them again. The in-memory [`DedupCache`]
//! died with the process, so the fingerprints of accepted messages are also appended (and
//! synced) to `state_dir/dedup/<peer>` right after the spool write and before the 250 can leave;
//! at start the cache is seeded from the file. Order matters: spool first, fingerprint second,
//! so a crash between the two can at worst deliver twice, never lose.
//!
//! The file is compacted at start (entries older than the window are dropped).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Duration;

use skywave_hmtp::{DedupCache, DedupKey};
use tokio::time::Instant;
use tracing::warn;

use crate::clock::Clock;

/// Most entries remembered per peer.
pub(super) const CAPACITY: usize = 200_000;

/// A peer's de-duplication memory: the cache and the file behind it.
#[derive(Debug)]
pub(super) struct DedupStore {
    path: PathBuf,
    clock: Clock,
    /// The cache the protocol sessions consult.
    pub(super) cache: DedupCache,
}

impl DedupStore {
    /// Opens (or creates) the memory for `peer` under `dir`, seeding the cache with what is
    /// still within `window`.
    pub(super) fn open(dir: PathBuf, peer: &str, window: Duration, clock: Clock) -> Self {
        let path = dir.join(peer);
        let mut cache = DedupCache::new(window, CAPACITY);
        let now_unix = clock.unix_now();
        let now = Instant::now();
        let mut keep = Vec::new();
        if let Ok(f) = std::fs::File::open(&path) {
            for line in std::io::BufReader::new(f).lines().map_while(Result::ok) {
                let Some((t, fp)) = parse(&line) else {
                    continue;
                };
                let age = now_unix.saturating_sub(t);
                if age >= window.as_secs() {
                    continue;
                }
                let at = now
                    .checked_sub(Duration::from_secs(age))
                    .unwrap_or(now)
                    .into_std();
                cache.remember(fp, at);
                keep.push(line);
            }
        }
        let store = DedupStore { path, clock, cache };
        if let Err(e) = store.rewrite(&keep) {
            warn!(file = %store.path.display(), error = %e, "cannot compact the de-duplication file");
        }
        store
    }

    /// Remembers an accepted message: in the cache and durably on disk.
    pub(super) fn accepted(&mut self, key: &DedupKey) {
        let fp = key.fingerprint();
        self.cache.remember(fp, Instant::now().into_std());
        let line = format!("{} {fp:032x}\n", self.clock.unix_now());
        let written = (|| {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?;
            f.write_all(line.as_bytes())?;
            f.sync_data()
        })();
        if let Err(e) = written {
            warn!(file = %self.path.display(), error = %e, "cannot record the accepted message for de-duplication; a retransmission after a crash could deliver it twice");
        }
    }

    fn rewrite(&self, lines: &[String]) -> std::io::Result<()> {
        let Some(dir) = self.path.parent() else {
            return Ok(());
        };
        std::fs::create_dir_all(dir)?;
        let tmp = self.path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp)?;
        for l in lines {
            f.write_all(l.as_bytes())?;
            f.write_all(b"\n")?;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, &self.path)
    }
}

fn parse(line: &str) -> Option<(u64, u128)> {
    let (t, fp) = line.trim().split_once(' ')?;
    Some((t.parse().ok()?, u128::from_str_radix(fp, 16).ok()?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn accepted_messages_survive_a_restart_within_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock::start();
        let key = DedupKey::new(
            "a@s",
            &["b@t".to_owned()],
            b"Message-ID: <1@s>\r\n\r\nx\r\n",
        );
        let other = DedupKey::new(
            "a@s",
            &["b@t".to_owned()],
            b"Message-ID: <2@s>\r\n\r\nx\r\n",
        );
        {
            let mut s = DedupStore::open(
                dir.path().to_path_buf(),
                "shore",
                Duration::from_secs(3600),
                clock,
            );
            s.accepted(&key);
        }
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join("shore"))
            .unwrap()
            .write_all(b"garbage line\n")
            .unwrap();
        let now = Instant::now().into_std();
        let mut s = DedupStore::open(
            dir.path().to_path_buf(),
            "shore",
            Duration::from_secs(3600),
            clock,
        );
        assert!(s.cache.check(&key, now));
        assert!(!s.cache.check(&other, now));
        // Past the window, a restart forgets it and compacts the file.
        tokio::time::sleep(Duration::from_secs(3601)).await;
        let mut s = DedupStore::open(
            dir.path().to_path_buf(),
            "shore",
            Duration::from_secs(3600),
            clock,
        );
        assert!(!s.cache.check(&key, Instant::now().into_std()));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("shore")).unwrap(),
            ""
        );
    }
}
