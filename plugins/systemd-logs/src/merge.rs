//! Interleaving the entries of several journal files as journalctl does (systemd's
//! `sd_journal_next`).
//!
//! Each file offers its next matching entry. journalctl takes the earliest by this comparison
//! (`journal_file_compare_locations`): entries from the same sequence-number source compare by
//! sequence number; otherwise, from the same boot, by monotonic time; otherwise by realtime,
//! then by the entry's content hash. A tie keeps the file listed first. Before offering an
//! entry, a file skips those not after the entry shown last (`compare_with_location`): that is
//! how journalctl shows an entry stored in two files once, and also why, when clocks disagree,
//! it drops entries that would go back in time. The comparison is not a total order, so this
//! keeps journalctl's exact procedure, a scan over the files per entry, rather than a heap.

use std::cmp::Ordering;

use crate::filter::{Classifier, Filter};
use crate::journal::{EntryMeta, EntryWalk, Id128, JournalFile, PageCache};
use crate::problems::Problems;

/// One file taking part in the merge.
pub struct Source {
    pub file: JournalFile,
    walk: EntryWalk,
    classifier: Option<Classifier>,
    /// The entry this file offers next, and its data object offsets.
    candidate: Option<(EntryMeta, Vec<u64>)>,
    /// The candidate was shown: move on before offering again.
    consumed: bool,
    pub exhausted: bool,
}

impl Source {
    pub fn new(file: JournalFile, walk: EntryWalk, classifier: Option<Classifier>) -> Self {
        Source {
            file,
            walk,
            classifier,
            candidate: None,
            consumed: false,
            exhausted: false,
        }
    }

    fn seqnum_id(&self) -> &Id128 {
        &self.file.header.seqnum_id
    }

    /// Reads the file's next entry that passes the filter into `candidate`.
    fn advance(&mut self, cache: &mut PageCache, filter: &Filter, problems: &mut Problems) {
        let mut items = self
            .candidate
            .take()
            .map(|(_, items)| items)
            .unwrap_or_default();
        while let Some((meta, entry_items)) = self.walk.next(&self.file, cache, problems) {
            if let Some(classifier) = &self.classifier
                && !filter.accepts(classifier.bits(entry_items))
            {
                continue;
            }
            items.clear();
            items.extend_from_slice(entry_items);
            self.candidate = Some((meta, items));
            return;
        }
        self.exhausted = true;
    }
}

/// The entry shown last, as journalctl remembers its location.
struct Location {
    meta: EntryMeta,
    seqnum_id: Id128,
    source: usize,
}

/// The merge over all files.
pub struct Merger {
    pub sources: Vec<Source>,
    location: Option<Location>,
}

impl Merger {
    pub fn new(sources: Vec<Source>) -> Self {
        Merger {
            sources,
            location: None,
        }
    }

    /// The index of the source whose candidate comes next, or `None` when all are done. The
    /// entry is [`Merger::entry`] until the next call.
    pub fn next(
        &mut self,
        cache: &mut PageCache,
        filter: &Filter,
        problems: &mut Problems,
    ) -> Option<usize> {
        let mut best: Option<(usize, EntryMeta, Id128)> = None;
        for index in 0..self.sources.len() {
            let source = &mut self.sources[index];
            if source.exhausted {
                continue;
            }
            if source.consumed || source.candidate.is_none() {
                source.consumed = false;
                source.advance(cache, filter, problems);
            }
            // Skip what is not after the entry shown last, as journalctl does.
            while let (Some((meta, _)), Some(location)) = (&source.candidate, &self.location) {
                let same_file = index == location.source;
                if compare_with_location(meta, source.seqnum_id(), location, same_file)
                    == Ordering::Greater
                {
                    break;
                }
                source.advance(cache, filter, problems);
            }
            let Some((meta, _)) = &source.candidate else {
                continue;
            };
            let (meta, seqnum_id) = (*meta, *source.seqnum_id());
            let earlier = best.as_ref().is_none_or(|(_, best_meta, best_seqnum_id)| {
                compare_locations(&meta, &seqnum_id, best_meta, best_seqnum_id) == Ordering::Less
            });
            if earlier {
                best = Some((index, meta, seqnum_id));
            }
        }
        let (chosen, meta, seqnum_id) = best?;
        self.location = Some(Location {
            meta,
            seqnum_id,
            source: chosen,
        });
        self.sources[chosen].consumed = true;
        Some(chosen)
    }
    /// The entry [`Merger::next`] chose from `source`: its metadata and data object offsets.
    pub fn entry(&self, source: usize) -> (&EntryMeta, &[u64]) {
        let (meta, items) = self.sources[source]
            .candidate
            .as_ref()
            .expect("next chose this source");
        (meta, items)
    }
}

