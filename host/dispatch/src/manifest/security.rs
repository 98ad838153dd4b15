//! Security contexts: every factbuoy container runs as a fixed non-root user with no
//! capabilities, no privilege escalation, a read-only root file system and the runtime's default
//! seccomp profile. Such a pod meets the Pod Security *restricted* profile, except that the agents
//! mount host paths (read-only) and, unless a run turns it off, share their node's network
//! namespace (`hostNetwork`) and have an init container that gives the node's cache directory to
//! their user ([`cache_owner_security_context`]): [`restricted_violations`] checks each rule.

use k8s_openapi::api::core::v1::{
    Capabilities, PodSecurityContext, PodSpec, SeccompProfile, SecurityContext,
};

use crate::names::RUN_AS_ID;

/// The pod-level context: non-root user and group [`RUN_AS_ID`] (at pod level so that the
/// kubelet gives that user the projected token and emptyDirs), RuntimeDefault seccomp.
pub fn pod_security_context() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(RUN_AS_ID),
        run_as_group: Some(RUN_AS_ID),
        fs_group: Some(RUN_AS_ID),
        seccomp_profile: Some(runtime_default()),
        ..PodSecurityContext::default()
    }
}

/// The container-level context: not privileged, no escalation, every capability dropped, a
/// read-only root file system.
pub fn container_security_context() -> SecurityContext {
    SecurityContext {
        privileged: Some(false),
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            add: None,
        }),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        seccomp_profile: Some(runtime_default()),
        ..SecurityContext::default()
    }
}

/// The context of the agents' `cache-owner` init container, which makes the node's cache
/// directory the agents' (mode 0700) before they start: root, since the kubelet creates a
/// hostPath directory as root, but with only CAP_CHOWN and CAP_FOWNER (chown, then chmod a
/// directory it no longer owns), no other capability, no escalation, a read-only root file
/// system. It mounts only that directory and runs only `factbuoy agent prepare-cache`.
pub fn cache_owner_security_context() -> SecurityContext {
    SecurityContext {
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            add: Some(vec!["CHOWN".to_owned(), "FOWNER".to_owned()]),
        }),
        run_as_non_root: Some(false),
        run_as_user: Some(0),
        run_as_group: Some(0),
        ..container_security_context()
    }
}

fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".to_owned(),
        localhost_profile: None,
    }
}

