//! Property tests for the RESP request parser (`strata::protocol::resp`).
//!
//! What is held: the parser never panics whatever the bytes; what it returns stays inside the
//! buffer and inside the frame; feeding a buffer in pieces to one `RequestParser` (as the
//! connection loop does) gives exactly what a one-shot parse of the whole buffer gives; encoded
//! requests (multibulk and inline) parse back to their arguments and nothing past them; every
//! error text starts with "Protocol error: ".

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use strata::protocol::{parse_request, Frame, ParseError, Parsed, RequestParser};

const ERR_PREFIX: &str = "Protocol error: ";

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        // Report failures in the test output rather than writing regression files into tests/.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// Encodes `args` as one RESP multibulk request.
fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    test_support::cmd(&args)
}

/// What one parse of the front of a buffer said, with arguments resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Request(Vec<Bytes>, usize),
    Incomplete,
    Error(String),
}

/// Every argument range of a multibulk frame lies inside the frame's `used` bytes.
fn check_ranges(frame: &Frame, used: usize) -> Result<(), TestCaseError> {
    if let Frame::Multi(ranges) = frame {
        for &(a, b) in ranges {
            prop_assert!(
                a <= b && b <= used,
                "range ({}, {}) outside frame of {}",
                a,
                b,
                used
            );
        }
    }
    Ok(())
}

/// A parse error's text starts with the protocol prefix.
fn check_prefix(e: &ParseError) -> Result<(), TestCaseError> {
    prop_assert!(
        e.0.starts_with(ERR_PREFIX),
        "error text {:?} lacks the prefix",
        e.0
    );
    Ok(())
}

/// Checks the invariants of one `parse` result against the buffer it was given and resolves it.
fn check(buf: &[u8], res: Result<Parsed, ParseError>) -> Result<Outcome, TestCaseError> {
    match res {
        Ok(Parsed::Request(frame, used)) => {
            prop_assert!(used > 0, "request consumed 0 bytes");
            prop_assert!(
                used <= buf.len(),
                "consumed {} > buffer length {}",
                used,
                buf.len()
            );
            check_ranges(&frame, used)?;
            let bytes = Bytes::copy_from_slice(&buf[..used]);
            Ok(Outcome::Request(frame.into_args(&bytes), used))
        }
        Ok(Parsed::Incomplete) => Ok(Outcome::Incomplete),
        Err(e) => {
            check_prefix(&e)?;
            prop_assert_eq!(e.to_string(), e.0.to_string());
            Ok(Outcome::Error(e.0.into_owned()))
        }
    }
}

/// One-shot parse of the front of `buf` with a fresh parser.
fn one_shot(buf: &[u8]) -> Result<Outcome, TestCaseError> {
    let out = check(buf, RequestParser::new().parse(buf))?;
    // `parse_request` is the same parse with owned arguments.
    let b = Bytes::copy_from_slice(buf);
    let via_fn = match parse_request(&b) {
        Ok((args, used)) => Outcome::Request(args, used),
        Err(None) => Outcome::Incomplete,
        Err(Some(e)) => Outcome::Error(e.0.into_owned()),
    };
    prop_assert_eq!(
        &out,
        &via_fn,
        "RequestParser::parse and parse_request disagree"
    );
    Ok(out)
}

/// How a buffer ends after every request was taken from its front.
#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    /// This many bytes were left waiting for more input.
    Incomplete(usize),
    Error(String),
}

/// Every request pulled from a buffer (args, bytes used) and how the buffer ended.
type Extracted = (Vec<(Vec<Bytes>, usize)>, End);

/// All requests in `buf`, one-shot parse after one-shot parse, and how the buffer ended.
fn one_shot_all(buf: &[u8]) -> Result<Extracted, TestCaseError> {
    let mut reqs = Vec::new();
    let mut pos = 0;
    loop {
        match one_shot(&buf[pos..])? {
            Outcome::Request(args, used) => {
                reqs.push((args, used));
                pos += used;
            }
            Outcome::Incomplete => return Ok((reqs, End::Incomplete(buf.len() - pos))),
            Outcome::Error(e) => return Ok((reqs, End::Error(e))),
        }
    }
}

/// Chunk sizes: mostly small, sometimes 0 (parse the same bytes again), sometimes large.
fn chunk_sizes() -> impl Strategy<Value = Vec<usize>> {
    vec(
        prop_oneof![3 => 0usize..=4, 3 => 0usize..=40, 1 => 0usize..=700],
        0..48,
    )
}

/// Splits `len` bytes into consecutive prefix lengths following `sizes`; the last one is `len`.
fn prefix_ends(len: usize, sizes: &[usize]) -> Vec<usize> {
    let mut ends = Vec::with_capacity(sizes.len() + 1);
    let mut at = 0;
    for &s in sizes {
        at = (at + s).min(len);
        ends.push(at);
    }
    ends.push(len);
    ends
}

