//! The loaded routing table: most-specific-first lookup, relay decisions for the SMTP front end,
//! and explanations for `skywave routes explain`.
//!
//! Lookup order for `user@a.b.example` (the first rule that exists wins):
//! 1. the exact address `user@a.b.example` (local part compared ASCII-case-insensitively);
//! 2. the exact domain `a.b.example`;
//! 3. wildcards from the deepest: `*.b.example`, then `*.example`;
//! 4. the catch-all `*`.
//!
//! Each step is one hash lookup, so a lookup costs O(number of labels), whatever the table's size.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

use crate::address::{Address, AddressError, Refusal};
use crate::diag::Diagnostic;
use crate::model::{Bearer, Group, GroupBearer, Lan, Peer, Priority};
use crate::pattern::{Pattern, PatternKind};

/// Where a rule sends mail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Lan,
    /// Index into the table's peers.
    Peer(usize),
    /// Index into the table's groups.
    Group(usize),
}

/// Where a rule came from in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleOrigin {
    /// A `[[route]]` entry.
    Route,
    /// An entry of `[lan] domains`.
    LocalDomain,
}

/// One rule of the table: a pattern and where it sends mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// What it matches.
    pub pattern: Pattern,
    pub(crate) target: Target,
    /// The priority it gives mail that states none (overrides the peer's default).
    pub priority: Option<Priority>,
    /// Line of the pattern in the file.
    pub line: usize,
    /// Column of the pattern in the file.
    pub column: usize,
    /// `[[route]]` or `[lan] domains`.
    pub origin: RuleOrigin,
}

/// Where a routed address goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination<'t> {
    /// Delivered on the LAN (to the smarthost or Maildir the gateway is configured with).
    Lan,
    /// Sent to an HF (or TCP) peer.
    Peer(&'t Peer),
    /// Sent to every member of a multicast group, once, by P_MUL.
    Group(&'t Group),
}

/// The result of a successful lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route<'t> {
    /// The normalised address.
    pub address: Address,
    /// The rule that won.
    pub rule: &'t Rule,
    /// Where the mail goes.
    pub destination: Destination<'t>,
    /// Priority for mail that states none: the route's, else the peer's, else 0.
    pub priority: Priority,
    /// True when the address's domain is one of `[lan] domains` (mail for us, accepted from
    /// anyone), false when sending it on is relaying.
    pub local: bool,
}

/// Why a recipient cannot be routed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// The address was refused before lookup (syntax, length or a relay trick).
    #[error("{0}")]
    Address(#[from] AddressError),
    /// No rule matches and the table has no catch-all.
    #[error("no route for {0}: no rule matches its domain and there is no catch-all")]
    NoRoute(Address),
}

impl LookupError {
    /// The SMTP refusal for this error: the address's own (550 5.7.1, 553 5.6.7 or 550 5.1.3),
    /// or 550 5.1.2 when nothing routes the domain.
    pub fn smtp_reply(&self) -> Refusal {
        match self {
            LookupError::Address(e) => e.smtp_reply(),
            LookupError::NoRoute(address) => Refusal {
                code: 550,
                enhanced: "5.1.2",
                text: format!("<{address}>: no route to domain {}", address.domain()),
            },
        }
    }
}

/// The SMTP front end's answer for one `RCPT TO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayDecision<'t> {
    /// Accept: the mail goes this way.
    Accept(Route<'t>),
    /// Refuse with this reply.
    Refuse(Refusal),
}

#[derive(Debug, Default)]
struct Index {
    addresses: HashMap<String, usize>,
    domains: HashMap<String, usize>,
    subdomains: HashMap<String, usize>,
    catch_all: Option<usize>,
}

/// A checked routing table. Immutable: a reload builds a new one and swaps it in (see
/// [`crate::SharedRoutes`]).
#[derive(Debug)]
pub struct RoutingTable {
    file: String,
    peers: Vec<Peer>,
    groups: Vec<Group>,
    rules: Vec<Rule>,
    lan: Lan,
    index: Index,
    warnings: Vec<Diagnostic>,
}

