//! The LAN side end to end with real clients: `skywave run` with Maildir delivery; Python
//! `smtplib` (plain, and STARTTLS with AUTH) and `swaks` (plain and `--pipeline`) submit mail;
//! mail for the LAN domain lands in the Maildir exactly once with its Received header; mail for
//! the HF peer stays queued and `skywave status` and the metrics endpoint show it; SIGHUP
//! reloads the routing table (a broken one is refused and the old one kept); SIGTERM stops the
//! daemon with exit code 0. A spool disk short of its reserve refuses new mail with 452 4.3.1,
//! and status and metrics say so.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "lan_support.rs"]
mod support;

use support::{Gateway, RawClient, have_swaks, python, routes, run, skywave_status, wait_files};

const SEND_PLAIN: &str = r#"
import smtplib, sys
host, port = sys.argv[1], int(sys.argv[2])
msg = "From: a@ship.test\r\nTo: ops@ship.test\r\nSubject: plain smtplib\r\n\r\nHello from smtplib.\r\n"
with smtplib.SMTP(host, port, timeout=20) as s:
    s.ehlo("client.ship.test")
    refused = s.sendmail("a@ship.test", ["ops@ship.test"], msg)
    print("refused", refused)
"#;

const SEND_TLS_AUTH: &str = r#"
import smtplib, ssl, sys
host, port, user, pw, rcpt = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
with smtplib.SMTP(host, port, timeout=20) as s:
    s.ehlo("client.ship.test")
    print("auth before tls:", s.has_extn("auth"))
    s.starttls(context=ctx)
    s.ehlo("client.ship.test")
    print("tls:", s.sock.version())
    try:
        s.login(user, "wrong-" + pw)
    except smtplib.SMTPAuthenticationError as e:
        print("bad password:", e.smtp_code)
    s.login(user, pw)
    msg = "From: a@ship.test\r\nTo: " + rcpt + "\r\nSubject: tls\r\n\r\nOver TLS.\r\n"
    print("refused", s.sendmail("a@ship.test", [rcpt], msg))
"#;

/// Prints the SHA-256 of the certificate the server gives after STARTTLS, and of the one in
/// the PEM file given.
const SERVED_CERT: &str = r#"
import hashlib, smtplib, ssl, sys
host, port, pem = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
with smtplib.SMTP(host, port, timeout=20) as s:
    s.ehlo("client.ship.test")
    s.starttls(context=ctx)
    print("served", hashlib.sha256(s.sock.getpeercert(binary_form=True)).hexdigest())
print("file", hashlib.sha256(ssl.PEM_cert_to_DER_cert(open(pem).read())).hexdigest())
"#;

const SEND_DSN: &str = r#"
import smtplib, sys
host, port = sys.argv[1], int(sys.argv[2])
msg = "From: a@ship.test\r\nTo: ops@ship.test\r\nSubject: with dsn\r\n\r\nTell me.\r\n"
with smtplib.SMTP(host, port, timeout=20) as s:
    s.ehlo("client.ship.test")
    print("dsn offered:", s.has_extn("dsn"))
    print("refused", s.sendmail("a@ship.test", ["ops@ship.test"], msg,
        mail_options=["RET=HDRS", "ENVID=lan+2Dtest+201"],
        rcpt_options=["NOTIFY=SUCCESS,FAILURE", "ORCPT=rfc822;Ops@Ship.test"]))
    try:
        s.sendmail("a@ship.test", ["dev@ship.test"], msg, rcpt_options=["NOTIFY=NEVER,SUCCESS"])
    except smtplib.SMTPRecipientsRefused as e:
        print("never with success:", e.recipients["dev@ship.test"][0])
"#;

