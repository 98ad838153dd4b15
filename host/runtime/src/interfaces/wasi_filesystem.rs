//! `wasi:filesystem/types` with [`crate::fsguard`]'s rules below it. wasmtime-wasi's own
//! implementation opens whatever lies below a preopen, blocking the plugin's thread on a FIFO
//! and revealing magic links; this one opens files itself (resolved beneath the directory by
//! cap-primitives, which refuses `..`, absolute symlinks and magic links), checks the opened
//! descriptor, and delegates every other call to wasmtime-wasi unchanged.

use cap_primitives::fs::OpenOptionsExt as _;
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

use wasmtime::component::{HasData, Linker, Resource};
use wasmtime_wasi::OpenMode;
use wasmtime_wasi::filesystem::{Descriptor, Dir, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, FsError, FsResult};

use crate::fsguard::{Checked, FsGuard, PathRefusal, ProcUse, is_local, special_kind};
use crate::interfaces::InstanceState;

/// The store's view for `wasi:filesystem/types`: wasmtime-wasi's, and the run's guard.
pub struct GuardedFs<'a> {
    fs: WasiFilesystemCtxView<'a>,
    guard: &'a mut FsGuard,
}

/// [`HasData`] for [`GuardedFs`].
pub struct GuardedFilesystem;

impl HasData for GuardedFilesystem {
    type Data<'a> = GuardedFs<'a>;
}

fn guarded(state: &mut InstanceState) -> GuardedFs<'_> {
    GuardedFs {
        fs: WasiFilesystemCtxView {
            ctx: state.wasi.filesystem(),
            table: &mut state.table,
        },
        guard: &mut state.fs_guard,
    }
}

/// Replaces wasmtime-wasi's `wasi:filesystem/types` in `linker` (which already has the rest of
/// WASI) with the guarded one.
pub(crate) fn add_to_linker(linker: &mut Linker<InstanceState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let added = types::add_to_linker::<InstanceState, GuardedFilesystem>(linker, guarded);
    linker.allow_shadowing(false);
    added
}

/// The WASI error a refusal becomes: `access` for the /proc rule (what an unreadable file
/// gives), `unsupported` for a special file, `io` when the check itself failed.
fn refusal_error(refusal: &PathRefusal, path: &str) -> FsError {
    tracing::debug!("refused a plugin's {path:?}: {refusal}");
    match refusal {
        PathRefusal::Special(_) => ErrorCode::Unsupported.into(),
        PathRefusal::Proc(_) => ErrorCode::Access.into(),
        PathRefusal::Io(_) => ErrorCode::Io.into(),
    }
}

fn io_error(e: &io::Error) -> FsError {
    ErrorCode::from(e).into()
}

/// Opens `path` below `dir` for reading, refusing a special file before opening it, and
/// without blocking (`O_NONBLOCK`) or taking a terminal (`O_NOCTTY`).
fn open_beneath(dir: &File, path: &str, follow: bool) -> io::Result<File> {
    let follow = if follow {
        cap_primitives::fs::FollowSymlinks::Yes
    } else {
        cap_primitives::fs::FollowSymlinks::No
    };
    let path = Path::new(path);
    // Refused unopened: opening a device can have effects (a watchdog starts, a tape rewinds).
    let meta = cap_primitives::fs::stat(dir, path, follow)?;
    if let Some(kind) = special_kind(cap_primitives::fs::MetadataExt::mode(&meta)) {
        return Err(io::Error::other(PathRefusal::Special(kind)));
    }
    let mut options = cap_primitives::fs::OpenOptions::new();
    options
        .read(true)
        ._cap_fs_ext_follow(follow)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY);
    cap_primitives::fs::open(dir, path, &options)
}

/// Runs `body` on the plugin's thread when `dir` is on a file system that cannot hang, else on
/// a blocking thread that the run's deadline can abandon.
async fn on_fitting_thread<R: Send + 'static>(
    dir: &Arc<File>,
    body: impl FnOnce(&File) -> R + Send + 'static,
) -> R {
    let local = nix::sys::statfs::fstatfs(&**dir).is_ok_and(|s| is_local(s.filesystem_type()));
    if local {
        body(dir)
    } else {
        let dir = dir.clone();
        wasmtime_wasi::runtime::spawn_blocking(move || body(&dir)).await
    }
}

