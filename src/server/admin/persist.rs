//! Persistence commands: SAVE, BGSAVE, LASTSAVE, SHUTDOWN.
//!
//! Never: runs two saves at once (the snapshot orchestration refuses the second).

use crate::cmd::args::*;
use crate::protocol::Reply;
use crate::server::snapshot;
use crate::server::table::Call;

pub fn lastsave(Call { core, .. }: Call<'_>) -> Reply {
    Reply::Int(
        core.global
            .persist
            .lock()
            .map(|p| p.last_save_unix)
            .unwrap_or(core.global.started_unix) as i64,
    )
}

/// SAVE [RDB|DF] [NAME]: a snapshot in the foreground of this connection (the server keeps
/// serving everyone else). RDB/DF pick the format (Dragonfly's words), NAME the file name.
pub async fn save(Call { core, args, .. }: Call<'_>) -> Reply {
    use snapshot::Format;
    let mut opts = ArgCursor::new(&args, 1);
    let format = if opts.eat("RDB") {
        Some(Format::Rdb)
    } else if opts.eat("DF") {
        Some(Format::Strata)
    } else {
        None
    };
    let mut name = None;
    if let Some(a) = opts.next_arg() {
        let n = String::from_utf8_lossy(a).to_string();
        if n.is_empty() || n.contains('/') {
            return err("ERR invalid snapshot name: a file name without '/' is expected");
        }
        name = Some(n);
    }
    if let Err(e) = opts.finish() {
        return e;
    }
    match snapshot::save(core, format, name).await {
        Ok(_) => Reply::Ok,
        Err(e) => e.reply(),
    }
}

/// BGSAVE [SCHEDULE]: starts a save and answers at once.
pub async fn bgsave(Call { core, args, .. }: Call<'_>) -> Reply {
    let mut opts = ArgCursor::new(&args, 1);
    let schedule = opts.eat("SCHEDULE");
    if let Err(e) = opts.finish() {
        return e;
    }
    if snapshot::in_progress(core, schedule) {
        if schedule {
            return Reply::Status("Background saving scheduled");
        }
        return snapshot::in_progress_error().reply();
    }
    // Answered once the point in time is set: later writes are not in the snapshot.
    match snapshot::bgsave(core).await {
        Ok(Ok(())) => Reply::Status("Background saving started"),
        Ok(Err(e)) => e.reply(),
        Err(_) => err("ERR server is shutting down"),
    }
}

pub async fn shutdown(Call { core, args, .. }: Call<'_>) -> Reply {
    let mut save = None;
    let mut opts = ArgCursor::new(&args, 1);
    loop {
        if opts.eat("NOSAVE") {
            save = Some(false);
        } else if opts.eat("SAVE") {
            save = Some(true);
        } else if opts.eat("NOW") || opts.eat("FORCE") {
        } else if opts.eat("ABORT") {
            return err("ERR No shutdown in progress.");
        } else {
            break;
        }
    }
    if let Err(e) = opts.finish() {
        return e;
    }
    tracing::info!("SHUTDOWN requested by a client");
    if save == Some(false) {
        core.global.remove_tier_files();
        std::process::exit(0);
    }
    match snapshot::shutdown(core, save == Some(true)).await {
        Ok(()) => Reply::Ok,
        Err(e) => {
            tracing::warn!("SHUTDOWN SAVE failed, not exiting: {e}");
            err("ERR Errors trying to SHUTDOWN. Check logs.")
        }
    }
}
