//! The Maildir (maildir(5)) as LAN delivery writes it: file names, the durable write, the
//! hand-off journal that makes delivery at most once after a crash, and the clean-up of `tmp/`
//! at start-up.
//!
//! Sits under [`crate::delivery`], which decides what to deliver and records outcomes in the
//! spool. The protocol between the two makes delivery at most once without ever scanning the
//! mailbox on the normal path, and costs one journal write per *round* of deliveries rather
//! than a spool write per message:
//!
//! 1. A fresh file name is chosen for every attempt ([`Namer::next`]: time, microseconds, process
//!    id and a per-process counter, as maildir(5) suggests), so an attempt never meets a leftover
//!    of an earlier one, whatever the clock did.
//! 2. The names of all attempts of the round, with their queue ids and recipients, are written
//!    durably to the [`Journal`] *before* any of the round's files ([`Journal::record`]).
//! 3. Each file is written to `tmp/`, synced, linked into `new/`, `new/` is synced ([`write()`]).
//! 4. The spool records each delivery (durably), and only then may the next round replace the
//!    journal.
//!
//! A crash between 2 and 4 leaves the recipients pending in the spool and their attempts in the
//! journal. At start-up the journal is read back and each attempt is looked up by its one name
//! ([`delivered_names`]): in `new/` it is one `stat`; only names not found there make `cur/` be
//! listed, once for all of them, because a mail reader may have moved a file already (and
//! renamed it `NAME:2,FLAGS`). That listing happens only after an interrupted round, never per
//! delivery, so the cost of a delivery does not grow with the mailbox. Attempts that did not
//! land are simply retried (their recipients were never deferred, so at once); those that did are
//! recorded as delivered without a second copy.

use std::collections::HashSet;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use skywave_spool::{DirSync, QueueId};

use crate::config::LineEnds;

/// maildir(5): "a file in tmp/ may be safely removed if it has not been accessed in 36 hours".
pub const TMP_MAX_AGE: Duration = Duration::from_secs(36 * 3600);

/// Creates `tmp/`, `new/` and `cur/` under `dir` as needed.
pub fn create(dir: &Path) -> io::Result<()> {
    for sub in ["tmp", "new", "cur"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    Ok(())
}

/// Chooses file names unique to each delivery attempt:
/// `SECONDS.M<microseconds>P<pid>Q<counter>K<queue id>.<host>`. The `K` part is ours (it names the
/// queued message, for an operator reading the Maildir) and is how [`clean_tmp`] recognises the
/// gateway's own leftovers.
#[derive(Debug)]
pub struct Namer {
    host: String,
    pid: u32,
    counter: AtomicU64,
}

impl Namer {
    /// Names for this host (`/` and `:` escaped as maildir(5) asks, since they may not appear in
    /// a file name or would clash with the `:2,` flags suffix).
    pub fn new(hostname: &str) -> Namer {
        Namer {
            host: escape_host(hostname),
            pid: std::process::id(),
            counter: AtomicU64::new(0),
        }
    }

    /// A name no other attempt of this process has used, nor (with its time, microseconds and
    /// process id) any attempt of an earlier process.
    pub fn next(&self, queue_id: &str) -> String {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        format!(
            "{}.M{}P{}Q{n}K{queue_id}.{}",
            now.as_secs(),
            now.subsec_micros(),
            self.pid,
            self.host
        )
    }

    /// Whether `name` is one this gateway (on this host name, any process) wrote.
    pub fn is_ours(&self, name: &str) -> bool {
        self.queue_id(name).is_some()
    }

    /// The queue id in one of our names (`None`: not a name this gateway wrote).
    pub fn queue_id<'n>(&self, name: &'n str) -> Option<&'n str> {
        let unique = name
            .strip_suffix(self.host.as_str())?
            .strip_suffix('.')?
            .split_once('.')?
            .1;
        // M<digits>P<digits>Q<digits>K<id>
        let mut rest = unique;
        for tag in ['M', 'P', 'Q'] {
            let r = rest.strip_prefix(tag)?;
            let digits = r.len() - r.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits == 0 {
                return None;
            }
            rest = &r[digits..];
        }
        rest.strip_prefix('K')
            .filter(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric()))
    }
}

