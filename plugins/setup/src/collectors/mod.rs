//! Ansible's fact collectors for Linux, one module per collector or family of collectors.
//!
//! Each collector reads what it needs and sets facts on the [`Ctx`]; a fact it cannot read is
//! left out with a warning, and the other collectors carry on.

use crate::ctx::Ctx;

mod cmdline;
mod date_time;
mod distribution;
mod dns;
mod hardware;
mod initiators;
mod local;
mod lsb;
mod managers;
mod network;
mod platform;
mod process;
mod security;
mod ssh;
mod virtualization;

/// One Ansible fact collector.
pub struct Collector {
    /// Its name in `gather_subset`.
    pub name: &'static str,
    /// The facts that also select it in `gather_subset`.
    pub fact_ids: &'static [&'static str],
    /// Collectors whose facts it reads; they run first.
    pub requires: &'static [&'static str],
    pub collect: fn(&mut Ctx),
}

const fn collector(name: &'static str, collect: fn(&mut Ctx)) -> Collector {
    Collector {
        name,
        fact_ids: &[],
        requires: &[],
        collect,
    }
}

/// Every collector, each after the ones it requires.
pub static COLLECTORS: &[Collector] = &[
    Collector {
        fact_ids: &[
            "system",
            "kernel",
            "kernel_version",
            "machine",
            "python_version",
            "architecture",
            "machine_id",
        ],
        ..collector("platform", platform::collect)
    },
    Collector {
        fact_ids: &[
            "distribution_version",
            "distribution_release",
            "distribution_major_version",
            "os_family",
        ],
        ..collector("distribution", distribution::collect)
    },
    collector("lsb", lsb::collect),
    collector("selinux", security::selinux),
    collector("apparmor", security::apparmor),
    Collector {
        fact_ids: &["is_chroot"],
        ..collector("chroot", security::chroot)
    },
    collector("fips", security::fips),
    // Python facts describe the interpreter running Ansible's module; there is none here.
    collector("python", |_| {}),
    Collector {
        fact_ids: &["system_capabilities", "system_capabilities_enforced"],
        ..collector("caps", security::caps)
    },
    Collector {
        requires: &["distribution"],
        ..collector("pkg_mgr", managers::pkg_mgr)
    },
    Collector {
        requires: &["platform", "distribution"],
        ..collector("service_mgr", managers::service_mgr)
    },
    collector("cmdline", cmdline::collect),
    collector("date_time", date_time::collect),
    collector("env", process::env),
    collector("loadavg", process::loadavg),
    Collector {
        fact_ids: &[
            "ssh_host_pub_keys",
            "ssh_host_key_dsa_public",
            "ssh_host_key_rsa_public",
            "ssh_host_key_ecdsa_public",
            "ssh_host_key_ed25519_public",
        ],
        ..collector("ssh_pub_keys", ssh::collect)
    },
    Collector {
        fact_ids: &[
            "user_id",
            "user_uid",
            "user_gid",
            "user_gecos",
            "user_dir",
            "user_shell",
            "real_user_id",
            "effective_user_id",
            "effective_group_ids",
        ],
        ..collector("user", process::user)
    },
    collector("systemd", managers::systemd),
    Collector {
        fact_ids: &[
            "virtualization_type",
            "virtualization_role",
            "virtualization_tech_guest",
            "virtualization_tech_host",
        ],
        ..collector("virtual", virtualization::collect)
    },
    Collector {
        fact_ids: &[
            "processor",
            "processor_cores",
            "processor_count",
            "mounts",
            "devices",
        ],
        requires: &["platform"],
        ..collector("hardware", hardware::collect)
    },
    collector("dns", dns::collect),
    collector("fibre_channel_wwn", initiators::fibre_channel_wwn),
    Collector {
        fact_ids: &[
            "interfaces",
            "default_ipv4",
            "default_ipv6",
            "all_ipv4_addresses",
            "all_ipv6_addresses",
        ],
        requires: &["distribution", "platform"],
        ..collector("network", network::collect)
    },
    collector("iscsi", initiators::iscsi),
    collector("nvme", initiators::nvme),
    collector("local", local::collect),
    // Facter and Ohai facts come from running those programs, which the sandbox cannot do;
    // Ansible gives none either when they are not installed.
    Collector {
        fact_ids: &["facter"],
        ..collector("facter", |_| {})
    },
    collector("ohai", |_| {}),
];
