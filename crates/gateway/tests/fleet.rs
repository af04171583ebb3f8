//! Fleet mail over the air, end to end in virtual time: a base and several ship gateways (the
//! production daemon code) on one emulated HF frequency, the ships members of one STANAG 5066
//! group address. Mail for two or more ships goes once by ACP 142 P_MUL (MULE bodies); a ship
//! under EMCON receives without transmitting and acknowledges once EMCON is lifted.
//!
//! Mail is submitted through the base's intake (no sockets: real sockets and paused time do
//! not mix) and read back from the ships' Maildirs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use skywave_gateway::fleet::{Fleet, FleetOptions, ship_domain};
use skywave_gateway::hf::{Direction, TransferRecord};
use skywave_spool::Target;

fn options(dir: &Path, ships: usize) -> FleetOptions {
    let mut o = FleetOptions::new(dir.to_path_buf(), ships);
    o.base_smtp = "127.0.0.1:0".parse().unwrap();
    o.ship_smtp_port = 0;
    o.snr_db = 20.0;
    o.min_backoff = 60;
    o
}

/// A message with a unique Message-ID and `size` bytes: an order and a base64 attachment (a
/// chart, say), which deflate cannot shrink much, so the multicast has many PDUs.
fn message(to: &[String], n: usize, size: usize) -> Vec<u8> {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut m = format!(
        "From: <hq@base.example>\r\nTo: {}\r\nSubject: fleet order {n}\r\nMessage-ID: <{n}.hq@base.example>\r\n\r\n\
         Rendezvous 47N 008W at 0600Z, course 270, speed 12 knots. Chart attached.\r\n\r\n",
        to.join(", ")
    );
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ n as u64;
    let mut line = 0;
    while m.len() < size {
        // xorshift: deterministic, incompressible enough.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        m.push(char::from(B64[(x % 64) as usize]));
        line += 1;
        if line == 76 {
            m.push_str("\r\n");
            line = 0;
        }
    }
    // Mail ends with a line end (SMTP adds one where it is missing).
    m.push_str("\r\n");
    m.into_bytes()
}

/// Submits message `n` (`size` bytes) to the base for `local@` each of the first `ships` ships;
/// returns its queue id and its text.
async fn to_every_ship(
    fleet: &Fleet,
    ships: usize,
    local: &str,
    n: usize,
    size: usize,
) -> (skywave_spool::QueueId, Vec<u8>) {
    to_every_ship_headed(fleet, ships, local, n, size, "").await
}

/// [`to_every_ship`] with `header` (whole lines) in front of the message's own.
async fn to_every_ship_headed(
    fleet: &Fleet,
    ships: usize,
    local: &str,
    n: usize,
    size: usize,
    header: &str,
) -> (skywave_spool::QueueId, Vec<u8>) {
    let rcpts: Vec<String> = (0..ships)
        .map(|i| format!("{local}@{}", ship_domain(i)))
        .collect();
    let mut body = header.as_bytes().to_vec();
    body.extend(message(&rcpts, n, size));
    let refs: Vec<&str> = rcpts.iter().map(String::as_str).collect();
    let id = fleet
        .base
        .submit("hq@base.example", &refs, &body)
        .await
        .unwrap();
    (id, body)
}

/// The Maildir files in `new/` of `dir`, as text.
fn maildir(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir.join("new")) else {
        return Vec::new();
    };
    entries
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect()
}

