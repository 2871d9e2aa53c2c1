//! Tests of the RESP parser and encoder: every value type from its bytes, every split point,
//! malformed and oversized input, and random values round-tripped through the encoder.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// `,3.14` is the RESP3 specification's example of a double, not an approximation of pi.
#![allow(clippy::approx_constant)]

use nacre_pmem::SplitMix64;

use crate::*;

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn simple(s: &str) -> Reply {
    Reply::Simple(s.to_string())
}

/// Parses `bytes`, which must hold exactly one reply.
fn one(bytes: &[u8]) -> Reply {
    let (reply, used) = parse(bytes)
        .unwrap_or_else(|e| panic!("{}: {e}", bytes.escape_ascii()))
        .unwrap_or_else(|| panic!("{}: incomplete", bytes.escape_ascii()));
    assert_eq!(used, bytes.len(), "{}", bytes.escape_ascii());
    reply
}

fn protocol_err(bytes: &[u8]) -> String {
    match parse(bytes) {
        Err(CodecError::Protocol(msg)) => msg,
        other => panic!(
            "{}: expected a protocol error, got {other:?}",
            bytes.escape_ascii()
        ),
    }
}

// ---- One test per reply type, from the bytes Redis sends ----

#[test]
fn simple_string() {
    assert_eq!(one(b"+OK\r\n"), simple("OK"));
    assert_eq!(one(b"+\r\n"), simple(""));
}

#[test]
fn error_reply() {
    let r = one(b"-ERR unknown command\r\n");
    assert_eq!(r, Reply::Error("ERR unknown command".into()));
    assert!(r.is_error());
    assert_eq!(r.error_message().unwrap(), "ERR unknown command");
    assert!(matches!(r.into_result(), Err(m) if m == "ERR unknown command"));
}

#[test]
fn integer() {
    assert_eq!(one(b":1000\r\n"), Reply::Integer(1000));
    assert_eq!(one(b":-42\r\n"), Reply::Integer(-42));
    assert_eq!(one(b":0\r\n").as_int(), Some(0));
    assert_eq!(one(b":9223372036854775807\r\n"), Reply::Integer(i64::MAX));
    assert_eq!(one(b":-9223372036854775808\r\n"), Reply::Integer(i64::MIN));
}

#[test]
fn bulk_string() {
    let r = one(b"$5\r\nhello\r\n");
    assert_eq!(r, bulk("hello"));
    assert_eq!(r.as_bytes(), Some(&b"hello"[..]));
    // Binary safe: CR, LF and NUL inside the data.
    assert_eq!(
        one(b"$6\r\na\r\nb\0c\r\n"),
        Reply::Bulk(b"a\r\nb\0c".to_vec())
    );
}

#[test]
fn empty_bulk_string() {
    assert_eq!(one(b"$0\r\n\r\n"), Reply::Bulk(Vec::new()));
}

#[test]
fn null_bulk_string() {
    let r = one(b"$-1\r\n");
    assert_eq!(r, Reply::Nil);
    assert!(r.is_nil());
}

#[test]
fn null_array() {
    assert_eq!(one(b"*-1\r\n"), Reply::Nil);
}

#[test]
fn array() {
    assert_eq!(
        one(b"*2\r\n$3\r\nfoo\r\n:1\r\n"),
        Reply::Array(vec![bulk("foo"), Reply::Integer(1)])
    );
    assert_eq!(one(b"*0\r\n"), Reply::Array(vec![]));
    // Nested, with nulls inside.
    assert_eq!(
        one(b"*3\r\n*2\r\n:1\r\n*0\r\n$-1\r\n*1\r\n*-1\r\n"),
        Reply::Array(vec![
            Reply::Array(vec![Reply::Integer(1), Reply::Array(vec![])]),
            Reply::Nil,
            Reply::Array(vec![Reply::Nil]),
        ])
    );
}

#[test]
fn resp3_null() {
    assert_eq!(one(b"_\r\n"), Reply::Nil);
}

#[test]
fn boolean() {
    assert_eq!(one(b"#t\r\n"), Reply::Boolean(true));
    assert_eq!(one(b"#f\r\n"), Reply::Boolean(false));
    assert_eq!(one(b"#t\r\n").as_bool(), Some(true));
}

