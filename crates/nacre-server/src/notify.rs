//! Keyspace notifications (`notify-keyspace-events`): the event classes, their flag string,
//! and the events a command's changes raise, named as Redis 7.0 names them.

use crate::cmd::args::is;
use crate::shared::Shared;
use crate::store::txn::Change;

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: strings.
pub const STRING: u32 = 1 << 3;
/// `l`: lists.
pub const LIST: u32 = 1 << 4;
/// `s`: sets.
pub const SET: u32 = 1 << 5;
/// `h`: hashes.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted sets.
pub const ZSET: u32 = 1 << 7;
/// `x`: expired keys.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: evicted keys (nacre-server never evicts).
pub const EVICTED: u32 = 1 << 9;
/// `t`: streams (none here).
pub const STREAM: u32 = 1 << 10;
/// `m`: key misses.
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: modules.
pub const MODULE: u32 = 1 << 13;
/// `n`: new keys.
pub const NEW: u32 = 1 << 14;
/// `A`: every class but `m` and `n`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Parses a flag string (`None` for an unknown character).
pub fn parse(s: &str) -> Option<u32> {
    let mut f = 0;
    for c in s.chars() {
        f |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(f)
}

/// The flag string `CONFIG GET` shows.
pub fn format(f: u32) -> String {
    let mut s = String::new();
    if f & ALL == ALL {
        s.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if f & bit != 0 {
                s.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if f & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// The class of an event.
fn class(event: &str) -> u32 {
    match event {
        "set" | "setrange" | "incrby" | "incrbyfloat" | "append" | "setbit" => STRING,
        "lpush" | "rpush" | "lpop" | "rpop" | "linsert" | "lset" | "ltrim" | "lrem"
        | "sortstore" => LIST,
        "sadd" | "srem" | "spop" | "sinterstore" | "sunionstore" | "sdiffstore" => SET,
        "hset" | "hdel" | "hincrby" | "hincrbyfloat" => HASH,
        e if e.starts_with('z') => ZSET,
        "expired" => EXPIRED,
        "new" => NEW,
        _ => GENERIC,
    }
}

/// Whether `args` carry one of `words` (an option).
fn has(args: &[Vec<u8>], words: &[&str]) -> bool {
    args.iter().skip(1).any(|a| words.iter().any(|w| is(a, w)))
}

/// The events a change to `key` by command `name` raises, in order.
fn events_of(name: &str, args: &[Vec<u8>], cdb: usize, c: &Change) -> Vec<&'static str> {
    let (key, before, after) = (&c.1, c.2, c.3);
    let is_src = args.get(1).is_some_and(|a| a == key);
    let side = |i: usize, l: &'static str, r: &'static str| {
        if args.get(i).is_some_and(|a| is(a, "left")) {
            l
        } else {
            r
        }
    };
    let mut out: Vec<&'static str> = Vec::new();
    let main: Option<&'static str> = match name {
        "del" | "unlink" | "getdel" => Some("del"),
        "expire" | "pexpire" | "expireat" | "pexpireat" => {
            Some(if after { "expire" } else { "del" })
        }
        "persist" => Some("persist"),
        "rename" | "renamenx" => Some(if is_src { "rename_from" } else { "rename_to" }),
        "copy" => Some("copy_to"),
        "move" => Some(if c.0 == cdb { "move_from" } else { "move_to" }),
        "set" | "setnx" | "setex" | "psetex" | "getset" | "mset" | "msetnx" | "bitop" => {
            Some("set")
        }
        "incr" | "incrby" | "decr" | "decrby" => Some("incrby"),
        "incrbyfloat" | "append" | "setrange" | "setbit" => Some(match name {
            "incrbyfloat" => "incrbyfloat",
            "append" => "append",
            "setrange" => "setrange",
            _ => "setbit",
        }),
        "bitfield" => Some("setbit"),
        "getex" => Some(if has(args, &["persist"]) {
            "persist"
        } else {
            "expire"
        }),
        "hset" | "hsetnx" | "hmset" => Some("hset"),
        "hdel" => Some("hdel"),
        "hincrby" => Some("hincrby"),
        "hincrbyfloat" => Some("hincrbyfloat"),
        "lpush" | "lpushx" => Some("lpush"),
        "rpush" | "rpushx" => Some("rpush"),
        "lpop" | "blpop" => Some("lpop"),
        "rpop" | "brpop" => Some("rpop"),
        "linsert" => Some("linsert"),
        "lset" => Some("lset"),
        "ltrim" => Some("ltrim"),
        "lrem" => Some("lrem"),
        "lmpop" | "blmpop" => Some(if has(args, &["left"]) { "lpop" } else { "rpop" }),
        "lmove" | "blmove" | "rpoplpush" | "brpoplpush" => {
            let (pop, push) = if name.ends_with("rpoplpush") {
                ("rpop", "lpush")
            } else {
                (side(3, "lpop", "rpop"), side(4, "lpush", "rpush"))
            };
            let dst = args.get(2).is_some_and(|a| a == key);
            if dst {
                out.push(push);
            }
            if is_src {
                out.push(pop);
            }
            None
        }
        "sadd" => Some("sadd"),
        "srem" => Some("srem"),
        "spop" => Some("spop"),
        "smove" => Some(if is_src { "srem" } else { "sadd" }),
        "sinterstore" | "sunionstore" | "sdiffstore" | "zunionstore" | "zinterstore"
        | "zdiffstore" | "zrangestore" => Some(if after {
            match name {
                "sinterstore" => "sinterstore",
                "sunionstore" => "sunionstore",
                "sdiffstore" => "sdiffstore",
                "zunionstore" => "zunionstore",
                "zinterstore" => "zinterstore",
                "zdiffstore" => "zdiffstore",
                _ => "zrangestore",
            }
        } else {
            "del"
        }),
        "sort" => Some(if after { "sortstore" } else { "del" }),
        "zadd" => Some(if has(args, &["incr"]) {
            "zincr"
        } else {
            "zadd"
        }),
        "zincrby" => Some("zincr"),
        "zrem" => Some("zrem"),
        "zremrangebyscore" => Some("zremrangebyscore"),
        "zremrangebyrank" => Some("zremrangebyrank"),
        "zremrangebylex" => Some("zremrangebylex"),
        "zpopmin" | "bzpopmin" => Some("zpopmin"),
        "zpopmax" | "bzpopmax" => Some("zpopmax"),
        "zmpop" | "bzmpop" => Some(if has(args, &["max"]) {
            "zpopmax"
        } else {
            "zpopmin"
        }),
        _ => None,
    };
    out.extend(main);
    if out.is_empty() {
        return out;
    }
    // Setting with an expiry also raises `expire`.
    if matches!(name, "setex" | "psetex")
        || (name == "set" && has(args, &["ex", "px", "exat", "pxat"]))
    {
        out.push("expire");
    }
    if !before && after {
        out.insert(0, "new");
    }
    if before && !after && !out.contains(&"del") && out[0] != "rename_from" && out[0] != "move_from"
    {
        out.push("del");
    }
    out
}

/// Publishes the events of `changes` made by command `args` in database `db`; the
/// messages wait for `ticket` (P2 in `pubsub`).
pub fn publish(shared: &Shared, db: usize, args: &[Vec<u8>], changes: &[Change], ticket: u64) {
    let flags = shared.notify_flags();
    if flags & (KEYSPACE | KEYEVENT) == 0 || changes.is_empty() || !shared.pubsub.anyone() {
        return;
    }
    let name = crate::cmd::args::lower(&args[0]);
    let mut per: Vec<(&Change, Vec<&'static str>)> = changes
        .iter()
        .map(|c| (c, events_of(&name, args, db, c)))
        .collect();
    // Redis's order where a command changes two keys: a move pushes before it pops; a
    // rename creates its target first.
    if matches!(
        name.as_str(),
        "lmove" | "blmove" | "rpoplpush" | "brpoplpush"
    ) {
        per.reverse();
    }
    let mut out: Vec<(&Change, &'static str)> = Vec::new();
    if matches!(name.as_str(), "rename" | "renamenx") {
        for (c, es) in &mut per {
            if es.first() == Some(&"new") {
                es.remove(0);
                out.push((*c, "new"));
            }
        }
    }
    for (c, es) in per {
        out.extend(es.into_iter().map(|e| (c, e)));
    }
    for (c, e) in out {
        event(shared, flags, c.0, &c.1, e, ticket);
    }
}

/// Publishes one event on the keyspace and keyevent channels the flags ask for.
pub fn event(shared: &Shared, flags: u32, db: usize, key: &[u8], e: &str, ticket: u64) {
    if flags & class(e) == 0 {
        return;
    }
    if flags & KEYSPACE != 0 {
        let mut ch = format!("__keyspace@{db}__:").into_bytes();
        ch.extend_from_slice(key);
        shared.pubsub.publish(&ch, e.as_bytes(), ticket);
    }
    if flags & KEYEVENT != 0 {
        let ch = format!("__keyevent@{db}__:{e}").into_bytes();
        shared.pubsub.publish(&ch, key, ticket);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_strings_round_trip_as_redis_prints_them() {
        assert_eq!(parse(""), Some(0));
        assert_eq!(format(parse("KEA").unwrap()), "AKE");
        assert_eq!(format(parse("Elg$").unwrap()), "g$lE");
        assert_eq!(format(parse("Kx").unwrap()), "xK");
        assert_eq!(format(parse("Anm").unwrap()), "Am");
        assert_eq!(parse("Kq"), None);
    }
}
