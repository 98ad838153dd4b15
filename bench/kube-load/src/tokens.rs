//! The tokens the load generator asks for, as the kubelet asks for an agent's.

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

/// A request for a token as the kubelet asks for a projected volume's: for `audience`, valid
/// `seconds`, bound to `pod`.
pub(crate) fn pod_token_request(audience: &str, seconds: i64, pod: &Pod) -> TokenRequest {
    TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![audience.to_owned()],
            expiration_seconds: Some(seconds),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(pod.name_any()),
                uid: pod.uid(),
            }),
        },
        ..Default::default()
    }
}
