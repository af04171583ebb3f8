//! `skywave routes check|explain` as an administrator runs them: the real binary, its exit
//! codes, and the exact text on stdout and stderr.
//!
//! The binary is the one `cargo build --workspace --bins` put beside this test's own executable
//! (`skywave_e2e::bin` builds it when it is missing).

// Test helpers panic with a message on a broken fixture, as a test should.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output};

fn skywave() -> PathBuf {
    skywave_e2e::bin("skywave")
}

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/routes.toml")
}

fn run(args: &[&str]) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(skywave())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run skywave");
    (
        status.code().expect("exit code"),
        String::from_utf8(stdout).expect("UTF-8 stdout"),
        String::from_utf8(stderr).expect("UTF-8 stderr"),
    )
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write fixture");
    path.display().to_string()
}

#[test]
fn check_accepts_the_documented_example() {
    let example = example();
    let (code, out, err) = run(&["routes", "check", example.to_str().expect("UTF-8 path")]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "1 peer, 6 routes, OK\n", "")
    );
}

#[test]
fn check_reports_every_error_with_its_position() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write(
        &dir,
        "routes.toml",
        "[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n\n\
         [[peer]]\nname = \"ship\"\nnode = \"0.0.1.2\"\nprotocol = \"hmtp\"\n\n\
         [[route]]\nmatch = \"*.navy.example\"\nto = \"shroe\"\n\n\
         [[route]]\nmatch = \"*\"\nto = \"ship\"\n",
    );
    let (code, out, err) = run(&["routes", "check", &file]);
    assert_eq!(code, 1);
    assert_eq!(out, "");
    assert_eq!(
        err,
        format!(
            "{file}:13:6: error: unknown peer \"shroe\" in route for \"*.navy.example\"; known peers: ship, shore \
             (or \"lan\" for delivery on the LAN)\n   |\n13 | to = \"shroe\"\n   |      ^^^^^^^\n\
             {file}:1:1: warning: peer \"shore\" is never used: no [[route]] sends mail to it\n  |\n\
             1 | [[peer]]\n  | ^^^^^^^^\n\
             1 error, 1 warning: the routing table was not accepted\n"
        )
    );
}

#[test]
fn check_passes_with_warnings() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write(
        &dir,
        "routes.toml",
        "[lan]\ndomains = [\"ship.example\"]\n\n[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n",
    );
    let (code, out, err) = run(&["routes", "check", &file]);
    assert_eq!(code, 0);
    assert_eq!(out, "1 peer, 0 routes, OK (1 warning)\n");
    assert_eq!(
        err,
        format!(
            "{file}:4:1: warning: peer \"shore\" is never used: no [[route]] sends mail to it\n  |\n\
             4 | [[peer]]\n  | ^^^^^^^^\n"
        )
    );
}

#[test]
fn check_a_missing_file() {
    let (code, out, err) = run(&["routes", "check", "/nonexistent/routes.toml"]);
    assert_eq!(code, 1);
    assert_eq!(out, "");
    assert!(
        err.starts_with("/nonexistent/routes.toml: cannot read the routing table: "),
        "{err}"
    );
}

