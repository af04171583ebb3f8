//! The U_PDUs of a peer's HMTP session as this gateway received them, on disk, so that a
//! session a lost link cut short can go on after this gateway restarts (`XRESUME`,
//! [`skywave_hmtp::resume`]).
//!
//! The link keeps in memory what its server received of the session being served, and of the
//! last one given up before its end ([`skywave_hmtp::resume::Keeper`]); [`KeptTape`] writes the
//! same U_PDUs to `state_dir/links/<peer>.tape` as they come, and removes the file when
//! nothing is kept any more (the session read its `QUIT`, or the peer gave it up or started
//! another). A link that starts with the file there reads it back as a session given up: the
//! process stopped in the middle of the session or after its cut, and the peer may go on with
//! it. Nothing is synced to disk: a U_PDU lost in a crash only makes the tape shorter, and a
//! tape shorter than the peer's node confirmed is refused at the marker, after which the peer
//! sends its mail again whole, as it would without the file.
//!
//! The file: `skywave tape 1` and a newline, then each U_PDU as its length (four octets,
//! big-endian) and its octets. A last U_PDU cut short by a crash is dropped on reading; a file
//! that is not a tape, or longer than [`Tape::LIMIT`] allows, is reported and removed.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use skywave_hmtp::resume::{Keeper, Tape, Verdict};
use tracing::warn;

/// The first line of a tape file.
const HEADER: &[u8] = b"skywave tape 1\n";

/// A link's [`Keeper`] and its tape on disk, kept in step.
#[derive(Debug)]
pub(super) struct KeptTape {
    keeper: Keeper,
    path: PathBuf,
    /// The file being written, while a session is served.
    file: Option<File>,
    /// Whether the file may be there (so that letting go of it is one removal, not one at
    /// every U_PDU).
    on_disk: bool,
    /// `[hf] resume`: without it nothing is written (the server does not advertise
    /// `XRESUME`, and no peer goes on with a session).
    enabled: bool,
}

impl KeptTape {
    /// The keeper of the link to `peer`, with the session given up that `dir/<peer>.tape`
    /// holds, if it is there; `enabled`: `[hf] resume` (without it a file left there is
    /// removed and none is written).
    pub(super) fn open(dir: &Path, peer: &str, enabled: bool) -> KeptTape {
        let path = dir.join(format!("{peer}.tape"));
        let keeper = match std::fs::read(&path) {
            Ok(_) if !enabled => {
                let _ = std::fs::remove_file(&path);
                Keeper::new()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Keeper::new(),
            Err(e) => {
                warn!(file = %path.display(), error = %e, "cannot read the peer's session kept to go on with; the peer sends it again whole");
                Keeper::new()
            }
            Ok(bytes) => match parse(&bytes) {
                Ok(updus) => Keeper::with_cut_session(&updus),
                Err(why) => {
                    warn!(file = %path.display(), %why, "not a session kept to go on with; removed");
                    let _ = std::fs::remove_file(&path);
                    Keeper::new()
                }
            },
        };
        KeptTape {
            on_disk: keeper.holds_a_cut_session(),
            keeper,
            path,
            file: None,
            enabled,
        }
    }

    /// [`Keeper::check`]; what the check let go of is removed from disk.
    pub(super) fn check(&mut self, updu: &[u8], serving: bool) -> Verdict {
        let verdict = self.keeper.check(updu, serving);
        if !serving && !self.keeper.holds_a_cut_session() {
            self.remove();
        }
        verdict
    }

    /// [`Keeper::started`]: the file now holds the new session's U_PDUs.
    pub(super) fn started(&mut self) {
        self.keeper.started();
        if !self.enabled {
            return;
        }
        self.on_disk = true;
        self.file = match self.create() {
            Ok(f) => Some(f),
            Err(e) => {
                warn!(file = %self.path.display(), error = %e, "cannot keep the peer's session on disk; a restart would forget it");
                None
            }
        };
    }

    fn create(&self) -> std::io::Result<File> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut f = File::create(&self.path)?;
        f.write_all(HEADER)?;
        Ok(f)
    }

    /// [`Keeper::read`], and the U_PDU written after the others.
    pub(super) fn read(&mut self, updu: &[u8]) {
        self.keeper.read(updu);
        let Some(f) = &mut self.file else {
            return;
        };
        let len = u32::try_from(updu.len()).unwrap_or(u32::MAX).to_be_bytes();
        if let Err(e) = f.write_all(&len).and_then(|()| f.write_all(updu)) {
            warn!(file = %self.path.display(), error = %e, "cannot keep the peer's session on disk; a restart would forget it");
            self.remove();
        }
    }

    /// [`Keeper::ended`]; the file goes unless the session is kept.
    pub(super) fn ended(&mut self, without_quit: bool) {
        self.keeper.ended(without_quit);
        self.file = None;
        if !self.keeper.holds_a_cut_session() {
            self.remove();
        }
    }

    /// [`Keeper::holds_a_cut_session`].
    pub(super) fn holds_a_cut_session(&self) -> bool {
        self.keeper.holds_a_cut_session()
    }

    fn remove(&mut self) {
        self.file = None;
        if !std::mem::replace(&mut self.on_disk, false) {
            return;
        }
        if let Err(e) = crate::durable::remove(&self.path) {
            warn!(file = %self.path.display(), error = %e, "cannot remove the peer's session kept on disk");
        }
    }
}

