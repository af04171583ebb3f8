//! `skywave queue ...`: inspect and steer a gateway's spool, running or stopped.
//!
//! Opens the spool in admin mode (`Spool::open_admin`): every change goes through the same atomic
//! renames and short lock the gateway itself uses, so it is safe while the gateway runs, and the
//! gateway sees the change on its next scan.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use skywave_gateway::outcome::give_up;
use skywave_route::RoutingTable;
use skywave_spool::{
    Entry, QueueId, QueueState, RcptState, Spool, SpoolConfig, Target, unix_seconds,
};

/// `skywave queue` options and subcommands.
#[derive(Debug, Args)]
pub(crate) struct QueueArgs {
    /// The gateway configuration (see config/skywave.toml): the spool is `state_dir/spool`.
    #[arg(long, env = "SKYWAVE_CONFIG", required_unless_present = "spool")]
    config: Option<PathBuf>,
    /// The spool directory itself, instead of `--config`.
    #[arg(long, env = "SKYWAVE_SPOOL", conflicts_with = "config")]
    spool: Option<PathBuf>,
    #[command(subcommand)]
    command: QueueCommand,
}

#[derive(Debug, Subcommand)]
enum QueueCommand {
    /// One line per message: id, state, age, size, priority, sender, recipients.
    List {
        /// Only messages with a recipient for this peer (`lan` for local delivery).
        #[arg(long)]
        peer: Option<String>,
    },
    /// Everything about one message: envelope, each recipient's status and last error, headers.
    Show {
        /// Queue id.
        id: String,
    },
    /// Hold a message, or every message for a peer (`--peer`), until released.
    Hold {
        /// Queue id.
        #[arg(required_unless_present = "peer", conflicts_with = "peer")]
        id: Option<String>,
        /// Hold everything for this peer, including mail queued later.
        #[arg(long)]
        peer: Option<String>,
    },
    /// Release a held message or a held peer; a dead letter is released back into the queue.
    Release {
        /// Queue id.
        #[arg(required_unless_present = "peer", conflicts_with = "peer")]
        id: Option<String>,
        /// Release this peer.
        #[arg(long)]
        peer: Option<String>,
    },
    /// Give up on a message, or on all of a peer's mail (`--peer`): its recipients still
    /// waiting fail (5.0.0) and the sender gets a DSN with the reason. Needs --config (the
    /// routing table routes the DSN).
    Bounce {
        /// Queue id.
        #[arg(required_unless_present = "peer", conflicts_with = "peer")]
        id: Option<String>,
        /// Give up on every queued or held message's recipients for this peer.
        #[arg(long)]
        peer: Option<String>,
        /// Why, in the DSN (say what the sender can do instead).
        #[arg(long, default_value = "no delivery is possible on this route for now")]
        reason: String,
    },
    /// Send a peer's waiting mail by another peer now: its fallback (`fallback` in the routing
    /// table) unless --to says which. Takes what is not held, not in the middle of an attempt,
    /// and within the other peer's size_limit and hold_above, whatever its age. Needs --config.
    Move {
        /// The peer whose mail moves.
        #[arg(long)]
        peer: String,
        /// The peer that takes it (default: the fallback of --peer).
        #[arg(long)]
        to: Option<String>,
    },
    /// Delete a message for good (no bounce is sent).
    Delete {
        /// Queue id.
        id: String,
    },
    /// Make deferred mail due now, for one peer or for all.
    Flush {
        /// Only this peer.
        #[arg(long)]
        peer: Option<String>,
    },
    /// What happened to a message, from the spool's journal, whether it is still queued or
    /// long gone: queued, each attempt and where, why it failed, moves to a fallback and back,
    /// delivered, its delivery report. Exit 1 when nothing matches.
    Trace {
        /// A queue id, a Message-ID (angle brackets optional), or an address (a sender or a
        /// recipient); several are several searches.
        #[arg(required = true)]
        what: Vec<String>,
    },
}