impl GuardedFs<'_> {
    fn dir(&mut self, fd: &Resource<Descriptor>) -> FsResult<Dir> {
        match self.fs.table.get(fd)? {
            Descriptor::Dir(dir) => Ok(dir.clone()),
            Descriptor::File(_) => Err(ErrorCode::NotDirectory.into()),
        }
    }
}

impl types::Host for GuardedFs<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<ErrorCode> {
        types::Host::convert_error_code(&mut self.fs, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        types::Host::filesystem_error_code(&mut self.fs, err)
    }
}

impl HostDescriptor for GuardedFs<'_> {
    async fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        let dir = self.dir(&fd)?;
        // Nothing is ever created or written: every preopen is read-only.
        let writes =
            types::OpenFlags::CREATE | types::OpenFlags::EXCLUSIVE | types::OpenFlags::TRUNCATE;
        if oflags.intersects(writes) || flags.contains(types::DescriptorFlags::WRITE) {
            return Err(ErrorCode::NotPermitted.into());
        }
        if flags.intersects(
            types::DescriptorFlags::FILE_INTEGRITY_SYNC
                | types::DescriptorFlags::DATA_INTEGRITY_SYNC
                | types::DescriptorFlags::REQUESTED_WRITE_SYNC,
        ) {
            return Err(ErrorCode::Unsupported.into());
        }
        // `/` itself, when nothing grants it, is the empty directory: as ungranted as below it.
        if matches!(path.as_str(), "" | ".") && self.guard.note_if_ungranted(&dir.dir, &path) {
            return Err(ErrorCode::Access.into());
        }
        let follow = path_flags.contains(types::PathFlags::SYMLINK_FOLLOW);
        let name = path.clone();
        let opened = on_fitting_thread(&dir.dir, move |d| open_beneath(d, &name, follow)).await;
        let file = match opened {
            Ok(file) => file,
            // Below the empty directory mapped at `/`: a path no grant covers. `access`, not
            // "no such file": the file may well be there; the report says which grant it needs.
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    && self.guard.note_if_ungranted(&dir.dir, &path) =>
            {
                return Err(ErrorCode::Access.into());
            }
            Err(e) => {
                return Err(match e.get_ref().and_then(|e| e.downcast_ref()) {
                    Some(refusal) => refusal_error(refusal, &path),
                    None => io_error(&e),
                });
            }
        };
        let Checked { is_dir, local } = self
            .guard
            .check(&file, ProcUse::Open)
            .map_err(|refusal| refusal_error(&refusal, &path))?;
        if oflags.contains(types::OpenFlags::DIRECTORY) && !is_dir {
            return Err(ErrorCode::NotDirectory.into());
        }
        let descriptor = if is_dir {
            Descriptor::Dir(Dir::new(file, dir.perms, OpenMode::READ, local))
        } else {
            Descriptor::File(wasmtime_wasi::filesystem::File::new(
                file,
                dir.perms,
                OpenMode::READ,
                local,
            ))
        };
        Ok(self.fs.table.push(descriptor)?)
    }

    async fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        let dir = self.dir(&fd)?;
        let link = Path::new(&path);
        let (parent, name) = match (link.parent(), link.file_name()) {
            (Some(parent), Some(name)) => (parent.to_owned(), name.to_owned()),
            // `..`, `.` or empty: never a link, as readlinkat(2) tells.
            _ => (link.to_owned(), Default::default()),
        };
        let parent_dir = {
            let parent = parent.clone();
            on_fitting_thread(&dir.dir, move |d| open_parent(d, &parent)).await
        }
        .map_err(|e| io_error(&e))?;
        let name_text = name.to_string_lossy().into_owned();
        self.guard
            .check_link(&parent_dir, &name_text)
            .map_err(|refusal| refusal_error(&refusal, &path))?;
        // As wasmtime-wasi reads it: an absolute target (a path of the host's) is refused.
        let name = if name.is_empty() {
            ".".as_ref()
        } else {
            name.as_os_str()
        };
        cap_primitives::fs::read_link(&parent_dir, Path::new(name))
            .map_err(|e| io_error(&e))?
            .into_os_string()
            .into_string()
            .map_err(|_| ErrorCode::IllegalByteSequence.into())
    }

    async fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
        len: types::Filesize,
        advice: types::Advice,
    ) -> FsResult<()> {
        HostDescriptor::advise(&mut self.fs, fd, offset, len, advice).await
    }

    async fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        HostDescriptor::sync_data(&mut self.fs, fd).await
    }

    async fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorFlags> {
        HostDescriptor::get_flags(&mut self.fs, fd).await
    }

    async fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorType> {
        HostDescriptor::get_type(&mut self.fs, fd).await
    }

    async fn set_size(&mut self, fd: Resource<Descriptor>, size: types::Filesize) -> FsResult<()> {
        HostDescriptor::set_size(&mut self.fs, fd, size).await
    }

    async fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        HostDescriptor::set_times(&mut self.fs, fd, atim, mtim).await
    }

    async fn read(
        &mut self,
        fd: Resource<Descriptor>,
        len: types::Filesize,
        offset: types::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        HostDescriptor::read(&mut self.fs, fd, len, offset).await
    }

    async fn write(
        &mut self,
        fd: Resource<Descriptor>,
        buf: Vec<u8>,
        offset: types::Filesize,
    ) -> FsResult<types::Filesize> {
        HostDescriptor::write(&mut self.fs, fd, buf, offset).await
    }

    async fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<types::DirectoryEntryStream>> {
        HostDescriptor::read_directory(&mut self.fs, fd).await
    }

    async fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        HostDescriptor::sync(&mut self.fs, fd).await
    }

    async fn create_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        HostDescriptor::create_directory_at(&mut self.fs, fd, path).await
    }

    async fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorStat> {
        HostDescriptor::stat(&mut self.fs, fd).await
    }

    async fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        HostDescriptor::stat_at(&mut self.fs, fd, path_flags, path).await
    }

    async fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        HostDescriptor::set_times_at(&mut self.fs, fd, path_flags, path, atim, mtim).await
    }

    async fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path_flags: types::PathFlags,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        HostDescriptor::link_at(
            &mut self.fs,
            fd,
            old_path_flags,
            old_path,
            new_descriptor,
            new_path,
        )
        .await
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        HostDescriptor::drop(&mut self.fs, fd)
    }

    async fn remove_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        HostDescriptor::remove_directory_at(&mut self.fs, fd, path).await
    }

    async fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        HostDescriptor::rename_at(&mut self.fs, fd, old_path, new_fd, new_path).await
    }

    async fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        HostDescriptor::symlink_at(&mut self.fs, fd, src_path, dest_path).await
    }

    async fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        HostDescriptor::unlink_file_at(&mut self.fs, fd, path).await
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
        HostDescriptor::read_via_stream(&mut self.fs, fd, offset)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynOutputStream>> {
        HostDescriptor::write_via_stream(&mut self.fs, fd, offset)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<DynOutputStream>> {
        HostDescriptor::append_via_stream(&mut self.fs, fd)
    }

    async fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        HostDescriptor::is_same_object(&mut self.fs, a, b).await
    }

    async fn metadata_hash(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<types::MetadataHashValue> {
        HostDescriptor::metadata_hash(&mut self.fs, fd).await
    }

    async fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        HostDescriptor::metadata_hash_at(&mut self.fs, fd, path_flags, path).await
    }
}

impl HostDirectoryEntryStream for GuardedFs<'_> {
    async fn read_directory_entry(
        &mut self,
        stream: Resource<types::DirectoryEntryStream>,
    ) -> FsResult<Option<types::DirectoryEntry>> {
        HostDirectoryEntryStream::read_directory_entry(&mut self.fs, stream).await
    }

    fn drop(&mut self, stream: Resource<types::DirectoryEntryStream>) -> wasmtime::Result<()> {
        HostDirectoryEntryStream::drop(&mut self.fs, stream)
    }
}

/// The directory holding a link, opened below `dir` (`path` empty: `dir` itself).
pub(crate) fn open_parent(dir: &File, path: &Path) -> io::Result<File> {
    let path = if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    };
    cap_primitives::fs::open_dir(dir, path)
}
