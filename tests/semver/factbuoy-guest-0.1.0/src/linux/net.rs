//! Network state from `/proc/net` and `/sys/class/net`: IPv6 addresses, routes, local
//! addresses, interface attributes, and the kernel's choice of route and source address.
//!
//! IPv4 addresses with their labels and broadcast addresses are not in any file; they come from
//! `host_info::ipv4_addresses`.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::hostfs::{self, HostFs};

/// `RTF_UP`: the route is usable.
pub const RTF_UP: u32 = 0x0001;
/// `RTF_GATEWAY`: the destination is reached through a gateway.
pub const RTF_GATEWAY: u32 = 0x0002;
/// `RTF_REJECT`: an unreachable or prohibit route.
pub const RTF_REJECT: u32 = 0x0200;
/// `RTF_LOCAL` (IPv6): a route to an address of this host.
pub const RTF_LOCAL: u32 = 0x8000_0000;

/// A route of `/proc/net/route` (the IPv4 main table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteV4 {
    pub interface: String,
    pub destination: Ipv4Addr,
    pub gateway: Ipv4Addr,
    pub flags: u32,
    pub metric: u32,
    pub prefix_length: u8,
    pub mtu: u32,
}

impl RouteV4 {
    pub fn has_gateway(&self) -> bool {
        self.flags & RTF_GATEWAY != 0
    }
}

/// Parses `/proc/net/route`: addresses are little-endian hex, the first line is a header.
pub fn parse_route_v4(text: &str) -> Vec<RouteV4> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 11 {
                return None;
            }
            let hex = |s: &str| u32::from_str_radix(s, 16).ok();
            let address = |s: &str| hex(s).map(|v| Ipv4Addr::from(u32::from_be(v)));
            let mask = address(f[7])?;
            Some(RouteV4 {
                interface: f[0].to_owned(),
                destination: address(f[1])?,
                gateway: address(f[2])?,
                flags: hex(f[3])?,
                metric: f[6].parse().ok()?,
                prefix_length: u32::from(mask).count_ones() as u8,
                mtu: f[8].parse().ok()?,
            })
        })
        .collect()
}

/// A route of `/proc/net/ipv6_route` (every table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteV6 {
    pub destination: Ipv6Addr,
    pub prefix_length: u8,
    pub next_hop: Ipv6Addr,
    pub metric: u32,
    pub flags: u32,
    pub interface: String,
}

/// Parses `/proc/net/ipv6_route`: 32-digit hex addresses, hex numbers, no header.
pub fn parse_route_v6(text: &str) -> Vec<RouteV6> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 {
                return None;
            }
            let hex = |s: &str| u32::from_str_radix(s, 16).ok();
            Some(RouteV6 {
                destination: hex_ipv6(f[0])?,
                prefix_length: u8::from_str_radix(f[1], 16).ok()?,
                next_hop: hex_ipv6(f[4])?,
                metric: hex(f[5])?,
                flags: hex(f[8])?,
                interface: f[9].to_owned(),
            })
        })
        .collect()
}

/// An IPv6 address of `/proc/net/if_inet6`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inet6Address {
    pub address: Ipv6Addr,
    pub interface_index: u32,
    pub prefix_length: u8,
    /// Raw scope: 0x00 global, 0x10 host, 0x20 link, 0x40 site.
    pub scope: u32,
    /// `IFA_F_*` flags, for example 0x20 deprecated, 0x01 temporary.
    pub flags: u32,
    pub interface: String,
}

impl Inet6Address {
    /// The scope as `ip` prints it: `global`, `host`, `link`, `site`.
    pub fn scope_name(&self) -> String {
        match self.scope {
            0x00 => "global".into(),
            0x10 => "host".into(),
            0x20 => "link".into(),
            0x40 => "site".into(),
            other => other.to_string(),
        }
    }

    pub fn is_deprecated(&self) -> bool {
        self.flags & 0x20 != 0
    }
}

/// Parses `/proc/net/if_inet6`.
pub fn parse_if_inet6(text: &str) -> Vec<Inet6Address> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 6 {
                return None;
            }
            let hex = |s: &str| u32::from_str_radix(s, 16).ok();
            Some(Inet6Address {
                address: hex_ipv6(f[0])?,
                interface_index: hex(f[1])?,
                prefix_length: u8::from_str_radix(f[2], 16).ok()?,
                scope: hex(f[3])?,
                flags: hex(f[4])?,
                interface: f[5].to_owned(),
            })
        })
        .collect()
}

