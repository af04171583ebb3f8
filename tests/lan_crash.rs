//! Crash safety of the LAN side end to end: four concurrent SMTP clients submit mail to the real
//! `skywave run` while the test kills the gateway with SIGKILL at random moments (seeded, so a
//! failure can be replayed) and restarts it on the same state directory, 20 rounds. Afterwards,
//! with one last restart left to finish delivery, every message that got a 250 after DATA is in
//! the Maildir exactly once within 10 s of that restart (still queued counts as a failure);
//! nothing appears twice; `Maildir/tmp` is empty; and the only other messages allowed are ones a
//! client sent but whose 250 was lost because the kill came between the spool write and the reply
//! ("written but unacknowledged").

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "lan_support.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use support::{Gateway, routes};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

const ROUNDS: usize = 20;
const CLIENTS: usize = 4;
/// How long one SMTP reply may take before the client gives up on the connection.
const REPLY: Duration = Duration::from_secs(10);
/// After the last restart, every acknowledged message must be in the Maildir within this.
const DRAIN: Duration = Duration::from_secs(10);

/// A small seeded PRNG (SplitMix64): enough to spread the kill moments reproducibly.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// What the clients saw, shared between them.
#[derive(Default)]
struct Ledger {
    /// Ids whose message body the client started to send (so the gateway may have it).
    sent: BTreeSet<u64>,
    /// Ids that got a 250 after the final ".".
    acked: BTreeSet<u64>,
}

/// Reads one (possibly multi-line) reply; an error on EOF, I/O failure or timeout.
async fn reply(r: &mut BufReader<TcpStream>) -> std::io::Result<String> {
    let mut text = String::new();
    loop {
        let mut line = String::new();
        let n = tokio::time::timeout(REPLY, r.read_line(&mut line))
            .await
            .map_err(|_| std::io::Error::other("reply timed out"))??;
        if n == 0 {
            return Err(std::io::Error::other(format!(
                "connection closed after {text:?}"
            )));
        }
        text.push_str(&line);
        if line.len() < 4 || line.as_bytes()[3] != b'-' {
            return Ok(text);
        }
    }
}

async fn command(r: &mut BufReader<TcpStream>, line: &str, want: &str) -> std::io::Result<()> {
    r.get_mut()
        .write_all(format!("{line}\r\n").as_bytes())
        .await?;
    let text = reply(r).await?;
    if text.starts_with(want) {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("{line} -> {text}")))
    }
}

/// One SMTP session sending messages until an error (normally the kill). Returns on error.
async fn session(
    addr: std::net::SocketAddr,
    next: &AtomicU64,
    ledger: &Mutex<Ledger>,
) -> std::io::Result<()> {
    let stream = tokio::time::timeout(REPLY, TcpStream::connect(addr))
        .await
        .map_err(|_| std::io::Error::other("connect timed out"))??;
    let mut r = BufReader::new(stream);
    let greeting = reply(&mut r).await?;
    if !greeting.starts_with("220") {
        return Err(std::io::Error::other(greeting));
    }
    command(&mut r, "EHLO crash.ship.test", "250").await?;
    // A few messages per session, then QUIT and a new connection, so kills land in every phase.
    for _ in 0..5 {
        let n = next.fetch_add(1, Ordering::SeqCst);
        command(&mut r, "MAIL FROM:<crash@ship.test>", "250").await?;
        command(&mut r, "RCPT TO:<ops@ship.test>", "250").await?;
        command(&mut r, "DATA", "354").await?;
        ledger.lock().await.sent.insert(n);
        let body = format!(
            "From: crash@ship.test\r\nTo: ops@ship.test\r\nMessage-ID: <{n}@crash>\r\n\
             X-Seq: {n}\r\nSubject: crash test {n}\r\n\r\nMessage number {n}.\r\n.\r\n"
        );
        r.get_mut().write_all(body.as_bytes()).await?;
        let text = reply(&mut r).await?;
        if text.starts_with("250") {
            ledger.lock().await.acked.insert(n);
        } else {
            return Err(std::io::Error::other(format!("DATA end -> {text}")));
        }
    }
    command(&mut r, "QUIT", "221").await
}

/// The X-Seq numbers in every file of `dir` (queue files and Maildir files alike hold the
/// message bytes as submitted, headers included).
fn seqs_in(dir: &Path, out: &mut BTreeMap<u64, Vec<String>>) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut files = 0;
    for e in entries.flatten() {
        let path = e.path();
        if !path.is_file() {
            continue;
        }
        files += 1;
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        let ids: Vec<u64> = text
            .match_indices("Message-ID: <")
            .filter_map(|(i, m)| {
                let rest = &text[i + m.len()..];
                rest.split_once("@crash>").and_then(|(n, _)| n.parse().ok())
            })
            .collect();
        assert_eq!(
            ids.len(),
            1,
            "{} holds {} crash ids",
            path.display(),
            ids.len()
        );
        out.entry(ids[0])
            .or_default()
            .push(path.display().to_string());
    }
    files
}

