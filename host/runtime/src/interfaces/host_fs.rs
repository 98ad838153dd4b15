//! `host-fs`: symlink targets that WASI will not reveal (absolute ones), for links that lie
//! below one of the run's granted read paths. Only the link's text leaves the host: the guest
//! then reads through its target with WASI like any other path, so what it can read is still
//! exactly what the grants cover.

use std::path::{Path, PathBuf};

use crate::bindings::factbuoy::plugin::host_fs::{self, LinkError};
use crate::fsguard::{FsGuard, PathRefusal};
use crate::interfaces::InstanceState;
use crate::interfaces::wasi_filesystem::open_parent;

impl host_fs::Host for InstanceState {
    fn read_link(&mut self, path: String) -> wasmtime::Result<Result<String, LinkError>> {
        self.check_call_size("host-fs.read-link", path.len())?;
        Ok(read_link(
            &self.host_root,
            &self.read_paths,
            &path,
            &mut self.fs_guard,
        ))
    }
}

/// The target of the symlink at guest path `path`, if it lies strictly below one of `grants`
/// (guest paths mapped below `root`) and `guard` allows reading it (the /proc rule).
pub(crate) fn read_link(
    root: &Path,
    grants: &[String],
    path: &str,
    guard: &mut FsGuard,
) -> Result<String, LinkError> {
    let not_granted = || LinkError::NotGranted(format!("{path}: not below a granted read path"));
    if path.contains('\0') {
        return Err(LinkError::Io(format!("{path:?}: contains a NUL byte")));
    }
    // `..` applied lexically first, so `/etc/../root/x` is checked as `/root/x`.
    let parts = factbuoy_linux::paths::normalize(path).ok_or_else(not_granted)?;
    // The most specific grant holding the link. The grant itself is not revealed: its own
    // target would describe the ungranted directory above it.
    let (grant, below) = grants
        .iter()
        .filter_map(|grant| {
            let grant_parts = factbuoy_linux::paths::normalize(grant)?;
            let below = parts.strip_prefix(grant_parts.as_slice())?;
            (!below.is_empty()).then_some((grant, below))
        })
        .min_by_key(|(_, below)| below.len())
        .ok_or_else(not_granted)?;
    // Opened as the preopen was: symlinks in the grant's own path are followed.
    let grant_dir = root.join(grant.trim_start_matches('/'));
    let dir = std::fs::File::open(&grant_dir)
        .map_err(|e| LinkError::Io(format!("{path}: opening the granted {grant}: {e}")))?;
    // Resolved inside the grant's directory: an intermediate symlink that leaves it (`..`
    // past the grant, or an absolute target) is refused rather than followed.
    let relative: PathBuf = below.iter().collect();
    let (Some(parent), Some(name)) = (relative.parent(), relative.file_name()) else {
        return Err(not_granted());
    };
    let read = open_parent(&dir, parent).and_then(|parent| {
        guard
            .check_link(&parent, &name.to_string_lossy())
            .map_err(|refusal| match refusal {
                PathRefusal::Io(e) => e,
                refused => std::io::Error::new(std::io::ErrorKind::PermissionDenied, refused),
            })?;
        cap_primitives::fs::read_link_contents(&parent, Path::new(name))
    });
    match read {
        Ok(target) => Ok(target.to_string_lossy().into_owned()),
        Err(e) => Err(match e.kind() {
            std::io::ErrorKind::NotFound => LinkError::NotFound(format!("{path}: {e}")),
            std::io::ErrorKind::InvalidInput => {
                LinkError::NotALink(format!("{path}: not a symlink"))
            }
            // cap-primitives reports a path that would leave the directory this way.
            std::io::ErrorKind::PermissionDenied => LinkError::NotGranted(format!(
                "{path}: reaching it leaves the granted {grant}, or it is not readable: {e}"
            )),
            _ => LinkError::Io(format!("{path}: {e}")),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A root with granted `/etc` and `/usr`, ungranted `/root`, and links of every kind.
    fn root() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        for d in ["etc/sub", "usr/share", "root"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        symlink("/usr/share/zoneinfo/UTC", r.join("etc/localtime")).unwrap();
        symlink("/etc/shadow", r.join("root/link")).unwrap();
        symlink("/usr/x", r.join("etc/sub/deep")).unwrap();
        symlink("../root", r.join("etc/up")).unwrap();
        symlink("/root", r.join("etc/absolute-dir")).unwrap();
        symlink("sub", r.join("etc/inner-dir")).unwrap();
        std::fs::write(r.join("etc/hostname"), "h\n").unwrap();
        dir
    }

    fn grants() -> Vec<String> {
        vec!["/etc".into(), "/usr".into()]
    }

    #[test]
    fn links_below_a_grant_are_revealed() {
        let dir = root();
        let read = |p: &str| read_link(dir.path(), &grants(), p, &mut FsGuard::default());
        assert_eq!(read("/etc/localtime").unwrap(), "/usr/share/zoneinfo/UTC");
        assert_eq!(read("/etc/./sub/deep").unwrap(), "/usr/x");
        assert_eq!(
            read("/usr/../etc/localtime").unwrap(),
            "/usr/share/zoneinfo/UTC"
        );
        // A symlinked directory that stays inside the grant is followed.
        assert_eq!(read("/etc/inner-dir/deep").unwrap(), "/usr/x");
        assert_eq!(read("/etc/up").unwrap(), "../root");
    }

    #[test]
    fn everything_else_is_refused() {
        let dir = root();
        let read = |p: &str| read_link(dir.path(), &grants(), p, &mut FsGuard::default());
        for refused in [
            "/root/link",
            "/etc/../root/link",
            "/etc",
            "/",
            "etc/localtime",
        ] {
            assert!(
                matches!(read(refused), Err(LinkError::NotGranted(_))),
                "{refused}: {:?}",
                read(refused)
            );
        }
        // Through directories that leave the grant.
        for escape in ["/etc/up/link", "/etc/absolute-dir/link"] {
            assert!(
                matches!(read(escape), Err(LinkError::NotGranted(_))),
                "{escape}: {:?}",
                read(escape)
            );
        }
        assert!(matches!(read("/etc/hostname"), Err(LinkError::NotALink(_))));
        assert!(matches!(read("/etc/absent"), Err(LinkError::NotFound(_))));
        assert!(matches!(read("/etc/a\0b"), Err(LinkError::Io(_))));
        assert!(read_link(dir.path(), &[], "/etc/localtime", &mut FsGuard::default()).is_err());
    }
}
