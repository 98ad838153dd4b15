//! Admitting an agent by its pod's ServiceAccount token: a TokenReview for the run's audience
//! says which pod the token was issued to; that pod, if it is the run's agent and still alive,
//! names the node. The node comes from the API server only, so an agent cannot claim another.
//!
//! The pod is read from the run's pod watch ([`SeenPods`], kept by the crate's `pods`) when the
//! watch has seen it bound to a node: one API request per admission, the TokenReview. A pod the
//! watch has not seen yet, or whose seen state would refuse it, is read from the API server, so
//! that a watch running behind never refuses an agent.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use factbuoy_protocol::names::NodeName;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client, ResourceExt};
use tokio::sync::OnceCell;

use crate::names::{AGENT, RUN_LABEL, agent_username, token_audience};

/// The key of `user.extra` where a TokenReview names the pod a token is bound to.
pub const POD_NAME_EXTRA: &str = "authentication.kubernetes.io/pod-name";
/// The key of `user.extra` where a TokenReview gives that pod's uid.
pub const POD_UID_EXTRA: &str = "authentication.kubernetes.io/pod-uid";
/// How long one admission (the TokenReview and the reads after it) may take before it is
/// reported unavailable.
pub const DEFAULT_REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an agent was refused: the check that failed. Never holds the token.
#[derive(Debug, thiserror::Error)]
pub enum PodTokenRefusal {
    /// No token was presented.
    #[error("the agent presented no token")]
    NoToken,
    /// The API server does not accept the token for the run's audience (garbage, expired, for
    /// another audience, or its pod is gone).
    #[error("the token is not valid for audience {audience}{}", error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default())]
    NotAuthenticated {
        /// The run's audience.
        audience: String,
        /// What the API server said, if anything.
        error: Option<String>,
    },
    /// The review authenticated the token but did not confirm the run's audience.
    #[error("the token's audiences {audiences:?} do not include {audience}")]
    WrongAudience {
        /// The run's audience.
        audience: String,
        /// The audiences the review confirmed.
        audiences: Vec<String>,
    },
    /// The token belongs to another identity than the run's agent ServiceAccount.
    #[error("the token belongs to {username:?}, not {expected:?}")]
    WrongServiceAccount {
        /// Who the token belongs to.
        username: String,
        /// The run's agent ServiceAccount.
        expected: String,
    },
    /// The token is not bound to exactly one pod.
    #[error("the token does not name exactly one pod in user.extra[{key}]: {found} values")]
    NoPod {
        /// The `user.extra` key.
        key: &'static str,
        /// How many values it had.
        found: usize,
    },
    /// The pod the token is bound to no longer exists.
    #[error("the token's pod {pod} no longer exists")]
    PodGone {
        /// The pod's name.
        pod: String,
    },
    /// A pod of that name exists, but it is not the one the token was issued to.
    #[error(
        "pod {pod} was re-created since the token was issued (uid {uid}, the token's {token_uid})"
    )]
    PodReplaced {
        /// The pod's name.
        pod: String,
        /// The pod's uid now.
        uid: String,
        /// The uid the token names.
        token_uid: String,
    },
    /// The pod is being deleted.
    #[error("pod {pod} is terminating")]
    PodTerminating {
        /// The pod's name.
        pod: String,
    },
    /// The pod does not carry the run's label.
    #[error("pod {pod} does not carry the label {RUN_LABEL}={run_id}")]
    NotRunPod {
        /// The pod's name.
        pod: String,
        /// The run.
        run_id: String,
    },
    /// The pod is not controlled by the run's agent DaemonSet.
    #[error("pod {pod} is not controlled by the run's DaemonSet {AGENT}{}", daemonset_uid.as_deref().map(|u| format!(" (uid {u})")).unwrap_or_default())]
    NotDaemonSetPod {
        /// The pod's name.
        pod: String,
        /// The DaemonSet's uid, when it exists.
        daemonset_uid: Option<String>,
    },
    /// The pod is not bound to a node.
    #[error("pod {pod} is not scheduled on a node")]
    NotScheduled {
        /// The pod's name.
        pod: String,
    },
    /// The pod's node has a name factbuoy cannot store results under.
    #[error("pod {pod} runs on a node whose name factbuoy refuses: {error}")]
    NodeName {
        /// The pod's name.
        pod: String,
        /// Why the name is refused.
        error: factbuoy_protocol::names::InvalidIdentifier,
    },
}

/// Why an agent was not admitted.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// A check failed: the agent is not who it must be. Retrying does not help.
    #[error("agent refused: {0}")]
    Refused(#[from] PodTokenRefusal),
    /// The API server could not be asked (unreachable, overloaded, the aggregator's RBAC): the
    /// agent may try again later.
    #[error("cannot verify the agent's token now ({0}); the agent should retry")]
    Unavailable(String),
}

/// What admission checks of a pod: a few strings, not the pod (thousands are kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    uid: String,
    terminating: bool,
    /// The value of its run label.
    run_id: Option<String>,
    /// Its controller's kind, name and uid.
    controller: Option<(String, String, String)>,
    node_name: Option<String>,
}

