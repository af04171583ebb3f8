//! A ship and a shore gateway joined by the bundled emulator, in one process: what
//! `skywave demo` runs, and what the over-the-air tests drive in virtual time.
//!
//! [`Pair::start`] writes a complete configuration for each side under one directory
//! (`ship/skywave.toml`, `ship/routes.toml`, `shore/...`: ordinary files an administrator can
//! read and reuse), starts a two-node [`Subnet`] (the HF channel, the modems and the two
//! STANAG 5066 nodes), and starts both gateways with [`daemon::start`], each reaching its node's
//! SIS server in-process. Everything else is the production code: LAN listeners on real
//! sockets, spools, routing tables, link schedulers, Maildir delivery.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use skywave_emu::channel::{ChannelConfig, Impairment, ScheduledImpairment};
use skywave_emu::modem::{DataRate, Interleaver, ModemConfig};
use skywave_emu::net::{Subnet, SubnetConfig};
use skywave_sis::NodeAddress;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::futures::OwnedNotified;
use tokio::sync::{Notify, watch};

use crate::config;
use crate::daemon::{self, DaemonError, Gateway};
use crate::hf::sis::{SisConnect, Transport};

/// The ship's STANAG 5066 address.
pub const SHIP_NODE: &str = "0.0.2.1";
/// The shore's STANAG 5066 address.
pub const SHORE_NODE: &str = "0.0.1.1";

/// How to run the pair.
#[derive(Debug, Clone)]
pub struct PairOptions {
    /// Directory for both sides' configuration and state.
    pub dir: PathBuf,
    /// The ship's LAN SMTP address (port 0: any free port).
    pub ship_smtp: SocketAddr,
    /// The shore's LAN SMTP address.
    pub shore_smtp: SocketAddr,
    /// Modem data rate, bit/s.
    pub rate_bps: u32,
    /// Interleaver: zero, short or long.
    pub interleaver: String,
    /// `awgn` or a profile of `channel-profiles.csv` (good, moderate, poor, ...).
    pub channel: String,
    /// SNR, dB in 3 kHz.
    pub snr_db: f64,
    /// How long a station takes after a received transmission before it can key up (radio
    /// switching, 5066 processing): [`DEFAULT_TURNAROUND`], or a deployed system's seconds.
    pub turnaround: Duration,
    /// The emulated 5066 nodes make their link with CAS-1 before the first ARQ data, as a
    /// server without ALE does ([`skywave_emu::net::SubnetConfig::cas1`]); false: the link is
    /// taken as made.
    pub cas1: bool,
    /// With `cas1`: the nodes break a link idle this long
    /// ([`skywave_emu::net::SubnetConfig::link_idle`]); `None`: a made link stays.
    pub link_idle: Option<Duration>,
    /// How long the emulated 5066 servers wait for a node delivery confirmation before they
    /// tell the gateway "destination node not responding", the U_PDU going on regardless
    /// ([`skywave_emu::net::SubnetConfig::confirm_wait`]); `None`: as long as it lives.
    pub confirm_wait: Option<Duration>,
    /// How many unanswered retries of ARQ data the emulated nodes make before they declare the
    /// link lost ([`skywave_emu::net::SubnetConfig::link_retries`]); `None`: the emulator's
    /// default.
    pub link_retries: Option<u8>,
    /// Seed of the emulator's random draws.
    pub seed: u64,
    /// Simulated seconds per second of tokio time (1 in virtual-time tests).
    pub time_scale: f64,
    /// `hmtp` or `cftp` over the emulated STANAG 5066 link, or `smtp` straight over TCP
    /// between the two LAN ports (the JNOS-style path; the emulator then carries nothing).
    pub protocol: String,
    /// Compression towards the other skywave gateway: none, lzw9..lzw16, deflate.
    pub compression: String,
    /// The emulated channel has no signal during these (start, length) intervals.
    pub outages: Vec<(Duration, Duration)>,
    /// First retry delay of both spools, seconds.
    pub min_backoff: u64,
    /// Byte budget of one HMTP batch.
    pub batch_bytes: u64,
    /// Each side's routing table says the other is a skywave gateway (`skywave = true`: CFTP
    /// files in flight, compression); false makes each treat the other as a standard peer.
    pub skywave_peer: bool,
    /// Each side's routing table states that the other honours the cut marker (`xcut = true`),
    /// before any session has shown it; false: learnt from the first EHLO reply.
    pub xcut: bool,
    /// Both gateways' `[hf] resume` (`XRESUME`): a session cut short by a lost link goes on
    /// from where the peer's node had it; false: it goes again whole.
    pub resume: bool,
    /// Both gateways' `[hf] reply_timeout` (whole seconds); `None`: the configuration's default.
    pub reply_timeout: Option<Duration>,
    /// Both gateways' `[hf] delivery_timeout` (whole seconds); `None`: the configuration's
    /// default.
    pub delivery_timeout: Option<Duration>,
    /// Lines added to the ship's `[[peer]]` entry for the shore (a `schedule`, say).
    pub ship_peer_extra: String,
    /// Lines added to the shore's `[[peer]]` entry for the ship.
    pub shore_peer_extra: String,
}

