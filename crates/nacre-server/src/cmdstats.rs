//! Per-command statistics for `INFO commandstats`: calls, time, rejections and failures, as
//! Redis 7.0 counts them. A connection counts its own and adds them to the server's once per
//! round of requests, so the hot path touches no shared counter.

use std::collections::BTreeMap;

use parking_lot::Mutex;

use crate::cmd::registry::full_name;

/// One command's (or subcommand's) counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Runs (not counting refused ones).
    pub calls: u64,
    /// Microseconds spent running.
    pub usec: u64,
    /// Refused before running (arity, authentication, a full pool...).
    pub rejected: u64,
    /// Ran and answered an error.
    pub failed: u64,
    /// Runs by duration: `hist[i]` counts those of at most 2^i microseconds (and more than
    /// 2^(i-1)).
    pub hist: [u64; BUCKETS],
}

/// Histogram buckets: up to 2^39 microseconds (six days).
pub const BUCKETS: usize = 40;

/// The bucket of a run of `usec` microseconds.
fn bucket(usec: u64) -> usize {
    let b = 64 - usec.saturating_sub(1).leading_zeros() as usize;
    b.min(BUCKETS - 1)
}

impl Default for Stat {
    fn default() -> Stat {
        Stat {
            calls: 0,
            usec: 0,
            rejected: 0,
            failed: 0,
            hist: [0; BUCKETS],
        }
    }
}

impl Stat {
    fn add(&mut self, o: &Stat) {
        self.calls += o.calls;
        self.usec += o.usec;
        self.rejected += o.rejected;
        self.failed += o.failed;
        for (a, b) in self.hist.iter_mut().zip(o.hist.iter()) {
            *a += b;
        }
    }

    /// (bucket bound in microseconds, runs up to it), from the first bucket used to the
    /// last, as `LATENCY HISTOGRAM` shows them.
    pub fn cumulative(&self) -> Vec<(u64, u64)> {
        let (Some(first), Some(last)) = (
            self.hist.iter().position(|&n| n > 0),
            self.hist.iter().rposition(|&n| n > 0),
        ) else {
            return Vec::new();
        };
        let mut sum: u64 = self.hist[..first].iter().sum();
        (first..=last)
            .map(|i| {
                sum += self.hist[i];
                (1u64 << i, sum)
            })
            .collect()
    }
}

/// A connection's counts since its last flush, by name (`get`, `config|set`).
#[derive(Default)]
pub struct Local(Vec<(&'static str, Option<&'static str>, Stat)>);

impl Local {
    /// Counts one request of `name` (subcommand `sub`).
    pub fn record(
        &mut self,
        name: &'static str,
        sub: Option<&'static str>,
        usec: u64,
        rejected: bool,
        failed: bool,
    ) {
        let at = match self
            .0
            .iter()
            .position(|(n, s, _)| std::ptr::eq(*n, name) && *s == sub)
        {
            Some(i) => i,
            None => {
                self.0.push((name, sub, Stat::default()));
                self.0.len() - 1
            }
        };
        let s = &mut self.0[at].2;
        if rejected {
            s.rejected += 1;
        } else {
            s.calls += 1;
            s.usec += usec;
            s.hist[bucket(usec)] += 1;
            if failed {
                s.failed += 1;
            }
        }
    }

    /// Counts a failure of a call already counted (a parked command answered with an error).
    pub fn failed_later(&mut self, name: &'static str, sub: Option<&'static str>) {
        if let Some((_, _, s)) = self
            .0
            .iter_mut()
            .find(|(n, s, _)| std::ptr::eq(*n, name) && *s == sub)
        {
            s.failed += 1;
        } else {
            self.0.push((
                name,
                sub,
                Stat {
                    failed: 1,
                    ..Stat::default()
                },
            ));
        }
    }

    /// Adds these counts to the server's and clears them.
    pub fn flush(&mut self, to: &Stats) {
        if self.0.is_empty() {
            return;
        }
        let mut all = to.0.lock();
        for (name, sub, s) in self.0.drain(..) {
            all.entry((name, sub)).or_default().add(&s);
        }
    }
}

/// The server's counts.
#[derive(Default)]
pub struct Stats(Mutex<BTreeMap<(&'static str, Option<&'static str>), Stat>>);

impl Stats {
    /// The `INFO commandstats` section's lines.
    pub fn lines(&self) -> String {
        let mut out = String::new();
        for ((name, sub), s) in self.0.lock().iter() {
            let full = full_name(name, *sub);
            let per = if s.calls > 0 {
                s.usec as f64 / s.calls as f64
            } else {
                0.0
            };
            out.push_str(&format!(
                "cmdstat_{full}:calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}\r\n",
                s.calls, s.usec, s.rejected, s.failed
            ));
        }
        out
    }

    /// The counts of every command and subcommand that ran, by full name (`client|id`).
    pub fn all(&self) -> Vec<(String, Stat)> {
        self.0
            .lock()
            .iter()
            .filter(|(_, s)| s.calls > 0)
            .map(|((name, sub), s)| (full_name(name, *sub), *s))
            .collect()
    }

    /// Forgets every count (`CONFIG RESETSTAT`).
    pub fn reset(&self) {
        self.0.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_per_command_and_subcommand() {
        let all = Stats::default();
        let mut l = Local::default();
        l.record("get", None, 3, false, false);
        l.record("get", None, 5, false, true);
        l.record("config", Some("get"), 1, true, false);
        l.flush(&all);
        l.record("get", None, 2, false, false);
        l.flush(&all);
        let text = all.lines();
        assert!(text.contains(
            "cmdstat_get:calls=3,usec=10,usec_per_call=3.33,rejected_calls=0,failed_calls=1\r\n"
        ));
        assert!(text.contains(
            "cmdstat_config|get:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0\r\n"
        ));
        let get = all.all().into_iter().find(|(n, _)| n == "get").unwrap().1;
        // 3 µs, 5 µs and 2 µs: buckets 4, 8 and 2.
        assert_eq!(get.cumulative(), vec![(2, 1), (4, 2), (8, 3)]);
        assert_eq!(bucket(1), 0);
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1025), 11);
        all.reset();
        assert!(all.lines().is_empty());
    }
}