#[test]
fn explain_a_routed_address_and_the_relay_check() {
    let example = example();
    let example = example.to_str().expect("UTF-8 path");
    let (code, out, _) = run(&[
        "routes",
        "explain",
        example,
        "Ops@Navy.Example",
        "--client-ip",
        "10.1.2.3",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with(
        "address: Ops@navy.example (domain lower-cased; local part kept as written)\n\
         rules considered, most specific first:\n"
    ));
    assert!(out.contains("-> shore  <- wins: the most specific rule that exists\n"));
    assert!(out.contains("route: HF peer \"shore\" (not a local domain)\n"));
    assert!(out.contains(
        "  protocol: hmtp\n  skywave peer: yes\n  cut marker (XCUT): assumed from the first session (xcut = true)\n  compression: deflate\n"
    ));
    assert!(out.contains("  priority: 2 (immediate), from the route\n"));
    assert!(out.ends_with(
        "client 10.1.2.3 (not authenticated): accepted: 10.1.2.3 is in relay network 10.1.0.0/16\n"
    ));

    // The same address from a stranger: refused, exit 1.
    let (code, out, _) = run(&[
        "routes",
        "explain",
        example,
        "ops@navy.example",
        "--client-ip",
        "192.0.2.1",
    ]);
    assert_eq!(code, 1);
    assert!(out.ends_with(
        "client 192.0.2.1 (not authenticated): refused: 554 5.7.1 <ops@navy.example>: Relay access denied: \
         not a local domain, and this client may not relay\n"
    ));

    // Authenticated: accepted.
    let (code, _, _) = run(&[
        "routes",
        "explain",
        example,
        "ops@navy.example",
        "--client-ip",
        "192.0.2.1",
        "--authenticated",
    ]);
    assert_eq!(code, 0);
}

#[test]
fn explain_a_relay_trick() {
    let example = example();
    let (code, out, err) = run(&[
        "routes",
        "explain",
        example.to_str().expect("UTF-8 path"),
        "victim%example.com@ship.navy.example",
    ]);
    assert_eq!((code, err.as_str()), (1, ""));
    assert_eq!(
        out,
        "address: victim%example.com@ship.navy.example\n\
         refused: percent hack (user%domain@relay) is refused; this gateway does not relay by local-part routing\n\
         SMTP reply: 550 5.7.1 percent hack (user%domain@relay) is refused; this gateway does not relay by \
         local-part routing\n"
    );
}

#[test]
fn explain_with_a_broken_table_exits_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write(&dir, "routes.toml", "[[route]]\nmatch = \"*\"\n");
    let (code, out, err) = run(&["routes", "explain", &file, "a@b.example"]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(
        err,
        format!(
            "{file}:1:1: error: missing field `to`\n  |\n1 | [[route]]\n  | ^^^^^^^^^\n\
             1 error: the routing table was not accepted\n"
        )
    );
}

#[test]
fn authenticated_needs_a_client_ip() {
    let example = example();
    let (code, _, err) = run(&[
        "routes",
        "explain",
        example.to_str().expect("UTF-8 path"),
        "a@b.example",
        "--authenticated",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--client-ip <IP>"), "{err}");
}

#[test]
fn explain_with_several_recipients_shows_how_one_message_travels() {
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/routes-base.toml");
    let base = base.to_str().unwrap();
    let (code, out, err) = run(&["routes", "check", base]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("3 peers, 1 group, 4 routes, OK"), "{out}");
    assert!(
        out.contains("group fleet at 16.0.9.9: ship1, ship2, ship3 (EMCON)"),
        "{out}"
    );
    let (code, out, err) = run(&[
        "routes",
        "explain",
        base,
        "captain@ship1.navy.example",
        "ops@ship2.navy.example",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("multicast: once by P_MUL to group fleet (16.0.9.9) for ship1, ship2"),
        "{out}"
    );
    let (code, out, _) = run(&[
        "routes",
        "explain",
        base,
        "captain@ship1.navy.example",
        "x@ship1.navy.example",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains("unicast: to ship1 by hmtp (the only ship of group fleet in this message)"),
        "{out}"
    );
    let (code, out, _) = run(&["routes", "explain", base, "ops@ship3.navy.example"]);
    assert_eq!(code, 0);
    assert!(out.contains("EMCON: yes"), "{out}");
}

#[test]
fn check_and_explain_show_an_ip_group_its_addresses_and_the_dynamic_group() {
    let base =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/routes-base-ip.toml");
    let base = base.to_str().unwrap();
    let (code, out, err) = run(&["routes", "check", base]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "group fleet at udp 239.192.0.1: ship1 (10.1.0.11), ship2 (10.1.0.12), ship3 (10.1.0.13)"
        ),
        "{out}"
    );
    let (code, out, err) = run(&[
        "routes",
        "explain",
        base,
        "captain@a.ship1.navy.example",
        "ops@b.ship2.navy.example",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("bearer: pmul-ip (ACP 142 P_MUL over UDP/IP multicast)"),
        "{out}"
    );
    assert!(
        out.contains(
            "multicast: once by P_MUL to group fleet (a dynamic group of just them from 239.192.1.0/28) for ship1, ship2"
        ),
        "{out}"
    );
    let (_, out, _) = run(&[
        "routes",
        "explain",
        base,
        "x@a.ship3.navy.example",
        "y@b.ship3.navy.example",
    ]);
    assert!(
        out.contains("multicast: once by P_MUL to group fleet (udp 239.192.0.1) for ship3 (its ship is reached only by P_MUL over IP)"),
        "{out}"
    );
    // A group over IP with a unicast address is refused with its line.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("routes.toml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(base)
            .unwrap()
            .replace("address = \"239.192.0.1\"", "address = \"10.1.0.1\""),
    )
    .unwrap();
    let (code, _, err) = run(&["routes", "check", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is not an IP multicast address"), "{err}");
}