/// Waits (in virtual time) until every Maildir in `dirs` holds at least `n` messages, or
/// `limit` passes; returns how long it took.
async fn wait_all(dirs: &[std::path::PathBuf], n: usize, limit: Duration) -> Duration {
    let start = tokio::time::Instant::now();
    while start.elapsed() < limit {
        if dirs.iter().all(|d| maildir(d).len() >= n) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    start.elapsed()
}

/// The message arrived exactly once, byte-identical (LF line ends in the Maildir), with the
/// ship's Received header naming the base's 5066 address.
fn check_once(dir: &Path, body: &[u8], ship: usize) {
    let got = maildir(dir);
    assert_eq!(got.len(), 1, "ship {}: {} copies", ship + 1, got.len());
    let original = String::from_utf8(body.to_vec())
        .unwrap()
        .replace("\r\n", "\n");
    if !got[0].ends_with(&original) {
        let common = got[0]
            .bytes()
            .rev()
            .zip(original.bytes().rev())
            .take_while(|(a, b)| a == b)
            .count();
        panic!(
            "ship {}: body changed; the last {common} bytes agree; got {} bytes, sent {}:\n{}",
            ship + 1,
            got[0].len(),
            original.len(),
            &got[0][got[0].len().saturating_sub(common + 300)..got[0].len().saturating_sub(common)]
        );
    }
    assert!(
        got[0].contains(&format!("by gw.{} (skywave) with ", ship_domain(ship)))
            && got[0].contains("base/5066:0.0.1.1"),
        "ship {}: Received header:\n{}",
        ship + 1,
        &got[0][..got[0].len().min(500)]
    );
}

fn multicast_out(records: &[TransferRecord]) -> Vec<&TransferRecord> {
    records
        .iter()
        .filter(|r| r.direction == Direction::Out && r.protocol == "pmul")
        .collect()
}

/// Waits until the base's spool is empty (every recipient final) or `limit` passes.
async fn wait_spool_empty(fleet: &Fleet, limit: Duration) -> bool {
    let start = tokio::time::Instant::now();
    while start.elapsed() < limit {
        if fleet.base.spool().entries().unwrap().count() == 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    false
}

/// Every ship gets `body` within `limit`, the base's spool empties within the hour after, and
/// half an hour later every ship still has it exactly once.
async fn every_ship_has_it_once(fleet: &Fleet, body: &[u8], limit: Duration) {
    wait_all(&fleet.ship_maildirs, 1, limit).await;
    assert!(
        wait_spool_empty(fleet, Duration::from_secs(3600)).await,
        "base spool not empty"
    );
    tokio::time::sleep(Duration::from_secs(1800)).await;
    for (i, d) in fleet.ship_maildirs.iter().enumerate() {
        check_once(d, body, i);
    }
}

#[tokio::test(start_paused = true)]
async fn one_message_to_five_ships_goes_once_and_a_weak_ship_is_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), 5);
    // Ship 4 hears the base at 3 dB: it loses some Data_PDUs and needs repairs.
    o.ship_snr_db = vec![(3, 3.0)];
    o.repeats = 0;
    let fleet = Fleet::start(&o).await.unwrap();
    let (_, body) = to_every_ship(&fleet, 5, "captain", 1, 6000).await;
    let took = wait_all(&fleet.ship_maildirs, 1, Duration::from_secs(3600)).await;
    for (i, d) in fleet.ship_maildirs.iter().enumerate() {
        check_once(d, &body, i);
    }
    assert!(
        wait_spool_empty(&fleet, Duration::from_secs(3600)).await,
        "base spool not empty"
    );
    // Nothing more arrives later.
    tokio::time::sleep(Duration::from_secs(1800)).await;
    for (i, d) in fleet.ship_maildirs.iter().enumerate() {
        check_once(d, &body, i);
    }
    let records = fleet.base.hf().transfers();
    let out = multicast_out(&records);
    assert_eq!(out.len(), 1, "one multicast: {out:#?}");
    assert!(
        out[0].result.starts_with("acknowledged by 5 of 5 ships"),
        "{}",
        out[0].result
    );
    let repairs = out[0].retransmissions.unwrap();
    let pdus = out[0].updus;
    // Not five unicast sessions: no HMTP out of the base at all.
    assert!(
        records
            .iter()
            .all(|r| r.direction != Direction::Out || r.protocol == "pmul"),
        "{records:#?}"
    );
    let c = fleet.subnet.counters();
    eprintln!(
        "5 ships: all delivered after {:.0} s; {pdus} P_MUL PDUs ({repairs} repairs); base {} transmissions, {} bytes on air",
        took.as_secs_f64(),
        c.nodes[0].transmissions,
        c.nodes[0].bytes_on_air
    );
    assert!(
        repairs > 0,
        "the weak ship needed no repair: the test proves nothing"
    );
    fleet.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_emcon_ship_receives_silently_and_acknowledges_when_emcon_is_lifted() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), 3);
    o.emcon = vec![2];
    let fleet = Fleet::start(&o).await.unwrap();
    let (id, body) = to_every_ship(&fleet, 3, "ops", 2, 3000).await;
    wait_all(&fleet.ship_maildirs, 1, Duration::from_secs(3600)).await;
    for (i, d) in fleet.ship_maildirs.iter().enumerate() {
        check_once(d, &body, i);
    }
    // Two hours on: the EMCON ship has the mail but has put nothing on the air, and the base
    // still waits for it.
    tokio::time::sleep(Duration::from_secs(7200)).await;
    let c = fleet.subnet.counters();
    assert_eq!(c.nodes[3].transmissions, 0, "the EMCON ship transmitted");
    assert!(
        c.nodes[1].transmissions > 0 && c.nodes[2].transmissions > 0,
        "the others acked"
    );
    let file = fleet.base.spool().load(&id).unwrap().1;
    let waiting: Vec<_> = file
        .envelope
        .recipients
        .iter()
        .filter(|r| !r.state.is_final())
        .map(|r| r.address.clone())
        .collect();
    assert_eq!(
        waiting,
        ["ops@ship3.example"],
        "only the EMCON ship's recipient waits"
    );
    assert!(matches!(&file.envelope.recipients[2].target, Target::Peer(p) if p == "ship3"));

    fleet.ship(2).unwrap().set_emcon(false);
    assert!(
        wait_spool_empty(&fleet, Duration::from_secs(1800)).await,
        "not done after EMCON"
    );
    let c = fleet.subnet.counters();
    assert!(
        c.nodes[3].transmissions > 0,
        "the ship acknowledged after EMCON"
    );
    // Still exactly once everywhere.
    tokio::time::sleep(Duration::from_secs(600)).await;
    for (i, d) in fleet.ship_maildirs.iter().enumerate() {
        check_once(d, &body, i);
    }
    fleet.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_ship_killed_in_mid_multicast_gets_the_message_after_restart_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), 3);
    o.repeats = 0;
    let mut fleet = Fleet::start(&o).await.unwrap();
    // About 40 s on the air at 1200 bit/s: the kill lands in the middle.
    let (_, body) = to_every_ship(&fleet, 3, "ops", 3, 12_000).await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    fleet.stop_ship(1).await;
    assert!(
        maildir(&fleet.ship_maildirs[1]).is_empty(),
        "killed too late"
    );
    tokio::time::sleep(Duration::from_secs(120)).await;
    fleet.start_ship(1).await.unwrap();
    every_ship_has_it_once(&fleet, &body, Duration::from_secs(3600)).await;
    fleet.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_bases_5066_node_down_a_minute_in_mid_multicast_costs_no_ship_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), 3);
    o.repeats = 0;
    let fleet = Fleet::start(&o).await.unwrap();
    // About 40 s on the air at 1200 bit/s: the crash lands in the middle. The base's node
    // loses every U_PDU it held and its gateway's SIS connection, and hears nothing for a
    // minute.
    let (_, body) = to_every_ship(&fleet, 3, "ops", 3, 12_000).await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(
        fleet.ship_maildirs.iter().all(|d| maildir(d).is_empty()),
        "crashed too late"
    );
    assert!(fleet.subnet.restart_node(0, Duration::from_secs(60)));
    every_ship_has_it_once(&fleet, &body, Duration::from_secs(4 * 3600)).await;
    let c = fleet.subnet.counters();
    assert_eq!(c.nodes[0].restarts, 1, "{c}");
    // The crash cut the transmission the base was making: the ships lost its rest.
    assert!(c.nodes[0].lost_dpdus > 0, "{c}");
    fleet.stop().await;
}

