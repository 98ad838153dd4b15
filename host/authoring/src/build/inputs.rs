//! Whether a Python or JavaScript project needs building again: everything the build reads
//! (the project's files, the SDK and the contract when they come from a checkout, the toolchain's
//! version, this factbuoy's version) hashed into one digest, kept beside the component.
//!
//! A componentize tool takes 10 to 30 s and its output is not reproducible (every build is a new
//! component, so a new entry in the compilation cache); skipping it when the digest is the one
//! recorded for the component that is there makes an unchanged project build in well under a
//! second. Rust needs none of this: cargo already rebuilds only what changed.
//!
//! The record is `target/<name>.wasm.inputs`: the digest and the component's size and
//! modification time, so that a component replaced or removed since is built again.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, IoContext as _};

/// Folders of a project that are never inputs: build output, environments, installed packages.
pub(super) const NOT_INPUTS: &[&str] = &["target", ".venv", "node_modules", ".git", "__pycache__"];

/// The digest of a build's inputs: the files below `project` (but [`NOT_INPUTS`]), the files of
/// each of `outside` (a file or a folder: an SDK or contract from outside the project), and
/// `toolchain` (what identifies the tools and their versions).
pub fn digest(project: &Path, outside: &[&Path], toolchain: &str) -> Result<String, Error> {
    let mut hasher = Sha256::new();
    hasher.update(format!("factbuoy {}\n", env!("CARGO_PKG_VERSION")));
    hasher.update(format!("toolchain {toolchain}\n"));
    for root in std::iter::once(project).chain(outside.iter().copied()) {
        hasher.update(format!("root {}\n", root.display()));
        for file in files_below(root)? {
            let bytes =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let relative = file.strip_prefix(root).unwrap_or(&file);
            // Name and length first, so that no two sets of files hash the same stream.
            hasher.update(format!("file {} {}\n", relative.display(), bytes.len()));
            hasher.update(&bytes);
        }
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Whether `path` is one of the files the digest of `project` covers: below it, and not in one
/// of the [`NOT_INPUTS`] (an SDK installed in `.venv` or `node_modules` is not).
pub fn covers(project: &Path, path: &Path) -> bool {
    path.strip_prefix(project).is_ok_and(|relative| {
        !relative
            .components()
            .any(|part| NOT_INPUTS.iter().any(|skip| part.as_os_str() == *skip))
    })
}

/// The files below `root` (`root` itself when it is a file) but [`NOT_INPUTS`], in path order.
pub(super) fn files_below(root: &Path) -> Result<Vec<PathBuf>, Error> {
    if root.is_file() {
        return Ok(vec![root.to_owned()]);
    }
    let mut files = Vec::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        let reading = || format!("reading {}", dir.display());
        for entry in std::fs::read_dir(&dir).with_context(reading)? {
            let entry = entry.with_context(reading)?;
            let path = entry.path();
            if entry.file_type().with_context(reading)?.is_dir() {
                if !NOT_INPUTS.iter().any(|skip| entry.file_name() == *skip) {
                    dirs.push(path);
                }
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Where the digest of the inputs of `wasm` is recorded.
fn record_path(wasm: &Path) -> PathBuf {
    let mut name = wasm.as_os_str().to_owned();
    name.push(".inputs");
    PathBuf::from(name)
}

/// What identifies the component file that was built: its size and modification time.
fn identity(wasm: &Path) -> Option<String> {
    let m = std::fs::metadata(wasm).ok()?;
    Some(format!("{} {}.{}", m.size(), m.mtime(), m.mtime_nsec()))
}

/// Whether `wasm` was built from inputs with this `digest` and has not changed since.
pub fn up_to_date(wasm: &Path, digest: &str) -> bool {
    let Some(identity) = identity(wasm) else {
        return false;
    };
    std::fs::read_to_string(record_path(wasm))
        .is_ok_and(|record| record == format!("{digest}\n{identity}\n"))
}

/// Records that `wasm` was just built from inputs with this `digest`. Failing to record only
/// costs the next build its time: it is logged, not fatal.
pub fn record(wasm: &Path, digest: &str) {
    let record = record_path(wasm);
    let written = match identity(wasm) {
        Some(identity) => {
            std::fs::write(&record, format!("{digest}\n{identity}\n")).map_err(|e| e.to_string())
        }
        None => Err("the component is not there".to_owned()),
    };
    if let Err(e) = written {
        tracing::warn!(
            "could not record the build's inputs in {} ({e}); the next build runs the \
             toolchain again",
            record.display()
        );
    }
}

/// Forgets what `wasm` was built from, before a build that may fail halfway.
pub fn forget(wasm: &Path) {
    let _ = std::fs::remove_file(record_path(wasm));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_changes_with_any_input_and_ignores_build_output() {
        let tmp = tempfile::tempdir().unwrap();
        let (project, sdk) = (tmp.path().join("p"), tmp.path().join("sdk"));
        std::fs::create_dir_all(project.join("target")).unwrap();
        std::fs::create_dir_all(project.join("lib/__pycache__")).unwrap();
        std::fs::create_dir_all(&sdk).unwrap();
        std::fs::write(project.join("app.py"), "x = 1\n").unwrap();
        std::fs::write(sdk.join("sdk.py"), "y = 1\n").unwrap();
        let first = digest(&project, &[&sdk], "tool 1").unwrap();

        std::fs::write(project.join("target/p.wasm"), "output").unwrap();
        std::fs::write(project.join("lib/__pycache__/a.pyc"), "cache").unwrap();
        assert_eq!(digest(&project, &[&sdk], "tool 1").unwrap(), first);

        assert_ne!(digest(&project, &[&sdk], "tool 2").unwrap(), first);
        std::fs::write(sdk.join("sdk.py"), "y = 2\n").unwrap();
        let sdk_changed = digest(&project, &[&sdk], "tool 1").unwrap();
        assert_ne!(sdk_changed, first);
        std::fs::write(project.join("lib/helper.py"), "").unwrap();
        assert_ne!(digest(&project, &[&sdk], "tool 1").unwrap(), sdk_changed);
    }

    #[test]
    fn an_sdk_installed_in_the_project_is_not_covered_by_its_files() {
        let project = Path::new("/p");
        assert!(covers(project, Path::new("/p/factbuoy_plugin")));
        assert!(!covers(
            project,
            Path::new("/p/.venv/lib/site-packages/factbuoy_plugin")
        ));
        assert!(!covers(
            project,
            Path::new("/p/node_modules/factbuoy-plugin/factbuoy-plugin")
        ));
        assert!(!covers(
            project,
            Path::new("/checkout/guest-sdk/python/factbuoy_plugin")
        ));
    }

    #[test]
    fn a_record_holds_until_the_component_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let wasm = tmp.path().join("p.wasm");
        assert!(!up_to_date(&wasm, "abc"));
        std::fs::write(&wasm, "component").unwrap();
        record(&wasm, "abc");
        assert!(up_to_date(&wasm, "abc"));
        assert!(!up_to_date(&wasm, "abd"));
        std::fs::write(&wasm, "another component").unwrap();
        assert!(!up_to_date(&wasm, "abc"));
        record(&wasm, "abc");
        forget(&wasm);
        assert!(!up_to_date(&wasm, "abc"));
    }
}
