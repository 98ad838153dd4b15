//! Kubernetes dispatch on a real cluster (tests/kube/: v1.20.2, real kubelets), through the
//! dispatch crate and the real binary.

use crate::cluster;
use factbuoy_dispatch::resources;
use factbuoy_dispatch::{ClusterRef, ConnectError};

#[test]
fn a_kubeconfig_and_its_context_reach_the_api_server() {
    let cluster = cluster();
    let target = ClusterRef {
        kubeconfig: Some(cluster.kubeconfig()),
        context: Some("factbuoy-kube".into()),
    };
    let version = cluster.block_on(|| async {
        let connected = factbuoy_dispatch::connect(&target).await.unwrap();
        connected.client.apiserver_version().await.unwrap()
    });
    assert_eq!(version.git_version, "v1.20.2");
}

#[test]
fn a_context_the_kubeconfig_lacks_is_an_error_that_names_the_flag() {
    let cluster = cluster();
    let target = ClusterRef {
        kubeconfig: Some(cluster.kubeconfig()),
        context: Some("no-such-context".into()),
    };
    let error = cluster
        .block_on(|| async { factbuoy_dispatch::connect(&target).await.err() })
        .expect("an unknown context must not connect");
    assert!(
        matches!(error, ConnectError::Kubeconfig { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("no-such-context") && message.contains("--context"),
        "{message}"
    );
}

#[test]
fn resources_are_saved_page_by_page_into_one_list_with_every_object_whole() {
    let cluster = cluster();
    let dir = tempfile::tempdir().unwrap();
    let target = ClusterRef {
        kubeconfig: Some(cluster.kubeconfig()),
        context: None,
    };
    let (nodes, namespaces) = cluster.block_on(|| async {
        let client = factbuoy_dispatch::connect(&target).await.unwrap().client;
        let kind = |name| factbuoy_dispatch::resources::kind(name).unwrap();
        resources::save_version(&client, dir.path()).await.unwrap();
        // One object a page: three pages for three nodes, each continued from the last.
        let nodes = resources::save_kind(&client, kind("nodes"), dir.path(), 1)
            .await
            .unwrap();
        let namespaces = resources::save_kind(
            &client,
            kind("namespaces"),
            dir.path(),
            resources::PAGE_SIZE,
        )
        .await
        .unwrap();
        (nodes, namespaces)
    });
    assert_eq!(nodes, 3);
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("nodes.json")).unwrap()).unwrap();
    let listed: serde_json::Value =
        serde_json::from_str(&cluster.kubectl(["get", "nodes", "-o", "json"])).unwrap();
    let names = |list: &serde_json::Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&saved), names(&listed));
    assert_eq!(saved["kind"], "List");
    // Whole objects: the status kubectl sees is there, images and all.
    assert_eq!(
        saved["items"][0]["status"]["nodeInfo"]["kubeletVersion"],
        "v1.20.2"
    );
    let namespace_list: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("namespaces.json")).unwrap())
            .unwrap();
    assert_eq!(
        namespace_list["items"].as_array().unwrap().len() as u64,
        namespaces
    );
    assert!(
        namespaces >= 4,
        "default, kube-system, kube-public, kube-node-lease"
    );
    let version: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("version.json")).unwrap()).unwrap();
    assert_eq!(version["gitVersion"], "v1.20.2");
}

