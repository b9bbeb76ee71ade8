//! CONFIG GET / SET / RESETSTAT / REWRITE.
//!
//! Never: changes a setting that is fixed at start (the settings refuse it).

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::cmd::args::*;
use crate::cmd::help_reply;
use crate::protocol::Reply;
use crate::server::table::Call;

pub async fn config(Call { core, args, .. }: Call<'_>) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let settings = &core.global.settings;
    match sub.as_str() {
        "get" if args.len() >= 3 => {
            let mut pairs = Vec::new();
            for p in &args[2..] {
                for (k, v) in settings.get(p) {
                    if !pairs.iter().any(|(a, _): &(String, String)| a == &k) {
                        pairs.push((k, v));
                    }
                }
            }
            Reply::Map(
                pairs
                    .into_iter()
                    .map(|(k, v)| (Reply::bulk(Bytes::from(k)), Reply::bulk(Bytes::from(v))))
                    .collect(),
            )
        }
        "set" if args.len() >= 4 && args.len().is_multiple_of(2) => {
            for pair in args[2..].chunks(2) {
                let (k, v) = (
                    String::from_utf8_lossy(&pair[0]),
                    String::from_utf8_lossy(&pair[1]),
                );
                if let Err(e) = settings.set(&k, &v) {
                    return Reply::Error(e);
                }
            }
            Reply::Ok
        }
        "resetstat" if args.len() == 2 => {
            core.on_all(|s| {
                s.stats.reset();
                crate::server::cmdstats::reset();
                if let Some(t) = &s.tier {
                    t.reset_stats();
                }
            })
            .await;
            core.global.total_connections.store(0, Ordering::Relaxed);
            crate::server::script::busy::reset_stats();
            Reply::Ok
        }
        "rewrite" if args.len() == 2 => err("ERR The server is running without a config file"),
        "help" => help_reply(&[
            "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "HELP",
            "    Print this help.",
        ]),
        "get" | "set" | "resetstat" | "rewrite" => Reply::Error(format!(
            "ERR wrong number of arguments for 'config|{sub}' command"
        )),
        _ => crate::cmd::unknown_subcommand("CONFIG", &args[1], false),
    }
}
