//! What an HMTP link remembers of its peer across a restart, on disk.
//!
//! The link scheduler ([`super::hmtp_link`]) learns four things that a restart must not
//! forget, one small JSON file per peer (`state_dir/links/<peer>.json`):
//!
//! - Whether a session of ours may be cut short at the peer. A session goes to the 5066 node
//!   whole; if the process dies before the replies come (a crash, a power cut, an operator's
//!   restart), the node may have given up part of it, and the peer's server then holds the
//!   first part and waits for the rest. A session started at once after the restart would be
//!   read as that rest (see `SendFailed` in the link: the cut message is accepted with the new
//!   session's text, or, compressed, with a corrupt body that de-duplication then prefers to
//!   the intact copy). So the flag is set before a session's submission goes to the node and
//!   cleared when replies come or when a hold after a cut has run out; a link that starts with
//!   it set treats the last session as cut. That is conservative: a session whose replies were
//!   lost on the air also leaves it set, and the next start waits (or sends the cut marker)
//!   when nothing was needed.
//! - Whether the peer's server honours the cut marker (`XCUT`), from its last EHLO reply, so
//!   that such a cut costs no hold after a restart either, and whether it goes on with a cut
//!   session (`XRESUME`).
//! - The preset deflate dictionary it last advertised (`XDICT`), so that the first session
//!   after a restart is as short as the ones before.
//! - Whether its server offers `DSN`, `8BITMIME` and `SMTPUTF8`: a batch goes before any EHLO
//!   reply, so what the peer said last time decides whether the DSN parameters go with the
//!   mail, whether 8-bit text goes as it is or made 7-bit, and whether UTF-8 header fields go
//!   as they are or made ASCII (a skywave peer gets them as they are whatever it said).
//!
//! A file that cannot be read back is reported and taken as the cautious state (a session may
//! be cut, nothing known of the peer); one that cannot be written is reported and the link goes
//! on with what it holds in memory. `skywave status` lists every peer's file ([`read_all`]).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tracing::warn;

/// What is remembered of one peer.
///
/// Read forward-compatibly: a field this version does not know (one a later version added) is
/// passed over, so that rolling back a gateway does not make it take its last session as cut;
/// a field it knows but a file lacks (one an earlier version did not write) is not known yet.
/// Only `unanswered` must be there, since a file without it says nothing of the one thing a
/// restart must not get wrong.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PeerMemory {
    /// A session of ours went to the 5066 node and neither its replies nor the end of a hold
    /// after a cut have come since: the peer's server may hold the first part of it.
    pub(crate) unanswered: bool,
    /// Whether the peer's server advertised `XCUT` in its last EHLO reply (`None`: no reply
    /// seen yet).
    pub(crate) xcut: Option<bool>,
    /// Whether the peer's server advertised `XRESUME` in its last EHLO reply (`None`: no
    /// reply seen yet): a session of ours cut short goes on from where its node had it.
    pub(crate) xresume: Option<bool>,
    /// The preset dictionary of the peer's last EHLO reply that this gateway knows.
    pub(crate) dictionary: Option<u32>,
    /// Whether the peer's server advertised `DSN` in its last EHLO reply (`None`: no reply
    /// seen yet): a session sends the DSN parameters only when it did.
    pub(crate) dsn: Option<bool>,
    /// Whether the peer's server advertised `8BITMIME` in its last EHLO reply (`None`: no
    /// reply seen yet, and it is assumed): a session makes 8-bit text 7-bit only when it did
    /// not.
    pub(crate) eight_bit_mime: Option<bool>,
    /// Whether the peer's server advertised `SMTPUTF8` in its last EHLO reply (`None`: no
    /// reply seen yet): a peer other than a skywave gateway gets UTF-8 header fields made
    /// ASCII when it did not.
    pub(crate) smtputf8: Option<bool>,
}

