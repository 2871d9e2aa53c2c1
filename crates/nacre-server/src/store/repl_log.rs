//! The replication stream and its backlog: the commands that reproduce every durable write,
//! in commit order, as Redis's replication protocol carries them (RESP arrays, `SELECT`
//! before a command of another database than the one before it), and the last
//! `repl-backlog-size` bytes of it, from which a replica that lost its link continues.
//!
//! Invariants:
//! - R1: only durable writes enter the stream, in ticket order: a commit's commands are staged
//!   under its ticket when it is queued and appended when its ticket is published durable
//!   (publication is in ticket order, K6); a failed commit's are dropped. A replica therefore
//!   never applies a write its master does not have.
//! - R2: `end` (Redis's `master_repl_offset`) counts every byte ever appended; the backlog
//!   holds bytes `first..=end` (`first` = `end + 1` when empty), so a replica asking for
//!   offset `o` can continue exactly when `first <= o <= end + 1`.
//! - R3: nothing is staged or appended while the log is off (no replica has ever attached):
//!   a server without replicas pays one relaxed load per commit.
//! - R5: the backlog keeps `repl-backlog-size` bytes, and more while an attached replica has
//!   yet to read them (its pin), up to [`PIN_MAX`] past that size: a replica that stops
//!   reading for a while (loading its payload) keeps its place, as a Redis replica's output
//!   buffer keeps what it has not read; one further behind loses it and is disconnected.
//! - R4: while this server is a replica (`proxy`), its own commits stage nothing: the stream
//!   is its master's, appended as it was received once what it carries is durable here
//!   (`append_raw`), so its offsets stay its master's (P1 in repl/mod.rs).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio::sync::watch;

/// Commands of one commit: (database, arguments) each.
pub type Effects = Vec<(usize, Vec<Vec<u8>>)>;

/// A commit's commands encoded for the stream, each with its database.
pub type Encoded = Vec<(usize, Vec<u8>)>;

struct Inner {
    buf: VecDeque<u8>,
    cap: usize,
    /// Offset of `buf[0]` (R2).
    first: u64,
    /// The database the stream last selected.
    db: Option<usize>,
    /// Staged commits: each command encoded, with its database (R1).
    staged: BTreeMap<u64, Encoded>,
    /// Attached replicas' next offsets (R5).
    pins: BTreeMap<u64, u64>,
}

/// The stream and its backlog.
pub struct ReplLog {
    on: AtomicBool,
    /// R4.
    proxy: AtomicBool,
    inner: Mutex<Inner>,
    /// `master_repl_offset`: senders wait on it for more.
    end: watch::Sender<u64>,
}

