//! Virtualization and container detection, the way Ansible's `LinuxVirtual` decides it, so the
//! `setup` plugin matches Ansible and `host-facts` inherits a well-tested heuristic.
//!
//! The first technology found sets the type and role; every technology seen is listed as a
//! guest or host technology. What Ansible learns by running `dmidecode` or `lscpu` is not
//! available inside the sandbox; the sysfs DMI files cover `dmidecode` on current kernels.

use std::collections::BTreeSet;

use crate::hostfs::HostFs;

/// What the host runs on and what it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Virtualization {
    /// `kvm`, `docker`, `VMware`, ... or `NA`.
    pub kind: String,
    /// `guest`, `host`, `LPAR` or `NA`.
    pub role: String,
    pub guest_tech: BTreeSet<String>,
    pub host_tech: BTreeSet<String>,
}

/// Detects virtualization. `markers` are the root marker paths that exist (from
/// `host_info::existing_markers`: `/.dockerenv`, `/dev/kvm`, ...).
pub fn detect(fs: &HostFs, markers: &[String]) -> Virtualization {
    let mut d = Detector::default();
    let has_marker = |path: &str| markers.iter().any(|m| m == path);

    for line in lines(fs, "/proc/1/cgroup") {
        if contains_docker_scope(&line) {
            d.guest("docker", "guest");
        }
        if line.contains("/lxc/") || line.contains("/machine.slice/machine-lxc") {
            d.guest("lxc", "guest");
        }
        if line.contains("/system.slice/containerd.service") {
            d.guest("containerd", "guest");
        }
    }
    if fs.exists("/proc/vz") && !fs.exists("/proc/lve") {
        d.kind = Some("openvz".into());
        if fs.exists("/proc/bc") {
            d.host_tech.insert("openvz".into());
            d.role_if_unfound("host");
        } else {
            d.guest_tech.insert("openvz".into());
            d.role_if_unfound("guest");
        }
        d.found = true;
    }
    let systemd_container = fs
        .read_optional("/run/systemd/container")
        .filter(|c| !c.is_empty());
    // Ansible reads `container=` from process 1's environment, which the sandbox never shows;
    // systemd (and systemd-detect-virt) keeps that value in /run/systemd/container, and podman
    // marks its containers with /run/.containerenv.
    if let Some(container) = &systemd_container {
        d.guest(container, "guest");
    }
    if fs.exists("/run/.containerenv") {
        d.guest("podman", "guest");
    }
    if has_marker("/.dockerenv") || has_marker("/.dockerinit") {
        d.guest("docker", "guest");
    }
    let container_techs = ["docker", "lxc", "podman", "openvz", "containerd"];
    if container_techs.iter().any(|t| d.guest_tech.contains(*t)) || systemd_container.is_some() {
        d.guest_tech.insert("container".into());
    }

    if fs.exists("/proc/xen") {
        let is_xen_host = lines(fs, "/proc/xen/capabilities").any(|l| l.contains("control_d"));
        if is_xen_host {
            d.host_tech.insert("xen".into());
            d.set_if_unfound("xen", "host");
        } else {
            d.set_if_unfound("xen", "guest");
        }
        d.found = true;
    }

    // Ansible sets the role to guest here and takes it back below if nothing is found.
    if !d.found {
        d.role = Some("guest".into());
    }
    let dmi = |name: &str| fs.read_optional(&format!("/sys/devices/virtual/dmi/id/{name}"));
    let product_name = dmi("product_name");
    let sys_vendor = dmi("sys_vendor");
    let product_family = dmi("product_family");
    let product = product_name.as_deref().unwrap_or("");
    let vendor = sys_vendor.as_deref().unwrap_or("");
    if [
        "KVM",
        "KVM Server",
        "Bochs",
        "AHV",
        "CloudStack KVM Hypervisor",
    ]
    .contains(&product)
    {
        d.guest_kind("kvm");
    }
    if vendor == "oVirt" {
        d.guest_kind("oVirt");
    }
    if vendor == "Red Hat" {
        if product_family.as_deref() == Some("RHV") {
            d.guest_kind("RHV");
        } else if product == "RHEV Hypervisor" {
            d.guest_kind("RHEV");
        }
    }
    if product.starts_with("VMware") {
        d.guest_kind("VMware");
    }
    if ["OpenStack Compute", "OpenStack Nova"].contains(&product) {
        d.guest_kind("openstack");
    }
    let bios_vendor = dmi("bios_vendor");
    match bios_vendor.as_deref() {
        Some("Xen") => d.guest_kind("xen"),
        Some("innotek GmbH") => d.guest_kind("virtualbox"),
        Some("Amazon EC2" | "DigitalOcean" | "Hetzner" | "Linode") => d.guest_kind("kvm"),
        _ => {}
    }
    let kvm_vendors = [
        "QEMU",
        "Amazon EC2",
        "DigitalOcean",
        "Google",
        "Scaleway",
        "Nutanix",
    ];
    if kvm_vendors.contains(&vendor) {
        d.guest_kind("kvm");
    }
    match vendor {
        "KubeVirt" => d.guest_kind("KubeVirt"),
        "Microsoft Corporation" => d.guest_kind("VirtualPC"),
        "Parallels Software International Inc." => d.guest_kind("parallels"),
        "OpenStack Foundation" => d.guest_kind("openstack"),
        _ => {}
    }
    if !d.found {
        d.role = None;
    }

    for line in lines(fs, "/proc/self/status") {
        let Some(id) = line.strip_prefix("VxID:").map(str::trim) else {
            continue;
        };
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if !d.found {
            d.kind = Some("linux_vserver".into());
        }
        if id.starts_with('0') {
            d.host_tech.insert("linux_vserver".into());
            d.role_if_unfound("host");
        } else {
            d.guest_tech.insert("linux_vserver".into());
            d.role_if_unfound("guest");
        }
        d.found = true;
    }

    for line in lines(fs, "/proc/cpuinfo") {
        let tech = if line.starts_with("model name") && line.contains("QEMU Virtual CPU") {
            "kvm"
        } else if line.starts_with("vendor_id") && line.contains("User Mode Linux")
            || line.starts_with("model name") && line.contains("UML")
        {
            "uml"
        } else if line.starts_with("machine")
            && line.contains("CHRP IBM pSeries (emulated by qemu)")
        {
            "kvm"
        } else if line.starts_with("vendor_id") && line.contains("PowerVM Lx86") {
            "powervm_lx86"
        } else if line.starts_with("vendor_id") && line.contains("IBM/S390") {
            // Ansible asks lscpu for the hypervisor first; without it, this is its answer.
            d.guest_tech.insert("PR/SM".into());
            d.guest_tech.insert("ibm_systemz".into());
            if !d.found {
                d.kind = Some("ibm_systemz".into());
            }
            d.role_if_unfound("guest");
            d.found = true;
            continue;
        } else {
            continue;
        };
        d.guest_tech.insert(tech.into());
        d.set_if_unfound(tech, "guest");
        d.found = true;
    }

    let modules: Vec<String> = lines(fs, "/proc/modules")
        .filter_map(|l| l.split(' ').next().map(str::to_owned))
        .collect();
    if modules.iter().any(|m| m == "kvm") {
        d.host_tech.insert("kvm".into());
        d.set_if_unfound("kvm", "host");
        if fs.is_dir("/rhev") && vdsm_running(fs) {
            d.host_tech.insert("RHEV".into());
            if !d.found {
                d.kind = Some("RHEV".into());
            }
        }
        d.found = true;
    }
    if modules.iter().any(|m| m == "vboxdrv") {
        d.host_tech.insert("virtualbox".into());
        d.set_found_if_unfound("virtualbox", "host");
    }
    if modules.iter().any(|m| m == "virtio") {
        d.host_tech.insert("kvm".into());
        d.set_found_if_unfound("kvm", "guest");
    }
    if has_marker("/dev/kvm") {
        d.host_tech.insert("kvm".into());
        d.set_found_if_unfound("kvm", "host");
    }

    Virtualization {
        kind: d.kind.unwrap_or_else(|| "NA".into()),
        role: if d.found {
            d.role.unwrap_or_default()
        } else {
            "NA".into()
        },
        guest_tech: d.guest_tech,
        host_tech: d.host_tech,
    }
}

