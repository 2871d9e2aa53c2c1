//! Hostile input: malformed RESP, oversized lengths, unbalanced quotes, unknown commands,
//! every byte value, random garbage. The server answers as Redis does, closes where Redis
//! closes, never crashes, and other clients are unaffected.

mod common;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::{raw_exchange, Server};

fn exchange(s: &Server, bytes: &[u8]) -> String {
    let mut c = s.raw();
    String::from_utf8_lossy(&raw_exchange(&mut c, bytes, Duration::from_millis(400))).into_owned()
}

#[test]
fn protocol_errors_get_redis_replies_and_close() {
    let s = Server::start(&[]);
    let cases: &[(&[u8], &str)] = &[
        (
            b"*3000000000\r\n",
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n$999999999999\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n$-5\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*2\r\n$3\r\nGET\r\n:1\r\n",
            "-ERR Protocol error: expected '$', got ':'\r\n",
        ),
        (
            b"*x\r\n",
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"SET \"a b\r\n",
            "-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(
            exchange(&s, input),
            *want,
            "input {:?}",
            String::from_utf8_lossy(input)
        );
    }
    // Errors that do not close the connection.
    let got = exchange(&s, b"NOSUCH a b\r\nPING\r\n");
    assert_eq!(
        got,
        "-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' \r\n+PONG\r\n"
    );
    let got = exchange(&s, b"GET\r\nSET k\r\nPING\r\n");
    assert_eq!(
        got,
        "-ERR wrong number of arguments for 'get' command\r\n-ERR wrong number of arguments for 'set' command\r\n+PONG\r\n"
    );
    // Empty lines and empty multibulks are skipped without a reply.
    assert_eq!(exchange(&s, b"\r\n*0\r\n*-1\r\nPING\r\n"), "+PONG\r\n");
    // Inline commands with quoting.
    assert_eq!(
        exchange(&s, b"SET \"q k\" \"a\\x41\\n\"\r\nGET \"q k\"\r\n"),
        "+OK\r\n$3\r\naA\n\r\n"
    );
}

#[test]
fn unauthenticated_clients_get_noauth_and_small_limits() {
    let s = Server::start(&["--requirepass", "secret"]);
    assert_eq!(
        exchange(&s, b"GET k\r\n"),
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        exchange(&s, b"*20\r\n"),
        "-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
    assert_eq!(
        exchange(&s, b"*1\r\n$20000\r\n"),
        "-ERR Protocol error: unauthenticated bulk length\r\n"
    );
    assert_eq!(
        exchange(&s, b"AUTH wrong\r\n"),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(
        exchange(&s, b"AUTH secret\r\nSET k v\r\nGET k\r\n"),
        "+OK\r\n+OK\r\n$1\r\nv\r\n"
    );
}

#[test]
fn every_byte_value_round_trips_in_keys_and_values() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let all: Vec<u8> = (0..=255u8).collect();
    for b in 0..=255u8 {
        let key = vec![b, 0, b'\r', b'\n', b];
        let _: () = redis::cmd("SET").arg(&key).arg(&all).query(&mut c).unwrap();
        let v: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut c).unwrap();
        assert_eq!(v, all);
        let _: () = redis::cmd("HSET")
            .arg(&all)
            .arg(&key)
            .arg(&all)
            .query(&mut c)
            .unwrap();
    }
    let n: i64 = redis::cmd("HLEN").arg(&all).query(&mut c).unwrap();
    assert_eq!(n, 256);
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 257);
}

#[test]
fn random_bytes_from_many_clients_leave_others_served() {
    let s = Arc::new(Server::start(&[]));
    let stop = Arc::new(AtomicBool::new(false));
    let good = {
        let (s, stop) = (s.clone(), stop.clone());
        thread::spawn(move || {
            let mut c = s.conn();
            let mut i = 0i64;
            while !stop.load(Ordering::Relaxed) {
                let _: () = redis::cmd("SET").arg("good").arg(i).query(&mut c).unwrap();
                let v: i64 = redis::cmd("GET").arg("good").query(&mut c).unwrap();
                assert_eq!(v, i);
                i += 1;
            }
            i
        })
    };
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let pieces: &[&[u8]] = &[
        b"*",
        b"$",
        b"\r\n",
        b"-1",
        b"3",
        b"99999999999",
        b"SET",
        b"GET",
        b"\"",
        b"'",
        b"\\x",
        b"MULTI",
        b"EXEC",
        b"HSET",
        b"0",
    ];
    for _ in 0..300 {
        let mut bytes = Vec::new();
        for _ in 0..(rnd() % 40) {
            if rnd() % 2 == 0 {
                bytes.extend_from_slice(pieces[(rnd() % pieces.len() as u64) as usize]);
            } else {
                bytes.push(rnd() as u8);
            }
        }
        let mut c = s.raw();
        let _ = c.write_all(&bytes);
        drop(c);
    }
    thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let served = good.join().expect("the good client failed");
    assert!(served > 10, "the good client ran only {served} round trips");
    let mut c = s.conn();
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn a_client_that_never_reads_does_not_stop_others() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(vec![b'x'; 1 << 20])
        .query(&mut c)
        .unwrap();
    // A slow reader pipelines many large GETs and reads nothing.
    let mut slow = s.raw();
    slow.set_nonblocking(true).ok();
    let req = b"GET big\r\n".repeat(5000);
    let mut sent = 0;
    let t = std::time::Instant::now();
    while sent < req.len() && t.elapsed() < Duration::from_secs(2) {
        match slow.write(&req[sent..]) {
            Ok(n) => sent += n,
            Err(_) => thread::sleep(Duration::from_millis(5)),
        }
    }
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    let v: usize = redis::cmd("STRLEN").arg("big").query(&mut c).unwrap();
    assert_eq!(v, 1 << 20);
}
