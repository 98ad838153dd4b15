//! Interfaces with their addresses, routes, default routes and DNS.

use std::net::{Ipv4Addr, Ipv6Addr};

use factbuoy_guest::host_info;
use factbuoy_guest::linux::net::{self, Inet6Address};
use factbuoy_guest::linux::netns::{self, NetworkNamespace};
use factbuoy_guest::linux::resolv_conf;

use crate::model::{Address, DefaultRoute, Dns, Interface, Network, Route};
use crate::read::Reader;

/// Destinations whose routes stand for "the default route" (public addresses).
const PROBE_V4: Ipv4Addr = Ipv4Addr::new(8, 8, 8, 8);
const PROBE_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0x4860, 0x4860, 0, 0, 0, 0, 0x8888);

pub fn collect(r: &Reader) -> Network {
    let ipv4 = host_info::ipv4_addresses();
    let ipv6 = net::parse_if_inet6(&r.text("/proc/net/if_inet6").unwrap_or_default());
    let routes_v4 = net::parse_route_v4(&r.text("/proc/net/route").unwrap_or_default());
    let routes_v6 = net::parse_route_v6(&r.text("/proc/net/ipv6_route").unwrap_or_default());

    let mut names = match net::interface_names(&r.fs) {
        Ok(names) => names,
        Err(e) => {
            r.warn(format!("no network interfaces: {e}"));
            Vec::new()
        }
    };
    names.sort();
    let interfaces = names
        .iter()
        .map(|name| interface(r, name, &ipv4, &ipv6))
        .collect();

    let mut routes: Vec<Route> = routes_v4
        .iter()
        .filter(|route| route.flags & net::RTF_UP != 0)
        .map(|route| Route {
            family: "ipv4",
            destination: route.destination.to_string(),
            prefix_length: route.prefix_length,
            gateway: route.has_gateway().then(|| route.gateway.to_string()),
            interface: route.interface.clone(),
            metric: route.metric,
        })
        .collect();
    routes.extend(
        routes_v6
            .iter()
            .filter(|route| route.flags & net::RTF_UP != 0)
            .filter(|route| route.flags & (net::RTF_LOCAL | net::RTF_REJECT) == 0)
            .filter(|route| route.destination.segments()[0] & 0xff00 != 0xff00)
            .map(|route| Route {
                family: "ipv6",
                destination: route.destination.to_string(),
                prefix_length: route.prefix_length,
                gateway: (route.flags & net::RTF_GATEWAY != 0).then(|| route.next_hop.to_string()),
                interface: route.interface.clone(),
                metric: route.metric,
            }),
    );

    let default_ipv4 = net::route_v4_for(&routes_v4, PROBE_V4)
        .filter(|route| route.prefix_length == 0)
        .map(|route| {
            let toward = if route.has_gateway() {
                route.gateway
            } else {
                PROBE_V4
            };
            let addresses = ipv4.iter().filter_map(|a| {
                Some((a.device.as_str(), a.address.parse().ok()?, a.prefix_length))
            });
            DefaultRoute {
                interface: route.interface.clone(),
                gateway: route.has_gateway().then(|| route.gateway.to_string()),
                source_address: net::source_v4_for(addresses, &route.interface, toward)
                    .map(|a| a.to_string()),
            }
        });
    let default_ipv6 = net::route_v6_for(&routes_v6, PROBE_V6)
        .filter(|route| route.prefix_length == 0)
        .map(|route| DefaultRoute {
            interface: route.interface.clone(),
            gateway: (route.flags & net::RTF_GATEWAY != 0).then(|| route.next_hop.to_string()),
            source_address: net::source_v6_for(&ipv6, &route.interface, PROBE_V6)
                .map(|a| a.address.to_string()),
        });

    if let NetworkNamespace::Other { .. } = netns::network_namespace(&r.fs) {
        r.warn(format!(
            "{}: network.routes, network.default_ipv4, network.default_ipv6 and the \
             interfaces' addresses are that namespace's, not the host's, and host.hostname and \
             host.domain may be factbuoy's own",
            netns::OTHER_NAMESPACE
        ));
    }
    Network {
        interfaces,
        routes,
        default_ipv4,
        default_ipv6,
        dns: dns(r),
    }
}

fn interface(
    r: &Reader,
    name: &str,
    ipv4: &[host_info::Ipv4Address],
    ipv6: &[Inet6Address],
) -> Interface {
    let sys = net::read_interface(&r.fs, name);
    let dir = format!("/sys/class/net/{name}");
    let kind = if r.fs.exists(&format!("{dir}/bridge")) {
        "bridge"
    } else if r.fs.exists(&format!("{dir}/bonding")) {
        "bond"
    } else {
        match sys.type_code.as_deref() {
            Some("1") => "ether",
            Some("772") => "loopback",
            Some("32") => "infiniband",
            Some("512") => "ppp",
            Some("65534") | Some("768") | Some("769") | Some("776") | Some("778") => "tunnel",
            _ => "other",
        }
    };
    let mut addresses: Vec<Address> = ipv4
        .iter()
        .filter(|a| a.device == name)
        .map(|a| Address {
            family: "ipv4",
            address: a.address.clone(),
            prefix_length: a.prefix_length,
            broadcast: a.broadcast.clone(),
            scope: if a.address.starts_with("127.") {
                "host"
            } else {
                "global"
            }
            .into(),
            label: (a.label != name).then(|| a.label.clone()),
        })
        .collect();
    addresses.extend(
        ipv6.iter()
            .filter(|a| a.interface == name)
            .map(|a| Address {
                family: "ipv6",
                address: a.address.to_string(),
                prefix_length: a.prefix_length,
                broadcast: None,
                scope: a.scope_name(),
                label: None,
            }),
    );
    let counter = |file: &str| {
        r.optional(&format!("{dir}/statistics/{file}"))
            .and_then(|v| v.parse().ok())
    };
    Interface {
        name: name.to_owned(),
        mac_address: sys
            .mac_address
            .filter(|m| !m.is_empty() && m != "00:00:00:00:00:00"),
        mtu_bytes: sys.mtu,
        state: sys.operstate,
        up: sys.flags.map(|f| f & 0x1 != 0),
        kind: kind.into(),
        speed_mbps: sys.speed_mbps.filter(|s| *s > 0),
        driver: sys.driver,
        bus_device: sys.device,
        addresses,
        rx_bytes: counter("rx_bytes"),
        tx_bytes: counter("tx_bytes"),
    }
}

/// resolv.conf as the resolver reads it: name servers and options accumulate, the last
/// `search` or `domain` line wins.
fn dns(r: &Reader) -> Dns {
    let mut dns = Dns::default();
    let Some(text) = r.text("/etc/resolv.conf") else {
        return dns;
    };
    for (keyword, args) in resolv_conf::directives(&text) {
        match keyword.as_str() {
            "nameserver" => dns.nameservers.extend(args.into_iter().take(1)),
            "search" | "domain" => dns.search = args,
            "options" => dns.options.extend(args),
            _ => {}
        }
    }
    dns
}
