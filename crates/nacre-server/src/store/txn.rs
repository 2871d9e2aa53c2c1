//! One command's (or one `EXEC`'s) view of the keyspace: the locks of its keys (K1), what it
//! read and wrote, and the batch it queues (K2, K3, K4).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

use nacre::{IterOptions, WriteBatch};
use parking_lot::{MutexGuard, RwLockReadGuard, RwLockWriteGuard};
use smallvec::SmallVec;

use super::encoding::{self, Kind, Meta};
use super::{Namespaces, Result, Store, StoreError, Stripe};

enum NsGuard<'s> {
    Shared(RwLockReadGuard<'s, Namespaces>),
    Exclusive(RwLockWriteGuard<'s, Namespaces>),
    /// A snapshot's table (see [`Txn::at_snapshot`]): no lock.
    Fixed(Namespaces),
}

impl NsGuard<'_> {
    fn get(&self) -> &Namespaces {
        match self {
            NsGuard::Shared(g) => g,
            NsGuard::Exclusive(g) => g,
            NsGuard::Fixed(n) => n,
        }
    }
}

/// What a command knows of one key.
struct KeyState {
    db: usize,
    key: Vec<u8>,
    mkey: Vec<u8>,
    /// [`Store::key_hash`].
    hash: u64,
    stripe: usize,
    loaded: bool,
    /// Written by the command (Redis "modifies" a key even when the value stays the same: a
    /// SET of the same value still aborts its watchers and is still written).
    touched: bool,
    /// As stored (or pending) when first read, expired keys included; kept only once the
    /// command changes the key (`cur` until then: see [`KeyState::orig`]).
    orig: Option<Meta>,
    orig_kept: bool,
    /// As this command leaves it.
    cur: Option<Meta>,
    /// `sub` records this command wrote.
    subs: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// The txn's change clock at this key's last change (0: unchanged).
    changed_at: u64,
    /// Whether the key existed (unexpired) before its first change since the last mark.
    before: bool,
}

impl KeyState {
    /// Key `key` of database `db`, whose namespace is `gen`, not read yet.
    fn new(db: usize, key: &[u8], gen: u32) -> KeyState {
        let hash = Store::key_hash(db, key);
        KeyState {
            db,
            key: key.to_vec(),
            mkey: encoding::meta_key(gen, key),
            hash,
            stripe: hash as usize % super::STRIPES,
            loaded: false,
            touched: false,
            orig: None,
            orig_kept: false,
            cur: None,
            subs: BTreeMap::new(),
            changed_at: 0,
            before: false,
        }
    }

    /// The record as first read.
    fn orig(&self) -> &Option<Meta> {
        if self.orig_kept {
            &self.orig
        } else {
            &self.cur
        }
    }

    /// Keeps the record as first read before the first change: moved out when the change
    /// replaces it whole (`replacing`), copied when it is changed in place.
    fn keep_orig(&mut self, replacing: bool) {
        if !self.orig_kept {
            self.orig = if replacing {
                self.cur.take()
            } else {
                self.cur.clone()
            };
            self.orig_kept = true;
        }
    }
}

/// Keys a transaction finds by a scan rather than a map.
const SCAN_KEYS: usize = 8;

/// Where key `key` of database `db` stands in `keys`: through `lookup` (each key name's first
/// position; the same name in another database stands after it) or by a scan.
fn find(
    keys: &[KeyState],
    lookup: Option<&HashMap<Vec<u8>, usize>>,
    db: usize,
    key: &[u8],
) -> Option<usize> {
    let from = match lookup {
        Some(m) => *m.get(key)?,
        None => 0,
    };
    keys[from..]
        .iter()
        .position(|k| k.db == db && k.key == key)
        .map(|i| i + from)
}

/// A key a command changed: database, key, whether it existed before and after.
pub type Change = (usize, Vec<u8>, bool, bool);

/// A running command's hold on the keyspace. Dropping it without [`Txn::commit`] discards
/// its writes.
pub struct Txn<'s> {
    store: &'s Store,
    ns: NsGuard<'s>,
    locks: SmallVec<[(usize, MutexGuard<'s, Stripe>); 2]>,
    /// Most commands name one key: held inline.
    keys: SmallVec<[KeyState; 1]>,
    /// Where each key name first stands in `keys`, when there are more than [`SCAN_KEYS`].
    lookup: Option<HashMap<Vec<u8>, usize>>,
    now: u64,
    /// The last ticket the reply waits for (K4).
    wait: u64,
    /// The tickets of the pending entries it read (K7): if one fails, so does its commit.
    deps: Vec<u64>,
    max_version: u64,
    /// Whole-database changes made under the exclusive namespace lock.
    extra: WriteBatch,
    /// The command adds no data (Redis would run it over `maxmemory`): its batch may use the
    /// engine's reserve, so that a full pool can always be emptied.
    frees: bool,
    count_delta: Vec<(usize, i64)>,
    /// Counts changes (for [`Txn::changes_since`]).
    clock: u64,
    mark: u64,
    /// The keyspace events the commands raised, in order; `None` while nobody could receive
    /// them (nothing is recorded).
    events: Option<Vec<Event>>,
    /// Reads at this engine snapshot, without locks or pending entries (read-only).
    snap: Option<&'s nacre::Snapshot>,
    /// Collection versions this txn handed out, ascending: no record of one is anywhere
    /// but in this txn's own writes (versions are never reused, K5).
    fresh: Vec<u64>,
    /// An offline load's txn (see [`Txn::offline`]): its commit leaves no pending entries.
    offline: bool,
    /// A walk was refused while the engine rebuilds its Global Index (I1).
    refused: bool,
    /// Whether reading or writing a key counts as a use of it (see [`Txn::set_touch`]).
    touch: bool,
    /// What replicas run for this commit (see [`Txn::propagate`]).
    effects: crate::store::repl_log::Effects,
    /// Changes made (see [`Txn::changes`]).
    changes: u64,
}

/// A keyspace event a command raised: database, key, event name (as Redis's
/// `notifyKeyspaceEvent`). `new` is raised here, where a key comes to exist, as Redis raises
/// it where a key is added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Database.
    pub db: usize,
    /// Key.
    pub key: Vec<u8>,
    /// Event name.
    pub name: &'static str,
}

