//! Comparing what two ways of running a plugin saw of one machine (docs/kubernetes.md, "The
//! same facts everywhere"): the facts that differ by design, with why; those that change from
//! one moment to the next; and the differences left. Used by the Kubernetes conformance test
//! (tests/kube_nodes/conformance.rs: an agent pod, by hand, a fleet agent) and by the agent in a
//! container (tests/all/agent_container.rs).

use serde_json::Value;

/// Facts that differ by design between the ways factbuoy runs on a machine (an agent pod, by
/// hand, a fleet agent, an agent in a Podman container), each with the reason (the list
/// docs/kubernetes.md gives): JSON pointers into `setup`'s and `host-facts`' documents. The
/// agent pod's own mounts ([`is_pod_mount`]) and the sizes of file systems it cannot reach
/// ([`agent_reaches`]) are the rest of that list. The test harness's own mounts
/// ([`is_harness_mount`]) are no node's facts, and are left out too.
pub const BY_DESIGN: &[(&[&str], &str)] = &[
    (
        &[
            "/ansible_user_id",
            "/ansible_user_uid",
            "/ansible_user_gid",
            "/ansible_user_gecos",
            "/ansible_user_dir",
            "/ansible_user_shell",
            "/ansible_real_user_id",
            "/ansible_effective_user_id",
            "/ansible_real_group_id",
            "/ansible_effective_group_id",
        ],
        "who factbuoy runs as: the agent pod's user 65532, root on the node, in the fleet agent and in its container",
    ),
    (
        &["/ansible_env"],
        "the factbuoy process's environment, which a pod, a shell and a service each set their own way",
    ),
    (
        &[
            "/ansible_system_capabilities",
            "/ansible_system_capabilities_enforced",
        ],
        "the factbuoy process's capabilities: none in the agent pod, Podman's default set in a container, root's elsewhere",
    ),
    (
        &["/ansible_lvm"],
        "Ansible reports LVM only when its module runs as root, which the agent does not",
    ),
    (
        &[
            "/ansible_mounts/*/uuid",
            "/ansible_device_links",
            "/ansible_devices/*/links",
        ],
        "found in /dev/disk, which agents never mount (equal where a node has no /dev/disk)",
    ),
    (
        &[
            "/ansible_virtualization_type",
            "/ansible_virtualization_role",
            "/ansible_virtualization_tech_guest",
            "/ansible_virtualization_tech_host",
            "/virtualization",
        ],
        "told in part by files at the node's root (/.dockerenv, /.containerenv) and /dev/kvm, \
         which agents in a pod or a container cannot see: they mount whole top-level \
         directories, never / or /dev",
    ),
];

/// Mount points the kubelet and the container runtimes make for pods and containers: the agent
/// pod's or container's own root file system and volumes are in the node's mount table only
/// while it runs, and Podman's storage (`/var/lib/containers/storage/overlay` mounted on itself,
/// `/run/containers/storage/...`) only once Podman has run there (the mounts of
/// [`BY_DESIGN`]'s kind, for both plugins).
pub fn is_pod_mount(mount_point: &str) -> bool {
    mount_point.contains("/kubelet/pods/")
        || mount_point.contains("/io.containerd.")
        || mount_point.contains("/containers/storage/")
        || mount_point.ends_with("/containers/storage")
}

/// Mount points of the test harness itself: the network namespaces of the test clusters
/// (`/run/netns/factbuoy-t-<name>-node-N`, tests/support/kube.rs), which the other test modules'
/// clusters add and remove while this test samples a node three times; the nodes see them
/// because they share the machine's `/run`.
pub fn is_harness_mount(mount_point: &str) -> bool {
    mount_point.starts_with("/run/netns/factbuoy-t-")
}

/// The host directories the agents of this test's run mount (docs/kubernetes.md, "Host
/// directories"): those setup's and host-facts' grants reach.
pub const AGENT_DIRS: &[&str] = &[
    "/bin", "/etc", "/proc", "/run", "/sbin", "/sys", "/usr", "/var",
];

/// Whether an agent reaches `mount_point` to ask its size (statvfs): `/`, or below a directory
/// it mounts. Not `/dev` and its submounts, nor what is mounted elsewhere (`/mnt/...`).
pub fn agent_reaches(mount_point: &str) -> bool {
    mount_point == "/"
        || AGENT_DIRS
            .iter()
            .any(|dir| mount_point == *dir || mount_point.starts_with(&format!("{dir}/")))
}

/// Size facts of a mount, which only statvfs of its mount point tells (setup's, host-facts').
pub const SIZE_FACTS: &[&str] = &[
    "size_total",
    "size_available",
    "block_size",
    "block_total",
    "block_available",
    "block_used",
    "inode_total",
    "inode_available",
    "inode_used",
    "usage",
];

