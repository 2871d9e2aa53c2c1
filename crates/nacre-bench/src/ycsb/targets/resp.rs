//! A RESP server (redis-server, nacre-server) as a YCSB store, with the mapping of YCSB's
//! Redis binding: a record is a hash (`HMSET key field0 v0 ...`, `HGETALL` or `HMGET`), and a
//! sorted set `_indices` scores every key by its Java `String.hashCode`, so a scan is
//! `ZRANGEBYSCORE _indices <hash(start)> +inf LIMIT 0 <count>` followed by a read of each key
//! (scan order is hash order, as in YCSB). Each client thread has its own connection; the
//! requests a session is handed go out pipelined in one write.

use std::time::Duration;

use super::super::record::{field_name, Fields};
use super::super::target::{Outcome, Request, Session, Store};
use crate::error::{BenchError, Result};
use crate::resp::{Connection, RedisServer, Reply, RespError};

/// The sorted set YCSB's Redis binding indexes keys in.
pub const INDEX_KEY: &[u8] = b"_indices";

/// Java's `String.hashCode` of an ASCII key: the score YCSB's Redis binding gives it.
pub fn java_hash(key: &[u8]) -> i32 {
    key.iter()
        .fold(0i32, |h, &c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// A RESP server reachable at an address, possibly one this run started.
pub struct RespStore {
    addr: String,
    label: String,
    backend: String,
    durability: String,
    timeout: Duration,
    _server: Option<RedisServer>,
}

impl RespStore {
    /// The server at `addr`, described by `label`, `backend` and `durability`; checks that
    /// it answers `PING`.
    pub fn connect(addr: &str, label: &str, backend: &str, durability: &str) -> Result<Self> {
        let store = RespStore {
            addr: addr.into(),
            label: label.into(),
            backend: backend.into(),
            durability: durability.into(),
            timeout: Duration::from_secs(30),
            _server: None,
        };
        let mut c = store.open()?;
        c.command_ok(&[b"PING"]).map_err(|e| store.err(e))?;
        Ok(store)
    }

    /// A server this run started (killed when the store drops).
    pub fn started(
        server: RedisServer,
        label: &str,
        backend: &str,
        durability: &str,
    ) -> Result<Self> {
        let mut s = RespStore::connect(server.addr(), label, backend, durability)?;
        s._server = Some(server);
        Ok(s)
    }

    fn open(&self) -> Result<Connection> {
        Connection::connect(&self.addr, self.timeout).map_err(|e| self.err(e))
    }

    fn err(&self, e: RespError) -> BenchError {
        BenchError::Process {
            what: self.what(),
            why: e.to_string(),
        }
    }

    /// The label, with the address unless the label already names it.
    fn what(&self) -> String {
        if self.label.contains(&self.addr) {
            self.label.clone()
        } else {
            format!("{} at {}", self.label, self.addr)
        }
    }
}

impl Store for RespStore {
    fn label(&self) -> String {
        self.label.clone()
    }
    fn backend(&self) -> String {
        self.backend.clone()
    }
    fn durability(&self) -> String {
        self.durability.clone()
    }
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(RespSession {
            store: self,
            conn: self.open()?,
        }))
    }
}

struct RespSession<'a> {
    store: &'a RespStore,
    conn: Connection,
}

fn queue_read(conn: &mut Connection, key: &[u8], fields: Option<&[usize]>) {
    match fields {
        None => conn.queue(&[b"HGETALL", key]),
        Some(f) => {
            let names: Vec<Vec<u8>> = f.iter().map(|&i| field_name(i).into_bytes()).collect();
            let mut args: Vec<&[u8]> = vec![b"HMGET", key];
            args.extend(names.iter().map(Vec::as_slice));
            conn.queue(&args);
        }
    }
}

fn queue_hmset(conn: &mut Connection, key: &[u8], values: &Fields) {
    let names: Vec<Vec<u8>> = values
        .iter()
        .map(|(i, _)| field_name(*i).into_bytes())
        .collect();
    let mut args: Vec<&[u8]> = vec![b"HMSET", key];
    for ((_, v), n) in values.iter().zip(&names) {
        args.push(n);
        args.push(v);
    }
    conn.queue(&args);
}

