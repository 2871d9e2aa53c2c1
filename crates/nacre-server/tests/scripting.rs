//! Scripts against a running server: a script that loops forever leaves other clients
//! answered (BUSY once it passes busy-reply-threshold) and SCRIPT KILL ends it; one that
//! wrote cannot be killed; a script's writes are atomic with respect to other clients.

mod common;

use std::time::{Duration, Instant};

use common::Server;

/// Sets a 50 ms busy-reply-threshold; a connection for the caller.
fn short_threshold(s: &Server) -> redis::Connection {
    let mut admin = s.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("busy-reply-threshold")
        .arg("50")
        .query(&mut admin)
        .expect("config");
    admin
}

/// Runs `script` on a connection of its own, in a thread.
fn eval_in_thread<T: redis::FromRedisValue + Send + 'static>(
    s: &Server,
    script: &str,
) -> std::thread::JoinHandle<redis::RedisResult<T>> {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(0);
    query_in_thread(s, cmd)
}

/// Sends `cmd` on a connection of its own, in a thread.
fn query_in_thread<T: redis::FromRedisValue + Send + 'static>(
    s: &Server,
    cmd: redis::Cmd,
) -> std::thread::JoinHandle<redis::RedisResult<T>> {
    let url = s.url();
    std::thread::spawn(move || {
        let mut c = redis::Client::open(url.as_str())
            .expect("client")
            .get_connection()
            .expect("connect");
        cmd.query::<T>(&mut c)
    })
}

fn busy_then_killed(s: &Server, script: &str, kill: &str) {
    short_threshold(s);
    let looping = eval_in_thread::<redis::Value>(s, script);
    answered_busy_then_killed(s, looping, kill);
}

/// Other clients are told BUSY while `looping` runs; `kill` KILL (SCRIPT or FUNCTION) ends
/// it with an error.
fn answered_busy_then_killed(
    s: &Server,
    looping: std::thread::JoinHandle<redis::RedisResult<redis::Value>>,
    kill: &str,
) {
    let t = Instant::now();
    let mut other = s.conn();
    other
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    loop {
        match redis::cmd("PING").query::<String>(&mut other) {
            Err(e) if e.code() == Some("BUSY") => break,
            Ok(_) if t.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            r => panic!("no BUSY reply while the script loops: {r:?}"),
        }
    }
    let ok: String = redis::cmd(kill)
        .arg("KILL")
        .query(&mut other)
        .expect("kill");
    assert_eq!(ok, "OK");
    let r = looping.join().expect("thread");
    let e = r.expect_err("the killed script's reply is an error");
    assert!(e.to_string().contains("Script killed by user"), "{e}");
    let pong: String = redis::cmd("PING").query(&mut other).expect("ping after");
    assert_eq!(pong, "PONG");
}

#[test]
fn a_script_that_loops_forever_is_answered_busy_and_killed() {
    let s = Server::start(&[]);
    busy_then_killed(&s, "while true do end", "SCRIPT");
    // Caught errors do not save it: the hook raises again.
    busy_then_killed(
        &s,
        "while true do pcall(function() while true do end end) end",
        "SCRIPT",
    );
}

