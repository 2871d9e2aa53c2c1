//! ACL against redis-server 7.0: the same sessions (users and their rules, descriptions,
//! DRYRUN, AUTH as other users, commands, keys and channels refused, scripts under a
//! restricted user, errors) give the same replies.

mod common;

use common::{RedisServer, Server};
use redis::Connection;

use common::run_text as run;

fn session(c: &mut Connection) -> Vec<String> {
    let script: &[&[&str]] = &[
        &[
            "ACL",
            "SETUSER",
            "bob",
            "on",
            ">123",
            "+@scripting",
            "+set",
            "~x*",
        ],
        &["ACL", "GETUSER", "bob"],
        &[
            "ACL", "SETUSER", "alice", "on", "nopass", "+@string", "%R~r*", "%W~w*", "&news.*",
        ],
        &["ACL", "GETUSER", "alice"],
        // (Single commands are described in Redis's command table's hash order, which
        // changes at every start: one at a time here.)
        &[
            "ACL",
            "SETUSER",
            "carol",
            "on",
            ">pw",
            "+@all",
            "-flushall",
            "~*",
            "(+get ~sel*)",
        ],
        &["ACL", "GETUSER", "carol"],
        &["ACL", "SETUSER", "dave", "reset", "+@hash", "~*"],
        &["ACL", "GETUSER", "dave"],
        &[
            "ACL",
            "SETUSER",
            "erin",
            "+@all",
            "-@dangerous",
            "allkeys",
            "allchannels",
        ],
        &["ACL", "GETUSER", "erin"],
        &["ACL", "LIST"],
        &["ACL", "USERS"],
        &["ACL", "WHOAMI"],
        &["ACL", "DRYRUN", "bob", "set", "xx", "1"],
        &["ACL", "DRYRUN", "bob", "set", "yy", "1"],
        &["ACL", "DRYRUN", "bob", "hset", "xx", "f", "1"],
        &["ACL", "DRYRUN", "alice", "get", "r1"],
        &["ACL", "DRYRUN", "alice", "set", "r1", "v"],
        &["ACL", "DRYRUN", "alice", "set", "w1", "v"],
        &[
            "ACL",
            "SETUSER",
            "frank",
            "on",
            "nopass",
            "+@all",
            "-config|set",
        ],
        &["ACL", "DRYRUN", "frank", "config", "set", "x", "y"],
        &["ACL", "DRYRUN", "carol", "flushall"],
        &["ACL", "DRYRUN", "carol", "config", "get", "x"],
        &["ACL", "DRYRUN", "nobody", "get", "x"],
        &["ACL", "DRYRUN", "bob", "nosuchcmd"],
        &["ACL", "DRYRUN", "bob", "get"],
        &["ACL", "SETUSER", "bad", "+nosuchcmd"],
        &["ACL", "SETUSER", "bad", "+@nosuchcat"],
        &["ACL", "SETUSER", "bad", "bogus"],
        &["ACL", "SETUSER", "bad", "~*", "~foo"],
        &["ACL", "SETUSER", "bad", "<nopw"],
        &["ACL", "SETUSER", "bad", "#abc"],
        &["ACL", "SETUSER", "bad", "(+get", "~x"],
        &["ACL", "SETUSER", "bad user"],
        &["ACL", "GETUSER", "bad"],
        &["ACL", "GETUSER", "nobody"],
        &["ACL", "CAT", "nosuchcat"],
        &["ACL", "GENPASS", "0"],
        &["ACL", "GENPASS", "5000"],
        &["ACL", "DELUSER", "default"],
        &["ACL", "DELUSER", "dave", "nobody"],
        &["ACL", "SAVE"],
        &["ACL", "BOGUS"],
        &["AUTH", "bob", "wrong"],
        &["AUTH", "nobody", "x"],
        &["AUTH", "onlypass"],
        &["AUTH", "bob", "123"],
        &["ACL", "WHOAMI"],
        &["SET", "xx", "1"],
        &["SET", "yy", "1"],
        &["GET", "xx"],
        &[
            "EVAL",
            "return redis.acl_check_cmd('set','xx',1)",
            "1",
            "xx",
        ],
        &[
            "EVAL",
            "return redis.acl_check_cmd('hset','xx','f',1)",
            "1",
            "xx",
        ],
        &["EVAL", "return redis.call('set','yy',1)", "0"],
        &["EVAL", "return redis.call('get','xx')", "0"],
        &["AUTH", "alice", "anything"],
        &["GET", "r1"],
        &["SET", "r1", "v"],
        &["SET", "w1", "v"],
        &["GET", "w1"],
        &["PUBLISH", "news.a", "hi"],
        &["PUBLISH", "sports", "hi"],
        &["AUTH", "carol", "pw"],
        &["CONFIG", "SET", "maxmemory", "0"],
        &["CONFIG", "GET", "maxmemory"],
        &["FLUSHALL"],
        // SORT's BY and GET patterns name keys: refused unless the user may read every key.
        &["AUTH", "default", "x"],
        &["RPUSH", "sl", "2", "1"],
        &["SET", "w_1", "9"],
        &[
            "ACL", "SETUSER", "sorter", "on", "nopass", "+@all", "~s*", "~w*",
        ],
        &[
            "ACL", "SETUSER", "reader", "on", "nopass", "+@all", "%R~*", "~sl",
        ],
        &["AUTH", "sorter", "x"],
        &["SORT", "sl"],
        &["SORT", "sl", "BY", "nosort"],
        &["SORT", "sl", "BY", "w_*"],
        &["SORT", "sl", "GET", "#"],
        &["SORT_RO", "sl", "GET", "w_*"],
        &["SORT", "sl", "LIMIT", "x", "1", "BY", "w_*"],
        &["SORT", "sl", "BY", "w_*", "LIMIT", "x", "1"],
        &["AUTH", "reader", "x"],
        &["SORT", "sl", "BY", "w_*", "GET", "w_*"],
        &["SORT", "sl", "BY", "w_*", "STORE", "sl"],
        &["AUTH", "default", "x"],
    ];
    script.iter().map(|a| run(c, a)).collect()
}

