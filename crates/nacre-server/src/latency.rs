//! Redis's latency monitor: events (a command, an expire cycle) that took at least
//! `latency-monitor-threshold` milliseconds, one sample per second per event (the largest),
//! the last 160 kept, for `LATENCY LATEST HISTORY RESET DOCTOR`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Samples kept per event, as Redis keeps.
const SAMPLES: usize = 160;

#[derive(Default)]
struct Series {
    /// (Unix seconds, milliseconds), oldest first.
    samples: VecDeque<(u64, u64)>,
    /// The largest ever recorded.
    max: u64,
}

/// Events above the threshold.
#[derive(Default)]
pub struct Monitor {
    /// `latency-monitor-threshold` in milliseconds (0: off).
    pub threshold: AtomicU64,
    events: Mutex<BTreeMap<&'static str, Series>>,
}

impl Monitor {
    /// Records that `event` took `ms` milliseconds, if that reaches the threshold.
    pub fn add(&self, event: &'static str, ms: u64) {
        let t = self.threshold.load(Ordering::Relaxed);
        if t == 0 || ms < t {
            return;
        }
        let now = crate::shared::now_ms() / 1000;
        let mut all = self.events.lock();
        let s = all.entry(event).or_default();
        s.max = s.max.max(ms);
        match s.samples.back_mut() {
            Some((at, v)) if *at == now => *v = (*v).max(ms),
            _ => {
                if s.samples.len() == SAMPLES {
                    s.samples.pop_front();
                }
                s.samples.push_back((now, ms));
            }
        }
    }

    /// (event, time of its last sample, that sample, the largest), per event.
    pub fn latest(&self) -> Vec<(&'static str, u64, u64, u64)> {
        self.events
            .lock()
            .iter()
            .filter_map(|(e, s)| s.samples.back().map(|&(at, v)| (*e, at, v, s.max)))
            .collect()
    }

    /// `event`'s samples, oldest first (none for an unknown event).
    pub fn history(&self, event: &str) -> Vec<(u64, u64)> {
        self.events
            .lock()
            .get(event)
            .map(|s| s.samples.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Forgets `events` (all of them when empty); how many were known.
    pub fn reset(&self, events: &[String]) -> usize {
        let mut all = self.events.lock();
        if events.is_empty() {
            let n = all.len();
            all.clear();
            return n;
        }
        events
            .iter()
            .filter(|e| all.remove(e.as_str()).is_some())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_above_the_threshold_one_per_second() {
        let m = Monitor::default();
        m.add("command", 500);
        assert!(m.latest().is_empty(), "off while the threshold is 0");
        m.threshold.store(100, Ordering::Relaxed);
        m.add("command", 50);
        assert!(m.latest().is_empty());
        m.add("command", 300);
        m.add("command", 200);
        let h = m.history("command");
        assert!(h.len() == 1 || h.len() == 2, "{h:?}");
        assert_eq!(m.latest()[0].3, 300);
        assert_eq!(m.reset(&["blabla".into()]), 0);
        assert_eq!(m.reset(&[]), 1);
        assert!(m.latest().is_empty());
    }
}