/// Ansible's `/docker(/|-[0-9a-f]+\.scope)` on a `/proc/1/cgroup` line.
fn contains_docker_scope(line: &str) -> bool {
    line.match_indices("/docker").any(|(at, _)| {
        let rest = &line[at + "/docker".len()..];
        rest.starts_with('/')
            || rest.strip_prefix('-').is_some_and(|id| {
                let hex = id.chars().take_while(|c| c.is_ascii_hexdigit()).count();
                hex > 0 && id[hex..].starts_with(".scope")
            })
    })
}

/// Whether a process named `vdsm` or `vdsmd` runs (RHEV hosts).
fn vdsm_running(fs: &HostFs) -> bool {
    let Ok(entries) = fs.read_dir("/proc") else {
        return false;
    };
    entries
        .iter()
        .filter(|e| e.chars().all(|c| c.is_ascii_digit()))
        .filter_map(|pid| fs.read_optional(&format!("/proc/{pid}/comm")))
        .any(|comm| comm == "vdsm" || comm == "vdsmd")
}

fn lines(fs: &HostFs, path: &str) -> impl Iterator<Item = String> {
    fs.read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect::<Vec<_>>()
        .into_iter()
}

/// Ansible's running state: the first finding sets type and role.
#[derive(Default)]
struct Detector {
    found: bool,
    kind: Option<String>,
    role: Option<String>,
    guest_tech: BTreeSet<String>,
    host_tech: BTreeSet<String>,
}

