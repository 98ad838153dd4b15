//! Reading journal files through a page cache with a fixed memory budget.
//!
//! journald and journalctl map journal files into memory; a WebAssembly component cannot, and
//! reading each object with its own call into the host would be slow. So files are read in
//! pages of [`PAGE_BYTES`], kept in one least-recently-used cache shared by every open file and
//! bounded by [`Budget`]: however large the journal, the plugin holds at most that much of it.
//! Objects that straddle pages are assembled in a scratch buffer; objects larger than a few
//! pages are read directly, so they do not flush the cache.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

/// Bytes per page: large enough that a sequential read costs few host calls, small enough that
/// scattered reads do not waste much.
pub const PAGE_BYTES: usize = 128 * 1024;
/// Objects spanning more pages than this are read straight into the scratch buffer.
const MAX_CACHED_SPAN: usize = 4;

/// How much memory the cache may hold.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub pages: usize,
}

impl Budget {
    pub fn bytes(bytes: usize) -> Self {
        Budget {
            pages: (bytes / PAGE_BYTES).max(2 * MAX_CACHED_SPAN),
        }
    }
}

/// Identifies a file registered with the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourceId(u32);

/// Why bytes could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The range lies (partly) past the end of the file as it was when opened.
    PastEnd {
        offset: u64,
        len: u64,
        file_len: u64,
    },
    Io(io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::PastEnd {
                offset,
                len,
                file_len,
            } => write!(
                f,
                "{len} bytes at offset {offset} lie past the end of the file ({file_len} bytes)"
            ),
            ReadError::Io(e) => write!(f, "read failed: {e}"),
        }
    }
}

struct Source {
    file: File,
    len: u64,
    /// The page this file read last, to skip the map lookup for runs of reads in one page.
    last: Option<(u64, usize)>,
}

struct Page {
    owner: Option<(SourceId, u64)>,
    bytes: Vec<u8>,
    last_used: u64,
}

/// The shared page cache; see the module documentation.
pub struct PageCache {
    sources: Vec<Option<Source>>,
    pages: Vec<Page>,
    index: HashMap<(SourceId, u64), usize>,
    budget: Budget,
    clock: u64,
    scratch: Vec<u8>,
}

impl PageCache {
    pub fn new(budget: Budget) -> Self {
        PageCache {
            sources: Vec::new(),
            pages: Vec::new(),
            index: HashMap::new(),
            budget,
            clock: 0,
            scratch: Vec::new(),
        }
    }

    /// Registers an open file; `len` is its size now (later growth is not read).
    pub fn add(&mut self, file: File, len: u64) -> SourceId {
        self.sources.push(Some(Source {
            file,
            len,
            last: None,
        }));
        SourceId(self.sources.len() as u32 - 1)
    }

    /// Closes a file and frees its pages.
    pub fn remove(&mut self, id: SourceId) {
        self.sources[id.0 as usize] = None;
        for page in &mut self.pages {
            if page.owner.is_some_and(|(owner, _)| owner == id) {
                self.index.remove(&page.owner.take().expect("owned"));
                page.last_used = 0;
            }
        }
    }

    fn source(&self, id: SourceId) -> &Source {
        self.sources[id.0 as usize]
            .as_ref()
            .expect("reading a file the cache has closed")
    }

    /// The `len` bytes at `offset` of file `id`.
    pub fn read(&mut self, id: SourceId, offset: u64, len: usize) -> Result<&[u8], ReadError> {
        let file_len = self.source(id).len;
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|end| end > file_len) {
            return Err(ReadError::PastEnd {
                offset,
                len: len as u64,
                file_len,
            });
        }
        let first_page = offset / PAGE_BYTES as u64;
        let last_page = (offset + len.max(1) as u64 - 1) / PAGE_BYTES as u64;
        let within = (offset % PAGE_BYTES as u64) as usize;
        if first_page == last_page {
            let slot = self.page(id, first_page)?;
            return Ok(&self.pages[slot].bytes[within..within + len]);
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        if last_page - first_page >= MAX_CACHED_SPAN as u64 {
            scratch.resize(len, 0);
            let source = self.sources[id.0 as usize].as_mut().expect("open source");
            let result = read_at(source, offset, &mut scratch);
            self.scratch = scratch;
            result?;
        } else {
            for page_no in first_page..=last_page {
                let slot = match self.page(id, page_no) {
                    Ok(slot) => slot,
                    Err(e) => {
                        self.scratch = scratch;
                        return Err(e);
                    }
                };
                let bytes = &self.pages[slot].bytes;
                let start = if page_no == first_page { within } else { 0 };
                let wanted = len - scratch.len();
                let take = (bytes.len() - start).min(wanted);
                scratch.extend_from_slice(&bytes[start..start + take]);
            }
            self.scratch = scratch;
        }
        Ok(&self.scratch[..len])
    }

