//! `host-info`: facts the host reads about itself with sysinfo, for plugins granted the
//! `host-info` capability. Each call refreshes only what it returns.

use sysinfo::{CpuRefreshKind, Disks, MemoryRefreshKind, Networks, RefreshKind, System};

use crate::runtime::bindings::factbuoy::plugin::host_info::{
    self, Cpu, Disk, IpNetwork, LoadAverages, MemoryInfo, NetworkInterface, OsInfo,
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
}
