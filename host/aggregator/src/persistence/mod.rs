//! What a run keeps on disk, and how it is written so that a stop at any moment loses nothing:
//! the run directory and its paths ([`run_dir`]), atomic and synced writes and other file-system steps ([`files`]), the
//! records each change writes before it takes effect ([`records`]), and the configuration and
//! state read back by a restarted aggregator ([`saved`]). Uploads and results on disk are the
//! crate's `upload` and `commit`, which write their records through here.

pub(crate) mod files;
pub(crate) mod records;
pub mod run_dir;
pub(crate) mod saved;
