//! The binary starts, answers, shuts down cleanly and restarts with its data.

mod common;

use std::time::Duration;

use common::Server;

#[test]
fn starts_serves_shuts_down_and_restarts_with_its_data() {
    let mut s = Server::start(&[]);
    let mut c = s.conn();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("1")
        .query(&mut c)
        .unwrap();
    let r: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query(&mut c);
    assert!(r.is_err(), "SHUTDOWN closes the connection without a reply");
    let status = s
        .wait_exit(Duration::from_secs(20))
        .expect("exits after SHUTDOWN");
    assert!(status.success(), "{status:?}");
    s.restart();
    let mut c = s.conn();
    let v: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "v");
    let f: String = redis::cmd("HGET").arg("h").arg("f").query(&mut c).unwrap();
    assert_eq!(f, "1");
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 2);
    let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
    assert!(info.contains("nacre_last_start_clean:1"), "{info}");
}

#[test]
fn the_first_start_says_it_created_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let log_arg = log.to_str().unwrap();
    let args = ["--loglevel", "notice", "--logfile", log_arg];
    let mut s = common::Server::start_in(dir.path(), &args);
    let mut c = s.conn();
    let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
    assert!(info.contains("nacre_last_start_created:1"), "{info}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("created the database in"), "{text}");
    assert!(!text.contains("recovered in"), "{text}");
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query(&mut c);
    s.wait_exit(Duration::from_secs(20)).expect("exits");
    std::fs::remove_file(&log).unwrap();
    s.restart();
    let mut c = s.conn();
    let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
    assert!(info.contains("nacre_last_start_created:0"), "{info}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("recovered in"), "{text}");
    assert!(!text.contains("created the database"), "{text}");
}
