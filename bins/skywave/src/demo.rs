//! `skywave demo`: a ship and a shore gateway joined by the in-process HF emulator.
//!
//! Starts both gateways ([`skywave_gateway::demo::Pair`]: the production daemon code, each
//! with its own spool, routing table and Maildir, reaching its emulated STANAG 5066 node
//! in-process), submits a sample batch to each over SMTP on its LAN port, waits until every
//! message is in the other side's Maildir, and prints what happened on the air: one line per
//! session, then the channel's own counters. Without `--once` it keeps running for the user's
//! own mail until Ctrl-C, printing each new session.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use skywave_emu::channel::{ImpairmentKind, ScheduledImpairment};
use skywave_gateway::demo::{Pair, PairOptions, SHIP_NODE, SHORE_NODE};
use skywave_gateway::hf::{Direction, TransferRecord};
use skywave_gateway::tcp_bearer::{TcpBearerSettings, send_batch};
use skywave_smtp::{OutgoingMessage, RecipientStatus};

/// Options of `skywave demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Exit after the sample batch instead of waiting for Ctrl-C.
    #[arg(long)]
    pub(crate) once: bool,
    /// Simulated seconds per real second: 10 runs the radio ten times faster.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) time_scale: f64,
    /// Modem data rate, bit/s (MIL-STD-188-110A/B: 75 to 9600).
    #[arg(long, default_value_t = 1200)]
    pub(crate) rate: u32,
    /// Channel: awgn, or an ITU-R profile (good, moderate, poor, ... from channel-profiles.csv).
    #[arg(long, default_value = "poor")]
    pub(crate) channel: String,
    /// Signal-to-noise ratio, dB in 3 kHz.
    #[arg(long, default_value_t = 15.0)]
    pub(crate) snr: f64,
    /// Modem interleaver: zero, short or long.
    #[arg(long, default_value = "short")]
    pub(crate) interleaver: String,
    /// Turnaround, seconds: how long a station takes after a received transmission before it
    /// can key up (0.15 is the best case; deployed STANAG 5066 systems take seconds or tens of
    /// seconds; at most 127.5).
    #[arg(long, default_value_t = 0.15)]
    pub(crate) turnaround: f64,
    /// The emulated STANAG 5066 servers make each link with CAS-1 (PHYSICAL LINK REQUEST and
    /// ACCEPTED) before the first session's data, as a real server without ALE does.
    #[arg(long)]
    pub(crate) cas1: bool,
    /// With --cas1: the server whose request made a link breaks it once it has idled this
    /// many seconds (PHYSICAL LINK BREAK, BREAK CONFIRM); the next session makes it again.
    /// Default: a made link stays.
    #[arg(long, value_name = "SECS", requires = "cas1")]
    pub(crate) link_idle: Option<f64>,
    /// No signal on the emulated channel from simulated second START for LENGTH seconds,
    /// `START+LENGTH` (repeatable): the sessions on the air then fail or wait, and the spools
    /// send again once the channel is back.
    #[arg(long = "outage", value_name = "START+LENGTH", conflicts_with = "ships")]
    pub(crate) outages: Vec<String>,
    /// Compression between the two gateways: none, lzw9 ... lzw16, deflate.
    #[arg(long, default_value = "deflate")]
    pub(crate) compression: String,
    /// Seed of the emulator's random draws (same seed, same run).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// The ship's LAN SMTP port on 127.0.0.1.
    #[arg(long, default_value_t = 2525)]
    pub(crate) ship_port: u16,
    /// The shore's LAN SMTP port on 127.0.0.1.
    #[arg(long, default_value_t = 2526)]
    pub(crate) shore_port: u16,
    /// Messages in the sample batch each way.
    #[arg(long, default_value_t = 3)]
    pub(crate) messages: usize,
    /// Directory for both gateways' configuration, spool and Maildir (default: a new
    /// directory under the system's temporary directory, kept afterwards).
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,
    /// The fleet form: a base and this many ships on one frequency (the ships also members
    /// of one 5066 group address); the base sends one message to every ship (once, by P_MUL
    /// multicast), one to the whole fleet and one to the first ship alone (by HMTP). The base
    /// listens on --shore-port, ship i on --ship-port + i - 1.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=50))]
    pub(crate) ships: Option<u16>,
    /// With --ships: the last ship keeps EMCON (receives, transmits nothing) until the
    /// base has sent everything, then lifts it and acknowledges.
    #[arg(long, requires = "ships")]
    pub(crate) emcon_ship: bool,
    /// With --ships: multicast over an emulated IP network (a geostationary satellite hop:
    /// 270 ms, 2 % of datagrams lost, 64 kbit/s uplinks) as ACP 142 P_MUL over UDP, instead
    /// of over HF; mail for one ship still goes by HMTP over HF.
    #[arg(long, requires = "ships")]
    pub(crate) ip_multicast: bool,
}

