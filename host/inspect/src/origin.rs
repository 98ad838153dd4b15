//! Where a bundle's nodes come from (`origin` in `meta/run.json`: a host, a Kubernetes cluster,
//! a fleet), named as a person knows it. `web-1` of one cluster and `web-1` of a fleet are two
//! machines, so the answers that read bundles of several origins keep each origin apart.

use serde::Serialize;
use serde_json::Value;

/// The origin of bundles that record none (an aggregator created separately, a Kubernetes run
/// that could not read `kube-system`, bundles older than origins).
pub const UNRECORDED: &str = "unrecorded";

/// An origin, as `--origin` takes it and in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NamedOrigin {
    /// `kind:id` (`fleet:9c1f…`, `kubernetes:<uid>`, `local:<host>`), or `unrecorded`.
    pub origin: String,
    /// Which fleet, cluster or host it is: "fleet fleet-a.example (CA sha-256 9c1f0e4b2a77…)",
    /// "Kubernetes cluster whose kube-system namespace has uid 3f2b…", "host web-1".
    pub label: String,
}

impl NamedOrigin {
    /// The origin a run's `run.json` records.
    pub fn of_run(run: &Value) -> NamedOrigin {
        match (run["origin"]["kind"].as_str(), run["origin"]["id"].as_str()) {
            (Some(kind), Some(id)) => NamedOrigin {
                origin: format!("{kind}:{id}"),
                label: label(kind, id, run),
            },
            _ => NamedOrigin::unrecorded(),
        }
    }

    /// The origin stored as `kind:id` (or `unrecorded`), named from `run`, a `run.json` of it
    /// when one could be read (a fleet's names are there, not in `kind:id`).
    pub fn of_stored(origin: &str, run: Option<&Value>) -> NamedOrigin {
        match origin.split_once(':') {
            Some((kind, id)) => NamedOrigin {
                origin: origin.to_owned(),
                label: label(kind, id, run.unwrap_or(&Value::Null)),
            },
            None => NamedOrigin::unrecorded(),
        }
    }

    fn unrecorded() -> NamedOrigin {
        NamedOrigin {
            origin: UNRECORDED.to_owned(),
            label: "runs that record no origin (an aggregator created on its own, or a factbuoy older than origins)"
                .to_owned(),
        }
    }
}

/// `kind`'s words for `id`; a fleet is named by the names its server answers to, which its
/// runs record, with its CA, which is what tells two fleets apart.
fn label(kind: &str, id: &str, run: &Value) -> String {
    match kind {
        "fleet" => {
            let names: Vec<&str> = run["server_names"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let ca = format!("CA sha-256 {}", short(id));
            if names.is_empty() {
                format!("fleet with {ca}")
            } else {
                format!("fleet {} ({ca})", names.join(", "))
            }
        }
        "kubernetes" => format!("Kubernetes cluster whose kube-system namespace has uid {id}"),
        "local" => format!("host {id} (factbuoy run on it)"),
        other => format!("{other} {id}"),
    }
}

/// The first 12 characters of a digest, enough to tell fleets apart by eye.
fn short(digest: &str) -> String {
    match digest.char_indices().nth(12) {
        Some((at, _)) => format!("{}…", &digest[..at]),
        None => digest.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_kind_is_named_as_a_person_knows_it() {
        let fleet = json!({"origin": {"kind": "fleet", "id": "9c1f0e4b2a77d00d5eed"},
                           "server_names": ["fleet-a.example", "10.0.0.5"]});
        assert_eq!(
            NamedOrigin::of_run(&fleet).label,
            "fleet fleet-a.example, 10.0.0.5 (CA sha-256 9c1f0e4b2a77…)"
        );
        let cluster = json!({"origin": {"kind": "kubernetes", "id": "3f2b-77"}});
        assert_eq!(
            NamedOrigin::of_run(&cluster),
            NamedOrigin {
                origin: "kubernetes:3f2b-77".into(),
                label: "Kubernetes cluster whose kube-system namespace has uid 3f2b-77".into()
            }
        );
        assert_eq!(NamedOrigin::of_run(&json!({})).origin, UNRECORDED);
        assert_eq!(
            NamedOrigin::of_stored("fleet:0123", None).label,
            "fleet with CA sha-256 0123"
        );
    }
}