#[test]
fn acl_sessions_match_redis() {
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server is not installed; skipped");
        return;
    };
    let nacre = Server::start(&[]);
    let theirs = session(&mut redis.conn());
    let ours = session(&mut nacre.conn());
    let diff: Vec<String> = theirs
        .iter()
        .zip(&ours)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("redis: {a}\nnacre: {b}"))
        .collect();
    assert!(diff.is_empty(), "{}", diff.join("\n\n"));
}

/// Permissions changed by another client between MULTI and EXEC are checked again when EXEC
/// runs each command, as Redis checks them: the raw replies of the transaction's client.
fn changed_under_exec(port: u16, b: &mut Connection) -> Vec<String> {
    let wait = std::time::Duration::from_millis(300);
    let mut a = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let mut out = vec![run(
        b,
        &["ACL", "SETUSER", "tx", "on", "nopass", "+@all", "~*", "&*"],
    )];
    let send = |a: &mut std::net::TcpStream, text: &str| {
        let got = common::raw_exchange(a, text.as_bytes(), wait);
        String::from_utf8_lossy(&got).into_owned()
    };
    out.push(send(
        &mut a,
        "AUTH tx x\r\nMULTI\r\nSET k1 v\r\nGET k2\r\nSET other v\r\nPUBLISH ch m\r\n",
    ));
    out.push(run(
        b,
        &[
            "ACL",
            "SETUSER",
            "tx",
            "resetkeys",
            "~k*",
            "-get",
            "resetchannels",
        ],
    ));
    out.push(send(&mut a, "EXEC\r\n"));
    out
}

#[test]
fn exec_checks_permissions_again() {
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server is not installed; skipped");
        return;
    };
    let nacre = Server::start(&[]);
    let theirs = changed_under_exec(redis.port, &mut redis.conn());
    let ours = changed_under_exec(nacre.port, &mut nacre.conn());
    assert!(
        theirs[3].contains("-NOPERM ACLs rules changed"),
        "{}",
        theirs[3]
    );
    assert_eq!(theirs, ours);
}

/// Users are durable: after SIGKILL and a restart, the same users with the same rules, and
/// their passwords still authenticate; a deleted user stays deleted.
#[test]
fn users_survive_a_crash() {
    let mut s = Server::start(&[]);
    let mut c = s.conn();
    for args in [
        &[
            "ACL",
            "SETUSER",
            "bob",
            "on",
            ">pw",
            "+@read",
            "-keys",
            "~app:*",
            "(+set ~w*)",
        ][..],
        &["ACL", "SETUSER", "gone", "on", "nopass"],
        &["ACL", "DELUSER", "gone"],
    ] {
        run(&mut c, args);
    }
    let before = run(&mut c, &["ACL", "LIST"]);
    s.kill();
    s.restart();
    let mut c = s.conn();
    assert_eq!(run(&mut c, &["ACL", "LIST"]), before);
    let auth = run(&mut c, &["AUTH", "bob", "pw"]);
    assert!(auth.ends_with("-> ok"), "{auth}");
    assert!(run(&mut c, &["GET", "app:1"]).contains("nil"));
    assert!(run(&mut c, &["KEYS", "*"]).contains("NOPERM"));
}

