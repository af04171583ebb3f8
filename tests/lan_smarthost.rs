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
    wait_listening(port).await;
    sink
}

/// Waits until the sink on `port` accepts connections (each probe is one to the sink).
async fn wait_listening(port: u16) {
    let deadline = tokio::time::Instant::now() + STEP;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the smarthost did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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

/// aiosmtpd extended with the DSN keyword (RFC 3461), which it does not implement: the server
/// class takes `RET`/`ENVID` off MAIL and `NOTIFY`/`ORCPT` off RCPT before aiosmtpd's own checks
/// (which refuse any parameter they do not know with 555) and keeps them for the handler, which
/// writes them, the connection's number and every RCPT it was asked into the stored file.
///
/// With `SINK_TLS` = "starttls" or "implicit" (and `SINK_CERT`, `SINK_KEY`) it requires STARTTLS
/// or speaks TLS from the first byte; with `SINK_AUTH` = "name:password" it requires AUTH (over
/// TLS) with that name and password. The stored file says whether the connection was encrypted
/// and who logged in.
const DSN_SINK: &str = r#"
import asyncio, itertools, os, ssl, sys
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult

outdir, port, rcpt_log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
connections = itertools.count(1)
mode, account = os.environ.get("SINK_TLS", ""), os.environ.get("SINK_AUTH", "")

def split(arg, keys):
    keep, dsn = [], []
    for w in arg.split(" "):
        (dsn if w.upper().startswith(keys) else keep).append(w)
    return " ".join(keep), dsn

class DsnSMTP(SMTP):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.number = next(connections)
        self.mail_dsn, self.rcpt_dsn = [], []

    async def smtp_MAIL(self, arg):
        arg, self.mail_dsn = split(arg or "", ("RET=", "ENVID="))
        self.rcpt_dsn = []
        await super().smtp_MAIL(arg)

    async def smtp_RCPT(self, arg):
        arg, dsn = split(arg or "", ("NOTIFY=", "ORCPT="))
        with open(rcpt_log, "a") as f:
            f.write("%d %s\n" % (self.number, arg))
        self.rcpt_dsn.append(" ".join([arg.split(" ")[0]] + dsn))
        await super().smtp_RCPT(arg)

class Sink:
    def __init__(self):
        self.n = 0

    async def handle_EHLO(self, server, session, envelope, hostname, responses):
        session.host_name = hostname
        if os.environ.get("SINK_7BIT"):
            responses = [r for r in responses if "8BITMIME" not in r]
        if os.environ.get("SINK_NO_UTF8"):
            responses = [r for r in responses if "SMTPUTF8" not in r]
        return responses[:-1] + ["250-DSN", responses[-1]]

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.startswith("reject@"):
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.n += 1
        path = os.path.join(outdir, "%03d.eml" % self.n)
        with open(path + ".tmp", "wb") as f:
            f.write(("X-Envelope-From: %s\r\nX-Envelope-To: %s\r\nX-Sink-Connection: %d\r\n"
                     "X-Sink-Mail-Dsn: %s\r\nX-Sink-Rcpt-Dsn: %s\r\nX-Sink-TLS: %s\r\n"
                     "X-Sink-Auth: %s\r\nX-Sink-Utf8: %s\r\n" % (
                envelope.mail_from, ",".join(envelope.rcpt_tos), server.number,
                " ".join(server.mail_dsn), " | ".join(server.rcpt_dsn),
                "yes" if server.transport.get_extra_info("ssl_object") else "no",
                session.auth_data or "", envelope.smtp_utf8)).encode())
            f.write(envelope.original_content)
        os.rename(path + ".tmp", path)
        return "250 OK stored"

class DsnController(Controller):
    def factory(self):
        return DsnSMTP(self.handler, **self.SMTP_kwargs)

def check(server, session, envelope, mechanism, auth_data):
    given = "%s:%s" % (auth_data.login.decode(), auth_data.password.decode())
    # handled=False: aiosmtpd then answers a failure with 535 itself.
    return AuthResult(success=given == account, handled=False, auth_data=auth_data.login.decode())

options, wrap = {}, None
if mode:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(os.environ["SINK_CERT"], os.environ["SINK_KEY"])
    if mode == "starttls":
        options.update(tls_context=context, require_starttls=True)
    else:
        wrap = context
if account:
    options.update(authenticator=check, auth_required=True, auth_require_tls=True)
DsnController(Sink(), hostname="127.0.0.1", port=port, ssl_context=wrap, **options).start()
asyncio.new_event_loop().run_forever()
"#;

/// Starts [`DSN_SINK`] on `port`, storing into `inbox` (its RCPT log beside it in `dir`), with
/// `env` (`SINK_TLS`, ...), and waits until it accepts connections.
async fn start_dsn_sink(
    dir: &std::path::Path,
    inbox: &std::path::Path,
    port: u16,
    env: &[(&str, &std::ffi::OsStr)],
) -> tokio::process::Child {
    let script = dir.join("dsn_sink.py");
    std::fs::write(&script, DSN_SINK).unwrap();
    let sink = Command::new("python3")
        .arg(&script)
        .arg(inbox)
        .arg(port.to_string())
        .arg(dir.join("rcpt.log"))
        .envs(env.iter().copied())
        .kill_on_drop(true)
        .spawn()
        .expect("start the DSN sink");
    wait_listening(port).await;
    sink
}

/// A gateway whose LAN smarthost is [`DSN_SINK`] (started with `env`): its directory, the
/// sink's inbox, the sink and the gateway.
async fn gateway_and_dsn_sink(
    env: &[(&str, &std::ffi::OsStr)],
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    tokio::process::Child,
    Gateway,
) {
    let tmp = tempfile::tempdir().unwrap();
    let inbox = tmp.path().join("inbox");
    std::fs::create_dir(&inbox).unwrap();
    let port = free_port();
    let sink = start_dsn_sink(tmp.path(), &inbox, port, env).await;
    let extra = format!("[delivery]\nsmarthost = \"127.0.0.1:{port}\"\ntimeout = \"10s\"\n");
    let gw = Gateway::start(tmp.path(), &routes("\"127.0.0.0/8\""), &extra).await;
    (tmp, inbox, sink, gw)
}

const SEND_DSN: &str = r#"
import smtplib, sys
port = int(sys.argv[1])
def body(subject, to):
    return "From: a@ship.test\r\nTo: %s\r\nSubject: %s\r\n\r\nbody\r\n" % (to, subject)
with smtplib.SMTP("127.0.0.1", port, timeout=20) as s:
    s.ehlo("client.ship.test")
    assert s.has_extn("dsn"), s.esmtp_features
    s.sendmail("a@ship.test", ["ops@ship.test"], body("one", "ops@ship.test"),
               mail_options=["RET=HDRS", "ENVID=order+2B42"],
               rcpt_options=["NOTIFY=SUCCESS,FAILURE", "ORCPT=rfc822;Ops+2BDesk@ship.test"])
    refused = s.sendmail("a@ship.test", ["ops@ship.test", "reject@ship.test"],
                         body("two", "ops@ship.test, reject@ship.test"),
                         rcpt_options=["NOTIFY=FAILURE"])
    assert refused == {}, refused
    s.sendmail("a@ship.test", ["ops@ship.test"], body("three", "ops@ship.test"))
"#;

/// `skywave queue --config C VERB --peer lan` ("hold" or "release"), which must succeed: mail
/// for the LAN held, so that what is sent meanwhile is due together, in one round.
async fn hold_lan(gw: &Gateway, verb: &str) {
    let config = gw.config.to_str().unwrap();
    let args = ["queue", "--config", config, verb, "--peer", "lan"];
    let (code, out, err) = support::run(support::skywave().to_str().unwrap(), &args).await;
    assert_eq!(code, 0, "{out}{err}");
}

/// One round of LAN mail to a smarthost that offers DSN: the three messages go over one
/// connection, one transaction each; a refused recipient is refused once, in its message's own
/// transaction, while the other gets its copy; the DSN parameters go on, so the smarthost, not
/// this gateway, reports the success asked for; and each message arrives byte for byte, without
/// a blank line added at its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_goes_over_one_connection_with_a_reply_per_recipient_and_the_dsn_parameters() {
    if !have_aiosmtpd() {
        return;
    }
    let (tmp, inbox, _sink, gw) = gateway_and_dsn_sink(&[]).await;
    // Held, so that the three messages are due together, in one round.
    hold_lan(&gw, "hold").await;
    let p = gw.smtp.port().to_string();
    let (code, out, err) = python(SEND_DSN, &[&p]).await;
    assert_eq!(code, 0, "{out}{err}");
    hold_lan(&gw, "release").await;

    // The three copies, then the bounce for reject@ (a later round: a second connection).
    let files = wait_files(&inbox, 4).await;
    assert_eq!(files.len(), 4, "{}", gw.log());
    let text: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    // The sink numbers its connections, the readiness probes above included.
    let connection = |t: &str| {
        t.lines()
            .find_map(|l| l.strip_prefix("X-Sink-Connection: "))
            .map(str::to_owned)
    };
    let first = connection(&text[0]).expect("numbered");
    for (t, subject) in text.iter().zip(["one", "two", "three"]) {
        assert_eq!(connection(t).as_ref(), Some(&first), "{t}");
        assert!(t.contains(&format!("Subject: {subject}\r\n")), "{t}");
        assert!(t.ends_with("\r\n\r\nbody\r\n"), "{t:?}");
    }
    // What the sender asked went on, as the sender wrote it (xtext and all).
    assert!(
        text[0].contains("X-Sink-Mail-Dsn: RET=HDRS ENVID=order+2B42\r\n"),
        "{}",
        text[0]
    );
    assert!(
        text[0].contains(
            "X-Sink-Rcpt-Dsn: TO:<ops@ship.test> NOTIFY=SUCCESS,FAILURE ORCPT=rfc822;Ops+2BDesk@ship.test\r\n"
        ),
        "{}",
        text[0]
    );
    assert!(
        text[1].contains("X-Envelope-To: ops@ship.test\r\n"),
        "{}",
        text[1]
    );
    assert!(
        text[2].contains("X-Sink-Mail-Dsn: \r\nX-Sink-Rcpt-Dsn: TO:<ops@ship.test>\r\n"),
        "{}",
        text[2]
    );
    // The refused recipient was asked once, beside its fellow, in message two's transaction.
    let rcpts = std::fs::read_to_string(tmp.path().join("rcpt.log")).unwrap();
    assert_eq!(rcpts.matches("reject@ship.test").count(), 1, "{rcpts}");
    let on_first = rcpts
        .lines()
        .filter(|l| l.split(' ').next() == Some(first.as_str()));
    assert_eq!(on_first.count(), 4, "{rcpts}");
    let bounce = &text[3];
    assert!(
        bounce.starts_with("X-Envelope-From: <>\r\nX-Envelope-To: a@ship.test\r\n"),
        "{bounce}"
    );
    assert_ne!(connection(bounce), Some(first), "{bounce}");
    assert!(bounce.contains("reject@ship.test"), "{bounce}");
    assert!(bounce.contains("Status: 5.1.1"), "{bounce}");
    // The success asked for in message one is the smarthost's to report: none from here.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(wait_files(&inbox, 0).await.len(), 4);
    let page = support::metrics(gw.metrics.unwrap()).await;
    assert!(page.contains("skywave_bounced_total 1"), "{page}");
    let reports = page
        .lines()
        .find_map(|l| l.strip_prefix("skywave_success_reports_total "));
    assert!(matches!(reports, None | Some("0")), "{page}");
    assert_eq!(gw.stop().await, 0);
}

