//! Bitmap commands against the real binary, checked against Redis 7's replies: SETBIT and
//! GETBIT, BITCOUNT and BITPOS with byte and bit ranges, BITOP (on one shard and across
//! shards), BITFIELD and BITFIELD_RO with every type, offset form and overflow rule, the
//! 512 MB limit, and bitmaps whose values sit on SSD.
//!
//! Error texts and reply types are checked byte for byte on a raw connection; bulk data goes
//! through the raw connection's bytes or the `redis` crate.
mod common;

use common::*;
use redis::Connection;

const BIT_OFFSET: &str = "-ERR bit offset is not an integer or out of range\r\n";
const BIT_VALUE: &str = "-ERR bit is not an integer or out of range\r\n";
const FIELD_TYPE: &str = "-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n";

/// Sends a command of byte arguments and asserts its reply.
fn rb(raw: &mut Raw, args: &[&[u8]], want: &[u8]) {
    raw.expect_cmd(args, want);
}

/// An array of integer replies (None: nil).
fn ints(v: &[Option<i64>]) -> String {
    let items: Vec<String> = v.iter().map(|n| n.map_or(NIL.to_string(), i)).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    arr(&refs)
}

// ---------------------------------------------------------------------------------------------
// SETBIT / GETBIT
// ---------------------------------------------------------------------------------------------

#[test]
fn setbit_and_getbit() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["GETBIT", "k", "0"], &i(0));
    rt(&mut raw, &["SETBIT", "k", "7", "1"], &i(0));
    rt(&mut raw, &["SETBIT", "k", "7", "1"], &i(1));
    rt(&mut raw, &["GET", "k"], &b("\x01"));
    rt(&mut raw, &["SETBIT", "k", "1", "1"], &i(0));
    rt(&mut raw, &["GET", "k"], &b("A"));
    // Writing past the end pads with zero bytes.
    rt(&mut raw, &["SETBIT", "k", "23", "1"], &i(0));
    rb(&mut raw, &[b"GET", b"k"], &bulk(b"A\x00\x01"));
    rt(&mut raw, &["STRLEN", "k"], &i(3));
    rt(&mut raw, &["SETBIT", "k", "23", "0"], &i(1));
    rb(&mut raw, &[b"GET", b"k"], &bulk(b"A\x00\x00"));
    // Clearing a bit past the end still grows the string.
    rt(&mut raw, &["SETBIT", "k", "39", "0"], &i(0));
    rt(&mut raw, &["STRLEN", "k"], &i(5));
    for (off, want) in [
        ("0", 0),
        ("1", 1),
        ("7", 1),
        ("8", 0),
        ("23", 0),
        ("100", 0),
    ] {
        rt(&mut raw, &["GETBIT", "k", off], &i(want));
    }
    rt(&mut raw, &["GETBIT", "k", "4294967295"], &i(0));
    // Bits of a string set as text.
    rt(&mut raw, &["SET", "t", "`"], OK);
    rt(&mut raw, &["GETBIT", "t", "1"], &i(1));
    rt(&mut raw, &["GETBIT", "t", "2"], &i(1));
    rt(&mut raw, &["GETBIT", "t", "3"], &i(0));
    rt(&mut raw, &["SET", "n", "12"], OK);
    rt(&mut raw, &["GETBIT", "n", "2"], &i(1));
}