/// What a read reply found: the number of fields present.
fn fields_found(r: &Reply) -> Option<usize> {
    let n = match r {
        Reply::Map(m) => m.len(),
        Reply::Array(a) => {
            // HGETALL in RESP2 answers field, value pairs; HMGET answers values or nils.
            a.iter().filter(|x| !x.is_nil()).count()
        }
        _ => return None,
    };
    Some(n)
}

impl RespSession<'_> {
    fn check(&self, r: &Reply, what: &str) -> Result<()> {
        match r.error_message() {
            Some(m) => Err(BenchError::Process {
                what: self.store.what(),
                why: format!("{what}: {m}"),
            }),
            None => Ok(()),
        }
    }
}

impl Session for RespSession<'_> {
    fn execute(&mut self, requests: &[Request], out: &mut Vec<Outcome>) -> Result<()> {
        // Round 1: every request's commands, pipelined.
        for r in requests {
            match r {
                Request::Read { key, fields } => queue_read(&mut self.conn, key, fields.as_deref()),
                Request::Update { key, values } => queue_hmset(&mut self.conn, key, values),
                Request::Insert { key, values } => {
                    queue_hmset(&mut self.conn, key, values);
                    let score = java_hash(key).to_string();
                    self.conn
                        .queue(&[b"ZADD", INDEX_KEY, score.as_bytes(), key]);
                }
                Request::Scan { start, count, .. } => {
                    let score = java_hash(start).to_string();
                    let limit = count.to_string();
                    self.conn.queue(&[
                        b"ZRANGEBYSCORE",
                        INDEX_KEY,
                        score.as_bytes(),
                        b"+inf",
                        b"LIMIT",
                        b"0",
                        limit.as_bytes(),
                    ]);
                }
            }
        }
        let replies = self.conn.flush_replies().map_err(|e| self.store.err(e))?;
        let mut it = replies.into_iter();
        let mut next = |what: &str| {
            it.next().ok_or_else(|| BenchError::Process {
                what: self.store.label.clone(),
                why: format!("no reply to {what}"),
            })
        };
        // Round 2: the records the scans found.
        let mut scans: Vec<(usize, usize)> = Vec::new(); // (outcome index, keys read)
        let first = out.len();
        for r in requests {
            let outcome = match r {
                Request::Read { .. } => {
                    let reply = next("a read")?;
                    self.check(&reply, "read")?;
                    match fields_found(&reply) {
                        Some(0) | None => Outcome::NotFound,
                        Some(n) => Outcome::Found(n),
                    }
                }
                Request::Update { .. } => {
                    let reply = next("an update")?;
                    self.check(&reply, "update")?;
                    Outcome::Written
                }
                Request::Insert { .. } => {
                    for what in ["an insert", "an index insert"] {
                        let reply = next(what)?;
                        self.check(&reply, what)?;
                    }
                    Outcome::Written
                }
                Request::Scan { fields, .. } => {
                    let reply = next("a scan")?;
                    self.check(&reply, "scan")?;
                    let keys = reply.into_array().unwrap_or_default();
                    for k in &keys {
                        if let Some(k) = k.as_bytes() {
                            queue_read(&mut self.conn, k, fields.as_deref());
                        }
                    }
                    scans.push((out.len() - first, keys.len()));
                    Outcome::Found(keys.len())
                }
            };
            out.push(outcome);
        }
        if !scans.is_empty() {
            let replies = self.conn.flush_replies().map_err(|e| self.store.err(e))?;
            for r in &replies {
                self.check(r, "scan read")?;
            }
            let read: usize = scans.iter().map(|s| s.1).sum();
            if replies.len() != read {
                return Err(BenchError::Process {
                    what: self.store.label.clone(),
                    why: format!("{} replies to {read} scan reads", replies.len()),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_java() {
        // "user1".hashCode() and "hello".hashCode() in Java.
        assert_eq!(java_hash(b"user1"), 111_578_566);
        assert_eq!(java_hash(b"hello"), 99_162_322);
        assert_eq!(java_hash(b""), 0);
        // Overflow wraps as Java's int arithmetic does.
        assert_eq!(
            java_hash(b"user6284781860667377211"),
            b"user6284781860667377211"
                .iter()
                .fold(0i64, |h, &c| (h * 31 + i64::from(c)) as i32 as i64) as i32
        );
    }
}
