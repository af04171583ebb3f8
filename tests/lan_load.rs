//! Bounded load on the LAN side (issue 5 acceptance): 200 concurrent SMTP clients on loopback
//! each send 25 messages of about 2 kB in one session to the real `skywave run` binary, whose
//! spool fsyncs every message before its 250. Every message must get its 250, and afterwards
//! every message must be in the spool exactly once. The throughput and the acceptance latency
//! (from the end-of-data "." to the 250) are printed (see them with `--nocapture`); they are
//! figures to report, never asserted.
//!
//! The recipients route to the HF peer "shore", which has no link in the test: the messages stay
//! queued, so the load measured is acceptance alone (parse, route, durable enqueue), with no
//! delivery work competing, and the spool can be checked message by message afterwards.
//!
//! The second test measures Maildir delivery against ingest (issue 14): with 0, 10,000 and
//! 100,000 files already in `new/`, 2,000 messages for the LAN are submitted while LAN delivery
//! is held (the ingest rate), then released (the delivery rate); every message must land in
//! `new/` exactly once and `tmp/` must end empty. The rates are printed, not asserted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "lan_support.rs"]
mod support;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use skywave_spool::{QueueId, QueueState, Spool, SpoolConfig};
use support::{Gateway, routes};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const CLIENTS: usize = 200;
const MESSAGES: usize = 25;
/// The whole load phase must end within this.
const LOAD_LIMIT: Duration = Duration::from_secs(180);
/// One reply must come within this.
const REPLY_LIMIT: Duration = Duration::from_secs(60);

fn message_id(client: usize, n: usize) -> String {
    format!("<load-{client}-{n}@ship.test>")
}

/// A message of about 2 kB with a unique Message-ID. No body line starts with '.', so no dot
/// stuffing is needed.
fn message(client: usize, n: usize) -> String {
    let mut m = format!(
        "From: load{client}@ship.test\r\nTo: ops@shore.test\r\nSubject: load {client}/{n}\r\n\
         Message-ID: {}\r\n\r\n",
        message_id(client, n)
    );
    let mut line = 0;
    while m.len() < 2000 {
        m.push_str(&format!(
            "line {line:03} of message {n} from client {client}: the quick brown fox jumps\r\n"
        ));
        line += 1;
    }
    m
}

/// Reads one (possibly multi-line) reply; an error names what went wrong.
async fn reply(stream: &mut BufReader<TcpStream>) -> Result<String, String> {
    let mut text = String::new();
    // Bounded: a reply has at most a few dozen lines (the EHLO list).
    for _ in 0..64 {
        let mut line = String::new();
        let n = tokio::time::timeout(REPLY_LIMIT, stream.read_line(&mut line))
            .await
            .map_err(|_| format!("no reply within {REPLY_LIMIT:?}; so far {text:?}"))?
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err(format!("connection closed; so far {text:?}"));
        }
        text.push_str(&line);
        if line.len() < 4 || line.as_bytes()[3] != b'-' {
            return Ok(text);
        }
    }
    Err(format!("reply longer than 64 lines: {text:?}"))
}

async fn expect(
    stream: &mut BufReader<TcpStream>,
    send: &[u8],
    code: &str,
    what: &str,
) -> Result<(), String> {
    stream
        .get_mut()
        .write_all(send)
        .await
        .map_err(|e| format!("write {what}: {e}"))?;
    let r = reply(stream).await?;
    if r.starts_with(code) {
        Ok(())
    } else {
        Err(format!("{what}: expected {code}, got {r:?}"))
    }
}