/// Members of a collection: (member, value) pairs.
pub type Members = Vec<(Vec<u8>, Vec<u8>)>;

/// `sub` records by key (`None`: deleted).
type SubRecords = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Records of one key queued by a commit: (stripe, meta key, metadata written, members).
type PendingWrite = (
    usize,
    Vec<u8>,
    Option<Option<Vec<u8>>>,
    BTreeMap<Vec<u8>, Option<Vec<u8>>>,
);

/// Records of an overlay in a walk's order.
type Walk<'a> = Box<dyn Iterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)> + 'a>;

fn walk_dir<'a>(
    r: std::collections::btree_map::Range<'a, Vec<u8>, Option<Vec<u8>>>,
    reverse: bool,
) -> Walk<'a> {
    if reverse {
        Box::new(r.rev())
    } else {
        Box::new(r)
    }
}

/// What a committed command waits for before it answers (K4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ticket(pub u64);

impl<'s> Txn<'s> {
    pub(super) fn new(store: &'s Store, keys: &[(usize, &[u8])], now: u64) -> Txn<'s> {
        let ns = NsGuard::Shared(store.ns.read());
        Self::with_ns(store, ns, keys, now)
    }

    /// A command over whole databases: holds the namespace table exclusively (K1).
    pub fn exclusive(store: &'s Store, keys: &[(usize, &[u8])], now: u64) -> Txn<'s> {
        let ns = NsGuard::Exclusive(store.ns.write());
        Self::with_ns(store, ns, keys, now)
    }

    /// A read-only view of the keyspace as engine snapshot `snap` holds it, whose namespace
    /// table is `ns` (the one the snapshot holds): it takes no lock and sees no pending entry
    /// (the snapshot holds what was durable when it was taken, nothing after), so it never
    /// holds up other commands. Its writes are discarded ([`Txn::commit`] queues nothing).
    /// Every key it reads must be among `keys`.
    pub fn at_snapshot(
        store: &'s Store,
        snap: &'s nacre::Snapshot,
        ns: Namespaces,
        keys: &[(usize, &[u8])],
        now: u64,
    ) -> Txn<'s> {
        let mut t = Self::with_ns(store, NsGuard::Fixed(ns), keys, now);
        t.snap = Some(snap);
        t
    }

    /// A txn of an offline load (`nacre-server --import-rdb`): the only user of the
    /// keyspace, which waits for each commit to be durable before it starts the next txn.
    /// Its commit leaves no pending entries (K3: no other command could read them, and the
    /// next txn reads the engine, which holds the commit by then) and bumps no watchers.
    pub fn offline(store: &'s Store, keys: &[(usize, &[u8])], now: u64) -> Txn<'s> {
        let mut t = Self::new(store, keys, now);
        t.offline = true;
        t
    }

    fn with_ns(store: &'s Store, ns: NsGuard<'s>, keys: &[(usize, &[u8])], now: u64) -> Txn<'s> {
        let mut states: SmallVec<[KeyState; 1]> = SmallVec::with_capacity(keys.len());
        // Few keys are found by a scan; many (EXEC, MSET) through a map.
        let mut lookup = (keys.len() > SCAN_KEYS).then(HashMap::new);
        for &(db, key) in keys {
            if find(&states, lookup.as_ref(), db, key).is_some() {
                continue;
            }
            if let Some(m) = lookup.as_mut() {
                if !m.contains_key(key) {
                    m.insert(key.to_vec(), states.len());
                }
            }
            states.push(KeyState::new(db, key, ns.get().gens[db]));
        }
        let mut stripes: SmallVec<[usize; 4]> = states.iter().map(|k| k.stripe).collect();
        stripes.sort_unstable();
        stripes.dedup();
        // A snapshot's reader locks nothing.
        if matches!(ns, NsGuard::Fixed(_)) {
            stripes.clear();
        }
        let locks = stripes
            .into_iter()
            .map(|s| (s, store.stripes[s].lock()))
            .collect();
        let wait = ns.get().barrier;
        let touch = !matches!(ns, NsGuard::Fixed(_));
        Txn {
            store,
            ns,
            locks,
            keys: states,
            lookup,
            now,
            wait,
            // What runs after a FLUSHDB or SWAPDB reads the state it made.
            deps: if store.commits.is_done(wait) {
                Vec::new()
            } else {
                vec![wait]
            },
            max_version: 0,
            extra: WriteBatch::new(),
            frees: false,
            count_delta: Vec::new(),
            clock: 0,
            mark: 0,
            events: None,
            snap: None,
            fresh: Vec::new(),
            offline: false,
            refused: false,
            touch,
            effects: Vec::new(),
            changes: 0,
        }
    }

    /// Whether the keys it reads or writes count as used (`OBJECT IDLETIME`): not for the
    /// commands Redis runs without touching keys (`TYPE`, `TTL`, `EXISTS`, `OBJECT`...).
    pub fn set_touch(&mut self, touch: bool) {
        self.touch = touch && self.snap.is_none();
    }

    /// The store.
    pub fn store(&self) -> &'s Store {
        self.store
    }

    /// The command's clock (Unix ms), fixed for its whole run.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Namespace of database `db`.
    pub fn gen(&self, db: usize) -> u32 {
        self.ns.get().gens[db]
    }

