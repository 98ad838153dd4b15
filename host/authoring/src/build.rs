//! Building a plugin project into a component with its language's toolchain (cargo for
//! wasm32-wasip2, componentize-py for Python, componentize-js for JavaScript), found by
//! [`toolchain`](crate::toolchain).
//!
//! A project is Rust when it has a `Cargo.toml`, Python when it has an `app.py`, JavaScript
//! when it has a `package.json`. A Python or JavaScript project brings its WIT (`wit/`) and SDK
//! (`factbuoy_plugin/`, `factbuoy-plugin/`), as `plugin new` writes them; a project inside a
//! factbuoy checkout uses the checkout's `wit/` and `guest-sdk/`. A project without a copy of
//! the SDK uses the one installed from its package: in componentize-py's venv (Python, the
//! wheel), in the project's `node_modules` (JavaScript, the npm package).
//!
//! A Python or JavaScript project is built only when an input changed ([`inputs`]), and its
//! sources are checked for syntax errors first ([`syntax`]).
//!
//! A missing toolchain is an [`Error::MissingToolchain`] saying how to install it; a toolchain
//! that ran and failed is an [`Error::BuildFailed`].

mod development;
mod inputs;
mod syntax;

pub use development::{Runnable, build_for_run};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Error, IoContext as _};
use crate::toolchain::{self, JS_WASI_PACKAGES, JS_WASI_VERSION, WASM_TARGET};

/// The world every plugin targets, in `wit/gatherer.wit`.
const WORLD: &str = "gatherer";
/// The module componentize-py wraps: the Python project's entry point.
const PYTHON_APP: &str = "app";
/// The JavaScript project's entry point, whose `plugin` export is the gatherer.
const JS_APP: &str = "app.js";

/// Builds the project in `dir` and returns the path of the component. A Python or JavaScript
/// project whose inputs have not changed since its last build is not built again, unless
/// `force`. The toolchain's output goes to standard error; standard output is left alone.
pub fn build(dir: &Path, force: bool) -> Result<PathBuf, Error> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("opening the project directory {}", dir.display()))?;
    if dir.join("Cargo.toml").is_file() {
        build_rust(&dir)
    } else if dir.join(format!("{PYTHON_APP}.py")).is_file() {
        build_python(&dir, force)
    } else if dir.join("package.json").is_file() {
        build_js(&dir, force)
    } else {
        Err(Error::Invalid(format!(
            "{} is not a plugin project: it has no Cargo.toml (Rust), {PYTHON_APP}.py (Python) \
             or package.json (JavaScript); create one with `factbuoy plugin new NAME --lang \
             rust|python|js`",
            dir.display()
        )))
    }
}

fn build_rust(dir: &Path) -> Result<PathBuf, Error> {
    toolchain::check_rust(dir)?;
    eprintln!("building with cargo for {WASM_TARGET} (release)");
    let out = Command::new("cargo")
        .args(["build", "--release", "--target", WASM_TARGET])
        .arg("--message-format=json-render-diagnostics")
        .current_dir(dir)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| "running cargo".to_owned())?;
    if !out.status.success() {
        return Err(Error::BuildFailed("cargo build failed (see above)".into()));
    }
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
    wasm.ok_or_else(|| {
        Error::Invalid(
            "cargo built no .wasm for this package: its Cargo.toml needs `[lib] crate-type = \
             [\"cdylib\"]`"
                .into(),
        )
    })
}

fn build_python(dir: &Path, force: bool) -> Result<PathBuf, Error> {
    let wit = contract(dir)?;
    let componentize = toolchain::componentize_py(dir)?;
    let python = toolchain::python_beside(&componentize);
    let sdk = python_sdk(dir, python.as_deref())?;
    let wasm = component_path(dir)?;
    let toolchain = python_toolchain(&componentize)?;
    let digest = inputs::digest(dir, &outside(dir, [wit_dir(&wit), &sdk]), &toolchain)?;
    if !force && inputs::up_to_date(&wasm, &digest) {
        say_up_to_date(&wasm);
        return Ok(wasm);
    }
    syntax::check_python(dir, python.as_deref())?;
    let mut command = componentize_py(&componentize, &wit, dir, &sdk, &wasm);
    build_and_record(&mut command, dir, &wasm, &digest)?;
    Ok(wasm)
}

