//! The gateway's own configuration file, `skywave.toml` (the routing table is a separate file
//! that this one names).
//!
//! Parsed with serde and `deny_unknown_fields`: a misspelt key is an error, never ignored.
//! Every mistake is reported like a compiler error, with file:line:column, the offending line and
//! what was expected (the same [`Diagnostic`] type the routing table uses). Relative paths are
//! taken relative to the directory of the configuration file, so a config and its routing table
//! can move together. `config/skywave.toml` in the repository documents every setting.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use skywave_route::{Diagnostic, Severity};
use toml::Spanned;

/// Largest configuration file read, in bytes.
pub const MAX_CONFIG_SIZE: u64 = 1 << 20;
/// Default LAN SMTP listen address.
pub const DEFAULT_SMTP_LISTEN: &str = "127.0.0.1:2525";
/// Default metrics listen address.
pub const DEFAULT_METRICS_LISTEN: &str = "127.0.0.1:9466";

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: cannot read the configuration: {source}")]
    Io {
        /// The path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid; every problem found is listed.
    #[error("{}", render(.0))]
    Invalid(Vec<Diagnostic>),
}

fn render(diagnostics: &[Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The loaded, checked configuration with every path made absolute (or relative to the current
/// directory when the config file was given so).
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it was loaded from.
    pub file: PathBuf,
    /// Our host name: SMTP greeting, `Received:` headers, DSNs.
    pub hostname: String,
    /// The state directory; the spool is `state_dir/spool`.
    pub state_dir: PathBuf,
    /// The routing table's path.
    pub routes: PathBuf,
    /// The LAN SMTP listener.
    pub smtp: SmtpConfig,
    /// Delivery of mail for the LAN.
    pub delivery: Delivery,
    /// The Prometheus endpoint; `None` when switched off.
    pub metrics_listen: Option<SocketAddr>,
    /// Spool retry and lifetime settings.
    pub spool: SpoolSettings,
    /// The HF side: our STANAG 5066 node, the SIS server, link timeouts, and P_MUL over IP.
    pub hf: HfConfig,
    /// Set only by in-process simulations (the fleet benchmark and demo), never from a file:
    /// the wall-clock time and the queue-id salt the gateway would otherwise read and draw
    /// at start. Both travel in `Received:` headers, so without this a simulated run's bytes on
    /// the air change from one run to the next.
    pub simulation: Option<Simulation>,
}

/// A simulated gateway's start: what [`Config::simulation`] pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Simulation {
    /// Unix seconds the gateway's clock reads at start.
    pub epoch_unix: u64,
    /// Salt of the spool's queue ids.
    pub id_salt: u32,
}

/// ACP 142's four UDP ports, as its recommended numbers (port roles as ACP 142 assigns them;
/// Wireshark's original P_MUL dissector registers the same four): TPORT 2751 carries
/// Request_PDUs, Reject_PDUs and Release_PDUs between transmitters; RPORT 2752 Announce_PDUs
/// to the receivers; DPORT 2753 the data traffic from transmitters to receivers (Address_PDUs,
/// Data_PDUs, Discard_Message_PDUs); APORT 2754 the traffic from receivers back to the
/// transmitter (Ack_PDUs).
pub const ACP142_PORTS: [u16; 4] = [2751, 2752, 2753, 2754];

/// P_MUL over UDP/IP (`[pmul_ip]`).
#[derive(Debug, Clone)]
pub struct PmulIpConfig {
    /// This gateway's own unicast address on the multicast network: the source of its PDUs,
    /// where acknowledgements and unicast PDUs reach it, and (IPv4: the address itself) its
    /// P_MUL id.
    pub address: std::net::IpAddr,
    /// TPORT, RPORT, DPORT, APORT (see [`ACP142_PORTS`]).
    pub ports: [u16; 4],
    /// Multicast addresses this gateway listens on as a receiver (a ship: its base's groups).
    pub join: Vec<std::net::IpAddr>,
    /// IP TTL / hop limit of multicast datagrams: 1 keeps them on the local network.
    pub ttl: u32,
    /// The interface multicast goes out and is joined on: an IPv4 address for IPv4, an
    /// interface index for IPv6 (`None`: the own address for IPv4, the system's default for IPv6).
    pub interface: Option<PmulInterface>,
    /// Largest P_MUL PDU, bytes: by default one datagram that needs no IP fragmentation on a
    /// 1500-byte MTU path (1472 over IPv4, 1452 over IPv6).
    pub pdu_size: usize,
    /// A pcap file to which every P_MUL datagram sent and received is written (IP and UDP
    /// headers synthesised; Wireshark decodes it with `-d udp.port==2753,p_mul`).
    pub pcap: Option<PathBuf>,
    /// Fraction of received datagrams dropped on purpose (0 to 0.9), for drills and tests of
    /// the repair cycle on a lossy network. 0 in service.
    pub drop_inbound: f64,
}

/// The interface of multicast over IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmulInterface {
    /// IPv4: the interface's address.
    V4(std::net::Ipv4Addr),
    /// IPv6: the interface's index.
    V6(u32),
}

/// The HF side of the gateway (`[hf]`).
#[derive(Debug, Clone)]
pub struct HfConfig {
    /// Our STANAG 5066 node address; required when a peer uses the `sis` bearer (it is
    /// checked against the addresses of incoming U_PDUs).
    pub node: Option<skywave_sis::NodeAddress>,
    /// The STANAG 5066 server for peers that name none, `host:port`.
    pub sis_server: String,
    /// How long to wait for the peer's replies beyond the time the submission needs on the
    /// air at `assumed_bps` (turnarounds, the peer's processing, ARQ repeats); for HMTP, and
    /// at the latest, from when the peer's node confirmed the submission.
    pub reply_timeout: Duration,
    /// How long a session's submission may wait in the 5066 node before the peer's node has
    /// confirmed it (SIS node delivery confirmation). Until then the peer cannot have answered,
    /// so the reply timeout runs from the confirmation, not from the submission: on a
    /// frequency shared with other stations a submission can wait behind their traffic for
    /// minutes, and a session given up meanwhile would go again behind its own first copy,
    /// still in the node. This bounds that wait for a node that neither delivers nor refuses.
    pub delivery_timeout: Duration,
    /// The slowest data rate the link is expected to run at, bit/s: sizes the reply timeout.
    pub assumed_bps: u32,
    /// How long a peer's SMTP server may wait for the rest of a session before it gives the
    /// session up. After the 5066 server refused a U_PDU of ours (the node gave up on the link
    /// and discarded what it held), the peer may hold the first part of that session,
    /// mid-message; a session of ours reaching it before it gives up would be read as the
    /// rest (uncompressed, its text taken into the cut message; compressed, decoded as the
    /// rest of the old stream, which at some cut points yields garbage text rather than an
    /// error) and the cut message accepted with it. So none starts until this long after the
    /// refusal (or after a start with a session of ours unanswered: a crash or a restart in
    /// the middle of one), whatever the compression, unless the peer advertised `XCUT` in its
    /// last EHLO reply, or the routing table states it does (`xcut = true`): then the next
    /// session starts with the cut marker at once (`skywave_hmtp::cut`). `None`: as long as a gateway
    /// configured like this one waits ([`HfConfig::session_wait`]), and at least RFC 5321's
    /// 5 minutes (4.5.3.2.7), what a standard server waits at least.
    pub peer_session_timeout: Option<Duration>,
    /// How long a station on this channel takes, after the end of a transmission it received,
    /// before it can transmit: the radios' switching and the 5066 servers' processing
    /// (`turnaround_ms`). P_MUL spaces the ships' acknowledgements by it, so that they do not
    /// key up together. [`DEFAULT_TURNAROUND`] is the best case; deployed systems take seconds
    /// (Isode: "seconds or tens of seconds"), and a gateway on such a channel must say so.
    pub turnaround: Duration,
    /// CFTP files in flight at once towards a skywave peer (1 towards any other).
    pub cftp_files_in_flight: usize,
    /// Messages in one CFTP file towards a skywave peer (a bundle, compressed as one; 1 towards
    /// any other, and 1 here turns bundles off).
    pub cftp_bundle: usize,
    /// How long an accepted message's identity is remembered to drop retransmitted copies.
    pub dedup_window: Duration,
    /// How long new mail waits for more before a session starts (HMTP) or files go out (CFTP),
    /// so that a burst of messages (a client sending several in one SMTP session) goes in one
    /// batch: a turnaround on HF costs far more than this.
    pub batch_delay: Duration,
    /// Start in EMCON (radio silence): the gateway transmits nothing (no sessions, no P_MUL
    /// acknowledgements), still receives and delivers multicast mail, and sends what it owes
    /// once an operator lifts EMCON (`skywave emcon off`). A restart returns to this setting.
    pub emcon: bool,
    /// Go on with HMTP sessions cut short by a lost link from where the peer's node had them
    /// (skywave's `XRESUME`, `skywave_hmtp::resume`), both ways: this gateway's server
    /// advertises it and keeps what it received of a session cut short until the peer's next
    /// one, and its sessions to a peer that advertised it go on instead of going again whole.
    pub resume: bool,
    /// Largest P_MUL PDU, bytes: each travels as one non-ARQ U_PDU, lost whole if one of its
    /// D_PDUs is lost, so small PDUs cost a little header and save much repair on a poor channel.
    pub pmul_pdu_size: usize,
    /// ACP 142 P_MUL over UDP/IP (the `[pmul_ip]` section); `None` when the gateway has no
    /// IP bearer.
    pub pmul_ip: Option<PmulIpConfig>,
}