/// The first request as the server finds it: one parser, called on a growing prefix.
fn chunked_first(buf: &[u8], sizes: &[usize]) -> Result<Outcome, TestCaseError> {
    let mut parser = RequestParser::new();
    for end in prefix_ends(buf.len(), sizes) {
        let prefix = &buf[..end];
        match check(prefix, parser.parse(prefix))? {
            Outcome::Incomplete => continue,
            done => return Ok(done),
        }
    }
    Ok(Outcome::Incomplete)
}

/// All requests as the connection loop finds them: bytes arrive in chunks and are appended to
/// one buffer; one parser is called until it says Incomplete; a request's bytes are split off the
/// front of the buffer.
fn chunked_all(buf: &[u8], sizes: &[usize]) -> Result<Extracted, TestCaseError> {
    let mut parser = RequestParser::new();
    let mut inbuf = BytesMut::new();
    let mut reqs = Vec::new();
    let mut fed = 0;
    for end in prefix_ends(buf.len(), sizes) {
        inbuf.extend_from_slice(&buf[fed..end]);
        fed = end;
        loop {
            match parser.parse(&inbuf) {
                Ok(Parsed::Request(frame, used)) => {
                    prop_assert!(used > 0 && used <= inbuf.len());
                    check_ranges(&frame, used)?;
                    let bytes = inbuf.split_to(used).freeze();
                    reqs.push((frame.into_args(&bytes), used));
                }
                Ok(Parsed::Incomplete) => break,
                Err(e) => {
                    check_prefix(&e)?;
                    return Ok((reqs, End::Error(e.0.into_owned())));
                }
            }
        }
    }
    Ok((reqs, End::Incomplete(inbuf.len())))
}

// ---------------------------------------------------------------------------------------------
// Strategies

/// Bytes that matter to RESP, plus anything.
fn resp_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        5 => prop::sample::select(b"*$\r\n- \"'\\x:+\t0".to_vec()),
        4 => b'0'..=b'9',
        2 => b'a'..=b'z',
        2 => any::<u8>(),
    ]
}

fn resp_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(resp_byte(), 0..max)
}

/// A `*N\r\n` or `$N\r\n` line with an interesting N.
fn len_line(prefix: u8) -> impl Strategy<Value = Vec<u8>> {
    let edge = prop::sample::select(vec![
        "0",
        "1",
        "2",
        "3",
        "-1",
        "-0",
        "00",
        "01",
        "+1",
        " 1",
        "1 ",
        "",
        "-",
        "1048576",
        "1048577",
        "536870912",
        "536870913",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "99999999999999999999",
    ])
    .prop_map(|s| s.to_string());
    let num = prop_oneof![3 => edge, 2 => (-3i64..40).prop_map(|n| n.to_string()), 1 => any::<i64>().prop_map(|n| n.to_string())];
    num.prop_map(move |n| {
        let mut v = vec![prefix];
        v.extend_from_slice(n.as_bytes());
        v.extend_from_slice(b"\r\n");
        v
    })
}

/// An inline line of arbitrary RESP-ish bytes (quotes and escapes included).
fn inline_line() -> impl Strategy<Value = Vec<u8>> {
    (
        vec(
            prop_oneof![6 => b'a'..=b'z', 2 => prop::sample::select(b" \t\"'\\x0fA\r".to_vec())],
            0..40,
        ),
        prop::bool::ANY,
    )
        .prop_map(|(mut v, crlf)| {
            if v.first() == Some(&b'*') {
                v[0] = b'a';
            }
            v.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
            v
        })
}

fn small_args() -> impl Strategy<Value = Vec<Vec<u8>>> {
    vec(vec(resp_byte(), 0..24), 0..6)
}

/// A stream of request-like pieces, then maybe damaged: a byte changed, inserted or removed, or
/// the whole cut short. Valid requests, near-valid ones and junk all turn up.
fn resp_stream() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        5 => small_args().prop_map(|a| encode(&a)),
        2 => inline_line(),
        1 => len_line(b'*'),
        1 => len_line(b'$'),
        2 => resp_bytes(24),
    ];
    (
        vec(piece, 1..8),
        prop::option::weighted(0.3, (any::<Index>(), resp_byte())),
        prop::option::weighted(0.2, (any::<Index>(), resp_byte())),
        prop::option::weighted(0.2, any::<Index>()),
        prop::option::weighted(0.2, any::<Index>()),
    )
        .prop_map(|(pieces, replace, insert, remove, truncate)| {
            let mut v: Vec<u8> = pieces.concat();
            if let (Some((i, b)), false) = (replace, v.is_empty()) {
                let i = i.index(v.len());
                v[i] = b;
            }
            if let Some((i, b)) = insert {
                let i = i.index(v.len() + 1);
                v.insert(i, b);
            }
            if let (Some(i), false) = (remove, v.is_empty()) {
                let i = i.index(v.len());
                v.remove(i);
            }
            if let Some(i) = truncate {
                let i = i.index(v.len() + 1);
                v.truncate(i);
            }
            v
        })
}