/// What identifies componentize-py, for the digest of a build's inputs.
fn python_toolchain(componentize: &Path) -> Result<String, Error> {
    Ok(format!(
        "{} {}",
        componentize.display(),
        toolchain::tool_version(componentize, "--version")?
    ))
}

/// componentize-py building the module `app` found first in `app_dir` against the contract
/// `wit`, with the SDK package `sdk`, into `wasm`.
fn componentize_py(
    componentize: &Path,
    wit: &Path,
    app_dir: &Path,
    sdk: &Path,
    wasm: &Path,
) -> Command {
    let mut command = Command::new(componentize);
    command
        .arg("-d")
        .arg(wit_dir(wit))
        .args(["-w", WORLD, "componentize", PYTHON_APP])
        .arg("-p")
        .arg(app_dir)
        .arg("-p")
        .arg(sdk.parent().expect("a found directory has a parent"))
        .arg("-o")
        .arg(wasm);
    command
}

/// The Python SDK package a project in `dir` is built with: a copy in the project (or a
/// checkout) first, as `plugin new` wrote it; else the one installed for `python`.
fn python_sdk(dir: &Path, python: Option<&Path>) -> Result<PathBuf, Error> {
    match find_up(dir, PYTHON_SDK) {
        Some(copy) => Ok(copy),
        None => python
            .and_then(toolchain::installed_python_sdk)
            .ok_or_else(|| missing_sdk(dir, PYTHON_SDK[0], "Python", "python")),
    }
}

/// Says that a build was skipped, and how to force one.
fn say_up_to_date(wasm: &Path) {
    eprintln!(
        "{} is up to date: nothing it is built from changed since it was built (--force builds \
         it again)",
        wasm.display()
    );
}

/// The folder holding the contract file `wit`.
fn wit_dir(wit: &Path) -> &Path {
    wit.parent().expect("a found file has a parent")
}

/// Those of `paths` the digest of the project `dir` does not cover (a checkout's SDK and
/// contract, an installed SDK): the project's own files are inputs already.
fn outside<'a>(dir: &Path, paths: impl IntoIterator<Item = &'a Path>) -> Vec<&'a Path> {
    paths
        .into_iter()
        .filter(|p| !inputs::covers(dir, p))
        .collect()
}

/// The project's WIT contract, `wit/gatherer.wit` in `dir` or a folder above it (a checkout's).
fn contract(dir: &Path) -> Result<PathBuf, Error> {
    find_up(dir, &["wit/gatherer.wit"]).ok_or_else(|| {
        Error::Invalid(format!(
            "no wit/gatherer.wit in {} or above it: `factbuoy plugin new` writes it into the \
             project",
            dir.display()
        ))
    })
}

/// Where the Python SDK package is looked for: a project's copy, then a checkout's.
const PYTHON_SDK: &[&str] = &["factbuoy_plugin", "guest-sdk/python/factbuoy_plugin"];
/// Where the JavaScript SDK package is looked for: a project's copy, then a checkout's.
const JS_SDK: &[&str] = &["factbuoy-plugin", "guest-sdk/js/factbuoy-plugin"];
/// The JavaScript SDK installed in a project from its npm package (imported as
/// `"factbuoy-plugin"`), used when there is no copy.
const JS_INSTALLED_SDK: &str = "node_modules/factbuoy-plugin/factbuoy-plugin";

/// That the SDK package `folder` of `language` is neither in `dir` or above it nor installed,
/// and that `plugin new` (`--lang flag`) writes it.
fn missing_sdk(dir: &Path, folder: &str, language: &str, flag: &str) -> Error {
    Error::Invalid(format!(
        "the {language} SDK ({folder}/) is not in {} or above it, nor installed: `factbuoy \
         plugin new NAME --lang {flag}` writes it into the project",
        dir.display()
    ))
}