/// A number from the file, if it is in `range`; otherwise an error at its place saying what
/// was expected (`key = value is out of range; expected ...`), and `None`.
fn in_range<T>(
    n: Option<&Spanned<i64>>,
    range: std::ops::RangeInclusive<T>,
    key: &str,
    expected: &str,
    err: &mut impl FnMut(Range<usize>, String),
) -> Option<T>
where
    T: TryFrom<i64> + PartialOrd,
{
    let n = n?;
    match T::try_from(*n.get_ref()) {
        Ok(v) if range.contains(&v) => Some(v),
        _ => {
            err(
                n.span(),
                format!(
                    "{key} = {} is out of range; expected {expected}",
                    n.get_ref()
                ),
            );
            None
        }
    }
}

/// Default of `[hf] turnaround_ms`: the best case of current equipment (Isode, "Reducing
/// Turnaround Times in STANAG 5066": 150-200 ms), the bundled emulator's default.
pub const DEFAULT_TURNAROUND: Duration = Duration::from_millis(150);

/// Default of `[hf] pmul_pdu_size`: a few D_PDUs per P_MUL PDU, so that one lost D_PDU costs a
/// repair of half a kilobyte, not of a whole 2 kB U_PDU.
pub const DEFAULT_PMUL_PDU_SIZE: usize = 512;

/// Default of `[hf] delivery_timeout`: an hour, the time a busy shared frequency can take to
/// reach a station's submission (twenty ships' reports at 1200 bit/s take about seven minutes;
/// at 75 bit/s a 2 kB session is three and a half minutes of air, ten of them thirty-six).
pub const DEFAULT_DELIVERY_TIMEOUT: Duration = Duration::from_secs(3600);

/// RFC 5321 4.5.3.2.7: an SMTP server waits at least this long for the next command.
const RFC5321_SERVER_WAIT: Duration = Duration::from_secs(300);

impl HfConfig {
    /// How long this gateway's HMTP server waits for the rest of a peer's session (the next
    /// command, or more of a message) before it gives the session up: `reply_timeout` plus the
    /// air time of two U_PDUs of `mtu` bytes at `assumed_bps` (a U_PDU longer than one
    /// transmission comes in two, with the link's turn between), and never less than RFC 5321's
    /// 5 minutes. At 75 bit/s a 2048-byte U_PDU is 218 s of air, so a LAN's 3 minutes within a
    /// message would end every session of more than one U_PDU.
    pub fn session_wait(&self, mtu: usize) -> Duration {
        let airtime = mtu as f64 * 8.0 / f64::from(self.assumed_bps.max(1));
        (self.reply_timeout + Duration::from_secs_f64(2.0 * airtime)).max(RFC5321_SERVER_WAIT)
    }

    /// How long after a refused U_PDU no session starts to a peer: the configured
    /// `peer_session_timeout`, or the wait of a gateway configured like this one.
    pub fn peer_session_wait(&self, mtu: usize) -> Duration {
        self.peer_session_timeout
            .unwrap_or_else(|| self.session_wait(mtu))
    }
}

impl Default for HfConfig {
    fn default() -> Self {
        HfConfig {
            node: None,
            sis_server: "127.0.0.1:5066".into(),
            reply_timeout: Duration::from_secs(300),
            delivery_timeout: DEFAULT_DELIVERY_TIMEOUT,
            assumed_bps: 300,
            peer_session_timeout: None,
            turnaround: DEFAULT_TURNAROUND,
            cftp_files_in_flight: skywave_hmtp::DEFAULT_SKYWAVE_IN_FLIGHT,
            cftp_bundle: skywave_hmtp::DEFAULT_SKYWAVE_BUNDLE,
            dedup_window: Duration::from_secs(7 * 86_400),
            batch_delay: Duration::from_secs(2),
            emcon: false,
            resume: true,
            pmul_pdu_size: DEFAULT_PMUL_PDU_SIZE,
            pmul_ip: None,
        }
    }
}

impl Config {
    /// The spool directory: `state_dir/spool`.
    pub fn spool_dir(&self) -> PathBuf {
        self.state_dir.join("spool")
    }
}

/// LAN SMTP listener settings.
#[derive(Debug, Clone)]
pub struct SmtpConfig {
    /// Address and port to listen on (port 0: any free port, printed at start).
    pub listen: SocketAddr,
    /// Largest message accepted, bytes.
    pub max_message_size: u64,
    /// Most recipients per message.
    pub max_recipients: usize,
    /// Longest silence between commands.
    pub idle_timeout: Duration,
    /// Longest silence while message text is being received.
    pub data_timeout: Duration,
    /// How long sessions in progress may go on after a shutdown request.
    pub shutdown_grace: Duration,
    /// STARTTLS certificate and key, if configured.
    pub tls: Option<TlsFiles>,
    /// Users for AUTH (after STARTTLS), name to password.
    pub users: BTreeMap<String, String>,
}

/// PEM files for STARTTLS.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// Certificate chain, PEM.
    pub cert: PathBuf,
    /// Private key, PEM.
    pub key: PathBuf,
}

/// Where mail for the LAN goes.
#[derive(Debug, Clone)]
pub enum Delivery {
    /// Into a Maildir (maildir(5)): `tmp/`, `new/`, `cur/` under `dir`.
    Maildir {
        /// The Maildir.
        dir: PathBuf,
        /// Line ends of the files written.
        line_ends: LineEnds,
    },
    /// To the LAN's mail server over SMTP.
    Smarthost {
        /// Host name or address.
        host: String,
        /// Port.
        port: u16,
        /// Time allowed to connect, and for each message's transaction.
        timeout: Duration,
        /// TLS towards it.
        tls: SmarthostTls,
        /// The name and password it wants (`[delivery] auth_file`), sent only over TLS.
        auth: Option<SmarthostAuth>,
    },
}

/// The name and password the smarthost wants (SMTP AUTH, PLAIN or LOGIN).
#[derive(Clone, PartialEq, Eq)]
pub struct SmarthostAuth {
    /// The name.
    pub user: String,
    /// The password.
    pub password: String,
}

