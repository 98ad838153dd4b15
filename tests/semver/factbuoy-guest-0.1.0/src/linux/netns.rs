//! Whether the factbuoy process runs in the network namespace of the host it describes.
//!
//! Interfaces, their attributes and MAC addresses come from the host root's `/sys/class/net`,
//! which shows the network namespace of whoever mounted that `/sys`: the host's. Addresses,
//! routes (`/proc/net` follows its reader), ethtool and the host name are the kernel's answer to
//! the factbuoy process, about the namespaces *it* runs in. The two are the same on a host, in a
//! fleet agent, and in a Kubernetes agent pod with `hostNetwork`; they differ in a pod without it
//! (`--no-host-network`), or with a host root copied from elsewhere, and then a plugin should say
//! which of its facts describe factbuoy's own namespaces rather than the host's.
//!
//! The namespace links (`/proc/self/ns/net`) would tell at once, but a non-root agent may not
//! read process 1's, and process 1 need not be in the namespace `/sys` shows (`ip netns exec`).
//! So the interfaces are compared: the root's (names and MAC addresses) with those the process's
//! namespace has (`host_info::network_interfaces`, whose MAC addresses are the kernel's answer
//! for that namespace), looked at twice, before and after the root's,
//! so that an interface created or removed meanwhile (a pod's veth on a busy node) is not taken
//! for a difference. Needs the `host-info` capability and `read:/sys`.

use std::collections::BTreeSet;

use crate::hostfs::HostFs;

/// Words for why some facts describe factbuoy's own namespaces, for a plugin's warnings.
pub const OTHER_NAMESPACE: &str = "factbuoy runs in another network namespace than the host \
    root's (in Kubernetes: an agent pod without hostNetwork, as --no-host-network makes it, which \
    has its own host name too)";

/// An interface as a namespace lists it: its name, and its MAC address when it has one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seen {
    /// `eth0`.
    pub name: String,
    /// `aa:bb:cc:dd:ee:ff` in lower case; `None` for a link without a hardware address (the
    /// loopback, tunnels), which only its name identifies.
    pub mac: Option<String>,
}

impl Seen {
    /// `name` with `mac` as either side writes it (sysfs's `address`, `host-info`'s MAC).
    pub fn new(name: &str, mac: &str) -> Seen {
        let mac = mac.trim().to_ascii_lowercase();
        let hardware = mac.len() == 17 && mac != "00:00:00:00:00:00";
        Seen {
            name: name.to_owned(),
            mac: hardware.then_some(mac),
        }
    }

    /// Whether `own`, as factbuoy's namespace lists it, is this interface of the host root: the
    /// same name and, when the root's has a MAC address, the same one. The process's MAC
    /// addresses are the kernel's answer for its own namespace, where its interface names may
    /// come from a `/sys` it shares with the host (`unshare -n`): an interface it only sees
    /// there has no MAC address.
    fn is(&self, own: &Seen) -> bool {
        self.name == own.name && (self.mac.is_none() || self.mac == own.mac)
    }
}

/// How factbuoy's network namespace compares with the host root's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkNamespace {
    /// The host root's (as far as its interfaces tell): every network fact describes the host.
    Same,
    /// Another one. `outside` are the host root's interfaces that factbuoy's namespace does not
    /// have (ethtool cannot ask about them), sorted.
    Other {
        /// Interface names.
        outside: Vec<String>,
    },
}

/// Compares the host root's interfaces with factbuoy's namespace's, listed before (`own_before`)
/// and after (`own_after`) the root's. The namespace is another one when an interface of the
/// root is in neither listing of factbuoy's namespace (or only without its MAC address, or with
/// another), or when factbuoy's namespace has, in both listings, a name the root does not show.
pub fn compare(root: &[Seen], own_before: &[Seen], own_after: &[Seen]) -> NetworkNamespace {
    let outside: BTreeSet<String> = root
        .iter()
        .filter(|r| !own_before.iter().chain(own_after).any(|o| r.is(o)))
        .map(|r| r.name.clone())
        .collect();
    let only_own = own_before
        .iter()
        .filter(|o| own_after.contains(o))
        .any(|o| !root.iter().any(|r| r.name == o.name));
    if outside.is_empty() && !only_own {
        NetworkNamespace::Same
    } else {
        NetworkNamespace::Other {
            outside: outside.into_iter().collect(),
        }
    }
}

