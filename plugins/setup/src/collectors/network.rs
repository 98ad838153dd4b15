//! `network`: interfaces with their addresses, default routes and local addresses, as
//! Ansible's LinuxNetwork builds them from `ip` and `/sys/class/net`.
//!
//! `ip` is replaced by what it reads: IPv4 addresses from the host (`host_info`), IPv6
//! addresses and routes from `/proc/net`, and the route `ip route get` would print is found
//! with the kernel's rules (longest prefix, lowest metric, preferred source address).
//! `ethtool -k` and `-T` are replaced by the host's answer to the same ioctls
//! (`host_info::ethtool`), printed as ethtool prints them and parsed as Ansible parses that.

use std::net::{Ipv4Addr, Ipv6Addr};

use factbuoy_guest::host_info::{self, EthtoolError};
use factbuoy_guest::linux::ethtool;
use factbuoy_guest::linux::net::{self, Inet6Address};
use factbuoy_guest::linux::netns::{self, NetworkNamespace};
use serde_json::{Map, Value, json};

use crate::ctx::Ctx;

/// What Ansible asks `ip route get` for, to learn the default routes.
const PROBE_V4: Ipv4Addr = Ipv4Addr::new(8, 8, 8, 8);
const PROBE_V6: &str = "2404:6800:400a:800::1012";

/// `IFA_F_SECONDARY`, which is also `IFA_F_TEMPORARY` for IPv6.
const IFA_F_SECONDARY: u32 = 0x01;

/// One IPv4 address as `ip addr` prints it.
struct Inet {
    label: String,
    address: Ipv4Addr,
    prefix: u8,
    broadcast: String,
}

pub fn collect(ctx: &mut Ctx) {
    // Ansible gathers no network facts at all on a host without `ip`.
    if ctx.find_bin("ip").is_none() {
        ctx.warn("network: the `ip` program is not installed, so Ansible reports no network facts; neither does this");
        return;
    }
    let ipv4 = host_info::ipv4_addresses();
    let ipv6 = net::parse_if_inet6(&ctx.read_raw("/proc/net/if_inet6").unwrap_or_default());
    let mut default_v4 = default_ipv4(ctx, &ipv4);
    let mut default_v6 = default_ipv6(ctx, &ipv6);

    let mut interfaces: Vec<(String, Map<String, Value>)> = Vec::new();
    let mut all_v4: Vec<String> = Vec::new();
    let mut all_v6: Vec<String> = Vec::new();
    let mut macaddress = String::new();
    let ethtool = Ethtool::find(ctx);
    // The host's interfaces factbuoy's namespace lacks; one of the same name there (a pod's
    // eth0) is another interface, whose ethtool answer is not this one's.
    let outside = match ctx.network_namespace() {
        NetworkNamespace::Same => Vec::new(),
        NetworkNamespace::Other { outside } => outside.clone(),
    };
    for device in ctx.list("/sys/class/net").unwrap_or_default() {
        let dir = format!("/sys/class/net/{device}");
        if !ctx.fs.is_dir(&dir) {
            continue;
        }
        let mut info = device_info(ctx, &device, &dir, &mut macaddress);
        if let Some(ethtool) = ethtool.as_ref().filter(|_| !outside.contains(&device)) {
            ethtool.add_data(ctx, &device, &mut info);
        }
        set_interface(&mut interfaces, &device, info);

        // `ip addr show primary dev X`, then `... secondary dev X`.
        let (primaries, secondaries) = split_primary(&ipv4, &device);
        let (v6_primary, v6_secondary): (Vec<&Inet6Address>, Vec<&Inet6Address>) =
            ordered_v6(&ipv6, &device)
                .into_iter()
                .partition(|a| a.flags & IFA_F_SECONDARY == 0);
        for (inets, inet6s, secondary) in [
            (primaries, v6_primary, false),
            (secondaries, v6_secondary, true),
        ] {
            for inet in inets {
                add_inet(
                    &mut interfaces,
                    &device,
                    &inet,
                    secondary,
                    &mut default_v4,
                    &macaddress,
                    &mut all_v4,
                );
            }
            for inet6 in inet6s {
                add_inet6(
                    &mut interfaces,
                    &device,
                    inet6,
                    &mut default_v6,
                    &macaddress,
                    &mut all_v6,
                );
            }
        }
    }

    let names: Vec<String> = interfaces
        .iter()
        .map(|(name, _)| name.replace(':', "_"))
        .collect();
    for (name, info) in interfaces {
        ctx.set(name.replace(':', "_"), info);
    }
    ctx.set("interfaces", names);
    ctx.set("default_ipv4", default_v4);
    ctx.set("default_ipv6", default_v6);
    ctx.set("all_ipv4_addresses", all_v4);
    ctx.set("all_ipv6_addresses", all_v6);
    ctx.set("locally_reachable_ips", locally_reachable(ctx));
    warn_of_other_namespace(ctx, ethtool.is_some());
}

