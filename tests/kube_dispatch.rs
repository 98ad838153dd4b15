//! Kubernetes dispatch on a real cluster (tests/kube/: v1.20.2, real kubelets), through the
//! dispatch crate and the real binary.

mod support;

use factbuoy_dispatch::{ConnectError, Target};
use support::kube::Cluster;

fn cluster() -> &'static Cluster {
    Cluster::shared("dispatch", 3)
}

#[test]
fn a_kubeconfig_and_its_context_reach_the_api_server() {
    let cluster = cluster();
    let target = Target {
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
    let target = Target {
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