    fn index(&self, db: usize, key: &[u8]) -> Result<usize> {
        find(&self.keys, self.lookup.as_ref(), db, key)
            .ok_or_else(|| StoreError::Corrupt("a command used a key it did not lock".into()))
    }

    /// Whether it holds the namespace table exclusively.
    pub fn is_exclusive(&self) -> bool {
        matches!(self.ns, NsGuard::Exclusive(_))
    }

    /// Takes one more key for a script (S2 in `crate::script`): holding the keyspace
    /// exclusively, as [`Txn::add_key`]; else only if its stripe is free now (false if not:
    /// waiting could break the stripe order other commands lock in).
    pub fn try_add_key(&mut self, db: usize, key: &[u8]) -> Result<bool> {
        if self.index(db, key).is_ok() {
            return Ok(true);
        }
        let exclusive = self.is_exclusive();
        if !self.take_stripe(Store::stripe_of(db, key), exclusive) {
            return Ok(false);
        }
        self.push_key(db, key);
        Ok(true)
    }

    /// Holds `stripe` (waiting for it if `wait`); false if it is busy and not waited for.
    fn take_stripe(&mut self, stripe: usize, wait: bool) -> bool {
        if let Err(pos) = self.locks.binary_search_by_key(&stripe, |(s, _)| *s) {
            let guard = if wait {
                self.store.stripes[stripe].lock()
            } else {
                match self.store.stripes[stripe].try_lock() {
                    Some(g) => g,
                    None => return false,
                }
            };
            self.locks.insert(pos, (stripe, guard));
        }
        true
    }

    /// Exclusive txns: takes one more key (SORT's BY and GET lookups, known only once the
    /// sorted elements are read). No other txn runs while the namespace table is held
    /// exclusively (each holds it shared for its whole life), so locking another stripe now
    /// cannot deadlock.
    pub fn add_key(&mut self, db: usize, key: &[u8]) -> Result<()> {
        if self.index(db, key).is_ok() {
            return Ok(());
        }
        if !matches!(self.ns, NsGuard::Exclusive(_)) {
            return Err(StoreError::Corrupt(
                "a key added to a running command that does not hold the keyspace".into(),
            ));
        }
        self.take_stripe(Store::stripe_of(db, key), true);
        self.push_key(db, key);
        Ok(())
    }

    /// Adds key state for `key`, whose stripe is held.
    fn push_key(&mut self, db: usize, key: &[u8]) {
        let gen = self.ns.get().gens[db];
        if let Some(m) = self.lookup.as_mut() {
            if !m.contains_key(key) {
                m.insert(key.to_vec(), self.keys.len());
            }
        }
        self.keys.push(KeyState::new(db, key, gen));
    }

    fn stripe(&mut self, stripe: usize) -> &mut Stripe {
        let i = self
            .locks
            .binary_search_by_key(&stripe, |(s, _)| *s)
            .unwrap_or_else(|_| unreachable!("key stripes are locked when the txn starts"));
        &mut self.locks[i].1
    }

    fn load(&mut self, i: usize) -> Result<()> {
        if self.touch {
            self.store.access.touch(self.keys[i].hash, self.now);
        }
        if self.keys[i].loaded {
            return Ok(());
        }
        let (stripe, mkey) = (self.keys[i].stripe, self.keys[i].mkey.clone());
        let (ticket, raw) = match self.snap {
            Some(snap) => (
                None,
                self.store.db.get_at(&self.store.subs.meta, &mkey, snap)?,
            ),
            None => {
                // I1, only while the engine rebuilds (one atomic load otherwise); a queued
                // record answers without the engine.
                if self.store.db.rebuilding()
                    && self
                        .stripe(stripe)
                        .pending
                        .get(&mkey)
                        .is_none_or(|p| p.meta.is_none())
                {
                    self.may_read(&self.store.subs.meta, &mkey)?;
                }
                meta_record(self.store, self.stripe(stripe), &mkey)?
            }
        };
        if let Some(t) = ticket {
            self.read_pending(t);
        }
        if let Some(r) = &raw {
            encoding::check_owner(&self.keys[i].key, r)?;
        }
        let meta = raw.map(Meta::decode_owned).transpose()?;
        let k = &mut self.keys[i];
        k.cur = meta;
        k.orig = None;
        k.orig_kept = false;
        k.loaded = true;
        Ok(())
    }

    /// Notes that key `i` (loaded) changes now.
    fn note(&mut self, i: usize) {
        self.changes += 1;
        let now = self.now;
        let k = &mut self.keys[i];
        if k.changed_at <= self.mark {
            k.before = k.cur.as_ref().is_some_and(|m| !m.expired(now));
        }
        self.clock += 1;
        k.changed_at = self.clock;
    }

    /// Declares that the command adds no data (it has no `denyoom` flag): see
    /// [`nacre::WriteBatch::mark_frees_space`].
    pub fn mark_frees_space(&mut self) {
        self.frees = true;
    }

    /// Starts a segment (one command of an `EXEC`): [`Txn::changes_since`] of what this
    /// returns lists the keys changed after it.
    pub fn mark(&mut self) -> u64 {
        self.mark = self.clock;
        self.clock
    }

    /// Records the keyspace events commands raise from now on (someone could receive them).
    pub fn record_events(&mut self) {
        self.events.get_or_insert_with(Vec::new);
    }

    /// Raises keyspace event `name` on `key` of database `db` (kept only while recording).
    pub fn event(&mut self, db: usize, key: &[u8], name: &'static str) {
        if let Some(e) = &mut self.events {
            e.push(Event {
                db,
                key: key.to_vec(),
                name,
            });
        }
    }

