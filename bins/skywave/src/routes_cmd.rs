//! `skywave routes ...`: check a routing table and explain where an address would go.
//!
//! Both commands load the table exactly as the daemon does (`skywave_route::RoutingTable::load`),
//! so a table that passes `check` is one the daemon will accept on SIGHUP.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use skywave_gateway::check::{count, table_summary};
use skywave_route::{Destination, LoadError, RoutingTable};

/// `skywave routes` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum RoutesCommand {
    /// Check a routing table: exit 0 with a summary (and any warnings) when it is valid,
    /// exit 1 with every error (file:line:column) when it is not.
    Check {
        /// The routing table, e.g. config/routes.toml.
        file: PathBuf,
    },
    /// Explain where an address would go: the rules considered, the one that wins, and the
    /// peer or group, protocol, compression, bearer, priority and size limit. With several
    /// addresses (the recipients of one message), also how the message travels: once by P_MUL
    /// multicast to a group when two or more of its ships (or one under EMCON) have recipients,
    /// else by unicast to each peer. With --client-ip, also whether the gateway would accept it
    /// from that client (relay control). Exit 0 when every address is routed (and accepted), 1
    /// when one is refused or unroutable, 2 when the table does not load.
    Explain {
        /// The routing table, e.g. config/routes.toml.
        file: PathBuf,
        /// The recipient addresses, as in RCPT TO (angle brackets optional).
        #[arg(required = true, num_args = 1..)]
        address: Vec<String>,
        /// The SMTP client's IP address, to check relay permission.
        #[arg(long, value_name = "IP")]
        client_ip: Option<IpAddr>,
        /// The client authenticated (SMTP AUTH).
        #[arg(long, requires = "client_ip")]
        authenticated: bool,
    },
}

pub(crate) fn run(command: RoutesCommand) -> anyhow::Result<ExitCode> {
    match command {
        RoutesCommand::Check { file } => Ok(check(&file)),
        RoutesCommand::Explain {
            file,
            address,
            client_ip,
            authenticated,
        } => Ok(explain(&file, &address, client_ip, authenticated)),
    }
}

/// Prints every diagnostic of a table that did not load, and a count.
fn report_load_error(err: &LoadError) {
    eprintln!("{err}");
    if let LoadError::Invalid(_) = err {
        let warnings = err.diagnostics().len() - err.error_count();
        let mut summary = count(err.error_count(), "error");
        if warnings > 0 {
            summary.push_str(&format!(", {}", count(warnings, "warning")));
        }
        eprintln!("{summary}: the routing table was not accepted");
    }
}

fn check(file: &std::path::Path) -> ExitCode {
    match RoutingTable::load(file) {
        Ok(table) => {
            for warning in table.warnings() {
                eprintln!("{warning}");
            }
            let mut summary = format!("{}, OK", table_summary(&table));
            if !table.warnings().is_empty() {
                summary.push_str(&format!(" ({})", count(table.warnings().len(), "warning")));
            }
            outln!("{summary}");
            for g in table.groups() {
                let members: Vec<String> = g
                    .members
                    .iter()
                    .map(|m| match table.peer(m) {
                        Some(p) if p.emcon => format!("{m} (EMCON)"),
                        Some(p) => match p.ip.filter(|_| g.ip().is_some()) {
                            Some(ip) => format!("{m} ({ip})"),
                            None => m.clone(),
                        },
                        None => m.clone(),
                    })
                    .collect();
                let windows = g
                    .schedule
                    .as_ref()
                    .map(|s| format!(", in its windows {s}"))
                    .unwrap_or_default();
                outln!(
                    "group {} at {}: {}; mail for two or more of them goes once by P_MUL{windows}",
                    g.name,
                    g.address_text(),
                    members.join(", ")
                );
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            report_load_error(&err);
            ExitCode::FAILURE
        }
    }
}

fn explain(
    file: &std::path::Path,
    addresses: &[String],
    client_ip: Option<IpAddr>,
    authenticated: bool,
) -> ExitCode {
    let table = match RoutingTable::load(file) {
        Ok(table) => table,
        Err(err) => {
            report_load_error(&err);
            return ExitCode::from(2);
        }
    };
    let mut ok = true;
    // The spool's target of each routed recipient: a peer's or a group's name.
    let mut targets: Vec<(String, String)> = Vec::new();
    for (i, address) in addresses.iter().enumerate() {
        if i > 0 {
            outln!();
        }
        let explanation = table.explain(address, client_ip.map(|ip| (ip, authenticated)));
        out!("{explanation}");
        let accepted = explanation
            .relay
            .as_ref()
            .is_none_or(|relay| relay.verdict.is_ok());
        ok &= explanation.route.is_some() && accepted;
        if let Ok(route) = table.lookup(address) {
            match route.destination {
                Destination::Peer(p) => targets.push((address.clone(), p.name.clone())),
                Destination::Group(g) => targets.push((address.clone(), g.name.clone())),
                Destination::Lan => {}
            }
        }
    }
    if addresses.len() > 1 {
        outln!();
        print_plan(&table, &targets);
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// How one message to these recipients would travel over HF.
fn print_plan(table: &RoutingTable, targets: &[(String, String)]) {
    outln!("one message to these recipients:");
    if targets.is_empty() {
        outln!("  nothing goes over HF");
        return;
    }
    let plan = table.plan(targets.iter().map(|(_, t)| t.as_str()));
    let rcpts = |names: &[&str]| -> String {
        targets
            .iter()
            .filter(|(_, t)| names.contains(&t.as_str()))
            .map(|(a, _)| a.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for leg in &plan.multicast {
        let why = if leg.whole_group {
            format!("mail for the group {} itself", leg.group.name)
        } else if leg.members.len() >= 2 {
            format!("{} of its ships have recipients", leg.members.len())
        } else if leg.emcon {
            "its ship keeps EMCON".to_owned()
        } else {
            "its ship is reached only by P_MUL over IP".to_owned()
        };
        let mut names = leg.members.clone();
        names.push(leg.group.name.as_str());
        // Some of an IP group's ships only: the gateway takes a dynamic group for them.
        let to = match &leg.group.bearer {
            skywave_route::GroupBearer::PmulIp {
                dynamic: Some(pool),
                ..
            } if !leg.whole_group
                && leg.destinations().len() >= 2
                && leg.destinations().len() < leg.group.members.len() =>
            {
                format!("a dynamic group of just them from {pool}")
            }
            _ => leg.group.address_text(),
        };
        outln!(
            "  multicast: once by P_MUL to group {} ({to}) for {} ({why}): {}",
            leg.group.name,
            leg.destinations().join(", "),
            rcpts(&names)
        );
    }
    for peer in &plan.unicast {
        let protocol = table
            .peer(peer)
            .map_or_else(String::new, |p| format!(" by {}", p.protocol));
        let group = table.group_of(peer).map_or_else(String::new, |g| {
            format!(" (the only ship of group {} in this message)", g.name)
        });
        outln!("  unicast: to {peer}{protocol}{group}: {}", rcpts(&[peer]));
    }
}
