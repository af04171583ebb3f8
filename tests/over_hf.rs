//! Mail over HF as an operator deploys it: three processes on loopback. `skywave-emu` serves
//! SIS for two emulated STANAG 5066 nodes (the ship 0.0.2.1 and the shore 0.0.1.1, clean AWGN
//! channel, simulated time running 20 times faster than the wall clock), and two
//! `skywave run` daemons, each with its own configuration, state directory and Maildir, reach
//! their node over TCP and carry mail with HMTP (deflate) between them. `swaks` and Python's
//! `smtplib` submit mail on the LAN side; the tests read the other side's Maildir.
//!
//! The second test SIGKILLs the receiving gateway in the middle of a batch (after it accepted
//! its first message, before its replies leave), restarts it with the same configuration and
//! checks that every message still arrives, once (the shore's spool and its de-duplication
//! memory `state_dir/dedup/` are on disk; the ship retries after its reply timeout and the
//! shore drops what it already had, including a message the kill caught between its spool
//! write and its de-duplication record: the restarted shore remembers what is still queued).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::time::{Instant, sleep, timeout};

/// Simulated seconds per wall-clock second in the emulator.
const TIME_SCALE: u32 = 20;
/// The emulator's modem rate, bit/s.
const RATE_BPS: u32 = 1200;
/// Longest wait for mail to cross, wall clock.
const DELIVERY_LIMIT: Duration = Duration::from_secs(120);
/// Longest wait for a process to start or a client to finish.
const STEP: Duration = Duration::from_secs(60);

const SHIP_NODE: &str = "0.0.2.1";
const SHORE_NODE: &str = "0.0.1.1";

/// The running emulator: its process and the SIS address of each node.
struct Emu {
    _child: Child,
    ship_sis: String,
    shore_sis: String,
}

impl Emu {
    /// Starts `skywave-emu` with the ship as node 0 and the shore as node 1, on free ports.
    async fn start() -> Emu {
        let nodes = format!("{SHIP_NODE},{SHORE_NODE}");
        let (rate, scale) = (RATE_BPS.to_string(), TIME_SCALE.to_string());
        let emu = skywave_e2e::start_emu(
            [
                "--nodes",
                "2",
                "--addresses",
                &nodes,
                "--listen",
                "127.0.0.1:0",
                "--channel",
                "awgn",
                "--snr",
                "20",
                "--rate",
                &rate,
                "--time-scale",
                &scale,
            ],
            2,
        )
        .await;
        let (ship_sis, shore_sis) = (
            emu.server(SHIP_NODE).to_owned(),
            emu.server(SHORE_NODE).to_owned(),
        );
        let (child, _) = emu.drain();
        Emu {
            _child: child,
            ship_sis,
            shore_sis,
        }
    }
}

/// One side's files: `dir/skywave.toml`, `dir/routes.toml`, `dir/state/`, `dir/Maildir/`.
struct Side {
    name: &'static str,
    dir: PathBuf,
    config: PathBuf,
}

