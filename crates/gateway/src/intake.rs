//! Intake: where mail enters the spool, whichever way it arrived.
//!
//! Two doors lead in: the LAN SMTP listener ([`crate::smtp_listener`]) and the HF side (an
//! HMTP or CFTP session from a peer gateway, [`crate::hf`]). Both decide each recipient with
//! the same [`GatewayPolicy`] and store with the same [`Intake::store`], so a message is routed,
//! size-checked, prioritised and stamped with a `Received:` header the same way whichever door
//! it came through, and "250" always means "on disk".
//!
//! - From the LAN, relaying is the routing table's relay decision (local domains for anyone;
//!   HF peers only for `relay_networks` or authenticated users).
//! - From an HF peer (a trusted gateway), every routed destination is accepted except one that
//!   leads straight back to the peer it came from: that is a routing loop, refused with
//!   `554 5.4.6` so the sending side bounces it instead of the two gateways passing it back and
//!   forth over the air.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use skywave_route::address::ascii_path;
use skywave_route::{Destination, LookupError, RelayDecision, RoutingTable, SharedRoutes};
use skywave_smtp::{
    Credentials, DateTime, EnhancedCode, Envelope, MailRequest, Policy, RcptDsn, ReceivedInfo,
    Reply, SessionInfo, Verdict, received_header,
};
use skywave_spool::{NewMessage, Priority, QueueId, Room, Spool, Target};
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use crate::clock::Clock;
use crate::metrics as m;

/// Most `Received:` headers a message may carry before it is taken for a loop (RFC 5321
/// section 6.3 suggests at least 100; a mail system is much shallower, but stay generous).
const MAX_HOPS: usize = 100;

