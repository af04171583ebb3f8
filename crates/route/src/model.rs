//! The validated model of a routing table: peers, their protocol, compression and bearer, and
//! the LAN side. Built from the TOML by the `config` module; read by the lookup.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A peer's STANAG 5066 node address: the SIS crate's type, so the gateway hands it to the SIS
/// client as it is. A peer is always an individual node (w 0-15); the config loader refuses group
/// addresses.
pub use skywave_sis::NodeAddress;

/// A node address that did not parse, or is a group address where a peer needs an individual one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "\"{0}\" is not a STANAG 5066 node address; expected w.x.y.z with w 0-15 and x, y, z 0-255, e.g. 0.0.1.2"
)]
pub struct NodeAddressError(String);

/// Parses a peer's node address: `w.x.y.z`, individual (w 0-15) only.
pub fn parse_peer_node(s: &str) -> Result<NodeAddress, NodeAddressError> {
    match s.parse::<NodeAddress>() {
        Ok(node) if !node.is_group() => Ok(node),
        _ => Err(NodeAddressError(s.to_owned())),
    }
}

/// The protocol spoken to a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// HMTP over STANAG 5066 SAP 3 (Annex F): batched SMTP, two transmissions per session.
    Hmtp,
    /// CFTP over SAP 12 (Annex F): gzipped mail files over RCOP/BFTP.
    Cftp,
    /// Plain SMTP over TCP/IP (optionally JNOS `XLZW` compression): JNOS nodes, IP-over-HF.
    Smtp,
    /// No unicast protocol: the peer is reached only by ACP 142 P_MUL (RFC 8494 MULE mail)
    /// over UDP/IP multicast, through its `pmul-ip` group (bearer `pmul-ip`).
    Pmul,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Hmtp => "hmtp",
            Protocol::Cftp => "cftp",
            Protocol::Smtp => "smtp",
            Protocol::Pmul => "pmul",
        })
    }
}

/// Stream compression towards a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// No compression.
    None,
    /// JNOS-compatible LZW with the given maximum code width (9-16 bits).
    Lzw {
        /// Maximum code width in bits, 9..=16.
        bits: u8,
    },
    /// A zlib (deflate) stream.
    Deflate,
}

/// A compression value that did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompressionError {
    /// `lzw` without a width.
    #[error("\"lzw\" needs its maximum code width: lzw9 (the JNOS default) to lzw16 (best ratio)")]
    LzwWithoutBits,
    /// Anything else.
    #[error("unknown compression \"{0}\"; expected none, lzw9 ... lzw16, or deflate")]
    Unknown(String),
}

impl FromStr for Compression {
    type Err = CompressionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => return Ok(Compression::None),
            "deflate" => return Ok(Compression::Deflate),
            "lzw" => return Err(CompressionError::LzwWithoutBits),
            _ => {}
        }
        if let Some(digits) = s.strip_prefix("lzw")
            && !digits.starts_with('0')
            && digits.bytes().all(|b| b.is_ascii_digit())
            && let Ok(bits) = digits.parse::<u8>()
            && (9..=16).contains(&bits)
        {
            return Ok(Compression::Lzw { bits });
        }
        Err(CompressionError::Unknown(s.to_owned()))
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Compression::None => f.write_str("none"),
            Compression::Lzw { bits } => write!(f, "lzw{bits}"),
            Compression::Deflate => f.write_str("deflate"),
        }
    }
}

/// How the bytes reach a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bearer {
    /// Through a STANAG 5066 server's SIS (TCP port 5066 by default).
    Sis {
        /// `host:port` of the SIS server for this peer, when not the gateway's default.
        server: Option<String>,
    },
    /// Plain TCP/IP to the peer's SMTP server (`host:port`).
    Tcp {
        /// `host:port` to connect to.
        address: String,
    },
    /// ACP 142 P_MUL over UDP/IP only (the peer's `ip`, through its `pmul-ip` group): no
    /// unicast protocol, so even mail for this peer alone goes by P_MUL.
    PmulIp,
}