/// An ACL file: the users it defines at start, ACL LOAD (and its errors: nothing changes),
/// ACL SAVE, and `user` lines of the configuration, as redis-server 7.0 handles them.
fn acl_file_session(c: &mut Connection, file: &std::path::Path) -> Vec<String> {
    let name = file.display().to_string();
    // The file's path differs between the servers: name it the same way in both.
    let mut out = Vec::new();
    let run = |out: &mut Vec<String>, c: &mut Connection, args: &[&str]| {
        out.push(run(c, args).replace(&name, "FILE"));
    };
    run(&mut out, c, &["ACL", "LIST"]);
    run(&mut out, c, &["AUTH", "alice", "pw"]);
    run(&mut out, c, &["SET", "k1", "v"]);
    run(&mut out, c, &["SET", "x", "v"]);
    run(&mut out, c, &["AUTH", "default", "x"]);
    std::fs::write(
        file,
        "user alice on >pw2 ~k* +@string\nuser bob on nopass +@hash ~*\n",
    )
    .expect("write");
    run(&mut out, c, &["ACL", "LOAD"]);
    run(&mut out, c, &["ACL", "LIST"]);
    run(&mut out, c, &["AUTH", "alice", "pw"]);
    run(&mut out, c, &["AUTH", "alice", "pw2"]);
    run(&mut out, c, &["AUTH", "default", "x"]);
    std::fs::write(
        file,
        "user carol on nopass +@all\nbogus line\nuser carol off\nuser dave +nosuch\n",
    )
    .expect("write");
    run(&mut out, c, &["ACL", "LOAD"]);
    run(&mut out, c, &["ACL", "LIST"]);
    std::fs::remove_file(file).expect("remove");
    run(&mut out, c, &["ACL", "LOAD"]);
    run(
        &mut out,
        c,
        &[
            "ACL",
            "SETUSER",
            "erin",
            "on",
            ">e",
            "~e*",
            "+@list",
            "(+get ~g*)",
        ],
    );
    run(&mut out, c, &["ACL", "SAVE"]);
    let saved = std::fs::read_to_string(file).unwrap_or_default();
    let mut lines: Vec<&str> = saved.lines().collect();
    lines.sort_unstable();
    out.push(lines.join("\n"));
    run(&mut out, c, &["ACL", "LOAD"]);
    run(&mut out, c, &["ACL", "LIST"]);
    out
}

#[test]
fn acl_files_match_redis() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (theirs_file, ours_file) = (dir.path().join("redis.acl"), dir.path().join("nacre.acl"));
    let start = "user alice on >pw ~k* +@string\nuser default on nopass ~* &* +@all\n";
    std::fs::write(&theirs_file, start).expect("write");
    std::fs::write(&ours_file, start).expect("write");
    let Some(redis) = RedisServer::start_with(&["--aclfile", theirs_file.to_str().unwrap()]) else {
        eprintln!("redis-server is not installed; skipped");
        return;
    };
    let nacre = Server::start(&["--aclfile", ours_file.to_str().unwrap()]);
    let theirs = acl_file_session(&mut redis.conn(), &theirs_file);
    let ours = acl_file_session(&mut nacre.conn(), &ours_file);
    assert!(
        theirs[10].contains("FILE:2 should start with user keyword"),
        "{}",
        theirs[10]
    );
    assert!(theirs[17].contains("user erin on"), "{}", theirs[17]);
    let diff: Vec<String> = theirs
        .iter()
        .zip(&ours)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("redis: {a}\nnacre: {b}"))
        .collect();
    assert!(diff.is_empty(), "{}", diff.join("\n\n"));
}

#[test]
fn configured_users_apply_at_start_and_conflict_with_an_acl_file() {
    let s = Server::start(&["--user", "zed", "on", ">zz", "~z*", "+@string"]);
    let mut c = s.conn();
    assert!(run(&mut c, &["ACL", "LIST"]).contains("user zed on #"));
    assert!(run(&mut c, &["AUTH", "zed", "zz"]).ends_with("-> ok"));
    assert!(run(&mut c, &["SET", "zk", "1"]).ends_with("-> ok"));
    assert!(run(&mut c, &["SET", "other", "1"]).contains("NOPERM"));
    // Both an ACL file and `user` lines: the server refuses to start, as Redis does.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("users.acl");
    std::fs::write(&file, "user a on\n").expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nacre-server"))
        .args(["--port", "0", "--dir"])
        .arg(dir.path())
        .args([
            "--pmem-size",
            "64mb",
            "--pmem-backend",
            "emulated",
            "--aclfile",
        ])
        .arg(&file)
        .args(["--user", "b", "on"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("but not both"), "{text}");
}