    /// The events raised since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        self.events.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// What the command raised since `mark` (see [`Txn::mark`]): its events (taken), and
    /// its keys' existence before and after when there are any.
    pub fn take_raised(&mut self, mark: u64) -> crate::notify::Raised {
        let events = self.take_events();
        let changes = if events.is_empty() {
            Vec::new()
        } else {
            self.changes_since(mark)
        };
        (events, changes)
    }

    /// Raises `new` if key `i` (loaded) does not exist now and is about to.
    fn raise_new(&mut self, i: usize) {
        let now = self.now;
        let k = &self.keys[i];
        if self.events.is_some() && k.cur.as_ref().is_none_or(|m| m.expired(now)) {
            let (db, key) = (k.db, k.key.clone());
            self.event(db, &key, "new");
        }
    }

    /// Keys changed since `mark`, with whether each existed before and after.
    pub fn changes_since(&self, mark: u64) -> Vec<Change> {
        self.keys
            .iter()
            .filter(|k| k.changed_at > mark)
            .map(|k| {
                let after = k.cur.as_ref().is_some_and(|m| !m.expired(self.now));
                (k.db, k.key.clone(), k.before, after)
            })
            .collect()
    }

    /// The key's metadata if it exists and has not expired. A write command then sees an
    /// expired key as deleted (and deletes it when it commits).
    pub fn get(&mut self, db: usize, key: &[u8]) -> Result<Option<&Meta>> {
        let i = self.index(db, key)?;
        self.load(i)?;
        let now = self.now;
        let k = &mut self.keys[i];
        if k.cur.as_ref().is_some_and(|m| m.expired(now)) {
            return Ok(None);
        }
        Ok(k.cur.as_ref())
    }

    /// Like [`Txn::get`], for changing the record in place (expired keys are `None`, and
    /// become deleted).
    pub fn get_mut(&mut self, db: usize, key: &[u8]) -> Result<Option<&mut Meta>> {
        let i = self.index(db, key)?;
        self.load(i)?;
        if self.keys[i].cur.is_some() {
            self.note(i);
        }
        let now = self.now;
        let k = &mut self.keys[i];
        k.keep_orig(false);
        if k.cur.as_ref().is_some_and(|m| m.expired(now)) {
            k.cur = None;
        }
        k.touched |= k.cur.is_some();
        Ok(k.cur.as_mut())
    }

    /// Whether the key is stored but expired (for `WATCH`).
    pub fn expired(&mut self, db: usize, key: &[u8]) -> Result<bool> {
        let i = self.index(db, key)?;
        self.load(i)?;
        let now = self.now;
        Ok(self.keys[i].cur.as_ref().is_some_and(|m| m.expired(now)))
    }

    /// Sets (or with `None` deletes) the key.
    pub fn set(&mut self, db: usize, key: &[u8], meta: Option<Meta>) -> Result<()> {
        let i = self.index(db, key)?;
        self.load(i)?;
        if meta.is_some() {
            self.raise_new(i);
        }
        if meta.is_some() || self.keys[i].cur.is_some() {
            self.note(i);
        }
        let k = &mut self.keys[i];
        k.touched |= meta.is_some() || k.cur.is_some();
        k.keep_orig(true);
        k.cur = meta;
        Ok(())
    }

    /// A new collection version.
    pub fn new_version(&mut self) -> u64 {
        let v = self.store.versions.fetch_add(1, Ordering::Relaxed);
        self.max_version = self.max_version.max(v);
        self.fresh.push(v);
        v
    }

    /// Whether collection version `v` was handed out by this txn (its records are only in
    /// this txn's own writes: nothing to look up in pending entries or the engine).
    fn is_fresh(&self, v: u64) -> bool {
        self.fresh.binary_search(&v).is_ok()
    }

    /// Offline loads (see [`Txn::offline`]): key `key` has no record, which the caller
    /// knows (it has not written the key, and the keyspace held no keys when it started),
    /// so it is read as absent without a lookup.
    pub fn known_absent(&mut self, db: usize, key: &[u8]) -> Result<()> {
        let i = self.index(db, key)?;
        let k = &mut self.keys[i];
        if !k.loaded {
            k.cur = None;
            k.orig = None;
            k.orig_kept = false;
            k.loaded = true;
        }
        Ok(())
    }

    /// A new, empty collection for `key` (replacing whatever it held).
    pub fn create(&mut self, db: usize, key: &[u8], kind: Kind) -> Result<&mut Meta> {
        let v = self.new_version();
        let i = self.index(db, key)?;
        self.load(i)?;
        self.raise_new(i);
        self.note(i);
        let k = &mut self.keys[i];
        k.touched = true;
        k.keep_orig(true);
        Ok(k.cur.insert(Meta::collection(kind, v)))
    }

    /// Member `member` of collection `version` of `key`.
    pub fn member(
        &mut self,
        db: usize,
        key: &[u8],
        version: u64,
        member: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        self.sub_get(db, key, &encoding::sub_key(version, member))
    }

    /// Sets (or with `None` deletes) member `member` of collection `version` of `key`.
    pub fn set_member(
        &mut self,
        db: usize,
        key: &[u8],
        version: u64,
        member: &[u8],
        value: Option<Vec<u8>>,
    ) -> Result<()> {
        self.sub_put(db, key, encoding::sub_key(version, member), value)
    }

