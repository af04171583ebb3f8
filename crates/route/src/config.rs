//! Reading `routes.toml`: the serde model of the file (every key spanned, unknown keys refused)
//! and the semantic checks that turn it into a [`RoutingTable`], with a [`Diagnostic`] carrying
//! file:line:column for every mistake.
//!
//! All semantic errors are collected, not just the first, so that one `skywave routes check`
//! shows everything to fix. A TOML syntax or type error stops at once (the `toml` parser does).

use std::collections::HashMap;
use std::ops::Range;

use serde::Deserialize;
use skywave_smtp::shrink::{DEFAULT_QUALITY, ImageLimit, ImageLimitError, MIN_SIDE};
use skywave_smtp::strip::FieldPattern;
use toml::Spanned;

use crate::diag::{Diagnostic, Severity};
use crate::model::{
    AckMode, Bearer, Cidr, Compression, DEFAULT_FALLBACK_AFTER, DEFAULT_PROBE_EVERY, Fallback,
    Group, GroupBearer, Lan, Peer, Priority, Protocol,
};
use crate::pattern::Pattern;
use crate::schedule::Schedule;
use crate::table::{RoutingTable, Rule, RuleOrigin, Target};

/// Largest routing table accepted, in bytes. A hand-edited table is a few kilobytes.
pub const MAX_FILE_SIZE: usize = 1 << 20;

/// Default largest message for a peer: 1 MB (about an hour at 2400 bit/s).
pub const DEFAULT_SIZE_LIMIT: u64 = 1_000_000;
/// Default byte budget of one batch: 32 KiB (under two minutes at 2400 bit/s).
pub const DEFAULT_BATCH_BYTES: u64 = 32 * 1024;
/// Networks allowed to relay when `[lan] relay_networks` is not given: loopback only.
pub const DEFAULT_RELAY_NETWORKS: [&str; 2] = ["127.0.0.0/8", "::1/128"];

/// The reserved target name that means "deliver on the LAN".
pub const LAN: &str = "lan";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    lan: Option<Spanned<RawLan>>,
    #[serde(default)]
    peer: Vec<Spanned<RawPeer>>,
    #[serde(default)]
    route: Vec<Spanned<RawRoute>>,
    #[serde(default)]
    group: Vec<Spanned<RawGroup>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    name: Spanned<String>,
    node: Option<Spanned<String>>,
    #[serde(default)]
    members: Vec<Spanned<String>>,
    repeats: Option<Spanned<i64>>,
    sis_server: Option<Spanned<String>>,
    bearer: Option<Spanned<GroupBearerKind>>,
    address: Option<Spanned<String>>,
    dynamic: Option<Spanned<String>>,
    schedule: Option<Spanned<Vec<Spanned<String>>>>,
    schedule_bypass: Option<Spanned<IntOrStr>>,
    strip_headers: Option<Spanned<BoolOrList>>,
    text_only: Option<bool>,
    shrink_images: Option<Spanned<i64>>,
    image_quality: Option<Spanned<i64>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum GroupBearerKind {
    Sis,
    PmulIp,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLan {
    #[serde(default)]
    domains: Vec<Spanned<String>>,
    relay_networks: Option<Vec<Spanned<String>>>,
    authenticated_relay: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum BearerKind {
    Sis,
    Tcp,
    PmulIp,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPeer {
    name: Spanned<String>,
    node: Option<Spanned<String>>,
    protocol: Option<Spanned<Protocol>>,
    skywave: Option<Spanned<bool>>,
    xcut: Option<Spanned<bool>>,
    compression: Option<Spanned<String>>,
    priority: Option<Spanned<IntOrStr>>,
    size_limit: Option<Spanned<IntOrStr>>,
    batch_bytes: Option<Spanned<IntOrStr>>,
    bearer: Option<Spanned<BearerKind>>,
    sis_server: Option<Spanned<String>>,
    tcp_address: Option<Spanned<String>>,
    hold: Option<bool>,
    hold_above: Option<Spanned<IntOrStr>>,
    emcon: Option<bool>,
    pmul_acks: Option<Spanned<String>>,
    ip: Option<Spanned<String>>,
    schedule: Option<Spanned<Vec<Spanned<String>>>>,
    schedule_bypass: Option<Spanned<IntOrStr>>,
    fallback: Option<Spanned<String>>,
    fallback_after: Option<Spanned<IntOrStr>>,
    probe_every: Option<Spanned<IntOrStr>>,
    strip_headers: Option<Spanned<BoolOrList>>,
    text_only: Option<Spanned<bool>>,
    shrink_images: Option<Spanned<i64>>,
    image_quality: Option<Spanned<i64>>,
}

/// `strip_headers = true` or `strip_headers = ["DKIM-Signature", "X-*"]`.
#[derive(Debug)]
enum BoolOrList {
    Bool(bool),
    List(Vec<String>),
}

impl<'de> Deserialize<'de> for BoolOrList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = BoolOrList;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "true (the default list), false, or a list of header field names such as [\"DKIM-Signature\", \"X-*\"]",
                )
            }
            fn visit_bool<E>(self, v: bool) -> Result<BoolOrList, E> {
                Ok(BoolOrList::Bool(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<BoolOrList, A::Error> {
                let mut list = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    list.push(name);
                }
                Ok(BoolOrList::List(list))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    #[serde(rename = "match")]
    pattern: Spanned<String>,
    to: Spanned<String>,
    priority: Option<Spanned<IntOrStr>>,
}

/// A value that may be written as an integer or as a string (`priority = 2` or
/// `priority = "immediate"`; `size_limit = 500_000` or `size_limit = "500 kB"`).
#[derive(Debug)]
enum IntOrStr {
    Int(i64),
    Str(String),
}

impl<'de> Deserialize<'de> for IntOrStr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = IntOrStr;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_i64<E>(self, v: i64) -> Result<IntOrStr, E> {
                Ok(IntOrStr::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<IntOrStr, E> {
                i64::try_from(v)
                    .map(IntOrStr::Int)
                    .map_err(|_| E::custom("integer too large"))
            }
            fn visit_str<E>(self, v: &str) -> Result<IntOrStr, E> {
                Ok(IntOrStr::Str(v.to_owned()))
            }
        }
        d.deserialize_any(V)
    }
}

/// Collects diagnostics against one file's text.
struct Checker<'a> {
    file: &'a str,
    text: &'a str,
    diagnostics: Vec<Diagnostic>,
}

impl Checker<'_> {
    /// An error for each of `keys` that is set where it has no meaning (`why` of its name).
    fn refuse_keys(
        &mut self,
        keys: &[(&str, &Option<Spanned<String>>)],
        why: impl Fn(&str) -> String,
    ) {
        for (key, v) in keys {
            if let Some(v) = v {
                self.error(v.span(), why(key));
            }
        }
    }

    fn error(&mut self, span: Range<usize>, message: String) {
        self.diagnostics.push(Diagnostic::at(
            Severity::Error,
            self.file,
            self.text,
            span,
            message,
        ));
    }

    fn warning(&mut self, span: Range<usize>, message: String) {
        self.diagnostics.push(Diagnostic::at(
            Severity::Warning,
            self.file,
            self.text,
            span,
            message,
        ));
    }

    fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    /// The span of a table's `[[header]]` line: serde spans of array-of-tables entries start
    /// at the header, and the header is what a person looks for.
    fn header_span(&self, span: &Range<usize>) -> Range<usize> {
        let start = span.start.min(self.text.len());
        let rest = &self.text[start..];
        let len = rest.find('\n').unwrap_or(rest.len());
        start..start + len.min(span.end.saturating_sub(start)).max(1)
    }

    fn priority(&mut self, value: &Spanned<IntOrStr>) -> Option<Priority> {
        let parsed = match value.get_ref() {
            IntOrStr::Int(n) => Priority::new(*n),
            IntOrStr::Str(s) => Priority::from_name(s),
        };
        if parsed.is_none() {
            let found = match value.get_ref() {
                IntOrStr::Int(n) => n.to_string(),
                IntOrStr::Str(s) => format!("\"{s}\""),
            };
            self.error(
                value.span(),
                format!(
                    "invalid priority {found}; expected an MT-PRIORITY number from -9 to 9, or one of \
                     deferred (-4), routine (-2), priority (0), immediate (2), flash (4), override (6)"
                ),
            );
        }
        parsed
    }

    fn size(&mut self, key: &str, value: &Spanned<IntOrStr>) -> Option<u64> {
        let parsed = match value.get_ref() {
            IntOrStr::Int(n) => u64::try_from(*n).ok().filter(|&n| n > 0),
            IntOrStr::Str(s) => parse_size(s).filter(|&n| n > 0),
        };
        if parsed.is_none() {
            let found = match value.get_ref() {
                IntOrStr::Int(n) => n.to_string(),
                IntOrStr::Str(s) => format!("\"{s}\""),
            };
            self.error(
                value.span(),
                format!(
                    "invalid {key} {found}; expected a positive number of bytes, e.g. 500_000 or \"500 kB\" \
                     (units: B, kB, KiB, MB, MiB, GB, GiB)"
                ),
            );
        }
        parsed
    }
}

