use serde_json::Value;

use super::*;
use crate::names::RUN_LABEL;

/// Field names Kubernetes added after 1.20: server-side apply on a 1.20 API server refuses an
/// object that writes any of them ("field not declared in schema").
const NEWER_THAN_1_20: &[&str] = &[
    "appArmorProfile",
    "recursiveReadOnly",
    "hostUsers",
    "os",
    "resizePolicy",
    "maxSurge",
    "schedulingGates",
    "resourceClaims",
    "claims",
    "supplementalGroupsPolicy",
    "seLinuxChangePolicy",
    "internalTrafficPolicy",
    "loadBalancerClass",
    "trafficDistribution",
    "matchLabelKeys",
    "mismatchLabelKeys",
    "nodeAffinityPolicy",
    "nodeTaintsPolicy",
    "minDomains",
    "grpc",
    "sleep",
    "stopSignal",
    "clusterTrustBundle",
    "podCertificate",
    "volumeAttributesClassName",
    "fileKeyRef",
    "hostnameOverride",
    "restartPolicyRules",
    "ephemeral",
];

pub(crate) fn spec() -> RunSpec {
    RunSpec {
        run_id: "0123456789ab".into(),
        namespace: None,
        image: "factbuoy.local/factbuoy:0.1.0".into(),
        image_pull_policy: "IfNotPresent".into(),
        node_selector: [("kubernetes.io/os".to_owned(), "linux".to_owned())].into(),
        tolerations: scheduling::tolerations(&[], true),
        read_paths: vec!["/var/log/journal".into(), "/dev/disk".into(), "/sys".into()],
        host_info: true,
        agent_memory_limit: "768Mi".into(),
        agent_cache: Some(DEFAULT_AGENT_CACHE_DIR.into()),
        agent_cache_size: DEFAULT_AGENT_CACHE_SIZE.into(),
        journal_groups: Vec::new(),
        host_network: true,
        global_plugins: false,
        resources: crate::resources::default_kinds(),
        operator_ca_pem: "-----BEGIN CERTIFICATE-----\n...\n".into(),
        plan_json: "{}".into(),
        components: vec![],
        registry_auth: None,
        registry_ca_pem: None,
        secrets: false,
    }
}

fn walk<'a>(value: &'a Value, path: &str, visit: &mut dyn FnMut(&str, &str, &'a Value)) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                visit(path, key, child);
                walk(child, &format!("{path}.{key}"), visit);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| walk(item, path, visit)),
        _ => {}
    }
}

/// Dotted paths of the fields newer than 1.20 that `object` writes.
fn newer_fields(object: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk(object, "", &mut |path, key, child| {
        let newer = NEWER_THAN_1_20.contains(&key)
            // A container's restartPolicy is the 1.28 sidecar field; the pod's is old.
            || (key == "restartPolicy" && path.ends_with("containers"))
            // An `image` volume (1.31), not a container's image name.
            || (key == "image" && child.is_object());
        if newer {
            found.push(format!("{path}.{key}"));
        }
    });
    found
}

fn pod_specs(m: &RunManifests) -> Vec<&PodSpec> {
    vec![
        m.aggregator.spec.as_ref().unwrap(),
        m.agents
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap(),
    ]
}

#[test]
fn every_object_carries_the_run_labels() {
    for spec in [
        spec(),
        RunSpec {
            namespace: Some("tools".into()),
            ..spec()
        },
    ] {
        let m = RunManifests::build(&spec).unwrap();
        let objects = m.objects();
        assert_eq!(
            objects.len(),
            if spec.namespace.is_some() { 10 } else { 11 }
        );
        for object in &objects {
            let labels = &object["metadata"]["labels"];
            for (key, value) in names::labels(&spec.run_id, Component::Agent) {
                if key != names::COMPONENT_LABEL {
                    assert_eq!(labels[&key], value.as_str(), "{key} on {object}");
                }
            }
            assert!(labels[names::COMPONENT_LABEL].is_string(), "{object}");
            assert!(object["apiVersion"].is_string() && object["kind"].is_string());
        }
        let template = &m.agents.spec.as_ref().unwrap().template;
        assert_eq!(
            template.metadata.as_ref().unwrap().labels.as_ref().unwrap()[RUN_LABEL],
            spec.run_id
        );
    }
}

