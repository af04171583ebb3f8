//! `skywave check` as an administrator runs it before a restart: the real binary, its exit
//! codes and its report, on a configuration `skywave run` would start with, on one whose
//! routing table it would refuse, and on one that does not load at all.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

fn check(config: &Path, probe: bool) -> (i32, String, String) {
    let mut cmd = Command::new(skywave_e2e::bin("skywave"));
    cmd.arg("check").arg("--config").arg(config);
    if probe {
        cmd.args(["--probe", "--timeout", "2"]);
    }
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.env("NO_COLOR", "1").output().expect("run skywave");
    (
        status.code().expect("exit code"),
        String::from_utf8(stdout).expect("UTF-8 stdout"),
        String::from_utf8(stderr).expect("UTF-8 stderr"),
    )
}

/// A gateway in `dir`: its configuration (`extra` appended) and routing table.
fn gateway(dir: &Path, extra: &str, routes: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("routes.toml"), routes).unwrap();
    let config = dir.join("skywave.toml");
    std::fs::write(
        &config,
        format!(
            "hostname = \"gw.ship.example\"\nstate_dir = \"state\"\nroutes = \"routes.toml\"\n\
             [smtp]\nlisten = \"127.0.0.1:0\"\n[metrics]\nlisten = \"127.0.0.1:0\"\n{extra}"
        ),
    )
    .unwrap();
    config
}

const ROUTES: &str = "[lan]\ndomains = [\"ship.example\"]\nrelay_networks = [\"127.0.0.0/8\"]\n\
    [[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n\
    [[route]]\nmatch = \"*\"\nto = \"shore\"\n";

#[test]
fn a_configuration_run_would_start_with_passes() {
    let dir = tempfile::tempdir().unwrap();
    let sis = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let sis_addr = sis.local_addr().unwrap();
    let config = gateway(
        dir.path(),
        &format!("[hf]\nnode = \"0.0.2.1\"\nsis_server = \"{sis_addr}\"\n"),
        ROUTES,
    );
    let (code, out, err) = check(&config, true);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    let state = dir.path().join("state");
    assert_eq!(
        lines[..3],
        [
            format!(
                "ok       configuration: {} (host name gw.ship.example)",
                config.display()
            ),
            format!(
                "ok       routing table: {}: 1 peer, 1 route",
                dir.path().join("routes.toml").display()
            ),
            format!(
                "ok       peer shore: HMTP to node 0.0.1.1 through the SIS server {sis_addr} (SAP 3)"
            ),
        ]
    );
    assert!(out.contains(&format!(
        "note     state directory: {} does not exist yet; `skywave run` creates it\n",
        state.display()
    )));
    assert!(out.contains(&format!(
        "ok       SIS server {sis_addr}: accepts connections (`skywave sis probe` tries a SAP)\n"
    )));
    assert_eq!(
        lines.last().copied(),
        Some("result: 0 errors, 0 warnings: `skywave run` would start with this configuration")
    );
    // Nothing was created or left behind.
    assert!(!state.exists());
}

#[test]
fn a_configuration_run_would_refuse_fails_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    // A STANAG 5066 peer but no node address of our own: the link would never start.
    let config = gateway(dir.path(), "", ROUTES);
    let (code, out, _) = check(&config, false);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "ERROR    peer shore: peer shore uses STANAG 5066, so this gateway needs its own node \
         address: set node = \"w.x.y.z\" under [hf] in the gateway configuration; its mail \
         would stay queued\n"
        ),
        "{out}"
    );
    assert!(out.ends_with("result: 1 error, 0 warnings: mend the errors before `skywave run`\n"));
}

#[test]
fn a_configuration_that_does_not_load_exits_2_as_run_does() {
    let dir = tempfile::tempdir().unwrap();
    let config = gateway(
        dir.path(),
        "[hf]\nnode = \"0.0.2.1\"\nturnaround_ms = \"soon\"\n",
        ROUTES,
    );
    let (code, out, err) = check(&config, false);
    assert_eq!(code, 2);
    assert_eq!(out, "");
    assert!(
        err.contains("skywave.toml:10:17: error: invalid type"),
        "{err}"
    );
    assert!(
        err.ends_with(&format!("result: {} does not load\n", config.display())),
        "{err}"
    );
}

#[test]
fn the_example_ship_and_shore_pass() {
    // config/skywave.toml keeps its state in /var/lib/skywave, which only root may create on
    // a developer's machine; the ship and shore examples keep theirs under /tmp.
    for name in ["ship", "shore"] {
        let config = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../config/{name}.toml"));
        let (code, out, err) = check(&config, false);
        assert_eq!((code, err.as_str()), (0, ""), "{name}: {out}");
        assert!(
            !out.contains("ERROR") && !out.contains("warning "),
            "{name}: {out}"
        );
    }
}
