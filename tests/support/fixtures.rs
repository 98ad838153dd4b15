//! The workspace and the test-fixture plugins, built for wasm32-wasip2 on first use (once per
//! test binary; cargo's lock serialises concurrent builds). Separate from the rest of the
//! support so the runtime's benchmark can use it without the `factbuoy` binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root (these tests belong to host/cli, whose Cargo.toml declares them).
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
                "uptime",
            ])
            // One per frozen contract: freezing a version without its fixture fails here.
            .args(
                frozen_contracts()
                    .iter()
                    .flat_map(|version| ["-p".to_owned(), contract_fixture(version)]),
            )
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

/// The released contract versions, each frozen in `wit/since_v<version>/`, oldest first.
pub fn frozen_contracts() -> Vec<String> {
    let mut versions: Vec<String> = std::fs::read_dir(workspace().join("wit"))
        .expect("reading wit/")
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().into_string().ok()?;
            Some(name.strip_prefix("since_v")?.to_owned())
        })
        .collect();
    versions.sort_by_key(|v| {
        v.split('.')
            .map(|n| n.parse::<u64>().unwrap_or(u64::MAX))
            .collect::<Vec<_>>()
    });
    versions
}

/// The fixture crate built against frozen contract `version`: `contract-0-1-0` for 0.1.0.
pub fn contract_fixture(version: &str) -> String {
    format!("contract-{}", version.replace('.', "-"))
}
