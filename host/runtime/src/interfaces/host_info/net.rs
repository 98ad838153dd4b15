//! `network-interfaces` and `ipv4-addresses`: the interfaces of the network namespace factbuoy
//! runs in (the node's in a pod with `hostNetwork`); a host root cannot select them.

use sysinfo::Networks;

use crate::bindings::factbuoy::plugin::host_info::{IpNetwork, Ipv4Address, NetworkInterface};

/// Every interface with its addresses and counters, sorted by name.
pub(super) fn interfaces() -> Vec<NetworkInterface> {
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
    interfaces
}

/// IPv4 addresses from getifaddrs(3), which keeps the kernel's order and the address labels.
pub(super) fn ipv4_addresses() -> Vec<Ipv4Address> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