impl RoutingTable {
    pub(crate) fn new(
        file: String,
        peers: Vec<Peer>,
        groups: Vec<Group>,
        rules: Vec<Rule>,
        lan: Lan,
        warnings: Vec<Diagnostic>,
    ) -> RoutingTable {
        let mut index = Index::default();
        for (i, rule) in rules.iter().enumerate() {
            // The checker has refused duplicate patterns; keep the first should one slip by.
            match &rule.pattern {
                Pattern::Address { local, domain } => {
                    index
                        .addresses
                        .entry(format!("{local}@{domain}"))
                        .or_insert(i);
                }
                Pattern::Domain(d) => {
                    index.domains.entry(d.clone()).or_insert(i);
                }
                Pattern::Subdomains(d) => {
                    index.subdomains.entry(d.clone()).or_insert(i);
                }
                Pattern::CatchAll => {
                    index.catch_all.get_or_insert(i);
                }
            }
        }
        RoutingTable {
            file,
            peers,
            groups,
            rules,
            lan,
            index,
            warnings,
        }
    }

    /// The file name the table was loaded from (as given).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The peers, in file order.
    pub fn peers(&self) -> &[Peer] {
        &self.peers
    }

    /// A peer by name.
    pub fn peer(&self, name: &str) -> Option<&Peer> {
        self.peers.iter().find(|p| p.name == name)
    }

    /// The multicast groups, in file order.
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// A group by name.
    pub fn group(&self, name: &str) -> Option<&Group> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// The group a peer belongs to (a peer is in one group at most).
    pub fn group_of(&self, peer: &str) -> Option<&Group> {
        self.groups
            .iter()
            .find(|g| g.members.iter().any(|m| m == peer))
    }