/// One client: one session, `messages` messages to `rcpt`, each waiting for every reply.
/// Returns the acceptance latency of each message (end-of-data sent to 250 read).
async fn client(
    addr: SocketAddr,
    c: usize,
    rcpt: &str,
    messages: usize,
) -> Result<Vec<Duration>, String> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("client {c}: connect: {e}"))?;
    tcp.set_nodelay(true).map_err(|e| format!("nodelay: {e}"))?;
    let mut s = BufReader::new(tcp);
    let greeting = reply(&mut s).await?;
    if !greeting.starts_with("220") {
        return Err(format!("client {c}: greeting {greeting:?}"));
    }
    expect(
        &mut s,
        format!("EHLO c{c}.ship.test\r\n").as_bytes(),
        "250",
        "EHLO",
    )
    .await?;
    let mut latencies = Vec::with_capacity(messages);
    for n in 0..messages {
        let ctx = |e: String| format!("client {c} message {n}: {e}");
        let mail = format!("MAIL FROM:<load{c}@ship.test>\r\n");
        expect(&mut s, mail.as_bytes(), "250", "MAIL")
            .await
            .map_err(ctx)?;
        let rcpt = format!("RCPT TO:<{rcpt}>\r\n");
        expect(&mut s, rcpt.as_bytes(), "250", "RCPT")
            .await
            .map_err(ctx)?;
        expect(&mut s, b"DATA\r\n", "354", "DATA")
            .await
            .map_err(ctx)?;
        let body = message(c, n);
        s.get_mut()
            .write_all(body.as_bytes())
            .await
            .map_err(|e| ctx(format!("write body: {e}")))?;
        let start = Instant::now();
        expect(&mut s, b".\r\n", "250", "end of data")
            .await
            .map_err(ctx)?;
        latencies.push(start.elapsed());
    }
    expect(&mut s, b"QUIT\r\n", "221", "QUIT").await?;
    Ok(latencies)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The tests of this file measure rates: run one at a time so that neither loads the other's.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_clients_send_five_thousand_durable_messages_and_none_is_lost() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let t0 = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    // 127.0.0.1 is a relay network: the clients may send to the peer without AUTH.
    let gw = Gateway::start(tmp.path(), &routes("\"127.0.0.0/8\""), "").await;
    let addr = gw.smtp;
    println!(
        "load: gateway started in {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    let start = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| tokio::spawn(client(addr, c, "ops@shore.test", MESSAGES)))
        .collect();
    let results = tokio::time::timeout(LOAD_LIMIT, async {
        let mut all = Vec::with_capacity(CLIENTS);
        for t in tasks {
            all.push(t.await.expect("client task"));
        }
        all
    })
    .await
    .unwrap_or_else(|_| panic!("load not done within {LOAD_LIMIT:?}\n{}", gw.log()));
    let elapsed = start.elapsed();

    let mut latencies = Vec::with_capacity(CLIENTS * MESSAGES);
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok(l) => latencies.extend(l),
            Err(e) => errors.push(e),
        }
    }
    assert!(
        errors.is_empty(),
        "{} clients failed, first: {:?}",
        errors.len(),
        errors.first()
    );
    assert_eq!(latencies.len(), CLIENTS * MESSAGES);
    latencies.sort();
    println!(
        "load: {CLIENTS} clients x {MESSAGES} messages (~2 kB, fsync on) = {} accepted in {:.2} s = {:.0} msg/s; \
         acceptance latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        latencies.len(),
        elapsed.as_secs_f64(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 99.0)),
        ms(*latencies.last().unwrap()),
    );

    let tm = Instant::now();
    let page = support::metrics(gw.metrics.expect("metrics enabled")).await;
    let accepted = format!("skywave_accepted_total {}", CLIENTS * MESSAGES);
    assert!(page.contains(&accepted), "{page}");
    assert!(
        page.contains(&format!(
            "skywave_queue_depth{{target=\"peer:shore\"}} {}",
            CLIENTS * MESSAGES
        )),
        "{page}"
    );
    println!("load: metrics read in {:.1} s", tm.elapsed().as_secs_f64());
    let spool_dir = gw.dir.join("state/spool");
    let t1 = Instant::now();
    assert_eq!(gw.stop().await, 0);
    println!(
        "load: gateway stopped in {:.1} s",
        t1.elapsed().as_secs_f64()
    );
    let t2 = Instant::now();

    // Every message is in the spool, queued for the peer, exactly once.
    let spool = Spool::open_admin(&spool_dir, SpoolConfig::default()).unwrap();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut files = 0;
    for entry in spool.entries().unwrap() {
        let entry = entry.unwrap();
        files += 1;
        assert_eq!(entry.state, QueueState::Queued, "{}", entry.name);
        let id = QueueId::parse(&entry.name).unwrap();
        let (_, file) = spool.load(&id).unwrap();
        let text = String::from_utf8(file.message).unwrap();
        let mid = text
            .lines()
            .find_map(|l| l.strip_prefix("Message-ID: "))
            .unwrap_or_else(|| panic!("no Message-ID in {}", entry.name))
            .to_owned();
        *seen.entry(mid).or_default() += 1;
    }
    assert_eq!(files, CLIENTS * MESSAGES);
    for c in 0..CLIENTS {
        for n in 0..MESSAGES {
            let mid = message_id(c, n);
            assert_eq!(seen.get(&mid), Some(&1), "{mid} in the spool");
        }
    }
    println!(
        "load: spool checked ({files} files) in {:.1} s",
        t2.elapsed().as_secs_f64()
    );
}