    /// The `sub` record `sk` of `key`'s collection: this command's own write, else a
    /// pending one, else the engine's.
    pub fn sub_get(&mut self, db: usize, key: &[u8], sk: &[u8]) -> Result<Option<Vec<u8>>> {
        let i = self.index(db, key)?;
        self.load(i)?;
        if let Some(v) = self.keys[i].subs.get(sk) {
            return Ok(v.clone());
        }
        if sk.len() >= 8 && self.is_fresh(u64::from_be_bytes(sk[..8].try_into().unwrap_or([0; 8])))
        {
            return Ok(None);
        }
        if let Some(snap) = self.snap {
            return Ok(self.store.db.get_at(&self.store.subs.sub, sk, snap)?);
        }
        let (stripe, mkey) = (self.keys[i].stripe, self.keys[i].mkey.clone());
        let pending = self
            .stripe(stripe)
            .pending
            .get(&mkey)
            .map(|p| (p.ticket, p.subs.get(sk).cloned()));
        if let Some((t, hit)) = pending {
            self.read_pending(t);
            if let Some(v) = hit {
                return Ok(v);
            }
        }
        self.may_read(&self.store.subs.sub, sk)?;
        Ok(self.store.db.get(&self.store.subs.sub, sk)?)
    }

    /// Writes (or with `None` deletes) the `sub` record `sk` of `key`'s collection; `sk`
    /// starts with the collection's version.
    pub fn sub_put(
        &mut self,
        db: usize,
        key: &[u8],
        sk: Vec<u8>,
        value: Option<Vec<u8>>,
    ) -> Result<()> {
        let i = self.index(db, key)?;
        self.load(i)?;
        self.note(i);
        self.keys[i].touched = true;
        self.keys[i].subs.insert(sk, value);
        Ok(())
    }

