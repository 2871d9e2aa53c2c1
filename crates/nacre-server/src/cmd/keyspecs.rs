//! The flags of each command's key specs, as Redis 7.0 reports them (`COMMAND
//! GETKEYSANDFLAGS`): per command or subcommand (`memory|usage`), the index of the argument
//! where each spec's keys begin (-1: found by keyword, as SORT's STORE) and its flags.

/// One spec: where its keys begin, and their flags.
type Spec = (i32, &'static [&'static str]);

#[rustfmt::skip]
static SPECS: &[(&str, &[Spec])] = &[
    ("append", &[(1, &["RW", "insert"])]),
    ("bitcount", &[(1, &["RO", "access"])]),
    ("bitfield", &[(1, &["RW", "access", "update", "variable_flags"])]),
    ("bitfield_ro", &[(1, &["RO", "access"])]),
    ("bitop", &[(2, &["OW", "update"]), (3, &["RO", "access"])]),
    ("bitpos", &[(1, &["RO", "access"])]),
    ("blmove", &[(1, &["RW", "access", "delete"]), (2, &["RW", "insert"])]),
    ("blmpop", &[(2, &["RW", "access", "delete"])]),
    ("blpop", &[(1, &["RW", "access", "delete"])]),
    ("brpop", &[(1, &["RW", "access", "delete"])]),
    ("brpoplpush", &[(1, &["RW", "access", "delete"]), (2, &["RW", "insert"])]),
    ("bzmpop", &[(2, &["RW", "access", "delete"])]),
    ("bzpopmax", &[(1, &["RW", "access", "delete"])]),
    ("bzpopmin", &[(1, &["RW", "access", "delete"])]),
    ("copy", &[(1, &["RO", "access"]), (2, &["OW", "update"])]),
    ("decr", &[(1, &["RW", "access", "update"])]),
    ("decrby", &[(1, &["RW", "access", "update"])]),
    ("del", &[(1, &["RM", "delete"])]),
    ("dump", &[(1, &["RO", "access"])]),
    ("exists", &[(1, &["RO"])]),
    ("expire", &[(1, &["RW", "update"])]),
    ("expireat", &[(1, &["RW", "update"])]),
    ("expiretime", &[(1, &["RO", "access"])]),
    ("get", &[(1, &["RO", "access"])]),
    ("getbit", &[(1, &["RO", "access"])]),
    ("getdel", &[(1, &["RW", "access", "delete"])]),
    ("getex", &[(1, &["RW", "access", "update"])]),
    ("getrange", &[(1, &["RO", "access"])]),
    ("getset", &[(1, &["RW", "access", "update"])]),
    ("hdel", &[(1, &["RW", "delete"])]),
    ("hexists", &[(1, &["RO"])]),
    ("hget", &[(1, &["RO", "access"])]),
    ("hgetall", &[(1, &["RO", "access"])]),
    ("hincrby", &[(1, &["RW", "access", "update"])]),
    ("hincrbyfloat", &[(1, &["RW", "access", "update"])]),
    ("hkeys", &[(1, &["RO", "access"])]),
    ("hlen", &[(1, &["RO"])]),
    ("hmget", &[(1, &["RO", "access"])]),
    ("hmset", &[(1, &["RW", "update"])]),
    ("hrandfield", &[(1, &["RO", "access"])]),
    ("hscan", &[(1, &["RO", "access"])]),
    ("hset", &[(1, &["RW", "update"])]),
    ("hsetnx", &[(1, &["RW", "insert"])]),
    ("hstrlen", &[(1, &["RO"])]),
    ("hvals", &[(1, &["RO", "access"])]),
    ("incr", &[(1, &["RW", "access", "update"])]),
    ("incrby", &[(1, &["RW", "access", "update"])]),
    ("incrbyfloat", &[(1, &["RW", "access", "update"])]),
    ("lcs", &[(1, &["RO", "access"])]),
    ("lindex", &[(1, &["RO", "access"])]),
    ("linsert", &[(1, &["RW", "insert"])]),
    ("llen", &[(1, &["RO"])]),
    ("lmove", &[(1, &["RW", "access", "delete"]), (2, &["RW", "insert"])]),
    ("lmpop", &[(1, &["RW", "access", "delete"])]),
    ("lpop", &[(1, &["RW", "access", "delete"])]),
    ("lpos", &[(1, &["RO", "access"])]),
    ("lpush", &[(1, &["RW", "insert"])]),
    ("lpushx", &[(1, &["RW", "insert"])]),
    ("lrange", &[(1, &["RO", "access"])]),
    ("lrem", &[(1, &["RW", "delete"])]),
    ("lset", &[(1, &["RW", "update"])]),
    ("ltrim", &[(1, &["RW", "delete"])]),
    ("memory|usage", &[(2, &["RO"])]),
    ("mget", &[(1, &["RO", "access"])]),
    ("move", &[(1, &["RW", "access", "update"])]),
    ("mset", &[(1, &["OW", "update"])]),
    ("msetnx", &[(1, &["OW", "insert"])]),
    ("object|idletime", &[(2, &["RO"])]),
    ("object|freq", &[(2, &["RO"])]),
    ("object|encoding", &[(2, &["RO"])]),
    ("object|refcount", &[(2, &["RO"])]),
    ("pfadd", &[(1, &["RW", "insert"])]),
    ("pfcount", &[(1, &["RW", "access"])]),
    ("pfdebug", &[(2, &["RW", "access"])]),
    ("pfmerge", &[(1, &["RW", "access", "insert"]), (2, &["RO", "access"])]),
    ("persist", &[(1, &["RW", "update"])]),
    ("pexpire", &[(1, &["RW", "update"])]),
    ("pexpireat", &[(1, &["RW", "update"])]),
    ("pexpiretime", &[(1, &["RO", "access"])]),
    ("psetex", &[(1, &["OW", "update"])]),
    ("pttl", &[(1, &["RO", "access"])]),
    ("rename", &[(1, &["RW", "access", "delete"]), (2, &["OW", "update"])]),
    ("renamenx", &[(1, &["RW", "access", "delete"]), (2, &["OW", "insert"])]),
    ("restore", &[(1, &["OW", "update"])]),
    ("rpop", &[(1, &["RW", "access", "delete"])]),
    ("rpoplpush", &[(1, &["RW", "access", "delete"]), (2, &["RW", "insert"])]),
    ("rpush", &[(1, &["RW", "insert"])]),
    ("rpushx", &[(1, &["RW", "insert"])]),
    ("sadd", &[(1, &["RW", "insert"])]),
    ("scard", &[(1, &["RO"])]),
    ("sdiff", &[(1, &["RO", "access"])]),
    ("sdiffstore", &[(1, &["OW", "update"]), (2, &["RO", "access"])]),
    ("set", &[(1, &["RW", "access", "update", "variable_flags"])]),
    ("setbit", &[(1, &["RW", "access", "update"])]),
    ("setex", &[(1, &["OW", "update"])]),
    ("setnx", &[(1, &["OW", "insert"])]),
    ("setrange", &[(1, &["RW", "update"])]),
    ("sinter", &[(1, &["RO", "access"])]),
    ("sintercard", &[(1, &["RO", "access"])]),
    ("sinterstore", &[(1, &["RW", "update"]), (2, &["RO", "access"])]),
    ("sismember", &[(1, &["RO"])]),
    ("smembers", &[(1, &["RO", "access"])]),
    ("smismember", &[(1, &["RO", "access"])]),
    ("smove", &[(1, &["RW", "access", "delete"]), (2, &["RW", "insert"])]),
    ("sort", &[(1, &["RO", "access"]), (-1, &["RO", "access"]), (-1, &["OW", "update"])]),
    ("sort_ro", &[(1, &["RO", "access"]), (-1, &["RO", "access"])]),
    ("spop", &[(1, &["RW", "access", "delete"])]),
    ("srandmember", &[(1, &["RO", "access"])]),
    ("srem", &[(1, &["RW", "delete"])]),
    ("sscan", &[(1, &["RO", "access"])]),
    ("strlen", &[(1, &["RO"])]),
    ("substr", &[(1, &["RO", "access"])]),
    ("sunion", &[(1, &["RO", "access"])]),
    ("sunionstore", &[(1, &["OW", "update"]), (2, &["RO", "access"])]),
    ("touch", &[(1, &["RO"])]),
    ("ttl", &[(1, &["RO", "access"])]),
    ("type", &[(1, &["RO"])]),
    ("unlink", &[(1, &["RM", "delete"])]),
    ("watch", &[(1, &["RO"])]),
    ("zadd", &[(1, &["RW", "update"])]),
    ("zcard", &[(1, &["RO"])]),
    ("zcount", &[(1, &["RO", "access"])]),
    ("zdiff", &[(1, &["RO", "access"])]),
    ("zdiffstore", &[(1, &["OW", "update"]), (2, &["RO", "access"])]),
    ("zincrby", &[(1, &["RW", "access", "update"])]),
    ("zinter", &[(1, &["RO", "access"])]),
    ("zintercard", &[(1, &["RO", "access"])]),
    ("zinterstore", &[(1, &["OW", "update"]), (2, &["RO", "access"])]),
    ("zlexcount", &[(1, &["RO", "access"])]),
    ("zmpop", &[(1, &["RW", "access", "delete"])]),
    ("zmscore", &[(1, &["RO", "access"])]),
    ("zpopmax", &[(1, &["RW", "access", "delete"])]),
    ("zpopmin", &[(1, &["RW", "access", "delete"])]),
    ("zrandmember", &[(1, &["RO", "access"])]),
    ("zrange", &[(1, &["RO", "access"])]),
    ("zrangebylex", &[(1, &["RO", "access"])]),
    ("zrangebyscore", &[(1, &["RO", "access"])]),
    ("zrangestore", &[(1, &["OW", "update"]), (2, &["RO", "access"])]),
    ("zrank", &[(1, &["RO", "access"])]),
    ("zrem", &[(1, &["RW", "delete"])]),
    ("zremrangebylex", &[(1, &["RW", "delete"])]),
    ("zremrangebyrank", &[(1, &["RW", "delete"])]),
    ("zremrangebyscore", &[(1, &["RW", "delete"])]),
    ("zrevrange", &[(1, &["RO", "access"])]),
    ("zrevrangebylex", &[(1, &["RO", "access"])]),
    ("zrevrangebyscore", &[(1, &["RO", "access"])]),
    ("zrevrank", &[(1, &["RO", "access"])]),
    ("zscan", &[(1, &["RO", "access"])]),
    ("zscore", &[(1, &["RO", "access"])]),
    ("zunion", &[(1, &["RO", "access"])]),
    ("zunionstore", &[(1, &["OW", "update"]), (2, &["RO", "access"])]),
];