/// Says which facts describe factbuoy's own network namespace, when it is not the host's: the
/// interfaces are the host's (from its `/sys`), their addresses and the routes are not.
fn warn_of_other_namespace(ctx: &Ctx, ethtool: bool) {
    let NetworkNamespace::Other { outside } = ctx.network_namespace() else {
        return;
    };
    ctx.warn(format!(
        "network: {}: ansible_default_ipv4, ansible_default_ipv6, ansible_all_ipv4_addresses, \
         ansible_all_ipv6_addresses, ansible_locally_reachable_ips and each interface's ipv4 \
         and ipv6 are that namespace's, not the host's",
        netns::OTHER_NAMESPACE
    ));
    if ethtool && !outside.is_empty() {
        ctx.warn(format!(
            "network: {} {} not in factbuoy's network namespace, so {} ethtool features and \
             time stamping are missing",
            netns::listed(outside, 8),
            if outside.len() == 1 { "is" } else { "are" },
            if outside.len() == 1 { "its" } else { "their" },
        ));
    }
}

fn set_interface(
    interfaces: &mut Vec<(String, Map<String, Value>)>,
    name: &str,
    info: Map<String, Value>,
) {
    match interfaces.iter_mut().find(|(n, _)| n == name) {
        Some(entry) => entry.1 = info,
        None => interfaces.push((name.to_owned(), info)),
    }
}

fn interface<'a>(
    interfaces: &'a mut Vec<(String, Map<String, Value>)>,
    name: &str,
) -> &'a mut Map<String, Value> {
    if !interfaces.iter().any(|(n, _)| n == name) {
        interfaces.push((name.to_owned(), Map::new()));
    }
    let index = interfaces.iter().position(|(n, _)| n == name).unwrap_or(0);
    &mut interfaces[index].1
}