/// Parses `"500 kB"`, `"2 MB"`, `"64KiB"`, `"1000"`.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '_'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(digits_end);
    let number: String = number.chars().filter(|&c| c != '_').collect();
    if number.is_empty() || number.len() > 19 {
        return None;
    }
    let number: u64 = number.parse().ok()?;
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "k" | "kB" | "KB" => 1_000,
        "KiB" => 1 << 10,
        "M" | "MB" => 1_000_000,
        "MiB" => 1 << 20,
        "G" | "GB" => 1_000_000_000,
        "GiB" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(factor)
}

/// Turns a `toml` deserialisation error into a diagnostic. The `toml` messages say what was
/// expected; several-line messages are joined so that the headline stays one line.
fn toml_error(file: &str, text: &str, err: &toml::de::Error) -> Diagnostic {
    let message = err
        .message()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    let message = improve_toml_message(&message);
    let span = err.span().unwrap_or(0..0);
    Diagnostic::at(Severity::Error, file, text, span, message)
}

/// Adds the hint a person needs to the few `toml` messages that are cryptic on their own.
fn improve_toml_message(message: &str) -> String {
    if message.starts_with("invalid type: map, expected a sequence") {
        return format!(
            "{message}; peers and routes are arrays of tables: write [[peer]] or [[route]] with double brackets"
        );
    }
    if message == "duplicate key" {
        return "duplicate key: it is already set in this table; keep one".to_owned();
    }
    if message.contains("unknown variant") && message.contains("`hmtp`") {
        return message.replacen("unknown variant", "unknown protocol", 1);
    }
    if message.contains("unknown variant") && message.contains("`sis`") {
        return message.replacen("unknown variant", "unknown bearer", 1);
    }
    message.to_owned()
}

/// Parses and checks a routing table. `file` is the name used in diagnostics.
pub(crate) fn parse(file: &str, text: &str) -> Result<RoutingTable, Vec<Diagnostic>> {
    if text.len() > MAX_FILE_SIZE {
        return Err(vec![Diagnostic::at(
            Severity::Error,
            file,
            "",
            0..0,
            format!(
                "file is {} bytes; a routing table may be at most {MAX_FILE_SIZE} bytes",
                text.len()
            ),
        )]);
    }
    let raw: RawFile = match toml::from_str(text) {
        Ok(raw) => raw,
        Err(err) => return Err(vec![toml_error(file, text, &err)]),
    };
    let mut ck = Checker {
        file,
        text,
        diagnostics: Vec::new(),
    };

    let peers = check_peers(&mut ck, &raw.peer);
    let groups = check_groups(&mut ck, &raw.group, &peers);
    let (lan, local_rules) = check_lan(&mut ck, raw.lan.as_ref());
    let mut rules = local_rules;
    check_routes(&mut ck, &raw.route, &peers, &groups, &mut rules);

    if raw.route.is_empty() && rules.is_empty() {
        ck.error(
            0..0,
            "no routes: the table has no [[route]] entries and no [lan] domains, so no mail \
             could go anywhere; add e.g. [[route]] with match = \"*\" and to = \"shore\""
                .to_owned(),
        );
    }

    // Two peers at the same node with the same protocol: one is probably a copy-paste slip.
    // Through the same SIS server it cannot work at all: the gateway runs one link per node
    // and SAP there, and would not start (`hf::HfError::SameNode` in the gateway).
    for (i, (peer, span)) in peers.iter().enumerate() {
        let twin = peers[..i].iter().find(|(other, _)| {
            other.node.is_some() && other.node == peer.node && other.protocol == peer.protocol
        });
        if let (Some((other, _)), Some(node)) = (twin, peer.node) {
            if matches!(peer.bearer, Bearer::Sis { .. }) && other.bearer == peer.bearer {
                ck.error(
                    span.clone(),
                    format!(
                        "peers \"{}\" (line {}) and \"{}\" both speak {} to node {node} through the same SIS server; the gateway runs one link per node there and would not start: give this peer its own node, or remove it",
                        other.name, other.line, peer.name, peer.protocol
                    ),
                );
            } else {
                ck.warning(
                    span.clone(),
                    format!(
                        "peers \"{}\" (line {}) and \"{}\" both speak {} to node {node}: mail for both goes to the same place",
                        other.name, other.line, peer.name, peer.protocol
                    ),
                );
            }
        }
    }

    // Peers that no route uses: probably a typo in a route or a leftover. A member of a group
    // that routes use is reached through it, and a fallback through the peer it stands behind.
    for (i, (peer, span)) in peers.iter().enumerate() {
        let used = rules.iter().any(|r| match r.target {
            Target::Peer(p) => p == i,
            Target::Group(g) => groups
                .get(g)
                .is_some_and(|(g, _)| g.members.contains(&peer.name)),
            Target::Lan => false,
        }) || peers
            .iter()
            .any(|(p, _)| p.fallback.as_ref().is_some_and(|f| f.peer == peer.name));
        if !used {
            ck.warning(
                span.clone(),
                format!(
                    "peer \"{}\" is never used: no [[route]] sends mail to it",
                    peer.name
                ),
            );
        }
    }

    let errors = ck.diagnostics.iter().any(|d| d.severity == Severity::Error);
    if errors {
        return Err(ck.diagnostics);
    }
    let peers = peers.into_iter().map(|(p, _)| p).collect();
    let groups = groups.into_iter().map(|(g, _)| g).collect();
    Ok(RoutingTable::new(
        file.to_owned(),
        peers,
        groups,
        rules,
        lan,
        ck.diagnostics,
    ))
}

/// A peer's or group's name is also a file name under the state directory (its
/// de-duplication memory, what its link remembers), so "." and ".." are no names.
fn valid_peer_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.bytes().any(|b| b != b'.')
}

