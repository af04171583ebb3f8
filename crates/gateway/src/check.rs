//! `skywave check`: a gateway's configuration checked as a whole, before a restart.
//!
//! `skywave.toml` alone is checked as it loads ([`crate::config::load`]) and the routing table
//! alone by `skywave routes check`; what neither can see is found here, without starting
//! anything: what `skywave run` would refuse at start-up (the routing table the configuration
//! names, a peer over STANAG 5066 without a node address on either side, two peers on one
//! node, a group over IP without `[pmul_ip]`, a STARTTLS certificate or key that does not load,
//! a port it may not bind), and what would only show later, in the log of a gateway already at
//! sea (a state directory or Maildir it cannot write, a certificate about to expire, a spool
//! disk already inside its reserve). [`probe`] goes one step further and connects to the SIS
//! servers and the smarthost.
//!
//! Each finding is one line an administrator can act on. An error is what would stop the
//! gateway or keep some mail from ever moving until the configuration changes; a warning is
//! what goes wrong later or may pass by itself (a server that does not answer now). The
//! command exits non-zero when any finding is an error, so that a deployment script or
//! `ExecStartPre=` can stop on it.

use std::collections::BTreeSet;
use std::fmt;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use skywave_route::{GroupBearer, LoadError, RoutingTable};
use skywave_spool::{Room, room::available_space};

use crate::config::{Config, Delivery, PmulIpConfig, SmarthostTls, TlsFiles};
use crate::hf::{HfError, Reach, reach_of};
use crate::smarthost::host_port;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// As it should be.
    Ok,
    /// Worth knowing, nothing to do (a directory the gateway will create, a port in use by the
    /// running gateway).
    Note,
    /// The gateway runs, but something will go wrong later or for some mail.
    Warning,
    /// `skywave run` would refuse to start, or some mail would never move.
    Error,
}

/// One line of the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// How much it matters.
    pub level: Level,
    /// What was checked (`routing table`, `peer shore`, `SMTP listener`, ...).
    pub what: String,
    /// What was found, and what to do when it is not right.
    pub text: String,
}

