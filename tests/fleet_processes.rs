//! Fleet mail as an operator deploys it: five processes on loopback. `skywave-emu --nodes 4`
//! serves SIS for a base (0.0.1.1) and three ships (0.0.2.1-3) on one emulated frequency, the
//! ships members of the 5066 group address 16.0.9.9 (simulated time 20 times faster than the
//! wall clock); four `skywave run` daemons, each with its own configuration, state and Maildir,
//! reach their nodes over TCP. A mail to a captain on every ship, submitted to the base with
//! swaks, goes once by P_MUL multicast and arrives in the three Maildirs, once each. Then
//! `skywave emcon on` silences the third ship: the next mail still reaches it, the base waits
//! for its acknowledgement, and `skywave emcon off` makes it acknowledge. The SIS traffic is
//! captured and Wireshark's P_MUL dissector must decode every PDU, checksums correct.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::Child;
use tokio::time::{sleep, timeout};

#[path = "fleet_support.rs"]
mod fleet;
#[path = "lan_support.rs"]
mod support;

use fleet::{base_queue_empty, start, subjects, swaks, wait_all};

const TIME_SCALE: u32 = 20;
const RATE_BPS: u32 = 1200;
const STEP: Duration = Duration::from_secs(60);
const BASE: &str = "0.0.1.1";
const SHIPS: [&str; 3] = ["0.0.2.1", "0.0.2.2", "0.0.2.3"];
const GROUP: &str = "16.0.9.9";

/// Starts the emulator (its SIS traffic captured to `sis_pcap`); returns it and the SIS address
/// of each node.
async fn emulator(sis_pcap: &Path) -> (Child, BTreeMap<String, String>) {
    let (rate, scale) = (RATE_BPS.to_string(), TIME_SCALE.to_string());
    let nodes = format!("{BASE},{}", SHIPS.join(","));
    let group = format!("{GROUP}={}", SHIPS.join(","));
    let mut args: Vec<OsString> = vec!["--sis-pcap".into(), sis_pcap.into()];
    args.extend(
        [
            "--nodes",
            "4",
            "--addresses",
            &nodes,
            "--group",
            &group,
            "--listen",
            "127.0.0.1:0",
            "--channel",
            "awgn",
            "--snr",
            "20",
            "--rate",
            &rate,
            "--time-scale",
            &scale,
        ]
        .map(OsString::from),
    );
    let (child, servers) = skywave_e2e::start_emu(args, 4).await.drain();
    (child, servers.into_iter().collect())
}

/// Writes a gateway's `skywave.toml` and `routes.toml` under `dir`; returns the former.
fn write_config(dir: &Path, domain: &str, node: &str, sis: &str, routes: &str) -> PathBuf {
    // The radio runs TIME_SCALE times faster than the gateways' clocks.
    let hf = format!(
        "node = \"{node}\"\n\
         sis_server = \"{sis}\"\n\
         assumed_bps = {bps}\n\
         reply_timeout = \"20s\"\n\
         batch_delay = 1\n",
        bps = RATE_BPS * TIME_SCALE,
    );
    skywave_e2e::write_gateway(dir, domain, &hf, routes)
}

fn base_routes() -> String {
    let mut r =
        "[lan]\ndomains = [\"base.example\"]\nrelay_networks = [\"127.0.0.0/8\"]\n".to_owned();
    for (i, node) in SHIPS.iter().enumerate() {
        let n = i + 1;
        r.push_str(&format!(
            "\n[[peer]]\nname = \"ship{n}\"\nnode = \"{node}\"\nprotocol = \"hmtp\"\nskywave = true\ncompression = \"deflate\"\n\n\
             [[route]]\nmatch = \"ship{n}.example\"\nto = \"ship{n}\"\n"
        ));
    }
    r.push_str(&format!(
        "\n[[group]]\nname = \"fleet\"\nnode = \"{GROUP}\"\nmembers = [\"ship1\", \"ship2\", \"ship3\"]\n"
    ));
    r
}