/// For `skywave status`: what `dir/<peer>.tape` holds of the peer's session in progress or
/// cut short, if it is there.
pub(crate) fn describe(dir: &Path, peer: &str) -> Option<String> {
    let len = std::fs::metadata(dir.join(format!("{peer}.tape")))
        .ok()?
        .len();
    let octets = len.saturating_sub(HEADER.len() as u64);
    Some(format!(
        "of its session in progress or cut short, {octets} octets (U_PDUs and their lengths) kept to go on with (XRESUME)"
    ))
}

/// The U_PDUs of a tape file; a last one cut short is dropped.
fn parse(bytes: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut rest = bytes
        .strip_prefix(HEADER)
        .ok_or("it does not start with the tape header")?;
    if bytes.len() > Tape::LIMIT * 2 {
        return Err(format!(
            "{} bytes, more than a session kept can hold",
            bytes.len()
        ));
    }
    let mut out = Vec::new();
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let len = u32::from_be_bytes(*len) as usize;
        let Some((updu, after)) = tail.split_at_checked(len) else {
            // Cut short by a crash while it was written.
            break;
        };
        out.push(updu.to_vec());
        rest = after;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use skywave_hmtp::resume::resumption;

    fn marker(session: &[Vec<u8>], from: usize) -> Vec<u8> {
        resumption(session, from).unwrap().remove(0)
    }

    #[test]
    fn a_session_given_up_outlives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let session: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 300]).collect();
        let mut kept = KeptTape::open(dir.path(), "ship", true);
        kept.started();
        for u in &session[..3] {
            assert_eq!(kept.check(u, true), Verdict::Pass);
            kept.read(u);
        }
        kept.ended(true);
        assert!(dir.path().join("ship.tape").exists());
        // 3 U_PDUs of 300 octets, each with its length.
        assert_eq!(
            describe(dir.path(), "ship").as_deref(),
            Some(
                "of its session in progress or cut short, 912 octets (U_PDUs and their lengths) kept to go on with (XRESUME)"
            )
        );
        assert_eq!(describe(dir.path(), "shore"), None);
        // The restart: read back, a marker for the first two goes on with it.
        let mut again = KeptTape::open(dir.path(), "ship", true);
        assert!(again.holds_a_cut_session());
        match again.check(&marker(&session, 2), false) {
            Verdict::Rebuild { updus, copies } => {
                assert_eq!(updus, session[..3]);
                assert_eq!(copies, 1);
            }
            v => panic!("{v:?}"),
        }
        assert!(!dir.path().join("ship.tape").exists(), "handed over");
    }

    #[test]
    fn a_session_that_read_its_quit_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut kept = KeptTape::open(dir.path(), "ship", true);
        kept.started();
        kept.read(b"EHLO ship\r\n");
        assert!(dir.path().join("ship.tape").exists());
        kept.ended(false);
        assert!(!dir.path().join("ship.tape").exists());
        assert!(!KeptTape::open(dir.path(), "ship", true).holds_a_cut_session());
    }

    #[test]
    fn the_cut_marker_or_a_new_session_lets_it_go() {
        let dir = tempfile::tempdir().unwrap();
        let mut kept = KeptTape::open(dir.path(), "ship", true);
        kept.started();
        kept.read(b"abc");
        kept.ended(true);
        kept.check(skywave_hmtp::cut::MARKER, false);
        assert!(!dir.path().join("ship.tape").exists());
        kept.started();
        kept.read(b"abc");
        kept.ended(true);
        assert!(dir.path().join("ship.tape").exists());
        assert_eq!(kept.check(b"EHLO", false), Verdict::Pass);
        kept.started();
        kept.read(b"EHLO");
        assert!(!kept.holds_a_cut_session());
        kept.ended(false);
        assert!(!dir.path().join("ship.tape").exists());
    }

    #[test]
    fn a_tape_cut_short_by_a_crash_keeps_its_whole_updus() {
        let mut file = HEADER.to_vec();
        for u in [&b"first"[..], b"second"] {
            file.extend_from_slice(&(u.len() as u32).to_be_bytes());
            file.extend_from_slice(u);
        }
        assert_eq!(
            parse(&file).unwrap(),
            vec![b"first".to_vec(), b"second".to_vec()]
        );
        for cut in HEADER.len()..file.len() {
            let got = parse(&file[..cut]).unwrap();
            assert!(got.len() <= 2 && got.iter().all(|u| u == b"first" || u == b"second"));
        }
        assert!(parse(b"something else").is_err());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ship.tape"), b"something else").unwrap();
        assert!(!KeptTape::open(dir.path(), "ship", true).holds_a_cut_session());
        assert!(!dir.path().join("ship.tape").exists(), "removed");
    }

    #[test]
    fn without_resume_nothing_is_written_and_nothing_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut kept = KeptTape::open(dir.path(), "ship", true);
        kept.started();
        kept.read(b"abc");
        assert!(dir.path().join("ship.tape").exists());
        let mut off = KeptTape::open(dir.path(), "ship", false);
        assert!(!off.holds_a_cut_session());
        assert!(
            !dir.path().join("ship.tape").exists(),
            "left from before: removed"
        );
        off.started();
        off.read(b"abc");
        off.ended(true);
        assert!(!dir.path().join("ship.tape").exists());
    }
}
