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

use common::{answering_pid, free_port, wait_ready, Server};
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
        Self::start_with(dir, &[])
    }

    /// It must be our process that answers on the port (another test's server may have
    /// taken it first).
    fn start_with(dir: &Path, extra: &[&str]) -> Option<RedisAt> {
        for _ in 0..10 {
            let r = Self::start_once(dir, extra)?;
            if answering_pid(r.port, Vec::new()) == Some(r.child.id()) {
                return Some(r);
            }
        }
        panic!("could not start redis-server on a port of its own");
    }

    fn start_once(dir: &Path, extra: &[&str]) -> Option<RedisAt> {
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
            .args(extra)
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
    nacre_sized(dir, "256mb", args)
}

fn nacre_sized(dir: &Path, pool: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nacre-server"))
        .arg("--dir")
        .arg(dir)
        .args([
            "--pmem-size",
            pool,
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

/// Letters and digits from a seeded generator: values LZF cannot shrink much, so the file
/// is as big as the data.
struct Bytes(u64);

impl Bytes {
    fn text(&mut self, len: usize) -> String {
        const ABC: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        (0..len)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                ABC[(self.0 % ABC.len() as u64) as usize] as char
            })
            .collect()
    }
}

/// Sends `cmds` in pipelines of `batch`, failing on the first error reply.
fn send_all(c: &mut Connection, cmds: impl Iterator<Item = redis::Cmd>, batch: usize) {
    let mut p = redis::pipe();
    let mut n = 0;
    for cmd in cmds {
        p.add_command(cmd).ignore();
        n += 1;
        if n == batch {
            p.query::<()>(c).unwrap();
            p = redis::pipe();
            n = 0;
        }
    }
    if n > 0 {
        p.query::<()>(c).unwrap();
    }
}

fn cmd(args: &[&str]) -> redis::Cmd {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c
}

/// About 1 GiB in Redis's file: 1,000,400 keys of every type and encoding (strings of
/// 1200 bytes and integers; small and big hashes, lists, sets, intsets and sorted sets;
/// streams, some with a group and pending entries), every tenth key with an expiry time.
fn fill_gibibyte(c: &mut Connection) -> usize {
    let mut b = Bytes(0x9E37_79B9_7F4A_7C15);
    let mut keys = 0;
    let mut g = |n: usize, make: &mut dyn FnMut(usize, &mut Bytes) -> Vec<redis::Cmd>| {
        let mut all = Vec::new();
        for i in 0..n {
            all.extend(make(i, &mut b));
            if all.len() >= 2000 || i + 1 == n {
                send_all(c, all.drain(..), 2000);
            }
        }
        keys += n;
    };
    let expire = |k: &str, i: usize| -> Vec<redis::Cmd> {
        if i % 10 == 0 {
            vec![cmd(&["PEXPIRE", k, &(3_600_000 + i).to_string()])]
        } else {
            vec![]
        }
    };
    g(690_000, &mut |i, b| {
        let k = format!("str:{i}");
        let v = if i % 50 == 0 {
            i.to_string()
        } else {
            b.text(1200)
        };
        let mut v2 = vec![cmd(&["SET", &k, &v])];
        v2.extend(expire(&k, i));
        v2
    });
    g(100_000, &mut |i, b| {
        let k = format!("hash:{i}");
        let mut h = redis::cmd("HSET");
        h.arg(&k);
        for f in 0..8 {
            h.arg(format!("field{f}")).arg(b.text(90));
        }
        let mut v = vec![h];
        v.extend(expire(&k, i));
        v
    });
    g(80_000, &mut |i, b| {
        let k = format!("list:{i}");
        let mut l = redis::cmd("RPUSH");
        l.arg(&k);
        for _ in 0..10 {
            l.arg(b.text(100));
        }
        l.arg(i as i64 * 7 - 5);
        let mut v = vec![l];
        v.extend(expire(&k, i));
        v
    });
    g(60_000, &mut |i, b| {
        let k = format!("set:{i}");
        let mut s = redis::cmd("SADD");
        s.arg(&k);
        for _ in 0..10 {
            s.arg(b.text(50));
        }
        let mut v = vec![s];
        v.extend(expire(&k, i));
        v
    });
    g(10_000, &mut |i, _| {
        let k = format!("intset:{i}");
        let mut s = redis::cmd("SADD");
        s.arg(&k);
        for m in 0..12i64 {
            s.arg(m * 100_003 - i as i64);
        }
        let mut v = vec![s];
        v.extend(expire(&k, i));
        v
    });
    g(50_000, &mut |i, b| {
        let k = format!("zset:{i}");
        let mut z = redis::cmd("ZADD");
        z.arg(&k);
        for m in 0..10 {
            z.arg(format!("{}.25", m * 3 + i % 7)).arg(b.text(50));
        }
        let mut v = vec![z];
        v.extend(expire(&k, i));
        v
    });
    // Big ones: hash tables, skiplists and lists of many nodes.
    g(400, &mut |i, b| {
        let k = format!("big:{i}");
        let mut c = redis::cmd(["HSET", "SADD", "ZADD", "RPUSH"][i % 4]);
        c.arg(&k);
        for m in 0..2000 {
            match i % 4 {
                0 => c.arg(format!("f{m}")).arg(b.text(30)),
                2 => c.arg(m as f64 / 3.0).arg(b.text(30)),
                _ => c.arg(b.text(30)),
            };
        }
        vec![c]
    });
    g(10_000, &mut |i, b| {
        let k = format!("stream:{i}");
        let mut v: Vec<redis::Cmd> = (0..10)
            .map(|e| {
                cmd(&[
                    "XADD",
                    &k,
                    &format!("{}-{e}", 1_700_000_000_000u64 + i as u64),
                    "event",
                    &b.text(20),
                    "n",
                    &e.to_string(),
                ])
            })
            .collect();
        if i % 10 == 0 {
            v.push(cmd(&["XGROUP", "CREATE", &k, "workers", "0"]));
            v.push(cmd(&[
                "XREADGROUP",
                "GROUP",
                "workers",
                "alice",
                "COUNT",
                "3",
                "STREAMS",
                &k,
                ">",
            ]));
            v.push(cmd(&[
                "XDEL",
                &k,
                &format!("{}-9", 1_700_000_000_000u64 + i as u64),
            ]));
        }
        v
    });
    keys
}

/// Every key of `want` (database 0) is in `got` with the same type, contents and expiry
/// (within a minute), compared in pipelines of 1000 keys.
fn same_data_pipelined(want: &mut Connection, got: &mut Connection, what: &str) -> usize {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(want).unwrap();
    keys.sort();
    let mut theirs: Vec<String> = redis::cmd("KEYS").arg("*").query(got).unwrap();
    theirs.sort();
    assert_eq!(theirs.len(), keys.len(), "{what}: key count");
    assert!(theirs == keys, "{what}: key names differ");
    let read = |c: &mut Connection, chunk: &[String]| -> Vec<(Value, i64)> {
        let mut p = redis::pipe();
        for k in chunk {
            p.cmd("TYPE").arg(k);
        }
        let types: Vec<String> = p.query(c).unwrap();
        let mut p = redis::pipe();
        for (k, t) in chunk.iter().zip(&types) {
            match t.as_str() {
                "string" => p.cmd("GET").arg(k),
                "list" => p.cmd("LRANGE").arg(k).arg(0).arg(-1),
                "set" => p.cmd("SMEMBERS").arg(k),
                "hash" => p.cmd("HGETALL").arg(k),
                "zset" => p.cmd("ZRANGE").arg(k).arg(0).arg(-1).arg("WITHSCORES"),
                "stream" => p.cmd("XRANGE").arg(k).arg("-").arg("+"),
                other => panic!("{what}: {k} is a {other}"),
            };
            p.cmd("PTTL").arg(k);
        }
        let vals: Vec<Value> = p.query(c).unwrap();
        vals.chunks(2)
            .zip(&types)
            .map(|(pair, t)| {
                let mut v = pair[0].clone();
                if let (Value::Array(items), "set" | "hash") = (&mut v, t.as_str()) {
                    if t == "hash" {
                        let mut pairs: Vec<Vec<Value>> =
                            items.chunks(2).map(|p| p.to_vec()).collect();
                        pairs.sort_by_key(|p| format!("{p:?}"));
                        *items = pairs.concat();
                    } else {
                        items.sort_by_key(|m| format!("{m:?}"));
                    }
                }
                let Value::Int(pttl) = pair[1] else {
                    panic!("PTTL {:?}", pair[1])
                };
                (v, pttl)
            })
            .collect()
    };
    let mut streams = Vec::new();
    for chunk in keys.chunks(1000) {
        let (a, b) = (read(want, chunk), read(got, chunk));
        for ((k, (va, ta)), (vb, tb)) in chunk.iter().zip(&a).zip(&b) {
            assert!(vb == va, "{what}: {k} differs: {vb:?}, want {va:?}");
            assert_eq!(
                *tb > 0,
                *ta > 0,
                "{what}: {k} expires in {tb} ms, want {ta}"
            );
            assert!(
                (ta - tb).abs() < 60_000,
                "{what}: {k} expires in {tb} ms, want {ta}"
            );
        }
        streams.extend(chunk.iter().filter(|k| k.starts_with("stream:")).cloned());
    }
    // A stream's groups, consumers and pending entries (read one key at a time).
    for k in streams.iter().step_by(10) {
        assert_eq!(
            stream_contents(got, k),
            stream_contents(want, k),
            "{what}: {k}"
        );
    }
    keys.len()
}

/// Seconds from redis-server's log line "DB loaded from disk: X seconds".
fn redis_load_seconds(log: &Path) -> f64 {
    let text = std::fs::read_to_string(log).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("DB loaded from disk"))
        .unwrap_or_else(|| panic!("no load line in {text}"));
    let secs = line.split("disk: ").nth(1).unwrap();
    secs.trim_end_matches(" seconds").trim().parse().unwrap()
}

