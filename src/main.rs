//! The `sluice` command: `sluice serve` runs a broker until SIGINT or SIGTERM,
//! then shuts it down cleanly (fsync, checkpoints, clean-shutdown marker).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sluice::config::ServeArgs;
use sluice::Broker;

#[global_allocator]
static ALLOCATOR: sluice::alloc::LazyHugeAlloc = sluice::alloc::LazyHugeAlloc;

/// Sluice: a Kafka-wire-compatible broker. Point any Kafka client at it.
#[derive(Parser)]
#[command(name = "sluice", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a broker. Every flag can also be set with its SLUICE_* environment
    /// variable or in the file given to --config.
    Serve(ServeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
    }
}

fn serve(args: ServeArgs) -> ExitCode {
    let config = match args.with_file().and_then(ServeArgs::resolve) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("sluice: {error}");
            return ExitCode::from(2);
        }
    };
    init_logging(&config.log_level);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("sluice: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let broker = match Broker::start(config).await {
            Ok(broker) => broker,
            Err(error) => {
                tracing::error!(%error, "sluice could not start");
                return ExitCode::FAILURE;
            }
        };
        wait_for_signal().await;
        tracing::info!("shutting down");
        match broker.shutdown().await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                tracing::error!(%error, "unclean shutdown");
                ExitCode::FAILURE
            }
        }
    })
}

fn init_logging(filter: &str) {
    // openraft logs every step at info; keep it quiet unless asked for by name.
    let filter = if filter.contains("openraft") {
        filter.to_string()
    } else {
        format!("{filter},{}", sluice::controller::LOG_FILTER_DEFAULT)
    };
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .init();
}

async fn wait_for_signal() {
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
