//! nacre-server as a replica of a real redis-server 7.0 master: full synchronization
//! (diskless and from disk), the stream of every type, READONLY, a cut link resumed with a
//! partial resynchronization, a restarted replica resuming from its recorded position,
//! REPLICAOF NO ONE; and hostile masters (truncated or garbled payloads) that the replica
//! survives. Tests that need redis-server skip visibly when it is not installed.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::{run_text, RedisServer, Server};
use redis::{Commands, Connection, Value};

fn info_field(c: &mut Connection, section: &str, field: &str) -> Option<String> {
    let text: String = redis::cmd("INFO").arg(section).query(c).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

fn wait_for(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < within, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the replica has applied everything the master sent.
fn wait_caught_up(master: &mut Connection, replica: &mut Connection) {
    wait_for("the replica to catch up", Duration::from_secs(20), || {
        let m = info_field(master, "replication", "master_repl_offset");
        let r = info_field(replica, "replication", "slave_repl_offset");
        let up = info_field(replica, "replication", "master_link_status");
        up.as_deref() == Some("up") && m.is_some() && m == r
    });
}

fn redis_master() -> Option<RedisServer> {
    let m = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    if m.is_none() {
        eprintln!("SKIPPED: redis-server is not installed");
    }
    m
}

/// Every key of databases 0..4, type-aware: (db, key, type, value as text, expiry time).
fn snapshot(c: &mut Connection) -> Vec<String> {
    let mut out = Vec::new();
    for db in 0..4 {
        let _: () = redis::cmd("SELECT").arg(db).query(c).unwrap();
        let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).unwrap();
        keys.sort();
        for k in keys {
            let t: String = redis::cmd("TYPE").arg(&k).query(c).unwrap();
            let v: Value = match t.as_str() {
                "string" => redis::cmd("GET").arg(&k).query(c).unwrap(),
                "list" => redis::cmd("LRANGE")
                    .arg(&k)
                    .arg(0)
                    .arg(-1)
                    .query(c)
                    .unwrap(),
                "hash" => {
                    let mut m: Vec<(Vec<u8>, Vec<u8>)> =
                        redis::cmd("HGETALL").arg(&k).query(c).unwrap();
                    m.sort();
                    Value::SimpleString(format!("{m:?}"))
                }
                "set" => {
                    let mut m: Vec<Vec<u8>> = redis::cmd("SMEMBERS").arg(&k).query(c).unwrap();
                    m.sort();
                    Value::SimpleString(format!("{m:?}"))
                }
                "zset" => redis::cmd("ZRANGE")
                    .arg(&k)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(c)
                    .unwrap(),
                "stream" => {
                    let entries: Value = redis::cmd("XRANGE")
                        .arg(&k)
                        .arg("-")
                        .arg("+")
                        .query(c)
                        .unwrap();
                    // As a Redis replica, the replica's `entries-read` of a group that
                    // XREADGROUP advanced is unknown (nil): the master sends XCLAIM ...
                    // LASTID only. Everything else must match.
                    let groups: Vec<Vec<Value>> =
                        redis::cmd("XINFO").arg("GROUPS").arg(&k).query(c).unwrap();
                    let groups: Vec<Vec<Value>> = groups
                        .into_iter()
                        .map(|g| {
                            g.chunks(2)
                                .filter(|p| p[0] != Value::BulkString(b"entries-read".to_vec()))
                                .flat_map(|p| p.to_vec())
                                .collect()
                        })
                        .collect();
                    Value::SimpleString(format!("{entries:?} {groups:?}"))
                }
                other => Value::SimpleString(format!("type {other}")),
            };
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&k).query(c).unwrap();
            out.push(format!(
                "{db} {:?} {t} {v:?} {at}",
                String::from_utf8_lossy(&k)
            ));
        }
    }
    let _: () = redis::cmd("SELECT").arg(0).query(c).unwrap();
    out
}

fn assert_same(master: &mut Connection, replica: &mut Connection) -> usize {
    let a = snapshot(master);
    let b = snapshot(replica);
    for (x, y) in a.iter().zip(b.iter()) {
        assert_eq!(x, y, "master and replica differ");
    }
    assert_eq!(a.len(), b.len(), "key counts differ");
    a.len()
}

