//! `skywave-emu`: the standalone HF emulator (N simulated STANAG 5066 nodes, each serving SIS on a
//! TCP port).
//!
//! The emulator itself (crates/emu) is not built yet; this binary says so instead of pretending.

use std::process::ExitCode;

use clap::Parser;

/// Standalone HF channel/modem/STANAG 5066 emulator.
#[derive(Debug, Parser)]
#[command(name = "skywave-emu", version, about)]
struct Cli {}

fn main() -> ExitCode {
    let _ = Cli::parse();
    eprintln!("skywave-emu: the HF emulator is not implemented yet (see README.md, \"Status\").");
    ExitCode::FAILURE
}
