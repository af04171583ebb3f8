//! `skywave sis ...`: STANAG 5066 SIS diagnostics for operators.

use std::process::ExitCode;

use clap::Subcommand;

/// `skywave sis` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum SisCommand {}

pub(crate) fn run(command: SisCommand) -> anyhow::Result<ExitCode> {
    match command {}
}
