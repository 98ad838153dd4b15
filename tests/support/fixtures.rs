//! The workspace and the test-fixture plugins, built for wasm32-wasip2 on first use (once per
//! test binary; cargo's lock serialises concurrent builds). Separate from the rest of the
//! support so the runtime's benchmark can use it without the `factbuoy` binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root (these tests belong to host/cli, through its `tests` link).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_owned()
}

/// Path to a fixture component from `tests/plugins/<crate>`.
pub fn fixture(crate_name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        let target_dir = workspace().join("target").join("wasm-fixtures");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(workspace())
            .args(["build", "--target", "wasm32-wasip2", "--profile", "plugin"])
            .args([
                "-p",
                "hostile",
                "-p",
                "not-a-gatherer",
                "-p",
                "future-contract",
                "-p",
                "contract-0-1-0",
                "-p",
                "uptime",
            ])
            .arg("--target-dir")
            .arg(&target_dir)
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("RUSTFLAGS")
            .status()
            .expect("running cargo to build the test fixtures");
        assert!(status.success(), "building the test fixture plugins failed");
        target_dir.join("wasm32-wasip2").join("plugin")
    });
    // Libraries are named with underscores, binaries keep their hyphens.
    let library = dir.join(format!("{}.wasm", crate_name.replace('-', "_")));
    if library.exists() {
        library
    } else {
        dir.join(format!("{crate_name}.wasm"))
    }
}
