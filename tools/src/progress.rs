//! The progress bar: bytes read of the bytes to read, on stderr, only when stderr is a terminal.
//!
//! When stderr is a pipe or a file (scripts, CI logs) nothing is drawn at all, so the output
//! stays the plain summary lines the subcommands print. Readers wrapped by
//! [`Progress::reader`] advance the bar as they are read; nothing else needs to know about it.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::{self, IsTerminal, Read};

pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar for `total` bytes, labelled `what`; a silent one unless stderr is a terminal.
    pub fn new(what: &str, total: u64) -> Progress {
        if !io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = ProgressBar::new(total);
        let template = "{msg} [{wide_bar}] {binary_bytes}/{binary_total_bytes} \
                        ({binary_bytes_per_sec}, eta {eta})";
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_string());
        Progress { bar: Some(bar) }
    }

    /// Grows the total, e.g. when a file turns out to need a second pass.
    pub fn add_total(&self, bytes: u64) {
        if let Some(bar) = &self.bar {
            bar.inc_length(bytes);
        }
    }

    /// `inner`, counting what is read from it into the bar.
    pub fn reader<R: Read>(&self, inner: R) -> Counted<R> {
        Counted {
            inner,
            bar: self.bar.clone(),
        }
    }

    /// Removes the bar, so the report that follows starts on a clean line.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A reader that advances a progress bar.
pub struct Counted<R> {
    inner: R,
    bar: Option<ProgressBar>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(bar) = &self.bar {
            bar.inc(n as u64);
        }
        Ok(n)
    }
}