    /// How a message travels, given the targets (peer or group names, as the spool records
    /// them) of its recipients still waiting: a group goes by multicast when the message is
    /// for the group itself, for two or more of its members, or for a member under EMCON
    /// (which answers nothing, so HMTP and CFTP cannot reach it); every other peer by unicast.
    pub fn plan<'a>(&self, targets: impl IntoIterator<Item = &'a str>) -> Plan<'_> {
        let mut plan = Plan::default();
        let mut seen: Vec<&str> = Vec::new();
        for t in targets {
            if seen.contains(&t) {
                continue;
            }
            seen.push(t);
            if let Some(g) = self.group(t) {
                let leg = plan.leg(g);
                leg.whole_group = true;
                continue;
            }
            let Some(peer) = self.peer(t) else { continue };
            match self.group_of(t) {
                Some(g) => {
                    let leg = plan.leg(g);
                    if let Some(m) = g.members.iter().find(|m| **m == peer.name) {
                        leg.members.push(m);
                    }
                    leg.emcon |= peer.emcon;
                    leg.pmul_only |= peer.bearer == Bearer::PmulIp;
                }
                None => plan.unicast.push(&peer.name),
            }
        }
        // Legs of one member that keeps no EMCON and has a unicast protocol go by unicast
        // after all.
        let (multicast, single): (Vec<_>, Vec<_>) = plan
            .multicast
            .into_iter()
            .partition(|l| l.whole_group || l.emcon || l.pmul_only || l.members.len() >= 2);
        plan.multicast = multicast;
        plan.unicast
            .extend(single.into_iter().flat_map(|l| l.members.into_iter()));
        plan
    }

    /// Every rule: local domains first, then the routes in file order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The number of `[[route]]` entries.
    pub fn route_count(&self) -> usize {
        self.rules
            .iter()
            .filter(|r| r.origin == RuleOrigin::Route)
            .count()
    }

    /// The LAN settings.
    pub fn lan(&self) -> &Lan {
        &self.lan
    }

    /// Warnings found while loading (the table is usable).
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// Where a rule sends mail.
    pub fn destination(&self, rule: &Rule) -> Destination<'_> {
        match rule.target {
            Target::Lan => Destination::Lan,
            Target::Peer(i) => self
                .peers
                .get(i)
                .map_or(Destination::Lan, Destination::Peer),
            Target::Group(i) => self
                .groups
                .get(i)
                .map_or(Destination::Lan, Destination::Group),
        }
    }

    /// True when the domain is one of `[lan] domains`.
    pub fn is_local(&self, address: &Address) -> bool {
        self.rules
            .iter()
            .any(|r| r.origin == RuleOrigin::LocalDomain && r.pattern.matches(address))
    }

    /// The candidate patterns for an address, most specific first, each with the index of the
    /// rule that has it (if any).
    fn candidates(&self, address: &Address) -> Vec<(Pattern, Option<usize>)> {
        let domain = address.domain();
        let local = address.local_key();
        let mut out = Vec::new();
        out.push((
            Pattern::Address {
                local: local.clone(),
                domain: domain.to_owned(),
            },
            self.index
                .addresses
                .get(&format!("{local}@{domain}"))
                .copied(),
        ));
        out.push((
            Pattern::Domain(domain.to_owned()),
            self.index.domains.get(domain).copied(),
        ));
        for (i, _) in domain.match_indices('.') {
            let parent = &domain[i + 1..];
            out.push((
                Pattern::Subdomains(parent.to_owned()),
                self.index.subdomains.get(parent).copied(),
            ));
        }
        out.push((Pattern::CatchAll, self.index.catch_all));
        out
    }

    /// The index of the winning rule for an address.
    fn find(&self, address: &Address) -> Option<usize> {
        let domain = address.domain();
        if !self.index.addresses.is_empty() {
            let key = format!("{}@{domain}", address.local_key());
            if let Some(&i) = self.index.addresses.get(&key) {
                return Some(i);
            }
        }
        if let Some(&i) = self.index.domains.get(domain) {
            return Some(i);
        }
        for (i, _) in domain.match_indices('.') {
            if let Some(&r) = self.index.subdomains.get(&domain[i + 1..]) {
                return Some(r);
            }
        }
        self.index.catch_all
    }

    /// Routes an already-parsed address.
    pub fn route(&self, address: &Address) -> Option<Route<'_>> {
        let rule = self.rules.get(self.find(address)?)?;
        let destination = self.destination(rule);
        let priority = rule
            .priority
            .or(match destination {
                Destination::Peer(p) => Some(p.priority),
                Destination::Lan | Destination::Group(_) => None,
            })
            .unwrap_or_default();
        Some(Route {
            address: address.clone(),
            rule,
            destination,
            priority,
            local: self.is_local(address),
        })
    }

    /// Parses a recipient (as in `RCPT TO`) and routes it.
    pub fn lookup(&self, recipient: &str) -> Result<Route<'_>, LookupError> {
        let address = Address::parse(recipient)?;
        self.route(&address).ok_or(LookupError::NoRoute(address))
    }

    /// The relay decision for one recipient from a LAN client: accepted when the table routes
    /// it and either its domain is local (mail for us) or the client may relay (its address is
    /// in `[lan] relay_networks`, or it authenticated and `authenticated_relay` is on).
    pub fn relay_decision(
        &self,
        client: IpAddr,
        authenticated: bool,
        recipient: &str,
    ) -> RelayDecision<'_> {
        let route = match self.lookup(recipient) {
            Ok(route) => route,
            Err(e) => return RelayDecision::Refuse(e.smtp_reply()),
        };
        if route.local || self.lan.may_relay(client, authenticated) {
            RelayDecision::Accept(route)
        } else {
            RelayDecision::Refuse(relay_denied(&route.address))
        }
    }

    /// Explains where a recipient goes and why; with `client`, also whether that client may
    /// send it.
    pub fn explain(&self, recipient: &str, client: Option<(IpAddr, bool)>) -> Explanation {
        let address = Address::parse(recipient);
        let mut candidates = Vec::new();
        let mut route = None;
        if let Ok(address) = &address {
            let mut won = false;
            for (pattern, rule) in self.candidates(address) {
                let rule = rule.and_then(|i| self.rules.get(i));
                let wins = rule.is_some() && !won;
                won |= wins;
                candidates.push(Candidate {
                    kind: pattern.kind(),
                    pattern: pattern.to_string(),
                    rule: rule.map(|r| CandidateRule {
                        line: r.line,
                        column: r.column,
                        origin: r.origin,
                        target: match self.destination(r) {
                            Destination::Lan => "lan".to_owned(),
                            Destination::Peer(p) => p.name.clone(),
                            Destination::Group(g) => format!("{} (group)", g.name),
                        },
                    }),
                    wins,
                });
            }
            route = self.route(address).map(|r| RouteSummary {
                pattern: r.rule.pattern.to_string(),
                line: r.rule.line,
                origin: r.rule.origin,
                peer: match r.destination {
                    Destination::Lan | Destination::Group(_) => None,
                    Destination::Peer(p) => Some(p.clone()),
                },
                group: match r.destination {
                    Destination::Lan => None,
                    Destination::Group(g) => Some(g.clone()),
                    Destination::Peer(p) => self.group_of(&p.name).cloned(),
                },
                priority: r.priority,
                priority_from: if r.rule.priority.is_some() {
                    "the route"
                } else if matches!(r.destination, Destination::Peer(_)) {
                    "the peer's default"
                } else {
                    "the default"
                },
                local: r.local,
            });
        }
        let relay = client.map(|(ip, authenticated)| {
            let (verdict, reason) = match self.relay_decision(ip, authenticated, recipient) {
                RelayDecision::Accept(r) if r.local => {
                    (Ok(()), format!("{} is a local domain", r.address.domain()))
                }
                RelayDecision::Accept(_) => (Ok(()), self.relay_reason(ip, authenticated)),
                RelayDecision::Refuse(refusal) => (Err(refusal), String::new()),
            };
            RelayCheck {
                client: ip,
                authenticated,
                verdict,
                reason,
            }
        });
        Explanation {
            input: recipient.to_owned(),
            file: self.file.clone(),
            address,
            candidates,
            route,
            relay,
        }
    }

    fn relay_reason(&self, ip: IpAddr, authenticated: bool) -> String {
        if let Some(net) = self.lan.relay_networks.iter().find(|n| n.contains(ip)) {
            format!("{ip} is in relay network {net}")
        } else if authenticated && self.lan.authenticated_relay {
            "the client authenticated and authenticated_relay is on".to_owned()
        } else {
            String::new()
        }
    }
}