impl fmt::Display for Bearer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bearer::Sis { server: None } => f.write_str("sis (the gateway's SIS server)"),
            Bearer::Sis {
                server: Some(server),
            } => write!(f, "sis via {server}"),
            Bearer::Tcp { address } => write!(f, "tcp to {address}"),
            Bearer::PmulIp => f.write_str("pmul-ip (ACP 142 P_MUL over UDP/IP multicast only)"),
        }
    }
}

/// Message priority on the RFC 6710 MT-PRIORITY scale, -9 (lowest) to 9 (highest); 0 is the
/// priority of mail that states none.
///
/// The MMHS precedence names (RFC 6758) are accepted and mapped as RFC 6710's MMHS priority
/// assignment policy does, the same mapping the spool uses for the MMHS-Primary-Precedence
/// header: deferred -4, routine -2, priority 0, immediate 2, flash 4, override 6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Priority(i8);

/// Named precedences and their MT-PRIORITY values.
const PRECEDENCES: [(&str, i8); 6] = [
    ("deferred", -4),
    ("routine", -2),
    ("priority", 0),
    ("immediate", 2),
    ("flash", 4),
    ("override", 6),
];

impl Priority {
    /// A priority from an MT-PRIORITY value, if in -9..=9.
    pub fn new(value: i64) -> Option<Priority> {
        i8::try_from(value)
            .ok()
            .filter(|v| (-9..=9).contains(v))
            .map(Priority)
    }

    /// The MT-PRIORITY value.
    pub fn value(self) -> i8 {
        self.0
    }

    /// The precedence name for this value, if it has one.
    pub fn name(self) -> Option<&'static str> {
        PRECEDENCES
            .iter()
            .find(|(_, v)| *v == self.0)
            .map(|(n, _)| *n)
    }

    pub(crate) fn from_name(name: &str) -> Option<Priority> {
        PRECEDENCES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| Priority(*v))
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{} ({name})", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

/// An HF (or TCP) peer gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// The peer's name, used by routes and by operators (`skywave queue hold shore`).
    pub name: String,
    /// Its STANAG 5066 node address (required for the `sis` bearer).
    pub node: Option<NodeAddress>,
    /// Protocol spoken to it.
    pub protocol: Protocol,
    /// True for another skywave gateway: compressed HMTP may be sent without negotiation.
    pub skywave: bool,
    /// The operator states that the peer's HMTP server honours skywave's cut marker (`XCUT`,
    /// skywave 2026-11-29 and later), so that a session cut by a lost link can be given up at
    /// once even before a first session has shown it. What the peer's own EHLO reply last said
    /// (remembered across restarts) overrides this.
    pub xcut: bool,
    /// Compression of the stream towards it.
    pub compression: Compression,
    /// Priority of mail that carries none and whose route sets none.
    pub priority: Priority,
    /// Largest message accepted for this peer, in bytes.
    pub size_limit: u64,
    /// Byte budget of one batch (one HMTP session), so urgent mail never waits long.
    pub batch_bytes: u64,
    /// Transport.
    pub bearer: Bearer,
    /// When true, mail for this peer is queued but not sent until an operator releases it.
    pub hold: bool,
    /// A message larger than this (bytes) is queued for this peer held, until an operator
    /// releases it (`skywave queue release ID`) or returns it (`skywave queue bounce ID`), and
    /// its sender is told at once (`hold_above = "100 kB"`); `None`: none is held for its size.
    pub hold_above: Option<u64>,
    /// Header fields its links leave out of each message on the air (`strip_headers = true`
    /// for [`skywave_smtp::strip::DEFAULT_STRIP`], or a list of names and prefixes); empty:
    /// every message goes as it came.
    pub strip_headers: Vec<skywave_smtp::strip::FieldPattern>,
    /// Its links send only the text of a `multipart/alternative` that has one, the HTML twin
    /// left ashore (`text_only = true`, [`skywave_smtp::strip::text_only`]).
    pub text_only: bool,
    /// Its links send images whose longer side is over the limit scaled down to fit
    /// (`shrink_images = 1024`, `image_quality = 60`, [`skywave_smtp::shrink::shrink_images`]);
    /// `None`: images go as they came.
    pub shrink_images: Option<skywave_smtp::shrink::ImageLimit>,
    /// How this gateway sends its P_MUL acknowledgements to the peer (when the peer multicasts
    /// to us): non-ARQ by default (a lost ack is made good by P_MUL's own repair cycle), or ARQ
    /// (each ack confirmed by the 5066 link; costs the peer's node an ACK transmission).
    pub pmul_acks: AckMode,
    /// The peer keeps EMCON (radio silence): it receives but must not transmit, so it is
    /// reached only by P_MUL multicast through its group, and its acknowledgements may come
    /// hours later, when its EMCON is lifted.
    pub emcon: bool,
    /// Its radio schedule (`schedule = ["06:00-07:00"]`): when a session to it may start;
    /// `None`: at any time.
    pub schedule: Option<crate::Schedule>,
    /// Mail at or above this priority goes at once, outside the schedule's windows too
    /// (`schedule_bypass = "flash"`); `None`: nothing does.
    pub schedule_bypass: Option<Priority>,
    /// Its unicast address on the IP network of a `pmul-ip` group (`ip = "10.1.0.2"`): where
    /// its P_MUL acknowledgements come from and mail for it alone goes; its P_MUL id is
    /// derived from it ([`pmul_ip_id`]).
    pub ip: Option<IpAddr>,
    /// Another peer that takes this one's mail once it has waited too long (`fallback =
    /// "shore-hf"`, `fallback_after = "30m"`): the HF path behind a satellite or line-of-sight
    /// IP link, say.
    pub fallback: Option<Fallback>,
    /// Line of the `[[peer]]` entry in the file.
    pub line: usize,
}