/// Sends one 8-bit message (BODY=8BITMIME) to the gateway: a multipart of 8-bit text, 7-bit
/// text, binary octets and an enclosed 8-bit message. Writes what it sent to argv[2].
const SEND_8BIT: &str = r#"
import smtplib, sys
port, keep = int(sys.argv[1]), sys.argv[2]
text = "Wind 270\u00b0 25 kn, sea 4. Gr\u00fc\u00dfe an Bord ".encode() + b"\r\n"
binary = bytes(b for b in range(256) if b not in (0, 10, 13))
msg = (b"From: a@ship.test\r\nTo: ops@ship.test\r\nSubject: 8-bit\r\nMIME-Version: 1.0\r\n"
       b"Content-Type: multipart/mixed; boundary=\"=_b\"\r\n\r\n"
       b"--=_b\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"
       + text * 8 +
       b"--=_b\r\nContent-Type: text/plain\r\n\r\nplain seven-bit text\r\n"
       b"--=_b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: binary\r\n\r\n"
       + binary + b"\r\n"
       b"--=_b\r\nContent-Type: message/rfc822\r\n\r\nSubject: enclosed\r\n\r\n" + text +
       b"--=_b--\r\n")
open(keep, "wb").write(msg)
with smtplib.SMTP("127.0.0.1", port, timeout=20) as s:
    s.ehlo("client.ship.test")
    s.sendmail("a@ship.test", ["ops@ship.test"], msg, mail_options=["BODY=8BITMIME"])