/// Messages submitted per mailbox size in the Maildir test, and the clients sending them.
const MAILDIR_MESSAGES: usize = 2_000;
const MAILDIR_CLIENTS: usize = 8;

fn count(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.flatten().count())
}

async fn queue_cmd(config: &std::path::Path, args: &[&str]) {
    let exe = support::skywave();
    let mut all = vec!["queue", "--config", config.to_str().unwrap()];
    all.extend_from_slice(args);
    let (code, out, err) = support::run(exe.to_str().unwrap(), &all).await;
    assert_eq!(code, 0, "skywave {all:?}: {out}{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maildir_delivery_keeps_up_with_ingest_whatever_the_mailbox_size() {
    let _alone = ONE_AT_A_TIME.lock().await;
    for prefill in [0usize, 10_000, 100_000] {
        let tmp = tempfile::tempdir().unwrap();
        let md = tmp.path().join("Maildir");
        for sub in ["new", "cur", "tmp"] {
            std::fs::create_dir_all(md.join(sub)).unwrap();
        }
        // Another MDA's files, as a busy mailbox has them.
        for i in 0..prefill {
            std::fs::write(
                md.join("new")
                    .join(format!("1700000000.M{i}P4242V1I{i}.mda.ship.test")),
                b"x",
            )
            .unwrap();
        }
        let extra = format!("[delivery]\nmaildir = \"{}\"\n", md.display());
        let gw = Gateway::start(tmp.path(), &routes("\"127.0.0.0/8\""), &extra).await;
        queue_cmd(&gw.config, &["hold", "--peer", "lan"]).await;

        let per_client = MAILDIR_MESSAGES / MAILDIR_CLIENTS;
        let start = Instant::now();
        let tasks: Vec<_> = (0..MAILDIR_CLIENTS)
            .map(|c| tokio::spawn(client(gw.smtp, c, "ops@ship.test", per_client)))
            .collect();
        for t in tasks {
            let sent = tokio::time::timeout(LOAD_LIMIT, t)
                .await
                .expect("ingest within the limit")
                .expect("client task");
            assert_eq!(sent.map(|l| l.len()), Ok(per_client));
        }
        let ingest = start.elapsed();
        let queue = gw.dir.join("state/spool/queue");
        assert_eq!(count(&queue), MAILDIR_MESSAGES);

        queue_cmd(&gw.config, &["release", "--peer", "lan"]).await;
        // From the first delivery to the last, sampled every 5 ms (the queue shrinks as
        // messages are delivered; new/ is not listed, as that would cost what is measured).
        let limit = Instant::now() + LOAD_LIMIT;
        let mut first = None;
        loop {
            let left = count(&queue);
            if left < MAILDIR_MESSAGES && first.is_none() {
                first = Some((Instant::now(), left));
            }
            if left == 0 {
                break;
            }
            assert!(
                Instant::now() < limit,
                "{left} messages still queued\n{}",
                gw.log()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (t_first, left_at_first) = first.unwrap();
        let delivered_in = t_first.elapsed();
        let measured = left_at_first;
        assert_eq!(gw.stop().await, 0);
        assert_eq!(count(&md.join("new")), prefill + MAILDIR_MESSAGES);
        assert_eq!(count(&md.join("tmp")), 0);
        println!(
            "maildir: {prefill:>6} files already in new/: SMTP ingest {:.0} msg/s \
             ({MAILDIR_MESSAGES} messages, {MAILDIR_CLIENTS} clients), Maildir delivery {:.0} msg/s \
             (ratio {:.2})",
            MAILDIR_MESSAGES as f64 / ingest.as_secs_f64(),
            measured as f64 / delivered_in.as_secs_f64(),
            (measured as f64 / delivered_in.as_secs_f64())
                / (MAILDIR_MESSAGES as f64 / ingest.as_secs_f64()),
        );
    }
}