/// Checks the `[[peer]]` entries. Returns every peer that is complete enough to be referred to
/// (even with errors in other keys, so that routes naming it do not also fail), with the span of
/// its header for later messages.
fn check_peers(ck: &mut Checker<'_>, raw: &[Spanned<RawPeer>]) -> Vec<(Peer, Range<usize>)> {
    let mut peers: Vec<(Peer, Range<usize>)> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for entry in raw {
        let p = entry.get_ref();
        let header = ck.header_span(&entry.span());
        let line = ck.line_of(entry.span().start);
        let name = p.name.get_ref().clone();

        if !valid_peer_name(&name) {
            ck.error(
                p.name.span(),
                format!(
                    "invalid peer name \"{name}\"; expected 1-64 letters, digits, '-', '_' or '.', not only dots"
                ),
            );
        } else if name.eq_ignore_ascii_case(LAN) {
            ck.error(
                p.name.span(),
                format!(
                    "peer name \"{name}\" is reserved: routes use to = \"lan\" for delivery on the LAN; choose another name"
                ),
            );
        }
        // A duplicate is reported and then left out, so that routes resolve to the first
        // definition and the copy is not also reported as unused.
        let duplicate = seen.get(&name).copied();
        if let Some(first) = duplicate {
            ck.error(
                p.name.span(),
                format!("duplicate peer name \"{name}\"; first defined at line {first}"),
            );
        } else {
            seen.insert(name.clone(), line);
        }

        let pmul_only = p
            .bearer
            .as_ref()
            .is_some_and(|b| *b.get_ref() == BearerKind::PmulIp);
        let protocol = match (&p.protocol, pmul_only) {
            (Some(proto), _) => *proto.get_ref(),
            (None, true) => Protocol::Pmul,
            (None, false) => {
                ck.error(
                    header.clone(),
                    format!(
                        "peer \"{name}\" has no protocol; expected protocol = \"hmtp\", \"cftp\" or \"smtp\" (or bearer = \"pmul-ip\" for a peer reached only by P_MUL over IP)"
                    ),
                );
                Protocol::Hmtp
            }
        };
        let skywave = p.skywave.as_ref().is_some_and(|s| *s.get_ref());
        let xcut = match &p.xcut {
            Some(x) if *x.get_ref() => {
                if let Some(why) = xcut_problem(&name, protocol, skywave) {
                    ck.error(x.span(), why);
                }
                true
            }
            _ => false,
        };

        let node = p
            .node
            .as_ref()
            .and_then(|n| match crate::model::parse_peer_node(n.get_ref()) {
                Ok(node) => Some(node),
                Err(e) => {
                    ck.error(n.span(), e.to_string());
                    None
                }
            });

        let compression = match &p.compression {
            None => Compression::None,
            Some(c) => match c.get_ref().parse::<Compression>() {
                Err(e) => {
                    ck.error(c.span(), e.to_string());
                    Compression::None
                }
                Ok(comp) => {
                    if let Some(why) = compression_problem(&name, protocol, skywave, comp) {
                        ck.error(c.span(), why);
                    }
                    comp
                }
            },
        };

        let bearer_kind = match protocol {
            Protocol::Hmtp | Protocol::Cftp => BearerKind::Sis,
            Protocol::Smtp => BearerKind::Tcp,
            Protocol::Pmul => BearerKind::PmulIp,
        };
        if let Some(b) = &p.bearer
            && *b.get_ref() != bearer_kind
        {
            let message = match (protocol, b.get_ref()) {
                (_, BearerKind::PmulIp) => format!(
                    "bearer \"pmul-ip\" reaches a peer only by P_MUL over UDP/IP (protocol \"pmul\", or leave protocol out); \
                     a peer that speaks {protocol} keeps its own bearer and joins a pmul-ip group for multicast"
                ),
                (Protocol::Pmul, _) => "protocol \"pmul\" runs over bearer \"pmul-ip\" (P_MUL over UDP/IP multicast)".to_owned(),
                (Protocol::Smtp, _) => "protocol \"smtp\" runs over bearer \"tcp\" (TCP/IP, e.g. through an IP-over-HF router); \
                                   bearer \"sis\" carries hmtp and cftp only"
                    .to_owned(),
                _ => format!(
                    "protocol \"{protocol}\" runs over bearer \"sis\" (a STANAG 5066 server); \
                     bearer \"tcp\" is only for protocol \"smtp\""
                ),
            };
            ck.error(b.span(), message);
        }
        let ip = p.ip.as_ref().and_then(|v| {
            match v.get_ref().parse::<std::net::IpAddr>() {
                Ok(a) if a.is_multicast() || a.is_unspecified() => {
                    ck.error(
                        v.span(),
                        format!(
                            "ip = \"{a}\" is not a unicast address; give the peer's own address on the P_MUL network (its group address goes in the [[group]])"
                        ),
                    );
                    None
                }
                Ok(a) => Some(a),
                Err(_) => {
                    ck.error(
                        v.span(),
                        format!(
                            "ip = \"{}\" is not an IP address; expected e.g. 10.1.0.2 or fd00::2",
                            v.get_ref()
                        ),
                    );
                    None
                }
            }
        });
        if bearer_kind == BearerKind::PmulIp && p.ip.is_none() {
            ck.error(
                header.clone(),
                format!(
                    "peer \"{name}\" is reached by P_MUL over IP and needs ip = \"a.b.c.d\" (its unicast address on the multicast network)"
                ),
            );
        }
        let bearer = match bearer_kind {
            BearerKind::Sis => {
                if let Some(t) = &p.tcp_address {
                    ck.error(
                        t.span(),
                        format!(
                            "tcp_address is only for protocol \"smtp\" (bearer \"tcp\"); peer \"{name}\" speaks {protocol} over the SIS"
                        ),
                    );
                }
                if p.node.is_none() {
                    ck.error(
                        header.clone(),
                        format!(
                            "peer \"{name}\" has no node address; {protocol} over STANAG 5066 needs node = \"w.x.y.z\" (the peer's 5066 address)"
                        ),
                    );
                }
                let server =
                    p.sis_server.as_ref().and_then(|s| {
                        match crate::model::check_host_port(s.get_ref()) {
                            Ok(v) => Some(v),
                            Err(e) => {
                                ck.error(s.span(), format!("invalid sis_server: {e}"));
                                None
                            }
                        }
                    });
                Bearer::Sis { server }
            }
            BearerKind::Tcp => {
                if let Some(s) = &p.sis_server {
                    ck.error(
                        s.span(),
                        format!(
                            "sis_server is only for protocols over STANAG 5066 (hmtp, cftp); peer \"{name}\" speaks smtp over TCP: use tcp_address"
                        ),
                    );
                }
                match &p.tcp_address {
                    None => {
                        ck.error(
                            header.clone(),
                            format!(
                                "peer \"{name}\" speaks smtp over TCP and needs tcp_address = \"host:port\" (its SMTP server)"
                            ),
                        );
                        Bearer::Tcp {
                            address: String::new(),
                        }
                    }
                    Some(t) => match crate::model::check_host_port(t.get_ref()) {
                        Ok(address) => Bearer::Tcp { address },
                        Err(e) => {
                            ck.error(t.span(), format!("invalid tcp_address: {e}"));
                            Bearer::Tcp {
                                address: String::new(),
                            }
                        }
                    },
                }
            }
            BearerKind::PmulIp => {
                ck.refuse_keys(
                    &[("sis_server", &p.sis_server), ("tcp_address", &p.tcp_address)],
                    |key| {
                        format!(
                            "{key} is not used by peer \"{name}\": it is reached only by P_MUL over UDP/IP (bearer \"pmul-ip\")"
                        )
                    },
                );
                Bearer::PmulIp
            }
        };

        let priority = p
            .priority
            .as_ref()
            .and_then(|v| ck.priority(v))
            .unwrap_or_default();
        let size_limit = p
            .size_limit
            .as_ref()
            .and_then(|v| ck.size("size_limit", v))
            .unwrap_or(DEFAULT_SIZE_LIMIT);
        let batch_bytes = p
            .batch_bytes
            .as_ref()
            .and_then(|v| ck.size("batch_bytes", v))
            .unwrap_or(DEFAULT_BATCH_BYTES);
        let hold_above = p.hold_above.as_ref().and_then(|v| {
            let above = ck.size("hold_above", v)?;
            if above >= size_limit {
                ck.warning(
                    v.span(),
                    format!(
                        "hold_above ({above} bytes) is not below size_limit ({size_limit} bytes): \
                         no message for peer \"{name}\" is large enough to be held, as larger ones are refused"
                    ),
                );
            }
            Some(above)
        });

        let pmul_acks = match p.pmul_acks.as_ref().map(|a| (a, a.get_ref().as_str())) {
            None | Some((_, "non-arq")) => AckMode::NonArq,
            Some((_, "arq")) => AckMode::Arq,
            Some((a, other)) => {
                ck.error(
                    a.span(),
                    format!("pmul_acks = \"{other}\": expected \"non-arq\" or \"arq\""),
                );
                AckMode::NonArq
            }
        };
        // What stays ashore is said where the mail goes out: a peer reached only by P_MUL
        // has no sessions of its own.
        let spans = [
            ("strip_headers", p.strip_headers.as_ref().map(Spanned::span)),
            ("text_only", p.text_only.as_ref().map(Spanned::span)),
            ("shrink_images", p.shrink_images.as_ref().map(Spanned::span)),
            ("image_quality", p.image_quality.as_ref().map(Spanned::span)),
        ];
        let mut sessions = true;
        for (key, span) in spans {
            if let (Protocol::Pmul, Some(span)) = (protocol, span) {
                ck.error(
                    span,
                    format!(
                        "{key} is for the sessions of hmtp, cftp and smtp peers; peer \"{name}\" is reached only by P_MUL: set it on its [[group]]"
                    ),
                );
                sessions = false;
            }
        }
        let strip_headers = if sessions {
            check_strip_headers(ck, p.strip_headers.as_ref())
        } else {
            Vec::new()
        };
        let text_only = sessions && p.text_only.as_ref().is_some_and(|v| *v.get_ref());
        let shrink_images = if sessions {
            check_shrink_images(ck, p.shrink_images.as_ref(), p.image_quality.as_ref())
        } else {
            None
        };
        let multicast_only = protocol == Protocol::Pmul || p.emcon == Some(true);
        let (schedule, schedule_bypass) = check_schedule(
            ck,
            (p.schedule.as_ref(), p.schedule_bypass.as_ref()),
            ("peer", &name),
            "mail",
            multicast_only.then(|| {
                format!(
                    "peer \"{name}\" is reached only by P_MUL multicast: its schedule goes in its [[group]]; \
                     a peer's schedule is for the sessions of hmtp, cftp and smtp peers"
                )
            }),
        );
        let fallback = check_fallback_after(ck, p, &name, matches!(bearer, Bearer::Tcp { .. }));
        if duplicate.is_some() {
            continue;
        }
        peers.push((
            Peer {
                name,
                node,
                protocol,
                skywave,
                xcut,
                compression,
                priority,
                size_limit,
                batch_bytes,
                bearer,
                hold: p.hold.unwrap_or(false),
                hold_above,
                strip_headers,
                text_only,
                shrink_images,
                emcon: p.emcon.unwrap_or(false),
                pmul_acks,
                ip,
                schedule,
                schedule_bypass,
                fallback,
                line,
            },
            header,
        ));
    }
    check_fallbacks(ck, raw, &mut peers);
    peers
}

