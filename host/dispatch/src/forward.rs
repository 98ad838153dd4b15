//! Connections to a port of a pod through the API server's port-forward: how `factbuoy status`
//! and `retrieve` reach the aggregator's operator listener without a Service exposed outside
//! the cluster, a `kubectl exec`, or a copy of the whole bundle through a pod's shell.
//!
//! Each connection is its own port-forward (one WebSocket), so a download cut off is resumed on
//! a new one. The tunnel carries mutual TLS end to end: the API server sees only ciphertext.
//!
//! Kubernetes 1.20 speaks port-forward protocol v4, which cannot half-close: once our side
//! stops writing, kube closes the read side too and the pod's remaining bytes are lost. So a
//! caller never shuts down its write half before it has read the whole answer (hyper's HTTP/1
//! client does not).

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use tokio::io::DuplexStream;

/// One port of one pod.
#[derive(Clone)]
pub struct PodPort {
    pods: Api<Pod>,
    pod: String,
    port: u16,
}

/// Why a tunnel could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// The API server refused the port-forward (no such pod, not running, no permission).
    #[error(
        "port-forward to pod {pod} port {port}: {source}; check the pod is Running and that you may create pods/portforward in its namespace"
    )]
    Api {
        /// The pod.
        pod: String,
        /// The port.
        port: u16,
        /// What kube said.
        source: kube::Error,
    },
}

impl PodPort {
    /// `port` of the pod `pod`, in the namespace `pods` was made for.
    pub fn new(pods: Api<Pod>, pod: impl Into<String>, port: u16) -> PodPort {
        PodPort {
            pods,
            pod: pod.into(),
            port,
        }
    }

    /// Opens a new connection to the port. A refusal from inside the pod (nothing listening)
    /// shows as the stream ending; its message goes to the log.
    pub async fn connect(&self) -> Result<DuplexStream, ForwardError> {
        let mut forwarder = self
            .pods
            .portforward(&self.pod, &[self.port])
            .await
            .map_err(|source| ForwardError::Api {
                pod: self.pod.clone(),
                port: self.port,
                source,
            })?;
        let stream = forwarder
            .take_stream(self.port)
            .expect("the port asked for has a stream");
        if let Some(error) = forwarder.take_error(self.port) {
            let (pod, port) = (self.pod.clone(), self.port);
            tokio::spawn(async move {
                if let Some(message) = error.await {
                    tracing::warn!(%pod, port, "port-forward: {message}");
                }
            });
        }
        // The forwarder's task runs on until the stream is dropped and the WebSocket closes.
        Ok(stream)
    }
}
