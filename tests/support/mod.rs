//! Shared by the end-to-end tests: the real binary with a private component cache, and (in
//! `fixtures`) the workspace and the test-fixture plugins.

#![allow(dead_code)] // each test binary uses a different part

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

mod fixtures;
#[allow(unused_imports)] // each test binary uses a different part
pub use fixtures::{fixture, workspace};

/// The real `factbuoy` binary, with this test binary's private component cache.
pub fn factbuoy() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_factbuoy"));
    command.env("FACTBUOY_CACHE_DIR", cache_dir());
    command
}

/// A fresh cache directory per test binary, so tests never share compiled code with the user.
pub fn cache_dir() -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap())
        .path()
        .to_owned()
}
