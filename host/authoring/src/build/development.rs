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
//! JavaScript is alike: componentize-js takes 10 to 30 s to build its engine into a new
//! component. Its development build bundles the project's modules into one CommonJS file with
//! rolldown (which jco brings; well under a second), and a runner ([`JS_DEV_RUNNER`]), built
//! once per set of contract interfaces the bundle uses, evaluates that file at each call.
//!
//! What differs from the component `plugin build` writes, and is used everywhere else: a Python
//! module imported only inside a function is available (a build bundles only what loading
//! app.py imports); the project's own modules are read when a call starts, not when it was
//! built; a JavaScript stack names lines of the bundle, not of app.js. A project that lacks
//! what a development build needs (Python's `python3`, rolldown, the SDK in the project) gets
//! the full build. Rust projects are built as `plugin build` builds them: cargo is quick.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{
    JS_APP, JS_INSTALLED_SDK, JS_SDK, PYTHON_APP, build, build_and_record, component_path,
    componentize_js, componentize_py, contract, inputs, js_toolchain, python_sdk, python_toolchain,
    stage_js_wit, syntax, wit_dir, write_if_changed,
};
use crate::error::{Error, IoContext as _};
use crate::toolchain;

/// The Python runner's source; [`IMPORTS_LINE`] in it becomes the project's imports.
const DEV_RUNNER: &str = include_str!("dev_runner.py");
/// The JavaScript runner's source; its `// factbuoy: ...` lines become the interfaces the
/// project's bundle uses.
const JS_DEV_RUNNER: &str = include_str!("dev_runner.js");

