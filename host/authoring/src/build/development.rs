//! Development builds: what `factbuoy plugin run DIR` runs, so that an edit runs in about a
//! second in every language.
//!
//! A Python build runs componentize-py for 10 to 20 s and makes a new 19 MB component, which the
//! runtime compiles again for 5 to 30 s, although only the project's few lines changed. A
//! development build instead bundles a runner ([`DEV_RUNNER`]) with the modules the project
//! imports; the runner reads the project's code at run time from the project folder, which the
//! runtime maps read-only for its runs only (`Runtime::load_development`). The runner is built
//! again only when that set of imports, the SDK, the contract or the toolchain changes; an edit
//! to the code needs neither componentize-py nor a compilation.
//!
//! What differs from the component `plugin build` writes, and is used everywhere else: a module
//! imported only inside a function is available (a build bundles only what loading app.py
//! imports), and the project's own modules are read when a call starts, not when it was built.
//! Rust and JavaScript projects are built as `plugin build` builds them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{
    PYTHON_APP, WORLD, build, component_path, contract, inputs, python_sdk, run_toolchain, syntax,
    wit_dir,
};
use crate::error::{Error, IoContext as _};
use crate::toolchain;

/// The runner's source; [`IMPORTS_LINE`] in it becomes the project's imports.
const DEV_RUNNER: &str = include_str!("dev_runner.py");
/// The line of [`DEV_RUNNER`] that lists the modules to bundle.
const IMPORTS_LINE: &str = "_IMPORTS: Sequence[str] = []  # factbuoy: imports";

/// Prints, as a JSON list, every module that the files given import by absolute name, and for
/// `from a import b` also `a.b` (which may be a submodule).
const PYTHON_IMPORTS: &str = r#"
import ast, json, sys
found = set()
for path in sys.argv[1:]:
    with open(path, "rb") as source:
        tree = ast.parse(source.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if a.name != "*")
print(json.dumps(sorted(found)))
"#;

/// What `plugin run DIR` runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runnable {
    /// The component.
    pub wasm: PathBuf,
    /// For a development build, the project folder it reads its code from at run time; `None`
    /// for a component built as `plugin build` builds it.
    pub sources: Option<PathBuf>,
}

/// Builds the project in `dir` to run it on this host: a Python project as a development build
/// (see the module's documentation), any other as [`build`] does. A Python toolchain without a
/// `python3` beside componentize-py or on PATH gets the full build.
pub fn build_for_run(dir: &Path) -> Result<Runnable, Error> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("opening the project directory {}", dir.display()))?;
    let python_project =
        !dir.join("Cargo.toml").is_file() && dir.join(format!("{PYTHON_APP}.py")).is_file();
    if python_project && let Some(runnable) = python_development(&dir)? {
        return Ok(runnable);
    }
    Ok(Runnable {
        wasm: build(&dir, false)?,
        sources: None,
    })
}

fn python_development(dir: &Path) -> Result<Option<Runnable>, Error> {
    let wit = contract(dir)?;
    let componentize = toolchain::componentize_py(dir)?;
    let Some(python) = toolchain::python_beside(&componentize) else {
        return Ok(None);
    };
    let sdk = python_sdk(dir, Some(&python))?;
    syntax::check_python(dir, Some(&python))?;
    let sdk_name = sdk.file_name().unwrap_or_default().to_string_lossy();
    let local = local_modules(dir, &sdk_name)?;
    let imports: Vec<String> = python_imports(dir, &python)?
        .into_iter()
        .filter(|name| !local.contains(name.split('.').next().unwrap_or(name)))
        .collect();

    let runner = dir.join("target").join("dev").join("python");
    std::fs::create_dir_all(&runner).with_context(|| format!("creating {}", runner.display()))?;
    let listed = serde_json::to_string(&imports).expect("a list of strings serialises");
    let source = DEV_RUNNER.replacen(
        IMPORTS_LINE,
        &format!("_IMPORTS: Sequence[str] = {listed}"),
        1,
    );
    let app = runner.join(format!("{PYTHON_APP}.py"));
    if std::fs::read_to_string(&app).ok().as_deref() != Some(source.as_str()) {
        std::fs::write(&app, &source).with_context(|| format!("writing {}", app.display()))?;
    }

    let name = component_path(dir)?;
    let wasm = runner.with_file_name(name.file_name().expect("a component path has a name"));
    let toolchain = format!(
        "{} {}",
        componentize.display(),
        toolchain::tool_version(&componentize, "--version")?
    );
    let digest = inputs::digest(&runner, &[wit_dir(&wit), &sdk], &toolchain)?;
    if !inputs::up_to_date(&wasm, &digest) {
        eprintln!(
            "building the development runner with the modules the project imports (again only \
             when that set changes)"
        );
        let mut command = Command::new(&componentize);
        command
            .arg("-d")
            .arg(wit_dir(&wit))
            .args(["-w", WORLD, "componentize", PYTHON_APP])
            // The runner's app.py, not the project's: the runner comes first.
            .arg("-p")
            .arg(&runner)
            .arg("-p")
            .arg(sdk.parent().expect("a found directory has a parent"))
            .arg("-o")
            .arg(&wasm);
        inputs::forget(&wasm);
        run_toolchain(&mut command, dir)?;
        inputs::record(&wasm, &digest);
    }
    Ok(Some(Runnable {
        wasm,
        sources: Some(dir.to_owned()),
    }))
}

/// The modules the project's `.py` files import by absolute name, as Python's parser reads
/// them (the files passed the syntax check).
fn python_imports(dir: &Path, python: &Path) -> Result<Vec<String>, Error> {
    let output = Command::new(python)
        .args(["-B", "-c", PYTHON_IMPORTS])
        .args(syntax::sources(dir, "py")?)
        .current_dir(dir)
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    if !output.status.success() {
        return Err(Error::BuildFailed(format!(
            "reading the project's imports failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| {
        Error::BuildFailed(format!(
            "reading the project's imports: {e} in {:?}",
            String::from_utf8_lossy(&output.stdout)
        ))
    })
}

/// The project's own top-level modules (`name.py`, a folder `name/` with `__init__.py`), which
/// the runner reads at run time: all but the SDK's copy, `sdk_name`, and build output.
fn local_modules(dir: &Path, sdk_name: &str) -> Result<BTreeSet<String>, Error> {
    let reading = || format!("reading {}", dir.display());
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(dir).with_context(reading)? {
        let path = entry.with_context(reading)?.path();
        let name = if path.is_dir() && path.join("__init__.py").is_file() {
            path.file_name()
        } else if path.extension().is_some_and(|e| e == "py") {
            path.file_stem()
        } else {
            None
        };
        if let Some(name) = name.map(|n| n.to_string_lossy().into_owned())
            && name != sdk_name
            && !inputs::NOT_INPUTS.contains(&name.as_str())
        {
            names.insert(name);
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runner_template_has_the_line_its_imports_replace() {
        assert_eq!(DEV_RUNNER.matches(IMPORTS_LINE).count(), 1);
    }

    #[test]
    fn local_modules_are_the_projects_own_but_not_the_sdk_copy() {
        let tmp = tempfile::tempdir().unwrap();
        for file in [
            "app.py",
            "helpers.py",
            "pkg/__init__.py",
            "factbuoy_plugin/__init__.py",
            "target/x.py",
            "data/notes.txt",
        ] {
            let path = tmp.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        let names: Vec<String> = local_modules(tmp.path(), "factbuoy_plugin")
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(names, ["app", "helpers", "pkg"]);
    }
}
