//! Python plugins for the tests: componentize-py from toolchains/python/venv.sh, and components
//! built from a Python project with it, cached by the hash of everything that goes into them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::workspace;

/// The venv's bin directory holding componentize-py, made once by toolchains/python/venv.sh.
pub fn venv_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = Command::new(workspace().join("toolchains/python/venv.sh"))
            .output()
            .expect("running toolchains/python/venv.sh");
        assert!(
            out.status.success(),
            "toolchains/python/venv.sh failed: {}",
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
    let toolchain = [
        venv_bin().to_string_lossy().as_bytes(),
        componentize_py_version().as_bytes(),
    ]
    .concat();
    super::built::component(
        "factbuoy-python-components",
        &toolchain,
        &[app_dir, &sdk, &wit],
        python_sources,
        app_dir,
        |into| {
            eprintln!("{}: building with componentize-py", app_dir.display());
            let status = Command::new(venv_bin().join("componentize-py"))
                .arg("-d")
                .arg(&wit)
                .args(["-w", "gatherer", "componentize", "app", "-p"])
                .arg(app_dir)
                .arg("-p")
                .arg(&sdk)
                .arg("-o")
                .arg(into)
                .status()
                .expect("running componentize-py");
            assert!(
                status.success(),
                "componentize-py failed for {}",
                app_dir.display()
            );
        },
    )
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
