//! LAN delivery to a real SMTP server from another project: Python's aiosmtpd (installed by
//! `scripts/test.sh`) runs as the LAN smarthost with a tiny handler that writes every message
//! it receives, with its envelope, into a directory. skywave must deliver mail for the LAN domain
//! there exactly once, with its Received header, and turn a permanent refusal (550) into a bounce
//! (DSN) to the sender for that recipient only, which is delivered to the smarthost too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "lan_support.rs"]
mod support;

use std::time::Duration;

use support::{Gateway, STEP, python, routes, wait_files};
use tokio::process::Command;

const HANDLER: &str = r#"
import os

class Sink:
    """Writes each message to OUTDIR as N.eml, envelope first; refuses rcpt 'reject@...'."""

    def __init__(self, outdir):
        self.outdir = outdir
        self.n = 0

    @classmethod
    def from_cli(cls, parser, *args):
        return cls(*args)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.startswith("reject@"):
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.n += 1
        path = os.path.join(self.outdir, "%03d.eml" % self.n)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(("X-Envelope-From: %s\r\nX-Envelope-To: %s\r\nX-Sink-TLS: %s\r\n" % (
                envelope.mail_from, ",".join(envelope.rcpt_tos),
                "yes" if getattr(session, "ssl", None) else "no")).encode())
            f.write(envelope.original_content)
        os.rename(tmp, path)
        return "250 OK stored"
"#;

fn free_port() -> u16 {
    // aiosmtpd cannot report the port it bound, so pick one and release it.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Starts aiosmtpd with the sink handler on `port` and waits until it accepts connections.
async fn start_sink(
    dir: &std::path::Path,
    inbox: &std::path::Path,
    port: u16,
) -> tokio::process::Child {
    start_sink_with(dir, inbox, port, &[]).await
}

/// Like [`start_sink`], with more aiosmtpd options (`--tlscert` ...).
async fn start_sink_with(
    dir: &std::path::Path,
    inbox: &std::path::Path,
    port: u16,
    options: &[&str],
) -> tokio::process::Child {
    std::fs::write(dir.join("sinkhandler.py"), HANDLER).unwrap();
    let sink = Command::new("python3")
        .args(["-m", "aiosmtpd", "-n", "-l", &format!("127.0.0.1:{port}")])
        .args(options)
        .args(["-c", "sinkhandler.Sink"])
        .arg(inbox)
        .env("PYTHONPATH", dir)
        .kill_on_drop(true)
        .spawn()
        .expect("start aiosmtpd");
    let deadline = tokio::time::Instant::now() + STEP;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "aiosmtpd did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sink
}

/// Whether aiosmtpd can be imported; when not, a SKIPPED note, or a failure under
/// `SKYWAVE_REQUIRE_TOOLS=1` (see `skywave_emu::missing`).
fn have_aiosmtpd() -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import aiosmtpd"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skywave_emu::missing::skip_or_fail(
            "the Python package aiosmtpd",
            "this smarthost test",
            "run scripts/test.sh, or `python3 -m pip install aiosmtpd`",
        );
    }
    ok
}

