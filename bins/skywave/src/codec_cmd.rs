//! `skywave codec ...`: compression tools for operators choosing a scheme for a peer.

use std::process::ExitCode;

use clap::Subcommand;

/// `skywave codec` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum CodecCommand {}

pub(crate) fn run(command: CodecCommand) -> anyhow::Result<ExitCode> {
    match command {}
}
