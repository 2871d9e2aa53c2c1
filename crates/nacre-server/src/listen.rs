//! The server's TCP listeners and their accept loops. `CONFIG SET port` and `CONFIG SET bind`
//! replace them whole, as Redis does: the new sockets are bound first (a port in use fails
//! the `CONFIG SET`, which then changes nothing), then the old accept loops stop and new ones
//! start. Clients already connected stay connected.
//!
//! Invariants:
//! - L1: `Shared::accepters` holds the accept loops of exactly the sockets in use, and
//!   `Shared::listening` a second handle of each with the address it was bound for; a loop
//!   is aborted only after the sockets replacing it are bound (an address kept is the same
//!   socket, never bound twice).
//! - L2: every client task is in `Shared::client_tasks`, so a shutdown waits for (or gives
//!   up on) all of them, whichever listener accepted them.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use crate::shared::{ClientInfo, Shared};

/// Sockets bound but not yet serving, with the addresses they were asked for.
pub struct Bound {
    sockets: Vec<(String, std::net::TcpListener)>,
}

impl Bound {
    /// The addresses bound (with the port the system chose for port 0).
    pub fn addrs(&self) -> Vec<std::net::SocketAddr> {
        self.sockets
            .iter()
            .filter_map(|(_, s)| s.local_addr().ok())
            .collect()
    }
}

/// Binds `port` on every address of `binds` (a leading `-` marks an address Redis may skip
/// when it is not available; it is bound like the others). An address the server listens
/// on already keeps its socket (a second handle of it), so `CONFIG SET bind` may keep some
/// addresses and add others. Port 0 with `ephemeral` binds a port the system chooses;
/// without it, port 0 means no TCP listener at all, as in Redis. The first failure, with the
/// address it was for.
pub fn bind(
    shared: Option<&Shared>,
    binds: &[String],
    port: u16,
    ephemeral: bool,
) -> Result<Bound, (String, std::io::Error)> {
    let mut sockets = Vec::new();
    if port == 0 && !ephemeral {
        return Ok(Bound { sockets });
    }
    for b in binds {
        let host = b.trim_start_matches('-');
        let addr = format!("{host}:{port}");
        let kept = shared.filter(|_| port != 0).and_then(|sh| {
            sh.listening
                .lock()
                .iter()
                .find(|(a, _)| *a == addr)
                .and_then(|(_, s)| s.try_clone().ok())
        });
        let s = match kept {
            Some(s) => s,
            None => std::net::TcpListener::bind(&addr)
                .and_then(|s| s.set_nonblocking(true).map(|()| s))
                .map_err(|e| (addr.clone(), e))?,
        };
        sockets.push((addr, s));
    }
    Ok(Bound { sockets })
}

/// Starts serving `bound` and stops the accept loops it replaces (L1). Must run inside the
/// server's runtime.
pub fn install(shared: &Arc<Shared>, bound: Bound) -> std::io::Result<()> {
    // Every socket is registered before any loop starts: a failure here leaves the old
    // loops serving and no new one running untracked (L1).
    let mut listening = Vec::new();
    let mut listeners = Vec::new();
    for (addr, s) in bound.sockets {
        listening.push((addr, s.try_clone()?));
        listeners.push(tokio::net::TcpListener::from_std(s)?);
    }
    let mut loops = Vec::new();
    for l in listeners {
        let sh = shared.clone();
        loops.push(tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = l.accept().await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                accept(&sh, stream, peer).await;
            }
        }));
    }
    let old = std::mem::replace(&mut *shared.accepters.lock(), loops);
    for a in old {
        a.abort();
    }
    *shared.listening.lock() = listening;
    Ok(())
}

/// Stops accepting (shutdown); the stopped loops, to wait for.
pub fn stop(shared: &Shared) -> Vec<tokio::task::JoinHandle<()>> {
    shared.listening.lock().clear();
    let loops: Vec<_> = shared.accepters.lock().drain(..).collect();
    for a in &loops {
        a.abort();
    }
    loops
}

/// Takes a new connection: refused past `maxclients`, else served by a task of its own (L2).
async fn accept(
    shared: &Arc<Shared>,
    mut stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
) {
    let max = shared.config.read().maxclients as usize;
    let full = shared.clients.lock().len() >= max;
    if full {
        shared.counters.rejected.fetch_add(1, Ordering::Relaxed);
        let _ = stream
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        return;
    }
    shared.counters.connections.fetch_add(1, Ordering::Relaxed);
    let id = shared.next_client.fetch_add(1, Ordering::Relaxed);
    let info = Arc::new(ClientInfo {
        addr: peer.to_string(),
        laddr: stream
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        ..ClientInfo::detached(id)
    });
    shared.clients.lock().insert(id, info.clone());
    let h = tokio::spawn(crate::conn::serve(shared.clone(), stream, info));
    let mut t = shared.client_tasks.lock();
    t.retain(|h| !h.is_finished());
    t.push(h);
}
