//! `factbuoy plugin build`: builds a plugin project into a component with its language's
//! toolchain (cargo for wasm32-wasip2, componentize-py for Python) and says where it is.
//!
//! A project is Rust when it has a `Cargo.toml`, Python when it has an `app.py`. A Python
//! project brings its WIT (`wit/`) and SDK (`factbuoy_plugin/`), as `plugin new` writes them;
//! a project inside a factbuoy checkout uses the checkout's `wit/` and `guest-sdk/python/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// The Rust target a component is built for.
const WASM_TARGET: &str = "wasm32-wasip2";
/// The world every plugin targets, in `wit/gatherer.wit`.
const WORLD: &str = "gatherer";
/// The componentize-py release the Python SDK is tested with.
pub const COMPONENTIZE_PY_VERSION: &str = "0.25.1";
/// The module componentize-py wraps: the Python project's entry point.
const PYTHON_APP: &str = "app";

/// Builds the project in `dir` and returns the path of the component.
pub fn build(dir: &Path) -> anyhow::Result<PathBuf> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("opening the project directory {}", dir.display()))?;
    if dir.join("Cargo.toml").is_file() {
        build_rust(&dir)
    } else if dir.join(format!("{PYTHON_APP}.py")).is_file() {
        build_python(&dir)
    } else {
        bail!(
            "{} is not a plugin project: it has neither Cargo.toml (Rust) nor {PYTHON_APP}.py \
             (Python); create one with `factbuoy plugin new NAME --lang rust|python`",
            dir.display()
        )
    }
}

fn build_rust(dir: &Path) -> anyhow::Result<PathBuf> {
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .current_dir(dir)
        .stderr(Stdio::inherit())
        .output();
    let sysroot = match sysroot {
        Ok(out) if out.status.success() => {
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        }
        _ => bail!(
            "Rust (rustc and cargo) was not found: install it with rustup (https://rustup.rs), \
             then `rustup target add {WASM_TARGET}`"
        ),
    };
    anyhow::ensure!(
        sysroot.join("lib/rustlib").join(WASM_TARGET).is_dir(),
        "the Rust target {WASM_TARGET} is not installed in {}: run `rustup target add \
         {WASM_TARGET}`",
        sysroot.display()
    );
    eprintln!("building with cargo for {WASM_TARGET} (release)");
    let out = Command::new("cargo")
        .args(["build", "--release", "--target", WASM_TARGET])
        .arg("--message-format=json-render-diagnostics")
        .current_dir(dir)
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo")?;
    anyhow::ensure!(out.status.success(), "cargo build failed (see above)");
    // cargo's messages name the artifacts wherever the target directory is (CARGO_TARGET_DIR,
    // a workspace's target/); the package's own cdylib is the component.
    let wasm = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .filter(|message| {
            Path::new(message["manifest_path"].as_str().unwrap_or_default())
                == dir.join("Cargo.toml")
        })
        .flat_map(|message| {
            message["filenames"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|f| f.as_str().map(PathBuf::from))
        })
        .find(|file| file.extension().is_some_and(|ext| ext == "wasm"));
    wasm.context(
        "cargo built no .wasm for this package: its Cargo.toml needs `[lib] crate-type = \
         [\"cdylib\"]`",
    )
}

fn build_python(dir: &Path) -> anyhow::Result<PathBuf> {
    let wit = find_up(dir, &["wit/gatherer.wit"]).with_context(|| {
        format!(
            "no wit/gatherer.wit in {} or above it: `factbuoy plugin new` writes it into the \
             project",
            dir.display()
        )
    })?;
    let sdk = find_up(
        dir,
        &["factbuoy_plugin", "guest-sdk/python/factbuoy_plugin"],
    )
    .with_context(|| {
        format!(
            "the Python SDK (factbuoy_plugin/) is not in {} or above it: `factbuoy plugin \
                 new NAME --lang python` writes it into the project",
            dir.display()
        )
    })?;
    let componentize = componentize_py(dir)?;
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .context("the project directory has no name")?;
    let target = dir.join("target");
    std::fs::create_dir_all(&target).with_context(|| format!("creating {}", target.display()))?;
    let wasm = target.join(format!("{name}.wasm"));
    eprintln!("building with {}", componentize.display());
    let status = Command::new(&componentize)
        .arg("-d")
        .arg(wit.parent().expect("a found file has a parent"))
        .args(["-w", WORLD, "componentize", PYTHON_APP])
        .arg("-p")
        .arg(dir)
        .arg("-p")
        .arg(sdk.parent().expect("a found directory has a parent"))
        .arg("-o")
        .arg(&wasm)
        .current_dir(dir)
        // Standard output is the component's path alone.
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("running {}", componentize.display()))?;
    anyhow::ensure!(status.success(), "componentize-py failed (see above)");
    Ok(wasm)
}

/// componentize-py from the project's `.venv`, else from PATH.
fn componentize_py(dir: &Path) -> anyhow::Result<PathBuf> {
    let in_venv = dir.join(".venv/bin/componentize-py");
    if in_venv.is_file() {
        return Ok(in_venv);
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("componentize-py"))
            .find(|candidate| candidate.is_file())
    });
    on_path.with_context(|| {
        format!(
            "componentize-py was not found (neither .venv/bin/componentize-py in the project nor \
             on PATH); install it: `python3 -m venv .venv && .venv/bin/pip install \
             componentize-py=={COMPONENTIZE_PY_VERSION}`"
        )
    })
}

/// The first of `relatives` found in `dir` or the nearest directory above it.
fn find_up(dir: &Path, relatives: &[&str]) -> Option<PathBuf> {
    dir.ancestors()
        .flat_map(|d| relatives.iter().map(move |r| d.join(r)))
        .find(|candidate| candidate.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_without_a_project_is_refused_with_the_way_out() {
        let tmp = tempfile::tempdir().unwrap();
        let err = build(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("not a plugin project"), "{err}");
        assert!(err.contains("factbuoy plugin new"), "{err}");
    }

    #[test]
    fn find_up_prefers_the_nearest_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let inner = tmp.path().join("a/b");
        std::fs::create_dir_all(inner.join("wit")).unwrap();
        std::fs::create_dir_all(tmp.path().join("wit")).unwrap();
        assert_eq!(find_up(&inner, &["wit"]), Some(inner.join("wit")));
        assert_eq!(
            find_up(&tmp.path().join("a"), &["wit"]),
            Some(tmp.path().join("wit"))
        );
    }
}