/// Writes count in rdb_changes_since_last_save only when they change something, as in Redis'
/// "SETBIT/BITFIELD only increase dirty when the value changed" (unit/bitops.tcl).
#[test]
fn bit_writes_count_as_changes_only_when_they_change_something() {
    let s = server();
    let mut c = s.client();
    let changes = |c: &mut Connection, cmds: &[&[&str]]| {
        let before = info_u64(c, "persistence", "rdb_changes_since_last_save");
        for cmd in cmds {
            let _: redis::Value = redis::cmd(cmd[0]).arg(&cmd[1..]).query(c).unwrap();
        }
        info_u64(c, "persistence", "rdb_changes_since_last_save") - before
    };
    let set0: &[&str] = &["SETBIT", "foo", "0", "0"];
    let set1: &[&str] = &["SETBIT", "foo", "0", "1"];
    let field0: &[&str] = &["BITFIELD", "foo2", "SET", "i5", "0", "0"];
    let field1: &[&str] = &["BITFIELD", "foo2", "SET", "i5", "0", "1"];
    // New keys always count.
    assert_eq!(changes(&mut c, &[set0, field0]), 2);
    assert_eq!(changes(&mut c, &[set0, field0]), 0);
    assert_eq!(
        changes(
            &mut c,
            &[set1, set1, set0, set0, field1, field1, field0, field0]
        ),
        4
    );
    let incr: &[&str] = &["BITFIELD", "foo3", "INCRBY", "i5", "0", "1"];
    assert_eq!(changes(&mut c, &[incr, incr]), 2);
    // A longer string is a change, even with the same bits.
    assert_eq!(
        changes(
            &mut c,
            &[
                &["SETBIT", "foo", "90", "0"],
                &["BITFIELD", "foo2", "SET", "i5", "90", "0"]
            ]
        ),
        2
    );
    // One BITFIELD counts each field it changed; a FAIL counts nothing.
    let three: &[&str] = &[
        "BITFIELD", "foo3", "SET", "u8", "0", "1", "SET", "u8", "8", "2", "GET", "u8", "0",
    ];
    assert_eq!(changes(&mut c, &[three]), 2);
    let fail: &[&str] = &[
        "BITFIELD", "foo3", "OVERFLOW", "FAIL", "INCRBY", "u2", "0", "9",
    ];
    assert_eq!(changes(&mut c, &[fail]), 0);
    // BITOP counts its store, or the delete of a key that was there.
    let _: () = redis::cmd("SET")
        .arg("empty")
        .arg("")
        .query(&mut c)
        .unwrap();
    let op: &[&str] = &["BITOP", "OR", "dest", "foo"];
    let op_empty: &[&str] = &["BITOP", "OR", "dest", "empty"];
    assert_eq!(changes(&mut c, &[op, op_empty, op_empty]), 2);
}

#[test]
fn setbit_keeps_the_ttl_and_makes_the_string_raw() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "k", "12", "EX", "100"], OK);
    rt(&mut raw, &["OBJECT", "ENCODING", "k"], &b("int"));
    // Even a SETBIT that changes nothing leaves the string raw, as in Redis.
    rt(&mut raw, &["SETBIT", "k", "2", "1"], &i(1));
    rt(&mut raw, &["OBJECT", "ENCODING", "k"], &b("raw"));
    rt(&mut raw, &["SETBIT", "k", "0", "1"], &i(0));
    rt(&mut raw, &["TTL", "k"], &i(100));
    rb(&mut raw, &[b"GET", b"k"], &bulk(b"\xb12"));
}

#[test]
fn setbit_and_getbit_errors() {
    let s = server();
    let mut raw = s.raw();
    for off in [
        "-1",
        "4294967296",
        "abc",
        "",
        "1.5",
        "0x10",
        "99999999999999999999",
    ] {
        rt(&mut raw, &["SETBIT", "k", off, "1"], BIT_OFFSET);
        rt(&mut raw, &["GETBIT", "k", off], BIT_OFFSET);
    }
    for bit in ["2", "-1", "x", "", "01", "1 "] {
        rt(&mut raw, &["SETBIT", "k", "0", bit], BIT_VALUE);
    }
    // The offset is checked before the bit.
    rt(&mut raw, &["SETBIT", "k", "-1", "2"], BIT_OFFSET);
    rt(&mut raw, &["EXISTS", "k"], &i(0));
    rt(&mut raw, &["SETBIT", "k", "0"], &wrong_args("setbit"));
    rt(
        &mut raw,
        &["SETBIT", "k", "0", "1", "1"],
        &wrong_args("setbit"),
    );
    rt(&mut raw, &["GETBIT", "k"], &wrong_args("getbit"));
    rt(&mut raw, &["GETBIT", "k", "0", "0"], &wrong_args("getbit"));
}

// ---------------------------------------------------------------------------------------------
// BITCOUNT / BITPOS
// ---------------------------------------------------------------------------------------------