/// Up to 4096 bytes drawn from `seed`, biased like [`resp_byte`] when `biased`. Expanding a seed
/// is far cheaper than a proptest `vec` of 4096 element strategies (which dominated the run time
/// in debug builds); the length still shrinks, so failures come back short.
fn seeded_bytes() -> impl Strategy<Value = Vec<u8>> {
    (0usize..4096, any::<u64>(), prop::bool::weighted(0.7)).prop_map(|(len, seed, biased)| {
        const SPECIAL: &[u8] = b"*$\r\n- \"'\\x:+\t0";
        let mut x = seed | 1;
        let mut next = move || {
            // xorshift64*
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        (0..len)
            .map(|_| {
                let r = next();
                let b = (r >> 8) as u8;
                if !biased {
                    return b;
                }
                match r % 13 {
                    0..=4 => SPECIAL[(r >> 16) as usize % SPECIAL.len()],
                    5..=8 => b'0' + b % 10,
                    9..=10 => b'a' + b % 26,
                    _ => b,
                }
            })
            .collect()
    })
}

/// Arbitrary input for the no-panic and chunking properties: junk biased toward RESP bytes
/// (short, shrinking element by element, or up to 4096 bytes from a seed), or damaged request
/// streams.
fn any_input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        2 => resp_bytes(256),
        2 => seeded_bytes(),
        4 => resp_stream(),
    ]
}

/// Printable ASCII other than space and quotes.
fn inline_word() -> impl Strategy<Value = Vec<u8>> {
    let chars: Vec<u8> = (0x21u8..=0x7e)
        .filter(|&c| c != b'"' && c != b'\'')
        .collect();
    vec(prop::sample::select(chars), 1..30)
}

// ---------------------------------------------------------------------------------------------
// Properties

proptest! {
    #![proptest_config(config(2000))]

    /// Never panics; a returned request stays within the buffer and its ranges within the frame;
    /// the frame does not depend on anything after it; errors carry the protocol prefix.
    #[test]
    fn arbitrary_bytes_never_panic(buf in any_input()) {
        let out = one_shot(&buf)?;
        if let Outcome::Request(_, used) = &out {
            // Never reads past the frame: the frame's bytes alone give the same request.
            let alone = one_shot(&buf[..*used])?;
            prop_assert_eq!(&alone, &out, "parse differs on the frame's own bytes");
        }
        // Every request in the buffer, one after another.
        one_shot_all(&buf)?;
    }

}

proptest! {
    #![proptest_config(config(1000))]

    /// Every error, whatever produced it, starts with "Protocol error: ".
    #[test]
    fn errors_are_stable(buf in any_input(), sizes in chunk_sizes()) {
        if let (_, End::Error(e)) = one_shot_all(&buf)? {
            prop_assert!(e.starts_with(ERR_PREFIX), "{:?}", e);
            // The same bytes give the same text again.
            prop_assert_eq!(one_shot_all(&buf)?.1, End::Error(e.clone()));
        }
        if let (_, End::Error(e)) = chunked_all(&buf, &sizes)? {
            prop_assert!(e.starts_with(ERR_PREFIX), "{:?}", e);
        }
    }

}

proptest! {
    #![proptest_config(config(1500))]

    /// One parser on a growing prefix finds what a one-shot parse of the whole buffer finds.
    #[test]
    fn chunked_first_request_matches_one_shot(buf in any_input(), sizes in chunk_sizes()) {
        let whole = one_shot(&buf)?;
        let pieces = chunked_first(&buf, &sizes)?;
        prop_assert_eq!(pieces, whole);
    }

    /// The connection loop (append chunks, parse until Incomplete, split requests off the front)
    /// sees the same requests and the same ending as one-shot parses of the whole buffer.
    #[test]
    fn chunked_stream_matches_one_shot(buf in any_input(), sizes in chunk_sizes()) {
        let whole = one_shot_all(&buf)?;
        let pieces = chunked_all(&buf, &sizes)?;
        prop_assert_eq!(pieces, whole);
    }

}

proptest! {
    #![proptest_config(config(1000))]

    /// Byte-at-a-time delivery of request streams (the worst case for resumption).
    #[test]
    fn byte_at_a_time_matches_one_shot(buf in resp_stream()) {
        let whole = one_shot_all(&buf)?;
        let sizes = vec![1; buf.len()];
        prop_assert_eq!(chunked_all(&buf, &sizes)?, whole.clone());
        prop_assert_eq!(chunked_first(&buf, &sizes)?, one_shot(&buf)?);
    }
}