/// `journal_file_compare_locations`: which of two files' current entries comes first.
fn compare_locations(a: &EntryMeta, a_source: &Id128, b: &EntryMeta, b_source: &Id128) -> Ordering {
    if a.boot_id == b.boot_id
        && a.monotonic == b.monotonic
        && a.realtime == b.realtime
        && a.xor_hash == b.xor_hash
        && a_source == b_source
        && a.seqnum == b.seqnum
    {
        return Ordering::Equal;
    }
    compare_by_clocks(a, a_source, b, b_source)
}

/// `compare_with_location`: how a file's entry relates to the entry shown last. The same entry
/// seen in another file compares equal, so it is skipped.
fn compare_with_location(
    entry: &EntryMeta,
    source: &Id128,
    location: &Location,
    same_file: bool,
) -> Ordering {
    let shown = &location.meta;
    if entry.boot_id == shown.boot_id
        && entry.realtime == shown.realtime
        && entry.xor_hash == shown.xor_hash
        && *source == location.seqnum_id
        && entry.seqnum == shown.seqnum
        && !same_file
    {
        return Ordering::Equal;
    }
    compare_by_clocks(entry, source, shown, &location.seqnum_id)
}

fn compare_by_clocks(a: &EntryMeta, a_source: &Id128, b: &EntryMeta, b_source: &Id128) -> Ordering {
    if a_source == b_source {
        let order = a.seqnum.cmp(&b.seqnum);
        if order != Ordering::Equal {
            return order;
        }
    }
    if a.boot_id == b.boot_id {
        let order = a.monotonic.cmp(&b.monotonic);
        if order != Ordering::Equal {
            return order;
        }
    }
    a.realtime
        .cmp(&b.realtime)
        .then(a.xor_hash.cmp(&b.xor_hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seqnum: u64, boot: u8, monotonic: u64, realtime: u64) -> EntryMeta {
        EntryMeta {
            offset: 0,
            seqnum,
            realtime,
            monotonic,
            boot_id: Id128([boot; 16]),
            xor_hash: seqnum * 7,
        }
    }

    #[test]
    fn one_source_orders_by_seqnum_whatever_the_clocks_say() {
        let s = Id128([1; 16]);
        let a = entry(1, 1, 500, 900);
        let b = entry(2, 2, 100, 100);
        assert_eq!(compare_locations(&a, &s, &b, &s), Ordering::Less);
    }

    #[test]
    fn one_boot_orders_by_monotonic_time_before_realtime() {
        let (s, t) = (Id128([1; 16]), Id128([2; 16]));
        let a = entry(9, 1, 100, 900);
        let b = entry(1, 1, 200, 100);
        assert_eq!(compare_locations(&a, &s, &b, &t), Ordering::Less);
        let c = entry(1, 2, 50, 100);
        assert_eq!(compare_locations(&a, &s, &c, &t), Ordering::Greater);
    }

    #[test]
    fn the_same_entry_in_another_file_is_not_beyond_it() {
        let (s, t) = (Id128([1; 16]), Id128([2; 16]));
        let shown = entry(5, 1, 100, 900);
        let location = Location {
            meta: shown,
            seqnum_id: s,
            source: 0,
        };
        assert_eq!(
            compare_with_location(&shown, &s, &location, false),
            Ordering::Equal
        );
        // A copy under another sequence-number source compares equal by its clocks.
        assert_eq!(
            compare_with_location(&shown, &t, &location, false),
            Ordering::Equal
        );
        let later = entry(6, 1, 101, 901);
        assert_eq!(
            compare_with_location(&later, &s, &location, true),
            Ordering::Greater
        );
    }
}
