//! The server's one error type: a [`ErrorKind`] callers branch on, and the text a client or
//! the log sees. A disk-full error is recognised by its OS error code (ENOSPC), never by the
//! words of a message.
//!
//! Never: carries Redis' `ERR ` prefix in its message (the reply adds it).

use std::fmt;
use std::path::Path;

use crate::protocol::Reply;

/// What went wrong, as far as anyone deciding what to do next needs to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Another save runs.
    Busy,
    /// A setting or an argument makes the work impossible (saving off, a missing directory,
    /// a bad flag value).
    Config,
    /// A file could not be created, read, written, synced or renamed.
    Io,
    /// The disk is full.
    NoSpace,
    /// Snapshot or RDB data is damaged, or not what it claims to be.
    Corrupt,
    /// Loading would pass maxmemory.
    OutOfMemory,
    /// A core is gone: the server is stopping.
    ShuttingDown,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerError {
    kind: ErrorKind,
    message: String,
}

impl ServerError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ServerError {
        ServerError {
            kind,
            message: message.into(),
        }
    }

    /// `what` (e.g. "write") on `path` failed with `e`: [`ErrorKind::NoSpace`] when the OS said
    /// ENOSPC (or EDQUOT), [`ErrorKind::Io`] otherwise.
    pub fn io(what: &str, path: &Path, e: &std::io::Error) -> ServerError {
        let kind = match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => ErrorKind::NoSpace,
            _ => ErrorKind::Io,
        };
        ServerError::new(kind, format!("cannot {what} {}: {e}", path.display()))
    }

    /// [`ServerError::io`] for glommio's errors (an OS error inside keeps its code).
    pub fn glommio<T>(what: &str, path: &Path, e: glommio::GlommioError<T>) -> ServerError {
        match e {
            glommio::GlommioError::IoError(io) => ServerError::io(what, path, &io),
            other => ServerError::new(
                ErrorKind::Io,
                format!("cannot {what} {}: {other}", path.display()),
            ),
        }
    }

    pub fn shutting_down() -> ServerError {
        ServerError::new(ErrorKind::ShuttingDown, "server is shutting down")
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error reply a client gets.
    pub fn reply(&self) -> Reply {
        Reply::Error(format!("ERR {}", self.message))
    }
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ServerError {}

/// A shorthand for start-up and persistence results.
pub type Result<T> = std::result::Result<T, ServerError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_known_by_its_code_not_its_words() {
        let p = Path::new("/x");
        let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(
            ServerError::io("write", p, &full).kind(),
            ErrorKind::NoSpace
        );
        let quota = std::io::Error::from_raw_os_error(libc::EDQUOT);
        assert_eq!(
            ServerError::io("write", p, &quota).kind(),
            ErrorKind::NoSpace
        );
        // Words alone do not make it one.
        let lookalike = std::io::Error::other("No space left on device");
        assert_eq!(
            ServerError::io("write", p, &lookalike).kind(),
            ErrorKind::Io
        );
        let g: glommio::GlommioError<()> =
            glommio::GlommioError::IoError(std::io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(
            ServerError::glommio("write", p, g).kind(),
            ErrorKind::NoSpace
        );
        let e = ServerError::new(ErrorKind::Busy, "Background save already in progress");
        assert_eq!(
            e.reply(),
            Reply::Error("ERR Background save already in progress".into())
        );
    }
}
