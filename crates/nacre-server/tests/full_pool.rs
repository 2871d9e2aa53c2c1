//! A pool that live data fills, through real sockets: commands that add data get Redis's
//! `-OOM` reply, commands that remove data always run and make the server writable again,
//! reads and `DBSIZE` keep working, and so does a restart.

mod common;

use std::time::{Duration, Instant};

use common::{RedisServer, Server};

const OOM: &str = "command not allowed when used memory > 'maxmemory'.";

fn fill(c: &mut redis::Connection, from: u64) -> (u64, redis::RedisError) {
    let v = vec![b'x'; 10_000];
    let mut i = from;
    loop {
        match redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(&v)
            .query::<()>(c)
        {
            Ok(()) => i += 1,
            Err(e) => return (i - from, e),
        }
        assert!(i - from < 100_000, "the pool never filled");
    }
}

fn is_oom(e: &redis::RedisError) -> bool {
    e.to_string().contains(OOM)
}

#[test]
fn a_full_pool_refuses_what_adds_data_and_takes_what_frees_it() {
    let mut s = Server::start(&["--pmem-size", "64mb"]);
    let mut c = s.conn();
    let t = Instant::now();
    let (n, e) = fill(&mut c, 0);
    assert!(is_oom(&e), "the write that did not fit: {e}");
    assert!(n > 1000, "only {n} SETs fit");
    assert!(t.elapsed() < Duration::from_secs(60));
    // Reads and DBSIZE go on; the failed SET counts nothing.
    let size: u64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
    assert_eq!(size, n);
    let v: Vec<u8> = redis::cmd("GET").arg("k1").query(&mut c).expect("get");
    assert_eq!(v.len(), 10_000);
    // What adds data is refused at once, in MULTI too; what removes it runs.
    let e = redis::cmd("SET")
        .arg("new")
        .arg("1")
        .query::<()>(&mut c)
        .expect_err("refused");
    assert!(is_oom(&e), "{e}");
    let mut pipe = redis::pipe();
    pipe.cmd("MULTI")
        .cmd("APPEND")
        .arg("k2")
        .arg("x")
        .cmd("EXEC");
    let e = pipe.query::<()>(&mut c).expect_err("refused");
    assert!(e.to_string().contains("OOM"), "{e}");
    let del: u64 = redis::cmd("DEL").arg("k1").query(&mut c).expect("del");
    assert_eq!(del, 1);
    // A restart of a full pool starts, and so does a clean shutdown's. After the SIGKILL the
    // counts come from their records: the SET that failed for room took its change back
    // out of its count slot before the DEL took that slot (C2 in src/store/counts.rs).
    drop(c);
    s.restart();
    let mut c = s.conn();
    let size: u64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
    assert_eq!(size, n - 1);
    let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("flushall");
    let size: u64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
    assert_eq!(size, 0);
    // The dropped keys are deleted in the background, at once while the pool is full: a SET
    // refused meanwhile succeeds within moments, and the pool fills again.
    let t = Instant::now();
    loop {
        match redis::cmd("SET").arg("first").arg("1").query::<()>(&mut c) {
            Ok(()) => break,
            Err(e) if is_oom(&e) && t.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("SET after FLUSHALL, {:?} later: {e}", t.elapsed()),
        }
    }
    eprintln!("writable {:?} after FLUSHALL", t.elapsed());
    std::thread::sleep(Duration::from_secs(1));
    let (filled, _) = fill(&mut c, 0);
    let again = filled + 1;
    assert!(again > n / 2, "{again} SETs fit after FLUSHALL, {n} before");
    let r = redis::cmd("SHUTDOWN").query::<()>(&mut c);
    assert!(r.is_err(), "SHUTDOWN answers nothing");
    let status = s.wait_exit(Duration::from_secs(30)).expect("exited");
    assert!(
        status.success(),
        "a clean shutdown of a full pool: {status:?}"
    );
    s.restart();
    let mut c = s.conn();
    let size: u64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
    assert_eq!(size, again);
}

#[test]
fn commands_that_add_data_are_the_ones_redis_flags_denyoom() {
    let nacre = Server::start(&[]);
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server is not installed; compared with nothing");
        return;
    };
    let mut ours = nacre.conn();
    let mut theirs = redis.conn();
    let all: Vec<redis::Value> = redis::cmd("COMMAND").query(&mut ours).expect("command");
    let flags = |v: &redis::Value| -> (String, bool) {
        let redis::Value::Array(parts) = v else {
            panic!("{v:?}")
        };
        let name = match &parts[0] {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            redis::Value::SimpleString(s) => s.clone(),
            other => panic!("{other:?}"),
        };
        let redis::Value::Array(f) = &parts[2] else {
            panic!("{parts:?}")
        };
        let denyoom = f
            .iter()
            .any(|x| matches!(x, redis::Value::SimpleString(s) if s == "denyoom"));
        (name, denyoom)
    };
    let mut wrong = Vec::new();
    for c in &all {
        let (name, ours) = flags(c);
        let info: Vec<redis::Value> = redis::cmd("COMMAND")
            .arg("INFO")
            .arg(&name)
            .query(&mut theirs)
            .expect("command info");
        if let Some(v @ redis::Value::Array(_)) = info.first() {
            let (_, theirs) = flags(v);
            if ours != theirs {
                wrong.push((name, ours, theirs));
            }
        }
    }
    assert!(wrong.is_empty(), "denyoom differs: {wrong:?}");
}
