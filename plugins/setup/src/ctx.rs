//! What every collector works with: the host's files, the facts gathered so far, and warnings.
//!
//! Reads follow Ansible's `get_file_content`: a file that does not exist is simply absent;
//! any other failure (permission, a path the run did not grant) drops that one fact and is
//! reported as a warning, so one unreadable file never costs a whole collector.

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;

use factbuoy_guest::hostfs::HostFs;
use factbuoy_guest::linux::netns::{self, NetworkNamespace};
use factbuoy_guest::progress;
use serde_json::Value;

/// The roots this plugin asks to read.
pub const ROOTS: &[&str] = &[
    "/proc",
    "/sys",
    "/etc",
    "/run",
    "/usr",
    "/bin",
    "/sbin",
    "/var/lib/dbus",
    "/var/lib/dpkg",
    "/dev/disk",
];

/// Roots every Linux host has: a read below one that is missing gets one warning naming the
/// root (it was not granted) instead of silence. The other roots are often absent
/// (`/var/lib/dbus`, `/dev/disk` in a container, `/bin` on merged-usr hosts).
const ESSENTIAL_ROOTS: &[&str] = &["/proc", "/sys", "/etc", "/usr", "/run"];

/// Directories searched for programs after `PATH`, as Ansible's `get_bin_path` does.
const EXTRA_BIN_DIRS: &[&str] = &["/sbin", "/usr/sbin", "/usr/local/sbin"];

pub struct Ctx {
    pub fs: HostFs,
    /// Facts gathered so far, without the `ansible_` prefix.
    pub facts: BTreeMap<String, Value>,
    warned: RefCell<BTreeSet<String>>,
    environ: RefCell<Option<Vec<(String, String)>>>,
    /// Files read so far, by path (`None`: absent or unreadable).
    texts: RefCell<HashMap<String, Option<String>>>,
    /// Programs looked up so far, by name.
    programs: RefCell<HashMap<String, Option<String>>>,
    network_namespace: OnceCell<NetworkNamespace>,
}

impl Ctx {
    pub fn new(fs: HostFs) -> Self {
        Ctx {
            fs,
            facts: BTreeMap::new(),
            warned: RefCell::new(BTreeSet::new()),
            environ: RefCell::new(None),
            texts: RefCell::new(HashMap::new()),
            programs: RefCell::new(HashMap::new()),
            network_namespace: OnceCell::new(),
        }
    }

    /// Sets a fact (name without the `ansible_` prefix).
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<Value>) {
        self.facts.insert(name.into(), value.into());
    }

    /// A fact gathered earlier, as text.
    pub fn fact_str(&self, name: &str) -> Option<&str> {
        self.facts.get(name).and_then(Value::as_str)
    }

    /// Reports a problem that did not stop the plugin, once per message.
    pub fn warn(&self, message: impl Into<String>) {
        let message = message.into();
        if self.warned.borrow_mut().insert(message.clone()) {
            progress::warn(&message);
        }
    }

    /// The file's text, stripped of surrounding whitespace; `None` when it does not exist or
    /// cannot be read (the latter with a warning).
    pub fn read(&self, path: &str) -> Option<String> {
        self.read_raw(path).map(|text| text.trim().to_owned())
    }

    /// The file's text as it is.
    pub fn read_raw(&self, path: &str) -> Option<String> {
        // Several collectors read the same files (os-release, /proc/self/status); each read
        // is several calls out of the sandbox, so each file is read once per run.
        if let Some(cached) = self.texts.borrow().get(path) {
            return cached.clone();
        }
        let text = self.absent_or_warn(path, self.fs.read_to_string(path));
        self.texts
            .borrow_mut()
            .insert(path.to_owned(), text.clone());
        text
    }

    /// The file's bytes.
    pub fn read_bytes(&self, path: &str) -> Option<Vec<u8>> {
        self.absent_or_warn(path, self.fs.read(path))
    }

    /// Entries of a directory; `None` when it does not exist or cannot be listed.
    pub fn list(&self, path: &str) -> Option<Vec<String>> {
        self.absent_or_warn(path, self.fs.read_dir(path))
    }

    pub fn exists(&self, path: &str) -> bool {
        self.fs.exists(path)
    }

    fn absent_or_warn<T>(&self, path: &str, result: io::Result<T>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.warn_if_root_missing(path);
                None
            }
            Err(e) => {
                self.warn(format!("skipped a fact: {e}"));
                None
            }
        }
    }

    /// A missing file below a missing root means the root was not granted (or the host has
    /// none): say so once, since every fact from there is lost.
    fn warn_if_root_missing(&self, path: &str) {
        let Some(root) = ESSENTIAL_ROOTS.iter().find(|root| {
            path.strip_prefix(**root)
                .is_some_and(|rest| rest.starts_with('/'))
        }) else {
            return;
        };
        if self.warned.borrow().contains(*root) || self.fs.is_dir(root) {
            return;
        }
        self.warned.borrow_mut().insert(root.to_string());
        progress::warn(&format!(
            "{root} is not readable (not granted with --grant read:{root}, or absent below the \
             host root): facts read from it are missing"
        ));
    }

    /// Whether factbuoy runs in the host root's network namespace, which host names, addresses
    /// and routes come from ([`netns`]); looked at once per run.
    pub fn network_namespace(&self) -> &NetworkNamespace {
        self.network_namespace
            .get_or_init(|| netns::network_namespace(&self.fs))
    }

    /// The environment of the process running factbuoy (what Ansible reports for the
    /// process running the module), as far as the host passes it to plugins: the non-secret
    /// variables docs/sandbox.md lists (HOME, LANG, LC_*, LOGNAME, USER, PATH, ...).
    pub fn process_environ(&self) -> Vec<(String, String)> {
        if let Some(cached) = self.environ.borrow().as_ref() {
            return cached.clone();
        }
        let mut vars: Vec<(String, String)> = std::env::vars().collect();
        vars.sort();
        *self.environ.borrow_mut() = Some(vars.clone());
        vars
    }

    /// One variable of that environment.
    pub fn process_env(&self, name: &str) -> Option<String> {
        self.process_environ()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    /// Where a program is, as Ansible's `get_bin_path` finds it: `PATH`, then the sbin
    /// directories. Directories the run did not grant are not searched.
    pub fn find_bin(&self, name: &str) -> Option<String> {
        if let Some(known) = self.programs.borrow().get(name) {
            return known.clone();
        }
        let found = self.search_path(name);
        self.programs
            .borrow_mut()
            .insert(name.to_owned(), found.clone());
        found
    }

    fn search_path(&self, name: &str) -> Option<String> {
        let path = self
            .process_env("PATH")
            .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        path.split(':')
            .filter(|dir| dir.starts_with('/'))
            .chain(EXTRA_BIN_DIRS.iter().copied())
            .map(|dir| format!("{}/{name}", dir.trim_end_matches('/')))
            .find(|candidate| self.fs.is_file(candidate))
    }
}