#[test]
fn double() {
    assert_eq!(one(b",3.14\r\n"), Reply::Double(3.14));
    assert_eq!(one(b",10\r\n"), Reply::Double(10.0));
    assert_eq!(one(b",-1.5e-3\r\n"), Reply::Double(-1.5e-3));
    assert_eq!(one(b",inf\r\n"), Reply::Double(f64::INFINITY));
    assert_eq!(one(b",-inf\r\n"), Reply::Double(f64::NEG_INFINITY));
    assert!(matches!(one(b",nan\r\n"), Reply::Double(d) if d.is_nan()));
}

#[test]
fn big_number() {
    let digits = "3492890328409238509324850943850943825024385";
    assert_eq!(
        one(format!("({digits}\r\n").as_bytes()),
        Reply::BigNumber(digits.into())
    );
    assert_eq!(one(b"(-12\r\n"), Reply::BigNumber("-12".into()));
}

#[test]
fn verbatim_string() {
    let r = one(b"=15\r\ntxt:Some string\r\n");
    assert_eq!(
        r,
        Reply::Verbatim {
            format: "txt".into(),
            text: b"Some string".to_vec()
        }
    );
    assert_eq!(r.as_str(), Some("Some string"));
}

#[test]
fn map() {
    assert_eq!(
        one(b"%1\r\n+a\r\n:1\r\n"),
        Reply::Map(vec![(simple("a"), Reply::Integer(1))])
    );
    assert_eq!(one(b"%0\r\n"), Reply::Map(vec![]));
    // Aggregates as keys and values.
    assert_eq!(
        one(b"%2\r\n*1\r\n:1\r\n%1\r\n#t\r\n_\r\n$1\r\nk\r\n~0\r\n"),
        Reply::Map(vec![
            (
                Reply::Array(vec![Reply::Integer(1)]),
                Reply::Map(vec![(Reply::Boolean(true), Reply::Nil)])
            ),
            (bulk("k"), Reply::Set(vec![])),
        ])
    );
}

#[test]
fn set() {
    assert_eq!(
        one(b"~2\r\n:1\r\n:2\r\n"),
        Reply::Set(vec![Reply::Integer(1), Reply::Integer(2)])
    );
}

#[test]
fn push() {
    assert_eq!(
        one(b">2\r\n+message\r\n+hi\r\n"),
        Reply::Push(vec![simple("message"), simple("hi")])
    );
}

#[test]
fn blob_error() {
    let r = one(b"!21\r\nSYNTAX invalid syntax\r\n");
    assert_eq!(r, Reply::BlobError(b"SYNTAX invalid syntax".to_vec()));
    assert!(r.is_error());
    assert_eq!(r.error_message().unwrap(), "SYNTAX invalid syntax");
}

#[test]
fn attributes_are_skipped() {
    // The example from the RESP3 specification: the attribute precedes the reply.
    let bytes: &[u8] = b"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n";
    assert_eq!(
        one(bytes),
        Reply::Array(vec![Reply::Integer(2039123), Reply::Integer(9543892)])
    );
    // Inside an aggregate an attribute is not an element.
    assert_eq!(
        one(b"*3\r\n:1\r\n:2\r\n|1\r\n+ttl\r\n:3600\r\n:3\r\n"),
        Reply::Array(vec![
            Reply::Integer(1),
            Reply::Integer(2),
            Reply::Integer(3)
        ])
    );
    // Empty attribute, streamed attribute.
    assert_eq!(one(b"|0\r\n:7\r\n"), Reply::Integer(7));
    assert_eq!(one(b"|?\r\n+a\r\n:1\r\n.\r\n:7\r\n"), Reply::Integer(7));
}

#[test]
fn streamed_string_and_aggregates() {
    assert_eq!(
        one(b"$?\r\n;4\r\nHell\r\n;5\r\no wor\r\n;1\r\nd\r\n;0\r\n"),
        bulk("Hello word")
    );
    assert_eq!(
        one(b"*?\r\n:1\r\n$?\r\n;1\r\nx\r\n;0\r\n*?\r\n.\r\n.\r\n"),
        Reply::Array(vec![Reply::Integer(1), bulk("x"), Reply::Array(vec![])])
    );
    assert_eq!(
        one(b"%?\r\n+a\r\n:1\r\n+b\r\n:2\r\n.\r\n"),
        Reply::Map(vec![
            (simple("a"), Reply::Integer(1)),
            (simple("b"), Reply::Integer(2))
        ])
    );
    assert_eq!(one(b"~?\r\n.\r\n"), Reply::Set(vec![]));
}