/// Where a peer's mail goes when it has waited too long for the peer (`fallback`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    /// The peer that takes it.
    pub peer: String,
    /// Seconds after a message's arrival at this gateway from which its recipients still
    /// waiting for this peer go to the fallback peer instead (`fallback_after`; default
    /// [`DEFAULT_FALLBACK_AFTER`]).
    pub after: u64,
    /// For a peer over TCP/IP: seconds between probes (a connection, its greeting, QUIT) while
    /// the peer answers none of our sessions and mail that fell back from it then waits to come
    /// back (`probe_every`; default [`DEFAULT_PROBE_EVERY`]); 0: no probe, as always over
    /// STANAG 5066, where one would cost airtime.
    pub probe_every: u64,
}

/// `fallback_after` when only `fallback` is given: half an hour.
pub const DEFAULT_FALLBACK_AFTER: u64 = 1800;

/// `probe_every` of a peer over TCP/IP with a fallback when it does not say: a minute. A
/// probe is one TCP connection, a greeting, EHLO and QUIT, which a satellite or line-of-sight
/// link carries in a second or two.
pub const DEFAULT_PROBE_EVERY: u64 = 60;

/// Seconds as an administrator reads them: "30 min", "2 h", "90 s".
pub fn duration_text(secs: u64) -> String {
    match secs {
        s if s % 3600 == 0 => format!("{} h", s / 3600),
        s if s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// A duration as the configuration files write it in a string: a number with a unit `s`, `m`,
/// `h` or `d` ("90s", "30m"), in seconds; `None` for anything else, zero, or an overflow. (A
/// bare number of seconds is written as a TOML integer.)
pub fn parse_duration(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let number: u64 = s[..split].parse().ok()?;
    let factor = match s[split..].trim() {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return None,
    };
    number.checked_mul(factor).filter(|&n| n > 0)
}

/// How P_MUL acknowledgements travel to a peer (`pmul_acks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AckMode {
    /// Non-ARQ unicast U_PDUs.
    #[default]
    NonArq,
    /// ARQ unicast U_PDUs.
    Arq,
}

impl fmt::Display for AckMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AckMode::NonArq => "non-arq",
            AckMode::Arq => "arq",
        })
    }
}

