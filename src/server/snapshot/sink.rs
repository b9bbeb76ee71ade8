//! Where snapshot bytes go: a file written front to back in large writes, O_DIRECT where the
//! filesystem allows, fsynced on close; a pace for volumes with a throughput cap; the renames
//! and directory syncs that commit a save.
//!
//! Never: leaves a file half-written under its final name (callers write `*.tmp`, then rename),
//! or reports a disk-full write as anything but [`ErrorKind::NoSpace`].

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use glommio::io::BufferedFile;

use crate::server::error::{ErrorKind, Result, ServerError};

/// Paces writes to a byte rate.
pub(super) struct Throttle {
    rate: u64,
    start: Instant,
    bytes: RefCell<u64>,
}

impl Throttle {
    pub(super) fn new(rate: u64) -> Throttle {
        Throttle {
            rate,
            start: Instant::now(),
            bytes: RefCell::new(0),
        }
    }

    pub(super) async fn account(&self, n: u64) {
        if self.rate == 0 {
            return;
        }
        let total = {
            let mut b = self.bytes.borrow_mut();
            *b += n;
            *b
        };
        let due = Duration::from_secs_f64(total as f64 / self.rate as f64);
        let elapsed = self.start.elapsed();
        if due > elapsed {
            glommio::timer::sleep(due - elapsed).await;
        }
    }
}

/// A file written front to back in large writes through io_uring, fsynced on close. O_DIRECT
/// where the filesystem allows it: snapshot bytes then bypass the page cache, so a large save
/// neither evicts hot pages nor stalls the core in the kernel's dirty-page throttling; buffered
/// otherwise (tmpfs). (glommio's StreamWriter can panic when polled without a completed write,
/// hence this.)
pub(super) struct FileWriter {
    sink: Sink,
    path: PathBuf,
    /// Bytes handed to the file so far.
    pos: u64,
    /// glommio submits the writes from its loop: the core's idle naps stay short meanwhile.
    _io: crate::runtime::IoWait,
}

enum Sink {
    Direct {
        file: glommio::io::DmaFile,
        buf: glommio::io::DmaBuffer,
        fill: usize,
    },
    Buffered {
        file: BufferedFile,
        buf: Vec<u8>,
    },
}

const WRITE_BUFFER: usize = 256 << 10;

impl FileWriter {
    pub(super) async fn create(path: &Path) -> Result<FileWriter> {
        let io = crate::runtime::io_wait();
        let err = |e: glommio::GlommioError<()>| ServerError::glommio("create", path, e);
        // The first block is written with plain I/O before the O_DIRECT open: glommio probes
        // the device with a read at open, which on an empty or write-only file fails or
        // misleads it (see the same in the tier store). Those bytes are overwritten.
        let seeded = std::fs::File::create(path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &[0u8; 4096]))
            .is_ok();
        let direct = if seeded {
            glommio::io::OpenOptions::new()
                .read(true)
                .write(true)
                .dma_open(path)
                .await
                .ok()
        } else {
            None
        };
        let sink = match direct {
            Some(file) => {
                let buf = file.alloc_dma_buffer(WRITE_BUFFER);
                Sink::Direct { file, buf, fill: 0 }
            }
            None => Sink::Buffered {
                file: BufferedFile::create(path).await.map_err(err)?,
                buf: Vec::with_capacity(WRITE_BUFFER),
            },
        };
        Ok(FileWriter {
            sink,
            path: path.to_path_buf(),
            pos: 0,
            _io: io,
        })
    }

    pub(super) async fn write(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            let full = match &mut self.sink {
                Sink::Direct { buf, fill, .. } => {
                    let n = bytes.len().min(WRITE_BUFFER - *fill);
                    buf.as_bytes_mut()[*fill..*fill + n].copy_from_slice(&bytes[..n]);
                    *fill += n;
                    bytes = &bytes[n..];
                    *fill == WRITE_BUFFER
                }
                Sink::Buffered { buf, .. } => {
                    buf.extend_from_slice(bytes);
                    bytes = &[];
                    buf.len() >= WRITE_BUFFER
                }
            };
            if full {
                self.flush().await?;
            }
        }
        Ok(())
    }

    /// Writes out the buffer. For O_DIRECT only a whole buffer, or the last one at close
    /// (padded to the alignment, the file then cut to its real length).
    async fn flush(&mut self) -> Result<()> {
        let (n, len) = match &mut self.sink {
            Sink::Direct { file, buf, fill } => {
                if *fill == 0 {
                    return Ok(());
                }
                let len = *fill;
                let out = if len == WRITE_BUFFER {
                    std::mem::replace(buf, file.alloc_dma_buffer(WRITE_BUFFER))
                } else {
                    let aligned = file.align_up(len as u64) as usize;
                    let mut tail = file.alloc_dma_buffer(aligned);
                    tail.as_bytes_mut()[..len].copy_from_slice(&buf.as_bytes()[..len]);
                    tail.as_bytes_mut()[len..].fill(0);
                    tail
                };
                *fill = 0;
                let n = file.write_at(out, self.pos).await;
                (n.map(|n| n.min(len)), len)
            }
            Sink::Buffered { file, buf } => {
                if buf.is_empty() {
                    return Ok(());
                }
                let data = std::mem::replace(buf, Vec::with_capacity(WRITE_BUFFER));
                let len = data.len();
                (file.write_at(data, self.pos).await, len)
            }
        };
        let n = n.map_err(|e| ServerError::glommio("write", &self.path, e))?;
        // A regular file takes a whole write unless the disk is full.
        if n < len {
            return Err(ServerError::new(
                ErrorKind::NoSpace,
                format!(
                    "cannot write {}: short write at offset {} (disk full?)",
                    self.path.display(),
                    self.pos + n as u64
                ),
            ));
        }
        self.pos += len as u64;
        Ok(())
    }

    /// Flushes, fsyncs and closes the file.
    pub(super) async fn close(mut self) -> Result<()> {
        self.flush().await?;
        let len = self.pos;
        match self.sink {
            Sink::Direct { file, .. } => {
                let r = async {
                    file.truncate(len).await?;
                    file.fdatasync().await?;
                    file.close().await
                }
                .await;
                r.map_err(|e| ServerError::glommio("sync", &self.path, e))
            }
            Sink::Buffered { file, .. } => {
                let r = async {
                    file.fdatasync().await?;
                    file.close().await
                }
                .await;
                r.map_err(|e| ServerError::glommio("sync", &self.path, e))
            }
        }
    }
}

/// Writes a whole small file (the summary), fsynced.
pub(super) async fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut w = FileWriter::create(path).await?;
    w.write(bytes).await?;
    w.close().await
}

pub(super) async fn rename(from: &Path, to: &Path) -> Result<()> {
    glommio::io::rename(from, to)
        .await
        .map_err(|e| ServerError::glommio(&format!("rename to {} the file", to.display()), from, e))
}

/// Fsyncs a directory, so the renames in it last.
pub(super) async fn sync_dir(dir: &Path) -> Result<()> {
    let d = glommio::io::Directory::open(dir)
        .await
        .map_err(|e| ServerError::glommio("open", dir, e))?;
    let r = d
        .sync()
        .await
        .map_err(|e| ServerError::glommio("sync", dir, e));
    let _ = d.close().await;
    r
}
