//! The async client against a scripted SIS server over `tokio::io::duplex`, in paused virtual
//! time: bind outcomes, MTU enforcement, confirmation matching, flow control, keep-alive,
//! reconnection and the duplicate filter.

// Test helpers outside #[test] functions may panic freely too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use skywave_sis::client::{ClientError, Delivery, Event, SendError};
use skywave_sis::stream::SisStream;
use skywave_sis::*;
use tokio::io::DuplexStream;
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};

type Server = SisStream<DuplexStream>;

/// A connector handing the server end of each new duplex pipe to the test; the first
/// `refuse` attempts after `refuse_from` fail as if the server were down.
struct Pipes {
    servers: mpsc::UnboundedReceiver<Server>,
    attempts: Arc<Mutex<Vec<Instant>>>,
    refuse: Arc<AtomicUsize>,
}

fn make_pipes() -> (impl Connector, Pipes) {
    let (tx, servers) = mpsc::unbounded_channel();
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let refuse = Arc::new(AtomicUsize::new(0));
    let (a, r) = (Arc::clone(&attempts), Arc::clone(&refuse));
    let connector = move || {
        let tx = tx.clone();
        let a = Arc::clone(&a);
        let r = Arc::clone(&r);
        async move {
            a.lock().unwrap().push(Instant::now());
            if r.load(Ordering::SeqCst) > 0 {
                r.fetch_sub(1, Ordering::SeqCst);
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    "server down",
                ));
            }
            let (client, server) = tokio::io::duplex(64 * 1024);
            tx.send(SisStream::new(server))
                .map_err(|_| io::Error::other("test over"))?;
            Ok(client)
        }
    };
    (
        connector,
        Pipes {
            servers,
            attempts,
            refuse,
        },
    )
}

fn config(sap: u8) -> ClientConfig {
    ClientConfig::new(SapId::new(sap).unwrap(), ServiceType::ARQ_NODE_CONFIRM)
}

async fn recv(server: &mut Server) -> Primitive {
    timeout(Duration::from_secs(30), server.recv())
        .await
        .expect("server waited 30 s")
        .unwrap()
        .unwrap()
}

/// Accepts the bind on the next pipe, checking the request.
async fn accept(pipes: &mut Pipes, sap: u8, mtu: u16) -> Server {
    let mut server = pipes.servers.recv().await.unwrap();
    let p = recv(&mut server).await;
    let Primitive::BindRequest {
        sap: s,
        rank,
        service,
    } = p
    else {
        panic!("expected bind, got {p:?}")
    };
    assert_eq!(
        (s.get(), rank.get(), service),
        (sap, 0, ServiceType::ARQ_NODE_CONFIRM)
    );
    server
        .send(&Primitive::BindAccepted { sap: s, mtu })
        .await
        .unwrap();
    server
}

async fn start(sap: u8, mtu: u16) -> (Client, Events, Server, Pipes) {
    let (connector, mut pipes) = make_pipes();
    let (client, bound) = tokio::join!(
        Client::connect(connector, config(sap)),
        accept(&mut pipes, sap, mtu)
    );
    let server = bound;
    let (client, b, events) = client.unwrap();
    assert_eq!(
        b,
        Bound {
            sap: SapId::new(sap).unwrap(),
            mtu
        }
    );
    assert_eq!(client.mtu(), mtu);
    (client, events, server, pipes)
}

fn dest() -> NodeAddress {
    "1.35.69.103".parse().unwrap()
}

fn request(sap: u8, updu: &'static [u8]) -> UnidataRequest {
    UnidataRequest {
        priority: Priority::new(5).unwrap(),
        dest_sap: SapId::new(sap).unwrap(),
        dest: dest(),
        mode: ServiceType::DEFAULT,
        ttl: Ttl::from_secs(120).unwrap(),
        updu: Bytes::from_static(updu),
    }
}

