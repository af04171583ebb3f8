//! `skywave routes ...`: check a routing table and explain where an address would go.
//!
//! Both commands load the table exactly as the daemon does (`skywave_route::RoutingTable::load`),
//! so a table that passes `check` is one the daemon will accept on SIGHUP.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use skywave_route::{LoadError, RoutingTable};

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
    /// peer, protocol, compression, bearer, priority and size limit. With --client-ip, also
    /// whether the gateway would accept it from that client (relay control). Exit 0 when the
    /// address is routed (and accepted), 1 when it is refused or unroutable, 2 when the table
    /// does not load.
    Explain {
        /// The routing table, e.g. config/routes.toml.
        file: PathBuf,
        /// The recipient address, as in RCPT TO (angle brackets optional).
        address: String,
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

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Prints every diagnostic of a table that did not load, and a count.
fn report_load_error(err: &LoadError) {
    eprintln!("{err}");
    if let LoadError::Invalid(_) = err {
        let warnings = err.diagnostics().len() - err.error_count();
        let mut summary = plural(err.error_count(), "error", "errors");
        if warnings > 0 {
            summary.push_str(&format!(", {}", plural(warnings, "warning", "warnings")));
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
            let mut summary = format!(
                "{}, {}, OK",
                plural(table.peers().len(), "peer", "peers"),
                plural(table.route_count(), "route", "routes")
            );
            if !table.warnings().is_empty() {
                summary.push_str(&format!(
                    " ({})",
                    plural(table.warnings().len(), "warning", "warnings")
                ));
            }
            println!("{summary}");
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
    address: &str,
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
    let explanation = table.explain(address, client_ip.map(|ip| (ip, authenticated)));
    print!("{explanation}");
    let routed = explanation.route.is_some();
    let accepted = explanation
        .relay
        .as_ref()
        .is_none_or(|relay| relay.verdict.is_ok());
    if routed && accepted {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
