//! `skywave run --config FILE`: the gateway daemon in the foreground.
//!
//! Loads `skywave.toml` (errors with file:line:column), then runs
//! [`skywave_gateway::daemon::run`] until SIGTERM or Ctrl-C. Once listening it prints the bound
//! addresses on stdout, one line each, so that scripts and tests can use port 0:
//! `skywave: smtp listening on 127.0.0.1:2525` and `skywave: metrics listening on ...`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

/// `skywave run` options.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The gateway configuration (see config/skywave.toml).
    #[arg(long, env = "SKYWAVE_CONFIG")]
    config: PathBuf,
}

pub(crate) fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let config = match skywave_gateway::config::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(2));
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(skywave_gateway::daemon::run(config, |bound| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "skywave: smtp listening on {}", bound.smtp);
        if let Some(m) = bound.metrics {
            let _ = writeln!(out, "skywave: metrics listening on {m}");
        }
        let _ = out.flush();
    }))?;
    Ok(ExitCode::SUCCESS)
}
