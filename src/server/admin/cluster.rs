//! CLUSTER: Strata has no cluster mode. As Redis started without it, it knows the command and
//! its subcommands, checks their arity as Redis does before running one, and answers each that
//! cluster support is disabled, so a client probing for a cluster gets Redis' answer rather
//! than an unknown command.
//!
//! Never: answers anything about slots or nodes.

use crate::cmd::args::err;
use crate::cmd::{unknown_subcommand, wrong_args};
use crate::protocol::Reply;
use crate::server::cmdstats::{self, Target};
use crate::server::table::{self, Call};

pub fn cluster(Call { args, .. }: Call<'_>) -> Reply {
    let Some(spec) = table::lookup(b"cluster") else {
        return err("ERR This instance has cluster support disabled");
    };
    match cmdstats::target(spec, &args) {
        Target::Unknown => unknown_subcommand("CLUSTER", &args[1], false),
        Target::Refused(_) => wrong_args(&format!(
            "cluster|{}",
            String::from_utf8_lossy(&args[1]).to_lowercase()
        )),
        _ => err("ERR This instance has cluster support disabled"),
    }
}
