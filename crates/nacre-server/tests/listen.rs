//! `CONFIG SET port` and `CONFIG SET bind`: the server listens anew, clients already
//! connected stay, and a port or address that cannot be bound fails the whole `CONFIG SET`
//! with Redis's error, changing nothing (Redis's "CONFIG SET rollback on apply error").

mod common;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{free_port, q, text, Server};

fn pong(addr: &str, port: u16) -> bool {
    let Ok(c) = redis::Client::open(format!("redis://{addr}:{port}/")) else {
        return false;
    };
    c.get_connection_with_timeout(Duration::from_secs(2))
        .ok()
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c).ok())
        .is_some_and(|p| p == "PONG")
}

/// Waits until a connection to `addr:port` is refused (an aborted accept loop lets go of
/// its socket on the runtime's next turn).
fn refused(addr: &str, port: u16) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        if TcpStream::connect((addr, port)).is_err() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn config_set_port_moves_the_listener_and_keeps_connected_clients() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let new = free_port();
    let r = q(&mut c, &["CONFIG", "SET", "port", &new.to_string()]);
    assert_eq!(text(&r), "OK");
    assert!(pong("127.0.0.1", new), "the new port answers");
    assert!(refused("127.0.0.1", s.port), "the old port is closed");
    // The client that asked is still connected, and sees the change.
    assert_eq!(
        text(&q(&mut c, &["CONFIG", "GET", "port"])),
        format!("[port,{new}]")
    );
    assert!(text(&q(&mut c, &["INFO", "server"])).contains(&format!("tcp_port:{new}")));
    // And back.
    assert_eq!(
        text(&q(&mut c, &["CONFIG", "SET", "port", &s.port.to_string()])),
        "OK"
    );
    assert!(pong("127.0.0.1", s.port));
    assert!(refused("127.0.0.1", new));
}

#[test]
fn a_port_in_use_fails_the_whole_config_set_and_changes_nothing() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let before: Vec<String> = ["maxmemory", "client-query-buffer-limit", "port"]
        .iter()
        .map(|p| text(&q(&mut c, &["CONFIG", "GET", p])))
        .collect();
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").expect("squat");
    let used = squatter.local_addr().expect("addr").port().to_string();
    let r = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            "10000001",
            "port",
            &used,
            "client-query-buffer-limit",
            "10m",
        ],
    );
    let e = text(&r);
    assert!(
        e.starts_with(
            "ERR:ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port"
        ),
        "{e}"
    );
    let after: Vec<String> = ["maxmemory", "client-query-buffer-limit", "port"]
        .iter()
        .map(|p| text(&q(&mut c, &["CONFIG", "GET", p])))
        .collect();
    assert_eq!(after, before);
    assert!(
        pong("127.0.0.1", s.port),
        "still serving on the original port"
    );
}

#[test]
fn config_set_bind_adds_and_drops_addresses() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    // Every 127/8 address is this machine's loopback on Linux.
    let r = q(&mut c, &["CONFIG", "SET", "bind", "127.0.0.1 127.0.0.2"]);
    assert_eq!(text(&r), "OK");
    assert!(pong("127.0.0.2", s.port), "the added address answers");
    assert!(pong("127.0.0.1", s.port), "the kept address answers");
    assert_eq!(
        text(&q(&mut c, &["CONFIG", "GET", "bind"])),
        "[bind,127.0.0.1 127.0.0.2]"
    );
    let r = q(&mut c, &["CONFIG", "SET", "bind", "127.0.0.2"]);
    assert_eq!(text(&r), "OK");
    assert!(
        refused("127.0.0.1", s.port),
        "the dropped address is closed"
    );
    assert!(pong("127.0.0.2", s.port));
    // An address this machine does not have: Redis's error, nothing changes.
    let e = text(&q(&mut c, &["CONFIG", "SET", "bind", "192.0.2.1"]));
    assert!(
        e.starts_with(
            "ERR:ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses."
        ),
        "{e}"
    );
    assert!(pong("127.0.0.2", s.port));
    let r = q(&mut c, &["CONFIG", "SET", "bind", "127.0.0.1"]);
    assert_eq!(text(&r), "OK");
    assert!(pong("127.0.0.1", s.port));
}
