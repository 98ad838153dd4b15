//! What a plugin may open below its grants, checked on the opened file itself, below every way
//! a plugin names a path (WASI `open-at` and `readlink-at` from any preopen, `host-fs.read-link`).
//!
//! Two rules, both documented in docs/sandbox.md:
//!
//! - **Only regular files and directories.** A FIFO, socket, character or block device is
//!   refused before it is opened (opening a device can have effects, `/dev/watchdog`) and again
//!   on the opened descriptor, which is opened `O_NONBLOCK | O_NOCTTY` so that nothing swapped
//!   in between can block. A raw disk would bypass every file permission; a FIFO would block
//!   the thread the plugin runs on, past any deadline.
//! - **The /proc rule.** In a procfs mount (told by `fstatfs`, wherever it is mounted: `/proc`,
//!   `/host/proc`, or reached from a `read:/` grant) the files outside process directories are
//!   readable except those that reveal kernel memory or block ([`DENIED_TOP`]); inside
//!   `<pid>/` and `<pid>/task/<tid>/` only what `ps` shows any local user ([`PID_FILES`]),
//!   `net/` and the `ns/` links. Never another process's (or factbuoy's own) memory,
//!   environment, file descriptors, mappings or magic links (`cwd`, `root`, `exe`).
//!
//! Files on file systems that can hang (network, FUSE, anything not known to be local) are
//! read off the plugin's thread, so a hung server costs only an abandoned thread, never the
//! deadline.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::sys::statfs::{self, FsType};

/// Files at the top of procfs that are never opened: kernel memory and page maps, the kernel
/// log and ACPI events (whose reads block), the key rings and kernel addresses.
pub const DENIED_TOP: &[&str] = &[
    "kcore",
    "kmsg",
    "kpagecount",
    "kpageflags",
    "kpagecgroup",
    "sysrq-trigger",
    "keys",
    "key-users",
    "kallsyms",
    "timer_list",
    "vmallocinfo",
    "sched_debug",
    "acpi",
];

/// Files of a process (or thread) directory that may be opened: what `ps` and `top` show every
/// local user, and the mount table.
pub const PID_FILES: &[&str] = &[
    "comm",
    "cmdline",
    "stat",
    "status",
    "statm",
    "cgroup",
    "mountinfo",
    "mounts",
];

/// How a path in procfs is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcUse {
    /// Opened, to read a file or list a directory.
    Open,
    /// Read as a symlink (its target's text).
    ReadLink,
}

