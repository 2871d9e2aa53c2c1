//! I1 (store/txn.rs): while the engine rebuilds its Global Index in the background after a
//! start (`--persistent-index yes`), a command that walks records (KEYS, HGETALL, a pop,
//! EXEC, EVAL) waits for it without holding up its runtime thread: with one serving thread,
//! other clients' point reads and writes are answered meanwhile, and the waiting commands
//! answer correctly once the rebuild is done. The rebuild is held back for a few seconds
//! through the `testing` feature's environment variable.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::Server;

const HOLD_MS: u64 = 3000;

/// Sends `req` on a new connection, without reading the reply.
fn send(s: &Server, req: &str) -> TcpStream {
    let mut c = s.raw();
    c.set_read_timeout(Some(Duration::from_secs(30))).ok();
    c.write_all(req.as_bytes()).expect("send");
    c
}

/// Reads from `c` until the reply holds `want` or the connection goes quiet.
fn read_until(c: &mut TcpStream, want: &str) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while !String::from_utf8_lossy(&got).contains(want) {
        let n = c.read(&mut buf).expect("reply");
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn walks_wait_for_the_rebuild_without_holding_up_their_thread() {
    let mut s = Server::start(&["--persistent-index", "yes", "--io-threads", "1"]);
    {
        let mut c = s.conn();
        for i in 0..500 {
            common::q(&mut c, &["SET", &format!("k{i}"), &i.to_string()]);
        }
        common::q(&mut c, &["HSET", "h", "f1", "v1", "f2", "v2"]);
        common::q(&mut c, &["RPUSH", "l", "a", "b", "c"]);
        // Too long for the persistent index: a point read of it that no memtable answers
        // (here: of a key that does not exist) waits for the rebuild too.
        common::q(&mut c, &["SET", &"L".repeat(300), "long"]);
    }
    s.kill();
    s.set_env(&[("NACRE_TEST_HOLD_REBUILD_MS", &HOLD_MS.to_string())]);
    let t0 = Instant::now();
    s.restart();
    let mut c = s.conn();
    assert_eq!(
        common::info_field(&mut c, "nacre", "index_rebuilding"),
        "1",
        "the rebuild is not held back"
    );
    // Walks, sent first: each waits for the rebuild.
    let mut keys = send(&s, "KEYS k49*\r\n");
    let mut hall = send(&s, "HGETALL h\r\n");
    let mut pop = send(&s, "LPOP l\r\n");
    let mut exec = send(&s, "MULTI\r\nHGET h f1\r\nLRANGE l 0 -1\r\nEXEC\r\n");
    let mut eval = send(&s, "EVAL \"return redis.call('HGETALL', KEYS[1])\" 1 h\r\n");
    let mut long = send(
        &s,
        &format!("GET {}\r\nGET {}\r\n", "M".repeat(300), "L".repeat(300)),
    );
    std::thread::sleep(Duration::from_millis(200));
    // Meanwhile, on the same serving thread: point reads, writes and the key count.
    let t = Instant::now();
    let v: String = redis::cmd("GET").arg("k7").query(&mut c).expect("get");
    assert_eq!(v, "7");
    common::q(&mut c, &["SET", "new", "v"]);
    common::q(&mut c, &["HSET", "h", "f3", "v3"]);
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
    assert_eq!(n, 504);
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "point commands took {:?} while walks waited",
        t.elapsed()
    );
    assert_eq!(
        common::info_field(&mut c, "nacre", "index_rebuilding"),
        "1",
        "the rebuild ended before the point commands ran"
    );
    // The walks answer once the rebuild is done, and see the writes made meanwhile.
    let r = read_until(&mut keys, "k499");
    assert!(
        t0.elapsed() >= Duration::from_millis(HOLD_MS - 500),
        "KEYS answered before the rebuild"
    );
    for k in ["k49\r", "k490", "k499"] {
        assert!(r.contains(k), "{r}");
    }
    assert!(r.starts_with("*11\r\n"), "{r}");
    let r = read_until(&mut hall, "v3");
    assert!(r.starts_with("*6\r\n"), "{r}");
    assert_eq!(read_until(&mut pop, "\r\na\r\n"), "$1\r\na\r\n");
    let r = read_until(&mut exec, "\r\nc\r\n");
    assert!(r.contains("+QUEUED"), "{r}");
    assert!(
        r.contains("$2\r\nv1\r\n*2\r\n$1\r\nb\r\n$1\r\nc\r\n"),
        "{r}"
    );
    let r = read_until(&mut eval, "v3");
    assert!(r.starts_with("*6\r\n"), "{r}");
    assert_eq!(read_until(&mut long, "long\r\n"), "$-1\r\n$4\r\nlong\r\n");
    assert_eq!(common::info_field(&mut c, "nacre", "index_rebuilding"), "0");
}

#[test]
fn a_client_parked_during_the_rebuild_is_served_after_it() {
    let mut s = Server::start(&["--persistent-index", "yes", "--io-threads", "1"]);
    {
        let mut c = s.conn();
        for i in 0..100 {
            common::q(&mut c, &["SET", &format!("k{i}"), "v"]);
        }
    }
    s.kill();
    s.set_env(&[("NACRE_TEST_HOLD_REBUILD_MS", &HOLD_MS.to_string())]);
    s.restart();
    let mut c = s.conn();
    // Parks: the list does not exist.
    let mut parked = send(&s, "BLPOP q 0\r\n");
    std::thread::sleep(Duration::from_millis(200));
    common::q(&mut c, &["RPUSH", "q", "x", "y"]);
    let r = read_until(&mut parked, "\r\nx\r\n");
    assert_eq!(r, "*2\r\n$1\r\nq\r\n$1\r\nx\r\n");
    let rest: Vec<String> = redis::cmd("LRANGE")
        .arg("q")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .expect("lrange");
    assert_eq!(rest, vec!["y".to_string()]);
}