/// The attributes of `/sys/class/net/<device>` Ansible reports.
fn device_info(ctx: &Ctx, device: &str, dir: &str, macaddress: &mut String) -> Map<String, Value> {
    let attr = |name: &str| ctx.fs.read_optional(&format!("{dir}/{name}"));
    let mut info = Map::new();
    info.insert("device".into(), device.into());
    if let Some(mac) = attr("address") {
        *macaddress = mac.clone();
        if !mac.is_empty() && mac != "00:00:00:00:00:00" {
            info.insert("macaddress".into(), mac.into());
        }
    }
    if let Some(mtu) = attr("mtu").and_then(|m| m.parse::<i64>().ok()) {
        info.insert("mtu".into(), mtu.into());
    }
    if let Some(state) = attr("operstate") {
        info.insert("active".into(), (state != "down").into());
    }
    if let Ok(module) = ctx.fs.canonicalize(&format!("{dir}/device/driver/module")) {
        info.insert(
            "module".into(),
            factbuoy_guest::hostfs::basename(&module).into(),
        );
    }
    if let Some(kind) = attr("type") {
        let name = match kind.as_str() {
            "1" => "ether",
            "32" => "infiniband",
            "512" => "ppp",
            "772" => "loopback",
            "65534" => "tunnel",
            _ => "unknown",
        };
        info.insert("type".into(), name.into());
    }
    if ctx.exists(&format!("{dir}/bridge")) {
        info.insert("type".into(), "bridge".into());
        let ports = ctx.fs.read_dir(&format!("{dir}/brif")).unwrap_or_default();
        info.insert("interfaces".into(), ports.into());
        if let Some(id) = attr("bridge/bridge_id") {
            info.insert("id".into(), id.into());
        }
        if let Some(stp) = attr("bridge/stp_state") {
            info.insert("stp".into(), (stp == "1").into());
        }
    }
    if ctx.exists(&format!("{dir}/bonding")) {
        info.insert("type".into(), "bonding".into());
        let words = |name: &str| attr(name).unwrap_or_default();
        let first = |name: &str| {
            words(name)
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_owned()
        };
        info.insert(
            "slaves".into(),
            words("bonding/slaves")
                .split_whitespace()
                .collect::<Vec<_>>()
                .into(),
        );
        info.insert("mode".into(), first("bonding/mode").into());
        info.insert("miimon".into(), first("bonding/miimon").into());
        info.insert("lacp_rate".into(), first("bonding/lacp_rate").into());
        if let Some(primary) = attr("bonding/primary").filter(|p| !p.is_empty()) {
            info.insert("primary".into(), primary.into());
            if let Some(active) = attr("bonding/all_slaves_active") {
                info.insert("all_slaves_active".into(), (active == "1").into());
            }
        }
    }
    if ctx.exists(&format!("{dir}/bonding_slave")) {
        info.insert(
            "perm_macaddress".into(),
            attr("bonding_slave/perm_hwaddr").unwrap_or_default().into(),
        );
    }
    if let Ok(target) = ctx.fs.read_link(&format!("{dir}/device")) {
        info.insert(
            "pciid".into(),
            factbuoy_guest::hostfs::basename(&target).into(),
        );
    }
    // A down interface refuses to tell its speed (EINVAL); Ansible then leaves it out.
    if let Some(speed) = attr("speed").and_then(|s| s.parse::<i64>().ok()) {
        info.insert("speed".into(), speed.into());
    }
    if let Some(flags) =
        attr("flags").and_then(|f| i64::from_str_radix(f.trim_start_matches("0x"), 16).ok())
    {
        info.insert("promisc".into(), (flags & 0x0100 > 0).into());
    }
    info
}

/// What Ansible's `get_ethtool_data` learns from the `ethtool` program, when there is one.
struct Ethtool {
    /// `ethtool -T` prints only kernel string names (`software-receive`), without the
    /// `SOF_TIMESTAMPING_*` and `HWTSTAMP_FILTER_*` names Ansible looks for.
    names_only: bool,
}

impl Ethtool {
    /// Ansible asks ethtool only when it is installed.
    fn find(ctx: &Ctx) -> Option<Self> {
        let program = ctx.find_bin("ethtool")?;
        // ethtool 5.7 and later ask the kernel's ethtool netlink family for time stamping
        // (kernels since 5.7) and print its string names; before, the ioctl and its labels.
        let version = ctx
            .read_bytes(&program)
            .and_then(|bytes| ethtool::program_version(&bytes));
        let kernel = ctx.fact_str("kernel").and_then(kernel_version);
        let names_only = match (version, kernel) {
            (Some(program), Some(kernel)) => prints_names_only(program, kernel),
            _ => {
                ctx.warn(format!(
                    "network: cannot tell the version of {program} or of the kernel; \
                     assuming ethtool prints time stamping without its flag names"
                ));
                true
            }
        };
        Some(Ethtool { names_only })
    }

