//! Reads a bundle, a `.tar.gz` or its extracted folder, without unpacking it: the archive is
//! streamed once, and only the entries asked for are read, each up to a size cap.
//!
//! [`Bundle::walk`] hands every entry to a visitor as it streams past: a regular file with its
//! path, its size and a reader of its content, or an entry refused as hostile (a path with
//! `..` or a root, a symlink, a hard link, a device file, a second entry of one path, headers
//! that disagree on its size) with the reason. An entry's size is the one `tar -x` extracts:
//! a PAX `size` record over the ustar field, octal or GNU base-256 (see `tar_size`). Nothing
//! is ever written to disk, and nothing is held in memory but what a visitor keeps: JSON
//! documents are read through [`Entry::read_json`], which stops at a cap.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use anyhow::Context;

use crate::layout::{self, ResultKind};

mod tar_size;

/// A node's name and the bytes of its file, or why they could not be read.
pub type NodeFile = (String, Result<Vec<u8>, String>);

/// Each node's `artifact` among `plugin`'s results in the bundle at `path` (a `.tar.gz` or an
/// extracted folder), in the order they are found, read through [`Bundle::walk`]. A file that
/// cannot be read, is larger than `max_bytes`, or is refused (a link, a device file...) is an
/// error for that node only; any other refused entry is an error under its own path; an
/// archive cut short keeps the nodes read before the cut and reports the rest as one error
/// under `(rest of the bundle)`.
pub fn node_files(
    path: &Path,
    plugin: &str,
    artifact: &str,
    max_bytes: u64,
) -> anyhow::Result<Vec<NodeFile>> {
    // `plugins/<plugin>/results/`, the folder holding one folder per node.
    let results = layout::result_dir(plugin, "", ResultKind::Results);
    let node_of = |entry: &str| {
        entry
            .strip_prefix(&results)
            .and_then(|rest| rest.strip_suffix(artifact))
            .and_then(|rest| rest.strip_suffix('/'))
            .filter(|node| !node.is_empty() && !node.contains('/'))
            .map(str::to_owned)
    };
    let bundle = Bundle::open(path)?;
    let mut found: Vec<NodeFile> = Vec::new();
    let walked = bundle.walk(|visited| {
        match visited {
            Err(refused) => {
                let key = node_of(&refused.entry).unwrap_or_else(|| refused.entry.clone());
                found.push((key, Err(refused.to_string())));
            }
            Ok(entry) => {
                let Some(node) = node_of(entry.path()) else {
                    return Ok(());
                };
                let name = entry.path().to_owned();
                let read = if entry.size() > max_bytes {
                    Err(format!("{name} is larger than {max_bytes} bytes"))
                } else {
                    let mut bytes = Vec::with_capacity(entry.size() as usize);
                    entry
                        .read_to_end(&mut bytes)
                        .map(|_| bytes)
                        .map_err(|e| format!("reading {name}: {e}"))
                };
                found.push((node, read));
            }
        }
        Ok(())
    });
    match walked {
        Ok(()) => Ok(found),
        Err(e) if found.is_empty() => Err(e).with_context(|| {
            format!(
                "{} is corrupt, truncated or not a .tar.gz bundle",
                path.display()
            )
        }),
        Err(e) => {
            let error = format!(
                "{} is corrupt or truncated after the nodes read so far: {e}",
                path.display()
            );
            found.push(("(rest of the bundle)".to_owned(), Err(error)));
            Ok(found)
        }
    }
}

/// The buffer the compressed file is read through.
const READ_BUFFER_BYTES: usize = 256 * 1024;

/// The most of a `meta/` document (`run.json`, `status.json`) or an `error.json` read into
/// memory: far above what the aggregator writes, far below what would hurt.
pub const MAX_META_BYTES: u64 = 16 * 1024 * 1024;
/// The most of `meta/index.json` read into memory: about 300,000 entries.
pub const MAX_INDEX_BYTES: u64 = 64 * 1024 * 1024;