"#;

/// Compares two messages as a reader sees them: argv[1] the original, argv[2] the delivered one,
/// which must be 7-bit; every leaf part's type and decoded content must be the same.
const SAME_CONTENT: &str = r#"
import email, email.policy, sys
sent, got = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
assert all(b < 128 for b in got), "8-bit octets reached the smarthost"
def leaves(raw):
    out = []
    for part in email.message_from_bytes(raw, policy=email.policy.compat32).walk():
        if part.is_multipart():
            continue
        out.append((part.get_content_type(), part.get_payload(decode=True)))
    return out
a, b = leaves(sent), leaves(got)
assert len(a) == 4 and a == b, (a, b)
encodings = [p.get("Content-Transfer-Encoding") for p in
             email.message_from_bytes(got, policy=email.policy.compat32).walk()]
print(" ".join(str(e) for e in encodings))
"#;

/// To a smarthost that does not offer 8BITMIME, 8-bit mail goes made 7-bit (RFC 6152 section
/// 3): quoted-printable text, base64 octets, 7-bit parts as they were, and every part reads the
/// same to a MIME reader (Python's `email`, not skywave's code). Until 2026-11-30 it waited,
/// deferred, until its lifetime ran out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_bit_mail_reaches_a_smarthost_without_8bitmime_as_7bit_and_reads_the_same() {
    if !have_aiosmtpd() {
        return;
    }
    let seven = std::ffi::OsStr::new("1");
    let (tmp, inbox, _sink, gw) = gateway_and_dsn_sink(&[("SINK_7BIT", seven)]).await;
    let sent = tmp.path().join("sent.eml");
    let p = gw.smtp.port().to_string();
    let (code, out, err) = python(SEND_8BIT, &[&p, sent.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{out}{err}");
    let files = wait_files(&inbox, 1).await;
    assert_eq!(files.len(), 1, "{}", gw.log());
    let (code, out, err) = python(
        SAME_CONTENT,
        &[sent.to_str().unwrap(), files[0].to_str().unwrap()],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    // The multipart and the enclosed message say 7bit only where they named an encoding.
    assert_eq!(
        out.trim(),
        "None quoted-printable None base64 None quoted-printable",
        "{}",
        std::fs::read_to_string(&files[0]).unwrap()
    );
    let status = status_until(&gw, "1 delivered").await;
    assert!(status.contains("offers DSN, SIZE, SMTPUTF8)"), "{status}");
    assert_eq!(gw.stop().await, 0);
}

/// Internationalized mail (RFC 6531): UTF-8 header fields, sent with SMTPUTF8 (smtplib puts
/// the parameter only on a transaction to a server that offers it), to an ASCII recipient and
/// to a UTF-8 one, then from a UTF-8 sender. Prints the recipients refused, and the sender's
/// refusal.
const SEND_EAI: &str = r#"
import smtplib, sys
msg = "From: J\u00f6rg <joerg@ship.test>\r\nTo: ops@ship.test\r\nSubject: Gr\u00fc\u00dfe\r\n\r\nbody\r\n"
with smtplib.SMTP("127.0.0.1", int(sys.argv[1]), timeout=20) as s:
    s.ehlo("client.ship.test")
    assert s.has_extn("smtputf8"), s.esmtp_features
    print(s.sendmail("joerg@ship.test", ["ops@ship.test", "m\u00f8ller@ship.test"], msg.encode(),
                     mail_options=["SMTPUTF8", "BODY=8BITMIME"]))
    try:
        s.sendmail("j\u00f6rg@ship.test", ["ops@ship.test"], msg.encode(), mail_options=["SMTPUTF8"])
    except smtplib.SMTPSenderRefused as e:
        print("sender refused", e.smtp_code, e.smtp_error.decode())
"#;

/// The LAN listener offers SMTPUTF8 (RFC 6531), so a client that follows it hands over mail with
/// UTF-8 header fields rather than return it to its sender (Postfix does for mail that asked
/// for SMTPUTF8): it reaches the smarthost with SMTPUTF8 and its header as it was, and the
/// `Received:` header names the protocol `UTF8SMTP`. An internationalised address, which not
/// every bearer can carry, is refused with RFC 6531's 553 5.6.7, the others in the transaction
/// taken; so is a sender's, to which no report could be routed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utf8_header_fields_go_through_with_smtputf8() {
    if !have_aiosmtpd() {
        return;
    }
    let (_tmp, inbox, _sink, gw) = gateway_and_dsn_sink(&[]).await;
    let p = gw.smtp.port().to_string();
    let (code, out, err) = python(SEND_EAI, &[&p]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("'møller@ship.test': (553, b'5.6.7 non-ASCII character U+00F8 in address;"),
        "{out}"
    );
    assert!(
        out.contains("sender refused 553 5.6.7 non-ASCII character U+00F6 in address;"),
        "{out}"
    );
    let files = wait_files(&inbox, 1).await;
    assert_eq!(files.len(), 1, "{}", gw.log());
    let got = std::fs::read_to_string(&files[0]).unwrap();
    for line in [
        "X-Envelope-To: ops@ship.test\r\n",
        "X-Sink-Utf8: True\r\n",
        "From: J\u{f6}rg <joerg@ship.test>\r\n",
        "Subject: Gr\u{fc}\u{df}e\r\n",
        "with UTF8SMTP id ",
    ] {
        assert!(got.contains(line), "{line:?} in {got}");
    }
    assert_eq!(gw.stop().await, 0);
}

/// Internationalized mail for a smarthost without SMTPUTF8: a display name, a group name, a
/// subject and an attachment's file name in UTF-8, with an 8-bit text part.
const SEND_EAI_MIME: &str = r#"
import smtplib, sys
msg = ("From: J\u00f6rg M\u00fcller <joerg@ship.test>\r\nTo: Br\u00fccke: ops@ship.test;\r\n"
       "Subject: Re: Gr\u00fc\u00dfe aus \u00c5lesund, 12 kn\r\nMIME-Version: 1.0\r\n"
       "Content-Type: multipart/mixed; boundary=b\r\n\r\n"
       "--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nK\u00f8ye\r\n"
       "--b\r\nContent-Type: application/octet-stream\r\n"
       "Content-Disposition: attachment; filename=\"Fahrplan M\u00e4rz.pdf\"\r\n\r\n%PDF\r\n--b--\r\n")
with smtplib.SMTP("127.0.0.1", int(sys.argv[1]), timeout=20) as s:
    s.ehlo("client.ship.test")
    s.sendmail("joerg@ship.test", ["ops@ship.test"], msg.encode(),
               mail_options=["SMTPUTF8", "BODY=8BITMIME"])
"#;

/// What a MIME reader (Python's `email`) makes of the stored mail: every line but the 8-bit
/// text's is ASCII, and the decoded subject, addresses and file name are printed.
const READ_EAI_MIME: &str = r#"
import email, email.policy, sys
raw = open(sys.argv[1], "rb").read()
lines = [l for l in raw.split(b"\r\n") if not l.isascii()]
assert lines == ["K\u00f8ye".encode()], lines
m = email.message_from_bytes(raw, policy=email.policy.default)
print(m["X-Sink-Utf8"])
print(m["Subject"])
print(m["From"])
print(m["To"])
print(" ".join(p.get_filename() for p in m.iter_attachments()))
"#;

/// UTF-8 header fields for a smarthost that offers 8BITMIME but not SMTPUTF8 go made ASCII
/// (RFC 6531 section 3.2 forbids sending them as they are; RFC 6857's downgrade: RFC 2047
/// encoded-words, RFC 2231 for the file name), the body stays 8-bit, and a MIME reader that
/// is not skywave's reads the same text. Until 2026-11-30 they went as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utf8_header_fields_reach_a_smarthost_without_smtputf8_made_ascii() {
    if !have_aiosmtpd() {
        return;
    }
    let (_tmp, _sink, gw, file) = one_mail_to_a_smarthost_without_smtputf8(SEND_EAI_MIME).await;
    let (code, out, err) = python(READ_EAI_MIME, &[file.to_str().unwrap()]).await;
    assert_eq!(
        code,
        0,
        "{out}{err}{}",
        String::from_utf8_lossy(&std::fs::read(&file).unwrap())
    );
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "False",
            "Re: Gr\u{fc}\u{df}e aus \u{c5}lesund, 12 kn",
            "J\u{f6}rg M\u{fc}ller <joerg@ship.test>",
            "Br\u{fc}cke: ops@ship.test;",
            "Fahrplan M\u{e4}rz.pdf",
        ]
    );
    let status = status_until(&gw, "1 delivered").await;
    assert!(status.contains("offers DSN, SIZE, 8BITMIME)"), "{status}");
    assert_eq!(gw.stop().await, 0);
}