/// The rules of the Pod Security Standards' *restricted* profile (and its *baseline* rules) that
/// `spec` breaks, hostPath volumes left aside: factbuoy's agents need those, which is why a
/// run's namespace is labelled `privileged`. Empty means compliant.
pub fn restricted_violations(spec: &PodSpec) -> Vec<String> {
    let mut broken = Vec::new();
    let mut rule = |ok: bool, what: &str| {
        if !ok {
            broken.push(what.to_owned());
        }
    };
    let pod = spec.security_context.clone().unwrap_or_default();
    rule(spec.host_network != Some(true), "hostNetwork");
    rule(spec.host_pid != Some(true), "hostPID");
    rule(spec.host_ipc != Some(true), "hostIPC");
    rule(
        pod.sysctls.as_ref().is_none_or(Vec::is_empty),
        "pod sysctls",
    );
    rule(pod.se_linux_options.is_none(), "pod seLinuxOptions");
    for volume in spec.volumes.iter().flatten() {
        // restricted allows only these volume types (hostPath is the accepted exception).
        let allowed = volume.config_map.is_some()
            || volume.empty_dir.is_some()
            || volume.projected.is_some()
            || volume.secret.is_some()
            || volume.downward_api.is_some()
            || volume.persistent_volume_claim.is_some()
            || volume.csi.is_some()
            || volume.ephemeral.is_some()
            || volume.host_path.is_some();
        rule(
            allowed,
            &format!("volume {} has a forbidden type", volume.name),
        );
    }
    let pod_non_root = pod.run_as_non_root == Some(true);
    let pod_seccomp = pod.seccomp_profile.as_ref().map(|p| p.type_.as_str());
    rule(pod.run_as_user != Some(0), "pod runAsUser 0");
    for container in spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
    {
        let name = &container.name;
        let sc = container.security_context.clone().unwrap_or_default();
        rule(sc.privileged != Some(true), &format!("{name}: privileged"));
        rule(
            sc.allow_privilege_escalation == Some(false),
            &format!("{name}: allowPrivilegeEscalation must be false"),
        );
        let caps = sc.capabilities.clone().unwrap_or_default();
        rule(
            caps.drop
                .as_ref()
                .is_some_and(|d| d.iter().any(|c| c == "ALL")),
            &format!("{name}: capabilities must drop ALL"),
        );
        rule(
            caps.add
                .as_ref()
                .is_none_or(|a| a.iter().all(|c| c == "NET_BIND_SERVICE")),
            &format!("{name}: capabilities.add beyond NET_BIND_SERVICE"),
        );
        rule(
            sc.run_as_non_root == Some(true) || (pod_non_root && sc.run_as_non_root.is_none()),
            &format!("{name}: runAsNonRoot"),
        );
        rule(sc.run_as_user != Some(0), &format!("{name}: runAsUser 0"));
        let seccomp = sc
            .seccomp_profile
            .as_ref()
            .map(|p| p.type_.as_str())
            .or(pod_seccomp);
        rule(
            matches!(seccomp, Some("RuntimeDefault" | "Localhost")),
            &format!("{name}: seccompProfile RuntimeDefault or Localhost"),
        );
        rule(
            sc.proc_mount.as_deref().is_none_or(|m| m == "Default"),
            &format!("{name}: procMount"),
        );
        rule(
            sc.se_linux_options.is_none(),
            &format!("{name}: seLinuxOptions"),
        );
        for port in container.ports.iter().flatten() {
            rule(port.host_port.is_none(), &format!("{name}: hostPort"));
        }
        // Not a Pod Security rule, but factbuoy's own promise.
        rule(
            sc.read_only_root_filesystem == Some(true),
            &format!("{name}: readOnlyRootFilesystem"),
        );
    }
    broken
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Container;

    use super::*;

    fn spec(container: SecurityContext, pod: PodSecurityContext) -> PodSpec {
        PodSpec {
            security_context: Some(pod),
            containers: vec![Container {
                name: "c".into(),
                security_context: Some(container),
                ..Container::default()
            }],
            ..PodSpec::default()
        }
    }

    #[test]
    fn the_contexts_meet_restricted() {
        let good = spec(container_security_context(), pod_security_context());
        assert_eq!(restricted_violations(&good), Vec::<String>::new());
    }

    #[test]
    fn each_restricted_rule_is_checked() {
        type Breaker = Box<dyn Fn(&mut PodSpec)>;
        let breakers: Vec<(&str, Breaker)> = vec![
            ("hostNetwork", Box::new(|s| s.host_network = Some(true))),
            ("hostPID", Box::new(|s| s.host_pid = Some(true))),
            (
                "privileged",
                Box::new(|s| {
                    s.containers[0]
                        .security_context
                        .as_mut()
                        .unwrap()
                        .privileged = Some(true)
                }),
            ),
            (
                "allowPrivilegeEscalation",
                Box::new(|s| {
                    s.containers[0]
                        .security_context
                        .as_mut()
                        .unwrap()
                        .allow_privilege_escalation = None
                }),
            ),
            (
                "drop ALL",
                Box::new(|s| {
                    s.containers[0]
                        .security_context
                        .as_mut()
                        .unwrap()
                        .capabilities = None
                }),
            ),
            (
                "capabilities.add",
                Box::new(|s| {
                    s.containers[0]
                        .security_context
                        .as_mut()
                        .unwrap()
                        .capabilities
                        .as_mut()
                        .unwrap()
                        .add = Some(vec!["SYS_ADMIN".into()])
                }),
            ),
            (
                "runAsNonRoot",
                Box::new(|s| {
                    s.security_context.as_mut().unwrap().run_as_non_root = None;
                    s.containers[0]
                        .security_context
                        .as_mut()
                        .unwrap()
                        .run_as_non_root = None;
                }),
            ),
            (
                "seccompProfile",
                Box::new(|s| {
                    s.security_context.as_mut().unwrap().seccomp_profile = None;
                    s.containers[0]
                        .security_context
                        .as_mut()
                        .unwrap()
                        .seccomp_profile = None;
                }),
            ),
            (
                "readOnlyRootFilesystem",
                Box::new(|s| {
                    s.containers[0]
                        .security_context
                        .as_mut()
                        .unwrap()
                        .read_only_root_filesystem = None
                }),
            ),
        ];
        for (what, breaker) in breakers {
            let mut broken = spec(container_security_context(), pod_security_context());
            breaker(&mut broken);
            assert!(
                !restricted_violations(&broken).is_empty(),
                "{what} went unnoticed"
            );
        }
    }
}
