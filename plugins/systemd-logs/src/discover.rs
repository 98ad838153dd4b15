//! Finding the journal files: `*.journal` and `*.journal~` (files journald set aside) directly in
//! `/run/log/journal` and `/var/log/journal`, and in their machine-id subdirectories, as
//! `journalctl -D DIR` finds them. Files come in directory order, as journalctl adds them: the
//! order only decides between entries that compare equal.

use std::fs;
use std::path::{Path, PathBuf};

use crate::journal::Id128;
use crate::problems::Problems;

/// Where journald keeps journals: volatile first, as journalctl searches them.
pub const JOURNAL_DIRS: [&str; 2] = ["/run/log/journal", "/var/log/journal"];

/// What was found.
pub struct Found {
    pub files: Vec<PathBuf>,
    /// Journal directories that exist (and were readable).
    pub directories: usize,
}

pub fn journal_files(problems: &mut Problems) -> Found {
    let mut found = Found {
        files: Vec::new(),
        directories: 0,
    };
    for dir in JOURNAL_DIRS {
        let dir = Path::new(dir);
        if !dir.is_dir() {
            continue;
        }
        match scan(dir, true, &mut found.files, problems) {
            Ok(()) => found.directories += 1,
            Err(e) => problems.warn(&dir.display().to_string(), format!("cannot list it: {e}")),
        }
    }
    found
}

fn scan(
    dir: &Path,
    root: bool,
    files: &mut Vec<PathBuf>,
    problems: &mut Problems,
) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        if is_journal_file(&name) {
            files.push(path);
        } else if root && Id128::parse(&name).is_some_and(|_| name.len() == 32) && path.is_dir() {
            // A machine's journal: an unreadable one is left out, as journalctl leaves it, but
            // not silently (a reader without the journal's group sees nothing else).
            if let Err(e) = scan(&path, false, files, problems) {
                problems.warn(&path.display().to_string(), format!("cannot list it: {e}"));
            }
        }
    }
    Ok(())
}

/// journalctl's `dirent_is_journal_file`.
fn is_journal_file(name: &str) -> bool {
    name.ends_with(".journal") || name.ends_with(".journal~")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_file_names() {
        assert!(is_journal_file("system.journal"));
        assert!(is_journal_file("system@0001-0002.journal~"));
        assert!(!is_journal_file("system.journal.zst"));
        assert!(!is_journal_file("notes.txt"));
    }

    #[test]
    fn scans_machine_directories_but_not_others() {
        let root =
            std::env::temp_dir().join(format!("systemd-logs-discover-{}", std::process::id()));
        let machine = root.join("3f2b7c1e9d8a4b6c8e0f1a2b3c4d5e6f");
        let other = root.join("remote");
        fs::create_dir_all(&machine).unwrap();
        fs::create_dir_all(&other).unwrap();
        for path in [
            root.join("top.journal"),
            machine.join("system.journal"),
            machine.join("old.journal~"),
            machine.join("readme"),
            other.join("remote-host.journal"),
        ] {
            fs::write(path, b"").unwrap();
        }
        let mut files = Vec::new();
        scan(&root, true, &mut files, &mut Problems::default()).unwrap();
        let mut names: Vec<String> = files
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        names.sort();
        fs::remove_dir_all(&root).unwrap();
        assert_eq!(
            names,
            [
                "3f2b7c1e9d8a4b6c8e0f1a2b3c4d5e6f/old.journal~",
                "3f2b7c1e9d8a4b6c8e0f1a2b3c4d5e6f/system.journal",
                "top.journal"
            ]
        );
    }
}