pub(crate) fn run(args: QueueArgs) -> anyhow::Result<ExitCode> {
    let config = match &args.config {
        Some(path) => match skywave_gateway::config::load(path) {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("{e}");
                return Ok(ExitCode::from(2));
            }
        },
        None => None,
    };
    let dir = match (&args.spool, &config) {
        (Some(dir), _) => dir.clone(),
        (None, Some(c)) => c.spool_dir(),
        (None, None) => bail!("give --config FILE or --spool DIR"),
    };
    let mut spool_config = SpoolConfig::default();
    if let Some(c) = &config {
        // The DSNs an operator's bounce writes name this gateway, as its own do.
        spool_config.reporting_mta = c.hostname.clone();
    }
    let spool = Spool::open_admin(&dir, spool_config)
        .with_context(|| format!("cannot open the spool at {}", dir.display()))?;
    let now = unix_seconds(std::time::SystemTime::now());
    match args.command {
        QueueCommand::List { peer } => list(&spool, peer.as_deref().map(target), now)?,
        QueueCommand::Show { id } => {
            // With the routing table, what each peer's links send of it (not needed else).
            let table = config
                .as_ref()
                .and_then(|c| RoutingTable::load(&c.routes).ok());
            show(&spool, &queue_id(&id)?, table.as_ref(), now)?;
        }
        QueueCommand::Trace { what } => return trace(&dir, &what),
        QueueCommand::Hold { id, peer } => match (id, peer) {
            (_, Some(p)) => {
                spool.hold_target(&target(&p))?;
                outln!("held {p}: its mail stays queued until `skywave queue release --peer {p}`");
            }
            (Some(id), None) => {
                spool.hold(&queue_id(&id)?)?;
                outln!("held {id}");
            }
            (None, None) => bail!("give a queue id or --peer"),
        },
        QueueCommand::Release { id, peer } => match (id, peer) {
            (_, Some(p)) => {
                spool.release_target(&target(&p))?;
                outln!("released {p}");
            }
            (Some(id), None) => {
                spool.release(&queue_id(&id)?)?;
                outln!("released {id}");
            }
            (None, None) => bail!("give a queue id or --peer"),
        },
        QueueCommand::Bounce { id, peer, reason } => {
            let Some(config) = &config else {
                bail!("bounce needs --config: the routing table routes the DSN to the sender");
            };
            let table = RoutingTable::load(&config.routes).with_context(|| {
                format!("cannot load the routing table {}", config.routes.display())
            })?;
            let reason = format!("returned by the operator of {}: {reason}", config.hostname);
            bounce(&spool, &table, id.as_deref(), peer.as_deref(), &reason, now)?;
        }
        QueueCommand::Move { peer, to } => {
            let Some(config) = &config else {
                bail!("move needs --config: the routing table says which peers there are");
            };
            let table = RoutingTable::load(&config.routes).with_context(|| {
                format!("cannot load the routing table {}", config.routes.display())
            })?;
            move_mail(&spool, &table, &peer, to.as_deref(), now)?;
        }
        QueueCommand::Delete { id } => {
            let state = spool.delete(&queue_id(&id)?)?;
            outln!("deleted {id} (was {})", state.name());
        }
        QueueCommand::Flush { peer } => {
            let n = spool.flush(peer.as_deref().map(target).as_ref())?;
            outln!("{n} message(s) made due now");
        }
    }
    // Whatever changed, a running gateway looks at its queue at once (not at its next timer).
    spool.nudge();
    Ok(ExitCode::SUCCESS)
}

/// `skywave queue move`: what waits for `peer` goes to `to` (or to its fallback) now, unix
/// second `now`.
fn move_mail(
    spool: &Spool,
    table: &RoutingTable,
    peer: &str,
    to: Option<&str>,
    now: u64,
) -> anyhow::Result<()> {
    let Some(from) = table.peer(peer) else {
        bail!("no peer \"{peer}\" in the routing table");
    };
    let to = match (to, &from.fallback) {
        (Some(t), _) => t,
        (None, Some(fb)) => fb.peer.as_str(),
        (None, None) => {
            bail!("peer \"{peer}\" has no fallback in the routing table; say where with --to PEER")
        }
    };
    let Some(into) = table.peer(to) else {
        bail!("no peer \"{to}\" in the routing table");
    };
    if into.name == from.name {
        bail!("--to names \"{to}\" itself");
    }
    if into.emcon {
        bail!("peer \"{to}\" keeps EMCON and is reached only by multicast");
    }
    let target = Target::Peer(from.name.clone());
    if spool.is_target_held(&target)? {
        bail!("{peer} is held: release it first (`skywave queue release --peer {peer}`)");
    }
    let moved = skywave_gateway::fallback::move_waiting(spool, from, into, now)?;
    let rcpts: usize = moved.iter().map(|(_, r)| r.len()).sum();
    outln!(
        "moved {rcpts} recipient(s) of {} message(s) from {peer} to {to}",
        moved.len()
    );
    let left = spool.waiting(&target)?.len();
    if left > 0 {
        outln!(
            "{left} message(s) still wait for {peer}: over the {} bytes {to} takes without holding it",
            skywave_gateway::fallback::size_allowed(into)
        );
    }
    Ok(())
}

