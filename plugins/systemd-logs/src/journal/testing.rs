//! Helpers for the reader's unit tests: temporary files and the committed journal fixtures.

use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A file in the temporary directory, removed when dropped.
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn with(bytes: &[u8]) -> TempFile {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "systemd-logs-test-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::write(&path, bytes).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A committed fixture (`tests/fixtures/journal/<path>.zst`), decompressed.
pub fn fixture(path: &str) -> TempFile {
    let compressed = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/journal")
        .join(format!("{path}.zst"));
    let file = std::fs::File::open(&compressed).unwrap();
    let mut bytes = Vec::new();
    ruzstd::decoding::StreamingDecoder::new(file)
        .unwrap()
        .read_to_end(&mut bytes)
        .unwrap();
    TempFile::with(&bytes)
}

/// Every committed fixture's path, as [`fixture`] takes it.
pub const FIXTURES: &[&str] = &[
    "3f2b7c1e9d8a4b6c8e0f1a2b3c4d5e6f/system.journal",
    "3f2b7c1e9d8a4b6c8e0f1a2b3c4d5e6f/user-1000.journal",
    "3f2b7c1e9d8a4b6c8e0f1a2b3c4d5e6f/system@0b0b0b0b0b0b4b0b8b0b0b0b0b0b0b01-0000000000000001-000609fa8b5a1c3e.journal",
    "3f2b7c1e9d8a4b6c8e0f1a2b3c4d5e6f/system@b2b2b2b2b2b24b2b8b2b2b2b2b2b2b03-0000000000000001-00060a24a2b5c000.journal",
    "3f2b7c1e9d8a4b6c8e0f1a2b3c4d5e6f/system@0000000000000000-dup.journal~",
    "7d6c5b4a39284716a5b4c3d2e1f00112/system.journal",
];