    /// Adds `features`, `timestamping`, `hw_timestamp_filters` and `phc_index`.
    fn add_data(&self, ctx: &Ctx, device: &str, info: &mut Map<String, Value>) {
        let answer = host_info::ethtool(device);
        match answer.features {
            Ok(features) => {
                let mut map = Map::new();
                for (name, value) in ethtool::features_listing(&features) {
                    map.insert(name.trim().replace('-', "_"), value.into());
                }
                info.insert("features".into(), map.into());
            }
            Err(e) => ethtool_failed(ctx, &e),
        }
        match answer.timestamping {
            Ok(ts) => {
                let lower = |names: Vec<&str>| -> Vec<String> {
                    names.into_iter().map(str::to_lowercase).collect()
                };
                let (stamping, filters) = if self.names_only {
                    (Vec::new(), Vec::new())
                } else {
                    (
                        lower(ethtool::names_of_bits(
                            ts.so_timestamping,
                            ethtool::SOF_TIMESTAMPING,
                        )),
                        lower(ethtool::names_of_bits(
                            ts.rx_filters,
                            ethtool::HWTSTAMP_FILTERS,
                        )),
                    )
                };
                info.insert("timestamping".into(), stamping.into());
                info.insert("hw_timestamp_filters".into(), filters.into());
                if let Some(index) = ts.phc_index {
                    info.insert("phc_index".into(), index.into());
                }
            }
            Err(e) => ethtool_failed(ctx, &e),
        }
    }
}

/// ethtool would have failed too, and Ansible then leaves the facts out; say why when it is
/// not simply a driver without the request, or an interface factbuoy's network namespace does
/// not have (gone meanwhile, or the host's seen from another namespace, which
/// [`warn_of_other_namespace`] reports once for all).
fn ethtool_failed(ctx: &Ctx, error: &EthtoolError) {
    match error {
        EthtoolError::NotSupported(_) | EthtoolError::NoSuchInterface(_) => {}
        EthtoolError::Io(message) => ctx.warn(format!("network: ethtool data: {message}")),
    }
}

/// Whether ethtool `program` on `kernel` prints time stamping over netlink, without flag names.
fn prints_names_only(program: (u32, u32), kernel: (u32, u32)) -> bool {
    program >= (5, 7) && kernel >= (5, 7)
}

/// `6.1.0-18-amd64` -> (6, 1).
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(['.', '-']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// The device's IPv4 addresses as `ip addr show primary` and `... secondary` list them.
fn split_primary(ipv4: &[host_info::Ipv4Address], device: &str) -> (Vec<Inet>, Vec<Inet>) {
    let mut earlier: Vec<(Ipv4Addr, u8)> = Vec::new();
    let (mut primaries, mut secondaries) = (Vec::new(), Vec::new());
    for a in ipv4.iter().filter(|a| a.device == device) {
        let Ok(address) = a.address.parse::<Ipv4Addr>() else {
            continue;
        };
        let point_to_point = a.peer.as_deref().is_some_and(|peer| peer != a.address);
        let inet = Inet {
            label: a.label.clone(),
            address,
            // `ip` prints a point-to-point address without its prefix; Ansible reads it as /32.
            prefix: if point_to_point { 32 } else { a.prefix_length },
            broadcast: if point_to_point {
                String::new()
            } else {
                a.broadcast.clone().unwrap_or_default()
            },
        };
        if net::is_secondary_v4(&earlier, (address, a.prefix_length)) {
            secondaries.push(inet);
        } else {
            primaries.push(inet);
        }
        earlier.push((address, a.prefix_length));
    }
    (primaries, secondaries)
}

/// The device's IPv6 addresses, widest scope first, as the kernel keeps them.
fn ordered_v6<'a>(ipv6: &'a [Inet6Address], device: &str) -> Vec<&'a Inet6Address> {
    let rank = |scope: u32| match scope {
        0x00 => 0,
        0x40 => 1,
        0x20 => 2,
        _ => 3,
    };
    let mut on_device: Vec<&Inet6Address> = ipv6.iter().filter(|a| a.interface == device).collect();
    on_device.sort_by_key(|a| rank(a.scope));
    on_device
}

