//! What this gateway's own sessions have heard from each peer lately: when the peer last
//! answered one, and since when they have gone unanswered.
//!
//! The links write it (HMTP, CFTP and SMTP over TCP, at the end of each session of ours, and
//! the SMTP-over-TCP link after each probe of a silent peer, `hf::tcp_link`); the
//! peer fallback reads it ([`crate::fallback`]): a peer that has answered none of our sessions
//! for as long as its `fallback_after` is taken as down, and the mail it was tried for moves to
//! its fallback at once instead of each message waiting out its own `fallback_after`; when it
//! answers again, what fell back while it was silent and still waits comes back. Only answers
//! to our own sessions count: a peer whose sessions reach us while ours do not reach it (HF
//! links are often better one way than the other) is not answering us.
//!
//! Kept in memory and copied to `state_dir/heard.json` for `skywave status`. A restart keeps
//! when each peer last answered but starts the silence again: the gateway heard nothing while
//! it was down, which says nothing of the peer, so a peer is only taken as down on sessions
//! this run has seen go unanswered. A file that cannot be read or written is reported and
//! changes nothing else.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tracing::warn;

/// The file's name under the state directory.
const FILE: &str = "heard.json";

/// What our sessions have heard from one peer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerHeard {
    /// When the peer last answered a session of ours (unix seconds).
    pub answered: Option<u64>,
    /// When the first of our sessions since then to go unanswered ended (unix seconds); `None`
    /// when the last one was answered, or none has ended since the start.
    pub silent_since: Option<u64>,
    /// Our sessions and probes unanswered since.
    pub unanswered: u32,
}

impl PeerHeard {
    /// Whether the peer has answered none of our sessions for `secs` seconds at unix second
    /// `now` (and at least one went unanswered).
    pub fn silent_for(&self, secs: u64, now: u64) -> bool {
        self.silent_since
            .is_some_and(|since| now.saturating_sub(since) >= secs)
    }

    /// One line for `skywave status`, times as `ago` writes them.
    pub fn describe(&self, now: u64, ago: impl Fn(u64) -> String) -> String {
        let answered = self.answered.map_or("never answered yet".to_owned(), |t| {
            format!("answered {} ago", ago(now.saturating_sub(t)))
        });
        match self.silent_since {
            Some(t) => format!(
                "{answered}; {} attempt(s) unanswered since {} ago",
                self.unanswered,
                ago(now.saturating_sub(t))
            ),
            None => answered,
        }
    }
}

/// What our sessions have heard from every peer, shared by the links and the fallback.
#[derive(Debug)]
pub struct Heard {
    /// Where the copy for `skywave status` goes (`None`: nowhere, in tests and simulations
    /// without a state directory of their own).
    path: Option<PathBuf>,
    peers: Mutex<BTreeMap<String, PeerHeard>>,
    /// Woken when a peer answers or a session goes unanswered: the fallback looks at once.
    pub changed: Notify,
}

impl Heard {
    /// What the file under `state_dir` says, with every peer's silence started again (see the
    /// module's docs).
    pub fn open(state_dir: &Path) -> Heard {
        let path = state_dir.join(FILE);
        let peers = read(state_dir)
            .into_iter()
            .map(|(name, h)| {
                (
                    name,
                    PeerHeard {
                        answered: h.answered,
                        ..PeerHeard::default()
                    },
                )
            })
            .collect();
        let heard = Heard {
            path: Some(path),
            peers: Mutex::new(peers),
            changed: Notify::new(),
        };
        heard.write();
        heard
    }

    /// A peer answered a session of ours at unix second `now`.
    pub fn answered(&self, peer: &str, now: u64) {
        self.update(peer, |h| {
            *h = PeerHeard {
                answered: Some(now),
                silent_since: None,
                unanswered: 0,
            }
        });
    }

    /// A session of ours to `peer` ended unanswered at unix second `now`.
    pub fn unanswered(&self, peer: &str, now: u64) {
        self.update(peer, |h| {
            h.silent_since.get_or_insert(now);
            h.unanswered = h.unanswered.saturating_add(1);
        });
    }

