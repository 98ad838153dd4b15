//! Kubernetes node detection: the kubelet (a running process, or its configuration on disk),
//! its configuration paths, and the container runtime behind it.
//!
//! Versions come from the package database (dpkg); the sandbox cannot run `kubelet
//! --version`, so a kubelet installed from a tarball or bundled in k3s has a `null` version.

use std::collections::BTreeMap;

use factbuoy_guest::hostfs::basename;

use crate::model::{ContainerRuntime, Kubelet, Kubernetes};
use crate::read::Reader;

const KUBELET_CONFIG: &str = "/var/lib/kubelet/config.yaml";
const KUBELET_KUBECONFIG: &str = "/etc/kubernetes/kubelet.conf";
const MANIFESTS: &str = "/etc/kubernetes/manifests";
const DPKG_STATUS: &str = "/var/lib/dpkg/status";

/// A container runtime the kubelet may use, and where to find it.
struct Runtime {
    name: &'static str,
    /// Its daemon's process name.
    process: &'static str,
    /// Words in a CRI endpoint that name it.
    endpoint_words: &'static [&'static str],
    sockets: &'static [&'static str],
    configs: &'static [&'static str],
    packages: &'static [&'static str],
}

const RUNTIMES: &[Runtime] = &[
    Runtime {
        name: "containerd",
        process: "containerd",
        endpoint_words: &["containerd"],
        sockets: &[
            "/run/containerd/containerd.sock",
            "/run/k3s/containerd/containerd.sock",
        ],
        configs: &["/etc/containerd/config.toml"],
        packages: &["containerd.io", "containerd"],
    },
    Runtime {
        name: "cri-o",
        process: "crio",
        endpoint_words: &["crio"],
        sockets: &["/run/crio/crio.sock"],
        configs: &["/etc/crio/crio.conf"],
        packages: &["cri-o"],
    },
    Runtime {
        name: "docker",
        process: "dockerd",
        endpoint_words: &["dockershim", "cri-dockerd", "docker"],
        sockets: &["/run/cri-dockerd.sock", "/run/docker.sock"],
        configs: &["/etc/docker/daemon.json"],
        packages: &["docker-ce", "docker.io"],
    },
];

/// One running process: what it runs and its arguments.
struct Process {
    comm: String,
    args: Vec<String>,
}

pub fn collect(r: &Reader) -> Option<Kubernetes> {
    let processes = processes(r);
    let kubelet_process = processes.iter().find(|p| is_kubelet(&p.args));
    let config_on_disk = r.fs.exists(KUBELET_CONFIG) || r.fs.exists(KUBELET_KUBECONFIG);
    if kubelet_process.is_none() && !config_on_disk {
        return None;
    }
    let flag = |name: &str| kubelet_process.and_then(|p| flag_value(&p.args, name));
    let existing = |path: &str| r.fs.exists(path).then(|| path.to_owned());
    let config_path = flag("--config").or_else(|| existing(KUBELET_CONFIG));
    let endpoint = flag("--container-runtime-endpoint").or_else(|| {
        let config = r.text(config_path.as_deref()?)?;
        yaml_scalar(&config, "containerRuntimeEndpoint")
    });
    let packages = r
        .text(DPKG_STATUS)
        .map(|t| dpkg_versions(&t))
        .unwrap_or_default();
    let kubelet_version = packages.get("kubelet").cloned();

    let mut manifests = r.list(MANIFESTS);
    manifests.sort();
    Some(Kubernetes {
        kubelet: Kubelet {
            running: kubelet_process.is_some(),
            version_source: kubelet_version.as_ref().map(|_| "dpkg".to_owned()),
            version: kubelet_version,
            binary_path: kubelet_process.and_then(|p| p.args.first().cloned()),
            kubeconfig_path: flag("--kubeconfig").or_else(|| existing(KUBELET_KUBECONFIG)),
            config_path,
            container_runtime_endpoint: endpoint.clone(),
        },
        container_runtime: container_runtime(r, endpoint.as_deref(), &processes, &packages),
        static_pod_manifests: manifests,
    })
}

/// The kubelet itself, or a distribution that embeds it (k3s, MicroK8s' kubelite).
fn is_kubelet(args: &[String]) -> bool {
    let Some(program) = args.first().map(|a| basename(a).to_owned()) else {
        return false;
    };
    program == "kubelet"
        || program == "kubelite"
        || program == "k3s" && args.iter().any(|a| a == "server" || a == "agent")
}

