//! `skywave`: the HF mail gateway daemon and its admin CLI.
//!
//! Each subcommand lives in its own module; this file only parses the command line, sets up
//! logging and dispatches.

// `outln!` and `out!` for every command's report: a closed pipe (`skywave queue list | head`)
// ends the program quietly instead of a panic.
#[macro_use]
extern crate skywave_cliout;

mod check_cmd;
mod codec_cmd;
mod demo;
mod emcon_cmd;
mod fleet_demo;
mod queue_cmd;
mod routes_cmd;
mod run_cmd;
mod sis_cmd;
mod status_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// skywave: a mail gateway for HF radio links (SMTP on the LAN, HMTP/CFTP over STANAG 5066).
#[derive(Debug, Parser)]
#[command(name = "skywave", version, about, long_about = None)]
struct Cli {
    /// Log filter in `tracing` syntax (e.g. `info`, `skywave_sis=debug`); overrides RUST_LOG.
    #[arg(long, global = true)]
    log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the gateway daemon in the foreground (SIGHUP reloads routes, SIGTERM stops).
    Run(run_cmd::RunArgs),
    /// Check the configuration as a whole before a restart: the routing table it names, how
    /// each peer is reached, directories, ports, the STARTTLS certificate (--probe: connect to
    /// the SIS servers and the smarthost). Exit 0 when nothing is an error.
    Check(check_cmd::CheckArgs),
    /// Queue depth per target, held peers, oldest message, the spool disk against its reserve,
    /// the last sessions and the day per peer, and whether the gateway runs.
    Status(status_cmd::StatusArgs),
    /// Two gateways over the bundled HF emulator: a mail delivered and the air-time report printed
    /// (`--ships N`: a base and N ships on one frequency, fleet mail by P_MUL multicast).
    Demo(demo::DemoArgs),
    /// EMCON (radio silence) of a gateway: set it, lift it, or show it. A running gateway
    /// follows within two seconds; a restart returns to `[hf] emcon` of the configuration.
    Emcon(emcon_cmd::EmconArgs),
    /// STANAG 5066 SIS diagnostics.
    Sis {
        #[command(subcommand)]
        command: sis_cmd::SisCommand,
    },
    /// Inspect and steer the spool: list, show, hold, release, bounce, move, delete, flush.
    Queue(queue_cmd::QueueArgs),
    /// Check a routing table, and explain where an address would go.
    Routes {
        #[command(subcommand)]
        command: routes_cmd::RoutesCommand,
    },
    /// Compress, decompress and compare compression schemes (stdin to stdout).
    Codec {
        #[command(subcommand)]
        command: codec_cmd::CodecCommand,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The daemon tells what it does at info level; the other commands only warn.
    let default_filter = match cli.command {
        Command::Run(_) => "info",
        _ => "warn",
    };
    init_logging(cli.log.as_deref(), default_filter);
    let result = match cli.command {
        Command::Run(args) => run_cmd::run(args),
        Command::Check(args) => check_cmd::run(args),
        Command::Status(args) => status_cmd::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Emcon(args) => emcon_cmd::run(args),
        Command::Sis { command } => sis_cmd::run(command),
        Command::Queue(args) => queue_cmd::run(args),
        Command::Routes { command } => routes_cmd::run(command),
        Command::Codec { command } => codec_cmd::run(command),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("skywave: {}", report(&err));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, as anyhow's `{:#}` writes them, but without a cause
/// the error before it already quotes: the libraries' errors put their source in their own
/// message (so a log line with only `%e` says why), and the chain would say it twice.
fn report(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// Logs go to stderr so that stdout stays clean for data (`skywave codec`) and reports.
fn init_logging(filter: Option<&str>, default_filter: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = match filter {
        Some(f) => EnvFilter::new(f),
        None => {
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter))
        }
    };
    // Colours only on a terminal: logs sent to a file or journal stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_quoted_is_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let spool = skywave_spool::Error::Io {
            op: "list",
            path: "state/spool/held-targets".into(),
            source: io,
        };
        let err = anyhow::Error::new(spool).context("cannot list the queue");
        assert_eq!(
            report(&err),
            "cannot list the queue: spool I/O error: list state/spool/held-targets: no such file"
        );
        // A cause that says something new is kept.
        let err = anyhow::anyhow!("inner").context("outer");
        assert_eq!(report(&err), "outer: inner");
    }
}
