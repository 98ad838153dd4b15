//! `host-info`: facts the host reads about itself with sysinfo, for plugins granted the
//! `host-info` capability. Each call refreshes only what it returns. What neither sysinfo nor
//! read-only files show (statvfs, IPv4 labels and broadcast addresses, root markers) comes from
//! the C library through nix.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use sysinfo::{CpuRefreshKind, Disks, MemoryRefreshKind, Networks, RefreshKind, System};

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
        Ok(OsInfo {
            family: std::env::consts::OS.to_owned(),
            name: System::name(),
            version: System::os_version(),
            distribution_id: System::distribution_id(),
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
        Ok(Disks::new_with_refreshed_list()
            .iter()
            .map(|disk| Disk {
                name: disk.name().to_string_lossy().into_owned(),
                mount_point: disk.mount_point().to_string_lossy().into_owned(),
                file_system: disk.file_system().to_string_lossy().into_owned(),
                total_bytes: disk.total_space(),
                available_bytes: disk.available_space(),
                removable: disk.is_removable(),
                read_only: disk.is_read_only(),
            })
            .collect())
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
        Ok(statvfs_all(mount_points, STATVFS_TIMEOUT))
    }

    fn ipv4_addresses(&mut self) -> wasmtime::Result<Vec<Ipv4Address>> {
        self.require_host_info()?;
        Ok(ipv4_addresses())
    }

    fn existing_markers(&mut self) -> wasmtime::Result<Vec<String>> {
        self.require_host_info()?;
        Ok(MARKER_PATHS
            .iter()
            .filter(|path| std::fs::symlink_metadata(path).is_ok())
            .map(|path| path.to_string())
            .collect())
    }

    fn is_chroot(&mut self) -> wasmtime::Result<Option<bool>> {
        self.require_host_info()?;
        Ok(is_chroot())
    }
}

/// The paths `existing-markers` looks for, as documented in the WIT.
const MARKER_PATHS: &[&str] = &["/.dockerenv", "/.dockerinit", "/.containerenv", "/dev/kvm"];

/// How long `filesystem-usage` waits for all answers: statvfs on a hung network mount never
/// returns, and a host call cannot be interrupted by the run's deadline.
const STATVFS_TIMEOUT: Duration = Duration::from_secs(5);

/// statvfs of every path, each in its own thread so one hung mount costs only its own answer.
/// A thread still blocked at the deadline is left behind; it ends when the kernel gives up.
fn statvfs_all(paths: Vec<String>, timeout: Duration) -> Vec<Option<FilesystemStats>> {
    let (sender, receiver) = mpsc::channel();
    let count = paths.len();
    for (index, path) in paths.into_iter().enumerate() {
        let sender = sender.clone();
        let spawned = std::thread::Builder::new()
            .name("factbuoy-statvfs".into())
            .spawn(move || {
                let _ = sender.send((index, statvfs(&path)));
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

fn statvfs(path: &str) -> Option<FilesystemStats> {
    let stat = nix::sys::statvfs::statvfs(path).ok()?;
    Some(FilesystemStats {
        fragment_size_bytes: stat.fragment_size() as u64,
        block_size_bytes: stat.block_size() as u64,
        blocks_total: stat.blocks() as u64,
        blocks_free: stat.blocks_free() as u64,
        blocks_available: stat.blocks_available() as u64,
        inodes_total: stat.files() as u64,
        inodes_free: stat.files_free() as u64,
        inodes_available: stat.files_available() as u64,
    })
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

/// Ansible's test: `/` differs from process 1's root; where that root cannot be read (not
/// root), `/` is not the file system's root inode.
fn is_chroot() -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    if std::env::var_os("debian_chroot").is_some_and(|v| !v.is_empty()) {
        return Some(true);
    }
    let own_root = std::fs::metadata("/").ok()?;
    if let Ok(init_root) = std::fs::metadata("/proc/1/root/.") {
        return Some(own_root.ino() != init_root.ino() || own_root.dev() != init_root.dev());
    }
    use nix::sys::statfs::{BTRFS_SUPER_MAGIC, XFS_SUPER_MAGIC, statfs};
    let root_inode = match statfs("/").map(|s| s.filesystem_type()) {
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
            vec!["/".into(), "/does/not/exist".into(), "/proc".into()],
            Duration::from_secs(5),
        );
        assert_eq!(answers.len(), 3);
        let root = answers[0].as_ref().expect("statvfs of /");
        assert!(root.blocks_total >= root.blocks_free && root.blocks_free >= root.blocks_available);
        assert!(answers[1].is_none());
        assert!(answers[2].is_some());
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
