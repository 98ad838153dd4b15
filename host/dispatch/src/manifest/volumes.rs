//! The agents' view of the host: each host directory a run's grants need, mounted read-only
//! under `/host`, never the host's `/` as a whole (on 1.20 a read-only hostPath is not
//! recursively read-only: its submounts, `/dev/shm` among them, would stay writable). Plus the
//! emptyDirs that hold what containers write, and the projected ServiceAccount token.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, EmptyDirVolumeSource, HostPathVolumeSource, KeyToPath,
    PersistentVolumeClaimVolumeSource, ProjectedVolumeSource, SecretVolumeSource,
    ServiceAccountTokenProjection, Volume, VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::names::TOKEN_EXPIRATION_SECONDS;

/// Where the host's directories appear in an agent container (the agent's `--root`).
pub const HOST_ROOT: &str = "/host";
/// Top-level host directories an agent may mount. Each exists on every Linux node, so a
/// `type: Directory` hostPath never keeps a pod from starting; a plugin that asks for a path
/// below one that is missing on some node sees it absent, as on any host.
pub const MOUNTABLE: &[&str] = &[
    "/bin", "/boot", "/etc", "/lib", "/opt", "/proc", "/run", "/sbin", "/srv", "/sys", "/usr",
    "/var",
];
/// What the `host-info` capability reads below the root: os-release (`/etc`, `/usr`) and the
/// mount table (`/proc`).
pub const HOST_INFO_ROOTS: &[&str] = &["/etc", "/proc", "/usr"];
/// Size limit of the agent's spool emptyDir.
pub const SPOOL_SIZE_LIMIT: &str = "1Gi";

/// A host path that is not a normalised absolute path (grants are normalised when parsed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("host path {0:?} is not a normalised absolute path")]
pub struct NotAbsolute(pub String);

/// The host directories a run mounts, and the granted paths it leaves out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostDirs {
    /// Top-level directories to mount, sorted, each once.
    pub mounted: Vec<String>,
    /// Granted paths below no directory of [`MOUNTABLE`] (`/dev/disk`, `/home/x`, `/` itself):
    /// plugins see them absent. `/dev` is never mounted: `/dev/shm` is world-writable and would
    /// stay writable below a read-only mount on 1.20.
    pub left_out: Vec<String>,
}

/// The top-level host directories to mount for a run whose plugins read `read_paths` (their
/// effective read grants) and, if `host_info`, use the `host-info` capability.
pub fn host_dirs(read_paths: &[String], host_info: bool) -> Result<HostDirs, NotAbsolute> {
    let mut mounted = BTreeSet::new();
    let mut left_out = BTreeSet::new();
    if host_info {
        mounted.extend(HOST_INFO_ROOTS.iter().map(|d| (*d).to_owned()));
    }
    for path in read_paths {
        if !path.starts_with('/') || path.split('/').any(|p| p == "." || p == "..") {
            return Err(NotAbsolute(path.clone()));
        }
        match path.split('/').find(|p| !p.is_empty()) {
            Some(top) if MOUNTABLE.contains(&format!("/{top}").as_str()) => {
                mounted.insert(format!("/{top}"));
            }
            _ => {
                left_out.insert(path.clone());
            }
        }
    }
    Ok(HostDirs {
        mounted: mounted.into_iter().collect(),
        left_out: left_out.into_iter().collect(),
    })
}

/// The volume name of host directory `dir` (`/var` → `host-var`).
fn host_volume_name(dir: &str) -> String {
    format!("host-{}", dir.trim_start_matches('/'))
}

/// hostPath volumes (type `Directory`) and read-only mounts at `/host/<dir>` for `dirs`.
pub fn host_mounts(dirs: &[String]) -> (Vec<Volume>, Vec<VolumeMount>) {
    dirs.iter()
        .map(|dir| {
            let name = host_volume_name(dir);
            let volume = Volume {
                name: name.clone(),
                host_path: Some(HostPathVolumeSource {
                    path: dir.clone(),
                    type_: Some("Directory".to_owned()),
                }),
                ..Volume::default()
            };
            let mount = VolumeMount {
                name,
                mount_path: format!("{HOST_ROOT}{dir}"),
                read_only: Some(true),
                ..VolumeMount::default()
            };
            (volume, mount)
        })
        .unzip()
}

/// Refuses a cache directory that is not a normalised absolute path below `/`.
pub fn check_cache_dir(dir: &str) -> Result<(), NotAbsolute> {
    let normal = dir.starts_with('/')
        && dir.len() > 1
        && !dir.ends_with('/')
        && dir
            .split('/')
            .skip(1)
            .all(|p| !p.is_empty() && p != "." && p != "..");
    if normal {
        Ok(())
    } else {
        Err(NotAbsolute(dir.to_owned()))
    }
}