fn add_inet(
    interfaces: &mut Vec<(String, Map<String, Value>)>,
    device: &str,
    inet: &Inet,
    secondary: bool,
    default_v4: &mut Map<String, Value>,
    macaddress: &str,
    all_v4: &mut Vec<String>,
) {
    let mask = Ipv4Addr::from(net::netmask_v4(inet.prefix));
    let network = Ipv4Addr::from(u32::from(inet.address) & net::netmask_v4(inet.prefix));
    let entry = json!({
        "address": inet.address.to_string(),
        "broadcast": inet.broadcast,
        "netmask": mask.to_string(),
        "network": network.to_string(),
        "prefix": inet.prefix.to_string(),
    });
    let iface = inet.label.as_str();
    if iface != device {
        // Ansible starts an alias's entry afresh for each of its addresses.
        set_interface(interfaces, iface, Map::new());
    }
    let target = interface(interfaces, iface);
    if !secondary && !target.contains_key("ipv4") {
        target.insert("ipv4".into(), entry.clone());
    } else {
        push(target, "ipv4_secondaries", entry.clone());
    }
    if secondary {
        let dev = interface(interfaces, device);
        dev.entry("ipv4_secondaries")
            .or_insert_with(|| Value::Array(vec![]));
        if device != iface {
            push(dev, "ipv4_secondaries", entry.clone());
        }
    }
    if default_v4.get("address").and_then(Value::as_str) == Some(&inet.address.to_string()) {
        let dev = interface(interfaces, device);
        let mtu = dev.get("mtu").cloned().unwrap_or(Value::Null);
        let kind = dev.get("type").cloned().unwrap_or_else(|| "unknown".into());
        for key in ["broadcast", "netmask", "network", "prefix"] {
            default_v4.insert(key.into(), entry[key].clone());
        }
        default_v4.insert("macaddress".into(), macaddress.into());
        default_v4.insert("mtu".into(), mtu);
        default_v4.insert("type".into(), kind);
        default_v4.insert("alias".into(), iface.into());
    }
    if !inet.address.to_string().starts_with("127.") {
        all_v4.push(inet.address.to_string());
    }
}

fn add_inet6(
    interfaces: &mut Vec<(String, Map<String, Value>)>,
    device: &str,
    inet6: &Inet6Address,
    default_v6: &mut Map<String, Value>,
    macaddress: &str,
    all_v6: &mut Vec<String>,
) {
    let address = inet6.address.to_string();
    let entry = json!({
        "address": address,
        "prefix": inet6.prefix_length.to_string(),
        "scope": inet6.scope_name(),
    });
    let dev = interface(interfaces, device);
    push(dev, "ipv6", entry.clone());
    if default_v6.get("address").and_then(Value::as_str) == Some(address.as_str()) {
        let mtu = dev.get("mtu").cloned().unwrap_or(Value::Null);
        let kind = dev.get("type").cloned().unwrap_or_else(|| "unknown".into());
        default_v6.insert("prefix".into(), entry["prefix"].clone());
        default_v6.insert("scope".into(), entry["scope"].clone());
        default_v6.insert("macaddress".into(), macaddress.into());
        default_v6.insert("mtu".into(), mtu);
        default_v6.insert("type".into(), kind);
    }
    if address != "::1" {
        all_v6.push(address);
    }
}

fn push(map: &mut Map<String, Value>, key: &str, value: Value) {
    if let Value::Array(list) = map.entry(key).or_insert_with(|| Value::Array(vec![])) {
        list.push(value);
    }
}

