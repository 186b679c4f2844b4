//! The `sluice` command: `sluice serve` runs a broker until SIGINT or SIGTERM,
//! then shuts it down cleanly (fsync, checkpoints, clean-shutdown marker);
//! `sluice healthcheck` exits 0 only if a broker answers Kafka requests.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use sluice::config::{local_address_of_first_listener, LogFormat, ServeArgs, DEFAULT_LISTEN};
use sluice::healthcheck::HEALTHCHECK_TIMEOUT_MS_DEFAULT;
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

// Parsed once at start-up, so the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run a broker. Every flag can also be set with its SLUICE_* environment
    /// variable or in the file given to --config.
    Serve(ServeArgs),
    /// Exit 0 if the broker answers ApiVersions and Metadata within the
    /// timeout, 1 if not (for container health checks and scripts).
    Healthcheck(HealthcheckArgs),
}

#[derive(Args)]
struct HealthcheckArgs {
    /// Broker to check, HOST:PORT. [default: the first of --listen, through
    /// loopback when it listens on every interface]
    #[arg(long, env = "SLUICE_HEALTHCHECK_ADDRESS")]
    address: Option<String>,

    /// The broker's listeners, as given to `sluice serve` (read from
    /// SLUICE_LISTEN in a container, so the check follows the broker's setting).
    #[arg(long, env = "SLUICE_LISTEN", value_delimiter = ',', default_value = DEFAULT_LISTEN)]
    listen: Vec<String>,

    /// Give up after this many milliseconds.
    #[arg(long, default_value_t = HEALTHCHECK_TIMEOUT_MS_DEFAULT)]
    timeout_ms: u64,

    /// Print nothing when healthy.
    #[arg(long, short)]
    quiet: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Healthcheck(args) => healthcheck(args),
    }
}

fn healthcheck(args: HealthcheckArgs) -> ExitCode {
    let address = match args.address {
        Some(address) => address,
        None => match local_address_of_first_listener(&args.listen) {
            Ok(address) => address,
            Err(error) => {
                eprintln!("sluice healthcheck: {error}");
                return ExitCode::from(2);
            }
        },
    };
    match sluice::healthcheck::check(&address, Duration::from_millis(args.timeout_ms)) {
        Ok(health) => {
            if !args.quiet {
                let brokers: Vec<String> = health
                    .brokers
                    .iter()
                    .map(|(id, host, port)| format!("{id}@{host}:{port}"))
                    .collect();
                println!(
                    "healthy: {} answered ApiVersions ({} APIs) and Metadata (brokers {}) in {} ms",
                    health.address,
                    health.api_count,
                    brokers.join(","),
                    health.elapsed.as_millis()
                );
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("unhealthy: {address}: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The exit status after a storage failure or a failed start, for supervisors (Kafka's
/// halt status).
const STORAGE_FAILURE_EXIT_CODE: i32 = 1;

/// A panic anywhere (a coordinator, a flusher, a connection task) is a broken invariant:
/// it is logged and ends the process, so that a supervisor restarts it and recovery runs,
/// instead of a broker that looks healthy while one of its tasks is gone. Release builds
/// also abort on panic (Cargo.toml); this covers debug builds and says why.
fn abort_on_panic() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        tracing::error!(panic = %info, "a task panicked; aborting");
        default_hook(info);
        std::process::abort();
    }));
}

fn serve(args: ServeArgs) -> ExitCode {
    let config = match args.with_file().and_then(ServeArgs::resolve) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("sluice: {error}");
            return ExitCode::from(2);
        }
    };
    init_logging(&config.log_level, config.log_format);
    abort_on_panic();
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
                // At once, as after a storage failure: returning would drop the stores
                // and tasks the start had opened, and a store dropped on a failing disk
                // flushes again and panics in sled (a fault run saw that abort).
                // Nothing was acknowledged yet; the next start recovers as after a kill.
                tracing::error!(%error, "sluice could not start");
                std::process::exit(STORAGE_FAILURE_EXIT_CODE);
            }
        };
        let failure = tokio::select! {
            () = wait_for_signal() => None,
            failure = broker.storage_failure() => Some(failure),
        };
        if let Some(failure) = failure {
            // As Kafka halts when its last log dir fails: no flush, no checkpoint and no
            // clean-shutdown marker, so that the next start runs recovery.
            tracing::error!(%failure, "storage failed; stopping without a clean shutdown");
            std::process::exit(STORAGE_FAILURE_EXIT_CODE);
        }
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

fn init_logging(filter: &str, format: LogFormat) {
    // openraft logs every step at info; keep it quiet unless asked for by name.
    let filter = if filter.contains("openraft") {
        filter.to_string()
    } else {
        format!("{filter},{}", sluice::controller::LOG_FILTER_DEFAULT)
    };
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    match format {
        LogFormat::Json => logs.json().init(),
        // Colours only on a terminal: in a container or a file they are noise.
        LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .init(),
    }
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
