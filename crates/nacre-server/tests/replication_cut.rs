//! A 5 s network cut between a replica and its master, made by a TCP proxy in the test:
//! both sockets are closed and new connections refused while writes go on at the master.
//! When the network is back the replica continues with a partial resynchronization: no
//! full copy, and the bytes the master sends are the stream of the cut, not the data set
//! (measured with `total_net_repl_output_bytes`). Run for a redis-server replica of a
//! nacre-server master and for a nacre-server replica of a redis-server master.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{info_field, q, text, wait_for, RedisServer, Server};
use redis::Connection;

fn num(c: &mut Connection, section: &str, field: &str) -> u64 {
    info_field(c, section, field).parse().unwrap_or(0)
}

/// A TCP proxy to `target` that can cut every connection and refuse new ones.
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    live: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(target: u16) -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let live: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (c2, l2) = (cut.clone(), live.clone());
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(down) = s else { continue };
                if c2.load(Ordering::Acquire) {
                    let _ = down.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(up) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let mut live = l2.lock().unwrap();
                live.push(down.try_clone().unwrap());
                live.push(up.try_clone().unwrap());
                for (mut from, mut to) in [
                    (down.try_clone().unwrap(), up.try_clone().unwrap()),
                    (up, down),
                ] {
                    std::thread::spawn(move || {
                        let mut buf = vec![0u8; 64 << 10];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 || to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(Shutdown::Both);
                        let _ = from.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        Proxy { port, cut, live }
    }

    /// Closes every connection and refuses new ones until `heal`.
    fn cut(&self) {
        self.cut.store(true, Ordering::Release);
        for s in self.live.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn heal(&self) {
        self.cut.store(false, Ordering::Release);
    }
}

fn load(c: &mut Connection, tag: &str, n: usize, size: usize) {
    let v = "x".repeat(size);
    let mut p = redis::pipe();
    for i in 0..n {
        p.cmd("SET").arg(format!("{tag}:{i}")).arg(&v).ignore();
        if p.cmd_iter().count() >= 1000 {
            p.query::<()>(c).unwrap();
            p = redis::pipe();
        }
    }
    p.query::<()>(c).unwrap();
}

/// The cut and its measure; `master` and `replica` are connections to each side, `proxy`
/// stands between them. Returns (bytes sent after the cut, stream bytes of the cut).
fn cut_and_measure(
    m: &mut Connection,
    r: &mut Connection,
    proxy: &Proxy,
    what: &str,
) -> (u64, u64) {
    let link_up = |r: &mut Connection| info_field(r, "replication", "master_link_status") == "up";
    wait_for("the link", Duration::from_secs(30), || link_up(r));
    let caught_up = |m: &mut Connection, r: &mut Connection| {
        num(m, "replication", "master_repl_offset") == num(r, "replication", "slave_repl_offset")
    };
    wait_for("the replica to catch up", Duration::from_secs(30), || {
        caught_up(m, r)
    });
    let full = num(m, "stats", "sync_full");
    let partial = num(m, "stats", "sync_partial_ok");
    let offset_before = num(m, "replication", "master_repl_offset");
    proxy.cut();
    let t = Instant::now();
    // Writes during the 5 s cut: 2,000 keys of 100 bytes.
    load(m, &format!("{what}-cut"), 2000, 100);
    std::thread::sleep(Duration::from_secs(5).saturating_sub(t.elapsed()));
    let offset_cut = num(m, "replication", "master_repl_offset");
    let sent_before = num(m, "stats", "total_net_repl_output_bytes");
    proxy.heal();
    wait_for("the link again", Duration::from_secs(30), || link_up(r));
    wait_for(
        "the replica to catch up again",
        Duration::from_secs(30),
        || caught_up(m, r),
    );
    let sent = num(m, "stats", "total_net_repl_output_bytes") - sent_before;
    assert_eq!(num(m, "stats", "sync_full"), full, "{what}: a full copy");
    assert_eq!(
        num(m, "stats", "sync_partial_ok"),
        partial + 1,
        "{what}: one partial resynchronization"
    );
    for i in [0, 999, 1999] {
        let v = text(&q(r, &["GET", &format!("{what}-cut:{i}")]));
        assert_eq!(v.len(), 100, "{what}: a key written during the cut");
    }
    (sent, offset_cut - offset_before)
}

#[test]
fn a_redis_replica_of_nacre_continues_after_a_5s_cut() {
    let master = Server::start(&[]);
    let mut m = master.conn();
    // A data set of 20 MB the cut must not send again.
    load(&mut m, "data", 20_000, 1000);
    let proxy = Proxy::start(master.port);
    let Some(replica) =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &proxy.port.to_string()])
    else {
        eprintln!("SKIPPED: redis-server is not installed");
        return;
    };
    let mut r = replica.conn();
    let (sent, stream) = cut_and_measure(&mut m, &mut r, &proxy, "nacre-master");
    eprintln!(
        "nacre-server master, redis-server replica: after a 5 s cut the master sent {sent} bytes for {stream} bytes of stream written during the cut (data set 20 MB)"
    );
    assert!(sent < 2 * stream + 4096, "{sent} bytes for {stream}");
}

#[test]
fn a_nacre_replica_of_redis_continues_after_a_5s_cut() {
    let Some(master) = RedisServer::start() else {
        eprintln!("SKIPPED: redis-server is not installed");
        return;
    };
    let mut m = master.conn();
    load(&mut m, "data", 20_000, 1000);
    let proxy = Proxy::start(master.port);
    let replica = Server::start(&["--replicaof", &format!("127.0.0.1 {}", proxy.port)]);
    let mut r = replica.conn();
    let (sent, stream) = cut_and_measure(&mut m, &mut r, &proxy, "redis-master");
    eprintln!(
        "redis-server master, nacre-server replica: after a 5 s cut the master sent {sent} bytes for {stream} bytes of stream written during the cut (data set 20 MB)"
    );
    assert!(sent < 2 * stream + 4096, "{sent} bytes for {stream}");
}