/// Builds a reply from a code and an enhanced code written `"5.7.1"`.
pub fn reply(code: u16, enhanced: &str, text: impl Into<String>) -> Reply {
    let mut parts = enhanced.split('.').map(|p| p.parse::<u16>().unwrap_or(0));
    let class = u8::try_from(parts.next().unwrap_or(5)).unwrap_or(5);
    let code_e = EnhancedCode::new(class, parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    Reply::new(code, code_e, text)
}

/// Where the mail comes from, which decides what it may do.
#[derive(Debug, Clone)]
pub enum Source {
    /// A LAN client at this address; may authenticate against these users.
    Lan {
        /// The client's address.
        client: IpAddr,
        /// Users for AUTH, name to password.
        users: Arc<BTreeMap<String, String>>,
    },
    /// A peer gateway over HF, by its name in the routing table.
    Peer {
        /// The peer's name.
        name: String,
        /// How it is identified in `Received:` (e.g. its STANAG 5066 address).
        identity: String,
        /// The protocol its mail came by (`HMTP`, `CFTP`, `P_MUL`), for the journal.
        link: &'static str,
    },
}

/// The session policy: relay control from the routing table, size limits per peer, AUTH, and
/// (when given the spool) the spool's reserve of free space at MAIL FROM.
pub struct GatewayPolicy {
    source: Source,
    routes: Arc<SharedRoutes>,
    /// The spool whose reserve MAIL FROM checks ([`GatewayPolicy::reserve_of`]).
    spool: Option<Arc<Spool>>,
    /// The table taken at MAIL FROM, kept for the whole transaction.
    table: Arc<RoutingTable>,
    declared_size: Option<usize>,
    /// Where each accepted recipient goes.
    targets: HashMap<String, RcptRoute>,
}

/// Where an accepted recipient goes, as [`Intake::store`] needs it.
#[derive(Debug, Clone)]
struct RcptRoute {
    target: Target,
    /// Its route's default priority.
    priority: i8,
    /// The largest message its peer takes (`size_limit`); `None` for the LAN.
    limit: Option<u64>,
    /// Larger messages are held for the operator (the peer's `hold_above`).
    hold_above: Option<u64>,
    /// What its link leaves ashore, when anything: the limits weigh a message as it goes on
    /// the air (a photograph `shrink_images` scales down is weighed scaled down).
    ashore: Option<crate::hf::Ashore>,
}

impl std::fmt::Debug for GatewayPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayPolicy")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl GatewayPolicy {
    /// A policy for mail from `source`.
    pub fn new(source: Source, routes: Arc<SharedRoutes>) -> Self {
        let table = routes.current();
        GatewayPolicy {
            source,
            routes,
            spool: None,
            table,
            declared_size: None,
            targets: HashMap::new(),
        }
    }

    /// Refuses MAIL FROM with `452 4.3.1` while the message (its declared `SIZE`, or nothing
    /// when it declares none) would leave `spool`'s file system short of its reserve, so a
    /// client learns before it sends the text. [`Intake::store`] checks again with the real
    /// size; this is for the sessions that can refuse early (the LAN's SMTP, HMTP).
    pub fn reserve_of(mut self, spool: Arc<Spool>) -> Self {
        self.spool = Some(spool);
        self
    }

    /// Where the mail comes from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Decides one recipient outside an SMTP session (mail submitted by the gateway itself,
    /// as from a local client that did not authenticate) and remembers it for [`Intake::store`].
    pub fn accept_recipient(&mut self, recipient: &str) -> Result<(), Reply> {
        let t = self.decide(false, recipient)?;
        self.targets.insert(recipient.to_owned(), t);
        Ok(())
    }

    fn decide(&self, authenticated: bool, recipient: &str) -> Result<RcptRoute, Reply> {
        let route = match &self.source {
            Source::Lan { client, .. } => {
                match self.table.relay_decision(*client, authenticated, recipient) {
                    RelayDecision::Accept(route) => route,
                    RelayDecision::Refuse(refusal) => {
                        debug!(client = %client, recipient, code = refusal.code, "recipient refused");
                        return Err(reply(refusal.code, refusal.enhanced, refusal.text));
                    }
                }
            }
            Source::Peer { name, .. } => match self.table.lookup(recipient) {
                Ok(route) => {
                    if let Destination::Peer(p) = &route.destination
                        && p.name == *name
                    {
                        return Err(reply(
                            554,
                            "5.4.6",
                            format!(
                                "routing loop: {recipient} is routed back to {name}, where this message came from"
                            ),
                        ));
                    }
                    route
                }
                Err(LookupError::NoRoute(a)) => {
                    return Err(reply(
                        550,
                        "5.1.2",
                        format!("no route for {a} at this gateway"),
                    ));
                }
                Err(e) => {
                    let refusal = e.smtp_reply();
                    return Err(reply(refusal.code, refusal.enhanced, refusal.text));
                }
            },
        };
        let (target, limit, hold_above, ashore) = match route.destination {
            Destination::Lan => (Target::Lan, None, None, None),
            Destination::Peer(peer) => (
                Target::Peer(peer.name.clone()),
                Some(peer.size_limit),
                peer.hold_above,
                Some(crate::hf::Ashore::of_peer(peer)),
            ),
            // Every member must take it: the smallest member limit holds.
            Destination::Group(g) => (
                Target::Peer(g.name.clone()),
                g.members
                    .iter()
                    .filter_map(|m| self.table.peer(m).map(|p| p.size_limit))
                    .min(),
                None,
                Some(crate::hf::Ashore::of_group(g)),
            ),
        };
        let ashore = ashore.filter(crate::hf::Ashore::leaves_any);
        // The size declared is the message's as it came; one whose link leaves part of it
        // ashore is weighed once it is here.
        if let (Some(limit), Some(size), None) = (limit, self.declared_size, &ashore)
            && size as u64 > limit
        {
            return Err(reply(
                552,
                "5.3.4",
                format!("message size {size} exceeds the limit of {limit} octets for {target}"),
            ));
        }
        Ok(RcptRoute {
            target,
            priority: route.priority.value(),
            limit,
            hold_above,
            ashore,
        })
    }
}

/// The size of `body` as each target whose link leaves part of it ashore sends it (the others
/// send it as it came), weighed in the blocking pool: decoding a photograph takes a while.
async fn on_air(policy: &GatewayPolicy, body: &[u8]) -> HashMap<Target, u64> {
    let mut sizes = HashMap::new();
    let mut shared: Option<Arc<[u8]>> = None;
    for route in policy.targets.values() {
        let Some(ashore) = &route.ashore else {
            continue;
        };
        if sizes.contains_key(&route.target) {
            continue;
        }
        let message = Arc::clone(shared.get_or_insert_with(|| Arc::from(body)));
        let ashore = ashore.clone();
        let weighed = crate::blocking::spawn(move || ashore.weigh(&message)).await;
        // A weighing that panicked weighs nothing off: the message as it came.
        let size = weighed.unwrap_or(body.len() as u64);
        sizes.insert(route.target.clone(), size);
    }
    sizes
}

