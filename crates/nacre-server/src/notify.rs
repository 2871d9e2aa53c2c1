//! Keyspace notifications (`notify-keyspace-events`): the event classes, their flag string,
//! and publishing the events commands raise as they change keys (`Txn::event`, named as
//! Redis 7.0 names them).

use std::collections::HashMap;

use crate::shared::Shared;
use crate::store::txn::{Change, Event};

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
        e if e.starts_with('x') => STREAM,
        "expired" => EXPIRED,
        "new" => NEW,
        _ => GENERIC,
    }
}

/// What one command raised: its events in order, and which of its keys existed before and
/// after it.
pub type Raised = (Vec<Event>, Vec<Change>);

/// Publishes the events one command raised; the messages wait for `ticket` (P2 in `pubsub`).
/// A key the command deleted without an event that names the deletion (a collection its
/// last member left, as Redis deletes it after the command's own event) gets `del` after its
/// last event.
pub fn publish(shared: &Shared, raised: Raised, ticket: u64) {
    let (events, changes) = raised;
    let flags = shared.notify_flags();
    if flags & (KEYSPACE | KEYEVENT) == 0 || events.is_empty() {
        return;
    }
    // Per key: its last event's index, and whether a `del` is owed after it.
    let mut last: HashMap<(usize, &[u8]), (usize, bool)> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        let gone = || {
            changes
                .iter()
                .any(|c| c.0 == e.db && c.1 == e.key && c.2 && !c.3)
        };
        let named = matches!(e.name, "del" | "rename_from" | "move_from");
        let entry = last.entry((e.db, &e.key)).or_insert_with(|| (i, gone()));
        entry.0 = i;
        entry.1 &= !named;
    }
    for (i, e) in events.iter().enumerate() {
        event(shared, flags, e.db, &e.key, e.name, ticket);
        if last.get(&(e.db, e.key.as_slice())) == Some(&(i, true)) {
            event(shared, flags, e.db, &e.key, "del", ticket);
        }
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