#[test]
fn the_status_annotation_is_patched_when_the_status_changes_and_not_otherwise() {
    use factbuoy_dispatch::status_annotation::{Publisher, STATUS_ANNOTATION, summarize};
    use factbuoy_protocol::types::{PairStatus, PluginStatus, RunStatus, StatusDocument};
    use k8s_openapi::api::core::v1::Pod;

    let cluster = cluster();
    cluster.kubectl(["create", "namespace", "annotated"]);
    // The pod need not run: the annotation lives on the object.
    cluster.kubectl([
        "-n",
        "annotated",
        "run",
        "aggregator",
        "--image=factbuoy.local/absent:1",
        "--image-pull-policy=Never",
    ]);
    let mut document = StatusDocument {
        run_id: "r1".into(),
        status: RunStatus::Running,
        plugins: vec![PluginStatus {
            plugin: "setup".into(),
            node: "node-1".into(),
            status: PairStatus::Pending,
            result_status: None,
            progress: None,
            last_heartbeat: None,
            error: None,
            warnings: Vec::new(),
            empty: false,
        }],
        tar_info: None,
        error: None,
    };
    let target = ClusterRef {
        kubeconfig: Some(cluster.kubeconfig()),
        context: None,
    };
    let (first, again, throttled, forced) = cluster.block_on(|| async {
        let client = factbuoy_dispatch::connect(&target).await.unwrap().client;
        let pods = kube::Api::<Pod>::namespaced(client, "annotated");
        let mut publisher = Publisher::new(pods, "aggregator".into());
        let first = publisher.publish(&document, false).await.unwrap();
        let again = publisher.publish(&document, false).await.unwrap();
        document.plugins[0].status = PairStatus::Complete;
        let throttled = publisher.publish(&document, false).await.unwrap();
        let forced = publisher.publish(&document, true).await.unwrap();
        (first, again, throttled, forced)
    });
    assert!(first, "the first status is published");
    assert!(!again, "an unchanged status is not patched again");
    assert!(!throttled, "a change within the interval waits");
    assert!(forced, "the final status is published at once");
    let annotation = cluster.kubectl([
        "-n",
        "annotated",
        "get",
        "pod",
        "aggregator",
        "-o",
        &format!(
            "jsonpath={{.metadata.annotations.{}}}",
            STATUS_ANNOTATION.replace('.', "\\.")
        ),
    ]);
    let published: serde_json::Value = serde_json::from_str(&annotation).unwrap();
    assert_eq!(
        published,
        serde_json::to_value(summarize(&document)).unwrap()
    );
    assert_eq!(published["pairs"]["complete"], 1);
}

#[test]
fn port_forward_opens_a_new_tunnel_per_connection_to_the_pods_port() {
    use factbuoy_dispatch::forward::PodPort;
    use k8s_openapi::api::core::v1::Pod;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let cluster = cluster();
    let image = cluster.busybox_image();
    cluster.kubectl(["create", "namespace", "forwarded"]);
    // Answers each connection with its first line, echoed after "pong ".
    cluster.kubectl([
        "-n",
        "forwarded",
        "run",
        "server",
        &format!("--image={image}"),
        "--image-pull-policy=Never",
        "--command",
        "--",
        "/bin/sh",
        "-c",
        "exec nc -ll -p 8080 -e /bin/sh -c 'read line; echo pong $line'",
    ]);
    cluster.kubectl([
        "-n",
        "forwarded",
        "wait",
        "--for=condition=Ready",
        "pod/server",
        "--timeout=60s",
    ]);
    let target = ClusterRef {
        kubeconfig: Some(cluster.kubeconfig()),
        context: None,
    };
    let (answers, refused) = cluster.block_on(|| async {
        let client = factbuoy_dispatch::connect(&target).await.unwrap().client;
        let pods = kube::Api::<Pod>::namespaced(client, "forwarded");
        let port = PodPort::new(pods.clone(), "server", 8080);
        let mut answers = Vec::new();
        for word in ["one", "two"] {
            let mut stream = port.connect().await.unwrap();
            stream
                .write_all(format!("{word}\n").as_bytes())
                .await
                .unwrap();
            // Read the whole answer without closing our side: v4 cannot half-close.
            let mut answer = Vec::new();
            let mut buffer = [0; 64];
            while !answer.ends_with(b"\n") {
                let n = stream.read(&mut buffer).await.unwrap();
                assert!(n > 0, "the tunnel ended before the answer");
                answer.extend_from_slice(&buffer[..n]);
            }
            answers.push(String::from_utf8(answer).unwrap());
        }
        let refused = PodPort::new(pods, "no-such-pod", 8080)
            .connect()
            .await
            .expect_err("no pod, no tunnel")
            .to_string();
        (answers, refused)
    });
    assert_eq!(answers, ["pong one\n", "pong two\n"]);
    assert!(refused.contains("no-such-pod"), "{refused}");
}