impl std::fmt::Debug for SmarthostAuth {
    // The configuration is logged at debug level: never the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmarthostAuth")
            .field("user", &self.user)
            .field("password", &"(hidden)")
            .finish()
    }
}

/// Line ends of the files written into a Maildir (`[delivery] line_ends`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LineEnds {
    /// LF, as local MDAs (Postfix's local, Dovecot's LDA) write them: the default.
    #[default]
    Lf,
    /// CRLF, as the message travelled over SMTP.
    Crlf,
}

/// STARTTLS towards the smarthost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmarthostTls {
    /// Plain SMTP (a trusted LAN hop).
    None,
    /// STARTTLS when the server offers it, plain otherwise; a certificate that does not verify
    /// fails the attempt.
    Opportunistic {
        /// Extra trusted root certificates, PEM (beside the public web roots).
        ca: Option<Vec<u8>>,
    },
    /// STARTTLS or no delivery (the attempt is retried).
    Required {
        /// Extra trusted root certificates, PEM (beside the public web roots).
        ca: Option<Vec<u8>>,
    },
    /// TLS from the first byte (SMTPS, RFC 8314; port 465).
    Implicit {
        /// Extra trusted root certificates, PEM (beside the public web roots).
        ca: Option<Vec<u8>>,
    },
}

/// Spool retry and lifetime settings.
#[derive(Debug, Clone, Copy)]
pub struct SpoolSettings {
    /// First retry delay, seconds.
    pub min_backoff: u64,
    /// Longest retry delay, seconds.
    pub max_backoff: u64,
    /// Longest time a message may stay queued before it bounces, seconds.
    pub max_lifetime: u64,
    /// Attempts per recipient before the message becomes a dead letter.
    pub max_attempts: u32,
    /// Bytes of free space new mail must leave on the spool's file system.
    pub min_free_space: u64,
    /// Seconds a message waits before its sender is told, once, that it is delayed; `None`:
    /// never (`delay_warning = false`).
    pub delay_warning: Option<u64>,
    /// The largest message a failure report returns whole when its sender asked `RET=FULL`.
    pub return_full_limit: u64,
}

// ---- the file as written ------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    hostname: Spanned<String>,
    state_dir: Spanned<String>,
    routes: Spanned<String>,
    #[serde(default)]
    smtp: RawSmtp,
    #[serde(default)]
    delivery: RawDelivery,
    #[serde(default)]
    metrics: RawMetrics,
    #[serde(default)]
    spool: RawSpool,
    #[serde(default)]
    hf: RawHf,
    pmul_ip: Option<Spanned<RawPmulIp>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPmulIp {
    address: Spanned<String>,
    ports: Option<Spanned<Vec<i64>>>,
    #[serde(default)]
    join: Vec<Spanned<String>>,
    ttl: Option<Spanned<i64>>,
    interface: Option<Spanned<String>>,
    pdu_size: Option<Spanned<i64>>,
    pcap: Option<Spanned<String>>,
    drop_inbound: Option<Spanned<f64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHf {
    node: Option<Spanned<String>>,
    sis_server: Option<Spanned<String>>,
    reply_timeout: Option<Secs>,
    delivery_timeout: Option<Secs>,
    peer_session_timeout: Option<Secs>,
    assumed_bps: Option<Spanned<i64>>,
    turnaround_ms: Option<Spanned<i64>>,
    cftp_files_in_flight: Option<Spanned<i64>>,
    cftp_bundle: Option<Spanned<i64>>,
    dedup_window: Option<Secs>,
    batch_delay: Option<Secs>,
    emcon: Option<bool>,
    resume: Option<bool>,
    pmul_pdu_size: Option<Spanned<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSmtp {
    listen: Option<Addr>,
    max_message_size: Option<Spanned<ByteSize>>,
    max_recipients: Option<Spanned<i64>>,
    idle_timeout: Option<Secs>,
    data_timeout: Option<Secs>,
    shutdown_grace: Option<Secs>,
    tls: Option<RawTls>,
    auth: Option<RawAuth>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert: Spanned<String>,
    key: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    #[serde(default)]
    users: BTreeMap<String, Spanned<String>>,
    users_file: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDelivery {
    maildir: Option<Spanned<String>>,
    smarthost: Option<Spanned<String>>,
    timeout: Option<Secs>,
    tls: Option<Spanned<String>>,
    tls_ca: Option<Spanned<String>>,
    auth_file: Option<Spanned<String>>,
    line_ends: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMetrics {
    listen: Option<Addr>,
    enabled: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpool {
    min_backoff: Option<Secs>,
    max_backoff: Option<Secs>,
    max_lifetime: Option<Secs>,
    max_attempts: Option<Spanned<i64>>,
    min_free_space: Option<ByteSize>,
    delay_warning: Option<Spanned<toml::Value>>,
    return_full_limit: Option<ByteSize>,
}

/// A socket address written as "host:port" with a numeric IP.
#[derive(Debug, Clone, Copy)]
struct Addr(SocketAddr);

impl<'de> Deserialize<'de> for Addr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Addr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an address and port such as \"127.0.0.1:2525\" or \"[::1]:2525\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Addr, E> {
                v.parse().map(Addr).map_err(|_| {
                    E::custom(format!(
                        "{v:?} is not an address and port; expected an IP address and a port \
                         such as \"127.0.0.1:2525\" or \"[::1]:2525\""
                    ))
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A size in bytes: an integer, or a string with a unit ("10 MiB", "500 kB").
#[derive(Debug, Clone, Copy)]
struct ByteSize(u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size: a number of bytes or a string such as \"10 MiB\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v).ok().map(ByteSize).ok_or_else(|| {
                    E::custom(format!("size {v} must be a number of bytes, 0 or more"))
                })
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                parse_size(v).map(ByteSize).ok_or_else(|| {
                    E::custom(format!(
                        "{v:?} is not a size; expected a number with an optional unit \
                         B, kB, MB, GB, KiB, MiB or GiB, such as \"10 MiB\""
                    ))
                })
            }
        }
        d.deserialize_any(V)
    }
}

fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '_'))
        .unwrap_or(s.len());
    let number: u64 = s[..split].replace('_', "").parse().ok()?;
    let factor: u64 = match s[split..].trim() {
        "" | "B" => 1,
        "kB" | "KB" => 1000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(factor)
}

/// A duration: whole seconds, or a string with a unit ("90s", "5m", "2h", "5d").
#[derive(Debug, Clone, Copy)]
struct Secs(u64);

impl<'de> Deserialize<'de> for Secs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Secs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a duration: seconds, or a string such as \"90s\", \"5m\", \"2h\", \"5d\"",
                )
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Secs, E> {
                u64::try_from(v)
                    .ok()
                    .filter(|&v| v > 0)
                    .map(Secs)
                    .ok_or_else(|| {
                        E::custom(format!("duration {v} must be a positive number of seconds"))
                    })
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Secs, E> {
                skywave_route::parse_duration(v).map(Secs).ok_or_else(|| {
                    E::custom(format!(
                        "{v:?} is not a duration; expected a number with a unit s, m, h or d, \
                         such as \"90s\" or \"5d\""
                    ))
                })
            }
        }
        d.deserialize_any(V)
    }
}

// ---- loading ------------------------------------------------------------------------------

/// Reads, parses and checks a configuration file.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let name = path.display().to_string();
    let io = |source| ConfigError::Io {
        path: name.clone(),
        source,
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > MAX_CONFIG_SIZE {
        return Err(ConfigError::Invalid(vec![diagnostic(
            &name,
            "",
            0..0,
            format!("file is {len} bytes; a configuration may be at most {MAX_CONFIG_SIZE} bytes"),
        )]));
    }
    let bytes = std::fs::read(path).map_err(io)?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let lossy = String::from_utf8_lossy(e.as_bytes()).into_owned();
        ConfigError::Invalid(vec![diagnostic(
            &name,
            &lossy,
            at..at + 1,
            "the file is not valid UTF-8; TOML files must be UTF-8".to_owned(),
        )])
    })?;
    let base = path.parent().unwrap_or(Path::new("")).to_path_buf();
    parse(&name, &text, &base).map(|mut c| {
        c.file = path.to_path_buf();
        c
    })
}

