//! `is-chroot`: Ansible's test of whether the host root is a chroot.

use std::path::Path;

use super::root::resolve_below;

/// Ansible's test, on the host root: it differs from the root of its process 1; where that
/// cannot be read (not root), it is not the file system's root inode. The `debian_chroot`
/// variable describes the factbuoy process, so it counts only when the host root is `/`.
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
    use nix::sys::statfs::{BTRFS_SUPER_MAGIC, XFS_SUPER_MAGIC, statfs};
    let root_inode = match statfs(root).map(|s| s.filesystem_type()) {
        Ok(kind) if kind == BTRFS_SUPER_MAGIC => 256,
        Ok(kind) if kind == XFS_SUPER_MAGIC => 128,
        Ok(_) => 2,
        Err(_) => return None,
    };
    Some(own_root.ino() != root_inode)
}
