//! Python plugins for the tests: componentize-py from tests/python/venv.sh, and components built
//! from a Python project with it, cached by the hash of everything that goes into them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use super::workspace;

/// The venv's bin directory holding componentize-py, made once by tests/python/venv.sh.
pub fn venv_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = Command::new(workspace().join("tests/python/venv.sh"))
            .output()
            .expect("running tests/python/venv.sh");
        assert!(
            out.status.success(),
            "tests/python/venv.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("bin")
    })
    .clone()
}

/// PATH with the venv's bin directory first, so the binary finds componentize-py.
pub fn path_with_venv() -> std::ffi::OsString {
    let mut dirs = vec![venv_bin()];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).unwrap()
}

/// The component built from the Python project `app_dir` (an `app.py` using the SDK in
/// guest-sdk/python) against the workspace's wit/. Built with componentize-py unless this exact
/// source was built before: the cache (outside the repo, in the temp directory) is keyed by the
/// sha-256 of the app's files, the SDK, the WIT and componentize-py's version, and says on
/// stderr which it did.
pub fn component(app_dir: &Path) -> PathBuf {
    let sdk = workspace().join("guest-sdk/python");
    let wit = workspace().join("wit");
    let mut hasher = Sha256::new();
    hasher.update(venv_bin().to_string_lossy().as_bytes());
    hasher.update(componentize_py_version().as_bytes());
    for dir in [app_dir, &sdk, &wit] {
        for file in python_sources(dir) {
            hasher.update(file.strip_prefix(dir).unwrap().to_string_lossy().as_bytes());
            hasher.update(std::fs::read(&file).unwrap());
        }
    }
    let key = hex::encode(hasher.finalize());
    let cache = std::env::temp_dir().join("factbuoy-python-components");
    std::fs::create_dir_all(&cache).unwrap();
    let wasm = cache.join(format!("{key}.wasm"));
    if wasm.exists() {
        eprintln!(
            "{}: using the component built before from the same sources, {}",
            app_dir.display(),
            wasm.display()
        );
        return wasm;
    }
    eprintln!("{}: building with componentize-py", app_dir.display());
    // Written under another name first, so a concurrent or interrupted build is never taken
    // for a finished one.
    let partial = cache.join(format!("{key}.{}.partial", std::process::id()));
    let status = Command::new(venv_bin().join("componentize-py"))
        .arg("-d")
        .arg(&wit)
        .args(["-w", "gatherer", "componentize", "app", "-p"])
        .arg(app_dir)
        .arg("-p")
        .arg(&sdk)
        .arg("-o")
        .arg(&partial)
        .status()
        .expect("running componentize-py");
    assert!(
        status.success(),
        "componentize-py failed for {}",
        app_dir.display()
    );
    std::fs::rename(&partial, &wasm).unwrap();
    wasm
}

fn componentize_py_version() -> String {
    let out = Command::new(venv_bin().join("componentize-py"))
        .arg("--version")
        .output()
        .expect("running componentize-py --version");
    String::from_utf8(out.stdout).unwrap()
}

/// The `.py` and `.wit` files below `dir`, in path order.
fn python_sources(dir: &Path) -> Vec<PathBuf> {
    super::files_below(dir, &[], |path| {
        path.extension().is_some_and(|e| e == "py" || e == "wit")
    })
}