/// Why a bundle, or one of its entries, could not be read. Every variant names the entry.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The bundle itself could not be opened.
    #[error("opening the bundle {path}: {cause}")]
    Open {
        /// The bundle's path.
        path: String,
        /// Why.
        cause: std::io::Error,
    },
    /// The archive could not be read on from here: truncated, corrupt, or not a `.tar.gz`.
    #[error(
        "{bundle}: the archive is corrupt or truncated {at}: {cause}; fetch the bundle again (factbuoy retrieve)"
    )]
    Corrupt {
        /// The bundle's path.
        bundle: String,
        /// Where: at its start, or after entry `<path>`.
        at: String,
        /// What the decompressor or the tar reader said.
        cause: std::io::Error,
    },
    /// An entry the reader refuses (a path leading out, a link, a device file...).
    #[error("{0}")]
    Refused(Refused),
    /// A document larger than what is read into memory for it.
    #[error(
        "entry {entry} is {size} bytes, more than the {limit} bytes read into memory for it: the bundle is damaged or hostile"
    )]
    TooLarge {
        /// The entry's path.
        entry: String,
        /// Its size, as its header says.
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// More entries than any bundle holds ([`MAX_ENTRIES`]).
    #[error(
        "entry {entry} is past the {limit} entries a bundle may have: the bundle is damaged or hostile"
    )]
    TooMany {
        /// The first entry past the cap.
        entry: String,
        /// The cap.
        limit: u64,
    },
    /// A document that is not the JSON it should be.
    #[error("entry {entry} is not valid JSON: {cause}")]
    InvalidJson {
        /// The entry's path.
        entry: String,
        /// Where and why parsing stopped.
        cause: serde_json::Error,
    },
    /// An entry whose content could not be read (the archive ends inside it, say).
    #[error("reading entry {entry}: {cause}")]
    Read {
        /// The entry's path.
        entry: String,
        /// Why.
        cause: std::io::Error,
    },
}

impl ReadError {
    /// The entry (or the bundle) the error is about.
    pub fn entry(&self) -> &str {
        match self {
            ReadError::Open { path, .. } => path,
            ReadError::Corrupt { bundle, .. } => bundle,
            ReadError::Refused(refused) => &refused.entry,
            ReadError::TooLarge { entry, .. }
            | ReadError::TooMany { entry, .. }
            | ReadError::InvalidJson { entry, .. }
            | ReadError::Read { entry, .. } => entry,
        }
    }
}

/// An entry refused as hostile or impossible in a bundle, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Refused {
    /// The entry's path as the archive (or the folder) names it.
    pub entry: String,
    /// Why it is refused.
    pub reason: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "entry {}: {}; bundles never hold one, so this bundle is damaged or hostile",
            self.entry, self.reason
        )
    }
}

/// A bundle: a `.tar.gz` or the folder it was extracted to.
#[derive(Debug, Clone)]
pub struct Bundle {
    path: PathBuf,
    folder: bool,
}

/// One regular file of a bundle as it streams past: its path, its size and its content.
pub struct Entry<'a> {
    path: String,
    size: u64,
    remaining: u64,
    content: Box<dyn Read + 'a>,
}

impl Entry<'_> {
    /// The entry's path inside the bundle (`meta/run.json`), made of plain components only.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The entry's size, as tar reads its headers (or as the file system says).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Reads the entry as a JSON document of at most `limit` bytes: a larger one is refused
    /// before a byte of it is read.
    pub fn read_json<T: serde::de::DeserializeOwned>(
        &mut self,
        limit: u64,
    ) -> Result<T, ReadError> {
        let bytes = self.read_bytes(limit)?;
        serde_json::from_slice(&bytes).map_err(|cause| ReadError::InvalidJson {
            entry: self.path.clone(),
            cause,
        })
    }

    /// Reads the whole entry, of at most `limit` bytes: a larger one is refused before a byte
    /// of it is read.
    pub fn read_bytes(&mut self, limit: u64) -> Result<Vec<u8>, ReadError> {
        if self.size > limit {
            return Err(ReadError::TooLarge {
                entry: self.path.clone(),
                size: self.size,
                limit,
            });
        }
        let mut bytes = Vec::with_capacity(self.size as usize);
        self.read_to_end(&mut bytes)
            .map_err(|cause| ReadError::Read {
                entry: self.path.clone(),
                cause,
            })?;
        Ok(bytes)
    }

    /// Streams the entry through sha-256: its size and digest (`hex::encode` gives the
    /// written form `meta/index.json` uses).
    pub fn digest(&mut self) -> Result<(u64, [u8; 32]), ReadError> {
        let mut hasher = Sha256::new();
        let size = std::io::copy(self, &mut hasher).map_err(|cause| ReadError::Read {
            entry: self.path.clone(),
            cause,
        })?;
        Ok((size, hasher.finalize().into()))
    }
}

