//! How a fleet run admits a node: the fleet hands each enrolled node, over its enrollment
//! certificate, a credential for one run (an HMAC of the run and the node under the fleet's
//! ticket key); the run's `POST /api/v1/enroll` checks it here, and that the node was not revoked
//! since. So a run certificate is signed only for a node whose enrollment certificate asked for
//! it, and the run need not know the fleet CA. A node revoked after it enrolled is refused at
//! every request it makes to the run from then on (plan, uploads, commits, heartbeats).

use std::future::ready;

use factbuoy_protocol::names::NodeName;
use ring::hmac;

use super::dir::FleetDir;
use super::registry;
use crate::enroll::{Admission, Admitting, NotAdmitted};

/// The credential of `node` for run `run_id`: `NODE.HEX`.
pub(crate) fn credential(key: &hmac::Key, run_id: &str, node: &NodeName) -> String {
    let tag = hmac::sign(key, message(run_id, node).as_bytes());
    format!("{node}.{}", hex::encode(tag.as_ref()))
}

fn message(run_id: &str, node: &NodeName) -> String {
    format!("factbuoy fleet run {run_id} node {node}")
}

/// The admission of one fleet run.
pub(crate) struct FleetAdmission {
    /// The fleet's ticket key.
    pub(crate) key: hmac::Key,
    /// The run.
    pub(crate) run_id: String,
    /// The fleet's directory, to see revocations.
    pub(crate) dir: FleetDir,
}

impl FleetAdmission {
    fn decide(&self, credential: &str) -> Result<NodeName, NotAdmitted> {
        let refused = || {
            NotAdmitted::Refused(format!(
                "this is not a credential of run {} (agents get theirs from the fleet with their enrollment certificate)",
                self.run_id
            ))
        };
        let (node, tag) = credential.rsplit_once('.').ok_or_else(refused)?;
        let node = NodeName::parse(node).map_err(|_| refused())?;
        let tag = hex::decode(tag).map_err(|_| refused())?;
        hmac::verify(&self.key, message(&self.run_id, &node).as_bytes(), &tag)
            .map_err(|_| refused())?;
        if let Some(why) = revoked(&self.dir, &node) {
            return Err(NotAdmitted::Refused(why));
        }
        Ok(node)
    }
}

/// What a revoked node is told, if `node` is revoked.
pub(crate) fn revoked(dir: &FleetDir, node: &NodeName) -> Option<String> {
    registry::is_revoked(dir, node).then(|| {
        format!(
            "node {node} was revoked (`factbuoy fleet revoke`); it must join again with a new token"
        )
    })
}

impl Admission for FleetAdmission {
    fn admit<'a>(&'a self, credential: &'a str) -> Admitting<'a> {
        Box::pin(ready(self.decide(credential)))
    }

    /// A node revoked since it enrolled: refused at its next request to the run.
    fn withdrawn(&self, node: &NodeName) -> Option<String> {
        revoked(&self.dir, node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_admits_its_node_for_its_run_only() {
        let temporary = tempfile::tempdir().unwrap();
        let key = hmac::Key::new(hmac::HMAC_SHA256, b"0123456789abcdef0123456789abcdef");
        let admission = |run: &str| FleetAdmission {
            key: key.clone(),
            run_id: run.into(),
            dir: FleetDir::new(temporary.path()),
        };
        let a = NodeName::parse("a").unwrap();
        let good = credential(&key, "run1", &a);
        assert_eq!(admission("run1").decide(&good), Ok(a.clone()));
        // Another run, another node's name on a's tag, a changed tag, no tag.
        assert!(admission("run2").decide(&good).is_err());
        let tag = good.rsplit_once('.').unwrap().1;
        assert!(admission("run1").decide(&format!("b.{tag}")).is_err());
        assert!(
            admission("run1")
                .decide(&format!("a.{}", "0".repeat(64)))
                .is_err()
        );
        assert!(admission("run1").decide("a").is_err());
        registry::revoke(&FleetDir::new(temporary.path()), &a).unwrap();
        let refusal = admission("run1").decide(&good).unwrap_err();
        assert!(refusal.to_string().contains("revoked"), "{refusal}");
    }
}
