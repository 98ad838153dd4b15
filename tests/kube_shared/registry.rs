//! A Kubernetes run whose image and plugins come from a registry (a real CNCF distribution
//! registry inside the cluster's network, TLS from a private CA, a password): the nodes pull
//! the image by digest with the run's pull Secret, the aggregator pulls the plugins by the
//! digest the operator resolved, and nothing is imported into a node or shipped in ConfigMaps.

use crate::support;

use crate::cluster;
use crate::support::kube::REGISTRY_ADDRESS;
use crate::support::kube_runs::{self, factbuoy_json};

#[test]
fn the_image_and_a_python_plugin_come_by_digest_from_a_registry_and_a_tag_moved_mid_run_changes_nothing()
 {
    let cluster = cluster();
    let registry = cluster.registry();
    let image = cluster.factbuoy_image_in_registry();
    let flags = registry.flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();

    let python =
        support::python::component(&support::workspace().join("tests/plugins-python/hostile"));
    let tag = format!("oci://{REGISTRY_ADDRESS}/plugins/hostile:stable");
    let push = |plugin: &str| {
        factbuoy_json(
            cluster,
            state.path(),
            &[&["plugin", "push", plugin, &tag], flags.as_slice()].concat(),
        )
    };
    let pushed = push(python.to_str().unwrap());

    let run = kube_runs::start_run_with_image(
        cluster,
        state.path(),
        out.path(),
        (image, "IfNotPresent"),
        &[
            &[
                "--plugin",
                tag.as_str(),
                "--param",
                "hostile:mode=well-behaved",
            ],
            flags.as_slice(),
        ]
        .concat(),
    );
    // Once the run is planned, the tag moves to another plugin: the run resolved it already.
    let run_id = kube_runs::run_id_in(state.path());
    push("hello");
    let namespace = format!("factbuoy-{run_id}");
    let aggregator_image = kube_runs::poll(
        std::time::Duration::from_secs(120),
        "the aggregator pod's image pulled",
        || {
            // kubectl fails until the pod exists.
            let output = cluster
                .command(cluster.kube_bin().join("kubectl"))
                .args(["-n", &namespace, "get", "pod", "factbuoy-aggregator", "-o"])
                .arg("jsonpath={.status.containerStatuses[0].imageID}")
                .output()
                .ok()?;
            let id = String::from_utf8(output.stdout).ok()?;
            (output.status.success() && !id.is_empty()).then_some(id)
        },
    );
    let digest = image.rsplit_once('@').unwrap().1;
    assert!(
        aggregator_image.contains(digest),
        "the aggregator runs {aggregator_image}, not {image}"
    );
    let config_maps = cluster.kubectl(["-n", &namespace, "get", "configmaps", "-o", "name"]);
    assert!(
        !config_maps.contains("factbuoy-plugin-part-"),
        "plugins travelled in ConfigMaps: {config_maps}"
    );

    let bundle = kube_runs::finish_run(run, out.path());
    kube_runs::assert_well_behaved_everywhere(&bundle, "hostile");
    // The bundle says what code produced it: the image, by digest, and each plugin's source.
    let run_json = bundle.json("meta/run.json");
    let ran_image = run_json["image"]["id"].as_str().unwrap_or_default();
    assert!(ran_image.ends_with(digest), "{:#}", run_json["image"]);
    assert_eq!(run_json["image"]["name"], image);
    let plugin = &run_json["plugins"][0];
    assert_eq!(plugin["source"], pushed["reference"], "{plugin:#}");
    assert_eq!(plugin["sha256"], pushed["component_sha256"]);
    factbuoy_json(cluster, state.path(), &["delete", &run_id]);
}
