//! Redis Sentinel 7.0 (`redis-server --sentinel`) failing over a Nacre deployment: one
//! nacre-server master and two nacre-server replicas watched by three sentinels. A writer
//! confirms each write with `WAIT 1 0`; the master is SIGKILLed; a sentinel promotes a
//! replica and points the other at it; the writer finds the new master through Sentinel and
//! writes again; no write that `WAIT` confirmed is missing.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{q, text, wait_for, Server};
use redis::Connection;

fn connect(port: u16) -> Option<Connection> {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .ok()?
        .get_connection_with_timeout(Duration::from_secs(2))
        .ok()
}

struct Sentinel {
    port: u16,
    child: Child,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sentinel(dir: &std::path::Path, master_port: u16, i: usize) -> Option<Sentinel> {
    let port = common::free_port();
    let conf = dir.join(format!("sentinel-{i}.conf"));
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 {master_port} 2\nsentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 10000\nsentinel parallel-syncs mymaster 1\n",
            dir.display()
        ),
    )
    .ok()?;
    let child = Command::new("redis-server")
        .arg(&conf)
        .arg("--sentinel")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    common::wait_ready(port);
    Some(Sentinel { port, child })
}

#[test]
fn sentinel_fails_over_a_nacre_master_and_no_acknowledged_write_is_lost() {
    if Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("redis-server is not installed; skipped");
        return;
    }
    let mut master = Server::start(&[]);
    let r1 = Server::start(&[]);
    let r2 = Server::start(&[]);
    let mp = master.port.to_string();
    for r in [&r1, &r2] {
        let mut c = r.conn();
        assert_eq!(text(&q(&mut c, &["REPLICAOF", "127.0.0.1", &mp])), "OK");
    }
    let mut m = master.conn();
    wait_for("both replicas attached", Duration::from_secs(20), || {
        text(&q(&mut m, &["WAIT", "2", "100"])) == "2"
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let sentinels: Vec<Sentinel> = (0..3)
        .filter_map(|i| sentinel(dir.path(), master.port, i))
        .collect();
    assert_eq!(sentinels.len(), 3);
    let mut s0 = connect(sentinels[0].port).expect("sentinel");
    wait_for(
        "the sentinels to see both replicas and each other",
        Duration::from_secs(30),
        || {
            let m = text(&q(&mut s0, &["SENTINEL", "MASTER", "mymaster"]));
            let fields: Vec<&str> = m.trim_matches(['[', ']']).split(',').collect();
            let field = |name: &str| {
                fields
                    .iter()
                    .position(|f| *f == name)
                    .and_then(|i| fields.get(i + 1))
                    .copied()
                    .unwrap_or("")
                    .to_string()
            };
            field("num-slaves") == "2" && field("num-other-sentinels") == "2"
        },
    );
    // Writes, each confirmed by a replica.
    let mut acked = Vec::new();
    for i in 0..200 {
        let k = format!("w{i}");
        assert_eq!(text(&q(&mut m, &["SET", &k, &i.to_string()])), "OK");
        // At least one replica has it (both may, and WAIT then says 2).
        if text(&q(&mut m, &["WAIT", "1", "0"]))
            .parse::<u32>()
            .unwrap_or(0)
            >= 1
        {
            acked.push(k);
        }
    }
    assert_eq!(acked.len(), 200);
    let killed_at = Instant::now();
    master.kill();
    // The writer asks Sentinel where the master is until it moves, then writes there.
    let mut new_port = None;
    wait_for("a failover", Duration::from_secs(60), || {
        let addr = text(&q(
            &mut s0,
            &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"],
        ));
        let port = addr
            .trim_matches(['[', ']'])
            .rsplit(',')
            .next()
            .and_then(|p| p.parse::<u16>().ok());
        if port.is_some_and(|p| p != master.port) {
            new_port = port;
            return true;
        }
        false
    });
    let new_port = new_port.expect("new master");
    let mut first_write = None;
    wait_for(
        "a write accepted by the new master",
        Duration::from_secs(30),
        || {
            let Some(mut c) = connect(new_port) else {
                return false;
            };
            if text(&q(&mut c, &["SET", "after-failover", "1"])) == "OK" {
                first_write = Some(killed_at.elapsed());
                return true;
            }
            false
        },
    );
    eprintln!(
        "SIGKILL to the first write accepted by the new master: {:?} (down-after-milliseconds 1000)",
        first_write.expect("write")
    );
    let mut c = connect(new_port).expect("new master");
    assert!(text(&q(&mut c, &["ROLE"])).starts_with("[master"));
    for k in &acked {
        assert_ne!(
            text(&q(&mut c, &["GET", k])),
            "nil",
            "{k} was acknowledged and is lost"
        );
    }
    // The other replica is told to follow the new master and gets its write. Sentinel's
    // reconfiguration ends with `CLIENT KILL TYPE normal` on that replica, which closes
    // every client's connection there (ours too): each look uses a new one.
    let other = if new_port == r1.port { &r2 } else { &r1 };
    let t = Instant::now();
    let mut last = String::new();
    while t.elapsed() < Duration::from_secs(30) {
        if let Some(mut o) = connect(other.port) {
            last = text(&q(&mut o, &["GET", "after-failover"]));
            if last == "1" {
                eprintln!(
                    "the other replica followed the new master after {:?}",
                    t.elapsed()
                );
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the other replica did not have the new master's write after 30 s: {last}");
}