/// A gateway whose smarthost (aiosmtpd) offers 8BITMIME but not SMTPUTF8, given one mail by
/// `script` (Python, the LAN port as its argument): the temporary directory, the smarthost and
/// the gateway (kept alive), and the file the smarthost stored.
async fn one_mail_to_a_smarthost_without_smtputf8(
    script: &str,
) -> (
    tempfile::TempDir,
    tokio::process::Child,
    Gateway,
    std::path::PathBuf,
) {
    let no = std::ffi::OsStr::new("1");
    let (tmp, inbox, sink, gw) = gateway_and_dsn_sink(&[("SINK_NO_UTF8", no)]).await;
    let p = gw.smtp.port().to_string();
    let (code, out, err) = python(script, &[&p]).await;
    assert_eq!(code, 0, "{out}{err}");
    let files = wait_files(&inbox, 1).await;
    assert_eq!(files.len(), 1, "{}", gw.log());
    let file = files[0].clone();
    (tmp, sink, gw, file)
}

/// A sender at an internationalised domain, in the envelope and the header.
const SEND_IDN: &str = r#"
import smtplib, sys
msg = "From: J\u00f6rg <joerg@sch\u00f6ne.test>\r\nTo: ops@ship.test\r\nSubject: Kurs 270\r\n\r\nbody\r\n"
with smtplib.SMTP("127.0.0.1", int(sys.argv[1]), timeout=20) as s:
    s.ehlo("client.ship.test")
    s.sendmail("joerg@sch\u00f6ne.test", ["ops@ship.test"], msg.encode(), mail_options=["SMTPUTF8"])