#[tokio::test(start_paused = true)]
async fn mail_for_one_ship_goes_by_hmtp_and_for_the_fleet_to_every_ship() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::start(&options(dir.path(), 3)).await.unwrap();
    let one = message(&["ops@ship2.example".to_owned()], 4, 800);
    fleet
        .base
        .submit("hq@base.example", &["ops@ship2.example"], &one)
        .await
        .unwrap();
    let all = message(&["notices@fleet.example".to_owned()], 5, 900);
    fleet
        .base
        .submit("hq@base.example", &["notices@fleet.example"], &all)
        .await
        .unwrap();
    wait_all(&fleet.ship_maildirs, 1, Duration::from_secs(3600)).await;
    assert!(
        wait_spool_empty(&fleet, Duration::from_secs(3600)).await,
        "base spool not empty"
    );
    tokio::time::sleep(Duration::from_secs(600)).await;
    for (i, d) in fleet.ship_maildirs.iter().enumerate() {
        let got = maildir(d);
        let want = if i == 1 { 2 } else { 1 };
        assert_eq!(got.len(), want, "ship {}: {got:#?}", i + 1);
        assert!(
            got.iter()
                .any(|m| m.contains("Message-ID: <5.hq@base.example>"))
        );
    }
    let records = fleet.base.hf().transfers();
    let outs: Vec<(&str, &str)> = records
        .iter()
        .filter(|r| r.direction == Direction::Out)
        .map(|r| (r.peer.as_str(), r.protocol.as_str()))
        .collect();
    assert!(outs.contains(&("ship2", "hmtp")), "{outs:?}");
    assert!(outs.contains(&("fleet", "pmul")), "{outs:?}");
    fleet.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_big_batch_for_one_ship_does_not_hold_up_a_short_message_for_another() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::start(&options(dir.path(), 2)).await.unwrap();
    // 40 kB of attachments for ship 1 (several minutes of air at 1200 bit/s)...
    let big: Vec<Vec<u8>> = (0..4)
        .map(|n| message(&["ops@ship1.example".to_owned()], 10 + n, 10_000))
        .collect();
    for b in &big {
        fleet
            .base
            .submit("hq@base.example", &["ops@ship1.example"], b)
            .await
            .unwrap();
    }
    // ...and a short message for ship 2 at the same time.
    let small = message(&["captain@ship2.example".to_owned()], 20, 500);
    fleet
        .base
        .submit("hq@base.example", &["captain@ship2.example"], &small)
        .await
        .unwrap();
    let t_small = wait_all(&fleet.ship_maildirs[1..], 1, Duration::from_secs(3600)).await;
    let t_big = wait_all(&fleet.ship_maildirs[..1], 4, Duration::from_secs(3600)).await + t_small;
    eprintln!("short message for ship 2 after {t_small:?}; ship 1's batch after {t_big:?}");
    for t in fleet.subnet.trace() {
        eprintln!("TRACE {t}");
    }
    check_once(&fleet.ship_maildirs[1], &small, 1);
    assert_eq!(maildir(&fleet.ship_maildirs[0]).len(), 4);
    // Ship 2's message shares the channel with ship 1's batch instead of queueing behind it.
    assert!(
        t_small.as_secs_f64() < 0.5 * t_big.as_secs_f64(),
        "ship 2 waited {t_small:?} behind ship 1's batch ({t_big:?})"
    );
    fleet.stop().await;
}

