//! `contrib/systemd/skywave.service` against the `skywave` binary it runs: the command line of
//! `ExecStart` starts the gateway (with a temporary configuration in place of
//! /etc/skywave/skywave.toml), the signal of `ExecReload` reloads the routing table, the
//! `KillSignal` stops it with status 0 well within `TimeoutStopSec` (so `Restart=on-failure`
//! does not restart it), and a broken configuration ends with the status that
//! `RestartPreventExitStatus` names, so systemd does not restart into the same error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "lan_support.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use support::{routes, skywave};

/// The unit's settings, `Section.Key` to the values in order (a key may repeat).
fn unit() -> BTreeMap<String, Vec<String>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/systemd/skywave.service");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut section = String::new();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_owned();
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not a setting: {line}"));
        out.entry(format!("{section}.{}", key.trim()))
            .or_default()
            .push(value.trim().to_owned());
    }
    out
}

fn one<'a>(unit: &'a BTreeMap<String, Vec<String>>, key: &str) -> &'a str {
    match unit.get(key).map(Vec::as_slice) {
        Some([v]) => v,
        other => panic!("{key}: {other:?}"),
    }
}

/// Seconds of a systemd time span written as a bare number or with `s` or `min`.
fn seconds(span: &str) -> u64 {
    if let Some(m) = span.strip_suffix("min") {
        m.parse::<u64>().unwrap() * 60
    } else {
        span.trim_end_matches('s').parse().unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_unit_starts_reloads_and_stops_the_gateway_as_it_says() {
    let unit = unit();
    let exec: Vec<&str> = one(&unit, "Service.ExecStart").split_whitespace().collect();
    let [program, args @ ..] = exec.as_slice() else {
        panic!("empty ExecStart");
    };
    assert!(program.ends_with("/skywave"), "{program}");
    assert_eq!(args, ["run", "--config", "/etc/skywave/skywave.toml"]);
    assert_eq!(one(&unit, "Service.StateDirectory"), "skywave");
    // The example configuration's state directory is the one StateDirectory= creates.
    let example = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/skywave.toml"),
    )
    .unwrap();
    assert!(example.contains("\nstate_dir = \"/var/lib/skywave\"\n"));

    // ExecStart's command line, the configuration in a temporary directory.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("routes.toml"), routes("\"127.0.0.0/8\"")).unwrap();
    let config = dir.path().join("skywave.toml");
    std::fs::write(
        &config,
        "hostname = \"gw.ship.test\"\nstate_dir = \"state\"\nroutes = \"routes.toml\"\n\
         [smtp]\nlisten = \"127.0.0.1:0\"\nshutdown_grace = \"5s\"\n[metrics]\nenabled = false\n",
    )
    .unwrap();
    let log = dir.path().join("skywave.log");
    let mut command = tokio::process::Command::new(skywave());
    command
        .args(&args[..2])
        .arg(&config)
        .stdin(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()));
    let mut gw = skywave_e2e::start_gateway(command, support::STEP)
        .await
        .unwrap_or_else(|e| panic!("{e}: {}", std::fs::read_to_string(&log).unwrap()));
    let pid = gw.child.id().unwrap().to_string();
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();

    // ExecReload: `kill -HUP $MAINPID`.
    let reload: Vec<&str> = one(&unit, "Service.ExecReload")
        .split_whitespace()
        .collect();
    assert_eq!(reload[reload.len() - 1], "$MAINPID");
    let signal = reload[1];
    assert_eq!(signal, "-HUP");
    let status = tokio::process::Command::new("kill")
        .args([signal, &pid])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let deadline = tokio::time::Instant::now() + support::STEP;
    while !read_log().contains("routing table reloaded") {
        assert!(tokio::time::Instant::now() < deadline, "{}", read_log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // KillSignal, then exit status 0 within TimeoutStopSec.
    let kill = one(&unit, "Service.KillSignal");
    assert_eq!(kill, "SIGTERM");
    let stop = Duration::from_secs(seconds(one(&unit, "Service.TimeoutStopSec")));
    assert!(
        stop >= Duration::from_secs(45),
        "{stop:?}: below the default 30 s grace"
    );
    let status = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let exit = tokio::time::timeout(stop, gw.child.wait())
        .await
        .expect("stopped within TimeoutStopSec")
        .unwrap();
    assert_eq!(exit.code(), Some(0), "{}", read_log());
    assert_eq!(one(&unit, "Service.Restart"), "on-failure");

    // A configuration error exits with the status the unit does not restart on.
    let prevent: i32 = one(&unit, "Service.RestartPreventExitStatus")
        .parse()
        .unwrap();
    std::fs::write(&config, "hostname = \"gw.ship.test\"\nstate_dir = 7\n").unwrap();
    let out = tokio::process::Command::new(skywave())
        .args(&args[..2])
        .arg(&config)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(prevent));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("skywave.toml:2:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
