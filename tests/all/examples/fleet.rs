//! The fleet that the docs' examples show: three web servers (and a fourth that went away),
//! collected in October and in November 2026, with facts written here so that what the
//! examples print is the same on every machine. The plugins' definitions (which declare their
//! facts documents and list keys) are the real plugins', from a real run.

use std::path::Path;

use serde_json::{Value, json};

use crate::inspect::{bundle_of, fixture_journals, journalctl, real_bundle};
use crate::support::kube_runs::Bundle;

/// A collection of the fleet.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Month {
    /// 2026-10-27: web-1 to web-4 on Debian 12, kernel 6.1.0-18.
    October,
    /// 2026-11-27: web-4 gone, web-1 and web-3 on kernel 6.1.0-20, web-2 upgraded to Debian
    /// 13, web-3's setup timed out; web-1 and web-2 with journals.
    November,
}

/// One node's setup facts: a few of what Ansible's setup gathers.
fn setup(node: &str, version: &str, kernel: &str, mounts: &[&str]) -> Value {
    let mounts: Vec<Value> = mounts
        .iter()
        .map(|m| json!({"mount": m, "fstype": "ext4", "size_total": 21_474_836_480_u64}))
        .collect();
    json!({
        "ansible_hostname": node,
        "ansible_distribution": "Debian",
        "ansible_distribution_version": version,
        "ansible_kernel": kernel,
        "ansible_mounts": mounts,
        "ansible_memfree_mb": 1024,
        "ansible_date_time": {"epoch": "1795780800", "tz": "UTC"},
    })
}

/// One node's host facts.
fn host_facts(node: &str, cores: u32, kernel: &str) -> Value {
    json!({
        "hostname": node,
        "cpu": {"cores": cores},
        "kernel": {"release": kernel},
    })
}

/// The files of the fleet's bundle of `month` (without the index), as run `run_id`; `only`,
/// when given, keeps those nodes alone (a local run's bundle is of one node).
pub(super) fn files(
    month: Month,
    run_id: &str,
    created: &str,
    only: Option<&[&str]>,
) -> Vec<(String, Vec<u8>)> {
    let real = Bundle::read(real_bundle().0.to_owned()).files;
    let to = |v: &Value| serde_json::to_vec(v).unwrap();
    let mut run: Value = serde_json::from_slice(&real["meta/run.json"]).unwrap();
    run["run_id"] = json!(run_id);
    run["created"] = json!(created);

    let old = "6.1.0-18-amd64";
    let new = "6.1.0-20-amd64";
    let trixie = "6.12.57+deb13-amd64";
    // (node, setup facts or None where setup timed out, host facts, whether it has a journal)
    let nodes: Vec<(&str, Option<Value>, Value, bool)> = match month {
        Month::October => ["web-1", "web-2", "web-3", "web-4"]
            .into_iter()
            .map(|n| {
                let cores = if n == "web-2" { 64 } else { 2 };
                let facts = setup(n, "12.11", old, &["/", "/boot"]);
                (n, Some(facts), host_facts(n, cores, old), false)
            })
            .collect(),
        Month::November => vec![
            (
                "web-1",
                Some(setup("web-1", "12.11", new, &["/", "/boot"])),
                host_facts("web-1", 2, new),
                true,
            ),
            (
                "web-2",
                Some(setup("web-2", "13.1", trixie, &["/", "/boot", "/data"])),
                host_facts("web-2", 64, trixie),
                true,
            ),
            ("web-3", None, host_facts("web-3", 2, new), false),
        ],
    };
    let journals: Vec<Vec<u8>> = {
        let machines = tempfile::tempdir().unwrap();
        fixture_journals(machines.path())
            .iter()
            .map(|machine| {
                journalctl(machine, &[])
                    .iter()
                    .map(|entry| format!("{entry}\n"))
                    .collect::<String>()
                    .into_bytes()
            })
            .collect()
    };

    let mut files = Vec::new();
    let mut pairs = Vec::new();
    let mut journal = journals.iter();
    for (node, setup_facts, host, has_journal) in nodes {
        let journal = has_journal.then(|| journal.next().unwrap());
        if only.is_some_and(|kept| !kept.contains(&node)) {
            continue;
        }
        match setup_facts {
            Some(facts) => {
                let mut pair = json!({"plugin": "setup", "node": node, "status": "complete",
                                      "result_status": "passed"});
                if node == "web-1" {
                    pair["warnings"] = json!(["cannot read /etc/shadow: permission denied"]);
                }
                pairs.push(pair);
                files.push((
                    format!("plugins/setup/results/{node}/ansible_facts.json"),
                    to(&facts),
                ));
            }
            None => {
                // A pair without a passed result timed out: the aggregator's stand-in failed.
                pairs.push(
                    json!({"plugin": "setup", "node": node, "status": "timed-out",
                                  "result_status": "failed"}),
                );
                files.push((
                    format!("plugins/setup/errors/{node}/error.json"),
                    to(&json!({"error": "timed out after 300 s"})),
                ));
            }
        }
        pairs.push(
            json!({"plugin": "host-facts", "node": node, "status": "complete",
                          "result_status": "passed"}),
        );
        files.push((
            format!("plugins/host-facts/results/{node}/host-facts.json"),
            to(&host),
        ));
        if let Some(journal) = journal {
            pairs.push(
                json!({"plugin": "systemd-logs", "node": node, "status": "complete",
                              "result_status": "passed"}),
            );
            files.push((
                format!("plugins/systemd-logs/results/{node}/journal.jsonl"),
                journal.clone(),
            ));
        }
    }
    let status = json!({"run_id": run_id, "status": "complete", "plugins": pairs});
    let mut all = vec![
        ("meta/run.json".to_owned(), to(&run)),
        ("meta/status.json".to_owned(), to(&status)),
    ];
    for plugin in ["setup", "host-facts", "systemd-logs"] {
        let path = format!("plugins/{plugin}/definition.json");
        all.push((path.clone(), real[path.as_str()].clone()));
    }
    all.extend(files);
    all
}

/// [`files`] as the bundle `name` in `dir`.
pub(super) fn bundle(
    dir: &Path,
    name: &str,
    month: Month,
    run_id: &str,
    created: &str,
    only: Option<&[&str]>,
) -> std::path::PathBuf {
    let files = files(month, run_id, created, only);
    let files: Vec<(&str, Vec<u8>)> = files.iter().map(|(p, d)| (p.as_str(), d.clone())).collect();
    bundle_of(dir, name, &files)
}