#[tokio::test(start_paused = true)]
async fn ships_may_acknowledge_by_arq_when_their_routing_table_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), 3);
    o.arq_acks = true;
    let fleet = Fleet::start(&o).await.unwrap();
    let (_, body) = to_every_ship(&fleet, 3, "ops", 6, 3000).await;
    wait_all(&fleet.ship_maildirs, 1, Duration::from_secs(3600)).await;
    assert!(
        wait_spool_empty(&fleet, Duration::from_secs(3600)).await,
        "base spool not empty"
    );
    for (i, d) in fleet.ship_maildirs.iter().enumerate() {
        check_once(d, &body, i);
    }
    // The ships' acks went as ARQ DATA D_PDUs (type 0 or 2), and the base answered with ARQ
    // ACKs; no ship sent a non-ARQ D_PDU (type 7).
    let trace = fleet.subnet.trace();
    let ship_types: Vec<u8> = trace
        .iter()
        .filter(|r| r.sender != 0)
        .flat_map(|r| r.dpdus.iter().map(|d| d.dpdu_type))
        .collect();
    assert!(
        ship_types.iter().any(|&t| t == 0 || t == 2),
        "{ship_types:?}"
    );
    assert!(!ship_types.contains(&7), "{ship_types:?}");
    fleet.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_ship_off_the_air_is_given_up_by_the_multicast_and_reached_by_hmtp_later() {
    let dir = tempfile::tempdir().unwrap();
    let mut fleet = Fleet::start(&options(dir.path(), 3)).await.unwrap();
    fleet.stop_ship(2).await;
    let (id, body) = to_every_ship(&fleet, 3, "ops", 7, 3000).await;
    wait_all(&fleet.ship_maildirs[..2], 1, Duration::from_secs(600)).await;
    // Repairs spent, the base gave ship 3 up (the multicast ended with two acks of three) and
    // tried ship 3 alone by HMTP since, which cannot answer either.
    tokio::time::sleep(Duration::from_secs(900)).await;
    let records = fleet.base.hf().transfers();
    let multicast = multicast_out(&records);
    assert_eq!(multicast.len(), 1, "{records:#?}");
    assert!(
        multicast[0]
            .result
            .starts_with("acknowledged by 2 of 3 ships"),
        "{}",
        multicast[0].result
    );
    let file = fleet.base.spool().load(&id).unwrap().1;
    let r3 = &file.envelope.recipients[2];
    assert_eq!(r3.address, "ops@ship3.example");
    assert!(!r3.state.is_final() && r3.attempts >= 2, "{r3:?}");
    // Back on the air, ship 3 alone is left: the retry goes by HMTP.
    fleet.start_ship(2).await.unwrap();
    assert!(
        wait_spool_empty(&fleet, Duration::from_secs(3600)).await,
        "base spool not empty"
    );
    for (i, d) in fleet.ship_maildirs.iter().enumerate() {
        check_once(d, &body, i);
    }
    let records = fleet.base.hf().transfers();
    assert!(
        records
            .iter()
            .any(|r| r.peer == "ship3" && r.protocol == "hmtp" && r.direction == Direction::Out),
        "{records:#?}"
    );
    fleet.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_multicast_stops_taking_airtime_when_its_message_expires() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), 3);
    o.emcon = vec![2];
    let fleet = Fleet::start(&o).await.unwrap();
    // Worth nothing after half an hour: the EMCON ship's repeats must end there, not a day on.
    // The fleet's calendar starts at its epoch, with the fleet.
    let expires = format!(
        "Expires: {}\r\n",
        skywave_spool::dsn::rfc5322_date(skywave_gateway::fleet::SIMULATION_EPOCH + 1800)
    );
    let (_, body) = to_every_ship_headed(&fleet, 3, "ops", 7, 3000, &expires).await;
    wait_all(&fleet.ship_maildirs, 1, Duration::from_secs(1200)).await;
    for (i, d) in fleet.ship_maildirs.iter().enumerate() {
        check_once(d, &body, i);
    }
    tokio::time::sleep(Duration::from_secs(2400)).await;
    let at_40_min = fleet.subnet.counters().nodes[0].transmissions;
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;
    let c = fleet.subnet.counters();
    assert_eq!(
        c.nodes[0].transmissions, at_40_min,
        "the base kept transmitting for an expired message"
    );
    assert_eq!(c.nodes[3].transmissions, 0, "the EMCON ship transmitted");
    // The base's sender has the EMCON ship's copy back, as a DSN that says why.
    let dsns = maildir(&fleet.base_maildir);
    assert_eq!(dsns.len(), 1, "{dsns:?}");
    assert!(dsns[0].contains("Status: 5.4.7"), "{}", dsns[0]);
    assert!(dsns[0].contains("ops@ship3.example"), "{}", dsns[0]);
    assert_eq!(fleet.base.spool().entries().unwrap().count(), 0);
    fleet.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_multicast_carries_the_dsn_parameters_and_each_ship_reports_its_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::start(&options(dir.path(), 3)).await.unwrap();
    let rcpts: Vec<String> = (0..3).map(|i| format!("ops@{}", ship_domain(i))).collect();
    let body = message(&rcpts, 1, 1500);
    let asked: Vec<(&str, skywave_smtp::RcptDsn)> = rcpts
        .iter()
        .map(|r| {
            (
                r.as_str(),
                skywave_smtp::RcptDsn {
                    notify: Some(skywave_smtp::Notify {
                        success: true,
                        failure: true,
                        delay: false,
                    }),
                    orcpt: Some(r.to_uppercase()),
                },
            )
        })
        .collect();
    fleet
        .base
        .submit_with_dsn(
            "hq@base.example",
            skywave_smtp::MailDsn {
                ret: None,
                envid: Some("order-1".into()),
            },
            &asked,
            &body,
        )
        .await
        .unwrap();
    wait_all(&fleet.ship_maildirs, 1, Duration::from_secs(3600)).await;
    // The base relayed nothing itself (the parameters went in the ACP 142 envelope): every
    // report comes from the ship that delivered, back over the air.
    wait_all(
        std::slice::from_ref(&fleet.base_maildir),
        3,
        Duration::from_secs(3600),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1800)).await;
    let reports = maildir(&fleet.base_maildir);
    assert_eq!(reports.len(), 3, "{reports:#?}");
    for (i, r) in rcpts.iter().enumerate() {
        let report = reports
            .iter()
            .find(|t| t.contains(&format!("Reporting-MTA: dns; gw.{}", ship_domain(i))))
            .unwrap_or_else(|| panic!("no report from ship {}: {reports:#?}", i + 1));
        for want in [
            "Original-Envelope-Id: order-1".to_owned(),
            format!(
                "Original-Recipient: rfc822; {}\nFinal-Recipient: rfc822; {r}\nAction: delivered",
                r.to_uppercase()
            ),
        ] {
            assert!(report.contains(&want), "{want:?} in {report}");
        }
    }
    assert_eq!(multicast_out(&fleet.base.hf().transfers()).len(), 1);
    fleet.stop().await;
}