/// A write load of every type, in databases 0 and 2, tagged `tag`.
fn load(c: &mut Connection, tag: &str, n: usize) {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    for i in 0..n {
        let k = |p: &str| format!("{tag}:{p}:{i}");
        let _: () = c.set(k("s"), format!("v{i}")).unwrap();
        let _: () = redis::cmd("SET")
            .arg(k("ex"))
            .arg(i)
            .arg("EX")
            .arg(1000 + i)
            .query(c)
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg(k("pxat"))
            .arg(i)
            .arg("PXAT")
            .arg(now_ms + 500_000)
            .query(c)
            .unwrap();
        let _: i64 = c.incr(k("n"), 3).unwrap();
        let _: f64 = redis::cmd("INCRBYFLOAT")
            .arg(k("f"))
            .arg("1.25")
            .query(c)
            .unwrap();
        let _: i64 = c.append(k("s"), "-tail").unwrap();
        let _: i64 = redis::cmd("HSET")
            .arg(k("h"))
            .arg("a")
            .arg(1)
            .arg("b")
            .arg(2)
            .arg("c")
            .arg(3)
            .query(c)
            .unwrap();
        let _: f64 = redis::cmd("HINCRBYFLOAT")
            .arg(k("h"))
            .arg("a")
            .arg("0.5")
            .query(c)
            .unwrap();
        let _: i64 = c.rpush(k("l"), &["x", "y", "z", "w"]).unwrap();
        let _: Option<String> = c.lpop(k("l"), None).unwrap();
        let _: i64 = redis::cmd("LINSERT")
            .arg(k("l"))
            .arg("BEFORE")
            .arg("z")
            .arg("q")
            .query(c)
            .unwrap();
        let _: i64 = c.sadd(k("set"), &["m1", "m2", "m3", "m4", "m5"]).unwrap();
        let _: Value = redis::cmd("SPOP").arg(k("set")).query(c).unwrap();
        let _: i64 = c
            .zadd_multiple(k("z"), &[(1.5, "a"), (2.0, "b"), (3.0, "c")])
            .unwrap();
        let _: f64 = c.zincr(k("z"), "a", 10).unwrap();
        let _: i64 = c.zrem(k("z"), "b").unwrap();
        let _: String = redis::cmd("XADD")
            .arg(k("x"))
            .arg("*")
            .arg("f")
            .arg(i)
            .query(c)
            .unwrap();
        let _: String = redis::cmd("XADD")
            .arg(k("x"))
            .arg("*")
            .arg("g")
            .arg("2")
            .query(c)
            .unwrap();
        if i % 3 == 0 {
            let _: Value = redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(k("x"))
                .arg("grp")
                .arg("0")
                .query(c)
                .unwrap();
            let _: Value = redis::cmd("XREADGROUP")
                .arg("GROUP")
                .arg("grp")
                .arg("alice")
                .arg("COUNT")
                .arg(1)
                .arg("STREAMS")
                .arg(k("x"))
                .arg(">")
                .query(c)
                .unwrap();
        }
        let _: Value = redis::cmd("EVAL")
            .arg("redis.call('set', KEYS[1], ARGV[1]); return redis.call('incr', KEYS[2])")
            .arg(2)
            .arg(k("lua"))
            .arg(k("luan"))
            .arg("from-lua")
            .query(c)
            .unwrap();
        let _: Value = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg(k("tx1"))
            .arg("a")
            .cmd("INCR")
            .arg(k("tx2"))
            .cmd("RPUSH")
            .arg(k("tx3"))
            .arg("b")
            .query(c)
            .unwrap();
        let _: i64 = c.expire(k("h"), 5000).unwrap();
        let _: i64 = c.del(k("tx1")).unwrap();
        // Database 2 as well.
        let _: Value = redis::pipe()
            .cmd("SELECT")
            .arg(2)
            .cmd("SET")
            .arg(k("db2"))
            .arg(i)
            .cmd("SADD")
            .arg(k("db2set"))
            .arg("p")
            .arg("q")
            .cmd("SELECT")
            .arg(0)
            .query(c)
            .unwrap();
    }
}

