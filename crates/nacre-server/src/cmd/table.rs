//! The command table: every supported command with its arity, flags, key positions and
//! documentation, as `COMMAND` reports them.

use std::collections::HashMap;
use std::sync::OnceLock;

use nacre_resp::Reply;

use super::{
    blocking as b, coll as co, connection as c, hashes as h, keys as k, lists as l, multi as m,
    pubsub as ps, server as s, sets as se, sort as so, strings as st, zsetops as zo, zsets as z,
};
use super::{CmdResult, Ctx, Outcome};
use crate::client::Client;
use crate::shared::Shared;

/// How a command runs.
#[derive(Clone, Copy)]
pub enum Run {
    /// Inside a transaction holding its keys.
    Key(fn(&mut Ctx<'_, '_>, &[Vec<u8>]) -> CmdResult),
    /// On the connection, outside any transaction.
    Conn(fn(&Shared, &mut Client, &[Vec<u8>]) -> Outcome),
}

/// Keys with their databases.
pub type KeyList = Vec<(usize, Vec<u8>)>;

/// Finds a command's keys from its database, arguments and the number of databases.
pub type KeysFn = fn(usize, &[Vec<u8>], usize) -> Result<KeyList, Reply>;

/// Where a command's keys are.
#[derive(Clone, Copy)]
pub enum Keys {
    /// None.
    None,
    /// `first`, `last` (negative: from the end), `step`.
    Range(i32, i32, i32),
    /// Computed from the arguments (keys in other databases).
    Custom(KeysFn),
}

/// One command.
pub struct Command {
    /// Lowercase name.
    pub name: &'static str,
    /// Redis arity.
    pub arity: i32,
    /// Redis command flags (plus `exclusive`: holds every database).
    pub flags: &'static [&'static str],
    /// Key positions.
    pub keys: Keys,
    /// Command group for `COMMAND DOCS`.
    pub group: &'static str,
    /// First version with it.
    pub since: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
    /// The handler.
    pub run: Run,
}

impl Command {
    /// (first, last, step) as `COMMAND INFO` reports them.
    pub fn key_spec(&self) -> (i64, i64, i64) {
        match self.keys {
            Keys::None => (0, 0, 0),
            Keys::Range(f, l, s) => (f.into(), l.into(), s.into()),
            Keys::Custom(_) => (1, 1, 1),
        }
    }
}

const W: &[&str] = &["write", "denyoom"];
/// Writes that add no data (Redis runs them over `maxmemory`).
const WO: &[&str] = &["write"];
const WF: &[&str] = &["write", "fast"];
const WDF: &[&str] = &["write", "denyoom", "fast"];
const R: &[&str] = &["readonly"];
/// Blocking commands (see `cmd::blocking`).
const WB: &[&str] = &["write", "blocking"];
const WDB: &[&str] = &["write", "denyoom", "blocking"];
const WFB: &[&str] = &["write", "fast", "blocking"];
/// Read commands over whole databases (see `Outcome::After`).
const RW: &[&str] = &["readonly", "whole"];
const RF: &[&str] = &["readonly", "fast"];
const F: &[&str] = &["fast"];
const FNA: &[&str] = &["noscript", "loading", "stale", "fast", "no-auth"];
const A: &[&str] = &["admin", "noscript", "loading", "stale"];
const AN: &[&str] = &["admin", "noscript", "no-multi"];
const X: &[&str] = &["write", "exclusive"];
const PS: &[&str] = &["pubsub", "noscript", "loading", "stale"];

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $group:literal, $since:literal, $summary:literal, $run:expr) => {
        Command {
            name: $name,
            arity: $arity,
            flags: $flags,
            keys: $keys,
            group: $group,
            since: $since,
            summary: $summary,
            run: $run,
        }
    };
}

use Keys::{None as NK, Range as KR};
use Run::{Conn, Key};

