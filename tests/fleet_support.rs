//! Shared by the fleet tests that run real `skywave run` processes (`fleet_processes` over the
//! emulated 5066 channel, `fleet_ip` over UDP/IP multicast): start a gateway and read its SMTP
//! address, submit with swaks, watch Maildirs and the base's queue, and check P_MUL captures
//! with Wireshark and with an ACP 142 layout check of our own that shares no code with the
//! encoder under test.

#![allow(dead_code, unreachable_pub, missing_docs)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::time::{Instant, sleep};

use super::support;

/// Longest a step (a start, a delivery) may take.
const STEP: Duration = Duration::from_secs(60);
/// Longest a delivery to every ship may take.
pub const DELIVERY_LIMIT: Duration = Duration::from_secs(120);

/// Asserts that every Maildir has `subject` exactly once.
pub fn assert_once_each(maildirs: &[PathBuf], subject: &str) {
    for (i, m) in maildirs.iter().enumerate() {
        assert_eq!(
            subjects(m).get(subject),
            Some(&1),
            "ship{}: {:?}",
            i + 1,
            subjects(m)
        );
    }
}

/// tshark's arguments that decode UDP on `ports` as P_MUL (Wireshark registers no port for it
/// by default).
pub fn decode_udp_as_p_mul(ports: &[u16]) -> Vec<String> {
    ports
        .iter()
        .flat_map(|p| ["-d".to_owned(), format!("udp.port=={p},p_mul")])
        .collect()
}

/// A running `skywave run`: the process and its SMTP address.
pub struct Gateway {
    pub child: Child,
    pub smtp: String,
    /// The metrics endpoint, when the configuration enables it.
    pub metrics: Option<std::net::SocketAddr>,
}

pub async fn start(config: &Path) -> Gateway {
    start_in(&[], config).await
}

/// As [`start`], the command run through `prefix` (e.g. `nsenter ... --` into a network
/// namespace).
pub async fn start_in(prefix: &[&str], config: &Path) -> Gateway {
    let dir = config.parent().unwrap();
    let log = std::fs::File::create(dir.join("skywave.log")).unwrap();
    let skywave = skywave_e2e::bin("skywave");
    let mut command = match prefix.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(&skywave);
            c
        }
        None => Command::new(&skywave),
    };
    command
        .args(["--log", "info", "run", "--config"])
        .arg(config)
        .stdin(Stdio::null())
        .stderr(Stdio::from(log));
    let g = skywave_e2e::start_gateway(command, STEP)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "gateway {e}:\n{}",
                std::fs::read_to_string(dir.join("skywave.log")).unwrap_or_default()
            )
        });
    Gateway {
        child: g.child,
        smtp: g.smtp,
        metrics: g.metrics.and_then(|a| a.parse().ok()),
    }
}

/// The Subjects of the messages in a Maildir's `new/`, each with its count.
pub fn subjects(maildir: &Path) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(maildir.join("new")) else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        let s = text
            .lines()
            .take_while(|l| !l.is_empty())
            .find_map(|l| l.strip_prefix("Subject: "))
            .unwrap_or("(none)")
            .to_owned();
        *out.entry(s).or_default() += 1;
    }
    out
}

pub async fn swaks(server: &str, to: &str, subject: &str) {
    swaks_with(server, to, subject, &[]).await;
}

/// As [`swaks`], with more swaks arguments (an attachment, say).
pub async fn swaks_with(server: &str, to: &str, subject: &str, extra: &[&str]) {
    swaks_in(&[], server, to, subject, extra).await;
}

/// As [`swaks_with`], swaks run through `prefix` (e.g. `nsenter ... --`).
pub async fn swaks_in(prefix: &[&str], server: &str, to: &str, subject: &str, extra: &[&str]) {
    let header = format!("Subject: {subject}");
    let mut args: Vec<&str> = prefix.iter().skip(1).copied().collect();
    if !prefix.is_empty() {
        args.push("swaks");
    }
    args.extend_from_slice(&[
        "--server",
        server,
        "--helo",
        "hq.test",
        "--from",
        "hq@base.example",
        "--to",
        to,
        "--header",
        &header,
        "--body",
        "Rendezvous 47N 008W at 0600Z.",
    ]);
    args.extend_from_slice(extra);
    let program = prefix.first().copied().unwrap_or("swaks");
    let (code, out, err) = support::run(program, &args).await;
    assert_eq!(code, 0, "swaks failed: {out}{err}");
}

