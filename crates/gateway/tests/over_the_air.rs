//! Mail over the air, end to end in virtual time: a ship and a shore gateway (the production
//! daemon code) joined by the bundled emulator's STANAG 5066 nodes, HMTP on SAP 3.
//!
//! Mail is submitted through the gateway's intake (as a LAN client would, without a socket:
//! real sockets and paused time do not mix) and read back from the receiving side's Maildir.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use skywave_gateway::demo::{Pair, PairOptions};
use skywave_gateway::hf::{Direction, TransferRecord};

fn options(dir: &Path, compression: &str) -> PairOptions {
    let mut o = PairOptions::new(dir.to_path_buf());
    o.ship_smtp = SocketAddr::from(([127, 0, 0, 1], 0));
    o.shore_smtp = SocketAddr::from(([127, 0, 0, 1], 0));
    o.channel = "awgn".into();
    o.snr_db = 20.0;
    o.compression = compression.into();
    o
}

/// A message with a unique Message-ID and a body that compresses like mail does.
fn message(from: &str, to: &str, n: usize, size: usize) -> Vec<u8> {
    let mut m = format!(
        "From: <{from}>\r\nTo: <{to}>\r\nSubject: report {n}\r\nMessage-ID: <{n}.{from}>\r\n\r\n"
    );
    let mut i = 0;
    while m.len() < size {
        m.push_str(&format!(
            "Line {i} of report {n}: position 47N 008W, course 270, speed 12 knots, all well.\r\n"
        ));
        i += 1;
    }
    m.into_bytes()
}

/// Every message in a Maildir's `new/`, by Message-ID, with its text.
fn maildir(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir.join("new")) else {
        return out;
    };
    for e in entries {
        let text = String::from_utf8(std::fs::read(e.unwrap().path()).unwrap()).unwrap();
        let id = text
            .lines()
            .find_map(|l| l.strip_prefix("Message-ID: "))
            .unwrap_or("none")
            .to_owned();
        out.entry(id).or_default().push(text);
    }
    out
}

/// Waits (in virtual time) until `dir` holds `n` messages or `limit` passes.
async fn wait_for(dir: &Path, n: usize, limit: Duration) -> BTreeMap<String, Vec<String>> {
    let end = tokio::time::Instant::now() + limit;
    loop {
        let m = maildir(dir);
        if m.values().map(Vec::len).sum::<usize>() >= n || tokio::time::Instant::now() >= end {
            return m;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn check_delivered(got: &BTreeMap<String, Vec<String>>, sent: &[(String, Vec<u8>)], by_host: &str) {
    assert_eq!(
        got.len(),
        sent.len(),
        "messages delivered: {:?}",
        got.keys()
    );
    for (id, body) in sent {
        let copies = got.get(id).unwrap_or_else(|| panic!("{id} not delivered"));
        assert_eq!(copies.len(), 1, "{id} delivered {} times", copies.len());
        let text = &copies[0];
        let original = String::from_utf8(body.clone()).unwrap();
        assert!(text.ends_with(&original), "{id}: body changed");
        // The receiving gateway's Received header names the peer, its 5066 address and the
        // queue id.
        assert!(
            text.contains(&format!("by {by_host} (skywave) with ESMTP id ")),
            "{id}: no Received header of {by_host}:\n{}",
            &text[..text.len().min(600)]
        );
        assert!(text.contains("[5066:"), "{id}: no 5066 address in Received");
    }
}

async fn exchange(compression: &str, n: usize) -> (Pair, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let pair = Pair::start(&options(dir.path(), compression))
        .await
        .unwrap();
    let mut to_shore = Vec::new();
    let mut to_ship = Vec::new();
    for i in 0..n {
        let m = message("alice@ship.example", "ops@shore.example", i, 600 + 97 * i);
        pair.ship
            .submit("alice@ship.example", &["ops@shore.example"], &m)
            .await
            .unwrap();
        to_shore.push((format!("<{i}.alice@ship.example>"), m));
        let m = message("hq@shore.example", "captain@ship.example", i, 400 + 53 * i);
        pair.shore
            .submit("hq@shore.example", &["captain@ship.example"], &m)
            .await
            .unwrap();
        to_ship.push((format!("<{i}.hq@shore.example>"), m));
    }
    let got = wait_for(&pair.shore_maildir, n, Duration::from_secs(3600)).await;
    check_delivered(&got, &to_shore, "gw.shore.example");
    let got = wait_for(&pair.ship_maildir, n, Duration::from_secs(3600)).await;
    check_delivered(&got, &to_ship, "gw.ship.example");
    // Nothing more arrives later (no duplicate from a retry).
    tokio::time::sleep(Duration::from_secs(1800)).await;
    check_delivered(&maildir(&pair.shore_maildir), &to_shore, "gw.shore.example");
    check_delivered(&maildir(&pair.ship_maildir), &to_ship, "gw.ship.example");
    (pair, dir)
}

fn outgoing(records: &[TransferRecord]) -> Vec<&TransferRecord> {
    records
        .iter()
        .filter(|r| r.direction == Direction::Out)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn hmtp_plain_both_ways_exactly_once() {
    let (pair, _dir) = exchange("none", 5).await;
    let ship = pair.ship.hf().unwrap().transfers();
    assert!(
        outgoing(&ship)
            .iter()
            .all(|r| r.wire_bytes == r.plain_bytes),
        "{ship:?}"
    );
    pair.stop().await;
}

#[tokio::test(start_paused = true)]
async fn hmtp_lzw16_both_ways_exactly_once() {
    let (pair, _dir) = exchange("lzw16", 5).await;
    let ship = pair.ship.hf().unwrap().transfers();
    assert!(
        outgoing(&ship).iter().all(|r| r.wire_bytes < r.plain_bytes),
        "{ship:?}"
    );
    pair.stop().await;
}

#[tokio::test(start_paused = true)]
async fn hmtp_deflate_both_ways_exactly_once() {
    let (pair, _dir) = exchange("deflate", 5).await;
    let ship = pair.ship.hf().unwrap().transfers();
    let out = outgoing(&ship);
    assert!(!out.is_empty());
    assert!(
        out.iter().all(|r| r.wire_bytes * 2 < r.plain_bytes),
        "{ship:?}"
    );
    assert!(
        out.iter()
            .all(|r| r.result == "completed" || r.result.starts_with("yielded")),
        "{ship:?}"
    );
    pair.stop().await;
}
