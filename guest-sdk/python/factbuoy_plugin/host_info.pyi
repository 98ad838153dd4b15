# Typed declarations of factbuoy_plugin.host_info: componentize-py's bindings of the WIT
# interface `host-info` (wit/gatherer.wit), as stubs. Written by guest-sdk/python/host_info_stub.py;
# do not edit.
"""
Facts about the host, gathered by the host itself. Needs the `host-info` capability: without
it, every call traps with an error that names the missing capability.
"""
from typing import TypeVar, Generic, Union, Optional, Protocol, Tuple, List, Any, Self, Callable
from types import TracebackType
from enum import Flag, Enum, auto
from dataclasses import dataclass
from abc import abstractmethod
import weakref

from componentize_py_types import Result, Ok, Err, Some


@dataclass
class OsInfo:
    """
    The operating system and the machine's identity.
    """
    family: str
    name: Optional[str]
    version: Optional[str]
    distribution_id: str
    kernel_version: Optional[str]
    kernel_long_version: str
    hostname: Optional[str]
    architecture: str

@dataclass
class Cpu:
    """
    One logical CPU.
    """
    name: str
    vendor_id: str
    brand: str
    frequency_mhz: int

@dataclass
class MemoryInfo:
    """
    Memory and swap, in bytes.
    """
    total_bytes: int
    available_bytes: int
    used_bytes: int
    free_bytes: int
    swap_total_bytes: int
    swap_free_bytes: int
    swap_used_bytes: int

@dataclass
class Disk:
    """
    A mounted file system.
    """
    name: str
    mount_point: str
    file_system: str
    total_bytes: int
    available_bytes: int
    removable: bool
    read_only: bool

@dataclass
class IpNetwork:
    """
    An address assigned to an interface.
    """
    address: str
    prefix_length: int

@dataclass
class NetworkInterface:
    """
    A network interface and its counters since boot.
    """
    name: str
    mac_address: str
    addresses: List[IpNetwork]
    mtu: int
    received_bytes: int
    transmitted_bytes: int

@dataclass
class LoadAverages:
    """
    Run-queue load averages.
    """
    one: float
    five: float
    fifteen: float

@dataclass
class FilesystemStats:
    """
    Size and inode counts of the file system holding a path, as statvfs(3) reports them.
    """
    fragment_size_bytes: int
    block_size_bytes: int
    blocks_total: int
    blocks_free: int
    blocks_available: int
    inodes_total: int
    inodes_free: int
    inodes_available: int

@dataclass
class Ipv4Address:
    """
    An IPv4 address as the kernel lists it: per interface, primary addresses first.
    """
    device: str
    label: str
    address: str
    prefix_length: int
    broadcast: Optional[str]
    peer: Optional[str]

@dataclass
class NetFeature:
    """
    Added in 0.1.2. One feature of a network interface, as the kernel's ethtool interface
    reports it (`ETHTOOL_GFEATURES`, named by the `ETH_SS_FEATURES` string set).
    """
    name: str
    available: bool
    requested: bool
    active: bool
    never_changed: bool

@dataclass
class TimestampingInfo:
    """
    Added in 0.1.2. Time stamping capabilities of a network interface
    (`ETHTOOL_GET_TS_INFO`).
    """
    so_timestamping: int
    phc_index: Optional[int]
    tx_types: int
    rx_filters: int


@dataclass
class EthtoolError_NoSuchInterface:
    value: str


@dataclass
class EthtoolError_NotSupported:
    value: str


@dataclass
class EthtoolError_Io:
    value: str


EthtoolError = Union[EthtoolError_NoSuchInterface, EthtoolError_NotSupported, EthtoolError_Io]
"""
Added in 0.1.2. Why the kernel did not tell an interface's features or time stamping.
"""


@dataclass
class EthtoolInfo:
    """
    Added in 0.1.2. What `ethtool -k` and `ethtool -T` show for an interface.
    """
    features: Result[List[NetFeature], EthtoolError]
    timestamping: Result[TimestampingInfo, EthtoolError]


def os() -> OsInfo:
    """
    The operating system and host identity.
    """
    ...
def cpus() -> List[Cpu]:
    """
    Every logical CPU.
    """
    ...
def physical_core_count() -> Optional[int]:
    """
    Physical core count, when the OS tells it.
    """
    ...
def memory() -> MemoryInfo:
    """
    Memory and swap now.
    """
    ...
def disks() -> List[Disk]:
    """
    Mounted file systems with their usage.
    """
    ...
def network_interfaces() -> List[NetworkInterface]:
    """
    Network interfaces, sorted by name.
    """
    ...
def load_average() -> LoadAverages:
    """
    Load averages over 1, 5 and 15 minutes.
    """
    ...
def uptime_seconds() -> int:
    """
    Seconds since boot.
    """
    ...
def boot_time_seconds() -> int:
    """
    Seconds since the Unix epoch.
    """
    ...
def filesystem_usage(mount_points: List[str]) -> List[Optional[FilesystemStats]]:
    """
    Usage of the file systems mounted at `mount-points` (absolute paths below the host root,
    as the host root's mount table names them), one entry per path in the same order; `none`
    where statvfs failed or did not answer within a few seconds (a hung network mount).
    """
    ...
def ipv4_addresses() -> List[Ipv4Address]:
    """
    Every IPv4 address, in the kernel's order (what `ip -4 addr` shows). Read-only files do
    not show IPv4 addresses with their labels and broadcast addresses; IPv6 ones are in
    `/proc/net/if_inet6`.
    """
    ...
def existing_markers() -> List[str]:
    """
    Which of these marker paths exist below the host root, a fixed list that later versions
    may extend: `/.dockerenv`, `/.dockerinit`, `/.containerenv` (container runtimes create
    them) and `/dev/kvm` (the host can run KVM guests).
    """
    ...
def is_chroot() -> Optional[bool]:
    """
    Whether the host root is another root directory than that of its process 1 (a chroot),
    as Ansible's `is_chroot` decides it; `none` when that cannot be told.
    """
    ...
def tz_variable() -> Optional[str]:
    """
    Added in 0.1.1. The `TZ` environment variable of the process running factbuoy, when it
    is set (possibly to the empty string). The C library's local time, and so Ansible's
    `date_time` facts, follow it before `/etc/localtime`.
    """
    ...
def ethtool(name: str) -> EthtoolInfo:
    """
    Added in 0.1.2. Features and time stamping of the network interface `name`, asked of
    the kernel with the ioctls ethtool uses, in the network namespace of the factbuoy
    process (like `network-interfaces`: a directory cannot select a namespace).
    """
    ...
