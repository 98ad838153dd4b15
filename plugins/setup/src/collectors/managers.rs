//! The package manager, the service manager and systemd's version.

use serde_json::json;

use crate::ctx::Ctx;

/// Ansible's list: the last of these programs that exists names the package manager.
const PKG_MGRS: &[(&str, &str)] = &[
    ("/usr/bin/rpm-ostree", "atomic_container"),
    ("/usr/bin/yum", "dnf"),
    ("/usr/bin/dnf-3", "dnf"),
    ("/usr/bin/dnf5", "dnf5"),
    ("/usr/bin/apt-get", "apt"),
    ("/usr/bin/zypper", "zypper"),
    ("/usr/sbin/urpmi", "urpmi"),
    ("/usr/bin/pacman", "pacman"),
    ("/bin/opkg", "opkg"),
    ("/usr/pkg/bin/pkgin", "pkgin"),
    ("/opt/local/bin/pkgin", "pkgin"),
    ("/opt/tools/bin/pkgin", "pkgin"),
    ("/opt/local/bin/port", "macports"),
    ("/usr/local/bin/brew", "homebrew"),
    ("/opt/homebrew/bin/brew", "homebrew"),
    ("/sbin/apk", "apk"),
    ("/usr/sbin/pkg", "pkgng"),
    ("/usr/sbin/swlist", "swdepot"),
    ("/usr/bin/emerge", "portage"),
    ("/usr/sbin/pkgadd", "svr4pkg"),
    ("/usr/bin/pkg", "pkg5"),
    ("/usr/bin/xbps-install", "xbps"),
    ("/usr/local/sbin/pkg", "pkgng"),
    ("/usr/bin/swupd", "swupd"),
    ("/usr/sbin/sorcery", "sorcery"),
    ("/usr/bin/installp", "installp"),
];

/// `pkg_mgr` (Ansible's PkgMgrFactCollector for Linux).
pub fn pkg_mgr(ctx: &mut Ctx) {
    let family = ctx.fact_str("os_family").unwrap_or("").to_owned();
    let mut name = "unknown".to_owned();
    for (path, manager) in PKG_MGRS {
        if family == "Altlinux" && *path == "/usr/bin/pkg" {
            continue;
        }
        if ctx.exists(path) {
            name = manager.to_string();
        }
    }
    if family == "RedHat" {
        name = redhat_pkg_mgr(ctx);
    } else if family == "Debian" && name != "apt" {
        name = "apt".into();
    } else if family == "Altlinux" && name == "apt" {
        name = "apt_rpm".into();
    }
    if name == "apt" && ctx.exists("/usr/bin/rpm") {
        // Ansible asks `rpm -q --whatprovides /usr/bin/apt-get` whether apt is apt-rpm; the
        // sandbox cannot run rpm. Debian hosts with rpm installed have the Debian apt.
        ctx.warn("pkg_mgr: /usr/bin/rpm exists; assuming apt is Debian's apt, not apt-rpm");
    }
    ctx.set("pkg_mgr", name);
}

fn redhat_pkg_mgr(ctx: &Ctx) -> String {
    if ctx.exists("/run/ostree-booted") {
        return "atomic_container".into();
    }
    for path in ["/usr/bin/dnf", "/usr/bin/microdnf"] {
        if ctx.exists(path) {
            let real = ctx.fs.canonicalize(path).unwrap_or_default();
            return if real == "/usr/bin/dnf5" {
                "dnf5"
            } else {
                "dnf"
            }
            .into();
        }
    }
    "unknown".into()
}

/// `service_mgr` (Ansible's ServiceMgrFactCollector on Linux).
pub fn service_mgr(ctx: &mut Ctx) {
    let mut proc_1 = ctx.read_raw("/proc/1/comm");
    if proc_1.is_none() && ctx.fs.is_symlink("/sbin/init") {
        proc_1 = ctx.fs.read_link("/sbin/init").ok();
    }
    let proc_1 = proc_1
        .map(|p| {
            factbuoy_guest::hostfs::basename(p.trim_end_matches('\n'))
                .trim()
                .to_owned()
        })
        .filter(|p| !(p == "init" || p.ends_with("sh")));
    let name = match proc_1.as_deref() {
        Some("procd") => "openwrt_init".to_owned(),
        Some("runit-init") => "runit".to_owned(),
        Some("svscan") => "svc".to_owned(),
        Some("openrc-init") => "openrc".to_owned(),
        Some(other) => other.to_owned(),
        None => linux_service_mgr(ctx),
    };
    ctx.set(
        "service_mgr",
        if name.is_empty() {
            "service".to_owned()
        } else {
            name
        },
    );
}

