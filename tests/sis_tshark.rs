//! Wireshark's `s5066sis` dissector as an independent check of the SIS bytes: the real client
//! talks to a scripted server exercising many primitive types (including the Rockwell form of
//! S_UNIDATA_INDICATION), its traffic is captured to a pcap through `PcapCapture`, and tshark
//! must recognise every S_Primitive with nothing malformed.

// Test helpers outside #[test] functions may panic freely too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use skywave_sis::client::{Delivery, Event, PcapCapture, SendError};
use skywave_sis::stream::SisStream;
use skywave_sis::*;
use tokio::io::DuplexStream;
use tokio::sync::mpsc;
use tokio::time::timeout;

/// The server end of the pipe, recording the type of every primitive seen in either direction.
struct Script {
    io: SisStream<DuplexStream>,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl Script {
    async fn send(&mut self, p: Primitive) {
        self.seen.lock().unwrap().push(p.type_code());
        self.io.send(&p).await.unwrap();
    }

    async fn recv(&mut self) -> Primitive {
        let p = timeout(Duration::from_secs(30), self.io.recv())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        self.seen.lock().unwrap().push(p.type_code());
        p
    }
}

fn tshark(args: &[&str]) -> String {
    let out = Command::new("tshark").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "tshark {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn addr(s: &str) -> NodeAddress {
    s.parse().unwrap()
}

async fn bind(server: &mut Script, mtu: u16) {
    assert!(matches!(server.recv().await, Primitive::BindRequest { .. }));
    server
        .send(Primitive::BindAccepted {
            sap: SapId::HMTP,
            mtu,
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn tshark_decodes_every_sis_frame_of_a_real_session() {
    if !skywave_emu::missing::have_tool(
        "tshark",
        "the check of SIS frames with Wireshark's dissector",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sis.pcap");
    let capture = PcapCapture::create(&path).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (tx, mut pipes) = mpsc::unbounded_channel();
    let seen2 = Arc::clone(&seen);
    let connector = move || {
        let tx = tx.clone();
        let seen = Arc::clone(&seen2);
        async move {
            let (client, server) = tokio::io::duplex(64 * 1024);
            let _ = tx.send(Script {
                io: SisStream::new(server),
                seen,
            });
            Ok(client)
        }
    };
    let config = ClientConfig::new(SapId::HMTP, ServiceType::ARQ_NODE_CONFIRM);
    let (connected, mut server) = tokio::join!(
        Client::connect(capture.connector(connector), config),
        async {
            let mut s = pipes.recv().await.unwrap();
            bind(&mut s, 2048).await;
            s
        }
    );
    let (client, _bound, mut events) = connected.unwrap();
    let peer = addr("1.35.69.103");
    let me = addr("0.0.0.1");
    let req = |updu: &'static [u8]| UnidataRequest {
        priority: Priority::new(5).unwrap(),
        dest_sap: SapId::HMTP,
        dest: peer,
        mode: ServiceType::DEFAULT,
        ttl: Ttl::from_secs(120).unwrap(),
        updu: Bytes::from_static(updu),
    };

    // Subnet up, keep-alive from the server (answered by the client).
    server
        .send(Primitive::SubnetAvailability {
            status: SubnetStatus::On,
            reason: SubnetReason::Unspecified,
        })
        .await;
    server.send(Primitive::KeepAlive).await;
    assert_eq!(server.recv().await, Primitive::KeepAlive);

    // A confirmed, a rejected and an expedited U_PDU.
    let a = client.send_unidata(req(b"EHLO ship.example\r\n")).unwrap();
    let b = client
        .send_unidata(req(b"MAIL FROM:<a@ship.example>\r\n"))
        .unwrap();
    let e = client.send_expedited(req(b"URGENT")).unwrap();
    for _ in 0..3 {
        server.recv().await;
    }
    let confirm = UnidataConfirm {
        dest_sap: SapId::HMTP,
        dest: peer,
        updu_part: Bytes::from_static(b"EHLO"),
    };
    server.send(Primitive::UnidataRequestConfirm(confirm)).await;
    server
        .send(Primitive::UnidataRequestRejected(UnidataRejected {
            reason: UnidataRejectReason::TtlExpired,
            dest_sap: SapId::HMTP,
            dest: peer,
            updu_part: Bytes::from_static(b"MAIL"),
        }))
        .await;
    let confirm_e = UnidataConfirm {
        dest_sap: SapId::HMTP,
        dest: peer,
        updu_part: Bytes::from_static(b"URG"),
    };
    server
        .send(Primitive::ExpeditedUnidataRequestConfirm(confirm_e))
        .await;
    assert!(matches!(a.await, Ok(Delivery::Confirmed(_))));
    assert!(matches!(b.await, Err(SendError::Rejected(_))));
    assert!(matches!(e.await, Ok(Delivery::Confirmed(_))));

    // Indications: plain, Rockwell form, non-ARQ with errors, expedited.
    let ind = UnidataIndication {
        priority: Priority::new(5).unwrap(),
        dest_sap: SapId::HMTP,
        dest: me,
        tx_mode: TxMode::Arq,
        src_sap: SapId::HMTP,
        src: peer,
        updu: Bytes::from_static(b"220 shore.example HMTP\r\n"),
        ..Default::default()
    };
    let rockwell = UnidataIndication {
        rockwell_form: true,
        ..ind.clone()
    };
    let errored = UnidataIndication {
        tx_mode: TxMode::NonArqWithErrors,
        errored: vec![Block { offset: 2, size: 3 }],
        missing: vec![Block {
            offset: 10,
            size: 4,
        }],
        ..ind.clone()
    };
    server.send(Primitive::UnidataIndication(ind.clone())).await;
    server
        .send(Primitive::UnidataIndication(rockwell.clone()))
        .await;
    server
        .send(Primitive::UnidataIndication(errored.clone()))
        .await;
    // Expedited primitives carry no priority.
    let expedited = UnidataIndication {
        priority: Priority::default(),
        ..ind.clone()
    };
    server
        .send(Primitive::ExpeditedUnidataIndication(expedited.clone()))
        .await;
    assert_eq!(
        events.recv().await,
        Some(Event::SubnetAvailability {
            status: SubnetStatus::On,
            reason: SubnetReason::Unspecified
        })
    );
    assert_eq!(events.recv().await, Some(Event::Unidata(ind.clone())));
    assert_eq!(events.recv().await, Some(Event::Unidata(rockwell)));
    assert_eq!(events.recv().await, Some(Event::Unidata(errored)));
    assert_eq!(events.recv().await, Some(Event::Expedited(expedited)));

    // Flow off: the U_PDU waits until flow on.
    server.send(Primitive::DataFlowOff).await;
    server.send(Primitive::KeepAlive).await;
    assert_eq!(server.recv().await, Primitive::KeepAlive);
    let held = client
        .send_unidata(UnidataRequest {
            mode: ServiceType::ARQ,
            ..req(b"DATA\r\n")
        })
        .unwrap();
    assert!(
        timeout(Duration::from_secs(10), server.io.recv())
            .await
            .is_err()
    );
    server.send(Primitive::DataFlowOn).await;
    assert!(matches!(server.recv().await, Primitive::UnidataRequest(_)));
    assert_eq!(held.await, Ok(Delivery::Sent));

    // Hard-link and management indications.
    let link = HardLink {
        link_type: HardLinkType::FullBandwidth,
        priority: LinkPriority::new(1).unwrap(),
        remote_sap: SapId::HMTP,
        remote: peer,
    };
    server
        .send(Primitive::HardLinkIndication {
            remote_status: 1,
            link,
        })
        .await;
    server
        .send(Primitive::HardLinkTerminated {
            reason: HardLinkTerminateReason::PhysicalLinkBroken,
            link,
        })
        .await;
    server
        .send(Primitive::ManagementIndication {
            msg_type: 1,
            body: Bytes::from_static(b"status"),
        })
        .await;
    for _ in 0..3 {
        events.recv().await.unwrap();
    }

    // The server unbinds the client; it reconnects (a second TCP conversation) and binds again.
    server
        .send(Primitive::UnbindIndication {
            reason: UnbindReason::Inactivity,
        })
        .await;
    assert_eq!(
        events.recv().await,
        Some(Event::Unbound(UnbindReason::Inactivity))
    );
    assert!(matches!(
        events.recv().await,
        Some(Event::Disconnected { .. })
    ));
    let mut server = pipes.recv().await.unwrap();
    bind(&mut server, 200).await;
    assert!(matches!(events.recv().await, Some(Event::Reconnected(_))));
    client.unbind().await.unwrap();
    assert_eq!(server.recv().await, Primitive::UnbindRequest);
    capture.flush().unwrap();
    drop(capture);

    let mut expected: BTreeMap<u8, usize> = BTreeMap::new();
    for t in seen.lock().unwrap().iter() {
        *expected.entry(*t).or_default() += 1;
    }
    assert!(
        expected.len() >= 18,
        "the session should exercise many types: {expected:?}"
    );

    let pcap = path.to_str().unwrap();
    let fields = tshark(&[
        "-r",
        pcap,
        "-T",
        "fields",
        "-e",
        "frame.number",
        "-e",
        "s5066sis.type",
    ]);
    let mut decoded: BTreeMap<u8, usize> = BTreeMap::new();
    for line in fields.lines() {
        let mut cols = line.split('\t');
        let _frame = cols.next();
        for t in cols
            .next()
            .unwrap_or("")
            .split(',')
            .filter(|t| !t.is_empty())
        {
            *decoded.entry(t.trim().parse().unwrap()).or_default() += 1;
        }
    }
    assert_eq!(
        decoded, expected,
        "tshark's s5066sis types vs the primitives exchanged\n{fields}"
    );

    let malformed = tshark(&[
        "-r",
        pcap,
        "-Y",
        "_ws.malformed || _ws.expert.severity == \"Error\"",
    ]);
    assert!(
        malformed.trim().is_empty(),
        "tshark found malformed frames:\n{malformed}"
    );
    let verbose = tshark(&["-r", pcap, "-V"]);
    assert!(
        verbose.contains("Rockwell"),
        "tshark should note the Rockwell-form indication"
    );

    // Control: the same check does flag a truncated S_UNIDATA_REQUEST (Size 1), so a clean
    // result above means something.
    let bad_path = dir.path().join("bad.pcap");
    let mut w =
        skywave_sis::pcap::PcapWriter::new(std::fs::File::create(&bad_path).unwrap()).unwrap();
    let mut flow = skywave_sis::pcap::TcpFlow::new(
        "10.0.0.1:40000".parse().unwrap(),
        "10.0.0.2:5066".parse().unwrap(),
    );
    let dir_c2s = skywave_sis::pcap::Direction::ClientToServer;
    flow.handshake(&mut w, Duration::from_secs(1)).unwrap();
    flow.data(
        &mut w,
        Duration::from_secs(1),
        dir_c2s,
        &[0x90, 0xEB, 0x00, 0x00, 0x01, 0x14],
    )
    .unwrap();
    w.flush().unwrap();
    let flagged = tshark(&[
        "-r",
        bad_path.to_str().unwrap(),
        "-Y",
        "_ws.malformed || _ws.expert.severity == \"Error\"",
    ]);
    assert!(
        flagged.contains("Malformed"),
        "control frame not flagged: {flagged:?}"
    );
}
