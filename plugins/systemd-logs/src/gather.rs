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
        let walk = match settings.since {
            Some(since) => EntryWalk::from_realtime(&file, &mut cache, since, &mut problems),
            None => EntryWalk::from_start(&file),
        };
        let classifier =
            (!filter.is_empty()).then(|| filter.prepare(&file, &mut cache, &mut problems));
        sources.push(Source::new(file, walk, classifier));
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
        let (meta, items) = merger.entry(chosen);
        if settings.until.is_some_and(|until| meta.realtime > until) {
            // journalctl stops at the first entry past --until.
            break;
        }
        let source = &merger.sources[chosen];
        fields.start(meta, &source.file.header.seqnum_id);
        collect_fields(
            &source.file,
            &mut cache,
            items,
            format,
            &mut fields,
            &mut problems,
        );
        format
            .write(&fields, &mut out)
            .map_err(output::into_gather_error)?;
        written += 1;

        let done_now = merger.sources.iter().filter(|s| s.exhausted).count() as u64;
        if done_now != files_done || written % PROGRESS_EVERY == 0 {
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

/// Reads an entry's data objects into `fields`, leaving out what journalctl leaves out and what
/// cannot be read (with a warning for the latter).
fn collect_fields(
    file: &JournalFile,
    cache: &mut PageCache,
    items: &[u64],
    format: Format,
    fields: &mut Fields,
    problems: &mut Problems,
) {
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
            Ok(payload) => match fields.accept(start, payload.truncated, format) {
                Ok(()) | Err(Rejected::BootId | Rejected::NoName) => {}
                Err(Rejected::InvalidName(name)) => problems.warn(
                    &file.path,
                    format!("left out a field with the invalid name {name:?} (offset {item})"),
                ),
            },
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
