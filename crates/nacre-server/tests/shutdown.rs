//! SIGTERM and SIGINT against the real binary: a clean stop keeps every write and records
//! the key counts; a client stuck in a script that never ends does not hold the process
//! (the script's writes, never acknowledged, are not committed), and SIGINT while shutting
//! down ends it at once, as Redis does.

mod common;

use std::time::{Duration, Instant};

use common::{q, text, Server};

/// Starts a script that writes a key, then loops forever, on a connection of its own.
/// Returns once the script has written (SCRIPT KILL answers UNKILLABLE). A SCRIPT KILL
/// that lands before the script's first write stops it (that is Redis's rule for a
/// script that has not written), so the script is then started again.
fn endless_script(s: &Server) -> std::thread::JoinHandle<redis::RedisResult<redis::Value>> {
    let start = || {
        let mut c = s.conn();
        std::thread::spawn(move || {
            redis::cmd("EVAL")
                .arg("redis.call('set', 'a', '1') while true do end")
                .arg(0)
                .query(&mut c)
        })
    };
    let mut h = start();
    let mut k = s.conn();
    let t = Instant::now();
    loop {
        let r: redis::RedisResult<redis::Value> = redis::cmd("SCRIPT").arg("KILL").query(&mut k);
        match r {
            Err(e) if e.code() == Some("NOTBUSY") => {}
            Err(e) if e.code() == Some("UNKILLABLE") => break,
            Ok(redis::Value::Okay) => {
                assert!(
                    h.join().unwrap().is_err(),
                    "a killed script answers an error"
                );
                h = start();
            }
            other => panic!("SCRIPT KILL answered {other:?}"),
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the script never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    h
}

#[test]
fn sigterm_stops_cleanly_and_keeps_every_write() {
    let mut s = Server::start(&[]);
    let mut c = s.conn();
    for i in 0..100 {
        q(&mut c, &["SET", &format!("k{i}"), "v"]);
    }
    s.signal("TERM");
    let status = s
        .wait_exit(Duration::from_secs(20))
        .expect("exits after SIGTERM");
    assert!(status.success(), "{status:?}");
    s.restart();
    let mut c = s.conn();
    assert_eq!(text(&q(&mut c, &["DBSIZE"])), "100");
    assert_eq!(text(&q(&mut c, &["GET", "k99"])), "v");
}

#[test]
fn sigterm_ends_the_process_while_a_script_never_ends() {
    let mut s = Server::start(&[]);
    let mut c = s.conn();
    q(&mut c, &["SET", "before", "1"]);
    let script = endless_script(&s);
    let t = Instant::now();
    s.signal("TERM");
    assert!(
        s.wait_exit(Duration::from_secs(25)).is_some(),
        "still running {:?} after SIGTERM",
        t.elapsed()
    );
    assert!(
        script.join().unwrap().is_err(),
        "the script's client is cut"
    );
    s.restart();
    let mut c = s.conn();
    assert_eq!(text(&q(&mut c, &["GET", "before"])), "1");
    assert_eq!(
        q(&mut c, &["GET", "a"]),
        redis::Value::Nil,
        "the unfinished script's write is not committed"
    );
    assert_eq!(text(&q(&mut c, &["DBSIZE"])), "1", "counted again, exact");
}

#[test]
fn sigint_while_shutting_down_exits_at_once() {
    let mut s = Server::start(&[]);
    let script = endless_script(&s);
    s.signal("INT");
    // The clean shutdown waits 5 s for the script's client; a second SIGINT does not.
    std::thread::sleep(Duration::from_millis(300));
    assert!(s.alive(), "the first SIGINT waits for clients");
    let t = Instant::now();
    s.signal("INT");
    assert!(
        s.wait_exit(Duration::from_secs(3)).is_some(),
        "still running after a second SIGINT"
    );
    assert!(t.elapsed() < Duration::from_secs(3));
    let _ = script.join();
}
