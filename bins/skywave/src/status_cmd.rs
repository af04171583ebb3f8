//! `skywave status --config FILE`: queue depth per target, held peers, oldest message, and
//! whether the gateway is running. Reads the spool only; works with the gateway stopped.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

/// `skywave status` options.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// The gateway configuration (see config/skywave.toml).
    #[arg(long, env = "SKYWAVE_CONFIG")]
    config: PathBuf,
}

pub(crate) fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let config = match skywave_gateway::config::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(2));
        }
    };
    let status = skywave_gateway::status::read(&config).map_err(|e| {
        anyhow::anyhow!(
            "cannot read the spool {}: {e}",
            config.spool_dir().display()
        )
    })?;
    out!("{}", skywave_gateway::status::render(&status));
    Ok(ExitCode::SUCCESS)
}
