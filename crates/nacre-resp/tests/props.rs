//! Property tests of the parser on stable Rust (the fuzz target's properties, run in CI):
//! any bytes parse to a value, "need more", or an error, never a panic or an allocation
//! beyond the limits; fed in any pieces the stream parser agrees with the one-shot parser;
//! every value the encoder writes parses back to itself.

use nacre_resp::{
    encode_command, encode_reply, format_double, parse_request, parse_with, CodecError, Limits,
    Parser, Reply, RequestLimits,
};
use proptest::prelude::*;

const SMALL: Limits = Limits {
    max_bulk: 4096,
    max_elements: 64,
    max_depth: 8,
    max_line: 256,
};

/// Bytes that look like RESP often enough to reach deep into the parser.
fn resp_like() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(b"*".to_vec()),
        Just(b"$".to_vec()),
        Just(b"%".to_vec()),
        Just(b"~".to_vec()),
        Just(b">".to_vec()),
        Just(b"|".to_vec()),
        Just(b"+".to_vec()),
        Just(b"-".to_vec()),
        Just(b":".to_vec()),
        Just(b",".to_vec()),
        Just(b"#".to_vec()),
        Just(b"_".to_vec()),
        Just(b"(".to_vec()),
        Just(b"=".to_vec()),
        Just(b"!".to_vec()),
        Just(b"?".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"-1".to_vec()),
        Just(b"99999999999999999999".to_vec()),
        (0u32..20).prop_map(|n| n.to_string().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..6),
    ];
    proptest::collection::vec(token, 0..40).prop_map(|t| t.concat())
}

fn reply() -> impl Strategy<Value = Reply> {
    let leaf = prop_oneof![
        "[a-zA-Z0-9 ]{0,12}".prop_map(Reply::Simple),
        "ERR [a-z ]{0,12}".prop_map(Reply::Error),
        any::<i64>().prop_map(Reply::Integer),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Reply::Bulk),
        Just(Reply::Nil),
        any::<bool>().prop_map(Reply::Boolean),
        (-1e12f64..1e12).prop_map(Reply::Double),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Reply::Array),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Reply::Set),
            proptest::collection::vec((inner.clone(), inner.clone()), 0..4).prop_map(Reply::Map),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_parse_or_fail_cleanly(bytes in prop_oneof![
        resp_like(),
        proptest::collection::vec(any::<u8>(), 0..200),
    ]) {
        match parse_with(&bytes, &SMALL) {
            Ok(Some((_, used))) => prop_assert!(used > 0 && used <= bytes.len()),
            Ok(None) | Err(CodecError::Protocol(_)) => {}
            Err(CodecError::TooLarge { len, limit, .. }) => prop_assert!(len > limit),
        }
    }

    #[test]
    fn the_stream_parser_agrees_with_the_one_shot_parser_in_any_pieces(
        bytes in resp_like(),
        cuts in proptest::collection::vec(1usize..8, 1..40),
    ) {
        let whole = parse_with(&bytes, &SMALL);
        let mut p = Parser::with_limits(SMALL);
        let (mut at, mut end, mut got) = (0usize, 0usize, None);
        let mut err = None;
        for c in cuts.iter().cycle() {
            if got.is_some() || err.is_some() || end >= bytes.len() {
                break;
            }
            end = (end + c).min(bytes.len());
            // The parser is fed what it has not consumed, up to `end`.
            match p.feed(&bytes[at..end]) {
                Ok((used, r)) => {
                    at += used;
                    got = r;
                }
                Err(e) => err = Some(e),
            }
        }
        match (whole, got, err) {
            (Ok(Some((w, used))), Some(g), None) => {
                prop_assert_eq!(w, g);
                prop_assert_eq!(used, at);
            }
            (Ok(None), None, None) => {}
            (Err(_), _, Some(_)) => {}
            (w, g, e) => prop_assert!(false, "one-shot {:?}, stream {:?} / {:?}", w, g, e),
        }
    }

    #[test]
    fn every_encoded_value_parses_back(r in reply()) {
        let mut buf = Vec::new();
        encode_reply(&mut buf, &r);
        let (back, used) = parse_with(&buf, &Limits::DEFAULT).unwrap().unwrap();
        prop_assert_eq!(used, buf.len());
        prop_assert_eq!(back, r);
    }

    #[test]
    fn any_bytes_are_a_request_an_incomplete_one_or_a_protocol_error(
        bytes in prop_oneof![resp_like(), proptest::collection::vec(any::<u8>(), 0..300)],
        authenticated in any::<bool>(),
    ) {
        let limits = RequestLimits { max_bulk: 1000, authenticated };
        if let Ok(Some((args, used))) = parse_request(&bytes, &limits) {
            prop_assert!(used > 0 && used <= bytes.len());
            prop_assert!(args.iter().all(|a| a.len() <= 1000));
        }
    }

    #[test]
    fn encoded_commands_parse_back_as_requests(
        args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..50), 1..8),
        tail in proptest::collection::vec(any::<u8>(), 0..20),
    ) {
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let mut buf = Vec::new();
        encode_command(&mut buf, &refs);
        let n = buf.len();
        buf.extend_from_slice(&tail);
        let (got, used) = parse_request(&buf, &RequestLimits::default()).unwrap().unwrap();
        prop_assert_eq!(used, n);
        prop_assert_eq!(got, args);
    }

    #[test]
    fn inline_words_quoted_parse_back(
        words in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 1..6),
    ) {
        // Each word in double quotes, every byte as \xHH.
        let mut line = Vec::new();
        for w in &words {
            line.extend_from_slice(b" \"");
            for b in w {
                line.extend_from_slice(format!("\\x{b:02x}").as_bytes());
            }
            line.push(b'"');
        }
        line.extend_from_slice(b"\r\n");
        let (got, used) = parse_request(&line, &RequestLimits::default()).unwrap().unwrap();
        prop_assert_eq!(used, line.len());
        prop_assert_eq!(got, words);
    }

    #[test]
    fn doubles_written_as_redis_does_parse_back_exactly(bits in any::<u64>()) {
        let d = f64::from_bits(bits);
        prop_assume!(d.is_finite());
        let text = format_double(d);
        prop_assert_eq!(text.parse::<f64>().unwrap().to_bits(), d.to_bits(), "{}", text);
    }
}