/// Parses and checks configuration text; `file` names it in messages and relative paths are
/// resolved against `base`. User files named by `users_file` are read here.
pub fn parse(file: &str, text: &str, base: &Path) -> Result<Config, ConfigError> {
    let raw: RawConfig = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        ConfigError::Invalid(vec![diagnostic(file, text, span, toml_message(&e))])
    })?;
    let mut errors = Vec::new();
    let mut err = |span: Range<usize>, message: String| {
        errors.push(diagnostic(file, text, span, message));
    };
    let path = |s: &Spanned<String>| base.join(s.get_ref());

    let hostname = raw.hostname.get_ref().trim().to_owned();
    if hostname.is_empty()
        || hostname.len() > 253
        || !hostname
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    {
        err(
            raw.hostname.span(),
            format!(
                "hostname {:?} is not a host name; expected letters, digits, '-' and '.', \
                 such as \"gw.ship.example\"",
                raw.hostname.get_ref()
            ),
        );
    }
    for (key, value) in [("state_dir", &raw.state_dir), ("routes", &raw.routes)] {
        if value.get_ref().trim().is_empty() {
            err(value.span(), format!("{key} is empty; expected a path"));
        }
    }
    let state_dir = path(&raw.state_dir);

    let mut max_recipients = 100usize;
    if let Some(n) = &raw.smtp.max_recipients {
        match usize::try_from(*n.get_ref()) {
            Ok(v) if (1..=10_000).contains(&v) => max_recipients = v,
            _ => err(
                n.span(),
                format!(
                    "max_recipients = {} is out of range; expected 1 to 10000",
                    n.get_ref()
                ),
            ),
        }
    }
    let tls = raw.smtp.tls.as_ref().map(|t| TlsFiles {
        cert: path(&t.cert),
        key: path(&t.key),
    });
    let mut users = BTreeMap::new();
    if let Some(auth) = &raw.smtp.auth {
        if raw.smtp.tls.is_none() {
            let span = auth
                .users_file
                .as_ref()
                .map(Spanned::span)
                .or_else(|| auth.users.values().next().map(Spanned::span))
                .unwrap_or(0..0);
            err(
                span,
                "[smtp.auth] needs [smtp.tls]: passwords are only accepted over STARTTLS; \
                 add cert and key under [smtp.tls]"
                    .to_owned(),
            );
        }
        for (user, password) in &auth.users {
            if password.get_ref().is_empty() {
                err(
                    password.span(),
                    format!("user {user:?} has an empty password"),
                );
            }
            users.insert(user.clone(), password.get_ref().clone());
        }
        if let Some(users_file) = &auth.users_file {
            match read_users(&path(users_file)) {
                Ok(list) => users.extend(list),
                Err(message) => err(users_file.span(), message),
            }
        }
    }

    let line_ends = match raw
        .delivery
        .line_ends
        .as_ref()
        .map(|l| (l, l.get_ref().as_str()))
    {
        None | Some((_, "lf")) => LineEnds::Lf,
        Some((_, "crlf")) => LineEnds::Crlf,
        Some((l, other)) => {
            err(
                l.span(),
                format!("line_ends = {other:?}; expected \"lf\" or \"crlf\""),
            );
            LineEnds::Lf
        }
    };
    let maildir = |dir: PathBuf| Delivery::Maildir { dir, line_ends };
    let delivery = match (&raw.delivery.maildir, &raw.delivery.smarthost) {
        (Some(m), Some(s)) => {
            err(
                s.span(),
                format!(
                    "[delivery] has both maildir (line {}) and smarthost; expected one of them",
                    line_of(text, m.span().start)
                ),
            );
            maildir(path(m))
        }
        (Some(m), None) => maildir(path(m)),
        (None, Some(s)) => match split_host_port(s.get_ref()) {
            Some((host, port)) => {
                let ca = raw.delivery.tls_ca.as_ref().and_then(|c| {
                    let file = path(c);
                    match read_ca(&file) {
                        Ok(pem) => Some(pem),
                        Err(message) => {
                            err(c.span(), message);
                            None
                        }
                    }
                });
                let tls = match raw.delivery.tls.as_ref().map(|t| (t, t.get_ref().as_str())) {
                    None | Some((_, "none")) => SmarthostTls::None,
                    Some((_, "opportunistic")) => SmarthostTls::Opportunistic { ca },
                    Some((_, "required")) => SmarthostTls::Required { ca },
                    Some((_, "implicit")) => SmarthostTls::Implicit { ca },
                    Some((t, other)) => {
                        err(
                            t.span(),
                            format!(
                                "tls = {other:?}; expected \"none\", \"opportunistic\", \"required\" or \"implicit\""
                            ),
                        );
                        SmarthostTls::None
                    }
                };
                let auth = raw.delivery.auth_file.as_ref().and_then(|a| {
                    if matches!(tls, SmarthostTls::None | SmarthostTls::Opportunistic { .. }) {
                        err(
                            a.span(),
                            "auth_file needs tls = \"required\" or \"implicit\": the password \
                             is only sent over TLS"
                                .to_owned(),
                        );
                    }
                    match read_users(&path(a)) {
                        Ok(users) if users.len() == 1 => users
                            .into_iter()
                            .next()
                            .map(|(user, password)| SmarthostAuth { user, password }),
                        Ok(users) => {
                            err(
                                a.span(),
                                format!(
                                    "auth_file {} has {} \"name:password\" lines; expected one",
                                    path(a).display(),
                                    users.len()
                                ),
                            );
                            None
                        }
                        Err(message) => {
                            err(a.span(), message.replacen("users_file", "auth_file", 1));
                            None
                        }
                    }
                });
                Delivery::Smarthost {
                    host,
                    port,
                    timeout: Duration::from_secs(raw.delivery.timeout.map_or(60, |t| t.0)),
                    tls,
                    auth,
                }
            }
            None => {
                err(
                    s.span(),
                    format!(
                        "smarthost {:?} is not host:port; expected e.g. \"mail.ship.example:25\" \
                         or \"[fd00::25]:25\"",
                        s.get_ref()
                    ),
                );
                maildir(state_dir.join("maildir"))
            }
        },
        (None, None) => maildir(state_dir.join("maildir")),
    };

    let spool = SpoolSettings {
        min_backoff: raw.spool.min_backoff.map_or(300, |s| s.0),
        max_backoff: raw.spool.max_backoff.map_or(4000, |s| s.0),
        max_lifetime: raw.spool.max_lifetime.map_or(5 * 86_400, |s| s.0),
        max_attempts: 200,
        min_free_space: raw
            .spool
            .min_free_space
            .map_or(skywave_spool::DEFAULT_MIN_FREE_SPACE, |s| s.0),
        delay_warning: Some(skywave_spool::DEFAULT_DELAY_WARNING),
        return_full_limit: raw
            .spool
            .return_full_limit
            .map_or(skywave_spool::DEFAULT_RETURN_FULL_LIMIT, |s| s.0),
    };
    let mut spool = spool;
    if let Some(v) = &raw.spool.delay_warning {
        let after = match v.get_ref() {
            toml::Value::Boolean(false) => Some(None),
            toml::Value::Integer(n) => u64::try_from(*n).ok().filter(|&n| n > 0).map(Some),
            toml::Value::String(t) => skywave_route::parse_duration(t)
                .filter(|&n| n > 0)
                .map(Some),
            _ => None,
        };
        match after {
            Some(after) => spool.delay_warning = after,
            None => err(
                v.span(),
                format!(
                    "delay_warning = {} is not a duration; expected a number with a unit s, m, h or d \
                     (\"4h\"), or false for no delay warnings",
                    v.get_ref()
                ),
            ),
        }
    }
    if let Some(n) = &raw.spool.max_attempts {
        match u32::try_from(*n.get_ref()) {
            Ok(v) if v >= 1 => spool.max_attempts = v,
            _ => err(
                n.span(),
                format!("max_attempts = {} must be a positive number", n.get_ref()),
            ),
        }
    }
    if spool.max_backoff < spool.min_backoff {
        err(
            0..0,
            format!(
                "[spool] max_backoff ({} s) is shorter than min_backoff ({} s); expected \
                 max_backoff >= min_backoff",
                spool.max_backoff, spool.min_backoff
            ),
        );
    }

    let mut hf = HfConfig::default();
    if let Some(n) = &raw.hf.node {
        match skywave_route::parse_peer_node(n.get_ref()) {
            Ok(node) => hf.node = Some(node),
            Err(e) => err(n.span(), e.to_string()),
        }
    }
    if let Some(s) = &raw.hf.sis_server {
        if split_host_port(s.get_ref()).is_some() {
            hf.sis_server = s.get_ref().clone();
        } else {
            err(
                s.span(),
                format!(
                    "sis_server {:?} is not host:port; expected e.g. \"127.0.0.1:5066\"",
                    s.get_ref()
                ),
            );
        }
    }
    if let Some(t) = raw.hf.reply_timeout {
        hf.reply_timeout = Duration::from_secs(t.0);
    }
    if let Some(t) = raw.hf.delivery_timeout {
        hf.delivery_timeout = Duration::from_secs(t.0);
    }
    if let Some(t) = raw.hf.peer_session_timeout {
        hf.peer_session_timeout = Some(Duration::from_secs(t.0));
    }
    if let Some(t) = raw.hf.dedup_window {
        hf.dedup_window = Duration::from_secs(t.0);
    }
    if let Some(t) = raw.hf.batch_delay {
        hf.batch_delay = Duration::from_secs(t.0);
    }
    if let Some(v) = in_range(
        raw.hf.assumed_bps.as_ref(),
        50..=64_000,
        "assumed_bps",
        "a data rate from 50 to 64000 bit/s",
        &mut err,
    ) {
        hf.assumed_bps = v;
    }
    if let Some(v) = in_range::<u64>(
        raw.hf.turnaround_ms.as_ref(),
        0..=127_500,
        "turnaround_ms",
        "0 to 127500 ms (the longest STANAG 5066 transmission)",
        &mut err,
    ) {
        hf.turnaround = Duration::from_millis(v);
    }
    if let Some(r) = raw.hf.resume {
        hf.resume = r;
    }
    if let Some(e) = raw.hf.emcon {
        hf.emcon = e;
    }
    if let Some(v) = in_range(
        raw.hf.pmul_pdu_size.as_ref(),
        64..=2042,
        "pmul_pdu_size",
        "64 to 2042 bytes (a 2048-byte U_PDU less the 6-byte UDOP header)",
        &mut err,
    ) {
        hf.pmul_pdu_size = v;
    }
    if let Some(v) = in_range(
        raw.hf.cftp_files_in_flight.as_ref(),
        1..=256,
        "cftp_files_in_flight",
        "1 to 256 (one per RCOP U_PDU id)",
        &mut err,
    ) {
        hf.cftp_files_in_flight = v;
    }

    if let Some(v) = in_range(
        raw.hf.cftp_bundle.as_ref(),
        1..=256,
        "cftp_bundle",
        "1 to 256 messages per CFTP file (1 sends one message per file)",
        &mut err,
    ) {
        hf.cftp_bundle = v;
    }

    hf.pmul_ip = raw
        .pmul_ip
        .as_ref()
        .and_then(|p| check_pmul_ip(p.get_ref(), &path, &mut err));

    let metrics_listen = if raw.metrics.enabled == Some(false) {
        None
    } else {
        Some(raw.metrics.listen.map_or_else(default_metrics, |a| a.0))
    };

    if let Some(s) = &raw.smtp.max_message_size
        && s.get_ref().0 == 0
    {
        err(
            s.span(),
            "max_message_size = 0 would refuse every message; expected a size such as \"10 MiB\""
                .into(),
        );
    }
    if !errors.is_empty() {
        return Err(ConfigError::Invalid(errors));
    }
    Ok(Config {
        file: PathBuf::from(file),
        hostname,
        state_dir,
        routes: path(&raw.routes),
        smtp: SmtpConfig {
            listen: raw.smtp.listen.map_or_else(default_smtp, |a| a.0),
            max_message_size: raw
                .smtp
                .max_message_size
                .as_ref()
                .map_or(10 << 20, |s| s.get_ref().0),
            max_recipients,
            idle_timeout: Duration::from_secs(raw.smtp.idle_timeout.map_or(300, |s| s.0)),
            data_timeout: Duration::from_secs(raw.smtp.data_timeout.map_or(180, |s| s.0)),
            shutdown_grace: Duration::from_secs(raw.smtp.shutdown_grace.map_or(30, |s| s.0)),
            tls,
            users,
        },
        delivery,
        metrics_listen,
        spool,
        hf,
        simulation: None,
    })
}

