//! `skywave queue ...` as an operator runs it against a stopped gateway's spool: list (all and per
//! peer), show, hold and release (message and peer), flush, delete, and a bad queue id.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use skywave_spool::{NewMessage, Priority, Spool, SpoolConfig, Target, unix_seconds};

fn queue(spool: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(skywave_e2e::bin("skywave"))
        .arg("queue")
        .arg("--spool")
        .arg(spool)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn enqueue(spool: &Spool, rcpt: &str, target: Target, subject: &str) -> String {
    let message = format!("From: ops@ship.test\r\nSubject: {subject}\r\n\r\nbody\r\n");
    spool
        .enqueue(
            &NewMessage {
                sender: "ops@ship.test".into(),
                recipients: vec![(rcpt.to_string(), target)],
                priority: Priority::new(0).unwrap(),
                message: message.as_bytes(),
            },
            unix_seconds(std::time::SystemTime::now()),
        )
        .unwrap()
        .to_string()
}

#[test]
fn an_operator_steers_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("spool");
    let (spool, _) = Spool::open(&root, SpoolConfig::default()).unwrap();
    let to_shore = enqueue(
        &spool,
        "cdr@shore.test",
        Target::Peer("shore".into()),
        "to shore",
    );
    let to_lan = enqueue(&spool, "bosun@ship.test", Target::Lan, "to lan");
    drop(spool);

    let (code, out, _) = queue(&root, &["list"]);
    assert_eq!(code, 0);
    assert!(out.contains(&to_shore) && out.contains(&to_lan), "{out}");
    assert!(out.contains("2 message(s)"), "{out}");
    assert!(
        out.contains("cdr@shore.test (peer:shore, pending)"),
        "{out}"
    );

    let (_, out, _) = queue(&root, &["list", "--peer", "shore"]);
    assert!(out.contains(&to_shore) && !out.contains(&to_lan), "{out}");
    assert!(out.contains("1 message(s)"), "{out}");

    let (code, out, _) = queue(&root, &["show", &to_shore]);
    assert_eq!(code, 0);
    assert!(out.contains("state:     queued"), "{out}");
    assert!(out.contains("Subject: to shore"), "{out}");

    let (code, _, _) = queue(&root, &["hold", &to_shore]);
    assert_eq!(code, 0);
    let (_, out, _) = queue(&root, &["show", &to_shore]);
    assert!(out.contains("state:     held"), "{out}");
    queue(&root, &["release", &to_shore]);
    let (_, out, _) = queue(&root, &["show", &to_shore]);
    assert!(out.contains("state:     queued"), "{out}");

    let (code, _, _) = queue(&root, &["hold", "--peer", "shore"]);
    assert_eq!(code, 0);
    let (_, out, _) = queue(&root, &["list"]);
    assert!(out.contains("peer held: peer:shore"), "{out}");
    queue(&root, &["release", "--peer", "shore"]);
    let (_, out, _) = queue(&root, &["list"]);
    assert!(!out.contains("peer held"), "{out}");

    let (code, out, _) = queue(&root, &["flush", "--peer", "shore"]);
    assert_eq!(code, 0);
    assert!(out.contains("made due now"), "{out}");

    let (code, out, _) = queue(&root, &["delete", &to_lan]);
    assert_eq!(code, 0, "{out}");
    let (_, out, _) = queue(&root, &["list"]);
    assert!(
        !out.contains(&to_lan) && out.contains("1 message(s)"),
        "{out}"
    );

    let (code, _, err) = queue(&root, &["show", "not-an-id"]);
    assert_ne!(code, 0);
    assert!(err.contains("is not a queue id"), "{err}");
}