/// Where a Python or JavaScript build writes the component: `target/<project name>.wasm`.
fn component_path(dir: &Path) -> Result<PathBuf, Error> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::Invalid("the project directory has no name".into()))?;
    let target = dir.join("target");
    std::fs::create_dir_all(&target).with_context(|| format!("creating {}", target.display()))?;
    Ok(target.join(format!("{name}.wasm")))
}

/// Builds a JavaScript project with componentize-js, the engine of `jco componentize`: run
/// directly, as jco 1.35's own command fails on Node 20 before building. The component targets
/// a world of its own, the gatherer plus WASI's file system, which the SDK reads granted paths
/// through; the sources and the SDK are staged in `target/js-build/` beside that WIT.
fn build_js(dir: &Path, force: bool) -> Result<PathBuf, Error> {
    let wit = contract(dir)?;
    let (sdk, installed) = match find_up(dir, JS_SDK) {
        Some(copy) => (copy, false),
        None if dir.join(JS_INSTALLED_SDK).is_dir() => (dir.join(JS_INSTALLED_SDK), true),
        None => return Err(missing_sdk(dir, JS_SDK[0], "JavaScript", "js")),
    };
    if !dir.join(JS_APP).is_file() {
        return Err(Error::Invalid(format!(
            "{} has a package.json but no {JS_APP}, the plugin's entry point (`export const \
             plugin = exportGatherer(...)`)",
            dir.display()
        )));
    }
    let node_modules = toolchain::js_toolchain(dir)?;
    let wasm = component_path(dir)?;
    let toolchain = js_toolchain(&node_modules)?;
    let digest = inputs::digest(dir, &outside(dir, [wit_dir(&wit), &sdk]), &toolchain)?;
    if !force && inputs::up_to_date(&wasm, &digest) {
        say_up_to_date(&wasm);
        return Ok(wasm);
    }
    syntax::check_js(dir)?;
    let stage = dir.join("target").join("js-build");
    if stage.exists() {
        std::fs::remove_dir_all(&stage)
            .with_context(|| format!("removing the last build's {}", stage.display()))?;
    }
    stage_js_wit(&wit, &node_modules, &stage.join("wit"))?;
    let sources = stage.join("src");
    copy_tree(dir, &sources, &["node_modules", "target", "wit", ".git"])?;
    if installed {
        // componentize-js resolves a bare specifier to the file of that name beside the entry
        // point, never through node_modules: the installed SDK is staged with such a file,
        // a module that re-exports it.
        copy_tree(&sdk, &sources.join("node_modules/factbuoy-plugin"), &[])?;
        let shim = sources.join("factbuoy-plugin");
        std::fs::write(
            &shim,
            "export * from \"./node_modules/factbuoy-plugin/index.js\";\n",
        )
        .with_context(|| format!("writing {}", shim.display()))?;
    } else if !sources.join("factbuoy-plugin").exists() {
        copy_tree(&sdk, &sources.join("factbuoy-plugin"), &[])?;
    }
    let mut command = componentize_js(
        &node_modules,
        &sources.join(JS_APP),
        &stage.join("wit"),
        &wasm,
    );
    build_and_record(&mut command, dir, &wasm, &digest)?;
    Ok(wasm)
}

/// What identifies Node.js, componentize-js and jco, for the digest of a build's inputs.
fn js_toolchain(node_modules: &Path) -> Result<String, Error> {
    Ok(format!(
        "node {} componentize-js {} jco {} at {}",
        toolchain::tool_version(Path::new("node"), "--version")?,
        toolchain::package_version(node_modules, "@bytecodealliance/componentize-js")?,
        toolchain::package_version(node_modules, "@bytecodealliance/jco")?,
        node_modules.display()
    ))
}