/// What `ip -4 route get 8.8.8.8` says: interface, source address and gateway.
fn default_ipv4(ctx: &Ctx, ipv4: &[host_info::Ipv4Address]) -> Map<String, Value> {
    let routes = net::parse_route_v4(&ctx.read_raw("/proc/net/route").unwrap_or_default());
    let mut facts = Map::new();
    let Some(route) = net::route_v4_for(&routes, PROBE_V4) else {
        return facts;
    };
    facts.insert("interface".into(), route.interface.clone().into());
    let toward = if route.has_gateway() {
        route.gateway
    } else {
        PROBE_V4
    };
    let addresses = ipv4
        .iter()
        .filter_map(|a| Some((a.device.as_str(), a.address.parse().ok()?, a.prefix_length)));
    if let Some(source) = net::source_v4_for(addresses, &route.interface, toward) {
        facts.insert("address".into(), source.to_string().into());
    }
    if route.has_gateway() && route.gateway != PROBE_V4 {
        facts.insert("gateway".into(), route.gateway.to_string().into());
    }
    facts
}

/// What `ip -6 route get 2404:6800:400a:800::1012` says.
fn default_ipv6(ctx: &Ctx, ipv6: &[Inet6Address]) -> Map<String, Value> {
    let mut facts = Map::new();
    let Ok(probe) = PROBE_V6.parse::<Ipv6Addr>() else {
        return facts;
    };
    let routes = net::parse_route_v6(&ctx.read_raw("/proc/net/ipv6_route").unwrap_or_default());
    let Some(route) = net::route_v6_for(&routes, probe) else {
        return facts;
    };
    facts.insert("interface".into(), route.interface.clone().into());
    if let Some(source) = net::source_v6_for(ipv6, &route.interface, probe) {
        facts.insert("address".into(), source.address.to_string().into());
    }
    if route.flags & net::RTF_GATEWAY != 0 && route.next_hop != probe {
        facts.insert("gateway".into(), route.next_hop.to_string().into());
    }
    facts
}

/// `ip -4/-6 route show table local`: the addresses this host answers on.
fn locally_reachable(ctx: &Ctx) -> Value {
    const RTF_ANYCAST: u32 = 0x0010_0000;
    let mut v4: Vec<String> = Vec::new();
    for (address, prefix) in
        net::fib_trie_local_routes(&ctx.read_raw("/proc/net/fib_trie").unwrap_or_default())
    {
        let text = if prefix == 32 {
            address.to_string()
        } else {
            format!("{address}/{prefix}")
        };
        if !v4.contains(&text) {
            v4.push(text);
        }
    }
    let mut v6: Vec<String> = Vec::new();
    let routes = net::parse_route_v6(&ctx.read_raw("/proc/net/ipv6_route").unwrap_or_default());
    for route in routes
        .iter()
        .filter(|r| r.flags & net::RTF_LOCAL != 0 && r.flags & RTF_ANYCAST == 0)
    {
        let text = if route.prefix_length == 128 {
            route.destination.to_string()
        } else {
            format!("{}/{}", route.destination, route.prefix_length)
        };
        if !v6.contains(&text) {
            v6.push(text);
        }
    }
    json!({ "ipv4": v4, "ipv6": v6 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_ethtool_prints_time_stamping_flag_names() {
        assert_eq!(kernel_version("6.1.0-18-amd64"), Some((6, 1)));
        assert_eq!(kernel_version("5.4.0"), Some((5, 4)));
        assert_eq!(kernel_version("6.18.44-fc-v782"), Some((6, 18)));
        assert_eq!(kernel_version("weird"), None);
        // Debian 12: ethtool 6.1 on Linux 6.1, netlink.
        assert!(prints_names_only((6, 1), (6, 1)));
        // Ubuntu 20.04: ethtool 5.4, the ioctl and its labels.
        assert!(!prints_names_only((5, 4), (5, 15)));
        // A new ethtool on a kernel without TSINFO_GET falls back to the ioctl.
        assert!(!prints_names_only((6, 1), (5, 4)));
    }
}
