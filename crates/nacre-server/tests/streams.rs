//! Streams against redis-server 7.0: the same command sessions (XADD with its id forms and
//! trimming, XRANGE/XREVRANGE, XLEN, XDEL, XTRIM, XSETID, XREAD, and consumer groups: XGROUP,
//! XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO; blocked readers, keyspace events,
//! MULTI, scripts, COPY/RENAME) give the same replies byte for byte, errors included, over
//! RESP2 and RESP3, and streams DUMPed by either server RESTORE on the other as they were.
//! Replies are read off the wire as sent; only fields that depend on the clock (idle times,
//! delivery and seen times) and XINFO's `radix-tree-nodes` (an approximation in nacre) are
//! masked before comparing; nodes end where Redis's end, by entries and by bytes
//! (`node_bytes_match_redis`). Where nacre is known to differ, the command is left out with
//! a comment saying how (DUMP bytes of nodes with deleted or compressible entries).
//! `STREAMS_DUMP=1` prints Redis's side of each session.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{RedisServer, Server};

/// One reply as sent: its type byte and either its line, its blob, or its elements (a map's
/// keys and values alternate).
#[derive(Clone, Debug, PartialEq)]
enum R {
    /// `+ - : , # ( _` and the like: the type byte and the rest of the line.
    Line(u8, Vec<u8>),
    /// `$ ! =`: a blob, `None` for a length of -1.
    Blob(u8, Option<Vec<u8>>),
    /// `* % ~ >`: elements, `None` for a length of -1.
    Agg(u8, Option<Vec<R>>),
}