#[test]
fn objects_come_in_apply_order() {
    let kinds: Vec<String> = RunManifests::build(&spec())
        .unwrap()
        .objects()
        .iter()
        .map(|o| o["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ServiceAccount",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ConfigMap",
            "Service",
            "Pod",
            "DaemonSet"
        ]
    );
}

#[test]
fn every_port_says_tcp() {
    let m = RunManifests::build(&spec()).unwrap();
    let mut ports = 0;
    for object in m.objects() {
        walk(&object, "", &mut |_, key, child| {
            if key == "ports" {
                for port in child.as_array().unwrap() {
                    ports += 1;
                    assert_eq!(port["protocol"], "TCP", "{port}");
                }
            }
        });
    }
    assert_eq!(ports, 4, "two container ports and two Service ports");
}

#[test]
fn no_field_is_newer_than_1_20() {
    let m = RunManifests::build(&spec()).unwrap();
    for object in m.objects() {
        assert_eq!(newer_fields(&object), Vec::<String>::new(), "{object}");
    }
    // The check sees such fields.
    let mut broken = m.clone();
    broken
        .agents
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .host_users = Some(false);
    broken.aggregator.spec.as_mut().unwrap().containers[0].restart_policy = Some("Always".into());
    let found: Vec<String> = broken.objects().iter().flat_map(newer_fields).collect();
    assert_eq!(
        found,
        [
            ".spec.containers.restartPolicy",
            ".spec.template.spec.hostUsers"
        ]
    );
}

#[test]
fn pods_meet_restricted_except_host_paths_and_the_agents_host_network() {
    let m = RunManifests::build(&spec()).unwrap();
    let [aggregator, agent] = pod_specs(&m)[..] else {
        panic!("two pod specs")
    };
    assert_eq!(
        security::restricted_violations(aggregator),
        Vec::<String>::new()
    );
    // The init container that gives the node's cache to the agents' user is root with two
    // capabilities; the agent container itself breaks no rule.
    assert_eq!(
        security::restricted_violations(agent),
        [
            "hostNetwork",
            "cache-owner: capabilities.add beyond NET_BIND_SERVICE",
            "cache-owner: runAsNonRoot",
            "cache-owner: runAsUser 0"
        ]
    );
    let opted_out = RunManifests::build(&RunSpec {
        host_network: false,
        agent_cache: None,
        ..spec()
    })
    .unwrap();
    assert_eq!(
        security::restricted_violations(pod_specs(&opted_out)[1]),
        Vec::<String>::new()
    );
    for pod in pod_specs(&m) {
        let sc = pod.security_context.as_ref().unwrap();
        assert_eq!(sc.run_as_non_root, Some(true));
        assert_ne!(sc.run_as_user, Some(0));
        assert_eq!(sc.seccomp_profile.as_ref().unwrap().type_, "RuntimeDefault");
        for container in &pod.containers {
            let caps = container
                .security_context
                .as_ref()
                .unwrap()
                .capabilities
                .as_ref()
                .unwrap();
            assert_eq!(caps.add, None, "no capability is added");
            assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_owned()][..]));
        }
    }
    // The only volumes restricted forbids are the read-only host paths, none of them `/` or /dev,
    // and the node's cache directory.
    let agent = pod_specs(&m)[1];
    let host: Vec<&str> = agent
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.host_path.as_ref().map(|h| h.path.as_str()))
        .collect();
    assert_eq!(
        host,
        [
            "/etc",
            "/proc",
            "/sys",
            "/usr",
            "/var",
            DEFAULT_AGENT_CACHE_DIR
        ]
    );
    assert_eq!(m.left_out, ["/dev/disk"]);
    for mount in agent.containers[0].volume_mounts.iter().flatten() {
        if mount.name.starts_with("host-") {
            assert_eq!(mount.read_only, Some(true));
            assert!(mount.mount_path.starts_with("/host/"));
        }
    }
    assert!(
        pod_specs(&m)[0]
            .volumes
            .iter()
            .flatten()
            .all(|v| v.host_path.is_none())
    );
}

