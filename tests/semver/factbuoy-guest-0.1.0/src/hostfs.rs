//! Reading host files through the granted read-only preopens, following symlinks the way the
//! host would.
//!
//! The sandbox maps each granted path (`/etc`, `/proc`, ...) onto the same path below the host
//! root, and refuses symlinks that leave the preopen they start in, such as `/etc/os-release
//! -> ../usr/lib/os-release`. [`HostFs`] resolves such links itself, component by component,
//! against the host root, so the target is read through whichever granted preopen holds it.
//! Nothing outside the granted paths becomes reachable: every access still goes through the
//! sandbox.
//!
//! Absolute symlinks (`/etc/localtime -> /usr/share/zoneinfo/...`, `/etc/resolv.conf ->
//! /run/systemd/resolve/stub-resolv.conf`) mean a path below the host root too. WASI will not
//! reveal an absolute target, so [`HostFs::read_link`] asks the host for it (`host-fs`), which
//! answers for links that lie below a granted path; the target is then read through the
//! preopens like any other path, so one that points to an ungranted path stays unreadable.
//!
//! Every error names the path, and reads are capped ([`HostFs::MAX_READ_BYTES`]) so a hostile
//! or huge file cannot exhaust the plugin's memory.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::{self, Metadata};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Host files, seen through the sandbox's preopens.
#[derive(Debug, Clone)]
pub struct HostFs {
    /// Where guest path `/` lives: `/` inside a plugin, a directory in native tests.
    root: PathBuf,
    /// Paths already resolved by [`HostFs::canonicalize`]: a plugin reads the same few links
    /// (`/etc/os-release`, `/etc/mtab`) many times, and every step of a resolution is a call
    /// out of the sandbox. Host files do not move during one plugin run.
    resolved: RefCell<HashMap<String, String>>,
}

impl Default for HostFs {
    fn default() -> Self {
        Self::new()
    }
}

impl HostFs {
    /// Largest file [`HostFs::read`] accepts. Far above any `/proc`, `/sys` or `/etc` file a
    /// fact comes from; a larger one is an error instead of an allocation.
    pub const MAX_READ_BYTES: u64 = 64 * 1024 * 1024;

    /// The host as a plugin sees it: guest paths are host paths below the host root.
    pub fn new() -> Self {
        Self::with_root("/")
    }

    /// Host paths below `root` (for tests that lay out a fake host root in a directory).
    pub fn with_root(root: impl Into<PathBuf>) -> Self {
        HostFs {
            root: root.into(),
            resolved: RefCell::new(HashMap::new()),
        }
    }

    /// The whole file, at most [`HostFs::MAX_READ_BYTES`].
    pub fn read(&self, path: &str) -> io::Result<Vec<u8>> {
        self.read_limited(path, Self::MAX_READ_BYTES)
    }

