//! `FAILOVER`: a master hands its role to a replica with no write lost, in every pairing
//! with redis-server 7.0: a Nacre master to a Nacre replica (with a Redis replica that
//! follows along), a Redis master to a Nacre replica, a Nacre master to a Redis replica.
//! The handover is a partial resynchronization each way. Tests that need redis-server skip
//! visibly when it is not installed.

mod common;

use std::time::{Duration, Instant};

use common::{info_field, q, run_text, text, wait_for, RedisServer, Server};
use redis::Connection;

fn link_up(c: &mut Connection) -> bool {
    info_field(c, "replication", "master_link_status") == "up"
}

/// `n` keys `tag:i`, then `WAIT` for `replicas`.
fn write(c: &mut Connection, tag: &str, n: usize, replicas: usize) {
    for i in 0..n {
        q(c, &["SET", &format!("{tag}:{i}"), &format!("v{i}")]);
    }
    q(c, &["RPUSH", &format!("{tag}:list"), "a", "b", "c"]);
    let acked = text(&q(c, &["WAIT", &replicas.to_string(), "5000"]));
    assert_eq!(acked, replicas.to_string(), "WAIT after {tag}");
}

fn has(c: &mut Connection, tag: &str, n: usize) -> bool {
    (0..n).all(|i| text(&q(c, &["GET", &format!("{tag}:{i}")])) == format!("v{i}"))
        && text(&q(c, &["LRANGE", &format!("{tag}:list"), "0", "-1"])) == "[a,b,c]"
}

/// `old` ran `FAILOVER`: waits until it is a replica of `new` with its link up and the
/// failover over.
fn wait_handover(old: &mut Connection, new: &mut Connection) {
    wait_for("the handover", Duration::from_secs(20), || {
        info_field(old, "replication", "role") == "slave"
            && link_up(old)
            && info_field(old, "replication", "master_failover_state") == "no-failover"
            && info_field(new, "replication", "role") == "master"
    });
}

#[test]
fn a_nacre_master_hands_over_to_a_nacre_replica_and_a_redis_replica_follows() {
    let master = Server::start(&[]);
    let mut m = master.conn();
    write(&mut m, "before", 200, 0);
    let target = Server::start(&["--replicaof", &format!("127.0.0.1 {}", master.port)]);
    let mut t = target.conn();
    let Some(other) =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()])
    else {
        eprintln!("SKIPPED: redis-server is not installed");
        return;
    };
    let mut o = other.conn();
    wait_for("both replicas", Duration::from_secs(20), || {
        link_up(&mut t) && link_up(&mut o)
    });
    write(&mut m, "during", 200, 2);
    let full_before = info_field(&mut m, "stats", "sync_full");

    let ok = text(&q(
        &mut m,
        &["FAILOVER", "TO", "127.0.0.1", &target.port.to_string()],
    ));
    assert_eq!(ok, "OK");
    wait_handover(&mut m, &mut t);
    // The target continued the old master's stream: the old master's PSYNC was partial.
    assert_eq!(info_field(&mut t, "stats", "sync_full"), "0");
    assert_eq!(info_field(&mut t, "stats", "sync_partial_ok"), "1");
    assert_eq!(info_field(&mut m, "stats", "sync_full"), full_before);
    // Nothing was lost, and the old master is now read-only.
    assert!(has(&mut t, "before", 200) && has(&mut t, "during", 200));
    let refused = run_text(&mut m, &["SET", "x", "1"]);
    assert!(
        refused.contains("You can't write against a read only replica."),
        "{refused}"
    );
    let e = run_text(&mut m, &["FAILOVER"]);
    assert!(
        e.contains("FAILOVER is not valid when server is a replica."),
        "{e}"
    );
    // The new master's writes reach the old master and, through it, the Redis replica.
    write(&mut t, "after", 100, 1);
    wait_for(
        "the chain to carry the new writes",
        Duration::from_secs(20),
        || has(&mut m, "after", 100) && has(&mut o, "after", 100),
    );
    assert!(has(&mut o, "before", 200) && has(&mut o, "during", 200));
}