impl Policy for GatewayPolicy {
    fn mail_from(&mut self, _session: &SessionInfo, mail: &MailRequest) -> Verdict {
        // One table per transaction: a reload never changes a transaction half-way.
        self.table = self.routes.current();
        self.declared_size = mail.declared_size;
        self.targets.clear();
        // A sender this gateway could not route a report back to, as for a recipient
        // (553 5.6.7, RFC 6531): UTF-8 header fields and internationalised domains (as
        // A-labels) cross every bearer, internationalised local parts do not.
        if let Err(e) = ascii_path(&mail.reverse_path) {
            let refusal = e.smtp_reply();
            return Verdict::Reject(reply(refusal.code, refusal.enhanced, refusal.text));
        }
        let declared = mail.declared_size.unwrap_or(0) as u64;
        match self.spool.as_ref().map(|spool| spool.admit(declared)) {
            Some(Err(room)) => Verdict::Reject(short_of_space(room)),
            _ => Verdict::Accept,
        }
    }

    fn rcpt_to(&mut self, session: &SessionInfo, _env: &Envelope, recipient: &str) -> Verdict {
        match self.decide(session.auth_user.is_some(), recipient) {
            Ok(t) => {
                self.targets.insert(recipient.to_owned(), t);
                Verdict::Accept
            }
            Err(r) => Verdict::Reject(r),
        }
    }

    fn authenticate(&mut self, _session: &SessionInfo, credentials: &Credentials) -> bool {
        let Source::Lan { client, users } = &self.source else {
            return false;
        };
        let ok = users
            .get(&credentials.username)
            .is_some_and(|p| constant_time_eq(p.as_bytes(), credentials.password.as_bytes()));
        if !ok {
            warn!(client = %client, user = %credentials.username, "authentication failed");
        }
        ok
    }
}

/// A sender or recipient as the spool keeps it: an internationalised domain as its A-labels
/// ([`ascii_path`]), so that every bearer and next hop can carry it. The policy accepted only
/// paths that have that form; one that has not stays as it came.
fn spooled_path(path: &str) -> String {
    ascii_path(path).map_or_else(|_| path.to_owned(), std::borrow::Cow::into_owned)
}

/// Compares without an early exit, so response times tell nothing about the password.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for (i, x) in a.iter().enumerate() {
        diff |= x ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

/// What storing needs, shared by both doors.
#[derive(Debug)]
pub struct Intake {
    /// Our host name (in `Received:`).
    pub hostname: String,
    /// The spool.
    pub spool: Arc<Spool>,
    /// Woken whenever mail for the LAN has been queued.
    pub lan_wake: Arc<Notify>,
    /// Woken whenever mail for an HF peer has been queued.
    pub hf_wake: Arc<Notify>,
    /// The gateway's clock.
    pub clock: Clock,
}

impl Intake {
    /// `Err` with the reply to give (`452 4.3.1`) when a message of `size` bytes would leave
    /// the spool's file system short of its reserve ([`skywave_spool::room`]). One `statvfs`,
    /// no disk I/O, so it runs here rather than with the spool's file work
    /// (the blocking pool), and adds no task switch to the simulations' event order.
    pub fn admit(&self, size: u64) -> Result<(), Reply> {
        self.spool.admit(size).map_err(short_of_space)
    }