impl Finding {
    fn new(level: Level, what: impl Into<String>, text: impl Into<String>) -> Self {
        Finding {
            level,
            what: what.into(),
            text: text.into(),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.level {
            Level::Ok => "ok",
            Level::Note => "note",
            Level::Warning => "warning",
            Level::Error => "ERROR",
        };
        write!(f, "{level:<8} {}: {}", self.what, self.text)
    }
}

/// A certificate this close to its end is reported: renewing one takes a connection to the
/// world that a ship may not have for days.
pub const CERT_WARNING: Duration = Duration::from_secs(30 * 86_400);

/// Checks `config` and `table`, the routing table it names as loaded from `config.routes`
/// (loaded once by the caller, for [`probe`] too), on the local machine only: no connection is
/// made. `now` dates the certificate check.
pub fn check(
    config: &Config,
    table: &Result<RoutingTable, LoadError>,
    now: SystemTime,
) -> Vec<Finding> {
    let mut out = vec![Finding::new(
        Level::Ok,
        "configuration",
        format!("{} (host name {})", config.file.display(), config.hostname),
    )];
    match table {
        Ok(table) => {
            out.push(Finding::new(
                Level::Ok,
                "routing table",
                format!("{}: {}", config.routes.display(), table_summary(table)),
            ));
            for w in table.warnings() {
                out.push(Finding::new(Level::Warning, "routing table", w.headline()));
            }
            out.extend(peers(config, table));
            out.extend(schedules(config, table));
        }
        Err(e) => out.push(Finding::new(
            Level::Error,
            "routing table",
            format!(
                "{} does not load; `skywave run` would not start:\n{e}",
                config.routes.display()
            ),
        )),
    }
    out.push(state_dir(&config.state_dir));
    out.extend(spool_disk(config));
    out.push(bind("SMTP listener", config.smtp.listen));
    if let Some(tls) = &config.smtp.tls {
        out.extend(starttls(tls, now));
    }
    if let Some(addr) = config.metrics_listen {
        out.push(bind("metrics", addr));
    }
    out.push(delivery(&config.delivery));
    if let Some(pmul) = &config.hf.pmul_ip {
        out.extend(pmul_ip(pmul));
    }
    out
}

/// P_MUL over IP sends from the gateway's own address, which must be one of this machine's
/// (a configuration copied from another ship often is not), and may write a capture.
fn pmul_ip(config: &PmulIpConfig) -> Vec<Finding> {
    let what = "P_MUL over IP";
    let mut out = vec![match std::net::UdpSocket::bind((config.address, 0)) {
        Ok(_) => Finding::new(
            Level::Ok,
            what,
            format!(
                "from {}, ports {}",
                config.address,
                config.ports.map(|p| p.to_string()).join(", ")
            ),
        ),
        Err(e) if e.kind() == ErrorKind::AddrNotAvailable => Finding::new(
            Level::Error,
            what,
            format!(
                "{} is not an address of this machine ([pmul_ip] address); `skywave run` would \
                 not start",
                config.address
            ),
        ),
        Err(e) => Finding::new(
            Level::Error,
            what,
            format!(
                "cannot send from {}: {e}; `skywave run` would not start",
                config.address
            ),
        ),
    }];
    if let Some(pcap) = &config.pcap {
        // The capture is created at start, in a directory that must be there already.
        let dir = pcap
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let why = match writable(dir) {
            Ok(true) => None,
            Ok(false) => Some("does not exist".to_owned()),
            Err(why) => Some(why),
        };
        if let Some(why) = why {
            out.push(Finding::new(
                Level::Error,
                what,
                format!(
                    "the capture {} cannot be made: its directory {} {why}; `skywave run` \
                     would not start",
                    pcap.display(),
                    dir.display()
                ),
            ));
        }
    }
    out
}

/// `n thing` or `n things`.
pub fn count(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// What a routing table holds, as `skywave routes check` and `skywave check` say it:
/// `1 peer, 6 routes`, with its groups when it has any (`3 peers, 1 group, 5 routes`).
pub fn table_summary(table: &RoutingTable) -> String {
    let mut summary = count(table.peers().len(), "peer");
    if !table.groups().is_empty() {
        summary.push_str(&format!(", {}", count(table.groups().len(), "group")));
    }
    summary.push_str(&format!(", {}", count(table.route_count(), "route")));
    summary
}

/// How each peer and group is reached, as the daemon would start its links.
fn peers(config: &Config, table: &RoutingTable) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut on_nodes: Vec<(Reach, String)> = Vec::new();
    for peer in table.peers() {
        let what = format!("peer {}", peer.name);
        match reach_of(&config.hf, peer) {
            Ok(Some(reach)) => {
                // One link per node and SAP on a SIS server, as the daemon starts them.
                let twin = match &reach {
                    Reach::Sis { node, .. } => on_nodes
                        .iter()
                        .find(|(r, _)| *r == reach)
                        .map(|(_, other)| (other.clone(), *node)),
                    Reach::Tcp { .. } => None,
                };
                if let Some((a, node)) = twin {
                    let e = HfError::SameNode {
                        a,
                        b: peer.name.clone(),
                        node,
                    };
                    out.push(Finding::new(
                        Level::Error,
                        what,
                        format!("{e}; `skywave run` would not start"),
                    ));
                    continue;
                }
                out.push(Finding::new(
                    Level::Ok,
                    what,
                    format!("{} to {reach}", peer.protocol.to_string().to_uppercase()),
                ));
                on_nodes.push((reach, peer.name.clone()));
            }
            Ok(None) => out.push(Finding::new(
                Level::Ok,
                what,
                "P_MUL over UDP/IP only, through its group",
            )),
            Err(e @ HfError::NoPeerNode { .. }) => out.push(Finding::new(
                Level::Error,
                what,
                format!("{e}; `skywave run` would not start"),
            )),
            Err(e) => out.push(Finding::new(
                Level::Error,
                what,
                format!("{e}; its mail would stay queued"),
            )),
        }
    }
    for group in table.groups() {
        let what = format!("group {}", group.name);
        match &group.bearer {
            GroupBearer::Sis { node, server } => match config.hf.node {
                Some(_) => {
                    let server = server.as_deref().unwrap_or(&config.hf.sis_server);
                    // The daemon runs a multicast link on each SIS server its peers use.
                    let served = on_nodes
                        .iter()
                        .any(|(r, _)| matches!(r, Reach::Sis { server: s, .. } if s == server));
                    out.push(if served {
                        Finding::new(
                            Level::Ok,
                            what,
                            format!(
                                "P_MUL to group address {node} through the SIS server {server} \
                                 (SAP 2)"
                            ),
                        )
                    } else {
                        Finding::new(
                            Level::Error,
                            what,
                            format!(
                                "no peer of this gateway uses its SIS server {server}, and the \
                                 multicast link runs only on its peers' servers; its mail would \
                                 stay queued"
                            ),
                        )
                    });
                }
                None => out.push(Finding::new(
                    Level::Error,
                    what,
                    "P_MUL over STANAG 5066 needs this gateway's own node address: set node = \
                     \"w.x.y.z\" under [hf]; its mail would stay queued",
                )),
            },
            GroupBearer::PmulIp { address, .. } => match &config.hf.pmul_ip {
                Some(_) => out.push(Finding::new(
                    Level::Ok,
                    what,
                    format!("P_MUL over UDP/IP to {address}"),
                )),
                None => out.push(Finding::new(
                    Level::Error,
                    what,
                    format!(
                        "{}; `skywave run` would not start",
                        HfError::NoPmulIp {
                            group: group.name.clone()
                        }
                    ),
                )),
            },
        }
    }
    out
}

/// What the shortest window of each radio schedule holds at `[hf] assumed_bps`: a peer's
/// session, a group's multicast (each blind repeat, and the ships' acknowledgement slots after
/// it). A window the acknowledgements fill lets a multicast go only alone at its opening, which
/// an administrator choosing slots for a fleet would not guess.
fn schedules(config: &Config, table: &RoutingTable) -> Vec<Finding> {
    let bps = config.hf.assumed_bps.max(1);
    let kb = |secs: u64, copies: u64| crate::hf::window_bytes(secs, bps, copies) / 1000;
    let mut out = Vec::new();
    for peer in table.peers() {
        let Some(shortest) = peer.schedule.as_ref().and_then(|s| s.shortest_window()) else {
            continue;
        };
        out.push(Finding::new(
            Level::Ok,
            format!("peer {}", peer.name),
            format!(
 "sessions start in its windows; the shortest, {} min, carries about {} kB of mail at [hf] assumed_bps = {bps}",
                shortest / 60,
                kb(shortest, 1)
            ),
        ));
    }
    for group in table.groups() {
        let Some(shortest) = group.schedule.as_ref().and_then(|s| s.shortest_window()) else {
            continue;
        };
        let what = format!("group {}", group.name);
        let acks =
            crate::hf::pmul_link::hf_answer_ms(group.members.len(), bps, config.hf.turnaround)
                .div_ceil(1000);
        let copies = u64::from(group.repeats) + 1;
        let left = shortest.saturating_sub(acks);
        let slots = format!(
            "the {} ships' acknowledgement slots take {acks} s of it",
            group.members.len()
        );
        out.push(if kb(left, copies) == 0 {
            Finding::new(
                Level::Warning,
                what,
                format!(
 "its shortest window, {} min, holds no multicast: {slots} at [hf] assumed_bps = {bps}, so a message goes only alone at a window's opening; lengthen the window",
                    shortest / 60
                ),
            )
        } else {
            Finding::new(
                Level::Ok,
                what,
                format!(
 "multicasts start in its windows; the shortest, {} min, carries about {} kB of mail at [hf] assumed_bps = {bps} ({slots}, and each Data_PDU goes {copies} times)",
                    shortest / 60,
                    kb(left, copies)
                ),
            )
        });
    }
    out
}

/// Whether the gateway can write `dir`, or create it: a file made and removed again.
fn writable(dir: &Path) -> Result<bool, String> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {
            // A name no other file has: this process's, and the instant's.
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let probe = dir.join(format!(".skywave-check-{}-{nanos}", std::process::id()));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&probe)
            {
                Ok(_) => {
                    let _ = std::fs::remove_file(&probe);
                    Ok(true)
                }
                Err(e) => Err(format!("cannot be written: {e}")),
            }
        }
        Ok(_) => Err("is not a directory".to_owned()),
        // Missing, or under a file that is not a directory.
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            // The nearest directory that exists must take the new one.
            let Some(parent) = dir.ancestors().skip(1).find(|a| a.exists()) else {
                return Err("has no existing parent directory".to_owned());
            };
            match writable(parent) {
                Ok(_) => Ok(false),
                Err(why) => Err(format!(
                    "does not exist, and cannot be created: {} {why}",
                    parent.display()
                )),
            }
        }
        Err(e) => Err(format!("cannot be read: {e}")),
    }
}

