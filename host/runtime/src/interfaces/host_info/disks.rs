//! `disks` and `filesystem-usage`: the mounted file systems below the host root, as sysinfo
//! would list them, with statvfs(3) of each.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use nix::sys::statvfs::{FsFlags, Statvfs};

use super::root::{read_below, resolve_below};
use crate::bindings::factbuoy::plugin::host_info::{Disk, FilesystemStats};

/// Where the mount table that describes the host root is, chosen by the rule the guest SDK
/// follows ([`factbuoy_linux::mounts::table_dir`]): the root's process 1's when factbuoy runs in
/// another mount namespace (a pod's `/host/proc/self` is still the agent, in the pod's
/// namespace), else the factbuoy process's own.
fn table_dir(root: &Path) -> &'static str {
    use factbuoy_linux::mounts::{INIT_NAMESPACE, OWN_NAMESPACE, table_dir};
    let namespace = |link: &str| {
        std::fs::read_link(root.join(link.trim_start_matches('/')))
            .ok()
            .map(|target| target.to_string_lossy().into_owned())
    };
    table_dir(
        namespace(OWN_NAMESPACE).as_deref(),
        namespace(INIT_NAMESPACE).as_deref(),
        resolve_below(root, "/proc/1/mounts")
            .and_then(std::fs::File::open)
            .is_ok(),
    )
}

/// The mount table (`mounts`) that describes the host root.
fn mount_table(root: &Path) -> Option<String> {
    let guest = format!("{}/mounts", table_dir(root));
    match read_below(root, &guest) {
        Ok(table) => Some(table),
        Err(e) => {
            tracing::warn!(
                "host-info: no mount table at {guest} below {}: {e}",
                root.display()
            );
            None
        }
    }
}

/// The mount points of the host root's mount table, as `mounts` or `mountinfo` (which plugins
/// read) names them, normalised.
pub(super) fn mount_points(root: &Path) -> Vec<String> {
    use factbuoy_linux::mounts::{parse_mountinfo, parse_mounts};
    let dir = table_dir(root);
    let read = |name: &str| read_below(root, &format!("{dir}/{name}")).unwrap_or_default();
    let mut points: Vec<String> = parse_mounts(&read("mounts"))
        .into_iter()
        .map(|entry| entry.mount_point)
        .chain(
            parse_mountinfo(&read("mountinfo"))
                .into_iter()
                .map(|entry| entry.mount_point),
        )
        .filter_map(|point| normalized(&point))
        .collect();
    points.sort();
    points.dedup();
    points
}

/// Mounted file systems below the host root, as sysinfo lists them (the same file systems
/// left out), with statvfs below the root.
pub(super) fn disks(root: &Path, timeout: Duration) -> Vec<Disk> {
    let Some(table) = mount_table(root) else {
        return Vec::new();
    };
    let entries: Vec<(String, String, String)> = factbuoy_linux::mounts::parse_mounts(&table)
        .into_iter()
        .map(|entry| (entry.device, entry.mount_point, entry.fs_type))
        .filter(|(device, mount_point, file_system)| keeps_disk(device, mount_point, file_system))
        .collect();
    let stats = statvfs_all(
        root,
        entries.iter().map(|(_, point, _)| point.clone()).collect(),
        timeout,
    );
    let removable = removable_devices(root);
    entries
        .into_iter()
        .zip(stats)
        .filter_map(|((name, mount_point, file_system), stat)| {
            let stat = stat?;
            let unit = stat.fragment_size();
            let total_bytes = unit * stat.blocks();
            // What sysinfo also leaves out: nothing there (pseudo file systems).
            (total_bytes > 0).then(|| Disk {
                removable: removable.contains(&name),
                read_only: stat.flags().contains(FsFlags::ST_RDONLY),
                available_bytes: unit * stat.blocks_available(),
                total_bytes,
                name,
                mount_point,
                file_system,
            })
        })
        .collect()
}

/// `path` with `.` and `..` applied, or `None` when it is not absolute.
pub(super) fn normalized(path: &str) -> Option<String> {
    factbuoy_linux::paths::normalize(path).map(|parts| format!("/{}", parts.join("/")))
}

/// sysinfo's choice of what is a disk: no pseudo file systems, nothing below `/sys`, `/proc`
/// or `/run` (but `/run/media`), and no network file systems, whose statvfs can hang.
fn keeps_disk(device: &str, mount_point: &str, file_system: &str) -> bool {
    const LEFT_OUT: &[&str] = &[
        "rootfs",
        "sysfs",
        "proc",
        "devtmpfs",
        "cgroup",
        "cgroup2",
        "pstore",
        "squashfs",
        "rpc_pipefs",
        "iso9660",
        "devpts",
        "hugetlbfs",
        "mqueue",
        "tmpfs",
        "cifs",
        "nfs",
        "nfs4",
        "autofs",
    ];
    !(LEFT_OUT.contains(&file_system)
        || mount_point.starts_with("/sys")
        || mount_point.starts_with("/proc")
        || (mount_point.starts_with("/run") && !mount_point.starts_with("/run/media"))
        || device.starts_with("sunrpc"))
}