/// The ships' Maildirs that hold the message with `Message-ID: <n.hq@base.example>`.
fn holding(fleet: &Fleet, n: usize) -> usize {
    let id = format!("Message-ID: <{n}.hq@base.example>");
    fleet
        .ship_maildirs
        .iter()
        .filter(|d| maildir(d).iter().any(|m| m.contains(&id)))
        .count()
}

#[tokio::test(start_paused = true)]
async fn a_multicast_waits_for_its_groups_window_and_flash_mail_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), 3);
    // The fleet's calendar starts on the hour: the window opens ten minutes in.
    o.group_windows = vec!["*:10-*:13".into()];
    o.group_bypass = Some("flash".into());
    let fleet = Fleet::start(&o).await.unwrap();
    let start = tokio::time::Instant::now();
    to_every_ship(&fleet, 3, "ops", 1, 1500).await;
    to_every_ship_headed(&fleet, 3, "ops", 2, 1500, "MMHS-Primary-Precedence: 4\r\n").await;
    // Flash mail goes at once, outside the window; the routine message waits for it.
    wait_all(&fleet.ship_maildirs, 1, Duration::from_secs(120)).await;
    assert_eq!(
        holding(&fleet, 2),
        3,
        "the flash message did not go at once"
    );
    tokio::time::sleep_until(start + Duration::from_secs(590)).await;
    assert_eq!(
        holding(&fleet, 1),
        0,
        "the routine message went before the window"
    );
    let before = fleet.subnet.counters().nodes[0].transmissions;
    // ... and goes within a minute of the opening.
    tokio::time::sleep_until(start + Duration::from_secs(660)).await;
    assert_eq!(
        holding(&fleet, 1),
        3,
        "the routine message did not go in the window"
    );
    assert!(fleet.subnet.counters().nodes[0].transmissions > before);
    assert!(
        wait_spool_empty(&fleet, Duration::from_secs(600)).await,
        "base spool not empty"
    );
    for d in &fleet.ship_maildirs {
        assert_eq!(maildir(d).len(), 2);
    }
    fleet.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_emcon_repeat_due_outside_the_groups_window_waits_for_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), 3);
    o.emcon = vec![2];
    // Two windows a day here: 00:10-00:13 and 01:30-01:33 (the fleet's calendar starts at
    // midnight). The EMCON ship's hourly repeat falls due at 01:10, outside both.
    o.group_windows = vec!["00:10-00:13".into(), "01:30-01:33".into()];
    let fleet = Fleet::start(&o).await.unwrap();
    let start = tokio::time::Instant::now();
    let (_, body) = to_every_ship(&fleet, 3, "ops", 1, 1500).await;
    tokio::time::sleep_until(start + Duration::from_secs(590)).await;
    assert_eq!(fleet.subnet.counters().nodes[0].transmissions, 0);
    tokio::time::sleep_until(start + Duration::from_secs(780)).await;
    for (i, d) in fleet.ship_maildirs.iter().enumerate() {
        check_once(d, &body, i);
    }
    let after_first = fleet.subnet.counters().nodes[0].transmissions;
    assert!(after_first > 0);
    tokio::time::sleep_until(start + Duration::from_secs(89 * 60)).await;
    assert_eq!(
        fleet.subnet.counters().nodes[0].transmissions,
        after_first,
        "the base transmitted between its windows"
    );
    tokio::time::sleep_until(start + Duration::from_secs(93 * 60)).await;
    assert!(
        fleet.subnet.counters().nodes[0].transmissions > after_first,
        "no EMCON repeat in the second window"
    );
    assert_eq!(fleet.subnet.counters().nodes[3].transmissions, 0);
    fleet.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_window_takes_no_more_multicasts_than_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), 3);
    // Two minutes from ten past the hour: at 1200 bit/s, with a blind repeat of every PDU and
    // the three ships' acknowledgement slots, room for one of these messages, not two.
    o.group_windows = vec!["*:10-*:12".into()];
    let fleet = Fleet::start(&o).await.unwrap();
    let start = tokio::time::Instant::now();
    // The second is the more urgent (MMHS immediate, 2): it goes first, as the spool orders a
    // peer's mail.
    to_every_ship(&fleet, 3, "ops", 1, 5000).await;
    to_every_ship_headed(&fleet, 3, "ops", 2, 5000, "MMHS-Primary-Precedence: 3\r\n").await;
    tokio::time::sleep_until(start + Duration::from_secs(13 * 60)).await;
    let first = (holding(&fleet, 1), holding(&fleet, 2));
    assert_eq!(
        first,
        (0, 3),
        "the first window carried {first:?} of the two messages"
    );
    // The base started nothing after its window closed, and the other message goes in the
    // next hour's window.
    let after_first = fleet.subnet.counters().nodes[0].transmissions;
    tokio::time::sleep_until(start + Duration::from_secs(69 * 60)).await;
    assert_eq!(fleet.subnet.counters().nodes[0].transmissions, after_first);
    tokio::time::sleep_until(start + Duration::from_secs(73 * 60)).await;
    assert_eq!((holding(&fleet, 1), holding(&fleet, 2)), (3, 3));
    fleet.stop().await;
}