    /// What has been heard from `peer`.
    pub fn get(&self, peer: &str) -> PeerHeard {
        self.lock().get(peer).copied().unwrap_or_default()
    }

    fn update(&self, peer: &str, f: impl FnOnce(&mut PeerHeard)) {
        f(self.lock().entry(peer.to_owned()).or_default());
        self.write();
        self.changed.notify_waiters();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, PeerHeard>> {
        self.peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Copies what is known to the file, for `skywave status` (not durably: it is a record for
    /// the operator, not state a restart needs).
    fn write(&self) {
        let Some(path) = &self.path else { return };
        let text = match serde_json::to_vec_pretty(&*self.lock()) {
            Ok(t) => t,
            Err(e) => {
                warn!(error = %e, "cannot record what was heard from the peers");
                return;
            }
        };
        let tmp = path.with_extension("json.tmp");
        if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)) {
            warn!(file = %path.display(), error = %e, "cannot record what was heard from the peers; `skywave status` will not show it");
        }
    }
}

impl Default for Heard {
    /// Nothing heard yet, and no file.
    fn default() -> Heard {
        Heard {
            path: None,
            peers: Mutex::default(),
            changed: Notify::new(),
        }
    }
}

/// What `state_dir/heard.json` says of every peer (empty when there is no such file; a file
/// that cannot be read is reported and taken as empty).
pub fn read(state_dir: &Path) -> BTreeMap<String, PeerHeard> {
    let path = state_dir.join(FILE);
    match std::fs::read(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
        read => match read
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        {
            Ok(peers) => peers,
            Err(error) => {
                warn!(file = %path.display(), %error, "cannot read what was heard from the peers");
                BTreeMap::new()
            }
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn silence_counts_from_the_first_unanswered_session_since_the_last_answer() {
        let heard = Heard::default();
        assert_eq!(heard.get("sat"), PeerHeard::default());
        assert!(!heard.get("sat").silent_for(0, 100));
        heard.answered("sat", 100);
        heard.unanswered("sat", 200);
        heard.unanswered("sat", 500);
        let h = heard.get("sat");
        assert_eq!(
            h,
            PeerHeard {
                answered: Some(100),
                silent_since: Some(200),
                unanswered: 2
            }
        );
        assert!(!h.silent_for(600, 799));
        assert!(h.silent_for(600, 800));
        heard.answered("sat", 900);
        assert!(!heard.get("sat").silent_for(0, 1000));
        assert_eq!(heard.get("other"), PeerHeard::default());
    }

    #[test]
    fn a_restart_keeps_the_last_answer_and_starts_the_silence_again() {
        let dir = tempfile::tempdir().unwrap();
        let heard = Heard::open(dir.path());
        heard.answered("sat", 100);
        heard.unanswered("sat", 200);
        heard.unanswered("hf", 300);
        assert_eq!(read(dir.path()).get("sat"), Some(&heard.get("sat")));
        let again = Heard::open(dir.path());
        assert_eq!(
            again.get("sat"),
            PeerHeard {
                answered: Some(100),
                ..PeerHeard::default()
            }
        );
        assert_eq!(again.get("hf"), PeerHeard::default());
        // The file says so too, for `skywave status`.
        assert_eq!(read(dir.path()).get("sat"), Some(&again.get("sat")));
        // A file that cannot be read is nothing heard.
        std::fs::write(dir.path().join(FILE), b"{not json").unwrap();
        assert!(read(dir.path()).is_empty());
        assert_eq!(Heard::open(dir.path()).get("sat"), PeerHeard::default());
    }

    #[test]
    fn a_line_for_the_operator() {
        let ago = |s: u64| format!("{s} s");
        let h = PeerHeard {
            answered: Some(100),
            silent_since: Some(200),
            unanswered: 3,
        };
        assert_eq!(
            h.describe(260, ago),
            "answered 160 s ago; 3 attempt(s) unanswered since 60 s ago"
        );
        assert_eq!(PeerHeard::default().describe(0, ago), "never answered yet");
    }
}
