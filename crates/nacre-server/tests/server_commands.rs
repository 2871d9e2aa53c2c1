//! Server-level behaviour: checkpoints, expiry across restarts, the active expire cycle,
//! lazy cleanup of deleted collections, CONFIG, CLIENT, MONITOR, SLOWLOG, COMMAND, HELLO,
//! INFO, maxclients, and the stock redis-cli and redis-benchmark.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use common::{raw_exchange, run, Server};
use redis::Value;

fn info(c: &mut redis::Connection, section: &str, field: &str) -> String {
    let text: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}:\n{text}"))
        .trim()
        .to_string()
}

#[test]
fn save_writes_a_checkpoint_that_opens_as_a_data_directory() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    for i in 0..200 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("a")
        .arg(1)
        .arg("b")
        .arg(2)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("ttl")
        .arg("x")
        .arg("EX")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    let before: i64 = redis::cmd("LASTSAVE").query(&mut c).unwrap();
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    // Writes after the checkpoint are not in it.
    let _: () = redis::cmd("SET").arg("after").arg(1).query(&mut c).unwrap();
    let after: i64 = redis::cmd("LASTSAVE").query(&mut c).unwrap();
    assert!(after >= before);
    let cp = s.dir.join("checkpoint");
    let copy = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&cp).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), copy.path().join(e.file_name())).unwrap();
    }
    let s2 = Server::start_in(copy.path(), &[]);
    let mut c2 = s2.conn();
    let n: i64 = redis::cmd("DBSIZE").query(&mut c2).unwrap();
    assert_eq!(n, 202);
    let v: i64 = redis::cmd("GET").arg("k77").query(&mut c2).unwrap();
    assert_eq!(v, 77);
    let h: i64 = redis::cmd("HGET").arg("h").arg("b").query(&mut c2).unwrap();
    assert_eq!(h, 2);
    let t: i64 = redis::cmd("TTL").arg("ttl").query(&mut c2).unwrap();
    assert!(t > 900, "{t}");
    let a: Option<i64> = redis::cmd("GET").arg("after").query(&mut c2).unwrap();
    assert_eq!(a, None);
    // BGSAVE answers at once and finishes in the background.
    let r: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    assert_eq!(r, "Background saving started");
    let t = Instant::now();
    while info(&mut c, "persistence", "rdb_bgsave_in_progress") == "1" {
        assert!(t.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info(&mut c, "persistence", "rdb_last_bgsave_status"), "ok");
}