    /// Stores one complete message whose recipients `policy` accepted: checks the size
    /// against each peer's limit, adds the `Received:` header (naming the queue id), resolves
    /// the priority and enqueues durably. `Ok` only once the message is on disk; `Err` is the
    /// reply to give instead of 250.
    pub async fn store(
        &self,
        policy: &GatewayPolicy,
        envelope: &Envelope,
        body: &[u8],
        client_ip: Option<IpAddr>,
    ) -> Result<QueueId, Reply> {
        let size = body.len() as u64;
        let on_air = on_air(policy, body).await;
        let mut recipients = Vec::with_capacity(envelope.recipients.len());
        // Recipients whose peer holds a message this large for the operator, and why.
        let mut held = Vec::new();
        let mut held_why = Vec::new();
        let mut route_priority: Option<i8> = None;
        // Each recipient as the spool keeps it, worked out once for the queue, the
        // `Received:` header and the DSN parameters.
        let spooled: Vec<String> = envelope
            .recipients
            .iter()
            .map(|r| spooled_path(r))
            .collect();
        for (rcpt, spooled_rcpt) in envelope.recipients.iter().zip(&spooled) {
            let Some(RcptRoute {
                target,
                priority: prio,
                limit,
                hold_above,
                ..
            }) = policy.targets.get(rcpt).cloned()
            else {
                // Not seen by rcpt_to (cannot happen with the smtp crate): skip it rather
                // than guess where it goes.
                continue;
            };
            let size = on_air.get(&target).copied().unwrap_or(size);
            if let Some(limit) = limit
                && size > limit
            {
                return Err(reply(
                    552,
                    "5.3.4",
                    format!("message exceeds the limit of {limit} octets for {target}"),
                ));
            }
            route_priority = Some(route_priority.map_or(prio, |p| p.max(prio)));
            match hold_above {
                Some(above) if size > above => {
                    let why = format!(
                        "held for the operator's approval: {} is more than the {} this gateway \
                         sends to {} without it",
                        skywave_spool::Bytes(size),
                        skywave_spool::Bytes(above),
                        match &target {
                            Target::Peer(p) => p.as_str(),
                            Target::Lan => "the LAN",
                        }
                    );
                    if !held_why.contains(&why) {
                        held_why.push(why);
                    }
                    held.push((spooled_rcpt.clone(), target));
                }
                _ => recipients.push((spooled_rcpt.clone(), target)),
            }
        }
        if recipients.is_empty() && held.is_empty() {
            return Err(reply(554, "5.5.1", "no valid recipients"));
        }
        self.admit(body.len() as u64)?;
        if hop_count(body) >= MAX_HOPS {
            return Err(reply(
                554,
                "5.4.6",
                format!("too many hops: the message already has {MAX_HOPS} Received: headers"),
            ));
        }
        let now_unix = self.clock.unix_now();
        // Stale already: say so now rather than queue it for a DSN a minute later.
        if let Some(at) = skywave_spool::expiry::message_expiry(body)
            && at <= now_unix
        {
            return Err(reply(
                554,
                "5.4.7",
                format!(
                    "the message's own expiry time ({}) has passed",
                    skywave_spool::dsn::rfc5322_date(at)
                ),
            ));
        }
        let default = route_priority
            .and_then(Priority::new)
            .unwrap_or(Priority::NORMAL);
        let priority =
            Priority::resolve(envelope.mt_priority.and_then(Priority::new), body, default);
        let lan = recipients.iter().any(|(_, t)| *t == Target::Lan);
        let held_count = held.len();
        let relayed =
            (recipients.iter().filter(|(_, t)| *t != Target::Lan).count() + held_count) as u64;
        let sender = spooled_path(&envelope.reverse_path);
        let notice_to = crate::outcome::dsn_target(&policy.table, &sender);
        let notice_wake = notice_to.clone();
        let helo = envelope.helo.clone();
        let protocol = envelope.protocol;
        let mail_dsn = envelope.dsn.clone();
        let rcpt_dsn: Vec<(String, RcptDsn)> = spooled
            .iter()
            .zip(&envelope.rcpt_dsn)
            .filter(|(_, d)| !d.is_empty())
            .map(|(r, d)| (r.clone(), d.clone()))
            .collect();
        let all_rcpts = spooled;
        let client_name = match &policy.source {
            Source::Peer { identity, .. } => Some(identity.clone()),
            Source::Lan { .. } => None,
        };
        // For the journal: who handed it over, and how (`skywave queue trace`).
        let origin = Some(match &policy.source {
            Source::Peer {
                name,
                identity,
                link,
            } => format!("from peer {name} ({identity}) by {link}"),
            Source::Lan { .. } => format!(
                "from {} (HELO {}) with {}{}",
                client_ip.map_or_else(|| "an unknown address".to_owned(), |ip| ip.to_string()),
                shown(&helo),
                protocol.as_str(),
                envelope
                    .auth_user
                    .as_ref()
                    .map(|u| format!(" as {}", shown(u)))
                    .unwrap_or_default()
            ),
        });
        let hostname = self.hostname.clone();
        let spool = Arc::clone(&self.spool);
        let message = body.to_vec();
        let stored = crate::blocking::spawn(move || {
            let received = |id: &QueueId| {
                received_header(&ReceivedInfo {
                    helo: &helo,
                    client_ip,
                    client_name: client_name.as_deref(),
                    by_host: &hostname,
                    protocol,
                    queue_id: id.as_str(),
                    recipients: &all_rcpts,
                    date: DateTime {
                        unix_seconds: i64::try_from(now_unix).unwrap_or(i64::MAX),
                        offset_minutes: 0,
                    },
                })
            };
            let new = |recipients| NewMessage {
                sender: sender.clone(),
                recipients,
                priority,
                message: &message,
                dsn: mail_dsn.clone(),
                rcpt_dsn: rcpt_dsn.clone(),
                origin: origin.clone(),
            };
            // The held copy first: if the other cannot be stored, it is taken back and the
            // client, told to try again, sends both again, never one twice.
            let held_id = if held.is_empty() {
                None
            } else {
                Some(spool.enqueue_held_with_header(
                    &new(held),
                    now_unix,
                    received,
                    &held_why.join("; "),
                )?)
            };
            let id = if recipients.is_empty() {
                None
            } else {
                match spool.enqueue_with_header(&new(recipients), now_unix, received) {
                    Ok(id) => Some(id),
                    Err(e) => {
                        if let Some(h) = &held_id
                            && let Err(again) = spool.delete(h)
                        {
                            warn!(queue_id = %h, error = %again, "cannot take back the held copy of a message not stored");
                        }
                        return Err(e);
                    }
                }
            };
            // Its sender hears at once that the held copy waits for the operator.
            let notice = match &held_id {
                Some(h) => spool.warn_now(h, notice_to, now_unix).unwrap_or_else(|e| {
                    warn!(queue_id = %h, error = %e, "cannot tell the sender the message is held");
                    None
                }),
                None => None,
            };
            // Some copy was stored: the 250 names the one that goes on.
            let main = match (id, &held_id) {
                (Some(id), _) => id,
                (None, Some(h)) => h.clone(),
                (None, None) => return Err(skywave_spool::Error::NoRecipients),
            };
            Ok::<_, skywave_spool::Error>((main, held_id, notice))
        })
        .await;
        match stored {
            Ok(Ok((id, held_id, notice))) => {
                if let Some(h) = &held_id {
                    info!(queue_id = %h, rcpts = held_count, bytes = body.len(), "held for the operator's approval");
                }
                if notice.is_some() {
                    match &notice_wake {
                        Target::Lan => self.lan_wake.notify_one(),
                        Target::Peer(_) => self.hf_wake.notify_waiters(),
                    }
                }
                tracing::Span::current().record("queue_id", tracing::field::display(&id));
                info!(
                    queue_id = %id,
                    from = %envelope.reverse_path,
                    rcpts = envelope.recipients.len(),
                    bytes = body.len(),
                    %priority,
                    "queued"
                );
                m::accepted(body.len() as u64, relayed);
                if lan {
                    self.lan_wake.notify_one();
                }
                if relayed > 0 {
                    self.hf_wake.notify_waiters();
                }
                Ok(id)
            }
            Ok(Err(e)) => {
                warn!(error = %e, "spool refused the message");
                Err(spool_failure())
            }
            Err(e) => {
                warn!(error = %e, "spool task failed");
                Err(spool_failure())
            }
        }
    }
}