impl Side {
    /// Writes one side's configuration and routing table under `root/name`.
    fn write(root: &Path, name: &'static str, sis_server: &str) -> Side {
        let (domain, node, peer, peer_node, peer_domain) = match name {
            "ship" => (
                "ship.example",
                SHIP_NODE,
                "shore",
                SHORE_NODE,
                "shore.example",
            ),
            _ => (
                "shore.example",
                SHORE_NODE,
                "ship",
                SHIP_NODE,
                "ship.example",
            ),
        };
        let dir = root.join(name);
        // The radio runs TIME_SCALE times faster than the gateways' clocks: the rate the
        // gateway assumes to size its reply timeout is scaled to match.
        let hf = format!(
            "node = \"{node}\"\n\
             sis_server = \"{sis_server}\"\n\
             assumed_bps = {bps}\n\
             reply_timeout = \"20s\"\n\
             batch_delay = 1\n",
            bps = RATE_BPS * TIME_SCALE,
        );
        // A batch budget well under the kill test's total, so that it takes several sessions.
        let routes = format!(
            "[lan]\n\
             domains = [\"{domain}\", \"*.{domain}\"]\n\
             relay_networks = [\"127.0.0.0/8\", \"::1/128\"]\n\n\
             [[peer]]\n\
             name = \"{peer}\"\n\
             node = \"{peer_node}\"\n\
             protocol = \"hmtp\"\n\
             skywave = true\n\
             compression = \"deflate\"\n\
             batch_bytes = \"32 KiB\"\n\n\
             [[route]]\n\
             match = \"{peer_domain}\"\n\
             to = \"{peer}\"\n\n\
             [[route]]\n\
             match = \"*.{peer_domain}\"\n\
             to = \"{peer}\"\n"
        );
        let config_path = skywave_e2e::write_gateway(&dir, domain, &hf, &routes);
        Side {
            name,
            dir,
            config: config_path,
        }
    }

    fn maildir(&self) -> PathBuf {
        self.dir.join("Maildir")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("skywave.log")).unwrap_or_default()
    }
}

/// A running `skywave run`.
struct Gateway {
    child: Child,
    smtp: String,
}

impl Gateway {
    /// Starts `skywave run --config` for `side` (appending to its log) and waits for its SMTP
    /// address.
    async fn start(side: &Side) -> Gateway {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(side.dir.join("skywave.log"))
            .unwrap();
        let mut command = Command::new(skywave_e2e::bin("skywave"));
        command
            .args(["--log", "info,skywave_gateway=debug", "run", "--config"])
            .arg(&side.config)
            .stdin(Stdio::null())
            .stderr(Stdio::from(log));
        let g = skywave_e2e::start_gateway(command, STEP)
            .await
            .unwrap_or_else(|e| panic!("{} {e}:\n{}", side.name, side.log()));
        Gateway {
            child: g.child,
            smtp: g.smtp,
        }
    }

    /// SIGKILL, and wait for the process to be gone.
    async fn kill9(mut self) {
        self.child.start_kill().expect("SIGKILL");
        timeout(STEP, self.child.wait())
            .await
            .expect("killed gateway did not exit")
            .expect("wait");
    }
}

/// The messages in a Maildir's `new/`, keyed by their Subject, with their text.
fn maildir(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir.join("new")) else {
        return out;
    };
    for e in entries.flatten() {
        // A file moved away between listing and reading is simply not counted.
        let Ok(bytes) = std::fs::read(e.path()) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let subject = text
            .lines()
            .take_while(|l| !l.is_empty())
            .find_map(|l| l.strip_prefix("Subject: "))
            .unwrap_or("(none)")
            .to_owned();
        out.entry(subject).or_default().push(text);
    }
    out
}

fn count(m: &BTreeMap<String, Vec<String>>) -> usize {
    m.values().map(Vec::len).sum()
}

/// Waits until `dir` holds at least `n` messages or `limit` passes; returns what is there.
async fn wait_for(dir: &Path, n: usize, limit: Duration) -> BTreeMap<String, Vec<String>> {
    let end = Instant::now() + limit;
    loop {
        let m = maildir(dir);
        if count(&m) >= n || Instant::now() >= end {
            return m;
        }
        sleep(Duration::from_millis(100)).await;
    }
}

