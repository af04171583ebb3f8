//! `skywave sis probe` as an operator runs it: the real binary against a scripted SIS server on
//! 127.0.0.1 (bind accepted, bind rejected), and against a port where nothing listens.

// Test helpers outside #[test] functions may panic freely too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use bytes::Bytes;
use skywave_sis::stream::SisStream;
use skywave_sis::*;
use tokio::net::TcpListener;
use tokio::time::timeout;

fn skywave() -> PathBuf {
    skywave_e2e::bin("skywave")
}

/// Runs the probe. Call [`skywave`] before starting a scripted server, so that the server's
/// accept timeout does not include building the binary.
async fn probe(args: Vec<String>) -> Output {
    let bin = skywave();
    let run = tokio::process::Command::new(bin)
        .args(args)
        .env("RUST_LOG", "warn")
        .output();
    timeout(Duration::from_secs(60), run)
        .await
        .expect("probe hung")
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Serves one connection with `script` and returns what it saw.
async fn serve_one<F, Fut>(script: F) -> (String, tokio::task::JoinHandle<Vec<Primitive>>)
where
    F: FnOnce(SisStream<tokio::net::TcpStream>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Vec<Primitive>> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        let (stream, _) = timeout(Duration::from_secs(60), listener.accept())
            .await
            .unwrap()
            .unwrap();
        script(SisStream::new(stream)).await
    });
    (addr, task)
}

async fn next(s: &mut SisStream<tokio::net::TcpStream>) -> Option<Primitive> {
    timeout(Duration::from_secs(30), s.recv())
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_prints_mtu_availability_and_indications() {
    skywave();
    let (addr, server) = serve_one(|mut s| async move {
        let mut seen = vec![next(&mut s).await.unwrap()];
        s.send(&Primitive::BindAccepted {
            sap: SapId::HMTP,
            mtu: 2048,
        })
        .await
        .unwrap();
        s.send(&Primitive::SubnetAvailability {
            status: SubnetStatus::On,
            reason: SubnetReason::Unspecified,
        })
        .await
        .unwrap();
        let ind = UnidataIndication {
            dest_sap: SapId::HMTP,
            dest: "0.0.0.1".parse().unwrap(),
            tx_mode: TxMode::Arq,
            src_sap: SapId::HMTP,
            src: "1.35.69.103".parse().unwrap(),
            updu: Bytes::from_static(b"hello"),
            ..Default::default()
        };
        s.send(&Primitive::UnidataIndication(ind)).await.unwrap();
        while let Some(p) = next(&mut s).await {
            seen.push(p);
        }
        seen
    })
    .await;
    let out = probe(
        [
            "sis", "probe", "--server", &addr, "--sap", "3", "--wait", "1",
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "probe failed: {stdout}{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("MTU 2048 bytes"), "{stdout}");
    assert!(
        stdout.contains("subnet availability: on (unspecified)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("unidata indication from 1.35.69.103:3 to 0.0.0.1:3 (ARQ), 5 bytes"),
        "{stdout}"
    );
    let seen = server.await.unwrap();
    let Primitive::BindRequest { sap, rank, service } = &seen[0] else {
        panic!("{seen:?}")
    };
    assert_eq!(
        (sap.get(), rank.get(), *service),
        (3, 0, ServiceType::ARQ_NODE_CONFIRM)
    );
    assert_eq!(seen.last(), Some(&Primitive::UnbindRequest));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_reports_rejected_bind() {
    skywave();
    let (addr, server) = serve_one(|mut s| async move {
        let seen = vec![next(&mut s).await.unwrap()];
        s.send(&Primitive::BindRejected {
            reason: BindRejectReason::SapAlreadyAllocated,
        })
        .await
        .unwrap();
        seen
    })
    .await;
    let args = [
        "sis",
        "probe",
        "--server",
        &addr,
        "--sap",
        "12",
        "--rank",
        "2",
        "--mode",
        "non-arq-with-errors",
    ];
    let out = probe(args.map(String::from).to_vec()).await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "stdout {} stderr {}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("bind of SAP 12 rejected: SAP ID already allocated (reason code 3)"),
        "{stderr}"
    );
    let seen = server.await.unwrap();
    assert_eq!(
        seen,
        vec![Primitive::BindRequest {
            sap: SapId::new(12).unwrap(),
            rank: Rank::new(2).unwrap(),
            service: ServiceType {
                tx_mode: TxMode::NonArqWithErrors,
                ..ServiceType::NON_ARQ
            }
        }]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_fails_clearly_when_unreachable() {
    // A port that was just free: nothing listens there any more.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let out = probe(
        [
            "sis",
            "probe",
            "--server",
            &addr,
            "--sap",
            "3",
            "--timeout",
            "2",
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("SIS server {addr} unreachable")),
        "{stderr}"
    );
}