/// Checks `[pmul_ip]`.
fn check_pmul_ip(
    raw: &RawPmulIp,
    path: &dyn Fn(&Spanned<String>) -> PathBuf,
    err: &mut dyn FnMut(Range<usize>, String),
) -> Option<PmulIpConfig> {
    use std::net::IpAddr;
    let address = match raw.address.get_ref().parse::<IpAddr>() {
        Ok(a) if !a.is_multicast() && !a.is_unspecified() => a,
        _ => {
            err(
                raw.address.span(),
                format!(
                    "address = {:?} is not a unicast IP address; expected this gateway's own address on the P_MUL network, e.g. \"10.1.0.1\"",
                    raw.address.get_ref()
                ),
            );
            return None;
        }
    };
    let mut ports = ACP142_PORTS;
    if let Some(p) = &raw.ports {
        let list = p.get_ref();
        let valid: Vec<u16> = list
            .iter()
            .filter_map(|v| u16::try_from(*v).ok().filter(|v| *v != 0))
            .collect();
        let distinct = valid
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            == 4;
        if list.len() != 4 || valid.len() != 4 || !distinct {
            err(
                p.span(),
                "ports must be four distinct UDP ports 1-65535 in ACP 142's order [TPORT, RPORT, DPORT, APORT]; its own are [2751, 2752, 2753, 2754]".to_owned(),
            );
        } else {
            ports = [valid[0], valid[1], valid[2], valid[3]];
        }
    }
    let mut join = Vec::new();
    for j in &raw.join {
        match j.get_ref().parse::<IpAddr>() {
            Ok(g) if g.is_multicast() && g.is_ipv4() == address.is_ipv4() => join.push(g),
            Ok(g) if g.is_multicast() => err(
                j.span(),
                format!("join = {g}: this gateway's address {address} is of the other IP version"),
            ),
            _ => err(
                j.span(),
                format!(
                    "join = {:?} is not an IP multicast address; expected e.g. \"239.192.0.1\"",
                    j.get_ref()
                ),
            ),
        }
    }
    let mut ttl = 1;
    if let Some(t) = &raw.ttl {
        match u32::try_from(*t.get_ref()) {
            Ok(v) if (1..=255).contains(&v) => ttl = v,
            _ => err(
                t.span(),
                format!("ttl = {} is out of range; expected 1 to 255", t.get_ref()),
            ),
        }
    }
    let interface = raw.interface.as_ref().and_then(|i| {
        let text = i.get_ref();
        let parsed = match address {
            IpAddr::V4(_) => text.parse().ok().map(PmulInterface::V4),
            IpAddr::V6(_) => text.parse().ok().map(PmulInterface::V6).or_else(|| {
                // An interface name: its index from sysfs (Linux).
                std::fs::read_to_string(format!("/sys/class/net/{text}/ifindex"))
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                    .map(PmulInterface::V6)
            }),
        };
        if parsed.is_none() {
            err(
                i.span(),
                format!(
                    "interface = {text:?}: expected the interface's IPv4 address for an IPv4 network, or an interface name or index for IPv6"
                ),
            );
        }
        parsed
    });
    let mtu_payload = if address.is_ipv4() { 1472 } else { 1452 };
    let mut pdu_size = mtu_payload;
    if let Some(n) = &raw.pdu_size {
        match usize::try_from(*n.get_ref()) {
            Ok(v) if (64..=65_507).contains(&v) => pdu_size = v,
            _ => err(
                n.span(),
                format!(
                    "pdu_size = {} is out of range; expected 64 to 65507 bytes ({mtu_payload} fills one unfragmented datagram on a 1500-byte MTU)",
                    n.get_ref()
                ),
            ),
        }
    }
    let mut drop_inbound = 0.0;
    if let Some(d) = &raw.drop_inbound {
        if (0.0..=0.9).contains(d.get_ref()) {
            drop_inbound = *d.get_ref();
        } else {
            err(
                d.span(),
                format!(
                    "drop_inbound = {} is out of range; expected 0 to 0.9",
                    d.get_ref()
                ),
            );
        }
    }
    Some(PmulIpConfig {
        address,
        ports,
        join,
        ttl,
        interface,
        pdu_size,
        pcap: raw.pcap.as_ref().map(path),
        drop_inbound,
    })
}

