//! ACP 142's dynamic groups between two transmitters, over the emulated IP network in virtual
//! time: two bases (the production daemon, `daemon::start_with`) share one pool of multicast
//! addresses and three ships. Base A sends a message to two of the ships and takes the pool's
//! first address; base B, sending to the same two ships while A holds it, asks for the same
//! address, gets A's Reject_PDU, and takes the next one. Both messages arrive once; no ship
//! outside a message's group joins it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use skywave_emu::ipnet::{IpNet, IpNetConfig};
use skywave_gateway::config;
use skywave_gateway::daemon::{self, Gateway};
use skywave_gateway::hf::SisConnect;
use skywave_gateway::hf::pmul_ip::IpNetwork;

const GROUP: &str = "239.192.0.1";
const POOL: &str = "239.192.1.0/30";
const BASES: [(&str, &str); 2] = [("base-a", "10.9.0.1"), ("base-b", "10.9.0.2")];
const SHIPS: [&str; 3] = ["10.9.0.11", "10.9.0.12", "10.9.0.13"];

fn write(dir: &Path, domain: &str, address: &str, join: &str, routes: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let cfg = format!(
        "hostname = \"gw.{domain}\"\nstate_dir = \"state\"\nroutes = \"routes.toml\"\n\n\
         [smtp]\nlisten = \"127.0.0.1:0\"\n\n[delivery]\nmaildir = \"Maildir\"\n\n\
         [metrics]\nenabled = false\n\n[spool]\nmin_backoff = 60\n\n[hf]\nbatch_delay = 1\n\n\
         [pmul_ip]\naddress = \"{address}\"\njoin = [{join}]\npcap = \"pmul.pcap\"\n"
    );
    std::fs::write(dir.join("skywave.toml"), cfg).unwrap();
    std::fs::write(dir.join("routes.toml"), routes).unwrap();
    dir.join("skywave.toml")
}

fn base_routes(domain: &str) -> String {
    let mut r = format!("[lan]\ndomains = [\"{domain}\"]\nrelay_networks = [\"127.0.0.0/8\"]\n");
    for (i, ip) in SHIPS.iter().enumerate() {
        let n = i + 1;
        r.push_str(&format!(
            "\n[[peer]]\nname = \"ship{n}\"\nbearer = \"pmul-ip\"\nip = \"{ip}\"\n\n\
             [[route]]\nmatch = \"ship{n}.example\"\nto = \"ship{n}\"\n"
        ));
    }
    r.push_str(&format!(
        "\n[[group]]\nname = \"fleet\"\nbearer = \"pmul-ip\"\naddress = \"{GROUP}\"\n\
         dynamic = \"{POOL}\"\nrepeats = 0\nmembers = [\"ship1\", \"ship2\", \"ship3\"]\n"
    ));
    r
}

fn ship_routes(n: usize) -> String {
    let mut r =
        format!("[lan]\ndomains = [\"ship{n}.example\"]\nrelay_networks = [\"127.0.0.0/8\"]\n");
    for (name, ip) in BASES {
        r.push_str(&format!(
            "\n[[peer]]\nname = \"{name}\"\nbearer = \"pmul-ip\"\nip = \"{ip}\"\n"
        ));
    }
    r.push_str(&format!(
        "\n[[group]]\nname = \"shore\"\nbearer = \"pmul-ip\"\naddress = \"{GROUP}\"\n\
         members = [\"base-a\", \"base-b\"]\n\n[[route]]\nmatch = \"*\"\nto = \"base-a\"\n"
    ));
    r
}

async fn start(path: &Path, net: &Arc<IpNet>) -> Gateway {
    daemon::start_with(
        config::load(path).unwrap(),
        SisConnect::tcp(),
        IpNetwork::Emulated(Arc::clone(net)),
    )
    .await
    .unwrap()
}

fn count(maildir: &Path, subject: &str) -> usize {
    let Ok(d) = std::fs::read_dir(maildir.join("new")) else {
        return 0;
    };
    d.flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path())
                .is_ok_and(|t| t.contains(&format!("Subject: {subject}")))
        })
        .count()
}