/// Bundles a JavaScript project's entry point and the modules it imports into one CommonJS
/// file, the contract's interfaces (`factbuoy:plugin/...`, `wasi:...`) left as `require`s.
/// Arguments: the toolchain's node_modules, the entry point, the output file.
const JS_BUNDLE: &str = r#"
import { createRequire } from "node:module";
const [nodeModules, entry, out] = process.argv.slice(-3);
const { rolldown } = await import(createRequire(nodeModules + "/").resolve("rolldown"));
const bundle = await rolldown({ input: entry, external: [/^[a-z-]+:[a-z-]+\//], logLevel: "warn" });
await bundle.write({ file: out, format: "cjs", sourcemap: false });
"#;
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

/// Builds the project in `dir` to run it on this host: a Python or JavaScript project as a
/// development build (see the module's documentation), a Rust project as [`build`] does, and so
/// a project that lacks what a development build needs.
pub fn build_for_run(dir: &Path) -> Result<Runnable, Error> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("opening the project directory {}", dir.display()))?;
    let python_project =
        !dir.join("Cargo.toml").is_file() && dir.join(format!("{PYTHON_APP}.py")).is_file();
    let js_project = !python_project && dir.join("package.json").is_file();
    let development = if python_project {
        python_development(&dir)?
    } else if js_project {
        js_development(&dir)?
    } else {
        None
    };
    if let Some(runnable) = development {
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
    write_if_changed(&runner.join(format!("{PYTHON_APP}.py")), &source)?;

    let name = component_path(dir)?;
    let wasm = runner.with_file_name(name.file_name().expect("a component path has a name"));
    let toolchain = python_toolchain(&componentize)?;
    let digest = inputs::digest(&runner, &[wit_dir(&wit), &sdk], &toolchain)?;
    if !inputs::up_to_date(&wasm, &digest) {
        eprintln!(
            "building the development runner with the modules the project imports (again only \
             when that set changes)"
        );
        // The runner comes first on the path: its app.py, not the project's, is `app`.
        let mut command = componentize_py(&componentize, &wit, &runner, &sdk, &wasm);
        build_and_record(&mut command, dir, &wasm, &digest)?;
    }
    Ok(Some(Runnable {
        wasm,
        sources: Some(dir.to_owned()),
    }))
}

fn js_development(dir: &Path) -> Result<Option<Runnable>, Error> {
    let wit = contract(dir)?;
    let node_modules = toolchain::js_toolchain(dir)?;
    // A copy in the project, or the package installed in it: what app.js imports resolves.
    let has_sdk = dir.join(JS_SDK[0]).is_dir() || dir.join(JS_INSTALLED_SDK).is_dir();
    if !has_sdk || !node_modules.join("rolldown").is_dir() || !dir.join(JS_APP).is_file() {
        return Ok(None);
    }
    syntax::check_js(dir)?;
    let work = dir.join("target").join("dev").join("js");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let bundle = work.join("app.cjs");
    let output = Command::new("node")
        .args(["--input-type=module", "-e", JS_BUNDLE, "--"])
        .arg(&node_modules)
        .arg(dir.join(JS_APP))
        .arg(&bundle)
        .current_dir(dir)
        .output()
        .with_context(|| "running node to bundle app.js with rolldown".to_owned())?;
    if !output.status.success() {
        eprint!("{}", String::from_utf8_lossy(&output.stderr));
        return Err(Error::BuildFailed(
            "bundling app.js failed (see above); nothing was run".into(),
        ));
    }
    let code = std::fs::read_to_string(&bundle)
        .with_context(|| format!("reading {}", bundle.display()))?;
    let interfaces = required_interfaces(&code);

    let runner = work.join("runner");
    let source = runner.join("src");
    std::fs::create_dir_all(&source).with_context(|| format!("creating {}", source.display()))?;
    let text = js_runner(&interfaces);
    let app = source.join(JS_APP);
    write_if_changed(&app, &text)?;
    let name = component_path(dir)?;
    let wasm = work.with_file_name(name.file_name().expect("a component path has a name"));
    let toolchain = js_toolchain(&node_modules)?;
    let digest = inputs::digest(&source, &[wit_dir(&wit)], &toolchain)?;
    if !inputs::up_to_date(&wasm, &digest) {
        eprintln!(
            "building the development runner with the interfaces the project uses (again only \
             when that set changes)"
        );
        let staged = runner.join("wit");
        if staged.exists() {
            std::fs::remove_dir_all(&staged)
                .with_context(|| format!("removing {}", staged.display()))?;
        }
        stage_js_wit(&wit, &node_modules, &staged)?;
        let mut command = componentize_js(&node_modules, &app, &staged, &wasm);
        build_and_record(&mut command, dir, &wasm, &digest)?;
    }
    Ok(Some(Runnable {
        wasm,
        sources: Some(dir.to_owned()),
    }))
}

/// The contract's interfaces (`factbuoy:plugin/host-info@0.2.0`, `wasi:...`) that a bundle
/// rolldown wrote `require`s, in order, once each.
fn required_interfaces(bundle: &str) -> BTreeSet<String> {
    bundle
        .split("require(\"")
        .skip(1)
        .filter_map(|rest| rest.split_once('"').map(|(name, _)| name))
        .filter(|name| {
            name.split_once(':')
                .is_some_and(|(package, rest)| !package.is_empty() && rest.contains('/'))
        })
        .map(str::to_owned)
        .collect()
}

/// The JavaScript runner that imports `interfaces` and hands them to the bundle.
fn js_runner(interfaces: &BTreeSet<String>) -> String {
    let imports: String = interfaces
        .iter()
        .enumerate()
        .map(|(i, name)| format!("import * as interface{i} from \"{name}\";\n"))
        .collect();
    let table: String = interfaces
        .iter()
        .enumerate()
        .map(|(i, name)| format!("  \"{name}\": interface{i},\n"))
        .collect();
    JS_DEV_RUNNER
        .replacen("WASI_VERSION", toolchain::JS_WASI_VERSION, 1)
        .replacen("// factbuoy: imports\n", &imports, 1)
        .replacen("  // factbuoy: interfaces\n", &table, 1)
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
    fn the_runner_templates_have_the_lines_their_imports_replace() {
        assert_eq!(DEV_RUNNER.matches(IMPORTS_LINE).count(), 1);
        let interfaces = BTreeSet::from(["factbuoy:plugin/output@0.2.0".to_owned()]);
        let runner = js_runner(&interfaces);
        assert!(!runner.contains("factbuoy: "), "{runner}");
        assert!(runner.contains("import * as interface0 from \"factbuoy:plugin/output@0.2.0\";\n"));
        assert!(runner.contains("  \"factbuoy:plugin/output@0.2.0\": interface0,\n"));
        assert!(runner.contains(&format!("preopens@{}\"", toolchain::JS_WASI_VERSION)));
    }

    #[test]
    fn a_bundles_interfaces_are_its_requires_of_the_contract() {
        let bundle = "let a = require(\"factbuoy:plugin/host-info@0.2.0\");\n\
                      require(\"wasi:filesystem/preopens@0.2.12\");\n\
                      let b = require(\"factbuoy:plugin/host-info@0.2.0\");\n\
                      const c = require(\"./local.js\");";
        let found: Vec<String> = required_interfaces(bundle).into_iter().collect();
        assert_eq!(
            found,
            [
                "factbuoy:plugin/host-info@0.2.0",
                "wasi:filesystem/preopens@0.2.12"
            ]
        );
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
