//! The one error type of every on-disk format in this crate.
//!
//! Each error names the byte offset in the file (or stream) where the problem was found, so an
//! operator can look at the bytes; callers add the file name. Decoders never panic on bad input:
//! they return one of these instead.

use std::fmt;

/// What went wrong, coarsely: enough for a caller to decide between "retry", "refuse the file"
/// and "report a bug".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The file does not start with the magic bytes of the expected format.
    BadMagic,
    /// The format version is newer (or older) than this code understands.
    UnsupportedVersion,
    /// A stored checksum does not match the bytes it covers.
    ChecksumMismatch,
    /// The data ended before the structure did (a cut-off file).
    Truncated,
    /// The bytes are checksummed correctly or carry no checksum, but do not make sense.
    Corrupt,
    /// Reading or writing the underlying file failed.
    Io,
}

impl ErrorKind {
    fn describe(self) -> &'static str {
        match self {
            ErrorKind::BadMagic => "bad magic",
            ErrorKind::UnsupportedVersion => "unsupported version",
            ErrorKind::ChecksumMismatch => "checksum mismatch",
            ErrorKind::Truncated => "truncated",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Io => "I/O error",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// A format error at a byte offset. `Display` reads as
/// `"{kind} {detail} at offset {offset}"`, e.g. `checksum mismatch in block at offset 131104`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    pub kind: ErrorKind,
    /// Byte offset from the start of the file where the problem was found.
    pub offset: u64,
    /// A short phrase that completes the sentence started by `kind`.
    pub detail: String,
}

impl FormatError {
    pub fn new(kind: ErrorKind, offset: u64, detail: impl Into<String>) -> Self {
        FormatError {
            kind,
            offset,
            detail: detail.into(),
        }
    }

    pub fn bad_magic(offset: u64, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadMagic, offset, detail)
    }

    pub fn unsupported_version(offset: u64, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::UnsupportedVersion, offset, detail)
    }

    pub fn checksum(offset: u64, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::ChecksumMismatch, offset, detail)
    }

    pub fn truncated(offset: u64, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Truncated, offset, detail)
    }

    pub fn corrupt(offset: u64, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Corrupt, offset, detail)
    }

    pub fn io(offset: u64, err: &std::io::Error) -> Self {
        Self::new(ErrorKind::Io, offset, format!("({err})"))
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.detail.is_empty() {
            write!(f, "{} at offset {}", self.kind, self.offset)
        } else {
            write!(f, "{} {} at offset {}", self.kind, self.detail, self.offset)
        }
    }
}

impl std::error::Error for FormatError {}

impl From<std::io::Error> for FormatError {
    /// An I/O error with no known offset (0); readers that know the offset use [`FormatError::io`].
    fn from(err: std::io::Error) -> Self {
        FormatError::io(0, &err)
    }
}

impl From<FormatError> for std::io::Error {
    fn from(err: FormatError) -> Self {
        let kind = match err.kind {
            ErrorKind::Truncated => std::io::ErrorKind::UnexpectedEof,
            _ => std::io::ErrorKind::InvalidData,
        };
        std::io::Error::new(kind, err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_offset() {
        let e = FormatError::checksum(131104, "in block");
        assert_eq!(e.to_string(), "checksum mismatch in block at offset 131104");
        let e = FormatError::truncated(7, "");
        assert_eq!(e.to_string(), "truncated at offset 7");
    }

    #[test]
    fn io_errors_convert_both_ways() {
        let e: FormatError = std::io::Error::other("disk on fire").into();
        assert_eq!(e.kind, ErrorKind::Io);
        assert!(e.to_string().contains("disk on fire"), "{e}");
        let back: std::io::Error = FormatError::truncated(3, "").into();
        assert_eq!(back.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
