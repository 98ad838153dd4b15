//! `factbuoy plugin build`: builds a plugin project into a component with its language's
//! toolchain (cargo for wasm32-wasip2, componentize-py for Python, componentize-js for
//! JavaScript) and says where it is.
//!
//! A project is Rust when it has a `Cargo.toml`, Python when it has an `app.py`, JavaScript
//! when it has a `package.json`. A Python or JavaScript project brings its WIT (`wit/`) and SDK
//! (`factbuoy_plugin/`, `factbuoy-plugin/`), as `plugin new` writes them; a project inside a
//! factbuoy checkout uses the checkout's `wit/` and `guest-sdk/`.
//!
//! A Python or JavaScript project is built only when an input changed ([`inputs`]), and its
//! sources are checked for syntax errors first ([`syntax`]).
//!
//! A missing toolchain is invalid input (exit 2, saying how to install it); a toolchain that
//! ran and failed is a failed build (exit 1).

mod inputs;
mod syntax;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::output::Ended;

/// The Rust target a component is built for.
const WASM_TARGET: &str = "wasm32-wasip2";
/// The world every plugin targets, in `wit/gatherer.wit`.
const WORLD: &str = "gatherer";
/// The componentize-py release the Python SDK is tested with.
pub const COMPONENTIZE_PY_VERSION: &str = "0.25.1";
/// The module componentize-py wraps: the Python project's entry point.
const PYTHON_APP: &str = "app";
/// The componentize-js release the JavaScript SDK is tested with.
pub const COMPONENTIZE_JS_VERSION: &str = "0.23.0";
/// The jco release whose WASI WIT JavaScript plugins are built against.
pub const JCO_VERSION: &str = "1.35.0";
/// The JavaScript project's entry point, whose `plugin` export is the gatherer.
const JS_APP: &str = "app.js";
/// The WASI release of the WIT in jco's package that JavaScript plugins import files through
/// (wasmtime links every 0.2.x release).
const JS_WASI_VERSION: &str = "0.2.12";
/// The WASI packages `wasi:filesystem` needs, as folders of jco's built-in WIT.
const JS_WASI_PACKAGES: &[&str] = &["wasi-filesystem", "wasi-io", "wasi-clocks"];

