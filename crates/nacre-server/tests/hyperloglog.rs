//! HyperLogLog against redis-server 7.0: the same elements give byte-identical values (sparse
//! and dense), the same counts, merges and sparse opcodes, and the same errors.

mod common;

use common::{RedisServer, Server};
use redis::Connection;

fn pfadd(c: &mut Connection, key: &str, items: &[String]) -> i64 {
    let mut cmd = redis::cmd("PFADD");
    cmd.arg(key);
    for i in items {
        cmd.arg(i);
    }
    cmd.query(c).unwrap()
}

/// A session's observable results: replies, and the raw values.
fn session(c: &mut Connection) -> Vec<String> {
    let mut out = Vec::new();
    let raw = |c: &mut Connection, key: &str, out: &mut Vec<String>| {
        let v: Vec<u8> = redis::cmd("GET").arg(key).query(c).unwrap();
        out.push(format!(
            "{key}={}",
            v.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ));
    };
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("hll-sparse-max-bytes")
        .arg("3000")
        .query(c)
        .unwrap();
    let none: Vec<String> = Vec::new();
    out.push(format!("{}", pfadd(c, "empty", &none)));
    raw(c, "empty", &mut out);
    // Small sets stay sparse; adding the same again changes nothing.
    for (key, n) in [("a", 10usize), ("b", 300), ("c", 2000), ("d", 20000)] {
        let items: Vec<String> = (0..n).map(|i| format!("{key}-{i}")).collect();
        for chunk in items.chunks(97) {
            out.push(format!("{}", pfadd(c, key, chunk)));
        }
        out.push(format!("{}", pfadd(c, key, &items[..n.min(5)])));
        raw(c, key, &mut out);
        let n: i64 = redis::cmd("PFCOUNT").arg(key).query(c).unwrap();
        out.push(format!("count {key} {n}"));
        // The count is cached in the value.
        raw(c, key, &mut out);
        let enc: String = redis::cmd("PFDEBUG")
            .arg("ENCODING")
            .arg(key)
            .query(c)
            .unwrap();
        out.push(enc);
    }
    let dec: String = redis::cmd("PFDEBUG")
        .arg("DECODE")
        .arg("b")
        .query(c)
        .unwrap();
    out.push(dec);
    let n: i64 = redis::cmd("PFCOUNT")
        .arg("a")
        .arg("b")
        .arg("c")
        .arg("missing")
        .query(c)
        .unwrap();
    out.push(format!("union {n}"));
    // Merges: all sparse stays sparse; with a dense source the target turns dense.
    let _: () = redis::cmd("PFMERGE")
        .arg("m1")
        .arg("a")
        .arg("b")
        .query(c)
        .unwrap();
    raw(c, "m1", &mut out);
    let _: () = redis::cmd("PFMERGE")
        .arg("m2")
        .arg("c")
        .arg("d")
        .query(c)
        .unwrap();
    raw(c, "m2", &mut out);
    let _: () = redis::cmd("PFMERGE").arg("a").arg("b").query(c).unwrap();
    raw(c, "a", &mut out);
    // A smaller sparse limit turns values dense sooner.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("hll-sparse-max-bytes")
        .arg("100")
        .query(c)
        .unwrap();
    let items: Vec<String> = (0..100).map(|i| format!("e{i}")).collect();
    pfadd(c, "small", &items);
    raw(c, "small", &mut out);
    let conv: i64 = redis::cmd("PFDEBUG")
        .arg("TODENSE")
        .arg("a")
        .query(c)
        .unwrap();
    out.push(format!("todense {conv}"));
    raw(c, "a", &mut out);
    // Errors.
    let _: () = redis::cmd("SET")
        .arg("str")
        .arg("not an hll")
        .query(c)
        .unwrap();
    let _: () = redis::cmd("LPUSH").arg("list").arg("x").query(c).unwrap();
    for args in [
        vec!["PFADD", "str", "x"],
        vec!["PFCOUNT", "str"],
        vec!["PFCOUNT", "list"],
        vec!["PFMERGE", "m3", "str"],
        vec!["PFDEBUG", "DECODE", "d"],
        vec!["PFDEBUG", "GETREG", "nosuch"],
        vec!["PFDEBUG", "BOGUS", "a"],
    ] {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let r: redis::RedisResult<redis::Value> = cmd.query(c);
        out.push(match r {
            Ok(v) => format!("{v:?}"),
            Err(e) => format!("error {e}"),
        });
    }
    // A corrupted sparse value is detected.
    let mut bad: Vec<u8> = redis::cmd("GET").arg("b").query(c).unwrap();
    bad.truncate(bad.len() - 2);
    let _: () = redis::cmd("SET").arg("bad").arg(bad).query(c).unwrap();
    let r: redis::RedisResult<i64> = redis::cmd("PFCOUNT").arg("bad").query(c);
    out.push(format!("{:?}", r.map_err(|e| e.to_string())));
    out
}

#[test]
fn values_counts_and_merges_match_redis() {
    let nacre = Server::start(&[]);
    let ours = session(&mut nacre.conn());
    // Without Redis, the counts are still checked against the true cardinalities.
    let count = |k: &str| -> i64 {
        ours.iter()
            .find_map(|l| l.strip_prefix(&format!("count {k} ")))
            .unwrap()
            .parse()
            .unwrap()
    };
    for (k, n) in [("a", 10i64), ("b", 300), ("c", 2000), ("d", 20000)] {
        assert!((count(k) - n).abs() * 50 <= n.max(50), "{k}: {}", count(k));
    }
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server is not installed; compared with nothing");
        return;
    };
    let theirs = session(&mut redis.conn());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a, b, "step {i} differs (nacre first)");
    }
    assert_eq!(ours.len(), theirs.len());
}

#[test]
fn pfselftest_passes_and_others_are_served_meanwhile() {
    let nacre = Server::start(&[]);
    let mut c = nacre.conn();
    let mut other = nacre.conn();
    let t =
        std::thread::spawn(move || -> String { redis::cmd("PFSELFTEST").query(&mut c).unwrap() });
    // The checks run apart from the serving threads: another client is answered meanwhile.
    let pong: String = redis::cmd("PING").query(&mut other).unwrap();
    assert_eq!(pong, "PONG");
    assert_eq!(t.join().unwrap(), "OK");
}
