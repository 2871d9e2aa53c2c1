//! `nacre-server [config-file] [--directive value ...]`: a Redis-compatible server whose
//! every acknowledged write is durable. With no arguments it keeps its data under
//! `./nacre-data` and listens on 127.0.0.1:6379.
//!
//! `--import-rdb FILE` loads a Redis RDB file into the pool at `--dir` and exits;
//! `--export-rdb FILE` writes the pool's data as an RDB file and exits (`nacre_server::transfer`).

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::path::PathBuf;
use std::process::ExitCode;

use nacre_server::{Config, LogLevel};

// The server allocates small buffers on every runtime thread and the engine's committer;
// glibc's arenas serialise those threads on their locks (a tenth of the server's time under
// pipelined writes went to waking lock waiters), mimalloc keeps a heap per thread.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!(
            "Usage: nacre-server [/path/to/nacre.conf] [--port 6379] [--bind 127.0.0.1] [--dir ./nacre-data]\n       [--pmem-size 1gb] [--pmem-backend auto|dax|msync|emulated] [--requirepass pass] [--directive value ...]\n       nacre-server [options] --import-rdb dump.rdb   (load a Redis RDB file into the pool, then exit)\n       nacre-server [options] --export-rdb dump.rdb   (write the pool as a Redis RDB file, then exit)"
        );
        return ExitCode::SUCCESS;
    }
    if args.iter().any(|a| a == "--version" || a == "-v") {
        println!(
            "nacre-server v={} (Redis {} compatible)",
            env!("CARGO_PKG_VERSION"),
            nacre_server::REDIS_VERSION
        );
        return ExitCode::SUCCESS;
    }
    let (transfer, args) = match transfer_flag(args) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let cfg = match Config::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let level = match cfg.loglevel {
        LogLevel::Debug => "debug",
        LogLevel::Verbose => "debug",
        LogLevel::Notice => "info",
        LogLevel::Warning => "warn",
        LogLevel::Nothing => "off",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let sub = tracing_subscriber::fmt().with_env_filter(filter);
    if cfg.logfile.is_empty() {
        sub.init();
    } else {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&cfg.logfile)
        {
            Ok(f) => sub
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(f))
                .init(),
            Err(e) => {
                eprintln!("Can't open the log file: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if let Some(t) = transfer {
        let ok = match t {
            Transfer::Import(file) => nacre_server::transfer::cli::import(&cfg, &file),
            Transfer::Export(file) => nacre_server::transfer::cli::export(&cfg, &file),
        };
        return if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    watch_signals();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(cfg.worker_threads()).enable_all();
    // Tasks woken together run in the order they were woken: requests that arrive in one
    // instant run in arrival order, as on Redis's event loop (the LIFO slot would run the
    // last one first, so a client blocked second could be served before the first).
    #[cfg(tokio_unstable)]
    builder.disable_lifo_slot();
    let rt = match builder.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let r = rt.block_on(nacre_server::server::run(cfg, None));
    // A worker still running a task that never yields (a script that never ends) would hold
    // the runtime's drop forever: everything durable is written, so stop waiting for it.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("nacre-server: {e}");
            ExitCode::FAILURE
        }
    }
}

/// How long a shutdown asked for by a signal may take before the process ends anyway.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// Makes SIGTERM and SIGINT end the process even when the runtime cannot: a thread of its own
/// sees them beside the runtime's handler, which starts the clean shutdown. If the process
/// is still there [`SHUTDOWN_GRACE`] later (a runtime thread stuck in a task that never
/// yields, or a shutdown that hangs), or SIGINT comes again (as Redis: "you insist"), it
/// exits at once. That is safe: every acknowledged write is already durable, and the next
/// start recovers as after a crash.
fn watch_signals() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = match signal_hook::iterator::Signals::new([SIGTERM, SIGINT]) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch signals: a stuck shutdown will not be ended");
            return;
        }
    };
    let spawned = std::thread::Builder::new()
        .name("nacre-signals".into())
        .spawn(move || {
            let mut first = true;
            for sig in signals.forever() {
                if !first {
                    if sig == SIGINT {
                        tracing::warn!("SIGINT while shutting down: exiting now");
                        std::process::exit(1);
                    }
                    continue;
                }
                first = false;
                let spawned = std::thread::Builder::new()
                    .name("nacre-stop-watch".into())
                    .spawn(|| {
                        std::thread::sleep(SHUTDOWN_GRACE);
                        tracing::error!(
                            "the shutdown did not finish within {} s: exiting now",
                            SHUTDOWN_GRACE.as_secs()
                        );
                        std::process::exit(1);
                    });
                if let Err(e) = spawned {
                    tracing::warn!(error = %e, "cannot time the shutdown");
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot watch signals: a stuck shutdown will not be ended");
    }
}

/// `--import-rdb FILE` or `--export-rdb FILE`.
enum Transfer {
    Import(PathBuf),
    Export(PathBuf),
}

/// Takes `--import-rdb FILE` or `--export-rdb FILE` out of `args`: the one given, if any,
/// and the other arguments.
fn transfer_flag(args: Vec<String>) -> Result<(Option<Transfer>, Vec<String>), String> {
    let mut found = None;
    let mut rest = Vec::with_capacity(args.len());
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let make: fn(PathBuf) -> Transfer = match a.as_str() {
            "--import-rdb" => Transfer::Import,
            "--export-rdb" => Transfer::Export,
            _ => {
                rest.push(a);
                continue;
            }
        };
        let file = it
            .next()
            .filter(|f| !f.starts_with("--"))
            .ok_or_else(|| format!("{a} needs a file name"))?;
        if found.is_some() {
            return Err("give one of --import-rdb and --export-rdb, once".into());
        }
        found = Some(make(PathBuf::from(file)));
    }
    Ok((found, rest))
}
