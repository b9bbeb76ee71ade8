//! [`TierError`]: what a tier operation fails with, and how an OS error becomes one.
//!
//! Running out of space is told by the OS's error code (ENOSPC, from a syscall or as an
//! io_uring result), never by the words of a message: those change with the library that
//! wraps the error, and an unrelated error may carry the same words.

use std::io;

use crate::page::Corrupt;

/// Why a tier operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TierError {
    Io(String),
    Corrupt(Corrupt),
    /// The file reached its size limit or the disk is full.
    NoSpace,
}

impl std::fmt::Display for TierError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TierError::Io(e) => write!(f, "I/O error: {e}"),
            TierError::Corrupt(c) => write!(f, "corrupt data on disk: {c:?}"),
            TierError::NoSpace => write!(f, "no space left in the tier file"),
        }
    }
}

/// An error that may carry the OS's error code.
pub(crate) trait OsError: std::fmt::Display {
    fn os_code(&self) -> Option<i32>;
}

/// The tier ring's reads report a failed result (-errno) as this, with its code.
impl OsError for io::Error {
    fn os_code(&self) -> Option<i32> {
        self.raw_os_error()
    }
}

/// glommio keeps the OS's error, with its code, as the source of its own.
impl<T> OsError for glommio::GlommioError<T> {
    fn os_code(&self) -> Option<i32> {
        self.raw_os_error()
    }
}

/// A failed I/O as the tier reports it: [`TierError::NoSpace`] when the OS said ENOSPC, else
/// [`TierError::Io`] with the error's text.
pub(crate) fn io_err(e: impl OsError) -> TierError {
    if e.os_code() == Some(libc::ENOSPC) {
        TierError::NoSpace
    } else {
        TierError::Io(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_space_is_told_by_the_error_code_never_by_the_message() {
        let enospc = || io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(io_err(enospc()), TierError::NoSpace);
        // A ring's result of -ENOSPC, as `uring` hands it on.
        let result = -libc::ENOSPC;
        assert_eq!(
            io_err(io::Error::from_raw_os_error(-result)),
            TierError::NoSpace
        );
        // A failed write or pre-allocation, as glommio reports it.
        let glommio = glommio::GlommioError::<()>::EnhancedIoError {
            source: enospc(),
            op: "Writing",
            path: Some("t-0000.ssd".into()),
            fd: Some(7),
        };
        assert_eq!(io_err(glommio), TierError::NoSpace);
        // Other errors are I/O errors, whatever their message says.
        for text in ["No space left on device (os error 28)", "ENOSPC"] {
            assert_eq!(io_err(io::Error::other(text)), TierError::Io(text.into()));
        }
        let eio = io::Error::from_raw_os_error(libc::EIO);
        assert!(matches!(io_err(eio), TierError::Io(_)));
    }
}
