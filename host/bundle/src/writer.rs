//! Writes a run's bundle in one streaming pass: `meta/` from the run's configuration and final
//! status, then every file of the results tree, then `meta/index.json` with each entry's size
//! and sha-256. The archive is written beside its final name and renamed when complete. gzip
//! runs on every core, as pigz does, into one ordinary `.tar.gz`.
//!
//! Entry names come only from names already checked on the way in; the tar writer refuses
//! anything else.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use factbuoy_protocol::types::{StatusDocument, TarInfo};
use gzp::ZWriter;
use gzp::deflate::Gzip;
use gzp::par::compress::{Compression, ParCompress, ParCompressBuilder};
use sha2::{Digest, Sha256};

use crate::layout;

/// gzip level: fast enough to keep up with disks, close to the default's ratio.
const GZIP_LEVEL: u32 = 6;
const BUFFER_BYTES: usize = 1 << 20;
/// Each block is compressed without the one before it: 1 MiB blocks cost 0.6% in size over one
/// stream on journal lines (128 KiB ones, pigz's, 5%).
const GZIP_BLOCK_BYTES: usize = 1 << 20;
/// The most threads compressing: past this, disks rather than cores set the pace, and memory
/// (about 5 MiB a thread) stays small.
const GZIP_THREADS: usize = 8;

/// Where the compressed stream lands: `inner`, hashed. gzp's compressor panics when it is
/// finished or dropped after its writer failed, so a write error is kept in `failed` rather than
/// returned: the threads always wind down, the archive's side stops at its next write
/// ([`Checked`]), and the error is returned once they have.
struct Sink<W> {
    inner: W,
    hasher: Sha256,
    written: u64,
    failed: Arc<OnceLock<io::Error>>,
}

impl<W: Write> Write for Sink<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.failed.get().is_none() {
            match self.inner.write_all(buf) {
                Ok(()) => {
                    self.hasher.update(buf);
                    self.written += buf.len() as u64;
                }
                Err(e) => {
                    let _ = self.failed.set(e);
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.failed.get().is_none()
            && let Err(e) = self.inner.flush()
        {
            let _ = self.failed.set(e);
        }
        Ok(())
    }
}

/// The compressor's input, refusing to take more once its output has failed.
struct Checked<'a, W: Write> {
    inner: &'a mut ParCompress<'static, Gzip, Sink<W>>,
    failed: &'a OnceLock<io::Error>,
}

impl<W: Write> Write for Checked<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(e) = self.failed.get() {
            return Err(io::Error::new(e.kind(), e.to_string()));
        }
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[derive(serde::Serialize)]
struct IndexEntry {
    path: String,
    size: u64,
    sha256: String,
}

/// What `meta/` says about the run.
pub struct Meta<'a, R: serde::Serialize> {
    /// The run's id, part of the bundle's name.
    pub run_id: &'a str,
    /// The run's configuration, written as `meta/run.json`.
    pub run: &'a R,
    /// The final status document, written as `meta/status.json`.
    pub status: &'a StatusDocument,
    /// Each plugin's name and description, written as `plugins/<name>/definition.json`.
    pub definitions: Vec<(&'a str, &'a serde_json::Value)>,
}

/// Writes the bundle of `results_root` (a tree in the bundle's layout) to `bundle_dir`, and
/// returns its path and what the status document says about it.
pub fn write<R: serde::Serialize>(
    meta: &Meta<'_, R>,
    results_root: &Path,
    bundle_dir: &Path,
) -> anyhow::Result<(PathBuf, TarInfo)> {
    std::fs::create_dir_all(bundle_dir)?;
    let created = time::OffsetDateTime::now_utc();
    let name = layout::file_name(meta.run_id, created);
    let path = bundle_dir.join(&name);
    let temporary = bundle_dir.join(format!(".{name}.partial"));
    match write_to(meta, results_root, &temporary, &path) {
        Ok((sha256, size)) => {
            let created = created.format(&time::format_description::well_known::Rfc3339)?;
            Ok((
                path,
                TarInfo {
                    name,
                    created,
                    sha256,
                    size,
                },
            ))
        }
        Err(e) => {
            // A full disk, say: leave nothing half-written behind.
            let _ = std::fs::remove_file(&temporary);
            Err(e)
        }
    }
}