/// The `local` routes of the IPv4 local table in `/proc/net/fib_trie`, in trie order, as
/// `ip -4 route show table local` lists them: each address with its prefix length.
pub fn fib_trie_local_routes(text: &str) -> Vec<(Ipv4Addr, u8)> {
    let mut routes = Vec::new();
    let mut in_local = false;
    let mut leaf: Option<Ipv4Addr> = None;
    for line in text.lines() {
        if !line.starts_with(' ') {
            in_local = line.trim_end() == "Local:";
            continue;
        }
        if !in_local {
            continue;
        }
        let trimmed = line.trim();
        if let Some(address) = trimmed.strip_prefix("|-- ") {
            leaf = address.parse().ok();
        } else if let Some(rest) = trimmed.strip_prefix('/') {
            let words: Vec<&str> = rest.split_whitespace().collect();
            if let (Some(address), [prefix, _scope, "LOCAL"]) = (leaf, words.as_slice())
                && let Ok(prefix) = prefix.parse()
            {
                routes.push((address, prefix));
            }
        } else if trimmed.starts_with("+--") {
            leaf = None;
        }
    }
    routes
}

fn hex_ipv6(hex: &str) -> Option<Ipv6Addr> {
    if hex.len() != 32 {
        return None;
    }
    u128::from_str_radix(hex, 16).ok().map(Ipv6Addr::from)
}

/// The route the kernel's main table gives for `destination`, as `ip -4 route get` finds it
/// when no policy rules are set: the longest matching prefix, then the lowest metric.
pub fn route_v4_for(routes: &[RouteV4], destination: Ipv4Addr) -> Option<&RouteV4> {
    routes
        .iter()
        .filter(|r| r.flags & RTF_UP != 0 && r.flags & RTF_REJECT == 0)
        .filter(|r| in_prefix_v4(destination, r.destination, r.prefix_length))
        .min_by_key(|r| (std::cmp::Reverse(r.prefix_length), r.metric))
}

/// The IPv6 route for `destination` among the routes that are not local or reject routes.
pub fn route_v6_for(routes: &[RouteV6], destination: Ipv6Addr) -> Option<&RouteV6> {
    routes
        .iter()
        .filter(|r| r.flags & RTF_UP != 0 && r.flags & (RTF_REJECT | RTF_LOCAL) == 0)
        .filter(|r| in_prefix_v6(destination, r.destination, r.prefix_length))
        .min_by_key(|r| (std::cmp::Reverse(r.prefix_length), r.metric))
}

/// Whether `address` lies in `network/prefix_length`.
pub fn in_prefix_v4(address: Ipv4Addr, network: Ipv4Addr, prefix_length: u8) -> bool {
    let mask = netmask_v4(prefix_length);
    u32::from(address) & mask == u32::from(network) & mask
}

/// Whether `address` lies in `network/prefix_length`.
pub fn in_prefix_v6(address: Ipv6Addr, network: Ipv6Addr, prefix_length: u8) -> bool {
    let mask = if prefix_length == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(prefix_length.min(128)))
    };
    u128::from(address) & mask == u128::from(network) & mask
}

/// The netmask of a prefix length, as a number.
pub fn netmask_v4(prefix_length: u8) -> u32 {
    if prefix_length == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix_length.min(32)))
    }
}

/// The source address the kernel picks for a route through `device` towards `toward` (its
/// gateway, or the destination): the device's first primary address in the same subnet, else
/// its first primary address (inet_select_addr). `addresses` are (device, address,
/// prefix length) in kernel order.
pub fn source_v4_for<'a>(
    addresses: impl IntoIterator<Item = (&'a str, Ipv4Addr, u8)>,
    device: &str,
    toward: Ipv4Addr,
) -> Option<Ipv4Addr> {
    let on_device: Vec<(Ipv4Addr, u8)> = addresses
        .into_iter()
        .filter(|(d, _, _)| *d == device)
        .map(|(_, a, p)| (a, p))
        .collect();
    let primaries: Vec<(Ipv4Addr, u8)> = on_device
        .iter()
        .enumerate()
        .filter(|(i, candidate)| !is_secondary_v4(&on_device[..*i], **candidate))
        .map(|(_, c)| *c)
        .collect();
    primaries
        .iter()
        .find(|(a, p)| in_prefix_v4(toward, *a, *p))
        .or(primaries.first())
        .map(|(a, _)| *a)
}