fn escape_host(hostname: &str) -> String {
    hostname
        .chars()
        .map(|c| match c {
            '/' => "\\057".to_owned(),
            ':' => "\\072".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

/// Which of the names chosen by earlier attempts delivered: the file is in `new/` (then `new/`
/// is synced again, since the attempt may have been cut off before its own sync), or a mail
/// reader already moved it to `cur/` (as `NAME` or `NAME:2,FLAGS`). Removes those attempts'
/// leftovers in `tmp/` either way (a crash between the link into `new/` and the unlink leaves
/// one; so does a crash before the link, and then the attempt did not deliver). `cur/` is listed
/// at most once, and only when some name is not in `new/`.
pub fn delivered_names(dir: &Path, names: &[&str], sync: &DirSync) -> io::Result<HashSet<String>> {
    let mut found = HashSet::new();
    let mut missing = HashSet::new();
    for &name in names {
        // A recorded name is only ever one we chose; refuse anything that could leave the
        // Maildir rather than trust a damaged journal.
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("recorded Maildir name {name:?} is not a file name"),
            ));
        }
        match std::fs::remove_file(dir.join("tmp").join(name)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        if exists(&dir.join("new").join(name))? {
            found.insert(name.to_owned());
        } else {
            missing.insert(name);
        }
    }
    if !found.is_empty() {
        sync.sync(&dir.join("new"))?;
    }
    if missing.is_empty() {
        return Ok(found);
    }
    // Only after an interrupted round: see the module docs.
    let entries = match std::fs::read_dir(dir.join("cur")) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?.file_name();
        let entry = entry.to_string_lossy();
        let base = entry.split_once(':').map_or(&*entry, |(b, _)| b);
        if missing.contains(base) {
            found.insert(base.to_owned());
        }
    }
    Ok(found)
}

/// The names of our files in `new/` and `cur/` for each queue id in `ids` (the `K` part of
/// [`Namer`]'s names), for when the journal is unreadable: every queued message that has a file
/// in the Maildir must then be taken as delivered, at the price of one listing of the mailbox.
pub fn names_by_queue_id(
    dir: &Path,
    namer: &Namer,
    ids: &HashSet<&str>,
) -> io::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for sub in ["new", "cur"] {
        let entries = match std::fs::read_dir(dir.join(sub)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?.file_name();
            let entry = entry.to_string_lossy();
            let base = entry.split_once(':').map_or(&*entry, |(b, _)| b);
            if let Some(id) = namer.queue_id(base).filter(|id| ids.contains(id)) {
                out.push((id.to_owned(), base.to_owned()));
            }
        }
    }
    Ok(out)
}

fn exists(path: &Path) -> io::Result<bool> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// The bytes of a delivered file: a `Return-Path:` header (RFC 5321 4.4: the envelope sender,
/// recorded at final delivery) and the message, with the chosen line ends. The spool holds the
/// message with CRLF as it travelled; with [`LineEnds::Lf`] every CRLF becomes LF and nothing
/// else changes (a lone CR or LF, which the SMTP server refuses anyway, stays as it is).
pub fn file_bytes(sender: &str, message: &[u8], line_ends: LineEnds) -> Vec<u8> {
    let sender: String = sender.chars().filter(|c| !c.is_control()).collect();
    let eol: &[u8] = match line_ends {
        LineEnds::Lf => b"\n",
        LineEnds::Crlf => b"\r\n",
    };
    let mut out = Vec::with_capacity(message.len() + sender.len() + 20);
    out.extend_from_slice(format!("Return-Path: <{sender}>").as_bytes());
    out.extend_from_slice(eol);
    match line_ends {
        LineEnds::Crlf => out.extend_from_slice(message),
        LineEnds::Lf => {
            let mut rest = message;
            while let Some(i) = rest.windows(2).position(|w| w == b"\r\n") {
                out.extend_from_slice(&rest[..i]);
                out.push(b'\n');
                rest = &rest[i + 2..];
            }
            out.extend_from_slice(rest);
        }
    }
    out
}