#[test]
fn bitcount_ranges_in_bytes_and_bits() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["BITCOUNT", "missing"], &i(0));
    rt(&mut raw, &["SET", "k", "foobar"], OK);
    rt(&mut raw, &["BITCOUNT", "k"], &i(26));
    rt(&mut raw, &["BITCOUNT", "k", "0", "0"], &i(4));
    rt(&mut raw, &["BITCOUNT", "k", "1", "1"], &i(6));
    rt(&mut raw, &["BITCOUNT", "k", "1", "1", "BYTE"], &i(6));
    rt(&mut raw, &["BITCOUNT", "k", "5", "30", "BIT"], &i(17));
    rt(&mut raw, &["BITCOUNT", "k", "5", "30", "bit"], &i(17));
    rt(&mut raw, &["BITCOUNT", "k", "0", "-1"], &i(26));
    rt(&mut raw, &["BITCOUNT", "k", "-2", "-1"], &i(7));
    rt(&mut raw, &["BITCOUNT", "k", "-100", "100"], &i(26));
    rt(&mut raw, &["BITCOUNT", "k", "3", "2"], &i(0));
    rt(&mut raw, &["BITCOUNT", "k", "-1", "-2"], &i(0));
    rt(&mut raw, &["BITCOUNT", "k", "0", "-1", "BIT"], &i(26));
    rt(&mut raw, &["BITCOUNT", "k", "1", "1", "BIT"], &i(1));
    rt(&mut raw, &["BITCOUNT", "k", "47", "47", "BIT"], &i(0));
    rt(&mut raw, &["BITCOUNT", "k", "-9", "-1", "BIT"], &i(5));
    rt(&mut raw, &["SET", "e", ""], OK);
    rt(&mut raw, &["BITCOUNT", "e"], &i(0));
    rt(&mut raw, &["BITCOUNT", "e", "0", "-1", "BIT"], &i(0));
    // Errors: a lone start, a bad unit, extra arguments, non-integers. A missing key answers 0
    // before its arguments are read; negative start > end answers 0 before the unit.
    rt(&mut raw, &["BITCOUNT", "k", "0"], SYNTAX);
    rt(&mut raw, &["BITCOUNT", "k", "0", "1", "BITS"], SYNTAX);
    rt(&mut raw, &["BITCOUNT", "k", "0", "1", "BIT", "x"], SYNTAX);
    rt(&mut raw, &["BITCOUNT", "k", "a", "1"], NOT_INT);
    rt(&mut raw, &["BITCOUNT", "k", "0", "b"], NOT_INT);
    rt(&mut raw, &["BITCOUNT", "missing", "0"], &i(0));
    rt(&mut raw, &["BITCOUNT", "missing", "a", "b", "c"], &i(0));
    rt(&mut raw, &["BITCOUNT", "k", "-1", "-2", "junk"], &i(0));
    rt(&mut raw, &["BITCOUNT"], &wrong_args("bitcount"));
}

#[test]
fn bitpos_finds_set_and_clear_bits() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["BITPOS", "missing", "0"], &i(0));
    rt(&mut raw, &["BITPOS", "missing", "1"], &i(-1));
    rb(&mut raw, &[b"SET", b"k", b"\xff\xf0\x00"], OK.as_bytes());
    rt(&mut raw, &["BITPOS", "k", "0"], &i(12));
    rb(&mut raw, &[b"SET", b"k", b"\x00\xff\xf0"], OK.as_bytes());
    rt(&mut raw, &["BITPOS", "k", "1", "0"], &i(8));
    rt(&mut raw, &["BITPOS", "k", "1", "2"], &i(16));
    rt(&mut raw, &["BITPOS", "k", "1", "2", "-1", "BYTE"], &i(16));
    rt(&mut raw, &["BITPOS", "k", "1", "7", "15", "BIT"], &i(8));
    rt(&mut raw, &["BITPOS", "k", "0", "8", "-1", "BIT"], &i(20));
    rb(&mut raw, &[b"SET", b"z", b"\x00\x00\x00"], OK.as_bytes());
    rt(&mut raw, &["BITPOS", "z", "1"], &i(-1));
    rt(&mut raw, &["BITPOS", "z", "1", "7", "-3", "BIT"], &i(-1));
    // All ones: without an end, the zero padding after the string counts; with one, not.
    rb(&mut raw, &[b"SET", b"f", b"\xff\xff"], OK.as_bytes());
    rt(&mut raw, &["BITPOS", "f", "0"], &i(16));
    rt(&mut raw, &["BITPOS", "f", "0", "1"], &i(16));
    rt(&mut raw, &["BITPOS", "f", "0", "0", "-1"], &i(-1));
    rt(&mut raw, &["BITPOS", "f", "0", "3", "12", "BIT"], &i(-1));
    rt(&mut raw, &["BITPOS", "f", "1", "3", "12", "BIT"], &i(3));
    rt(&mut raw, &["BITPOS", "f", "1", "5", "3"], &i(-1));
    rt(&mut raw, &["SET", "e", ""], OK);
    rt(&mut raw, &["BITPOS", "e", "0"], &i(-1));
    // Errors: the bit is read first, then the key, then the range (unit before end).
    rt(
        &mut raw,
        &["BITPOS", "k", "2"],
        &e("ERR The bit argument must be 1 or 0."),
    );
    rt(&mut raw, &["BITPOS", "missing", "x"], NOT_INT);
    rt(
        &mut raw,
        &["BITPOS", "missing", "1", "x", "y", "z", "w"],
        &i(-1),
    );
    rt(&mut raw, &["BITPOS", "k", "1", "x"], NOT_INT);
    rt(&mut raw, &["BITPOS", "k", "1", "0", "x"], NOT_INT);
    rt(&mut raw, &["BITPOS", "k", "1", "0", "x", "BITS"], SYNTAX);
    rt(
        &mut raw,
        &["BITPOS", "k", "1", "0", "1", "BIT", "x"],
        SYNTAX,
    );
    rt(&mut raw, &["BITPOS", "k"], &wrong_args("bitpos"));
}