fn state_dir(dir: &Path) -> Finding {
    let what = "state directory";
    match writable(dir) {
        Ok(true) => Finding::new(Level::Ok, what, format!("{} is writable", dir.display())),
        Ok(false) => Finding::new(
            Level::Note,
            what,
            format!(
                "{} does not exist yet; `skywave run` creates it",
                dir.display()
            ),
        ),
        Err(why) => Finding::new(
            Level::Error,
            what,
            format!("{} {why}; `skywave run` would not start", dir.display()),
        ),
    }
}

/// The spool's file system against its reserve, as `skywave status` shows it.
fn spool_disk(config: &Config) -> Option<Finding> {
    // The spool's own directory when it exists, else the nearest one that does (the file
    // system it will be on).
    let spool = config.spool_dir();
    let at = spool.ancestors().find(|a| a.exists())?;
    let space = match available_space(at) {
        Ok(space) => space,
        Err(e) => {
            return Some(Finding::new(
                Level::Warning,
                "spool disk",
                format!("cannot measure {}: {e}", at.display()),
            ));
        }
    };
    let room = Room {
        space,
        reserve: config.spool.min_free_space,
    };
    let level = if room.exhausted() {
        Level::Warning
    } else {
        Level::Ok
    };
    Some(Finding::new(
        level,
        "spool disk",
        crate::status::disk_line(Some(room)),
    ))
}

/// Whether `addr` can be listened on now.
fn bind(what: &str, addr: SocketAddr) -> Finding {
    match std::net::TcpListener::bind(addr) {
        Ok(_) => Finding::new(Level::Ok, what, format!("{addr} can be listened on")),
        Err(e) if e.kind() == ErrorKind::AddrInUse => Finding::new(
            Level::Note,
            what,
            format!(
                "{addr} is in use: by this gateway if it runs (`skywave status` says), else \
                 `skywave run` would not start"
            ),
        ),
        Err(e) if e.kind() == ErrorKind::PermissionDenied && addr.port() < 1024 => Finding::new(
            Level::Error,
            what,
            format!(
                "{addr}: {e}; a port below 1024 needs CAP_NET_BIND_SERVICE (the systemd unit in \
                 contrib/systemd grants it) or root"
            ),
        ),
        Err(e) => Finding::new(
            Level::Error,
            what,
            format!("{addr}: {e}; `skywave run` would not start"),
        ),
    }
}

