//! Where a script runs: on the runtime worker that took its command (a short run), or on a
//! thread of its own after the worker's other work has moved away (a long one).
//!
//! Invariant W1 (no worker stays held): a run that goes on past the count hook gives its
//! worker's queue to another thread, whether it was started in place or not. A run started
//! in place (a script whose runs were short so far, or one inside EXEC) may turn long —
//! a loop over a key that grew, a script that never ends — and on a server with a single
//! worker nothing else, not even SCRIPT KILL, would be served while it runs.

use std::cell::Cell;
use std::time::Duration;

thread_local! {
    /// Set while this thread runs a script whose worker was given away first.
    static OFF_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// How long a run waits, at most, for another thread to take its worker's queue before it
/// goes on (and tries again at a later hook).
const HAND_OFF_WAIT: Duration = Duration::from_millis(200);

/// Runs `f`, which may take long (a script), with the runtime's other tasks moved to another
/// thread first, so that other clients are served (and told BUSY) meanwhile.
pub fn off_worker<R>(f: impl FnOnce() -> R) -> R {
    if multi_thread_runtime().is_none() {
        return f();
    }
    tokio::task::block_in_place(|| {
        let was = OFF_WORKER.replace(true);
        let _restore = Restore(was);
        f()
    })
}

/// The runtime this thread runs in, when it is multi-threaded (where `block_in_place` may
/// move a worker's queue away).
fn multi_thread_runtime() -> Option<tokio::runtime::Handle> {
    tokio::runtime::Handle::try_current()
        .ok()
        .filter(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// Puts [`OFF_WORKER`] back as it was, also when the run unwinds.
struct Restore(bool);

impl Drop for Restore {
    fn drop(&mut self) {
        OFF_WORKER.set(self.0);
    }
}

/// Called by the count hook of a run at its `hooks`-th look: a run that started in place
/// hands its worker's queue to another thread (W1). Tried at the 1st, 2nd, 4th, 8th... look,
/// so a hand-off that did not happen (another worker ran the marker task first, or no
/// thread came in time) is tried again at a cost that shrinks as the run goes on.
pub fn run_went_long(hooks: u32) {
    if OFF_WORKER.get() || !hooks.is_power_of_two() {
        return;
    }
    let Some(h) = multi_thread_runtime() else {
        return;
    };
    // A task spawned here joins this worker's own queue. `block_in_place` gives that queue
    // to a new thread; the marker runs once that thread (or a worker stealing from the
    // queue, when there are others to serve clients anyway) takes it. Waiting for it keeps
    // the queue from being taken back before the new thread has it.
    let (tx, rx) = std::sync::mpsc::sync_channel::<()>(1);
    h.spawn(async move {
        let _ = tx.send(());
    });
    tokio::task::block_in_place(|| {
        let _ = rx.recv_timeout(HAND_OFF_WAIT);
    });
}