// ---------------------------------------------------------------------------------------------
// BITOP
// ---------------------------------------------------------------------------------------------

#[test]
fn bitop_and_or_xor_not() {
    let s = server_with_threads(1);
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "a", "foobar"], OK);
    rt(&mut raw, &["SET", "b", "abcdef"], OK);
    rt(&mut raw, &["BITOP", "AND", "d", "a", "b"], &i(6));
    rt(&mut raw, &["GET", "d"], &b("`bc`ab"));
    rt(&mut raw, &["BITOP", "or", "d", "a", "b"], &i(6));
    rt(&mut raw, &["GET", "d"], &b("goofev"));
    rt(&mut raw, &["BITOP", "XOR", "d", "a", "b"], &i(6));
    rb(
        &mut raw,
        &[b"GET", b"d"],
        &bulk(b"\x07\x0d\x0c\x06\x04\x14"),
    );
    rb(&mut raw, &[b"SET", b"n", b"\x0f\xf0"], OK.as_bytes());
    rt(&mut raw, &["BITOP", "NOT", "d", "n"], &i(2));
    rb(&mut raw, &[b"GET", b"d"], &bulk(b"\xf0\x0f"));
    // Shorter sources and missing keys read as zero bytes.
    rt(&mut raw, &["SET", "short", "\u{7f}"], OK);
    rt(&mut raw, &["BITOP", "AND", "d", "a", "short"], &i(6));
    rb(&mut raw, &[b"GET", b"d"], &bulk(b"f\0\0\0\0\0"));
    rt(&mut raw, &["BITOP", "OR", "d", "short", "missing"], &i(1));
    rt(&mut raw, &["BITOP", "AND", "d", "missing", "a"], &i(6));
    rb(&mut raw, &[b"GET", b"d"], &bulk(&[0; 6]));
    rt(&mut raw, &["BITOP", "XOR", "d", "a", "a", "a"], &i(6));
    rt(&mut raw, &["GET", "d"], &b("foobar"));
    // The destination may be a source; its TTL goes with the old value.
    rt(&mut raw, &["EXPIRE", "d", "100"], &i(1));
    rt(&mut raw, &["BITOP", "AND", "d", "d", "b"], &i(6));
    rt(&mut raw, &["TTL", "d"], &i(-1));
    rt(&mut raw, &["OBJECT", "ENCODING", "d"], &b("raw"));
    // An empty result deletes the destination.
    rt(
        &mut raw,
        &["BITOP", "OR", "d", "missing", "missing2"],
        &i(0),
    );
    rt(&mut raw, &["EXISTS", "d"], &i(0));
    rt(&mut raw, &["SET", "e", ""], OK);
    rt(&mut raw, &["SET", "d", "x"], OK);
    rt(&mut raw, &["BITOP", "NOT", "d", "e"], &i(0));
    rt(&mut raw, &["EXISTS", "d"], &i(0));
}

#[test]
fn bitop_errors() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["BITOP", "NAND", "d", "a"], SYNTAX);
    rt(&mut raw, &["BITOP", "", "d", "a"], SYNTAX);
    let not = e("ERR BITOP NOT must be called with a single source key.");
    rt(&mut raw, &["BITOP", "NOT", "d", "a", "b"], &not);
    rt(&mut raw, &["BITOP", "not", "d", "a", "b", "c"], &not);
    rt(&mut raw, &["BITOP", "AND", "d"], &wrong_args("bitop"));
    rt(&mut raw, &["BITOP", "AND"], &wrong_args("bitop"));
}

