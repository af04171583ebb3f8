//! Per-transfer records, like a JNOS trace: one line per session with a peer, saying what went
//! over the air and how well the link was used.
//!
//! Each record is logged (tracing, target `skywave::transfer`), kept in memory for the demo's
//! report, and appended as one JSON line to `state_dir/transfers.jsonl`, which
//! `skywave status` reads back. The file is an operator's record, not state: a failed write is
//! logged and changes nothing else.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::io::{BufRead, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

/// Records kept in memory.
const KEEP: usize = 256;
/// Bytes read from the end of the file by [`read_tail`].
const TAIL_BYTES: u64 = 256 * 1024;

/// Which way the mail went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Our session: mail sent to the peer.
    Out,
    /// The peer's session: mail received from it.
    In,
}

/// One session with a peer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferRecord {
    /// The peer's name.
    pub peer: String,
    /// `hmtp`, `cftp` or `smtp`.
    pub protocol: String,
    /// Which way.
    pub direction: Direction,
    /// Start, unix seconds (fractional).
    pub start: f64,
    /// End, unix seconds (fractional).
    pub end: f64,
    /// Messages in the session.
    pub messages: u64,
    /// Messages the receiving side accepted.
    pub accepted: u64,
    /// Protocol bytes sent before compression (commands and message text).
    pub plain_bytes: u64,
    /// Bytes handed to the bearer after compression.
    pub wire_bytes: u64,
    /// Protocol bytes received (replies) before decompression, and after.
    pub reply_plain_bytes: u64,
    /// Reply bytes on the bearer.
    pub reply_wire_bytes: u64,
    /// U_PDUs (or TCP writes) both ways.
    pub updus: u64,
    /// Transmissions (turns of the link) the protocol used: 2 for an HMTP session.
    pub transmissions: u64,
    /// Retransmissions the bearer reported (`None` where it cannot know: the SIS hides the
    /// 5066 ARQ's repeats).
    pub retransmissions: Option<u64>,
    /// How the session ended.
    pub result: String,
}

impl TransferRecord {
    /// Seconds from start to end.
    pub fn elapsed(&self) -> f64 {
        (self.end - self.start).max(0.0)
    }

    /// Message bits delivered per second of session: plain bytes sent over elapsed time. `None`
    /// for a session that delivered nothing (it failed or was refused): its bytes
    /// crossed the air but no mail did, and a rate would flatter it.
    pub fn effective_bps(&self) -> Option<f64> {
        let e = self.elapsed();
        (self.accepted > 0 && e > 0.0).then(|| self.plain_bytes as f64 * 8.0 / e)
    }

    /// Wire bytes over plain bytes, both ways (1.0 without compression).
    pub fn compression_ratio(&self) -> f64 {
        let plain = self.plain_bytes + self.reply_plain_bytes;
        if plain == 0 {
            1.0
        } else {
            (self.wire_bytes + self.reply_wire_bytes) as f64 / plain as f64
        }
    }
}

impl fmt::Display for TransferRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let retx = self
            .retransmissions
            .map_or_else(|| "n/a".to_owned(), |r| r.to_string());
        write!(
            f,
            "{dir} {peer} {proto}: {msgs} msg ({acc} accepted) in {el:.1} s, {plain} B -> {wire} B \
             on air ({pct:.0}%), replies {rw} B, {updus} U_PDUs, {tx} transmissions, \
             retransmissions {retx}, {bps}, {result}",
            dir = match self.direction {
                Direction::Out => "->",
                Direction::In => "<-",
            },
            peer = self.peer,
            proto = self.protocol,
            msgs = self.messages,
            acc = self.accepted,
            el = self.elapsed(),
            plain = self.plain_bytes,
            wire = self.wire_bytes,
            pct = if self.plain_bytes > 0 {
                self.wire_bytes as f64 * 100.0 / self.plain_bytes as f64
            } else {
                100.0
            },
            rw = self.reply_wire_bytes,
            updus = self.updus,
            tx = self.transmissions,
            // The receiving side sees a session only from its first U_PDU on, after the ARQ
            // has already carried most of it: a rate computed there would be meaningless.
            bps = match self.direction {
                Direction::Out => match self.effective_bps() {
                    Some(bps) => format!("{bps:.0} bit/s effective"),
                    None => "nothing delivered".to_owned(),
                },
                Direction::In => "rate known to the sender".to_owned(),
            },
            result = self.result,
        )
    }
}

/// Where records go.
#[derive(Debug)]
pub struct TransferLog {
    path: PathBuf,
    /// Size past which the file is rotated ([`ROTATE_BYTES`]).
    limit: u64,
    recent: Mutex<VecDeque<TransferRecord>>,
}

impl TransferLog {
    /// A log appending to `path`.
    pub fn new(path: PathBuf) -> Self {
        TransferLog {
            path,
            limit: ROTATE_BYTES,
            recent: Mutex::new(VecDeque::new()),
        }
    }