#[test]
fn a_replica_of_redis_matches_it_through_full_sync_stream_cut_and_promotion() {
    let Some(m) = redis_master() else { return };
    let mut mc = m.conn();
    // Declared no-writes: a read-only replica runs no function that may write.
    let lib = "#!lua name=mylib\nredis.register_function{function_name='myfunc', callback=function(keys, args) return args[1] end, flags={'no-writes'}}";
    let _: Value = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(lib)
        .query(&mut mc)
        .unwrap();
    load(&mut mc, "pre", 1500);
    let pre_keys: i64 = redis::cmd("DBSIZE").query(&mut mc).unwrap();
    let r = Server::start(&[]);
    let mut rc = r.conn();
    let _: () = rc.set("local-only", "1").unwrap();
    let t0 = Instant::now();
    let ok: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(m.port)
        .query(&mut rc)
        .unwrap();
    assert_eq!(ok, "OK");
    let again: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(m.port)
        .query(&mut rc)
        .unwrap();
    assert_eq!(again, "OK Already connected to specified master");
    wait_for("the link to come up", Duration::from_secs(60), || {
        info_field(&mut rc, "replication", "master_link_status").as_deref() == Some("up")
    });
    eprintln!(
        "full sync of {} keys in db 0 (+ db 2): link up {} ms after REPLICAOF",
        pre_keys,
        t0.elapsed().as_millis()
    );
    let role: Value = redis::cmd("ROLE").query(&mut rc).unwrap_or(Value::Nil);
    let _ = role; // ROLE is the master side's command; its replica answer is role_reply.
    assert_eq!(
        info_field(&mut rc, "replication", "role").as_deref(),
        Some("slave")
    );
    let exists: i64 = rc.exists("local-only").unwrap();
    assert_eq!(exists, 0, "a full sync replaces the data set");
    // The stream: more of every type, then compare everything.
    load(&mut mc, "post", 300);
    wait_caught_up(&mut mc, &mut rc);
    let n = assert_same(&mut mc, &mut rc);
    assert!(n > 20_000, "{n} keys compared");
    let f: String = redis::cmd("FCALL")
        .arg("myfunc")
        .arg(0)
        .arg("hi")
        .query(&mut rc)
        .unwrap();
    assert_eq!(f, "hi", "the function library came with the payload");
    // Writes from clients are refused, reads served.
    let e = run_text(&mut rc, &["SET", "x", "1"]);
    assert!(
        e.contains("You can't write against a read only replica."),
        "{e}"
    );
    let raw = common::raw_exchange(
        &mut r.raw(),
        b"SET x 1\r\nMULTI\r\nSET y 1\r\nEXEC\r\n",
        Duration::from_millis(300),
    );
    assert_eq!(
        String::from_utf8_lossy(&raw),
        "-READONLY You can't write against a read only replica.\r\n+OK\r\n-READONLY You can't write against a read only replica.\r\n-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    // Scripts: a write inside one is refused as Redis refuses it; a script with flags
    // that may write does not run; reads run.
    let e = run_text(&mut rc, &["EVAL", "return redis.call('set','x','1')", "0"]);
    assert!(
        e.contains("You can't write against a read only replica. script:"),
        "{e}"
    );
    let e = run_text(&mut rc, &["EVAL", "#!lua\nreturn 1", "0"]);
    assert!(
        e.contains("Can not run script with write flag on readonly replica"),
        "{e}"
    );
    let v = run_text(
        &mut rc,
        &["EVAL", "return redis.call('get','pre:s:1')", "0"],
    );
    assert!(v.contains("v1-tail"), "{v}");
    assert!(run_text(&mut rc, &["GET", "pre:s:1"]).contains("v1-tail"));
    // A cut link resumes with a partial resynchronization.
    let full_before = info_field(&mut mc, "stats", "sync_full").unwrap();
    let partial_before: u64 = info_field(&mut mc, "stats", "sync_partial_ok")
        .unwrap()
        .parse()
        .unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query(&mut mc)
        .unwrap();
    assert_eq!(killed, 1);
    load(&mut mc, "cut", 50);
    wait_caught_up(&mut mc, &mut rc);
    assert_same(&mut mc, &mut rc);
    assert_eq!(
        info_field(&mut mc, "stats", "sync_full").unwrap(),
        full_before,
        "no second full sync"
    );
    let partial_after: u64 = info_field(&mut mc, "stats", "sync_partial_ok")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(partial_after, partial_before + 1, "one partial resync");
    // Keys the master expires go on the replica too (the master's DEL).
    let _: () = redis::cmd("SET")
        .arg("short")
        .arg("1")
        .arg("PX")
        .arg(50)
        .query(&mut mc)
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let _: Value = mc.get("short").unwrap();
    wait_caught_up(&mut mc, &mut rc);
    assert_same(&mut mc, &mut rc);
    // Promotion: writable, with the data.
    let ok: String = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut rc)
        .unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(
        info_field(&mut rc, "replication", "role").as_deref(),
        Some("master")
    );
    let _: () = rc.set("x", "1").unwrap();
    assert!(run_text(&mut rc, &["GET", "post:s:7"]).contains("v7-tail"));
    let old_id = info_field(&mut mc, "replication", "master_replid").unwrap();
    assert_eq!(
        info_field(&mut rc, "replication", "master_replid2"),
        Some(old_id)
    );
    let raw = common::raw_exchange(
        &mut r.raw(),
        b"REPLICAOF localhost 70000\r\nREPLICAOF localhost x\r\n",
        Duration::from_millis(300),
    );
    assert_eq!(
        String::from_utf8_lossy(&raw),
        "-ERR Invalid master port\r\n-ERR Invalid master port\r\n"
    );
}

