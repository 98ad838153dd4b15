//! `factbuoy run --kubernetes` end to end on a real cluster (tests/kube/: v1.20.2, three real
//! kubelets), with the image deploy/build-image.sh builds: the real binary applies the run,
//! follows it through port-forward and downloads the bundle.

mod support;

use std::collections::BTreeMap;
use std::io::Read;

use support::kube::Cluster;

fn cluster() -> &'static Cluster {
    Cluster::shared("run", 3)
}

/// The bundle's files and their contents.
fn unpack(bundle: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    let file = std::fs::File::open(bundle).unwrap();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    archive
        .entries()
        .unwrap()
        .map(|entry| {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().to_string_lossy().into_owned();
            let mut content = Vec::new();
            entry.read_to_end(&mut content).unwrap();
            (path, content)
        })
        .collect()
}

#[test]
fn a_kubernetes_run_ends_in_a_bundle_with_every_nodes_results_and_the_clusters_resources() {
    let cluster = cluster();
    let image = cluster.factbuoy_image();
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let ran = cluster
        .command(env!("CARGO_BIN_EXE_factbuoy"))
        .env("FACTBUOY_STATE_DIR", state.path())
        .env("FACTBUOY_CACHE_DIR", support::cache_dir())
        .args(["run", "--kubernetes", "--image", image])
        .args(["--image-pull-policy", "Never", "--plugin", "host-facts"])
        .args(["--plugin", "setup", "--timeout", "5m", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(ran.status.success(), "run --kubernetes failed: {stderr}");
    let bundle = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .unwrap_or_else(|| panic!("no bundle in --out; {stderr}"));
    let files = unpack(&bundle);
    for node in ["node-1", "node-2", "node-3"] {
        for (plugin, artifact) in [
            ("host-facts", "host-facts.json"),
            ("setup", "ansible_facts.json"),
        ] {
            let path = format!("plugins/{plugin}/results/{node}/{artifact}");
            let facts: serde_json::Value = serde_json::from_slice(
                files
                    .get(&path)
                    .unwrap_or_else(|| panic!("{path} missing: {:?}", files.keys())),
            )
            .unwrap();
            assert!(facts.is_object(), "{path}");
        }
    }
    let status: serde_json::Value = serde_json::from_slice(&files["meta/status.json"]).unwrap();
    // The bundle's status is written as it is packed, so the run itself is still packaging.
    assert_eq!(status["status"], "post-processing");
    assert!(
        status["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["status"] == "complete"),
        "{status:#}"
    );
    let nodes: serde_json::Value = serde_json::from_slice(&files["resources/nodes.json"]).unwrap();
    assert_eq!(nodes["items"].as_array().unwrap().len(), 3);
    let version: serde_json::Value =
        serde_json::from_slice(&files["resources/version.json"]).unwrap();
    assert_eq!(version["gitVersion"], "v1.20.2");

    // The run ended its DaemonSet: no agent lingers or restarts.
    let run_id = status["run_id"].as_str().unwrap().to_owned();
    let namespace = format!("factbuoy-{run_id}");
    let daemonsets = cluster.kubectl(["-n", &namespace, "get", "daemonsets", "-o", "name"]);
    assert_eq!(
        daemonsets.trim(),
        "",
        "the agents' DaemonSet outlived the run"
    );
    let deleted = cluster
        .command(env!("CARGO_BIN_EXE_factbuoy"))
        .env("FACTBUOY_STATE_DIR", state.path())
        .args(["delete", &run_id])
        .output()
        .unwrap();
    assert!(
        deleted.status.success(),
        "{}",
        String::from_utf8_lossy(&deleted.stderr)
    );
}
