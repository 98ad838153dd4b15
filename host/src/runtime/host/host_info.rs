//! `host-info`: facts the host reads about itself with sysinfo, for plugins granted the
//! `host-info` capability. Each call refreshes only what it returns. What neither sysinfo nor
//! read-only files show (statvfs, IPv4 labels and broadcast addresses, root markers) comes from
//! the C library through nix.
//!
//! What lives in the file system is answered below the run's host root (`--root`, `/host` in a
//! DaemonSet pod), like the plugin's preopens: os-release, the mount table and statvfs of the
//! mounts, root markers, the chroot test. What a root cannot select (the kernel, CPUs, memory,
//! network interfaces and addresses, the host name) is the kernel's answer to the factbuoy
//! process: the host's in a pod with `hostNetwork`.

use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::statvfs::{FsFlags, Statvfs};
use sysinfo::{CpuRefreshKind, MemoryRefreshKind, Networks, RefreshKind, System};

use crate::runtime::bindings::factbuoy::plugin::host_info::{
    self, Cpu, Disk, FilesystemStats, IpNetwork, Ipv4Address, LoadAverages, MemoryInfo,
    NetworkInterface, OsInfo,
};
use crate::runtime::state::RunState;
use crate::runtime::violation::Violation;

impl RunState {
    fn require_host_info(&mut self) -> wasmtime::Result<()> {
        if self.host_info_granted {
            return Ok(());
        }
        Err(self.violate(Violation::CapabilityDenied {
            interface: "host-info",
            capability: "host-info",
        }))
    }
}

impl host_info::Host for RunState {
    fn os(&mut self) -> wasmtime::Result<OsInfo> {
        self.require_host_info()?;
        let release = OsRelease::read(&self.host_root);
        Ok(OsInfo {
            family: std::env::consts::OS.to_owned(),
            name: release.name,
            version: release.version,
            distribution_id: release.id,
            kernel_version: System::kernel_version(),
            kernel_long_version: System::kernel_long_version(),
            hostname: System::host_name(),
            architecture: System::cpu_arch(),
        })
    }

    fn cpus(&mut self) -> wasmtime::Result<Vec<Cpu>> {
        self.require_host_info()?;
        let system = System::new_with_specifics(
            RefreshKind::nothing().with_cpu(CpuRefreshKind::nothing().with_frequency()),
        );
        Ok(system
            .cpus()
            .iter()
            .map(|cpu| Cpu {
                name: cpu.name().to_owned(),
                vendor_id: cpu.vendor_id().to_owned(),
                brand: cpu.brand().to_owned(),
                frequency_mhz: cpu.frequency(),
            })
            .collect())
    }

    fn physical_core_count(&mut self) -> wasmtime::Result<Option<u32>> {
        self.require_host_info()?;
        Ok(System::physical_core_count().map(|n| n as u32))
    }

    fn memory(&mut self) -> wasmtime::Result<MemoryInfo> {
        self.require_host_info()?;
        let system = System::new_with_specifics(
            RefreshKind::nothing().with_memory(MemoryRefreshKind::everything()),
        );
        Ok(MemoryInfo {
            total_bytes: system.total_memory(),
            available_bytes: system.available_memory(),
            used_bytes: system.used_memory(),
            free_bytes: system.free_memory(),
            swap_total_bytes: system.total_swap(),
            swap_free_bytes: system.free_swap(),
            swap_used_bytes: system.used_swap(),
        })
    }

    fn disks(&mut self) -> wasmtime::Result<Vec<Disk>> {
        self.require_host_info()?;
        Ok(disks(&self.host_root))
    }

    fn network_interfaces(&mut self) -> wasmtime::Result<Vec<NetworkInterface>> {
        self.require_host_info()?;
        let networks = Networks::new_with_refreshed_list();
        let mut interfaces: Vec<NetworkInterface> = networks
            .iter()
            .map(|(name, data)| NetworkInterface {
                name: name.clone(),
                mac_address: data.mac_address().to_string(),
                addresses: data
                    .ip_networks()
                    .iter()
                    .map(|net| IpNetwork {
                        address: net.addr.to_string(),
                        prefix_length: net.prefix,
                    })
                    .collect(),
                mtu: data.mtu(),
                received_bytes: data.total_received(),
                transmitted_bytes: data.total_transmitted(),
            })
            .collect();
        interfaces.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(interfaces)
    }

