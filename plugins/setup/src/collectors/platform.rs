//! `platform`: kernel, machine, host names and machine id (Ansible's PlatformFactCollector).

use std::net::IpAddr;

use factbuoy_guest::host_info;
use factbuoy_guest::linux::netns::{self, NetworkNamespace};

use crate::ctx::Ctx;

pub fn collect(ctx: &mut Ctx) {
    // uname(2) fields, as the kernel exposes them in /proc/sys/kernel.
    let system = ctx
        .read("/proc/sys/kernel/ostype")
        .unwrap_or_else(|| "Linux".into());
    ctx.set("system", system);
    if let Some(release) = ctx.read("/proc/sys/kernel/osrelease") {
        ctx.set("kernel", release);
    }
    if let Some(version) = ctx.read("/proc/sys/kernel/version") {
        ctx.set("kernel_version", version);
    }
    let machine = host_info::os().architecture;
    ctx.set("machine", machine.as_str());

    if let Some(nodename) = ctx.read("/proc/sys/kernel/hostname") {
        let fqdn = fqdn(ctx, &nodename);
        let domain = fqdn
            .split_once('.')
            .map(|(_, d)| d)
            .unwrap_or("")
            .to_owned();
        ctx.set("hostname", nodename.split('.').next().unwrap_or(""));
        ctx.set("nodename", nodename.as_str());
        ctx.set("fqdn", fqdn);
        ctx.set("domain", domain);
        if *ctx.network_namespace() != NetworkNamespace::Same {
            ctx.warn(format!(
                "platform: {}: ansible_hostname, ansible_nodename, ansible_fqdn and \
                 ansible_domain may be factbuoy's own host name, not the host's",
                netns::OTHER_NAMESPACE
            ));
        }
    }

    // Ansible reports the word size of its Python; here, the one native to the machine.
    let bits = userspace_bits(&machine);
    ctx.set("userspace_bits", bits);
    if machine == "x86_64" || is_i86(&machine) {
        ctx.set(
            "architecture",
            if machine == "x86_64" {
                "x86_64"
            } else {
                "i386"
            },
        );
        ctx.set(
            "userspace_architecture",
            if bits == "64" { "x86_64" } else { "i386" },
        );
    } else {
        ctx.set("architecture", machine.as_str());
    }

    let machine_id = ctx
        .read("/var/lib/dbus/machine-id")
        .filter(|id| !id.is_empty())
        .or_else(|| ctx.read("/etc/machine-id").filter(|id| !id.is_empty()));
    if let Some(id) = machine_id {
        ctx.set("machine_id", id.lines().next().unwrap_or(""));
    }
}

/// Solaris' `i86pc` and the `i[3-6]86` family.
fn is_i86(machine: &str) -> bool {
    machine == "i86pc"
        || machine
            .strip_prefix('i')
            .is_some_and(|rest| matches!(rest, "386" | "486" | "586" | "686"))
}

fn userspace_bits(machine: &str) -> &'static str {
    let bits32 = [
        "i386", "i486", "i586", "i686", "armv6l", "armv7l", "armv7", "ppc", "mips", "s390",
    ];
    if bits32.contains(&machine) {
        "32"
    } else {
        "64"
    }
}

/// Python's `socket.getfqdn()`: the host name resolved to an address and back, taking the
/// first name with a dot among the canonical name and its aliases. Only `/etc/hosts` can be
/// consulted here (no DNS in the sandbox); a name it does not list stays as it is.
fn fqdn(ctx: &Ctx, nodename: &str) -> String {
    let hosts = ctx.read_raw("/etc/hosts").unwrap_or_default();
    let entries = parse_hosts(&hosts);
    let Some(address) = forward_lookup(&entries, nodename) else {
        return nodename.to_owned();
    };
    let Some((_, names)) = entries.iter().find(|(a, _)| *a == address) else {
        return nodename.to_owned();
    };
    names
        .iter()
        .find(|name| name.contains('.'))
        .or(names.first())
        .cloned()
        .unwrap_or_else(|| nodename.to_owned())
}

/// `/etc/hosts` lines: an address and its names, comments removed.
fn parse_hosts(text: &str) -> Vec<(IpAddr, Vec<String>)> {
    text.lines()
        .filter_map(|line| {
            let line = line.split('#').next().unwrap_or("");
            let mut words = line.split_whitespace();
            let address = words.next()?.parse().ok()?;
            let names: Vec<String> = words.map(str::to_owned).collect();
            (!names.is_empty()).then_some((address, names))
        })
        .collect()
}

/// The address getaddrinfo returns first for `name` from the hosts file: RFC 6724's
/// precedence (IPv6 loopback and global above IPv4) orders the candidates, file order breaks
/// ties.
fn forward_lookup(entries: &[(IpAddr, Vec<String>)], name: &str) -> Option<IpAddr> {
    let mut candidates: Vec<IpAddr> = entries
        .iter()
        .filter(|(_, names)| names.iter().any(|n| n.eq_ignore_ascii_case(name)))
        .map(|(address, _)| *address)
        .collect();
    candidates.sort_by_key(|a| std::cmp::Reverse(precedence(a)));
    candidates.first().copied()
}

/// RFC 6724 default policy table precedence.
fn precedence(address: &IpAddr) -> u8 {
    match address {
        IpAddr::V4(_) => 35,
        IpAddr::V6(v6) => {
            let s = v6.segments();
            if v6.is_loopback() {
                50
            } else if s[0] == 0x2002 {
                30
            } else if s[0] == 0x2001 && s[1] == 0 {
                5
            } else if s[0] & 0xfe00 == 0xfc00 {
                3
            } else if s[0] & 0xffc0 == 0xfec0 || s[0] == 0x3ffe || s[..6] == [0; 6] {
                1
            } else {
                40
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fqdn_from_hosts_file() {
        let entries = parse_hosts(
            "127.0.0.1 localhost\n127.0.1.1 web1.example.com web1 # comment\n::1 localhost ip6-localhost\n",
        );
        let web1 = forward_lookup(&entries, "web1").unwrap();
        assert_eq!(web1.to_string(), "127.0.1.1");
        let localhost = forward_lookup(&entries, "localhost").unwrap();
        assert_eq!(localhost.to_string(), "::1");
        assert!(forward_lookup(&entries, "absent").is_none());
    }

    #[test]
    fn architecture_helpers() {
        assert!(is_i86("i686") && is_i86("i86pc") && !is_i86("x86_64"));
        assert_eq!(userspace_bits("aarch64"), "64");
        assert_eq!(userspace_bits("armv7l"), "32");
    }
}