    /// Logs, keeps and appends one record.
    pub fn record(&self, r: TransferRecord) {
        info!(target: "skywave::transfer", "{r}");
        // The same figures for Prometheus, per protocol (hmtp, cftp, smtp, pmul, pmul-ip) and
        // direction; for P_MUL the duration runs to the last acknowledgement.
        let labels = [
            ("protocol", r.protocol.clone()),
            (
                "direction",
                match r.direction {
                    Direction::Out => "out".to_owned(),
                    Direction::In => "in".to_owned(),
                },
            ),
        ];
        metrics::counter!("skywave_transfers_total", &labels).increment(1);
        metrics::counter!("skywave_transfer_messages_total", &labels).increment(r.accepted);
        metrics::counter!("skywave_transfer_wire_bytes_total", &labels)
            .increment(r.wire_bytes + r.reply_wire_bytes);
        metrics::counter!("skywave_transfer_pdus_total", &labels).increment(r.updus);
        metrics::counter!("skywave_transfer_retransmissions_total", &labels)
            .increment(r.retransmissions.unwrap_or(0));
        metrics::histogram!("skywave_transfer_seconds", &labels).record(r.elapsed());
        if let Err(e) = self.append(&r) {
            warn!(file = %self.path.display(), error = %e, "cannot append the transfer record");
        }
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() == KEEP {
            recent.pop_front();
        }
        recent.push_back(r);
    }

    /// The records kept in memory, oldest first.
    pub fn recent(&self) -> Vec<TransferRecord> {
        self.recent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    fn append(&self, r: &TransferRecord) -> std::io::Result<()> {
        let mut line = serde_json::to_string(r).map_err(std::io::Error::other)?;
        line.push('\n');
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        f.write_all(line.as_bytes())?;
        // A gateway runs for years: past its limit the file becomes the one older generation
        // (the one before that is dropped), so the state directory does not grow without end.
        if f.metadata()?.len() > self.limit {
            std::fs::rename(&self.path, older(&self.path))?;
        }
        Ok(())
    }
}

/// Size at which `transfers.jsonl` is rotated: some 150,000 sessions, years of a ship's and
/// weeks of a busy base's.
const ROTATE_BYTES: u64 = 64 * 1024 * 1024;

/// The older generation of a transfer log: `transfers.jsonl.1`.
fn older(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

/// The last `n` records of a transfer log file (lines that do not parse are skipped: the file
/// is for people and may have been edited or cut).
pub fn read_tail(path: &Path, n: usize) -> std::io::Result<Vec<TransferRecord>> {
    let mut out = read_last_bytes(path, TAIL_BYTES)?;
    let skip = out.len().saturating_sub(n);
    out.drain(..skip);
    Ok(out)
}

/// Bytes read from the end of the file for [`day_by_peer`]: some 20,000 sessions, more than a
/// base with a large fleet holds in a day.
const DAY_BYTES: u64 = 8 * 1024 * 1024;

/// What went over the air with one peer in a time window, one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Traffic {
    /// Sessions.
    pub sessions: u64,
    /// Messages the receiving side accepted.
    pub messages: u64,
    /// Bytes on the bearer, both ways (the data and the replies).
    pub wire_bytes: u64,
    /// Seconds the sessions took, from start to end.
    pub seconds: f64,
}

/// The sessions with each peer since `since` (unix seconds): ours to the peer and the peer's
/// to us, by peer name, from the last records of `path` (the day's, unless a fleet's day
/// outgrows the last 8 MiB the reader takes).
pub fn day_by_peer(
    path: &Path,
    since: f64,
) -> std::io::Result<BTreeMap<String, (Traffic, Traffic)>> {
    let mut out: BTreeMap<String, (Traffic, Traffic)> = BTreeMap::new();
    for r in read_last_bytes(path, DAY_BYTES)? {
        if r.start < since {
            continue;
        }
        let (sent, received) = out.entry(r.peer.clone()).or_default();
        let t = match r.direction {
            Direction::Out => sent,
            Direction::In => received,
        };
        t.sessions += 1;
        t.messages += r.accepted;
        t.wire_bytes += r.wire_bytes + r.reply_wire_bytes;
        t.seconds += r.elapsed();
    }
    Ok(out)
}

/// The records in the last `bytes` of the log, oldest first: of the file, and of its older
/// generation when the file (just rotated) holds fewer bytes than that.
fn read_last_bytes(path: &Path, bytes: u64) -> std::io::Result<Vec<TransferRecord>> {
    let current = std::fs::metadata(path).map_or(0, |m| m.len());
    let mut out = if current < bytes {
        read_file_tail(&older(path), bytes - current)?
    } else {
        Vec::new()
    };
    out.extend(read_file_tail(path, bytes)?);
    Ok(out)
}

/// The records in the last `bytes` of one file (the first, likely cut, line dropped).
fn read_file_tail(path: &Path, bytes: u64) -> std::io::Result<Vec<TransferRecord>> {
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let start = len.saturating_sub(bytes);
    f.seek(SeekFrom::Start(start))?;
    let mut lines: Vec<String> = std::io::BufReader::new(f)
        .lines()
        .collect::<Result<_, _>>()?;
    if start > 0 && !lines.is_empty() {
        // The first line read is probably cut.
        lines.remove(0);
    }
    Ok(lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn rec(peer: &str) -> TransferRecord {
        TransferRecord {
            peer: peer.into(),
            protocol: "hmtp".into(),
            direction: Direction::Out,
            start: 100.0,
            end: 110.0,
            messages: 3,
            accepted: 3,
            plain_bytes: 3000,
            wire_bytes: 1200,
            reply_plain_bytes: 200,
            reply_wire_bytes: 100,
            updus: 3,
            transmissions: 2,
            retransmissions: None,
            result: "completed".into(),
        }
    }

    #[test]
    fn records_round_trip_through_the_file_and_figures_add_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("transfers.jsonl");
        let log = TransferLog::new(path.clone());
        log.record(rec("a"));
        log.record(rec("b"));
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"not json\n")
            .unwrap();
        log.record(rec("c"));
        let tail = read_tail(&path, 2).unwrap();
        assert_eq!(
            tail.iter().map(|r| r.peer.as_str()).collect::<Vec<_>>(),
            ["b", "c"]
        );
        assert_eq!(log.recent().len(), 3);
        let r = rec("x");
        assert_eq!(r.elapsed(), 10.0);
        assert_eq!(r.effective_bps(), Some(2400.0));
        let none = TransferRecord {
            accepted: 0,
            result: "no reply (timeout or link lost)".into(),
            ..rec("y")
        };
        assert_eq!(none.effective_bps(), None);
        assert!(none.to_string().contains("nothing delivered"), "{none}");
        assert!((r.compression_ratio() - 1300.0 / 3200.0).abs() < 1e-9);
        let text = r.to_string();
        assert!(
            text.contains("3 msg (3 accepted) in 10.0 s, 3000 B -> 1200 B on air (40%)"),
            "{text}"
        );
        assert!(read_tail(&dir.path().join("none"), 5).unwrap().is_empty());
    }

