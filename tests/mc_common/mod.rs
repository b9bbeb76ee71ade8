//! What the memcached-protocol tests share: a Strata with a memcached port, and a raw
//! exchange that sends bytes and reads every reply up to a marker (or the connection's end).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub use test_support::*;

pub const STRATA: &str = env!("CARGO_BIN_EXE_strata");

/// A Strata with `--memcached_port` (two shards unless `extra` says otherwise); returns it and
/// the memcached port.
pub fn strata_mc(extra: &[&str]) -> (Server, u16) {
    let port = free_port();
    let p = port.to_string();
    let mut args = vec!["--memcached_port", &p];
    if !extra.contains(&"--proactor_threads") {
        args.extend_from_slice(&["--proactor_threads", "2"]);
    }
    args.extend_from_slice(extra);
    let s = Server::start(STRATA, &args);
    (s, port)
}

/// [`strata_mc`] for a server that does not answer PING (`--requirepass`): waits until the
/// memcached port accepts connections.
pub fn strata_mc_unready(extra: &[&str]) -> (Server, u16) {
    let port = free_port();
    let p = port.to_string();
    let mut args = vec!["--memcached_port", &p, "--proactor_threads", "2"];
    args.extend_from_slice(extra);
    let mut s = Server::spawn(STRATA, &args);
    let up = s.poll_started("strata", |_| TcpStream::connect(("127.0.0.1", port)).ok());
    assert!(up.is_some(), "strata's memcached port did not open");
    (s, port)
}

/// How an exchange knows it has every reply.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum End {
    /// Text: `mn` is sent last; replies end with `MN` (so a script must hold no `mn` of its
    /// own: the exchange could stop at its reply when the rest comes in a later read).
    Text,
    /// Binary: a noop with a marker opaque is sent last.
    Binary,
    /// The server closes the connection.
    Close,
}

const MARK_OPAQUE: [u8; 4] = [0xfe, 0xed, 0xfa, 0xce];

fn binary_noop() -> Vec<u8> {
    let mut v = vec![0x80, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    v.extend_from_slice(&MARK_OPAQUE);
    v.extend_from_slice(&[0; 8]);
    v
}

fn binary_noop_reply() -> Vec<u8> {
    let mut v = vec![0x81, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    v.extend_from_slice(&MARK_OPAQUE);
    v.extend_from_slice(&[0; 8]);
    v
}

/// Sends `script` (then the end marker) on a new connection; returns every reply byte.
pub fn exchange(port: u16, script: &[u8], end: End) -> Vec<u8> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut all = script.to_vec();
    let tail = match end {
        End::Text => {
            all.extend_from_slice(b"mn\r\n");
            b"MN\r\n".to_vec()
        }
        End::Binary => {
            all.extend_from_slice(&binary_noop());
            binary_noop_reply()
        }
        End::Close => Vec::new(),
    };
    // In pieces, so that requests split across reads are covered too.
    for chunk in all.chunks(4096) {
        if c.write_all(chunk).is_err() {
            break;
        }
    }
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 65536];
    while Instant::now() < deadline {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => break,
        }
        if end != End::Close && out.ends_with(&tail) {
            out.truncate(out.len() - tail.len());
            return out;
        }
    }
    assert!(
        end == End::Close,
        "no end marker from port {port}; got {:?}",
        String::from_utf8_lossy(&out)
    );
    out
}

/// A binary request frame.
pub fn frame(
    opcode: u8,
    extras: &[u8],
    key: &[u8],
    value: &[u8],
    opaque: u32,
    cas: u64,
) -> Vec<u8> {
    let mut v = vec![0x80, opcode];
    v.extend_from_slice(&(key.len() as u16).to_be_bytes());
    v.push(extras.len() as u8);
    v.extend_from_slice(&[0, 0, 0]);
    v.extend_from_slice(&((extras.len() + key.len() + value.len()) as u32).to_be_bytes());
    v.extend_from_slice(&opaque.to_be_bytes());
    v.extend_from_slice(&cas.to_be_bytes());
    v.extend_from_slice(extras);
    v.extend_from_slice(key);
    v.extend_from_slice(value);
    v
}

/// Extras of a binary set: flags and exptime.
pub fn set_extras(flags: u32, exptime: u32) -> Vec<u8> {
    let mut v = flags.to_be_bytes().to_vec();
    v.extend_from_slice(&exptime.to_be_bytes());
    v
}

/// Extras of a binary incr/decr.
pub fn incr_extras(delta: u64, initial: u64, exptime: u32) -> Vec<u8> {
    let mut v = delta.to_be_bytes().to_vec();
    v.extend_from_slice(&initial.to_be_bytes());
    v.extend_from_slice(&exptime.to_be_bytes());
    v
}

/// The binary response frames in `bytes`: (opcode, status, opaque, cas, extras, key, value).
pub type Frame = (u8, u16, u32, u64, Vec<u8>, Vec<u8>, Vec<u8>);

pub fn frames(mut bytes: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    while bytes.len() >= 24 {
        let keylen = u16::from_be_bytes([bytes[2], bytes[3]]) as usize;
        let extlen = bytes[4] as usize;
        let status = u16::from_be_bytes([bytes[6], bytes[7]]);
        let body = u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
        let opaque = u32::from_be_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
        let cas = u64::from_be_bytes(bytes[16..24].try_into().unwrap());
        if bytes.len() < 24 + body {
            break;
        }
        let b = &bytes[24..24 + body];
        out.push((
            bytes[1],
            status,
            opaque,
            cas,
            b[..extlen].to_vec(),
            b[extlen..extlen + keylen].to_vec(),
            b[extlen + keylen..].to_vec(),
        ));
        bytes = &bytes[24 + body..];
    }
    out
}