impl Detector {
    /// A guest technology that settles type and role if nothing did before.
    fn guest(&mut self, tech: &str, role: &str) {
        self.guest_tech.insert(tech.to_owned());
        self.set_found_if_unfound(tech, role);
    }

    /// A guest technology from DMI: sets only the type (the role is already `guest`).
    fn guest_kind(&mut self, tech: &str) {
        self.guest_tech.insert(tech.to_owned());
        if !self.found {
            self.kind = Some(tech.to_owned());
            self.found = true;
        }
    }

    fn set_found_if_unfound(&mut self, kind: &str, role: &str) {
        if !self.found {
            self.set_if_unfound(kind, role);
            self.found = true;
        }
    }

    fn set_if_unfound(&mut self, kind: &str, role: &str) {
        if !self.found {
            self.kind = Some(kind.to_owned());
            self.role = Some(role.to_owned());
        }
    }

    fn role_if_unfound(&mut self, role: &str) {
        if !self.found {
            self.role = Some(role.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(files: &[(&str, &str)]) -> (tempfile::TempDir, HostFs) {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let full = dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, content).unwrap();
        }
        let fs = HostFs::with_root(dir.path());
        (dir, fs)
    }

    #[test]
    fn docker_marker_inside_a_kvm_host() {
        let (_d, fs) = host(&[
            ("/proc/1/cgroup", "0::/\n"),
            ("/proc/cpuinfo", "model name\t: Intel\n"),
        ]);
        let v = detect(&fs, &["/.dockerenv".into(), "/dev/kvm".into()]);
        assert_eq!((v.kind.as_str(), v.role.as_str()), ("docker", "guest"));
        assert_eq!(
            v.guest_tech,
            BTreeSet::from(["docker".into(), "container".into()])
        );
        assert_eq!(v.host_tech, BTreeSet::from(["kvm".into()]));
    }

    #[test]
    fn kvm_guest_by_dmi_and_bare_metal() {
        let (_d, fs) = host(&[("/sys/devices/virtual/dmi/id/sys_vendor", "QEMU\n")]);
        let v = detect(&fs, &[]);
        assert_eq!((v.kind.as_str(), v.role.as_str()), ("kvm", "guest"));
        let (_d, fs) = host(&[("/sys/devices/virtual/dmi/id/sys_vendor", "Dell Inc.\n")]);
        let v = detect(&fs, &[]);
        assert_eq!((v.kind.as_str(), v.role.as_str()), ("NA", "NA"));
        assert!(v.guest_tech.is_empty() && v.host_tech.is_empty());
    }

    #[test]
    fn container_env_and_cgroup_patterns() {
        let (_d, fs) = host(&[("/run/.containerenv", "engine=\"podman-4.9\"\n")]);
        let v = detect(&fs, &[]);
        assert_eq!(v.kind, "podman");
        assert!(v.guest_tech.contains("container"));
        let (_d, fs) = host(&[("/run/systemd/container", "lxc\n")]);
        let v = detect(&fs, &[]);
        assert_eq!(v.kind, "lxc");
        assert!(v.guest_tech.contains("container"));
        assert!(contains_docker_scope("0::/system.slice/docker-0af3.scope"));
        assert!(contains_docker_scope("12:pids:/docker/abc"));
        assert!(!contains_docker_scope("0::/dockerd"));
    }
}