#[test]
fn expiry_survives_restart_and_the_active_cycle_deletes_unread_keys() {
    let mut s = Server::start(&[]);
    let mut c = s.conn();
    let _: () = redis::cmd("SET")
        .arg("long")
        .arg("x")
        .arg("EX")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("soon")
        .arg("x")
        .arg("PX")
        .arg(300)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("hsoon")
        .arg("f")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("PEXPIRE")
        .arg("hsoon")
        .arg(300)
        .query(&mut c)
        .unwrap();
    for i in 0..50 {
        let _: () = redis::cmd("SET")
            .arg(format!("e{i}"))
            .arg("x")
            .arg("PX")
            .arg(100)
            .query(&mut c)
            .unwrap();
    }
    s.restart();
    let mut c = s.conn();
    let t: i64 = redis::cmd("TTL").arg("long").query(&mut c).unwrap();
    assert!(t > 990, "{t}");
    let pt: i64 = redis::cmd("PTTL").arg("soon").query(&mut c).unwrap();
    assert!(pt <= 300, "{pt}");
    std::thread::sleep(Duration::from_millis(400));
    // Never read: the active cycle deletes them.
    let t = Instant::now();
    loop {
        let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
        if n == 1 {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "DBSIZE still {n}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let expired: i64 = info(&mut c, "stats", "expired_keys").parse().unwrap();
    assert!(expired >= 52, "{expired}");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    assert_eq!(keys, vec!["long".to_string()]);
}

#[test]
fn deleting_a_large_hash_is_constant_time_and_its_fields_are_cleaned_later() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let fields = 20_000;
    for chunk in (0..fields).collect::<Vec<_>>().chunks(1000) {
        let mut cmd = redis::cmd("HSET");
        cmd.arg("big");
        for f in chunk {
            cmd.arg(format!("field{f}")).arg("value");
        }
        let _: i64 = cmd.query(&mut c).unwrap();
    }
    let n: i64 = redis::cmd("HLEN").arg("big").query(&mut c).unwrap();
    assert_eq!(n, fields);
    let t = Instant::now();
    let d: i64 = redis::cmd("DEL").arg("big").query(&mut c).unwrap();
    let del_time = t.elapsed();
    assert_eq!(d, 1);
    assert!(
        del_time < Duration::from_millis(100),
        "DEL took {del_time:?}"
    );
    let _: () = redis::cmd("HSET")
        .arg("big")
        .arg("new")
        .arg("1")
        .query(&mut c)
        .unwrap();
    let all: Vec<String> = redis::cmd("HKEYS").arg("big").query(&mut c).unwrap();
    assert_eq!(all, vec!["new".to_string()]);
    let t = Instant::now();
    loop {
        let cleaned: i64 = info(&mut c, "nacre", "old_version_records_deleted")
            .parse()
            .unwrap();
        if cleaned >= fields {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "cleaned {cleaned}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let all: Vec<String> = redis::cmd("HKEYS").arg("big").query(&mut c).unwrap();
    assert_eq!(all, vec!["new".to_string()]);
}

/// `CONFIG SET name value` fails with an error containing `why`.
fn config_set_refused(c: &mut redis::Connection, name: &str, value: &str, why: &str) {
    let e: redis::RedisResult<()> = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(c);
    let text = e.expect_err("CONFIG SET refused").to_string();
    assert!(text.contains(why), "CONFIG SET {name} {value}: {text}");
}

#[test]
fn config_get_set_and_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("nacre.conf");
    std::fs::write(&conf, "# a comment\nmaxclients 100\n").unwrap();
    let data = tempfile::tempdir().unwrap();
    let s = Server::start_in(data.path(), &[]);
    drop(s);
    let port = common::free_port();
    // Killed when the test ends, failed or not: a server left running would hold its port.
    struct Reaped(std::process::Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _child = Reaped(
        std::process::Command::new(env!("CARGO_BIN_EXE_nacre-server"))
            .arg(&conf)
            .args([
                "--port",
                &port.to_string(),
                "--pmem-backend",
                "emulated",
                "--pmem-size",
                "64mb",
                "--loglevel",
                "warning",
                "--dir",
            ])
            .arg(data.path())
            .spawn()
            .unwrap(),
    );
    common::wait_ready(port);
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxclients")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, vec!["maxclients", "100"]);
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("slowlog-*")
        .query(&mut c)
        .unwrap();
    assert_eq!(v.len(), 4);
    // No append-only file: every acknowledged write is durable in the pool already.
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, vec!["appendonly", "no"]);
    // Redis's other parameters: kept and shown with Redis's checks, immutable and protected
    // ones refused as Redis refuses them.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendonly")
        .arg("yes")
        .arg("maxmemory")
        .arg("1mb")
        .arg("slave-read-only")
        .arg("no")
        .query(&mut c)
        .unwrap();
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .arg("maxmemory")
        .arg("replica-read-only")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        v,
        vec![
            "appendonly",
            "yes",
            "maxmemory",
            "1048576",
            "replica-read-only",
            "no"
        ]
    );
    config_set_refused(
        &mut c,
        "appendonly",
        "maybe",
        "argument must be 'yes' or 'no'",
    );
    config_set_refused(
        &mut c,
        "maxmemory-policy",
        "lru",
        "must be one of the following",
    );
    config_set_refused(&mut c, "daemonize", "yes", "can't set immutable config");
    config_set_refused(&mut c, "dbfilename", "x.rdb", "can't set protected config");
    let all: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("*")
        .query(&mut c)
        .unwrap();
    assert!(all.len() / 2 >= 170, "{} parameters", all.len() / 2);
    assert!(
        !all.contains(&"watchdog-period".to_string()),
        "hidden ones stay hidden"
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg("50")
        .query(&mut c)
        .unwrap();
    // `port` and `bind` listen anew (tests/listen.rs); where the data lives is fixed.
    config_set_refused(&mut c, "dir", "/elsewhere", "can't set immutable config");
    config_set_refused(&mut c, "pmem-size", "1gb", "can't set immutable config");
    let e: redis::RedisResult<()> = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg("abc")
        .query(&mut c);
    assert!(e.is_err());
    config_set_refused(&mut c, "nosuch", "1", "Unknown option");
    config_set_refused(&mut c, "user", "bob on", "Unknown option");
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("bob")
        .arg("on")
        .arg("nopass")
        .arg("~b*")
        .arg("+@read")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("CONFIG").arg("REWRITE").query(&mut c).unwrap();
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(
        text.contains("# a comment") && text.contains("maxclients 50"),
        "{text}"
    );
    // Users go to the file, as Redis writes them (without an aclfile).
    assert!(
        text.contains("user bob on nopass ~b* resetchannels -@all +@read")
            && text.contains("user default on nopass ~* &* +@all"),
        "{text}"
    );
    // The file with its `user` lines reads back.
    let reread = nacre_server::config::Config::from_args(&[conf.display().to_string()]).unwrap();
    assert_eq!(reread.users.len(), 2);
}

#[test]
fn clients_are_listed_named_and_killed() {
    let s = Server::start(&[]);
    let mut a = s.conn();
    let mut b = s.conn();
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("alpha")
        .query(&mut a)
        .unwrap();
    let name: String = redis::cmd("CLIENT").arg("GETNAME").query(&mut a).unwrap();
    assert_eq!(name, "alpha");
    let e: redis::RedisResult<()> = redis::cmd("CLIENT").arg("SETNAME").arg("a b").query(&mut a);
    assert!(e.is_err());
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut b).unwrap();
    assert!(list.contains("name=alpha"), "{list}");
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut a).unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query(&mut b)
        .unwrap();
    assert_eq!(killed, 1);
    std::thread::sleep(Duration::from_millis(100));
    let r: redis::RedisResult<String> = redis::cmd("PING").query(&mut a);
    assert!(r.is_err(), "a killed client is disconnected");
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut b).unwrap();
    assert!(!list.contains("name=alpha"), "{list}");
}

