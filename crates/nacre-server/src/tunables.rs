//! Redis's numeric tuning parameters that change how Redis encodes values in memory
//! (`hash-max-listpack-entries`, `list-compress-depth`...) or when it reports slowness
//! (`busy-reply-threshold`, `latency-monitor-threshold`). Nacre keeps every value in the pool
//! in one encoding, so these change nothing it stores: they are accepted and checked as
//! Redis 7.0 checks them, kept, shown by `CONFIG GET` (under their old names too) and written
//! by `CONFIG REWRITE`, so configuration files and clients made for Redis work unchanged.

use std::collections::BTreeMap;

/// One parameter: its name, its older name (Redis 7.0 answers to both), default and range.
pub struct Tunable {
    /// The name.
    pub name: &'static str,
    /// The name before Redis 7.0, if any.
    pub alias: Option<&'static str>,
    /// Default value.
    pub default: i64,
    /// Smallest value accepted.
    pub min: i64,
    /// Largest value accepted.
    pub max: i64,
}

const INT_MAX: i64 = i32::MAX as i64;
const INT_MIN: i64 = i32::MIN as i64;

/// Every parameter, with Redis 7.0's defaults and ranges.
pub const TUNABLES: &[Tunable] = &[
    Tunable {
        name: "hash-max-listpack-entries",
        alias: Some("hash-max-ziplist-entries"),
        default: 512,
        min: 0,
        max: i64::MAX,
    },
    Tunable {
        name: "hash-max-listpack-value",
        alias: Some("hash-max-ziplist-value"),
        default: 64,
        min: 0,
        max: i64::MAX,
    },
    Tunable {
        name: "list-max-listpack-size",
        alias: Some("list-max-ziplist-size"),
        default: -2,
        min: INT_MIN,
        max: INT_MAX,
    },
    Tunable {
        name: "list-compress-depth",
        alias: None,
        default: 0,
        min: 0,
        max: INT_MAX,
    },
    Tunable {
        name: "set-max-intset-entries",
        alias: None,
        default: 512,
        min: 0,
        max: i64::MAX,
    },
    Tunable {
        name: "zset-max-listpack-entries",
        alias: Some("zset-max-ziplist-entries"),
        default: 128,
        min: 0,
        max: i64::MAX,
    },
    Tunable {
        name: "zset-max-listpack-value",
        alias: Some("zset-max-ziplist-value"),
        default: 64,
        min: 0,
        max: i64::MAX,
    },
    Tunable {
        name: "hll-sparse-max-bytes",
        alias: None,
        default: 3000,
        min: 0,
        max: i64::MAX,
    },
    Tunable {
        name: "stream-node-max-bytes",
        alias: None,
        default: 4096,
        min: 0,
        max: i64::MAX,
    },
    Tunable {
        name: "stream-node-max-entries",
        alias: None,
        default: 100,
        min: 0,
        max: i64::MAX,
    },
    Tunable {
        name: "busy-reply-threshold",
        alias: Some("lua-time-limit"),
        default: 5000,
        min: 0,
        max: i64::MAX,
    },
    Tunable {
        name: "latency-monitor-threshold",
        alias: None,
        default: 0,
        min: 0,
        max: i64::MAX,
    },
    Tunable {
        name: "active-expire-effort",
        alias: None,
        default: 1,
        min: 1,
        max: 10,
    },
    Tunable {
        name: "hz",
        alias: None,
        default: 10,
        min: 0,
        max: INT_MAX,
    },
    Tunable {
        name: "lfu-log-factor",
        alias: None,
        default: 10,
        min: 0,
        max: INT_MAX,
    },
    Tunable {
        name: "lfu-decay-time",
        alias: None,
        default: 1,
        min: 0,
        max: INT_MAX,
    },
];

/// The parameter named `name` (lowercase; either of its names).
pub fn find(name: &str) -> Option<&'static Tunable> {
    TUNABLES
        .iter()
        .find(|t| t.name == name || t.alias == Some(name))
}

/// Every name `CONFIG GET` matches patterns against: each parameter's, then its old one.
pub fn names() -> impl Iterator<Item = &'static str> {
    TUNABLES
        .iter()
        .flat_map(|t| std::iter::once(t.name).chain(t.alias))
}

/// The values set, by parameter name (absent: the default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Values(BTreeMap<&'static str, i64>);

impl Values {
    /// Sets `t` from `text`, checked as Redis checks it (a memory unit only for the sizes in
    /// bytes, as Redis).
    pub fn set(&mut self, t: &'static Tunable, text: &str) -> Result<(), String> {
        let v = parse(text, t.name.ends_with("-bytes"))
            .ok_or("argument couldn't be parsed into an integer")?;
        if v < t.min || v > t.max {
            return Err(format!(
                "argument must be between {} and {} inclusive",
                t.min, t.max
            ));
        }
        if v == t.default {
            self.0.remove(t.name);
        } else {
            self.0.insert(t.name, v);
        }
        Ok(())
    }

    /// The value of `t`.
    pub fn get(&self, t: &Tunable) -> i64 {
        self.0.get(t.name).copied().unwrap_or(t.default)
    }
}

/// An integer, with a memory unit (`k`, `kb`, `m`, `mb`, `g`, `gb`) if `memory`.
fn parse(text: &str, memory: bool) -> Option<i64> {
    if let Ok(v) = text.parse::<i64>() {
        return Some(v);
    }
    if !memory {
        return None;
    }
    let v = crate::config::parse_memory(text)?;
    i64::try_from(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_names_reach_one_value_checked_in_range() {
        let mut v = Values::default();
        let t = find("hash-max-ziplist-entries").unwrap();
        assert_eq!(t.name, "hash-max-listpack-entries");
        assert_eq!(v.get(t), 512);
        v.set(t, "16").unwrap();
        assert_eq!(v.get(find("hash-max-listpack-entries").unwrap()), 16);
        let depth = find("list-compress-depth").unwrap();
        assert_eq!(
            v.set(depth, "-1").unwrap_err(),
            "argument must be between 0 and 2147483647 inclusive"
        );
        assert!(v.set(depth, "x").is_err());
        assert!(v.set(depth, "1k").is_err());
        let hll = find("hll-sparse-max-bytes").unwrap();
        v.set(hll, "1k").unwrap();
        assert_eq!(v.get(hll), 1000);
        v.set(find("list-max-ziplist-size").unwrap(), "-5").unwrap();
        assert_eq!(v.get(find("list-max-listpack-size").unwrap()), -5);
        assert_eq!(names().filter(|n| n.contains("ziplist")).count(), 5);
    }
}
