//! [`TierError`]: what a tier operation fails with, and how an I/O error becomes one.

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

pub(crate) fn io_err(e: impl std::fmt::Display) -> TierError {
    let text = e.to_string();
    if text.contains("No space left") || text.contains("ENOSPC") {
        TierError::NoSpace
    } else {
        TierError::Io(text)
    }
}