#[test]
fn bitop_across_shards_is_the_same_as_on_one() {
    let s = server();
    let mut raw = s.raw();
    let (a, b_) = keys_on_different_shards("src", 2);
    let (d1, d2) = keys_on_different_shards("dst", 2);
    rb(
        &mut raw,
        &[b"SET", a.as_bytes(), b"\x01\x02\x03\xff"],
        OK.as_bytes(),
    );
    rb(
        &mut raw,
        &[b"SET", b_.as_bytes(), b"\xf0\x0f"],
        OK.as_bytes(),
    );
    rb(
        &mut raw,
        &[b"SET", b"{t}a", b"\x01\x02\x03\xff"],
        OK.as_bytes(),
    );
    rb(&mut raw, &[b"SET", b"{t}b", b"\xf0\x0f"], OK.as_bytes());
    for (op, want) in [
        // AND with a missing key: all zeros.
        ("AND", &b"\x00\x00\x00\x00"[..]),
        ("OR", b"\xf1\x0f\x03\xff"),
        ("XOR", b"\xf1\x0d\x03\xff"),
    ] {
        for d in [&d1, &d2] {
            rt(&mut raw, &["BITOP", op, d, &a, &b_, "missing"], &i(4));
            rb(&mut raw, &[b"GET", d.as_bytes()], &bulk(want));
        }
        rt(
            &mut raw,
            &["BITOP", op, "{t}d", "{t}a", "{t}b", "{t}missing"],
            &i(4),
        );
        rb(&mut raw, &[b"GET", b"{t}d"], &bulk(want));
    }
    rt(&mut raw, &["BITOP", "NOT", &d1, &b_], &i(2));
    rt(&mut raw, &["BITOP", "NOT", &d2, &b_], &i(2));
    rb(&mut raw, &[b"GET", d2.as_bytes()], &bulk(b"\x0f\xf0"));
    // The destination among the sources, and an empty result deleting across shards.
    rt(&mut raw, &["BITOP", "OR", &d1, &d1, &a], &i(4));
    rb(
        &mut raw,
        &[b"GET", d1.as_bytes()],
        &bulk(b"\x0f\xf2\x03\xff"),
    );
    rt(
        &mut raw,
        &["BITOP", "AND", &d1, "nokey1", "nokey2", "nokey3"],
        &i(0),
    );
    rt(&mut raw, &["EXISTS", &d1], &i(0));
    rt(&mut raw, &["BITOP", "XOR", &d2, &a, "x"], &i(4));
    rt(&mut raw, &["BITOP", "NOPE", &d2, &a, &b_], SYNTAX);
}

// ---------------------------------------------------------------------------------------------
// BITFIELD / BITFIELD_RO
// ---------------------------------------------------------------------------------------------

#[test]
fn bitfield_get_set_incrby() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["BITFIELD", "k"], "*0\r\n");
    rt(&mut raw, &["EXISTS", "k"], &i(0));
    rt(
        &mut raw,
        &["BITFIELD", "k", "GET", "u8", "0"],
        &ints(&[Some(0)]),
    );
    rt(&mut raw, &["EXISTS", "k"], &i(0));
    rt(
        &mut raw,
        &[
            "BITFIELD", "k", "INCRBY", "i5", "100", "1", "GET", "u4", "0",
        ],
        &ints(&[Some(1), Some(0)]),
    );
    rt(&mut raw, &["STRLEN", "k"], &i(14));
    rt(
        &mut raw,
        &[
            "BITFIELD", "k", "SET", "u8", "0", "255", "GET", "u8", "0", "GET", "i8", "0",
        ],
        &ints(&[Some(0), Some(255), Some(-1)]),
    );
    // SET answers the old value, INCRBY the new one; `#N` counts fields of the type's width.
    rt(
        &mut raw,
        &[
            "BITFIELD", "w", "SET", "i8", "#0", "100", "SET", "i8", "#1", "-100", "GET", "i16", "0",
        ],
        &ints(&[Some(0), Some(0), Some(25756)]),
    );
    rb(&mut raw, &[b"GET", b"w"], &bulk(b"\x64\x9c"));
    rt(
        &mut raw,
        &[
            "BITFIELD", "w", "INCRBY", "i8", "#1", "-28", "GET", "u8", "8",
        ],
        &ints(&[Some(-128), Some(128)]),
    );
    // Fields across byte boundaries, and the widest types.
    rt(
        &mut raw,
        &["BITFIELD", "x", "SET", "u5", "7", "23"],
        &ints(&[Some(0)]),
    );
    rb(&mut raw, &[b"GET", b"x"], &bulk(b"\x01\x70"));
    rt(
        &mut raw,
        &[
            "BITFIELD",
            "x2",
            "SET",
            "i64",
            "3",
            "-9223372036854775808",
            "GET",
            "i64",
            "3",
            "GET",
            "u63",
            "3",
        ],
        &ints(&[Some(0), Some(i64::MIN), Some(1 << 62)]),
    );
    rt(
        &mut raw,
        &[
            "BITFIELD",
            "x3",
            "SET",
            "u63",
            "0",
            "9223372036854775807",
            "GET",
            "u63",
            "0",
        ],
        &ints(&[Some(0), Some(i64::MAX)]),
    );
    // GETs past the end read zeros, and never grow the string.
    rt(&mut raw, &["STRLEN", "x2"], &i(9));
    rt(
        &mut raw,
        &["BITFIELD", "x2", "GET", "u8", "1000"],
        &ints(&[Some(0)]),
    );
    rt(&mut raw, &["STRLEN", "x2"], &i(9));
    // Case-insensitive subcommands and types' offsets.
    rt(
        &mut raw,
        &["bitfield", "y", "set", "u8", "#2", "7", "get", "u8", "16"],
        &ints(&[Some(0), Some(7)]),
    );
}

