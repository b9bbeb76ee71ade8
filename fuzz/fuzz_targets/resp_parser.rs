//! Fuzzes the RESP request parser the way the connection loop drives it.
//!
//! The first input byte picks where the rest is cut into two chunks. The chunks are appended to
//! one buffer and one `RequestParser` is called on it after each (and once more with nothing new),
//! splitting every request off the front, as `net::connection` does. Checked:
//! - nothing panics;
//! - a request consumes at least one byte and no more than the buffer holds, and every multibulk
//!   argument range `(a, b)` has `a <= b <= consumed`;
//! - a request's own bytes, parsed alone, give the same request (it never reads past its frame);
//! - every error text starts with "Protocol error: ";
//! - the requests and the ending (bytes left over, or the error) are those that one-shot parses
//!   of the whole input give.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use strata::protocol::{Frame, ParseError, Parsed, RequestParser, MAX_INLINE_LEN};

#[derive(Debug, PartialEq, Eq)]
enum End {
    Incomplete(usize),
    Error(String),
}

type Requests = Vec<(Vec<Bytes>, usize)>;

/// Checks one parse result against the buffer it saw; returns the request's arguments.
fn check(buf: &[u8], res: &Result<Parsed, ParseError>) {
    match res {
        Ok(Parsed::Request(frame, used)) => {
            assert!(*used > 0, "request consumed 0 bytes");
            assert!(
                *used <= buf.len(),
                "consumed {used} > buffer length {}",
                buf.len()
            );
            if let Frame::Multi(ranges) = frame {
                for &(a, b) in ranges {
                    assert!(
                        a <= b && b <= *used,
                        "range ({a}, {b}) outside frame of {used}"
                    );
                }
            }
        }
        Ok(Parsed::Incomplete) => {}
        Err(e) => assert!(e.0.starts_with("Protocol error: "), "error text {:?}", e.0),
    }
}

/// Every request in `input` by one-shot parses (a fresh parser each time).
fn one_shot(input: &[u8]) -> (Requests, End) {
    let mut reqs = Vec::new();
    let mut pos = 0;
    loop {
        let buf = &input[pos..];
        let res = RequestParser::new().parse(buf);
        check(buf, &res);
        match res {
            Ok(Parsed::Request(frame, used)) => {
                // The frame's bytes alone give the same frame.
                let alone = RequestParser::new().parse(&buf[..used]);
                match &alone {
                    Ok(Parsed::Request(f, u)) => {
                        assert_eq!(
                            (f, *u),
                            (&frame, used),
                            "frame changes without the bytes after it"
                        )
                    }
                    other => panic!(
                        "frame's own bytes parse as {other:?}, whole buffer as a request of {used}"
                    ),
                }
                let bytes = Bytes::copy_from_slice(&buf[..used]);
                reqs.push((frame.into_args(&bytes), used));
                pos += used;
            }
            Ok(Parsed::Incomplete) => return (reqs, End::Incomplete(input.len() - pos)),
            Err(e) => return (reqs, End::Error(e.0.into_owned())),
        }
    }
}

/// Every request in `input` fed as `chunks` to one parser, as the server does.
fn chunked(chunks: &[&[u8]]) -> (Requests, End) {
    let mut parser = RequestParser::new();
    let mut inbuf = BytesMut::new();
    let mut reqs = Vec::new();
    for chunk in chunks {
        inbuf.extend_from_slice(chunk);
        loop {
            let res = parser.parse(&inbuf);
            check(&inbuf, &res);
            match res {
                Ok(Parsed::Request(frame, used)) => {
                    let bytes = inbuf.split_to(used).freeze();
                    reqs.push((frame.into_args(&bytes), used));
                }
                Ok(Parsed::Incomplete) => break,
                Err(e) => return (reqs, End::Error(e.0.into_owned())),
            }
        }
    }
    (reqs, End::Incomplete(inbuf.len()))
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, input)) = data.split_first() else {
        return;
    };
    let split = cut as usize * input.len() / 255;
    let (a, b) = input.split_at(split);

    let whole = one_shot(input);
    // Two chunks, then a call with nothing new (the parser must keep its place).
    let pieces = chunked(&[a, b, &[]]);
    // Past MAX_INLINE_LEN the "line too long" checks depend on where reads end (as in Redis), so
    // only the invariants above are held there.
    if input.len() <= MAX_INLINE_LEN {
        assert_eq!(pieces, whole, "chunked at {split} differs from one-shot");
    }
});