#[test]
fn maxclients_refuses_the_extra_client() {
    let s = Server::start(&["--maxclients", "2"]);
    // The connections that checked the server was up may take a moment to go.
    let (mut a, mut b) = loop {
        let (mut a, mut b) = (s.raw(), s.raw());
        let pa = raw_exchange(&mut a, b"PING\r\n", Duration::from_millis(200));
        let pb = raw_exchange(&mut b, b"PING\r\n", Duration::from_millis(200));
        if pa == b"+PONG\r\n" && pb == b"+PONG\r\n" {
            break (a, b);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut c = s.raw();
    let got = raw_exchange(&mut c, b"PING\r\n", Duration::from_millis(500));
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR max number of clients reached\r\n"
    );
    // The first two are still served.
    for x in [&mut a, &mut b] {
        assert_eq!(
            raw_exchange(x, b"PING\r\n", Duration::from_millis(200)),
            b"+PONG\r\n"
        );
    }
}

#[test]
fn monitor_slowlog_command_hello_info() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    // MONITOR streams other clients' commands.
    let mut m = s.raw();
    m.write_all(b"MONITOR\r\n").unwrap();
    let mut r = BufReader::new(m.try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert_eq!(line, "+OK\r\n");
    let _: () = redis::cmd("SET")
        .arg("mon")
        .arg("itor")
        .query(&mut c)
        .unwrap();
    line.clear();
    r.read_line(&mut line).unwrap();
    assert!(line.contains("\"SET\" \"mon\" \"itor\""), "{line}");
    // SLOWLOG records commands slower than the threshold.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg("0")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("slow")
        .arg("1")
        .query(&mut c)
        .unwrap();
    let n: i64 = redis::cmd("SLOWLOG").arg("LEN").query(&mut c).unwrap();
    assert!(n >= 1);
    let entries: Vec<Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(1)
        .query(&mut c)
        .unwrap();
    assert_eq!(entries.len(), 1);
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut c).unwrap();
    // COMMAND.
    let count: i64 = redis::cmd("COMMAND").arg("COUNT").query(&mut c).unwrap();
    assert!(count > 90, "{count}");
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("MSET")
        .arg("a")
        .arg("1")
        .arg("b")
        .arg("2")
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, vec!["a", "b"]);
    let info: Vec<Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("get")
        .query(&mut c)
        .unwrap();
    assert_eq!(info.len(), 1);
    // HELLO 3 switches to RESP3 and answers with a map.
    let mut raw = s.raw();
    let got = raw_exchange(
        &mut raw,
        b"HELLO 3\r\nHGETALL nosuch\r\nGET nosuch\r\n",
        Duration::from_millis(300),
    );
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("%7\r\n"), "{text}");
    assert!(text.ends_with("%0\r\n_\r\n"), "{text}");
    // INFO has the nacre section with the backend and what a write survives.
    let text: String = redis::cmd("INFO").arg("nacre").query(&mut c).unwrap();
    assert!(
        text.contains("backend:emulated") && text.contains("write_survives:"),
        "{text}"
    );
}

