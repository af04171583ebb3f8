//! `skywave demo --once` as a user runs it: the real binary, two gateways over the in-process
//! emulator (time-scaled so the test is quick), the sample mail delivered both ways and the
//! air-time report printed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

#[test]
fn the_demo_delivers_its_sample_both_ways_and_reports_the_air_time() {
    let (dir, stdout, _) = demo(&["--time-scale", "20", "--messages", "4"]);
    for needle in [
        "skywave demo: two gateways over an emulated HF link",
        "ship -> shore:",
        "shore -> ship:",
        "on the air (the emulated channel's own counters):",
        "transmissions,",
        "turnarounds,",
        "all mail delivered after",
    ] {
        assert!(stdout.contains(needle), "no {needle:?} in:\n{stdout}");
    }
    for (side, from) in [
        ("shore", "alice@ship.example"),
        ("ship", "hq@shore.example"),
    ] {
        let new = dir.path().join(side).join("Maildir").join("new");
        let files: Vec<_> = std::fs::read_dir(&new)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(files.len(), 4, "{side}: {files:?}\n{stdout}");
        for f in files {
            let text = std::fs::read_to_string(f.path()).unwrap();
            assert!(text.contains(&format!("From: <{from}>")), "{text}");
            assert!(
                text.contains(&format!("by gw.{side}.example (skywave)")),
                "{text}"
            );
        }
    }
    // What the ship's HMTP link remembers of the shore after its sessions, as the operator
    // reads it.
    let status = Command::new(skywave_e2e::bin("skywave"))
        .args(["status", "--config"])
        .arg(dir.path().join("ship").join("skywave.toml"))
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    // The day's sessions with the shore: the demo's own, both ways.
    let day = status
        .lines()
        .skip_while(|l| !l.starts_with("the last 24 hours with HF peers"))
        .nth(1)
        .unwrap_or_default();
    assert!(
        day.starts_with("  shore ") && day.contains(" message(s), ") && !day.contains("nothing"),
        "{status}"
    );
    let line = status
        .lines()
        .find(|l| l.starts_with("  shore: "))
        .unwrap_or_else(|| panic!("no line for the shore in:\n{status}"));
    assert!(
        line.starts_with(
            "  shore: cut marker (XCUT): yes; resume (XRESUME): yes; DSN: yes; 8BITMIME: yes; SMTPUTF8: no; dictionary: "
        ) && !line.contains("dictionary: none")
            && line.ends_with("; last session answered"),
        "{status}"
    );
}

/// `skywave demo --once --outage 5+200`: the channel goes dead 5 simulated seconds in, while
/// the first sessions are on the air, for 200 s. The demo says so, the sessions then fail or
/// wait, the spools send again, and every message still arrives, after the outage.
#[test]
fn the_demo_rides_through_an_outage() {
    let (dir, stdout, _) = demo(&["--time-scale", "50", "--outage", "5+200"]);
    assert!(
        stdout.contains("outage: no signal from 5.0 s to 205.0 s (simulated)"),
        "{stdout}"
    );
    let after: f64 = stdout
        .split_once("all mail delivered after ")
        .and_then(|(_, rest)| rest.split_once(" s of radio time"))
        .and_then(|(secs, _)| secs.parse().ok())
        .unwrap_or_else(|| panic!("no delivery line in:\n{stdout}"));
    assert!(
        after > 205.0,
        "delivered within the outage: {after} s\n{stdout}"
    );
    for side in ["ship", "shore"] {
        let new = dir.path().join(side).join("Maildir").join("new");
        assert_eq!(
            std::fs::read_dir(&new).unwrap().count(),
            3,
            "{side}\n{stdout}"
        );
    }
    let bad = Command::new(skywave_e2e::bin("skywave"))
        .args(["demo", "--once", "--outage", "5"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--outage 5: expected START+LENGTH"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// Runs `skywave demo --once` with `args`, both LAN ports on any free port, in a new
/// directory; returns it, standard output and standard error, after checking it succeeded.
fn demo(args: &[&str]) -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(skywave_e2e::bin("skywave"))
        .args(["demo", "--once"])
        .args(args)
        .args(["--ship-port", "0", "--shore-port", "0", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    (dir, stdout, stderr)
}

/// Runs `skywave demo --once --ships 3` with `extra` arguments, the radio 20 times faster.
fn fleet_demo(extra: &str) -> (tempfile::TempDir, String, String) {
    demo(&["--ships", "3", extra, "--time-scale", "20"])
}

/// Ship 1 has the message for every captain, the fleet notice and its own; the others two.
fn assert_fleet_mail(dir: &std::path::Path, stdout: &str) {
    for (ship, want) in [(1, 3), (2, 2), (3, 2)] {
        let n = std::fs::read_dir(dir.join(format!("ship{ship}/Maildir/new")))
            .unwrap()
            .count();
        assert_eq!(n, want, "ship{ship}\n{stdout}");
    }
}

#[test]
fn the_fleet_demo_multicasts_and_an_emcon_ship_acknowledges_after_the_lift() {
    let (dir, stdout, _) = fleet_demo("--emcon-ship");
    for needle in [
        "skywave demo: a base and 3 ships on one emulated HF frequency",
        "ship3 keeps EMCON (it transmitted 0 times)",
        "-> fleet by pmul:",
        "acknowledged by 3 of 3 ships",
        "-> ship1 by hmtp:",
        "all mail delivered and acknowledged after",
    ] {
        assert!(stdout.contains(needle), "no {needle:?} in:\n{stdout}");
    }
    assert_fleet_mail(dir.path(), &stdout);
}

#[test]
fn the_fleet_demo_multicasts_over_an_emulated_ip_network() {
    let (dir, stdout, stderr) = fleet_demo("--ip-multicast");
    for needle in [
        "multicast over an emulated IP network (270 ms one way, 2 % loss",
        "-> fleet by pmul-ip:",
        "P_MUL datagrams",
        "acknowledged by 3 of 3 ships",
        "-> ship1 by hmtp:",
        "on the IP network: ",
        "all mail delivered and acknowledged after",
    ] {
        assert!(stdout.contains(needle), "no {needle:?} in:\n{stdout}");
    }
    assert!(
        !stdout.contains("by pmul:"),
        "multicast went over HF:\n{stdout}"
    );
    assert!(!stderr.contains("WARN"), "{stderr}");
    assert_fleet_mail(dir.path(), &stdout);
}
