//! Small state files replaced whole and durably: the EMCON switch, the Maildir hand-off
//! journal, a peer's de-duplication memory when it is compacted, what a link remembers of its
//! peer. Each is written to a temporary file beside it, synced, renamed over the old one, and
//! the directory synced: a crash leaves the old file or the new one, whole, and once
//! [`replace`] returns, the new one survives a power cut (a rename is only durable once its
//! directory is).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Replaces `path` with `bytes`, creating its directory if need be.
pub(crate) fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let tmp = tmp_path(path);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

/// Removes `path`; one that is not there is already gone.
pub(crate) fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// The temporary file of `path`: its whole name and `.tmp` (not `with_extension`, which would
/// give the peers `ship.1` and `ship.2` one temporary file).
fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_file_is_replaced_whole_and_its_directory_made() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("links").join("shore.json");
        replace(&path, b"one").unwrap();
        replace(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("links"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["shore.json"], "a temporary file was left");
    }

    #[test]
    fn names_that_differ_after_a_dot_have_their_own_temporary_files() {
        let a = tmp_path(Path::new("dedup/ship.1"));
        let b = tmp_path(Path::new("dedup/ship.2"));
        assert_ne!(a, b);
        assert_eq!(a, Path::new("dedup/ship.1.tmp"));
        assert_eq!(tmp_path(Path::new("emcon")), Path::new("emcon.tmp"));
    }

    #[test]
    fn a_write_that_cannot_happen_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let blocked = dir.path().join("file");
        std::fs::write(&blocked, b"x").unwrap();
        assert!(replace(&blocked.join("below"), b"y").is_err());
    }
}
