//! A process killed while it creates a pool leaves a path that the next open accepts: no
//! half-made pool under the pool's name, and no leftover once the next start is done.

mod common;

use nacre_pmem::{Backend, Pool, PoolOptions, MIN_POOL_SIZE};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "NACRE_PMEM_CREATION_CHILD";
/// Zero-filling this much on `msync` takes long enough to be killed in the middle of it.
const CHILD_POOL: u64 = 1 << 30;

/// Run by the child process only: creates a large `msync` pool at the path in `CHILD_ENV`.
#[test]
fn creation_child_body() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let pool = Pool::create(
        &path,
        CHILD_POOL,
        &PoolOptions::with_backend(Backend::Msync),
    )
    .expect("child create");
    println!("CREATED");
    drop(pool);
}

/// The largest file in `dir`, in bytes.
fn largest(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .max()
        .unwrap_or(0)
}

/// Spawns a creator and kills it `after` its file got its size. Returns whether it was
/// killed before it finished.
fn kill_a_creator(dir: &Path, path: &Path, after: Duration) -> bool {
    let mut child = Command::new(std::env::current_exe().expect("exe"))
        .args([
            "creation_child_body",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let t = Instant::now();
    while largest(dir) == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the child never reserved its pool"
        );
        if child.try_wait().expect("try_wait").is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(after);
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    !out.lines().any(|l| l.is_ok_and(|l| l.contains("CREATED")))
}

#[test]
fn a_creator_killed_midway_leaves_a_path_the_next_open_accepts() {
    let dir = common::disk_dir();
    let path = dir.path().join("k.pool");
    let opts = PoolOptions::with_backend(Backend::Msync);
    let mut mid = 0;
    for after_ms in [20, 5, 0] {
        let killed_midway = kill_a_creator(dir.path(), &path, Duration::from_millis(after_ms));
        let pool = Pool::open_or_create(&path, MIN_POOL_SIZE, &opts)
            .unwrap_or_else(|e| panic!("the next start after a kill during creation: {e}"));
        if killed_midway {
            mid += 1;
            assert_eq!(
                pool.size(),
                MIN_POOL_SIZE,
                "the killed creation was not whole"
            );
        }
        drop(pool);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from("k.pool")], "leftovers");
        std::fs::remove_file(&path).expect("remove");
    }
    assert!(
        mid > 0,
        "no kill landed during creation: the test proved nothing"
    );
}
