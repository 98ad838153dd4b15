//! JavaScript plugins for the tests: the toolchain from toolchains/js/install.sh (componentize-js
//! and jco, pinned), and components built from a JavaScript project by the real `factbuoy plugin
//! build`, cached by the hash of everything that goes into them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::workspace;

/// The toolchain's `node_modules`, installed once by toolchains/js/install.sh; `None` (the test is
/// skipped, saying so) when npm is missing outside CI. Under CI (`CI` set) a missing toolchain
/// fails the test.
pub fn node_modules() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let has_npm = Command::new("npm")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !has_npm && std::env::var_os("CI").is_none() {
            eprintln!(
                "skipped: npm (Node.js) is not installed; tests/prerequisites.sh installs it"
            );
            return None;
        }
        let out = Command::new(workspace().join("toolchains/js/install.sh"))
            .output()
            .expect("running toolchains/js/install.sh");
        assert!(
            out.status.success(),
            "toolchains/js/install.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()))
    })
    .clone()
}

/// PATH with the toolchain's `.bin` first, so `factbuoy plugin build` finds componentize-js.
pub fn path_with_toolchain(node_modules: &Path) -> std::ffi::OsString {
    let mut dirs = vec![node_modules.join(".bin")];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).unwrap()
}

/// The component built from the JavaScript project `dir` (an `app.js` using the SDK in
/// guest-sdk/js) by `factbuoy plugin build`, unless this exact source was built before: the
/// cache (outside the repo, in the temp directory) is keyed by the sha-256 of the project's
/// files, the SDK, the WIT and the toolchain's lock, and says on stderr which it did.
pub fn component(node_modules: &Path, dir: &Path) -> PathBuf {
    let sdk = workspace().join("guest-sdk/js/factbuoy-plugin");
    let wit = workspace().join("wit");
    let lock = std::fs::read(workspace().join("toolchains/js/package-lock.json")).unwrap();
    super::built::component(
        "factbuoy-js-components",
        &lock,
        &[dir, &sdk, &wit],
        sources,
        dir,
        |into| {
            eprintln!("{}: building with factbuoy plugin build", dir.display());
            let output = super::factbuoy()
                .args(["plugin", "build"])
                .arg(dir)
                .env("PATH", path_with_toolchain(node_modules))
                .output()
                .expect("running factbuoy plugin build");
            assert!(
                output.status.success(),
                "factbuoy plugin build failed for {}: {}",
                dir.display(),
                String::from_utf8_lossy(&output.stderr)
            );
            let built = PathBuf::from(String::from_utf8(output.stdout).unwrap().trim());
            std::fs::copy(&built, into).unwrap();
        },
    )
}

/// The files below `dir` a build reads (not its output nor installed packages), in path order.
fn sources(dir: &Path) -> Vec<PathBuf> {
    super::files_below(dir, &["target", "node_modules"], |path| {
        path.extension()
            .is_some_and(|e| e == "js" || e == "json" || e == "wit")
    })
}