/// Removes what an earlier attempt to write this run's bundle left in `bundle_dir`: a
/// `.partial` from a stop, or a bundle the run never recorded as its own.
pub fn remove_earlier(bundle_dir: &Path, run_id: &str) -> io::Result<()> {
    let entries = match std::fs::read_dir(bundle_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let suffix = layout::file_name(run_id, time::OffsetDateTime::UNIX_EPOCH);
    let suffix = suffix
        .split_once('_')
        .map(|(_, rest)| format!("_{rest}"))
        .unwrap_or(suffix);
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let partial = name.starts_with('.') && name.ends_with(&format!("{suffix}.partial"));
        if partial || name.ends_with(&suffix) {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// Streams the bundle into `temporary`, syncs it and renames it to `path`; returns its
/// sha-256 and size.
fn write_to<R: serde::Serialize>(
    meta: &Meta<'_, R>,
    results_root: &Path,
    temporary: &Path,
    path: &Path,
) -> anyhow::Result<(String, u64)> {
    // Private, like the run's other outputs: the bundle holds every host's facts.
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(temporary)?
    };
    let sink = compress(
        meta,
        results_root,
        BufWriter::with_capacity(BUFFER_BYTES, file),
    )?;
    let sha256 = hex::encode(sink.hasher.finalize());
    sink.inner
        .into_inner()
        .map_err(|e| e.into_error())?
        .sync_all()?;
    std::fs::rename(temporary, path)?;
    File::open(path.parent().expect("the bundle has a folder"))?.sync_all()?;
    Ok((sha256, sink.written))
}

/// Writes the archive into `out` through gzip on up to [`GZIP_THREADS`] cores (gzp, as pigz:
/// one gzip member of [`GZIP_BLOCK_BYTES`] blocks compressed apart and joined), and returns
/// `out` with the sha-256 and size of what landed in it. Memory stays bounded: gzp holds at
/// most about five blocks per thread in flight.
fn compress<R: serde::Serialize, W: Write + Send + 'static>(
    meta: &Meta<'_, R>,
    results_root: &Path,
    out: W,
) -> anyhow::Result<Sink<W>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(GZIP_THREADS);
    let failed = Arc::new(OnceLock::new());
    let mut gzip: ParCompress<'static, Gzip, Sink<W>> = ParCompressBuilder::new()
        .num_threads(threads)?
        .buffer_size(GZIP_BLOCK_BYTES)?
        .compression_level(Compression::new(GZIP_LEVEL))
        .from_writer(Sink {
            inner: out,
            hasher: Sha256::new(),
            written: 0,
            failed: failed.clone(),
        });
    let archived = archive(
        meta,
        results_root,
        Checked {
            inner: &mut gzip,
            failed: &failed,
        },
    );
    // Finished on every path: dropped unfinished, gzp finishes it and panics on any error.
    let finished = gzip.finish();
    if let Some(e) = failed.get() {
        return Err(io::Error::new(e.kind(), e.to_string()))
            .context("writing the compressed bundle");
    }
    archived?;
    Ok(finished?)
}