/// Reads both sides and [`compare`]s them. A host root without `/sys/class/net` tells nothing:
/// [`NetworkNamespace::Same`].
pub fn network_namespace(fs: &HostFs) -> NetworkNamespace {
    let own = || -> Vec<Seen> {
        crate::host_info::network_interfaces()
            .iter()
            .map(|i| Seen::new(&i.name, &i.mac_address))
            .collect()
    };
    let before = own();
    let Ok(names) = fs.read_dir("/sys/class/net") else {
        return NetworkNamespace::Same;
    };
    let root: Vec<Seen> = names
        .iter()
        .map(|name| {
            let mac = fs
                .read_optional(&format!("/sys/class/net/{name}/address"))
                .unwrap_or_default();
            Seen::new(name, &mac)
        })
        .collect();
    compare(&root, &before, &own())
}

/// `names` for a warning: the first `max`, then how many more.
pub fn listed(names: &[String], max: usize) -> String {
    let shown = names
        .iter()
        .take(max)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    match names.len().saturating_sub(max) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(list: &[(&str, &str)]) -> Vec<Seen> {
        list.iter().map(|(n, m)| Seen::new(n, m)).collect()
    }

    const NODE: &[(&str, &str)] = &[
        ("lo", "00:00:00:00:00:00"),
        ("eth0", "02:FB:00:00:00:01"),
        ("cni1", "6a:1e:22:00:10:01"),
        ("veth1a2b", "aa:aa:aa:aa:aa:01"),
    ];

    #[test]
    fn the_hosts_own_namespace_is_the_same_whatever_the_case_of_mac_addresses() {
        let node = seen(NODE);
        let own: Vec<Seen> = NODE
            .iter()
            .map(|(n, m)| Seen::new(n, &m.to_lowercase()))
            .collect();
        assert_eq!(compare(&node, &own, &own), NetworkNamespace::Same);
    }

    #[test]
    fn a_pod_network_is_another_namespace_even_with_an_eth0_of_its_own() {
        let pod = seen(&[("lo", "00:00:00:00:00:00"), ("eth0", "0a:58:0a:f4:01:04")]);
        assert_eq!(
            compare(&seen(NODE), &pod, &pod),
            NetworkNamespace::Other {
                outside: vec!["cni1".into(), "eth0".into(), "veth1a2b".into()]
            }
        );
        // A node with only a loopback still tells: the pod's eth0 is not the node's.
        let lo = seen(&[("lo", "")]);
        assert_eq!(
            compare(&lo, &pod, &pod),
            NetworkNamespace::Other { outside: vec![] }
        );
    }

    #[test]
    fn interfaces_named_but_without_their_mac_address_are_outside() {
        // `unshare -n`: the names come from the host's /sys, the MAC addresses from the new
        // namespace, which has only its own loopback.
        let own: Vec<Seen> = NODE.iter().map(|(n, _)| Seen::new(n, "")).collect();
        assert_eq!(
            compare(&seen(NODE), &own, &own),
            NetworkNamespace::Other {
                outside: vec!["cni1".into(), "eth0".into(), "veth1a2b".into()]
            }
        );
    }

    #[test]
    fn an_interface_that_comes_or_goes_while_looking_is_no_difference() {
        let node = seen(NODE);
        // A pod's veth created after the first listing of the own namespace...
        let before = seen(&NODE[..3]);
        assert_eq!(compare(&node, &before, &node), NetworkNamespace::Same);
        // ...or removed after the root was listed.
        assert_eq!(compare(&node, &node, &before), NetworkNamespace::Same);
        // One created after the root was listed, gone from it.
        let mut more = node.clone();
        more.push(Seen::new("veth9", "aa:aa:aa:aa:aa:09"));
        assert_eq!(compare(&node, &node, &more), NetworkNamespace::Same);
    }

    #[test]
    fn warnings_list_a_few_names_and_count_the_rest() {
        let names: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        assert_eq!(listed(&names, 4), "a, b, c, d");
        assert_eq!(listed(&names, 2), "a, b and 2 more");
    }
}