fn unconfirmed(sap: u8, updu: &'static [u8]) -> UnidataRequest {
    UnidataRequest {
        mode: ServiceType::ARQ,
        ..request(sap, updu)
    }
}

/// Round trip through the driver: once the echo arrives, everything sent before it was handled.
async fn sync(server: &mut Server) {
    server.send(&Primitive::KeepAlive).await.unwrap();
    assert_eq!(recv(server).await, Primitive::KeepAlive);
}

#[tokio::test(start_paused = true)]
async fn bind_accepted_with_mtu_2048() {
    let (client, _events, mut server, _pipes) = start(3, 2048).await;
    client.unbind().await.unwrap();
    assert_eq!(recv(&mut server).await, Primitive::UnbindRequest);
    assert!(
        server.recv().await.unwrap().is_none(),
        "connection closed after unbind"
    );
}

#[tokio::test(start_paused = true)]
async fn bind_rejected_for_each_reason() {
    for code in 0..=5u8 {
        let (connector, mut pipes) = make_pipes();
        let server = async {
            let mut s = pipes.servers.recv().await.unwrap();
            assert!(matches!(recv(&mut s).await, Primitive::BindRequest { .. }));
            s.send(&Primitive::BindRejected {
                reason: BindRejectReason::from(code),
            })
            .await
            .unwrap();
            s
        };
        let (result, _s) = tokio::join!(Client::connect(connector, config(3)), server);
        let Err(ClientError::BindRejected(reason)) = result else {
            panic!("bind should fail")
        };
        assert_eq!(u8::from(reason), code);
        let msg = ClientError::BindRejected(reason).to_string();
        assert!(
            msg.starts_with("bind rejected by the SIS server: "),
            "{msg}"
        );
    }
    assert_eq!(
        BindRejectReason::from(3).to_string(),
        "SAP ID already allocated"
    );
}