    fn load_average(&mut self) -> wasmtime::Result<LoadAverages> {
        self.require_host_info()?;
        let load = System::load_average();
        Ok(LoadAverages {
            one: load.one,
            five: load.five,
            fifteen: load.fifteen,
        })
    }

    fn uptime_seconds(&mut self) -> wasmtime::Result<u64> {
        self.require_host_info()?;
        Ok(System::uptime())
    }

    fn boot_time_seconds(&mut self) -> wasmtime::Result<u64> {
        self.require_host_info()?;
        Ok(System::boot_time())
    }

    fn filesystem_usage(
        &mut self,
        mount_points: Vec<String>,
    ) -> wasmtime::Result<Vec<Option<FilesystemStats>>> {
        self.require_host_info()?;
        Ok(statvfs_all(&self.host_root, mount_points, STATVFS_TIMEOUT)
            .into_iter()
            .map(|stat| stat.map(|stat| filesystem_stats(&stat)))
            .collect())
    }

    fn ipv4_addresses(&mut self) -> wasmtime::Result<Vec<Ipv4Address>> {
        self.require_host_info()?;
        Ok(ipv4_addresses())
    }

    fn existing_markers(&mut self) -> wasmtime::Result<Vec<String>> {
        self.require_host_info()?;
        Ok(MARKER_PATHS
            .iter()
            .filter(|path| exists_below(&self.host_root, path))
            .map(|path| path.to_string())
            .collect())
    }

    fn is_chroot(&mut self) -> wasmtime::Result<Option<bool>> {
        self.require_host_info()?;
        Ok(is_chroot(&self.host_root))
    }

    fn tz_variable(&mut self) -> wasmtime::Result<Option<String>> {
        self.require_host_info()?;
        Ok(std::env::var_os("TZ").map(|tz| tz.to_string_lossy().into_owned()))
    }

    fn ethtool(&mut self, name: String) -> wasmtime::Result<host_info::EthtoolInfo> {
        self.require_host_info()?;
        Ok(super::ethtool::ethtool_info(&name))
    }
}

/// Symlinks followed while resolving one path, as Linux's `MAXSYMLINKS`.
const MAX_SYMLINKS: usize = 40;

/// Where guest path `guest` lives on the host, with every symlink resolved as if `root` were
/// `/` (a chroot): an absolute target starts again at `root`, and `..` never climbs above it.
/// A plain `root.join(guest)` would let an absolute link below the root (`/host/etc/os-release
/// -> /usr/lib/os-release`) name a file of the factbuoy container instead of the host.
fn resolve_below(root: &Path, guest: &str) -> io::Result<PathBuf> {
    let mut pending: Vec<String> = components(guest).rev().collect();
    let mut resolved: Vec<String> = Vec::new();
    let mut links = 0;
    while let Some(part) = pending.pop() {
        if part == ".." {
            resolved.pop();
            continue;
        }
        resolved.push(part);
        let current = root.join(resolved.join("/"));
        if !std::fs::symlink_metadata(&current)?
            .file_type()
            .is_symlink()
        {
            continue;
        }
        links += 1;
        if links > MAX_SYMLINKS {
            return Err(io::Error::other(format!("{guest}: too many symlinks")));
        }
        let target = std::fs::read_link(&current)?;
        resolved.pop();
        if target.is_absolute() {
            resolved.clear();
        }
        pending.extend(components(&target.to_string_lossy()).rev());
    }
    Ok(root.join(resolved.join("/")))
}

/// The normal components of a path, `..` kept, `.` and empty ones dropped.
fn components(path: &str) -> impl DoubleEndedIterator<Item = String> + '_ {
    Path::new(path).components().filter_map(|c| match c {
        Component::Normal(part) => Some(part.to_string_lossy().into_owned()),
        Component::ParentDir => Some("..".to_owned()),
        _ => None,
    })
}