impl R {
    /// The reply's bytes as a server sends them.
    fn wire(&self, out: &mut Vec<u8>) {
        match self {
            R::Line(t, s) => {
                out.push(*t);
                out.extend_from_slice(s);
            }
            R::Blob(t, None) | R::Agg(t, None) => {
                out.push(*t);
                out.extend_from_slice(b"-1");
            }
            R::Blob(t, Some(b)) => {
                out.push(*t);
                out.extend_from_slice(format!("{}\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
            }
            R::Agg(t, Some(items)) => {
                let n = if *t == b'%' {
                    items.len() / 2
                } else {
                    items.len()
                };
                out.push(*t);
                out.extend_from_slice(n.to_string().as_bytes());
                out.extend_from_slice(b"\r\n");
                for i in items {
                    i.wire(out);
                }
                return;
            }
        }
        out.extend_from_slice(b"\r\n");
    }

    /// Whether this is the blob `s`.
    fn is(&self, s: &str) -> bool {
        matches!(self, R::Blob(_, Some(b)) if b == s.as_bytes())
    }

    /// The elements of an array, set or map.
    fn items_mut(&mut self) -> &mut [R] {
        match self {
            R::Agg(_, Some(items)) => items,
            _ => &mut [],
        }
    }

    /// The value that follows the key `name` in a map, or in an array of keys and values.
    fn field_mut(&mut self, name: &str) -> Option<&mut R> {
        let items = self.items_mut();
        let at = (0..items.len() / 2).find(|&i| items[2 * i].is(name))?;
        items.get_mut(2 * at + 1)
    }

    /// Replaces an integer's digits by `masked` (the type stays visible).
    fn mask(&mut self) {
        if let R::Line(b':', s) = self {
            *s = b"masked".to_vec();
        }
    }

    /// Masks the value of the key `name` when there is one.
    fn mask_field(&mut self, name: &str) {
        if let Some(v) = self.field_mut(name) {
            v.mask();
        }
    }

    /// Masks element `i` of each element.
    fn mask_column(&mut self, i: usize) {
        for row in self.items_mut() {
            if let Some(v) = row.items_mut().get_mut(i) {
                v.mask();
            }
        }
    }
}

/// A connection that reads replies off the wire.
struct Conn {
    r: BufReader<TcpStream>,
}

impl Conn {
    fn open(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        Conn {
            r: BufReader::new(s),
        }
    }

    /// Sends a command; its reply, parsed.
    fn call(&mut self, args: &[&str]) -> R {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.call_bytes(&bytes)
    }

    /// Sends a command of any bytes; its reply, parsed.
    fn call_bytes(&mut self, args: &[&[u8]]) -> R {
        self.send(args);
        let (reply, raw) = self.read();
        // What is compared is sent exactly so: the parse gives back the bytes it read.
        let mut again = Vec::new();
        reply.wire(&mut again);
        assert_eq!(
            again.escape_ascii().to_string(),
            raw.escape_ascii().to_string(),
            "{:?}: not read back as sent",
            args.first().map(|a| a.escape_ascii().to_string())
        );
        reply
    }

    /// Sends a command without reading its reply.
    fn send(&mut self, args: &[&[u8]]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.r.get_mut().write_all(&out).expect("write");
    }

    /// One reply and the bytes it came in.
    fn read(&mut self) -> (R, Vec<u8>) {
        let mut line = Vec::new();
        self.r.read_until(b'\n', &mut line).expect("read");
        assert!(line.ends_with(b"\r\n"), "truncated reply {line:?}");
        let mut raw = line.clone();
        let t = line[0];
        let body = line[1..line.len() - 2].to_vec();
        let len = || -> i64 { std::str::from_utf8(&body).unwrap().parse().unwrap() };
        let reply = match t {
            b'$' | b'!' | b'=' => {
                let n = len();
                if n < 0 {
                    R::Blob(t, None)
                } else {
                    let mut b = vec![0; n as usize + 2];
                    self.r.read_exact(&mut b).expect("read blob");
                    raw.extend_from_slice(&b);
                    b.truncate(n as usize);
                    R::Blob(t, Some(b))
                }
            }
            b'*' | b'%' | b'~' | b'>' => {
                let n = len();
                if n < 0 {
                    R::Agg(t, None)
                } else {
                    let count = if t == b'%' { 2 * n } else { n };
                    let mut items = Vec::new();
                    for _ in 0..count {
                        let (item, bytes) = self.read();
                        raw.extend_from_slice(&bytes);
                        items.push(item);
                    }
                    R::Agg(t, Some(items))
                }
            }
            _ => R::Line(t, body),
        };
        (reply, raw)
    }
}

/// Masks what depends on the clock, and nacre's estimate of Redis's radix tree nodes.
fn mask(args: &[&str], r: &mut R) {
    let up: Vec<String> = args.iter().map(|a| a.to_ascii_uppercase()).collect();
    let sub = up.get(1).map_or("", String::as_str);
    match up[0].as_str() {
        // The extended form: [id, consumer, idle, deliveries] per entry.
        "XPENDING" if args.len() > 3 => r.mask_column(2),
        "XINFO" if sub == "CONSUMERS" => {
            for c in r.items_mut() {
                c.mask_field("idle");
            }
        }
        "XINFO" if sub == "STREAM" => {
            r.mask_field("radix-tree-nodes");
            let Some(groups) = r.field_mut("groups") else {
                return;
            };
            // FULL: delivery times of the group's and each consumer's pending entries, and
            // when each consumer was last seen.
            for g in groups.items_mut() {
                if let Some(p) = g.field_mut("pending") {
                    p.mask_column(2);
                }
                if let Some(cs) = g.field_mut("consumers") {
                    for c in cs.items_mut() {
                        c.mask_field("seen-time");
                        if let Some(p) = c.field_mut("pending") {
                            p.mask_column(1);
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

/// One command's reply (or error), with the command, as text: the reply's bytes, escaped.
fn run(c: &mut Conn, args: &[&str]) -> String {
    let mut r = c.call(args);
    mask(args, &mut r);
    let mut out = Vec::new();
    r.wire(&mut out);
    format!("{args:?} -> {}", out.escape_ascii())
}

/// Runs each command of `script`, one line per reply.
fn replay(c: &mut Conn, script: &[&[&str]]) -> Vec<String> {
    script.iter().map(|args| run(c, args)).collect()
}

/// XADD's id forms and trimming, XRANGE/XREVRANGE, XLEN, XDEL, XTRIM, XSETID, XREAD, and
/// WRONGTYPE.
fn basic_session(c: &mut Conn) -> Vec<String> {
    let script: &[&[&str]] = &[
        &["CONFIG", "SET", "stream-node-max-entries", "3"],
        // XADD: ids given whole, by milliseconds only, and `ms-*`.
        &["XADD", "s", "1-1", "a", "1"],
        &["XADD", "s", "1-2", "b", "2", "c", "3"],
        &["XADD", "s", "1-*", "c", "3"],
        &["XADD", "s", "2-*", "d", "4"],
        &["XADD", "s", "2", "e", "5"],
        &["XADD", "s", "3", "f", "6"],
        &["XADD", "s", "3-*", "g", "7"],
        &["XADD", "s", "2-*", "g", "7"],
        &["XADD", "s", "0-0", "x", "y"],
        &["XADD", "s", "1-5", "x", "y"],
        &["XADD", "s", "3-1", "x", "y"],
        &["XADD", "s", "5-0", "x"],
        &["XADD", "s", "5-0", "x", "y", "z"],
        &["XADD", "s", "5-0"],
        &["XADD", "s", "abc", "x", "y"],
        &["XADD", "s", "1-x", "x", "y"],
        &["XADD", "s", "-", "x", "y"],
        &["XADD", "s", "+", "x", "y"],
        &["XADD", "s", "5-18446744073709551616", "x", "y"],
        &["XADD", "s", "-5-0", "x", "y"],
        &["XADD", "s", "5-*-1", "x", "y"],
        &["XADD", "s", "*-1", "x", "y"],
        &["XADD", "fresh", "0-*", "a", "1"],
        &["XADD", "fresh", "0-*", "a", "2"],
        &["XADD", "zero", "0-0", "a", "1"],
        &["EXISTS", "zero"],
        // The last possible id, then nothing more.
        &[
            "XADD",
            "top",
            "18446744073709551615-18446744073709551614",
            "a",
            "1",
        ],
        &["XADD", "top", "18446744073709551615-*", "a", "2"],
        &["XADD", "top", "18446744073709551615-*", "a", "3"],
        &["XADD", "top", "*", "a", "3"],
        // `*` after an id in the future goes on from it.
        &["XADD", "future", "99999999999999-5", "a", "1"],
        &["XADD", "future", "*", "a", "2"],
        &["XADD", "future", "99999999999999-*", "a", "3"],
        &["XLEN", "future"],
        // NOMKSTREAM.
        &["XADD", "nokey", "NOMKSTREAM", "1-1", "a", "1"],
        &["XADD", "nokey", "NOMKSTREAM", "*", "a", "1"],
        &[
            "XADD",
            "nokey",
            "nomkstream",
            "MAXLEN",
            "5",
            "1-1",
            "a",
            "1",
        ],
        &["EXISTS", "nokey"],
        &["XADD", "s", "NOMKSTREAM", "4-0", "h", "8"],
        // Trimming options, and their errors.
        &["XADD", "s", "MAXLEN", "2", "LIMIT", "10", "6-0", "a", "1"],
        &["XADD", "s", "MAXLEN", "2", "MINID", "1", "6-0", "a", "1"],
        &["XADD", "s", "MINID", "1", "MAXLEN", "2", "6-0", "a", "1"],
        &["XADD", "s", "MAXLEN", "-1", "6-0", "a", "1"],
        &["XADD", "s", "MAXLEN", "abc", "6-0", "a", "1"],
        &[
            "XADD", "s", "MAXLEN", "~", "2", "LIMIT", "-1", "6-0", "a", "1",
        ],
        &[
            "XADD", "s", "MAXLEN", "~", "2", "LIMIT", "x", "6-0", "a", "1",
        ],
        &["XADD", "s", "MINID", "abc", "6-0", "a", "1"],
        &["XADD", "s", "MINID", "-", "6-0", "a", "1"],
        &["XADD", "s", "MAXLEN"],
        &["XADD", "s", "MAXLEN", "="],
        &["XLEN", "s"],
        &["XRANGE", "s", "-", "+"],
        &[
            "XADD",
            "s",
            "NOMKSTREAM",
            "MAXLEN",
            "=",
            "4",
            "7-0",
            "i",
            "9",
        ],
        &["XADD", "s", "MINID", "2-1", "8-0", "j", "10"],
        &["XADD", "s", "MAXLEN", "0", "8-1", "k", "11"],
        &["XLEN", "s"],
        &["XRANGE", "s", "-", "+"],
        &["XINFO", "STREAM", "s"],
        // `~` trims whole nodes of 3 entries only.
        &["DEL", "s"],
        &["XADD", "s", "1-0", "a", "1"],
        &["XADD", "s", "2-0", "a", "2"],
        &["XADD", "s", "3-0", "a", "3"],
        &["XADD", "s", "4-0", "a", "4"],
        &["XADD", "s", "5-0", "a", "5"],
        &["XADD", "s", "6-0", "a", "6"],
        &["XADD", "s", "7-0", "a", "7"],
        &["XADD", "s", "8-0", "a", "8"],
        &["XADD", "s", "9-0", "a", "9"],
        &["XADD", "s", "10-0", "a", "10"],
        &["XINFO", "STREAM", "s"],
        &["XTRIM", "s", "MAXLEN", "~", "9"],
        &["XTRIM", "s", "MAXLEN", "~", "5"],
        &["XINFO", "STREAM", "s"],
        &["XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "2"],
        &["XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "3"],
        &["XRANGE", "s", "-", "+"],
        &["XTRIM", "s", "MINID", "~", "9-0"],
        &["XTRIM", "s", "MINID", "~", "10-0"],
        &["XRANGE", "s", "-", "+"],
        &["XADD", "s", "MAXLEN", "~", "1", "11-0", "a", "11"],
        &["XADD", "s", "MAXLEN", "~", "1", "12-0", "a", "12"],
        &[
            "XADD", "s", "MAXLEN", "~", "1", "LIMIT", "0", "13-0", "a", "13",
        ],
        &[
            "XADD", "s", "MAXLEN", "~", "1", "LIMIT", "3", "14-0", "a", "14",
        ],
        &[
            "XADD", "s", "MINID", "~", "14-0", "LIMIT", "100", "15-0", "a", "15",
        ],
        &["XINFO", "STREAM", "s"],
        &["XRANGE", "s", "-", "+"],
        &["XTRIM", "s", "MAXLEN", "1"],
        &["XTRIM", "s", "MAXLEN", "=", "1"],
        &["XTRIM", "s", "MINID", "100-0"],
        &["XINFO", "STREAM", "s"],
        &["XTRIM", "s", "MINID", "=", "0"],
        &["XTRIM", "s", "MAXLEN", "1", "LIMIT", "1"],
        &["XTRIM", "s", "MAXLEN", "1", "MINID", "1"],
        &["XTRIM", "s"],
        &["XTRIM", "s", "BOGUS", "1"],
        &["XTRIM", "s", "MAXLEN", "-1"],
        &["XTRIM", "missing", "MAXLEN", "0"],
        &["EXISTS", "missing"],
        // XRANGE and XREVRANGE.
        &["DEL", "r"],
        &["XADD", "r", "1-1", "a", "1"],
        &["XADD", "r", "1-2", "b", "2"],
        &["XADD", "r", "2-0", "c", "3"],
        &["XADD", "r", "2-5", "d", "4"],
        &["XADD", "r", "3-0", "e", "5", "f", "6"],
        &["XRANGE", "r", "-", "+"],
        &["XRANGE", "r", "(1-1", "+"],
        &["XRANGE", "r", "-", "(3-0"],
        &["XRANGE", "r", "(1-1", "(1-2"],
        &["XRANGE", "r", "(1-1", "(2-0"],
        &["XRANGE", "r", "2", "2"],
        &["XRANGE", "r", "(2", "3"],
        &["XRANGE", "r", "1", "(2"],
        &["XRANGE", "r", "3-0", "1-0"],
        &["XRANGE", "r", "-", "+", "COUNT", "0"],
        &["XRANGE", "r", "-", "+", "COUNT", "-1"],
        &["XRANGE", "r", "-", "+", "COUNT", "2"],
        &["XRANGE", "r", "-", "+", "count", "100"],
        &["XRANGE", "r", "-", "+", "COUNT", "abc"],
        &["XRANGE", "r", "-", "+", "COUNT"],
        &["XRANGE", "r", "-", "+", "LIMIT", "2"],
        &["XRANGE", "r", "abc", "+"],
        &["XRANGE", "r", "-", "1-x"],
        &["XRANGE", "r", "(-", "+"],
        &["XRANGE", "r", "-", "(+"],
        &["XRANGE", "r", "(", "+"],
        &[
            "XRANGE",
            "r",
            "(18446744073709551615-18446744073709551615",
            "+",
        ],
        &["XRANGE", "r", "-", "(0-0"],
        &["XRANGE", "r", "(0-0", "+"],
        &[
            "XRANGE",
            "r",
            "-",
            "(18446744073709551615-18446744073709551615",
        ],
        &["XRANGE", "r", "-"],
        &["XRANGE", "missing", "-", "+"],
        &["XRANGE", "missing", "-", "+", "COUNT", "0"],
        &["XREVRANGE", "r", "+", "-"],
        &["XREVRANGE", "r", "+", "-", "COUNT", "2"],
        &["XREVRANGE", "r", "+", "-", "COUNT", "0"],
        &["XREVRANGE", "r", "(3-0", "-"],
        &["XREVRANGE", "r", "+", "(1-2"],
        &["XREVRANGE", "r", "2", "2"],
        &["XREVRANGE", "r", "-", "+"],
        &["XREVRANGE", "r", "(0-0", "-"],
        &["XREVRANGE", "missing", "+", "-"],
        // XDEL, and what XINFO STREAM records of it.
        &["XDEL", "r", "1-1"],
        &["XINFO", "STREAM", "r"],
        &["XDEL", "r", "2-0"],
        &["XINFO", "STREAM", "r"],
        &["XDEL", "r", "99-0", "1-1", "0-1"],
        &["XDEL", "r", "1-2", "1-2"],
        &["XDEL", "r", "abc"],
        &["XDEL", "r", "2-5", "abc"],
        &["XDEL", "r", "+"],
        &["XLEN", "r"],
        &["XDEL", "missing", "1-1"],
        &["XINFO", "STREAM", "r"],
        &["XRANGE", "r", "-", "+"],
        &["XDEL", "r", "3-0"],
        &["XINFO", "STREAM", "r"],
        &["EXISTS", "r"],
        // XSETID.
        &["XADD", "d", "1-0", "a", "1"],
        &["XADD", "d", "2-0", "a", "2"],
        &["XADD", "d", "3-0", "a", "3"],
        &["XSETID", "d", "10-0"],
        &["XINFO", "STREAM", "d"],
        &["XADD", "d", "5-0", "a", "5"],
        &["XADD", "d", "10-*", "a", "5"],
        &["XSETID", "d", "1-0"],
        &["XSETID", "d", "10-1"],
        &["XSETID", "d", "10-0"],
        &[
            "XSETID",
            "d",
            "20-0",
            "ENTRIESADDED",
            "100",
            "MAXDELETEDID",
            "15-0",
        ],
        &["XINFO", "STREAM", "d"],
        &["XSETID", "d", "20-0", "ENTRIESADDED", "1"],
        &["XSETID", "d", "20-0", "MAXDELETEDID", "25-0"],
        &["XSETID", "d", "20-0", "ENTRIESADDED", "-1"],
        &["XSETID", "d", "20-0", "ENTRIESADDED", "abc"],
        &["XSETID", "d", "20-0", "MAXDELETEDID", "abc"],
        &["XSETID", "d", "20-0", "ENTRIESADDED"],
        &["XSETID", "d", "30-0", "BOGUS", "1"],
        &["XSETID", "d", "abc"],
        &["XSETID", "d", "+"],
        &["XSETID", "missing", "1-0"],
        &["XSETID", "d"],
        &["XTRIM", "d", "MAXLEN", "0"],
        &["XSETID", "d", "5-0"],
        &["XINFO", "STREAM", "d"],
        &[
            "XSETID",
            "d",
            "6-0",
            "ENTRIESADDED",
            "0",
            "MAXDELETEDID",
            "6-0",
        ],
        &["XINFO", "STREAM", "d"],
        &["XADD", "d", "6-*", "a", "6"],
        &["XINFO", "STREAM", "d"],
        // XREAD without blocking.
        &["DEL", "x1", "x2"],
        &["XADD", "x1", "1-0", "a", "1"],
        &["XADD", "x1", "2-0", "b", "2"],
        &["XADD", "x1", "3-0", "c", "3"],
        &["XADD", "x2", "5-0", "d", "4"],
        &["XADD", "x2", "6-0", "e", "5"],
        &["XREAD", "STREAMS", "x1", "x2", "0", "0"],
        &["XREAD", "COUNT", "1", "STREAMS", "x1", "x2", "0-0", "5-0"],
        &["XREAD", "COUNT", "2", "STREAMS", "x1", "x2", "1", "0"],
        &["XREAD", "COUNT", "0", "STREAMS", "x1", "0"],
        &["XREAD", "COUNT", "-1", "STREAMS", "x1", "0"],
        &["XREAD", "STREAMS", "x1", "missing", "x2", "0", "0", "0"],
        &["XREAD", "STREAMS", "missing", "0"],
        &["XREAD", "STREAMS", "x1", "x2", "$", "$"],
        &["XREAD", "STREAMS", "x1", "x2", "3-0", "5"],
        &["XREAD", "STREAMS", "x1", "999-0"],
        &["XREAD", "STREAMS", "x1", "x2", "0"],
        &["XREAD", "STREAMS", "x1"],
        &["XREAD", "STREAMS"],
        &["XREAD", "COUNT", "1", "x1", "0"],
        &["XREAD", "STREAMS", "x1", ">"],
        &["XREAD", "STREAMS", "x1", "abc"],
        &["XREAD", "STREAMS", "x1", "+"],
        &["XREAD", "STREAMS", "x1", "(1-0"],
        &["XREAD", "STREAMS", "x1", "-"],
        &["XREAD", "COUNT", "abc", "STREAMS", "x1", "0"],
        &["XREAD", "BLOCK", "-1", "STREAMS", "x1", "0"],
        &["XREAD", "BLOCK", "abc", "STREAMS", "x1", "0"],
        &["XREAD", "NOACK", "STREAMS", "x1", "0"],
        &["XREAD", "BOGUS", "STREAMS", "x1", "0"],
        &["XREAD", "BLOCK", "0", "STREAMS", "x1", "0"],
        &["XREAD", "BLOCK", "10", "STREAMS", "x1", "$"],
        &[
            "XREAD", "BLOCK", "10", "COUNT", "1", "STREAMS", "x1", "x2", "1-0", "$",
        ],
        // WRONGTYPE.
        &["SET", "str", "x"],
        &["XADD", "str", "1-1", "a", "1"],
        &["XADD", "str", "NOMKSTREAM", "1-1", "a", "1"],
        &["XRANGE", "str", "-", "+"],
        &["XREVRANGE", "str", "+", "-"],
        &["XLEN", "str"],
        &["XDEL", "str", "1-1"],
        &["XTRIM", "str", "MAXLEN", "0"],
        &["XSETID", "str", "1-1"],
        &["XREAD", "STREAMS", "str", "0"],
        &["XREAD", "STREAMS", "x1", "str", "0", "0"],
        &["XINFO", "STREAM", "str"],
        &["XINFO", "GROUPS", "str"],
        &["XGROUP", "CREATE", "str", "g", "0"],
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "str", ">"],
        &["XACK", "str", "g", "1-1"],
        &["XPENDING", "str", "g"],
        &["XCLAIM", "str", "g", "c", "0", "1-1"],
        &["XAUTOCLAIM", "str", "g", "c", "0", "0"],
        &["XLEN", "missing"],
        &["TYPE", "x1"],
        &["OBJECT", "ENCODING", "x1"],
    ];
    replay(c, script)
}

/// Consumer groups: XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO.
fn group_session(c: &mut Conn) -> Vec<String> {
    let script: &[&[&str]] = &[
        &["XADD", "g1", "1-0", "a", "1"],
        &["XADD", "g1", "2-0", "b", "2"],
        &["XADD", "g1", "3-0", "c", "3"],
        &["XADD", "g1", "4-0", "d", "4"],
        &["XADD", "g1", "5-0", "e", "5"],
        &["XADD", "g1", "6-0", "f", "6"],
        // XGROUP CREATE.
        &["XGROUP", "CREATE", "g1", "grp", "0"],
        &["XGROUP", "CREATE", "g1", "grp", "0"],
        &["XGROUP", "CREATE", "g1", "late", "$"],
        &["XGROUP", "CREATE", "g1", "mid", "2-0", "ENTRIESREAD", "2"],
        &["XGROUP", "CREATE", "g1", "mid2", "3-0"],
        &["XGROUP", "CREATE", "g1", "ahead", "99-0"],
        &["XGROUP", "CREATE", "g1", "bad", "abc"],
        &["XGROUP", "CREATE", "g1", "bad", "+"],
        &["XGROUP", "CREATE", "g1", "bad", "0", "ENTRIESREAD", "-5"],
        &["XGROUP", "CREATE", "g1", "bad", "0", "ENTRIESREAD", "abc"],
        &["XGROUP", "CREATE", "g1", "bad", "0", "BOGUS"],
        &["XGROUP", "CREATE", "g1", "bad"],
        &["XGROUP", "CREATE", "nokey", "grp", "0"],
        &["XGROUP", "CREATE", "nokey", "grp", "$", "MKSTREAM"],
        &["XINFO", "STREAM", "nokey"],
        &["XINFO", "GROUPS", "nokey"],
        &["XINFO", "STREAM", "nokey", "FULL"],
        &[
            "XGROUP",
            "CREATE",
            "nokey2",
            "grp",
            "5-0",
            "MKSTREAM",
            "ENTRIESREAD",
            "3",
        ],
        &["XINFO", "GROUPS", "nokey2"],
        &["XINFO", "GROUPS", "g1"],
        // CREATECONSUMER and SETID.
        &["XGROUP", "CREATECONSUMER", "g1", "grp", "alice"],
        &["XGROUP", "CREATECONSUMER", "g1", "grp", "alice"],
        &["XGROUP", "CREATECONSUMER", "g1", "nogrp", "alice"],
        &["XGROUP", "CREATECONSUMER", "missing", "grp", "alice"],
        &["XGROUP", "CREATECONSUMER", "g1", "grp"],
        &["XGROUP", "SETID", "g1", "late", "0"],
        &["XGROUP", "SETID", "g1", "mid2", "4-0", "ENTRIESREAD", "4"],
        &["XGROUP", "SETID", "g1", "ahead", "$"],
        &["XGROUP", "SETID", "g1", "nogrp", "0"],
        &["XGROUP", "SETID", "missing", "grp", "0"],
        &["XGROUP", "SETID", "g1", "late", "abc"],
        &["XGROUP", "SETID", "g1", "late", "0", "ENTRIESREAD", "-3"],
        &["XGROUP", "SETID", "g1", "late", "0", "BOGUS", "1"],
        &["XINFO", "GROUPS", "g1"],
        &["XGROUP", "FOO", "g1"],
        &["XGROUP"],
        &["XGROUP", "HELP"],
        &["XINFO", "HELP"],
        &["XGROUP", "HELP", "extra"],
        // XREADGROUP.
        &[
            "XREADGROUP",
            "GROUP",
            "grp",
            "alice",
            "COUNT",
            "2",
            "STREAMS",
            "g1",
            ">",
        ],
        &[
            "XREADGROUP",
            "GROUP",
            "grp",
            "bob",
            "COUNT",
            "2",
            "STREAMS",
            "g1",
            ">",
        ],
        &["XREADGROUP", "GROUP", "grp", "carol", "STREAMS", "g1", ">"],
        &["XREADGROUP", "GROUP", "grp", "bob", "STREAMS", "g1", ">"],
        &["XREADGROUP", "GROUP", "grp", "alice", "STREAMS", "g1", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "grp",
            "alice",
            "COUNT",
            "1",
            "STREAMS",
            "g1",
            "1-0",
        ],
        &[
            "XREADGROUP",
            "GROUP",
            "grp",
            "alice",
            "STREAMS",
            "g1",
            "99-0",
        ],
        &["XREADGROUP", "GROUP", "grp", "dave", "STREAMS", "g1", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "late",
            "erin",
            "NOACK",
            "COUNT",
            "2",
            "STREAMS",
            "g1",
            ">",
        ],
        &["XREADGROUP", "GROUP", "late", "erin", "STREAMS", "g1", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "mid",
            "frank",
            "STREAMS",
            "g1",
            "nokey",
            ">",
            ">",
        ],
        &[
            "XREADGROUP",
            "GROUP",
            "grp",
            "alice",
            "STREAMS",
            "nokey",
            ">",
        ],
        &["XREADGROUP", "GROUP", "nogrp", "x", "STREAMS", "g1", ">"],
        &[
            "XREADGROUP",
            "GROUP",
            "grp",
            "alice",
            "STREAMS",
            "missing",
            ">",
        ],
        &["XREADGROUP", "GROUP", "grp", "alice", "STREAMS", "g1", "$"],
        &[
            "XREADGROUP",
            "GROUP",
            "grp",
            "alice",
            "STREAMS",
            "g1",
            "abc",
        ],
        &["XREADGROUP", "GROUP", "grp", "STREAMS", "g1", ">"],
        &["XREADGROUP", "GROUP", "grp", "alice", "STREAMS", "g1"],
        &["XREADGROUP", "STREAMS", "g1", ">", "x", "y"],
        &[
            "XREADGROUP",
            "GROUP",
            "grp",
            "alice",
            "BLOCK",
            "10",
            "STREAMS",
            "g1",
            ">",
        ],
        &["XINFO", "GROUPS", "g1"],
        &["XINFO", "CONSUMERS", "g1", "grp"],
        &["XINFO", "CONSUMERS", "g1", "late"],
        &["XINFO", "CONSUMERS", "g1", "nogrp"],
        &["XINFO", "CONSUMERS", "missing", "grp"],
        // XPENDING.
        &["XPENDING", "g1", "grp"],
        &["XPENDING", "g1", "late"],
        &["XPENDING", "g1", "ahead"],
        &["XPENDING", "g1", "grp", "-", "+", "10"],
        &["XPENDING", "g1", "grp", "-", "+", "10", "alice"],
        &["XPENDING", "g1", "grp", "-", "+", "10", "nobody"],
        &["XPENDING", "g1", "grp", "(1-0", "+", "10"],
        &["XPENDING", "g1", "grp", "-", "(5-0", "2"],
        &["XPENDING", "g1", "grp", "(2-0", "(5-0", "10", "bob"],
        &["XPENDING", "g1", "grp", "IDLE", "0", "-", "+", "10"],
        &["XPENDING", "g1", "grp", "IDLE", "100000000", "-", "+", "10"],
        &["XPENDING", "g1", "grp", "IDLE", "-1", "-", "+", "10"],
        &["XPENDING", "g1", "grp", "IDLE", "abc", "-", "+", "10"],
        &["XPENDING", "g1", "grp", "-", "+", "0"],
        &["XPENDING", "g1", "grp", "-", "+", "-1"],
        &["XPENDING", "g1", "grp", "-", "+", "abc"],
        &["XPENDING", "g1", "grp", "-", "+"],
        &["XPENDING", "g1", "grp", "abc", "+", "10"],
        &[
            "XPENDING",
            "g1",
            "grp",
            "(18446744073709551615-18446744073709551615",
            "+",
            "10",
        ],
        &["XPENDING", "g1", "grp", "-", "+", "10", "alice", "extra"],
        &["XPENDING", "g1", "nogrp"],
        &["XPENDING", "missing", "grp"],
        &["XPENDING", "missing", "grp", "-", "+", "10"],
        // XACK.
        &["XACK", "g1", "grp", "1-0", "99-0"],
        &["XACK", "g1", "grp", "1-0"],
        &["XACK", "g1", "grp", "abc"],
        &["XACK", "g1", "grp", "6-0", "abc"],
        &["XACK", "g1", "nogrp", "1-0"],
        &["XACK", "missing", "grp", "1-0"],
        &["XPENDING", "g1", "grp"],
        // XCLAIM (min-idle 0).
        &["XCLAIM", "g1", "grp", "bob", "0", "2-0", "JUSTID"],
        &["XCLAIM", "g1", "grp", "bob", "0", "2-0", "3-0"],
        &["XCLAIM", "g1", "grp", "bob", "0", "1-0", "99-0"],
        &[
            "XCLAIM", "g1", "grp", "carol", "0", "99-0", "FORCE", "JUSTID",
        ],
        &[
            "XCLAIM", "g1", "grp", "carol", "0", "1-0", "FORCE", "JUSTID",
        ],
        &[
            "XCLAIM",
            "g1",
            "grp",
            "carol",
            "0",
            "4-0",
            "FORCE",
            "RETRYCOUNT",
            "5",
        ],
        &[
            "XCLAIM", "g1", "grp", "dave", "0", "5-0", "LASTID", "10-0", "JUSTID",
        ],
        &[
            "XCLAIM", "g1", "grp", "dave", "0", "5-0", "IDLE", "0", "JUSTID",
        ],
        &[
            "XCLAIM", "g1", "grp", "dave", "0", "5-0", "TIME", "0", "JUSTID",
        ],
        &["XCLAIM", "g1", "grp", "bob", "100000000", "2-0", "JUSTID"],
        &["XINFO", "GROUPS", "g1"],
        &["XPENDING", "g1", "grp"],
        &["XPENDING", "g1", "grp", "-", "+", "10"],
        &["XCLAIM", "g1", "grp", "bob", "0", "abc"],
        &["XCLAIM", "g1", "grp", "bob", "abc", "1-0"],
        &["XCLAIM", "g1", "grp", "bob", "-1", "1-0"],
        &["XCLAIM", "g1", "grp", "bob", "0", "1-0", "IDLE", "abc"],
        &["XCLAIM", "g1", "grp", "bob", "0", "1-0", "TIME", "abc"],
        &["XCLAIM", "g1", "grp", "bob", "0", "1-0", "RETRYCOUNT", "-1"],
        &[
            "XCLAIM",
            "g1",
            "grp",
            "bob",
            "0",
            "1-0",
            "RETRYCOUNT",
            "abc",
        ],
        &["XCLAIM", "g1", "grp", "bob", "0", "1-0", "LASTID", "abc"],
        &["XCLAIM", "g1", "grp", "bob", "0", "1-0", "BOGUS"],
        &["XCLAIM", "g1", "grp", "bob", "0", "1-0", "IDLE"],
        &["XCLAIM", "g1", "nogrp", "bob", "0", "1-0"],
        &["XCLAIM", "missing", "grp", "bob", "0", "1-0"],
        &["XCLAIM", "g1", "grp", "bob", "0"],
        // A pending entry deleted from the stream.
        &["XDEL", "g1", "3-0"],
        &["XCLAIM", "g1", "grp", "alice", "0", "3-0"],
        &["XPENDING", "g1", "grp", "-", "+", "10"],
        &["XDEL", "g1", "2-0"],
        &["XINFO", "GROUPS", "g1"],
        // XAUTOCLAIM.
        &["XAUTOCLAIM", "g1", "grp", "erin", "0", "0", "COUNT", "1"],
        &["XAUTOCLAIM", "g1", "grp", "erin", "0", "0", "COUNT", "10"],
        &["XAUTOCLAIM", "g1", "grp", "erin", "0", "(4-0", "JUSTID"],
        &["XAUTOCLAIM", "g1", "grp", "erin", "0", "-", "JUSTID"],
        &[
            "XAUTOCLAIM",
            "g1",
            "grp",
            "frank",
            "0",
            "5-0",
            "COUNT",
            "1",
            "JUSTID",
        ],
        &["XAUTOCLAIM", "g1", "grp", "frank", "100000000", "0"],
        &["XAUTOCLAIM", "g1", "grp", "erin", "0", "0", "COUNT", "0"],
        &["XAUTOCLAIM", "g1", "grp", "erin", "0", "0", "COUNT", "-1"],
        &["XAUTOCLAIM", "g1", "grp", "erin", "0", "0", "COUNT", "abc"],
        &[
            "XAUTOCLAIM",
            "g1",
            "grp",
            "erin",
            "0",
            "0",
            "COUNT",
            "100000000",
        ],
        &["XAUTOCLAIM", "g1", "grp", "erin", "0", "0", "BOGUS"],
        &["XAUTOCLAIM", "g1", "grp", "erin", "0", "abc"],
        &["XAUTOCLAIM", "g1", "grp", "erin", "abc", "0"],
        &["XAUTOCLAIM", "g1", "grp", "erin", "-1", "0"],
        &["XAUTOCLAIM", "g1", "nogrp", "erin", "0", "0"],
        &["XAUTOCLAIM", "missing", "grp", "erin", "0", "0"],
        // What the groups look like now.
        &["XINFO", "GROUPS", "g1"],
        &["XINFO", "CONSUMERS", "g1", "grp"],
        &["XINFO", "STREAM", "g1"],
        &["XINFO", "STREAM", "g1", "FULL"],
        &["XINFO", "STREAM", "g1", "FULL", "COUNT", "1"],
        &["XINFO", "STREAM", "g1", "FULL", "COUNT", "0"],
        &["XINFO", "STREAM", "g1", "FULL", "COUNT", "abc"],
        &["XINFO", "STREAM", "g1", "FULL", "BOGUS"],
        &["XINFO", "STREAM", "g1", "BOGUS"],
        &["XINFO", "STREAM", "missing"],
        &["XINFO", "GROUPS", "missing"],
        &["XINFO", "FOO", "g1"],
        &["XINFO", "STREAM"],
        // DELCONSUMER and DESTROY.
        &["XGROUP", "DELCONSUMER", "g1", "grp", "bob"],
        &["XGROUP", "DELCONSUMER", "g1", "grp", "nobody"],
        &["XGROUP", "DELCONSUMER", "g1", "nogrp", "bob"],
        &["XGROUP", "DELCONSUMER", "missing", "grp", "bob"],
        &["XPENDING", "g1", "grp"],
        &["XGROUP", "DESTROY", "g1", "mid"],
        &["XGROUP", "DESTROY", "g1", "mid"],
        &["XGROUP", "DESTROY", "missing", "mid"],
        &["XGROUP", "DESTROY", "g1"],
        &["XINFO", "GROUPS", "g1"],
        // Lag once entries are added, deleted and trimmed under a group.
        &["XADD", "g1", "7-0", "g", "7"],
        &["XINFO", "GROUPS", "g1"],
        &[
            "XREADGROUP",
            "GROUP",
            "late",
            "erin",
            "COUNT",
            "1",
            "STREAMS",
            "g1",
            ">",
        ],
        &["XINFO", "GROUPS", "g1"],
        &["XTRIM", "g1", "MAXLEN", "2"],
        &["XINFO", "GROUPS", "g1"],
        &["XINFO", "STREAM", "g1", "FULL"],
        &["XADD", "g1", "8-0", "h", "8"],
        &["XREADGROUP", "GROUP", "grp", "alice", "STREAMS", "g1", ">"],
        &["XINFO", "GROUPS", "g1"],
        &[
            "XSETID",
            "g1",
            "9-0",
            "ENTRIESADDED",
            "50",
            "MAXDELETEDID",
            "8-5",
        ],
        &["XINFO", "GROUPS", "g1"],
        // The group goes with its stream.
        &["DEL", "g1"],
        &["XREADGROUP", "GROUP", "grp", "alice", "STREAMS", "g1", ">"],
        &["XADD", "g1", "1-0", "a", "1"],
        &["XINFO", "GROUPS", "g1"],
    ];
    replay(c, script)
}

/// The RESP3 forms: maps for XREAD, XREADGROUP and XINFO, nulls.
fn resp3_session(c: &mut Conn) -> Vec<String> {
    let hello = c.call(&["HELLO", "3"]);
    let mut out = vec![format!("{:?}", hello.clone().field_mut("proto").cloned())];
    let script: &[&[&str]] = &[
        &["XADD", "s", "1-0", "a", "1"],
        &["XADD", "s", "2-0", "b", "2", "c", "3"],
        &["XADD", "t", "3-0", "d", "4"],
        &["XRANGE", "s", "-", "+"],
        &["XRANGE", "s", "-", "+", "COUNT", "0"],
        &["XREVRANGE", "s", "+", "-", "COUNT", "1"],
        &["XREAD", "STREAMS", "s", "t", "0", "0"],
        &[
            "XREAD", "COUNT", "1", "STREAMS", "s", "missing", "t", "0", "0", "0",
        ],
        &["XREAD", "STREAMS", "s", "$"],
        &["XREAD", "STREAMS", "missing", "0"],
        &["XREAD", "BLOCK", "10", "STREAMS", "s", "$"],
        &["XADD", "nokey", "NOMKSTREAM", "1-0", "a", "1"],
        &["XGROUP", "CREATE", "s", "grp", "0"],
        &["XGROUP", "CREATE", "t", "grp", "0", "ENTRIESREAD", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "grp",
            "alice",
            "COUNT",
            "1",
            "STREAMS",
            "s",
            "t",
            ">",
            ">",
        ],
        &[
            "XREADGROUP",
            "GROUP",
            "grp",
            "bob",
            "STREAMS",
            "s",
            "t",
            ">",
            ">",
        ],
        &["XREADGROUP", "GROUP", "grp", "bob", "STREAMS", "s", ">"],
        &[
            "XREADGROUP",
            "GROUP",
            "grp",
            "alice",
            "STREAMS",
            "s",
            "t",
            "0",
            "0",
        ],
        &["XPENDING", "s", "grp"],
        &["XPENDING", "s", "nogrp"],
        &["XPENDING", "s", "grp", "-", "+", "10"],
        &["XDEL", "s", "2-0"],
        &["XAUTOCLAIM", "s", "grp", "carol", "0", "0"],
        &["XCLAIM", "s", "grp", "carol", "0", "1-0", "JUSTID"],
        &["XINFO", "STREAM", "s"],
        &["XINFO", "STREAM", "t"],
        &["XINFO", "STREAM", "s", "FULL"],
        &["XINFO", "GROUPS", "s"],
        &["XINFO", "CONSUMERS", "s", "grp"],
        &["XINFO", "STREAM", "missing"],
        &["XGROUP", "CREATE", "s", "grp", "0"],
        &["XDEL", "s", "1-0"],
        &["XINFO", "STREAM", "s"],
    ];
    out.extend(replay(c, script));
    out
}

/// Sends a command without waiting for its reply (a client that blocks).
fn send(c: &mut Conn, args: &[&str]) {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send(&bytes);
}

/// The reply to a command sent with [`send`], as [`run`] shows it.
fn reply(c: &mut Conn, args: &[&str]) -> String {
    let (r, _) = c.read();
    let mut out = Vec::new();
    r.wire(&mut out);
    format!("{args:?} -> {}", out.escape_ascii())
}

/// `radix-tree-keys` of a stream: Redis's node count, where its nodes end.
fn nodes(c: &mut Conn, key: &str) -> String {
    let mut r = c.call(&["XINFO", "STREAM", key]);
    let mut n = Vec::new();
    if let Some(v) = r.field_mut("radix-tree-keys") {
        v.wire(&mut n);
    }
    format!("{key} nodes {}", n.escape_ascii())
}

/// Where nodes end (by entries, by bytes, with deleted entries), the default LIMIT of `~`,
/// ids as Redis's `string2ull` reads them, lag with tombstones, deleted entries in a
/// consumer's history, and XAUTOCLAIM's scan limit.
fn edge_session(c: &mut Conn) -> Vec<String> {
    let mut out = Vec::new();
    // Deleted entries still count toward a node's size, and MINID ~ looks at a node's last
    // entry, deleted or not.
    out.extend(replay(
        c,
        &[
            &["CONFIG", "SET", "stream-node-max-entries", "3"],
            &["XADD", "n", "1-0", "a", "1"],
            &["XADD", "n", "2-0", "a", "2"],
            &["XDEL", "n", "2-0"],
            &["XADD", "n", "3-0", "a", "3"],
            &["XADD", "n", "4-0", "a", "4"],
            &["XADD", "n", "5-0", "a", "5"],
            &["XADD", "n", "6-0", "a", "6"],
            &["XDEL", "n", "6-0"],
            &["XADD", "n", "7-0", "a", "7"],
            &["XADD", "n", "8-0", "a", "8"],
            &["XINFO", "STREAM", "n"],
            &["XTRIM", "n", "MINID", "~", "3-0"],
            &["XTRIM", "n", "MINID", "~", "4-0"],
            &["XTRIM", "n", "MAXLEN", "~", "2"],
            &["XINFO", "STREAM", "n"],
            &["XTRIM", "n", "MAXLEN", "3"],
            &["XADD", "n", "9-0", "a", "9"],
            &["XINFO", "STREAM", "n"],
            &["XTRIM", "n", "MAXLEN", "~", "1"],
            &["XRANGE", "n", "-", "+"],
            &["XTRIM", "n", "MINID", "~", "9-0"],
            &["XTRIM", "n", "MINID", "~", "10-0"],
            &["XINFO", "STREAM", "n"],
        ],
    ));
    // The default LIMIT of `~` is 100 nodes' worth of entries.
    for i in 1..=400 {
        let id = format!("{i}-0");
        c.call(&["XADD", "big", &id, "f", "v"]);
    }
    out.push(nodes(c, "big"));
    out.extend(replay(
        c,
        &[
            &["XTRIM", "big", "MAXLEN", "~", "0"],
            &["XLEN", "big"],
            &["XADD", "big", "MAXLEN", "~", "0", "401-0", "f", "v"],
            &["XLEN", "big"],
            &["XTRIM", "big", "MAXLEN", "~", "0", "LIMIT", "0"],
            &["XLEN", "big"],
            &["CONFIG", "SET", "stream-node-max-entries", "0"],
            &["XADD", "big2", "1-0", "f", "v"],
        ],
    ));
    for i in 2..=150 {
        let id = format!("{i}-0");
        c.call(&["XADD", "big2", &id, "f", "v"]);
    }
    out.push(nodes(c, "big2"));
    out.extend(replay(
        c,
        &[&["XTRIM", "big2", "MAXLEN", "~", "0"], &["XLEN", "big2"]],
    ));
    // The default node limits (100 entries, 4096 bytes); where nodes end by bytes is
    // checked apart (`node_bytes_match_redis`).
    out.extend(replay(
        c,
        &[&[
            "CONFIG",
            "SET",
            "stream-node-max-entries",
            "100",
            "stream-node-max-bytes",
            "4096",
        ]],
    ));
    for i in 1..=120usize {
        let id = format!("{i}-{i}");
        let v = "v".repeat(i % 50);
        c.call(&["XADD", "dflt", &id, "field", &v, "k", "12345"]);
    }
    out.push(nodes(c, "dflt"));
    out.extend(replay(
        c,
        &[&["XTRIM", "dflt", "MAXLEN", "~", "60"], &["XLEN", "dflt"]],
    ));
    // Ids as string2ull reads them.
    out.extend(replay(
        c,
        &[
            &["XADD", "ids", "+1-1", "a", "1"],
            &["XADD", "ids", "1-+2", "a", "1"],
            &["XADD", "ids", " 2-1", "a", "1"],
            &["XADD", "ids", "3- 1", "a", "1"],
            &["XADD", "ids", "04-01", "a", "1"],
            &["XADD", "ids", "5-1 ", "a", "1"],
            &["XADD", "ids", "-0-1", "a", "1"],
            &["XADD", "ids", "6--1", "a", "1"],
            &["XADD", "ids", "6-", "a", "1"],
            &["XADD", "ids", "-6", "a", "1"],
            &["XADD", "ids", "6-0x1", "a", "1"],
            &["XADD", "ids", "6-1.5", "a", "1"],
            &["XADD", "ids", "7-1-1", "a", "1"],
            &["XADD", "ids", "18446744073709551616-1", "a", "1"],
            &["XADD", "ids", "*", "a", "1", "b"],
            &["XADD", "ids", "**", "a", "1"],
            &["XADD", "ids", "8-**", "a", "1"],
            &["XADD", "ids", "", "a", "1"],
            &["XADD", "ids", "9-0", "", ""],
            &["XADD", "ids", "10-0", "dup", "1", "dup", "2"],
            &["XRANGE", "ids", "-", "+"],
            &["XRANGE", "ids", "-18446744073709551615", "+"],
            &["XRANGE", "ids", "(-0", "(+3"],
            &["XRANGE", "ids", "- ", "+"],
            &["XRANGE", "ids", "-", "+", "COUNT", "9223372036854775807"],
            &["XRANGE", "ids", "-", "+", "COUNT", "9223372036854775808"],
            &["XRANGE", "ids", "-", "+", "COUNT", "1", "COUNT", "2"],
            &["XTRIM", "ids", "MAXLEN", "9223372036854775807"],
            &["XTRIM", "ids", "MAXLEN", "9223372036854775808"],
            &[
                "XTRIM",
                "ids",
                "MAXLEN",
                "~",
                "1",
                "LIMIT",
                "9223372036854775807",
            ],
            &["XTRIM", "ids", "MAXLEN", "=", "~", "1"],
            &["XTRIM", "ids", "MAXLEN", "1", "MAXLEN", "2"],
            &["XTRIM", "ids", "maxlen", "~", "100", "limit", "5"],
            &["XDEL", "ids", "2-1", "2-1", "3-1"],
            &["XACK", "ids", "g", "1-1", "1-1"],
            &["XLEN", "ids"],
        ],
    ));
    // Lag and entries-read with tombstones before and after a group.
    out.extend(replay(
        c,
        &[
            &["XADD", "lag", "1-0", "a", "1"],
            &["XADD", "lag", "2-0", "a", "2"],
            &["XADD", "lag", "3-0", "a", "3"],
            &["XADD", "lag", "4-0", "a", "4"],
            &["XADD", "lag", "5-0", "a", "5"],
            &["XGROUP", "CREATE", "lag", "g1", "2-0", "ENTRIESREAD", "2"],
            &["XGROUP", "CREATE", "lag", "g2", "2-0"],
            &["XGROUP", "CREATE", "lag", "g3", "0"],
            &["XGROUP", "CREATE", "lag", "g4", "$"],
            &["XGROUP", "CREATE", "lag", "g5", "3-0", "ENTRIESREAD", "3"],
            &["XGROUP", "CREATE", "lag", "g6", "0", "ENTRIESREAD", "100"],
            &["XINFO", "GROUPS", "lag"],
            &["XDEL", "lag", "1-0"],
            &["XINFO", "GROUPS", "lag"],
            &["XDEL", "lag", "4-0"],
            &["XINFO", "GROUPS", "lag"],
            &[
                "XREADGROUP",
                "GROUP",
                "g1",
                "c",
                "COUNT",
                "1",
                "STREAMS",
                "lag",
                ">",
            ],
            &["XREADGROUP", "GROUP", "g2", "c", "STREAMS", "lag", ">"],
            &[
                "XREADGROUP",
                "GROUP",
                "g3",
                "c",
                "COUNT",
                "1",
                "STREAMS",
                "lag",
                ">",
            ],
            &["XINFO", "GROUPS", "lag"],
            &["XADD", "lag", "6-0", "a", "6"],
            &["XINFO", "GROUPS", "lag"],
            &["XREADGROUP", "GROUP", "g1", "c", "STREAMS", "lag", ">"],
            &["XREADGROUP", "GROUP", "g3", "c", "STREAMS", "lag", ">"],
            &["XINFO", "GROUPS", "lag"],
            &["XTRIM", "lag", "MAXLEN", "1"],
            &["XINFO", "GROUPS", "lag"],
            &["XGROUP", "SETID", "lag", "g4", "0"],
            &["XGROUP", "SETID", "lag", "g5", "3-0", "ENTRIESREAD", "1"],
            &["XINFO", "GROUPS", "lag"],
            &["XINFO", "STREAM", "lag", "FULL"],
        ],
    ));
    // A consumer's history shows entries deleted since as nil; XAUTOCLAIM scans at most ten
    // times COUNT pending entries, and reports those it dropped.
    out.extend(replay(
        c,
        &[
            &["XADD", "h", "1-0", "a", "1"],
            &["XADD", "h", "2-0", "a", "2"],
            &["XADD", "h", "3-0", "a", "3"],
            &["XGROUP", "CREATE", "h", "g", "0"],
            &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "h", ">"],
            &["XDEL", "h", "2-0"],
            &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "h", "0"],
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "alice",
                "COUNT",
                "1",
                "STREAMS",
                "h",
                "1-0",
            ],
            &["XCLAIM", "h", "g", "bob", "0", "2-0", "JUSTID"],
            &[
                "XCLAIM", "h", "g", "bob", "0", "3-0", "JUSTID", "LASTID", "1-0",
            ],
            &["XPENDING", "h", "g"],
            &["XGROUP", "DELCONSUMER", "h", "g", "alice"],
            &["XGROUP", "DELCONSUMER", "h", "g", "bob"],
            &["XPENDING", "h", "g"],
            &["XINFO", "GROUPS", "h"],
        ],
    ));
    for i in 1..=30 {
        let id = format!("{i}-0");
        c.call(&["XADD", "ac", &id, "a", "1"]);
    }
    out.extend(replay(
        c,
        &[
            &["XGROUP", "CREATE", "ac", "g", "0"],
            &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "ac", ">"],
        ],
    ));
    for i in 2..=25 {
        let id = format!("{i}-0");
        c.call(&["XDEL", "ac", &id]);
    }
    out.extend(replay(
        c,
        &[
            &["XAUTOCLAIM", "ac", "g", "bob", "0", "0", "COUNT", "1"],
            &["XAUTOCLAIM", "ac", "g", "bob", "0", "0", "COUNT", "1"],
            &[
                "XAUTOCLAIM",
                "ac",
                "g",
                "bob",
                "0",
                "0",
                "COUNT",
                "2",
                "JUSTID",
            ],
            &["XAUTOCLAIM", "ac", "g", "bob", "0", "15-0", "COUNT", "1"],
            &["XAUTOCLAIM", "ac", "g", "bob", "0", "0", "COUNT", "3"],
            &["XPENDING", "ac", "g"],
            &[
                "XCLAIM", "ac", "g", "carol", "0", "26-0", "TIME", "0", "JUSTID",
            ],
            &["XPENDING", "ac", "g", "IDLE", "100000000", "-", "+", "10"],
            &["XAUTOCLAIM", "ac", "g", "dave", "100000000", "0", "JUSTID"],
            &["XPENDING", "ac", "g", "-", "+", "10", "dave"],
            &[
                "XCLAIM",
                "ac",
                "g",
                "erin",
                "0",
                "27-0",
                "RETRYCOUNT",
                "7",
                "JUSTID",
            ],
            &[
                "XCLAIM",
                "ac",
                "g",
                "erin",
                "0",
                "28-0",
                "JUSTID",
                "RETRYCOUNT",
                "9",
            ],
            &["XPENDING", "ac", "g", "-", "+", "10", "erin"],
            &["XAUTOCLAIM", "ac", "g", "frank", "0", "0"],
            &["XPENDING", "ac", "g", "-", "+", "10"],
            &["XINFO", "STREAM", "ac", "FULL", "COUNT", "2"],
        ],
    ));
    out
}

/// Where nodes end by bytes (`stream-node-max-bytes`): Redis starts a node once the last
/// one's listpack size plus the new entry's field and value lengths reaches the limit.
fn node_bytes_session(c: &mut Conn) -> Vec<String> {
    let mut out = Vec::new();
    // Nodes end by bytes: values of growing sizes, the same fields or new ones.
    out.extend(replay(
        c,
        &[&[
            "CONFIG",
            "SET",
            "stream-node-max-entries",
            "100",
            "stream-node-max-bytes",
            "300",
        ]],
    ));
    for i in 1..=40usize {
        let id = format!("{i}-0");
        let v = "x".repeat(i * 3);
        let field = if i % 7 == 0 {
            format!("other{i}")
        } else {
            "f".to_string()
        };
        let num = (i * 1000).to_string();
        c.call(&["XADD", "bytes", &id, &field, &v, "n", &num]);
        out.push(nodes(c, "bytes"));
    }
    out.extend(replay(
        c,
        &[
            &["XTRIM", "bytes", "MAXLEN", "~", "30"],
            &["XTRIM", "bytes", "MAXLEN", "~", "0", "LIMIT", "10"],
            &["XLEN", "bytes"],
            &["XADD", "bytes", "41-0", "f", &"y".repeat(400)],
            &["XADD", "bytes", "42-0", "f", "y"],
            &["XINFO", "STREAM", "bytes"],
        ],
    ));
    // The defaults (100 entries, 4096 bytes), with values of 100 bytes.
    out.extend(replay(
        c,
        &[&[
            "CONFIG",
            "SET",
            "stream-node-max-entries",
            "100",
            "stream-node-max-bytes",
            "4096",
        ]],
    ));
    for i in 1..=100usize {
        let id = format!("{i}-0");
        c.call(&["XADD", "dflt", &id, "payload", &"p".repeat(100), "n", "7"]);
    }
    out.push(nodes(c, "dflt"));
    out.extend(replay(
        c,
        &[&["XTRIM", "dflt", "MAXLEN", "~", "50"], &["XLEN", "dflt"]],
    ));
    out
}

/// Readers that block, served by another client's XADD, or told their stream or group went.
fn blocking_session(port: u16) -> Vec<String> {
    let mut a = Conn::open(port);
    let mut b = Conn::open(port);
    let mut out = Vec::new();
    // Sends `blocked` on `a`, lets it park, runs `writes` on `b`, then reads `a`'s reply.
    fn step(a: &mut Conn, b: &mut Conn, blocked: &[&str], writes: &[&[&str]]) -> Vec<String> {
        send(a, blocked);
        std::thread::sleep(Duration::from_millis(100));
        let mut out: Vec<String> = writes.iter().map(|w| run(b, w)).collect();
        out.push(reply(a, blocked));
        out
    }
    out.extend(step(
        &mut a,
        &mut b,
        &["XREAD", "BLOCK", "0", "STREAMS", "b1", "$"],
        &[&["XADD", "b1", "1-0", "a", "1"]],
    ));
    out.extend(step(
        &mut a,
        &mut b,
        &["XREAD", "BLOCK", "0", "STREAMS", "b1", "100-0"],
        &[
            &["XADD", "b1", "50-0", "a", "2"],
            &["XADD", "b1", "150-0", "a", "3"],
        ],
    ));
    out.extend(step(
        &mut a,
        &mut b,
        &[
            "XREAD", "BLOCK", "0", "COUNT", "1", "STREAMS", "b2", "b1", "0", "$",
        ],
        &[&["XADD", "b2", "1-0", "a", "4"]],
    ));
    out.push(run(&mut b, &["XGROUP", "CREATE", "b1", "g", "$"]));
    out.extend(step(
        &mut a,
        &mut b,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            "b1",
            ">",
        ],
        &[&["XADD", "b1", "200-0", "a", "5"]],
    ));
    out.extend(step(
        &mut a,
        &mut b,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "1000",
            "STREAMS",
            "b1",
            ">",
        ],
        &[&["XGROUP", "DESTROY", "b1", "g"]],
    ));
    out.push(run(&mut b, &["XGROUP", "CREATE", "b1", "g", "$"]));
    out.extend(step(
        &mut a,
        &mut b,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "1000",
            "STREAMS",
            "b1",
            ">",
        ],
        &[&["DEL", "b1"]],
    ));
    out.extend(step(
        &mut a,
        &mut b,
        &["XREAD", "BLOCK", "300", "STREAMS", "b3", "$"],
        &[&["SET", "b3", "x"]],
    ));
    out.extend(step(
        &mut a,
        &mut b,
        &["XREAD", "BLOCK", "300", "STREAMS", "b4", "$"],
        &[&["XADD", "b4", "NOMKSTREAM", "1-0", "a", "1"]],
    ));
    // Entries added in one transaction reach a blocked reader together, after EXEC.
    out.push(run(
        &mut b,
        &["XGROUP", "CREATE", "b5", "g", "$", "MKSTREAM"],
    ));
    out.extend(step(
        &mut a,
        &mut b,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            "b5",
            ">",
        ],
        &[
            &["MULTI"],
            &["XADD", "b5", "1-0", "a", "1"],
            &["XADD", "b5", "2-0", "a", "2"],
            &["EXEC"],
        ],
    ));
    out.extend(replay(
        &mut b,
        &[&["XPENDING", "b5", "g"], &["XINFO", "GROUPS", "b5"]],
    ));
    out.extend(step(
        &mut a,
        &mut b,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "d",
            "NOACK",
            "COUNT",
            "1",
            "BLOCK",
            "0",
            "STREAMS",
            "b5",
            ">",
        ],
        &[
            &["XADD", "b5", "3-0", "a", "3"],
            &["XADD", "b5", "4-0", "a", "4"],
        ],
    ));
    out.extend(replay(
        &mut b,
        &[&["XPENDING", "b5", "g"], &["XINFO", "GROUPS", "b5"]],
    ));
    // Two readers of one stream are both served, in the order they came.
    let mut a2 = Conn::open(port);
    let first = ["XREAD", "BLOCK", "0", "STREAMS", "b6", "$"];
    let second = ["XREAD", "BLOCK", "0", "COUNT", "1", "STREAMS", "b6", "0"];
    send(&mut a, &first);
    send(&mut a2, &second);
    std::thread::sleep(Duration::from_millis(100));
    out.push(run(&mut b, &["XADD", "b6", "1-0", "a", "1"]));
    out.push(reply(&mut a, &first));
    out.push(reply(&mut a2, &second));
    // CLIENT UNBLOCK, with and without an error.
    for how in ["TIMEOUT", "ERROR"] {
        let id = match a.call(&["CLIENT", "ID"]) {
            R::Line(b':', id) => String::from_utf8(id).unwrap(),
            r => panic!("CLIENT ID: {r:?}"),
        };
        let blocked = ["XREAD", "BLOCK", "0", "STREAMS", "b7", "$"];
        send(&mut a, &blocked);
        std::thread::sleep(Duration::from_millis(100));
        b.call(&["CLIENT", "UNBLOCK", &id, how]);
        out.push(reply(&mut a, &blocked));
    }
    out
}

/// Keyspace events of the stream commands, in order, as a subscriber receives them.
fn events_session(port: u16) -> Vec<String> {
    let mut a = Conn::open(port);
    let mut b = Conn::open(port);
    let mut out = vec![run(
        &mut a,
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
    )];
    out.push(run(&mut b, &["PSUBSCRIBE", "__keyevent@0__:*"]));
    out.extend(replay(
        &mut a,
        &[
            &["XADD", "ne", "1-0", "a", "1"],
            &["XADD", "ne", "MAXLEN", "1", "2-0", "a", "2"],
            &["XADD", "ne", "MAXLEN", "5", "3-0", "a", "3"],
            &["XADD", "nosuch", "NOMKSTREAM", "1-0", "a", "1"],
            &["XDEL", "ne", "2-0"],
            &["XDEL", "ne", "99-0"],
            &["XTRIM", "ne", "MAXLEN", "5"],
            &["XADD", "ne", "4-0", "a", "4"],
            &["XTRIM", "ne", "MAXLEN", "0"],
            &["XSETID", "ne", "10-0"],
            &["XGROUP", "CREATE", "ne", "g", "0"],
            &["XGROUP", "CREATE", "ne2", "g", "$", "MKSTREAM"],
            &["XGROUP", "CREATECONSUMER", "ne", "g", "c"],
            &["XGROUP", "CREATECONSUMER", "ne", "g", "c"],
            &["XADD", "ne", "11-0", "a", "5"],
            &["XREADGROUP", "GROUP", "g", "c2", "STREAMS", "ne", ">"],
            &["XREADGROUP", "GROUP", "g", "c2", "STREAMS", "ne", ">"],
            &["XREADGROUP", "GROUP", "g", "c3", "STREAMS", "ne", "0"],
            &["XCLAIM", "ne", "g", "c4", "0", "11-0", "JUSTID"],
            &["XAUTOCLAIM", "ne", "g", "c5", "0", "0", "JUSTID"],
            &["XACK", "ne", "g", "11-0"],
            &["XGROUP", "SETID", "ne", "g", "0"],
            &["XGROUP", "DELCONSUMER", "ne", "g", "c"],
            &["XGROUP", "DELCONSUMER", "ne", "g", "nobody"],
            &["XGROUP", "DESTROY", "ne", "g"],
            &["XGROUP", "DESTROY", "ne", "g"],
            &["DEL", "ne", "ne2"],
            &["PUBLISH", "__keyevent@0__:zzend", "end"],
        ],
    ));
    loop {
        let (r, raw) = b.read();
        out.push(format!("event {}", raw.escape_ascii()));
        if raw.windows(5).any(|w| w == b"zzend") || !matches!(r, R::Agg(..)) {
            break;
        }
    }
    out
}

/// Streams moved about by other commands: MULTI, scripts, COPY, RENAME, expiry, DUMP.
fn other_commands_session(c: &mut Conn) -> Vec<String> {
    replay(
        c,
        &[
            &["CONFIG", "SET", "stream-node-max-entries", "3"],
            &["XADD", "m", "1-0", "a", "1"],
            &["MULTI"],
            &["XADD", "m", "2-0", "b", "2"],
            &["XREAD", "BLOCK", "0", "STREAMS", "m", "$"],
            &["XREAD", "BLOCK", "0", "STREAMS", "missing", "$"],
            &["XREAD", "STREAMS", "m", "1-0"],
            &["XLEN", "m"],
            &["EXEC"],
            &["MULTI"],
            &["XADD", "m", "1-0", "c", "3"],
            &["XLEN", "m"],
            &["EXEC"],
            &["XGROUP", "CREATE", "m", "g", "0"],
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "alice",
                "COUNT",
                "1",
                "STREAMS",
                "m",
                ">",
            ],
            &[
                "EVAL",
                "return redis.call('XRANGE', KEYS[1], '-', '+')",
                "1",
                "m",
            ],
            &[
                "EVAL",
                "return redis.call('XREAD', 'STREAMS', KEYS[1], '0')",
                "1",
                "m",
            ],
            &[
                "EVAL",
                "return redis.call('XREAD', 'STREAMS', KEYS[1], '$')",
                "1",
                "m",
            ],
            &[
                "EVAL",
                "return redis.call('XINFO', 'GROUPS', KEYS[1])",
                "1",
                "m",
            ],
            &[
                "EVAL",
                "redis.setresp(3); return redis.call('XREAD', 'STREAMS', KEYS[1], '0')",
                "1",
                "m",
            ],
            &[
                "EVAL",
                "redis.setresp(3); return redis.call('XINFO', 'GROUPS', KEYS[1])",
                "1",
                "m",
            ],
            &[
                "EVAL",
                "return redis.call('XADD', KEYS[1], '3-0', 'c', 3)",
                "1",
                "m",
            ],
            &[
                "EVAL",
                "return redis.pcall('XADD', KEYS[1], '3-0', 'c', 3)",
                "1",
                "m",
            ],
            &[
                "EVAL",
                "return redis.call('XADD', KEYS[1], '0-0', 'c', 3)",
                "1",
                "m",
            ],
            &["XPENDING", "m", "g"],
            &["COPY", "m", "mcopy"],
            &["XINFO", "GROUPS", "mcopy"],
            &["XPENDING", "mcopy", "g"],
            &["XINFO", "STREAM", "mcopy"],
            &["XACK", "mcopy", "g", "1-0"],
            &["XPENDING", "m", "g"],
            &["RENAME", "mcopy", "mren"],
            &["XINFO", "GROUPS", "mren"],
            &["XRANGE", "mren", "-", "+"],
            &["EXPIRE", "m", "100"],
            &["XADD", "m", "4-0", "d", "4"],
            &["TTL", "m"],
            &["XTRIM", "m", "MAXLEN", "0"],
            &["TTL", "m"],
            &["EXISTS", "m"],
            &["TYPE", "m"],
            &["XADD", "dump", "1-0", "a", "1", "b", "2"],
            &["XADD", "dump", "2-0", "a", "3", "b", "4"],
            &["XADD", "dump", "3-5", "c", "word", "b", "-17"],
            &["XADD", "dump", "5-0", "a", "1", "b", "2"],
            &["XADD", "dump", "6-0", "a", "1"],
            &["XDEL", "dump", "2-0", "5-0"],
            // (DUMP of a stream with deleted entries left out: Redis keeps them in its nodes,
            // and compresses nodes with LZF.)
            &["XTRIM", "dump", "MAXLEN", "1"],
            &["XRANGE", "dump", "-", "+"],
            &[
                "XADD",
                "dump2",
                "18446744073709551615-0",
                "x",
                "9223372036854775807",
            ],
            &[
                "XSETID",
                "dump2",
                "18446744073709551615-7",
                "ENTRIESADDED",
                "9",
                "MAXDELETEDID",
                "3-3",
            ],
            &["DUMP", "dump2"],
            &[
                "XGROUP",
                "CREATE",
                "dump3",
                "g",
                "$",
                "MKSTREAM",
                "ENTRIESREAD",
                "0",
            ],
            &["DUMP", "dump3"],
            &["CONFIG", "SET", "stream-node-max-bytes", "4kb"],
            &["CONFIG", "GET", "stream-node-max-bytes"],
            &["CONFIG", "SET", "stream-node-max-bytes", "-1"],
            &["CONFIG", "SET", "stream-node-max-entries", "-1"],
            &["CONFIG", "SET", "stream-node-max-entries", "abc"],
            &["CONFIG", "GET", "stream-node-max-entries"],
            &["XADD", "lzf", "1-0", "field", "value"],
            &["XADD", "lzf", "2-0", "field", "value"],
            &["XADD", "lzf", "3-0", "field", "value"],
            // (DUMP of a node Redis compresses with LZF left out: nacre does not compress.)
            &["XRANGE", "lzf", "-", "+"],
        ],
    )
}

