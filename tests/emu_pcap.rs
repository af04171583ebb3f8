//! `skywave-emu --pcap FILE --trace` as an operator runs it: two real SIS clients over TCP send
//! U_PDUs through the standalone emulator; the emulator prints one trace line per
//! transmission, and on SIGTERM closes a pcap of every D_PDU it put on the air, which
//! Wireshark's `s5066dts` dissector must decode (checked when tshark is installed).

// Test helpers outside #[test] functions may panic freely too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::Bytes;
use skywave_sis::client::{Delivery, Event, TcpConnector};
use skywave_sis::*;
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn emulator_writes_a_dts_pcap_and_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("air.pcap");
    let sis_pcap = dir.path().join("sis.pcap");
    let mut args: Vec<std::ffi::OsString> =
        skywave_e2e::two_fast_nodes(&["--segment-size", "400", "--trace"])
            .into_iter()
            .map(Into::into)
            .collect();
    args.extend(["--pcap".into(), pcap.clone().into_os_string()]);
    args.extend(["--sis-pcap".into(), sis_pcap.clone().into_os_string()]);
    let emu = skywave_e2e::start_emu(args, 2).await;
    let servers: Vec<String> = emu.servers.iter().map(|(_, addr)| addr.clone()).collect();
    let config = ClientConfig::new(SapId::HMTP, ServiceType::ARQ_NODE_CONFIRM);
    let (a, _, _ea) = timeout(
        WAIT,
        Client::connect(TcpConnector::new(servers[0].clone()), config.clone()),
    )
    .await
    .unwrap()
    .unwrap();
    let (_b, _, mut eb) = timeout(
        WAIT,
        Client::connect(TcpConnector::new(servers[1].clone()), config),
    )
    .await
    .unwrap()
    .unwrap();
    let dest: NodeAddress = "1.0.0.2".parse().unwrap();
    let sent: Vec<_> = (0..3u8)
        .map(|i| {
            a.send_unidata(UnidataRequest {
                priority: Priority::new(5).unwrap(),
                dest_sap: SapId::HMTP,
                dest,
                mode: ServiceType::DEFAULT,
                ttl: Ttl::INFINITE,
                updu: Bytes::from(vec![b'a' + i; 1500]),
            })
            .unwrap()
        })
        .collect();
    for s in sent {
        let d = timeout(WAIT, s).await.expect("no confirm");
        assert!(matches!(d, Ok(Delivery::Confirmed(_))), "{d:?}");
    }
    let mut got = 0;
    while got < 3 {
        match timeout(WAIT, eb.recv()).await.expect("nothing delivered") {
            Some(Event::Unidata(ind)) => {
                assert_eq!(ind.updu.len(), 1500);
                got += 1;
            }
            Some(_) => {}
            None => panic!("client events ended"),
        }
    }

    let rest = emu.stop(WAIT).await;
    // Trace: node 0's data transmission (FSNs 0..) and node 1's ACK.
    let data_line = rest
        .iter()
        .find(|l| l.contains(" node 0 ") && l.contains("[D0 D1"))
        .unwrap_or_else(|| panic!("no trace line of node 0's data: {rest:?}"));
    assert!(
        data_line.contains("2400 bit/s") && data_line.contains("EOT"),
        "{data_line}"
    );
    assert!(
        rest.iter()
            .any(|l| l.contains(" node 1 ") && l.contains("[ACK]")),
        "{rest:?}"
    );
    let written: u64 = rest
        .iter()
        .find_map(|l| {
            l.split_once(" D_PDUs written to ")
                .map(|(n, _)| n.to_owned())
        })
        .unwrap_or_else(|| panic!("no capture summary: {rest:?}"))
        .parse()
        .unwrap();
    assert!(written >= 4, "{rest:?}");
    let bytes = std::fs::read(&pcap).unwrap();
    assert_eq!(u32::from_le_bytes(bytes[20..24].try_into().unwrap()), 237);

    if !skywave_emu::missing::have_tool("tshark", "the check of skywave-emu's pcap with tshark") {
        return;
    }
    let out = std::process::Command::new("tshark")
        .arg("-r")
        .arg(&pcap)
        .args([
            "-T",
            "fields",
            "-e",
            "s5066dts.type",
            "-e",
            "s5066dts.src_addr",
            "-e",
            "s5066dts.data_only.segmented_cpdu_size",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fields = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = fields.lines().collect();
    assert_eq!(rows.len() as u64, written, "{fields}");
    // Every record decoded as a D_PDU: DATA-ONLY (0) or ACK-ONLY (1), with a source address;
    // DATA-ONLY segments no bigger than --segment-size, and as many as 400-byte segments of
    // three 1500-byte U_PDUs (each in a C_PDU with its S_PDU header) need.
    let mut data = 0;
    for r in &rows {
        let mut f = r.split('\t');
        let (ty, src, size) = (
            f.next().unwrap_or(""),
            f.next().unwrap_or(""),
            f.next().unwrap_or(""),
        );
        assert!(ty == "0" || ty == "1", "{fields}");
        assert!(!src.is_empty(), "{fields}");
        if ty == "0" {
            let size: usize = size.parse().unwrap_or_else(|_| panic!("{fields}"));
            assert!((1..=400).contains(&size), "{fields}");
            data += 1;
        }
    }
    assert!(data >= 3 * 4, "{data} DATA-ONLY D_PDUs:\n{fields}");
    assert!(rows.iter().any(|r| r.starts_with("1\t")), "{fields}");

    // The SIS side: every primitive both clients exchanged, as s5066sis decodes it; at least
    // binds, their acceptance, unidata requests, confirms and indications, none malformed.
    let out = std::process::Command::new("tshark")
        .arg("-r")
        .arg(&sis_pcap)
        .args(["-T", "fields", "-e", "s5066sis.type"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sis = String::from_utf8(out.stdout).unwrap();
    let types: std::collections::BTreeSet<u8> = sis
        .lines()
        .flat_map(|l| l.split(','))
        .filter_map(|t| t.trim().parse().ok())
        .collect();
    // 1 S_BIND_REQUEST, 3 S_BIND_ACCEPTED, 14 S_SUBNET_AVAILABILITY, 20 S_UNIDATA_REQUEST,
    // 21 S_UNIDATA_INDICATION, 22 S_UNIDATA_REQUEST_CONFIRM.
    for t in [1u8, 3, 14, 20, 21, 22] {
        assert!(
            types.contains(&t),
            "s5066sis type {t} missing: {types:?}\n{sis}"
        );
    }
    assert_none_malformed(&sis_pcap);
    assert_none_malformed(&pcap);
}

/// tshark finds no malformed packet and no error-level expert note (a bad CRC, a field out of
/// range) in the capture.
fn assert_none_malformed(pcap: &std::path::Path) {
    let out = std::process::Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-Y", "_ws.malformed || _ws.expert.severity == \"Error\""])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let malformed = String::from_utf8_lossy(&out.stdout);
    assert!(
        malformed.trim().is_empty(),
        "malformed frames in {}:\n{malformed}",
        pcap.display()
    );
}
