//! `skywave-emu` as an operator runs it: start the standalone emulator on port 0, read the
//! address it prints, run `skywave sis probe` against it, and check the probe saw the MTU.

// Test helpers outside #[test] functions may panic freely too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tokio::process::Command;
use tokio::time::timeout;

/// Node `i`'s counters line among what `skywave-emu` printed when it stopped (empty if none).
fn node_counters(rest: &[String], i: usize) -> String {
    rest.iter()
        .find(|l| l.starts_with(&format!("node {i}: ")))
        .cloned()
        .unwrap_or_default()
}

/// A `skywave_sis` client bound on SAP 3 (ARQ, node confirm) to the SIS server at `addr`,
/// reconnecting there whenever its connection is lost.
async fn sap3_client(addr: String) -> (skywave_sis::Client, skywave_sis::client::Events) {
    use skywave_sis::{Client, ClientConfig, SapId, ServiceType};
    let connector = move || {
        let addr = addr.clone();
        async move { tokio::net::TcpStream::connect(addr).await }
    };
    let cfg = ClientConfig::new(SapId::new(3).unwrap(), ServiceType::ARQ_NODE_CONFIRM);
    let (c, _, events) = Client::connect(connector, cfg).await.unwrap();
    (c, events)
}

/// An ARQ U_PDU (as bound) for SAP 3 of node 1.0.0.2.
fn to_1_0_0_2(text: &'static [u8]) -> skywave_sis::UnidataRequest {
    use skywave_sis::{Priority, SapId, ServiceType, Ttl, UnidataRequest};
    UnidataRequest {
        priority: Priority::new(5).unwrap(),
        dest_sap: SapId::new(3).unwrap(),
        dest: "1.0.0.2".parse().unwrap(),
        mode: ServiceType::DEFAULT,
        ttl: Ttl::INFINITE,
        updu: bytes::Bytes::from_static(text),
    }
}

/// Waits up to a minute for the next U_PDU on `events` (the shore's client) and checks it is
/// `text`.
async fn arrives(events: &mut skywave_sis::client::Events, text: &[u8]) {
    use skywave_sis::client::Event;
    let ind = timeout(Duration::from_secs(60), async {
        loop {
            match events.recv().await {
                Some(Event::Unidata(ind)) => return ind,
                Some(_) => {}
                None => panic!("the shore's client ended"),
            }
        }
    })
    .await
    .expect("nothing arrived");
    assert_eq!(&ind.updu[..], text);
}

/// Waits up to a minute for the outcome of a U_PDU sent with a delivery confirmation and
/// checks it was confirmed.
async fn confirmed(sent: skywave_sis::client::Pending) {
    use skywave_sis::client::Delivery;
    let d = timeout(Duration::from_secs(60), sent)
        .await
        .expect("no outcome");
    assert!(matches!(d, Ok(Delivery::Confirmed(_))), "{d:?}");
}