/// Appends `args` as a RESP array.
pub fn encode_command(out: &mut Vec<u8>, args: &[impl AsRef<[u8]>]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

impl Default for ReplLog {
    fn default() -> ReplLog {
        ReplLog {
            on: AtomicBool::new(false),
            proxy: AtomicBool::new(false),
            inner: Mutex::new(Inner {
                buf: VecDeque::new(),
                cap: 1 << 20,
                first: 1,
                db: None,
                staged: BTreeMap::new(),
                pins: BTreeMap::new(),
            }),
            end: watch::Sender::new(0),
        }
    }
}

impl ReplLog {
    /// Whether commits stage their commands (R3).
    pub fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Makes the stream its master's (a replica) or this server's own again (R4).
    pub fn set_proxy(&self, proxy: bool) {
        self.proxy.store(proxy, Ordering::Release);
    }

    /// Starts keeping the stream (the first replica attached), with `cap` bytes of backlog.
    pub fn start(&self, cap: usize) {
        self.inner.lock().cap = cap.max(16 << 10);
        self.on.store(true, Ordering::Release);
    }

    /// Stops keeping the stream and frees the backlog (`repl-backlog-ttl` passed with no
    /// replica): the offset stays where it is and no longer moves (R3); commits staged
    /// meanwhile are dropped, as their tickets find the log off.
    pub fn stop(&self) {
        self.on.store(false, Ordering::Release);
        let mut g = self.inner.lock();
        let end = *self.end.borrow();
        g.buf = VecDeque::new();
        g.first = end + 1;
        g.db = None;
        g.staged.clear();
    }

    /// Sets the offset the stream continues from (a replica promoted, or one that loaded its
    /// master's data at that offset): the backlog empties and the next command selects its
    /// database again.
    pub fn reset_to(&self, offset: u64) {
        let mut g = self.inner.lock();
        g.buf.clear();
        g.first = offset + 1;
        g.db = None;
        g.staged.clear();
        self.end.send_replace(offset);
    }

    /// `repl-backlog-size`.
    pub fn resize(&self, cap: usize) {
        let mut g = self.inner.lock();
        g.cap = cap.max(16 << 10);
        trim(&mut g);
    }

    /// Encodes a commit's commands for the stream (on the committing thread, before any
    /// shared lock is taken): each command with its database. As Redis: a commit of several
    /// commands is one MULTI/EXEC block, and a SELECT goes before whatever first runs in
    /// another database (MULTI included).
    pub fn encode(&self, effects: Effects) -> Encoded {
        if effects.is_empty() || !self.on() || self.proxy.load(Ordering::Acquire) {
            return Vec::new();
        }
        let wrap = effects.len() > 1;
        let mut parts = Vec::with_capacity(effects.len() + 2 * usize::from(wrap));
        if wrap {
            let mut b = Vec::new();
            encode_command(&mut b, &[b"MULTI".as_slice()]);
            parts.push((effects[0].0, b));
        }
        for (db, args) in &effects {
            let mut b = Vec::new();
            encode_command(&mut b, args);
            parts.push((*db, b));
        }
        if wrap {
            let mut b = Vec::new();
            encode_command(&mut b, &[b"EXEC".as_slice()]);
            parts.push((effects[effects.len() - 1].0, b));
        }
        parts
    }

    /// Stages the encoded commands of the commit with `ticket` (R1).
    pub fn stage(&self, ticket: u64, parts: Encoded) {
        if parts.is_empty() {
            return;
        }
        self.inner.lock().staged.insert(ticket, parts);
    }

    /// Appends the staged commands of every commit up to `ticket`, now durable, in ticket
    /// order; those `failed` says failed are dropped (R1).
    pub fn publish(&self, ticket: u64, failed: impl Fn(u64) -> bool) {
        if !self.on() {
            return;
        }
        let mut g = self.inner.lock();
        if g.staged.is_empty() {
            return;
        }
        let mut bytes = Vec::new();
        while let Some(first) = g.staged.first_entry() {
            if *first.key() > ticket {
                break;
            }
            let (t, parts) = first.remove_entry();
            if failed(t) {
                continue;
            }
            let n = parts.len();
            for (i, (db, b)) in parts.into_iter().enumerate() {
                // EXEC (the last part of a block) runs where the block is.
                let exec = n > 1 && i == n - 1;
                if g.db != Some(db) && !exec {
                    encode_command(
                        &mut bytes,
                        &[b"SELECT".to_vec(), db.to_string().into_bytes()],
                    );
                    g.db = Some(db);
                }
                bytes.extend_from_slice(&b);
            }
        }
        append(&mut g, &self.end, &bytes);
    }

    /// Appends a command that is not a write (`PING`, `REPLCONF GETACK *`) to the stream.
    pub fn append_command(&self, args: &[&[u8]]) {
        if !self.on() {
            return;
        }
        let mut bytes = Vec::new();
        encode_command(&mut bytes, args);
        append(&mut self.inner.lock(), &self.end, &bytes);
    }

    /// Appends bytes of a stream received from this server's own master, as they came
    /// (a replica keeps its master's stream for its own replicas, as Redis does).
    pub fn append_raw(&self, bytes: &[u8]) {
        if !self.on() {
            return;
        }
        append(&mut self.inner.lock(), &self.end, bytes);
    }

    /// Replica `id` has yet to read from `next` on: the backlog keeps it (R5).
    pub fn pin(&self, id: u64, next: u64) {
        self.inner.lock().pins.insert(id, next);
    }

    /// Replica `id` is gone.
    pub fn unpin(&self, id: u64) {
        let mut g = self.inner.lock();
        g.pins.remove(&id);
        trim(&mut g);
    }

    /// `master_repl_offset`.
    pub fn end(&self) -> u64 {
        *self.end.borrow()
    }

    /// A receiver told of every new end.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.end.subscribe()
    }

    /// (first offset held, bytes held): `repl_backlog_first_byte_offset`, `repl_backlog_histlen`.
    pub fn held(&self) -> (u64, u64) {
        let g = self.inner.lock();
        (g.first, g.buf.len() as u64)
    }

    /// `repl-backlog-size` in effect.
    pub fn capacity(&self) -> usize {
        self.inner.lock().cap
    }

    /// The stream's bytes from offset `from` up to the end (at most `max`), if the backlog
    /// still holds `from` (R2); empty when `from` is past the end.
    pub fn read_from(&self, from: u64, max: usize) -> Option<Vec<u8>> {
        let g = self.inner.lock();
        let end = g.first + g.buf.len() as u64;
        if from < g.first || from > end {
            return None;
        }
        let at = (from - g.first) as usize;
        let n = (g.buf.len() - at).min(max);
        let (a, b) = g.buf.as_slices();
        let mut out = Vec::with_capacity(n);
        if at < a.len() {
            let take = (a.len() - at).min(n);
            out.extend_from_slice(&a[at..at + take]);
            out.extend_from_slice(&b[..n - take]);
        } else {
            let at = at - a.len();
            out.extend_from_slice(&b[at..at + n]);
        }
        Some(out)
    }
}

