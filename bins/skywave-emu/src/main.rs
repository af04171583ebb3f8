//! `skywave-emu`: the standalone HF emulator. N simulated STANAG 5066 nodes share one
//! half-duplex HF channel (crates/emu), and each serves SIS (Annex A) on its own TCP port, so
//! that any 5066 client (skywave, or a vendor's) can use them as if they were real servers.
//!
//! Time: the simulation clock runs `--time-scale` K times faster than the wall clock: every
//! wait of the simulated radios, modems and ARQ of d simulated seconds is a real sleep of d/K.
//! SIS-level timers of the clients (keep-alives, connect timeouts) are not scaled; U_PDU TTLs
//! are counted in simulated time.

// `outln!` and `out!`: a closed pipe (`skywave-emu ... | head`) ends the program
// quietly instead of a panic.
#[macro_use]
extern crate skywave_cliout;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use skywave_emu::channel::{
    ChannelConfig, ImpairmentKind, ScheduledImpairment, parse_aimed, parse_changes, parse_seconds,
};
use skywave_emu::modem::{DataRate, Interleaver, ModemConfig};
use skywave_emu::net::{Drc, Subnet, SubnetConfig, matched_rate};
use skywave_sis::NodeAddress;
use tokio::net::TcpListener;

/// Interleaver choice on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum InterleaverArg {
    /// Short interleaver (0.6 s blocks for 110A).
    Short,
    /// Long interleaver (4.8 s blocks for 110A).
    Long,
}

