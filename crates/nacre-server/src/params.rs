//! Every Redis 7.0 configuration parameter that Nacre does not handle as a directive of its
//! own (`config.rs`): Redis's encoding and reporting parameters (`hash-max-listpack-entries`,
//! `list-compress-depth`...; `busy-reply-threshold` and `latency-monitor-threshold` are read
//! by scripts and the latency monitor), and those that tune what Nacre does not have
//! (append-only files, RDB snapshots, replication, cluster, eviction, active defrag; TLS is
//! left out: Nacre serves no TLS). Each is accepted by `CONFIG SET` and config files with
//! Redis 7.0's checks and error messages (type, range, memory units and percentages, the
//! allowed words, immutable and protected parameters), kept, shown by `CONFIG GET` under its
//! name and its old one, and written by `CONFIG REWRITE`, so clients, tools and
//! configuration files made for Redis work unchanged (docs/server.md lists what changes
//! nothing, and why).

use std::collections::BTreeMap;

/// How a parameter's value is read.
pub enum Kind {
    /// `yes` or `no`.
    Bool,
    /// An integer in `[min, max]`.
    Int {
        /// Smallest value.
        min: i128,
        /// Largest value.
        max: i128,
        /// How it is written.
        unit: Unit,
    },
    /// One of `values` (several, space-separated, when `multi`).
    Enum {
        /// The words allowed.
        values: &'static [&'static str],
        /// Several words at once.
        multi: bool,
    },
    /// Any text.
    Str,
}

/// How an integer parameter is written.
pub enum Unit {
    /// Digits.
    Plain,
    /// Digits with an optional memory unit (`kb`, `mb`...).
    Memory,
    /// A memory amount, or a percentage (`10%`, kept as its negative).
    MemoryOrPercent,
    /// Octal digits.
    Octal,
}

/// One parameter.
pub struct Param {
    /// The name.
    pub name: &'static str,
    /// Its name before Redis 7.0, if any.
    pub alias: Option<&'static str>,
    /// How its value is read.
    pub kind: Kind,
    /// Its default, as `CONFIG GET` shows it.
    pub default: &'static str,
    /// Whether `CONFIG SET` may change it (Redis's immutable ones are set at start only).
    pub mutable: bool,
    /// Whether only `enable-protected-configs` lets `CONFIG SET` change it.
    pub protected: bool,
    /// Left out of `CONFIG GET` patterns (shown when asked for by its exact name), as Redis's
    /// hidden parameters are.
    pub hidden: bool,
}

