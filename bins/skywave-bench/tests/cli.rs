//! The `skywave-bench` binary end to end: `compare` writes its tables and figures, `calibrate`
//! reads a calibration directory, and bad options fail with a clear message.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_skywave-bench");

/// Runs `skywave-bench ARGS... [EXTRA]`, which must succeed; its standard output.
fn bench(args: &[&str], extra: Option<&std::path::Path>) -> String {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    if let Some(e) = extra {
        cmd.arg(e);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn compare_prints_csv_and_writes_tables_and_figures() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = bench(
        &[
            "compare",
            "--quick",
            "--scenarios",
            "hmtp-5066-deflate,cftp-5066",
            "--sizes",
            "386,1867",
            "--format",
            "csv",
            "--out",
        ],
        Some(dir.path()),
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{stdout}");
    assert!(lines[0].starts_with("scenario,tcp_profile,channel,snr_db,rate_bps,message_bytes,"));
    assert!(
        lines[1].starts_with("hmtp-5066-deflate,,awgn,30,1200,386,1,"),
        "{stdout}"
    );
    assert!(lines[1..].iter().all(|l| l.ends_with(",1/1")), "{stdout}");
    for f in [
        "table.md",
        "table.csv",
        "time-vs-size_awgn_30dB_1200bps_short_x1.svg",
    ] {
        assert!(dir.path().join(f).is_file(), "{f} missing");
    }
    let csv = std::fs::read_to_string(dir.path().join("table.csv")).unwrap();
    assert_eq!(csv, stdout);
}

#[test]
fn compare_runs_each_tcp_profile() {
    let stdout = bench(
        &[
            "compare",
            "--quick",
            "--scenarios",
            "smtp-tcp-5066-deflate",
            "--tcp-profile",
            "linux,best-case,jnos-1998",
            "--sizes",
            "386",
            "--format",
            "csv",
        ],
        None,
    );
    let profiles: Vec<&str> = stdout
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap_or(""))
        .collect();
    assert_eq!(profiles, ["linux", "best-case", "jnos-1998"], "{stdout}");
    assert!(
        stdout.lines().skip(1).all(|l| l.ends_with(",1/1")),
        "{stdout}"
    );
}

#[test]
fn calibrate_reads_the_given_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ntia-jnos-table5.csv"),
        "# test\nmodem_bps,tcp_window_bytes,attachment_bytes,throughput_bps\n1200,1024,1024,97.2\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("isode-smtp-vs-coacp142.csv"),
        "link_bps,message_bytes,messages,smtp_seconds,co_acp142_seconds\n1200,386,1,89,21\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("isode-ip-over-5066.csv"),
        "link_bps,pdu_bytes,throughput_bps,s5066_direct_overhead_pct\n9600,64,506,\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("isode-tcp-over-5066.csv"),
        "link_bps,mtu,throughput_bps,utilisation_pct,minutes_to_50pct,minutes_to_80pct,first_data_s\n300,1500,6,2,,,136\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["calibrate", "--calibration"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains(
            "| Isode co_acp142 seconds | hmtp-5066-deflate | 1200 bit/s clean, short interleaver, 386 B x1 | 21.0 s |"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "| Isode UDP throughput | udp-5066 | 9600 bit/s clean, short interleaver, 64 B datagrams at the link's rate | 506.0 bit/s | 511.8 bit/s | 1.01 |"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("| Isode bulk TCP first data | tcp-bulk-5066 (isode-stock) | 300 bit/s clean, short interleaver, MTU 1500, one bulk stream | 136.0 s |"),
        "{stdout}"
    );
    assert!(stdout.contains("Goal lines:"), "{stdout}");
    assert!(stdout.contains("two-transmission bound"), "{stdout}");
}

#[test]
fn bad_options_fail_clearly() {
    let out = Command::new(BIN)
        .args(["compare", "--quick", "--scenarios", "uucp"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown scenario \"uucp\""));
    let out = Command::new(BIN)
        .args(["calibrate", "--calibration", "/nonexistent/calibration"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
}
