//! A reader for systemd journal files, written for this plugin (the crate documentation says
//! why no existing crate was used).
//!
//! - [`layout`]: the on-disk format's offsets and flags, and the file header;
//! - [`pages`]: reading files through a page cache of bounded size;
//! - [`file`]: one file's objects, read with systemd's checks;
//! - [`walk`]: a file's entries in order, past damaged and truncated parts;
//! - [`decompress`]: XZ, LZ4 and Zstandard payloads.

pub mod decompress;
pub mod file;
pub mod layout;
pub mod pages;
#[cfg(test)]
pub mod testing;
pub mod walk;

pub use file::{EntryMeta, JournalFile, ObjectError};
pub use layout::Id128;
pub use pages::{Budget, PageCache};
pub use walk::EntryWalk;