#[test]
fn a_redis_master_hands_over_to_a_nacre_replica() {
    let Some(master) = RedisServer::start() else {
        eprintln!("SKIPPED: redis-server is not installed");
        return;
    };
    let mut m = master.conn();
    write(&mut m, "before", 200, 0);
    let target = Server::start(&["--replicaof", &format!("127.0.0.1 {}", master.port)]);
    let mut t = target.conn();
    wait_for("the replica", Duration::from_secs(20), || link_up(&mut t));
    write(&mut m, "during", 200, 1);
    let ok = text(&q(
        &mut m,
        &["FAILOVER", "TO", "127.0.0.1", &target.port.to_string()],
    ));
    assert_eq!(ok, "OK");
    wait_handover(&mut m, &mut t);
    // Redis continued the stream of the replica it promoted: no full synchronization.
    assert_eq!(info_field(&mut t, "stats", "sync_full"), "0");
    assert_eq!(info_field(&mut t, "stats", "sync_partial_ok"), "1");
    assert!(has(&mut t, "before", 200) && has(&mut t, "during", 200));
    write(&mut t, "after", 100, 1);
    assert!(has(&mut m, "after", 100));
}

#[test]
fn a_nacre_master_hands_over_to_a_redis_replica_that_caught_up() {
    let master = Server::start(&[]);
    let mut m = master.conn();
    write(&mut m, "before", 200, 0);
    let Some(target) =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()])
    else {
        eprintln!("SKIPPED: redis-server is not installed");
        return;
    };
    let mut t = target.conn();
    wait_for("the replica", Duration::from_secs(20), || link_up(&mut t));
    write(&mut m, "during", 200, 1);
    // Without TO: the first replica that acknowledged the whole stream.
    assert_eq!(text(&q(&mut m, &["FAILOVER", "TIMEOUT", "10000"])), "OK");
    wait_handover(&mut m, &mut t);
    assert_eq!(info_field(&mut t, "stats", "sync_full"), "0");
    assert!(has(&mut t, "before", 200) && has(&mut t, "during", 200));
    write(&mut t, "after", 100, 1);
    assert!(has(&mut m, "after", 100));
}

#[test]
fn a_failover_that_times_out_or_is_aborted_leaves_a_master_that_writes() {
    let master = Server::start(&[]);
    let mut m = master.conn();
    q(&mut m, &["SET", "k", "1"]);
    let e = run_text(&mut m, &["FAILOVER"]);
    assert!(e.contains("FAILOVER requires connected replicas."), "{e}");
    // A replica that never acknowledges anything.
    let mut mute = std::net::TcpStream::connect(("127.0.0.1", master.port)).unwrap();
    std::io::Write::write_all(&mut mute, b"REPLCONF listening-port 7777\r\nPSYNC ? -1\r\n")
        .unwrap();
    wait_for("the mute replica", Duration::from_secs(10), || {
        info_field(&mut m, "replication", "connected_slaves") == "1"
    });
    let e = run_text(&mut m, &["FAILOVER", "TO", "127.0.0.1", "1"]);
    assert!(
        e.contains("FAILOVER target HOST and PORT is not a replica."),
        "{e}"
    );
    // Without FORCE, the timeout gives up; writes wait meanwhile, then run.
    assert_eq!(text(&q(&mut m, &["FAILOVER", "TIMEOUT", "600"])), "OK");
    assert_eq!(
        info_field(&mut m, "replication", "master_failover_state"),
        "waiting-for-sync"
    );
    let mut w = master.conn();
    let t0 = Instant::now();
    assert_eq!(text(&q(&mut w, &["INCR", "k"])), "2");
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "a write ran during the failover's pause ({:?})",
        t0.elapsed()
    );
    assert_eq!(
        info_field(&mut m, "replication", "master_failover_state"),
        "no-failover"
    );
    assert_eq!(info_field(&mut m, "replication", "role"), "master");
    // ABORT ends one at once.
    assert_eq!(text(&q(&mut m, &["FAILOVER", "TIMEOUT", "60000"])), "OK");
    let e = run_text(&mut m, &["FAILOVER", "TIMEOUT", "100"]);
    assert!(e.contains("FAILOVER already in progress."), "{e}");
    let e = run_text(&mut m, &["REPLICAOF", "127.0.0.1", "1"]);
    assert!(
        e.contains("REPLICAOF not allowed while failing over."),
        "{e}"
    );
    assert_eq!(text(&q(&mut m, &["FAILOVER", "ABORT"])), "OK");
    assert_eq!(
        info_field(&mut m, "replication", "master_failover_state"),
        "no-failover"
    );
    assert_eq!(text(&q(&mut m, &["INCR", "k"])), "3");
    let e = run_text(&mut m, &["FAILOVER", "ABORT"]);
    assert!(e.contains("No failover in progress."), "{e}");
    drop(mute);
}