/// A group's `shrink_images`: a photograph for the whole fleet goes by P_MUL scaled down, once
/// for every ship; the base's spool keeps it whole. 1280x960 pixels at JPEG quality 85 (638 kB,
/// a message of 873 kB) reaches each ship as 640x480, in a message of 53 kB.
#[tokio::test(start_paused = true)]
async fn a_groups_multicast_scales_photographs_down() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), 3);
    o.group_extra = "shrink_images = 640\n".into();
    let fleet = Fleet::start(&o).await.unwrap();
    let photo = skywave_e2e::photograph(1280, 960, 85);
    let message = skywave_e2e::message_with_photo(
        "hq@base.example",
        "notices@fleet.example",
        "harbour.jpg",
        &photo,
    );
    let id = fleet
        .base
        .submit("hq@base.example", &["notices@fleet.example"], &message)
        .await
        .unwrap();
    let (_, file) = fleet.base.spool().load(&id).unwrap();
    assert!(file.message.ends_with(&message));
    wait_all(&fleet.ship_maildirs, 1, Duration::from_secs(3600)).await;
    let limit = skywave_smtp::shrink::ImageLimit::new(640, 60).unwrap();
    let (expected, done) = skywave_smtp::shrink::shrink_images(&message, &limit);
    assert_eq!(done.images, 1);
    println!("{} B as {} B", message.len(), expected.len());
    for (i, d) in fleet.ship_maildirs.iter().enumerate() {
        check_once(d, &expected, i);
        assert!(
            maildir(d)
                .concat()
                .contains("scaled down for the radio link from 1280x960 pixels"),
            "ship {}",
            i + 1
        );
    }
    fleet.stop().await;
}