impl fmt::Display for PeerMemory {
    /// One line for `skywave status`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let said = |offered: Option<bool>| match offered {
            Some(true) => "yes",
            Some(false) => "no",
            None => "no reply yet",
        };
        write!(
            f,
            "cut marker (XCUT): {}; resume (XRESUME): {}; DSN: {}; 8BITMIME: {}; SMTPUTF8: {}; dictionary: ",
            said(self.xcut),
            said(self.xresume),
            said(self.dsn),
            said(self.eight_bit_mime),
            said(self.smtputf8)
        )?;
        match self.dictionary {
            // As the EHLO keyword writes it (`XDICT f6ea95f6`).
            Some(id) => write!(f, "{id:08x}")?,
            None => f.write_str("none")?,
        }
        f.write_str(if self.unanswered {
            "; last session unanswered (a restart takes it as cut)"
        } else {
            "; last session answered"
        })
    }
}

/// What is remembered of every peer with a file under `dir`, by name (empty when there is no
/// such directory yet).
pub(crate) fn read_all(dir: &Path) -> Vec<(String, PeerMemory)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PeerMemory)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_str()?.strip_suffix(".json")?.to_owned();
            let memory = MemoryFile::open(dir, &name).current;
            Some((name, memory))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A peer's memory and the file behind it.
#[derive(Debug)]
pub(super) struct MemoryFile {
    path: PathBuf,
    /// What the file holds (or would, had a write not failed).
    current: PeerMemory,
}

