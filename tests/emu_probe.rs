//! `skywave-emu` as an operator runs it: start the standalone emulator on port 0, read the
//! address it prints, run `skywave sis probe` against it, and check the probe saw the MTU.

// Test helpers outside #[test] functions may panic freely too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::time::timeout;

#[tokio::test]
async fn probe_against_the_emulator_prints_the_mtu() {
    let emu = skywave_e2e::bin("skywave-emu");
    let skywave = skywave_e2e::bin("skywave");
    let mut child = Command::new(emu)
        .args(["--nodes", "2", "--addresses", "1.0.0.1,1.0.0.2"])
        .args(["--listen", "127.0.0.1:0", "--rate", "2400", "--snr", "30"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut servers = Vec::new();
    while servers.len() < 2 {
        let line = timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("emulator printed no address")
            .unwrap()
            .expect("emulator exited before listening");
        let (node, addr) = line
            .strip_prefix("node ")
            .and_then(|l| l.split_once(" listening on "))
            .unwrap_or_else(|| panic!("unexpected line {line:?}"));
        servers.push((node.to_owned(), addr.to_owned()));
    }
    assert_eq!(servers[0].0, "1.0.0.1");
    assert_eq!(servers[1].0, "1.0.0.2");

    let run = Command::new(skywave)
        .args(["sis", "probe", "--server", &servers[0].1, "--sap", "3"])
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
    let pid = child.id().unwrap().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    let mut rest = Vec::new();
    while let Some(line) = timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("emulator did not stop")
        .unwrap()
    {
        rest.push(line);
    }
    let status = timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("emulator did not exit")
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(rest.iter().any(|l| l.starts_with("channel: ")), "{rest:?}");
}
