//! `skywave-emu` as an operator runs it: start the standalone emulator on port 0, read the
//! address it prints, run `skywave sis probe` against it, and check the probe saw the MTU.

// Test helpers outside #[test] functions may panic freely too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tokio::process::Command;
use tokio::time::timeout;

#[tokio::test]
async fn probe_against_the_emulator_prints_the_mtu() {
    let skywave = skywave_e2e::bin("skywave");
    let emu = skywave_e2e::start_emu(
        [
            "--nodes",
            "2",
            "--addresses",
            "1.0.0.1,1.0.0.2",
            "--listen",
            "127.0.0.1:0",
            "--rate",
            "2400",
            "--snr",
            "30",
        ],
        2,
    )
    .await;
    assert_eq!(emu.servers[0].0, "1.0.0.1");
    assert_eq!(emu.servers[1].0, "1.0.0.2");

    let run = Command::new(skywave)
        .args(["sis", "probe", "--server", &emu.servers[0].1, "--sap", "3"])
        .env("RUST_LOG", "warn")
        .output();
    let out = timeout(Duration::from_secs(60), run)
        .await
        .expect("probe hung")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("MTU 2048 bytes"), "{stdout}");

    // SIGTERM: the emulator stops and prints its counters.
    let rest = emu.stop(Duration::from_secs(30)).await;
    assert!(rest.iter().any(|l| l.starts_with("channel: ")), "{rest:?}");
}

