//! The server driven without a socket: a one-core server in a glommio executor, batches run
//! through the dispatcher exactly as the RESP front end runs them, sessions posted to as other
//! cores post to them. The seam the memcached front end will use.

use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use clap::Parser;
use futures::channel::mpsc;

use super::core::{Core, Global, Msg};
use super::dispatch::{dispatch, Replies, Request};
use super::session::{Delivery, Peer, Session};
use super::table::TABLE;
use crate::config::{Flags, Settings};
use crate::protocol::Reply;
use crate::runtime::Bell;

/// Runs `test` on a fresh one-core server (snapshots go to a temporary dir).
pub(crate) fn with_server<F, Fut>(test: F)
where
    F: FnOnce(Rc<Core>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().to_string_lossy().into_owned();
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let flags =
                Flags::try_parse_from(["strata", "--proactor_threads", "1", "--dir", &path])
                    .expect("flags");
            let settings = Arc::new(Settings::from_flags(&flags));
            let (tx, rx) = mpsc::unbounded::<Msg>();
            let bell = Bell::new().expect("eventfd");
            let global = Arc::new(Global::new(settings, vec![tx], vec![bell]));
            let core = super::start_core(0, global, rx).await;
            test(core).await;
        })
        .expect("executor")
        .join()
        .expect("test ran");
    drop(dir);
}

fn session(core: &Core) -> Session {
    let peer = Peer {
        fd: -1,
        ..Peer::default()
    };
    Session::open(&core.global, core.id, peer)
}

fn req(args: &[&str]) -> Request {
    Request::new(
        args.iter()
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect(),
    )
}