/// The kernel makes an address secondary when an earlier address on the same device has the
/// same prefix length and subnet.
pub fn is_secondary_v4(earlier: &[(Ipv4Addr, u8)], (address, prefix): (Ipv4Addr, u8)) -> bool {
    earlier
        .iter()
        .any(|(a, p)| *p == prefix && in_prefix_v4(address, *a, prefix))
}

/// The source address for an IPv6 destination among the addresses of one device, after
/// RFC 6724: a scope at least the destination's (smallest such first), not deprecated, then
/// the longest prefix shared with the destination; kernel order breaks ties.
pub fn source_v6_for<'a>(
    addresses: impl IntoIterator<Item = &'a Inet6Address>,
    device: &str,
    destination: Ipv6Addr,
) -> Option<&'a Inet6Address> {
    let wanted = scope_rank(ipv6_scope(destination));
    addresses
        .into_iter()
        .filter(|a| a.interface == device)
        .filter(|a| scope_rank(a.scope) >= wanted)
        .min_by_key(|a| {
            let common = (u128::from(a.address) ^ u128::from(destination)).leading_zeros();
            (
                scope_rank(a.scope),
                a.is_deprecated(),
                std::cmp::Reverse(common),
            )
        })
}

/// The raw scope (as in if_inet6) of an IPv6 address.
pub fn ipv6_scope(address: Ipv6Addr) -> u32 {
    let segments = address.segments();
    if address.is_loopback() {
        0x10
    } else if segments[0] & 0xffc0 == 0xfe80 {
        0x20
    } else if segments[0] & 0xffc0 == 0xfec0 {
        0x40
    } else {
        0x00
    }
}

/// Orders scopes from the narrowest: host, link, site, global.
fn scope_rank(scope: u32) -> u8 {
    match scope {
        0x10 => 0,
        0x20 => 1,
        0x40 => 2,
        _ => 3,
    }
}

/// What `/sys/class/net/<name>` says about one interface. Attributes that cannot be read are
/// `None` (a down interface refuses `speed`, a virtual one has no `device`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SysInterface {
    pub name: String,
    pub mac_address: Option<String>,
    pub mtu: Option<u64>,
    /// `up`, `down`, `unknown`, ...
    pub operstate: Option<String>,
    /// ARPHRD type number: 1 Ethernet, 772 loopback, ...
    pub type_code: Option<String>,
    /// `IFF_*` flags.
    pub flags: Option<u32>,
    /// Link speed in Mb/s; -1 when the driver does not know.
    pub speed_mbps: Option<i64>,
    /// The name of the device behind it (a PCI address such as `0000:00:03.0`, `virtio2`).
    pub device: Option<String>,
    /// The kernel module of its driver, when the driver is a module.
    pub driver_module: Option<String>,
    /// The driver's name.
    pub driver: Option<String>,
}

/// Interface names in `/sys/class/net`, in the order the kernel lists them.
pub fn interface_names(fs: &HostFs) -> std::io::Result<Vec<String>> {
    fs.read_dir("/sys/class/net")
}