/// `skywave queue trace`: each message the terms name, and the reports on it, as the journal
/// tells its life; exit 1 when none matches.
fn trace(dir: &std::path::Path, terms: &[String]) -> anyhow::Result<ExitCode> {
    use skywave_spool::journal::{self, What, printable};
    let events = journal::read(dir)
        .with_context(|| format!("cannot read the journal of the spool at {}", dir.display()))?;
    // Each message's events, in the journal's order, gathered once for every term.
    let mut lives: std::collections::HashMap<&str, Vec<&journal::Event>> =
        std::collections::HashMap::new();
    for e in &events {
        lives.entry(e.id.as_str()).or_default().push(e);
    }
    let mut found = false;
    for term in terms {
        let ids = journal::matching(&events, term);
        if ids.is_empty() {
            outln!("{term}: not in the journal");
            continue;
        }
        found = true;
        for id in ids {
            let life = lives.get(id.as_str()).cloned().unwrap_or_default();
            let head = life.iter().find(|e| e.from.is_some());
            let mut title = id.clone();
            if let Some(h) = head {
                if let Some(m) = &h.message_id {
                    title.push_str(&format!("  {m}"));
                }
                match h.from.as_deref() {
                    Some("") => title.push_str("  a delivery report (null sender)"),
                    Some(f) => title.push_str(&format!("  from <{f}>")),
                    None => {}
                }
                if let Some(size) = h.size {
                    title.push_str(&format!(", {size} bytes"));
                }
            }
            outln!("{}", printable(&title));
            if let Some(origin) = head.and_then(|h| h.origin.as_deref()) {
                outln!("  came {}", printable(origin));
            }
            for e in life {
                let mut line = format!(
                    "  {}  {}",
                    skywave_spool::dsn::rfc5322_date(e.t),
                    e.what.word()
                );
                if !e.rcpts.is_empty() {
                    let to = if matches!(e.what, What::Queued | What::QueuedHeld) {
                        " for"
                    } else {
                        ""
                    };
                    line.push_str(&format!("{to} {}", e.rcpts.join(", ")));
                }
                if let Some(via) = &e.via {
                    line.push_str(&format!(" via {via}"));
                }
                if let Some(text) = &e.text {
                    line.push_str(&format!(": {text}"));
                }
                outln!("{}", printable(&line));
            }
        }
    }
    Ok(if found {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `skywave queue bounce`: one message, or every queued or held message with mail for `peer`.
fn bounce(
    spool: &Spool,
    table: &RoutingTable,
    id: Option<&str>,
    peer: Option<&str>,
    reason: &str,
    now: u64,
) -> anyhow::Result<()> {
    let only = peer.map(target);
    let ids: Vec<QueueId> = match id {
        Some(id) => vec![queue_id(id)?],
        None => {
            let mut ids = Vec::new();
            for entry in spool.entries()? {
                let entry = entry?;
                let Some(env) = &entry.envelope else { continue };
                let waits = env
                    .recipients
                    .iter()
                    .any(|r| only.as_ref().is_none_or(|t| &r.target == t) && !r.state.is_final());
                if entry.state != QueueState::Dead && waits {
                    ids.push(queue_id(&entry.name)?);
                }
            }
            ids
        }
    };
    let mut failures = 0usize;
    for id in &ids {
        // One message the gateway finished meanwhile (or that went bad) does not stop the rest.
        let done = match give_up(spool, table, id, only.as_ref(), reason, now) {
            Ok(done) => done,
            Err(e) => {
                eprintln!("{id}: not given up: {e}");
                failures += 1;
                continue;
            }
        };
        let mut line = format!("{id}: {} recipient(s) failed", done.failed);
        if done.in_flight > 0 {
            line.push_str(&format!(
                ", {} in flight left to their outcome",
                done.in_flight
            ));
        }
        match (&done.dsn, done.finished) {
            (Some(dsn), _) => line.push_str(&format!("; DSN {dsn} queued to the sender")),
            (None, true) => line.push_str("; no DSN (null sender)"),
            (None, false) if done.failed > 0 => {
                line.push_str("; the DSN goes when its other recipients are done");
            }
            (None, false) => {}
        }
        outln!("{line}");
    }
    if ids.is_empty() {
        outln!("no message waits for {}", peer.unwrap_or("that"));
    }
    if failures > 0 {
        bail!(
            "{failures} of {} message(s) not given up (above)",
            ids.len()
        );
    }
    Ok(())
}

/// `lan` means local delivery; anything else is a peer name from the routing table.
fn target(name: &str) -> Target {
    if name.eq_ignore_ascii_case("lan") {
        Target::Lan
    } else {
        Target::Peer(name.to_string())
    }
}

fn queue_id(id: &str) -> anyhow::Result<QueueId> {
    QueueId::parse(id).with_context(|| format!("{id:?} is not a queue id"))
}

fn list(spool: &Spool, only: Option<Target>, now: u64) -> anyhow::Result<()> {
    let held: Vec<Target> = spool.held_targets()?;
    let mut shown = 0usize;
    outln!(
        "{:<24} {:<6} {:>8} {:>9} {:>4}  sender -> recipients",
        "id",
        "state",
        "age",
        "bytes",
        "prio"
    );
    for entry in spool.entries()? {
        let entry = entry?;
        if let Some(t) = &only {
            let matches = entry
                .envelope
                .as_ref()
                .is_some_and(|e| e.recipients.iter().any(|r| &r.target == t));
            if !matches {
                continue;
            }
        }
        shown += 1;
        outln!("{}", list_line(&entry, now));
    }
    outln!("{shown} message(s)");
    for t in held {
        outln!("peer held: {t}");
    }
    Ok(())
}

fn list_line(entry: &Entry, now: u64) -> String {
    let Some(env) = &entry.envelope else {
        return format!(
            "{:<24} {:<6} {:>8} {:>9} {:>4}  unreadable: {}",
            entry.name,
            entry.state.name(),
            "-",
            entry.file_size,
            "-",
            entry.problem.as_deref().unwrap_or("unknown problem")
        );
    };
    let rcpts: Vec<String> = env
        .recipients
        .iter()
        .map(|r| format!("{} ({}, {})", r.address, r.target, r.state.name()))
        .collect();
    let sender = if env.sender.is_empty() {
        "<>"
    } else {
        &env.sender
    };
    format!(
        "{:<24} {:<6} {:>8} {:>9} {:>4}  {} -> {}",
        entry.name,
        entry.state.name(),
        age(now.saturating_sub(env.arrival)),
        env.size,
        env.priority,
        sender,
        rcpts.join(", ")
    )
}

fn show(spool: &Spool, id: &QueueId, table: Option<&RoutingTable>, now: u64) -> anyhow::Result<()> {
    let (state, file) = spool.load(id)?;
    let env = &file.envelope;
    outln!("id:        {}", env.id);
    outln!("state:     {}", state.name());
    if let Some(reason) = &env.dead_reason {
        outln!("dead:      {reason}");
    }
    outln!("sender:    <{}>", env.sender);
    outln!(
        "arrived:   {} ago; expires in {}",
        age(now.saturating_sub(env.arrival)),
        age(env.expires.saturating_sub(now))
    );
    outln!("size:      {} bytes", env.size);
    // What goes on the air to each peer that leaves part of it ashore (its size_limit and
    // hold_above weigh that).
    let mut peers: Vec<&str> = env
        .recipients
        .iter()
        .filter_map(|r| match &r.target {
            Target::Peer(p) => Some(p.as_str()),
            Target::Lan => None,
        })
        .collect();
    peers.sort_unstable();
    peers.dedup();
    for peer in peers {
        if let Some((octets, said)) =
            table.and_then(|t| skywave_gateway::hf::on_the_air(t, peer, &file.message))
        {
            outln!("on air:    {octets} bytes to {peer} ({said})");
        }
    }
    outln!("priority:  {}", env.priority);
    if !env.dsn.is_empty() {
        // As the sender's MAIL gave them (RFC 3461).
        outln!("reports:  {}", env.dsn.esmtp());
    }
    if let Some(t) = env.delay_warned {
        outln!(
            "warned:    the sender was told of the delay {} ago",
            age(now.saturating_sub(t))
        );
    }
    for r in &env.recipients {
        let mut line = format!(
            "rcpt:      <{}> via {}: {}, {} attempt(s)",
            r.address,
            r.target,
            r.state.name(),
            r.attempts
        );
        match &r.state {
            RcptState::Failed(f) => line.push_str(&format!("; {} {}", f.status, f.diagnostic)),
            RcptState::Deferred | RcptState::Pending if r.next_attempt > now => {
                line.push_str(&format!("; next try in {}", age(r.next_attempt - now)));
            }
            _ => {}
        }
        if let Some(err) = &r.last_error {
            line.push_str(&format!("; last error: {err}"));
        }
        if !r.dsn.is_empty() {
            line.push_str(&format!("; asked{}", r.dsn.esmtp()));
        }
        if r.success.is_some() {
            line.push_str("; its delivery is reported once the message is complete");
        }
        if let Some(m) = &r.moved {
            line.push_str(&format!("; {m}"));
        }
        outln!("{line}");
    }
    outln!("headers:");
    let end = file
        .message
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(file.message.len(), |p| p + 2);
    for line in String::from_utf8_lossy(&file.message[..end]).lines() {
        outln!("  {line}");
    }
    Ok(())
}

/// A duration for people: `42s`, `17m`, `3h12m`, `2d4h`.
fn age(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        s => format!("{}d{}h", s / 86_400, (s % 86_400) / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::age;

    #[test]
    fn ages_read_like_a_person_writes_them() {
        assert_eq!(age(5), "5s");
        assert_eq!(age(61), "1m");
        assert_eq!(age(3 * 3600 + 12 * 60), "3h12m");
        assert_eq!(age(2 * 86_400 + 4 * 3600), "2d4h");
    }
}