const SEND: &str = r#"
import smtplib, sys
with smtplib.SMTP("127.0.0.1", int(sys.argv[1]), timeout=20) as s:
    s.ehlo("client.ship.test")
    msg = "From: a@ship.test\r\nTo: " + sys.argv[2] + "\r\nSubject: " + sys.argv[3] + "\r\n\r\nbody\r\n"
    print(s.sendmail("a@ship.test", sys.argv[2].split(","), msg))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_smarthost_that_is_down_defers_and_the_retry_delivers() {
    if !have_aiosmtpd() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let inbox = tmp.path().join("inbox");
    std::fs::create_dir(&inbox).unwrap();
    let port = free_port();
    // Nothing listens on `port` yet. Retries after 1 s, then 2 s, ...
    let extra = format!(
        "[delivery]\nsmarthost = \"127.0.0.1:{port}\"\ntimeout = \"5s\"\n[spool]\nmin_backoff = 1\nmax_backoff = 2\n"
    );
    let gw = Gateway::start(tmp.path(), &routes("\"127.0.0.0/8\""), &extra).await;
    let p = gw.smtp.port().to_string();
    let (code, out, err) = python(SEND, &[&p, "ops@ship.test", "retried"]).await;
    assert_eq!(code, 0, "{out}{err}");
    let deadline = tokio::time::Instant::now() + STEP;
    while !gw.log().contains("delivery deferred") {
        assert!(tokio::time::Instant::now() < deadline, "{}", gw.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, status, _) = support::skywave_status(&gw.config).await;
    assert!(status.contains("  lan                  1\n"), "{status}");
    // The smarthost comes up: the next retry delivers, once.
    let _sink = start_sink(tmp.path(), &inbox, port).await;
    let files = wait_files(&inbox, 1).await;
    assert_eq!(files.len(), 1, "{}", gw.log());
    assert!(
        std::fs::read_to_string(&files[0])
            .unwrap()
            .contains("Subject: retried")
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(wait_files(&inbox, 0).await.len(), 1);
    assert_eq!(gw.stop().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_for_the_lan_reaches_aiosmtpd_and_refusals_bounce() {
    if !have_aiosmtpd() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let inbox = tmp.path().join("inbox");
    std::fs::create_dir(&inbox).unwrap();
    let port = free_port();
    let _sink = start_sink(tmp.path(), &inbox, port).await;

    let extra = format!("[delivery]\nsmarthost = \"127.0.0.1:{port}\"\ntimeout = \"10s\"\n");
    let gw = Gateway::start(tmp.path(), &routes("\"127.0.0.0/8\""), &extra).await;
    let send = SEND;
    let p = gw.smtp.port().to_string();
    let (code, out, err) = python(send, &[&p, "ops@ship.test", "to the smarthost"]).await;
    assert_eq!(code, 0, "{out}{err}");
    let files = wait_files(&inbox, 1).await;
    assert_eq!(files.len(), 1, "{}", gw.log());
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        text.starts_with(
            "X-Envelope-From: a@ship.test\r\nX-Envelope-To: ops@ship.test\r\nX-Sink-TLS: no\r\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("Received: from client.ship.test ([127.0.0.1])"),
        "{text}"
    );
    assert!(text.contains("Subject: to the smarthost"), "{text}");

    // The smarthost refuses one of two recipients for good: the other gets its copy, and the
    // sender gets a DSN for the refused one, delivered the same way (its domain is ours), from
    // the null sender.
    let (code, out, err) = python(send, &[&p, "ops@ship.test,reject@ship.test", "refused"]).await;
    assert_eq!(code, 0, "{out}{err}");
    let files = wait_files(&inbox, 3).await;
    assert_eq!(files.len(), 3, "{}", gw.log());
    let copy = std::fs::read_to_string(&files[1]).unwrap();
    assert!(
        copy.starts_with("X-Envelope-From: a@ship.test\r\nX-Envelope-To: ops@ship.test\r\n"),
        "{copy}"
    );
    assert!(copy.contains("Subject: refused"), "{copy}");
    let dsn = std::fs::read_to_string(&files[2]).unwrap();
    assert!(
        dsn.starts_with("X-Envelope-From: <>\r\nX-Envelope-To: a@ship.test\r\n"),
        "{dsn}"
    );
    assert!(dsn.contains("reject@ship.test"), "{dsn}");
    assert!(dsn.contains("multipart/report"), "{dsn}");
    // Exactly once each.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(wait_files(&inbox, 0).await.len(), 3);
    let page = support::metrics(gw.metrics.unwrap()).await;
    assert!(page.contains("skywave_bounced_total 1"), "{page}");
    assert_eq!(gw.stop().await, 0);
}

/// A self-signed certificate for `name`, written as `stem.pem` and `stem.key` in `dir`.
fn certificate(dir: &std::path::Path, stem: &str, name: &str) {
    let cert = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
    std::fs::write(dir.join(format!("{stem}.pem")), cert.cert.pem()).unwrap();
    std::fs::write(
        dir.join(format!("{stem}.key")),
        cert.signing_key.serialize_pem(),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starttls_to_the_smarthost_verifies_its_certificate() {
    if !have_aiosmtpd() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let inbox = tmp.path().join("inbox");
    std::fs::create_dir(&inbox).unwrap();
    certificate(tmp.path(), "smarthost", "localhost");
    certificate(tmp.path(), "stranger", "localhost");
    let port = free_port();
    // aiosmtpd with a certificate requires STARTTLS before MAIL.
    let cert = tmp.path().join("smarthost.pem");
    let key = tmp.path().join("smarthost.key");
    let _sink = start_sink_with(
        tmp.path(),
        &inbox,
        port,
        &[
            "--tlscert",
            cert.to_str().unwrap(),
            "--tlskey",
            key.to_str().unwrap(),
        ],
    )
    .await;

    // Trusting another certificate: the TLS handshake fails, the mail is deferred, not lost.
    let extra = |ca: &str, backoff: u32| {
        format!(
            "[delivery]\nsmarthost = \"localhost:{port}\"\ntimeout = \"10s\"\ntls = \"required\"\ntls_ca = \"{ca}\"\n[spool]\nmin_backoff = {backoff}\nmax_backoff = {backoff}\n"
        )
    };
    let gw = Gateway::start(
        tmp.path(),
        &routes("\"127.0.0.0/8\""),
        &extra("stranger.pem", 600),
    )
    .await;
    let p = gw.smtp.port().to_string();
    let (code, out, err) = python(SEND, &[&p, "ops@ship.test", "untrusted"]).await;
    assert_eq!(code, 0, "{out}{err}");
    let deadline = tokio::time::Instant::now() + STEP;
    while !gw.log().contains("delivery deferred") {
        assert!(tokio::time::Instant::now() < deadline, "{}", gw.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(wait_files(&inbox, 0).await.is_empty());
    assert_eq!(gw.stop().await, 0);

    // Trusting the smarthost's certificate (the administrator fixed the file and restarted):
    // delivered over TLS, the deferred mail with it.
    let gw = Gateway::start(
        tmp.path(),
        &routes("\"127.0.0.0/8\""),
        &extra("smarthost.pem", 1),
    )
    .await;
    let (code, out, err) = support::run(
        support::skywave().to_str().unwrap(),
        &["queue", "--config", gw.config.to_str().unwrap(), "flush"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 message(s) made due now"), "{out}");
    // The running gateway hears of the flush at once (its timer is a minute away).
    assert_eq!(wait_files(&inbox, 1).await.len(), 1, "{}", gw.log());
    assert!(gw.log().contains("changed by an operator"), "{}", gw.log());
    let p = gw.smtp.port().to_string();
    let (code, out, err) = python(SEND, &[&p, "ops@ship.test", "trusted"]).await;
    assert_eq!(code, 0, "{out}{err}");
    let files = wait_files(&inbox, 2).await;
    assert_eq!(files.len(), 2, "{}", gw.log());
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(text.contains("X-Sink-TLS: yes\r\n"), "{text}");
    }
    assert_eq!(gw.stop().await, 0);
}