fn maildir_extra(dir: &std::path::Path) -> String {
    format!(
        "[delivery]\nmaildir = \"{}\"\n",
        dir.join("Maildir").display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smtplib_and_swaks_deliver_to_the_maildir_exactly_once() {
    if !have_swaks("the Maildir delivery test with smtplib and swaks") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let gw = Gateway::start(
        tmp.path(),
        &routes("\"10.9.0.0/16\""),
        &maildir_extra(tmp.path()),
    )
    .await;
    let port = gw.smtp.port().to_string();
    let server = format!("127.0.0.1:{port}");

    let (code, out, err) = python(SEND_PLAIN, &["127.0.0.1", &port]).await;
    assert_eq!(code, 0, "smtplib failed: {out}{err}\n{}", gw.log());
    assert_eq!(out.trim(), "refused {}");

    let (code, out, err) = run(
        "swaks",
        &[
            "--server",
            &server,
            "--helo",
            "swaks.ship.test",
            "--from",
            "b@ship.test",
            "--to",
            "ops@ship.test",
            "--header",
            "Subject: swaks plain",
            "--body",
            "plain swaks",
        ],
    )
    .await;
    assert_eq!(code, 0, "swaks failed: {out}{err}");
    assert!(out.contains("<-  250 2.0.0"), "{out}");

    let (code, out, err) = run(
        "swaks",
        &[
            "--server",
            &server,
            "--pipeline",
            "--helo",
            "swaks.ship.test",
            "--from",
            "c@ship.test",
            "--to",
            "ops@ship.test,dev@ship.test",
            "--header",
            "Subject: swaks pipelined",
            "--body",
            "pipelined swaks",
        ],
    )
    .await;
    assert_eq!(code, 0, "swaks --pipeline failed: {out}{err}");
    assert!(out.contains("PIPELINING"), "{out}");

    let new = gw.dir.join("Maildir/new");
    let files = wait_files(&new, 3).await;
    assert_eq!(files.len(), 3, "Maildir/new: {files:?}\n{}", gw.log());
    // Nothing more arrives: each message exactly once (the pipelined one has two recipients in
    // the same mailbox and is written once).
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(wait_files(&new, 0).await.len(), 3);
    let texts: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    for subject in ["plain smtplib", "swaks plain", "swaks pipelined"] {
        let t = texts
            .iter()
            .find(|t| t.contains(&format!("Subject: {subject}")))
            .unwrap_or_else(|| panic!("no message {subject:?} in {texts:#?}"));
        assert!(t.starts_with("Return-Path: <"), "{t}");
        assert!(t.contains("\nReceived: from "), "{t}");
        assert!(!t.contains('\r'), "Maildir files have LF line ends: {t:?}");
        assert!(
            t.contains("\tby gw.ship.test (skywave) with ESMTP id "),
            "{t}"
        );
        assert!(t.contains("[127.0.0.1]"), "{t}");
    }
    assert!(texts.iter().any(|t| t.contains("Hello from smtplib.")));
    assert!(
        std::fs::read_dir(gw.dir.join("Maildir/tmp"))
            .unwrap()
            .next()
            .is_none()
    );

    // Delivered mail has left the spool; the metrics say what happened.
    let page = support::metrics(gw.metrics.expect("metrics enabled")).await;
    assert!(page.contains("skywave_accepted_total 3"), "{page}");
    assert!(page.contains("skywave_delivered_total 4"), "{page}");
    assert!(
        page.contains("skywave_queue_depth{target=\"lan\"} 0"),
        "{page}"
    );
    assert_eq!(gw.stop().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starttls_auth_relays_to_the_peer_and_status_shows_the_queue() {
    let tmp = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["gw.ship.test".to_owned()]).unwrap();
    std::fs::write(tmp.path().join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(tmp.path().join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
    let extra = format!(
        "[smtp.tls]\ncert = \"cert.pem\"\nkey = \"key.pem\"\n[smtp.auth]\nusers = {{ ops = \"s3cret\" }}\n{}",
        maildir_extra(tmp.path())
    );
    // 127.0.0.1 is outside the relay networks: only AUTH lets it relay to the peer, which
    // keeps a radio schedule (the metrics say whether its window is open).
    let scheduled = routes("\"10.9.0.0/16\"").replace(
        "protocol = \"hmtp\"\n",
        "protocol = \"hmtp\"\nschedule = [\"*:00-*:30\"]\n",
    );
    let gw = Gateway::start(tmp.path(), &scheduled, &extra).await;
    let port = gw.smtp.port().to_string();

    // Without AUTH the relay is refused.
    let (mut c, _) = RawClient::connect(gw.smtp).await;
    let ehlo = c.cmd("EHLO outside.test").await;
    assert!(ehlo.contains("STARTTLS"), "{ehlo}");
    assert!(!ehlo.contains("AUTH"), "AUTH offered before TLS: {ehlo}");
    assert!(c.cmd("MAIL FROM:<a@ship.test>").await.starts_with("250"));
    let r = c.cmd("RCPT TO:<ops@shore.test>").await;
    assert!(r.starts_with("554 5.7.1"), "{r}");
    assert!(c.cmd("QUIT").await.starts_with("221"));

    let (code, out, err) = python(
        SEND_TLS_AUTH,
        &["127.0.0.1", &port, "ops", "s3cret", "ops@shore.test"],
    )
    .await;
    assert_eq!(code, 0, "smtplib failed: {out}{err}\n{}", gw.log());
    assert!(out.contains("auth before tls: False"), "{out}");
    assert!(out.contains("tls: TLSv1.3"), "{out}");
    assert!(out.contains("bad password: 535"), "{out}");
    assert!(out.contains("refused {}"), "{out}");

    // A renewed certificate is served after SIGHUP, without a restart; a pair that does not
    // load leaves the one in force.
    let cert_pem = tmp.path().join("cert.pem");
    let served = |pem: std::path::PathBuf| {
        let port = port.clone();
        async move {
            let (code, out, err) =
                python(SERVED_CERT, &["127.0.0.1", &port, &pem.to_string_lossy()]).await;
            assert_eq!(code, 0, "{out}{err}");
            let word = |k: &str| {
                out.lines()
                    .find_map(|l| l.strip_prefix(k))
                    .unwrap_or_default()
                    .to_owned()
            };
            (word("served "), word("file "))
        }
    };
    let (first, file) = served(cert_pem.clone()).await;
    assert_eq!(first, file);
    let renewed = rcgen::generate_simple_self_signed(vec!["gw.ship.test".to_owned()]).unwrap();
    std::fs::write(&cert_pem, renewed.cert.pem()).unwrap();
    std::fs::write(
        tmp.path().join("key.pem"),
        renewed.signing_key.serialize_pem(),
    )
    .unwrap();
    // The status says the renewal waits for SIGHUP, until it has come.
    let stale = "the certificate file changed after the running gateway loaded it";
    let (_, out, _) = skywave_status(&gw.config).await;
    assert!(out.contains(stale), "{out}");
    gw.signal("HUP").await;
    let deadline = tokio::time::Instant::now() + support::STEP;
    while !gw.log().contains("STARTTLS certificate and key reloaded") {
        assert!(tokio::time::Instant::now() < deadline, "{}", gw.log());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (now_served, file) = served(cert_pem.clone()).await;
    assert_eq!(now_served, file);
    assert_ne!(now_served, first);
    let (_, out, _) = skywave_status(&gw.config).await;
    assert!(!out.contains(stale), "{out}");
    std::fs::write(&cert_pem, "not a certificate").unwrap();
    gw.signal("HUP").await;
    while !gw.log().contains("STARTTLS certificate NOT reloaded") {
        assert!(tokio::time::Instant::now() < deadline, "{}", gw.log());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    std::fs::write(&cert_pem, renewed.cert.pem()).unwrap();
    assert_eq!(
        served(cert_pem.clone()).await,
        (now_served.clone(), now_served)
    );

    // swaks: STARTTLS and AUTH LOGIN (smtplib above chose PLAIN).
    if !have_swaks("the STARTTLS and AUTH LOGIN check with swaks") {
        return;
    }
    let server = format!("127.0.0.1:{port}");
    let (code, out, err) = run(
        "swaks",
        &[
            "--server",
            &server,
            "--tls",
            "--auth",
            "LOGIN",
            "--auth-user",
            "ops",
            "--auth-password",
            "s3cret",
            "--helo",
            "swaks.ship.test",
            "--from",
            "a@ship.test",
            "--to",
            "ops@shore.test",
            "--header",
            "Subject: swaks tls",
        ],
    )
    .await;
    assert_eq!(
        code,
        0,
        "swaks --tls --auth LOGIN failed: {out}{err}\n{}",
        gw.log()
    );
    assert!(out.contains("<~  235 2.7.0"), "{out}");
    assert!(out.contains("<~  250 2.0.0 Ok: queued as "), "{out}");

    // The peer has no link yet: the messages wait in the spool for peer:shore.
    let (code, out, err) = skywave_status(&gw.config).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("gateway: running\nmessages: 2 queued, 0 held, 0 dead\n"),
        "{out}"
    );
    assert!(out.contains("  peer:shore           2\n"), "{out}");
    assert!(
        out.contains("100 MB kept in reserve: new mail taken\n"),
        "{out}"
    );
    let page = support::metrics(gw.metrics.unwrap()).await;
    assert!(page.contains("skywave_relayed_total 2"), "{page}");
    assert!(
        page.contains("skywave_queue_depth{target=\"peer:shore\"} 2"),
        "{page}"
    );
    assert!(page.contains("skywave_held_messages 0"), "{page}");
    assert!(
        page.contains("skywave_schedule_open{peer=\"shore\"} 1")
            || page.contains("skywave_schedule_open{peer=\"shore\"} 0"),
        "{page}"
    );

    let config = gw.config.clone();
    assert_eq!(gw.stop().await, 0);
    let (code, out, _) = skywave_status(&config).await;
    assert_eq!(code, 0);
    assert!(
        out.starts_with("gateway: not running\nmessages: 2 queued"),
        "{out}"
    );
    // The peer's radio schedule is listed, with where it stands now.
    let (code, out, _) = skywave_status(&config).await;
    assert_eq!(code, 0);
    assert!(
        out.contains(
            "radio schedules (sessions and multicasts start only in a window):\n  shore                *:00-*:30 UTC: "
        ),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_routes_and_keeps_the_old_table_on_error() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = Gateway::start(
        tmp.path(),
        &routes("\"127.0.0.0/8\""),
        &maildir_extra(tmp.path()),
    )
    .await;
    // A session opened before the reload keeps going across it.
    let (mut early, _) = RawClient::connect(gw.smtp).await;
    assert!(early.cmd("EHLO early.test").await.starts_with("250"));

    let (mut c, _) = RawClient::connect(gw.smtp).await;
    c.cmd("EHLO inside.test").await;
    c.cmd("MAIL FROM:<a@ship.test>").await;
    let r = c.cmd("RCPT TO:<x@harbour.test>").await;
    assert!(r.starts_with("550 5.1.2"), "{r}");
    c.cmd("QUIT").await;

    let mut text = routes("\"127.0.0.0/8\"");
    text.push_str("\n[[route]]\nmatch = \"harbour.test\"\nto = \"shore\"\n");
    std::fs::write(gw.dir.join("routes.toml"), &text).unwrap();
    gw.signal("HUP").await;
    let deadline = tokio::time::Instant::now() + support::STEP;
    loop {
        let (mut c, _) = RawClient::connect(gw.smtp).await;
        c.cmd("EHLO inside.test").await;
        c.cmd("MAIL FROM:<a@ship.test>").await;
        let r = c.cmd("RCPT TO:<x@harbour.test>").await;
        c.cmd("QUIT").await;
        if r.starts_with("250") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "reload not seen: {r}\n{}",
            gw.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // A broken table is refused and the one in force stays.
    std::fs::write(
        gw.dir.join("routes.toml"),
        "[[route]]\nmatch = \"*\"\nto = \"nowhere\"\n",
    )
    .unwrap();
    gw.signal("HUP").await;
    let deadline = tokio::time::Instant::now() + support::STEP;
    while !gw.log().contains("routing table NOT reloaded") {
        assert!(tokio::time::Instant::now() < deadline, "{}", gw.log());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        gw.log().contains("unknown peer \"nowhere\""),
        "{}",
        gw.log()
    );
    let (mut c, _) = RawClient::connect(gw.smtp).await;
    c.cmd("EHLO inside.test").await;
    c.cmd("MAIL FROM:<a@ship.test>").await;
    assert!(c.cmd("RCPT TO:<x@harbour.test>").await.starts_with("250"));
    c.cmd("QUIT").await;

    // The early session was not dropped by either reload.
    assert!(early.cmd("NOOP").await.starts_with("250"));
    assert!(early.cmd("QUIT").await.starts_with("221"));
    assert_eq!(gw.stop().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_session_finish_its_message_then_exits_0() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = Gateway::start(
        tmp.path(),
        &routes("\"127.0.0.0/8\""),
        &maildir_extra(tmp.path()),
    )
    .await;
    let (mut c, _) = RawClient::connect(gw.smtp).await;
    c.cmd("EHLO inside.test").await;
    c.cmd("MAIL FROM:<a@ship.test>").await;
    c.cmd("RCPT TO:<ops@ship.test>").await;
    assert!(c.cmd("DATA").await.starts_with("354"));
    gw.signal("TERM").await;
    // The listener closes, but the session in progress may finish (5 s grace in the tests).
    let deadline = tokio::time::Instant::now() + support::STEP;
    while tokio::net::TcpStream::connect(gw.smtp).await.is_ok() {
        assert!(tokio::time::Instant::now() < deadline, "still accepting");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let r = c
        .cmd("Subject: late\r\n\r\nfinished during shutdown\r\n.")
        .await;
    assert!(r.starts_with("250 2.0.0"), "{r}");
    assert!(c.cmd("QUIT").await.starts_with("221"));
    let mut gw = gw;
    let status = tokio::time::timeout(support::STEP, gw.child.wait())
        .await
        .expect("exit in time")
        .unwrap();
    assert_eq!(status.code(), Some(0), "{}", gw.log());
    // Queued durably before the 250: it is in the spool or already in the Maildir.
    let in_maildir = wait_files(&gw.dir.join("Maildir/new"), 0).await.len();
    let (_, out, _) = skywave_status(&gw.config).await;
    assert!(
        in_maildir == 1 || out.contains("  lan                  1\n"),
        "message lost: maildir {in_maildir}, status {out}"
    );
}

const SEND_AND_REPORT: &str = r#"
import smtplib, sys
host, port = sys.argv[1], int(sys.argv[2])
with smtplib.SMTP(host, port, timeout=20) as s:
    s.ehlo("client.ship.test")
    try:
        s.sendmail("a@ship.test", ["ops@ship.test"], "Subject: disk\r\n\r\nbody\r\n")
        print("accepted")
    except smtplib.SMTPSenderRefused as e:
        print("sender refused", e.smtp_code, e.smtp_error.decode())
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spool_disk_short_of_its_reserve_refuses_new_mail_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    // A reserve no disk has: any new message would take it.
    let extra = format!(
        "{}[spool]\nmin_free_space = 1000000000000000000\n",
        maildir_extra(tmp.path())
    );
    let gw = Gateway::start(tmp.path(), &routes("\"127.0.0.0/8\""), &extra).await;
    // smtplib declares the size (the server offers SIZE) and is refused at MAIL FROM with a
    // temporary failure, so a mail system keeps the message and tries again.
    let (code, out, err) =
        python(SEND_AND_REPORT, &["127.0.0.1", &gw.smtp.port().to_string()]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("sender refused 452 4.3.1 insufficient system storage: "),
        "{out}"
    );
    assert!(out.contains("1.00 EB kept in reserve"), "{out}");
    let (code, status, err) = skywave_status(&gw.config).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        status.contains("kept in reserve: NEW MAIL REFUSED (452 4.3.1) until space is freed\n"),
        "{status}"
    );
    assert!(status.contains("messages: 0 queued"), "{status}");
    let page = support::metrics(gw.metrics.unwrap()).await;
    assert!(page.contains("skywave_refused_for_space_total 1"), "{page}");
    assert!(page.contains("skywave_spool_free_bytes "), "{page}");
    assert!(page.contains("skywave_spool_reserve_bytes "), "{page}");
    assert!(gw.log().contains("short of space"), "{}", gw.log());
    assert_eq!(gw.stop().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smtplib_asks_for_a_success_report_and_gets_one_from_the_maildir_delivery() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = Gateway::start(
        tmp.path(),
        &routes("\"10.9.0.0/16\""),
        &maildir_extra(tmp.path()),
    )
    .await;
    let port = gw.smtp.port().to_string();
    let (code, out, err) = python(SEND_DSN, &["127.0.0.1", &port]).await;
    assert_eq!(code, 0, "smtplib failed: {out}{err}\n{}", gw.log());
    assert!(out.contains("dsn offered: True"), "{out}");
    assert!(out.contains("refused {}"), "{out}");
    assert!(out.contains("never with success: 501"), "{out}");
    // The message, and the report the sender asked for, which comes back to the LAN.
    let files = wait_files(&gw.dir.join("Maildir/new"), 2).await;
    assert_eq!(files.len(), 2, "{files:?}\n{}", gw.log());
    let texts: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    let report = texts
        .iter()
        .find(|t| t.contains("Subject: Successful Mail Delivery Report"))
        .unwrap_or_else(|| panic!("no report in {texts:#?}"));
    for want in [
        "Return-Path: <>",
        "Original-Envelope-Id: lan-test 1\nReporting-MTA: dns; gw.ship.test",
        "Original-Recipient: rfc822; Ops@Ship.test\nFinal-Recipient: rfc822; ops@ship.test\nAction: delivered\nStatus: 2.0.0",
        "Subject: with dsn",
    ] {
        assert!(report.contains(want), "{want:?} in {report}");
    }
    assert!(!report.contains("Tell me."), "headers only: {report}");
    let page = support::metrics(gw.metrics.expect("metrics enabled")).await;
    assert!(page.contains("skywave_success_reports_total 1"), "{page}");
    assert!(!page.contains("skywave_bounced_total"), "{page}");
    assert_eq!(gw.stop().await, 0);
}