impl PairOptions {
    /// The demo's defaults: 1200 bit/s, short interleaver, ITU-R Poor at 15 dB, HMTP with
    /// deflate, LAN ports 2525 (ship) and 2526 (shore), real time.
    pub fn new(dir: PathBuf) -> Self {
        PairOptions {
            dir,
            ship_smtp: SocketAddr::from(([127, 0, 0, 1], 2525)),
            shore_smtp: SocketAddr::from(([127, 0, 0, 1], 2526)),
            rate_bps: 1200,
            interleaver: "short".into(),
            channel: "poor".into(),
            snr_db: 15.0,
            turnaround: DEFAULT_TURNAROUND,
            cas1: false,
            link_idle: None,
            confirm_wait: None,
            link_retries: None,
            seed: 1,
            time_scale: 1.0,
            protocol: "hmtp".into(),
            compression: "deflate".into(),
            outages: Vec::new(),
            min_backoff: 30,
            batch_bytes: 64 * 1024,
            skywave_peer: true,
            xcut: false,
            resume: true,
            reply_timeout: None,
            delivery_timeout: None,
            ship_peer_extra: String::new(),
            shore_peer_extra: String::new(),
        }
    }
}

/// Why the pair could not start.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    /// A setting is not usable.
    #[error("{0}")]
    Setting(String),
    /// The emulator refused its configuration.
    #[error("emulator: {0}")]
    Emulator(String),
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A generated configuration did not load (a bug, or a bad compression name).
    #[error("configuration: {0}")]
    Config(#[from] config::ConfigError),
    /// A gateway did not start.
    #[error("{side} gateway: {source}")]
    Gateway {
        /// `ship` or `shore`.
        side: &'static str,
        /// Why.
        source: DaemonError,
    },
}

/// The running pair.
#[derive(Debug)]
pub struct Pair {
    /// The emulated subnetwork (node 0 the ship, node 1 the shore).
    pub subnet: Subnet,
    /// The ship's gateway.
    pub ship: Gateway,
    /// The shore's gateway.
    pub shore: Gateway,
    /// Where the ship delivers its LAN mail.
    pub ship_maildir: PathBuf,
    /// Where the shore delivers its LAN mail.
    pub shore_maildir: PathBuf,
    /// The ship's configuration file.
    pub ship_config: PathBuf,
    /// The shore's configuration file.
    pub shore_config: PathBuf,
    /// Set to stop the in-process SIS connections (so a restarted server can be simulated).
    sis_up: watch::Sender<bool>,
    /// Notified to cut every in-process SIS connection.
    sis_cut: Arc<Notify>,
}