/// A multicast group of peers (`[[group]]`): ships that share one HF frequency and one
/// STANAG 5066 group address, or one IP network and one IP multicast address. Mail for two or
/// more of its members (or for the group itself, or for a member under EMCON, or for a member
/// reached only by P_MUL) goes once, as ACP 142 P_MUL PDUs to the group address, instead of once
/// per ship.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The group's name: routes may send to it (every member delivers the mail), operators
    /// name it in `skywave queue`.
    pub name: String,
    /// How its P_MUL PDUs travel.
    pub bearer: GroupBearer,
    /// The member peers, by name (each in no other group).
    pub members: Vec<String>,
    /// How many times each Data_PDU is sent again at once, blind, before any ack (0-5): each
    /// repeat costs airtime but spares a repair round (a turnaround and an ack from every ship)
    /// on a channel that loses some PDUs.
    pub repeats: u8,
    /// When the base may start its multicasts to the group (UTC windows), for a fleet whose
    /// stations take turns on the frequency: a message, and each later round of it (repairs,
    /// EMCON repeats), starts only inside a window; `None`: at any time. Only groups over
    /// STANAG 5066 have one.
    pub schedule: Option<crate::Schedule>,
    /// Multicast mail at or above this priority goes at any time, in or out of a window.
    pub schedule_bypass: Option<Priority>,
    /// Header fields left out of each message its P_MUL carries (as a peer's
    /// `strip_headers`); empty: every message goes as it came.
    pub strip_headers: Vec<skywave_smtp::strip::FieldPattern>,
    /// Its P_MUL sends only the text of a `multipart/alternative` that has one (as a peer's
    /// `text_only`).
    pub text_only: bool,
    /// Its P_MUL sends images whose longer side is over the limit scaled down to fit (as a
    /// peer's `shrink_images` and `image_quality`, [`skywave_smtp::shrink::shrink_images`]);
    /// `None`: images go as they came.
    pub shrink_images: Option<skywave_smtp::shrink::ImageLimit>,
    /// Line of the `[[group]]` entry in the file.
    pub line: usize,
}

/// The bearer of a group's P_MUL PDUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupBearer {
    /// STANAG 5066 (`bearer = "sis"`, the default): non-ARQ U_PDUs on SAP 2 (STANAG 4406 annex
    /// E TMI-1) to a 5066 group address.
    Sis {
        /// Its STANAG 5066 group address (w 16-31).
        node: NodeAddress,
        /// `host:port` of the SIS server when not the gateway's default.
        server: Option<String>,
    },
    /// UDP/IP multicast as ACP 142 specifies it (`bearer = "pmul-ip"`).
    PmulIp {
        /// The IPv4 or IPv6 multicast address the group's Data_PDUs go to.
        address: IpAddr,
        /// Multicast addresses this gateway may take for a message to some of the members
        /// only (ACP 142's dynamic groups: Request_PDU, Announce_PDU, Release_PDU).
        dynamic: Option<Cidr>,
    },
}

impl Group {
    /// Its STANAG 5066 group address, for a group over 5066.
    pub fn node(&self) -> Option<NodeAddress> {
        match &self.bearer {
            GroupBearer::Sis { node, .. } => Some(*node),
            GroupBearer::PmulIp { .. } => None,
        }
    }

    /// Its IP multicast address, for a group over UDP/IP.
    pub fn ip(&self) -> Option<IpAddr> {
        match &self.bearer {
            GroupBearer::PmulIp { address, .. } => Some(*address),
            GroupBearer::Sis { .. } => None,
        }
    }

    /// Where its PDUs go, for people: `16.0.9.9` or `udp 239.192.0.1`.
    pub fn address_text(&self) -> String {
        match &self.bearer {
            GroupBearer::Sis { node, .. } => node.to_string(),
            GroupBearer::PmulIp { address, .. } => format!("udp {address}"),
        }
    }
}

/// The 32-bit P_MUL id (ACP 142's Source_ID and Destination_ID) of a node on an IP network:
/// its IPv4 address, as ACP 142 and Wireshark's dissector read these fields; for IPv6, the low
/// 32 bits of the address (`routes check` refuses two peers with the same id).
pub fn pmul_ip_id(ip: IpAddr) -> u32 {
    match ip.to_canonical() {
        IpAddr::V4(a) => u32::from(a),
        IpAddr::V6(a) => (u128::from(a) & 0xFFFF_FFFF) as u32,
    }
}

