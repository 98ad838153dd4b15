//! Walking a file's entries in the order they were written.
//!
//! A journal file lists its entries in a chain of entry arrays. The walk follows that chain,
//! skips entries whose objects are damaged, stops cleanly where a truncated file ends, and, when
//! the chain itself is damaged, falls back to scanning the file object by object for the
//! remaining entries. Every problem is reported once, as a [`Problems`] warning; none loops.

use super::file::{EntryArray, EntryMeta, JournalFile, ObjectError, ObjectHeader};
use super::layout::*;
use super::pages::PageCache;
use crate::problems::Problems;

/// Where a file's entries come from next.
enum Source {
    /// The entry-array chain: the next item is `index` of `array`; `None` before the first array
    /// is read.
    Arrays {
        array: Option<EntryArray>,
        index: u64,
    },
    /// Object by object from `position`, after the chain proved damaged.
    Scan {
        position: u64,
    },
    Done,
}

/// The walk over one file's entries.
pub struct EntryWalk {
    source: Source,
    /// Entries taken from the chain, which the header's entry count bounds.
    taken: u64,
    /// Offset of the last item taken from the chain: items only ever increase.
    last_item: u64,
    /// The last entry handed out that read correctly: where a scan resumes.
    last_good: Option<EntryMeta>,
    /// Entry arrays left before a chain this long must be a loop.
    arrays_left: u64,
    /// Entries before this realtime are skipped (a seek that could not bisect).
    skip_before: Option<u64>,
    items: Vec<u64>,
}

impl EntryWalk {
    /// A walk from the file's first entry.
    pub fn from_start(file: &JournalFile) -> Self {
        EntryWalk {
            source: Source::Arrays {
                array: None,
                index: 0,
            },
            taken: 0,
            last_item: 0,
            last_good: None,
            arrays_left: file.chain_budget(),
            skip_before: None,
            items: Vec::new(),
        }
    }

    /// A walk from the first entry whose realtime is at or after `since`, found as journalctl
    /// finds it: by bisection, assuming realtime grows within a file.
    pub fn from_realtime(
        file: &JournalFile,
        cache: &mut PageCache,
        since: u64,
        problems: &mut Problems,
    ) -> Self {
        let mut walk = Self::from_start(file);
        match walk.bisect(file, cache, since) {
            Ok(()) => {}
            Err(e) => {
                // Read from the start instead, dropping what is too old; the entries themselves
                // are then checked one by one by `next`.
                if !matches!(e, ObjectError::Truncated { .. }) {
                    problems.warn(
                        &file.path,
                        format!("cannot search it by time ({e}); reading it from the start"),
                    );
                }
                walk = Self::from_start(file);
                walk.skip_before = Some(since);
            }
        }
        walk
    }

    fn bisect(
        &mut self,
        file: &JournalFile,
        cache: &mut PageCache,
        since: u64,
    ) -> Result<(), ObjectError> {
        let total = file.header.n_entries;
        let mut offset = file.header.entry_array_offset;
        let mut before = 0u64;
        while offset != 0 && before < total {
            self.arrays_left = self
                .arrays_left
                .checked_sub(1)
                .ok_or_else(|| chain_loop(offset))?;
            let array = file.entry_array(cache, offset)?;
            let count = array.capacity.min(total - before);
            let last = file.entry_array_item(cache, &array, count - 1)?;
            // An unused slot (0) ends the list early: search below it.
            let count = if last == 0 {
                self.first_unused(file, cache, &array, count)?
            } else {
                count
            };
            if count == 0 {
                break;
            }
            let last = file.entry_array_item(cache, &array, count - 1)?;
            if file.read_entry_meta(cache, last)?.realtime < since {
                before += count;
                offset = array.next;
                continue;
            }
            // The first item whose entry is at or after `since`.
            let (mut low, mut high) = (0u64, count - 1);
            while low < high {
                let middle = low + (high - low) / 2;
                let item = file.entry_array_item(cache, &array, middle)?;
                if file.read_entry_meta(cache, item)?.realtime < since {
                    low = middle + 1;
                } else {
                    high = middle;
                }
            }
            self.last_item = if low > 0 {
                file.entry_array_item(cache, &array, low - 1)?
            } else {
                0
            };
            self.taken = before + low;
            self.source = Source::Arrays {
                array: Some(array),
                index: low,
            };
            return Ok(());
        }
        self.source = Source::Done;
        Ok(())
    }

