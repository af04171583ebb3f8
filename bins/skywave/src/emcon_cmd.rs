//! `skywave emcon on|off|status --config FILE`: a gateway's EMCON switch.
//!
//! Writes (or reads) `state_dir/emcon`, which the running daemon follows within two seconds
//! (see `skywave_gateway::emcon`). Works with the gateway stopped too, but a start goes back to
//! `[hf] emcon` of the configuration: a gateway configured for EMCON never starts transmitting
//! because of an old command.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use skywave_gateway::emcon;

/// What to do with the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Action {
    /// Enter EMCON: transmit nothing (no sessions, no acknowledgements), keep receiving.
    On,
    /// Lift EMCON: send owed acknowledgements and queued mail.
    Off,
    /// Say whether the gateway keeps EMCON.
    Status,
}

/// `skywave emcon` options.
#[derive(Debug, Args)]
pub(crate) struct EmconArgs {
    /// on, off or status.
    action: Action,
    /// The gateway configuration (see config/skywave.toml).
    #[arg(long, env = "SKYWAVE_CONFIG")]
    config: PathBuf,
}

pub(crate) fn run(args: EmconArgs) -> anyhow::Result<ExitCode> {
    let config = match skywave_gateway::config::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(2));
        }
    };
    let dir = &config.state_dir;
    match args.action {
        Action::Status => {
            let (on, from) = match emcon::read(dir) {
                Some(on) => (on, "the switch file"),
                None => (config.hf.emcon, "the configuration (no switch file yet)"),
            };
            outln!(
                "EMCON {} (from {from}, {})",
                if on { "on" } else { "off" },
                emcon::path(dir).display()
            );
        }
        Action::On | Action::Off => {
            let on = args.action == Action::On;
            emcon::write(dir, on)
                .with_context(|| format!("cannot write {}", emcon::path(dir).display()))?;
            outln!(
                "EMCON {}: a running gateway follows within {} s{}",
                if on { "set" } else { "lifted" },
                emcon::POLL.as_secs(),
                if on == config.hf.emcon {
                    String::new()
                } else {
                    format!(
                        "; a restart returns to [hf] emcon = {} of {}",
                        config.hf.emcon,
                        args.config.display()
                    )
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
