//! `skywave demo`: two gateways (ship and shore) joined by the in-process HF emulator.
//!
//! The link scheduler and bearers that join the gateway to the emulator are not built yet; until
//! they are, the demo says so plainly instead of pretending.

use std::process::ExitCode;

use clap::Args;

/// Options of `skywave demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Exit after the sample batch instead of waiting for Ctrl-C.
    #[arg(long)]
    once: bool,
}

pub(crate) fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let _ = args.once;
    println!(
        "skywave demo: not available yet.\n\
         \n\
         The demo runs a ship and a shore gateway over the bundled HF emulator and delivers mail\n\
         between them. The pieces exist separately today:\n\
         \x20 - the HF emulator: `skywave-emu --nodes 2 --addresses 0.0.0.1,0.0.0.2 --listen 127.0.0.1:5066`\n\
         \x20 - the STANAG 5066 SIS client: `skywave sis probe --server 127.0.0.1:5066 --sap 3`\n\
         \x20 - the gateway's LAN side: `skywave run --config config/skywave.toml` (SMTP in, spool,\n\
         \x20   routing table, Maildir or smarthost delivery)\n\
         \x20 - HMTP and CFTP sessions and the compressors (`skywave codec stats FILE...`)\n\
         What is still missing before the demo can run: the bearers and the per-peer link scheduler\n\
         that carry spooled mail over the SIS client. See README.md, \"Status\"."
    );
    Ok(ExitCode::SUCCESS)
}
