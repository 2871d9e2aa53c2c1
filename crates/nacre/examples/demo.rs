//! A tour of the embedded engine: open (or recover) a database, write a batch across two
//! subtables, read it back at a snapshot and through an iterator, and close.
//!
//! `cargo run --release -p nacre --example demo [-- <pool path> [backend]]`
//! The default path is on /dev/shm (else the temp dir); run it twice to see recovery.

use nacre::{Db, IterOptions, Options, WriteBatch};
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().map(PathBuf::from).unwrap_or_else(|| {
        let dir = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        dir.join("nacre-demo.pool")
    });
    let mut opts = Options::new(&path);
    opts.pool_size = 256 << 20;
    if let Some(b) = args.next() {
        opts.pool.backend = b.parse()?;
    }
    let db = Db::open(opts)?;
    let rep = db.recovery_report();
    println!("open    {} ({})", path.display(), db.backend_report());
    println!(
        "        recovered {} records in {} memtables in {:?} ({} threads, {})",
        rep.records,
        rep.memtables,
        rep.elapsed,
        rep.threads,
        if rep.clean {
            "after a clean close"
        } else {
            "after a crash or on first use"
        }
    );
    let users = db.subtable("users")?;
    let orders = db.subtable("orders")?;
    let run = db.latest_sequence();
    let mut batch = WriteBatch::new();
    batch.put(&users, format!("user:{run:06}"), "ada").put(
        &orders,
        format!("order:{run:06}"),
        format!("user:{run:06} bought 3 shells"),
    );
    db.write(batch)?;
    let snap = db.snapshot();
    db.put(&users, format!("user:{run:06}"), "ada lovelace")?;
    println!(
        "write   user:{run:06} = {:?} (at the earlier snapshot {:?})",
        String::from_utf8_lossy(
            &db.get(&users, format!("user:{run:06}"))?
                .unwrap_or_default()
        ),
        String::from_utf8_lossy(
            &db.get_at(&users, format!("user:{run:06}"), &snap)?
                .unwrap_or_default()
        ),
    );
    let last: Vec<_> = db
        .iter(
            &orders,
            IterOptions {
                reverse: true,
                prefix: Some(b"order:".to_vec()),
                ..Default::default()
            },
        )?
        .take(3)
        .collect::<Result<_, _>>()?;
    for (k, v) in last {
        println!(
            "orders  {} -> {}",
            String::from_utf8_lossy(&k),
            String::from_utf8_lossy(&v)
        );
    }
    drop(snap);
    db.close()?;
    println!("closed  cleanly; run again to reopen");
    Ok(())
}