#[test]
fn a_disk_based_sync_works_and_a_restarted_replica_resumes_with_a_partial_sync() {
    let Some(m) = RedisServer::start_with(&["--repl-diskless-sync", "no"]) else {
        eprintln!("SKIPPED: redis-server is not installed");
        return;
    };
    let mut mc = m.conn();
    load(&mut mc, "a", 200);
    let target = format!("127.0.0.1 {}", m.port);
    let mut r = Server::start(&["--replicaof", &target]);
    let mut rc = r.conn();
    wait_caught_up(&mut mc, &mut rc);
    assert_same(&mut mc, &mut rc);
    load(&mut mc, "b", 100);
    wait_caught_up(&mut mc, &mut rc);
    // kill -9 of the replica, writes meanwhile, restart: it continues from its position.
    r.kill();
    load(&mut mc, "c", 50);
    let full_before = info_field(&mut mc, "stats", "sync_full").unwrap();
    r.restart();
    let mut rc = r.conn();
    wait_caught_up(&mut mc, &mut rc);
    assert_same(&mut mc, &mut rc);
    assert_eq!(
        info_field(&mut mc, "stats", "sync_full").unwrap(),
        full_before,
        "the restarted replica resumed with a partial sync"
    );
}

#[test]
fn a_replica_killed_while_loading_never_serves_the_partial_data_set() {
    let Some(m) = RedisServer::start_with(&[
        "--enable-debug-command",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]) else {
        eprintln!("SKIPPED: redis-server is not installed");
        return;
    };
    let mut mc = m.conn();
    let _: () = redis::cmd("DEBUG")
        .arg("POPULATE")
        .arg(300_000)
        .arg("key")
        .arg(64)
        .query(&mut mc)
        .unwrap();
    let mut r = Server::start(&[]);
    let mut rc = r.conn();
    let _: () = rc.set("mine", "kept").unwrap();
    let _: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(m.port)
        .query(&mut rc)
        .unwrap();
    // INFO answers while loading; once the load is under way, the process dies.
    wait_for("the load to start", Duration::from_secs(60), || {
        info_field(&mut rc, "persistence", "loading").as_deref() == Some("1")
    });
    std::thread::sleep(Duration::from_millis(100));
    let loading = info_field(&mut rc, "persistence", "loading");
    r.kill();
    assert_eq!(
        loading.as_deref(),
        Some("1"),
        "the load ended before the kill: the test proves nothing (make the data set bigger)"
    );
    // Started again as a master (REPLICAOF was not written to a configuration): it serves
    // either nothing or its whole old data set, never a part of the master's.
    r.restart();
    let mut rc = r.conn();
    let n: i64 = redis::cmd("DBSIZE").query(&mut rc).unwrap();
    let mine: Option<String> = rc.get("mine").unwrap();
    assert!(
        n == 0 || (n == 1 && mine.as_deref() == Some("kept")),
        "a restarted replica serves {n} keys of a load cut short"
    );
    assert_eq!(
        info_field(&mut rc, "persistence", "loading").as_deref(),
        Some("0")
    );
    // And it is writable, and starts a synchronization afresh when asked.
    let _: () = rc.set("after", "1").unwrap();
    let _: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(m.port)
        .query(&mut rc)
        .unwrap();
    wait_caught_up(&mut mc, &mut rc);
    let n: i64 = redis::cmd("DBSIZE").query(&mut rc).unwrap();
    assert_eq!(n, 300_000);
}

