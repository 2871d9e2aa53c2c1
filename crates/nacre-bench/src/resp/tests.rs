//! Tests of the RESP connection: pipelining against an in-process fake server, and a real
//! `redis-server` when one is installed (the codec's own tests are in nacre-resp).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use nacre_pmem::SplitMix64;

use super::*;

const TIMEOUT: Duration = Duration::from_secs(10);

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn simple(s: &str) -> Reply {
    Reply::Simple(s.to_string())
}

// ---- Connection against an in-process fake server ----

/// The fake server's answer to one command.
fn fake_answer(cmd: &[Vec<u8>], counter: &mut i64, out: &mut Vec<u8>) {
    let arg = |i: usize| cmd.get(i).cloned().unwrap_or_default();
    let reply = match cmd.first().map(|c| c.as_slice()) {
        Some(b"PING") => simple("PONG"),
        Some(b"ECHO") => Reply::Bulk(arg(1)),
        Some(b"INCR") => {
            *counter += 1;
            Reply::Integer(*counter)
        }
        Some(b"BIG") => {
            let n: usize = String::from_utf8(arg(1)).unwrap().parse().unwrap();
            Reply::Bulk((0..n).map(|i| (i % 251) as u8).collect())
        }
        Some(b"NESTED") => Reply::Map(vec![
            (
                bulk("list"),
                Reply::Array(vec![Reply::Nil, Reply::Double(0.5)]),
            ),
            (bulk("set"), Reply::Set(vec![Reply::Boolean(true)])),
        ]),
        Some(b"PUSHTHEN") => {
            // An out-of-band push before the reply itself.
            encode_reply(
                out,
                &Reply::Push(vec![bulk("message"), Reply::Bulk(arg(1))]),
            );
            Reply::Bulk(arg(1))
        }
        _ => Reply::Error("ERR unknown command".into()),
    };
    encode_reply(out, &reply);
}

/// A one-connection fake server on a free port. It answers each command it reads and
/// writes the answers in pieces of 1 to `max_piece` bytes.
fn fake_server(max_piece: usize) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        sock.set_nodelay(true).unwrap();
        let mut rng = SplitMix64::new(7);
        let mut inbuf = Vec::new();
        let mut chunk = [0u8; 4096];
        let mut counter = 0;
        loop {
            let n = match sock.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            inbuf.extend_from_slice(&chunk[..n]);
            let mut out = Vec::new();
            while let Some((cmd, used)) = parse(&inbuf).unwrap() {
                inbuf.drain(..used);
                let args: Vec<Vec<u8>> = cmd
                    .into_array()
                    .unwrap()
                    .into_iter()
                    .map(|a| a.as_bytes().unwrap().to_vec())
                    .collect();
                if args.first().map(|a| a.as_slice()) == Some(b"QUIT") {
                    return;
                }
                fake_answer(&args, &mut counter, &mut out);
            }
            let mut at = 0;
            while at < out.len() {
                let piece = 1 + (rng.next_u64() as usize % max_piece);
                let end = out.len().min(at + piece);
                if sock.write_all(&out[at..end]).is_err() {
                    return;
                }
                at = end;
            }
        }
    });
    (addr, handle)
}