/// Devices below the root that udev names as USB (`/dev/disk/by-id/usb-*`), as guest paths.
fn removable_devices(root: &Path) -> Vec<String> {
    let Ok(by_id) = resolve_below(root, "/dev/disk/by-id").and_then(std::fs::read_dir) else {
        return Vec::new();
    };
    by_id
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("usb-"))
        .filter_map(|name| {
            let device = resolve_below(root, &format!("/dev/disk/by-id/{name}")).ok()?;
            let guest = device.strip_prefix(root).ok()?;
            Some(format!("/{}", guest.to_string_lossy()))
        })
        .collect()
}

/// How long `filesystem-usage` and `disks` wait for all answers at most: statvfs on a hung
/// network mount never returns, and a host call cannot be interrupted by the run's deadline
/// (which also bounds the wait).
pub(super) const STATVFS_TIMEOUT: Duration = Duration::from_secs(5);
/// Threads one call asks statvfs with; each takes the next path when done, so a hung mount
/// costs one thread, not the others' answers.
const STATVFS_THREADS: usize = 4;
/// Threads of all runs together that may be blocked in statvfs (left behind by a call that
/// timed out) before calls stop starting new ones and answer `none` at once.
const MAX_LIVE_STATVFS_THREADS: usize = 32;
static LIVE_STATVFS_THREADS: AtomicUsize = AtomicUsize::new(0);

/// statvfs of every guest path below `root`, in order, by a few threads taking paths in turn;
/// `None` for a path that failed or was not answered within `timeout`. Threads still blocked
/// then are left behind (they end when the kernel gives up) and counted against
/// [`MAX_LIVE_STATVFS_THREADS`].
pub(super) fn statvfs_all(
    root: &Path,
    paths: Vec<String>,
    timeout: Duration,
) -> Vec<Option<Statvfs>> {
    let count = paths.len();
    let queue = Arc::new(Mutex::new(paths.into_iter().enumerate()));
    let abandoned = Arc::new(AtomicBool::new(false));
    let (sender, receiver) = mpsc::channel();
    for _ in 0..STATVFS_THREADS.min(count) {
        let live = LIVE_STATVFS_THREADS.fetch_add(1, Ordering::SeqCst);
        if live >= MAX_LIVE_STATVFS_THREADS {
            LIVE_STATVFS_THREADS.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(
                "host-info: {live} statvfs threads are still blocked (a hung mount?); \
                 not starting more"
            );
            break;
        }
        let (queue, abandoned, sender, root) = (
            queue.clone(),
            abandoned.clone(),
            sender.clone(),
            root.to_owned(),
        );
        let spawned = std::thread::Builder::new()
            .name("factbuoy-statvfs".into())
            .spawn(move || {
                while !abandoned.load(Ordering::Relaxed) {
                    let Some((index, path)) = queue.lock().ok().and_then(|mut q| q.next()) else {
                        break;
                    };
                    // Resolving walks the path too, which can hang on the same mount.
                    let stat = resolve_below(&root, &path)
                        .ok()
                        .and_then(|host_path| nix::sys::statvfs::statvfs(&host_path).ok());
                    if sender.send((index, stat)).is_err() {
                        break;
                    }
                }
                LIVE_STATVFS_THREADS.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            LIVE_STATVFS_THREADS.fetch_sub(1, Ordering::SeqCst);
        }
    }
    drop(sender);
    let deadline = Instant::now() + timeout;
    let mut answers = vec![None; count];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match receiver.recv_timeout(left) {
            Ok((index, usage)) => answers[index] = usage,
            Err(_) => break, // every thread is done, or the time is up
        }
    }
    abandoned.store(true, Ordering::Relaxed);
    answers
}

pub(super) fn filesystem_stats(stat: &Statvfs) -> FilesystemStats {
    FilesystemStats {
        fragment_size_bytes: stat.fragment_size(),
        block_size_bytes: stat.block_size(),
        blocks_total: stat.blocks(),
        blocks_free: stat.blocks_free(),
        blocks_available: stat.blocks_available(),
        inodes_total: stat.files(),
        inodes_free: stat.files_free(),
        inodes_available: stat.files_available(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statvfs_answers_in_order_and_misses_give_none() {
        let answers = statvfs_all(
            Path::new("/"),
            vec!["/".into(), "/does/not/exist".into(), "/proc".into()],
            Duration::from_secs(5),
        );
        assert_eq!(answers.len(), 3);
        let root = filesystem_stats(answers[0].as_ref().expect("statvfs of /"));
        assert!(root.blocks_total >= root.blocks_free && root.blocks_free >= root.blocks_available);
        assert!(answers[1].is_none());
        assert!(answers[2].is_some());
    }

    #[test]
    fn disks_leave_out_what_sysinfo_leaves_out() {
        assert!(keeps_disk("/dev/sda1", "/", "ext4"));
        assert!(keeps_disk("/dev/sdb1", "/run/media/usb", "vfat"));
        assert!(!keeps_disk("proc", "/proc", "proc"));
        assert!(!keeps_disk("tmpfs", "/run", "tmpfs"));
        assert!(!keeps_disk("/dev/sda2", "/run/x", "ext4"));
        assert!(!keeps_disk("server:/x", "/mnt", "nfs4"));
    }
}