#[test]
fn consumed_stops_at_the_end_of_the_first_reply() {
    let (r, used) = parse(b"+OK\r\n:1\r\n").unwrap().unwrap();
    assert_eq!((r, used), (simple("OK"), 5));
    let (r, used) = parse(b"$3\r\nfoo\r\n$-1\r\n").unwrap().unwrap();
    assert_eq!((r, used), (bulk("foo"), 9));
}

#[test]
fn accessors() {
    assert_eq!(bulk("17").as_int(), Some(17));
    assert_eq!(bulk("x").as_int(), None);
    assert_eq!(bulk("2.5").as_double(), Some(2.5));
    assert_eq!(Reply::Integer(2).as_double(), Some(2.0));
    assert_eq!(Reply::Integer(0).as_bool(), Some(false));
    assert_eq!(Reply::Nil.into_array(), None);
    assert_eq!(
        Reply::Set(vec![Reply::Nil]).into_array(),
        Some(vec![Reply::Nil])
    );
    assert_eq!(
        Reply::Array(vec![bulk("f"), bulk("v"), bulk("g"), bulk("w")]).into_map(),
        Some(vec![(bulk("f"), bulk("v")), (bulk("g"), bulk("w"))])
    );
    assert_eq!(Reply::Array(vec![bulk("f")]).into_map(), None);
    assert_eq!(simple("OK").into_result().unwrap(), simple("OK"));
    assert_eq!(Reply::Double(1.0).type_name(), "double");
}

// ---- Incremental parsing ----

/// Every reply type, with what it parses to.
fn samples() -> Vec<(&'static [u8], Reply)> {
    vec![
        (b"+OK\r\n", simple("OK")),
        (
            b"-ERR unknown command\r\n",
            Reply::Error("ERR unknown command".into()),
        ),
        (b":1000\r\n", Reply::Integer(1000)),
        (b":-7\r\n", Reply::Integer(-7)),
        (b"$5\r\nhello\r\n", bulk("hello")),
        (b"$-1\r\n", Reply::Nil),
        (b"*-1\r\n", Reply::Nil),
        (b"$0\r\n\r\n", bulk("")),
        (
            b"*2\r\n$3\r\nfoo\r\n:1\r\n",
            Reply::Array(vec![bulk("foo"), Reply::Integer(1)]),
        ),
        (b"*0\r\n", Reply::Array(vec![])),
        (b"_\r\n", Reply::Nil),
        (b"#t\r\n", Reply::Boolean(true)),
        (b",3.14\r\n", Reply::Double(3.14)),
        (b",-inf\r\n", Reply::Double(f64::NEG_INFINITY)),
        (
            b"(-123456789012345678901234567890\r\n",
            Reply::BigNumber("-123456789012345678901234567890".into()),
        ),
        (
            b"=15\r\ntxt:Some string\r\n",
            Reply::Verbatim {
                format: "txt".into(),
                text: b"Some string".to_vec(),
            },
        ),
        (
            b"%1\r\n+a\r\n:1\r\n",
            Reply::Map(vec![(simple("a"), Reply::Integer(1))]),
        ),
        (
            b"~2\r\n:1\r\n:2\r\n",
            Reply::Set(vec![Reply::Integer(1), Reply::Integer(2)]),
        ),
        (
            b">2\r\n+message\r\n+hi\r\n",
            Reply::Push(vec![simple("message"), simple("hi")]),
        ),
        (
            b"!21\r\nSYNTAX invalid syntax\r\n",
            Reply::BlobError(b"SYNTAX invalid syntax".to_vec()),
        ),
        (
            b"|1\r\n+ttl\r\n:3600\r\n*2\r\n|1\r\n+a\r\n#f\r\n$2\r\n\r\n\r\n*1\r\n_\r\n",
            Reply::Array(vec![bulk("\r\n"), Reply::Array(vec![Reply::Nil])]),
        ),
        (
            b"*2\r\n$?\r\n;2\r\nab\r\n;0\r\n%?\r\n:1\r\n:2\r\n.\r\n",
            Reply::Array(vec![
                bulk("ab"),
                Reply::Map(vec![(Reply::Integer(1), Reply::Integer(2))]),
            ]),
        ),
    ]
}

