//! Commands whose writes exceed a zone (4 MiB of records in one engine batch) run as in Redis,
//! through a real socket: a 200,000-element LPUSH, an MSET of 100,000 keys, a 200,000-member
//! SADD, a 100,000-field HSET and a MULTI of 25,000 SETs of 200 bytes; another client's
//! writes go on working afterwards.

mod common;

use common::Server;

#[test]
fn commands_writing_more_than_a_zone_succeed() {
    let s = Server::start(&[]);
    let mut c = s.conn();

    let mut lpush = redis::cmd("LPUSH");
    lpush.arg("list");
    for i in 0..200_000u32 {
        lpush.arg(format!("element-{i:08}"));
    }
    let n: u64 = lpush.query(&mut c).expect("LPUSH of 200k elements");
    assert_eq!(n, 200_000);
    let first: String = redis::cmd("LINDEX")
        .arg("list")
        .arg(0)
        .query(&mut c)
        .expect("LINDEX");
    assert_eq!(first, "element-00199999");

    let mut mset = redis::cmd("MSET");
    for i in 0..100_000u32 {
        mset.arg(format!("key:{i:06}")).arg(format!("value-{i}"));
    }
    let _: () = mset.query(&mut c).expect("MSET of 100k keys");
    let v: String = redis::cmd("GET")
        .arg("key:099999")
        .query(&mut c)
        .expect("GET");
    assert_eq!(v, "value-99999");

    let mut sadd = redis::cmd("SADD");
    sadd.arg("set");
    for i in 0..200_000u32 {
        sadd.arg(format!("member-{i}"));
    }
    let n: u64 = sadd.query(&mut c).expect("SADD of 200k members");
    assert_eq!(n, 200_000);

    let mut hset = redis::cmd("HSET");
    hset.arg("hash");
    for i in 0..100_000u32 {
        hset.arg(format!("field-{i}")).arg(i);
    }
    let n: u64 = hset.query(&mut c).expect("HSET of 100k fields");
    assert_eq!(n, 100_000);

    let mut pipe = redis::pipe();
    pipe.atomic();
    for i in 0..25_000u32 {
        pipe.cmd("SET")
            .arg(format!("m:{i}"))
            .arg(vec![b'v'; 200])
            .ignore();
    }
    let _: () = pipe.query(&mut c).expect("MULTI of 25k SETs of 200 B");

    let mut other = s.conn();
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("ok")
        .query(&mut other)
        .expect("another client's write");
    let len: u64 = redis::cmd("LLEN").arg("list").query(&mut c).expect("LLEN");
    let card: u64 = redis::cmd("SCARD").arg("set").query(&mut c).expect("SCARD");
    let hlen: u64 = redis::cmd("HLEN").arg("hash").query(&mut c).expect("HLEN");
    let m: Vec<u8> = redis::cmd("GET").arg("m:24999").query(&mut c).expect("GET");
    let keys: u64 = redis::cmd("DBSIZE").query(&mut c).expect("DBSIZE");
    assert_eq!((len, card, hlen), (200_000, 200_000, 100_000));
    assert_eq!(m, vec![b'v'; 200]);
    assert_eq!(keys, 3 + 100_000 + 25_000 + 1);
}