#[test]
fn redis_cli_and_redis_benchmark_drive_the_server() {
    let have = |b: &str| {
        std::process::Command::new(b)
            .arg("--version")
            .output()
            .is_ok()
    };
    if !have("redis-cli") || !have("redis-benchmark") {
        eprintln!("redis-cli or redis-benchmark not installed: skipped");
        return;
    }
    let s = Server::start(&[]);
    let p = s.port.to_string();
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &p, "SET", "cli", "works"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "OK");
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &p, "GET", "cli"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "works");
    let out = std::process::Command::new("redis-benchmark")
        .args([
            "-p",
            &p,
            "-t",
            "set,get,incr,hset,mset",
            "-n",
            "2000",
            "-c",
            "10",
            "-q",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for t in ["SET", "GET", "INCR", "HSET", "MSET"] {
        assert!(
            text.lines()
                .any(|l| l.contains(t) && l.contains("requests per second")),
            "{t} missing: {text}"
        );
    }
    let n: i64 = redis::cmd("GET")
        .arg("counter:__rand_int__")
        .query(&mut s.conn())
        .unwrap();
    assert_eq!(n, 2000);
}

#[test]
fn key_counts_after_a_crash_include_writes_made_while_counting() {
    let mut s = Server::start(&[]);
    let mut c = s.conn();
    for chunk in (0..30_000).collect::<Vec<i32>>().chunks(1000) {
        let mut cmd = redis::cmd("MSET");
        for i in chunk {
            cmd.arg(format!("k{i}")).arg(i);
        }
        let _: () = cmd.query(&mut c).unwrap();
    }
    let _: () = redis::cmd("SET")
        .arg("db1key")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("MOVE")
        .arg("db1key")
        .arg(1)
        .query(&mut c)
        .unwrap();
    s.restart();
    let mut c = s.conn();
    // Right after the start, while keys may still be counted: 10 new keys, 5 deleted.
    for i in 0..10 {
        let _: () = redis::cmd("SET")
            .arg(format!("new{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    let d: i64 = redis::cmd("DEL")
        .arg("k1")
        .arg("k2")
        .arg("k3")
        .arg("k4")
        .arg("k5")
        .query(&mut c)
        .unwrap();
    assert_eq!(d, 5);
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 30_000 + 10 - 5);
    let _: () = redis::cmd("SELECT").arg(1).query(&mut c).unwrap();
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 1);
    // A clean shutdown records the counts; the next start reads them.
    let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query(&mut c);
    s.wait_exit(Duration::from_secs(20)).expect("exits");
    s.restart();
    let mut c = s.conn();
    assert_eq!(info(&mut c, "persistence", "nacre_last_start_clean"), "1");
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 30_005);
}

#[test]
fn random_draws_reach_every_member_and_spop_empties_a_set() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let members: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
    let _: () = redis::cmd("SADD")
        .arg("s")
        .arg(&members)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg(
            members
                .iter()
                .flat_map(|m| [m.clone(), "v".into()])
                .collect::<Vec<_>>(),
        )
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg("z")
        .arg(
            members
                .iter()
                .enumerate()
                .flat_map(|(i, m)| [i.to_string(), m.clone()])
                .collect::<Vec<_>>(),
        )
        .query(&mut c)
        .unwrap();
    for (cmd, key) in [
        ("SRANDMEMBER", "s"),
        ("HRANDFIELD", "h"),
        ("ZRANDMEMBER", "z"),
    ] {
        let got: Vec<String> = redis::cmd(cmd).arg(key).arg(-4000).query(&mut c).unwrap();
        assert_eq!(got.len(), 4000);
        let seen: std::collections::HashSet<&String> = got.iter().collect();
        assert_eq!(seen.len(), 40, "{cmd} never drew some members");
        let d: Vec<String> = redis::cmd(cmd).arg(key).arg(7).query(&mut c).unwrap();
        let ds: std::collections::HashSet<&String> = d.iter().collect();
        assert_eq!(
            (d.len(), ds.len()),
            (7, 7),
            "{cmd} with a positive count repeated a member"
        );
    }
    // Single draws (one seek each) reach every member too.
    let mut seen = std::collections::HashSet::new();
    for _ in 0..3000 {
        let m: String = redis::cmd("SRANDMEMBER").arg("s").query(&mut c).unwrap();
        seen.insert(m);
    }
    assert_eq!(
        seen.len(),
        40,
        "single SRANDMEMBER draws never reached some members"
    );
    let mut popped = std::collections::HashSet::new();
    loop {
        let v: Option<String> = redis::cmd("SPOP").arg("s").query(&mut c).unwrap();
        match v {
            Some(m) => assert!(popped.insert(m), "SPOP returned a member twice"),
            None => break,
        }
    }
    assert_eq!(popped.len(), 40);
    let n: i64 = redis::cmd("EXISTS").arg("s").query(&mut c).unwrap();
    assert_eq!(n, 0);
}

