//! The tool's one error type and the exit codes scripts rely on.
//!
//! Every failure is one of three kinds, and the kind alone decides the exit status:
//! the data is bad (1), the command line is bad (2, as clap reports its own errors), or the
//! machine would not let us read or write (3). Messages name the file, and for damaged data the
//! byte offset, because `ondisk`'s errors always carry one.

use ondisk::{ErrorKind, FormatError};
use std::fmt;
use std::io;
use std::path::Path;

/// Exit status: every check passed, every file was written.
pub const EXIT_OK: u8 = 0;
/// Exit status: an input is corrupt, truncated, missing a file or disagrees with its summary.
pub const EXIT_CORRUPT: u8 = 1;
/// Exit status: the command line is wrong (clap's own code for usage errors).
pub const EXIT_USAGE: u8 = 2;
/// Exit status: reading or writing failed for a reason other than the data (permissions, a
/// full disk, an output directory that cannot be created).
pub const EXIT_IO: u8 = 3;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The input data is bad; the message names the file and, where known, the offset.
    Corrupt(String),
    /// The arguments do not make sense together.
    Usage(String),
    /// The file system refused a read or a write.
    Io(String),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Corrupt(_) => EXIT_CORRUPT,
            Failure::Usage(_) => EXIT_USAGE,
            Failure::Io(_) => EXIT_IO,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Failure::Corrupt(m) | Failure::Usage(m) | Failure::Io(m) => m,
        }
    }

    /// The same failure with `what: ` in front of its message (usually a file name).
    pub fn context(self, what: impl fmt::Display) -> Failure {
        match self {
            Failure::Corrupt(m) => Failure::Corrupt(format!("{what}: {m}")),
            Failure::Usage(m) => Failure::Usage(format!("{what}: {m}")),
            Failure::Io(m) => Failure::Io(format!("{what}: {m}")),
        }
    }

    /// A format error from `ondisk`: an I/O error underneath stays an I/O error, anything
    /// else means the bytes are bad.
    pub fn format(e: &FormatError) -> Failure {
        match e.kind() {
            ErrorKind::Io => Failure::Io(e.to_string()),
            _ => Failure::Corrupt(e.to_string()),
        }
    }

    /// `action` on `path` failed, e.g. `Failure::io("cannot create", dir, &e)`.
    pub fn io(action: &str, path: &Path, e: &io::Error) -> Failure {
        Failure::Io(format!("{}: {action} ({e})", path.display()))
    }

    /// Opening an input failed: a missing input is missing data (1), anything else is I/O (3).
    pub fn open_input(path: &Path, e: &io::Error) -> Failure {
        if e.kind() == io::ErrorKind::NotFound {
            Failure::Corrupt(format!("{}: missing ({e})", path.display()))
        } else {
            Failure::io("cannot open", path, e)
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Failure {}