impl DemoArgs {
    /// `--turnaround` as a duration, checked.
    pub(crate) fn turnaround_duration(&self) -> anyhow::Result<Duration> {
        let t = Duration::try_from_secs_f64(self.turnaround)
            .ok()
            .filter(|&t| t <= skywave_gateway::demo::MAX_TURNAROUND);
        t.with_context(|| {
            format!(
                "--turnaround {} must be 0 to {} seconds",
                self.turnaround,
                skywave_gateway::demo::MAX_TURNAROUND.as_secs_f64()
            )
        })
    }

    /// `--outage` values as (start, length).
    pub(crate) fn outage_windows(&self) -> anyhow::Result<Vec<(Duration, Duration)>> {
        self.outages
            .iter()
            .map(|t| {
                ScheduledImpairment::parse(ImpairmentKind::Outage, t)
                    .map(|o| (o.start, o.length))
                    .with_context(|| format!("--outage {t}"))
            })
            .collect()
    }

    /// `--link-idle` as a duration (a number of seconds, 0 or more).
    pub(crate) fn link_idle_duration(&self) -> anyhow::Result<Option<Duration>> {
        self.link_idle
            .map(|s| {
                Duration::try_from_secs_f64(s)
                    .with_context(|| format!("--link-idle {s} must be 0 or more seconds"))
            })
            .transpose()
    }
}

pub(crate) fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
        anyhow::bail!("--time-scale {} must be a positive number", args.time_scale);
    }
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("skywave-demo-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    match args.ships {
        Some(n) => runtime.block_on(crate::fleet_demo::run(&args, usize::from(n), dir)),
        None => runtime.block_on(demo(args, dir)),
    }
}

