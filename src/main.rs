//! The `strata` server binary: flags, logging, then the cores.
//!
//! Never: holds logic of its own beyond reading flags and setting up logging.

use strata::config::Flags;

#[global_allocator]
static ALLOC: strata::memory::CountingAlloc = strata::memory::CountingAlloc;

fn main() {
    let flags = match Flags::load() {
        Ok(f) => f,
        Err(e) => {
            // clap's text already explains (and covers --help / --version).
            eprint!("{e}");
            let code = if e.contains("Usage") && !e.contains("error:") {
                0
            } else {
                2
            };
            std::process::exit(code);
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&flags.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = strata::boot::run(&flags) {
        tracing::error!("{e}");
        eprintln!("strata: {e}");
        std::process::exit(1);
    }
}