/// Waits until every Maildir has `subject` or the limit passes.
pub async fn wait_all(maildirs: &[PathBuf], subject: &str) {
    let end = Instant::now() + DELIVERY_LIMIT;
    while Instant::now() < end {
        if maildirs.iter().all(|m| subjects(m).contains_key(subject)) {
            return;
        }
        sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `skywave status` of the base says its queue is empty, or the limit passes.
pub async fn base_queue_empty(config: &Path) -> bool {
    let end = Instant::now() + DELIVERY_LIMIT;
    let skywave = skywave_e2e::bin("skywave");
    let cfg = config.display().to_string();
    while Instant::now() < end {
        let (_, out, _) = support::run(
            skywave.to_str().unwrap(),
            &["queue", "--config", &cfg, "list"],
        )
        .await;
        if !out.contains("@ship") {
            return true;
        }
        sleep(Duration::from_millis(500)).await;
    }
    false
}

/// The base's transfer log (`state/transfers.jsonl` beside `config`) once `ready` accepts it:
/// the gateway writes a transfer's record just after it settles the spool, so a test that saw
/// the queue empty may read the log a moment early. What the file holds at [`DELIVERY_LIMIT`]
/// if `ready` never accepts it.
pub async fn transfer_log_when(config: &Path, ready: impl Fn(&str) -> bool) -> String {
    let path = config
        .parent()
        .map(|d| d.join("state/transfers.jsonl"))
        .unwrap_or_default();
    let end = Instant::now() + DELIVERY_LIMIT;
    loop {
        let log = std::fs::read_to_string(&path).unwrap_or_default();
        if ready(&log) || Instant::now() >= end {
            return log;
        }
        sleep(Duration::from_millis(200)).await;
    }
}

/// Wireshark's own P_MUL dissector is an implementation of ACP 142 independent of ours: in
/// `pcap` (read with tshark's `decode_as` arguments, none for SIS captures) it must find every
/// PDU type of `expected` (0 Data, 1 Ack, 2 Address, 4 Announce, 5 Request, 7 Release), every
/// checksum correct, nothing malformed.
pub fn check_pcap_with_wireshark(pcap: &Path, decode_as: &[&str], expected: &[&str]) {
    if !skywave_emu::missing::have_tool("tshark", "the check of P_MUL on the air with Wireshark") {
        return;
    }
    let tshark = |args: &[&str]| {
        let out = std::process::Command::new("tshark")
            .arg("-r")
            .arg(pcap)
            .args(decode_as)
            .args(args)
            .output()
            .expect("run tshark");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let types: std::collections::BTreeSet<String> =
        tshark(&["-Y", "p_mul", "-T", "fields", "-e", "p_mul.pdu_type"])
            .lines()
            .flat_map(|l| l.split(',').map(str::to_owned).collect::<Vec<_>>())
            .collect();
    for t in expected {
        assert!(types.contains(*t), "P_MUL PDU type {t} missing: {types:?}");
    }
    let good = tshark(&[
        "-Y",
        "p_mul.checksum_good == 1",
        "-T",
        "fields",
        "-e",
        "frame.number",
    ]);
    assert!(
        !good.trim().is_empty(),
        "Wireshark verified no P_MUL checksum"
    );
    let bad = tshark(&[
        "-Y",
        "p_mul.checksum_bad == 1 || _ws.malformed || _ws.expert.severity == \"Error\"",
    ]);
    assert!(bad.trim().is_empty(), "Wireshark found errors:\n{bad}");
}

/// What [`check_acp142_layout`] read from a PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PduSummary {
    /// PDU_Type (0 Data, 1 Ack, 2 Address, 3 Discard_Message, 4 Announce, 5 Request, 6 Reject,
    /// 7 Release).
    pub kind: u8,
    /// Source_ID (of the ack's sender for an Ack_PDU).
    pub source: u32,
    /// Message_ID (none for an Ack_PDU).
    pub message_id: Option<u32>,
    /// Data_PDU: its Sequence_Number.
    pub seq: Option<u16>,
    /// Ack_PDU: per entry (source, message id, missing Data_PDU sequence numbers).
    pub acks: Vec<(u32, u32, Vec<u16>)>,
    /// Address_PDU and Announce_PDU: the Destination_IDs.
    pub destinations: Vec<u32>,
    /// Request/Reject/Release/Announce_PDU: the Multicast Group.
    pub group: Option<u32>,
}

/// Checks one PDU against ACP 142's layouts, written from the document's field tables (as
/// Wireshark's first P_MUL dissector, citing ACP 142, reads them), sharing nothing with the
/// encoder under test: Length_of_PDU equals the datagram, the MAP bits are zero where the type
/// has none, every field where the table puts it, nothing left over; and the checksum (annex
/// B: the ISO 8473 algorithm over the whole PDU, its two bytes at offset 6) verifies as ISO 8473
/// says a receiver verifies it: both running sums over every byte are 0 modulo 255.
pub fn check_acp142_layout(pdu: &[u8]) -> Result<PduSummary, String> {
    let u16_at = |o: usize| -> Result<u16, String> {
        pdu.get(o..o + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| format!("PDU of {} bytes ends before offset {o}", pdu.len()))
    };
    let u32_at = |o: usize| -> Result<u32, String> {
        pdu.get(o..o + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| format!("PDU of {} bytes ends before offset {o}", pdu.len()))
    };
    let length = usize::from(u16_at(0)?);
    if length != pdu.len() {
        return Err(format!("Length_of_PDU {length}, datagram {}", pdu.len()));
    }
    let (mut c0, mut c1) = (0u32, 0u32);
    for &b in pdu {
        c0 = (c0 + u32::from(b)) % 255;
        c1 = (c1 + c0) % 255;
    }
    if c0 != 0 || c1 != 0 {
        return Err(format!("checksum does not verify (sums {c0}, {c1})"));
    }
    let kind = pdu[3] & 0x3f;
    let map = pdu[3] >> 6;
    if map != 0 && !matches!(kind, 2 | 4) {
        return Err(format!("MAP bits {map:#b} set on PDU type {kind}"));
    }
    let mut s = PduSummary {
        kind,
        source: u32_at(8)?,
        message_id: None,
        seq: None,
        acks: Vec::new(),
        destinations: Vec::new(),
        group: None,
    };
    let end = match kind {
        0 => {
            s.seq = Some(u16_at(4)?);
            s.message_id = Some(u32_at(12)?);
            if s.seq == Some(0) {
                return Err("Data_PDU sequence number 0 (they count from 1)".into());
            }
            pdu.len()
        }
        1 => {
            let count = u16_at(12)?;
            let mut at = 14;
            for _ in 0..count {
                let len = usize::from(u16_at(at)?);
                if len < 10 || len % 2 != 0 {
                    return Err(format!("Ack Info Entry of length {len}"));
                }
                let missing = (0..(len - 10) / 2)
                    .map(|i| u16_at(at + 10 + 2 * i))
                    .collect::<Result<Vec<_>, _>>()?;
                s.acks.push((u32_at(at + 2)?, u32_at(at + 6)?, missing));
                at += len;
            }
            at
        }
        2 => {
            s.message_id = Some(u32_at(12)?);
            let count = usize::from(u16_at(20)?);
            let reserved = usize::from(u16_at(22)?);
            let mut at = 24;
            for _ in 0..count {
                s.destinations.push(u32_at(at)?);
                u32_at(at + 4)?;
                at += 8 + reserved;
            }
            at
        }
        3 => {
            s.message_id = Some(u32_at(12)?);
            16
        }
        4 => {
            let count = usize::from(u16_at(4)?);
            s.message_id = Some(u32_at(12)?);
            s.group = Some(u32_at(20)?);
            for i in 0..count {
                s.destinations.push(u32_at(24 + 4 * i)?);
            }
            24 + 4 * count
        }
        5..=7 => {
            s.message_id = Some(u32_at(12)?);
            s.group = Some(u32_at(16)?);
            20
        }
        other => return Err(format!("PDU type {other} is none of ACP 142's 0-7")),
    };
    if end != pdu.len() {
        return Err(format!(
            "PDU type {kind}: fields end at {end}, PDU has {} bytes",
            pdu.len()
        ));
    }
    Ok(s)
}
