//! Reading host files for host-facts: a file that does not exist is simply a missing fact;
//! any other failure is a warning naming the file, and only that fact is lost.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::io;

use factbuoy_guest::hostfs::HostFs;
use factbuoy_guest::progress;

pub struct Reader {
    pub fs: HostFs,
    warned: RefCell<BTreeSet<String>>,
}

impl Reader {
    pub fn new(fs: HostFs) -> Self {
        Reader {
            fs,
            warned: RefCell::new(BTreeSet::new()),
        }
    }

    /// Reports a problem once.
    pub fn warn(&self, message: impl Into<String>) {
        let message = message.into();
        if self.warned.borrow_mut().insert(message.clone()) {
            progress::warn(&message);
        }
    }

    /// The file's text as it is.
    pub fn text(&self, path: &str) -> Option<String> {
        self.quietly_absent(self.fs.read_to_string(path))
    }

    /// The file's text without surrounding whitespace; `None` if empty.
    pub fn trimmed(&self, path: &str) -> Option<String> {
        self.text(path)
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
    }

    /// An attribute that may refuse to be read for ordinary reasons (a down interface's
    /// `speed`): no warning either way.
    pub fn optional(&self, path: &str) -> Option<String> {
        self.fs.read_optional(path).filter(|t| !t.is_empty())
    }

    /// Entries of a directory, empty when it cannot be listed.
    pub fn list(&self, path: &str) -> Vec<String> {
        self.quietly_absent(self.fs.read_dir(path))
            .unwrap_or_default()
    }

    fn quietly_absent<T>(&self, result: io::Result<T>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => {
                self.warn(format!("skipped a fact: {e}"));
                None
            }
        }
    }
}
