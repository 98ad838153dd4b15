//! The host-facts document, version 1: the types here are the schema. Units are in the field
//! names (`total_bytes`, `mtu_bytes`, `speed_mbps`); a value the host does not reveal is `null`,
//! never a guess. `schema/host-facts.v1.json` describes the same document for validators and
//! `docs/host-facts.md` for people; a change here is a change there, and a breaking one (a
//! field renamed, retyped or removed) is a new major version.

use serde::Serialize;

/// The version of this document's schema.
pub const SCHEMA_VERSION: &str = "1.0";

#[derive(Debug, Serialize)]
pub struct HostFacts {
    pub schema_version: &'static str,
    /// When the facts were gathered, RFC 3339 in UTC.
    pub collected_at: String,
    pub os: Os,
    pub host: Host,
    pub kernel: Kernel,
    pub cpu: Cpu,
    pub memory: Memory,
    pub block_devices: Vec<BlockDevice>,
    pub mounts: Vec<Mount>,
    pub network: Network,
    pub system: System,
    pub time: Time,
    pub virtualization: Virtualization,
    /// Present when the host root shows a Kubernetes node (a kubelet or its configuration).
    pub kubernetes: Option<Kubernetes>,
}

#[derive(Debug, Default, Serialize)]
pub struct Os {
    /// Always `linux` for now.
    pub family: String,
    /// os-release `NAME`.
    pub name: Option<String>,
    /// os-release `ID`, for example `debian`.
    pub id: Option<String>,
    /// os-release `ID_LIKE`, split.
    pub id_like: Vec<String>,
    pub version: Option<String>,
    pub version_id: Option<String>,
    pub codename: Option<String>,
    pub pretty_name: Option<String>,
    /// The os-release file read.
    pub os_release_path: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct Host {
    pub hostname: Option<String>,
    /// The host name's domain part, when the host name is fully qualified.
    pub domain: Option<String>,
    pub machine_id: Option<String>,
    /// Changes at every boot.
    pub boot_id: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct Kernel {
    /// `Linux`.
    pub name: Option<String>,
    /// `uname -r`.
    pub release: Option<String>,
    /// `uname -v`.
    pub version: Option<String>,
    pub architecture: String,
    pub command_line: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct Cpu {
    pub vendor: Option<String>,
    pub model: Option<String>,
    /// Physical packages.
    pub sockets: Option<u32>,
    /// Physical cores over all sockets.
    pub cores: Option<u32>,
    /// Logical CPUs (hardware threads) online.
    pub threads: u32,
    pub threads_per_core: Option<u32>,
    /// Current frequency of the first CPU.
    pub frequency_mhz: Option<f64>,
    pub flags: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct Memory {
    pub total_bytes: Option<u64>,
    /// What can be given to new work without swapping (`MemAvailable`).
    pub available_bytes: Option<u64>,
    /// Not used for anything, not even caches (`MemFree`).
    pub free_bytes: Option<u64>,
    /// `total_bytes - available_bytes`.
    pub used_bytes: Option<u64>,
    pub buffers_bytes: Option<u64>,
    pub cached_bytes: Option<u64>,
    pub shared_bytes: Option<u64>,
    pub hugepage_size_bytes: Option<u64>,
    pub swap: Swap,
}

#[derive(Debug, Default, Serialize)]
pub struct Swap {
    pub total_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    pub used_bytes: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct BlockDevice {
    /// Kernel name, for example `sda`, `nvme0n1`, `dm-0`.
    pub name: String,
    /// `major:minor`.
    pub device_number: Option<String>,
    pub size_bytes: Option<u64>,
    pub logical_block_size_bytes: Option<u64>,
    pub physical_block_size_bytes: Option<u64>,
    pub rotational: Option<bool>,
    pub removable: Option<bool>,
    pub read_only: Option<bool>,
    pub vendor: Option<String>,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub wwn: Option<String>,
    /// The I/O scheduler in use.
    pub scheduler: Option<String>,
    /// Device-mapper name, for `dm-*` devices.
    pub dm_name: Option<String>,
    /// Devices built on this one (`dm-0` on `sda2`).
    pub holders: Vec<String>,
    pub partitions: Vec<Partition>,
}

#[derive(Debug, Serialize)]
pub struct Partition {
    pub name: String,
    pub device_number: Option<String>,
    pub size_bytes: Option<u64>,
    pub start_sector: Option<u64>,
    pub read_only: Option<bool>,
    pub holders: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct Mount {
    /// The mounted source, for example `/dev/sda1`, `overlay`, `server:/export`.
    pub source: String,
    pub mount_point: String,
    pub filesystem_type: String,
    pub options: Vec<String>,
    pub read_only: bool,
    /// `major:minor` of the file system's device.
    pub device_number: String,
    /// The directory of the file system mounted here (not `/` for bind mounts).
    pub root: String,
    /// File system UUID, when udev or `/dev/disk/by-uuid` knows it.
    pub filesystem_uuid: Option<String>,
    /// Space and inodes; `null` when statvfs failed or did not answer in time.
    pub usage: Option<Usage>,
}

#[derive(Debug, Serialize)]
pub struct Usage {
    pub total_bytes: u64,
    pub free_bytes: u64,
    /// Free space an unprivileged user may use.
    pub available_bytes: u64,
    pub used_bytes: u64,
    pub inodes_total: u64,
    pub inodes_free: u64,
    pub inodes_used: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct Network {
    pub interfaces: Vec<Interface>,
    /// Routes of the main tables, IPv4 and IPv6, without local and multicast routes.
    pub routes: Vec<Route>,
    pub default_ipv4: Option<DefaultRoute>,
    pub default_ipv6: Option<DefaultRoute>,
    pub dns: Dns,
}

#[derive(Debug, Serialize)]
pub struct Interface {
    pub name: String,
    pub mac_address: Option<String>,
    pub mtu_bytes: Option<u64>,
    /// Operational state: `up`, `down`, `unknown`, `dormant`, ...
    pub state: Option<String>,
    /// Administratively up (`IFF_UP`).
    pub up: Option<bool>,
    /// `ether`, `loopback`, `bridge`, `bond`, `infiniband`, `ppp`, `tunnel` or `other`.
    pub kind: String,
    pub speed_mbps: Option<i64>,
    pub driver: Option<String>,
    /// The bus device behind it (PCI address, `virtio2`); `null` for a virtual interface.
    pub bus_device: Option<String>,
    pub addresses: Vec<Address>,
    pub rx_bytes: Option<u64>,
    pub tx_bytes: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct Address {
    /// `ipv4` or `ipv6`.
    pub family: &'static str,
    pub address: String,
    pub prefix_length: u8,
    pub broadcast: Option<String>,
    /// `global`, `link`, `host` or `site`.
    pub scope: String,
    /// The IPv4 label (`eth0:1`) when it differs from the interface name.
    pub label: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Route {
    pub family: &'static str,
    pub destination: String,
    pub prefix_length: u8,
    pub gateway: Option<String>,
    pub interface: String,
    pub metric: u32,
}

#[derive(Debug, Serialize)]
pub struct DefaultRoute {
    pub interface: String,
    pub gateway: Option<String>,
    /// The address the kernel would send from.
    pub source_address: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct Dns {
    pub nameservers: Vec<String>,
    pub search: Vec<String>,
    pub options: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct System {
    pub uptime_seconds: Option<f64>,
    /// RFC 3339, UTC.
    pub boot_time: Option<String>,
    pub load_average: Option<LoadAverage>,
    pub processes: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct LoadAverage {
    pub one_minute: f64,
    pub five_minutes: f64,
    pub fifteen_minutes: f64,
}

#[derive(Debug, Default, Serialize)]
pub struct Time {
    /// IANA name, for example `Europe/Paris`.
    pub timezone: Option<String>,
    pub abbreviation: Option<String>,
    pub utc_offset_seconds: Option<i32>,
    pub daylight_saving: Option<bool>,
}

#[derive(Debug, Default, Serialize)]
pub struct Virtualization {
    /// `kvm`, `VMware`, `docker`, ... or `NA` (none found).
    pub kind: String,
    /// `guest`, `host` or `NA`.
    pub role: String,
    pub guest_technologies: Vec<String>,
    pub host_technologies: Vec<String>,
    /// Whether the host root itself is a container.
    pub container: bool,
}

#[derive(Debug, Default, Serialize)]
pub struct Kubernetes {
    pub kubelet: Kubelet,
    pub container_runtime: Option<ContainerRuntime>,
    /// Static pod manifests (`/etc/kubernetes/manifests`): a control-plane node has some.
    pub static_pod_manifests: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct Kubelet {
    pub running: bool,
    /// `1.30.2`; from the package database, `null` when the kubelet was not installed as a
    /// package.
    pub version: Option<String>,
    /// Where the version came from: `dpkg`.
    pub version_source: Option<String>,
    pub binary_path: Option<String>,
    pub config_path: Option<String>,
    pub kubeconfig_path: Option<String>,
    pub container_runtime_endpoint: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct ContainerRuntime {
    /// `containerd`, `cri-o` or `docker`.
    pub name: String,
    pub version: Option<String>,
    pub version_source: Option<String>,
    pub socket_path: Option<String>,
    pub config_path: Option<String>,
    pub running: bool,
}