/// What a peer's or a group's `strip_headers`, `text_only` and `shrink_images` leave ashore, if
/// anything.
fn write_stripped(
    f: &mut fmt::Formatter<'_>,
    patterns: &[skywave_smtp::strip::FieldPattern],
    text_only: bool,
    shrink_images: Option<skywave_smtp::shrink::ImageLimit>,
) -> fmt::Result {
    if !patterns.is_empty() {
        let names: Vec<String> = patterns.iter().map(ToString::to_string).collect();
        writeln!(
            f,
            "  header fields left out on the air: {} (the spool keeps each message whole)",
            names.join(", ")
        )?;
    }
    if text_only {
        writeln!(
            f,
            "  text only: of a multipart/alternative, only its text/plain part goes (the HTML twin stays ashore)"
        )?;
    }
    if let Some(limit) = shrink_images {
        writeln!(
            f,
            "  images over {} px on their longer side scaled down to fit on the air (JPEG quality {}; the spool keeps each message whole)",
            limit.max_side(),
            limit.quality()
        )?;
    }
    Ok(())
}

fn write_group(f: &mut fmt::Formatter<'_>, g: &Group) -> fmt::Result {
    match &g.bearer {
        GroupBearer::Sis { node, server } => {
            writeln!(
                f,
                "  bearer: STANAG 5066, SAP 2 (STANAG 4406 annex E TMI-1)"
            )?;
            writeln!(f, "  group address: {node}")?;
            if let Some(server) = server {
                writeln!(f, "  SIS server: {server}")?;
            }
        }
        GroupBearer::PmulIp { address, dynamic } => {
            writeln!(f, "  bearer: pmul-ip (ACP 142 P_MUL over UDP/IP multicast)")?;
            writeln!(f, "  multicast address: {address}")?;
            match dynamic {
                Some(pool) => writeln!(
                    f,
                    "  dynamic groups: from {pool} for mail to some of the members only (Request/Announce/Release_PDUs)"
                )?,
                None => writeln!(
                    f,
                    "  dynamic groups: none (mail for some members goes to the group address)"
                )?,
            }
        }
    }
    writeln!(f, "  members: {}", g.members.join(", "))?;
    writeln!(f, "  blind repeats of each Data_PDU: {}", g.repeats)?;
    write_stripped(f, &g.strip_headers, g.text_only, g.shrink_images)?;
    if let Some(schedule) = &g.schedule {
        write_schedule(f, schedule, g.schedule_bypass, "multicasts start")?;
        writeln!(
            f,
            "  repair rounds and EMCON repeats: also only in a window (unless the message goes at any time)"
        )?;
    }
    Ok(())
}