/// The `i`-th address of a multicast pool taken for a dynamic group, or none past its end.
pub fn pool_address(pool: &Cidr, i: u64) -> Option<IpAddr> {
    match pool.network {
        IpAddr::V4(a) => {
            let size = 1u64 << (32 - u32::from(pool.prefix));
            (i < size).then(|| IpAddr::V4((u32::from(a) + i as u32).into()))
        }
        IpAddr::V6(a) => {
            let bits = 128 - u32::from(pool.prefix);
            let fits = bits >= 64 || i < (1u64 << bits);
            fits.then(|| IpAddr::V6((u128::from(a) + u128::from(i)).into()))
        }
    }
}

/// Default of a group's `repeats`: one blind repeat, which on a channel losing a few per cent of
/// PDUs almost always spares the repair round (one turnaround and an ack from every ship).
pub const DEFAULT_GROUP_REPEATS: u8 = 1;

/// A group address that did not parse or is an individual one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "\"{0}\" is not a STANAG 5066 group address; expected w.x.y.z with w 16-31 (the group flag) and x, y, z 0-255, e.g. 16.0.9.9"
)]
pub struct GroupAddressError(String);

/// Parses a group's address: `w.x.y.z` with w 16-31.
pub fn parse_group_node(s: &str) -> Result<NodeAddress, GroupAddressError> {
    match s.parse::<NodeAddress>() {
        Ok(node) if node.is_group() => Ok(node),
        _ => Err(GroupAddressError(s.to_owned())),
    }
}

/// An IPv4 or IPv6 network in CIDR notation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

/// A network that did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// Not an address or not `address/prefix`.
    #[error("\"{0}\" is not a network; expected CIDR notation such as 10.1.0.0/16 or fd00::/8")]
    Syntax(String),
    /// Prefix length too large for the family.
    #[error("prefix /{prefix} is too long for \"{text}\" (at most /{max})")]
    Prefix {
        /// The text.
        text: String,
        /// Prefix given.
        prefix: u32,
        /// Longest allowed.
        max: u8,
    },
    /// Host bits set below the prefix.
    #[error("\"{text}\" has host bits set; did you mean {suggestion}?")]
    HostBits {
        /// The text.
        text: String,
        /// The network with host bits cleared.
        suggestion: String,
    },
}

impl Cidr {
    /// The network's first address.
    pub fn network(&self) -> IpAddr {
        self.network
    }

    /// True when `ip` is inside this network. IPv4-mapped IPv6 clients (`::ffff:a.b.c.d`) are
    /// compared as IPv4.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = mask32(self.prefix);
                u32::from(ip) & mask == u32::from(net)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = mask128(self.prefix);
                u128::from(ip) & mask == u128::from(net)
            }
            _ => false,
        }
    }
}

fn mask32(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
}