    /// The whole file, refusing one larger than `max_bytes`.
    pub fn read_limited(&self, path: &str, max_bytes: u64) -> io::Result<Vec<u8>> {
        let file = self.open(path)?;
        let mut bytes = Vec::new();
        // Files in /proc and /sys report size 0, so read up to the limit instead of trusting it.
        file.take(max_bytes.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| context(path, "reading", e))?;
        if bytes.len() as u64 > max_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("reading {path}: larger than {max_bytes} bytes; refusing to load it"),
            ));
        }
        Ok(bytes)
    }

    /// The file as text; invalid UTF-8 is replaced rather than refused (a stray byte in a
    /// host name or a kernel command line should not lose the whole fact).
    pub fn read_to_string(&self, path: &str) -> io::Result<String> {
        Ok(String::from_utf8_lossy(&self.read(path)?).into_owned())
    }

    /// The file as text without surrounding whitespace: the form of a `/sys` attribute or a
    /// one-line `/proc` file.
    pub fn read_trimmed(&self, path: &str) -> io::Result<String> {
        Ok(self.read_to_string(path)?.trim().to_owned())
    }

    /// The file as trimmed text, or `None` when it cannot be read for any reason (missing,
    /// not granted, unreadable). For optional attributes.
    pub fn read_optional(&self, path: &str) -> Option<String> {
        self.read_trimmed(path).ok()
    }

    /// Opens a file for reading, following symlinks through the host root.
    pub fn open(&self, path: &str) -> io::Result<fs::File> {
        self.follow(path, "opening", |p| fs::File::open(p))
    }

    /// Where a symlink points, as written in the link. Inside the sandbox, WASI refuses to
    /// reveal an absolute target ("not permitted"); the host then tells it, for a link below a
    /// granted path.
    pub fn read_link(&self, path: &str) -> io::Result<String> {
        match fs::read_link(self.host_path(path)) {
            Ok(target) => Ok(target.to_string_lossy().into_owned()),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied && self.in_sandbox() => {
                host_read_link(path)
            }
            Err(e) => Err(context(path, "reading the link", e)),
        }
    }

    /// Metadata of what `path` finally points to.
    pub fn metadata(&self, path: &str) -> io::Result<Metadata> {
        self.follow(path, "reading metadata of", |p| fs::metadata(p))
    }

    /// Metadata of `path` itself, not following a final symlink.
    pub fn symlink_metadata(&self, path: &str) -> io::Result<Metadata> {
        fs::symlink_metadata(self.host_path(path))
            .map_err(|e| context(path, "reading metadata of", e))
    }

    /// Whether `path` exists (following symlinks) and can be reached through the grants.
    pub fn exists(&self, path: &str) -> bool {
        self.metadata(path).is_ok()
    }

    /// Whether `path` is a directory (following symlinks).
    pub fn is_dir(&self, path: &str) -> bool {
        self.metadata(path).is_ok_and(|m| m.is_dir())
    }

    /// Whether `path` is a regular file (following symlinks).
    pub fn is_file(&self, path: &str) -> bool {
        self.metadata(path).is_ok_and(|m| m.is_file())
    }

    /// Whether `path` itself is a symlink.
    pub fn is_symlink(&self, path: &str) -> bool {
        self.symlink_metadata(path)
            .is_ok_and(|m| m.file_type().is_symlink())
    }

    /// Names of the entries in a directory, in the order the host lists them.
    pub fn read_dir(&self, path: &str) -> io::Result<Vec<String>> {
        let listing = self.follow(path, "listing", |p| fs::read_dir(p))?;
        listing
            .map(|entry| {
                entry
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .map_err(|e| context(path, "listing", e))
            })
            .collect()
    }

    /// The absolute path with every symlink resolved against the host root, `.` and `..`
    /// applied, as realpath(3) would give it on the host. The path must exist.
    ///
    /// A directory the grants do not cover cannot be inspected; it is taken to be a plain
    /// directory (a symlink there is invisible to the plugin anyway).
    pub fn canonicalize(&self, path: &str) -> io::Result<String> {
        if let Some(known) = self.resolved.borrow().get(path) {
            return Ok(known.clone());
        }
        let resolved = self.resolve(path)?;
        self.resolved
            .borrow_mut()
            .insert(path.to_owned(), resolved.clone());
        Ok(resolved)
    }

    fn resolve(&self, path: &str) -> io::Result<String> {
        factbuoy_linux::paths::resolve(path, |current| {
            match fs::symlink_metadata(self.host_path(current)) {
                Ok(meta) if meta.file_type().is_symlink() => self
                    .read_link(current)
                    .map(Some)
                    .map_err(|e| io::Error::new(e.kind(), format!("resolving {path}: {e}"))),
                Ok(_) => Ok(None),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Err(context(path, "resolving", e)),
                // Not granted (or not readable): treat it as a plain directory. If the path
                // really needs it, opening the final path reports the error.
                Err(_) => Ok(None),
            }
        })
    }

    /// Runs `access` on the host path for `path`, following symlinks through the host root.
    ///
    /// Inside the sandbox the path as given is tried first: when that succeeds it is right,
    /// since the sandbox only follows symlinks that stay inside their preopen and refuses the
    /// rest (as "not permitted"), which are then resolved here. Below any other root (tests) the OS would follow an
    /// absolute link out of the root, so the path is always resolved first.
    fn follow<T>(
        &self,
        path: &str,
        doing: &str,
        access: impl Fn(&Path) -> io::Result<T>,
    ) -> io::Result<T> {
        if self.in_sandbox() {
            match access(&self.host_path(path)) {
                Ok(found) => return Ok(found),
                // The sandbox reports a symlink it will not follow as "not permitted", so "not
                // found" means the file is not there (or not granted): no need to resolve.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(context(path, doing, e));
                }
                Err(_) => {}
            }
        }
        let resolved = self.canonicalize(path)?;
        access(&self.host_path(&resolved)).map_err(|e| {
            if resolved == path {
                context(path, doing, e)
            } else {
                context(path, &format!("{doing} (resolved to {resolved})"), e)
            }
        })
    }

    /// The host path for a guest path.
    fn host_path(&self, guest_path: &str) -> PathBuf {
        self.root.join(guest_path.trim_start_matches('/'))
    }

    /// Paths are the sandbox's guest paths (not a directory of a native test).
    fn in_sandbox(&self) -> bool {
        self.root == Path::new("/")
    }
}

