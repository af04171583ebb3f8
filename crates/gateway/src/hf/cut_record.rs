//! A session of ours cut short by a lost link, on disk, so that it can go on after this gateway
//! restarts (`XRESUME`, [`skywave_hmtp::resume`]).
//!
//! The HMTP link keeps a session cut short in memory (its client, its U_PDUs, how many of them
//! the peer's node confirmed) until its mail is due again. A restart would lose it, and the next
//! session would start with the cut marker and carry the mail again whole. So the link also
//! writes `state_dir/links/<peer>.cut`: not the U_PDUs, but what builds the same session again
//! from the spool (its messages and the recipients each went to, the client's settings) and
//! what proves the rebuilt one is the same (the count and a CRC-32 of all its U_PDUs), with the
//! count the peer's node confirmed. A link that starts with the file there builds the session
//! again when it would start one; only if every message still waits for the same recipients
//! and the rebuilt U_PDUs match does it go on with it, otherwise the file is dropped and the
//! mail goes whole after the cut marker, as before. The file goes when the session has gone on,
//! or is given up.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use skywave_hmtp::{ClientSettings, Compression};
use tracing::warn;

/// What builds a session cut short again, and proves it the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct CutRecord {
    /// The session's messages in order: queue id, and the recipients it carried them to.
    pub(super) messages: Vec<(String, Vec<String>)>,
    /// The client's settings: its EHLO name, the MTU, the compression (`none`, `lzw9` to
    /// `lzw16`, `deflate`), the preset dictionary, and what it took the peer to offer.
    pub(super) hostname: String,
    pub(super) mtu: usize,
    pub(super) compression: String,
    pub(super) dictionary: Option<u32>,
    pub(super) dsn: bool,
    pub(super) eight_bit_mime: bool,
    pub(super) smtputf8: Option<bool>,
    /// U_PDUs the peer's node confirmed, in order from the first.
    pub(super) from: usize,
    /// The session's U_PDUs, and [`skywave_hmtp::resume::digest`] of all of them.
    pub(super) total: usize,
    pub(super) digest: u32,
    /// The STANAG 5066 priority its U_PDUs went with.
    pub(super) priority: u8,
}

impl CutRecord {
    /// The record of a session whose client had `settings`.
    pub(super) fn new(
        messages: Vec<(String, Vec<String>)>,
        settings: &ClientSettings,
        updus: &[Vec<u8>],
        from: usize,
        priority: u8,
    ) -> CutRecord {
        CutRecord {
            messages,
            hostname: settings.hostname.clone(),
            mtu: settings.mtu,
            compression: match settings.compression {
                Compression::None => "none".into(),
                Compression::Lzw(bits) => format!("lzw{bits}"),
                Compression::Deflate => "deflate".into(),
            },
            dictionary: settings.dictionary,
            dsn: settings.dsn,
            eight_bit_mime: settings.eight_bit_mime,
            smtputf8: settings.smtputf8,
            from,
            total: updus.len(),
            digest: skywave_hmtp::resume::digest(updus),
            priority,
        }
    }

    /// The client's settings again; `None` when the record names a compression it does not
    /// know.
    pub(super) fn settings(&self) -> Option<ClientSettings> {
        let compression = match self.compression.as_str() {
            "none" => Compression::None,
            "deflate" => Compression::Deflate,
            lzw => Compression::Lzw(lzw.strip_prefix("lzw")?.parse().ok()?),
        };
        let mut s = ClientSettings::new(self.hostname.clone(), self.mtu, compression);
        s.dictionary = self.dictionary;
        s.dsn = self.dsn;
        s.eight_bit_mime = self.eight_bit_mime;
        s.smtputf8 = self.smtputf8;
        Some(s)
    }

    /// Whether `updus`, the session built again, are the ones the record was made of.
    pub(super) fn is_the_same(&self, updus: &[Vec<u8>]) -> bool {
        updus.len() == self.total && skywave_hmtp::resume::digest(updus) == self.digest
    }
}

fn path(dir: &Path, peer: &str) -> PathBuf {
    dir.join(format!("{peer}.cut"))
}

/// Writes the record of `peer`'s session cut short (durably: a crash right after must find
/// it); a failure is reported, and only costs the resumption after a restart.
pub(super) fn write(dir: &Path, peer: &str, record: &CutRecord) {
    let written = std::fs::create_dir_all(dir).and_then(|()| {
        let text = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        crate::durable::replace(&path(dir, peer), &text)
    });
    if let Err(e) = written {
        warn!(file = %path(dir, peer).display(), error = %e, "cannot record the session cut short; after a restart it would go again whole");
    }
}

/// The record of `peer`'s session cut short, if there is one that reads back.
pub(super) fn read(dir: &Path, peer: &str) -> Option<CutRecord> {
    let bytes = std::fs::read(path(dir, peer)).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(r) => Some(r),
        Err(e) => {
            warn!(file = %path(dir, peer).display(), error = %e, "not a record of a session cut short; removed");
            remove(dir, peer);
            None
        }
    }
}

/// Drops the record: the session went on, or was given up.
pub(super) fn remove(dir: &Path, peer: &str) {
    if let Err(e) = crate::durable::remove(&path(dir, peer)) {
        warn!(file = %path(dir, peer).display(), error = %e, "cannot remove the record of a session cut short");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_knows_its_session() {
        let dir = tempfile::tempdir().unwrap();
        let links = dir.path().join("links");
        let mut settings = ClientSettings::new("gw.ship.example", 2048, Compression::Lzw(12));
        settings.dictionary = Some(0xf6ea_95f6);
        settings.dsn = true;
        let updus = vec![b"one".to_vec(), b"two".to_vec(), b"three".to_vec()];
        let r = CutRecord::new(
            vec![("Q1".into(), vec!["ops@shore.example".into()])],
            &settings,
            &updus,
            2,
            7,
        );
        assert_eq!(read(&links, "shore"), None);
        write(&links, "shore", &r);
        let back = read(&links, "shore").unwrap();
        assert_eq!(back, r);
        assert_eq!(back.settings().unwrap(), settings);
        assert!(back.is_the_same(&updus));
        assert!(!back.is_the_same(&updus[..2]));
        assert!(!back.is_the_same(&[b"one".to_vec(), b"two".to_vec(), b"thre3".to_vec()]));
        remove(&links, "shore");
        assert_eq!(read(&links, "shore"), None);
        // Not a `.json` file: `skywave status` lists those as peers.
        write(&links, "shore", &r);
        assert!(crate::hf::peer_memory::read_all(&links).is_empty());
        std::fs::write(links.join("shore.cut"), b"{").unwrap();
        assert_eq!(read(&links, "shore"), None);
        assert!(!links.join("shore.cut").exists(), "removed");
        let mut odd = r.clone();
        odd.compression = "zstd".into();
        assert_eq!(odd.settings(), None);
    }
}