/// Every parameter, with Redis 7.0's defaults, ranges and words.
pub const PARAMS: &[Param] = &[
    Param {
        name: "rdbchecksum",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "daemonize",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "io-threads-do-reads",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "always-show-logo",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "protected-mode",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "rdbcompression",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "rdb-del-sync-files",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "activerehashing",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "stop-writes-on-bgsave-error",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "set-proc-title",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "dynamic-hz",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "lazyfree-lazy-eviction",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "lazyfree-lazy-expire",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "lazyfree-lazy-server-del",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "lazyfree-lazy-user-del",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "lazyfree-lazy-user-flush",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "repl-disable-tcp-nodelay",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "repl-diskless-sync",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "aof-rewrite-incremental-fsync",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "no-appendfsync-on-rewrite",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-require-full-coverage",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "rdb-save-incremental-fsync",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "aof-load-truncated",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "aof-use-rdb-preamble",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "aof-timestamp-enabled",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-replica-no-failover",
        alias: Some("cluster-slave-no-failover"),
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "replica-lazy-flush",
        alias: Some("slave-lazy-flush"),
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "replica-serve-stale-data",
        alias: Some("slave-serve-stale-data"),
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "replica-read-only",
        alias: Some("slave-read-only"),
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "replica-ignore-maxmemory",
        alias: Some("slave-ignore-maxmemory"),
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "jemalloc-bg-thread",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "activedefrag",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "syslog-enabled",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-enabled",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "appendonly",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-allow-reads-when-down",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-allow-pubsubshard-when-down",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "crash-log-enabled",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "crash-memcheck-enabled",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "use-exit-on-panic",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: true,
    },
    Param {
        name: "disable-thp",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-allow-replica-migration",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "replica-announced",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "latency-tracking",
        alias: None,
        kind: Kind::Bool,
        default: "yes",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "aof-disable-auto-gc",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "replica-ignore-disk-write-errors",
        alias: None,
        kind: Kind::Bool,
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "aclfile",
        alias: None,
        kind: Kind::Str,
        default: "",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "unixsocket",
        alias: None,
        kind: Kind::Str,
        default: "",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "pidfile",
        alias: None,
        kind: Kind::Str,
        default: "",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "replica-announce-ip",
        alias: Some("slave-announce-ip"),
        kind: Kind::Str,
        default: "",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "masteruser",
        alias: None,
        kind: Kind::Str,
        default: "",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-announce-ip",
        alias: None,
        kind: Kind::Str,
        default: "",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-config-file",
        alias: None,
        kind: Kind::Str,
        default: "nodes.conf",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-announce-hostname",
        alias: None,
        kind: Kind::Str,
        default: "",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "syslog-ident",
        alias: None,
        kind: Kind::Str,
        default: "redis",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "dbfilename",
        alias: None,
        kind: Kind::Str,
        default: "dump.rdb",
        mutable: true,
        protected: true,
        hidden: false,
    },
    Param {
        name: "appendfilename",
        alias: None,
        kind: Kind::Str,
        default: "appendonly.aof",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "appenddirname",
        alias: None,
        kind: Kind::Str,
        default: "appendonlydir",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "server_cpulist",
        alias: None,
        kind: Kind::Str,
        default: "",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "bio_cpulist",
        alias: None,
        kind: Kind::Str,
        default: "",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "aof_rewrite_cpulist",
        alias: None,
        kind: Kind::Str,
        default: "",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "bgsave_cpulist",
        alias: None,
        kind: Kind::Str,
        default: "",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "ignore-warnings",
        alias: None,
        kind: Kind::Str,
        default: "",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "proc-title-template",
        alias: None,
        kind: Kind::Str,
        default: "{title} {listen-addr} {server-mode}",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "bind-source-addr",
        alias: None,
        kind: Kind::Str,
        default: "",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "masterauth",
        alias: None,
        kind: Kind::Str,
        default: "",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "supervised",
        alias: None,
        kind: Kind::Enum {
            values: &["upstart", "systemd", "auto", "no"],
            multi: false,
        },
        default: "no",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "syslog-facility",
        alias: None,
        kind: Kind::Enum {
            values: &[
                "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6",
                "local7",
            ],
            multi: false,
        },
        default: "local0",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "repl-diskless-load",
        alias: None,
        kind: Kind::Enum {
            values: &["disabled", "on-empty-db", "swapdb"],
            multi: false,
        },
        default: "disabled",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "maxmemory-policy",
        alias: None,
        kind: Kind::Enum {
            values: &[
                "volatile-lru",
                "volatile-lfu",
                "volatile-random",
                "volatile-ttl",
                "allkeys-lru",
                "allkeys-lfu",
                "allkeys-random",
                "noeviction",
            ],
            multi: false,
        },
        default: "noeviction",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "appendfsync",
        alias: None,
        kind: Kind::Enum {
            values: &["everysec", "always", "no"],
            multi: false,
        },
        default: "everysec",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "oom-score-adj",
        alias: None,
        kind: Kind::Enum {
            values: &["no", "yes", "relative", "absolute"],
            multi: false,
        },
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "acl-pubsub-default",
        alias: None,
        kind: Kind::Enum {
            values: &["allchannels", "resetchannels"],
            multi: false,
        },
        default: "resetchannels",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "sanitize-dump-payload",
        alias: None,
        kind: Kind::Enum {
            values: &["no", "yes", "clients"],
            multi: false,
        },
        default: "no",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "enable-protected-configs",
        alias: None,
        kind: Kind::Enum {
            values: &["no", "yes", "local"],
            multi: false,
        },
        default: "no",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "enable-module-command",
        alias: None,
        kind: Kind::Enum {
            values: &["no", "yes", "local"],
            multi: false,
        },
        default: "no",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-preferred-endpoint-type",
        alias: None,
        kind: Kind::Enum {
            values: &["ip", "hostname", "unknown-endpoint"],
            multi: false,
        },
        default: "ip",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "propagation-error-behavior",
        alias: None,
        kind: Kind::Enum {
            values: &["ignore", "panic", "panic-on-replicas"],
            multi: false,
        },
        default: "ignore",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "shutdown-on-sigint",
        alias: None,
        kind: Kind::Enum {
            values: &["default", "save", "nosave", "now", "force"],
            multi: true,
        },
        default: "default",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "shutdown-on-sigterm",
        alias: None,
        kind: Kind::Enum {
            values: &["default", "save", "nosave", "now", "force"],
            multi: true,
        },
        default: "default",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "auto-aof-rewrite-percentage",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "100",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-replica-validity-factor",
        alias: Some("cluster-slave-validity-factor"),
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "10",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "list-max-listpack-size",
        alias: Some("list-max-ziplist-size"),
        kind: Kind::Int {
            min: -2147483648,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "-2",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "tcp-keepalive",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "300",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-migration-barrier",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "1",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "active-defrag-cycle-min",
        alias: None,
        kind: Kind::Int {
            min: 1,
            max: 99,
            unit: Unit::Plain,
        },
        default: "1",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "active-defrag-cycle-max",
        alias: None,
        kind: Kind::Int {
            min: 1,
            max: 99,
            unit: Unit::Plain,
        },
        default: "25",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "active-defrag-threshold-lower",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 1000,
            unit: Unit::Plain,
        },
        default: "10",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "active-defrag-threshold-upper",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 1000,
            unit: Unit::Plain,
        },
        default: "100",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "lfu-log-factor",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "10",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "lfu-decay-time",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "1",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "replica-priority",
        alias: Some("slave-priority"),
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "100",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "repl-diskless-sync-delay",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "5",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "maxmemory-samples",
        alias: None,
        kind: Kind::Int {
            min: 1,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "5",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "maxmemory-eviction-tenacity",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 100,
            unit: Unit::Plain,
        },
        default: "10",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "timeout",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "0",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "replica-announce-port",
        alias: Some("slave-announce-port"),
        kind: Kind::Int {
            min: 0,
            max: 65535,
            unit: Unit::Plain,
        },
        default: "0",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "tcp-backlog",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "511",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-port",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 65535,
            unit: Unit::Plain,
        },
        default: "0",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-announce-bus-port",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 65535,
            unit: Unit::Plain,
        },
        default: "0",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-announce-port",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 65535,
            unit: Unit::Plain,
        },
        default: "0",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-announce-tls-port",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 65535,
            unit: Unit::Plain,
        },
        default: "0",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "repl-timeout",
        alias: None,
        kind: Kind::Int {
            min: 1,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "60",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "repl-ping-replica-period",
        alias: Some("repl-ping-slave-period"),
        kind: Kind::Int {
            min: 1,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "10",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "list-compress-depth",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "0",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "rdb-key-save-delay",
        alias: None,
        kind: Kind::Int {
            min: -2147483648,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "0",
        mutable: true,
        protected: false,
        hidden: true,
    },
    Param {
        name: "key-load-delay",
        alias: None,
        kind: Kind::Int {
            min: -2147483648,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "0",
        mutable: true,
        protected: false,
        hidden: true,
    },
    Param {
        name: "active-expire-effort",
        alias: None,
        kind: Kind::Int {
            min: 1,
            max: 10,
            unit: Unit::Plain,
        },
        default: "1",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "hz",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "10",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "min-replicas-to-write",
        alias: Some("min-slaves-to-write"),
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "0",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "min-replicas-max-lag",
        alias: Some("min-slaves-max-lag"),
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "10",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "watchdog-period",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "0",
        mutable: true,
        protected: false,
        hidden: true,
    },
    Param {
        name: "shutdown-timeout",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "10",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "repl-diskless-sync-max-replicas",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "0",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "unixsocketperm",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 511,
            unit: Unit::Octal,
        },
        default: "0",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "socket-mark-id",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 4294967295,
            unit: Unit::Plain,
        },
        default: "0",
        mutable: false,
        protected: false,
        hidden: false,
    },
    Param {
        name: "active-defrag-max-scan-fields",
        alias: None,
        kind: Kind::Int {
            min: 1,
            max: 9223372036854775807,
            unit: Unit::Plain,
        },
        default: "1000",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "acllog-max-len",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 9223372036854775807,
            unit: Unit::Plain,
        },
        default: "128",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "busy-reply-threshold",
        alias: Some("lua-time-limit"),
        kind: Kind::Int {
            min: 0,
            max: 9223372036854775807,
            unit: Unit::Plain,
        },
        default: "5000",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-node-timeout",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 9223372036854775807,
            unit: Unit::Plain,
        },
        default: "15000",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "latency-monitor-threshold",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 9223372036854775807,
            unit: Unit::Plain,
        },
        default: "0",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "stream-node-max-entries",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 9223372036854775807,
            unit: Unit::Plain,
        },
        default: "100",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "repl-backlog-size",
        alias: None,
        kind: Kind::Int {
            min: 1,
            max: 9223372036854775807,
            unit: Unit::Memory,
        },
        default: "1048576",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "maxmemory",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 18446744073709551615,
            unit: Unit::Memory,
        },
        default: "0",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "cluster-link-sendbuf-limit",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 18446744073709551615,
            unit: Unit::Memory,
        },
        default: "0",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "hash-max-listpack-entries",
        alias: Some("hash-max-ziplist-entries"),
        kind: Kind::Int {
            min: 0,
            max: 9223372036854775807,
            unit: Unit::Plain,
        },
        default: "512",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "set-max-intset-entries",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 9223372036854775807,
            unit: Unit::Plain,
        },
        default: "512",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "zset-max-listpack-entries",
        alias: Some("zset-max-ziplist-entries"),
        kind: Kind::Int {
            min: 0,
            max: 9223372036854775807,
            unit: Unit::Plain,
        },
        default: "128",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "active-defrag-ignore-bytes",
        alias: None,
        kind: Kind::Int {
            min: 1,
            max: 9223372036854775807,
            unit: Unit::Memory,
        },
        default: "104857600",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "hash-max-listpack-value",
        alias: Some("hash-max-ziplist-value"),
        kind: Kind::Int {
            min: 0,
            max: 9223372036854775807,
            unit: Unit::Memory,
        },
        default: "64",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "stream-node-max-bytes",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 9223372036854775807,
            unit: Unit::Memory,
        },
        default: "4096",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "zset-max-listpack-value",
        alias: Some("zset-max-ziplist-value"),
        kind: Kind::Int {
            min: 0,
            max: 9223372036854775807,
            unit: Unit::Memory,
        },
        default: "64",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "hll-sparse-max-bytes",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 9223372036854775807,
            unit: Unit::Memory,
        },
        default: "3000",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "tracking-table-max-keys",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 9223372036854775807,
            unit: Unit::Plain,
        },
        default: "1000000",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "maxmemory-clients",
        alias: None,
        kind: Kind::Int {
            min: -100,
            max: 9223372036854775807,
            unit: Unit::MemoryOrPercent,
        },
        default: "0",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "repl-backlog-ttl",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 9223372036854775807,
            unit: Unit::Plain,
        },
        default: "3600",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "auto-aof-rewrite-min-size",
        alias: None,
        kind: Kind::Int {
            min: 0,
            max: 9223372036854775807,
            unit: Unit::Memory,
        },
        default: "67108864",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "loading-process-events-interval-bytes",
        alias: None,
        kind: Kind::Int {
            min: 1024,
            max: 2147483647,
            unit: Unit::Plain,
        },
        default: "2097152",
        mutable: true,
        protected: false,
        hidden: true,
    },
    Param {
        name: "save",
        alias: None,
        kind: Kind::Str,
        default: "",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "oom-score-adj-values",
        alias: None,
        kind: Kind::Str,
        default: "0 200 800",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "replicaof",
        alias: Some("slaveof"),
        kind: Kind::Str,
        default: "",
        mutable: true,
        protected: false,
        hidden: false,
    },
    Param {
        name: "latency-tracking-info-percentiles",
        alias: None,
        kind: Kind::Str,
        default: "50 99 99.9",
        mutable: true,
        protected: false,
        hidden: false,
    },
];