/// A group's `strip_headers`: mail from the Internet for the whole fleet goes by P_MUL without
/// its signatures, seals and `X-` fields, once for every ship, its trace and reader's fields as
/// they were; the base's spool keeps it whole.
#[tokio::test(start_paused = true)]
async fn a_groups_multicast_leaves_out_what_only_the_internet_uses() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), 3);
    o.group_extra = "strip_headers = true\n".into();
    let fleet = Fleet::start(&o).await.unwrap();
    let order = message(&["notices@fleet.example".to_owned()], 6, 900);
    let from_afar = skywave_compress::corpus::from_the_internet(2, &order);
    let id = fleet
        .base
        .submit("hq@base.example", &["notices@fleet.example"], &from_afar)
        .await
        .unwrap();
    // The base's spool keeps it whole.
    let (_, file) = fleet.base.spool().load(&id).unwrap();
    assert!(file.message.ends_with(&from_afar));
    wait_all(&fleet.ship_maildirs, 1, Duration::from_secs(3600)).await;
    let (expected, removed) = skywave_smtp::strip::strip_fields(
        &from_afar,
        &skywave_smtp::strip::FieldPattern::defaults(),
    );
    assert!(removed > 3900, "{removed}");
    for (i, d) in fleet.ship_maildirs.iter().enumerate() {
        check_once(d, &expected, i);
        let got = maildir(d).concat();
        assert!(
            !got.contains("\nDKIM-Signature") && !got.contains("\nX-"),
            "ship {}",
            i + 1
        );
    }
    // The multicast's record is written once every ship has acknowledged it.
    assert!(
        wait_spool_empty(&fleet, Duration::from_secs(3600)).await,
        "base spool not empty"
    );
    let records = fleet.base.hf().transfers();
    assert!(
        records
            .iter()
            .any(|r| r.direction == Direction::Out && r.protocol == "pmul"),
        "{records:?}"
    );
    fleet.stop().await;
}
