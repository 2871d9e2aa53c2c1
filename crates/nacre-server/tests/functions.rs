//! Functions: replies compared with redis-server 7.0 (FUNCTION LOAD/LIST/DELETE/FLUSH,
//! FCALL, FCALL_RO and their errors), libraries moved both ways between redis-server and
//! nacre-server with FUNCTION DUMP / RESTORE, and libraries that survive a SIGKILL.

mod common;
mod diff;

use common::{RedisServer, Server};
use diff::Diff;

const LIB: &str = "#!lua name=mylib
local function incr(keys, args) return redis.call('incr', keys[1]) end
redis.register_function('incr_it', incr)
redis.register_function{function_name='ro_get', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='reads'}
redis.register_function{function_name='bad_ro', callback=function(keys) return redis.call('set', keys[1], 1) end, flags={'no-writes'}}";

#[test]
fn function_commands_answer_as_redis() {
    let Some(mut d) = Diff::start("functions") else {
        return;
    };
    d.check(&[b"FUNCTION", b"LOAD", LIB.as_bytes()]);
    d.check(&[b"FUNCTION", b"LOAD", LIB.as_bytes()]);
    d.check(&[b"FUNCTION", b"LOAD", b"REPLACE", LIB.as_bytes()]);
    d.check(&[b"FUNCTION", b"LOAD", b"BAD", LIB.as_bytes()]);
    for bad in [
        "return 1",
        "#!lua\nredis.register_function('f', function() return 1 end)",
        "#!lua name=a name=b\nredis.register_function('f', function() return 1 end)",
        "#!lua name=a x=y\nredis.register_function('f', function() return 1 end)",
        "#!js name=a\nredis.register_function('f', function() return 1 end)",
        "#!lua name=bad-name\nredis.register_function('f', function() return 1 end)",
        "#!lua name=other\nreturn 1",
        "#!lua name=other\nredis.register_function('incr_it', function() return 1 end)",
        "#!lua name=other\nredis.register_function('f', function() return 1 end)\nredis.register_function('f', function() return 1 end)",
        "#!lua name=other\nredis.register_function('bad name', function() return 1 end)",
        "#!lua name=other\nredis.register_function{function_name='f'}",
        "#!lua name=other\nredis.register_function{callback=function() end}",
        "#!lua name=other\nredis.register_function{function_name='f', callback=function() end, flags={'nosuch'}}",
        "#!lua name=other\nredis.register_function{function_name='f', callback=function() end, nosuch=1}",
        "#!lua name=other\nredis.register_function('f')",
        "#!lua name=other\nreturn redis.call('ping')",
        "#!lua name=other\nreturn math.random()",
        "#!lua name=other\nx = 1",
        "#!lua name=other\nthis is not lua",
    ] {
        d.check(&[b"FUNCTION", b"LOAD", bad.as_bytes()]);
    }
    d.script(&[
        "FCALL incr_it 1 counter",
        "FCALL INCR_IT 1 counter",
        "FCALL_RO ro_get 1 counter",
        "FCALL_RO incr_it 1 counter",
        "FCALL bad_ro 1 counter",
        "FCALL nosuch 0",
        "FCALL incr_it x",
        "FCALL incr_it 5 a",
        "FCALL incr_it -1",
        "FUNCTION LIST LIBRARYNAME nomatch*",
        "FUNCTION LIST WITHCODE WITHCODE",
        "FUNCTION LIST LIBRARYNAME",
        "FUNCTION STATS",
        "FUNCTION DELETE nosuch",
        "FUNCTION DELETE MYLIB",
        "FCALL incr_it 1 counter",
        "FUNCTION FLUSH BAD",
        "FUNCTION FLUSH SYNC EXTRA",
        "FUNCTION FLUSH",
        "FUNCTION LIST",
        "FUNCTION KILL",
        "FUNCTION RESTORE bad",
        "FUNCTION RESTORE a b c",
        "GET counter",
    ]);
    // LIST of a library of one function (Redis lists a library's functions in hash order).
    let one = "#!lua name=one\nredis.register_function{function_name='f', callback=function() return 1 end, flags={'no-writes', 'allow-oom'}, description='d'}";
    d.check(&[b"FUNCTION", b"LOAD", one.as_bytes()]);
    d.script(&[
        "FUNCTION LIST",
        "FUNCTION LIST WITHCODE",
        "FUNCTION LIST LIBRARYNAME O*",
        "FUNCTION STATS",
    ]);
    d.finish();
}