fn is_pid(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `path`, relative to a procfs mount's root (components, no `.` or `..`), may be used
/// as `how`.
pub fn proc_allowed(path: &[&str], how: ProcUse) -> bool {
    match path {
        [] => how == ProcUse::Open,
        [pid, rest @ ..] if is_pid(pid) => pid_allowed(rest, how, true),
        [first, ..] => !DENIED_TOP.contains(first) && !first.starts_with("kpage"),
    }
}

/// Inside `<pid>/` (`top`) or `<pid>/task/<tid>/`.
fn pid_allowed(rest: &[&str], how: ProcUse, top: bool) -> bool {
    match rest {
        [] => how == ProcUse::Open,
        ["task"] if top => how == ProcUse::Open,
        ["task", tid, more @ ..] if top && is_pid(tid) => pid_allowed(more, how, false),
        ["net", ..] => true,
        ["ns"] => how == ProcUse::Open,
        ["ns", _] => how == ProcUse::ReadLink,
        [name] => how == ProcUse::Open && PID_FILES.contains(name),
        _ => false,
    }
}

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathRefusal {
    /// Not a regular file or directory; holds what it is.
    #[error("it is a {0}; only regular files and directories can be opened")]
    Special(&'static str),
    /// Outside what the /proc rule allows; holds the path inside procfs.
    #[error("/proc/{0} is not readable by plugins (see the /proc rule in docs/sandbox.md)")]
    Proc(String),
    /// The check itself failed; refused rather than let through.
    #[error("it could not be checked: {0}")]
    Io(#[from] io::Error),
}

/// What an opened file is, once allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// A directory (else a regular file).
    pub is_dir: bool,
    /// On a file system whose calls cannot hang (local disks and the kernel's own), so it may
    /// be read on the plugin's thread.
    pub local: bool,
}

/// The kind of a file that is not regular, a directory or a symlink, from its `st_mode`, for
/// messages; `None` for those three. (A final symlink that is not followed fails to open with
/// ELOOP, as in POSIX; an opened file is never one.)
pub fn special_kind(mode: u32) -> Option<&'static str> {
    use nix::sys::stat::SFlag;
    match SFlag::from_bits_truncate(mode) & SFlag::S_IFMT {
        SFlag::S_IFREG | SFlag::S_IFDIR | SFlag::S_IFLNK => None,
        SFlag::S_IFIFO => Some("FIFO"),
        SFlag::S_IFSOCK => Some("socket"),
        SFlag::S_IFCHR => Some("character device"),
        SFlag::S_IFBLK => Some("block device"),
        _ => Some("file of unknown type"),
    }
}

/// File systems whose calls return promptly: local disks, memory and the kernel's own.
/// Anything else (NFS, CIFS, FUSE, Ceph, 9p, unknown) is read off the plugin's thread.
pub(crate) fn is_local(kind: FsType) -> bool {
    use nix::sys::statfs::*;
    [
        PROC_SUPER_MAGIC,
        SYSFS_MAGIC,
        TMPFS_MAGIC,
        EXT4_SUPER_MAGIC, // also ext2 and ext3
        XFS_SUPER_MAGIC,
        BTRFS_SUPER_MAGIC,
        F2FS_SUPER_MAGIC,
        OVERLAYFS_SUPER_MAGIC,
        CGROUP_SUPER_MAGIC,
        CGROUP2_SUPER_MAGIC,
        SECURITYFS_MAGIC,
        SELINUX_MAGIC,
        DEBUGFS_MAGIC,
        TRACEFS_MAGIC,
        ISOFS_SUPER_MAGIC,
        MSDOS_SUPER_MAGIC,
        CRAMFS_MAGIC,
        NSFS_MAGIC,
        BPF_FS_MAGIC,
        DEVPTS_SUPER_MAGIC,
        HUGETLBFS_MAGIC,
    ]
    .contains(&kind)
        // squashfs, whose magic number nix does not name.
        || kind.0 as u64 == 0x7371_7368
}

/// Most paths outside every grant one run records (see [`FsGuard::note_if_ungranted`]).
pub const MAX_UNGRANTED_PATHS: usize = 16;

/// The checks of one run, with what it learnt about the procfs mounts it met.
#[derive(Debug, Default)]
pub struct FsGuard {
    /// Where each procfs mount met so far is mounted, by device number.
    proc_roots: HashMap<u64, PathBuf>,
    /// The empty directory mapped at `/` when no grant covers `/` (device, inode): a path the
    /// plugin opens from it is one no grant covers.
    ungranted_root: Option<(u64, u64)>,
    /// Granted paths absent below the host root: what lies below them is simply not there.
    absent: Vec<String>,
    /// The paths the plugin tried to open outside every grant, the first
    /// [`MAX_UNGRANTED_PATHS`], normalised.
    pub ungranted: BTreeSet<String>,
}

impl FsGuard {
    /// Takes `dir` for the empty directory mapped at `/`; `absent` are the granted paths that
    /// do not exist below the host root (opening below them is "not found", as ever).
    pub fn watch_ungranted_root(&mut self, dir: &File, absent: &[String]) -> io::Result<()> {
        let meta = dir.metadata()?;
        self.ungranted_root = Some((meta.dev(), meta.ino()));
        self.absent = absent.to_vec();
        Ok(())
    }

    /// Whether `dir` is the empty directory mapped at `/`; if it is, `path` (relative to it)
    /// is recorded as a path the plugin wanted that no grant covers. Called only after an open
    /// below `dir` failed, so a successful open costs nothing more.
    pub fn note_if_ungranted(&mut self, dir: &File, path: &str) -> bool {
        let Some(root) = self.ungranted_root else {
            return false;
        };
        match dir.metadata() {
            Ok(meta) if (meta.dev(), meta.ino()) == root => {}
            _ => return false,
        }
        // Lexically, for the report: `.` goes, `..` takes the component before it.
        let mut parts: Vec<&str> = Vec::new();
        for part in path.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    parts.pop();
                }
                part => parts.push(part),
            }
        }
        let path = format!("/{}", parts.join("/"));
        if self
            .absent
            .iter()
            .any(|absent| crate::grants::is_within(&path, absent))
        {
            return false;
        }
        if self.ungranted.len() < MAX_UNGRANTED_PATHS {
            self.ungranted.insert(path);
        }
        true
    }

    /// Checks a file just opened for the plugin to use as `how`.
    pub fn check(&mut self, file: &File, how: ProcUse) -> Result<Checked, PathRefusal> {
        let meta = file.metadata()?;
        if let Some(kind) = special_kind(meta.mode()) {
            return Err(PathRefusal::Special(kind));
        }
        let kind = statfs::fstatfs(file)
            .map_err(io::Error::from)?
            .filesystem_type();
        if kind == statfs::PROC_SUPER_MAGIC {
            let inside = self.proc_path(file, meta.dev())?;
            let parts: Vec<&str> = inside.split('/').filter(|p| !p.is_empty()).collect();
            if !proc_allowed(&parts, how) {
                return Err(PathRefusal::Proc(inside));
            }
        }
        Ok(Checked {
            is_dir: meta.is_dir(),
            local: is_local(kind),
        })
    }

    /// Checks reading the symlink `name` in the open directory `dir`.
    pub fn check_link(&mut self, dir: &File, name: &str) -> Result<(), PathRefusal> {
        let meta = dir.metadata()?;
        let kind = statfs::fstatfs(dir)
            .map_err(io::Error::from)?
            .filesystem_type();
        if kind != statfs::PROC_SUPER_MAGIC || name == "." || name == ".." {
            return Ok(());
        }
        let inside = self.proc_path(dir, meta.dev())?;
        let mut parts: Vec<&str> = inside.split('/').filter(|p| !p.is_empty()).collect();
        parts.push(name);
        if proc_allowed(&parts, ProcUse::ReadLink) {
            Ok(())
        } else {
            Err(PathRefusal::Proc(parts.join("/")))
        }
    }

    /// The path of an open procfs file inside its mount, without a leading `/`: the kernel's
    /// name for the descriptor, less the mount's root (the ancestor on the same device whose
    /// inode is procfs's root inode, 1).
    fn proc_path(&mut self, file: &File, dev: u64) -> io::Result<String> {
        let name = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
        let root = match self.proc_roots.get(&dev) {
            Some(root) if name.starts_with(root) => root.clone(),
            _ => {
                let root = proc_root(&name, dev)?;
                self.proc_roots.insert(dev, root.clone());
                root
            }
        };
        let inside = name.strip_prefix(&root).map_err(io::Error::other)?;
        Ok(inside.to_string_lossy().into_owned())
    }
}

