//! Compaction on request ([`crate::Db::compact_pm`]): the cleaner runs although free zones are
//! not low, so that space a big delete left dead goes back now instead of when the pool fills.
//! Moving the zones that hold the deleted records takes their ghosts out of PM, after which
//! the tombstones that waited for them leave the Global Index (GI3, the worker's `revisit`),
//! and their zones become dead and are cleaned in turn.
//!
//! Invariants:
//! - R1: a request is answered only after the worker, in rounds that began after it was
//!   made, found nothing to do for a whole revisit cycle: no merge, no version dropped, no
//!   zone retired or given back, for as many rounds in a row as it takes to look at every
//!   key waiting in the revisit queues once more. Zones held by readers do not hold an
//!   answer back (they are given back once the readers are gone, as always).
//! - R2: it moves zones only through the cleaner ([`super::cleaner::clean_one`]) at the
//!   non-urgent thresholds, so its crash safety is the cleaner's, and its passes follow P3
//!   and P4; the one exception to P3 is a lone nearly empty zone, which it may move even if
//!   that only breaks even ([`super::cleaner`]'s `breaks_even`): its copies join the
//!   subtable's relocation memtable, whose zones are never moved while it is written, so
//!   each request moves such a zone at most once.
//!
//! Thread safety: requests are counters in [`super::Space`] (any thread); the state here is
//! the background worker's alone.

use std::sync::atomic::Ordering;

use super::Space;

/// The background worker's side of compaction requests.
pub(crate) struct Compaction {
    /// The newest request taken on (requests are numbered from 1; 0: none).
    serving: u64,
    /// Rounds in a row, since the newest request was taken on, in which nothing changed.
    quiet: u64,
    /// The quiet rounds it takes, after the first, to look at every key that was in the
    /// revisit queues when the quiet rounds began.
    need: u64,
}

/// What a round is to do about compaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Round {
    /// No request waits.
    Idle,
    /// A request waits: clean without pressure.
    Compact {
        /// A request was taken on this round (the cleaner's spent pass gives way, P4).
        fresh: bool,
    },
}

impl Compaction {
    pub fn new() -> Compaction {
        Compaction {
            serving: 0,
            quiet: 0,
            need: 0,
        }
    }

    /// The start of a round: takes on the newest request, if any.
    pub fn begin(&mut self, space: &Space) -> Round {
        let asked = space.compact_asked.load(Ordering::Acquire);
        let done = space.compact_done.load(Ordering::Acquire);
        if asked <= done {
            return Round::Idle;
        }
        let fresh = asked > self.serving;
        if fresh {
            // Rounds before a request do not count for it (R1).
            self.serving = asked;
            self.quiet = 0;
        }
        Round::Compact { fresh }
    }

    /// The end of a compacting round: `changed` says whether it merged, dropped versions,
    /// retired or gave back zones; `cycle`: the rounds it takes to look at every key now in
    /// the revisit queues. Answers the requests taken on once nothing changed for a whole
    /// cycle counted from the first quiet round (R1): each round looks at the front of the
    /// queues and puts keys still waiting at the back.
    pub fn end(&mut self, space: &Space, changed: bool, cycle: u64) {
        if changed {
            self.quiet = 0;
            return;
        }
        self.quiet += 1;
        if self.quiet == 1 {
            self.need = cycle;
        }
        if self.quiet > self.need {
            tracing::debug!(request = self.serving, "compaction done");
            space.compact_done.fetch_max(self.serving, Ordering::AcqRel);
            self.quiet = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_answered_after_a_quiet_cycle_that_began_after_it() {
        let space = Space::new(64, 2);
        let mut c = Compaction::new();
        assert_eq!(c.begin(&space), Round::Idle);
        let n = space.ask_compaction();
        assert_eq!(c.begin(&space), Round::Compact { fresh: true });
        c.end(&space, false, 2);
        assert_eq!(c.begin(&space), Round::Compact { fresh: false });
        c.end(&space, true, 2);
        for _ in 0..2 {
            c.begin(&space);
            c.end(&space, false, 2);
        }
        assert!(
            !space.compacted(n),
            "two quiet rounds do not cover a cycle of 2 and one more"
        );
        // A second request meanwhile starts the count again.
        let m = space.ask_compaction();
        assert_eq!(c.begin(&space), Round::Compact { fresh: true });
        c.end(&space, false, 2);
        assert!(!space.compacted(n));
        for _ in 0..2 {
            c.begin(&space);
            c.end(&space, false, 2);
        }
        assert!(space.compacted(n) && space.compacted(m));
        assert_eq!(c.begin(&space), Round::Idle);
    }

    #[test]
    fn the_cycle_is_counted_from_the_queues_when_the_quiet_rounds_began() {
        let space = Space::new(64, 2);
        let mut c = Compaction::new();
        let n = space.ask_compaction();
        c.begin(&space);
        c.end(&space, false, 3);
        // The queues shrink as the keys at their front are found gone: the keys at their
        // back were still not looked at.
        for _ in 0..3 {
            assert!(!space.compacted(n));
            c.begin(&space);
            c.end(&space, false, 0);
        }
        assert!(space.compacted(n));
    }
}