#[test]
fn every_proper_prefix_is_incomplete() {
    for (bytes, want) in samples() {
        for cut in 0..bytes.len() {
            assert!(
                parse(&bytes[..cut]).unwrap().is_none(),
                "prefix {} of {}",
                cut,
                bytes.escape_ascii()
            );
        }
        assert_eq!(one(bytes), want);
    }
}

/// Feeds `stream` to a [`Parser`] in the pieces `cuts` makes, keeping the unconsumed
/// bytes as a connection does, and returns every reply.
fn feed_in_pieces(stream: &[u8], cuts: &[usize]) -> Vec<Reply> {
    let mut parser = Parser::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut replies = Vec::new();
    let mut from = 0;
    for &to in cuts.iter().chain(std::iter::once(&stream.len())) {
        pending.extend_from_slice(&stream[from..to]);
        from = to;
        loop {
            let (used, reply) = parser.feed(&pending).unwrap();
            pending.drain(..used);
            match reply {
                Some(r) => replies.push(r),
                None => break,
            }
        }
    }
    assert!(pending.is_empty() && parser.is_idle());
    replies
}

#[test]
fn stream_split_at_every_byte_boundary() {
    let samples = samples();
    let stream: Vec<u8> = samples
        .iter()
        .flat_map(|(b, _)| b.iter().copied())
        .collect();
    let want: Vec<Reply> = samples.into_iter().map(|(_, r)| r).collect();
    // One split anywhere.
    for cut in 0..=stream.len() {
        assert_eq!(feed_in_pieces(&stream, &[cut]), want, "split at {cut}");
    }
    // A byte at a time.
    let every: Vec<usize> = (1..stream.len()).collect();
    assert_eq!(feed_in_pieces(&stream, &every), want);
}

#[test]
fn long_line_in_small_pieces() {
    // The parser remembers how far it searched an incomplete line for its end, so this
    // is linear; the result must be the same as in one piece.
    let mut line = vec![b'+'];
    line.extend(std::iter::repeat_n(b'x', 100_000));
    line.extend_from_slice(b"\r\n");
    let every: Vec<usize> = (1..line.len()).step_by(7).collect();
    let got = feed_in_pieces(&line, &every);
    assert_eq!(got, vec![simple(&"x".repeat(100_000))]);
}

// ---- Malformed and oversized input ----

#[test]
fn unknown_type_byte_is_named() {
    let msg = protocol_err(b"?3\r\n");
    assert!(msg.contains("'?'") && msg.contains("0x3f"), "{msg}");
    let msg = protocol_err(b"hello\r\n");
    assert!(msg.contains("'h'"), "{msg}");
    // Inside an aggregate too.
    let msg = protocol_err(b"*2\r\n:1\r\n@x\r\n");
    assert!(msg.contains("'@'"), "{msg}");
}

#[test]
fn missing_crlf() {
    let msg = protocol_err(b"+OK\n");
    assert!(msg.contains("LF without CR"), "{msg}");
    let msg = protocol_err(b"$5\r\nhelloXY");
    assert!(
        msg.contains("instead of CRLF") && msg.contains("XY"),
        "{msg}"
    );
    protocol_err(b"$5\r\nhello\rX");
    protocol_err(b"$5\r\nhello\n\n");
    let msg = protocol_err(b"+O\rK\r\n");
    assert!(msg.contains("stray CR"), "{msg}");
}

#[test]
fn bad_lengths() {
    let msg = protocol_err(b"$abc\r\n");
    assert!(msg.contains("non-numeric") && msg.contains("$abc"), "{msg}");
    protocol_err(b"$\r\n");
    protocol_err(b"*1x\r\n");
    protocol_err(b"$ 5\r\n");
    let msg = protocol_err(b"$-2\r\n");
    assert!(msg.contains("negative"), "{msg}");
    protocol_err(b"*-5\r\n");
    // -1 is nil only for $ and *.
    for ty in ["%", "~", ">", "|", "=", "!"] {
        protocol_err(format!("{ty}-1\r\n").as_bytes());
    }
    // ? is streamed only for $ and aggregates.
    protocol_err(b"=?\r\n");
    protocol_err(b"!?\r\n");
}

