//! Finding the tools a build runs, in the project first and then on PATH, and saying how to
//! install those that are missing ([`Error::MissingToolchain`]): Rust with its wasm32-wasip2
//! target, componentize-py, Node.js with componentize-js and jco.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Error, IoContext as _};

/// The Rust target a component is built for.
pub const WASM_TARGET: &str = "wasm32-wasip2";
/// The componentize-py release the Python SDK is tested with.
pub const COMPONENTIZE_PY_VERSION: &str = "0.25.1";
/// The componentize-js release the JavaScript SDK is tested with.
pub const COMPONENTIZE_JS_VERSION: &str = "0.23.0";
/// The jco release whose WASI WIT JavaScript plugins are built against.
pub const JCO_VERSION: &str = "1.35.0";
/// The WASI release of the WIT in jco's package that JavaScript plugins import files through
/// (wasmtime links every 0.2.x release).
pub const JS_WASI_VERSION: &str = "0.2.12";
/// The WASI packages `wasi:filesystem` needs, as folders of jco's built-in WIT.
pub const JS_WASI_PACKAGES: &[&str] = &["wasi-filesystem", "wasi-io", "wasi-clocks"];

/// Checks that Rust (rustc, as rustup selects it in `dir`) is there with the
/// [`WASM_TARGET`] installed.
pub fn check_rust(dir: &Path) -> Result<(), Error> {
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .current_dir(dir)
        .stderr(Stdio::inherit())
        .output();
    let sysroot = match sysroot {
        Ok(out) if out.status.success() => {
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        }
        _ => {
            return Err(Error::MissingToolchain(format!(
                "Rust (rustc and cargo) was not found: install it with rustup \
                 (https://rustup.rs), then `rustup target add {WASM_TARGET}`"
            )));
        }
    };
    if !sysroot.join("lib/rustlib").join(WASM_TARGET).is_dir() {
        return Err(Error::MissingToolchain(format!(
            "the Rust target {WASM_TARGET} is not installed in {}: run `rustup target add \
             {WASM_TARGET}`",
            sysroot.display()
        )));
    }
    tracing::debug!(sysroot = %sysroot.display(), "found Rust with {WASM_TARGET}");
    Ok(())
}

/// componentize-py from the project's `.venv`, else from PATH.
pub fn componentize_py(dir: &Path) -> Result<PathBuf, Error> {
    let in_venv = dir.join(".venv/bin/componentize-py");
    let found = Some(in_venv)
        .filter(|p| p.is_file())
        .or_else(|| on_path("componentize-py"))
        .ok_or_else(|| {
            Error::MissingToolchain(format!(
                "componentize-py was not found (neither .venv/bin/componentize-py in the project \
                 nor on PATH); install it: `python3 -m venv .venv && .venv/bin/pip install \
                 componentize-py=={COMPONENTIZE_PY_VERSION}`"
            ))
        })?;
    tracing::debug!(componentize_py = %found.display(), "found componentize-py");
    Ok(found)
}

/// The Python to check a project's syntax with: the one beside componentize-py (its venv's),
/// else python3 on PATH.
pub fn python_beside(componentize_py: &Path) -> Option<PathBuf> {
    Some(componentize_py.with_file_name("python3"))
        .filter(|p| p.is_file())
        .or_else(|| on_path("python3"))
}

/// The Python SDK package (`factbuoy_plugin`) installed for `python` (from the SDK's wheel),
/// if it is: found without being imported, as it imports bindings that exist only in a build.
pub fn installed_python_sdk(python: &Path) -> Option<PathBuf> {
    let out = Command::new(python)
        .args([
            "-c",
            "import importlib.util as u; s = u.find_spec('factbuoy_plugin'); \
             print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let found = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !found.is_empty()).then(|| PathBuf::from(found))
}

/// The `node_modules` holding componentize-js and jco: the project's, else the one whose
/// `.bin` is on PATH; and Node.js on PATH to run them.
pub fn js_toolchain(dir: &Path) -> Result<PathBuf, Error> {
    let install = format!(
        "install it: `npm install` in the project (its package.json pins \
         @bytecodealliance/componentize-js@{COMPONENTIZE_JS_VERSION} and \
         @bytecodealliance/jco@{JCO_VERSION})"
    );
    if on_path("node").is_none() {
        return Err(Error::MissingToolchain(format!(
            "Node.js (node) was not found on PATH: install Node.js 20 or later, then {install}"
        )));
    }
    let in_project = dir.join("node_modules");
    let node_modules = if in_project.join(".bin/componentize-js").is_file() {
        in_project
    } else {
        on_path("componentize-js")
            .and_then(|bin| Some(bin.parent()?.parent()?.to_owned()))
            .ok_or_else(|| {
                Error::MissingToolchain(format!(
                    "componentize-js was not found (neither node_modules/.bin/componentize-js in \
                     the project nor on PATH); {install}"
                ))
            })?
    };
    let wasi = node_modules.join(jco_wit(JS_WASI_PACKAGES[0]));
    if !wasi.is_dir() {
        return Err(Error::MissingToolchain(format!(
            "jco's WASI {JS_WASI_VERSION} WIT is not in {}; {install}",
            node_modules.display()
        )));
    }
    tracing::debug!(node_modules = %node_modules.display(), "found componentize-js and jco");
    Ok(node_modules)
}

/// Where jco's package keeps the WIT of one WASI package.
pub fn jco_wit(package: &str) -> PathBuf {
    Path::new("@bytecodealliance/jco/lib/wit/builtin")
        .join(JS_WASI_VERSION)
        .join(package)
}

/// What `program ARG` prints (its version), trimmed.
pub fn tool_version(program: &Path, arg: &str) -> Result<String, Error> {
    let out = Command::new(program)
        .arg(arg)
        .output()
        .with_context(|| format!("running {} {arg}", program.display()))?;
    if !out.status.success() {
        return Err(Error::MissingToolchain(format!(
            "{} {arg} failed: {}",
            program.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The version in the package.json of the package `name` below `node_modules`.
pub fn package_version(node_modules: &Path, name: &str) -> Result<String, Error> {
    let manifest = node_modules.join(name).join("package.json");
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("reading {}", manifest.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Error::MissingToolchain(format!("{} is not JSON: {e}", manifest.display())))?;
    Ok(json["version"].as_str().unwrap_or_default().to_owned())
}

/// The first file called `program` in a directory of PATH.
pub fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|candidate| candidate.is_file())
}