impl Pair {
    /// Writes the configurations and starts the emulator and both gateways.
    pub async fn start(opts: &PairOptions) -> Result<Pair, PairError> {
        let (modem, mut channel) =
            modem_and_channel(opts.rate_bps, &opts.interleaver, &opts.channel, opts.snr_db)?;
        let modem = with_turnaround(modem, opts.turnaround)?;
        for (start, length) in &opts.outages {
            channel.impairments.push(ScheduledImpairment {
                start: *start,
                length: *length,
                impairment: Impairment::Outage,
            });
        }
        let node = |s: &str| {
            s.parse::<NodeAddress>()
                .map_err(|e| PairError::Setting(e.to_string()))
        };
        let mut sc = SubnetConfig::new(vec![node(SHIP_NODE)?, node(SHORE_NODE)?], modem, channel);
        sc.seed = opts.seed;
        sc.time_scale = opts.time_scale;
        sc.cas1 = opts.cas1;
        sc.link_idle = opts.link_idle;
        sc.confirm_wait = opts.confirm_wait;
        if let Some(r) = opts.link_retries {
            sc.link_retries = Some(r);
        }
        let subnet = Subnet::start(sc).map_err(|e| PairError::Emulator(e.to_string()))?;

        let ship_config = write_side(opts, Side::Ship)?;
        let shore_config = write_side(opts, Side::Shore)?;
        let (sis_up, _) = watch::channel(true);
        let sis_cut = Arc::new(Notify::new());
        let ship_cfg = config::load(&ship_config)?;
        let shore_cfg = config::load(&shore_config)?;
        let ship_maildir = maildir_of(&ship_cfg);
        let shore_maildir = maildir_of(&shore_cfg);
        let shore = start_side(&subnet, shore_cfg, Side::Shore, &sis_up, &sis_cut).await?;
        let ship = start_side(&subnet, ship_cfg, Side::Ship, &sis_up, &sis_cut).await?;
        Ok(Pair {
            subnet,
            ship,
            shore,
            ship_maildir,
            shore_maildir,
            ship_config,
            shore_config,
            sis_up,
            sis_cut,
        })
    }

    /// Stops the ship's gateway (a crash, as far as the protocols can tell: what it had in
    /// memory is gone, what it had on disk stays), waits `down` and starts it again from its
    /// configuration and state.
    pub async fn restart_ship(self, down: Duration) -> Result<Pair, PairError> {
        self.ship.stop().await;
        tokio::time::sleep(down).await;
        let cfg = config::load(&self.ship_config)?;
        let ship = start_side(&self.subnet, cfg, Side::Ship, &self.sis_up, &self.sis_cut).await?;
        Ok(Pair { ship, ..self })
    }

    /// [`Pair::restart_ship`] for the shore: stopped, `down` later started again from its
    /// configuration file (which a test may have changed) and state.
    pub async fn restart_shore(self, down: Duration) -> Result<Pair, PairError> {
        self.shore.stop().await;
        tokio::time::sleep(down).await;
        let cfg = config::load(&self.shore_config)?;
        let shore = start_side(&self.subnet, cfg, Side::Shore, &self.sis_up, &self.sis_cut).await?;
        Ok(Pair { shore, ..self })
    }

    /// Stops both gateways (the emulator stops when the pair is dropped).
    pub async fn stop(self) {
        self.ship.stop().await;
        self.shore.stop().await;
    }

    /// While `false`, new in-process SIS connections are refused (the 5066 server is "down");
    /// the gateways' SIS clients retry with backoff.
    pub fn set_sis_available(&self, up: bool) {
        self.sis_up.send_replace(up);
    }

    /// Cuts every SIS connection at once, as a restarting STANAG 5066 server does.
    pub fn cut_sis_connections(&self) {
        self.sis_cut.notify_waiters();
    }
}

/// The demos' default turnaround: the gateway's (`[hf] turnaround_ms`), which is the
/// emulator's too.
pub use crate::config::DEFAULT_TURNAROUND;
/// The longest turnaround the emulated modems take.
pub use skywave_emu::modem::MAX_TURNAROUND;

/// The modem with the configured turnaround (refused beyond the longest 5066 transmission).
pub(crate) fn with_turnaround(modem: ModemConfig, t: Duration) -> Result<ModemConfig, PairError> {
    modem
        .with_turnaround(t)
        .map_err(|e| PairError::Setting(e.to_string()))
}

/// The emulator's modem and channel for these settings (`channel`: `awgn` or an ITU-R profile).
pub(crate) fn modem_and_channel(
    rate_bps: u32,
    interleaver: &str,
    channel: &str,
    snr_db: f64,
) -> Result<(ModemConfig, ChannelConfig), PairError> {
    let rate = DataRate::from_bps(rate_bps).ok_or_else(|| {
            PairError::Setting(format!(
                "{} bit/s is not a MIL-STD-188-110A/B data rate (75, 150, 300, 600, 1200, 2400, 3200, 4800, 6400, 8000, 9600)",
                rate_bps
            ))
        })?;
    let interleaver = match interleaver {
        "zero" => Interleaver::Zero,
        "short" => Interleaver::Short,
        "long" => Interleaver::Long,
        other => {
            return Err(PairError::Setting(format!(
                "interleaver {other:?}: expected zero, short or long"
            )));
        }
    };
    let modem =
        ModemConfig::new(rate, interleaver).map_err(|e| PairError::Emulator(e.to_string()))?;
    let channel = if channel == "awgn" {
        ChannelConfig::awgn(snr_db)
    } else {
        ChannelConfig::watterson(snr_db, channel).map_err(|e| PairError::Emulator(e.to_string()))?
    };
    Ok((modem, channel))
}