impl PodFacts {
    /// What admission checks of `pod`.
    pub fn of(pod: &Pod) -> PodFacts {
        PodFacts {
            uid: pod.uid().unwrap_or_default(),
            terminating: pod.metadata.deletion_timestamp.is_some(),
            run_id: pod.labels().get(RUN_LABEL).cloned(),
            controller: pod
                .owner_references()
                .iter()
                .find(|o| o.controller == Some(true))
                .map(|o| (o.kind.clone(), o.name.clone(), o.uid.clone())),
            node_name: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty()),
        }
    }
}

/// The run's agent pods as its pod watch last saw them, by name. Shared between the watch,
/// which keeps it, and admission, which reads it.
#[derive(Debug, Clone, Default)]
pub struct SeenPods(Arc<RwLock<HashMap<String, PodFacts>>>);

impl SeenPods {
    /// The watch saw `pod` created or changed.
    pub fn record(&self, pod: &Pod) {
        let name = pod.name_any();
        let facts = PodFacts::of(pod);
        self.0.write().unwrap().insert(name, facts);
    }

    /// The watch saw the pod `name` with `uid` deleted.
    pub fn forget(&self, name: &str, uid: &str) {
        let mut pods = self.0.write().unwrap();
        if pods.get(name).is_some_and(|facts| facts.uid == uid) {
            pods.remove(name);
        }
    }

    /// A relisting is complete: pods it lacks were deleted while the watch was down.
    pub fn keep_only(&self, listed: &HashSet<String>) {
        self.0
            .write()
            .unwrap()
            .retain(|name, _| listed.contains(name));
    }

    /// The pod `name` as last seen.
    pub fn get(&self, name: &str) -> Option<PodFacts> {
        self.0.read().unwrap().get(name).cloned()
    }
}

/// Admits agents of one run by their pods' projected ServiceAccount tokens.
#[derive(Clone)]
pub struct PodTokenAdmission {
    client: Client,
    namespace: String,
    run_id: String,
    timeout: Duration,
    /// The agent DaemonSet's uid, once read: it is the run's for the run's lifetime.
    daemonset_uid: Arc<OnceCell<String>>,
    /// The run's pod watch, if it runs: pods are read from it instead of the API server.
    seen: Option<SeenPods>,
}

impl PodTokenAdmission {
    /// Admission for run `run_id`, whose agents run in `namespace`, with
    /// [`DEFAULT_REVIEW_TIMEOUT`].
    pub fn new(client: Client, namespace: &str, run_id: &str) -> PodTokenAdmission {
        PodTokenAdmission {
            client,
            namespace: namespace.to_owned(),
            run_id: run_id.to_owned(),
            timeout: DEFAULT_REVIEW_TIMEOUT,
            daemonset_uid: Default::default(),
            seen: None,
        }
    }

    /// The same, reading pods from the run's pod watch (`seen`) where it has seen them.
    pub fn with_seen_pods(mut self, seen: SeenPods) -> PodTokenAdmission {
        self.seen = Some(seen);
        self
    }

    /// The same, bounding each admission by `timeout` instead.
    pub fn with_timeout(mut self, timeout: Duration) -> PodTokenAdmission {
        self.timeout = timeout;
        self
    }

    /// The node whose agent presented `token`: the node its pod is bound to, whatever the agent
    /// claims. Costs a TokenReview and, unless the pod watch has seen the pod, a pod read (and,
    /// once, a DaemonSet read).
    pub async fn admit(&self, token: &str) -> Result<NodeName, AdmissionError> {
        if token.trim().is_empty() {
            return Err(PodTokenRefusal::NoToken.into());
        }
        tokio::time::timeout(self.timeout, self.check(token.trim()))
            .await
            .unwrap_or_else(|_| {
                Err(AdmissionError::Unavailable(format!(
                    "the API server did not answer within {} s",
                    self.timeout.as_secs()
                )))
            })
    }

