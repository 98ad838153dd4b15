//! One run: find the journal files, open them, merge their entries in journalctl's order and
//! stream them into the artifact, reporting progress and problems on the way.

use std::fs::File;

use factbuoy_guest::prelude::*;

use crate::discover::{self, JOURNAL_DIRS};
use crate::filter::Filter;
use crate::journal::decompress::MAX_PAYLOAD_BYTES;
use crate::journal::{Budget, EntryWalk, Id128, JournalFile, ObjectError, PageCache};
use crate::merge::{Merger, Source};
use crate::output::{Fields, Format, Rejected};
use crate::problems::Problems;
use crate::settings::{Boot, Settings};

/// Memory for cached pages of journal files, shared by all of them.
const CACHE_BYTES: usize = 96 << 20;
/// Most payload bytes one entry may hold; larger fields are left out with a warning.
const MAX_ENTRY_BYTES: usize = 2 * MAX_PAYLOAD_BYTES;
/// Entries between progress reports.
const PROGRESS_EVERY: u64 = 100_000;
/// Where the running boot's id is, below a granted `/proc/sys/kernel/random`.
pub const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

pub fn run(settings: Settings) -> Result<(), GatherError> {
    let mut problems = Problems::default();
    let found = discover::journal_files(&mut problems);
    if found.directories == 0 {
        return Err(GatherError::Unavailable(format!(
            "no journal here: neither {} exists or can be read (grant read:/var/log/journal and \
             read:/run/log/journal, or point --root at the host's root)",
            JOURNAL_DIRS.join(" nor ")
        )));
    }
    let boot = match &settings.boot {
        Boot::All => None,
        Boot::Id(id) => Some(*id),
        Boot::Current => Some(current_boot()?),
    };
    let filter = Filter::new(&settings.units, settings.priorities, boot)
        .map_err(GatherError::InvalidParameters)?;
    if found.files.is_empty() {
        problems.warn(
            "journal",
            format!("no journal files in {}", JOURNAL_DIRS.join(" or ")),
        );
    }

    let mut cache = PageCache::new(Budget::bytes(CACHE_BYTES));
    let mut sources = Vec::new();
    for path in &found.files {
        let name = path.display().to_string();
        let opened = File::open(path)
            .map_err(|e| format!("cannot open it: {e}"))
            .and_then(|file| JournalFile::open(&mut cache, name.clone(), file));
        let file = match opened {
            Ok(file) => file,
            Err(e) => {
                problems.warn(&name, format!("skipped: {e}"));
                continue;
            }
        };
        if let Some((len, should)) = file.truncated() {
            problems.warn(
                &name,
                format!(
                    "the file is truncated: {len} bytes where its header describes {should}; \
                     reading what is there"
                ),
            );
        }
        sources.push(open_source(
            file,
            &mut cache,
            settings.since,
            &filter,
            &mut problems,
        ));
    }
    let total_files = sources.len() as u64;
    send_problems(&mut problems);
    progress::report(0, total_files, "reading the journal");

    let format = settings.format;
    let mut out = output::create_buffered(format.artifact_name(), format.media_type())?;
    let mut merger = Merger::new(sources);
    let mut fields = Fields::default();
    let mut written = 0u64;
    let mut files_done = 0u64;
    let mut stopped_early = None;
    while let Some(chosen) = merger.next(&mut cache, &filter, &mut problems) {
        if settings
            .until
            .is_some_and(|until| merger.entry(chosen).0.realtime > until)
        {
            // journalctl stops at the first entry past --until.
            break;
        }
        read_entry(
            &merger,
            chosen,
            &mut cache,
            format,
            &mut fields,
            &mut problems,
        );
        format
            .write(&fields, &mut out)
            .map_err(output::into_gather_error)?;
        written += 1;

        let done_now = merger.sources.iter().filter(|s| s.exhausted).count() as u64;
        if done_now != files_done || written.is_multiple_of(PROGRESS_EVERY) {
            files_done = done_now;
            progress::report(
                files_done,
                total_files,
                &format!("{written} entries written"),
            );
            send_problems(&mut problems);
        }
        if settings.max_entries == Some(written) {
            stopped_early = Some(written);
            break;
        }
    }
    let artifact = out
        .into_inner()
        .map_err(|e| output::into_gather_error(e.into_error()))?;
    artifact.finish()?;
    for source in &merger.sources {
        source.file.close(&mut cache);
    }

    if let Some(limit) = stopped_early {
        problems.warn(
            "journal",
            format!("stopped after max_entries={limit} entries; later entries were left out"),
        );
    }
    problems.finish();
    send_problems(&mut problems);
    progress::report(
        total_files,
        total_files,
        &format!("{written} entries written from {total_files} journal files"),
    );
    Ok(())
}

