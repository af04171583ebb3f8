//! `skywave sis ...`: STANAG 5066 SIS diagnostics for operators.
//!
//! `skywave sis probe` answers "is the 5066 server there, will it bind my SAP, and with which
//! MTU?" without starting the gateway: it connects, binds, prints the MTU and whatever the
//! server reports for a few seconds, unbinds and exits.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use skywave_sis::client::{ClientError, Event, TcpConnector};
use skywave_sis::{Client, ClientConfig, Rank, SapId, ServiceType, TxMode, UnidataIndication};

/// `skywave sis` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum SisCommand {
    /// Connect to a SIS server, bind a SAP, print the MTU and what the server reports, unbind.
    Probe(ProbeArgs),
}

/// Transmission mode of the probe's bind.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Mode {
    /// ARQ with node delivery confirmation, in order (the HMTP default).
    Arq,
    /// Non-ARQ (broadcast).
    NonArq,
    /// Non-ARQ with errors: U_PDUs damaged or incomplete when the node's reception window
    /// closes are delivered too, their errored and missing blocks listed.
    NonArqWithErrors,
}

/// Arguments of `skywave sis probe`.
#[derive(Debug, Args)]
pub(crate) struct ProbeArgs {
    /// SIS server address, HOST:PORT.
    #[arg(long, default_value = "127.0.0.1:5066")]
    server: String,
    /// SAP to bind (0-15; 3 = HMTP, 9 = IP client, 12 = CFTP).
    #[arg(long)]
    sap: u8,
    /// Rank to bind with (0-15; 15 only for node management).
    #[arg(long, default_value_t = 0)]
    rank: u8,
    /// Service type of the bind.
    #[arg(long, value_enum, default_value_t = Mode::Arq)]
    mode: Mode,
    /// Seconds to listen for availability and indications after the bind.
    #[arg(long, default_value_t = 3)]
    wait: u64,
    /// Seconds allowed for the TCP connection and for the bind answer.
    #[arg(long, default_value_t = 5)]
    timeout: u64,
}

/// Exit status when the server rejects the bind (unreachable servers exit with 1).
const EXIT_BIND_REJECTED: u8 = 2;

pub(crate) fn run(command: SisCommand) -> anyhow::Result<ExitCode> {
    match command {
        SisCommand::Probe(args) => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            runtime.block_on(probe(args))
        }
    }
}

async fn probe(args: ProbeArgs) -> anyhow::Result<ExitCode> {
    let sap = SapId::new(args.sap).context("--sap")?;
    let rank = Rank::new(args.rank).context("--rank")?;
    let service = match args.mode {
        Mode::Arq => ServiceType::ARQ_NODE_CONFIRM,
        Mode::NonArq => ServiceType::NON_ARQ,
        Mode::NonArqWithErrors => ServiceType {
            tx_mode: TxMode::NonArqWithErrors,
            ..ServiceType::NON_ARQ
        },
    };
    let mut config = ClientConfig::new(sap, service);
    config.rank = rank;
    config.connect_timeout = Duration::from_secs(args.timeout);
    config.bind_timeout = Duration::from_secs(args.timeout);
    let connector = TcpConnector::new(args.server.clone());
    let (client, bound, mut events) = match Client::connect(connector, config).await {
        Ok(ok) => ok,
        Err(ClientError::BindRejected(reason)) => {
            eprintln!(
                "skywave: {}: bind of SAP {sap} rejected: {reason} (reason code {})",
                args.server,
                u8::from(reason)
            );
            return Ok(ExitCode::from(EXIT_BIND_REJECTED));
        }
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!(
                "SIS server {} unreachable or not answering",
                args.server
            )));
        }
    };
    outln!(
        "bound SAP {} at {} (rank {rank}), MTU {} bytes",
        bound.sap,
        args.server,
        bound.mtu
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.wait);
    let mut availability = false;
    // Bounded by the deadline.
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await {
        if matches!(event, Event::SubnetAvailability { .. }) {
            availability = true;
        }
        outln!("{}", describe(&event));
    }
    if !availability {
        outln!("no subnet availability reported within {} s", args.wait);
    }
    client.unbind().await.context("unbinding")?;
    outln!("unbound");
    Ok(ExitCode::SUCCESS)
}

fn describe_indication(kind: &str, i: &UnidataIndication) -> String {
    let mode = match i.tx_mode {
        TxMode::Arq => "ARQ".to_owned(),
        TxMode::NonArq => "non-ARQ".to_owned(),
        TxMode::NonArqWithErrors => format!(
            "non-ARQ with errors, {} errored and {} missing blocks",
            i.errored.len(),
            i.missing.len()
        ),
        other => format!("mode {}", other.bits()),
    };
    format!(
        "{kind} from {}:{} to {}:{} ({mode}), {} bytes",
        i.src,
        i.src_sap,
        i.dest,
        i.dest_sap,
        i.updu.len()
    )
}

fn describe(event: &Event) -> String {
    match event {
        Event::Unidata(i) => describe_indication("unidata indication", i),
        Event::Expedited(i) => describe_indication("expedited unidata indication", i),
        Event::SubnetAvailability { status, reason } => {
            format!("subnet availability: {status} ({reason})")
        }
        Event::Unbound(reason) => format!("unbound by the server: {reason}"),
        Event::HardLink(p) => format!("hard link: {}", p.name()),
        Event::Management { msg_type, body } => {
            format!("management message type {msg_type}, {} bytes", body.len())
        }
        Event::Disconnected { reason } => format!("disconnected: {reason}"),
        Event::RebindRejected(reason) => format!("rebind rejected: {reason}"),
        Event::Reconnected(b) => format!("reconnected, MTU {} bytes", b.mtu),
    }
}