    async fn check(&self, token: &str) -> Result<NodeName, AdmissionError> {
        let audience = token_audience(&self.run_id);
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: Some(vec![audience.clone()]),
            },
            ..TokenReview::default()
        };
        let status = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| unavailable("TokenReview", e))?
            .status
            .unwrap_or_default();
        if status.authenticated != Some(true) {
            return Err(PodTokenRefusal::NotAuthenticated {
                audience,
                error: status.error.filter(|e| !e.is_empty()),
            }
            .into());
        }
        let audiences = status.audiences.unwrap_or_default();
        if !audiences.contains(&audience) {
            return Err(PodTokenRefusal::WrongAudience {
                audience,
                audiences,
            }
            .into());
        }
        let user = status.user.unwrap_or_default();
        let expected = agent_username(&self.namespace);
        let username = user.username.unwrap_or_default();
        if username != expected {
            return Err(PodTokenRefusal::WrongServiceAccount { username, expected }.into());
        }
        let extra = user.extra.unwrap_or_default();
        let one = |key: &'static str| match extra.get(key).map(Vec::as_slice) {
            Some([value]) => Ok(value.clone()),
            other => Err(PodTokenRefusal::NoPod {
                key,
                found: other.map_or(0, <[String]>::len),
            }),
        };
        let (name, token_uid) = (one(POD_NAME_EXTRA)?, one(POD_UID_EXTRA)?);

        // The watch's view admits; only the API server's refuses.
        if let Some(seen) = self.seen.as_ref().and_then(|seen| seen.get(&name))
            && let Ok(node) = self.judge(&name, &token_uid, &seen).await
        {
            return Ok(node);
        }
        let pod = Api::<Pod>::namespaced(self.client.clone(), &self.namespace)
            .get_opt(&name)
            .await
            .map_err(|e| unavailable("reading the agent's pod", e))?
            .ok_or_else(|| PodTokenRefusal::PodGone { pod: name.clone() })?;
        self.judge(&name, &token_uid, &PodFacts::of(&pod)).await
    }

    /// The node of pod `name`, if `pod` is the pod the token was issued to (`token_uid`), alive,
    /// the run's agent, and bound to a node.
    async fn judge(
        &self,
        name: &str,
        token_uid: &str,
        pod: &PodFacts,
    ) -> Result<NodeName, AdmissionError> {
        let name = name.to_owned();
        if pod.uid != token_uid {
            return Err(PodTokenRefusal::PodReplaced {
                pod: name,
                uid: pod.uid.clone(),
                token_uid: token_uid.to_owned(),
            }
            .into());
        }
        if pod.terminating {
            return Err(PodTokenRefusal::PodTerminating { pod: name }.into());
        }
        if pod.run_id.as_ref() != Some(&self.run_id) {
            return Err(PodTokenRefusal::NotRunPod {
                pod: name,
                run_id: self.run_id.clone(),
            }
            .into());
        }
        let daemonset_uid = self.daemonset_uid().await?;
        let owned = pod.controller.as_ref().is_some_and(|(kind, owner, uid)| {
            kind == "DaemonSet" && owner == AGENT && daemonset_uid.as_deref() == Some(uid.as_str())
        });
        if !owned {
            return Err(PodTokenRefusal::NotDaemonSetPod {
                pod: name,
                daemonset_uid,
            }
            .into());
        }
        let node = pod
            .node_name
            .as_deref()
            .ok_or_else(|| PodTokenRefusal::NotScheduled { pod: name.clone() })?;
        NodeName::parse(node).map_err(|error| PodTokenRefusal::NodeName { pod: name, error }.into())
    }

    /// The run's agent DaemonSet's uid; `None` when there is no such DaemonSet of the run.
    async fn daemonset_uid(&self) -> Result<Option<String>, AdmissionError> {
        // One read for the first admissions that arrive together; only a uid is kept, so a
        // DaemonSet not there yet is read again next time.
        let read = self
            .daemonset_uid
            .get_or_try_init(|| async {
                let daemonset = Api::<DaemonSet>::namespaced(self.client.clone(), &self.namespace)
                    .get_opt(AGENT)
                    .await
                    .map_err(|e| Some(unavailable("reading the agent DaemonSet", e)))?;
                daemonset
                    .filter(|d| d.labels().get(RUN_LABEL) == Some(&self.run_id))
                    .and_then(|d| d.uid())
                    // None: the run has no such DaemonSet (yet).
                    .ok_or(None)
            })
            .await;
        match read {
            Ok(uid) => Ok(Some(uid.clone())),
            Err(Some(error)) => Err(error),
            Err(None) => Ok(None),
        }
    }
}

fn unavailable(what: &str, error: kube::Error) -> AdmissionError {
    AdmissionError::Unavailable(format!("{what}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, uid: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "uid": uid, "labels": {RUN_LABEL: "r1"}},
            "spec": {"containers": [], "nodeName": "node-1"},
        }))
        .unwrap()
    }

    #[test]
    fn a_deleted_pod_is_forgotten_but_not_its_successor_of_the_same_name() {
        let seen = SeenPods::default();
        seen.record(&pod("agent-x", "uid-1"));
        assert_eq!(
            seen.get("agent-x").unwrap().node_name.as_deref(),
            Some("node-1")
        );
        // The successor was seen before its predecessor's deletion arrived.
        seen.record(&pod("agent-x", "uid-2"));
        seen.forget("agent-x", "uid-1");
        assert_eq!(seen.get("agent-x").unwrap().uid, "uid-2");
        seen.forget("agent-x", "uid-2");
        assert!(seen.get("agent-x").is_none());
    }

    #[test]
    fn a_relisting_drops_the_pods_deleted_while_the_watch_was_down() {
        let seen = SeenPods::default();
        seen.record(&pod("kept", "uid-1"));
        seen.record(&pod("deleted", "uid-2"));
        seen.keep_only(&HashSet::from(["kept".to_owned()]));
        assert!(seen.get("kept").is_some());
        assert!(seen.get("deleted").is_none());
    }
}