fn container_runtime(
    r: &Reader,
    endpoint: Option<&str>,
    processes: &[Process],
    packages: &BTreeMap<String, String>,
) -> Option<ContainerRuntime> {
    let socket_of_endpoint = endpoint.map(|e| e.trim_start_matches("unix://").to_owned());
    let named_by_endpoint = socket_of_endpoint.as_deref().and_then(|socket| {
        RUNTIMES
            .iter()
            .find(|rt| rt.endpoint_words.iter().any(|w| socket.contains(w)))
    });
    let runtime = named_by_endpoint.or_else(|| {
        RUNTIMES
            .iter()
            .find(|rt| rt.sockets.iter().any(|s| r.fs.exists(s)))
    })?;
    let version = runtime
        .packages
        .iter()
        .find_map(|p| packages.get(*p).cloned());
    Some(ContainerRuntime {
        name: runtime.name.to_owned(),
        version_source: version.as_ref().map(|_| "dpkg".to_owned()),
        version,
        socket_path: socket_of_endpoint.or_else(|| {
            runtime
                .sockets
                .iter()
                .find(|s| r.fs.exists(s))
                .map(|s| s.to_string())
        }),
        config_path: runtime
            .configs
            .iter()
            .find(|c| r.fs.exists(c))
            .map(|c| c.to_string()),
        running: processes.iter().any(|p| p.comm == runtime.process),
    })
}

/// Process names (`comm`) that may be a kubelet; only their command lines are read.
const KUBELET_COMMS: &[&str] = &["kubelet", "kubelite", "k3s", "k3s-server", "k3s-agent"];

/// Every process's name, with the arguments of those that may be a kubelet, from `/proc`.
fn processes(r: &Reader) -> Vec<Process> {
    r.list("/proc")
        .into_iter()
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|pid| {
            // Processes come and go while we read: a vanished one is simply skipped.
            let comm = r.fs.read_optional(&format!("/proc/{pid}/comm"))?;
            let args = if KUBELET_COMMS.contains(&comm.as_str()) {
                let cmdline =
                    r.fs.read_limited(&format!("/proc/{pid}/cmdline"), 1 << 20)
                        .unwrap_or_default();
                cmdline
                    .split(|b| *b == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            } else {
                Vec::new()
            };
            Some(Process { comm, args })
        })
        .collect()
}

/// `--name=value` or `--name value`.
fn flag_value(args: &[String], name: &str) -> Option<String> {
    args.iter().enumerate().find_map(|(i, arg)| {
        if let Some(value) = arg
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('='))
        {
            Some(value.to_owned())
        } else if arg == name {
            args.get(i + 1).cloned()
        } else {
            None
        }
    })
}

/// A top-level `key: value` of a YAML file, unquoted (enough for the kubelet's config).
fn yaml_scalar(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix(':')?.trim();
        let value = value.trim_matches(|c| c == '"' || c == '\'');
        (!value.is_empty()).then(|| value.to_owned())
    })
}

/// Installed packages and their upstream versions (no epoch, no Debian revision), from dpkg's
/// status file.
fn dpkg_versions(status: &str) -> BTreeMap<String, String> {
    let mut versions = BTreeMap::new();
    for stanza in status.split("\n\n") {
        let field = |name: &str| {
            stanza
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        let installed = field("Status").is_some_and(|s| s.ends_with(" installed"));
        if let (Some(package), Some(version), true) =
            (field("Package"), field("Version"), installed)
        {
            let upstream = version.split_once(':').map_or(version, |(_, v)| v);
            let upstream = upstream.rsplit_once('-').map_or(upstream, |(v, _)| v);
            versions.insert(package.to_owned(), upstream.to_owned());
        }
    }
    versions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn kubelet_flags_and_identity() {
        let a = args(&[
            "/usr/bin/kubelet",
            "--config=/var/lib/kubelet/config.yaml",
            "--kubeconfig",
            "/etc/kubernetes/kubelet.conf",
        ]);
        assert!(is_kubelet(&a));
        assert_eq!(
            flag_value(&a, "--config").as_deref(),
            Some("/var/lib/kubelet/config.yaml")
        );
        assert_eq!(
            flag_value(&a, "--kubeconfig").as_deref(),
            Some("/etc/kubernetes/kubelet.conf")
        );
        assert_eq!(flag_value(&a, "--missing"), None);
        assert!(is_kubelet(&args(&["/usr/local/bin/k3s", "agent"])));
        assert!(!is_kubelet(&args(&["/usr/local/bin/k3s", "kubectl"])));
        assert!(!is_kubelet(&args(&["/usr/bin/kubelet-helper"])));
    }

    #[test]
    fn config_scalars_and_package_versions() {
        let config = "apiVersion: kubelet.config.k8s.io/v1beta1\ncontainerRuntimeEndpoint: \"unix:///run/containerd/containerd.sock\"\n";
        assert_eq!(
            yaml_scalar(config, "containerRuntimeEndpoint").as_deref(),
            Some("unix:///run/containerd/containerd.sock")
        );
        let status = "Package: kubelet\nStatus: install ok installed\nVersion: 1.30.2-1.1\n\nPackage: containerd.io\nStatus: install ok installed\nVersion: 1:1.7.19-1\n\nPackage: gone\nStatus: deinstall ok config-files\nVersion: 1.0\n";
        let v = dpkg_versions(status);
        assert_eq!(v["kubelet"], "1.30.2");
        assert_eq!(v["containerd.io"], "1.7.19");
        assert!(!v.contains_key("gone"));
    }
}