#[test]
fn bitfield_overflow_wrap_sat_fail() {
    let s = server();
    let mut raw = s.raw();
    let incr = |raw: &mut Raw, want: &[Option<i64>]| {
        rt(
            raw,
            &[
                "BITFIELD", "k", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "u2",
                "102", "1",
            ],
            &ints(want),
        );
    };
    incr(&mut raw, &[Some(1), Some(1)]);
    incr(&mut raw, &[Some(2), Some(2)]);
    incr(&mut raw, &[Some(3), Some(3)]);
    incr(&mut raw, &[Some(0), Some(3)]);
    rt(
        &mut raw,
        &[
            "BITFIELD", "k", "OVERFLOW", "FAIL", "INCRBY", "u2", "102", "1",
        ],
        &ints(&[None]),
    );
    rt(
        &mut raw,
        &[
            "BITFIELD", "k", "OVERFLOW", "fail", "INCRBY", "u2", "102", "-1",
        ],
        &ints(&[Some(2)]),
    );
    // Signed: wrap to the most negative, saturate at the bounds, fail with nil.
    let cases: &[(&str, &str, &str, &str, Option<i64>)] = &[
        ("WRAP", "SET", "i8", "200", Some(0)),
        ("WRAP", "GET", "i8", "", Some(-56)),
        ("WRAP", "INCRBY", "i8", "100", Some(44)),
        ("SAT", "INCRBY", "i8", "1000", Some(127)),
        ("SAT", "INCRBY", "i8", "-1000", Some(-128)),
        ("FAIL", "INCRBY", "i8", "-1", None),
        ("FAIL", "SET", "i8", "128", None),
        ("SAT", "SET", "i8", "128", Some(-128)),
        ("GET", "", "i8", "", Some(127)),
        ("SAT", "SET", "u8", "-1", Some(127)),
        ("WRAP", "GET", "u8", "", Some(255)),
        // The i64 at 0 is 0xff00..00 now.
        (
            "SAT",
            "INCRBY",
            "i64",
            "9223372036854775807",
            Some(i64::MAX - (1 << 56)),
        ),
        (
            "SAT",
            "INCRBY",
            "i64",
            "9223372036854775807",
            Some(i64::MAX),
        ),
        ("WRAP", "INCRBY", "i64", "1", Some(i64::MIN)),
    ];
    rt(&mut raw, &["DEL", "k"], &i(1));
    for (n, (ow, op, ty, v, want)) in cases.iter().enumerate() {
        let mut args = vec!["BITFIELD", "k"];
        if *ow == "GET" {
            args.extend(["GET", ty, "0"]);
        } else {
            args.extend(["OVERFLOW", ow, op, ty, "0"]);
            if !v.is_empty() {
                args.push(v);
            }
        }
        let got = raw.call(&args.iter().map(|a| a.as_bytes()).collect::<Vec<_>>());
        assert_eq!(
            String::from_utf8_lossy(&got),
            ints(&[*want]),
            "case {n}: {args:?}"
        );
    }
}