#[tokio::test]
async fn probe_against_the_emulator_prints_the_mtu() {
    let skywave = skywave_e2e::bin("skywave");
    let emu = skywave_e2e::start_emu(skywave_e2e::two_fast_nodes(&[]), 2).await;
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
    let args = [
        &["--nodes", "4"][..],
        &skywave_e2e::FAST_LOOPBACK,
        &[
            "--group",
            "16.0.9.9=0.0.0.2,0.0.0.3",
            "--node-snr",
            "0.0.0.3=25",
        ],
    ]
    .concat();
    let (mut child, servers) = skywave_e2e::start_emu(args, 4).await.drain();
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
    let args = skywave_e2e::two_fast_nodes(&["--cas1", "--link-idle", "5"]);
    let emu = skywave_e2e::start_emu(args, 2).await;
    let (ship, _ship_events) = sap3_client(emu.servers[0].1.clone()).await;
    let (_shore, mut shore_events) = sap3_client(emu.servers[1].1.clone()).await;
    let sent = ship
        .send_unidata(to_1_0_0_2(b"after the link is made"))
        .unwrap();
    arrives(&mut shore_events, b"after the link is made").await;
    confirmed(sent).await;
    // 5 s of idle link and the BREAK exchange (about 3 s at 2400 bit/s) are 0.4 s of wall
    // time at 20x; 4 s leaves a loaded machine ten times that.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let rest = emu.stop(Duration::from_secs(30)).await;
    let node = |i: usize| node_counters(&rest, i);
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

/// `skywave-emu --confirm-wait 2` as an operator runs it: a 1500-byte U_PDU takes about 5 s
/// of airtime at 2400 bit/s, so the ship's server tells its client "destination node not
/// responding" after 2 s, and the U_PDU arrives at the shore all the same, once. The counters
/// the emulator prints on SIGTERM show the one rejection.
#[tokio::test]
async fn a_server_that_stops_waiting_for_the_confirm_rejects_and_delivers_all_the_same() {
    use skywave_sis::UnidataRejectReason;
    use skywave_sis::client::SendError;
    static LONG: [u8; 1500] = [b'w'; 1500];
    let args = skywave_e2e::two_fast_nodes(&["--confirm-wait", "2"]);
    let emu = skywave_e2e::start_emu(args, 2).await;
    let (ship, _ship_events) = sap3_client(emu.servers[0].1.clone()).await;
    let (_shore, mut shore_events) = sap3_client(emu.servers[1].1.clone()).await;
    let sent = ship.send_unidata(to_1_0_0_2(&LONG)).unwrap();
    let outcome = timeout(Duration::from_secs(60), sent)
        .await
        .expect("no outcome");
    assert!(
        matches!(&outcome, Err(SendError::Rejected(r)) if r.reason == UnidataRejectReason::DestinationNodeNotResponding),
        "{outcome:?}"
    );
    arrives(&mut shore_events, &LONG).await;
    let rest = emu.stop(Duration::from_secs(30)).await;
    assert!(
        node_counters(&rest, 0).contains(", 1 confirms overdue,"),
        "{rest:?}"
    );
    assert!(
        node_counters(&rest, 1).contains(", 1 U_PDUs delivered,"),
        "{rest:?}"
    );
}

/// `skywave-emu --restart 1.0.0.1@60+40` as an operator runs it: the ship's node goes down 60
/// simulated seconds in (3 s of wall time at 20x) and is back 40 s later. Its SIS client is
/// disconnected, refused while the node is down, and binds again by itself; a U_PDU it sends
/// afterwards is delivered and confirmed, the node having reset the shore's ARQ machines
/// (FULL RESET CMD, RESET ACK) first. The counters the emulator prints on SIGTERM show the
/// restart, the full reset and the shore obeying it.
#[tokio::test]
async fn a_restarted_node_drops_its_clients_resets_its_peer_and_carries_on() {
    use skywave_sis::client::Event;
    let args = skywave_e2e::two_fast_nodes(&["--restart", "1.0.0.1@60+40"]);
    let emu = skywave_e2e::start_emu(args, 2).await;
    let (ship, mut ship_events) = sap3_client(emu.servers[0].1.clone()).await;
    let (_shore, mut shore_events) = sap3_client(emu.servers[1].1.clone()).await;
    let send = |text: &'static [u8]| ship.send_unidata(to_1_0_0_2(text)).unwrap();
    let before = send(b"before the restart");
    arrives(&mut shore_events, b"before the restart").await;
    confirmed(before).await;
    // The restart cuts the ship's SIS connection; its client binds again.
    timeout(Duration::from_secs(60), async {
        let mut lost = false;
        loop {
            match ship_events.recv().await {
                Some(Event::Disconnected { .. }) => lost = true,
                Some(Event::Reconnected(_)) if lost => return,
                Some(_) => {}
                None => panic!("the ship's client ended"),
            }
        }
    })
    .await
    .expect("the ship's client was not disconnected and bound again");
    let after = send(b"after the restart");
    arrives(&mut shore_events, b"after the restart").await;
    confirmed(after).await;
    let rest = emu.stop(Duration::from_secs(30)).await;
    assert!(
        rest.iter().any(|l| l
            .contains("1 resets (1 full, 0 U_PDUs lost), 0 full resets obeyed, 0 RESET TX WIN RQSTs, 1 restarts")
            && l.starts_with("node 0: ")),
        "{rest:?}"
    );
    assert!(
        node_counters(&rest, 1)
            .contains(", 0 resets (0 full, 0 U_PDUs lost), 1 full resets obeyed, 0 RESET TX WIN RQSTs, 0 restarts,"),
        "{rest:?}"
    );
}

/// The first simulated second of a trace line (`  12.345-  14.000 s node 0 ...`).
fn trace_start(line: &str) -> Option<f64> {
    line.trim_start().split('-').next()?.trim().parse().ok()
}

/// `skywave-emu --outage 1.0.0.2@0+40 --trace` as an operator runs it: for the first 40
/// simulated seconds (2 s of wall time at 20x) the shore's node hears nothing, while the ship
/// still hears the shore. The ship's U_PDU goes on the air and is lost (its D_PDUs traced
/// `x`), the ARQ sends it again, and it arrives and is confirmed once the outage is over; the
/// shore, having heard nothing, keys up for the first time after it. The emulator says what
/// the outage is when it starts.
#[tokio::test]
async fn an_outage_of_what_one_node_hears_holds_its_data_back_until_it_ends() {
    let args = skywave_e2e::two_fast_nodes(&[
        "--outage",
        "1.0.0.2@0+40",
        "--link-retries",
        "never",
        "--trace",
    ]);
    let emu = skywave_e2e::start_emu(args, 2).await;
    let (ship, _ship_events) = sap3_client(emu.servers[0].1.clone()).await;
    let (_shore, mut shore_events) = sap3_client(emu.servers[1].1.clone()).await;
    let sent = ship
        .send_unidata(to_1_0_0_2(b"through the outage"))
        .unwrap();
    arrives(&mut shore_events, b"through the outage").await;
    confirmed(sent).await;
    let rest = emu.stop(Duration::from_secs(30)).await;
    let lines = |node: &str| -> Vec<(f64, String)> {
        rest.iter()
            .filter(|l| l.contains(&format!(" s node {node} ")))
            .filter_map(|l| Some((trace_start(l)?, l.clone())))
            .collect()
    };
    let ship_lines = lines("0");
    assert!(
        ship_lines
            .iter()
            .any(|(t, l)| *t < 40.0 && l.contains("[D0") && l.contains("x")),
        "no lost data before 40 s: {rest:?}"
    );
    let shore_lines = lines("1");
    assert!(!shore_lines.is_empty(), "{rest:?}");
    assert!(
        shore_lines.iter().all(|(t, _)| *t >= 40.0),
        "the shore keyed up during its outage: {rest:?}"
    );
}

/// The impairments an operator asked for are said on stderr before the emulator listens, in
/// words: here it cannot listen (the port is taken) and exits, having said them.
#[tokio::test]
async fn the_impairments_are_announced_before_the_emulator_listens() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = taken.local_addr().unwrap().to_string();
    let out = timeout(
        Duration::from_secs(30),
        Command::new(skywave_e2e::bin("skywave-emu"))
            .args([
                "--nodes",
                "2",
                "--addresses",
                "1.0.0.1,1.0.0.2",
                "--listen",
                &at,
            ])
            .args(["--outage", "1.0.0.2@0+40", "--fade", "100+60:12.5"])
            .args(["--block-loss", "1.0.0.1@300.5+2", "--drift", "3/900"])
            .output(),
    )
    .await
    .expect("skywave-emu did not exit")
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    for said in [
        "node 1.0.0.2 hears nothing from 0.0 s to 40.0 s",
        "every node hears everything 12.5 dB weaker from 100.0 s to 160.0 s",
        "node 1.0.0.1 hears no interleaver block whole from 300.5 s to 302.5 s",
        "cannot listen on",
    ] {
        assert!(err.contains(said), "{said:?} not in {err}");
    }
}

