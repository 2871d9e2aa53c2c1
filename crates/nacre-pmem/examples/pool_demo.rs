//! A tour of nacre-pmem: create a pool (on /dev/shm when present, else the temp dir), write
//! and persist a record, reopen it, and show a simulated power failure losing an unflushed
//! write while keeping a persisted one.
//!
//! `cargo run --release -p nacre-pmem --example pool_demo [-- <pool path> [backend]]`

use nacre_pmem::{Backend, CrashPolicy, PmOffset, Pool, PoolOptions};
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().map(PathBuf::from).unwrap_or_else(|| {
        let dir = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        dir.join(format!("nacre-demo-{}.pool", std::process::id()))
    });
    let backend: Backend = match args.next() {
        Some(b) => b.parse()?,
        None => Backend::Auto,
    };
    let opts = PoolOptions::with_backend(backend);

    let pool = Pool::open_or_create(&path, 16 << 20, &opts)?;
    println!("pool   {} ({} MiB)", path.display(), pool.size() >> 20);
    println!("        {}", pool.report());
    let region = match pool.region("demo") {
        Some(r) => r,
        None => pool.reserve_region("demo", 1 << 20, 4096, 0)?,
    };
    let count_at = region.offset;
    let n = pool.load_u64(count_at) + 1;
    let msg = format!("hello from run {n}");
    let rec = region.offset.add(64);
    // SAFETY: this example's own pool, one thread.
    unsafe { pool.copy_persist(rec, msg.as_bytes())? };
    pool.persist_u64(count_at, n)?;
    drop(pool);

    let pool = Pool::open(&path, &opts)?;
    let mut buf = vec![0u8; msg.len()];
    // SAFETY: this example's own pool, one thread.
    unsafe { pool.read(rec, &mut buf) };
    println!(
        "reopen  run counter {} and record {:?}",
        pool.load_u64(count_at),
        String::from_utf8_lossy(&buf)
    );
    drop(pool);
    std::fs::remove_file(&path)?;

    let sim = Pool::create_sim(1 << 20, &PoolOptions::with_backend(Backend::Sim))?;
    let at = sim.data_start();
    // SAFETY: this example's own pool, one thread.
    unsafe { sim.write(at, b"persisted") };
    sim.persist(at, 9)?;
    // SAFETY: this example's own pool, one thread.
    unsafe { sim.write(PmOffset(at.get() + 64), b"volatile!") };
    let control = sim.sim().ok_or("sim backend has a controller")?;
    let after = Pool::open_sim(
        control.crash(CrashPolicy::KeepNone),
        &PoolOptions::with_backend(Backend::Sim),
    )?;
    let (mut a, mut b) = ([0u8; 9], [0u8; 9]);
    // SAFETY: this example's own pool, one thread.
    unsafe { after.read(at, &mut a) };
    // SAFETY: this example's own pool, one thread.
    unsafe { after.read(PmOffset(at.get() + 64), &mut b) };
    println!(
        "sim     after power failure: persisted {:?}, unflushed {:?} ({} fences issued)",
        String::from_utf8_lossy(&a),
        String::from_utf8_lossy(&b).trim_end_matches('\0'),
        control.fence_count()
    );
    Ok(())
}