/// The node's compiled-plugin cache: hostPath `dir` of type `DirectoryOrCreate` (the kubelet
/// makes it, root's and 0755, the first time; the init container then gives it to the agents'
/// user), mounted writable at `mount`.
pub fn agent_cache(dir: &str, mount: &str) -> (Volume, VolumeMount) {
    (
        Volume {
            name: "cache".to_owned(),
            host_path: Some(HostPathVolumeSource {
                path: dir.to_owned(),
                type_: Some("DirectoryOrCreate".to_owned()),
            }),
            ..Volume::default()
        },
        self::mount("cache", mount, false),
    )
}

/// Volume `name`'s mount at `path`.
fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

/// PersistentVolumeClaim `claim` as volume `name`, mounted writable at `path`.
pub fn claim(name: &str, claim: &str, path: &str) -> (Volume, VolumeMount) {
    (
        Volume {
            name: name.to_owned(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.to_owned(),
                read_only: None,
            }),
            ..Volume::default()
        },
        mount(name, path, false),
    )
}

/// An emptyDir volume `name` (with a size limit if given) and its writable mount at `path`.
pub fn empty_dir(name: &str, path: &str, size_limit: Option<&str>) -> (Volume, VolumeMount) {
    (
        Volume {
            name: name.to_owned(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: None,
                size_limit: size_limit.map(|s| Quantity(s.to_owned())),
            }),
            ..Volume::default()
        },
        mount(name, path, false),
    )
}

/// ConfigMap `config_map` as volume `name`, mounted read-only at `path`.
pub fn config_map(name: &str, config_map: &str, path: &str) -> (Volume, VolumeMount) {
    (
        Volume {
            name: name.to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_map.to_owned(),
                optional: Some(false),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        mount(name, path, true),
    )
}

/// Key `key` of Secret `secret` as file `file` of volume `name`, mounted read-only at `path`
/// (0440: the pod's user reads it through its group, nobody else).
pub fn secret_file(
    name: &str,
    secret: &str,
    (key, file): (&str, &str),
    path: &str,
) -> (Volume, VolumeMount) {
    (
        Volume {
            name: name.to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.to_owned()),
                items: Some(vec![KeyToPath {
                    key: key.to_owned(),
                    path: file.to_owned(),
                    mode: None,
                }]),
                default_mode: Some(0o440),
                optional: Some(false),
            }),
            ..Volume::default()
        },
        mount(name, path, true),
    )
}

/// The projected ServiceAccount token for `audience`, mounted read-only so that it appears at
/// `token_path` (whose file name is the token's).
pub fn projected_token(audience: &str, token_path: &str) -> (Volume, VolumeMount) {
    let (dir, file) = token_path
        .rsplit_once('/')
        .expect("the token path is absolute");
    (
        Volume {
            name: "token".to_owned(),
            projected: Some(ProjectedVolumeSource {
                default_mode: None,
                sources: Some(vec![VolumeProjection {
                    service_account_token: Some(ServiceAccountTokenProjection {
                        audience: Some(audience.to_owned()),
                        expiration_seconds: Some(TOKEN_EXPIRATION_SECONDS),
                        path: file.to_owned(),
                    }),
                    ..VolumeProjection::default()
                }]),
            }),
            ..Volume::default()
        },
        mount("token", dir, true),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn grants_map_to_their_top_level_directory() {
        let dirs = host_dirs(
            &paths(&["/var/log/journal", "/proc/sys/kernel/random", "/sys"]),
            false,
        )
        .unwrap();
        assert_eq!(dirs.mounted, ["/proc", "/sys", "/var"]);
        let dirs = host_dirs(&paths(&["/run/log/journal"]), true).unwrap();
        assert_eq!(dirs.mounted, ["/etc", "/proc", "/run", "/usr"]);
        let (volumes, mounts) = host_mounts(&dirs.mounted);
        assert_eq!(mounts[0].mount_path, "/host/etc");
        assert!(mounts.iter().all(|m| m.read_only == Some(true)));
        assert!(
            volumes
                .iter()
                .all(|v| v.host_path.as_ref().unwrap().type_.as_deref() == Some("Directory"))
        );
    }

    #[test]
    fn root_and_dev_are_left_out_and_relative_paths_refused() {
        let dirs = host_dirs(&paths(&["/", "/dev/disk", "/home/x", "/etc"]), false).unwrap();
        assert_eq!(dirs.mounted, ["/etc"]);
        assert_eq!(dirs.left_out, ["/", "/dev/disk", "/home/x"]);
        assert!(host_dirs(&paths(&["etc"]), false).is_err());
        assert!(host_dirs(&paths(&["/etc/../dev"]), false).is_err());
    }
}
