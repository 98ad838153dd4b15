//! `is-chroot`: Ansible's test of whether the host root is a chroot.

use std::path::Path;

use super::root::{read_below, resolve_below};

/// Ansible's test, on the host root: it differs from the root of its process 1; where that
/// cannot be read (not root), it is not the file system's root inode. The `debian_chroot`
/// variable describes the factbuoy process, so it counts only when the host root is `/`.
///
/// A host root other than `/` that process 1's root cannot be compared with (a pod's `/host`,
/// whose agent is not root) is made of the node's directories mounted below it, not a file
/// system's root: there the question is whether its `/etc` is process 1's `/etc`
/// ([`etc_is_init_etc`]), which the inode test would always answer wrongly.
pub(super) fn is_chroot(root: &Path) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    if root == Path::new("/") && std::env::var_os("debian_chroot").is_some_and(|v| !v.is_empty()) {
        return Some(true);
    }
    let own_root = std::fs::metadata(root).ok()?;
    let init_root =
        resolve_below(root, "/proc/1").and_then(|proc_1| std::fs::metadata(proc_1.join("root/.")));
    if let Ok(init_root) = init_root {
        return Some(own_root.ino() != init_root.ino() || own_root.dev() != init_root.dev());
    }
    if root != Path::new("/")
        && let Some(same) = etc_is_init_etc(root)
    {
        return Some(!same);
    }
    use nix::sys::statfs::{BTRFS_SUPER_MAGIC, XFS_SUPER_MAGIC, statfs};
    let root_inode = match statfs(root).map(|s| s.filesystem_type()) {
        Ok(kind) if kind == BTRFS_SUPER_MAGIC => 256,
        Ok(kind) if kind == XFS_SUPER_MAGIC => 128,
        Ok(_) => 2,
        Err(_) => return None,
    };
    Some(own_root.ino() != root_inode)
}

/// Whether the host root's `/etc` is the directory process 1 sees as `/etc`, told from mount
/// tables anyone may read: the factbuoy process's own, where the root's `/etc` is mounted (a
/// pod's `/host/etc`), and process 1's, below the root ([`factbuoy_linux::mounts::locate`]).
/// `None` when a table cannot be read or the root has no `/etc`.
fn etc_is_init_etc(root: &Path) -> Option<bool> {
    use factbuoy_linux::mounts::{locate, parse_mountinfo};
    let own = parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").ok()?);
    let init = parse_mountinfo(&read_below(root, "/proc/1/mountinfo").ok()?);
    let etc = std::fs::canonicalize(root.join("etc")).ok()?;
    Some(locate(&own, etc.to_str()?)? == locate(&init, "/etc")?)
}