#[test]
fn pipelined_replies_come_back_in_order() {
    let (addr, server) = fake_server(7);
    let mut conn = Connection::connect(&addr, TIMEOUT).unwrap();
    assert_eq!(conn.addr(), addr);
    assert!(conn.flush_replies().unwrap().is_empty());

    let mut want = Vec::new();
    let mut incr = 0;
    for i in 0..1000 {
        let s = format!("value-{i}");
        match i % 5 {
            0 => {
                conn.queue(&[b"ECHO", s.as_bytes()]);
                want.push(bulk(&s));
            }
            1 => {
                conn.queue(&[b"INCR"]);
                incr += 1;
                want.push(Reply::Integer(incr));
            }
            2 => {
                conn.queue(&[b"NOPE"]);
                want.push(Reply::Error("ERR unknown command".into()));
            }
            3 => {
                conn.queue(&[b"PUSHTHEN", s.as_bytes()]);
                want.push(bulk(&s));
            }
            _ => {
                conn.queue(&[b"PING"]);
                want.push(simple("PONG"));
            }
        }
    }
    assert_eq!(conn.queued(), 1000);
    let got = conn.flush_replies().unwrap();
    assert_eq!(conn.queued(), 0);
    assert_eq!(got, want);
    let pushes = conn.take_pushes();
    assert_eq!(pushes.len(), 200);
    assert_eq!(
        pushes[0],
        Reply::Push(vec![bulk("message"), bulk("value-3")])
    );
    assert!(conn.take_pushes().is_empty());

    // Single round trips, a nested reply, and a reply bigger than the read buffer.
    assert_eq!(conn.command(&[b"PING"]).unwrap(), simple("PONG"));
    assert_eq!(
        conn.command(&[b"NESTED"]).unwrap(),
        Reply::Map(vec![
            (
                bulk("list"),
                Reply::Array(vec![Reply::Nil, Reply::Double(0.5)])
            ),
            (bulk("set"), Reply::Set(vec![Reply::Boolean(true)])),
        ])
    );
    let big = conn.command(&[b"BIG", b"300000"]).unwrap();
    let want_big: Vec<u8> = (0..300_000).map(|i| (i % 251) as u8).collect();
    assert_eq!(big.as_bytes(), Some(&want_big[..]));

    // An error reply is a reply; command_ok turns it into an error.
    assert!(conn.command(&[b"NOPE"]).unwrap().is_error());
    assert!(matches!(
        conn.command_ok(&[b"NOPE"]),
        Err(RespError::Server(m)) if m == "ERR unknown command"
    ));
    // A single command while others are queued is refused, and the queue survives.
    conn.queue(&[b"PING"]);
    assert!(matches!(
        conn.command(&[b"PING"]),
        Err(RespError::Queued { queued: 1 })
    ));
    assert_eq!(conn.flush_replies().unwrap(), vec![simple("PONG")]);

    conn.queue(&[b"QUIT"]);
    let _ = conn.flush_replies();
    server.join().unwrap();
}

#[test]
fn large_pipelines_in_large_pieces() {
    let (addr, server) = fake_server(100_000);
    let mut conn = Connection::connect(&addr, TIMEOUT).unwrap();
    for round in 0..3 {
        let mut want = Vec::new();
        for i in 0..5000 {
            let s = format!("{round}:{i}:{}", "x".repeat(i % 50));
            conn.queue(&[b"ECHO", s.as_bytes()]);
            want.push(bulk(&s));
        }
        conn.queue(&[b"BIG", b"70000"]);
        let mut got = conn.flush_replies().unwrap();
        assert_eq!(got.pop().unwrap().as_bytes().unwrap().len(), 70_000);
        assert_eq!(got, want);
    }
    // Over 600 KB of replies went through the read buffer; it grew only to hold the
    // 70000-byte reply, from 64 KiB to 128 KiB.
    assert_eq!(conn.read_buffer_len(), 128 << 10);
    drop(conn);
    server.join().unwrap();
}

/// A server that answers its first command with `reply` and then closes.
fn one_shot_server(reply: &'static [u8]) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        let mut buf = [0u8; 1024];
        let _ = sock.read(&mut buf).unwrap();
        sock.write_all(reply).unwrap();
    });
    (addr, handle)
}

#[test]
fn peer_closing_mid_reply() {
    let (addr, server) = one_shot_server(b"$10\r\nhel");
    let mut conn = Connection::connect(&addr, TIMEOUT).unwrap();
    conn.queue(&[b"GET", b"k"]);
    conn.queue(&[b"GET", b"k"]);
    match conn.flush_replies() {
        Err(RespError::Closed { addr: a, owed }) => {
            assert_eq!((a, owed), (addr.clone(), 2));
        }
        other => panic!("expected Closed, got {other:?}"),
    }
    // The stream is out of step now.
    assert!(matches!(
        conn.command(&[b"PING"]),
        Err(RespError::Broken { .. })
    ));
    server.join().unwrap();
}