/// A failed [`write()`], and whether the file may nevertheless be in `new/`.
#[derive(Debug, thiserror::Error)]
#[error("{source}")]
pub struct WriteError {
    /// The link into `new/` was made (only the sync after it failed): the file is visible and
    /// may survive, so the attempt must be checked by name before another is made.
    pub linked: bool,
    /// What failed.
    pub source: io::Error,
}

/// Writes one file into the Maildir durably: `tmp/NAME`, fsync, link into `new/` (link(2), not
/// rename(2): it refuses to replace an existing file, as maildir(5) asks), fsync `new/` (shared
/// with concurrent writers through `sync`), unlink from `tmp/`. The name must be fresh
/// ([`Namer::next`]).
pub fn write(dir: &Path, name: &str, bytes: &[u8], sync: &DirSync) -> Result<(), WriteError> {
    let tmp = dir.join("tmp").join(name);
    let new = dir.join("new").join(name);
    let mut linked = false;
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::hard_link(&tmp, &new)?;
        linked = true;
        sync.sync(&dir.join("new"))
    })();
    let _ = std::fs::remove_file(&tmp);
    result.map_err(|source| WriteError { linked, source })
}

/// One delivery attempt as the [`Journal`] records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// The queued message.
    pub id: String,
    /// The file name chosen for it.
    pub name: String,
    /// The recipients it carries.
    pub rcpts: Vec<String>,
}

/// The hand-off journal (see the module docs): the attempts of the current round of Maildir
/// deliveries, replaced durably before each round. JSON lines, one [`Attempt`] per line, so an
/// operator can read it.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
}

/// Largest journal read back (a round is bounded by bytes of mail, so a journal far larger than
/// this is damage, not a round).
const MAX_JOURNAL: u64 = 64 << 20;

impl Journal {
    /// The journal at `path` (its directory must exist).
    pub fn new(path: PathBuf) -> Journal {
        Journal { path }
    }

    /// Where it lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The attempts of the last round recorded (none if there is no journal). An unreadable
    /// journal is an `InvalidData` error naming the line.
    pub fn load(&self) -> io::Result<Vec<Attempt>> {
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        if meta.len() > MAX_JOURNAL {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: {} bytes, more than a journal can be",
                    self.path.display(),
                    meta.len()
                ),
            ));
        }
        let text = std::fs::read_to_string(&self.path)?;
        let mut out = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let a: Attempt = serde_json::from_str(line).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} line {}: {e}", self.path.display(), n + 1),
                )
            })?;
            if QueueId::parse(&a.id).is_err() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} line {}: {:?} is not a queue id",
                        self.path.display(),
                        n + 1,
                        a.id
                    ),
                ));
            }
            out.push(a);
        }
        Ok(out)
    }

    /// Replaces the journal with `attempts`, durably (temporary file, fsync, rename, fsync of
    /// the directory) before returning.
    pub fn record(&self, attempts: &[Attempt]) -> io::Result<()> {
        let mut text = String::new();
        for a in attempts {
            text.push_str(&serde_json::to_string(a).map_err(io::Error::other)?);
            text.push('\n');
        }
        crate::durable::replace(&self.path, text.as_bytes())
    }
}

/// What [`clean_tmp`] removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Cleaned {
    /// Our own leftovers (any age: no attempt of ours is running at start-up).
    pub ours: usize,
    /// Other files not touched for [`TMP_MAX_AGE`].
    pub stale: usize,
}