/// Standalone HF channel/modem/STANAG 5066 emulator.
#[derive(Debug, Parser)]
#[command(name = "skywave-emu", version, about)]
struct Cli {
    /// Number of nodes.
    #[arg(long, default_value_t = 2)]
    nodes: usize,
    /// Node addresses, comma-separated (default 0.0.0.1, 0.0.0.2, ...).
    #[arg(long, value_delimiter = ',')]
    addresses: Vec<NodeAddress>,
    /// SIS address of the first node; node i listens on PORT + i (port 0: any free port each).
    #[arg(long, default_value = "127.0.0.1:5066")]
    listen: SocketAddr,
    /// Modem data rate, bit/s (75 to 9600).
    #[arg(long, default_value_t = 1200)]
    rate: u32,
    /// Interleaver.
    #[arg(long, value_enum, default_value = "short")]
    interleaver: InterleaverArg,
    /// Channel: `awgn` or a profile name from channel-profiles.csv (e.g. "ITU-R Poor").
    #[arg(long, default_value = "awgn")]
    channel: String,
    /// Mean SNR in 3 kHz, dB.
    #[arg(long, default_value_t = 20.0)]
    snr: f64,
    /// Seed of every random draw.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run the simulation K times faster than real time.
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Write every D_PDU put on the air to this pcap file (link type 237, for Wireshark's
    /// `s5066dts` dissector), stamped with the start's wall-clock time plus simulated time.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Print one line per transmission (time, node, rate, bytes, EOT and its D_PDUs: types,
    /// FSNs, `r` retransmitted, `x` lost) to FILE, or to stdout when no file is given.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    trace: Option<Option<PathBuf>>,
    /// Write the SIS traffic of every client connection to this pcap file (TCP port 5066, for
    /// Wireshark's `s5066sis` dissector).
    #[arg(long, value_name = "FILE")]
    sis_pcap: Option<PathBuf>,
    /// Server-side duplicate-datagram filter on every node: drop a U_PDU (without delivery
    /// confirmation) identical to one the node still holds unacknowledged for the same
    /// destination and SAP. Counted in the per-node counters printed at exit.
    #[arg(long)]
    dup_filter: bool,
    /// Data-rate change: `fixed` (stay at --rate), `adaptive` (step down on errors, up on
    /// clean transmissions, with DRC_REQUEST/RESPONSE EOWs), `matched` (start and stay at the
    /// rate the channel's SNR supports).
    #[arg(long, value_enum, default_value = "fixed")]
    drc: DrcArg,
    /// D_PDU segment size, bytes of C_PDU per DATA D_PDU (1 to 1023): smaller segments lose
    /// less to one bad interleaver block and cost more headers.
    #[arg(long, default_value_t = 1023)]
    segment_size: usize,
    /// ARQ window, frames (1 to 128).
    #[arg(long, default_value_t = 128)]
    window: u8,
    /// Longest transmission, seconds (at most 127.5; the EOT counts down in 0.5 s steps).
    #[arg(long, default_value_t = 127.5)]
    max_transmission: f64,
    /// Turnaround, seconds: how long a node takes, after the end of a transmission it
    /// received (decoded), before it can key up (radio switching, 5066 processing; 0 to 127.5).
    /// 0.15 is the best case; deployed STANAG 5066 systems take "seconds or tens of seconds"
    /// (Isode, "Reducing Turnaround Times in STANAG 5066").
    #[arg(long, default_value_t = 0.15)]
    turnaround: f64,
    /// A group address and the nodes that listen on it, `GROUP=ADDR,ADDR,...` (a group address
    /// is written with a first part of 16-31, e.g. `16.0.9.9`); repeatable. Non-ARQ U_PDUs to
    /// the group go once and reach every member.
    #[arg(long = "group", value_name = "GROUP=ADDR,...")]
    groups: Vec<String>,
    /// The SNR at which node ADDR hears every other node, `ADDR=DB` (same channel profile as
    /// --channel); repeatable. A fleet's ships each hear the base through their own conditions.
    #[arg(long = "node-snr", value_name = "ADDR=DB")]
    node_snr: Vec<String>,
    /// Link loss: retries of ARQ data to a peer that answers nothing before a node declares
    /// the link lost, discards the ARQ U_PDUs for it (rejected, "destination node not
    /// responding", to clients that asked for a confirm) and reports it on stderr; `never` to
    /// retry for ever. Default 10, JNOS's TCP retry limit (see
    /// `skywave_emu::node::DEFAULT_LINK_RETRIES`).
    #[arg(long, value_name = "N|never", default_value = "10", value_parser = parse_link_retries)]
    link_retries: LinkRetries,
    /// Annex B CAS-1 linking: a node makes a physical link to a peer (PHYSICAL LINK REQUEST,
    /// ACCEPTED, in EXPEDITED NON-ARQ DATA D_PDUs) before its first ARQ data to it, as a 5066
    /// server does unless ALE or an operator has made the link. Default: every link is taken
    /// as made.
    #[arg(long)]
    cas1: bool,
    /// With --cas1: a node breaks a link that has carried nothing either way for this many
    /// seconds (PHYSICAL LINK BREAK "no more data", BREAK CONFIRM), ending the soft-link
    /// session as Annex A lets a server do once all its data is sent; the next data makes
    /// the link again. Default: a made link stays until it is declared lost.
    #[arg(long, value_name = "SECS", requires = "cas1")]
    link_idle: Option<f64>,
    /// With --cas1 and --link-idle: the most physical links a node holds at once. A request
    /// beyond it is answered PHYSICAL LINK REJECTED and asked again later; a node at its
    /// maximum breaks an idle link for a peer that waits. Default: no limit.
    #[arg(long, value_name = "N", requires = "link_idle")]
    max_links: Option<usize>,
    /// With --cas1: a node that was called aborts a new link on which no data came this many
    /// seconds after its ACCEPTED (at least one response timeout); a caller that sends data
    /// later is warned (WARNING "not connected") and makes the link again. Default: never.
    #[arg(long, value_name = "SECS", requires = "cas1")]
    link_first_data: Option<f64>,
    /// Hard links (S_HARD_LINK_ESTABLISH from an SIS client): how long a node waits for the
    /// peer's answer to its request, for its client's answer to an indication, and for the
    /// confirm of a TERMINATE, before it gives up ("remote node not responding").
    #[arg(long, value_name = "SECS", default_value_t = 600.0)]
    hard_link_timeout: f64,
    /// The subnetwork's default maximum TTL, seconds (Annex A): what a U_PDU submitted with
    /// TTL 0 gets; one still in the subnetwork that long after its submission is discarded
    /// and its client told (S_UNIDATA_REQUEST_REJECTED, TTL expired). Default: none, such
    /// U_PDUs never expire.
    #[arg(long, value_name = "SECS")]
    default_ttl: Option<f64>,
    /// How long a server waits for the node delivery confirmation of an ARQ U_PDU before it
    /// tells the client S_UNIDATA_REQUEST_REJECTED, "destination node not responding"
    /// (Annex A: "a configurable time"). The U_PDU itself goes on and may still be
    /// delivered. Default: none, the client waits as long as the U_PDU lives.
    #[arg(long, value_name = "SECS")]
    confirm_wait: Option<f64>,
    /// Crash node ADDR at simulated second SECS and bring it back DOWN seconds later (at once
    /// without `+DOWN`), `ADDR@SECS[+DOWN]`, as a 5066 server that went down and restarted:
    /// its SIS clients are disconnected (they must connect and bind again), every U_PDU it
    /// held is lost, while down it hears nothing and refuses SIS connections, and once back it
    /// resets each peer's ARQ machines (FULL RESET CMD) before its first ARQ exchange with it.
    /// Repeatable. Counted in the per-node counters printed at exit.
    #[arg(long = "restart", value_name = "ADDR@SECS[+DOWN]")]
    restarts: Vec<String>,
    /// Slow SNR drift on every path, `SIGMA_DB[/SECS]`: the mean SNR wanders as a Gaussian
    /// process in dB with this standard deviation and correlation time (default 600 s), each
    /// direction between each pair of nodes on its own, as propagation moves over minutes and
    /// hours (F.520's fading is seconds). An assumption to test against, not a measurement.
    #[arg(long, value_name = "SIGMA_DB[/SECS]")]
    drift: Option<String>,
    /// No signal at all from simulated second START for LENGTH seconds, `[ADDR@]START+LENGTH`:
    /// on every path, or with `ADDR@` only on what node ADDR hears (a ship behind a headland,
    /// a receiver blanked by its own transmitter). Transmissions go out and are lost; the ARQ
    /// retries, and links are declared lost as --link-retries says. Repeatable.
    #[arg(long = "outage", value_name = "[ADDR@]START+LENGTH")]
    outages: Vec<String>,
    /// The SNR drops by DB from simulated second START for LENGTH seconds,
    /// `[ADDR@]START+LENGTH:DB` (every path, or what node ADDR hears); whether a block gets
    /// through is still the modem's decision at the lower SNR. Repeatable.
    #[arg(long = "fade", value_name = "[ADDR@]START+LENGTH:DB")]
    fades: Vec<String>,
    /// Every interleaver block that overlaps START..START+LENGTH is lost whatever the SNR,
    /// `[ADDR@]START+LENGTH` (a strong interferer, a lost modem sync). Repeatable.
    #[arg(long = "block-loss", value_name = "[ADDR@]START+LENGTH")]
    block_losses: Vec<String>,
}

/// A scheduled impairment from the command line, and the node whose reception it is limited
/// to (`None`: every path).
#[derive(Debug, Clone, Copy, PartialEq)]
struct NodeImpairment {
    node: Option<usize>,
    scheduled: ScheduledImpairment,
}

/// `--outage`, `--fade` or `--block-loss` (option `what`, of `kind`): `[ADDR@]` before
/// the impairment's own text ([`parse_aimed`]).
fn parse_impairment(
    what: &str,
    kind: ImpairmentKind,
    text: &str,
    nodes: &[NodeAddress],
) -> anyhow::Result<NodeImpairment> {
    let (addr, scheduled) =
        parse_aimed(what, kind, text, "ADDR", false).map_err(anyhow::Error::msg)?;
    let node = addr.map(|a| node_index(what, text, a, nodes)).transpose()?;
    Ok(NodeImpairment { node, scheduled })
}

/// What an impairment does, for the line the emulator prints when it starts.
fn describe(imp: &NodeImpairment, nodes: &[NodeAddress]) -> String {
    match imp.node.and_then(|n| nodes.get(n)) {
        Some(a) => format!("node {a} hears {}", imp.scheduled),
        None => format!("every node hears {}", imp.scheduled),
    }
}

/// `--restart ADDR@SECS[+DOWN]`: the node's index, when it goes down, and for how long.
fn parse_restart(text: &str, nodes: &[NodeAddress]) -> anyhow::Result<(usize, Duration, Duration)> {
    let (addr, when) = text
        .split_once('@')
        .with_context(|| format!("--restart {text}: expected ADDR@SECS[+DOWN]"))?;
    let node = node_index("--restart", text, addr, nodes)?;
    let (at, down) = when.split_once('+').unwrap_or((when, "0"));
    let secs =
        |field: &str| parse_seconds(field).map_err(|e| anyhow::anyhow!("--restart {text}: {e}"));
    Ok((node, secs(at)?, secs(down)?))
}

/// `--link-retries`: a count, or never give up.
#[derive(Debug, Clone, Copy)]
struct LinkRetries(Option<u8>);

fn parse_link_retries(text: &str) -> Result<LinkRetries, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("never") {
        return Ok(LinkRetries(None));
    }
    text.parse::<u8>()
        .map(|n| LinkRetries(Some(n)))
        .map_err(|_| format!("{text:?} is neither a number of retries (0-255) nor `never`"))
}