#[test]
fn bitfield_errors_and_bitfield_ro() {
    let s = server();
    let mut raw = s.raw();
    for ty in [
        "u64", "i65", "i0", "u0", "x8", "I8", "", "u", "u08", "i-1", "u 8",
    ] {
        rt(&mut raw, &["BITFIELD", "k", "GET", ty, "0"], FIELD_TYPE);
    }
    for off in ["-1", "#-1", "x", "", "#", "4294967296", "#536870912"] {
        rt(&mut raw, &["BITFIELD", "k", "GET", "u8", off], BIT_OFFSET);
    }
    rt(&mut raw, &["BITFIELD", "k", "SET", "u8", "0", "x"], NOT_INT);
    rt(
        &mut raw,
        &["BITFIELD", "k", "INCRBY", "u8", "0", "1.5"],
        NOT_INT,
    );
    rt(
        &mut raw,
        &["BITFIELD", "k", "OVERFLOW", "NONE"],
        &e("ERR Invalid OVERFLOW type specified"),
    );
    rt(&mut raw, &["BITFIELD", "k", "GET", "u8"], SYNTAX);
    rt(&mut raw, &["BITFIELD", "k", "SET", "u8", "0"], SYNTAX);
    rt(&mut raw, &["BITFIELD", "k", "OVERFLOW"], SYNTAX);
    rt(&mut raw, &["BITFIELD", "k", "FOO", "u8", "0"], SYNTAX);
    // Errors come in argument order, and nothing runs before every argument checked out.
    rt(
        &mut raw,
        &["BITFIELD", "k", "SET", "u8", "0", "1", "GET", "u64", "0"],
        FIELD_TYPE,
    );
    rt(&mut raw, &["EXISTS", "k"], &i(0));
    rt(&mut raw, &["BITFIELD"], &wrong_args("bitfield"));
    // BITFIELD_RO: GET only, refused after parsing.
    rt(&mut raw, &["SET", "k", "\u{1}"], OK);
    rt(
        &mut raw,
        &["BITFIELD_RO", "k", "GET", "u8", "0", "GET", "i4", "4"],
        &ints(&[Some(1), Some(1)]),
    );
    rt(&mut raw, &["BITFIELD_RO", "k"], "*0\r\n");
    rt(
        &mut raw,
        &["BITFIELD_RO", "missing", "GET", "u8", "0"],
        &ints(&[Some(0)]),
    );
    let ro = e("ERR BITFIELD_RO only supports the GET subcommand");
    rt(&mut raw, &["BITFIELD_RO", "k", "SET", "u8", "0", "1"], &ro);
    rt(
        &mut raw,
        &[
            "BITFIELD_RO",
            "k",
            "GET",
            "u8",
            "0",
            "INCRBY",
            "u8",
            "0",
            "1",
        ],
        &ro,
    );
    rt(
        &mut raw,
        &["BITFIELD_RO", "k", "INCRBY", "u64", "0", "1"],
        FIELD_TYPE,
    );
    rt(&mut raw, &["BITFIELD_RO", "k", "OVERFLOW", "SAT"], "*0\r\n");
    rt(&mut raw, &["GET", "k"], &b("\u{1}"));
    rt(&mut raw, &["BITFIELD_RO"], &wrong_args("bitfield_ro"));
}

#[test]
fn strings_never_grow_past_512_mb() {
    let s = server();
    let mut raw = s.raw();
    // The last bit of a 512 MB string is a valid offset; the next one is not.
    rt(&mut raw, &["GETBIT", "k", "4294967295"], &i(0));
    rt(&mut raw, &["SETBIT", "k", "4294967296", "1"], BIT_OFFSET);
    rt(
        &mut raw,
        &["BITFIELD", "k", "GET", "u8", "4294967295"],
        &ints(&[Some(0)]),
    );
    // A field reaching past 512 MB (Redis would grow the string to 512 MB + 8 bytes).
    let too_big = "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n";
    rt(
        &mut raw,
        &["BITFIELD", "k", "SET", "i64", "4294967295", "1"],
        too_big,
    );
    rt(
        &mut raw,
        &["BITFIELD", "k", "INCRBY", "u8", "4294967290", "1"],
        too_big,
    );
    rt(&mut raw, &["EXISTS", "k"], &i(0));
    // The server is unharmed and allocated nothing.
    rt(
        &mut raw,
        &["BITFIELD", "k", "SET", "u8", "#1", "1"],
        &ints(&[Some(0)]),
    );
    rt(&mut raw, &["STRLEN", "k"], &i(2));
}

