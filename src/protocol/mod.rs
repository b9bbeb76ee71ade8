//! The RESP wire format: [`resp`] turns request bytes into argument vectors, [`reply`] turns
//! command results into RESP2 or RESP3 bytes. Nothing here knows about commands or storage.

pub mod reply;
pub mod resp;

pub use reply::Reply;
pub use resp::{parse_request, Frame, ParseError, Parsed, Request, RequestParser};

/// Largest bulk string a client may send (Redis' proto-max-bulk-len default, 512 MB).
pub const MAX_BULK_LEN: usize = 512 * 1024 * 1024;
/// Largest number of arguments in one multibulk request (Redis' limit).
pub const MAX_MULTIBULK_LEN: i64 = 1024 * 1024;
/// Longest inline request or length line accepted before the closing CRLF.
pub const MAX_INLINE_LEN: usize = 64 * 1024;