/// A journal file ready to merge: positioned at `since` (or its start), with the filter's
/// matching data objects found once.
fn open_source(
    file: JournalFile,
    cache: &mut PageCache,
    since: Option<u64>,
    filter: &Filter,
    problems: &mut Problems,
) -> Source {
    let walk = match since {
        Some(since) => EntryWalk::from_realtime(&file, cache, since, problems),
        None => EntryWalk::from_start(&file),
    };
    let classifier = (!filter.is_empty()).then(|| filter.prepare(&file, cache, problems));
    Source::new(file, walk, classifier)
}

/// Reads the entry `merger` chose into `fields`, leaving out what journalctl leaves out and what
/// cannot be read (with a warning for the latter).
fn read_entry(
    merger: &Merger,
    chosen: usize,
    cache: &mut PageCache,
    format: Format,
    fields: &mut Fields,
    problems: &mut Problems,
) {
    let (meta, items) = merger.entry(chosen);
    let file = &merger.sources[chosen].file;
    fields.start(meta, &file.header.seqnum_id);
    for &item in items {
        let (buffer, start) = fields.payload_buffer();
        let room = MAX_ENTRY_BYTES.saturating_sub(start);
        let limit = format.payload_limit().min(room);
        match file.read_data(cache, item, buffer, limit) {
            Ok(payload) if payload.truncated && limit < format.payload_limit() => {
                fields.discard(start);
                problems.warn(
                    &file.path,
                    format!(
                        "an entry's fields together exceed {MAX_ENTRY_BYTES} bytes; left out the \
                         field at offset {item}"
                    ),
                );
            }
            Ok(payload) if payload.truncated && !matches!(format, Format::Json { all: false }) => {
                fields.discard(start);
                let too_large = ObjectError::TooLarge {
                    offset: item,
                    bytes: payload.len as u64,
                };
                problems.warn(&file.path, format!("left out a field: {too_large}"));
            }
            Ok(payload) => {
                match fields.accept(start, payload.truncated, format.name_search_limit()) {
                    Ok(()) | Err(Rejected::BootId | Rejected::NoName) => {}
                    Err(Rejected::InvalidName(name)) => problems.warn(
                        &file.path,
                        format!("left out a field with the invalid name {name:?} (offset {item})"),
                    ),
                }
            }
            Err(e) => {
                fields.discard(start);
                problems.warn(&file.path, format!("left out a field it cannot read: {e}"));
            }
        }
    }
}

/// The running boot's id, from the host's `/proc`.
fn current_boot() -> Result<Id128, GatherError> {
    let text = std::fs::read_to_string(BOOT_ID_PATH).map_err(|e| {
        GatherError::Unavailable(format!(
            "boot=current needs the running boot's id from {BOOT_ID_PATH}, which cannot be read \
             ({e}); grant read:/proc/sys/kernel/random, or give the boot id"
        ))
    })?;
    Id128::parse(text.trim()).ok_or_else(|| {
        GatherError::Failed(format!(
            "{BOOT_ID_PATH} holds {:?}, not a boot id",
            text.trim()
        ))
    })
}