fn ship_routes(n: usize) -> String {
    format!(
        "[lan]\ndomains = [\"ship{n}.example\"]\nrelay_networks = [\"127.0.0.0/8\"]\n\n\
         [[peer]]\nname = \"base\"\nnode = \"{BASE}\"\nprotocol = \"hmtp\"\nskywave = true\ncompression = \"deflate\"\n\n\
         [[route]]\nmatch = \"*\"\nto = \"base\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mail_to_three_ships_goes_once_by_multicast_and_emcon_holds_only_the_ack() {
    if !skywave_emu::missing::have_tool("swaks", "the fleet multi-process test") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let sis_pcap = root.path().join("sis.pcap");
    let (emu, sis) = emulator(&sis_pcap).await;
    let base_cfg = write_config(
        &root.path().join("base"),
        "base.example",
        BASE,
        &sis[BASE],
        &base_routes(),
    );
    let mut ship_cfgs = Vec::new();
    for (i, node) in SHIPS.iter().enumerate() {
        let n = i + 1;
        ship_cfgs.push(write_config(
            &root.path().join(format!("ship{n}")),
            &format!("ship{n}.example"),
            node,
            &sis[*node],
            &ship_routes(n),
        ));
    }
    let base = start(&base_cfg).await;
    let mut ships = Vec::new();
    for c in &ship_cfgs {
        ships.push(start(c).await);
    }
    let maildirs: Vec<PathBuf> = ship_cfgs
        .iter()
        .map(|c| c.parent().unwrap().join("Maildir"))
        .collect();

    swaks(
        &base.smtp,
        "captain@ship1.example,captain@ship2.example,captain@ship3.example",
        "fleet order 1",
    )
    .await;
    wait_all(&maildirs, "fleet order 1").await;
    fleet::assert_once_each(&maildirs, "fleet order 1");
    assert!(
        base_queue_empty(&base_cfg).await,
        "the base still waits for acks"
    );
    let log = std::fs::read_to_string(base_cfg.parent().unwrap().join("skywave.log")).unwrap();
    assert!(
        log.contains("multicast by P_MUL"),
        "no multicast in the base's log"
    );
    // One transfer out of the base, by P_MUL; no HMTP session to any ship.
    let transfers = fleet::transfer_log_when(&base_cfg, |l| l.contains("\"pmul\"")).await;
    assert!(transfers.contains("\"pmul\""), "{transfers}");
    assert!(
        !transfers.contains("\"hmtp\""),
        "a unicast session ran: {transfers}"
    );

    // EMCON on ship 3, by the operator's command on the running gateway.
    let skywave = skywave_e2e::bin("skywave");
    let cfg3 = ship_cfgs[2].display().to_string();
    let (code, out, err) = support::run(
        skywave.to_str().unwrap(),
        &["emcon", "on", "--config", &cfg3],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let (_, out, _) = support::run(
        skywave.to_str().unwrap(),
        &["emcon", "status", "--config", &cfg3],
    )
    .await;
    assert!(out.starts_with("EMCON on"), "{out}");
    sleep(Duration::from_secs(3)).await;
    swaks(
        &base.smtp,
        "ops@ship1.example,ops@ship3.example",
        "fleet order 2",
    )
    .await;
    wait_all(&[maildirs[0].clone(), maildirs[2].clone()], "fleet order 2").await;
    assert_eq!(
        subjects(&maildirs[2]).get("fleet order 2"),
        Some(&1),
        "EMCON ship got it"
    );
    // Its acknowledgement is held: the base keeps ship 3's recipient.
    sleep(Duration::from_secs(10)).await;
    let (_, out, _) = support::run(
        skywave.to_str().unwrap(),
        &["queue", "--config", &base_cfg.display().to_string(), "list"],
    )
    .await;
    assert!(
        out.contains("ops@ship3.example"),
        "the base should still wait: {out}"
    );
    let (code, out, err) = support::run(
        skywave.to_str().unwrap(),
        &["emcon", "off", "--config", &cfg3],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        base_queue_empty(&base_cfg).await,
        "no ack after EMCON was lifted"
    );
    for m in &maildirs {
        assert!(subjects(m).values().all(|&n| n == 1), "{:?}", subjects(m));
    }
    drop(ships);
    drop(base);
    stop(emu).await;
    // Through Wireshark's SIS dissector (SAP 2, UDOP APP_ID 0x2000).
    fleet::check_pcap_with_wireshark(&sis_pcap, &[], &["0", "1", "2"]);
}

/// SIGTERM, so the emulator finishes its capture, and wait for it.
async fn stop(mut emu: Child) {
    let pid = emu.id().expect("emulator pid").to_string();
    let (code, out, err) = support::run("kill", &["-TERM", &pid]).await;
    assert_eq!(code, 0, "{out}{err}");
    timeout(STEP, emu.wait())
        .await
        .expect("emulator did not stop")
        .expect("wait");
}
