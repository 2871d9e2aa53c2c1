//! Keys longer than a zone holds (Redis takes keys up to 512 MB): named by digest in the
//! engine, their records holding the key itself (K8), through every command family, SCAN,
//! KEYS, expiry and a restart; and a record found under a long key's name that holds
//! another key is an error, never that key's data.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Server;
use nacre::{Db, Options};
use nacre_pmem::Backend;
use nacre_resp::Reply;
use nacre_server::client::Client;
use nacre_server::cmd::{execute, Outcome};
use nacre_server::shared::{ClientInfo, Shared};
use nacre_server::store::{self, encoding};

fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&[u8]]) -> T {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).expect("name"));
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).expect("command")
}

#[test]
fn keys_longer_than_a_zone_work_like_any_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = Server::start_in(dir.path(), &[]);
    let mut c = s.conn();
    let long = vec![b'k'; 5 << 20];
    let mut other = long.clone();
    *other.last_mut().expect("byte") = b'j';
    let _: () = q(&mut c, &[b"SET", &long, b"v1"]);
    assert_eq!(q::<Vec<u8>>(&mut c, &[b"GET", &long]), b"v1");
    let _: i64 = q(&mut c, &[b"APPEND", &long, b"23"]);
    assert_eq!(q::<Vec<u8>>(&mut c, &[b"GET", &long]), b"v123");
    assert_eq!(q::<i64>(&mut c, &[b"EXISTS", &long, &other]), 1);
    assert_eq!(q::<i64>(&mut c, &[b"SADD", &other, b"a", b"b", b"c"]), 3);
    assert_eq!(q::<i64>(&mut c, &[b"SCARD", &other]), 3);
    assert_eq!(q::<String>(&mut c, &[b"TYPE", &other]), "set");
    assert_eq!(q::<String>(&mut c, &[b"TYPE", &long]), "string");
    let _: () = q(&mut c, &[b"SET", b"short", b"s"]);
    assert_eq!(q::<i64>(&mut c, &[b"DBSIZE"]), 3);
    let mut keys: Vec<Vec<u8>> = q(&mut c, &[b"KEYS", b"*"]);
    keys.sort();
    assert!(
        keys == vec![other.clone(), long.clone(), b"short".to_vec()],
        "KEYS"
    );
    let mut scanned: Vec<Vec<u8>> = Vec::new();
    let mut cursor = b"0".to_vec();
    loop {
        let (next, batch): (Vec<u8>, Vec<Vec<u8>>) = q(&mut c, &[b"SCAN", &cursor, b"COUNT", b"1"]);
        scanned.extend(batch);
        if next == b"0" {
            break;
        }
        cursor = next;
    }
    scanned.sort();
    assert!(scanned == keys, "SCAN returned {} keys", scanned.len());
    // Renamed to a short name and back; moved into another database and back.
    let _: () = q(&mut c, &[b"RENAME", &long, b"tmp"]);
    assert_eq!(q::<i64>(&mut c, &[b"EXISTS", &long]), 0);
    let _: () = q(&mut c, &[b"RENAME", b"tmp", &long]);
    assert_eq!(q::<i64>(&mut c, &[b"MOVE", &other, b"1"]), 1);
    assert_eq!(q::<i64>(&mut c, &[b"EXISTS", &other]), 0);
    let _: () = q(&mut c, &[b"SELECT", b"1"]);
    assert_eq!(q::<i64>(&mut c, &[b"MOVE", &other, b"0"]), 1);
    let _: () = q(&mut c, &[b"SELECT", b"0"]);
    assert_eq!(q::<i64>(&mut c, &[b"SCARD", &other]), 3);
    // The active expire cycle finds a long key by its digest and deletes it.
    let mut expiring = long.clone();
    expiring[0] = b'e';
    let _: () = q(&mut c, &[b"SET", &expiring, b"x", b"PX", b"50"]);
    let t = Instant::now();
    while q::<i64>(&mut c, &[b"DBSIZE"]) != 3 {
        assert!(t.elapsed() < Duration::from_secs(10), "not expired");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _: i64 = q(&mut c, &[b"EXPIRE", &long, b"1000"]);
    // Everything survives a SIGKILL.
    s.restart();
    let mut c = s.conn();
    assert_eq!(q::<i64>(&mut c, &[b"DBSIZE"]), 3);
    assert_eq!(q::<Vec<u8>>(&mut c, &[b"GET", &long]), b"v123");
    assert!(q::<i64>(&mut c, &[b"TTL", &long]) > 900);
    assert_eq!(q::<i64>(&mut c, &[b"SCARD", &other]), 3);
    assert_eq!(q::<i64>(&mut c, &[b"DEL", &long, &other]), 2);
    assert_eq!(q::<i64>(&mut c, &[b"DBSIZE"]), 1);
}

fn run(shared: &Shared, c: &mut Client, args: &[&[u8]]) -> Result<Reply, String> {
    match execute(shared, c, args.iter().map(|a| a.to_vec()).collect()) {
        Outcome::Reply(r, t) => {
            let st = &shared.store;
            st.commits.wait_blocking(st, t.0).map_err(|e| e.reply())?;
            match r {
                Reply::Error(e) => Err(e),
                r => Ok(r),
            }
        }
        _ => panic!("unexpected outcome"),
    }
}

#[test]
fn a_record_under_a_keys_name_that_holds_another_key_is_an_error() {
    // What a digest collision, or a damaged byte, would leave: one key's record under
    // another's name. Reading it is an error (K8), never the other key's value.
    let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
    let mut o = Options::new(dir.path().join("db.pool")).backend(Backend::Emulated);
    o.pool_size = 32 << 20;
    o.zone_size = 256 << 10;
    o.recovery_threads = 2;
    let db = Db::open(o).expect("open");
    let (st, report, _) = store::open::open_db(db, 1, Default::default()).expect("keyspace");
    let st = Arc::new(st);
    st.commits.close(&st);
    let shared = Shared::new(st, nacre_server::Config::default(), report).into_arc();
    let mut c = Client::new(Arc::new(ClientInfo::detached(1)), true);
    let st = &shared.store;
    let gen = st.ns.read().gens[0];
    let a = vec![b'a'; encoding::LONG_KEY + 1];
    let b = vec![b'b'; encoding::LONG_KEY + 1];
    run(&shared, &mut c, &[b"SET", &a, b"secret"]).expect("set");
    let rec = st
        .db
        .get(&st.subs.meta, encoding::meta_key(gen, &a))
        .expect("get")
        .expect("a's record");
    assert_eq!(encoding::record_key(&rec), Some(&a[..]));
    for name in [&b[..], b"short"] {
        st.db
            .put(&st.subs.meta, encoding::meta_key(gen, name), &rec)
            .expect("forge");
        let e = run(&shared, &mut c, &[b"GET", name]).expect_err("another key's record");
        assert!(e.contains("belongs to another key"), "{e}");
    }
    // A short key's record found under a long key's name is refused too.
    run(&shared, &mut c, &[b"SET", b"plain", b"v"]).expect("set");
    let rec = st
        .db
        .get(&st.subs.meta, encoding::meta_key(gen, b"plain"))
        .expect("get")
        .expect("record");
    st.db
        .put(&st.subs.meta, encoding::meta_key(gen, &b), &rec)
        .expect("forge");
    assert!(run(&shared, &mut c, &[b"GET", &b]).is_err());
    assert_eq!(
        run(&shared, &mut c, &[b"GET", &a]),
        Ok(Reply::Bulk(b"secret".to_vec()))
    );
}