impl Read for Entry<'_> {
    /// Reads at most the size the header gives, and fails when the content ends before it:
    /// a tar reader hands a truncated entry's short content over without a word.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.remaining == 0 {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let n = self.content.read(&mut buf[..want])?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "its content ends {} bytes short of the {} its header gives (a truncated bundle)",
                    self.remaining, self.size
                ),
            ));
        }
        self.remaining -= n as u64;
        Ok(n)
    }
}

/// What a walk hands its visitor: a regular file, or an entry it refused.
pub type Visited<'e, 'a> = Result<&'e mut Entry<'a>, Refused>;

/// Hashes every byte read through it: the bundle's own digest, as the archive streams past.
struct HashingReader<R> {
    inner: R,
    hasher: Option<Sha256>,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(hasher) = &mut self.hasher {
            hasher.update(&buf[..n]);
        }
        Ok(n)
    }
}

impl Bundle {
    /// Opens the bundle at `path`: a folder is read as an extracted bundle, anything else as a
    /// `.tar.gz`.
    pub fn open(path: &Path) -> Result<Bundle, ReadError> {
        let metadata = std::fs::metadata(path).map_err(|cause| ReadError::Open {
            path: path.display().to_string(),
            cause,
        })?;
        Ok(Bundle {
            path: path.to_owned(),
            folder: metadata.is_dir(),
        })
    }

    /// The bundle's path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the bundle is an extracted folder rather than a `.tar.gz`.
    pub fn is_folder(&self) -> bool {
        self.folder
    }

    /// Hands every regular file of the bundle to `visit`, in archive order (a folder's in
    /// name order), and every entry it refuses as such; directories are passed over. The first
    /// error `visit` returns ends the walk; so does an archive that cannot be read on.
    pub fn walk(
        &self,
        visit: impl FnMut(Visited<'_, '_>) -> Result<(), ReadError>,
    ) -> Result<(), ReadError> {
        self.walk_hashing(visit, false).map(|_| ())
    }

    /// As [`Bundle::walk`], and for a `.tar.gz` also returns its size and sha-256, computed
    /// from the same read (the figures `tar_info` and `factbuoy run -o json` give).
    pub fn walk_and_digest(
        &self,
        visit: impl FnMut(Visited<'_, '_>) -> Result<(), ReadError>,
    ) -> Result<Option<(u64, String)>, ReadError> {
        self.walk_hashing(visit, true)
    }

    fn walk_hashing(
        &self,
        mut visit: impl FnMut(Visited<'_, '_>) -> Result<(), ReadError>,
        digest: bool,
    ) -> Result<Option<(u64, String)>, ReadError> {
        let mut seen = Seen::default();
        if self.folder {
            walk_folder(&self.path, &self.path, &mut visit, &mut seen)?;
            return Ok(None);
        }
        let bundle = self.path.display().to_string();
        let file = File::open(&self.path).map_err(|cause| ReadError::Open {
            path: bundle.clone(),
            cause,
        })?;
        let hashing = HashingReader {
            inner: file,
            hasher: digest.then(Sha256::new),
        };
        let corrupt = |last: &Option<String>, cause| ReadError::Corrupt {
            bundle: bundle.clone(),
            at: match last {
                None => "at its start (is it a .tar.gz bundle?)".into(),
                Some(entry) => format!("after entry {entry}"),
            },
            cause,
        };
        // The archive is decompressed on a thread of its own, a few blocks ahead of the walk,
        // so that a walk that parses what it reads takes about as long as the slower of the
        // two rather than their sum.
        let (blocks, received) = std::sync::mpsc::sync_channel(BLOCKS_AHEAD);
        std::thread::scope(|scope| {
            let decompressing = scope.spawn(move || decompress(hashing, blocks));
            let mut last: Option<String> = None;
            let walked = walk_archive(
                tar::Archive::new(Blocks::new(received)),
                &mut visit,
                &mut seen,
                &mut last,
                &corrupt,
            );
            // Hung up by now: the decompressor stops at its next block.
            let hasher = decompressing
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            walked?;
            let hasher = hasher.map_err(|e| corrupt(&last, e))?;
            let Some(hasher) = hasher.filter(|_| digest) else {
                return Ok(None);
            };
            let size = std::fs::metadata(&self.path)
                .map_err(|cause| ReadError::Open {
                    path: bundle.clone(),
                    cause,
                })?
                .len();
            Ok(Some((size, hex::encode(hasher.finalize()))))
        })
    }
}