/// The `radio schedule:` line of a peer or a group: `what` starts only in its windows.
fn write_schedule(
    f: &mut fmt::Formatter<'_>,
    schedule: &crate::Schedule,
    bypass: Option<crate::Priority>,
    what: &str,
) -> fmt::Result {
    let bypass = bypass.map_or_else(
        || "nothing goes outside it".to_owned(),
        |b| format!("priority {b} and above goes at any time"),
    );
    writeln!(
        f,
        "  radio schedule: {schedule}: {what} only in a window, with what fits in the time left; {bypass}"
    )
}

/// How one message's recipients travel (see [`RoutingTable::plan`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan<'t> {
    /// Groups the message goes to once, by P_MUL.
    pub multicast: Vec<MulticastLeg<'t>>,
    /// Peers it goes to one by one (their own protocol).
    pub unicast: Vec<&'t str>,
}

/// One multicast transmission of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MulticastLeg<'t> {
    /// The group.
    pub group: &'t Group,
    /// Members with recipients of the message (in the order first seen).
    pub members: Vec<&'t str>,
    /// The message is for the group itself: every member.
    pub whole_group: bool,
    /// One of `members` keeps EMCON.
    pub emcon: bool,
    /// One of `members` is reached only by P_MUL over IP (bearer `pmul-ip`).
    pub pmul_only: bool,
}

impl<'t> MulticastLeg<'t> {
    /// The members that must receive the message: all for mail to the group, else those with
    /// recipients.
    pub fn destinations(&self) -> Vec<&'t str> {
        if self.whole_group {
            self.group.members.iter().map(String::as_str).collect()
        } else {
            self.members.clone()
        }
    }
}

impl<'t> Plan<'t> {
    fn leg(&mut self, group: &'t Group) -> &mut MulticastLeg<'t> {
        let i = match self
            .multicast
            .iter()
            .position(|l| l.group.name == group.name)
        {
            Some(i) => i,
            None => {
                self.multicast.push(MulticastLeg {
                    group,
                    members: Vec::new(),
                    whole_group: false,
                    emcon: false,
                    pmul_only: false,
                });
                self.multicast.len() - 1
            }
        };
        &mut self.multicast[i]
    }

    /// The group that carries the message to `target` (a member or the group), if it goes by
    /// multicast: a unicast link leaves such a message to the group's link.
    pub fn multicast_for(&self, target: &str) -> Option<&'t Group> {
        self.multicast
            .iter()
            .find(|l| l.group.name == target || l.members.contains(&target))
            .map(|l| l.group)
    }
}

fn relay_denied(address: &Address) -> Refusal {
    Refusal {
        code: 554,
        enhanced: "5.7.1",
        text: format!(
            "<{address}>: Relay access denied: not a local domain, and this client may not relay"
        ),
    }
}

/// One candidate pattern considered for an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its kind.
    pub kind: PatternKind,
    /// The pattern text.
    pub pattern: String,
    /// The rule in the table with this pattern, if there is one.
    pub rule: Option<CandidateRule>,
    /// True for the rule that won.
    pub wins: bool,
}