/// The round trip at scale: about 1 GiB written by redis-server (every type,
/// expiry times, a million keys) is imported, compared key by key, exported, loaded by
/// redis-server and compared again; the import and Redis's own load are timed. Run by
/// hand: `cargo test --release -p nacre-server --test rdb_files -- --ignored --nocapture`.
/// The pool goes to /dev/shm when there is one.
#[test]
#[ignore]
fn a_gibibyte_moves_from_redis_to_nacre_and_back() {
    let shm = Path::new("/dev/shm");
    let work = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let disk = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let Some(redis) = RedisAt::start(&disk.path().join("redis")) else {
        eprintln!("redis-server is not installed; skipped");
        return;
    };
    let mut r = redis.conn();
    let n = fill_gibibyte(&mut r);
    q(&mut r, &["SAVE"]);
    let dump = disk.path().join("redis").join("dump.rdb");
    let size = std::fs::metadata(&dump).unwrap().len();
    eprintln!(
        "redis-server wrote {n} keys, {:.1} MiB, in {:.1} s",
        size as f64 / 1048576.0,
        t.elapsed().as_secs_f64()
    );
    assert!(size > 1 << 30, "the file has {size} bytes");

    // Redis's own load of its file, timed by its log.
    let reload = disk.path().join("reload");
    std::fs::create_dir_all(&reload).unwrap();
    std::fs::copy(&dump, reload.join("dump.rdb")).unwrap();
    let log = disk.path().join("reload.log");
    let loaded = RedisAt::start_with(&reload, &["--logfile", path_str(&log)]).unwrap();
    let redis_secs = redis_load_seconds(&log);
    drop(loaded);

    let pool = work.path().join("pool");
    let t = Instant::now();
    let out = nacre_sized(&pool, "8gb", &["--import-rdb", path_str(&dump)]);
    let wall = t.elapsed().as_secs_f64();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "import failed: {said}");
    let summary = said.lines().find(|l| l.contains("imported ")).unwrap();
    eprintln!("{summary}");
    eprintln!("import process {wall:.2} s; redis-server loads the same file in {redis_secs:.2} s");

    let server = Server::start_in(&pool, &[]);
    let mut nc = server.conn();
    let t = Instant::now();
    let compared = same_data_pipelined(&mut r, &mut nc, "imported into Nacre");
    assert!(compared > 1_000_000, "{compared} keys");
    eprintln!(
        "{compared} keys compared with Redis in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query(&mut nc);
    drop(server);

    let back = disk.path().join("back");
    std::fs::create_dir_all(&back).unwrap();
    let t = Instant::now();
    let out = nacre_sized(
        &pool,
        "8gb",
        &["--export-rdb", path_str(&back.join("dump.rdb"))],
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "export failed: {said}");
    eprintln!(
        "{} (process {:.2} s)",
        said.lines().find(|l| l.contains("exported ")).unwrap(),
        t.elapsed().as_secs_f64()
    );
    let log = disk.path().join("back.log");
    let loaded = RedisAt::start_with(&back, &["--logfile", path_str(&log)]).unwrap();
    eprintln!(
        "redis-server loads the export in {:.2} s",
        redis_load_seconds(&log)
    );
    let compared = same_data_pipelined(&mut r, &mut loaded.conn(), "export loaded by Redis");
    eprintln!("{compared} keys of the export compared with the original");
}
