//! Writes a run's bundle in one streaming pass: `meta/` from the run's configuration and final
//! status, then every file of the results tree, then `meta/index.json` with each entry's size
//! and sha-256. The archive is written beside its final name and renamed when complete.
//!
//! Entry names come only from names already checked on the way in; the tar writer refuses
//! anything else.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use factbuoy_protocol::types::{StatusDocument, TarInfo};
use flate2::Compression;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};

use crate::layout;

/// gzip level: fast enough to keep up with disks, close to the default's ratio.
const GZIP_LEVEL: u32 = 6;
const BUFFER_BYTES: usize = 1 << 20;

/// Hashes everything written through it.
struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    written: u64,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
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
    let hashing = HashingWriter {
        inner: BufWriter::with_capacity(BUFFER_BYTES, file),
        hasher: Sha256::new(),
        written: 0,
    };
    let mut tar = tar::Builder::new(GzEncoder::new(hashing, Compression::new(GZIP_LEVEL)));
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
        let mut hashing = HashingReader {
            inner: File::open(&source)?,
            hasher: Sha256::new(),
        };
        append(&mut tar, &relative, size, &mut hashing)?;
        index.push(IndexEntry {
            path: relative,
            size,
            sha256: hex::encode(hashing.hasher.finalize()),
        });
    }
    let index_bytes = serde_json::to_vec_pretty(&index)?;
    append(
        &mut tar,
        layout::INDEX,
        index_bytes.len() as u64,
        index_bytes.as_slice(),
    )?;

    let gzip = tar.into_inner()?;
    let mut hashing = gzip.finish()?;
    hashing.flush()?;
    let sha256 = hex::encode(hashing.hasher.clone().finalize());
    let size = hashing.written;
    hashing
        .inner
        .into_inner()
        .map_err(|e| e.into_error())?
        .sync_all()?;
    std::fs::rename(temporary, path)?;
    File::open(path.parent().expect("the bundle has a folder"))?.sync_all()?;
    Ok((sha256, size))
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