/// `host-fs.read-link`, with its refusals as the I/O errors the OS would give.
fn host_read_link(path: &str) -> io::Result<String> {
    use crate::__bindings::factbuoy::plugin::host_fs::{self, LinkError};
    host_fs::read_link(path).map_err(|e| {
        let (kind, message) = match e {
            LinkError::NotFound(m) => (io::ErrorKind::NotFound, m),
            LinkError::NotGranted(m) => (io::ErrorKind::PermissionDenied, m),
            LinkError::NotALink(m) => (io::ErrorKind::InvalidInput, m),
            LinkError::Io(m) => (io::ErrorKind::Other, m),
        };
        io::Error::new(kind, format!("reading the link {message}"))
    })
}

/// An I/O error that names the path and what was being done.
fn context(path: &str, doing: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{doing} {path}: {e}"))
}

/// The last component of a path (`basename`), for link targets such as `../../sda1`.
pub fn basename(path: &str) -> &str {
    Path::new(path)
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fake host root: /etc/os-release -> ../usr/lib/os-release, /etc/resolv.conf ->
    /// /run/resolv.conf (absolute), a loop, and /sys/class/net/eth0 -> ../../devices/net/eth0.
    fn host() -> (tempfile::TempDir, HostFs) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in [
            "etc",
            "usr/lib",
            "run",
            "sys/devices/net/eth0",
            "sys/class/net",
        ] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::write(root.join("usr/lib/os-release"), "ID=debian\n").unwrap();
        fs::write(root.join("run/resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
        fs::write(root.join("sys/devices/net/eth0/mtu"), "1500\n").unwrap();
        symlink("../usr/lib/os-release", root.join("etc/os-release")).unwrap();
        symlink("/run/resolv.conf", root.join("etc/resolv.conf")).unwrap();
        symlink("/etc/loop-b", root.join("etc/loop-a")).unwrap();
        symlink("/etc/loop-a", root.join("etc/loop-b")).unwrap();
        symlink("../../devices/net/eth0", root.join("sys/class/net/eth0")).unwrap();
        let fs = HostFs::with_root(root);
        (dir, fs)
    }

    #[test]
    fn absolute_and_relative_links_resolve_below_the_root() {
        let (_dir, fs) = host();
        assert_eq!(fs.read_to_string("/etc/os-release").unwrap(), "ID=debian\n");
        assert_eq!(
            fs.read_trimmed("/etc/resolv.conf").unwrap(),
            "nameserver 192.0.2.53"
        );
        assert_eq!(fs.read_trimmed("/sys/class/net/eth0/mtu").unwrap(), "1500");
        assert_eq!(
            fs.canonicalize("/etc/resolv.conf").unwrap(),
            "/run/resolv.conf"
        );
        assert_eq!(
            fs.canonicalize("/sys/class/net/eth0/../eth0/mtu").unwrap(),
            "/sys/devices/net/eth0/mtu"
        );
        assert!(fs.is_file("/etc/resolv.conf"));
        assert!(fs.is_symlink("/etc/resolv.conf"));
        assert!(fs.is_dir("/sys/class/net/eth0"));
        assert_eq!(fs.read_dir("/sys/class/net").unwrap(), ["eth0"]);
    }

    #[test]
    fn loops_and_missing_files_are_clear_errors() {
        let (_dir, fs) = host();
        let e = fs.read("/etc/loop-a").unwrap_err();
        assert!(e.to_string().contains("more than 40 symlinks"), "{e}");
        let e = fs.read("/etc/absent").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("/etc/absent"), "{e}");
        assert!(!fs.exists("/etc/absent"));
        assert!(fs.read_optional("/etc/absent").is_none());
        let e = fs.canonicalize("etc/os-release").unwrap_err();
        assert!(e.to_string().contains("must be absolute"), "{e}");
    }

    #[test]
    fn oversized_files_are_refused_not_loaded() {
        let (dir, fs) = host();
        std::fs::write(dir.path().join("etc/big"), vec![b'x'; 4096]).unwrap();
        let e = fs.read_limited("/etc/big", 1024).unwrap_err();
        assert!(e.to_string().contains("larger than 1024 bytes"), "{e}");
        assert_eq!(fs.read_limited("/etc/big", 4096).unwrap().len(), 4096);
    }

    #[test]
    fn basename_takes_the_last_component() {
        assert_eq!(basename("../../sda1"), "sda1");
        assert_eq!(basename("/dev/dm-0"), "dm-0");
    }
}
