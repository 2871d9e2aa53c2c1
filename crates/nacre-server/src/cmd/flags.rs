//! Command flags as bitsets: Redis's command flags and ACL categories, exactly as Redis 7.0
//! reports them in `COMMAND INFO`, and Nacre's own flags, which `COMMAND` never shows.

bitflags::bitflags! {
    /// Redis's command flags.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Flags: u32 {
        /// May modify the keyspace.
        const WRITE = 1 << 0;
        /// Reads the keyspace only.
        const READONLY = 1 << 1;
        /// Refused when memory is over `maxmemory` (here: the pool is full).
        const DENYOOM = 1 << 2;
        /// Administrative.
        const ADMIN = 1 << 3;
        /// Pub/Sub related.
        const PUBSUB = 1 << 4;
        /// Not allowed in scripts.
        const NOSCRIPT = 1 << 5;
        /// May block the client.
        const BLOCKING = 1 << 6;
        /// Allowed while the database loads.
        const LOADING = 1 << 7;
        /// Allowed on a replica with stale data.
        const STALE = 1 << 8;
        /// Not shown to MONITOR.
        const SKIP_MONITOR = 1 << 9;
        /// Not written to the slow log.
        const SKIP_SLOWLOG = 1 << 10;
        /// Allowed on an importing slot (cluster).
        const ASKING = 1 << 11;
        /// Runs in O(1) or O(log N).
        const FAST = 1 << 12;
        /// Runs without authentication.
        const NO_AUTH = 1 << 13;
        /// May replicate even when read-only.
        const MAY_REPLICATE = 1 << 14;
        /// Key arguments are optional.
        const NO_MANDATORY_KEYS = 1 << 15;
        /// Refused while loading asynchronously.
        const NO_ASYNC_LOADING = 1 << 16;
        /// Refused inside MULTI.
        const NO_MULTI = 1 << 17;
        /// Key positions depend on the arguments.
        const MOVABLEKEYS = 1 << 18;
        /// Allowed while a script is busy.
        const ALLOW_BUSY = 1 << 19;
    }
}

/// Redis's names of [`Flags`], in the order Redis prints them.
pub const FLAG_NAMES: &[(Flags, &str)] = &[
    (Flags::WRITE, "write"),
    (Flags::READONLY, "readonly"),
    (Flags::DENYOOM, "denyoom"),
    (Flags::ADMIN, "admin"),
    (Flags::PUBSUB, "pubsub"),
    (Flags::NOSCRIPT, "noscript"),
    (Flags::BLOCKING, "blocking"),
    (Flags::LOADING, "loading"),
    (Flags::STALE, "stale"),
    (Flags::SKIP_MONITOR, "skip_monitor"),
    (Flags::SKIP_SLOWLOG, "skip_slowlog"),
    (Flags::ASKING, "asking"),
    (Flags::FAST, "fast"),
    (Flags::NO_AUTH, "no_auth"),
    (Flags::MAY_REPLICATE, "may_replicate"),
    (Flags::NO_MANDATORY_KEYS, "no_mandatory_keys"),
    (Flags::NO_ASYNC_LOADING, "no_async_loading"),
    (Flags::NO_MULTI, "no_multi"),
    (Flags::MOVABLEKEYS, "movablekeys"),
    (Flags::ALLOW_BUSY, "allow_busy"),
];

bitflags::bitflags! {
    /// Redis's ACL categories.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Acl: u32 {
        /// `@keyspace`.
        const KEYSPACE = 1 << 0;
        /// `@read`.
        const READ = 1 << 1;
        /// `@write`.
        const WRITE = 1 << 2;
        /// `@set`.
        const SET = 1 << 3;
        /// `@sortedset`.
        const SORTEDSET = 1 << 4;
        /// `@list`.
        const LIST = 1 << 5;
        /// `@hash`.
        const HASH = 1 << 6;
        /// `@string`.
        const STRING = 1 << 7;
        /// `@bitmap`.
        const BITMAP = 1 << 8;
        /// `@hyperloglog`.
        const HYPERLOGLOG = 1 << 9;
        /// `@geo`.
        const GEO = 1 << 10;
        /// `@stream`.
        const STREAM = 1 << 11;
        /// `@pubsub`.
        const PUBSUB = 1 << 12;
        /// `@admin`.
        const ADMIN = 1 << 13;
        /// `@fast`.
        const FAST = 1 << 14;
        /// `@slow`.
        const SLOW = 1 << 15;
        /// `@blocking`.
        const BLOCKING = 1 << 16;
        /// `@dangerous`.
        const DANGEROUS = 1 << 17;
        /// `@connection`.
        const CONNECTION = 1 << 18;
        /// `@transaction`.
        const TRANSACTION = 1 << 19;
        /// `@scripting`.
        const SCRIPTING = 1 << 20;
    }
}

/// Redis's names of [`Acl`] categories, in the order Redis lists them.
pub const ACL_NAMES: &[(Acl, &str)] = &[
    (Acl::KEYSPACE, "keyspace"),
    (Acl::READ, "read"),
    (Acl::WRITE, "write"),
    (Acl::SET, "set"),
    (Acl::SORTEDSET, "sortedset"),
    (Acl::LIST, "list"),
    (Acl::HASH, "hash"),
    (Acl::STRING, "string"),
    (Acl::BITMAP, "bitmap"),
    (Acl::HYPERLOGLOG, "hyperloglog"),
    (Acl::GEO, "geo"),
    (Acl::STREAM, "stream"),
    (Acl::PUBSUB, "pubsub"),
    (Acl::ADMIN, "admin"),
    (Acl::FAST, "fast"),
    (Acl::SLOW, "slow"),
    (Acl::BLOCKING, "blocking"),
    (Acl::DANGEROUS, "dangerous"),
    (Acl::CONNECTION, "connection"),
    (Acl::TRANSACTION, "transaction"),
    (Acl::SCRIPTING, "scripting"),
];

bitflags::bitflags! {
    /// Nacre's own flags: how a command runs over the keyspace.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Local: u8 {
        /// Holds every database (the namespace table) exclusively: FLUSHDB, SWAPDB.
        const EXCLUSIVE = 1 << 0;
        /// Reads whole databases from the engine, which shows only durable writes: waits
        /// until every queued commit is durable first (KEYS, SCAN).
        const WHOLE = 1 << 1;
        /// Needs exact key counts (waits for the count after a crash).
        const COUNTS = 1 << 2;
        /// May name keys through patterns (SORT BY/GET): holds every database when it does.
        const PATTERNS = 1 << 3;
        /// Reads its keys without counting as a use of them (`OBJECT IDLETIME`), as Redis's
        /// lookups with `LOOKUP_NOTOUCH`.
        const NO_TOUCH = 1 << 4;
    }
}

/// The names of the flags set in `f`, from `names`.
pub fn names<T: bitflags::Flags + Copy>(f: T, names: &[(T, &'static str)]) -> Vec<&'static str> {
    names
        .iter()
        .filter(|(bit, _)| f.contains(*bit))
        .map(|(_, n)| *n)
        .collect()
}