fn q(c: &mut redis::Connection, args: &[&[u8]]) -> redis::RedisResult<redis::Value> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).expect("name"));
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

#[test]
fn libraries_move_both_ways_with_dump_and_restore() {
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server not installed: skipped");
        return;
    };
    let nacre = Server::start(&[]);
    let (mut r, mut n) = (redis.conn(), nacre.conn());
    let other = LIB
        .replace("mylib", "second")
        .replace("incr_it", "incr2")
        .replace("ro_get", "get2")
        .replace("bad_ro", "bad2");
    // A payload Redis wrote (its code LZF-compressed) loads into Nacre...
    q(&mut r, &[b"FUNCTION", b"LOAD", LIB.as_bytes()]).expect("load");
    q(&mut r, &[b"FUNCTION", b"LOAD", other.as_bytes()]).expect("load");
    let from_redis: Vec<u8> = redis::cmd("FUNCTION")
        .arg("DUMP")
        .query(&mut r)
        .expect("dump");
    let ok: String = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&from_redis)
        .query(&mut n)
        .expect("restore");
    assert_eq!(ok, "OK");
    let v: i64 = redis::cmd("FCALL")
        .arg("incr2")
        .arg(1)
        .arg("k")
        .query(&mut n)
        .expect("fcall");
    assert_eq!(v, 1);
    // ...again only with REPLACE or FLUSH...
    let e = q(&mut n, &[b"FUNCTION", b"RESTORE", &from_redis]).expect_err("collision");
    assert!(e.to_string().contains("already exists"), "{e}");
    q(&mut n, &[b"FUNCTION", b"RESTORE", &from_redis, b"REPLACE"]).expect("replace");
    q(&mut n, &[b"FUNCTION", b"RESTORE", &from_redis, b"FLUSH"]).expect("flush");
    // ...a damaged one is refused...
    let mut bad = from_redis.clone();
    bad[3] ^= 1;
    let e = q(&mut n, &[b"FUNCTION", b"RESTORE", &bad, b"FLUSH"]).expect_err("damaged");
    assert!(e.to_string().contains("checksum"), "{e}");
    // ...and Nacre's payload loads into Redis.
    let from_nacre: Vec<u8> = redis::cmd("FUNCTION")
        .arg("DUMP")
        .query(&mut n)
        .expect("dump");
    q(&mut r, &[b"FUNCTION", b"RESTORE", &from_nacre, b"FLUSH"]).expect("redis restores nacre's");
    let v: i64 = redis::cmd("FCALL")
        .arg("incr_it")
        .arg(1)
        .arg("k")
        .query(&mut r)
        .expect("fcall");
    assert_eq!(v, 1);
    let libs_r = q(&mut r, &[b"FUNCTION", b"LIST", b"WITHCODE"]).expect("list");
    let libs_n = q(&mut n, &[b"FUNCTION", b"LIST", b"WITHCODE"]).expect("list");
    let mut lr = format!("{libs_r:?}").into_bytes();
    let mut ln = format!("{libs_n:?}").into_bytes();
    lr.sort_unstable();
    ln.sort_unstable();
    assert_eq!(lr, ln, "the same libraries on both");
}

#[test]
fn libraries_survive_a_sigkill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = Server::start_in(dir.path(), &[]);
    let mut c = s.conn();
    q(&mut c, &[b"FUNCTION", b"LOAD", LIB.as_bytes()]).expect("load");
    q(
        &mut c,
        &[
            b"FUNCTION",
            b"LOAD",
            LIB.replace("mylib", "gone")
                .replace("incr_it", "x1")
                .replace("ro_get", "x2")
                .replace("bad_ro", "x3")
                .as_bytes(),
        ],
    )
    .expect("load");
    q(&mut c, &[b"FUNCTION", b"DELETE", b"gone"]).expect("delete");
    s.restart();
    let mut c = s.conn();
    let v: i64 = redis::cmd("FCALL")
        .arg("incr_it")
        .arg(1)
        .arg("k")
        .query(&mut c)
        .expect("fcall after a kill");
    assert_eq!(v, 1);
    let e = q(&mut c, &[b"FCALL", b"x1", b"0"]).expect_err("deleted before the kill");
    assert!(e.to_string().contains("Function not found"), "{e}");
    q(&mut c, &[b"FUNCTION", b"FLUSH"]).expect("flush");
    s.restart();
    let mut c = s.conn();
    let e = q(&mut c, &[b"FCALL", b"incr_it", b"1", b"k"]).expect_err("flushed before the kill");
    assert!(e.to_string().contains("Function not found"), "{e}");
}
