//! The aggregator's permissions, least privilege, each rule with the reason it exists
//! (docs/kubernetes.md lists them; a test keeps that table equal to [`rules_table`]). Agents get
//! no RBAC at all: they hold no API token.

use k8s_openapi::api::rbac::v1::PolicyRule;

use std::collections::BTreeMap;

use crate::names::{AGENT, AGGREGATOR, CA_CONFIG_MAP, SECRETS};
use crate::resources::{self, ResourceKind};

/// One permission and why the aggregator needs it.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The rule as the Role or ClusterRole carries it.
    pub rule: PolicyRule,
    /// Why it is there, for docs/kubernetes.md.
    pub reason: &'static str,
}

fn rule(
    group: &str,
    resources: &[&str],
    verbs: &[&str],
    names: &[&str],
    reason: &'static str,
) -> Rule {
    let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    Rule {
        rule: PolicyRule {
            api_groups: Some(vec![group.to_owned()]),
            resources: Some(strings(resources)),
            verbs: strings(verbs),
            resource_names: (!names.is_empty()).then(|| strings(names)),
            non_resource_urls: None,
        },
        reason,
    }
}

/// The aggregator's cluster-wide rules (its ClusterRole), for a run that saves `resources`
/// into the bundle: `list` on exactly those kinds, by API group.
pub fn cluster_rules(resources: &[&ResourceKind]) -> Vec<Rule> {
    let mut rules = vec![rule(
        "",
        &["nodes"],
        &["get", "list", "watch"],
        &[],
        "Expected nodes: a live watch of Nodes tells which nodes must report, which the node selector or untolerated taints skip, and which leave mid-run.",
    )];
    rules.push(rule(
        "",
        &["namespaces"],
        &["get"],
        &["kube-system"],
        "The cluster's identity in the bundle (`origin` in `meta/run.json`): the uid of namespace `kube-system`, so that a history of bundles never takes one cluster's nodes for another's.",
    ));
    let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for kind in resources.iter().filter(|k| k.name != "nodes") {
        groups.entry(kind.group).or_default().push(kind.name);
    }
    for (group, names) in groups {
        rules.push(rule(
            group,
            &names,
            &["list"],
            &[],
            "`resources/`: the kinds the run saves into the bundle (`--resources`; nodes come from the rule above, `/version` is open to every authenticated user).",
        ));
    }
    rules.push(rule(
        "authentication.k8s.io",
        &["tokenreviews"],
        &["create"],
        &[],
        "Agent admission: each agent's projected, audience-bound token is checked with a TokenReview before its node gets a certificate.",
    ));
    rules
}

/// The aggregator's rules in the run's namespace (its Role).
pub fn namespace_rules() -> Vec<Rule> {
    vec![
        rule(
            "",
            &["pods"],
            &["get", "list", "watch"],
            &[],
            "Agent admission finds the pod a token names (and its node); the pod watch turns unschedulable, unpullable or crashing agents into error results.",
        ),
        rule(
            "",
            &["pods"],
            &["patch"],
            &[AGGREGATOR],
            "The status annotation on the aggregator's own pod, and nothing else.",
        ),
        rule(
            "",
            &["pods/log", "events"],
            &["get", "list"],
            &[],
            "Error results quote a failing agent's events and last log lines.",
        ),
        rule(
            "apps",
            &["daemonsets"],
            &["get", "list", "watch", "delete"],
            &[AGENT],
            "Its agent DaemonSet's node selector and tolerations say which nodes are expected (watched by name until `run` has applied it); the run ends by deleting it, so finished agents neither linger nor restart.",
        ),
        rule(
            "",
            &["services"],
            &["get"],
            &[AGGREGATOR],
            "Its own Service's ClusterIP, which agents dial, goes into its certificate.",
        ),
        rule(
            "",
            &["configmaps"],
            &["create"],
            &[],
            "Publishes its CA certificate in ConfigMap `factbuoy-ca` (create cannot be limited by name).",
        ),
        rule(
            "",
            &["configmaps"],
            &["get", "update", "patch"],
            &[CA_CONFIG_MAP],
            "Replaces `factbuoy-ca` when it restarts with a new CA.",
        ),
    ]
}

