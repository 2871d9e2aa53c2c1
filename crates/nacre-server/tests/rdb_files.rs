//! RDB files between redis-server 7.0 and nacre-server: a data set of every type and
//! encoding, with expiry times, in several databases, with a function library, saved by
//! Redis (`SAVE`), imported with `nacre-server --import-rdb`, compared key by key through
//! the protocol; then written back by Nacre (online with `BGSAVE RDB`, offline with
//! `--export-rdb`), loaded by a fresh redis-server and compared again. Damaged files are
//! refused with the offset, and an import that fails says it is incomplete.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, wait_ready, Server};
use redis::{Connection, Value};

/// Databases the data set uses.
const DBS: &[i64] = &[0, 1, 7];

/// A redis-server whose data directory and dump file are given (it loads the dump at start).
struct RedisAt {
    port: u16,
    child: Child,
}

impl RedisAt {
    fn start(dir: &Path) -> Option<RedisAt> {
        std::fs::create_dir_all(dir).ok()?;
        let port = free_port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(dir)
            .args(["--dbfilename", "dump.rdb"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        wait_ready(port);
        Some(RedisAt { port, child })
    }

    fn conn(&self) -> Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

impl Drop for RedisAt {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn q(c: &mut Connection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// One key of every type and encoding in each database, some with expiry times.
fn fill(c: &mut Connection) {
    q(c, &["CONFIG", "SET", "stream-node-max-entries", "3"]);
    for &db in DBS {
        q(c, &["SELECT", &db.to_string()]);
        let p = |k: &str| format!("{k}-{db}");
        q(c, &["SET", &p("str"), "hello"]);
        q(c, &["SET", &p("int"), "-12345"]);
        q(c, &["SET", &p("bigint"), "9223372036854775807"]);
        q(c, &["SET", &p("lzf"), &"abcabcabc".repeat(200)]);
        q(c, &["SET", &p("ttl"), "v", "PX", "100000"]);
        // Expired before the file is read: Redis leaves it out or Nacre skips it.
        q(c, &["SET", &p("gone"), "v", "PX", "1"]);
        q(
            c,
            &["RPUSH", &p("list"), "a", "1", "-70000", "5000000000", "b"],
        );
        q(
            c,
            &[
                "SADD",
                &p("intset"),
                "1",
                "-2",
                "300",
                "70000",
                "5000000000",
            ],
        );
        q(c, &["SADD", &p("set"), "a", "b", "c"]);
        q(c, &["HSET", &p("hash"), "f1", "v1", "f2", "12", "f3", "-1"]);
        q(
            c,
            &[
                "ZADD",
                &p("zset"),
                "1",
                "a",
                "-2.5",
                "b",
                "inf",
                "c",
                "0",
                "d",
            ],
        );
        q(c, &["EXPIRE", &p("zset"), "5000"]);
        for i in 0..300 {
            let (n, v) = (i.to_string(), format!("value-{i}"));
            q(c, &["RPUSH", &p("biglist"), &v]);
            q(c, &["SADD", &p("bigset"), &v]);
            q(c, &["HSET", &p("bighash"), &n, &v]);
            q(c, &["ZADD", &p("bigzset"), &n, &v]);
        }
        q(c, &["PEXPIRE", &p("bighash"), "3000000"]);
        let wide = "x".repeat(10_000);
        q(c, &["RPUSH", &p("widelist"), &wide, "small", &wide]);
        for i in 1..=10 {
            let (id, f, v) = (
                format!("{i}-1"),
                format!("f{}", i % 3),
                (i * 1000).to_string(),
            );
            q(c, &["XADD", &p("stream"), &id, &f, &v, "other", "x"]);
        }
        q(c, &["XDEL", &p("stream"), "2-1", "4-1", "5-1", "6-1"]);
        q(c, &["XGROUP", "CREATE", &p("stream"), "g1", "0"]);
        q(c, &["XGROUP", "CREATE", &p("stream"), "g2", "$"]);
        for who in ["alice", "bob"] {
            q(
                c,
                &[
                    "XREADGROUP",
                    "GROUP",
                    "g1",
                    who,
                    "COUNT",
                    "2",
                    "STREAMS",
                    &p("stream"),
                    ">",
                ],
            );
        }
        q(
            c,
            &["XGROUP", "CREATECONSUMER", &p("stream"), "g1", "carol"],
        );
        q(c, &["XACK", &p("stream"), "g1", "1-1"]);
        q(
            c,
            &["XGROUP", "CREATE", &p("emptystream"), "g", "$", "MKSTREAM"],
        );
    }
    q(c, &["SELECT", "0"]);
    q(
        c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=movelib\nredis.register_function('moved', function(keys, args) return 'here' end)",
        ],
    );
}

/// A stream without what depends on the clock or on Redis's radix tree.
fn stream_contents(c: &mut Connection, key: &str) -> Vec<String> {
    let mut out = vec![format!("{:?}", q(c, &["XRANGE", key, "-", "+"]))];
    let info: Vec<Value> = redis::cmd("XINFO").arg("STREAM").arg(key).query(c).unwrap();
    for pair in info.chunks(2) {
        if pair[0] != Value::BulkString(b"radix-tree-nodes".to_vec()) {
            out.push(format!("{pair:?}"));
        }
    }
    out.push(format!("{:?}", q(c, &["XINFO", "GROUPS", key])));
    let groups: Vec<Vec<Value>> = redis::cmd("XINFO").arg("GROUPS").arg(key).query(c).unwrap();
    for g in groups {
        let Value::BulkString(name) = &g[1] else {
            panic!("group name {:?}", g[1]);
        };
        let name = String::from_utf8_lossy(name).into_owned();
        out.push(format!("{:?}", q(c, &["XPENDING", key, &name])));
        // Each pending entry's id, owner and delivery count (not its idle time).
        let detail: Vec<Vec<Value>> = redis::cmd("XPENDING")
            .arg(key)
            .arg(&name)
            .arg("-")
            .arg("+")
            .arg(100)
            .query(c)
            .unwrap();
        for e in detail {
            out.push(format!("{:?} {:?} {:?}", e[0], e[1], e[3]));
        }
    }
    out
}

/// A key's type, contents (sorted where unordered) and whether it expires.
fn contents(c: &mut Connection, key: &str) -> (String, Vec<String>, bool) {
    let t: String = redis::cmd("TYPE").arg(key).query(c).unwrap();
    let mut items: Vec<String> = match t.as_str() {
        "string" => vec![redis::cmd("GET").arg(key).query(c).unwrap()],
        "list" => redis::cmd("LRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .query(c)
            .unwrap(),
        "set" => redis::cmd("SMEMBERS").arg(key).query(c).unwrap(),
        "hash" => {
            let flat: Vec<String> = redis::cmd("HGETALL").arg(key).query(c).unwrap();
            flat.chunks(2).map(|p| p.join("=")).collect()
        }
        "zset" => redis::cmd("ZRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(c)
            .unwrap(),
        "stream" => stream_contents(c, key),
        other => panic!("{key} is a {other}"),
    };
    if matches!(t.as_str(), "set" | "hash") {
        items.sort();
    }
    let pttl: i64 = redis::cmd("PTTL").arg(key).query(c).unwrap();
    (t, items, pttl > 0)
}

/// Every key of every database of `want` is in `got` with the same contents and expiry
/// (within a minute), and `got` has no other key.
fn same_data(want: &mut Connection, got: &mut Connection, what: &str) {
    for &db in DBS {
        for c in [&mut *want, &mut *got] {
            q(c, &["SELECT", &db.to_string()]);
        }
        let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(want).unwrap();
        keys.sort();
        let mut theirs: Vec<String> = redis::cmd("KEYS").arg("*").query(got).unwrap();
        theirs.sort();
        assert_eq!(theirs, keys, "{what}: keys of db {db}");
        assert!(keys.len() >= 15, "{what}: db {db} has {} keys", keys.len());
        for k in &keys {
            assert_eq!(
                contents(got, k),
                contents(want, k),
                "{what}: {k} in db {db}"
            );
            let (a, b): (i64, i64) = (
                redis::cmd("PTTL").arg(k).query(want).unwrap(),
                redis::cmd("PTTL").arg(k).query(got).unwrap(),
            );
            assert!(
                (a - b).abs() < 60_000,
                "{what}: {k} expires in {b} ms, want {a}"
            );
        }
    }
    for c in [&mut *want, &mut *got] {
        q(c, &["SELECT", "0"]);
    }
    let libs = |c: &mut Connection| format!("{:?}", q(c, &["FUNCTION", "LIST", "WITHCODE"]));
    assert_eq!(libs(got), libs(want), "{what}: function libraries");
}

fn nacre(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nacre-server"))
        .arg("--dir")
        .arg(dir)
        .args([
            "--pmem-size",
            "256mb",
            "--pmem-backend",
            "emulated",
            "--loglevel",
            "warning",
        ])
        .args(args)
        .output()
        .expect("run nacre-server")
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A dump.rdb Redis saved of the data set, in `dir`, and the server (still running).
fn redis_dump(dir: &Path) -> Option<(RedisAt, PathBuf)> {
    let redis = RedisAt::start(dir)?;
    let mut c = redis.conn();
    fill(&mut c);
    // The key that expires in 1 ms is past its time when the file is read.
    std::thread::sleep(Duration::from_millis(5));
    q(&mut c, &["SAVE"]);
    Some((redis, dir.join("dump.rdb")))
}

#[test]
fn a_data_set_moves_from_redis_to_nacre_and_back() {
    let work = tempfile::tempdir().unwrap();
    let Some((redis, dump)) = redis_dump(&work.path().join("redis")) else {
        eprintln!("redis-server is not installed; skipped");
        return;
    };
    let mut r = redis.conn();
    let pool = work.path().join("pool");
    let out = nacre(&pool, &["--import-rdb", path_str(&dump)]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "import failed: {said}");
    assert!(
        said.contains("imported ") && said.contains("checksum verified"),
        "{said}"
    );
    assert!(said.contains("1 function libraries"), "{said}");

    let server = Server::start_in(&pool, &[]);
    let mut n = server.conn();
    same_data(&mut r, &mut n, "imported into Nacre");
    let called: String = redis::cmd("FCALL")
        .arg("moved")
        .arg(0)
        .query(&mut n)
        .unwrap();
    assert_eq!(called, "here");

    // Online: a snapshot written while the server runs, into dir/dbfilename.
    let started: String = redis::cmd("BGSAVE").arg("RDB").query(&mut n).unwrap();
    assert_eq!(started, "Background saving started");
    let t = Instant::now();
    loop {
        let info: String = redis::cmd("INFO").arg("persistence").query(&mut n).unwrap();
        if info.contains("rdb_bgsave_in_progress:0") {
            assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "BGSAVE RDB did not finish"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let online = work.path().join("online");
    std::fs::create_dir_all(&online).unwrap();
    std::fs::copy(pool.join("dump.rdb"), online.join("dump.rdb")).unwrap();
    let loaded = RedisAt::start(&online).expect("redis-server");
    same_data(&mut r, &mut loaded.conn(), "BGSAVE RDB loaded by Redis");
    drop(loaded);

    // Offline: the pool written out once the server is gone.
    let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query(&mut n);
    drop(server);
    let offline = work.path().join("offline");
    std::fs::create_dir_all(&offline).unwrap();
    let file = offline.join("dump.rdb");
    let out = nacre(&pool, &["--export-rdb", path_str(&file)]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "export failed: {said}");
    assert!(
        said.contains("exported ") && said.contains("1 function libraries"),
        "{said}"
    );
    let loaded = RedisAt::start(&offline).expect("redis-server");
    same_data(&mut r, &mut loaded.conn(), "--export-rdb loaded by Redis");
    // No temporary file is left beside it.
    let names: Vec<_> = std::fs::read_dir(&offline)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("dump.rdb")]);
}

#[test]
fn damaged_files_are_refused_with_the_offset_and_never_called_complete() {
    let work = tempfile::tempdir().unwrap();
    let Some((_redis, dump)) = redis_dump(&work.path().join("redis")) else {
        eprintln!("redis-server is not installed; skipped");
        return;
    };
    let good = std::fs::read(&dump).unwrap();
    let bad = work.path().join("bad.rdb");
    let import = |name: &str, bytes: &[u8]| {
        std::fs::write(&bad, bytes).unwrap();
        let out = nacre(&work.path().join(name), &["--import-rdb", path_str(&bad)]);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Truncated in the middle: the keys before it are written, the import is incomplete.
    let (ok, said) = import("cut", &good[..good.len() / 2]);
    assert!(!ok, "{said}");
    assert!(
        said.contains("truncated") && said.contains(&format!("offset {}", good.len() / 2)),
        "{said}"
    );
    assert!(
        said.contains("INCOMPLETE") && !said.contains("imported "),
        "{said}"
    );
    // Without its checksum.
    let (ok, said) = import("nocrc", &good[..good.len() - 8]);
    assert!(
        !ok && said.contains("INCOMPLETE") && said.contains("offset"),
        "{said}"
    );
    // A flipped byte is found (by the value's checks or the checksum) with its offset.
    let mut flipped = good.clone();
    let at = good.len() / 3;
    flipped[at] ^= 0x5A;
    let (ok, said) = import("flip", &flipped);
    assert!(
        !ok && said.contains("offset") && said.contains("INCOMPLETE"),
        "{said}"
    );
    // Not an RDB file at all.
    let (ok, said) = import("text", b"hello, this is not a dump\n");
    assert!(
        !ok && said.contains("not an RDB file") && said.contains("offset 0"),
        "{said}"
    );
    // A newer format.
    let mut newer = good.clone();
    newer[5..9].copy_from_slice(b"0011");
    let (ok, said) = import("newer", &newer);
    assert!(!ok && said.contains("version 11"), "{said}");
    // A missing file.
    let out = nacre(
        &work.path().join("none"),
        &["--import-rdb", "/nonexistent/dump.rdb"],
    );
    assert!(!out.status.success());
    // Each failed pool still opens and serves.
    let s = Server::start_in(&work.path().join("cut"), &[]);
    let n: i64 = redis::cmd("DBSIZE").query(&mut s.conn()).unwrap();
    assert!(n > 0, "keys before the cut were written");
}
