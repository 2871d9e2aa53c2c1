//! Helpers shared by the engine's integration tests.

use std::time::{Duration, Instant};

use nacre::{Db, Stats};

/// Waits until `cond` holds for the database's stats (background work is asynchronous);
/// fails with `what` and the stats after a minute.
pub fn eventually(db: &Db, what: &str, cond: impl Fn(&Stats) -> bool) -> Stats {
    let start = Instant::now();
    loop {
        let s = db.stats();
        if cond(&s) {
            return s;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{what}: {s:#?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