/// The flags of the key at argument `pos` of `args` (`args[0]` the command's name), for
/// command or subcommand `name`: the spec beginning at or before it nearest to it; a key
/// after SORT's `STORE` takes the spec found by that keyword.
pub fn flags_of(name: &str, args: &[Vec<u8>], pos: usize) -> &'static [&'static str] {
    let Some((_, specs)) = SPECS.iter().find(|(n, _)| *n == name) else {
        return &[];
    };
    let after_store = pos >= 1 && args[pos - 1].eq_ignore_ascii_case(b"store");
    if after_store {
        if let Some((_, f)) = specs.iter().rev().find(|(b, _)| *b < 0) {
            return f;
        }
    }
    let flags = specs
        .iter()
        .filter(|(b, _)| *b >= 0 && *b as usize <= pos)
        .max_by_key(|(b, _)| *b)
        .map_or(&[][..], |(_, f)| *f);
    if !flags.contains(&"variable_flags") {
        return flags;
    }
    // As Redis: the arguments decide. SET reads the old value only with GET; BITFIELD
    // writes only with SET or INCRBY.
    let has = |word: &[u8]| args[1..].iter().any(|a| a.eq_ignore_ascii_case(word));
    match name {
        "set" if !has(b"get") => &["OW", "update"],
        "bitfield" if !has(b"set") && !has(b"incrby") => &["RO", "access"],
        _ => &["RW", "access", "update"],
    }
}
