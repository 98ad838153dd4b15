//! The host root (`--root`, `/host` in a pod) as `host-info` sees it: paths resolved below it
//! as a chroot would, the distribution's os-release, and the marker files it looks for.

use std::io;
use std::path::{Path, PathBuf};

/// Where guest path `guest` lives on the host, with every symlink resolved as if `root` were
/// `/` (a chroot; [`factbuoy_linux::paths::resolve`], the rule the guest SDK follows too). A
/// plain `root.join(guest)` would let an absolute link below the root (`/host/etc/os-release ->
/// /usr/lib/os-release`) name a file of the factbuoy container instead of the host.
pub(super) fn resolve_below(root: &Path, guest: &str) -> io::Result<PathBuf> {
    let resolved = factbuoy_linux::paths::resolve(guest, |current| {
        let path = host_path(root, current);
        if std::fs::symlink_metadata(&path)?.file_type().is_symlink() {
            Ok(Some(
                std::fs::read_link(&path)?.to_string_lossy().into_owned(),
            ))
        } else {
            Ok(None)
        }
    })?;
    Ok(host_path(root, &resolved))
}

fn host_path(root: &Path, guest: &str) -> PathBuf {
    root.join(guest.trim_start_matches('/'))
}

/// Reads guest file `guest` below `root`, following symlinks as [`resolve_below`] does.
pub(super) fn read_below(root: &Path, guest: &str) -> io::Result<String> {
    resolve_below(root, guest).and_then(std::fs::read_to_string)
}

/// Whether `guest` itself exists below `root` (a final symlink is not followed).
pub(super) fn exists_below(root: &Path, guest: &str) -> bool {
    let path = Path::new(guest);
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return false;
    };
    resolve_below(root, &parent.to_string_lossy())
        .is_ok_and(|dir| std::fs::symlink_metadata(dir.join(name)).is_ok())
}

/// The distribution as os-release(5) names it below the host root, parsed as the guest SDK
/// parses it (`factbuoy_linux::os_release`): `NAME`, `VERSION_ID`, `ID`, and `/etc/lsb-release`
/// for a missing name or version, as sysinfo reads them.
pub(super) struct OsRelease {
    pub name: Option<String>,
    pub version: Option<String>,
    pub id: String,
}

impl OsRelease {
    pub fn read(root: &Path) -> Self {
        use factbuoy_linux::os_release::{PATHS, parse};
        let os_release = PATHS
            .iter()
            .find_map(|path| read_below(root, path).ok())
            .map(|text| parse(&text))
            .unwrap_or_default();
        let lsb_release = read_below(root, "/etc/lsb-release")
            .map(|text| parse(&text))
            .unwrap_or_default();
        OsRelease {
            name: os_release
                .get("NAME")
                .or_else(|| lsb_release.get("DISTRIB_ID"))
                .cloned(),
            version: os_release
                .get("VERSION_ID")
                .or_else(|| lsb_release.get("DISTRIB_RELEASE"))
                .cloned(),
            id: os_release
                .get("ID")
                .cloned()
                .unwrap_or_else(|| std::env::consts::OS.to_owned()),
        }
    }
}

/// The paths `existing-markers` looks for, as documented in the WIT.
pub(super) const MARKER_PATHS: &[&str] =
    &["/.dockerenv", "/.dockerinit", "/.containerenv", "/dev/kvm"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_below_the_root_like_a_chroot() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        std::fs::create_dir_all(r.join("usr/lib")).unwrap();
        std::fs::create_dir_all(r.join("etc")).unwrap();
        std::fs::write(r.join("usr/lib/os-release"), "NAME=\"Fake OS\"\nID=fake\n").unwrap();
        std::os::unix::fs::symlink("/usr/lib/os-release", r.join("etc/os-release")).unwrap();
        std::os::unix::fs::symlink("../../..", r.join("usr/lib/up")).unwrap();
        assert_eq!(
            resolve_below(r, "/etc/os-release").unwrap(),
            r.join("usr/lib/os-release")
        );
        // `..` stops at the root.
        assert_eq!(
            resolve_below(r, "/usr/lib/up/../../etc").unwrap(),
            r.join("etc")
        );
        let release = OsRelease::read(r);
        assert_eq!(release.name.as_deref(), Some("Fake OS"));
        assert_eq!((release.id.as_str(), release.version), ("fake", None));
        assert!(exists_below(r, "/etc/os-release") && !exists_below(r, "/.dockerenv"));
    }

    #[test]
    fn os_release_is_unquoted_as_the_guest_sdk_unquotes_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::fs::write(
            dir.path().join("etc/os-release"),
            "NAME='Arch Linux'\nVERSION_ID=\"1 \\\"q\\\"\"\n",
        )
        .unwrap();
        let release = OsRelease::read(dir.path());
        assert_eq!(release.name.as_deref(), Some("Arch Linux"));
        assert_eq!(release.version.as_deref(), Some("1 \"q\""));
    }
}