"#;

/// An internationalised domain has an ASCII form, its A-labels (RFC 5890): a sender there is
/// taken (where an internationalised local part gets 553 5.6.7), spooled as
/// `joerg@xn--schne-lua.test`, so that every bearer and a smarthost without SMTPUTF8 can carry
/// it, and the `From:` field is written the same way for such a smarthost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internationalised_domain_goes_as_its_a_labels() {
    if !have_aiosmtpd() {
        return;
    }
    let (_tmp, _sink, gw, file) = one_mail_to_a_smarthost_without_smtputf8(SEND_IDN).await;
    let got = std::fs::read_to_string(&file).unwrap();
    for line in [
        "X-Envelope-From: joerg@xn--schne-lua.test\r\n",
        "X-Sink-Utf8: False\r\n",
        "From: =?utf-8?b?SsO2cmc=?= <joerg@xn--schne-lua.test>\r\n",
    ] {
        assert!(got.contains(line), "{line:?} in {got}");
    }
    assert!(got.is_ascii(), "{got}");
    assert_eq!(gw.stop().await, 0);
}

/// [`DSN_SINK`] with TLS (`mode`: "starttls" or "implicit", its certificate `smarthost.pem`
/// for "localhost" in `dir`) and, unless `account` is empty, AUTH as "name:password". Gives its
/// inbox, its port and the process.
async fn tls_sink(
    dir: &std::path::Path,
    mode: &str,
    account: &str,
) -> (std::path::PathBuf, u16, tokio::process::Child) {
    let inbox = dir.join("inbox");
    std::fs::create_dir(&inbox).unwrap();
    certificate(dir, "smarthost", "localhost");
    let port = free_port();
    let (cert, key) = (dir.join("smarthost.pem"), dir.join("smarthost.key"));
    let env = [
        ("SINK_TLS", std::ffi::OsStr::new(mode)),
        ("SINK_CERT", cert.as_os_str()),
        ("SINK_KEY", key.as_os_str()),
        ("SINK_AUTH", std::ffi::OsStr::new(account)),
    ];
    let sink = start_dsn_sink(dir, &inbox, port, &env).await;
    (inbox, port, sink)
}