/// The mount root of the procfs instance `dev` that `name` lies in.
fn proc_root(name: &Path, dev: u64) -> io::Result<PathBuf> {
    const PROC_ROOT_INODE: u64 = 1;
    name.ancestors()
        .find(|dir| {
            std::fs::metadata(dir).is_ok_and(|m| m.dev() == dev && m.ino() == PROC_ROOT_INODE)
        })
        .map(Path::to_owned)
        .ok_or_else(|| {
            io::Error::other(format!(
                "no procfs root above {} on device {dev}",
                name.display()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(path: &str, how: ProcUse) -> bool {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        proc_allowed(&parts, how)
    }

    #[test]
    fn the_proc_rule() {
        use ProcUse::{Open, ReadLink};
        for ok in [
            "",
            "cpuinfo",
            "meminfo",
            "sys/kernel/hostname",
            "net",
            "1",
            "1/comm",
            "1/cmdline",
            "42/status",
            "42/mounts",
            "42/mountinfo",
            "42/net/dev",
            "42/ns",
            "42/task",
            "42/task/43",
            "42/task/43/stat",
        ] {
            assert!(allowed(ok, Open), "{ok}");
        }
        for denied in [
            "kcore",
            "kmsg",
            "kpageflags",
            "kpagezero",
            "sysrq-trigger",
            "acpi/event",
            "1/mem",
            "1/environ",
            "1/auxv",
            "1/fd",
            "1/fd/3",
            "1/fdinfo/3",
            "1/map_files",
            "1/maps",
            "1/smaps",
            "1/pagemap",
            "1/stack",
            "1/syscall",
            "1/cwd",
            "1/root",
            "1/exe",
            "1/io",
            "1/ns/mnt",
            "42/task/43/environ",
            "42/task/43/task/44/stat",
        ] {
            assert!(!allowed(denied, Open), "{denied}");
        }
        for ok in ["self", "mounts", "42/ns/mnt", "42/task/43/ns/net"] {
            assert!(allowed(ok, ReadLink), "{ok}");
        }
        for denied in [
            "1/cwd",
            "1/root",
            "1/exe",
            "1/fd/0",
            "1/map_files/1-2",
            "1/task/2/exe",
        ] {
            assert!(!allowed(denied, ReadLink), "{denied}");
        }
    }

    #[test]
    fn opened_files_are_checked_where_they_are() {
        let mut guard = FsGuard::default();
        let open = |p: &str| File::open(p).unwrap();
        let status = guard
            .check(&open("/proc/self/status"), ProcUse::Open)
            .unwrap();
        assert!(!status.is_dir && status.local);
        assert!(guard.check(&open("/proc"), ProcUse::Open).unwrap().is_dir);
        for denied in ["/proc/self/environ", "/proc/self/maps", "/proc/1/fdinfo"] {
            let Ok(file) = File::open(denied) else {
                continue;
            };
            assert!(
                matches!(guard.check(&file, ProcUse::Open), Err(PathRefusal::Proc(_))),
                "{denied}"
            );
        }
        assert!(matches!(
            guard.check(&open("/dev/null"), ProcUse::Open),
            Err(PathRefusal::Special("character device"))
        ));
        assert!(guard.check_link(&open("/proc/self/ns"), "mnt").is_ok());
        assert!(guard.check_link(&open("/proc/self"), "cwd").is_err());
        assert!(guard.check_link(&open("/proc/self/fd"), "0").is_err());
        assert!(guard.check_link(&open("/etc"), "localtime").is_ok());
    }
}
