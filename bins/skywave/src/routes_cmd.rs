//! `skywave routes ...`: check a routing table and explain where an address would go.

use std::process::ExitCode;

use clap::Subcommand;

/// `skywave routes` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum RoutesCommand {}

pub(crate) fn run(command: RoutesCommand) -> anyhow::Result<ExitCode> {
    match command {}
}