/// How many decompressed blocks may wait for the walk.
const BLOCKS_AHEAD: usize = 4;
/// A decompressed block's size.
const BLOCK_BYTES: usize = 256 * 1024;

/// Decompresses `file` into blocks sent to the walk until its end (then, for the digest, the
/// rest of the file, gzip's trailer and anything after it, is read too) or until the walk
/// hangs up; returns the file's hasher when it was read to its end.
fn decompress(
    file: HashingReader<File>,
    blocks: std::sync::mpsc::SyncSender<std::io::Result<Vec<u8>>>,
) -> std::io::Result<Option<Sha256>> {
    // One buffer under the decompressor (flate2's `read` decoder would add its own), large
    // enough that reading the file costs few system calls.
    let mut decoder =
        flate2::bufread::GzDecoder::new(BufReader::with_capacity(READ_BUFFER_BYTES, file));
    loop {
        let mut block = vec![0; BLOCK_BYTES];
        let mut filled = 0;
        while filled < BLOCK_BYTES {
            match decoder.read(&mut block[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // What came before the error first: the walk names the entry it ends in.
                    block.truncate(filled);
                    if filled > 0 {
                        let _ = blocks.send(Ok(block));
                    }
                    let _ = blocks.send(Err(e));
                    return Ok(None);
                }
            }
        }
        if filled == 0 {
            break;
        }
        block.truncate(filled);
        if blocks.send(Ok(block)).is_err() {
            // The walk needs no more: it ended early, or tar read its end-of-archive marker
            // before the padding after it. The digest, when taken, still covers every byte.
            if decoder.get_ref().get_ref().hasher.is_none() {
                return Ok(None);
            }
            std::io::copy(&mut decoder, &mut std::io::sink())?;
            break;
        }
    }
    drop(blocks);
    let mut rest = decoder.into_inner();
    std::io::copy(&mut rest, &mut std::io::sink())?;
    Ok(rest.into_inner().hasher)
}

/// The decompressed archive as the walk reads it: the blocks of [`decompress`], in order.
struct Blocks {
    received: std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>,
    block: Vec<u8>,
    at: usize,
}

impl Blocks {
    fn new(received: std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>) -> Blocks {
        Blocks {
            received,
            block: Vec::new(),
            at: 0,
        }
    }
}

impl Read for Blocks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.block.len() {
            match self.received.recv() {
                Ok(block) => {
                    self.block = block?;
                    self.at = 0;
                }
                // The decompressor is done: the end of the archive.
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.block.len() - self.at);
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Hands every entry of `archive` to `visit` (see [`Bundle::walk`]), `last` the last entry
/// read, for errors.
fn walk_archive(
    mut archive: tar::Archive<Blocks>,
    visit: &mut impl FnMut(Visited<'_, '_>) -> Result<(), ReadError>,
    seen: &mut Seen,
    last: &mut Option<String>,
    corrupt: &impl Fn(&Option<String>, std::io::Error) -> ReadError,
) -> Result<(), ReadError> {
    let entries = archive.entries().map_err(|e| corrupt(last, e))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| corrupt(last, e))?;
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        *last = Some(raw.clone());
        seen.count(&raw)?;
        let kind = entry.header().entry_type();
        let path = match safe_path(&raw) {
            Ok(path) => path,
            Err(reason) => {
                visit(Err(Refused { entry: raw, reason }))?;
                continue;
            }
        };
        let link = || {
            entry
                .link_name_bytes()
                .map(|l| String::from_utf8_lossy(&l).into_owned())
                .unwrap_or_default()
        };
        let size = match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                tar_size::agreed_size(&mut entry).map_err(|e| corrupt(last, e))?
            }
            tar::EntryType::Directory => continue,
            tar::EntryType::Symlink => Err(format!("a symbolic link to {}", link())),
            tar::EntryType::Link => Err(format!("a hard link to {}", link())),
            tar::EntryType::Char | tar::EntryType::Block => Err("a device file".into()),
            tar::EntryType::Fifo => Err("a FIFO".into()),
            other => Err(format!(
                "an entry of tar type {:?}",
                other.as_byte() as char
            )),
        };
        let size = match size {
            Ok(size) => size,
            Err(reason) => {
                visit(Err(Refused { entry: raw, reason }))?;
                continue;
            }
        };
        if let Err(refused) = seen.first(&path) {
            visit(Err(refused))?;
            continue;
        }
        let mut file = Entry {
            path,
            size,
            remaining: size,
            content: Box::new(entry),
        };
        visit(Ok(&mut file))?;
    }
    Ok(())
}