/// Streams to carry between the servers by DUMP and RESTORE: nodes with deleted entries and
/// entries trimmed inside a node, nodes LZF compresses, groups with pending entries and
/// consumers, counters set by XSETID.
const CARRIED: &[&[&str]] = &[
    &["CONFIG", "SET", "stream-node-max-entries", "3"],
    &["XADD", "c1", "1-0", "a", "1", "b", "2"],
    &["XADD", "c1", "2-0", "a", "3", "b", "4"],
    &["XADD", "c1", "3-5", "c", "word", "b", "-17"],
    &["XADD", "c1", "5-0", "a", "1", "b", "2"],
    &["XADD", "c1", "6-0", "a", "1"],
    &["XADD", "c1", "7-0", "a", "1", "b", "99999999999"],
    &[
        "XADD",
        "c1",
        "8-0",
        "long",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ],
    &["XDEL", "c1", "2-0", "5-0"],
    &["XGROUP", "CREATE", "c1", "g1", "0"],
    &["XGROUP", "CREATE", "c1", "g2", "3-5", "ENTRIESREAD", "2"],
    &[
        "XREADGROUP",
        "GROUP",
        "g1",
        "alice",
        "COUNT",
        "3",
        "STREAMS",
        "c1",
        ">",
    ],
    &[
        "XREADGROUP",
        "GROUP",
        "g1",
        "bob",
        "NOACK",
        "COUNT",
        "1",
        "STREAMS",
        "c1",
        ">",
    ],
    &["XREADGROUP", "GROUP", "g1", "bob", "STREAMS", "c1", ">"],
    &[
        "XCLAIM",
        "c1",
        "g1",
        "carol",
        "0",
        "1-0",
        "RETRYCOUNT",
        "4",
        "JUSTID",
    ],
    &["XGROUP", "CREATECONSUMER", "c1", "g2", "dave"],
    &["XADD", "c2", "1-0", "field", "value"],
    &["XADD", "c2", "2-0", "field", "value"],
    &["XADD", "c2", "3-0", "field", "value"],
    &["XADD", "c2", "4-0", "field", "value"],
    &["XTRIM", "c2", "MAXLEN", "2"],
    &[
        "XSETID",
        "c2",
        "9-9",
        "ENTRIESADDED",
        "40",
        "MAXDELETEDID",
        "8-0",
    ],
    &["XGROUP", "CREATE", "c3", "g", "$", "MKSTREAM"],
    &["XADD", "c4", "1-0", "f", "v"],
    &["XDEL", "c4", "1-0"],
];