#[test]
fn info_memory_reports_dram_apart_from_the_pool() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let value = vec![b'v'; 4000];
    for i in 0..5000 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(&value)
            .query(&mut c)
            .unwrap();
    }
    // Every field from one INFO reply (resident memory moves between two).
    let text: String = redis::cmd("INFO").arg("memory").query(&mut c).unwrap();
    let num = |f: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{f}:")))
            .unwrap_or_else(|| panic!("no {f} in INFO memory:\n{text}"))
            .trim()
            .parse()
            .unwrap()
    };
    let rss = num("used_memory_rss");
    let dram = num("nacre_dram_bytes");
    let pool = num("nacre_mapped_resident_bytes");
    let per_key = num("nacre_dram_bytes_per_key");
    assert!(dram > 0 && dram < rss, "dram {dram} rss {rss}");
    assert_eq!(dram + pool, rss);
    // 20 MB of values live in the pool's mapping, not in the heap.
    assert!(pool > 20_000_000, "pool resident {pool}");
    assert_eq!(per_key, dram / 5000);
    // The engine's own figures.
    let engine: String = redis::cmd("INFO").arg("nacre").query(&mut c).unwrap();
    let field = |f: &str| -> u64 {
        engine
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{f}:")))
            .unwrap_or_else(|| panic!("no {f} in INFO nacre:\n{engine}"))
            .trim()
            .parse()
            .unwrap()
    };
    assert!(field("active_memtables") >= 1, "{engine}");
    assert!(field("commit_groups") >= 1, "{engine}");
    // On `emulated` a flush commits on its own thread; the committer takes only what would
    // wait there.
    assert!(
        field("commits_via_committer") < field("commits_queued"),
        "{engine}"
    );
    assert!(field("user_bytes_written") >= 20_000_000, "{engine}");
    assert!(field("zones_free") < field("zones"), "{engine}");
    assert!(field("gi_keys") + field("memtable_bytes") > 0, "{engine}");
    assert_eq!(engine.matches("# Nacre").count(), 1, "{engine}");
}