fn mask128(prefix: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0)
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let syntax = || CidrError::Syntax(s.to_owned());
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => {
                if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(syntax());
                }
                (a, Some(p.parse::<u32>().map_err(|_| syntax())?))
            }
            None => (s, None),
        };
        let network: IpAddr = addr.parse().map_err(|_| syntax())?;
        let max: u8 = if network.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(u32::from(max));
        if prefix > u32::from(max) {
            return Err(CidrError::Prefix {
                text: s.to_owned(),
                prefix,
                max,
            });
        }
        let prefix = u8::try_from(prefix).map_err(|_| syntax())?;
        let cleared = match network {
            IpAddr::V4(a) => IpAddr::V4((u32::from(a) & mask32(prefix)).into()),
            IpAddr::V6(a) => IpAddr::V6((u128::from(a) & mask128(prefix)).into()),
        };
        if cleared != network {
            return Err(CidrError::HostBits {
                text: s.to_owned(),
                suggestion: format!("{cleared}/{prefix}"),
            });
        }
        Ok(Cidr { network, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// The LAN side: which domains are ours and who may relay to HF peers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lan {
    /// Networks whose clients may relay (send mail to any routed destination).
    pub relay_networks: Vec<Cidr>,
    /// Whether clients that authenticated may relay from anywhere.
    pub authenticated_relay: bool,
}

impl Lan {
    /// True when a client at `ip` (authenticated or not) may relay.
    pub fn may_relay(&self, ip: IpAddr, authenticated: bool) -> bool {
        (authenticated && self.authenticated_relay)
            || self.relay_networks.iter().any(|n| n.contains(ip))
    }
}

/// Parses `host:port` (`[v6]:port` for IPv6 literals); returns the canonical text.
pub(crate) fn check_host_port(s: &str) -> Result<String, String> {
    let expected = || {
        format!(
            "\"{s}\" is not a host and port; expected host:port, e.g. 127.0.0.1:5066, mail.example.org:25 or [::1]:25"
        )
    };
    let (host, port) = s.rsplit_once(':').ok_or_else(expected)?;
    let port: u16 = port.parse().map_err(|_| expected())?;
    if port == 0 {
        return Err(format!(
            "port 0 in \"{s}\"; give the port the peer listens on"
        ));
    }
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        v6.parse::<std::net::Ipv6Addr>().map_err(|_| expected())?;
        return Ok(s.to_owned());
    }
    if host.parse::<std::net::Ipv4Addr>().is_ok() {
        return Ok(s.to_owned());
    }
    let hostname_ok = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if hostname_ok {
        Ok(s.to_owned())
    } else {
        Err(expected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_addresses() {
        assert_eq!(
            parse_peer_node("15.255.255.255").unwrap().bits(),
            0x0FFF_FFFF
        );
        assert_eq!(parse_peer_node("0.0.1.2").unwrap().to_string(), "0.0.1.2");
        for bad in [
            "16.0.0.0",
            "1.2.3",
            "1.2.3.4.5",
            "1.2.3.256",
            "a.b.c.d",
            "",
            "1..2.3",
            "+1.2.3.4",
            "0001.2.3.4",
        ] {
            assert!(parse_peer_node(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn compression_values() {
        assert_eq!("lzw9".parse(), Ok(Compression::Lzw { bits: 9 }));
        assert_eq!("lzw16".parse(), Ok(Compression::Lzw { bits: 16 }));
        assert_eq!("deflate".parse(), Ok(Compression::Deflate));
        assert_eq!(
            "lzw".parse::<Compression>(),
            Err(CompressionError::LzwWithoutBits)
        );
        for bad in ["lzw8", "lzw17", "lzw09", "lzw+9", "LZW9", "gzip", ""] {
            assert!(bad.parse::<Compression>().is_err(), "{bad}");
        }
    }

    #[test]
    fn cidrs() {
        let net: Cidr = "10.1.0.0/16".parse().unwrap();
        assert!(net.contains("10.1.200.3".parse().unwrap()));
        assert!(net.contains("::ffff:10.1.2.3".parse().unwrap()));
        assert!(!net.contains("10.2.0.1".parse().unwrap()));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("192.0.2.1".parse().unwrap()));
        let v6: Cidr = "fd00::/8".parse().unwrap();
        assert!(v6.contains("fd12::1".parse().unwrap()));
        assert!(!v6.contains("fe80::1".parse().unwrap()));
        let host: Cidr = "::1".parse().unwrap();
        assert!(host.contains("::1".parse().unwrap()));
        assert!(
            matches!("10.1.2.3/16".parse::<Cidr>(), Err(CidrError::HostBits { suggestion, .. }) if suggestion == "10.1.0.0/16")
        );
        assert!(matches!(
            "10.0.0.0/33".parse::<Cidr>(),
            Err(CidrError::Prefix { .. })
        ));
        assert!("10.0.0.0/".parse::<Cidr>().is_err());
        assert!("ten".parse::<Cidr>().is_err());
    }

    #[test]
    fn priorities() {
        assert_eq!(Priority::from_name("Flash"), Priority::new(4));
        assert_eq!(Priority::new(10), None);
        assert_eq!(Priority::new(-9).map(|p| p.value()), Some(-9));
        assert_eq!(
            Priority::new(-2).map(|p| p.to_string()).as_deref(),
            Some("-2 (routine)")
        );
    }

    #[test]
    fn host_ports() {
        for ok in [
            "127.0.0.1:5066",
            "[::1]:25",
            "mail.shore.example:25",
            "shore:2525",
        ] {
            assert!(check_host_port(ok).is_ok(), "{ok}");
        }
        for bad in [
            "127.0.0.1",
            "host:0",
            "host:99999",
            ":25",
            "-x.org:25",
            "[::1:25",
        ] {
            assert!(check_host_port(bad).is_err(), "{bad}");
        }
    }
}
