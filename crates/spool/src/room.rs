//! The spool's reserve of free space.
//!
//! A gateway whose disk fills up cannot work the mail it already holds: every status change
//! after a session (delivered, deferred, bounced) is a complete new queue file, and DSNs,
//! de-duplication records and the links' state files need room too. So new mail is refused
//! (SMTP `452 4.3.1`, a temporary failure the sender retries) while taking it would leave the
//! spool's file system with less than `SpoolConfig::min_free_space`, and the mail already
//! queued keeps moving. Postfix does the same with `queue_minfree`.
//!
//! The intake asks [`crate::Spool::admit`] before it writes a message, with the message's size
//! (or the size a client declared with `SIZE=`); `skywave status` and the metrics endpoint
//! show [`crate::Spool::room`].

use std::fmt;
use std::io;
use std::path::Path;

/// Fewest free inodes new mail must leave: every message is one file, and each status change
/// writes a new one before the old goes.
pub const MIN_FREE_FILES: u64 = 1000;

/// What a file system has left, as [`available_space`] measures it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// Bytes an unprivileged process may still write (`f_bavail` blocks of `f_frsize`).
    pub bytes: u64,
    /// Inodes still free (`f_favail`); `None` when the file system does not count them (it
    /// reports no inodes at all, as btrfs does).
    pub files: Option<u64>,
}

/// Measures the file system holding `path` with `statvfs(3)`.
pub fn available_space(path: &Path) -> io::Result<Space> {
    let s = rustix::fs::statvfs(path)?;
    Ok(Space {
        bytes: s.f_bavail.saturating_mul(s.f_frsize),
        files: (s.f_files > 0).then_some(s.f_favail),
    })
}

/// The spool's free space against its reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// What the file system has left.
    pub space: Space,
    /// Bytes new mail must leave free (`SpoolConfig::min_free_space`).
    pub reserve: u64,
}

impl Room {
    /// Whether a message of `incoming` bytes may come in.
    pub fn takes(&self, incoming: u64) -> bool {
        self.reserve
            .checked_add(incoming)
            .is_some_and(|needed| self.space.bytes >= needed)
            && self.space.files.is_none_or(|f| f >= MIN_FREE_FILES)
    }

    /// Whether no new mail at all may come in (the reserve itself is touched).
    pub fn exhausted(&self) -> bool {
        !self.takes(0)
    }
}

impl fmt::Display for Room {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} free, {} kept in reserve",
            Bytes(self.space.bytes),
            Bytes(self.reserve)
        )?;
        match self.space.files {
            Some(n) if n < MIN_FREE_FILES => {
                write!(f, "; {n} inodes free, fewer than the {MIN_FREE_FILES} kept")
            }
            _ => Ok(()),
        }
    }
}

/// A byte count for people: decimal units with three significant figures ("1.25 GB"), as
/// `df -H` prints them, and exact below a kilobyte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["kB", "MB", "GB", "TB", "PB", "EB"];
        if self.0 < 1000 {
            return write!(f, "{} B", self.0);
        }
        let mut value = self.0 as f64 / 1000.0;
        let mut unit = 0;
        while value >= 999.5 && unit + 1 < UNITS.len() {
            value /= 1000.0;
            unit += 1;
        }
        let decimals = if value < 9.995 {
            2
        } else if value < 99.95 {
            1
        } else {
            0
        };
        write!(f, "{value:.decimals$} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(bytes: u64, files: Option<u64>, reserve: u64) -> Room {
        Room {
            space: Space { bytes, files },
            reserve,
        }
    }

    #[test]
    fn new_mail_must_leave_the_reserve() {
        let r = room(100_000_000, None, 60_000_000);
        assert!(r.takes(40_000_000));
        assert!(!r.takes(40_000_001));
        assert!(!r.exhausted());
        assert!(room(59_999_999, None, 60_000_000).exhausted());
        // A reserve of 0 takes anything the disk can hold.
        assert!(room(10, None, 0).takes(10));
        assert!(!room(10, None, 0).takes(11));
        // Nothing overflows near u64::MAX.
        assert!(!room(u64::MAX, None, u64::MAX).takes(1));
    }

    #[test]
    fn too_few_inodes_refuse_new_mail() {
        assert!(room(1 << 40, Some(MIN_FREE_FILES), 0).takes(1));
        assert!(!room(1 << 40, Some(MIN_FREE_FILES - 1), 0).takes(1));
        assert_eq!(
            room(5_000, Some(12), 100_000_000).to_string(),
            "5.00 kB free, 100 MB kept in reserve; 12 inodes free, fewer than the 1000 kept"
        );
    }

    #[test]
    fn bytes_read_as_df_h_prints_them() {
        let cases = [
            (0, "0 B"),
            (999, "999 B"),
            (1000, "1.00 kB"),
            (1_234_567, "1.23 MB"),
            (99_949_999, "99.9 MB"),
            (100_000_000, "100 MB"),
            (999_499_999, "999 MB"),
            (999_600_000, "1.00 GB"),
            (u64::MAX, "18.4 EB"),
        ];
        for (n, text) in cases {
            assert_eq!(Bytes(n).to_string(), text, "{n}");
        }
    }

    #[test]
    fn the_file_system_under_a_directory_is_measured() {
        let dir = std::env::temp_dir();
        let space = available_space(&dir).expect("statvfs of the temporary directory");
        // Whatever the machine, a writable temporary directory has some room.
        assert!(space.bytes > 0, "{space:?}");
        let missing = dir.join("no such directory, surely");
        assert!(available_space(&missing).is_err());
    }
}