#[test]
fn commands_report_redis_key_specs() {
    let s = server();
    let mut c = s.client();
    // (name, arity, first key, last key, step) as COMMAND INFO answers.
    for (name, arity, first, last) in [
        ("setbit", 4, 1, 1),
        ("getbit", 3, 1, 1),
        ("bitcount", -2, 1, 1),
        ("bitpos", -3, 1, 1),
        ("bitop", -4, 2, -1),
        ("bitfield", -2, 1, 1),
        ("bitfield_ro", -2, 1, 1),
    ] {
        let info: Vec<redis::Value> = q(&mut c, &["COMMAND", "INFO", name]);
        let redis::Value::Array(ref fields) = info[0] else {
            panic!("COMMAND INFO {name}: {info:?}");
        };
        let num = |i: usize| match &fields[i] {
            redis::Value::Int(n) => *n,
            v => panic!("{name} field {i}: {v:?}"),
        };
        assert_eq!(
            (num(1), num(3), num(4), num(5)),
            (arity, first, last, 1),
            "{name}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Bitmaps on SSD
// ---------------------------------------------------------------------------------------------

#[test]
fn bit_commands_read_offloaded_values() {
    let dir = tempfile::tempdir().unwrap();
    let s = tiered_server(&dir, "24mb", "2");
    let mut c = s.client();
    let n = 200;
    let len = 600;
    for k in 0..n {
        set_bytes(&mut c, &format!("bm:{k}"), &value(k, 7, len));
    }
    // Push the bitmaps out of RAM with newer values.
    fill(&mut c, 0..60_000, 0, 500);
    assert!(info_u64(&mut c, "tiered", "tiered_disk_keys") > 10_000);
    let reads = info_u64(&mut c, "tiered", "tiered_reads");
    for k in 0..n {
        let (key, v) = (format!("bm:{k}"), value(k, 7, len));
        let ones: u32 = v.iter().map(|b| b.count_ones()).sum();
        let bit = k * 13 % (len * 8);
        let want = (v[bit / 8] >> (7 - bit % 8)) & 1;
        assert_eq!(
            q::<i64>(&mut c, &["GETBIT", &key, &bit.to_string()]),
            i64::from(want)
        );
        assert_eq!(
            q::<i64>(&mut c, &["BITCOUNT", &key]),
            i64::from(ones),
            "{key}"
        );
        let first = (v.iter().position(|&b| b != 0).unwrap() * 8) as i64
            + i64::from(v.iter().find(|&&b| b != 0).unwrap().leading_zeros());
        assert_eq!(q::<i64>(&mut c, &["BITPOS", &key, "1"]), first, "{key}");
        let field: Vec<i64> = q(&mut c, &["BITFIELD_RO", &key, "GET", "u8", "#5"]);
        assert_eq!(field, vec![i64::from(v[5])]);
    }
    assert!(
        info_u64(&mut c, "tiered", "tiered_reads") > reads,
        "no bitmap was read back from disk"
    );
    // Writes and BITOP on values that were on disk.
    assert_eq!(
        q::<i64>(&mut c, &["SETBIT", "bm:1", "0", "1"]),
        i64::from(value(1, 7, len)[0] >> 7)
    );
    let mut want = value(1, 7, len);
    want[0] |= 0x80;
    assert_eq!(get_bytes(&mut c, "bm:1"), want);
    let _: Vec<i64> = q(&mut c, &["BITFIELD", "bm:2", "SET", "u8", "#0", "0"]);
    assert_eq!(get_bytes(&mut c, "bm:2")[0], 0);
    assert_eq!(
        q::<i64>(&mut c, &["BITOP", "XOR", "x", "bm:3", "bm:4"]),
        len as i64
    );
    let (a, b4) = (value(3, 7, len), value(4, 7, len));
    let xor: Vec<u8> = a.iter().zip(&b4).map(|(p, q)| p ^ q).collect();
    assert_eq!(get_bytes(&mut c, "x"), xor);
    assert_eq!(info_u64(&mut c, "tiered", "tiered_read_errors"), 0);
}

/// Past maxmemory, every bit and HLL write answers -OOM and stores nothing; reads go on. A
/// SETBIT far out grows memory by at most its own string before the limit stops the next.
#[test]
fn bit_and_hll_writes_answer_oom_past_maxmemory() {
    let s = Server::start(STRATA, &["--proactor_threads", "1", "--maxmemory", "20mb"]);
    let mut raw = s.raw();
    let oom = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";
    // 4 MB strings, one SETBIT each, until the limit answers.
    let mut stored = 0;
    loop {
        let key = format!("big{stored}");
        let r = raw.call(&[b"SETBIT", key.as_bytes(), b"33554431", b"1"]);
        if r != b":0\r\n" {
            assert_bytes(&r, oom.as_bytes(), "SETBIT past maxmemory");
            break;
        }
        stored += 1;
        assert!(
            stored < 10,
            "no OOM after {stored} strings of 4 MB in 20 MB"
        );
    }
    for cmd in [
        &["SETBIT", "k", "0", "1"][..],
        &["BITFIELD", "k", "SET", "u8", "0", "1"],
        &["BITOP", "NOT", "k", "big0"],
        &["PFADD", "h", "a"],
        &["PFMERGE", "h", "big0"],
    ] {
        rt(&mut raw, cmd, oom);
    }
    rt(&mut raw, &["EXISTS", "k", "h"], &i(0));
    // Reads still answer.
    rt(&mut raw, &["GETBIT", "big0", "33554431"], &i(1));
    rt(&mut raw, &["BITCOUNT", "big0"], &i(1));
    rt(
        &mut raw,
        &["BITFIELD_RO", "big0", "GET", "u8", "0"],
        &ints(&[Some(0)]),
    );
    rt(&mut raw, &["BITPOS", "big0", "1"], &i(33554431));
}