    /// Visits the `sub` records of `key`'s collection in `[lower, upper)`, in key order
    /// (largest first when `reverse`), until `f` returns `false`. This command's own writes
    /// win over pending ones, which win over the engine's.
    pub fn sub_scan(
        &mut self,
        db: usize,
        key: &[u8],
        lower: Vec<u8>,
        upper: Vec<u8>,
        reverse: bool,
        mut f: impl FnMut(&[u8], Vec<u8>) -> Result<bool>,
    ) -> Result<()> {
        let i = self.index(db, key)?;
        self.load(i)?;
        if lower >= upper {
            return Ok(());
        }
        let (stripe, mkey) = (self.keys[i].stripe, self.keys[i].mkey.clone());
        let range = lower.clone()..upper.clone();
        // A walk inside a version this txn handed out reads its own writes alone.
        let fresh = lower.len() >= 8 && {
            let v = u64::from_be_bytes(lower[..8].try_into().unwrap_or([0; 8]));
            self.is_fresh(v) && v < u64::MAX && upper.as_slice() <= &(v + 1).to_be_bytes()[..]
        };
        if fresh {
            let own: Vec<(Vec<u8>, Vec<u8>)> = walk_dir(self.keys[i].subs.range(range), reverse)
                .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
                .collect();
            for (k, v) in own {
                if !f(&k, v)? {
                    break;
                }
            }
            return Ok(());
        }
        self.may_iterate()?;
        // The overlays are walked lazily (a pending entry of a hot key may hold many
        // records; a walk usually needs few). A snapshot's reader has none.
        let pos = match self.snap {
            Some(_) => None,
            None => Some(
                self.locks
                    .binary_search_by_key(&stripe, |(s, _)| *s)
                    .map_err(|_| {
                        StoreError::Corrupt("a walk over a key whose stripe is not held".into())
                    })?,
            ),
        };
        if let Some(t) = pos.and_then(|p| self.locks[p].1.pending.get(&mkey).map(|p| p.ticket)) {
            self.read_pending(t);
        }
        let pending = pos.and_then(|p| self.locks[p].1.pending.get(&mkey).map(|p| &p.subs));
        let own = &self.keys[i].subs;
        let mut own_it = walk_dir(own.range(range.clone()), reverse).peekable();
        let mut pend_it = match pending {
            Some(p) => walk_dir(p.range(range), reverse),
            None => Box::new(std::iter::empty()),
        }
        .peekable();
        // This command's own records win over pending ones with the same key.
        let mut ov = std::iter::from_fn(move || {
            let take_own = match (own_it.peek(), pend_it.peek()) {
                (None, None) => return None,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((a, _)), Some((b, _))) => {
                    if a == b {
                        pend_it.next();
                        true
                    } else {
                        (a < b) != reverse
                    }
                }
            };
            if take_own {
                own_it.next()
            } else {
                pend_it.next()
            }
        })
        .peekable();
        let mut it = self
            .store
            .db
            .iter(
                &self.store.subs.sub,
                IterOptions {
                    snapshot: self.snap,
                    lower: Some(lower),
                    upper: Some(upper),
                    reverse,
                    ..Default::default()
                },
            )?
            .peekable();
        loop {
            // The engine's next key or the overlay's, whichever comes first in the walk's
            // order; the overlay wins ties.
            let take_overlay = match (it.peek(), ov.peek()) {
                (None, None) => return Ok(()),
                (Some(Err(_)), _) => {
                    return Err(it.next().and_then(|r| r.err()).map_or_else(
                        || StoreError::Corrupt("iterator".into()),
                        StoreError::Engine,
                    ))
                }
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (Some(Ok((ek, _))), Some((ok, _))) => {
                    if ek == *ok {
                        it.next();
                        true
                    } else {
                        (*ok < ek) != reverse
                    }
                }
            };
            let (k, v) = if take_overlay {
                match ov.next() {
                    Some((k, Some(v))) => (k.clone(), v.clone()),
                    Some((_, None)) | None => continue,
                }
            } else {
                match it.next() {
                    Some(Ok(kv)) => kv,
                    _ => continue,
                }
            };
            if !f(&k, v)? {
                return Ok(());
            }
        }
    }

    /// Members of collection `version` of `key` whose hash is at least `from`, in hash order:
    /// at least `count` of them (all of a hash's members together), and the hash to go on
    /// from (0 when done).
    pub fn members(
        &mut self,
        db: usize,
        key: &[u8],
        version: u64,
        from: u64,
        count: usize,
    ) -> Result<(Members, u64)> {
        let mut out = Vec::new();
        let mut last_hash: Option<u64> = None;
        let mut next = 0;
        self.sub_scan(
            db,
            key,
            encoding::sub_seek(version, from),
            encoding::members_end(version),
            false,
            |k, v| {
                let (h, m) = encoding::split_sub_key(k)
                    .ok_or_else(|| StoreError::Corrupt("member key".into()))?;
                if out.len() >= count && last_hash != Some(h) {
                    next = h;
                    return Ok(false);
                }
                last_hash = Some(h);
                out.push((m.to_vec(), v));
                Ok(true)
            },
        )?;
        Ok((out, next))
    }

    /// Every member of collection `version` of `key`.
    pub fn all_members(&mut self, db: usize, key: &[u8], version: u64) -> Result<Members> {
        Ok(self.members(db, key, version, 0, usize::MAX)?.0)
    }

    /// Every `sub` record of collection `version` of `key` (members, list elements and
    /// score index entries alike), as (key after the version, value).
    pub fn all_records(&mut self, db: usize, key: &[u8], version: u64) -> Result<Members> {
        let mut out = Vec::new();
        let end = version.saturating_add(1).to_be_bytes().to_vec();
        self.sub_scan(
            db,
            key,
            encoding::sub_prefix(version).to_vec(),
            end,
            false,
            |k, v| {
                out.push((k[8..].to_vec(), v));
                Ok(true)
            },
        )?;
        Ok(out)
    }

    /// The watch epoch of `key`, if watched.
    pub fn watch_epoch(&mut self, db: usize, key: &[u8]) -> Option<u64> {
        let stripe = Store::stripe_of(db, key);
        let k = (db, key.to_vec());
        let i = self.locks.binary_search_by_key(&stripe, |(s, _)| *s).ok()?;
        self.locks[i].1.watched.get(&k).map(|w| w.epoch)
    }

    /// Registers a watch on `key` (whose stripe this txn holds); its epoch now.
    pub fn watch(&mut self, db: usize, key: &[u8]) -> u64 {
        let stripe = Store::stripe_of(db, key);
        let w = self
            .stripe(stripe)
            .watched
            .entry((db, key.to_vec()))
            .or_insert(super::Watch { refs: 0, epoch: 0 });
        w.refs += 1;
        w.epoch
    }

    /// Before FLUSHDB or SWAPDB changes database `db`'s namespace (`with`: the database it
    /// swaps with): bumps the watchers of the keys that hold a value in `db`, or in `with`,
    /// now, as Redis touches only watched keys that the change affects. Through this txn's
    /// own locks where it holds the stripe, locking the others one at a time.
    pub fn bump_watchers_of_db(&mut self, db: usize, with: Option<usize>) {
        let store = self.store;
        let gens = self.ns.get().gens.clone();
        let bump = |s: &mut Stripe| {
            let hit: Vec<(usize, Vec<u8>)> = s
                .watched
                .keys()
                .filter(|(d, k)| {
                    *d == db
                        && (live(store, s, gens[db], k)
                            || with.is_some_and(|w| live(store, s, gens[w], k)))
                })
                .cloned()
                .collect();
            for k in hit {
                if let Some(w) = s.watched.get_mut(&k) {
                    w.epoch += 1;
                }
            }
        };
        for i in 0..super::STRIPES {
            match self.locks.binary_search_by_key(&i, |(s, _)| *s) {
                Ok(pos) => bump(&mut self.locks[pos].1),
                Err(_) => bump(&mut self.store.stripes[i].lock()),
            }
        }
    }

    /// Exclusive txns: adds a raw write to the batch.
    pub fn raw_batch(&mut self) -> &mut WriteBatch {
        self.changes += 1;
        &mut self.extra
    }

    /// Adds a command to what replicas run for this commit (in database `db`), when a
    /// replication stream is kept (R3 in repl_log.rs).
    pub fn propagate(&mut self, db: usize, args: Vec<Vec<u8>>) {
        if self.propagating() {
            self.effects.push((db, args));
        }
    }

    /// Whether [`Txn::propagate`] keeps anything: callers build their commands only then.
    pub fn propagating(&self) -> bool {
        self.store.repl.on()
    }

    /// Commands added by [`Txn::propagate`] so far.
    pub fn propagated(&self) -> usize {
        self.effects.len()
    }

    /// Changes made so far (keys changed, raw writes): a command whose run leaves it as it
    /// was changed nothing.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Exclusive txns: the namespace table, to change.
    pub fn namespaces_mut(&mut self) -> Option<&mut Namespaces> {
        match &mut self.ns {
            NsGuard::Exclusive(g) => Some(g),
            NsGuard::Shared(_) | NsGuard::Fixed(_) => None,
        }
    }

    /// I1: a command does not wait on its runtime thread for the engine's background index
    /// rebuild (iterators wait for it, holding up that thread's other connections): a walk
    /// over the engine while it rebuilds is refused, the txn is dropped (nothing it did is
    /// kept) and the command runs again once the rebuild is done
    /// ([`Txn::refused_iteration`]). A snapshot's reader (on a thread of its own) waits.
    pub fn may_iterate(&mut self) -> Result<()> {
        if self.snap.is_none() && self.store.db.rebuilding() {
            self.refused = true;
            return Err(StoreError::Rebuilding);
        }
        Ok(())
    }

    /// I1 for a point read of `key` in `sub` that the engine may only answer after its
    /// rebuild (a key too long for the persistent index): refused like a walk.
    fn may_read(&mut self, sub: &nacre::Subtable, key: &[u8]) -> Result<()> {
        if self.store.db.get_may_wait(sub, key) {
            self.refused = true;
            return Err(StoreError::Rebuilding);
        }
        Ok(())
    }

    /// Whether a walk was refused (I1): the command must run again after the rebuild.
    pub fn refused_iteration(&self) -> bool {
        self.refused
    }

    /// Exclusive txns: a change to the key count of database `db`, applied at commit.
    pub fn add_count(&mut self, db: usize, delta: i64) {
        self.count_delta.push((db, delta));
    }

    /// Makes the command wait for every commit queued so far (for replies computed from
    /// whole-database state, such as key counts).
    pub fn wait_all(&mut self) {
        self.wait = self.wait.max(self.store.commits.last());
    }

    /// Notes that the command read a pending entry of commit `t` (K4, K7).
    fn read_pending(&mut self, t: u64) {
        self.wait = self.wait.max(t);
        if !self.deps.contains(&t) {
            self.deps.push(t);
        }
    }

    /// The tickets it read from that are not resolved yet. A resolved one is left out: the
    /// stripes this command holds keep a commit's pending entries until it is resolved
    /// (they are dropped under the stripe's lock before it is published), so a commit
    /// resolved now was resolved before the command read, and it read durable data.
    fn open_deps(&self) -> Vec<u64> {
        let c = &self.store.commits;
        self.deps
            .iter()
            .copied()
            .filter(|&t| !c.is_done(t))
            .collect()
    }

    /// The ticket a read-only end waits for (K4), whose failure is its reply's (K7): none
    /// once what it read is resolved; the one commit it read from; else a ticket of its own
    /// with an empty batch, which fails if any commit it read from does (and, for a reply
    /// that waits for every commit, succeeds even if the last one fails).
    pub fn read_ticket(&self) -> Ticket {
        let c = &self.store.commits;
        if c.is_done(self.wait) {
            return Ticket(0);
        }
        if self.deps.len() == 1 && self.deps[0] == self.wait {
            return Ticket(self.wait);
        }
        let deps = self.open_deps();
        let store = self.store;
        Ticket(c.submit(
            store,
            WriteBatch::new(),
            super::commits::Submission {
                deps,
                ..Default::default()
            },
        ))
    }

    /// Queues what the command changed and releases its locks; the ticket to wait for. A
    /// snapshot's reader queues nothing.
    pub fn commit(mut self) -> Ticket {
        if self.snap.is_some() {
            return Ticket(0);
        }
        let store = self.store;
        let subs = &store.subs;
        let mut batch = std::mem::take(&mut self.extra);
        let mut written: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut pendings: SmallVec<[PendingWrite; 1]> = SmallVec::new();
        // Pending member records sit with the key that owns their version (K3): a key whose
        // collection version changes (RENAME, MOVE, DEL, overwrite) gives up its pending
        // records of the old version, and the key that owns that version now takes them.
        let mut moved: Vec<(u64, SubRecords)> = Vec::new();
        for i in 0..self.keys.len() {
            let k = &self.keys[i];
            let Some(ov) = k
                .orig()
                .as_ref()
                .filter(|m| k.loaded && m.kind.is_collection())
                .map(|m| m.version)
            else {
                continue;
            };
            if k.cur
                .as_ref()
                .is_some_and(|m| m.kind.is_collection() && m.version == ov)
            {
                continue;
            }
            let (stripe, mkey) = (k.stripe, k.mkey.clone());
            let prefix = encoding::sub_prefix(ov);
            if let Some(p) = self.stripe(stripe).pending.get_mut(&mkey) {
                let keys: Vec<Vec<u8>> = p
                    .subs
                    .range(prefix.to_vec()..)
                    .take_while(|(sk, _)| sk.starts_with(&prefix))
                    .map(|(sk, _)| sk.clone())
                    .collect();
                let taken: BTreeMap<_, _> = keys
                    .into_iter()
                    .filter_map(|sk| p.subs.remove_entry(&sk))
                    .collect();
                if !taken.is_empty() {
                    moved.push((ov, taken));
                }
            }
        }
        let mut deltas = std::mem::take(&mut self.count_delta);
        // Per namespace, by the namespace each record is written in (C1 in counts.rs).
        let mut ns_deltas: Vec<(u32, i64)> = Vec::new();
        // Keys written, by their place in `keys`, for their watchers.
        let mut changed: SmallVec<[usize; 2]> = SmallVec::new();
        // Member writes belong to the key whose collection holds their version now (a
        // RENAME inside EXEC moves a collection with its version).
        let mut owners: HashMap<u64, usize> = HashMap::new();
        for (i, k) in self.keys.iter().enumerate() {
            if let Some(m) = k.cur.as_ref().filter(|m| m.kind.is_collection()) {
                owners.entry(m.version).or_insert(i);
            }
        }
        // Records stay with their key when it owns their version (the common case: nothing
        // moves); records of a version no key holds now are dropped below.
        let version_of = |sk: &[u8]| u64::from_be_bytes(sk[..8].try_into().unwrap_or([0; 8]));
        for i in 0..self.keys.len() {
            let foreign: Vec<Vec<u8>> = self.keys[i]
                .subs
                .keys()
                .filter(|sk| owners.get(&version_of(sk)).is_some_and(|&o| o != i))
                .cloned()
                .collect();
            for sk in foreign {
                if let (Some(v), Some(&o)) =
                    (self.keys[i].subs.remove(&sk), owners.get(&version_of(&sk)))
                {
                    self.keys[o].subs.insert(sk, v);
                }
            }
        }
        for (ki, k) in self.keys.iter_mut().enumerate() {
            if !k.loaded {
                continue;
            }
            let gen = self.ns.get().gens[k.db];
            // A key rewritten with the same record is written again (as Redis appends it to
            // its log): only a collection whose members changed keeps its record as it is.
            let meta_changed = k.orig() != &k.cur || (k.touched && k.subs.is_empty());
            let live_version = k
                .cur
                .as_ref()
                .filter(|m| m.kind.is_collection())
                .map(|m| m.version);
            let mut subs_out: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
            let mut wrote_subs = false;
            for (sk, v) in std::mem::take(&mut k.subs) {
                // Members of a version this command dropped are the cleaner's.
                let ver = u64::from_be_bytes(sk[..8].try_into().unwrap_or([0; 8]));
                if Some(ver) == live_version {
                    match &v {
                        Some(v) => batch.put(&subs.sub, &sk, v),
                        None => batch.delete(&subs.sub, &sk),
                    };
                    wrote_subs = true;
                    if !self.offline {
                        subs_out.insert(sk, v);
                    }
                }
            }
            if !meta_changed && !wrote_subs && !k.touched {
                continue;
            }
            let mut meta_out = None;
            if meta_changed {
                let enc = k.cur.as_ref().map(|m| m.encode_for(&k.key));
                match &enc {
                    Some(e) => batch.put(&subs.meta, &k.mkey, e),
                    None => batch.delete(&subs.meta, &k.mkey),
                };
                meta_out = Some(enc);
                let old_exp = k.orig().as_ref().map_or(0, |m| m.expire_at);
                let new_exp = k.cur.as_ref().map_or(0, |m| m.expire_at);
                if old_exp != new_exp {
                    if old_exp != 0 {
                        batch.delete(&subs.expire, encoding::expire_key(old_exp, gen, &k.key));
                    }
                    if new_exp != 0 {
                        batch.put(&subs.expire, encoding::expire_key(new_exp, gen, &k.key), []);
                    }
                }
                if let Some(o) = k.orig().as_ref().filter(|m| m.kind.is_collection()) {
                    if !owners.iter().any(|(v, _)| *v == o.version) {
                        batch.put(&subs.gc, encoding::sub_prefix(o.version), []);
                        self.store.gc_pending.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let delta = i64::from(k.cur.is_some()) - i64::from(k.orig().is_some());
                if delta != 0 {
                    deltas.push((k.db, delta));
                    let ns = encoding::ns_of(&k.mkey);
                    match ns_deltas.iter_mut().find(|(g, _)| *g == ns) {
                        Some((_, d)) => *d += delta,
                        None => ns_deltas.push((ns, delta)),
                    }
                }
            }
            if self.offline {
                // No pending entries, no watchers (see `Txn::offline`).
                continue;
            }
            written.push((k.stripe, k.mkey.clone()));
            changed.push(ki);
            // Records queued earlier under this key's version by another name come along
            // (this command's own writes win).
            let mut subs_all: SubRecords = BTreeMap::new();
            if let Some(v) = live_version {
                for (_, m) in moved.iter_mut().filter(|(ov, _)| *ov == v) {
                    subs_all.append(m);
                }
            }
            subs_all.extend(subs_out);
            pendings.push((k.stripe, k.mkey.clone(), meta_out, subs_all));
        }
        ns_deltas.retain(|(_, d)| *d != 0);
        if batch.is_empty() {
            return self.read_ticket();
        }
        // M1 (repl_mark.rs): a replica's position commits with the writes it covers.
        super::repl_mark::attach(&mut batch, &subs.sys);
        if self.frees {
            batch.mark_frees_space();
        }
        let mut deps = std::mem::take(&mut self.deps);
        deps.retain(|&t| !store.commits.is_done(t));
        let ticket = store.commits.submit(
            store,
            batch,
            super::commits::Submission {
                max_version: self.max_version,
                keys: written,
                deltas: deltas.clone(),
                ns_deltas,
                deps,
                effects: store.repl.encode(std::mem::take(&mut self.effects)),
            },
        );
        if let NsGuard::Exclusive(g) = &mut self.ns {
            g.barrier = ticket;
        }
        for (stripe, mkey, meta, subs) in pendings {
            let s = self.stripe(stripe);
            let p = s.pending.entry(mkey).or_default();
            p.ticket = ticket;
            if meta.is_some() {
                p.meta = meta;
            }
            p.subs.extend(subs);
        }
        // Watchers of every changed key.
        for ki in changed {
            let (db, stripe) = (self.keys[ki].db, self.keys[ki].stripe);
            if self.stripe(stripe).watched.is_empty() {
                continue;
            }
            let key = (db, self.keys[ki].key.clone());
            if let Some(w) = self.stripe(stripe).watched.get_mut(&key) {
                w.epoch += 1;
            }
        }
        for (db, d) in deltas {
            store.counts[db].fetch_add(d, Ordering::Relaxed);
        }
        Ticket(ticket.max(self.wait))
    }
}

/// Whether `key` has a record in namespace `gen`: its queued record in stripe `s` (whose
/// lock the caller holds), else the engine's. As Redis, an expired key not yet deleted
/// counts (Redis finds it in its dictionary); a record that cannot be read counts too.
fn live(store: &Store, s: &Stripe, gen: u32, key: &[u8]) -> bool {
    meta_record(store, s, &encoding::meta_key(gen, key)).map_or(true, |(_, raw)| raw.is_some())
}

/// The metadata record of `mkey` as commands read it (K3): queued in stripe `s` (whose lock
/// the caller holds), else the engine's; with the ticket of the key's pending entry, if it
/// has one (the reader waits for it, K4).
fn meta_record(store: &Store, s: &Stripe, mkey: &[u8]) -> Result<(Option<u64>, Option<Vec<u8>>)> {
    let pending = s.pending.get(mkey);
    let ticket = pending.map(|p| p.ticket);
    match pending.and_then(|p| p.meta.clone()) {
        Some(queued) => Ok((ticket, queued)),
        None => Ok((ticket, store.db.get(&store.subs.meta, mkey)?)),
    }
}