/// The CAS-1 options an operator can get wrong are refused with a message that says why,
/// before the emulator listens: a maximum of links without an idle time to break them by,
/// a maximum of zero, a wait for first data without CAS-1, and a hard-link time-out of 0;
/// so are a confirm wait of 0, a negative default TTL, a restart of a node that does not
/// exist or at no time, and impairments that cannot be.
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
        (
            &["--hard-link-timeout", "0"][..],
            "--hard-link-timeout must be a positive number of seconds",
        ),
        (
            &["--confirm-wait", "0"][..],
            "--confirm-wait must be a positive number of seconds",
        ),
        (
            &["--default-ttl=-5"][..],
            "--default-ttl must be a positive number of seconds",
        ),
        (
            &["--restart", "9.9.9.9@5"][..],
            "9.9.9.9 is not one of the nodes",
        ),
        (
            &["--restart", "1.0.0.1@soon"][..],
            "soon is not a number of seconds",
        ),
        (&["--restart", "1.0.0.1"][..], "expected ADDR@SECS[+DOWN]"),
        (
            &["--restart", "1.0.0.1@5+ever"][..],
            "ever is not a number of seconds",
        ),
        (
            &["--outage", "9.9.9.9@5+10"][..],
            "9.9.9.9 is not one of the nodes",
        ),
        (&["--outage", "5"][..], "expected [ADDR@]START+LENGTH"),
        (&["--outage", "5+0"][..], "the length must be more than 0 s"),
        (
            &["--block-loss", "soon+10"][..],
            "soon is not a number of seconds",
        ),
        (&["--fade", "0+10"][..], "expected [ADDR@]START+LENGTH:DB"),
        (
            &["--fade=0+10:-3"][..],
            "-3 is not a depth of more than 0 and at most 200 dB",
        ),
        (
            &["--drift", "50"][..],
            "50 is not a deviation of 0 to 40 dB",
        ),
        (&["--drift", "3/0"][..], "0 is not a correlation time"),
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