proptest! {
    #![proptest_config(config(1000))]

    /// Encoded multibulk requests parse back to exactly their arguments, and nothing after the
    /// frame is read.
    #[test]
    fn multibulk_round_trip(
        args in vec(vec(any::<u8>(), 0..300), 1..20),
        trailing in vec(any::<u8>(), 0..200),
        sizes in chunk_sizes(),
    ) {
        let enc = encode(&args);
        let want: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();

        let out = one_shot(&enc)?;
        prop_assert_eq!(&out, &Outcome::Request(want.clone(), enc.len()));
        match RequestParser::new().parse(&enc) {
            Ok(Parsed::Request(Frame::Multi(ranges), _)) => prop_assert_eq!(ranges.len(), args.len()),
            other => prop_assert!(false, "expected a multibulk frame, got {:?}", other),
        }

        // Anything after the frame changes nothing.
        let mut more = enc.clone();
        more.extend_from_slice(&trailing);
        prop_assert_eq!(one_shot(&more)?, out.clone());

        // Cut anywhere short of the end, it is incomplete.
        for cut in [0, 1, enc.len() / 2, enc.len() - 2, enc.len() - 1] {
            prop_assert_eq!(one_shot(&enc[..cut])?, Outcome::Incomplete, "cut at {}", cut);
        }

        // And in pieces it is the same request.
        prop_assert_eq!(chunked_first(&more, &sizes)?, out);
    }

    /// Several encoded requests back to back parse back one by one, in one buffer or in pieces.
    #[test]
    fn concatenated_requests_round_trip(
        reqs in vec(vec(vec(any::<u8>(), 0..60), 1..8), 1..8),
        sizes in chunk_sizes(),
    ) {
        let encoded: Vec<Vec<u8>> = reqs.iter().map(|r| encode(r)).collect();
        let stream: Vec<u8> = encoded.concat();
        let want: Vec<(Vec<Bytes>, usize)> = reqs
            .iter()
            .zip(&encoded)
            .map(|(r, e)| (r.iter().map(|a| Bytes::copy_from_slice(a)).collect(), e.len()))
            .collect();

        let mut rest = Bytes::from(stream.clone());
        for (args, len) in &want {
            let (got, used) = parse_request(&rest).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            prop_assert_eq!(&got, args);
            prop_assert_eq!(used, *len);
            rest = rest.slice(used..);
        }
        prop_assert!(rest.is_empty());

        prop_assert_eq!(one_shot_all(&stream)?, (want.clone(), End::Incomplete(0)));
        prop_assert_eq!(chunked_all(&stream, &sizes)?, (want, End::Incomplete(0)));
    }

    /// Inline commands: words joined by spaces and ended by CRLF parse back to the words.
    #[test]
    fn inline_round_trip(
        words in vec(inline_word(), 1..12),
        seps in vec(prop::sample::select(vec![&b" "[..], b"  ", b"\t", b" \t "]), 11),
        lead in prop::sample::select(vec![&b""[..], b" ", b"\t"]),
        lf_only in prop::bool::weighted(0.2),
        trailing in vec(any::<u8>(), 0..40),
        sizes in chunk_sizes(),
    ) {
        let mut words = words;
        // A leading '*' would make it a multibulk request.
        if words[0][0] == b'*' {
            words[0][0] = b'x';
        }
        let want: Vec<Bytes> = words.iter().map(|w| Bytes::copy_from_slice(w)).collect();

        // Exactly as specified: single spaces and CRLF.
        let mut plain = words.join(&b' ');
        plain.extend_from_slice(b"\r\n");
        let out = one_shot(&plain)?;
        prop_assert_eq!(&out, &Outcome::Request(want.clone(), plain.len()));
        prop_assert!(matches!(RequestParser::new().parse(&plain), Ok(Parsed::Request(Frame::Inline(_), _))));

        // Other whitespace, a bare LF, and bytes after the line change nothing but the length.
        let mut line = lead.to_vec();
        for (i, w) in words.iter().enumerate() {
            if i > 0 {
                line.extend_from_slice(seps[i - 1]);
            }
            line.extend_from_slice(w);
        }
        line.extend_from_slice(if lf_only { b"\n" } else { b"\r\n" });
        let len = line.len();
        line.extend_from_slice(&trailing);
        prop_assert_eq!(one_shot(&line)?, Outcome::Request(want.clone(), len));
        prop_assert_eq!(chunked_first(&line, &sizes)?, Outcome::Request(want, len));

        // Without its line end it is incomplete.
        prop_assert_eq!(one_shot(&plain[..plain.len() - 1])?, Outcome::Incomplete);
        prop_assert_eq!(one_shot(&plain[..plain.len() - 2])?, Outcome::Incomplete);
    }
}