fn log_lines(gw: &Path) -> String {
    std::fs::read_to_string(gw.join("state/transfers.jsonl")).unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn a_second_transmitter_is_rejected_from_a_held_group_and_takes_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let net = IpNet::new(IpNetConfig {
        delay: Duration::from_millis(270),
        loss: 0.0,
        rate_bps: 64_000,
        seed: 3,
    });
    let mut bases = Vec::new();
    for (name, ip) in BASES {
        let domain = format!("{name}.example");
        let cfg = write(
            &dir.path().join(name),
            &domain,
            ip,
            "",
            &base_routes(&domain),
        );
        bases.push(start(&cfg, &net).await);
    }
    let mut ships = Vec::new();
    for (i, ip) in SHIPS.iter().enumerate() {
        let n = i + 1;
        let cfg = write(
            &dir.path().join(format!("ship{n}")),
            &format!("ship{n}.example"),
            ip,
            &format!("\"{GROUP}\""),
            &ship_routes(n),
        );
        ships.push(start(&cfg, &net).await);
    }
    let body = |from: &str, subject: &str| {
        format!(
            "From: <hq@{from}.example>\r\nTo: a@ship1.example, b@ship2.example\r\n\
             Subject: {subject}\r\nMessage-ID: <{subject}@{from}.example>\r\n\r\nRendezvous at 0600Z.\r\n"
        )
        .into_bytes()
    };
    let rcpts = ["a@ship1.example", "b@ship2.example"];
    bases[0]
        .submit("hq@base-a.example", &rcpts, &body("base-a", "order-a"))
        .await
        .unwrap();
    // A has requested, announced and is sending by the time B asks.
    tokio::time::sleep(Duration::from_secs(4)).await;
    bases[1]
        .submit("hq@base-b.example", &rcpts, &body("base-b", "order-b"))
        .await
        .unwrap();
    let maildir = |n: usize| dir.path().join(format!("ship{n}/Maildir"));
    for _ in 0..120 {
        if (1..=2).all(|n| count(&maildir(n), "order-a") == 1 && count(&maildir(n), "order-b") == 1)
            && bases
                .iter()
                .all(|b| b.spool().entries().map_or(1, |e| e.count()) == 0)
        {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for n in 1..=2 {
        assert_eq!(count(&maildir(n), "order-a"), 1, "ship{n}");
        assert_eq!(count(&maildir(n), "order-b"), 1, "ship{n}");
    }
    assert_eq!(
        count(&maildir(3), "order-a") + count(&maildir(3), "order-b"),
        0
    );
    for (i, b) in bases.iter().enumerate() {
        assert_eq!(
            b.spool().entries().map_or(1, |e| e.count()),
            0,
            "base {i} still waits:\n{}",
            log_lines(&dir.path().join(BASES[i].0))
        );
    }
    // From base B's capture: its first Request was for 239.192.1.0, base A's Reject came back,
    // B released it and requested 239.192.1.1, and its data went there.
    let packets = skywave_e2e::read_raw_ip_pcap(&dir.path().join("base-b/pmul.pcap"));
    let v4 = |a: std::net::IpAddr| match a {
        std::net::IpAddr::V4(a) => a,
        std::net::IpAddr::V6(_) => panic!("IPv6 in an IPv4 network: {a}"),
    };
    let b_ip: std::net::Ipv4Addr = BASES[1].1.parse().unwrap();
    let a_ip: std::net::Ipv4Addr = BASES[0].1.parse().unwrap();
    let group_of = |p: &[u8]| u32::from_be_bytes([p[16], p[17], p[18], p[19]]);
    let kinds: Vec<(std::net::Ipv4Addr, u8, Option<std::net::Ipv4Addr>)> = packets
        .iter()
        .map(|d| {
            let kind = d.payload[3] & 0x3f;
            let group = matches!(kind, 5..=7).then(|| group_of(&d.payload).into());
            (v4(d.src), kind, group)
        })
        .collect();
    let first = "239.192.1.0".parse().unwrap();
    let second = "239.192.1.1".parse().unwrap();
    let pos = |want: (std::net::Ipv4Addr, u8, Option<std::net::Ipv4Addr>)| {
        kinds
            .iter()
            .position(|k| *k == want)
            .unwrap_or_else(|| panic!("no {want:?} in base B's capture: {kinds:?}"))
    };
    let request_first = pos((b_ip, 5, Some(first)));
    let reject = pos((a_ip, 6, Some(first)));
    let request_second = pos((b_ip, 5, Some(second)));
    assert!(
        request_first < reject && reject < request_second,
        "{kinds:?}"
    );
    assert!(
        packets
            .iter()
            .any(|d| v4(d.src) == b_ip && v4(d.dst) == second && d.payload[3] & 0x3f == 0),
        "base B's data did not go to the second address"
    );
    for s in ships {
        s.stop().await;
    }
    for b in bases {
        b.stop().await;
    }
}
