//! `skywave queue ...` as an operator runs it against a stopped gateway's spool: list (all and per
//! peer), show (with what goes on the air), hold and release (message and peer), flush, delete,
//! and a bad queue id.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use skywave_spool::{NewMessage, Priority, QueueId, Spool, SpoolConfig, Target, unix_seconds};

/// `skywave queue --spool DIR ARGS...`.
fn queue(spool: &Path, args: &[&str]) -> (i32, String, String) {
    skywave_queue("--spool", spool, args)
}

/// `skywave queue FLAG PATH ARGS...`: the exit code, stdout and stderr.
fn skywave_queue(flag: &str, path: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(skywave_e2e::bin("skywave"))
        .arg("queue")
        .arg(flag)
        .arg(path)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Queues a message from ops@ship.test to `rcpt`, who asked for failure and delay reports and gave
/// `ORCPT`, with `ENVID=E-<subject>`.
fn enqueue(spool: &Spool, rcpt: &str, target: Target, subject: &str) -> String {
    let message = format!("From: ops@ship.test\r\nSubject: {subject}\r\n\r\nbody\r\n");
    spool
        .enqueue(
            &NewMessage {
                sender: "ops@ship.test".into(),
                recipients: vec![(rcpt.to_string(), target)],
                priority: Priority::new(0).unwrap(),
                message: message.as_bytes(),
                dsn: skywave_smtp::MailDsn {
                    ret: Some(skywave_smtp::Ret::Hdrs),
                    envid: Some(format!("E-{subject}")),
                },
                rcpt_dsn: vec![(
                    rcpt.to_string(),
                    skywave_smtp::RcptDsn {
                        notify: Some(skywave_smtp::Notify {
                            failure: true,
                            delay: true,
                            success: false,
                        }),
                        orcpt: Some(rcpt.to_uppercase()),
                    },
                )],
                origin: Some("from 10.1.2.3 (HELO pc.ship.test) with ESMTPA as ops".into()),
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
    assert!(!out.contains("warned:"), "{out}");
    assert!(
        out.contains("reports:   RET=HDRS ENVID=E-to+20shore\n"),
        "{out}"
    );
    assert!(
        out.contains("; asked NOTIFY=FAILURE,DELAY ORCPT=rfc822;CDR@SHORE.TEST\n"),
        "{out}"
    );
    // Once its sender was told of the delay, show says so.
    let (spool, _) = Spool::open(&root, SpoolConfig::default()).unwrap();
    let now = unix_seconds(std::time::SystemTime::now());
    let id = skywave_spool::QueueId::parse(&to_shore).unwrap();
    assert!(spool.warn_now(&id, Target::Lan, now).unwrap().is_some());
    drop(spool);
    let (_, out, _) = queue(&root, &["show", &to_shore]);
    assert!(
        out.contains("warned:    the sender was told of the delay "),
        "{out}"
    );

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
    // The delay notice queued above is on the LAN's queue now.
    assert!(
        !out.contains(&to_lan) && out.contains("2 message(s)"),
        "{out}"
    );

    let (code, _, err) = queue(&root, &["show", "not-an-id"]);
    assert_ne!(code, 0);
    assert!(err.contains("is not a queue id"), "{err}");
}

/// A gateway's `skywave.toml` (state under `dir/state`) and its `routes.toml`: the LAN domain
/// ship.test, then `routes`; returns the configuration's path.
fn gateway_files(dir: &Path, routes: &str) -> std::path::PathBuf {
    let config = dir.join("skywave.toml");
    std::fs::write(
        &config,
        "hostname = \"gw.ship.test\"\nstate_dir = \"state\"\nroutes = \"routes.toml\"\n",
    )
    .unwrap();
    let table = format!("[lan]\ndomains = [\"ship.test\"]\n\n{routes}");
    std::fs::write(dir.join("routes.toml"), table).unwrap();
    config
}

/// `skywave queue --config C ARGS...`, the way an operator names a gateway.
fn queue_of(config: &Path, args: &[&str]) -> (i32, String, String) {
    skywave_queue("--config", config, args)
}

#[test]
fn an_operator_gives_up_on_a_peers_mail_and_the_senders_are_told_why() {
    let dir = tempfile::tempdir().unwrap();
    let config = gateway_files(
        dir.path(),
        "[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n\n\
         [[route]]\nmatch = \"shore.test\"\nto = \"shore\"\n",
    );
    let root = dir.path().join("state").join("spool");
    let (spool, _) = Spool::open(&root, SpoolConfig::default()).unwrap();
    let first = enqueue(
        &spool,
        "cdr@shore.test",
        Target::Peer("shore".into()),
        "one",
    );
    let second = enqueue(&spool, "xo@shore.test", Target::Peer("shore".into()), "two");
    let local = enqueue(&spool, "bosun@ship.test", Target::Lan, "local");
    spool.hold(&QueueId::parse(&second).unwrap()).unwrap();
    drop(spool);

    // Without the routing table there is nowhere to send the DSN.
    let (code, _, err) = queue(&root, &["bounce", &first]);
    assert_ne!(code, 0);
    assert!(err.contains("bounce needs --config"), "{err}");

    let (code, out, err) = queue_of(
        &config,
        &[
            "bounce",
            "--peer",
            "shore",
            "--reason",
            "the shore station is off the air until Monday; send it by satellite",
        ],
    );
    assert_eq!(code, 0, "{err}");
    // The queued message and the held one, each with its DSN; the LAN's mail untouched.
    for id in [&first, &second] {
        assert!(
            out.lines().any(
                |l| l.starts_with(&format!("{id}: 1 recipient(s) failed; DSN "))
                    && l.ends_with(" queued to the sender")
            ),
            "{out}"
        );
    }
    let (_, list, _) = queue_of(&config, &["list"]);
    assert!(list.contains("3 message(s)"), "{list}");
    assert!(list.contains(&local) && !list.contains(&first), "{list}");
    let dsns: Vec<&str> = list
        .lines()
        .filter(|l| l.contains("<> -> ops@ship.test (lan, pending)"))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(dsns.len(), 2, "{list}");
    let admin = Spool::open_admin(&root, SpoolConfig::default()).unwrap();
    let dsn = admin
        .load(&QueueId::parse(dsns[0]).unwrap())
        .unwrap()
        .1
        .message;
    let dsn = String::from_utf8(dsn).unwrap();
    assert!(dsn.contains("Status: 5.0.0"), "{dsn}");
    assert!(dsn.contains("Reporting-MTA: dns; gw.ship.test"), "{dsn}");
    assert!(
        dsn.contains("returned by the operator of gw.ship.test: the shore station is off the air"),
        "{dsn}"
    );

    // A message that is no longer there is reported, and the command fails.
    let (code, _, err) = queue_of(&config, &["bounce", &first]);
    assert_ne!(code, 0);
    assert!(
        err.contains(&format!("{first}: not given up: no message {first}")),
        "{err}"
    );
    assert!(err.contains("1 of 1 message(s) not given up"), "{err}");

    // Nothing left for the peer: said, not an error.
    let (code, out, _) = queue_of(&config, &["bounce", "--peer", "shore"]);
    assert_eq!(code, 0);
    assert!(out.contains("no message waits for shore"), "{out}");

    // Gone from the queue, the message's life is in the journal: found by the recipient's
    // address, with the report the operator's bounce sent, and that report's own life.
    let (code, out, err) = queue(&root, &["trace", "cdr@shore.test", "nobody@nowhere.test"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        format!("{first}  from <ops@ship.test>, 43 bytes"),
        "{out}"
    );
    // Where it came from, as the listener wrote it.
    assert_eq!(
        lines[1], "  came from 10.1.2.3 (HELO pc.ship.test) with ESMTPA as ops",
        "{out}"
    );
    let said = |i: usize| lines[i + 1].split_once("+0000  ").map_or("", |(_, w)| w);
    assert_eq!(said(1), "queued for cdr@shore.test via peer:shore", "{out}");
    assert_eq!(
        said(2),
        "failed cdr@shore.test via peer:shore: 5.0.0 returned by the operator of gw.ship.test: \
         the shore station is off the air until Monday; send it by satellite",
        "{out}"
    );
    assert!(
        said(3).starts_with("report: failure report to the sender queued as "),
        "{out}"
    );
    let report = said(3).rsplit(' ').next().unwrap_or_default();
    assert_eq!(said(4), "left the queue", "{out}");
    // The report, made here, says no origin.
    assert!(
        lines[6].starts_with(&format!("{report}  <{first}.dsn."))
            && lines[6].contains("a delivery report (null sender)"),
        "{out}"
    );
    assert_eq!(said(6), "queued for ops@ship.test via lan", "{out}");
    assert!(
        out.contains("nobody@nowhere.test: not in the journal"),
        "{out}"
    );
    // Nothing found at all: exit 1.
    let (code, out, _) = queue(&root, &["trace", "nobody@nowhere.test"]);
    assert_eq!(code, 1, "{out}");
}

/// `skywave queue move`: the satellite link is down for the day, so the operator sends its
/// waiting mail by HF now (its fallback), whatever its age; what HF would hold for its size
/// stays, and the command says so.
#[test]
fn an_operator_sends_a_peers_mail_by_its_fallback_now() {
    let dir = tempfile::tempdir().unwrap();
    let config = gateway_files(
        dir.path(),
        "[[peer]]\nname = \"shore-sat\"\nprotocol = \"smtp\"\ntcp_address = \"mail.shore.test:25\"\n\
         fallback = \"shore-hf\"\nfallback_after = \"2h\"\n\n\
         [[peer]]\nname = \"shore-hf\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\nhold_above = 200\n\n\
         [[route]]\nmatch = \"shore.test\"\nto = \"shore-sat\"\n",
    );
    let root = dir.path().join("state").join("spool");
    let (spool, _) = Spool::open(&root, SpoolConfig::default()).unwrap();
    let sat = Target::Peer("shore-sat".into());
    let small = enqueue(&spool, "cdr@shore.test", sat.clone(), "one");
    let big = enqueue(&spool, "xo@shore.test", sat.clone(), &"long ".repeat(60));
    drop(spool);

    let (code, _, err) = queue_of(&config, &["move", "--peer", "shore-hf"]);
    assert_ne!(code, 0);
    assert!(
        err.contains(
            "peer \"shore-hf\" has no fallback in the routing table; say where with --to PEER"
        ),
        "{err}"
    );
    let (code, out, err) = queue_of(&config, &["move", "--peer", "shore-sat"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("moved 1 recipient(s) of 1 message(s) from shore-sat to shore-hf\n"),
        "{out}"
    );
    assert!(
        out.contains("1 message(s) still wait for shore-sat: over the 200 bytes shore-hf takes without holding it"),
        "{out}"
    );
    let (_, list, _) = queue_of(&config, &["list", "--peer", "shore-hf"]);
    assert!(list.contains(&small) && !list.contains(&big), "{list}");
    // The message says how its recipient came to wait there; the operator's move does not
    // come back by itself.
    let (_, shown, _) = queue_of(&config, &["show", &small]);
    assert!(
        shown.contains("via peer:shore-hf: pending, 0 attempt(s)")
            && shown.contains("; moved here from peer:shore-sat\n"),
        "{shown}"
    );
    // Nothing left that fits: nothing more moves.
    let (code, out, _) = queue_of(
        &config,
        &["move", "--peer", "shore-sat", "--to", "shore-hf"],
    );
    assert_eq!(code, 0);
    assert!(
        out.contains("moved 0 recipient(s) of 0 message(s)"),
        "{out}"
    );
}

/// `skywave queue show` with the routing table says what goes on the air to a peer whose links
/// leave part of a message ashore: a photograph that `shrink_images` scales down. And `skywave
/// queue move` weighs it so: the photograph, over the HF peer's `hold_above` as it came, goes
/// to it from the satellite peer scaled down.
#[test]
fn show_says_what_goes_on_the_air() {
    let dir = tempfile::tempdir().unwrap();
    let config = gateway_files(
        dir.path(),
        "[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n\
         shrink_images = 640\nhold_above = \"100 kB\"\n\n\
         [[peer]]\nname = \"sat\"\nprotocol = \"smtp\"\ntcp_address = \"mail.shore.test:25\"\n\
         fallback = \"shore\"\n\n[[route]]\nmatch = \"shore.test\"\nto = \"shore\"\n",
    );
    let root = dir.path().join("state").join("spool");
    let photo = skywave_e2e::photograph(1280, 960, 85);
    let message =
        skywave_e2e::message_with_photo("ops@ship.test", "cdr@shore.test", "deck.jpg", &photo);
    // Queued from ops@ship.test for `rcpt` at `peer`, the spool closed after.
    let queued = |rcpt: &str, peer: &str| {
        let (spool, _) = Spool::open(&root, SpoolConfig::default()).unwrap();
        spool
            .enqueue(
                &NewMessage {
                    sender: "ops@ship.test".into(),
                    recipients: vec![(rcpt.into(), Target::Peer(peer.into()))],
                    priority: Priority::new(0).unwrap(),
                    message: &message,
                    dsn: Default::default(),
                    rcpt_dsn: Vec::new(),
                    origin: None,
                },
                unix_seconds(std::time::SystemTime::now()),
            )
            .unwrap()
            .to_string()
    };
    let id = queued("cdr@shore.test", "shore");
    let (code, shown, err) = queue_of(&config, &["show", &id]);
    assert_eq!(code, 0, "{err}");
    let limit = skywave_smtp::shrink::ImageLimit::new(640, 60).unwrap();
    let (sent, _) = skywave_smtp::shrink::shrink_images(&message, &limit);
    let line = shown
        .lines()
        .find(|l| l.starts_with("on air:"))
        .unwrap_or_else(|| panic!("{shown}"));
    println!("{line}");
    assert!(
        line.starts_with(&format!(
            "on air:    {} bytes to shore (1 image(s) scaled down, ",
            sent.len()
        )),
        "{line}"
    );
    // Without the routing table it cannot say.
    let (_, shown, _) = queue(&root, &["show", &id]);
    assert!(!shown.contains("on air:"), "{shown}");
    // The same photograph waiting for the satellite peer goes to HF when the operator says.
    let for_sat = queued("xo@shore.test", "sat");
    let (code, out, err) = queue_of(&config, &["move", "--peer", "sat"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("moved 1 recipient(s) of 1 message(s) from sat to shore"),
        "{out}"
    );
    let (_, shown, _) = queue_of(&config, &["show", &for_sat]);
    assert!(shown.contains("via peer:shore: pending"), "{shown}");
}

/// A long answer read only in part (`skywave queue trace ... | head`): the command stops
/// quietly with success when the reader goes, instead of panicking on the closed pipe.
#[test]
fn a_reader_that_stops_early_ends_the_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("spool");
    drop(Spool::open(&root, SpoolConfig::default()).unwrap());
    // Some 400 kB of journal about one address: far more than a pipe holds.
    let mut journal = String::new();
    for n in 0..4000 {
        journal.push_str(&format!(
            "{{\"t\":{},\"id\":\"Q{n}\",\"what\":\"queued\",\"rcpts\":[\"cdr@shore.test\"],\"via\":\"peer:shore\",\"from\":\"ops@ship.test\"}}\n",
            1_800_000_000 + n
        ));
    }
    std::fs::write(root.join("journal.jsonl"), journal).unwrap();
    let (first, out) = skywave_e2e::first_line_then_close(
        Command::new(skywave_e2e::bin("skywave"))
            .args(["queue", "--spool"])
            .arg(&root)
            .args(["trace", "cdr@shore.test"]),
    );
    assert!(first.starts_with("Q0  from <ops@ship.test>"), "{first}");
    ended_quietly(&out);
}

/// The program whose reader went ended with success and said nothing of a panic.
fn ended_quietly(out: &std::process::Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// The same for `skywave-bench`, whose tables can be long (`skywave-bench modem ... | head`).
#[test]
fn a_reader_that_stops_early_ends_the_benchmark_quietly() {
    let snrs: Vec<String> = (0..=30).map(|s| s.to_string()).collect();
    // Some 160 kB of table: more than a pipe holds.
    let (first, out) = skywave_e2e::first_line_then_close(
        Command::new(skywave_e2e::bin("skywave-bench"))
            .args(["modem", "--transmissions", "1", "--rate"])
            .arg("75,150,300,600,1200,2400")
            .args(["--channel", "awgn,good,poor", "--snr"])
            .arg(snrs.join(",")),
    );
    assert!(first.starts_with('|'), "{first}");
    ended_quietly(&out);
}

/// The journal holds what clients and peers said; `skywave queue trace` shows their control
/// characters as `?`, so that none of them drives the operator's terminal.
#[test]
fn trace_shows_no_control_characters() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("spool");
    drop(Spool::open(&root, SpoolConfig::default()).unwrap());
    std::fs::write(
        root.join("journal.jsonl"),
        "{\"t\":1800000000,\"id\":\"Q1\",\"what\":\"queued\",\"rcpts\":[\"cdr@shore.test\"],\
         \"via\":\"peer:shore\",\"from\":\"ops@ship.test\",\"origin\":\"from 10.1.2.3 (HELO \\u001b[2J) with ESMTP\"}\n\
         {\"t\":1800000060,\"id\":\"Q1\",\"what\":\"deferred\",\"rcpts\":[\"cdr@shore.test\"],\
         \"via\":\"peer:shore\",\"text\":\"451 \\u001b]0;owned\\u0007 try later\"}\n",
    )
    .unwrap();
    let (code, out, err) = queue(&root, &["trace", "cdr@shore.test"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
    assert!(
        out.contains("came from 10.1.2.3 (HELO ?[2J) with ESMTP"),
        "{out}"
    );
    assert!(out.contains("451 ?]0;owned? try later"), "{out}");
}