/// A script whose runs were short runs in place, on the worker that read its command; a
/// run of it that turns long (here on a server with one worker) must still let others be
/// answered and SCRIPT KILL end it. So must a script that loops inside EXEC.
#[test]
fn a_run_that_turns_long_in_place_leaves_a_single_worker_serving() {
    let s = Server::start(&["--io-threads", "1"]);
    let script = "if ARGV[1] == 'loop' then while true do end end return 1";
    let mut c = s.conn();
    for _ in 0..50 {
        let one: i64 = redis::cmd("EVAL")
            .arg(script)
            .arg(0)
            .arg("once")
            .query(&mut c)
            .expect("short run");
        assert_eq!(one, 1);
    }
    short_threshold(&s);
    let mut looping = redis::cmd("EVAL");
    looping.arg(script).arg(0).arg("loop");
    answered_busy_then_killed(&s, query_in_thread(&s, looping), "SCRIPT");

    let url = s.url();
    let in_exec = std::thread::spawn(move || {
        let mut c = redis::Client::open(url.as_str())?.get_connection()?;
        let r: redis::Value = redis::pipe()
            .atomic()
            .cmd("EVAL")
            .arg("while true do end")
            .arg(0)
            .query(&mut c)?;
        match r {
            redis::Value::Array(mut v) if v.len() == 1 => match v.remove(0) {
                redis::Value::ServerError(e) => Err(redis::RedisError::from(e)),
                other => Ok(other),
            },
            other => Ok(other),
        }
    });
    answered_busy_then_killed(&s, in_exec, "SCRIPT");

    // A function, the same way: short runs first, then one that loops.
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(
            "#!lua name=turns\n\
             redis.register_function('f', function(keys, args) \
             if args[1] == 'loop' then while true do end end return 1 end)",
        )
        .query(&mut c)
        .expect("function load");
    for _ in 0..50 {
        let one: i64 = redis::cmd("FCALL")
            .arg("f")
            .arg(0)
            .arg("once")
            .query(&mut c)
            .expect("short call");
        assert_eq!(one, 1);
    }
    let mut looping = redis::cmd("FCALL");
    looping.arg("f").arg(0).arg("loop");
    answered_busy_then_killed(&s, query_in_thread(&s, looping), "FUNCTION");
}

#[test]
fn a_script_that_wrote_cannot_be_killed() {
    let s = Server::start(&[]);
    let mut admin = short_threshold(&s);
    let start = || {
        eval_in_thread::<String>(
            &s,
            "redis.call('set', 'x', 1); local t = redis.call('time')[1] + 1; \
             while tonumber(redis.call('time')[1]) <= t do end; return 'done'",
        )
    };
    let mut looping = start();
    let t = Instant::now();
    loop {
        match redis::cmd("SCRIPT").arg("KILL").query::<String>(&mut admin) {
            Err(e) if e.code() == Some("UNKILLABLE") => break,
            // Landed before the script's first write, which Redis's rule lets it stop.
            Ok(ok) if ok == "OK" && t.elapsed() < Duration::from_secs(5) => {
                assert!(looping.join().expect("thread").is_err(), "killed");
                looping = start();
            }
            Err(e) if e.code() == Some("NOTBUSY") && t.elapsed() < Duration::from_secs(5) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            r => panic!("expected UNKILLABLE: {r:?}"),
        }
    }
    assert_eq!(looping.join().expect("thread").expect("finishes"), "done");
}

#[test]
fn other_clients_never_see_half_a_script() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let _: () = redis::cmd("MSET")
        .arg("a")
        .arg(0)
        .arg("b")
        .arg(0)
        .query(&mut c)
        .expect("mset");
    let url = s.url();
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut c = redis::Client::open(url.as_str())
                    .expect("client")
                    .get_connection()
                    .expect("connect");
                for _ in 0..300 {
                    // b is not declared: the script takes it when it gets there.
                    let _: i64 = redis::cmd("EVAL")
                        .arg("redis.call('incr', KEYS[1]); return redis.call('incr', 'b')")
                        .arg(1)
                        .arg("a")
                        .query(&mut c)
                        .expect("eval");
                }
            })
        })
        .collect();
    for _ in 0..300 {
        let (a, b): (i64, i64) = redis::cmd("MGET")
            .arg("a")
            .arg("b")
            .query(&mut c)
            .expect("mget");
        assert_eq!(a, b, "a script's two writes seen apart");
    }
    for w in writers {
        w.join().expect("writer");
    }
    let (a, b): (i64, i64) = redis::cmd("MGET")
        .arg("a")
        .arg("b")
        .query(&mut c)
        .expect("mget");
    assert_eq!((a, b), (1200, 1200));
}