#[test]
fn info_commandstats_and_cpu() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("k").arg("w").query(&mut c).unwrap();
    let _: redis::RedisResult<()> = redis::cmd("SET").arg("k").query(&mut c);
    let _: redis::RedisResult<i64> = redis::cmd("INCR").arg("k").query(&mut c);
    let _: redis::RedisResult<()> = redis::cmd("CONFIG").arg("GET").query(&mut c);
    let all: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut c)
        .unwrap();
    let line = |name: &str| -> String {
        all.lines()
            .find(|l| l.starts_with(&format!("cmdstat_{name}:")))
            .unwrap_or_else(|| panic!("no {name} in {all}"))
            .to_string()
    };
    assert!(line("set").starts_with("cmdstat_set:calls=2,"), "{all}");
    assert!(
        line("set").ends_with("rejected_calls=1,failed_calls=0"),
        "{all}"
    );
    assert!(
        line("incr").ends_with("rejected_calls=0,failed_calls=1"),
        "{all}"
    );
    assert!(line("config|get").contains("rejected_calls=1"), "{all}");
    let default: String = redis::cmd("INFO").query(&mut c).unwrap();
    assert!(!default.contains("cmdstat_"));
    assert!(default.contains("used_cpu_user:"));
    assert!(default.contains("master_repl_offset:0"));
    let everything: String = redis::cmd("INFO").arg("everything").query(&mut c).unwrap();
    assert!(everything.contains("cmdstat_set:"));
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    let after: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut c)
        .unwrap();
    assert!(!after.contains("cmdstat_set:"), "{after}");
}

#[test]
fn latency_monitor_events_and_histograms() {
    let s = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("latency-monitor-threshold")
        .arg(100)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("DEBUG")
        .arg("SLEEP")
        .arg("0.2")
        .query(&mut c)
        .unwrap();
    let latest: Vec<(String, i64, i64, i64)> =
        redis::cmd("LATENCY").arg("LATEST").query(&mut c).unwrap();
    assert_eq!(latest.len(), 1, "{latest:?}");
    assert_eq!(latest[0].0, "command");
    assert!((180..1000).contains(&latest[0].2), "{latest:?}");
    let history: Vec<(i64, i64)> = redis::cmd("LATENCY")
        .arg("HISTORY")
        .arg("command")
        .query(&mut c)
        .unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].0, latest[0].1);
    let graph: String = redis::cmd("LATENCY")
        .arg("GRAPH")
        .arg("command")
        .query(&mut c)
        .unwrap();
    assert!(graph.starts_with("command - high"), "{graph}");
    let doctor: String = redis::cmd("LATENCY").arg("DOCTOR").query(&mut c).unwrap();
    assert!(doctor.contains("command: 1 latency spikes"), "{doctor}");
    let none: redis::RedisResult<String> =
        redis::cmd("LATENCY").arg("GRAPH").arg("nope").query(&mut c);
    assert!(none.is_err());
    let n: i64 = redis::cmd("LATENCY").arg("RESET").query(&mut c).unwrap();
    assert_eq!(n, 1);
    let latest: Vec<redis::Value> = redis::cmd("LATENCY").arg("LATEST").query(&mut c).unwrap();
    assert!(latest.is_empty());
    // Histograms: calls and cumulative runs per power-of-two bound.
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    for _ in 0..3 {
        let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    }
    let h = run(&mut c, &[b"LATENCY", b"HISTOGRAM", b"set", b"nosuch"]);
    let Value::Array(items) = h else {
        panic!("{h:?}")
    };
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(items[0], Value::BulkString(b"set".to_vec()));
    let Value::Array(fields) = &items[1] else {
        panic!("{items:?}")
    };
    assert_eq!(fields[0], Value::BulkString(b"calls".to_vec()));
    assert_eq!(fields[1], Value::Int(3));
    let Value::Array(buckets) = &fields[3] else {
        panic!("{fields:?}")
    };
    assert_eq!(
        buckets.last(),
        Some(&Value::Int(3)),
        "cumulative: {buckets:?}"
    );
}