/// Hard links through `skywave-emu` over TCP SIS, as a third-party client would ask for them:
/// a type 2 link to a client that accepts it carries data and is terminated; one to a node
/// with no client on the SAP is refused; and with `--hard-link-timeout 60` (3 s of wall time
/// at 20x), one whose called client never answers is rejected "remote node not responding".
/// The counters line reports them.
#[tokio::test]
async fn hard_links_over_tcp_sis_are_made_used_refused_and_timed_out() {
    use skywave_sis::stream::SisStream;
    use skywave_sis::{
        HardLink, HardLinkRejectReason, HardLinkTerminateReason, HardLinkType, LinkPriority,
        NodeAddress, Primitive, SapId, ServiceType,
    };
    let args = skywave_e2e::two_fast_nodes(&["--cas1", "--hard-link-timeout", "60"]);
    let emu = skywave_e2e::start_emu(args, 2).await;
    let bind = |addr: String, sap: u8| async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut s = SisStream::new(tcp);
        let sap = SapId::new(sap).unwrap();
        let answer = s.bind(sap, Default::default(), ServiceType::ARQ_NODE_CONFIRM);
        assert!(matches!(
            answer.await.unwrap(),
            Some(Primitive::BindAccepted { .. })
        ));
        assert!(matches!(
            s.recv().await.unwrap(),
            Some(Primitive::SubnetAvailability { .. })
        ));
        s
    };
    // Wall-clock bounds: at 20x, 30 s is ten simulated minutes.
    async fn next<T: tokio::io::AsyncRead + tokio::io::AsyncWrite>(
        s: &mut SisStream<T>,
    ) -> Primitive {
        timeout(Duration::from_secs(30), s.recv())
            .await
            .expect("no primitive in time")
            .unwrap()
            .expect("connection closed")
    }
    let mut ship = bind(emu.servers[0].1.clone(), 5).await;
    let mut shore = bind(emu.servers[1].1.clone(), 3).await;
    let ship_addr: NodeAddress = "1.0.0.1".parse().unwrap();
    let shore_addr: NodeAddress = "1.0.0.2".parse().unwrap();
    let asked = HardLink {
        link_type: HardLinkType::FullBandwidth,
        priority: LinkPriority::new(1).unwrap(),
        remote_sap: SapId::new(3).unwrap(),
        remote: shore_addr,
    };
    ship.send(&Primitive::HardLinkEstablish(asked))
        .await
        .unwrap();
    let seen = HardLink {
        remote_sap: SapId::new(5).unwrap(),
        remote: ship_addr,
        ..asked
    };
    assert_eq!(
        next(&mut shore).await,
        Primitive::HardLinkIndication {
            remote_status: 1,
            link: seen
        }
    );
    shore.send(&Primitive::HardLinkAccept(seen)).await.unwrap();
    assert_eq!(
        next(&mut ship).await,
        Primitive::HardLinkEstablished {
            remote_status: 1,
            link: asked
        }
    );
    ship.send(&Primitive::HardLinkTerminate { remote: shore_addr })
        .await
        .unwrap();
    assert_eq!(
        next(&mut shore).await,
        Primitive::HardLinkTerminated {
            reason: HardLinkTerminateReason::TerminatedByRemote,
            link: seen
        }
    );
    // Nobody on the shore's SAP 9: refused by the shore.
    let to_nobody = HardLink {
        remote_sap: SapId::new(9).unwrap(),
        ..asked
    };
    ship.send(&Primitive::HardLinkEstablish(to_nobody))
        .await
        .unwrap();
    assert_eq!(
        next(&mut ship).await,
        Primitive::HardLinkRejected {
            reason: HardLinkRejectReason::DestinationSapNotBound,
            link: to_nobody
        }
    );
    // The shore's client leaves an indication unanswered: after 60 s the ship gives up.
    ship.send(&Primitive::HardLinkEstablish(asked))
        .await
        .unwrap();
    assert!(matches!(
        next(&mut shore).await,
        Primitive::HardLinkIndication { .. }
    ));
    assert_eq!(
        next(&mut ship).await,
        Primitive::HardLinkRejected {
            reason: HardLinkRejectReason::RemoteNodeNotResponding,
            link: asked
        }
    );
    let rest = emu.stop(Duration::from_secs(30)).await;
    let node = |i: usize| node_counters(&rest, i);
    assert!(
        node(0).ends_with(", hard links 3 requested 1 made 1 ended"),
        "{rest:?}"
    );
    assert!(
        node(1).ends_with(", hard links 0 requested 1 made 1 ended"),
        "{rest:?}"
    );
}