fn file_count(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_concurrent_submission_loses_and_duplicates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let routes_text = routes("\"127.0.0.0/8\"");
    let extra = format!(
        "[delivery]\nmaildir = \"{}\"\n",
        dir.join("Maildir").display()
    );
    let next = Arc::new(AtomicU64::new(1));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut rng = SplitMix(0x5ca1_ab1e_2026);

    let rounds = tokio::time::timeout(Duration::from_secs(120), async {
        for round in 0..ROUNDS {
            let mut gw = Gateway::start(dir, &routes_text, &extra).await;
            let addr = gw.smtp;
            let clients: Vec<_> = (0..CLIENTS)
                .map(|_| {
                    let next = next.clone();
                    let ledger = ledger.clone();
                    tokio::spawn(async move {
                        // Sessions until one fails to connect: the gateway is gone. Bounded by
                        // the round's kill; the cap only guards against a gateway that never dies.
                        for _ in 0..10_000 {
                            if session(addr, &next, &ledger).await.is_err()
                                && TcpStream::connect(addr).await.is_err()
                            {
                                return;
                            }
                        }
                    })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(rng.range(50, 400))).await;
            gw.child.start_kill().unwrap();
            let status = tokio::time::timeout(support::STEP, gw.child.wait())
                .await
                .expect("skywave did not die in time")
                .unwrap();
            assert!(!status.success(), "round {round}: {status:?}");
            for c in clients {
                c.await.unwrap();
            }
        }
    })
    .await;
    assert!(rounds.is_ok(), "the {ROUNDS} kill rounds took over 120 s");

    // One last start: recovery and delivery of what is left. Every acknowledged message must be
    // in the Maildir within DRAIN of this start: still queued then is a failure, not "not lost".
    let gw = Gateway::start(dir, &routes_text, &extra).await;
    let started = std::time::Instant::now();
    let queue = dir.join("state/spool/queue");
    let new = dir.join("Maildir/new");
    let cur = dir.join("Maildir/cur");
    let drained = loop {
        if file_count(&queue) == 0 {
            break Some(started.elapsed());
        }
        if started.elapsed() > DRAIN {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let code = gw.stop().await;
    assert_eq!(code, 0, "skywave did not stop cleanly");

    let mut seen = BTreeMap::new();
    let delivered = seqs_in(&new, &mut seen) + seqs_in(&cur, &mut seen);
    let queued = seqs_in(&queue, &mut seen);
    let held = file_count(&dir.join("state/spool/hold"));
    let tmp_left = file_count(&dir.join("Maildir/tmp"));
    let dead = file_count(&dir.join("state/spool/dead"));

    let ledger = ledger.lock().await;
    let sent = ledger.sent.len();
    let acked = &ledger.acked;
    let duplicates: Vec<_> = seen.iter().filter(|(_, files)| files.len() > 1).collect();
    let lost: Vec<_> = acked.iter().filter(|n| !seen.contains_key(n)).collect();
    let extras: Vec<u64> = seen
        .keys()
        .filter(|n| !acked.contains(n))
        .copied()
        .collect();
    let unsent: Vec<_> = extras.iter().filter(|n| !ledger.sent.contains(n)).collect();
    println!(
        "crash test: rounds {ROUNDS}, clients {CLIENTS}, sent {sent}, acknowledged {}, \
         delivered {delivered}, still queued {queued}, held {held}, dead {dead}, \
         written but unacknowledged {}, lost {}, duplicated {}, left in Maildir/tmp {tmp_left}; \
         queue drained {:.2} s after the last restart",
        acked.len(),
        extras.len(),
        lost.len(),
        duplicates.len(),
        drained.map_or(f64::NAN, |d| d.as_secs_f64())
    );
    assert!(!acked.is_empty(), "no message was ever acknowledged");
    assert!(
        drained.is_some(),
        "{queued} message(s) still queued {} s after the last restart",
        DRAIN.as_secs()
    );
    assert_eq!(queued, 0, "still queued at the end");
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
    assert_eq!(tmp_left, 0, "files left in Maildir/tmp");
    assert!(
        duplicates.is_empty(),
        "appear more than once (id, files): {duplicates:?}"
    );
    assert!(unsent.is_empty(), "appear but were never sent: {unsent:?}");
    assert_eq!(
        (held, dead),
        (0, 0),
        "messages held or dead after the crashes"
    );
}