/// Streams `meta/`, every file below `results_root` and `meta/index.json` as a tar archive into
/// `out`.
fn archive<R: serde::Serialize>(
    meta: &Meta<'_, R>,
    results_root: &Path,
    out: impl Write,
) -> anyhow::Result<()> {
    let mut tar = tar::Builder::new(out);
    tar.mode(tar::HeaderMode::Deterministic);
    let mut index = Vec::new();
    let add_bytes =
        |tar: &mut tar::Builder<_>, path: &str, bytes: &[u8], index: &mut Vec<IndexEntry>| {
            append(tar, path, bytes.len() as u64, bytes)?;
            index.push(IndexEntry {
                path: path.to_owned(),
                size: bytes.len() as u64,
                sha256: hex::encode(Sha256::digest(bytes)),
            });
            anyhow::Ok(())
        };
    add_bytes(
        &mut tar,
        layout::RUN,
        &serde_json::to_vec_pretty(meta.run)?,
        &mut index,
    )?;
    add_bytes(
        &mut tar,
        layout::STATUS,
        &serde_json::to_vec_pretty(meta.status)?,
        &mut index,
    )?;
    for (plugin, definition) in &meta.definitions {
        let definition = serde_json::to_vec_pretty(definition)?;
        add_bytes(
            &mut tar,
            &layout::definition(plugin),
            &definition,
            &mut index,
        )?;
    }
    for relative in files_below(results_root)? {
        let source = results_root.join(&relative);
        let size = std::fs::metadata(&source)?.len();
        // tar copies 8 KiB at a time: read the file in larger pieces under it.
        let mut reading = BufReader::with_capacity(
            BUFFER_BYTES,
            HashingReader {
                inner: File::open(&source)?,
                hasher: Sha256::new(),
            },
        );
        append(&mut tar, &relative, size, &mut reading)?;
        index.push(IndexEntry {
            path: relative,
            size,
            sha256: hex::encode(reading.into_inner().hasher.finalize()),
        });
    }
    let index_bytes = serde_json::to_vec_pretty(&index)?;
    append(
        &mut tar,
        layout::INDEX,
        index_bytes.len() as u64,
        index_bytes.as_slice(),
    )?;

    tar.into_inner()?;
    Ok(())
}
fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    path: &str,
    size: u64,
    data: impl Read,
) -> io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(size);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut header, path, data)
}

/// Hashes what is read through it, so each file is read once.
struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// Every regular file below `root`, as sorted `/`-separated relative paths. Symbolic links are
/// skipped: nothing a client sent can make the bundle include a file from elsewhere.
fn files_below(root: &Path) -> io::Result<Vec<String>> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                let path = entry.path();
                let relative = path.strip_prefix(root).expect("below root");
                let parts: Vec<String> = relative
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect();
                found.push(parts.join("/"));
            }
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A disk that fills up after `room` bytes.
    struct FillsUp {
        room: usize,
    }

    impl Write for FillsUp {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if buf.len() > self.room {
                return Err(io::Error::new(
                    io::ErrorKind::StorageFull,
                    "No space left on device",
                ));
            }
            self.room -= buf.len();
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_full_disk_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("plugins/p/results/n");
        std::fs::create_dir_all(&node).unwrap();
        // Incompressible, so the output passes the disk's room after a few blocks.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let noise: Vec<u8> = (0..16 << 20)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        std::fs::write(node.join("noise.bin"), &noise).unwrap();
        let status: StatusDocument = serde_json::from_value(serde_json::json!({
            "run_id": "r1", "status": "complete", "plugins": []
        }))
        .unwrap();
        let meta = Meta {
            run_id: "r1",
            run: &serde_json::json!({}),
            status: &status,
            definitions: Vec::new(),
        };
        let error = compress(&meta, dir.path(), FillsUp { room: 1 << 20 })
            .err()
            .expect("the disk filled up");
        assert!(
            format!("{error:#}").contains("No space left on device"),
            "{error:#}"
        );
    }

    #[test]
    fn lists_files_but_not_links() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("plugins/p/results/n")).unwrap();
        std::fs::write(dir.path().join("plugins/p/results/n/a.json"), "{}").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("plugins/p/results/n/link"))
            .unwrap();
        assert_eq!(
            files_below(dir.path()).unwrap(),
            ["plugins/p/results/n/a.json"]
        );
        assert!(files_below(&dir.path().join("absent")).unwrap().is_empty());
    }
}