#[test]
fn agents_share_their_nodes_network_unless_a_run_opts_out_and_listen_on_nothing() {
    let m = RunManifests::build(&spec()).unwrap();
    let [aggregator, agent] = pod_specs(&m)[..] else {
        panic!("two pod specs")
    };
    assert_eq!(agent.host_network, Some(true));
    assert_eq!(agent.dns_policy.as_deref(), Some(HOST_NETWORK_DNS_POLICY));
    assert_eq!((agent.host_pid, agent.host_ipc), (Some(false), Some(false)));
    // On the node's network an agent could bind the node's ports: it declares none, and binds
    // none (it only dials the aggregator).
    assert!(agent.containers.iter().all(|c| c.ports.is_none()));
    assert_eq!(aggregator.host_network, Some(false));
    assert_eq!(aggregator.dns_policy, None);

    let opted_out = RunManifests::build(&RunSpec {
        host_network: false,
        ..spec()
    })
    .unwrap();
    let agent = pod_specs(&opted_out)[1];
    assert_eq!(agent.host_network, Some(false));
    assert_eq!(agent.dns_policy, None);
}

#[test]
fn the_daemonset_selects_by_the_immutable_label_pair() {
    let m = RunManifests::build(&spec()).unwrap();
    let ds = m.agents.spec.as_ref().unwrap();
    assert_eq!(
        ds.selector.match_labels.as_ref().unwrap(),
        &names::selector("0123456789ab", Component::Agent)
    );
    assert_eq!(ds.selector.match_expressions, None);
    assert_eq!(
        ds.update_strategy.as_ref().unwrap().type_.as_deref(),
        Some("OnDelete")
    );
    let pod = ds.template.spec.as_ref().unwrap();
    assert_eq!(pod.termination_grace_period_seconds, Some(5));
    assert_eq!(pod.automount_service_account_token, Some(false));
    assert_eq!(
        pod.tolerations.as_ref().unwrap()[0].operator.as_deref(),
        Some("Exists")
    );
    let command = pod.containers[0].command.as_ref().unwrap().join(" ");
    assert!(
        command.contains("--server-name factbuoy-aggregator.factbuoy-0123456789ab.svc"),
        "{command}"
    );
    assert!(
        command.contains("--enroll-credential-file /var/run/secrets/factbuoy/token"),
        "{command}"
    );
    let service = m.service.spec.as_ref().unwrap();
    assert_eq!(
        service.selector.as_ref().unwrap(),
        &names::selector("0123456789ab", Component::Aggregator)
    );
}

#[test]
fn owner_references_point_at_the_root() {
    let mut m = RunManifests::build(&spec()).unwrap();
    assert!(m.owns_namespace());
    assert!(
        m.objects()
            .iter()
            .all(|o| o["metadata"].get("ownerReferences").is_none())
    );
    m.set_namespace_uid("u-1");
    let owner = &m.cluster_role.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("Namespace", "factbuoy-0123456789ab", "u-1")
    );
    assert!(m.cluster_role_binding.metadata.owner_references.is_some());

    let mut m = RunManifests::build(&RunSpec {
        namespace: Some("tools".into()),
        ..spec()
    })
    .unwrap();
    assert!(!m.owns_namespace());
    m.set_aggregator_uid("p-1");
    let owned = m
        .objects()
        .iter()
        .filter(|o| o["metadata"]["ownerReferences"][0]["kind"] == "Pod")
        .count();
    assert_eq!(
        owned, 7,
        "ServiceAccounts, Role, RoleBinding, ConfigMap, Service, DaemonSet"
    );
}

