//! `systemd-logs`: the systemd journal, read natively inside the sandbox.
//!
//! Sonobuoy collects node logs by running `journalctl` chrooted into the host from a privileged
//! container. This plugin instead reads the journal files themselves, below the read-only
//! preopens `/var/log/journal` and `/run/log/journal`, and writes what `journalctl -o json` (or
//! `-o export`) would write for the same files: the same entries in the same order, the same
//! fields and values, the same `__CURSOR`. Only the order of fields within a JSON object
//! differs: journalctl's follows a hash table seeded afresh in every run.
//!
//! # Why its own journal reader
//!
//! A well-kept crate that reads journal files and builds for wasm32-wasip2 would have been the
//! first choice. The candidates on crates.io:
//!
//! - `sdjournal` 0.1.15 (the newest that builds with this project's Rust 1.95; 0.1.22 needs
//!   1.96) compiles for wasm32-wasip2 with its `lz4` and `zstd` features but cannot read there.
//!   Without `mmap` it reads each object through `File::try_clone`, which WASI does not support:
//!   run as a component, `Journal::open_dir` fails with "io error during read_at ...: operation
//!   not supported on this platform". Even where it reads, it allocates and reads per object,
//!   its XZ support binds the C liblzma (`xz2`), and it merges files by realtime and sequence
//!   number, which is not journalctl's order when clocks disagree.
//! - `systemd-journal-sdk` (Netdata) is GPL-3.0, which this Apache-2.0 project cannot take, and
//!   is built around `mmap`.
//! - `systemd-journal-reader` 0.1.1 streams one file, keeps every data object it met in an
//!   unbounded map, holds values as text (binary values cannot come out as journalctl writes
//!   them), and binds the C zstd library.
//!
//! So [`journal`] is a reader written for this plugin, module by module along the format's
//! specification, with pure-Rust decompressors (ruzstd, lz4_flex, lzma-rs) and a page cache of
//! fixed size in place of `mmap`; [`merge`] keeps journalctl's ordering procedure exactly.
//!
//! # Modules
//!
//! - [`settings`]: the parameters (`since`/`until` values as `factbuoy_linux::timespec` reads them);
//! - [`discover`]: finding journal files; [`journal`]: reading them;
//! - [`filter`]: journalctl's `-u`, `-p`, `-b` matches; [`merge`]: journalctl's order;
//! - [`output`]: journalctl's JSON and export formats; [`problems`]: warnings about damage;
//! - [`gather`]: one run, from files to artifact.

use factbuoy_guest::prelude::*;

mod discover;
mod filter;
mod gather;
mod journal;
mod merge;
mod output;
mod problems;
mod settings;

struct SystemdLogs;

impl Gatherer for SystemdLogs {
    fn describe() -> Description {
        let description = Description::new(
            "systemd-logs",
            env!("CARGO_PKG_VERSION"),
            "The systemd journal, read from its files inside the sandbox and written as \
             journalctl -o json (or -o export) writes it.",
        );
        settings::declare(description)
            .optional_capability(
                Capability::read("/var/log/journal"),
                "reads the persistent journal files",
            )
            .optional_capability(
                Capability::read("/run/log/journal"),
                "reads the volatile journal files",
            )
            .optional_capability(
                Capability::read("/proc/sys/kernel/random"),
                "reads the running boot's id, for boot=current",
            )
            .writes(
                Artifact::log(
                    output::Format::Json { all: false }.artifact_name(),
                    "the entries as journalctl -o json writes them, one JSON object per line (output=json)",
                )
                .media_type(output::Format::Json { all: false }.media_type()),
            )
            .writes(Artifact::opaque(
                output::Format::Export.artifact_name(),
                output::Format::Export.media_type(),
                "the entries in the journal export format, as journalctl -o export (output=export)",
            ))
    }

    fn gather(params: &Params) -> Result<(), GatherError> {
        let settings = settings::Settings::read(params, now())?;
        gather::run(settings)
    }
}

export_gatherer!(SystemdLogs);

/// The current time, from the sandbox's wall clock, in microseconds since the epoch.
fn now() -> u64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    factbuoy_linux::timespec::micros(since_epoch)
}