/// The STARTTLS certificate and key load as the listener loads them, and the certificate's
/// dates (also a line of `skywave status`).
pub fn starttls(tls: &TlsFiles, now: SystemTime) -> Vec<Finding> {
    let what = "STARTTLS";
    if let Err(e) = crate::smtp_listener::tls_acceptor(&tls.cert, &tls.key) {
        return vec![Finding::new(
            Level::Error,
            what,
            format!("{e}; `skywave run` would not start"),
        )];
    }
    let loaded = format!("{} and {} load", tls.cert.display(), tls.key.display());
    match certificate_dates(&tls.cert) {
        Ok((not_before, not_after)) => {
            let now = now
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
            let warn_secs = i64::try_from(CERT_WARNING.as_secs()).unwrap_or(i64::MAX);
            let (level, when) = if now > not_after.0 {
                (
                    Level::Warning,
                    format!(
                        "the certificate expired on {}: clients that verify it will not send",
                        not_after.1
                    ),
                )
            } else if now < not_before.0 {
                (
                    Level::Warning,
                    format!(
                        "the certificate is not valid before {}: clients that verify it will not \
                         send",
                        not_before.1
                    ),
                )
            } else if not_after.0 - now < warn_secs {
                (
                    Level::Warning,
                    format!(
                        "the certificate expires on {}, in {} days",
                        not_after.1,
                        (not_after.0 - now) / 86_400
                    ),
                )
            } else {
                (
                    Level::Ok,
                    format!("the certificate is valid until {}", not_after.1),
                )
            };
            vec![Finding::new(level, what, format!("{loaded}; {when}"))]
        }
        Err(why) => vec![Finding::new(
            Level::Warning,
            what,
            format!("{loaded}, but the certificate's dates cannot be read: {why}"),
        )],
    }
}

/// The first certificate's validity, as unix seconds and a date to print.
type Dated = (i64, String);

fn certificate_dates(path: &Path) -> Result<(Dated, Dated), String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let der = CertificateDer::pem_file_iter(path)
        .map_err(|e| e.to_string())?
        .next()
        .ok_or_else(|| "no certificate".to_owned())?
        .map_err(|e| e.to_string())?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).map_err(|e| e.to_string())?;
    let validity = cert.validity();
    let dated =
        |t: &x509_parser::time::ASN1Time| (t.timestamp(), t.to_datetime().date().to_string());
    Ok((dated(&validity.not_before), dated(&validity.not_after)))
}

fn delivery(delivery: &Delivery) -> Finding {
    let what = "LAN delivery";
    match delivery {
        Delivery::Maildir { dir, .. } => match writable(dir) {
            Ok(true) => Finding::new(
                Level::Ok,
                what,
                format!("Maildir {} is writable", dir.display()),
            ),
            Ok(false) => Finding::new(
                Level::Note,
                what,
                format!(
                    "Maildir {} does not exist yet; the first delivery creates it",
                    dir.display()
                ),
            ),
            Err(why) => Finding::new(
                Level::Error,
                what,
                format!(
                    "Maildir {} {why}; mail for the LAN would stay queued",
                    dir.display()
                ),
            ),
        },
        Delivery::Smarthost {
            host,
            port,
            tls,
            auth,
            ..
        } => {
            let tls = match tls {
                SmarthostTls::None => "no TLS",
                SmarthostTls::Opportunistic { .. } => "STARTTLS when offered",
                SmarthostTls::Required { .. } => "STARTTLS required",
                SmarthostTls::Implicit { .. } => "TLS from the first byte",
            };
            let auth = auth
                .as_ref()
                .map_or_else(String::new, |a| format!(", AUTH as {}", a.user));
            Finding::new(
                Level::Ok,
                what,
                format!(
                    "smarthost {}, {tls}{auth} (`skywave check --probe` connects)",
                    host_port(host, *port)
                ),
            )
        }
    }
}

