//! The bundled `host-facts` plugin run by the real `factbuoy` binary: its output is valid
//! against the published schema (`plugins/host-facts/schema/host-facts.v1.json`) on this host,
//! on a host root of corrupt files, and on a Kubernetes node's files.

use crate::support;

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

fn schema() -> Value {
    let path = support::workspace().join("plugins/host-facts/schema/host-facts.v1.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

/// The schema's errors for `facts`, one line each.
fn schema_errors(facts: &Value) -> Vec<String> {
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema())
        .expect("the schema itself is valid");
    validator
        .iter_errors(facts)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// Runs `factbuoy plugin run host-facts -o json` with extra arguments: report and facts.
/// `TZ` is left unset, as on most hosts.
fn run_host_facts(args: &[&str]) -> (Value, Value) {
    run_host_facts_with_tz(args, None)
}

/// Like [`run_host_facts`], with the factbuoy process's `TZ` set to `tz`.
fn run_host_facts_with_tz(args: &[&str], tz: Option<&str>) -> (Value, Value) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_factbuoy"));
    command
        .args(["plugin", "run", "host-facts", "-o", "json"])
        .args(args)
        .env("FACTBUOY_CACHE_DIR", support::cache_dir())
        .env_remove("TZ");
    if let Some(tz) = tz {
        command.env("TZ", tz);
    }
    let output = command.output().expect("running factbuoy");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}); stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert!(output.status.success(), "host-facts failed: {report}");
    let facts = report["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["name"] == "host-facts.json"))
        .map(|a| match &a["content"] {
            Value::String(text) => serde_json::from_str(text).unwrap(),
            other => other.clone(),
        })
        .expect("a host-facts.json artifact");
    (report, facts)
}

/// Run in another network namespace than the one the host's `/sys` shows (`unshare -n`, as a
/// pod without hostNetwork), the warnings name the facts that are that namespace's; in the
/// host's own namespace they say nothing of namespaces.
#[test]
fn facts_of_another_network_namespace_are_named_in_a_warning() {
    let (report, _) = run_host_facts(&[]);
    assert!(
        !report["warnings"].to_string().contains("namespace"),
        "{report}"
    );
    let unshared = Command::new("unshare")
        .arg("-n")
        .arg(env!("CARGO_BIN_EXE_factbuoy"))
        .args(["plugin", "run", "host-facts", "-o", "json"])
        .env("FACTBUOY_CACHE_DIR", support::cache_dir())
        .output()
        .unwrap();
    if !unshared.status.success() && unshared.stdout.is_empty() {
        eprintln!(
            "skipped: this machine does not allow a network namespace (unshare -n): {}",
            String::from_utf8_lossy(&unshared.stderr)
        );
        return;
    }
    let report: Value = serde_json::from_slice(&unshared.stdout).unwrap();
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("another network namespace than the host root's")
            && warnings.contains("network.default_ipv4")
            && warnings.contains("host.hostname"),
        "{warnings}"
    );
}

#[test]
fn this_hosts_facts_follow_the_schema() {
    let (_, facts) = run_host_facts(&[]);
    let errors = schema_errors(&facts);
    assert!(errors.is_empty(), "{errors:#?}");
    let mem_total_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert_eq!(facts["memory"]["total_bytes"], mem_total_kib * 1024);
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(facts["host"]["hostname"], hostname.trim());
    assert!(facts["cpu"]["threads"].as_u64().unwrap() >= 1);
    assert!(
        facts["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["mount_point"] == "/"),
        "no / in {}",
        facts["mounts"]
    );
}

#[test]
fn the_schema_rejects_what_it_should() {
    let (_, mut facts) = run_host_facts(&[]);
    facts["memory"]["total_bytes"] = json!("24 GiB");
    facts["surprise"] = json!(1);
    facts["network"]
        .as_object_mut()
        .unwrap()
        .remove("interfaces");
    let errors = schema_errors(&facts).join("\n");
    assert!(errors.contains("/memory/total_bytes"), "{errors}");
    assert!(errors.contains("surprise"), "{errors}");
    assert!(errors.contains("interfaces"), "{errors}");
}

fn put(root: &Path, path: &str, content: &[u8]) {
    let full = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(full, content).unwrap();
}

#[test]
fn corrupt_host_files_give_nulls_and_warnings_not_failures() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    put(r, "/proc/meminfo", b"MemTotal: \xff kB\nMemFree: -5 kB\n");
    put(r, "/proc/cpuinfo", b"\0\0\0\nmodel name\n");
    put(r, "/proc/uptime", b"nan nan\n");
    put(r, "/proc/stat", b"btime 99999999999999999999999\n");
    put(r, "/proc/loadavg", b"1.0 x\n");
    put(
        r,
        "/proc/self/mountinfo",
        b"garbage line\n22 1 8:1 / / rw - ext4\n",
    );
    put(r, "/proc/net/route", b"header only\n");
    put(r, "/etc/os-release", b"ID=\"never closed\n\xfe\xff\n");
    put(r, "/etc/localtime", b"not TZif");
    put(r, "/etc/resolv.conf", b"nameserver\nsearch\noptions\n");
    put(r, "/sys/devices/system/cpu/online", b"7-2\n");
    put(r, "/sys/block/sdq/size", b"-3\n");
    put(r, "/sys/class/net/eth7/mtu", b"\xff\n");
    let (report, facts) = run_host_facts(&["--root", r.to_str().unwrap()]);
    let errors = schema_errors(&facts);
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(report["warnings"].to_string().contains("TZif"), "{report}");
    assert_eq!(facts["memory"]["total_bytes"], Value::Null);
    assert_eq!(facts["system"]["uptime_seconds"], Value::Null);
    assert_eq!(facts["block_devices"][0]["name"], "sdq");
    assert_eq!(facts["block_devices"][0]["size_bytes"], Value::Null);
    assert_eq!(facts["network"]["interfaces"][0]["name"], "eth7");
    assert_eq!(facts["kubernetes"], Value::Null);
}

