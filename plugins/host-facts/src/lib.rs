//! `host-facts`: factbuoy's own structured facts about a host, in a documented, versioned
//! schema (`schema/host-facts.v1.json`, `docs/host-facts.md`): OS, kernel, CPU, memory, block
//! devices, mounts with usage, network, uptime and load, time zone, virtualization and, on a
//! Kubernetes node, the kubelet and its container runtime.
//!
//! Read from granted read-only preopens and `host_info` only; what cannot be read is `null`
//! with a warning, and the rest of the document is still written.

mod collect;
mod model;
mod read;

use factbuoy_guest::hostfs::HostFs;
use factbuoy_guest::prelude::*;

use crate::collect::{cpu, kubernetes, network, storage, system};
use crate::model::{HostFacts, SCHEMA_VERSION};
use crate::read::Reader;

/// The artifact this plugin writes.
pub const ARTIFACT: &str = "host-facts.json";

/// What the plugin reads, and why.
const READS: &[(&str, &str)] = &[
    ("/proc", "kernel, CPU, memory, mounts, routes, processes"),
    (
        "/sys",
        "block devices, network interfaces, CPU topology, DMI",
    ),
    (
        "/etc",
        "os-release, machine id, DNS, time zone, Kubernetes configuration",
    ),
    (
        "/run",
        "udev's file system UUIDs, container runtime sockets",
    ),
    ("/usr", "os-release and time zone data"),
    ("/dev/disk", "file system UUIDs"),
    ("/var/lib/dbus", "the machine id where /etc has none"),
    ("/var/lib/kubelet", "the kubelet's configuration"),
    (
        "/var/lib/dpkg",
        "versions of the kubelet and container runtime packages",
    ),
];

struct HostFactsPlugin;

impl Gatherer for HostFactsPlugin {
    fn describe() -> Description {
        let mut description = Description::new(
            "host-facts",
            env!("CARGO_PKG_VERSION"),
            "Structured facts about this host in factbuoy's versioned schema (host-facts v1).",
        )
        .capability(
            Capability::HostInfo,
            "architecture, IPv4 addresses, file system usage and container markers",
        );
        for (path, why) in READS {
            description = description.optional_capability(Capability::read(path), why);
        }
        description.writes(
            Artifact::facts(
                ARTIFACT,
                "the host's facts, as schema/host-facts.v1.json describes them",
            )
            // Each list's items by what identifies them, so diffs match them (docs/host-facts.md).
            .list_keys("block_devices", &["name"])
            .list_keys("block_devices.partitions", &["name"])
            .list_keys("mounts", &["mount_point"])
            .list_keys("network.interfaces", &["name"])
            .list_keys("network.interfaces.addresses", &["address"])
            .list_keys(
                "network.routes",
                &[
                    "family",
                    "destination",
                    "prefix_length",
                    "interface",
                    "metric",
                ],
            ),
        )
    }

    fn gather(_params: &Params) -> Result<(), GatherError> {
        let r = Reader::new(HostFs::new());
        let steps = 9;
        let step = |n: u64, what: &str| progress::report(n, steps, what);
        step(0, "operating system and kernel");
        let (os, host, kernel) = (system::os(&r), system::host(&r), system::kernel(&r));
        step(1, "CPU");
        let cpu = cpu::collect(&r);
        step(2, "memory");
        let memory = system::memory(&r);
        step(3, "block devices");
        let block_devices = storage::block_devices(&r);
        step(4, "mounts");
        let mounts = storage::mounts(&r);
        step(5, "network");
        let network = network::collect(&r);
        step(6, "uptime, load and time");
        let (system_facts, time) = (system::system(&r), system::time(&r));
        step(7, "virtualization");
        let virtualization = system::virtualization(&r);
        step(8, "Kubernetes");
        let kubernetes = kubernetes::collect(&r);
        step(steps, "collected");
        let facts = HostFacts {
            schema_version: SCHEMA_VERSION,
            collected_at: system::rfc3339_utc(system::now_seconds()).unwrap_or_default(),
            os,
            host,
            kernel,
            cpu,
            memory,
            block_devices,
            mounts,
            network,
            system: system_facts,
            time,
            virtualization,
            kubernetes,
        };
        output::write_json(ARTIFACT, &facts)
    }
}

export_gatherer!(HostFactsPlugin);