/// Whether `guest` itself exists below `root` (a final symlink is not followed).
fn exists_below(root: &Path, guest: &str) -> bool {
    let path = Path::new(guest);
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return false;
    };
    resolve_below(root, &parent.to_string_lossy())
        .is_ok_and(|dir| std::fs::symlink_metadata(dir.join(name)).is_ok())
}

/// The distribution as os-release(5) names it below the host root, read the way sysinfo
/// reads it (`NAME`, `VERSION_ID`, `ID`; `/etc/lsb-release` for a missing name or version).
struct OsRelease {
    name: Option<String>,
    version: Option<String>,
    id: String,
}

impl OsRelease {
    fn read(root: &Path) -> Self {
        let read = |guest: &str| {
            resolve_below(root, guest)
                .and_then(std::fs::read_to_string)
                .ok()
        };
        let os_release = read("/etc/os-release")
            .or_else(|| read("/usr/lib/os-release"))
            .unwrap_or_default();
        let lsb_release = read("/etc/lsb-release").unwrap_or_default();
        let field = |text: &str, key: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
                .map(|value| value.replace('"', ""))
        };
        OsRelease {
            name: field(&os_release, "NAME").or_else(|| field(&lsb_release, "DISTRIB_ID")),
            version: field(&os_release, "VERSION_ID")
                .or_else(|| field(&lsb_release, "DISTRIB_RELEASE")),
            id: field(&os_release, "ID").unwrap_or_else(|| std::env::consts::OS.to_owned()),
        }
    }
}

