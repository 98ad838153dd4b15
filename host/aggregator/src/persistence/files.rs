//! The file-system steps the layers that write share: a file replaced whole or not at all, a
//! directory whose entries survive a power loss, telling a full disk from other failures,
//! removing whatever is at a path, listing a directory. Every record the aggregator keeps is
//! written through [`write_atomically`].

use std::io::Write;
use std::path::Path;

/// Writes a file through a temporary beside it and a rename, so readers and a crash mid-write
/// never leave a torn file; the directory is synced so the rename survives a power loss. A write
/// that fails (a full disk) removes its temporary and leaves the old file as it was. The file is
/// its owner's only (0600): records name nodes, plugins and parameters, and a run directory may
/// be anywhere (`--run-dir`), not only in the private state directory.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let temporary = path.with_extension("tmp");
    // A temporary a crash left keeps its old mode when opened again: start anew.
    remove_any(&temporary)?;
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(e);
    }
    sync_dir(path.parent().expect("files have a parent"))
}

/// Makes the entries of `dir` (created, renamed, removed) durable.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Whether an I/O error says the disk is full (space or inodes, or the quota).
pub(crate) fn is_disk_full(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

/// Removes a file or a tree; nothing there is fine.
pub(crate) fn remove_any(path: &Path) -> std::io::Result<()> {
    let removed = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match removed {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// The names in a directory; none if it does not exist.
pub(crate) fn read_dir_names(dir: &Path) -> std::io::Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut names = Vec::new();
    for entry in entries {
        names.push(entry?.file_name().to_string_lossy().into_owned());
    }
    Ok(names)
}