/// The aggregator's one rule about Secrets, in the run's namespace, for a run with secret
/// parameters only: its own Secret, by name.
pub fn secrets_rule() -> Rule {
    rule(
        "",
        &["secrets"],
        &["get", "delete"],
        &[SECRETS],
        "Runs with secret parameters only: reads their values from `factbuoy-secrets` at its start, and deletes it when the run ends; no other Secret.",
    )
}

/// The rules of a run that saves the default resources, as a Markdown table (scope, API group,
/// resources, verbs, names, reason): what docs/kubernetes.md shows.
pub fn rules_table() -> String {
    let mut table = String::from(
        "| scope | API group | resources | verbs | names | why |\n|---|---|---|---|---|---|\n",
    );
    let scoped = cluster_rules(&resources::default_kinds())
        .into_iter()
        .map(|r| ("cluster", r))
        .chain(namespace_rules().into_iter().map(|r| ("run namespace", r)))
        .chain(std::iter::once(("run namespace", secrets_rule())));
    for (scope, Rule { rule, reason }) in scoped {
        let group = rule.api_groups.unwrap_or_default().join(",");
        table.push_str(&format!(
            "| {scope} | {} | {} | {} | {} | {reason} |\n",
            if group.is_empty() { "core" } else { &group },
            rule.resources.unwrap_or_default().join(", "),
            rule.verbs.join(", "),
            rule.resource_names
                .map(|n| n.join(", "))
                .unwrap_or_else(|| "any".to_owned()),
        ));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rule_is_a_wildcard_or_writes_widely() {
        let every_kind: Vec<_> = resources::KINDS.iter().collect();
        for Rule { rule, reason } in cluster_rules(&every_kind)
            .into_iter()
            .chain(namespace_rules())
        {
            assert!(!reason.is_empty());
            let everything = rule
                .verbs
                .iter()
                .chain(rule.resources.iter().flatten())
                .chain(rule.api_groups.iter().flatten());
            assert!(everything.into_iter().all(|s| s != "*"), "{rule:?}");
            let writes = rule
                .verbs
                .iter()
                .any(|v| matches!(v.as_str(), "update" | "patch" | "delete"));
            assert!(
                !writes || rule.resource_names.is_some(),
                "writes without names: {rule:?}"
            );
            for secret in ["secrets", "serviceaccounts/token"] {
                assert!(
                    !rule.resources.iter().flatten().any(|r| r == secret),
                    "{rule:?}"
                );
            }
        }
    }

    #[test]
    fn the_only_secret_the_aggregator_may_read_is_its_runs_by_name() {
        let rule = secrets_rule().rule;
        assert_eq!(rule.resources, Some(vec!["secrets".to_owned()]));
        assert_eq!(rule.resource_names, Some(vec![SECRETS.to_owned()]));
        assert_eq!(rule.verbs, ["get", "delete"]);
    }

    #[test]
    fn the_aggregator_may_list_exactly_the_kinds_the_run_saves() {
        let listed = |kinds: &[&str]| {
            let kinds: Vec<_> = kinds.iter().map(|k| resources::kind(k).unwrap()).collect();
            let mut listed: Vec<(String, String)> = cluster_rules(&kinds)
                .into_iter()
                .filter(|r| r.rule.verbs.iter().any(|v| v == "list"))
                .flat_map(|r| {
                    let group = r.rule.api_groups.unwrap()[0].clone();
                    r.rule
                        .resources
                        .unwrap()
                        .into_iter()
                        .map(move |resource| (group.clone(), resource))
                })
                .collect();
            listed.sort();
            listed
        };
        let pair = |g: &str, r: &str| (g.to_owned(), r.to_owned());
        assert_eq!(
            listed(&["namespaces"]),
            [pair("", "namespaces"), pair("", "nodes")]
        );
        assert_eq!(
            listed(&["pods", "daemonsets", "storageclasses"]),
            [
                pair("", "nodes"),
                pair("", "pods"),
                pair("apps", "daemonsets"),
                pair("storage.k8s.io", "storageclasses"),
            ]
        );
    }

    #[test]
    fn the_docs_list_every_rule_with_its_reason() {
        let docs = include_str!("../../../../docs/kubernetes.md");
        assert!(
            docs.contains(&rules_table()),
            "docs/kubernetes.md must contain this table, as is:\n{}",
            rules_table()
        );
    }
}
