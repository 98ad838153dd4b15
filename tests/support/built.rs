//! Components the tests build from Python or JavaScript sources, kept between test runs (in the
//! temp directory, outside the repo) under the sha-256 of everything that goes into them: a
//! toolchain takes seconds per build, and most runs change none of those files.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The component built from `project` by `build` (which writes it to the path it is given),
/// unless these exact inputs were built before: `toolchain` (what identifies the tools) and the
/// files `sources` lists below each of `roots`. Kept in `<temp>/<cache>/`; says on stderr which
/// it did.
pub fn component(
    cache: &str,
    toolchain: &[u8],
    roots: &[&Path],
    sources: impl Fn(&Path) -> Vec<PathBuf>,
    project: &Path,
    build: impl FnOnce(&Path),
) -> PathBuf {
    let mut hasher = Sha256::new();
    hasher.update(toolchain);
    for root in roots {
        for file in sources(root) {
            hasher.update(
                file.strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .as_bytes(),
            );
            hasher.update(std::fs::read(&file).unwrap());
        }
    }
    let key = hex::encode(hasher.finalize());
    let cache = std::env::temp_dir().join(cache);
    std::fs::create_dir_all(&cache).unwrap();
    let wasm = cache.join(format!("{key}.wasm"));
    if wasm.exists() {
        eprintln!(
            "{}: using the component built before from the same sources, {}",
            project.display(),
            wasm.display()
        );
        return wasm;
    }
    // Written under another name first, so a concurrent or interrupted build is never taken for
    // a finished one.
    let partial = cache.join(format!("{key}.{}.partial", std::process::id()));
    build(&partial);
    std::fs::rename(&partial, &wasm).unwrap();
    wasm
}