/// Writes `text` to `path` unless the file holds it already, keeping its modification time for
/// what watches it.
fn write_if_changed(path: &Path, text: &str) -> Result<(), Error> {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// componentize-js building the entry point `app` against the WIT `wit` (as [`stage_js_wit`]
/// writes it) into `wasm`.
fn componentize_js(node_modules: &Path, app: &Path, wit: &Path, wasm: &Path) -> Command {
    let mut command = Command::new(node_modules.join(".bin/componentize-js"));
    command
        .arg(app)
        .arg("--wit")
        .arg(wit)
        .args(["--world-name", "js-gatherer"])
        // The host links no wasi:http: a plugin reaches the network by no route.
        .args(["--disable", "http", "fetch-event"])
        .arg("-o")
        .arg(wasm);
    command
}

/// Builds `wasm` with the toolchain's `command` in the project `dir`, and records `digest` as
/// what it was built from once the build succeeded: a build that fails halfway leaves no record,
/// so the next one runs the toolchain again.
fn build_and_record(
    command: &mut Command,
    dir: &Path,
    wasm: &Path,
    digest: &str,
) -> Result<(), Error> {
    inputs::forget(wasm);
    run_toolchain(command, dir)?;
    inputs::record(wasm, digest);
    Ok(())
}

/// Runs a componentize tool in the project `dir`, its output on standard error (standard output
/// is the caller's). A tool that ran and failed is a failed build.
fn run_toolchain(command: &mut Command, dir: &Path) -> Result<(), Error> {
    let program = Path::new(command.get_program()).to_owned();
    eprintln!("building with {}", program.display());
    let status = command
        .current_dir(dir)
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("running {}", program.display()))?;
    if !status.success() {
        let name = program.file_name().unwrap_or_default().to_string_lossy();
        return Err(Error::BuildFailed(format!("{name} failed (see above)")));
    }
    Ok(())
}

/// Writes the WIT a JavaScript plugin is built against into `into`: a world that includes the
/// project's gatherer (at its version) and imports WASI's file system, with both as deps.
fn stage_js_wit(gatherer: &Path, node_modules: &Path, into: &Path) -> Result<(), Error> {
    let text = std::fs::read_to_string(gatherer)
        .with_context(|| format!("reading {}", gatherer.display()))?;
    let package = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("package "))
        .and_then(|rest| rest.strip_suffix(';'))
        .ok_or_else(|| {
            Error::Invalid(format!("{} has no `package ...;` line", gatherer.display()))
        })?;
    let deps = into.join("deps");
    let own = deps.join("factbuoy-plugin");
    std::fs::create_dir_all(&own).with_context(|| format!("creating {}", own.display()))?;
    std::fs::copy(gatherer, own.join("gatherer.wit"))
        .with_context(|| format!("copying {}", gatherer.display()))?;
    for wasi in JS_WASI_PACKAGES {
        copy_tree(
            &node_modules.join(toolchain::jco_wit(wasi)),
            &deps.join(wasi),
            &[],
        )?;
    }
    let (name, version) = package.split_once('@').ok_or_else(|| {
        Error::Invalid(format!(
            "the package {package} of {} has no version",
            gatherer.display()
        ))
    })?;
    let world = format!(
        "// Written by `factbuoy plugin build`: the gatherer, and the files of granted paths.\n\
         package factbuoy:js-gatherer;\n\n\
         world js-gatherer {{\n    \
             include {name}/gatherer@{version};\n    \
             import wasi:filesystem/preopens@{JS_WASI_VERSION};\n\
         }}\n"
    );
    std::fs::write(into.join("js-gatherer.wit"), world)
        .with_context(|| format!("writing {}", into.display()))
}

/// Copies the files below `from` to `to`, leaving out the top-level entries named in `skip`.
fn copy_tree(from: &Path, to: &Path, skip: &[&str]) -> Result<(), Error> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    let reading = || format!("reading {}", from.display());
    for entry in std::fs::read_dir(from).with_context(reading)? {
        let entry = entry.with_context(reading)?;
        if skip.iter().any(|s| entry.file_name() == *s) {
            continue;
        }
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if source.is_dir() {
            copy_tree(&source, &target, &[])?;
        } else {
            std::fs::copy(&source, &target)
                .with_context(|| format!("copying {} to {}", source.display(), target.display()))?;
        }
    }
    Ok(())
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
        let err = build(tmp.path(), false).unwrap_err();
        assert!(!err.is_failed_build(), "{err}");
        let err = err.to_string();
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