fn send_problems(problems: &mut Problems) {
    for warning in problems.take() {
        progress::warn(&warning);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::testing::{FIXTURES, TempFile, fixture};

    /// Damage in random places, over and over, read through the whole pipeline with a filter:
    /// every run must end, without a panic (in the sandbox a panic is a trap that ends the run).
    #[test]
    fn randomly_damaged_copies_are_read_to_the_end_without_panicking() {
        let mut state = 0x2545f4914f6cdd1du64;
        let mut random = |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as usize
        };
        let filtered = Filter::new(&["unit-0*".into(), "sshd".into()], Some((0, 5)), None).unwrap();
        // A compact file, and one in the regular layout with 64-bit offsets.
        let pristines =
            [FIXTURES[0], FIXTURES[2]].map(|path| std::fs::read(&fixture(path).0).unwrap());
        // The loop guard counts from the undamaged files: a damaged header's own count is
        // whatever the damage made it.
        let pristine_entries = pristines.each_ref().map(|bytes| {
            let copy = TempFile::with(bytes);
            let mut cache = PageCache::new(Budget::bytes(4 << 20));
            let file =
                JournalFile::open(&mut cache, "pristine".into(), File::open(&copy.0).unwrap())
                    .unwrap();
            file.header.n_entries
        });
        const ROUNDS: usize = 200;
        // Rounds whose damaged file opened and went through the pipeline, and those of them
        // that still gave entries: a fuzz run that reads nothing proves nothing.
        let (mut read, mut gave_entries) = (0, 0);
        for round in 0..ROUNDS {
            let pristine = &pristines[round % 2];
            // Entries and data lie between the end of the data hash table and the tail object.
            let le64 =
                |at: usize| u64::from_le_bytes(pristine[at..at + 8].try_into().unwrap()) as usize;
            let objects_start = le64(104) + le64(112);
            let objects_span = le64(136) + 4096 - objects_start;
            let mut bytes = pristine.clone();
            for _ in 0..1 + random(40) {
                let at = objects_start + random(objects_span);
                let len = 1 + random(64);
                for byte in &mut bytes[at..at + len] {
                    *byte = random(256) as u8;
                }
            }
            if round % 5 == 0 {
                bytes.truncate(objects_start + random(objects_span));
            }
            if round % 7 == 0 {
                // The header's sizes, offsets and counts.
                let at = 88 + random(176);
                for byte in &mut bytes[at..at + 8] {
                    *byte = random(256) as u8;
                }
            }
            let damaged = TempFile::with(&bytes);
            let mut cache = PageCache::new(Budget::bytes(4 << 20));
            let mut problems = Problems::default();
            let file = File::open(&damaged.0).unwrap();
            let Ok(file) = JournalFile::open(&mut cache, "damaged".into(), file) else {
                continue;
            };
            read += 1;
            let most = pristine_entries[round % 2].max(1000).saturating_mul(2);
            let filter = if round % 2 == 0 {
                Filter::default()
            } else {
                filtered.clone()
            };
            let since =
                (round % 3 == 0).then(|| 1_700_000_000_000_000 + random(600) as u64 * 1_000_000);
            let source = open_source(file, &mut cache, since, &filter, &mut problems);
            let mut merger = Merger::new(vec![source]);
            let format = [
                Format::Json { all: false },
                Format::Json { all: true },
                Format::Export,
            ][round % 3];
            let mut fields = Fields::default();
            let mut out = Vec::new();
            let mut entries = 0;
            while let Some(chosen) = merger.next(&mut cache, &filter, &mut problems) {
                entries += 1;
                assert!(entries <= most, "round {round} loops");
                read_entry(
                    &merger,
                    chosen,
                    &mut cache,
                    format,
                    &mut fields,
                    &mut problems,
                );
                format.write(&fields, &mut out).unwrap();
                out.clear();
            }
            if entries > 0 {
                gave_entries += 1;
            }
        }
        eprintln!("{read} of {ROUNDS} damaged files opened, {gave_entries} gave entries");
        assert!(
            read >= ROUNDS / 2 && gave_entries >= ROUNDS / 4,
            "only {read} of {ROUNDS} damaged files opened and {gave_entries} gave entries: the \
             damage no longer reaches the reader"
        );
    }
}