/// `skywave-emu --group` and `--node-snr` as an operator runs them: four nodes over TCP SIS, a
/// group of three; a non-ARQ U_PDU the first node sends to the group reaches every member (the
/// indication names the group) and not the node outside it.
#[tokio::test]
async fn a_group_addressed_updu_reaches_every_member_over_tcp_sis() {
    use skywave_sis::client::{Delivery, Event};
    use skywave_sis::{
        Client, ClientConfig, NodeAddress, Priority, SapId, ServiceType, Ttl, UnidataRequest,
    };
    let (mut child, servers) = skywave_e2e::start_emu(
        [
            "--nodes",
            "4",
            "--listen",
            "127.0.0.1:0",
            "--rate",
            "2400",
            "--snr",
            "30",
            "--time-scale",
            "20",
            "--group",
            "16.0.9.9=0.0.0.2,0.0.0.3",
            "--node-snr",
            "0.0.0.3=25",
        ],
        4,
    )
    .await
    .drain();
    let servers: Vec<String> = servers.into_iter().map(|(_, addr)| addr).collect();
    let connect = |addr: String| async move {
        let connector = move || {
            let addr = addr.clone();
            async move { tokio::net::TcpStream::connect(addr).await }
        };
        let cfg = ClientConfig::new(SapId::new(2).unwrap(), ServiceType::NON_ARQ);
        let (c, _, events) = Client::connect(connector, cfg).await.unwrap();
        (c, events)
    };
    let (base, _) = connect(servers[0].clone()).await;
    let mut ships = Vec::new();
    for s in &servers[1..] {
        ships.push(connect(s.clone()).await);
    }
    let group: NodeAddress = "16.0.9.9".parse().unwrap();
    let sent = base
        .send_unidata(UnidataRequest {
            priority: Priority::new(5).unwrap(),
            dest_sap: SapId::new(2).unwrap(),
            dest: group,
            mode: ServiceType::NON_ARQ,
            ttl: Ttl::INFINITE,
            updu: bytes::Bytes::from_static(b"to the whole group"),
        })
        .unwrap();
    assert_eq!(
        timeout(Duration::from_secs(30), sent).await.unwrap(),
        Ok(Delivery::Sent)
    );
    for (k, (_, events)) in ships.iter_mut().take(2).enumerate() {
        let ind = timeout(Duration::from_secs(60), async {
            loop {
                if let Some(Event::Unidata(ind)) = events.recv().await {
                    return ind;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("member {} got nothing", k + 2));
        assert_eq!(ind.dest, group);
        assert_eq!(&ind.updu[..], b"to the whole group");
    }
    // The non-member heard nothing for it (the members' deliveries came after one transmission).
    let outsider = &mut ships[2].1;
    assert!(
        std::iter::from_fn(|| outsider.try_recv()).all(|e| !matches!(e, Event::Unidata(_))),
        "the node outside the group got it"
    );
    child.kill().await.unwrap();
}

/// `skywave-emu --cas1 --link-idle 5` as an operator runs it: an ARQ U_PDU over TCP SIS goes
/// once the two nodes have made their physical link (PHYSICAL LINK REQUEST, ACCEPTED), is
/// delivered and confirmed; five idle seconds later the ship, whose request made the link,
/// breaks it (PHYSICAL LINK BREAK, BREAK CONFIRM). The counters the emulator prints on SIGTERM
/// show the link made and broken at both ends.
#[tokio::test]
async fn with_cas1_an_arq_updu_goes_after_the_link_is_made_and_the_idle_link_is_broken() {
    use skywave_sis::client::{Delivery, Event};
    use skywave_sis::{
        Client, ClientConfig, NodeAddress, Priority, SapId, ServiceType, Ttl, UnidataRequest,
    };
    let emu = skywave_e2e::start_emu(
        [
            "--nodes",
            "2",
            "--addresses",
            "1.0.0.1,1.0.0.2",
            "--listen",
            "127.0.0.1:0",
            "--rate",
            "2400",
            "--snr",
            "30",
            "--time-scale",
            "20",
            "--cas1",
            "--link-idle",
            "5",
        ],
        2,
    )
    .await;
    let connect = |addr: String| async move {
        let connector = move || {
            let addr = addr.clone();
            async move { tokio::net::TcpStream::connect(addr).await }
        };
        let cfg = ClientConfig::new(SapId::new(3).unwrap(), ServiceType::ARQ_NODE_CONFIRM);
        let (c, _, events) = Client::connect(connector, cfg).await.unwrap();
        (c, events)
    };
    let (ship, _ship_events) = connect(emu.servers[0].1.clone()).await;
    let (_shore, mut shore_events) = connect(emu.servers[1].1.clone()).await;
    let shore: NodeAddress = "1.0.0.2".parse().unwrap();
    let sent = ship
        .send_unidata(UnidataRequest {
            priority: Priority::new(5).unwrap(),
            dest_sap: SapId::new(3).unwrap(),
            dest: shore,
            mode: ServiceType::DEFAULT,
            ttl: Ttl::INFINITE,
            updu: bytes::Bytes::from_static(b"after the link is made"),
        })
        .unwrap();
    let ind = timeout(Duration::from_secs(60), async {
        loop {
            if let Some(Event::Unidata(ind)) = shore_events.recv().await {
                return ind;
            }
        }
    })
    .await
    .expect("nothing arrived");
    assert_eq!(&ind.updu[..], b"after the link is made");
    assert!(matches!(
        timeout(Duration::from_secs(60), sent).await.unwrap(),
        Ok(Delivery::Confirmed(_))
    ));
    // 5 s of idle link and the BREAK exchange (about 3 s at 2400 bit/s) are 0.4 s of wall
    // time at 20x; 4 s leaves a loaded machine ten times that.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let rest = emu.stop(Duration::from_secs(30)).await;
    let node = |i: usize| {
        rest.iter()
            .find(|l| l.starts_with(&format!("node {i}: ")))
            .cloned()
            .unwrap_or_default()
    };
    // The ship asked (once, unless a loaded machine let its response timeout run out in real
    // time) and made the link; the shore only accepted.
    assert!(
        node(0).contains(", 1 links made, 1 links broken,"),
        "{rest:?}"
    );
    assert!(!node(0).contains(", 0 link requests,"), "{rest:?}");
    assert!(
        node(1).contains(", 0 link requests, 1 links made, 1 links broken,"),
        "{rest:?}"
    );
}

/// The CAS-1 options an operator can get wrong are refused with a message that says why,
/// before the emulator listens: a maximum of links without an idle time to break them by,
/// a maximum of zero, and a wait for first data without CAS-1.
#[tokio::test]
async fn cas1_options_that_cannot_work_are_refused() {
    let emu = skywave_e2e::bin("skywave-emu");
    let base = [
        "--nodes",
        "2",
        "--addresses",
        "1.0.0.1,1.0.0.2",
        "--listen",
        "127.0.0.1:0",
    ];
    for (extra, says) in [
        (&["--cas1", "--max-links", "1"][..], "--link-idle"),
        (
            &["--cas1", "--link-idle", "5", "--max-links", "0"][..],
            "--max-links must be at least 1",
        ),
        (&["--link-first-data", "30"][..], "--cas1"),
    ] {
        let out = timeout(
            Duration::from_secs(30),
            Command::new(&emu).args(base).args(extra).output(),
        )
        .await
        .expect("skywave-emu did not exit")
        .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} was accepted");
        assert!(err.contains(says), "{extra:?}: {err}");
    }
}