/// The refusal of new mail while the spool's file system is short of space: temporary, so the
/// sender keeps the message and tries again.
fn short_of_space(room: Room) -> Reply {
    m::refused_for_space();
    reply(
        452,
        "4.3.1",
        format!(
            "insufficient system storage: {room} for the mail this gateway already holds; \
             try again later"
        ),
    )
}

fn spool_failure() -> Reply {
    reply(
        451,
        "4.3.0",
        "local error in processing: the message could not be queued, try again later",
    )
}

/// `Received:` headers in the message's header section.
fn hop_count(message: &[u8]) -> usize {
    let end = message
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(message.len());
    message[..end]
        .split(|&b| b == b'\n')
        .filter(|l| l.len() >= 9 && l[..9].eq_ignore_ascii_case(b"received:"))
        .count()
}

/// What a client said (its HELO, its user name) as the journal keeps it for `skywave queue
/// trace` to print on an operator's terminal: at most 255 characters, control characters (a
/// terminal's escape sequences among them) shown as `?` ([`skywave_spool::journal::printable`]).
fn shown(said: &str) -> String {
    let bounded: String = said.chars().take(255).collect();
    skywave_spool::journal::printable(&bounded).into_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A client's HELO reaches the operator's terminal through `skywave queue trace`: no escape
    /// sequence gets there, and no novel.
    #[test]
    fn what_a_client_said_is_shown_printable_and_bounded() {
        assert_eq!(shown("pc.ship.example"), "pc.ship.example");
        assert_eq!(shown("\u{1b}[2J\u{1b}[31mpc\r\n"), "?[2J?[31mpc??");
        assert_eq!(shown(&"x".repeat(1000)).len(), 255);
    }

    #[test]
    fn passwords_compare_exactly() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secre"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    #[test]
    fn hops_are_counted_in_the_header_only() {
        let m = b"Received: a\r\nreceived: b\r\nSubject: x\r\n\r\nReceived: not a header\r\n";
        assert_eq!(hop_count(m), 2);
    }
}