/// The parameter named `name` (lowercase; either of its names).
pub fn find(name: &str) -> Option<&'static Param> {
    // Looked up per script run and per command that reads a parameter: a map, not a scan of
    // the table.
    static BY_NAME: std::sync::OnceLock<std::collections::HashMap<&'static str, &'static Param>> =
        std::sync::OnceLock::new();
    BY_NAME
        .get_or_init(|| {
            PARAMS
                .iter()
                .flat_map(|p| std::iter::once((p.name, p)).chain(p.alias.map(|a| (a, p))))
                .collect()
        })
        .get(name)
        .copied()
}

/// Every name `CONFIG GET` matches patterns against: each parameter's, then its old one.
pub fn names() -> impl Iterator<Item = &'static str> {
    PARAMS
        .iter()
        .flat_map(|p| std::iter::once(p.name).chain(p.alias))
}

/// The values set, by parameter name, as `CONFIG GET` shows them (absent: the default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Values(BTreeMap<&'static str, String>);

impl Values {
    /// Sets `p` from `args` (one argument, or several words for a multi-word parameter),
    /// checked as Redis checks it.
    pub fn set(&mut self, p: &'static Param, args: &[String]) -> Result<(), String> {
        // Multi-word values (`shutdown-on-sigterm nosave force`, `replicaof host port`,
        // `oom-score-adj-values 0 200 800`) come as words from a config file.
        let text = match (args, &p.kind) {
            ([a], _) => a.clone(),
            (words, Kind::Enum { multi: true, .. } | Kind::Str) if !words.is_empty() => {
                words.join(" ")
            }
            _ => return Err("wrong number of arguments".into()),
        };
        let v = value(p, &text)?;
        if v == p.default {
            self.0.remove(p.name);
        } else {
            self.0.insert(p.name, v);
        }
        Ok(())
    }