    /// The slot holding page `page_no` of file `id`, reading it if needed.
    fn page(&mut self, id: SourceId, page_no: u64) -> Result<usize, ReadError> {
        self.clock += 1;
        let source = self.sources[id.0 as usize].as_mut().expect("open source");
        let slot = match source.last {
            Some((last_no, slot)) if last_no == page_no => slot,
            _ => match self.index.get(&(id, page_no)) {
                Some(&slot) => slot,
                None => self.load(id, page_no)?,
            },
        };
        self.pages[slot].last_used = self.clock;
        self.sources[id.0 as usize]
            .as_mut()
            .expect("open source")
            .last = Some((page_no, slot));
        Ok(slot)
    }

    fn load(&mut self, id: SourceId, page_no: u64) -> Result<usize, ReadError> {
        let slot = if self.pages.len() < self.budget.pages {
            self.pages.push(Page {
                owner: None,
                bytes: Vec::with_capacity(PAGE_BYTES),
                last_used: 0,
            });
            self.pages.len() - 1
        } else {
            self.evict()
        };
        let source = self.sources[id.0 as usize].as_mut().expect("open source");
        let start = page_no * PAGE_BYTES as u64;
        let len = (source.len - start).min(PAGE_BYTES as u64) as usize;
        let page = &mut self.pages[slot];
        page.bytes.resize(len, 0);
        read_at(source, start, &mut page.bytes)?;
        page.owner = Some((id, page_no));
        self.index.insert((id, page_no), slot);
        Ok(slot)
    }

    /// Frees the least recently used page and returns its slot.
    fn evict(&mut self) -> usize {
        let (slot, _) = self
            .pages
            .iter()
            .enumerate()
            .min_by_key(|(_, page)| page.last_used)
            .expect("the budget allows at least one page");
        if let Some((owner, page_no)) = self.pages[slot].owner.take() {
            self.index.remove(&(owner, page_no));
            if let Some(source) = self.sources[owner.0 as usize].as_mut()
                && source.last.is_some_and(|(_, last_slot)| last_slot == slot)
            {
                source.last = None;
            }
        }
        slot
    }
}

fn read_at(source: &mut Source, offset: u64, buf: &mut [u8]) -> Result<(), ReadError> {
    source
        .file
        .seek(SeekFrom::Start(offset))
        .map_err(ReadError::Io)?;
    source.file.read_exact(buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            // The file shrank after it was opened.
            ReadError::PastEnd {
                offset,
                len: buf.len() as u64,
                file_len: source.len,
            }
        } else {
            ReadError::Io(e)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::TempFile;
    use super::*;

    fn cache_over(bytes: &[u8], budget_pages: usize) -> (PageCache, SourceId, TempFile) {
        let file = TempFile::with(bytes);
        let mut cache = PageCache::new(Budget {
            pages: budget_pages,
        });
        let id = cache.add(File::open(&file.0).unwrap(), bytes.len() as u64);
        (cache, id, file)
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn reads_within_across_and_beyond_pages_under_a_tight_budget() {
        let bytes = pattern(PAGE_BYTES * 10 + 123);
        let (mut cache, id, _path) = cache_over(&bytes, 8);
        for (offset, len) in [
            (0, 16),
            (PAGE_BYTES - 8, 16),
            (PAGE_BYTES * 3 + 5, PAGE_BYTES * 2),
            (1, PAGE_BYTES * 7),
            (PAGE_BYTES * 10, 123),
            (5, 0),
        ] {
            let got = cache.read(id, offset as u64, len).unwrap();
            assert_eq!(got, &bytes[offset..offset + len], "at {offset}+{len}");
        }
        assert!(cache.pages.len() <= 8);
        assert!(matches!(
            cache.read(id, (bytes.len() - 4) as u64, 8),
            Err(ReadError::PastEnd { .. })
        ));
        assert!(matches!(
            cache.read(id, u64::MAX - 2, 8),
            Err(ReadError::PastEnd { .. })
        ));
    }

    #[test]
    fn evicts_the_least_recently_used_page() {
        let bytes = pattern(PAGE_BYTES * 20);
        let (mut cache, id, _path) = cache_over(&bytes, 8);
        for page in 0..20u64 {
            cache.read(id, page * PAGE_BYTES as u64, 8).unwrap();
            cache.read(id, 0, 8).unwrap(); // page 0 stays hot
        }
        assert!(cache.index.contains_key(&(id, 0)));
        assert!(!cache.index.contains_key(&(id, 1)));
        assert_eq!(cache.index.len(), 8);
        cache.remove(id);
        assert!(cache.index.is_empty());
    }
}
