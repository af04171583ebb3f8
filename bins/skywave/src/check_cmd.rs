//! `skywave check --config FILE [--probe]`: the gateway's configuration checked as a whole,
//! before a restart ([`skywave_gateway::check`]).
//!
//! Prints one line per finding (`ok`, `note`, `warning`, `ERROR`) and a summary; exits 0 when
//! nothing is an error, 1 when something is, and 2 when `skywave.toml` itself does not load (as
//! `skywave run` does).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use clap::Args;
use skywave_gateway::check::{self, Level};

/// `skywave check` options.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The gateway configuration (see config/skywave.toml).
    #[arg(long, env = "SKYWAVE_CONFIG")]
    config: PathBuf,
    /// Also connect to the SIS servers and the smarthost.
    #[arg(long)]
    probe: bool,
    /// How long a probe waits for each server, seconds.
    #[arg(long, default_value_t = 5, value_name = "SECS", requires = "probe")]
    timeout: u64,
}

pub(crate) fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let config = match skywave_gateway::config::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            eprintln!("result: {} does not load", args.config.display());
            return Ok(ExitCode::from(2));
        }
    };
    let table = skywave_route::RoutingTable::load(&config.routes);
    let mut findings = check::check(&config, &table, SystemTime::now());
    if args.probe {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        findings.extend(runtime.block_on(check::probe(
            &config,
            table.as_ref().ok(),
            Duration::from_secs(args.timeout.max(1)),
        )));
    }
    for f in &findings {
        outln!("{f}");
    }
    let errors = findings.iter().filter(|f| f.level == Level::Error).count();
    let warnings = findings
        .iter()
        .filter(|f| f.level == Level::Warning)
        .count();
    outln!(
        "result: {}, {}: {}",
        check::count(errors, "error"),
        check::count(warnings, "warning"),
        if errors == 0 {
            "`skywave run` would start with this configuration"
        } else {
            "mend the errors before `skywave run`"
        }
    );
    Ok(if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