#[test]
fn a_plan_too_large_for_a_config_map_is_refused() {
    let big = RunSpec {
        plan_json: "x".repeat(MAX_CONFIG_MAP_BYTES),
        ..spec()
    };
    let error = RunManifests::build(&big).unwrap_err().to_string();
    assert!(error.contains("more than a ConfigMap holds"), "{error}");
    let bad = RunSpec {
        run_id: "Bad".into(),
        ..spec()
    };
    assert!(RunManifests::build(&bad).is_err());
}

#[test]
fn a_component_larger_than_a_config_map_travels_in_parts_the_aggregator_mounts() {
    let wasm = vec![7u8; 2 * MAX_CONFIG_MAP_BYTES];
    let sha256 = factbuoy_protocol::digest::sha256_hex(&wasm);
    let with_component = RunSpec {
        components: vec![(sha256.clone(), wasm)],
        ..spec()
    };
    let m = RunManifests::build(&with_component).unwrap();
    assert_eq!(m.component_parts.len(), 3);
    for part in &m.component_parts {
        let data = part.binary_data.as_ref().unwrap();
        let size: usize = data.iter().map(|(k, v)| k.len() + v.0.len()).sum();
        assert!(size <= MAX_CONFIG_MAP_BYTES, "{size}");
        assert!(data.keys().all(|k| k.starts_with(&sha256)), "{data:?}");
        assert_eq!(part.immutable, Some(true));
    }
    let pod = pod_specs(&m)[0];
    let mounts: Vec<&str> = pod.containers[0]
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .map(|v| v.mount_path.as_str())
        .filter(|p| p.starts_with(components::COMPONENTS_DIR))
        .collect();
    assert_eq!(
        mounts,
        [
            "/etc/factbuoy/components/0",
            "/etc/factbuoy/components/1",
            "/etc/factbuoy/components/2"
        ]
    );
    // `gen` prints the parts, so a plain `kubectl apply` carries them too.
    let printed = m
        .objects()
        .iter()
        .filter(|o| {
            o["kind"] == "ConfigMap"
                && o["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .starts_with(components::PART_CONFIG_MAP_PREFIX)
        })
        .count();
    assert_eq!(printed, 3);

    let too_many = RunSpec {
        components: vec![("ab".into(), vec![0; components::MAX_COMPONENTS_BYTES + 1])],
        ..spec()
    };
    let error = RunManifests::build(&too_many).unwrap_err().to_string();
    assert!(error.contains("more than a run stores"), "{error}");
}

#[test]
fn journal_groups_reach_only_the_agents_and_global_plugins_raise_only_the_aggregators_memory() {
    let memory_limit = |m: &RunManifests| {
        let pod = pod_specs(m)[0];
        let limits = pod.containers[0]
            .resources
            .as_ref()
            .unwrap()
            .limits
            .as_ref();
        limits.unwrap()["memory"].0.clone()
    };
    let supplemental = |pod: &PodSpec| {
        let context = pod.security_context.as_ref().unwrap();
        context.supplemental_groups.clone()
    };
    let plain = RunManifests::build(&spec()).unwrap();
    assert_eq!(memory_limit(&plain), AGGREGATOR_MEMORY_LIMIT);
    assert_eq!(supplemental(pod_specs(&plain)[1]), None);

    let m = RunManifests::build(&RunSpec {
        journal_groups: vec![999, 101],
        global_plugins: true,
        ..spec()
    })
    .unwrap();
    assert_eq!(memory_limit(&m), AGGREGATOR_GLOBAL_MEMORY_LIMIT);
    assert_eq!(supplemental(pod_specs(&m)[1]), Some(vec![999, 101]));
    assert_eq!(
        supplemental(pod_specs(&m)[0]),
        None,
        "the aggregator reads no journal"
    );
    // A supplemental group breaks no rule of the restricted profile.
    assert_eq!(
        security::restricted_violations(pod_specs(&m)[1]),
        security::restricted_violations(pod_specs(&plain)[1]),
    );
}

#[test]
fn a_run_with_secret_parameters_lets_its_aggregator_alone_read_its_secret_by_name() {
    let without = RunManifests::build(&spec()).unwrap();
    let with = RunManifests::build(&RunSpec {
        secrets: true,
        ..spec()
    })
    .unwrap();
    let reads_secrets = |m: &RunManifests| {
        m.role
            .rules
            .iter()
            .flatten()
            .any(|r| r.resources.iter().flatten().any(|r| r == "secrets"))
    };
    assert!(!reads_secrets(&without));
    assert!(reads_secrets(&with));
    let command = |m: &RunManifests| {
        m.aggregator.spec.as_ref().unwrap().containers[0]
            .command
            .clone()
            .unwrap()
    };
    assert!(!command(&without).contains(&"--secrets".to_owned()));
    assert_eq!(command(&with).last().unwrap(), "--secrets");
    // The agents never get it: no volume, no environment, no API token.
    let agents = serde_json::to_string(&with.agents).unwrap();
    assert!(!agents.contains(names::SECRETS), "{agents}");
    // Nor does any object hold a value: the Secret is not among the run's manifests.
    assert!(with.objects().iter().all(|o| o["kind"] != "Secret"));
}

#[test]
fn agents_keep_compiled_plugins_on_their_node_in_a_directory_made_theirs_by_an_init_container() {
    let m = RunManifests::build(&spec()).unwrap();
    let agent = pod_specs(&m)[1];
    let cache = agent
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "cache")
        .unwrap();
    let host_path = cache.host_path.as_ref().unwrap();
    assert_eq!(host_path.path, DEFAULT_AGENT_CACHE_DIR);
    // The kubelet makes it the first time (root's); the init container gives it to the agent.
    assert_eq!(host_path.type_.as_deref(), Some("DirectoryOrCreate"));
    let env = |container: &Container, name: &str| {
        container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    };
    let container = &agent.containers[0];
    assert_eq!(
        env(container, "FACTBUOY_CACHE_DIR").as_deref(),
        Some(AGENT_CACHE_MOUNT)
    );
    assert_eq!(
        env(container, "FACTBUOY_CACHE_MAX_SIZE").as_deref(),
        Some(DEFAULT_AGENT_CACHE_SIZE)
    );
    assert_eq!(
        env(container, "FACTBUOY_CACHE_VERIFY").as_deref(),
        Some("1")
    );
    let mounted = |c: &Container| -> Vec<(String, Option<bool>)> {
        c.volume_mounts
            .iter()
            .flatten()
            .filter(|m| m.name == "cache")
            .map(|m| (m.mount_path.clone(), m.read_only))
            .collect()
    };
    assert_eq!(mounted(container), [(AGENT_CACHE_MOUNT.to_owned(), None)]);
    let [init] = &agent.init_containers.as_ref().unwrap()[..] else {
        panic!("one init container")
    };
    assert_eq!(init.command.as_ref(), Some(&cache_owner_command()));
    assert_eq!(init.volume_mounts.as_ref().unwrap().len(), 1);
    assert_eq!(mounted(init), [(AGENT_CACHE_MOUNT.to_owned(), None)]);
    let sc = init.security_context.as_ref().unwrap();
    let caps = sc.capabilities.as_ref().unwrap();
    assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_owned()][..]));
    assert_eq!(
        caps.add.as_deref(),
        Some(&["CHOWN".to_owned(), "FOWNER".to_owned()][..])
    );
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.privileged, Some(false));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    // The aggregator's cache stays in its pod.
    let aggregator = &pod_specs(&m)[0].containers[0];
    assert_eq!(
        env(aggregator, "FACTBUOY_CACHE_DIR").as_deref(),
        Some("/tmp/cache")
    );

    let moved = RunManifests::build(&RunSpec {
        agent_cache: Some("/data/factbuoy".into()),
        agent_cache_size: "2GiB".into(),
        ..spec()
    })
    .unwrap();
    let agent = pod_specs(&moved)[1];
    let volume = agent.volumes.iter().flatten().find(|v| v.name == "cache");
    assert_eq!(
        volume.unwrap().host_path.as_ref().unwrap().path,
        "/data/factbuoy"
    );
    assert_eq!(
        env(&agent.containers[0], "FACTBUOY_CACHE_MAX_SIZE").as_deref(),
        Some("2GiB")
    );

    let pod_only = RunManifests::build(&RunSpec {
        agent_cache: None,
        ..spec()
    })
    .unwrap();
    let agent = pod_specs(&pod_only)[1];
    assert!(agent.init_containers.is_none());
    assert!(agent.volumes.iter().flatten().all(|v| v.name != "cache"));
    assert_eq!(
        env(&agent.containers[0], "FACTBUOY_CACHE_DIR").as_deref(),
        Some("/tmp/cache")
    );

    for bad in ["relative", "/", "/var/../etc", "/var/cache/", "/var//cache"] {
        let refused = RunManifests::build(&RunSpec {
            agent_cache: Some(bad.into()),
            ..spec()
        });
        assert!(refused.is_err(), "{bad} was accepted");
    }
}