#[test]
fn a_call_of_thousands_of_arguments_runs_on_a_fresh_interpreter_and_after_errors() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    // As Redis's own test: 7,999 values unpacked into one redis.call (Lua 5.1 allows a
    // function 8,000 stack slots), first on an interpreter that has run nothing yet, then
    // after calls that failed.
    let push =
        "local a = {} for i=1,7999 do a[i] = 1 end return redis.call('lpush', 'l', unpack(a))";
    let n: i64 = redis::cmd("EVAL").arg(push).arg(0).query(&mut c).unwrap();
    assert_eq!(n, 7999);
    let failing = format!("for i=1,20 do redis.pcall('nosuch') end {push}");
    let n: i64 = redis::cmd("EVAL")
        .arg(&failing)
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 2 * 7999);
}

/// `INFO memory` counts cached scripts and function libraries, as Redis 7.0's does (its
/// suite's "SCRIPTING FLUSH ASYNC" reads `number_of_cached_scripts`).
#[test]
fn info_memory_counts_scripts_and_functions() {
    let s = common::Server::start(&[]);
    let mut c = s.conn();
    let field = |c: &mut redis::Connection, name: &str| -> String {
        let info = common::text(&common::q(c, &["INFO", "memory"]));
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name} in {info}"))
            .trim()
            .to_string()
    };
    assert_eq!(field(&mut c, "number_of_cached_scripts"), "0");
    for j in 0..7 {
        common::q(&mut c, &["SCRIPT", "LOAD", &format!("return {j}")]);
    }
    common::q(&mut c, &["EVAL", "return 'x'", "0"]);
    assert_eq!(field(&mut c, "number_of_cached_scripts"), "8");
    assert!(
        field(&mut c, "used_memory_scripts_eval")
            .parse::<u64>()
            .unwrap()
            >= 8 * 8
    );
    common::q(&mut c, &["SCRIPT", "FLUSH", "ASYNC"]);
    assert_eq!(field(&mut c, "number_of_cached_scripts"), "0");
    let lib = "#!lua name=mylib\nredis.register_function('f1', function() return 1 end)\nredis.register_function('f2', function() return 2 end)";
    common::q(&mut c, &["FUNCTION", "LOAD", lib]);
    assert_eq!(field(&mut c, "number_of_libraries"), "1");
    assert_eq!(field(&mut c, "number_of_functions"), "2");
    assert_eq!(
        field(&mut c, "used_memory_functions"),
        lib.len().to_string()
    );
}

/// SCRIPT KILL racing a script's first write: a kill answered OK saw no write, so the
/// script writes nothing after it (Redis's kill lands between two commands). Each round's
/// script spins a little longer before its write, so the kills land all around it.
#[test]
fn a_kill_answered_ok_means_the_script_wrote_nothing() {
    let s = Server::start(&[]);
    let mut admin = s.conn();
    let mut killed = 0;
    for round in 0..150u32 {
        let key = format!("k{round}");
        let spin = 2_000 + 400 * round;
        let script = format!(
            "for i = 1, {spin} do end redis.call('set', '{key}', '1') \
             for i = 1, 200000 do end return 1"
        );
        let h = eval_in_thread::<redis::Value>(&s, &script);
        let answer = loop {
            let r: redis::RedisResult<redis::Value> =
                redis::cmd("SCRIPT").arg("KILL").query(&mut admin);
            match r {
                Err(e) if e.code() == Some("NOTBUSY") && !h.is_finished() => continue,
                other => break other,
            }
        };
        let ran = h.join().expect("script thread");
        let written: Option<String> = redis::cmd("GET").arg(&key).query(&mut admin).expect("get");
        if let Ok(redis::Value::Okay) = answer {
            killed += 1;
            assert!(
                ran.is_err(),
                "round {round}: a killed script answered {ran:?}"
            );
            assert_eq!(written, None, "round {round}: killed with OK, yet it wrote");
        } else {
            assert!(ran.is_ok(), "round {round}: {answer:?}, then {ran:?}");
            assert_eq!(written.as_deref(), Some("1"), "round {round}");
        }
    }
    assert!(killed > 0, "no kill landed before a write in 150 rounds");
}