#[test]
fn malformed_reply_from_the_server() {
    let (addr, server) = one_shot_server(b"+OK\r\n?bad\r\n");
    let mut conn = Connection::connect(&addr, TIMEOUT).unwrap();
    conn.queue(&[b"A"]);
    conn.queue(&[b"B"]);
    match conn.flush_replies() {
        Err(RespError::Protocol(msg)) => {
            assert!(msg.contains(&addr) && msg.contains("'?'"), "{msg}")
        }
        other => panic!("expected Protocol, got {other:?}"),
    }
    server.join().unwrap();
}

#[test]
fn read_timeout_is_an_io_error() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mut conn = Connection::connect(&addr, Duration::from_millis(200)).unwrap();
    let _held = listener.accept().unwrap();
    match conn.command(&[b"PING"]) {
        Err(RespError::Io {
            addr: a, source, ..
        }) => {
            assert_eq!(a, addr);
            assert!(
                matches!(
                    source.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "{source}"
            );
        }
        other => panic!("expected an I/O timeout, got {other:?}"),
    }
    assert!(matches!(
        conn.command(&[b"PING"]),
        Err(RespError::Broken { .. })
    ));
}

#[test]
fn connect_errors_name_the_address() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    match Connection::connect(&addr, TIMEOUT) {
        Err(e @ RespError::Connect { .. }) => assert!(e.to_string().contains(&addr), "{e}"),
        other => panic!("expected Connect, got {other:?}"),
    }
    assert!(matches!(
        Connection::connect("no port here", TIMEOUT),
        Err(RespError::Connect { .. })
    ));
}

// ---- A real redis-server ----

