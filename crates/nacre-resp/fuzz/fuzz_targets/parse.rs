//! `cargo +nightly fuzz run parse`: every parser of nacre-resp on arbitrary bytes. None may
//! panic; whatever parses must use no more bytes than it was given and stay within the
//! limits; the stream parser must agree with the one-shot parser.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nacre_resp::{parse_request, parse_with, Limits, Parser, RequestLimits};

const LIMITS: Limits = Limits {
    max_bulk: 1 << 16,
    max_elements: 1 << 10,
    max_depth: 16,
    max_line: 1 << 12,
};

fuzz_target!(|data: &[u8]| {
    let whole = parse_with(data, &LIMITS);
    if let Ok(Some((_, used))) = &whole {
        assert!(*used > 0 && *used <= data.len());
    }
    // The stream parser, fed one byte more at a time, agrees.
    let mut p = Parser::with_limits(LIMITS);
    let mut at = 0;
    for end in 1..=data.len() {
        match p.feed(&data[at..end]) {
            Ok((used, Some(r))) => {
                at += used;
                if let Ok(Some((w, n))) = &whole {
                    assert_eq!(w, &r);
                    assert_eq!(*n, at);
                } else {
                    panic!("stream parsed {r:?}, one-shot {whole:?}");
                }
                break;
            }
            Ok((used, None)) => at += used,
            Err(_) => {
                assert!(whole.is_err(), "stream failed, one-shot {whole:?}");
                break;
            }
        }
    }
    for authenticated in [false, true] {
        let limits = RequestLimits {
            max_bulk: 1 << 16,
            authenticated,
        };
        if let Ok(Some((args, used))) = parse_request(data, &limits) {
            assert!(used > 0 && used <= data.len());
            assert!(args.iter().all(|a| a.len() <= 1 << 16));
        }
    }
});