/// A peer's or a group's `strip_headers`: the header fields its links leave out of each
/// message ([`skywave_smtp::strip`]); each pattern that is not a field name, or would strip a
/// field that must stay, is reported at the key.
fn check_strip_headers(
    ck: &mut Checker<'_>,
    value: Option<&Spanned<BoolOrList>>,
) -> Vec<FieldPattern> {
    let Some(v) = value else {
        return Vec::new();
    };
    match v.get_ref() {
        BoolOrList::Bool(false) => Vec::new(),
        BoolOrList::Bool(true) => FieldPattern::defaults(),
        BoolOrList::List(list) => {
            let mut out = Vec::with_capacity(list.len());
            for text in list {
                match FieldPattern::parse(text) {
                    Ok(pattern) => out.push(pattern),
                    Err(e) => ck.error(v.span(), format!("strip_headers: {e}")),
                }
            }
            out
        }
    }
}

/// A peer's or a group's `shrink_images` with its `image_quality`: the limit its links scale
/// images down to ([`skywave_smtp::shrink`]); a value out of range, or `image_quality` without
/// `shrink_images`, is reported at its key.
fn check_shrink_images(
    ck: &mut Checker<'_>,
    shrink: Option<&Spanned<i64>>,
    quality: Option<&Spanned<i64>>,
) -> Option<ImageLimit> {
    let Some(shrink) = shrink else {
        if let Some(q) = quality {
            ck.error(
                q.span(),
                "image_quality needs shrink_images: it is the JPEG quality of the images \
                 shrink_images = N scales down to N pixels on their longer side"
                    .to_owned(),
            );
        }
        return None;
    };
    let side = image_limit_part(ck, "shrink_images", shrink, |n| {
        ImageLimit::new(n, i64::from(DEFAULT_QUALITY))
    });
    let quality = match quality {
        None => Some(i64::from(DEFAULT_QUALITY)),
        Some(q) => image_limit_part(ck, "image_quality", q, |n| {
            ImageLimit::new(i64::from(MIN_SIDE), n)
        }),
    };
    ImageLimit::new(side?, quality?).ok()
}

/// One number of a `shrink_images` limit, checked alone by `check` (so that each is reported,
/// not only the first).
fn image_limit_part(
    ck: &mut Checker<'_>,
    key: &str,
    value: &Spanned<i64>,
    check: impl Fn(i64) -> Result<ImageLimit, ImageLimitError>,
) -> Option<i64> {
    let n = *value.get_ref();
    match check(n) {
        Ok(_) => Some(n),
        Err(e) => {
            ck.error(value.span(), format!("{key}: {e}"));
            None
        }
    }
}