pub(crate) fn maildir_of(c: &config::Config) -> PathBuf {
    match &c.delivery {
        config::Delivery::Maildir { dir, .. } => dir.clone(),
        config::Delivery::Smarthost { .. } => c.state_dir.join("maildir"),
    }
}

/// Connections to node `node` of `subnet`, refused while `up` is false and cut when `cut` is
/// notified.
pub(crate) fn in_process(
    subnet: &Subnet,
    node: usize,
    up: watch::Receiver<bool>,
    cut: Arc<Notify>,
) -> SisConnect {
    let subnet = subnet.clone();
    SisConnect::new(move |_server: &str| {
        let available = *up.borrow();
        let stream = available.then(|| Cuttable {
            inner: subnet.connect_in_process(node),
            cut: Box::pin(Arc::clone(&cut).notified_owned()),
        });
        Box::pin(async move {
            match stream {
                Some(s) => Ok(Box::new(s) as Transport),
                None => Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "the emulated STANAG 5066 server is down",
                )),
            }
        })
    })
}

/// A stream that fails for good once its `cut` is notified (a server that went away).
struct Cuttable<T> {
    inner: T,
    cut: Pin<Box<OwnedNotified>>,
}

impl<T> Cuttable<T> {
    fn check(&mut self, cx: &mut Context<'_>) -> Result<(), std::io::Error> {
        match self.cut.as_mut().poll(cx) {
            Poll::Ready(()) => Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "the emulated STANAG 5066 server restarted",
            )),
            Poll::Pending => Ok(()),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Cuttable<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Cuttable<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Ship,
    Shore,
}

/// Starts one side's gateway on its node of the pair's subnetwork (the ship's is node 0, the
/// shore's node 1), over in-process SIS connections.
async fn start_side(
    subnet: &Subnet,
    cfg: config::Config,
    side: Side,
    sis_up: &watch::Sender<bool>,
    sis_cut: &Arc<Notify>,
) -> Result<Gateway, PairError> {
    let (node, name) = match side {
        Side::Ship => (0, "ship"),
        Side::Shore => (1, "shore"),
    };
    daemon::start(
        cfg,
        in_process(subnet, node, sis_up.subscribe(), Arc::clone(sis_cut)),
    )
    .await
    .map_err(|source| PairError::Gateway { side: name, source })
}

/// Writes one side's `skywave.toml` and `routes.toml`; returns the former's path.
fn write_side(opts: &PairOptions, side: Side) -> Result<PathBuf, PairError> {
    let (name, other, smtp, other_smtp, node, other_node, domain, other_domain) = match side {
        Side::Ship => (
            "ship",
            "shore",
            opts.ship_smtp,
            opts.shore_smtp,
            SHIP_NODE,
            SHORE_NODE,
            "ship.example",
            "shore.example",
        ),
        Side::Shore => (
            "shore",
            "ship",
            opts.shore_smtp,
            opts.ship_smtp,
            SHORE_NODE,
            SHIP_NODE,
            "shore.example",
            "ship.example",
        ),
    };
    let dir = opts.dir.join(name);
    std::fs::create_dir_all(&dir).map_err(|source| PairError::Io {
        path: dir.display().to_string(),
        source,
    })?;
    let gateway = gateway_toml(
        &format!("The {name} gateway of `skywave demo`"),
        domain,
        smtp,
        node,
        opts.min_backoff,
        HfToml {
            rate_bps: opts.rate_bps,
            turnaround: opts.turnaround,
            emcon: false,
            resume: opts.resume,
            reply_timeout: opts.reply_timeout,
            delivery_timeout: opts.delivery_timeout,
        },
    );
    let routes = format!(
        "# Routing table of the {name} gateway of `skywave demo`.\n\
         [lan]\n\
         domains = [\"{domain}\", \"*.{domain}\"]\n\
         relay_networks = [\"127.0.0.0/8\", \"::1/128\"]\n\n\
         [[peer]]\n\
         name = \"{other}\"\n\
         {reach}\n\
         protocol = \"{protocol}\"\n\
         skywave = {skywave}\n\
         {xcut}compression = \"{compression}\"\n\
         batch_bytes = {batch_bytes}\n\
         {extra}\n\
         [[route]]\n\
         match = \"{other_domain}\"\n\
         to = \"{other}\"\n\n\
         [[route]]\n\
         match = \"*.{other_domain}\"\n\
         to = \"{other}\"\n",
        protocol = opts.protocol,
        compression = opts.compression,
        skywave = opts.skywave_peer,
        xcut = if opts.xcut { "xcut = true\n" } else { "" },
        batch_bytes = opts.batch_bytes,
        extra = match side {
            Side::Ship => opts.ship_peer_extra.as_str(),
            Side::Shore => opts.shore_peer_extra.as_str(),
        },
        reach = if opts.protocol == "smtp" {
            format!("bearer = \"tcp\"\ntcp_address = \"{other_smtp}\"")
        } else {
            format!("node = \"{other_node}\"")
        },
    );
    let cfg = dir.join("skywave.toml");
    write(&cfg, &gateway)?;
    write(&dir.join("routes.toml"), &routes)?;
    Ok(cfg)
}