/// `skywave status`, asked again until its smarthost line contains `what` (the round's report
/// is written when the round ends, after its last message is recorded), or the time limit.
async fn status_until(gw: &Gateway, what: &str) -> String {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let (_, status, _) = support::skywave_status(&gw.config).await;
        let done = status
            .lines()
            .any(|l| l.starts_with("LAN smarthost: ") && l.contains(what));
        if done || tokio::time::Instant::now() > deadline {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The smarthost of a shore station's relay: STARTTLS required, and AUTH with the account in
/// `[delivery] auth_file`. A wrong password defers the mail (the gateway's configuration, not
/// the mail, is at fault) and says so; the right one delivers it, over TLS, as that account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_to_the_smarthost_goes_over_starttls_and_a_wrong_password_defers() {
    if !have_aiosmtpd() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (inbox, port, _sink) = tls_sink(tmp.path(), "starttls", "gw-ship:s3cret").await;
    let extra = |backoff: u32| {
        format!(
            "[delivery]\nsmarthost = \"localhost:{port}\"\ntimeout = \"10s\"\ntls = \"required\"\ntls_ca = \"smarthost.pem\"\nauth_file = \"relay.auth\"\n[spool]\nmin_backoff = {backoff}\nmax_backoff = {backoff}\n"
        )
    };
    std::fs::write(tmp.path().join("relay.auth"), "gw-ship:wrong\n").unwrap();
    let gw = Gateway::start(tmp.path(), &routes("\"127.0.0.0/8\""), &extra(600)).await;
    let p = gw.smtp.port().to_string();
    let (code, out, err) = python(SEND, &[&p, "ops@ship.test", "relayed"]).await;
    assert_eq!(code, 0, "{out}{err}");
    let deadline = tokio::time::Instant::now() + STEP;
    while !gw.log().contains("delivery deferred") {
        assert!(tokio::time::Instant::now() < deadline, "{}", gw.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = gw.log();
    assert!(
        log.contains("AUTH as \"gw-ship\" failed (permanent error (535)"),
        "{log}"
    );
    assert!(log.contains("check [delivery] auth_file"), "{log}");
    assert!(
        !log.contains("wrong"),
        "the password is never logged: {log}"
    );
    assert!(wait_files(&inbox, 0).await.is_empty());
    // `skywave status` says so too (once the round is over).
    let status = status_until(&gw, ": 1 deferred").await;
    let line = status
        .lines()
        .find(|l| l.starts_with("LAN smarthost: "))
        .unwrap_or_default();
    assert!(
        line.starts_with(&format!("LAN smarthost: localhost:{port}, last round ")),
        "{status}"
    );
    assert!(
        line.contains(": 0 delivered, 1 deferred, 0 failed (no connection); smarthost localhost:")
            && line.contains("AUTH as \"gw-ship\" failed"),
        "{status}"
    );
    assert_eq!(gw.stop().await, 0);

    std::fs::write(tmp.path().join("relay.auth"), "gw-ship:s3cret\n").unwrap();
    let gw = Gateway::start(tmp.path(), &routes("\"127.0.0.0/8\""), &extra(1)).await;
    let (code, out, err) = support::run(
        support::skywave().to_str().unwrap(),
        &["queue", "--config", gw.config.to_str().unwrap(), "flush"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let files = wait_files(&inbox, 1).await;
    assert_eq!(files.len(), 1, "{}", gw.log());
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        text.contains("X-Sink-TLS: yes\r\nX-Sink-Auth: gw-ship\r\n"),
        "{text}"
    );
    assert!(text.contains("Subject: relayed\r\n"), "{text}");
    let status = status_until(&gw, "1 delivered").await;
    assert!(
        status.contains(
            ": 1 delivered, 0 deferred, 0 failed (TLS; offers DSN, SIZE, 8BITMIME, SMTPUTF8)\n"
        ),
        "{status}"
    );
    assert_eq!(gw.stop().await, 0);
}

/// A smarthost that speaks TLS from the first byte (SMTPS, port 465 style): `tls = "implicit"`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn implicit_tls_to_the_smarthost() {
    if !have_aiosmtpd() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (inbox, port, _sink) = tls_sink(tmp.path(), "implicit", "").await;
    let extra = format!(
        "[delivery]\nsmarthost = \"localhost:{port}\"\ntimeout = \"10s\"\ntls = \"implicit\"\ntls_ca = \"smarthost.pem\"\n"
    );
    let gw = Gateway::start(tmp.path(), &routes("\"127.0.0.0/8\""), &extra).await;
    let p = gw.smtp.port().to_string();
    let (code, out, err) = python(SEND, &[&p, "ops@ship.test", "wrapped"]).await;
    assert_eq!(code, 0, "{out}{err}");
    let files = wait_files(&inbox, 1).await;
    assert_eq!(files.len(), 1, "{}", gw.log());
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(text.contains("X-Sink-TLS: yes\r\n"), "{text}");
    assert!(text.contains("Subject: wrapped\r\n"), "{text}");
    assert_eq!(gw.stop().await, 0);
}

/// A smarthost that takes the connection and never answers: the round's first message waits
/// out the timeout and is deferred, and the others are deferred with it without another
/// connection each (which would cost the whole timeout per message).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_smarthost_that_never_answers_costs_one_timeout_per_round() {
    let tmp = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&connections);
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(sock);
        }
    });
    let extra = format!(
        "[delivery]\nsmarthost = \"127.0.0.1:{port}\"\ntimeout = \"2s\"\n[spool]\nmin_backoff = 600\nmax_backoff = 600\n"
    );
    let gw = Gateway::start(tmp.path(), &routes("\"127.0.0.0/8\""), &extra).await;
    hold_lan(&gw, "hold").await;
    let p = gw.smtp.port().to_string();
    for subject in ["one", "two", "three"] {
        let (code, out, err) = python(SEND, &[&p, "ops@ship.test", subject]).await;
        assert_eq!(code, 0, "{out}{err}");
    }
    hold_lan(&gw, "release").await;
    let deadline = tokio::time::Instant::now() + STEP;
    while gw.log().matches("delivery deferred").count() < 3 {
        assert!(tokio::time::Instant::now() < deadline, "{}", gw.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = gw.log();
    assert_eq!(log.matches("no answer within 2 s").count(), 3, "{log}");
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(gw.stop().await, 0);
    silent.abort();
}