/// A peer's `fallback` with its `fallback_after` and `probe_every` (the peer it names is
/// checked by [`check_fallbacks`], once every peer is known); `over_tcp`: the peer is reached
/// over TCP/IP, the only bearer a probe is for.
fn check_fallback_after(
    ck: &mut Checker<'_>,
    p: &RawPeer,
    name: &str,
    over_tcp: bool,
) -> Option<Fallback> {
    let mut duration = |key: &str, v: &Spanned<IntOrStr>, zero: bool| {
        let parsed = match v.get_ref() {
            IntOrStr::Int(n) => u64::try_from(*n).ok().filter(|&n| zero || n > 0),
            IntOrStr::Str(s) => crate::model::parse_duration(s).or_else(|| {
                // parse_duration refuses none at all; where it means "never", "0" and "0s" do.
                let digits = s.trim().trim_end_matches(['s', 'm', 'h', 'd']).trim_end();
                (zero && !digits.is_empty() && digits.bytes().all(|b| b == b'0')).then_some(0)
            }),
        };
        if parsed.is_none() {
            ck.error(
                v.span(),
                format!(
                    "{key} is not a duration; expected seconds, or a number with a unit s, m, h or d, such as \"30m\"{}",
                    if zero { ", or 0 for none" } else { "" }
                ),
            );
        }
        parsed
    };
    let after = p
        .fallback_after
        .as_ref()
        .and_then(|v| duration("fallback_after", v, false));
    let probe = p
        .probe_every
        .as_ref()
        .and_then(|v| duration("probe_every", v, true));
    let without_fallback = |ck: &mut Checker<'_>, key: &str, v: &Spanned<IntOrStr>| {
        ck.error(
            v.span(),
            format!(
                "{key} without fallback: say which peer takes the mail of peer \"{name}\" that waited too long (fallback = \"name\")"
            ),
        );
    };
    if let (Some(v), false) = (&p.probe_every, over_tcp) {
        ck.error(
            v.span(),
            format!(
                "probe_every is for a peer over TCP/IP (tcp_address); peer \"{name}\" is not, and a probe over HF would cost airtime: its mail comes back when a session of its own is answered"
            ),
        );
    }
    match &p.fallback {
        Some(f) => Some(Fallback {
            peer: f.get_ref().clone(),
            after: after.unwrap_or(DEFAULT_FALLBACK_AFTER),
            probe_every: if over_tcp {
                probe.unwrap_or(DEFAULT_PROBE_EVERY)
            } else {
                0
            },
        }),
        None => {
            if let Some(v) = &p.fallback_after {
                without_fallback(ck, "fallback_after", v);
            }
            if let Some(v) = &p.probe_every {
                without_fallback(ck, "probe_every", v);
            }
            None
        }
    }
}

/// Every `fallback` names another peer that can take unicast mail, and following them never
/// comes back to where it started (mail would go round for ever). A fallback that does not
/// check out is reported at its key and dropped.
fn check_fallbacks(
    ck: &mut Checker<'_>,
    raw: &[Spanned<RawPeer>],
    peers: &mut [(Peer, Range<usize>)],
) {
    let raw_of = |name: &str| {
        raw.iter()
            .map(Spanned::get_ref)
            .find(|r| r.name.get_ref() == name)
    };
    for i in 0..peers.len() {
        let Some(fallback) = peers[i].0.fallback.clone() else {
            continue;
        };
        let name = peers[i].0.name.clone();
        let span = raw_of(&name)
            .and_then(|r| r.fallback.as_ref())
            .map_or_else(|| peers[i].1.clone(), Spanned::span);
        let problem = match peers.iter().find(|(p, _)| p.name == fallback.peer) {
            None => Some(format!(
                "fallback \"{}\" is not a peer; expected the name of a [[peer]] that takes the mail of \"{name}\" when it has waited too long",
                fallback.peer
            )),
            Some(_) if fallback.peer == name => {
                Some(format!("peer \"{name}\" cannot be its own fallback"))
            }
            Some((p, _)) if p.emcon => Some(format!(
                "fallback \"{}\" keeps EMCON and is reached only by multicast; expected a peer that takes unicast mail",
                p.name
            )),
            Some(_) => {
                // Follow the chain: at most one step per peer before it must end.
                let mut at = fallback.peer.clone();
                let mut steps = 0;
                let mut problem = None;
                while let Some(next) = peers
                    .iter()
                    .find(|(p, _)| p.name == at)
                    .and_then(|(p, _)| p.fallback.as_ref())
                {
                    if next.peer == name {
                        problem = Some(format!(
                            "fallback \"{}\" leads back to \"{name}\": mail would go round the fallbacks for ever",
                            fallback.peer
                        ));
                        break;
                    }
                    if steps > peers.len() {
                        // A loop further on, reported at its own peers.
                        problem = Some(format!(
                            "fallback \"{}\" leads into a loop of fallbacks that never ends",
                            fallback.peer
                        ));
                        break;
                    }
                    at = next.peer.clone();
                    steps += 1;
                }
                problem
            }
        };
        if let Some(message) = problem {
            ck.error(span, message);
            peers[i].0.fallback = None;
            continue;
        }
        // A wait shorter than the gap between the peer's windows sends mail that comes as a
        // window closes to the fallback before the peer was ever tried.
        let gap = peers[i].0.schedule.as_ref().and_then(Schedule::longest_gap);
        if let Some(gap) = gap.filter(|&g| fallback.after < g) {
            let at = raw_of(&name)
                .and_then(|r| r.fallback_after.as_ref())
                .map_or(span, Spanned::span);
            ck.warning(
                at,
                format!(
                    "peer \"{name}\"'s windows are up to {} apart, longer than its fallback_after ({}): mail that comes as a window closes goes to \"{}\" before \"{name}\" is tried; make fallback_after longer than the gap if its mail should wait for the next window",
                    crate::model::duration_text(gap),
                    crate::model::duration_text(fallback.after),
                    fallback.peer
                ),
            );
        }
    }
}

/// A peer's or a group's `schedule` and `schedule_bypass`, as written.
type RawSchedule<'a> = (
    Option<&'a Spanned<Vec<Spanned<String>>>>,
    Option<&'a Spanned<IntOrStr>>,
);

/// The `schedule` and `schedule_bypass` of a peer or a group (`(kind, name)`: `("peer",
/// "shore")`; `what`: what goes at any time without a schedule; `refused`: why this one may
/// have none), each error at the window or key it is about.
fn check_schedule(
    ck: &mut Checker<'_>,
    (schedule, schedule_bypass): RawSchedule<'_>,
    (kind, name): (&str, &str),
    what: &str,
    refused: Option<String>,
) -> (Option<Schedule>, Option<Priority>) {
    if let (Some(raw), Some(why)) = (schedule, refused) {
        ck.error(raw.span(), why);
        return (None, None);
    }
    let bypass = schedule_bypass.and_then(|v| ck.priority(v));
    let Some(raw) = schedule else {
        if let Some(b) = schedule_bypass {
            ck.error(
                b.span(),
                format!(
                    "schedule_bypass is for a {kind} with a schedule; {kind} \"{name}\" has none, so all its {what} goes at any time"
                ),
            );
        }
        return (None, None);
    };
    let windows = raw.get_ref();
    let mut good = true;
    for w in windows {
        if let Err(e) = Schedule::parse(&[w.get_ref()]) {
            ck.error(w.span(), e.to_string());
            good = false;
        }
    }
    if !good {
        return (None, bypass);
    }
    match Schedule::parse(
        windows
            .iter()
            .map(Spanned::get_ref)
            .collect::<Vec<_>>()
            .as_slice(),
    ) {
        Ok(s) => (Some(s), bypass),
        Err(e) => {
            ck.error(raw.span(), e.to_string());
            (None, bypass)
        }
    }
}