#[test]
fn a_kubernetes_nodes_files_describe_its_kubelet_and_runtime() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    put(
        r,
        "/var/lib/kubelet/config.yaml",
        b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerRuntimeEndpoint: unix:///run/containerd/containerd.sock\n",
    );
    put(
        r,
        "/etc/kubernetes/kubelet.conf",
        b"apiVersion: v1\nkind: Config\n",
    );
    put(
        r,
        "/etc/kubernetes/manifests/kube-apiserver.yaml",
        b"kind: Pod\n",
    );
    put(r, "/etc/kubernetes/manifests/etcd.yaml", b"kind: Pod\n");
    put(r, "/etc/containerd/config.toml", b"version = 2\n");
    put(
        r,
        "/var/lib/dpkg/status",
        b"Package: kubelet\nStatus: install ok installed\nVersion: 1.30.2-1.1\n\nPackage: containerd.io\nStatus: install ok installed\nVersion: 1.7.19-1\n",
    );
    let (_, facts) = run_host_facts(&["--root", r.to_str().unwrap()]);
    let errors = schema_errors(&facts);
    assert!(errors.is_empty(), "{errors:#?}");
    let k8s = &facts["kubernetes"];
    assert_eq!(k8s["kubelet"]["running"], false);
    assert_eq!(k8s["kubelet"]["version"], "1.30.2");
    assert_eq!(
        k8s["kubelet"]["config_path"],
        "/var/lib/kubelet/config.yaml"
    );
    assert_eq!(
        k8s["kubelet"]["kubeconfig_path"],
        "/etc/kubernetes/kubelet.conf"
    );
    assert_eq!(
        k8s["kubelet"]["container_runtime_endpoint"],
        "unix:///run/containerd/containerd.sock"
    );
    assert_eq!(k8s["container_runtime"]["name"], "containerd");
    assert_eq!(k8s["container_runtime"]["version"], "1.7.19");
    assert_eq!(
        k8s["container_runtime"]["config_path"],
        "/etc/containerd/config.toml"
    );
    assert_eq!(
        k8s["static_pod_manifests"],
        json!(["etcd.yaml", "kube-apiserver.yaml"])
    );
}

/// A host root as a DaemonSet pod sees it at `/host`: its own os-release, container marker,
/// mount table and absolute symlinks, none of which are this machine's.
#[test]
fn a_host_root_is_described_not_the_machine_running_factbuoy() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir(r.join("etc")).unwrap();
    put(
        r,
        "/usr/lib/os-release",
        b"NAME=\"Fake Linux\"\nID=fakelinux\nVERSION_ID=7\n",
    );
    std::os::unix::fs::symlink("/usr/lib/os-release", r.join("etc/os-release")).unwrap();
    put(r, "/.dockerenv", b"");
    put(
        r,
        "/usr/share/zoneinfo/Europe/Paris",
        include_bytes!("../../guest-sdk/testdata/zoneinfo/Europe/Paris"),
    );
    std::os::unix::fs::symlink("/usr/share/zoneinfo/Europe/Paris", r.join("etc/localtime"))
        .unwrap();
    put(
        r,
        "/run/systemd/resolve/stub-resolv.conf",
        b"nameserver 192.0.2.53\n",
    );
    std::os::unix::fs::symlink(
        "/run/systemd/resolve/stub-resolv.conf",
        r.join("etc/resolv.conf"),
    )
    .unwrap();
    std::fs::create_dir(r.join("only-here")).unwrap();
    put(
        r,
        "/proc/self/mountinfo",
        b"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n23 22 8:2 / /only-here rw - ext4 /dev/sda2 rw\n\
          24 22 8:3 / /not-below-the-root rw - ext4 /dev/sda3 rw\n",
    );
    let root_arg = r.to_str().unwrap();
    let (report, facts) = run_host_facts(&["--root", root_arg]);
    let errors = schema_errors(&facts);
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(facts["os"]["id"], "fakelinux");
    assert_eq!(facts["os"]["name"], "Fake Linux");
    assert_eq!(
        facts["virtualization"]["container"], true,
        "{}",
        facts["virtualization"]
    );
    assert_eq!(
        facts["network"]["dns"]["nameservers"],
        json!(["192.0.2.53"]),
        "{report}"
    );
    assert_eq!(facts["time"]["timezone"], "Europe/Paris", "{report}");
    // statvfs below the root: a mount point that exists there has a size, one that does not
    // has none (though this machine has `/`).
    let usage = |point: &str| {
        facts["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["mount_point"] == point)
            .map(|m| m["usage"].clone())
            .unwrap_or_else(|| panic!("no {point} in {}", facts["mounts"]))
    };
    assert!(usage("/")["total_bytes"].as_u64().unwrap() > 0);
    assert!(usage("/only-here")["total_bytes"].as_u64().unwrap() > 0);
    assert_eq!(usage("/not-below-the-root"), Value::Null);

    // The factbuoy process's TZ comes first, as for the C library.
    let (_, facts) = run_host_facts_with_tz(&["--root", root_arg], Some("UTC0"));
    assert_eq!(facts["time"]["utc_offset_seconds"], 0);
    assert_eq!(facts["time"]["abbreviation"], "UTC");
    let (_, facts) = run_host_facts_with_tz(&["--root", root_arg], Some("Europe/Paris"));
    assert_eq!(facts["time"]["timezone"], "Europe/Paris");
}