/// Builds the project in `dir` and returns the path of the component. A Python or JavaScript
/// project whose inputs have not changed since its last build is not built again, unless
/// `force`.
pub fn build(dir: &Path, force: bool) -> anyhow::Result<PathBuf> {
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
        bail!(
            "{} is not a plugin project: it has no Cargo.toml (Rust), {PYTHON_APP}.py (Python) \
             or package.json (JavaScript); create one with `factbuoy plugin new NAME --lang \
             rust|python|js`",
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
    if !out.status.success() {
        return Err(Ended::Failed("cargo build failed (see above)".into()).into());
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
    wasm.context(
        "cargo built no .wasm for this package: its Cargo.toml needs `[lib] crate-type = \
         [\"cdylib\"]`",
    )
}

fn build_python(dir: &Path, force: bool) -> anyhow::Result<PathBuf> {
    let wit = contract(dir)?;
    let sdk = sdk(
        dir,
        "factbuoy_plugin",
        "guest-sdk/python",
        "Python",
        "python",
    )?;
    let componentize = componentize_py(dir)?;
    let wasm = component_path(dir)?;
    let toolchain = format!(
        "{} {}",
        componentize.display(),
        tool_version(&componentize, "--version")?
    );
    let digest = inputs::digest(dir, &outside(dir, [wit_dir(&wit), &sdk]), &toolchain)?;
    if !force && inputs::up_to_date(&wasm, &digest) {
        say_up_to_date(&wasm);
        return Ok(wasm);
    }
    // The Python beside componentize-py (its venv's), else the one on PATH.
    let python = Some(componentize.with_file_name("python3"))
        .filter(|p| p.is_file())
        .or_else(|| on_path("python3"));
    syntax::check_python(dir, python.as_deref())?;
    let mut command = Command::new(&componentize);
    command
        .arg("-d")
        .arg(wit.parent().expect("a found file has a parent"))
        .args(["-w", WORLD, "componentize", PYTHON_APP])
        .arg("-p")
        .arg(dir)
        .arg("-p")
        .arg(sdk.parent().expect("a found directory has a parent"))
        .arg("-o")
        .arg(&wasm);
    inputs::forget(&wasm);
    run_toolchain(&mut command, dir)?;
    inputs::record(&wasm, &digest);
    Ok(wasm)
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

/// Those of `paths` outside the project `dir` (a checkout's SDK and contract): the project's
/// own files are inputs already.
fn outside<'a>(dir: &Path, paths: impl IntoIterator<Item = &'a Path>) -> Vec<&'a Path> {
    paths.into_iter().filter(|p| !p.starts_with(dir)).collect()
}

/// What `program ARG` prints (its version), trimmed.
fn tool_version(program: &Path, arg: &str) -> anyhow::Result<String> {
    let out = Command::new(program)
        .arg(arg)
        .output()
        .with_context(|| format!("running {} {arg}", program.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "{} {arg} failed: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The version in the package.json of the package `name` below `node_modules`.
fn package_version(node_modules: &Path, name: &str) -> anyhow::Result<String> {
    let manifest = node_modules.join(name).join("package.json");
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("reading {}", manifest.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not JSON", manifest.display()))?;
    Ok(json["version"].as_str().unwrap_or_default().to_owned())
}

/// The project's WIT contract, `wit/gatherer.wit` in `dir` or a folder above it (a checkout's).
fn contract(dir: &Path) -> anyhow::Result<PathBuf> {
    find_up(dir, &["wit/gatherer.wit"]).with_context(|| {
        format!(
            "no wit/gatherer.wit in {} or above it: `factbuoy plugin new` writes it into the \
             project",
            dir.display()
        )
    })
}

/// The SDK package `folder` of `language`: in `dir` or above it as `plugin new` (`--lang
/// flag`) writes it, or in a checkout's `checkout/folder`.
fn sdk(
    dir: &Path,
    folder: &str,
    checkout: &str,
    language: &str,
    flag: &str,
) -> anyhow::Result<PathBuf> {
    find_up(dir, &[folder, &format!("{checkout}/{folder}")]).with_context(|| {
        format!(
            "the {language} SDK ({folder}/) is not in {} or above it: `factbuoy plugin new NAME \
             --lang {flag}` writes it into the project",
            dir.display()
        )
    })
}

/// Where a Python or JavaScript build writes the component: `target/<project name>.wasm`.
fn component_path(dir: &Path) -> anyhow::Result<PathBuf> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .context("the project directory has no name")?;
    let target = dir.join("target");
    std::fs::create_dir_all(&target).with_context(|| format!("creating {}", target.display()))?;
    Ok(target.join(format!("{name}.wasm")))
}

/// Builds a JavaScript project with componentize-js, the engine of `jco componentize`: run
/// directly, as jco 1.35's own command fails on Node 20 before building. The component targets
/// a world of its own, the gatherer plus WASI's file system, which the SDK reads granted paths
/// through; the sources and the SDK are staged in `target/js-build/` beside that WIT.
fn build_js(dir: &Path, force: bool) -> anyhow::Result<PathBuf> {
    let wit = contract(dir)?;
    let sdk = sdk(dir, "factbuoy-plugin", "guest-sdk/js", "JavaScript", "js")?;
    anyhow::ensure!(
        dir.join(JS_APP).is_file(),
        "{} has a package.json but no {JS_APP}, the plugin's entry point (`export const plugin \
         = exportGatherer(...)`)",
        dir.display()
    );
    let node_modules = js_toolchain(dir)?;
    let wasm = component_path(dir)?;
    let toolchain = format!(
        "node {} componentize-js {} jco {} at {}",
        tool_version(Path::new("node"), "--version")?,
        package_version(&node_modules, "@bytecodealliance/componentize-js")?,
        package_version(&node_modules, "@bytecodealliance/jco")?,
        node_modules.display()
    );
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
    if !sources.join("factbuoy-plugin").exists() {
        copy_tree(&sdk, &sources.join("factbuoy-plugin"), &[])?;
    }
    let componentize = node_modules.join(".bin/componentize-js");
    let mut command = Command::new(&componentize);
    command
        .arg(sources.join(JS_APP))
        .arg("--wit")
        .arg(stage.join("wit"))
        .args(["--world-name", "js-gatherer"])
        // The host links no wasi:http: a plugin reaches the network by no route.
        .args(["--disable", "http", "fetch-event"])
        .arg("-o")
        .arg(&wasm);
    inputs::forget(&wasm);
    run_toolchain(&mut command, dir)?;
    inputs::record(&wasm, &digest);
    Ok(wasm)
}

/// Runs a componentize tool in the project `dir`, its output on standard error (standard output
/// is the component's path alone). A tool that ran and failed is a failed build (exit 1).
fn run_toolchain(command: &mut Command, dir: &Path) -> anyhow::Result<()> {
    let program = Path::new(command.get_program()).to_owned();
    eprintln!("building with {}", program.display());
    let status = command
        .current_dir(dir)
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("running {}", program.display()))?;
    if !status.success() {
        let name = program.file_name().unwrap_or_default().to_string_lossy();
        return Err(Ended::Failed(format!("{name} failed (see above)")).into());
    }
    Ok(())
}

/// The `node_modules` holding componentize-js and jco: the project's, else the one whose
/// `.bin` is on PATH; and Node.js on PATH to run them.
fn js_toolchain(dir: &Path) -> anyhow::Result<PathBuf> {
    let install = format!(
        "install it: `npm install` in the project (its package.json pins \
         @bytecodealliance/componentize-js@{COMPONENTIZE_JS_VERSION} and \
         @bytecodealliance/jco@{JCO_VERSION})"
    );
    anyhow::ensure!(
        on_path("node").is_some(),
        "Node.js (node) was not found on PATH: install Node.js 20 or later, then {install}"
    );
    let in_project = dir.join("node_modules");
    let node_modules = if in_project.join(".bin/componentize-js").is_file() {
        in_project
    } else {
        on_path("componentize-js")
            .and_then(|bin| Some(bin.parent()?.parent()?.to_owned()))
            .with_context(|| {
                format!(
                    "componentize-js was not found (neither node_modules/.bin/componentize-js in \
                     the project nor on PATH); {install}"
                )
            })?
    };
    let wasi = node_modules.join(jco_wit(JS_WASI_PACKAGES[0]));
    anyhow::ensure!(
        wasi.is_dir(),
        "jco's WASI {JS_WASI_VERSION} WIT is not in {}; {install}",
        node_modules.display()
    );
    Ok(node_modules)
}

/// Where jco's package keeps the WIT of one WASI package.
fn jco_wit(package: &str) -> PathBuf {
    Path::new("@bytecodealliance/jco/lib/wit/builtin")
        .join(JS_WASI_VERSION)
        .join(package)
}

/// Writes the WIT a JavaScript plugin is built against into `into`: a world that includes the
/// project's gatherer (at its version) and imports WASI's file system, with both as deps.
fn stage_js_wit(gatherer: &Path, node_modules: &Path, into: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(gatherer)
        .with_context(|| format!("reading {}", gatherer.display()))?;
    let package = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("package "))
        .and_then(|rest| rest.strip_suffix(';'))
        .with_context(|| format!("{} has no `package ...;` line", gatherer.display()))?;
    let deps = into.join("deps");
    let own = deps.join("factbuoy-plugin");
    std::fs::create_dir_all(&own).with_context(|| format!("creating {}", own.display()))?;
    std::fs::copy(gatherer, own.join("gatherer.wit"))
        .with_context(|| format!("copying {}", gatherer.display()))?;
    for wasi in JS_WASI_PACKAGES {
        copy_tree(&node_modules.join(jco_wit(wasi)), &deps.join(wasi), &[])?;
    }
    let (name, version) = package.split_once('@').with_context(|| {
        format!(
            "the package {package} of {} has no version",
            gatherer.display()
        )
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
fn copy_tree(from: &Path, to: &Path, skip: &[&str]) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
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

/// The first file called `program` in a directory of PATH.
fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|candidate| candidate.is_file())
}

/// componentize-py from the project's `.venv`, else from PATH.
fn componentize_py(dir: &Path) -> anyhow::Result<PathBuf> {
    let in_venv = dir.join(".venv/bin/componentize-py");
    if in_venv.is_file() {
        return Ok(in_venv);
    }
    on_path("componentize-py").with_context(|| {
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
        let err = build(tmp.path(), false).unwrap_err().to_string();
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