/// The `[hf]` settings a demo gateway's configuration carries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HfToml {
    /// `assumed_bps`: the emulated modem's rate (clamped to the config's range).
    pub(crate) rate_bps: u32,
    /// `turnaround_ms`: the emulated stations' turnaround.
    pub(crate) turnaround: Duration,
    /// `emcon`.
    pub(crate) emcon: bool,
    /// `resume` (written only when false, the default being true).
    pub(crate) resume: bool,
    /// `reply_timeout`, whole seconds, when not the default.
    pub(crate) reply_timeout: Option<Duration>,
    /// `delivery_timeout`, whole seconds, when not the default.
    pub(crate) delivery_timeout: Option<Duration>,
}

/// A gateway's `skywave.toml` as the demos write it: state beside the file, Maildir delivery,
/// no metrics, the spool's retry delays, this node reached at its (emulated) SIS server.
pub(crate) fn gateway_toml(
    title: &str,
    domain: &str,
    smtp: SocketAddr,
    node: &str,
    min_backoff: u64,
    hf: HfToml,
) -> String {
    format!(
        "# {title} (written by the demo; an ordinary config).\n\
         hostname = \"gw.{domain}\"\n\
         state_dir = \"state\"\n\
         routes = \"routes.toml\"\n\n\
         [smtp]\n\
         listen = \"{smtp}\"\n\n\
         [delivery]\n\
         maildir = \"Maildir\"\n\n\
         [metrics]\n\
         enabled = false\n\n\
         [spool]\n\
         min_backoff = {min_backoff}\n\
         max_backoff = {max_backoff}\n\n\
         [hf]\n\
         node = \"{node}\"\n\
         # The demo reaches its emulated node in-process; with skywave-emu this is its port.\n\
         sis_server = \"127.0.0.1:5066\"\n\
         assumed_bps = {bps}\n\
         # The emulated radios' turnaround: P_MUL spaces the ships' acknowledgements by it.\n\
         turnaround_ms = {turnaround_ms}\n\
         emcon = {emcon}\n{resume}{reply_timeout}{delivery_timeout}",
        max_backoff = (min_backoff * 8).max(60),
        bps = hf.rate_bps.clamp(50, 64_000),
        turnaround_ms = hf.turnaround.as_millis(),
        emcon = hf.emcon,
        resume = if hf.resume { "" } else { "resume = false\n" },
        reply_timeout = hf
            .reply_timeout
            .map(|t| format!("reply_timeout = {}\n", t.as_secs()))
            .unwrap_or_default(),
        delivery_timeout = hf
            .delivery_timeout
            .map(|t| format!("delivery_timeout = {}\n", t.as_secs()))
            .unwrap_or_default(),
    )
}

pub(crate) fn write(path: &Path, text: &str) -> Result<(), PairError> {
    std::fs::write(path, text).map_err(|source| PairError::Io {
        path: path.display().to_string(),
        source,
    })
}