/// Why `xcut = true` is not allowed for this peer, if it is not: the cut marker is a U_PDU of
/// skywave's HMTP only.
fn xcut_problem(name: &str, protocol: Protocol, skywave: bool) -> Option<String> {
    match protocol {
        Protocol::Hmtp if skywave => None,
        Protocol::Hmtp => Some(format!(
            "xcut = true towards peer \"{name}\" needs skywave = true: only a skywave gateway's HMTP server \
             honours the cut marker; any other would read it as data"
        )),
        other => Some(format!(
            "xcut is for protocol \"hmtp\" (skywave's cut marker on SAP 3); peer \"{name}\" has protocol \"{other}\""
        )),
    }
}

/// Why `compression` is not allowed towards this peer, if it is not.
fn compression_problem(
    name: &str,
    protocol: Protocol,
    skywave: bool,
    compression: Compression,
) -> Option<String> {
    match (protocol, compression) {
        (_, Compression::None) => None,
        (Protocol::Hmtp, _) if !skywave => Some(format!(
            "compression \"{compression}\" towards peer \"{name}\" needs skywave = true: \
             only another skywave gateway understands a compressed HMTP stream; other peers get plain HMTP"
        )),
        (Protocol::Hmtp, _) => None,
        (Protocol::Cftp, _) => Some(format!(
            "compression \"{compression}\" is not valid with protocol \"cftp\": CFTP gzips every mail file itself (Annex F); \
             use compression = \"none\" or leave it out"
        )),
        (Protocol::Smtp, Compression::Lzw { .. }) => None,
        (Protocol::Smtp, _) => Some(format!(
            "compression \"{compression}\" is not valid with protocol \"smtp\": SMTP peers compress only with JNOS LZW (XLZW); \
             use lzw9 ... lzw16 or none"
        )),
        (Protocol::Pmul, _) => Some(format!(
            "compression \"{compression}\" is not valid for a peer reached only by P_MUL: RFC 8494 MULE compresses every message with zlib itself"
        )),
    }
}

fn check_lan(ck: &mut Checker<'_>, raw: Option<&Spanned<RawLan>>) -> (Lan, Vec<Rule>) {
    let mut rules: Vec<Rule> = Vec::new();
    let mut relay_networks = Vec::new();
    let authenticated_relay = raw
        .and_then(|l| l.get_ref().authenticated_relay)
        .unwrap_or(true);
    match raw.and_then(|l| l.get_ref().relay_networks.as_ref()) {
        None => {
            for net in DEFAULT_RELAY_NETWORKS {
                if let Ok(net) = net.parse::<Cidr>() {
                    relay_networks.push(net);
                }
            }
        }
        Some(list) => {
            for net in list {
                match net.get_ref().parse::<Cidr>() {
                    Ok(cidr) => {
                        let everything = ["0.0.0.0/0", "::/0"].contains(&cidr.to_string().as_str());
                        if everything {
                            ck.warning(
                                net.span(),
                                format!(
                                    "relay network {cidr} contains every address: anyone who can reach the gateway may send mail to the HF peers (an open relay)"
                                ),
                            );
                        }
                        relay_networks.push(cidr);
                    }
                    Err(e) => ck.error(net.span(), format!("invalid relay network: {e}")),
                }
            }
            if list.is_empty()
                && !authenticated_relay
                && let Some(lan) = raw
            {
                let header = ck.header_span(&lan.span());
                ck.warning(
                    header,
                    "nobody may relay: relay_networks is empty and authenticated_relay is false, so only mail for [lan] domains is accepted".to_owned(),
                );
            }
        }
    }
    if let Some(lan) = raw {
        let mut seen: HashMap<Pattern, usize> = HashMap::new();
        for d in &lan.get_ref().domains {
            let pattern = match Pattern::parse(d.get_ref()) {
                Ok(p) => p,
                Err(e) => {
                    ck.error(d.span(), format!("invalid local domain: {e}"));
                    continue;
                }
            };
            match pattern {
                Pattern::CatchAll => {
                    ck.error(
                        d.span(),
                        "\"*\" cannot be a local domain: every address would count as local and anyone could send mail through this gateway; list your domains".to_owned(),
                    );
                    continue;
                }
                Pattern::Address { .. } => {
                    ck.error(
                        d.span(),
                        format!(
                            "[lan] domains lists domains (example.org or *.example.org), not addresses; send \"{}\" somewhere with a [[route]]",
                            d.get_ref()
                        ),
                    );
                    continue;
                }
                Pattern::Domain(_) | Pattern::Subdomains(_) => {}
            }
            let line = ck.line_of(d.span().start);
            if let Some(first) = seen.get(&pattern) {
                ck.error(
                    d.span(),
                    format!("local domain \"{pattern}\" is listed twice; first at line {first}"),
                );
                continue;
            }
            seen.insert(pattern.clone(), line);
            rules.push(Rule {
                pattern,
                target: Target::Lan,
                priority: None,
                line,
                column: column_of(ck.text, d.span().start),
                origin: RuleOrigin::LocalDomain,
            });
        }
    }
    (
        Lan {
            relay_networks,
            authenticated_relay,
        },
        rules,
    )
}

fn column_of(text: &str, offset: usize) -> usize {
    let mut o = offset.min(text.len());
    while o > 0 && !text.is_char_boundary(o) {
        o -= 1;
    }
    let line_start = text[..o].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..o].chars().count() + 1
}

fn check_routes(
    ck: &mut Checker<'_>,
    raw: &[Spanned<RawRoute>],
    peers: &[(Peer, Range<usize>)],
    groups: &[(Group, Range<usize>)],
    rules: &mut Vec<Rule>,
) {
    let mut known: Vec<&str> = peers.iter().map(|(p, _)| p.name.as_str()).collect();
    let group_names: Vec<&str> = groups.iter().map(|(g, _)| g.name.as_str()).collect();
    known.sort_unstable();
    known.dedup();
    for entry in raw {
        let r = entry.get_ref();
        let text = r.pattern.get_ref();
        let pattern = match Pattern::parse(text) {
            Ok(p) => Some(p),
            Err(e) => {
                ck.error(r.pattern.span(), e.to_string());
                None
            }
        };
        let to = r.to.get_ref();
        let target = if to == LAN {
            Some(Target::Lan)
        } else if let Some(i) = peers.iter().position(|(p, _)| p.name == *to) {
            Some(Target::Peer(i))
        } else if let Some(i) = groups.iter().position(|(g, _)| g.name == *to) {
            Some(Target::Group(i))
        } else {
            let mut list = if known.is_empty() {
                "no [[peer]] is defined".to_owned()
            } else {
                format!("known peers: {}", known.join(", "))
            };
            if !group_names.is_empty() {
                list.push_str(&format!("; groups: {}", group_names.join(", ")));
            }
            ck.error(
                r.to.span(),
                format!(
                    "unknown peer \"{to}\" in route for \"{text}\"; {list} (or \"lan\" for delivery on the LAN)"
                ),
            );
            None
        };
        let priority = r.priority.as_ref().and_then(|p| ck.priority(p));
        let (Some(pattern), Some(target)) = (pattern, target) else {
            continue;
        };
        if let Some(other) = rules.iter().find(|rule| rule.pattern == pattern) {
            let message = match other.origin {
                RuleOrigin::LocalDomain => format!(
                    "route for \"{text}\" repeats local domain \"{}\" ([lan] domains, line {}); mail for local domains is delivered on the LAN",
                    other.pattern, other.line
                ),
                RuleOrigin::Route if other.target == target => format!(
                    "duplicate route for \"{text}\"; the same pattern is routed at line {}",
                    other.line
                ),
                RuleOrigin::Route => format!(
                    "conflicting routes for \"{text}\": line {} sends it to {}, this one to {}; keep one",
                    other.line,
                    target_name(other.target, peers, groups),
                    target_name(target, peers, groups)
                ),
            };
            ck.error(r.pattern.span(), message);
            continue;
        }
        let line = ck.line_of(r.pattern.span().start);
        rules.push(Rule {
            pattern,
            target,
            priority,
            line,
            column: column_of(ck.text, r.pattern.span().start),
            origin: RuleOrigin::Route,
        });
    }
}

