//! The server: opens the keyspace, listens, accepts clients up to `maxclients`, runs the
//! background work, and on `SHUTDOWN` (or SIGTERM/SIGINT) closes everything cleanly.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::shared::Shared;
use crate::store::{self, Commits};

/// Why the server could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The keyspace could not be opened or closed.
    #[error("{0}")]
    Store(#[from] store::StoreError),
    /// A listener could not be set up.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// Something else.
    #[error("{0}")]
    Other(String),
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Runs the server until it is shut down. `ready` gets the bound addresses once it serves.
pub async fn run(
    cfg: Config,
    ready: Option<tokio::sync::oneshot::Sender<Vec<std::net::SocketAddr>>>,
) -> Result<(), ServerError> {
    let t0 = Instant::now();
    let open_cfg = cfg.clone();
    let (store, report, snapshot) =
        tokio::task::spawn_blocking(move || store::open::open(&open_cfg))
            .await
            .map_err(|e| ServerError::Other(e.to_string()))??;
    let store = Arc::new(store);
    if let Some(snap) = snapshot {
        let s = store.clone();
        std::thread::Builder::new()
            .name("nacre-count".into())
            .spawn(move || {
                // The count walks records, which waits for the engine's background index
                // rebuild: it starts once that is done (the counts from the records serve
                // meanwhile; without them, DBSIZE waits for both anyway).
                while s.db.rebuilding() {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                let t = Instant::now();
                match s.count_keys(snap) {
                    Ok(c) if c.disagreed.is_empty() => tracing::info!(
                        "counted {} keys in {} ms (in the background, while serving)",
                        thousands(c.keys),
                        t.elapsed().as_millis()
                    ),
                    Ok(c) => tracing::error!(
                        "counted {} keys in {} ms: {} databases' key count records were wrong (corrected)",
                        thousands(c.keys),
                        t.elapsed().as_millis(),
                        c.disagreed.len()
                    ),
                    Err(e) => tracing::error!(error = %e, "counting keys failed; DBSIZE will wait"),
                }
            })
            .map_err(|e| ServerError::Other(e.to_string()))?;
    }
    tracing::info!(
        backend = %report.backend,
        "backend {}: an acknowledged write survives {}",
        report.backend,
        report.survives
    );
    match &cfg.disk_dir {
        Some(d) => tracing::info!(
            "disk levels in {}: data beyond the Global Index limit spills there",
            d.display()
        ),
        None => tracing::info!("PM only (no disk-dir): the zone cleaner reclaims space in place"),
    }
    if report.created {
        tracing::info!(
            "created the database in {} ms (a new pool: nothing to recover)",
            report.recovery.as_millis()
        );
    } else if report.clean {
        tracing::info!(
            "recovered in {} ms; {} keys (clean shutdown: key counts read from its record)",
            report.recovery.as_millis(),
            thousands(report.keys)
        );
    } else if report.counts_kept {
        tracing::info!(
            "recovered in {} ms; {} keys (no clean shutdown: key counts read from their records, checked by a count in the background)",
            report.recovery.as_millis(),
            thousands(report.keys)
        );
    } else {
        tracing::info!(
            "recovered in {} ms (no clean shutdown: keys are counted in the background)",
            report.recovery.as_millis()
        );
    }
    let shared = Shared::new(store.clone(), cfg.clone(), report).into_arc();
    #[cfg(feature = "testing")]
    if let Some(ms) = std::env::var(crate::config::HOLD_REBUILD_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        let s = store.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(ms));
            s.db.release_rebuild();
        });
    }
    if store.db.rebuilding() {
        // I1 (store/txn.rs): clients that parked meanwhile are served once the rebuild is
        // done (pops wait for it).
        let s = shared.clone();
        tokio::spawn(async move {
            s.store.wait_rebuilt().await;
            s.waiters.serve_all(&s);
        });
    }
    crate::cmd::server::configure_access_clock(&shared, &cfg);
    shared.repl.configure(&cfg);
    match crate::cmd::acl::restore(&shared) {
        Ok(0) => {}
        Ok(n) => tracing::info!(users = n, "ACL users loaded"),
        Err(e) => tracing::error!(error = %e, "the ACL users could not be loaded"),
    }
    // As Redis: an ACL file or `user` lines, not both; either defines the users at start.
    match crate::cmd::acl::aclfile(&shared) {
        Some(_) if !cfg.users.is_empty() => {
            return Err(ServerError::Other(
                "Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into(),
            ))
        }
        Some(path) => {
            let n = crate::cmd::acl::load_file(&shared, &path).map_err(|e| {
                ServerError::Other(format!("Aborting the start because of ACL errors: {e}"))
            })?;
            tracing::info!(users = n, file = %path.display(), "ACL users loaded from the ACL file");
        }
        None if !cfg.users.is_empty() => {
            let n = crate::cmd::acl::apply_configured(&shared, &cfg.users)
                .map_err(ServerError::Other)?;
            tracing::info!(users = n, "ACL users defined by the configuration file");
        }
        None => {}
    }
    match shared.functions.restore(&shared) {
        Ok(0) => {}
        Ok(n) => tracing::info!(libraries = n, "function libraries loaded"),
        Err(e) => tracing::error!(error = %e, "the function libraries could not be loaded"),
    }
    let completer = tokio::spawn(Commits::run_completer(store.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    let bg = {
        let (s, st) = (store.clone(), stop.clone());
        let weak = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("nacre-background".into())
            .spawn(move || {
                store::background::run(s, st, &mut |db, key, ticket| {
                    if let Some(sh) = weak.upgrade() {
                        crate::cmd::tracking::invalidate(&sh, &[key.to_vec()], 0, ticket);
                        let f = sh.notify_flags();
                        if f != 0 && sh.pubsub.anyone() {
                            crate::notify::event(&sh, f, db, key, "expired", ticket);
                        }
                    }
                })
            })
            .map_err(|e| ServerError::Other(e.to_string()))?
    };
    let bound = crate::listen::bind(None, &cfg.bind, cfg.port, ready.is_some())
        .map_err(|(addr, source)| ServerError::Listen { addr, source })?;
    let addrs = bound.addrs();
    tracing::info!(
        "ready to accept connections on {} (started in {} ms)",
        addrs
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        t0.elapsed().as_millis()
    );
    // A replica's recorded position, and `replicaof` of the configuration.
    {
        let sh = shared.clone();
        tokio::task::spawn_blocking(move || crate::repl::replica::resume(&sh))
            .await
            .map_err(|e| ServerError::Other(e.to_string()))?;
    }
    if let Some(r) = ready {
        let _ = r.send(addrs.clone());
    }
    let trimmer = tokio::spawn(crate::conn::trim_cron(shared.clone()));
    let backlog = tokio::spawn(crate::repl::backlog_cron(shared.clone()));
    crate::listen::install(&shared, bound).map_err(|e| ServerError::Other(e.to_string()))?;
    wait_for_shutdown(&shared).await;
    tracing::info!("shutting down: closing clients, finishing commits");
    let accepters = crate::listen::stop(&shared);
    trimmer.abort();
    let _ = trimmer.await;
    backlog.abort();
    let _ = backlog.await;
    for c in shared.clients.lock().values() {
        c.kill();
    }
    // One deadline for all of them: a client stuck in a script that never ends (or any
    // task that never yields) must not hold the shutdown, however many there are.
    let handles: Vec<_> = shared.client_tasks.lock().drain(..).collect();
    let deadline = tokio::time::Instant::now() + CLIENTS_FINISH;
    let mut unfinished = 0usize;
    for h in handles {
        if tokio::time::timeout_at(deadline, h).await.is_err() {
            unfinished += 1;
        }
    }
    let quiet = unfinished == 0;
    if !quiet {
        tracing::warn!(
            unfinished,
            "clients still running after {} s (a script that never ends?): closing without them; \
             their unanswered commands are not committed, and the next start counts keys again",
            CLIENTS_FINISH.as_secs()
        );
    }
    stop.store(true, Ordering::Release);
    let _ = tokio::task::spawn_blocking(move || bg.join()).await;
    // Close on a blocking thread while the completer still runs on this runtime.
    let sh = shared.clone();
    let closed = tokio::task::spawn_blocking(move || sh.store.close_ref(quiet)).await;
    completer.abort();
    let _ = completer.await;
    for a in accepters {
        let _ = a.await;
    }
    drop(shared);
    match closed {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e.into()),
        Err(e) => return Err(ServerError::Other(e.to_string())),
    }
    match Arc::try_unwrap(store) {
        Ok(s) if quiet => {
            s.close_engine()?;
            tracing::info!("closed cleanly; the next start skips counting keys");
        }
        _ => tracing::warn!(
            "a client still holds the keyspace: the process ends without closing the engine; \
             the next start recovers as after a crash (every acknowledged write is durable)"
        ),
    }
    Ok(())
}

/// How long a shutdown waits for clients to finish what they are running.
const CLIENTS_FINISH: Duration = Duration::from_secs(5);

async fn wait_for_shutdown(shared: &Shared) {
    let sig = async {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            match (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) {
                (Ok(mut t), Ok(mut i)) => {
                    tokio::select! {
                        _ = t.recv() => {}
                        _ = i.recv() => {}
                    }
                }
                _ => std::future::pending::<()>().await,
            }
        }
        #[cfg(not(unix))]
        std::future::pending::<()>().await
    };
    tokio::select! {
        _ = shared.shutdown.notified() => {}
        _ = sig => tracing::info!("received a signal to stop"),
    }
}