#[test]
fn bad_scalars() {
    protocol_err(b":12a\r\n");
    protocol_err(b":\r\n");
    protocol_err(b":99999999999999999999\r\n");
    protocol_err(b"#x\r\n");
    protocol_err(b"#\r\n");
    protocol_err(b",abc\r\n");
    protocol_err(b",\r\n");
    protocol_err(b"(12x\r\n");
    protocol_err(b"(\r\n");
    protocol_err(b"_x\r\n");
    protocol_err(b".x\r\n");
    let msg = protocol_err(b"=3\r\ntxt\r\n");
    assert!(msg.contains("verbatim"), "{msg}");
    protocol_err(b"=4\r\ntxt-\r\n");
}

#[test]
fn misplaced_stream_markers() {
    protocol_err(b".\r\n");
    protocol_err(b"*1\r\n.\r\n");
    protocol_err(b";3\r\nabc\r\n");
    protocol_err(b"$?\r\n:1\r\n");
    protocol_err(b"$?\r\n$?\r\n");
    let msg = protocol_err(b"%?\r\n:1\r\n.\r\n");
    assert!(msg.contains("odd"), "{msg}");
}

fn too_large(bytes: &[u8], limits: &Limits) -> (&'static str, u64, u64) {
    match parse_with(bytes, limits) {
        Err(CodecError::TooLarge { what, len, limit }) => (what, len, limit),
        other => panic!("{}: expected TooLarge, got {other:?}", bytes.escape_ascii()),
    }
}

