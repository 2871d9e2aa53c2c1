//! Model tests per type: seeded random commands on a few keys go to nacre-server and to
//! redis-server 7.0 and every reply must match (redis-server is the model). Lists grow to
//! hundreds of elements so that `LINSERT` and `LREM` shift both sides of long lists. The
//! seed is printed; `NACRE_SEED=n` replays one. Without redis-server each test says so and
//! passes.

mod common;
mod diff;

use diff::{Diff, Norm};

struct Rng(nacre_pmem::SplitMix64);

impl Rng {
    fn seeded() -> Rng {
        let seed = std::env::var("NACRE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        eprintln!("seed {seed} (replay with NACRE_SEED={seed})");
        Rng(nacre_pmem::SplitMix64::new(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// Runs `steps` generated commands, stopping at the first difference.
fn run(name: &'static str, steps: usize, mut gen: impl FnMut(&mut Rng) -> (Norm, String)) {
    let Some(mut d) = Diff::start(name) else {
        return;
    };
    let mut rng = Rng::seeded();
    for step in 0..steps {
        let (norm, cmd) = gen(&mut rng);
        let words: Vec<&[u8]> = cmd.split(' ').map(str::as_bytes).collect();
        d.check_on(0, norm, &words);
        if d.mismatches() > 0 {
            eprintln!("[{name}] first difference at step {step}");
            break;
        }
    }
    d.finish();
}

const VALUES: &[&str] = &["a", "b", "c", "d", "1", "2", "-3", "x"];

#[test]
fn lists_against_redis() {
    run("random lists", 3000, |r| {
        let k = r.pick(&["l1", "l1", "l1", "l2"]);
        let v = r.pick(VALUES);
        let w = r.pick(VALUES);
        let i = r.int(-300, 300);
        let j = r.int(-300, 300);
        let n = r.int(-4, 4);
        let side = r.pick(&["LEFT", "RIGHT"]);
        let side2 = r.pick(&["LEFT", "RIGHT"]);
        let cmd = match r.below(20) {
            0..=3 => format!("RPUSH {k} {v} {w} {v}"),
            4..=6 => format!("LPUSH {k} {w} {v}"),
            7 => format!("LINSERT {k} {} {v} {w}", r.pick(&["BEFORE", "AFTER"])),
            8 => format!("LREM {k} {n} {v}"),
            9 => format!("LPOP {k}"),
            10 => format!("RPOP {k} {}", r.int(0, 3)),
            11 => format!("LSET {k} {i} {w}"),
            12 => format!("LINDEX {k} {i}"),
            13 => format!("LRANGE {k} {i} {j}"),
            14 => format!(
                "LPOS {k} {v} RANK {} COUNT {}",
                r.pick(&["1", "2", "-1", "-2"]),
                r.int(0, 3)
            ),
            15 => format!("LMOVE l1 l2 {side} {side2}"),
            16 if r.below(50) == 0 => format!("LTRIM {k} {i} {j}"),
            17 => format!("LLEN {k}"),
            18 => format!("LMPOP 2 l2 l1 {side} COUNT {}", r.int(1, 3)),
            _ => format!("LRANGE {k} 0 -1"),
        };
        (Norm::Exact, cmd)
    });
}

#[test]
fn sets_against_redis() {
    run("random sets", 2000, |r| {
        let k = r.pick(&["s1", "s2", "s3"]);
        let k2 = r.pick(&["s1", "s2", "s3", "none"]);
        let v = r.pick(VALUES);
        let w = r.pick(VALUES);
        match r.below(14) {
            0..=3 => (Norm::Exact, format!("SADD {k} {v} {w}")),
            4 => (Norm::Exact, format!("SREM {k} {v} {w}")),
            5 => (Norm::Exact, format!("SISMEMBER {k} {v}")),
            6 => (Norm::Exact, format!("SMISMEMBER {k} {v} {w}")),
            7 => (Norm::Exact, format!("SCARD {k}")),
            8 => (Norm::Exact, format!("SMOVE {k} {k2} {v}")),
            9 => (Norm::Sorted, format!("SINTER {k} {k2}")),
            10 => (Norm::Sorted, format!("SUNION {k} {k2}")),
            11 => (Norm::Sorted, format!("SDIFF {k} {k2}")),
            12 => (
                Norm::Exact,
                format!(
                    "{} {k} {k2} {}",
                    r.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]),
                    r.pick(&["s1", "s2", "s3"])
                ),
            ),
            _ => (Norm::Sorted, format!("SMEMBERS {k}")),
        }
    });
}

#[test]
fn sorted_sets_against_redis() {
    const SCORES: &[&str] = &[
        "0", "1", "2", "2", "-1", "1.5", "-inf", "+inf", "3e2", "-0.25",
    ];
    const BOUNDS: &[&str] = &[
        "-inf", "+inf", "0", "(0", "1", "(1", "2", "(2", "1.5", "(300",
    ];
    const MEMBERS: &[&str] = &["a", "b", "c", "d", "e", "f", "g", "h", "aa", "ab"];
    run("random sorted sets", 3000, |r| {
        let k = r.pick(&["z1", "z1", "z2"]);
        let m = r.pick(MEMBERS);
        let m2 = r.pick(MEMBERS);
        let s = r.pick(SCORES);
        let s2 = r.pick(SCORES);
        let (lo, hi) = (r.pick(BOUNDS), r.pick(BOUNDS));
        let (i, j) = (r.int(-12, 12), r.int(-12, 12));
        let cmd = match r.below(22) {
            0..=4 => format!("ZADD {k} {s} {m} {s2} {m2}"),
            5 => format!(
                "ZADD {k} {} {s} {m}",
                r.pick(&["NX", "XX", "GT", "LT", "CH", "XX CH", "GT CH", "LT CH"])
            ),
            6 => format!("ZINCRBY {k} {} {m}", r.pick(&["1", "-2", "0.5"])),
            7 => format!("ZREM {k} {m} {m2}"),
            8 => format!("ZRANGE {k} {i} {j} WITHSCORES"),
            9 => format!("ZRANGE {k} {i} {j} REV"),
            10 => format!("ZRANGEBYSCORE {k} {lo} {hi} WITHSCORES"),
            11 => format!(
                "ZREVRANGEBYSCORE {k} {hi} {lo} LIMIT {} {}",
                r.int(0, 3),
                r.int(-1, 3)
            ),
            12 => format!("ZRANK {k} {m}"),
            13 => format!("ZREVRANK {k} {m}"),
            14 => format!("ZCOUNT {k} {lo} {hi}"),
            15 if r.below(4) == 0 => format!("ZREMRANGEBYSCORE {k} {lo} {hi}"),
            16 if r.below(4) == 0 => format!("ZREMRANGEBYRANK {k} {i} {j}"),
            17 => format!("{} {k} {}", r.pick(&["ZPOPMIN", "ZPOPMAX"]), r.int(0, 2)),
            18 => format!(
                "{} z3 2 z1 z2 AGGREGATE {}",
                r.pick(&["ZUNIONSTORE", "ZINTERSTORE"]),
                r.pick(&["SUM", "MIN", "MAX"])
            ),
            19 => "ZRANGE z3 0 -1 WITHSCORES".to_string(),
            20 => format!("ZSCORE {k} {m}"),
            _ => format!("ZCARD {k}"),
        };
        (Norm::Exact, cmd)
    });
}