/// Reads one interface's attributes.
pub fn read_interface(fs: &HostFs, name: &str) -> SysInterface {
    let dir = format!("/sys/class/net/{name}");
    let attr = |file: &str| fs.read_optional(&format!("{dir}/{file}"));
    let link_name = |file: &str| {
        let path = format!("{dir}/{file}");
        fs.canonicalize(&path)
            .ok()
            .map(|target| hostfs::basename(&target).to_owned())
    };
    SysInterface {
        name: name.to_owned(),
        mac_address: attr("address"),
        mtu: attr("mtu").and_then(|v| v.parse().ok()),
        operstate: attr("operstate"),
        type_code: attr("type"),
        flags: attr("flags").and_then(|v| u32::from_str_radix(v.trim_start_matches("0x"), 16).ok()),
        speed_mbps: attr("speed").and_then(|v| v.parse().ok()),
        device: fs
            .read_link(&format!("{dir}/device"))
            .ok()
            .map(|target| hostfs::basename(&target).to_owned()),
        driver_module: link_name("device/driver/module"),
        driver: link_name("device/driver"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
        eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
        eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";

    const IPV6_ROUTE: &str = "\
fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0
fd000000000000000000000000000002 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000003 00000000 80200001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
";

    const IF_INET6: &str = "\
00000000000000000000000000000001 01 80 10 80       lo
fd000000000000000000000000000002 02 40 00 80     eth0
fe8000000000000000fc00fffe000001 02 40 20 80     eth0
";

    #[test]
    fn ipv4_routes_and_lookup() {
        let routes = parse_route_v4(ROUTE);
        assert_eq!(routes.len(), 2);
        assert_eq!(routes[0].gateway, Ipv4Addr::new(192, 0, 2, 1));
        assert!(routes[0].has_gateway());
        assert_eq!(routes[1].prefix_length, 24);
        let to_google = route_v4_for(&routes, Ipv4Addr::new(8, 8, 8, 8)).unwrap();
        assert_eq!(to_google.prefix_length, 0);
        let local = route_v4_for(&routes, Ipv4Addr::new(192, 0, 2, 9)).unwrap();
        assert_eq!(local.prefix_length, 24);
    }

    #[test]
    fn ipv6_routes_skip_local_and_reject() {
        let routes = parse_route_v6(IPV6_ROUTE);
        assert_eq!(routes.len(), 4);
        let dst: Ipv6Addr = "2404:6800:400a:800::1012".parse().unwrap();
        let route = route_v6_for(&routes, dst).unwrap();
        assert_eq!(route.next_hop, "fd00::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(route.interface, "eth0");
    }

    #[test]
    fn ipv6_addresses_and_source_selection() {
        let addresses = parse_if_inet6(IF_INET6);
        assert_eq!(addresses.len(), 3);
        assert_eq!(addresses[0].scope_name(), "host");
        assert_eq!(addresses[2].scope_name(), "link");
        let dst: Ipv6Addr = "2404:6800:400a:800::1012".parse().unwrap();
        let source = source_v6_for(&addresses, "eth0", dst).unwrap();
        assert_eq!(source.address, "fd00::2".parse::<Ipv6Addr>().unwrap());
    }

    #[test]
    fn ipv4_source_prefers_the_gateways_subnet_and_skips_secondaries() {
        let a = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        let addresses = [
            ("eth0", a("10.0.0.5"), 24),
            ("eth0", a("10.0.0.6"), 24), // secondary
            ("eth0", a("192.0.2.2"), 24),
            ("lo", a("127.0.0.1"), 8),
        ];
        assert_eq!(
            source_v4_for(addresses, "eth0", a("192.0.2.1")),
            Some(a("192.0.2.2"))
        );
        assert_eq!(
            source_v4_for(addresses, "eth0", a("8.8.8.8")),
            Some(a("10.0.0.5"))
        );
        assert!(is_secondary_v4(&[(a("10.0.0.5"), 24)], (a("10.0.0.6"), 24)));
        assert!(!is_secondary_v4(
            &[(a("10.0.0.5"), 24)],
            (a("10.0.0.6"), 25)
        ));
    }

    #[test]
    fn local_routes_from_fib_trie() {
        let trie = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 10.9.9.9\n        /32 host LOCAL\nLocal:\n  +-- 0.0.0.0/0 3 0 5\n     +-- 127.0.0.0/8 2 0 2\n        +-- 127.0.0.0/31 1 0 0\n           |-- 127.0.0.0\n              /8 host LOCAL\n           |-- 127.0.0.1\n              /32 host LOCAL\n        |-- 127.255.255.255\n           /32 link BROADCAST\n     |-- 192.0.2.2\n        /32 host LOCAL\n";
        let routes = fib_trie_local_routes(trie);
        let a = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        assert_eq!(
            routes,
            [
                (a("127.0.0.0"), 8),
                (a("127.0.0.1"), 32),
                (a("192.0.2.2"), 32)
            ]
        );
    }
}