impl MemoryFile {
    /// Reads `dir/<peer>.json`; a missing file is a peer never talked to.
    pub(super) fn open(dir: &Path, peer: &str) -> Self {
        let path = dir.join(format!("{peer}.json"));
        let current = match std::fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => PeerMemory::default(),
            read => match read.map_err(|e| e.to_string()).and_then(|bytes| {
                serde_json::from_slice::<PeerMemory>(&bytes).map_err(|e| e.to_string())
            }) {
                Ok(m) => m,
                Err(error) => {
                    warn!(file = %path.display(), %error, "cannot read what this link remembers of its peer; taking the last session as cut");
                    PeerMemory {
                        unanswered: true,
                        ..PeerMemory::default()
                    }
                }
            },
        };
        MemoryFile { path, current }
    }

    /// What is remembered.
    pub(super) fn get(&self) -> &PeerMemory {
        &self.current
    }

    /// Changes the memory with `f` and writes it durably if it changed
    /// ([`crate::durable::replace`]).
    pub(super) fn update(&mut self, f: impl FnOnce(&mut PeerMemory)) {
        let mut next = self.current.clone();
        f(&mut next);
        if next == self.current {
            return;
        }
        self.current = next;
        if let Err(e) = self.write() {
            warn!(file = %self.path.display(), error = %e, "cannot record what this link knows of its peer; a restart would forget it");
        }
    }

    fn write(&self) -> std::io::Result<()> {
        let text = serde_json::to_vec(&self.current).map_err(std::io::Error::other)?;
        // Durable once this returns, rename and directory included: the flag set before a
        // session goes out must survive a power cut right after.
        crate::durable::replace(&self.path, &text)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_peer_never_talked_to_has_nothing_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let m = MemoryFile::open(dir.path(), "shore");
        assert_eq!(m.get(), &PeerMemory::default());
        assert!(!dir.path().join("shore.json").exists());
    }

    #[test]
    fn what_was_learnt_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = MemoryFile::open(&dir.path().join("links"), "shore");
        m.update(|m| {
            m.unanswered = true;
            m.xcut = Some(true);
            m.dictionary = Some(1);
        });
        let again = MemoryFile::open(&dir.path().join("links"), "shore");
        assert_eq!(
            again.get(),
            &PeerMemory {
                unanswered: true,
                xcut: Some(true),
                xresume: None,
                dictionary: Some(1),
                dsn: None,
                eight_bit_mime: None,
                smtputf8: None,
            }
        );
        // Replies came: the flag goes, the rest stays.
        let mut again = again;
        again.update(|m| m.unanswered = false);
        let third = MemoryFile::open(&dir.path().join("links"), "shore");
        assert!(!third.get().unanswered);
        assert_eq!(third.get().xcut, Some(true));
        assert!(!dir.path().join("links/shore.json.tmp").exists());
    }

    #[test]
    fn an_unreadable_file_is_taken_as_a_cut_session() {
        let dir = tempfile::tempdir().unwrap();
        for text in [
            &b"{\"unanswered\": fal"[..],
            b"\xff\xfe",
            b"{\"hold\": 3}",
            b"{\"xcut\": true}",
            b"42",
        ] {
            std::fs::write(dir.path().join("shore.json"), text).unwrap();
            let m = MemoryFile::open(dir.path(), "shore");
            assert!(m.get().unanswered, "{text:?}");
            assert_eq!(m.get().xcut, None);
        }
    }

    #[test]
    fn files_of_earlier_and_later_versions_are_read() {
        let read = |text: &[u8]| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("shore.json"), text).unwrap();
            MemoryFile::open(dir.path(), "shore").get().clone()
        };
        // Written before DSN, 8BITMIME and SMTPUTF8 were remembered: nothing known of them.
        assert_eq!(
            read(br#"{"unanswered":false,"xcut":false,"dictionary":null}"#),
            PeerMemory {
                unanswered: false,
                xcut: Some(false),
                xresume: None,
                dictionary: None,
                dsn: None,
                eight_bit_mime: None,
                smtputf8: None,
            }
        );
        // Written by a later version: read past the fields it added.
        assert_eq!(
            read(br#"{"unanswered":false,"xcut":true,"dsn":true,"window_seen":"06:00"}"#),
            PeerMemory {
                unanswered: false,
                xcut: Some(true),
                xresume: None,
                dsn: Some(true),
                ..PeerMemory::default()
            }
        );
    }

    #[test]
    fn every_peer_is_listed_for_status() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_all(&dir.path().join("links")).is_empty());
        MemoryFile::open(dir.path(), "shore").update(|m| {
            m.xcut = Some(true);
            m.dictionary = Some(1);
            m.dsn = Some(true);
            m.eight_bit_mime = Some(false);
            m.smtputf8 = Some(false);
        });
        MemoryFile::open(dir.path(), "base").update(|m| m.unanswered = true);
        std::fs::write(dir.path().join("shore.json.tmp"), b"half written").unwrap();
        let all = read_all(dir.path());
        let lines: Vec<String> = all.iter().map(|(n, m)| format!("{n}: {m}")).collect();
        assert_eq!(
            lines,
            [
                "base: cut marker (XCUT): no reply yet; resume (XRESUME): no reply yet; DSN: no reply yet; 8BITMIME: no reply yet; SMTPUTF8: no reply yet; dictionary: none; last session unanswered (a restart takes it as cut)",
                "shore: cut marker (XCUT): yes; resume (XRESUME): no reply yet; DSN: yes; 8BITMIME: no; SMTPUTF8: no; dictionary: 00000001; last session answered"
            ]
        );
    }

    #[test]
    fn an_unchanged_memory_is_not_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = MemoryFile::open(dir.path(), "shore");
        m.update(|m| m.xcut = Some(false));
        let path = dir.path().join("shore.json");
        std::fs::remove_file(&path).unwrap();
        m.update(|m| m.xcut = Some(false));
        assert!(!path.exists(), "rewritten although nothing changed");
        m.update(|m| m.unanswered = true);
        assert!(path.exists());
    }

    #[test]
    fn a_write_that_fails_leaves_the_memory_in_step_in_this_process() {
        let dir = tempfile::tempdir().unwrap();
        let links = dir.path().join("links");
        let mut m = MemoryFile::open(&links, "shore");
        assert!(!m.get().unanswered);
        // A file where the directory should be: every write fails.
        std::fs::write(&links, b"not a directory").unwrap();
        m.update(|m| m.unanswered = true);
        assert!(m.get().unanswered);
        // And a link that starts with it so takes the cautious state.
        assert!(MemoryFile::open(&links, "shore").get().unanswered);
    }
}