fn default_smtp() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 2525))
}

fn default_metrics() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 9466))
}

/// Reads trusted root certificates for the smarthost (PEM, at least one certificate).
fn read_ca(file: &Path) -> Result<Vec<u8>, String> {
    let pem = std::fs::read(file)
        .map_err(|e| format!("cannot read the CA file {}: {e}", file.display()))?;
    let usable = lettre::transport::smtp::client::Certificate::from_pem(&pem).is_ok()
        && pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----");
    if !usable {
        return Err(format!(
            "{} holds no usable PEM certificate; expected \"-----BEGIN CERTIFICATE-----\" blocks",
            file.display()
        ));
    }
    Ok(pem)
}

/// Reads a users file (or the smarthost's `auth_file`): one `name:password` per line; blank
/// lines and `#` comments ignored.
fn read_users(path: &Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read users_file {}: {e}", path.display()))?;
    let mut users = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.split_once(':') {
            Some((user, password)) if !user.is_empty() && !password.is_empty() => {
                users.push((user.to_owned(), password.to_owned()));
            }
            _ => {
                return Err(format!(
                    "users_file {} line {}: expected \"name:password\"",
                    path.display(),
                    n + 1
                ));
            }
        }
    }
    Ok(users)
}

fn split_host_port(s: &str) -> Option<(String, u16)> {
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Some((addr.ip().to_string(), addr.port()));
    }
    let (host, port) = s.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    (ok && port != 0).then(|| (host.to_owned(), port))
}

/// The toml error's message without its own position prefix and source excerpt (we print
/// those ourselves), on one line.
fn toml_message(e: &toml::de::Error) -> String {
    e.message().trim().replace('\n', " ")
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(1, |t| t.matches('\n').count() + 1)
}