    /// The value of `p`, as `CONFIG GET` shows it.
    pub fn get(&self, p: &Param) -> String {
        self.0
            .get(p.name)
            .cloned()
            .unwrap_or_else(|| p.default.to_string())
    }

    /// The value of integer parameter `name` (0 if there is none such).
    pub fn int(&self, name: &str) -> i64 {
        find(name).map_or(0, |p| self.get(p).parse().unwrap_or(0))
    }

    /// [`Values::int`], negative values read as 0 (sizes, thresholds).
    pub fn uint(&self, name: &str) -> u64 {
        self.int(name).max(0) as u64
    }
}

/// `text` checked as a value of `p`, in the form `CONFIG GET` shows.
fn value(p: &Param, text: &str) -> Result<String, String> {
    match &p.kind {
        Kind::Bool => match text.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Str => {
            if p.name == "dbfilename" && text.contains('/') {
                return Err("dbfilename can't be a path, just a filename".into());
            }
            if p.name == "save" {
                // Pairs of `<seconds> <changes>`, or nothing.
                let words: Vec<&str> = text.split_whitespace().collect();
                if words.len() % 2 != 0 || words.iter().any(|w| w.parse::<i64>().is_err()) {
                    return Err("Invalid save parameters".into());
                }
                return Ok(words.join(" "));
            }
            Ok(text.to_string())
        }
        Kind::Enum { values, multi } => {
            let lower = text.to_ascii_lowercase();
            let words: Vec<&str> = if *multi {
                lower.split_whitespace().collect()
            } else {
                vec![lower.as_str()]
            };
            let known = |w: &str| values.contains(&w);
            if words.is_empty() || !words.iter().all(|w| known(w)) {
                return Err(format!(
                    "argument(s) must be one of the following: {}",
                    values.join(", ")
                ));
            }
            if *multi
                && (words.contains(&"save") && words.contains(&"nosave")
                    || words.contains(&"default") && words.len() > 1)
            {
                return Err("Invalid shutdown flags".into());
            }
            Ok(words.join(" "))
        }
        Kind::Int { min, max, unit } => {
            let v = match unit {
                Unit::Plain => text.parse::<i128>().ok(),
                Unit::Octal => i128::from_str_radix(text, 8).ok(),
                Unit::Memory => crate::config::parse_memory(text).map(i128::from),
                Unit::MemoryOrPercent => match text.strip_suffix('%') {
                    Some(pct) => match pct.parse::<i128>() {
                        Ok(n) if n > 100 => {
                            return Err("percentage argument must be less or equal to 100".into())
                        }
                        Ok(n) if n >= 0 => Some(-n),
                        _ => None,
                    },
                    None => crate::config::parse_memory(text).map(i128::from),
                },
            };
            let v = v.ok_or(match unit {
                Unit::Memory => "argument must be a memory value",
                Unit::MemoryOrPercent => "argument must be a memory or percent value",
                _ => "argument couldn't be parsed into an integer",
            })?;
            if v < *min || v > *max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(match unit {
                Unit::Octal => format!("{v:o}"),
                Unit::MemoryOrPercent if v < 0 => format!("{}%", -v),
                _ => v.to_string(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, text: &str) -> Result<String, String> {
        let p = find(name).ok_or("no such parameter")?;
        let mut v = Values::default();
        v.set(p, &[text.to_string()])?;
        Ok(v.get(p))
    }

    #[test]
    fn values_are_checked_and_shown_as_redis_does() {
        assert_eq!(set("maxmemory", "1mb"), Ok("1048576".into()));
        assert_eq!(set("maxmemory", "1k"), Ok("1000".into()));
        assert_eq!(
            set("maxmemory", "x").unwrap_err(),
            "argument must be a memory value"
        );
        assert_eq!(set("maxmemory-clients", "10%"), Ok("10%".into()));
        assert_eq!(set("appendonly", "YES"), Ok("yes".into()));
        assert_eq!(
            set("appendonly", "1").unwrap_err(),
            "argument must be 'yes' or 'no'"
        );
        assert_eq!(
            set("timeout", "-1").unwrap_err(),
            "argument must be between 0 and 2147483647 inclusive"
        );
        assert_eq!(
            set("maxmemory-policy", "allkeys-lru"),
            Ok("allkeys-lru".into())
        );
        assert!(set("maxmemory-policy", "lru")
            .unwrap_err()
            .starts_with("argument(s) must be one of the following: volatile-lru,"));
        assert_eq!(
            set("shutdown-on-sigterm", "nosave force"),
            Ok("nosave force".into())
        );
        assert!(set("shutdown-on-sigterm", "save nosave").is_err());
        assert_eq!(set("unixsocketperm", "700"), Ok("700".into()));
        assert_eq!(set("slave-read-only", "no"), Ok("no".into()));
        assert!(set("dbfilename", "a/b").is_err());
        // Old names reach the same value; Redis's encoding parameters are here.
        let mut v = Values::default();
        let t = find("hash-max-ziplist-entries").unwrap();
        assert_eq!(t.name, "hash-max-listpack-entries");
        assert_eq!(v.get(t), "512");
        v.set(t, &["16".to_string()]).unwrap();
        assert_eq!(v.get(find("hash-max-listpack-entries").unwrap()), "16");
        assert_eq!(v.int("lua-time-limit"), 5000);
        assert_eq!(
            set("list-compress-depth", "-1").unwrap_err(),
            "argument must be between 0 and 2147483647 inclusive"
        );
        assert_eq!(set("hash-max-listpack-value", "1kb"), Ok("1024".into()));
        // Nothing Nacre handles itself is here twice.
        for p in PARAMS {
            assert!(!crate::config::DIRECTIVES.contains(&p.name), "{}", p.name);
            assert_eq!(value(p, p.default).as_deref(), Ok(p.default), "{}", p.name);
        }
    }
}