/// The path of an archive entry made of plain components (`./` dropped, a trailing `/` of a
/// folder too), or why it is refused.
pub fn safe_path(raw: &str) -> Result<String, String> {
    if raw.starts_with('/') {
        return Err("an absolute path".into());
    }
    let mut parts = Vec::new();
    for part in raw.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err("a path leading out of the bundle with \"..\"".into()),
            part if part.contains('\\') || part.contains('\0') => {
                return Err("a path with a backslash or a NUL in it".into());
            }
            part => parts.push(part),
        }
    }
    if parts.is_empty() {
        return Err("an empty path".into());
    }
    Ok(parts.join("/"))
}

/// The most entries a bundle may have. The aggregator writes a handful per (plugin, node):
/// 1,000 nodes of 5 plugins come to about 30,000. A bundle of a million tiny entries would
/// compress to a few megabytes and make the reader remember every name.
pub const MAX_ENTRIES: u64 = 100_000;

/// The entries a walk has seen: how many, and the paths of its regular files, each kept as
/// 128 bits of its sha-256 (16 bytes, where the path itself would take about 80).
#[derive(Default)]
struct Seen {
    entries: u64,
    paths: std::collections::HashSet<[u8; 16]>,
}

impl Seen {
    /// Counts one more entry, refusing the one past [`MAX_ENTRIES`].
    fn count(&mut self, entry: &str) -> Result<(), ReadError> {
        self.entries += 1;
        if self.entries > MAX_ENTRIES {
            return Err(ReadError::TooMany {
                entry: entry.to_owned(),
                limit: MAX_ENTRIES,
            });
        }
        Ok(())
    }

    /// Refuses a second regular file of one path: which of two would a reader trust?
    fn first(&mut self, path: &str) -> Result<(), Refused> {
        let digest = Sha256::digest(path.as_bytes());
        let mut key = [0; 16];
        key.copy_from_slice(&digest[..16]);
        if self.paths.insert(key) {
            Ok(())
        } else {
            Err(Refused {
                entry: path.to_owned(),
                reason: "a second entry of a path already read".into(),
            })
        }
    }
}

/// Walks an extracted bundle's folder in name order without following a link.
fn walk_folder(
    root: &Path,
    folder: &Path,
    visit: &mut dyn FnMut(Visited<'_, '_>) -> Result<(), ReadError>,
    seen: &mut Seen,
) -> Result<(), ReadError> {
    let listing = |cause| ReadError::Read {
        entry: folder.display().to_string(),
        cause,
    };
    let mut names: Vec<PathBuf> = std::fs::read_dir(folder)
        .map_err(listing)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(listing)?;
    names.sort();
    for path in names {
        let relative = path.strip_prefix(root).unwrap_or(&path);
        seen.count(&relative.to_string_lossy())?;
        let Some(name) = relative.to_str().map(str::to_owned) else {
            visit(Err(Refused {
                entry: relative.to_string_lossy().into_owned(),
                reason: "a name that is not UTF-8".into(),
            }))?;
            continue;
        };
        let metadata = std::fs::symlink_metadata(&path).map_err(|cause| ReadError::Read {
            entry: name.clone(),
            cause,
        })?;
        let kind = metadata.file_type();
        if kind.is_dir() {
            walk_folder(root, &path, visit, seen)?;
            continue;
        }
        let refusal = if kind.is_symlink() {
            let target = std::fs::read_link(&path).unwrap_or_default();
            Some(format!("a symbolic link to {}", target.display()))
        } else if !kind.is_file() {
            Some("a device file, FIFO or socket".into())
        } else {
            None
        };
        if let Some(reason) = refusal {
            visit(Err(Refused {
                entry: name,
                reason,
            }))?;
            continue;
        }
        seen.first(&name).map_err(ReadError::Refused)?;
        let file = File::open(&path).map_err(|cause| ReadError::Read {
            entry: name.clone(),
            cause,
        })?;
        let size = metadata.len();
        let mut entry = Entry {
            path: name,
            size,
            remaining: size,
            content: Box::new(BufReader::new(file)),
        };
        visit(Ok(&mut entry))?;
    }
    Ok(())
}
