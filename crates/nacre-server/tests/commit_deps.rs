//! K7: a commit that fails (here a set member too long for a zone) fails the commands that
//! read what it queued, on the connection's thread (`emulated`) and through the committer
//! (`msync`), and no other client's writes.

mod common;

use std::sync::Arc;

use nacre::Options;
use nacre_pmem::Backend;
use nacre_resp::Reply;
use nacre_server::client::Client;
use nacre_server::cmd::{execute, Outcome};
use nacre_server::shared::{ClientInfo, Shared};

fn open(backend: Backend, dir: &std::path::Path) -> Arc<Shared> {
    let mut o = Options::new(dir.join("db.pool")).backend(backend);
    o.pool_size = 32 << 20;
    o.zone_size = 256 << 10;
    o.memtable_size = 1 << 20;
    o.recovery_threads = 2;
    common::in_process(o)
}

/// Runs a command without waiting for its commit: its reply and the ticket it waits for.
fn queue(shared: &Shared, c: &mut Client, args: &[&[u8]]) -> (Reply, u64) {
    match execute(shared, c, args.iter().map(|a| a.to_vec()).collect()) {
        Outcome::Reply(r, t) => (r, t.0),
        _ => panic!("unexpected outcome"),
    }
}

/// The reply as a client gets it: an error if the commit it waits for failed.
fn settle(shared: &Shared, (r, t): (Reply, u64)) -> Result<Reply, String> {
    let st = &shared.store;
    st.commits
        .wait_blocking(st, t)
        .map(|()| r)
        .map_err(|e| e.reply())
}

fn run(shared: &Shared, c: &mut Client, args: &[&[u8]]) -> Result<Reply, String> {
    let q = queue(shared, c, args);
    settle(shared, q)
}

fn a_failed_commit_fails_only_what_read_it(backend: Backend) {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
    let shared = open(backend, dir.path());
    let mut a = Client::new(Arc::new(ClientInfo::detached(1)), true);
    let mut b = Client::new(Arc::new(ClientInfo::detached(2)), true);
    run(&shared, &mut a, &[b"SET", b"n", b"1"]).expect("set");
    let big = vec![b'm'; 300 << 10];
    // Queued together, as one connection's pipelined round: the set's creation fails in
    // the engine; what read it fails with it; what did not, does not.
    let add = queue(&shared, &mut a, &[b"SADD", b"s", &big]);
    let card = queue(&shared, &mut a, &[b"SCARD", b"s"]);
    let add2 = queue(&shared, &mut a, &[b"SADD", b"s", b"x"]);
    let incr = queue(&shared, &mut b, &[b"INCR", b"n"]);
    let both = queue(&shared, &mut b, &[b"MGET", b"s", b"n"]);
    shared.store.commits.flush(&shared.store);
    let e = settle(&shared, add).expect_err("a member longer than a zone");
    assert!(e.contains("exceeds the limit"), "{e}");
    assert!(settle(&shared, card).is_err());
    let e = settle(&shared, add2).expect_err("read the failed set");
    assert!(e.contains("read a write that failed"), "{e}");
    assert_eq!(settle(&shared, incr), Ok(Reply::Integer(2)));
    assert!(settle(&shared, both).is_err(), "MGET read the failed set");
    // Nothing of them survived, and writes are not refused.
    assert_eq!(
        run(&shared, &mut b, &[b"SCARD", b"s"]),
        Ok(Reply::Integer(0))
    );
    assert_eq!(
        run(&shared, &mut b, &[b"SADD", b"s", b"y"]),
        Ok(Reply::Integer(1))
    );
    assert_eq!(
        run(&shared, &mut a, &[b"SCARD", b"s"]),
        Ok(Reply::Integer(1))
    );
    assert_eq!(
        run(&shared, &mut a, &[b"SMEMBERS", b"s"]),
        Ok(Reply::Array(vec![Reply::Bulk(b"y".to_vec())]))
    );
    assert_eq!(run(&shared, &mut a, &[b"DBSIZE"]), Ok(Reply::Integer(2)));
    shared.store.commits.close(&shared.store);
}

#[test]
fn a_failed_commit_fails_only_what_read_it_on_the_connections_thread() {
    a_failed_commit_fails_only_what_read_it(Backend::Emulated);
}

#[test]
fn a_failed_commit_fails_only_what_read_it_through_the_committer() {
    a_failed_commit_fails_only_what_read_it(Backend::Msync);
}
