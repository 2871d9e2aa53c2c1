//! Streams against redis-server 7.0: the same command sessions (XADD with its id forms and
//! trimming, XRANGE/XREVRANGE, XLEN, XDEL, XTRIM, XSETID, XREAD, and consumer groups: XGROUP,
//! XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO) give the same replies byte for byte,
//! errors included, over RESP2 and RESP3. Replies are read off the wire as sent; only fields
//! that depend on the clock (idle times, delivery and seen times) and XINFO's
//! `radix-tree-nodes` (an approximation in nacre) are masked before comparing.

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
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        self.r.get_mut().write_all(&out).expect("write");
        let (reply, raw) = self.read();
        // What is compared is sent exactly so: the parse gives back the bytes it read.
        let mut again = Vec::new();
        reply.wire(&mut again);
        assert_eq!(
            again.escape_ascii().to_string(),
            raw.escape_ascii().to_string(),
            "{args:?}: not read back as sent"
        );
        reply
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
        &["XINFO", "HELP"],
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

/// Runs `session` against nacre-server and redis-server; every reply must be the same.
fn compare(session: fn(&mut Conn) -> Vec<String>) {
    let nacre = Server::start(&[]);
    let ours = session(&mut Conn::open(nacre.port));
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server is not installed; compared with nothing");
        return;
    };
    let theirs = session(&mut Conn::open(redis.port));
    for l in &theirs {
        eprintln!("DUMP {l}");
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
    compare(basic_session);
}

#[test]
fn consumer_groups_match_redis() {
    compare(group_session);
}

#[test]
fn resp3_replies_match_redis() {
    compare(resp3_session);
}