/// Start-up clean-up of `tmp/`: removes every file this gateway left there (an attempt cut off
/// by a crash; its recipients are retried under a new name) and, as maildir(5) allows, any other
/// file not accessed for 36 hours. Call it before the first delivery.
pub fn clean_tmp(dir: &Path, namer: &Namer, now: SystemTime) -> io::Result<Cleaned> {
    let mut cleaned = Cleaned::default();
    let entries = match std::fs::read_dir(dir.join("tmp")) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(cleaned),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = match entry.metadata() {
            Ok(m) if m.is_file() => m,
            _ => continue,
        };
        let ours = namer.is_ours(&name);
        let last_touch = meta.accessed().or_else(|_| meta.modified()).ok();
        let stale = last_touch
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age >= TMP_MAX_AGE);
        if !(ours || stale) {
            continue;
        }
        match std::fs::remove_file(entry.path()) {
            Ok(()) if ours => cleaned.ours += 1,
            Ok(()) => cleaned.stale += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(cleaned)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn names_are_unique_per_attempt_and_recognised_as_ours() {
        let namer = Namer::new("gw:x/y");
        let a = namer.next("0123456789abcdef01234567");
        let b = namer.next("0123456789abcdef01234567");
        assert_ne!(a, b);
        assert!(a.ends_with(".gw\\072x\\057y"), "{a}");
        assert!(a.contains("K0123456789abcdef01234567."), "{a}");
        assert!(namer.is_ours(&a) && namer.is_ours(&b));
        // Another host's names, another MDA's names, and near misses are not ours.
        assert!(!Namer::new("other").is_ours(&a));
        assert!(!namer.is_ours("1700000000.M1P2V3I4.gw\\072x\\057y"));
        assert!(!namer.is_ours("1700000000.MP2Q3Kabc.gw\\072x\\057y"));
        assert!(!namer.is_ours("1700000000.M1P2Q3K.gw\\072x\\057y"));
        assert!(!namer.is_ours("gw\\072x\\057y"));
    }

    #[test]
    fn lf_line_ends_change_only_crlf() {
        let msg = b"Subject: x\r\n\r\nline one\r\nbare\rcr and bare\nlf\r\n";
        assert_eq!(
            file_bytes("a@ship", msg, LineEnds::Lf),
            b"Return-Path: <a@ship>\nSubject: x\n\nline one\nbare\rcr and bare\nlf\n"
        );
        let mut crlf = b"Return-Path: <a@ship>\r\n".to_vec();
        crlf.extend_from_slice(msg);
        assert_eq!(file_bytes("a@ship", msg, LineEnds::Crlf), crlf);
        // Control characters never reach the header (a sender cannot add header lines).
        assert_eq!(
            file_bytes("a@b\r\nX-Evil: 1", b"", LineEnds::Lf),
            b"Return-Path: <a@bX-Evil: 1>\n"
        );
    }

    #[test]
    fn interrupted_attempts_are_found_in_new_or_cur_and_their_leftovers_removed() {
        let dir = tempfile::tempdir().unwrap();
        let md = dir.path().join("Maildir");
        create(&md).unwrap();
        let namer = Namer::new("gw");
        let sync = DirSync::new();
        let found = |names: &[&str]| delivered_names(&md, names, &sync).unwrap();
        // Cut off before the link: only tmp/ has it, so it was not delivered.
        let cut = namer.next("aa");
        std::fs::write(md.join("tmp").join(&cut), b"partial").unwrap();
        assert!(found(&[&cut]).is_empty());
        assert!(!md.join("tmp").join(&cut).exists());
        // Cut off between the link and the unlink: delivered, leftover removed.
        let linked = namer.next("bb");
        write(&md, &linked, b"whole", &sync).unwrap();
        std::fs::write(md.join("tmp").join(&linked), b"whole").unwrap();
        assert_eq!(found(&[&linked, &cut]), HashSet::from([linked.clone()]));
        assert!(!md.join("tmp").join(&linked).exists());
        // Moved to cur/ by a mail reader, with flags, or without.
        std::fs::rename(
            md.join("new").join(&linked),
            md.join("cur").join(format!("{linked}:2,S")),
        )
        .unwrap();
        let plain = namer.next("cc");
        std::fs::write(md.join("cur").join(&plain), b"x").unwrap();
        assert_eq!(
            found(&[&linked, &plain, &cut]),
            HashSet::from([linked.clone(), plain.clone()])
        );
        // A name that only shares a prefix is another file.
        let longer = format!("{cut}0");
        std::fs::write(md.join("cur").join(format!("{longer}:2,")), b"x").unwrap();
        assert!(found(&[&cut]).is_empty());
        // A damaged journal cannot point outside the Maildir.
        assert!(delivered_names(&md, &["../new"], &sync).is_err());
        assert!(delivered_names(&md, &[""], &sync).is_err());
    }

    #[test]
    fn our_files_are_found_by_queue_id_when_the_journal_is_lost() {
        let dir = tempfile::tempdir().unwrap();
        let md = dir.path().join("Maildir");
        create(&md).unwrap();
        let namer = Namer::new("gw");
        let sync = DirSync::new();
        let a = namer.next("aaaa");
        let b = namer.next("bbbb");
        write(&md, &a, b"1", &sync).unwrap();
        write(&md, &b, b"2", &sync).unwrap();
        std::fs::rename(
            md.join("new").join(&b),
            md.join("cur").join(format!("{b}:2,RS")),
        )
        .unwrap();
        // Another host's file for the same id is not ours.
        write(&md, &Namer::new("other").next("aaaa"), b"3", &sync).unwrap();
        let mut got =
            names_by_queue_id(&md, &namer, &HashSet::from(["aaaa", "bbbb", "cccc"])).unwrap();
        got.sort();
        assert_eq!(got, [("aaaa".to_owned(), a), ("bbbb".to_owned(), b)]);
    }

    #[test]
    fn the_journal_round_trips_and_refuses_damage() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::new(dir.path().join("j.jsonl"));
        assert!(j.load().unwrap().is_empty(), "no journal: nothing cut off");
        let attempts = vec![
            Attempt {
                id: "0123456789abcdef01234567".into(),
                name: "1.M1P1Q0K0123456789abcdef01234567.gw".into(),
                rcpts: vec!["\"odd name\"@ship".into(), "ops@ship".into()],
            },
            Attempt {
                id: "0123456789abcdef01234568".into(),
                name: "1.M1P1Q1K0123456789abcdef01234568.gw".into(),
                rcpts: vec!["cdr@ship".into()],
            },
        ];
        j.record(&attempts).unwrap();
        assert_eq!(j.load().unwrap(), attempts);
        j.record(&[]).unwrap();
        assert!(j.load().unwrap().is_empty());
        std::fs::write(j.path(), "{\"id\":\"../x\",\"name\":\"n\",\"rcpts\":[]}\n").unwrap();
        let e = j.load().unwrap_err();
        assert!(
            e.to_string().contains("line 1") && e.to_string().contains("queue id"),
            "{e}"
        );
        std::fs::write(j.path(), "{\"id\":\"0123\"}\n").unwrap();
        assert_eq!(j.load().unwrap_err().kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn write_lands_in_new_and_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let md = dir.path().join("Maildir");
        create(&md).unwrap();
        let name = Namer::new("gw").next("cc");
        write(&md, &name, b"one", &DirSync::new()).unwrap();
        assert_eq!(std::fs::read(md.join("new").join(&name)).unwrap(), b"one");
        assert_eq!(std::fs::read_dir(md.join("tmp")).unwrap().count(), 0);
        assert!(write(&md, &name, b"two", &DirSync::new()).is_err());
        assert_eq!(std::fs::read(md.join("new").join(&name)).unwrap(), b"one");
    }

    #[test]
    fn start_up_removes_our_leftovers_and_stale_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let md = dir.path().join("Maildir");
        create(&md).unwrap();
        let namer = Namer::new("gw");
        let ours = namer.next("dd");
        let foreign = "1700000000.M1P2V3I4.other";
        std::fs::write(md.join("tmp").join(&ours), b"x").unwrap();
        std::fs::write(md.join("tmp").join(foreign), b"x").unwrap();
        let now = SystemTime::now();
        assert_eq!(
            clean_tmp(&md, &namer, now).unwrap(),
            Cleaned { ours: 1, stale: 0 }
        );
        assert!(md.join("tmp").join(foreign).exists());
        // 36 hours later the other MDA's file counts as abandoned.
        let later = now + TMP_MAX_AGE + Duration::from_secs(1);
        assert_eq!(
            clean_tmp(&md, &namer, later).unwrap(),
            Cleaned { ours: 0, stale: 1 }
        );
        assert_eq!(std::fs::read_dir(md.join("tmp")).unwrap().count(), 0);
    }
}