/// Runs a client program with a time limit; returns (exit code, stdout + stderr).
async fn run(program: &str, args: &[&str]) -> (i32, String) {
    let out = timeout(
        STEP,
        Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{program} took too long"))
    .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

async fn swaks(server: &str, from: &str, to: &str, subject: &str, body: &str) {
    let header = format!("Subject: {subject}");
    let (code, out) = run(
        "swaks",
        &[
            "--server",
            server,
            "--helo",
            "client.test",
            "--from",
            from,
            "--to",
            to,
            "--header",
            &header,
            "--body",
            body,
        ],
    )
    .await;
    assert_eq!(code, 0, "swaks failed: {out}");
    assert!(out.contains("<-  250 2.0.0"), "{out}");
}

/// Checks that every subject in `subjects` is in `got` exactly once, with the receiving
/// gateway's `Received:` header naming the sending peer and its STANAG 5066 address.
fn check_once(got: &BTreeMap<String, Vec<String>>, subjects: &[String], by: &str, from: &str) {
    assert_eq!(
        got.len(),
        subjects.len(),
        "messages delivered: {:?}",
        got.keys()
    );
    for s in subjects {
        let copies = got.get(s).unwrap_or_else(|| panic!("{s:?} not delivered"));
        assert_eq!(copies.len(), 1, "{s:?} delivered {} times", copies.len());
        let text = &copies[0];
        let head: String = text.chars().take(800).collect();
        // The newest Received header (the first) is the receiving gateway's.
        let first = text
            .match_indices("Received: ")
            .nth(1)
            .map_or(text.as_str(), |(at, _)| &text[..at]);
        assert!(
            first.contains(&format!("\tby {by} (skywave) with ESMTP id ")),
            "{s:?}: the first Received header is not {by}'s:\n{head}"
        );
        assert!(
            first.contains(&format!("5066:{from}")),
            "{s:?}: the Received header does not name the 5066 peer {from}:\n{head}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swaks_mail_crosses_between_two_gateway_processes_exactly_once() {
    if !skywave_emu::missing::have_tool("swaks", "the two-process swaks test") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let emu = Emu::start().await;
    let ship_side = Side::write(tmp.path(), "ship", &emu.ship_sis);
    let shore_side = Side::write(tmp.path(), "shore", &emu.shore_sis);
    let ship = Gateway::start(&ship_side).await;
    let shore = Gateway::start(&shore_side).await;
    let t0 = Instant::now();

    let mut to_shore = Vec::new();
    for i in 0..3 {
        let subject = format!("ship to shore {i}");
        swaks(
            &ship.smtp,
            "alice@ship.example",
            "someone@shore.example",
            &subject,
            &format!("Message {i} from the ship, over HF."),
        )
        .await;
        to_shore.push(subject);
    }
    let to_ship = vec!["shore to ship".to_owned()];
    swaks(
        &shore.smtp,
        "hq@shore.example",
        "captain@ship.example",
        &to_ship[0],
        "From the shore, over HF.",
    )
    .await;

    let got = wait_for(&shore_side.maildir(), 3, DELIVERY_LIMIT).await;
    assert_eq!(
        count(&got),
        3,
        "shore Maildir: {:?}\nship log:\n{}\nshore log:\n{}",
        got.keys(),
        ship_side.log(),
        shore_side.log()
    );
    eprintln!("over_hf: 3 messages at the shore after {:?}", t0.elapsed());
    let back = wait_for(&ship_side.maildir(), 1, DELIVERY_LIMIT).await;
    eprintln!("over_hf: 1 message at the ship after {:?}", t0.elapsed());
    assert_eq!(
        count(&back),
        1,
        "ship Maildir: {:?}\nship log:\n{}\nshore log:\n{}",
        back.keys(),
        ship_side.log(),
        shore_side.log()
    );
    // Nothing more arrives (no duplicate from a retry): 3 s here is a minute on the air.
    sleep(Duration::from_secs(3)).await;
    check_once(
        &maildir(&shore_side.maildir()),
        &to_shore,
        "gw.shore.example",
        SHIP_NODE,
    );
    check_once(
        &maildir(&ship_side.maildir()),
        &to_ship,
        "gw.ship.example",
        SHORE_NODE,
    );
    // Each side kept a record of the sessions it took part in (written just after the spool
    // settles each one, so give a loaded machine a moment).
    for side in [&ship_side, &shore_side] {
        let path = side.dir.join("state/transfers.jsonl");
        let both =
            |r: &str| r.contains("\"direction\":\"out\"") && r.contains("\"direction\":\"in\"");
        let mut records = String::new();
        for _ in 0..300 {
            records = std::fs::read_to_string(&path).unwrap_or_default();
            if both(&records) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        assert!(records.contains("\"direction\":\"out\""), "{records}");
        assert!(records.contains("\"direction\":\"in\""), "{records}");
    }
}

/// Submits `n` messages of about `size` bytes (hexadecimal noise, so that deflate cannot make
/// them small) to the ship in one SMTP session.
const SEND_BATCH: &str = r#"
import random, smtplib, sys
host, port, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(5066)
with smtplib.SMTP(host, port, timeout=60) as s:
    s.ehlo("client.ship.example")
    for i in range(n):
        lines = []
        while 74 * len(lines) < size:
            lines.append("".join(rng.choice("0123456789abcdef") for _ in range(72)))
        msg = ("From: <alice@ship.example>\r\nTo: <ops@shore.example>\r\n"
               "Subject: batch %d\r\nMessage-ID: <batch-%d@ship.example>\r\n\r\n" % (i, i)
               + "\r\n".join(lines) + "\r\n")
        refused = s.sendmail("alice@ship.example", ["ops@shore.example"], msg)
        assert not refused, refused
print("sent", n)
"#;

/// The queue ids of the messages a (dead) gateway had accepted: in its spool's `queue/`, or
/// already delivered to its Maildir (whose file names carry the queue id after `.I`).
fn accepted_ids(side: &Side) -> std::collections::BTreeSet<String> {
    let names = |dir: PathBuf| -> Vec<String> {
        std::fs::read_dir(dir).map_or_else(
            |_| Vec::new(),
            |d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            },
        )
    };
    let mut ids: std::collections::BTreeSet<String> = names(side.dir.join("state/spool/queue"))
        .into_iter()
        .collect();
    for name in names(side.maildir().join("new")) {
        if let Some(id) = name
            .split_once('K')
            .and_then(|(_, rest)| rest.split_once('.'))
            .map(|(id, _)| id.to_owned())
        {
            ids.insert(id);
        }
    }
    ids
}

/// What one attempt of the kill test came to.
enum KillRun {
    /// The shore was killed with `at_kill` of `n` messages in its Maildir, and after its
    /// restart every message arrived exactly once.
    Done { at_kill: usize },
    /// Everything had already arrived when the kill landed: it proved nothing.
    TooLate,
}

async fn kill_the_shore_mid_batch(n: usize) -> KillRun {
    let tmp = tempfile::tempdir().unwrap();
    let emu = Emu::start().await;
    let ship_side = Side::write(tmp.path(), "ship", &emu.ship_sis);
    let shore_side = Side::write(tmp.path(), "shore", &emu.shore_sis);
    let ship = Gateway::start(&ship_side).await;
    let shore = Gateway::start(&shore_side).await;
    let port = ship.smtp.rsplit_once(':').unwrap().1.to_owned();

    let (code, out) = run(
        "python3",
        &["-c", SEND_BATCH, "127.0.0.1", &port, &n.to_string(), "4000"],
    )
    .await;
    assert_eq!(code, 0, "smtplib failed: {out}\n{}", ship_side.log());

    // The moment the shore has accepted (spooled, and remembered in its de-duplication file)
    // its first message of the batch, it is in the middle of the ship's session: the replies
    // leave only once the whole submission is processed. Kill it without warning.
    let dedup = shore_side.dir.join("state/dedup/ship");
    let end = Instant::now() + DELIVERY_LIMIT;
    while std::fs::metadata(&dedup).map_or(0, |m| m.len()) == 0 {
        assert!(
            Instant::now() < end,
            "the shore accepted nothing\nship log:\n{}\nshore log:\n{}",
            ship_side.log(),
            shore_side.log()
        );
        sleep(Duration::from_millis(2)).await;
    }
    shore.kill9().await;
    let at_kill = count(&maildir(&shore_side.maildir()));
    // What the dead shore had accepted (spooled, whether or not yet delivered) and what its
    // de-duplication file remembers: the spool is written first and the fingerprint second,
    // so a kill between the two leaves a message accepted but not remembered.
    let accepted = accepted_ids(&shore_side);
    let remembered = std::fs::read_to_string(&dedup)
        .map_or(0, |t| t.lines().filter(|l| !l.trim().is_empty()).count());
    let unremembered = accepted.len().saturating_sub(remembered);
    eprintln!(
        "over_hf: shore killed with {at_kill} of {n} messages in its Maildir, {} accepted, \
         {remembered} remembered for de-duplication",
        accepted.len()
    );
    if at_kill >= n {
        return KillRun::TooLate;
    }

    // Same configuration, same state directory: the spool and the de-duplication memory
    // survive; the ship retries whatever it got no answer for.
    let _shore = Gateway::start(&shore_side).await;
    let subjects: Vec<String> = (0..n).map(|i| format!("batch {i}")).collect();
    let end = Instant::now() + DELIVERY_LIMIT;
    let mut got = maildir(&shore_side.maildir());
    while got.len() < n && Instant::now() < end {
        sleep(Duration::from_millis(100)).await;
        got = maildir(&shore_side.maildir());
    }
    assert_eq!(
        got.len(),
        n,
        "shore Maildir after the restart: {:?}\nship log:\n{}\nshore log:\n{}",
        got.keys(),
        ship_side.log(),
        shore_side.log()
    );
    // Nothing more arrives later (a retry of mail the shore already had is dropped).
    sleep(Duration::from_secs(5)).await;
    let got = maildir(&shore_side.maildir());
    let twice: Vec<&String> = got
        .iter()
        .filter(|(_, c)| c.len() > 1)
        .map(|(s, _)| s)
        .collect();
    let extra = count(&got) - got.len();
    // A crash between the spool write and the fingerprint write is covered too: the shore
    // seeds its de-duplication memory with the messages still in its spool at start-up. So
    // nothing may arrive twice.
    assert!(
        extra == 0,
        "delivered more than once after the restart: {twice:?} ({extra} extra copies; \
         {unremembered} accepted but not yet remembered in the file at the kill)\n\
         shore dedup file:\n{}\nship log:\n{}\nshore log:\n{}",
        std::fs::read_to_string(&dedup).unwrap_or_default(),
        ship_side.log(),
        shore_side.log()
    );
    for (subject, copies) in &got {
        let one: BTreeMap<String, Vec<String>> =
            BTreeMap::from([(subject.clone(), vec![copies[0].clone()])]);
        check_once(
            &one,
            std::slice::from_ref(subject),
            "gw.shore.example",
            SHIP_NODE,
        );
    }
    assert_eq!(
        got.keys().cloned().collect::<Vec<_>>(),
        {
            let mut s = subjects.clone();
            s.sort();
            s
        },
        "the shore's Maildir has other messages than those sent"
    );
    let ship_log = ship_side.log();
    let shore_log = shore_side.log();
    eprintln!(
        "over_hf: ship sessions without a reply: {}; duplicates the shore dropped: {}",
        ship_log
            .matches("no reply within the session timeout")
            .count(),
        shore_log
            .matches("duplicate of a message already accepted")
            .count()
    );
    drop(ship);
    KillRun::Done { at_kill }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_the_receiving_gateway_mid_batch_loses_nothing_and_drops_retransmissions() {
    for n in [20, 40] {
        match kill_the_shore_mid_batch(n).await {
            KillRun::Done { at_kill } => {
                assert!(at_kill < n);
                return;
            }
            KillRun::TooLate => {
                eprintln!("over_hf: the kill landed after all {n} messages arrived; more mail");
            }
        }
    }
    panic!("the shore could never be killed mid-batch: every message had arrived first");
}

#[tokio::test]
async fn the_example_routing_tables_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for file in ["config/ship-routes.toml", "config/shore-routes.toml"] {
        let path = root.join(file);
        let (code, out) = run(
            skywave_e2e::bin("skywave").to_str().unwrap(),
            &["routes", "check", path.to_str().unwrap()],
        )
        .await;
        assert_eq!(code, 0, "{file}: {out}");
        assert!(out.contains("1 peer, 2 routes, OK"), "{file}: {out}");
    }
}

/// What the foreign peer of [`foreign_hmtp_peer`] saw of one session: the messages its server
/// took (envelope and text), in order.
type PeerSession = Vec<(skywave_smtp::Envelope, Vec<u8>)>;

/// An HMTP peer that is not skywave, on the shore's node: a SIS client on SAP 3 feeding the
/// hmtp crate's server, configured as such a peer may be (Annex F asks only that it should
/// offer 8BITMIME: this one does not), its replies sent back to the ship's node. Each session
/// it finishes is sent on `done`.
async fn foreign_hmtp_peer(sis: String, done: tokio::sync::mpsc::UnboundedSender<PeerSession>) {
    use skywave_hmtp::{DedupCache, HmtpServer, ServerEvent, ServerSettings};
    use skywave_sis::client::Event;
    use skywave_sis::{Client, ClientConfig, Priority, SapId, ServiceType, Ttl, UnidataRequest};
    let connector = move || {
        let sis = sis.clone();
        async move { tokio::net::TcpStream::connect(sis).await }
    };
    let cfg = ClientConfig::new(SapId::new(3).unwrap(), ServiceType::ARQ_NODE_CONFIRM);
    let (client, _, mut events) = Client::connect(connector, cfg).await.unwrap();
    let mut settings = ServerSettings::new("mx.shore.example", 2048);
    settings.smtp.eight_bit_mime = false;
    let mut dedup = DedupCache::new(Duration::from_secs(3600), 1000);
    let mut server = None;
    let mut session = PeerSession::new();
    while let Some(event) = events.recv().await {
        let Event::Unidata(ind) = event else { continue };
        let now = std::time::Instant::now();
        let s = server.get_or_insert_with(|| {
            HmtpServer::new(settings.clone(), skywave_smtp::AcceptAll, now).unwrap()
        });
        s.receive(now, &ind.updu, &mut dedup);
        let mut closed = false;
        while let Some(ev) = s.poll_event() {
            match ev {
                ServerEvent::Message(m) => {
                    let id = format!("F{}", session.len());
                    session.push((m.envelope, m.body));
                    s.accepted(m.ticket, &id, now, &mut dedup).unwrap();
                }
                ServerEvent::Duplicate { .. } => {}
                ServerEvent::Closed(_) => closed = true,
            }
        }
        while let Some(replies) = s.take_transmission() {
            for updu in replies {
                // Delivery is the ship's to judge, from the replies it gets.
                let _pending = client.send_unidata(UnidataRequest {
                    priority: Priority::new(0).unwrap(),
                    dest_sap: SapId::new(3).unwrap(),
                    dest: ind.src,
                    mode: ServiceType::DEFAULT,
                    ttl: Ttl::INFINITE,
                    updu: updu.into(),
                });
            }
        }
        if closed {
            server = None;
            if done.send(std::mem::take(&mut session)).is_err() {
                return;
            }
        }
    }
}

/// The next session the foreign peer finished, within [`DELIVERY_LIMIT`].
async fn next_session(
    sessions: &mut tokio::sync::mpsc::UnboundedReceiver<PeerSession>,
    side: &Side,
) -> PeerSession {
    timeout(DELIVERY_LIMIT, sessions.recv())
        .await
        .unwrap_or_else(|_| panic!("no session reached the peer; ship log:\n{}", side.log()))
        .expect("the peer stopped")
}

/// Submits one 8-bit message (`BODY=8BITMIME`) to the gateway at `host` `port`.
const SEND_8BIT: &str = r#"
import smtplib, sys
host, port, subject = sys.argv[1], int(sys.argv[2]), sys.argv[3]
msg = ("From: <alice@ship.example>\r\nTo: <ops@shore.example>\r\nSubject: %s\r\n\r\n"
       "Cr\u00e8me br\u00fbl\u00e9e tonight.\r\n" % subject).encode("utf-8")
with smtplib.SMTP(host, port, timeout=60) as s:
    refused = s.sendmail("alice@ship.example", ["ops@shore.example"], msg,
                         mail_options=["BODY=8BITMIME"])
    assert not refused, refused
"#;

/// STANAG 5066 Annex F asks an HMTP server only that it should offer 8BITMIME. The ship's
/// first session to a peer that does not (not skywave: plain pipelined SMTP) assumes it, as a
/// batch must, and the peer refuses the parameter; the ship learns from the peer's EHLO reply,
/// keeps the mail, and sends it again at once made 7-bit (RFC 6152), as it does every later
/// 8-bit message; `skywave status` says what it learnt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_hmtp_peer_without_8bitmime_gets_8bit_mail_made_7bit() {
    let tmp = tempfile::tempdir().unwrap();
    let emu = Emu::start().await;
    let ship_side = Side::write(tmp.path(), "ship", &emu.ship_sis);
    let routes = ship_side.dir.join("routes.toml");
    let text = std::fs::read_to_string(&routes).unwrap();
    let skywave_peer = "skywave = true\ncompression = \"deflate\"\n";
    assert!(text.contains(skywave_peer), "{text}");
    std::fs::write(&routes, text.replace(skywave_peer, "skywave = false\n")).unwrap();
    let (done, mut sessions) = tokio::sync::mpsc::unbounded_channel();
    let peer = tokio::spawn(foreign_hmtp_peer(emu.shore_sis.clone(), done));
    let ship = Gateway::start(&ship_side).await;
    let (host, port) = ship.smtp.rsplit_once(':').unwrap();

    let (code, out) = run("python3", &["-c", SEND_8BIT, host, port, "menu 1"]).await;
    assert_eq!(code, 0, "{out}");
    let first = next_session(&mut sessions, &ship_side).await;
    assert!(first.is_empty(), "taken with BODY=8BITMIME: {first:?}");
    let again = next_session(&mut sessions, &ship_side).await;
    let later = {
        let (code, out) = run("python3", &["-c", SEND_8BIT, host, port, "menu 2"]).await;
        assert_eq!(code, 0, "{out}");
        next_session(&mut sessions, &ship_side).await
    };
    for (session, subject) in [(again, "menu 1"), (later, "menu 2")] {
        assert_eq!(session.len(), 1, "{session:?}");
        let (envelope, body) = &session[0];
        let text = String::from_utf8_lossy(body);
        assert_eq!(envelope.body_type, skywave_smtp::BodyType::Unspecified);
        assert!(body.is_ascii(), "{text}");
        for want in [
            format!("Subject: {subject}\r\n"),
            "MIME-Version: 1.0\r\n".to_owned(),
            "Content-Type: text/plain; charset=utf-8\r\n".to_owned(),
            "Content-Transfer-Encoding: quoted-printable\r\n".to_owned(),
            "\r\n\r\nCr=C3=A8me br=C3=BBl=C3=A9e tonight.\r\n".to_owned(),
        ] {
            assert!(text.contains(&want), "{want:?} in {text}");
        }
    }
    assert!(
        ship_side
            .log()
            .contains("shore does not offer 8BITMIME and said: 555 "),
        "{}",
        ship_side.log()
    );
    let (code, status) = run(
        skywave_e2e::bin("skywave").to_str().unwrap(),
        &["status", "--config", ship_side.config.to_str().unwrap()],
    )
    .await;
    assert_eq!(code, 0, "{status}");
    assert!(
        status.contains("; DSN: no; 8BITMIME: no; SMTPUTF8: no; "),
        "{status}"
    );
    peer.abort();
    drop(ship);
}