fn target_name(
    target: Target,
    peers: &[(Peer, Range<usize>)],
    groups: &[(Group, Range<usize>)],
) -> String {
    match target {
        Target::Lan => "the LAN".to_owned(),
        Target::Peer(i) => peers
            .get(i)
            .map_or_else(|| "?".to_owned(), |(p, _)| format!("peer \"{}\"", p.name)),
        Target::Group(i) => groups
            .get(i)
            .map_or_else(|| "?".to_owned(), |(g, _)| format!("group \"{}\"", g.name)),
    }
}

/// Largest `repeats` of a group: beyond a few blind repeats, repair rounds cost less airtime.
const MAX_GROUP_REPEATS: i64 = 5;

/// Checks the `[[group]]` entries against the peers: a group is a set of `sis` peers with node
/// addresses, each in one group only, under a group address of its own.
fn check_groups(
    ck: &mut Checker<'_>,
    raw: &[Spanned<RawGroup>],
    peers: &[(Peer, Range<usize>)],
) -> Vec<(Group, Range<usize>)> {
    let mut groups: Vec<(Group, Range<usize>)> = Vec::new();
    // Which group each peer already belongs to.
    let mut member_of: HashMap<String, String> = HashMap::new();
    for entry in raw {
        let g = entry.get_ref();
        let header = ck.header_span(&entry.span());
        let line = ck.line_of(entry.span().start);
        let name = g.name.get_ref().clone();
        let mut ok = true;
        if !valid_peer_name(&name) {
            ck.error(
                g.name.span(),
                format!(
                    "invalid group name \"{name}\"; expected 1-64 letters, digits, '-', '_' or '.', not only dots"
                ),
            );
            ok = false;
        } else if name.eq_ignore_ascii_case(LAN) {
            ck.error(
                g.name.span(),
                format!(
                    "group name \"{name}\" is reserved for delivery on the LAN; choose another name"
                ),
            );
            ok = false;
        } else if let Some((p, _)) = peers.iter().find(|(p, _)| p.name == name) {
            ck.error(
                g.name.span(),
                format!(
                    "group name \"{name}\" is already the name of the peer at line {}: routes and operators name both, so they must differ",
                    p.line
                ),
            );
            ok = false;
        } else if let Some((other, _)) = groups.iter().find(|(o, _)| o.name == name) {
            ck.error(
                g.name.span(),
                format!(
                    "duplicate group name \"{name}\"; first defined at line {}",
                    other.line
                ),
            );
            ok = false;
        }
        let kind = g
            .bearer
            .as_ref()
            .map_or(GroupBearerKind::Sis, |b| *b.get_ref());
        let bearer = match kind {
            GroupBearerKind::Sis => group_sis_bearer(ck, g, &header, &name, &groups),
            GroupBearerKind::PmulIp => group_ip_bearer(ck, g, &header, &name, &groups),
        };
        if g.members.is_empty() {
            ck.error(
                header.clone(),
                format!("group \"{name}\" has no members; list its peers: members = [\"ship1\", \"ship2\"]"),
            );
        }
        let mut members: Vec<String> = Vec::new();
        for m in &g.members {
            let member = m.get_ref();
            let Some((peer, _)) = peers.iter().find(|(p, _)| p.name == *member) else {
                ck.error(
                    m.span(),
                    format!(
                        "unknown peer \"{member}\" in group \"{name}\"; members are [[peer]] names"
                    ),
                );
                continue;
            };
            if members.contains(member) {
                ck.error(
                    m.span(),
                    format!("peer \"{member}\" is listed twice in group \"{name}\""),
                );
                continue;
            }
            let fits = match &bearer {
                Some(GroupBearer::PmulIp { address, .. }) => match peer.ip {
                    Some(ip) if ip.is_ipv4() == address.is_ipv4() => Ok(()),
                    Some(ip) => Err(format!(
                        "peer \"{member}\" cannot be in group \"{name}\": its ip {ip} and the group's address {address} are of different IP versions"
                    )),
                    None => Err(format!(
                        "peer \"{member}\" cannot be in group \"{name}\": P_MUL over IP needs the peer's address on that network; add ip = \"a.b.c.d\" to the peer"
                    )),
                },
                Some(GroupBearer::Sis { .. }) | None => {
                    if matches!(peer.bearer, Bearer::Sis { .. }) && peer.node.is_some() {
                        Ok(())
                    } else {
                        Err(format!(
                            "peer \"{member}\" cannot be in group \"{name}\": this group's P_MUL runs over STANAG 5066, and {member} is reached over {}",
                            peer.bearer
                        ))
                    }
                }
            };
            if let Err(why) = fits {
                ck.error(m.span(), why);
                continue;
            }
            if let Some(other) = member_of.get(member) {
                ck.error(
                    m.span(),
                    format!(
                        "peer \"{member}\" is already in group \"{other}\"; a peer belongs to one group, so that the choice between unicast and multicast is never ambiguous"
                    ),
                );
                continue;
            }
            member_of.insert(member.clone(), name.clone());
            members.push(member.clone());
        }
        // A peer under EMCON, or with no unicast protocol, is reached by P_MUL even alone.
        if members.len() == 1
            && !peers
                .iter()
                .any(|(p, _)| p.name == members[0] && (p.emcon || p.bearer == Bearer::PmulIp))
        {
            ck.warning(
                header.clone(),
                format!(
                    "group \"{name}\" has one member: multicast gains nothing over unicast unless that peer keeps EMCON"
                ),
            );
        }
        let repeats = match &g.repeats {
            None => crate::model::DEFAULT_GROUP_REPEATS,
            Some(r) => match u8::try_from(*r.get_ref()) {
                Ok(v) if i64::from(v) <= MAX_GROUP_REPEATS => v,
                _ => {
                    ck.error(
                        r.span(),
                        format!("repeats = {} is out of range; expected 0-{MAX_GROUP_REPEATS} blind repeats of each Data_PDU", r.get_ref()),
                    );
                    0
                }
            },
        };
        let (schedule, schedule_bypass) = check_schedule(
            ck,
            (g.schedule.as_ref(), g.schedule_bypass.as_ref()),
            ("group", &name),
            "multicast mail",
            matches!(bearer, Some(GroupBearer::PmulIp { .. })).then(|| {
                format!(
                    "group \"{name}\" runs over UDP/IP, where datagrams of several senders do not collide on the air; \
                     a schedule is for a group over STANAG 5066, whose multicast shares the frequency's time"
                )
            }),
        );
        let strip_headers = check_strip_headers(ck, g.strip_headers.as_ref());
        let shrink_images =
            check_shrink_images(ck, g.shrink_images.as_ref(), g.image_quality.as_ref());
        if let (true, Some(bearer)) = (ok, bearer) {
            groups.push((
                Group {
                    name,
                    bearer,
                    members,
                    repeats,
                    schedule,
                    schedule_bypass,
                    strip_headers,
                    text_only: g.text_only.unwrap_or(false),
                    shrink_images,
                    line,
                },
                header,
            ));
        }
    }
    // A peer under EMCON answers nothing, so HMTP and CFTP cannot reach it: only a group's
    // P_MUL can.
    for (peer, span) in peers {
        if peer.emcon && !member_of.contains_key(&peer.name) {
            ck.error(
                span.clone(),
                format!(
                    "peer \"{}\" keeps EMCON (emcon = true) but is in no [[group]]: a ship that must not transmit cannot answer HMTP or CFTP, so it is reached only by P_MUL multicast; add it to a group",
                    peer.name
                ),
            );
        }
    }
    // A peer reached only by P_MUL over IP has no other way in.
    for (peer, span) in peers {
        let in_ip_group = member_of
            .get(&peer.name)
            .and_then(|g| groups.iter().find(|(o, _)| o.name == *g))
            .is_some_and(|(g, _)| g.ip().is_some());
        if peer.bearer == Bearer::PmulIp && !in_ip_group {
            ck.error(
                span.clone(),
                format!(
                    "peer \"{}\" is reached only by P_MUL over IP (bearer \"pmul-ip\") but is in no pmul-ip [[group]]; add it to one",
                    peer.name
                ),
            );
        }
    }
    // P_MUL ids over IP come from the addresses: two peers with one id could not be told apart.
    let mut ids: HashMap<u32, &str> = HashMap::new();
    for (peer, span) in peers {
        let Some(ip) = peer.ip else { continue };
        if let Some(other) = ids.insert(crate::model::pmul_ip_id(ip), &peer.name) {
            ck.error(
                span.clone(),
                format!(
                    "peers \"{other}\" and \"{}\" have the same P_MUL id over IP ({}): an IPv4 address, or the last 32 bits of an IPv6 one, must differ between peers",
                    peer.name,
                    crate::model::pmul_ip_id(ip)
                ),
            );
        }
    }
    groups
}