fn encoded(replies: &Replies) -> String {
    let mut out = Vec::new();
    for (r, resp3) in replies.iter() {
        r.encode(resp3, &mut out);
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn a_batch_runs_through_the_dispatcher_without_a_socket() {
    with_server(|core| async move {
        let mut s = session(&core);
        let batch = vec![
            req(&["SET", "k", "v"]),
            req(&["get", "k"]),
            req(&["PING"]),
            req(&["nosuch", "a"]),
            req(&["GET"]),
            req(&["HELLO", "3"]),
            req(&["GET", "missing"]),
        ];
        let replies = dispatch(&core, &mut s, batch).await;
        assert_eq!(replies.len(), 7);
        let text = encoded(&replies);
        let expected_start = "+OK\r\n$1\r\nv\r\n+PONG\r\n-ERR unknown command 'nosuch', with args beginning with: 'a' \r\n-ERR wrong number of arguments for 'get' command\r\n%7\r\n";
        assert!(text.starts_with(expected_start), "{text:?}");
        // HELLO's own reply and those after it are RESP3: the missing key is `_`.
        assert!(text.ends_with("_\r\n"), "{text:?}");
        assert!(s.resp3);
        // QUIT ends the batch: nothing after it runs.
        let replies = dispatch(&core, &mut s, vec![req(&["QUIT"]), req(&["SET", "k", "w"])]).await;
        assert_eq!(replies.into_vec(), vec![Reply::Ok]);
        assert!(s.close_after_reply);
        let mut t = session(&core);
        let replies = dispatch(&core, &mut t, vec![req(&["GET", "k"])]).await;
        assert_eq!(replies.into_vec(), vec![Reply::bulk_str("v")]);
    });
}

/// Arguments a command's arity accepts: its name, then dummy values (one more for commands
/// with a minimum, so that every handler with options gets one to refuse).
fn call_for(name: &str, arity: i32) -> Vec<&str> {
    let n = if arity > 0 {
        arity as usize
    } else {
        (-arity) as usize + 1
    };
    let mut v = vec![name];
    v.resize(n, "0");
    v
}

#[test]
fn every_command_in_the_table_has_a_handler() {
    with_server(|core| async move {
        let mut s = session(&core);
        let r = dispatch(&core, &mut s, vec![req(&["COMMAND", "COUNT"])]).await;
        assert_eq!(r.into_vec(), vec![Reply::Int(TABLE.len() as i64)]);
        let r = dispatch(&core, &mut s, vec![req(&["COMMAND", "LIST"])]).await;
        let Some(Reply::Array(names)) = r.into_vec().pop() else {
            panic!("COMMAND LIST is an array");
        };
        assert_eq!(names.len(), TABLE.len());
        for spec in TABLE {
            assert!(names.contains(&Reply::bulk_str(spec.name)), "{}", spec.name);
            let args = call_for(spec.name, spec.arity);
            let mut s = session(&core);
            let r = dispatch(&core, &mut s, vec![req(&args)]).await;
            let reply = r.into_vec().pop().expect("a reply");
            if let Reply::Error(e) = &reply {
                assert!(
                    !e.starts_with("ERR unknown command"),
                    "{args:?} reached no handler: {e}"
                );
                assert!(!e.contains("internal error"), "{args:?}: {e}");
            }
        }
    });
}

#[test]
fn a_session_receives_what_other_cores_post_within_its_output_limit() {
    with_server(|core| async move {
        let mut s = session(&core);
        let client = s.client.clone();
        let msg = || Reply::Push(vec![Reply::bulk_str("message"), Reply::bulk_str("hi")]);
        assert!(client.post(&core.global, Delivery::Push(msg())));
        assert!(client.pending_output() > 0);
        // A wake nobody waits for is handed over too, and weighs nothing.
        assert!(client.post(&core.global, Delivery::Wake(7)));
        match s.next_delivery().await {
            Delivery::Push(r) => assert_eq!(r, msg()),
            other => panic!("{other:?}"),
        }
        assert!(matches!(s.try_delivery(), Some(Delivery::Wake(7))));
        assert_eq!(client.pending_output(), 0);
        assert!(s.try_delivery().is_none());
        // Past the limit the client is dropped instead of queueing without bound.
        core.global
            .settings
            .set("pubsub_client_output_limit", "100")
            .expect("settable");
        let big = Reply::Push(vec![Reply::bulk(Bytes::from(vec![b'x'; 200]))]);
        assert!(!client.post(&core.global, Delivery::Push(big)));
        assert!(s.killed());
        assert_eq!(client.pending_output(), 0);
        assert!(matches!(s.next_delivery().await, Delivery::Kill));
        // A killed session takes no more posts.
        assert!(!client.post(&core.global, Delivery::Push(msg())));
        // It leaves the registry when it ends.
        let id = s.id;
        assert!(core.global.clients.get(id).is_some());
        drop(s);
        assert!(core.global.clients.get(id).is_none());
    });
}

/// A small hash as a packed block (its bytes are opaque to everything but its type's code).
fn packed_hash() -> crate::shard::Packed {
    use crate::shard::{ObjectType, PackedEncoding, PackedKind};
    crate::shard::Packed {
        kind: PackedKind {
            ty: ObjectType::Hash,
            encoding: PackedEncoding::Listpack,
        },
        bytes: {
            let mut lp = crate::shard::listpack::new();
            crate::shard::listpack::push(&mut lp, &[b"field", b"value", b"n", b"42"]);
            lp.into_boxed_slice()
        },
    }
}

#[test]
fn a_typed_value_answers_as_its_type_and_survives_a_save_and_a_load() {
    use crate::shard::Value;
    with_server(|core| async move {
        let at = crate::shard::now_ms() + 3_600_000;
        core.shard
            .borrow_mut()
            .store(0, b"h", Value::Packed(packed_hash()), at);
        core.shard.borrow_mut().store(0, b"s", Value::str(b"v"), 0);
        let mut s = session(&core);
        let batch = vec![
            req(&["TYPE", "h"]),
            req(&["OBJECT", "ENCODING", "h"]),
            req(&["GET", "h"]),
            req(&["STRLEN", "h"]),
            req(&["MGET", "h", "s"]),
            req(&["EXISTS", "h"]),
            req(&["SCAN", "0", "TYPE", "hash"]),
            req(&["COPY", "h", "h2"]),
            req(&["TYPE", "h2"]),
            req(&["SAVE"]),
        ];
        let wrongtype = || {
            Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value".into())
        };
        let replies = dispatch(&core, &mut s, batch).await.into_vec();
        assert_eq!(
            replies,
            vec![
                Reply::Status("hash"),
                Reply::bulk_str("listpack"),
                wrongtype(),
                wrongtype(),
                Reply::Array(vec![Reply::Nil, Reply::bulk_str("v")]),
                Reply::Int(1),
                Reply::Array(vec![
                    Reply::bulk_str("0"),
                    Reply::Array(vec![Reply::bulk_str("h")])
                ]),
                Reply::Int(1),
                Reply::Status("hash"),
                Reply::Ok,
            ]
        );
        // Loaded back into an emptied keyspace: the same bytes, type and expiry.
        let r = dispatch(&core, &mut s, vec![req(&["FLUSHALL"])]).await;
        assert_eq!(r.into_vec(), vec![Reply::Ok]);
        let dir = core.global.settings.dir();
        let plan = super::load::find(&dir, "dump")
            .expect("readable")
            .expect("a snapshot");
        let progress = super::load::Progress::new(&plan);
        super::load::run(&core, &plan, &progress).await;
        let mut shard = core.shard.borrow_mut();
        let (e, expire_at) = shard
            .lookup_mut_ttl(0, b"h", crate::shard::now_ms())
            .expect("loaded");
        assert_eq!(e.to_value(1), Value::Packed(packed_hash()));
        assert_eq!(expire_at, at);
        assert!(shard.contains(0, b"h2", 0));
        assert_eq!(shard.key_count(), 3);
    });
}
