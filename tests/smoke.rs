//! Smoke test: the binary starts, answers PING over RESP and inline, stores and returns a value.
mod common;

use common::*;

#[test]
fn starts_and_serves() {
    let s = Server::start(STRATA, &["--proactor_threads", "2"]);
    let mut raw = s.raw();
    raw.roundtrip(b"PING\r\n", b"+PONG\r\n");
    raw.roundtrip(&cmd(&[b"SET", b"k", b"v"]), b"+OK\r\n");
    raw.roundtrip(&cmd(&[b"GET", b"k"]), b"$1\r\nv\r\n");
    let mut c = s.client();
    let v: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "v");
}