fn append(g: &mut Inner, end: &watch::Sender<u64>, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    g.buf.extend(bytes);
    trim(g);
    let e = g.first + g.buf.len() as u64 - 1;
    end.send_replace(e);
}

/// Bytes a pinned replica may hold past `repl-backlog-size` (Redis's replica output buffer
/// hard limit, `client-output-buffer-limit replica 256mb`).
pub const PIN_MAX: usize = 256 << 20;

fn trim(g: &mut Inner) {
    // The oldest byte a replica still needs (R5), within PIN_MAX past the size.
    let needed = g.pins.values().min().map_or(0, |&p| {
        (g.first + g.buf.len() as u64).saturating_sub(p) as usize
    });
    let keep = g.cap.max(needed.min(g.cap + PIN_MAX));
    if g.buf.len() > keep {
        let drop = g.buf.len() - keep;
        g.buf.drain(..drop);
        g.first += drop as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> Vec<Vec<u8>> {
        args.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    #[test]
    fn durable_commits_enter_in_ticket_order_with_selects_and_failed_ones_do_not() {
        let log = ReplLog::default();
        log.stage(1, log.encode(vec![(0, cmd(&["SET", "a", "1"]))]));
        assert_eq!(log.end(), 0, "off: nothing is kept");
        log.start(1 << 20);
        log.stage(3, log.encode(vec![(1, cmd(&["SET", "c", "3"]))]));
        log.stage(
            2,
            log.encode(vec![(0, cmd(&["SET", "b", "2"])), (0, cmd(&["INCR", "n"]))]),
        );
        log.stage(4, log.encode(vec![(1, cmd(&["DEL", "c"]))]));
        log.publish(3, |t| t == 3);
        let text = String::from_utf8(log.read_from(1, 1 << 20).unwrap()).unwrap();
        assert_eq!(
            text,
            "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n*1\r\n$4\r\nEXEC\r\n"
        );
        assert_eq!(log.end(), text.len() as u64);
        log.publish(4, |_| false);
        let more =
            String::from_utf8(log.read_from(text.len() as u64 + 1, 1 << 20).unwrap()).unwrap();
        assert!(
            more.starts_with("*2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n*2\r\n$3\r\nDEL"),
            "{more}"
        );
        assert_eq!(log.read_from(log.end() + 1, 10), Some(Vec::new()));
        assert_eq!(log.read_from(log.end() + 2, 10), None);
    }

    #[test]
    fn the_backlog_keeps_its_last_bytes_only() {
        let log = ReplLog::default();
        log.start(0);
        for i in 0..2000u64 {
            log.append_command(&[b"PING", i.to_string().as_bytes()]);
        }
        let (first, len) = log.held();
        assert_eq!(len, 16 << 10);
        assert_eq!(first + len - 1, log.end());
        assert!(log.read_from(first - 1, 10).is_none());
        assert_eq!(log.read_from(first, 1 << 20).unwrap().len(), 16 << 10);
        log.reset_to(500);
        assert_eq!(log.held(), (501, 0));
        assert_eq!(log.end(), 500);
    }
}