/// A fake master: answers the handshake, then does `then` with the socket.
fn fake_master(listener: &TcpListener, then: impl FnOnce(&mut std::net::TcpStream)) {
    let (mut s, _) = listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut rd = BufReader::new(s.try_clone().unwrap());
    // PING, REPLCONF, REPLCONF, then PSYNC.
    for reply in ["+PONG\r\n", "+OK\r\n", "+OK\r\n"] {
        read_command(&mut rd);
        s.write_all(reply.as_bytes()).unwrap();
    }
    let psync = read_command(&mut rd);
    assert_eq!(psync[0], "PSYNC");
    then(&mut s);
}

fn read_command(rd: &mut impl BufRead) -> Vec<String> {
    let mut line = String::new();
    rd.read_line(&mut line).unwrap();
    let n: usize = line.trim()[1..].parse().unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        line.clear();
        rd.read_line(&mut line).unwrap();
        let len: usize = line.trim()[1..].parse().unwrap();
        let mut b = vec![0; len + 2];
        rd.read_exact(&mut b).unwrap();
        out.push(String::from_utf8_lossy(&b[..len]).into_owned());
    }
    out
}

#[test]
fn a_hostile_master_never_crashes_the_replica_nor_costs_its_data() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut r = Server::start(&[]);
    let mut rc = r.conn();
    let _: () = rc.set("mine", "kept").unwrap();
    let _: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(port)
        .query(&mut rc)
        .unwrap();
    let id = "a".repeat(40);
    let full = format!("+FULLRESYNC {id} 0\r\n");
    // 1: a payload cut short.
    fake_master(&listener, |s| {
        s.write_all(full.as_bytes()).unwrap();
        s.write_all(b"\n\n$1000\r\nREDIS0010").unwrap();
    });
    // 2: a whole payload of garbage (stays open: the replica gives up on it).
    fake_master(&listener, |s| {
        s.write_all(full.as_bytes()).unwrap();
        s.write_all(b"$20\r\nthis is not an rdb!!").unwrap();
        std::thread::sleep(Duration::from_millis(300));
    });
    // 3: a diskless payload, truncated RDB before its mark.
    fake_master(&listener, |s| {
        s.write_all(full.as_bytes()).unwrap();
        let mark = "b".repeat(40);
        s.write_all(format!("$EOF:{mark}\r\nREDIS0010\x7a\x05hello{mark}").as_bytes())
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
    });
    // 4: garbage instead of the PSYNC answer, then a stream of garbage.
    fake_master(&listener, |s| {
        s.write_all(b"*garbage\r\n\x00\x01\x02\r\n").unwrap();
    });
    // 5: a link down, with stale data refused when asked.
    fake_master(&listener, |_| {});
    assert!(r.alive(), "the replica survived every payload");
    let v: String = rc.get("mine").unwrap();
    assert_eq!(v, "kept", "no bad payload touched the data set");
    assert_eq!(
        info_field(&mut rc, "replication", "master_link_status").as_deref(),
        Some("down")
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("replica-serve-stale-data")
        .arg("no")
        .query(&mut rc)
        .unwrap();
    let e = run_text(&mut rc, &["GET", "mine"]);
    assert!(
        e.contains("Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
        "{e}"
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("replica-serve-stale-data")
        .arg("yes")
        .query(&mut rc)
        .unwrap();
    let _: String = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut rc)
        .unwrap();
    let _: () = rc.set("after", "1").unwrap();
    assert!(r.alive());
}