/// `--group GROUP=ADDR,...`, with the members as node indices.
fn parse_group(text: &str, nodes: &[NodeAddress]) -> anyhow::Result<skywave_emu::net::Group> {
    let (group, members) = text
        .split_once('=')
        .with_context(|| format!("--group {text}: expected GROUP=ADDR,ADDR,..."))?;
    let address: NodeAddress = group
        .trim()
        .parse()
        .with_context(|| format!("--group {text}: {group} is not an address"))?;
    if !address.is_group() {
        bail!(
            "--group {text}: {group} is not a group address (write it with a first part of 16-31, e.g. 16.0.9.9)"
        );
    }
    let members = members
        .split(',')
        .map(|m| node_index("--group", text, m, nodes))
        .collect::<anyhow::Result<Vec<usize>>>()?;
    Ok(skywave_emu::net::Group { address, members })
}

/// The index among `nodes` of the node `addr` names, in option `what`'s value `text`.
fn node_index(what: &str, text: &str, addr: &str, nodes: &[NodeAddress]) -> anyhow::Result<usize> {
    let a: NodeAddress = addr
        .trim()
        .parse()
        .with_context(|| format!("{what} {text}: {addr} is not an address"))?;
    nodes
        .iter()
        .position(|n| *n == a)
        .with_context(|| format!("{what} {text}: {addr} is not one of the nodes"))
}