#[test]
fn object_idletime_and_freq_follow_uses_of_the_key() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let q = |c: &mut redis::Connection, args: &[&str]| -> redis::RedisResult<i64> {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(c)
    };
    let _: () = redis::cmd("SET")
        .arg("foo")
        .arg("bar")
        .query(&mut c)
        .unwrap();
    std::thread::sleep(Duration::from_millis(2100));
    // Commands that do not touch a key, as in Redis.
    for cmd in [
        &["TTL", "foo"][..],
        &["TYPE", "foo"],
        &["EXISTS", "foo"],
        &["PTTL", "foo"],
    ] {
        let _: redis::Value = redis::cmd(cmd[0]).arg(cmd[1]).query(&mut c).unwrap();
    }
    let idle = q(&mut c, &["OBJECT", "IDLETIME", "foo"]).unwrap();
    assert!(idle >= 2, "{idle}");
    let _: String = redis::cmd("GET").arg("foo").query(&mut c).unwrap();
    assert_eq!(q(&mut c, &["OBJECT", "IDLETIME", "foo"]).unwrap(), 0);
    let e = q(&mut c, &["OBJECT", "FREQ", "foo"]).unwrap_err();
    assert!(
        e.to_string()
            .contains("An LFU maxmemory policy is not selected"),
        "{e}"
    );
    // RESTORE ... IDLETIME sets the clock.
    let dump: Vec<u8> = redis::cmd("DUMP").arg("foo").query(&mut c).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("old")
        .arg(0)
        .arg(&dump)
        .arg("IDLETIME")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    let idle = q(&mut c, &["OBJECT", "IDLETIME", "old"]).unwrap();
    assert!((1000..=1001).contains(&idle), "{idle}");
    // Under an LFU policy: frequencies grow with uses, and idle times are not tracked.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("allkeys-lfu")
        .query(&mut c)
        .unwrap();
    let before = q(&mut c, &["OBJECT", "FREQ", "foo"]).unwrap();
    for _ in 0..200 {
        let _: String = redis::cmd("GET").arg("foo").query(&mut c).unwrap();
    }
    let after = q(&mut c, &["OBJECT", "FREQ", "foo"]).unwrap();
    assert!(after > before, "{before} -> {after}");
    let e = q(&mut c, &["OBJECT", "IDLETIME", "foo"]).unwrap_err();
    assert!(
        e.to_string()
            .contains("An LFU maxmemory policy is selected"),
        "{e}"
    );
    let _: () = redis::cmd("RESTORE")
        .arg("hot")
        .arg(0)
        .arg(&dump)
        .arg("FREQ")
        .arg(77)
        .query(&mut c)
        .unwrap();
    assert_eq!(q(&mut c, &["OBJECT", "FREQ", "hot"]).unwrap(), 77);
}

/// `INFO nacre`'s `commits_via_committer`: on `msync` every commit goes through the engine's
/// committer thread (one device flush serves the commits of many connections); on
/// `emulated` a flush commits on its own thread (the other INFO test checks that side).
#[test]
fn info_counts_the_commits_that_went_through_the_committer() {
    let s = Server::start(&["--pmem-backend", "msync"]);
    let mut c = s.conn();
    for i in 0..50 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    let queued: u64 = info(&mut c, "nacre", "commits_queued").parse().unwrap();
    let via: u64 = info(&mut c, "nacre", "commits_via_committer")
        .parse()
        .unwrap();
    assert!(queued >= 50, "{queued}");
    assert_eq!(via, queued);
}