/// Facts that change from one second to the next wherever factbuoy runs: not deterministic, so
/// never compared (JSON pointers; `*` stands for every element).
pub const VOLATILE: &[&str] = &[
    "/ansible_date_time/date",
    "/ansible_date_time/day",
    "/ansible_date_time/epoch",
    "/ansible_date_time/epoch_int",
    "/ansible_date_time/hour",
    "/ansible_date_time/iso8601",
    "/ansible_date_time/iso8601_basic",
    "/ansible_date_time/iso8601_basic_short",
    "/ansible_date_time/iso8601_micro",
    "/ansible_date_time/minute",
    "/ansible_date_time/month",
    "/ansible_date_time/second",
    "/ansible_date_time/time",
    "/ansible_date_time/weekday",
    "/ansible_date_time/weekday_number",
    "/ansible_date_time/weeknumber",
    "/ansible_date_time/year",
    "/ansible_date_time/monotonic",
    "/ansible_uptime_seconds",
    "/ansible_loadavg",
    "/ansible_memfree_mb",
    "/ansible_memory_mb/real/free",
    "/ansible_memory_mb/real/used",
    "/ansible_memory_mb/nocache",
    "/ansible_memory_mb/swap/free",
    "/ansible_memory_mb/swap/used",
    "/ansible_memory_mb/swap/cached",
    "/ansible_mounts/*/size_available",
    "/ansible_mounts/*/block_available",
    "/ansible_mounts/*/block_used",
    "/ansible_mounts/*/inode_available",
    "/ansible_mounts/*/inode_used",
    "/collected_at",
    "/cpu/frequency_mhz",
    "/memory/available_bytes",
    "/memory/free_bytes",
    "/memory/used_bytes",
    "/memory/buffers_bytes",
    "/memory/cached_bytes",
    "/memory/shared_bytes",
    "/memory/swap/free_bytes",
    "/memory/swap/used_bytes",
    "/mounts/*/usage/free_bytes",
    "/mounts/*/usage/available_bytes",
    "/mounts/*/usage/used_bytes",
    "/mounts/*/usage/inodes_free",
    "/mounts/*/usage/inodes_used",
    "/network/interfaces/*/rx_bytes",
    "/network/interfaces/*/tx_bytes",
    "/system/uptime_seconds",
    "/system/load_average",
    "/system/processes",
];

/// Removes what `pointer` names from `value`; `*` steps into every element of an array or
/// every value of an object.
pub fn remove(value: &mut Value, pointer: &str) {
    let steps: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    remove_steps(value, &steps);
}

pub fn remove_steps(value: &mut Value, steps: &[&str]) {
    match (steps, value) {
        ([last], Value::Object(map)) => {
            map.remove(*last);
        }
        (["*", rest @ ..], Value::Array(items)) => {
            for item in items {
                remove_steps(item, rest);
            }
        }
        (["*", rest @ ..], Value::Object(map)) => {
            for item in map.values_mut() {
                remove_steps(item, rest);
            }
        }
        ([first, rest @ ..], Value::Object(map)) => {
            if let Some(inner) = map.get_mut(*first) {
                remove_steps(inner, rest);
            }
        }
        _ => {}
    }
}

/// A document without its volatile facts and those that differ by design: what must be
/// identical across the three ways.
pub fn deterministic(document: &Value) -> Value {
    let mut document = document.clone();
    for pointer in VOLATILE
        .iter()
        .chain(BY_DESIGN.iter().flat_map(|(pointers, _)| pointers.iter()))
    {
        remove(&mut document, pointer);
    }
    // Lists of mounts become objects keyed by mount point (and how many times it was mounted
    // over), so that a difference names it.
    for (list, key) in [("ansible_mounts", "mount"), ("mounts", "mount_point")] {
        let Some(Value::Array(mounts)) = document.get(list) else {
            continue;
        };
        let mut keyed = serde_json::Map::new();
        for mount in mounts {
            let point = mount[key].as_str().unwrap_or_default();
            if is_pod_mount(point) || is_harness_mount(point) {
                continue;
            }
            let mut mount = mount.clone();
            if !agent_reaches(point) {
                for fact in SIZE_FACTS {
                    remove(&mut mount, fact);
                }
            }
            let mut name = point.to_owned();
            while keyed.contains_key(&name) {
                name.push_str(" (mounted over)");
            }
            keyed.insert(name, mount);
        }
        document[list] = Value::Object(keyed);
    }
    document
}

/// Where `a` and `b` differ, as JSON pointers with both values.
pub fn differences(a: &Value, b: &Value, at: &str, found: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let null = Value::Null;
                let (left, right) = (x.get(key).unwrap_or(&null), y.get(key).unwrap_or(&null));
                differences(left, right, &format!("{at}/{key}"), found);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (left, right)) in x.iter().zip(y).enumerate() {
                differences(left, right, &format!("{at}/{i}"), found);
            }
        }
        _ if a != b => {
            let cut = |v: &Value| v.to_string().chars().take(300).collect::<String>();
            found.push(format!("{at}: {} vs {}", cut(a), cut(b)));
        }
        _ => {}
    }
}

/// [`BY_DESIGN`] as lines to print beside a failure: each group of facts and why.
pub fn by_design_lines() -> String {
    BY_DESIGN
        .iter()
        .map(|(pointers, why)| format!("{}: {why}", pointers.join(", ")))
        .collect::<Vec<_>>()
        .join("\n")
}