fn linux_service_mgr(ctx: &Ctx) -> String {
    if ctx.fact_str("distribution") == Some("OpenWrt") {
        return "openwrt_init".into();
    }
    if ctx.fact_str("distribution") == Some("SMGL") {
        return "simpleinit_msb".into();
    }
    if ctx.fact_str("system") != Some("Linux") {
        return "service".into();
    }
    if is_systemd_managed(ctx) {
        "systemd".into()
    } else if ctx.find_bin("initctl").is_some() && ctx.exists("/etc/init/") {
        "upstart".into()
    } else if ctx.exists("/sbin/openrc") {
        "openrc".into()
    } else if ctx.find_bin("systemctl").is_some()
        && ctx.fs.is_symlink("/sbin/init")
        && ctx
            .fs
            .read_link("/sbin/init")
            .is_ok_and(|t| factbuoy_guest::hostfs::basename(&t) == "systemd")
    {
        "systemd".into()
    } else if ctx.exists("/etc/init.d/") {
        "sysvinit".into()
    } else if ctx.exists("/etc/dinit.d/") {
        "dinit".into()
    } else {
        "service".into()
    }
}

/// systemd is the init system: `systemctl` is installed and systemd's runtime directory exists.
fn is_systemd_managed(ctx: &Ctx) -> bool {
    ctx.find_bin("systemctl").is_some()
        && [
            "/run/systemd/system/",
            "/dev/.run/systemd/",
            "/dev/.systemd/",
        ]
        .iter()
        .any(|canary| ctx.exists(canary))
}

/// `systemd`: Ansible parses `systemctl --version`. Both lines it prints are string constants
/// compiled into `systemctl` (`systemd 252 (252.39-1)` and the feature list), so they are read
/// from the program instead of running it.
pub fn systemd(ctx: &mut Ctx) {
    if !is_systemd_managed(ctx) {
        return;
    }
    let Some(systemctl) = ctx.find_bin("systemctl") else {
        return;
    };
    let Some(binary) = ctx.read_bytes(&systemctl) else {
        return;
    };
    match (version_line(&binary), features_line(&binary)) {
        (Some(version), Some(features)) => {
            ctx.set(
                "systemd",
                json!({ "features": features, "version": version }),
            );
        }
        _ => ctx.warn(format!(
            "systemd: the version and feature strings were not found in {systemctl}"
        )),
    }
}

/// NUL-terminated strings of printable text in a binary.
fn strings(bytes: &[u8]) -> impl Iterator<Item = &str> {
    bytes
        .split(|b| *b == 0)
        .filter_map(|s| std::str::from_utf8(s).ok())
}

/// `systemd 252 (252.39-1~deb12u2)` gives 252.
fn version_line(bytes: &[u8]) -> Option<u64> {
    strings(bytes).find_map(|s| {
        let rest = s.strip_prefix("systemd ")?;
        let (number, tail) = rest.split_once(' ')?;
        tail.starts_with('(').then(|| number.parse().ok()).flatten()
    })
}

/// The feature list (`+PAM +AUDIT ... default-hierarchy=unified`).
fn features_line(bytes: &[u8]) -> Option<String> {
    strings(bytes)
        .find(|s| (s.starts_with("+PAM ") || s.starts_with("-PAM ")) && s.len() > 20)
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_the_version_and_feature_strings() {
        let blob = b"junk\0systemd %s\0systemd 252 (252.39-1~deb12u2)\0+PAM +AUDIT -SELINUX +APPARMOR default-hierarchy=unified\0more";
        assert_eq!(super::version_line(blob), Some(252));
        assert_eq!(
            super::features_line(blob).unwrap(),
            "+PAM +AUDIT -SELINUX +APPARMOR default-hierarchy=unified"
        );
        assert!(super::features_line(b"nothing here").is_none());
    }
}