/// Every supported command.
pub static COMMANDS: &[Command] = &[
    // connection
    cmd!("ping", -1, F, NK, "connection", "1.0.0", "Returns the server's liveliness response.", Conn(c::ping)),
    cmd!("echo", 2, F, NK, "connection", "1.0.0", "Returns the given string.", Conn(c::echo)),
    cmd!("hello", -1, FNA, NK, "connection", "6.0.0", "Handshakes with the Redis server.", Conn(c::hello)),
    cmd!("auth", -2, FNA, NK, "connection", "1.0.0", "Authenticates the connection.", Conn(c::auth)),
    cmd!("select", 2, &["loading", "stale", "fast"], NK, "connection", "1.0.0", "Changes the selected database.", Conn(c::select)),
    cmd!("quit", -1, FNA, NK, "connection", "1.0.0", "Closes the connection.", Conn(c::quit)),
    cmd!("reset", 1, FNA, NK, "connection", "6.2.0", "Resets the connection.", Conn(c::reset)),
    cmd!("client", -2, &["admin", "noscript", "loading", "stale"], NK, "connection", "2.4.0", "A container for client connection commands.", Conn(c::client)),
    // pub/sub
    cmd!("subscribe", -2, PS, NK, "pubsub", "2.0.0", "Listens for messages published to channels.", Conn(ps::subscribe)),
    cmd!("unsubscribe", -1, PS, NK, "pubsub", "2.0.0", "Stops listening to messages posted to channels.", Conn(ps::unsubscribe)),
    cmd!("psubscribe", -2, PS, NK, "pubsub", "2.0.0", "Listens for messages published to channels that match one or more patterns.", Conn(ps::psubscribe)),
    cmd!("punsubscribe", -1, PS, NK, "pubsub", "2.0.0", "Stops listening to messages published to channels that match one or more patterns.", Conn(ps::punsubscribe)),
    cmd!("publish", 3, &["pubsub", "loading", "stale", "fast", "may-replicate"], NK, "pubsub", "2.0.0", "Posts a message to a channel.", Conn(ps::publish)),
    cmd!("pubsub", -2, &["pubsub", "loading", "stale"], NK, "pubsub", "2.8.0", "A container for Pub/Sub commands.", Conn(ps::pubsub)),
    // server
    cmd!("command", -1, &["loading", "stale"], NK, "server", "2.8.13", "Returns detailed information about all commands.", Conn(s::command)),
    cmd!("info", -1, &["loading", "stale", "counts"], NK, "server", "1.0.0", "Returns information and statistics about the server.", Conn(s::info)),
    cmd!("config", -2, A, NK, "server", "2.0.0", "A container for server configuration commands.", Conn(s::config)),
    cmd!("time", 1, &["loading", "stale", "fast"], NK, "server", "2.6.0", "Returns the server time.", Conn(s::time)),
    cmd!("lastsave", 1, &["loading", "stale", "fast"], NK, "server", "1.0.0", "Returns the Unix timestamp of the last successful save.", Conn(s::lastsave)),
    cmd!("save", 1, AN, NK, "server", "1.0.0", "Synchronously saves the database to a checkpoint.", Conn(s::save)),
    cmd!("bgsave", -1, &["admin", "noscript"], NK, "server", "1.0.0", "Asynchronously saves the database to a checkpoint.", Conn(s::bgsave)),
    cmd!("shutdown", -1, &["admin", "noscript", "loading", "stale", "no-multi"], NK, "server", "1.0.0", "Closes the database and shuts down the server.", Conn(s::shutdown)),
    cmd!("debug", -2, A, NK, "server", "1.0.0", "A container for debugging commands.", Conn(s::debug)),
    cmd!("monitor", 1, AN, NK, "server", "1.0.0", "Listens for all requests received by the server in real time.", Conn(s::monitor)),
    cmd!("slowlog", -2, &["admin", "loading", "stale"], NK, "server", "2.2.12", "A container for slow log commands.", Conn(s::slowlog)),
    cmd!("dbsize", 1, &["readonly", "fast", "counts"], NK, "server", "1.0.0", "Returns the number of keys in the database.", Key(k::dbsize)),
    cmd!("flushdb", -1, X, NK, "server", "1.0.0", "Removes all keys from the current database.", Key(k::flushdb)),
    cmd!("flushall", -1, X, NK, "server", "1.0.0", "Removes all keys from all databases.", Key(k::flushall)),
    cmd!("swapdb", 3, &["write", "fast", "exclusive"], NK, "server", "4.0.0", "Swaps two Redis databases.", Key(k::swapdb)),
    // transactions
    cmd!("multi", 1, &["noscript", "loading", "stale", "fast"], NK, "transactions", "1.2.0", "Starts a transaction.", Conn(m::multi)),
    cmd!("exec", 1, &["noscript", "loading", "stale", "skip_slowlog"], NK, "transactions", "1.2.0", "Executes all commands in a transaction.", Conn(m::exec)),
    cmd!("discard", 1, &["noscript", "loading", "stale", "fast"], NK, "transactions", "2.0.0", "Discards a transaction.", Conn(m::discard)),
    cmd!("watch", -2, &["noscript", "loading", "stale", "fast"], KR(1, -1, 1), "transactions", "2.2.0", "Monitors changes to keys to determine the execution of a transaction.", Conn(m::watch)),
    cmd!("unwatch", 1, &["noscript", "loading", "stale", "fast"], NK, "transactions", "2.2.0", "Forgets about watched keys of a transaction.", Conn(m::unwatch)),
    // generic
    cmd!("del", -2, WO, KR(1, -1, 1), "generic", "1.0.0", "Deletes one or more keys.", Key(k::del)),
    cmd!("unlink", -2, WF, KR(1, -1, 1), "generic", "4.0.0", "Asynchronously deletes one or more keys.", Key(k::del)),
    cmd!("exists", -2, RF, KR(1, -1, 1), "generic", "1.0.0", "Determines whether one or more keys exist.", Key(k::exists)),
    cmd!("type", 2, RF, KR(1, 1, 1), "generic", "1.0.0", "Determines the type of value stored at a key.", Key(k::type_)),
    cmd!("expire", -3, WF, KR(1, 1, 1), "generic", "1.0.0", "Sets the expiration time of a key in seconds.", Key(k::expire)),
    cmd!("pexpire", -3, WF, KR(1, 1, 1), "generic", "2.6.0", "Sets the expiration time of a key in milliseconds.", Key(k::pexpire)),
    cmd!("expireat", -3, WF, KR(1, 1, 1), "generic", "1.2.0", "Sets the expiration time of a key to a Unix timestamp.", Key(k::expireat)),
    cmd!("pexpireat", -3, WF, KR(1, 1, 1), "generic", "2.6.0", "Sets the expiration time of a key to a Unix milliseconds timestamp.", Key(k::pexpireat)),
    cmd!("ttl", 2, RF, KR(1, 1, 1), "generic", "1.0.0", "Returns the expiration time in seconds of a key.", Key(k::ttl)),
    cmd!("pttl", 2, RF, KR(1, 1, 1), "generic", "2.6.0", "Returns the expiration time in milliseconds of a key.", Key(k::pttl)),
    cmd!("expiretime", 2, RF, KR(1, 1, 1), "generic", "7.0.0", "Returns the expiration time of a key as a Unix timestamp.", Key(k::expiretime)),
    cmd!("pexpiretime", 2, RF, KR(1, 1, 1), "generic", "7.0.0", "Returns the expiration time of a key as a Unix milliseconds timestamp.", Key(k::pexpiretime)),
    cmd!("persist", 2, WF, KR(1, 1, 1), "generic", "2.2.0", "Removes the expiration time of a key.", Key(k::persist)),
    cmd!("rename", 3, WO, KR(1, 2, 1), "generic", "1.0.0", "Renames a key and overwrites the destination.", Key(k::rename)),
    cmd!("renamenx", 3, WF, KR(1, 2, 1), "generic", "1.0.0", "Renames a key only when the target key name doesn't exist.", Key(k::renamenx)),
    cmd!("keys", 2, RW, NK, "generic", "1.0.0", "Returns all key names that match a pattern.", Key(k::keys)),
    cmd!("scan", -2, RW, NK, "generic", "2.8.0", "Iterates over the key names in the database.", Key(k::scan)),
    cmd!("randomkey", 1, RW, NK, "generic", "1.0.0", "Returns a random key name from the database.", Key(k::randomkey)),
    cmd!("copy", -3, W, Keys::Custom(k::copy_keys), "generic", "6.2.0", "Copies the value of a key to a new key.", Key(k::copy)),
    cmd!("move", 3, WF, Keys::Custom(k::move_keys), "generic", "1.0.0", "Moves a key to another database.", Key(k::move_)),
    cmd!("touch", -2, RF, KR(1, -1, 1), "generic", "3.2.1", "Returns the number of existing keys out of those specified after updating the time they were last accessed.", Key(k::exists)),
    cmd!("sort", -2, &["write", "denyoom", "patterns"], Keys::Custom(so::sort_keys), "generic", "1.0.0", "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.", Key(so::sort)),
    cmd!("sort_ro", -2, &["readonly", "patterns"], KR(1, 1, 1), "generic", "7.0.0", "Returns the sorted elements of a list, a set, or a sorted set.", Key(so::sort_ro)),
    cmd!("wait", 3, &["noscript"], NK, "generic", "3.0.0", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", Conn(s::wait)),
    cmd!("object", -2, R, Keys::Custom(k::object_keys), "generic", "2.2.3", "A container for object introspection commands.", Key(k::object)),
    // strings
    cmd!("get", 2, RF, KR(1, 1, 1), "string", "1.0.0", "Returns the string value of a key.", Key(st::get)),
    cmd!("set", -3, W, KR(1, 1, 1), "string", "1.0.0", "Sets the string value of a key, ignoring its type.", Key(st::set)),
    cmd!("setnx", 3, WDF, KR(1, 1, 1), "string", "1.0.0", "Set the string value of a key only when the key doesn't exist.", Key(st::setnx)),
    cmd!("setex", 4, W, KR(1, 1, 1), "string", "2.0.0", "Sets the string value and expiration time of a key.", Key(st::setex)),
    cmd!("psetex", 4, W, KR(1, 1, 1), "string", "2.6.0", "Sets both string value and expiration time in milliseconds of a key.", Key(st::psetex)),
    cmd!("mget", -2, RF, KR(1, -1, 1), "string", "1.0.0", "Atomically returns the string values of one or more keys.", Key(st::mget)),
    cmd!("mset", -3, W, KR(1, -1, 2), "string", "1.0.1", "Atomically creates or modifies the string values of one or more keys.", Key(st::mset)),
    cmd!("msetnx", -3, W, KR(1, -1, 2), "string", "1.0.1", "Atomically modifies the string values of one or more keys only when all keys don't exist.", Key(st::msetnx)),
    cmd!("getset", 3, WDF, KR(1, 1, 1), "string", "1.0.0", "Returns the previous string value of a key after setting it to a new value.", Key(st::getset)),
    cmd!("getdel", 2, WF, KR(1, 1, 1), "string", "6.2.0", "Returns the string value of a key after deleting the key.", Key(st::getdel)),
    cmd!("getex", -2, WF, KR(1, 1, 1), "string", "6.2.0", "Returns the string value of a key after setting its expiration time.", Key(st::getex)),
    cmd!("incr", 2, WDF, KR(1, 1, 1), "string", "1.0.0", "Increments the integer value of a key by one.", Key(st::incr)),
    cmd!("decr", 2, WDF, KR(1, 1, 1), "string", "1.0.0", "Decrements the integer value of a key by one.", Key(st::decr)),
    cmd!("incrby", 3, WDF, KR(1, 1, 1), "string", "1.0.0", "Increments the integer value of a key by a number.", Key(st::incrby)),
    cmd!("decrby", 3, WDF, KR(1, 1, 1), "string", "1.0.0", "Decrements a number from the integer value of a key.", Key(st::decrby)),
    cmd!("incrbyfloat", 3, WDF, KR(1, 1, 1), "string", "2.6.0", "Increment the floating point value of a key by a number.", Key(st::incrbyfloat)),
    cmd!("append", 3, WDF, KR(1, 1, 1), "string", "2.0.0", "Appends a string to the value of a key.", Key(st::append)),
    cmd!("strlen", 2, RF, KR(1, 1, 1), "string", "2.2.0", "Returns the length of a string value.", Key(st::strlen)),
    cmd!("getrange", 4, R, KR(1, 1, 1), "string", "2.4.0", "Returns a substring of the string stored at a key.", Key(st::getrange)),
    cmd!("substr", 4, R, KR(1, 1, 1), "string", "1.0.0", "Returns a substring from a string value.", Key(st::getrange)),
    cmd!("setrange", 4, W, KR(1, 1, 1), "string", "2.2.0", "Overwrites a part of a string value with another by an offset.", Key(st::setrange)),
    cmd!("lcs", -3, R, KR(1, 2, 1), "string", "7.0.0", "Finds the longest common substring.", Key(st::lcs)),
    cmd!("setbit", 4, W, KR(1, 1, 1), "bitmap", "2.2.0", "Sets or clears the bit at offset of the string value.", Key(st::setbit)),
    cmd!("getbit", 3, RF, KR(1, 1, 1), "bitmap", "2.2.0", "Returns a bit value by offset.", Key(st::getbit)),
    cmd!("bitcount", -2, R, KR(1, 1, 1), "bitmap", "2.6.0", "Counts the number of set bits (population counting) in a string.", Key(st::bitcount)),
    cmd!("bitpos", -3, R, KR(1, 1, 1), "bitmap", "2.8.7", "Finds the first set (1) or clear (0) bit in a string.", Key(st::bitpos)),
    cmd!("bitop", -4, W, KR(2, -1, 1), "bitmap", "2.6.0", "Performs bitwise operations on multiple strings, and stores the result.", Key(st::bitop)),
    cmd!("bitfield", -2, W, KR(1, 1, 1), "bitmap", "3.2.0", "Performs arbitrary bitfield integer operations on strings.", Key(st::bitfield)),
    cmd!("bitfield_ro", -2, RF, KR(1, 1, 1), "bitmap", "6.0.0", "Performs arbitrary read-only bitfield integer operations on strings.", Key(st::bitfield_ro)),
    // hashes
    cmd!("hset", -4, WDF, KR(1, 1, 1), "hash", "2.0.0", "Creates or modifies the value of a field in a hash.", Key(h::hset)),
    cmd!("hmset", -4, WDF, KR(1, 1, 1), "hash", "2.0.0", "Sets the values of multiple fields.", Key(h::hmset)),
    cmd!("hsetnx", 4, WDF, KR(1, 1, 1), "hash", "2.0.0", "Sets the value of a field in a hash only when the field doesn't exist.", Key(h::hsetnx)),
    cmd!("hget", 3, RF, KR(1, 1, 1), "hash", "2.0.0", "Returns the value of a field in a hash.", Key(h::hget)),
    cmd!("hmget", -3, RF, KR(1, 1, 1), "hash", "2.0.0", "Returns the values of all fields in a hash.", Key(h::hmget)),
    cmd!("hdel", -3, WF, KR(1, 1, 1), "hash", "2.0.0", "Deletes one or more fields and their values from a hash.", Key(h::hdel)),
    cmd!("hlen", 2, RF, KR(1, 1, 1), "hash", "2.0.0", "Returns the number of fields in a hash.", Key(h::hlen)),
    cmd!("hexists", 3, RF, KR(1, 1, 1), "hash", "2.0.0", "Determines whether a field exists in a hash.", Key(h::hexists)),
    cmd!("hgetall", 2, R, KR(1, 1, 1), "hash", "2.0.0", "Returns all fields and values in a hash.", Key(h::hgetall)),
    cmd!("hkeys", 2, R, KR(1, 1, 1), "hash", "2.0.0", "Returns all fields in a hash.", Key(h::hkeys)),
    cmd!("hvals", 2, R, KR(1, 1, 1), "hash", "2.0.0", "Returns all values in a hash.", Key(h::hvals)),
    cmd!("hincrby", 4, WDF, KR(1, 1, 1), "hash", "2.0.0", "Increments the integer value of a field in a hash by a number.", Key(h::hincrby)),
    cmd!("hincrbyfloat", 4, WDF, KR(1, 1, 1), "hash", "2.6.0", "Increments the floating point value of a field by a number.", Key(h::hincrbyfloat)),
    cmd!("hstrlen", 3, RF, KR(1, 1, 1), "hash", "3.2.0", "Returns the length of the value of a field.", Key(h::hstrlen)),
    cmd!("hscan", -3, R, KR(1, 1, 1), "hash", "2.8.0", "Iterates over fields and values of a hash.", Key(h::hscan)),
    cmd!("hrandfield", -2, R, KR(1, 1, 1), "hash", "6.2.0", "Returns one or more random fields from a hash.", Key(h::hrandfield)),
    // lists
    cmd!("lpush", -3, WDF, KR(1, 1, 1), "list", "1.0.0", "Prepends one or more elements to a list.", Key(l::lpush)),
    cmd!("rpush", -3, WDF, KR(1, 1, 1), "list", "1.0.0", "Appends one or more elements to a list.", Key(l::rpush)),
    cmd!("lpushx", -3, WDF, KR(1, 1, 1), "list", "2.2.0", "Prepends one or more elements to a list only when the list exists.", Key(l::lpushx)),
    cmd!("rpushx", -3, WDF, KR(1, 1, 1), "list", "2.2.0", "Appends an element to a list only when the list exists.", Key(l::rpushx)),
    cmd!("lpop", -2, WF, KR(1, 1, 1), "list", "1.0.0", "Returns the first elements in a list after removing it.", Key(l::lpop)),
    cmd!("rpop", -2, WF, KR(1, 1, 1), "list", "1.0.0", "Returns and removes the last elements of a list.", Key(l::rpop)),
    cmd!("llen", 2, RF, KR(1, 1, 1), "list", "1.0.0", "Returns the length of a list.", Key(l::llen)),
    cmd!("lrange", 4, R, KR(1, 1, 1), "list", "1.0.0", "Returns a range of elements from a list.", Key(l::lrange)),
    cmd!("lindex", 3, R, KR(1, 1, 1), "list", "1.0.0", "Returns an element from a list by its index.", Key(l::lindex)),
    cmd!("lset", 4, W, KR(1, 1, 1), "list", "1.0.0", "Sets the value of an element in a list by its index.", Key(l::lset)),
    cmd!("ltrim", 4, WO, KR(1, 1, 1), "list", "1.0.0", "Removes elements from both ends a list.", Key(l::ltrim)),
    cmd!("lrem", 4, WO, KR(1, 1, 1), "list", "1.0.0", "Removes elements from a list.", Key(l::lrem)),
    cmd!("linsert", 5, W, KR(1, 1, 1), "list", "2.2.0", "Inserts an element before or after another element in a list.", Key(l::linsert)),
    cmd!("lpos", -3, R, KR(1, 1, 1), "list", "6.0.6", "Returns the index of matching elements in a list.", Key(l::lpos)),
    cmd!("lmove", 5, W, KR(1, 2, 1), "list", "6.2.0", "Returns an element after popping it from one list and pushing it to another.", Key(l::lmove)),
    cmd!("rpoplpush", 3, W, KR(1, 2, 1), "list", "1.2.0", "Returns the last element of a list after removing and pushing it to another list.", Key(l::rpoplpush)),
    cmd!("lmpop", -4, WO, Keys::Custom(l::lmpop_keys), "list", "7.0.0", "Returns multiple elements from a list after removing them.", Key(l::lmpop)),
    cmd!("blpop", -3, WB, Keys::Custom(b::locked_keys), "list", "2.0.0", "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", Key(b::run)),
    cmd!("brpop", -3, WB, Keys::Custom(b::locked_keys), "list", "2.0.0", "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", Key(b::run)),
    cmd!("blmove", 6, WDB, Keys::Custom(b::locked_keys), "list", "6.2.0", "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise.", Key(b::run)),
    cmd!("brpoplpush", 4, WDB, Keys::Custom(b::locked_keys), "list", "2.2.0", "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise.", Key(b::run)),
    cmd!("blmpop", -5, WB, Keys::Custom(b::locked_keys), "list", "7.0.0", "Pops the first element from one of multiple lists. Blocks until an element is available otherwise.", Key(b::run)),
    // sets
    cmd!("sadd", -3, WDF, KR(1, 1, 1), "set", "1.0.0", "Adds one or more members to a set.", Key(se::sadd)),
    cmd!("srem", -3, WF, KR(1, 1, 1), "set", "1.0.0", "Removes one or more members from a set.", Key(se::srem)),
    cmd!("smembers", 2, R, KR(1, 1, 1), "set", "1.0.0", "Returns all members of a set.", Key(se::smembers)),
    cmd!("sismember", 3, RF, KR(1, 1, 1), "set", "1.0.0", "Determines whether a member belongs to a set.", Key(se::sismember)),
    cmd!("smismember", -3, RF, KR(1, 1, 1), "set", "6.2.0", "Determines whether multiple members belong to a set.", Key(se::smismember)),
    cmd!("scard", 2, RF, KR(1, 1, 1), "set", "1.0.0", "Returns the number of members in a set.", Key(se::scard)),
    cmd!("spop", -2, WF, KR(1, 1, 1), "set", "1.0.0", "Returns one or more random members from a set after removing them.", Key(se::spop)),
    cmd!("srandmember", -2, R, KR(1, 1, 1), "set", "1.0.0", "Get one or multiple random members from a set.", Key(se::srandmember)),
    cmd!("smove", 4, WF, KR(1, 2, 1), "set", "1.0.0", "Moves a member from one set to another.", Key(se::smove)),
    cmd!("sinter", -2, R, KR(1, -1, 1), "set", "1.0.0", "Returns the intersect of multiple sets.", Key(se::sinter)),
    cmd!("sintercard", -3, R, Keys::Custom(co::numkeys_keys), "set", "7.0.0", "Returns the number of members of the intersect of multiple sets.", Key(se::sintercard)),
    cmd!("sunion", -2, R, KR(1, -1, 1), "set", "1.0.0", "Returns the union of multiple sets.", Key(se::sunion)),
    cmd!("sdiff", -2, R, KR(1, -1, 1), "set", "1.0.0", "Returns the difference of multiple sets.", Key(se::sdiff)),
    cmd!("sinterstore", -3, W, KR(1, -1, 1), "set", "1.0.0", "Stores the intersect of multiple sets in a key.", Key(se::sinterstore)),
    cmd!("sunionstore", -3, W, KR(1, -1, 1), "set", "1.0.0", "Stores the union of multiple sets in a key.", Key(se::sunionstore)),
    cmd!("sdiffstore", -3, W, KR(1, -1, 1), "set", "1.0.0", "Stores the difference of multiple sets in a key.", Key(se::sdiffstore)),
    cmd!("sscan", -3, R, KR(1, 1, 1), "set", "2.8.0", "Iterates over members of a set.", Key(se::sscan)),
    // sorted sets
    cmd!("zadd", -4, WDF, KR(1, 1, 1), "sorted-set", "1.2.0", "Adds one or more members to a sorted set, or updates their scores.", Key(z::zadd)),
    cmd!("zincrby", 4, WDF, KR(1, 1, 1), "sorted-set", "1.2.0", "Increments the score of a member in a sorted set.", Key(z::zincrby)),
    cmd!("zrem", -3, WF, KR(1, 1, 1), "sorted-set", "1.2.0", "Removes one or more members from a sorted set.", Key(z::zrem)),
    cmd!("zscore", 3, RF, KR(1, 1, 1), "sorted-set", "1.2.0", "Returns the score of a member in a sorted set.", Key(z::zscore)),
    cmd!("zmscore", -3, RF, KR(1, 1, 1), "sorted-set", "6.2.0", "Returns the score of one or more members in a sorted set.", Key(z::zmscore)),
    cmd!("zcard", 2, RF, KR(1, 1, 1), "sorted-set", "1.2.0", "Returns the number of members in a sorted set.", Key(z::zcard)),
    cmd!("zcount", 4, RF, KR(1, 1, 1), "sorted-set", "2.0.0", "Returns the count of members in a sorted set that have scores within a range.", Key(z::zcount)),
    cmd!("zlexcount", 4, RF, KR(1, 1, 1), "sorted-set", "2.8.9", "Returns the number of members in a sorted set within a lexicographical range.", Key(z::zlexcount)),
    cmd!("zrank", 3, RF, KR(1, 1, 1), "sorted-set", "2.0.0", "Returns the index of a member in a sorted set ordered by ascending scores.", Key(z::zrank)),
    cmd!("zrevrank", 3, RF, KR(1, 1, 1), "sorted-set", "2.0.0", "Returns the index of a member in a sorted set ordered by descending scores.", Key(z::zrevrank)),
    cmd!("zrange", -4, R, KR(1, 1, 1), "sorted-set", "1.2.0", "Returns members in a sorted set within a range of indexes.", Key(z::zrange)),
    cmd!("zrangestore", -5, W, KR(1, 2, 1), "sorted-set", "6.2.0", "Stores a range of members from sorted set in a key.", Key(z::zrangestore)),
    cmd!("zrevrange", -4, R, KR(1, 1, 1), "sorted-set", "1.2.0", "Returns members in a sorted set within a range of indexes in reverse order.", Key(z::zrevrange)),
    cmd!("zrangebyscore", -4, R, KR(1, 1, 1), "sorted-set", "1.0.5", "Returns members in a sorted set within a range of scores.", Key(z::zrangebyscore)),
    cmd!("zrevrangebyscore", -4, R, KR(1, 1, 1), "sorted-set", "2.2.0", "Returns members in a sorted set within a range of scores in reverse order.", Key(z::zrevrangebyscore)),
    cmd!("zrangebylex", -4, R, KR(1, 1, 1), "sorted-set", "2.8.9", "Returns members in a sorted set within a lexicographical range.", Key(z::zrangebylex)),
    cmd!("zrevrangebylex", -4, R, KR(1, 1, 1), "sorted-set", "2.8.9", "Returns members in a sorted set within a lexicographical range in reverse order.", Key(z::zrevrangebylex)),
    cmd!("zremrangebyrank", 4, WO, KR(1, 1, 1), "sorted-set", "2.0.0", "Removes members in a sorted set within a range of indexes.", Key(z::zremrangebyrank)),
    cmd!("zremrangebyscore", 4, WO, KR(1, 1, 1), "sorted-set", "1.2.0", "Removes members in a sorted set within a range of scores.", Key(z::zremrangebyscore)),
    cmd!("zremrangebylex", 4, WO, KR(1, 1, 1), "sorted-set", "2.8.9", "Removes members in a sorted set within a lexicographical range.", Key(z::zremrangebylex)),
    cmd!("zpopmin", -2, WF, KR(1, 1, 1), "sorted-set", "5.0.0", "Returns the lowest-scoring members from a sorted set after removing them.", Key(zo::zpopmin)),
    cmd!("zpopmax", -2, WF, KR(1, 1, 1), "sorted-set", "5.0.0", "Returns the highest-scoring members from a sorted set after removing them.", Key(zo::zpopmax)),
    cmd!("zmpop", -4, WO, Keys::Custom(zo::zmpop_keys), "sorted-set", "7.0.0", "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them.", Key(zo::zmpop)),
    cmd!("bzpopmin", -3, WFB, Keys::Custom(b::locked_keys), "sorted-set", "5.0.0", "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise.", Key(b::run)),
    cmd!("bzpopmax", -3, WFB, Keys::Custom(b::locked_keys), "sorted-set", "5.0.0", "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.", Key(b::run)),
    cmd!("bzmpop", -5, WB, Keys::Custom(b::locked_keys), "sorted-set", "7.0.0", "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise.", Key(b::run)),
    cmd!("zrandmember", -2, R, KR(1, 1, 1), "sorted-set", "6.2.0", "Returns one or more random members from a sorted set.", Key(zo::zrandmember)),
    cmd!("zunion", -3, R, Keys::Custom(zo::algebra_keys), "sorted-set", "6.2.0", "Returns the union of multiple sorted sets.", Key(zo::zunion)),
    cmd!("zinter", -3, R, Keys::Custom(zo::algebra_keys), "sorted-set", "6.2.0", "Returns the intersect of multiple sorted sets.", Key(zo::zinter)),
    cmd!("zdiff", -3, R, Keys::Custom(zo::algebra_keys), "sorted-set", "6.2.0", "Returns the difference between multiple sorted sets.", Key(zo::zdiff)),
    cmd!("zunionstore", -4, W, Keys::Custom(zo::algebra_store_keys), "sorted-set", "2.0.0", "Stores the union of multiple sorted sets in a key.", Key(zo::zunionstore)),
    cmd!("zinterstore", -4, W, Keys::Custom(zo::algebra_store_keys), "sorted-set", "2.0.0", "Stores the intersect of multiple sorted sets in a key.", Key(zo::zinterstore)),
    cmd!("zdiffstore", -4, W, Keys::Custom(zo::algebra_store_keys), "sorted-set", "6.2.0", "Stores the difference of multiple sorted sets in a key.", Key(zo::zdiffstore)),
    cmd!("zintercard", -3, R, Keys::Custom(zo::algebra_keys), "sorted-set", "7.0.0", "Returns the number of members of the intersect of multiple sorted sets.", Key(zo::zintercard)),
    cmd!("zscan", -3, R, KR(1, 1, 1), "sorted-set", "2.8.0", "Iterates over members and scores of a sorted set.", Key(zo::zscan)),
];

/// The command named `name` (lowercase).
pub fn lookup(name: &str) -> Option<&'static Command> {
    static MAP: OnceLock<HashMap<&'static str, &'static Command>> = OnceLock::new();
    MAP.get_or_init(|| COMMANDS.iter().map(|c| (c.name, c)).collect())
        .get(name)
        .copied()
}