/// What a carried stream looks like.
const LOOKS: &[&[&str]] = &[
    &["XINFO", "STREAM", "KEY", "FULL"],
    &["XINFO", "STREAM", "KEY"],
    &["XINFO", "GROUPS", "KEY"],
    &["XRANGE", "KEY", "-", "+"],
    &["XPENDING", "KEY", "g1", "-", "+", "10"],
    &["XINFO", "CONSUMERS", "KEY", "g1"],
];

/// Builds [`CARRIED`] on `from`, moves each stream to `to` by DUMP and RESTORE, and gives
/// what each looks like on both servers.
fn carry(from: u16, to: u16) -> (Vec<String>, Vec<String>) {
    let mut f = Conn::open(from);
    let mut t = Conn::open(to);
    f.call(&["FLUSHALL"]);
    t.call(&["FLUSHALL"]);
    replay(&mut f, CARRIED);
    // Redis checks the whole payload, not only its checksum.
    t.call(&["CONFIG", "SET", "sanitize-dump-payload", "yes"]);
    let (mut there, mut here) = (Vec::new(), Vec::new());
    for key in ["c1", "c2", "c3", "c4"] {
        let payload = match f.call(&["DUMP", key]) {
            R::Blob(_, Some(p)) => p,
            r => panic!("DUMP {key}: {r:?}"),
        };
        let mut r = Vec::new();
        t.call_bytes(&[b"RESTORE", key.as_bytes(), b"0", &payload])
            .wire(&mut r);
        here.push(format!("RESTORE {key} -> {}", r.escape_ascii()));
        there.push(format!("RESTORE {key} -> +OK\\r\\n"));
        for look in LOOKS {
            let args: Vec<&str> = look
                .iter()
                .map(|a| if *a == "KEY" { key } else { a })
                .collect();
            there.push(run(&mut f, &args));
            here.push(run(&mut t, &args));
        }
    }
    (there, here)
}