/// Connects to what the gateway will connect to: each SIS server its peers and groups use,
/// and the smarthost (whose greeting is read unless it speaks TLS from the first byte). Peers
/// over TCP/IP are not tried: their address is reached over the radio.
pub async fn probe(
    config: &Config,
    table: Option<&RoutingTable>,
    timeout: Duration,
) -> Vec<Finding> {
    let mut servers = BTreeSet::new();
    if let Some(table) = table {
        for peer in table.peers() {
            if let Ok(Some(Reach::Sis { server, .. })) = reach_of(&config.hf, peer) {
                servers.insert(server);
            }
        }
        for group in table.groups() {
            if let GroupBearer::Sis { server, .. } = &group.bearer {
                servers.insert(
                    server
                        .clone()
                        .unwrap_or_else(|| config.hf.sis_server.clone()),
                );
            }
        }
    }
    let mut out = Vec::new();
    for server in servers {
        let what = format!("SIS server {server}");
        out.push(match connect(&server, timeout).await {
            Ok(_) => Finding::new(
                Level::Ok,
                what,
                "accepts connections (`skywave sis probe` tries a SAP)",
            ),
            Err(why) => Finding::new(
                Level::Warning,
                what,
                format!("{why}; mail over STANAG 5066 waits until it answers"),
            ),
        });
    }
    if let Delivery::Smarthost {
        host, port, tls, ..
    } = &config.delivery
    {
        let address = host_port(host, *port);
        let what = format!("smarthost {address}");
        let finding = match connect(&address, timeout).await {
            Err(why) => Finding::new(
                Level::Warning,
                what,
                format!("{why}; mail for the LAN would wait until it answers"),
            ),
            Ok(_) if matches!(tls, SmarthostTls::Implicit { .. }) => {
                Finding::new(Level::Ok, what, "accepts connections")
            }
            Ok(stream) => match greeting(stream, timeout).await {
                Ok(line) if line.starts_with("220") => {
                    Finding::new(Level::Ok, what, format!("greets: {line}"))
                }
                Ok(line) => Finding::new(
                    Level::Error,
                    what,
                    format!("greets with {line:?}, not 220: it does not take mail now"),
                ),
                Err(why) => Finding::new(Level::Warning, what, why),
            },
        };
        out.push(finding);
    }
    out
}

async fn connect(address: &str, timeout: Duration) -> Result<tokio::net::TcpStream, String> {
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(address)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(format!("cannot connect: {e}")),
        Err(_) => Err(format!("no answer within {} s", timeout.as_secs())),
    }
}

/// The server's first reply line (at most 512 octets, RFC 5321's reply line limit).
async fn greeting(stream: tokio::net::TcpStream, timeout: Duration) -> Result<String, String> {
    use tokio::io::AsyncBufReadExt;
    let mut reader = tokio::io::BufReader::new(tokio::io::AsyncReadExt::take(stream, 512));
    let mut line = Vec::new();
    let read = reader.read_until(b'\n', &mut line);
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(0)) => Err("closed the connection without a greeting".to_owned()),
        Ok(Ok(_)) => Ok(String::from_utf8_lossy(&line).trim_end().to_owned()),
        Ok(Err(e)) => Err(format!("cannot read its greeting: {e}")),
        Err(_) => Err(format!("sent no greeting within {} s", timeout.as_secs())),
    }
}