/// `--node-snr ADDR=DB`: the node's index and the SNR.
fn parse_node_snr(text: &str, nodes: &[NodeAddress]) -> anyhow::Result<(usize, f64)> {
    let (addr, db) = text
        .split_once('=')
        .with_context(|| format!("--node-snr {text}: expected ADDR=DB"))?;
    let node = node_index("--node-snr", text, addr, nodes)?;
    let db: f64 = db
        .trim()
        .parse()
        .ok()
        .filter(|d: &f64| d.is_finite())
        .with_context(|| format!("--node-snr {text}: {db} is not a number of dB"))?;
    Ok((node, db))
}

/// Data-rate change policy on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum DrcArg {
    /// Every link stays at --rate.
    Fixed,
    /// Adaptive DRC starting at --rate.
    Adaptive,
    /// The rate the channel's mean SNR supports (with a 3 dB margin).
    Matched,
}

/// A number of seconds that must be above zero, as `flag` takes it.
fn positive(s: f64, flag: &str) -> anyhow::Result<Duration> {
    if !(s.is_finite() && s > 0.0) {
        bail!("{flag} must be a positive number of seconds");
    }
    Ok(Duration::from_secs_f64(s))
}

/// [`positive`], for an option that may be left out.
fn positive_secs(v: Option<f64>, flag: &str) -> anyhow::Result<Option<Duration>> {
    v.map(|s| positive(s, flag)).transpose()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("skywave-emu: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skywave-emu: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn addresses(cli: &Cli) -> anyhow::Result<Vec<NodeAddress>> {
    if cli.addresses.is_empty() {
        return (1..=cli.nodes)
            .map(|i| {
                let bits = u32::try_from(i).context("too many nodes")?;
                NodeAddress::new(bits).context("too many nodes")
            })
            .collect();
    }
    if cli.addresses.len() != cli.nodes {
        bail!(
            "--nodes {} but {} addresses given in --addresses",
            cli.nodes,
            cli.addresses.len()
        );
    }
    Ok(cli.addresses.clone())
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let addresses = addresses(&cli)?;
    let rate = DataRate::from_bps(cli.rate)
        .with_context(|| format!("--rate {}: not a MIL-STD-188-110 data rate", cli.rate))?;
    let interleaver = match cli.interleaver {
        InterleaverArg::Short => Interleaver::Short,
        InterleaverArg::Long => Interleaver::Long,
    };
    let modem = ModemConfig::new(rate, interleaver)
        .context("--rate/--interleaver")?
        .with_turnaround(
            Duration::try_from_secs_f64(cli.turnaround)
                .with_context(|| format!("--turnaround {}", cli.turnaround))?,
        )
        .context("--turnaround")?;
    let (drift, impairments) = parse_changes(
        cli.drift.as_deref(),
        [&cli.outages, &cli.fades, &cli.block_losses],
        |what, kind, t| parse_impairment(what, kind, t, &addresses).map_err(|e| format!("{e:#}")),
    )
    .map_err(anyhow::Error::msg)?;
    let mut channel = if cli.channel.eq_ignore_ascii_case("awgn") {
        ChannelConfig::awgn(cli.snr)
    } else {
        ChannelConfig::watterson(cli.snr, &cli.channel).context("--channel")?
    };
    channel.drift = drift;
    channel.impairments = impairments
        .iter()
        .filter(|i| i.node.is_none())
        .map(|i| i.scheduled)
        .collect();
    let mut config = SubnetConfig::new(addresses.clone(), modem, channel);
    for g in &cli.groups {
        config.groups.push(parse_group(g, &addresses)?);
    }
    let node_snr = cli
        .node_snr
        .iter()
        .map(|n| parse_node_snr(n, &addresses))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let node_impairments: Vec<_> = impairments
        .iter()
        .filter_map(|i| Some((i.node?, i.scheduled)))
        .collect();
    config.set_receiver_conditions(&node_snr, &node_impairments);
    for imp in &impairments {
        eprintln!("skywave-emu: {}", describe(imp, &addresses));
    }
    config.seed = cli.seed;
    config.time_scale = cli.time_scale;
    config.dup_filter = vec![cli.dup_filter; addresses.len()];
    config.segment_size = cli.segment_size;
    config.window = cli.window;
    config.link_retries = cli.link_retries.0;
    config.cas1 = cli.cas1;
    config.link_idle = match cli.link_idle {
        Some(s) if s.is_finite() && s >= 0.0 => Some(Duration::from_secs_f64(s)),
        Some(_) => bail!("--link-idle must be a number of seconds, 0 or more"),
        None => None,
    };
    if cli.max_links == Some(0) {
        bail!("--max-links must be at least 1");
    }
    config.max_links = cli.max_links;
    config.link_first_data = match cli.link_first_data {
        Some(s) if s.is_finite() && s >= 0.0 => Some(Duration::from_secs_f64(s)),
        Some(_) => bail!("--link-first-data must be a number of seconds, 0 or more"),
        None => None,
    };
    config.hard_link_timeout = positive(cli.hard_link_timeout, "--hard-link-timeout")?;
    config.default_ttl = positive_secs(cli.default_ttl, "--default-ttl")?;
    config.confirm_wait = positive_secs(cli.confirm_wait, "--confirm-wait")?;
    config.max_transmission = positive(cli.max_transmission, "--max-transmission")?;
    config.drc = match cli.drc {
        DrcArg::Fixed => Drc::Fixed,
        DrcArg::Adaptive => Drc::Adaptive,
        DrcArg::Matched => {
            let r = matched_rate(&config.modem, &config.channel);
            eprintln!("skywave-emu: matched data rate {} bit/s", r.bps());
            Drc::Matched
        }
    };
    let mut restarts = cli
        .restarts
        .iter()
        .map(|r| parse_restart(r, &addresses))
        .collect::<anyhow::Result<Vec<_>>>()?;
    restarts.sort_by_key(|&(_, at, _)| at);
    let time_scale = config.time_scale;
    let subnet = Subnet::start(config).context("building the subnetwork")?;
    if !restarts.is_empty() {
        let s = subnet.clone();
        let names = addresses.clone();
        tokio::spawn(async move {
            for (node, at, down) in restarts {
                let wait = at.saturating_sub(s.now()).div_f64(time_scale);
                tokio::time::sleep(wait).await;
                if s.restart_node(node, down) {
                    eprintln!(
                        "skywave-emu: node {} went down at {:.1} s, back {:.1} s later with nothing it held",
                        names.get(node).map(ToString::to_string).unwrap_or_default(),
                        s.now().as_secs_f64(),
                        down.as_secs_f64()
                    );
                }
            }
        });
    }
    if let Some(path) = &cli.pcap {
        let file = std::fs::File::create(path)
            .with_context(|| format!("--pcap: cannot create {}", path.display()))?;
        let epoch = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        subnet
            .capture_pcap(std::io::BufWriter::new(file), epoch)
            .with_context(|| format!("--pcap: cannot write {}", path.display()))?;
    }
    if let Some(target) = &cli.trace {
        let mut out: Box<dyn std::io::Write + Send> = match target {
            Some(path) => Box::new(
                std::fs::File::create(path)
                    .with_context(|| format!("--trace: cannot create {}", path.display()))?,
            ),
            None => Box::new(std::io::stdout()),
        };
        let mut watch = subnet.watch_trace();
        tokio::spawn(async move {
            while let Some(t) = watch.recv().await {
                if writeln!(out, "{t}").and_then(|()| out.flush()).is_err() {
                    eprintln!("skywave-emu: --trace: cannot write; tracing stops");
                    return;
                }
            }
        });
    }
    // A node giving up on a peer is news for whoever runs the emulator by hand.
    let mut links = subnet.watch_links();
    tokio::spawn(async move {
        while let Some(ev) = links.recv().await {
            eprintln!("skywave-emu: {ev}");
        }
    });
    let sis_capture = match &cli.sis_pcap {
        Some(path) => Some(
            skywave_sis::client::PcapCapture::create(path)
                .with_context(|| format!("--sis-pcap: cannot create {}", path.display()))?,
        ),
        None => None,
    };

    let mut servers = Vec::new();
    for (i, address) in addresses.iter().enumerate() {
        let mut at = cli.listen;
        if at.port() != 0 {
            let port = u16::try_from(usize::from(at.port()) + i)
                .ok()
                .context("--listen: port range runs past 65535")?;
            at.set_port(port);
        }
        let listener = TcpListener::bind(at)
            .await
            .with_context(|| format!("cannot listen on {at} for node {address}"))?;
        let local = listener.local_addr().context("listener address")?;
        outln!("node {address} listening on {local}");
        let s = subnet.clone();
        let capture = sis_capture.clone();
        servers.push(tokio::spawn(async move {
            s.serve_tcp_captured(i, listener, capture).await
        }));
    }
    use std::io::Write as _;
    let _ = std::io::stdout().flush();

    let failed = async {
        for s in servers {
            match s.await {
                Ok(Err(e)) => return e.to_string(),
                Err(e) => return e.to_string(),
                Ok(Ok(())) => {}
            }
        }
        "servers ended".to_owned()
    };
    tokio::select! {
        () = shutdown() => {}
        why = failed => eprintln!("skywave-emu: SIS server failed: {why}"),
    }
    outln!("simulated time {:.1} s", subnet.now().as_secs_f64());
    if let Some(path) = &cli.pcap {
        match subnet.finish_capture() {
            Ok(n) => outln!("{n} D_PDUs written to {}", path.display()),
            Err(e) => eprintln!("skywave-emu: --pcap {}: {e}", path.display()),
        }
    }
    if let (Some(c), Some(path)) = (&sis_capture, &cli.sis_pcap)
        && let Err(e) = c.flush()
    {
        eprintln!("skywave-emu: --sis-pcap {}: {e}", path.display());
    }
    out!("{}", subnet.counters());
    let _ = std::io::stdout().flush();
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