/// The command named `name` in any case, without allocating.
pub fn lookup_bytes(name: &[u8]) -> Option<&'static Command> {
    let mut buf = [0u8; 32];
    if name.len() > buf.len() {
        return None;
    }
    for (d, s) in buf.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    lookup(std::str::from_utf8(&buf[..name.len()]).ok()?)
}

/// The keys `cmd` names in `args`, with their databases.
pub fn keys_of(
    cmd: &Command,
    db: usize,
    args: &[Vec<u8>],
    databases: usize,
) -> Result<Vec<(usize, Vec<u8>)>, Reply> {
    match cmd.keys {
        Keys::None => Ok(Vec::new()),
        Keys::Custom(f) => f(db, args, databases),
        Keys::Range(first, last, step) => {
            let n = args.len() as i32;
            let last = if last < 0 { n + last } else { last.min(n - 1) };
            let mut out = Vec::new();
            let mut i = first;
            while i <= last && i < n {
                out.push((db, args[i as usize].clone()));
                i += step;
            }
            if step == 2 && (n - first) % 2 != 0 {
                return Err(super::arity_error(cmd.name));
            }
            Ok(out)
        }
    }
}

/// `ERR` for a subcommand that does not exist.
pub fn unknown_subcommand(sub: &[u8], cmd: &str) -> Reply {
    let mut msg = b"unknown subcommand '".to_vec();
    msg.extend(sub.iter().take(128));
    msg.extend_from_slice(format!("'. Try {} HELP.", cmd.to_ascii_uppercase()).as_bytes());
    super::err_bytes(&msg)
}