/// A self-signed certificate for `gw.ship.example` and its key, as `cert.pem` and `key.pem` in
/// `dir`, valid as rcgen makes them: from 1975-01-01 to 4096-01-01.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) fn self_signed_files(dir: &Path) {
    let cert = rcgen::generate_simple_self_signed(vec!["gw.ship.example".to_owned()]).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const ROUTES: &str = "[lan]\ndomains = [\"ship.example\"]\nrelay_networks = [\"127.0.0.0/8\"]\n\
        [[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n\
        [[route]]\nmatch = \"*\"\nto = \"shore\"\n";

    /// A gateway configuration in `dir` with `extra` appended, its routing table `routes`;
    /// ports are the system's choice unless `extra` names them.
    fn config_in(dir: &Path, extra: &str, routes: &str) -> Config {
        std::fs::write(dir.join("routes.toml"), routes).unwrap();
        let text = format!(
            "hostname = \"gw.ship.example\"\nstate_dir = \"state\"\nroutes = \"routes.toml\"\n{extra}"
        );
        crate::config::parse("skywave.toml", &text, dir).unwrap()
    }

    fn with_node(smtp: &str) -> String {
        format!(
            "[smtp]\nlisten = \"{smtp}\"\n[metrics]\nlisten = \"127.0.0.1:0\"\n[hf]\nnode = \"0.0.2.1\"\n"
        )
    }

    /// The check of `config` now, its routing table loaded as `skywave check` loads it.
    fn check_now(config: &Config) -> Vec<Finding> {
        check(
            config,
            &RoutingTable::load(&config.routes),
            SystemTime::now(),
        )
    }

    fn lines(findings: &[Finding]) -> Vec<String> {
        findings.iter().map(ToString::to_string).collect()
    }

    fn at(level: Level, what: &str, findings: &[Finding]) -> Vec<String> {
        findings
            .iter()
            .filter(|f| f.level == level && f.what == what)
            .map(|f| f.text.clone())
            .collect()
    }

    #[test]
    fn a_sound_configuration_has_no_error_and_says_how_each_peer_is_reached() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_in(dir.path(), &with_node("127.0.0.1:0"), ROUTES);
        let found = check_now(&config);
        assert!(
            found.iter().all(|f| f.level < Level::Warning),
            "{:#?}",
            lines(&found)
        );
        assert_eq!(
            at(Level::Ok, "peer shore", &found),
            ["HMTP to node 0.0.1.1 through the SIS server 127.0.0.1:5066 (SAP 3)"]
        );
        assert_eq!(
            at(Level::Note, "state directory", &found),
            [format!(
                "{} does not exist yet; `skywave run` creates it",
                dir.path().join("state").display()
            )]
        );
        let routes = at(Level::Ok, "routing table", &found);
        // As `skywave routes check` says it: [[route]] entries, not the LAN's own rules.
        assert!(routes[0].ends_with(": 1 peer, 1 route"), "{routes:?}");
        assert_eq!(
            at(Level::Ok, "SMTP listener", &found),
            ["127.0.0.1:0 can be listened on"]
        );
        // Once the directories exist they are checked by writing into them.
        std::fs::create_dir_all(dir.path().join("state/maildir")).unwrap();
        let found = check_now(&config);
        assert_eq!(
            at(Level::Ok, "state directory", &found),
            [format!(
                "{} is writable",
                dir.path().join("state").display()
            )]
        );
        assert_eq!(at(Level::Ok, "LAN delivery", &found).len(), 1);
        assert!(std::fs::read_dir(dir.path().join("state")).unwrap().count() == 1);
    }

    #[test]
    fn what_run_would_refuse_or_leave_queued_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        // A table that does not load: its diagnostics are quoted.
        let config = config_in(
            dir.path(),
            &with_node("127.0.0.1:0"),
            "[[peer]]\nname = 3\n",
        );
        let found = check_now(&config);
        let e = at(Level::Error, "routing table", &found);
        assert!(
            e[0].contains("does not load") && e[0].contains("routes.toml:2"),
            "{e:?}"
        );

        // No node of our own: the peer's mail would stay queued.
        let config = config_in(dir.path(), "[smtp]\nlisten = \"127.0.0.1:0\"\n", ROUTES);
        let e = at(Level::Error, "peer shore", &check_now(&config));
        assert!(e[0].contains("needs its own node address") && e[0].ends_with("stay queued"));

        // Two peers on one node of one SIS server, one naming the gateway's default server
        // (which the routing table alone cannot know, and only warns of, but the daemon cannot
        // start two links on), and a group over IP without [pmul_ip].
        let routes = "[[peer]]\nname = \"b\"\nnode = \"0.0.1.1\"\nprotocol = \"cftp\"\n\
            sis_server = \"127.0.0.1:5066\"\n[[peer]]\nname = \"c\"\nnode = \"0.0.1.1\"\nprotocol = \"cftp\"\n\
            [[peer]]\nname = \"e\"\nbearer = \"pmul-ip\"\nip = \"10.1.0.13\"\n\
            [[group]]\nname = \"fleet\"\nbearer = \"pmul-ip\"\naddress = \"239.192.0.1\"\nmembers = [\"e\"]\n\
            [[route]]\nmatch = \"b.example\"\nto = \"b\"\n[[route]]\nmatch = \"c.example\"\nto = \"c\"\n\
            [[route]]\nmatch = \"*\"\nto = \"fleet\"\n";
        let config = config_in(dir.path(), &with_node("127.0.0.1:0"), routes);
        let found = check_now(&config);
        let errors: Vec<String> = found
            .iter()
            .filter(|f| f.level == Level::Error)
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errors,
            [
                "ERROR    peer c: peers b and c have the same node address 0.0.1.1; `skywave run` \
                 would not start",
                "ERROR    group fleet: group fleet runs P_MUL over IP (bearer = \"pmul-ip\"), so this \
                 gateway needs [pmul_ip] with its own address in the gateway configuration; \
                 `skywave run` would not start",
            ],
            "{:#?}",
            lines(&found)
        );
        assert_eq!(
            at(Level::Ok, "peer e", &found),
            ["P_MUL over UDP/IP only, through its group"]
        );
    }

    #[test]
    fn a_group_over_sis_needs_a_peer_on_its_server() {
        let dir = tempfile::tempdir().unwrap();
        let routes = |group_server: &str| {
            format!(
                "[[peer]]\nname = \"ship1\"\nnode = \"0.0.2.1\"\nprotocol = \"hmtp\"\n\
                 [[group]]\nname = \"fleet\"\nnode = \"16.0.9.9\"\nmembers = [\"ship1\"]\n{group_server}\
                 [[route]]\nmatch = \"ship1.example\"\nto = \"ship1\"\n\
                 [[route]]\nmatch = \"fleet.example\"\nto = \"fleet\"\n"
            )
        };
        let group = |routes: &str| {
            let config = config_in(dir.path(), &with_node("127.0.0.1:0"), routes);
            let found = check_now(&config);
            found
                .into_iter()
                .filter(|f| f.what == "group fleet")
                .map(|f| (f.level, f.text))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            group(&routes("")),
            [(
                Level::Ok,
                "P_MUL to group address 16.0.9.9 through the SIS server 127.0.0.1:5066 (SAP 2)"
                    .to_owned()
            )]
        );
        assert_eq!(
            group(&routes("sis_server = \"10.0.0.9:5066\"\n")),
            [(
                Level::Error,
                "no peer of this gateway uses its SIS server 10.0.0.9:5066, and the multicast \
                 link runs only on its peers' servers; its mail would stay queued"
                    .to_owned()
            )]
        );
    }

    #[test]
    fn a_schedule_says_what_its_shortest_window_holds() {
        let dir = tempfile::tempdir().unwrap();
        let routes = |window: &str| {
            let mut r = String::new();
            for i in 1..=10 {
                let schedule = if i == 10 {
                    "schedule = [\"06:00-07:00\"]\n"
                } else {
                    ""
                };
                r.push_str(&format!(
                    "[[peer]]\nname = \"ship{i}\"\nnode = \"0.0.3.{i}\"\nprotocol = \"hmtp\"\n{schedule}\
                     [[route]]\nmatch = \"ship{i}.example\"\nto = \"ship{i}\"\n"
                ));
            }
            format!(
                "{r}[[group]]\nname = \"fleet\"\nnode = \"16.0.9.9\"\nmembers = [{}]\n\
                 schedule = [\"{window}\"]\n",
                (1..=10)
                    .map(|i| format!("\"ship{i}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        // At the default 300 bit/s (37 whole bytes a second, as the link's admission counts):
        // a peer's hour carries 133 kB; ten ships' acks take
        // 2 + 11 x 6.3 + 10 = 82 s of a group's window, and each PDU goes twice.
        let config = config_in(dir.path(), &with_node("127.0.0.1:0"), &routes("*:00-*:05"));
        let found = check_now(&config);
        assert_eq!(
            at(Level::Ok, "peer ship10", &found)[1..],
            [
                "sessions start in its windows; the shortest, 60 min, carries about 133 kB of mail \
              at [hf] assumed_bps = 300"
            ]
        );
        assert_eq!(
            at(Level::Ok, "group fleet", &found)[1],
            "multicasts start in its windows; the shortest, 5 min, carries about 4 kB of mail at \
             [hf] assumed_bps = 300 (the 10 ships' acknowledgement slots take 82 s of it, and \
             each Data_PDU goes 2 times)"
        );
        // A one-minute window is all acknowledgements: a warning that says what follows.
        let config = config_in(dir.path(), &with_node("127.0.0.1:0"), &routes("*:00-*:01"));
        let w = at(Level::Warning, "group fleet", &check_now(&config));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with(
                "its shortest window, 1 min, holds no multicast: the 10 ships' \
                 acknowledgement slots take 82 s of it"
            ),
            "{w:?}"
        );
    }

    #[test]
    fn directories_that_cannot_be_written_or_made_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), "").unwrap();
        let config = config_in(
            dir.path(),
            &format!(
                "{}[delivery]\nmaildir = \"file/Maildir\"\n",
                with_node("127.0.0.1:0")
            ),
            ROUTES,
        );
        let mut config = config;
        config.state_dir = dir.path().join("file/state");
        let found = check_now(&config);
        let state = at(Level::Error, "state directory", &found);
        assert!(state[0].contains("cannot be created") && state[0].contains("not a directory"));
        let maildir = at(Level::Error, "LAN delivery", &found);
        assert!(
            maildir[0].ends_with("mail for the LAN would stay queued"),
            "{maildir:?}"
        );
    }

    #[test]
    fn a_port_in_use_is_a_note_for_a_gateway_that_may_be_running() {
        let dir = tempfile::tempdir().unwrap();
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let config = config_in(dir.path(), &with_node(&addr.to_string()), ROUTES);
        let found = check_now(&config);
        let note = at(Level::Note, "SMTP listener", &found);
        assert!(
            note[0].starts_with(&format!("{addr} is in use")),
            "{note:?}"
        );
    }

    #[test]
    fn the_starttls_certificate_is_loaded_and_dated() {
        let dir = tempfile::tempdir().unwrap();
        self_signed_files(dir.path());
        std::fs::write(dir.path().join("junk.pem"), "not a key\n").unwrap();
        let tls = |key: &str| {
            format!(
                "{}[smtp.tls]\ncert = \"cert.pem\"\nkey = \"{key}\"\n",
                with_node("127.0.0.1:0")
            )
        };
        let config = config_in(dir.path(), &tls("key.pem"), ROUTES);
        let year = |y: u64| UNIX_EPOCH + Duration::from_secs((y - 1970) * 31_556_952);
        let dated = |when: SystemTime| {
            check(&config, &RoutingTable::load(&config.routes), when)
                .into_iter()
                .filter(|f| f.what == "STARTTLS")
                .map(|f| (f.level, f.text.rsplit("; ").next().unwrap().to_owned()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            dated(year(2026)),
            [(
                Level::Ok,
                "the certificate is valid until 4096-01-01".to_owned()
            )]
        );
        let (_, (not_after, _)) = certificate_dates(&dir.path().join("cert.pem")).unwrap();
        let secs = u64::try_from(not_after).unwrap() - 10 * 86_400 - 3600;
        assert_eq!(
            dated(UNIX_EPOCH + Duration::from_secs(secs)),
            [(
                Level::Warning,
                "the certificate expires on 4096-01-01, in 10 days".to_owned()
            )]
        );
        let after = dated(year(4097));
        assert_eq!(after[0].0, Level::Warning);
        assert!(
            after[0]
                .1
                .starts_with("the certificate expired on 4096-01-01")
        );
        let before = dated(year(1971));
        assert!(
            before[0]
                .1
                .starts_with("the certificate is not valid before 1975-01-01")
        );
        // A key that does not load stops `skywave run`.
        let config = config_in(dir.path(), &tls("junk.pem"), ROUTES);
        let e = at(Level::Error, "STARTTLS", &check_now(&config));
        assert!(
            e[0].contains("junk.pem") && e[0].ends_with("would not start"),
            "{e:?}"
        );
    }

    #[test]
    fn p_mul_over_ip_must_send_from_an_address_of_this_machine() {
        let dir = tempfile::tempdir().unwrap();
        let pmul = |address: &str| {
            let extra = format!(
                "{}[pmul_ip]\naddress = \"{address}\"\npcap = \"nowhere/x/pmul.pcap\"\n",
                with_node("127.0.0.1:0")
            );
            check_now(&config_in(dir.path(), &extra, ROUTES))
                .into_iter()
                .filter(|f| f.what == "P_MUL over IP")
                .map(|f| (f.level, f.text))
                .collect::<Vec<_>>()
        };
        let here = pmul("127.0.0.1");
        assert_eq!(
            here[0],
            (
                Level::Ok,
                "from 127.0.0.1, ports 2751, 2752, 2753, 2754".to_owned()
            )
        );
        // The capture's directory does not exist, and `skywave run` does not make it.
        let pcap = dir.path().join("nowhere/x/pmul.pcap");
        assert_eq!(
            here[1],
            (
                Level::Error,
                format!(
                    "the capture {} cannot be made: its directory {} does not exist; `skywave \
                     run` would not start",
                    pcap.display(),
                    dir.path().join("nowhere/x").display()
                )
            )
        );
        std::fs::create_dir_all(dir.path().join("nowhere/x")).unwrap();
        assert_eq!(pmul("127.0.0.1").len(), 1);
        // TEST-NET-1 (RFC 5737) is no address of any machine.
        let elsewhere = pmul("192.0.2.1");
        assert_eq!(
            elsewhere[0],
            (
                Level::Error,
                "192.0.2.1 is not an address of this machine ([pmul_ip] address); `skywave run` \
                 would not start"
                    .to_owned()
            )
        );
    }

    #[test]
    fn an_ipv6_smarthost_is_written_in_brackets() {
        assert_eq!(host_port("fd00::25", 25), "[fd00::25]:25");
        assert_eq!(host_port("relay.lan", 587), "relay.lan:587");
        assert!(host_port("::1", 25).parse::<SocketAddr>().is_ok());
    }

    #[tokio::test]
    async fn a_probe_connects_to_the_sis_server_and_reads_the_smarthosts_greeting() {
        use tokio::io::AsyncWriteExt;
        let dir = tempfile::tempdir().unwrap();
        let sis = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let sis_addr = sis.local_addr().unwrap();
        let smarthost = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let smarthost_addr = smarthost.local_addr().unwrap();
        let greeting = |listener: tokio::net::TcpListener, line: &'static [u8]| {
            tokio::spawn(async move {
                let (mut s, _) = listener.accept().await.unwrap();
                s.write_all(line).await.unwrap();
                // Held open until the probe has read and gone.
                let _ = tokio::io::AsyncReadExt::read(&mut s, &mut [0u8; 1]).await;
                listener
            })
        };
        let extra = format!(
            "{}sis_server = \"{sis_addr}\"\n[delivery]\nsmarthost = \"{smarthost_addr}\"\n",
            with_node("127.0.0.1:0")
        );
        let config = config_in(dir.path(), &extra, ROUTES);
        let table = RoutingTable::load(&config.routes).unwrap();
        let answering = greeting(smarthost, b"220 relay.lan ESMTP\r\n");
        let found = probe(&config, Some(&table), Duration::from_secs(5)).await;
        assert_eq!(
            lines(&found),
            [
                format!(
                    "ok       SIS server {sis_addr}: accepts connections (`skywave sis probe` tries a SAP)"
                ),
                format!("ok       smarthost {smarthost_addr}: greets: 220 relay.lan ESMTP"),
            ]
        );
        // A smarthost that refuses us says so at once; a server that is gone is a warning.
        let smarthost = answering.await.unwrap();
        let refusing = greeting(smarthost, b"554 no relay for you\r\n");
        drop(sis);
        let found = probe(&config, Some(&table), Duration::from_secs(5)).await;
        refusing.abort();
        assert_eq!(found[0].level, Level::Warning);
        assert!(
            found[0].text.starts_with("cannot connect"),
            "{:?}",
            found[0]
        );
        assert_eq!(found[1].level, Level::Error);
        assert!(
            found[1].text.contains("\"554 no relay for you\""),
            "{:?}",
            found[1]
        );
    }
}