/// The 5066 bearer of a group: `node` (its group address) and `sis_server`.
fn group_sis_bearer(
    ck: &mut Checker<'_>,
    g: &RawGroup,
    header: &Range<usize>,
    name: &str,
    groups: &[(Group, Range<usize>)],
) -> Option<GroupBearer> {
    ck.refuse_keys(&[("address", &g.address), ("dynamic", &g.dynamic)], |key| {
        format!(
            "{key} is for groups over IP (bearer = \"pmul-ip\"); group \"{name}\" runs over STANAG 5066 and has node = \"w.x.y.z\""
        )
    });
    let node = match &g.node {
        None => {
            ck.error(
                header.clone(),
                format!(
                    "group \"{name}\" has no node address; P_MUL multicast needs node = \"w.x.y.z\", the group's STANAG 5066 group address (w 16-31), configured on every member's 5066 node (or bearer = \"pmul-ip\" with an IP multicast address)"
                ),
            );
            None
        }
        Some(n) => match crate::model::parse_group_node(n.get_ref()) {
            Ok(node) => {
                if let Some((other, _)) = groups.iter().find(|(o, _)| o.node() == Some(node)) {
                    ck.error(
                        n.span(),
                        format!(
                            "group address {node} is already group \"{}\"'s (line {}); each group needs its own",
                            other.name, other.line
                        ),
                    );
                }
                Some(node)
            }
            Err(e) => {
                ck.error(n.span(), e.to_string());
                None
            }
        },
    };
    let server =
        g.sis_server
            .as_ref()
            .and_then(|s| match crate::model::check_host_port(s.get_ref()) {
                Ok(v) => Some(v),
                Err(e) => {
                    ck.error(s.span(), format!("invalid sis_server: {e}"));
                    None
                }
            });
    node.map(|node| GroupBearer::Sis { node, server })
}

/// The UDP/IP bearer of a group: `address` (an IP multicast address) and `dynamic` (a pool of
/// multicast addresses for messages to some members only).
fn group_ip_bearer(
    ck: &mut Checker<'_>,
    g: &RawGroup,
    header: &Range<usize>,
    name: &str,
    groups: &[(Group, Range<usize>)],
) -> Option<GroupBearer> {
    ck.refuse_keys(&[("node", &g.node), ("sis_server", &g.sis_server)], |key| {
        format!(
            "{key} is for groups over STANAG 5066; group \"{name}\" runs over UDP/IP (bearer = \"pmul-ip\") and has address = \"239.x.y.z\""
        )
    });
    let Some(a) = &g.address else {
        ck.error(
            header.clone(),
            format!(
                "group \"{name}\" has no address; P_MUL over IP needs address = \"239.x.y.z\" (or an IPv6 ff0x:: address), the multicast address its members listen on"
            ),
        );
        return None;
    };
    let address = match a.get_ref().parse::<std::net::IpAddr>() {
        Ok(ip) if ip.is_multicast() => ip,
        Ok(ip) => {
            ck.error(
                a.span(),
                format!(
                    "address = \"{ip}\" is not an IP multicast address; expected 224.0.0.0/4 (239.0.0.0/8 for an organisation's own groups) or ff00::/8"
                ),
            );
            return None;
        }
        Err(_) => {
            ck.error(
                a.span(),
                format!(
                    "address = \"{}\" is not an IP address; expected a multicast address such as 239.192.0.1 or ff15::1",
                    a.get_ref()
                ),
            );
            return None;
        }
    };
    if let Some((other, _)) = groups.iter().find(|(o, _)| o.ip() == Some(address)) {
        ck.error(
            a.span(),
            format!(
                "multicast address {address} is already group \"{}\"'s (line {}); each group needs its own",
                other.name, other.line
            ),
        );
    }
    let dynamic = g.dynamic.as_ref().and_then(|d| {
        let pool = match d.get_ref().parse::<Cidr>() {
            Ok(p) => p,
            Err(e) => {
                ck.error(d.span(), format!("invalid dynamic pool: {e}"));
                return None;
            }
        };
        let net = pool.network();
        let problem = if !net.is_multicast() {
            Some(format!(
                "dynamic = \"{pool}\" is not a multicast network; dynamic groups take addresses from e.g. 239.192.1.0/28"
            ))
        } else if !net.is_ipv4() || !address.is_ipv4() {
            Some(format!(
                "dynamic = \"{pool}\": dynamic groups are IPv4 only, as ACP 142's Multicast Group fields hold an IPv4 address; an IPv6 group keeps to its own address"
            ))
        } else if pool.contains(address) {
            Some(format!(
                "dynamic = \"{pool}\" contains the group's own address {address}; the pool must be apart from it"
            ))
        } else {
            None
        };
        match problem {
            Some(p) => {
                ck.error(d.span(), p);
                None
            }
            None => Some(pool),
        }
    });
    Some(GroupBearer::PmulIp { address, dynamic })
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("500 kB"), Some(500_000));
        assert_eq!(parse_size("64KiB"), Some(65_536));
        assert_eq!(parse_size("2 MB"), Some(2_000_000));
        assert_eq!(parse_size("1_000"), Some(1000));
        assert_eq!(parse_size("1 GiB"), Some(1 << 30));
        assert_eq!(parse_size("99999999999999999999 GB"), None);
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size("5 parsecs"), None);
        assert_eq!(parse_size(""), None);
    }
}