/// A rule of the table, as shown in an explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateRule {
    /// Line in the file.
    pub line: usize,
    /// Column in the file.
    pub column: usize,
    /// `[[route]]` or `[lan] domains`.
    pub origin: RuleOrigin,
    /// `lan` or the peer's name.
    pub target: String,
}

/// The route chosen, as shown in an explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSummary {
    /// The winning pattern.
    pub pattern: String,
    /// Its line.
    pub line: usize,
    /// `[[route]]` or `[lan] domains`.
    pub origin: RuleOrigin,
    /// The peer, or `None` for the LAN or a group.
    pub peer: Option<Peer>,
    /// The group the mail goes to, or the group of the peer.
    pub group: Option<Group>,
    /// Priority for mail that states none.
    pub priority: Priority,
    /// Where the priority came from.
    pub priority_from: &'static str,
    /// True when the domain is local.
    pub local: bool,
}

/// The relay check, when a client was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayCheck {
    /// The client's address.
    pub client: IpAddr,
    /// Whether it authenticated.
    pub authenticated: bool,
    /// Accepted, or the SMTP refusal.
    pub verdict: Result<(), Refusal>,
    /// Why it was accepted.
    pub reason: String,
}

/// Where an address goes and why: the answer of `skywave routes explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The address as given.
    pub input: String,
    /// The table's file name.
    pub file: String,
    /// The parsed address, or why it was refused.
    pub address: Result<Address, AddressError>,
    /// The patterns considered, most specific first (empty when the address was refused).
    pub candidates: Vec<Candidate>,
    /// The route chosen, if any.
    pub route: Option<RouteSummary>,
    /// The relay check, if a client was given.
    pub relay: Option<RelayCheck>,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let address = match &self.address {
            Err(e) => {
                writeln!(f, "address: {}", self.input)?;
                writeln!(f, "refused: {e}")?;
                writeln!(f, "SMTP reply: {}", e.smtp_reply())?;
                return Ok(());
            }
            Ok(a) => a,
        };
        writeln!(
            f,
            "address: {address} (domain lower-cased; local part kept as written)"
        )?;
        writeln!(f, "rules considered, most specific first:")?;
        let width = self
            .candidates
            .iter()
            .map(|c| c.pattern.len())
            .max()
            .unwrap_or(0);
        let mut won = false;
        for c in &self.candidates {
            let kind = c.kind.to_string();
            match &c.rule {
                None => writeln!(f, "  {kind:<9} {:<width$}  no rule", c.pattern)?,
                Some(r) => {
                    let origin = match r.origin {
                        RuleOrigin::Route => "",
                        RuleOrigin::LocalDomain => " ([lan] domains)",
                    };
                    let note = if c.wins {
                        "  <- wins: the most specific rule that exists"
                    } else if won {
                        "  (not used: a more specific rule matched)"
                    } else {
                        ""
                    };
                    writeln!(
                        f,
                        "  {kind:<9} {:<width$}  {}:{}:{} -> {}{origin}{note}",
                        c.pattern, self.file, r.line, r.column, r.target
                    )?;
                }
            }
            won |= c.wins;
        }
        match &self.route {
            None => {
                writeln!(
                    f,
                    "route: none (no rule matches and there is no catch-all \"*\")"
                )?;
                let refusal = LookupError::NoRoute(address.clone()).smtp_reply();
                writeln!(f, "SMTP reply: {refusal}")?;
            }
            Some(r) => {
                let local = if r.local {
                    "local domain"
                } else {
                    "not a local domain"
                };
                match (&r.peer, &r.group) {
                    (None, None) => writeln!(f, "route: deliver on the LAN ({local})")?,
                    (None, Some(g)) => {
                        writeln!(
                            f,
                            "route: multicast group \"{}\" ({local}): every member delivers it",
                            g.name
                        )?;
                        write_group(f, g)?;
                        writeln!(
                            f,
                            "  carried: once, by P_MUL (ACP 142) to {}, whatever the number of ships",
                            g.address_text()
                        )?;
                    }
                    (Some(p), group) => {
                        writeln!(f, "route: HF peer \"{}\" ({local})", p.name)?;
                        match p.node {
                            Some(node) => writeln!(f, "  node address: {node}")?,
                            None => writeln!(f, "  node address: none ({} bearer)", p.bearer)?,
                        }
                        if let Some(ip) = p.ip {
                            writeln!(
                                f,
                                "  P_MUL over IP: {ip} (P_MUL id {})",
                                crate::model::pmul_ip_id(ip)
                            )?;
                        }
                        writeln!(f, "  protocol: {}", p.protocol)?;
                        writeln!(
                            f,
                            "  skywave peer: {}",
                            if p.skywave { "yes" } else { "no" }
                        )?;
                        if p.xcut {
                            writeln!(
                                f,
                                "  cut marker (XCUT): assumed from the first session (xcut = true)"
                            )?;
                        }
                        writeln!(f, "  compression: {}", p.compression)?;
                        writeln!(f, "  bearer: {}", p.bearer)?;
                        writeln!(f, "  size limit: {} bytes", p.size_limit)?;
                        writeln!(f, "  batch budget: {} bytes", p.batch_bytes)?;
                        writeln!(
                            f,
                            "  held: {}",
                            if p.hold {
                                "yes (queued until released)"
                            } else {
                                "no"
                            }
                        )?;
                        if let Some(above) = p.hold_above {
                            writeln!(
                                f,
                                "  held for the operator: messages over {above} bytes (released with skywave queue release)"
                            )?;
                        }
                        if let Some(schedule) = &p.schedule {
                            write_schedule(f, schedule, p.schedule_bypass, "sessions start")?;
                        }
                        write_stripped(f, &p.strip_headers, p.text_only, p.shrink_images)?;
                        if let Some(fb) = &p.fallback {
                            let after = crate::model::duration_text(fb.after);
                            writeln!(
                                f,
                                "  fallback: mail still waiting {after} after its arrival goes to peer \"{}\" (if within that peer's size limit and not held for its size)",
                                fb.peer
                            )?;
                            writeln!(
                                f,
                                "  while \"{}\" has answered none of this gateway's sessions for {after}, mail it was tried for goes at once; what went while it was silent comes back when it answers again",
                                p.name
                            )?;
                            if fb.probe_every > 0 {
                                writeln!(
                                    f,
                                    "  while it is silent and such mail waits to come back, \"{}\" is probed every {} (a connection, its greeting, QUIT)",
                                    p.name,
                                    crate::model::duration_text(fb.probe_every)
                                )?;
                            }
                        }
                        if let Some(g) = group {
                            writeln!(f, "  member of group \"{}\":", g.name)?;
                            write_group(f, g)?;
                            if p.bearer == Bearer::PmulIp {
                                writeln!(
                                    f,
                                    "  carried: always by P_MUL over IP (no unicast protocol): to {} alone when the message is for {} only, else to {}",
                                    p.ip.map_or_else(String::new, |ip| ip.to_string()),
                                    p.name,
                                    g.address_text()
                                )?;
                            } else if p.emcon {
                                writeln!(
                                    f,
                                    "  EMCON: yes: {} answers nothing, so its mail always goes by P_MUL through {} and its acknowledgement may come hours later",
                                    p.name, g.name
                                )?;
                            } else {
                                writeln!(
                                    f,
                                    "  carried: by {} unicast when the message is for {} alone; once by P_MUL multicast to {} when it is also for another member of {}",
                                    p.protocol,
                                    p.name,
                                    g.address_text(),
                                    g.name
                                )?;
                            }
                        }
                    }
                }
                writeln!(f, "  priority: {}, from {}", r.priority, r.priority_from)?;
            }
        }
        if let Some(relay) = &self.relay {
            let auth = if relay.authenticated {
                "authenticated"
            } else {
                "not authenticated"
            };
            match &relay.verdict {
                Ok(()) => writeln!(
                    f,
                    "client {} ({auth}): accepted: {}",
                    relay.client, relay.reason
                )?,
                Err(refusal) => {
                    writeln!(f, "client {} ({auth}): refused: {refusal}", relay.client)?
                }
            }
        }
        Ok(())
    }
}
