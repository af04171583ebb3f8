//! `skywave-bench`: scenario benchmarks comparing SMTP over TCP/IP over HF with HMTP/CFTP over
//! STANAG 5066 on the same emulated channel.
//!
//! The scenarios (crates/bench) are not built yet; this binary says so instead of pretending.

use std::process::ExitCode;

use clap::Parser;

/// Scenario benchmarks over the bundled HF emulator.
#[derive(Debug, Parser)]
#[command(name = "skywave-bench", version, about)]
struct Cli {}

fn main() -> ExitCode {
    let _ = Cli::parse();
    eprintln!(
        "skywave-bench: the benchmark scenarios are not implemented yet (see README.md, \"Status\")."
    );
    ExitCode::FAILURE
}