#[test]
fn registry_credentials_reach_every_pods_image_pulls_and_the_aggregators_plugin_pulls_but_no_printed_object()
 {
    let auth = br#"{"auths":{"registry.example:5000":{"auth":"dTpw"}}}"#.to_vec();
    let with = RunManifests::build(&RunSpec {
        registry_auth: Some(auth.clone()),
        registry_ca_pem: Some("-----BEGIN CERTIFICATE-----\nca\n".into()),
        ..spec()
    })
    .unwrap();
    let secret = with.registry_secret.as_ref().expect("the registry Secret");
    assert_eq!(
        secret.metadata.name.as_deref(),
        Some(names::REGISTRY_SECRET)
    );
    assert_eq!(
        secret.type_.as_deref(),
        Some("kubernetes.io/dockerconfigjson")
    );
    assert_eq!(secret.data.as_ref().unwrap()[".dockerconfigjson"].0, auth);
    for pod in pod_specs(&with) {
        let pulls = pod.image_pull_secrets.as_ref().expect("imagePullSecrets");
        assert_eq!(pulls[0].name, names::REGISTRY_SECRET);
    }
    let aggregator = with.aggregator.spec.as_ref().unwrap();
    let command = aggregator.containers[0].command.clone().unwrap().join(" ");
    assert!(
        command.contains(&format!(
            "--registry-authfile {REGISTRY_AUTH_DIR}/{REGISTRY_AUTH_FILE}"
        )) && command.contains(&format!("--registry-cert-dir {RUN_CONFIG_DIR}")),
        "{command}"
    );
    let mounted = aggregator.volumes.iter().flatten().any(|v| {
        v.secret
            .as_ref()
            .is_some_and(|s| s.secret_name.as_deref() == Some(names::REGISTRY_SECRET))
    });
    assert!(mounted, "the aggregator mounts the registry Secret");
    let run_data = with.run_config.data.as_ref().unwrap();
    assert!(run_data[names::REGISTRY_CA_KEY].contains("BEGIN CERTIFICATE"));
    // The agents never read the credentials, and no printed object holds them.
    let agents = serde_json::to_string(&with.agents.spec).unwrap();
    assert!(!agents.contains(REGISTRY_AUTH_DIR), "{agents}");
    assert!(with.objects().iter().all(|o| o["kind"] != "Secret"));
    // Without registry plugins or credentials, nothing of it.
    let without = RunManifests::build(&spec()).unwrap();
    assert!(without.registry_secret.is_none());
    assert!(
        pod_specs(&without)
            .iter()
            .all(|p| p.image_pull_secrets.is_none())
    );
}