#[test]
fn lengths_over_the_limits() {
    let d = Limits::DEFAULT;
    assert_eq!(
        too_large(b"$536870913\r\n", &d),
        ("bulk string length", 536_870_913, 512 << 20)
    );
    // At the limit it is merely incomplete, and nothing of that size is allocated.
    assert!(parse(b"$536870912\r\nabc").unwrap().is_none());
    assert!(parse(b"*16777216\r\n:1\r\n").unwrap().is_none());
    assert_eq!(
        too_large(b"*16777217\r\n", &d),
        ("array length", 16_777_217, 1 << 24)
    );
    assert_eq!(too_large(b"%16777217\r\n", &d).0, "map length");
    assert_eq!(too_large(b"~16777217\r\n", &d).0, "set length");
    assert_eq!(too_large(b">16777217\r\n", &d).0, "push length");
    assert_eq!(too_large(b"|16777217\r\n", &d).0, "attribute length");
    assert_eq!(too_large(b"=536870913\r\n", &d).0, "verbatim string length");
    assert_eq!(too_large(b"!536870913\r\n", &d).0, "blob error length");
    // Longer than any integer: saturated.
    assert_eq!(
        too_large(b"$99999999999999999999999999\r\n", &d),
        ("bulk string length", u64::MAX, 512 << 20)
    );

    let small = Limits {
        max_bulk: 10,
        max_elements: 3,
        max_depth: 4,
        max_line: 8,
    };
    assert_eq!(too_large(b"$11\r\n", &small).1, 11);
    assert!(parse_with(b"$10\r\n0123456789\r\n", &small)
        .unwrap()
        .is_some());
    assert_eq!(too_large(b"*4\r\n", &small).1, 4);
    assert_eq!(
        too_large(b"$?\r\n;6\r\nabcdef\r\n;5\r\nghijk\r\n", &small).0,
        "streamed string length"
    );
    assert_eq!(
        too_large(b"*?\r\n:1\r\n:2\r\n:3\r\n:4\r\n", &small).0,
        "streamed aggregate length"
    );
    assert_eq!(
        too_large(b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n", &small).0,
        "nesting depth"
    );
    assert!(parse_with(b"*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", &small)
        .unwrap()
        .is_some());
    // A line over the limit fails whether or not its end has arrived.
    assert_eq!(too_large(b"+0123456789\r\n", &small).0, "line length");
    assert_eq!(too_large(b"+0123456789abc", &small).0, "line length");
    assert!(parse_with(b"+01234567", &small).unwrap().is_none());
}

#[test]
fn deep_nesting_is_refused_by_default() {
    let bytes = b"*1\r\n".repeat(10_000);
    assert_eq!(
        too_large(&bytes, &Limits::DEFAULT),
        ("nesting depth", 257, 256)
    );
}

// ---- Encoding ----

#[test]
fn encode_command_bytes() {
    let mut out = Vec::new();
    encode_command(&mut out, &[b"SET", b"key", b"value"]);
    assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n");
    out.clear();
    encode_command(&mut out, &[]);
    assert_eq!(out, b"*0\r\n");
}

#[test]
fn encoded_commands_round_trip() {
    let long = vec![0xabu8; 100_000];
    let cases: Vec<Vec<&[u8]>> = vec![
        vec![b"PING"],
        vec![b"SET", b"", b"\r\n\0\xff"],
        vec![b"ECHO", &long],
        vec![],
    ];
    let mut stream = Vec::new();
    for args in &cases {
        encode_command(&mut stream, args);
    }
    let mut at = 0;
    for args in &cases {
        let (reply, used) = parse(&stream[at..]).unwrap().unwrap();
        at += used;
        let want: Vec<Reply> = args.iter().map(|a| Reply::Bulk(a.to_vec())).collect();
        assert_eq!(reply, Reply::Array(want));
    }
    assert_eq!(at, stream.len());
}

/// A random reply tree (no NaN, which is not equal to itself).
fn random_reply(rng: &mut SplitMix64, depth: usize) -> Reply {
    let pick = rng.next_u64() % if depth >= 4 { 10 } else { 15 };
    let r = rng.next_u64();
    let len = (r % 5) as usize;
    let bytes = |rng: &mut SplitMix64, n: usize| -> Vec<u8> {
        (0..n).map(|_| rng.next_u64() as u8).collect()
    };
    match pick {
        0 => Reply::Simple(format!("s{r}")),
        1 => Reply::Error(format!("ERR e{r}")),
        2 => Reply::Integer(r as i64),
        3 => Reply::Bulk(bytes(rng, (r % 40) as usize)),
        4 => Reply::Nil,
        5 => Reply::Boolean(r % 2 == 0),
        6 => Reply::Double(match r % 4 {
            0 => f64::INFINITY,
            1 => f64::NEG_INFINITY,
            _ => rng.next_f64() * 1e10 - 5e9,
        }),
        7 => Reply::BigNumber(format!("-{r}{r}")),
        8 => Reply::Verbatim {
            format: "mkd".into(),
            text: bytes(rng, len * 3),
        },
        9 => Reply::BlobError(bytes(rng, len)),
        10 => Reply::Array((0..len).map(|_| random_reply(rng, depth + 1)).collect()),
        11 => Reply::Set((0..len).map(|_| random_reply(rng, depth + 1)).collect()),
        12 => Reply::Push((0..len).map(|_| random_reply(rng, depth + 1)).collect()),
        _ => Reply::Map(
            (0..len)
                .map(|_| (random_reply(rng, depth + 1), random_reply(rng, depth + 1)))
                .collect(),
        ),
    }
}

#[test]
fn encoded_replies_round_trip_in_random_pieces() {
    let mut rng = SplitMix64::new(0x5e5b);
    let replies: Vec<Reply> = (0..300).map(|_| random_reply(&mut rng, 0)).collect();
    let mut stream = Vec::new();
    for r in &replies {
        encode_reply(&mut stream, r);
    }
    for _ in 0..20 {
        let mut cuts = Vec::new();
        let mut at = 0;
        loop {
            at += 1 + (rng.next_u64() % 64) as usize;
            if at >= stream.len() {
                break;
            }
            cuts.push(at);
        }
        assert_eq!(feed_in_pieces(&stream, &cuts), replies);
    }
    let mut nan = Vec::new();
    encode_reply(&mut nan, &Reply::Double(f64::NAN));
    assert_eq!(nan, b",nan\r\n");
    assert!(matches!(one(&nan), Reply::Double(d) if d.is_nan()));
}

#[test]
fn line_replies_with_cr_or_lf_stay_one_reply() {
    // An error echoing client bytes: CR and LF become spaces, as Redis writes them.
    let injected = Reply::Error("ERR unknown command 'X\r\n+OK\r\n:42'".into());
    for resp3 in [false, true] {
        let mut out = Vec::new();
        if resp3 {
            encode_reply(&mut out, &injected);
            encode_reply(&mut out, &Reply::Simple("a\nb".into()));
        } else {
            encode_reply_resp2(&mut out, &injected);
            encode_reply_resp2(&mut out, &Reply::Simple("a\nb".into()));
        }
        let (first, used) = parse(&out).expect("valid").expect("whole");
        assert_eq!(
            first,
            Reply::Error("ERR unknown command 'X  +OK  :42'".into())
        );
        let (second, rest) = parse(&out[used..]).expect("valid").expect("whole");
        assert_eq!(second, simple("a b"));
        assert_eq!(used + rest, out.len());
    }
}
