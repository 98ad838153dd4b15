//! Waiting for an author to save: [`SourceWatch`] reports the next change to a project's files,
//! leaving out what builds and tools write inside it (`target/`, `node_modules/`, `.venv/`,
//! `__pycache__/`, `.git/`) and editors' swap and backup files, so that a rebuild it starts
//! never starts another.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use notify_debouncer_mini::notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_mini::{DebounceEventResult, Debouncer, new_debouncer};

use crate::error::Error;

/// Directories a build or a tool writes into: changes there are not the author's.
const NOT_SOURCES: &[&str] = &["target", "node_modules", ".venv", "__pycache__", ".git"];

/// How long the files must be quiet before a change is reported: an editor's save is often a
/// write, a rename and a chmod, and a `git checkout` many files.
const QUIET: Duration = Duration::from_millis(200);

/// A watch of a project directory, from its creation on: a change made while a build or a run
/// goes on is reported by the next [`SourceWatch::next_change`], not lost.
pub struct SourceWatch {
    dir: PathBuf,
    events: Receiver<DebounceEventResult>,
    // Watching stops when it is dropped.
    _debouncer: Debouncer<RecommendedWatcher>,
}

impl SourceWatch {
    /// Starts watching `dir` and everything below it.
    pub fn new(dir: &Path) -> Result<SourceWatch, Error> {
        let dir = dir.canonicalize().map_err(|source| Error::Io {
            context: format!("opening the project directory {}", dir.display()),
            source,
        })?;
        let (sender, events) = channel();
        let mut debouncer = new_debouncer(QUIET, sender).map_err(|e| watch_failed(&dir, &e))?;
        debouncer
            .watcher()
            .watch(&dir, RecursiveMode::Recursive)
            .map_err(|e| watch_failed(&dir, &e))?;
        Ok(SourceWatch {
            dir,
            events,
            _debouncer: debouncer,
        })
    }

    /// Blocks until a source file of the project changes (is written, created, removed or
    /// renamed), and returns the changed paths, relative to the project.
    pub fn next_change(&self) -> Result<Vec<PathBuf>, Error> {
        loop {
            let batch = self
                .events
                .recv()
                .map_err(|_| Error::Invalid("the file watch of the project ended".into()))?;
            let events = batch.map_err(|e| watch_failed(&self.dir, &e))?;
            let mut changed: Vec<PathBuf> = events
                .into_iter()
                .filter_map(|event| event.path.strip_prefix(&self.dir).ok().map(Path::to_owned))
                .filter(|path| is_source(path))
                .collect();
            changed.sort();
            changed.dedup();
            if !changed.is_empty() {
                return Ok(changed);
            }
        }
    }
}

/// Whether `path` (relative to the project) is the author's: not below a directory that builds
/// and tools write, nor an editor's swap or backup file.
fn is_source(path: &Path) -> bool {
    let written_by_a_tool = path
        .components()
        .any(|c| NOT_SOURCES.iter().any(|d| c.as_os_str() == *d));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let editors = name.ends_with('~')
        || name.ends_with(".swp")
        || name.ends_with(".swx")
        || name.starts_with(".#")
        // vim's check that it may write in a directory.
        || name == "4913";
    !path.as_os_str().is_empty() && !written_by_a_tool && !editors
}

fn watch_failed(dir: &Path, error: &notify_debouncer_mini::notify::Error) -> Error {
    Error::Invalid(format!(
        "watching {} for changes: {error}; on Linux, a project with many files may need a \
         higher fs.inotify.max_user_watches",
        dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_the_authors_files_not_what_builds_and_editors_write() {
        for source in [
            "app.py",
            "src/lib.rs",
            "factbuoy_plugin/__init__.py",
            "wit/gatherer.wit",
        ] {
            assert!(is_source(Path::new(source)), "{source}");
        }
        for not in [
            "target/greeter.wasm",
            "node_modules/x/index.js",
            ".venv/bin/python",
            "factbuoy_plugin/__pycache__/x.pyc",
            ".git/index",
            "app.py~",
            ".app.py.swp",
            ".#app.py",
            "4913",
            "",
        ] {
            assert!(!is_source(Path::new(not)), "{not}");
        }
    }

    /// A change made before `next_change` is called is reported by it; what a build writes
    /// is not.
    #[test]
    fn a_save_is_reported_and_a_builds_output_is_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("target")).unwrap();
        let watch = SourceWatch::new(dir.path()).unwrap();
        std::fs::write(dir.path().join("target/out.wasm"), b"built").unwrap();
        std::thread::sleep(QUIET * 3);
        std::fs::write(dir.path().join("app.py"), b"print(1)").unwrap();
        assert_eq!(watch.next_change().unwrap(), [PathBuf::from("app.py")]);
    }
}
