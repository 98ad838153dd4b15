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

mod chroot;
mod disks;
mod ethtool;
mod net;
mod root;

use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};

use crate::bindings::factbuoy::plugin::host_info::{
    self, Cpu, Disk, FilesystemStats, Ipv4Address, LoadAverages, MemoryInfo, NetworkInterface,
    OsInfo,
};
use crate::interfaces::InstanceState;
use crate::violation::Violation;

impl InstanceState {
    /// How long a statvfs answer is waited for: a few seconds, never past the run's deadline.
    fn statvfs_timeout(&self) -> std::time::Duration {
        let left = self
            .deadline_at
            .saturating_duration_since(std::time::Instant::now());
        disks::STATVFS_TIMEOUT.min(left)
    }

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

impl host_info::Host for InstanceState {
    fn os(&mut self) -> wasmtime::Result<OsInfo> {
        self.require_host_info()?;
        let release = root::OsRelease::read(&self.host_root);
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
        let timeout = self.statvfs_timeout();
        Ok(disks::disks(&self.host_root, timeout))
    }

    fn network_interfaces(&mut self) -> wasmtime::Result<Vec<NetworkInterface>> {
        self.require_host_info()?;
        Ok(net::interfaces())
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
        // What the list takes in the plugin's memory: each string and its pointer and length.
        let size = mount_points.iter().map(|p| p.len() + 8).sum();
        self.check_call_size("host-info.filesystem-usage", size)?;
        // Only what `disks` already reveals, or what the plugin may read: anything else gets
        // `none`, as a path that does not exist does.
        let known = disks::mount_points(&self.host_root);
        let answerable: Vec<Option<String>> = mount_points
            .into_iter()
            .map(|path| {
                let path = disks::normalized(&path)?;
                let granted = known.binary_search(&path).is_ok()
                    || self
                        .read_paths
                        .iter()
                        .any(|grant| crate::grants::is_within(&path, grant));
                granted.then_some(path)
            })
            .collect();
        let asked: Vec<String> = answerable.iter().flatten().cloned().collect();
        let mut stats =
            disks::statvfs_all(&self.host_root, asked, self.statvfs_timeout()).into_iter();
        Ok(answerable
            .iter()
            .map(|path| {
                path.as_ref()
                    .and_then(|_| stats.next().flatten())
                    .map(|stat| disks::filesystem_stats(&stat))
            })
            .collect())
    }

    fn ipv4_addresses(&mut self) -> wasmtime::Result<Vec<Ipv4Address>> {
        self.require_host_info()?;
        Ok(net::ipv4_addresses())
    }

    fn existing_markers(&mut self) -> wasmtime::Result<Vec<String>> {
        self.require_host_info()?;
        Ok(root::MARKER_PATHS
            .iter()
            .filter(|path| root::exists_below(&self.host_root, path))
            .map(|path| path.to_string())
            .collect())
    }

    fn is_chroot(&mut self) -> wasmtime::Result<Option<bool>> {
        self.require_host_info()?;
        Ok(chroot::is_chroot(&self.host_root))
    }

    fn tz_variable(&mut self) -> wasmtime::Result<Option<String>> {
        self.require_host_info()?;
        Ok(std::env::var_os("TZ").map(|tz| tz.to_string_lossy().into_owned()))
    }

    fn ethtool(&mut self, name: String) -> wasmtime::Result<host_info::EthtoolInfo> {
        self.require_host_info()?;
        self.check_call_size("host-info.ethtool", name.len())?;
        Ok(ethtool::ethtool_info(&name))
    }
}