    #[test]
    fn the_log_rotates_past_its_limit_and_is_read_across_the_two_generations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("transfers.jsonl");
        let line = serde_json::to_string(&rec("a")).unwrap().len() as u64 + 1;
        // Two records fit, the third rotates the file.
        let log = TransferLog {
            limit: 2 * line + 10,
            ..TransferLog::new(path.clone())
        };
        for peer in ["a", "b", "c", "d", "e", "f", "g"] {
            log.record(rec(peer));
        }
        // a b c went to .1, then d e f rotated over it; g is in the file.
        let read = |p: &Path| std::fs::read_to_string(p).unwrap().lines().count();
        assert_eq!(read(&path), 1);
        assert_eq!(read(&older(&path)), 3);
        assert!(!dir.path().join("transfers.jsonl.1.1").exists());
        let peers = |v: Vec<TransferRecord>| v.into_iter().map(|r| r.peer).collect::<Vec<_>>();
        // The short file is read with the end of its older generation.
        assert_eq!(peers(read_tail(&path, 3).unwrap()), ["e", "f", "g"]);
        assert_eq!(
            peers(read_last_bytes(&path, 2 * line + 1).unwrap()),
            ["f", "g"]
        );
        let day = day_by_peer(&path, 0.0).unwrap();
        assert_eq!(day.len(), 4, "{day:?}");
    }

    #[test]
    fn a_day_of_sessions_adds_up_per_peer_and_direction() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("transfers.jsonl");
        let log = TransferLog::new(path.clone());
        let at = |peer: &str, start: f64, direction| TransferRecord {
            start,
            end: start + 10.0,
            direction,
            ..rec(peer)
        };
        log.record(at("shore", 1_000.0, Direction::Out));
        log.record(at("shore", 90_000.0, Direction::Out));
        log.record(at("shore", 90_100.0, Direction::Out));
        log.record(TransferRecord {
            accepted: 1,
            ..at("shore", 90_200.0, Direction::In)
        });
        log.record(at("ship2", 95_000.0, Direction::In));
        let day = day_by_peer(&path, 90_000.0 - 86_400.0 + 1.0).unwrap();
        assert_eq!(day.keys().collect::<Vec<_>>(), ["ship2", "shore"]);
        let (out, inn) = day["shore"];
        // The session of 1000 s is more than a day before the last look's start.
        assert_eq!(
            out,
            Traffic {
                sessions: 2,
                messages: 6,
                wire_bytes: 2600,
                seconds: 20.0
            }
        );
        assert_eq!((inn.sessions, inn.messages), (1, 1));
        assert_eq!(day["ship2"].0, Traffic::default());
        assert!(
            day_by_peer(&dir.path().join("none"), 0.0)
                .unwrap()
                .is_empty()
        );
    }
}