/// The mount table that describes the host root: the factbuoy process's own below `/`, else
/// that of the root's process 1 (a pod's `/host/proc/self` is still the agent, in the pod's
/// mount namespace).
fn mount_table(root: &Path) -> Option<String> {
    let guest = if root == Path::new("/") {
        "/proc/self/mounts"
    } else {
        "/proc/1/mounts"
    };
    match resolve_below(root, guest).and_then(std::fs::read_to_string) {
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

/// Mounted file systems below the host root, as sysinfo lists them (the same file systems
/// left out), with statvfs below the root.
fn disks(root: &Path) -> Vec<Disk> {
    let Some(table) = mount_table(root) else {
        return Vec::new();
    };
    let entries: Vec<(String, String, String)> = table
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (device, mount_point, file_system) =
                (fields.next()?, fields.next()?, fields.next()?);
            Some((
                device.to_owned(),
                unescape_mount_field(mount_point),
                file_system.to_owned(),
            ))
        })
        .filter(|(device, mount_point, file_system)| keeps_disk(device, mount_point, file_system))
        .collect();
    let stats = statvfs_all(
        root,
        entries.iter().map(|(_, point, _)| point.clone()).collect(),
        STATVFS_TIMEOUT,
    );
    let removable = removable_devices(root);
    entries
        .into_iter()
        .zip(stats)
        .filter_map(|((name, mount_point, file_system), stat)| {
            let stat = stat?;
            let unit = stat.fragment_size() as u64;
            let total_bytes = unit * stat.blocks() as u64;
            // What sysinfo also leaves out: nothing there (pseudo file systems).
            (total_bytes > 0).then(|| Disk {
                removable: removable.contains(&name),
                read_only: stat.flags().contains(FsFlags::ST_RDONLY),
                available_bytes: unit * stat.blocks_available() as u64,
                total_bytes,
                name,
                mount_point,
                file_system,
            })
        })
        .collect()
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

/// A mount table field with its octal escapes (`\040` for a space) decoded.
fn unescape_mount_field(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
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

/// The paths `existing-markers` looks for, as documented in the WIT.
const MARKER_PATHS: &[&str] = &["/.dockerenv", "/.dockerinit", "/.containerenv", "/dev/kvm"];

/// How long `filesystem-usage` waits for all answers: statvfs on a hung network mount never
/// returns, and a host call cannot be interrupted by the run's deadline.
const STATVFS_TIMEOUT: Duration = Duration::from_secs(5);

/// statvfs of every guest path below `root`, each in its own thread so one hung mount costs
/// only its own answer. A thread still blocked at the deadline is left behind; it ends when the
/// kernel gives up.
fn statvfs_all(root: &Path, paths: Vec<String>, timeout: Duration) -> Vec<Option<Statvfs>> {
    let (sender, receiver) = mpsc::channel();
    let count = paths.len();
    for (index, path) in paths.into_iter().enumerate() {
        let sender = sender.clone();
        let root = root.to_owned();
        let spawned = std::thread::Builder::new()
            .name("factbuoy-statvfs".into())
            .spawn(move || {
                // Resolving walks the path too, which can hang on the same mount.
                let stat = resolve_below(&root, &path)
                    .ok()
                    .and_then(|host_path| nix::sys::statvfs::statvfs(&host_path).ok());
                let _ = sender.send((index, stat));
            });
        if spawned.is_err() {
            // Out of threads: that path goes unanswered, like a hung one.
            continue;
        }
    }
    drop(sender);
    let deadline = Instant::now() + timeout;
    let mut answers = vec![None; count];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match receiver.recv_timeout(left) {
            Ok((index, usage)) => answers[index] = usage,
            Err(_) => break, // every sender is done, or the time is up
        }
    }
    answers
}

fn filesystem_stats(stat: &Statvfs) -> FilesystemStats {
    FilesystemStats {
        fragment_size_bytes: stat.fragment_size() as u64,
        block_size_bytes: stat.block_size() as u64,
        blocks_total: stat.blocks() as u64,
        blocks_free: stat.blocks_free() as u64,
        blocks_available: stat.blocks_available() as u64,
        inodes_total: stat.files() as u64,
        inodes_free: stat.files_free() as u64,
        inodes_available: stat.files_available() as u64,
    }
}

/// IPv4 addresses from getifaddrs(3), which keeps the kernel's order and the address labels.
fn ipv4_addresses() -> Vec<Ipv4Address> {
    let Ok(addresses) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    let ipv4 = |storage: Option<nix::sys::socket::SockaddrStorage>| {
        storage.and_then(|s| s.as_sockaddr_in().map(|sin| sin.ip()))
    };
    addresses
        .filter_map(|entry| {
            let address = ipv4(entry.address)?;
            let prefix_length = ipv4(entry.netmask)
                .map(|mask| u32::from(mask).count_ones() as u8)
                .unwrap_or(32);
            // A label is the device name, or the device name, a colon and an alias.
            let device = entry
                .interface_name
                .split(':')
                .next()
                .unwrap_or_default()
                .to_owned();
            Some(Ipv4Address {
                device,
                label: entry.interface_name,
                address: address.to_string(),
                prefix_length,
                broadcast: ipv4(entry.broadcast).map(|b| b.to_string()),
                peer: ipv4(entry.destination).map(|d| d.to_string()),
            })
        })
        .collect()
}

/// Ansible's test, on the host root: it differs from the root of its process 1; where that
/// cannot be read (not root), it is not the file system's root inode. The `debian_chroot`
/// variable describes the factbuoy process, so it counts only when the host root is `/`.
fn is_chroot(root: &Path) -> Option<bool> {
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
    fn disks_leave_out_what_sysinfo_leaves_out() {
        assert!(keeps_disk("/dev/sda1", "/", "ext4"));
        assert!(keeps_disk("/dev/sdb1", "/run/media/usb", "vfat"));
        assert!(!keeps_disk("proc", "/proc", "proc"));
        assert!(!keeps_disk("tmpfs", "/run", "tmpfs"));
        assert!(!keeps_disk("/dev/sda2", "/run/x", "ext4"));
        assert!(!keeps_disk("server:/x", "/mnt", "nfs4"));
        assert_eq!(unescape_mount_field("/mnt/a\\040b"), "/mnt/a b");
    }

    #[test]
    fn loopback_address_is_listed_with_its_prefix() {
        let addresses = ipv4_addresses();
        let lo = addresses
            .iter()
            .find(|a| a.address == "127.0.0.1")
            .expect("127.0.0.1 on this host");
        assert_eq!(lo.device, "lo");
        assert_eq!(lo.prefix_length, 8);
    }
}