    /// How many leading items of `array` (among its first `count`) are in use.
    fn first_unused(
        &self,
        file: &JournalFile,
        cache: &mut PageCache,
        array: &EntryArray,
        count: u64,
    ) -> Result<u64, ObjectError> {
        let (mut low, mut high) = (0u64, count);
        while low < high {
            let middle = low + (high - low) / 2;
            if file.entry_array_item(cache, array, middle)? != 0 {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        Ok(low)
    }

    /// The next entry, its data object offsets in `items`; `None` at the end of the file.
    pub fn next(
        &mut self,
        file: &JournalFile,
        cache: &mut PageCache,
        problems: &mut Problems,
    ) -> Option<(EntryMeta, &[u64])> {
        loop {
            let offset = match &self.source {
                Source::Done => return None,
                Source::Arrays { .. } => match self.next_item(file, cache, problems) {
                    Some(offset) => offset,
                    // The chain ended (now Done) or proved damaged (now Scan).
                    None => continue,
                },
                Source::Scan { .. } => self.next_scanned(file, cache)?,
            };
            let mut items = std::mem::take(&mut self.items);
            let read = file.read_entry(cache, offset, &mut items);
            self.items = items;
            match read {
                Ok(meta) => {
                    if let Some(since) = self.skip_before {
                        if meta.realtime < since {
                            continue;
                        }
                        self.skip_before = None;
                    }
                    self.last_good = Some(meta);
                    return Some((meta, &self.items));
                }
                Err(ObjectError::Truncated { offset }) => {
                    let listed_before = match self.source {
                        Source::Arrays { .. } => Some(self.taken - 1),
                        _ => None,
                    };
                    self.report_truncation(file, offset, listed_before, problems);
                    return None;
                }
                Err(e) => problems.warn(&file.path, format!("skipped an entry: {e}")),
            }
        }
    }

    /// The offset of the next entry in the chain, moving along it; `None` at its end.
    fn next_item(
        &mut self,
        file: &JournalFile,
        cache: &mut PageCache,
        problems: &mut Problems,
    ) -> Option<u64> {
        loop {
            let Source::Arrays { array, index } = &mut self.source else {
                return None;
            };
            if self.taken >= file.header.n_entries {
                self.source = Source::Done;
                return None;
            }
            let next_array = match array {
                Some(current) if *index < current.capacity => None,
                Some(current) => Some(current.next),
                None => Some(file.header.entry_array_offset),
            };
            if let Some(offset) = next_array {
                if offset == 0 {
                    self.report_short_chain(file, problems);
                    self.source = Source::Done;
                    return None;
                }
                match self.arrays_left.checked_sub(1) {
                    Some(left) => self.arrays_left = left,
                    None => {
                        self.damaged_chain(file, chain_loop(offset), problems);
                        continue;
                    }
                }
                match file.entry_array(cache, offset) {
                    Ok(read) => {
                        *array = Some(read);
                        *index = 0;
                    }
                    Err(ObjectError::Truncated { offset }) => {
                        let listed_before = Some(self.taken);
                        self.report_truncation(file, offset, listed_before, problems);
                        return None;
                    }
                    Err(e) => self.damaged_chain(file, e, problems),
                }
                continue;
            }
            let current = array.expect("an array is being read");
            let item = match file.entry_array_item(cache, &current, *index) {
                Ok(item) => item,
                Err(e) => {
                    self.damaged_chain(file, e, problems);
                    continue;
                }
            };
            *index += 1;
            if item == 0 {
                self.report_short_chain(file, problems);
                self.source = Source::Done;
                return None;
            }
            if item <= self.last_item {
                let e = ObjectError::Damaged {
                    offset: current.offset,
                    what: format!("entry array items go backwards (to offset {item})"),
                };
                self.damaged_chain(file, e, problems);
                continue;
            }
            self.last_item = item;
            self.taken += 1;
            return Some(item);
        }
    }

    /// Switches to scanning the file for entries after the last good one.
    fn damaged_chain(&mut self, file: &JournalFile, e: ObjectError, problems: &mut Problems) {
        let position = self
            .last_good
            .map_or(file.header.header_size, |meta| meta.offset);
        problems.warn(
            &file.path,
            format!(
                "its list of entries is damaged ({e}); looking for the remaining entries object \
                 by object from offset {position}"
            ),
        );
        self.source = Source::Scan { position };
    }

    /// The next plausible entry object at or after the scan position.
    fn next_scanned(&mut self, file: &JournalFile, cache: &mut PageCache) -> Option<u64> {
        let Source::Scan { position } = self.source else {
            return None;
        };
        let tail = file.header.tail_object_offset;
        let end = if tail >= file.header.header_size && tail < file.end() {
            tail + OBJECT_HEADER_SIZE
        } else {
            file.end()
        };
        let last_seqnum = self.last_good.map_or(0, |meta| meta.seqnum);
        let mut position = position;
        while position + OBJECT_HEADER_SIZE <= end {
            let header = match file.object_header(cache, position) {
                Ok(header) if plausible(&header, file.end() - position) => header,
                Ok(_) | Err(ObjectError::Damaged { .. }) => {
                    // Not an object boundary: try the next aligned position.
                    position += 8;
                    continue;
                }
                Err(_) => break,
            };
            let here = position;
            position += header.size.div_ceil(8) * 8;
            if header.kind == OBJECT_ENTRY && self.is_scanned_entry(file, cache, here, last_seqnum)
            {
                self.source = Source::Scan { position };
                return Some(here);
            }
        }
        self.source = Source::Done;
        None
    }

    /// Whether the object at `offset` is an intact entry written after the last good one: its
    /// data objects lie before it, as a writer appends them.
    fn is_scanned_entry(
        &mut self,
        file: &JournalFile,
        cache: &mut PageCache,
        offset: u64,
        last_seqnum: u64,
    ) -> bool {
        let mut items = std::mem::take(&mut self.items);
        let ok = match file.read_entry(cache, offset, &mut items) {
            Ok(meta) => {
                meta.seqnum > last_seqnum
                    && items.iter().all(|&item| {
                        item % 8 == 0 && item >= file.header.header_size && item < offset
                    })
            }
            Err(_) => false,
        };
        self.items = items;
        ok
    }

    /// Ends the walk where the file is cut short. `listed_before` counts the entries the chain
    /// lists before the cut, when the walk was following the chain.
    fn report_truncation(
        &mut self,
        file: &JournalFile,
        offset: u64,
        listed_before: Option<u64>,
        problems: &mut Problems,
    ) {
        let detail = match file.truncated() {
            Some((len, should)) => {
                format!("the file is truncated: {len} bytes where its header describes {should}")
            }
            None => format!("an object at offset {offset} lies past the end of the file"),
        };
        let lost = match listed_before {
            Some(before) => format!(
                "{} of the {} entries it lists are lost",
                file.header.n_entries.saturating_sub(before),
                file.header.n_entries
            ),
            None => "the entries after it are lost".to_owned(),
        };
        problems.warn(
            &file.path,
            format!("{detail}; read the entries before the cut, {lost}"),
        );
        self.source = Source::Done;
    }

    fn report_short_chain(&self, file: &JournalFile, problems: &mut Problems) {
        // A file being written may have counted an entry it has not linked yet.
        if self.taken < file.header.n_entries && file.header.state != STATE_ONLINE {
            problems.warn(
                &file.path,
                format!(
                    "its list of entries ends after {} of the {} entries its header counts",
                    self.taken, file.header.n_entries
                ),
            );
        }
    }
}

fn chain_loop(offset: u64) -> ObjectError {
    ObjectError::Damaged {
        offset,
        what: "the chain of entry arrays loops".into(),
    }
}

/// Whether an object header found while scanning looks like one a writer made: a known type,
/// reserved bytes clear, flags only on DATA objects, and a size that fits.
fn plausible(header: &ObjectHeader, room: u64) -> bool {
    (OBJECT_DATA..=OBJECT_TAG).contains(&header.kind)
        && header.reserved_clear
        && (header.flags == 0 || header.kind == OBJECT_DATA)
        && header.size <= room
}

#[cfg(test)]
mod tests {
    use super::super::pages::Budget;
    use super::super::testing::{FIXTURES, fixture};
    use super::*;

    fn open(cache: &mut PageCache, path: &str) -> (JournalFile, super::super::testing::TempFile) {
        let temp = fixture(path);
        let file = std::fs::File::open(&temp.0).unwrap();
        (
            JournalFile::open(cache, path.to_owned(), file).unwrap(),
            temp,
        )
    }

    fn collect(walk: &mut EntryWalk, file: &JournalFile, cache: &mut PageCache) -> Vec<EntryMeta> {
        let mut problems = Problems::default();
        let mut entries = Vec::new();
        while let Some((meta, _)) = walk.next(file, cache, &mut problems) {
            entries.push(meta);
        }
        assert!(problems.take().is_empty());
        entries
    }

    #[test]
    fn the_chain_and_a_scan_find_the_same_entries() {
        let mut cache = PageCache::new(Budget::bytes(4 << 20));
        for path in FIXTURES {
            let (file, _temp) = open(&mut cache, path);
            let chained = collect(&mut EntryWalk::from_start(&file), &file, &mut cache);
            assert_eq!(chained.len() as u64, file.header.n_entries, "{path}");
            assert!(
                chained.windows(2).all(|w| w[0].seqnum < w[1].seqnum),
                "{path}"
            );
            let mut scan = EntryWalk::from_start(&file);
            scan.source = Source::Scan {
                position: file.header.header_size,
            };
            assert_eq!(collect(&mut scan, &file, &mut cache), chained, "{path}");
        }
    }

    #[test]
    fn bisection_finds_the_first_entry_at_or_after_a_time() {
        let mut cache = PageCache::new(Budget::bytes(4 << 20));
        let (file, _temp) = open(&mut cache, FIXTURES[0]);
        let all = collect(&mut EntryWalk::from_start(&file), &file, &mut cache);
        let first = all[0].realtime;
        let last = all[all.len() - 1].realtime;
        for since in [
            0,
            first,
            first + 1,
            all[137].realtime,
            all[138].realtime - 1,
            last,
            last + 1,
        ] {
            let mut problems = Problems::default();
            let mut walk = EntryWalk::from_realtime(&file, &mut cache, since, &mut problems);
            let expected: Vec<_> = all
                .iter()
                .filter(|e| e.realtime >= since)
                .copied()
                .collect();
            assert_eq!(
                collect(&mut walk, &file, &mut cache),
                expected,
                "since {since}"
            );
        }
    }
}