async fn demo(args: DemoArgs, dir: PathBuf) -> anyhow::Result<ExitCode> {
    let mut opts = PairOptions::new(dir.clone());
    opts.ship_smtp = SocketAddr::from(([127, 0, 0, 1], args.ship_port));
    opts.shore_smtp = SocketAddr::from(([127, 0, 0, 1], args.shore_port));
    opts.rate_bps = args.rate;
    opts.channel = args.channel.clone();
    opts.snr_db = args.snr;
    opts.turnaround = args.turnaround_duration()?;
    opts.cas1 = args.cas1;
    opts.link_idle = args.link_idle_duration()?;
    opts.outages = args.outage_windows()?;
    opts.interleaver = args.interleaver.clone();
    opts.compression = args.compression.clone();
    opts.seed = args.seed;
    opts.time_scale = args.time_scale;
    let pair = Pair::start(&opts).await.map_err(|e| {
        anyhow::anyhow!(
            "{e}\n(if a port is in use, choose others with --ship-port and --shore-port)"
        )
    })?;
    let scale = args.time_scale;
    outln!("skywave demo: two gateways over an emulated HF link");
    outln!(
        "  radio: {} bit/s, {} interleaver, {} channel at {} dB SNR, turnaround {} s, seed {}{}",
        args.rate,
        args.interleaver,
        args.channel,
        args.snr,
        args.turnaround,
        args.seed,
        if (scale - 1.0).abs() > f64::EPSILON {
            format!(", running {scale}x faster than real time")
        } else {
            String::new()
        }
    );
    for (start, length) in &opts.outages {
        outln!(
            "  outage: no signal from {:.1} s to {:.1} s (simulated)",
            start.as_secs_f64(),
            (*start + *length).as_secs_f64()
        );
    }
    outln!(
        "  ship : gw.ship.example  SMTP {}  STANAG 5066 node {SHIP_NODE}",
        pair.ship.bound().smtp
    );
    outln!(
        "  shore: gw.shore.example SMTP {}  STANAG 5066 node {SHORE_NODE}",
        pair.shore.bound().smtp
    );
    outln!(
        "  protocol: HMTP on SAP 3, compression {}; configs in {}",
        args.compression,
        dir.display()
    );
    outln!();

    let n = args.messages;
    let to_shore = sample("alice@ship.example", "ops@shore.example", n, "ship");
    let to_ship = sample("hq@shore.example", "captain@ship.example", n, "shore");
    let bytes = |v: &[OutgoingMessage]| v.iter().map(|m| m.body.len()).sum::<usize>();
    outln!(
        "submitting {n} messages ({} bytes) to the ship and {n} ({} bytes) to the shore over SMTP",
        bytes(&to_shore),
        bytes(&to_ship)
    );
    submit(pair.ship.bound().smtp, to_shore).await?;
    submit(pair.shore.bound().smtp, to_ship).await?;

    let started = tokio::time::Instant::now();
    let limit = Duration::from_secs_f64(4.0 * 3600.0 / scale);
    let mut shown = 0usize;
    loop {
        shown = print_new(&pair, shown, scale);
        let shore = count(&pair.shore_maildir);
        let ship = count(&pair.ship_maildir);
        // Done when every message is delivered and both spools are empty (the last replies
        // are back, so nothing will be sent again).
        if shore >= n && ship >= n && queued(&pair) == 0 {
            break;
        }
        if started.elapsed() > limit {
            outln!(
                "not everything arrived within 4 hours of radio time ({shore}/{n} ashore, {ship}/{n} aboard); the rest stays queued"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = print_new(&pair, shown, scale);
    report(&pair, started.elapsed().as_secs_f64() * scale);
    if args.once {
        pair.stop().await;
        return Ok(ExitCode::SUCCESS);
    }
    outln!();
    outln!(
        "The gateways keep running. Send your own mail, e.g.\n  swaks --server {} --from you@ship.example --to ops@shore.example\n  swaks --server {} --from hq@shore.example --to you@ship.example\nCtrl-C stops.",
        pair.ship.bound().smtp,
        pair.shore.bound().smtp
    );
    let mut shown = shown_count(&pair);
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            () = tokio::time::sleep(Duration::from_millis(500)) => {
                shown = print_new(&pair, shown, scale);
            }
        }
    }
    outln!("stopping");
    report(&pair, f64::NAN);
    pair.stop().await;
    Ok(ExitCode::SUCCESS)
}

/// Largest sample message: the corpus's size law reaches 150 kB, which would turn the demo's
/// minute of radio into a quarter of an hour.
const SAMPLE_MAX: usize = 12_000;

/// A sample batch from the realistic mail corpus (the generator behind `skywave codec corpus`:
/// Received chains, DKIM signatures, MIME alternatives, text and base64 attachments), with the
/// corpus's own size law capped at [`SAMPLE_MAX`]: mail that compresses as real mail does, not
/// repeated log lines that deflate 16:1. Each message gets From and To matching the demo's
/// envelope and a Message-ID unique to this run (a receiving gateway drops a Message-ID it has
/// already accepted).
pub(crate) fn sample(from: &str, to: &str, n: usize, side: &str) -> Vec<OutgoingMessage> {
    let seed = if side == "ship" { 0x5_41B } else { 0x5_40E };
    let sizes = skywave_compress::corpus::standard_sizes(seed, n + 2);
    (0..n)
        .map(|i| {
            // The first two sizes are the law's two ends (300 bytes, 150 kB): skip them.
            let size = sizes.get(i + 2).copied().unwrap_or(1_400).min(SAMPLE_MAX);
            let body = skywave_compress::corpus::message_of_size(seed ^ i as u64, size)
                .unwrap_or_default();
            OutgoingMessage {
                reverse_path: from.to_owned(),
                recipients: vec![to.to_owned()],
                body: skywave_compress::corpus::set_headers(
                    &body,
                    &[
                        ("From", format!("<{from}>")),
                        ("To", format!("<{to}>")),
                        (
                            "Message-ID",
                            format!("<demo-{side}-{i}.{}@demo.skywave>", std::process::id()),
                        ),
                    ],
                ),
                eight_bit: false,
                mt_priority: None,
                dsn: Default::default(),
                rcpt_dsn: Vec::new(),
            }
        })
        .collect()
}

pub(crate) async fn submit(addr: SocketAddr, messages: Vec<OutgoingMessage>) -> anyhow::Result<()> {
    let mut settings = TcpBearerSettings::new("demo.localhost");
    settings.reply_timeout = Duration::from_secs(30);
    let t = send_batch(addr, &settings, messages)
        .await
        .with_context(|| format!("cannot submit the sample mail to {addr}"))?;
    for o in &t.outcomes {
        for r in &o.recipients {
            if !matches!(r.status, RecipientStatus::Delivered(_)) {
                anyhow::bail!(
                    "{addr} did not take the sample mail for {}: {:?}",
                    r.address,
                    r.status
                );
            }
        }
    }
    Ok(())
}

fn queued(pair: &Pair) -> usize {
    [&pair.ship, &pair.shore]
        .iter()
        .map(|g| g.spool().entries().map_or(usize::MAX, |e| e.count()))
        .fold(0usize, usize::saturating_add)
}

pub(crate) fn count(maildir: &Path) -> usize {
    std::fs::read_dir(maildir.join("new")).map_or(0, |d| d.count())
}

fn all_records(pair: &Pair) -> Vec<(&'static str, TransferRecord)> {
    let mut all: Vec<(&'static str, TransferRecord)> = Vec::new();
    for (side, gw) in [("ship", &pair.ship), ("shore", &pair.shore)] {
        all.extend(gw.hf().transfers().into_iter().map(|r| (side, r)));
    }
    all.sort_by(|a, b| a.1.end.total_cmp(&b.1.end));
    all
}

fn shown_count(pair: &Pair) -> usize {
    all_records(pair).len()
}

/// Prints the sessions not shown yet (from the sender's side); returns how many exist.
fn print_new(pair: &Pair, shown: usize, scale: f64) -> usize {
    let all = all_records(pair);
    for (side, r) in all.iter().skip(shown) {
        if r.direction == Direction::Out {
            outln!(
                "  {side} -> {}: {} message(s), {} accepted, {} B of SMTP as {} B on the air ({:.0}%), replies {} B, {:.1} s of radio time, {} [{}]",
                r.peer,
                r.messages,
                r.accepted,
                r.plain_bytes,
                r.wire_bytes,
                if r.plain_bytes > 0 {
                    r.wire_bytes as f64 * 100.0 / r.plain_bytes as f64
                } else {
                    100.0
                },
                r.reply_wire_bytes,
                r.elapsed() * scale,
                r.effective_bps().map_or_else(
                    || "nothing delivered".to_owned(),
                    |bps| format!("{:.0} bit/s effective", bps / scale)
                ),
                r.result
            );
        }
    }
    all.len()
}

fn report(pair: &Pair, radio_seconds: f64) {
    let c = pair.subnet.counters();
    outln!();
    outln!("on the air (the emulated channel's own counters):");
    outln!(
        "  {} transmissions, {} turnarounds, {} bytes of D_PDUs, {} D_PDUs ({} repeated by the ARQ), {} collisions",
        c.transmissions,
        c.turnarounds,
        c.bytes_on_air,
        c.dpdus_sent,
        c.retransmissions,
        c.collisions
    );
    let out: Vec<_> = all_records(pair)
        .into_iter()
        .filter(|(_, r)| r.direction == Direction::Out)
        .collect();
    let plain: u64 = out.iter().map(|(_, r)| r.plain_bytes).sum();
    let wire: u64 = out
        .iter()
        .map(|(_, r)| r.wire_bytes + r.reply_wire_bytes)
        .sum();
    outln!(
        "  {} HMTP sessions: {} bytes of SMTP carried in {} bytes of U_PDUs both ways",
        out.len(),
        plain,
        wire
    );
    if radio_seconds.is_finite() {
        outln!("  all mail delivered after {radio_seconds:.1} s of radio time");
    }
    outln!(
        "delivered mail: {} (ship), {} (shore)",
        pair.ship_maildir.join("new").display(),
        pair.shore_maildir.join("new").display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_is_corpus_mail_with_ids_of_its_own() {
        let a = sample("a@ship.example", "b@shore.example", 5, "ship");
        let b = sample("b@shore.example", "a@ship.example", 5, "shore");
        assert_eq!(a.len(), 5);
        let mut ids = std::collections::HashSet::new();
        for m in a.iter().chain(&b) {
            assert!(m.body.len() <= SAMPLE_MAX + 64, "{}", m.body.len());
            assert!(m.body.is_ascii(), "7-bit, as sent without 8BITMIME");
            let text = String::from_utf8_lossy(&m.body);
            let head = text.split("\r\n\r\n").next().unwrap_or_default();
            assert_eq!(head.matches("\r\nMessage-ID:").count(), 1, "{text}");
            assert_eq!(
                head.matches("\r\nFrom:").count() + usize::from(head.starts_with("From:")),
                1,
                "{head}"
            );
            let id = text
                .lines()
                .find(|l| l.starts_with("Message-ID:"))
                .map(str::to_owned);
            assert!(ids.insert(id), "ids are unique");
            // Real headers, not a log: a Received chain or MIME somewhere in the batch.
            assert!(text.contains("\r\n\r\n"));
        }
        assert!(
            a.iter()
                .chain(&b)
                .any(|m| String::from_utf8_lossy(&m.body).contains("MIME-Version")),
            "some MIME in the sample"
        );
    }
}
