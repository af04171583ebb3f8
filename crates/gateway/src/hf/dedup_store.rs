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
//!
//! The spool write and the fingerprint write are two steps, so a crash between them would
//! leave a message accepted but not remembered. That message is still in the spool (LAN
//! delivery takes far longer than the gap), so at start the cache is also seeded with the keys
//! of every message still queued ([`spool_keys`]): the Message-ID form of the key does not
//! change when our `Received:` header is put in front. A message without a Message-ID that
//! falls in the gap can still arrive twice.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Duration;

use skywave_hmtp::{DedupCache, DedupKey};
use skywave_spool::{QueueId, QueueState, Spool};
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
    pub(super) fn open(
        dir: PathBuf,
        peer: &str,
        window: Duration,
        clock: Clock,
        queued: &[u128],
    ) -> Self {
        let path = dir.join(peer);
        let mut cache = DedupCache::new(window, CAPACITY);
        for fp in queued {
            cache.remember(*fp, Instant::now().into_std());
        }
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

    /// Writes an accepted message's fingerprint durably. The cache itself learns it from the
    /// protocol session, which inserts the key when its acknowledgement is released; doing it
    /// here too would insert every key twice (and a re-insert scans the expiry queue).
    pub(super) fn persist(&self, key: &DedupKey) {
        let fp = key.fingerprint();
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
        let mut text = String::new();
        for l in lines {
            text.push_str(l);
            text.push('\n');
        }
        crate::durable::replace(&self.path, text.as_bytes())
    }
}

/// The fingerprints of every message in the spool's live and held queues that has a
/// Message-ID (read once at start; unreadable files are skipped, start-up recovery reports
/// them).
pub(super) fn spool_keys(spool: &Spool) -> Vec<u128> {
    let Ok(entries) = spool.entries() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        if e.state == QueueState::Dead {
            continue;
        }
        let Ok(id) = QueueId::parse(&e.name) else {
            continue;
        };
        let Ok((_, file)) = spool.load(&id) else {
            continue;
        };
        let rcpts: Vec<String> = file
            .envelope
            .recipients
            .iter()
            .map(|r| r.address.clone())
            .collect();
        let key = DedupKey::new(&file.envelope.sender, &rcpts, &file.message);
        if matches!(key, DedupKey::MessageId { .. }) {
            out.push(key.fingerprint());
        }
    }
    out
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
            let s = DedupStore::open(
                dir.path().to_path_buf(),
                "shore",
                Duration::from_secs(3600),
                clock,
                &[],
            );
            s.persist(&key);
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
            &[],
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
            &[],
        );
        assert!(!s.cache.check(&key, Instant::now().into_std()));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("shore")).unwrap(),
            ""
        );
    }

    #[test]
    fn queued_messages_with_a_message_id_are_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let (spool, _) = Spool::open(
            dir.path().join("spool"),
            skywave_spool::SpoolConfig::default(),
        )
        .unwrap();
        let body = b"Message-ID: <7@ship>\r\n\r\nx\r\n";
        let rcpts = vec!["b@shore".to_owned()];
        spool
            .enqueue_with_header(
                &skywave_spool::NewMessage {
                    sender: "a@ship".into(),
                    recipients: vec![(rcpts[0].clone(), skywave_spool::Target::Lan)],
                    priority: skywave_spool::Priority::NORMAL,
                    message: body,
                    dsn: Default::default(),
                    rcpt_dsn: Vec::new(),
                    origin: None,
                },
                1,
                |id| format!("Received: by us id {id}\r\n"),
            )
            .unwrap();
        // Our Received header in front does not change the key the sender's copy has.
        let expected = DedupKey::new("a@ship", &rcpts, body).fingerprint();
        assert_eq!(spool_keys(&spool), vec![expected]);
    }
}
