//! The syntax check before a Python or JavaScript build: what the language's own checker says
//! (Python's `compile`, as `python -m py_compile` does, and `node --check`), with the file's
//! path in the project and its line, in well under a second. The componentize tools report a
//! syntax error only after their whole 10 s step, and without the real place: componentize-py
//! names `/0/app.py`, componentize-js "failed to parse JS source, encountered [1] errors".

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, IoContext as _};

/// Compiles each file given (paths relative to the working directory) without writing
/// bytecode, and prints what Python prints for each syntax error: `File "app.py", line 3`, the
/// line, a caret, the error. Exits 1 when any file has one.
const PYTHON_CHECK: &str = r#"
import sys, traceback
failed = False
for path in sys.argv[1:]:
    with open(path, "rb") as source:
        try:
            compile(source.read(), path, "exec", dont_inherit=True)
        except SyntaxError as error:
            failed = True
            sys.stderr.write("".join(traceback.format_exception_only(error)))
sys.exit(1 if failed else 0)
"#;

/// Checks the `.py` files of the project in `dir` with `python` (a Python next to
/// componentize-py, or python3 on PATH). `None` skips the check: the build then reports
/// errors as componentize-py does.
pub fn check_python(dir: &Path, python: Option<&Path>) -> Result<(), Error> {
    let Some(python) = python else {
        return Ok(());
    };
    let files = sources(dir, "py")?;
    let output = Command::new(python)
        .args(["-B", "-c", PYTHON_CHECK])
        .args(&files)
        .current_dir(dir)
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    if output.status.success() {
        return Ok(());
    }
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    Err(Error::BuildFailed(
        "syntax error in the Python sources (see above); nothing was built".into(),
    ))
}

/// Checks the `.js` files of the project in `dir` with `node --check`, one file at a time, and
/// prints what node says of the first that fails: `app.js:3`, the line, a caret, the error
/// (without node's own stack, which is about node, not the file).
pub fn check_js(dir: &Path) -> Result<(), Error> {
    for file in sources(dir, "js")? {
        let output = Command::new("node")
            .arg("--check")
            .arg(&file)
            .current_dir(dir)
            .output()
            .with_context(|| "running node --check".to_owned())?;
        if !output.status.success() {
            let text = String::from_utf8_lossy(&output.stderr);
            let message: Vec<&str> = text
                .lines()
                .take_while(|line| !line.trim_start().starts_with("at "))
                .collect();
            eprintln!("{}", message.join("\n").trim_end());
            return Err(Error::BuildFailed(format!(
                "syntax error in {} (see above); nothing was built",
                file.display()
            )));
        }
    }
    Ok(())
}

/// The files with extension `ext` below `dir` that are inputs of a build, relative to it.
pub(super) fn sources(dir: &Path, ext: &str) -> Result<Vec<PathBuf>, Error> {
    Ok(super::inputs::files_below(dir)?
        .into_iter()
        .filter(|path| path.extension().is_some_and(|e| e == ext))
        .filter_map(|path| Some(path.strip_prefix(dir).ok()?.to_owned()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_sources_but_not_build_output_or_packages() {
        let tmp = tempfile::tempdir().unwrap();
        for file in [
            "app.py",
            "lib/util.py",
            "target/x.py",
            ".venv/lib/y.py",
            "README.md",
        ] {
            let path = tmp.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        assert_eq!(
            sources(tmp.path(), "py").unwrap(),
            [PathBuf::from("app.py"), PathBuf::from("lib/util.py")]
        );
    }
}