/// Streams DUMPed by either server are RESTOREd by the other as they were.
#[test]
fn dump_and_restore_across_servers() {
    let nacre = Server::start(&[]);
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server is not installed; compared with nothing");
        return;
    };
    let mut differ = Vec::new();
    for (from, to, way) in [
        (redis.port, nacre.port, "redis to nacre"),
        (nacre.port, redis.port, "nacre to redis"),
    ] {
        let (there, here) = carry(from, to);
        if std::env::var_os("STREAMS_DUMP").is_some() {
            for l in &here {
                eprintln!("{way}: {l}");
            }
        }
        for (i, (a, b)) in there.iter().zip(&here).enumerate() {
            if a != b {
                differ.push(format!("{way}, step {i}:\n  source: {a}\n  restored: {b}"));
            }
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// Runs `session` (on a connection to the port it is given) against nacre-server and
/// redis-server; every reply must be the same.
fn compare(session: fn(u16) -> Vec<String>) {
    let nacre = Server::start(&[]);
    let ours = session(nacre.port);
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server is not installed; compared with nothing");
        return;
    };
    let theirs = session(redis.port);
    if std::env::var_os("STREAMS_DUMP").is_some() {
        for l in &theirs {
            eprintln!("redis: {l}");
        }
    }
    let differ: Vec<String> = ours
        .iter()
        .zip(&theirs)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| format!("step {i}:\n  nacre: {a}\n  redis: {b}"))
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    assert_eq!(ours.len(), theirs.len());
}

#[test]
fn ids_trimming_ranges_and_reads_match_redis() {
    compare(|port| basic_session(&mut Conn::open(port)));
}

#[test]
fn consumer_groups_match_redis() {
    compare(|port| group_session(&mut Conn::open(port)));
}

#[test]
fn nodes_ids_lag_and_claims_match_redis() {
    compare(|port| edge_session(&mut Conn::open(port)));
}

#[test]
fn blocked_readers_match_redis() {
    compare(blocking_session);
}

#[test]
fn node_bytes_match_redis() {
    compare(|port| node_bytes_session(&mut Conn::open(port)));
}

#[test]
fn keyspace_events_match_redis() {
    compare(events_session);
}

#[test]
fn other_commands_on_streams_match_redis() {
    compare(|port| other_commands_session(&mut Conn::open(port)));
}

#[test]
fn resp3_replies_match_redis() {
    compare(|port| resp3_session(&mut Conn::open(port)));
}