/// Starts the system's redis-server, or returns `None` (after saying so) when it is not
/// installed. Once the binary exists, failing to start it fails the test.
fn real_redis() -> Option<RedisServer> {
    if !Path::new(DEFAULT_REDIS_SERVER).exists() {
        eprintln!("skipped: {DEFAULT_REDIS_SERVER} is not installed");
        return None;
    }
    Some(RedisServer::start(DEFAULT_REDIS_SERVER, &[]).unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn redis_server_missing_binary() {
    match RedisServer::start("/nonexistent/redis-server", &[]) {
        Err(e @ ServerError::BinaryMissing { .. }) => {
            assert!(e.to_string().contains("/nonexistent/redis-server"), "{e}")
        }
        other => panic!("expected BinaryMissing, got {other:?}"),
    }
}

#[test]
fn redis_server_bad_option_reports_its_output() {
    if !Path::new(DEFAULT_REDIS_SERVER).exists() {
        eprintln!("skipped: {DEFAULT_REDIS_SERVER} is not installed");
        return;
    }
    match RedisServer::start(DEFAULT_REDIS_SERVER, &["--no-such-option", "1"]) {
        Err(e @ ServerError::Exited { .. }) => {
            assert!(e.to_string().contains("no-such-option"), "{e}")
        }
        other => panic!("expected Exited, got {other:?}"),
    }
}

fn args<'a>(words: &'a [&'a str]) -> Vec<&'a [u8]> {
    words.iter().map(|w| w.as_bytes()).collect()
}

/// Runs `cmd` and returns its reply.
fn run(conn: &mut Connection, words: &[&str]) -> Reply {
    conn.command(&args(words)).unwrap()
}

#[test]
fn real_redis_one_by_one() {
    let Some(server) = real_redis() else { return };
    let mut c = server.connect(TIMEOUT).unwrap();
    assert_eq!(run(&mut c, &["SET", "k", "v"]), simple("OK"));
    assert_eq!(run(&mut c, &["GET", "k"]), bulk("v"));
    assert_eq!(run(&mut c, &["GET", "missing"]), Reply::Nil);
    assert_eq!(
        run(&mut c, &["HSET", "h", "f1", "v1", "f2", "v2"]),
        Reply::Integer(2)
    );
    let mut pairs = run(&mut c, &["HGETALL", "h"]).into_map().unwrap();
    pairs.sort_by(|a, b| a.0.as_bytes().cmp(&b.0.as_bytes()));
    assert_eq!(
        pairs,
        vec![(bulk("f1"), bulk("v1")), (bulk("f2"), bulk("v2"))]
    );
    assert_eq!(
        run(
            &mut c,
            &["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"]
        ),
        Reply::Integer(4)
    );
    assert_eq!(
        run(
            &mut c,
            &["ZRANGEBYSCORE", "z", "2", "+inf", "LIMIT", "1", "2"]
        ),
        Reply::Array(vec![bulk("c"), bulk("d")])
    );
    assert_eq!(
        run(
            &mut c,
            &[
                "ZRANGEBYSCORE",
                "z",
                "-inf",
                "+inf",
                "WITHSCORES",
                "LIMIT",
                "0",
                "1"
            ]
        ),
        Reply::Array(vec![bulk("a"), bulk("1")])
    );
    for i in 1..=3 {
        assert_eq!(run(&mut c, &["INCR", "n"]), Reply::Integer(i));
    }
    assert_eq!(run(&mut c, &["GET", "n"]).as_int(), Some(3));
    assert_eq!(
        run(&mut c, &["DEL", "k", "h", "nothing"]),
        Reply::Integer(2)
    );
    assert_eq!(run(&mut c, &["EXISTS", "k"]), Reply::Integer(0));

    let unknown = run(&mut c, &["NOSUCHCOMMAND", "x"]);
    let msg = unknown.error_message().unwrap().into_owned();
    assert!(msg.starts_with("ERR unknown command"), "{msg}");
    assert!(matches!(
        c.command_ok(&args(&["NOSUCHCOMMAND"])),
        Err(RespError::Server(_))
    ));
    run(&mut c, &["SET", "s", "text"]);
    assert!(run(&mut c, &["INCR", "s"]).is_error());
    // The connection is still in step after error replies.
    assert_eq!(run(&mut c, &["PING"]), simple("PONG"));

    // A value bigger than the read buffer, binary.
    let mut rng = SplitMix64::new(3);
    let big: Vec<u8> = (0..(3 << 20)).map(|_| rng.next_u64() as u8).collect();
    assert_eq!(c.command(&[b"SET", b"big", &big]).unwrap(), simple("OK"));
    assert_eq!(c.command(&[b"GET", b"big"]).unwrap(), Reply::Bulk(big));
}

#[test]
fn real_redis_pipelined() {
    let Some(server) = real_redis() else { return };
    let mut c = server.connect(TIMEOUT).unwrap();
    let mut want = Vec::new();
    let mut incr = 0;
    for i in 0..1000 {
        let key = format!("key:{i}");
        let val = format!("val:{i}");
        match i % 10 {
            0..=3 => {
                c.queue(&args(&["SET", &key, &val]));
                want.push(simple("OK"));
            }
            4 | 5 => {
                // The SET three commands back.
                let k = format!("key:{}", i - 2);
                c.queue(&args(&["GET", &k]));
                want.push(bulk(&format!("val:{}", i - 2)));
            }
            6 => {
                c.queue(&args(&["INCR", "counter"]));
                incr += 1;
                want.push(Reply::Integer(incr));
            }
            7 => {
                c.queue(&args(&["HSET", "hash", &key, &val]));
                want.push(Reply::Integer(1));
            }
            8 => {
                c.queue(&args(&["ZADD", "zset", &i.to_string(), &key]));
                want.push(Reply::Integer(1));
            }
            _ => {
                c.queue(&args(&["NOSUCHCOMMAND", &key]));
                want.push(Reply::Nil); // checked below
            }
        }
    }
    let got = c.flush_replies().unwrap();
    assert_eq!(got.len(), 1000);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        if i % 10 == 9 {
            let msg = g.error_message().unwrap();
            assert!(msg.starts_with("ERR unknown command"), "{i}: {msg}");
        } else {
            assert_eq!(g, w, "reply {i}");
        }
    }

    // Reads of what the pipeline wrote, pipelined too.
    c.queue(&args(&["HGETALL", "hash"]));
    c.queue(&args(&[
        "ZRANGEBYSCORE",
        "zset",
        "100",
        "+inf",
        "LIMIT",
        "2",
        "3",
    ]));
    c.queue(&args(&["DEL", "hash", "zset", "counter"]));
    c.queue(&args(&["GET", "counter"]));
    let got = c.flush_replies().unwrap();
    assert_eq!(got[0].clone().into_map().unwrap().len(), 100);
    // zset scores are i for i % 10 == 8: 108, 118, 128, ... ; skip two.
    assert_eq!(
        got[1],
        Reply::Array(vec![bulk("key:128"), bulk("key:138"), bulk("key:148")])
    );
    assert_eq!(got[2], Reply::Integer(3));
    assert_eq!(got[3], Reply::Nil);
}

#[test]
fn real_redis_resp3() {
    let Some(server) = real_redis() else { return };
    let mut c = server.connect(TIMEOUT).unwrap();
    let hello = run(&mut c, &["HELLO", "3"]).into_map().unwrap();
    let proto = hello
        .iter()
        .find(|(k, _)| k.as_str() == Some("proto"))
        .map(|(_, v)| v.clone());
    assert_eq!(proto, Some(Reply::Integer(3)));

    run(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(
        run(&mut c, &["HGETALL", "h"]),
        Reply::Map(vec![(bulk("f"), bulk("v"))])
    );
    run(&mut c, &["ZADD", "z", "1.5", "a", "2", "b"]);
    assert_eq!(
        run(
            &mut c,
            &[
                "ZRANGEBYSCORE",
                "z",
                "-inf",
                "+inf",
                "WITHSCORES",
                "LIMIT",
                "0",
                "2"
            ]
        ),
        Reply::Array(vec![
            Reply::Array(vec![bulk("a"), Reply::Double(1.5)]),
            Reply::Array(vec![bulk("b"), Reply::Double(2.0)]),
        ])
    );
    assert_eq!(run(&mut c, &["GET", "missing"]), Reply::Nil);
    assert_eq!(
        run(&mut c, &["SISMEMBER", "nosuchset", "x"]),
        Reply::Integer(0)
    );
    assert!(run(&mut c, &["NOSUCHCOMMAND"]).is_error());

    // Client-side caching: an invalidation push arrives before the next reply, and is set
    // aside rather than taken for it.
    assert_eq!(run(&mut c, &["CLIENT", "TRACKING", "ON"]), simple("OK"));
    run(&mut c, &["SET", "tracked", "1"]);
    assert_eq!(run(&mut c, &["GET", "tracked"]), bulk("1"));
    let mut other = server.connect(TIMEOUT).unwrap();
    assert_eq!(run(&mut other, &["SET", "tracked", "2"]), simple("OK"));
    c.queue(&args(&["PING"]));
    c.queue(&args(&["GET", "tracked"]));
    assert_eq!(c.flush_replies().unwrap(), vec![simple("PONG"), bulk("2")]);
    let pushes = c.take_pushes();
    assert!(
        pushes.contains(&Reply::Push(vec![
            bulk("invalidate"),
            Reply::Array(vec![bulk("tracked")])
        ])),
        "{pushes:?}"
    );
}

#[test]
fn real_redis_is_killed_on_drop() {
    let Some(server) = real_redis() else { return };
    let pid = server.pid();
    let dir = server.dir().to_path_buf();
    let addr = server.addr().to_string();
    assert!(dir.is_dir());
    assert_eq!(server.port().to_string(), addr.rsplit(':').next().unwrap());
    assert_eq!(
        server
            .connect(TIMEOUT)
            .unwrap()
            .command(&[b"PING"])
            .unwrap(),
        simple("PONG")
    );
    // Dropped while a test panics, too: the guard's Drop runs during unwinding.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _server = server;
        panic!("test failure while the server runs");
    }));
    assert!(result.is_err());
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "pid {pid} survived"
    );
    assert!(!dir.exists(), "{} survived", dir.display());
}