#[tokio::test(start_paused = true)]
async fn bind_timeout_and_connect_failure() {
    let (connector, mut pipes) = make_pipes();
    let silent = async { pipes.servers.recv().await.unwrap() };
    let (result, _s) = tokio::join!(Client::connect(connector, config(3)), silent);
    assert!(matches!(result, Err(ClientError::BindTimeout(_))));

    let (connector, pipes) = make_pipes();
    pipes.refuse.store(1, Ordering::SeqCst);
    let result = Client::connect(connector, config(3)).await;
    let Err(e @ ClientError::Connect(_)) = result else {
        panic!("connect should fail")
    };
    assert!(e.to_string().contains("server down"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn mtu_200_refuses_oversize_locally() {
    let (client, _events, mut server, _pipes) = start(3, 200).await;
    let big = UnidataRequest {
        updu: Bytes::from(vec![1u8; 201]),
        ..unconfirmed(3, b"")
    };
    let err = client.send_unidata(big).unwrap_err();
    assert!(matches!(err, ClientError::TooLarge { len: 201, mtu: 200 }));
    assert_eq!(
        err.to_string(),
        "U_PDU of 201 bytes exceeds the server's MTU of 200 bytes; not sent"
    );
    let fits = UnidataRequest {
        updu: Bytes::from(vec![2u8; 200]),
        ..unconfirmed(3, b"")
    };
    let pending = client.send_unidata(fits.clone()).unwrap();
    // The next thing the server sees is the 200-byte one: the oversize one never left.
    assert_eq!(recv(&mut server).await, Primitive::UnidataRequest(fits));
    assert_eq!(pending.await, Ok(Delivery::Sent));
}

#[tokio::test(start_paused = true)]
async fn confirms_and_rejects_match_requests_in_flight() {
    let (client, _events, mut server, _pipes) = start(3, 2048).await;
    let a = client.send_unidata(request(3, b"same-prefix A")).unwrap();
    let b = client.send_unidata(request(3, b"same-prefix B")).unwrap();
    let c = client.send_unidata(request(3, b"other C")).unwrap();
    let e = client.send_expedited(request(3, b"same-prefix E")).unwrap();
    for _ in 0..4 {
        assert!(matches!(
            recv(&mut server).await,
            Primitive::UnidataRequest(_) | Primitive::ExpeditedUnidataRequest(_)
        ));
    }
    let part = |s: &'static [u8]| Bytes::from_static(s);
    let confirm = |p: &'static [u8]| UnidataConfirm {
        dest_sap: SapId::HMTP,
        dest: dest(),
        updu_part: part(p),
    };
    // Reject C first, then two confirms on the shared prefix (oldest first), then E's.
    server
        .send(&Primitive::UnidataRequestRejected(UnidataRejected {
            reason: UnidataRejectReason::DestinationNodeNotResponding,
            dest_sap: SapId::HMTP,
            dest: dest(),
            updu_part: part(b"oth"),
        }))
        .await
        .unwrap();
    server
        .send(&Primitive::ExpeditedUnidataRequestConfirm(confirm(
            b"same-",
        )))
        .await
        .unwrap();
    server
        .send(&Primitive::UnidataRequestConfirm(confirm(b"same-")))
        .await
        .unwrap();
    server
        .send(&Primitive::UnidataRequestConfirm(confirm(b"same-prefix")))
        .await
        .unwrap();
    let Err(SendError::Rejected(r)) = c.await else {
        panic!("C must be rejected")
    };
    assert_eq!(r.reason, UnidataRejectReason::DestinationNodeNotResponding);
    assert_eq!(e.await, Ok(Delivery::Confirmed(confirm(b"same-"))));
    assert_eq!(a.await, Ok(Delivery::Confirmed(confirm(b"same-"))));
    assert_eq!(b.await, Ok(Delivery::Confirmed(confirm(b"same-prefix"))));
}

#[tokio::test(start_paused = true)]
async fn keep_alive_is_answered_at_once() {
    let (_client, _events, mut server, _pipes) = start(3, 2048).await;
    let t0 = Instant::now();
    server.send(&Primitive::KeepAlive).await.unwrap();
    assert_eq!(recv(&mut server).await, Primitive::KeepAlive);
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "answered after {:?}",
        t0.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn flow_off_holds_updus_until_on() {
    let (client, _events, mut server, _pipes) = start(3, 2048).await;
    server.send(&Primitive::DataFlowOff).await.unwrap();
    sync(&mut server).await;
    let p1 = client.send_unidata(unconfirmed(3, b"one")).unwrap();
    let p2 = client.send_unidata(unconfirmed(3, b"two")).unwrap();
    // Nothing reaches the server for a minute of flow off; keep-alives are still answered.
    assert!(
        timeout(Duration::from_secs(60), server.recv())
            .await
            .is_err()
    );
    sync(&mut server).await;
    server.send(&Primitive::DataFlowOn).await.unwrap();
    assert_eq!(
        recv(&mut server).await,
        Primitive::UnidataRequest(unconfirmed(3, b"one"))
    );
    assert_eq!(
        recv(&mut server).await,
        Primitive::UnidataRequest(unconfirmed(3, b"two"))
    );
    assert_eq!(p1.await, Ok(Delivery::Sent));
    assert_eq!(p2.await, Ok(Delivery::Sent));
}

#[tokio::test(start_paused = true)]
async fn events_are_reported() {
    let (_client, mut events, mut server, _pipes) = start(3, 2048).await;
    let ind = UnidataIndication {
        dest_sap: SapId::HMTP,
        dest: dest(),
        tx_mode: TxMode::Arq,
        src_sap: SapId::HMTP,
        src: "0.0.0.9".parse().unwrap(),
        rockwell_form: true,
        updu: Bytes::from_static(b"250 OK\r\n"),
        ..Default::default()
    };
    server
        .send(&Primitive::UnidataIndication(ind.clone()))
        .await
        .unwrap();
    server
        .send(&Primitive::SubnetAvailability {
            status: SubnetStatus::HalfDuplex,
            reason: SubnetReason::Unspecified,
        })
        .await
        .unwrap();
    server
        .send(&Primitive::ExpeditedUnidataIndication(ind.clone()))
        .await
        .unwrap();
    server
        .send(&Primitive::ManagementIndication {
            msg_type: 4,
            body: Bytes::from_static(b"x"),
        })
        .await
        .unwrap();
    let hl = Primitive::HardLinkTerminated {
        reason: HardLinkTerminateReason::PhysicalLinkBroken,
        link: HardLink::default(),
    };
    server.send(&hl).await.unwrap();
    assert_eq!(events.recv().await, Some(Event::Unidata(ind.clone())));
    assert_eq!(
        events.recv().await,
        Some(Event::SubnetAvailability {
            status: SubnetStatus::HalfDuplex,
            reason: SubnetReason::Unspecified
        })
    );
    assert_eq!(events.recv().await, Some(Event::Expedited(ind)));
    assert_eq!(
        events.recv().await,
        Some(Event::Management {
            msg_type: 4,
            body: Bytes::from_static(b"x")
        })
    );
    assert_eq!(events.recv().await, Some(Event::HardLink(hl)));
}

#[tokio::test(start_paused = true)]
async fn server_restart_reconnects_with_backoff_and_rebinds() {
    let (client, mut events, mut server, mut pipes) = start(3, 2048).await;
    let in_flight = client.send_unidata(request(3, b"MAIL FROM:<a@b>")).unwrap();
    assert!(matches!(
        recv(&mut server).await,
        Primitive::UnidataRequest(_)
    ));
    pipes.refuse.store(2, Ordering::SeqCst);
    let lost_at = Instant::now();
    drop(server);
    assert_eq!(in_flight.await, Err(SendError::ConnectionLost));
    let Some(Event::Disconnected { reason }) = events.recv().await else {
        panic!("expected Disconnected")
    };
    assert!(reason.contains("closed"), "{reason}");
    // Submitted while disconnected: held, and sent once bound again.
    let held = client.send_unidata(unconfirmed(3, b"held")).unwrap();
    // Two refused attempts (after 1 s and 2 s more), the third one binds with the same
    // parameters and may get another MTU.
    let mut server = accept(&mut pipes, 3, 1000).await;
    assert_eq!(
        events.recv().await,
        Some(Event::Reconnected(Bound {
            sap: SapId::HMTP,
            mtu: 1000
        }))
    );
    assert_eq!(client.mtu(), 1000);
    assert_eq!(
        recv(&mut server).await,
        Primitive::UnidataRequest(unconfirmed(3, b"held"))
    );
    assert_eq!(held.await, Ok(Delivery::Sent));
    let offsets: Vec<Duration> = pipes.attempts.lock().unwrap()[1..]
        .iter()
        .map(|t| *t - lost_at)
        .collect();
    assert_eq!(
        offsets,
        vec![
            Duration::from_secs(1),
            Duration::from_secs(3),
            Duration::from_secs(7)
        ]
    );
    // And it works again.
    let p = client.send_unidata(unconfirmed(3, b"again")).unwrap();
    assert_eq!(
        recv(&mut server).await,
        Primitive::UnidataRequest(unconfirmed(3, b"again"))
    );
    assert_eq!(p.await, Ok(Delivery::Sent));
}

#[tokio::test(start_paused = true)]
async fn bad_frame_closes_the_connection_and_reconnects() {
    let (_client, mut events, mut server, mut pipes) = start(3, 2048).await;
    server
        .writer
        .send_raw(&[0x90, 0xEB, 0x00, 0x00, 0x01, 0x63])
        .await
        .unwrap();
    let Some(Event::Disconnected { reason }) = events.recv().await else {
        panic!("expected Disconnected")
    };
    assert!(reason.contains("unknown S_Primitive type 99"), "{reason}");
    assert!(
        server.recv().await.unwrap().is_none(),
        "client closed the bad connection"
    );
    let _server = accept(&mut pipes, 3, 2048).await;
    assert!(matches!(events.recv().await, Some(Event::Reconnected(_))));
}

#[tokio::test(start_paused = true)]
async fn unbind_indication_is_reported_then_rebind() {
    let (_client, mut events, mut server, mut pipes) = start(3, 2048).await;
    server
        .send(&Primitive::UnbindIndication {
            reason: UnbindReason::PreemptedByHigherRank,
        })
        .await
        .unwrap();
    assert_eq!(
        events.recv().await,
        Some(Event::Unbound(UnbindReason::PreemptedByHigherRank))
    );
    assert!(matches!(
        events.recv().await,
        Some(Event::Disconnected { .. })
    ));
    // The SAP is still taken: the rebind is rejected once, then accepted.
    let mut s = pipes.servers.recv().await.unwrap();
    assert!(matches!(recv(&mut s).await, Primitive::BindRequest { .. }));
    s.send(&Primitive::BindRejected {
        reason: BindRejectReason::SapAlreadyAllocated,
    })
    .await
    .unwrap();
    assert_eq!(
        events.recv().await,
        Some(Event::RebindRejected(BindRejectReason::SapAlreadyAllocated))
    );
    let _s = accept(&mut pipes, 3, 2048).await;
    assert!(matches!(events.recv().await, Some(Event::Reconnected(_))));
}

#[tokio::test(start_paused = true)]
async fn duplicate_filter_drops_retransmissions_on_sap_9() {
    let (client, _events, mut server, _pipes) = start(9, 2048).await;
    let seg1 = unconfirmed(9, b"tcp segment seq=1");
    let seg2 = unconfirmed(9, b"tcp segment seq=2");
    assert_eq!(
        client.send_unidata(seg1.clone()).unwrap().await,
        Ok(Delivery::Sent)
    );
    assert_eq!(
        recv(&mut server).await,
        Primitive::UnidataRequest(seg1.clone())
    );
    // TCP above retransmits after 3 s: dropped, never reaches the server.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        client.send_unidata(seg1.clone()).unwrap().await,
        Ok(Delivery::DuplicateDropped)
    );
    // A different segment goes through.
    assert_eq!(
        client.send_unidata(seg2.clone()).unwrap().await,
        Ok(Delivery::Sent)
    );
    assert_eq!(recv(&mut server).await, Primitive::UnidataRequest(seg2));
    // The peer transmits: a retransmission of segment 1 now goes out again.
    let from_peer = UnidataIndication {
        src: dest(),
        tx_mode: TxMode::Arq,
        ..Default::default()
    };
    server
        .send(&Primitive::UnidataIndication(from_peer))
        .await
        .unwrap();
    sync(&mut server).await;
    assert_eq!(
        client.send_unidata(seg1.clone()).unwrap().await,
        Ok(Delivery::Sent)
    );
    assert_eq!(recv(&mut server).await, Primitive::UnidataRequest(seg1));
    let stats = client.filter_stats();
    assert_eq!(
        (stats.dropped, stats.dropped_bytes, stats.passed),
        (1, 17, 3)
    );
}

#[tokio::test(start_paused = true)]
async fn duplicate_filter_is_off_for_other_saps_by_default() {
    let (client, _events, mut server, _pipes) = start(3, 2048).await;
    for _ in 0..2 {
        assert_eq!(
            client.send_unidata(unconfirmed(3, b"same")).unwrap().await,
            Ok(Delivery::Sent)
        );
        assert_eq!(
            recv(&mut server).await,
            Primitive::UnidataRequest(unconfirmed(3, b"same"))
        );
    }
    assert_eq!(client.filter_stats().dropped, 0);
}
