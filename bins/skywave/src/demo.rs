//! `skywave demo`: two gateways (ship and shore) joined by the in-process HF emulator.
//!
//! The pieces the demo needs (the emulator, the gateway's LAN side, HMTP over STANAG 5066) are not
//! built yet; until they are, the demo says so plainly instead of pretending.

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
         between them. What exists today:\n\
         \x20 - the STANAG 5066 SIS codec and client (try `skywave sis probe --server HOST:PORT --sap 3`)\n\
         \x20 - JNOS-compatible LZW, deflate and gzip (`skywave codec stats FILE...`)\n\
         What is still missing before the demo can run: the HF emulator, the gateway's SMTP front\n\
         end, spool and routing table, and HMTP/CFTP over STANAG 5066. See README.md, \"Status\"."
    );
    Ok(ExitCode::SUCCESS)
}