/// A diagnostic at a byte span of `text`, shown as 1-based line and column.
fn diagnostic(file: &str, text: &str, span: Range<usize>, message: String) -> Diagnostic {
    let floor = |mut i: usize| {
        i = i.min(text.len());
        while i > 0 && !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = floor(span.start);
    let end = floor(span.end.max(span.start));
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    Diagnostic {
        severity: Severity::Error,
        file: file.to_owned(),
        line: text[..start].matches('\n').count() + 1,
        column: text[line_start..start].chars().count() + 1,
        message,
        source_line: text[line_start..line_end].trim_end_matches('\r').to_owned(),
        width: text[start..end.min(line_end).max(start)]
            .chars()
            .count()
            .max(1),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const GOOD: &str =
        "hostname = \"gw.ship.example\"\nstate_dir = \"state\"\nroutes = \"routes.toml\"\n";

    fn error(text: &str) -> String {
        match parse("skywave.toml", text, Path::new("/etc/skywave")) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn hf_numbers_are_checked_against_their_ranges() {
        let hf = |line: &str| format!("{GOOD}[hf]\n{line}\n");
        let c = parse("skywave.toml", &hf("cftp_bundle = 1"), Path::new("")).unwrap();
        assert_eq!(c.hf.cftp_bundle, 1);
        let c = parse("skywave.toml", GOOD, Path::new("")).unwrap();
        assert_eq!(c.hf.cftp_bundle, skywave_hmtp::DEFAULT_SKYWAVE_BUNDLE);
        assert_eq!(c.hf.turnaround, DEFAULT_TURNAROUND);
        // The bundled emulator's modems turn around in the same time by default, so a demo or
        // test gateway on it needs no setting.
        let modem = skywave_emu::modem::ModemConfig::new(
            skywave_emu::modem::DataRate::Bps1200,
            skywave_emu::modem::Interleaver::Short,
        )
        .unwrap();
        assert_eq!(modem.switching_time, DEFAULT_TURNAROUND);
        let c = parse("skywave.toml", &hf("turnaround_ms = 5000"), Path::new("")).unwrap();
        assert_eq!(c.hf.turnaround, Duration::from_secs(5));
        // The server's wait and the hold after a refusal: 5 minutes plus two 2048-byte U_PDUs
        // at the assumed 300 bit/s (54.6 s each); never under RFC 5321's 5 minutes.
        let c = parse("skywave.toml", GOOD, Path::new("")).unwrap();
        assert_eq!(c.hf.peer_session_timeout, None);
        let wait = c.hf.session_wait(2048).as_secs_f64();
        assert!((wait - 409.23).abs() < 0.01, "{wait}");
        assert_eq!(c.hf.peer_session_wait(2048), c.hf.session_wait(2048));
        let c = parse("skywave.toml", &hf("reply_timeout = \"1s\""), Path::new("")).unwrap();
        assert_eq!(c.hf.session_wait(2048), Duration::from_secs(300));
        assert_eq!(c.hf.delivery_timeout, DEFAULT_DELIVERY_TIMEOUT);
        let c = parse(
            "skywave.toml",
            &hf("delivery_timeout = \"20m\""),
            Path::new(""),
        )
        .unwrap();
        assert_eq!(c.hf.delivery_timeout, Duration::from_secs(1200));
        let c = parse("skywave.toml", &hf("assumed_bps = 75"), Path::new("")).unwrap();
        let wait = c.hf.session_wait(2048).as_secs_f64();
        assert!((wait - 736.91).abs() < 0.01, "{wait}");
        let c = parse(
            "skywave.toml",
            &hf("peer_session_timeout = \"10m\""),
            Path::new(""),
        )
        .unwrap();
        assert_eq!(c.hf.peer_session_wait(2048), Duration::from_secs(600));
        for (line, says) in [
            (
                "turnaround_ms = 200000",
                "turnaround_ms = 200000 is out of range; expected 0 to 127500 ms",
            ),
            ("turnaround_ms = -1", "turnaround_ms = -1 is out of range"),
            (
                "cftp_bundle = 0",
                "cftp_bundle = 0 is out of range; expected 1 to 256 messages",
            ),
            ("cftp_bundle = 257", "cftp_bundle = 257 is out of range"),
            (
                "cftp_files_in_flight = 0",
                "cftp_files_in_flight = 0 is out of range",
            ),
            ("assumed_bps = 10", "assumed_bps = 10 is out of range"),
            (
                "pmul_pdu_size = 9000",
                "pmul_pdu_size = 9000 is out of range",
            ),
        ] {
            let e = error(&hf(line));
            assert!(e.contains(says), "{line}: {e}");
        }
    }

    #[test]
    fn minimal_config_gets_the_documented_defaults() {
        let c = parse("skywave.toml", GOOD, Path::new("/etc/skywave")).unwrap();
        assert_eq!(c.hostname, "gw.ship.example");
        assert_eq!(c.state_dir, PathBuf::from("/etc/skywave/state"));
        assert_eq!(c.spool_dir(), PathBuf::from("/etc/skywave/state/spool"));
        assert_eq!(c.routes, PathBuf::from("/etc/skywave/routes.toml"));
        assert_eq!(c.smtp.listen.to_string(), DEFAULT_SMTP_LISTEN);
        assert_eq!(
            c.metrics_listen.unwrap().to_string(),
            DEFAULT_METRICS_LISTEN
        );
        assert_eq!(c.smtp.max_message_size, 10 << 20);
        assert!(
            matches!(c.delivery, Delivery::Maildir { ref dir, line_ends: LineEnds::Lf } if dir == Path::new("/etc/skywave/state/maildir"))
        );
        assert_eq!(c.spool.max_lifetime, 432_000);
        assert_eq!(
            c.spool.min_free_space,
            skywave_spool::DEFAULT_MIN_FREE_SPACE
        );
    }

    #[test]
    fn pmul_ip_defaults_and_mistakes() {
        let c = parse(
            "skywave.toml",
            &format!("{GOOD}[pmul_ip]\naddress = \"10.1.0.1\"\njoin = [\"239.192.0.1\"]\n"),
            Path::new("/etc/skywave"),
        )
        .unwrap();
        let p = c.hf.pmul_ip.unwrap();
        assert_eq!(p.ports, ACP142_PORTS);
        assert_eq!(p.ports, [2751, 2752, 2753, 2754]);
        assert_eq!(p.ttl, 1);
        assert_eq!(
            p.pdu_size, 1472,
            "one unfragmented datagram on a 1500-byte MTU"
        );
        assert_eq!(p.join, ["239.192.0.1".parse::<std::net::IpAddr>().unwrap()]);
        assert_eq!(p.drop_inbound, 0.0);
        let v6 = parse(
            "skywave.toml",
            &format!("{GOOD}[pmul_ip]\naddress = \"fd00::1\"\ninterface = \"3\"\n"),
            Path::new(""),
        )
        .unwrap();
        let p = v6.hf.pmul_ip.unwrap();
        assert_eq!(p.pdu_size, 1452);
        assert_eq!(p.interface, Some(PmulInterface::V6(3)));
        assert!(
            parse("skywave.toml", GOOD, Path::new(""))
                .unwrap()
                .hf
                .pmul_ip
                .is_none()
        );

        let bad = |section: &str| error(&format!("{GOOD}[pmul_ip]\n{section}"));
        assert!(bad("address = \"239.1.1.1\"\n").contains("is not a unicast IP address"));
        assert!(
            bad("address = \"10.1.0.1\"\nports = [2751, 2752, 2753]\n")
                .contains("four distinct UDP ports")
        );
        assert!(
            bad("address = \"10.1.0.1\"\nports = [2751, 2751, 2753, 2754]\n")
                .contains("four distinct UDP ports")
        );
        assert!(
            bad("address = \"10.1.0.1\"\nports = [0, 2752, 2753, 2754]\n")
                .contains("[TPORT, RPORT, DPORT, APORT]")
        );
        assert!(
            bad("address = \"10.1.0.1\"\njoin = [\"10.0.0.9\"]\n").contains("not an IP multicast")
        );
        assert!(bad("address = \"10.1.0.1\"\njoin = [\"ff15::1\"]\n").contains("other IP version"));
        assert!(bad("address = \"10.1.0.1\"\nttl = 0\n").contains("ttl = 0 is out of range"));
        assert!(
            bad("address = \"10.1.0.1\"\ninterface = \"eth0\"\n")
                .contains("interface's IPv4 address")
        );
        assert!(bad("address = \"10.1.0.1\"\npdu_size = 70000\n").contains("pdu_size = 70000"));
        assert!(bad("address = \"10.1.0.1\"\ndrop_inbound = 0.95\n").contains("drop_inbound"));
        assert!(bad("ttl = 2\n").contains("missing field `address`"));
    }

    #[test]
    fn units_and_smarthost() {
        let text = format!(
            "{GOOD}[smtp]\nlisten = \"127.0.0.1:0\"\nmax_message_size = \"2 MB\"\nidle_timeout = \"5m\"\n\
             [delivery]\nsmarthost = \"mail.lan:2525\"\n[metrics]\nenabled = false\n[spool]\nmax_lifetime = \"2d\"\nmin_free_space = \"250 MB\"\n"
        );
        let c = parse("skywave.toml", &text, Path::new("")).unwrap();
        assert_eq!(c.smtp.listen.port(), 0);
        assert_eq!(c.smtp.max_message_size, 2_000_000);
        assert_eq!(c.smtp.idle_timeout, Duration::from_secs(300));
        assert!(c.metrics_listen.is_none());
        assert_eq!(c.spool.max_lifetime, 172_800);
        assert_eq!(c.spool.min_free_space, 250_000_000);
        assert!(
            matches!(c.delivery, Delivery::Smarthost { ref host, port: 2525, .. } if host == "mail.lan")
        );
    }

    #[test]
    fn unknown_key_names_the_place_and_the_expected_keys() {
        let msg = error(&format!("{GOOD}[smtp]\nlisten_addr = \"127.0.0.1:25\"\n"));
        assert!(
            msg.starts_with(
                "skywave.toml:5:1: error: unknown field `listen_addr`, expected one of"
            ),
            "{msg}"
        );
        assert!(
            msg.contains("5 | listen_addr = \"127.0.0.1:25\"\n  | ^^^^^^^^^^^"),
            "{msg}"
        );
    }

    #[test]
    fn missing_required_key() {
        let msg = error("hostname = \"gw\"\nroutes = \"r.toml\"\n");
        assert!(msg.contains("error: missing field `state_dir`"), "{msg}");
    }

    #[test]
    fn bad_listen_address() {
        let msg = error(&format!("{GOOD}[smtp]\nlisten = \"localhost:25\"\n"));
        assert!(
            msg.starts_with(
                "skywave.toml:5:10: error: \"localhost:25\" is not an address and port; expected an IP address and a port"
            ),
            "{msg}"
        );
    }

    #[test]
    fn bad_size_and_duration() {
        let msg = error(&format!(
            "{GOOD}[smtp]\nmax_message_size = \"10 parsecs\"\n"
        ));
        assert!(
            msg.starts_with("skywave.toml:5:20: error: \"10 parsecs\" is not a size"),
            "{msg}"
        );
        let msg = error(&format!("{GOOD}[spool]\nmax_lifetime = \"soon\"\n"));
        assert!(
            msg.starts_with("skywave.toml:5:16: error: \"soon\" is not a duration"),
            "{msg}"
        );
        let msg = error(&format!("{GOOD}[spool]\ndelay_warning = true\n"));
        assert!(
            msg.starts_with(
                "skywave.toml:5:17: error: delay_warning = true is not a duration; expected a number \
                 with a unit s, m, h or d (\"4h\"), or false for no delay warnings"
            ),
            "{msg}"
        );
    }

    #[test]
    fn delay_warnings_after_four_hours_unless_told_otherwise() {
        let spool = |extra: &str| {
            parse("skywave.toml", &format!("{GOOD}{extra}"), Path::new(""))
                .unwrap()
                .spool
                .delay_warning
        };
        assert_eq!(spool(""), Some(4 * 3600));
        assert_eq!(spool("[spool]\ndelay_warning = \"12h\"\n"), Some(12 * 3600));
        assert_eq!(spool("[spool]\ndelay_warning = 600\n"), Some(600));
        assert_eq!(spool("[spool]\ndelay_warning = false\n"), None);
    }

    #[test]
    fn a_whole_message_comes_back_up_to_ten_kilobytes_unless_told_otherwise() {
        let limit = |extra: &str| {
            parse("skywave.toml", &format!("{GOOD}{extra}"), Path::new(""))
                .unwrap()
                .spool
                .return_full_limit
        };
        assert_eq!(limit(""), 10_000);
        assert_eq!(limit("[spool]\nreturn_full_limit = \"50 kB\"\n"), 50_000);
        assert_eq!(limit("[spool]\nreturn_full_limit = 0\n"), 0);
        // 0 is a size where it means "none" (as min_free_space's does), not for the largest
        // message taken.
        let c = parse(
            "skywave.toml",
            &format!("{GOOD}[spool]\nmin_free_space = 0\n"),
            Path::new(""),
        )
        .unwrap();
        assert_eq!(c.spool.min_free_space, 0);
        let msg = error(&format!("{GOOD}[smtp]\nmax_message_size = \"0 MB\"\n"));
        assert!(
            msg.contains("max_message_size = 0 would refuse every message"),
            "{msg}"
        );
    }

    #[test]
    fn wrong_type() {
        let msg = error(&format!("{GOOD}[smtp]\nmax_recipients = \"many\"\n"));
        assert!(
            msg.starts_with(
                "skywave.toml:5:18: error: invalid type: string \"many\", expected i64"
            ),
            "{msg}"
        );
    }

    #[test]
    fn both_delivery_kinds() {
        let msg = error(&format!(
            "{GOOD}[delivery]\nmaildir = \"/var/mail/x\"\nsmarthost = \"mail:25\"\n"
        ));
        assert!(
            msg.starts_with(
                "skywave.toml:6:13: error: [delivery] has both maildir (line 5) and smarthost; expected one of them"
            ),
            "{msg}"
        );
    }

    #[test]
    fn smarthost_tls_settings_and_their_mistakes() {
        let dir = tempfile::tempdir().unwrap();
        let cert = rcgen::generate_simple_self_signed(vec!["mail.lan".to_owned()]).unwrap();
        std::fs::write(dir.path().join("ca.pem"), cert.cert.pem()).unwrap();
        std::fs::write(dir.path().join("junk.pem"), "not a certificate\n").unwrap();
        let parse_in = |extra: &str| {
            parse(
                "skywave.toml",
                &format!("{GOOD}[delivery]\nsmarthost = \"mail.lan:25\"\n{extra}"),
                dir.path(),
            )
        };
        let tls_of = |c: Config| match c.delivery {
            Delivery::Smarthost { tls, .. } => tls,
            other => panic!("{other:?}"),
        };
        assert_eq!(tls_of(parse_in("").unwrap()), SmarthostTls::None);
        assert!(matches!(
            tls_of(parse_in("tls = \"required\"\ntls_ca = \"ca.pem\"\n").unwrap()),
            SmarthostTls::Required { ca: Some(ref pem) } if pem.starts_with(b"-----BEGIN CERTIFICATE-----")
        ));
        assert_eq!(
            tls_of(parse_in("tls = \"opportunistic\"\n").unwrap()),
            SmarthostTls::Opportunistic { ca: None }
        );
        let msg = parse_in("tls = \"yes\"\n").unwrap_err().to_string();
        assert!(
            msg.contains(
                "skywave.toml:6:7: error: tls = \"yes\"; expected \"none\", \"opportunistic\", \"required\" or \"implicit\""
            ),
            "{msg}"
        );
        let msg = parse_in("tls = \"required\"\ntls_ca = \"missing.pem\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("skywave.toml:7:10: error: cannot read the CA file"),
            "{msg}"
        );
        let msg = parse_in("tls_ca = \"junk.pem\"\n").unwrap_err().to_string();
        assert!(msg.contains("holds no usable PEM certificate"), "{msg}");
        assert_eq!(
            tls_of(parse_in("tls = \"implicit\"\n").unwrap()),
            SmarthostTls::Implicit { ca: None }
        );
    }

    #[test]
    fn smarthost_auth_goes_only_over_tls() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("auth"),
            "# the relay's account\ngw:s3cret\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("two"), "a:b\nc:d\n").unwrap();
        let parse_in = |extra: &str| {
            parse(
                "skywave.toml",
                &format!("{GOOD}[delivery]\nsmarthost = \"relay.lan:587\"\n{extra}"),
                dir.path(),
            )
        };
        let c = parse_in("tls = \"required\"\nauth_file = \"auth\"\n").unwrap();
        let Delivery::Smarthost {
            auth: Some(auth), ..
        } = c.delivery
        else {
            panic!("{:?}", c.delivery)
        };
        assert_eq!(
            (auth.user.as_str(), auth.password.as_str()),
            ("gw", "s3cret")
        );
        assert!(!format!("{auth:?}").contains("s3cret"));
        let msg = parse_in("tls = \"opportunistic\"\nauth_file = \"auth\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains(
                "skywave.toml:7:13: error: auth_file needs tls = \"required\" or \"implicit\""
            ),
            "{msg}"
        );
        let msg = parse_in("tls = \"implicit\"\nauth_file = \"two\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("has 2 \"name:password\" lines; expected one"),
            "{msg}"
        );
        let msg = parse_in("tls = \"implicit\"\nauth_file = \"none\"\n")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("cannot read auth_file"), "{msg}");
    }

    #[test]
    fn bad_smarthost_and_hostname() {
        let msg = error(&format!("{GOOD}[delivery]\nsmarthost = \"mail.lan\"\n"));
        assert!(
            msg.contains("smarthost \"mail.lan\" is not host:port"),
            "{msg}"
        );
        let msg = error("hostname = \"gw ship\"\nstate_dir = \"s\"\nroutes = \"r\"\n");
        assert!(
            msg.starts_with("skywave.toml:1:12: error: hostname \"gw ship\" is not a host name"),
            "{msg}"
        );
    }

    #[test]
    fn auth_without_tls_is_refused() {
        let msg = error(&format!(
            "{GOOD}[smtp.auth]\nusers = {{ alice = \"pw\" }}\n"
        ));
        assert!(msg.contains("[smtp.auth] needs [smtp.tls]"), "{msg}");
    }

    #[test]
    fn users_file_is_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("users"), "# comment\nbob:secret\n\n").unwrap();
        let text = format!(
            "{GOOD}[smtp.tls]\ncert = \"c.pem\"\nkey = \"k.pem\"\n[smtp.auth]\nusers_file = \"users\"\nusers = {{ alice = \"pw\" }}\n"
        );
        let c = parse("skywave.toml", &text, dir.path()).unwrap();
        assert_eq!(c.smtp.users.len(), 2);
        assert_eq!(c.smtp.users["bob"], "secret");
        std::fs::write(dir.path().join("users"), "bob\n").unwrap();
        let msg = match parse("skywave.toml", &text, dir.path()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted"),
        };
        assert!(msg.contains("line 1: expected \"name:password\""), "{msg}");
    }

    #[test]
    fn toml_syntax_error() {
        let msg = error("hostname = \"gw\nstate_dir = 1\n");
        assert!(msg.starts_with("skywave.toml:1:"), "{msg}");
        assert!(msg.contains("error: "), "{msg}");
    }

    #[test]
    fn documented_example_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/skywave.toml");
        let c = load(&path).unwrap();
        assert_eq!(c.hostname, "gw.ship.navy.example");
    }
}
